"""The knob lab: every checklist knob on a real vLLM server (servelab.knobs), two settings side by side.

Modules:
- app: the widgets and the wiring (KnobLab)
- charts: the side-by-side plotly FigureWidget and the chart in words
"""

from .app import KnobLab

__all__ = ["KnobLab"]
