"""A default that changed between vLLM releases is weighed as the pinned release had it: before 0.8.0 the V0
engine served by default and cached no prefixes unless told to; 0.8.0's V1 engine caches them by default."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servelab import review
from servelab.review import defaults

pytestmark = pytest.mark.unit

RAG = {
    "task": "rag",
    "concurrency": {"typical": 16, "peak": 32},
    "prompt-tokens": {"mean": 2500, "p99": 4000},
    "output-tokens": {"mean": 200, "p99": 500},
    "slo": {"ttft-p99-ms": 1000, "tpot-p99-ms": 50},
    "shared-prefix": {"tokens": 2000, "fraction": 0.95},
}


def prefix_finding(tmp_path: Path, image: str, flags: str = "") -> review.Finding:
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(RAG))
    (tmp_path / "serve.sh").write_text(
        "# deployment: {gpu: H100, gpus-per-node: 1}\n"
        f"docker run --gpus all {image} --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192{flags}\n"
    )
    return review.review_files(tmp_path / "serve.sh", tmp_path / "w.yaml").finding("prefix_caching")


@pytest.mark.parametrize("release", ["0.7.3", "0.6.3.post1"])
def test_before_0_8_0_prefix_caching_left_out_is_off(tmp_path, release):
    finding = prefix_finding(tmp_path, f"vllm/vllm-openai:v{release}")
    assert finding.verdict == "wrong"
    assert f"enable-prefix-caching false (vLLM {release}'s default" in finding.setting


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.8.0", "vllm/vllm-openai:v0.10.0", "vllm/vllm-openai:latest"])
def test_from_0_8_0_and_unpinned_it_is_on(tmp_path, image):
    finding = prefix_finding(tmp_path, image)
    assert finding.verdict == "justified" and "enable-prefix-caching true (vLLM default)" in finding.setting


def test_set_in_the_config_the_release_does_not_matter(tmp_path):
    finding = prefix_finding(tmp_path, "vllm/vllm-openai:v0.7.3", " --enable-prefix-caching")
    assert finding.verdict == "justified" and "(vLLM 0.7.3" not in finding.setting


def test_the_rule_names_its_release():
    assert defaults.prefix_caching_default("0.7.3")[0] is False
    assert defaults.prefix_caching_default("0.8.0") == (True, "")
    assert defaults.prefix_caching_default("") == (True, "")  # judged as 0.32.0
