"""The knob lab's plotly FigureWidget: two settings side by side, bars per metric, the SLO as a line.

Built once, then updated in place. Every trace carries a stable id in its meta
("ttft|0" = the TTFT panel, setting a), and chart_data() returns what the
traces hold, for tests and for the browser.
"""

from __future__ import annotations

import math

# panel -> (title, [(bar label, how to read it from a record)]); a reader returns None when not recorded
PANELS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "ttft": ("TTFT, ms (time to first token)", [("p50", "ttft_ms_p50"), ("p99", "ttft_ms_p99")]),
    "tpot": ("TPOT, ms (per output token)", [("p50", "tpot_ms_p50"), ("p99", "tpot_ms_p99")]),
    "throughput": ("Output tok/s (all requests)", [("tok/s", "output_tok_s")]),
    "queue": ("Queue time, ms (server, mean)", [("queued", "queue_time_ms_mean")]),
    "requests": (
        "Requests running / waiting (server, peak)",
        [("running", "num_requests_running_max"), ("waiting", "num_requests_waiting_max")],
    ),
    "kv": ("KV cache usage, % (server, peak)", [("KV used", "kv_cache_usage_pct")]),
    "preemptions": ("Preemptions (server)", [("preempted", "num_preemptions")]),
    "hits": (
        "Prefix hits / acceptance (%)",
        [("prefix hits", "prefix_cache_hit_pct"), ("acceptance", "acceptance_pct")],
    ),
}
SLO_PANEL = {
    "ttft_ms_p50": "ttft",
    "ttft_ms_p99": "ttft",
    "tpot_ms_p50": "tpot",
    "tpot_ms_p99": "tpot",
    "output_tok_s": "throughput",
}
# setting a, setting b: Okabe and Ito's colour-blind-safe blue and vermillion ("Color Universal Design",
# https://jfly.uni-koeln.de/color/), 5.2:1 and 3.9:1 on white; b's bars are hatched too, so the two read
# apart without colour.
COLORS = ("#0072B2", "#D55E00")
PATTERNS = ("", "/")
SLO_COLOR = "#000000"
# Which way is better for each panel's bars (for the summary sentence); None: neither, it describes the load.
BETTER = {
    "ttft": "lower",
    "tpot": "lower",
    "throughput": "higher",
    "queue": "lower",
    "requests": None,
    "kv": None,
    "preemptions": "lower",
    "hits": "higher",
}


def value(record: dict | None, key: str) -> float | None:
    """One bar's value from a record: a field, or a percentage derived from the server's counters."""
    if not record:
        return None
    if key == "kv_cache_usage_pct":
        v = record.get("kv_cache_usage_max")
        return None if v is None else round(100 * v, 2)
    if key == "prefix_cache_hit_pct":
        q = record.get("prefix_cache_queries_tokens")
        return round(100 * (record.get("prefix_cache_hit_tokens") or 0) / q, 2) if q else 0.0 if q == 0 else None
    if key == "acceptance_pct":
        v = record.get("acceptance_rate")
        return None if v is None else round(100 * v, 2)
    v = record.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return v
    return None


def uids() -> list[str]:
    out = []
    for panel in PANELS:
        out += [f"{panel}|0", f"{panel}|1"]
        if panel in SLO_PANEL.values():
            out.append(f"{panel}|slo")
    return out


def build():
    """An empty FigureWidget with every trace in place, a legend naming the two settings and the SLO."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(PANELS)
    # Two panels a row, each title's explanation on a second line: they fit at 1024 px and at 200% zoom.
    fig = make_subplots(
        rows=4,
        cols=2,
        subplot_titles=[PANELS[p][0].replace(" (", "<br>(") for p in names],
        horizontal_spacing=0.12,
        vertical_spacing=0.1,
    )
    fig.update_annotations(font_size=13)
    where = {p: (i // 2 + 1, i % 2 + 1) for i, p in enumerate(names)}
    for uid in uids():
        panel, slot = uid.split("|")
        row, col = where[panel]
        if slot == "slo":
            trace = go.Scatter(
                mode="lines",
                line=dict(color=SLO_COLOR, width=2, dash="dash"),
                name="SLO",
                legendgroup="slo",
                showlegend=False,
                hovertemplate="SLO %{y:.4g}<extra></extra>",
            )
        else:
            i = int(slot)
            trace = go.Bar(
                marker=dict(color=COLORS[i], pattern=dict(shape=PATTERNS[i], fgcolor="#ffffff")),
                legendgroup=f"setting{i}",
                showlegend=panel == "ttft",
                hovertemplate="%{x}: %{y:.4g}<extra>%{fullData.name}</extra>",
            )
        trace.update(meta=uid, x=[], y=[])
        fig.add_trace(trace, row=row, col=col)
    fig.update_yaxes(rangemode="tozero")
    # The legend below the panels: a horizontal plotly legend wraps onto more rows where the chart is narrow.
    fig.update_layout(
        height=1000,
        barmode="group",
        template="plotly_white",
        showlegend=True,
        margin=dict(l=45, r=20, t=80, b=60),
        hovermode="closest",
        font=dict(color="#222222"),
        legend=dict(
            orientation="h",
            x=0,
            y=-0.06,
            yanchor="top",
            font=dict(size=12),
            title=dict(text="setting (b hatched)", side="top"),
        ),
    )
    widget = go.FigureWidget(fig)
    return widget


def update(
    fig, records: tuple[dict | None, dict | None], names: tuple[str, str], slo_metric: str, slo_value: float | None
) -> None:
    """Bars for the two settings (None = not measured yet), and the SLO line on the panel its metric lives in."""
    by_uid = {t.meta: t for t in fig.data}
    slo_panel = SLO_PANEL.get(slo_metric) if slo_value else None
    with fig.batch_update():
        for panel, (_, bars) in PANELS.items():
            labels = [label for label, _ in bars]
            for i in (0, 1):
                t = by_uid[f"{panel}|{i}"]
                t.name = names[i] + ("" if records[i] else " (not measured yet)")
                ys = [value(records[i], key) for _, key in bars]
                t.x = labels if records[i] else []
                t.y = ys if records[i] else []
            if f"{panel}|slo" in by_uid:
                t = by_uid[f"{panel}|slo"]
                on = panel == slo_panel
                t.x = labels if on else []
                t.y = [slo_value] * len(labels) if on else []
                t.name = (
                    f"SLO: {slo_metric} {'≤' if slo_metric != 'output_tok_s' else '≥'} {slo_value:g}" if on else "SLO"
                )
                t.showlegend = on


def chart_data(fig) -> dict[str, dict]:
    """{uid: {"name", "x", "y"}} for every trace: what the chart shows now."""
    return {t.meta: {"name": t.name, "x": list(t.x or ()), "y": list(t.y or ())} for t in fig.data}


# --- the chart in words: a summary and the data as a table (WCAG 2.1, 1.1.1 non-text content) ----------
def summary(records: tuple[dict | None, dict | None], names: tuple[str, str]) -> str:
    """Which setting does better on each panel whose bars have a better direction, from the records.

    E.g. "max_num_seqs=4 has the lower TTFT p50 (120 against 480 ms) ..."; where a setting is not measured
    yet, the sentence says so."""
    if names[0] == names[1]:
        return f"Both settings are {names[0]}: pick another setting b to compare two."
    missing = [n for n, r in zip(names, records) if not r]
    if missing:
        return f"Not measured yet for this load: {' and '.join(missing)}. Click Measure to compare the two settings."
    sentences = []
    for panel, (title, bars) in PANELS.items():
        way = BETTER[panel]
        if way is None:
            continue
        metric = title.split(",")[0].split(" (")[0]
        unit = title.split(", ")[1].split(" ")[0] if ", " in title else ""
        for label, key in bars:
            va, vb = value(records[0], key), value(records[1], key)
            if va is None or vb is None:
                continue
            what = metric if len(bars) == 1 else label if "/" in metric else f"{metric} {label}"
            if va == vb:
                sentences.append(f"Both have the same {what} ({va:.4g}{_unit(unit)}).")
                continue
            a_wins = (va < vb) == (way == "lower")
            win, lose = (0, 1) if a_wins else (1, 0)
            vw, vl = (va, vb) if a_wins else (vb, va)
            sentences.append(
                f"{names[win]} has the {'lower' if way == 'lower' else 'higher'} {what} "
                f"({vw:.4g} against {vl:.4g}{_unit(unit)} for {names[lose]})."
            )
    return " ".join(sentences)


def _unit(unit: str) -> str:
    return f" {unit}" if unit and unit != "%" else unit


def table_html(records: tuple[dict | None, dict | None], names: tuple[str, str]) -> str:
    """Every bar of the chart as one table: a row per panel and bar, a column per setting."""
    import html

    head = "".join(f"<th scope='col'>{html.escape(n or f'setting {ab}')}</th>" for n, ab in zip(names, "ab"))
    rows = []
    for title, bars in PANELS.values():
        for label, key in bars:
            cells = "".join(f"<td>{_cell(value(r, key))}</td>" for r in records)
            rows.append(f"<tr><th scope='row'>{html.escape(title)}: {html.escape(label)}</th>{cells}</tr>")
    return (
        f"<table class='servelab-data-table'><caption>Both settings, every panel</caption>"
        f"<thead><tr><th scope='col'>panel: bar</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _cell(v) -> str:
    return f"{v:.4g}" if v is not None else "not measured"
