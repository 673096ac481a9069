"""The checkers: pure (answer, key) -> (points, feedback), feedback that names the slip, never a crash."""

import math

import pytest
from records_helpers import comparison_record

from servelab import hardware, modelspec, simulate
from servelab.grading import checkers, keys

pytestmark = pytest.mark.unit

LLAMA_8B = modelspec.preset("Llama-3.1-8B")
H200 = hardware.get("H200")


# --------------------------------------------------------------------------- number


def test_number_full_points_within_tolerance():
    key = keys.kv_bytes_per_token("Llama-3.1-8B", "bfloat16", points=2)
    assert key["value"] == 2 * 32 * 8 * 128 * 2 == LLAMA_8B.kv_bytes_per_token("bfloat16")
    assert checkers.number(131072, key) == (2, checkers.number(131072, key).feedback)
    assert checkers.number(131072 * 1.005, key).points == 2
    assert checkers.number(131072 * 1.05, key).points == 0


@pytest.mark.parametrize(
    "wrong, says",
    [
        (131072 * 32 / 8, "32 attention heads"),  # attention heads for KV heads
        (131072 / 32, "every one of the 32 layers"),
        (131072 * 8, "bits"),
        (131072 * 2, "float32"),
    ],
)
def test_number_names_the_slip(wrong, says):
    points, feedback = checkers.number(wrong, keys.kv_bytes_per_token("Llama-3.1-8B"))
    assert points == 0 and says in feedback


def test_number_names_every_slip_that_fits():
    # In bf16, forgetting K-and-V and forgetting bytes per value both halve the answer.
    _, feedback = checkers.number(65536, keys.kv_bytes_per_token("Llama-3.1-8B"))
    assert "K and V" in feedback and "bytes per value" in feedback


def test_number_unknown_wrong_value_still_teaches():
    points, feedback = checkers.number(1.0, keys.kv_bytes_per_token("Llama-3.1-8B"))
    assert points == 0 and "too low" in feedback and "num_kv_heads" in feedback


@pytest.mark.parametrize("answer", ["131072", None, True, [131072], {"v": 1}, math.nan, math.inf])
def test_number_rejects_non_numbers(answer):
    points, feedback = checkers.number(answer, keys.kv_bytes_per_token("Llama-3.1-8B"))
    assert points == 0 and feedback


def test_number_is_not_fooled_by_a_custom_object():
    class AlwaysEqual(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

    points, _ = checkers.number(AlwaysEqual(1.0), keys.kv_bytes_per_token("Llama-3.1-8B"))
    assert points == 0

    class Sneaky:
        def __eq__(self, other):
            return True

    assert checkers.number(Sneaky(), keys.kv_bytes_per_token("Llama-3.1-8B")).points == 0


def test_keys_come_from_servelab():
    assert keys.kv_bytes("Llama-3.1-8B", 8192, 32)["value"] == LLAMA_8B.kv_bytes(8192, 32, "bfloat16")
    assert keys.ridge_flop_per_byte("H200")["value"] == pytest.approx(H200.ridge_flop_per_byte)
    assert keys.ridge_tokens_per_step("H200")["value"] == pytest.approx(H200.ridge_tokens_per_step(2))
    assert keys.tokens_per_verify_step(0.7, 4)["value"] == pytest.approx(simulate.expected_tokens_per_step(0.7, 4))
    assert keys.verified_tokens_per_step(64, 4)["value"] == 320
    assert keys.is_compute_bound(64, 4, "H200")["value"] is True
    assert keys.is_compute_bound(16, 4, "H200")["value"] is False


@pytest.mark.parametrize(
    "key_fn, wrong, says",
    [
        (lambda: keys.kv_bytes("Llama-3.1-8B", 8192, 32), 131072 * 8192, "every sequence keeps its own"),
        (lambda: keys.ridge_flop_per_byte("H200"), 4.8e12 / 989e12, "bytes per FLOP"),
        (lambda: keys.ridge_tokens_per_step("H200"), 206.04 * 2, "2 FLOP per parameter"),
        (lambda: keys.tokens_per_verify_step(0.7, 4), 5, "every draft token is accepted"),
        (lambda: keys.tokens_per_verify_step(0.7, 4), 1 + 0.7 * 4, "draft acceptance rate"),
        (lambda: keys.verified_tokens_per_step(64, 4), 256, "k + 1 positions"),
    ],
)
def test_keys_teach_the_common_slips(key_fn, wrong, says):
    points, feedback = checkers.number(wrong, key_fn())
    assert points == 0 and says in feedback


# --------------------------------------------------------------------------- choice, yes/no, selection, fields

CHOICE = {
    "name": "q",
    "points": 1,
    "correct": "b",
    "options": {"a": "a is wrong because A.", "b": "b is right.", "c": "c is wrong because C."},
}


def test_choice():
    assert checkers.choice("b", CHOICE).points == 1
    assert checkers.choice(" B ", CHOICE).points == 1
    assert checkers.choice("(b)", CHOICE).points == 1
    points, feedback = checkers.choice("c", CHOICE)
    assert points == 0 and "because C" in feedback
    assert checkers.choice("e", CHOICE).points == 0
    assert checkers.choice(2, CHOICE).points == 0


def test_choice_ignores_a_string_that_equals_everything():
    class Liar(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    assert checkers.choice(Liar("a"), CHOICE).points == 0


def test_yes_no():
    key = keys.is_compute_bound(64, 4, "H200", points=1)
    assert checkers.yes_no(True, key).points == 1
    points, feedback = checkers.yes_no(False, key)
    assert points == 0 and "past the ridge" in feedback
    assert checkers.yes_no(1, key).points == 0  # 1 is not True here


SELECTION = {
    "name": "s",
    "points": 2,
    "correct": ["x", "y"],
    "options": {"x": "x matters.", "y": "y matters.", "z": "z is a distractor."},
}


@pytest.mark.parametrize(
    "answer, points",
    [
        (["x", "y"], 2),
        (["x"], 1),
        (["x", "z"], 0),
        (["x", "y", "z"], 0),
        ([], 0),
        (["z"], 0),
    ],
)
def test_selection_share_right_minus_share_wrong(answer, points):
    assert checkers.selection(answer, SELECTION).points == points


def test_selection_explains_wrong_and_missed():
    _, feedback = checkers.selection(["x", "z"], SELECTION)
    assert "distractor" in feedback and "y matters" in feedback
    assert checkers.selection(["nope"], SELECTION).points == 0
    assert checkers.selection("x", SELECTION).points == 0


FIELDS = {
    "name": "f",
    "points": 3,
    "fields": {
        "knob": {"expect": "batching", "also": ["batch_size"], "feedback": "the batching knob"},
        "miss": {"expect": 700, "rel_tol": 0.01, "feedback": "1200 - 500"},
        "met": {"expect": False, "feedback": "it misses"},
    },
}


def test_fields_share_points_and_name_wrong_parts():
    assert checkers.fields({"knob": "batching", "miss": 700, "met": False}, FIELDS).points == 3
    assert checkers.fields({"knob": "Batch-Size", "miss": 700.0, "met": False}, FIELDS).points == 3
    points, feedback = checkers.fields({"knob": "batching", "miss": 1200, "met": 0}, FIELDS)
    assert points == 1 and "1200 - 500" in feedback and "it misses" in feedback
    assert checkers.fields(["batching"], FIELDS).points == 0
    assert checkers.fields({}, FIELDS).points == 0


def test_report_prints_feedback_and_returns_points(capsys):
    assert checkers.report(checkers.Result(1.23456, "well done")) == 1.235
    assert "well done" in capsys.readouterr().out


def test_points_never_exceed_the_key():
    # nbgrader refuses partial credit above a cell's points, so no checker may return more.
    assert checkers.selection(["x", "y"], {**SELECTION, "points": 1}).points == 1
    assert checkers.fields({"knob": "batching", "miss": 700, "met": False}, {**FIELDS, "points": 0.5}).points == 0.5


# --------------------------------------------------------------------------- knob audit

AUDIT_KEY = {
    "name": "audit",
    "points": 4,
    "verdicts": {
        "batching": "unjustified",
        "parallelism": "wrong",
        "quantization": "justified",
        "max_model_len": "justified",
    },
    "reasons": {
        "batching": "no TTFT measured at batch 32",
        "parallelism": "141 GB does not fit 127 GB",
        "quantization": "bf16",
        "max_model_len": "covers the longest request",
    },
}
GOOD_AUDIT = {
    "batching": {"verdict": "unjustified", "because": "no latency measured at this batch"},
    "parallelism": {"verdict": "wrong", "because": "the weights do not fit one GPU"},
    "quantization": {"verdict": "justified", "because": "bf16 has no accuracy trade"},
    "max_model_len": {"verdict": "justified", "because": "covers the longest request seen"},
}


def test_knob_audit_full_and_partial():
    assert checkers.knob_audit(GOOD_AUDIT, AUDIT_KEY).points == 4
    wrong = {**GOOD_AUDIT, "batching": {"verdict": "justified", "because": "32 slots cover 24 users"}}
    points, feedback = checkers.knob_audit(wrong, AUDIT_KEY)
    assert points == 3 and "no TTFT measured at batch 32" in feedback
    terse = {**GOOD_AUDIT, "parallelism": {"verdict": "Wrong", "because": ""}}
    points, feedback = checkers.knob_audit(terse, AUDIT_KEY)
    assert points == 3.5 and "missing measurement" in feedback
    missing = {k: v for k, v in GOOD_AUDIT.items() if k != "quantization"}
    assert checkers.knob_audit(missing, AUDIT_KEY).points == 3
    assert checkers.knob_audit({**GOOD_AUDIT, "prefix_caching": {"verdict": "justified"}}, AUDIT_KEY).points == 4
    assert checkers.knob_audit({"batching": {"verdict": "great"}}, AUDIT_KEY).points == 0
    assert checkers.knob_audit("all justified", AUDIT_KEY).points == 0


def test_knob_audit_key_comes_from_the_reviewer():
    from servelab import review

    case = "70b-upgrade-h200"
    key = keys.knob_audit(keys.config_path(case), keys.workload_path(case), points=4)
    report = review.review_files(keys.config_path(case), keys.workload_path(case))
    graded_once = {**key["verdicts"], **{k: report.verdicts()[k] for k in key["follows"]}}
    assert graded_once == report.verdicts()
    assert set(key["verdicts"].values()) == {"justified", "unjustified", "wrong"}, "the audit case should mix verdicts"
    # the weights that do not fit are one fault (parallelism), not two
    assert key["follows"] == {"gpu_memory_utilization": "parallelism"}


@pytest.mark.parametrize(
    "because, full",
    [
        ("no TTFT was measured at batch 32 against the SLO", True),
        ("max-num-seqs 32 covers the peak of 24 users", True),
        ("nobody measured latency at this load", True),
        ("this looks fine to me", False),
        ("I checked it very carefully", False),
        ("it is just not justified at all", False),
        ("unmeasured", False),
    ],
)
def test_knob_audit_reason_must_name_a_fact(because, full):
    answer = {**GOOD_AUDIT, "batching": {"verdict": "unjustified", "because": because}}
    points, feedback = checkers.knob_audit(answer, AUDIT_KEY)
    assert points == (4 if full else 3.5), feedback


def test_knob_audit_grades_a_repeated_fault_once():
    key = {
        **AUDIT_KEY,
        "follows": {"gpu_memory_utilization": "parallelism"},
        "reasons": {**AUDIT_KEY["reasons"], "gpu_memory_utilization": "weights exceed what vLLM may use"},
    }
    answer = {**GOOD_AUDIT, "gpu_memory_utilization": {"verdict": "justified", "because": "0.9 is the default"}}
    points, feedback = checkers.knob_audit(answer, key)
    assert points == 4 and "graded once, under parallelism" in feedback and "not graded" not in feedback


# --------------------------------------------------------------------------- measured comparison


_record = comparison_record


def _comparison(**overrides) -> dict:
    answer = {
        "knob": "speculative_decoding",
        "slo_metric": "output_tok_s",
        "measurements": [_record("none", 0, 80.5), _record("ngram", 4, 63.7)],
        "better": 0,
        "conclusion": "At batch 8 speculation lowers throughput, so leave it off for this SLO.",
    }
    answer.update(overrides)
    return answer


KEY = {"name": "comparison", "points": 4, "configured": "speculative"}  # as grading/keys/lab25.py


def test_measured_comparison_full_marks():
    points, feedback = checkers.measured_comparison(_comparison(), KEY)
    assert points == 4, feedback


def test_measured_comparison_conclusion_must_follow_from_own_numbers():
    # the conclusion carries the rep: against the learner's own numbers, the records' checks earn nothing either
    points, feedback = checkers.measured_comparison(_comparison(better=1), KEY)
    assert points == 0 and "(setting 0) is better" in feedback and "carries this rep" in feedback
    # for a latency metric lower is better: setting 0 has the lower TPOT
    assert checkers.measured_comparison(_comparison(slo_metric="tpot_ms_p50", better=0), KEY).points == 4
    assert checkers.measured_comparison(_comparison(slo_metric="tpot_ms_p50", better=1), KEY).points == 0


def test_measured_comparison_arithmetic():
    bad = _record("none", 0, 120.0, output_tok_s=80.5)
    points, feedback = checkers.measured_comparison(_comparison(measurements=[bad, _record("ngram", 4, 63.7)]), KEY)
    assert points == 3 and "output_tokens / elapsed_s" in feedback


def test_measured_comparison_plausibility():
    fast = _record("none", 0, 8000.0)
    points, feedback = checkers.measured_comparison(_comparison(measurements=[fast, _record("ngram", 4, 63.7)]), KEY)
    assert points == 3 and "not plausible" in feedback and "roofline" in feedback
    # a right conclusion is worth half the rep, each record check a quarter
    assert checkers.COMPARISON_SLIPS["implausible"] and checkers.CONCLUSION_SHARE == 0.5


@pytest.mark.parametrize(
    "overrides, says",
    [
        ({"measurements": [_record("none", 0, 80.5)]}, "two Measurement"),
        ({"measurements": [_record("none", 0, 80.5), _record("none", 0, 80.5)]}, "same settings"),
        (
            {"measurements": [_record("none", 0, 80.5), _record("ngram", 4, 63.7, workload="open")]},
            "differ in workload",
        ),
        ({"measurements": [{"method": "none"}, _record("ngram", 4, 63.7)]}, "missing fields"),
        ({"slo_metric": "vibes"}, "slo_metric"),
        ({"better": "first"}, "better must be 0 or 1"),
    ],
)
def test_measured_comparison_schema(overrides, says):
    points, feedback = checkers.measured_comparison(_comparison(**overrides), KEY)
    assert points == 0 and says in feedback


def test_measured_comparison_wants_a_sentence():
    points, feedback = checkers.measured_comparison(_comparison(conclusion="off"), KEY)
    assert points == 0 and "in a sentence" in feedback
    assert checkers.measured_comparison(_comparison(conclusion="Disable it."), KEY).points == 4


# --------------------------------------------------------------------------- rollout plan

PLAN = {
    "change": "float16 -> int8",
    "canary_fraction": 0.05,
    "canary_hours": 24,
    "stages": [0.05, 0.25, 1.0],
    "metrics": ["ttft_ms_p99", "output_tok_s", "eval_gate_acceptance_rate"],
    "rollback_triggers": [
        {"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"},
        {"metric": "eval_gate_acceptance_rate", "threshold": 0.97, "direction": "below"},
    ],
    "notify": ["eval gate owners", "client teams"],
}


def test_rollout_plan_full_marks():
    points, feedback = checkers.rollout_plan(PLAN, {"points": 5})
    assert points == 5, feedback


@pytest.mark.parametrize(
    "change, says",
    [
        ({"canary_fraction": 0.5}, "canary"),
        ({"canary_hours": 0}, "canary"),
        ({"canary_hours": 2}, "daily peak"),
        ({"canary_hours": 24 * 30}, "still a canary"),
        ({"stages": [1.0]}, "stages"),
        ({"stages": [0.5, 0.25, 1.0]}, "stages"),
        (
            {
                "metrics": ["ttft_ms_p99", "output_tok_s"],
                "rollback_triggers": [{"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"}],
            },
            "drift",
        ),
        (
            {"rollback_triggers": [{"metric": "ttft_ms_p99", "threshold": "high", "direction": "above"}]},
            "rollback_triggers",
        ),
        ({"notify": []}, "notify"),
    ],
)
def test_rollout_plan_misses_a_part(change, says):
    points, feedback = checkers.rollout_plan({**PLAN, **change}, {"points": 5})
    assert points < 5 and says in feedback


def test_rollout_plan_rejects_non_dicts():
    assert checkers.rollout_plan("canary then rollout", {"points": 5}).points == 0


def test_checkers_never_raise_on_odd_answers():
    odd = [None, 0, "", [], {}, {"a": [1, {"b": None}]}, object(), lambda: 1, float("nan")]
    calls = [
        lambda a: checkers.number(a, keys.kv_bytes_per_token("Llama-3.1-8B")),
        lambda a: checkers.choice(a, CHOICE),
        lambda a: checkers.yes_no(a, keys.is_compute_bound(64, 4, "H200")),
        lambda a: checkers.selection(a, SELECTION),
        lambda a: checkers.fields(a, FIELDS),
        lambda a: checkers.knob_audit(a, AUDIT_KEY),
        lambda a: checkers.measured_comparison(a, KEY),
        lambda a: checkers.rollout_plan(a, {"points": 5}),
    ]
    for call in calls:
        for answer in odd:
            points, feedback = call(answer)
            assert points == 0 and isinstance(feedback, str) and feedback


# --------------------------------------------------------------------------- what a conclusion recommends

# Written as a learner would phrase a conclusion, before reading the checker's patterns: each one says
# speculation on, speculation off, or leaves the choice open (None: the checker must not guess).
CONCLUSIONS = [
    ("Speculation should be enabled at this batch.", "on"),
    ("I recommend enabling speculative decoding here.", "on"),
    ("Turn it on: TPOT p99 drops from 80 ms to 55 ms.", "on"),
    ("Keep ngram speculation on for this workload.", "on"),
    ("With it enabled TPOT fell 30%, so enable it.", "on"),
    ("Turning speculation on is worth it at batch 4.", "on"),
    ("It should not be disabled: the SLO is only met with it.", "on"),
    ("Speculation should not be enabled at this batch.", "off"),
    ("...so speculation should not be enabled at this batch", "off"),
    ("Speculation should never be enabled at batch 64.", "off"),
    ("With it enabled TPOT got worse, so we should not enable it.", "off"),
    ("With speculation enabled the p99 went up; I would not enable it.", "off"),
    ("I would keep it off.", "off"),
    ("Turning it on is not worth it here.", "off"),
    ("Leave speculation disabled.", "off"),
    ("Disable speculative decoding: it costs 12% TPOT at this batch.", "off"),
    ("Turn it off.", "off"),
    ("Don't enable spec decode at batch 64.", "off"),
    ("Do not turn speculation on for this job.", "off"),
    ("Enabling it isn't worth it: TPOT p99 rose from 40 to 46 ms.", "off"),
    ("Speculation does not pay at this batch, so switch it off.", "off"),
    ("Run without speculation.", "off"),
    ("Even though it was enabled in the seed config, I would not keep it on.", "off"),
    ("Enable it at batch 4 but not at batch 64.", "both"),  # with no batch to place it: a hedge
    ("Turn it on for short prompts, turn it off for long ones.", "both"),
    # recommendations without an enable/disable verb, double negatives, self-contradictions
    ("The configured choice (speculation on) is right at batch 64.", "on"),
    ("I recommend speculation at batch 64.", "on"),
    ("Speculation on is the better choice at batch 64 for throughput.", "on"),
    ("Use speculative decoding at batch 64; it is the faster configuration.", "on"),
    ("Speculation beats the baseline here, so the configured choice stands.", "on"),
    ("It would be wrong to disable speculation here.", "on"),
    ("Turning speculation off would be a mistake at batch 64.", "on"),
    ("Prefer n-gram speculation for this job.", "on"),
    ("Speculation on this CPU is slower at batch 64.", "off"),
    # the figures describe the runs; the recommendation is on (and against these numbers: no credit)
    (
        "Speculation on wins: 87.5 tok/s against 168.2 tok/s without it, so the SLO is served better with speculation.",
        "on",
    ),
    ("Speculation should be off at batch 64 because it is faster with speculation.", "both"),
    ("Enabling speculation was a mistake for this workload at batch 64; revert to plain decoding.", "off"),
    (
        "Speculative decoding is counterproductive at batch 64 (88 vs 168 tok/s); the configuration is mistaken "
        "to enable it.",
        "off",
    ),
    ("Spec decode OFF.", "off"),
    ("Plain decoding wins at batch 64.", "off"),
    ("Speculation is not faster here, so go back to plain decoding.", "off"),
    ("It would not be a mistake to disable speculation.", "off"),
    ("Switch to plain decoding at batch 64.", "off"),
    # a description of the config or of a run recommends nothing; a negation flips only what it governs
    ("The configuration enables n-gram speculation, but at this batch it should not be turned on.", "off"),
    ("The configuration enables n-gram speculation with k = 4.", None),
    ("Speculation made 88 tok/s against 168 tok/s without it.", None),
    ("There is no reason to disable speculation.", "on"),
    ("There is no reason to keep speculation on.", "off"),
    ("Disabling speculation is not something I would recommend.", "on"),
    ("Turn off speculation? No. Keep it.", "on"),
    ("It depends on the batch; measure again at peak.", None),
    ("The numbers are close; I can't tell.", None),
    ("", None),
]


@pytest.mark.parametrize("conclusion, says", CONCLUSIONS)
def test_recommends_reads_the_conclusion_as_written(conclusion, says):
    assert checkers._recommends(conclusion) == says


@pytest.mark.parametrize(
    "conclusion, batch, says",
    [
        ("Enable it only below batch 8; at 64 it should be off.", 64, "off"),
        ("Enable it only below batch 8; at 64 it should be off.", 4, "on"),
        ("Enable it at batch 4 but not at batch 64.", 64, "off"),
        ("Enable it at batch 4 but not at batch 64.", 4, "on"),
        ("Use speculation up to batch 2 and switch it off from batch 4 upward.", 64, "off"),
        ("Speculation should be off at low batch and on at high batch.", 64, "on"),
        ("Speculation should be off at low batch and on at high batch.", 1, "off"),
        ("Turning it off is what I would do at batch 1, but at 64 keep it.", 64, "on"),
        ("Enable it only below batch 16; above that, turn it off.", 8, "on"),
        ("Enable it only below batch 16; above that, turn it off.", 64, "off"),
        ("Speculation on below batch 4, off above.", 1, "on"),
        ("Speculation on below batch 4, off above.", 64, "off"),
    ],
)
def test_a_policy_is_graded_at_the_learners_batch(conclusion, batch, says):
    assert checkers._recommends(conclusion, batch) == says


@pytest.mark.parametrize(
    "conclusion, batch, says",
    [
        # a quantifier subject negates its verb
        ("No one should turn speculation on at this batch.", 64, "off"),
        ("Nobody would leave speculation off here.", 64, "on"),
        # negations are counted
        ("There is no reason not to disable speculation.", 64, "off"),
        # a self-correction: the last word stands
        ("Turn it off. Wait, no: keep it on.", 64, "on"),
        ("Keep speculation, scratch that, disable it.", 64, "off"),
        # a question answered in the next sentence, the answer placed at the question's batch
        ("Keep speculation on? Not at this batch.", 64, "off"),
        ("Disable speculation at batch 64? Yes, plain decoding serves the fleet.", 64, "off"),
        ("Enable speculation at batch 1? Never.", 64, None),
        # a label with a colon or an equals sign
        ("Speculation = off for this fleet.", 64, "off"),
        # a verdict conceded before the learner's own action
        ("Speculation wins at batch 1, but I would switch it off for this fleet.", 64, "off"),
        # policies that name batches: a trailing "only", a routing rule
        ("Speculate for batch < 4 only.", 64, "off"),
        ("Speculate for batch < 4 only.", 2, "on"),
        ("Send batch 64 to the plain engine and batch 1 to the speculating one.", 64, "off"),
        ("Send batch 64 to the plain engine and batch 1 to the speculating one.", 1, "on"),
        # slips of the keys, and the same actions in Spanish and German
        ("disbale speculation at batch 64", 64, "off"),
        ("Spekulation bei Batch 64 ausschalten.", 64, "off"),
        ("Desactivar la especulación en batch 64.", 64, "off"),
    ],
)
def test_the_reader_reads_the_grammar_not_the_phrase(conclusion, batch, says):
    assert checkers._recommends(conclusion, batch) == says


def test_a_cached_prefix_is_not_recomputed_and_an_open_loop_run_makes_what_it_is_offered():
    """The knob lab's prefix-caching run (Poisson arrivals at 2 req/s, a shared 1,024-token prefix): with the
    cache on, prefill works on the tokens the cache missed, and the run cannot make more than the 2 req/s x 16
    tokens it was offered."""
    import json

    from servelab.paths import REPO_DIR

    lines = (REPO_DIR / "data" / "measurements" / "knobs-cpu.jsonl").read_text().splitlines()
    on = next(r for r in map(json.loads, lines) if r.get("knob_setting") == "prefix caching on")
    ok, predicted, reason = simulate.plausibility(on)
    assert ok and predicted == pytest.approx(on["request_rate"] * on["output_tokens"] / on["num_requests"]), reason
    # the same run read as if every prompt token had been computed: slower than the hardware allows
    assert not simulate.plausibility({**on, "prefix_cache_hit_tokens": 0})[0]
    # the offered load binds: the roofline alone expects more than the arrivals allowed
    assert simulate.plausibility({**on, "request_rate": None})[1] > 2 * predicted


def test_a_negated_recommendation_is_not_marked_against_the_learner():
    """The finding: 'should not be enabled' read as 'on' took a point and told the learner something false."""
    answer = _comparison()
    answer["conclusion"] = "TPOT p99 is lower without it, so speculation should not be enabled at this batch."
    points, feedback = checkers.measured_comparison(answer, KEY)
    assert points == 4, feedback


def _batch64(conclusion: str) -> dict:
    """The lab solution's records: plain 168.2 tok/s, n-gram 87.5 tok/s, plain picked as better."""
    return _comparison(
        measurements=[_record("none", 0, 168.2, batch_size=64), _record("ngram", 4, 87.5, batch_size=64)],
        better=0,
        conclusion=conclusion,
    )


@pytest.mark.parametrize(
    "conclusion, says",
    [
        ("The configured choice (speculation on) is right at batch 64.", "recommends speculation on"),
        ("I recommend speculation at batch 64.", "recommends speculation on"),
        ("Speculation beats the baseline here, so the configured choice stands.", "recommends speculation on"),
        ("It would be wrong to disable speculation here.", "recommends speculation on"),
        (
            "Speculation on wins: 87.5 tok/s against 168.2 tok/s without it, so the SLO is served better with "
            "speculation.",
            "recommends speculation on",
        ),
        ("Speculation should be off at batch 64 because it is faster with speculation.", "recommends both settings"),
        ("Plain decoding gives 168.2 tok/s against 87.5 with speculation at batch 64.", "recommends neither setting"),
        ("The numbers at batch 64 are what they are, throughput is the metric.", "recommends neither setting"),
        ("Turn speculation off: it gives 140 tok/s against 168.2 tok/s without it.", "neither record measured"),
    ],
)
def test_a_conclusion_that_does_not_recommend_the_pick_earns_no_point(conclusion, says):
    points, feedback = checkers.measured_comparison(_batch64(conclusion), KEY)
    assert points == 0 and says in feedback, feedback


@pytest.mark.parametrize(
    "conclusion",
    [
        "Enabling speculation was a mistake for this workload at batch 64; revert to plain decoding.",
        "Speculative decoding is counterproductive at batch 64 (88 vs 168 tok/s); the configuration is mistaken "
        "to enable it.",
        "Spec decode OFF at batch 64.",
        "Turn speculation off: 168.2 tok/s without it against 87.5 tok/s with it.",
        "Plain decoding wins at batch 64 (168 tok/s vs 88 tok/s), so disable speculation.",
    ],
)
def test_a_right_conclusion_at_batch_64_earns_its_point(conclusion):
    points, feedback = checkers.measured_comparison(_batch64(conclusion), KEY)
    assert points == 4, feedback


def test_rollout_plan_canary_hours_bounds_are_the_questions():
    import nbformat

    from servelab.grading import course

    question = next(
        c.source
        for c in nbformat.read(course.get("lesson25").source, as_version=4).cells
        if c.get("id") == "rep3-question"
    )
    low, high = checkers.CANARY_HOURS
    assert f"from {low}" in question and f"to {high}" in question
    assert checkers.rollout_plan({**PLAN, "canary_hours": low}, {"points": 5}).points == 5
    assert checkers.rollout_plan({**PLAN, "canary_hours": high}, {"points": 5}).points == 5


def _trigger(metric, threshold, direction):
    return {"metric": metric, "threshold": threshold, "direction": direction}


# Rollback triggers that point the wrong way, watch no drift, or can never fire; and right plans that
# name things in a learner's own words.
@pytest.mark.parametrize(
    "change, points, says",
    [
        (
            {
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("eval_gate_acceptance_rate", 0.97, "above"),
                ]
            },
            4,
            "roll back when it is below",
        ),
        (
            {
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "below"),
                    _trigger("eval_gate_acceptance_rate", 0.97, "below"),
                ]
            },
            4,
            "roll back when it is above",
        ),
        (
            {
                "rollback_triggers": [
                    _trigger("output_tok_s", 1000, "above"),
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("eval_gate_acceptance_rate", 0.97, "below"),
                ]
            },
            4,
            "below 1000",
        ),
        (
            {
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 50_000, "above"),
                    _trigger("eval_gate_acceptance_rate", 0.97, "below"),
                ]
            },
            4,
            "no latency",
        ),
        (
            {
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("eval_gate_acceptance_rate", 97, "below"),
                ]
            },
            4,
            "between 0 and 1",
        ),
        (
            {
                "metrics": ["ttft_ms_p99", "output_tok_s", "spec_decode_draft_acceptance_rate"],
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("spec_decode_draft_acceptance_rate", 0.6, "below"),
                ],
            },
            3,
            "draft acceptance",
        ),
        (
            {
                "metrics": ["ttft_ms_p99", "output_tok_s", "gpu_memory_usage_evaluation"],
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("gpu_memory_usage_evaluation", 0.9, "above"),
                ],
            },
            3,
            "drift",
        ),
        (
            {
                "metrics": ["ttft_ms_p99", "eval_gate_acceptance_rate"],
                "rollback_triggers": [
                    _trigger("ttft_ms_p99", 500, "above"),
                    _trigger("eval_gate_acceptance_rate", 0.97, "below"),
                ],
            },
            4,
            "tokens per second",
        ),
    ],
)
def test_rollout_triggers_are_checked_against_their_metric(change, points, says):
    got, feedback = checkers.rollout_plan({**PLAN, **change}, {"points": 5})
    assert got == points and says in feedback, feedback


@pytest.mark.parametrize(
    "change",
    [
        {
            "metrics": ["p99 TTFT", "output tok/s", "thumbs-down rate"],
            "rollback_triggers": [_trigger("p99 TTFT", 500, "above"), _trigger("thumbs-down rate", 0.05, "above")],
        },
        {"notify": "eval gate owners, client teams and on-call"},
        {
            "metrics": ["ttft_ms_p99", "vllm:generation_tokens_total rate", "eval_gate_acceptance_rate"],
            "rollback_triggers": [
                _trigger("ttft_ms_p99", 500, "above"),
                _trigger("vllm:generation_tokens_total rate", 800, "below"),
                _trigger("eval_gate_acceptance_rate", 0.97, "below"),
            ],
        },
        {
            "metrics": ["ttft_ms_p99", "output_tok_s", "eval perplexity"],
            "rollback_triggers": [_trigger("ttft_ms_p99", 500, "above"), _trigger("eval perplexity", 6.5, "above")],
        },
        {
            "metrics": ["ttft_ms_p99", "output_tok_s", "eval_acceptance_pct"],
            "rollback_triggers": [_trigger("ttft_ms_p99", 500, "above"), _trigger("eval_acceptance_pct", 97, "below")],
        },
    ],
)
def test_right_rollout_plans_in_other_words_pass(change):
    got, feedback = checkers.rollout_plan({**PLAN, **change}, {"points": 5})
    assert got == 5, feedback


def test_the_prediction_is_graded_for_completion():
    """It can be edited after the reveals, so any honest attempt earns its points; the feedback says how it did."""
    from servelab.grading import trusted

    key = trusted.load_key_module("lesson25").PREDICT_KEY
    for answer in (["padding"], ["measure_on_off"], key["correct"], list(key["options"])):
        points, feedback = checkers.prediction(answer, key)
        assert points == 2 and "completion" in feedback, feedback
    points, feedback = checkers.prediction(["measure_on_off", "padding"], key)
    assert "1 of the 6 wrong claims spotted, 1 that hold marked wrong" in feedback and "measure_on_off" in feedback
    for answer in ([], "padding", ["nope"], [1]):
        points, feedback = checkers.prediction(answer, key)
        assert points == 0 and feedback, answer


def test_the_conclusion_reader_reads_a_bounded_prefix():
    """A pasted essay is read up to recommend.MAX_CHARS characters: what follows cannot change the reading."""
    from servelab.grading import recommend

    filler = " The runs took a while." * (recommend.MAX_CHARS // 20)
    assert checkers._recommends("Turn speculation off." + filler + " Keep it on.") == "off"
    points, feedback = checkers.measured_comparison(_batch64("Turn speculation off." + filler + " Keep it on."), KEY)
    assert points == 4 and "first 2,000 characters" in feedback
