"""A measured SLO miss judges the config as a whole: it is a finding whatever knob the
measurement's setting names, and it goes to the knob the evidence points at (queue time against
prefill time, a step's time against TPOT), never to one the evidence clears. The model is
Kimi-K2-Instruct's config.json as published (tests/data/model_configs/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servelab import review

pytestmark = pytest.mark.unit

CONFIGS = Path(__file__).resolve().parent / "data" / "model_configs"


def kimi(
    tmp_path: Path, measurements: list[dict], max_num_seqs: int = 1, ttft_slo: int = 5000, tpot_slo: int = 50
) -> review.Report:
    shutil.copy(CONFIGS / "Kimi-K2-Instruct.json", tmp_path / "config.json")
    config = {
        "model": "moonshotai/Kimi-K2-Instruct",
        "tensor-parallel-size": 16,
        "max-num-seqs": max_num_seqs,
        "max-num-batched-tokens": 1024,
        "max-model-len": 32768,
        "deployment": {"gpu": "H200", "gpus-per-node": 8, "nodes": 2, "model-config": "config.json"},
    }
    workload = {
        "task": "chat",
        "concurrency": {"typical": 16, "peak": 32},
        "prompt-tokens": {"mean": 2000, "p99": 8000},
        "output-tokens": {"mean": 500, "p99": 2000},
        "slo": {"ttft-p99-ms": ttft_slo, "tpot-p99-ms": tpot_slo},
        "measurements": measurements,
    }
    return review.review(config, workload, base_dir=tmp_path)


def chunk_benchmark(metric: str, value: float) -> dict:
    """A benchmark whose setting names the chunk budget, not max-num-seqs."""
    return {
        "setting": {"max-num-batched-tokens": 1024, "concurrency": 32},
        "metric": metric,
        "value": value,
        "source": "benchmark",
    }


def test_a_queueing_ttft_miss_goes_to_max_num_seqs_not_to_the_chunk(tmp_path):
    """max-num-seqs 1 against 32 concurrent requests: 31 queue. The 8,000-token prompt's eight
    1,024-token chunks take about 13 ms each (2 x 32.86B active x 1,024 / 16 GPUs / 1,979 TFLOP/s
    FP8 = 2.1 ms of arithmetic, under one 64.3 GB / 16 read of the FP8 weights at 4.8 TB/s):
    about 107 ms of a 110 s TTFT."""
    report = kimi(tmp_path, [chunk_benchmark("ttft_ms_p99", 110_000)])
    batching, chunked = report.finding("batching"), report.finding("chunked_prefill")
    assert batching.verdict == "wrong"
    assert "31 of the peak's 32" in batching.reason and "110,000 ms" in batching.reason
    assert chunked.verdict != "wrong", chunked.reason
    assert "Not this knob's miss" in chunked.reason and "8 chunks of about 13.4 ms" in chunked.reason
    assert "max-num-seqs 1 against 32 concurrent requests" in chunked.reason


def test_a_tpot_miss_a_full_chunk_cannot_explain_clears_the_chunk(tmp_path):
    """A step carrying a full 1,024-token chunk takes about 13.4 ms, under half the 50 ms SLO: a
    72 ms p99 TPOT is the decode step's own, not the prefill's beside it."""
    report = kimi(tmp_path, [chunk_benchmark("tpot_ms_p99", 72)], max_num_seqs=64)
    chunked = report.finding("chunked_prefill")
    assert chunked.verdict != "wrong"
    assert "13.4 ms, under half the 50 ms SLO" in chunked.reason


def test_a_miss_under_a_cap_that_never_binds_is_still_on_record(tmp_path):
    """With max-num-seqs at the load the same miss stays a finding: batching names it and says the
    cap is not the cause, and the chunk (107 ms of prefill) is cleared as well."""
    report = kimi(tmp_path, [chunk_benchmark("ttft_ms_p99", 110_000)], max_num_seqs=64)
    batching = report.finding("batching")
    assert batching.verdict == "unjustified" and "not the cause" in batching.reason
    assert "110,000 ms" in batching.reason
    assert "Not this knob's miss" in report.finding("chunked_prefill").reason


def test_a_miss_the_chunk_can_explain_stays_its_finding(tmp_path):
    """Against a 200 ms TTFT SLO the longest prompt's 107 ms of chunked prefill is more than half of
    it: the evidence does not clear the budget, and a 400 ms TTFT is its finding."""
    report = kimi(tmp_path, [chunk_benchmark("ttft_ms_p99", 400)], max_num_seqs=64, ttft_slo=200)
    chunked = report.finding("chunked_prefill")
    assert chunked.verdict == "wrong" and "400 ms breaks the 200 ms SLO" in chunked.reason


def test_a_miss_measured_on_another_config_counts_for_nothing(tmp_path):
    """A setting that contradicts the config (another chunk budget) is set aside, as before."""
    other = chunk_benchmark("ttft_ms_p99", 110_000)
    other["setting"]["max-num-batched-tokens"] = 8192
    report = kimi(tmp_path, [other])
    assert report.finding("batching").verdict == "unjustified"
    assert "Not this knob's miss" not in report.finding("chunked_prefill").reason


def test_a_tpot_miss_is_weighed_against_the_decode_steps_own_reads(tmp_path):
    """Qwen3-Coder-480B's own benchmark shape: a TPOT miss measured at the load, under a cap that
    never binds. The finding puts the step's reads beside it: Kimi-K2's 64.3 GB of FP8 weights per
    GPU (1,028.9 GB over 16) and 5.6 GB of the batch's KV cache, 69.9 GB read at 4.8 TB/s, are about
    14.6 ms, under half of 72 ms, so the fix looks at what shares the step, not at the batch."""
    report = kimi(tmp_path, [chunk_benchmark("tpot_ms_p99", 72)], max_num_seqs=64)
    batching = report.finding("batching")
    assert batching.verdict == "unjustified" and "p99 TPOT of 72 ms breaks the 50 ms SLO" in batching.reason
    assert "a decode step of 32 sequences reads 69.9 GB per GPU" in batching.evidence
    assert "under half the measured 72 ms" in batching.fix


def test_a_tpot_miss_the_decode_step_explains_points_at_more_gpus(tmp_path):
    """Against a 20 ms TPOT SLO a measured 25 ms is mostly the 14.6 ms step itself."""
    report = kimi(tmp_path, [chunk_benchmark("tpot_ms_p99", 25)], max_num_seqs=64, tpot_slo=20)
    fix = report.finding("batching").fix
    assert "the decode step itself takes about 14.57 ms of the 25 ms" in fix and "more GPUs per replica" in fix
