"""Tensor, pipeline, data and expert parallelism against what the model needs."""

from __future__ import annotations

from ...hardware import DTYPE_BYTES
from ..arithmetic import (
    Facts,
    draft_gb,
    expert_gb,
    rank_weight_gb,
)
from ..report import Finding
from ..serving import ServingConfig
from ..wording import fmt, gb
from ..workload_spec import Evidence, WorkloadSpec
from .common import LOAD_METRICS, SPEC_KEYS, _cite, _join, _set_aside, conflicts, has_slo, slo_break

# --- 3. parallelism ---------------------------------------------------------------


def check_parallelism(cfg: ServingConfig, wl: WorkloadSpec, f: Facts) -> Finding:
    """TP x PP against the GPUs that exist, the memory the model needs, and the node boundary.

    One piece: its verdicts are one ordered ladder over the same arithmetic (the first rung that holds
    decides), and split, the order of the rungs would live in two places."""
    tp, pp, dp = cfg.parallel.tensor_parallel_size, cfg.parallel.pipeline_parallel_size, cfg.parallel.data_parallel_size
    gpn, hw = cfg.deployment.gpus_per_node, cfg.deployment.hardware
    setting = f"tensor-parallel-size {tp} x pipeline-parallel-size {pp}" + (
        f" x data-parallel-size {dp}" if dp > 1 else ""
    )
    if cfg.parallel.expert_parallel and cfg.model.is_moe:
        setting += " with enable-expert-parallel"
    need = f.rank_weight_gb + f.kv_gb_peak
    fits_one = need <= f.capacity_gb_per_gpu
    layout = f"{cfg.deployment.nodes} node{'s' if cfg.deployment.nodes > 1 else ''} x {gpn} {hw.name}"
    memory = (
        f"{weights_line(cfg, f)} + KV cache {gb(f.kv_gb_peak)} "
        f"({f.running_batch_peak} sequences x {fmt(f.mean_request_tokens)} tokens x "
        f"{fmt(f.kv_bytes_per_token)} B/token) = {gb(need)} per replica"
        + (f", {gb(need / f.shards)} on each of its TP {tp} x PP {pp} GPUs" if f.shards > 1 else "")
        + f"; one {hw.name} holds {gb(f.capacity_gb_per_gpu)} at gpu-memory-utilization {cfg.cache.gpu_memory_utilization}"
    )
    suggestion = _parallel_layout(need, f.capacity_gb_per_gpu, gpn, cfg.deployment.nodes, cfg.model, cfg)

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
        slower = hw.interconnect_gb_s / cfg.deployment.internode_gb_s if cfg.deployment.internode_gb_s else float("inf")
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
            f"over the {fmt(cfg.deployment.internode_gb_s)} GB/s network instead of {fmt(hw.interconnect_gb_s)} GB/s "
            f"NVLink ({slower:.0f}x slower)"
        )
        inside = _smallest_layout(need, f.capacity_gb_per_gpu, gpn, cfg.deployment.nodes, cfg.model)
        fix = "keep tensor parallelism inside a node: " + _parallel_layout(
            need, f.capacity_gb_per_gpu, gpn, cfg.deployment.nodes, cfg.model, cfg
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
            if cfg.parallel.expert_parallel
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
    smaller = _smallest_layout(need, f.capacity_gb_per_gpu, gpn, cfg.deployment.nodes, cfg.model)
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
    if f.expert_parallel_size <= cfg.parallel.tensor_parallel_size:  # no data parallelism: the experts shard as TP does
        return f"weights {gb(f.rank_weight_gb)} ({f.weight_dtype}{with_draft})"
    experts = expert_gb(cfg)
    tp = cfg.parallel.tensor_parallel_size
    # vLLM 0.32 shards the experts over TP x DP with or without expert parallelism
    # (FusedMoEParallelConfig.make, vllm/model_executor/layers/fused_moe/config.py).
    group = (
        "expert-parallel group"
        if cfg.parallel.expert_parallel
        else "MoE tensor-parallel group (no enable-expert-parallel)"
    )
    return (
        f"weights {gb(f.weight_gb)} ({f.weight_dtype}), of which experts {gb(experts)} sharded over the "
        f"{group} of TP {tp} x DP {cfg.parallel.data_parallel_size} = {f.expert_parallel_size} GPUs and the "
        f"rest ({gb(f.weight_gb - experts)}: attention, embeddings, dense layers) whole in each data-parallel rank: "
        f"{gb(f.weight_gb - experts)} + {gb(experts)} x {tp}/{f.expert_parallel_size}"
        + (f" + draft {gb(draft)}" if draft else "")
        + f" = {gb(f.rank_weight_gb)} per rank"
    )


def memory_savers(cfg: ServingConfig) -> list[str]:
    """What would make the model or its KV cache smaller, leaving out what is already done:
    weights already quantized (by the config or the checkpoint) are never asked to be quantized."""
    out = []
    if DTYPE_BYTES[cfg.model_config.weight_dtype] >= 2:
        out.append("quantize the weights")
    if DTYPE_BYTES[cfg.cache.kv_cache_dtype] >= 2:
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
