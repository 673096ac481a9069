"""speculative-config: vLLM's SpeculativeConfig (vllm/config/speculative.py) as the review reads it.

The JSON or mapping of --speculative-config, with vLLM 0.32's --spec-method / --spec-model /
--spec-tokens shorthand merged in, and the load-adaptive schedule
(num_speculative_tokens_per_batch_size, or an older vLLM's disable_by_batch_size).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .schema import Doc, as_int, as_str, json_or_mapping, label, mapping, show

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


def speculative_config(doc: Doc, get) -> tuple[tuple, Any]:
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


def read_spec(doc: Doc, path: tuple, value: Any) -> SpecConfig | None:
    if value is None:
        return None
    value = json_or_mapping(doc, path, value)  # the CLI form is a JSON string
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
