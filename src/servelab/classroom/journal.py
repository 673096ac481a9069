"""What a class changed on the machine, written down before each change, so it can always be put back.

    journal = Journal(state / "changes.json")
    journal.mode(path)                 # before chmod/chown of anything outside the class's state
    journal.record("group", name=...)  # before groupadd; "member" before usermod -aG; "mount"; "cgroup";
                                       # "hand-out" before a student's numbers are written in their home; ...
    journal.undo()                     # every change put back, newest first; the file is removed

`servelab class up` writes its changes here and `servelab class down` (or the end of
`class up`) undoes them. The record is written and synced before the change it
names, so a `class up` killed at any point (SIGKILL, a crash, a power cut) leaves a
record that names everything it did and maybe one change not yet made; undoing
an entry whose change never happened is harmless (each undo looks at the machine
first). The next `class up` or `class down` finds the record and restores it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

FILE = "changes.json"
SERVERS_FILE = "servers-changes.json"  # `class servers`' own record, beside a running `class up`'s


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.entries: list[dict] = json.loads(self.path.read_text()) if self.path.exists() else []

    @classmethod
    def of(cls, state: Path) -> "Journal":
        return cls(Path(state) / FILE)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def _write(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self.entries, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def record(self, kind: str, **what) -> None:
        entry = {"kind": kind, **what}
        if entry not in self.entries:
            self.entries.append(entry)
            self._write()

    def mode(self, path: Path) -> None:
        """Before changing a path's mode or group: what they are now (the first record of a path wins)."""
        path = Path(path)
        if any(e["kind"] == "mode" and e["path"] == str(path) for e in self.entries):
            return
        st = path.lstat()
        self.record("mode", path=str(path), mode=st.st_mode & 0o7777, uid=st.st_uid, gid=st.st_gid)

    def undo(self, log=print) -> list[str]:
        """Put back every recorded change, newest first; what was done, one line each."""
        done = []
        while self.entries:
            entry = self.entries[-1]
            try:
                line = UNDO[entry["kind"]](entry)
            except Exception as exc:  # noqa: BLE001 - one that cannot be undone is said; the rest are still undone
                line = f"could not undo {entry}: {exc}"
            if line:
                log(line)
                done.append(line)
            self.entries.pop()
            self._write()
        return done


def _undo_mode(e: dict) -> str:
    path = Path(e["path"])
    if not path.exists():
        return ""
    st = path.lstat()
    if (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (e["mode"], e["uid"], e["gid"]):
        return ""
    os.chown(path, e["uid"], e["gid"], follow_symlinks=False)
    os.chmod(path, e["mode"])
    return f"{path}: mode {e['mode']:o}, owner {e['uid']}:{e['gid']} as before the class"


def _undo_group(e: dict) -> str:
    if subprocess.run(["getent", "group", e["name"]], capture_output=True).returncode != 0:
        return ""
    subprocess.run(["groupdel", e["name"]], check=True, capture_output=True)
    return f"group {e['name']} removed"


def _undo_user(e: dict) -> str:
    """A system user the class made (the servers'), removed with its group once nothing of it runs."""
    import pwd

    try:
        uid = pwd.getpwnam(e["name"]).pw_uid
    except KeyError:
        return ""
    running = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid]
    if running:
        return f"user {e['name']} kept: processes {', '.join(sorted(running, key=int)[:5])} still run as it"
    subprocess.run(["userdel", e["name"]], check=True, capture_output=True)
    if subprocess.run(["getent", "group", e["name"]], capture_output=True).returncode == 0:
        subprocess.run(["groupdel", e["name"]], capture_output=True)  # userdel removes a user group of its own
    return f"user {e['name']} removed"


def _owner(proc: Path) -> int:
    try:
        return proc.stat().st_uid
    except OSError:
        return -1


def _undo_member(e: dict) -> str:
    got = subprocess.run(["id", "-nG", e["user"]], capture_output=True, text=True)
    if got.returncode != 0 or e["group"] not in got.stdout.split():
        return ""
    subprocess.run(["gpasswd", "-d", e["user"], e["group"]], check=True, capture_output=True)
    return f"{e['user']} out of group {e['group']}"


def _undo_mount(e: dict) -> str:
    """A capped folder (an inbound, a student's home: servelab.classroom.capfs) unmounted; its image stays."""
    from .capfs import unmount

    path = e["path"]
    if not os.path.ismount(path):
        return ""
    unmount(path)
    return f"{path} unmounted"


def _undo_cgroup(e: dict) -> str:
    """Stop what still runs in a student's cgroup (their server and kernels), then remove it."""
    folder = Path(e["path"])
    if not folder.is_dir():
        return ""
    for child in [c for c in folder.iterdir() if c.is_dir()]:  # each user's, made by the hub's spawner
        _undo_cgroup({"path": str(child)})
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids(folder)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while _pids(folder) and time.monotonic() < deadline:
            time.sleep(0.1)
    folder.rmdir()
    return f"{folder} removed"


def _pids(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _started(pid: int) -> str:
    """A process's start time since boot (field 22 of /proc/PID/stat): with the pid, names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _undo_process(e: dict) -> str:
    """Stop a process group the class started (the hub), if that very process still runs."""
    pid = e["pid"]
    if not _started(pid) or _started(pid) != e["started"]:
        return ""
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return f"{e['what']} (pid {pid}) stopped"
        deadline = time.monotonic() + wait
        while _started(pid) == e["started"] and time.monotonic() < deadline:
            time.sleep(0.2)
        if _started(pid) != e["started"]:
            return f"{e['what']} (pid {pid}) stopped"
    return f"{e['what']} (pid {pid}) did not stop"


def _processes_of(uid: int, folder: str) -> dict[int, int]:
    """pid -> process group of every process of `uid` that names `folder` (its command line or working folder)."""
    found = {}
    inside = folder.rstrip("/") + "/"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != uid:
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            try:
                cwd = os.readlink(proc / "cwd") + "/"
            except OSError:
                cwd = ""
            if inside in cmdline + " " or folder + " " in cmdline + " " or cwd.startswith(inside):
                found[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def _undo_engines(e: dict) -> str:
    """Stop the class's servers (vLLM and what it started, nginx and its workers) wherever their starter went.

    Recorded before they start: each is the engines' user's (`uid`) and names the engines' folder, in its
    command line or as its working folder; its whole process group (each server starts its own) goes too."""
    uid, folder = e["uid"], e["folder"]
    stopped: set[int] = set()
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        found = _processes_of(uid, folder)
        if not found:
            break
        stopped |= set(found)
        for group in set(found.values()) - {os.getpgrp()}:
            try:
                os.killpg(group, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in found:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while _processes_of(uid, folder) and time.monotonic() < deadline:
            time.sleep(0.2)
    if not stopped:
        return ""
    left = _processes_of(uid, folder)
    if left:
        return f"the class's servers in {folder}: pids {sorted(left)} did not stop"
    return f"the class's servers in {folder} stopped ({len(stopped)} processes)"


def _undo_postgres(e: dict) -> str:
    from .postgres import Postgres

    folder = Path(e["folder"])
    if not (folder / "postmaster.pid").exists():
        return ""
    Postgres(folder, port=e["port"]).stop()
    return f"the gradebook's PostgreSQL in {folder} stopped"


def _undo_hand_out(e: dict) -> str:
    """A student's handed-out numbers (servelab.variants.lesson.hand_out) removed, with the folders the
    hand-out made where they are empty (what the student keeps beside them stays); a folder that was there
    gets back the owner and mode it had. Through open folders, never a link someone put in the way; a
    variants folder that is not root's (this process's) is not the one the hand-out made, and is left."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    parts = Path(e["file"]).parts  # .servelab, variants, lesson25.json
    opened: list[int] = []
    said = []
    try:
        try:
            opened.append(os.open(e["home"], flags))
            for name in parts[:-1]:
                opened.append(os.open(name, flags, dir_fd=opened[-1]))
        except OSError:  # not there (never made, or removed), or not a folder
            return ""
        folder = opened[-1]
        if os.fstat(folder).st_uid != os.geteuid():
            return ""
        for name in (parts[-1], f".{parts[-1]}.tmp"):
            try:
                os.unlink(name, dir_fd=folder)
                if name == parts[-1]:
                    said.append(f"{Path(e['home'], e['file'])} removed")
            except FileNotFoundError:
                pass
        for depth in reversed(range(len(parts) - 1)):  # the innermost folder first
            rel = str(Path(*parts[: depth + 1]))
            if rel in e["made"]:
                try:
                    os.rmdir(parts[depth], dir_fd=opened[depth])
                    said.append(f"{Path(e['home'], rel)} removed")
                except OSError:  # not empty: the student's own files stay, and the folder with them
                    pass
            elif depth == len(parts) - 2 and "before" in e:
                before = e["before"]
                os.fchown(folder, before["uid"], before["gid"])
                os.fchmod(folder, before["mode"])
    finally:
        for fd in reversed(opened):
            os.close(fd)
    return "; ".join(said)


def _undo_nft(e: dict) -> str:
    from .limits import uncap_connections

    return uncap_connections(e["table"])


UNDO = {
    "mode": _undo_mode,
    "nft": _undo_nft,
    "group": _undo_group,
    "user": _undo_user,
    "member": _undo_member,
    "mount": _undo_mount,
    "cgroup": _undo_cgroup,
    "process": _undo_process,
    "postgres": _undo_postgres,
    "engines": _undo_engines,
    "hand-out": _undo_hand_out,
}


def process_entry(pid: int, what: str) -> dict:
    return {"pid": pid, "started": _started(pid), "what": what}
