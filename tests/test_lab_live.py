"""The lab on the real engine: a tiny run (batch 1 and 2, 16 tokens, copy-heavy), then routing on the warm engines.

Slow: two engine starts (about 40 s each on 2 idle cores) and a few short batches.
The engines are stopped at the end, whatever happens.
"""

from __future__ import annotations

import time

import pytest

from servelab.lab import SpecDecodeLab
from servelab.lab.speculation.engines import EnginePool
from servelab.lab.speculation.points import Settings
from servelab.lab.worker import LatestRequestWorker
from servelab.results import ResultsStore

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 1500  # two cold starts and six short batches, on cores other work may share


@pytest.fixture
def live_lab(tmp_path):
    empty = tmp_path / "recorded.jsonl"
    empty.write_text("")  # nothing recorded: every point is measured here
    pool = EnginePool()
    worker = LatestRequestWorker(lambda req, stale: req[0]._run(req[1], stale), lambda req, exc: req[0]._crashed(exc))
    lab = SpecDecodeLab(
        settings=Settings(batch_size=2, output_len=16, method="ngram", workload="copy"),
        store=ResultsStore(tmp_path / "results.jsonl"),
        recorded=empty,
        offline="",
        pool=pool,
        worker=worker,
    )
    try:
        yield lab
    finally:
        lab.close()
        worker.close()
        assert not any(e.is_alive() for e in pool.engines())


def wait(lab, timeout_s: float) -> list[str]:
    """Wait for the worker; return every state the status line went through."""
    seen, deadline = [], time.monotonic() + timeout_s
    while lab.worker.busy and time.monotonic() < deadline:
        if not seen or seen[-1] != lab.state:
            seen.append(lab.state)
        time.sleep(0.2)
    seen.append(lab.state)
    assert not lab.worker.busy, f"still measuring after {timeout_s} s: {lab.status_text}"
    return seen


def drawn(chart: dict, slot: int) -> dict:
    """batch -> tok/s of a curve's points measured here, as drawn: with the machine quiet or busy."""
    points = {}
    for kind in ("measured", "contended"):
        trace = chart[f"tok_s|{slot}|{kind}"]
        points.update(zip(trace["x"], trace["y"]))
    return dict(sorted(points.items()))


def test_measured_points_appear_in_the_chart_and_the_store(live_lab):
    lab = live_lab
    assert lab.chart_data()["tok_s|0|measured"]["x"] == []
    planned = lab.measure()
    quickest_first = [("none", 2), ("ngram", 2), ("none", 1), ("ngram", 1)]  # one round of batch 2 before two of 1
    assert [(p.method, p.batch_size) for p in planned] == quickest_first
    states = wait(lab, RUN_TIMEOUT_S)
    assert lab.state == "idle", lab.status_text
    assert "starting" in states or "measuring" in states
    stored = lab.store.read()
    assert [(r["method"], r["batch_size"]) for r in stored] == quickest_first
    for r in stored:
        assert r["backend"] == "local" and r["workload"] == "copy" and r["output_len"] == 16
        assert r["output_tok_s"] > 0 and r["tpot_ms_p50"] > 0
    assert stored[1]["num_draft_tokens"] > 0  # n-gram speculation really drafted on the copy-heavy prompts
    chart = lab.chart_data()
    # drawn as measured here, or apart as measured on a busy machine (a loaded CI box): never left off
    assert list(drawn(chart, 0)) == [1, 2] and list(drawn(chart, 1)) == [1, 2]
    assert list(drawn(chart, 1).values()) == [stored[3]["output_tok_s"], stored[1]["output_tok_s"]]  # by batch
    busy = {r["batch_size"] for r in stored if (r.get("cpu_usage") or {}).get("contended")}
    assert len(chart["speedup|1|measured"]["y"]) == len({1, 2} - busy)  # a busy point is left out of the speedup
    assert len(lab.pool.warm()) == 2

    # routing reuses the two warm engines: no new start, and each record says which one served it
    lab.set(method="routed")
    planned = lab.measure()
    assert [(p.method, p.batch_size) for p in planned] == [("routed", 2), ("routed", 1)]
    states = wait(lab, RUN_TIMEOUT_S)
    assert "starting" not in states and lab.state == "idle", lab.status_text
    routed = [r for r in lab.store.read() if r["method"] == "routed"]
    assert [r["batch_size"] for r in routed] == [2, 1]
    threshold = routed[0]["engine_config"]["routing"]["threshold"]
    for r in routed:
        side = r["engine_config"]["routing"]["served_by"]
        assert side == ("speculating" if r["batch_size"] <= threshold else "plain")
    assert list(drawn(lab.chart_data(), 1)) == [1, 2]
