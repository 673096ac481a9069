"""`servelab class servers`: the class's two vLLM servers start, answer, and serve the lab's remote backend,
each student with their own key and a bounded share, the servers run by their own unprivileged user."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from servelab.classroom import ClassError, load
from servelab.classroom.servers import ENGINE_USER, ClassServers
from servelab.remote import RemoteError, RemoteServer

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_taken_port_is_refused_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        servers = ClassServers(off_port=taken.getsockname()[1], on_port=free_port())
        with pytest.raises(ClassError, match="--off-port"):
            servers.start()
        assert servers.off.proc is None and servers.on.proc is None


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    from servelab import model

    if not (model.model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    with ClassServers(off_port=free_port(), on_port=free_port(), log_dir=tmp_path_factory.mktemp("vllm")) as pair:
        yield pair


@pytest.fixture(scope="module")
def keys(servers):
    return servers.grant(["ada", "bo", "s0", "s1", "s2", "s3"])


def test_both_servers_answer_and_the_lab_measures_a_point_on_each(servers, keys, monkeypatch):
    monkeypatch.setenv("SERVELAB_REMOTE_API_KEY", keys["ada"])  # as the hub hands it to her lab
    off = RemoteServer(servers.urls["off"], timeout_s=120)
    on = RemoteServer(servers.urls["on"], method="ngram", num_speculative_tokens=4, timeout_s=120)
    assert off.info()["model"] == on.info()["model"]
    plain, spec = off.measure("copy", 1, 16, min_requests=1), on.measure("copy", 1, 16, min_requests=1)
    assert plain.num_draft_tokens in (None, 0) and spec.num_draft_tokens > 0  # only one speculates
    for server in (servers.off, servers.on):  # vLLM's own account of how it was started
        assert "enable_prefix_caching=False" in server.log_path.read_text(errors="replace")
    assert plain.output_tokens == spec.output_tokens == 16


def test_the_servers_batch_is_the_class_s(servers, keys, monkeypatch):
    """A few students at the batch-1 and batch-2 sliders put more requests in the server's batch than one."""
    url = {"off": servers.urls["off"]}
    monkeypatch.setenv("SERVELAB_REMOTE_API_KEY", keys["bo"])  # the batch sampler reads /metrics as bo
    students = [keys[f"s{i}"] for i in range(4)]
    alone = load.run_class(url, 1, batch_sizes=(1, 2), timeout_s=120, keys=students)
    together = load.run_class(url, 4, batch_sizes=(1, 2), timeout_s=120, keys=students)
    for run, students in ((alone, 1), (together, 4)):
        assert [s["requests"] for s in run["per_student"]] == [3] * students  # nobody's point was lost
        assert run["servers"]["off"]["requests"] == 3 * students
    alone_batch = alone["servers"]["off"]["num_requests_running_peak"]
    together_batch = together["servers"]["off"]["num_requests_running_peak"]
    assert 1 <= alone_batch <= 2  # one student: the slider is the batch
    assert together_batch > 2, together  # four students: the batch is the class's


def test_a_request_without_a_class_key_is_refused_and_one_students_share_is_bounded(servers, keys):
    """No key, a made-up key: 401 with what to do. One student's share + 4 requests at once: at most the share
    runs, the rest are refused at once (429, the share named), and a classmate's request meanwhile is served."""
    url = servers.urls["off"]
    for key in ("", "sl-made-up"):
        with pytest.raises(RemoteError, match="SERVELAB_REMOTE_API_KEY"):
            RemoteServer(url, api_key=key, timeout_s=60).info()
    share = servers.per_student
    ada = [RemoteServer(url, api_key=keys["ada"], timeout_s=120) for _ in range(share + 4)]
    bo = RemoteServer(url, api_key=keys["bo"], timeout_s=120)
    for server in ada + [bo]:
        server.info()  # the model's name, asked once each, before the burst

    async def burst():
        return await asyncio.gather(
            *(s.astream(["Say hi."], 4) for s in ada), bo.astream(["Say hi."], 4), return_exceptions=True
        )

    *hers, his = asyncio.run(burst())
    refused = [r for r in hers if isinstance(r, RemoteError)]
    assert len(refused) >= 4 and len(hers) - len(refused) <= share, hers
    assert all("429" in str(r) and f"at most {share} requests" in str(r) for r in refused)
    assert not isinstance(his, BaseException) and his[0].output_tokens == 4  # the classmate was served
    # a refusal is cheap: no line in either of nginx's logs (a retry storm would write one for each)
    logs = servers.folder / "logs"
    answered = (logs / "nginx-access.log").read_text()
    assert '" 200 ' in answered and '" 429 ' not in answered
    assert "limiting" not in (logs / "nginx-error.log").read_text()


def test_only_the_lab_s_paths_pass_and_vllm_is_reached_only_through_the_proxy(servers, keys):
    url = servers.urls["off"]
    for path in ("/tokenize", "/invocations", "/v1/load_lora_adapter", "/docs"):
        request = urllib.request.Request(url + path, data=b"{}", headers={"Authorization": f"Bearer {keys['ada']}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 404, path
    with pytest.raises(urllib.error.HTTPError) as nokey:
        urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", data=b"{}"), timeout=30)
    assert nokey.value.code == 401
    # none of them reached vLLM, and none is written down: a storm of them would fill the disk the class is on
    logged = (servers.folder / "logs" / "nginx-access.log").read_text()
    assert not [line for line in logged.splitlines() if '" 404 ' in line or '" 401 ' in line], logged[-2000:]
    for engine in (servers.off, servers.on):
        assert "--uds" in engine.command()  # vLLM listens on a Unix socket, not on a port any local user can open
        assert engine.socket_path.is_socket()
    if os.geteuid() != 0:
        pytest.skip("the engines' own system user and another user's view need root")
    engines = pwd.getpwnam(ENGINE_USER).pw_uid
    for proc in servers.processes():  # vLLM's two API servers and nginx's master: none of them root
        status = open(f"/proc/{proc.pid}/status").read()
        assert [int(u) for u in status.split("Uid:")[1].split()[:4]] == [engines] * 4
    knock = f"import socket; socket.socket(socket.AF_UNIX).connect({str(servers.off.socket_path)!r})"
    other = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", knock], capture_output=True, text=True, cwd="/"
    )
    assert other.returncode != 0 and "PermissionError" in other.stderr


def test_the_servers_keep_their_files_to_themselves(servers):
    """vLLM's IPC sockets and temporary files are in the engines' own run folder, none in the machine's /tmp;
    the logs are readable by their owner only (they name the students' requests)."""
    for engine in (servers.off, servers.on):
        assert engine.log_path.stat().st_mode & 0o077 == 0, engine.log_path
    if os.geteuid() != 0:
        pytest.skip("the engines' own system user needs root")
    engines = pwd.getpwnam(ENGINE_USER).pw_uid
    assert not [p for p in Path(tempfile.gettempdir()).iterdir() if p.lstat().st_uid == engines]
    run = servers.folder / "run" / "tmp"
    assert list(run.iterdir()) and run.stat().st_uid == engines and run.stat().st_mode & 0o077 == 0


def test_each_user_gets_one_key_of_their_own_which_only_root_and_the_proxy_read(tmp_path):
    from servelab.classroom import servers as class_servers

    state = tmp_path / "state"
    first = class_servers.grant(state, ["ada", "bo"])
    again = class_servers.key_for(state, "ada")
    assert again == first["ada"] and first["ada"] != first["bo"] and len(first["ada"]) > 30  # stable, unguessable
    folder = class_servers.engines_dir(state)
    assert (folder / "keys.json").stat().st_mode & 0o777 == 0o600
    key_map = (folder / "conf" / "keys.map").read_text().splitlines()
    assert key_map == [f'"Bearer {first["ada"]}" "ada";', f'"Bearer {first["bo"]}" "bo";']
    assert (folder / "conf" / "keys.map").stat().st_mode & 0o007 == 0 and (folder / "conf").stat().st_mode & 0o007 == 0
    if os.geteuid() == 0:  # the proxy's user reads the map through its group (once the servers made it), nobody else
        try:
            group = pwd.getpwnam(ENGINE_USER).pw_gid
        except KeyError:
            group = 0
        assert (folder / "conf" / "keys.map").stat().st_gid == group
    # the keys' lock: a file anyone could open could be flocked by anyone (a read-only open is enough), holding
    # every spawn of the hub, which grants keys; an older class's lock readable by all is closed on first use
    lock = folder / "keys.lock"
    assert lock.stat().st_mode & 0o777 == 0o600 and lock.stat().st_uid == os.geteuid()
    lock.chmod(0o644)
    class_servers.grant(state, ["cy"])
    assert lock.stat().st_mode & 0o777 == 0o600
    for name in ('ada" "root', "ada;\ninclude /etc/passwd", ""):
        with pytest.raises(ClassError, match="cannot be given a key"):
            class_servers.grant(state, [name])
    assert class_servers.grant(state, ["ada"]) == {"ada": first["ada"]}  # nothing was added by the refusals


def test_class_down_removes_the_engines_user_once_nothing_of_it_runs():
    """The servers' system user is in the class's journal; undoing that line keeps the user while a process of
    it runs (and says which), and removes the user and its own group after."""
    from servelab.classroom import journal

    if os.geteuid() != 0:
        pytest.skip("making a system user needs root")
    name = "servelab-undo-" + os.urandom(3).hex()
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", name], check=True)
    try:
        sleeper = subprocess.Popen(["sleep", "60"], user=name)
        try:
            said = journal.UNDO["user"]({"name": name})
            assert f"user {name} kept" in said and str(sleeper.pid) in said, said
            assert pwd.getpwnam(name)
        finally:
            sleeper.kill()
            sleeper.wait()
        assert journal.UNDO["user"]({"name": name}) == f"user {name} removed"
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
        assert subprocess.run(["getent", "group", name], capture_output=True).returncode != 0
        assert journal.UNDO["user"]({"name": name}) == ""  # undone twice (a crash between): nothing left to do
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", name], capture_output=True)


HOLD = """
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held, refused = [], 0
for _ in range(n):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        held.append(s)
    except OSError:
        refused += 1
print(len(held), refused, flush=True)
sys.stdin.read()  # holds them until the test lets go
"""

HEALTH = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"GET /health HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
print(s.recv(64).split(b"\\r\\n")[0].decode())
"""


def test_one_user_cannot_take_every_connection_of_the_servers(servers):
    """A user who opens connections and never finishes a request is capped by the kernel (nftables' per-user count)
    at limits.CONNECTIONS_PER_USER: a classmate, another user, still connects and is answered meanwhile."""
    from servelab.classroom import limits

    if os.geteuid() != 0:
        pytest.skip("the cap is root's nftables table")
    if servers.connections.startswith("not capped: nftables refused"):
        pytest.skip(servers.connections)  # a kernel without nf_tables: `class servers` says so, as it does here
    assert servers.connections.startswith("capped"), servers.connections
    port, cap = servers.off_port, limits.CONNECTIONS_PER_USER
    hog = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", HOLD, str(port), str(cap + 20)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert hog.stdout is not None
        held, refused = map(int, hog.stdout.readline().split())
        assert (held, refused) == (cap, 20)
        other = subprocess.run(
            ["runuser", "-u", "daemon", "--", "/usr/bin/python3", "-c", HEALTH, str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.stdout.strip() == "HTTP/1.1 200 OK", other
    finally:
        hog.communicate("", timeout=30)
    again = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", HEALTH, str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.stdout.strip() == "HTTP/1.1 200 OK", again  # the count is of connections open, not ever opened


def test_the_connection_cap_is_recorded_and_class_down_deletes_it(tmp_path):
    from servelab.classroom import journal, limits

    if os.geteuid() != 0:
        pytest.skip("the cap is root's nftables table")
    recorded = []
    said = limits.cap_connections(tmp_path, [1], record=lambda kind, **what: recorded.append((kind, what)))
    table = limits.connection_table(tmp_path)
    if said.startswith("not capped: nftables refused"):
        pytest.skip(said)
    assert said.startswith("capped") and recorded == [("nft", {"table": table})], said
    listed = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True)
    assert "ct count over" in listed.stdout and "meta skuid" in listed.stdout
    assert journal.UNDO["nft"]({"table": table}) == f"nftables table {table} deleted"
    assert subprocess.run(["nft", "list", "table", "inet", table], capture_output=True).returncode != 0
    assert journal.UNDO["nft"]({"table": table}) == ""  # undone twice: nothing left to do


LISTEN = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
s.settimeout(60)
try:
    c, _ = s.accept()
    c.sendall(b"answered")
    c.close()
except OSError:
    pass
"""


@contextlib.contextmanager
def _listening(user: str, port: int):
    """`user` listening on `port` (runuser keeps a parent: the whole session goes at the end)."""
    listener = subprocess.Popen(
        ["runuser", "-u", user, "--", "/usr/bin/python3", "-c", LISTEN, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        yield
    finally:
        os.killpg(listener.pid, signal.SIGKILL)
        listener.wait(timeout=30)


def _connect(port: int, timeout_s: float) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            return s.recv(16).decode() or "connected"
    except TimeoutError:
        return "no answer"
    except ConnectionRefusedError:
        return "refused"


def test_only_the_servers_user_answers_on_their_ports_while_the_class_runs(tmp_path):
    """A student who listens on a class server's port while the servers are stopped would be sent a classmate's
    key: with the class's guard (what `class up` writes), her listening socket never completes a connection,
    the servers' own user's does, and a port nobody listens on still says so at once."""
    from servelab.classroom import journal, limits

    if os.geteuid() != 0:
        pytest.skip("the guard is root's nftables table")
    port = free_port()
    recorded = []
    said = limits.guard_ports(tmp_path, [port], "daemon", record=lambda kind, **what: recorded.append((kind, what)))
    if said.startswith("not guarded: nftables refused"):
        pytest.skip(said)
    table = limits.guard_table(tmp_path)
    try:
        assert said.startswith("guarded") and recorded == [("nft", {"table": table})], said
        assert _connect(port, 5) == "refused"  # nobody listens: the reset goes out as before
        for user, answer in (("nobody", "no answer"), ("daemon", "answered")):
            with _listening(user, port):
                # a loopback handshake takes microseconds: 3 s without one is a dropped SYN-ACK, not a slow machine
                assert _connect(port, 3 if answer == "no answer" else 30) == answer, user
    finally:
        assert journal.UNDO["nft"]({"table": table}) == f"nftables table {table} deleted"
    with _listening("nobody", port):
        assert _connect(port, 30) == "answered"  # the guard deleted, anyone's socket answers again


SELF_CONNECT = """
import socket, sys
n = int(sys.argv[1])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4096)
held, refused = [], 0
for _ in range(n):
    s = socket.socket()
    try:
        s.connect(listener.getsockname())
        held.append(s)
    except OSError:
        refused += 1
print(len(held), refused, flush=True)
sys.stdin.read()  # holds them until the test lets go
"""


def test_a_class_user_cannot_fill_the_kernels_connection_table(tmp_path):
    """Loopback connections between a student's own sockets each take an entry of the kernel's connection
    tracking table, which drops every new connection on the machine once full: the class caps each of its users
    (cap_flows, what `class up` writes), and a user outside the cap still connects meanwhile."""
    from servelab.classroom import journal, limits

    if os.geteuid() != 0:
        pytest.skip("the cap is root's nftables table")
    recorded = []
    said = limits.cap_flows(
        tmp_path, ["nobody"], record=lambda kind, **what: recorded.append((kind, what)), per_user=40
    )
    if said.startswith("not capped: nftables refused") or said.startswith("not capped: the kernel tracks"):
        pytest.skip(said)
    table = limits.flows_table(tmp_path)
    try:
        assert said.startswith("capped") and recorded == [("nft", {"table": table})], said
        hog = subprocess.Popen(
            ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", SELF_CONNECT, "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert hog.stdout is not None
            held, refused = map(int, hog.stdout.readline().split())
            assert (held, refused) == (40, 20)
            other = subprocess.run(
                ["runuser", "-u", "daemon", "--", "/usr/bin/python3", "-c", SELF_CONNECT, "60"],
                input="",
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert other.stdout.split() == ["60", "0"], other  # not a user of the class
        finally:
            hog.communicate("", timeout=30)
    finally:
        assert journal.UNDO["nft"]({"table": table}) == f"nftables table {table} deleted"
