"""The knob lab in JupyterLab and Debian's Chromium: run every cell, change the knob, see the chart's data change.

The server runs with SERVELAB_OFFLINE=1, so the charts show the recorded knob benchmark
(data/measurements/knobs-cpu.jsonl) and no vLLM server starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_helpers import JupyterLab, chromium, open_notebook, require_chromium, run_all_cells, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
LAB = "labs/knob_lab.ipynb"
VIEW = ".servelab-lab.servelab-view-knobs"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if not (REPO / LAB).exists():
        pytest.skip(f"{LAB} is not generated yet")
    require_chromium()
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("jupyter-knobs")
    with (
        JupyterLab(
            tmp / "root", env={"SERVELAB_OFFLINE": "1", "SERVELAB_RESULTS": str(tmp / "results.jsonl")}, copy=("labs",)
        ) as server,
        sync_playwright() as p,
    ):
        with chromium(p) as context:
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.problems = []
            page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
            open_notebook(page, server, LAB)
            yield page


def published(page) -> dict:
    """The chart state the lab publishes in the page (a hidden widget)."""
    text = page.evaluate(
        "sel => document.querySelector(sel)?.textContent || ''", ".servelab-chart-data.servelab-view-knobs"
    )
    return json.loads(text) if text else {}


def drawn(page) -> dict[str, dict]:
    """What the plotly figure in the page holds, by trace id."""
    return page.evaluate(
        """sel => {
            const gd = document.querySelector(sel + ' .js-plotly-plot');
            if (!gd || !gd.data) return {};
            return Object.fromEntries(gd.data.map(t => [t.meta, {name: t.name, x: Array.from(t.x || []),
                                                                 y: Array.from(t.y || [])}]));
        }""",
        VIEW,
    )


@pytest.mark.timeout(300)
def test_changing_the_knob_changes_the_chart_data_in_the_page(page):
    run_all_cells(page)
    page.locator(VIEW).first.wait_for(state="attached")
    page.wait_for_function(
        "sel => { const gd = document.querySelector(sel + ' .js-plotly-plot');"
        " return gd && gd.data && gd.data.some(t => t.y && t.y.length); }",
        arg=VIEW,
    )
    page.locator(VIEW).first.scroll_into_view_if_needed()
    screenshot(page, "knob-lab-1-batching")
    before = drawn(page)
    assert published(page)["knob"] == "batching"
    assert before["ttft|0"]["name"] == "max_num_seqs=256" and len(before["ttft|0"]["y"]) == 2
    assert before["ttft|slo"]["y"], "the SLO line is drawn on the TTFT panel"
    legend = page.evaluate(
        "sel => Array.from(document.querySelectorAll(sel + ' .legendtext')).map(e => e.textContent || '')", VIEW
    )
    assert any("max_num_seqs=4" in t for t in legend) and any("SLO" in t for t in legend), legend

    # The learner picks another knob in the dropdown: the figure in the page gets that knob's records.
    page.locator(".servelab-knob select").first.select_option(label="Prefix caching: a long shared system prompt")
    page.wait_for_function(
        """sel => { const gd = document.querySelector(sel + ' .js-plotly-plot');
                    return gd.data.some(t => t.meta === 'ttft|1' && t.name === 'prefix caching on'
                                             && t.y && t.y.length); }""",
        arg=VIEW,
    )
    after = drawn(page)
    assert published(page)["knob"] == "prefix_caching"
    assert after["ttft|0"]["y"] != before["ttft|0"]["y"]
    assert after["hits|1"]["y"][0] > 0 and after["hits|0"]["y"][0] == 0  # the hit counter, from /metrics
    assert published(page)["traces"]["ttft|1"]["y"] == after["ttft|1"]["y"]  # the page shows what the lab drew
    screenshot(page, "knob-lab-2-prefix-caching")
    assert not page.problems, page.problems
