"""The review checklist of Lesson 25, one function per knob.

Each check asks the lesson's question of one knob: is this choice traced back to
the workload it claims to serve? It answers with a Finding:

  wrong        the arithmetic (memory, roofline, GPU count) or a cited measurement contradicts it
  unjustified  nothing cited supports it
  justified    evidence is present and consistent

The arithmetic (arithmetic.py) uses the model's config.json numbers (modelspec) and the
GPU's driver-reported memory and datasheet bandwidth and peak (hardware). Measurements count as evidence only when they were
taken on this model, this GPU, this task and this setting; others are named and
set aside, the way a reviewer would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from .. import hardware, modelspec
from ..hardware import DTYPE_BYTES
from ..simulate import ACCEPTANCE_RATE, expected_tokens_per_step
from . import vllm_flags
from .arithmetic import (
    Facts,
    default_batched_tokens,
    derive,
    draft_gb,
    draft_spec,
    expert_gb,
    kv_seq_bytes,
    kv_windows_off,
    lora_gb,
    rank_weight_gb,
)
from .report import Finding
from .serving import ServingConfig, preset_key
from .wording import describe_value, fmt, gb
from .workload_spec import Evidence, WorkloadSpec

# Thresholds a reviewer may argue with; each says what crossing it means.
OVERSIZED_BATCH = (
    2.0  # max-num-seqs above this multiple of peak concurrency: a cap no load reaches (unjustified, never wrong)
)
MODEL_LEN_HEADROOM = 4.0  # max-model-len above this multiple of the longest request limits nothing
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


def run_checks(cfg: ServingConfig, wl: WorkloadSpec) -> tuple[list[Finding], Facts]:
    """Every check that the workload gives enough to decide, in checklist order."""
    facts = derive(cfg, wl)
    no_slo = not wl.slo.latency_or_throughput
    findings = [
        no_slo_batching(cfg, wl, facts) if no_slo else check_batching(cfg, wl, facts),
        check_quantization(cfg, wl, facts),
        check_parallelism(cfg, wl, facts),
        no_slo_speculation(cfg, wl, facts, check_cited_rates(wl, check_speculative_decoding(cfg, wl, facts))),
    ]
    if (
        wl.shared_prefix is not None or wl.multi_turn is not None
    ):  # only where the workload says something about prefixes
        findings.append(check_prefix_caching(cfg, wl, facts))
    if fp16_on_bf16_weights(cfg):  # only where the config casts a bf16-trained checkpoint to float16
        findings.append(check_dtype(cfg, wl, facts))
    findings.append(check_max_model_len(cfg, wl, facts))
    findings.append(check_gpu_memory_utilization(cfg, wl, facts))
    if "enforce-eager" in cfg.set_keys:  # only where the config touches them
        findings.append(check_enforce_eager(cfg, wl, facts))
    if cfg.set_keys & {"enable-chunked-prefill", "max-num-batched-tokens"}:
        findings.append(check_chunked_prefill(cfg, wl, facts))
    if cfg.lora:
        findings.append(check_lora(cfg, wl, facts))
    if cfg.load_format == "dummy" or cfg.benchmark_flags:
        findings.append(check_benchmark_settings(cfg))
    if cfg.removed_flags:  # vLLM would refuse to start; everything above is still reviewed
        findings.append(check_removed_flags(cfg))
    return findings, facts


# --- a workload without an SLO -----------------------------------------------------

NO_SLO = (
    "the workload states no latency or throughput SLO (slo: ttft-p99-ms, tpot-p99-ms or "
    "throughput-tok-s), so no measurement can show this choice meets one"
)


def no_slo_batching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Without an SLO, a batch size has nothing to be held to; the load arithmetic still shows."""
    B, peak = cfg.max_num_seqs, f.peak_per_replica
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


# --- 1. batching ----------------------------------------------------------------


def check_batching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """max-num-seqs against concurrency and the SLO, with the latency measured at that batch."""
    B, peak = cfg.max_num_seqs, f.peak_per_replica
    setting = cfg.knob("max-num-seqs", B)
    load_note = f"peak concurrency {fmt(peak)} (typical {fmt(f.typical_per_replica)})" + (
        f" per replica over {f.replicas} replicas" if f.replicas > 1 else ""
    )

    # Measurements at this batch, on this deployment. Speculation is judged in its own check,
    # so a number taken with it flipped still speaks to the batch.
    at_b, set_aside = [], []
    for ev in wl.evidence:
        if ev.metric not in LOAD_METRICS or not at_batch(ev, B):
            continue
        why = conflicts(ev, cfg, wl, ignore=SPEC_KEYS | {"max-num-seqs"})
        (set_aside.append((ev, why)) if why else at_b.append(ev))
    # A miss measured on this config at the deployment's load is the config's, whatever knob its
    # setting names (a benchmark of the chunk budget that misses TTFT with requests queueing for
    # max-num-seqs 1): it counts against the batch too, and the reasons below say whether the cap
    # is the cause (a cap below the load) or not (one that never binds).
    whole = [
        ev
        for ev in wl.evidence
        if ev.metric in LOAD_METRICS
        and ev.max_num_seqs is None
        and not at_batch(ev, B)
        and ev.batch is not None
        and ev.batch >= min(B, peak)
        and spec_state(ev, cfg) == cfg.speculative
        and slo_break(ev, wl)
        and not conflicts(ev, cfg, wl, ignore=SPEC_KEYS | {"max-num-seqs"})
    ]
    at_b += whole
    as_configured = [ev for ev in at_b if spec_state(ev, cfg) == cfg.speculative]
    flipped = [ev for ev in at_b if spec_state(ev, cfg) != cfg.speculative]
    breaks = [(ev, slo_break(ev, wl)) for ev in as_configured if slo_break(ev, wl)]
    flipped_ok = [ev for ev in flipped if has_slo(ev, wl) and not slo_break(ev, wl)]
    blame_spec = bool(breaks) and bool(flipped_ok) and not any(slo_break(ev, wl) for ev in flipped)
    # Only a number taken at the load the deployment will see can vouch for the batch.
    full_load = [ev for ev in (as_configured or flipped) if ev.batch is None or ev.batch >= min(B, peak)]
    supporting = [ev for ev in full_load if has_slo(ev, wl) and not slo_break(ev, wl)]

    evidence = _join(
        load_note, _cite(at_b) or f"no TTFT, TPOT or throughput measured at max-num-seqs {B}", _set_aside(set_aside)
    )
    # max-num-seqs caps a batch vLLM forms continuously from the requests that are there: it reserves
    # nothing and pads nothing, so a cap above the load schedules exactly the batches a cap at the load
    # would. Only a cap below the load changes anything (requests wait for a slot).
    oversized = B > OVERSIZED_BATCH * peak
    right_size = _pow2_at_least(peak)
    diagnose = (
        f"split p99 TTFT at {fmt(peak)} concurrent requests into queue time and prefill time "
        "(vLLM's vllm:request_queue_time_seconds and vllm:request_prefill_time_seconds) to find the "
        "driver: long prompts, the chunked-prefill budget (max-num-batched-tokens), KV pressure and "
        "preemption (vllm:num_preemptions), tokenization, or warm-up in the p99"
    )

    if blame_spec:
        reason = (
            f"max-num-seqs {B} meets the SLO with speculative decoding "
            f"{'off' if cfg.speculative else 'on'} at this batch; the miss belongs to the speculative "
            "decoding setting (see that finding)."
        )
        return Finding(
            "batching", "justified", reason, evidence, "keep max-num-seqs; fix speculative decoding.", setting
        )

    if breaks and B < peak:
        reason = (
            f"max-num-seqs {B} is wrong: {fmt(peak - B)} of the peak's {fmt(peak)} concurrent requests wait "
            f"in the queue for a batch slot, and the measured {breaks[0][1]}."
        )
        return Finding("batching", "wrong", reason, evidence, _capacity_fix(cfg, wl, f) + ".", setting)

    if breaks:
        reason = (
            f"the measured {breaks[0][1]}, but max-num-seqs {B} never binds at a peak of {fmt(peak)} "
            f"concurrent requests, so the cap is not the cause: a cap of {right_size} would schedule the "
            "same batches" + (f", and nothing about the workload chose {B} either" if oversized else "") + "."
        )
        tpot_miss = next((ev for ev, _ in breaks if ev.metric == "tpot_ms_p99"), None)
        return Finding(
            "batching",
            "unjustified",
            reason,
            _join(evidence, decode_step_note(cfg, f, tpot_miss.value) if tpot_miss else ""),
            (diagnose if tpot_miss is None else _tpot_diagnosis(cfg, f, tpot_miss.value))
            + "; lowering max-num-seqs changes nothing at this load.",
            setting,
        )

    if B < peak and not supporting:
        queued = peak - B
        reason = (
            f"max-num-seqs {B} is below the peak of {fmt(peak)} concurrent requests, so {fmt(queued)} wait "
            "in the queue at peak, and no TTFT measured at peak load shows that the SLO survives it."
        )
        return Finding("batching", "unjustified", reason, evidence, _capacity_fix(cfg, wl, f) + ".", setting)

    if not supporting:
        if oversized:
            reason = (
                f"max-num-seqs {B} is {B / peak:.0f}x the {load_note}: the cap never binds, so it costs "
                "nothing at this load (vLLM pads no batch), but nothing about the workload chose it, and no "
                "TTFT or TPOT measured at this load is cited against the SLO."
            )
            fix = (
                f"measure p99 TTFT and TPOT with {fmt(peak)} concurrent requests and cite them; size the cap to a "
                f"load you expect (about {right_size} for this peak) only if it is meant to bound an overload."
            )
            return Finding("batching", "unjustified", reason, evidence, fix, setting)
        reason = (
            f"max-num-seqs {B} fits the {load_note}, but no TTFT or TPOT measured at this batch "
            "and load is cited against the SLO."
        )
        fix = f"measure p99 TTFT and TPOT at max-num-seqs {B} with {fmt(peak)} concurrent requests and cite them."
        return Finding("batching", "unjustified", reason, evidence, fix, setting)

    measured = ", ".join(describe_value(ev.metric, ev.value) for ev in supporting)
    verb = "meets" if len(supporting) == 1 else "meet"
    reason = f"max-num-seqs {B} matches the {load_note}, and the measured {measured} at this batch {verb} the SLO."
    return Finding(
        "batching", "justified", reason, evidence, "none; re-measure when the peak concurrency changes.", setting
    )


def decode_step_ms(cfg: ServingConfig, f: Facts) -> float:
    """A decode step at the peak's running batch on one GPU: its share of the weights and of the
    batch's KV cache read once, or the batch's arithmetic, whichever is longer."""
    hw, shards = cfg.hardware, max(1, f.shards)
    read = (f.rank_weight_gb + f.kv_gb_peak) / shards / hw.bandwidth_gb_s * 1e3
    compute = 2 * cfg.model.active_params / shards * f.running_batch_peak / ((f.peak_tflops or hw.peak_tflops) * 1e12)
    return max(read, compute * 1e3)


def decode_step_note(cfg: ServingConfig, f: Facts, measured_tpot: float) -> str:
    step = decode_step_ms(cfg, f)
    return (
        f"a decode step of {f.running_batch_peak} sequences reads {gb((f.rank_weight_gb + f.kv_gb_peak) / max(1, f.shards))} "
        f"per GPU (weights and the batch's KV cache): about {fmt(step)} ms, against the measured p99 TPOT of "
        f"{fmt(measured_tpot)} ms"
    )


def _tpot_diagnosis(cfg: ServingConfig, f: Facts, measured_tpot: float) -> str:
    """Where a TPOT miss comes from, by the step's tokens: the decode step itself where its reads come
    near the measured TPOT, else what shares the step with it (prefill chunks, preemption, the CPU)."""
    step = decode_step_ms(cfg, f)
    if step >= CHUNK_CLEARED_SHARE * measured_tpot:
        return (
            f"the decode step itself takes about {fmt(step)} ms of the {fmt(measured_tpot)} ms: the batch's "
            "weight and KV reads are the cause, so more GPUs per replica (or more replicas) bring TPOT down, "
            "or a lower KV footprint (kv-cache-dtype fp8)"
        )
    return (
        f"a decode step alone takes about {fmt(step)} ms, under half the measured {fmt(measured_tpot)} ms: "
        "the rest comes from what shares the step (prefill chunks: measure at a lower max-num-batched-tokens; "
        "preemption: vllm:num_preemptions; CPU scheduling between steps)"
    )


def _capacity_fix(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> str:
    """Raise the batch if the KV cache holds the peak; otherwise add replicas."""
    per_seq_gb = f.kv_bytes_per_token * f.mean_request_tokens / 1e9
    fits = int(f.kv_budget_gb / per_seq_gb) if per_seq_gb > 0 and f.kv_budget_gb > 0 else 0
    peak = f.peak_per_replica
    if fits >= peak:
        return (
            f"raise max-num-seqs to {_pow2_at_least(peak)}: the KV cache holds about {fmt(fits)} sequences "
            f"of {fmt(f.mean_request_tokens)} tokens; then re-measure p99 TTFT at {fmt(peak)} concurrent requests"
        )
    if fits < 1:
        return "the KV cache has no room for the batch: see gpu_memory_utilization and parallelism"
    replicas = math.ceil(wl.concurrency.peak / fits)
    per_replica = math.ceil(wl.concurrency.peak / replicas)
    return (
        f"one replica's KV cache holds about {fmt(fits)} sequences of {fmt(f.mean_request_tokens)} tokens, "
        f"fewer than the peak of {fmt(wl.concurrency.peak)}: serve it with {replicas} replicas "
        f"(data-parallel-size {replicas}, or more GPUs) at max-num-seqs {per_replica} each, "
        "then re-measure p99 TTFT at peak"
    )


# --- 2. quantization --------------------------------------------------------------


def check_quantization(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Quantized weights, or a quantized KV cache, need a measured accuracy impact on this task at this batch."""
    bf16_gb = cfg.model.weight_bytes(cfg.dtype, linear_bytes=DTYPE_BYTES[cfg.dtype]) / 1e9
    kv_quantized = DTYPE_BYTES[cfg.kv_cache_dtype] < DTYPE_BYTES[cfg.dtype]
    if cfg.quantization_mismatch:
        # ModelConfig._verify_quantization (vllm/config/model.py): a quantization argument that differs
        # from the checkpoint's quantization_config stops vLLM at start.
        setting = cfg.knob("quantization", cfg.quantization)
        reason = (
            f"the checkpoint is already quantized ({cfg.quantization_mismatch}, its quantization_config) and "
            f"quantization {cfg.quantization} names another method, so vLLM refuses to start."
        )
        evidence = f"checkpoint quantization_config: {cfg.quantization_mismatch}; weights {gb(f.weight_gb)}"
        return Finding(
            "quantization",
            "wrong",
            reason,
            evidence,
            "delete quantization: vLLM reads the checkpoint's own method.",
            setting,
        )
    if cfg.quantization is None and kv_quantized:
        return _check_kv_quantization(cfg, wl, f)
    if cfg.quantization is None:
        setting = cfg.knob("quantization", "none")
        reason = (
            f"weights are served unquantized in {cfg.weight_dtype}, and the KV cache in "
            f"{cfg.kv_cache_dtype}, so there is no accuracy trade to justify."
        )
        evidence = f"weights {gb(f.weight_gb)} in {cfg.weight_dtype}"
        return Finding("quantization", "justified", reason, evidence, "none.", setting)

    q = cfg.quantization
    if cfg.quantization_source == "checkpoint":
        setting = f"quantization {q} (the checkpoint's quantization_config, {cfg.model_name})"
    elif cfg.quantization_from_name:
        setting = f"quantization {q} (from the model id {cfg.model_name})"
    else:
        setting = cfg.knob("quantization", q)
    memory = f"{q} stores weights in {cfg.weight_dtype}: {gb(f.weight_gb)} instead of {gb(bf16_gb)} in {cfg.dtype}"
    if kv_quantized:
        memory += f"; the KV cache is {cfg.kv_cache_dtype} too ({cfg.knob('kv-cache-dtype', cfg.kv_cache_dtype)})"
    what = q if not kv_quantized else f"{q} weights with the KV cache in {cfg.kv_cache_dtype}"
    if cfg.quantization_source == "checkpoint" and cfg.model.native_quantization and not kv_quantized:
        reason = (
            f"the checkpoint's {q} is the model as published ({cfg.model.native_quantization}), so there is "
            "no unquantized original whose accuracy it trades away."
        )
        return Finding("quantization", "justified", reason, memory, "none.", setting)
    task = wl.task or "this workload's task"
    quantized, baseline, set_aside, drops, q_acc = _accuracy_evidence(cfg, wl, f, "quantization", q, {"none"}, "")
    cited = quantized + baseline
    evidence = _join(memory, _cite(cited) or f"no accuracy measured on {task} with {q}", _set_aside(set_aside))
    tolerance, floor = wl.slo.max_accuracy_drop, wl.slo.min_accuracy

    if drops:
        drop = max(drops)
        if tolerance is not None and drop > tolerance:
            reason = (
                f"{q} costs {_points(drop)} of accuracy on {task}, more than the {_points(tolerance)} "
                "the workload tolerates."
            )
            fix = (
                f"serve {cfg.dtype} weights ({gb(bf16_gb)}) or try an 8-bit scheme (fp8), "
                f"measuring accuracy on {task} at batch {cfg.max_num_seqs}."
            )
            return Finding("quantization", "wrong", reason, evidence, fix, setting)
        limit = f", within the {_points(tolerance)} tolerated" if tolerance is not None else ""
        reason = f"{q} costs a measured {_points(drop)} of accuracy on {task} at this batch{limit}."
        fix = (
            "none." if tolerance is not None else "state the accuracy drop the task tolerates (slo.max-accuracy-drop)."
        )
        return Finding("quantization", "justified", reason, evidence, fix, setting)
    if q_acc and floor is not None:
        worst = min(ev.value for ev in q_acc)
        if worst < floor:
            reason = f"{q} scores {fmt(worst)}% on {task}, under the {fmt(floor)}% the workload requires."
            return Finding(
                "quantization",
                "wrong",
                reason,
                evidence,
                f"serve {cfg.dtype} weights or an 8-bit scheme and re-measure.",
                setting,
            )
        reason = f"{q} scores a measured {fmt(worst)}% on {task}, above the {fmt(floor)}% required."
        return Finding("quantization", "justified", reason, evidence, "none.", setting)

    reason = f"{what} was adopted without a measured accuracy impact on {task} at batch {cfg.max_num_seqs}" + (
        " (the numbers cited were measured elsewhere)." if set_aside else "."
    )
    fix = (
        f"measure task accuracy on {task} with {q} and with {cfg.dtype} weights at batch {cfg.max_num_seqs}, "
        "cite the drop, and state the drop the task tolerates (slo.max-accuracy-drop)."
    )
    return Finding("quantization", "unjustified", reason, evidence, fix, setting)


def _accuracy_evidence(
    cfg: ServingConfig, wl: WorkloadSpec, f: Facts, key: str, served: str, baselines: set[str], label: str
) -> tuple[list, list, list, list[float], list]:
    """The workload's accuracy evidence for one accuracy-trading setting (`key`, served as `served`): measured
    with it, baseline (measured with one of `baselines`), set aside (measured elsewhere, with why); then the
    drops it shows (cited, or baseline minus served) and the accuracies measured with it."""
    quantized, baseline, set_aside = [], [], []
    for ev in wl.evidence:
        if ev.metric not in ("accuracy", "accuracy_drop"):
            continue
        why = conflicts(ev, cfg, wl, ignore={key, "max-num-seqs"} | SPEC_KEYS)
        load = ev.max_num_seqs if ev.max_num_seqs is not None else ev.batch
        if load is not None and load not in {cfg.max_num_seqs, f.running_batch_peak}:
            why.append(f"measured at batch {load}, served at {cfg.max_num_seqs}")
        theirs = _canon(ev.setting.get(key, served))
        if theirs != _canon(served) and theirs not in baselines:
            why.append(f"measured with {label}{ev.setting[key]}, not {served}")
        if why:
            set_aside.append((ev, why))
        elif theirs in baselines and ev.metric == "accuracy":
            baseline.append(ev)
        elif theirs == _canon(served):
            quantized.append(ev)
    drops = [ev.value for ev in quantized if ev.metric == "accuracy_drop"]
    q_acc = [ev for ev in quantized if ev.metric == "accuracy"]
    if not drops and q_acc and baseline:
        drops = [baseline[0].value - q_acc[0].value]
    return quantized, baseline, set_aside, drops, q_acc


def _check_kv_quantization(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """kv-cache-dtype below the model's dtype: an accuracy trade like quantized weights."""
    kv = cfg.kv_cache_dtype
    setting = cfg.knob("kv-cache-dtype", kv)
    full = cfg.model.kv_bytes(f.mean_request_tokens, f.running_batch_peak, cfg.dtype, cfg.tensor_parallel_size) / 1e9
    memory = (
        f"a {kv} KV cache holds {fmt(f.kv_bytes_per_token)} B per token: {gb(f.kv_gb_peak)} at the peak "
        f"instead of {gb(full)} in {cfg.dtype}"
    )
    task = wl.task or "this workload's task"
    quantized, baseline, set_aside, drops, _ = _accuracy_evidence(
        cfg, wl, f, "kv-cache-dtype", kv, {"auto", _canon(cfg.dtype)}, "kv-cache-dtype "
    )
    evidence = _join(
        memory,
        _cite(quantized + baseline) or f"no accuracy measured on {task} with a {kv} KV cache",
        _set_aside(set_aside),
    )
    tolerance = wl.slo.max_accuracy_drop
    if drops:
        drop = max(drops)
        if tolerance is not None and drop > tolerance:
            reason = (
                f"a {kv} KV cache costs {_points(drop)} of accuracy on {task}, more than the "
                f"{_points(tolerance)} the workload tolerates."
            )
            return Finding(
                "quantization",
                "wrong",
                reason,
                evidence,
                f"keep the KV cache in {cfg.dtype} (kv-cache-dtype auto) and find the memory "
                "elsewhere (more GPUs, a lower max-num-seqs).",
                setting,
            )
        limit = f", within the {_points(tolerance)} tolerated" if tolerance is not None else ""
        reason = f"a {kv} KV cache costs a measured {_points(drop)} of accuracy on {task} at this batch{limit}."
        fix = (
            "none." if tolerance is not None else "state the accuracy drop the task tolerates (slo.max-accuracy-drop)."
        )
        return Finding("quantization", "justified", reason, evidence, fix, setting)
    reason = (
        f"kv-cache-dtype {kv} quantizes the KV cache, an accuracy trade like quantized weights, and no "
        f"accuracy on {task} was measured with it"
        + (" (the numbers cited were measured elsewhere)." if set_aside else ".")
    )
    fix = (
        f"measure accuracy on {task} with kv-cache-dtype {kv} and with auto at batch {cfg.max_num_seqs}, cite "
        "both, and state the drop the task tolerates (slo.max-accuracy-drop); or set kv-cache-dtype auto."
    )
    return Finding("quantization", "unjustified", reason, evidence, fix, setting)


# --- 3. parallelism ---------------------------------------------------------------


def check_parallelism(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """TP x PP against the GPUs that exist, the memory the model needs, and the node boundary."""
    tp, pp, dp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size, cfg.data_parallel_size
    gpn, hw = cfg.gpus_per_node, cfg.hardware
    setting = f"tensor-parallel-size {tp} x pipeline-parallel-size {pp}" + (
        f" x data-parallel-size {dp}" if dp > 1 else ""
    )
    if cfg.expert_parallel and cfg.model.is_moe:
        setting += " with enable-expert-parallel"
    need = f.rank_weight_gb + f.kv_gb_peak
    fits_one = need <= f.capacity_gb_per_gpu
    layout = f"{cfg.nodes} node{'s' if cfg.nodes > 1 else ''} x {gpn} {hw.name}"
    memory = (
        f"{weights_line(cfg, f)} + KV cache {gb(f.kv_gb_peak)} "
        f"({f.running_batch_peak} sequences x {fmt(f.mean_request_tokens)} tokens x "
        f"{fmt(f.kv_bytes_per_token)} B/token) = {gb(need)} per replica"
        + (f", {gb(need / f.shards)} on each of its TP {tp} x PP {pp} GPUs" if f.shards > 1 else "")
        + f"; one {hw.name} holds {gb(f.capacity_gb_per_gpu)} at gpu-memory-utilization {cfg.gpu_memory_utilization}"
    )
    suggestion = _parallel_layout(need, f.capacity_gb_per_gpu, gpn, cfg.nodes, cfg.model, cfg)

    if f.gpus_used > f.gpus_available:
        reason = (
            f"{setting} needs {f.gpus_used} GPUs but the deployment has {f.gpus_available} ({layout}): "
            "the model is split over GPUs that do not exist, and vLLM will not start."
        )
        return Finding("parallelism", "wrong", reason, _join(f"{layout}", memory), suggestion, setting)
    if cfg.model.num_heads % tp:
        reason = (
            f"tensor-parallel-size {tp} does not divide the model's {cfg.model.num_heads} attention heads, "
            "so vLLM refuses to shard it."
        )
        return Finding("parallelism", "wrong", reason, memory, suggestion, setting)
    if pp > cfg.model.num_layers:
        reason = f"pipeline-parallel-size {pp} exceeds the model's {cfg.model.num_layers} layers."
        return Finding("parallelism", "wrong", reason, memory, suggestion, setting)
    if tp > gpn:
        # vLLM runs tensor parallelism across nodes (Ray or multiprocessing over the network): it starts,
        # and is slow, so without a measurement it is unjustified, not wrong.
        slower = hw.interconnect_gb_s / cfg.internode_gb_s if cfg.internode_gb_s else float("inf")
        measured = (
            [
                ev
                for ev in wl.evidence
                if ev.metric in LOAD_METRICS
                and has_slo(ev, wl)
                and ev.setting.get("tensor-parallel-size") == tp
                and not slo_break(ev, wl)
                and not conflicts(ev, cfg, wl, ignore=SPEC_KEYS)
            ]
            if wl is not None
            else []
        )
        reason = (
            f"tensor parallelism spans nodes: TP {tp} on nodes of {gpn} sends every layer's all-reduce "
            f"over the {fmt(cfg.internode_gb_s)} GB/s network instead of {fmt(hw.interconnect_gb_s)} GB/s "
            f"NVLink ({slower:.0f}x slower)"
        )
        inside = _smallest_layout(need, f.capacity_gb_per_gpu, gpn, cfg.nodes, cfg.model)
        fix = "keep tensor parallelism inside a node: " + _parallel_layout(
            need, f.capacity_gb_per_gpu, gpn, cfg.nodes, cfg.model, cfg
        )
        if measured and (inside is None or inside[0] * inside[1] >= f.shards):
            return Finding(
                "parallelism",
                "justified",
                reason + ", and the SLO measured at this layout is met.",
                _join(layout, memory, _cite(measured)),
                "none.",
                setting,
            )
        if measured and inside is not None:  # with inside None, the branch above returned
            reason += (
                f"; the SLO measured at TP {tp} is met, but tensor-parallel-size {inside[0]}"
                + (f" x pipeline-parallel-size {inside[1]}" if inside[1] > 1 else "")
                + " holds the model without crossing the network, and no measurement shows it misses the SLO."
            )
            return Finding(
                "parallelism",
                "unjustified",
                reason,
                _join(layout, memory, _cite(measured)),
                fix + f" Or cite p99 TPOT there against TP {tp} showing that only TP {tp} meets the SLO.",
                setting,
            )
        return Finding(
            "parallelism",
            "unjustified",
            reason + "; no measurement shows the SLO met this way.",
            _join(layout, memory),
            fix + f" Or cite p99 TPOT and TTFT measured at TP {tp} across nodes that meet the SLO.",
            setting,
        )
    if not f.weights_fit:
        reason = (
            f"the model does not fit: its weights alone ({gb(f.rank_weight_gb)} per replica) exceed the "
            f"{gb(f.capacity_gb_per_gpu * f.shards)} that {setting} gives."
        )
        return Finding("parallelism", "wrong", reason, memory, suggestion, setting)
    if need > f.capacity_gb_per_gpu * f.shards:
        # The weights fit; what does not is the peak's KV cache. That is a batching and memory
        # finding (gpu_memory_utilization), not a reason to call the split wrong.
        reason = (
            f"{setting} holds the {gb(f.rank_weight_gb)} of weights per replica; the KV cache that is short of the "
            f"peak is reviewed under gpu_memory_utilization."
        )
        return Finding(
            "parallelism",
            "justified",
            reason,
            memory,
            "none here; see gpu_memory_utilization for the KV cache.",
            setting,
        )

    if f.expert_parallel_size > f.shards:
        how = (
            "expert parallelism shards"
            if cfg.expert_parallel
            else "vLLM shards (tensor-parallel across the data-parallel ranks)"
        )
        reason = (
            f"{how} the experts over {f.expert_parallel_size} GPUs, so each data-parallel "
            f"rank holds {gb(f.rank_weight_gb)} of the {gb(f.weight_gb)} of weights and its peak KV cache "
            f"({gb(need)}) within {gb(f.capacity_gb_per_gpu * f.shards)}."
        )
        return Finding("parallelism", "justified", reason, _join(layout, memory), "none.", setting)
    if f.shards == 1:
        reason = f"no parallelism is needed: the model and its peak KV cache fit on one {hw.name} ({need:.1f} of {gb(f.capacity_gb_per_gpu)})."
        return Finding("parallelism", "justified", reason, memory, "none.", setting)
    # The fewest GPUs that hold weights and the peak's KV cache in a layout the review accepts
    # (TP inside a node, dividing the heads; pipeline stages across nodes).
    smaller = _smallest_layout(need, f.capacity_gb_per_gpu, gpn, cfg.nodes, cfg.model)
    fewest_layout = (1, 1) if fits_one else (smaller if smaller and smaller[0] * smaller[1] < f.shards else None)
    if fewest_layout is None:
        reason = (
            f"{f.shards}-way parallelism is needed: {gb(need)} does not fit on one {hw.name} "
            f"({gb(f.capacity_gb_per_gpu)}), and fits on {f.shards} ({gb(f.capacity_gb_per_gpu * f.shards)})."
        )
        return Finding("parallelism", "justified", reason, _join(layout, memory), "none.", setting)
    fewest = fewest_layout[0] * fewest_layout[1]

    # It fits on fewer GPUs: splitting it further must be answering a latency bottleneck someone measured.
    ours: list[Evidence] = []
    fewer: list[Evidence] = []  # measured on fewer GPUs than this layout
    set_aside: list[tuple[Evidence, list[str]]] = []
    for ev in wl.evidence:
        if ev.metric not in LOAD_METRICS:
            continue
        why = conflicts(ev, cfg, wl, ignore={"tensor-parallel-size", "pipeline-parallel-size"} | SPEC_KEYS)
        their_shards = ev.setting.get("tensor-parallel-size", tp) * ev.setting.get("pipeline-parallel-size", pp)
        if why:
            set_aside.append((ev, why))
        elif their_shards == f.shards and ("tensor-parallel-size" in ev.setting):
            ours.append(ev)
        elif their_shards < f.shards:
            fewer.append(ev)
    misses_smaller = [ev for ev in fewer if slo_break(ev, wl)]
    meets_ours = [ev for ev in ours if has_slo(ev, wl) and not slo_break(ev, wl)]
    evidence = _join(memory, _cite(ours + fewer), _set_aside(set_aside))
    if misses_smaller and meets_ours:
        where = "one GPU" if fewest == 1 else f"{fewest} GPUs"
        reason = (
            f"the model fits on {where}, but the measured SLO miss at smaller TP and the SLO met at "
            f"TP {tp} show the split buys latency the workload needs."
        )
        return Finding("parallelism", "justified", reason, evidence, "none.", setting)
    small_tp, small_pp = fewest_layout
    cost = (
        "a wider all-reduce per layer"
        if pp == 1
        else "more pipeline stages (each a hand-off between GPUs and idle time while the stages fill)"
        if tp == small_tp
        else "a wider all-reduce per layer and more pipeline stages"
    )
    if fewest == 1:
        reason = (
            f"the model fits on one {hw.name} ({need:.1f} of {gb(f.capacity_gb_per_gpu)}), so {setting} pays "
            f"{cost} for a latency bottleneck no measurement shows."
        )
    else:
        reason = (
            f"weights and the peak's KV cache ({gb(need)}) fit on {fewest} {hw.name} "
            f"({gb(f.capacity_gb_per_gpu * fewest)}), so {setting} pays {cost} for a "
            "latency bottleneck no measurement shows."
        )
    smaller_setting = f"tensor-parallel-size {small_tp}" + (
        f" x pipeline-parallel-size {small_pp}" if small_pp > 1 else ""
    )
    copies = f.shards // fewest
    serve = (
        f"serve {copies} replicas at {smaller_setting} (data parallel)"
        if copies > 1
        else f"serve one replica at {smaller_setting} on {fewest} of the GPUs"
    )
    fix = f"{serve}, or cite p99 TPOT at {smaller_setting} against {setting} showing that only {setting} meets the SLO."
    return Finding("parallelism", "unjustified", reason, evidence, fix, setting)


def weights_line(cfg: ServingConfig, f: Facts) -> str:
    """The weights one replica holds, with the expert-parallel arithmetic where it applies."""
    draft = draft_gb(cfg)
    with_draft = f" with the draft's {gb(draft)}" if draft else ""
    if f.expert_parallel_size <= cfg.tensor_parallel_size:  # no data parallelism: the experts shard as TP does
        return f"weights {gb(f.rank_weight_gb)} ({f.weight_dtype}{with_draft})"
    experts = expert_gb(cfg)
    tp = cfg.tensor_parallel_size
    # vLLM 0.32 shards the experts over TP x DP with or without expert parallelism
    # (FusedMoEParallelConfig.make, vllm/model_executor/layers/fused_moe/config.py).
    group = "expert-parallel group" if cfg.expert_parallel else "MoE tensor-parallel group (no enable-expert-parallel)"
    return (
        f"weights {gb(f.weight_gb)} ({f.weight_dtype}), of which experts {gb(experts)} sharded over the "
        f"{group} of TP {tp} x DP {cfg.data_parallel_size} = {f.expert_parallel_size} GPUs and the "
        f"rest ({gb(f.weight_gb - experts)}: attention, embeddings, dense layers) whole in each data-parallel rank: "
        f"{gb(f.weight_gb - experts)} + {gb(experts)} x {tp}/{f.expert_parallel_size}"
        + (f" + draft {gb(draft)}" if draft else "")
        + f" = {gb(f.rank_weight_gb)} per rank"
    )


def memory_savers(cfg: ServingConfig) -> list[str]:
    """What would make the model or its KV cache smaller, leaving out what is already done:
    weights already quantized (by the config or the checkpoint) are never asked to be quantized."""
    out = []
    if DTYPE_BYTES[cfg.weight_dtype] >= 2:
        out.append("quantize the weights")
    if DTYPE_BYTES[cfg.kv_cache_dtype] >= 2:
        out.append("use kv-cache-dtype fp8")
    return out


def _or(options: list[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + ", or " + options[-1]


def _smallest_layout(need: float, capacity: float, gpn: int, nodes: int, model) -> tuple[int, int] | None:
    """(TP, PP) of the fewest GPUs that hold `need`: TP inside a node (dividing the heads), PP for the rest."""
    total = gpn * nodes

    def fitting(tps, pps):
        return [
            (tp * pp, -tp, tp, pp)
            for tp in tps
            if model.num_heads % tp == 0
            for pp in pps
            if pp <= model.num_layers and tp * pp <= total and tp * pp * capacity >= need
        ]

    # The usual shape first: a power-of-two TP inside a node, one pipeline stage per node. TP divides the
    # heads and PP is at most the layers, so neither range need run past those (a config's GPU count may be
    # anything it says, and these loops must not grow with it).
    layouts = fitting([t for t in (1, 2, 4, 8, 16, 32) if t <= gpn], range(1, min(nodes, model.num_layers) + 1))
    heads, layers = max(1, model.num_heads), max(1, model.num_layers)
    layouts = layouts or fitting(range(1, min(gpn, heads) + 1), range(1, min(total, layers) + 1))
    return min(layouts)[2:] if layouts else None


def _parallel_layout(
    need: float, capacity: float, gpn: int, nodes: int, model, cfg: ServingConfig | None = None
) -> str:
    """The smallest layout that holds the model: TP inside a node (dividing the heads), PP for the rest."""
    total = gpn * nodes
    layout = _smallest_layout(need, capacity, gpn, nodes, model)
    if layout is None:
        savers = memory_savers(cfg) if cfg is not None else ["quantize the weights", "use kv-cache-dtype fp8"]
        weights = rank_weight_gb(cfg) if cfg is not None else 0.0
        if weights > total * capacity:  # a smaller batch or KV cache cannot help: the weights alone do not fit
            savers = [s for s in savers if s == "quantize the weights"]
            where = f"all {total} GPUs hold" if total > 1 else "the one GPU holds"
            return (
                f"the weights alone need {gb(weights)} and {where} {gb(total * capacity)}: "
                f"{_or(savers + ['add GPUs'])}."
            )
        return (
            f"the model needs {gb(need)} and all {total} GPUs hold {gb(total * capacity)}: "
            f"{_or(savers + ['lower max-num-seqs', 'add GPUs'])}."
        )
    tp, pp = layout
    gpus = tp * pp
    if pp == 1:
        replicas = total // tp
        more = (
            f"; the {total} GPUs then serve {replicas} replicas (data-parallel-size {replicas})" if replicas > 1 else ""
        )
        return f"use tensor-parallel-size {tp}, the smallest that holds {gb(need)} at {gb(capacity)} per GPU{more}."
    where = "inside one node" if gpus <= gpn else "inside each node, pipeline stages across nodes"
    return (
        f"use tensor-parallel-size {tp} and pipeline-parallel-size {pp} ({where}): {gpus} GPUs hold "
        f"{gb(need)} at {gb(capacity)} each."
    )


# --- 4. speculative decoding -------------------------------------------------------


def _compute_note(f: Facts) -> str:
    """Which tensor-core peak the ridge uses, where it is not the 16-bit one (W8A8 FP8 or INT8, FP4)."""
    return f" dense {f.compute_dtype.upper()}" if f.compute_dtype in ("fp8", "int8", "fp4") else ""


def _moe_ridge_note(f: Facts) -> str:
    """For a mixture of experts: the factor that moves its ridge (every expert read, the routed ones computed)."""
    total = f.decoder_params_b or f.num_params_b
    if f.active_params_b >= total or not f.active_params_b:
        return ""
    return f" x {total / f.active_params_b:.1f}, total over active parameters"


def adaptive_schedule(k: int, ridge: float, max_batch: int) -> list[list[int]]:
    """num_speculative_tokens_per_batch_size that keeps batch x (k+1) under the ridge, k falling to 0."""
    rows, low = [], 1
    for kk in range(k, 0, -1):
        high = min(int(ridge // (kk + 1)), max_batch)
        if high >= low:
            rows.append([low, high, kk])
            low = high + 1
        if low > max_batch:
            return rows
    rows.append([low, max_batch, 0])
    return rows


@dataclass(frozen=True)
class SpecEvidence:
    """Throughput and p99 TPOT cited with speculation on and off, by batch, and what was set aside."""

    pairs: dict  # batch -> metric -> "on" | "off" -> Evidence
    set_aside: list
    at_peak: dict  # pairs at the batch this deployment runs at peak (or at max-num-seqs)

    @property
    def tput(self) -> dict:
        return self.at_peak.get("output_tok_s", {})

    @property
    def tpot(self) -> dict:
        return self.at_peak.get("tpot_ms_p99", {})

    @property
    def cited(self) -> list:
        return [ev for by_metric in self.pairs.values() for by_state in by_metric.values() for ev in by_state.values()]

    @property
    def measured_pair(self) -> bool:
        return "on" in self.tput and "off" in self.tput

    def elsewhere(self) -> str:
        batches = sorted(b for b in self.pairs if "output_tok_s" in self.pairs[b])
        return f" (on and off was measured only at batch {', '.join(map(str, batches))})" if batches else ""


def spec_evidence(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> SpecEvidence:
    """The evidence: measurements of this deployment with speculation on or off, sorted by batch."""
    pairs: dict[int, dict[str, dict[str, Evidence]]] = {}
    set_aside: list[tuple[Evidence, list[str]]] = []
    for ev in wl.evidence:
        if ev.metric not in ("output_tok_s", "tpot_ms_p99"):
            continue
        why = conflicts(ev, cfg, wl, ignore=SPEC_KEYS)
        if why:
            set_aside.append((ev, why))
            continue
        batch = ev.batch if ev.batch is not None else ev.max_num_seqs
        if batch is None:
            set_aside.append((ev, ["the batch it was measured at is not stated"]))
            continue
        state = "on" if spec_state(ev, cfg) else "off"
        pairs.setdefault(batch, {}).setdefault(ev.metric, {}).setdefault(state, ev)
    at_peak: dict[str, dict[str, Evidence]] = next(
        (pairs[b] for b in (f.running_batch_peak, cfg.max_num_seqs) if b in pairs), {}
    )
    return SpecEvidence(pairs, set_aside, at_peak)


@dataclass(frozen=True)
class SpecArithmetic:
    """Tokens per verify step against the ridge, and where speculation stops paying."""

    ridge: float
    ridge_text: str
    k: int
    k_peak: int
    k_typ: int
    step_peak: int  # tokens one verify step carries at the peak batch
    crossover: int  # batch above which verification is compute-bound
    expected: float  # tokens a sequence keeps per step at the assumed acceptance
    break_even: int  # batch near which speculation stops paying (ridge x E / (k+1))
    break_even_peak: float  # the same for the k used at the peak batch
    adaptive_helps: bool  # a per-batch k would pay: load varies and the typical batch affords a draft token
    no_adaptive: str  # why a per-batch k would not help, where load varies
    adaptive_fix: str
    measure_fix: str
    tokens: str  # the evidence line


def spec_arithmetic(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> SpecArithmetic:
    """The arithmetic for the speculation in force (k = 0 where it is off)."""
    hw, ridge = cfg.hardware, f.ridge_tokens_per_step
    b_peak, b_typ = f.running_batch_peak, f.running_batch_typical
    ridge_text = (
        f"the {hw.name}'s ridge for {f.weight_dtype} weights is {fmt(ridge)} tokens per step "
        f"({fmt(f.peak_tflops or hw.peak_tflops)} TFLOP/s{_compute_note(f)} / {fmt(hw.bandwidth_gb_s)} GB/s x "
        f"{fmt(DTYPE_BYTES[f.weight_dtype])} byte{'' if DTYPE_BYTES[f.weight_dtype] == 1 else 's'} per parameter / 2"
        f"{_moe_ridge_note(f)})"
    )
    spec = cfg.spec
    if spec is None:
        return SpecArithmetic(
            ridge,
            ridge_text,
            0,
            0,
            0,
            b_peak,
            int(ridge),
            1.0,
            int(ridge),
            ridge,
            False,
            "",
            "",
            "",
            f"at batch {b_peak} a decode step carries {b_peak} tokens; {ridge_text}",
        )
    k = spec.num_speculative_tokens
    k_peak, k_typ = spec.k_at(b_peak), spec.k_at(b_typ)
    step_peak = b_peak * (k_peak + 1)
    crossover = int(ridge // (k + 1))
    # Past the ridge each verified token costs FLOPs, but a sequence still keeps E of its k+1 positions:
    # speculation makes E x ridge / (k+1) tokens per weight read against B without it, so it stops
    # paying near batch ridge x E / (k+1), not at the ridge batch (simulate.py adds the overheads).
    expected = expected_tokens_per_step(ASSUMED_ACCEPTANCE, k)
    break_even = int(ridge * expected / (k + 1))
    break_even_peak = (
        ridge * expected_tokens_per_step(ASSUMED_ACCEPTANCE, k_peak) / (k_peak + 1) if k_peak else math.inf
    )
    tokens = (
        f"at batch {b_peak} each verify step carries {b_peak} x ({k_peak}+1) = {fmt(step_peak)} tokens; "
        f"{ridge_text}, so with k={k} verification turns compute-bound above batch {crossover} and, keeping "
        f"E = {expected:.2f} of {k + 1} tokens per sequence (acceptance {ASSUMED_ACCEPTANCE} assumed; vLLM "
        f"logs yours as the mean acceptance length), stops paying near batch {break_even} "
        f"(ridge x E / (k+1): a drafter that costs nothing, without the KV reads, which push it out as the "
        f"context grows)"
    )
    if b_typ != b_peak:
        tokens += f"; at the typical batch {b_typ}: {b_typ} x ({k_typ}+1) = {fmt(b_typ * (k_typ + 1))} tokens"
    load_varies = wl.concurrency.typical != wl.concurrency.peak
    adaptive_helps = load_varies and not spec.adaptive and b_typ * 2 <= ridge < b_peak * (k + 1)
    no_adaptive = (
        f" (a per-batch k would not help: even the typical batch of {b_typ} is past the ridge with one draft token)"
        if load_varies and not adaptive_helps and not spec.adaptive
        else ""
    )
    schedule = adaptive_schedule(k, ridge, cfg.max_num_seqs)
    adaptive_fix = (
        f"where load varies from {fmt(wl.concurrency.typical)} to {fmt(wl.concurrency.peak)} requests, "
        f"let k follow the batch: num_speculative_tokens_per_batch_size: {schedule}, and measure "
        "it on and off at both loads (on some builds the speculative machinery costs throughput "
        "even at k=0)"
    )
    measure_fix = f"measure output tok/s and p99 TPOT with speculation on and off at batch {b_peak} and cite both"
    return SpecArithmetic(
        ridge,
        ridge_text,
        k,
        k_peak,
        k_typ,
        step_peak,
        crossover,
        expected,
        break_even,
        break_even_peak,
        adaptive_helps,
        no_adaptive,
        adaptive_fix,
        measure_fix,
        tokens,
    )


def check_speculative_decoding(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Tokens per verify step against the ridge point, and throughput measured on and off at this batch:
    evidence, then arithmetic, then the verdict for the case the config is in."""
    ev = spec_evidence(cfg, wl, f)
    math_ = spec_arithmetic(cfg, wl, f)
    evidence = _join(math_.tokens, _cite(ev.cited), _set_aside(ev.set_aside))
    if cfg.spec is None:
        setting = (
            cfg.knob("speculative-config", "off")
            if "speculative-config" in cfg.set_keys
            else "speculative decoding off"
        )
        return Finding("speculative_decoding", evidence=evidence, setting=setting, **spec_off_verdict(wl, f, ev, math_))
    setting = cfg.knob("speculative-config", f"{{{cfg.spec.describe()}}}")
    draft = draft_spec(cfg)
    if draft is not None and cfg.spec.method in ("eagle", "eagle3") and draft.hidden_size != cfg.model.hidden_size:
        # An EAGLE head reads the target's hidden states: its fc layer takes target_hidden_size (its own
        # hidden_size unless the config says otherwise) per auxiliary state (vllm/model_executor/models/llama_eagle3.py).
        reason = (
            f"the {cfg.spec.method} head {cfg.spec.draft_model} has hidden size {fmt(draft.hidden_size)} and "
            f"the target {cfg.model.name} {fmt(cfg.model.hidden_size)}: the head reads the target's hidden "
            "states, so it was trained for another base and cannot load against this one."
        )
        return Finding(
            "speculative_decoding",
            "wrong",
            reason,
            evidence,
            f"use an {cfg.spec.method} head trained for {cfg.model.name}, or turn speculation off.",
            setting,
        )
    if cfg.spec.draft_model and draft is None:
        evidence = _join(
            evidence,
            f"the draft {cfg.spec.draft_model} is not in the catalogue, so its weights and KV "
            "cache are not counted in the memory findings: leave room for them",
        )
    verdict = (
        spec_measured_verdict(wl, f, ev, math_) if ev.measured_pair else spec_unmeasured_verdict(cfg, f, ev, math_)
    )
    return Finding("speculative_decoding", evidence=evidence, setting=setting, **verdict)


def one_rate_for_two_throughputs(wl: WorkloadSpec) -> str | None:
    """Little's law against a workload's cited runs: one arrival rate cannot hold for two throughputs at one load.

    In flight = arrival rate x time in the system. Two runs with the same number of requests in flight whose
    throughput differs finish their requests at different rates (tok/s over mean output tokens per request).
    Flagged where the workload ties its peak qps to such runs: at its peak concurrency one run's rate is the
    stated qps (within RATE_MATCH) and another's differs from it by more than run-to-run noise. (A closed-loop
    benchmark whose rates are nowhere near the stated demand says nothing about it either way.)
    """
    mean_out = wl.output.mean
    if wl.qps is None or not mean_out:
        return None
    peak, stated = wl.concurrency.peak, wl.qps.peak
    runs = [e for e in wl.evidence if e.metric == "output_tok_s" and e.batch == peak]
    matching = [e for e in runs if abs(e.value / mean_out / stated - 1) <= RATE_MATCH]
    other = [e for e in runs if abs(e.value / mean_out / stated - 1) > THROUGHPUT_NOISE]
    if matching and other:
        batch = peak
        low, high = min(matching + other, key=lambda e: e.value), max(matching + other, key=lambda e: e.value)
        rates = (
            f" ({fmt(high.value / mean_out)} and {fmt(low.value / mean_out)} requests/s at "
            f"{fmt(mean_out)} output tokens per request)"
        )
        return (
            f"the workload states one arrival rate ({fmt(wl.qps.peak)} requests/s at peak) for runs at the same "
            f"{fmt(batch)} requests in flight that made {fmt(high.value)} and {fmt(low.value)} tok/s: by Little's law "
            f"(in flight = arrival rate x time in the system) the faster run finishes its requests sooner and so "
            f"serves more of them per second{rates}, so one rate cannot hold for both"
        )
    return None


RATE_MATCH = 0.01  # a run whose tok/s over the mean output tokens is within 1% of the stated qps ran at it


def check_cited_rates(wl: WorkloadSpec, finding: Finding) -> Finding:
    """A justified speculation finding resting on runs whose cited rates do not add up is unjustified until they do."""
    note = one_rate_for_two_throughputs(wl)
    if note is None or finding.verdict != "justified":
        return finding if note is None else replace(finding, evidence=_join(finding.evidence, note))
    return replace(
        finding,
        verdict="unjustified",
        reason=f"the measurements it rests on do not add up: {note}.",
        evidence=_join(finding.evidence, note),
        fix="cite each run's own request rate (its tok/s over the mean output tokens), or drop the qps the runs "
        "did not run at, and re-check the verdict.",
    )


def spec_off_verdict(wl: WorkloadSpec, f: Facts, ev: SpecEvidence, m: SpecArithmetic) -> dict:
    """Speculation off: justified unless it measured faster."""
    b_peak = f.running_batch_peak
    if ev.measured_pair:
        on, off = ev.tput["on"].value, ev.tput["off"].value
        if on > off * (1 + THROUGHPUT_NOISE):
            return _vrf(
                "unjustified",
                f"speculative decoding is off although it measured faster at batch {b_peak} "
                f"({fmt(on)} vs {fmt(off)} tok/s), and no reason is cited.",
                "turn it on at this batch, or cite the measurement that kept it off.",
            )
        return _vrf(
            "justified",
            f"off, and the measurement agrees: at batch {b_peak} it gives {fmt(on)} tok/s on vs {fmt(off)} tok/s off.",
            "none.",
        )
    fix = "none."
    if f.running_batch_typical < m.ridge and wl.slo.tpot_p99_ms is not None:
        fix = (
            f"none needed; at batch {f.running_batch_typical} decode is memory-bound, so if TPOT is ever short "
            "of the SLO, measure n-gram or draft speculation on and off at that batch."
        )
    return _vrf(
        "justified", "off: no verification work is added to any decode step, so there is nothing to justify.", fix
    )


def spec_measured_verdict(wl: WorkloadSpec, f: Facts, ev: SpecEvidence, m: SpecArithmetic) -> dict:
    """Speculation on, measured on and off at the peak batch: the measurement decides."""
    b_peak, b_typ = f.running_batch_peak, f.running_batch_typical
    on, off = ev.tput["on"].value, ev.tput["off"].value
    change = (on - off) / off
    on_breaks = [slo_break(e, wl) for e in (ev.tput.get("on"), ev.tpot.get("on")) if e and slo_break(e, wl)]
    off_misses_tpot = "off" in ev.tpot and slo_break(ev.tpot["off"], wl)
    on_meets_tpot = "on" in ev.tpot and not slo_break(ev.tpot["on"], wl) and has_slo(ev.tpot["on"], wl)
    if change < -THROUGHPUT_NOISE:
        if off_misses_tpot and on_meets_tpot and wl.slo.tpot_p99_ms is not None:  # has_slo: set
            return _vrf(
                "justified",
                f"it costs {-change:.0%} throughput at batch {b_peak} ({fmt(on)} vs {fmt(off)} "
                f"tok/s), but only with it on does p99 TPOT meet the {fmt(wl.slo.tpot_p99_ms)} ms SLO.",
                "none; revisit if the throughput floor tightens.",
            )
        reason = (
            f"the measurement contradicts it: at batch {b_peak} speculation gives {fmt(on)} tok/s against "
            f"{fmt(off)} tok/s off ({change:+.0%})" + (f", and {on_breaks[0]}" if on_breaks else "") + "."
        )
        fix = (
            "turn speculative decoding off at this batch"
            + (f"; {m.adaptive_fix}" if m.adaptive_helps else m.no_adaptive)
            + "."
        )
        return _vrf("wrong", reason, fix)
    if on_breaks:
        return _vrf(
            "wrong",
            f"with speculation on at batch {b_peak} the {on_breaks[0]}.",
            "re-tune k or turn it off, and re-measure against the SLO.",
        )
    if m.adaptive_helps and b_typ not in ev.pairs:
        return _vrf(
            "unjustified",
            f"measured at the peak batch {b_peak} ({fmt(on)} vs {fmt(off)} tok/s), but not at "
            f"the typical batch {b_typ} where most of the traffic runs.",
            m.adaptive_fix + ".",
        )
    return _vrf(
        "justified",
        f"measured on and off at batch {b_peak}: {fmt(on)} vs {fmt(off)} tok/s ({change:+.0%}), "
        f"consistent with {fmt(m.step_peak)} tokens per step against a ridge of {fmt(m.ridge)}.",
        "none; re-measure when the load or the draft changes.",
    )


def spec_unmeasured_verdict(cfg: ServingConfig, f: Facts, ev: SpecEvidence, m: SpecArithmetic) -> dict:
    """Speculation on with no on/off pair at the peak batch: the arithmetic decides how far it can go."""
    b_peak, hw = f.running_batch_peak, cfg.hardware
    elsewhere = ev.elsewhere()
    if m.step_peak > m.ridge and b_peak > NEAR_BREAK_EVEN * m.break_even_peak:
        reason = (
            f"at batch {b_peak} each verify step carries {fmt(m.step_peak)} tokens, {m.step_peak / m.ridge:.1f}x "
            f"the {hw.name}'s ridge of {fmt(m.ridge)}: verification is compute-bound above batch {m.crossover}, "
            f"and past the break-even near batch {m.break_even} the rejected tokens cost more than the accepted "
            f"ones save, so speculation lowers both fleet throughput and TPOT; no on/off measurement at this "
            f"batch says otherwise{elsewhere}."
        )
        fix = (
            m.adaptive_fix
            if m.adaptive_helps
            else f"turn speculative decoding off at batch {b_peak}, or {m.measure_fix}{m.no_adaptive}"
        )
        return _vrf("wrong", reason, fix + ".")
    if m.step_peak > m.ridge:
        where = (
            f"below the break-even near batch {m.break_even} speculation can still pay"
            if b_peak <= m.break_even_peak
            else f"this close to the break-even near batch {m.break_even}, overheads and the real acceptance "
            "rate decide whether it gains or loses a few percent"
        )
        reason = (
            f"at batch {b_peak} each verify step carries {fmt(m.step_peak)} tokens, past the {hw.name}'s ridge "
            f"of {fmt(m.ridge)}, so verification costs FLOPs; but {where}, and throughput with it on and off "
            f"at this batch was not measured{elsewhere}."
        )
        return _vrf("unjustified", reason, (m.adaptive_fix if m.adaptive_helps else m.measure_fix) + ".")
    if m.k_peak == 0:
        return _vrf(
            "unjustified",
            f"the schedule turns k to 0 at the peak batch {b_peak}, but whether the speculative "
            f"machinery still costs throughput there was not measured{elsewhere}.",
            m.measure_fix + ".",
        )
    return _vrf(
        "unjustified",
        f"decode is memory-bound at batch {b_peak} ({fmt(m.step_peak)} tokens per step, under "
        f"the ridge of {fmt(m.ridge)}), so speculation may well help, but throughput with it on "
        f"and off at this batch was not measured{elsewhere}.",
        m.measure_fix + ".",
    )


def _vrf(verdict: str, reason: str, fix: str) -> dict:
    """A verdict's three parts, as Finding takes them."""
    return {"verdict": verdict, "reason": reason, "fix": fix}


# --- 5. prefix caching -------------------------------------------------------------


def check_prefix_caching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Prefix caching against the shared prefix the workload states."""
    sp, mt = wl.shared_prefix, wl.multi_turn
    if sp is None and mt is None:
        raise ValueError("check_prefix_caching reviews a workload that states its shared prefix or multi-turn reuse")
    prompt = wl.prompt.typical
    shared_reuse = min(1.0, sp.fraction * sp.tokens / prompt) if prompt and sp is not None else 0.0
    setting = cfg.knob("enable-prefix-caching", str(cfg.prefix_caching).lower())
    parts = []
    if sp is not None:
        parts.append(
            f"{sp.fraction:.0%} of requests share a {fmt(sp.tokens)}-token prefix; mean prompt "
            f"{fmt(prompt)} tokens: a prefix cache skips about {shared_reuse:.0%} of prefill"
        )
    turn_reuse, what = _multi_turn_reuse(wl, f, prompt)
    if what:
        parts.append(what)
    # The session history holds any shared system prompt too, so the larger of the two, not their sum.
    reuse = max(shared_reuse, turn_reuse)
    arithmetic = "; ".join(parts)
    measured: list[Evidence] = []
    set_aside: list[tuple[Evidence, list[str]]] = []
    for ev in wl.evidence:
        if "enable-prefix-caching" not in ev.setting or ev.metric not in LOAD_METRICS:
            continue
        why = conflicts(ev, cfg, wl, ignore={"enable-prefix-caching"} | SPEC_KEYS)
        if why:
            set_aside.append((ev, why))
        else:
            measured.append(ev)
    evidence = _join(arithmetic, _cite(measured), _set_aside(set_aside))

    if cfg.prefix_caching:
        reason = (
            f"on, and the workload reuses its prefix: about {reuse:.0%} of prefill comes from the cache."
            if reuse >= PREFIX_REUSE_MATTERS
            else "on; the workload shares little prefix, and a cache miss costs next to nothing."
        )
        return Finding("prefix_caching", "justified", reason, evidence, "none.", setting)
    ttft = {
        ev.setting["enable-prefix-caching"]: ev.value for ev in measured if ev.metric in ("ttft_ms_p99", "ttft_ms_p50")
    }
    if True in ttft and False in ttft and ttft[False] <= ttft[True]:
        reason = f"off, and the measurement backs it: TTFT {fmt(ttft[False])} ms off vs {fmt(ttft[True])} ms on."
        return Finding("prefix_caching", "justified", reason, evidence, "none.", setting)
    if reuse >= PREFIX_REUSE_MATTERS:
        start = (
            f"{sp.fraction:.0%} of requests start with the same {fmt(sp.tokens)} tokens"
            if sp is not None and shared_reuse >= turn_reuse
            else f"each later turn starts with its session's {fmt(mt.carried_tokens) if mt else 0}-token history"
        )
        reason = (
            f"prefix caching is off while {start}: "
            f"every request recomputes about {reuse:.0%} of its prefill, which TTFT pays for."
        )
        fix = (
            "set enable-prefix-caching: true (keep the shared text at the very start of the prompt), "
            "then re-measure p99 TTFT."
        )
        return Finding("prefix_caching", "wrong", reason, evidence, fix, setting)
    reason = f"off; the shared prefix is {reuse:.0%} of prefill, too little for the cache to matter."
    return Finding("prefix_caching", "justified", reason, evidence, "none.", setting)


def _multi_turn_reuse(wl: WorkloadSpec, f: Facts, prompt: float) -> tuple[float, str]:
    """The share of prefill a prefix cache skips for a multi-turn chat, and the arithmetic: the later
    turns' share of requests x their carried history over the mean prompt, scaled down where the KV
    memory left over at peak cannot keep every open session's history between its turns."""
    mt = wl.multi_turn
    if mt is None or not prompt:
        return 0.0, ""
    carried = min(mt.carried_tokens, prompt)
    sessions = math.ceil((mt.sessions or wl.concurrency.peak) / max(1, f.replicas))
    hold_gb = sessions * carried * f.kv_bytes_per_token / 1e9
    spare_gb = max(0.0, f.kv_budget_gb - f.kv_gb_peak)
    kept = min(1.0, spare_gb / hold_gb) if hold_gb > 0 else 1.0
    reuse = mt.later_fraction * carried / prompt * kept
    text = (
        f"{mt.later_fraction:.0%} of requests are a later turn ({fmt(mt.turns)} turns per session) starting with "
        f"the session's {fmt(carried)}-token history; keeping {fmt(sessions)} sessions' histories between turns takes "
        f"{gb(hold_gb)} of KV cache against {gb(spare_gb)} left beside the peak's running requests"
        + (f", so about {kept:.0%} of them stay cached" if kept < 1 else "")
        + f": a prefix cache skips about {reuse:.0%} of prefill"
    )
    return reuse, text


# --- 6. max-model-len ---------------------------------------------------------------


def check_max_model_len(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """max-model-len against the workload's longest request and the KV cache it must fit in."""
    m, longest = cfg.max_model_len, f.longest_request_tokens
    setting = cfg.knob("max-model-len", f"auto ({m})" if cfg.max_model_len_auto else m)
    model_max = cfg.model.max_position_embeddings
    one_seq_gb = kv_seq_bytes(cfg, m) / 1e9
    arithmetic = (
        f"longest request {fmt(longest)} tokens ({f.longest_basis} prompt + output); "
        f"one {fmt(m)}-token sequence needs {gb(one_seq_gb)} of KV cache, the budget is "
        f"{_budget(f)} per replica; the model was trained to {fmt(model_max)} positions"
    )
    windows_off = kv_windows_off(cfg)
    if windows_off:
        arithmetic += f" ({windows_off})"
    right = _pow2_at_least(longest)

    if model_max and m > model_max:
        reason = (
            f"max-model-len {fmt(m)} is beyond the {fmt(model_max)} positions the model supports; "
            "vLLM refuses it, and past that length the output degrades."
        )
        return Finding(
            "max_model_len", "wrong", reason, arithmetic, f"set max-model-len to {fmt(min(right, model_max))}.", setting
        )
    if m < longest:
        reason = (
            f"max-model-len {fmt(m)} is shorter than the workload's longest request of {fmt(longest)} tokens "
            f"({f.longest_basis}), so vLLM rejects those requests."
        )
        fix = f"set max-model-len to {fmt(right)}."
        if model_max and right > model_max:  # no length this model supports covers them
            fix = (
                f"the model supports {fmt(model_max)} positions, fewer than those requests need: cap prompt + "
                f"output at {fmt(model_max)} tokens (max-model-len {fmt(model_max)}), or serve a longer-context model."
            )
        return Finding("max_model_len", "wrong", reason, arithmetic, fix, setting)
    if cfg.max_model_len_auto and f.kv_budget_gb > 0 and one_seq_gb > f.kv_budget_gb:
        # vLLM 0.32 fits an auto / -1 length to the KV memory at start (vllm/config/model.py, _get_and_verify_max_len).
        reason = (
            f"max-model-len auto takes the model's {fmt(m)} positions and vLLM shortens it at start to what "
            f"the {gb(f.kv_budget_gb)} KV budget holds, which is less than one {fmt(m)}-token sequence "
            f"({gb(one_seq_gb)}): the served length depends on the memory left, not on the workload."
        )
        return Finding(
            "max_model_len",
            "unjustified",
            reason,
            arithmetic,
            f"set max-model-len to {fmt(right)}, which covers every request.",
            setting,
        )
    if f.kv_budget_gb > 0 and one_seq_gb > f.kv_budget_gb:
        reason = (
            f"one {fmt(m)}-token sequence needs {gb(one_seq_gb)} of KV cache and the budget is "
            f"{gb(f.kv_budget_gb)}, so vLLM refuses to start."
        )
        return Finding(
            "max_model_len",
            "wrong",
            reason,
            arithmetic,
            f"set max-model-len to {fmt(right)}, which covers every request.",
            setting,
        )
    if m > MODEL_LEN_HEADROOM * longest:
        default = " left at the model's default" if "max-model-len" not in cfg.set_keys else ""
        reason = (
            f"max-model-len {fmt(m)}{default} is {m / longest:.0f}x the longest request of {fmt(longest)} "
            "tokens: no workload request needs it, and it lets one runaway request take "
            f"{gb(one_seq_gb)} of the {gb(f.kv_budget_gb)} KV cache."
        )
        return Finding(
            "max_model_len",
            "unjustified",
            reason,
            arithmetic,
            f"set max-model-len to {fmt(right)}, or cite the requests that need more.",
            setting,
        )
    reason = (
        f"max-model-len {fmt(m)} covers the {longest_request_words(f.longest_basis, longest)} with modest headroom."
    )
    return Finding("max_model_len", "justified", reason, arithmetic, "none.", setting)


def longest_request_words(basis: str, tokens: float) -> str:
    """The longest request in words that say what was summed: two p99s bound the p99 request, they are not it."""
    if basis == "max":
        return f"longest request of {fmt(tokens)} tokens"
    if basis == "p99":
        return (
            f"p99 prompt plus the p99 output ({fmt(tokens)} tokens, an upper bound on the p99 request: "
            "the two p99s need not fall on one request)"
        )
    return f"longest request the workload states, {fmt(tokens)} tokens ({basis} prompt + output)"


# --- 7. gpu-memory-utilization -------------------------------------------------------


def check_gpu_memory_utilization(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Whether the memory vLLM may take leaves the KV cache the peak load needs."""
    u = cfg.gpu_memory_utilization
    setting = cfg.knob("gpu-memory-utilization", u)
    total = cfg.hardware.memory_gb * f.memory_gpus
    arithmetic = (
        f"{f.memory_gpus} x {fmt(cfg.hardware.memory_gb)} GB x {u} = {gb(f.capacity_gb_per_gpu * f.memory_gpus)}, "
        f"minus weights {gb(f.rank_weight_gb)}, leaves {_budget(f)} for the KV cache; the peak needs "
        f"{gb(f.kv_gb_peak)} ({f.running_batch_peak} sequences x {fmt(f.mean_request_tokens)} tokens "
        f"in {f.kv_cache_dtype})"
    )
    if f.kv_budget_gb <= 0:
        reason = (
            f"at gpu-memory-utilization {u} the weights alone ({gb(f.rank_weight_gb)}) exceed what vLLM may use "
            f"({gb(f.capacity_gb_per_gpu * f.memory_gpus)}), leaving no KV cache at all."
        )
        return Finding(
            "gpu_memory_utilization",
            "wrong",
            reason,
            arithmetic,
            _or(
                ["split the model over more GPUs (see parallelism)"]
                + [m for m in memory_savers(cfg) if m == "quantize the weights"]
            )
            + ".",
            setting,
        )
    if f.kv_gb_peak > f.kv_budget_gb:
        needed = (f.rank_weight_gb + f.kv_gb_peak) / total
        fix = (
            f"raise gpu-memory-utilization to {math.ceil(needed * 100) / 100:.2f}"
            if needed <= 0.95
            else _or(memory_savers(cfg)[1:] + ["more GPUs per replica", "more replicas"])
            if DTYPE_BYTES[cfg.kv_cache_dtype] >= 2
            else _or(["more GPUs per replica", "more replicas"])
        )
        reason = (
            f"the KV cache budget of {gb(f.kv_budget_gb)} cannot hold the peak's {gb(f.kv_gb_peak)}, "
            "so vLLM preempts or queues requests at peak."
        )
        return Finding("gpu_memory_utilization", "wrong", reason, arithmetic, fix + ".", setting)
    reason = (
        f"gpu-memory-utilization {u} leaves {gb(f.kv_budget_gb)} of KV cache, enough for the peak's {gb(f.kv_gb_peak)}."
    )
    return Finding("gpu_memory_utilization", "justified", reason, arithmetic, "none.", setting)


# --- dtype ---------------------------------------------------------------------------

# Methods whose kernels compute in float16 (vLLM's AWQ and GPTQ configs list torch.half as their
# activation dtype): float16 there is the method's, not a choice against the checkpoint.
FP16_KERNELS = ("awq", "gptq", "squeezellm")


def fp16_on_bf16_weights(cfg: ServingConfig) -> bool:
    """--dtype float16 written against a checkpoint trained and published in bfloat16, on a GPU that
    has bfloat16 (a T4 or V100 has not: vLLM serves float16 there whatever the config says)."""
    return (
        "dtype" in cfg.set_keys
        and cfg.dtype == "float16"
        and str(cfg.model.torch_dtype).lower() == "bfloat16"
        and cfg.hardware.dtype == "bfloat16"
        and (cfg.quantization or "") not in FP16_KERNELS
    )


def check_dtype(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """float16 against a bf16-trained checkpoint: the same 2 bytes and the same tensor-core peak, but
    5 exponent bits instead of 8 (largest value 65,504 against bfloat16's 3.4e38), so weights and
    activations the model learned in bfloat16's range can overflow to inf and NaN; only an accuracy
    measured in float16 on the task shows this model does not."""
    setting = cfg.knob("dtype", "float16")
    measured, baseline, set_aside, drops, accuracies = _accuracy_evidence(
        cfg, wl, f, "dtype", "float16", {"bfloat16", "auto"}, "dtype "
    )
    arithmetic = _join(
        f"{cfg.model.name} was published in bfloat16 ({cfg.model_source}); float16 keeps 2 bytes per weight "
        f"and the {cfg.hardware.name}'s {fmt(cfg.hardware.peak_tflops)} TFLOP/s 16-bit peak, so it saves "
        "neither memory nor time, and its range ends at 65,504 (bfloat16's at 3.4e38)",
        _cite(measured + baseline),
        _set_aside(set_aside),
    )
    if accuracies or drops:
        shown = ", ".join(describe_value(ev.metric, ev.value) for ev in measured)
        reason = f"float16 was measured on {wl.task}: {shown}, so the cast is on record as safe for this task."
        return Finding("dtype", "justified", reason, arithmetic, "none.", setting)
    reason = (
        f"dtype float16 casts a checkpoint trained in bfloat16 to a narrower range, for no memory or speed "
        f"gain on the {cfg.hardware.name}, and no accuracy measured in float16 on {wl.task} shows that its "
        "activations stay finite."
    )
    return Finding(
        "dtype",
        "unjustified",
        reason,
        arithmetic,
        "serve in the checkpoint's bfloat16 (dtype auto or bfloat16), or measure accuracy on the task in float16.",
        setting,
    )


# --- 8. enforce-eager ------------------------------------------------------------------


def check_enforce_eager(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """enforce-eager turns CUDA graphs off: every decode step pays its kernel launches on the CPU."""
    setting = cfg.knob("enforce-eager", str(cfg.enforce_eager).lower())
    if not cfg.enforce_eager:
        return Finding(
            "enforce_eager",
            "justified",
            "CUDA graphs are on, vLLM's default for decode.",
            "no launch overhead added to decode steps",
            "none.",
            setting,
        )
    if cfg.hardware.name not in hardware.PRESETS and re.search(r"cpu|processor|xeon|epyc", cfg.hardware.name, re.I):
        return Finding(
            "enforce_eager",
            "justified",
            f"on a CPU ({cfg.hardware.name}) there are no CUDA graphs to turn off, so eager mode costs nothing.",
            "vLLM's CPU backend runs eagerly either way",
            "none.",
            setting,
        )
    arithmetic = (
        f"without CUDA graphs every decode step launches the kernels of all {cfg.model.num_layers} layers "
        "one by one from the CPU instead of replaying one captured graph; that launch time is paid on "
        "every output token, and weighs most at small batches, where a step's GPU work is shortest"
    )
    measured, set_aside = [], []
    for ev in wl.evidence:
        if ev.metric not in ("tpot_ms_p99", "tpot_ms_p50") or "enforce-eager" not in ev.setting:
            continue
        why = conflicts(ev, cfg, wl, ignore={"enforce-eager"} | SPEC_KEYS)
        (set_aside.append((ev, why)) if why else measured.append(ev))
    evidence = _join(arithmetic, _cite(measured), _set_aside(set_aside))
    eager = [ev for ev in measured if ev.setting.get("enforce-eager")]
    breaks = [slo_break(ev, wl) for ev in eager if slo_break(ev, wl)]
    if breaks:
        return Finding(
            "enforce_eager",
            "wrong",
            f"with CUDA graphs off the measured {breaks[0]}.",
            evidence,
            "drop enforce-eager (CUDA graphs cost start-up time and some memory, not decode time).",
            setting,
        )
    meets = [ev for ev in eager if has_slo(ev, wl) and not slo_break(ev, wl)]
    if meets:
        return Finding(
            "enforce_eager",
            "justified",
            f"CUDA graphs are off, and the measured {describe_value(meets[0].metric, meets[0].value)} "
            "with them off still meets the SLO.",
            evidence,
            "none.",
            setting,
        )
    reason = (
        "enforce-eager turns CUDA graphs off, a decode-latency cost on every token, and no TPOT measured "
        "with it on and off says the service can afford it."
    )
    return Finding(
        "enforce_eager",
        "unjustified",
        reason,
        evidence,
        "drop enforce-eager, or measure p99 TPOT with and without it and cite why graphs must stay "
        "off (start-up time, memory, a model that fails to capture).",
        setting,
    )


# --- 9. chunked prefill --------------------------------------------------------------------


def check_chunked_prefill(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Chunked prefill and its token budget: how long a step with a prefill in it takes, against TPOT and TTFT."""
    hw, budget = cfg.hardware, cfg.max_num_batched_tokens
    prompt_longest, basis = wl.prompt.longest
    setting = cfg.knob("enable-chunked-prefill", str(cfg.chunked_prefill).lower()) + (
        f", {cfg.knob('max-num-batched-tokens', budget)}" if budget else ""
    )
    # One step reads the replica's weights once and computes 2 FLOPs per active parameter per token.
    shards = f.shards
    read_ms = f.rank_weight_gb / shards / hw.bandwidth_gb_s * 1e3
    active = cfg.model.active_params / shards

    def step_ms(tokens: float) -> float:
        return max(read_ms, 2 * active * tokens / ((f.peak_tflops or hw.peak_tflops) * 1e12) * 1e3)

    if not cfg.chunked_prefill:
        longest_step = step_ms(prompt_longest + f.running_batch_peak)
        arithmetic = (
            f"with chunking off, a {fmt(prompt_longest)}-token prompt ({basis}) is prefilled in one step of "
            f"about {fmt(longest_step)} ms (2 x {fmt(f.active_params_b)}B active parameters per token on "
            f"{shards} {hw.name}), and every running request waits that step out"
        )
        if budget is not None and budget < cfg.max_model_len:
            reason = (
                f"with chunked prefill off, max-num-batched-tokens {fmt(budget)} is below max-model-len "
                f"{fmt(cfg.max_model_len)}, so vLLM refuses to start."
            )
            return Finding(
                "chunked_prefill",
                "wrong",
                reason,
                arithmetic,
                f"turn chunked prefill on, or raise max-num-batched-tokens to {fmt(cfg.max_model_len)}.",
                setting,
            )
        tpot = wl.slo.tpot_p99_ms
        if tpot is not None and longest_step > tpot:
            reason = (
                f"with chunked prefill off, one long prompt's prefill step (about {fmt(longest_step)} ms, "
                f"{longest_step / tpot:.1f}x the {fmt(tpot)} ms p99 TPOT SLO) stalls every decoding request, "
                "and no TPOT measured with chunking off shows the SLO survives it."
            )
            return Finding(
                "chunked_prefill",
                "unjustified",
                reason,
                arithmetic,
                "turn chunked prefill on (vLLM's default) with max-num-batched-tokens near "
                f"{fmt(_pow2_at_least(f.running_batch_peak + 512))}.",
                setting,
            )
        if tpot is None:
            reason = (
                "chunked prefill is off, which trades TPOT spikes for TTFT, and the workload states no "
                "TPOT SLO to weigh the trade against."
            )
            return Finding(
                "chunked_prefill",
                "unjustified",
                reason,
                arithmetic,
                "state the p99 TPOT SLO, or leave chunked prefill on (vLLM's default).",
                setting,
            )
        reason = (
            f"chunked prefill is off; the longest prefill step, about {fmt(longest_step)} ms, stays within "
            f"the {fmt(tpot)} ms p99 TPOT SLO."
        )
        return Finding("chunked_prefill", "justified", reason, arithmetic, "none.", setting)

    budget = budget or default_batched_tokens(hw)
    full = step_ms(budget)
    steps = math.ceil(prompt_longest / max(1, budget - f.running_batch_peak)) if budget > f.running_batch_peak else 0
    arithmetic = (
        f"a step with a full chunk carries {fmt(budget)} tokens: about {fmt(full)} ms (2 x "
        f"{fmt(f.active_params_b)}B active parameters per token, or one read of {gb(f.rank_weight_gb / shards)} "
        f"of weights per GPU, whichever is longer); the {fmt(prompt_longest)}-token prompt ({basis}) "
        f"takes {steps} such step{'s' if steps != 1 else ''} beside {f.running_batch_peak} decoding requests"
    )
    measured = [
        ev
        for ev in wl.evidence
        if ev.metric in ("tpot_ms_p99", "ttft_ms_p99")
        and not conflicts(ev, cfg, wl, ignore=SPEC_KEYS)
        and (ev.batch is None or at_batch(ev, cfg.max_num_seqs) or ev.batch >= f.running_batch_peak)
    ]
    evidence = _join(arithmetic, _cite(measured))
    if budget <= f.running_batch_peak:
        reason = (
            f"max-num-batched-tokens {fmt(budget)} does not cover the {f.running_batch_peak} requests decoding "
            "at peak, so decodes and prefills queue for token budget."
        )
        return Finding(
            "chunked_prefill",
            "wrong",
            reason,
            evidence,
            f"raise max-num-batched-tokens above {f.running_batch_peak} (vLLM's default on the "
            f"{hw.name} is {fmt(default_batched_tokens(hw))}).",
            setting,
        )
    prefill_ms = max(1, steps) * full
    blamed: list[str] = []
    cleared: list[str] = []
    for ev in measured:
        miss = slo_break(ev, wl)
        if miss:
            why = _chunk_cleared(ev, cfg, wl, f, full, prefill_ms, steps)
            (cleared if why else blamed).append(miss if not why else f"the measured {miss}, but {why}")
    if blamed:
        return Finding(
            "chunked_prefill",
            "wrong",
            f"at this token budget the measured {blamed[0]}.",
            evidence,
            "lower max-num-batched-tokens if TPOT misses, raise it if TTFT misses, and re-measure.",
            setting,
        )
    if cleared:  # the misses are real, and findings elsewhere; this knob is judged on its arithmetic
        measured = [ev for ev in measured if not slo_break(ev, wl)]
        finding = _chunked_budget_verdict(cfg, wl, f, budget, full, steps, measured, evidence, setting)
        return replace(finding, reason=f"{finding.reason} Not this knob's miss: {'; '.join(cleared)}.")
    return _chunked_budget_verdict(cfg, wl, f, budget, full, steps, measured, evidence, setting)


# A measured miss is the chunk's doing only where the chunk's own time is a real share of it: a
# TPOT miss when a step with a full chunk is near the TPOT SLO, a TTFT miss when the longest
# prompt's chunked prefill is near the TTFT SLO. Below half the SLO the evidence clears the budget.
CHUNK_CLEARED_SHARE = 0.5


def _chunk_cleared(
    ev: Evidence, cfg: ServingConfig, wl: WorkloadSpec, f: Facts, full: float, prefill_ms: float, steps: int
) -> str:
    """Why this measured miss is not the token budget's doing, or '' where it may be."""
    slo = wl.slo
    if (
        ev.metric == "ttft_ms_p99"
        and slo.ttft_p99_ms is not None
        and prefill_ms <= CHUNK_CLEARED_SHARE * slo.ttft_p99_ms
    ):
        queue = ""
        peak = f.peak_per_replica
        if cfg.max_num_seqs < peak:
            queue = (
                f"; max-num-seqs {cfg.max_num_seqs} against {fmt(peak)} concurrent requests leaves "
                f"{fmt(peak - cfg.max_num_seqs)} waiting for a batch slot, which is where a TTFT of "
                f"{fmt(ev.value)} ms comes from (batching)"
            )
        return (
            f"the longest prompt's prefill, {max(1, steps)} chunk{'s' if max(1, steps) != 1 else ''} of about "
            f"{fmt(full)} ms, is {fmt(prefill_ms)} ms of it: the rest is time before prefill{queue}"
        )
    if ev.metric == "tpot_ms_p99" and slo.tpot_p99_ms is not None and full <= CHUNK_CLEARED_SHARE * slo.tpot_p99_ms:
        return (
            f"even a step carrying a full chunk takes about {fmt(full)} ms, under half the {fmt(slo.tpot_p99_ms)} ms "
            "SLO: the decode step itself (its batch, its KV reads) is slow, not the prefill beside it"
        )
    return ""


def _chunked_budget_verdict(
    cfg: ServingConfig,
    wl: WorkloadSpec,
    f: Facts,
    budget: int,
    full: float,
    steps: int,
    measured: list,
    evidence: str,
    setting: str,
) -> Finding:
    """The token budget judged on its arithmetic and the measurements that meet the SLO."""
    tpot, ttft = wl.slo.tpot_p99_ms, wl.slo.ttft_p99_ms
    ridge = f.ridge_tokens_per_step
    if wl.slo.throughput_tok_s is not None and budget < ridge:
        # A step's weights are read once whatever it carries: below the ridge the step is memory-bound,
        # so a prefill chunk of `budget` tokens uses budget / ridge of the arithmetic the read pays for.
        reason = (
            f"the workload sets a throughput floor ({fmt(wl.slo.throughput_tok_s)} output tok/s), and "
            f"max-num-batched-tokens {fmt(budget)} sits below the {cfg.hardware.name}'s ridge of {fmt(ridge)} "
            "tokens per step: every step that carries a prefill is still memory-bound, so prefill runs at "
            f"about {budget / ridge:.0%} of the arithmetic each weight read could feed."
        )
        return Finding(
            "chunked_prefill",
            "unjustified",
            reason,
            evidence,
            f"raise max-num-batched-tokens well above the ridge (vLLM's default on the {cfg.hardware.name} is "
            f"{fmt(default_batched_tokens(cfg.hardware))}), then measure throughput and TPOT at peak.",
            setting,
        )
    if tpot is None and ttft is None:
        reason = (
            "max-num-batched-tokens sets the trade between TTFT (bigger chunks) and TPOT (smaller ones), "
            "and the workload states neither SLO."
        )
        return Finding(
            "chunked_prefill",
            "unjustified",
            reason,
            evidence,
            "state p99 TTFT and TPOT SLOs, then size max-num-batched-tokens between them.",
            setting,
        )
    if measured and all(has_slo(ev, wl) for ev in measured):
        shown = ", ".join(describe_value(ev.metric, ev.value) for ev in measured)
        reason = f"the measured {shown} at this token budget meet the SLO."
        return Finding("chunked_prefill", "justified", reason, evidence, "none.", setting)
    if tpot is not None and full > tpot:
        reason = (
            f"a step carrying a full {fmt(budget)}-token chunk takes about {fmt(full)} ms, {full / tpot:.1f}x the "
            f"{fmt(tpot)} ms p99 TPOT SLO, and no p99 TPOT measured at this budget shows the requests "
            "decoding beside long prefills still meet it."
        )
        return Finding(
            "chunked_prefill",
            "unjustified",
            reason,
            evidence,
            f"measure p99 TPOT and TTFT at max-num-batched-tokens {fmt(budget)} under peak load, or lower it "
            "until a full step fits the TPOT SLO.",
            setting,
        )
    if ttft is not None and steps * full > ttft:
        reason = (
            f"the longest prompt needs {steps} chunks of about {fmt(full)} ms, {fmt(steps * full)} ms before "
            f"its first token, past the {fmt(ttft)} ms p99 TTFT SLO."
        )
        return Finding(
            "chunked_prefill",
            "wrong",
            reason,
            evidence,
            "raise max-num-batched-tokens (TTFT falls, TPOT rises), then measure both.",
            setting,
        )
    reason = (
        f"a full {fmt(budget)}-token step (about {fmt(full)} ms) and the longest prompt's {steps} chunks fit "
        "the stated SLOs."
    )
    return Finding(
        "chunked_prefill",
        "justified",
        reason,
        evidence,
        "none; confirm with p99 TTFT and TPOT measured at peak.",
        setting,
    )


# --- flags vLLM has removed ---------------------------------------------------------


def check_removed_flags(cfg: ServingConfig) -> Finding:
    """A flag the judged vLLM no longer has stops the server at start: wrong, whatever else the config
    gets right. The judged vLLM is the one the config pins (versions.py), else vllm_flags.version():
    a flag dropped after it is no finding there, and one dropped at a release not on record is
    unjustified on an older pin."""
    judged = (cfg.doc.vllm_version if cfg.doc is not None else "") or vllm_flags.version()
    gone: list[tuple[str, str]] = []
    unsure: list[tuple[str, str]] = []
    still: list[tuple[str, str]] = []
    for name, value, line in cfg.removed_flags:
        shown = f"--{name}" + ("" if value is True else f" {value}") + (f" (line {line})" if line else "")
        lacks = vllm_flags.removed_by(name, judged)
        (gone if lacks else unsure if lacks is None else still).append((name, shown))
    whens = [f"--{n} {vllm_flags.removal(n)[0]} ({vllm_flags.removal_source(n)})" for n, _ in gone + unsure + still]
    fixes = [f"--{n}: {vllm_flags.removal(n)[1]}" for n, _ in gone + unsure + still]
    source = cfg.doc.vllm_version_source if cfg.doc is not None and cfg.doc.vllm_version_source else ""
    judged_as = f"judged as vLLM {judged}" + (f" ({source})" if source else "")
    evidence = "; ".join(whens) + f"; {judged_as}"
    setting = ", ".join(shown for _, shown in gone + unsure + still)
    if gone:
        reason = (
            f"vLLM {judged} will not start with {', '.join(s for _, s in gone)}: its argument parser "
            "rejects a flag it no longer has."
        )
        return Finding("removed_flags", "wrong", reason, evidence, "; ".join(fixes) + ".", setting)
    if unsure:
        reason = (
            f"{', '.join(s for _, s in unsure)}: vLLM {vllm_flags.version()} no longer has it, and the release "
            f"that dropped it is not on record here, so whether vLLM {judged} still starts with it is not known."
        )
        fix = "check `vllm serve --help` of the vLLM deployed; " + "; ".join(fixes) + " before upgrading."
        return Finding("removed_flags", "unjustified", reason, evidence, fix, setting)
    reason = (
        f"vLLM {judged} still has {', '.join(s for _, s in still)}; a later release drops it, so the config "
        "will not start after an upgrade past that release."
    )
    return Finding(
        "removed_flags", "justified", reason, evidence, "before upgrading: " + "; ".join(fixes) + ".", setting
    )


# --- LoRA adapters -------------------------------------------------------------------


def same_model(a: str, b: str) -> bool:
    """Two model ids name the same weights: equal ignoring the owner and case, or one catalogue entry."""
    ka, kb = modelspec.catalogue_key(a), modelspec.catalogue_key(b)
    if ka and kb:
        return ka == kb
    return a.strip().rstrip("/").split("/")[-1].lower() == b.strip().rstrip("/").split("/")[-1].lower()


def lora_memory(cfg: ServingConfig) -> str:
    shards = cfg.tensor_parallel_size * cfg.pipeline_parallel_size
    what = "attention, MLP and expert projection" if cfg.model.is_moe else "attention and MLP projection"
    whole = (
        ""
        if cfg.fully_sharded_loras or cfg.tensor_parallel_size == 1
        else "; without fully-sharded-loras one half of each is whole on every tensor-parallel GPU"
    )
    return (
        f"{cfg.knob('max-loras', cfg.max_loras)} slots x {cfg.knob('max-lora-rank', cfg.max_lora_rank)}: "
        f"{gb(lora_gb(cfg))} preallocated for adapter weights (A and B of every {what} "
        f"in {cfg.dtype}"
        + (f", {gb(lora_gb(cfg) / shards)} on each of {shards} GPUs" if shards > 1 else "")
        + f"{whole}), taken from the KV cache"
    )


def check_lora(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Every adapter named was trained on the model served, at a rank the slots hold."""
    setting = cfg.knob("enable-lora", True)
    memory = lora_memory(cfg)
    named = ", ".join(f"{a.name} ({a.path})" for a in cfg.adapters)
    evidence = _join(memory, f"adapters: {named}" if named else "no adapters named (--lora-modules)")
    wrong_base = [a for a in cfg.adapters if a.base and not same_model(a.base, cfg.model_name)]
    if wrong_base:
        a = wrong_base[0]
        reason = (
            f"adapter {a.name} was trained on {a.base} ({a.source}) but the server runs {cfg.model_name}: "
            "its matrices are shaped for another model's layers, so vLLM cannot apply it."
        )
        return Finding(
            "lora",
            "wrong",
            reason,
            evidence,
            f"serve {a.name} on {a.base}, or train an adapter on {cfg.model_name}.",
            setting,
        )
    too_wide = [a for a in cfg.adapters if a.rank > cfg.max_lora_rank]
    if too_wide:
        a = too_wide[0]
        reason = (
            f"adapter {a.name} has rank {a.rank} ({a.source}) but max-lora-rank is {cfg.max_lora_rank}: "
            "vLLM refuses to load an adapter wider than its slots."
        )
        return Finding("lora", "wrong", reason, evidence, f"set max-lora-rank to at least {a.rank}.", setting)
    unknown = [a for a in cfg.adapters if not a.base]
    if not cfg.adapters or unknown:
        which = ", ".join(a.name for a in unknown)
        reason = (
            "LoRA is on but no adapter is named, so nothing shows which base the adapters it will load were trained on."
            if not cfg.adapters
            else f"the base model of {which} is not on record: no adapter_config.json or base_model_name beside it."
        )
        fix = (
            'name the adapters (--lora-modules \'{"name": ..., "path": ..., "base_model_name": ...}\') so '
            "their base and rank can be checked."
        )
        return Finding("lora", "unjustified", reason, evidence, fix, setting)
    reason = (
        f"every adapter named was trained on {cfg.model_name}"
        + (f" at a rank within max-lora-rank {cfg.max_lora_rank}" if all(a.rank for a in cfg.adapters) else "")
        + f"; the {cfg.max_loras} slots take {gb(lora_gb(cfg))}."
    )
    return Finding("lora", "justified", reason, evidence, "none.", setting)


# --- benchmark-only settings -------------------------------------------------------------


def check_benchmark_settings(cfg: ServingConfig) -> Finding:
    """Settings that only make sense while benchmarking: a config carrying them is not serving production."""
    found, why = [], []
    if cfg.load_format == "dummy":
        found.append(cfg.knob("load-format", "dummy"))
        why.append("load-format dummy fills the model with random weights, so every answer is noise")
    for name, line in cfg.benchmark_flags:
        found.append(f"--{name}" + (f" (line {line})" if line else ""))
        if name == "ignore-eos":
            why.append(
                "--ignore-eos makes every request generate to its token limit, so the lengths measured "
                "are not the workload's"
            )
    reason = "benchmark-only settings: " + "; ".join(why) + "."
    return Finding(
        "benchmark_settings",
        "wrong",
        reason,
        ", ".join(found),
        "for production, remove them (load the real weights: load-format auto) and measure with the "
        "workload's own request lengths.",
        ", ".join(found),
    )
