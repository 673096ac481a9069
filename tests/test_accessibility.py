"""The pieces of the labs' accessibility that need no browser: the charts in words, the engine start's phase
and estimate, JupyterLab's settings for learners, and the README's picture of the lab.

The browser half (axe-core, the keyboard, nothing cut off) is tests/test_browser_accessibility.py.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from servelab.lab import page
from servelab.lab.knobs import charts as knobcharts
from servelab.lab.speculation import charts, drawing, engines

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent


# --- the charts in words --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "speedups, expected",
    [
        (
            [1.3, 1.1, 0.9, 0.7],
            "n-gram k=4 is faster than no speculation up to batch 2 and slower from batch 4 "
            "(measured; best 1.30x at batch 1).",
        ),
        (
            [0.8, 0.9, 1.1, 1.2],
            "n-gram k=4 is slower than no speculation up to batch 2 and faster from batch 4 "
            "(measured; best 1.20x at batch 8).",
        ),
        (
            [1.5, 1.2, 1.1, 1.01],
            "n-gram k=4 is faster than no speculation at every measured batch from 1 to 8 "
            "(measured; best 1.50x at batch 1).",
        ),
        (
            [0.9, 0.8, 0.7, 0.6],
            "n-gram k=4 is slower than no speculation at every measured batch from 1 to 8 "
            "(measured; best 0.90x at batch 1).",
        ),
        (
            [1.2, 0.9, 1.1, 0.8],
            "n-gram k=4 is faster than no speculation at batches 1, 4 and slower at batches 2, 8 "
            "(measured; best 1.20x at batch 1).",
        ),
        (
            [1.2, 1.0, 1.0, 0.9],
            "n-gram k=4 is faster than no speculation at batch 1 and slower at batch 8 and as "
            "fast at batches 2, 4 (measured; best 1.20x at batch 1).",
        ),
    ],
)
def test_the_summary_sentence_says_where_speculation_wins_from_the_data(speedups, expected):
    assert drawing.speedup_sentence("n-gram k=4", [1, 2, 4, 8], speedups, "measured") == expected


def test_the_summary_sentence_skips_gaps_and_says_when_there_is_nothing():
    assert (
        drawing.speedup_sentence("n-gram k=4", [4, 1, 2], [0.9, float("nan"), None], "measured")
        == "n-gram k=4 is slower than no speculation at batch 4 (measured; best 0.90x at batch 4)."
    )
    assert "nothing measured yet" in drawing.speedup_sentence("n-gram k=4", [1], [None], "measured")


def _drawing() -> drawing.Drawing:
    T = drawing.Trace
    traces = {
        t.uid: t
        for t in [
            T("tok_s|0|measured", "no speculation, measured", [1, 8], [26.3, 100.6]),
            T("tok_s|1|measured", "n-gram k=4, measured", [1, 8], [39.2, 65.7]),
            T("tok_s|1|simulated", "n-gram k=4, simulated", [1, 1.5, 2, 8], [35.2, 40.0, 51.5, 70.1]),
            T("speedup|1|measured", "n-gram k=4 over no speculation, measured", [1, 8], [1.49, 0.65]),
            T("speedup|1|simulated", "n-gram k=4 over no speculation, simulated", [1, 2, 8], [1.5, 1.2, 0.72]),
            T("speedup|2|measured", "routed k=4 over no speculation, measured", [], []),
            T("speedup|2|simulated", "routed k=4 over no speculation, simulated", [1, 8], [1.5, 1.0]),
        ]
    }
    return drawing.Drawing(traces, 8, 2.6, 3.2, "", None)


def test_the_chart_summary_prefers_measured_points_and_falls_back_to_the_simulator():
    text = drawing.summary(_drawing())
    assert text.startswith(
        "Speedup panel: n-gram k=4 is faster than no speculation up to batch 1 and slower from "
        "batch 8 (measured; best 1.49x at batch 1; crossover at batch 2.6)."
    )
    assert (
        "routed k=4 is faster than no speculation at batch 1 and as fast at batch 8 (simulated; best 1.50x at batch 1)."
    ) in text  # nothing measured for routed: the simulator
    # every panel in words at the chosen batch, the measured value where there is one
    assert "Output tok/s at batch 8: no speculation 101 (measured), n-gram k=4 65.7 (measured)." in text


@pytest.fixture(scope="module")
def book_and_sims():
    from servelab.lab.speculation.points import PointBook, Simulators

    book = PointBook(read_store=False)  # the recorded points only, as a fresh checkout has them
    sims = Simulators(book)
    sims.get("local")  # this CPU's simulator, calibrated once here (about 1 s), not in the first test that draws
    return book, sims


def _summary_for(book_and_sims, view="flip", **settings) -> str:
    from servelab.lab.speculation.points import Settings

    return drawing.summary(drawing.compute(view, Settings(**settings), *book_and_sims))


@pytest.mark.unit(False)  # builds the lab's charts: about 1 s of CPU
def test_a_simulated_summary_names_only_the_sliders_batches_and_the_charts_crossover(book_and_sims):
    # batch 256, k=8, output 128: nothing measured there, the simulator's curve runs through 1.19, 1.41, ...
    from servelab.lab.speculation.points import Settings

    settings = Settings(batch_size=256, num_speculative_tokens=8, output_len=128)
    marked = drawing.compute("flip", settings, *book_and_sims).crossover_simulated  # the batch the chart marks
    text = drawing.summary(drawing.compute("flip", settings, *book_and_sims))
    assert "up to batch 2 and slower from batch 4 (simulated" in text, text
    assert marked is not None and 2 < marked < 4, marked  # between the last faster and the first slower batch
    assert f"crossover at batch {marked:.3g}" in text, text
    assert "2.8284" not in text and "3.3636" not in text


def test_every_batch_a_summary_names_is_one_the_slider_has(book_and_sims):
    import re

    from servelab.lab.speculation.points import BATCHES

    for view, method in (("flip", "routed"), ("flip", "adaptive"), ("fix", "ngram")):
        text = _summary_for(book_and_sims, view=view, method=method, num_speculative_tokens=8, output_len=128)
        said = re.sub(r"crossover at batch [\d.]+", "", text)  # the chart's own label, interpolated on purpose
        named = set()
        for run in re.findall(r"batch(?:es)? ([\d.]+(?:, [\d.]+)*)", said):
            named |= {float(n) for n in run.split(", ")}
        assert named and named <= set(BATCHES), (method, text)


def test_with_speculation_off_the_summary_speaks_of_the_baseline_it_draws(book_and_sims):
    text = _summary_for(book_and_sims, method="none")
    assert text.startswith(
        "No speculating series is drawn, so there is no speedup to show. Output tok/s at batch 8: no speculation "
    ), text
    assert ": :" not in text and "nothing measured or simulated" not in text


def test_a_summary_with_nothing_drawn_says_what_to_do():
    empty = drawing.Drawing({"speedup|1|measured": drawing.Trace("speedup|1|measured", "")}, 8, None, None, "", None)
    assert drawing.summary(empty) == "Nothing is measured or simulated for this setting yet: press Measure."


def test_the_data_table_holds_every_number_at_the_sliders_batches():
    html = drawing.table_html(_drawing(), charts.TITLES, rows_at=(1, 2, 8))
    assert "<caption>Output tok/s (all requests)</caption>" in html
    assert "<th scope='col'>n-gram k=4, measured</th>" in html and "<th scope='row'>8</th>" in html
    for value in ("26.3", "101", "39.2", "65.7", "51.5", "1.49", "0.65"):
        assert f"<td>{value}</td>" in html, value
    assert "<td>40</td>" not in html  # the simulator's in-between batch 1.5 is drawn, not tabled
    assert "<th scope='row'>2</th><td>–</td><td>–</td><td>51.5</td>" in html  # not measured at 2: a dash
    wrapped = page.chart_text_html("A sentence.", html)
    assert wrapped.startswith("<p class='servelab-chart-summary'><b>In words:</b> A sentence.</p><details>")


def test_the_knob_summary_names_the_better_setting_per_metric():
    a = {"ttft_ms_p50": 380.6, "ttft_ms_p99": 381.8, "tpot_ms_p50": 42.7, "output_tok_s": 311.4}
    b = {"ttft_ms_p50": 1456.0, "ttft_ms_p99": 2710.0, "tpot_ms_p50": 38.7, "output_tok_s": 98.3}
    text = knobcharts.summary((a, b), ("max_num_seqs=256", "max_num_seqs=4"))
    assert "max_num_seqs=256 has the lower TTFT p50 (380.6 against 1456 ms for max_num_seqs=4)." in text
    assert "max_num_seqs=4 has the lower TPOT p50 (38.7 against 42.7 ms for max_num_seqs=256)." in text
    assert "max_num_seqs=256 has the higher Output tok/s (311.4 against 98.3 for max_num_seqs=4)." in text
    assert "Not measured yet for this load: b." in knobcharts.summary((a, None), ("a", "b"))
    table = knobcharts.table_html((a, None), ("a", "b"))
    assert "<td>380.6</td><td>not measured</td>" in table


def test_series_differ_by_more_than_colour_in_a_colour_blind_safe_palette():
    fig = charts.build("fix")
    by_uid = {t.meta: t for t in fig.data}
    symbols = {by_uid[f"tok_s|{s}|measured"].marker.symbol for s in range(4)}
    dashes = {by_uid[f"tok_s|{s}|simulated"].line.dash for s in range(4)}
    assert len(symbols) == 4 and len(dashes) == 4
    assert {c.upper() for c in charts.COLORS} <= {
        "#0072B2",
        "#D55E00",
        "#009E73",
        "#CC79A7",
        "#E69F00",
        "#56B4E9",
        "#F0E442",
        "#000000",
    }  # Okabe-Ito
    for slot in range(4):  # measured: filled; simulated: the same shape, open
        assert (
            by_uid[f"tok_s|{slot}|simulated"].marker.symbol == by_uid[f"tok_s|{slot}|measured"].marker.symbol + "-open"
        )


# --- the engine start: its phase and how long it takes here ------------------------------------------------------
def test_the_start_phase_is_read_from_vllms_log():
    assert engines.start_phase("") == "starting the engine"
    assert engines.start_phase("INFO ... Starting to load model /m...") == "loading the model"
    assert (
        engines.start_phase("Starting to load model\nModel loading took 0.3 GiB and 2.1 seconds")
        == "preparing the KV cache"
    )
    assert engines.start_phase("... init engine (profile, create kv cache, warmup model) took 9.2 s") == "warming up"


def test_the_estimate_is_the_median_of_this_machines_recorded_starts(tmp_path):
    path = tmp_path / "starts.jsonl"
    plain, spec = engines.EngineConfig(), engines.EngineConfig(spec_method="ngram", num_speculative_tokens=4)
    first = engines.start_estimate(plain, path)
    assert first.starts == 0 and first.seconds == engines.START_SECONDS[False]
    assert "no start recorded on it yet" in first.describe()
    assert f"this machine has {engines._machine()['cores']}" in first.describe()  # its own cores, not a constant
    for seconds in (30, 50, 40):
        engines.record_start(plain, seconds, path)
    engines.record_start(spec, 70, path)
    with open(path, "a") as f:
        f.write("{torn line\n")
        f.write(json.dumps({"seconds": 1, "host": "another-machine", "cores": 2, "speculating": False}) + "\n")
    estimate = engines.start_estimate(plain, path)
    assert (estimate.seconds, estimate.starts) == (40, 3)
    assert estimate.describe() == "about 40 s, the median of the last 3 non-speculating engine starts on this machine"
    assert engines.start_estimate(spec, path).seconds == 70
    # Before a first speculating start, the other kind's starts stand in, and the sentence says so.
    only_plain = tmp_path / "plain.jsonl"
    engines.record_start(plain, 30, only_plain)
    stand_in = engines.start_estimate(spec, only_plain)
    assert (stand_in.seconds, stand_in.other_kind) == (30, True)
    assert stand_in.describe() == (
        "about 30 s, as the one non-speculating engine start recorded took on this "
        "machine; no speculating engine has started here yet"
    )


def test_the_knob_summary_with_one_setting_twice_asks_for_another():
    assert (
        knobcharts.summary((None, None), ("tp=2", "tp=2"))
        == "Both settings are tp=2: pick another setting b to compare two."
    )


def test_the_data_table_scrolls_in_a_box_the_keyboard_reaches_and_status_changes_are_announced():
    wrapped = page.chart_text_html("A sentence.", "<table></table>")
    assert (
        "<div class='servelab-table-scroll' role='region' tabindex='0' aria-label=\"The chart's data\" "
        "style='display:block;max-width:100%;overflow-x:auto'><table></table></div>"
    ) in wrapped
    # the page helper makes the status line and the charts in words live regions (both labs give these classes)
    assert page.LIVE_REGIONS == (".servelab-lab .servelab-status", ".servelab-lab .servelab-chart-text")
    assert "'.servelab-lab .servelab-status, .servelab-lab .servelab-chart-text'" in page.PAGE_HELPER_JS
    assert "setAttribute('role', 'status')" in page.PAGE_HELPER_JS


class _SlowStart:
    """An engine whose start logs what vLLM logs, a phase at a time, and never runs a model."""

    def __init__(self, config, log_path: Path, step_s: float = 1.3):
        self.config, self.log_path, self.step_s, self.info = config, log_path, step_s, {}
        self.alive = False

    def is_alive(self):
        return self.alive

    def start(self):
        for line in ("Starting to load model bundled...", "Model loading took 0.26 GiB and 1.2 seconds"):
            with open(self.log_path, "a") as f:
                f.write(line + "\n")
            time.sleep(self.step_s)
        self.alive = True

    def generate(self, prompts, max_tokens):
        return None

    def stop(self):
        self.alive = False


@pytest.mark.unit(False)  # waits through its stand-in engine's 2 s start
def test_a_start_reports_its_phases_and_a_real_one_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVELAB_CACHE", str(tmp_path))
    log = tmp_path / "engine.log"
    log.write_text("an earlier start's lines: init engine (profile, create kv cache, warmup model) took 9 s\n")
    seen, lock = [], threading.Lock()

    def on_phase(phase, seconds, estimate):
        with lock:
            seen.append((phase, estimate.starts))

    pool = engines.EnginePool(engine_factory=lambda c: _SlowStart(c, log), record_starts=True)
    pool.get(engines.EngineConfig(), on_phase=on_phase)
    phases = [p for p, _ in seen]
    assert phases[0] == "starting the engine" or phases[0] == "loading the model"  # the old lines are skipped
    assert "loading the model" in phases and "preparing the KV cache" in phases
    assert phases.index("loading the model") < phases.index("preparing the KV cache")
    assert all(starts == 0 for _, starts in seen)  # nothing recorded before this first start
    recorded = [json.loads(line) for line in engines.starts_path().read_text().splitlines()]
    assert len(recorded) == 1 and recorded[0]["seconds"] >= 2 and recorded[0]["speculating"] is False
    assert engines.start_estimate(engines.EngineConfig()).starts == 1
    # A stand-in engine (any factory but the real Engine) teaches the estimate nothing by default.
    assert engines.EnginePool(engine_factory=lambda c: _SlowStart(c, log, 0)).record_starts is False


# --- JupyterLab for learners ----------------------------------------------------------------------------------------
def test_learners_jupyterlab_never_asks_about_news(tmp_path):
    """install_lab_settings writes where JupyterLab itself reads overrides, a value its schema accepts."""
    from jupyterlab_server.settings_utils import _get_overrides

    from servelab import launch

    path = launch.install_lab_settings(tmp_path)
    assert path == launch.lab_settings_path(tmp_path) and path.exists()
    overrides, error = _get_overrides(str(tmp_path / "share" / "jupyter" / "lab" / "settings"))
    assert not error
    news = overrides["@jupyterlab/apputils-extension:notification"]
    assert news["fetchNews"] == "false" and news["checkForUpdates"] is False
    schema = json.loads(
        (
            Path(sys.prefix)
            / "share"
            / "jupyter"
            / "lab"
            / "schemas"
            / "@jupyterlab"
            / "apputils-extension"
            / "notification.json"
        ).read_text()
    )
    never = {c["const"]: c["title"] for c in schema["properties"]["fetchNews"]["oneOf"]}["false"]
    assert never == "Never"  # the default, "none", is "Ask": the pop-up
    assert launch.install_lab_settings(tmp_path) == path  # a second start leaves it as it is


def test_a_read_only_environment_only_loses_the_setting(tmp_path, capsys):
    from servelab import launch

    blocker = tmp_path / "share"
    blocker.write_text("not a folder")
    assert launch.install_lab_settings(tmp_path) is None
    assert "JupyterLab will ask about its news once" in capsys.readouterr().out


# --- the README ------------------------------------------------------------------------------------------------
def test_the_readme_opens_with_the_lab_as_a_learner_sees_it():
    opening = "\n".join((REPO / "README.md").read_text().splitlines()[:15])
    assert "](docs/lab.png)" in opening, "the README's opening shows no picture of the lab"
    alt = opening.split("![", 1)[1].split("](docs/lab.png)", 1)[0]
    assert len(alt.split()) >= 10, f"the screenshot's alt text says too little: {alt!r}"
    assert "test-artifacts/screenshots/readme-lab.png" in opening  # where the browser test writes it
    png = (REPO / "docs" / "lab.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
