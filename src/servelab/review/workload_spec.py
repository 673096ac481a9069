"""The workload a serving config claims to serve, read from its YAML file.

Load (concurrency, qps), prompt and output lengths, SLOs, a shared prefix, and the
measurements the team cites (by hand, or as the lab's Measurement records) as Evidence:
each with the setting it was measured under and where it was cited. What comes out is one
WorkloadSpec, the only workload record the reviewer knows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..measurement import Measurement
from .schema import (
    Doc,
    ReviewInputError,
    as_bool,
    as_int,
    as_number,
    as_str,
    as_text,
    label,
    mapping,
    show,
    suggest,
    swap,
)
from .wording import describe_setting, describe_value, fmt

WORKLOAD_KEYS = (
    "name",
    "description",
    "task",
    "concurrency",
    "qps",
    "prompt-tokens",
    "output-tokens",
    "slo",
    "shared-prefix",
    "multi-turn",
    "measurements",
    "records",
)
LOAD_KEYS = ("typical", "peak")
LENGTH_KEYS = ("mean", "p50", "p99", "max")
SLO_KEYS = ("ttft-p99-ms", "tpot-p99-ms", "throughput-tok-s", "max-accuracy-drop", "min-accuracy")
SHARED_PREFIX_KEYS = ("tokens", "fraction", "description")
MULTI_TURN_KEYS = ("turns", "carried-tokens", "sessions", "description")
MEASUREMENT_KEYS = ("setting", "metric", "value", "source", "note")
# What a cited number is and its unit; the names are servelab Measurement field names.
METRICS = {
    "ttft_ms_p50": "ms",
    "ttft_ms_p99": "ms",
    "tpot_ms_p50": "ms",
    "tpot_ms_p99": "ms",
    "output_tok_s": "tok/s",
    "request_throughput": "req/s",
    "accuracy": "%",
    "accuracy_drop": "points",
}
# The conditions a number was measured under. Config keys mean "the engine ran with this".
SETTING_TYPES = {
    "batch": "int",
    "concurrency": "int",
    "qps": "number",
    "max-num-seqs": "int",
    "tensor-parallel-size": "int",
    "pipeline-parallel-size": "int",
    "data-parallel-size": "int",
    "max-model-len": "int",
    "num-speculative-tokens": "int",
    "gpu-memory-utilization": "number",
    "speculative": "bool",
    "enable-prefix-caching": "bool",
    "quantization": "str",
    "method": "str",
    "kv-cache-dtype": "str",
    "dtype": "str",
    "model": "str",
    "gpu": "str",
    "task": "str",
    "enforce-eager": "bool",
    "enable-chunked-prefill": "bool",
    "max-num-batched-tokens": "int",
    "enable-expert-parallel": "bool",
}


# --- the workload and its evidence ---------------------------------------------


@dataclass(frozen=True)
class LoadLevels:
    """One load figure (concurrency or qps) at its typical and its peak level."""

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


@dataclass(frozen=True)
class MultiTurn:
    """Per-session prefix reuse: a chat's later turns start with the session's own history."""

    turns: float  # mean turns per session (at least 2)
    carried_tokens: int  # mean tokens of history a later turn's prompt starts with
    sessions: int | None = None  # sessions open at once, whose histories the cache would keep (None: peak concurrency)

    @property
    def later_fraction(self) -> float:
        """Of all requests, the share that are a session's second turn or later."""
        return (self.turns - 1) / self.turns


@dataclass(frozen=True)
class WorkloadSpec:
    """What the served traffic is: load, lengths, SLOs, shared prefixes, and the numbers the team cites."""

    name: str
    task: str
    concurrency: LoadLevels
    qps: LoadLevels | None
    prompt: Lengths
    output: Lengths
    slo: Slo
    shared_prefix: SharedPrefix | None
    evidence: tuple[Evidence, ...]
    doc: Doc | None = field(repr=False, compare=False, default=None)
    multi_turn: MultiTurn | None = None

    @property
    def mean_request_tokens(self) -> float:
        return self.prompt.typical + self.output.typical

    @property
    def longest_request(self) -> tuple[float, str]:
        prompt, basis_p = self.prompt.longest
        output, basis_o = self.output.longest
        basis = basis_p if basis_p == basis_o else f"{basis_p} prompt + {basis_o} output"
        return prompt + output, basis


def read_workload(doc: Doc) -> WorkloadSpec:
    """Validate a workload file: load, lengths, SLOs, shared prefixes, cited measurements."""
    data = doc.data
    if isinstance(data, dict) and "model" in data and "concurrency" not in data:
        raise doc.error((), "this looks like a serving config, not a workload file; pass the workload with --workload")
    fields = mapping(doc, (), data, WORKLOAD_KEYS, "workload")
    for key in ("concurrency", "prompt-tokens", "output-tokens"):
        if key == "concurrency" and key not in fields and "qps" in fields:
            # Little's law: in flight = arrival rate x time each request spends in the server, and
            # that time depends on the config under review, so the reviewer cannot derive it.
            raise doc.error(
                (),
                "the workload gives qps but no 'concurrency': the requests in flight are qps x "
                "the seconds each request takes (Little's law), which depends on the server "
                "under review; add the in-flight counts your load test or gateway metrics show "
                "(concurrency: {typical: 12, peak: 20}), or qps x your measured end-to-end latency",
            )
        if key not in fields:
            raise doc.error((), f"the workload has no '{key}': {_WHY_REQUIRED[key]}")

    name = as_text(fields.get("name", (None,))[0]) or Path(doc.name).stem
    task = as_text(fields.get("task", (None,))[0])
    concurrency = _read_load(doc, *swap(fields["concurrency"]), whole=True)
    qps = _read_load(doc, *swap(fields["qps"])) if "qps" in fields and fields["qps"][0] is not None else None
    prompt = _read_lengths(doc, *swap(fields["prompt-tokens"]))
    output = _read_lengths(doc, *swap(fields["output-tokens"]))
    slo = _read_slo(doc, *swap(fields["slo"])) if "slo" in fields and fields["slo"][0] is not None else Slo()
    shared = None
    if "shared-prefix" in fields and fields["shared-prefix"][0] is not None:
        shared = _read_shared_prefix(doc, *swap(fields["shared-prefix"]))
    multi_turn = None
    if "multi-turn" in fields and fields["multi-turn"][0] is not None:
        multi_turn = _read_multi_turn(doc, *swap(fields["multi-turn"]))
    evidence: list[Evidence] = []
    if "measurements" in fields and fields["measurements"][0] is not None:
        evidence += _read_measurements(doc, *swap(fields["measurements"]))
    if "records" in fields and fields["records"][0] is not None:
        value, path = fields["records"]
        paths = value if isinstance(value, list) else [value]
        for index, item in enumerate(paths):
            item_path = path + (index,) if isinstance(value, list) else path
            evidence += _read_records(doc, item_path, as_str(doc, item_path, item))
    return WorkloadSpec(
        name=name,
        task=task,
        concurrency=concurrency,
        qps=qps,
        prompt=prompt,
        output=output,
        slo=slo,
        shared_prefix=shared,
        evidence=tuple(evidence),
        doc=doc,
        multi_turn=multi_turn,
    )


_WHY_REQUIRED = {
    "concurrency": "say how many requests are in flight (concurrency: {typical: 12, peak: 20})",
    "prompt-tokens": "give the prompt length distribution (prompt-tokens: {mean: 800, p99: 3000})",
    "output-tokens": "give the output length distribution (output-tokens: {mean: 200, p99: 900})",
}


def _read_load(doc: Doc, path: tuple, value: Any, whole: bool = False) -> LoadLevels:
    def number(p: tuple, v: Any) -> float:
        return as_int(doc, p, v, minimum=1) if whole else as_number(doc, p, v, above=0)

    if not isinstance(value, dict):
        n = number(path, value)
        return LoadLevels(n, n)
    fields = mapping(doc, path, value, LOAD_KEYS, label(path))
    if not fields:
        raise doc.error(path, f"{label(path)}: give 'typical' and 'peak'")
    read = {key: number(*swap(fields[key])) for key in LOAD_KEYS if key in fields}
    # fields holds typical, peak or both: the one given stands for the other
    typical = read["typical"] if "typical" in read else read["peak"]
    peak = read["peak"] if "peak" in read else typical
    if typical > peak:
        raise doc.error(path, f"{label(path)}: typical ({fmt(typical)}) is above peak ({fmt(peak)})")
    return LoadLevels(typical, peak)


def _read_lengths(doc: Doc, path: tuple, value: Any) -> Lengths:
    if not isinstance(value, dict):
        n = as_number(doc, path, value, above=0)
        return Lengths(mean=n)
    fields = mapping(doc, path, value, LENGTH_KEYS, label(path))
    if not fields:
        raise doc.error(path, f"{label(path)}: give at least one of {', '.join(LENGTH_KEYS)}")
    stats = {key: as_number(doc, *swap(fields[key]), above=0) for key in fields}
    order = [key for key in ("p50", "p99", "max") if key in stats]
    for low, high in zip(order, order[1:]):
        if stats[low] > stats[high]:
            raise doc.error(
                fields[high][1], f"{label(fields[high][1])}: {fmt(stats[high])} is below {low} ({fmt(stats[low])})"
            )
    return Lengths(**stats)


def _read_slo(doc: Doc, path: tuple, value: Any) -> Slo:
    fields = mapping(doc, path, value, SLO_KEYS, "slo block")
    if not fields:
        raise doc.error(path, "slo: state at least one of " + ", ".join(SLO_KEYS))
    values = {key.replace("-", "_"): as_number(doc, *swap(item), minimum=0) for key, item in fields.items()}
    return Slo(**values)


def _read_shared_prefix(doc: Doc, path: tuple, value: Any) -> SharedPrefix:
    fields = mapping(doc, path, value, SHARED_PREFIX_KEYS, "shared-prefix block")
    if "tokens" not in fields:
        raise doc.error(path, "shared-prefix: 'tokens' is required (how long the shared prefix is)")
    tokens = as_int(doc, *swap(fields["tokens"]), minimum=0)
    fraction = 1.0
    if "fraction" in fields:
        fraction = as_number(doc, *swap(fields["fraction"]), minimum=0, maximum=1)
    return SharedPrefix(tokens, fraction)


def _read_multi_turn(doc: Doc, path: tuple, value: Any) -> MultiTurn:
    fields = mapping(doc, path, value, MULTI_TURN_KEYS, "multi-turn block")
    for key, why in (
        ("turns", "mean turns per session"),
        ("carried-tokens", "mean tokens of history a later turn carries"),
    ):
        if key not in fields:
            raise doc.error(path, f"multi-turn: '{key}' is required ({why})")
    turns = as_number(doc, *swap(fields["turns"]), minimum=1)
    if turns < 2:
        raise doc.error(path + ("turns",), "multi-turn: turns must be at least 2 (one turn carries nothing over)")
    carried = as_int(doc, *swap(fields["carried-tokens"]), minimum=0)
    sessions = as_int(doc, *swap(fields["sessions"]), minimum=1) if "sessions" in fields else None
    return MultiTurn(turns, carried, sessions)


def _read_measurements(doc: Doc, path: tuple, value: Any) -> list[Evidence]:
    if not isinstance(value, list):
        raise doc.error(path, f"measurements: must be a list of {{setting, metric, value, source}}, got {show(value)}")
    out = []
    for index, item in enumerate(value):
        item_path = path + (index,)
        fields = mapping(doc, item_path, item, MEASUREMENT_KEYS, "measurement")
        for key in ("metric", "value", "source"):
            if key not in fields or fields[key][0] in (None, ""):
                raise doc.error(
                    item_path,
                    f"{label(item_path)}: '{key}' is required "
                    "(each measurement says setting, metric, value and source)",
                )
        metric_path = fields["metric"][1]
        metric = as_str(doc, metric_path, fields["metric"][0]).lower().replace("-", "_")
        if metric not in METRICS:
            raise doc.error(
                metric_path,
                f"{label(metric_path)}: unknown metric {fields['metric'][0]!r}"
                f"{suggest(metric, tuple(METRICS), 'metrics')}",
            )
        number = as_number(doc, *swap(fields["value"]))
        setting = {}
        if "setting" in fields and fields["setting"][0] is not None:
            setting = _read_setting(doc, *swap(fields["setting"]))
        out.append(
            Evidence(
                metric=metric,
                value=number,
                setting=setting,
                source=as_text(fields["source"][0]),
                where=doc.where(item_path),
                note=as_text(fields.get("note", (None,))[0]),
            )
        )
    return out


def _read_setting(doc: Doc, path: tuple, value: Any) -> dict:
    fields = mapping(doc, path, value, tuple(SETTING_TYPES), "measurement setting")
    setting: dict[str, int | float | bool | str] = {}
    for key, (item, key_path) in fields.items():
        kind = SETTING_TYPES[key]
        if kind == "int":
            setting[key] = as_int(doc, key_path, item, minimum=0)
        elif kind == "number":
            setting[key] = as_number(doc, key_path, item, minimum=0)
        elif kind == "bool":
            setting[key] = as_bool(doc, key_path, item)
        elif key == "quantization" and item is None:
            setting[key] = "none"
        else:
            setting[key] = as_str(doc, key_path, item)
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
            raise ReviewInputError(
                f"{path_text}:{number}: not a servelab Measurement record ({exc}); named by {doc.where(path)}"
            ) from None
        wrong = [
            name
            for name in ("batch_size", "num_speculative_tokens")
            if isinstance(getattr(record, name), bool) or not isinstance(getattr(record, name), int)
        ]
        wrong += [
            name
            for name in ("output_tok_s", "ttft_ms_p99", "tpot_ms_p99")
            if getattr(record, name) is not None
            and (isinstance(getattr(record, name), bool) or not isinstance(getattr(record, name), (int, float)))
        ]
        if wrong or not isinstance(record.method, str):
            raise ReviewInputError(
                f"{path_text}:{number}: not a servelab Measurement record "
                f"({', '.join(wrong) or 'method'} has the wrong type); "
                f"named by {doc.where(path)}"
            )
        setting: dict[str, Any] = {
            "batch": record.batch_size,
            "speculative": record.is_speculative,
            "num-speculative-tokens": record.num_speculative_tokens,
            "method": record.method,
        }
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
            f"{record.method} k={record.num_speculative_tokens}" if record.is_speculative else "no speculation"
        )
        for metric in ("output_tok_s", "ttft_ms_p99", "tpot_ms_p99"):
            value = getattr(record, metric)
            if value is not None and not math.isnan(value):
                out.append(
                    Evidence(
                        metric=metric,
                        value=float(value),
                        setting=dict(setting),
                        source=source,
                        where=where,
                        note=record.note,
                        label=label,
                    )
                )
    return out
