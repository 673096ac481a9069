"""bench/ridge_cpu.py's knee: the ridge read off measured step times (a pure function)."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ridge_cpu():
    spec = importlib.util.spec_from_file_location("ridge_cpu", REPO / "bench" / "ridge_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _roofline_points(flat_ms, ms_per_token, tokens):
    return [{"tokens_per_step": t, "step_ms": max(flat_ms, ms_per_token * t)} for t in tokens]


def test_knee_finds_the_ridge_of_a_roofline():
    ridge = _ridge_cpu()
    knee = ridge.knee(_roofline_points(100.0, 2.0, (5, 10, 20, 40, 80, 160)))  # ridge at 50 tokens
    assert knee["flat_ms"] == 100.0 and knee["ms_per_token_past_ridge"] == pytest.approx(2.0)
    assert knee["ridge_tokens_per_step"] == pytest.approx(50.0)


def test_knee_needs_enough_points():
    with pytest.raises(ValueError, match="at least four points"):
        _ridge_cpu().knee(_roofline_points(100.0, 2.0, (5, 10, 20)))
