"""The workbook the way people use it: JupyterLab in a real browser (Debian's Chromium, driven by Playwright).

A learner opens the lab, runs every cell, moves the sliders and watches the charts;
opens the lesson, types an answer and clicks nbgrader's Validate. These tests do the
same through the page (menus, keyboard, clicks) and read what the page shows: the
plotly figure's own data, the status line, the validation dialog. Screenshots land
in test-artifacts/screenshots/ for a reviewer to look at.

The server runs with SERVELAB_OFFLINE=1 (recorded measurements and the simulator,
no engine) except in the one test marked live, which measures a point on the real
engine from the browser.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from browser_helpers import (
    CELLS,
    JupyterLab,
    chromium,
    open_notebook,
    require_chromium,
    run_all_cells,
    save,
    screenshot,
    type_into_cell,
    wait_cells_done,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
LAB = "labs/spec_decode_lab.ipynb"
LESSON = "lessons/lesson25.ipynb"
FLIP = ".servelab-lab.servelab-view-flip"


def _needs(path: str) -> None:
    if not (REPO / path).exists():
        pytest.skip(f"{path} is not generated yet")


@pytest.fixture(scope="module")
def playwright_driver():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright_driver):
    with chromium(playwright_driver) as context:
        yield context


@pytest.fixture(scope="module")
def offline_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jupyter-offline")
    with JupyterLab(
        tmp / "root", env={"SERVELAB_OFFLINE": "1", "SERVELAB_RESULTS": str(tmp / "results.jsonl")}
    ) as server:
        yield server


@pytest.fixture
def page(browser):
    page = browser.new_page()
    page.set_default_timeout(60_000)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.problems = problems
    yield page
    page.close()


# --- reading the lab from the page ------------------------------------------------------------------------
def lab_state(page, view: str = "flip") -> dict:
    """The chart state the lab publishes in the page (a hidden widget): settings, traces, crossover."""
    text = page.evaluate(
        "sel => document.querySelector(sel)?.textContent || ''", f".servelab-chart-data.servelab-view-{view}"
    )
    return json.loads(text) if text else {}


def figure(page, view: str = "flip") -> dict:
    """What the plotly figure in the page holds: its traces (stable uid, name, x, y) and the batch marker's x."""
    return page.evaluate(
        """sel => {
            const gd = document.querySelector(sel + ' .js-plotly-plot');
            if (!gd || !gd.data) return null;
            const shapes = (gd.layout && gd.layout.shapes) || [];
            return {
                traces: gd.data.map(t => ({uid: typeof t.meta === 'string' ? t.meta : null, name: t.name,
                                           x: Array.from(t.x || []), y: Array.from(t.y || [])})),
                marker: shapes.length ? shapes[0].x0 : null,
            };
        }""",
        f".servelab-lab.servelab-view-{view}",
    )


def status(page, view: str = "flip") -> tuple[str, str]:
    line = page.locator(f".servelab-status.servelab-view-{view} .servelab-status-line").first
    return line.get_attribute("data-state") or "", line.inner_text()


def wait_for_lab(page, predicate: str, timeout_s: float = 30) -> None:
    """Wait until a JS predicate over the published chart state (named s) holds."""
    page.wait_for_function(
        """([sel, body]) => {
            const el = document.querySelector(sel);
            if (!el || !el.textContent) return false;
            const s = JSON.parse(el.textContent);
            return Function('s', 'return ' + body)(s);
        }""",
        arg=[".servelab-chart-data.servelab-view-flip", predicate],
        timeout=timeout_s * 1000,
    )


def slider_handle(page, css: str, view: str = "flip"):
    return page.locator(f".{css}.servelab-view-{view} .noUi-handle").first


def choose_the_first_point(page) -> None:
    """In the flip view, with the keyboard: speculation off, 16 output tokens, batch 1 (the cheapest point)."""
    page.locator(".servelab-method.servelab-view-flip select").first.select_option(label="off")
    wait_for_lab(page, "s.settings.method === 'none'")
    slider_handle(page, "servelab-output-len").focus()
    page.keyboard.press("Home")
    wait_for_lab(page, "s.settings.output_len === 16")
    slider_handle(page, "servelab-batch-slider").focus()
    page.keyboard.press("Home")
    wait_for_lab(page, "s.settings.batch_size === 1")


def _traces_by_name(fig: dict) -> dict[str, dict]:
    """The throughput panel's traces by name (the other panels reuse the names)."""
    return {t["name"]: t for t in fig["traces"] if (t["uid"] or "tok_s|").startswith("tok_s|")}


def _numbers(values: list) -> list[float]:
    return [float("nan") if v is None else v for v in values]


def _sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells]


# --- the lab ---------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_lab_runs_and_its_charts_follow_the_sliders(page, offline_server):
    _needs(LAB)
    released = _sources(offline_server.root / LAB)
    open_notebook(page, offline_server, LAB)
    run_all_cells(page)
    lab = page.locator(f"{FLIP}").first
    lab.wait_for(state="attached", timeout=60_000)
    lab.scroll_into_view_if_needed()
    page.wait_for_function(
        "sel => { const gd = document.querySelector(sel + ' .js-plotly-plot');"
        " return gd && gd.data && gd.data.some(t => t.x && t.x.length); }",
        arg=FLIP,
    )
    screenshot(page, "lab-1-after-run-all")

    # The status line names the engine's state; offline, Measure is greyed out.
    state, text = status(page)
    assert state == "offline" and "SERVELAB_OFFLINE" in text, text
    assert page.locator(
        ".servelab-measure.servelab-view-flip button, button.servelab-measure.servelab-view-flip"
    ).first.is_disabled()

    # The figure in the page holds exactly what the lab computed: every trace, point for point.
    published = lab_state(page)
    fig = figure(page)
    drawn = _traces_by_name(fig)
    by_uid = {t["uid"]: t for t in fig["traces"]}
    assert set(published["traces"]) <= set(by_uid), "the figure in the page lacks traces the lab drew"
    for uid, trace in published["traces"].items():
        assert by_uid[uid]["x"] == pytest.approx(trace["x"]), uid
        assert _numbers(by_uid[uid]["y"]) == pytest.approx(_numbers(trace["y"]), nan_ok=True), uid
    # the course machine's sweep is shown, and named as such: never as measured here
    assert any(t["x"] for name, t in drawn.items() if "recorded on the course's machine:" in name.replace("<br>", " "))
    batch = published["settings"]["batch_size"]
    assert fig["marker"] == batch

    # Batch slider, by keyboard: one step right. The marker, the published state and the regime text follow.
    slider_handle(page, "servelab-batch-slider").focus()
    page.keyboard.press("ArrowRight")
    wait_for_lab(page, f"s.settings.batch_size === {batch * 2}")
    page.wait_for_function(
        "([sel, b]) => { const gd = document.querySelector(sel + ' .js-plotly-plot');"
        " return gd.layout.shapes[0].x0 === b; }",
        arg=[FLIP, batch * 2],
    )
    assert f"Batch {batch * 2}" in page.locator(".servelab-regime.servelab-view-flip").first.inner_text()

    # k slider: the simulated n-gram curve is recomputed for the new k (its data, not only its look).
    k = published["settings"]["num_speculative_tokens"]
    before = drawn[f"n-gram k={k}, simulated"]
    slider_handle(page, "servelab-k-slider").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "([sel, name]) => { const gd = document.querySelector(sel + ' .js-plotly-plot');"
        " return gd.data.some(t => t.name === name); }",
        arg=[FLIP, f"n-gram k={k + 1}, simulated"],
    )
    after = _traces_by_name(figure(page))[f"n-gram k={k + 1}, simulated"]
    assert after["x"] == before["x"] and after["y"] != before["y"]
    lab.scroll_into_view_if_needed()
    screenshot(page, "lab-2-after-sliders")

    # Eight key presses as fast as the keyboard sends them: the chart settles on the last one, promptly.
    slider_handle(page, "servelab-batch-slider").focus()
    page.keyboard.press("Home")
    t0 = time.monotonic()
    for _ in range(8):
        page.keyboard.press("ArrowRight")
    wait_for_lab(page, "s.settings.batch_size === 256", timeout_s=30)
    page.wait_for_function(
        "sel => document.querySelector(sel + ' .js-plotly-plot').layout.shapes[0].x0 === 256", arg=FLIP
    )
    settle_s = time.monotonic() - t0
    assert settle_s < 20, f"the chart took {settle_s:.0f} s to catch up with eight slider moves"
    assert status(page)[0] == "offline"
    screenshot(page, "lab-3-batch-256")

    # Running the lab wrote outputs, never cell sources: save, and every cell reads as it was released.
    save(page)
    assert _sources(offline_server.root / LAB) == released
    assert not page.problems, page.problems


# --- the lesson ------------------------------------------------------------------------------------------------
def _cell_index(path: Path, grade_id: str) -> int:
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise AssertionError(f"no cell {grade_id} in {path}")


@pytest.mark.timeout(240)
def test_lesson_answer_then_nbgrader_validate(page, offline_server):
    _needs(LESSON)
    path = offline_server.root / LESSON
    answer_at = _cell_index(path, "practice5-answer")
    test_at = _cell_index(path, "practice5-test")
    open_notebook(page, offline_server, LESSON)
    total = len(nbformat.read(path, as_version=4).cells)
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length >= n", arg=[CELLS, total])

    # Type the answer, run it and the visible test below it (Shift+Enter twice), as a learner does.
    type_into_cell(page, answer_at, 'practice5_answer = "b"')
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    wait_cells_done(page, 60)
    test_cell = page.locator(CELLS).nth(test_at)
    assert test_cell.locator(".jp-InputArea-prompt").inner_text().strip() not in ("[ ]:", "")
    assert test_cell.locator("[data-mime-type='application/vnd.jupyter.error']").count() == 0
    screenshot(page, "lesson-1-answer-typed")

    save(page)
    deadline = time.monotonic() + 10
    while 'practice5_answer = "b"' not in nbformat.read(path, as_version=4).cells[answer_at].source:
        assert time.monotonic() < deadline, "the answer never reached the saved notebook"
        time.sleep(0.2)

    # nbgrader's Validate button (its lab extension): saves, runs the notebook on the server, shows a dialog.
    # Where the extension is not enabled, the command the button triggers, on the saved notebook.
    if page.locator(".validate-button").count():
        page.locator(".validate-button").first.click()
        dialog = page.locator(".jp-Dialog #validation-message")
        dialog.wait_for(timeout=120_000)
        text = dialog.inner_text()
        screenshot(page, "lesson-2-validate-dialog")
        page.locator(".jp-Dialog .jp-mod-accept").first.click()
    else:
        result = subprocess.run(
            [sys.executable, "-m", "nbgrader", "validate", str(path)],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=offline_server.root,
            env=offline_server.env(),
        )
        text = result.stdout
    # The unanswered parts fail, by name; the answered one is not among them.
    assert "The following cell failed" in text
    assert "warmup1_kv_bytes_per_token" in text
    assert "practice5_answer" not in text, text
    assert not page.problems, page.problems


# --- the live engine, once ---------------------------------------------------------------------------------------
@pytest.fixture
def live_server(tmp_path):
    env = {"SERVELAB_RESULTS": str(tmp_path / "results.jsonl"), "SERVELAB_OFFLINE": "0"}
    with JupyterLab(tmp_path / "root", env=env, copy=("labs",)) as server:
        server.results = tmp_path / "results.jsonl"
        yield server


def focused(page) -> str:
    """The lab control that has the keyboard focus, by the class the lab gives it ('' when none)."""
    return page.evaluate("""() => {
        let e = document.activeElement;
        while (e && e !== document.body) {
            const own = Array.from(e.classList).find(c => c.startsWith('servelab-') && c !== 'servelab-lab'
                                                       && !c.startsWith('servelab-view'));
            if (own) return own + (e.closest('.servelab-view-flip') ? '' : ' (another view)');
            e = e.parentElement;
        }
        return '';
    }""")


def tab_to(page, control: str, limit: int = 80) -> None:
    """Press Tab until the flip view's `control` has the focus, as a learner without a mouse does."""
    for _ in range(limit):
        if focused(page) == control:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{limit} presses of Tab never reached {control}")


@pytest.mark.timeout(600)
def test_live_measure_from_the_browser_with_the_keyboard_alone(page, live_server):
    """The one live test, from the keyboard: Tab to each control, batch 1, speculation off, 16 tokens; Enter on
    Measure, watch the status line go starting (its phase and an estimate, the chart still drawn) ->
    measuring -> idle and the measured point appear in the chart; Space on Stop ends the engine."""
    import psutil

    _needs(LAB)
    open_notebook(page, live_server, LAB)
    run_all_cells(page)
    lab = page.locator(FLIP).first
    lab.scroll_into_view_if_needed()
    # The lab starts the engines its first Measure needs as it opens, while the learner reads: the status line
    # says so from the start (idle only where that start has already ended).
    opened_state, opened_text = status(page)
    assert opened_state in ("starting", "idle"), opened_text

    page.keyboard.press("Escape")  # command mode: Tab now walks the page's controls
    tab_to(page, "servelab-batch-slider")
    page.keyboard.press("Home")
    wait_for_lab(page, "s.settings.batch_size === 1")
    tab_to(page, "servelab-method")
    page.keyboard.type("o")  # a closed <select> takes the first letter of an option: "off"
    wait_for_lab(page, "s.settings.method === 'none'")
    tab_to(page, "servelab-output-len")
    page.keyboard.press("Home")
    wait_for_lab(page, "s.settings.output_len === 16")
    before = _traces_by_name(figure(page)).get("no speculation, measured", {"x": []})
    assert 1 not in before["x"]
    shown = {name: t["x"] for name, t in _traces_by_name(figure(page)).items()}

    tab_to(page, "servelab-measure")
    t0 = time.monotonic()
    page.keyboard.press("Enter")
    seen, starting, shot = [], [], False
    if opened_state == "starting":  # the start that opening the lab began counts as this Measure's
        seen, starting = [opened_state], [opened_text]
    deadline = time.monotonic() + 480
    while time.monotonic() < deadline:
        state, text = status(page)
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "starting":
            starting.append(text)
            # The learner never stares at an empty chart: every point drawn before is still drawn.
            now = {name: t["x"] for name, t in _traces_by_name(figure(page)).items()}
            assert all(set(x) <= set(now.get(name, [])) for name, x in shown.items()), (shown, now)
            if not shot and "so far" in text:
                page.evaluate(
                    "() => document.querySelector('.servelab-status.servelab-view-flip')"
                    ".scrollIntoView({block: 'center'})"
                )
                screenshot(page, "live-1-engine-starting")
                shot = True
        if state in ("idle", "failed") and len(seen) > 1:
            break
        page.wait_for_timeout(250)
    state, text = status(page)
    assert state == "idle" and "measured 1 of 1" in text, (seen, text)
    assert "starting" in seen and "measuring" in seen, seen
    # While it starts, the status says which phase and how long a start takes on this machine.
    phases = {
        p
        for p in ("starting the engine", "loading the model", "preparing the KV cache", "warming up")
        if any(t.removeprefix("starting: ").startswith(p) for t in starting)
    }
    assert phases and any("s so far, about " in t for t in starting), starting
    print(f"first point, from Enter on Measure to idle: {time.monotonic() - t0:.0f} s; phases seen: {sorted(phases)}")
    page.wait_for_function(
        "([sel]) => { const gd = document.querySelector(sel + ' .js-plotly-plot');"
        " return gd.data.some(t => (t.name || '').replaceAll('<br>', ' ').startsWith('no speculation, measured')"
        " && Array.from(t.x || []).includes(1)); }",  # measured here, or on a busy machine (a loaded CI box)
        arg=[FLIP],
    )
    lab.scroll_into_view_if_needed()
    screenshot(page, "live-2-point-measured")
    records = [json.loads(line) for line in live_server.results.read_text().splitlines()]
    assert [(r["method"], r["batch_size"], r["output_len"], r["backend"]) for r in records] == [
        ("none", 1, 16, "local")
    ]

    # Stop: the engine goes, the kernel stays.
    kernels = live_server.kernels()
    assert len(kernels) == 1
    tab_to(page, "servelab-stop")
    page.keyboard.press("Space")
    page.wait_for_function(
        "() => document.querySelector('.servelab-status.servelab-view-flip "
        ".servelab-status-line')?.getAttribute('data-state') === 'stopped'",
        timeout=60_000,
    )
    server = psutil.Process(live_server.proc.pid)
    engines = [
        p
        for p in server.children(recursive=True)
        if "VLLM" in " ".join(p.cmdline()) or "spawn_main" in " ".join(p.cmdline())
    ]
    assert not engines, [p.cmdline() for p in engines]
    assert live_server.kernels()[0]["execution_state"] in ("idle", "busy")
    assert not page.problems, page.problems
