"""The nbgrader course directory the release and the grading pipeline work in.

The course's text sources are grading/source/<assignment>/<notebook>.py (jupytext
percent files, built into solutions/ by servelab.grading.author); nbgrader's source
of truth is solutions/ (the instructor notebooks); its configuration is
grading/nbgrader_config.py. All of it is instructor-only and stays in the
checkout: none of it is package data. A course directory is made fresh
for each run in a throwaway place, with `source_directory` pointing at
solutions/, so nothing nbgrader writes ends up in the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from servelab.courseid import COURSE_ID  # noqa: F401 - a course's nbgrader_config.py made before servelab.courseid reads it here
from servelab.paths import REPO_DIR

SOLUTIONS = REPO_DIR / "solutions"
GRADING = REPO_DIR / "grading"
CONFIG = GRADING / "nbgrader_config.py"
TEXT_SOURCES = GRADING / "source"


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: its source notebook in solutions/ and where its student version goes."""

    name: str  # the assignment id: solutions/<name>/
    notebook: str  # the notebook's file name
    student_dir: str  # lessons or labs

    @property
    def source(self) -> Path:
        return SOLUTIONS / self.name / self.notebook

    @property
    def text(self) -> Path:
        """The text source the instructor notebook is built from (a jupytext percent file)."""
        return TEXT_SOURCES / self.name / f"{self.notebook_id}.py"

    @property
    def student(self) -> Path:
        return REPO_DIR / self.student_dir / self.notebook

    @property
    def notebook_id(self) -> str:
        return Path(self.notebook).stem


ASSIGNMENTS = (
    Assignment("lesson25", "lesson25.ipynb", "lessons"),
    Assignment("lab25", "spec_decode_lab.ipynb", "labs"),
    Assignment("knoblab", "knob_lab.ipynb", "labs"),
)


def available() -> list[Assignment]:
    """The assignments whose instructor notebook exists in solutions/."""
    return [a for a in ASSIGNMENTS if a.source.exists()]


def get(name: str) -> Assignment:
    for a in ASSIGNMENTS:
        if a.name == name:
            return a
    raise KeyError(f"Unknown assignment {name!r}; known: {', '.join(a.name for a in ASSIGNMENTS)}.")


def make(root: Path) -> Path:
    """A fresh course directory at `root` holding the course config."""
    root = Path(root)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    shutil.copy(CONFIG, root / "nbgrader_config.py")
    return root


def nbgrader_command(root: Path, *args: str) -> list[str]:
    """One nbgrader command (servelab's entry point to it) on the course directory at `root`, source_directory =
    solutions/: the one way every step of the pipeline, the parallel graders included, starts nbgrader."""
    return [
        sys.executable,
        "-m",
        "servelab.grading.nbgrader_cli",
        *args,
        f"--CourseDirectory.root={Path(root)}",
        f"--CourseDirectory.source_directory={SOLUTIONS}",
    ]


def nbgrader_env(extra_env: dict | None = None) -> dict[str, str]:
    """The environment nbgrader runs in: this one, without NBGRADER_EXECUTION (nbgrader sets it for the
    notebooks it runs), with this venv's bin/ first (nbgrader runs `alembic`, installed beside it, to check
    the gradebook's schema) and a fixed hash seed."""
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("PYTHONHASHSEED", "0")
    env.update(extra_env or {})
    return env


def nbgrader(
    root: Path, *args: str, timeout: float | None = None, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course directory at `root`, source_directory = solutions/."""
    return subprocess.run(
        nbgrader_command(root, *args),
        cwd=root,
        env=nbgrader_env(extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
