"""The autograde kernel: an IPython kernel that cannot read the course's answer key.

During autograding, a submission's code runs in the same kernel as the hidden
tests, as the same user as nbgrader. Two things keep it from reading the key:

- an audit hook (PEP 578; it cannot be removed once installed) refuses to open,
  list or connect to anything under the paths in SERVELAB_SANDBOX_DENY (the
  course directory with its gradebook and source copies, solutions/, grading/),
  except the submission's own folder, the kernel's working directory; even
  there it refuses notebooks (the one being graded has its hidden tests back),
  and it refuses other processes' /proc entries;
- the kernel exits when nbgrader does (PR_SET_PDEATHSIG), so a killed autograde
  never leaves a kernel spinning in an infinite loop.

This raises the bar, it is not a jail: code that reaches for ctypes can get
around an audit hook. The pipeline flags submissions that touch the grading
machinery for a person to look at (see pipeline.integrity_flags).

Run as a kernel: python -m servelab.grading.sandbox -f {connection_file}
"""

from __future__ import annotations

import os
import signal
import sys

DENY_ENV = "SERVELAB_SANDBOX_DENY"
PATH_EVENTS = {"open", "os.listdir", "os.scandir", "os.chdir", "glob.glob", "shutil.copyfile",
               "shutil.copytree", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.symlink",
               "os.link", "os.truncate", "os.utime", "os.chmod", "os.chown", "sqlite3.connect"}


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def make_hook(denied: list[str], allowed: list[str]):
    """An audit hook that raises PermissionError for paths under `denied` but not under `allowed`."""
    denied = [os.path.join(d, "") for d in denied]
    allowed = [os.path.join(a, "") for a in allowed]
    busy = False

    own_proc = {f"/proc/{os.getpid()}/", "/proc/self/", "/proc/thread-self/"}

    def refused(path) -> bool:
        if isinstance(path, int) or path is None:
            return False
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        full = os.path.realpath(os.path.abspath(os.fspath(path)))
        under_denied = any(os.path.join(full, "").startswith(d) for d in denied)
        if under_denied and full.endswith(".ipynb"):
            return True  # the notebook being graded carries its hidden tests, even in the own folder
        if under_denied and not any(os.path.join(full, "").startswith(a) for a in allowed):
            return True
        # another process's memory or environment (nbgrader's holds the gradebook)
        parts = full.split("/")
        return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() \
            and not any(os.path.join(full, "").startswith(p) for p in own_proc)

    def hook(event: str, args: tuple) -> None:
        nonlocal busy
        if event not in PATH_EVENTS or busy or not args:
            return
        busy = True  # realpath below must not re-enter the hook
        try:
            paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
            blocked = any(refused(p) for p in paths)
        except (TypeError, ValueError, OSError):
            blocked = False
        finally:
            busy = False
        if blocked:
            raise PermissionError(f"The grader does not let a submission read {paths[0]!s}: "
                                  "it belongs to the course, not to the notebook.")

    return hook


def install(denied: list[str], allowed: list[str]) -> None:
    sys.addaudithook(make_hook(denied, allowed))


def main() -> None:
    _die_with_parent()
    denied = [p for p in os.environ.get(DENY_ENV, "").split(os.pathsep) if p]
    allowed = [os.path.realpath(os.getcwd())]
    # Modules the kernel needs are imported before the hook, so no import path is refused.
    from ipykernel.kernelapp import IPKernelApp

    install(denied, allowed)
    IPKernelApp.launch_instance()


if __name__ == "__main__":
    main()
