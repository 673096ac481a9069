"""Real-world rep 2: two settings of one knob, measured on the same workload, and a conclusion.

The hand-in is the dict the grader's measured-comparison checker reads:

    {"knob": ..., "slo_metric": ..., "measurements": [record_a, record_b], "better": 0 or 1,
     "conclusion": ...}

`comparison()` fills in the records; `better` (which setting serves the SLO better) and the conclusion
(what to configure, and why) are the learner's to write, so nothing fills them in.

It has to live in the notebook as values, not as a lookup: the grader runs the
notebook on another machine, where your results store does not exist. So
`answer_source()` writes the whole dict as Python, to paste into the answer
cell, and `save()` keeps a copy next to your results store.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pprint
from pathlib import Path

from .. import provenance
from ..measurement import METRIC_DIRECTIONS, Measurement
from ..results import ResultsStore
from .common import clean

# Measurement fields an SLO can be stated in, and which way is better (the checker's list).
SLO_METRICS = METRIC_DIRECTIONS  # the metrics an SLO can name, and which way is better
SHOWN = (
    "knob",
    "knob_setting",
    "method",
    "num_speculative_tokens",
    "batch_size",
    "request_rate",
    "workload",
    "output_len",
    "output_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "acceptance_rate",
    "queue_time_ms_mean",
    "num_preemptions",
    "prefix_cache_hit_tokens",
    "backend",
    "hardware",
)


def compact(record: dict) -> dict:
    """A record without empty fields or bookkeeping, NaN as None: shorter to paste, the same to the grader."""
    required = {
        f.name
        for f in dataclasses.fields(Measurement)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return {key: value for key, value in clean(record).items() if key in required or value not in (None, "", {}, [])}


def comparison(knob: str, a: dict, b: dict, slo_metric: str, better: int | None = None, conclusion: str = "") -> dict:
    """The hand-in dict, with your two records in it. `better` and `conclusion` are your judgement: left out,
    they stay None and "" for you to fill in (the grader reads both against the records' own numbers).
    A record that is one of the course's recorded points, or that does not say which machine measured it, is
    refused here as the grader refuses it (servelab.provenance): rep 2 takes measurements of your own."""
    if slo_metric not in SLO_METRICS:
        raise ValueError(
            f"slo_metric must be one of {', '.join(SLO_METRICS)}, not {slo_metric!r}: "
            "name the Measurement field your SLO is stated in."
        )
    for label, r in (("a", a), ("b", b)):
        why = provenance.problem(r)
        if why:
            raise ValueError(f"Setting {label} cannot go into rep 2: {why}. {provenance.MEASURE_AGAIN}")
    a, b = compact(a), compact(b)
    for label, r in (("a", a), ("b", b)):
        value = r.get(slo_metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(
                f"Setting {label} has no {slo_metric} (it was not recorded for that point): "
                "measure it live with the Measure button, or state the SLO in another metric."
            )
    if a.get("workload") != b.get("workload"):
        raise ValueError(
            f"The two settings ran different workloads ({a.get('workload')} and "
            f"{b.get('workload')}): a comparison changes the knob and nothing else."
        )
    return {"knob": knob, "slo_metric": slo_metric, "measurements": [a, b], "better": better, "conclusion": conclusion}


def answer_source(value: dict, name: str = "comparison") -> str:
    """`comparison = {...}` as Python, ready to paste into the answer cell."""
    json.dumps(value, allow_nan=False)  # the grader reads plain values only: fail here, not there
    return f"{name} = " + pprint.pformat(value, width=100, sort_dicts=False)


def store_path(store: ResultsStore) -> Path:
    """Comparisons live next to the results store, in their own file, so readers of Measurements never meet one."""
    return store.path.with_name(store.path.stem + ".comparisons.jsonl")


def save(value: dict, store: ResultsStore) -> Path:
    """Append the hand-in to the comparisons file next to the results store; return its path."""
    path = store_path(store)
    ResultsStore(path).append({"record": "rep2_comparison", **value})
    return path


def table_html(a: dict, b: dict) -> str:
    """The two settings side by side, the metrics an SLO can name in bold."""
    rows = []
    for key in SHOWN:
        va, vb = a.get(key), b.get(key)
        style = " style='font-weight:bold'" if key in SLO_METRICS else ""
        rows.append(f"<tr{style}><th scope='row'>{key}</th><td>{_fmt(va)}</td><td>{_fmt(vb)}</td></tr>")
    return (
        "<table class='servelab-rep2-table'><caption>The two settings side by side</caption><thead><tr>"
        "<th scope='col'>metric</th><th scope='col'>setting a</th><th scope='col'>setting b</th></tr></thead>"
        + "".join(rows)
        + "</table>"
    )


def _fmt(v) -> str:
    if isinstance(v, float):
        return "not recorded" if not math.isfinite(v) else f"{v:,.4g}"
    return "-" if v is None else str(v)
