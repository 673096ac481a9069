"""Reading what a team hands a reviewer: a `vllm serve` config and a workload file.

Both are YAML. Every key is checked against the keys it may be, every value
against the type it must have, and a bad one stops the review with one message
that names the file, the line and the key (ReviewInputError), never a traceback.
What comes out is two plain records, ServingConfig and Workload, with vLLM's
defaults filled in and a note of which knobs the team actually set.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import hardware, modelspec
from . import defaults, vllm_flags
from ..hardware import Hardware
from ..measurement import Measurement
from ..modelspec import ModelSpec

# vLLM's defaults for the knobs under review, used when a config leaves one out.
DEFAULT_GPU_MEMORY_UTILIZATION = defaults.GPU_MEMORY_UTILIZATION
DEFAULT_PREFIX_CACHING = defaults.PREFIX_CACHING
DEFAULT_INTERNODE_GB_S = 50.0  # per-GPU network between nodes: one 400 Gb/s InfiniBand link

# The keys of `vllm serve --config` that this reviewer reads. Every other flag the
# installed vLLM accepts (vllm_flags.json, from vLLM's own parser) is accepted and
# listed as not reviewed; one vLLM does not know is an error.
REVIEWED_KEYS = (
    "model", "dtype", "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size",
    "max-num-seqs", "max-num-batched-tokens", "quantization", "kv-cache-dtype",
    "speculative-config", "enable-prefix-caching", "gpu-memory-utilization", "max-model-len",
    "enforce-eager", "enable-chunked-prefill", "enable-expert-parallel",
    "enable-lora", "max-loras", "max-lora-rank", "lora-modules", "load-format",
)
# Flags that change nothing the review weighs (where the server listens, logging, names).
UNWEIGHED_FLAGS = frozenset((
    "host", "port", "served-model-name", "uvicorn-log-level", "disable-log-stats", "enable-log-requests",
    "api-key", "root-path", "allowed-origins", "disable-uvicorn-access-log", "trust-remote-code",
    "download-dir", "revision", "tokenizer", "tokenizer-mode", "chat-template", "response-role",
    "tool-call-parser", "enable-auto-tool-choice", "reasoning-parser", "seed",
))
# vLLM 0.32.0's LoRA defaults (vllm/config/lora.py): one adapter slot of rank 16.
DEFAULT_MAX_LORAS = 1
DEFAULT_MAX_LORA_RANK = 16
DEPLOYMENT_KEYS = ("gpu", "hardware-file", "gpus-per-node", "nodes", "model-config", "internode-gb-s", "replicas")
# vLLM's speculative_config is JSON with underscore keys.
SPECULATIVE_KEYS = (
    "method", "num_speculative_tokens", "model", "prompt_lookup_max", "prompt_lookup_min",
    "num_speculative_tokens_per_batch_size", "disable_by_batch_size", "draft_tensor_parallel_size",
    "acceptance_method", "quantization", "max_model_len", "revision",
)

WORKLOAD_KEYS = (
    "name", "description", "task", "concurrency", "qps", "prompt-tokens", "output-tokens",
    "slo", "shared-prefix", "measurements", "records",
)
LOAD_KEYS = ("typical", "peak")
LENGTH_KEYS = ("mean", "p50", "p99", "max")
SLO_KEYS = ("ttft-p99-ms", "tpot-p99-ms", "throughput-tok-s", "max-accuracy-drop", "min-accuracy")
SHARED_PREFIX_KEYS = ("tokens", "fraction", "description")
MEASUREMENT_KEYS = ("setting", "metric", "value", "source", "note")
# What a cited number is and its unit; the names are servelab Measurement field names.
METRICS = {
    "ttft_ms_p50": "ms", "ttft_ms_p99": "ms", "tpot_ms_p50": "ms", "tpot_ms_p99": "ms",
    "output_tok_s": "tok/s", "request_throughput": "req/s",
    "accuracy": "%", "accuracy_drop": "points",
}
# The conditions a number was measured under. Config keys mean "the engine ran with this".
SETTING_TYPES = {
    "batch": "int", "concurrency": "int", "qps": "number",
    "max-num-seqs": "int", "tensor-parallel-size": "int", "pipeline-parallel-size": "int",
    "data-parallel-size": "int", "max-model-len": "int", "num-speculative-tokens": "int",
    "gpu-memory-utilization": "number", "speculative": "bool", "enable-prefix-caching": "bool",
    "quantization": "str", "method": "str", "kv-cache-dtype": "str", "dtype": "str",
    "model": "str", "gpu": "str", "task": "str", "enforce-eager": "bool", "enable-chunked-prefill": "bool",
    "max-num-batched-tokens": "int", "enable-expert-parallel": "bool",
}

# `quantization:` values and the bytes per weight they leave.
QUANTIZATION_WEIGHT_DTYPE = {
    "awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "marlin": "int4",
    "bitsandbytes": "int4", "gguf": "int4", "mxfp4": "int4", "int4": "int4", "w4a16": "int4",
    "fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8", "ptpc_fp8": "fp8",
    "int8": "int8", "w8a8": "int8", "experts_int8": "int8", "smoothquant": "int8",
    "compressed-tensors": "int8",  # its bit width lives in the checkpoint; 8-bit is the common case
}
# A checkpoint's quantization_config bytes per weight, as the dtype the ridge arithmetic uses.
CHECKPOINT_WEIGHT_DTYPE = {1.0: "fp8", 0.5: "int4", 4.25 / 8: "int4"}
DTYPE_NAMES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16",
               "float": "float32", "float32": "float32"}
# kv-cache-dtype values (vLLM 0.32.0's CacheDType) and the width the KV arithmetic uses; the
# mixed-width schemes are rounded up to the next width it knows (k8v4: 8, 3-bit: 4).
KV_DTYPE_NAMES = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8", "fp8_ds_mla": "fp8",
                  "fp8_per_token_head": "fp8", "int8_per_token_head": "int8", "int4_per_token_head": "int4",
                  "nvfp4_ds_mla": "int4", "ultraquant_4bit": "int4", "turboquant_4bit_nc": "int4",
                  "turboquant_k3v4_nc": "int4", "turboquant_3bit_nc": "int4", "turboquant_k8v4": "int8",
                  **DTYPE_NAMES}


class ReviewInputError(ValueError):
    """Bad input to the reviewer; str() is one message naming the file and line."""


# --- YAML with line numbers --------------------------------------------------

@dataclass
class Doc:
    """One input document: its data, where each key sits, and where its paths are relative to."""

    name: str
    data: Any
    role: str  # "serving config" or "workload"
    base_dir: Path | None = None
    lines: dict[tuple, int] = field(default_factory=dict)
    # Flags vLLM has removed, as written, with their line: reviewed as a finding, not refused.
    removed_flags: list[tuple[str, Any, int | None]] = field(default_factory=list)
    # Benchmark-only settings written beside the server (a `vllm bench serve --ignore-eos` in the script).
    benchmark_flags: list[tuple[str, int | None]] = field(default_factory=list)

    def line(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def where(self, path: tuple = ()) -> str:
        line = self.line(path)
        return f"{self.name}:{line}" if line else self.name

    def error(self, path: tuple, message: str) -> ReviewInputError:
        return ReviewInputError(f"{self.where(path)}: {message}")

    def resolve(self, path_text: str) -> Path:
        path = Path(path_text).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        return path


def read_text(path: Path, role: str, form: str = "UTF-8 YAML") -> str:
    """A file's text, or a ReviewInputError naming the file and what it should have been."""
    name = str(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReviewInputError(f"{name}: no such file (the {role})") from None
    except IsADirectoryError:
        raise ReviewInputError(f"{name}: is a folder, not a {role} file") from None
    except UnicodeDecodeError:
        raise ReviewInputError(f"{name}: not a text file (the {role} must be {form})") from None
    except OSError as exc:
        raise ReviewInputError(f"{name}: cannot read the {role}: {exc.strerror}") from None


def load_yaml(path: str | Path, role: str) -> Doc:
    """Read one YAML file, keeping the line of every key and list item."""
    path = Path(path)
    name = str(path)
    text = read_text(path, role)

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ReviewInputError(f"{name}: the {role} file is empty")
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if mark else name
        problem = exc.problem or exc.context or "not valid YAML"
        column = f" (column {mark.column + 1})" if mark else ""
        started = ""
        if exc.context and exc.context_mark and mark and exc.context_mark.line != mark.line:
            started = f"; {exc.context} that starts on line {exc.context_mark.line + 1}"
        raise ReviewInputError(f"{where}: YAML syntax error: {problem}{column}{started}") from None
    except yaml.YAMLError as exc:
        raise ReviewInputError(f"{name}: YAML syntax error: {exc}") from None
    finally:
        loader.dispose()

    doc = Doc(name=name, data=data, role=role, base_dir=path.resolve().parent)
    _record_lines(doc, node, ())
    return doc


def _record_lines(doc: Doc, node: yaml.Node, path: tuple) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key, line = key_node.value, key_node.start_mark.line + 1
            if key in seen:
                raise ReviewInputError(
                    f"{doc.name}:{line}: {_label(path + (key,))}: duplicate key "
                    f"(already given on line {seen[key]}); keep one")
            seen[key] = line
            doc.lines[path + (key,)] = line
            _record_lines(doc, value_node, path + (key,))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            doc.lines[path + (index,)] = item.start_mark.line + 1
            _record_lines(doc, item, path + (index,))


# --- small validators ----------------------------------------------------------

def _label(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the document"


def _show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a yes/no value)"
    if isinstance(value, str):
        return f"{value!r} (text)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _mapping(doc: Doc, path: tuple, value: Any, known: tuple[str, ...], what: str,
             sep: str = "-") -> dict[str, tuple[Any, tuple]]:
    """Check a mapping's keys; return {canonical key: (value, path of that key)}.

    vLLM accepts both spellings of a flag name, so 'max_num_seqs' and 'max-num-seqs'
    are one key here too: sep is the spelling the known keys use.
    """
    if not isinstance(value, dict):
        raise doc.error(path, f"{_label(path)}: expected a mapping with keys such as "
                              f"{', '.join(known[:4])}, got {_show(value)}")
    out: dict[str, tuple[Any, tuple]] = {}
    other = "_" if sep == "-" else "-"
    for raw, item in value.items():
        key_path = path + (raw,)
        if not isinstance(raw, str):
            raise doc.error(key_path, f"{_label(path)}: key {raw!r} is not a name")
        key = raw.strip().replace(other, sep)
        if key not in known:
            raise doc.error(key_path, f"{_label(key_path)}: unknown key in the {what}{_suggest(key, known)}")
        if key in out:
            raise doc.error(key_path, f"{_label(key_path)}: given twice (as '{out[key][1][-1]}' too); keep one")
        out[key] = (item, key_path)
    return out


def _suggest(key: str, known: tuple[str, ...], noun: str = "keys") -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f". Known {noun}: {', '.join(known)}"


def _int(doc: Doc, path: tuple, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise doc.error(path, f"{_label(path)}: must be a whole number, got {_show(value)}")
    if minimum is not None and value < minimum:
        raise doc.error(path, f"{_label(path)}: must be at least {minimum}, got {value}")
    return value


def _number(doc: Doc, path: tuple, value: Any, minimum: float | None = None,
            maximum: float | None = None, above: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise doc.error(path, f"{_label(path)}: must be a number, got {_show(value)}")
    if minimum is not None and value < minimum:
        raise doc.error(path, f"{_label(path)}: must be at least {minimum}, got {value}")
    if above is not None and value <= above:
        raise doc.error(path, f"{_label(path)}: must be above {above}, got {value}")
    if maximum is not None and value > maximum:
        raise doc.error(path, f"{_label(path)}: must be at most {maximum}, got {value}")
    return float(value)


def _bool(doc: Doc, path: tuple, value: Any) -> bool:
    if not isinstance(value, bool):
        raise doc.error(path, f"{_label(path)}: must be true or false, got {_show(value)}")
    return value


def _str(doc: Doc, path: tuple, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"{_label(path)}: must be text, got {_show(value)}")
    return value.strip()


def _text(value: Any) -> str:
    """Free text (a source, a note): any scalar YAML gives, dates included."""
    return "" if value is None else str(value).strip()


def _choice(doc: Doc, path: tuple, value: Any, choices: dict[str, str], what: str) -> str:
    text = _str(doc, path, value).lower()
    if text not in choices:
        raise doc.error(path, f"{_label(path)}: unknown {what} {value!r}{_suggest(text, tuple(choices), 'values')}")
    return choices[text]


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
    doc: Doc = field(repr=False, compare=False, default=None)
    enforce_eager: bool = False
    chunked_prefill: bool = True  # vLLM's V1 engine chunks prefills unless told not to
    pod_replicas: int = 1  # copies of the whole server (a Deployment's replicas), each with its GPUs
    quantization_source: str = ""  # "checkpoint" (its quantization_config), "model id", or "" (the config)
    not_reviewed: tuple[str, ...] = ()  # flags vLLM accepts that no check weighs
    expert_parallel: bool = False  # experts sharded across TP x DP GPUs instead of tensor-parallel in each rank
    lora: bool = False  # --enable-lora
    max_loras: int = DEFAULT_MAX_LORAS  # adapter slots vLLM preallocates on the GPU
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    adapters: tuple[Adapter, ...] = ()
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
        raise doc.error((), "this looks like a workload file, not a serving config; "
                            "pass the config first and the workload with --workload")
    if isinstance(data, dict):
        for raw in [k for k in data if isinstance(k, str) and vllm_flags.removed(k)]:
            doc.removed_flags.append((vllm_flags.removed(raw), data[raw], doc.lines.get((raw,))))
        data = {k: v for k, v in data.items() if not (isinstance(k, str) and vllm_flags.removed(k))}
        for raw in data:
            if isinstance(raw, str) and raw.strip().replace("_", "-") != "deployment" \
                    and vllm_flags.lookup(raw)[0] is None:
                raise doc.error((raw,), f"{raw}: unknown key: {vllm_flags.unknown_message(raw)}")
        known = tuple(dict.fromkeys(REVIEWED_KEYS + ("deployment",) + vllm_flags.names()))
        # Every spelling vLLM takes ('max_num_seqs', 'tp', 'no-enable-prefix-caching') becomes the flag's name.
        canonical: dict = {}
        for raw, value in data.items():
            flag, negated = vllm_flags.lookup(raw) if isinstance(raw, str) and raw.strip() != "deployment" \
                else (None, False)
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
    fields = _mapping(doc, (), data, known, "serving config")

    def get(key: str, default: Any = None) -> tuple[Any, tuple]:
        return fields.get(key, (default, (key,)))

    if "deployment" not in fields:
        raise doc.error((), "the serving config has no 'deployment' block: say which GPU, how many "
                            "per node and how many nodes (deployment: {gpu: H100, gpus-per-node: 8, nodes: 1})")
    deployment = _mapping(doc, fields["deployment"][1], fields["deployment"][0], DEPLOYMENT_KEYS, "deployment block")

    hw = _read_hardware(doc, deployment)
    gpus_per_node = _int(doc, *_req(doc, deployment, "gpus-per-node", ("deployment",)), minimum=1)
    nodes = _int(doc, *_swap(deployment.get("nodes", (1, ("deployment", "nodes")))), minimum=1)
    internode = _number(doc, *_swap(deployment.get("internode-gb-s", (DEFAULT_INTERNODE_GB_S, ("deployment",)))),
                        above=0)

    if "model" not in fields:
        raise doc.error((), "the serving config has no 'model': name the model it serves")
    model_name = _str(doc, fields["model"][1], fields["model"][0])
    model, model_source, torch_dtype = _read_model(doc, model_name, deployment)
    replicas = _int(doc, *_swap(deployment.get("replicas", (1, ("deployment",)))), minimum=1)

    value, path = get("dtype", "auto")
    dtype = torch_dtype if str(value).lower() == "auto" else _choice(doc, path, value, DTYPE_NAMES, "dtype")

    value, path = get("quantization")
    quantization_from_name, quantization_source = False, ""
    if model.quant_method and (value is None or str(value).strip().lower() in ("none", "", model.quant_method)):
        quantization, quantization_from_name, quantization_source = model.quant_method, True, "checkpoint"
    elif value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
        quantization = _quantization_in_name(model_name)
        quantization_from_name = quantization is not None
        quantization_source = "model id" if quantization else ""
    else:
        text = _str(doc, path, value).lower()
        if text not in QUANTIZATION_WEIGHT_DTYPE:
            raise doc.error(path, f"{_label(path)}: unknown quantization {value!r}"
                                  f"{_suggest(text, tuple(QUANTIZATION_WEIGHT_DTYPE), 'methods')}")
        quantization = text
    if quantization_source == "checkpoint":
        weight_dtype = CHECKPOINT_WEIGHT_DTYPE.get(model.quant_bytes, "int8")
    else:
        weight_dtype = QUANTIZATION_WEIGHT_DTYPE.get(quantization, "int8") if quantization else dtype

    value, path = get("kv-cache-dtype", "auto")
    kv_dtype = dtype if str(value).lower() == "auto" else _choice(doc, path, value, KV_DTYPE_NAMES, "kv-cache-dtype")

    tp = _int(doc, *_swap(get("tensor-parallel-size", 1)), minimum=1)
    pp = _int(doc, *_swap(get("pipeline-parallel-size", 1)), minimum=1)
    dp = _int(doc, *_swap(get("data-parallel-size", 1)), minimum=1)
    # Left out, vLLM picks both by platform, GPU memory and world size (review/defaults.py).
    batch_defaults = defaults.batch_defaults(hw, tp * pp)
    max_num_seqs = _int(doc, *_swap(get("max-num-seqs", batch_defaults.max_num_seqs)), minimum=1)
    value, path = get("max-num-batched-tokens")
    max_batched = None if value is None else _int(doc, path, value, minimum=1)
    prefix = _bool(doc, *_swap(get("enable-prefix-caching", DEFAULT_PREFIX_CACHING)))
    util = _number(doc, *_swap(get("gpu-memory-utilization", DEFAULT_GPU_MEMORY_UTILIZATION)),
                   above=0, maximum=1)
    value, path = get("max-model-len")
    if value is None:
        max_model_len = model.max_position_embeddings
        if not max_model_len:
            raise doc.error((), "max-model-len is not set and the model's config.json has no "
                                "max_position_embeddings: set max-model-len")
    else:
        max_model_len = _int(doc, path, value, minimum=1)

    spec = _read_spec(doc, *_swap(get("speculative-config")))
    eager = _bool(doc, *_swap(get("enforce-eager", False)))
    expert_parallel = _bool(doc, *_swap(get("enable-expert-parallel", False)))
    lora = _bool(doc, *_swap(get("enable-lora", False)))
    max_loras = _int(doc, *_swap(get("max-loras", DEFAULT_MAX_LORAS)), minimum=1)
    max_lora_rank = _int(doc, *_swap(get("max-lora-rank", DEFAULT_MAX_LORA_RANK)), minimum=1)
    adapters = _read_adapters(doc, *_swap(get("lora-modules")))
    value, path = get("load-format", "auto")
    load_format = _str(doc, path, value).lower() if value is not None else "auto"
    chunked = _bool(doc, *_swap(get("enable-chunked-prefill", True)))
    not_reviewed = tuple(sorted(k for k in fields if k not in REVIEWED_KEYS and k != "deployment"
                                and k not in UNWEIGHED_FLAGS))

    return ServingConfig(
        name=doc.name, model_name=model_name, model=model, model_source=model_source,
        dtype=dtype, quantization=quantization, quantization_from_name=quantization_from_name,
        weight_dtype=weight_dtype, kv_cache_dtype=kv_dtype,
        tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_batched, spec=spec,
        prefix_caching=prefix, gpu_memory_utilization=util, max_model_len=max_model_len,
        hardware=hw, gpus_per_node=gpus_per_node, nodes=nodes, internode_gb_s=internode,
        set_keys=frozenset(k for k in fields if fields[k][0] is not None), doc=doc,
        enforce_eager=eager, chunked_prefill=chunked, pod_replicas=replicas,
        quantization_source=quantization_source, not_reviewed=not_reviewed,
        removed_flags=tuple(doc.removed_flags), expert_parallel=expert_parallel,
        lora=lora, max_loras=max_loras, max_lora_rank=max_lora_rank, adapters=adapters,
        load_format=load_format, benchmark_flags=tuple(doc.benchmark_flags),
    )


def _swap(pair: tuple[Any, tuple]) -> tuple[tuple, Any]:
    """(value, path) -> (path, value), the order the validators take."""
    value, path = pair
    return path, value


def _req(doc: Doc, fields: dict, key: str, parent: tuple) -> tuple[tuple, Any]:
    if key not in fields:
        raise doc.error(parent, f"{_label(parent)}: '{key}' is required")
    value, path = fields[key]
    return path, value


def _read_hardware(doc: Doc, deployment: dict) -> Hardware:
    if "hardware-file" in deployment:
        value, path = deployment["hardware-file"]
        file = doc.resolve(_str(doc, path, value))
        try:
            hw = hardware.load_measured(str(file))
            for name in ("memory_gb", "bandwidth_gb_s", "peak_tflops"):
                number = getattr(hw, name)
                if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= 0:
                    raise doc.error(path, f"{_label(path)}: {file}: {name} must be a positive number, "
                                          f"got {_show(number)}")
            if hw.dtype not in hardware.DTYPE_BYTES:
                raise doc.error(path, f"{_label(path)}: {file}: unknown dtype {hw.dtype!r}; known: "
                                      f"{', '.join(hardware.DTYPE_BYTES)}")
            return hw
        except FileNotFoundError:
            raise doc.error(path, f"{_label(path)}: no such file: {file}") from None
        except json.JSONDecodeError as exc:
            raise ReviewInputError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); "
                                   f"named by {doc.where(path)}") from None
        except (TypeError, AttributeError, OSError):
            raise doc.error(path, f"{_label(path)}: {file} is not a hardware description: it needs name, "
                                  "memory_gb, bandwidth_gb_s and peak_tflops, as "
                                  "hardware.measure_this_machine() writes them") from None
    if "gpu" not in deployment:
        raise doc.error(("deployment",), "deployment: 'gpu' is required (a GPU type such as "
                                         f"{', '.join(hardware.PRESETS)}), or 'hardware-file'")
    value, path = deployment["gpu"]
    name = _str(doc, path, value)
    try:
        return hardware.get(name)
    except hardware.UnknownHardware:
        raise doc.error(path, f"deployment.gpu: unknown GPU type {name!r}. Known types: "
                              f"{', '.join(hardware.PRESETS)}. Use one of these, or give "
                              "deployment.hardware-file (a machine measured with "
                              "hardware.measure_this_machine())") from None


# Model ids teams write, reduced to the presets' names: 'meta-llama/Meta-Llama-3-70B-Instruct'
# and 'casperhansen/llama-3-70b-instruct-awq' are both Llama-3-70B.
_NAME_SUFFIXES = ("-instruct", "-chat", "-hf", "-it", "-awq", "-gptq", "-int4", "-int8", "-fp8",
                  "-w4a16", "-w8a8", "-dynamic", "-quantized", "-marlin")


def preset_key(model_name: str) -> str | None:
    """The modelspec preset a model id names, or None."""
    base = model_name.strip().rstrip("/").split("/")[-1].lower()
    if base.startswith("meta-"):
        base = base[len("meta-"):]
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
    for marker, method in (("awq", "awq"), ("gptq", "gptq"), ("fp8", "fp8"), ("w4a16", "w4a16"),
                           ("w8a8", "w8a8"), ("int4", "int4"), ("int8", "int8")):
        if marker in lowered:
            return method
    return None


def _read_model(doc: Doc, model_name: str, deployment: dict) -> tuple[ModelSpec, str, str]:
    """The model's shape: deployment.model-config, a local model folder, or a preset."""
    config_path, path = None, ("model",)
    if "model-config" in deployment:
        value, path = deployment["model-config"]
        config_path = doc.resolve(_str(doc, path, value))
        if not config_path.exists():
            raise doc.error(path, f"{_label(path)}: no such file: {config_path}")
    else:
        local = doc.resolve(model_name)
        if (local / "config.json").is_file() or (local.is_file() and local.suffix == ".json"):
            config_path = local
    if config_path is not None:
        file = config_path / "config.json" if config_path.is_dir() else config_path
        try:
            config = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise doc.error(path, f"{_label(path)}: no config.json in {config_path}") from None
        except json.JSONDecodeError as exc:
            raise ReviewInputError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); "
                                   f"named by {doc.where(path)}") from None
        if not isinstance(config, dict):
            raise doc.error(path, f"{_label(path)}: {file} is not a model config.json")
        try:
            spec = ModelSpec.from_config(config, name=preset_key(model_name) or model_name)
        except KeyError as exc:
            raise doc.error(path, f"{_label(path)}: {file} lacks {exc.args[0]!r}, which a "
                                  "model config.json has (num_hidden_layers, hidden_size, ...)") from None
        except (TypeError, ZeroDivisionError):
            spec = None
        shape = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size")
        positions = getattr(spec, "max_position_embeddings", None)
        if spec is None or any(isinstance(getattr(spec, n), bool) or not isinstance(getattr(spec, n), int)
                               or getattr(spec, n) < 1 for n in shape) \
                or isinstance(positions, bool) or not isinstance(positions, int) or positions < 0:
            raise doc.error(path, f"{_label(path)}: {file}: the model's sizes (num_hidden_layers, hidden_size, "
                                  "num_attention_heads, ...) must be positive whole numbers")
        torch_dtype = DTYPE_NAMES.get(str(config.get("torch_dtype", "bfloat16")).lower(), "bfloat16")
        return spec, str(file), torch_dtype
    key = preset_key(model_name)
    if key is not None:
        return modelspec.preset(key), f"preset {key}", "bfloat16"
    entry = modelspec.catalogue_key(model_name)
    if entry is None:
        raise doc.error(("model",), f"model: {model_name!r} is not in servelab's model catalogue "
                                    f"({len(modelspec.catalogue())} open models; see "
                                    "servelab/model_configs/catalogue.json) and no config.json was given: "
                                    "add deployment.model-config: path/to/config.json (the model's own)")
    spec = modelspec.from_catalogue(entry)
    return spec, f"catalogue {entry} ({spec.source})", DTYPE_NAMES.get(spec.torch_dtype, "bfloat16")


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
            name, where, base = str(spec.get("name", "")), str(spec.get("path", "")), str(spec.get("base_model_name") or "")
        elif isinstance(item, str) and "=" in item:
            name, _, where = item.partition("=")
        else:
            raise doc.error(path, f"lora-modules: {item!r} must be NAME=PATH or "
                                  '{"name": ..., "path": ..., "base_model_name": ...}')
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
        out.append(Adapter(name=name.strip(), path=where.strip(), base=base, rank=rank, source=source,
                           line=doc.line(path)))
    return tuple(out)


def _read_spec(doc: Doc, path: tuple, value: Any) -> SpecConfig | None:
    if value is None:
        return None
    if isinstance(value, str):  # the CLI form: a JSON string
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise doc.error(path, f"{_label(path)}: not valid JSON ({exc.msg}); "
                                  "write it as a YAML mapping instead") from None
    fields = _mapping(doc, path, value, SPECULATIVE_KEYS, "speculative-config", sep="_")

    def get(key: str, default: Any = None) -> tuple[tuple, Any]:
        return fields[key][1] if key in fields else path, fields[key][0] if key in fields else default

    if "num_speculative_tokens" not in fields:
        raise doc.error(path, f"{_label(path)}: 'num_speculative_tokens' is required (draft tokens per step)")
    k = _int(doc, *get("num_speculative_tokens"), minimum=0)
    draft = get("model")[1]
    draft = _str(doc, *get("model")) if draft is not None else ""
    method = get("method")[1]
    method = _str(doc, *get("method")).lower() if method is not None else ("draft_model" if draft else "ngram")
    lookups = {}
    for key in ("prompt_lookup_min", "prompt_lookup_max"):
        lookups[key] = None if key not in fields else _int(doc, *get(key), minimum=1)
    schedule = []
    if "num_speculative_tokens_per_batch_size" in fields:
        rows_path, rows = get("num_speculative_tokens_per_batch_size")
        if not isinstance(rows, list) or not rows:
            raise doc.error(rows_path, f"{_label(rows_path)}: must be a list of [min_batch, max_batch, k] "
                                       f"rows, got {_show(rows)}")
        for index, row in enumerate(rows):
            row_path = rows_path + (index,)
            if not isinstance(row, list) or len(row) != 3:
                raise doc.error(row_path, f"{_label(row_path)}: each row is [min_batch, max_batch, k], got {_show(row)}")
            low, high, kk = (_int(doc, row_path + (i,), x, minimum=0) for i, x in enumerate(row))
            if low < 1 or high < low:
                raise doc.error(row_path, f"{_label(row_path)}: the batch range {low}..{high} is empty")
            schedule.append((low, high, kk))
    disable = None
    if "disable_by_batch_size" in fields:
        disable = _int(doc, *get("disable_by_batch_size"), minimum=1)
    if k == 0 and not schedule:
        return None  # k=0 is speculation off
    return SpecConfig(method=method, num_speculative_tokens=k, draft_model=draft,
                      prompt_lookup_min=lookups["prompt_lookup_min"],
                      prompt_lookup_max=lookups["prompt_lookup_max"],
                      schedule=tuple(schedule), disable_by_batch_size=disable)


# --- the workload and its evidence ---------------------------------------------

@dataclass(frozen=True)
class Load:
    typical: float
    peak: float


@dataclass(frozen=True)
class Lengths:
    """A token-length distribution; any of its statistics may be missing."""

    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None

    @property
    def typical(self) -> float:
        return next(v for v in (self.mean, self.p50, self.p99, self.max) if v is not None)

    @property
    def longest(self) -> tuple[float, str]:
        """The longest a request gets, and which statistic says so."""
        if self.max is not None:
            return self.max, "max"
        if self.p99 is not None:
            return self.p99, "p99"
        return self.typical, "mean" if self.mean is not None else "p50"


@dataclass(frozen=True)
class Slo:
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    throughput_tok_s: float | None = None  # a floor, output tokens per second across the deployment
    max_accuracy_drop: float | None = None  # percentage points the task tolerates
    min_accuracy: float | None = None  # percent

    @property
    def latency_or_throughput(self) -> bool:
        """Whether any SLO a batching or speculation choice could be held to is stated."""
        return any(v is not None for v in (self.ttft_p99_ms, self.tpot_p99_ms, self.throughput_tok_s))


@dataclass(frozen=True)
class SharedPrefix:
    tokens: int
    fraction: float  # of requests that start with it


@dataclass(frozen=True)
class Evidence:
    """One number the team cites: what was measured, under what setting, and where it comes from."""

    metric: str
    value: float
    setting: dict
    source: str
    where: str  # where it was cited (file:line)
    note: str = ""
    label: str = ""  # a short description of the setting, when the full one says too much


    @property
    def batch(self) -> int | None:
        """The load it was measured at: batch size or concurrent requests."""
        for key in ("batch", "concurrency"):
            if key in self.setting:
                return self.setting[key]
        return None

    @property
    def max_num_seqs(self) -> int | None:
        return self.setting.get("max-num-seqs")

    def speculative(self) -> bool | None:
        """Whether speculation was on; None when the setting does not say."""
        s = self.setting
        if "speculative" in s:
            return s["speculative"]
        if "num-speculative-tokens" in s:
            return s["num-speculative-tokens"] > 0
        if "method" in s:
            return str(s["method"]).lower() not in ("none", "off", "")
        return None

    def describe(self) -> str:
        setting = self.label or describe_setting(self.setting)
        return f"{describe_value(self.metric, self.value)} at {setting} ({self.source})"


def describe_value(metric: str, value: float) -> str:
    v = fmt(value)
    return {
        "ttft_ms_p99": f"p99 TTFT {v} ms", "ttft_ms_p50": f"median TTFT {v} ms",
        "tpot_ms_p99": f"p99 TPOT {v} ms", "tpot_ms_p50": f"median TPOT {v} ms",
        "output_tok_s": f"{v} output tok/s", "request_throughput": f"{v} requests/s",
        "accuracy": f"accuracy {v}%", "accuracy_drop": f"an accuracy drop of {v} points",
    }[metric]


def describe_setting(setting: dict) -> str:
    if not setting:
        return "an unstated setting"
    parts = []
    for key, value in setting.items():
        if key == "speculative":
            parts.append(f"speculative decoding {'on' if value else 'off'}")
        elif key == "enable-prefix-caching":
            parts.append(f"prefix caching {'on' if value else 'off'}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{key} {fmt(value)}")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def fmt(value: float) -> str:
    """1200 -> '1,200', 0.5 -> '0.5', 3.14159 -> '3.14'."""
    if isinstance(value, bool):
        return str(value).lower()
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"


def gb(value: float) -> str:
    """Gigabytes for a sentence: '16.1 GB', '0.05 GB'."""
    return f"{value:.2g} GB" if abs(value) < 1 else f"{value:,.1f} GB"


@dataclass(frozen=True)
class Workload:
    name: str
    task: str
    concurrency: Load
    qps: Load | None
    prompt: Lengths
    output: Lengths
    slo: Slo
    shared_prefix: SharedPrefix | None
    evidence: tuple[Evidence, ...]
    doc: Doc = field(repr=False, compare=False, default=None)

    @property
    def mean_request_tokens(self) -> float:
        return self.prompt.typical + self.output.typical

    @property
    def longest_request(self) -> tuple[float, str]:
        prompt, basis_p = self.prompt.longest
        output, basis_o = self.output.longest
        basis = basis_p if basis_p == basis_o else f"{basis_p} prompt + {basis_o} output"
        return prompt + output, basis


def read_workload(doc: Doc) -> Workload:
    """Validate a workload file: load, lengths, SLOs, shared prefixes, cited measurements."""
    data = doc.data
    if isinstance(data, dict) and "model" in data and "concurrency" not in data:
        raise doc.error((), "this looks like a serving config, not a workload file; "
                            "pass the workload with --workload")
    fields = _mapping(doc, (), data, WORKLOAD_KEYS, "workload")
    for key in ("concurrency", "prompt-tokens", "output-tokens"):
        if key not in fields:
            raise doc.error((), f"the workload has no '{key}': {_WHY_REQUIRED[key]}")

    name = _text(fields.get("name", (None,))[0]) or Path(doc.name).stem
    task = _text(fields.get("task", (None,))[0])
    concurrency = _read_load(doc, *_swap(fields["concurrency"]), whole=True)
    qps = _read_load(doc, *_swap(fields["qps"])) if "qps" in fields and fields["qps"][0] is not None else None
    prompt = _read_lengths(doc, *_swap(fields["prompt-tokens"]))
    output = _read_lengths(doc, *_swap(fields["output-tokens"]))
    slo = _read_slo(doc, *_swap(fields["slo"])) if "slo" in fields and fields["slo"][0] is not None else Slo()
    shared = None
    if "shared-prefix" in fields and fields["shared-prefix"][0] is not None:
        shared = _read_shared_prefix(doc, *_swap(fields["shared-prefix"]))
    evidence: list[Evidence] = []
    if "measurements" in fields and fields["measurements"][0] is not None:
        evidence += _read_measurements(doc, *_swap(fields["measurements"]))
    if "records" in fields and fields["records"][0] is not None:
        value, path = fields["records"]
        paths = value if isinstance(value, list) else [value]
        for index, item in enumerate(paths):
            item_path = path + (index,) if isinstance(value, list) else path
            evidence += _read_records(doc, item_path, _str(doc, item_path, item))
    return Workload(name=name, task=task, concurrency=concurrency, qps=qps, prompt=prompt,
                    output=output, slo=slo, shared_prefix=shared, evidence=tuple(evidence), doc=doc)


_WHY_REQUIRED = {
    "concurrency": "say how many requests are in flight (concurrency: {typical: 12, peak: 20})",
    "prompt-tokens": "give the prompt length distribution (prompt-tokens: {mean: 800, p99: 3000})",
    "output-tokens": "give the output length distribution (output-tokens: {mean: 200, p99: 900})",
}


def _read_load(doc: Doc, path: tuple, value: Any, whole: bool = False) -> Load:
    def number(p: tuple, v: Any) -> float:
        return _int(doc, p, v, minimum=1) if whole else _number(doc, p, v, above=0)

    if not isinstance(value, dict):
        n = number(path, value)
        return Load(n, n)
    fields = _mapping(doc, path, value, LOAD_KEYS, _label(path))
    if not fields:
        raise doc.error(path, f"{_label(path)}: give 'typical' and 'peak'")
    typical = number(*_swap(fields["typical"])) if "typical" in fields else None
    peak = number(*_swap(fields["peak"])) if "peak" in fields else None
    typical = peak if typical is None else typical
    peak = typical if peak is None else peak
    if typical > peak:
        raise doc.error(path, f"{_label(path)}: typical ({fmt(typical)}) is above peak ({fmt(peak)})")
    return Load(typical, peak)


def _read_lengths(doc: Doc, path: tuple, value: Any) -> Lengths:
    if not isinstance(value, dict):
        n = _number(doc, path, value, above=0)
        return Lengths(mean=n)
    fields = _mapping(doc, path, value, LENGTH_KEYS, _label(path))
    if not fields:
        raise doc.error(path, f"{_label(path)}: give at least one of {', '.join(LENGTH_KEYS)}")
    stats = {key: _number(doc, *_swap(fields[key]), above=0) for key in fields}
    order = [key for key in ("p50", "p99", "max") if key in stats]
    for low, high in zip(order, order[1:]):
        if stats[low] > stats[high]:
            raise doc.error(fields[high][1], f"{_label(fields[high][1])}: {fmt(stats[high])} is below "
                                             f"{low} ({fmt(stats[low])})")
    return Lengths(**stats)


def _read_slo(doc: Doc, path: tuple, value: Any) -> Slo:
    fields = _mapping(doc, path, value, SLO_KEYS, "slo block")
    if not fields:
        raise doc.error(path, "slo: state at least one of " + ", ".join(SLO_KEYS))
    values = {key.replace("-", "_"): _number(doc, *_swap(item), minimum=0) for key, item in fields.items()}
    return Slo(**values)


def _read_shared_prefix(doc: Doc, path: tuple, value: Any) -> SharedPrefix:
    fields = _mapping(doc, path, value, SHARED_PREFIX_KEYS, "shared-prefix block")
    if "tokens" not in fields:
        raise doc.error(path, "shared-prefix: 'tokens' is required (how long the shared prefix is)")
    tokens = _int(doc, *_swap(fields["tokens"]), minimum=0)
    fraction = 1.0
    if "fraction" in fields:
        fraction = _number(doc, *_swap(fields["fraction"]), minimum=0, maximum=1)
    return SharedPrefix(tokens, fraction)


def _read_measurements(doc: Doc, path: tuple, value: Any) -> list[Evidence]:
    if not isinstance(value, list):
        raise doc.error(path, f"measurements: must be a list of {{setting, metric, value, source}}, got {_show(value)}")
    out = []
    for index, item in enumerate(value):
        item_path = path + (index,)
        fields = _mapping(doc, item_path, item, MEASUREMENT_KEYS, "measurement")
        for key in ("metric", "value", "source"):
            if key not in fields or fields[key][0] in (None, ""):
                raise doc.error(item_path, f"{_label(item_path)}: '{key}' is required "
                                           "(each measurement says setting, metric, value and source)")
        metric_path = fields["metric"][1]
        metric = _str(doc, metric_path, fields["metric"][0]).lower().replace("-", "_")
        if metric not in METRICS:
            raise doc.error(metric_path, f"{_label(metric_path)}: unknown metric {fields['metric'][0]!r}"
                                         f"{_suggest(metric, tuple(METRICS), 'metrics')}")
        number = _number(doc, *_swap(fields["value"]))
        setting = {}
        if "setting" in fields and fields["setting"][0] is not None:
            setting = _read_setting(doc, *_swap(fields["setting"]))
        out.append(Evidence(metric=metric, value=number, setting=setting,
                            source=_text(fields["source"][0]), where=doc.where(item_path),
                            note=_text(fields.get("note", (None,))[0])))
    return out


def _read_setting(doc: Doc, path: tuple, value: Any) -> dict:
    fields = _mapping(doc, path, value, tuple(SETTING_TYPES), "measurement setting")
    setting = {}
    for key, (item, key_path) in fields.items():
        kind = SETTING_TYPES[key]
        if kind == "int":
            setting[key] = _int(doc, key_path, item, minimum=0)
        elif kind == "number":
            setting[key] = _number(doc, key_path, item, minimum=0)
        elif kind == "bool":
            setting[key] = _bool(doc, key_path, item)
        elif key == "quantization" and item is None:
            setting[key] = "none"
        else:
            setting[key] = _str(doc, key_path, item)
    return setting


def _read_records(doc: Doc, path: tuple, path_text: str) -> list[Evidence]:
    """Measurement records the lab wrote (one JSON line each) as cited evidence."""
    file = doc.resolve(path_text)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise doc.error(path, f"records: no such file: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise doc.error(path, f"records: cannot read {file}: {exc}") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = Measurement.from_dict(json.loads(line))
        except (json.JSONDecodeError, ValueError, TypeError) as exc:
            raise ReviewInputError(f"{path_text}:{number}: not a servelab Measurement record ({exc}); "
                                   f"named by {doc.where(path)}") from None
        wrong = [name for name in ("batch_size", "num_speculative_tokens")
                 if isinstance(getattr(record, name), bool) or not isinstance(getattr(record, name), int)]
        wrong += [name for name in ("output_tok_s", "ttft_ms_p99", "tpot_ms_p99")
                  if getattr(record, name) is not None and (isinstance(getattr(record, name), bool)
                                                            or not isinstance(getattr(record, name), (int, float)))]
        if wrong or not isinstance(record.method, str):
            raise ReviewInputError(f"{path_text}:{number}: not a servelab Measurement record "
                                   f"({', '.join(wrong) or 'method'} has the wrong type); "
                                   f"named by {doc.where(path)}")
        setting: dict[str, Any] = {"batch": record.batch_size, "speculative": record.is_speculative,
                                   "num-speculative-tokens": record.num_speculative_tokens,
                                   "method": record.method}
        if record.model:
            setting["model"] = record.model
        if record.hardware:
            setting["gpu"] = record.hardware
        if record.dtype:
            setting["dtype"] = record.dtype
        where = f"{path_text}:{number}"
        source = f"{where}, {record.backend} run" + (f" on {record.hardware}" if record.hardware else "")
        if record.timestamp:
            source += f", {record.timestamp}"
        label = f"batch {record.batch_size}, " + (
            f"{record.method} k={record.num_speculative_tokens}" if record.is_speculative else "no speculation")
        for metric in ("output_tok_s", "ttft_ms_p99", "tpot_ms_p99"):
            value = getattr(record, metric)
            if value is not None and not math.isnan(value):
                out.append(Evidence(metric=metric, value=float(value), setting=dict(setting),
                                    source=source, where=where, note=record.note, label=label))
    return out
