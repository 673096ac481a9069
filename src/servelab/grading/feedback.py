"""A feedback preprocessor: learners see what the checkers said, never the hidden tests.

nbgrader's feedback renders the autograded notebook, whose test cells were put
back from the gradebook with their hidden regions in full. `HideHiddenTests`
drops those regions and cuts a hidden test's traceback (which quotes its source
lines) down to the error's name and message.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
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
