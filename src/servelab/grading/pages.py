"""The two pages people open of a submission, drawn whole: the feedback page and formgrader's view.

safe_html.py cleans what a student wrote (markdown, HTML outputs, raw cells). Around it the
templates (nbconvert's classic, nbgrader's feedback and formgrade) write notebook values into
attributes of their own: an image's width and height unquoted, cell tags into `class`, cell ids
into `id`. So the page a template writes is rebuilt here, after the template has run:

1. Its head is the template's own (nothing a student wrote is there): kept are the charset, the
   title, its styles, stylesheets and scripts; every script gets the page's nonce.
2. Its body passes whole through nh3 with the page's allow-list (`BODY_*`, `_page_attribute`):
   a class keeps the templates' own class names for that element, in order, and stops at the
   first other name (a cell tag is written `celltag_<tag>` after them, so no tag becomes a class);
   ids only the templates' fixed ones and formgrader's score inputs; image sizes only whole
   numbers; no style, no handler, no script. formgrader's two inline bits (the name toggle's
   onclick, its tooltips) become one script of ours with the nonce.
3. The page carries a Content-Security-Policy with that nonce and no 'unsafe-inline' for
   scripts (a <meta> in the feedback file; formgrader's comes as a header, page_policy.py).
4. In formgrader, every cell's content (its source, rendered markdown, outputs) moves into an
   <iframe sandbox srcdoc>: no scripts and an opaque origin, which sends no cookie and cannot read
   the XSRF token, so nothing a student handed in can call formgrader's API. The grading controls
   (the score, credit buttons and comment of each graded cell) stay in the page, outside the frames.

`FeedbackExporter` is generate_feedback's exporter (grading/nbgrader_config.py); formgrader's page
is rebuilt by page_policy.py as it is sent. A written answer nobody has graded yet says so (nbgrader
writes 0.0 there).
"""

from __future__ import annotations

import base64
import html as html_lib
import json
import math
import re
import secrets
import struct
from html.parser import HTMLParser
from pathlib import Path

import nh3
from bs4 import BeautifulSoup, NavigableString, Tag
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from servelab.grading import safe_html

MATHJAX_CDN = "https://cdnjs.cloudflare.com"  # nbconvert's mathjax macro loads MathJax 2.7.7 from there
FRAME_CSS_PATH = "servelab/submission-frame.css"  # served by page_policy.py under the server's base_url


# --- the templates' own class names ---------------------------------------------------------------
def _template_files() -> list[Path]:
    """The templates that draw the two pages: nbconvert's base and classic, nbgrader's feedback and formgrade."""
    from jupyter_core.paths import jupyter_path
    from nbgrader.server_extensions.formgrader import handlers

    files = []
    for root in jupyter_path("nbconvert", "templates"):
        for name in ("base", "classic"):
            files += sorted((Path(root) / name).glob("*.j2"))
    for name in ("feedback", "formgrade"):
        files += sorted((Path(handlers.template_path) / name).glob("*.j2"))
    return files


_CLASS_IN_TEMPLATE = re.compile(r'<([a-z][a-z0-9]*)\b[^<>]*?\bclass="([^"]*)"', re.IGNORECASE)
_EXTRA_CLASS = re.compile(r'\bset\s+extra_class\s*=\s*"([^"]*)"')
_CLASS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def _classes_by_tag() -> dict[str, frozenset[str]]:
    """{tag: class names the templates write literally on it}; what follows a `{{` is the notebook's, not theirs."""
    found: dict[str, set[str]] = {}
    extra: set[str] = set()
    for path in _template_files():
        text = path.read_text()
        for tag, value in _CLASS_IN_TEMPLATE.findall(text):
            literal = re.split(r"\{[{%]", value)[0]
            found.setdefault(tag.lower(), set()).update(n for n in literal.split() if _CLASS_NAME.match(n))
        for value in _EXTRA_CLASS.findall(text):
            extra.update(value.split())
    found.setdefault("div", set()).update(extra | {"highlight"})  # extra_class sits on output divs
    found.setdefault("span", set()).update(safe_html.TOKEN_CLASSES)  # Pygments' token classes
    found["div"].update({"servelab-cells"})
    for names in found.values():  # written only when a notebook's metadata asks for it: a class from the notebook
        names.difference_update(NOTEBOOK_CHOSEN_CLASSES)
    return {tag: frozenset(names) for tag, names in found.items()}


NOTEBOOK_CHOSEN_CLASSES = {"unconfined"}  # nbconvert's templates write it from an output's metadata


CLASSES = _classes_by_tag()
# Classes written by filters, not templates: nbconvert's highlight wrapper and ansi2html's colours.
CLASS_PATTERNS = {"div": re.compile(r"hl-[a-z0-9_+-]+\Z"), "span": re.compile(r"ansi-[a-z-]+\Z")}
# ids the templates write that are no notebook's: the page's containers and formgrader's status line.
FIXED_IDS = {"notebook", "notebook-container", "toc", "statusmessage", "top"}
# formgrader's inputs are found by the grade id: "<id>", "<id>-comment", "<id>_extra_credit".
INPUT_ID = re.compile(r"[A-Za-z0-9_.-]{1,120}\Z")
WHOLE_NUMBER = re.compile(r"\d{1,5}\Z")
ATTRIBUTE_VALUES = {
    "type": {"input": {"number"}, "button": {"button"}},
    "data-toggle": {"a": {"tooltip"}},
    "data-trigger": {"a": {"hover"}},
    "data-placement": {"a": {"top", "bottom", "left", "right"}},
    "role": {"nav": {"navigation"}, "span": {"group"}},
    "aria-hidden": {"span": {"true"}},
}

BODY_TAGS = safe_html.TAGS | {"nav", "input", "textarea", "button"}
BODY_ATTRIBUTES = {tag: set(attrs) for tag, attrs in safe_html.ATTRIBUTES.items()}
for _tag in BODY_TAGS:
    BODY_ATTRIBUTES.setdefault(_tag, set()).update({"class", "id", "title", "role", "aria-hidden"})
BODY_ATTRIBUTES["a"] |= {"name", "data-toggle", "data-trigger", "data-placement", "data-link"}
BODY_ATTRIBUTES["input"] |= {"type"}
BODY_ATTRIBUTES["button"] |= {"type"}
BODY_ATTRIBUTES["img"] |= {"width", "height", "alt", "src"}


def page_classes(tag: str, value: str) -> str | None:
    """The template's own class names on `tag`, in order, up to the first other one (where cell tags start)."""
    kept = []
    allowed, pattern = CLASSES.get(tag, frozenset()), CLASS_PATTERNS.get(tag)
    for name in value.split():
        if name in allowed or (pattern is not None and pattern.match(name)):
            kept.append(name)
        else:
            break
    return " ".join(kept) or None


def _page_attribute(local_paths: bool):
    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute == "class":
            return page_classes(tag, value)
        if attribute == "id":
            if tag in {"input", "textarea"}:
                return value if INPUT_ID.match(value) else None
            return value if tag == "div" and value in FIXED_IDS else None
        if attribute == "name":
            return value if tag == "a" and INPUT_ID.match(value) else None
        if attribute in {"width", "height"}:
            return value if WHOLE_NUMBER.match(value.strip()) else None  # a number or nothing
        if attribute in ATTRIBUTE_VALUES:
            return value if value in ATTRIBUTE_VALUES[attribute].get(tag, ()) else None
        if attribute == "data-link":  # formgrader's "open live notebook": a path in the instructor's server
            return value if not re.search(r"[\x00-\x1f\"'<>\\]|^\w+:|^//", value) else None
        if attribute == "href" and local_paths and re.match(r"/(?!/)[^\x00-\x20\"'<>\\]*\Z", value):
            return value  # formgrader's own navigation (Prev, Next, the gradebook): same-server paths
        return safe_html._attribute(tag, attribute, value)

    return keep


def sanitize_body(html: str, local_paths: bool = False) -> str:
    """A page's whole body through nh3: the templates' structure, none of a notebook's attributes."""
    return nh3.clean(
        html,
        tags=BODY_TAGS,
        clean_content_tags={"script", "style"},
        attributes=BODY_ATTRIBUTES,
        attribute_filter=_page_attribute(local_paths),
        url_schemes=safe_html.LINK_SCHEMES | {"data"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


# --- the head, the template's own ----------------------------------------------------------------------
class _Head(HTMLParser):
    """The parts of a template's <head> a page keeps: charset, title, styles, stylesheets, scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[tuple[str, dict, str]] = []
        self._open: tuple[str, dict] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        if tag in {"title", "style", "script"}:
            self._open, self._text = (tag, attributes), []
        elif tag == "link" and attributes.get("rel") == "stylesheet" and attributes.get("href"):
            self.parts.append(("link", {"href": attributes["href"]}, ""))

    def handle_data(self, data):
        if self._open:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            self.parts.append((tag, self._open[1], "".join(self._text)))
            self._open = None


def _head(head_html: str, nonce: str, extra: str = "", after: str = "") -> str:
    parser = _Head()
    parser.feed(head_html)
    parser.close()
    out = ['<meta charset="utf-8">', extra]
    for tag, attributes, text in parser.parts:
        if tag == "title":
            out.append(f"<title>{html_lib.escape(text.strip())}</title>")
        elif tag == "style":
            out.append(f"<style>{text}</style>")
        elif tag == "link":
            out.append(f'<link rel="stylesheet" href="{html_lib.escape(attributes["href"])}">')
        elif tag == "script":
            kept = "".join(f' {k}="{html_lib.escape(attributes[k])}"' for k in ("src", "type") if attributes.get(k))
            out.append(f'<script nonce="{nonce}"{kept}>{text}</script>')
    out.append(after)
    return "\n".join(p for p in out if p)


def _split(page: str) -> tuple[str, str]:
    """A template's page as (head, body). Nothing of a notebook's comes before </head>."""
    head_end = page.index("</head>")
    head = page[page.index("<head>") + len("<head>") : head_end]
    rest = page[head_end:]
    body_start = re.search(r"<body\b[^>]*>", rest)
    if body_start is None:
        raise ValueError("the template wrote no <body>")
    return head, rest[body_start.end() : rest.rindex("</body>")]


def _page(lang: str, head: str, body: str) -> str:
    return f'<!DOCTYPE html>\n<html lang="{html_lib.escape(lang)}">\n<head>\n{head}\n</head>\n<body>\n{body}\n</body>\n</html>\n'


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


# --- the feedback page ----------------------------------------------------------------------------------
def feedback_policy(nonce: str) -> str:
    """The feedback file's policy (a <meta>: it is opened as a file): scripts by nonce, MathJax's loads after them."""
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}' 'strict-dynamic' 'unsafe-eval' {MATHJAX_CDN}",  # MathJax 2 evals its config
            f"style-src 'unsafe-inline' {MATHJAX_CDN}",
            f"font-src data: {MATHJAX_CDN}",
            "img-src data:",
            f"connect-src {MATHJAX_CDN}",
            "object-src 'none'",
            "frame-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


# After the template's styles, for WCAG 2.1 AA on the learner's page: printed feedback wraps instead of
# scrolling sideways out of keyboard reach; Pygments' comment colour at 4.84:1 on the code background
# (its own #3d7b7b is 4.46:1); links are underlined, not told from the text by colour alone. Nothing a cell
# holds is drawn outside the cell's box: each cell is a containing block and a paint boundary (contain: paint,
# overflow: clip), so layout that survives sanitizing (MathJax's \raise, \kern, \rlap and \bbox, which it
# draws as positioned boxes) cannot lay a fake score over the page's own header, which sits outside every cell.
FEEDBACK_STYLE = """
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.highlight .c, .highlight .c1, .highlight .cm, .highlight .ch, .highlight .cs { color: #3a7575; }
a { text-decoration: underline; }
.cell { position: relative; contain: paint; overflow: clip; }
"""
NOT_GRADED = "not graded yet"
_ZERO_SCORE = re.compile(r"Score: 0\.0 /")


def feedback_page(
    page: str,
    lang: str,
    ungraded: frozenset[str] | set[str] = frozenset(),
    nonce: str | None = None,
    ungraded_points: float = 0.0,
) -> str:
    """The feedback page nbgrader's template wrote, rebuilt (see the module's docstring): the answers in
    `ungraded` say "not graded yet" instead of nbgrader's 0, and the total says how many points, ungraded_points,
    are not graded yet."""
    nonce = nonce or new_nonce()
    head, body = _split(page)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html_lib.escape(feedback_policy(nonce))}">'
    soup = BeautifulSoup(sanitize_body(body), "html.parser")
    for grade_id in ungraded:
        for anchor in soup.find_all("a", href=f"#{grade_id}"):  # the table of contents
            _say_not_graded(anchor.parent)
        for anchor in soup.find_all("a", attrs={"name": grade_id}):  # the cell's heading, just after
            heading = anchor.find_next_sibling("div")
            if heading is not None:
                _say_not_graded(heading)
    if ungraded and ungraded_points > 0:
        _say_total_not_graded(soup, ungraded_points)
    return _page(lang, _head(head, nonce, meta, f"<style>{FEEDBACK_STYLE}</style>"), str(soup))


def _say_not_graded(element: Tag | None) -> None:
    if element is None:
        return
    for text in element.find_all(string=_ZERO_SCORE):
        text.replace_with(_ZERO_SCORE.sub(f"Score: {NOT_GRADED} /", str(text), count=1))


_TOTAL = re.compile(r"\(Score: [-\d.]+ / [\d.]+\)\s*$")


def _say_total_not_graded(soup: BeautifulSoup, points: float) -> None:
    """nbgrader's total, "lesson25 (Score: 20.03 / 41.0)", the page's first heading (in its header, before every
    cell), as "(Score: 20.03 / 41.0; 3 points not graded yet)"."""
    total = soup.select_one("div.panel-heading > h4")
    if total is None:
        return
    said = f"; {points:g} point{'' if points == 1 else 's'} {NOT_GRADED})"
    for text in total.find_all(string=_TOTAL, limit=1):
        text.replace_with(str(text).rstrip().removesuffix(")") + said)


class FeedbackExporter(HTMLExporter):
    """generate_feedback's exporter: nbgrader's feedback template, then the page rebuilt (feedback_page).

    The answers not graded yet are the ones feedback.MarkUngraded found in the gradebook."""

    def from_notebook_node(self, nb, resources=None, **kw):
        page, resources = super().from_notebook_node(nb, resources, **kw)
        ungraded = dict(resources.pop("servelab_ungraded", {}))
        points = sum(ungraded.values())
        return feedback_page(page, self.language_code, set(ungraded), ungraded_points=points), resources


# --- formgrader's view of a submission -------------------------------------------------------------------
# formgrader draws a view synchronously in the instructor's own server, which answers nobody else meanwhile
# (the whole class's grading stops): a graded notebook is drawn only within these caps, which a notebook
# the sandbox's runner capped always fits (its outputs: runner.MAX_RUN_OUTPUTS and MAX_RUN_OUTPUT_CHARS, plus
# one cut line per cell), and a larger one is refused before anything is drawn.
VIEW_MAX_CELLS = 2_000  # collection.MAX_CELLS
VIEW_MAX_OUTPUTS = 4_000  # runner.MAX_RUN_OUTPUTS plus a cut line for each of up to 2,000 cells
VIEW_MAX_OUTPUT_CHARS = 4_500_000  # runner.MAX_RUN_OUTPUT_CHARS plus the cut lines
VIEW_MAX_TEXT_CHARS = 150_000  # markdown and raw cells together (the lesson's own: about 58,000)
VIEW_MAX_SOURCE_CHARS = 1_000_000  # every cell's source together


def too_large_to_draw(nb) -> str | None:
    """Why formgrader's view does not draw this graded notebook (which cap it passes), or None."""
    cells = nb.get("cells", [])
    if len(cells) > VIEW_MAX_CELLS:
        return f"it has {len(cells):,} cells, more than {VIEW_MAX_CELLS:,}"
    outputs = [o for c in cells for o in c.get("outputs", [])]
    if len(outputs) > VIEW_MAX_OUTPUTS:
        return f"it holds {len(outputs):,} outputs, more than {VIEW_MAX_OUTPUTS:,}"

    def text(cell) -> int:
        source = cell.get("source", "")
        return len(source) if isinstance(source, str) else sum(len(line) for line in source)

    prose = sum(text(c) for c in cells if c.get("cell_type") != "code")
    if prose > VIEW_MAX_TEXT_CHARS:
        return f"its markdown and raw cells hold {prose:,} characters, more than {VIEW_MAX_TEXT_CHARS:,}"
    source = sum(text(c) for c in cells)
    if source > VIEW_MAX_SOURCE_CHARS:
        return f"its cells hold {source:,} characters of source, more than {VIEW_MAX_SOURCE_CHARS:,}"
    chars = 0
    for out in outputs:
        chars += len(json.dumps(out, default=str))
        if chars > VIEW_MAX_OUTPUT_CHARS:
            return f"its outputs hold more than {VIEW_MAX_OUTPUT_CHARS:,} characters"
    return None


# Set by servelab.grading.page_policy when Jupyter loads it (the page policy imports this module, never the other
# way round): RequireRebuiltView asks before formgrader draws a view.
POLICY_LOADED = False


class RequireRebuiltView(Preprocessor):
    """formgrader draws a submission only in a server that rebuilds the page as it is sent (page_policy loaded),
    and only a graded notebook within the view's caps (too_large_to_draw).

    formgrader renders with its own HTMLExporter, which takes this course's nbgrader_config.py but
    nothing after the template; a server started without grading/jupyter/ would send nbgrader's page
    as it is. There the view refuses, saying how to start formgrader instead. It is the exporter's first
    preprocessor, so a notebook too large to draw is refused before anything else reads its outputs.
    """

    enabled = Bool(True, help="Whether to run this preprocessor (on by default, unlike nbconvert's).").tag(config=True)

    def preprocess(self, nb, resources):
        if resources.get("submission_id") is not None:  # formgrader's SubmissionHandler; feedback has none
            from tornado.web import HTTPError

            if not POLICY_LOADED:
                raise HTTPError(
                    500,
                    "This course draws a submission only with its page policy loaded: start the instructor's "
                    "Jupyter with JUPYTER_CONFIG_PATH=<the checkout>/grading/jupyter (the class hub does).",
                )
            why = too_large_to_draw(nb)
            if why:
                student = str(resources.get("student", "this student"))
                raise HTTPError(
                    413,
                    "This submission is too large to draw here (%s); its grade stands (grades.csv and the "
                    "gradebook have it). Read the student's notebook in autograded/%s/ outside the server, "
                    "or grade its answers in the gradebook.",
                    why,
                    student,
                )
        return nb, resources


def formgrader_policy(nonce: str) -> str:
    """formgrader's view: its scripts by nonce only; the cells' frames inherit it and run nothing anyway."""
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'nonce-{nonce}' 'strict-dynamic' 'unsafe-eval' {MATHJAX_CDN}",  # MathJax 2 evals its config
            f"style-src 'self' 'unsafe-inline' {MATHJAX_CDN}",
            f"font-src 'self' data: {MATHJAX_CDN}",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'self'",
        ]
    )


# What formgrader's page did inline (its nav's tooltips, the name toggle's onclick), as one script with the nonce.
FORMGRADE_SCRIPT = """
$('span.glyphicon.name-hidden').tooltip({title: "Show student name", placement: "bottom", trigger: "hover"})
  .on('click', function () { toggle_name(true); });
$('span.glyphicon.name-shown').tooltip({title: "Hide student name", placement: "bottom", trigger: "hover"})
  .on('click', function () { toggle_name(false); });
"""
FORMGRADE_STYLE = """
input.score { width: 4em; }
input.extra-credit { width: 3em; }
.scoring-buttons + span + span { margin-left: 1em; }
iframe.servelab-cell { display: block; width: 100%; border: 0; resize: vertical; overflow: auto; }
"""
FRAME_STYLE = """
body { margin: 0; padding: 0.2em 0.4em; font-size: 14px; background: white; }
div#notebook-container { width: 100%; padding: 0; box-shadow: none; }
img { max-width: 100%; height: auto; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def frame_css() -> str:
    """The frames' own stylesheet: Pygments' colours and the notebook styles they need (no script, no load)."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight") + FRAME_STYLE


def formgrader_page(page: str, nonce: str, base_url: str, lang: str = "en") -> str:
    """formgrader's view of a submission, rebuilt: sanitized whole, every cell's content in a sandboxed frame."""
    head, body = _split(page)
    soup = BeautifulSoup(sanitize_body(body, local_paths=True), "html.parser")
    containers = soup.find_all("div", id="notebook-container")  # formgrade's, and classic's inside it: the cells'
    if not containers:
        raise ValueError("formgrader's page has no notebook container")
    container = containers[-1]
    stylesheets = [
        f"{base_url.rstrip('/')}/formgrader/static/node_modules/bootstrap/dist/css/bootstrap.min.css",
        f"{base_url.rstrip('/')}/{FRAME_CSS_PATH}",
    ]
    _frame_cells(soup, container, stylesheets, lang)
    script = soup.new_tag("script", attrs={"nonce": nonce})
    script.string = FORMGRADE_SCRIPT
    soup.append(script)
    return _page(lang, _head(head, nonce, f"<style>{FORMGRADE_STYLE}</style>"), str(soup))


def _frame_cells(soup: BeautifulSoup, container: Tag, stylesheets: list[str], lang: str) -> None:
    """Replace the container's content by frames: one per graded cell (inside its panel), one per run of others."""
    children = list(container.children)
    container.clear()
    run: list = []

    def flush():
        if any(not (isinstance(n, NavigableString) and not n.strip()) for n in run):
            wrapper = soup.new_tag("div", attrs={"class": "cell servelab-cells"})
            wrapper.append(_frame(soup, run, stylesheets, lang, "The notebook's cells"))
            container.append(wrapper)
        run.clear()

    for child in children:
        panel = child.find("div", class_="nbgrader_cell") if isinstance(child, Tag) else None
        if panel is None:
            run.append(child)
            continue
        flush()
        heading = panel.find("div", class_="panel-heading", recursive=False)
        footer = panel.find("div", class_="panel-footer", recursive=False)
        for chrome in (heading, footer):
            if chrome is not None:
                chrome.extract()
        body = panel.find("div", class_="panel-body", recursive=False)
        if body is not None:
            body.unwrap()
        panel.unwrap()  # the cell's content, without its grading panel, is what the frame shows
        new_panel = soup.new_tag("div", attrs={"class": "panel panel-primary nbgrader_cell"})
        if heading is not None:
            new_panel.append(heading)
        frame_body = soup.new_tag("div", attrs={"class": "panel-body"})
        frame_body.append(_frame(soup, [child], stylesheets, lang, "The student's cell"))
        new_panel.append(frame_body)
        if footer is not None:
            new_panel.append(footer)
        cell = soup.new_tag("div", attrs={"class": "cell border-box-sizing"})
        cell.append(new_panel)
        container.append(cell)
    flush()


def _frame(soup: BeautifulSoup, nodes: list, stylesheets: list[str], lang: str, title: str) -> Tag:
    content = "".join(str(n) for n in nodes)
    links = "".join(f'<link rel="stylesheet" href="{html_lib.escape(s)}">' for s in stylesheets)
    document = (
        f'<!DOCTYPE html><html lang="{html_lib.escape(lang)}"><head><meta charset="utf-8">{links}</head>'
        f'<body><div id="notebook-container">{content}</div></body></html>'
    )
    height = frame_height_em(BeautifulSoup(content, "html.parser"))
    return soup.new_tag(
        "iframe",
        attrs={
            "class": "servelab-cell",
            "sandbox": "",  # no scripts, no forms, no popups, no same origin: an opaque origin
            "referrerpolicy": "no-referrer",
            "title": title,
            "srcdoc": document,
            "style": f"height: {height:.1f}em",
        },
    )


LINE_EM = 1.45  # a line of the notebook's text, in em of its 14px font
CHARS_PER_LINE = 110  # of flowing text across formgrader's container


def frame_height_em(fragment: BeautifulSoup) -> float:
    """A frame's height, estimated from its content (a frame with no script cannot be measured from outside).

    Preformatted lines count one each, flowing text by its length, images by their size; a frame
    that is still too short scrolls, and the instructor can drag it taller (resize: vertical).
    """
    em = 1.0
    for pre in fragment.find_all("pre"):
        em += LINE_EM * (pre.get_text().rstrip("\n").count("\n") + 1) * 0.87 + 0.9
        pre.extract()
    for img in fragment.find_all("img"):
        em += _image_height_px(img) / 14 + 0.5
    for block in fragment.find_all(["p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "blockquote"]):
        em += 0.6 if block.name not in {"tr", "li"} else 0.3
    text = " ".join(fragment.get_text(" ").split())
    em += LINE_EM * math.ceil(len(text) / CHARS_PER_LINE) if text else 0
    return min(max(em, 2.5), 400.0)


def _image_height_px(img: Tag) -> float:
    height = str(img.get("height", ""))
    if WHOLE_NUMBER.match(height):
        return float(height)
    src = str(img.get("src", ""))
    if src.startswith("data:image/png;base64,"):
        try:
            header = base64.b64decode(src.split(",", 1)[1][:48])
            width, height = struct.unpack(">II", header[16:24])
            return height * min(1.0, 1000 / width) if width else 150.0
        except (ValueError, struct.error):
            pass
    return 150.0
