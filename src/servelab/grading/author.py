"""Cell builders for nbgrader source notebooks, so a lesson reads as Python and Markdown.

Each builder returns one nbformat cell with nbgrader's metadata already set:
`md` and `code` are plain cells; `answer` is an autograded answer (a solution
region the release replaces with `raise NotImplementedError()`); `test` is a
locked test cell with a visible part that checks the answer's form and a
hidden part that carries the points; `written` is a manually graded answer in
words. Answer and test cells are tagged `raises-exception`, so nbval passes on
the student version, where they raise until the learner answers.

`capture` writes the hidden part every autograded test shares: it hands the
answer to the grader as plain JSON and nothing else. The key and the checker
that compares them live outside every notebook, in grading/keys/<assignment>.py.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

RAISES = "raises-exception"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def md(text: str, cell_id: str | None = None):
    """A plain Markdown cell (lesson text)."""
    cell = new_markdown_cell(_clean(text))
    cell.id = cell_id or ""  # numbered by notebook()
    return cell


def code(source: str, cell_id: str | None = None):
    """A plain code cell that runs the same in both versions."""
    cell = new_code_cell(_clean(source))
    cell.id = cell_id or ""  # numbered by notebook()
    return cell


def answer(grade_id: str, solution: str, preamble: str = ""):
    """An autograded answer: `preamble` stays for the learner, `solution` is cleared on release."""
    parts = [_clean(preamble)] if preamble else []
    parts += ["### BEGIN SOLUTION", _clean(solution), "### END SOLUTION"]
    cell = new_code_cell("\n".join(parts))
    cell.id = grade_id
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=False, solution=True, locked=False)
    cell.metadata["tags"] = [RAISES]
    return cell


def test(grade_id: str, points: float, visible: str, hidden: str):
    """A locked autograder test: `hidden` (see capture) hands the answer over first, `visible` checks its form."""
    source = _clean(hidden).replace("GRADE_ID", repr(grade_id)) + "\n" + _clean(visible)
    cell = new_code_cell(source)
    cell.id = grade_id
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, solution=False, locked=True, points=points)
    cell.metadata["tags"] = [RAISES]
    return cell


def written(grade_id: str, points: float, model_answer: str):
    """A manually graded answer in words; the model answer is the instructor's and is cleared on release."""
    cell = new_markdown_cell(_clean(model_answer))
    cell.id = grade_id
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, solution=True, locked=False, points=points)
    return cell


def capture(answer_expr: str) -> str:
    """The hidden part of a test: hand `answer_expr` to the grader as plain JSON (see capture.py).

    It holds no key and awards nothing: the grader compares the answer with the key
    in its own process (trusted.py), from grading/keys/<assignment>.py.
    """
    return "\n".join([
        "### BEGIN HIDDEN TESTS",
        "from servelab.grading.capture import capture as _capture",
        f"_capture(GRADE_ID, {answer_expr})",
        "### END HIDDEN TESTS",
    ])


def notebook(cells: list) -> nbformat.NotebookNode:
    """A notebook with deterministic cell ids and the standard Python kernel."""
    seen: set[str] = set()
    for number, cell in enumerate(cells):
        if not cell.id:
            cell.id = f"cell-{number:03d}"
        if cell.id in seen:
            raise ValueError(f"two cells share the id {cell.id!r}")
        seen.add(cell.id)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write(nb: nbformat.NotebookNode, path: str | Path) -> Path:
    """Write a notebook the same way every time (sorted keys, one trailing newline)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.validate(nb)
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text(text)
    return path


def write_source(nb: nbformat.NotebookNode, path: Path) -> int:
    """A builder's command: write the instructor notebook to path and say where it went."""
    written_to = write(nb, path)
    try:
        shown = written_to.relative_to(Path.cwd())
    except ValueError:
        shown = written_to
    print(f"wrote {shown}")
    return 0
