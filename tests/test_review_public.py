"""servelab review on real, public vLLM deployment configs (data/configs/public/).

Each config is kept in the form it was published in (a command line, vLLM's YAML,
a Kubernetes manifest, Helm values), reduced to what the review reads, with its
source in a comment. The expected findings are worked by hand in
data/configs/README.md and listed in data/configs/public/expected.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from review_helpers import assert_mentions

from servelab import review

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / "data" / "configs" / "public"
EXPECTED = yaml.safe_load((PUBLIC / "expected.yaml").read_text())
CASES = sorted(EXPECTED)


def _review(case: str) -> review.Report:
    expected = EXPECTED[case]
    return review.review_files(
        PUBLIC / expected["config"],
        PUBLIC / f"{case}-workload.yaml",
        select=expected.get("select"),
        variables=expected.get("variables"),
    )


def _reviewer_verdicts(expected: dict) -> dict:
    """The hand-worked verdicts, except where the reviewer is on record as differing (and why)."""
    differs = expected.get("reviewer_differs") or {}
    return {k: differs[k]["reviewer"] if k in differs else v for k, v in expected.get("verdicts", {}).items()}


def test_at_least_twenty_nine_public_configs_each_with_a_workload():
    configs = {p.name for p in PUBLIC.iterdir()} - {"expected.yaml"}
    configs = {c for c in configs if not c.endswith(("-workload.yaml", "-hardware.json", "-model-config.json"))}
    assert configs == {EXPECTED[c]["config"] for c in CASES}, "expected.yaml and the folder disagree"
    assert len(CASES) >= 29
    for case in CASES:
        for knob, note in (EXPECTED[case].get("reviewer_differs") or {}).items():
            assert note["why"] and note["reviewer"] != EXPECTED[case]["verdicts"][knob], f"{case}/{knob}"
    for case in CASES:
        assert (PUBLIC / f"{case}-workload.yaml").exists(), f"{case} has no workload"


@pytest.mark.parametrize("case", CASES)
def test_public_config_names_its_source_and_assumptions(case):
    text = (PUBLIC / EXPECTED[case]["config"]).read_text()
    assert re.search(r"Source: github\.com/[\w.-]+/[\w.-]+,[\s#]+\S+", text), f"{case}: no source repository and path"
    assert re.search(r"commit [0-9a-f]{40}", text), f"{case}: no source commit"
    assert "Teaches:" in text
    workload = (PUBLIC / f"{case}-workload.yaml").read_text()
    assert "assumed" in workload.splitlines()[0], f"{case}: the workload must say it is assumed"


@pytest.mark.parametrize("case", CASES)
def test_public_config_findings(case):
    expected = EXPECTED[case]
    if expected["exit"] == 2:
        with pytest.raises(review.ReviewInputError) as info:
            _review(case)
        for phrase in expected["error"]:
            assert phrase in str(info.value), str(info.value)
        return
    report = _review(case)
    assert report.verdicts() == _reviewer_verdicts(expected)
    assert report.exit_code == expected["exit"]
    assert report.vllm_version == str(expected.get("vllm_version", "0.32.0"))
    assert_mentions(report, expected, case)


def test_readme_table_lists_the_same_verdicts():
    text = (REPO / "data" / "configs" / "README.md").read_text()
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| public config"))
    columns = [c.strip() for c in lines[header].strip("|").split("|")]
    table = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
        table[cells["public config"]] = cells
    where = "data/configs/README.md's public config table (a row per case) and data/configs/public/expected.yaml"
    assert set(table) == set(CASES), f"{where} list different cases: {sorted(set(table) ^ set(CASES))}"
    for case, expected in EXPECTED.items():
        row = table[case]
        assert int(row["exit"]) == expected["exit"], f"{case}: {where} give different exit statuses"
        listed = {k: row[k] for k in review.KNOBS if row.get(k, "—") not in ("—", "", "refused")}
        differs = expected.get("reviewer_differs") or {}
        shown = {  # a hand-worked verdict the reviewer does not reach reads "wrong (reviewer: unjustified)"
            k: f"{v} (reviewer: {differs[k]['reviewer']})" if k in differs else v
            for k, v in expected.get("verdicts", {}).items()
        }
        assert listed == shown, f"{case}: {where} give different verdicts"
