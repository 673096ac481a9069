"""What the pages people open show of a submission: its markdown and outputs as inert HTML.

Two pages render a submitted notebook: the feedback a learner is sent (nbgrader
generate_feedback) and formgrader's view of a submission, in the instructor's own
Jupyter server, where a script would act as the instructor (the grade API, the
server's API). Both are nbconvert's HTMLExporter with nbgrader's templates, so one
configuration (grading/nbgrader_config.py) makes both inert:

1. `InertOutputs` (a preprocessor) keeps only the outputs those templates draw as
   plain HTML, text or images, and drops output metadata that would name a file
   to load (nbconvert draws `filenames` as an <img src>) or an iframe;
2. `HTMLExporter.sanitize_html` (nbconvert's own switch) passes HTML outputs through
   the `clean_html` filter and draws no JavaScript or widget outputs;
3. the filters `markdown2html` and `clean_html` here render with nbconvert's own
   markdown renderer and clean the result with nh3 (the ammonia sanitizer), because
   nbgrader's templates draw markdown cells without nbconvert's clean_html.

What is left is text, tables, lists, headings, links to http(s) and mailto (opened
without a referrer) or to the page's own anchors, and images from data: URLs only,
so a page makes no request because of what a student handed in. No scripts, event
handlers, styles, forms, frames, <base> or <meta>, ids or classes (no clobbering the
page's own elements), except pygments' own token classes on highlighted code.
"""

from __future__ import annotations

import re

import nh3
from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from pygments.token import STANDARD_TYPES
from traitlets import Bool

# nh3's default tags minus image maps (<area href>); its default attributes (no style, id or class).
TAGS = set(nh3.ALLOWED_TAGS) - {"area", "map"}
ATTRIBUTES = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items() if tag in TAGS}
LINK_SCHEMES = {"http", "https", "mailto"}
# Pictures the page already holds: a markdown attachment or a pasted image, rendered as a data: URL.
IMAGE_DATA_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*\Z", re.IGNORECASE)
# Pygments marks code with short token classes ("k", "nb", "s1"); its wrapper is div.highlight.
TOKEN_CLASSES = {name for name in STANDARD_TYPES.values() if name}
CODE_CLASSES = {"span": TOKEN_CLASSES, "div": {"highlight"}}
# Output data that nbgrader's templates (nbconvert's classic) draw inertly: escaped text, sanitized HTML,
# base64 images (SVG too: drawn as <img src="data:...">, where it runs nothing and loads nothing).
INERT_MIMETYPES = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml"}
# `unconfined` is not kept: the templates write it as an image's class (lifting its max-width), and no class
# comes from a notebook.
INERT_OUTPUT_METADATA = {"width", "height", "alt"}


def _attribute(tag: str, attribute: str, value: str) -> str | None:
    """Keep a URL only where it loads nothing: an <img> from data:, a link to http(s), mailto or #anchor."""
    if tag == "img" and attribute == "src":
        return value if IMAGE_DATA_URL.match(value.strip()) else None
    if attribute in {"href", "cite"}:
        scheme = value.strip().split(":", 1)[0].lower() if ":" in value else ""
        return value if value.startswith("#") or scheme in LINK_SCHEMES else None
    return value


def sanitize(html: str) -> str:
    """Submitted HTML with everything that could run, load, style or clobber removed (nh3 with the policy above)."""
    return nh3.clean(
        str(html),
        tags=TAGS,
        clean_content_tags={"script", "style"},  # dropped with their text, not left as visible source
        attributes=ATTRIBUTES,
        allowed_classes=CODE_CLASSES,  # the one way a class survives
        attribute_filter=_attribute,
        url_schemes=LINK_SCHEMES | {"data"},  # data: survives only as an image's src (see _attribute)
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def clean_html(html) -> str:
    """nbconvert's `clean_html` filter, with this module's policy: HTML outputs, raw cells, highlighted code."""
    return sanitize(html.decode() if isinstance(html, bytes) else html)


@pass_context
def markdown2html(context, source: str) -> str:
    """nbconvert's markdown rendering (math kept for MathJax, attachments inlined), then sanitized.

    embed_images stays off: it would read image files named in the markdown from the
    grader's disk into the page.
    """
    cell = context.get("cell", {})
    renderer = IPythonRenderer(
        escape=False, attachments=cell.get("attachments", {}), embed_images=False, exclude_anchor_links=True
    )
    return sanitize(MarkdownWithMath(renderer=renderer).render(source))


class InertOutputs(Preprocessor):
    """Keep only output data drawn as text, sanitized HTML or images; drop metadata that loads files or frames."""

    enabled = Bool(True, help="Whether to run this preprocessor (on by default, unlike nbconvert's).").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if "data" in output:
                output["data"] = {k: v for k, v in output["data"].items() if k in INERT_MIMETYPES}
            if "metadata" in output:
                output["metadata"] = {
                    key: _inert_metadata(key, value)
                    for key, value in output["metadata"].items()
                    if key in INERT_MIMETYPES | INERT_OUTPUT_METADATA
                }
        return cell, resources


def _inert_metadata(key: str, value):
    """An output's metadata is keyed by mimetype (or holds a size directly): keep only sizes and alt text.

    A size is a whole number or nothing (nbconvert writes it into the page unquoted); the page is
    sanitized whole afterwards too (pages.py), this keeps the notebook itself honest.
    """
    if key in INERT_OUTPUT_METADATA:
        return _size(value) if key in {"width", "height"} else value
    if not isinstance(value, dict):
        return {}
    kept = {k: _size(v) if k in {"width", "height"} else v for k, v in value.items() if k in INERT_OUTPUT_METADATA}
    return {k: v for k, v in kept.items() if v is not None}


def _size(value) -> int | None:
    """An image's width or height as a whole number of pixels, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and 0 < value < 100_000:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 5:
        return int(value.strip())
    return None
