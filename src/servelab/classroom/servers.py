"""The class's two shared vLLM servers: one without speculation, one with n-gram speculation.

Both serve the same model with prefix caching off (every lab point sends the
same prompts; a cached prefill would make later points look faster). The lab's
remote backend takes their URLs: the hub hands them to every student as
SERVELAB_REMOTE_OFF_URL and SERVELAB_REMOTE_ON_URL, with the student's own key
as SERVELAB_REMOTE_API_KEY.

Who may use them, and how much, is decided in front of vLLM by Debian's nginx
(one process for both servers), not by vLLM and not by servelab:

    127.0.0.1:<off_port>, :<on_port>   nginx: a request without a class key gets 401; a key names one
                                       student (map $http_authorization $student); each student has at
                                       most `per_student` requests at the engine, running or waiting in
                                       vLLM's queue (limit_conn), and at most `per_student_rate` new
                                       ones a second with a burst of twice the share (limit_req);
                                       beyond that nginx answers 429 at once, before vLLM and without
                                       a line in either log. Only the paths the lab
                                       uses are passed on (models, completions, chat completions,
                                       version, metrics); everything else is 404.
    <state>/engines/run/vllm-*.sock    vLLM's API servers (--uds): Unix sockets in a folder only the
                                       engines' user can open, so no local user reaches vLLM except
                                       through nginx (a loopback port would be open to every user).

When started by root, vLLM and nginx run as the system user ENGINE_USER (made
on first use), from an environment under <state>/engines/env built the same way
as the students' (servelab.classroom.studentenv) and a hard-linked copy of the
model: nothing of the checkout or of root's home is opened for them. Started by
another user, they run as that user.

On this CPU the bundled SmolLM2-135M-Instruct runs in float32, eager, with 1 GiB
of KV cache each; on a GPU machine pass a hub id or folder and vLLM's own
defaults apply (add --gpu-memory-utilization 0.45 to put both on one GPU).
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..server import ServerError, VllmServer
from . import gate, limits
from .errors import ClassError, require_port

OFF_PORT, ON_PORT = 8100, 8101
NGRAM_K = 4  # num_speculative_tokens on the speculating server
CPU_ARGS = [  # the CPU engines' context is the gate's (a request's prompt and its at most gate.MAX_TOKENS new tokens)
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    str(gate.CONTEXT),
    "--kv-cache-memory-bytes",
    str(1 << 30),
]
ENGINE_USER = "servelab-engines"  # the system user the servers run as when root starts them
PER_STUDENT = 8  # requests one student may have at an engine at once (running or queued in vLLM)
PER_STUDENT_RATE = 20  # new requests a second per student (nginx limit_req), with a burst of 2 * PER_STUDENT
GATE = "servelab.classroom.gate.OneSequencePerRequest"  # vLLM's --middleware: a request asks for one sequence
NGINX = "/usr/sbin/nginx"  # Debian's nginx (`make class-deps`: apt-get install nginx-light)
PATHS = ("/v1/models", "/v1/completions", "/v1/chat/completions", "/version", "/metrics")  # what the lab uses
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")  # a hub user name a key may be issued to


def engine_bounds() -> list[str]:
    """vLLM's own options that bound one request (servelab.classroom.gate), on the class's and the cluster's engines."""
    return ["--override-generation-config", gate.DEFAULTS, "--middleware", GATE]


def speculative_config(k: int = NGRAM_K) -> str:
    return json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4})


# --- keys: one per hub user, kept by root, read by nginx ---------------------------------------------------
def engines_dir(state: Path) -> Path:
    return Path(state) / "engines"


def _existing_engine_ids() -> tuple[int, int] | None:
    """The engines' (uid, gid) when root runs the class and the user exists; else None (nothing is made)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(ENGINE_USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _engine_ids(record: Callable[..., None] = lambda kind, **what: None) -> tuple[int, int] | None:
    """The engines' (uid, gid) when root runs the class; None: the servers run as whoever starts them.

    The user is made on first use, recorded first (`record("user", name=...)`): whoever undoes the record
    (`class down`) removes it once none of its processes runs."""
    if os.geteuid() != 0:
        return None
    ids = _existing_engine_ids()
    if ids is not None:
        return ids
    record("user", name=ENGINE_USER)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"]
        + ["--user-group", ENGINE_USER],
        check=True,
        capture_output=True,
    )
    entry = pwd.getpwnam(ENGINE_USER)
    return entry.pw_uid, entry.pw_gid


def grant(state: Path, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Each name's key for the class's servers, made on first use; the running nginx reloads its key map.

    The keys live in <state>/engines/keys.json (mode 600) and, as nginx's map, in conf/keys.map (readable
    by the engines' user only). A name outside NAME gets no key (ClassError)."""
    for name in names:
        if not NAME.match(name):
            raise ClassError(f"{name!r} cannot be given a key for the class's servers: use a plain user name.")
    folder = engines_dir(state)
    (folder / "conf").mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    with _keys_locked(folder):
        path = folder / "keys.json"
        keys: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        new = [n for n in names if n not in keys]
        for name in new:
            keys[name] = "sl-" + secrets.token_urlsafe(24)
        if new or not (folder / "conf" / "keys.map").exists():
            _write_private(path, json.dumps(keys, indent=1) + "\n")
            _write_key_map(folder, keys)
            reload_proxy(state)
    return {n: keys[n] for n in names}


@contextlib.contextmanager
def _keys_locked(folder: Path):
    """The keys' lock, a file only its owner can open: flock works on a file opened for reading too, so a lock
    anyone could read would let a student hold the hub's spawns (which grant keys) for as long as they liked."""
    fd = os.open(folder / "keys.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a lock an older class left readable by all
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def revoke_all_but(state: Path, names: list[str] | tuple[str, ...]) -> list[str]:
    """Take back the key of every user not in `names` (the class's roster at class up): a student dropped from
    the class, or a user of an earlier class, keeps no identity or share on the servers. The names revoked."""
    folder = engines_dir(state)
    path = folder / "keys.json"
    if not path.exists():
        return []
    with _keys_locked(folder):
        keys: dict[str, str] = json.loads(path.read_text())
        gone = sorted(n for n in keys if n not in names)
        if gone:
            keys = {n: k for n, k in keys.items() if n in names}
            _write_private(path, json.dumps(keys, indent=1) + "\n")
            _write_key_map(folder, keys)
            reload_proxy(state)
    return gone


def key_for(state: Path, name: str) -> str:
    """One hub user's key (what the hub hands their lab as SERVELAB_REMOTE_API_KEY)."""
    return grant(state, [name])[name]


def _write_private(path: Path, text: str, mode: int = 0o600, gid: int = -1) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    tmp.chmod(mode)
    if gid >= 0:
        os.chown(tmp, -1, gid)
    tmp.replace(path)


def _write_key_map(folder: Path, keys: dict[str, str]) -> None:
    """Readable by root and the engines' group where that user exists; the servers' start makes the user
    and writes the map again (a key granted before the servers ever ran makes no user of its own)."""
    ids = _existing_engine_ids()
    conf = folder / "conf"
    if ids is not None:
        os.chown(conf, 0, ids[1])
    conf.chmod(0o750)
    _write_private(conf / "keys.map", key_map(keys), 0o640, ids[1] if ids else -1)


def _rewrite_key_map(folder: Path) -> None:
    """The key map written again from keys.json, under the keys' lock (a key the hub grants meanwhile is kept)."""
    with _keys_locked(folder):
        _write_key_map(folder, json.loads((folder / "keys.json").read_text()))


def key_map(keys: dict[str, str]) -> str:
    """nginx's map of keys to their users (included in nginx_config's `map $http_authorization $student`)."""
    for name, key in keys.items():
        if not NAME.match(name) or not re.fullmatch(r"[A-Za-z0-9_-]+", key):
            raise ClassError(f"{name!r}'s key cannot be written into nginx's key map: use a plain user name.")
    return "".join(f'"Bearer {key}" "{name}";\n' for name, key in sorted(keys.items()))


def _proxy_workers(master: int) -> dict[int, bool]:
    """nginx's worker processes under `master`, read from /proc: pid -> whether it still takes new connections
    (a worker of the configuration before a reload is retitled "worker process is shutting down" and has closed
    its sockets)."""
    workers = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the name in (...) may hold spaces
            if ppid != master:
                continue
            title = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if "worker process" in title:
            workers[int(entry.name)] = "shutting down" not in title
    return workers


def reload_proxy(state: Path, timeout_s: float = 30.0) -> bool:
    """Tell a running nginx of the class to read its key map again (SIGHUP), and return once every worker that
    takes new connections was started by that reload (nginx reloads in the background, so a key granted just
    before would otherwise meet a worker of the old map: 401); False when none runs."""
    pid_file = engines_dir(state) / "run" / "nginx.pid"
    try:
        pid = int(pid_file.read_text().strip())
        before = set(_proxy_workers(pid))
        os.kill(pid, signal.SIGHUP)
    except (OSError, ValueError):
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded: a reload takes milliseconds, seconds on a loaded machine
        taking = [w for w, open_ in _proxy_workers(pid).items() if open_]
        if taking and not before.intersection(taking):
            break
        time.sleep(0.05)
    return True


# --- the proxy's configuration -----------------------------------------------------------------------------
def nginx_config(
    folder: Path,
    ports: dict[str, int],
    per_student: int = PER_STUDENT,
    rate: int = PER_STUDENT_RATE,
    upstreams: dict[str, str] | None = None,
    listen: str = "127.0.0.1",
    stream_logs: bool = False,
    connections: int = 4096,
) -> str:
    """nginx.conf for the class: one server block per engine, each student's share keyed on their key's name.

    One piece: it is the configuration file read top to bottom, as nginx reads it.

    Completions count against the share (limit_conn: requests at once; limit_req: new ones a second, burst
    2 * per_student); the lab's small reads (models, version, metrics) have their own rate, so a point's
    look-ups never eat into its batch. `upstreams`: each engine's address (default: its Unix socket in
    <folder>/run), `listen` the address nginx listens on, and `stream_logs` sends its logs to stderr and
    stdout (a pod's) instead of <folder>/logs: the cluster's gateway (servelab.classroom.cluster) is this
    same configuration in front of the cluster's engines. `connections`: nginx's worker_connections (clients
    and upstreams together), with twice as many files allowed."""
    run, conf, logs = folder / "run", folder / "conf", folder / "logs"
    error_log, access_log = (
        ("/dev/stderr", "/dev/stdout") if stream_logs else (logs / "nginx-error.log", logs / "nginx-access.log")
    )
    address = upstreams or {name: f"unix:{run / f'vllm-{name}.sock'}" for name in ports}
    completions = "|".join(re.escape(p.lstrip("/")) for p in PATHS if "completions" in p)
    reads = "|".join(re.escape(p.lstrip("/")) for p in PATHS if "completions" not in p)
    temp = "\n".join(
        f"  {kind}_temp_path {run / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # each server its own zones: a student's share is per_student at each engine, not split between them
    zones = "\n".join(
        f"  limit_conn_zone $student zone=per_student_{name}:1m;\n"
        f"  limit_req_zone $student zone=per_student_rate_{name}:1m rate={rate}r/s;\n"
        f"  limit_req_zone $student zone=per_student_reads_{name}:1m rate=20r/s;"
        for name in ports
    )
    servers = []
    for name, port in ports.items():
        upstream = f"""      proxy_pass http://vllm_{name};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
      proxy_set_header X-Servelab-Student $student;"""
        servers.append(f"""
  upstream vllm_{name} {{
    server {address[name]};
    keepalive 16;
  }}
  server {{
    listen {listen}:{port};
    default_type application/json;
    error_page 401 = @unauthorized;
    error_page 429 = @over_share;
    location = /health {{ proxy_pass http://vllm_{name}; }}
    location ~ ^/({completions})$ {{
      if ($student = "") {{ return 401; }}
      limit_conn per_student_{name} {per_student};
      limit_req zone=per_student_rate_{name} burst={2 * per_student} nodelay;
{upstream}
      proxy_buffering off;
      proxy_read_timeout 600s;
    }}
    location ~ ^/({reads})$ {{
      if ($student = "") {{ return 401; }}
      limit_req zone=per_student_reads_{name} burst=40 nodelay;
{upstream}
    }}
    location / {{ return 404 '{{"error": "not a path of the class servers: {", ".join(PATHS)}"}}\\n'; }}
    location @unauthorized {{
      return 401 '{{"error": "this class server needs your class key: the hub sets SERVELAB_REMOTE_API_KEY in your lab"}}\\n';
    }}
    location @over_share {{
      add_header Retry-After 1 always;
      return 429 '{{"error": "over your share of the class server: at most {per_student} requests of yours at once (and {rate} new ones a second); wait for yours to finish, or measure at a batch size up to {per_student}"}}\\n';
    }}
  }}""")
    return f"""# Written by servelab.classroom.servers; the class's keys are in keys.map.
worker_processes 1;
worker_rlimit_nofile {2 * connections};
pid {run / "nginx.pid"};
error_log {error_log} warn;
events {{ worker_connections {connections}; }}
http {{
{temp}
  access_log {access_log} combined if=$answered;
  client_max_body_size {gate.MAX_BODY // 1024}k;
  map $http_authorization $student {{
    default "";
    include {conf / "keys.map"};
  }}
{zones}
  limit_conn_status 429;
  limit_req_status 429;
  map $upstream_addr $answered {{  # only what reached vLLM is written down (each bounded by a student's share):
    "" 0;                          # a refusal, a request without a key or for another path writes nothing, so
    default 1;                     # no storm of them fills the disk
  }}
  limit_req_log_level info;  # below error_log's warn: refused requests cost no log line either
  limit_conn_log_level info;
{"".join(servers)}
}}
"""


# --- the engines ------------------------------------------------------------------------------------------
class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 2.0):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class EngineServer(VllmServer):
    """vLLM's OpenAI server on a Unix socket, run as the engines' user (when root starts it)."""

    def __init__(self, args, socket_path: Path, ids: tuple[int, int] | None, home: Path | None, python: str, **kw):
        super().__init__(args, **kw)
        self.socket_path = Path(socket_path)
        self.ids, self.home, self.python = ids, home, python

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[0] = self.python
        return cmd + ["--uds", str(self.socket_path)]

    def start(self) -> "EngineServer":
        if self.proc is not None and self.proc.poll() is None:
            return self
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._ready.clear()
        self.ready_s = None
        env = dict(self.env, VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        if self.home is not None:
            env.update(
                HOME=str(self.home), USER=ENGINE_USER, LOGNAME=ENGINE_USER, XDG_CACHE_HOME=str(self.home / ".cache")
            )
        # vLLM's IPC sockets (ZMQ: VLLM_RPC_BASE_PATH/<uuid4>, vllm/envs.py and utils/network_utils.py, default
        # the temp folder) and every other temporary file in the engines' own run folder: none is left in the
        # machine's /tmp, and no other user reaches one there
        tmp = ipc_dir(self.socket_path.parent)
        tmp.mkdir(mode=0o700, exist_ok=True)
        if self.ids is not None:
            os.chown(tmp, *self.ids)
        env.update(TMPDIR=str(tmp), VLLM_RPC_BASE_PATH=str(tmp))
        env["SERVELAB_GATE_MODEL"] = self.model  # the gate counts prompts with the tokenizer of the model served
        with _private_log(self.log_path) as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(self.home or self.socket_path.parent),
                start_new_session=True,
                **_as_engines(self.ids),
            )
        self.started_at = time.monotonic()
        return self

    def _answers(self, path: str) -> bool:
        connection = _UnixHTTPConnection(str(self.socket_path))
        try:
            connection.request("GET", path)
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()


SOCKET_PATH_MAX = 107  # a Unix socket's path, at most (sun_path is 108 bytes with its NUL)
IPC_NAME = 36  # vLLM's IPC socket's own name in its folder: a uuid4


def ipc_dir(run: Path) -> Path:
    return run / "tmp"


def _check_socket_paths(run: Path) -> None:
    """Every socket the engines make must fit a Unix socket's path: name the state folder when one cannot."""
    longest = max(len(str(ipc_dir(run))) + 1 + IPC_NAME, len(str(run / "vllm-off.sock")))
    if longest > SOCKET_PATH_MAX:
        raise ClassError(
            f"The class's servers keep their sockets under {run}, too long a path for a Unix socket "
            f"({longest} of at most {SOCKET_PATH_MAX} characters): choose a shorter --state."
        )


def _private_log(path: Path):
    """A log opened for writing, readable by its owner only: vLLM's logs name the students' requests."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a log left by an older class may have been readable by all
    return os.fdopen(fd, "wb")


def _as_engines(ids: tuple[int, int] | None) -> dict:
    """Popen's arguments that start a process as the engines' user (no supplementary groups); none for another."""
    if ids is None:
        return {}
    return {"user": ids[0], "group": ids[1], "extra_groups": []}


@dataclass
class ClassServers:
    """The pair, started together behind the class's nginx; `urls` is what the hub hands the lab."""

    model: str = ""  # "" = the bundled model on this CPU; else a folder or hub id
    off_port: int = OFF_PORT
    on_port: int = ON_PORT
    k: int = NGRAM_K
    extra_args: tuple[str, ...] = ()
    log_dir: Path | None = None
    state: Path | None = None  # where keys, sockets and the engines' environment live (default: a new temp folder)
    per_student: int = PER_STUDENT
    per_student_rate: int = PER_STUDENT_RATE
    record: Callable[..., None] | None = None  # journal.record: told of the servers before they start

    def __post_init__(self):
        self._own_state = self.state is None  # a temporary state goes when the servers stop
        if self.state is None:
            self.state = Path(tempfile.mkdtemp(prefix="servelab-servers-"))
            self.state.chmod(0o755)  # the engines' user passes through it to its own folders
        self.state = Path(self.state)
        self.folder = engines_dir(self.state)
        self.ids: tuple[int, int] | None = None
        self.nginx: subprocess.Popen | None = None
        self.connections = "not capped: not started"  # limits.cap_connections's line, once started
        # one sequence per request (servelab.classroom.gate): nginx's share counts requests, vLLM's batch sequences;
        # a request that names no max_tokens gets the gate's cap, not the rest of the context
        self.args = list(self.extra_args) + ["--no-enable-prefix-caching"] + engine_bounds()
        if not self.model:
            self.args = CPU_ARGS + self.args
        self.off = self._engine("off", self.args)
        self.on = self._engine("on", self.args + ["--speculative-config", speculative_config(self.k)])

    def _engine(self, name: str, args: list[str], python: str = "", model: str = "") -> EngineServer:
        import sys

        log = None if self.log_dir is None else Path(self.log_dir) / f"vllm-{name}.log"
        return EngineServer(
            args,
            socket_path=self.folder / "run" / f"vllm-{name}.sock",
            ids=self.ids,
            home=self.folder / "home" if self.ids else None,
            python=python or sys.executable,
            model=model or self.model or None,
            port=self.off_port if name == "off" else self.on_port,
            name=f"class-{name}",
            log_path=log,
        )

    @property
    def urls(self) -> dict[str, str]:
        return {"off": f"http://127.0.0.1:{self.off_port}", "on": f"http://127.0.0.1:{self.on_port}"}

    def grant(self, names) -> dict[str, str]:
        """Keys for these names (see grant())."""
        assert self.state is not None
        return grant(self.state, list(names))

    # --- layout ------------------------------------------------------------------------------------------
    def _lay_out(self) -> None:
        """The engines' folders, owned by their user; their environment and model where that user reads them."""
        import sys

        from .. import model as bundled

        assert self.state is not None
        self.ids = _engine_ids(self.record or (lambda kind, **what: None))
        _check_socket_paths(self.folder / "run")
        for part in ("run", "home", "logs", "conf"):
            (self.folder / part).mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)
        grant(self.state, [])  # keys.json and the key map, even before anyone has a key
        _rewrite_key_map(self.folder)  # now readable by the engines' user, made above
        python, model = sys.executable, self.model
        if self.ids is not None:
            uid, gid = self.ids
            for part, mode in (("run", 0o700), ("home", 0o700), ("logs", 0o750)):
                os.chown(self.folder / part, uid, gid)
                (self.folder / part).chmod(mode)
            _reachable(self.folder, uid)
            from . import studentenv

            python = str(studentenv.build(self.folder)[0])  # <state>/engines/env/venv: no checkout, no root's home
            if not model:
                model = str(_linked_model(bundled.model_dir(), self.folder / "models"))
        self.off = self._engine("off", self.args, python, model)
        self.on = self._engine("on", self.args + ["--speculative-config", speculative_config(self.k)], python, model)
        conf = nginx_config(
            self.folder,
            {"off": self.off_port, "on": self.on_port},
            self.per_student,
            self.per_student_rate,
            connections=_proxy_connections(),
        )
        _write_private(self.folder / "conf" / "nginx.conf", conf, 0o640, self.ids[1] if self.ids else -1)

    def _start_proxy(self) -> None:
        if not Path(NGINX).exists():
            raise ClassError(
                f"The class's servers are reached through Debian's nginx ({NGINX}), which is not installed: "
                "run `make class-deps` (apt-get install nginx-light)."
            )
        log = self.folder / "logs" / "nginx-error.log"
        command = [NGINX, "-p", str(self.folder), "-e", str(log), "-c", str(self.folder / "conf" / "nginx.conf")]
        check = subprocess.run(command + ["-t", "-q"], capture_output=True, text=True, **_as_engines(self.ids))
        if check.returncode != 0:
            raise ClassError(f"nginx refused the class's proxy configuration:\n{check.stderr[-2000:]}")
        with open(log, "ab") as errors:  # what nginx says before it reads its own error_log directive
            self.nginx = subprocess.Popen(
                command + ["-g", "daemon off;"],
                stdout=subprocess.DEVNULL,
                stderr=errors,
                cwd=str(self.folder),  # where `class down` finds it and its workers (journal._undo_engines)
                start_new_session=True,
                **_as_engines(self.ids),
            )

    def _wait_proxy(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.nginx is None or self.nginx.poll() is not None:
                raise ClassError(f"nginx stopped while starting: see {self.folder / 'logs' / 'nginx-error.log'}")
            try:
                with socket.create_connection(("127.0.0.1", self.off_port), timeout=1):
                    with socket.create_connection(("127.0.0.1", self.on_port), timeout=1):
                        return
            except OSError:
                time.sleep(0.2)
        raise ClassError(f"nginx did not listen on {self.off_port} and {self.on_port} within {timeout_s:.0f} s")

    def start(self, timeout_s: float = 600) -> dict[str, float]:
        """Start both engines and the proxy, wait until both engines answer; seconds each took. Stops all on failure."""
        try:
            require_port(self.off_port, "server without speculation", "--off-port")
            require_port(self.on_port, "server with speculation", "--on-port")
            self._lay_out()
            if self.record is not None:  # `class down` finds them by this, whatever happens to their starter
                self.record("engines", uid=self.ids[0] if self.ids else os.getuid(), folder=str(self.folder))
            assert self.state is not None
            self.connections = limits.cap_connections(
                self.state, [self.off_port, self.on_port], record=self.record or (lambda kind, **what: None)
            )
            self.off.start()
            self.on.start()
            self._start_proxy()
            self._wait_proxy()
            return {"off": self.off.wait_ready(timeout_s), "on": self.on.wait_ready(timeout_s)}
        except (ServerError, ClassError, OSError, subprocess.CalledProcessError) as exc:
            self.stop()
            raise ClassError(str(exc)) from exc

    def processes(self) -> list[subprocess.Popen]:
        return [p for p in (self.off.proc, self.on.proc, self.nginx) if p is not None]

    def stop(self) -> None:
        self.off.stop()
        self.on.stop()
        proxy, self.nginx = self.nginx, None
        if proxy is not None and proxy.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proxy.pid, signal.SIGTERM)  # nginx's fast shutdown: master and workers
            try:
                proxy.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proxy.pid, signal.SIGKILL)
                proxy.wait(5)
        if self.connections.startswith("capped") and self.state is not None:
            limits.uncap_connections(limits.connection_table(self.state))
            self.connections = "not capped: the servers have stopped"
        if self._own_state and self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def _proxy_connections(most: int = 16384) -> int:
    """nginx's worker_connections: `most`, or half the files this process may open (nginx, started from it, may
    raise its own limit only that far; each proxied request holds a client's and an upstream's connection).
    With limits.CONNECTIONS_PER_USER, 16384 holds every connection of 128 users at once and their upstreams."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return most if hard == resource.RLIM_INFINITY else max(1024, min(most, hard // 2))


def _reachable(folder: Path, uid: int) -> None:
    """The engines' user must pass every folder above its own: name the first that it cannot."""
    for parent in reversed(folder.resolve().parents):
        st = parent.stat()
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            raise ClassError(
                f"{parent} is closed to other users, so the class's servers (run as {ENGINE_USER}) cannot reach "
                f"{folder}: choose a --state outside it (default /var/lib/servelab-class)."
            )


def _linked_model(source: Path, models: Path) -> Path:
    """The prepared model as hard links under `models` (a copy across filesystems), readable by the engines."""
    if not (source / "config.json").is_file():
        raise ClassError(f"The bundled model is not prepared at {source}: run `make model` (servelab prepare-model).")
    target = models / source.name
    if target.exists():
        shutil.rmtree(target)
    models.mkdir(parents=True, exist_ok=True)
    models.chmod(0o755)

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(source, target, copy_function=link)
    for folder, _dirs, files in os.walk(target):
        os.chmod(folder, 0o755)
        for f in files:
            p = os.path.join(folder, f)
            os.chmod(p, os.stat(p).st_mode | 0o444)
    return target
