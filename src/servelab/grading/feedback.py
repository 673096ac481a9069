"""Feedback preprocessors: learners see what the checkers said, never the hidden tests.

nbgrader's feedback renders the autograded notebook, whose test cells were put
back from the gradebook with their hidden regions in full. `HideHiddenTests`
drops those regions and cuts a hidden test's traceback (which quotes its source
lines) down to the error's name and message.

`MarkUngraded` names the answers nobody has graded yet (no autograde, no manual
score in the gradebook): nbgrader counts them as 0 and its template prints
"0.0 / 1.0"; the page says "not graded yet" there instead, and its total how many points are not graded
yet (pages.FeedbackExporter).
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook
from traitlets import Bool, Unicode

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def strip_hidden(source: str, placeholder: str) -> tuple[str, bool]:
    """Source without its hidden regions (each replaced by `placeholder`), and whether any was found."""
    lines, kept, inside, found = source.split("\n"), [], False, False
    for line in lines:
        if BEGIN in line:
            inside, found = True, True
            kept.append(placeholder)
        elif END in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept).rstrip("\n"), found


class HideHiddenTests(Preprocessor):
    """Remove hidden test regions from test cells and shorten their tracebacks to one line."""

    enabled = Bool(True, help="Whether to run this preprocessor (on by default, unlike nbconvert's).").tag(config=True)

    placeholder = Unicode(
        "# (hidden tests ran here; their feedback is printed below)",
        help="The line that stands where a hidden test region was.",
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        cell.source, found = strip_hidden(cell.source, self.placeholder)
        if found:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class MarkUngraded(Preprocessor):
    """Record in resources["servelab_ungraded"] the grade ids with neither an autograde nor a manual score, each
    with its points."""

    enabled = Bool(True, help="Whether to run this preprocessor (on by default, unlike nbconvert's).").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            notebook = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
            resources["servelab_ungraded"] = {
                g.name: float(g.max_score or 0)
                for g in notebook.grades
                if g.auto_score is None and g.manual_score is None
            }
        return nb, resources
