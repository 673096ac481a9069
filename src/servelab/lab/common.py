"""What both labs share besides the page: when live measurement is allowed, and a record as it is handed in."""

from __future__ import annotations

import html
import math
import os
from typing import Callable


def offline_reason(environ=None) -> str:
    """Why a lab must not start an engine or a server here, or "" when it may (on a button click).

    nbgrader's autograde sets NBGRADER_EXECUTION; `make nbval` sets SERVELAB_OFFLINE=1.
    """
    env = os.environ if environ is None else environ
    if env.get("NBGRADER_EXECUTION"):
        return "nbgrader is grading this notebook"
    if env.get("SERVELAB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no"):
        return "SERVELAB_OFFLINE is set"
    return ""


def clean(record: dict) -> dict:
    """A record as a learner hands it in: no bookkeeping keys, NaN (not measured) as None."""
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v)
        for k, v in record.items()
        if not k.startswith("_")
    }


# --- predict, then reveal: what both labs do with a learner's prediction ---------------------------------------


def positive_number(prediction: dict, key: str, what: str = "") -> float | None:
    """prediction[key] as a float, None where the learner gave none; anything but a positive finite number is a
    ValueError that says what to write (`what` adds how the number reads, e.g. a factor)."""
    value = prediction.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"prediction[{key!r}] should be a positive number{what}, or None; got {value!r}.")
    return float(value)


class Shown:
    """A prediction set beside its result as a notebook shows it: the table (HTML) and the same in plain text."""

    def __init__(self, rows: list, html: Callable[[list], str], text: Callable[[list], str]):
        self.rows, self._html, self._text = rows, html, text

    def _repr_html_(self) -> str:
        return self._html(self.rows)

    def __repr__(self) -> str:
        return self._text(self.rows)


def prediction_table(rows: list, fmt: Callable, verdict: Callable, heads: tuple[str, str], note: str = "") -> str:
    """The prediction-against-result table: a row a prediction (what, predicted, result, how close, where the
    result comes from), `heads` naming the first two columns, `note` a paragraph under it."""
    body = "".join(
        f"<tr><td>{html.escape(r.what)}</td><td>{fmt(r.predicted, 'not given')}</td>"
        f"<td>{fmt(r.result, 'none')}</td><td>{html.escape(verdict(r))}</td><td>{html.escape(r.source)}</td></tr>"
        for r in rows
    )
    return (
        "<table class='servelab-prediction'><caption>Your prediction against the result</caption>"
        f"<thead><tr><th scope='col'>{heads[0]}</th><th scope='col'>{heads[1]}</th><th scope='col'>result</th>"
        "<th scope='col'>how close</th><th scope='col'>where the result comes from</th></tr></thead>"
        f"<tbody>{body}</tbody></table>" + (f"<p>{html.escape(note)}</p>" if note else "")
    )


def prediction_lines(rows: list, fmt: Callable, verdict: Callable) -> list[str]:
    """The same table in plain text, a line a row."""
    return [
        f"{r.what}: predicted {fmt(r.predicted, 'not given')}, result {fmt(r.result, 'none')} ({verdict(r)}); "
        f"{r.source}"
        for r in rows
    ]
