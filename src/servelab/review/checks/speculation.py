"""Speculative decoding: tokens per verify step against the ridge, and the measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...hardware import DTYPE_BYTES
from ...simulate import expected_tokens_per_step
from ..arithmetic import (
    Facts,
    draft_spec,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import fmt
from ..workload_spec import Evidence, WorkloadSpec
from .common import (
    ASSUMED_ACCEPTANCE,
    NEAR_BREAK_EVEN,
    SPEC_KEYS,
    THROUGHPUT_NOISE,
    _cite,
    _join,
    _set_aside,
    conflicts,
    has_slo,
    slo_break,
    spec_state,
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
        (pairs[b] for b in (f.running_batch_peak, cfg.scheduler.max_num_seqs) if b in pairs), {}
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
    """The arithmetic for the speculation in force (k = 0 where it is off).

    One piece: it computes one record's fields in turn, each from the ones before it."""
    hw, ridge = cfg.deployment.hardware, f.ridge_tokens_per_step
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
    schedule = adaptive_schedule(k, ridge, cfg.scheduler.max_num_seqs)
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
    b_peak, hw = f.running_batch_peak, cfg.deployment.hardware
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
