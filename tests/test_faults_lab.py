"""Faults the lab must survive, tried at the lab controller: what a click on Measure does when things break.

A learner's lab is a SpecDecodeLab in a notebook kernel. These tests drive it the
way the widgets do (lab.set(...) is a control moved, lab.measure() is a click on
Measure) and read what the learner reads: the status line and the results store.
The real engine runs in two: killed mid-sweep (then restarted), and a start vLLM
refuses. Stand-ins play the engine where the test is about queueing or about
what happens before any start.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import pytest

from servelab.lab import Settings, SpecDecodeLab
from servelab.lab.speculation.engines import EnginePool
from servelab.lab.speculation.points import BATCHES
from servelab.measurement import Measurement
from servelab.results import ResultsStore

REPO = Path(__file__).resolve().parent.parent
LAB_NOTEBOOK = REPO / "labs" / "spec_decode_lab.ipynb"
OUTPUT_LEN = 16  # the shortest output the lab offers: a point costs seconds, not minutes


def _lab(tmp_path, **kwargs) -> SpecDecodeLab:
    """A lab that measures live (offline=""), with its own store and no recorded points to skip over."""
    kwargs.setdefault("settings", Settings(method="none", batch_size=1, output_len=OUTPUT_LEN))
    kwargs.setdefault("prestart", False)  # each test says when an engine starts
    return SpecDecodeLab(
        store=ResultsStore(tmp_path / "results.jsonl"),
        recorded=tmp_path / "nothing-recorded.jsonl",
        offline="",
        **kwargs,
    )


def _fake_record(point) -> Measurement:
    b, s = point.batch_size, point.settings
    n = max(8, b)
    return Measurement(
        method=point.method,
        num_speculative_tokens=0 if point.method == "none" else s.k,
        batch_size=b,
        workload=s.workload,
        output_len=s.output_len,
        num_requests=n,
        prompt_tokens=100 * n,
        output_tokens=s.output_len * n,
        elapsed_s=1.0,
        output_tok_s=float(s.output_len * n),
        request_throughput=float(n),
        ttft_ms_p50=50.0,
        ttft_ms_p99=60.0,
        tpot_ms_p50=40.0,
        tpot_ms_p99=45.0,
        hardware="test double",
        note="a stand-in point: this test is about queueing, not speed",
    )


# --- clicks and slider moves faster than measurements -----------------------------------------------
POINT_S = 0.2  # one fake point, once the clicks are over


def test_measure_clicks_faster_than_measurements_do_not_pile_up(tmp_path):
    """Eight clicks in a row, each after moving the batch slider: one point at a time, the latest click wins.

    No point finishes while the clicks come (the stand-in waits for the last one), so the test is about
    queueing alone and holds however slow a loaded machine makes a click. A request that finds a newer one
    waiting before its first point ends at once; that costs nothing, so the test counts points, not runs.
    """
    measured, running, most_at_once = [], [0], [0]
    lock, clicks_done = threading.Lock(), threading.Event()

    def slow_point(point):
        with lock:
            running[0] += 1
            most_at_once[0] = max(most_at_once[0], running[0])
            measured.append((point.method, point.batch_size, point.settings.batch_size))
        try:
            assert clicks_done.wait(60), "the clicks never ended"
            time.sleep(POINT_S)
            return _fake_record(point)
        finally:
            with lock:
                running[0] -= 1

    lab = _lab(tmp_path, measure_point=slow_point)
    for batch in BATCHES[1:]:
        lab.set(batch_size=batch)
        lab.measure()
    t0 = time.monotonic()
    clicks_done.set()
    assert lab.worker.wait_idle(60), "the lab is still measuring a minute after the last click"
    took = time.monotonic() - t0
    assert most_at_once[0] == 1, "two points were measured at once"
    # at most one point went to a setting left behind (the one under way when the clicks came) ...
    assert all(last == BATCHES[-1] for _, _, last in measured[1:]), measured
    # ... and it is not measured again: every batch exactly once, stored as it was measured
    assert len(measured) == len(BATCHES), measured
    stored = [r["batch_size"] for r in lab.store.read()]
    assert sorted(stored) == list(BATCHES), stored
    assert lab.state == "idle" and "measured" in lab.status_text
    assert took < POINT_S * (len(BATCHES) + 2) + 10


def test_stop_mid_sweep_keeps_what_was_measured(tmp_path):
    def slow_point(point):
        time.sleep(0.2)
        return _fake_record(point)

    lab = _lab(
        tmp_path, measure_point=slow_point, settings=Settings(method="none", batch_size=256, output_len=OUTPUT_LEN)
    )
    planned = [p.batch_size for p in lab.measure()]  # quickest first: 8, 16, ..., 256, then 4, 2, 1
    deadline = time.monotonic() + 10
    while not lab.store.read() and time.monotonic() < deadline:
        time.sleep(0.02)
    lab.stop()
    assert lab.worker.wait_idle(10)
    deadline = time.monotonic() + 10
    while lab.state != "stopped" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lab.state == "stopped", lab.status_text
    stored = [r["batch_size"] for r in lab.store.read()]
    assert 1 <= len(stored) <= 3 and stored == planned[: len(stored)]
    assert [r.batch_size for r in lab.measured] == stored  # what the lab says it measured is what is stored


# --- the engine cannot start ---------------------------------------------------------------------------
def _bad_architecture_model(folder: Path) -> Path:
    """A model folder whose config.json names an architecture vLLM does not know (a typical wrong download)."""
    from importlib import resources

    config = json.loads((resources.files("servelab.model_configs") / "SmolLM2-135M-Instruct.json").read_text())
    config["architectures"] = ["NotARealModelForCausalLM"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


LAB_IN_A_KERNEL = """
import json
from servelab.lab import Settings, SpecDecodeLab
from servelab.results import ResultsStore
lab = SpecDecodeLab(settings=Settings(method="none", batch_size=1, output_len={output_len}),
                    store=ResultsStore({store!r}), recorded={recorded!r}, offline="", prestart=False)

def click_measure(**controls):
    lab.set(**controls)
    lab.measure()
    assert lab.worker.wait_idle(300)
    return {{"state": lab.state, "status": lab.status_text, "html": lab.status.value}}
"""


def _run(kc, code: str, timeout: float = 300) -> str:
    out = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    text = "".join(out)
    assert reply["content"]["status"] == "ok", text
    return text


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_engine_that_cannot_start_is_reported_in_the_status_line_and_the_kernel_lives(tmp_path):
    """In a real notebook kernel: a missing model folder, then a model vLLM refuses. Each click on Measure
    ends in a failed status line that says what to do; the kernel keeps answering; nothing is stored;
    no engine process is left behind."""
    import psutil
    from jupyter_client.manager import start_new_kernel

    store = tmp_path / "results.jsonl"
    bad = _bad_architecture_model(tmp_path / "wrong-model")
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=90, cwd=str(tmp_path))
    try:
        _run(
            kc,
            LAB_IN_A_KERNEL.format(
                output_len=OUTPUT_LEN, store=str(store), recorded=str(tmp_path / "nothing-recorded.jsonl")
            ),
        )
        missing = json.loads(_run(kc, f"print(json.dumps(click_measure(model={str(tmp_path / 'nowhere')!r})))"))
        assert missing["state"] == "failed", missing
        assert "No model at" in missing["status"] and "config.json" in missing["status"]
        assert "data-state='failed'" in missing["html"]

        t0 = time.monotonic()
        refused = json.loads(_run(kc, f"print(json.dumps(click_measure(model={str(bad)!r})))"))
        assert refused["state"] == "failed", refused
        assert "did not start" in refused["status"] and "NotARealModelForCausalLM" in refused["status"]
        assert "Traceback" not in refused["status"]
        assert time.monotonic() - t0 < 240

        assert km.is_alive()
        assert _run(kc, "print(6 * 7)").strip() == "42"
        kernel = psutil.Process(km.provisioner.process.pid)
        engines = [p for p in kernel.children(recursive=True) if "resource_tracker" not in " ".join(p.cmdline())]
        assert not engines, [p.cmdline() for p in engines]
        assert not store.exists() or ResultsStore(store).read() == []
        _run(kc, "lab.close()")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class _RefuseToStart:
    """An engine factory for a pool: any start is a failure of the test (the batch should be refused first)."""

    started: list = []

    def __init__(self, config):
        self.config = config

    def is_alive(self):
        return False

    def start(self, *args, **kwargs):
        _RefuseToStart.started.append(self.config)
        from servelab.engine import EngineError

        raise EngineError("test: an engine start was attempted for a batch the KV cache cannot hold")

    def stop(self):
        pass


def test_too_little_kv_cache_for_the_batch_is_refused_before_the_engine_starts(tmp_path):
    _RefuseToStart.started = []
    lab = _lab(tmp_path, pool=EnginePool(engine_factory=_RefuseToStart))
    lab.set(kv_cache_gb=0.25, batch_size=256, output_len=128)
    lab.measure()
    assert lab.worker.wait_idle(30)
    assert lab.state == "failed", lab.status_text
    assert "KV cache is too small" in lab.status_text and "kv_cache_gb" in lab.status_text
    assert not _RefuseToStart.started, "the engine was started for a batch it cannot hold"


# --- the engine dies mid-sweep: the real engine, killed ---------------------------------------------------------
@pytest.fixture(scope="module")
def live_lab(tmp_path_factory):
    """A lab measuring on the real engine, closed at the end whatever happened (no engine outlives the test)."""
    tmp = tmp_path_factory.mktemp("live-lab")
    pool = EnginePool()
    lab = _lab(tmp, pool=pool, settings=Settings(method="none", batch_size=2, output_len=OUTPUT_LEN))
    try:
        yield lab, pool
    finally:
        lab.close()
        for engine in pool.engines():
            engine.stop()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_engine_killed_mid_sweep_keeps_the_points_and_the_next_measure_restarts_it(live_lab):
    """One click measures batch 1 and 2. After the first point is stored the engine's process group gets
    SIGKILL. The status line says so, the point stays in the store, and the next click starts a new engine
    that measures only what is missing."""
    lab, pool = live_lab
    states: list[str] = []

    def watch(until, timeout_s: float, step=None):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not states or states[-1] != lab.state:
                states.append(lab.state)
            if step:
                step()
            if until():
                return True
            time.sleep(0.05)
        return False

    killed: list[int] = []

    def kill_after_first_point():
        if not killed and lab.store.read():
            engine = pool.engines()[0]
            killed.append(engine.pid)
            os.killpg(engine.pid, signal.SIGKILL)

    planned = lab.measure()
    assert [(p.method, p.batch_size) for p in planned] == [("none", 2), ("none", 1)]  # quickest first
    assert watch(lambda: killed and not lab.worker.busy, 400, kill_after_first_point), (states, lab.status_text)
    assert "starting" in states and "measuring" in states
    assert lab.state == "failed", lab.status_text
    assert "killed by signal 9" in lab.status_text
    assert "kept in the results store" in lab.status_text
    assert "data-state='failed'" in lab.status.value
    kept = lab.store.read()
    assert [r["batch_size"] for r in kept] == [2], "the kill should land while batch 1 is measured"
    assert [r["batch_size"] for r in kept] == [r.batch_size for r in lab.measured]

    # The next click starts the engine again and measures only the missing points.
    states.clear()
    again = lab.measure()
    assert [p.batch_size for p in again] == [1]
    assert watch(lambda: not lab.worker.busy, 400), (states, lab.status_text)
    assert "starting" in states
    assert lab.state == "idle" and "measured" in lab.status_text, lab.status_text
    after = lab.store.read()
    assert after[: len(kept)] == kept  # nothing measured before the kill was lost or rewritten
    assert sorted(r["batch_size"] for r in after) == [1, 2]
    engine = pool.engines()[0]
    assert engine.is_alive() and engine.pid != killed[0]


# --- a remote server that refuses, stalls or fails, seen from the lab ------------------------------------------
@pytest.mark.parametrize(
    "mode, says",
    [
        ("refused", "refused the connection"),
        ("silent", "did not answer within 1.5 s"),
        ("error500", "HTTP 500"),
        ("no_url", "Enter the URL"),
    ],
)
def test_remote_server_faults_show_in_the_status_line_without_a_hang(tmp_path, mode, says):
    from test_faults import FakeServer, SilentServer, refused_url

    def run(url: str):
        # Both URLs point at the broken server: whichever the lab asks first, it meets the fault.
        lab = _lab(
            tmp_path,
            remote_timeout_s=1.5,
            settings=Settings(
                method="none",
                batch_size=2,
                output_len=OUTPUT_LEN,
                backend="remote",
                remote_off_url=url,
                remote_on_url=url,
            ),
        )
        t0 = time.monotonic()
        lab.measure()
        assert lab.worker.wait_idle(10), "the lab still waits on the server 10 s after a 1.5 s timeout"
        return lab, time.monotonic() - t0

    if mode == "refused":
        lab, took = run(refused_url())
    elif mode == "silent":
        with SilentServer() as server:
            lab, took = run(server.url)
    elif mode == "no_url":
        lab, took = run("")
    else:
        with FakeServer(mode) as server:
            lab, took = run(server.url)
    assert lab.state == "failed", lab.status_text
    assert says in lab.status_text
    assert "Traceback" not in lab.status.value
    assert lab.store.read() == []
    assert took < 8


def test_remote_with_speculation_off_needs_only_the_plain_servers_url(tmp_path):
    """The lab asks for one URL when speculation is off; one URL must then be enough."""
    from test_faults import FakeServer

    with FakeServer("healthy") as server:
        lab = _lab(
            tmp_path,
            remote_timeout_s=5,
            settings=Settings(
                method="none", batch_size=1, output_len=OUTPUT_LEN, backend="remote", remote_off_url=server.url
            ),
        )
        lab.measure()
        assert lab.worker.wait_idle(30)
    assert lab.state == "idle", lab.status_text
    assert [r["backend"] for r in lab.store.read()] == ["remote"]


# --- the student's cells are the student's --------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_running_the_lab_never_rewrites_a_students_cells(tmp_path, monkeypatch):
    """Answers typed into the lab notebook, then every cell run in a real kernel (nbclient), as a learner
    would with Run All: each cell's source is exactly what the learner wrote, on disk and in the kernel's copy."""
    from nbclient import NotebookClient

    if not LAB_NOTEBOOK.exists():
        pytest.skip("labs/spec_decode_lab.ipynb is not generated yet")
    monkeypatch.setenv("SERVELAB_OFFLINE", "1")
    monkeypatch.setenv("SERVELAB_RESULTS", str(tmp_path / "results.jsonl"))
    nb = nbformat.read(LAB_NOTEBOOK, as_version=4)
    answers = {
        "rep2-answer": "comparison = dict(draft, better=0,\n                  conclusion='At batch 64 speculation "
        "made fewer tokens per second than the baseline, so for a throughput SLO it stays off.')",
        "fix-answer": "Routing sends big batches to an engine with no speculative path at all; load-adaptive k "
        "keeps paying for the proposer at k = 0. (my own words, kept as typed)",
    }
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers.pop(grade_id)
    assert not answers, f"answer cells not found in the lab: {sorted(answers)}"
    work = tmp_path / "labs"
    work.mkdir()
    path = work / "spec_decode_lab.ipynb"
    nbformat.write(nb, path)
    on_disk = path.read_bytes()
    typed = [c.source for c in nb.cells]

    ran = copy.deepcopy(nb)
    NotebookClient(
        ran, timeout=240, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(work)}}
    ).execute()

    assert [c.source for c in ran.cells] == typed
    assert path.read_bytes() == on_disk
    assert sorted(p.name for p in work.iterdir()) == ["spec_decode_lab.ipynb"]
    for cell in ran.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            assert "application/javascript" not in out.get("data", {}), "an output carries script that could edit cells"
            if out.output_type == "error":
                assert "raises-exception" in cell.metadata.get("tags", []), (cell.source[:80], out.get("evalue"))
