"""The lab's plotly FigureWidget: built once, then updated in place from a Drawing.

Measured points are markers, simulated curves are dashed lines, so the two never
look alike. Every trace carries a stable id in its meta ("tok_s|1|measured"), and
`chart_data()` returns what the traces hold, for tests and for the browser.
"""

from __future__ import annotations

import math

from .data import BATCHES
from .drawing import VIEWS, Drawing, trace_uids

TITLES = {
    "tok_s": "Output tok/s (all requests)",
    "speedup": "Speedup over no speculation",
    "tpot": "TPOT p50, ms (per-token latency)",
    "acceptance": "Acceptance rate (accepted / drafted)",
}
COLORS = ["#4c6a92", "#d9822b", "#2e9e5b", "#8e44ad"]  # baseline, then each speculating series
IDEAL_COLOR = "#222222"


def build(view: str):
    """An empty FigureWidget with every trace of the view in place (no data yet)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = VIEWS[view]["panels"]
    rows, cols = (2, 2) if len(panels) == 4 else (1, 2)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[TITLES[p] for p in panels],
                        horizontal_spacing=0.09, vertical_spacing=0.16)
    where = {p: (i // cols + 1, i % cols + 1) for i, p in enumerate(panels)}
    for uid in trace_uids(view):
        panel, slot, kind = uid.split("|")
        color = IDEAL_COLOR if slot == "ideal" else COLORS[int(slot) % len(COLORS)]
        if kind == "measured":
            trace = go.Scatter(mode="markers+lines", marker=dict(size=9, color=color, symbol="circle"),
                               line=dict(color=color, width=1), hovertemplate="batch %{x}: %{y:.3g}<br>%{text}")
        else:
            trace = go.Scatter(mode="lines", hoverinfo="skip",
                               line=dict(color=color, width=2, dash="dot" if slot == "ideal" else "dash"))
        # FigureWidget owns trace uids; meta carries ours, and the trace order is trace_uids(view).
        trace.update(meta=uid, x=[], y=[], legendgroup=f"{slot}|{kind}", showlegend=panel == "tok_s")
        row, col = where[panel]
        fig.add_trace(trace, row=row, col=col)
    for panel, (row, col) in where.items():
        fig.update_xaxes(type="log", tickvals=list(BATCHES), ticktext=[str(b) for b in BATCHES],
                         title_text="batch size" if row == rows else None, row=row, col=col)
    fig.update_yaxes(rangemode="tozero")
    # The legend sits above the panels, where nothing clips it: colour = setting, marker = measured,
    # dashed line = simulated; each entry stands for that series in every panel.
    fig.update_layout(height=680 if rows == 2 else 440, margin=dict(l=50, r=20, t=120, b=40),
                      template="plotly_white", showlegend=True, hovermode="closest",
                      legend=dict(orientation="h", x=0, y=1.06, yanchor="bottom",
                                  title_text="markers: measured, dashed: simulated"))
    widget = go.FigureWidget(fig)
    widget._servelab_axes = {p: _axis_names(i) for i, p in enumerate(panels)}
    return widget


def _axis_names(index: int) -> tuple[str, str]:
    n = "" if index == 0 else str(index + 1)
    return f"x{n}", f"y{n}"


def update(fig, drawing: Drawing) -> None:
    """Copy a Drawing into the figure's traces and marks, as one batched message."""
    by_uid = {t.meta: t for t in fig.data}
    axes = fig._servelab_axes
    with fig.batch_update():
        for uid, t in drawing.traces.items():
            trace = by_uid.get(uid)
            if trace is None:
                continue
            trace.name = t.name
            trace.x = t.x
            trace.y = t.y
            if t.hover:
                trace.text = t.hover
        fig.layout.shapes = _shapes(drawing, axes)
        fig.layout.annotations = _annotations(fig, drawing, axes)


def _shapes(drawing: Drawing, axes: dict) -> list[dict]:
    shapes = []
    for panel, (xa, ya) in axes.items():
        # the chosen batch, in every panel
        shapes.append(dict(type="line", xref=xa, yref=f"{ya} domain", x0=drawing.batch_size, x1=drawing.batch_size,
                           y0=0, y1=1, line=dict(color="#888", width=1, dash="dot")))
    if "speedup" in axes:
        xa, ya = axes["speedup"]
        shapes.append(dict(type="line", xref=f"{xa} domain", yref=ya, x0=0, x1=1, y0=1, y1=1,
                           line=dict(color="#c0392b", width=1)))
        for value, dash in ((drawing.crossover_measured, "solid"), (drawing.crossover_simulated, "dash")):
            if value is not None and math.isfinite(value):
                shapes.append(dict(type="line", xref=xa, yref=f"{ya} domain", x0=value, x1=value, y0=0, y1=1,
                                   line=dict(color="#c0392b", width=2, dash=dash)))
    return shapes


def _annotations(fig, drawing: Drawing, axes: dict) -> list:
    # make_subplots writes the panel titles as annotations: keep them, add the crossover labels.
    titles = [a for a in fig.layout.annotations if a.text in TITLES.values()]
    extra = []
    if "speedup" in axes:
        xa, ya = axes["speedup"]
        if drawing.crossover_measured is not None:
            extra.append(dict(x=math.log10(drawing.crossover_measured), y=0.95, xref=xa, yref=f"{ya} domain",
                              text=f"crossover {drawing.crossover_measured:.3g} (measured)", showarrow=False,
                              xanchor="left", font=dict(size=11, color="#c0392b")))
        if drawing.crossover_simulated is not None:
            extra.append(dict(x=math.log10(drawing.crossover_simulated), y=0.85, xref=xa, yref=f"{ya} domain",
                              text=f"crossover {drawing.crossover_simulated:.3g} (simulated)", showarrow=False,
                              xanchor="left", font=dict(size=11, color="#c0392b")))
    return titles + extra


def chart_data(fig) -> dict[str, dict]:
    """{uid: {"name", "x", "y"}} for every trace: what the chart shows now."""
    return {t.meta: {"name": t.name, "x": list(t.x or ()), "y": list(t.y or ())} for t in fig.data}
