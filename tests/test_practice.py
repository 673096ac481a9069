"""`servelab practice`: fresh variants checked at once, an FSRS schedule that brings a missed question back
before a known one (driven with explicit review times), a schedule file that survives a reload, and a
refusal where the solver is absent."""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone

import pytest

from servelab.variants import grading, practice

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
SOLVER = grading.load_solver()


def _right(round_: practice.Round) -> dict:
    answers = {}
    for part in round_.parts:
        key = grading.solution(part.id, round_.params, SOLVER)["key"]
        answers[part.id] = {f: w["expect"] for f, w in key["fields"].items()} if "fields" in key else key["value"]
    return answers


def _wrong(round_: practice.Round) -> dict:
    return {part.id: -1 for part in round_.parts}


@pytest.fixture
def schedule(tmp_path):
    return tmp_path / "data" / "practice.json"


def test_a_fresh_variant_is_checked_at_once_with_the_graders_checkers(schedule):
    p = practice.Practice(schedule, solver=SOLVER)
    round_ = p.draw("warmup2", random.Random(7))
    assert "TFLOP/s" in round_.text and f"{round_.params['bandwidth_gb_s']:,g}" in round_.text
    results, right = p.answer(round_, _right(round_), now=T0)
    assert right and all(r.points == 1 for r in results)
    assert all("Worked solution:" in r.feedback for r in results)
    results, right = p.answer(round_, {"warmup2-ridge": 1.0}, now=T0)  # a wrong ridge, no token count
    assert not right and results[1].points == 0 and "expected a number" in results[1].feedback
    # Fresh variants: two draws are two different questions.
    assert p.draw("warmup1").params != p.draw("warmup1").params


def test_a_missed_question_comes_back_before_a_known_one(schedule):
    p = practice.Practice(schedule, solver=SOLVER)
    both = ["warmup1", "break-even"]
    assert p.next_question(T0, among=both) == "warmup1"  # never practised: in the lesson's order
    known, missed = p.draw("warmup1"), p.draw("break-even")
    assert p.answer(known, _right(known), now=T0)[1] is True
    assert p.answer(missed, _wrong(missed), now=T0)[1] is False
    assert p.due("break-even") < p.due("warmup1")
    for later in (T0 + timedelta(minutes=2), T0 + timedelta(hours=1), T0 + timedelta(days=30)):
        assert p.next_question(later, among=both) == "break-even", later
    # Known twice, it is put off by days; missed again, the other comes back within minutes, and first.
    p.review("warmup1", True, T0 + timedelta(minutes=11))
    p.review("break-even", False, T0 + timedelta(minutes=11))
    assert p.due("warmup1") - (T0 + timedelta(minutes=11)) >= timedelta(days=1)
    assert p.due("break-even") - (T0 + timedelta(minutes=11)) <= timedelta(minutes=10)
    assert p.next_question(T0 + timedelta(days=3), among=both) == "break-even"
    # Nothing overdue, nothing new: the one due soonest.
    assert p.next_question(T0 + timedelta(minutes=12), among=both) == "break-even"


def test_the_schedule_survives_a_reload_and_is_written_whole(schedule):
    p = practice.Practice(schedule, solver=SOLVER)
    p.review("warmup3", False, T0)
    p.review("littles-law", True, T0)
    again = practice.Practice(schedule, solver=SOLVER)
    assert again.due("warmup3") == p.due("warmup3") and again.due("littles-law") == p.due("littles-law")
    assert [h["rating"] for h in again.history] == ["again", "good"]
    assert again.next_question(T0 + timedelta(minutes=5), among=["littles-law", "warmup3"]) == "warmup3"
    # Atomic: no temporary file is left beside it, and a card this servelab does not know is kept.
    data = json.loads(schedule.read_text())
    data["cards"]["lesson26-q1"] = {"card_id": 99}
    schedule.write_text(json.dumps(data))
    practice.Practice(schedule, solver=SOLVER).review("warmup1", True, T0)
    assert sorted(x.name for x in schedule.parent.iterdir()) == [".practice.json.lock", "practice.json"]
    assert "lesson26-q1" in json.loads(schedule.read_text())["cards"]
    schedule.write_text("{not json")
    with pytest.raises(practice.PracticeError, match="cannot be read"):
        practice.Practice(schedule, solver=SOLVER)


def test_practice_refuses_without_the_solver(tmp_path, monkeypatch, schedule):
    monkeypatch.setattr(grading, "KEYS_DIR", tmp_path / "no-keys")
    with pytest.raises(grading.SolverMissing, match="clone of servelab"):
        practice.Practice(schedule)
    out: list[str] = []
    args = argparse.Namespace(schedule=schedule, question=None, rounds=1, list=False)
    assert practice.run(args, read=lambda prompt: "1", write=out.append) == 2
    assert "clone of servelab" in out[0] and not schedule.exists()


def test_the_command_asks_checks_and_schedules(schedule):
    parser = argparse.ArgumentParser()
    practice.add_arguments(parser)
    args = parser.parse_args(["--schedule", str(schedule), "--rounds", "3", "--question", "practice4"])
    typed = iter(["8 GPUs", "8", "yes", "4", "2", "q"])
    out: list[str] = []
    assert practice.run(args, read=lambda prompt: next(typed), write=out.append) == 0
    text = "\n".join(out)
    assert "not a number" in text and "Worked solution:" in text
    assert json.loads(schedule.read_text())["history"][0]["question"] == "practice4"


def test_a_typed_answer_is_read_never_evaluated():
    assert practice.parse_answer("1,234.5") == 1234.5 and practice.parse_answer("2.1e9") == 2.1e9
    assert practice.parse_answer("Yes") is True and practice.parse_answer("false", "bool") is False
    for text in ("__import__('os').system('true')", "2*3", ""):
        with pytest.raises(ValueError):
            practice.parse_answer(text)


def test_two_sessions_on_one_schedule_keep_each_others_reviews(schedule):
    """A notebook kernel and a terminal share the file: each save merges the other's reviews."""
    a = practice.Practice(schedule, solver=SOLVER)
    b = practice.Practice(schedule, solver=SOLVER)
    a.review("warmup1", False, T0)
    b.review("warmup2", False, T0 + timedelta(minutes=1))
    a.review("littles-law", True, T0 + timedelta(minutes=2))
    kept = practice.Practice(schedule, solver=SOLVER)
    assert {"warmup1", "warmup2", "littles-law"} <= set(kept.cards)
    assert [h["question"] for h in kept.history] == ["warmup1", "warmup2", "littles-law"]
    assert a.due("warmup2") == kept.due("warmup2")  # a's save read b's review


def test_a_card_without_a_timezone_is_a_clear_error(schedule):
    p = practice.Practice(schedule, solver=SOLVER)
    p.review("warmup1", False, T0)
    data = json.loads(schedule.read_text())
    data["cards"]["warmup1"]["due"] = "2026-03-02T09:10:00"
    schedule.write_text(json.dumps(data))
    with pytest.raises(practice.PracticeError, match="cannot be read.*timezone"):
        practice.Practice(schedule, solver=SOLVER)


@pytest.mark.parametrize("typed", ["nan", "1e400", "-inf"])
def test_a_typed_non_finite_number_is_asked_again_not_counted_a_miss(typed):
    with pytest.raises(ValueError, match="not a finite number"):
        practice.parse_answer(typed)
