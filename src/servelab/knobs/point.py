"""One point, end to end: settings resolved to a plan -> a warm server -> vLLM's benchmark -> one record,
stored the moment it exists.
"""

from __future__ import annotations

from .plan import Plan
from .pool import ServerPool
from .records import machine_info, to_measurement
from .runner import BenchRunner


def measure(plan: Plan, pool: ServerPool, runner: BenchRunner, info: dict | None = None, store=None, on_wait=None):
    """One point: a warm (or started) server, vLLM's benchmark against it, one stored Measurement."""
    server = pool.get(plan, on_wait)
    info = dict(info or machine_info(pool.model))
    info["start_s"] = server.ready_s
    run = runner.run(plan, server.url, pool.model)
    record = to_measurement(plan, run, info)
    if store is not None:
        store.append(record)
    return record
