"""The numbers the READMEs quote from runs are the recorded results' numbers.

README.md, grading/README.md and bench/README.md quote figures that a benchmark wrote into
bench/results/*.json or that the samples score (grading/submissions/expected.json). QUOTED says,
for each such sentence, which recorded value each of its numbers is; the test finds every one in
its README and checks it against its file, to the decimals the README shows. A figure of the
kinds runs produce (seconds per submission, a sandbox's cost, a report's seconds, a sample's
score in the samples table) that QUOTED does not cover fails the scan below it: add it to QUOTED
with the value it comes from, or take it out of the README.

A wider scan reads every doc (README.md, bench/, grading/, data/measurements/, docs/, CONTRIBUTING.md) and the
lesson's markdown cells: each number with a unit in a sentence about a run is a value of a results file its
paragraph names, or worked out from one (DERIVED), or listed in NOT_A_RECORD with why it is none.
"""

from __future__ import annotations

import json
import re
import sys
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
    (
        "README.md",
        rf"went{W}from{W}{N}{W}s{W}alone{W}to{W}{N}{W}s,{W}{N}x{W}\(target:{W}within{W}2x\)",
        [
            ("bench/results/starvation.json", "ttft_median_alone_s"),
            ("bench/results/starvation.json", "ttft_median_under_flood_s"),
            ("bench/results/starvation.json", "ratio"),
        ],
    ),
    (
        "README.md",
        rf"starvation-retry-refused.json`\){W}it{W}went{W}from{W}{N}{W}s{W}to{W}{N}{W}s,{W}{N}x",
        [
            ("bench/results/starvation-retry-refused.json", "ttft_median_alone_s"),
            ("bench/results/starvation-retry-refused.json", "ttft_median_under_flood_s"),
            ("bench/results/starvation-retry-refused.json", "ratio"),
        ],
    ),
    (
        "README.md",
        rf"\(`--storm`,{W}`bench/results/starvation-storm.json`:{W}([\d,]+){W}refusals",
        [("bench/results/starvation-storm.json", "flood_answers.429")],
    ),
    (
        "README.md",
        rf"TTFT{W}went{W}from{W}{N}{W}s{W}alone{W}to{W}{N}{W}s,{W}{N}x{W}\(2-core",
        [
            ("bench/results/starvation-storm.json", "ttft_median_alone_s"),
            ("bench/results/starvation-storm.json", "ttft_median_under_flood_s"),
            ("bench/results/starvation-storm.json", "ratio"),
        ],
    ),
    (
        "README.md",
        rf"client{W}used{W}{N}{W}of{W}a{W}core{W}and{W}nginx{W}{N},{W}and{W}the{W}engine{W}{N}",
        [
            ("bench/results/starvation-storm.json", "cores_used_while_flooded.flood_client"),
            ("bench/results/starvation-storm.json", "cores_used_while_flooded.nginx"),
            ("bench/results/starvation-storm.json", "cores_used_while_flooded.engine"),
        ],
    ),
    (
        "README.md",
        rf"starvation-long-prompts.json`,{W}the{W}flood{W}and{W}the{W}classmate{W}each{W}in{W}a{W}student's{W}cgroup\):"
        rf"{W}the{W}classmate's{W}median{W}TTFT{W}went{W}from{W}{N}{W}s{W}alone{W}to{W}{N}{W}s,{W}{N}x",
        [
            ("bench/results/starvation-long-prompts.json", "ttft_median_alone_s"),
            ("bench/results/starvation-long-prompts.json", "ttft_median_under_flood_s"),
            ("bench/results/starvation-long-prompts.json", "ratio"),
        ],
    ),
    (
        "README.md",
        rf"\(a{W}{N}-token{W}prompt{W}as{W}vLLM{W}sees{W}it,{W}{N}{W}output{W}tokens{W}forced",
        [
            ("bench/results/starvation-long-prompts.json", "setup.flood_prompt_tokens"),
            ("bench/results/starvation-long-prompts.json", "setup.flood_output_tokens"),
        ],
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
            assert matches_to_shown_decimals(quoted.replace(",", ""), value), (  # 908,632: a thousands comma
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


# --- every figure a run produced, in every doc and the lesson's text --------------------------------------------
# QUOTED checks the sentences it names exactly. Below, a wider net: in the course's docs and the lesson's markdown
# cells, every number with a unit (s, ms, tok/s, GB/s, GFLOP/s, %, x, MiB, GiB, GB, MB, minutes) in a sentence that
# speaks of a run (measured, took, ran, in the run, recorded, median, load average, a results file) must be a recorded
# value, to the decimals shown, in a unit conversion of what the file stores (ms as s, % as a fraction, MiB as bytes,
# ...): in the results files (bench/results/*.json, data/measurements/*.jsonl) its paragraph names; a table row speaks
# of the run its paragraph above cites. Not in any results file: together they hold some 2,000 numbers, and in one
# unit or another nearly every figure is one of them, so a figure from a run names the file it comes from. What is not
# a value of a file its paragraph names stands in NOT_A_RECORD with why (a limit or a machine's size, an exercise's
# scenario, a measurement made once by hand and not recorded), or the test fails naming the doc, the line and the
# figure.
DOCS = ("README.md", "bench/README.md", "grading/README.md", "CONTRIBUTING.md", "data/measurements/README.md")
LESSON_SOURCES = "grading/source/lesson25/*.py"  # jupytext percent files: the markdown cells are the lesson's text
RESULTS = ("bench/results/*.json", "data/measurements/*.jsonl")
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
UNIT = r"tok/s|tokens/s|GFLOP/s|TFLOP/s|GB/s|GiB/s|TB/s|ms|s|%|x|MiB|GiB|GB|MB|minutes?"
# one figure, or a run of them sharing the unit: "29-45 s", "49 / 124 / 701 ms", "11 to 27 s"
FIGURE = re.compile(rf"(?<![\w.\-/])(-?{_NUM}(?:(?:\s*/\s*|\s+to\s+|\s+and\s+|-){_NUM})*)\s?({UNIT})(?![\w/])")
RUN_WORDS = re.compile(
    r"\b(?:measured|measures|took|takes|ran|in the run|recorded|median|load average)\b|results/|\.jsonl?\b", re.I
)
CITED = re.compile(r"[\w.-]+\.jsonl?\b")
# the factors from what a results file stores to what a doc shows in each unit
SHOWN_AS = {"s": (1, 1e-3, 1 / 60), "ms": (1, 1e3), "%": (1, 100), "minute": (1, 1 / 60), "minutes": (1, 1 / 60)}
SHOWN_AS |= {"MiB": (1, 2**-20), "GiB": (1, 2**-30), "GB": (1, 1e-9), "MB": (1, 1e-6)}
# (doc, figure as written, why it is no recorded result): each is a figure the scan flags and no results file holds
NOT_A_RECORD: list[tuple[str, str, str]] = [
    (
        "README.md",
        "46 / 22 / 36 %",
        "prefix cache on against off, on one engine: measured once, by hand, and not recorded",
    ),
    ("README.md", "1 %", "prefix cache on against off, on one engine: measured once, by hand, and not recorded"),
    ("README.md", "512 MiB", "a limit: each student's private /tmp and /dev/shm (classroom.limits)"),
    ("README.md", "10 s", "the students' environment's build time: measured once, by hand, and not recorded"),
    ("README.md", "4 GB", "the size of the dependencies the students' environment links"),
    (
        "README.md",
        "57 s",
        "`class up --sqlite` until it answered: measured once, by hand, and not recorded (class.json: the hub alone)",
    ),
    ("README.md", "19 s", "`class down` of a killed class: measured once, by hand, and not recorded"),
    (
        "README.md",
        "11 to 27 s",
        "JupyterHub's own log of each server's start, two runs: measured once, by hand, and not recorded",
    ),
    ("bench/README.md", "10 GB", "an input's size: the sparse file bench/review_inputs.py makes"),
    (
        "bench/README.md",
        "89 s",
        "the reviewer before its input limits: review-inputs.json records only what came after",
    ),
    (
        "bench/README.md",
        "514 MB",
        "the reviewer before its input limits: review-inputs.json records only what came after",
    ),
    ("bench/README.md", "360 s", "a setting: bench/gpu_step.py's --budget-s default"),
    ("bench/README.md", "8 minutes", "a bound: bench/gpu_step.py's own budget for the whole command, not a run"),
    ("grading/README.md", "120 s", "a setting: the autograde step's margin and --feedback-timeout's default"),
    ("grading/README.md", "1.5 s", "a lesson's feedback page: measured once, by hand, and not recorded"),
    (
        "grading/README.md",
        "40 s",
        "five 186,000-character markdown cells drawn at load 17: measured once, by hand, and not recorded",
    ),
    ("grading/README.md", "5.3 s", "formgrader drawing a capped notebook: measured once, by hand, and not recorded"),
    ("grading/README.md", "12.9 s", "formgrader drawing a capped notebook: measured once, by hand, and not recorded"),
    ("grading/README.md", "102 s", "formgrader before the view's caps: measured once, by hand, and not recorded"),
    ("grading/README.md", "6.5 minutes", "formgrader before the view's caps: measured once, by hand, and not recorded"),
    ("grading/README.md", "20 MiB", "a limit: the size cap on a hand-in's notebook"),
    (
        "grading/README.md",
        "6 minutes",
        "grading 200,000 tiny cells before the cell cap: measured once, by hand, and not recorded",
    ),
    ("grading/README.md", "100 MiB", "a limit: collection's per-hand-in cap"),
    ("grading/README.md", "5 s", "a limit: the integrity scan's time cap"),
    ("grading/README.md", "1 MB", "an input's size: the integrity scan's worst-case line"),
    ("grading/README.md", "50 minutes", "an estimate for the replaced quadratic pattern, not a run"),
    ("grading/README.md", "24 GiB", "the machine's memory"),
    ("grading/README.md", "77-88 MiB", "graded runs' cgroup peaks: measured once, by hand, and not recorded"),
    ("grading/README.md", "196-220 MiB", "graded runs' cgroup peaks: measured once, by hand, and not recorded"),
    ("grading/README.md", "181-183 MiB", "graded runs' cgroup peaks: measured once, by hand, and not recorded"),
    ("grading/README.md", "105 MiB", "nbgrader's autograde peak RSS: measured once, by hand, and not recorded"),
    (
        "grading/README.md",
        "521 MB",
        "an output flood before the runner counted outputs: measured once, by hand, and not recorded",
    ),
    (
        "grading/README.md",
        "741 MB",
        "an output flood before the runner counted outputs: measured once, by hand, and not recorded",
    ),
    (
        "grading/README.md",
        "4 MB",
        "worked out from the runner's caps (runner.MAX_*: 4,000,000 characters per run), not a run",
    ),
    (
        "data/measurements/README.md",
        "46 / 22 / 36 %",
        "prefix cache on against off, on one engine: measured once, by hand, and not recorded",
    ),
    (
        "data/measurements/README.md",
        "1 %",
        "prefix cache on against off, on one engine: measured once, by hand, and not recorded",
    ),
    ("grading/source/lesson25/lesson25.py", "70 GiB", "vLLM 0.32.0's threshold in EngineArgs.get_batch_defaults"),
    ("grading/source/lesson25/lesson25.py", "3.0 s", "the exercise's scenario: Little's law on the numbers it gives"),
    ("grading/source/lesson25/lesson25.py", "3.2 s", "the exercise's scenario: Little's law on the numbers it gives"),
    ("grading/source/lesson25/lesson25.py", "75 ms", "the exercise's scenario: 256 / 3,400 tok/s"),
    ("grading/source/lesson25/lesson25.py", "80 ms", "the exercise's scenario: 256 / 3,200 tok/s"),
    ("grading/source/lesson25/lesson25.py", "15 %", "the exercise's scenario: the fleet's measured loss it states"),
    (
        "grading/source/lesson25/lesson25.py",
        "2.8x",
        "a cited source: the vLLM blog post on speculative decoding (2024-10-17)",
    ),
    (
        "grading/source/lesson25/lesson25.py",
        "1.8x",
        "a cited source: the vLLM blog post on speculative decoding (2024-10-17)",
    ),
]


def _table(results: str) -> list[dict]:
    return json.loads((REPO / "bench/results" / results).read_text())["table"]


def compiled_gain() -> list[float]:
    """How much faster compiled runs than eager without speculation, least and most over the batches, in %."""
    gains = [100 * (r["compiled_none_tok_s"] / r["eager_none_tok_s"] - 1) for r in _table("compiled-cpu.json")]
    return [min(gains), max(gains)]


def routed_gap() -> list[float]:
    """The routed column's largest distance, in %, from the engine it routed each batch to."""
    gaps = [
        100 * abs(r["routed_tok_s"] / r["ngram_tok_s" if r["routed_to"] == "speculating" else "none_tok_s"] - 1)
        for r in _table("flip-cpu.json")
    ]
    return [max(gaps)]


# (doc, figure as written) -> its numbers, worked out from a results file: figures a doc derives from recorded values
DERIVED = {
    ("README.md", "13-18 %"): compiled_gain,
    ("README.md", "6.2 %"): routed_gap,
    ("data/measurements/README.md", "6.2 %"): routed_gap,
}


def _numbers(doc_or_records: object):
    if isinstance(doc_or_records, dict):
        for value in doc_or_records.values():
            yield from _numbers(value)
    elif isinstance(doc_or_records, list):
        for value in doc_or_records:
            yield from _numbers(value)
    elif isinstance(doc_or_records, (int, float)) and not isinstance(doc_or_records, bool):
        yield float(doc_or_records)


def recorded() -> dict[str, list[float]]:
    """Every number in every results file, by the file's name."""
    found = {}
    for pattern in RESULTS:
        for path in sorted(REPO.glob(pattern)):
            text = path.read_text()
            records = (
                [json.loads(line) for line in text.splitlines() if line.strip()]
                if path.suffix == ".jsonl"
                else json.loads(text)
            )
            found[path.name] = list(_numbers(records))
    return found


def prose_lines(rel: str) -> list[tuple[int, str]]:
    """(line number, text) of a doc's prose, code blocks blanked; of a lesson source, its markdown cells' text."""
    lines = (REPO / rel).read_text().splitlines()
    out, inside = [], False
    for n, line in enumerate(lines, 1):
        if rel.endswith(".py"):
            if line.startswith("# %%"):
                inside = "[markdown]" in line
                line = ""
            out.append((n, line[1:].lstrip(" >") if inside and line.startswith("#") else ""))
        else:
            if line.startswith("```"):
                inside = not inside
            out.append((n, "" if inside or line.startswith("```") else line))
    return out


def paragraphs(rel: str):
    """(lines of one paragraph or table row, the text it speaks under): a table row speaks under the paragraph above."""
    para: list[tuple[int, str]] = []
    above = ""
    for n, line in [*prose_lines(rel), (0, "")]:
        if line.strip().startswith("|") or not line.strip():
            if para:
                above = " ".join(t for _, t in para)
                yield para, ""
                para = []
            if line.strip():
                yield [(n, line)], above
        else:
            para.append((n, line))


def run_figures(rel: str):
    """(line, figure as written, each number in it, unit, the results files it is checked against or None for all)."""
    for para, above in paragraphs(rel):
        text, starts = "", []
        for n, line in para:
            starts.append((len(text), n))
            text += line + " "
        cited = sorted(set(CITED.findall(text + " " + above)))
        for sentence in re.finditer(r"(?:[^.]|\.(?!\s))+\.?", text):
            if not (
                RUN_WORDS.search(sentence.group(0)) or (para[0][1].lstrip().startswith("|") and RUN_WORDS.search(above))
            ):
                continue
            for m in FIGURE.finditer(sentence.group(0)):
                if m.group(2) == "x" and m.group(0)[-2].isspace():
                    continue  # 8192 x 8192: a product, not a ratio
                at = sentence.start() + m.start()
                line = max(s for s in starts if s[0] <= at)[1]
                numbers = re.findall(rf"^-?{_NUM}|{_NUM}", m.group(1))
                yield (
                    line,
                    " ".join(m.group(0).split()),
                    [x.replace(",", "") for x in numbers],
                    m.group(2),
                    cited or None,
                )


def is_recorded(number: str, unit: str, values: list[float]) -> bool:
    return any(matches_to_shown_decimals(number, v * k) for v in values for k in SHOWN_AS.get(unit, (1,)))


def unrecorded_figures() -> list[tuple[str, int, str]]:
    """(doc, line, figure) of each run's figure that no results file holds, in the docs and the lesson's text."""
    values = recorded()
    missing = []
    for rel in (
        *DOCS,
        *sorted(str(p.relative_to(REPO)) for p in REPO.glob("docs/*.md")),
        *sorted(str(p.relative_to(REPO)) for p in REPO.glob(LESSON_SOURCES)),
    ):
        for line, figure, numbers, unit, cited in run_figures(rel):
            pool = [v for name in cited or () for v in values.get(name, [])]  # none: it cites no results file
            if (rel, figure) in DERIVED:
                want = DERIVED[rel, figure]()
                if len(want) != len(numbers) or not all(map(matches_to_shown_decimals, numbers, want)):
                    missing.append((rel, line, f"{figure} (worked out from the results: {want})"))
            elif not all(is_recorded(x, unit, pool) for x in numbers):
                missing.append((rel, line, figure))
    return missing


def test_every_run_figure_is_a_recorded_value_or_says_why_not():
    allowed = {(doc, figure) for doc, figure, _ in NOT_A_RECORD}
    unrecorded = [
        f"{doc}:{line}: {figure!r}" for doc, line, figure in unrecorded_figures() if (doc, figure) not in allowed
    ]
    assert not unrecorded, (
        "figures from runs that no bench/results/*.json or data/measurements/*.jsonl holds (correct them to the "
        "recorded value, or list them in NOT_A_RECORD with why): " + "; ".join(unrecorded)
    )


def test_not_a_record_lists_only_figures_the_docs_still_show():
    flagged = {(doc, figure) for doc, _, figure in unrecorded_figures()}
    stale = [(doc, figure) for doc, figure, _ in NOT_A_RECORD if (doc, figure) not in flagged]
    shown = {(doc, figure) for doc in DOCS for _, figure, *_ in run_figures(doc)}
    stale += [key for key in DERIVED if key not in shown]
    assert not stale, (
        f"NOT_A_RECORD or DERIVED entries no doc shows now, or that are recorded after all: take them out: {stale}"
    )


def test_the_wider_scan_flags_a_figure_no_run_recorded(tmp_path, monkeypatch):
    doc = tmp_path / "NOTES.md"
    doc.write_text(
        "Grading measured 3.39 s per submission (`grading.json`).\n\nThe report took 3.7 s.\n\n"
        "A datasheet says 4.8 TB/s.\n\n| batch | tok/s |\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "grading.json").write_text('{"seconds_per_submission": 3.02, "x": 3.7}')
    found = [(line, figure) for line, figure, *_ in run_figures("NOTES.md")]
    assert found == [(1, "3.39 s"), (3, "3.7 s")]  # the datasheet's figure speaks of no run
    values = recorded()["grading.json"]
    assert (
        not is_recorded("3.39", "s", values) and is_recorded("3.7", "s", values) and is_recorded("3020", "ms", values)
    )
