"""WCAG 2.1 AA where a learner works: the lesson, both labs and a released feedback page, in Debian's Chromium.

Three checks, each as a learner meets the page:
- axe-core's WCAG 2.1 A and AA rules (tags wcag2a, wcag2aa, wcag21a, wcag21aa) over each page;
- every lab control reached with Tab alone, with a focus ring to see where it is;
- nothing cut off at 1024 and 1440 pixels wide and at 200% zoom (a 1440 x 1000 window at 200% lays the
  page out in 720 x 500 CSS pixels, which is what the test sets), nor in a wide font forced on everything.

Who a violation belongs to is decided by where its node sits (`OURS`): inside rendered markdown or an
output area (our lesson text, our widgets and charts) it is this project's, and the test fails on it;
anywhere else it is the host page's own (JupyterLab's chrome and code editor, nbgrader's feedback template),
reported in the test's warnings and in test-artifacts/accessibility/ and never hidden. A violation of ours
that only another file's owner can fix is listed in KNOWN_TO_FIX with its fix; the test fails when one
appears that is not listed, and when a listed one is gone (so the list is kept true).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from pathlib import Path

import pytest
from browser_helpers import (
    ARTIFACTS,
    JupyterLab,
    axe_audit,
    chromium,
    describe_violations,
    open_notebook,
    require_axe,
    require_chromium,
    run_all_cells,
    screenshot,
    split_violations,
)

from servelab.launch import lab_settings_path

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
PAGES = {
    "lesson": "lessons/lesson25.ipynb",
    "spec-decode lab": "labs/spec_decode_lab.ipynb",
    "knob lab": "labs/knob_lab.ipynb",
}
LABS = ("spec-decode lab", "knob lab")
# Where this project's output sits: in JupyterLab, rendered markdown and output areas (widgets, charts,
# printed text); in nbgrader's feedback page (its classic template), rendered markdown and outputs.
OURS = ".jp-RenderedMarkdown, .jp-OutputArea-output, .text_cell_render, .output_subarea"
# {(page, axe rule): the fix, in the file that has to change}: ours, waiting on that file's owner.
KNOWN_TO_FIX: dict[tuple[str, str], str] = {
    # (none now: the feedback page's three, its <pre> blocks scrolling sideways, Pygments' comment colour
    # and links told by colour alone, are fixed by the page's own styles, servelab.grading.pages.FEEDBACK_STYLE)
}
# The window sizes a learner uses: (name, CSS width, CSS height); 200% zoom of a 1440 x 1000 window.
# A 1280 x 1600 window at 200% is 640 x 800 CSS pixels (what device_scale_factor=2 changes is the pixels
# drawn per CSS pixel, not the layout).
# 320: a phone's width (WCAG 1.4.10 reflow), narrower than the 272 px the lab gets at 200% with the file browser open
SIZES = (
    ("1024", 1024, 900),
    ("1440", 1440, 1000),
    ("zoom200", 720, 500),
    ("zoom200-1280", 640, 800),
    ("320", 320, 640),
)
# A learner's own fonts: a wide installed face (Debian's fonts-dejavu-core, which Chromium pulls in) and the
# letter-spacing of a reading setting, on everything, over the machine's default fonts and the lab's own.
WIDE_FONTS = "html body * { font-family: 'DejaVu Sans Mono', monospace !important; letter-spacing: .04em !important; }"
LAB = {"spec-decode lab": ".servelab-lab.servelab-view-flip", "knob lab": ".servelab-lab.servelab-view-knobs"}
REPORTS = ARTIFACTS / "accessibility"
README_SHOT = "readme-lab"  # what docs/lab.png is copied from (see the README)


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    require_axe()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, chromium(p) as context:
        yield context


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jupyter-a11y")
    # Every cell in the page, not only those scrolled into view, so the audit sees the whole notebook.
    settings = {("@jupyterlab/notebook-extension", "tracker"): {"windowingMode": "none"}}
    # As a learner's first start: a fresh HOME and no user setting about the news, so only what this venv
    # itself carries (`make setup`'s overrides.d file) keeps JupyterLab's news question off the page.
    home = tmp / "home"
    home.mkdir()
    with JupyterLab(
        tmp / "root",
        env={"SERVELAB_OFFLINE": "1", "SERVELAB_RESULTS": str(tmp / "results.jsonl"), "HOME": str(home)},
        settings=settings,
        quiet_news=False,
    ) as lab:
        yield lab


@pytest.fixture(scope="module")
def opened(browser, server):
    """One page per notebook, opened (and for a lab, every cell run) once and shared by the tests below."""
    pages = {}

    def get(name: str):
        if name not in pages:
            if not (REPO / PAGES[name]).exists():
                pytest.skip(f"{PAGES[name]} is not generated yet")
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.problems = []
            page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
            open_notebook(page, server, PAGES[name])
            if name in LABS:
                run_all_cells(page)
                wait_charts_fit(page, LAB[name])
            pages[name] = page
        return pages[name]

    yield get
    for page in pages.values():
        page.close()


@pytest.fixture(scope="module")
def feedback_page(browser, tmp_path_factory):
    """A feedback page released by the real pipeline (nbgrader, the sandbox) for one sample submission."""
    from servelab.grading import course, pipeline, samples

    tmp = tmp_path_factory.mktemp("feedback")
    (tmp / "submissions" / "lesson25").mkdir(parents=True)
    shutil.copy(samples.SUBMISSIONS / "lesson25" / "partial.ipynb", tmp / "submissions" / "lesson25")
    pipeline.run(
        tmp / "submissions",
        tmp / "course",
        tmp / "out",
        assignments=[course.get("lesson25")],
        cell_timeout=10,
        submission_timeout=240,
        log=lambda *a: None,
    )
    html = tmp / "out" / "feedback" / "lesson25" / "partial.html"
    assert html.exists(), "the pipeline released no feedback page"
    page = browser.new_page()
    page.goto(html.as_uri())
    yield page
    page.close()


# --- the audit -----------------------------------------------------------------------------------------------
def report(name: str, violations: list[dict]) -> list[dict]:
    """Keep the whole audit under test-artifacts/accessibility/, warn about the host's, return ours."""
    ours, theirs = split_violations(violations)
    REPORTS.mkdir(parents=True, exist_ok=True)
    slug = name.replace(" ", "-")
    (REPORTS / f"{slug}.json").write_text(json.dumps({"page": name, "ours": ours, "host": theirs}, indent=1))
    if theirs:
        host = "nbgrader's feedback template" if name == "feedback page" else "JupyterLab"
        warnings.warn(
            f"{host}'s own WCAG 2.1 AA violations on the {name} (not this project's output; "
            f"test-artifacts/accessibility/{slug}.json):\n{describe_violations(theirs, 1)}",
            stacklevel=2,
        )
    return ours


def expect_only_known(name: str, ours: list[dict]) -> None:
    found = {v["id"] for v in ours}
    known = {rule for page, rule in KNOWN_TO_FIX if page == name}
    unexpected = [v for v in ours if v["id"] not in known]
    assert not unexpected, f"the {name} breaks WCAG 2.1 AA in this project's output:\n" + describe_violations(
        unexpected, 5
    )
    gone = known - found
    assert not gone, f"fixed on the {name}: {sorted(gone)}; remove them from KNOWN_TO_FIX"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(PAGES))
def test_axe_finds_nothing_of_ours_in_the_notebooks(opened, name):
    page = opened(name)
    expect_only_known(name, report(name, axe_audit(page, OURS)))
    assert not page.problems, page.problems
    # JupyterLab asks its news question in a toast once its plugins are up, long before a notebook has run.
    toasts = page.locator(".Toastify__toast").all_inner_texts()
    assert not toasts, (
        f"JupyterLab shows {toasts} over the {name}: is {lab_settings_path()} missing? `make setup` writes it"
    )


@pytest.mark.timeout(300)
def test_axe_finds_nothing_of_ours_in_a_released_feedback_page(feedback_page):
    expect_only_known("feedback page", report("feedback page", axe_audit(feedback_page, OURS)))


# --- nothing cut off ---------------------------------------------------------------------------------------------
# Every chart inside its output area, every legend entry, title, annotation and tick label inside its chart,
# and no control's or label's text overflowing its box or the output area.
LAYOUT_PROBLEMS = """(sel) => {
  const problems = [];
  const box = e => e.getBoundingClientRect();
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1
                          && a.bottom <= b.bottom + 1;
  const what = e => (e.textContent || e.tagName).trim().replace(/\\s+/g, ' ').slice(0, 60);
  document.querySelectorAll(sel).forEach(lab => {
    const area = box(lab.closest('.jp-OutputArea-output') || lab);
    lab.querySelectorAll('.js-plotly-plot').forEach(gd => {
      const svg = gd.querySelector('.main-svg');
      if (!svg) { problems.push('a chart was never drawn'); return; }
      const chart = box(svg);
      if (chart.right > area.right + 1)
        problems.push(`a chart ${chart.width.toFixed(0)} px wide in an output area ${area.width.toFixed(0)} px wide`);
      gd.querySelectorAll('.legend, .legendtext, .legendtitletext, .gtitle, .annotation-text, .xtitle, .ytitle,'
                          + ' .xtick text, .ytick text').forEach(t => {
        const b = box(t);
        if (b.width && !inside(b, chart)) problems.push(`chart text cut off: "${what(t)}"`);
      });
    });
    lab.querySelectorAll('.servelab-table-scroll').forEach(e => {
      if (e.offsetParent !== null && box(e).right > area.right + 1)
        problems.push(`a data table's scroll box runs past the output area: ${box(e).width.toFixed(0)} px`);
    });
    lab.querySelectorAll('.widget-label, .widget-readout, .widget-button, .widget-toggle-button, select,'
                         + ' .servelab-status-line, .servelab-chart-summary').forEach(e => {
      if (e.offsetParent === null) return;  // not shown
      if (e.scrollWidth > e.clientWidth + 1) problems.push(`text overflows its box: "${what(e)}"`);
      if (box(e).right > area.right + 1) problems.push(`cut off at the output area's right edge: "${what(e)}"`);
    });
    lab.querySelectorAll('.slider-container, select').forEach(e => {  // a control shrunk to a handle or an arrow
      if (e.offsetParent !== null && box(e).width < 100)
        problems.push(`a control only ${box(e).width.toFixed(0)} px wide: "${what(e.parentElement)}"`);
    });
  });
  return problems;
}"""


def wait_charts_fit(page, lab: str, timeout_s: float = 30) -> None:
    """Wait until every chart of the lab is as wide as its box and its legend inside it (the page helper's work)."""
    page.wait_for_function(
        """sel => Array.from(document.querySelectorAll(sel + ' .js-plotly-plot')).every(gd => {
            const svg = gd.querySelector('.main-svg'), legend = gd.querySelector('.legend');
            if (!svg || !gd.clientWidth) return false;
            const s = svg.getBoundingClientRect();
            return Math.abs(s.width - gd.clientWidth) <= 2
                && (!legend || legend.getBoundingClientRect().bottom <= s.bottom + 1);
        }) && document.querySelectorAll(sel + ' .js-plotly-plot').length > 0""",
        arg=lab,
        timeout=timeout_s * 1000,
    )


def scroll_to_top(page, selector: str) -> None:
    page.evaluate("sel => document.querySelector(sel).scrollIntoView({block: 'start'})", selector)
    page.wait_for_timeout(200)  # one frame for the scroll to paint


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", LABS)
def test_nothing_is_cut_off_at_1024_and_1440_pixels_and_at_200_percent_zoom(opened, name):
    page = opened(name)
    slug = name.replace(" ", "-")
    page.evaluate(
        "sel => document.querySelectorAll(sel + ' details').forEach(d => { d.open = true; })",
        ".servelab-chart-text" + LAB[name].removeprefix(".servelab-lab"),
    )  # the data tables open, so their width is checked too
    try:
        for size, width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            if size == "320":  # a phone's width: JupyterLab's open file browser would cover the notebook
                side_panel(page, open_=False)
            wait_charts_fit(page, LAB[name])
            problems = page.evaluate(LAYOUT_PROBLEMS, LAB[name])
            assert not problems, f"{name} at {size}: " + "; ".join(problems)
            # What the learner sees with the lab's controls at the top, then with its chart at the top.
            scroll_to_top(page, LAB[name])
            shot = screenshot(page, f"a11y-{slug}-{size}-controls")
            if name == "spec-decode lab" and size == "1440":
                shutil.copy(shot, shot.with_name(f"{README_SHOT}.png"))  # the README's picture (docs/lab.png)
            scroll_to_top(page, f"{LAB[name]} .servelab-chart")
            screenshot(page, f"a11y-{slug}-{size}-chart")
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        # Any fonts: a learner's own (a wide face, letter-spacing for reading) in place of the machine's defaults,
        # at 200% zoom with the file browser open and at a phone's width, where the room is least.
        page.evaluate(
            """css => { const s = document.createElement('style'); s.className = 'servelab-wide-fonts';
                        s.textContent = css; document.head.appendChild(s); return document.fonts.ready.then(() => 1); }""",
            WIDE_FONTS,
        )
        for size, open_ in (("zoom200", True), ("320", False)):
            _, width, height = next(s for s in SIZES if s[0] == size)
            side_panel(page, open_=open_)
            page.set_viewport_size({"width": width, "height": height})
            wait_charts_fit(page, LAB[name])
            with contextlib.suppress(PlaywrightTimeout):  # the page helper draws the charts' text smaller to fit
                page.wait_for_function(f"sel => ({LAYOUT_PROBLEMS})(sel).length === 0", arg=LAB[name], timeout=20_000)
            problems = page.evaluate(LAYOUT_PROBLEMS, LAB[name])
            assert not problems, f"{name} at {size} in a wide font: " + "; ".join(problems)
            scroll_to_top(page, LAB[name])
            screenshot(page, f"a11y-{slug}-{size}-wide-font")
    finally:
        page.evaluate("document.querySelectorAll('style.servelab-wide-fonts').forEach(s => s.remove())")
        page.evaluate(
            "sel => document.querySelectorAll(sel + ' details').forEach(d => { d.open = false; })",
            ".servelab-chart-text" + LAB[name].removeprefix(".servelab-lab"),
        )
        page.set_viewport_size({"width": 1400, "height": 1000})
        side_panel(page, open_=True)


def side_panel(page, open_: bool) -> None:
    """Open or close JupyterLab's left panel (the file browser) by its own tab, as a learner would."""
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if open_ and not current.count():
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()
    elif not open_ and current.count():
        current.first.click()
    page.wait_for_function(
        "o => !!document.querySelector('.jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current') === o", arg=open_
    )


# --- the keyboard ------------------------------------------------------------------------------------------------
# The controls of each lab, by the CSS class the lab gives them, that Tab must reach. Measure is greyed out
# offline, so it is not in the Tab order here: the live test in test_browser.py presses it from the keyboard.
CONTROLS = {
    "spec-decode lab": [
        "servelab-batch-slider",
        "servelab-k-slider",
        "servelab-method",
        "servelab-workload",
        "servelab-output-len",
        "servelab-backend",
        "servelab-engine-toggle",
        "servelab-stop",
    ],
    "knob lab": [
        "servelab-knob",
        "servelab-setting-a",
        "servelab-setting-b",
        "servelab-knob-workload",
        "servelab-load",
        "servelab-users",
        "servelab-stop",
    ],
}
FOCUSED = """lab => {
    const e = document.activeElement;
    if (!e || !e.closest(lab)) return null;
    const own = el => Array.from(el.classList).find(c => c.startsWith('servelab-') && c !== 'servelab-lab'
                                                      && !c.startsWith('servelab-view'));
    let widget = e;
    while (widget && widget !== document.body && !own(widget) && !widget.classList.contains('servelab-lab'))
        widget = widget.parentElement;
    const cls = widget && own(widget);
    const style = getComputedStyle(e);
    return {control: cls || e.tagName, tag: e.tagName, outline: style.outlineStyle,
            width: parseFloat(style.outlineWidth) || 0, label: e.getAttribute('aria-label') || '',
            role: e.getAttribute('role') || ''};
}"""


def tab_through(page, lab: str, limit: int = 120) -> list[dict]:
    """Press Tab from the notebook until focus has gone through the lab and out of it; what it stopped on."""
    page.keyboard.press("Escape")
    seen: list[dict] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        here = page.evaluate(FOCUSED, lab)
        if here:
            seen.append(here)
        elif seen:
            break
    return seen


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", LABS)
def test_every_lab_control_is_reached_by_tab_and_shows_where_focus_is(opened, name):
    page = opened(name)
    seen = tab_through(page, LAB[name])
    reached = [s["control"] for s in seen]
    missing = [c for c in CONTROLS[name] if c not in reached]
    assert not missing, f"Tab never reaches {missing} in the {name}; it stopped on {reached}"
    hidden_focus = [s for s in seen if s["outline"] == "none" or s["width"] < 2]
    assert not hidden_focus, f"focus is not visible on {hidden_focus}"
    handles = [s for s in seen if s["tag"] == "DIV" and s["role"] == "slider"]
    assert handles and all(s["label"] for s in handles), f"a slider without an accessible name: {handles}"
    view = LAB[name].removeprefix(".servelab-lab")  # the lab's widgets carry its view's class
    # The status line and the charts in words are live regions that stay in place while their text changes.
    live = page.locator(f"{view}.servelab-status, {view}.servelab-chart-text")
    assert live.count() >= 2 and all(
        r == ["status", "polite"]
        for r in live.evaluate_all("els => els.map(e => [e.getAttribute('role'), e.getAttribute('aria-live')])")
    ), live.evaluate_all("els => els.map(e => e.outerHTML.slice(0, 200))")
    live.evaluate_all("els => els.forEach(e => { e.dataset.servelabSeen = '1'; })")
    if name == "knob lab":
        # The load toggle says which button is pressed, and follows a keyboard choice of the other.
        buttons = page.locator(f"{view}.servelab-load button.widget-toggle-button")
        pressed = lambda: buttons.evaluate_all("bs => bs.map(b => b.getAttribute('aria-pressed'))")  # noqa: E731
        assert sorted(pressed()) == ["false", "true"], pressed()
        other = pressed().index("false")
        buttons.nth(other).focus()
        page.keyboard.press("Enter")
        page.wait_for_function(
            "([sel, i]) => document.querySelectorAll(sel)[i].getAttribute('aria-pressed') === 'true'",
            arg=[f"{view}.servelab-load button.widget-toggle-button", other],
            timeout=10_000,
        )
        assert pressed().count("true") == 1, pressed()
        assert (
            page.locator(f"{view}.servelab-load[role=group], {view}.servelab-load [role=group]").first.get_attribute(
                "aria-label"
            )
            == "load"
        )
        buttons.nth(1 - other).focus()
        page.keyboard.press("Enter")  # back to how the notebook set it
        page.wait_for_function(
            "([sel, i]) => document.querySelectorAll(sel)[i].getAttribute('aria-pressed') === 'true'",
            arg=[f"{view}.servelab-load button.widget-toggle-button", 1 - other],
            timeout=10_000,
        )
    if name == "spec-decode lab":
        # The engine panel opens from the keyboard: its toggle takes Space, and the model field appears.
        page.locator(".servelab-engine-toggle.servelab-view-flip").first.focus()
        page.keyboard.press("Space")
        page.locator(".servelab-model.servelab-view-flip input").first.wait_for(state="visible", timeout=10_000)
        page.keyboard.press("Space")
        page.locator(".servelab-model.servelab-view-flip input").first.wait_for(state="hidden", timeout=10_000)
        # The chart's data table opens from the keyboard too.
        summary = page.locator(".servelab-chart-text.servelab-view-flip summary").first
        summary.focus()
        page.keyboard.press("Enter")
        page.locator(".servelab-chart-text.servelab-view-flip table").first.wait_for(state="visible")
        # ...and its scroll box is a Tab stop with a name.
        scroller = page.locator(".servelab-chart-text.servelab-view-flip .servelab-table-scroll").first
        page.keyboard.press("Tab")
        assert scroller.evaluate("e => document.activeElement === e && e.getAttribute('aria-label')")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Enter")  # folded again, as the notebook left it
    # The live regions are the same nodes after all that changed: an update never replaces them.
    assert live.evaluate_all("els => els.every(e => e.isConnected && e.dataset.servelabSeen === '1')")
    assert not page.problems, page.problems
