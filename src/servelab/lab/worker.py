"""One background thread with a one-request slot: the latest request wins.

A click on Measure puts a request in the slot, replacing any request still
waiting there, and tells the request being run that it is stale. The running
request checks `stale()` between points and stops early, so at most one point
(a few seconds) is spent on a setting the learner has already left. Nothing
queues up, however fast the clicks come.

The job function gets (request, stale) and runs in the worker thread; an
exception it raises is handed to on_error, never to the notebook.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class LatestRequestWorker:
    def __init__(
        self,
        job: Callable[[Any, Callable[[], bool]], None],
        on_error: Callable[[Any, BaseException], None] | None = None,
        name: str = "servelab-lab-worker",
    ):
        self.job = job
        self.on_error = on_error
        self.name = name
        self._cond = threading.Condition()
        self._pending: Any = None
        self._has_pending = False
        self._running: Any = None
        self._generation = 0  # grows with every submit: a running request compares its own against it
        self._thread: threading.Thread | None = None
        self._closed = False
        self.started = 0  # requests that began running
        self.finished = 0  # requests that ran to their end (stopped early or not)

    # --- the caller's side ----------------------------------------------------------
    def submit(self, request: Any) -> None:
        """Put request in the slot (replacing a waiting one); the running one is told it is stale."""
        with self._cond:
            if self._closed:
                raise RuntimeError("The lab's worker is closed; build a new lab to measure again.")
            self._pending, self._has_pending = request, True
            self._generation += 1
            self._ensure_thread()
            self._cond.notify_all()

    def cancel(self) -> None:
        """Drop the waiting request and tell the running one to stop after its current point."""
        with self._cond:
            self._pending, self._has_pending = None, False
            self._generation += 1
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._running is not None or self._has_pending

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing runs or waits (tests, the benchmark); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._running is None and not self._has_pending, timeout)

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            self._pending, self._has_pending = None, False
            self._generation += 1
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # --- the worker thread ---------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._has_pending or self._closed)
                if self._closed:
                    return
                request, generation = self._pending, self._generation
                self._pending, self._has_pending = None, False
                self._running = request
                self.started += 1

            def stale(generation=generation) -> bool:
                with self._cond:
                    return self._closed or self._generation != generation

            try:
                self.job(request, stale)
            except BaseException as exc:  # noqa: BLE001 - a failed run must not kill the worker
                if self.on_error is not None:
                    try:
                        self.on_error(request, exc)
                    except Exception:  # noqa: BLE001 an error handler that fails must not stop the worker
                        pass
            finally:
                with self._cond:
                    self._running = None
                    self.finished += 1
                    self._cond.notify_all()
