"""Flags vLLM removed, LoRA adapters and benchmark-only settings."""

from __future__ import annotations

from ... import modelspec
from .. import vllm_flags
from ..arithmetic import (
    Facts,
    lora_gb,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import gb
from ..workload_spec import WorkloadSpec
from .common import _join

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


# --- flags newer than the release judged -----------------------------------------------


def flags_too_new(cfg: ServingConfig) -> list[tuple[str, str, str]]:
    """(shown, name, source) for each flag the config sets that the judged release did not have yet."""
    judged = cfg.doc.vllm_version if cfg.doc is not None else ""
    found = []
    for name in sorted(vllm_flags.INTRODUCED_AFTER):
        source = vllm_flags.lacked_by(name, judged)
        if source and name in cfg.set_keys:
            value = cfg.doc.data.get(name) if cfg.doc is not None and isinstance(cfg.doc.data, dict) else None
            line = cfg.doc.line((name,)) if cfg.doc is not None else None
            written = "" if value in (True, None) or isinstance(value, dict) else f" {value}"
            shown = f"--{name}" + (written if len(written) <= 40 else "")
            found.append((shown + (f" (line {line})" if line else ""), name, source))
    return found


def check_flags_too_new(cfg: ServingConfig) -> Finding:
    """A flag the pinned release did not have yet stops it at start, as a removed one does: wrong."""
    found = flags_too_new(cfg)
    judged = cfg.doc.vllm_version if cfg.doc is not None else ""
    source = cfg.doc.vllm_version_source if cfg.doc is not None else ""
    shown = ", ".join(s for s, _, _ in found)
    reason = (
        f"vLLM {judged} will not start with {shown}: the flag{'s' if len(found) > 1 else ''} came in a later "
        "release, and its argument parser rejects a flag it does not have."
    )
    evidence = "; ".join(src for _, _, src in found) + f"; judged as vLLM {judged}" + (f" ({source})" if source else "")
    fix = (
        f"upgrade the image past vLLM {judged} (and re-review as that release), or delete "
        + ", ".join(f"--{n}" for _, n, _ in found)
        + f" for vLLM {judged}."
    )
    return Finding("flags_too_new", "wrong", reason, evidence, fix, shown)


# --- settings the form never passes to vLLM ---------------------------------------------


def check_unapplied_settings(cfg: ServingConfig) -> Finding:
    """A setting written where the deploying tool never turns it into a flag (a production-stack vllmConfig
    key its chart's template does not render): vLLM starts without it, so the config says one thing and
    serves another. Wrong: the rest is reviewed as vLLM runs, without it."""
    shown = [f"{where} {value}" + (f" (line {line})" if line else "") for where, value, line in cfg.unapplied]
    reason = (
        f"{', '.join(shown)}: not applied by the chart: its template renders no flag from "
        f"{'this key' if len(shown) == 1 else 'these keys'}, so vLLM starts without "
        f"{'it' if len(shown) == 1 else 'them'} and serves its default instead."
    )
    evidence = (
        "production-stack's helm/templates/deployment-vllm-multi.yaml renders from vllmConfig only "
        "enableChunkedPrefill, enablePrefixCaching, maxModelLen, dtype, tensorParallelSize, maxNumSeqs, "
        "gpuMemoryUtilization, maxLoras, runner, convert and extraArgs (vllm-project/production-stack@a6c01db)"
    )
    fix = (
        'pass each as vLLM flags in vllmConfig.extraArgs (one list item per word: "--kv-cache-dtype", '
        '"fp8"), or delete it; the review above weighs the config without it.'
    )
    return Finding("unapplied_settings", "wrong", reason, evidence, fix, ", ".join(shown))


# --- LoRA adapters -------------------------------------------------------------------


def same_model(a: str, b: str) -> bool:
    """Two model ids name the same weights: equal ignoring the owner and case, or one catalogue entry."""
    ka, kb = modelspec.catalogue_key(a), modelspec.catalogue_key(b)
    if ka and kb:
        return ka == kb
    return a.strip().rstrip("/").split("/")[-1].lower() == b.strip().rstrip("/").split("/")[-1].lower()


def lora_memory(cfg: ServingConfig) -> str:
    shards = cfg.parallel.tensor_parallel_size * cfg.parallel.pipeline_parallel_size
    what = "attention, MLP and expert projection" if cfg.model.is_moe else "attention and MLP projection"
    whole = (
        ""
        if cfg.lora.fully_sharded_loras or cfg.parallel.tensor_parallel_size == 1
        else "; without fully-sharded-loras one half of each is whole on every tensor-parallel GPU"
    )
    return (
        f"{cfg.knob('max-loras', cfg.lora.max_loras)} slots x {cfg.knob('max-lora-rank', cfg.lora.max_lora_rank)}: "
        f"{gb(lora_gb(cfg))} preallocated for adapter weights (A and B of every {what} "
        f"in {cfg.model_config.dtype}"
        + (f", {gb(lora_gb(cfg) / shards)} on each of {shards} GPUs" if shards > 1 else "")
        + f"{whole}), taken from the KV cache"
    )


def check_lora(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Every adapter named was trained on the model served, at a rank the slots hold."""
    setting = cfg.knob("enable-lora", True)
    memory = lora_memory(cfg)
    named = ", ".join(f"{a.name} ({a.path})" for a in cfg.lora.adapters)
    evidence = _join(memory, f"adapters: {named}" if named else "no adapters named (--lora-modules)")
    wrong_base = [a for a in cfg.lora.adapters if a.base and not same_model(a.base, cfg.model_name)]
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
    too_wide = [a for a in cfg.lora.adapters if a.rank > cfg.lora.max_lora_rank]
    if too_wide:
        a = too_wide[0]
        reason = (
            f"adapter {a.name} has rank {a.rank} ({a.source}) but max-lora-rank is {cfg.lora.max_lora_rank}: "
            "vLLM refuses to load an adapter wider than its slots."
        )
        return Finding("lora", "wrong", reason, evidence, f"set max-lora-rank to at least {a.rank}.", setting)
    unknown = [a for a in cfg.lora.adapters if not a.base]
    if not cfg.lora.adapters or unknown:
        which = ", ".join(a.name for a in unknown)
        reason = (
            "LoRA is on but no adapter is named, so nothing shows which base the adapters it will load were trained on."
            if not cfg.lora.adapters
            else f"the base model of {which} is not on record: no adapter_config.json or base_model_name beside it."
        )
        fix = (
            'name the adapters (--lora-modules \'{"name": ..., "path": ..., "base_model_name": ...}\') so '
            "their base and rank can be checked."
        )
        return Finding("lora", "unjustified", reason, evidence, fix, setting)
    reason = (
        f"every adapter named was trained on {cfg.model_name}"
        + (
            f" at a rank within max-lora-rank {cfg.lora.max_lora_rank}"
            if all(a.rank for a in cfg.lora.adapters)
            else ""
        )
        + f"; the {cfg.lora.max_loras} slots take {gb(lora_gb(cfg))}."
    )
    return Finding("lora", "justified", reason, evidence, "none.", setting)


# --- benchmark-only settings -------------------------------------------------------------


def check_benchmark_settings(cfg: ServingConfig) -> Finding:
    """Settings that only make sense while benchmarking: a config carrying them is not serving production."""
    found, why = [], []
    if cfg.model_config.load_format == "dummy":
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
