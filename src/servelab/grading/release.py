"""Release: write the student notebooks from the instructor notebooks in solutions/.

    python -m servelab.grading.release            # write lessons/ and labs/
    python -m servelab.grading.release --check    # exit 1 if a committed student version is stale

For each assignment whose source exists (solutions/lesson25/lesson25.ipynb,
solutions/lab25/spec_decode_lab.ipynb), run nbgrader's generate_assignment in
a throwaway course directory whose source_directory is solutions/, and copy the
released notebook, without outputs, to lessons/ or labs/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import nbformat

from servelab.grading import author, course
from servelab.paths import REPO_DIR


class ReleaseError(RuntimeError):
    pass


def render(assignment: course.Assignment, workdir: Path) -> nbformat.NotebookNode:
    """The student version nbgrader generates for one assignment, outputs cleared."""
    root = course.make(Path(workdir) / assignment.name)
    result = course.nbgrader(root, "generate_assignment", assignment.name, "--force", timeout=300)
    released = root / "release" / assignment.name / assignment.notebook
    if result.returncode != 0 or not released.exists():
        raise ReleaseError(f"nbgrader generate_assignment {assignment.name} failed:\n{result.stderr[-3000:]}")
    nb = nbformat.read(released, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def comparable(nb: nbformat.NotebookNode) -> dict:
    """What must match between a committed student version and a fresh release: no volatile fields."""
    return {
        "metadata": {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "nbgrader")},
        "cells": [{"cell_type": c.cell_type, "source": c.source, "metadata": dict(c.metadata)} for c in nb.cells],
    }


def release(assignments: list[course.Assignment] | None = None, check: bool = False) -> list[str]:
    """Write (or, with check=True, compare) the student versions; return the problems found."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="servelab-release-") as tmp:
        for assignment in assignments if assignments is not None else course.available():
            fresh = render(assignment, Path(tmp))
            target = assignment.student
            rel = target.relative_to(REPO_DIR)
            if check:
                if not target.exists():
                    problems.append(f"{rel} is missing: run python -m servelab.grading.release")
                elif comparable(nbformat.read(target, as_version=4)) != comparable(fresh):
                    problems.append(
                        f"{rel} differs from what the release writes from "
                        f"{assignment.source.relative_to(REPO_DIR)}: run python -m servelab.grading.release"
                    )
            else:
                author.write(fresh, target)
                print(f"released {assignment.source.relative_to(REPO_DIR)} -> {rel}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.grading.release", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in solutions/)")
    args = parser.parse_args(argv)
    chosen = [course.get(a) for a in args.assignments] if args.assignments else None
    if chosen is None and not course.available():
        print("No instructor notebooks in solutions/: nothing to release.", file=sys.stderr)
        return 1
    try:
        problems = release(chosen, check=args.check)
    except ReleaseError as exc:
        print(exc, file=sys.stderr)
        return 1
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
