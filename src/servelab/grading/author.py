"""Build the instructor notebooks in solutions/ from the course's text sources in grading/source/.

    python -m servelab.grading.author            # grading/source/<assignment>/<notebook>.py -> solutions/
    python -m servelab.grading.author --check    # exit 1 if a committed instructor notebook is stale

Each source is a jupytext percent file: it opens in JupyterLab as a notebook (with
jupytext installed) and diffs as text. nbgrader's metadata sits in the cell
headers (`# %% nbgrader={...}`), solution regions between `### BEGIN SOLUTION`
and `### END SOLUTION`, hidden tests between `### BEGIN HIDDEN TESTS` and
`### END HIDDEN TESTS`. A header's `id="..."` names the cell; an nbgrader cell is
named by its grade_id, the rest `cell-NNN` by position.

Parts measured on the course's machine (tables and numbers from bench/results/,
rep 2's solution from the recorded measurements) are `{{ ... }}` places,
filled by the build from grading/source/<assignment>/measured.py. It lives
beside the source, out of the package, with the keys: nothing here holds an
answer, and the package students install holds none either.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from servelab.grading import course

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class BuildError(RuntimeError):
    pass


def measured(assignment: course.Assignment) -> dict:
    """The values the source's {{ ... }} places name, from its measured.py (none without one)."""
    path = assignment.text.parent / "measured.py"
    if not path.is_file():
        return {}
    spec = importlib.util.spec_from_file_location(f"servelab_measured_{assignment.name}", path)
    if spec is None or spec.loader is None:
        raise BuildError(f"{path}: Python cannot load it as a module.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.context()


def _fill(source: str, values: dict, where: str) -> str:
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        # A place that fills with nothing at a cell's end leaves no blank line behind.
        return env.from_string(source).render(values).strip("\n")
    except jinja2.TemplateError as exc:
        raise BuildError(f"{where}: {exc}. Name a value measured.py's context() returns.") from exc


def build(assignment: course.Assignment) -> nbformat.NotebookNode:
    """The instructor notebook of one assignment, built the same way every time."""
    import jupytext

    if not assignment.text.is_file():
        raise BuildError(f"{assignment.text} is missing: it is the text source of {assignment.source.name}.")
    text = jupytext.read(assignment.text, fmt="py:percent")
    values = measured(assignment)
    cells, seen = [], set()
    for number, cell in enumerate(text.cells):
        metadata = dict(cell.metadata)
        name = metadata.pop("id", None) or metadata.get("nbgrader", {}).get("grade_id") or f"cell-{number:03d}"
        if name in seen:
            raise BuildError(f'{assignment.text}: two cells share the id {name!r}; give one another id="...".')
        seen.add(name)
        source = _fill(cell.source, values, f"{assignment.text.name}, cell {name}") if values else cell.source
        made = new_markdown_cell(source) if cell.cell_type == "markdown" else new_code_cell(source)
        made.id, made.metadata = name, nbformat.from_dict(metadata)
        cells.append(made)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    """A notebook's text, the same every time (sorted keys, one trailing newline)."""
    nbformat.validate(nb)
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(nb: nbformat.NotebookNode, path: str | Path) -> Path:
    """Write a notebook the same way every time."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(nb))
    return path


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(course.REPO_DIR))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.grading.author", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one with a text source)")
    args = parser.parse_args(argv)
    chosen = [course.get(a) for a in args.assignments] or [a for a in course.ASSIGNMENTS if a.text.is_file()]
    if not chosen:
        print(f"No text sources in {course.TEXT_SOURCES}: nothing to build.", file=sys.stderr)
        return 1
    stale = []
    for assignment in chosen:
        try:
            fresh = dumps(build(assignment))
        except BuildError as exc:
            print(exc, file=sys.stderr)
            return 1
        shown = f"{_shown(assignment.text)} -> {_shown(assignment.source)}"
        if args.check:
            if not assignment.source.is_file() or assignment.source.read_text() != fresh:
                stale.append(
                    f"{_shown(assignment.source)} differs from what {_shown(assignment.text)} builds: "
                    "run make notebooks"
                )
        else:
            assignment.source.parent.mkdir(parents=True, exist_ok=True)
            assignment.source.write_text(fresh)
            print(f"built {shown}")
    for line in stale:
        print(line, file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
