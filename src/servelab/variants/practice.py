"""Practice: fresh variants of the lesson's numeric questions, checked at once, missed ones brought back.

Each round draws new parameters for a question (never a student's graded variant: practice draws from
the operating system's randomness), checks every answer with the grader's own checkers and solver
(servelab.variants.grading.grade), and reviews the question in the learner's schedule with FSRS (the
`fsrs` package's Scheduler): a question answered in full is rated Good, one with any part missed Again,
so a missed question is due again within minutes and a known one only after days. The next question is
the most overdue one, then one never practised (in the lesson's order), then the one due soonest.

The schedule is the learner's own JSON file, $SERVELAB_PRACTICE_FILE or
$XDG_DATA_HOME/servelab/practice.json (~/.local/share/servelab/practice.json), written atomically (a
temporary file beside it, then os.replace), so a crash leaves the old schedule or the new one. Nothing in
it is graded or sent anywhere.

Practice shows answers, so it needs the instructor-only solver: it runs in a clone of servelab, and
refuses (SolverMissing, with the reason) where the solver is absent, as in the students' environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import random
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from . import seeds
from .grading import SolverMissing, grade, load_solver, solution
from .questions import BY_ID, QUESTIONS, Params, Part, render

if TYPE_CHECKING:
    import fsrs

FORMAT = "servelab-practice-1"
HISTORY_KEPT = 500  # the reviews the file keeps, newest last (a record for the learner, never graded)

__all__ = ["Practice", "PracticeError", "Round", "SolverMissing", "default_path", "parse_answer"]


class PracticeError(RuntimeError):
    """The schedule file cannot be read or written; the message says which and why."""


def default_path() -> Path:
    env = os.environ.get("SERVELAB_PRACTICE_FILE")
    if env:
        return Path(env)
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "servelab" / "practice.json"


def _utc(moment: datetime | None) -> datetime:
    if moment is None:
        return datetime.now(timezone.utc)
    if moment.tzinfo is None:
        raise ValueError("a review time must be timezone-aware")
    return moment.astimezone(timezone.utc)


@dataclass
class Round:
    """One drawn question: its id, its parameters and the text to ask."""

    question: str
    params: Params
    text: str

    @property
    def parts(self) -> tuple[Part, ...]:
        return BY_ID[self.question].parts


class Practice:
    """A learner's practice schedule (one FSRS card per question) and the solver that checks the answers."""

    def __init__(self, path: str | Path | None = None, solver: SimpleNamespace | None = None):
        self.path = Path(path) if path is not None else default_path()
        import fsrs  # here, not at the top: every `servelab` command builds this one's arguments

        self.solver = solver or load_solver()  # SolverMissing where the answers are not installed
        self.scheduler = fsrs.Scheduler(enable_fuzzing=False)  # the same schedule for the same reviews
        self.cards: dict[str, fsrs.Card] = {}
        self.history: list[dict] = []
        self._kept: dict[str, Any] = {}  # cards of questions this servelab does not know, written back as read
        # This session's reviews not yet saved: (question, rating, time), replayed on the file's cards at
        # save, so that another session on the same file (a notebook kernel beside a terminal) loses none.
        self._pending: list[tuple[str, Any, datetime]] = []
        if self.path.exists():
            self._load()

    # ------------------------------------------------------------------ the file
    def _load(self) -> None:
        self.cards, self.history, self._kept = self._read()

    def _read(self) -> tuple[dict[str, fsrs.Card], list[dict], dict[str, Any]]:
        """The file's cards (the questions this servelab knows), history and other cards; PracticeError."""
        import fsrs

        cards: dict[str, fsrs.Card] = {}
        kept: dict[str, Any] = {}
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a servelab practice schedule (format {data.get('format')!r})")
            for question, card in data.get("cards", {}).items():
                if question in BY_ID:
                    cards[question] = fsrs.Card.from_dict(card)
                    for moment in (cards[question].due, cards[question].last_review):
                        if moment is not None and moment.tzinfo is None:
                            raise ValueError(f"{question}'s card has a time without a timezone ({moment.isoformat()})")
                else:
                    kept[question] = card
            history = list(data.get("history", []))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise PracticeError(
                f"The practice schedule {self.path} cannot be read ({exc}). Move it aside to start a new one, "
                "or pass another file with --schedule."
            ) from None
        return cards, history, kept

    @contextlib.contextmanager
    def _locked(self):
        """The schedule's lock (a file beside it), held while a save reads, merges and writes it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(f".{self.path.name}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def save(self) -> None:
        """Write the schedule: under its lock, the file as it is now (another session may have reviewed
        since this one read it) with this session's reviews applied, written whole in one rename."""
        import fsrs

        try:
            with self._locked():
                if self.path.exists():
                    self.cards, self.history, self._kept = self._read()
                for question, rating, now in self._pending:
                    card = self.cards.get(question) or fsrs.Card(
                        card_id=[q.id for q in QUESTIONS].index(question) + 1, due=now
                    )
                    self.cards[question], _log = self.scheduler.review_card(card, rating, review_datetime=now)
                    self.history.append({"question": question, "at": now.isoformat(), "rating": rating.name.lower()})
                self._pending = []
                self._write()
        except OSError as exc:
            raise PracticeError(f"The practice schedule {self.path} cannot be written ({exc}).") from None

    def _write(self) -> None:
        data = {
            "format": FORMAT,
            "cards": {**self._kept, **{q: card.to_dict() for q, card in self.cards.items()}},
            "history": self.history[-HISTORY_KEPT:],
        }
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------------ the schedule
    def due(self, question: str) -> datetime | None:
        card = self.cards.get(question)
        return card.due if card else None

    def next_question(self, now: datetime | None = None, among: Iterable[str] | None = None) -> str:
        """The most overdue question, else the first never practised, else the one due soonest."""
        now = _utc(now)
        chosen = [q.id for q in QUESTIONS] if among is None else list(among)
        unknown = [q for q in chosen if q not in BY_ID]
        if unknown or not chosen:
            raise KeyError(f"no question {unknown or chosen!r}; there are {[q.id for q in QUESTIONS]}")
        seen = sorted((self.cards[q].due, i, q) for i, q in enumerate(chosen) if q in self.cards)
        overdue = [q for due, _, q in seen if due <= now]
        if overdue:
            return overdue[0]
        new = [q for q in chosen if q not in self.cards]
        return new[0] if new else seen[0][2]

    def draw(self, question: str, rng: random.Random | None = None) -> Round:
        params = seeds.fresh_params(question, rng)
        return Round(question, params, render(question, params))

    def check(self, round_: Round, answers: dict[str, Any]) -> list:
        """Each part's checker Result (points, feedback) for the answers given, by part id."""
        return [grade(part.id, round_.params, answers.get(part.id), self.solver) for part in round_.parts]

    def full_points(self, round_: Round) -> float:
        return sum(float(solution(p.id, round_.params, self.solver)["key"].get("points", 1)) for p in round_.parts)

    def review(self, question: str, correct: bool, now: datetime | None = None) -> fsrs.Card:
        """Record one review (Good when every part was right, else Again) and save the schedule."""
        import fsrs

        now = _utc(now)
        if question not in BY_ID:
            raise KeyError(f"no question {question!r}; there are {[q.id for q in QUESTIONS]}")
        self._pending.append((question, fsrs.Rating.Good if correct else fsrs.Rating.Again, now))
        self.save()
        return self.cards[question]

    def answer(self, round_: Round, answers: dict[str, Any], now: datetime | None = None) -> tuple[list, bool]:
        """Check the answers, review the question (saved), and return the Results and whether all were right."""
        results = self.check(round_, answers)
        right = sum(r.points for r in results) >= self.full_points(round_)
        self.review(round_.question, right, now)
        return results, right


# ---------------------------------------------------------------------------- the command line

_TRUE, _FALSE = {"true", "yes", "y", "t"}, {"false", "no", "n", "f"}


def parse_answer(text: str, kind: str = "number") -> Any:
    """A typed answer as a value: a number (1,234.5, 1_000, 2.1e9) or True/False (yes/no). Never evaluated."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    if kind == "bool":
        raise ValueError("answer yes or no (True or False)")
    try:
        value = float(word.replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a number") from None
    if not math.isfinite(value):  # nan, inf, 1e400: no answer to any question here
        raise ValueError(f"{text.strip()!r} is not a finite number")
    return value


def _ask(prompt: str, kind: str, read: Callable[[str], str], write: Callable[[str], None]) -> Any:
    while True:
        text = read(prompt)
        if text.strip().lower() in {"q", "quit"}:
            raise EOFError
        try:
            return parse_answer(text, kind)
        except ValueError as exc:
            write(f"  {exc}; try again (q to stop).")


def add_arguments(p) -> None:
    p.add_argument("--schedule", type=Path, help=f"the schedule file (default: {default_path()})")
    p.add_argument(
        "--question", action="append", choices=[q.id for q in QUESTIONS], help="only this question (repeatable)"
    )
    p.add_argument("--rounds", type=int, default=5, help="questions to ask this time (default 5)")
    p.add_argument("--list", action="store_true", help="list the questions and when each is due, ask nothing")


def run(args, read: Callable[[str], str] = input, write: Callable[[str], None] = print) -> int:
    try:
        practice = Practice(args.schedule)
    except (SolverMissing, PracticeError) as exc:
        write(f"error: {exc}")
        return 2
    if args.list:
        for q in QUESTIONS:
            due = practice.due(q.id)
            write(f"{q.id:20s} {q.title:45s} {'new' if due is None else 'due ' + due.isoformat(timespec='minutes')}")
        return 0
    try:
        for _ in range(max(args.rounds, 0)):
            round_ = practice.draw(practice.next_question(among=args.question))
            write(f"\n{BY_ID[round_.question].title} ({round_.question})\n{round_.text}\n")
            answers = {}
            for part in round_.parts:
                if part.kind == "fields":
                    answers[part.id] = {
                        name: _ask(f"{part.variable}[{name!r}] = ", "any", read, write) for name in part.fields
                    }
                else:
                    answers[part.id] = _ask(f"{part.variable} = ", part.kind, read, write)
            results, right = practice.answer(round_, answers)
            for result in results:
                write(result.feedback)
            due = practice.due(round_.question)
            write(
                f"{'All right' if right else 'Missed'}: next due {due.isoformat(timespec='minutes') if due else '?'}."
            )
    except (EOFError, KeyboardInterrupt):
        write("")
    except PracticeError as exc:
        write(f"error: {exc}")
        return 2
    return 0
