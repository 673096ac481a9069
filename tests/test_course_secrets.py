"""No answer ships with servelab: the installed package and a wheel built from this checkout hold no
solution text and no key, searched for with markers derived from the instructor's own files
(tests/secrets_helpers.py says which and why)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import secrets_helpers

import servelab
from servelab.grading import course
from servelab.paths import REPO_DIR

MARKERS = secrets_helpers.markers()
VERDICTS = secrets_helpers.verdict_lines()


def test_the_markers_come_from_every_assignment_and_find_the_instructor_notebooks():
    """The search can fail: each instructor notebook holds markers, its student version none."""
    assert len(MARKERS) > 100
    for a in course.ASSIGNMENTS:
        assert secrets_helpers.hits(a.source.read_text(), MARKERS), a.source
        assert not secrets_helpers.hits(a.student.read_text(), MARKERS), a.student
    assert any(origin.startswith("keys/") for origin in MARKERS.values())


def test_the_verdict_markers_find_every_verdict_file_and_the_graded_headers_leave_the_verdict_out():
    """The reviewer's expected verdicts stay in the checkout; a config the lesson grades ships, answer-free."""
    assert len(VERDICTS) > 40
    for path in secrets_helpers.VERDICT_FILES:
        assert secrets_helpers.hits(path.read_text(), VERDICTS), path
    graded = secrets_helpers.graded_configs()
    assert {"practice-1-batch-256", "practice-4-tp8-on-4-gpus", "70b-upgrade-h200"} <= set(graded)
    words = re.compile(r"\b(" + "|".join(sorted(secrets_helpers.verdicts())) + r")\b", re.IGNORECASE)
    for name in graded:
        header = [
            line for line in (secrets_helpers.CONFIGS / f"{name}.yaml").read_text().splitlines() if line.startswith("#")
        ]
        assert not [line for line in header if words.search(line)], f"{name}.yaml's header states a verdict"


def _found(files) -> dict[str, list[str]]:
    out = {}
    chosen = {**MARKERS, **VERDICTS}
    for name, data in files:
        hits = secrets_helpers.hits(data.decode("utf-8", "replace"), chosen)
        if hits:
            out[name] = [f"{m[:60]!r} ({chosen[m]})" for m in hits[:3]]
    return out


def test_the_installed_package_holds_no_answer():
    root = Path(servelab.__file__).resolve().parent
    files = [
        (str(p.relative_to(root)), p.read_bytes())
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert len(files) > 50
    assert _found(files) == {}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The students' wheel, as `servelab class up` builds it: pip with the venv's own setuptools (no network),
    from a copy of the checkout without its course folders and the package's instructor-only files."""
    from servelab.classroom import studentenv

    return studentenv.build_wheel(tmp_path_factory.mktemp("wheel"))


def test_a_built_wheel_holds_no_answer(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        files = [(name, zf.read(name)) for name in zf.namelist()]
        zf.extractall(tmp_path / "site")
    names = [n for n, _ in files]
    assert "servelab/lab/rep2.py" in names  # what a learner's notebook imports is there
    assert "servelab/grading/capture.py" in names  # the hidden tests' hand-over
    assert not any(n.startswith(("grading/", "solutions/")) or n.endswith(".ipynb") for n in names)
    # The keys module, a solver for any student's numbers, stays in the checkout (studentenv.INSTRUCTOR_ONLY).
    assert "servelab/grading/keys.py" not in names
    data = REPO_DIR / "data"
    assert not [
        n for n in names for path in secrets_helpers.VERDICT_FILES if n == f"servelab/data/{path.relative_to(data)}"
    ]
    assert _found(files) == {}
    # The wheel's servelab alone (-S: no site folder, so not the checkout's editable install): the hidden tests'
    # hand-over imports, the keys do not.
    probe = "\n".join(
        [
            f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r})",
            "import servelab.grading.capture as capture; print(capture.__file__)",
            "try:",
            "    import servelab.grading.keys",
            "except ModuleNotFoundError as e:",
            "    print(e.name)",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    capture, missing = result.stdout.split()
    assert Path(capture).is_relative_to(tmp_path / "site") and missing == "servelab.grading.keys"


def test_the_students_environment_is_the_wheel_and_carries_the_data_the_lab_reads(tmp_path):
    """What `servelab class up` gives students' servers: servelab installed from a wheel, not editable."""
    from servelab.classroom import studentenv

    python, package = studentenv.build(tmp_path)
    # servelab.grading.capture and .runner: what the grading sandbox runs from the students' package
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import servelab, servelab.lab, servelab.paths as p, vllm; "
            "import servelab.grading.capture, servelab.grading.runner; "
            "print(servelab.__file__); print(p.data_dir()); "
            "print((p.data_dir() / 'configs' / '70b-upgrade-h200.yaml').is_file())",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    where, data, config = probe.stdout.split()
    assert Path(where).parent == package and Path(data) == package / "data" and config == "True"
    assert str(REPO_DIR) not in where
    shown = subprocess.run([str(python), "-m", "pip", "show", "servelab"], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "Editable project location" not in shown.stdout, shown.stdout + shown.stderr
    for instructor_only in ("servelab.grading.lesson25", "servelab.grading.keys"):
        gone = subprocess.run([str(python), "-c", f"import {instructor_only}"], capture_output=True, text=True)
        assert "ModuleNotFoundError" in gone.stderr, instructor_only
    files = [(str(p.relative_to(package)), p.read_bytes()) for p in package.rglob("*") if p.is_file()]
    assert _found(files) == {}
