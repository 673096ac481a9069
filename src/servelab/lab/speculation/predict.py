"""Predict, then reveal: the learner's predicted crossovers against what this machine and the simulator show.

The spec-decode lab asks for two numbers before anything is measured: the batch where n-gram speculation
stops paying on this machine's engine, and on a simulated H200 serving Llama-3.1-8B at a context the
learner chooses. compare() sets them beside the measured crossover (from the points measured here or
recorded) and the simulated one at that context, and says by how much each prediction was off.

A crossover prediction may also be "never" (or "none", or math.inf): speculation pays at every batch there is.
That is a real answer: at a long context the simulated H200 finds no crossover in the batches whose KV caches
fit, and it is judged as right exactly there (where the result has no crossover either), and wrong where one
is found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ... import simulate
from ...measure import compare as pair_sweeps
from ...measure import crossover_batch
from .. import common
from ..common import positive_number
from .points import PointBook, Settings, Simulators

FIELDS = ("context", "crossover_this_machine", "crossover_h200")
NEVER = math.inf  # a predicted crossover of "never": speculation pays at every batch looked at
NEVER_WORDS = ("never", "none")


@dataclass(frozen=True)
class Row:
    what: str
    predicted: float | None  # NEVER: "speculation pays at every batch"
    result: float | None  # None: speculation paid (or lost) at every batch looked at
    source: str  # where the result comes from, in words


def _number(prediction: dict, key: str) -> float | None:
    return positive_number(prediction, key)


def _crossover(prediction: dict, key: str) -> float | None:
    """A predicted crossover: a positive batch size, NEVER ("never", "none", math.inf), or None (no guess)."""
    value = prediction.get(key)
    if isinstance(value, str) and value.strip().lower() in NEVER_WORDS:
        return NEVER
    if isinstance(value, float) and value == math.inf:
        return NEVER
    try:
        return _number(prediction, key)
    except ValueError:
        raise ValueError(
            f'prediction[{key!r}] should be a positive number (a batch size), "never" (speculation pays at every '
            f"batch), or None (no guess); got {value!r}."
        ) from None


def compare(prediction: dict, book: PointBook, sims: Simulators, settings: Settings | None = None) -> list[Row]:
    """The two predicted crossovers against this machine's measured one and the simulated H200's at the context."""
    if not isinstance(prediction, dict):
        raise ValueError("prediction should be a dict with keys " + ", ".join(FIELDS) + ".")
    unknown = set(prediction) - set(FIELDS)
    if unknown:
        raise ValueError(f"prediction has keys it should not: {sorted(unknown)}; use {', '.join(FIELDS)}.")
    context = int(_number(prediction, "context") or simulate.CONTEXT_LEN)
    s = replace(settings or Settings(), backend="local", method="ngram")
    base, spec = book.points(s, "none"), book.points(s, "ngram")
    rows = pair_sweeps(base.values(), spec.values())
    if not rows:  # nothing measured here yet: the course machine's recording, said to be one
        base, spec = book.recorded_points(s, "none"), book.recorded_points(s, "ngram")
        rows = pair_sweeps(base.values(), spec.values())
    measured = crossover_batch(rows) if rows else None
    if not rows:
        where = "nothing measured or recorded here yet for this workload, k and output length: press Measure"
    else:
        recorded = all(r.get("_source") == "recorded" for r in [*base.values(), *spec.values()])
        where = (
            "recorded on the course's machine (press Measure to measure yours)" if recorded else "measured here"
        ) + f", n-gram k={s.k}, {s.workload} workload, batches {', '.join(str(r.batch_size) for r in rows)}"
        if measured is None:
            where += "; speculation paid at every batch measured"
    sim, _ = sims.get("H200")
    simulated = None
    sim_where = "no simulator for the H200"
    if sim is not None:
        at = replace(sim, context_len=context)
        simulated = at.crossover_batch(s.k, "ngram", simulate.ACCEPTANCE_RATE)
        sim_where = (
            f"simulated (the H200's datasheet at {sim.bandwidth_efficiency:.0%} of its bandwidth and "
            f"{sim.compute_efficiency:.0%} of its compute, plus per-step overheads; {sim.model.name} in "
            f"{sim.resolved_dtype}), n-gram k={s.k}, "
            f"a = {simulate.ACCEPTANCE_RATE:g}, context {context:,} tokens"
            + (
                f"; speculation pays at every batch up to {at.search_limit():,.0f}"
                + (" (the largest whose KV caches fit)" if at.search_limit() < simulate.SEARCH_BATCHES[-1] else "")
                if simulated is None
                else ""
            )
        )
    return [
        Row("crossover on this machine", _crossover(prediction, "crossover_this_machine"), measured, where),
        Row(
            f"crossover on an H200 at {context:,} tokens",
            _crossover(prediction, "crossover_h200"),
            simulated,
            sim_where,
        ),
    ]


def _fmt(value: float | None, none: str) -> str:
    if value is None:
        return none
    return "never" if value == NEVER else f"{value:.3g}"


def verdict(row: Row) -> str:
    """How far off a prediction was: a factor, since a crossover is a batch size on a log scale."""
    if row.predicted is None:
        return "no prediction given"
    if row.predicted == NEVER:
        if row.result is None:
            return "right: no crossover, speculation pays at every batch looked at"
        return f"wrong: speculation stops paying near batch {row.result:.3g}"
    if row.result is None:
        return 'no crossover: speculation pays at every batch looked at (the answer was "never")'
    factor = row.predicted / row.result
    if 1 / 1.5 <= factor <= 1.5:
        return f"close: within 1.5x ({factor:.2f}x the result)"
    return f"{factor:.2g}x the result: {'too high' if factor > 1 else 'too low'}"


def table_html(rows: list[Row]) -> str:
    return common.prediction_table(rows, _fmt, verdict, ("crossover", "predicted batch"))


class Shown(common.Shown):
    """The comparison as a notebook shows it: a table, and the same in plain text."""

    def __init__(self, rows: list[Row]):
        super().__init__(rows, table_html, table_text)


def table_text(rows: list[Row]) -> str:
    return "\n".join(common.prediction_lines(rows, _fmt, verdict))
