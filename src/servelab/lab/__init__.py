"""The course's two labs: move sliders, watch speculative decoding's win at batch 1 turn into a loss; pick a
checklist knob and compare two settings of it on a real vLLM server.

    from servelab.lab import SpecDecodeLab
    lab = SpecDecodeLab()        # the flip: the chosen method against no speculation
    lab                          # shows the controls, the Measure button, the status line and the charts
    fix = SpecDecodeLab("fix")   # every policy at once: n-gram, load-adaptive k, routing by load

    from servelab.lab import KnobLab
    knob_lab = KnobLab()         # two settings of one knob, side by side

Subpackages, one lab each:
- speculation: the spec-decode lab (SpecDecodeLab)
- knobs: the knob lab (KnobLab: every checklist knob on a real vLLM server, servelab.knobs)

Modules both labs use, one idea each:
- common: when live measurement is allowed (offline_reason), a record as a learner hands it in (clean)
- page: the status line, a chart's text alternative, and the page helper for keyboard and screen-reader users
- worker: one background thread with a one-request slot (the latest click wins)
- rep2: real-world rep 2, the measured comparison the grader checks

The labs' notebooks are built from their text sources in grading/source/ (instructor-only).

Live measurement happens only on a click on Measure, and never where
offline_reason() says why not (nbgrader's autograde, SERVELAB_OFFLINE=1).
"""

from .common import offline_reason
from .knobs import KnobLab
from .speculation import PointBook, Settings, SpecDecodeLab, recorded_path, shared_pool, shared_worker

__all__ = [
    "SpecDecodeLab",
    "KnobLab",
    "PointBook",
    "Settings",
    "offline_reason",
    "recorded_path",
    "shared_pool",
    "shared_worker",
]
