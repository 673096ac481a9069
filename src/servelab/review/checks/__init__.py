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

One module per knob family (common: thresholds and evidence matching; batching; quantization;
parallelism; speculation; memory: prefix caching, max-model-len, gpu-memory-utilization, dtype;
engine: enforce-eager, chunked prefill; flags: removed flags, settings the form never passes to vLLM,
LoRA, benchmark settings); every
name stays importable from servelab.review.checks."""

from __future__ import annotations

from ..arithmetic import Facts, derive
from ..report import Finding
from ..serving import ServingConfig
from ..workload_spec import WorkloadSpec
from .batching import _capacity_fix, _tpot_diagnosis, check_batching, decode_step_ms, decode_step_note  # noqa: F401
from .common import (  # noqa: F401
    _NOUN,
    ASSUMED_ACCEPTANCE,
    CONDITIONS,
    LOAD_METRICS,
    MODEL_LEN_HEADROOM,
    NEAR_BREAK_EVEN,
    NO_SLO,
    OVERSIZED_BATCH,
    PREFIX_REUSE_MATTERS,
    SPEC_KEYS,
    THROUGHPUT_NOISE,
    _budget,
    _canon,
    _cite,
    _join,
    _points,
    _pow2_at_least,
    _same,
    _set_aside,
    at_batch,
    conflicts,
    has_slo,
    no_slo_batching,
    no_slo_speculation,
    slo_break,
    spec_state,
)
from .engine import (  # noqa: F401
    CHUNK_CLEARED_SHARE,
    _chunk_cleared,
    _chunked_budget_verdict,
    check_chunked_prefill,
    check_enforce_eager,
)
from .flags import (  # noqa: F401
    check_benchmark_settings,
    check_flags_too_new,
    check_lora,
    check_removed_flags,
    check_unapplied_settings,
    flags_too_new,
    lora_memory,
    same_model,
)
from .memory import (  # noqa: F401
    FP16_KERNELS,
    _multi_turn_reuse,
    check_dtype,
    check_gpu_memory_utilization,
    check_max_model_len,
    check_prefix_caching,
    fp16_on_bf16_weights,
    longest_request_words,
)
from .parallelism import _or, _parallel_layout, _smallest_layout, check_parallelism, memory_savers, weights_line  # noqa: F401
from .quantization import _accuracy_evidence, _check_kv_quantization, check_quantization  # noqa: F401
from .speculation import (  # noqa: F401
    RATE_MATCH,
    SpecArithmetic,
    SpecEvidence,
    _compute_note,
    _moe_ridge_note,
    _vrf,
    adaptive_schedule,
    check_cited_rates,
    check_speculative_decoding,
    one_rate_for_two_throughputs,
    spec_arithmetic,
    spec_evidence,
    spec_measured_verdict,
    spec_off_verdict,
    spec_unmeasured_verdict,
)


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
    if cfg.lora.enabled:
        findings.append(check_lora(cfg, wl, facts))
    if cfg.model_config.load_format == "dummy" or cfg.benchmark_flags:
        findings.append(check_benchmark_settings(cfg))
    if cfg.removed_flags:  # vLLM would refuse to start; everything above is still reviewed
        findings.append(check_removed_flags(cfg))
    if flags_too_new(cfg):  # the pinned release lacks them and would refuse to start
        findings.append(check_flags_too_new(cfg))
    if cfg.unapplied:  # written, but the form never passes them to vLLM: reviewed as it runs
        findings.append(check_unapplied_settings(cfg))
    return findings, facts
