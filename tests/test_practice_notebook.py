"""The practice notebook (lessons/practice.ipynb): built from its source, its cells run top to bottom without
reviewing anything, and through its functions (the plain cells' and the form's) a fresh variant is checked with
the grader's checkers and a missed question comes back before a known one, in `servelab practice`'s schedule.
`make nbval` runs the notebook itself in a kernel, with the course's other notebooks in lessons/."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from servelab.paths import REPO_DIR
from servelab.variants import grading, notebook, practice

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
SOLVER = grading.load_solver()
TWO = ["capacity-bandwidth", "littles-law"]  # one part, then two


def _right(session: notebook.Session) -> dict:
    """The drawn question's answers, right, by the names its text gives."""
    answers = {}
    for part in session.round.parts:
        key = grading.solution(part.id, session.round.params, SOLVER)["key"]
        answers[part.variable] = {f: w["expect"] for f, w in key["fields"].items()} if "fields" in key else key["value"]
    return answers


def _cells() -> list[str]:
    nb = json.loads(notebook.NOTEBOOK.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_the_notebook_is_what_its_source_builds_and_carries_no_answer():
    assert notebook.NOTEBOOK.read_text() == notebook.build_notebook(), "run make notebooks"
    assert notebook.main(["--check"]) == 0
    text = notebook.NOTEBOOK.read_text()
    nb = json.loads(text)
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # nbval's run is the only one
    # The solver is loaded at run time where it is installed; nothing of it is in the notebook.
    solver_lines = [
        line.strip()
        for line in (REPO_DIR / "grading" / "keys" / "lesson25_variants.py").read_text().splitlines()
        if len(line.strip()) > 30 and not line.strip().startswith(("#", '"""', "from ", "import "))
    ]
    assert solver_lines and not [line for line in solver_lines if line in text]
    assert "grading.keys" not in text and "lesson25_variants" not in text


def test_the_cells_run_top_to_bottom_and_review_nothing(tmp_path, monkeypatch):
    """As nbval runs them: the form and a question are drawn, the empty answers check nothing, no file is written."""
    schedule = tmp_path / "practice.json"
    monkeypatch.setenv("SERVELAB_PRACTICE_FILE", str(schedule))
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in _cells():
            exec(code, scope)
    session = scope["session"]
    assert isinstance(session, notebook.Session) and session.practice.path == schedule
    assert "Your practice schedule: " in out.getvalue() and session.round.text in out.getvalue()
    checked = session.check(scope["answers"])
    assert checked.results == [] and str(checked).startswith("Nothing checked: give your answers as `")
    assert not schedule.exists()


def test_a_missed_question_comes_back_before_a_known_one_through_the_notebook(tmp_path):
    schedule = tmp_path / "practice.json"
    session = notebook.start(schedule, questions=TWO)
    missed = session.next(T0)
    assert missed.question == "capacity-bandwidth"  # never practised: in the lesson's order
    assert session.names() == {"max_tokens_per_s": None}
    checked = session.check({"max_tokens_per_s": 1.0}, now=T0)
    assert not checked.right and checked.results[0].points == 0 and "Worked solution:" in checked.text
    known = session.next(T0)
    assert known.question == "littles-law"  # the missed one is not due yet; the new one comes first
    checked = session.check(_right(session), now=T0)
    assert checked.right and [r.points for r in checked.results] == [1, 1] and "All right" in checked.text
    assert session.practice.due("capacity-bandwidth") < session.practice.due("littles-law")
    # An hour on, both are due: the missed one first. The same file is servelab practice's schedule.
    assert session.next(T0 + timedelta(hours=1)).question == "capacity-bandwidth"
    again = practice.Practice(schedule, solver=SOLVER)
    assert again.next_question(T0 + timedelta(hours=1), among=TWO) == "capacity-bandwidth"
    assert [h["rating"] for h in again.history] == ["again", "good"]
    # Got right twice, the known one waits days.
    session.round = session.practice.draw("littles-law")
    session.check(_right(session), now=session.practice.due("littles-law"))
    assert session.practice.due("littles-law") - T0 > timedelta(days=1)


def test_the_form_checks_what_is_typed_and_draws_the_next_question(tmp_path):
    session = notebook.start(tmp_path / "practice.json", questions=["practice4"])
    form = session.widget()
    parts = form.servelab
    assert "Tensor parallelism on one node" in parts["question"].value
    boxes = parts["fields"]
    assert [f for _, f in boxes] == ["configured", "gpus_available", "max_tensor_parallel"]
    parts["check"].click()  # nothing typed: nothing checked
    assert "Nothing checked" in parts["result"].value and not session.practice.path.exists()
    (mine,) = parts["round"]
    session.next()  # the plain cells draw another question beside the form: the form checks its own
    assert session.round is not mine
    session.round = mine
    right = _right(session)["practice4"]
    while session.next().params == mine.params:  # another node or degree than the form's (6 of them)
        pass
    for (_, field), box in boxes.items():
        box.value = f"{right[field]:,}"  # typed as a learner types it: "16", "1,024"
    parts["check"].click()
    assert "All right" in parts["result"].value and session.practice.history[-1]["rating"] == "good"
    next(iter(boxes.values())).value = "sixteen"
    parts["check"].click()
    assert "is not a number" in parts["result"].value and len(session.practice.history) == 1
    parts["next"].click()
    assert parts["round"][0] is not mine and parts["result"].value == ""
    assert all(box.value == "" for box in parts["fields"].values())


def test_without_the_solver_the_notebook_says_what_to_do_and_its_cells_do_nothing(tmp_path, monkeypatch):
    """The students' environment: no grading/keys/lesson25_variants.py. The cells run and show nothing but why."""
    monkeypatch.setenv("SERVELAB_PRACTICE_FILE", str(tmp_path / "practice.json"))
    monkeypatch.setattr(notebook, "load_solver", lambda keys_dir=None: grading.load_solver(tmp_path / "no-keys"))
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in _cells():
            exec(code, scope)
    assert scope["session"] is None
    said = out.getvalue()
    assert said.startswith("Practice is not available here. The answers to the variant questions are not in")
    assert "in a clone of servelab" in said and "Worked solution" not in said
    assert not (tmp_path / "practice.json").exists()
