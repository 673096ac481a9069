"""The lab's plotly FigureWidget: built once, then updated in place from a Drawing.

Measured points are filled markers on a solid line, simulated curves are dashed
lines with open markers, so the two never look alike. Each series has its own marker
shape and dash pattern as well as its own colour, so it reads without colour too; the
colours are Okabe and Ito's colour-blind-safe palette ("Color Universal Design",
https://jfly.uni-koeln.de/color/), keeping the four of them that reach the 3:1 contrast
WCAG 2.1 asks of graphics on white (1.4.11; #0072B2 5.2:1, #D55E00 3.9:1, #009E73
3.4:1, #CC79A7 3.1:1). Every trace carries a stable id in its meta ("tok_s|1|measured"), and
`chart_data()` returns what the traces hold, for tests and for the browser.
"""

from __future__ import annotations

import math
import textwrap

from .drawing import VIEWS, Drawing, trace_uids
from .points import BATCHES

# The longest line of a legend entry: about 170 px at plotly's 12 px legend font, which a chart at a 320 px
# viewport (the lab's narrowest layout, tests/test_browser_accessibility.py) still holds beside its symbol.
LEGEND_LINE = 24
LEGEND_NAME = 36  # a name up to this long stays on one line: the lab's own series names ("load-adaptive k=4, ...")

TITLES = {
    "tok_s": "Output tok/s (all requests)",
    "speedup": "Speedup (over no speculation)",
    "tpot": "TPOT p50, ms (per-token latency)",
    "acceptance": "Acceptance rate (accepted / drafted)",
}
# baseline, then each speculating series: Okabe-Ito blue, vermillion, bluish green, reddish purple
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up"]
DASHES = ["longdash", "dash", "dashdot", "longdashdot"]  # simulated curves, one pattern per series
IDEAL_COLOR = "#000000"
MARK_COLOR = "#000000"  # the 1.0 line and crossover marks: black, so colour never carries them


def panel_title(panel: str) -> str:
    """A panel's title as drawn: its explanation on a second line, so it fits a narrow panel."""
    return TITLES[panel].replace(" (", "<br>(")


def build(view: str):
    """An empty FigureWidget with every trace of the view in place (no data yet).

    One piece: the traces' order is the order the update fills them in and the legend lists them."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = VIEWS[view]["panels"]
    rows, cols = (2, 2) if len(panels) == 4 else (1, 2)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[panel_title(p) for p in panels],
        horizontal_spacing=0.09,
        vertical_spacing=0.16,
    )
    fig.update_annotations(font_size=13)  # the panel titles: two short lines fit a panel at 1024 px and at 200%
    where = {p: (i // cols + 1, i % cols + 1) for i, p in enumerate(panels)}
    for uid in trace_uids(view):
        panel, slot, kind = uid.split("|")
        i = None if slot == "ideal" else int(slot) % len(COLORS)
        color = IDEAL_COLOR if i is None else COLORS[i]
        symbol = "x" if i is None else SYMBOLS[i]
        if kind == "recorded":  # the course machine's points: hollow diamonds, no line, their own legend entry
            trace = go.Scatter(
                mode="markers",
                marker=dict(size=9, color=color, symbol="diamond-open", line=dict(width=2, color=color)),
                hovertemplate="batch %{x}: %{y:.3g}<br>%{text}",
            )
        elif kind == "contended":  # measured here on a busy machine: a grey cross, left out of the fit
            trace = go.Scatter(
                mode="markers",
                marker=dict(size=12, color="#777777", symbol="x-thin-open", line=dict(width=2, color=color)),
                hovertemplate="batch %{x}: %{y:.3g}<br>%{text}",
            )
        elif kind == "measured":
            trace = go.Scatter(
                mode="markers+lines",
                marker=dict(size=10, color=color, symbol=symbol),
                line=dict(color=color, width=1.5),
                hovertemplate="batch %{x}: %{y:.3g}<br>%{text}",
            )
        else:
            trace = go.Scatter(
                mode="lines+markers",
                hoverinfo="skip",
                marker=dict(size=7, color=color, symbol=f"{symbol}-open" if i is not None else symbol),
                line=dict(color=color, width=2, dash="dot" if i is None else DASHES[i]),
            )
        # FigureWidget owns trace uids; meta carries ours, and the trace order is trace_uids(view).
        trace.update(meta=uid, x=[], y=[], legendgroup=f"{slot}|{kind}", showlegend=panel == "tok_s")
        row, col = where[panel]
        fig.add_trace(trace, row=row, col=col)
    for row, col in where.values():
        fig.update_xaxes(
            type="log",
            tickvals=list(BATCHES),
            ticktext=[str(b) for b in BATCHES],
            title_text="batch size" if row == rows else None,
            row=row,
            col=col,
        )
    fig.update_yaxes(rangemode="tozero")
    # The legend sits below the panels, one entry per row's worth of width: a horizontal plotly legend
    # wraps onto more rows when the chart is narrow (1024 px, 200% zoom), and below the panels a taller
    # legend pushes nothing off the top. Each entry stands for that series in every panel.
    fig.update_layout(
        autosize=True,
        height=760 if rows == 2 else 520,
        margin=dict(l=55, r=20, t=80, b=60),
        template="plotly_white",
        showlegend=True,
        hovermode="closest",
        font=dict(color="#222222"),
        legend=dict(
            orientation="h",
            x=0,
            xanchor="left",
            y=-0.16,
            yanchor="top",
            font=dict(size=12),
            title=dict(
                text="<br>".join(
                    [
                        "filled: measured here",
                        "open, dashed: simulated",
                        "diamonds: the course's",
                        "recording",
                        "crosses: a busy machine,",
                        "left out",
                    ]
                ),
                side="top",
            ),
        ),
    )
    widget = go.FigureWidget(fig)
    widget._servelab_axes = {p: _axis_names(i) for i, p in enumerate(panels)}
    return widget


def _axis_names(index: int) -> tuple[str, str]:
    n = "" if index == 0 else str(index + 1)
    return f"x{n}", f"y{n}"


def legend_name(name: str) -> str:
    """A series name on lines a phone-wide legend holds: plotly's SVG text never wraps by itself, so a name
    longer than LEGEND_NAME (a recording's machine, a busy machine's point) is broken between words into lines of
    at most LEGEND_LINE characters."""
    if len(name) <= LEGEND_NAME:
        return name
    return "<br>".join(textwrap.wrap(name, LEGEND_LINE, break_long_words=False)) or name


def update(fig, drawing: Drawing) -> None:
    """Copy a Drawing into the figure's traces and marks, as one batched message."""
    by_uid = {t.meta: t for t in fig.data}
    axes = fig._servelab_axes
    with fig.batch_update():
        for uid, t in drawing.traces.items():
            trace = by_uid.get(uid)
            if trace is None:
                continue
            trace.name = legend_name(t.name)
            trace.x = t.x
            trace.y = t.y
            if t.hover:
                trace.text = t.hover
        fig.layout.shapes = _shapes(drawing, axes)
        fig.layout.annotations = _annotations(fig, drawing, axes)


def _shapes(drawing: Drawing, axes: dict) -> list[dict]:
    shapes = []
    for xa, ya in axes.values():
        # the chosen batch, in every panel
        shapes.append(
            dict(
                type="line",
                xref=xa,
                yref=f"{ya} domain",
                x0=drawing.batch_size,
                x1=drawing.batch_size,
                y0=0,
                y1=1,
                line=dict(color="#888", width=1, dash="dot"),
            )
        )
    if "speedup" in axes:
        xa, ya = axes["speedup"]
        shapes.append(
            dict(
                type="line", xref=f"{xa} domain", yref=ya, x0=0, x1=1, y0=1, y1=1, line=dict(color=MARK_COLOR, width=1)
            )
        )
        for value, dash in ((drawing.crossover_measured, "solid"), (drawing.crossover_simulated, "dash")):
            if value is not None and math.isfinite(value):
                shapes.append(
                    dict(
                        type="line",
                        xref=xa,
                        yref=f"{ya} domain",
                        x0=value,
                        x1=value,
                        y0=0,
                        y1=1,
                        line=dict(color=MARK_COLOR, width=2, dash=dash),
                    )
                )
    return shapes


def _annotations(fig, drawing: Drawing, axes: dict) -> list:
    # make_subplots writes the panel titles as annotations: keep them, add the crossover labels.
    titles = [a for a in fig.layout.annotations if a.text in {panel_title(p) for p in TITLES}]
    extra = []
    if "speedup" in axes:
        xa, ya = axes["speedup"]
        if drawing.crossover_measured is not None:
            extra.append(
                dict(
                    x=math.log10(drawing.crossover_measured),
                    y=0.95,
                    xref=xa,
                    yref=f"{ya} domain",
                    text=f"crossover<br>{drawing.crossover_measured:.3g} measured",
                    showarrow=False,
                    **_beside(drawing.crossover_measured),
                    font=dict(size=12, color=MARK_COLOR),
                )
            )
        if drawing.crossover_simulated is not None:
            extra.append(
                dict(
                    x=math.log10(drawing.crossover_simulated),
                    y=0.7,
                    xref=xa,
                    yref=f"{ya} domain",
                    text=f"crossover<br>{drawing.crossover_simulated:.3g} simulated",
                    showarrow=False,
                    **_beside(drawing.crossover_simulated),
                    font=dict(size=12, color=MARK_COLOR),
                )
            )
    return titles + extra


def _beside(batch: float) -> dict:
    """A crossover label beside its line, on the side with more room (the x axis spans batch 1 to 256)."""
    right = math.log2(max(batch, 1)) / math.log2(BATCHES[-1]) < 0.5
    return dict(xanchor="left" if right else "right", xshift=4 if right else -4, align="left" if right else "right")


def chart_data(fig) -> dict[str, dict]:
    """{uid: {"name", "x", "y"}} for every trace: what the chart shows now."""
    return {t.meta: {"name": t.name, "x": list(t.x or ()), "y": list(t.y or ())} for t in fig.data}
