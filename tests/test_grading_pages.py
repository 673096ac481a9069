"""The pages people open of a submission run nothing the student handed in (Chromium, about a minute).

One hostile submission (the perfect answers plus markdown and outputs carrying
scripts, event handlers, javascript: and data: URLs, SVG onload, iframes,
<meta refresh>, <base>, CSS loads, HTML, SVG, JavaScript and widget outputs) and
the untouched perfect one are graded in one real pipeline run. Then Chromium opens
the hostile feedback page as the student would (the file), and formgrader's view of
the submission as the instructor, logged in with the server's token (a real Jupyter
server started in a folder laid out like this checkout, with its nbgrader_config.py).
Every payload tries to change document.title, set window.__pwned and fetch a canary
on another loopback port; none may, and a hostile page asks the servers for nothing
the clean page does not. A control renders the same notebook with nbgrader's templates
and nbconvert's defaults: there the payloads fire, so the canary is live.
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from browser_helpers import REPO, JupyterLab, chromium, require_chromium, screenshot
from bs4 import BeautifulSoup

from servelab.grading import course, pages, pipeline, safe_html

LESSON = course.get("lesson25")
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
LEARNER_WORDS = ["My working, in my own words", "tokens in flight", "a &lt; b"]  # markdown the learner wrote


def in_chromium(test):
    """A browser test: slow and browser (CI runs these too), bounded. They share one grading run,
    one Jupyter server and one Chromium (module fixtures); the unit tests at the end need none."""
    return pytest.mark.slow(pytest.mark.browser(pytest.mark.timeout(600)(test)))


# --- the canary: a loopback server that records every request a payload gets out ------------------
class Canary(http.server.ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), _CanaryHandler)
        self.hits: list[str] = []
        self.hit = threading.Condition()

    def record(self, path: str) -> None:
        with self.hit:
            self.hits.append(path)
            self.hit.notify_all()

    def wait_for_script(self, since: int, timeout: float = 30) -> list[str]:
        """Block until a payload's script has called in after hit number `since` (or the timeout); the new hits."""
        with self.hit:
            self.hit.wait_for(lambda: any(h.startswith("/ran-") for h in self.hits[since:]), timeout=timeout)
            return self.hits[since:]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _CanaryHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.record(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"canary")

    do_POST = do_GET

    def log_message(self, *args):
        pass


def payload_js(canary: str, tag: str) -> str:
    """What each payload runs if it can: all three are checked."""
    return f"document.title='pwned';window.__pwned=(window.__pwned||0)+1;fetch('{canary}/ran-{tag}')"


def hostile_html(canary: str, where: str) -> str:
    """HTML that tries every way a page can be made to run, load or navigate."""
    js = lambda tag: payload_js(canary, f"{where}-{tag}")  # noqa: E731
    data_page = "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="
    return "\n".join(
        [
            f"<script>{js('script')}</script>",
            f'<img src="x" onerror="{js("img-onerror")}">',
            f'<body onload="{js("body-onload")}">',
            f'<svg onload="{js("svg-onload")}"><circle r="4"/></svg>',
            f"<svg><script>{js('svg-script')}</script></svg>",
            f'<a href="javascript:{js("js-link")}">a javascript: link</a>',
            f'<a href="{data_page}">a data: link</a>',
            f'<iframe src="{canary}/iframe"></iframe>',
            f'<iframe srcdoc="<script>{js("srcdoc")}</script>"></iframe>',
            f'<meta http-equiv="refresh" content="0;url={canary}/meta-refresh">',
            f'<base href="{canary}/base/">',
            f'<style>@import url("{canary}/import.css"); body {{ background: url("{canary}/bg.png") }}</style>',
            f"<div style=\"background-image: url('{canary}/style-attribute.png')\">a styled div</div>",
            f'<link rel="stylesheet" href="{canary}/link.css">',
            f'<object data="{canary}/object"></object><embed src="{canary}/embed">',
            f'<form action="{canary}/form"><input autofocus onfocus="{js("autofocus")}"><button>go</button></form>',
            f'<img src="{canary}/remote.png"><input type="image" src="{canary}/input-image">',
            f'<details open ontoggle="{js("ontoggle")}"><summary>details</summary></details>',
            f'<video><source onerror="{js("video-onerror")}"></video>',
            f'<math><mtext><table><mglyph><style><img src=x onerror="{js("mxss")}">',
            f'<noscript><p title="</noscript><img src=x onerror={js("noscript")}>"></noscript>',
        ]
    )


def hostile_markdown(canary: str, where: str) -> str:
    """The learner's own readable markdown, then markdown's own ways to link and load, then raw HTML."""
    return "\n\n".join(
        [
            "## My working, in my own words",
            "The cache grows with the **tokens in flight**; note that `a < b` here, and $b / t$ bytes per token.",
            "| batch | tokens |\n|---|---|\n| 8 | 128 |",
            f"![a remote picture]({canary}/markdown-image.png) and [a markdown link](javascript:{payload_js(canary, where + '-md-link')})",
            hostile_html(canary, where),
        ]
    )


def hostile_outputs_cell(canary: str) -> str:
    """A code cell whose outputs carry HTML, SVG, JavaScript, markdown, a widget and file-naming metadata."""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{payload_js(canary, "svg-output-onload")}">'
        f'<script>{payload_js(canary, "svg-output-script")}</script><image href="{canary}/svg-image.png"/></svg>'
    )
    return "\n".join(
        [
            "from IPython.display import HTML, SVG, Javascript, Markdown, display, publish_display_data",
            f"display(HTML({json.dumps(hostile_html(canary, 'html-output'))}))",
            f"display(HTML({json.dumps(hostile_html(canary, 'isolated-output'))}, metadata={{'isolated': True}}))",
            f"display(SVG({json.dumps(svg)}))",
            f"display(Javascript({json.dumps(payload_js(canary, 'javascript-output'))}))",
            f"display(Markdown({json.dumps(hostile_markdown(canary, 'markdown-output'))}))",
            f"publish_display_data({{'image/png': {PNG_1PX!r}, 'text/plain': 'a picture'}},",
            f"                     metadata={{'filenames': {{'image/png': '{canary}/filenames.png'}}}})",
            "publish_display_data({'application/vnd.jupyter.widget-view+json': {'model_id': 'x', 'version_major': 2,",
            "                      'version_minor': 0}, 'text/plain': 'a widget'})",
            f"print({json.dumps('<script>' + payload_js(canary, 'stream') + '</script>')})",
        ]
    )


FAKE_HEADER = "lesson25 (Score: 41.0 / 41.0)"  # what a student's cell, laid over the real header, would claim
# TeX that MathJax draws as positioned, opaque boxes: raised and pulled left over the page's score header.
MATH_OVERLAY = (
    r"$$\smash{\raise{33.3em}{\rlap{\kern-33.8em\bbox[#f5f5f5,0.4em]{\large\textsf{lesson25 (Score: 99.0 / "
    r"41.0)}\hspace{20em}}}}}$$"
)
HIDDEN_WORDS = "a cell the student tried to hide"


def attribute_cells(canary: str) -> list:
    """Code cells whose outputs and metadata reach the templates' own attributes: image sizes and alt text
    (nbconvert writes width={{ width }} unquoted), a metadata entry under a forged mimetype, cell tags (written
    into class), a cell id (written into id) and a cell's alt metadata. Each carries a script that would call
    the canary and, in formgrader, give the attacker full marks through its API."""
    run = base64.b64encode(
        (
            payload_js(canary, "attribute")
            + ";fetch(location.origin+'/formgrader/api/grades?submission_id='+(window.submission_id||''))"
            + ".then(r=>r.json()).then(gs=>gs.forEach(g=>fetch(location.origin+'/formgrader/api/grade/'+g.id,"
            + "{method:'PUT',body:JSON.stringify({manual_score:g.max_score})})))"
        ).encode()
    ).decode()
    run_js = f"eval(atob('{run}'))"
    sizes = {
        "width": f"320 onload={run_js}",
        "height": f'10" onerror="{run_js}',
        "alt": f'picture" onerror="{run_js}',
        "unconfined": f'" onload="{run_js}',
    }
    forged = f'image/png" onload="{run_js}'  # a mimetype key is a string the student chose too
    show = "\n".join(
        [
            "from IPython.display import publish_display_data",
            f"meta = {sizes!r}",
            f"publish_display_data({{'image/png': {PNG_1PX!r}, 'text/plain': 'a picture'}},",
            f"                     metadata={{'image/png': meta, {forged!r}: meta}})",
            f"publish_display_data({{'image/jpeg': {PNG_1PX!r}}}, metadata=meta)",
            "publish_display_data({'image/png': " + repr(PNG_1PX) + "})  # the cell's own alt metadata below",
        ]
    )
    pictures = nbformat.v4.new_code_cell(show, metadata={"alt": f'x" onerror="{run_js}'})
    pictures.id = "navbar-fixed-top"
    header = nbformat.v4.new_code_cell(
        f"print({FAKE_HEADER!r})", metadata={"tags": ["x navbar-fixed-top navbar-default", " pull-right help"]}
    )
    hidden = nbformat.v4.new_code_cell(f"print({HIDDEN_WORDS!r})", metadata={"tags": ["x hidden"]})
    return [header, pictures, hidden]


def hostile_submission(canary: str) -> nbformat.NotebookNode:
    """The perfect sample with payloads in its written answer, a markdown cell (and its attachments), a raw
    HTML cell and a cell's outputs."""
    nb = nbformat.read(REPO / "grading" / "submissions" / "lesson25" / "perfect.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "warmup1-explain":
            cell.source += "\n\n" + hostile_markdown(canary, "answer")
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{payload_js(canary, "attachment-svg")}"><circle r="4"/></svg>'
    )
    attached = nbformat.v4.new_markdown_cell(
        "![an attached svg](attachment:figure.svg) ![an attached page](attachment:page.html)\n\n"
        + hostile_markdown(canary, "markdown"),
        attachments={
            "figure.svg": {"image/svg+xml": base64.b64encode(svg.encode()).decode()},
            "page.html": {"text/html": base64.b64encode(hostile_html(canary, "attachment").encode()).decode()},
        },
    )
    raw = nbformat.v4.new_raw_cell(hostile_html(canary, "raw"), metadata={"raw_mimetype": "text/html"})
    nb.cells[2:2] = [attached, raw, nbformat.v4.new_code_cell(hostile_outputs_cell(canary)), *attribute_cells(canary)]
    nb.cells[0].source = (
        MATH_OVERLAY + "\n\n" + nb.cells[0].source
    )  # above the title, as close to the header as it gets
    return nb


# --- one grading run, in a folder laid out like this checkout ---------------------------------------
@pytest.fixture(scope="module")
def canary():
    server = Canary()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, canary):
    """The instructor's folder (the checkout's nbgrader configs, the course in grading/course) and the run's output."""
    tmp = tmp_path_factory.mktemp("pages")
    instructor = tmp / "instructor"
    (instructor / "grading").mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", instructor / "nbgrader_config.py")
    shutil.copy(course.CONFIG, instructor / "grading" / "nbgrader_config.py")
    (instructor / "solutions").symlink_to(course.SOLUTIONS)
    subs = tmp / "submissions" / LESSON.name
    subs.mkdir(parents=True)
    shutil.copy(REPO / "grading" / "submissions" / LESSON.name / "perfect.ipynb", subs / "perfect.ipynb")
    nbformat.write(hostile_submission(canary.url), subs / "hostile.ipynb")
    results = pipeline.run(
        subs.parent,
        instructor / "grading" / "course",
        tmp / "out",
        assignments=[LESSON],
        cell_timeout=30,
        submission_timeout=240,
        log=lambda *a: None,
    )
    by_student = {g.student: g for g in results}
    assert all(g.status == "graded" for g in results), [g.log_tail for g in results]
    return {"results": by_student, "instructor": instructor, "out": tmp / "out"}


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, chromium(p) as context:
        yield context


def open_and_record(context, url: str, *allowed: str):
    """Open a page, let it settle, and return it with every URL it asked for.

    Only URLs starting with one of `allowed` are served (the page's own server and the
    canary); the rest (the templates' CDN scripts) fail at once on this closed network.
    """
    requested: list[str] = []
    page = context.new_page()
    page.on("request", lambda r: requested.append(r.url))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(allowed) else route.abort())
    response = page.goto(url, wait_until="load", timeout=60_000)
    page.wait_for_load_state("networkidle", timeout=60_000)
    page.response = response
    return page, requested


def open_loaded(context, url: str, *allowed: str):
    """Open a page (only `allowed` URLs served, as open_and_record) and return it once its load event fired;
    what it is then waited on is the test's own (formgrader's scores, say), not a quiet network."""
    page = context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(allowed) else route.abort())
    page.response = page.goto(url, wait_until="load", timeout=120_000)
    return page


def page_state(page) -> dict:
    """What a payload would have changed, and what in the notebook could still run or load."""
    return page.evaluate(r"""() => {
        const root = document.querySelector('#notebook-container') || document.body;
        const all = Array.from(root.querySelectorAll('*'));
        return {
            title: document.title,
            pwned: window.__pwned === undefined ? null : window.__pwned,
            handlers: all.filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
            // formgrader's cells are drawn in frames with an empty sandbox (no scripts, an opaque origin): those count apart
            dangerous: root.querySelectorAll('script, iframe:not([sandbox=""]), object, embed, base, meta, link, style, form, svg').length,
            frames: Array.from(root.querySelectorAll('iframe')).map(f => f.getAttribute('sandbox')),
            urls: all.flatMap(e => ['href', 'src', 'action', 'srcdoc', 'style']
                                      .filter(a => !(a === 'srcdoc' && e.matches('iframe[sandbox=""]')))
                                      .map(a => [a, e.getAttribute(a)]))
                     .filter(([a, v]) => v && (a === 'style' ? /url\(/i.test(v)
                              : !v.startsWith('#') && !v.startsWith('data:image/') && !/^(https?:|mailto:)/.test(v)))
                     .map(([a, v]) => a + '=' + v),
            text: document.body.innerText,
            // what the frames show, read here without running it (DOMParser builds an inert document)
            framed: Array.from(root.querySelectorAll('iframe[sandbox=""]'))
                         .map(f => new DOMParser().parseFromString(f.srcdoc, 'text/html').body.textContent).join(' '),
        };
    }""")


def same_origin_paths(requested: list[str], origin: str, submission_id: str | None = None) -> set[str]:
    paths = {u[len(origin) :].split("?")[0] for u in requested if u.startswith(origin)}
    return {p.replace(submission_id, "<id>") for p in paths} if submission_id else paths


# --- the student's feedback page ----------------------------------------------------------------------
@in_chromium
def test_the_feedback_page_runs_and_loads_nothing_the_student_wrote(graded, browser, canary):
    out = graded["out"] / "feedback" / LESSON.name
    clean, clean_requests = open_and_record(browser, (out / "perfect.html").as_uri(), "file://", canary.url)
    clean_state = page_state(clean)
    hits_before = list(canary.hits)
    page, requested = open_and_record(browser, (out / "hostile.html").as_uri(), "file://", canary.url)
    state = page_state(page)
    assert canary.hits == hits_before == [], canary.hits
    assert state["title"] == clean_state["title"] == LESSON.notebook_id and state["pwned"] is None
    assert state["handlers"] == 0 and state["dangerous"] == 0 and state["urls"] == [], state
    # Requests the page makes itself (the template's MathJax) and nothing more: no file beside it either.
    assert set(requested) - {page.response.url} <= set(clean_requests) - {clean.response.url}, requested
    # Still readable: the learner's markdown and the checkers' words for a right answer.
    html = (out / "hostile.html").read_text()
    for words in LEARNER_WORDS:
        assert words in html, words
    assert re.search(r'<img alt="an attached svg" src="data:image/svg\+xml;base64,', html)  # inert in an <img>
    assert re.search(r'<img alt="an attached page"/>', html)  # data:text/html is no picture
    assert "My working, in my own words" in state["text"] and "tokens in flight" in state["text"]
    perfect = graded["results"]["perfect"]
    hostile = graded["results"]["hostile"]
    assert hostile.score == perfect.score > 0 and hostile.tests == perfect.tests
    for grade_id, said in hostile.feedback.items():  # "KV cache bytes per token: correct (131,072 bytes)." ...
        assert said.splitlines()[0].strip() in state["text"], grade_id
    for page_ in (clean, page):
        page_.close()


# --- formgrader, in the instructor's own Jupyter server -----------------------------------------------
@pytest.fixture(scope="module")
def formgrader(graded, browser):
    """A Jupyter server started in the instructor's folder (its nbgrader_config.py); the browser logged in to it."""
    # As the class hub gives each instructor: formgrader plus servelab's policy on its pages (page_policy.py).
    policy = {"JUPYTER_CONFIG_PATH": str(REPO / "grading" / "jupyter")}
    with JupyterLab(graded["instructor"], env=policy, copy=()) as server:
        page = browser.new_page()
        page.goto(f"{server.base_url}/login", timeout=60_000)
        page.fill("input[name=password]", server.token)  # the login form takes the server's token
        page.locator("#login_submit").click()
        page.wait_for_url(lambda url: "/login" not in url, timeout=60_000)
        page.close()
        yield server


def submission_id(graded, student: str) -> str:
    from nbgrader.api import Gradebook

    root = graded["instructor"] / "grading" / "course"
    with Gradebook(pipeline.gradebook_url(root)) as gb:
        return gb.find_submission_notebook(LESSON.notebook_id, LESSON.name, student).id


@in_chromium
def test_formgraders_view_of_a_submission_runs_nothing_the_student_wrote(graded, formgrader, browser, canary):
    origin = formgrader.base_url
    ids = {s: submission_id(graded, s) for s in ("perfect", "hostile")}
    views = {}
    for student in ("perfect", "hostile"):
        page, requested = open_and_record(
            browser, f"{origin}/formgrader/submissions/{ids[student]}/", origin, canary.url
        )
        views[student] = (page, requested, page_state(page))
    clean, clean_requests, clean_state = views["perfect"]
    page, requested, state = views["hostile"]
    assert canary.hits == [], canary.hits
    assert state["title"] == clean_state["title"] == LESSON.notebook_id and state["pwned"] is None
    assert state["handlers"] == 0 and state["dangerous"] == 0 and state["urls"] == [], state
    assert same_origin_paths(requested, origin, ids["hostile"]) <= same_origin_paths(
        clean_requests, origin, ids["perfect"]
    )
    assert {u for u in requested if not u.startswith(origin)} <= {u for u in clean_requests if not u.startswith(origin)}
    # formgrader's own page still works: a score box per graded cell, showing the autograde its script fetched.
    auto_scores = "() => Array.from(document.querySelectorAll('input.score')).map(e => e.placeholder)"
    scores = page.evaluate(auto_scores)
    assert scores == clean.evaluate(auto_scores) and len(scores) > 0
    assert any(float(v or 0) > 0 for v in scores), scores
    assert "My working, in my own words" in state["framed"] and "My working" not in state["text"]
    assert state["frames"] and set(state["frames"]) == {""}, state["frames"]  # every frame: an empty sandbox
    assert "base-uri 'none'" in page.response.headers["content-security-policy"]
    for page_, _, _ in views.values():
        page_.close()


@in_chromium
def test_a_file_handed_in_beside_the_notebook_runs_nothing_in_formgrader(graded, formgrader, browser, canary):
    """formgrader serves the submission's folder (all that `nbgrader collect` took in) at <id>/<path>."""
    folder = graded["instructor"] / "grading" / "course" / "autograded" / "hostile" / LESSON.name
    (folder / "report.html").write_text(
        "<html><head><title>report</title></head><body>" + hostile_html(canary.url, "file") + "</body></html>"
    )
    (folder / "figure.svg").write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{payload_js(canary.url, "file-svg")}"><circle r="4"/></svg>'
    )
    origin = formgrader.base_url
    for name in ("report.html", "figure.svg"):
        page, requested = open_and_record(
            browser, f"{origin}/formgrader/submissions/{submission_id(graded, 'hostile')}/{name}", origin, canary.url
        )
        assert page.response.ok and page.response.headers["content-security-policy"].startswith("sandbox"), name
        assert page.evaluate("() => window.__pwned === undefined") and page.title() != "pwned", name
        page.close()
    assert canary.hits == [], canary.hits


# --- notebook values in the templates' own attributes: sizes, alt text, mimetype keys, tags, ids ----------
ATTRIBUTE_STATE = r"""() => {
    const all = Array.from(document.querySelectorAll('body *'));
    const visible = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
    const topmost = e => { const r = e.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2;
                           const hit = document.elementFromPoint(x, y); return !!hit && (hit === e || e.contains(hit)); };
    const header = document.querySelector('.panel-heading h4') || document.querySelector('nav');
    const nav = Array.from(document.querySelectorAll('nav a[href]')).filter(visible);
    return {
        handlers: all.filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
        sizes: all.filter(e => e.tagName === 'IMG').flatMap(e => ['width', 'height'].map(a => e.getAttribute(a)))
                  .filter(v => v !== null && !/^[0-9]+$/.test(v)),
        fixed: all.filter(e => getComputedStyle(e).position === 'fixed').map(e => e.tagName + '#' + e.id + '.' + e.className),
        celltags: all.filter(e => Array.from(e.classList).some(c => c === 'hidden' || c.startsWith('celltag_'))).length,
        ids: all.map(e => e.id).filter(id => id && /cell-id|navbar/.test(id)),
        header_on_top: topmost(header),
        nav_covered: nav.filter(e => !topmost(e)).map(e => e.textContent.trim()),
        words: document.body.innerText,
        hidden_visible: all.some(e => visible(e) && e.children.length === 0 && e.textContent.includes('HIDDEN')),
    };
}"""


def gradebook_rows(graded) -> dict[str, list[tuple]]:
    """Every grade and comment in the gradebook, by student: what a page that ran as the instructor could change."""
    from nbgrader.api import Gradebook

    root = graded["instructor"] / "grading" / "course"
    rows: dict[str, list[tuple]] = {}
    with Gradebook(pipeline.gradebook_url(root)) as gb:
        for student in ("perfect", "hostile"):
            nb = gb.find_submission_notebook(LESSON.notebook_id, LESSON.name, student)
            rows[student] = sorted(
                [("grade", g.name, g.auto_score, g.manual_score, g.extra_credit) for g in nb.grades]
                + [("comment", c.name, c.auto_comment, c.manual_comment) for c in nb.comments]
            )
    return rows


def check_attribute_state(state: dict, where: str) -> None:
    assert state["handlers"] == 0 and state["sizes"] == [], (where, state)  # sizes are numbers or nothing
    assert state["celltags"] == 0 and state["ids"] == [], (where, state)  # no tag became a class, no cell id an id
    assert state["header_on_top"] and state["nav_covered"] == [], (where, state)  # nothing laid over the page's own
    # formgrader's own fixed parts only: its navigation bar, the help button, the status line
    assert set(state["fixed"]) <= {"NAV#.navbar navbar-default navbar-fixed-top", "DIV#.help", "DIV#statusmessage."}, (
        where,
        state["fixed"],
    )


@in_chromium
def test_notebook_values_in_attributes_stay_values_in_both_pages(graded, formgrader, browser, canary):
    """Image sizes and alt text with handlers, a forged mimetype key, cell tags `x navbar-fixed-top ...` and
    `x hidden`, a cell id: opened as the student (the feedback file) and as the instructor (formgrader)."""
    before = gradebook_rows(graded)
    feedback = graded["out"] / "feedback" / LESSON.name / "hostile.html"
    page = open_loaded(browser, feedback.as_uri(), "file://", canary.url)
    state = page.evaluate(ATTRIBUTE_STATE.replace("HIDDEN", HIDDEN_WORDS))
    check_attribute_state(state, "feedback")
    assert FAKE_HEADER in state["words"] and state["hidden_visible"], state  # the cells are drawn, as text
    # Its policy admits the template's scripts alone (a nonce), and the page says its language.
    policy = page.locator('meta[http-equiv="Content-Security-Policy"]').get_attribute("content")
    assert "'nonce-" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0], policy
    assert page.evaluate("() => document.documentElement.lang") == "en"
    page.close()

    origin = formgrader.base_url
    view = f"{origin}/formgrader/submissions/{submission_id(graded, 'hostile')}/"
    page = open_loaded(browser, view, origin, canary.url)
    page.wait_for_function("() => document.querySelectorAll('input.score[placeholder]').length > 0", timeout=120_000)
    state = page.evaluate(ATTRIBUTE_STATE.replace("HIDDEN", HIDDEN_WORDS))
    screenshot(page, "formgrader-hostile-submission")  # what the instructor sees: the frames, the controls
    check_attribute_state(state, "formgrader")
    # The student's cells are in frames with an empty sandbox (no script, an opaque origin), none in the page.
    frames = page.evaluate(
        "words => Array.from(document.querySelectorAll('iframe'))"
        ".map(f => [f.sandbox.length, f.getAttribute('sandbox'), f.srcdoc.includes(words)])",
        FAKE_HEADER,
    )
    assert frames and all(n == 0 and attr == "" for n, attr, _ in frames), frames
    assert any(has for _, _, has in frames) and FAKE_HEADER not in state["words"], "the student's cell left its frame"
    header = page.response.headers["content-security-policy"]
    scripts = header.split("script-src")[1].split(";")[0]
    assert "'nonce-" in scripts and "'unsafe-inline'" not in scripts and "'self'" not in scripts, header
    page.close()
    assert canary.hits == [], canary.hits
    assert gradebook_rows(graded) == before  # no grade or comment moved, the attacker's or a classmate's
    hostile, perfect = graded["results"]["hostile"], graded["results"]["perfect"]
    assert hostile.score == perfect.score and hostile.tests == perfect.tests


@in_chromium
def test_feedback_says_which_written_answers_are_not_graded_yet(graded, browser):
    from nbgrader.api import Gradebook

    with Gradebook(pipeline.gradebook_url(graded["instructor"] / "grading" / "course")) as gb:
        nb = gb.find_submission_notebook(LESSON.notebook_id, LESSON.name, "perfect")
        waiting = [g.name for g in nb.grades if g.auto_score is None and g.manual_score is None]
        waiting_points = sum(g.max_score for g in nb.grades if g.auto_score is None and g.manual_score is None)
        scored = {g.name: (g.score, g.max_score) for g in nb.grades if g.auto_score is not None}
        total = (nb.score, nb.max_score)
    html = (graded["out"] / "feedback" / LESSON.name / "perfect.html").read_text()
    soup = BeautifulSoup(html, "html.parser")
    for name in waiting:
        entry = soup.find("a", href=f"#{name}").parent.get_text(" ")
        assert "not graded yet" in entry and "0.0 /" not in entry, entry
    for name, (score, points) in scored.items():  # an autograded one keeps its number
        entry = soup.find("a", href=f"#{name}").parent.get_text(" ")
        assert f"(Score: {round(score, 2)} / {round(points, 2)})" in entry and "not graded" not in entry, entry
    assert waiting, "the sample has written answers for the instructor to grade"
    # the total counts those as nothing, and says so: "(Score: 30.0 / 41.0; 11 points not graded yet)"
    heading = " ".join(soup.select_one("div.panel-heading > h4").get_text().split())
    score, points = (round(float(x), 2) for x in total)
    assert heading == f"{LESSON.notebook_id} (Score: {score} / {points}; {waiting_points:g} points not graded yet)"


@in_chromium
def test_axe_finds_the_feedback_pages_language(graded, browser):
    from browser_helpers import axe_audit, require_axe

    require_axe()
    page = open_loaded(browser, (graded["out"] / "feedback" / LESSON.name / "hostile.html").as_uri(), "file://")
    found = {v["id"] for v in axe_audit(page, "body")}
    assert not found & {"html-has-lang", "html-lang-valid", "frame-title"}, found
    page.close()


MATHJAX = Path(sys.prefix) / "node" / "node_modules" / "mathjax"  # MathJax 2.7.7 from npm (make browser-deps)
MATHJAX_URL = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"  # where the pages load it from


@in_chromium
def test_mathjax_still_typesets_under_the_feedback_pages_policy(graded, browser, canary):
    """The page's policy admits its own scripts by nonce and what they load ('strict-dynamic'): MathJax 2.7.7,
    served in cdnjs's place from the copy make browser-deps installs, typesets the learner's math, and the
    browser reports no script the policy refused. (Without 'unsafe-eval' MathJax 2 typesets nothing.)"""
    if not (MATHJAX / "MathJax.js").exists():
        message = f"{MATHJAX} is missing: run `make browser-deps` (npm install mathjax@2.7.7)."
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)

    def serve(route):
        url = route.request.url
        if url.startswith("file://"):
            return route.continue_()
        local = MATHJAX / url[len(MATHJAX_URL) :].split("?")[0] if url.startswith(MATHJAX_URL) else None
        if local is not None and local.is_file() and MATHJAX in local.resolve().parents:
            kind = "application/javascript" if local.suffix == ".js" else "application/octet-stream"
            return route.fulfill(status=200, body=local.read_bytes(), headers={"Content-Type": kind})
        return route.abort()

    refused: list[str] = []
    page = browser.new_page()
    page.on("console", lambda m: refused.append(m.text) if "script-src" in m.text else None)
    page.route("**/*", serve)
    page.goto((graded["out"] / "feedback" / LESSON.name / "hostile.html").as_uri(), wait_until="load")
    page.wait_for_function("() => document.querySelectorAll('.mjx-chtml').length > 0", timeout=120_000)
    assert refused == [] and canary.hits == [], (refused, canary.hits)
    # The overlay is typeset and laid out over the real header (at the width it was aimed at), and clipped to its
    # cell: what is drawn across the header is the header.
    page.set_viewport_size({"width": 1200, "height": 900})
    overlay = """() => [...document.querySelectorAll('.mjx-char')].filter(c => c.textContent.includes('99.0'))
        .map(c => c.getBoundingClientRect()).filter(r => r.width > 0)"""
    page.wait_for_function(f"() => ({overlay})().length > 0", timeout=60_000)
    on_top = page.evaluate(
        """() => {
        const h = [...document.querySelectorAll('h4')].find(e => e.textContent.includes('Score'));
        const r = h.getBoundingClientRect(), found = [];
        for (let x = r.left + 2; x < r.right; x += 10) {
            const e = document.elementFromPoint(x, r.top + r.height / 2);
            if (e && !h.contains(e) && e !== h.parentElement) found.push(e.tagName + '.' + e.className);
        }
        const o = (OVERLAY)()[0];
        const crosses = o.left < r.right && r.left < o.right && o.top < r.bottom && r.top < o.bottom;
        return {header: h.textContent, covered: found, crosses: crosses};
    }""".replace("OVERLAY", overlay)
    )
    assert on_top["crosses"], on_top  # the payload reaches the header (else this test would prove nothing)
    assert on_top["covered"] == [] and "99.0" not in on_top["header"], on_top
    page.close()


# --- the control: without the course's settings the same payloads fire ---------------------------------
@in_chromium
def test_the_payloads_fire_where_nothing_cleans_them(graded, browser, canary, tmp_path):
    """nbgrader's feedback and formgrade templates with nbconvert's defaults: the canary is reached."""
    try:
        fired = _render_plainly_and_open(graded, browser, canary, tmp_path)
    finally:
        canary.hits.clear()  # the control's hits are its own
    for template, hits in fired.items():
        assert any(h.startswith("/ran-") for h in hits), (template, hits)  # a script ran
        assert "/remote.png" in hits and "/import.css" in hits, (template, hits)  # and the page loaded from outside


def _render_plainly_and_open(graded, browser, canary, tmp_path) -> dict:
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    autograded = graded["instructor"] / "grading" / "course" / "autograded" / "hostile" / LESSON.name
    fired = {}
    for template in ("feedback", "formgrade"):
        exporter = HTMLExporter(
            template_name=template,
            extra_template_basedirs=[handlers.template_path],
            extra_template_paths=[str(Path(handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css")],
        )  # as generate_feedback sets it
        nb = nbformat.read(autograded / LESSON.notebook, as_version=4)
        for cell in nb.cells:  # plain cells: the templates' grading panels need the gradebook's values
            cell.metadata.pop("nbgrader", None)
        html, _ = exporter.from_notebook_node(
            nb,
            resources={
                "nbgrader": {"notebook": LESSON.notebook_id, "score": 0, "max_score": 0, "late_penalty": 0},
                "index": 0,
                "total": 1,
            },
        )
        path = tmp_path / f"{template}.html"
        path.write_text(html)
        before = len(canary.hits)
        page, _ = open_and_record(browser, path.as_uri(), "file://", canary.url)
        fired[template] = canary.wait_for_script(before)  # the page itself is gone: <meta refresh> left it
        page.close()
    return fired


@in_chromium
def test_the_instructor_still_grades_and_comments_in_formgrader(graded, formgrader, browser, canary):
    """Runs after the pages' tests (it changes the gradebook): a manual score and a comment, typed into the
    view of the hostile submission, are saved through formgrader's own script; nothing else moves."""
    from nbgrader.api import Gradebook

    before = gradebook_rows(graded)
    origin = formgrader.base_url
    sid = submission_id(graded, "hostile")
    page = open_loaded(browser, f"{origin}/formgrader/submissions/{sid}/", origin, canary.url)
    page.wait_for_function("() => document.querySelectorAll('input.score[placeholder]').length > 0", timeout=120_000)
    with Gradebook(pipeline.gradebook_url(graded["instructor"] / "grading" / "course")) as gb:
        nb = gb.find_submission_notebook(LESSON.notebook_id, LESSON.name, "hostile")
        grade = next(g for g in nb.grades if g.auto_score is None and g.manual_score is None)  # a written answer
        name, points = grade.name, grade.max_score
        commented = next(c.name for c in nb.comments)
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
        page.fill(f'input.score[id="{name}"]', str(points / 2))
        page.locator(f'input.score[id="{name}"]').blur()
    assert saved.value.ok
    with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT") as saved:
        page.fill(f'textarea[id="{commented}-comment"]', "Clear reasoning; say which workload you assumed.")
        page.locator(f'textarea[id="{commented}-comment"]').blur()
    assert saved.value.ok
    page.close()
    after = gradebook_rows(graded)
    assert after["perfect"] == before["perfect"]  # the classmate's rows are untouched
    changed = set(after["hostile"]) ^ set(before["hostile"])
    assert {row[1] for row in changed} == {name, commented}, changed
    assert ("grade", name, None, points / 2, None) in after["hostile"]
    assert any(r[:2] == ("comment", commented) and r[3].startswith("Clear reasoning") for r in after["hostile"])
    assert canary.hits == [], canary.hits


def test_the_page_is_rebuilt_whole_even_where_the_outputs_were_not_cleaned(tmp_path):
    """Unit: nbconvert's classic template with its defaults (no InertOutputs, nbconvert's own filters) writes a
    handler into an image's width and tags into classes; the rebuilt page (pages.py) keeps neither, for both
    templates, and keeps the template's structure and formgrader's controls."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    from servelab.grading import pages

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A lesson")])
    cell = nbformat.v4.new_code_cell(
        "x",
        metadata={
            "tags": ["x navbar-fixed-top navbar-default", "x hidden"],
            "nbgrader": {
                "grade": True,
                "grade_id": "q1",
                "points": 2,
                "solution": True,
                "locked": False,
                "schema_version": 3,
                "score": None,
            },
        },
    )
    cell.id = "navbar"
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": PNG_1PX},
            metadata={"image/png": {"width": "320 onload=alert(1)", "height": "10 style=position:fixed"}},
        )
    ]
    nb.cells.append(cell)
    resources = {
        "nbgrader": {"notebook": "lesson25", "score": 0, "max_score": 2, "late_penalty": 0},
        "index": 0, "total": 1, "base_url": "/user/grace", "submission_id": "abc", "notebook_id": "lesson25",
        "assignment_id": "lesson25", "notebook_path": "grading/course/autograded/ada/lesson25/lesson25.ipynb",
        "student": "ada",
    }  # fmt: skip
    for template in ("feedback", "formgrade"):
        exporter = HTMLExporter(
            template_name=template,
            extra_template_basedirs=[handlers.template_path],
            extra_template_paths=[str(Path(handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css")],
        )
        plain, _ = exporter.from_notebook_node(nb, resources=dict(resources))
        assert 'onload="alert(1)"' in plain and "celltag_x navbar-fixed-top" in plain, template  # the attacks landed
        if template == "feedback":
            page = pages.feedback_page(plain, "en", {"q1"}, nonce="N0NCE", ungraded_points=2)
        else:
            page = pages.formgrader_page(plain, "N0NCE", "/user/grace")
        soup = BeautifulSoup(page, "html.parser")
        everything = [soup, *(BeautifulSoup(f["srcdoc"], "html.parser") for f in soup.find_all("iframe"))]
        elements = [e for doc in everything for e in doc.find_all(True)]
        styled = [e for e in elements if "style" in e.attrs and "servelab-cell" not in e.get("class", [])]
        assert not [e for e in elements if any(a.startswith("on") for a in e.attrs)] and not styled, template
        assert all(
            re.fullmatch(r"\d+", e.get(a, "0")) for e in elements if e.name == "img" for a in ("width", "height")
        )
        classes = {c for e in elements if e.name != "nav" for c in e.get("class", [])}  # nav: formgrader's bar
        assert not classes & {"hidden", "navbar-default"} and not [c for c in classes if c.startswith("celltag")]
        assert not [e for e in elements if e.get("id", "").startswith(("cell-id", "navbar"))], template
        assert [e.get("nonce") for e in soup.find_all("script")] == ["N0NCE"] * len(soup.find_all("script"))
        assert soup.html["lang"] == "en" and soup.find_all("script"), template
        if template == "formgrade":
            assert soup.find("input", id="q1", class_="score") and soup.find("textarea", id="q1-comment")
            frames = soup.find_all("iframe")
            assert frames and all(f.has_attr("sandbox") and not "".join(f["sandbox"]) for f in frames)
            assert "navbar-fixed-top" in soup.find("nav")["class"]  # formgrader's own bar keeps its classes
        else:
            assert "Score: not graded yet / 2.0" in soup.get_text(), template
            assert soup.select_one("div.panel-heading > h4").get_text() == (
                "lesson25 (Score: 0.0 / 2.0; 2 points not graded yet)"
            )  # the total says so too


def test_formgrader_draws_no_view_where_the_page_is_not_rebuilt():
    """Unit: formgrader's exporter, with this course's nbgrader_config.py, in a server without page_policy loaded
    (JUPYTER_CONFIG_PATH without grading/jupyter/), refuses to draw a submission and says how to start it."""
    from nbconvert.exporters import HTMLExporter
    from tornado.web import HTTPError
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("an answer")])
    assert not pages.POLICY_LOADED
    with pytest.raises(HTTPError, match="JUPYTER_CONFIG_PATH=.*grading/jupyter"):
        HTMLExporter(config=config).from_notebook_node(nb, resources={"submission_id": "abc"})
    HTMLExporter(config=config).from_notebook_node(nb, resources={})  # the feedback's exporter draws on


def test_the_sanitizer_keeps_what_a_learner_writes():
    """Unit: the policy keeps text, tables, code highlighting and data: images; drops what runs or loads."""
    kept = safe_html.sanitize(
        '<h2 id="x">Title</h2><table><tr><td>1</td></tr></table>'
        '<div class="highlight navbar"><span class="k btn">def</span></div>'
        f'<img src="data:image/png;base64,{PNG_1PX}"><a href="https://docs.vllm.ai">docs</a>'
    )
    assert "<h2>Title</h2>" in kept and "<td>1</td>" in kept
    assert 'class="highlight"' in kept and 'class="k"' in kept and "navbar" not in kept and "btn" not in kept
    assert f"base64,{PNG_1PX}" in kept and 'href="https://docs.vllm.ai"' in kept
    for bad in (
        '<img src="http://127.0.0.1:9/x.png">',
        '<a href="evil.html">x</a>',
        '<a href="javascript:x()">x</a>',
        '<p style="color:red">x</p>',
        '<base href="http://x/">',
        '<img src="data:text/html,x">',
    ):
        assert not re.search(r"(src|href|style)=", safe_html.sanitize(bad)), bad


def test_the_policy_covers_formgraders_submission_pages_only():
    """Unit: which responses get which policy (page_policy.policy_for)."""
    from servelab.grading import page_policy

    prefix = "/user/ada/formgrader/submissions/"
    assert page_policy.policy_for(prefix + "abc123/", prefix) == page_policy.VIEW
    assert page_policy.policy_for(prefix + "abc123/next", prefix) == page_policy.VIEW
    assert page_policy.policy_for(prefix + "abc123/report.html", prefix) == page_policy.FILE_POLICY
    assert page_policy.policy_for(prefix + "abc123/sub/figure.svg", prefix) == page_policy.FILE_POLICY
    assert page_policy.policy_for("/user/ada/lab/tree/x.ipynb", prefix) is None  # JupyterLab keeps Jupyter's own
    assert page_policy.FILE_POLICY.startswith("sandbox;") and "script-src" not in page_policy.FILE_POLICY


def test_the_class_hub_gives_instructors_the_page_policy(tmp_path, monkeypatch):
    """class/jupyterhub_config.py's spawn hook adds grading/jupyter (which enables page_policy) for instructors."""
    from types import SimpleNamespace

    from traitlets.config import Config

    from servelab.classroom.hub import ClassSettings

    # an instructor who is a user of this machine: the instructor's environment names the course secret in
    # their home's course folder (ClassSettings.course_dir reads the passwd entry)
    (tmp_path / "class.json").write_text(
        ClassSettings(state=tmp_path, instructors=["nobody"], students=["ada"]).to_json()
    )
    monkeypatch.setenv("SERVELAB_CLASS_STATE", str(tmp_path))
    c = Config()
    exec(
        compile((REPO / "class" / "jupyterhub_config.py").read_text(), "jupyterhub_config.py", "exec"),
        {"get_config": lambda: c, "__file__": str(REPO / "class" / "jupyterhub_config.py")},
    )
    paths = {}
    for name in ("nobody", "ada"):
        spawner = SimpleNamespace(user=SimpleNamespace(name=name), environment={})
        c.Spawner.pre_spawn_hook(spawner)
        paths[name] = spawner.environment["JUPYTER_CONFIG_PATH"].split(":")
    policy_dir = REPO / "grading" / "jupyter"
    assert str(policy_dir) in paths["nobody"] and str(policy_dir) not in paths["ada"]
    enabled = json.loads((policy_dir / "jupyter_server_config.d" / "servelab-page-policy.json").read_text())
    assert enabled["ServerApp"]["jpserver_extensions"] == {"servelab.grading.page_policy": True}


def test_math_reaches_mathjax_only_through_its_safe_extension():
    """Unit: `$$\\href{javascript:...}{x}$$` is math text, left for MathJax to draw. The two templates load MathJax
    2.7.7 from cdnjs with the Safe extension in its config (nbconvert's mathjax macro; nbgrader's templates call it
    with no URL), whose default lets \\href name only http, https and file URLs
    (MathJax 2.7.7, unpacked/extensions/Safe.js: safeProtocols, https://unpkg.com/mathjax@2.7.7/unpacked/extensions/Safe.js). No student's text adds a MathJax
    configuration or a second MathJax; a new nbconvert that dropped Safe fails here."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    math = r"$$\href{javascript:window.PWN=1}{x}$$"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(
                math
                + '\n\n<script type="text/x-mathjax-config">MathJax.Hub.Config({Safe: {allow: {URLs: "all"}}})</script>'
                '\n\n<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML"></script>'
            )
        ]
    )
    for template in ("feedback", "formgrade"):
        exporter = HTMLExporter(
            config=config,
            template_name=template,
            extra_template_basedirs=[handlers.template_path],
            extra_template_paths=[str(Path(handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css")],
        )
        html, _ = exporter.from_notebook_node(
            nb,
            resources={
                "nbgrader": {"notebook": LESSON.notebook_id, "score": 0, "max_score": 0, "late_penalty": 0},
                "index": 0,
                "total": 1,
            },
        )
        loads = [src for src in re.findall(r'<script[^>]*\ssrc="([^"]*)"', html) if "mathjax" in src.lower()]
        assert loads == [
            "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"
        ]
        assert html.count("text/x-mathjax-config") == 1 and '"all"' not in html, template  # the template's own only
        assert math in html, template  # the math is left as text: MathJax, with Safe, draws it


def test_formgrader_refuses_fast_to_draw_a_graded_notebook_past_the_views_caps(monkeypatch):
    """Unit: formgrader draws a view in the instructor's own server, which answers nobody else meanwhile. An output
    flood (empty bundles with big metadata, as a notebook graded before the runner's caps holds them) and long
    markdown are refused before anything is drawn, saying the grade stands; the lesson itself draws."""
    from nbconvert.exporters import HTMLExporter
    from tornado.web import HTTPError
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setattr(pages, "POLICY_LOADED", True)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    lesson = nbformat.read(REPO / "grading" / "submissions" / LESSON.name / "perfect.ipynb", as_version=4)
    flood = copy.deepcopy(lesson)
    cell = nbformat.v4.new_code_cell("publish_display_data({}, metadata=...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={}, metadata={"k": "M" * 300})] * 20_000
    flood.cells.insert(2, cell)
    block = "```python\n" + ("x = [1, 'a', 2.0, None]  # c\n" * 6400) + "```\n"
    markdown = copy.deepcopy(lesson)
    markdown.cells[2:2] = [nbformat.v4.new_markdown_cell(block) for _ in range(8)]
    for nb, why in ((flood, "20,000 outputs"), (markdown, "markdown and raw cells hold")):
        start = time.monotonic()
        with pytest.raises(HTTPError) as refused:
            HTMLExporter(config=config).from_notebook_node(nb, resources={"submission_id": "abc", "student": "mallory"})
        assert time.monotonic() - start < 30  # drawn, the flood takes minutes; the refusal reads counts only
        said = refused.value.log_message % refused.value.args
        assert refused.value.status_code == 413 and why in said, said
        assert "too large to draw" in said and "its grade stands" in said and "autograded/mallory/" in said
    assert pages.too_large_to_draw(lesson) is None
    html, _ = HTMLExporter(config=config).from_notebook_node(lesson, resources={"submission_id": "abc"})
    assert html.count("<div") > len(lesson.cells)  # drawn whole


def test_no_class_reaches_an_image_from_its_outputs_metadata():
    """nbconvert writes class="unconfined" (lifting an image's max-width) when an output's metadata asks; that
    is a class chosen by the notebook, so neither the notebook's metadata nor the page keeps it."""
    from servelab.grading.safe_html import InertOutputs

    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": "iVBORw0KGgo="},
            metadata={"unconfined": True, "image/png": {"unconfined": True, "width": 10}},
        )
    ]
    cell, _ = InertOutputs().preprocess_cell(cell, {}, 0)
    assert cell.outputs[0].metadata == {"image/png": {"width": 10}}
    body = pages.sanitize_body('<div class="output_png output_subarea"><img class="unconfined" width="10"></div>')
    assert "unconfined" not in body and 'width="10"' in body and "output_png" in body
