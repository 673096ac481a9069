"""--dtype float16 against a checkpoint trained in bfloat16 (Gemma 3 27B's config.json as
published, tests/data/model_configs/): the same bytes and peak, a narrower range; reviewed only
where the config writes it and the GPU has bfloat16."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servelab import review

pytestmark = pytest.mark.unit

CONFIGS = Path(__file__).resolve().parent / "data" / "model_configs"


def gemma(tmp_path: Path, measurements: list | None = None, **changes) -> review.Report:
    shutil.copy(CONFIGS / "gemma-3-27b-it.json", tmp_path / "config.json")
    config = {
        "model": "google/gemma-3-27b-it",
        "dtype": "float16",
        "max-num-seqs": 32,
        "max-model-len": 8192,
        "deployment": {"gpu": "H100", "gpus-per-node": 1, "nodes": 1, "model-config": "config.json"},
    }
    config.update(changes)
    workload = {
        "task": "support-chat",
        "concurrency": {"typical": 16, "peak": 32},
        "prompt-tokens": {"mean": 1000, "p99": 3000},
        "output-tokens": {"mean": 200, "p99": 800},
        "slo": {"ttft-p99-ms": 2000, "tpot-p99-ms": 60},
        "measurements": measurements or [],
    }
    return review.review(config, workload, base_dir=tmp_path)


def test_float16_on_a_bf16_checkpoint_is_unjustified_without_an_accuracy_measurement(tmp_path):
    finding = gemma(tmp_path).finding("dtype")
    assert finding.verdict == "unjustified"
    assert "trained in bfloat16" in finding.reason and "65,504" in finding.evidence
    assert "dtype auto or bfloat16" in finding.fix


def test_float16_measured_on_the_task_is_justified(tmp_path):
    measured = [
        {
            "setting": {"dtype": "float16", "max-num-seqs": 32},
            "metric": "accuracy",
            "value": 0.91,
            "source": "eval",
        }
    ]
    assert gemma(tmp_path, measured).finding("dtype").verdict == "justified"


@pytest.mark.parametrize(
    "changes",
    [
        {"dtype": "bfloat16"},
        {"dtype": "auto"},
        {"deployment": {"gpu": "T4", "gpus-per-node": 4, "nodes": 1, "model-config": "config.json"}},
    ],
    ids=["bf16", "auto", "T4-has-no-bf16"],
)
def test_no_dtype_finding_where_the_config_does_not_cast_or_cannot_choose(tmp_path, changes):
    kwargs = dict(changes)
    if "deployment" in kwargs:
        kwargs["tensor-parallel-size"] = 4
    report = gemma(tmp_path, **kwargs)
    assert "dtype" not in report.verdicts()
