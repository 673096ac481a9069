"""The spec-decode lab: move sliders, watch speculative decoding's win at batch 1 turn into a loss.

Modules, one idea each:
- points: where measured points come from (recorded file, results store), the settings, and the simulated curves
- drawing: what the charts show for one setting, computed without widgets
- charts: the plotly FigureWidget, updated in place
- engines: warm engines in a small pool, and how one point is measured on each backend
- app: the widgets and the wiring (SpecDecodeLab)
"""

from .app import SpecDecodeLab, shared_pool, shared_worker
from .points import PointBook, Settings, recorded_path

__all__ = ["SpecDecodeLab", "PointBook", "Settings", "recorded_path", "shared_pool", "shared_worker"]
