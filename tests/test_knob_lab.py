"""The knob lab as a notebook: every section asks for a prediction before the table that reveals it, says
only what its data show (no simulated row for a split vLLM refuses), and reads its noise band from the
measured result (bench/noise_band.py). Pure and fast: the built notebook, the recorded records, no server.
"""

from __future__ import annotations

import ast
import json
import re

import nbformat
import pytest

from servelab import knobs
from servelab.grading import course
from servelab.knobs import parallel
from servelab.knobs.noise import NoiseBand
from servelab.lab.knobs import predict
from servelab.paths import REPO_DIR

pytestmark = pytest.mark.unit

LAB = course.get("knoblab")
STUDENT = nbformat.read(LAB.student, as_version=4)
CELLS = {c.get("id"): c for c in STUDENT.cells}
IDS = [c.get("id") for c in STUDENT.cells]
TEXT = " ".join(" ".join(c.source.split()) for c in STUDENT.cells)
# a section's cell id -> its knob
SECTIONS = {
    "knob-batching": "batching",
    "knob-prefix": "prefix_caching",
    "knob-precision": "precision",
    "knob-speculation": "speculation",
    "knob-kv": "kv_cache",
    "knob-parallelism": "parallelism",
}


def _prediction(section: str) -> tuple[str, dict]:
    """The prediction cell's variable and the dict it sets, read without running it."""
    tree = ast.parse(CELLS[f"{section}-prediction"].source)
    (assign,) = tree.body
    assert isinstance(assign, ast.Assign)
    return assign.targets[0].id, ast.literal_eval(assign.value)


def test_every_knob_has_a_section_and_a_set_of_questions():
    assert sorted(SECTIONS.values()) == sorted(knobs.KNOBS) == sorted(predict.QUESTIONS)


@pytest.mark.parametrize("section, knob", SECTIONS.items())
def test_each_section_asks_for_a_prediction_before_its_table_then_sets_it_beside_the_result(section, knob):
    order = [IDS.index(f"{section}{part}") for part in ("", "-prediction", "-measured", "-result")]
    assert order == sorted(order) and order == list(range(order[0], order[0] + 4)), order
    question = CELLS[section].source
    assert "Predict before" in question
    assert "|---" not in question and "Measured" not in question  # nothing measured is shown before the prediction
    assert "|---" in CELLS[f"{section}-measured"].source  # the table is the reveal
    name, prediction = _prediction(section)
    assert list(prediction) == [q.key for q in predict.QUESTIONS[knob]]
    assert all(v is None for v in prediction.values())  # the learner fills them
    assert CELLS[f"{section}-result"].source.strip() == f'lab.prediction_vs_result("{knob}", {name})'


@pytest.mark.parametrize("section", SECTIONS)
def test_no_section_title_gives_its_answer_away(section):
    title = CELLS[section].source.splitlines()[0].lower()
    for verdict in ("too small", "too big", "faster", "slower", "pays", "loses", "gains", "wins", "refuse", "no gain"):
        assert not re.search(rf"\b{verdict}\b", title), title


@pytest.mark.unit(False)  # builds the lab's charts: about 1 s of CPU
def test_the_predictions_run_against_the_recorded_results_offline(tmp_path):
    from servelab.lab import KnobLab
    from servelab.results import ResultsStore

    if not knobs.recorded_path().is_file():
        pytest.skip("the knob benchmark is not recorded yet: run bench/knobs.py")
    lab = KnobLab(store=ResultsStore(tmp_path / "results.jsonl"), offline="testing")
    for section, knob in SECTIONS.items():
        _, prediction = _prediction(section)
        rows = lab.prediction_vs_result(knob, {k: 1.0 for k in prediction}).rows
        assert [r.question.key for r in rows] == list(prediction)
        for r in rows:
            if knob == "parallelism" and not r.question.simulated:
                assert r.result is None and "refuses tensor-parallel-size 2" in r.source  # nothing to show, said so
            elif r.question.simulated:
                assert r.result and r.source.startswith("simulated") and "not measured" in r.source
            else:
                assert r.result and r.source.startswith("recorded on the course's machine")


def _band(factor: float = 1.5) -> NoiseBand:
    return NoiseBand(
        factor, "ttft_ms_p99", "batching", "max_num_seqs=256", "a load", 8, 4, "a CPU", (1.0, 2.0), "v", "t"
    )


def _rows(predicted: float, measured_ratio: float, band: NoiseBand | None):
    records = {"max_num_seqs=256": {"ttft_ms_p99": 100.0}, "max_num_seqs=4": {"ttft_ms_p99": 100.0 * measured_ratio}}
    records["max_num_batched_tokens=256"] = records["max_num_seqs=256"]
    return predict.compare("batching", {"max_num_seqs=4": predicted}, lambda s: (records[s], "measured here"), band)


def test_a_prediction_is_read_for_its_direction_then_its_size_and_the_band_is_no_difference():
    (row, _) = _rows(7.0, 7.1, _band())
    assert predict.verdict(row).startswith("right: higher")
    (row, _) = _rows(2.0, 7.1, _band())
    assert "right direction (higher)" in predict.verdict(row) and "too low" in predict.verdict(row)
    (row, _) = _rows(0.5, 7.1, _band())
    assert predict.verdict(row) == "predicted lower, the result was higher"
    # a result inside the band is no difference: predicting "no change" is right, predicting a change is not
    (row, _) = _rows(1.0, 1.2, _band(1.5))
    assert predict.verdict(row).startswith("right: no difference")
    (row, _) = _rows(1.3, 1.2, None)  # with no band at hand every difference counts
    assert predict.verdict(row).startswith("right: higher")
    (_, untouched) = _rows(1.0, 1.2, _band())
    assert predict.verdict(untouched) == "no prediction given"


@pytest.mark.parametrize("value", [0, -1, True, "4", float("nan")])
def test_a_prediction_that_is_not_a_factor_says_what_it_should_be(value):
    with pytest.raises(ValueError, match="positive number"):
        _rows(value, 1.0, None)


def test_a_prediction_with_a_key_the_section_does_not_ask_is_refused():
    with pytest.raises(ValueError, match="keys it should not"):
        predict.compare("batching", {"max_num_seqs=8": 2}, lambda s: (None, ""), None)


# --- parallelism: only what is true ---------------------------------------------------------------------
def test_no_simulated_row_is_of_a_split_vllm_refuses_and_none_claims_to_be_measured():
    measured = CELLS["knob-parallelism-measured"].source
    assert 'vLLM refused tensor-parallel-size 2 for this model: "Total number of attention heads (9)' in measured
    rows = [line for line in measured.splitlines() if line.startswith("| ") and " / " in line]
    assert rows and "| simulated |" in measured and "simulated, not measured" in measured
    assert not [r for r in rows if "SmolLM2" in r]  # 9 heads: no tp=2 of it exists, here or anywhere
    for row in rows:
        model = next(m for where, m, *_ in parallel.CASES if row.startswith(f"| {where} |"))
        assert parallel.refusal(model, 2) == ""
    assert parallel.refusal("SmolLM2-135M", 2) and parallel.refusal("SmolLM2-135M", 3) == ""


def test_what_the_parallelism_section_says_is_what_its_simulated_rows_show():
    record = knobs.latest(json_records(), "parallelism", "tp=1")
    rows = parallel.simulated_rows(record["roofline"])
    cpu, gpu = (rows[where] for where, *_ in parallel.CASES)
    assert all(r["tp2_tok_s"] <= 1.05 * r["tp1_tok_s"] for r in cpu)  # one memory bus: nothing gained
    assert all(r["tp1_tok_s"] < r["tp2_tok_s"] < 2 * r["tp1_tok_s"] for r in gpu)  # a gain, short of 2x
    text = " ".join(CELLS["knob-parallelism-measured"].source.split())
    assert "nothing gained" in text and "short of 2x" in text


def json_records() -> list[dict]:
    from servelab.results import ResultsStore

    if not knobs.recorded_path().is_file():
        pytest.skip("the knob benchmark is not recorded yet: run bench/knobs.py")
    return ResultsStore(knobs.recorded_path()).read()


# --- the noise band: measured, one home -------------------------------------------------------------------
def test_the_noise_band_is_the_widest_spread_of_its_own_recorded_runs():
    path = REPO_DIR / "bench" / "results" / "noise_band.json"
    r = json.loads(path.read_text())
    assert r["repeats"] >= len(r["runs"]) >= 2 * r["servers"] >= 4 and r["machine"]["cpu"] and r["versions"]["vllm"]
    assert {run["server"] for run in r["runs"]} == set(range(r["servers"]))  # servers started afresh
    spreads = {}
    for metric in ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "output_tok_s"):
        values = [run[metric] for run in r["runs"]]
        spreads[metric] = max(values) / min(values)
    assert r["band"]["factor"] == pytest.approx(max(spreads.values()), rel=1e-3)
    band = knobs.noise_band()
    assert band is not None and band.factor == r["band"]["factor"] and band.repeats == r["repeats"]


def test_the_lab_quotes_the_measured_band_with_its_provenance_and_no_other():
    band = knobs.noise_band()
    assert band is not None
    assert f"less than about {band.factor:.2g}x as possibly noise" in TEXT
    assert " ".join(band.provenance().split()) in TEXT
    assert "about 2x" not in TEXT.replace(f"about {band.factor:.2g}x", "")  # the unmeasured 2x is gone
    quoted = [
        float(x)
        for pattern in (
            r"moved by up to ([\d.]+)x",
            r"against one setting's ([\d.]+)x",
            r"noise band \(([\d.]+)x, section 2\)",
            r"the ([\d.]+)x one setting moved by",
        )
        for x in re.findall(pattern, TEXT)
    ]
    assert len(quoted) >= 3 and set(quoted) == {float(f"{band.factor:.2g}")}, quoted
