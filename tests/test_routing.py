"""Routing by load: the threshold from a crossover, and what a routed record says about itself."""

from __future__ import annotations

import math

import pytest

from servelab import modelspec, simulate
from servelab.measurement import Measurement
from servelab.routing import (
    ALWAYS,
    NEVER,
    Router,
    Threshold,
    threshold_from_crossover,
    threshold_from_records,
    threshold_from_simulator,
)

pytestmark = pytest.mark.unit


def point(method: str, batch: int, tok_s: float, k: int = 4) -> dict:
    out = max(batch, 8) * 64
    return Measurement(
        method=method,
        num_speculative_tokens=k if method != "none" else 0,
        batch_size=batch,
        workload="copy",
        output_len=64,
        num_requests=max(batch, 8),
        prompt_tokens=0,
        output_tokens=out,
        elapsed_s=out / tok_s,
        output_tok_s=tok_s,
        request_throughput=1.0,
        ttft_ms_p50=1.0,
        ttft_ms_p99=1.0,
        tpot_ms_p50=1.0,
        tpot_ms_p99=1.0,
        model="SmolLM2-135M-Instruct",
        dtype="float32",
    ).to_dict()


@pytest.mark.parametrize("crossover, expected", [(4.47, 4), (4.0, 3), (1.2, 1), (0.9, 0), (130.5, 130)])
def test_the_threshold_is_the_largest_batch_below_the_crossover(crossover, expected):
    assert threshold_from_crossover(crossover, "measured").batch_size == expected


def test_no_crossover_routes_everything_to_the_winner():
    assert threshold_from_crossover(None, "measured").batch_size == ALWAYS
    assert threshold_from_crossover(None, "measured", loses_everywhere=True).batch_size == NEVER


def test_threshold_from_measured_points():
    base = [point("none", 1, 13.7), point("none", 8, 80.5), point("none", 64, 177.1)]
    spec = [point("ngram", 1, 22.4), point("ngram", 8, 63.7), point("ngram", 64, 101.2)]
    t = threshold_from_records(base, spec)
    assert t.batch_size == 4 and t.source.startswith("measured crossover at batch 4.")
    assert threshold_from_records(base, []) is None
    losing = [point("ngram", 1, 10.0), point("ngram", 8, 50.0)]
    assert threshold_from_records(base, losing).batch_size == NEVER
    winning = [point("ngram", 1, 30.0), point("ngram", 8, 90.0), point("ngram", 64, 200.0)]
    assert threshold_from_records(base, winning).batch_size == ALWAYS


def test_threshold_from_the_simulator_matches_its_crossover():
    sim = simulate.Simulator(modelspec.preset("Llama-3.1-8B"), simulate.hardware_presets.get("H100"))
    t = threshold_from_simulator(sim, 4)
    cross = sim.crossover_batch(4, "ngram")
    assert t.batch_size == math.floor(cross) and t.source.startswith("simulated")


def test_the_router_sends_small_batches_to_the_speculating_side():
    router = Router("speculating engine", "plain engine", Threshold(4, "set by hand"))
    assert [router.target_for(b) for b in (1, 4, 5, 64)] == ["speculating engine"] * 2 + ["plain engine"] * 2
    assert Router("s", "p", 0).target_for(1) == "p"


def test_a_routed_record_says_which_side_served_it():
    router = Router(_Described("ngram", 4), _Described("none", 0), Threshold(4, "measured crossover at batch 4.5"))
    plain = Measurement.from_dict(point("none", 64, 177.1))
    routed = router.relabel(plain, 64)
    assert routed.method == "routed" and routed.num_speculative_tokens == 4
    assert routed.output_tok_s == plain.output_tok_s  # the numbers are the serving engine's own
    routing = routed.engine_config["routing"]
    assert routing["served_by"] == "plain" and routing["threshold"] == 4
    assert routing["speculating"] == {"method": "ngram", "k": 4}
    assert "measured crossover" in routed.note
    # the roofline simulator judges a routed record against its ideal policy
    ok, _, reason = simulate.plausibility(routed.to_dict())
    assert "ideal" in reason or ok


class _Described:
    """A target as the router describes it (the router never measures it in this test)."""

    def __init__(self, method, k):
        self.method, self.num_speculative_tokens = method, k

    def describe(self):
        return {"method": self.method, "k": self.num_speculative_tokens}
