"""The lesson's simulated numbers: what the build fills into lesson25.py's {{ ... }} places.

Every crossover and break-even the lesson quotes comes from servelab.simulate, never typed in by hand,
each with the assumptions it rests on: the model, the GPU, the drafter, k, a and the context each
sequence attends over (its KV cache, read every step).
"""

from __future__ import annotations

import dataclasses

from servelab import hardware, modelspec, simulate

K, A = 4, 0.7  # the lesson's k and a
QUIZ_BATCH = 200  # the quiz's peak batch
CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"  # a draft model of the target's family, as the quiz's fleet runs


def _cross(row: dict) -> str:
    """A crossover as the lesson quotes it: the batch, or how far the search went without one."""
    value = row["crossover_batch"]
    if value is not None:
        return f"{value:,.0f}"
    if row["searched_up_to"] < simulate.SEARCH_BATCHES[-1]:
        return f"none up to {row['searched_up_to']:,.0f} (the largest batch that fits)"
    return f"none up to {row['searched_up_to']:,.0f}"


def _at_batch(row: dict) -> str:
    """The speedup at the quiz's batch, or that the batch's KV caches do not fit the GPU's memory."""
    if not row["fits"]:
        return f"does not fit (at most {int(row['max_batch']):,} sequences)"
    return f"{row['speedup_at_batch']:.2f}x"


def context() -> dict:
    target, h200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
    sim = simulate.default_simulator(target, h200)
    draft_spec = modelspec.from_catalogue(DRAFT)
    draft_sim = simulate.Simulator(target, h200, draft=draft_spec)
    free = {r["context_len"]: r for r in simulate.crossover_by_context(sim, CONTEXTS, K, "ngram", A, QUIZ_BATCH)}
    drafted = {
        r["context_len"]: r for r in simulate.crossover_by_context(draft_sim, CONTEXTS, K, "draft_model", A, QUIZ_BATCH)
    }
    rows = [
        f"| {c:,} | {_cross(free[c])} | {_at_batch(free[c])} | {_cross(drafted[c])} | {_at_batch(drafted[c])} |"
        for c in CONTEXTS
    ]
    first_none = next(c for c in CONTEXTS if free[c]["crossover_batch"] is None)
    short = simulate.CONTEXT_LEN
    # the prose's premises: n-gram crosses below first_none and never from it on; the draft model's
    # quiz batch loses at every context it fits up to the last one it crosses at, and 4,096 does not fit
    if any(free[c]["crossover_batch"] is None for c in CONTEXTS if c < first_none) or any(
        free[c]["crossover_batch"] is not None for c in CONTEXTS if c >= first_none
    ):
        raise SystemExit("The n-gram crossovers no longer stop at one context: rewrite the lesson's claim box.")
    draft_loses = [c for c in CONTEXTS if drafted[c]["fits"] and drafted[c]["speedup_at_batch"] < 1]
    draft_unfit = [c for c in CONTEXTS if not drafted[c]["fits"]]
    if not draft_loses or not draft_unfit or max(draft_loses) > min(draft_unfit) or 4096 not in draft_unfit:
        raise SystemExit("The draft model's batch-200 speedups no longer split as the quiz's answer says.")
    if not 0.8 < drafted[1024]["speedup_at_batch"] < 0.9 or not 0.97 < drafted[2048]["speedup_at_batch"] < 1.03:
        raise SystemExit("The quiz's fleet (1,024 tokens: a 15 % loss; 2,048: break-even) no longer holds: rewrite it.")
    on, off = sim.step(256, K, "ngram", A), sim.step(256)
    e = simulate.expected_tokens_per_step(A, K)
    # 114 -> 121, one cause at a time: the simulator's efficiencies, then the KV reads, then the overheads
    bare = dataclasses.replace(
        sim, context_len=0, step_overhead_s=0.0, layer_overhead_s=0.0, spec_overhead_s=0.0, ngram_s_per_token=0.0
    )
    with_kv = dataclasses.replace(bare, context_len=short)
    ridge = sim.hardware.ridge_tokens_per_step()
    if not sim.step(QUIZ_BATCH).bound == "compute" or not sim.step(sim.compute_bound_tokens() * 0.99).bound == "memory":
        raise SystemExit("The simulated H200 no longer turns compute-bound where the lesson says: rewrite it.")
    return {
        "sim": {
            "k": K,
            "a": A,
            "short": f"{short:,}",
            "ridge_batch": f"{sim.ridge_batch(K):.0f}",
            "ridge": f"{ridge:.0f}",
            "e": f"{e:.2f}",
            "bw_eff": f"{sim.bandwidth_efficiency:.0%}",
            "compute_eff": f"{sim.compute_efficiency:.0%}",
            "sim_ridge": f"{sim.compute_bound_tokens():.0f}",
            "sim_ridge_batch": f"{sim.compute_bound_batch(K):.0f}",
            "sim_break_even": f"{sim.compute_bound_tokens() * e / (K + 1):.0f}",
            "cross_bare": f"{bare.crossover_batch(K, 'ngram', A):.0f}",
            "cross_kv_only": f"{with_kv.crossover_batch(K, 'ngram', A):.0f}",
            "mem_util": f"{sim.gpu_memory_utilization:.0%}",
            "break_even": f"{sim.break_even_batch(K, A):.0f}",
            "cross_short": _cross(free[short]),
            "cross_512": _cross(free[512]),
            "cross_1024": _cross(free[1024]),
            "first_none": f"{first_none:,}",
            "fit_first_none": f"{int(free[first_none]['max_batch']):,}",
            "speedup_100": f"{sim.speedup(100, K, 'ngram', A):.1f}x",
            "speedup_64": f"{sim.speedup(64, K, 'ngram', A):.1f}x",
            "tpot_256_on": f"{on.tpot_ms:.1f} ms",
            "tpot_256_off": f"{off.tpot_ms:.1f} ms",
            "draft": DRAFT.split("/")[-1].removesuffix("-Instruct"),
            "draft_kv_share": f"{draft_spec.kv_bytes_per_token() / target.kv_bytes_per_token():.2f}",
            "draft_cross_short": _cross(drafted[short]),
            "draft_cross_1024": _cross(drafted[1024]),
            "draft_cross_2048": _cross(drafted[2048]),
            "draft_at_quiz_short": _at_batch(drafted[short]),
            "draft_at_quiz_1024": _at_batch(drafted[1024]),
            "draft_at_quiz_2048": _at_batch(drafted[2048]),
            "draft_loses_up_to": f"{max(draft_loses):,}",
            "draft_first_unfit": f"{min(draft_unfit):,}",
            "draft_fit_4096": f"{int(drafted[4096]['max_batch']):,}",
            "quiz_batch": QUIZ_BATCH,
            "table": "\n".join(rows),
        }
    }
