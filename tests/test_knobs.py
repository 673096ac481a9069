"""Every knob on a real `vllm serve`: settings resolve to one command line and one load, vLLM's serving
benchmark measures, the server's counters join the record, the knob lab shows two settings side by side.

The fast tests read the recorded benchmark (data/measurements/knobs-cpu.jsonl, bench/knobs.py) and
resolve settings; the slow ones start one real server for the whole module and load it.
"""

from __future__ import annotations

import math

import pytest
from records_helpers import LEARNER_MACHINE

from servelab import knobs, paths, provenance, simulate
from servelab.grading import checkers
from servelab.knobs import catalogue, serve_sweep
from servelab.lab import rep2
from servelab.model import model_dir, quantized_dir
from servelab.results import ResultsStore

pytestmark = pytest.mark.unit

RECORDED = knobs.recorded_path()


# --- settings -> plan -----------------------------------------------------------------------------------
def test_a_setting_changes_one_server_argument_and_baselines_share_a_server():
    on = knobs.resolve("prefix_caching", "prefix caching on")
    assert "--enable-prefix-caching" in on.server_args and "--no-enable-prefix-caching" not in on.server_args
    small = knobs.resolve("kv_cache", "kv_cache=16MiB")
    assert small.setting_value("--kv-cache-memory-bytes") == str(16 << 20)
    # the baseline of every knob is the same command line, so one warm server serves them all
    baselines = {
        knobs.resolve(k, s).server_key
        for k, s in (
            ("batching", "max_num_seqs=256"),
            ("prefix_caching", "prefix caching off"),
            ("precision", "bfloat16"),
            ("speculation", "no speculation"),
            ("parallelism", "tp=1"),
        )
    }
    assert len(baselines) == 1


def test_a_knob_setting_or_load_that_cannot_run_says_what_can():
    with pytest.raises(knobs.KnobError, match="batching"):
        knobs.resolve("batchsize", "x")
    with pytest.raises(knobs.KnobError, match="max_num_seqs=4"):
        knobs.resolve("batching", "max_num_seqs=3")
    with pytest.raises(knobs.KnobError, match="request_rate"):
        knobs.resolve("batching", "max_num_seqs=4", load=knobs.Load(request_rate=-1))
    with pytest.raises(knobs.KnobError, match="chat"):
        knobs.resolve("batching", "max_num_seqs=4", workload="rag")


def test_the_step_token_budget_is_a_batching_setting_resolved_into_the_server_arguments():
    listed = knobs.resolve("batching", "max_num_batched_tokens=256")
    assert listed.setting_value("--max-num-batched-tokens") == "256"
    any_n = knobs.resolve("batching", "max_num_batched_tokens=1024")
    assert any_n.setting_value("--max-num-batched-tokens") == "1024"
    assert any_n.setting_value("--max-num-seqs") == "256"  # only the budget changes
    assert "--max-num-batched-tokens" not in knobs.resolve("batching", "max_num_seqs=256").server_args
    with pytest.raises(knobs.KnobError, match="max_num_seqs=256"):  # vLLM refuses a budget below max_num_seqs
        knobs.resolve("batching", "max_num_batched_tokens=64")
    with pytest.raises(knobs.KnobError, match="whole number"):
        knobs.resolve("batching", "max_num_batched_tokens=lots")
    with pytest.raises(knobs.KnobError, match="max_num_batched_tokens=N"):
        knobs.resolve("batching", "max_num_batched=512")
    with pytest.raises(knobs.KnobError, match="no setting"):  # a numbered setting belongs to its knob only
        knobs.resolve("precision", "max_num_batched_tokens=512")


def test_a_sweep_hands_vllms_sweep_each_settings_flags_and_leaves_naming_the_result_files_to_it(tmp_path):
    plans = [knobs.resolve("batching", s) for s in knobs.KNOBS["batching"].settings]
    assert [serve_sweep._sweep_overrides(p) for p in plans] == [
        {"max_num_seqs": "256"},
        {"max_num_seqs": "4"},
        {"max_num_batched_tokens": "256"},
    ]
    assert serve_sweep._sweep_overrides(knobs.resolve("batching", "max_num_batched_tokens=512")) == {
        "max_num_batched_tokens": "512"
    }
    args = serve_sweep._without_result_args(knobs.bench_args(plans[0], "http://127.0.0.1:1", "m", tmp_path, "r.json"))
    assert not {"--save-result", "--result-dir", "--result-filename", "r.json", str(tmp_path)} & set(args)
    assert args[args.index("--max-concurrency") + 1] == "20"
    with pytest.raises(knobs.KnobError, match="one knob"):
        knobs.sweep([plans[0], knobs.resolve("precision", "float32")], "m", tmp_path, {})


def test_the_quantized_model_setting_serves_another_folder_under_the_bundled_name(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogue, "quantized_dir", lambda: tmp_path / "W4A16")
    plan = knobs.resolve("precision", "W4A16 weights")
    assert plan.setting_value("--model") == str(tmp_path / "W4A16")
    assert plan.setting_value("--served-model-name") == str(model_dir())  # the benchmark asks for this name
    with pytest.raises(knobs.KnobError, match="make quantized-model"):  # refused before any server starts
        knobs.ServerPool(size=1).get(plan)


def test_a_record_names_the_models_it_served_by_folder_not_by_this_machines_path():
    plan = knobs.resolve("precision", "W4A16 weights")  # the real models folder: --model and --served-model-name
    recorded = knobs.recorded_args(plan.server_args)
    assert recorded[recorded.index("--model") + 1] == quantized_dir().name
    assert recorded[recorded.index("--served-model-name") + 1] == model_dir().name
    assert not [a for a in recorded if a.startswith("/")]
    plain = knobs.resolve("batching", "max_num_seqs=4")
    assert knobs.recorded_args(plain.server_args) == list(plain.server_args)  # nothing else changes


def test_the_load_becomes_vllm_bench_serve_arguments(tmp_path):
    users = knobs.resolve("batching", "max_num_seqs=4")
    args = knobs.bench_args(users, "http://127.0.0.1:1", "m", tmp_path, "r.json")
    assert args[args.index("--max-concurrency") + 1] == "20" and "--request-rate" not in args
    rate = knobs.resolve("speculation", "n-gram k=4")
    args = knobs.bench_args(rate, "http://127.0.0.1:1", "m", tmp_path, "r.json")
    assert args[args.index("--request-rate") + 1] == "1" and args[args.index("--burstiness") + 1] == "1.0"
    assert "--max-concurrency" not in args and "--ignore-eos" in args
    assert args[args.index("--dataset-path") + 1].endswith("copy.jsonl")


# --- the recorded benchmark ----------------------------------------------------------------------------
def _recorded() -> list[dict]:
    if not RECORDED.is_file():
        pytest.skip(f"{RECORDED} is not recorded yet: run bench/knobs.py")
    return ResultsStore(RECORDED).read()


def test_recorded_knob_records_are_real_measurements_that_agree_with_themselves():
    records = _recorded()
    assert records
    for r in records:
        assert r["backend"] == "served" and r["vllm_version"] and r["hardware"] and r["roofline"]
        assert r["output_tok_s"] == pytest.approx(r["output_tokens"] / r["elapsed_s"], rel=0.02)
        assert r["num_requests"] * r["output_len"] == r["output_tokens"]  # --ignore-eos: every request runs out
        assert r["ttft_ms_p50"] <= r["ttft_ms_p99"]


def test_recorded_counters_show_what_each_knob_does():
    records = _recorded()
    got = lambda knob, setting: knobs.latest(records, knob, setting)  # noqa: E731
    # a cap below the number of users queues requests; a cap above it never fills
    capped, uncapped = got("batching", "max_num_seqs=4"), got("batching", "max_num_seqs=256")
    assert capped["num_requests_running_max"] <= 4 < capped["num_requests_waiting_max"] + 4
    assert uncapped["num_requests_running_max"] <= 20
    assert uncapped["queue_time_ms_mean"] < capped["queue_time_ms_mean"]
    # prefix caching: hits only when it is on
    assert got("prefix_caching", "prefix caching off")["prefix_cache_hit_tokens"] == 0
    assert got("prefix_caching", "prefix caching on")["prefix_cache_hit_tokens"] > 0
    # speculation: the server's acceptance counters, only with a drafter
    assert got("speculation", "n-gram k=4")["num_draft_tokens"] > 0
    assert got("speculation", "no speculation")["acceptance_rate"] is None


def test_rep2_for_batching_reads_the_conclusion_against_the_learners_numbers(tmp_path, monkeypatch):
    records = _recorded()
    a, b = knobs.latest(records, "batching", "max_num_seqs=256"), knobs.latest(records, "batching", "max_num_seqs=4")
    with pytest.raises(ValueError, match="course's recorded points"):  # the recording itself is not a hand-in
        rep2.comparison("batching", a, b, "ttft_ms_p99", better=0)
    # the same numbers as a learner's own run on their machine (the course's recordings not looked up)
    monkeypatch.setattr(provenance, "recordings_dir", lambda: tmp_path)
    a, b = dict(a, machine=LEARNER_MACHINE), dict(b, machine=LEARNER_MACHINE)
    answer = rep2.comparison(
        "batching",
        a,
        b,
        "ttft_ms_p99",
        better=0,
        conclusion=(
            "p99 TTFT is the SLO; the smaller cap queues requests and their wait shows up in TTFT, so keep "
            "max_num_seqs=256."
        ),
    )
    points, feedback = checkers.measured_comparison(answer, {"points": 4})
    assert points == 4, feedback
    wrong = dict(answer, better=1 - answer["better"])
    points, feedback = checkers.measured_comparison(wrong, {"points": 4})
    assert points == 0 and "your own numbers say" in feedback
    # the conclusion is read for every knob: lowering the cap to 4 against these numbers earns nothing
    lowered = dict(answer, conclusion="Lower the cap to 4 to save memory.")
    points, feedback = checkers.measured_comparison(lowered, {"points": 4})
    assert points == 0 and "recommends max_num_seqs=4" in feedback


def test_tensor_parallelism_on_one_memory_bus_gains_nothing_and_an_8b_model_gains_on_two_gpus():
    from servelab.knobs import parallel

    rows = parallel.simulated_rows(simulate.DESIGN_CPU.to_dict())
    cpu, gpu = (rows[where] for where, *_ in parallel.CASES)
    assert all(row["tp2_tok_s"] <= row["tp1_tok_s"] for row in cpu)
    assert all(row["tp2_tok_s"] > row["tp1_tok_s"] for row in gpu)
    # SmolLM2-135M's 9 heads do not split in two: vLLM refuses it, and no simulated row of it is made
    assert "divisible by tensor parallel size (2)" in parallel.refusal("SmolLM2-135M", 2)
    assert not [where for where in rows if "SmolLM2" in where]


# --- the knob lab, offline ------------------------------------------------------------------------------
def test_knob_lab_offline_shows_recorded_settings_and_follows_the_knob(tmp_path):
    from servelab.lab import KnobLab

    _recorded()
    lab = KnobLab(store=ResultsStore(tmp_path / "results.jsonl"), offline="testing")
    assert lab.state == "offline" and lab.measure() == [] and lab.measure_button.disabled
    data = lab.chart_data()
    assert data["ttft|0"]["name"] == "max_num_seqs=256" and len(data["ttft|0"]["y"]) == 2
    assert data["ttft|slo"]["y"] == [500.0, 500.0]  # the SLO line on the TTFT panel
    lab.set(knob="prefix_caching")
    after = lab.chart_data()
    assert after["ttft|1"]["name"] == "prefix caching on" and after["ttft|1"]["y"] != data["ttft|1"]["y"]
    assert after["hits|1"]["y"][0] > 0 == after["hits|0"]["y"][0]
    lab.set(requests=3)  # a load nothing was measured under: the bars go, the legend says why
    assert lab.chart_data()["ttft|0"]["y"] == [] and "not measured yet" in lab.chart_data()["ttft|0"]["name"]
    with pytest.raises(LookupError, match="Measure"):
        lab.record("prefix caching on")


# --- a real server, one for the module ------------------------------------------------------------------
# Long enough (two rounds of 32 decode steps) that the gauges, sampled every POLL_S, see the requests in flight;
# a run of a few tokens can finish between two samples.
TINY = knobs.Load(num_prompts=4, output_len=32, max_concurrency=2)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from servelab.server import VllmServer

    if not (model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    plan = knobs.resolve("batching", "max_num_seqs=256", load=TINY)
    server = VllmServer(plan.server_args, log_path=tmp_path_factory.mktemp("serve") / "serve.log")
    runner = knobs.BenchRunner(log_path=server.log_path.with_name("benchrun.log")).start()
    try:
        server.start().wait_ready()
        yield server, runner, plan
    finally:
        runner.close()
        server.stop()
    assert not server.is_alive()


@pytest.mark.slow
def test_vllm_bench_serve_measures_a_real_server_with_its_counters(served):
    server, runner, plan = served
    run = runner.run(plan, server.url, server.model)
    record = knobs.to_measurement(plan, run, knobs.machine_info(server.model, roofline=False))
    assert record.num_requests == 4 and record.output_tokens == 4 * 32 and record.max_concurrency == 2
    assert record.output_tok_s == pytest.approx(record.output_tokens / record.elapsed_s, rel=0.02)
    assert 0 < record.ttft_ms_p50 <= record.ttft_ms_p99 and record.tpot_ms_p50 > 0
    assert 1 <= record.num_requests_running_max <= 2  # the gauge saw the users, never more
    assert record.queue_time_ms_mean is not None and record.queue_time_ms_mean >= 0
    assert record.prefix_cache_hit_tokens == 0 and record.num_preemptions == 0 and record.vllm_version == "0.32.0"
    assert record.engine_config["server_args"] == list(plan.server_args)


@pytest.mark.slow
def test_knob_lab_measures_both_settings_live_and_the_chart_changes(served, tmp_path):
    from servelab.lab import KnobLab

    server, runner, _ = served
    pool = knobs.ServerPool(size=2)
    pool.add(server)
    store = ResultsStore(tmp_path / "results.jsonl")
    lab = KnobLab(store=store, offline="", pool=pool, runner=runner, start_servers=False)
    lab.set(knob="batching", a="max_num_seqs=256", b="max_num_seqs=256", users=2, requests=4, output_len=4)
    before = lab.chart_data()["ttft|0"]
    assert lab.measure() and lab.wait(timeout=600)
    assert lab.state == "idle", lab.status_text
    assert len(store.read()) == 2 and all(r["knob"] == "batching" for r in store.read())
    after = lab.chart_data()["ttft|0"]
    assert before["y"] == [] and len(after["y"]) == 2 and all(math.isfinite(y) for y in after["y"])
    assert lab.record("max_num_seqs=256")["num_requests"] == 4


@pytest.mark.slow
def test_a_server_vllm_refuses_fails_fast_with_its_reason(tmp_path):
    from servelab.server import ServerError, VllmServer

    plan = knobs.resolve("parallelism", "tp=2")
    server = VllmServer(plan.server_args, env=knobs.plan_env(plan), log_path=tmp_path / "tp2.log")
    with pytest.raises(ServerError, match="divisible by tensor parallel size"):
        server.start().wait_ready(timeout_s=300)
    assert not server.is_alive()


@pytest.mark.unit(False)  # builds the lab's charts: about 1 s of CPU
@pytest.mark.parametrize("view", ["flip", "fix"])
def test_the_spec_decode_charts_carry_a_legend_naming_each_series_and_how_it_was_got(view, tmp_path):
    from servelab.lab import SpecDecodeLab

    lab = SpecDecodeLab(view, store=ResultsStore(tmp_path / "results.jsonl"), offline="testing")
    fig = lab.figure
    assert fig.layout.showlegend and "measured" in fig.layout.legend.title.text
    shown = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert len(shown) == len(set(shown)) >= 3
    assert any(n.endswith("measured") for n in shown) and any(n.endswith("simulated") for n in shown)


def test_knob_records_are_evidence_for_servelab_review(tmp_path):
    from servelab.review import review_files

    _recorded()
    configs = paths.data_dir() / "configs"
    workload = tmp_path / "workload.yaml"
    workload.write_text(
        (configs / "smollm2-cpu-lab-records-workload.yaml")
        .read_text()
        .replace("records: lab-cpu/records.jsonl", f"records: {RECORDED}")
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        (configs / "smollm2-cpu-lab-records.yaml")
        .read_text()
        .replace("hardware-file: lab-cpu/hardware.json", f"hardware-file: {configs / 'lab-cpu' / 'hardware.json'}")
    )
    report = review_files(config, workload)
    cited = " ".join(f.evidence for f in report.findings)
    assert f"{RECORDED}:" in cited  # a finding rests on a line of the recorded knob benchmark


@pytest.mark.slow
def test_vllms_sweep_measures_each_setting_on_its_own_server_with_its_counters(tmp_path):
    """vLLM's serve-parameter sweep starts a server per setting; servelab.benchrun adds each server's counters."""

    if not (model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    plans = [knobs.resolve("batching", s, load=TINY) for s in ("max_num_seqs=4", "max_num_batched_tokens=256")]
    records, failures = knobs.sweep(
        plans, str(model_dir()), tmp_path, knobs.machine_info(str(model_dir()), roofline=False)
    )
    assert failures == {}
    assert [r.knob_setting for r in records] == [p.setting for p in plans]
    for record, plan in zip(records, plans):
        assert record.num_requests == 4 and record.output_tokens == 4 * 32 and record.max_concurrency == 2
        assert record.engine_config["server_args"] == list(plan.server_args)
        assert 1 <= record.num_requests_running_max <= 2  # the server's gauge, read during the sweep's run
        assert record.queue_time_ms_mean is not None and record.num_preemptions == 0
