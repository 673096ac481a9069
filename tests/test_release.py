"""The release: student versions are generated from solutions/, and the committed ones are current."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from servelab.grading import author, course, lesson25, release
from servelab.paths import REPO_DIR

LESSON = course.get("lesson25")


def _nbgrader_env():
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("NBGRADER_EXECUTION", None)
    return env


def test_committed_student_versions_match_the_release():
    assert release.release(check=True) == []


def test_solutions_are_what_the_builder_writes():
    committed = nbformat.read(LESSON.source, as_version=4)
    assert release.comparable(committed) == release.comparable(lesson25.build())
    # and written byte for byte the same way
    fresh = json.dumps(lesson25.build(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert LESSON.source.read_text() == fresh


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
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "_checkers", "'correct'", "practice5_answer = \\\"b\\\"",
                   "it is wrong, not just unmeasured"):
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
    before = subprocess.run(["git", "status", "--porcelain", "--ignored", "grading", "solutions"],
                            cwd=REPO_DIR, capture_output=True, text=True).stdout
    result = subprocess.run([sys.executable, "-m", "servelab.grading.release", "--check"], cwd=tmp_path,
                            capture_output=True, text=True, env=_nbgrader_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    after = subprocess.run(["git", "status", "--porcelain", "--ignored", "grading", "solutions"],
                           cwd=REPO_DIR, capture_output=True, text=True).stdout
    assert before == after


@pytest.mark.parametrize("path, invert, message", [
    (LESSON.source, False, "Success! Your notebook passes all the tests."),
    (LESSON.student, True, "Success! The notebook does not pass any tests."),
])
def test_nbgrader_validate(path, invert, message, tmp_path):
    cmd = [sys.executable, "-m", "nbgrader", "validate", str(path)] + (["--invert"] if invert else [])
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=_nbgrader_env(), timeout=300)
    assert message in result.stdout, result.stdout + result.stderr
