"""The chunked-prefill token budget of a throughput job against the GPU's ridge: a step carrying
fewer tokens than the ridge is memory-bound, so a small budget leaves prefill waiting on weight reads."""

from __future__ import annotations

import pytest

from servelab import review

pytestmark = pytest.mark.unit


def job(budget: int) -> review.Report:
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": 128,
        "max-num-batched-tokens": budget,
        "max-model-len": 8192,
        "deployment": {"gpu": "H100", "gpus-per-node": 1, "nodes": 1},
    }
    workload = {
        "task": "batch-summaries",
        "concurrency": {"typical": 128, "peak": 128},
        "prompt-tokens": {"mean": 3000, "p99": 6000},
        "output-tokens": {"mean": 300, "p99": 600},
        "slo": {"throughput-tok-s": 5000, "tpot-p99-ms": 200},
    }
    return review.review(config, workload)


def test_a_budget_below_the_ridge_in_a_throughput_job_is_unjustified():
    """H100: 989 TFLOP/s / 3,350 GB/s x 2 bytes / 2 = 295 tokens per step; 256 is 87 % of it."""
    finding = job(256).finding("chunked_prefill")
    assert finding.verdict == "unjustified"
    assert "ridge of 295" in finding.reason and "87%" in finding.reason
    assert "8,192" in finding.fix  # vLLM's default budget on an H100


def test_a_budget_above_the_ridge_is_judged_on_its_step_times():
    finding = job(2048).finding("chunked_prefill")
    assert "ridge" not in finding.reason
