"""The spec-decode lab: move sliders, watch speculative decoding's win at batch 1 turn into a loss.

    from servelab.lab import SpecDecodeLab
    lab = SpecDecodeLab()        # the flip: the chosen method against no speculation
    lab                          # shows the controls, the Measure button, the status line and the charts
    fix = SpecDecodeLab("fix")   # every policy at once: n-gram, load-adaptive k, routing by load

Modules, one idea each:
- data: where measured points come from (recorded file, results store) and the simulated curves
- drawing: what the charts show for one setting, computed without widgets
- charts: the plotly FigureWidget, updated in place
- worker: one background thread with a one-request slot (the latest click wins)
- engines: warm engines in a small pool, and how one point is measured on each backend
- app: the widgets and the wiring
- rep2: real-world rep 2, the measured comparison the grader checks
- knoblab, knobcharts: the knob lab (every checklist knob on a real vLLM server, servelab.knobs) and
  its side-by-side charts

The labs' notebooks are built from their text sources in grading/source/ (instructor-only).

Live measurement happens only on a click on Measure, and never where
offline_reason() says why not (nbgrader's autograde, SERVELAB_OFFLINE=1).
"""

from .app import SpecDecodeLab, shared_pool, shared_worker
from .data import PointBook, Settings, offline_reason, recorded_path

__all__ = ["SpecDecodeLab", "PointBook", "Settings", "offline_reason", "recorded_path", "shared_pool", "shared_worker"]
