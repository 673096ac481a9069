"""Collection's rules as functions, without grading: archives, notebook checks, the exchange copy.

The graded consequences (refused rows, other students' grades unchanged) are in
tests/test_grading_attacks.py's shared pipeline run; these are the cases that need
no kernel: each runs in milliseconds.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from servelab.grading import collection, course, samples, trusted

pytestmark = pytest.mark.unit

LESSON = course.get("lesson25")


def _sample_bytes(name: str) -> bytes:
    return (samples.SUBMISSIONS / LESSON.name / f"{name}.ipynb").read_bytes()


def _by_student(folder: Path) -> dict[str, collection.HandedIn]:
    return {h.student: h for h in collection.gather(folder, LESSON.notebook)}


# ----------------------------------------------------------------------------- archives
def test_a_zip_made_with_writestr_is_a_zip_of_regular_files(tmp_path):
    """zipfile.writestr stores permission bits (0o600) with no file type: that is a regular file."""
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as z:
        z.writestr("dana.ipynb", _sample_bytes("partial"))
        z.writestr(f"erin__{LESSON.notebook}", _sample_bytes("perfect"))
        link = zipfile.ZipInfo("fred.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "/etc/shadow")
    assert zipfile.ZipFile(tmp_path / "export.zip").getinfo("dana.ipynb").external_attr >> 16 == 0o600
    got = _by_student(tmp_path)
    assert got["dana"].data == _sample_bytes("partial") and got["erin"].data == _sample_bytes("perfect")
    assert got["fred"].refused and "symbolic link" in got["fred"].reason


def test_another_students_archive_never_refuses_or_replaces_a_student_who_handed_in(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(_sample_bytes("partial"))
    with zipfile.ZipFile(tmp_path / "mallory.zip", "w") as z:
        z.writestr("alice.ipynb", _sample_bytes("perfect"))
        z.writestr("mallory.ipynb", _sample_bytes("perfect"))
    got = _by_student(tmp_path)
    assert got["alice"].data == _sample_bytes("partial")  # her own, graded
    assert got["mallory.zip"].refused  # the archive's problem, under the archive's name
    assert "alice" in got["mallory.zip"].reason and "handed in their own" in got["mallory.zip"].reason
    assert got["mallory"].data == _sample_bytes("perfect")  # what the archive holds for its own student counts


def test_an_unreadable_archive_named_like_a_student_is_the_archives_problem(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(_sample_bytes("partial"))
    (tmp_path / "alice.zip").write_bytes(b"not a zip")
    got = _by_student(tmp_path)
    assert got["alice"].data == _sample_bytes("partial")
    assert got["alice.zip"].refused and "was not read" in got["alice.zip"].reason


def test_two_archives_naming_one_student_are_named_in_the_refusal(tmp_path):
    for archive in ("export.zip", "mallory.zip"):
        with zipfile.ZipFile(tmp_path / archive, "w") as z:
            z.writestr("carol.ipynb", _sample_bytes("partial"))
    got = _by_student(tmp_path)
    assert got["carol"].refused and "export.zip" in got["carol"].reason and "mallory.zip" in got["carol"].reason


# ----------------------------------------------------------------------------- what a notebook is
def _with_cell_change(change) -> bytes:
    nb = json.loads(_sample_bytes("partial"))
    graded = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    change(graded)
    return json.dumps(nb).encode()


MALFORMED = {
    "grade id a list": (_with_cell_change(lambda c: c["metadata"]["nbgrader"].update(grade_id=["x"])), "grade id"),
    "source a number": (_with_cell_change(lambda c: c.update(source=5)), "notebook format"),
    "a dict, not a notebook": (b'{"a": 1}', "not a notebook"),
    "not JSON": (b'{"cells": [', "not a notebook"),
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "nested"),
    "not UTF-8": (b"\xff\xfe{}", "UTF-8"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_notebook_is_refused_at_collection_for_its_student_alone(tmp_path, case):
    data, words = MALFORMED[case]
    (tmp_path / "mal.ipynb").write_bytes(data)
    (tmp_path / "ok.ipynb").write_bytes(_sample_bytes("partial"))
    got = _by_student(tmp_path)
    assert got["mal"].refused and words in got["mal"].reason, got["mal"].reason
    assert got["ok"].data == _sample_bytes("partial")


def test_every_sample_submission_is_a_notebook_collection_takes():
    paths = sorted(samples.SUBMISSIONS.glob("*/*.ipynb"))  # every assignment's samples
    assert len(paths) > 10
    for path in paths:
        assert collection.notebook_problem(path.read_bytes()) is None, path.name


@pytest.mark.unit(False)  # runs a kernel
def test_restore_cells_runs_a_cell_with_a_grade_id_that_is_not_text_as_a_plain_cell(tmp_path, monkeypatch):
    """Past collection (a notebook placed in the course by hand), RestoreCells still grades the rest."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic
    nb = nbformat.reads(_sample_bytes("partial").decode(), as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")][:2]
    kept, broken = graded
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db_url) as gb:  # a real gradebook holding the two cells as released
        gb.add_assignment("a1")
        gb.add_notebook("nb", "a1")
        for cell in graded:
            meta = cell.metadata.nbgrader
            gb.add_grade_cell(meta["grade_id"], "nb", "a1", max_score=meta["points"], cell_type=cell.cell_type)
            gb.add_source_cell(
                meta["grade_id"],
                "nb",
                "a1",
                cell_type=cell.cell_type,
                source=cell.source,
                locked=True,
                checksum=meta.get("checksum"),
            )
    broken.metadata.nbgrader["grade_id"] = ["x"]
    resources = {"nbgrader": {"db_url": db_url, "notebook": "nb", "assignment": "a1", "student": "s1"}}
    nb, resources = trusted.RestoreCells(report_dir=str(tmp_path)).preprocess(nb, resources)
    ids = [c.metadata.nbgrader.get("grade_id") for c in nb.cells if "nbgrader" in c.metadata]
    assert ids.count(kept.metadata.nbgrader["grade_id"]) == 1  # the rest is graded as usual
    assert not any(isinstance(i, list) for i in ids)
    flags = trusted.read_report(trusted.report_path(str(tmp_path), resources))["flags"]
    assert any("grade id was not text" in flag for flag in flags), flags


# ----------------------------------------------------------------------------- the exchange copy
def test_copy_tree_refuses_a_folder_swapped_for_a_link_after_it_was_listed(tmp_path, monkeypatch):
    src, secret = tmp_path / "hand-in", tmp_path / "secret"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "answer.ipynb").write_text("{}")
    secret.mkdir()
    (secret / "key.txt").write_text("the key")
    real_scandir = os.scandir
    swapped = []

    def scandir_then_swap(target):  # the swap race, made certain: swap right after the top listing
        listing = list(real_scandir(target))
        if not swapped:
            swapped.append(True)
            os.rename(src / "sub", tmp_path / "sub-was")
            os.symlink(secret, src / "sub")
        return _Listing(listing)

    monkeypatch.setattr(collection.os, "scandir", scandir_then_swap)
    left_out = collection.copy_tree(src, tmp_path / "copy")
    assert swapped and not list((tmp_path / "copy").rglob("key.txt"))
    assert any("sub" in why for why in left_out), left_out


class _Listing(list):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_copy_tree_refuses_deep_nesting_instead_of_failing(tmp_path):
    src = tmp_path / "hand-in"
    src.mkdir()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(40):  # 40 folders of 120 characters: a path of 4,840 characters, past PATH_MAX
        os.mkdir("d" * 120, dir_fd=fd)
        child = os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    left_out = collection.copy_tree(src, tmp_path / "copy")
    assert any(f"nested more than {collection.MAX_TREE_DEPTH}" in why for why in left_out), left_out


def test_copy_tree_opens_no_more_files_than_it_takes(tmp_path, monkeypatch):
    src = tmp_path / "hand-in"
    src.mkdir()
    for i in range(collection.MAX_FOLDER_ENTRIES + 500):
        (src / f"e{i:05d}").touch()
    real_open, opened = os.open, []

    def counting_open(path, flags, *args, **kwargs):
        opened.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(collection.os, "open", counting_open)
    left_out = collection.copy_tree(src, tmp_path / "copy")
    monkeypatch.undo()
    assert len(list((tmp_path / "copy").iterdir())) == collection.MAX_TREE_FILES
    assert len(opened) <= 2 * collection.MAX_TREE_FILES + 2  # each file read and written, the two folders
    assert any(f"more than {collection.MAX_FOLDER_ENTRIES:,} names" in why for why in left_out)


def test_student_ids_take_a_hubs_login_names_and_nothing_a_shell_or_glob_reads():
    # JupyterHub logs users in by their Linux names: sl-ana, a.smith and b_k are students.
    for student in ("sl-ana", "a.smith", "b_k", "Student42", "x-y.z_w"):
        assert collection.student_id_problem(student) is None, student
    for student in ("-x", "--student=a", "a--b", "a..b", "x__y", ".hidden", "a-", "a b", "?*", "[a-z]*", "ü", "a/b"):
        assert "not a student id" in collection.student_id_problem(student), student


# ----------------------------------------------------------------------------- extras and caps
def test_checkpoints_hidden_files_and_editor_backups_in_a_folder_or_an_archive_are_nobodys(tmp_path):
    (tmp_path / "dana.ipynb").write_bytes(_sample_bytes("partial"))
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "dana-checkpoint.ipynb").write_bytes(_sample_bytes("perfect"))
    for name in (".erin.ipynb", "dana.ipynb~", "dana.ipynb.swp", "dana.ipynb.bak", ".DS_Store", "._export.zip"):
        (tmp_path / name).write_bytes(_sample_bytes("perfect"))
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as z:
        z.writestr("carol.ipynb", _sample_bytes("partial"))
        for name in (
            ".ipynb_checkpoints/carol-checkpoint.ipynb",
            "class/carol/.ipynb_checkpoints/carol-checkpoint.ipynb",
            "__MACOSX/._carol.ipynb",
            "__MACOSX/fred.ipynb",
            ".gina.ipynb",
            "sub/.hidden/hank.ipynb",
            "carol.ipynb~",
        ):
            z.writestr(name, _sample_bytes("perfect"))
        z.writestr("../.x/zip_slip.ipynb", _sample_bytes("perfect"))  # still the archive's problem, not passed over
    got = _by_student(tmp_path)
    assert set(got) == {"dana", "carol", "zip_slip"}, sorted(got)
    assert got["dana"].data == _sample_bytes("partial") and got["carol"].data == _sample_bytes("partial")
    assert got["zip_slip"].refused and "leaves the archive" in got["zip_slip"].reason
    assert collection.is_extra(".ipynb_checkpoints/x-checkpoint.ipynb") and not collection.is_extra("carol.ipynb")


def _notebook_of(cells: list) -> bytes:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}).encode()


@pytest.mark.unit(False)  # about 1.3 s of CPU
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: [{"cell_type": "raw", "metadata": {}, "source": ""}] * 200_000, "200,000 cells, more than"),
        (
            lambda: [{"cell_type": "markdown", "metadata": {}, "source": ["x"] * (collection.MAX_TEXT_CELL_CHARS + 1)}],
            "cell 1 holds",
        ),
        (
            lambda: [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": "1",
                    "execution_count": None,
                    "outputs": [{"output_type": "stream", "name": "stdout", "text": ""}] * 6000,
                }
            ],
            "6,000 outputs",
        ),
    ],
    ids=["200k tiny cells", "one long markdown cell", "many outputs"],
)
def test_cells_outputs_and_cell_size_are_capped_with_a_refusal_that_says_what_to_do(make, words):
    data = _notebook_of(make())
    assert len(data) < collection.MAX_NOTEBOOK_BYTES  # under the size cap: the count is what costs
    problem = collection.notebook_problem(data)
    assert problem and words in problem and ("hand it in again" in problem or "start again" in problem), problem


def test_lock_files_are_nobodys_and_a_jupyterlab_copy_is_graded_only_without_its_original(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(_sample_bytes("perfect"))
    for name in ("~$alice.ipynb", ".~lock.alice.ipynb#", "alice-Copy1.ipynb", "alice-Copy12.ipynb"):
        (tmp_path / name).write_bytes(_sample_bytes("empty"))
    (tmp_path / "bob-Copy1.ipynb").write_bytes(_sample_bytes("partial"))  # bob handed in only the copy
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as z:
        z.writestr("carol.ipynb", _sample_bytes("partial"))
        z.writestr("carol-Copy2.ipynb", _sample_bytes("perfect"))
    notes: list[str] = []
    got = {h.student: h for h in collection.gather(tmp_path, "lesson25.ipynb", notes)}
    assert set(got) == {"alice", "bob-Copy1", "carol"}, sorted(got)
    assert not any(h.refused for h in got.values())
    assert got["alice"].data == _sample_bytes("perfect") and got["carol"].data == _sample_bytes("partial")
    assert sum("passed over" in n and "JupyterLab's copy of 'alice'" in n for n in notes) == 2, notes
    assert any("passed over 'carol-Copy2' in 'export.zip'" in n for n in notes), notes
    assert any(n.startswith("graded 'bob-Copy1' under its own name") for n in notes), notes
    assert collection.is_extra("~$alice.ipynb") and collection.is_extra("class/~$alice.ipynb")
