"""servelab.hardware's one CPU probe: rounds repeat until two agree, with a fake clock and fake kernels (no torch)."""

from __future__ import annotations

import pytest

from servelab import hardware

pytestmark = pytest.mark.unit


class FakeClock:
    """A clock that moves only when a fake kernel runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def kernels(clock: FakeClock, read_s, gemm_s: float = 0.02) -> dict:
    """A read kernel moving 1 GB whose runs in round r (0-based) take read_s(r) seconds of the fake clock,
    and a GEMM of 1 TFLOP taking gemm_s; a round is one turn of the read kernel and then the GEMM."""
    state = {"round": 0, "last": ""}

    def read() -> None:
        if state["last"] == "gemm":
            state["round"] += 1
        state["last"] = "read"
        clock.now += read_s(state["round"])

    def gemm() -> None:
        state["last"] = "gemm"
        clock.now += gemm_s

    return {"read": (read, 1e9), "gemm": (gemm, 1e12)}


def test_a_steady_machine_settles_in_two_rounds_at_its_rate():
    clock = FakeClock()
    rounds = hardware.stabilise(kernels(clock, lambda r: 0.01), clock=clock, round_s=0.1)  # 100 GB/s, 50 TFLOP/s
    assert rounds.stable and rounds.rounds == 2
    assert rounds.best["read"] == pytest.approx(100e9) and rounds.best["gemm"] == pytest.approx(50e12)
    assert rounds.spread_pct("read") == pytest.approx(0.0)


def test_a_disturbed_round_makes_it_repeat_until_two_rounds_agree_and_quotes_the_best():
    clock = FakeClock()
    # the first round is slowed 3x by a neighbour, then the machine is quiet
    rounds = hardware.stabilise(kernels(clock, lambda r: 0.03 if r == 0 else 0.01), clock=clock, round_s=0.1)
    assert rounds.stable and rounds.rounds == 3
    assert rounds.per_round["read"][0] == pytest.approx(1e9 / 0.03)
    assert rounds.best["read"] == pytest.approx(100e9)
    assert rounds.spread_pct("read") == pytest.approx(100 * (1 - 1 / 3))


def test_a_machine_that_never_settles_stops_at_the_time_cap_and_says_so():
    clock = FakeClock()
    noisy = kernels(clock, lambda r: 0.01 if r % 2 else 0.02)  # successive rounds 2x apart
    rounds = hardware.stabilise(noisy, clock=clock, round_s=0.1, max_s=1.0, max_rounds=100)
    assert not rounds.stable
    assert 1.0 <= rounds.elapsed_s < 1.5 and rounds.rounds >= 3
    assert rounds.spread_pct("read") == pytest.approx(50.0)


def test_a_machine_that_never_settles_stops_at_the_round_cap():
    clock = FakeClock()
    noisy = kernels(clock, lambda r: 0.01 if r % 2 else 0.02)
    rounds = hardware.stabilise(noisy, clock=clock, round_s=0.1, max_s=100.0, max_rounds=4)
    assert not rounds.stable and rounds.rounds == 4


def test_rounds_within_the_tolerance_count_as_agreeing_and_beyond_it_do_not():
    for slower, stable in ((1.02, True), (1.05, False)):
        clock = FakeClock()
        two = kernels(clock, lambda r, s=slower: 0.01 if r == 0 else 0.01 * s)
        rounds = hardware.stabilise(two, clock=clock, round_s=0.1, tolerance=0.03, max_rounds=2)
        assert rounds.stable is stable and rounds.rounds == 2


def test_probe_cpu_records_rounds_spread_load_and_cpu_time_in_the_dtype_asked():
    clock = FakeClock()
    probe = hardware.probe_cpu(
        threads=2, dtype="bfloat16", kernels=kernels(clock, lambda r: 0.01), clock=clock, round_s=0.1
    )
    d = probe.to_dict()
    assert probe.hardware.dtype == d["dtype"] == "bfloat16"
    assert probe.hardware.bandwidth_gb_s == pytest.approx(100.0) and d["read_gb_s"] == pytest.approx(100.0)
    assert probe.hardware.peak_tflops == pytest.approx(50.0) and d["gemm_tflops"] == pytest.approx(50.0)
    assert d["rounds"] == 2 and d["stable"] is True and d["spread_pct"] == {"read": 0.0, "gemm": 0.0}
    assert len(d["loadavg_before"]) == 3 and d["threads"] == 2
    assert d["cpu_s"] >= 0 and d["wall_s"] >= 0 and isinstance(d["busy"], bool)
    assert "2 rounds, stable" in probe.hardware.source


def test_a_probe_whose_threads_got_little_cpu_time_says_it_was_busy():
    def probe(cpu_s: float, load: float) -> hardware.CpuProbe:
        hw = hardware.Hardware("cpu", 0.0, 10.0, 1.0)
        rounds = hardware.Rounds({"read": 1e10, "gemm": 1e12}, {"read": [1e10], "gemm": [1e12]}, True, 1.0)
        return hardware.CpuProbe(
            hw, "bfloat16", "m", 1, (1,), rounds, 2, (load, 0, 0), (load, 0, 0), cpu_s=cpu_s, wall_s=1.0
        )

    quiet_load = 0.0
    assert not probe(cpu_s=2.0, load=quiet_load).busy  # two threads, two CPU-seconds a second
    assert probe(cpu_s=0.9, load=quiet_load).busy  # the threads waited for the cores half the time
    assert probe(cpu_s=2.0, load=hardware.cpu_cores() + 1.0).busy  # the load said so before it started
