"""bench/gpu_step.py: the step benchmark that checks the simulator's GPU numbers, run on the CPU.

The CPU run is the same code a GPU machine runs (model built from a preset's config,
a filled KV cache, the timed steps, the comparison), with the small preset and the
short batch list, so the first run on a GPU is not the code's first run. The step
itself is checked against a plain forward pass: the verify step's logits after a
cached prefix are the full sequence's last k + 1 logits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from servelab import modelspec, simulate  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def _load_bench():
    spec = importlib.util.spec_from_file_location("gpu_step", REPO / "bench" / "gpu_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
# transformers before 4.48 has no AttentionInterface: the bench then times its sdpa path (and says so)
GQA = pytest.param(
    bench.GQA_ATTENTION,
    marks=pytest.mark.skipif(
        not hasattr(transformers, "AttentionInterface"), reason="transformers without AttentionInterface"
    ),
)


def tiny_model(layers: int = 2, heads: int = 4, kv_heads: int = 2):
    """A Llama of a few layers, float32, grouped-query attention (2 query heads per KV head)."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=256,
        max_position_embeddings=512,
    )
    return transformers.LlamaForCausalLM(config).eval()


# --- the attention that reads K and V once per KV head -------------------------------------------
@pytest.mark.parametrize("q_len, with_mask", [(1, False), (5, False), (5, True)])
def test_gqa_attention_equals_sdpa_with_repeated_kv(q_len, with_mask):
    torch.manual_seed(1)
    batch, heads, kv_heads, kv_len, dim = 3, 8, 2, 11, 16
    query = torch.randn(batch, heads, q_len, dim)
    key, value = torch.randn(batch, kv_heads, kv_len, dim), torch.randn(batch, kv_heads, kv_len, dim)
    # the queries are the last q_len tokens: each sees the cache and the new tokens up to itself
    causal = torch.arange(kv_len)[None, :] <= torch.arange(q_len)[:, None] + (kv_len - q_len)
    mask = causal[None, None].expand(batch, 1, q_len, kv_len) if with_mask else None
    repeated = {
        "key": key.repeat_interleave(heads // kv_heads, 1),
        "value": value.repeat_interleave(heads // kv_heads, 1),
    }
    expected = torch.nn.functional.scaled_dot_product_attention(query, **repeated, attn_mask=causal, scale=0.3)
    got, _ = bench.gqa_sdpa(None, query, key, value, mask, scaling=0.3)
    assert got.shape == (batch, q_len, heads, dim)
    torch.testing.assert_close(got, expected.transpose(1, 2), rtol=1e-5, atol=1e-5)


# --- one step: what the timed forward pass computes -------------------------------------------------
@pytest.mark.parametrize("cache", ["static", "dynamic"])
@pytest.mark.parametrize("attention", ["sdpa", GQA])
@pytest.mark.parametrize("k", [0, 3])
def test_step_after_a_cached_prefix_gives_the_full_passes_logits(cache, attention, k):
    model = tiny_model()
    context_len, batch = 12, 2
    with torch.inference_mode():
        runner = bench.StepRunner(model, batch, k, context_len, cache)
        prefix = torch.randint(0, model.config.vocab_size, (batch, context_len))
        bench.set_attention(model, "sdpa")
        full = model(input_ids=torch.cat([prefix, runner.input_ids], 1), use_cache=False).logits[:, context_len:]
        runner.prefill(prefix)
        bench.set_attention(model, attention)
        first = runner.run()
        runner.rewind()  # the timed loop repeats the same step: it must read and write the same positions
        if cache == "dynamic":
            runner.prefill(prefix)  # a DynamicCache's rewind refills it with random values
        again = runner.run()
    assert first.shape == (batch, k + 1, model.config.vocab_size)
    torch.testing.assert_close(first, full, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(again, full, rtol=1e-4, atol=1e-4)


def test_a_filled_cache_holds_exactly_the_context():
    """The cache holds context_len + k + 1 positions, so a step attends over exactly what a real one would."""
    model = tiny_model()
    with torch.inference_mode():
        runner = bench.StepRunner(model, 3, 2, 20)
        for _ in range(3):
            runner.rewind()
            logits = runner.run()
    layer = runner.cache.layers[0] if hasattr(runner.cache, "layers") else None
    keys = layer.keys if layer is not None else runner.cache.key_cache[0]
    assert keys.shape[0] == 3 and keys.shape[2] == 20 + 3
    assert torch.isfinite(logits).all()


# --- the CPU run, end to end ----------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """python bench/gpu_step.py --device cpu, as documented (the CPU preset, batches and k)."""
    out = tmp_path_factory.mktemp("gpu_step") / "gpu-step-cpu.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench.main(["--device", "cpu", "--output", str(out)])
    assert code == 0
    return json.loads(out.read_text()), printed.getvalue()


def test_cpu_run_times_every_point_with_provenance(cpu_run):
    result, _ = cpu_run
    assert result["device"]["type"] == "cpu" and result["timing"] == "eager forward passes, time.perf_counter"
    assert result["model"]["preset"] == bench.CPU_PRESET
    assert (REPO / result["model"]["config"]).is_file()  # named relative to the repository
    assert {(p["batch_size"], p["num_speculative_tokens"]) for p in result["points"]} == {
        (b, k) for b in bench.CPU_BATCHES for k in bench.CPU_KS
    }
    for p in result["points"]:
        assert 0 < p["step_ms_min"] <= p["step_ms"] <= p["step_ms_max"] and p["repeats"] == bench.CPU_REPEATS
        assert p["cuda_graph"] is False
    assert result["versions"]["torch"] == torch.__version__
    assert result["versions"]["transformers"] == transformers.__version__
    assert result["roofline"]["copy_gb_s"] > 0 and result["roofline"]["gemm_tflops"] > 0
    assert result["dtype"] == bench.CPU_DTYPE and result["context_len"] == simulate.CONTEXT_LEN
    assert result["date"] and "commit" in result


def test_cpu_run_speedups_and_crossovers_follow_from_the_step_times(cpu_run):
    result, _ = cpu_run
    a = result["speedup"]["acceptance_rate"]
    step = {(p["batch_size"], p["num_speculative_tokens"]): p for p in result["points"]}
    for row in result["speedup"]["rows"]:
        b, k = row["batch_size"], row["k"]
        tokens = simulate.expected_tokens_per_step(a, k)
        assert row["measured"] == pytest.approx(tokens * step[(b, 0)]["step_ms"] / step[(b, k)]["step_ms"])
        assert row["simulated"] == pytest.approx(
            tokens * step[(b, 0)]["simulated_step_ms"] / step[(b, k)]["simulated_step_ms"]
        )
    for cross in result["crossover_batch"]:
        rows = [r for r in result["speedup"]["rows"] if r["k"] == cross["k"]]
        assert cross["measured"] == simulate.crossover([r["batch_size"] for r in rows], [r["measured"] for r in rows])
    assert [c["k"] for c in result["crossover_batch"]] == [k for k in bench.CPU_KS if k]


def test_cpu_run_sets_the_simulator_beside_each_point(cpu_run):
    result, _ = cpu_run
    hw = simulate.hardware_presets.from_dict(result["simulator"]["hardware"])
    sim = bench.forward_simulator(
        modelspec.preset(bench.CPU_PRESET), hw, result["dtype"], result["context_len"], on_gpu=False
    )
    # the verify pass alone: no per-step, speculative or drafting cost
    assert sim.step_overhead_s == sim.spec_overhead_s == sim.ngram_s_per_token == 0
    for p in result["points"]:
        predicted = (
            1000
            * sim.step(
                p["batch_size"], p["num_speculative_tokens"], "ngram" if p["num_speculative_tokens"] else "none"
            ).time_s
        )
        assert p["simulated_step_ms"] == pytest.approx(predicted)
        assert p["error_pct"] == pytest.approx(100 * (predicted - p["step_ms"]) / p["step_ms"])
    errors = [abs(p["error_pct"]) for p in result["points"]]
    assert result["simulator"]["mape_pct"] == pytest.approx(sum(errors) / len(errors))


def test_cpu_run_calibrates_on_half_and_predicts_the_other(cpu_run):
    result, _ = cpu_run
    cal = result["calibration"]
    assert cal["calibrate_batches"] == sorted(bench.CPU_BATCHES)[1::2]
    assert cal["evaluate_batches"] == sorted(bench.CPU_BATCHES)[0::2]
    assert set(cal["fitted"]) == set(bench.FIT_PARAMS)
    held_out = [p for p in result["points"] if p["half"] == "evaluate"]
    assert {p["batch_size"] for p in held_out} == set(cal["evaluate_batches"])
    assert cal["held_out_mape_pct"] == pytest.approx(
        sum(abs(p["calibrated_error_pct"]) for p in held_out) / len(held_out)
    )
    assert all(math.isfinite(p["calibrated_step_ms"]) and p["calibrated_step_ms"] > 0 for p in result["points"])


def test_cpu_run_prints_the_short_table_last(cpu_run):
    result, printed = cpu_run
    lines = printed.strip().splitlines()
    assert lines[0].startswith(f"{bench.CPU_PRESET} on ")
    assert [line.split()[0] for line in lines[2 : 2 + len(result["crossover_batch"])]] == [
        str(c["k"]) for c in result["crossover_batch"]
    ]
    assert lines[-1].startswith("roofline:")


# --- input that cannot work says what to do ------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_one_says_what_to_do(capsys):
    assert bench.main(["--device", "cuda", "--output", "/nonexistent/x.json"]) == 2
    assert "--device cpu" in capsys.readouterr().err


def test_unknown_preset_and_dtype_are_refused(capsys):
    assert bench.main(["--device", "cpu", "--model", "GPT-5", "--output", "/nonexistent/x.json"]) == 2
    assert "Unknown model preset" in capsys.readouterr().err
    assert bench.main(["--device", "cpu", "--dtype", "int8", "--output", "/nonexistent/x.json"]) == 2
    assert "bfloat16" in capsys.readouterr().err


def test_a_spent_budget_skips_the_points_it_cannot_time():
    model = tiny_model()
    points, skipped, _ = bench.sweep(
        model, [1, 2], [0, 1], 8, 1, "static", False, budget_s=0.0, estimate=lambda b, k, reps: 0.0
    )
    assert points == [] and len(skipped) == 4 and {s["why"] for s in skipped} == {"time budget"}
