"""Every table a learner reads names each of its columns: no header cell is empty (WCAG 1.3.1, a screen reader
announces a column by its header). Markdown tables in every notebook the course hands out and in the text
sources they are built from, HTML tables written into the library's code and templates, and the lab widgets'
own tables as they draw them."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from servelab.lab import common, rep2
from servelab.lab.knobs import charts as knobcharts

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = ("lessons", "labs", "solutions", "grading/submissions")
_RULE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_PLACE = re.compile(r"\{\{.*?\}\}")  # a measured part the source fills in: the columns it adds are named there


def empty_header_tables(text: str, comment: bool = False) -> list[str]:
    """The header rows of the markdown tables in text that have an empty cell (a header row is the line above
    a |---|---| rule); comment: the text is a jupytext source, its markdown the `# ` comment lines."""
    lines = [_PLACE.sub("", line) for line in text.splitlines()]
    if comment:
        lines = [re.sub(r"^\s*#\s?", "", line) for line in lines]
    found = []
    for head, rule in zip(lines, lines[1:]):
        if "|" in head and _RULE.match(rule.strip()):
            cells = head.strip().removeprefix("|").removesuffix("|").split("|")
            if any(not c.strip() for c in cells):
                found.append(head.strip())
    return found


class _Headers(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "th":
            self._open = []

    def handle_data(self, data):
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag):
        if tag == "th" and self._open is not None:
            self.cells.append("".join(self._open).strip())
            self._open = None


def html_headers(html: str) -> list[str]:
    parser = _Headers()
    parser.feed(html)
    return parser.cells


def _markdown_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def test_the_check_finds_an_empty_header_cell_and_passes_a_named_one():
    assert empty_header_tables("| | a | b |\n|---|---|---|\n| x | 1 | 2 |") == ["| | a | b |"]
    assert empty_header_tables("| a | | b |\n|:--|---:|---|") == ["| a | | b |"]
    assert empty_header_tables("| metric | a |\n|---|---|\n| | 1 |") == []  # a body cell may be empty
    assert empty_header_tables("a | b\n---|---") == []
    assert empty_header_tables("# | | a |{{ k.head }}\n# |---|---|{{ k.rule }}", comment=True) == ["| | a |"]
    assert html_headers("<table><tr><th scope='col'></th><th>x <b>y</b></th></tr></table>") == ["", "x y"]


def test_no_handed_out_notebook_has_a_table_with_an_empty_header_cell():
    notebooks = [p for folder in NOTEBOOKS for p in sorted((REPO / folder).rglob("*.ipynb"))]
    assert any(p.name == "knob_lab.ipynb" for p in notebooks) and len(notebooks) > 4, notebooks
    found = {
        f"{p.relative_to(REPO)}: {head}"
        for p in notebooks
        for source in _markdown_cells(p)
        for head in empty_header_tables(source)
    }
    assert not found, sorted(found)


def test_no_course_source_or_library_table_has_an_empty_header_cell():
    sources = sorted((REPO / "grading" / "source").rglob("*.py"))
    assert sources
    found = [
        f"{p.relative_to(REPO)}: {head}" for p in sources for head in empty_header_tables(p.read_text(), comment=True)
    ]
    library = [p for ext in ("*.py", "*.j2", "*.html") for p in sorted((REPO / "src" / "servelab").rglob(ext))]
    empty_th = re.compile(r"<th\b[^>]*>\s*</th>")
    found += [f"{p.relative_to(REPO)}: <th></th>" for p in library if empty_th.search(p.read_text())]
    found += [f"{p.relative_to(REPO)}: {h}" for p in library for h in empty_header_tables(p.read_text())]
    assert not found, found


def test_the_lab_widgets_tables_name_every_column():
    a = {"ttft_ms_p50": 380.6, "ttft_ms_p99": 381.8, "tpot_ms_p50": 42.7, "output_tok_s": 311.4}
    tables = [
        knobcharts.table_html((a, None), ("", "")),  # settings without names yet
        rep2.table_html(a, a),
        common.prediction_table([], str, str, ("factor", "predicted")),
    ]
    for table in tables:
        heads = html_headers(table)
        assert heads and all(heads), (heads, table)
