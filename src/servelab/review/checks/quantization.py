"""Quantization of weights and KV cache against the accuracy measured on the task."""

from __future__ import annotations

from ...hardware import DTYPE_BYTES
from ..arithmetic import (
    Facts,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import fmt, gb
from ..workload_spec import WorkloadSpec
from .common import SPEC_KEYS, _canon, _cite, _join, _points, _set_aside, conflicts

# --- 2. quantization --------------------------------------------------------------


def check_quantization(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Quantized weights, or a quantized KV cache, need a measured accuracy impact on this task at this batch.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    bf16_gb = cfg.model.weight_bytes(cfg.model_config.dtype, linear_bytes=DTYPE_BYTES[cfg.model_config.dtype]) / 1e9
    kv_quantized = DTYPE_BYTES[cfg.cache.kv_cache_dtype] < DTYPE_BYTES[cfg.model_config.dtype]
    if cfg.model_config.quantization_mismatch:
        # ModelConfig._verify_quantization (vllm/config/model.py): a quantization argument that differs
        # from the checkpoint's quantization_config stops vLLM at start.
        setting = cfg.knob("quantization", cfg.model_config.quantization)
        reason = (
            f"the checkpoint is already quantized ({cfg.model_config.quantization_mismatch}, its quantization_config) and "
            f"quantization {cfg.model_config.quantization} names another method, so vLLM refuses to start."
        )
        evidence = (
            f"checkpoint quantization_config: {cfg.model_config.quantization_mismatch}; weights {gb(f.weight_gb)}"
        )
        return Finding(
            "quantization",
            "wrong",
            reason,
            evidence,
            "delete quantization: vLLM reads the checkpoint's own method.",
            setting,
        )
    if cfg.model_config.quantization is None and kv_quantized:
        return _check_kv_quantization(cfg, wl, f)
    if cfg.model_config.quantization is None:
        setting = cfg.knob("quantization", "none")
        reason = (
            f"weights are served unquantized in {cfg.model_config.weight_dtype}, and the KV cache in "
            f"{cfg.cache.kv_cache_dtype}, so there is no accuracy trade to justify."
        )
        evidence = f"weights {gb(f.weight_gb)} in {cfg.model_config.weight_dtype}"
        return Finding("quantization", "justified", reason, evidence, "none.", setting)

    q = cfg.model_config.quantization
    if cfg.model_config.quantization_source == "checkpoint":
        setting = f"quantization {q} (the checkpoint's quantization_config, {cfg.model_name})"
    elif cfg.model_config.quantization_from_name:
        setting = f"quantization {q} (from the model id {cfg.model_name})"
    else:
        setting = cfg.knob("quantization", q)
    memory = f"{q} stores weights in {cfg.model_config.weight_dtype}: {gb(f.weight_gb)} instead of {gb(bf16_gb)} in {cfg.model_config.dtype}"
    if kv_quantized:
        memory += (
            f"; the KV cache is {cfg.cache.kv_cache_dtype} too ({cfg.knob('kv-cache-dtype', cfg.cache.kv_cache_dtype)})"
        )
    what = q if not kv_quantized else f"{q} weights with the KV cache in {cfg.cache.kv_cache_dtype}"
    if cfg.model_config.quantization_source == "checkpoint" and cfg.model.native_quantization and not kv_quantized:
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
                f"serve {cfg.model_config.dtype} weights ({gb(bf16_gb)}) or try an 8-bit scheme (fp8), "
                f"measuring accuracy on {task} at the peak's batch of {f.running_batch_peak}."
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
                f"serve {cfg.model_config.dtype} weights or an 8-bit scheme and re-measure.",
                setting,
            )
        reason = f"{q} scores a measured {fmt(worst)}% on {task}, above the {fmt(floor)}% required."
        return Finding("quantization", "justified", reason, evidence, "none.", setting)

    reason = f"{what} was adopted without a measured accuracy impact on {task}" + (
        " (the numbers cited were measured elsewhere)." if set_aside else "."
    )
    fix = (
        f"measure task accuracy on {task} with {q} and with {cfg.model_config.dtype} weights at the peak's batch "
        f"of {f.running_batch_peak}, "
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
        if load is not None and load not in {cfg.scheduler.max_num_seqs, f.running_batch_peak}:
            why.append(f"measured at batch {load}, served at {cfg.scheduler.max_num_seqs}")
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
    kv = cfg.cache.kv_cache_dtype
    setting = cfg.knob("kv-cache-dtype", kv)
    full = (
        cfg.model.kv_bytes(
            f.mean_request_tokens, f.running_batch_peak, cfg.model_config.dtype, cfg.parallel.tensor_parallel_size
        )
        / 1e9
    )
    memory = (
        f"a {kv} KV cache holds {fmt(f.kv_bytes_per_token)} B per token: {gb(f.kv_gb_peak)} at the peak "
        f"instead of {gb(full)} in {cfg.model_config.dtype}"
    )
    task = wl.task or "this workload's task"
    quantized, baseline, set_aside, drops, _ = _accuracy_evidence(
        cfg, wl, f, "kv-cache-dtype", kv, {"auto", _canon(cfg.model_config.dtype)}, "kv-cache-dtype "
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
                f"keep the KV cache in {cfg.model_config.dtype} (kv-cache-dtype auto) and find the memory "
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
        f"measure accuracy on {task} with kv-cache-dtype {kv} and with auto at the peak's batch of "
        f"{f.running_batch_peak}, cite "
        "both, and state the drop the task tolerates (slo.max-accuracy-drop); or set kv-cache-dtype auto."
    )
    return Finding("quantization", "unjustified", reason, evidence, fix, setting)
