"""Memory knobs: prefix caching, max-model-len, gpu-memory-utilization and dtype."""

from __future__ import annotations

import math

from ...hardware import DTYPE_BYTES
from .. import defaults
from ..arithmetic import (
    Facts,
    default_batched_tokens,
    kv_seq_bytes,
    kv_windows_off,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import describe_value, fmt, gb
from ..workload_spec import Evidence, WorkloadSpec
from .common import (
    LOAD_METRICS,
    MODEL_LEN_HEADROOM,
    PREFIX_REUSE_MATTERS,
    SPEC_KEYS,
    _budget,
    _cite,
    _join,
    _pow2_at_least,
    _set_aside,
    conflicts,
)
from .parallelism import _or, memory_savers
from .quantization import _accuracy_evidence

# --- 5. prefix caching -------------------------------------------------------------


def check_prefix_caching(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Prefix caching against the shared prefix the workload states."""
    sp, mt = wl.shared_prefix, wl.multi_turn
    if sp is None and mt is None:
        raise ValueError("check_prefix_caching reviews a workload that states its shared prefix or multi-turn reuse")
    prompt = wl.prompt.typical
    shared_reuse = min(1.0, sp.fraction * sp.tokens / prompt) if prompt and sp is not None else 0.0
    setting = cfg.knob("enable-prefix-caching", str(cfg.cache.prefix_caching).lower())
    if cfg.cache.prefix_caching_default and "enable-prefix-caching" not in cfg.set_keys:
        setting = setting.replace("(vLLM default)", f"({cfg.cache.prefix_caching_default})")
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

    if cfg.cache.prefix_caching:
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
    """max-model-len against the workload's longest request and the KV cache it must fit in.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    m, longest = cfg.model_config.max_model_len, f.longest_request_tokens
    setting = cfg.knob("max-model-len", f"auto ({m})" if cfg.model_config.max_model_len_auto else m)
    model_max = cfg.model.max_position_embeddings
    one_seq_gb = kv_seq_bytes(cfg, m) / 1e9
    arithmetic = (
        f"{_request_bound(f.longest_basis)} {fmt(longest)} tokens ({_summed(f.longest_basis)}); "
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
            f"max-model-len {fmt(m)} is shorter than the {longest_request_words(f.longest_basis, longest)}, "
            "so vLLM rejects the requests that reach it."
        )
        fix = f"set max-model-len to {fmt(right)}."
        if model_max and right > model_max:  # no length this model supports covers them
            fix = (
                f"the model supports {fmt(model_max)} positions, fewer than those requests need: cap prompt + "
                f"output at {fmt(model_max)} tokens (max-model-len {fmt(model_max)}), or serve a longer-context model."
            )
        return Finding("max_model_len", "wrong", reason, arithmetic, fix, setting)
    if cfg.model_config.max_model_len_auto and f.kv_budget_gb > 0 and one_seq_gb > f.kv_budget_gb:
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
            f"max-model-len {fmt(m)}{default} is {m / longest:.0f}x the "
            f"{longest_request_words(f.longest_basis, longest)}: no workload request needs it, and it lets one "
            "runaway request take "
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


def _request_bound(basis: str) -> str:
    """What the summed prompt + output is: the longest request only where both are maxima."""
    return "longest request" if basis == "max" else "bound on the request length"


def _summed(basis: str) -> str:
    """The two figures summed: 'p99 prompt + p99 output', or the mixed basis as the workload gives it."""
    return basis if "prompt" in basis else f"{basis} prompt + {basis} output"


def longest_request_words(basis: str, tokens: float) -> str:
    """The longest request in words that say what was summed: two p99s bound the p99 request, they are not it."""
    if basis == "max":
        return f"longest request of {fmt(tokens)} tokens"
    if basis == "p99":
        return (
            f"p99 prompt plus the p99 output ({fmt(tokens)} tokens, an upper bound on the p99 request: "
            "the two p99s need not fall on one request)"
        )
    return f"bound on the request length the workload states, {fmt(tokens)} tokens ({_summed(basis)})"


# --- 7. gpu-memory-utilization -------------------------------------------------------

# vLLM 0.32.0 sizes the KV cache at start as memory x gpu-memory-utilization less the weights, the transient
# peak of a profile run (a forward pass over max-num-batched-tokens dummy tokens, then the sampler over
# max-num-seqs rows), and, with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (its default), the CUDA graphs'
# memory measured by a trial capture (vllm/v1/worker/gpu_worker.py, determine_available_memory). It refuses to
# start when the GPU's free memory at start is below memory x gpu-memory-utilization (vllm/v1/worker/utils.py,
# request_memory): the CUDA context, NCCL's buffers and anything else on the GPU live in the rest.
# Above this setting that rest is under 5% of the GPU: AMD's MI300X guide for vLLM (ROCm/vllm
# docs/dev-docker/README.md @b309ea7) puts graph mode at 0.92 - 0.95 "to ensure adequate memory is available
# for the HIP graph", and vLLM 0.32's own default is 0.92 (vllm/config/cache.py).
UTILIZATION_CEILING = 0.95
LOGIT_BYTES = 4  # the sampler's logits are float32 (vllm/v1/sample/sampler.py)


def profile_activation_gb(cfg: ServingConfig, f: Facts) -> tuple[float, str]:
    """The profile run's activation peak on one GPU, from the model's shape, and how it was summed.

    The widest tensors of a forward pass are the MLP's: gate and up projections (2 x width) and their
    activated product (1 x width) for every token of the batch, sliced over tensor parallelism; a mixture of
    experts computes them for each routed expert of a token (plus the shared ones). The sampler then holds
    max-num-seqs rows of float32 logits over the whole vocabulary. Attention, norms and residuals are a
    few hidden-size rows per token, a small part beside these."""
    m, tp = cfg.model, cfg.parallel.tensor_parallel_size
    tokens = cfg.scheduler.max_num_batched_tokens or default_batched_tokens(cfg.deployment.hardware, f.shards)
    if m.is_moe:
        width = (m.moe_intermediate_size or m.intermediate_size) * max(m.experts_per_token, 1)
        width += m.shared_expert_intermediate_size
    else:
        width = m.intermediate_size
    act = DTYPE_BYTES.get(cfg.model_config.dtype, 2)
    mlp = tokens * 3 * width / tp * act
    logits = cfg.scheduler.max_num_seqs * m.vocab_size * LOGIT_BYTES
    words = (
        f"{fmt(tokens)} tokens x 3 x {fmt(width / tp)} MLP width x {fmt(act)} B, plus "
        f"{fmt(cfg.scheduler.max_num_seqs)} x {fmt(m.vocab_size)} float32 logits"
    )
    return (mlp + logits) / 1e9, words


def check_gpu_memory_utilization(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """Whether the memory vLLM may take leaves the KV cache the peak load needs, once vLLM has set aside its
    profile run's activations, and leaves the GPU the headroom outside it that graph capture and start need.

    One piece: its verdicts are one ordered ladder over the same memory arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    u = cfg.cache.gpu_memory_utilization
    setting = cfg.knob("gpu-memory-utilization", u)
    hw = cfg.deployment.hardware
    total = hw.memory_gb * f.memory_gpus
    act_gb, act_words = profile_activation_gb(cfg, f)
    margin_gb = act_gb * f.memory_gpus
    graphs = "" if cfg.model_config.enforce_eager else " and its CUDA graphs, which it measures at start"
    arithmetic = (
        f"{f.memory_gpus} x {fmt(hw.memory_gb)} GB x {u} = {gb(f.capacity_gb_per_gpu * f.memory_gpus)}, "
        f"minus weights {gb(f.rank_weight_gb)}, leaves {_budget(f)} for the KV cache; the peak needs "
        f"{gb(f.kv_gb_peak)} ({f.running_batch_peak} sequences x {fmt(f.mean_request_tokens)} tokens "
        f"in {f.kv_cache_dtype}); vLLM takes from it its profile run's activations, about {gb(act_gb)} per GPU "
        f"({act_words}){graphs}; {gb(hw.memory_gb * (1 - u))} per GPU is left outside for the CUDA context"
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
        needed = (f.rank_weight_gb + f.kv_gb_peak + margin_gb) / total
        reason = (
            f"the KV cache budget of {gb(f.kv_budget_gb)} cannot hold the peak's {gb(f.kv_gb_peak)}, "
            "so vLLM preempts or queues requests at peak."
        )
        return Finding("gpu_memory_utilization", "wrong", reason, arithmetic, _fit_fix(cfg, needed) + ".", setting)
    if f.kv_gb_peak > f.kv_budget_gb - margin_gb:
        needed = (f.rank_weight_gb + f.kv_gb_peak + margin_gb) / total
        reason = (
            f"the {gb(f.kv_budget_gb)} left after the weights holds the peak's {gb(f.kv_gb_peak)} only before "
            f"vLLM sets aside its profile run's activations (about {gb(margin_gb)}){graphs}: the KV cache it "
            f"allocates, about {gb(f.kv_budget_gb - margin_gb)}, is short of the peak, so vLLM preempts or "
            "queues requests at peak."
        )
        fix = _fit_fix(cfg, needed)
        if cfg.scheduler.max_num_batched_tokens:
            fix += ", or lower max-num-batched-tokens, which sizes the profile run"
        return Finding("gpu_memory_utilization", "wrong", reason, arithmetic, fix + ".", setting)
    if u > UTILIZATION_CEILING:
        needed = (f.rank_weight_gb + f.kv_gb_peak + margin_gb) / total
        reason = (
            f"gpu-memory-utilization {u} leaves {gb(hw.memory_gb * (1 - u))} per GPU outside vLLM's budget for the "
            "CUDA context, NCCL's buffers and anything else on the GPU: vLLM refuses to start when the free memory "
            f"at start is below {u} of the GPU, and a graph capture or allocation past its profile then fails with "
            "out of memory; nothing cited shows this server starting and running its peak at this setting."
        )
        fix = (
            f"lower gpu-memory-utilization to {UTILIZATION_CEILING} (vLLM's default is "
            f"{defaults.GPU_MEMORY_UTILIZATION}), which still holds the peak's {gb(f.kv_gb_peak)} after the "
            f"activations, or cite the server's start log at {u} (its KV cache size) and a load test at the peak"
            if needed <= UTILIZATION_CEILING
            else f"the peak's KV cache needs more than {UTILIZATION_CEILING} of the memory: "
            + _or(memory_savers(cfg)[1:] + ["more GPUs per replica", "more replicas"])
        )
        return Finding("gpu_memory_utilization", "unjustified", reason, arithmetic, fix + ".", setting)
    # vLLM 0.32 also takes its CUDA graphs out of the KV cache budget: determine_available_memory
    # (vllm/v1/worker/gpu_worker.py, lines 695-743 of the installed 0.32.0) sets available_kv_cache_memory_bytes
    # = requested_memory - non_kv_cache_memory - cudagraph_memory_estimate, the estimate measured by capturing
    # the first two graphs of each mode at start (GPUModelRunner.profile_cudagraph_memory, gpu_model_runner.py
    # from line 6333; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default, vllm/envs.py). servelab cannot capture them, so it states
    # the bound: the peak fits if they take under what is left. A graph's pool holds the activations of its
    # batch, at most 512 tokens by default (max_cudagraph_capture_size), a slice of the profile run's: where
    # what is left is under the profile run's activations, the graphs may well not fit, and nothing cited
    # says they do.
    spare = f.kv_budget_gb - margin_gb - f.kv_gb_peak
    if not cfg.model_config.enforce_eager and spare < margin_gb:
        reason = (
            f"the KV cache left after the profile run's activations, about {gb(f.kv_budget_gb - margin_gb)}, holds "
            f"the peak's {gb(f.kv_gb_peak)} only if the CUDA graphs vLLM captures at start take under "
            f"{gb(max(spare, 0))}: vLLM takes them from the same budget, servelab cannot measure them, and the "
            "room left is under the activations themselves, so nothing shows the peak fits."
        )
        fix = (
            f"cite the server's start log at this setting (its 'Available KV cache memory' and 'CUDA graph pool "
            f"memory' lines) showing at least {gb(f.kv_gb_peak)} of KV cache, or "
            + _fit_fix(cfg, (f.rank_weight_gb + f.kv_gb_peak + 2 * margin_gb) / total)
        )
        return Finding("gpu_memory_utilization", "unjustified", reason, arithmetic, fix + ".", setting)
    bound = (
        f"; the CUDA graphs vLLM captures at start come out of the {gb(spare)} left"
        if not cfg.model_config.enforce_eager
        else ""
    )
    reason = (
        f"gpu-memory-utilization {u} leaves {gb(f.kv_budget_gb)} of KV cache, enough for the peak's {gb(f.kv_gb_peak)} "
        f"with the profile run's activations (about {gb(margin_gb)}) set aside{bound}."
    )
    return Finding("gpu_memory_utilization", "justified", reason, arithmetic, "none.", setting)


def _fit_fix(cfg: ServingConfig, needed: float) -> str:
    """Raise the setting where that stays under the ceiling; else save memory or add GPUs."""
    if needed <= UTILIZATION_CEILING:
        return f"raise gpu-memory-utilization to {math.ceil(needed * 100) / 100:.2f}"
    if DTYPE_BYTES[cfg.cache.kv_cache_dtype] >= 2:
        return _or(memory_savers(cfg)[1:] + ["more GPUs per replica", "more replicas"])
    return _or(["more GPUs per replica", "more replicas"])


# --- dtype ---------------------------------------------------------------------------

# Methods whose kernels compute in float16 (vLLM's AWQ and GPTQ configs list torch.half as their
# activation dtype): float16 there is the method's, not a choice against the checkpoint.
FP16_KERNELS = ("awq", "gptq", "squeezellm")


def fp16_on_bf16_weights(cfg: ServingConfig) -> bool:
    """--dtype float16 written against a checkpoint trained and published in bfloat16, on a GPU that
    has bfloat16 (a T4 or V100 has not: vLLM serves float16 there whatever the config says)."""
    return (
        "dtype" in cfg.set_keys
        and cfg.model_config.dtype == "float16"
        and str(cfg.model.torch_dtype).lower() == "bfloat16"
        and cfg.deployment.hardware.dtype == "bfloat16"
        and (cfg.model_config.quantization or "") not in FP16_KERNELS
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
        f"and the {cfg.deployment.hardware.name}'s {fmt(cfg.deployment.hardware.peak_tflops)} TFLOP/s 16-bit peak, so it saves "
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
        f"gain on the {cfg.deployment.hardware.name}, and no accuracy measured in float16 on {wl.task} shows that its "
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
