"""The lesson's simulated numbers: what the build fills into lesson25.py's {{ ... }} places.

Every crossover and break-even the lesson quotes comes from servelab.simulate, never typed in by hand,
each with the assumptions it rests on: the model, the GPU, the drafter, k, a and the context each
sequence attends over (its KV cache, read every step).
"""

from __future__ import annotations

from servelab import hardware, modelspec, simulate

K, A = 4, 0.7  # the lesson's k and a
QUIZ_BATCH = 200  # the quiz's peak batch
CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"  # a draft model of the target's family, as the quiz's fleet runs


def _cross(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "none up to 4,096"


def context() -> dict:
    target, h200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
    sim = simulate.default_simulator(target, h200)
    draft_sim = simulate.Simulator(target, h200, draft=modelspec.from_catalogue(DRAFT))
    free = {r["context_len"]: r for r in simulate.crossover_by_context(sim, CONTEXTS, K, "ngram", A, QUIZ_BATCH)}
    drafted = {
        r["context_len"]: r for r in simulate.crossover_by_context(draft_sim, CONTEXTS, K, "draft_model", A, QUIZ_BATCH)
    }
    rows = [
        f"| {c:,} | {_cross(free[c]['crossover_batch'])} | {free[c]['speedup_at_batch']:.2f}x | "
        f"{_cross(drafted[c]['crossover_batch'])} | {drafted[c]['speedup_at_batch']:.2f}x |"
        for c in CONTEXTS
    ]
    first_none = next(c for c in CONTEXTS if free[c]["crossover_batch"] is None)
    short = simulate.CONTEXT_LEN
    return {
        "sim": {
            "k": K,
            "a": A,
            "short": f"{short:,}",
            "ridge_batch": f"{sim.ridge_batch(K):.0f}",
            "break_even": f"{sim.break_even_batch(K, A):.0f}",
            "cross_short": _cross(free[short]["crossover_batch"]),
            "cross_512": _cross(free[512]["crossover_batch"]),
            "cross_1024": _cross(free[1024]["crossover_batch"]),
            "first_none": f"{first_none:,}",
            "speedup_100": f"{sim.speedup(100, K, 'ngram', A):.1f}x",
            "speedup_64": f"{sim.speedup(64, K, 'ngram', A):.1f}x",
            "draft": DRAFT.split("/")[-1].removesuffix("-Instruct"),
            "draft_cross_short": _cross(drafted[short]["crossover_batch"]),
            "draft_cross_1024": _cross(drafted[1024]["crossover_batch"]),
            "draft_at_quiz_short": f"{drafted[short]['speedup_at_batch']:.2f}x",
            "draft_at_quiz_1024": f"{drafted[1024]['speedup_at_batch']:.2f}x",
            "draft_at_quiz_4096": f"{drafted[4096]['speedup_at_batch']:.2f}x",
            "quiz_batch": QUIZ_BATCH,
            "table": "\n".join(rows),
        }
    }
