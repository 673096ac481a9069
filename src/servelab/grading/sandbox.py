"""Run a submission's notebook in an OS sandbox (bubblewrap); only plain values come back.

The grader's own process calls `execute(nb)`. Inside bubblewrap, with its own
mount, PID, IPC, UTS and network namespaces, an unprivileged user
(uid 65534 in a user namespace; as root, a host uid of the grader's own) and no new privileges, runner.py executes the notebook with
nbclient, the kernel beside it. The sandbox sees:

- read-only: /usr (and /lib, /bin), the Python environment (this venv and its
  base Python), the servelab package (of servelab.grading only the capture and
  the runner) and the project's data/ folder (the course material a learner has anyway);
- writable: an empty /tmp, in memory and TMP_BYTES in size, which is also the notebook's
  working folder;
- nothing else: not the course directory, the gradebook, solutions/, grading/
  (keys), other submissions, home directories, the host's processes or network
  (its loopback is its own; the kernel's sockets live there).

One thing crosses back, read by the grader with a size cap: the runner's stdout,
one JSON line per executed cell with its outputs and, for a test cell, the answer
its hidden test handed over (runner.py, capture.py). Resource limits apply to every process in
the sandbox (LIMITS) and to the kernel (KERNEL_LIMITS), and to all of them together: the run
is one cgroup (cgroup.py) whose memory (every page its processes touch, /tmp's included),
process count and CPU share are CGROUP_LIMITS; the cgroup is made before bubblewrap starts
and removed, with anything still in it killed, when the run ends. The whole run is killed
at `run_timeout`, keeping what it reported before.

Where bubblewrap cannot run (not installed, user namespaces off), `check()`
raises SandboxUnavailable naming the fix; grading then refuses untrusted
submissions unless the instructor says they are trusted (`--trusted`), and
`execute(..., trusted=True)` runs the same runner without the sandbox.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import servelab
from servelab.grading import cgroup
from servelab.paths import REPO_DIR

# The grading time limits, the one place they are set: SandboxedExecute's defaults (a bare `nbgrader
# autograde` with grading/nbgrader_config.py), the pipeline's and the parallel graders' command lines.
CELL_TIMEOUT_S = 30  # per cell while grading; an infinite loop costs this much, then the cell is marked wrong
SUBMISSION_TIMEOUT_S = 300  # per submission's run in the sandbox; past it the run stops, answers captured so far count
SANDBOX_UID = 65534  # nobody, inside the user namespace an unprivileged grader makes
# As root there is no user namespace: the runner becomes a uid on the host, one of its own per
# grader (this base + the grader's pid), because the process limit counts every process of a uid,
# and a shared uid let one sandbox's fork bomb (or another grader's load) starve the next kernel.
ROOT_SANDBOX_UID_BASE = 1_000_000_000
SANDBOX_GRADING_FILES = ("__init__.py", "capture.py", "runner.py")  # all of servelab.grading a sandbox holds
MAX_REPORT_BYTES = 64_000_000  # the runner's report of every cell (outputs are cut per cell before this)
MAX_LOG_BYTES = 20_000  # stderr kept for the grader's log
NPROC_MARGIN = 64  # processes (threads count too) the sandbox may start
# The sandbox's /tmp: the kernelspec, IPython's and matplotlib's folders and what a cell writes there.
# Its pages count in the cgroup's memory too; past this size a write fails with "No space left".
TMP_BYTES = 128 * 2**20
# One submission's processes together: the runner, the kernel, every child and /tmp. A graded run of a
# lesson peaks near 200 MiB (measured: grading/README.md); the rest is room for a cell's own data.
CGROUP_LIMITS = cgroup.Limits(memory_bytes=1 * 2**30, pids=128, cpus=1.0)
LIMITS = {  # every process in the sandbox
    "RLIMIT_FSIZE": 64 * 2**20,  # bytes one file may reach
    "RLIMIT_NOFILE": 512,
    "RLIMIT_CORE": 0,
    "RLIMIT_AS": 6 * 2**30,  # the runner holds one cell's outputs while it parses them
}
KERNEL_LIMITS = {  # the kernel, on top of LIMITS
    "RLIMIT_AS": 3 * 2**30,  # address space: a memory blow-up is a MemoryError or the kernel's death
    "RLIMIT_CPU": 240,  # CPU seconds for the whole notebook
}
NAMESPACE_HINT = (
    "Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
    "kernel.apparmor_restrict_unprivileged_userns=0), or grade as root. If every submission comes "
    "from a trusted source, pass --trusted to grade without the sandbox."
)
INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; `make sandbox-deps` does it), "
    "and allow user namespaces where they are off (sysctl kernel.unprivileged_userns_clone=1). "
    "If every submission comes from a trusted source, pass --trusted to grade without the sandbox."
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot make the sandbox on this machine."""


@dataclass
class Execution:
    """What came back from one run: each executed cell, each captured answer, how the run ended."""

    cells: dict = field(default_factory=dict)  # cell index -> {"outputs", "execution_count", "error"}
    answers: dict = field(default_factory=dict)  # cell index -> JSON text, or "!reason" when not plain
    status: str = "ok"  # ok | kernel died | timed out | stopped | output too large | did not start
    detail: str = ""
    seconds: float = 0.0
    sandboxed: bool = True
    log: str = ""
    limits: str = ""  # what bounded the run's processes together (the cgroup), or why nothing did
    peak_memory: int = 0  # bytes: the cgroup's peak (its /tmp included); 0 without a cgroup
    peak_pids: int = 0
    memory_limit_hit: bool = False  # the kernel's out-of-memory killer stopped a process of the run


def _bwrap() -> str | None:
    """The bubblewrap binary: SERVELAB_BWRAP when set, else bwrap on PATH or in /usr/bin."""
    if "SERVELAB_BWRAP" in os.environ:
        path = os.environ["SERVELAB_BWRAP"]
        return path if os.access(path, os.X_OK) else None
    return shutil.which("bwrap") or (os.path.exists("/usr/bin/bwrap") and "/usr/bin/bwrap") or None


def bwrap_version(missing: str = "not installed") -> str:
    """What `bwrap --version` prints (results record the sandbox they graded in)."""
    try:
        return subprocess.run([_bwrap() or "bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return missing


def _package() -> Path:
    """The servelab package the sandbox mounts: the class's student install where the hub names it."""
    return Path(os.environ.get("SERVELAB_SANDBOX_PACKAGE") or Path(servelab.__file__).resolve().parent)


def _ro_paths() -> list[tuple[str, str]]:
    """(source, destination) pairs the sandbox sees read-only."""
    paths = [("/usr", "/usr")]
    for prefix in {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)}:
        if not prefix.startswith("/usr/") and prefix != "/usr":
            paths.append((prefix, prefix))
    # Site folders a .pth file adds from elsewhere (a class's instructors' venv reads this checkout venv's).
    for folder in sys.path:
        if folder.endswith("site-packages") and os.path.isdir(folder):
            if not any(folder == src or folder.startswith(src + "/") for src, _ in paths):
                paths.append((folder, folder))
    package = _package()
    paths.append((str(package), f"/opt/servelab/src/{package.name}"))
    data = REPO_DIR / "data"
    if data.is_dir():
        paths.append((str(data), "/opt/servelab/data"))
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/ssl/certs"):
        if os.path.exists(etc):
            paths.append((etc, etc))
    return paths


def command(inner: list[str]) -> list[str]:
    """The bubblewrap command line that runs `inner` in the sandbox."""
    # The in-memory /tmp, /proc and /dev come first: bubblewrap applies its options in order, and
    # a tmpfs mounted after the binds would hide every bound path under /tmp (a checkout or a
    # Python environment there).
    cmd = [_bwrap() or "bwrap", "--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    binds = _ro_paths()
    # Folders above each bound path, made readable: bubblewrap would copy a host folder's
    # mode (/root is 0700), and the sandbox's user could not reach the Python inside it.
    above = {str(p) for _, dest in binds for p in Path(dest).parents if str(p) != "/"}
    for folder in sorted(above, key=lambda p: p.count("/")):
        cmd += ["--perms", "0755", "--dir", folder]
    for src, dest in binds:
        cmd += ["--ro-bind", src, dest]
    # Of the grading package the sandbox sees only what runs there: the instructor's lesson
    # builder holds the model answers, and nothing else in it is for a submission's eyes.
    package = _package()
    inside = f"/opt/servelab/src/{package.name}/grading"
    cmd += ["--size", str(2**20), "--tmpfs", inside]
    for name in SANDBOX_GRADING_FILES:
        cmd += ["--ro-bind", str(package / "grading" / name), f"{inside}/{name}"]
    for name in ("lib", "lib64", "bin", "sbin"):
        if os.path.islink(f"/{name}"):
            cmd += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
        elif os.path.isdir(f"/{name}"):
            cmd += ["--ro-bind", f"/{name}", f"/{name}"]
    cmd += [
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        "/tmp",
    ]
    if os.geteuid() == 0:
        # As root, the runner itself becomes sandbox_uid() on the host (not only inside a user
        # namespace), a uid no other process has, so the process limit counts this sandbox alone.
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    return cmd + ["--"] + inner


def _environment(cell_timeout: int, sandboxed: bool) -> dict:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "IPYTHONDIR": "/tmp/ipython",
        "MPLCONFIGDIR": "/tmp/mpl",
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
        "JUPYTER_CONFIG_DIR": "/tmp/jupyter-config",
        "JUPYTER_DATA_DIR": "/tmp/jupyter-data",
        "JUPYTER_PLATFORM_DIRS": "1",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NBGRADER_EXECUTION": "autograde",
        "SERVELAB_OFFLINE": "1",
        "SERVELAB_CELL_TIMEOUT": str(cell_timeout),
        "SERVELAB_KERNEL_LIMITS": json.dumps(KERNEL_LIMITS),
    }
    if sandboxed:
        env["PYTHONPATH"] = "/opt/servelab/src"
        env["SERVELAB_SANDBOX_UID"] = str(sandbox_uid())
    else:
        env["PYTHONPATH"] = str(Path(servelab.__file__).resolve().parent.parent)
        env["SERVELAB_CACHE"] = env["HOME"] = env["TMPDIR"]  # replaced by a scratch folder in execute()
    return env


def sandbox_uid() -> int:
    """The uid the notebook runs as: SANDBOX_UID in a user namespace, or as root a host uid of this grader's own."""
    return ROOT_SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else SANDBOX_UID


def _limits(nproc: int, group: cgroup.Cgroup | None = None):
    def apply() -> None:
        if group is not None:  # before anything of the sandbox runs: bubblewrap and all it starts are inside
            group.enter()
        for name, value in LIMITS.items():
            resource.setrlimit(getattr(resource, name), (value, value))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return apply


def _nproc_limit() -> int:
    """Root: the sandbox runs as a uid of its own (sandbox_uid), so its own count. Otherwise: this user's
    processes plus the margin."""
    if os.geteuid() == 0:
        return NPROC_MARGIN
    uid = os.geteuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count + NPROC_MARGIN


CGROUP_MODE = "SERVELAB_CGROUP"  # "required": refuse to grade where no cgroup can be made; default: fall back


def cgroup_required() -> bool:
    return os.environ.get(CGROUP_MODE, "") == "required"


def limits_in_force() -> str:
    """What bounds one submission's processes together here: the cgroup's limits, or why there is none (and the
    fallback). SandboxUnavailable where no cgroup can be made and SERVELAB_CGROUP=required."""
    try:
        version, parents = cgroup.plan()
    except cgroup.CgroupUnavailable as exc:
        if cgroup_required():
            raise SandboxUnavailable(f"{exc} ({CGROUP_MODE}=required).") from None
        return (
            f"no cgroup per submission ({exc}): each sandbox process is bounded on its own "
            f"({LIMITS['RLIMIT_AS'] >> 30} GiB of address space, {KERNEL_LIMITS['RLIMIT_AS'] >> 30} GiB for the "
            f"kernel, {NPROC_MARGIN} processes) and /tmp by its size ({TMP_BYTES >> 20} MiB), not their sum; "
            f"set {CGROUP_MODE}=required to refuse instead"
        )
    return _describe(version)


def _describe(version: int) -> str:
    lim = CGROUP_LIMITS
    return (
        f"cgroup v{version} per submission: {lim.memory_bytes >> 20} MiB of memory (its {TMP_BYTES >> 20} MiB /tmp "
        f"included), {lim.pids} processes, {lim.cpus:g} CPU"
    )


def _cgroup() -> tuple[cgroup.Cgroup | None, str]:
    """A fresh cgroup for one run and its description, or None and the fallback (limits_in_force says it)."""
    try:
        group = cgroup.Cgroup(CGROUP_LIMITS)
    except cgroup.CgroupUnavailable:
        return None, limits_in_force()
    return group, _describe(group.version)


_checked: set = set()


def check() -> None:
    """Raise SandboxUnavailable (with the fix) unless bubblewrap can make the sandbox here (and, with
    SERVELAB_CGROUP=required, a cgroup per submission)."""
    limits_in_force()
    if _bwrap() in _checked:
        return
    if not _bwrap():
        raise SandboxUnavailable(
            f"bubblewrap (bwrap) is not installed, so submissions cannot run in the sandbox. {INSTALL_HINT}"
        )
    probe = command([sys.executable, "-c", "import nbclient, ipykernel, servelab.grading.runner; print('ok')"])
    env = _environment(5, True)
    try:
        result = subprocess.run(
            probe, capture_output=True, text=True, timeout=60, env=env, preexec_fn=_limits(_nproc_limit())
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap could not start ({exc}). {INSTALL_HINT}") from None
    if result.returncode != 0 or result.stdout.strip() != "ok":
        said = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SandboxUnavailable(
            f"bubblewrap ({_bwrap()}) is installed but could not make the sandbox: {said[0][:300]}. {fix_for(said[0])}"
        )
    _checked.add(_bwrap())


def fix_for(said: str) -> str:
    """What to do about what bubblewrap or the sandboxed Python said when the sandbox did not start."""
    if "execvp" in said or "No such file" in said or "No module named" in said or "ModuleNotFoundError" in said:
        return (
            f"The Python environment ({sys.prefix}) or the servelab package is not visible inside the sandbox; "
            "it must be readable by every user (chmod o+rx on the folders above it), and the sandbox binds "
            "it at the same path."
        )
    if "namespace" in said or "Operation not permitted" in said or "setting up uid map" in said:
        return NAMESPACE_HINT
    if "Permission denied" in said:
        return (
            f"The sandbox's user (uid {sandbox_uid()}) cannot read the Python environment ({sys.prefix}) or "
            "the checkout: make the folders above them readable (chmod o+rx), or check out elsewhere."
        )
    return INSTALL_HINT


class _Reader(threading.Thread):
    """Read a pipe to its end, keeping at most `cap` bytes; past the cap, call `overflow` once."""

    def __init__(self, stream, cap: int, overflow=None, keep_tail: bool = False):
        super().__init__(daemon=True)
        self.stream, self.cap, self.overflow, self.keep_tail = stream, cap, overflow, keep_tail
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False

    def run(self) -> None:
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            if not chunk:
                return
            self.chunks.append(chunk)
            self.size += len(chunk)
            if self.size > self.cap:
                if self.keep_tail:
                    data = b"".join(self.chunks)[-self.cap :]
                    self.chunks, self.size = [data], len(data)
                elif not self.overflowed:
                    self.overflowed = True
                    if self.overflow:
                        self.overflow()
                    self.chunks = self.chunks[:-1]

    def data(self) -> bytes:
        return b"".join(self.chunks)


def execute(
    nb,
    *,
    cell_timeout: int = CELL_TIMEOUT_S,
    run_timeout: int = SUBMISSION_TIMEOUT_S,
    trusted: bool = False,
    extra_env: dict[str, str] | None = None,
) -> Execution:
    """Execute a notebook (hidden tests already restored, capture-only) and return what it reported.
    `extra_env`: more of the run's environment (the student's variant numbers), never a name of its own."""
    sandboxed = not trusted
    if sandboxed and not _bwrap():
        # The full probe (check()) is run once per class by the pipeline; here, a bubblewrap that
        # cannot make the sandbox shows as a run that never started, which the caller refuses.
        raise SandboxUnavailable(
            f"bubblewrap (bwrap) is not installed, so submissions cannot run in the sandbox. {INSTALL_HINT}"
        )
    env = _environment(cell_timeout, sandboxed)
    env.update({k: v for k, v in (extra_env or {}).items() if k not in env})
    inner = [sys.executable, "-m", "servelab.grading.runner", "run"]
    scratch = None
    if sandboxed:
        cmd = command(inner)
    else:
        import tempfile

        scratch = tempfile.mkdtemp(prefix="servelab-trusted-")
        for name in ("HOME", "TMPDIR", "SERVELAB_CACHE"):
            env[name] = scratch
        for name in ("IPYTHONDIR", "MPLCONFIGDIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR"):
            env[name] = env[name].replace("/tmp", scratch)
        cmd = inner
    start = time.monotonic()
    result = Execution(sandboxed=sandboxed)
    group, result.limits = _cgroup()
    try:
        _run(proc_args=(cmd, env, scratch), nb=nb, group=group, result=result, run_timeout=run_timeout)
    finally:
        if group is not None:
            group.close()  # whatever the run left behind is killed, and the cgroup removed (done once)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    result.seconds = time.monotonic() - start
    if result.memory_limit_hit and result.status in ("kernel died", "stopped"):
        result.status = "out of memory"
        result.detail = (
            f"the run's processes together reached the memory limit ({CGROUP_LIMITS.memory_bytes >> 20} MiB, "
            "/tmp included) and the kernel stopped one of them"
        )
    return result


def _run(*, proc_args, nb, group, result: Execution, run_timeout: int) -> None:
    """Start the runner (in `group` when there is one), feed it the notebook, read its report into `result`."""
    import nbformat

    cmd, env, scratch = proc_args
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=scratch or "/",
        start_new_session=True,
        preexec_fn=_limits(_nproc_limit(), group),
    )

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def too_much() -> None:
        result.status, result.detail = "output too large", "the run reported more than the grader reads; it was stopped"
        kill()

    readers = [_Reader(proc.stdout, MAX_REPORT_BYTES, too_much), _Reader(proc.stderr, MAX_LOG_BYTES, keep_tail=True)]
    for r in readers:
        r.start()
    if proc.stdin is None:  # stdin=PIPE above gives the run one
        raise RuntimeError("the notebook run has no input pipe")
    try:
        proc.stdin.write(nbformat.writes(nb).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=run_timeout)
    except subprocess.TimeoutExpired:
        kill()
        proc.wait()
        result.status, result.detail = "timed out", f"the notebook ran longer than {run_timeout} s and was stopped"
    if group is not None:  # a process the run left behind holds its pipes open: it goes now, not at the join
        result.peak_memory, result.peak_pids = group.peak_memory(), group.peak_pids()
        result.memory_limit_hit = group.oom_kills() > 0
        group.close()
    for r in readers:
        r.join(timeout=10)
    result.log = readers[1].data().decode("utf-8", "replace")
    ready = done = False
    for line in readers[0].data().split(b"\n"):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # the runner writes plain JSON; anything else is not a report
            continue
        if not isinstance(record, dict):
            continue
        if record.get("event") == "ready":
            ready = True
        elif record.get("event") == "cell" and isinstance(record.get("index"), int):
            result.cells[record["index"]] = record
            if isinstance(record.get("answer"), str):
                result.answers[record["index"]] = record["answer"]
        elif record.get("event") == "done":
            done = True
            if result.status == "ok":
                result.status, result.detail = str(record.get("status", "ok")), str(record.get("detail", ""))
    if not ready and result.status == "ok":
        result.status = "did not start"
        result.detail = (result.log.strip().splitlines() or ["no output"])[-1][:300]
    elif not done and result.status == "ok":
        result.status = "kernel died" if proc.returncode else "stopped"
        result.detail = f"the sandbox ended (exit status {proc.returncode}) before the notebook finished"
