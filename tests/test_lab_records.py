"""Which machine measured a point, how much of it the engine got, and headers on every table (pure, fast)."""

from __future__ import annotations

import html.parser
import os
import socket
from pathlib import Path

import pytest

from servelab import cpu_usage
from servelab.lab import rep2
from servelab.lab.knobs import charts as knobcharts
from servelab.lab.speculation import drawing
from servelab.lab.speculation.points import PointBook, Settings, Simulators
from servelab.results import ResultsStore

pytestmark = pytest.mark.unit

TICK = os.sysconf("SC_CLK_TCK")


def fake_proc(root: Path, busy_ticks: int, steal_ticks: int, total_idle: int, procs: dict[int, tuple[int, int]]):
    """A /proc with a cpu line and processes {pid: (pgrp, utime+stime ticks)}."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(f"cpu  {busy_ticks} 0 0 {total_idle} 0 0 0 {steal_ticks} 0 0\ncpu0 1 0 0 0\n")
    for pid, (pgrp, ticks) in procs.items():
        d = root / str(pid)
        d.mkdir(exist_ok=True)
        # pid (comm with ) spaces) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        (d / "stat").write_text(f"{pid} (vllm: engine) core) S 1 {pgrp} {pgrp} 0 -1 0 0 0 0 0 {ticks} 0 0 0\n")


def usage_between(tmp_path, ours_ticks, others_ticks, steal_ticks=0, cores=2, seconds=10.0):
    """What cpu_usage reports for an interval in which the engine's group used ours_ticks, others the rest."""
    before, after = tmp_path / "before", tmp_path / "after"
    fake_proc(before, 1000, 0, 1000, {4242: (4242, 100)})
    idle = round(seconds * cores * TICK) - ours_ticks - others_ticks - steal_ticks
    fake_proc(
        after, 1000 + ours_ticks + others_ticks, steal_ticks, 1000 + max(idle, 0), {4242: (4242, 100 + ours_ticks)}
    )
    a, b = cpu_usage.snapshot(4242, before), cpu_usage.snapshot(4242, after)
    a = cpu_usage.Snapshot(0.0, a.ours_cpu_s, a.busy_s, a.steal_s, a.total_s, 17.5)
    b = cpu_usage.Snapshot(seconds, b.ours_cpu_s, b.busy_s, b.steal_s, b.total_s, 16.0)
    return cpu_usage.usage(a, b, engine_cores=cores, machine_cores=cores)


def test_a_quiet_machine_gives_the_engine_its_cores_and_the_point_is_kept(tmp_path):
    u = usage_between(tmp_path, ours_ticks=19 * TICK, others_ticks=TICK // 2)  # 1.9 of 2 cores, others 0.05
    assert u["engine_share"] == pytest.approx(0.95, abs=0.01) and u["others_cores"] == pytest.approx(0.05, abs=0.01)
    assert u["contended"] is False and u["contention"] == ""


def test_other_work_on_the_engines_cores_makes_a_point_contended_and_says_why(tmp_path):
    # at load 15 on 2 cores: the engine got 0.4 cores' worth, everyone else 1.6
    u = usage_between(tmp_path, ours_ticks=4 * TICK, others_ticks=16 * TICK)
    assert u["engine_share"] == pytest.approx(0.2, abs=0.01) and u["others_cores"] == pytest.approx(1.6, abs=0.01)
    assert u["contended"] is True
    assert "other processes used 1.6 cores' worth of CPU while it ran on 2" in u["contention"]
    assert "load average 17.5" in u["contention"]


def test_the_threshold_is_a_quarter_of_the_engines_cores_and_steal_counts_too(tmp_path):
    just_under = usage_between(tmp_path, ours_ticks=15 * TICK, others_ticks=int(4.9 * TICK))  # 0.49 of 2 cores
    assert just_under["contended"] is False
    over = usage_between(tmp_path, ours_ticks=15 * TICK, others_ticks=int(5.2 * TICK))  # 0.52 of 2 cores
    assert over["contended"] is True
    stolen = usage_between(tmp_path, ours_ticks=15 * TICK, others_ticks=0, steal_ticks=3 * TICK)  # 15% stolen
    assert stolen["contended"] is True and "steal" in stolen["contention"]


def test_a_record_says_which_machine_measured_it():
    fp = cpu_usage.machine_fingerprint("AMD EPYC 9R14", 2)
    assert fp.startswith("AMD EPYC 9R14; 2 cores; host ") and socket.gethostname() not in fp


def _record(method, batch, tok_s, **extra):
    r = {
        "method": method,
        "num_speculative_tokens": 4 if method != "none" else 0,
        "batch_size": batch,
        "workload": "copy",
        "output_len": 64,
        "output_tok_s": tok_s,
        "tpot_ms_p50": 1000.0 * batch / tok_s,
        "backend": "local",
        "hardware": "Course CPU",
    }
    r.update(extra)
    return r


def test_a_contended_point_is_drawn_apart_left_out_of_the_crossover_and_dropped_in_one_call(tmp_path):
    busy = {"contended": True, "contention": "other processes used 1.6 cores' worth of CPU while it ran on 2"}
    store = ResultsStore(tmp_path / "results.jsonl")
    store.extend(
        [
            _record("none", 1, 20.0),
            _record("ngram", 1, 366.0, cpu_usage=busy),  # 18.3x at batch 1: a busy machine, not a speedup
            _record("none", 8, 80.0),
            _record("ngram", 8, 60.0),
        ]
    )
    book = PointBook(tmp_path / "nothing.jsonl", store)
    s = Settings(batch_size=8)
    d = drawing.compute("flip", s, book, Simulators(book))
    assert d.traces["tok_s|1|measured"].x == [8] and d.traces["tok_s|1|contended"].x == [1]
    assert "busy machine" in d.traces["tok_s|1|contended"].hover[0]
    assert d.traces["speedup|1|measured"].x == [8]  # no 18.3x speedup drawn as measured
    assert [r["batch_size"] for r in book.contended()] == [1]
    assert all(r.get("cpu_usage") != busy for r in book.local_records())  # out of the simulator's fit
    assert book.drop_contended() == 1 and book.contended() == []
    assert not book.has(s, "ngram", 1)  # Measure runs it again
    assert len(store.read()) == 4  # nothing is lost: the store keeps the dropped point


class _Headers(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        if tag == "th":
            self._in = True
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "th":
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.cells[-1] += data


def _headers(markup: str) -> list[str]:
    p = _Headers()
    p.feed(markup)
    return p.cells


def test_every_header_cell_of_the_rep2_and_knob_lab_tables_has_text():
    a, b = _record("none", 8, 80.0, tpot_ms_p50=12.0), _record("ngram", 8, 60.0)
    rep = _headers(rep2.table_html(a, b))
    assert rep[:3] == ["metric", "setting a", "setting b"] and all(c.strip() for c in rep)
    knob = _headers(knobcharts.table_html((a, b), ("", "max_num_seqs=4")))
    assert knob[:3] == ["panel: bar", "setting a", "max_num_seqs=4"] and all(c.strip() for c in knob)


def test_the_simulated_curves_run_the_lessons_draft_and_the_engines_dtype():
    """The GPU backends' draft model is the lesson's Llama-3.2-1B; the CPU's dashed curves use the bfloat16
    roofline the verify-step benchmark probed (bench/results/ridge-cpu.json), the dtype the engine ran in."""
    import json

    from servelab import paths
    from servelab.lab.speculation import points

    book = PointBook(read_store=False)
    gpu, about = Simulators(book).get("H200")
    assert gpu.draft.name == "meta-llama/Llama-3.2-1B-Instruct" and "Llama-3.2-1B" in about
    records = book.recorded_records()
    assert records[0]["roofline"]["dtype"] == "float32" and records[0]["dtype"] == "bfloat16"
    cpu = points.engine_roofline(records)  # what the local simulator is calibrated on
    probe = json.loads((paths.REPO_DIR / "bench" / "results" / "ridge-cpu.json").read_text())["roofline_probe"]
    assert cpu is not None and cpu.dtype == probe["dtype"] == "bfloat16"
    assert cpu.peak_tflops == probe["gemm_tflops"] and cpu.bandwidth_gb_s == probe["read_gb_s"]
    # a record whose roofline is already in the engine's dtype keeps its own
    same = [{**records[0], "roofline": {**records[0]["roofline"], "dtype": "bfloat16"}}]
    assert points.engine_roofline(same) is None
    # a batch whose KV caches do not fit the simulated GPU is said not to fit
    from dataclasses import replace

    long = replace(gpu, context_len=8192)
    assert "does not fit" in drawing.simulated_step_html(long, 200, 4, "ngram")
    assert "does not fit" not in drawing.simulated_step_html(long, 64, 4, "ngram")
    # the ridge the recording chose, and where from: its probe's ratio, or the knee of its steps
    chosen = json.loads((paths.REPO_DIR / "bench" / "results" / "ridge-cpu.json").read_text())["ridge"]
    said = "not a knee" if chosen["from"] == "probe" else "the knee read off the recorded steps"
    assert said in drawing.cpu_step_html() and "flat" not in drawing.cpu_step_html()
    assert f"{chosen['tokens_per_step']:.0f} tokens per step" in drawing.cpu_step_html()


def test_a_simulated_curve_ends_at_the_largest_batch_that_fits():
    from dataclasses import replace

    from servelab.lab.speculation import points

    gpu, _ = Simulators(PointBook(read_store=False)).get("H200")
    long = replace(gpu, context_len=8192)
    c = points.curve(long, "ngram", 4, 0.7, None)
    assert c.batch and max(c.batch) <= long.max_batch("ngram") < min(
        b for b in points.CURVE_BATCHES if b not in c.batch
    )
    assert len(points.curve(gpu, "ngram", 4, 0.7, None).batch) == len(points.CURVE_BATCHES)  # 256 tokens: all fit
