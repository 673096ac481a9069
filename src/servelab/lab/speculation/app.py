"""The lab: controls, a Measure button, a status line, charts that update in place.

Moving a control only redraws, from points already measured (the recorded file
and the results store) and from the simulator: it never starts a measurement.
Only a click on Measure does, and only where live measurement is allowed
(not under nbgrader's autograde, not with SERVELAB_OFFLINE set). The click
hands a request to one background worker thread with a one-request slot, so
clicks never pile up and the latest one wins; each point lands in the results
store the moment it is measured, and the charts redraw.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import replace
from typing import Any

from ...cpu_usage import contended
from ...engine import EngineConfigError, EngineError
from ...measurement import MIN_REQUESTS
from ...provenance import COURSE_MACHINE
from ...results import ResultsStore
from .. import page, rep2
from ..common import clean, offline_reason
from ..worker import LatestRequestWorker
from . import charts, drawing
from .engines import EnginePool, Point, PointPlan, describe, engine_config, measure_local, measure_remote, resolve
from .points import (
    BATCHES,
    CONTEXTS,
    GPU_BACKENDS,
    METHODS,
    OUTPUT_LENS,
    WORKLOADS,
    PointBook,
    Settings,
    Simulators,
    acceptance_for,
    class_defaults,
    series_label,
)

BACKENDS = {
    "this machine's engine": "local",
    "remote vllm serve (two URLs)": "remote",
    **{f"simulated {g}": g for g in GPU_BACKENDS},
}
STATES = ("offline", "simulated", "idle", "starting", "measuring", "failed", "stopped")

_shared: dict = {}
_shared_lock = threading.Lock()


def shared_pool() -> EnginePool:
    """One pool of warm engines per kernel, whichever lab views use it."""
    with _shared_lock:
        if "pool" not in _shared:
            _shared["pool"] = EnginePool()
        return _shared["pool"]


def shared_worker() -> LatestRequestWorker:
    """One measuring thread per kernel: two lab views never measure at once on the same cores."""
    with _shared_lock:
        if "worker" not in _shared:
            _shared["worker"] = LatestRequestWorker(
                lambda req, stale: req[0]._run(req[1], stale), lambda req, exc: req[0]._crashed(exc)
            )
        return _shared["worker"]


def quickest_first(points: list[Point]) -> list[Point]:
    """The points in the order they take least time to measure. A point at batch b runs ceil(MIN_REQUESTS / b)
    rounds of the same number of decode steps, and a step takes longer at a larger batch but much less than in
    proportion (the weights are read once per step for the whole batch), so fewer rounds come first, then the
    smaller batch; each batch's curves keep their order. At the lab's default settings the first point is then
    one round of batch 8 (bench/first_point.py times it), not eight rounds of batch 1."""
    return sorted(points, key=lambda p: (math.ceil(MIN_REQUESTS / p.batch_size), p.batch_size))


class _Prestart(list):
    """A request for the measuring thread: start these engine configs ahead, measure nothing."""


class SpecDecodeLab:
    """Sliders, a Measure button and plotly charts over measured and simulated points.

    view="flip": the chosen method against no speculation (throughput, speedup, TPOT, acceptance).
    view="fix": every policy at once (none, n-gram, load-adaptive, routed) with the simulator's ideal.
    measure_point: a callable(Point) -> Measurement that replaces the engine (tests of the queueing).
    """

    def __init__(
        self,
        view: str = "flip",
        settings: Settings | None = None,
        *,
        store: ResultsStore | None = None,
        recorded=None,
        book: PointBook | None = None,
        pool: EnginePool | None = None,
        worker: LatestRequestWorker | None = None,
        measure_point=None,
        offline: str | None = None,
        remote_timeout_s: float = 30.0,
        prestart: bool | None = None,
    ):
        if view not in drawing.VIEWS:
            raise ValueError(f"view must be one of {', '.join(drawing.VIEWS)}, not {view!r}.")
        self.view = view
        self.offline = offline_reason() if offline is None else offline
        self.store = store if store is not None else ResultsStore()
        self.book = book if book is not None else PointBook(recorded, self.store)
        self.sims = Simulators(self.book)
        self._pool = pool
        self._worker = worker
        self.measure_point = measure_point
        self.remote_timeout_s = remote_timeout_s
        self.state, self.status_text, self.error = "idle", "", ""
        self._thresholds: dict[tuple, tuple[int, str]] = {}
        self._draw_lock = threading.RLock()
        self.last_drawing: drawing.Drawing | None = None
        self.redraws = 0
        self.measured: list = []  # records measured by this lab, in order
        s = settings or Settings(method="ngram" if view == "flip" else "routed", **class_defaults())
        self._build_widgets(s)
        self.figure = charts.build(view)
        self._figure_box.children = (self.figure,)
        self._idle_status()
        self.redraw()
        if prestart if prestart is not None else self._prestarts_by_default():
            self.prestart()

    # --- shared machinery ---------------------------------------------------------------
    @property
    def pool(self) -> EnginePool:
        return self._pool if self._pool is not None else shared_pool()

    @property
    def worker(self) -> LatestRequestWorker:
        return self._worker if self._worker is not None else shared_worker()

    # --- widgets ----------------------------------------------------------------------------
    def _build_widgets(self, s: Settings) -> None:
        """The lab's controls, in the order the page shows them. One piece: it is the page's layout read top to
        bottom, each control beside the ones it sits with; split, one layout would live in several functions."""
        import ipywidgets as w

        wide = {"description_width": "170px"}

        # Each control its own Layout (one shared Layout would hide them all when one is hidden), as wide as
        # the output area allows up to 470px: nothing runs off the right edge at 1024 px or at 200% zoom.
        def full():
            return w.Layout(width="calc(100% - 4px)", max_width="470px")

        self.batch_slider = w.SelectionSlider(
            options=list(BATCHES), value=s.batch_size, description="batch size", style=wide, layout=full()
        )
        self.k_slider = w.IntSlider(
            value=s.k, min=1, max=8, description="num_speculative_tokens", style=wide, layout=full()
        )
        self.method_dropdown = w.Dropdown(
            options=list(METHODS.items()), value=s.method, description="method", style=wide, layout=full()
        )
        self.workload_dropdown = w.Dropdown(
            options=list(WORKLOADS.items()), value=s.workload, description="workload", style=wide, layout=full()
        )
        self.output_len_slider = w.SelectionSlider(
            options=list(OUTPUT_LENS), value=s.output_len, description="output length", style=wide, layout=full()
        )
        self.backend_dropdown = w.Dropdown(
            options=list(BACKENDS.items()), value=s.backend, description="backend", style=wide, layout=full()
        )
        self.context_slider = w.SelectionSlider(
            options=list(CONTEXTS),
            value=s.context_len if s.context_len in CONTEXTS else CONTEXTS[0],
            description="context tokens (simulated)",
            style=wide,
            layout=full(),
        )
        self.remote_off_text = w.Text(
            value=s.remote_off_url,
            description="URL, speculation off",
            placeholder="http://gpu-host:8000",
            style=wide,
            layout=full(),
        )
        self.remote_on_text = w.Text(
            value=s.remote_on_url,
            description="URL, speculation on",
            placeholder="http://gpu-host:8001",
            style=wide,
            layout=full(),
        )
        self.model_text = w.Text(
            value=s.model, description="model", placeholder="bundled SmolLM2-135M-Instruct", style=wide, layout=full()
        )
        self.draft_text = w.Text(
            value=s.draft_model,
            description="draft model",
            placeholder="bundled 6-layer draft",
            style=wide,
            layout=full(),
        )
        self.kv_cache_text = w.BoundedFloatText(
            value=s.kv_cache_gb,
            min=0.25,
            max=256,
            step=0.25,
            description="KV cache GiB (CPU)",
            style=wide,
            layout=full(),
        )
        self.measure_button = w.Button(
            description="Measure",
            button_style="primary",
            icon="play",
            tooltip="Measure the missing points up to this batch, live",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            tooltip="Drop the waiting request, stop after the current point, stop engines",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.drop_button = w.Button(
            description="Drop busy points",
            icon="trash",
            tooltip="Take the points measured while other work held the cores off the charts; Measure runs them again",
            disabled=not self.book.contended(),
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.progress = w.IntProgress(
            value=0, min=0, max=1, description="", layout=w.Layout(width="300px", max_width="100%")
        )
        self.progress_label = w.Label(value="")
        self.status = w.HTML(value="")
        self.regime = w.HTML(value="")
        self.chart_text = w.HTML(value="")  # the charts in words: a summary and the data as a table
        self.chart_json = w.HTML(value="", layout=w.Layout(display="none"))
        for widget, css in [
            (self.batch_slider, "servelab-batch-slider"),
            (self.k_slider, "servelab-k-slider"),
            (self.method_dropdown, "servelab-method"),
            (self.workload_dropdown, "servelab-workload"),
            (self.output_len_slider, "servelab-output-len"),
            (self.backend_dropdown, "servelab-backend"),
            (self.context_slider, "servelab-context"),
            (self.remote_off_text, "servelab-remote-off-url"),
            (self.remote_on_text, "servelab-remote-on-url"),
            (self.model_text, "servelab-model"),
            (self.draft_text, "servelab-draft"),
            (self.kv_cache_text, "servelab-kv-cache"),
            (self.measure_button, "servelab-measure"),
            (self.stop_button, "servelab-stop"),
            (self.drop_button, "servelab-drop-busy"),
            (self.progress, "servelab-progress"),
            (self.progress_label, "servelab-progress-label"),
            (self.status, "servelab-status"),
            (self.regime, "servelab-regime"),
            (self.chart_text, "servelab-chart-text"),
            (self.chart_json, "servelab-chart-data"),
        ]:
            widget.add_class(css)
            widget.add_class(f"servelab-view-{self.view}")
        if self.view == "fix":
            self.method_dropdown.layout.display = "none"  # the fix view shows every policy at once
        self.remote_box = w.VBox([self.remote_off_text, self.remote_on_text])
        # The engine panel opens with a toggle button, a native button the keyboard reaches and that says
        # whether it is open (aria-pressed); ipywidgets 8.1's Accordion header is a div no Tab reaches.
        self.engine_toggle = w.ToggleButton(
            value=False,
            description="engine: model, draft, KV cache",
            icon="caret-right",
            tooltip="Show the engine's model, draft and KV cache",
            layout=w.Layout(width="auto"),
        )
        self.engine_toggle.add_class("servelab-engine-toggle")
        self.engine_toggle.add_class(f"servelab-view-{self.view}")
        self.engine_panel = w.VBox(
            [self.model_text, self.draft_text, self.kv_cache_text], layout=w.Layout(display="none")
        )
        self.engine_toggle.observe(self._on_engine_toggle, names="value")
        self.engine_box = w.VBox([self.engine_toggle, self.engine_panel])
        controls = w.VBox(
            [
                self.batch_slider,
                self.k_slider,
                self.method_dropdown,
                self.workload_dropdown,
                self.output_len_slider,
                self.backend_dropdown,
                self.context_slider,
                self.remote_box,
                self.engine_box,
            ]
        )
        bar = w.HBox(
            [self.measure_button, self.stop_button, self.drop_button, self.progress, self.progress_label],
            layout=w.Layout(flex_flow="row wrap"),
        )  # narrow: the progress bar goes below the buttons
        self.widget = w.VBox(
            [
                controls,
                bar,
                self.status,
                self.figure_box(),
                self.chart_text,
                self.regime,
                self.chart_json,
                page.page_helper(),
            ]
        )
        self.widget.add_class("servelab-lab")
        self.widget.add_class(f"servelab-view-{self.view}")
        for control in (
            self.batch_slider,
            self.k_slider,
            self.method_dropdown,
            self.workload_dropdown,
            self.output_len_slider,
            self.backend_dropdown,
            self.context_slider,
            self.remote_off_text,
            self.remote_on_text,
            self.model_text,
            self.draft_text,
            self.kv_cache_text,
        ):
            control.observe(self._on_control, names="value")
        self.measure_button.on_click(lambda _: self.measure())
        self.stop_button.on_click(lambda _: self.stop())
        self.drop_button.on_click(lambda _: self.drop_busy_points())
        self._sync_visibility()

    def _on_engine_toggle(self, change) -> None:
        self.engine_panel.layout.display = "" if change["new"] else "none"
        self.engine_toggle.icon = "caret-down" if change["new"] else "caret-right"

    def figure_box(self):
        import ipywidgets as w

        if not hasattr(self, "_figure_box"):
            # A block as wide as the output area: plotly sizes the chart to it, and again when the window resizes.
            self._figure_box = w.Box([], layout=w.Layout(display="block", width="100%"))
            self._figure_box.add_class("servelab-chart")
        return self._figure_box

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    # --- settings ---------------------------------------------------------------------------------
    def settings(self) -> Settings:
        """What the controls say now."""
        return Settings(
            batch_size=int(self.batch_slider.value),
            num_speculative_tokens=int(self.k_slider.value),
            method=self.method_dropdown.value,
            workload=self.workload_dropdown.value,
            output_len=int(self.output_len_slider.value),
            backend=self.backend_dropdown.value,
            remote_off_url=self.remote_off_text.value.strip(),
            remote_on_url=self.remote_on_text.value.strip(),
            model=self.model_text.value.strip(),
            draft_model=self.draft_text.value.strip(),
            kv_cache_gb=float(self.kv_cache_text.value),
            context_len=int(self.context_slider.value),
        )

    def prediction_vs_result(self, prediction: dict):
        """Your predicted crossovers (this machine; an H200 at your context) against the measured and simulated ones."""
        from . import predict

        return predict.Shown(predict.compare(prediction, self.book, self.sims, self.settings()))

    def set(self, **values) -> None:
        """Set controls by Settings field name (batch_size=64, method="routed", ...); each change redraws."""
        names = {
            "batch_size": self.batch_slider,
            "num_speculative_tokens": self.k_slider,
            "k": self.k_slider,
            "method": self.method_dropdown,
            "workload": self.workload_dropdown,
            "output_len": self.output_len_slider,
            "backend": self.backend_dropdown,
            "remote_off_url": self.remote_off_text,
            "remote_on_url": self.remote_on_text,
            "model": self.model_text,
            "draft_model": self.draft_text,
            "kv_cache_gb": self.kv_cache_text,
            "context_len": self.context_slider,
        }
        for name, value in values.items():
            if name not in names:
                raise TypeError(f"No control named {name!r}; use one of {', '.join(names)}.")
            names[name].value = value

    def _on_control(self, change) -> None:
        self._sync_visibility()
        if self.state in ("idle", "simulated", "offline", "stopped"):
            self._idle_status()
        self.redraw()

    def _sync_visibility(self) -> None:
        backend = self.backend_dropdown.value
        self.remote_box.layout.display = "" if backend == "remote" else "none"
        self.engine_box.layout.display = "" if backend == "local" else "none"
        # this machine's context is its workload's; only the simulated GPUs take one from the control
        self.context_slider.layout.display = "" if backend in GPU_BACKENDS else "none"
        self.measure_button.disabled = bool(self.offline) or backend in GPU_BACKENDS

    # --- drawing ------------------------------------------------------------------------------------
    def redraw(self) -> drawing.Drawing:
        """Redraw charts and regime text from stored and simulated points (never measures)."""
        with self._draw_lock:
            s = self.settings()
            needs = self.view == "fix" or s.method in ("adaptive", "routed")
            threshold = self.threshold(s) if needs else None
            d = drawing.compute(self.view, s, self.book, self.sims, threshold)
            charts.update(self.figure, d)
            self.regime.value = f"<div class='servelab-regime-text'>{d.regime_html}</div>"
            self.chart_text.value = page.chart_text_html(drawing.summary(d), drawing.table_html(d, charts.TITLES))
            self.chart_json.value = json.dumps(self._chart_state(s, d))
            self.last_drawing = d
            self.redraws += 1
            return d

    def chart_data(self) -> dict[str, dict]:
        """{trace uid: {"name", "x", "y"}}: what the figure holds now."""
        return charts.chart_data(self.figure)

    def _chart_state(self, s: Settings, d: drawing.Drawing) -> dict:
        return {
            "view": self.view,
            "state": self.state,
            "settings": s.__dict__,
            "crossover_measured": d.crossover_measured,
            "crossover_simulated": d.crossover_simulated,
            "threshold": d.threshold,
            "redraws": self.redraws + 1,
            "traces": {uid: {"name": t.name, "x": t.x, "y": t.y} for uid, t in d.traces.items()},
        }

    def threshold(self, s: Settings) -> tuple[int, str]:
        """The largest batch that speculates under load-adaptive k and routing, and where it came from.

        Kept per (backend, k, workload, output length), so the load-adaptive engine does not
        restart on every redraw; replaced once a measured crossover exists.
        """
        from ...routing import Threshold, threshold_from_records, threshold_from_simulator

        key = (s.backend, s.k, s.workload, s.output_len, s.remote_off_url, s.remote_on_url)
        known = self._thresholds.get(key)
        if known and known[1].startswith("measured"):
            return known
        ngram = replace(s, method="ngram")
        measured = threshold_from_records(
            self.book.points(s, "none").values(), self.book.points(ngram, "ngram").values()
        )
        if measured is not None:
            t = measured
        elif known:
            return known
        else:
            sim, _ = self.sims.get(s.backend)
            if sim is not None:
                alpha, match, _ = acceptance_for(self.book, s, "ngram")
                if match is not None:
                    sim = replace(sim, ngram_match_rate=match)
                t = threshold_from_simulator(sim, s.k, "ngram", alpha)
            else:
                t = Threshold(4, "a first guess until both curves are measured")
        self._thresholds[key] = (t.batch_size, t.source)
        return self._thresholds[key]

    # --- status ----------------------------------------------------------------------------------------
    def _set_status(self, state: str, text: str, detail: str = "") -> None:
        self.state, self.status_text = state, text
        self.status.value = page.status_line_html(state, text, detail, "engine log")

    def _idle_status(self) -> None:
        s = self.settings()
        if self.offline:
            self._set_status(
                "offline",
                f"{self.offline}: the charts show recorded measurements "
                f"({self.book.recorded.name}) and the simulator; the engine is never started.",
            )
        elif s.simulated:
            self._set_status("simulated", f"{s.backend} is simulated: every point is computed, nothing to measure.")
        elif self.state not in ("failed", "stopped"):
            warm = self.pool.warm() if s.backend == "local" else []
            self._set_status(
                "idle",
                "ready. Moving a control redraws from stored points; Measure runs the missing "
                "ones live." + (f" Warm engines: {', '.join(warm)}." if warm else ""),
            )

    # --- measuring --------------------------------------------------------------------------------------
    def plan(self, s: Settings | None = None) -> list[Point]:
        """The points Measure would run: every curve at each power of two up to the chosen batch, minus stored ones,
        quickest first (quickest_first), so the first live point arrives seconds after the click."""
        s = s or self.settings()
        if s.simulated:
            return []
        threshold = self.threshold(s) if self.view == "fix" or s.method in ("adaptive", "routed") else None
        points = []
        for b in [b for b in BATCHES if b <= s.batch_size]:
            for method in drawing.methods_of(self.view, s):
                if not self.book.has(s, method, b):
                    points.append(Point(s, method, b, *(threshold or (None, ""))))
        return quickest_first(points)

    def measure(self) -> list[Point]:
        """What the Measure button does: queue the missing points (the latest request replaces a waiting one)."""
        if self.offline:
            self._set_status(
                "offline", f"{self.offline}: live measurement is off here; the charts show recorded measurements."
            )
            return []
        s = self.settings()
        if s.backend == "remote" and not (s.remote_off_url and (s.remote_on_url or s.method == "none")):
            self._set_status(
                "failed",
                "Enter the URL of the server without speculation and of the one with speculation, then click Measure.",
            )
            return []
        points = self.plan(s)
        try:  # each point resolved once: its engine config and its workload; a bad one says so now, starts nothing
            plans = [resolve(p) for p in points]
            if s.backend == "local" and self.measure_point is None:
                for plan in plans:  # a missing model or a batch the KV cache cannot hold
                    plan.check()
        except (EngineConfigError, ValueError) as exc:
            self._failed(exc, 0, len(points))
            return []
        if not points:
            self._set_status(
                "idle" if not s.simulated else "simulated",
                "every point up to this batch is already measured: move the batch slider right to measure more."
                if not s.simulated
                else f"{s.backend} is simulated: nothing to measure.",
            )
            return []
        self.progress.max, self.progress.value = len(points), 0
        self.progress_label.value = f"0 of {len(points)} points"
        self._set_status("measuring", f"queued {len(points)} points up to batch {s.batch_size}.")
        self.worker.submit((self, plans))
        return points

    def drop_busy_points(self) -> int:
        """What 'Drop busy points' does: take contended points off the charts (the results store keeps them)."""
        n = self.book.drop_contended()
        self.drop_button.disabled = True
        self._refresh_simulator("local")
        self.redraw()
        if self.state not in ("measuring", "starting"):
            self._set_status(
                "idle",
                f"dropped {n} point{'s' if n != 1 else ''} measured on a busy machine; they stay in "
                f"{self.store.path}. Measure runs them again.",
            )
        return n

    # --- starting ahead -------------------------------------------------------------------------------
    def _prestarts_by_default(self) -> bool:
        """The first flip lab of a kernel that may measure on this machine's engine starts it when it opens."""
        if self.offline or self.view != "flip" or self.measure_point is not None or self._pool is not None:
            return False
        if os.environ.get("SERVELAB_PRESTART", "1").strip().lower() in ("0", "false", "no"):
            return False
        with _shared_lock:
            first = not _shared.get("prestarted")
            _shared["prestarted"] = True
        return first and self.settings().backend == "local"

    def prestart_configs(self, s: Settings | None = None) -> list:
        """The engines the first Measure at these settings needs (none for routing or load-adaptive k)."""
        s = s or self.settings()
        if s.backend != "local":
            return []
        methods = [m for m in drawing.methods_of(self.view, s) if m in ("none", "ngram", "draft_model")]
        return [engine_config(s, m) for m in methods]

    def prestart(self) -> bool:
        """Start this setting's engines in the background now, while the learner reads; Measure then finds them warm.

        It runs on the measuring thread, so a click on Measure waits for the engine being started instead of
        starting another, and cancels the starts not yet begun. A model that is missing starts nothing here:
        Measure says what to do."""
        configs = self.prestart_configs()
        try:
            for c in configs:
                c.check_files()
        except (EngineConfigError, ValueError):
            return False
        if not configs:
            return False
        self.worker.submit((self, _Prestart(configs)))
        return True

    def _prestart_run(self, configs: "_Prestart", stale) -> None:
        for config in configs:
            if stale():
                return  # a click on Measure took over: it starts what it needs
            name = describe(config)

            def starting(phase: str, seconds: float, estimate, name=name) -> None:
                est = estimate.under_load()
                late = " (longer than estimated)" if seconds > est.seconds else ""
                why = "for your Measure" if stale() else "while you read, so Measure finds it warm"
                self._set_status(
                    "starting",
                    f"starting the engine ({name}) {why}. {phase}: {seconds:.0f} s so far{late}, {est.describe()}.",
                )

            try:
                self.pool.get(config, keep=tuple(configs), on_phase=starting)
            except (EngineError, EngineConfigError, ValueError) as exc:
                self.state = "idle"
                self._set_status(
                    "idle",
                    f"the engine ({name}) did not start ahead ({str(exc).splitlines()[0]}). Measure starts it "
                    "again and says what went wrong.",
                )
                return
        self.state = "idle"
        self._idle_status()

    def stop(self) -> None:
        """Drop the waiting request, stop after the current point, and stop this kernel's engines."""
        self.worker.cancel()
        threading.Thread(target=self._stop_engines, daemon=True).start()

    def _stop_engines(self) -> None:
        self.worker.wait_idle(timeout=3600)
        self.pool.close()
        self._set_status("stopped", "engines stopped. Measure starts them again.")

    def close(self) -> None:
        """Stop measuring and stop the engines now (the kernel's exit does the same)."""
        self.worker.cancel()
        self.worker.wait_idle(timeout=3600)
        self.pool.close()

    def _measure_one(self, plan: PointPlan, what: str):
        if self.measure_point is not None:
            return self.measure_point(plan.point)
        if plan.point.settings.backend == "remote":
            return measure_remote(plan, self.remote_timeout_s)
        engine: dict[str, str] = {}

        def starting(phase: str, seconds: float, estimate) -> None:
            if self.state == "starting":  # the charts keep every stored point meanwhile: nothing is cleared
                self._set_status(
                    "starting",
                    f"{phase} ({engine.get('name', 'engine')}): {seconds:.0f} s so far, "
                    f"{estimate.describe()}. Then: {what}",
                )

        def started(name: str) -> None:
            engine.update(name=name)
            self._set_status("starting", f"starting the engine ({name}). Then: {what}")

        def ready() -> None:
            if self.state == "starting":
                self._set_status("measuring", what)

        return measure_local(plan, self.pool, on_start=started, on_phase=starting, on_ready=ready)

    def _run(self, plans: list[PointPlan], stale) -> None:
        """The worker thread: measure each resolved point, store its record at once, redraw from the store.

        Stops early when a newer click came."""
        from ...remote import RemoteError

        if isinstance(plans, _Prestart):
            return self._prestart_run(plans, stale)

        n, done = len(plans), 0
        for i, plan in enumerate(plans):
            p = plan.point
            if stale():
                self._set_status("idle", f"stopped after {done} of {n} points: a newer request took over.")
                return
            if self.book.has(p.settings, p.method, p.batch_size):
                done += 1
                continue  # measured meanwhile (by another view, or an earlier request)
            what = f"measuring {p.label} ({i + 1} of {n})."
            self._set_status("measuring", what)
            t0 = time.monotonic()
            try:
                record = self._measure_one(plan, what)
            except (EngineError, EngineConfigError, RemoteError, ValueError) as exc:
                self._failed(exc, done, n)
                if done:
                    self._refresh_simulator(p.settings.backend)
                    self.redraw()
                return
            self.store.append(record)
            self.book.add(record, "store")
            self.measured.append(record)
            done += 1
            if contended(getattr(record, "cpu_usage", {}))[0]:
                self.drop_button.disabled = False
            self.progress.value = done
            self.progress_label.value = f"{done} of {n} points ({time.monotonic() - t0:.0f} s for the last)"
            self.redraw()
        backend = plans[0].point.settings.backend
        self._refresh_simulator(backend)  # once per request: a calibration takes a while
        self.redraw()
        self.state = "idle"
        busy = [r for r in self.measured[-done:] if done and contended(getattr(r, "cpu_usage", {}))[0]]
        self._set_status(
            "idle",
            f"measured {done} of {n} points; they are in {self.store.path}. "
            + (
                f"{len(busy)} of them ran on a busy machine ({busy[-1].cpu_usage['contention']}): they are drawn "
                "as crosses and left out of the fit and the crossover; 'Drop busy points' takes them off and "
                "Measure runs them again on a quieter machine. "
                if busy
                else ""
            )
            + (
                "Warm engines: " + ", ".join(self.pool.warm()) + "."
                if self.measure_point is None and backend == "local"
                else ""
            ),
        )

    def _refresh_simulator(self, backend: str) -> None:
        try:
            self.sims.get(backend, refresh=True)
        except Exception:  # noqa: BLE001 - a failed calibration leaves the previous curve
            pass

    def _failed(self, exc: BaseException, done: int, n: int) -> None:
        message = str(exc)
        head, _, tail = message.partition("\n--- last lines of the engine log ---\n")
        if "kv_cache_gb" in head:
            head += " In the lab: 'KV cache GiB (CPU)' under 'engine: model, draft, KV cache'."
        self.error = head
        kept = f" The {done} points measured before are kept in the results store." if done else ""
        self._set_status("failed", f"{head}{kept}", getattr(exc, "log_tail", "") or tail)

    def _crashed(self, exc: BaseException) -> None:
        self._set_status(
            "failed",
            f"the measurement stopped unexpectedly: {type(exc).__name__}: {exc}. "
            "Your kernel is fine; click Measure to try again.",
        )

    # --- rep 2 ---------------------------------------------------------------------------------------------
    def record(
        self,
        method: str = "none",
        batch_size: int | None = None,
        num_speculative_tokens: int | None = None,
        workload: str | None = None,
        output_len: int | None = None,
        backend: str | None = None,
    ) -> dict:
        """The latest measured record for one setting (the controls fill what you leave out)."""
        given: dict[str, Any] = dict(
            batch_size=batch_size,
            num_speculative_tokens=num_speculative_tokens,
            workload=workload,
            output_len=output_len,
            backend=backend,
        )
        s = replace(self.settings(), **{k: v for k, v in given.items() if v is not None})
        if method not in METHODS.values():
            raise ValueError(f"method must be one of {', '.join(METHODS.values())}, not {method!r}.")
        point = self.book.points(s, method).get(s.batch_size)
        recorded = self.book.recorded_points(s, method).get(s.batch_size)
        if point is None and recorded is not None and self.offline:
            # Where nothing can be measured (nbgrader grading, CI's notebook run) the notebook still runs on the
            # course machine's recording; the record says which machine that was.
            return dict(clean(recorded), machine=recorded.get("machine") or COURSE_MACHINE)
        if point is None:
            elsewhere = (
                " The course machine's recording has this point, but rep 2 takes a measurement of your own."
                if recorded is not None
                else ""
            )
            raise LookupError(
                f"Nothing measured yet for {series_label(method, s.k)} at batch {s.batch_size} on the "
                f"{s.workload} workload with {s.output_len} output tokens ({s.backend}).{elsewhere} Set the "
                "controls to it and click Measure, then run this cell again."
            )
        return clean(point)

    def show_comparison(self, a: dict, b: dict):
        """The two settings side by side."""
        from IPython.display import HTML

        return HTML(rep2.table_html(a, b))

    def comparison(
        self,
        knob: str,
        a: dict,
        b: dict,
        slo_metric: str,
        better: int | None = None,
        conclusion: str = "",
        save: bool = True,
    ) -> dict:
        """Build the rep-2 hand-in, keep a copy next to the results store, and print it for the answer cell."""
        value = rep2.comparison(knob, a, b, slo_metric, better, conclusion)
        where = ""
        if save and not self.offline:
            where = f"  (a copy is saved in {rep2.save(value, self.store)})"
        print("# Paste this into the answer cell, then write your conclusion" + where)
        print(rep2.answer_source(value))
        return value

    def save_comparison(self, value: dict) -> None:
        """Keep the handed-in comparison next to the results store (not while grading or offline)."""
        json_ready = rep2.answer_source(value)  # raises here, in words, if it is not plain values
        del json_ready
        if self.offline:
            print(f"Not saved ({self.offline}); the answer cell holds it.")
            return
        print(f"Saved in {rep2.save(value, self.store)}.")
