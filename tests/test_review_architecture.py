"""The reviewer reads a model's architecture from its config.json as published
(tests/data/model_configs/, each file's source in its README): only attention layers keep a KV
cache, tied embeddings count once, the checkpoint's own quantization keeps its standing, and the
ridge uses the tensor-core peak of the dtype the matmuls run in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servelab import hardware, review
from servelab.modelspec import ModelSpec

pytestmark = pytest.mark.unit

CONFIGS = Path(__file__).resolve().parent / "data" / "model_configs"


def spec(name: str) -> ModelSpec:
    return ModelSpec.from_config_json(CONFIGS / f"{name}.json")


def reviewed(tmp_path: Path, config_json: str, config: dict, workload: dict) -> review.Report:
    shutil.copy(CONFIGS / f"{config_json}.json", tmp_path / "config.json")
    config.setdefault("deployment", {})["model-config"] = "config.json"
    return review.review(config, workload, base_dir=tmp_path)


def workload(peak: int, prompt: int, output: int, **changes) -> dict:
    w = {
        "task": "chat",
        "concurrency": {"typical": max(1, peak // 2), "peak": peak},
        "prompt-tokens": {"mean": prompt, "p99": prompt},
        "output-tokens": {"mean": output, "p99": output},
    }
    w.update(changes)
    return w


# --- hybrid attention ---------------------------------------------------------------------------


def test_qwen3_next_counts_only_its_twelve_full_attention_layers():
    """48 layers, every fourth full attention (full_attention_interval 4): 12 x 2 (K, V) x 2 KV heads
    x 256 x 2 bytes = 24,576 B per token, a quarter of what 48 KV layers would hold."""
    m = spec("Qwen3-Next-80B-A3B-Instruct")
    assert (m.num_layers, m.kv_layers, m.state_layers) == (48, 12, 36)
    assert m.layer_kind == "Gated DeltaNet linear attention"
    assert m.kv_bytes_per_token() == 2 * 12 * 2 * 256 * 2 == 24_576
    # TP 4 copies the two KV heads to four: 12 x 2 x 4 x 256 x 2 (48 KV layers would be 196,608)
    assert m.kv_bytes_per_token(tensor_parallel_size=4) == 49_152


def test_qwen3_next_linear_layers_hold_a_fixed_state_per_sequence():
    """A Gated DeltaNet layer keeps 32 value heads x 128 x 128 of recurrent state and three past
    inputs of its 2 x 16 x 128 + 32 x 128 convolution channels, whatever the sequence's length."""
    m = spec("Qwen3-Next-80B-A3B-Instruct")
    per_layer = 32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)
    assert m.state_elements == per_layer == 548_864
    assert m.state_bytes_per_sequence() == 36 * per_layer * 2
    short, long = m.kv_bytes(1_000), m.kv_bytes(101_000)
    assert long - short == pytest.approx(100_000 * 24_576)  # only the attention layers grow
    assert short == pytest.approx(1_000 * 24_576 + 36 * per_layer * 2)


def test_qwen3_next_long_context_fits_where_48_kv_layers_would_not(tmp_path):
    """4 x H200 at TP 4: 4 x 150.75 GB x 0.92 - 158.1 GB of weights = 396.7 GB for the KV cache.
    48 requests of 128,000 tokens need 48 x (128,000 x 49,152 B + 39.5 MB) = 303.9 GB with 12 KV
    layers (1,208 GB if all 48 layers held KV, a false 'wrong')."""
    report = reviewed(
        tmp_path,
        "Qwen3-Next-80B-A3B-Instruct",
        {
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "tensor-parallel-size": 4,
            "max-num-seqs": 48,
            "max-model-len": 131072,
            "deployment": {"gpu": "H200", "gpus-per-node": 4, "nodes": 1},
        },
        workload(48, 126_000, 2_000),
    )
    assert report.facts["kv_gb_peak"] == pytest.approx(303.9, abs=0.2)
    assert report.finding("gpu_memory_utilization").verdict != "wrong"


def test_layer_types_lists_and_mamba_patterns_name_the_kv_layers():
    """Granite 4.0-H style layer_types, Nemotron-H's hybrid_override_pattern (only '*' layers attend;
    '-' MLP layers hold neither KV nor state) and Jamba's attn_layer_period / attn_layer_offset."""
    base = {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 4096}
    base["vocab_size"] = 1000
    granite = ModelSpec.from_config(
        {**base, "num_hidden_layers": 4, "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": 16}
    )
    assert (granite.kv_layers, granite.state_layers, granite.layer_kind) == (1, 3, "Mamba")
    nemotron = ModelSpec.from_config({**base, "num_hidden_layers": 8, "hybrid_override_pattern": "M-M*-M-*"})
    assert (nemotron.kv_layers, nemotron.state_layers) == (2, 3)
    jamba = ModelSpec.from_config(
        {**base, "num_hidden_layers": 16, "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16}
    )
    assert (jamba.kv_layers, jamba.state_layers) == (2, 14)
    assert jamba.state_elements == 2 * 1024 * 16 + 3 * 2 * 1024  # Mamba1: expand 2 x hidden channels
    dense = ModelSpec.from_config({**base, "num_hidden_layers": 4})
    assert (dense.kv_layers, dense.state_layers, dense.state_bytes_per_sequence()) == (4, 0, 0.0)


# --- tied embeddings ------------------------------------------------------------------------------


def test_gemma_3_27b_counts_its_tied_embedding_once():
    """Gemma 3's config.json states neither tie_word_embeddings nor vocab_size: Gemma3TextConfig's
    defaults (tied, 262,208) apply, so the 1.41B table is counted once: 27.42B, 54.8 GB in bf16
    (57.7 GB with a second copy as the LM head); five local layers to one global (52 of 62)."""
    m = spec("gemma-3-27b-it")
    assert m.tie_word_embeddings and m.vocab_size == 262_208
    assert m.weight_bytes() / 1e9 == pytest.approx(54.84, abs=0.01)
    assert (m.weight_bytes() + m.embedding_params * 2) / 1e9 == pytest.approx(57.7, abs=0.1)
    assert (m.sliding_window, m.sliding_layers) == (1024, 52)


# --- the checkpoint's own quantization ------------------------------------------------------------------


def test_deepseek_r1_config_json_keeps_its_native_fp8_justified(tmp_path):
    config = {
        "model": "deepseek-ai/DeepSeek-R1",
        "tensor-parallel-size": 8,
        "max-num-seqs": 64,
        "max-model-len": 16384,
        "deployment": {"gpu": "H200", "gpus-per-node": 8, "nodes": 1},
    }
    report = reviewed(tmp_path, "DeepSeek-R1", config, workload(64, 2_000, 500))
    finding = report.finding("quantization")
    assert finding.verdict == "justified", finding.reason
    assert "the model as published" in finding.reason
    catalogued = review.review(
        {k: v for k, v in config.items() if k != "deployment"}
        | {"deployment": {"gpu": "H200", "gpus-per-node": 8, "nodes": 1}},
        workload(64, 2_000, 500),
    )
    assert catalogued.finding("quantization").verdict == "justified"
    assert report.facts["weight_gb"] == catalogued.facts["weight_gb"]


def test_an_fp8_config_json_of_an_uncatalogued_model_is_not_called_native(tmp_path):
    """Only the catalogue says a checkpoint's FP8 is the model as published; a config.json of a
    model it does not know keeps its quantization, which is then a trade like any other."""
    data = json.loads((CONFIGS / "DeepSeek-R1.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(data))
    config = {
        "model": "someone/DeepSeek-R1-distilled-fp8",
        "tensor-parallel-size": 8,
        "max-num-seqs": 64,
        "max-model-len": 16384,
        "deployment": {"gpu": "H200", "gpus-per-node": 8, "nodes": 1, "model-config": "config.json"},
    }
    finding = review.review(config, workload(64, 2_000, 500), base_dir=tmp_path).finding("quantization")
    assert "the model as published" not in finding.reason


# --- the compute peak of the matmuls' dtype ----------------------------------------------------------


def test_fp8_w8a8_ridge_uses_the_fp8_peak_on_hopper():
    """H200: 1,979 TFLOP/s dense FP8 / 4,800 GB/s x 1 byte / 2 = 206 tokens (103 at the BF16 peak)."""
    config = {
        "model": "nvidia/Llama-3.3-70B-Instruct-FP8",
        "max-num-seqs": 64,
        "max-model-len": 8192,
        "deployment": {"gpu": "H200", "gpus-per-node": 1, "nodes": 1},
    }
    report = review.review(config, workload(64, 1_000, 200))
    assert report.facts["compute_dtype"] == "fp8" and report.facts["peak_tflops"] == 1979
    assert report.facts["ridge_tokens_per_step"] == pytest.approx(1979 / 4800 * 1e3 / 2, abs=0.1)
    text = report.finding("speculative_decoding").evidence + report.finding("speculative_decoding").reason
    assert "1,979 TFLOP/s dense FP8" in text


def test_fp8_on_ampere_runs_weight_only_at_the_bf16_peak():
    """The A100 has no FP8 units: vLLM serves FP8 weights through Marlin (W8A16), so the ridge is
    312 / 2,039 x 1 / 2 = 76.5 tokens."""
    config = {
        "model": "nvidia/Llama-3.3-70B-Instruct-FP8",
        "tensor-parallel-size": 2,
        "max-num-seqs": 64,
        "max-model-len": 8192,
        "deployment": {"gpu": "A100", "gpus-per-node": 2, "nodes": 1},
    }
    report = review.review(config, workload(64, 1_000, 200))
    assert report.facts["compute_dtype"] == "bfloat16" and report.facts["peak_tflops"] == 312
    assert report.facts["ridge_tokens_per_step"] == pytest.approx(76.5, abs=0.1)


@pytest.mark.parametrize(
    "gpu,compute,peak",
    [
        ("H100", "fp8", 1979),
        ("H100", "int8", 1979),
        ("A100", "int8", 624),
        ("A100", "fp8", 312),
        ("B200", "fp4", 9000),
        ("H200", "fp4", 989),
        ("MI355X", "fp4", 10066.3),
        ("T4", "int8", 130),
    ],
)
def test_each_gpu_has_the_peaks_its_datasheet_gives(gpu, compute, peak):
    assert hardware.get(gpu).peak_for(compute) == peak


def test_mi355x_gh200_and_b300_presets():
    """Datasheet figures (no driver-reported total on record), each marked so in its source."""
    mi355x, gh200, b300 = (hardware.get(n) for n in ("AMD Instinct MI355X", "NVIDIA GH200 480GB", "NVIDIA B300"))
    assert (mi355x.name, mi355x.memory_gb, mi355x.bandwidth_gb_s, mi355x.fp8_tflops) == ("MI355X", 288, 8000, 5033.2)
    assert (gh200.name, gh200.memory_gb, gh200.bandwidth_gb_s, gh200.fp8_tflops) == ("GH200", 96, 4000, 1979)
    assert (b300.name, b300.memory_gb, b300.bandwidth_gb_s, b300.fp4_tflops) == ("B300", 288, 8000, 13500)
    for hw in (mi355x, gh200, b300):
        assert hw.source.startswith("datasheet")
    with pytest.raises(hardware.UnknownHardware, match="144"):
        hardware.get("NVIDIA GH200 144G HBM3e")
