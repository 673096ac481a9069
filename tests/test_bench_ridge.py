"""bench/ridge_cpu.py's knee: the ridge read off measured step times (a pure function)."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

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


def test_knee_finds_the_ridge_where_reads_and_arithmetic_add():
    """Hardware that does not overlap the two: time = reads + arithmetic; the ridge is where they are equal."""
    points = [{"tokens_per_step": t, "step_ms": 200.0 + 4.0 * t} for t in (5, 10, 20, 40, 80, 160, 320)]
    knee = _ridge_cpu().knee(points)
    assert knee["ms_per_token_past_ridge"] == pytest.approx(4.0)
    assert knee["intercept_ms"] == pytest.approx(200.0)
    # the floor is the 5-token step (220 ms): arithmetic takes as long at 220 / 4 = 55 tokens
    assert knee["ridge_tokens_per_step"] == pytest.approx(55.0)
    assert knee["fitted_through_tokens"] == [80, 160, 320]


def test_one_slow_small_step_does_not_move_the_floor():
    points = [{"tokens_per_step": t, "step_ms": max(100.0, 2.0 * t)} for t in (5, 10, 20, 40, 80, 160)]
    points[1]["step_ms"] = 250.0  # a poorly tuned kernel for one small shape, over twice the floor
    assert _ridge_cpu().knee(points)["ridge_tokens_per_step"] == pytest.approx(50.0)


def test_knee_needs_enough_points():
    with pytest.raises(ValueError, match="at least four points"):
        _ridge_cpu().knee(_roofline_points(100.0, 2.0, (5, 10, 20)))


def test_the_intercept_carries_its_uncertainty_and_one_token_count_is_refused():
    exact = [{"tokens_per_step": t, "step_ms": 200.0 + 4.0 * t} for t in (5, 10, 20, 40, 80, 160, 320)]
    assert _ridge_cpu().knee(exact)["intercept_se_ms"] == pytest.approx(0.0, abs=1e-6)
    noisy = [dict(p, step_ms=p["step_ms"] + (15.0 if i % 2 else -15.0)) for i, p in enumerate(exact)]
    assert _ridge_cpu().knee(noisy)["intercept_se_ms"] > 5
    same = [{"tokens_per_step": t, "step_ms": ms} for t, ms in ((5, 100.0), (10, 100.0), (80, 300.0), (80, 310.0))]
    with pytest.raises(ValueError, match="same tokens"):
        _ridge_cpu().knee(same)


def test_the_default_dtype_is_the_engines(monkeypatch):
    import servelab.engine
    import servelab.hardware

    ridge = _ridge_cpu()
    config = servelab.engine.EngineConfig(dtype="auto")
    monkeypatch.setattr(servelab.engine, "on_gpu", lambda: False)
    monkeypatch.setattr(servelab.hardware, "cpu_has_native_bf16", lambda: True)
    assert ridge.default_dtype() == config.resolved_dtype() == "bfloat16"
    monkeypatch.setattr(servelab.hardware, "cpu_has_native_bf16", lambda: False)
    assert ridge.default_dtype() == config.resolved_dtype() == "float32"


def test_the_slope_below_the_ridge_tells_flat_from_added():
    ridge = _ridge_cpu()
    ideal = _roofline_points(100.0, 2.0, (5, 10, 20, 40, 80, 160))  # max(reads, arithmetic): flat below 50
    assert ridge.slope_below(ideal, 50) == pytest.approx(0.0)
    added = [{"tokens_per_step": t, "step_ms": 200.0 + 4.0 * t} for t in (5, 10, 20, 40, 80)]  # reads + arithmetic
    assert ridge.slope_below(added, 55) == pytest.approx(4.0)
    assert ridge.slope_below(added, 6) is None  # one step below: no slope


def test_one_ridge_is_quoted_the_knee_where_its_fit_holds_else_the_probe():
    ridge = _ridge_cpu()
    clean = ridge.knee([{"tokens_per_step": t, "step_ms": 200.0 + 4.0 * t} for t in (5, 10, 20, 40, 80, 160, 320)])
    assert ridge.ridge_of(clean, 74.0) == {"tokens_per_step": clean["ridge_tokens_per_step"], "from": "knee"}
    uneven = [
        {"tokens_per_step": t, "step_ms": ms}
        for t, ms in ((5, 66), (10, 75), (20, 74), (40, 104), (80, 155), (120, 156), (160, 243), (240, 251), (320, 935))
    ]
    chosen = ridge.ridge_of(ridge.knee(uneven), 73.6)
    assert chosen["from"] == "probe" and chosen["tokens_per_step"] == 73.6 and "intercept" in chosen["why"]
