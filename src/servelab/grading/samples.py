"""Sample submissions, made from the notebooks so they stay in step with them.

    python -m servelab.grading.samples     # writes grading/submissions/<assignment>/<student>.ipynb

What each sample answers lives with the keys, instructor-only, in
grading/samples/<assignment>.py (its `samples(student_nb)` lists them); this
module only does the notebook surgery, so the installed package holds no answer.
Each sample starts from the released student version and fills its answer
cells: `perfect` with the instructor's solutions, `partial` with a known mix of
right and wrong answers, `empty` with nothing. The hostile samples start from
`partial` and attack the grader: an edited test cell, deleted test cells, an
infinite loop, an output flood, code that reads the answer key from disk, code
that patches the checkers and keys. A hostile sample must score exactly what
`partial` scores: an attack gains nothing. grading/submissions/expected.json
holds every sample's expected autograde score.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from servelab.grading import author, course
from servelab.paths import REPO_DIR

SUBMISSIONS = REPO_DIR / "grading" / "submissions"
EXPECTED = SUBMISSIONS / "expected.json"
DEFINITIONS = REPO_DIR / "grading" / "samples"  # <assignment>.py: what each sample answers


# --------------------------------------------------------------------------- notebook surgery


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def solutions(source_nb) -> dict[str, str]:
    """grade_id -> the solution of every answer cell (markers removed) in an instructor notebook."""
    out = {}
    for cell in source_nb.cells:
        m = _meta(cell)
        if m.get("solution"):
            lines = [
                ln for ln in cell.source.split("\n") if ln.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
            ]
            out[m["grade_id"]] = "\n".join(lines)
    return out


def fill(nb, answers: dict[str, str]):
    """A copy of a student notebook with the given answer cells replaced."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in answers and _meta(cell).get("solution"):
            cell.source = answers[gid]
    return nb


def test_cells(nb) -> list:
    return [c for c in nb.cells if _meta(c).get("grade") and not _meta(c).get("solution")]


@dataclass(frozen=True)
class Sample:
    student: str
    make: Callable  # (student_nb, solutions) -> nb
    expected: float  # autograde points
    about: str


def autograde_points(nb) -> float:
    return float(sum(_meta(c).get("points", 0) for c in test_cells(nb)))


def points(nb, grade_id: str) -> float:
    """The points one test cell carries."""
    return float(next(_meta(c)["points"] for c in test_cells(nb) if _meta(c).get("grade_id") == grade_id))


def defined(assignment: course.Assignment, student_nb) -> list[Sample]:
    """The assignment's samples from grading/samples/<assignment>.py; perfect and empty where it has none."""
    path = DEFINITIONS / f"{assignment.name}.py"
    if not path.is_file():
        return [
            Sample("perfect", lambda nb, s: fill(nb, s), autograde_points(student_nb), ""),
            Sample("empty", lambda nb, s: copy.deepcopy(nb), 0.0, ""),
        ]
    spec = importlib.util.spec_from_file_location(f"servelab_samples_{assignment.name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: Python cannot load it as a module.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.samples(student_nb)


def make_samples(assignment: course.Assignment, submissions: Path = SUBMISSIONS) -> dict[str, float]:
    """Write an assignment's samples under submissions/<assignment>/; return {student: expected points}."""
    student_nb = nbformat.read(assignment.student, as_version=4)
    sol = solutions(nbformat.read(assignment.source, as_version=4))
    samples = defined(assignment, student_nb)
    folder = Path(submissions) / assignment.name
    if folder.exists():
        for old in folder.glob("*.ipynb"):
            old.unlink()
    expected = {}
    for sample in samples:
        author.write(sample.make(student_nb, sol), folder / f"{sample.student}.ipynb")
        expected[sample.student] = sample.expected
    return expected


def main(argv: list[str] | None = None) -> int:
    expected = {}
    for assignment in course.available():
        if not assignment.student.exists():
            print(f"{assignment.student} is missing: run python -m servelab.grading.release first", file=sys.stderr)
            return 1
        expected[assignment.name] = make_samples(assignment)
        print(f"wrote {len(expected[assignment.name])} samples for {assignment.name}")
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
