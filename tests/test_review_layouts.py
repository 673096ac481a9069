"""The arithmetic of 2026's deployments, worked by hand from each model's config.json values
(model_configs/catalogue.json): interleaved experts, chunked local attention, ignore lists,
vision towers, draft heads, and per-rank weights under expert and data parallelism."""

from __future__ import annotations

import pytest

from servelab import modelspec, review
from servelab.review import arithmetic, checks, forms
from servelab.review.serving import read_config

pytestmark = pytest.mark.unit

WORKLOAD = {
    "name": "chat",
    "task": "chat",
    "concurrency": {"typical": 8, "peak": 16},
    "prompt-tokens": {"mean": 800, "p99": 3000},
    "output-tokens": {"mean": 200, "p99": 900},
}


def cfg_of(text: str, **deployment):
    return read_config(forms.parse(text, name="cmd.sh", deployment=deployment or None))


# --- the model's layer layout ---------------------------------------------------------------


def test_maverick_holds_experts_on_every_second_layer():
    """48 layers, interleave_moe_layer_step 2: 24 MoE layers of 128 experts + a shared one (8,192 wide),
    24 dense layers of intermediate_size_mlp 16,384. Counted on all 48, it came to 784B."""
    m = modelspec.from_catalogue("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    h = 5120
    attention = h * 40 * 128 * 2 + h * 8 * 128 * 2
    moe = 128 * 3 * h * 8192 + 3 * h * 8192 + h * 128
    dense = 3 * h * 16384
    assert (m.moe_layers, m.dense_layers) == (24, 24)
    assert [i for i in range(48) if m.is_moe_layer(i)] == list(range(1, 48, 2))
    assert m.decoder_params == 48 * (attention + 2 * h) + 24 * moe + 24 * dense + 2 * 202048 * h + h
    assert round(m.decoder_params / 1e9, 1) == 400.7
    active = 48 * (attention + 2 * h) + 24 * (2 * 3 * h * 8192 + h * 128) + 24 * dense + 2 * 202048 * h + h
    assert m.active_params == active  # one routed and the shared expert per token: 17.2B
    assert round(m.active_params / 1e9, 1) == 17.2


def test_deepseek_first_dense_layers_and_moe_layer_freq():
    config = {
        "hidden_size": 64,
        "num_hidden_layers": 8,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 100,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "first_k_dense_replace": 2,
        "moe_layer_freq": 2,
    }
    m = modelspec.ModelSpec.from_config(config)
    assert [i for i in range(8) if m.is_moe_layer(i)] == [2, 4, 6]
    assert (m.moe_layers, m.dense_layers) == (3, 5)


def test_qwen_moe_mlp_only_layers_are_dense():
    config = {
        "hidden_size": 64,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 100,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "mlp_only_layers": [0, 5],
    }
    m = modelspec.ModelSpec.from_config(config)
    assert [i for i in range(6) if m.is_moe_layer(i)] == [1, 2, 3, 4]


def test_chunked_local_attention_caps_three_layers_in_four():
    """Llama 4: 36 of 48 layers keep at most one 8,192-token chunk; the 12 NoPE layers keep it all.
    KV per layer per token: 2 x 8 heads x 128 x 2 bytes = 4,096 B. One 430,000-token sequence:
    12 x 430,000 x 4,096 + 36 x 8,192 x 4,096 = 22.34 GB (84.5 GB counted as full attention)."""
    m = modelspec.from_catalogue("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (m.window_kind, m.sliding_window, m.sliding_layers) == ("chunked", 8192, 36)
    assert m.kv_bytes(430_000) == 12 * 430_000 * 4096 + 36 * 8192 * 4096
    assert round(m.kv_bytes(430_000) / 1e9, 2) == 22.34
    assert round(48 * 430_000 * 4096 / 1e9, 1) == 84.5  # what full attention would have said
    assert m.kv_bytes(4000) == 48 * 4000 * 4096  # below one chunk, every layer holds it all


def test_vision_tower_counts_in_memory_not_in_a_decode_step():
    """Qwen2.5-VL-72B's vision encoder: 32 blocks of 1,280: 4 x 1280^2 + 3 x 1280 x 3420 (gated) = 19.7M each
    (vision_config.intermediate_size 3,420 in the model's config.json)."""
    m = modelspec.from_catalogue("Qwen/Qwen2.5-VL-72B-Instruct")
    assert m.tower_params == 32 * (4 * 1280**2 + 3 * 1280 * 3420) == 629_964_800
    assert m.num_params == m.decoder_params + m.tower_params
    assert m.active_params == m.decoder_params
    assert m.weight_bytes("bfloat16") == m.num_params * 2


def test_eagle3_head_shares_the_targets_embeddings():
    """EAGLE-3 for Llama 3.1 8B: q/k/v read 2 x 4,096; o 4,096^2; MLP 3 x 4,096 x 14,336; fusion
    3 x 4,096 x 4,096; LM head 32,000 x 4,096; norms. About 0.42B, not the 1.3B a Llama layer with
    its own 128,256-token embeddings would be."""
    m = modelspec.from_catalogue("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    h = 4096
    layer = 2 * h * (32 + 16) * 128 + 32 * 128 * h + 3 * h * 14336 + 3 * h
    assert m.num_params == layer + 3 * h * h + 32000 * h + h == 424_689_664
    assert m.kv_bytes_per_token("float16") == 2 * 1 * 8 * 128 * 2


# --- checkpoint quantization as it is --------------------------------------------------------


def test_405b_fp8_keeps_attention_and_the_end_blocks_in_bf16():
    """Meta's FP8 405B quantizes the MLPs of blocks 1-124 only. Attention: 126 x (16384 x 128 x 128 x 2 +
    16384 x 8 x 128 x 2); MLP 3 x 16384 x 53248 per block. FP8: 124 MLPs = 324.54B bytes; bf16: the rest
    x 2 = 162.63 GB: 487.17 GB, not the 410 GB of counting everything FP8."""
    m = modelspec.from_catalogue("meta-llama/Llama-3.1-405B-Instruct-FP8")
    mlp = 3 * 16384 * 53248
    assert m.quantized_params == 124 * mlp
    assert m.weight_bytes() == 124 * mlp * 1 + (m.num_params - 124 * mlp) * 2
    assert round(m.weight_bytes() / 1e9, 2) == 487.17


def test_ignore_patterns_match_whole_name_parts():
    assert modelspec._matches("model.layers.1.mlp", "model.layers.1.mlp.gate_proj")
    assert not modelspec._matches("model.layers.1.mlp", "model.layers.12.mlp.gate_proj")
    assert modelspec._matches("re:.*self_attn.*", "model.layers.7.self_attn.q_proj")
    assert modelspec._matches("*.experts", "model.layers.3.mlp.experts")
    assert modelspec._matches("lm_head", "lm_head")


def test_maverick_fp8_quantizes_the_routed_experts_only():
    """24 x 128 x 3 x 5120 x 8192 = 386.55B expert parameters in FP8; the rest (14.97B) in bf16."""
    m = modelspec.from_catalogue("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8")
    experts = 24 * 128 * 3 * 5120 * 8192
    assert m.quantized_params == experts == 386_547_056_640
    assert m.weight_bytes() == experts + (m.num_params - experts) * 2
    assert m.expert_weight_bytes() == experts


def test_a_fix_never_asks_to_quantize_an_fp8_checkpoint():
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 4", gpu="H100", **{"gpus-per-node": 4}
    )
    assert "quantize the weights" not in checks.memory_savers(cfg)
    findings, _ = checks.run_checks(cfg, _workload())
    assert all("quantize the weights" not in f.fix for f in findings)
    bf16 = cfg_of(
        "vllm serve meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 4", gpu="H100", **{"gpus-per-node": 4}
    )
    assert checks.memory_savers(bf16)[0] == "quantize the weights"


# --- per-rank arithmetic -------------------------------------------------------------------


def test_expert_parallel_with_data_parallel_charges_each_rank_its_share():
    """Qwen3-235B-A22B-FP8 at DP 8 with expert parallelism on 8 H100: experts 94 x 128 x 3 x 4096 x 1536
    = 227.11B in FP8, sharded over 8; attention 94 x (4096 x 64 x 128 x 2 + 4096 x 4 x 128 x 2) = 6.71B in
    FP8, whole per rank; embeddings, norms and routers in bf16. 37.7 GB per rank, not 236 GB."""
    cfg = cfg_of(
        "vllm serve Qwen/Qwen3-235B-A22B-FP8 --data-parallel-size 8 --enable-expert-parallel",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    m = cfg.model
    experts = 94 * 128 * 3 * 4096 * 1536
    attention = 94 * (4096 * 64 * 128 * 2 + 4096 * 4 * 128 * 2)
    assert m.expert_weight_bytes() == experts
    rest = m.weight_bytes() - experts
    assert rest == attention + (m.num_params - attention - experts) * 2
    assert arithmetic.rank_weight_gb(cfg) == pytest.approx((rest + experts / 8) / 1e9)
    assert round(arithmetic.rank_weight_gb(cfg), 1) == 37.7
    finding = checks.check_parallelism(cfg, None, arithmetic.derive(cfg, _workload()))
    assert finding.verdict == "justified" and "expert-parallel group of TP 1 x DP 8 = 8 GPUs" in finding.evidence


def test_data_parallel_without_expert_parallel_still_shards_the_experts_over_every_gpu():
    """vLLM 0.32 flattens TP across DP in the fused MoE layer whether or not enable-expert-parallel is
    set (FusedMoEParallelConfig.make, vllm/model_executor/layers/fused_moe/config.py). Qwen3-235B-A22B
    in bf16 at DP 4 x TP 2 on 8 H100: experts 94 x 128 x 3 x 4096 x 1536 x 2 B = 454.2 GB over 8 GPUs, the
    rest 16.0 GB whole per rank: 16.0 + 454.2 x 2/8 = 129.5 GB per rank (not 470.2)."""
    cfg = cfg_of(
        "vllm serve Qwen/Qwen3-235B-A22B --data-parallel-size 4 --tensor-parallel-size 2 --max-model-len 16384",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    experts = 94 * 128 * 3 * 4096 * 1536 * 2
    assert arithmetic.expert_gb(cfg) == pytest.approx(experts / 1e9)
    assert arithmetic.expert_parallel_group(cfg) == 8
    rest = arithmetic.weight_gb(cfg) - experts / 1e9
    assert round(rest, 1) == 16.0
    assert arithmetic.rank_weight_gb(cfg) == pytest.approx(rest + experts / 1e9 * 2 / 8)
    assert round(arithmetic.rank_weight_gb(cfg), 1) == 129.5
    finding = checks.check_parallelism(cfg, None, arithmetic.derive(cfg, _workload()))
    assert finding.verdict == "justified"
    assert "MoE tensor-parallel group (no enable-expert-parallel) of TP 2 x DP 4 = 8 GPUs" in finding.evidence


def test_expert_parallel_inside_tp_alone_shards_as_tp_does():
    cfg = cfg_of(
        "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 8 --enable-expert-parallel",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    assert arithmetic.rank_weight_gb(cfg) == pytest.approx(arithmetic.weight_gb(cfg))


def test_a_catalogued_draft_adds_its_weights_and_kv():
    text = (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
        '\'{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}\''
    )
    cfg = cfg_of(text, gpu="H100")
    assert arithmetic.draft_gb(cfg) == pytest.approx(424_689_664 * 2 / 1e9)  # float16
    target = cfg.model.kv_bytes(1000, 1, "bfloat16")
    assert arithmetic.kv_seq_bytes(cfg, 1000) == target + 1000 * 2 * 8 * 128 * 2


def _workload():
    return review.workload_spec.read_workload(review.schema.Doc("w", WORKLOAD, "workload"))


# --- speculation: evidence, arithmetic and each verdict on its own --------------------------------


def _spec_case(batch: int, k: int = 4):
    text = (
        f"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs {batch} --speculative-config "
        f'\'{{"method": "ngram", "num_speculative_tokens": {k}, "prompt_lookup_max": 4}}\''
    )
    cfg = cfg_of(text, gpu="H100")
    wl = review.workload_spec.read_workload(
        review.schema.Doc("w", {**WORKLOAD, "concurrency": batch, "slo": {"tpot-p99-ms": 50}}, "workload")
    )
    f = arithmetic.derive(cfg, wl)
    return cfg, wl, f


def test_spec_arithmetic_worked_by_hand():
    """H100, bf16: ridge 989 / 3,350 x 2 / 2 = 295.2 tokens; k = 4: compute-bound above batch 59;
    E = (1 - 0.7^5) / 0.3 = 2.77 tokens kept of 5; break-even near 295.2 x 2.77 / 5 = 163."""
    cfg, wl, f = _spec_case(64)
    m = checks.spec_arithmetic(cfg, wl, f)
    assert m.ridge == pytest.approx(295.2, abs=0.05) and m.step_peak == 64 * 5 and m.crossover == 59
    assert m.expected == pytest.approx((1 - 0.7**5) / 0.3)
    assert m.break_even == int(m.ridge * m.expected / 5) == 163


def test_spec_unmeasured_verdict_each_branch():
    cfg, wl, f = _spec_case(256)  # 1,280 tokens per step, far past break-even
    ev = checks.spec_evidence(cfg, wl, f)
    assert not ev.measured_pair
    assert checks.spec_unmeasured_verdict(cfg, f, ev, checks.spec_arithmetic(cfg, wl, f))["verdict"] == "wrong"
    cfg, wl, f = _spec_case(100)  # past the ridge, under the break-even: the arithmetic cannot decide
    verdict = checks.spec_unmeasured_verdict(cfg, f, ev, checks.spec_arithmetic(cfg, wl, f))
    assert verdict["verdict"] == "unjustified" and "can still pay" in verdict["reason"]
    cfg, wl, f = _spec_case(8)  # memory-bound: may help, not measured
    verdict = checks.spec_unmeasured_verdict(cfg, f, ev, checks.spec_arithmetic(cfg, wl, f))
    assert verdict["verdict"] == "unjustified" and "memory-bound" in verdict["reason"]


def test_spec_measured_verdict_follows_the_measurement():
    cfg, wl, f = _spec_case(8)
    m = checks.spec_arithmetic(cfg, wl, f)

    def measured(on: float, off: float):
        cite = [
            {"setting": {"batch": 8, "speculative": s}, "metric": "output_tok_s", "value": v, "source": "bench"}
            for s, v in ((True, on), (False, off))
        ]
        data = {**WORKLOAD, "concurrency": 8, "slo": {"tpot-p99-ms": 50}, "measurements": cite}
        w = review.workload_spec.read_workload(review.schema.Doc("w", data, "workload"))
        return checks.spec_evidence(cfg, w, f), w

    ev, w = measured(900, 600)
    assert ev.measured_pair and checks.spec_measured_verdict(w, f, ev, m)["verdict"] == "justified"
    ev, w = measured(500, 600)
    assert checks.spec_measured_verdict(w, f, ev, m)["verdict"] == "wrong"
    ev, w = measured(900, 600)
    assert checks.spec_off_verdict(w, f, ev, m)["verdict"] == "unjustified"  # off although it measured faster


def test_deepseek_mtp_layer_counts_when_mtp_drafts():
    """DeepSeek-R1's one MTP layer (num_nextn_predict_layers 1): an average MoE layer (attention, 256 experts,
    the shared one, the router), the 2 x 7,168 -> 7,168 projection and its two norms, in FP8."""
    text = (
        "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --speculative-config "
        '\'{"method": "deepseek_mtp", "num_speculative_tokens": 1}\''
    )
    cfg = cfg_of(text, gpu="H200", **{"gpus-per-node": 8})
    m = cfg.model
    h = 7168
    layer = m.attention_params + 256 * 3 * h * 2048 + 3 * h * 2048 + h * 256 + 2 * h
    assert m.mtp_params == layer + 2 * h * h + 2 * h
    assert arithmetic.draft_gb(cfg) == pytest.approx(m.mtp_params / 1e9)  # fp8: one byte each
    assert arithmetic.kv_seq_bytes(cfg, 1000) == pytest.approx(m.kv_bytes(1000, 1, "bfloat16", 8) * 62 / 61)


def test_compressed_tensors_ignore_and_modelopt_globs():
    base = {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 100,
        "torch_dtype": "bfloat16",
    }
    ct = modelspec.ModelSpec.from_config(
        {
            **base,
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "ignore": ["lm_head", "re:.*layers\\.0\\..*"],
                "config_groups": {"g": {"weights": {"num_bits": 4}}},
            },
        }
    )
    attention, mlp = ct.attention_params, 3 * 64 * 256
    assert ct.quant_bytes == 0.5 and ct.quantized_params == 3 * (attention + mlp)  # layer 0 and the head kept
    mo = modelspec.ModelSpec.from_config(
        {
            **base,
            "quantization_config": {
                "quant_method": "modelopt",
                "quant_algo": "FP8",
                "exclude_modules": ["lm_head", "*self_attn*"],
            },
        }
    )
    assert mo.quantized_params == 4 * mlp


def test_nvfp4_is_four_and_a_half_bits():
    """NVFP4: 4-bit values and one FP8 scale per 16 weights: 4 + 8 / 16 = 4.5 bits (mxfp4: 4 + 8 / 32 = 4.25)."""
    base = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 100,
    }
    modelopt = modelspec.ModelSpec.from_config(
        {**base, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    )
    ct = modelspec.ModelSpec.from_config(
        {
            **base,
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
        }
    )
    assert modelopt.quant_bytes == ct.quant_bytes == 0.5625


# --- windows only where vLLM's hybrid KV cache manager runs ----------------------------------


def test_windows_cap_the_kv_only_with_the_hybrid_kv_cache_manager():
    """vLLM 0.32 (vllm/config/vllm.py, HMA runtime rules; vllm/v1/core/kv_cache_utils.py,
    unify_hybrid_kv_cache_specs) caches sliding and chunked layers in full when the hybrid KV cache
    manager is off. gpt-oss-20b: 24 layers x 8 KV heads x 64 x 2 (K, V) x 2 bytes = 2,048 B per layer;
    12 layers slide over 128 tokens. A 131,072-token sequence: (12 x 131,072 + 12 x 128) x 2,048 = 3.22 GB
    capped, 24 x 131,072 x 2,048 = 6.44 GB with --disable-hybrid-kv-cache-manager."""
    capped = cfg_of("vllm serve openai/gpt-oss-20b --max-model-len 131072", gpu="H100")
    full = cfg_of("vllm serve openai/gpt-oss-20b --max-model-len 131072 --disable-hybrid-kv-cache-manager", gpu="H100")
    assert arithmetic.kv_seq_bytes(capped, 131072) == (12 * 131072 + 12 * 128) * 2048
    assert arithmetic.kv_seq_bytes(full, 131072) == 24 * 131072 * 2048
    assert "disable-hybrid-kv-cache-manager" in arithmetic.kv_windows_off(full)
    finding = checks.check_max_model_len(full, None, arithmetic.derive(full, _workload()))
    assert "cache the full context" in finding.evidence


def test_chunked_attention_with_eagle_or_a_connector_without_hma_caches_the_full_context():
    """Llama 4 Scout at TP 8: one KV head per GPU x 8 GPUs, 48 layers x 8 x 128 x 2 x 2 bytes = 196,608 B per
    token in full; 36 of 48 layers see an 8,192-token chunk. vLLM turns the manager off for chunked local
    attention with an EAGLE draft, and for a KV connector that lacks SupportsHMA (LMCacheConnectorV1)."""
    base = "vllm serve meta-llama/Llama-4-Scout-17B-16E-Instruct --tensor-parallel-size 8 --max-model-len 262144"
    deployment = {"gpu": "H100", "gpus-per-node": 8}
    capped = cfg_of(base, **deployment)
    tokens = 100_000
    assert arithmetic.kv_seq_bytes(capped, tokens) == pytest.approx((12 * tokens + 36 * 8192) * 196_608 / 48)
    eagle = cfg_of(
        base + ' --speculative-config \'{"method": "eagle3", "model": "nvidia/Llama-4-Scout-EAGLE3", '
        '"num_speculative_tokens": 3}\'',
        **deployment,
    )
    assert arithmetic.kv_seq_bytes(eagle, tokens) == tokens * 196_608
    lmcache = cfg_of(
        base + ' --kv-transfer-config \'{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}\'', **deployment
    )
    assert arithmetic.kv_seq_bytes(lmcache, tokens) == tokens * 196_608
    nixl = cfg_of(
        base + ' --kv-transfer-config \'{"kv_connector": "NixlConnector", "kv_role": "kv_both"}\'', **deployment
    )
    assert arithmetic.kv_seq_bytes(nixl, tokens) == arithmetic.kv_seq_bytes(capped, tokens)


def test_a_smaller_layout_keeps_tensor_parallelism_inside_a_node():
    """Llama 3.1 405B at TP 8 x PP 3 on 3 x 8 H100: 811.7 GB of bf16 weights + 165.2 GB of KV at the peak
    (128 x 2,500 tokens x 516,096 B) = 976.9 GB fit on TP 8 x PP 2 (16 x 77.0 = 1,232 GB): the fix names that
    layout, never TP 16 across nodes, and a pipeline stage is not called an all-reduce."""
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline-parallel-size 3 "
        "--max-model-len 16384",
        gpu="H100",
        **{"gpus-per-node": 8, "nodes": 3},
    )
    wl = review.workload_spec.read_workload(
        review.schema.Doc(
            "w",
            {
                **WORKLOAD,
                "concurrency": {"typical": 32, "peak": 128},
                "prompt-tokens": {"mean": 2000, "p99": 8000},
                "output-tokens": {"mean": 500, "p99": 2000},
            },
            "workload",
        )
    )
    f = arithmetic.derive(cfg, wl)
    assert round(f.rank_weight_gb + f.kv_gb_peak, 1) == 976.9
    finding = checks.check_parallelism(cfg, wl, f)
    assert finding.verdict == "unjustified"
    assert "serve one replica at tensor-parallel-size 8 x pipeline-parallel-size 2 on 16 of the GPUs" in finding.fix
    assert "tensor-parallel-size 16" not in finding.fix and "all-reduce" not in finding.reason
    # TP 16 over two nodes of 8 starts (vLLM runs it over Ray): unjustified without a measurement, not wrong.
    across = cfg_of(
        "vllm serve meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 16 --max-model-len 16384",
        gpu="H100",
        **{"gpus-per-node": 8, "nodes": 2},
    )
    finding = checks.check_parallelism(across, wl, arithmetic.derive(across, wl))
    assert finding.verdict == "unjustified" and "spans nodes" in finding.reason


# --- configs vLLM will not start -----------------------------------------------------------


def test_a_quantization_argument_against_the_checkpoints_own_is_wrong():
    """ModelConfig._verify_quantization (vllm/config/model.py): Maverick-FP8's quantization_config says
    fbgemm_fp8, so --quantization fp8 stops vLLM at start; awq_marlin on an AWQ checkpoint is vLLM's override."""
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8 --quantization fp8 "
        "--tensor-parallel-size 8 --max-model-len 8192",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    assert cfg.model_config.quantization_mismatch == "fbgemm_fp8"
    finding = checks.check_quantization(cfg, _workload(), arithmetic.derive(cfg, _workload()))
    assert finding.verdict == "wrong" and "vLLM refuses to start" in finding.reason
    same = cfg_of(
        "vllm serve meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8 --quantization fbgemm_fp8 "
        "--tensor-parallel-size 8",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    assert not same.model_config.quantization_mismatch


def test_an_eagle_head_for_another_hidden_size_is_wrong_and_an_unknown_head_is_not_counted():
    """yuhuili/EAGLE3-LLaMA3.1-Instruct-8B is 4,096 wide; Llama 3.3 70B's hidden states are 8,192."""
    spec = '\'{"method": "eagle3", "model": "%s", "num_speculative_tokens": 3}\''
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 2 --max-model-len 16384 --speculative-config "
        + spec % "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        gpu="H100",
        **{"gpus-per-node": 2},
    )
    finding = checks.check_speculative_decoding(cfg, _workload(), arithmetic.derive(cfg, _workload()))
    assert finding.verdict == "wrong" and "hidden size 4,096" in finding.reason and "8,192" in finding.reason
    unknown = cfg_of(
        "vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 2 --max-model-len 16384 --speculative-config "
        + spec % "acme/EAGLE3-Llama-3.3-70B",
        gpu="H100",
        **{"gpus-per-node": 2},
    )
    assert arithmetic.draft_gb(unknown) == 0
    finding = checks.check_speculative_decoding(unknown, _workload(), arithmetic.derive(unknown, _workload()))
    assert (
        "acme/EAGLE3-Llama-3.3-70B is not in the catalogue, so its weights and KV cache are not counted"
        in finding.evidence
    )


def test_when_the_weights_alone_do_not_fit_no_fix_asks_for_a_smaller_batch():
    """gpt-oss-120b on one L40S: 65.2 GB of weights (MXFP4 experts, bf16 attention) against 46,068 MiB x 0.92
    = 44.5 GB. Neither max-num-seqs nor a smaller KV cache can help, so neither is offered."""
    cfg = cfg_of("vllm serve openai/gpt-oss-120b --max-model-len 32768", gpu="L40S", **{"gpus-per-node": 1})
    f = arithmetic.derive(cfg, _workload())
    assert round(f.rank_weight_gb, 1) == 65.2 and round(f.capacity_gb_per_gpu, 1) == 44.5
    parallelism = checks.check_parallelism(cfg, _workload(), f)
    memory = checks.check_gpu_memory_utilization(cfg, _workload(), f)
    assert parallelism.fix == "the weights alone need 65.2 GB and the one GPU holds 44.5 GB: add GPUs."
    assert "max-num-seqs" not in parallelism.fix + memory.fix and "kv-cache-dtype" not in memory.fix


def test_a_request_longer_than_the_model_supports_is_not_fixed_by_a_longer_max_model_len():
    """gpt-oss-20b supports 131,072 positions; a p99 request of 200,000 + 4,000 tokens needs more."""
    cfg = cfg_of("vllm serve openai/gpt-oss-20b --max-model-len 131072", gpu="H100")
    wl = review.workload_spec.read_workload(
        review.schema.Doc(
            "w",
            {
                **WORKLOAD,
                "prompt-tokens": {"mean": 100000, "p99": 200000},
                "output-tokens": {"mean": 1000, "p99": 4000},
            },
            "workload",
        )
    )
    finding = checks.check_max_model_len(cfg, wl, arithmetic.derive(cfg, wl))
    assert finding.verdict == "wrong" and "262,144" not in finding.fix
    assert "the model supports 131,072 positions" in finding.fix
