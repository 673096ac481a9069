"""Rep 2 is built from the learner's own measurements: the course's recordings (data/measurements/), a point the
lab labels as recorded on the course's machine, and a record that does not say which machine measured it are
refused by the lab's comparison() and by the grader's checker, with both labs' real keys; a learner's own record,
fingerprinted by the machine that measured it, still earns every point."""

from __future__ import annotations

import json

import pytest
from records_helpers import LEARNER_MACHINE, comparison_record

from servelab import provenance
from servelab.grading import checkers, trusted
from servelab.lab import KnobLab, SpecDecodeLab, rep2
from servelab.measurement import Measurement
from servelab.results import ResultsStore

pytestmark = pytest.mark.unit

RECORDINGS = provenance.recordings_dir()


def _key(lab: str) -> dict:
    return trusted.load_key_module(lab).TESTS["rep2-test"][1]


def _shipped(name: str) -> list[dict]:
    return [json.loads(line) for line in (RECORDINGS / name).read_text().splitlines() if line.strip()]


def _flip_pair(batch: int = 64) -> list[dict]:
    def one(method: str) -> dict:
        return next(
            r
            for r in _shipped("flip-cpu.jsonl")
            if r["method"] == method
            and r["batch_size"] == batch
            and r["workload"] == "copy"
            and r["output_len"] == 64
            and r["num_speculative_tokens"] == (4 if method == "ngram" else 0)
        )

    return [one("none"), one("ngram")]


def _spec_answer(records: list[dict]) -> dict:
    return {
        "knob": "speculative_decoding",
        "slo_metric": "output_tok_s",
        "measurements": records,
        "better": 0 if records[0]["output_tok_s"] >= records[1]["output_tok_s"] else 1,
        "conclusion": "Throughput is the SLO at batch 64 and speculation lowers it, so turn it off.",
    }


def _knob_answer(records: list[dict]) -> dict:
    return {
        "knob": "batching",
        "slo_metric": "ttft_ms_p99",
        "measurements": records,
        "better": 0 if records[0]["ttft_ms_p99"] <= records[1]["ttft_ms_p99"] else 1,
        "conclusion": "Keep max_num_seqs at 256: a cap of 4 queues the 20 users and their wait lands in p99 TTFT.",
    }


def _refused(result, says: str) -> None:
    assert result.points == 0, result.feedback
    assert "not-own-measurement" in result.slips
    assert says in result.feedback and "click Measure" in result.feedback


def test_every_shipped_recording_is_known_to_the_checker_by_its_content():
    """Each record of each file in data/measurements/ is one of the course's, whatever its machine field says."""
    files = sorted(RECORDINGS.glob("*.jsonl"))
    assert {f.name for f in files} >= {"flip-cpu.jsonl", "compiled-cpu.jsonl", "knobs-cpu.jsonl"}
    for f in files:
        for r in _shipped(f.name):
            assert provenance.is_shipped(r) and provenance.is_shipped(dict(r, machine=LEARNER_MACHINE))
            assert provenance.problem(dict(r, machine=LEARNER_MACHINE)), f.name
    # a copy with the labels and the timestamp changed is still the course's run; so is one number changed
    r = _shipped("flip-cpu.jsonl")[0]
    assert provenance.is_shipped(dict(r, timestamp="2026-12-01T10:00:00+00:00", machine=LEARNER_MACHINE, note="mine"))
    assert provenance.is_shipped(dict(r, ttft_ms_p99=r["ttft_ms_p99"] + 1))
    assert not provenance.is_shipped(comparison_record("none", 0, 80.5))


@pytest.mark.parametrize(
    "stamp, says",
    [
        ({}, "one of the course's recorded points"),  # as the file has it: no machine
        ({"machine": LEARNER_MACHINE}, "one of the course's recorded points"),  # relabelled as the learner's
        ({"machine": provenance.COURSE_MACHINE}, "one of the course's recorded points"),  # as lab.record gives it
    ],
)
def test_the_spec_decode_key_refuses_the_course_recordings(stamp, says):
    records = [dict(r, **stamp) for r in _flip_pair()]
    _refused(checkers.measured_comparison(_spec_answer(records), _key("lab25")), says)


def test_the_knob_key_refuses_the_course_recordings():
    records = _shipped("knobs-cpu.jsonl")[:2]  # batching: max_num_seqs=256 and =4
    assert [r["knob_setting"] for r in records] == ["max_num_seqs=256", "max_num_seqs=4"]
    _refused(checkers.measured_comparison(_knob_answer(records), _key("knoblab")), "course's recorded points")
    relabelled = [dict(r, machine=LEARNER_MACHINE) for r in records]
    _refused(checkers.measured_comparison(_knob_answer(relabelled), _key("knoblab")), "course's recorded points")


def test_a_record_that_does_not_say_which_machine_measured_it_is_refused():
    own = [comparison_record("none", 0, 168.2, batch_size=64), comparison_record("ngram", 4, 87.5, batch_size=64)]
    unstamped = [dict(own[0], machine=""), own[1]]
    result = checkers.measured_comparison(_spec_answer(unstamped), _key("lab25"))
    _refused(result, "record a: it does not say which machine measured it")
    assert "record b" not in result.feedback  # the learner's own record b is not blamed


def test_the_learners_own_records_still_earn_every_point_with_both_keys():
    own = [comparison_record("none", 0, 168.2, batch_size=64), comparison_record("ngram", 4, 87.5, batch_size=64)]
    result = checkers.measured_comparison(_spec_answer(own), _key("lab25"))
    assert result.points == 4 and not result.slips, result.feedback
    knob = [
        comparison_record("none", 0, 80.0, knob="batching", knob_setting="max_num_seqs=256", ttft_ms_p99=380.0),
        comparison_record("none", 0, 60.0, knob="batching", knob_setting="max_num_seqs=4", ttft_ms_p99=2700.0),
    ]
    knob = [dict(r, engine_config={"server_args": [r["knob_setting"]]}) for r in knob]
    result = checkers.measured_comparison(_knob_answer(knob), _key("knoblab"))
    assert result.points == _key("knoblab")["points"] and "not-own-measurement" not in result.slips, result.feedback


def test_the_recorders_fingerprint_the_machine():
    """Every path that measures a record writes which machine measured it (servelab.cpu_usage)."""
    from servelab import cpu_usage

    fingerprint = cpu_usage.machine_fingerprint("Intel(R) Xeon(R) Processor", 2)
    assert fingerprint.startswith("Intel(R) Xeon(R) Processor; 2 cores; host ")
    assert provenance.problem(comparison_record("none", 0, 80.5, machine=fingerprint)) is None


@pytest.mark.unit(False)  # opens the lab, which calibrates this CPU's simulator on the recording: about 1 s of CPU
def test_the_spec_decode_lab_offline_refuses_to_build_rep2_from_the_recording(tmp_path, monkeypatch, capsys):
    """Repro: offline, with an empty results store, lab.record gives the course's points; comparison refuses them."""
    monkeypatch.setenv("SERVELAB_OFFLINE", "1")
    lab = SpecDecodeLab(store=ResultsStore(tmp_path / "results.jsonl"))
    try:
        a = lab.record(method="none", batch_size=64)
        b = lab.record(method="ngram", num_speculative_tokens=4, batch_size=64)
        assert a["machine"] == provenance.COURSE_MACHINE  # the recording stands in, and says so
        with pytest.raises(ValueError, match="one of the course's recorded points.*click Measure"):
            lab.comparison("speculative_decoding", a, b, slo_metric="output_tok_s")
        assert "Paste this" not in capsys.readouterr().out
        # relabelling the recorded points as this machine's does not get them in either
        with pytest.raises(ValueError, match="course's recorded points"):
            rep2.comparison("speculative_decoding", dict(a, machine=LEARNER_MACHINE), b, "output_tok_s")
    finally:
        lab.worker.close()


def test_the_knob_lab_refuses_to_build_rep2_from_the_recording(tmp_path):
    lab = KnobLab(store=ResultsStore(tmp_path / "results.jsonl"), offline="testing")
    lab.knob_dropdown.value = "batching"
    a, b = lab.record("max_num_seqs=256"), lab.record("max_num_seqs=4")  # the course's, from knobs-cpu.jsonl
    with pytest.raises(ValueError, match="course's recorded points.*click Measure"):
        lab.comparison(a, b, slo_metric="ttft_ms_p99", better=0)
    with pytest.raises(ValueError, match="course's recorded points"):
        rep2.comparison("batching", *_shipped("knobs-cpu.jsonl")[:2], "ttft_ms_p99", better=0)


def test_rep2_builds_a_comparison_from_the_learners_own_records():
    own = [comparison_record("none", 0, 168.2, batch_size=64), comparison_record("ngram", 4, 87.5, batch_size=64)]
    value = rep2.comparison("speculative_decoding", *own, "output_tok_s", better=0, conclusion="Turn it off.")
    assert [Measurement.from_dict(r).machine for r in value["measurements"]] == [LEARNER_MACHINE] * 2
