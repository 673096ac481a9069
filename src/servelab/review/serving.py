"""The serving config under review: the flags it sets, resolved to a model and hardware.

A Doc (from forms: a YAML config, a command line, a manifest, Helm values, a SkyPilot task)
maps vLLM flag names to values plus a deployment block. read_config checks each flag against
vLLM's own flag list, resolves the model (preset, catalogue or config.json) and the GPU
(resolve.py), fills in vLLM 0.32's defaults for what the config leaves out (defaults.py),
and notes which knobs the team actually set. What comes out is one ServingConfig, grouped the
way vLLM 0.32.0 groups its engine config (vllm/config/vllm.py, VllmConfig): model_config
(vllm/config/model.py), parallel (parallel.py), cache (cache.py), scheduler (scheduler.py),
spec (speculative.py), lora (lora.py), plus the deployment the config runs on, which is not vLLM's.
Each group has its own reader below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..hardware import Hardware
from ..modelspec import ModelSpec
from . import defaults, vllm_flags
from .resolve import DTYPE_NAMES, preset_key, quantization_in_name, read_hardware, read_model
from .schema import (
    Doc,
    as_bool,
    as_human_int,
    as_int,
    as_number,
    as_str,
    choice,
    json_or_mapping,
    label,
    mapping,
    required,
    suggest,
    swap,
)
from .speculative import SPECULATIVE_KEYS, SpecConfig, read_spec, speculative_config

__all__ = [
    "SPECULATIVE_KEYS",
    "Adapter",
    "CacheConfig",
    "DeploymentConfig",
    "LoRAConfig",
    "ModelConfig",
    "ParallelConfig",
    "SchedulerConfig",
    "ServingConfig",
    "SpecConfig",
    "preset_key",
    "read_config",
]

# vLLM's defaults for the knobs under review, used when a config leaves one out.
DEFAULT_GPU_MEMORY_UTILIZATION = defaults.GPU_MEMORY_UTILIZATION
DEFAULT_PREFIX_CACHING = defaults.PREFIX_CACHING
DEFAULT_INTERNODE_GB_S = 50.0  # per-GPU network between nodes: one 400 Gb/s InfiniBand link

# The keys of `vllm serve --config` that this reviewer reads. Every other flag the
# installed vLLM accepts (vllm_flags.json, from vLLM's own parser) is accepted and
# listed as not reviewed; one vLLM does not know is an error.
REVIEWED_KEYS = (
    "model",
    "dtype",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
    "max-num-seqs",
    "max-num-batched-tokens",
    "quantization",
    "kv-cache-dtype",
    "speculative-config",
    "enable-prefix-caching",
    "gpu-memory-utilization",
    "max-model-len",
    "enforce-eager",
    "enable-chunked-prefill",
    "enable-expert-parallel",
    "enable-lora",
    "max-loras",
    "max-lora-rank",
    "lora-modules",
    "load-format",
    "fully-sharded-loras",
    "enable-moe-shared-loras",
    "disable-hybrid-kv-cache-manager",
    "kv-transfer-config",
    "spec-method",
    "spec-model",
    "spec-tokens",
    "performance-mode",
    "all2all-backend",
)
# Flags that change nothing the review weighs (where the server listens, logging, names).
UNWEIGHED_FLAGS = frozenset(
    (
        "host",
        "port",
        "served-model-name",
        "uvicorn-log-level",
        "disable-log-stats",
        "enable-log-requests",
        "api-key",
        "root-path",
        "allowed-origins",
        "disable-uvicorn-access-log",
        "trust-remote-code",
        "download-dir",
        "revision",
        "tokenizer",
        "tokenizer-mode",
        "chat-template",
        "response-role",
        "tool-call-parser",
        "enable-auto-tool-choice",
        "reasoning-parser",
        "seed",
    )
)
# vLLM 0.32.0's LoRA defaults (vllm/config/lora.py): one adapter slot of rank 16.
DEFAULT_MAX_LORAS = 1
DEFAULT_MAX_LORA_RANK = 16
DEPLOYMENT_KEYS = ("gpu", "hardware-file", "gpus-per-node", "nodes", "model-config", "internode-gb-s", "replicas")

# --quantization values vLLM 0.32 accepts on a checkpoint of the other name: the Marlin kernels
# override awq / gptq checkpoints (override_quantization_method, vllm/model_executor/layers/quantization/).
_QUANT_FAMILY = {"awq_marlin": "awq", "gptq_marlin": "gptq", "marlin": "gptq", "gptq_marlin_24": "gptq"}

# `quantization:` values and the bytes per weight they leave.
QUANTIZATION_WEIGHT_DTYPE = {
    "awq": "int4",
    "awq_marlin": "int4",
    "gptq": "int4",
    "gptq_marlin": "int4",
    "marlin": "int4",
    "bitsandbytes": "int4",
    "gguf": "int4",
    "mxfp4": "int4",
    "int4": "int4",
    "w4a16": "int4",
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "modelopt": "fp8",
    "ptpc_fp8": "fp8",
    "int8": "int8",
    "w8a8": "int8",
    "experts_int8": "int8",
    "smoothquant": "int8",
    "compressed-tensors": "int8",  # its bit width lives in the checkpoint; 8-bit is the common case
}
# A checkpoint's quantization_config bytes per weight, as the dtype the ridge arithmetic uses.
CHECKPOINT_WEIGHT_DTYPE = {1.0: "fp8", 0.5: "int4", 4.25 / 8: "int4", 4.5 / 8: "int4"}
# kv-cache-dtype values (vLLM 0.32.0's CacheDType) and the width the KV arithmetic uses; the
# mixed-width schemes are rounded up to the next width it knows (k8v4: 8, 3-bit: 4).
KV_DTYPE_NAMES = {
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_inc": "fp8",
    "fp8_ds_mla": "fp8",
    "fp8_per_token_head": "fp8",
    "int8_per_token_head": "int8",
    "int4_per_token_head": "int4",
    "nvfp4_ds_mla": "int4",
    "ultraquant_4bit": "int4",
    "turboquant_4bit_nc": "int4",
    "turboquant_k3v4_nc": "int4",
    "turboquant_3bit_nc": "int4",
    "turboquant_k8v4": "int8",
    **DTYPE_NAMES,
}


# --- the serving config --------------------------------------------------------


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter the config names, and what its adapter_config.json says where it can be read."""

    name: str
    path: str
    base: str = ""  # the model it was trained on (base_model_name_or_path, or lora-modules' base_model_name)
    rank: int = 0  # r, 0 where unknown
    source: str = ""  # where base and rank were read
    line: int | None = None


@dataclass(frozen=True)
class ModelConfig:
    """vLLM's ModelConfig (vllm/config/model.py) as far as the review weighs it: dtypes, quantization, length."""

    dtype: str  # activations and unquantized weights
    quantization: str | None  # as written ("awq"), None when unquantized
    weight_dtype: str  # a hardware.DTYPE_BYTES key
    max_model_len: int
    quantization_from_name: bool = False  # inferred from the model id or the checkpoint, not set in the config
    quantization_source: str = ""  # "checkpoint" (its quantization_config), "model id", or "" (the config)
    quantization_mismatch: str = ""  # the checkpoint's quant_method where --quantization names another
    max_model_len_auto: bool = False  # max-model-len auto / -1: vLLM fits the model's length to the KV memory
    enforce_eager: bool = False
    load_format: str = "auto"  # vLLM's LoadConfig.load_format (vllm/config/load.py)


@dataclass(frozen=True)
class ParallelConfig:
    """vLLM's ParallelConfig (vllm/config/parallel.py): how the model is split over GPUs."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    expert_parallel: bool = False  # whole experts per GPU over TP x DP (without it, each expert sliced over TP x DP)


@dataclass(frozen=True)
class CacheConfig:
    """vLLM's CacheConfig (vllm/config/cache.py): the KV cache's memory, width and reuse."""

    gpu_memory_utilization: float
    kv_cache_dtype: str
    prefix_caching: bool
    kv_connector: str = ""  # kv-transfer-config's kv_connector (vLLM's KVTransferConfig, vllm/config/kv_transfer.py)
    prefix_caching_default: str = ""  # where a pinned release's default differs from vLLM 0.32's: which, and why


@dataclass(frozen=True)
class SchedulerConfig:
    """vLLM's SchedulerConfig (vllm/config/scheduler.py): the batch each step may form."""

    max_num_seqs: int
    max_num_batched_tokens: int | None
    chunked_prefill: bool = True  # vLLM's V1 engine chunks prefills unless told not to
    # False: --disable-hybrid-kv-cache-manager; True: --no-disable-...; None: vLLM decides
    hybrid_kv_cache: bool | None = None


@dataclass(frozen=True)
class LoRAConfig:
    """vLLM's LoRAConfig (vllm/config/lora.py), present when --enable-lora is."""

    enabled: bool = False  # --enable-lora
    max_loras: int = DEFAULT_MAX_LORAS  # adapter slots vLLM preallocates on the GPU
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    fully_sharded_loras: bool = False  # --fully-sharded-loras: LoRA buffers sliced over TP on both halves
    moe_shared_loras: bool = False  # --enable-moe-shared-loras: one w13 lora_a and w2 lora_b for all experts
    adapters: tuple[Adapter, ...] = ()


@dataclass(frozen=True)
class DeploymentConfig:
    """Where the server runs (the config's deployment block, or what its form says): not a vLLM group."""

    hardware: Hardware
    gpus_per_node: int
    nodes: int = 1
    internode_gb_s: float = DEFAULT_INTERNODE_GB_S
    pod_replicas: int = 1  # copies of the whole server (a Deployment's replicas), each with its GPUs


@dataclass(frozen=True)
class ServingConfig:
    name: str
    model_name: str  # as written in the config
    model: ModelSpec
    model_source: str  # "preset Llama-3.1-8B" or the config.json path
    model_config: ModelConfig
    parallel: ParallelConfig
    cache: CacheConfig
    scheduler: SchedulerConfig
    spec: SpecConfig | None  # vLLM's SpeculativeConfig (speculative.py)
    deployment: DeploymentConfig
    set_keys: frozenset[str]  # knobs the team wrote down (the rest are vLLM defaults)
    doc: Doc | None = field(repr=False, compare=False, default=None)
    lora: LoRAConfig = LoRAConfig()
    not_reviewed: tuple[str, ...] = ()  # flags vLLM accepts that no check weighs
    benchmark_flags: tuple[tuple[str, int | None], ...] = ()  # benchmark-only settings found beside the server
    removed_flags: tuple[tuple[str, Any, int | None], ...] = ()  # (flag, value, line) vLLM 0.32 no longer has
    unapplied: tuple[tuple[str, Any, int | None], ...] = ()  # (where, value, line) written but never passed to vLLM

    @property
    def speculative(self) -> bool:
        return self.spec is not None

    def knob(self, key: str, value: Any) -> str:
        """How a knob reads in a finding: 'max-num-seqs 256 (line 7)' or '... (vLLM default)'."""
        if key in self.set_keys:
            line = self.doc.line((self._raw_keys.get(key, key),)) if self.doc else None
            return f"{key} {value}" + (f" (line {line})" if line else "")
        return f"{key} {value} (vLLM default)"

    @property
    def _raw_keys(self) -> dict[str, str]:
        raw = {}
        if self.doc is not None and isinstance(self.doc.data, dict):
            for key in self.doc.data:
                if isinstance(key, str):
                    raw[key.strip().replace("_", "-")] = key
        return raw

    def setting(self) -> dict[str, Any]:
        """The config in the vocabulary of a measurement's setting."""
        m, p, c, s = self.model_config, self.parallel, self.cache, self.scheduler
        return {
            "max-num-seqs": s.max_num_seqs,
            "tensor-parallel-size": p.tensor_parallel_size,
            "pipeline-parallel-size": p.pipeline_parallel_size,
            "data-parallel-size": p.data_parallel_size,
            "max-model-len": m.max_model_len,
            "num-speculative-tokens": self.spec.num_speculative_tokens if self.spec else 0,
            "gpu-memory-utilization": c.gpu_memory_utilization,
            "speculative": self.speculative,
            "enable-prefix-caching": c.prefix_caching,
            "quantization": m.quantization or "none",
            "method": self.spec.method if self.spec else "none",
            "kv-cache-dtype": c.kv_cache_dtype,
            "dtype": m.dtype,
            "model": self.model.name,
            "gpu": self.deployment.hardware.name,
            "enforce-eager": m.enforce_eager,
            "enable-chunked-prefill": s.chunked_prefill,
            "max-num-batched-tokens": s.max_num_batched_tokens,
            "enable-expert-parallel": p.expert_parallel,
        }


# --- reading it: one reader per group ------------------------------------------

Getter = Callable[..., tuple[Any, tuple]]


def read_config(doc: Doc) -> ServingConfig:
    """Validate a serving config document and fill in vLLM's defaults."""
    fields = _canonical_fields(doc)

    def get(key: str, default: Any = None) -> tuple[Any, tuple]:
        return fields.get(key, (default, (key,)))

    if "deployment" not in fields:
        raise doc.error(
            (),
            "the serving config has no 'deployment' block: say which GPU, how many "
            "per node and how many nodes (deployment: {gpu: H100, gpus-per-node: 8, nodes: 1})",
        )
    deployment_block = mapping(
        doc, fields["deployment"][1], fields["deployment"][0], DEPLOYMENT_KEYS, "deployment block"
    )
    deployment = _read_deployment(doc, deployment_block)
    if "model" not in fields:
        raise doc.error((), "the serving config has no 'model': name the model it serves")
    model_name = as_str(doc, fields["model"][1], fields["model"][0])
    model, model_source, torch_dtype = read_model(doc, model_name, deployment_block)
    model_config = _read_model_config(doc, get, model, model_name, torch_dtype)
    parallel = _read_parallel(doc, get)
    spec = read_spec(doc, *speculative_config(doc, get))
    return ServingConfig(
        name=doc.name,
        model_name=model_name,
        model=model,
        model_source=model_source,
        model_config=model_config,
        parallel=parallel,
        cache=_read_cache(doc, get, model_config.dtype),
        scheduler=_read_scheduler(doc, get, deployment.hardware, parallel, model_config.max_model_len),
        spec=spec,
        deployment=deployment,
        set_keys=frozenset(k for k in fields if fields[k][0] is not None)
        | ({"speculative-config"} if spec is not None else set()),
        doc=doc,
        lora=_read_lora(doc, get),
        not_reviewed=tuple(
            sorted(k for k in fields if k not in REVIEWED_KEYS and k != "deployment" and k not in UNWEIGHED_FLAGS)
        ),
        removed_flags=tuple(doc.removed_flags),
        benchmark_flags=tuple(doc.benchmark_flags),
        unapplied=tuple(doc.unapplied),
    )


def _canonical_fields(doc: Doc) -> dict[str, tuple[Any, tuple]]:
    """The document's keys checked against vLLM's flag list, each under the flag's own name
    ('max_num_seqs', 'tp', 'no-enable-prefix-caching' all become the flag they spell); removed flags
    are set aside on the doc for their finding."""
    data = doc.data
    if isinstance(data, dict) and "concurrency" in data and "model" not in data:
        raise doc.error(
            (),
            "this looks like a workload file, not a serving config; "
            "pass the config first and the workload with --workload",
        )
    if not isinstance(data, dict):
        return mapping(doc, (), data, REVIEWED_KEYS + ("deployment",), "serving config")
    for raw in data:
        gone = vllm_flags.removed(raw) if isinstance(raw, str) else None
        if gone:
            doc.removed_flags.append((gone, data[raw], doc.lines.get((raw,))))
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and vllm_flags.removed(k))}
    for raw in data:
        if isinstance(raw, str) and raw.strip().replace("_", "-") != "deployment" and vllm_flags.lookup(raw)[0] is None:
            raise doc.error((raw,), f"{raw}: unknown key: {vllm_flags.unknown_message(raw)}")
    known = tuple(dict.fromkeys(REVIEWED_KEYS + ("deployment",) + vllm_flags.names()))
    canonical: dict = {}
    for raw, value in data.items():
        flag, negated = (
            vllm_flags.lookup(raw) if isinstance(raw, str) and raw.strip() != "deployment" else (None, False)
        )
        key = flag.name if flag else raw
        if key in canonical:
            raise doc.error((raw,), f"{raw}: given twice (as '{canonical[key][0]}' too); keep one")
        if negated and isinstance(value, bool):
            value = not value
        canonical[key] = (raw, value)
        if (raw,) in doc.lines:
            doc.lines.setdefault((key,), doc.lines[(raw,)])
    return mapping(doc, (), {key: value for key, (_, value) in canonical.items()}, known, "serving config")


def _read_deployment(doc: Doc, block: dict) -> DeploymentConfig:
    """The deployment block: the GPU, GPUs per node, nodes, the network between them, replicas."""
    return DeploymentConfig(
        hardware=read_hardware(doc, block),
        gpus_per_node=as_int(doc, *required(doc, block, "gpus-per-node", ("deployment",)), minimum=1),
        nodes=as_int(doc, *swap(block.get("nodes", (1, ("deployment", "nodes")))), minimum=1),
        internode_gb_s=as_number(
            doc, *swap(block.get("internode-gb-s", (DEFAULT_INTERNODE_GB_S, ("deployment",)))), above=0
        ),
        pod_replicas=as_int(doc, *swap(block.get("replicas", (1, ("deployment",)))), minimum=1),
    )


def _read_model_config(doc: Doc, get: Getter, model: ModelSpec, model_name: str, torch_dtype: str) -> ModelConfig:
    """dtype, quantization (the config's, the checkpoint's or the model id's), max-model-len, eager, load format."""
    value, path = get("dtype", "auto")
    dtype = torch_dtype if str(value).lower() == "auto" else choice(doc, path, value, DTYPE_NAMES, "dtype")
    quantization, from_name, source, mismatch = _read_quantization(doc, get, model, model_name)
    if source == "checkpoint":
        weight_dtype = CHECKPOINT_WEIGHT_DTYPE.get(model.quant_bytes, "int8")
    else:
        weight_dtype = QUANTIZATION_WEIGHT_DTYPE.get(quantization, "int8") if quantization else dtype
    value, path = get("max-model-len")
    auto = value is not None and as_human_int(doc, path, value, minimum=1, auto=True) == -1
    if value is None or auto:  # auto / -1: the model's length, fitted to memory at start
        max_model_len = model.max_position_embeddings
        if not max_model_len:
            raise doc.error(
                (),
                "max-model-len is not set and the model's config.json has no "
                "max_position_embeddings: set max-model-len",
            )
    else:
        max_model_len = as_human_int(doc, path, value, minimum=1)
    value, path = get("load-format", "auto")
    return ModelConfig(
        dtype=dtype,
        quantization=quantization,
        weight_dtype=weight_dtype,
        max_model_len=max_model_len,
        quantization_from_name=from_name,
        quantization_source=source,
        quantization_mismatch=mismatch,
        max_model_len_auto=auto,
        enforce_eager=as_bool(doc, *swap(get("enforce-eager", False))),
        load_format=as_str(doc, path, value).lower() if value is not None else "auto",
    )


def _read_quantization(doc: Doc, get: Getter, model: ModelSpec, model_name: str) -> tuple[str | None, bool, str, str]:
    """(method, inferred rather than set, where it was read, the checkpoint's method where the flag names another)."""
    value, path = get("quantization")
    if model.quant_method and (value is None or str(value).strip().lower() in ("none", "", model.quant_method)):
        return model.quant_method, True, "checkpoint", ""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
        named = quantization_in_name(model_name)
        return named, named is not None, "model id" if named else "", ""
    text = as_str(doc, path, value).lower()
    if text not in QUANTIZATION_WEIGHT_DTYPE:
        raise doc.error(
            path,
            f"{label(path)}: unknown quantization {value!r}{suggest(text, tuple(QUANTIZATION_WEIGHT_DTYPE), 'methods')}",
        )
    mismatch = ""
    if model.quant_method and _QUANT_FAMILY.get(text, text) != _QUANT_FAMILY.get(
        model.quant_method, model.quant_method
    ):
        mismatch = model.quant_method
    return text, False, "", mismatch


def _read_parallel(doc: Doc, get: Getter) -> ParallelConfig:
    return ParallelConfig(
        tensor_parallel_size=as_int(doc, *swap(get("tensor-parallel-size", 1)), minimum=1),
        pipeline_parallel_size=as_int(doc, *swap(get("pipeline-parallel-size", 1)), minimum=1),
        data_parallel_size=as_int(doc, *swap(get("data-parallel-size", 1)), minimum=1),
        expert_parallel=as_bool(doc, *swap(get("enable-expert-parallel", False))),
    )


def _read_cache(doc: Doc, get: Getter, dtype: str) -> CacheConfig:
    value, path = get("kv-cache-dtype", "auto")
    kv_dtype = dtype if str(value).lower() == "auto" else choice(doc, path, value, KV_DTYPE_NAMES, "kv-cache-dtype")
    prefix_default, prefix_why = defaults.prefix_caching_default(doc.vllm_version)
    return CacheConfig(
        gpu_memory_utilization=as_number(
            doc, *swap(get("gpu-memory-utilization", DEFAULT_GPU_MEMORY_UTILIZATION)), above=0, maximum=1
        ),
        kv_cache_dtype=kv_dtype,
        prefix_caching=as_bool(doc, *swap(get("enable-prefix-caching", prefix_default))),
        prefix_caching_default=prefix_why,
        kv_connector=_read_kv_connector(doc, *swap(get("kv-transfer-config"))),
    )


def _read_scheduler(
    doc: Doc, get: Getter, hw: Hardware, parallel: ParallelConfig, max_model_len: int
) -> SchedulerConfig:
    """max-num-seqs and max-num-batched-tokens, left out: the defaults vLLM picks by platform, GPU memory,
    world size and the rules around them (review/defaults.py, serve_defaults)."""
    value, path = get("max-num-seqs")
    given_seqs = None if value is None else as_int(doc, path, value, minimum=1)
    value, path = get("max-num-batched-tokens")
    max_batched = None if value is None else as_human_int(doc, path, value, minimum=1)
    chunked = as_bool(doc, *swap(get("enable-chunked-prefill", True)))
    value, path = get("performance-mode", "balanced")
    mode = as_str(doc, path, value).lower()
    value, path = get("all2all-backend", "")
    backend = as_str(doc, path, value).lower() if value else ""
    batched_dp = (
        backend in defaults.BATCHED_DP_BACKENDS and parallel.expert_parallel and parallel.data_parallel_size > 1
    )
    max_num_seqs, tokens, _ = defaults.serve_defaults(
        hw,
        parallel.tensor_parallel_size * parallel.pipeline_parallel_size,
        max_num_seqs=given_seqs,
        max_num_batched_tokens=max_batched,
        max_model_len=max_model_len,
        chunked_prefill=chunked,
        performance_mode=mode,
        batched_dp_moe=batched_dp,
    )
    if max_batched is None and (mode == "throughput" or batched_dp or not chunked):
        max_batched = tokens  # a default other than the platform's, which the checks would otherwise assume
    value, path = get("disable-hybrid-kv-cache-manager")
    return SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_batched,
        chunked_prefill=chunked,
        hybrid_kv_cache=None if value is None else not as_bool(doc, path, value),
    )


def _read_lora(doc: Doc, get: Getter) -> LoRAConfig:
    return LoRAConfig(
        enabled=as_bool(doc, *swap(get("enable-lora", False))),
        max_loras=as_int(doc, *swap(get("max-loras", DEFAULT_MAX_LORAS)), minimum=1),
        max_lora_rank=as_int(doc, *swap(get("max-lora-rank", DEFAULT_MAX_LORA_RANK)), minimum=1),
        fully_sharded_loras=as_bool(doc, *swap(get("fully-sharded-loras", False))),
        moe_shared_loras=as_bool(doc, *swap(get("enable-moe-shared-loras", False))),
        adapters=_read_adapters(doc, *swap(get("lora-modules"))),
    )


def _read_adapters(doc: Doc, path: tuple, value: Any) -> tuple[Adapter, ...]:
    """--lora-modules: 'name=path' words or vLLM's JSON form ({"name", "path", "base_model_name"}).
    A local adapter folder's adapter_config.json says its base model and rank."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        base = ""
        if isinstance(item, dict) or (isinstance(item, str) and item.strip().startswith("{")):
            try:
                spec = item if isinstance(item, dict) else json.loads(item)
            except json.JSONDecodeError as exc:
                raise doc.error(path, f"lora-modules: {item!r} is not valid JSON ({exc.msg})") from None
            name, where, base = (
                str(spec.get("name", "")),
                str(spec.get("path", "")),
                str(spec.get("base_model_name") or ""),
            )
        elif isinstance(item, str) and "=" in item:
            name, _, where = item.partition("=")
        else:
            raise doc.error(
                path,
                f'lora-modules: {item!r} must be NAME=PATH or {{"name": ..., "path": ..., "base_model_name": ...}}',
            )
        rank, source = 0, "lora-modules" if base else ""
        folder = doc.resolve(where) if where else None
        config = folder / "adapter_config.json" if folder is not None else None
        if config is not None and config.is_file():
            try:
                data = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise doc.error(path, f"lora-modules: cannot read {config}: {exc}") from None
            base = base or str(data.get("base_model_name_or_path") or "")
            rank = data.get("r") if isinstance(data.get("r"), int) else 0
            source = str(config)
        out.append(
            Adapter(name=name.strip(), path=where.strip(), base=base, rank=rank, source=source, line=doc.line(path))
        )
    return tuple(out)


def _read_kv_connector(doc: Doc, path: tuple, value: Any) -> str:
    """kv-transfer-config's kv_connector (JSON on the command line, a mapping in YAML)."""
    if value is None:
        return ""
    value = json_or_mapping(doc, path, value)
    if not isinstance(value, dict):
        raise doc.error(path, f"{label(path)}: must be a mapping with kv_connector and kv_role")
    connector = value.get("kv_connector") or ""
    return connector if isinstance(connector, str) else ""
