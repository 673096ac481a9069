"""Grading an answer against the student's own variant, and naming classmates whose variant it fits.

`check(part_id, student_id, answer)` derives the student's parameters from the id the grader knows (the
nbgrader student of the hand-in: `resources["nbgrader"]["student"]` in a preprocessor, the collected
hand-in's verified owner; never a name the notebook writes), solves the variant with the instructor-only
solver and hands the answer to the same checker, with the same tolerances, the fixed lesson's key uses
(servelab.grading.checkers). The feedback names the student's parameters and the worked solution for
them. A hand-in whose numbers miss their own variant and fit one classmate's throughout (Variants.copy:
closely, across questions, nobody else's) is returned with `copied_from`, for the instructor, beside the
chance that an honest hand-in is named so in that class (Variants.chance); the feedback to the student
does not name anyone. Numbers that are the lesson's printed example are said to be, never a copy.

The solver is grading/keys/lesson25_variants.py in the checkout, loaded as the grader loads every key
(run as a file, its names in a namespace: servelab.grading.trusted.load_key_module, which imports this
module to grade variants, so the few lines are repeated here rather than imported); where it is absent (an installed wheel: the students'
environment) `load_solver` raises SolverMissing, and nothing here can grade or show an answer.
"""

from __future__ import annotations

import math
import random
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
    fixed key's, told in the variant's numbers where the solver words them: its `judgement`). Any other
    part's key is the variant's alone."""
    if fixed_key is None or "fields" not in solved["key"] or "fields" not in fixed_key:
        return solved
    own, told = solved["key"]["fields"], solved.get("judgement", {})
    fields = {
        name: own.get(name, {**want, "feedback": told[name]} if name in told else want)
        for name, want in fixed_key["fields"].items()
    }
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


# A copy is told by evidence, not by coincidence: an answer that misses its own variant fits some
# classmate's within the grading tolerance far too often by chance (a slip, a rounding, the lesson's own
# numbers), so a classmate is named only when the hand-in's numbers (a number part, or a numeric field
# of a practice dict) that are wrong for the student's own variant (and none of its named slips) fit that
# classmate's exact solution, or one of its named slips, within COPY_REL_TOL (far tighter than grading's 1 %): those of at least COPY_PIECES questions fit
# nobody else's, at least COPY_SHARE of the wrong numbers fit theirs, and no other classmate is so fitted. A number that fits the lesson's printed
# example (its standard numbers) is never evidence: it is the lesson's, not a classmate's.
COPY_REL_TOL = 0.005
COPY_PIECES = 2
COPY_PIECES_SPLIT = 3  # questions, each fitting one classmate whole, that name a copy taken from several
COPY_SHARE = 0.75


def _value(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _pieces(solved: dict) -> dict[str | None, tuple[float, float]]:
    """The numbers a part's key expects: field (None for a number part) -> (value, grading tolerance)."""
    key = solved["key"]
    if "fields" in key:
        return {
            name: (float(want["expect"]), float(want.get("rel_tol", 0.01)))
            for name, want in key["fields"].items()
            if _value(want["expect"]) is not None
        }
    if solved["checker"] == "number":
        value, tol = float(key["value"]), float(key.get("rel_tol", 0.01))
        if key.get("figures") and value:  # to so many significant figures: as a relative tolerance of this value
            tol = max(tol, checkers.figures_tol(value, int(key["figures"])) / abs(value))
        return {None: (value, tol)}
    return {}


def _given(answer: Any, field: str | None) -> float | None:
    if field is None:
        return _value(answer)
    return _value(answer.get(field)) if isinstance(answer, Mapping) else None


def _near(x: float, want: float, rel_tol: float, abs_tol: float = 0.0) -> bool:
    return math.isclose(x, want, rel_tol=rel_tol, abs_tol=abs_tol)


class Copy(NamedTuple):
    """Hand-in-level evidence: the classmate the numbers fit (or None; the classmates, comma-separated, of a
    copy taken from several), which of them (part, field), the numbers that are the lesson's printed example
    (part ids), and whose variant each copied part fits (part id -> classmate)."""

    classmate: str | None
    pieces: tuple[tuple[str, str | None], ...]
    standard: tuple[str, ...]
    sources: tuple[tuple[str, str], ...] = ()

    def source_of(self, part_id: str) -> str | None:
        return dict(self.sources).get(part_id)


class Variants:
    """The class's variants under one secret, each part solved once per student (for copies and chance)."""

    def __init__(
        self, solver: SimpleNamespace, secret: bytes, course: str = seeds.COURSE_ID, assignment: str = seeds.ASSIGNMENT
    ) -> None:
        self.solver, self.secret, self.course, self.assignment = solver, secret, course, assignment
        self._solved: dict[tuple[str, str], dict] = {}
        self._pieces: dict[tuple[str, str], dict[str | None, tuple[float, float]]] = {}
        self._answers: dict[tuple[str, str, str | None], list[float]] = {}

    def params(self, part_id: str, student: str) -> Params:
        return seeds.params_for(part_id, student, secret=self.secret, course=self.course, assignment=self.assignment)

    def _solution(self, part_id: str, student: str) -> dict:
        if (part_id, student) not in self._solved:
            self._solved[(part_id, student)] = solution(part_id, self.params(part_id, student), self.solver)
        return self._solved[(part_id, student)]

    def pieces(self, part_id: str, student: str) -> dict[str | None, tuple[float, float]]:
        if (part_id, student) not in self._pieces:
            self._pieces[(part_id, student)] = _pieces(self._solution(part_id, student))
        return self._pieces[(part_id, student)]

    def answers(self, part_id: str, student: str, field: str | None) -> list[float]:
        """The numbers a hand-in of this student's variant gives for a part's field: the right one, and each
        named slip's (a number part's hints), so a copy of a classmate who slipped fits them too."""
        if (part_id, student, field) not in self._answers:
            right = self.pieces(part_id, student).get(field)
            key = self._solution(part_id, student)["key"]
            slips = [_value(h.get("value")) for h in key.get("hints", [])] if field is None else []
            found = [right[0], *(v for v in slips if v is not None)] if right is not None else []
            self._answers[(part_id, student, field)] = found
        return self._answers[(part_id, student, field)]

    def standard(self, part_id: str) -> dict[str | None, tuple[float, float]]:
        params = PARTS[part_id][0].standard
        return _pieces(solution(part_id, params, self.solver)) if params is not None else {}

    def fits_standard(self, part_id: str, answer: Any) -> bool:
        """The answer's numbers are the lesson's printed example's (within grading's tolerance), not the student's."""
        want = self.standard(part_id)
        got = {f: _given(answer, f) for f in want}
        return bool(want) and all(
            x is not None and _near(x, v, tol, 0.5 if tol == 0 else 0.0)
            for f, (v, tol) in want.items()
            for x in [got[f]]
        )

    def copy(self, student: str, hand_in: Mapping[str, Any], roster: Iterable[str]) -> Copy:
        """Whose variant the hand-in's numbers fit, on the evidence (see COPY_PIECES), or None."""
        others = [s for s in dict.fromkeys(roster) if s != student]
        sole: dict[str, list[tuple[str, str | None]]] = {}  # classmate -> the numbers only they are fitted by
        near: dict[str, int] = {}  # classmate -> how many of the wrong numbers fit them
        fits: dict[tuple[str, str | None], set[str]] = {}  # each wrong number -> the classmates it fits
        standard: list[str] = []
        for part_id, answer in hand_in.items():
            if part_id not in PARTS or PARTS[part_id][1].kind == "bool":
                continue
            if self.fits_standard(part_id, answer):
                standard.append(part_id)
                continue
            std = self.standard(part_id)
            for field, (mine, tol) in self.pieces(part_id, student).items():
                x = _given(answer, field)
                if x is None or _near(x, mine, tol, 0.5 if tol == 0 else 0.0):
                    continue  # no number, or right for one's own variant: no evidence either way
                if any(_near(x, slip, COPY_REL_TOL) for slip in self.answers(part_id, student, field)[1:]):
                    continue  # a named slip of one's own variant: one's own mistake
                if field in std and _near(x, std[field][0], max(std[field][1], COPY_REL_TOL)):
                    continue  # the lesson's printed number
                whose = [o for o in others if any(_near(x, v, COPY_REL_TOL) for v in self.answers(part_id, o, field))]
                fits[(part_id, field)] = set(whose)
                for o in whose:
                    near[o] = near.get(o, 0) + 1
                if len(whose) == 1:
                    sole.setdefault(whose[0], []).append((part_id, field))
        wrong = len(fits)
        # Evidence: numbers of at least COPY_PIECES questions (one question's numbers follow from each other)
        # fit that classmate alone, and nearly every wrong number fits them (an honest slip fits a classmate
        # here and there; a copy fits them throughout).
        strong = {
            o: tuple(p)
            for o, p in sole.items()
            if len({PARTS[part][0].id for part, _f in p}) >= COPY_PIECES and near[o] >= COPY_SHARE * wrong
        }
        if len(strong) == 1:
            ((who, pieces),) = strong.items()
            return Copy(
                who, pieces, tuple(standard), tuple((part, who) for part in dict.fromkeys(p for p, _f in pieces))
            )
        # A copy taken from several classmates: each of at least COPY_PIECES_SPLIT questions is one classmate's
        # whole (every wrong number of it fits them, one fits nobody else, no other classmate fits them all),
        # and at least COPY_SHARE of the wrong numbers fit one of them.
        whole: dict[str, str] = {}  # question id -> the one classmate every one of its wrong numbers fits
        for question in dict.fromkeys(PARTS[w[0]][0].id for w in fits):
            here = [f for w, f in fits.items() if PARTS[w[0]][0].id == question]
            common = set.intersection(*here)
            if len(common) == 1 and any(f == common for f in here):  # and one number fits them alone
                whole[question] = next(iter(common))
        covered = [w for w in fits if PARTS[w[0]][0].id in whole]
        named = set(whole.values())
        fitting = [w for w, f in fits.items() if f & named]  # the wrong numbers one of them gives too
        if len(whole) >= COPY_PIECES_SPLIT and len(named) > 1 and len(fitting) >= COPY_SHARE * wrong:
            sources = tuple(dict.fromkeys((part, whole[PARTS[part][0].id]) for part, _f in covered))
            return Copy(", ".join(sorted(named)), tuple(covered), tuple(standard), sources)
        return Copy(None, (), tuple(standard))

    def chance(
        self,
        roster: Iterable[str],
        trials: int = 1,
        rng: random.Random | None = None,
        parts: Iterable[str] | None = None,
    ) -> float:
        """How often an honest wrong hand-in (each number slipped: halved, doubled, 7 % off, or the lesson's
        printed example) is named a copy of some classmate by chance: the share of simulated hand-ins over
        the roster. Beside a flag, it tells the instructor how much the flag weighs."""
        rng = rng or random.Random(0)
        students = list(dict.fromkeys(roster))
        part_ids = [p for p in (parts or PARTS) if PARTS[p][1].kind != "bool"]
        flagged = total = 0
        for _ in range(trials):
            for student in students:
                hand_in = {}
                for part_id in part_ids:
                    pieces = self.pieces(part_id, student)
                    if not pieces:
                        continue
                    std = self.standard(part_id)
                    factor = rng.choice((0.5, 2.0, 1.07, 0.93, None))
                    values = {
                        f: (std[f][0] if factor is None and f in std else v * (factor or 1.0))
                        for f, (v, _t) in pieces.items()
                    }
                    hand_in[part_id] = values[None] if None in values else values
                total += 1
                flagged += self.copy(student, hand_in, students).classmate is not None
        return flagged / total if total else 0.0


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
    hand_in: Mapping[str, Any] | None = None,
    variants: Variants | None = None,
) -> Graded:
    """Grade `answer` to part `part_id` (a grade_id) against `student_id`'s own variant.

    `roster`: the class's student ids (nbgrader's gradebook students); `hand_in`: the student's answers to
    the other variant parts of the same hand-in (grade_id -> answer). A classmate is named in
    `copied_from` only on the evidence of the whole hand-in (Variants.copy: several numbers wrong for the
    student's own variant that fit that one classmate's closely), and only on a part that is part of the
    evidence; an answer that fits the lesson's printed example numbers is never a copy, and its feedback
    says so. `fixed_key`: the lesson's key of the part (grading/keys/lesson25.py's TESTS entry); for a
    practice dict its judgement fields are graded by it and the points are its own (with_fixed).
    """
    if part_id not in PARTS:
        raise KeyError(f"no graded part {part_id!r}; the parts are {sorted(PARTS)}")
    solver = solver or (variants.solver if variants is not None else load_solver())
    # Grading reads the secret the release made; it never makes one (a new secret is a new set of variants).
    if variants is None:
        secret = secret if secret is not None else seeds.course_secret(create=False)
        variants = Variants(solver, secret, course, assignment)
    own = variants.params(part_id, student_id)
    result = grade(part_id, own, answer, solver, fixed_key)
    numbers = grade(part_id, own, answer, solver) if fixed_key is not None else result
    full = _full(part_id, solution(part_id, own, solver))
    feedback = result.feedback
    copied: tuple[str, ...] = ()
    if numbers.points < full and PARTS[part_id][1].kind != "bool":
        if variants.fits_standard(part_id, answer):
            feedback += (
                "\nThese are the numbers of the lesson's printed example, not your own parameters: "
                "compute with the parameters above."
            )
        else:
            evidence = variants.copy(student_id, {**(hand_in or {}), part_id: answer}, roster)
            source = evidence.source_of(part_id)
            if source is not None:
                copied = (source,)
    return Graded(result.points, feedback, own, dict(result.slips), copied)


def roster(db_url: str) -> list[str]:
    """The class's student ids, from nbgrader's gradebook (the ids its hand-ins are graded under)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return sorted(student.id for student in gb.students)
