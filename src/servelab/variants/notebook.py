"""The practice notebook (lessons/practice.ipynb): `servelab practice` in cells, with the same schedule and checkers.

    session = notebook.start()     # the learner's schedule (servelab.variants.practice.Practice), or why not
    session.next()                 # the next question (missed ones first), with fresh parameters
    session.check({"max_tokens_per_s": 197.2})   # the grader's checkers, at once; the question is rescheduled
    session.widget()               # the same three steps as a form: the question, a box per answer, Check, Next

A Session is a Practice (the schedule file `servelab practice` reads and writes, the solver, FSRS) and the
question drawn last. Answers are keyed by the names the question's text gives (`Part.variable`: the lesson's
answer cells' names); a practice dict's fields are a dict under its name. Answers that are all missing check
nothing and leave the schedule as it was, so running the notebook top to bottom (nbval does) reviews nothing.

Practice shows worked solutions, so it needs the instructor-only solver: it runs in a clone of servelab.
Elsewhere (the students' environment, where the solver is not installed) `start` says so and returns None,
and every cell after it does nothing.

    python -m servelab.variants.notebook           # grading/source/practice/practice.py -> lessons/practice.ipynb
    python -m servelab.variants.notebook --check   # exit 1 if the committed notebook is stale

`make notebooks` runs the first, with the course's other notebooks; the notebook is built by the same builder
(servelab.grading.author) from its jupytext source, without outputs.
"""

from __future__ import annotations

import argparse
import html
import random
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from servelab.paths import REPO_DIR

from .grading import SolverMissing, load_solver
from .practice import Practice, PracticeError, Round, parse_answer
from .questions import BY_ID, QUESTIONS, Part

SOURCE = REPO_DIR / "grading" / "source" / "practice" / "practice.py"
NOTEBOOK = REPO_DIR / "lessons" / "practice.ipynb"


@dataclass
class Checked:
    """What one check said: each part's points and feedback, whether all were right, when it is due again."""

    results: list
    right: bool
    due: datetime | None
    text: str

    def __str__(self) -> str:
        return self.text

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the text, not the record
        p.text(self.text)


class Session:
    """One learner's practice in a notebook: their schedule and the question drawn last."""

    def __init__(self, practice: Practice, questions: list[str] | None = None):
        self.practice = practice
        self.questions = list(questions) if questions else None  # None: every question
        self.round: Round | None = None

    # ------------------------------------------------------------------ the plain cells
    def next(self, now: datetime | None = None, rng: random.Random | None = None) -> Round:
        """Draw the next question (the schedule's choice: overdue first, then new, then due soonest)."""
        question = self.practice.next_question(now, among=self.questions)
        self.round = self.practice.draw(question, rng)
        return self.round

    def names(self, round_: Round | None = None) -> dict[str, Any]:
        """The answers the drawn question (or `round_`) asks for, by name, each None: a dict to fill in."""
        parts = (round_ or self._round()).parts
        return {p.variable: ({f: None for f in p.fields} if p.kind == "fields" else None) for p in parts}

    def check(self, answers: dict[str, Any], now: datetime | None = None, round_: Round | None = None) -> Checked:
        """Check the answers to the drawn question (or `round_`: the form's own) with the grader's checkers and
        reschedule it (saved). Answers all missing check nothing and change nothing."""
        round_ = round_ or self._round()
        by_part = {p.id: _given(p, answers) for p in round_.parts}
        if all(_missing(v) for v in by_part.values()):
            names = ", ".join(f"`{n}`" for n in self.names(round_))
            return Checked([], False, None, f"Nothing checked: give your answers as {names}, then check again.")
        results, right = self.practice.answer(round_, by_part, now)
        due = self.practice.due(round_.question)
        when = due.isoformat(timespec="minutes") if due else "?"
        verdict = "All right" if right else "Missed: it comes back soon"
        text = "\n\n".join([*(r.feedback for r in results), f"{verdict} (next due {when})."])
        return Checked(results, right, due, text)

    def schedule(self) -> str:
        """Each question and when it is due (new: never practised)."""
        lines = []
        for q in QUESTIONS:
            if self.questions and q.id not in self.questions:
                continue
            due = self.practice.due(q.id)
            lines.append(
                f"{q.id:20s} {q.title:45s} {'new' if due is None else 'due ' + due.isoformat(timespec='minutes')}"
            )
        return "\n".join(lines)

    def _round(self) -> Round:
        if self.round is None:
            raise RuntimeError("No question drawn yet: run session.next() first.")
        return self.round

    # ------------------------------------------------------------------ the form
    def widget(self):
        """The form: the question, one box per answer, Check (the same check), Next (the next question). The form
        keeps its own question, so the plain cells can draw another beside it."""
        import ipywidgets as w

        question, result = w.HTML(), w.HTML()
        boxes = w.VBox()
        check, again = w.Button(description="Check", button_style="primary"), w.Button(description="Next question")
        fields: dict[tuple[str, str | None], w.Text] = {}
        shown: list[Round] = []  # the form's question

        def show(_=None) -> None:
            question_id = self.practice.next_question(among=self.questions)
            round_ = self.practice.draw(question_id)
            shown[:] = [round_]
            question.value = (
                f"<h3>{html.escape(BY_ID[round_.question].title)}</h3>"
                f"<pre style='white-space: pre-wrap'>{html.escape(round_.text)}</pre>"
            )
            fields.clear()
            for part in round_.parts:
                for field in part.fields if part.kind == "fields" else (None,):
                    label = part.variable if field is None else f"{part.variable}[{field!r}]"
                    fields[(part.variable, field)] = w.Text(description=label, style={"description_width": "initial"})
            boxes.children = tuple(fields.values())
            result.value = ""

        def on_check(_=None) -> None:
            try:
                answers = _read_boxes(shown[0].parts, {k: box.value for k, box in fields.items()})
            except ValueError as exc:
                result.value = f"<p>{html.escape(str(exc))}</p>"
                return
            checked = self.check(answers, round_=shown[0])
            result.value = f"<pre style='white-space: pre-wrap'>{html.escape(checked.text)}</pre>"

        check.on_click(on_check)
        again.on_click(show)
        show()
        form = w.VBox([question, boxes, w.HBox([check, again]), result])
        form.servelab = {
            "question": question,
            "fields": fields,
            "check": check,
            "next": again,
            "result": result,
            "round": shown,
        }
        return form


def _given(part: Part, answers: dict[str, Any]) -> Any:
    return answers.get(part.variable, answers.get(part.id))


def _missing(value: Any) -> bool:
    if isinstance(value, dict):
        return all(v is None for v in value.values())
    return value is None or value == ""


def _read_boxes(parts: tuple[Part, ...], texts: dict[tuple[str, str | None], str]) -> dict[str, Any]:
    """The form's texts as answers (servelab.variants.practice.parse_answer: never evaluated); empty is missing."""
    answers: dict[str, Any] = {}
    for part in parts:
        if part.kind == "fields":
            answers[part.variable] = {
                f: parse_answer(t, "any") if (t := texts[(part.variable, f)]).strip() else None for f in part.fields
            }
        else:
            text = texts[(part.variable, None)]
            answers[part.variable] = parse_answer(text, part.kind) if text.strip() else None
    return answers


def start(
    schedule: str | Path | None = None, questions: list[str] | None = None, keys_dir: str | Path | None = None
) -> Session | None:
    """The learner's practice session, or None after saying why there is none here (no solver: not a clone of
    servelab; a schedule file that cannot be read)."""
    try:
        practice = Practice(schedule, solver=load_solver(keys_dir))
    except SolverMissing as exc:
        print(f"Practice is not available here. {exc}")
        return None
    except PracticeError as exc:
        print(exc)
        return None
    print(f"Your practice schedule: {practice.path} (yours alone; nothing in it is graded).")
    return Session(practice, questions)


# ---------------------------------------------------------------------------- building the notebook


def build_notebook() -> str:
    """lessons/practice.ipynb's text, built from its jupytext source by the course's notebook builder."""
    from servelab.grading import author, course

    return author.dumps(author.build(course.Assignment("practice", NOTEBOOK.name, NOTEBOOK.parent.name)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.variants.notebook", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = parser.parse_args(argv)
    fresh = build_notebook()
    shown = f"{SOURCE.relative_to(REPO_DIR)} -> {NOTEBOOK.relative_to(REPO_DIR)}"
    if args.check:
        if not NOTEBOOK.is_file() or NOTEBOOK.read_text() != fresh:
            print(f"{NOTEBOOK.relative_to(REPO_DIR)} differs from what its source builds: run make notebooks")
            return 1
        return 0
    NOTEBOOK.write_text(fresh)
    print(shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
