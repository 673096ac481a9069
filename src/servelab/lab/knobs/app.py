"""The knob lab: pick a checklist knob and two settings, a workload and a load, click Measure.

    from servelab.lab import KnobLab
    lab = KnobLab()              # servers for the default knob start in the background (unless offline)
    lab                          # controls, Measure, status, charts

Each setting is a real OpenAI-compatible vLLM server on this machine, kept warm
and reused; a click runs vLLM's serving benchmark against setting a, then b,
with the server's /metrics counters, and each record lands in the results store
the moment it exists. Offline (nbgrader's autograde, SERVELAB_OFFLINE) the
charts show the recorded benchmark (data/measurements/knobs-cpu.jsonl) and
nothing starts.
"""

from __future__ import annotations

import html
import json
import threading
import time

from ... import knobs
from ...provenance import COURSE_MACHINE
from ...results import ResultsStore
from .. import rep2
from ..common import clean, offline_reason
from ..page import chart_text_html, page_helper, status_line_html
from ..worker import LatestRequestWorker
from . import charts

LOADS = {"users": "fixed number of users (max concurrency)", "rate": "Poisson arrivals (request rate)"}


def matches(record: dict, plan: knobs.Plan) -> bool:
    """Was this record measured for exactly this plan (knob, setting, workload and load)?"""
    load = plan.load
    return (
        record.get("knob") == plan.knob
        and record.get("knob_setting") == plan.setting
        and record.get("workload") == plan.workload.name
        and record.get("output_len") == load.output_len
        and record.get("request_rate") == load.request_rate
        and record.get("max_concurrency") == load.max_concurrency
        and record.get("num_requests") == load.num_prompts
    )


class KnobLab:
    """Controls, a Measure button and side-by-side charts for two settings of one knob."""

    def __init__(
        self,
        knob: str = "batching",
        *,
        store: ResultsStore | None = None,
        recorded=None,
        offline: str | None = None,
        pool: knobs.ServerPool | None = None,
        runner: knobs.BenchRunner | None = None,
        start_servers: bool = True,
    ):
        if knob not in knobs.KNOBS:
            raise knobs.KnobError(f"No knob named {knob!r}: choose one of {', '.join(knobs.KNOBS)}.")
        self.offline = offline_reason() if offline is None else offline
        self.store = store if store is not None else ResultsStore()
        self.recorded = ResultsStore(recorded if recorded is not None else knobs.recorded_path())
        self.pool = pool or knobs.ServerPool(size=2)
        self.runner = runner or knobs.BenchRunner()
        self.worker = LatestRequestWorker(
            lambda plans, stale: self._run(plans, stale), lambda plans, exc: self._failed(exc), name="servelab-knob-lab"
        )
        self.state, self.status_text, self.error = "idle", "", ""
        self.measured: list[dict] = []
        self.redraws = 0
        self._info: dict | None = None
        self._lock = threading.RLock()
        self._build_widgets(knob)
        self.figure = charts.build()
        self._figure_box.children = (self.figure,)
        self._idle_status()
        self.redraw()
        if start_servers and not self.offline:
            self.warm_up()

    # --- widgets --------------------------------------------------------------------------------
    def _build_widgets(self, knob: str) -> None:
        """The knob's controls, in the order the page shows them. One piece: it is the page's layout read top to
        bottom, each control beside the ones it sits with; split, one layout would live in several functions."""
        import ipywidgets as w

        k = knobs.KNOBS[knob]
        wide = {"description_width": "150px"}

        # Each control its own Layout (one shared Layout would hide them all when one is hidden), as wide as
        # the output area allows up to 470px: nothing runs off the right edge at 1024 px or at 200% zoom.
        def full():
            return w.Layout(width="calc(100% - 4px)", max_width="470px")

        self.knob_dropdown = w.Dropdown(
            options=[(v.title, n) for n, v in knobs.KNOBS.items()],
            value=knob,
            description="knob",
            style=wide,
            layout=w.Layout(width="calc(100% - 4px)", max_width="620px"),
        )
        self.a_dropdown = w.Dropdown(
            options=k.setting_names, value=k.setting_names[0], description="setting a", style=wide, layout=full()
        )
        self.b_dropdown = w.Dropdown(
            options=k.setting_names, value=k.setting_names[1], description="setting b", style=wide, layout=full()
        )
        self.workload_dropdown = w.Dropdown(
            options=list(knobs.workloads()), value=k.workload, description="workload", style=wide, layout=full()
        )
        self.load_toggle = w.ToggleButtons(
            options=[(v, n) for n, v in LOADS.items()],
            value="rate" if k.load.request_rate else "users",
            description="load",
            style={**wide, "button_width": "auto"},
            layout=w.Layout(flex_flow="row wrap"),
        )
        self.users_slider = w.IntSlider(
            value=k.load.max_concurrency or 20, min=1, max=64, description="users", style=wide, layout=full()
        )
        self.rate_slider = w.FloatSlider(
            value=k.load.request_rate or 2.0,
            min=0.25,
            max=16,
            step=0.25,
            description="requests / s",
            style=wide,
            layout=full(),
        )
        self.prompts_slider = w.IntSlider(
            value=k.load.num_prompts, min=1, max=200, description="requests", style=wide, layout=full()
        )
        self.output_len_slider = w.IntSlider(
            value=k.load.output_len, min=1, max=256, description="output tokens", style=wide, layout=full()
        )
        self.slo_dropdown = w.Dropdown(
            options=list(rep2.SLO_METRICS), value=k.slo_metric, description="SLO metric", style=wide, layout=full()
        )
        self.slo_text = w.FloatText(value=k.slo_value, description="SLO value", style=wide, layout=full())
        self.measure_button = w.Button(
            description="Measure",
            button_style="primary",
            icon="play",
            tooltip="Measure both settings under this load, live",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.stop_button = w.Button(
            description="Stop servers", icon="stop", layout=w.Layout(width="auto", flex="0 0 auto")
        )
        self.progress = w.IntProgress(value=0, min=0, max=2, layout=w.Layout(width="200px", max_width="100%"))
        self.status = w.HTML(value="")
        self.about = w.HTML(value="")
        self.chart_text = w.HTML(value="")  # the chart in words: a summary and the data as a table
        self.chart_json = w.HTML(value="", layout=w.Layout(display="none"))
        # A block as wide as the output area: plotly sizes the chart to it, and again when the window resizes.
        self._figure_box = w.Box([], layout=w.Layout(display="block", width="100%"))
        for widget, css in [
            (self.knob_dropdown, "servelab-knob"),
            (self.a_dropdown, "servelab-setting-a"),
            (self.b_dropdown, "servelab-setting-b"),
            (self.workload_dropdown, "servelab-knob-workload"),
            (self.load_toggle, "servelab-load"),
            (self.users_slider, "servelab-users"),
            (self.rate_slider, "servelab-rate"),
            (self.measure_button, "servelab-measure"),
            (self.status, "servelab-status"),
            (self.chart_json, "servelab-chart-data"),
            (self._figure_box, "servelab-chart"),
            (self.chart_text, "servelab-chart-text"),
            (self.stop_button, "servelab-stop"),
        ]:
            widget.add_class(css)
            widget.add_class("servelab-view-knobs")
        self.knob_dropdown.observe(self._on_knob, names="value")
        # the controls under the knob, in the order they are shown; each redraws the plan when it changes
        inputs = (
            self.a_dropdown,
            self.b_dropdown,
            self.workload_dropdown,
            self.load_toggle,
            self.users_slider,
            self.rate_slider,
            self.prompts_slider,
            self.output_len_slider,
            self.slo_dropdown,
            self.slo_text,
        )
        for control in inputs:
            control.observe(lambda _: self._on_control(), names="value")
        self.measure_button.on_click(lambda _: self.measure())
        self.stop_button.on_click(lambda _: self.close())
        controls = w.VBox([self.knob_dropdown, *inputs])
        bar = w.HBox([self.measure_button, self.stop_button, self.progress], layout=w.Layout(flex_flow="row wrap"))
        self.widget = w.VBox(
            [controls, bar, self.status, self._figure_box, self.chart_text, self.about, self.chart_json, page_helper()]
        )
        self.widget.add_class("servelab-lab")
        self.widget.add_class("servelab-view-knobs")
        self._sync()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    def _sync(self) -> None:
        rate = self.load_toggle.value == "rate"
        self.rate_slider.layout.display = "" if rate else "none"
        self.users_slider.layout.display = "none" if rate else ""
        self.measure_button.disabled = bool(self.offline)

    def _on_knob(self, change) -> None:
        """A new knob brings its own settings, workload, load and SLO (each of which can then be changed)."""
        k = knobs.KNOBS[change["new"]]
        with self._lock:
            self._quiet = True
            try:
                self.a_dropdown.options = self.b_dropdown.options = k.setting_names
                self.a_dropdown.value, self.b_dropdown.value = k.setting_names[0], k.setting_names[1]
                self.workload_dropdown.value = k.workload
                self.load_toggle.value = "rate" if k.load.request_rate else "users"
                if k.load.request_rate:
                    self.rate_slider.value = k.load.request_rate
                if k.load.max_concurrency:
                    self.users_slider.value = k.load.max_concurrency
                self.prompts_slider.value = k.load.num_prompts
                self.output_len_slider.value = k.load.output_len
                self.slo_dropdown.value, self.slo_text.value = k.slo_metric, k.slo_value
            finally:
                self._quiet = False
        self._on_control()
        if not self.offline:
            self.warm_up()

    def _on_control(self) -> None:
        if getattr(self, "_quiet", False):
            return
        self._sync()
        if self.state in ("idle", "offline", "failed", "stopped"):
            self._idle_status()
        self.redraw()

    # --- settings -> plans ---------------------------------------------------------------------
    def load(self) -> knobs.Load:
        rate = self.load_toggle.value == "rate"
        return knobs.Load(
            num_prompts=int(self.prompts_slider.value),
            output_len=int(self.output_len_slider.value),
            request_rate=float(self.rate_slider.value) if rate else None,
            max_concurrency=None if rate else int(self.users_slider.value),
        )

    def plans(self) -> tuple[knobs.Plan, knobs.Plan]:
        """Setting a and setting b, resolved once: server arguments, workload, load."""
        load, wl, knob = self.load(), self.workload_dropdown.value, self.knob_dropdown.value
        return (
            knobs.resolve(knob, self.a_dropdown.value, wl, load),
            knobs.resolve(knob, self.b_dropdown.value, wl, load),
        )

    def set(self, **values) -> None:
        """Set controls by name (knob=..., a=..., b=..., workload=..., users=..., rate=..., requests=...)."""
        names = {
            "knob": self.knob_dropdown,
            "a": self.a_dropdown,
            "b": self.b_dropdown,
            "workload": self.workload_dropdown,
            "load": self.load_toggle,
            "users": self.users_slider,
            "rate": self.rate_slider,
            "requests": self.prompts_slider,
            "output_len": self.output_len_slider,
            "slo_metric": self.slo_dropdown,
            "slo_value": self.slo_text,
        }
        for name, v in values.items():
            if name not in names:
                raise TypeError(f"No control named {name!r}; use one of {', '.join(names)}.")
            names[name].value = v

    # --- records ---------------------------------------------------------------------------------
    def find(self, plan: knobs.Plan) -> dict | None:
        """The newest record for a plan: your results store first, then the recorded benchmark."""
        for source in (self.store, self.recorded):
            found = [r for r in source.read() if matches(r, plan)]
            if found:
                return found[-1]
        return None

    def records(self) -> tuple[dict | None, dict | None]:
        a, b = self.plans()
        return self.find(a), self.find(b)

    def redraw(self) -> None:
        with self._lock:
            a, b = self.plans()
            ra, rb = self.find(a), self.find(b)
            slo_metric, slo_value = self.slo_dropdown.value, float(self.slo_text.value or 0)
            charts.update(self.figure, (ra, rb), (a.setting, b.setting), slo_metric, slo_value)
            self.about.value = self._about_html(a, ra, rb, slo_metric, slo_value)
            names = (a.setting, b.setting)
            self.chart_text.value = chart_text_html(charts.summary((ra, rb), names), charts.table_html((ra, rb), names))
            self.redraws += 1
            self.chart_json.value = json.dumps(
                {
                    "view": "knobs",
                    "state": self.state,
                    "knob": a.knob,
                    "settings": [a.setting, b.setting],
                    "redraws": self.redraws,
                    "traces": charts.chart_data(self.figure),
                }
            )

    def chart_data(self) -> dict[str, dict]:
        return charts.chart_data(self.figure)

    def _about_html(self, plan: knobs.Plan, ra, rb, metric: str, slo: float) -> str:
        k = knobs.KNOBS[plan.knob]
        parts = [
            f"<b>{html.escape(k.title)}</b>. Workload: {html.escape(plan.workload.description)}. "
            f"Load: {html.escape(plan.load.describe())}."
        ]
        if k.note:
            parts.append(html.escape(k.note))
        if ra and rb:
            va, vb = ra.get(metric), rb.get(metric)
            if isinstance(va, (int, float)) and isinstance(vb, (int, float)):
                parts.append(f"{metric}: {va:.4g} (a) against {vb:.4g} (b)" + (f"; SLO {slo:g}" if slo else "") + ".")
        elif not (ra or rb):
            parts.append("Nothing measured for this load yet: click Measure.")
        return "<div class='servelab-knob-about'>" + " ".join(parts) + "</div>"

    # --- servers in the background -----------------------------------------------------------------
    def warm_up(self) -> threading.Thread | None:
        """Start the harness helper and both settings' servers in the background (never while offline)."""
        if self.offline:
            return None
        self.runner.start()
        plans = list(self.plans())
        thread = self.pool.start_in_background(plans)
        if self.state == "idle":
            self._set_status(
                "starting",
                "starting a vLLM server for each setting in the background (30-60 s "
                "each on 2 cores); Measure works now and waits for them.",
            )
            threading.Thread(target=self._announce_ready, args=(thread,), daemon=True).start()
        return thread

    def _announce_ready(self, thread: threading.Thread) -> None:
        thread.join()
        if self.state == "starting":
            self.state = "idle"
            self._idle_status()

    # --- measuring ------------------------------------------------------------------------------------
    def measure(self) -> list[knobs.Plan]:
        """What the Measure button does: both settings under this load, in the background."""
        if self.offline:
            self._set_status(
                "offline", f"{self.offline}: live measurement is off here; the charts show the recorded benchmark."
            )
            return []
        try:
            plans = list(self.plans())
        except knobs.KnobError as exc:
            self._failed(exc)
            return []
        self.progress.max, self.progress.value = len(plans), 0
        self._set_status("measuring", f"queued {plans[0].setting} and {plans[1].setting}.")
        self.worker.submit(plans)
        return plans

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the measurement in flight is done (tests, the benchmark)."""
        return self.worker.wait_idle(timeout)

    def _run(self, plans: list[knobs.Plan], stale) -> None:
        from ...server import ServerError

        for i, plan in enumerate(plans):
            if stale():
                return
            self._set_status(
                "measuring",
                f"{plan.setting}: waiting for its server, then vLLM's serving benchmark ({plan.load.describe()}).",
            )
            try:
                record = knobs.measure(plan, self.pool, self.runner, self.info(), self.store).to_dict()
            except (ServerError, knobs.KnobError, OSError) as exc:
                self._failed(exc)
                return
            self.measured.append(record)
            self.progress.value = i + 1
            self.redraw()
        self._set_status(
            "idle", f"measured {plans[0].setting} and {plans[1].setting}; the records are in {self.store.path}."
        )

    def info(self) -> dict:
        if self._info is None:
            self._info = knobs.machine_info(self.pool.model)
        return self._info

    def close(self) -> None:
        """Stop measuring and stop the servers (the kernel's exit does the same)."""
        self.worker.cancel()
        self.worker.wait_idle(timeout=600)
        self.pool.close()
        self.runner.close()
        self._set_status("stopped", "servers stopped. Measure starts them again.")

    # --- status -----------------------------------------------------------------------------------------
    def _set_status(self, state: str, text: str, detail: str = "") -> None:
        self.state, self.status_text = state, text
        self.status.value = status_line_html(state, text, detail, "server log")

    def _idle_status(self) -> None:
        if self.offline:
            self._set_status(
                "offline",
                f"{self.offline}: the charts show the recorded benchmark "
                f"({self.recorded.path.name}); no server is started.",
            )
        elif self.state not in ("failed", "stopped", "starting"):
            self._set_status(
                "idle", "ready. Moving a control redraws from stored records; Measure runs both settings live."
            )

    def _failed(self, exc: BaseException) -> None:
        self.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self._set_status(
            "failed",
            f"{self.error} Your kernel is fine; change the setting or click Measure again.",
            getattr(exc, "log_tail", ""),
        )

    # --- rep 2 --------------------------------------------------------------------------------------------
    def record(self, setting: str) -> dict:
        """The newest record of one setting of this knob under the current workload and load."""
        plan = knobs.resolve(self.knob_dropdown.value, setting, self.workload_dropdown.value, self.load())
        found = self.find(plan)
        if found is None:
            raise LookupError(
                f"Nothing measured yet for {plan.knob}: {setting} under this load "
                f"({plan.load.describe()}). Click Measure, then run this cell again."
            )
        return clean(found)

    def comparison(
        self, a: dict, b: dict, slo_metric: str | None = None, better: int | None = None, conclusion: str = ""
    ) -> dict:
        """The rep-2 hand-in for two records of this knob, printed for the answer cell."""
        value = rep2.comparison(
            self.knob_dropdown.value, a, b, slo_metric or self.slo_dropdown.value, better, conclusion
        )
        print("# Paste this into the answer cell, then write your conclusion")
        print(rep2.answer_source(value))
        return value

    def prediction_vs_result(self, knob: str, prediction: dict):
        """Your predicted factors for one knob's section against the result: your own records of its settings
        under the knob's load when you measured them, else the course machine's recording (or the simulator)."""
        from . import predict

        def find(setting: str) -> tuple[dict | None, str]:
            plan = knobs.resolve(knob, setting)
            for source, where in ((self.store, "measured here"), (self.recorded, COURSE_MACHINE)):
                found = [r for r in source.read() if matches(r, plan)]
                if found:
                    return found[-1], where
            return None, "not measured"

        return predict.Shown(predict.compare(knob, prediction, find, knobs.noise_band()))

    def show_comparison(self, a: dict, b: dict):
        from IPython.display import HTML

        return HTML(rep2.table_html(a, b))


def time_first_point(lab: KnobLab, timeout: float = 900.0) -> float:
    """Seconds from a click on Measure to the first record of setting a (the benchmark's measure)."""
    before = len(lab.measured)
    t0 = time.monotonic()
    lab.measure()
    deadline = t0 + timeout
    while len(lab.measured) == before and time.monotonic() < deadline and lab.state != "failed":
        time.sleep(0.1)
    return round(time.monotonic() - t0, 2)
