"""Held-out phrasings of the three free-text answers, graded the way the course grades them.

tests/data/grading_phrasings/*.json hold answers written from the questions, the course's data and
the physics, each with the class its writer expected: "right" (full credit for the part),
"wrong" or "non-committal" (no credit for it), "partial" (its "why" says what is missing). The
functions here put one phrasing into a whole answer (the rest of it right) and say what the
checker gave the phrased part, so tests/test_grading_fairness.py can hold every phrasing to its
class. `python tests/phrasings.py` prints the count of mis-scored phrasings per file.
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from unittest import mock

from records_helpers import LEARNER_MACHINE

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "grading_phrasings"
FILES = ("rep1", "spec_rep2", "knob_rep2", "rep3")


# Each round of phrasings was written afresh from the questions, after the checkers had been fixed for the round
# before: <name>.json is the first, <name>-2.json the second.
ROUNDS = ("", "-2")


def phrasings(name: str) -> list[dict]:
    return [
        p
        for r in ROUNDS
        if (DATA / f"{name}{r}.json").exists()
        for p in json.loads((DATA / f"{name}{r}.json").read_text())
    ]


@cache
def _records(path: str) -> list[dict]:
    return [json.loads(line) for line in (REPO / path).read_text().splitlines() if line.strip()]


def spec_records(situation: dict) -> list[dict]:
    """The spec-decode lab's recorded none / n-gram k=4 pair at the phrasing's batch (copy, 64 tokens)."""

    def one(method: str, k: int) -> dict:
        return next(
            dict(r)
            for r in _records("data/measurements/flip-cpu.jsonl")
            if r["method"] == method
            and r["num_speculative_tokens"] == k
            and r["batch_size"] == situation["batch_size"]
            and r["workload"] == "copy"
            and r["output_len"] == 64
            and r["backend"] == "local"
        )

    records = [one("none", 0), one("ngram", 4)]
    for record, measured in zip(records, situation.get("measured", [])):
        # a GPU run the learner made on a remote server: the same fields, the GPU's numbers
        record.update(measured, backend=situation["backend"])
        record["request_throughput"] = record["num_requests"] / record["elapsed_s"]
    return records


def knob_records(situation: dict) -> list[dict]:
    """The knob lab's recorded pair of settings (data/measurements/knobs-cpu.jsonl)."""
    by = {(r["knob"], r["knob_setting"]): r for r in _records("data/measurements/knobs-cpu.jsonl")}
    return [dict(by[(situation["knob"], s)]) for s in situation["settings"]]


def _key(module: str) -> dict:
    from servelab.grading import trusted

    return trusted.load_key_module(module).TESTS["rep2-test"][1]


@contextmanager
def _no_recordings():
    """The course's recordings looked up in an empty folder, for as long as the block runs."""
    from servelab import provenance

    with tempfile.TemporaryDirectory() as empty, mock.patch.object(provenance, "recordings_dir", lambda: Path(empty)):
        yield


def rep2_credited(checkers, lab: str, phrasing: dict) -> tuple[bool, float, str]:
    """(whether the conclusion earned its part, the rep's points, the feedback) for one conclusion."""
    s = phrasing["situation"]
    records = spec_records(s) if lab == "spec_rep2" else knob_records(s)
    knob = "speculative_decoding" if lab == "spec_rep2" else s["knob"]
    # The phrasings are about the conclusion: the recorded pair stands for the learner's own run of the same
    # settings, measured on their machine, so it carries their fingerprint and is not looked up among the
    # course's recordings (tests/test_grading_checkers.py holds the checker to refusing those).
    records = [dict(r, machine=LEARNER_MACHINE) for r in records]
    answer = {
        "knob": knob,
        "slo_metric": s["slo_metric"],
        "measurements": records,
        "better": s["better"],
        "conclusion": phrasing["text"],
    }
    key = _key("lab25" if lab == "spec_rep2" else "knoblab")
    with _no_recordings():
        result = checkers.measured_comparison(answer, key)
    return "- conclusion: follows from your numbers" in result.feedback, result.points, result.feedback


@cache
def audit_key() -> dict:
    from servelab.grading import keys, trusted

    case = trusted.load_key_module("lesson25").AUDIT_CASE
    return keys.knob_audit(keys.config_path(case), keys.workload_path(case), points=4)


def rep1_share(checkers, phrasing: dict) -> tuple[float, str]:
    """The share (0, 0.5 or 1) of its knob that one entry earns, the rest of the audit being the reviewer's."""
    key = audit_key()
    s = phrasing["situation"]
    verdicts = {**key["verdicts"], **{k: "wrong" for k in key["follows"]}}
    answer = {k: {"verdict": v, "because": key["reasons"][k]} for k, v in verdicts.items()}
    # a knob graded under another (gpu_memory_utilization under parallelism) is graded with that knob's entry
    knob = key["follows"].get(s["knob"], s["knob"])
    answer[knob] = {"verdict": s["verdict"], "because": phrasing["text"]}
    result = checkers.knob_audit(answer, key)
    share = key["points"] / len(key["verdicts"])
    return round(1 - (key["points"] - result.points) / share, 3), result.feedback


PLAN = {
    "change": "serving quantization float16 -> int8 on the chat fleet",
    "canary_fraction": 0.05,
    "canary_hours": 24,
    "stages": [0.05, 0.25, 0.5, 1.0],
    "notify": ["downstream eval-gate owners"],
}


def rep3_credited(checkers, phrasing: dict) -> tuple[bool, str]:
    """Whether the plan's drift metric (and its trigger, where the phrasing gives one) earned its parts."""
    s = phrasing["situation"]
    triggers = [{"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"}]
    if s.get("rollback_trigger"):
        triggers.append(s["rollback_trigger"])
    plan = {**PLAN, "metrics": s["metrics"], "rollback_triggers": triggers}
    result = checkers.rollout_plan(plan, {"points": 5})
    credited = "no-drift-metric" not in result.slips
    if s.get("rollback_trigger"):
        credited = credited and "no-drift-trigger" not in result.slips
    return credited, result.feedback


EXPECT_CREDIT = {"right": True, "wrong": False, "non-committal": False}


def grade(checkers, name: str, phrasing: dict) -> tuple[object, str]:
    """What the checker gave the phrased part: True/False (credited or not) or rep 1's share."""
    if name == "rep1":
        return rep1_share(checkers, phrasing)
    if name == "rep3":
        return rep3_credited(checkers, phrasing)
    credited, _, feedback = rep2_credited(checkers, name, phrasing)
    return credited, feedback


def expected(name: str, phrasing: dict):
    if name == "rep1":
        return {"right": 1.0, "partial": 0.5, "wrong": 0.0, "non-committal": 0.0}[phrasing["expected"]]
    return EXPECT_CREDIT.get(phrasing["expected"])


def misscored(checkers, name: str) -> list[tuple[int, dict, object]]:
    out = []
    for i, p in enumerate(phrasings(name)):
        got, _ = grade(checkers, name, p)
        want = expected(name, p)
        if want is not None and got != want:
            out.append((i, p, got))
    return out


if __name__ == "__main__":
    import importlib
    import importlib.util

    if len(sys.argv) > 1:  # a checkers.py of another version, e.g. from `git show HEAD:...`
        spec = importlib.util.spec_from_file_location("other_checkers", sys.argv[1])
        checkers = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(checkers)
    else:
        checkers = importlib.import_module("servelab.grading.checkers")
    for name in FILES:
        bad = misscored(checkers, name)
        print(f"{name}: {len(bad)} of {len(phrasings(name))} mis-scored")
        for i, p, got in bad:
            print(f"  [{i}] {p['expected']}: got {got!r}: {p['text']}")
