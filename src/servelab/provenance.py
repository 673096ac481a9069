"""Which machine measured a record, and whether it is one of the course's own recordings.

A record measured here carries its machine's fingerprint in `machine` (servelab.cpu_usage.machine_fingerprint:
CPU, cores, a hash of the host name). The course's recordings in data/measurements/ stand in where nothing can
be measured (the lab offline, nbgrader grading): the lab labels them `COURSE_MACHINE`, and the files themselves
are recognised by their content, so a recorded point copied into a hand-in is known for what it is whatever its
`machine` field says. Rep 2 asks for the learner's own measurements: `problem()` says why a record is not one.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import paths

COURSE_MACHINE = "recorded on the course's machine"
# What a run measured: two runs never agree on all of these unless one is a copy of the other.
MEASURED_FIELDS = (
    "num_requests",
    "prompt_tokens",
    "output_tokens",
    "elapsed_s",
    "output_tok_s",
    "request_throughput",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
)
MEASURE_AGAIN = (
    "Rep 2 is built from your own measurements: set the controls to each setting, click Measure, "
    "then run lab.record(...) and lab.comparison(...) again."
)


def _value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return None if not math.isfinite(float(v)) else round(float(v), 6)
    return str(v)


def digest(record: dict) -> str:
    """A digest of what a record measured (its counts, rates and latencies), blind to labels and provenance."""
    fields = {f: _value(record.get(f)) for f in MEASURED_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def recordings_dir() -> Path:
    """The course's recordings: data/measurements/ (the checkout's, or the installed package's copy)."""
    return paths.data_dir() / "measurements"


@lru_cache(maxsize=4)
def _shipped(folder: str) -> tuple[frozenset[str], frozenset[str]]:
    """(digests, timestamps) of every record in the folder's *.jsonl files."""
    digests, stamps = set(), set()
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                digests.add(digest(record))
                if record.get("timestamp"):
                    stamps.add(f"{record['timestamp']}|{record.get('hardware', '')}")
    return frozenset(digests), frozenset(stamps)


def is_shipped(record: dict, folder: Path | None = None) -> bool:
    """Whether the record is one of the course's recordings: the same measured numbers, or the same time and
    hardware (a run is taken once; a copy with one number changed is still the course's run)."""
    digests, stamps = _shipped(str(folder or recordings_dir()))
    stamp = f"{record.get('timestamp')}|{record.get('hardware', '')}"
    return digest(record) in digests or (bool(record.get("timestamp")) and stamp in stamps)


def is_course_machine(machine: Any) -> bool:
    return isinstance(machine, str) and machine.strip().lower().startswith(COURSE_MACHINE.lower())


def problem(record: dict, folder: Path | None = None) -> str | None:
    """Why the record is not a measurement of the learner's own, or None when it is one."""
    machine = record.get("machine")
    if is_course_machine(machine) or is_shipped(record, folder):
        return "it is one of the course's recorded points (data/measurements/), not a measurement of yours"
    if not isinstance(machine, str) or not machine.strip():
        return "it does not say which machine measured it (its `machine` field is empty)"
    return None
