"""gpu-memory-utilization against what vLLM 0.32 takes besides weights and KV cache: the profile run's
activations (a forward pass over max-num-batched-tokens tokens) come out of the budget before the KV cache is
sized, and a setting near 1.0 leaves the GPU too little outside the budget to start and capture graphs.
The published case (AMD's MI300X guide at 0.99) is in data/configs/public/rocm-llama-3.1-70b-fp8-mi300x.sh."""

from __future__ import annotations

import pytest

from servelab import review

pytestmark = pytest.mark.unit


def memory_finding(
    peak: int, util: float = 0.9, batched_tokens: int = 16384, enforce_eager: bool = False
) -> review.Finding:
    """Llama 3.1 8B on one L4: 24.15 GB x 0.9 = 21.7 GB less 16.1 GB of weights leaves 5.7 GB of KV cache."""
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": 64,
        "max-num-batched-tokens": batched_tokens,
        "max-model-len": 8192,
        "gpu-memory-utilization": util,
        "enforce-eager": enforce_eager,
        "deployment": {"gpu": "L4", "gpus-per-node": 1, "nodes": 1},
    }
    workload = {
        "task": "chat",
        "concurrency": {"typical": peak, "peak": peak},
        "prompt-tokens": {"mean": 1000, "p99": 3000},
        "output-tokens": {"mean": 200, "p99": 600},
        "slo": {"ttft-p99-ms": 2000, "tpot-p99-ms": 100},
    }
    return review.review(config, workload).finding("gpu_memory_utilization")


def test_a_peak_that_fits_only_before_the_profile_runs_activations_is_wrong():
    """30 x 1,200 tokens x 131,072 B = 4.7 GB fits the 5.7 GB, but the profile run over 16,384 tokens takes
    16,384 x 3 x 14,336 x 2 B = 1.4 GB of it first (gpu_worker.determine_available_memory)."""
    finding = memory_finding(30)
    assert finding.verdict == "wrong"
    assert "only before vLLM sets aside its profile run's activations (about 1.4 GB)" in finding.reason
    assert "16,384 tokens x 3 x 14,336 MLP width x 2 B" in finding.evidence
    # (16.06 weights + 4.72 KV + 1.44 activations) / 24.15 GB = 0.92, rounded up; the budget that sizes the run is named
    assert "raise gpu-memory-utilization to 0.93" in finding.fix and "max-num-batched-tokens" in finding.fix


def test_a_smaller_batch_budget_leaves_the_same_peak_room():
    """2,048 tokens: 2,048 x 3 x 14,336 x 2 B = 0.18 GB, plus the sampler's 64 x 128,256 float32 logits."""
    finding = memory_finding(30, batched_tokens=2048)
    assert finding.verdict == "justified"
    assert "about 0.21 GB" in finding.reason


@pytest.mark.parametrize("util", [0.98, 0.99])
def test_a_setting_near_one_is_unjustified_with_room_to_lower_it(util):
    finding = memory_finding(10, util=util)
    assert finding.verdict == "unjustified"
    assert "vLLM refuses to start" in finding.reason and "outside vLLM's budget" in finding.reason
    assert finding.fix.startswith("lower gpu-memory-utilization to 0.95 (vLLM's default is 0.92)")


def test_the_ceiling_itself_is_justified():
    assert memory_finding(10, util=0.95).verdict == "justified"


def test_a_peak_that_leaves_the_cuda_graphs_less_than_the_activations_is_unjustified():
    """34 x 1,200 tokens x 131,072 B = 5.3 GB: 5.7 GB less 0.21 GB of activations holds it with about 0.11 GB
    left, and vLLM 0.32 takes its CUDA graphs (measured at start by capturing them: gpu_worker's
    determine_available_memory subtracts profile_cudagraph_memory) from that too: the bound is stated, not
    assumed. Eager, no graphs are captured and the same peak fits."""
    finding = memory_finding(34, batched_tokens=2048)
    assert finding.verdict == "unjustified"
    assert "only if the CUDA graphs vLLM captures at start take under 0.11 GB" in finding.reason
    assert "'CUDA graph pool memory'" in finding.fix
    assert memory_finding(34, batched_tokens=2048, enforce_eager=True).verdict == "justified"
    roomy = memory_finding(30, batched_tokens=2048)  # more room after the activations than they take
    assert roomy.verdict == "justified" and "the CUDA graphs vLLM captures at start come out of the" in roomy.reason
