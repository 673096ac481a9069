"""What both labs draw on the page with the same code: the status line, a chart's text alternative, and the
page helper (slider names, live regions, focus rings, charts that fit their box).
"""

from __future__ import annotations

import functools
import html


def status_line_html(state: str, text: str, detail: str = "", log_name: str = "log") -> str:
    """The status line both labs show: the state (a CSS class the browser tests read), the text, and a
    folded log where there is one."""
    more = (
        (f"<details><summary>{log_name}</summary><pre style='font-size:11px'>{html.escape(detail)}</pre></details>")
        if detail
        else ""
    )
    return (
        f"<div class='servelab-status-line servelab-state-{state}' data-state='{state}'>"
        f"<b>{state}</b>: {html.escape(text)}{more}</div>"
    )


def chart_text_html(summary_text: str, tables: str) -> str:
    """The summary as a paragraph and the tables folded under it, for the HTML widget below a chart."""
    # The tables can be wider than the output area (1.4.10 reflow): they scroll sideways in a box no wider than
    # it, one Tab stop with a name, so a keyboard can scroll it too (axe's scrollable-region-focusable).
    folded = (
        (
            f"<details><summary>The chart's data as a table</summary>"
            f"<div class='servelab-table-scroll' role='region' tabindex='0' aria-label=\"The chart's data\" "
            f"style='display:block;max-width:100%;overflow-x:auto'>{tables}</div></details>"
        )
        if tables
        else ""
    )
    return f"<p class='servelab-chart-summary'><b>In words:</b> {html.escape(summary_text)}</p>{folded}"


# --- what both labs add to the page for keyboard and screen-reader users ------------------------------------
# ipywidgets 8.1 draws its sliders with noUiSlider and gives the handle (role="slider") no accessible name,
# and a SelectionSlider's aria-valuetext is the option's index, not its label (WCAG 2.1, 4.1.2: name, role,
# value). Until ipywidgets passes them, this names each lab slider's handle after its description and keeps
# its value text equal to the readout the learner sees. It also draws a focus ring on every lab control
# (2.4.7: focus visible) thicker than JupyterLab's 1-pixel border change, and fits each chart to the width
# of its output area (1.4.10 reflow, 1.4.4 text resized to 200%). It ships the way the lab's plotly chart
# does, as an anywidget (an ES module in a widget the lab's own code creates), never as an
# application/javascript output: a saved notebook carries no script (tests/test_faults_lab.py).
# The widgets (by the CSS class both labs give them) whose changes a screen reader announces.
LIVE_REGIONS = (".servelab-lab .servelab-status", ".servelab-lab .servelab-chart-text")
PAGE_HELPER_JS = r"""
const LIVE_REGIONS = 'LIVE_REGIONS_HERE';
function servelabPageHelper() {
  if (window.servelabPageHelper) { window.servelabPageHelper(); return; }
  const style = document.createElement('style');
  style.textContent = `
    .servelab-lab :focus-visible, .servelab-lab .noUi-handle:focus, .servelab-lab select:focus,
    .servelab-lab button:focus, .servelab-lab summary:focus, .servelab-lab input:focus,
    .servelab-lab [contenteditable]:focus {
      outline: 3px solid #0072B2 !important; outline-offset: 2px !important; }
    .servelab-lab table.servelab-data-table { border-collapse: collapse; margin: 4px 0 10px; }
    .servelab-lab table.servelab-data-table th, .servelab-lab table.servelab-data-table td {
      border: 1px solid #767676; padding: 2px 6px; text-align: right; }
    .servelab-lab table.servelab-data-table caption { text-align: left; font-weight: bold; }
    .servelab-lab .servelab-chart-text, .servelab-lab .servelab-chart-text > .widget-html-content {
      min-width: 0; max-width: 100%; }
    .servelab-lab .widget-toggle-buttons { flex-wrap: wrap; min-width: 0; max-width: 100%; }
    .servelab-lab .widget-toggle-button { max-width: 100%; white-space: normal; height: auto; }
    .servelab-lab .widget-inline-hbox { flex-wrap: wrap; min-width: 0; max-width: 100%; height: auto; }
    .servelab-lab .widget-inline-hbox > .widget-label {
      flex: 0 1 auto; max-width: 100%; white-space: normal; overflow-wrap: anywhere; height: auto; }
    .servelab-lab .widget-inline-hbox > .slider-container { flex: 1 1 9em; min-width: 9em; }
    .servelab-lab .widget-inline-hbox > .widget-readout { flex: 0 0 auto; min-width: 3em; width: auto; }
    .servelab-lab .widget-inline-hbox > select, .servelab-lab .widget-inline-hbox > input {
      flex: 1 0 auto; min-width: min(12em, 100%); max-width: 100%; width: auto; }
    .servelab-lab .widget-inline-hbox > select { field-sizing: content; padding-right: 1.8em; }`;
  document.head.appendChild(style);
  const name = () => {
    document.querySelectorAll('.servelab-lab .widget-slider').forEach(slider => {
      const handle = slider.querySelector('.noUi-handle');
      if (!handle) return;
      const label = (slider.querySelector('.widget-label')?.textContent || '').trim();
      const value = (slider.querySelector('.widget-readout')?.textContent || '').trim();
      if (label && handle.getAttribute('aria-label') !== label) handle.setAttribute('aria-label', label);
      if (value && handle.getAttribute('aria-valuetext') !== value) handle.setAttribute('aria-valuetext', value);
    });
  };
  // The status line and the charts in words change as the lab works: each is an HTML widget whose own node
  // stays in place while ipywidgets replaces what is inside it, so that node is the live region a screen
  // reader announces (4.1.3: status messages).
  const live = () => document.querySelectorAll(LIVE_REGIONS).forEach(el => {
    if (el.getAttribute('role') !== 'status') el.setAttribute('role', 'status');
    if (el.getAttribute('aria-live') !== 'polite') el.setAttribute('aria-live', 'polite');
  });
  // ipywidgets 8.1's ToggleButtons mark the chosen button with a CSS class only: say which one is pressed
  // (4.1.2: name, role, value), and name the group after its description.
  const pressed = () => document.querySelectorAll('.servelab-lab .widget-toggle-buttons').forEach(group => {
    const label = (group.querySelector('.widget-label')?.textContent || '').trim();
    if (group.getAttribute('role') !== 'group') group.setAttribute('role', 'group');
    if (label && group.getAttribute('aria-label') !== label) group.setAttribute('aria-label', label);
    group.querySelectorAll('button.widget-toggle-button').forEach(b => {
      const on = b.classList.contains('mod-active') ? 'true' : 'false';
      if (b.getAttribute('aria-pressed') !== on) b.setAttribute('aria-pressed', on);
    });
  });
  // plotly's FigureWidget keeps the width it first drew at (700 px when the output area was not laid out
  // yet), wider than the output area at 1024 px or at 200% zoom: fit each lab chart to its box, now and
  // whenever the box changes size (JupyterLab's plotly, window.Plotly, does the resize).
  const charts = new WeakSet();
  // A narrower chart wraps its legend onto more rows: grow the chart's height until the legend fits.
  const grow = gd => {
    const svg = gd.querySelector('.main-svg'), legend = gd.querySelector('.legend');
    if (!svg || !legend || !gd._fullLayout) return;
    const over = legend.getBoundingClientRect().bottom - svg.getBoundingClientRect().bottom;
    if (over > 0) window.Plotly.relayout(gd, {height: Math.ceil(gd._fullLayout.height + over + 12)})
      .then(() => shrink(gd)).catch(() => {});
    else shrink(gd);
  };
  // A learner's own fonts can be wider than the ones the chart was laid out for (a wide face, letter-spacing):
  // where a legend entry, a title or a panel's title runs past the chart's edges in a narrow box, the chart's
  // text is drawn smaller, a tenth at a time and to no less than MIN_SCALE of its size, until it fits; the
  // sizes as built come back when the box widens. The text as the kernel sent it is the starting point.
  const MIN_SCALE = 0.65, TEXT = '.legendtext, .legendtitletext, .gtitle, .annotation-text, .xtitle, .ytitle';
  const spills = gd => {
    const s = gd.querySelector('.main-svg').getBoundingClientRect();
    return Array.from(gd.querySelectorAll(TEXT)).some(t => {
      const b = t.getBoundingClientRect();
      return b.width > 0 && (b.right > s.right + 1 || b.left < s.left - 1);
    });
  };
  const shrink = gd => {
    const L = gd._fullLayout;
    if (!L || !gd.layout || !gd.querySelector('.main-svg')) return;
    const size = o => (o && o.font && o.font.size) || 0;
    const anns = gd.layout.annotations || [];
    if (!gd._servelabFonts || gd._servelabFonts.ann.length !== anns.length) {
      gd._servelabFonts = {font: L.font.size, legend: size(gd.layout.legend) || L.font.size,
                           ann: anns.map(a => size(a) || L.font.size), width: 0};
    }
    const f = gd._servelabFonts, now = L.font.size / f.font;
    let scale = now;
    if (now < 1 && gd.clientWidth > f.width + 8) scale = 1;
    else if (now > MIN_SCALE + 1e-3 && spills(gd)) scale = Math.max(MIN_SCALE, now * 0.9);
    if (Math.abs(scale - now) < 1e-3) return;
    f.width = gd.clientWidth;
    const change = {'font.size': f.font * scale, 'legend.font.size': f.legend * scale};
    anns.forEach((a, i) => { change[`annotations[${i}].font.size`] = f.ann[i] * scale; });
    window.Plotly.relayout(gd, change).then(() => grow(gd)).catch(() => {});
  };
  // Panels side by side need room: in a box narrower than NARROW_PX (1024 px with the file browser open,
  // 200% zoom) they stack in one column, each with its own "batch size" axis title, and go back to the
  // grid the lab built when the box widens again (1.4.10 reflow). The figure keeps its traces and marks;
  // only the panels' places move. A redraw from the kernel that puts the titles back is followed too.
  const NARROW_PX = 640;
  const columns = gd => {
    const L = gd._fullLayout;
    if (!L || !gd.layout) return false;
    const names = Object.keys(L).filter(k => /^xaxis\d*$/.test(k))
      .sort((a, b) => (Number(a.slice(5)) || 1) - (Number(b.slice(5)) || 1));
    if (names.length < 2) return false;
    const n = names.length, gap = 0.08, h = (1 - gap * (n - 1)) / n;
    if (!gd._servelabGrid) {  // the grid as built, before any change here
      const axes = names.map(x => ({x: L[x].domain.slice(), y: L['y' + x.slice(1)].domain.slice(),
                                    title: (L[x].title && L[x].title.text) || ''}));
      const titles = {};
      (gd.layout.annotations || []).forEach(a => {
        if (a.xref !== 'paper' || a.yref !== 'paper') return;
        const i = axes.findIndex(ax => Math.abs((ax.x[0] + ax.x[1]) / 2 - a.x) < 0.02 && Math.abs(ax.y[1] - a.y) < 0.02);
        if (i >= 0) titles[a.text] = {i, x: a.x, y: a.y};
      });
      gd._servelabGrid = {height: L.height, axes, titles};
    }
    const grid = gd._servelabGrid, narrow = gd.clientWidth < NARROW_PX;
    const top = i => 1 - i * (h + gap);
    const change = {};
    if (gd._servelabNarrow !== narrow && (narrow || gd._servelabNarrow)) {  // built as a grid: nothing to undo
      names.forEach((x, i) => {
        change[x + '.domain'] = narrow ? [0, 1] : grid.axes[i].x;
        change['y' + x.slice(1) + '.domain'] = narrow ? [top(i) - h, top(i)] : grid.axes[i].y;
        change[x + '.title.text'] = narrow ? 'batch size' : grid.axes[i].title;
      });
      change.height = narrow ? Math.max(grid.height, 300 * n + 200) : grid.height;
    }
    gd._servelabNarrow = narrow;
    let moved = false;
    const annotations = (gd.layout.annotations || []).map(a => {
      const t = grid.titles[a.text];
      if (!t) return a;
      const x = narrow ? 0.5 : t.x, y = narrow ? top(t.i) : t.y;
      if (Math.abs(a.x - x) < 1e-3 && Math.abs(a.y - y) < 1e-3) return a;
      moved = true;
      return {...a, x, y};
    });
    if (moved) change.annotations = annotations;
    if (!Object.keys(change).length) return false;
    change.width = gd.clientWidth;
    window.Plotly.relayout(gd, change).then(() => grow(gd)).catch(() => {});
    return true;
  };
  const fit = gd => {
    const svg = gd.querySelector('.main-svg');
    if (!window.Plotly || !svg || !gd.clientWidth) return;
    if (Math.abs(svg.getBoundingClientRect().width - gd.clientWidth) > 2) {
      // The box's width, set outright: Plots.resize does nothing once a figure holds a width and a height.
      window.Plotly.relayout(gd, {width: gd.clientWidth}).then(() => columns(gd) || grow(gd)).catch(() => {});
    } else if (!columns(gd)) {
      grow(gd);
    }
  };
  const sizes = new ResizeObserver(entries => entries.forEach(e => fit(e.target)));
  const track = () => document.querySelectorAll('.servelab-lab .js-plotly-plot').forEach(gd => {
    if (!charts.has(gd)) { charts.add(gd); sizes.observe(gd); }
    fit(gd);
  });
  const all = () => { name(); live(); pressed(); track(); };
  window.servelabPageHelper = all;
  // Widgets render after this runs, and a readout changes with every key press: follow the page.
  new MutationObserver(all).observe(document.body, {subtree: true, childList: true, characterData: true});
  // A toggle's choice is a class change only; watched on its own so plotly's class changes resize nothing.
  new MutationObserver(pressed).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['class']});
  all();
}
export default { render() { servelabPageHelper(); } };
""".replace("LIVE_REGIONS_HERE", ", ".join(LIVE_REGIONS))


@functools.cache
def _page_helper_class():
    import anywidget

    class PageHelper(anywidget.AnyWidget):
        _esm = PAGE_HELPER_JS

    return PageHelper


def page_helper():
    """The helper as an invisible widget to put inside a lab's box (it draws nothing itself)."""
    helper = _page_helper_class()()
    helper.add_class("servelab-page-helper")
    return helper
