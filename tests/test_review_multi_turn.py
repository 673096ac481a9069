"""A workload states multi-turn prefix reuse: a session's later turns start with its own history,
which a prefix cache keeps between turns only where the KV memory has room for every open session."""

from __future__ import annotations

import pytest

from servelab import review

pytestmark = pytest.mark.unit


def chat(caching: bool, **multi_turn) -> review.Report:
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": 64,
        "max-model-len": 16384,
        "enable-prefix-caching": caching,
        "deployment": {"gpu": "H100", "gpus-per-node": 1, "nodes": 1},
    }
    workload = {
        "task": "support-chat",
        "concurrency": {"typical": 32, "peak": 64},
        "prompt-tokens": {"mean": 5000, "p99": 12000},
        "output-tokens": {"mean": 300, "p99": 1000},
        "slo": {"ttft-p99-ms": 1500, "tpot-p99-ms": 50},
        "multi-turn": {"turns": 5, "carried-tokens": 4000, **multi_turn},
    }
    return review.review(config, workload)


def test_multi_turn_history_makes_prefix_caching_off_wrong():
    """4 of 5 requests are later turns whose first 4,000 of 5,000 tokens are the session's history:
    80 % x 80 % = 64 % of prefill where every history stays cached. 64 sessions x 4,000 tokens x
    131,072 B = 33.6 GB, against 62.6 - 44.5 = 18.2 GB left beside the peak's 64 running requests:
    54 % of the histories stay, so the cache skips about 0.64 x 0.54 = 35 % of prefill."""
    finding = chat(False).finding("prefix_caching")
    assert finding.verdict == "wrong"
    assert "4,000-token history" in finding.reason and "35%" in finding.reason
    assert "33.6 GB" in finding.evidence and "18.2 GB" in finding.evidence and "54% of them" in finding.evidence


def test_sessions_the_cache_cannot_keep_count_only_in_part():
    """2,000 open sessions' histories (1,048.6 GB) do not fit in the 18.2 GB the H100 leaves,
    so only that share of them stays cached and the reuse shrinks with it."""
    finding = chat(False, sessions=2000).finding("prefix_caching")
    assert "stay cached" in finding.evidence
    assert finding.verdict == "justified"  # about 1 % of prefill: too little for the cache to matter


def test_prefix_caching_on_for_a_multi_turn_chat_is_justified():
    assert chat(True).finding("prefix_caching").verdict == "justified"


@pytest.mark.parametrize(
    "block,needle",
    [({"turns": 1, "carried-tokens": 10}, "at least 2"), ({"turns": 4}, "'carried-tokens' is required")],
)
def test_a_bad_multi_turn_block_says_what_to_write(block, needle):
    workload = {
        "concurrency": {"typical": 1, "peak": 2},
        "prompt-tokens": {"mean": 100},
        "output-tokens": {"mean": 10},
        "multi-turn": block,
    }
    with pytest.raises(review.ReviewInputError, match=needle):
        review.review(
            {
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "deployment": {"gpu": "H100", "gpus-per-node": 1, "nodes": 1},
            },
            workload,
        )
