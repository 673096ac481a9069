"""Little's law against a workload's cited runs: one arrival rate for two throughputs at one load is flagged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servelab.review import review_files

pytestmark = pytest.mark.unit

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
CASE = "lesson-3200-vs-3400"


def _speculation(report):
    return report.finding("speculative_decoding")


def test_the_lessons_workload_gives_each_run_its_own_rate_and_reviews_clean():
    report = review_files(CONFIGS / f"{CASE}.yaml", CONFIGS / f"{CASE}-workload.yaml")
    assert _speculation(report).verdict == "justified" and report.exit_code == 0
    assert "Little's law" not in _speculation(report).evidence


def test_one_rate_for_runs_of_different_throughput_at_one_load_is_unjustified(tmp_path):
    workload = yaml.safe_load((CONFIGS / f"{CASE}-workload.yaml").read_text())
    workload["qps"] = {"typical": 70, "peak": 80}  # the text's one rate, beside 3,200 and 3,400 tok/s at 256
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload))
    finding = _speculation(review_files(CONFIGS / f"{CASE}.yaml", path))
    assert finding.verdict == "unjustified"
    assert "Little's law" in finding.reason and "3,400" in finding.reason and "3,200" in finding.reason
    assert "85" in finding.reason and "80" in finding.reason  # each run's own requests/s at 40 output tokens


def test_one_rate_is_fine_where_the_runs_agree(tmp_path):
    workload = yaml.safe_load((CONFIGS / f"{CASE}-workload.yaml").read_text())
    workload["qps"] = {"typical": 70, "peak": 80}
    for m in workload["measurements"]:
        if m["metric"] == "output_tok_s":
            m["value"] = 3400 if m["setting"]["speculative"] is False else 3390  # within run-to-run noise
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(workload))
    assert "Little's law" not in _speculation(review_files(CONFIGS / f"{CASE}.yaml", path)).evidence
