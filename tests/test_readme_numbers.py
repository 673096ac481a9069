"""The numbers the READMEs quote from runs are the recorded results' numbers.

README.md, grading/README.md and bench/README.md quote figures that a benchmark wrote into
bench/results/*.json or that the samples score (grading/submissions/expected.json). QUOTED says,
for each such sentence, which recorded value each of its numbers is; the test finds every one in
its README and checks it against its file, to the decimals the README shows. A figure of the
kinds runs produce (seconds per submission, a sandbox's cost, a report's seconds, a sample's
score in the samples table) that QUOTED does not cover fails the scan below it: add it to QUOTED
with the value it comes from, or take it out of the README.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
READMES = ("README.md", "grading/README.md", "bench/README.md")
EXPECTED = "grading/submissions/expected.json"
N = r"(-?\d+(?:\.\d+)?)"  # one quoted number
W = r"\s+"  # a README line may break anywhere between words

# (README, a pattern whose groups are quoted numbers, [(results file, path of the value in it), one per group])
QUOTED: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "README.md",
        rf"takes{W}{N}{W}s{W}each{W}on{W}the{W}quiet{W}machine",
        [("bench/results/grading.json", "seconds_per_submission")],
    ),
    (
        "README.md",
        rf"the{W}sandbox{W}itself{W}costs{W}nothing{W}measurable,{W}{N}{W}s",
        [("bench/results/grading.json", "sandbox_cost_seconds_per_submission")],
    ),
    (
        "README.md",
        rf"{N}{W}s{W}sandboxed{W}against{W}{N}{W}s{W}without",
        [
            ("bench/results/grading.json", "run_in_sandbox_seconds_mean"),
            ("bench/results/grading.json", "run_without_sandbox_seconds_mean"),
        ],
    ),
    (
        "README.md",
        rf"100{W}lesson{W}submissions{W}take{W}{N}{W}s{W}with{W}one{W}grader{W}and{W}{N}{W}s{W}with{W}two{W}\({N}x\)",
        [
            ("bench/results/class.json", "grading.one_grader.seconds"),
            ("bench/results/class.json", "grading.two_graders.seconds"),
            ("bench/results/class.json", "grading.speedup"),
        ],
    ),
    (
        "README.md",
        rf"a{W}class{W}of{W}300{W}takes{W}about{W}\d+{W}minutes{W}here{W}\({N}{W}s\)",
        [("bench/results/class.json", "grading.class_of_300_seconds_extrapolated")],
    ),
    (
        "README.md",
        rf"the{W}report{W}takes{W}{N}{W}s{W}on{W}the{W}2-core{W}CI{W}machine",
        [("bench/results/class.json", "report.seconds_median")],
    ),
    (
        "bench/README.md",
        rf"100{W}sandboxed{W}submissions:{W}{N}{W}s{W}against{W}{N}{W}s,{W}{N}x,{W}a{W}class{W}of{W}300{W}in{W}{N}{W}s",
        [
            ("bench/results/class.json", "grading.one_grader.seconds"),
            ("bench/results/class.json", "grading.two_graders.seconds"),
            ("bench/results/class.json", "grading.speedup"),
            ("bench/results/class.json", "grading.class_of_300_seconds_extrapolated"),
        ],
    ),
    (
        "bench/README.md",
        rf"for{W}a{W}class{W}of{W}300{W}\({N}{W}s;{W}target{W}under{W}{N}{W}s\)",
        [("bench/results/class.json", "report.seconds_median"), ("bench/results/class.json", "report.target_seconds")],
    ),
]
# grading/README.md's table of the samples: every row's autograde score is expected.json's (lesson 25).
SAMPLE_ROW = re.compile(r"^\| (\w+) \| [^|\n]* \| " + N + r"(?: \([^|\n]*\))? \|$", re.M)
# What the scan counts as a figure from a run: seconds each or per submission, a sandbox's cost, seconds sandboxed,
# a report's or a class's seconds.
RUN_FIGURE = re.compile(
    rf"{N}{W}s{W}(?:each|per{W}submission|a{W}submission|sandboxed)\b"
    rf"|costs{W}(?:nothing{W}measurable,{W})?{N}{W}s\b"
    rf"|(?:report|class{W}of{W}\d+){W}(?:takes{W}|\(|in{W}){N}{W}s\b"
)


def value_at(results: str, path: str) -> float:
    value = json.loads((REPO / results).read_text())
    for key in path.split("."):
        value = value[key]
    assert isinstance(value, (int, float)), f"{results}: {path} is not a number"
    return float(value)


def matches_to_shown_decimals(quoted: str, value: float) -> bool:
    """quoted is value as the README shows it: rounded to quoted's decimals (half away from zero)."""
    places = -Decimal(quoted).as_tuple().exponent if "." in quoted else 0
    return abs(Decimal(quoted) - Decimal(repr(value))) <= Decimal(5) / Decimal(10) ** (places + 1)


def test_the_decimals_rule():
    assert matches_to_shown_decimals("307", 306.5) and matches_to_shown_decimals("162", 161.7)
    assert matches_to_shown_decimals("1.90", 1.9) and matches_to_shown_decimals("-0.01", -0.01)
    assert not matches_to_shown_decimals("3.39", 3.02) and not matches_to_shown_decimals("0.03", -0.01)
    assert not matches_to_shown_decimals("18.2", 20.033) and not matches_to_shown_decimals("3.7", 0.52)


@pytest.mark.parametrize(("readme", "pattern", "sources"), QUOTED, ids=[q[1][:40] for q in QUOTED])
def test_each_quoted_number_is_its_recorded_value(readme, pattern, sources):
    text = (REPO / readme).read_text()
    found = list(re.finditer(pattern, text))
    assert found, f"{readme} no longer says {pattern!r}: update QUOTED with what it says now"
    for m in found:
        for quoted, (results, path) in zip(m.groups(), sources):
            value = value_at(results, path)
            assert matches_to_shown_decimals(quoted, value), (
                f"{readme}: {m.group(0)!r} quotes {quoted}; {results} {path} is {value}"
            )


def test_the_samples_table_scores_are_expected_json():
    text = (REPO / "grading/README.md").read_text()
    expected = json.loads((REPO / EXPECTED).read_text())["lesson25"]
    rows = {m.group(1): m.group(2) for m in SAMPLE_ROW.finditer(text)}
    assert set(rows) == set(expected), "every lesson 25 sample in the table, and only those"
    wrong = {
        name: (quoted, expected[name])
        for name, quoted in rows.items()
        if not matches_to_shown_decimals(quoted, expected[name])
    }
    assert not wrong, f"grading/README.md's samples table against {EXPECTED}: {wrong}"


def test_no_figure_from_a_run_is_quoted_unchecked():
    unchecked = []
    for readme in READMES:
        text = (REPO / readme).read_text()
        covered = [
            m.span() for pattern, _ in ((p, s) for r, p, s in QUOTED if r == readme) for m in re.finditer(pattern, text)
        ]
        for m in RUN_FIGURE.finditer(text):
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                line = text.count("\n", 0, m.start()) + 1
                unchecked.append(f"{readme}:{line}: {' '.join(m.group(0).split())!r}")
    assert not unchecked, "figures from runs that QUOTED does not check against bench/results: " + "; ".join(unchecked)


def test_the_scan_finds_the_figures_runs_produce():
    text = "grading takes 6.1 s each here; 3.39 s per submission; the sandbox costs 0.03 s; the report takes 3.7 s"
    assert [m.group(0) for m in RUN_FIGURE.finditer(text)] == [
        "6.1 s each",
        "3.39 s per submission",
        "costs 0.03 s",
        "report takes 3.7 s",
    ]
