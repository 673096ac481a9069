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
    "requests": ("Requests running / waiting (server, peak)",
                 [("running", "num_requests_running_max"), ("waiting", "num_requests_waiting_max")]),
    "kv": ("KV cache usage, % (server, peak)", [("KV used", "kv_cache_usage_pct")]),
    "preemptions": ("Preemptions (server)", [("preempted", "num_preemptions")]),
    "hits": ("Prefix-cache hits / draft acceptance, %",
             [("prefix hits", "prefix_cache_hit_pct"), ("acceptance", "acceptance_pct")]),
}
SLO_PANEL = {"ttft_ms_p50": "ttft", "ttft_ms_p99": "ttft", "tpot_ms_p50": "tpot", "tpot_ms_p99": "tpot",
             "output_tok_s": "throughput"}
COLORS = ("#4c6a92", "#d9822b")  # setting a, setting b
SLO_COLOR = "#c0392b"


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
    fig = make_subplots(rows=2, cols=4, subplot_titles=[PANELS[p][0] for p in names],
                        horizontal_spacing=0.07, vertical_spacing=0.22)
    where = {p: (i // 4 + 1, i % 4 + 1) for i, p in enumerate(names)}
    for uid in uids():
        panel, slot = uid.split("|")
        row, col = where[panel]
        if slot == "slo":
            trace = go.Scatter(mode="lines", line=dict(color=SLO_COLOR, width=2, dash="dash"), name="SLO",
                               legendgroup="slo", showlegend=False, hovertemplate="SLO %{y:.4g}<extra></extra>")
        else:
            i = int(slot)
            trace = go.Bar(marker_color=COLORS[i], legendgroup=f"setting{i}", showlegend=panel == "ttft",
                           hovertemplate="%{x}: %{y:.4g}<extra>%{fullData.name}</extra>")
        trace.update(meta=uid, x=[], y=[])
        fig.add_trace(trace, row=row, col=col)
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(height=560, barmode="group", template="plotly_white", showlegend=True,
                      margin=dict(l=45, r=20, t=70, b=30), hovermode="closest",
                      legend=dict(orientation="h", x=0, y=1.14, yanchor="bottom", title_text="setting:"))
    widget = go.FigureWidget(fig)
    return widget


def update(fig, records: tuple[dict | None, dict | None], names: tuple[str, str], slo_metric: str,
           slo_value: float | None) -> None:
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
                t.name = f"SLO: {slo_metric} {'≤' if slo_metric != 'output_tok_s' else '≥'} {slo_value:g}" if on else "SLO"
                t.showlegend = on


def chart_data(fig) -> dict[str, dict]:
    """{uid: {"name", "x", "y"}} for every trace: what the chart shows now."""
    return {t.meta: {"name": t.name, "x": list(t.x or ()), "y": list(t.y or ())} for t in fig.data}
