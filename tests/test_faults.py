"""Faults the workbook must survive, tried for real: kill -9, two kernels, a CLI given a bad engine, bad servers.

Each test ends the same way: nothing already stored is lost, and the person at
the keyboard gets one clear message instead of a hang or a traceback. The list
of every fault and bad input the suite tries, with what each shows, is in
tests/faults.md.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from servelab.results import ResultsStore

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])
    env.update(extra)
    return env


# --- the results store under a real kill -9 -------------------------------------------------------
WRITER = textwrap.dedent("""
    import os, sys
    from servelab import results
    from servelab.results import ResultsStore

    path, name, pad_bytes, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if chunk:
        # A slow disk: each write reaches the file in small pieces, so a kill lands mid-record.
        real_write = os.write
        def slow_write(fd, data):
            view, done = memoryview(data), 0
            while done < len(view):
                done += real_write(fd, view[done:done + chunk])
                for _ in range(2000):
                    pass
            return done
        results.os.write = slow_write
    store = ResultsStore(path)
    pad = "x" * pad_bytes
    i = 0
    while True:
        store.append({"writer": name, "seq": i, "pad": pad})
        print(i, flush=True)  # acknowledged: append() returned, the record is on disk
        i += 1
""")


def _run_writer(path: Path, name: str, pad_bytes: int, chunk: int, acks_before_kill: int, delay_s: float) -> list[int]:
    """Start a writer, let it acknowledge some records, kill -9 it a moment later; return the acknowledged seqs."""
    proc = subprocess.Popen(
        [PYTHON, "-c", WRITER, str(path), name, str(pad_bytes), str(chunk)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    acked = []
    try:
        while len(acked) < acks_before_kill:
            line = proc.stdout.readline()
            assert line, f"writer {name} died before writing"
            acked.append(int(line))
        time.sleep(delay_s)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        acked += [int(x) for x in proc.stdout.read().split()]  # acknowledged before the signal landed
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return acked


def _read_checked(path: Path) -> tuple[list[dict], int]:
    """Read the store; return its records and how many damaged lines it warned about."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = ResultsStore(path).read()
    damaged = [w for w in caught if "damaged record" in str(w.message)]
    assert len(damaged) == len(caught), [str(w.message) for w in caught]
    return records, len(damaged)


def _assert_nothing_acknowledged_is_lost(records: list[dict], acked: dict[str, list[int]]) -> None:
    by_writer: dict[str, list[int]] = {}
    for r in records:
        assert r["pad"] == "x" * len(r["pad"])  # a whole record, not two halves glued together
        by_writer.setdefault(r["writer"], []).append(r["seq"])
    for name, seqs in acked.items():
        stored = by_writer.get(name, [])
        # every acknowledged record is there, in order; at most the one in flight beyond it
        assert stored[: len(seqs)] == sorted(seqs) == list(range(len(seqs))), (name, stored[:5], seqs[:5])
        assert len(stored) <= len(seqs) + 1


def test_kill_9_of_a_writing_process_loses_only_the_record_in_flight(tmp_path):
    """Writers appending in a loop are killed with SIGKILL over and over; the file is read back each time.

    Round 1 uses the store exactly as shipped; then writers on a slow disk (each record reaches the
    file in small pieces) are killed mid-record, so a torn line is certain. Every acknowledged record
    survives; torn lines are skipped with a warning; the next writer's records are whole."""
    path = tmp_path / "results.jsonl"
    acked: dict[str, list[int]] = {}
    acked["plain"] = _run_writer(path, "plain", 200_000, 0, acks_before_kill=3, delay_s=random.uniform(0, 0.02))
    records, damaged = _read_checked(path)
    _assert_nothing_acknowledged_is_lost(records, acked)

    torn_seen = 0
    for round_ in range(8):
        name = f"slow{round_}"
        acked[name] = _run_writer(path, name, 400_000, 4096, acks_before_kill=1, delay_s=random.uniform(0.005, 0.03))
        raw = path.read_bytes()
        torn_now = not raw.endswith(b"\n")
        records, damaged = _read_checked(path)
        _assert_nothing_acknowledged_is_lost(records, acked)
        torn_seen += torn_now
        assert damaged >= torn_seen  # each torn record is reported, none silently dropped or raised
        if torn_seen >= 2:
            break
    assert torn_seen >= 1, "no kill landed mid-record in 8 rounds: the slow-disk writer is too fast"

    # After the damage, a fresh process appends: its records are whole and readable.
    acked["after"] = _run_writer(path, "after", 1000, 0, acks_before_kill=2, delay_s=0)
    records, damaged = _read_checked(path)
    _assert_nothing_acknowledged_is_lost(records, acked)
    # every torn record is reported; a kill can also land between a writer's separator and its record,
    # leaving one more short damaged line that the file's last byte does not show
    assert torn_seen <= damaged <= torn_seen + 1
    assert path.read_bytes().count(b"\n") >= len(records)


# --- two notebook kernels writing the same store ---------------------------------------------------
KERNEL_WRITER = """
import os, time
from servelab.results import ResultsStore
store = ResultsStore({path!r})
while time.time() < {start_at!r}:
    time.sleep(0.002)
for i in range({n}):
    store.append({{"writer": {name!r}, "pid": os.getpid(), "seq": i, "pad": "x" * 20000}})
print("wrote", {n})
"""


@pytest.mark.timeout(180)
def test_two_kernels_appending_at_once_never_interleave_lines(tmp_path):
    """Two real ipykernel kernels (as two open notebooks would be) append to one store at the same moment."""
    from jupyter_client.manager import start_new_kernel

    path, n = tmp_path / "results.jsonl", 150
    kernels = []
    try:
        for _ in range(2):
            kernels.append(start_new_kernel(kernel_name="python3", startup_timeout=90, cwd=str(tmp_path)))
        start_at = time.time() + 2.0
        msg_ids = {}
        for name, (_, kc) in zip(("kernel-a", "kernel-b"), kernels):
            msg_ids[name] = kc.execute(KERNEL_WRITER.format(path=str(path), start_at=start_at, n=n, name=name))
        for name, (_, kc) in zip(msg_ids, kernels):
            while True:
                reply = kc.get_shell_msg(timeout=120)
                if reply["parent_header"].get("msg_id") == msg_ids[name]:
                    break
            assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        for km, kc in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a damaged line would warn
        records = ResultsStore(path).read()
    assert len(path.read_bytes().splitlines()) == 2 * n
    order = [r["writer"] for r in records]
    for name in ("kernel-a", "kernel-b"):
        assert [r["seq"] for r in records if r["writer"] == name] == list(range(n))
    assert len({r["pid"] for r in records}) == 2  # two processes, not one
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches >= 2, "the two kernels did not write at the same time; the test proved nothing"


# --- the CLI when the engine cannot start ----------------------------------------------------------
def _sweep(tmp_path, *args, timeout=300, **env):
    cmd = [PYTHON, "-m", "servelab.cli", "sweep", "--results", str(tmp_path / "results.jsonl"), *args]
    t0 = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=_env(**env))
    return result, time.monotonic() - t0


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:") or ": error:" in line]
    assert lines, f"no 'error:' line in:\n{stderr}"
    return lines[0]


def _assert_no_traceback_from_servelab(stderr: str) -> None:
    # vLLM's own log may be quoted below the message; servelab itself must not crash with a traceback.
    assert (
        'servelab/cli.py", line' not in stderr
        and "Traceback (most recent call last)" not in stderr.split("--- last lines of the engine log ---")[0]
    ), stderr


def test_cli_sweep_without_the_model_says_prepare_model_and_exits_2(tmp_path):
    result, took = _sweep(tmp_path, "--spec", "none", "--batch", "1", SERVELAB_CACHE=str(tmp_path / "empty-cache"))
    assert result.returncode == 2, result.stderr
    line = _error_line(result.stderr)
    assert "No model at" in line and "servelab prepare-model" in line
    _assert_no_traceback_from_servelab(result.stderr)
    assert took < 30  # fails before the 40-second engine start
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--kv-cache-gb", "-1"], "kv_cache_gb must be positive"),
        (["--spec", "ngram", "--k", "0"], "needs k >= 1"),
        (["--batch", "0"], "batch sizes must be whole numbers of at least 1"),
        (["--batch", "1,two"], "expected comma-separated whole numbers"),
        (["--spec", "medusa"], "invalid choice: 'medusa'"),
    ],
)
def test_cli_sweep_bad_inputs_exit_2_with_one_line(tmp_path, args, says):
    result, took = _sweep(tmp_path, *args, timeout=60)
    assert result.returncode == 2, result.stderr
    assert says in _error_line(result.stderr)
    _assert_no_traceback_from_servelab(result.stderr)
    assert took < 30


@pytest.mark.slow
def test_cli_sweep_with_a_dtype_vllm_rejects_exits_2_and_names_it(tmp_path):
    """vLLM itself refuses the config (it validates dtype when the engine starts): exit 2, vLLM's reason shown."""
    result, took = _sweep(tmp_path, "--spec", "none", "--batch", "1", "--dtype", "bogus")
    assert result.returncode == 2, result.stderr
    line = _error_line(result.stderr)
    assert "did not start" in line and "dtype" in result.stderr.split("--- last lines")[0]
    _assert_no_traceback_from_servelab(result.stderr)
    assert not (tmp_path / "results.jsonl").exists()


@pytest.fixture(scope="module")
def too_little_kv_cache(tmp_path_factory):
    """One CLI run, shared by the two tests below: batch 64 with 0.01 GiB of KV cache."""
    tmp = tmp_path_factory.mktemp("kv")
    result, took = _sweep(tmp, "--spec", "none", "--batch", "64", "--kv-cache-gb", "0.01")
    return result, took, tmp


@pytest.mark.slow
def test_cli_sweep_with_too_little_kv_cache_exits_2(too_little_kv_cache):
    """0.01 GiB of KV cache cannot hold the batch (nor one 1024-token request): exit 2, no traceback."""
    result, took, tmp = too_little_kv_cache
    assert result.returncode == 2, result.stderr
    _error_line(result.stderr)
    _assert_no_traceback_from_servelab(result.stderr)
    assert "KV cache" in result.stderr
    assert not (tmp / "results.jsonl").exists()


@pytest.mark.slow
def test_cli_too_little_kv_cache_is_named_in_the_error_line_without_vllm_frames(too_little_kv_cache):
    result, took, tmp = too_little_kv_cache
    line = _error_line(result.stderr)
    assert "KV cache" in line and ("kv_cache_gb" in line or "kv-cache-gb" in line), line
    assert '  File "' not in result.stderr, "vLLM's traceback frames are shown to the learner"
    assert took < 30, f"took {took:.0f} s: the batch could be checked before the engine starts"


# --- a remote server that refuses, stalls or fails ------------------------------------------------------
REMOTE_TIMEOUT_S = 1.5
HANG_MARGIN_S = 4.0  # what the test tolerates beyond the stated timeout before it calls it a hang


class _FakeVllm(BaseHTTPRequestHandler):
    """A stand-in for `vllm serve` that misbehaves in the way the server's `mode` says."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _send(self, code: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        mode = self.server.mode
        if mode == "error500":
            return self._send(500, "Internal Server Error: CUDA error: an illegal memory access", "text/plain")
        if mode == "not_json" and self.path == "/v1/models":
            return self._send(200, "<html><body>Please log in to the proxy</body></html>", "text/html")
        if mode == "no_models" and self.path == "/v1/models":
            return self._send(200, json.dumps({"object": "list", "data": []}))
        if self.path == "/v1/models":
            return self._send(200, json.dumps({"object": "list", "data": [{"id": "SmolLM2-135M-Instruct"}]}))
        if self.path == "/version":
            return self._send(200, json.dumps({"version": "0.32.0"}))
        return self._send(404, "not found", "text/plain")

    def do_POST(self):
        mode = self.server.mode
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if mode == "chat503":
            return self._send(503, json.dumps({"error": {"message": "server overloaded, retry later"}}))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}
        try:
            if mode == "garbage_stream":
                self.wfile.write(b"data: {this is not json\n\n")
                self.wfile.flush()
                return
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            if mode == "stall_mid_stream":
                self.server.release.wait(60)  # the server hangs after the first token
            elif mode == "trickle":
                while not self.server.release.wait(0.2):  # keep-alive comments, never another token
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hangs up mid-answer is part of the test
        pass


class FakeServer:
    def __init__(self, mode: str):
        self.httpd = _QuietServer(("127.0.0.1", 0), _FakeVllm)
        self.httpd.mode = mode
        self.httpd.release = threading.Event()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class SilentServer:
    """Accepts connections and never says a word: a server stuck while loading, or a firewall that drops."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns = []
        self._stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                continue

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self.thread.join(2)
        for c in self.conns:
            c.close()
        self.sock.close()


def refused_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _measure_with_deadline(url: str, what: str = "measure"):
    """Call the remote client in a thread; return (exception, seconds), or fail if it outlives the margin."""
    from servelab.remote import RemoteServer

    server = RemoteServer(url, timeout_s=REMOTE_TIMEOUT_S)
    box = {}

    def call():
        try:
            box["value"] = server.measure("copy", 2, 16) if what == "measure" else server.info()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t0 = time.monotonic()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(REMOTE_TIMEOUT_S + HANG_MARGIN_S)
    took = time.monotonic() - t0
    assert not thread.is_alive(), f"the remote client still waits after {took:.0f} s (timeout_s={REMOTE_TIMEOUT_S})"
    assert "value" not in box, f"a broken server produced a record: {box.get('value')}"
    return box["error"], took


# A closed port, a socket that never answers and an HTTP 500 are tried in test_remote.py (the client) and
# test_faults_lab.py (the lab's status line); these are the other ways a server goes wrong.
@pytest.mark.parametrize(
    "mode, says",
    [
        ("not_json", "did not answer with JSON"),
        ("no_models", "lists no model"),
        ("chat503", "HTTP 503"),
        ("garbage_stream", "not JSON"),
        ("stall_mid_stream", f"did not answer within {REMOTE_TIMEOUT_S:g} s"),
    ],
)
def test_remote_server_faults_give_a_clear_message_within_the_timeout(mode, says):
    from servelab.remote import RemoteError

    with FakeServer(mode) as server:
        error, took = _measure_with_deadline(server.url)
    assert isinstance(error, RemoteError), f"{type(error).__name__}: {error}"
    message = str(error)
    assert says in message, message
    assert "127.0.0.1" in message  # says which server
    assert "Traceback" not in message and len(message) < 600
    assert took < REMOTE_TIMEOUT_S + HANG_MARGIN_S


def test_remote_server_that_only_sends_keepalives_is_given_up_on():
    with FakeServer("trickle") as server:
        error, took = _measure_with_deadline(server.url)
    assert "did not" in str(error)
