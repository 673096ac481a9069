"""Grading an answer against the student's own variant, and naming classmates whose variant it fits.

`check(part_id, student_id, answer)` derives the student's parameters from the id the grader knows (the
nbgrader student of the hand-in: `resources["nbgrader"]["student"]` in a preprocessor, the collected
hand-in's verified owner; never a name the notebook writes), solves the variant with the instructor-only
solver and hands the answer to the same checker, with the same tolerances, the fixed lesson's key uses
(servelab.grading.checkers). The feedback names the student's parameters and the worked solution for
them. An answer that misses its own variant but fits a classmate's (a roster of student ids) is returned
with `copied_from`, for the instructor: the feedback to the student does not name anyone.

The solver is grading/keys/lesson25_variants.py in the checkout, loaded as the grader loads every key
(run as a file, its names in a namespace: servelab.grading.trusted.load_key_module, which imports this
module to grade variants, so the few lines are repeated here rather than imported); where it is absent (an installed wheel: the students'
environment) `load_solver` raises SolverMissing, and nothing here can grade or show an answer.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from servelab.grading import checkers
from servelab.paths import REPO_DIR

from . import seeds
from .questions import PARTS, Params

SOLVER_NAME = "lesson25_variants"
KEYS_DIR = REPO_DIR / "grading" / "keys"  # servelab.grading.trusted.KEYS_DIR: every key's folder


class SolverMissing(RuntimeError):
    """The instructor-only solver is not here (an installed servelab: the students' environment)."""


def load_solver(keys_dir: str | Path | None = None) -> SimpleNamespace:
    """The solver module (SOLVE: question id -> function of the parameters), or SolverMissing.

    keys_dir: the folder the grader reads every key from (servelab.grading.trusted.KEYS_DIR: the checkout's
    grading/keys/)."""
    keys_dir = Path(keys_dir) if keys_dir is not None else KEYS_DIR
    path = keys_dir / f"{SOLVER_NAME}.py"
    if not path.is_file():
        raise SolverMissing(
            f"The answers to the variant questions are not in this installation (no {path}): they live only in "
            "the course's checkout, with its other keys. Practice where you may see answers, in a clone of "
            "servelab (`servelab practice` from its .venv); graded work is checked when it is graded."
        )
    return SimpleNamespace(**runpy.run_path(str(path)))


class Graded(NamedTuple):
    """Points and feedback (so `points, feedback = check(...)[:2]` reads like a checker's Result), plus the
    student's parameters, the slips the checker named and the classmates whose variant the answer fits."""

    points: float
    feedback: str
    params: Params
    slips: Mapping[str, str]
    copied_from: tuple[str, ...]


def solution(part_id: str, params: Params, solver: SimpleNamespace) -> dict:
    """The solver's {checker, key, worked} for one part of a question with these parameters."""
    question, part = PARTS[part_id]
    solved = dict(solver.SOLVE[question.id](dict(params))[part_id])
    solved["key"] = {"name": part.name, **solved["key"]}  # the part's own name leads its feedback
    return solved


def _parameters(params: Params) -> str:
    return ", ".join(f"{name} = {value}" for name, value in params.items())


def with_fixed(solved: dict, fixed_key: Mapping | None) -> dict:
    """A practice part's key as the lesson grades it: the fixed key's fields in its order and with its
    points, its numeric fields the variant's (the knob and verdict, the same for every variant, stay the
    fixed key's). Any other part's key is the variant's alone."""
    if fixed_key is None or "fields" not in solved["key"] or "fields" not in fixed_key:
        return solved
    own = solved["key"]["fields"]
    fields = {name: own.get(name, want) for name, want in fixed_key["fields"].items()}
    return {**solved, "key": {**fixed_key, "fields": fields}}


def grade(
    part_id: str, params: Params, answer: Any, solver: SimpleNamespace, fixed_key: Mapping | None = None
) -> checkers.Result:
    """The checker's Result for an answer to one part with these parameters (practice's check, too);
    `fixed_key`: the lesson's key of a practice part, whose judgement fields it grades (with_fixed)."""
    solved = with_fixed(solution(part_id, params, solver), fixed_key)
    result = getattr(checkers, solved["checker"])(answer, solved["key"])
    feedback = f"{result.feedback}\nYour parameters: {_parameters(params)}.\nWorked solution: {solved['worked']}"
    return checkers.Result(result.points, feedback, result.slips)


def _full(part_id: str, solved: dict) -> float:
    return float(solved["key"].get("points", 1))


def check(
    part_id: str,
    student_id: str,
    answer: Any,
    *,
    roster: Iterable[str] = (),
    secret: bytes | None = None,
    course: str = seeds.COURSE_ID,
    assignment: str = seeds.ASSIGNMENT,
    solver: SimpleNamespace | None = None,
    fixed_key: Mapping | None = None,
) -> Graded:
    """Grade `answer` to part `part_id` (a grade_id) against `student_id`'s own variant.

    `roster`: the class's student ids (nbgrader's gradebook students); when the answer misses its own
    variant, the classmates whose variant it fits in full are `copied_from` (a part whose answer is True
    or False, which half the class shares by chance, is never flagged). `fixed_key`: the lesson's key of
    the part (grading/keys/lesson25.py's TESTS entry); for a practice dict its judgement fields are graded
    by it and the points are its own (with_fixed), and copies are looked for in the numeric fields alone.
    """
    if part_id not in PARTS:
        raise KeyError(f"no graded part {part_id!r}; the parts are {sorted(PARTS)}")
    solver = solver or load_solver()
    # Grading reads the secret the release made; it never makes one (a new secret is a new set of variants).
    secret = secret if secret is not None else seeds.course_secret(create=False)

    def params_of(student: str) -> Params:
        return seeds.params_for(part_id, student, secret=secret, course=course, assignment=assignment)

    own = params_of(student_id)
    result = grade(part_id, own, answer, solver, fixed_key)
    numbers = grade(part_id, own, answer, solver) if fixed_key is not None else result
    full = _full(part_id, solution(part_id, own, solver))
    copied: list[str] = []
    if numbers.points < full and PARTS[part_id][1].kind != "bool":
        for other in dict.fromkeys(roster):
            if other == student_id:
                continue
            theirs = solution(part_id, params_of(other), solver)
            points, _ = getattr(checkers, theirs["checker"])(answer, theirs["key"])
            if points >= _full(part_id, theirs):
                copied.append(other)
    return Graded(result.points, result.feedback, own, dict(result.slips), tuple(copied))


def roster(db_url: str) -> list[str]:
    """The class's student ids, from nbgrader's gradebook (the ids its hand-ins are graded under)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return sorted(student.id for student in gb.students)
