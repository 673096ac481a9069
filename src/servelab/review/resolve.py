"""The model and the GPU a serving config names, resolved to a ModelSpec and a Hardware.

The model comes from deployment.model-config, a local model folder, a modelspec preset or the
catalogue shipped with servelab; the GPU from deployment.gpu (a hardware preset) or a measured
deployment.hardware-file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .. import hardware, modelspec
from ..hardware import Hardware
from ..modelspec import ModelSpec
from .schema import Doc, ReviewInputError, as_str, label, show

DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}


def read_json(doc: Doc, file: Path, path: tuple, missing: str) -> Any:
    """The JSON a serving config names by a file path (its hardware file, its model's config.json), or the error a
    reviewer reads: `missing` when there is no such file, the file's line and the config line that names it when it
    is not valid JSON."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise doc.error(path, missing) from None
    except json.JSONDecodeError as exc:
        raise ReviewInputError(f"{file}:{exc.lineno}: not valid JSON ({exc.msg}); named by {doc.where(path)}") from None


def read_hardware(doc: Doc, deployment: dict) -> Hardware:
    if "hardware-file" in deployment:
        value, path = deployment["hardware-file"]
        file = doc.resolve(as_str(doc, path, value))
        try:
            hw = hardware.from_dict(read_json(doc, file, path, f"{label(path)}: no such file: {file}"))
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


def quantization_in_name(model_name: str) -> str | None:
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


def read_model(doc: Doc, model_name: str, deployment: dict) -> tuple[ModelSpec, str, str]:
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
        config = read_json(doc, file, path, f"{label(path)}: no config.json in {config_path}")
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
