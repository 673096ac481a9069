"""Each student's server and kernels under memory, CPU and process limits, with a private, capped /tmp.

Which mechanism applies where:

- A machine whose PID 1 is systemd: jupyterhub-systemdspawner (the field's own) runs each
  server in a transient systemd unit with MemoryMax, CPUQuota and TasksMax; use it there
  (c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner", its mem_limit, cpu_limit).
- Anywhere else, as here (containers, CI: PID 1 is not systemd): `CgroupSpawner`, JupyterHub's
  own LocalProcessSpawner with one cgroup per student that the kernel enforces. Before the
  server's exec (in its preexec function, still as root), the child joins the student's
  cgroup, so the server and every kernel and process it starts are inside it. cgroup v1
  (memory, pids and cpu hierarchies under /sys/fs/cgroup/<controller>/) or the unified
  cgroup v2 (memory.max, pids.max, cpu.max), whichever the machine has with its controllers.
- Each student's server also gets its own mount namespace with a private tmpfs of `tmp_mib` on
  /tmp, /dev/shm and every other folder any user may write on the machine's file systems
  (`shared_dirs`, found by `servelab class up`: /var/tmp, /run/lock and whatever else is
  world-writable), each with its folder's own mode: a shared writable folder is a place where
  others' files live and where one student could fill the disk the gradebook is on. tmpfs pages
  count against the student's memory limit too.
- Each student's home folder is its own ext4 of `home_mib` where the machine can loop-mount,
  mounted by `servelab class up` (servelab.classroom.capfs, hub.cap_home), not by the spawner.

The class's cgroups are one tree, CGROUP_ROOT/<class>/<student>, made by `servelab class up`
and written in its journal: `class down` stops whatever still runs in them and removes them.

Connections to the class's shared servers are capped per user by the kernel, not by the proxy:
nginx counts a user's requests only once it has read their key, so a student who opens
thousands of connections and never finishes a request would take every connection nginx has
(its worker_connections) from the class. `cap_connections` writes an nftables table whose
rule counts each user's open TCP connections to the servers' ports (conntrack's `ct count`,
keyed by the sending socket's owner, `meta skuid`) and resets those over CONNECTIONS_PER_USER;
root's (the hub's) are not counted. `servelab class servers` records the table in its
journal; its stop, or `class down`, deletes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ClassError

CGROUP = Path("/sys/fs/cgroup")
CGROUP_ROOT = "servelab"
V1 = ("memory", "pids", "cpu")
CONNECTIONS_PER_USER = 64  # a user's TCP connections to the class servers at once (a share is 8 requests a server)
FLOWS_PER_USER = 4096  # a class user's connections the kernel tracks at once, anywhere (cap_flows), at most ...
CONNTRACK_MAX = Path("/proc/sys/net/netfilter/nf_conntrack_max")  # ... the class's users together half of this


@dataclass
class Limits:
    """What one student's server may use, with everything it starts."""

    memory_mib: int = 4096  # JupyterLab, the lesson's kernel and a lab's (plotly, the remote client)
    cpus: float = 1.0  # of the machine's cores, as CFS quota
    pids: int = 512  # processes and threads: JupyterLab's and each kernel's threads fit in tens
    tmp_mib: int = 512  # the private /tmp and /dev/shm, each
    home_mib: int = 1024  # the home folder, its own ext4 where the machine can loop-mount (servelab.classroom.capfs)
    shared_dirs: tuple[str, ...] = ()  # world-writable folders besides /tmp and /dev/shm, each made private too

    def as_json(self) -> dict:
        return {
            "memory_mib": self.memory_mib,
            "cpus": self.cpus,
            "pids": self.pids,
            "tmp_mib": self.tmp_mib,
            "home_mib": self.home_mib,
            "shared_dirs": list(self.shared_dirs),
        }


PRIVATE = ("/tmp", "/dev/shm")  # always private
ALWAYS_SHARED = ("/var/tmp", "/run/lock")  # world-writable on every Debian, looked at even where find misses them
LOCAL_FS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "overlay", "tmpfs", "vfat", "jfs", "reiserfs"}
NOT_SCANNED = ("/proc", "/sys", "/dev")


def shared_dirs(skip: tuple[str, ...] = ()) -> list[str]:
    """Every folder any user may write (mode o+w) on the machine's local file systems, but /tmp and /dev/shm
    (always private), what lies under /proc, /sys, /dev and `skip` (the class's own state, its users' homes),
    and folders inside one already listed (its tmpfs hides them): `find MOUNT -xdev -type d -perm -0002`."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point, fstype = fields[4], fields[fields.index("-") + 1]
        if fstype in LOCAL_FS:
            mounts.append(point.encode().decode("unicode_escape"))
    out: set[str] = set()
    outside = NOT_SCANNED + PRIVATE + tuple(skip)
    prune: list[str] = []
    for path in outside:
        prune += ["-path", path, "-o"]
    for point in sorted(set(mounts)):
        if _under(point, outside):
            continue
        found = subprocess.run(
            ["find", point, "-xdev", "(", *prune[:-1], ")", "-prune", "-o", "-type", "d", "-perm", "-0002", "-print0"],
            capture_output=True,
            text=True,
        )
        out.update(p for p in found.stdout.split("\0") if p)
    out.update(p for p in ALWAYS_SHARED if os.path.isdir(p) and not os.path.islink(p) and os.stat(p).st_mode & 0o002)
    listed: list[str] = []
    for path in sorted(out):
        if not _under(path, outside) and not _under(path, tuple(listed)):
            listed.append(path)
    return listed


def _under(path: str, tops: tuple[str, ...]) -> bool:
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in tops)


def hierarchy() -> str:
    """'v1' or 'v2': which cgroup hierarchy can hold a student's limits here, or ClassError."""
    if (
        all((CGROUP / c / "cgroup.procs").exists() for c in V1)
        and (CGROUP / "memory" / "memory.limit_in_bytes").exists()
    ):
        return "v1"
    controllers = CGROUP / "cgroup.controllers"
    if controllers.exists() and {"memory", "pids", "cpu"} <= set(controllers.read_text().split()):
        return "v2"
    raise ClassError(
        "No cgroup hierarchy with memory, pids and cpu controllers is mounted at /sys/fs/cgroup, so a student's "
        "server cannot be limited: on a systemd machine use jupyterhub-systemdspawner; in a container, run it "
        "with its cgroups writable (docker run --cgroupns=private, or mount cgroup v1's memory, pids and cpu)."
    )


def class_name(state: Path) -> str:
    """The class's cgroup folder: one per state folder, so two classes on one machine never meet."""
    return "class-" + hashlib.sha256(str(Path(state).resolve()).encode()).hexdigest()[:10]


def connection_table(state: Path) -> str:
    """The class's nftables table (letters, digits and _ only): one per state folder, like its cgroups."""
    return "servelab_" + class_name(state).removeprefix("class-")


def cap_connections(
    state: Path, ports: list[int], per_user: int = CONNECTIONS_PER_USER, record=lambda kind, **what: None
) -> str:
    """Cap every user but root at `per_user` open TCP connections to `ports` on loopback (see the module); what
    was done, in a line: "capped: ..." or "not capped: <why>" (not root; a kernel without nf_tables).

    Missing nft is a ClassError that says how to install it."""
    if os.geteuid() != 0:
        return "not capped: a user's connections to the class servers are capped by root's nftables"
    table = connection_table(state)
    ports_set = ", ".join(str(p) for p in ports)
    rules = f"""table inet {table} {{
  set users {{ type uid; size 65535; flags dynamic; }}
  chain out {{
    type filter hook output priority filter; policy accept;
    oifname "lo" tcp dport {{ {ports_set} }} ct state new meta skuid != 0 add @users {{ meta skuid ct count over {per_user} }} reject with tcp reset
  }}
}}
"""
    refused = _load_table(table, rules, "The class servers cap each user's connections", record)
    if refused:
        return f"not capped: {refused}"
    return f"capped: each user at {per_user} connections to ports {ports_set} at once (nftables table inet {table})"


def guard_table(state: Path) -> str:
    """The class's second nftables table: which user may answer on the class servers' ports (guard_ports)."""
    return connection_table(state) + "_guard"


def guard_ports(state: Path, ports: list[int], owner: str, record=lambda kind, **what: None) -> str:
    """Only `owner`'s sockets may answer a connection to `ports`: the kernel drops a SYN-ACK sent from those ports
    by any other user's listening socket, so a student who listens on a port of the class servers while they are
    stopped (a classmate's lab would send her its key there) never completes a connection; a port nobody listens
    on still answers with a reset at once. nftables' `meta skuid` of a SYN-ACK is its listening socket's owner
    (the kernel's skb_to_full_sk); one whose owner it cannot tell is dropped too. What was done, in a line:
    "guarded: ..." or "not guarded: <why>". `servelab class up` guards the ports it hands to the labs, for as long
    as the class runs (its journal: `class down` deletes the table)."""
    if os.geteuid() != 0:
        return "not guarded: which user answers on the class servers' ports is root's nftables table"
    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        return f"not guarded: there is no user {owner!r} yet (run `servelab class servers` first)"
    table = guard_table(state)
    ports_set = ", ".join(str(p) for p in ports)
    handshake = f"tcp sport {{ {ports_set} }} tcp flags & (syn | ack) == syn | ack"
    rules = f"""table inet {table} {{
  chain out {{
    type filter hook output priority filter; policy accept;
    {handshake} meta skuid {uid} accept
    {handshake} drop
  }}
}}
"""
    refused = _load_table(table, rules, "The class guards the servers' ports", record)
    if refused:
        return f"not guarded: {refused}"
    return f"guarded: ports {ports_set} answer only from {owner}'s sockets (nftables table inet {table})"


def flows_table(state: Path) -> str:
    return connection_table(state) + "_flows"


def cap_flows(state: Path, users: list[str], record=lambda kind, **what: None, per_user: int | None = None) -> str:
    """Cap each of the class's `users` at a share of the kernel's connection tracking table: new connections (TCP,
    UDP, anything conntrack follows) of a user who holds that many already are refused. A loopback connection
    between two of one student's own sockets takes an entry like any other, and when the table is full the kernel
    drops every new connection on the machine, a classmate's to the class servers and the hub's to her server
    among them: the cap is FLOWS_PER_USER, or less so that the class's users together fill at most half the
    table (or `per_user`). What was done, in a line: "capped: ..." or "not capped: <why>". `servelab class up`
    writes it (its journal: `class down` deletes the table)."""
    if os.geteuid() != 0:
        return "not capped: a user's tracked connections are capped by root's nftables"
    try:
        table_size = int(CONNTRACK_MAX.read_text())
    except (OSError, ValueError):
        return f"not capped: the kernel tracks no connections here ({CONNTRACK_MAX} cannot be read)"
    uids = sorted({pwd.getpwnam(name).pw_uid for name in users} - {0})
    if not uids:
        return "not capped: no user of the class but root"
    per_user = per_user or max(64, min(FLOWS_PER_USER, table_size // (2 * len(uids))))
    table = flows_table(state)
    rules = f"""table inet {table} {{
  set users {{ type uid; size 65535; flags dynamic; }}
  chain refuse {{
    meta l4proto tcp reject with tcp reset
    reject
  }}
  chain out {{
    type filter hook output priority filter; policy accept;
    ct state new meta skuid {{ {", ".join(map(str, uids))} }} add @users {{ meta skuid ct count over {per_user} }} jump refuse
  }}
}}
"""
    refused = _load_table(table, rules, "The class caps each user's tracked connections", record)
    if refused:
        return f"not capped: {refused}"
    return (
        f"capped: each of the class's {len(uids)} users at {per_user} tracked connections at once, of the "
        f"kernel's {table_size:,} (nftables table inet {table})"
    )


def _load_table(table: str, rules: str, who: str, record) -> str:
    """Load one of the class's nftables tables (recorded first, an earlier run's replaced); "" once loaded, else
    why not. Missing nft is a ClassError that says how to install it (`who` does what with it)."""
    nft = _nft()
    if not Path(nft).exists():
        raise ClassError(
            f"{who} with nftables, which is not installed: run `make class-deps` (apt-get install nftables)."
        )
    record("nft", table=table)
    subprocess.run([nft, "delete", "table", "inet", table], capture_output=True)  # an earlier run's, if any
    done = subprocess.run([nft, "-f", "-"], input=rules, capture_output=True, text=True)
    return "" if done.returncode == 0 else f"nftables refused the class's table ({done.stderr.strip()[-300:]})"


def uncap_connections(table: str) -> str:
    """Delete the class's nftables table; "" where there is none (or no nft)."""
    nft = _nft()
    if not Path(nft).exists():
        return ""
    done = subprocess.run([nft, "delete", "table", "inet", table], capture_output=True, text=True)
    return f"nftables table {table} deleted" if done.returncode == 0 else ""


def _nft() -> str:
    return shutil.which("nft") or "/usr/sbin/nft"  # Debian's, off a plain user's PATH


def class_folders(state: Path) -> list[Path]:
    """The class's cgroup folders (one per v1 controller, or one in v2), parents of each student's."""
    name = class_name(state)
    if hierarchy() == "v1":
        return [CGROUP / c / CGROUP_ROOT / name for c in V1]
    return [CGROUP / CGROUP_ROOT / name]


def make_class(state: Path, record=lambda kind, **what: None) -> list[Path]:
    """The class's cgroup folders, recorded before they are made (`record("cgroup", path=...)`)."""
    folders = class_folders(state)
    for folder in folders:
        top = folder.parent
        if not top.exists():
            record("cgroup", path=str(top))
            top.mkdir()
        if hierarchy() == "v2":
            _enable_v2(top.parent)
            _enable_v2(top)
        if not folder.exists():
            record("cgroup", path=str(folder))
            folder.mkdir()
        if hierarchy() == "v2":
            _enable_v2(folder)
    return folders


def join(folders: list[Path]) -> None:
    """Move this process into `folders` (each a cgroup's folder): in a child before its exec, as root."""
    pid = str(os.getpid()).encode()
    for folder in folders:
        fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)


def _enable_v2(folder: Path) -> None:
    control = folder / "cgroup.subtree_control"
    have = set(control.read_text().split())
    for c in ("memory", "pids", "cpu"):
        if c not in have:
            control.write_text(f"+{c}")


def make_student(state: Path, student: str, limits: Limits | None) -> list[Path]:
    """The user's cgroup folders with their limits set (none: no limits); the folders the server's pid goes into."""
    folders = []
    for parent in class_folders(state):
        folder = parent / student
        folder.mkdir(exist_ok=True)
        folders.append(folder)
        if limits is None:
            continue
        controller = parent.parent.parent.name if hierarchy() == "v1" else ""
        memory = limits.memory_mib * 2**20
        if controller == "memory":
            (folder / "memory.limit_in_bytes").write_text(str(memory))
            swap = folder / "memory.memsw.limit_in_bytes"
            if swap.exists():  # memory and swap together: no spilling past the limit into swap
                swap.write_text(str(memory))
        elif controller == "pids":
            (folder / "pids.max").write_text(str(limits.pids))
        elif controller == "cpu":
            period = 100_000
            (folder / "cpu.cfs_period_us").write_text(str(period))
            (folder / "cpu.cfs_quota_us").write_text(str(int(limits.cpus * period)))
        else:  # v2: one folder, every controller
            (folder / "memory.max").write_text(str(memory))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(limits.pids))
            (folder / "cpu.max").write_text(f"{int(limits.cpus * 100_000)} 100000")
    return folders


# --- the preexec side: in the forked child, as root, before exec --------------------------------------
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter(folders: list[Path], tmp_mib: int, keep: tuple[str, ...] = (), shared: tuple[str, ...] = ()) -> None:
    """Join the student's cgroups and give this process a mount namespace with private /tmp, /dev/shm and
    `shared` (each a tmpfs of `tmp_mib` with its folder's mode and owner), and an IPC namespace of its own: the
    System V shared memory, semaphores and message queues it makes are the server's, counted in nobody else's
    view and gone with the server (in the machine's they would outlive it, and the class, outside any limit).

    `keep`: folders the server needs that may lie under one of them (a class whose state folder is in /tmp):
    each is bound back at its own path inside the private folder."""
    join(folders)
    if tmp_mib <= 0:
        return
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    # Nothing mounted here propagates back to the machine's namespace.
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    targets = [t for t in dict.fromkeys(PRIVATE + tuple(shared)) if os.path.isdir(t) and not os.path.islink(t)]
    held = {}
    for target in targets:
        held.update({p: os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in keep if p.startswith(target + "/")})
    for target in targets:
        st = os.stat(target)
        mode = 0o1777 if target in PRIVATE else st.st_mode & 0o7777
        options = b"size=%dm,mode=%o,uid=%d,gid=%d" % (tmp_mib, mode, st.st_uid, st.st_gid)
        where = target.encode()
        _check(_libc.mount(b"tmpfs", where, b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mount tmpfs {target!r}")
    for path, fd in held.items():
        os.makedirs(path, mode=0o755, exist_ok=True)
        source = f"/proc/self/fd/{fd}".encode()
        _check(_libc.mount(source, path.encode(), None, MS_BIND | MS_REC, None), f"bind {path} back")
        os.close(fd)


def spawner_class():
    """CgroupSpawner, made when the hub loads its config (jupyterhub is imported only there)."""
    from jupyterhub.spawner import LocalProcessSpawner
    from traitlets import Bool, Dict, Unicode

    class CgroupSpawner(LocalProcessSpawner):
        """LocalProcessSpawner whose limited users' servers start in their own cgroup (see the module)."""

        class_state = Unicode("", help="the class's state folder, which names its cgroups").tag(config=True)
        limits = Dict(help="Limits as JSON (memory_mib, cpus, pids, tmp_mib, home_mib)").tag(config=True)
        limited = Bool(True, help="whether this user's server is limited (students are)").tag(config=True)

        def make_preexec_fn(self, name):
            setuid = super().make_preexec_fn(name)
            # Every class user's server is in the class's cgroups (so `class down` finds it); a limited
            # user's under their limits and with a private /tmp, an instructor's without limits.
            limits = Limits(**self.limits)
            folders = make_student(Path(self.class_state), name, limits if self.limited else None)
            tmp_mib = limits.tmp_mib if self.limited else 0
            keep = (os.path.realpath(self.class_state),)
            shared = tuple(limits.shared_dirs) if self.limited else ()

            def preexec():
                enter(folders, tmp_mib, keep, shared)
                setuid()

            return preexec

    return CgroupSpawner
