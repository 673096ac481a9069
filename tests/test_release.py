"""The release: every assignment's notebooks come from its text source, and the committed ones are current.

grading/source/<assignment>/<notebook>.py -> solutions/ (servelab.grading.author) -> lessons/, labs/
(nbgrader generate_assignment) -> grading/submissions/ (servelab.grading.samples): `make notebooks`.
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from servelab.grading import author, course, release, samples
from servelab.paths import REPO_DIR

LESSON = course.get("lesson25")


def _nbgrader_env():
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("NBGRADER_EXECUTION", None)
    return env


@pytest.mark.parametrize("assignment", course.ASSIGNMENTS, ids=lambda a: a.name)
def test_every_assignment_is_what_make_notebooks_writes_from_its_text_source(assignment, tmp_path):
    """One staleness check per assignment, every step: text -> instructor -> student -> samples."""
    assert assignment.text.is_file() and assignment.source.is_file() and assignment.student.is_file()
    assert assignment.source.read_text() == author.dumps(author.build(assignment)), (
        f"{assignment.source} is stale: run make notebooks"
    )
    assert release.release([assignment], check=True) == []
    expected = samples.make_samples(assignment, tmp_path)
    assert expected == json.loads(samples.EXPECTED.read_text())[assignment.name]
    for student in expected:
        fresh = (tmp_path / assignment.name / f"{student}.ipynb").read_text()
        assert fresh == (samples.SUBMISSIONS / assignment.name / f"{student}.ipynb").read_text(), (
            f"grading/submissions/{assignment.name}/{student}.ipynb is stale: run make notebooks"
        )


def test_the_build_sees_an_edit_to_the_text_source(tmp_path, monkeypatch):
    """An author's one-sentence fix in the text file reaches the instructor notebook, and --check says so."""
    lesson_text = tmp_path / "lesson25" / "lesson25.py"
    lesson_text.parent.mkdir()
    lesson_text.write_text(
        LESSON.text.read_text().replace(
            "Reviewing a Serving Configuration", "Reviewing a Serving Configuration, edited", 1
        )
    )
    monkeypatch.setattr(course, "TEXT_SOURCES", tmp_path)
    built = author.build(LESSON)
    assert built.cells[0].source.startswith("# Lesson 25. Reviewing a Serving Configuration, edited")
    assert author.main(["--check", "lesson25"]) == 1


def test_a_place_the_build_cannot_fill_is_a_clear_error(tmp_path, monkeypatch):
    folder = tmp_path / "lab25"
    folder.mkdir()
    (folder / "spec_decode_lab.py").write_text("# %% [markdown]\n# Measured: {{ no_such_value }}\n")
    (folder / "measured.py").write_text("def context():\n    return {'flip_machine': 'x'}\n")
    monkeypatch.setattr(course, "TEXT_SOURCES", tmp_path)
    with pytest.raises(author.BuildError, match="no_such_value"):
        author.build(course.get("lab25"))


def test_the_text_source_carries_nbgrader_metadata_in_cell_headers():
    text = LESSON.text.read_text()
    assert '# %% nbgrader={"grade": false, "grade_id": "warmup1-answer"' in text
    assert "### BEGIN SOLUTION" in text and "### BEGIN HIDDEN TESTS" in text


def test_the_comparison_sees_edits_but_not_volatile_fields():
    committed = nbformat.read(LESSON.student, as_version=4)
    ran = copy.deepcopy(committed)
    ran.cells[1].execution_count = 7
    ran.cells[1].outputs = [nbformat.v4.new_output("stream", text="hello")]
    ran.metadata["language_info"] = {"name": "python", "version": "3.99"}
    assert release.comparable(ran) == release.comparable(committed)
    edited = copy.deepcopy(committed)
    edited.cells[0].source += "\nedited by hand"
    assert release.comparable(edited) != release.comparable(committed)
    retagged = copy.deepcopy(committed)
    retagged.cells[2].metadata["tags"] = []
    assert release.comparable(retagged) != release.comparable(committed)


def test_student_version_carries_no_solution_and_no_key():
    text = LESSON.student.read_text()
    for secret in (
        "BEGIN SOLUTION",
        "BEGIN HIDDEN TESTS",
        "_checkers",
        "'correct'",
        'practice5_answer = \\"b\\"',
        "it is wrong, not just unmeasured",
    ):
        assert secret not in text, secret
    nb = nbformat.read(LESSON.student, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            assert "raise NotImplementedError()" in cell.source
        if meta.get("solution") and cell.cell_type == "markdown":
            assert cell.source == "YOUR ANSWER HERE"


def test_cells_that_raise_in_the_student_version_are_tagged():
    nb = nbformat.read(LESSON.student, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade")):
            assert "raises-exception" in cell.metadata.get("tags", []), cell.id


def test_release_reads_only_the_assignments_that_exist():
    names = [a.name for a in course.available()]
    assert "lesson25" in names
    for a in course.ASSIGNMENTS:
        assert (a.name in names) == a.source.exists()


def test_release_cli_writes_nothing_outside_lessons_and_labs(tmp_path):
    before = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "grading", "solutions"],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
    ).stdout
    result = subprocess.run(
        [sys.executable, "-m", "servelab.grading.release", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_nbgrader_env(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    after = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "grading", "solutions"],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
    ).stdout
    assert before == after


@pytest.mark.parametrize(
    "path, invert, message",
    [
        (LESSON.source, False, "Success! Your notebook passes all the tests."),
        (LESSON.student, True, "Success! The notebook does not pass any tests."),
    ],
)
def test_nbgrader_validate(path, invert, message, tmp_path):
    cmd = [sys.executable, "-m", "nbgrader", "validate", str(path)] + (["--invert"] if invert else [])
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=_nbgrader_env(), timeout=300)
    assert message in result.stdout, result.stdout + result.stderr
