"""The class report: after grading, what the class got wrong, question by question, and why.

    servelab class report lesson25 [--course DIR] [--out DIR] [--names]

read -> question statistics -> slips -> what to re-teach -> page and CSV, each step handed a value:

1. `read_class`: the gradebook, through nbgrader's own API (SQLite in the course, or
   SERVELAB_GRADEBOOK_URL: the class's PostgreSQL), and the record the grader wrote for each
   test of each submission (servelab-reports/<assignment>/<student>/<notebook>.json, written
   by grading/trusted.py's ScoreAnswers: points, the slips its checker named, whether an
   answer came, the answer).
2. `question_stats`: per autograded question the mean, the distribution of points, how many
   gave no answer, and the discrimination index: the point-biserial (Pearson) correlation of
   the question's points with the rest of the assignment's total, None where either has no
   spread. Per hand-graded cell, its distribution once every submission is graded.
3. `slip_stats`: per question each named slip, how many made it, the points it cost (an
   answer's lost points shared equally among the slips named on it), and one example answer:
   the commonest among those who made it, shown only when at least EXAMPLE_MIN_STUDENTS gave
   that same answer (once decoded from the grader's JSON text and normalised), with every
   student's name, id and email taken out.
4. `reteach`: the three slips that cost the class most points, summed over the questions each
   was made on, each with the lesson sections that teach them (TEACHES: headings of
   lessons/lesson25.ipynb).
5. `write`: one HTML page (plotly.js inline: it opens offline) and a CSV.

Everything a student wrote is hostile: the page is rendered by Jinja2 with autoescaping on,
the charts carry only numbers and question ids, and no student is named unless `names`.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import re
import stat
import tempfile
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from servelab.courseid import COURSE_ID
from servelab.grading import course, trusted
from servelab.paths import REPO_DIR

from .errors import ClassError

RETEACH = 3  # slips in the "what to re-teach" list
EXAMPLE_CHARS = 160  # of an example answer shown on the page
# An example answer is shown only when at least this many students gave that same (normalised) answer:
# then it is the class's answer, not one student's words (k-anonymity with k = 3). Taking names out of a
# text cannot be complete (a nickname, a name spelt another way), so this count is the main protection;
# the scrubber below is the second. It also keeps a slip one student made from showing that student's answer.
EXAMPLE_MIN_STUDENTS = 3
ANSWER_JSON_CHARS = 4096  # the grader keeps trusted.REPORT_ANSWER_CHARS; anything longer is not decoded
ANSWER_JSON_DEPTH = 20  # deeper nesting is not decoded (json.loads would recurse once per level)
TEMPLATE = Path(__file__).with_name("report.html.j2")
LESSON = REPO_DIR / "lessons" / "lesson25.ipynb"  # the student version, whose headings TEACHES names

# The lesson section that teaches each autograded question: headings of lessons/lesson25.ipynb
# (tests/test_class_report.py checks every one is there). A slip links to its question's section.
RECAP = "Recap: what this lesson leans on"
CHECKLIST = "The review checklist: does each knob match the stated workload?"
ROLLOUT = "Carrying a change through what others depend on"
PRIMARY_SOURCE = "Saying when the usual answer is wrong, and settling a disputed claim from the primary source"
TEACHES = {
    "warmup1-per-token": RECAP,
    "warmup1-batch": RECAP,
    "warmup2-ridge": RECAP,
    "warmup2-tokens": RECAP,
    "warmup3-tokens": RECAP,
    "warmup3-verified": RECAP,
    "warmup3-bound": RECAP,
    "practice1-test": CHECKLIST,
    "practice4-test": CHECKLIST,
    "rep1-test": CHECKLIST,
    "practice2-sufficient": PRIMARY_SOURCE,
    "practice2-missing": PRIMARY_SOURCE,
    "practice5-test": PRIMARY_SOURCE,
    "quiz-test": PRIMARY_SOURCE,
    "predict-test": PRIMARY_SOURCE,  # which of the seed's claims are wrong, before the reveals
    "rep2-test": PRIMARY_SOURCE,  # the labs' measured comparison: settle it with on/off numbers
    "practice3-test": ROLLOUT,
    "rep3-test": ROLLOUT,
}


def anchor(heading: str) -> str:
    """The id JupyterLab gives a notebook heading: its text with spaces as '-'
    (@jupyterlab/rendermime 4, renderers.ts, Private.createHeaderId)."""
    return heading.replace(" ", "-")


# --------------------------------------------------------------------------- 1. read


@dataclass(frozen=True)
class Question:
    """One graded cell of the assignment."""

    grade_id: str
    notebook: str
    max_points: float
    autograded: bool  # a test cell the grader scores; else a cell a person grades


@dataclass
class Submission:
    """One student's graded submission, as the gradebook and the grader's records hold it."""

    student: str  # the gradebook's id: never on the page unless --names
    points: dict = field(default_factory=dict)  # grade_id -> score, None while a person has not graded it
    tests: dict = field(default_factory=dict)  # grade_id -> the grader's record (trusted.ScoreAnswers)

    @property
    def total(self) -> float:
        return sum(p for p in self.points.values() if p is not None)


@dataclass
class ClassData:
    assignment: str
    questions: list[Question]
    submissions: list[Submission]
    # every student's (id, first name, last name, email), or a lone id: what an example must not show
    identities: list
    without_record: int = 0  # submissions the grader left no record for (graded before slips were recorded)
    unreadable_record: int = 0  # of those, the ones whose record file could not be read as one
    has_records: bool = True  # the course has a folder of grader records for the assignment at all
    gradebook: str = ""  # the gradebook read, as a URL without its password


def read_class(assignment: str, course_dir: Path, db_url: str | None = None) -> ClassData:
    """The assignment's graded submissions: the gradebook's scores and the grader's per-test records.

    One piece: the gradebook's rows and the grader's records are joined submission by submission, and a
    submission with one unreadable record counts as without any, so no half-read submission reaches the report."""
    from nbgrader.api import (
        Grade,
        Gradebook,
        GradeCell,
        MissingEntry,
        Notebook,
        SolutionCell,
        Student,
        SubmittedAssignment,
        SubmittedNotebook,
    )

    course_dir = Path(course_dir)
    given = db_url
    db_url = db_url or _gradebook_url(course_dir)
    shown = shown_url(db_url)
    if not given and os.environ.get("SERVELAB_GRADEBOOK_URL") and (course_dir / "gradebook.db").is_file():
        shown += f" (SERVELAB_GRADEBOOK_URL, not {course_dir / 'gradebook.db'})"  # both there: say which
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///") :]).is_file():
        # nbgrader would make an empty gradebook there
        raise ClassError(
            f"No gradebook at {db_url[len('sqlite:///') :]}: run this in the course directory "
            "(or give --course DIR), or set SERVELAB_GRADEBOOK_URL to the class's PostgreSQL."
        )
    try:
        gb = Gradebook(db_url)
    except Exception as exc:  # noqa: BLE001 - nbgrader raises whatever SQLAlchemy does
        raise ClassError(
            f"Could not open the gradebook ({type(exc).__name__}): check --course or "
            "SERVELAB_GRADEBOOK_URL, the one the graders wrote to."
        ) from None
    with gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise ClassError(
                f"The gradebook has no assignment {assignment!r}: run nbgrader generate_assignment "
                f"{assignment} and grade it first (known: {', '.join(a.name for a in gb.assignments)})."
            ) from None
        db = gb.db
        answer_cells = {
            (nb, name)
            for name, nb in db.query(SolutionCell.name, Notebook.name)
            .join(Notebook, SolutionCell.notebook_id == Notebook.id)
            .filter(Notebook.assignment_id == found.id)
        }
        questions = [
            Question(name, nb, float(points or 0), (nb, name) not in answer_cells and kind == "code")
            for name, nb, points, kind in db.query(
                GradeCell.name, Notebook.name, GradeCell.max_score, GradeCell.cell_type
            )
            .join(Notebook, GradeCell.notebook_id == Notebook.id)
            .filter(Notebook.assignment_id == found.id)
        ]
        # One query for every grade of the class: the ORM's lazy loads would cost one round trip per grade.
        rows = (
            db.query(
                Student.id,
                Notebook.name,
                GradeCell.name,
                Grade.auto_score,
                Grade.manual_score,
                Grade.extra_credit,
                Grade.needs_manual_grade,
            )
            .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
            .join(SubmittedNotebook, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Grade, Grade.notebook_id == SubmittedNotebook.id)
            .join(GradeCell, Grade.cell_id == GradeCell.id)
            .join(Notebook, GradeCell.notebook_id == Notebook.id)
            .filter(SubmittedAssignment.assignment_id == found.id)
            .all()
        )
        identities = [
            tuple(str(x or "") for x in row)
            for row in db.query(Student.id, Student.first_name, Student.last_name, Student.email)
        ]
    by_student: dict[str, Submission] = {}
    autograded = {q.grade_id for q in questions if q.autograded}
    for student, _nb, name, auto, manual, extra, needs_manual in rows:
        sub = by_student.setdefault(student, Submission(student))
        if manual is not None:  # nbgrader's Grade.score: a person's score wins over the autograder's
            score = manual + (extra or 0.0)
        elif auto is not None and (name in autograded or not needs_manual):
            score = auto + (extra or 0.0)
        else:
            score = None
        sub.points[name] = score
    submissions = sorted(by_student.values(), key=lambda s: s.student)
    if not submissions:
        raise ClassError(
            f"No submission of {assignment} is graded in the gradebook yet: collect and autograde "
            "first (nbgrader autograde, or python -m servelab.grading.parallel)."
        )
    notebooks = sorted({q.notebook for q in questions})
    records = course_dir / trusted.REPORT_DIR / assignment
    has_records = records.is_dir()
    if has_records and not any((records / s.student).is_dir() for s in submissions):
        # The graders write a record beside every grade: a gradebook none of whose students has one here
        # is another course's (SERVELAB_GRADEBOOK_URL left set from another class, or the wrong --course).
        raise ClassError(
            f"None of the {len(submissions)} submissions in the gradebook {shown_url(db_url)} has a "
            f"grader record in {records}: that gradebook is not this course's. Give the course's "
            "--course, or --db-url / SERVELAB_GRADEBOOK_URL for its gradebook."
        )
    without = unreadable = 0
    for sub in submissions:
        bad = False
        for nb in notebooks:
            record = _read_record(course_dir, assignment, sub.student, nb)
            bad |= record is None
            sub.tests.update(record or {})
        if bad:  # one notebook's record unreadable: the whole submission counts as without one
            sub.tests.clear()
        without += not sub.tests
        unreadable += bad
    return ClassData(
        assignment,
        sorted(questions, key=_cell_order(assignment)),
        submissions,
        identities,
        without,
        unreadable,
        has_records,
        shown,
    )


def shown_url(url: str) -> str:
    """A gradebook URL as the page and the command show it: without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: show its scheme only
        return url.split("://", 1)[0] + "://…"


def _gradebook_url(course_dir: Path) -> str:
    from servelab.grading import pipeline

    return pipeline.gradebook_url(course_dir)


def _cell_order(assignment: str):
    """Questions in the order the notebook asks them (the gradebook keeps no order), unknown ones last."""
    order: dict[str | None, int] = {}  # a cell without a grade_id files under None
    for path in sorted((course.SOLUTIONS / assignment).glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text())["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for cell in cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            order.setdefault(grade_id, len(order))
    return lambda q: (order.get(q.grade_id, len(order)), q.notebook, q.grade_id)


RECORD_BYTES = 4 * 1024 * 1024  # a grader's record is some kilobytes (REPORT_ANSWER_CHARS per test); more is not one


def _read_record(course_dir: Path, assignment: str, student: str, notebook: str) -> dict | None:
    """grade_id -> the grader's record for one submission: only plain, well-typed values survive.
    {} where there is none; None where the file is not a record (not a regular file, too big, not JSON,
    nested too deep, not an object): the report treats both as no record, and counts the second."""
    reports = (course_dir / trusted.REPORT_DIR).resolve()
    folder = (reports / assignment / student).resolve()
    if folder != reports and reports not in folder.parents:  # a student id is a name a student chose
        return {}
    if folder != reports.joinpath(assignment, student) and folder.exists():
        return None  # a link on the way: another student's record, or one that moved
    report = _load_record(folder / f"{notebook}.json")  # the file itself is not followed if a link
    if report is None or not isinstance(report, dict):
        return None if report is not _MISSING else {}
    tests = report.get("tests")
    out = {}
    for grade_id, record in tests.items() if isinstance(tests, dict) else ():
        if not isinstance(record, dict):
            continue
        slips = record.get("slips")
        slips = (
            {_text(k, 80): shorten(_text(v, 1200), 600) for k, v in slips.items()} if isinstance(slips, dict) else {}
        )
        points = record.get("points")
        out[_text(grade_id, 200)] = {
            "points": float(points) if isinstance(points, (int, float)) and math.isfinite(points) else 0.0,
            "slips": slips,
            "answered": record.get("answered") is not False,
            "answer": _text(
                record.get("answer") if isinstance(record.get("answer"), str) else "", trusted.REPORT_ANSWER_CHARS
            ),
            "copied_from": _ids(record.get("copied_from")),
        }
    return out


COPIED_IDS = 50  # classmates named on one answer's copied_from: more than this is not a record of one answer


def _ids(value) -> list[str]:
    """A record's copied_from (the classmates whose variant the answer fits: servelab.variants.grading.check)
    as plain student ids; anything but a list of strings is none."""
    if not isinstance(value, list):
        return []
    return [_text(v, 200) for v in value[:COPIED_IDS] if isinstance(v, str) and v]


_MISSING = object()


def _load_record(path: Path):
    """The JSON in `path`, _MISSING if there is no file, None if it cannot be a record. The file is opened
    without following a link and without blocking (a FIFO there would hang a plain open), then checked to
    be a regular file under RECORD_BYTES before a byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return _MISSING
    except OSError:  # a link (ELOOP), no permission
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > RECORD_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(RECORD_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _text(value, limit: int) -> str:
    """A string as the page can hold it: lone surrogates (JSON's "\\ud800") replaced, cut to `limit`."""
    return str(value)[:limit].encode("utf-8", "replace").decode("utf-8")


# --------------------------------------------------------------------------- 2. question statistics


def point_biserial(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r of xs and ys (the point-biserial when xs is right/wrong); None when either has no spread."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(sxx * syy)


@dataclass
class SlipStats:
    grade_id: str
    slip: str
    about: str  # what the slip is, in the key's words
    count: int  # submissions that made it
    share: float  # count / submissions
    points_lost: float
    example: str  # the commonest answer among those who made it, anonymised; "" if fewer than K gave it
    example_count: int  # how many gave that same (normalised) answer
    students: list[str] = field(default_factory=list)  # only filled with names=True
    section: str = ""  # the lesson heading that teaches it
    made_by: frozenset = frozenset()  # who made it: only to count a slip across questions, never shown


# When a question needs a look, as PrairieLearn's question statistics put it (its instructor page of an assessment's
# question statistics, apps/prairielearn/src/pages/instructorAssessmentQuestionStatistics in PrairieLearn/PrairieLearn):
# "Discrimination values should be above 20%, unless a question is very easy (mean score above 95%), in which case
# it is acceptable to have lower discriminations"; easy means a mean above 90%, hard below 50%. PrairieLearn shows
# the mean, the SD and the discrimination of each question; a mean near zero is this report's own flag, the mirror
# of the very easy one (nobody scored: the question or its key is the first suspect).
DISCRIMINATION_MIN = 0.20
VERY_EASY = 0.95  # of the question's points
NEAR_ZERO = 0.05
# The interval of the discrimination index: a percentile bootstrap over submissions, seeded (the page is the same
# every run). Not Fisher's z: its interval assumes the two scores are jointly normal, and a question's points take
# two or three values while a small class repeats a few score patterns; on the sample class (11 submissions, 4
# patterns) Fisher's z gives 0.51-0.96 around 0.85 though the index rests on the one empty submission. Resampling
# the submissions shows that: a resample without it has no spread, and the index is not defined there.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 25
CONFIDENCE = 0.95
UNDEFINED_MAX = 0.05  # more resamples than this without spread: too uniform to judge
# The bootstrap counts every submission as a student of its own; copies of one hand-in (the sample class holds
# seven of the partial sample's pattern) are one. Below this many different score patterns no index is judged:
# by Fisher's z over k independent points, 0.85 (the sample class's) clears 0.20 at 95% from about k = 7, and
# with k = 10 by a margin (lower bound 0.47), while an index of 0.6 does not clear it until k = 19.
MIN_PATTERNS = 10


@dataclass
class Discrimination:
    """The discrimination index with what it can be trusted for: its interval, and whether it rests on one submission."""

    value: float | None
    low: float | None = None  # the CONFIDENCE bootstrap interval over the resamples where it is defined
    high: float | None = None
    undefined: float = 0.0  # share of resamples with no spread in the question's points or the rest
    without_one: float | None = None  # the index without the submission that moves it most (None: not defined then)
    moved_by_one: bool = False  # leaving one submission out changes the verdict (or leaves no spread)
    patterns: int | None = None  # different score patterns in the class (None: not counted)

    @property
    def too_alike(self) -> bool:
        return self.patterns is not None and self.patterns < MIN_PATTERNS

    @property
    def judged(self) -> bool:
        """Whether the class says anything about this question's discrimination."""
        return (
            self.value is not None
            and self.low is not None
            and self.undefined <= UNDEFINED_MAX
            and not self.too_alike
            and not self.moved_by_one
        )


def discrimination(xs: list[float], ys: list[float], resamples: int = BOOTSTRAP_RESAMPLES) -> Discrimination:
    """The point-biserial of xs against ys, its bootstrap interval and its leave-one-out check."""
    import numpy as np

    value = point_biserial(xs, ys)
    if value is None:
        return Discrimination(None)
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    n = len(x)
    # A resample as how many times it draws each submission: its sums are one product with those counts (the same
    # counts for every question of the class: drawn once, _resample_counts).
    counts = _resample_counts(n, resamples)
    sums = np.einsum("bn,kn->kb", counts, np.stack([x, y, x * x, y * y, x * y]))
    r, ok = _pearson_from_sums(n, *sums)
    defined = r[ok]
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = (float(v) for v in np.percentile(defined, [tail, 100 - tail])) if len(defined) else (None, None)
    # Leave one out: every submission's removal at once, from the class's sums less its own.
    sums = [v.sum() - v for v in (x, y, x * x, y * y, x * y)]
    loo, loo_ok = _pearson_from_sums(n - 1, *sums)
    if not loo_ok.all():
        without_one, moved = None, True
    else:
        worst = int(np.argmax(np.abs(loo - value)))
        without_one = float(loo[worst])
        moved = (without_one >= DISCRIMINATION_MIN) != (value >= DISCRIMINATION_MIN) or (without_one >= 0) != (
            value >= 0
        )
    return Discrimination(value, low, high, float(1 - ok.mean()), without_one, bool(moved))


@functools.lru_cache(maxsize=4)
def _resample_counts(n: int, resamples: int):
    """resamples x n: how many times each bootstrap resample (n draws with replacement, BOOTSTRAP_SEED) draws
    each of n submissions."""
    import numpy as np

    draws = np.random.default_rng(BOOTSTRAP_SEED).integers(0, n, size=(resamples, n))
    flat = (draws + np.arange(resamples)[:, None] * n).ravel()
    counts = np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(float)
    counts.flags.writeable = False
    return counts


def _pearson_from_sums(n, sx, sy, sxx, syy, sxy):
    """Pearson's r from n and the sums of x, y, x², y² and xy (arrays of them), and where it is defined (both
    spread: a variance above rounding error)."""
    import numpy as np

    vx, vy = sxx - sx * sx / n, syy - sy * sy / n
    ok = (vx > 1e-9 * np.maximum(1.0, sxx)) & (vy > 1e-9 * np.maximum(1.0, syy))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(ok, (sxy - sx * sy / n) / np.sqrt(np.where(ok, vx * vy, 1.0)), np.nan)
    return np.clip(r, -1.0, 1.0), ok


@dataclass
class QuestionStats:
    question: Question
    graded: int  # submissions with a score for it
    mean: float | None
    distribution: dict  # points -> submissions, sorted by points
    blank: int | None  # no answer reached the grader; None (unknown) where the course has no grader records
    discrimination: float | None
    slips: list[SlipStats] = field(default_factory=list)
    unnamed_wrong: int = 0  # answers below full points with no slip named
    sd: float | None = None  # the sample standard deviation of its points
    index: Discrimination | None = None  # the discrimination with its interval (autograded questions)

    @property
    def flags(self) -> list[str]:
        """Why the question needs a look, each in a few words (PrairieLearn's guide, DISCRIMINATION_MIN and VERY_EASY)."""
        if self.mean is None or not self.question.max_points:
            return []
        share = self.mean / self.question.max_points
        out = []
        if share > VERY_EASY:
            out.append(f"nearly everyone scored full points (mean above {VERY_EASY:.0%})")
        elif share < NEAR_ZERO:
            out.append(f"nearly nobody scored (mean below {NEAR_ZERO:.0%}): check the question and its key")
        d = self.index
        if d is not None and d.value is not None and share <= VERY_EASY:
            if d.value < 0:
                out.append(
                    "negative discrimination: the students with more of the rest scored less here (check the key)"
                )
            elif d.value < DISCRIMINATION_MIN:
                out.append(f"low discrimination (below {DISCRIMINATION_MIN:.2f})")
        return out

    @property
    def verdict(self) -> str:
        """What the discrimination says, in one phrase, with its interval."""
        d = self.index
        if d is None or d.value is None:
            return "not defined: every submission scored the same here, or on the rest"
        interval = f"95% interval {_num(d.low)} to {_num(d.high)}" if d.low is not None else "no interval"
        if not d.judged:
            why = []
            if d.moved_by_one:
                why.append(
                    "leaving one submission out "
                    + ("leaves no spread" if d.without_one is None else f"makes it {_num(d.without_one)}")
                )
            if d.undefined > UNDEFINED_MAX:
                why.append(f"{d.undefined:.0%} of resamples have no spread")
            if d.too_alike:
                why.append(f"only {d.patterns} different score patterns, fewer than {MIN_PATTERNS}")
            return f"too few or too alike to judge ({interval}; {'; '.join(why) or 'too few submissions'})"
        if d.high is not None and d.high < DISCRIMINATION_MIN:
            return f"low ({interval})"
        if d.low is not None and d.low >= DISCRIMINATION_MIN:
            return f"separates the class ({interval})"
        return f"uncertain: the interval spans {DISCRIMINATION_MIN:.2f} ({interval})"


def hand_grading_done(data: ClassData) -> bool:
    """Whether a person has scored every hand-graded cell of every submission."""
    return all(
        s.points.get(q.grade_id) is not None for q in data.questions if not q.autograded for s in data.submissions
    )


def question_stats(data: ClassData, names: bool = False) -> list[QuestionStats]:
    """Per graded cell: mean, distribution, blanks, discrimination (autograded) or the distribution once graded.
    Until hand grading is done, an autograded question's discrimination is against the rest of the autograded
    points only: a total with some hand scores in and some not would move the index as grading goes on."""
    out = []
    auto_only = not hand_grading_done(data)
    autograded = {q.grade_id for q in data.questions if q.autograded}
    scrub = _scrubber(data)  # one for the class: it reads every answer
    patterns = score_patterns(data)
    for q in data.questions:
        scored = [(s, s.points.get(q.grade_id)) for s in data.submissions]
        done = [(s, p) for s, p in scored if p is not None]
        if not q.autograded and len(done) < len(scored):
            out.append(QuestionStats(q, len(done), None, {}, 0, None))  # the distribution waits for the last grade
            continue
        own = [p for _, p in done]
        rest = [(_auto_total(s, autograded) if auto_only else s.total) - p for s, p in done]
        blank = (
            sum(1 for s, _ in done if q.autograded and s.tests.get(q.grade_id, {}).get("answered") is False)
            if data.has_records
            else None
        )
        index = discrimination(own, rest) if q.autograded else None
        if index is not None:
            index.patterns = patterns
        stats = QuestionStats(
            q,
            len(done),
            sum(own) / len(own) if own else None,
            dict(sorted(Counter(round(p, 3) for p in own).items())),
            blank,
            index.value if index is not None else point_biserial(own, rest),
            sd=_sd(own),
            index=index,
        )
        if q.autograded:
            stats.slips, stats.unnamed_wrong = slip_stats(q, done, data, names, scrub)
        out.append(stats)
    return out


def _sd(xs: list[float]) -> float | None:
    """The sample standard deviation (n - 1); None for fewer than two."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def score_patterns(data: ClassData) -> int:
    """How many different score patterns (every question's points) the class's submissions have."""
    return len({tuple(s.points.get(q.grade_id) for q in data.questions) for s in data.submissions})


def _auto_total(sub: Submission, autograded: set[str]) -> float:
    return sum(p for g, p in sub.points.items() if g in autograded and p is not None)


# --------------------------------------------------------------------------- 3. slips


def slip_stats(
    q: Question, done: list, data: ClassData, names: bool = False, scrub=None
) -> tuple[list[SlipStats], int]:
    """Each slip named on a question: who made it, what it cost, one anonymised example; and wrong answers unnamed."""
    made: dict[str, list] = defaultdict(list)
    about: dict[str, str] = {}
    lost: Counter = Counter()
    unnamed = 0
    for sub, points in done:
        record = sub.tests.get(q.grade_id)
        if not record or record.get("answered") is False:
            continue
        slips = record["slips"]
        if not slips:
            unnamed += points < q.max_points - 1e-9
            continue
        for slip, what in slips.items():
            made[slip].append(sub)
            about.setdefault(slip, what)
            lost[slip] += max(0.0, q.max_points - points) / len(slips)
    scrub = scrub or _scrubber(data)
    out = []
    for slip, subs in made.items():
        example, example_count = _example([answer_text(s.tests[q.grade_id]["answer"]) for s in subs], scrub)
        out.append(
            SlipStats(
                q.grade_id,
                slip,
                about[slip],
                len(subs),
                len(subs) / len(done),
                round(lost[slip], 3),
                example,
                example_count,
                sorted(shown_id(s.student) for s in subs) if names else [],
                TEACHES.get(q.grade_id, ""),
                frozenset(s.student for s in subs),
            )
        )
    out.sort(key=lambda s: (-s.points_lost, -s.count, s.slip))
    return out, unnamed


def shown_id(student: str) -> str:
    """A student id as --names shows it: without control, bidi and zero-width characters (an id a student
    chose could reverse the text after it, or hide a line break in the CSV)."""
    return "".join(ch for ch in student if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")) or "?"


def _example(answers: list[str], scrub) -> tuple[str, int]:
    """The commonest answer, scrubbed, and how many gave it; ("", n) when fewer than EXAMPLE_MIN_STUDENTS gave it."""
    groups: dict[str, list[str]] = defaultdict(list)
    for text in answers:
        if text.strip():
            groups[" ".join(normalise(text).split())].append(text)
    if not groups:
        return "", 0
    key, texts = min(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    if len(texts) < EXAMPLE_MIN_STUDENTS:
        return "", len(texts)
    return scrub(min(texts)), len(texts)


def answer_text(recorded: str) -> str:
    """The answer as the student wrote it: the grader records it as JSON text with non-ASCII escaped
    ("Jos\\u00e9", "a\\nb"); a string decodes to itself, anything else to JSON without the escapes.
    Text that is not JSON within ANSWER_JSON_CHARS and ANSWER_JSON_DEPTH (the grader cuts long answers)
    has its string escapes decoded only."""
    value = _bounded_json(recorded)
    if value is _NOT_JSON:
        return _JSON_ESCAPE.sub(_unescape, recorded)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_NOT_JSON = object()
_JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')


def _unescape(m: re.Match) -> str:
    code = m.group(1)
    return chr(int(code[1:], 16)) if code[0] == "u" else json.loads(f'"\\{code}"')


def _bounded_json(text: str):
    if len(text) > ANSWER_JSON_CHARS:
        return _NOT_JSON
    depth = deepest = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', text):  # brackets inside strings do not nest
        depth += (ch in "[{") - (ch in "]}")
        deepest = max(deepest, depth)
    if deepest > ANSWER_JSON_DEPTH:
        return _NOT_JSON
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def normalise(text: str) -> str:
    """Text as it is compared: NFKC, casefolded, accents, zero-width, bidi and control characters taken out
    (so "José", "JOSE" and "Jo\u200bse" are one word; a line break is a space)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = unicodedata.normalize("NFKD", text)
    text = "".join(
        " " if ch in "\n\r\t" else ch
        for ch in text
        if not unicodedata.combining(ch) and unicodedata.category(ch) not in ("Cc", "Cf") or ch in "\n\r\t"
    )
    return unicodedata.normalize("NFC", text)


_TOKEN = re.compile(r"\w+")


def identity_tokens(identities) -> set[str]:
    """The normalised words that name a student: each id, first and last name, the email's local part,
    and each word of those of two characters or more (a part of a multi-word name)."""
    words = set()
    for ident in identities:
        ident = ident.split("@", 1)[0] if "@" in ident else ident
        n = normalise(ident).strip()
        if len(n) >= 2:
            words.add(n)
        words.update(w for w in _TOKEN.findall(n) if len(w) >= 2)
    return words


def _scrubber(data: ClassData):
    """A function that takes every student's id, names and email's local part out of a text, word by word
    (compared normalised), and what could hide them (control, zero-width and bidi characters).

    A number is never taken out. A word of an id or of an email's local part (a name a student chose) is
    left alone when at least EXAMPLE_MIN_STUDENTS students, other than the one it names, wrote it in their
    answers: it is the class's word then ("32", "batching", "no"), and taking it out would rewrite
    everyone's examples ("2.[a student] GB"). First and last names are always taken out."""
    owners: dict[str, set[str]] = defaultdict(set)  # an id's words -> the students they name
    always: set[str] = set()
    for person in data.identities:
        sid, first, last, email = (((person,) if isinstance(person, str) else tuple(person)) + ("",) * 3)[:4]
        for word in identity_tokens([sid, email]):
            owners[word].add(sid)
        always |= identity_tokens([first, last])
    writers: dict[str, set[str]] = defaultdict(set)
    for sub in data.submissions:
        for record in sub.tests.values():
            for word in _TOKEN.findall(normalise(answer_text(record.get("answer") or ""))):
                if word in owners:
                    writers[word].add(sub.student)
    names = {
        w
        for w in always | {w for w, who in owners.items() if len(writers[w] - who) < EXAMPLE_MIN_STUDENTS}
        if not _is_number(w)
    }

    def scrub(text: str) -> str:
        text = "".join(
            " " if unicodedata.category(ch) == "Cc" else ch for ch in text if unicodedata.category(ch) != "Cf"
        )
        text = " ".join(text.split())
        text = _TOKEN.sub(lambda m: "[a student]" if normalise(m.group()) in names else m.group(), text)
        return shorten(text, EXAMPLE_CHARS)

    return scrub


def shorten(text: str, limit: int) -> str:
    """text in at most `limit` characters, cut between words (at a space past half the limit) with "…"; a
    text without such a space (one long token) is cut where the limit falls."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- 4. what to re-teach


@dataclass
class Reteach:
    """One slip in the "what to re-teach" list, over every question it was made on."""

    slip: str
    about: str
    count: int  # students who made it on any question
    points_lost: float  # on all those questions together
    grade_ids: list[str]  # the questions, in the order the notebook asks them
    sections: list[str]  # the lesson headings that teach them, each once, first first

    @property
    def grade_id(self) -> str:
        return self.grade_ids[0]

    @property
    def section(self) -> str:
        return self.sections[0] if self.sections else ""


def reteach(stats: list[QuestionStats], n: int = RETEACH) -> list[Reteach]:
    """The n slips that cost the class most points, a slip's points summed over the questions it was made on
    (one slip on two questions is one thing to re-teach); ties: more students, then the one asked first."""
    by_slip: dict[str, list[SlipStats]] = defaultdict(list)
    first: dict[str, int] = {}
    for i, q in enumerate(stats):
        for s in q.slips:
            by_slip[s.slip].append(s)
            first.setdefault(s.slip, i)
    out = []
    for slip, made in by_slip.items():
        lost = round(sum(s.points_lost for s in made), 3)
        if lost > 0:
            out.append(
                Reteach(
                    slip,
                    made[0].about,
                    len(frozenset().union(*(s.made_by for s in made))),
                    lost,
                    [s.grade_id for s in made],
                    list(dict.fromkeys(s.section for s in made if s.section)),
                )
            )
    return sorted(out, key=lambda r: (-r.points_lost, -r.count, first[r.slip], r.slip))[:n]


# --------------------------------------------------------------------------- 4b. variants

# The parameter each variant question's students are grouped by: the one its generator draws that most
# changes the work (servelab.variants.questions). A number with more than VARIANT_VALUES values is cut at the
# class's median into a low and a high range; a string, or a number with few values, groups by value.
VARIANT_BY = {
    "warmup1": "tokens_per_sequence",
    "warmup2": "dtype",
    "warmup3": "batch",
    "practice1": "users",
    "practice4": "tensor_parallel_size",
    "capacity-context": "new_context",
    "capacity-sessions": "context",
    "capacity-bandwidth": "dtype",
    "capacity-transfer": "prompt_tokens",
    "break-even": "k",
    "littles-law": "in_flight",
}
VARIANT_VALUES = 3
# Fewer students than this in a range and the ranges are not compared: a mean of four scores of 0 or 1 moves by a
# quarter with one student.
VARIANT_MIN_GROUP = 8


@dataclass
class VariantGroup:
    """The students whose variant's parameter falls in one range, and how they scored on the question."""

    label: str  # "tokens_per_sequence 1,024 to 60,416", "dtype = fp8"
    n: int
    mean: float  # share of the question's points (0 to 1)
    low: float | None = None  # the CONFIDENCE bootstrap interval of the mean
    high: float | None = None
    students: list[str] = field(default_factory=list)  # only filled with names=True


@dataclass
class VariantStats:
    """One variant question: its students grouped by a drawn parameter, and whether one range is harder."""

    question: str  # the variant question's id (servelab.variants.questions)
    title: str
    parameter: str
    grade_ids: list[str]  # its parts that this assignment grades
    groups: list[VariantGroup]
    verdict: str
    harder: str | None = None  # the label of the range that is clearly harder, else None
    difference: tuple[float, float] | None = None  # the bootstrap interval of (easiest mean - hardest mean)


@dataclass(frozen=True)
class CopiedAnswer:
    """An answer that missed its own variant but fits a classmate's in full (the grader's copied_from)."""

    grade_id: str
    student: str
    copied_from: tuple[str, ...]


def course_variant_secret() -> bytes | None:
    """The course secret the release made the variants with, or None where there is none here (a course
    released without variants: the report then shows no variant section)."""
    from servelab.variants import seeds

    try:
        return seeds.course_secret(create=False)
    except seeds.SecretError:
        return None


def variant_groups(values: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """Students grouped by one parameter's value (student -> value): by value for a string or a number with at
    most VARIANT_VALUES values, else a low and a high range cut at the median (the median's own students low)."""
    distinct = sorted(set(values.values()), key=lambda v: (isinstance(v, str), v))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct)
    if not numeric or len(distinct) <= VARIANT_VALUES:
        return [(f"= {v}", sorted(s for s, x in values.items() if x == v)) for v in distinct]
    ordered = sorted(values.values())
    cut = ordered[(len(ordered) - 1) // 2]
    out = []
    for members in ([s for s, v in values.items() if v <= cut], [s for s, v in values.items() if v > cut]):
        vs = [values[s] for s in members]
        out.append((f"{_value(min(vs))} to {_value(max(vs))}", sorted(members)))
    return out


def _value(v) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:,g}"


def _bootstrap_means(scores: list[float], rng) -> Any:
    import numpy as np

    x = np.asarray(scores, float)
    return x[rng.integers(0, len(x), size=(BOOTSTRAP_RESAMPLES, len(x)))].mean(axis=1)


def _verdict(
    groups: list[VariantGroup], draws: dict[str, Any], compared: int = 1
) -> tuple[str, str | None, tuple | None]:
    """What the groups say, in one phrase (the words of QuestionStats.verdict for a class too small or too alike).
    The difference's interval is widened for the `compared` questions read together (Bonferroni: each at
    1 - (1 - CONFIDENCE) / compared), so a class whose ranges differ by chance alone calls none harder, at 95%."""
    import numpy as np

    if len(groups) < 2:
        return "too few or too alike to judge (every student drew the same value)", None, None
    small = [g for g in groups if g.n < VARIANT_MIN_GROUP]
    if small:
        why = "; ".join(f"{g.label}: {g.n} students" for g in small)
        return f"too few or too alike to judge ({why}, fewer than {VARIANT_MIN_GROUP} in a range)", None, None
    hardest = min(groups, key=lambda g: (g.mean, g.label))
    easiest = max(groups, key=lambda g: (g.mean, g.label))
    if easiest.mean - hardest.mean <= 1e-12:
        return "too few or too alike to judge (every range scored the same mean)", None, None
    tail = (1 - CONFIDENCE) / 2 / max(compared, 1) * 100
    low, high = (float(v) for v in np.percentile(draws[easiest.label] - draws[hardest.label], [tail, 100 - tail]))
    shown = f"{100 - 2 * tail:.4g}% interval" + (f" over {compared} questions" if compared > 1 else "")
    interval = f"difference {_num(easiest.mean - hardest.mean)}, {shown} {_num(low)} to {_num(high)}"
    if low > 0:
        return (
            f"{hardest.label} is harder: mean {_num(hardest.mean)} against {_num(easiest.mean)} for {easiest.label} "
            f"({interval})",
            hardest.label,
            (low, high),
        )
    return f"no range is clearly harder ({interval}, which includes 0)", None, (low, high)


def variant_stats(
    data: ClassData, secret: bytes | None, names: bool = False, by: dict[str, str] | None = None
) -> list[VariantStats]:
    """Per variant question that the assignment grades: its students grouped by a drawn parameter (VARIANT_BY),
    each group's mean share of the question's points with its n and bootstrap interval, and whether one range is
    clearly harder. Each student's parameters come from their gradebook id and the course secret
    (servelab.variants.params_for), never from anything in a hand-in. None without a secret: no variants."""
    import numpy as np

    from servelab.variants import QUESTIONS, params_for

    if secret is None:
        return []
    by = VARIANT_BY if by is None else by
    graded = {q.grade_id: q for q in data.questions if q.autograded}
    out: list[VariantStats] = []
    kept: list[dict] = []  # each question's bootstrap draws of its groups' means
    for vq in QUESTIONS:
        parts = [p.id for p in vq.parts if p.id in graded]
        if not parts or vq.id not in by:
            continue
        full = sum(graded[g].max_points for g in parts)
        scores: dict[str, float] = {}
        for sub in data.submissions:
            got = [sub.points.get(g) for g in parts]
            if full > 0 and all(p is not None for p in got):
                scores[sub.student] = sum(p for p in got if p is not None) / full
        if not scores:
            continue
        values = {s: params_for(vq.id, s, secret=secret, assignment=data.assignment)[by[vq.id]] for s in scores}
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        groups, draws = [], {}
        tail = (1 - CONFIDENCE) / 2 * 100
        for label, members in variant_groups(values):
            label = f"{by[vq.id]} {label}"
            own = [scores[s] for s in members]
            draws[label] = _bootstrap_means(own, rng)
            low, high = (float(v) for v in np.percentile(draws[label], [tail, 100 - tail]))
            groups.append(
                VariantGroup(
                    label, len(own), sum(own) / len(own), low, high, [shown_id(s) for s in members] if names else []
                )
            )
        out.append(VariantStats(vq.id, vq.title, by[vq.id], parts, groups, "", None, None))
        kept.append(draws)
    for v, draws in zip(out, kept):
        v.verdict, v.harder, v.difference = _verdict(v.groups, draws, len(out))
    return out


def copied_answers(data: ClassData) -> list[CopiedAnswer]:
    """Every answer the grader found fitting a classmate's variant instead of its own (its record's copied_from),
    in the order the notebook asks the questions, then by student."""
    order = {q.grade_id: i for i, q in enumerate(data.questions)}
    found = [
        CopiedAnswer(grade_id, sub.student, tuple(record["copied_from"]))
        for sub in data.submissions
        for grade_id, record in sub.tests.items()
        if record.get("copied_from")
    ]
    return sorted(found, key=lambda c: (order.get(c.grade_id, len(order)), c.grade_id, c.student))


# --------------------------------------------------------------------------- the report


@dataclass
class ClassReport:
    assignment: str
    submissions: int
    max_points: float
    mean_total: float
    questions: list[QuestionStats]
    reteach: list[Reteach]
    without_record: int
    names: bool
    lesson: Path = LESSON  # the copy of the lesson the links open
    unreadable_record: int = 0  # of without_record, records there that could not be read as one
    lab_url: str | None = None  # the instructor's JupyterLab, whose /lab/tree the page's links open
    lab_root: Path | None = None  # the folder that JupyterLab serves
    hand_grading_done: bool = True  # else discrimination is against the autograded points only
    gradebook: str = ""  # the gradebook read, without its password
    patterns: int = 0  # different score patterns among the submissions (copies of one hand-in count once)
    variants: list[VariantStats] = field(default_factory=list)  # empty where the course has no variants
    copied: list[CopiedAnswer] = field(default_factory=list)  # answers that fit a classmate's variant

    @property
    def too_small(self) -> bool:
        """Whether the class is too small or too alike for its discrimination indices to say much: no
        autograded question's index can be judged (Discrimination.judged)."""
        indices = [q.index for q in self.questions if q.index is not None and q.index.value is not None]
        return bool(indices) and not any(d.judged for d in indices)


def serving_lab(lesson: Path, runtime_dir: str | None = None) -> tuple[str, Path] | None:
    """(URL, root) of a Jupyter server of this user's running on this machine whose root holds `lesson`: the
    server info files jupyter_server writes in the runtime folder (jpserver-PID.json, with the root it serves and
    its URL, base URL included), a live process's only. The deepest root wins (the closest to the lesson)."""
    from jupyter_server.serverapp import list_running_servers

    found = []
    for info in list_running_servers(runtime_dir):
        root, url = info.get("root_dir"), info.get("url")
        if not isinstance(root, str) or not isinstance(url, str):
            continue
        try:
            Path(lesson).resolve().relative_to(Path(root).resolve())
        except (ValueError, OSError):
            continue
        found.append((len(Path(root).resolve().parts), url, Path(root)))
    if not found:
        return None
    _, url, root = max(found, key=lambda f: f[0])
    return url, root


HUB_COURSE = COURSE_ID  # `servelab class up` makes the course in the first instructor's home (hub.ClassSettings)


def default_course() -> Path:
    """The course the instructor's notebook (class/report.py) reports on when it is not told: the hub's, in this
    instructor's home (~/servelab, where `servelab class up` made it), else this checkout's, where `make grade`
    grades the samples and the Nbgrader menu of `make lab` looks (grading/course)."""
    from servelab.grading import pipeline

    hub = Path.home() / HUB_COURSE
    for folder in (hub, pipeline.COURSE):
        if (folder / "gradebook.db").is_file() or (folder / "nbgrader_config.py").is_file():
            return folder
    raise ClassError(
        f"No course here: neither {hub} (`servelab class up` makes it) nor {pipeline.COURSE} (`make grade` "
        "grades the samples into it). Run one of them, or set COURSE to your course directory."
    )


def lesson_copy(course_dir: Path) -> Path:
    """The lesson the links open: the course's released copy, inside the instructor's JupyterLab, else the repo's."""
    released = Path(course_dir) / "release" / "lesson25" / LESSON.name
    return released if released.is_file() else LESSON


def build(
    assignment: str,
    course_dir: Path,
    db_url: str | None = None,
    names: bool = False,
    lab_url: str | None = None,
    lab_root: Path | None = None,
    secret: bytes | None = None,
) -> ClassReport:
    """Read the class and compute every number the page and the CSV show. The page's links open the lesson
    in the JupyterLab at lab_url serving lab_root. By default: on the hub, this user's server
    (JUPYTERHUB_SERVICE_PREFIX, serving the home folder); else a JupyterLab of this user's running on this
    machine that serves the lesson (`make lab` serves the checkout); else "/" serving the home folder.
    The variant statistics group students by the parameters the course secret gives their ids (`secret`, else
    the course's: course_variant_secret()); without one the report has no variant section."""
    data = read_class(assignment, course_dir, db_url)
    secret = secret if secret is not None else course_variant_secret()
    lesson = lesson_copy(course_dir)
    if lab_url is None and lab_root is None and not os.environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        lab_url, lab_root = serving_lab(lesson) or (None, None)
    stats = question_stats(data, names)
    totals = [s.total for s in data.submissions]
    return ClassReport(
        assignment,
        len(data.submissions),
        sum(q.max_points for q in data.questions),
        sum(totals) / len(totals),
        stats,
        reteach(stats),
        data.without_record,
        names,
        lesson,
        data.unreadable_record,
        lab_url if lab_url is not None else os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/"),
        Path(lab_root) if lab_root is not None else Path.home(),
        hand_grading_done(data),
        data.gradebook,
        score_patterns(data),
        variant_stats(data, secret, names),
        copied_answers(data),
    )


# --------------------------------------------------------------------------- 5. the page and the CSV


def summary(q: QuestionStats) -> str:
    """The chart's text alternative: one sentence."""
    if q.mean is None:
        return (
            f"{q.question.grade_id}: {q.graded} of the submissions graded so far; the distribution is shown "
            "once every one is graded."
        )
    spread = ", ".join(f"{c} scored {_num(p)}" for p, c in q.distribution.items())
    return (
        f"{q.question.grade_id}: mean {_num(q.mean)} of {_num(q.question.max_points)} points over {q.graded}; {spread}."
    )


def _num(x: float | None) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x is not None else "-"


def _chart(q: QuestionStats, div_id: str) -> str:
    """A bar chart of points -> students: numbers and the question id only, nothing a student wrote."""
    import plotly.graph_objects as go
    import plotly.io as pio

    points = list(q.distribution)
    fig = go.Figure(
        go.Bar(
            x=[_num(p) for p in points],
            y=list(q.distribution.values()),
            marker_color="#1f5fa8",
            hovertemplate="%{y} students scored %{x}<extra></extra>",
        )
    )
    fig.update_layout(
        height=240,
        width=420,
        margin=dict(l=50, r=10, t=10, b=45),
        template="simple_white",
        xaxis=dict(title="points", type="category"),
        yaxis=dict(
            title="students", rangemode="tozero", tick0=0, dtick=max(1, math.ceil(max(q.distribution.values()) / 5))
        ),
        font=dict(color="#1a1a1a"),
    )
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        config={"displayModeBar": False, "staticPlot": False, "responsive": False},
    )


def page_link(report: ClassReport, section: str, out_dir: Path) -> str:
    """The page's link to the lesson: in JupyterLab where it serves the lesson, else the file beside the page."""
    if report.lab_url is not None and report.lab_root is not None:
        link = lab_link(section, report.lesson, report.lab_url, report.lab_root)
        if link:
            return link
    return lesson_link(section, out_dir, report.lesson)


def lesson_link(section: str, out_dir: Path, lesson: Path = LESSON) -> str:
    """The lesson notebook at `section`, relative to `out_dir` (JupyterLab opens it at the heading)."""
    rel = os.path.relpath(lesson, out_dir)
    return quote(rel) + "#" + quote(anchor(section), safe=":?,()-")


def lab_link(section: str, lesson: Path, lab_url: str, lab_root: Path) -> str | None:
    """JupyterLab's URL of the lesson at `section`: <lab_url>lab/tree/<path under lab_root>#<heading id>
    (https://jupyterlab.readthedocs.io/en/stable/user/urls.html); None if JupyterLab does not serve it."""
    try:
        rel = Path(lesson).resolve().relative_to(Path(lab_root).resolve())
    except ValueError:
        return None
    return lab_url.rstrip("/") + "/lab/tree/" + quote(rel.as_posix()) + "#" + quote(anchor(section), safe=":?,()-")


def render_html(report: ClassReport, out_dir: Path) -> str:
    import jinja2
    from plotly.offline import get_plotlyjs

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)), autoescape=True, undefined=jinja2.StrictUndefined
    )
    charts = {
        q.question.grade_id: _chart(q, f"chart-{i}") for i, q in enumerate(report.questions) if q.mean is not None
    }
    return env.get_template(TEMPLATE.name).render(
        r=report,
        charts=charts,
        summary=summary,
        num=_num,
        link=lambda s: page_link(report, s, out_dir),
        # JupyterLab 4's HTML viewer frames a page with sandbox="allow-same-origin", plus "allow-scripts
        # allow-popups" once trusted (@jupyterlab/htmlviewer, widget.ts, Private.trusted): a link can open a
        # new tab (target=_blank), not navigate the top window, and a link inside the frame to /files/ is refused.
        in_lab=report.lab_url is not None
        and report.lab_root is not None
        and lab_link("", report.lesson, report.lab_url, report.lab_root) is not None,
        plotlyjs=get_plotlyjs(),
        lesson=LESSON.name,
        k=EXAMPLE_MIN_STUDENTS,
        resamples=BOOTSTRAP_RESAMPLES,
        min_discrimination=DISCRIMINATION_MIN,
        very_easy=VERY_EASY,
        min_patterns=MIN_PATTERNS,
        variant_min_group=VARIANT_MIN_GROUP,
        shown_id=shown_id,
        section_id=lambda gid: "q-" + re.sub(r"[^A-Za-z0-9_-]", "-", gid),
        Markup=jinja2.utils.markupsafe.Markup,
    )


CSV_FIELDS = (
    "assignment",
    "grade_id",
    "kind",
    "slip",
    "about",
    "max_points",
    "graded",
    "mean_points",
    "blank",
    "discrimination",
    "discrimination_low",
    "discrimination_high",
    "sd",
    "needs_a_look",
    "students_with_slip",
    "share",
    "points_lost",
    "teaches",
    "students",
)


# A course with variants adds a row per range of each variant question (kind "variant range"), with these columns.
# range_mean and its interval (range_low, range_high) are the range's mean share of the question's points, 0 to 1.
VARIANT_CSV_FIELDS = ("parameter", "range", "range_mean", "range_low", "range_high", "verdict")


def render_csv(report: ClassReport) -> str:
    buf = io.StringIO()
    w = _SafeWriter(buf, CSV_FIELDS + (VARIANT_CSV_FIELDS if report.variants else ()))
    w.writeheader()
    for q in report.questions:
        base = {
            "assignment": report.assignment,
            "grade_id": q.question.grade_id,
            "kind": "autograded" if q.question.autograded else "hand-graded",
            "max_points": q.question.max_points,
            "graded": q.graded,
        }
        w.writerow(
            {
                **base,
                "mean_points": "" if q.mean is None else round(q.mean, 4),
                "blank": "unknown" if q.blank is None else q.blank,
                "discrimination": "" if q.discrimination is None else round(q.discrimination, 4),
                "discrimination_low": "" if q.index is None or q.index.low is None else round(q.index.low, 4),
                "discrimination_high": "" if q.index is None or q.index.high is None else round(q.index.high, 4),
                "sd": "" if q.sd is None else round(q.sd, 4),
                "needs_a_look": "; ".join(q.flags),
                "teaches": TEACHES.get(q.question.grade_id, ""),
            }
        )
        for s in q.slips:
            w.writerow(
                {
                    **base,
                    "slip": s.slip,
                    "about": s.about,
                    "students_with_slip": s.count,
                    "share": round(s.share, 6),
                    "points_lost": s.points_lost,
                    "teaches": s.section,
                    "students": " ".join(s.students),
                }
            )
    for v in report.variants:
        for g in v.groups:
            w.writerow(
                {
                    "assignment": report.assignment,
                    "grade_id": " ".join(v.grade_ids),
                    "kind": "variant range",
                    "graded": g.n,
                    "parameter": v.parameter,
                    "range_mean": round(g.mean, 4),
                    "range": g.label,
                    "range_low": "" if g.low is None else round(g.low, 4),
                    "range_high": "" if g.high is None else round(g.high, 4),
                    "verdict": v.verdict,
                    "students": " ".join(g.students),
                }
            )
    return buf.getvalue()


def csv_cell(value):
    """A value a spreadsheet shows as text: one that starts with = + - @, a tab or a line break (a formula to
    a spreadsheet: OWASP, "CSV Injection") gets a leading apostrophe, unless it is a number."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r", "\n"):
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value


class _SafeWriter(csv.DictWriter):
    def writerow(self, row):
        return super().writerow({k: csv_cell(v) for k, v in row.items()})


def write(report: ClassReport, out_dir: Path) -> tuple[Path, Path]:
    """<out>/<assignment>-class-report.html and .csv; their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"{report.assignment}-class-report.html"
    csv_path = out_dir / f"{report.assignment}-class-report.csv"
    page, table = render_html(report, out_dir.resolve()), render_csv(report)  # both made before either is written
    _write_atomically(html_path, page)
    _write_atomically(csv_path, table)
    return html_path, csv_path


def _write_atomically(path: Path, text: str) -> None:
    """`path` holds the whole text or what it held before, never a part: a temporary file beside it, then
    os.replace. A character UTF-8 cannot hold (a lone surrogate) is written as "?"."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def reteach_markdown(report: ClassReport, from_dir: Path) -> str:
    """The re-teach list as Markdown with links JupyterLab opens at the heading (the instructor notebook's cell)."""
    lines = [f"**What to re-teach in {report.assignment}** ({report.submissions} submissions):", ""]
    for i, s in enumerate(report.reteach, 1):
        sections = ", ".join(f"[{_md(h)}]({lesson_link(h, from_dir, report.lesson)})" for h in s.sections)
        lines.append(
            f"{i}. {_md(s.about)} ({', '.join(s.grade_ids)}: {s.count} students, "
            f"{_num(s.points_lost)} points) -> {sections or 'no lesson section'}"
        )
    return "\n".join(lines if report.reteach else lines + ["Nothing: no named slip cost the class points."])


def _md(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def variants_markdown(report: ClassReport) -> str:
    """The variant questions' verdicts and the answers that fit a classmate's variant, as Markdown (the
    instructor notebook's cell); "" where the course has neither."""
    lines = []
    if report.variants:
        lines += [f"**Variant questions of {report.assignment}**, by one drawn parameter:", ""]
        lines += [f"- {_md(v.title)} (`{v.question}`): {_md(v.verdict)}." for v in report.variants]
    if report.copied:
        who = "" if report.names else " (`NAMES = True` shows whose)"
        lines += ["", f"**{len(report.copied)} answers fit a classmate's variant instead of their own**{who}:", ""]
        for c in report.copied:
            mine = f"{_md(shown_id(c.student))}'s " if report.names else "an "
            theirs = ", ".join(_md(shown_id(s)) for s in c.copied_from) if report.names else f"{len(c.copied_from)}"
            lines.append(
                f"- {mine}answer to `{c.grade_id}` fits the variant of {theirs}"
                + ("" if report.names else " classmates")
            )
    return "\n".join(lines).strip("\n")
