"""The numbers every check leans on, worked out once per review: per-rank weights and KV.

Weights: the model's own layout and checkpoint quantization (modelspec), the config's
quantization, then what one replica holds: TP x PP GPUs per replica; a mixture of experts
under data parallelism (expert-parallel or not), attention, embeddings and dense layers whole
in each rank and 1/DP of the routed experts; a speculative draft (a catalogued draft model or
EAGLE head, DeepSeek's MTP layer); LoRA slots. KV: per token across a replica's TP GPUs,
sliding and chunked windows applied where vLLM's hybrid KV cache manager runs, the draft's
layers included. Facts holds the results.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .. import modelspec
from ..hardware import DTYPE_BYTES
from ..modelspec import ModelSpec
from . import defaults
from .serving import ServingConfig
from .workload_spec import WorkloadSpec


def default_batched_tokens(hw, world_size: int = 1) -> int:
    """vLLM 0.32.0's max-num-batched-tokens for `vllm serve` when unset (review/defaults.py)."""
    return defaults.batch_defaults(hw, world_size).max_num_batched_tokens


@dataclass(frozen=True)
class Facts:
    """The numbers every check leans on, worked out once."""

    model: str
    num_params_b: float
    weight_dtype: str
    weight_gb: float
    kv_cache_dtype: str
    kv_bytes_per_token: float
    hardware: str
    gpus_available: int
    gpus_used: int
    shards: int  # GPUs one replica spans: TP x PP
    replicas: int  # data-parallel copies
    memory_gpus: int  # GPUs whose memory one replica holds: TP x PP, capped by the GPUs that exist
    peak_per_replica: int  # peak concurrent requests one replica sees
    typical_per_replica: int
    running_batch_peak: int  # sequences one replica decodes together at peak: min(max-num-seqs, load)
    running_batch_typical: int
    mean_request_tokens: int
    longest_request_tokens: int
    longest_basis: str
    kv_gb_peak: float  # per replica, at peak, mean-length requests
    capacity_gb_per_gpu: float  # memory x gpu-memory-utilization
    kv_budget_gb: float  # per replica: what is left for the KV cache after the weights
    ridge_tokens_per_step: float  # decode tokens per step where this GPU turns compute-bound
    active_params_b: float = 0.0  # parameters one token runs through (mixture of experts: the routed experts)
    kv_seq_gb_mean: float = 0.0  # one mean-length request's KV cache, per replica (sliding windows applied)
    weights_fit: bool = True  # the weights alone fit the GPUs one replica spans
    rank_weight_gb: float = 0.0  # weights one replica (a data-parallel rank) holds: the experts' share with EP
    expert_parallel_size: int = 0  # GPUs the experts are sharded across, TP x DP (0: a dense model)
    decoder_params_b: float = 0.0  # the language model's parameters, without vision / audio towers
    compute_dtype: str = "bfloat16"  # the matmuls' dtype, whose tensor-core peak sets the ridge (fp8 for W8A8)
    peak_tflops: float = 0.0  # that peak, dense

    def to_dict(self) -> dict:
        return asdict(self)


# --quantization methods that quantize activations to INT8 too (W8A8), so the matmuls run on INT8
# tensor cores; experts_int8 and bitsandbytes are weight-only and compute in the model's dtype.
INT8_W8A8 = ("w8a8", "smoothquant", "int8")


def compute_dtype(cfg: ServingConfig) -> str:
    """The dtype a step's matmuls run in, whose peak sets the ridge: FP8 weights run W8A8 on GPUs
    with FP8 tensor cores (vLLM's Fp8LinearMethod quantizes the activations per token; without
    FP8 units, Ampere and older, it runs W8A16 through Marlin at the 16-bit peak); INT8 W8A8 on INT8
    units; NVFP4 checkpoints (W4A4) on FP4 units (Blackwell); weight-only methods (AWQ, GPTQ,
    mxfp4 through Marlin) compute in the model's dtype."""
    hw = cfg.deployment.hardware
    if cfg.model_config.weight_dtype == "fp8" and hw.fp8_tflops:
        return "fp8"
    if cfg.model_config.weight_dtype == "int8" and hw.int8_tops and (cfg.model_config.quantization or "") in INT8_W8A8:
        return "int8"
    if (
        cfg.model_config.weight_dtype == "int4"
        and hw.fp4_tflops
        and cfg.model_config.quantization_source == "checkpoint"
        and cfg.model.quant_bytes == modelspec.NVFP4_BYTES
    ):
        return "fp4"
    return cfg.model_config.dtype


def _linear_bytes(cfg: ServingConfig) -> float | None:
    """Bytes per quantized weight the config asks for; None: the checkpoint's own (or none)."""
    if cfg.model_config.quantization and cfg.model_config.quantization_source != "checkpoint":
        return DTYPE_BYTES[cfg.model_config.weight_dtype]
    return None


def weight_gb(cfg: ServingConfig) -> float:
    """Weight memory: a checkpoint's own quantization, or the config's, applies to the linear
    layers; embeddings, norms and routers stay in the model's dtype."""
    return cfg.model.weight_bytes(cfg.model_config.dtype, linear_bytes=_linear_bytes(cfg)) / 1e9


def expert_gb(cfg: ServingConfig) -> float:
    """The routed experts' part of weight_gb."""
    return cfg.model.expert_weight_bytes(cfg.model_config.dtype, linear_bytes=_linear_bytes(cfg)) / 1e9


def expert_parallel_group(cfg: ServingConfig) -> int:
    """GPUs a mixture of experts' routed experts are sharded across: TP x DP, with or without
    expert parallelism. vLLM 0.32's fused MoE layer flattens TP across the data-parallel ranks
    (FusedMoEParallelConfig.make and flatten_tp_across_dp_and_pcp, in
    vllm/model_executor/layers/fused_moe/config.py): with enable-expert-parallel each of the
    TP x DP GPUs owns whole experts (EP size TP x DP); without it each holds a 1/(TP x DP) slice
    of every expert (MoE TP size TP x DP). Dense models: TP alone."""
    if cfg.model.is_moe:
        return cfg.parallel.tensor_parallel_size * cfg.parallel.data_parallel_size
    return cfg.parallel.tensor_parallel_size


def lora_gb(cfg: ServingConfig) -> float:
    """GPU memory vLLM 0.32 preallocates for LoRA, summed over one replica's TP x PP GPUs:
    max-loras slots of max-lora-rank r, each GPU holding, per layer, the buffers its layers'
    LoRA wrappers allocate.

    Dense projections (vllm/lora/layers/base_linear.py, column_parallel_linear.py,
    row_parallel_linear.py): a column-parallel layer (q/k/v, gate/up) keeps lora_a
    (r x its whole input) on every GPU and lora_b sliced 1/TP; a row-parallel layer (o, down)
    keeps lora_a sliced and lora_b (its whole output x r) on every GPU. fully-sharded-loras
    slices the whole halves too (the rank of lora_a, the output of lora_b).

    Routed experts (FusedMoEWithLoRA, vllm/lora/layers/fused_moe.py): per slot and local expert,
    w13 lora_a 2 x r x hidden, w13 lora_b 2 x moe-width-per-partition x r, w2 lora_a
    r x moe-width-per-partition, w2 lora_b hidden x r; local experts are E / (TP x DP) with
    expert parallelism and all E without, where the width is sliced over TP x DP instead
    (expert_parallel_group). enable-moe-shared-loras keeps one w13 lora_a and one w2 lora_b
    for all local experts. Shared experts are ordinary MLPs and count as dense projections."""
    if not cfg.lora.enabled:
        return 0.0
    m = cfg.model
    tp, r = cfg.parallel.tensor_parallel_size, cfg.lora.max_lora_rank
    whole = 1 if cfg.lora.fully_sharded_loras else tp  # the "whole" half is on every GPU unless fully sharded

    def column(inputs: int, outputs: int, slices: int = 1) -> float:  # elements over the TP GPUs
        return slices * r * inputs * whole + r * outputs

    def row(inputs: int, outputs: int) -> float:
        return r * inputs + r * outputs * whole

    h, hd = m.hidden_size, m.head_dim
    q, kv = m.num_heads * hd, m.num_kv_heads * hd
    attention = column(h, q + 2 * kv, slices=3) + row(q, h)

    def mlp(width: int) -> float:
        return column(h, 2 * width, slices=2) + row(width, h) if width else 0.0

    dense = mlp(m.dense_intermediate_size or m.intermediate_size)
    experts = 0.0
    if m.is_moe:
        group = expert_parallel_group(cfg)
        local = m.num_experts // group if cfg.parallel.expert_parallel else m.num_experts
        width = m.moe_intermediate_size if cfg.parallel.expert_parallel else m.moe_intermediate_size / group
        shared_a = 1 if cfg.lora.moe_shared_loras else local
        sliced = group if cfg.lora.fully_sharded_loras else 1  # w13 lora_a's rank, w2 lora_b's hidden
        per_gpu = (2 * shared_a * r * h + shared_a * h * r) / sliced + 3 * local * width * r
        experts = per_gpu * tp + mlp(m.shared_expert_intermediate_size)
    elements = sum(attention + (experts if m.is_moe_layer(i) else dense) for i in range(m.num_layers))
    return cfg.lora.max_loras * elements * DTYPE_BYTES[cfg.model_config.dtype] / 1e9


def rank_weight_gb(cfg: ServingConfig) -> float:
    """Weights one data-parallel rank's GPUs (TP x PP of them) hold: attention, embeddings and dense
    layers whole (replicated per rank), the experts 1/DP of them (expert_parallel_group: vLLM shards
    the experts across every rank's GPUs, expert parallelism or not)."""
    experts = expert_gb(cfg)
    share = cfg.parallel.tensor_parallel_size / expert_parallel_group(cfg)
    return weight_gb(cfg) - experts + experts * share + draft_gb(cfg) + lora_gb(cfg)


MTP_METHODS = ("mtp", "deepseek_mtp", "ernie_mtp", "qwen3_next_mtp", "glm4_moe_mtp")


def draft_spec(cfg: ServingConfig) -> ModelSpec | None:
    """The speculative draft the server loads beside the target, where its shape is known:
    a catalogued draft model or EAGLE head, or the target's own MTP layers."""
    if cfg.spec is None:
        return None
    if cfg.spec.draft_model and modelspec.catalogue_key(cfg.spec.draft_model):
        return modelspec.from_catalogue(cfg.spec.draft_model)
    return None


def draft_gb(cfg: ServingConfig) -> float:
    """The draft's weights, held by every replica (vLLM shards the draft with the target's TP)."""
    draft = draft_spec(cfg)
    if draft is not None:
        return (
            draft.weight_bytes(draft.torch_dtype if draft.torch_dtype in DTYPE_BYTES else cfg.model_config.dtype) / 1e9
        )
    if cfg.spec is not None and cfg.spec.method in MTP_METHODS and cfg.model.mtp_layers:
        return cfg.model.mtp_params * DTYPE_BYTES[cfg.model_config.weight_dtype] / 1e9
    return 0.0


# vLLM 0.32's speculative methods that run on the target's hidden states
# (SpeculativeConfig.use_eagle, vllm/config/speculative.py); MTP methods are normalized to "mtp".
EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark") + MTP_METHODS
# KV connectors of vLLM 0.32 that do not subclass SupportsHMA
# (vllm/distributed/kv_transfer/kv_connector/factory.py and v1/*): with one of these and no
# explicit choice, vLLM turns the hybrid KV cache manager off.
CONNECTORS_WITHOUT_HMA = frozenset(
    ("ExampleConnector", "LMCacheConnectorV1", "LMCacheMPConnector", "FlexKVConnectorV1", "HF3FSKVConnector")
)


def kv_windows_off(cfg: ServingConfig) -> str:
    """Why vLLM caches a model's sliding-window or chunked layers in full, or "" where it caps them.

    vLLM 0.32 drops KV outside a layer's window only in its hybrid KV cache manager. It turns the
    manager off (VllmConfig.__post_init__, vllm/config/vllm.py, "Hybrid KV cache manager (HMA)
    runtime rules") for --disable-hybrid-kv-cache-manager, chunked local attention with an
    EAGLE-style draft, or a KV connector without HMA support when the flag is not given; and then
    unify_hybrid_kv_cache_specs (vllm/v1/core/kv_cache_utils.py) promotes the window layers of a
    model that mixes them with full attention to full attention. A model whose every layer is
    windowed keeps its window."""
    m = cfg.model
    if not m.sliding_layers or m.sliding_layers >= m.num_layers:
        return ""
    kind = "chunked local attention" if m.window_kind == "chunked" else "sliding-window"
    if cfg.scheduler.hybrid_kv_cache is False:
        return f"disable-hybrid-kv-cache-manager turns vLLM's hybrid KV cache manager off, so its {kind} layers cache the full context"
    if m.window_kind == "chunked" and cfg.spec is not None and cfg.spec.method in EAGLE_METHODS:
        return (
            f"vLLM turns the hybrid KV cache manager off for chunked local attention with a {cfg.spec.method} "
            "draft, so its chunked layers cache the full context"
        )
    if cfg.scheduler.hybrid_kv_cache is None and cfg.cache.kv_connector in CONNECTORS_WITHOUT_HMA:
        return (
            f"kv-transfer-config's {cfg.cache.kv_connector} does not support the hybrid KV cache manager, so vLLM "
            f"turns it off and the {kind} layers cache the full context"
        )
    return ""


def kv_seq_bytes(cfg: ServingConfig, tokens: float) -> float:
    """One sequence's KV cache across a replica's tensor-parallel GPUs, the draft's layers included;
    windows capped only where vLLM's hybrid KV cache manager runs (kv_windows_off)."""
    target = cfg.model.kv_bytes(
        round(tokens), 1, cfg.cache.kv_cache_dtype, cfg.parallel.tensor_parallel_size, windows=not kv_windows_off(cfg)
    )
    draft = draft_spec(cfg)
    if draft is not None:
        return target + draft.kv_bytes(round(tokens), 1, cfg.cache.kv_cache_dtype, cfg.parallel.tensor_parallel_size)
    if cfg.spec is not None and cfg.spec.method in MTP_METHODS and cfg.model.mtp_layers:
        # an MTP layer is a full-attention layer: one attention layer's KV per token
        per_layer = (
            cfg.model.kv_bytes_per_token(cfg.cache.kv_cache_dtype, cfg.parallel.tensor_parallel_size)
            / max(1, cfg.model.kv_layers)
            * round(tokens)
        )
        return target + per_layer * cfg.model.mtp_layers
    return target


def derive(cfg: ServingConfig, wl: WorkloadSpec) -> Facts:
    shards = cfg.parallel.tensor_parallel_size * cfg.parallel.pipeline_parallel_size
    replicas = cfg.parallel.data_parallel_size * cfg.deployment.pod_replicas
    peak = math.ceil(wl.concurrency.peak / replicas)
    typical = math.ceil(wl.concurrency.typical / replicas)
    running_peak = min(cfg.scheduler.max_num_seqs, peak)
    running_typical = min(cfg.scheduler.max_num_seqs, typical)
    weights = rank_weight_gb(cfg)
    mean_tokens = round(wl.mean_request_tokens)
    kv_seq = kv_seq_bytes(cfg, mean_tokens)
    kv_token = kv_seq / mean_tokens if mean_tokens else cfg.model.kv_bytes_per_token(cfg.cache.kv_cache_dtype)
    longest, basis = wl.longest_request
    capacity = cfg.deployment.hardware.memory_gb * cfg.cache.gpu_memory_utilization
    # Memory comes from the GPUs that exist, whatever the parallel layout claims.
    memory_shards = min(shards, cfg.deployment.gpus_per_node * cfg.deployment.nodes)
    # A mixture of experts reads every expert's weights per step once the batch is large, but
    # computes only the routed ones per token: its ridge sits total/active times further out.
    compute = compute_dtype(cfg)
    ridge = cfg.deployment.hardware.ridge_tokens_per_step(DTYPE_BYTES[cfg.model_config.weight_dtype], compute)
    ridge *= cfg.model.decoder_params / cfg.model.active_params
    return Facts(
        model=cfg.model.name,
        num_params_b=round(cfg.model.num_params / 1e9, 2),
        decoder_params_b=round(cfg.model.decoder_params / 1e9, 2),
        weight_dtype=cfg.model_config.weight_dtype,
        weight_gb=round(weight_gb(cfg), 2),
        rank_weight_gb=round(weights, 2),
        expert_parallel_size=expert_parallel_group(cfg) if cfg.model.is_moe else 0,
        kv_cache_dtype=cfg.cache.kv_cache_dtype,
        kv_bytes_per_token=round(kv_token, 1),
        hardware=cfg.deployment.hardware.name,
        gpus_available=cfg.deployment.gpus_per_node * cfg.deployment.nodes,
        gpus_used=shards * cfg.parallel.data_parallel_size,
        shards=shards,
        replicas=replicas,
        memory_gpus=memory_shards,
        peak_per_replica=peak,
        typical_per_replica=typical,
        running_batch_peak=running_peak,
        running_batch_typical=running_typical,
        mean_request_tokens=mean_tokens,
        longest_request_tokens=round(longest),
        longest_basis=basis,
        kv_gb_peak=round(kv_seq * running_peak / 1e9, 2),
        capacity_gb_per_gpu=round(capacity, 2),
        kv_budget_gb=round(capacity * memory_shards - weights, 2),
        ridge_tokens_per_step=round(ridge, 1),
        active_params_b=round(cfg.model.active_params / 1e9, 2),
        kv_seq_gb_mean=round(kv_seq / 1e9, 4),
        weights_fit=weights <= capacity * memory_shards,
        compute_dtype=cfg.deployment.hardware.compute_dtype(compute),
        peak_tflops=cfg.deployment.hardware.peak_for(compute),
    )
