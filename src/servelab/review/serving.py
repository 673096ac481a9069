"""The serving config under review: the flags it sets, resolved to a model and hardware.

A Doc (from forms: a YAML config, a command line, a manifest, Helm values, a SkyPilot task)
maps vLLM flag names to values plus a deployment block. read_config checks each flag against
vLLM's own flag list, resolves the model (preset, catalogue or config.json) and the GPU
(hardware.py), fills in vLLM 0.32's defaults for what the config leaves out (defaults.py),
and notes which knobs the team actually set. What comes out is one ServingConfig.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .. import hardware, modelspec
from ..hardware import Hardware
from ..modelspec import ModelSpec
from . import defaults, vllm_flags
from .schema import (
    Doc,
    ReviewInputError,
    as_bool,
    as_human_int,
    as_int,
    as_number,
    as_str,
    choice,
    label,
    mapping,
    required,
    show,
    suggest,
    swap,
)

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
# vLLM's speculative_config is JSON with underscore keys.
SPECULATIVE_KEYS = (
    "method",
    "num_speculative_tokens",
    "model",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "num_speculative_tokens_per_batch_size",
    "disable_by_batch_size",
    "draft_tensor_parallel_size",
    "acceptance_method",
    "quantization",
    "max_model_len",
    "revision",
)

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
DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}
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
class SpecConfig:
    """speculative-config, with its load-adaptive schedule if any."""

    method: str
    num_speculative_tokens: int
    draft_model: str = ""
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    # [[min_batch, max_batch, k], ...]: vLLM's num_speculative_tokens_per_batch_size
    schedule: tuple[tuple[int, int, int], ...] = ()
    disable_by_batch_size: int | None = None  # older vLLM: no speculation above this many requests

    @property
    def adaptive(self) -> bool:
        return bool(self.schedule) or self.disable_by_batch_size is not None

    def k_at(self, batch: int) -> int:
        """Draft tokens per sequence at this batch size."""
        if self.disable_by_batch_size is not None and batch > self.disable_by_batch_size:
            return 0
        for low, high, k in self.schedule:
            if low <= batch <= high:
                return k
        return self.num_speculative_tokens if not self.schedule else 0

    def describe(self) -> str:
        text = f"{self.method}, k={self.num_speculative_tokens}"
        if self.schedule:
            text += f", per batch size {[list(row) for row in self.schedule]}"
        if self.disable_by_batch_size is not None:
            text += f", off above batch {self.disable_by_batch_size}"
        return text


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
class ServingConfig:
    name: str
    model_name: str  # as written in the config
    model: ModelSpec
    model_source: str  # "preset Llama-3.1-8B" or the config.json path
    dtype: str  # activations and unquantized weights
    quantization: str | None  # as written ("awq"), None when unquantized
    quantization_from_name: bool  # inferred from the model id or the checkpoint, not set in the config
    weight_dtype: str  # a hardware.DTYPE_BYTES key
    kv_cache_dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    max_num_seqs: int
    max_num_batched_tokens: int | None
    spec: SpecConfig | None
    prefix_caching: bool
    gpu_memory_utilization: float
    max_model_len: int
    hardware: Hardware
    gpus_per_node: int
    nodes: int
    internode_gb_s: float
    set_keys: frozenset[str]  # knobs the team wrote down (the rest are vLLM defaults)
    doc: Doc | None = field(repr=False, compare=False, default=None)
    enforce_eager: bool = False
    chunked_prefill: bool = True  # vLLM's V1 engine chunks prefills unless told not to
    pod_replicas: int = 1  # copies of the whole server (a Deployment's replicas), each with its GPUs
    quantization_source: str = ""  # "checkpoint" (its quantization_config), "model id", or "" (the config)
    not_reviewed: tuple[str, ...] = ()  # flags vLLM accepts that no check weighs
    expert_parallel: bool = False  # whole experts per GPU over TP x DP (without it, each expert sliced over TP x DP)
    lora: bool = False  # --enable-lora
    max_loras: int = DEFAULT_MAX_LORAS  # adapter slots vLLM preallocates on the GPU
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    fully_sharded_loras: bool = False  # --fully-sharded-loras: LoRA buffers sliced over TP on both halves
    moe_shared_loras: bool = False  # --enable-moe-shared-loras: one w13 lora_a and w2 lora_b for all experts
    adapters: tuple[Adapter, ...] = ()
    hybrid_kv_cache: bool | None = (
        None  # False: --disable-hybrid-kv-cache-manager; True: --no-disable-...; None: vLLM decides
    )
    kv_connector: str = ""  # kv-transfer-config's kv_connector
    quantization_mismatch: str = ""  # the checkpoint's quant_method where --quantization names another
    max_model_len_auto: bool = False  # max-model-len auto / -1: vLLM fits the model's length to the KV memory
    load_format: str = "auto"
    benchmark_flags: tuple[tuple[str, int | None], ...] = ()  # benchmark-only settings found beside the server
    removed_flags: tuple[tuple[str, Any, int | None], ...] = ()  # (flag, value, line) vLLM 0.32 no longer has

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
        return {
            "max-num-seqs": self.max_num_seqs,
            "tensor-parallel-size": self.tensor_parallel_size,
            "pipeline-parallel-size": self.pipeline_parallel_size,
            "data-parallel-size": self.data_parallel_size,
            "max-model-len": self.max_model_len,
            "num-speculative-tokens": self.spec.num_speculative_tokens if self.spec else 0,
            "gpu-memory-utilization": self.gpu_memory_utilization,
            "speculative": self.speculative,
            "enable-prefix-caching": self.prefix_caching,
            "quantization": self.quantization or "none",
            "method": self.spec.method if self.spec else "none",
            "kv-cache-dtype": self.kv_cache_dtype,
            "dtype": self.dtype,
            "model": self.model.name,
            "gpu": self.hardware.name,
            "enforce-eager": self.enforce_eager,
            "enable-chunked-prefill": self.chunked_prefill,
            "max-num-batched-tokens": self.max_num_batched_tokens,
            "enable-expert-parallel": self.expert_parallel,
        }


def read_config(doc: Doc) -> ServingConfig:
    """Validate a serving config document and fill in vLLM's defaults."""
    data = doc.data
    if isinstance(data, dict) and "concurrency" in data and "model" not in data:
        raise doc.error(
            (),
            "this looks like a workload file, not a serving config; "
            "pass the config first and the workload with --workload",
        )
    if isinstance(data, dict):
        for raw in data:
            gone = vllm_flags.removed(raw) if isinstance(raw, str) else None
            if gone:
                doc.removed_flags.append((gone, data[raw], doc.lines.get((raw,))))
        data = {k: v for k, v in data.items() if not (isinstance(k, str) and vllm_flags.removed(k))}
        for raw in data:
            if (
                isinstance(raw, str)
                and raw.strip().replace("_", "-") != "deployment"
                and vllm_flags.lookup(raw)[0] is None
            ):
                raise doc.error((raw,), f"{raw}: unknown key: {vllm_flags.unknown_message(raw)}")
        known = tuple(dict.fromkeys(REVIEWED_KEYS + ("deployment",) + vllm_flags.names()))
        # Every spelling vLLM takes ('max_num_seqs', 'tp', 'no-enable-prefix-caching') becomes the flag's name.
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
        data = {key: value for key, (_, value) in canonical.items()}
    else:
        known = REVIEWED_KEYS + ("deployment",)
    fields = mapping(doc, (), data, known, "serving config")

    def get(key: str, default: Any = None) -> tuple[Any, tuple]:
        return fields.get(key, (default, (key,)))

    if "deployment" not in fields:
        raise doc.error(
            (),
            "the serving config has no 'deployment' block: say which GPU, how many "
            "per node and how many nodes (deployment: {gpu: H100, gpus-per-node: 8, nodes: 1})",
        )
    deployment = mapping(doc, fields["deployment"][1], fields["deployment"][0], DEPLOYMENT_KEYS, "deployment block")

    hw = _read_hardware(doc, deployment)
    gpus_per_node = as_int(doc, *required(doc, deployment, "gpus-per-node", ("deployment",)), minimum=1)
    nodes = as_int(doc, *swap(deployment.get("nodes", (1, ("deployment", "nodes")))), minimum=1)
    internode = as_number(
        doc, *swap(deployment.get("internode-gb-s", (DEFAULT_INTERNODE_GB_S, ("deployment",)))), above=0
    )

    if "model" not in fields:
        raise doc.error((), "the serving config has no 'model': name the model it serves")
    model_name = as_str(doc, fields["model"][1], fields["model"][0])
    model, model_source, torch_dtype = _read_model(doc, model_name, deployment)
    replicas = as_int(doc, *swap(deployment.get("replicas", (1, ("deployment",)))), minimum=1)

    value, path = get("dtype", "auto")
    dtype = torch_dtype if str(value).lower() == "auto" else choice(doc, path, value, DTYPE_NAMES, "dtype")

    value, path = get("quantization")
    quantization_from_name, quantization_source, quantization_mismatch = False, "", ""
    quantization: str | None
    if model.quant_method and (value is None or str(value).strip().lower() in ("none", "", model.quant_method)):
        quantization, quantization_from_name, quantization_source = model.quant_method, True, "checkpoint"
    elif value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
        quantization = _quantization_in_name(model_name)
        quantization_from_name = quantization is not None
        quantization_source = "model id" if quantization else ""
    else:
        text = as_str(doc, path, value).lower()
        if text not in QUANTIZATION_WEIGHT_DTYPE:
            raise doc.error(
                path,
                f"{label(path)}: unknown quantization {value!r}"
                f"{suggest(text, tuple(QUANTIZATION_WEIGHT_DTYPE), 'methods')}",
            )
        quantization = text
        if model.quant_method and _QUANT_FAMILY.get(text, text) != _QUANT_FAMILY.get(
            model.quant_method, model.quant_method
        ):
            quantization_mismatch = model.quant_method
    if quantization_source == "checkpoint":
        weight_dtype = CHECKPOINT_WEIGHT_DTYPE.get(model.quant_bytes, "int8")
    else:
        weight_dtype = QUANTIZATION_WEIGHT_DTYPE.get(quantization, "int8") if quantization else dtype

    value, path = get("kv-cache-dtype", "auto")
    kv_dtype = dtype if str(value).lower() == "auto" else choice(doc, path, value, KV_DTYPE_NAMES, "kv-cache-dtype")

    tp = as_int(doc, *swap(get("tensor-parallel-size", 1)), minimum=1)
    pp = as_int(doc, *swap(get("pipeline-parallel-size", 1)), minimum=1)
    dp = as_int(doc, *swap(get("data-parallel-size", 1)), minimum=1)
    value, path = get("max-num-seqs")
    given_seqs = None if value is None else as_int(doc, path, value, minimum=1)
    value, path = get("max-num-batched-tokens")
    max_batched = None if value is None else as_human_int(doc, path, value, minimum=1)
    prefix = as_bool(doc, *swap(get("enable-prefix-caching", DEFAULT_PREFIX_CACHING)))
    util = as_number(doc, *swap(get("gpu-memory-utilization", DEFAULT_GPU_MEMORY_UTILIZATION)), above=0, maximum=1)
    value, path = get("max-model-len")
    max_model_len_auto = value is not None and as_human_int(doc, path, value, minimum=1, auto=True) == -1
    if value is None or max_model_len_auto:  # auto / -1: the model's length, fitted to memory at start
        max_model_len = model.max_position_embeddings
        if not max_model_len:
            raise doc.error(
                (),
                "max-model-len is not set and the model's config.json has no "
                "max_position_embeddings: set max-model-len",
            )
    else:
        max_model_len = as_human_int(doc, path, value, minimum=1)

    spec = _read_spec(doc, *_speculative_config(doc, get))
    eager = as_bool(doc, *swap(get("enforce-eager", False)))
    expert_parallel = as_bool(doc, *swap(get("enable-expert-parallel", False)))
    lora = as_bool(doc, *swap(get("enable-lora", False)))
    max_loras = as_int(doc, *swap(get("max-loras", DEFAULT_MAX_LORAS)), minimum=1)
    max_lora_rank = as_int(doc, *swap(get("max-lora-rank", DEFAULT_MAX_LORA_RANK)), minimum=1)
    adapters = _read_adapters(doc, *swap(get("lora-modules")))
    fully_sharded_loras = as_bool(doc, *swap(get("fully-sharded-loras", False)))
    moe_shared_loras = as_bool(doc, *swap(get("enable-moe-shared-loras", False)))
    value, path = get("disable-hybrid-kv-cache-manager")
    hybrid_kv_cache = None if value is None else not as_bool(doc, path, value)
    kv_connector = _read_kv_connector(doc, *swap(get("kv-transfer-config")))
    value, path = get("load-format", "auto")
    load_format = as_str(doc, path, value).lower() if value is not None else "auto"
    chunked = as_bool(doc, *swap(get("enable-chunked-prefill", True)))
    # Left out, vLLM picks both by platform, GPU memory, world size and the rules around them
    # (review/defaults.py, serve_defaults).
    value, path = get("performance-mode", "balanced")
    mode = as_str(doc, path, value).lower()
    value, path = get("all2all-backend", "")
    backend = as_str(doc, path, value).lower() if value else ""
    batched_dp = backend in defaults.BATCHED_DP_BACKENDS and expert_parallel and dp > 1
    max_num_seqs, tokens, _ = defaults.serve_defaults(
        hw,
        tp * pp,
        max_num_seqs=given_seqs,
        max_num_batched_tokens=max_batched,
        max_model_len=max_model_len,
        chunked_prefill=chunked,
        performance_mode=mode,
        batched_dp_moe=batched_dp,
    )
    if max_batched is None and (mode == "throughput" or batched_dp or not chunked):
        max_batched = tokens  # a default other than the platform's, which the checks would otherwise assume
    not_reviewed = tuple(
        sorted(k for k in fields if k not in REVIEWED_KEYS and k != "deployment" and k not in UNWEIGHED_FLAGS)
    )

    return ServingConfig(
        name=doc.name,
        model_name=model_name,
        model=model,
        model_source=model_source,
        dtype=dtype,
        quantization=quantization,
        quantization_from_name=quantization_from_name,
        weight_dtype=weight_dtype,
        kv_cache_dtype=kv_dtype,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_batched,
        spec=spec,
        prefix_caching=prefix,
        gpu_memory_utilization=util,
        max_model_len=max_model_len,
        hardware=hw,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        internode_gb_s=internode,
        set_keys=frozenset(k for k in fields if fields[k][0] is not None)
        | ({"speculative-config"} if spec is not None else set()),
        doc=doc,
        enforce_eager=eager,
        chunked_prefill=chunked,
        pod_replicas=replicas,
        quantization_source=quantization_source,
        not_reviewed=not_reviewed,
        removed_flags=tuple(doc.removed_flags),
        expert_parallel=expert_parallel,
        lora=lora,
        max_loras=max_loras,
        max_lora_rank=max_lora_rank,
        adapters=adapters,
        fully_sharded_loras=fully_sharded_loras,
        moe_shared_loras=moe_shared_loras,
        hybrid_kv_cache=hybrid_kv_cache,
        kv_connector=kv_connector,
        max_model_len_auto=max_model_len_auto,
        quantization_mismatch=quantization_mismatch,
        load_format=load_format,
        benchmark_flags=tuple(doc.benchmark_flags),
    )


def _read_hardware(doc: Doc, deployment: dict) -> Hardware:
    if "hardware-file" in deployment:
        value, path = deployment["hardware-file"]
        file = doc.resolve(as_str(doc, path, value))
        try:
            hw = hardware.load_measured(str(file))
            for name in ("memory_gb", "bandwidth_gb_s", "peak_tflops"):
                number = getattr(hw, name)
                if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= 0:
                    raise doc.error(
                        path, f"{label(path)}: {file}: {name} must be a positive number, got {show(number)}"
                    )
            if hw.dtype not in hardware.DTYPE_BYTES:
                raise doc.error(
                    path, f"{label(path)}: {file}: unknown dtype {hw.dtype!r}; known: {', '.join(hardware.DTYPE_BYTES)}"
                )
            return hw
        except FileNotFoundError:
            raise doc.error(path, f"{label(path)}: no such file: {file}") from None
        except json.JSONDecodeError as exc:
            raise ReviewInputError(
                f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); named by {doc.where(path)}"
            ) from None
        except (TypeError, AttributeError, OSError):
            raise doc.error(
                path,
                f"{label(path)}: {file} is not a hardware description: it needs name, "
                "memory_gb, bandwidth_gb_s and peak_tflops, as "
                "hardware.measure_this_machine() writes them",
            ) from None
    if "gpu" not in deployment:
        raise doc.error(
            ("deployment",),
            f"deployment: 'gpu' is required (a GPU type such as {', '.join(hardware.PRESETS)}), or 'hardware-file'",
        )
    value, path = deployment["gpu"]
    name = as_str(doc, path, value)
    try:
        return hardware.get(name)
    except hardware.UnknownHardware:
        raise doc.error(
            path,
            f"deployment.gpu: unknown GPU type {name!r}. Known types: "
            f"{', '.join(hardware.PRESETS)}. Use one of these, or describe the GPU in a JSON file "
            "(name, memory_gb, bandwidth_gb_s, peak_tflops, dtype: from its datasheet, or "
            "hardware.measure_this_machine()) and give it as deployment.hardware-file",
        ) from None


# Model ids teams write, reduced to the presets' names: 'meta-llama/Meta-Llama-3-70B-Instruct'
# and 'casperhansen/llama-3-70b-instruct-awq' are both Llama-3-70B.
_NAME_SUFFIXES = (
    "-instruct",
    "-chat",
    "-hf",
    "-it",
    "-awq",
    "-gptq",
    "-int4",
    "-int8",
    "-fp8",
    "-w4a16",
    "-w8a8",
    "-dynamic",
    "-quantized",
    "-marlin",
)


def preset_key(model_name: str) -> str | None:
    """The modelspec preset a model id names, or None."""
    base = model_name.strip().rstrip("/").split("/")[-1].lower()
    if base.startswith("meta-"):
        base = base[len("meta-") :]
    changed = True
    while changed:
        changed = False
        for suffix in _NAME_SUFFIXES:
            if base.endswith(suffix):
                base, changed = base[: -len(suffix)], True
    for key in modelspec.PRESET_FILES:
        if base == key.lower():
            return key
    return None


def _quantization_in_name(model_name: str) -> str | None:
    """vLLM reads a checkpoint's quantization from its config; the id usually says it too."""
    lowered = model_name.lower()
    for marker, method in (
        ("awq", "awq"),
        ("gptq", "gptq"),
        ("fp8", "fp8"),
        ("w4a16", "w4a16"),
        ("w8a8", "w8a8"),
        ("int4", "int4"),
        ("int8", "int8"),
    ):
        if marker in lowered:
            return method
    return None


def _read_model(doc: Doc, model_name: str, deployment: dict) -> tuple[ModelSpec, str, str]:
    """The model's shape: deployment.model-config, a local model folder, or a preset."""
    config_path, path = None, ("model",)
    if "model-config" in deployment:
        value, path = deployment["model-config"]
        config_path = doc.resolve(as_str(doc, path, value))
        if not config_path.exists():
            raise doc.error(path, f"{label(path)}: no such file: {config_path}")
    else:
        local = doc.resolve(model_name)
        if (local / "config.json").is_file() or (local.is_file() and local.suffix == ".json"):
            config_path = local
    if config_path is not None:
        file = config_path / "config.json" if config_path.is_dir() else config_path
        try:
            config = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise doc.error(path, f"{label(path)}: no config.json in {config_path}") from None
        except json.JSONDecodeError as exc:
            raise ReviewInputError(
                f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); named by {doc.where(path)}"
            ) from None
        if not isinstance(config, dict):
            raise doc.error(path, f"{label(path)}: {file} is not a model config.json")
        try:
            spec = ModelSpec.from_config(config, name=preset_key(model_name) or model_name)
        except KeyError as exc:
            raise doc.error(
                path,
                f"{label(path)}: {file} lacks {exc.args[0]!r}, which a "
                "model config.json has (num_hidden_layers, hidden_size, ...)",
            ) from None
        except (TypeError, ZeroDivisionError):
            spec = None
        shape = (
            "num_layers",
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        )
        positions = getattr(spec, "max_position_embeddings", None)
        if (
            spec is None
            or any(
                isinstance(getattr(spec, n), bool) or not isinstance(getattr(spec, n), int) or getattr(spec, n) < 1
                for n in shape
            )
            or isinstance(positions, bool)
            or not isinstance(positions, int)
            or positions < 0
        ):
            raise doc.error(
                path,
                f"{label(path)}: {file}: the model's sizes (num_hidden_layers, hidden_size, "
                "num_attention_heads, ...) must be positive whole numbers",
            )
        torch_dtype = DTYPE_NAMES.get(str(config.get("torch_dtype", "bfloat16")).lower(), "bfloat16")
        return _native_from_catalogue(spec, model_name), str(file), torch_dtype
    key = preset_key(model_name)
    if key is not None:
        return modelspec.preset(key), f"preset {key}", "bfloat16"
    entry = modelspec.catalogue_key(model_name)
    if entry is None:
        raise doc.error(
            ("model",),
            f"model: {model_name!r} is not in servelab's model catalogue "
            f"({len(modelspec.catalogue())} open models; see "
            "servelab/model_configs/catalogue.json) and no config.json was given: "
            "add deployment.model-config: path/to/config.json (the model's own)",
        )
    spec = modelspec.from_catalogue(entry)
    return spec, f"catalogue {entry} ({spec.source})", DTYPE_NAMES.get(spec.torch_dtype, "bfloat16")


def _native_from_catalogue(spec: ModelSpec, model_name: str) -> ModelSpec:
    """A config.json whose quantization_config is the one the catalogue records as the model as
    published (DeepSeek-R1's FP8) keeps that standing: the file says how the checkpoint is stored,
    the catalogue why that storage is the model itself."""
    key = modelspec.catalogue_key(model_name) if spec.quant_method else None
    if key is None or spec.native_quantization:
        return spec
    entry = modelspec.from_catalogue(key)
    if entry.native_quantization and entry.quant_method == spec.quant_method:
        return dataclasses.replace(spec, native_quantization=entry.native_quantization)
    return spec


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
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise doc.error(
                path, f"{label(path)}: not valid JSON ({exc.msg}); write it as a YAML mapping instead"
            ) from None
    if not isinstance(value, dict):
        raise doc.error(path, f"{label(path)}: must be a mapping with kv_connector and kv_role")
    connector = value.get("kv_connector") or ""
    return connector if isinstance(connector, str) else ""


def _speculative_config(doc: Doc, get) -> tuple[tuple, Any]:
    """speculative-config with vLLM 0.32's --spec-method / --spec-model / --spec-tokens shorthand
    merged in, each exclusive with the same key in the JSON (EngineArgs.create_speculative_config,
    vllm/engine/arg_utils.py)."""
    value, path = get("speculative-config")
    shorthand = {
        key: get(flag)
        for flag, key in (("spec-method", "method"), ("spec-model", "model"), ("spec-tokens", "num_speculative_tokens"))
        if get(flag)[0] is not None
    }
    if not shorthand:
        return path, value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise doc.error(path, f"{label(path)}: not valid JSON ({exc.msg})") from None
    merged = dict(value) if isinstance(value, dict) else {}
    for key, (given, where) in shorthand.items():
        if key in merged:
            raise doc.error(
                where,
                f"--{where[-1]} and speculative-config's {key} are mutually exclusive (vLLM refuses both): keep one",
            )
        merged[key] = int(given) if key == "num_speculative_tokens" and str(given).isdigit() else given
    return (path if value is not None else next(iter(shorthand.values()))[1]), merged


def _read_spec(doc: Doc, path: tuple, value: Any) -> SpecConfig | None:
    if value is None:
        return None
    if isinstance(value, str):  # the CLI form: a JSON string
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise doc.error(
                path, f"{label(path)}: not valid JSON ({exc.msg}); write it as a YAML mapping instead"
            ) from None
    fields = mapping(doc, path, value, SPECULATIVE_KEYS, "speculative-config", sep="_")

    def get(key: str, default: Any = None) -> tuple[tuple, Any]:
        return fields[key][1] if key in fields else path, fields[key][0] if key in fields else default

    if "num_speculative_tokens" not in fields:
        raise doc.error(path, f"{label(path)}: 'num_speculative_tokens' is required (draft tokens per step)")
    k = as_int(doc, *get("num_speculative_tokens"), minimum=0)
    draft = get("model")[1]
    draft = as_str(doc, *get("model")) if draft is not None else ""
    method = get("method")[1]
    method = as_str(doc, *get("method")).lower() if method is not None else ("draft_model" if draft else "ngram")
    lookups = {}
    for key in ("prompt_lookup_min", "prompt_lookup_max"):
        lookups[key] = None if key not in fields else as_int(doc, *get(key), minimum=1)
    schedule = []
    if "num_speculative_tokens_per_batch_size" in fields:
        rows_path, rows = get("num_speculative_tokens_per_batch_size")
        if not isinstance(rows, list) or not rows:
            raise doc.error(
                rows_path, f"{label(rows_path)}: must be a list of [min_batch, max_batch, k] rows, got {show(rows)}"
            )
        for index, row in enumerate(rows):
            row_path = rows_path + (index,)
            if not isinstance(row, list) or len(row) != 3:
                raise doc.error(row_path, f"{label(row_path)}: each row is [min_batch, max_batch, k], got {show(row)}")
            low, high, kk = (as_int(doc, row_path + (i,), x, minimum=0) for i, x in enumerate(row))
            if low < 1 or high < low:
                raise doc.error(row_path, f"{label(row_path)}: the batch range {low}..{high} is empty")
            schedule.append((low, high, kk))
    disable = None
    if "disable_by_batch_size" in fields:
        disable = as_int(doc, *get("disable_by_batch_size"), minimum=1)
    if k == 0 and not schedule:
        return None  # k=0 is speculation off
    return SpecConfig(
        method=method,
        num_speculative_tokens=k,
        draft_model=draft,
        prompt_lookup_min=lookups["prompt_lookup_min"],
        prompt_lookup_max=lookups["prompt_lookup_max"],
        schedule=tuple(schedule),
        disable_by_batch_size=disable,
    )
