"""vLLM's acceptance counters turned into the lesson's a, E and break-even batch: pure arithmetic."""

import json

import pytest

from servelab import acceptance, hardware, simulate
from servelab.paths import data_dir

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("a, k", [(0.0, 4), (0.5, 1), (0.7, 4), (0.9, 8), (0.999, 3)])
def test_per_token_acceptance_inverts_the_lessons_formula(a, k):
    e = simulate.expected_tokens_per_step(a, k)
    assert acceptance.per_token_acceptance(e, k) == pytest.approx(a, abs=1e-9)


@pytest.mark.parametrize("length, k", [(0.5, 4), (5.5, 4), (2.0, 0)])
def test_impossible_counters_say_what_to_check(length, k):
    with pytest.raises(ValueError, match="between 1 and|1 or more"):
        acceptance.per_token_acceptance(length, k)


def test_vllms_ratio_is_lower_than_the_lessons_a():
    # 0.75 accepted / drafted at k = 4 is E = 4.0 tokens per step: a is about 0.89, not 0.75
    acc = acceptance.from_record(
        {"num_speculative_tokens": 4, "acceptance_rate": 0.75, "batch_size": 64, "dtype": "bfloat16"},
        hw=hardware.get("H200"),
    )
    assert acc.mean_acceptance_length == pytest.approx(4.0)
    assert 0.88 < acc.acceptance_rate < 0.90
    ridge = hardware.get("H200").ridge_tokens_per_step(2)
    assert acc.break_even_batch == pytest.approx(ridge * 4.0 / 5)


def test_the_labs_recorded_runs_give_a_near_0_9():
    records = [json.loads(line) for line in (data_dir() / "measurements" / "flip-cpu.jsonl").open()]
    accs = acceptance.from_records(records)
    assert accs, "the lab's recorded runs carry speculation counters"
    assert all(0.8 < x.acceptance_rate < 0.97 and x.acceptance_rate > x.draft_acceptance_rate for x in accs)
    assert acceptance.from_record({"method": "none", "num_speculative_tokens": 0}) is None
    assert "break-even batch" in acceptance.table(accs)


def test_the_lab_turns_the_learners_own_records_into_a_with_one_call():
    import nbformat

    from servelab.grading import course

    nb = nbformat.read(course.get("lab25").source, as_version=4)
    cell = next(c for c in nb.cells if c.get("id") == "acceptance")
    assert "acceptance.from_records(" in cell.source and "lab.book.all_records()" in cell.source
    assert len(cell.source.splitlines()) <= 10, "the computation belongs in servelab.acceptance"
    text = "\n".join(c.source for c in nb.cells)
    assert "{{" not in text, "every measured place is filled from bench/results/"
