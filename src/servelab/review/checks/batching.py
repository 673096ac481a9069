"""max-num-seqs against the load, the SLO and the latency measured at that batch."""

from __future__ import annotations

import math

from ..arithmetic import (
    Facts,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import describe_value, fmt, gb
from ..workload_spec import WorkloadSpec
from .common import (
    LOAD_METRICS,
    OVERSIZED_BATCH,
    SPEC_KEYS,
    _cite,
    _join,
    _pow2_at_least,
    _set_aside,
    at_batch,
    conflicts,
    has_slo,
    slo_break,
    spec_state,
)
from .engine import CHUNK_CLEARED_SHARE

# --- 1. batching ----------------------------------------------------------------


def check_batching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """max-num-seqs against concurrency and the SLO, with the latency measured at that batch.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    B, peak = cfg.scheduler.max_num_seqs, f.peak_per_replica
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
    hw, shards = cfg.deployment.hardware, max(1, f.shards)
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
