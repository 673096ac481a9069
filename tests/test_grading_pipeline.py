"""The instructor's pipeline, run for real: the samples as `make grade` graded them, and broken hand-ins beside two."""

import csv
import json
import shutil

import nbformat
import pytest

from servelab.grading import course, pipeline, samples
from servelab.paths import REPO_DIR

EXPECTED = json.loads(samples.EXPECTED.read_text())
HOSTILE = ["edited_test", "deleted_cells", "infinite_loop", "output_flood", "read_key", "patch_checker"]


@pytest.fixture(scope="module")
def graded(make_grade):
    """The committed samples as `make grade` graded them (conftest.py runs it once for the session)."""
    assert make_grade.returncode == 0, make_grade.stderr
    out = REPO_DIR / "grading" / "out"
    results = [pipeline.Graded(**g) for g in json.loads((out / "scores.json").read_text())]
    return {(g.assignment, g.student): g for g in results}, out


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """Two broken hand-ins beside two good ones, in a throwaway course."""
    tmp = tmp_path_factory.mktemp("grading")
    subs = tmp / "submissions" / "lesson25"
    subs.mkdir(parents=True)
    for student in ("perfect", "partial"):
        shutil.copy(samples.SUBMISSIONS / "lesson25" / f"{student}.ipynb", subs)
    # Not a notebook at all, and a notebook whose kernel dies: neither may stop the others.
    (subs / "not_a_notebook.ipynb").write_text("{ this is not json")
    dying = nbformat.read(subs / "partial.ipynb", as_version=4)
    dying.cells[1].source = "import os\nos._exit(1)"
    nbformat.write(dying, subs / "kernel_dies.ipynb")
    results = pipeline.run(
        tmp / "submissions", tmp / "course", tmp / "out", cell_timeout=10, submission_timeout=240, log=lambda *a: None
    )
    return {(g.assignment, g.student): g for g in results}


def test_samples_are_in_step_with_the_notebooks(tmp_path):
    for assignment in course.available():
        expected = samples.make_samples(assignment, tmp_path)
        assert expected == EXPECTED[assignment.name]
        for student in expected:
            fresh = (tmp_path / assignment.name / f"{student}.ipynb").read_text()
            assert fresh == (samples.SUBMISSIONS / assignment.name / f"{student}.ipynb").read_text(), student


def test_every_sample_scores_as_expected(graded):
    results, _ = graded
    for assignment, students in EXPECTED.items():
        for student, points in students.items():
            g = results[(assignment, student)]
            assert g.status == "graded", g.log_tail
            assert g.score == pytest.approx(points, abs=1e-6), (student, g.tests)


def test_hostile_submissions_gain_nothing(graded):
    results, _ = graded
    partial = results[("lesson25", "partial")]
    for student in HOSTILE:
        g = results[("lesson25", student)]
        assert g.score == pytest.approx(partial.score), student
        assert g.tests == pytest.approx(partial.tests), student


def test_attempts_on_the_grader_are_flagged(graded):
    results, _ = graded
    assert results[("lesson25", "read_key")].flags
    assert results[("lesson25", "patch_checker")].flags
    assert not results[("lesson25", "perfect")].flags
    assert not results[("lesson25", "partial")].flags


def test_a_bad_submission_never_stops_the_others(broken):
    results = broken
    assert results[("lesson25", "not_a_notebook")].score == 0
    assert results[("lesson25", "kernel_dies")].score == 0
    assert results[("lesson25", "kernel_dies")].status != "graded" or results[("lesson25", "kernel_dies")].score == 0
    graded_ok = [g for g in results.values() if g.assignment == "lesson25" and g.student in EXPECTED["lesson25"]]
    assert len(graded_ok) == 2 and all(g.status == "graded" for g in graded_ok)
    for g in graded_ok:
        assert g.score == pytest.approx(EXPECTED["lesson25"][g.student], abs=1e-6), g.student


def test_grades_csv(graded):
    _, out = graded
    with open(out / "grades.csv") as f:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(f)}
    for assignment, students in EXPECTED.items():
        for student, points in students.items():
            assert float(rows[(assignment, student)]["score"]) == pytest.approx(points)
    scores = json.loads((out / "scores.json").read_text())
    assert {s["student"] for s in scores} >= set(EXPECTED["lesson25"])


def test_feedback_shows_the_checkers_words_not_the_hidden_tests(graded):
    _, out = graded
    pages = list((out / "feedback" / "lesson25").glob("*.html"))
    assert len(pages) >= len(EXPECTED["lesson25"])
    source = nbformat.read(course.get("lesson25").source, as_version=4)
    hidden_lines = {
        line.strip()
        for c in source.cells
        if "### BEGIN HIDDEN TESTS" in c.source
        for line in c.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0].split("\n")
        if len(line.strip()) > 12
    }
    assert hidden_lines
    for page in pages:
        html = page.read_text()
        assert "BEGIN HIDDEN TESTS" not in html and "_capture" not in html and "_checkers" not in html, page.name
        assert "&#39;correct&#39;: &#39;" not in html and "'correct': '" not in html or page.stem == "read_key"
        assert not any(line in html for line in hidden_lines), page.name
    partial = (out / "feedback" / "lesson25" / "partial.html").read_text()
    assert "multiply by 2" in partial  # the feedback that teaches is there


def test_grading_leaves_the_repository_alone(broken):
    assert not (REPO_DIR / "grading" / "submissions" / "lesson25" / "not_a_notebook.ipynb").exists()


def test_an_instructor_step_past_its_time_limit_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch):
    """generate_assignment, zip_collect and export run no student code; on a stuck machine the run stops and says
    which step, how loaded the machine was, and that the grades given so far are in scores.json."""
    import subprocess

    def stuck(root, *args, timeout=None, extra_env=None):
        raise subprocess.TimeoutExpired(list(args), timeout)

    monkeypatch.setattr(course, "nbgrader", stuck)
    with pytest.raises(pipeline.PipelineError) as caught:
        pipeline.instructor_step(tmp_path, "generate_assignment", "lesson25", "--force")
    said = str(caught.value)
    assert f"generate_assignment lesson25 did not finish in {pipeline.INSTRUCTOR_STEP_TIMEOUT_S} s" in said
    assert "load average" in said and "scores.json" in said


def test_parallel_graders_refuse_a_count_whose_worst_case_is_more_than_the_machine_has(monkeypatch):
    from servelab.grading import parallel, sandbox

    per_grader = sandbox.CGROUP_LIMITS.memory_bytes + parallel.GRADER_BYTES
    monkeypatch.setattr(parallel, "available_bytes", lambda: 3 * per_grader + 1)
    assert "3 graders hold at most" in parallel.check_memory(3)
    with pytest.raises(parallel.ParallelGradingError, match="--workers 3 or fewer"):
        parallel.check_memory(8)
