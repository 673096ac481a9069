"""How much of the machine a measurement actually got, and which machine took it.

A CPU point is only as good as the cores the engine had while it ran. Every
point records, next to its timings:

- the CPU time the engine's processes (its process group, plus the measuring
  process) used, against the wall time of the point;
- what every other process used in the same interval (from /proc/stat's
  busy time, minus ours), as a share of the machine's cores;
- the share of the interval the hypervisor took away (steal time);
- the 1-minute load average before and after (it lags: reported, never judged).

The rule (contended()): a point is contended when other processes used more
than OTHERS_MAX of the cores the engine may use, or steal took more than
STEAL_MAX of the interval. vLLM's CPU engine runs its model on every core it
is given (servelab.engine: one OpenMP thread per core), and each step waits at
a barrier for its slowest thread, so a core that another process holds for a
quarter of the time slows every step by about that much or more: more than the
differences the lab sets side by side near the crossover (tens of percent).
A busy machine does not make a point wrong to keep, only wrong to compare: the
lab draws a contended point apart, leaves it out of the fit, and lets the
learner drop it.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OTHERS_MAX = 0.25  # other processes' CPU, as a share of the engine's cores, above which a point is contended
STEAL_MAX = 0.10  # the hypervisor's steal, as a share of the interval's CPU time, above which it is contended
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_fingerprint(hardware: str, cores: int) -> str:
    """Which machine measured a record: its CPU, the cores the engine used, and a hash of its host name.

    The hash tells two machines apart without publishing the host's name."""
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12]
    return f"{hardware or 'unknown CPU'}; {cores} cores; host {host}"


def _proc_stat(root: Path) -> tuple[float, float, float]:
    """(busy, steal, total) CPU seconds of the whole machine since boot, from /proc/stat's cpu line."""
    try:
        fields = (root / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0.0, 0.0, 0.0
    ticks = [int(x) for x in fields[1:]]
    ticks += [0] * (8 - len(ticks))
    user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
    busy = user + nice + system + irq + softirq
    return busy / _TICK, steal / _TICK, (busy + idle + iowait + steal) / _TICK


def _group_cpu_s(root: Path, pgid: int | None) -> float:
    """CPU seconds (user + system) of every process in a process group, and of this process."""
    total = 0.0
    me = os.getpid()
    for entry in root.iterdir() if root.exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = raw[raw.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        pid, pgrp = int(entry.name), int(fields[2])
        if pid == me or (pgid is not None and pgrp == pgid):
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    return total


@dataclass(frozen=True)
class Snapshot:
    wall: float
    ours_cpu_s: float
    busy_s: float
    steal_s: float
    total_s: float
    load: float


def snapshot(pgid: int | None, root: Path = Path("/proc")) -> Snapshot:
    busy, steal, total = _proc_stat(root)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return Snapshot(time.monotonic(), _group_cpu_s(root, pgid), busy, steal, total, load)


def usage(before: Snapshot, after: Snapshot, engine_cores: int, machine_cores: int | None = None) -> dict:
    """What the engine got between two snapshots, and whether that makes the point contended."""
    wall = max(after.wall - before.wall, 1e-9)
    cores = max(machine_cores or os.cpu_count() or 1, 1)
    ours = max(after.ours_cpu_s - before.ours_cpu_s, 0.0)
    busy = max(after.busy_s - before.busy_s, 0.0)
    total = after.total_s - before.total_s
    others = max(busy - ours, 0.0)
    steal = max(after.steal_s - before.steal_s, 0.0)
    record: dict[str, Any] = {
        "wall_s": round(wall, 3),
        "engine_cpu_s": round(ours, 3),
        "engine_cores": engine_cores,
        "engine_share": round(ours / (wall * max(engine_cores, 1)), 3),  # of the cores it was given
        "others_cores": round(others / wall, 3),  # other processes' CPU, in cores' worth
        "steal_share": round(steal / total, 4) if total > 0 else 0.0,
        "load_before": round(before.load, 2),
        "load_after": round(after.load, 2),
        "machine_cores": cores,
    }
    record["contended"], record["contention"] = contended(record)
    return record


def contended(u: dict) -> tuple[bool, str]:
    """(contended, why) for a record's cpu_usage: the rule in this module's docstring."""
    if not u:
        return False, ""
    reasons = []
    engine_cores = max(int(u.get("engine_cores") or 1), 1)
    others = float(u.get("others_cores") or 0.0)
    if others > OTHERS_MAX * engine_cores:
        reasons.append(f"other processes used {others:.1f} cores' worth of CPU while it ran on {engine_cores}")
    steal = float(u.get("steal_share") or 0.0)
    if steal > STEAL_MAX:
        reasons.append(f"the hypervisor took {steal:.0%} of the CPU time (steal)")
    if not reasons:
        return False, ""
    load = u.get("load_before")
    tail = f" (load average {load:g} before it)" if isinstance(load, (int, float)) else ""
    return True, " and ".join(reasons) + tail


def is_contended(record: dict) -> bool:
    return bool((record.get("cpu_usage") or {}).get("contended"))
