"""One cgroup per submission: the sandbox's processes, together, under one memory, pids and CPU limit.

sandbox.execute makes a cgroup for each run, puts bubblewrap in it before it
starts (so the runner, the kernel and every process they fork are in it, and
every page they touch, their in-memory /tmp included, is charged to it), reads
its peak memory and out-of-memory kills when the run ends, kills whatever is
still in it and removes it.

Where it is made:

- cgroup v2 (/sys/fs/cgroup is a cgroup2 mount, the unified hierarchy): a child of
  SERVELAB_CGROUP_ROOT when set (a delegated subtree, for example a systemd scope
  with Delegate=yes), else of the grader's own cgroup; memory, pids and cpu must be
  in that parent's cgroup.subtree_control (they are enabled there when the grader
  may). Limits: memory.max, memory.swap.max 0, pids.max, cpu.max; peak: memory.peak.
- cgroup v1 (one hierarchy per controller, /sys/fs/cgroup/<controller>/): a child of
  the grader's own cgroup in each of memory, pids and cpu. Limits:
  memory.limit_in_bytes (and memory.memsw.limit_in_bytes, so swap adds nothing),
  pids.max, cpu.cfs_quota_us; peak: memory.max_usage_in_bytes.
- neither writable (a grader that is not root, a v2 subtree not delegated): `plan()`
  says why. SERVELAB_CGROUP=required makes that a refusal (sandbox.check raises
  SandboxUnavailable with the reason); the default falls back to the per-process
  limits alone (sandbox.LIMITS and KERNEL_LIMITS, and /tmp's own size), and the
  pipeline says so once in its log and in each report's execution record.
"""

from __future__ import annotations

import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(os.environ.get("SERVELAB_CGROUP_FS", "/sys/fs/cgroup"))
CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "servelab-sandbox-"
SWEEP_AFTER_S = 3600  # a dead grader's empty cgroup older than this is removed by the next grader
_counter = itertools.count()


class CgroupUnavailable(RuntimeError):
    """No cgroup can be made for a submission here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int  # every page the sandbox's processes touch, its /tmp included
    pids: int  # processes and threads at once
    cpus: float  # CPU time per wall second


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """controller -> the grader's own cgroup path, from /proc/self/cgroup ("" for the v2 line)."""
    paths = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for name in parts[1].split(",") if parts[1] else [""]:
            paths[name] = parts[2]
    return paths


def _is_cgroup2(path: Path) -> bool:
    try:
        return (path / "cgroup.controllers").exists() and not (path / "memory" / "tasks").exists()
    except OSError:
        return False


def version(root: Path | None = None) -> int | None:
    """2 for a unified hierarchy at `root`, 1 where the v1 controllers are mounted there, None otherwise."""
    root = root or ROOT
    if _is_cgroup2(root):
        return 2
    if all((root / c / "cgroup.procs").exists() for c in CONTROLLERS):
        return 1
    return None


def plan(root: Path | None = None, proc_cgroup: str | None = None) -> tuple[int, dict[str, Path]]:
    """(version, controller -> the folder a submission's cgroup is made in), or CgroupUnavailable saying why."""
    root = root or ROOT
    if proc_cgroup is None:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    own = _own_paths(proc_cgroup)
    v = version(root)
    if v == 2:
        named = os.environ.get("SERVELAB_CGROUP_ROOT")
        parent = Path(named) if named else root / own.get("", "/").lstrip("/")
        if not os.access(parent, os.W_OK):
            raise CgroupUnavailable(
                f"cgroup v2: {parent} is not writable by this user, so no cgroup can be made for a submission; "
                "grade as root, or in a delegated subtree (systemd-run --scope -p Delegate=yes, or "
                "SERVELAB_CGROUP_ROOT=<a cgroup this user owns>)"
            )
        try:
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
        except OSError as exc:
            raise CgroupUnavailable(f"cgroup v2: {parent} is not a cgroup ({exc.strerror})") from None
        missing = [c for c in CONTROLLERS if c not in enabled]
        if missing:
            try:
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
            except OSError as exc:
                raise CgroupUnavailable(
                    f"cgroup v2: {parent} does not pass {', '.join(missing)} to its children ({exc.strerror}); "
                    "delegate them (a cgroup with no processes of its own, memory pids cpu in "
                    "cgroup.subtree_control) and name it with SERVELAB_CGROUP_ROOT"
                ) from None
        return 2, {c: parent for c in CONTROLLERS}
    if v == 1:
        parents = {c: root / c / own.get(c, "/").lstrip("/") for c in CONTROLLERS}
        blocked = [str(p) for p in parents.values() if not os.access(p, os.W_OK)]
        if blocked:
            raise CgroupUnavailable(
                f"cgroup v1: {', '.join(blocked)} not writable by this user, so no cgroup can be made for a "
                "submission; grade as root (or give the grader's user those folders)"
            )
        return 1, parents
    raise CgroupUnavailable(
        f"no cgroup hierarchy with {', '.join(CONTROLLERS)} at {root} (neither a cgroup v2 mount nor the v1 "
        "controllers)"
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Cgroup:
    """One submission's cgroup: made with its limits, joined by the sandbox before it starts, removed after."""

    def __init__(self, limits: Limits, root: Path | None = None, proc_cgroup: str | None = None):
        self.limits = limits
        self.version, parents = plan(root, proc_cgroup)
        _sweep(parents)
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        self.paths = {c: p / name for c, p in parents.items()}
        self.closed = False
        made = []
        try:
            for path in dict.fromkeys(self.paths.values()):
                path.mkdir()
                made.append(path)
            self._set_limits()
        except OSError as exc:
            for path in reversed(made):
                try:
                    path.rmdir()
                except OSError:
                    pass
            raise CgroupUnavailable(f"a submission's cgroup could not be made ({exc}); grade as root") from None

    def _write(self, controller: str, name: str, value: str) -> None:
        (self.paths[controller] / name).write_text(value)

    def _set_limits(self) -> None:
        memory, pids = str(self.limits.memory_bytes), str(self.limits.pids)
        period = 100_000
        quota = str(max(1000, int(self.limits.cpus * period)))
        if self.version == 2:
            self._write("memory", "memory.max", memory)
            if (self.paths["memory"] / "memory.swap.max").exists():
                self._write("memory", "memory.swap.max", "0")
            self._write("pids", "pids.max", pids)
            self._write("cpu", "cpu.max", f"{quota} {period}")
        else:
            self._write("memory", "memory.limit_in_bytes", memory)
            if (self.paths["memory"] / "memory.memsw.limit_in_bytes").exists():
                self._write("memory", "memory.memsw.limit_in_bytes", memory)
            self._write("pids", "pids.max", pids)
            self._write("cpu", "cpu.cfs_period_us", str(period))
            self._write("cpu", "cpu.cfs_quota_us", quota)

    def enter(self) -> None:
        """Put the calling process in this cgroup (a child between fork and exec: the sandbox's first process)."""
        pid = str(os.getpid())
        for path in dict.fromkeys(self.paths.values()):
            with open(path / "cgroup.procs", "w") as f:
                f.write(pid)

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.paths[controller] / name).read_text()
        except OSError:
            return ""

    def peak_memory(self) -> int:
        """The most memory the cgroup held at once since it was made, in bytes (0 where the kernel does not say)."""
        text = self._read("memory", "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes")
        return int(text.split()[0]) if text.strip().isdigit() else 0

    def peak_pids(self) -> int:
        text = self._read("pids", "pids.peak").strip()
        return int(text) if text.isdigit() else 0

    def oom_kills(self) -> int:
        """Processes the kernel's out-of-memory killer stopped in this cgroup."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for line in self._read("memory", name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def failed_allocations(self) -> int:
        """How often the memory limit was hit (v1 failcnt; v2: memory.events 'max')."""
        if self.version == 2:
            for line in self._read("memory", "memory.events").splitlines():
                key, _, value = line.partition(" ")
                if key == "max" and value.strip().isdigit():
                    return int(value)
            return 0
        text = self._read("memory", "memory.failcnt").strip()
        return int(text) if text.isdigit() else 0

    def pids(self) -> list[int]:
        """Every process in this cgroup or one made inside it (a sandbox's, inside a grading step's)."""
        found = []
        for path in self._tree(self.paths["pids"]):
            try:
                found += [int(p) for p in (path / "cgroup.procs").read_text().split() if p.isdigit()]
            except OSError:
                pass
        return found

    @staticmethod
    def _tree(path: Path) -> list[Path]:
        """`path` and the cgroups inside it, deepest first (the order they can be removed in)."""
        try:
            inside = [p for p in path.rglob("*") if p.is_dir()]
        except OSError:
            inside = []
        return sorted(inside, key=lambda p: -len(p.parts)) + [path]

    def close(self, deadline_s: float = 10.0) -> None:
        """Kill every process still in the cgroup, then remove it (each controller's folder); once."""
        if self.closed:
            return
        self.closed = True
        end = time.monotonic() + deadline_s
        kill = self.paths["pids"] / "cgroup.kill"
        while time.monotonic() < end:
            left = self.pids()
            if not left:
                break
            if self.version == 2 and kill.exists():
                try:
                    kill.write_text("1")
                except OSError:
                    pass
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)  # the kernel reaps a killed process asynchronously; rmdir needs it gone
        for path in [p for top in dict.fromkeys(self.paths.values()) for p in self._tree(top)]:
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY until the last killed process has left
                    if time.monotonic() > end:
                        break  # left for the next grader's sweep (_sweep) once this grader's pid is gone
                    time.sleep(0.05)


def _sweep(parents: dict[str, Path]) -> None:
    """Remove the empty cgroups of graders that died before removing their own (their pid is gone)."""
    for parent in dict.fromkeys(parents.values()):
        try:
            names = [p for p in parent.iterdir() if p.name.startswith(PREFIX)]
        except OSError:
            continue
        for path in names:
            pid = path.name[len(PREFIX) :].split("-", 1)[0]
            try:  # an hour old at least: a grader in another PID namespace may look dead from here
                stale = time.time() - path.stat().st_mtime > SWEEP_AFTER_S
            except OSError:
                continue
            if stale and pid.isdigit() and not _pid_alive(int(pid)):
                try:
                    path.rmdir()
                except OSError:  # it still holds processes, or another grader removed it first
                    pass
