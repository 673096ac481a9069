"""What both labs share besides the page: when live measurement is allowed, and a record as it is handed in."""

from __future__ import annotations

import math
import os


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
