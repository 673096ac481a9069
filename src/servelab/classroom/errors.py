"""The one error a class command reports: what is missing or wrong, and what to do."""

from __future__ import annotations

import socket


class ClassError(RuntimeError):
    """A piece of the class cannot start; the message says which and what to do."""


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def require_port(port: int, what: str, option: str) -> None:
    if not port_free(port):
        raise ClassError(
            f"Port {port} on 127.0.0.1 is taken, so the {what} cannot listen there: "
            f"stop whatever holds it (ss -ltnp 'sport = :{port}') or choose another with {option}."
        )
