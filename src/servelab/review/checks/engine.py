"""Engine knobs: enforce-eager and chunked prefill with its token budget."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from ... import hardware
from ..arithmetic import (
    Facts,
    default_batched_tokens,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import describe_value, fmt, gb
from ..workload_spec import Evidence, WorkloadSpec
from .common import SPEC_KEYS, _cite, _join, _pow2_at_least, _set_aside, at_batch, conflicts, has_slo, slo_break

# --- 8. enforce-eager ------------------------------------------------------------------


def check_enforce_eager(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """enforce-eager turns CUDA graphs off: every decode step pays its kernel launches on the CPU."""
    setting = cfg.knob("enforce-eager", str(cfg.model_config.enforce_eager).lower())
    if not cfg.model_config.enforce_eager:
        return Finding(
            "enforce_eager",
            "justified",
            "CUDA graphs are on, vLLM's default for decode.",
            "no launch overhead added to decode steps",
            "none.",
            setting,
        )
    if cfg.deployment.hardware.name not in hardware.PRESETS and re.search(
        r"cpu|processor|xeon|epyc", cfg.deployment.hardware.name, re.I
    ):
        return Finding(
            "enforce_eager",
            "justified",
            f"on a CPU ({cfg.deployment.hardware.name}) there are no CUDA graphs to turn off, so eager mode costs nothing.",
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
    """Chunked prefill and its token budget: how long a step with a prefill in it takes, against TPOT and TTFT.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    hw, budget = cfg.deployment.hardware, cfg.scheduler.max_num_batched_tokens
    prompt_longest, basis = wl.prompt.longest
    setting = cfg.knob("enable-chunked-prefill", str(cfg.scheduler.chunked_prefill).lower()) + (
        f", {cfg.knob('max-num-batched-tokens', budget)}" if budget else ""
    )
    # One step reads the replica's weights once and computes 2 FLOPs per active parameter per token.
    shards = f.shards
    read_ms = f.rank_weight_gb / shards / hw.bandwidth_gb_s * 1e3
    active = cfg.model.active_params / shards

    def step_ms(tokens: float) -> float:
        return max(read_ms, 2 * active * tokens / ((f.peak_tflops or hw.peak_tflops) * 1e12) * 1e3)

    if not cfg.scheduler.chunked_prefill:
        longest_step = step_ms(prompt_longest + f.running_batch_peak)
        arithmetic = (
            f"with chunking off, a {fmt(prompt_longest)}-token prompt ({basis}) is prefilled in one step of "
            f"about {fmt(longest_step)} ms (2 x {fmt(f.active_params_b)}B active parameters per token on "
            f"{shards} {hw.name}), and every running request waits that step out"
        )
        if budget is not None and budget < cfg.model_config.max_model_len:
            reason = (
                f"with chunked prefill off, max-num-batched-tokens {fmt(budget)} is below max-model-len "
                f"{fmt(cfg.model_config.max_model_len)}, so vLLM refuses to start."
            )
            return Finding(
                "chunked_prefill",
                "wrong",
                reason,
                arithmetic,
                f"turn chunked prefill on, or raise max-num-batched-tokens to {fmt(cfg.model_config.max_model_len)}.",
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
        and (ev.batch is None or at_batch(ev, cfg.scheduler.max_num_seqs) or ev.batch >= f.running_batch_peak)
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
        if cfg.scheduler.max_num_seqs < peak:
            queue = (
                f"; max-num-seqs {cfg.scheduler.max_num_seqs} against {fmt(peak)} concurrent requests leaves "
                f"{fmt(peak - cfg.scheduler.max_num_seqs)} waiting for a batch slot, which is where a TTFT of "
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
    """The token budget judged on its arithmetic and the measurements that meet the SLO.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    tpot, ttft = wl.slo.tpot_p99_ms, wl.slo.ttft_p99_ms
    ridge = f.ridge_tokens_per_step
    if wl.slo.throughput_tok_s is not None and budget < ridge:
        # A step's weights are read once whatever it carries: below the ridge the step is memory-bound,
        # so a prefill chunk of `budget` tokens uses budget / ridge of the arithmetic the read pays for.
        reason = (
            f"the workload sets a throughput floor ({fmt(wl.slo.throughput_tok_s)} output tok/s), and "
            f"max-num-batched-tokens {fmt(budget)} sits below the {cfg.deployment.hardware.name}'s ridge of {fmt(ridge)} "
            "tokens per step: every step that carries a prefill is still memory-bound, so prefill runs at "
            f"about {budget / ridge:.0%} of the arithmetic each weight read could feed."
        )
        return Finding(
            "chunked_prefill",
            "unjustified",
            reason,
            evidence,
            f"raise max-num-batched-tokens well above the ridge (vLLM's default on the {cfg.deployment.hardware.name} is "
            f"{fmt(default_batched_tokens(cfg.deployment.hardware))}), then measure throughput and TPOT at peak.",
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
