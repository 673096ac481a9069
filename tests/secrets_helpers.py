"""What counts as an answer, derived from the instructor's own files, for the tests that search for it.

Markers come from two places, never from a hand-written list:
- the instructor notebooks in solutions/: every line of a solution region (between nbgrader's
  `### BEGIN SOLUTION` and `### END SOLUTION`, and the model answers in words of the manually
  graded cells) and of the hidden tests (between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS`);
- the key modules in grading/keys/: every string and number their keys write out (expected
  values, options, feedback: the judgement keys), and every line of the variant questions' solver
  (grading/keys/lesson25_variants.py), none of which the package may hold. A key a module computes from servelab's presets
  or reviewer (with servelab.grading.keys) is not a marker: the lesson asks the learner to compute the
  same value from the same public presets, and to compare the audit with `servelab review`. The keys
  module itself, which computes those keys for any numbers (so any student's own warm-ups), is instructor-only:
  the students' wheel leaves it out (servelab.classroom.studentenv.INSTRUCTOR_ONLY), which
  tests/test_course_secrets.py checks by name, not by marker.

The rule that drops markers too generic to mean anything: a string marker is kept only if it is
at least MIN_CHARS characters long after stripping, and it appears nowhere in a student version
(lessons/, labs/): what every student is handed is no secret, and a short line (`a, k = 0.7, 4`,
`"notify": [...]`'s closing bracket) matches by chance. Import lines are not markers: they name
modules (the hidden tests' hand-over, servelab.grading.capture, is public and holds no key). A
number is kept only if it is not a whole number and its repr has at least MIN_DIGITS digits
(2.7731..., not 700, 20 or 131072, which any model config holds).

A third kind stays in the checkout because it states the reviewer's verdicts, the graded cases'
included: data/configs/expected.yaml, data/configs/public/expected.yaml and data/configs/README.md
(pyproject.toml leaves them out of the wheel). verdict_lines() makes a marker of each of their lines
that states a verdict, and graded_configs() names the configs the lesson grades, whose headers ship
and must leave the verdict to the learner.
"""

from __future__ import annotations

import re

import nbformat
import yaml

from servelab.grading import course, trusted
from servelab.paths import REPO_DIR

MIN_CHARS = 24
MIN_DIGITS = 6
CONFIGS = REPO_DIR / "data" / "configs"
VERDICT_FILES = (CONFIGS / "expected.yaml", CONFIGS / "public" / "expected.yaml", CONFIGS / "README.md")
REGIONS = (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))


def _student_text() -> str:
    return "\n".join(
        " ".join(cell.source.split())
        for a in course.ASSIGNMENTS
        for cell in nbformat.read(a.student, as_version=4).cells
    )


def _keep(line: str, public: str) -> bool:
    line = " ".join(line.split())
    return len(line) >= MIN_CHARS and line not in public and not re.match(r"(from \S+ )?import ", line)


def solution_lines() -> dict[str, str]:
    """marker -> where it comes from: the lines of every solution region and hidden test."""
    found = {}
    for a in course.ASSIGNMENTS:
        for cell in nbformat.read(a.source, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            lines = cell.source.split("\n")
            if cell.cell_type == "markdown" and meta.get("solution"):
                chosen = lines
            else:
                chosen, inside = [], False
                for line in lines:
                    if any(line.strip() == begin for begin, _ in REGIONS):
                        inside = True
                    elif any(line.strip() == end for _, end in REGIONS):
                        inside = False
                    elif inside:
                        chosen.append(line)
            for line in chosen:
                found.setdefault(line.strip(), f"{a.source.name}:{cell.id}")
    return found


def _values(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            yield from _values(v)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield value


def key_values() -> dict[str, str]:
    """marker -> where it comes from: every string and number in the keys' TESTS."""
    found = {}
    for a in course.ASSIGNMENTS:
        written = (trusted.KEYS_DIR / f"{a.name}.py").read_text()
        for grade_id, (_checker, key) in trusted.load_tests(a.name).items():
            for value in _values(key):
                if isinstance(value, str) and value.strip()[:MIN_CHARS] in written:
                    found.setdefault(value.strip(), f"keys/{a.name}.py:{grade_id}")
                elif (
                    isinstance(value, float)
                    and not value.is_integer()
                    and len(re.sub(r"\D", "", repr(value))) >= MIN_DIGITS
                ):
                    found.setdefault(repr(value), f"keys/{a.name}.py:{grade_id}")
    return found


# The variant questions' solver (servelab.variants.grading.SOLVER_NAME).
SOLVER = trusted.KEYS_DIR / "lesson25_variants.py"


def solver_lines() -> dict[str, str]:
    """marker -> where it comes from: every line of the variant solver (the rule's filter drops the generic)."""
    found = {}
    for number, line in enumerate(SOLVER.read_text().splitlines(), 1):
        found.setdefault(line.strip(), f"keys/{SOLVER.name}:{number}")
    return found


def markers() -> dict[str, str]:
    """Every marker that means something (the module's rule), with where it comes from."""
    public = _student_text()
    chosen = {}
    for marker, origin in {**key_values(), **solution_lines(), **solver_lines()}.items():
        if _is_number(marker) or _keep(marker, public):
            chosen[marker if _is_number(marker) else " ".join(marker.split())] = origin
    return chosen


def _is_number(marker: str) -> bool:
    return bool(re.fullmatch(r"-?[0-9.e+-]+", marker))


def hits(text: str, chosen: dict[str, str]) -> list[str]:
    """The markers a text holds (whitespace runs read as one space)."""
    flat = " ".join(text.split())
    return [m for m in chosen if m in flat]


def verdicts() -> set[str]:
    """Every verdict the reviewer gives a knob in the examples (justified, unjustified, wrong)."""
    expected = yaml.safe_load((CONFIGS / "expected.yaml").read_text())
    return {v for case in expected.values() for v in case["verdicts"].values()}


def verdict_lines() -> dict[str, str]:
    """marker -> where it comes from: each line of the verdict files that states a verdict."""
    words = re.compile(r"\b(" + "|".join(sorted(verdicts())) + r")\b")
    found = {}
    for path in VERDICT_FILES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            line = " ".join(line.split())
            if len(line) >= MIN_CHARS and words.search(line):
                found.setdefault(line, f"{path.relative_to(REPO_DIR)}:{number}")
    return found


def graded_configs() -> list[str]:
    """The configs in data/configs/ that the lesson or its keys name (the questions a learner answers on them)."""
    text = "\n".join(
        p.read_text() for a in course.ASSIGNMENTS for p in (a.source, trusted.KEYS_DIR / f"{a.name}.py") if p.exists()
    )
    names = set(re.findall(r"data/configs/([A-Za-z0-9_.-]+?)(?:-workload)?\.yaml", text))
    return sorted(n for n in names if (CONFIGS / f"{n}.yaml").is_file())
