"""Grading is fair to the answers real learners give: right answers in other forms pass, plausible slips fail.

Each test feeds a checker (or the notebook's own test cell) the answer a learner
would actually write: a numpy value from a computed cell, "No" with a capital,
"(b)", a knob named as the YAML file spells it, a rollout plan that says "tok/s".
"""

from __future__ import annotations

import nbformat
import numpy as np
import phrasings  # tests/phrasings.py: the held-out phrasings of the free-text answers
import pytest
from records_helpers import comparison_record

from servelab.grading import capture, checkers, course, keys, trusted
from servelab.grading import trusted as _trusted

pytestmark = pytest.mark.unit

KEYS = _trusted.load_key_module("lesson25")  # grading/keys/lesson25.py, instructor-only

LESSON = course.get("lesson25")
SOURCE = nbformat.read(LESSON.source, as_version=4)
STUDENT = nbformat.read(LESSON.student, as_version=4)
TESTS = trusted.load_tests("lesson25")


def _cell(nb, grade_id: str) -> str:
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def visible(grade_id: str, **answer) -> None:
    """Run the visible (form) part of a student test cell with the given answer variables."""
    exec(_cell(STUDENT, grade_id), dict(answer))


def hidden_points(grade_id: str, **answer) -> float:
    """Run an instructor test cell, hidden part included, and score what it hands over the way the grader does.

    The hidden part only captures the answer as JSON text (capture.encode); the
    grader's ScoreAnswers then reads it and runs the checker with the key from
    grading/keys/lesson25.py.
    """
    source = _cell(SOURCE, grade_id)
    handed = {}
    scope = dict(answer)
    scope["__builtins__"] = __builtins__
    prelude = "from servelab.grading.capture import capture as _capture"
    assert prelude in source, grade_id
    source = source.replace(prelude, "")
    scope["_capture"] = lambda gid, value: handed.setdefault(gid, capture.encode(value))
    try:
        exec(source, scope)
    except AssertionError:
        pass  # the visible form check runs after the hand-over, as in the notebook
    run = {"answers": {0: handed[grade_id]}, "status": "completed", "detail": "", "errors": {}}
    points, *_ = trusted.ScoreAnswers._score(TESTS[grade_id], run, grade_id, 0, nbformat.v4.new_code_cell())
    return points


# --------------------------------------------------------------------------- numpy values


def test_numpy_scalars_are_plain_values_to_every_checker():
    assert checkers.plain({"a": np.float64(2.5), "b": [np.int64(3), np.True_], "c": np.array([1, 2])}) == {
        "a": 2.5,
        "b": [3, True],
        "c": [1, 2],
    }
    assert checkers.number(np.float64(2.7731), keys.tokens_per_verify_step(0.7, 4)).points == 1
    assert checkers.number(np.int64(320), keys.verified_tokens_per_step(64, 4)).points == 1
    assert checkers.yes_no(np.True_, keys.is_compute_bound(64, 4, "H200")).points == 1
    assert checkers.yes_no(np.False_, keys.is_compute_bound(64, 4, "H200")).points == 0


def test_numpy_answers_earn_full_points_through_the_notebook_cells():
    a, k = np.float64(0.7), 4
    tokens = (1 - a ** (k + 1)) / (1 - a)  # np.float64
    verified = np.int64(64) * (k + 1)  # np.int64
    bound = verified > np.float64(206.04)  # np.bool_
    for grade_id, name, value in [
        ("warmup3-tokens", "warmup3_tokens_per_verify_step", tokens),
        ("warmup3-verified", "warmup3_verified_tokens_per_step", verified),
        ("warmup3-bound", "warmup3_compute_bound", bound),
    ]:
        visible(grade_id, **{name: value})
        assert hidden_points(grade_id, **{name: value}) == 1, grade_id


def test_a_numpy_value_inside_a_dict_answer_is_not_a_zero():
    practice4 = {
        "knob": "parallelism",
        "verdict": "wrong",
        "configured": np.int64(8),
        "gpus_available": np.int64(4),
        "max_tensor_parallel": np.int64(4),
    }
    assert hidden_points("practice4-test", practice4=practice4) == 2


def test_visible_number_form_still_rejects_a_non_number():
    with pytest.raises(AssertionError, match="should be a number"):
        visible("warmup3-tokens", warmup3_tokens_per_verify_step="2.77")
    with pytest.raises(AssertionError, match="should be a number"):
        visible("warmup3-tokens", warmup3_tokens_per_verify_step=True)
    with pytest.raises(AssertionError, match="True or False"):
        visible("warmup3-bound", warmup3_compute_bound="yes")


# --------------------------------------------------------------------------- letters and yes/no


@pytest.mark.parametrize("answer", ["No", "no", " NO "])
def test_practice2_accepts_no_in_any_case(answer):
    visible("practice2-sufficient", practice2_sufficient=answer)
    assert hidden_points("practice2-sufficient", practice2_sufficient=answer) == 1


def test_practice2_yes_is_accepted_as_a_form_and_scores_zero():
    visible("practice2-sufficient", practice2_sufficient="Yes")
    assert hidden_points("practice2-sufficient", practice2_sufficient="Yes") == 0


@pytest.mark.parametrize(
    "grade_id, name, right, wrong",
    [
        ("practice5-test", "practice5_answer", "(b)", "(c)"),
        ("practice5-test", "practice5_answer", "B", "a"),
        ("quiz-test", "quiz_answer", "(C)", "(A)"),
        ("quiz-test", "quiz_answer", "c", "d"),
    ],
)
def test_letters_in_brackets_or_either_case(grade_id, name, right, wrong):
    visible(grade_id, **{name: right})
    visible(grade_id, **{name: wrong})
    assert hidden_points(grade_id, **{name: right}) == 1
    assert hidden_points(grade_id, **{name: wrong}) == 0


# --------------------------------------------------------------------------- warm-up 3


@pytest.mark.parametrize("answer, points", [(2.7731, 1), (2.773, 1), (2.77, 1), (2.8, 0), (3.8, 0), (5, 0)])
def test_warmup3_tokens_tolerance_separates_rounding_from_slips(answer, points):
    assert checkers.number(answer, keys.tokens_per_verify_step(0.7, 4)).points == points


def test_warmup3_a_times_k_is_named_as_a_slip():
    _, feedback = checkers.number(0.7 * 4, keys.tokens_per_verify_step(0.7, 4))
    assert "a x k" in feedback and "bonus" in feedback


def test_warmup3_question_states_the_precision_its_tolerance_needs():
    # 2.8 is both a x k and 2.7731 cut to two figures: the question must ask for three, and the
    # feedback on 2.8 must not accuse a learner who only rounded.
    question = next(c.source for c in STUDENT.cells if c.get("id") == "warmup3-question")
    assert "three significant figures" in question
    _, feedback = checkers.number(2.8, keys.tokens_per_verify_step(0.7, 4))
    assert "two figures" in feedback and "three" in feedback


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("verdict", "no", None),
        ("slo_met", "no", "True or False"),
        ("cap_explains_miss", 0, "True or False"),
        ("slo_miss_ms", "700 ms", "a number"),
        ("useful_batch_limit", True, "a number"),
        ("knob", 7, "a string"),
    ],
)
def test_practice1_visible_test_checks_each_fields_form(field, value, says):
    answer = {
        "knob": "batching",
        "verdict": "unjustified",
        "slo_met": False,
        "slo_miss_ms": 700,
        "useful_batch_limit": 20,
        "cap_explains_miss": False,
        field: value,
    }
    if says is None:  # a string verdict is a form the content checker grades
        visible("practice1-test", practice1=answer)
        return
    with pytest.raises(AssertionError, match=f"practice1\\['{field}'\\] should be {says}"):
        visible("practice1-test", practice1=answer)


def test_warmup3_vllm_acceptance_rate_reading_gets_its_own_feedback():
    # A learner who reads a = 0.7 as vLLM's "draft acceptance rate" computes 1 + a k = 3.8.
    points, feedback = checkers.number(1 + 0.7 * 4, keys.tokens_per_verify_step(0.7, 4))
    assert points == 0 and "vLLM's 'draft acceptance rate'" in feedback and "a^i" in feedback


# --------------------------------------------------------------------------- practice 4


@pytest.mark.parametrize("knob", ["parallelism", "tp", "TP", "tensor-parallel-size", "tensor parallelism"])
@pytest.mark.parametrize("configured", [8, "8-way", "8", "TP 8"])
def test_practice4_accepts_the_ways_learners_name_tp(knob, configured):
    practice4 = {
        "knob": knob,
        "verdict": "wrong",
        "configured": configured,
        "gpus_available": 4,
        "max_tensor_parallel": 4,
    }
    assert checkers.fields(practice4, KEYS.PRACTICE4_KEY).points == 2


@pytest.mark.parametrize(
    "change",
    [
        {"knob": "batching"},
        {"configured": "4-way"},
        {"configured": "8 or 4"},
        {"max_tensor_parallel": 8},
        {"verdict": "unjustified"},
    ],
)
def test_practice4_still_fails_wrong_parts(change):
    practice4 = {
        "knob": "tp",
        "verdict": "wrong",
        "configured": "8-way",
        "gpus_available": 4,
        "max_tensor_parallel": 4,
        **change,
    }
    assert checkers.fields(practice4, KEYS.PRACTICE4_KEY).points < 2


def test_practice4_feedback_no_longer_sends_learners_to_pipeline_stages():
    feedback = " ".join(f["feedback"] for f in KEYS.PRACTICE4_KEY["fields"].values())
    assert "add pipeline stages" not in feedback and "does not start" in feedback


# --------------------------------------------------------------------------- rep 1: knob names

AUDIT_KEY = keys.knob_audit(keys.config_path(KEYS.AUDIT_CASE), keys.workload_path(KEYS.AUDIT_CASE))


def _audit(names: dict[str, str]) -> dict:
    """The reviewer's own verdicts, keyed by the names a learner chose."""
    verdicts = {**AUDIT_KEY["verdicts"], **{k: "wrong" for k in AUDIT_KEY["follows"]}}
    return {name: {"verdict": verdicts[knob], "because": AUDIT_KEY["reasons"][knob]} for name, knob in names.items()}


def test_audit_keyed_by_the_yaml_names_earns_full_points():
    answer = _audit(
        {
            "max-num-seqs": "batching",
            "quantization": "quantization",
            "tensor-parallel-size": "parallelism",
            "speculative_decoding": "speculative_decoding",
            "max-model-len": "max_model_len",
            "gpu-memory-utilization": "gpu_memory_utilization",
        }
    )
    points, feedback = checkers.knob_audit(answer, AUDIT_KEY)
    assert points == 4, feedback
    assert "not graded" not in feedback


def test_audit_with_wrong_verdicts_under_yaml_names_still_loses_points():
    answer = _audit({"max-num-seqs": "batching", "tensor-parallel-size": "parallelism"})
    answer["tensor-parallel-size"]["verdict"] = "justified"
    points, feedback = checkers.knob_audit(answer, AUDIT_KEY)
    assert points < 4 * 2 / 6 and "parallelism: you said justified" in feedback


def test_rep1_question_names_the_knobs():
    question = next(c.source for c in STUDENT.cells if "Fill `audit`" in c.source)
    for knob in [*AUDIT_KEY["verdicts"], *AUDIT_KEY["follows"]]:
        assert f'"{knob}"' in question, knob


# --------------------------------------------------------------------------- rep 3: rollout plan

PLAN = {
    "change": "fp16 -> int8 on the chat fleet",
    "canary_fraction": 0.05,
    "canary_hours": 24,
    "stages": [0.05, 0.25, 0.5, 1.0],
    "metrics": ["p99 TTFT", "output tok/s", "eval perplexity"],
    "rollback_triggers": [
        {"metric": "p99 TTFT", "threshold": 500, "direction": "Above"},
        {"metric": "eval perplexity", "threshold": 6.5, "direction": "ABOVE"},
    ],
    "notify": ["customers on the public API"],
}


def test_rollout_in_a_learners_words_earns_full_points():
    points, feedback = checkers.rollout_plan(PLAN, {"points": 5})
    assert points == 5, feedback


@pytest.mark.parametrize(
    "change",
    [
        {
            "metrics": ["ttft_ms_p99", "rps", "kl_divergence_vs_fp16"],
            "rollback_triggers": [
                {"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"},
                {"metric": "kl_divergence_vs_fp16", "threshold": 0.05, "direction": "above"},
            ],
        },
        {
            "metrics": ["tpot p99", "requests per second", "KL"],
            "rollback_triggers": [
                {"metric": "tpot p99", "threshold": 60, "direction": "above"},
                {"metric": "KL", "threshold": 0.05, "direction": "above"},
            ],
        },
        {"notify": ["API customers"]},
        {"notify": ["downstream eval owners", "serving on-call"]},
    ],
)
def test_rollout_synonyms_learners_use(change):
    points, feedback = checkers.rollout_plan({**PLAN, **change}, {"points": 5})
    assert points == 5, feedback


@pytest.mark.parametrize(
    "change, points, says",
    [
        ({"notify": ["serving on-call"]}, 4, "notify"),
        ({"notify": ["serving team", "SRE on-call"]}, 4, "notify"),
        # "weekly" holds the letters k-l but is no KL divergence: no drift metric, so no drift trigger either
        (
            {
                "metrics": ["p99 TTFT", "output tok/s", "weekly cost"],
                "rollback_triggers": [
                    {"metric": "p99 TTFT", "threshold": 500, "direction": "above"},
                    {"metric": "weekly cost", "threshold": 9, "direction": "above"},
                ],
            },
            3,
            "drift",
        ),
        (
            {
                "rollback_triggers": [
                    {"metric": "p99 TTFT", "threshold": 500, "direction": "sideways"},
                    {"metric": "eval perplexity", "threshold": 6.5, "direction": "above"},
                ]
            },
            4,
            "rollback_triggers",
        ),
    ],
)
def test_rollout_slips_still_lose_points(change, points, says):
    got, feedback = checkers.rollout_plan({**PLAN, **change}, {"points": 5})
    assert got == points and says in feedback


# --------------------------------------------------------------------------- the lab's conclusion


def _record(method: str, k: int, tok_s: float) -> dict:
    return comparison_record(method, k, tok_s, tpot_ms_p50=90, acceptance_rate=None)


def _comparison(conclusion: str) -> dict:
    return {
        "knob": "speculative_decoding",
        "slo_metric": "output_tok_s",
        "measurements": [_record("none", 0, 80.5), _record("ngram", 4, 63.7)],
        "better": 0,
        "conclusion": conclusion,
    }


@pytest.mark.parametrize(
    "conclusion",
    [
        "Speculation cost throughput at batch 8 (63.7 vs 80.5 tok/s), so turn it off for this SLO.",
        "With n-gram on we got 63.7 tok/s against 80.5 without; the configured choice is wrong, disable it.",
        "Throughput is the SLO metric and plain decoding wins at batch 8, so the config should not enable it.",
        "Plain decoding gives 80.5 tok/s against 63.7 with speculation: the SLO is throughput, so plain wins.",
    ],
)
def test_lab_conclusions_that_agree_with_the_pick_pass(conclusion):
    points, feedback = checkers.measured_comparison(_comparison(conclusion), {"points": 4})
    assert points == 4, feedback


@pytest.mark.parametrize(
    "conclusion",
    [
        "Speculation is the right call here, so keep it on for the fleet.",
        "The configured choice is right: enable n-gram speculation at batch 8.",
    ],
)
def test_lab_conclusion_that_contradicts_the_pick_fails(conclusion):
    points, feedback = checkers.measured_comparison(_comparison(conclusion), {"points": 4})
    assert points == 0 and "recommends speculation on" in feedback


# --------------------------------------------------------------------------- rep 1: what a reason must name
# Phrasings written from the config and the workload (70B in bf16, 141.1 GB of weights against 135.7 GB at
# 0.9 of one H200, max-num-seqs 32 for a peak of 24 with nothing measured, max-model-len 8,192 for a longest
# request of 4,700, speculation off), not from the checker's patterns. Each changes one knob of a right audit.
SHARE = AUDIT_KEY["points"] / len(AUDIT_KEY["verdicts"])
NAMES_A_FACT = [
    ("parallelism", "141.1 GB of weights do not fit in the 135.7 GB one H200 gives at 0.9"),
    ("parallelism", "a 70B model in bf16 is about 140 GB, more than one GPU holds"),
    ("parallelism", "TP=1 can't hold a 70B model: it needs tensor parallel 2"),
    ("parallelism", "the weights alone overflow a single H200, so it needs two GPUs"),
    ("parallelism", "It would fit on one GPU only if quantized to fp8, which it isn't"),
    ("parallelism", "People assume a 70B model fits on one H200, but it doesn't"),
    ("parallelism", "The claim that the model fits on one GPU is false: 141.1 GB > 135.7 GB"),
    ("parallelism", "the weights come to 131 GiB but only 126 GiB is usable"),
    # the solution's reason: the fit it names is another setting's
    ("parallelism", "tensor-parallel-size 1 cannot hold the model; TP 2 is the smallest that fits."),
    ("parallelism", "TP 1 can't hold it: sharded over two GPUs the weights fit with room for KV."),
    ("batching", "nobody measured TTFT or TPOT at this batch against the SLO"),
    ("batching", "32 slots cover the peak of 24 users but no latency was benchmarked"),
    ("batching", "it was copied over without any measurement behind it"),
    ("batching", "the cap is above the peak concurrency, yet unmeasured at that load"),
    ("quantization", "bf16 weights, nothing quantized, so no accuracy trade"),
    ("quantization", "the model runs unquantized in bfloat16, the quality is the reference"),
    ("quantization", "it's not quantized at all, so there's nothing to evaluate"),
    ("speculative_decoding", "No speculative config is set so nothing extra runs per decode step"),
    ("speculative_decoding", "speculation is off, so no verification work is added"),
    ("speculative_decoding", "it's disabled, and with no draft there is nothing to accept"),
    ("max_model_len", "8,192 covers the longest request of 4,700 tokens"),
    ("max_model_len", "the longest prompt plus output fits under the limit with room"),
    ("max_model_len", "8192 tokens, well above the 4.7k longest request"),
    ("parallelism", "the model is too big for one card"),
    ("max_model_len", "the biggest request still fits under the limit"),
    ("max_model_len", "worst-case request 4.7k tokens, limit 8k -> ok"),
    ("max_model_len", "Prompts plus outputs never exceed the limit."),
    ("max_model_len", "The biggest request, 3.5k in and 1.2k out, sits well under max-model-len."),
    ("quantization", "it's sixteen-bit so it's fine"),
    ("speculative_decoding", "off: no verification work is added to a step"),
]
NAMES_NOTHING = [
    ("parallelism", "This setting does not fit the deployment at all"),
    ("parallelism", "It just doesn't fit here"),
    ("parallelism", "It exceeds what is reasonable for this setup"),
    ("parallelism", "This is too big of a risk to take"),
    ("max_model_len", "It covers what it needs to cover"),
    ("speculative_decoding", "Nothing to justify about this knob"),
    ("batching", "this looks fine to me"),
    ("batching", "I am against this one"),
    ("quantization", "I checked it very carefully"),
    ("max_model_len", "seems good enough to me"),
    ("max_model_len", "it is well above what any request in the workload needs"),
    ("max_model_len", "the context length looks fine here"),
    ("max_model_len", "plenty of room for the requests"),
    ("parallelism", "the model is far too big for this setup"),
    ("batching", "the users seem fine with it"),
    ("quantization", "the accuracy is whatever, honestly"),
    ("speculative_decoding", "the draft is whatever, honestly"),
    ("max_model_len", "8192 is plenty for this"),
    ("max_model_len", "max-model-len 8192 looks fine"),
    ("parallelism", "GB-wise it is far too big, I think"),
    ("parallelism", "the model is too big, GiB-wise"),
    ("speculative_decoding", "speculation is fine, not off"),
    ("speculative_decoding", "it's fine, off the top of my head"),
    ("batching", "the users seem fine, 32 is ok"),
    ("batching", "the users seem fine with 16"),
]


def test_a_repeated_fault_graded_once_still_tells_the_learner_their_verdict():
    answer = _one_reason("parallelism", "141.1 GB of weights exceed the 135.7 GB one GPU gives")
    answer["gpu_memory_utilization"] = {"verdict": "justified", "because": "0.9 is vLLM's default"}
    result = checkers.knob_audit(answer, AUDIT_KEY)
    assert result.points == pytest.approx(AUDIT_KEY["points"])
    assert "gpu_memory_utilization: graded once, under parallelism (you said justified; the review says wrong)" in (
        result.feedback
    )


def _one_reason(knob: str, because: str) -> dict:
    answer = _audit({k: k for k in (*AUDIT_KEY["verdicts"], *AUDIT_KEY["follows"])})
    answer[knob]["because"] = because
    return answer


@pytest.mark.parametrize("knob, because", NAMES_A_FACT)
def test_a_reason_that_names_the_configs_fact_earns_the_knobs_share(knob, because):
    result = checkers.knob_audit(_one_reason(knob, because), AUDIT_KEY)
    assert result.points == pytest.approx(AUDIT_KEY["points"]), result.feedback
    assert f"- {knob}: right. The review's reason, to check yours against: {AUDIT_KEY['reasons'][knob]}" in (
        result.feedback
    )


@pytest.mark.parametrize("knob, because", NAMES_NOTHING)
def test_a_reason_that_names_no_fact_earns_half_the_share(knob, because):
    result = checkers.knob_audit(_one_reason(knob, because), AUDIT_KEY)
    assert result.points == pytest.approx(AUDIT_KEY["points"] - SHARE / 2), result.feedback
    assert f"{knob}-no-reason" in result.slips


# --------------------------------------------------------------------------- held-out phrasings of the free-text parts
# tests/data/grading_phrasings/: answers written from the questions, the course's data and the physics, without
# reading the checkers, each with the class its writer expected (tests/phrasings.py puts one into a whole answer).
# No right answer may lose its part, no wrong or non-committal one may gain it.

# "partial" phrasings, decided from the questions; each says why.
PARTIAL = {
    # rep 1: the rubric's half share for the right verdict with a topic-only or fragment reason
    **{p["text"]: 0.5 for p in phrasings.phrasings("rep1") if p["expected"] == "partial"},
    # debatable: the recommendation (off) follows from the numbers; "was faster in my run" describes the run, and
    # descriptions are not read as recommendations (the tok/s quoted are the records' own)
    "Speculation was faster in my run, 168 vs 88 tok/s, so I would turn it off.": True,
    # debatable, the same way: "keep it" follows from TPOT p50, the SLO metric; the throughput claim is a description
    "Speculation doubled throughput, keep it.": True,
    # the question asks which setting serves the SLO better, not whether the SLO is just met: on is 6x better
    "Off meets the 500 ms p50 SLO at 495 ms, so keeping it off is acceptable.": False,
    # W4A16's 1.19x is inside the lab's 2x noise band: no evidence for the change
    "Switch to W4A16: 207 vs 175 tok/s.": False,
    # rep 3: a concept names no metric; a rate, an accuracy or the gate's acceptance does
    "output quality": False,
    "output drift": False,
    "mean output length": False,
    "user thumbs-down rate": True,
    "accuracy": True,
    "acceptance rate": True,
}


def _cases(name):
    return [pytest.param(name, p, id=f"{name}-{i}-{p['expected']}") for i, p in enumerate(phrasings.phrasings(name))]


@pytest.mark.parametrize("name, phrasing", [c for name in phrasings.FILES for c in _cases(name)])
def test_a_held_out_phrasing_earns_what_its_class_says(name, phrasing):
    got, feedback = phrasings.grade(checkers, name, phrasing)
    want = PARTIAL[phrasing["text"]] if phrasing["expected"] == "partial" else phrasings.expected(name, phrasing)
    assert got == want, f"{phrasing['why']}\n{feedback}"


def test_there_are_at_least_35_phrasings_of_each_part():
    assert all(len(phrasings.phrasings(name)) >= 35 for name in phrasings.FILES)


def test_a_wrong_conclusion_costs_the_whole_rep_in_both_labs():
    spec = {
        "slo_metric": "output_tok_s",
        "batch_size": 64,
        "backend": "local",
        "better": 0,
    }
    for text in ("Keep speculation on for the fleet: it is the configured choice.", "I cannot tell."):
        credited, points, feedback = phrasings.rep2_credited(checkers, "spec_rep2", {"text": text, "situation": spec})
        assert not credited and points == 0, feedback
    knob = {
        "knob": "batching",
        "settings": ["max_num_seqs=256", "max_num_seqs=4"],
        "slo_metric": "ttft_ms_p99",
        "better": 0,
    }
    for text in ("Lower the cap to 4.", "I cannot tell which cap is better."):
        credited, points, feedback = phrasings.rep2_credited(checkers, "knob_rep2", {"text": text, "situation": knob})
        assert not credited and points == 0, feedback
    credited, points, _ = phrasings.rep2_credited(
        checkers,
        "knob_rep2",
        {"text": "Keep max_num_seqs=256: a cap of 4 queues 16 of the 20 users.", "situation": knob},
    )
    assert credited and points == 4


def test_a_reason_against_its_own_verdict_earns_nothing():
    entry = {
        "text": "The 70B weights are 70 GB in bf16 and fit on one H200, but TP 1 is slow",
        "situation": {"knob": "parallelism", "verdict": "wrong"},
    }
    share, feedback = phrasings.rep1_share(checkers, entry)
    assert share == 0 and "opposite" in feedback


def test_answer_agreement_with_fp16_is_a_drift_metric():
    plan = {
        "metrics": ["ttft_ms_p99", "output_tok_s", "answer agreement with fp16"],
        "rollback_trigger": {"metric": "answer agreement with fp16", "threshold": 0.95, "direction": "below"},
    }
    credited, feedback = phrasings.rep3_credited(checkers, {"text": "", "situation": plan})
    assert credited, feedback


SPEC_64 = {"slo_metric": "output_tok_s", "batch_size": 64, "backend": "local", "better": 0}
SPEC_1 = {"slo_metric": "output_tok_s", "batch_size": 1, "backend": "local", "better": 1}


def _knob(knob, a, b, metric, better):
    return {"knob": knob, "settings": [a, b], "slo_metric": metric, "better": better}


# More conclusions in learners' words, each with what its own numbers support (batch 64: off; batch 1: on).
MORE_CONCLUSIONS = [
    (
        "spec_rep2",
        SPEC_64,
        True,
        "Speculation should be disabled for this fleet: plain decoding made 168.2 tok/s vs 87.5.",
    ),
    ("spec_rep2", SPEC_64, True, "The configured n-gram speculation is the wrong choice here; run without it."),
    ("spec_rep2", SPEC_64, True, "Recommend: no speculation at batch 64."),
    ("spec_rep2", SPEC_64, True, "We should switch speculation off since throughput nearly doubles without it."),
    (
        "spec_rep2",
        SPEC_64,
        True,
        "Given the SLO is throughput, disabling spec decode is the right call (168 vs 88 tok/s).",
    ),
    (
        "spec_rep2",
        SPEC_64,
        True,
        "n-gram speculation costs half the fleet's throughput at batch 64; remove it from the config.",
    ),
    ("spec_rep2", SPEC_64, False, "Speculation is still worth it at batch 64 because acceptance is 0.75."),
    ("spec_rep2", SPEC_64, False, "Keep the configuration as it is."),
    ("spec_rep2", SPEC_64, False, "Both settings have trade-offs; it depends on what the users want."),
    ("spec_rep2", SPEC_64, False, "I'd leave speculation enabled."),
    (
        "spec_rep2",
        SPEC_1,
        True,
        "At batch 1 speculation wins (39.2 vs 26.3 tok/s): keep the configured n-gram speculation.",
    ),
    ("spec_rep2", SPEC_1, False, "Plain decoding is the better option at batch 1."),
    (
        "knob_rep2",
        _knob("batching", "max_num_seqs=256", "max_num_seqs=4", "ttft_ms_p99", 0),
        True,
        "Keep the cap of 256: with 4 the p99 TTFT is 2.7 s.",
    ),
    (
        "knob_rep2",
        _knob("batching", "max_num_seqs=256", "max_num_seqs=4", "ttft_ms_p99", 0),
        False,
        "A cap of 4 is the better choice.",
    ),
    ("knob_rep2", _knob("precision", "bfloat16", "float32", "output_tok_s", 0), True, "Stay with bf16."),
    (
        "knob_rep2",
        _knob("prefix_caching", "prefix caching off", "prefix caching on", "ttft_ms_p50", 1),
        True,
        "The configured choice (caching off) is wrong; enable prefix caching.",
    ),
    (
        "knob_rep2",
        _knob("kv_cache", "kv_cache=1GiB", "kv_cache=16MiB", "ttft_ms_p99", 0),
        True,
        "The 1 GiB cache is the right size here; do not go down to 16 MiB.",
    ),
    (
        "knob_rep2",
        _knob("kv_cache", "kv_cache=1GiB", "kv_cache=16MiB", "ttft_ms_p99", 0),
        False,
        "Use the 16 MiB cache.",
    ),
    (
        "knob_rep2",
        _knob("speculation", "no speculation", "n-gram k=4", "tpot_ms_p50", 1),
        True,
        "Speculation halves median TPOT here, so the configured n-gram k=4 stays.",
    ),
]


@pytest.mark.parametrize("lab, situation, credited, text", MORE_CONCLUSIONS)
def test_more_conclusions_in_learners_words(lab, situation, credited, text):
    got, points, feedback = phrasings.rep2_credited(checkers, lab, {"text": text, "situation": situation})
    # (the recorded prefix-caching runs fail the simulator's plausibility check, a quarter of the points)
    assert got == credited and (points >= 3 if credited else points == 0), feedback


@pytest.mark.parametrize(
    "because, share",
    [
        # no accuracy eval is owed where nothing is quantized: the right reason, in the words of a missing eval
        ("no quantization here, so no accuracy check", 1.0),
        ("nothing quantized, no accuracy eval", 1.0),
        # a missing eval named as what backs the choice argues the other verdict
        ("no accuracy measurement backs it", 0.0),
        ("int8 weights, accuracy never measured", 0.0),
    ],
)
def test_a_missing_accuracy_eval_counts_against_justified_only_where_something_is_quantized(because, share):
    got, feedback = phrasings.rep1_share(
        checkers, {"text": because, "situation": {"knob": "quantization", "verdict": "justified"}}
    )
    assert got == share, feedback


@pytest.mark.parametrize(
    "conclusion, says",
    [
        # "wait" as a verb is no self-correction; "Wait:" after a full stop is one
        ("Keep speculation off and wait, then remeasure.", "off"),
        ("Keep speculation on. Wait: no, turn it off.", "off"),
    ],
)
def test_only_a_self_correction_discards_what_came_before(conclusion, says):
    assert checkers._recommends(conclusion, 64) == says
