"""Shared by every check: thresholds, the no-SLO findings, and matching cited evidence to the config."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from ... import hardware
from ...simulate import ACCEPTANCE_RATE
from ..arithmetic import (
    Facts,
)
from ..report import Finding
from ..serving import ServingConfig, preset_key
from ..wording import describe_value, fmt, gb
from ..workload_spec import Evidence, WorkloadSpec

# Thresholds a reviewer may argue with; each says what crossing it means.
OVERSIZED_BATCH = (
    2.0  # max-num-seqs above this multiple of peak concurrency: a cap no load reaches (unjustified, never wrong)
)
# max-model-len above this multiple of the longest request (or the p99 prompt + p99 output bound) limits nothing
MODEL_LEN_HEADROOM = 4.0
PREFIX_REUSE_MATTERS = 0.10  # share of prefill a prefix cache would skip; above it, caching off is wrong
THROUGHPUT_NOISE = 0.02  # throughput differences under 2% are within run-to-run noise
ASSUMED_ACCEPTANCE = ACCEPTANCE_RATE  # per-token draft acceptance when none is cited (the simulator's 0.7)
# Up to this multiple of the roofline break-even batch, KV reads, overheads and the real acceptance rate
# decide the sign (the simulator's crossover for Llama-3.1-8B on an H200 is 1.15x the roofline's 114):
# only a measurement settles it. Past it, speculation loses.
NEAR_BREAK_EVEN = 1.25

SPEC_KEYS = {"speculative", "num-speculative-tokens", "method"}
CONDITIONS = {"batch", "concurrency", "qps"}  # load a number was measured at, not an engine setting
LOAD_METRICS = ("ttft_ms_p99", "tpot_ms_p99", "output_tok_s", "ttft_ms_p50", "tpot_ms_p50", "request_throughput")


# --- a workload without an SLO -----------------------------------------------------

NO_SLO = (
    "the workload states no latency or throughput SLO (slo: ttft-p99-ms, tpot-p99-ms or "
    "throughput-tok-s), so no measurement can show this choice meets one"
)


def no_slo_batching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Without an SLO, a batch size has nothing to be held to; the load arithmetic still shows."""
    B, peak = cfg.scheduler.max_num_seqs, f.peak_per_replica
    load = f"max-num-seqs {B} against a peak of {fmt(peak)} concurrent requests per replica"
    if B < peak:
        load += f": {fmt(peak - B)} of them wait in the queue at peak"
    elif B > OVERSIZED_BATCH * peak:
        load += f": {B - peak} slots no load fills"
    reason = f"max-num-seqs {B} cannot be justified: {NO_SLO}."
    return Finding(
        "batching",
        "unjustified",
        reason,
        load,
        "write down the p99 TTFT and TPOT the service must meet, then measure them at "
        f"max-num-seqs {B} with {fmt(peak)} concurrent requests.",
        cfg.knob("max-num-seqs", B),
    )


def no_slo_speculation(cfg: ServingConfig, wl: WorkloadSpec, f: Facts, finding: Finding) -> Finding:
    """Speculation trades throughput for latency: without a latency SLO the trade answers to nothing,
    unless the arithmetic already shows it wrong or a measured throughput gain carries it."""
    if (
        cfg.spec is None
        or wl.slo.latency_or_throughput
        or finding.verdict == "wrong"
        or (finding.verdict == "justified" and "tok/s" in finding.reason)
    ):
        return finding
    reason = f"speculative decoding trades throughput for per-request latency, and {NO_SLO}."
    return Finding(
        "speculative_decoding",
        "unjustified",
        reason,
        finding.evidence,
        "state the TPOT SLO it serves, then " + finding.fix,
        finding.setting,
    )


# --- matching evidence to the config --------------------------------------------


def conflicts(ev: Evidence, cfg: ServingConfig, wl: WorkloadSpec, ignore: Collection[str] = frozenset()) -> list[str]:
    """Where a measurement's setting differs from the config under review (empty: it applies)."""
    mine = cfg.setting()
    mine["task"] = wl.task
    out = []
    for key, theirs in ev.setting.items():
        if key in CONDITIONS or key in ignore:
            continue
        ours = mine.get(key)
        if key == "task" and not ours:
            continue
        if not _same(key, theirs, ours):
            out.append(
                f"{key} {theirs}, not {ours}"
                if key not in ("model", "gpu", "task")
                else f"{_NOUN[key]} {theirs}, not {ours}"
            )
    return out


_NOUN = {"model": "measured on model", "gpu": "measured on", "task": "measured on task"}


def _same(key: str, theirs: Any, ours: Any) -> bool:
    if key == "model":
        a, b = preset_key(str(theirs)), preset_key(str(ours))
        if a and b:
            return a == b
        return str(theirs).lower().rstrip("/").split("/")[-1] == str(ours).lower().rstrip("/").split("/")[-1]
    if key == "gpu":
        try:
            return hardware.get(str(theirs)).name == str(ours)
        except hardware.UnknownHardware:
            a, b = str(theirs).lower(), str(ours).lower()
            return a in b or b in a
    if key in ("quantization", "kv-cache-dtype", "dtype", "method", "task"):
        return _canon(theirs) == _canon(ours)
    if key == "gpu-memory-utilization":
        return abs(float(theirs) - float(ours)) < 1e-6
    return theirs == ours


def _canon(value: Any) -> str:
    text = str(value).strip().lower().replace("-", "_")
    text = text.removesuffix("_marlin")
    aliases = {
        "null": "none",
        "off": "none",
        "half": "float16",
        "float": "float32",
        "auto": "auto",
        "fp8_e4m3": "fp8",
        "fp8_e5m2": "fp8",
    }
    return aliases.get(text, text)


def spec_state(ev: Evidence, cfg: ServingConfig) -> bool:
    """Whether speculation was on for this measurement (unstated: as configured)."""
    stated = ev.speculative()
    return cfg.speculative if stated is None else stated


def at_batch(ev: Evidence, batch: int) -> bool:
    if ev.max_num_seqs is not None:
        return ev.max_num_seqs == batch
    return ev.batch == batch


def slo_break(ev: Evidence, wl: WorkloadSpec) -> str | None:
    """How this number misses the workload's SLO, or None."""
    slo = wl.slo
    if ev.metric == "ttft_ms_p99" and slo.ttft_p99_ms is not None and ev.value > slo.ttft_p99_ms:
        return f"p99 TTFT of {fmt(ev.value)} ms breaks the {fmt(slo.ttft_p99_ms)} ms SLO"
    if ev.metric == "tpot_ms_p99" and slo.tpot_p99_ms is not None and ev.value > slo.tpot_p99_ms:
        return f"p99 TPOT of {fmt(ev.value)} ms breaks the {fmt(slo.tpot_p99_ms)} ms SLO"
    if ev.metric == "output_tok_s" and slo.throughput_tok_s is not None and ev.value < slo.throughput_tok_s:
        return f"{fmt(ev.value)} output tok/s is under the {fmt(slo.throughput_tok_s)} tok/s floor"
    return None


def has_slo(ev: Evidence, wl: WorkloadSpec) -> bool:
    slo = wl.slo
    return {"ttft_ms_p99": slo.ttft_p99_ms, "tpot_ms_p99": slo.tpot_p99_ms, "output_tok_s": slo.throughput_tok_s}.get(
        ev.metric
    ) is not None


def _set_aside(items: list[tuple[Evidence, list[str]]]) -> str:
    if not items:
        return ""
    parts = [f"{describe_value(ev.metric, ev.value)} ({ev.source}): {'; '.join(why)}" for ev, why in items]
    return "set aside: " + " | ".join(parts)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _budget(f: Facts) -> str:
    if f.kv_budget_gb > 0:
        return gb(f.kv_budget_gb)
    return f"nothing (the weights are {gb(-f.kv_budget_gb)} over)"


def _points(x: float) -> str:
    return f"{fmt(x)} point" + ("" if x == 1 else "s")


def _pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def _cite(evs: list[Evidence]) -> str:
    return "; ".join(ev.describe() for ev in evs)
