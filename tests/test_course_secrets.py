"""No answer ships with servelab: the installed package and a wheel built from this checkout hold no
solution text and no key, searched for with markers derived from the instructor's own files
(tests/secrets_helpers.py says which and why)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import servelab
from servelab.grading import course
from servelab.paths import REPO_DIR

sys.path.insert(0, str(Path(__file__).parent))
import secrets_helpers  # noqa: E402

MARKERS = secrets_helpers.markers()


def test_the_markers_come_from_every_assignment_and_find_the_instructor_notebooks():
    """The search can fail: each instructor notebook holds markers, its student version none."""
    assert len(MARKERS) > 100
    for a in course.ASSIGNMENTS:
        assert secrets_helpers.hits(a.source.read_text(), MARKERS), a.source
        assert not secrets_helpers.hits(a.student.read_text(), MARKERS), a.student
    assert any(origin.startswith("keys/") for origin in MARKERS.values())


def _found(files) -> dict[str, list[str]]:
    out = {}
    for name, data in files:
        hits = secrets_helpers.hits(data.decode("utf-8", "replace"), MARKERS)
        if hits:
            out[name] = [f"{m[:60]!r} ({MARKERS[m]})" for m in hits[:3]]
    return out


def test_the_installed_package_holds_no_answer():
    root = Path(servelab.__file__).resolve().parent
    files = [(str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) > 50
    assert _found(files) == {}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # The venv's own setuptools builds it: no network, and the wheel is what `pip install .` would install.
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(out), str(REPO_DIR)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = out.glob("servelab-*.whl")
    return built


def test_a_built_wheel_holds_no_answer(wheel):
    with zipfile.ZipFile(wheel) as zf:
        files = [(name, zf.read(name)) for name in zf.namelist()]
    names = [n for n, _ in files]
    assert "servelab/lab/rep2.py" in names  # what a learner's notebook imports is there
    assert not any(n.startswith(("grading/", "solutions/")) or n.endswith(".ipynb") for n in names)
    assert _found(files) == {}
