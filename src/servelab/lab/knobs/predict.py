"""Predict, then reveal: the learner's predicted effect of each knob against what was measured.

Each section of the knob lab asks, before its table, for a factor per question: a setting's value of one
metric as a multiple of the knob's baseline setting's (1 = no change, 4 = four times as much, 0.5 = half).
compare() sets each beside the result: the learner's own record of both settings under the knob's load when
they measured it, else the course machine's recording (said to be one), or the simulator where the section's
answer is simulated (said so too). A result inside the measured noise band (servelab.knobs.noise_band) is
no difference shown, and a prediction is read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ... import knobs
from ...knobs import parallel
from ...knobs.noise import NoiseBand
from .. import common
from ..common import positive_number


@dataclass(frozen=True)
class Question:
    key: str  # the prediction dict's key
    setting: str  # the setting whose value is predicted
    baseline: str  # ... as a multiple of this setting's
    metric: str  # the Measurement field
    what: str  # the metric in words
    simulated: str = ""  # a parallel.CASES name: the answer is the simulator's, at batch SIMULATED_BATCH


SIMULATED_BATCH = 8

QUESTIONS: dict[str, tuple[Question, ...]] = {
    "batching": (
        Question("max_num_seqs=4", "max_num_seqs=4", "max_num_seqs=256", "ttft_ms_p99", "p99 TTFT"),
        Question(
            "max_num_batched_tokens=256", "max_num_batched_tokens=256", "max_num_seqs=256", "ttft_ms_p99", "p99 TTFT"
        ),
    ),
    "prefix_caching": (
        Question("prefix caching on", "prefix caching on", "prefix caching off", "ttft_ms_p50", "median TTFT"),
    ),
    "precision": (
        Question("float32", "float32", "bfloat16", "output_tok_s", "output tok/s"),
        Question("W4A16 weights", "W4A16 weights", "bfloat16", "output_tok_s", "output tok/s"),
    ),
    "speculation": (
        Question("median TPOT", "n-gram k=4", "no speculation", "tpot_ms_p50", "median TPOT"),
        Question("p99 TTFT", "n-gram k=4", "no speculation", "ttft_ms_p99", "p99 TTFT"),
    ),
    "kv_cache": (Question("kv_cache=16MiB", "kv_cache=16MiB", "kv_cache=1GiB", "ttft_ms_p99", "p99 TTFT"),),
    "parallelism": (
        Question("tp=2 here", "tp=2", "tp=1", "output_tok_s", "output tok/s"),
        Question(
            "Llama-3.1-8B on 2x H100",
            "tp=2",
            "tp=1",
            "output_tok_s",
            "output tok/s",
            simulated=parallel.CASES[1][0],
        ),
    ),
}


@dataclass(frozen=True)
class Row:
    question: Question
    predicted: float | None
    result: float | None  # None: no result (the setting was refused, or nothing is measured)
    source: str  # where the result comes from, in words
    band: NoiseBand | None

    @property
    def what(self) -> str:
        q = self.question
        if q.simulated:
            return f"{q.what}, tp=2 over tp=1, {q.simulated}, batch {SIMULATED_BATCH}"
        return f"{q.what}, {q.setting} over {q.baseline}"


Find = Callable[[str], "tuple[dict | None, str]"]  # setting -> (its record, where it comes from)


def _number(prediction: dict, key: str) -> float | None:
    return positive_number(prediction, key, " (a factor: 1 = no change, 2 = twice as much, 0.5 = half)")


def compare(knob: str, prediction: dict, find: Find, band: NoiseBand | None) -> list[Row]:
    """Each of the knob's questions: the predicted factor against the measured (or simulated) one."""
    questions = QUESTIONS.get(knob)
    if questions is None:
        raise ValueError(f"No predictions for a knob named {knob!r}: choose one of {', '.join(QUESTIONS)}.")
    keys = [q.key for q in questions]
    if not isinstance(prediction, dict):
        raise ValueError("prediction should be a dict with keys " + ", ".join(repr(k) for k in keys) + ".")
    unknown = set(prediction) - set(keys)
    if unknown:
        raise ValueError(f"prediction has keys it should not: {sorted(unknown)}; use {', '.join(map(repr, keys))}.")
    rows = []
    for q in questions:
        result, source = _result(knob, q, find)
        rows.append(Row(q, _number(prediction, q.key), result, source, band))
    return rows


def _result(knob: str, q: Question, find: Find) -> tuple[float | None, str]:
    base, base_from = find(q.baseline)
    if q.simulated:
        model = next(m for where, m, *_ in parallel.CASES if where == q.simulated)
        roofline = (base or {}).get("roofline") or knobs.machine_info(str(knobs.ServerPool(size=1).model))["roofline"]
        table = parallel.simulated_rows(roofline, batches=(SIMULATED_BATCH,)).get(q.simulated)
        if not table:
            return None, f"not simulated: {parallel.refusal(model, 2)}"
        row = table[0]
        return row["tp2_tok_s"] / row["tp1_tok_s"], "simulated (servelab.simulate.tensor_parallel_table), not measured"
    if knob == "parallelism":
        why = parallel.refusal("SmolLM2-135M", 2)
        if why:
            return None, f'vLLM refuses tensor-parallel-size 2 for SmolLM2-135M: "{why}"'
    record, record_from = find(q.setting)
    if record is None or base is None:
        missing = q.setting if record is None else q.baseline
        return None, f"nothing measured or recorded for {missing} under this knob's load yet: press Measure"
    a, b = base.get(q.metric), record.get(q.metric)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return None, f"{q.metric} was not recorded for both settings"
    where = record_from if record_from == base_from else f"{q.setting} {record_from}, {q.baseline} {base_from}"
    return b / a, f"{where}: {b:.4g} against {q.baseline}'s {a:.4g}"


def _side(factor: float, band: NoiseBand | None) -> int:
    """-1 lower, 0 within the noise band (no difference shown), 1 higher."""
    if band is not None and band.inside(factor):
        return 0
    return (factor > 1) - (factor < 1)


SIDES = {-1: "lower", 0: "no difference beyond the noise band", 1: "higher"}


def verdict(row: Row) -> str:
    """Was the prediction right about the direction, and how far off was the factor."""
    if row.predicted is None:
        return "no prediction given"
    if row.result is None:
        return "no result to compare with"
    p, r = _side(row.predicted, row.band), _side(row.result, row.band)
    if p != r:
        return f"predicted {SIDES[p]}, the result was {SIDES[r]}"
    factor = row.predicted / row.result
    if 1 / 1.5 <= factor <= 1.5:
        return f"right: {SIDES[r]}, and within 1.5x of the result"
    return f"right direction ({SIDES[r]}), but {factor:.2g}x the result: {'too high' if factor > 1 else 'too low'}"


def _fmt(value: float | None, none: str) -> str:
    return none if value is None else f"{value:.3g}x"


def band_note(band: NoiseBand | None) -> str:
    if band is None:
        return "No measured noise band at hand (bench/results/noise_band.json): every difference is read as one."
    return f"Noise band: factors within {band.factor:.3g}x of 1 are no difference shown; measured from {band.provenance()}."


def table_html(rows: list[Row]) -> str:
    band = rows[0].band if rows else None
    return common.prediction_table(rows, _fmt, verdict, ("factor", "predicted"), band_note(band))


def table_text(rows: list[Row]) -> str:
    return "\n".join([*common.prediction_lines(rows, _fmt, verdict), band_note(rows[0].band if rows else None)])


class Shown(common.Shown):
    """The comparison as a notebook shows it: a table, and the same in plain text."""

    def __init__(self, rows: list[Row]):
        super().__init__(rows, table_html, table_text)
