"""Lesson 25's sample submissions: what each fills in, and what it must score.

Instructor-only, beside the keys: `perfect` and `other_forms` are right answers.
`python -m servelab.grading.samples` (or `make notebooks`) writes them to
grading/submissions/lesson25/ from the released student version.
"""

from __future__ import annotations

import copy

from servelab.grading.samples import Sample, autograde_points, fill, test_cells

# Wrong answers, each a slip a learner makes; the feedback names it.
LESSON25_PARTIAL = {
    # K and V counted once: both warm-up 1 numbers are half the truth.
    "warmup1-answer": """
warmup1_kv_bytes_per_token = llama_8b.num_layers * llama_8b.num_kv_heads * llama_8b.head_dim * 2
warmup1_kv_bytes_batch = warmup1_kv_bytes_per_token * 8192 * 32
""",
    # the tokens-per-verify-step formula assumes every draft is accepted
    "warmup3-answer": """
a, k = 0.7, 4
warmup3_tokens_per_verify_step = k + 1
warmup3_verified_tokens_per_step = 64 * (k + 1)
warmup3_compute_bound = True
""",
    # two wrong claims spotted, and one that holds marked wrong
    "predict-answer": 'predicted_wrong = ["padding", "disable_above_64", "memory_bound_pays"]',
    # the cap blamed for the miss ('wrong', lowering it would fix TTFT), and the batch limit taken from the config
    "practice1-answer": """
practice1 = {"knob": "batching", "verdict": "wrong", "slo_met": False, "slo_miss_ms": 700,
             "useful_batch_limit": 256, "cap_explains_miss": True}
""",
    # two right picks and one wrong one
    "practice2-answer": """
practice2_sufficient = "no"
practice2_missing = ["batch_size", "bottleneck", "gpu_count"]
""",
    "practice5-answer": 'practice5_answer = "c"',
    # batching called justified (no measurement is cited), one reason left out
    "rep1-answer": """
audit = {
    "batching": {"verdict": "justified", "because": "32 slots cover the peak of 24 users"},
    "quantization": {"verdict": "justified", "because": "bf16, nothing quantized, no accuracy trade"},
    "parallelism": {"verdict": "wrong", "because": "141 GB of weights do not fit one 127 GB H200"},
    "speculative_decoding": {"verdict": "justified", "because": "it is off, nothing to verify"},
    "max_model_len": {"verdict": "justified", "because": "8,192 covers the longest request of 4,700 tokens"},
    "gpu_memory_utilization": {"verdict": "wrong", "because": ""},
}
""",
    # no metric that sees output drift, so no trigger on it either
    "rep3-answer": """
rollout = {
    "change": "float16 -> int8",
    "canary_fraction": 0.05,
    "canary_hours": 24,
    "stages": [0.05, 0.5, 1.0],
    "metrics": ["ttft_ms_p99", "output_tok_s"],
    "rollback_triggers": [{"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"},
                          {"metric": "output_tok_s", "threshold": 1000, "direction": "below"}],
    "notify": ["client teams"],
}
""",
}
# What LESSON25_PARTIAL earns, test by test (the rest of the answers are the solutions).
LESSON25_PARTIAL_POINTS = {
    "warmup1-per-token": 0,
    "warmup1-batch": 0,
    "warmup2-ridge": 1,
    "warmup2-tokens": 1,
    "warmup3-tokens": 0,
    "warmup3-verified": 1,
    "warmup3-bound": 1,
    "predict-test": 2,  # graded for completion: any non-empty list of valid options
    "practice1-test": 3 * 3 / 6,  # knob, slo_met, slo_miss_ms right; verdict, limit and cause wrong
    "practice2-sufficient": 1,
    "practice2-missing": 2 * (2 / 4 - 1 / 3),  # 2 of 4 right, 1 of 3 wrong
    "practice3-test": 2,
    "practice4-test": 2,
    "practice5-test": 0,
    "quiz-test": 1,
    # batching wrong; gpu_memory_utilization repeats the parallelism fault, so it is graded under parallelism
    "rep1-test": 4 * 4 / 5,
    "rep3-test": 5 * 3 / 5,  # canary, stages, notify; metrics and triggers miss output drift
}

# Right answers in the forms learners write them: numpy values from computed cells, "No" and "(b)",
# the config file's own knob names, "tp" and "8-way", a rollout plan in words. Every one earns full points.
LESSON25_OTHER_FORMS = {
    "warmup1-answer": """
import numpy as np
warmup1_kv_bytes_per_token = np.int64(2) * llama_8b.num_layers * llama_8b.num_kv_heads * llama_8b.head_dim * 2
warmup1_kv_bytes_batch = warmup1_kv_bytes_per_token * 8192 * 32
""",
    "warmup2-answer": """
warmup2_ridge_flop_per_byte = np.float64(h200.peak_tflops) * 1e12 / (h200.bandwidth_gb_s * 1e9)
warmup2_ridge_tokens_per_step = warmup2_ridge_flop_per_byte
""",
    "warmup3-answer": """
a, k = np.float64(0.7), 4
warmup3_tokens_per_verify_step = round((1 - a ** (k + 1)) / (1 - a), 2)
warmup3_verified_tokens_per_step = np.int64(64) * (k + 1)
warmup3_compute_bound = warmup3_verified_tokens_per_step > np.float64(warmup2_ridge_tokens_per_step)
""",
    "practice1-answer": """
practice1 = {"knob": "max-num-seqs", "verdict": "Unjustified", "slo_met": np.False_,
             "slo_miss_ms": np.int64(1200) - 500, "useful_batch_limit": np.int64(20), "cap_explains_miss": False}
""",
    "practice2-answer": """
practice2_sufficient = "No"
practice2_missing = ["slo_metric", "on_off_measurement", "bottleneck", "batch_size"]
""",
    "practice4-answer": """
practice4 = {"knob": "tp", "verdict": "Wrong", "configured": "8-way", "gpus_available": 4,
             "max_tensor_parallel": np.int64(4)}
""",
    "practice5-answer": 'practice5_answer = "(b)"',
    "quiz-answer": 'quiz_answer = "(c)"',
    "rep1-answer": """
audit = {
    "max-num-seqs": {"verdict": "unjustified", "because": "32 covers the peak of 24 users but no TTFT is measured"},
    "quantization": {"verdict": "justified", "because": "bf16 weights, nothing quantized, no accuracy trade"},
    "tensor-parallel-size": {"verdict": "Wrong", "because": "141 GB of weights do not fit one 127 GB H200"},
    "speculative-config": {"verdict": "justified", "because": "speculation is off, so nothing to verify"},
    "max-model-len": {"verdict": "justified", "because": "8,192 covers the longest request of 4,700 tokens"},
    "gpu-memory-utilization": {"verdict": "wrong", "because": "the weights exceed what 0.9 of one GPU allows"},
}
""",
    "rep3-answer": """
rollout = {
    "change": "fp16 -> int8 weights on the chat fleet",
    "canary_fraction": np.float64(0.05),
    "canary_hours": 24,
    "stages": [0.05, 0.25, 0.5, 1.0],
    "metrics": ["p99 TTFT", "output tok/s", "perplexity on the eval set", "KL vs fp16"],
    "rollback_triggers": [{"metric": "p99 TTFT", "threshold": 500, "direction": "Above"},
                          {"metric": "perplexity on the eval set", "threshold": 6.5, "direction": "ABOVE"},
                          {"metric": "KL vs fp16", "threshold": 0.05, "direction": "above"}],
    "notify": ["customers on the public API", "serving on-call"],
}
""",
}

# Wrong answers that sit close to right ones; each used to pass and must not.
LESSON25_NEAR_MISSES = {
    # a x k = 2.8 is 1 % from 2.7731: the slip of counting a per draft position and no bonus token
    "warmup3-answer": """
a, k = 0.7, 4
warmup3_tokens_per_verify_step = a * k
warmup3_verified_tokens_per_step = 64 * (k + 1)
warmup3_compute_bound = True
""",
    # the cap blamed for the SLO miss: 'wrong', and lowering it would fix TTFT
    "practice1-answer": """
practice1 = {"knob": "batching", "verdict": "wrong", "slo_met": False, "slo_miss_ms": 700,
             "useful_batch_limit": 20, "cap_explains_miss": True}
""",
    # every verdict right, but one reason is four words that name no fact of this config
    "rep1-answer": """
audit = {
    "batching": {"verdict": "unjustified", "because": "this looks fine to me"},
    "quantization": {"verdict": "justified", "because": "bf16 weights, nothing quantized, no accuracy trade"},
    "parallelism": {"verdict": "wrong", "because": "141 GB of weights do not fit one 127 GB H200"},
    "speculative_decoding": {"verdict": "justified", "because": "speculation is off, so nothing to verify"},
    "max_model_len": {"verdict": "justified", "because": "8,192 covers the longest request of 4,700 tokens"},
    "gpu_memory_utilization": {"verdict": "wrong", "because": "the weights exceed what 0.9 of one GPU allows"},
}
""",
    # the serving team's own on-call is not a downstream party, and a two-hour canary sees no daily peak
    "rep3-answer": """
rollout = {
    "change": "float16 -> int8",
    "canary_fraction": 0.05,
    "canary_hours": 2,
    "stages": [0.05, 0.25, 0.5, 1.0],
    "metrics": ["ttft_ms_p99", "output_tok_s", "eval_gate_acceptance_rate"],
    "rollback_triggers": [{"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"},
                          {"metric": "eval_gate_acceptance_rate", "threshold": 0.97, "direction": "below"}],
    "notify": ["serving on-call"],
}
""",
}
LESSON25_NEAR_MISS_LOSSES = {
    "warmup3-tokens": 1,
    "practice1-test": 3 * 2 / 6,
    "rep1-test": 4 * 0.5 / 5,
    "rep3-test": 5 * 2 / 5,
}

# Code a hostile learner puts in an answer cell. Every attempt is wrapped so the
# notebook runs on; what it finds would change practice 5's answer to the right one.
READ_KEY = r"""
# Look for the answer key wherever it might be.
import glob, os, re, sqlite3
found = []
def _try(fn):
    try:
        found.append(fn())
    except Exception as exc:
        found.append(f"refused: {type(exc).__name__}")
import servelab.grading, servelab.paths
_try(lambda: [n for n in dir(servelab.grading) if "key" in n.lower() or "answer" in n.lower()])
_try(lambda: open("lesson25.ipynb").read())
_try(lambda: open("../../../gradebook.db", "rb").read().decode("latin-1"))
_try(lambda: sqlite3.connect("../../../gradebook.db").execute("select source from source_cell").fetchall())
_try(lambda: open(servelab.paths.REPO_DIR / "solutions" / "lesson25" / "lesson25.ipynb").read())
_try(lambda: open(servelab.paths.REPO_DIR / "grading" / "submissions" / "lesson25" / "perfect.ipynb").read())
_try(lambda: [open(p, "rb").read().decode("latin-1") for p in glob.glob("../../../*.db")])
_try(lambda: open(servelab.paths.REPO_DIR / "grading" / "course" / "gradebook.db", "rb").read().decode("latin-1"))
_try(lambda: open(f"/proc/{os.getppid()}/environ", "rb").read().decode("latin-1"))
_letters = re.findall(r"'correct': '([a-d])'", "\n".join(map(str, found)))  # practice 5's key comes before the quiz's
practice5_answer = _letters[0] if _letters else "c"
"""

# Each patch is tried on its own, so the notebook runs on and practice 5's answer is set whatever fails. In the
# grading sandbox the checkers' import fails (of servelab.grading it holds only the hand-over: sandbox.py's
# SANDBOX_GRADING_FILES), and so does the keys' wherever a student's servelab runs (the students' wheel leaves
# the module out); the presets' patch runs and changes only this kernel. Either way the grader's own process
# checks the answers with its own keys, so this scores what partial scores.
PATCH_CHECKER = r"""
# Make every checker award full points, and every key agree with my answers.
patched = []
def _try(fn):
    try:
        patched.append(fn())
    except Exception as exc:
        patched.append(f"refused: {type(exc).__name__}")
def _patch_scoring():
    import servelab.grading.checkers as _c
    _full = lambda answer, key: _c.Result(float(key.get("points", 1)), "full marks")
    for _name in ("number", "choice", "selection", "fields", "yes_no", "knob_audit", "rollout_plan"):
        setattr(_c, _name, _full)
    _c.report = lambda result: float(result[0])
    return "checkers"
def _patch_keys():
    import servelab.grading.keys as _k
    _k.tokens_per_verify_step = lambda *a, **kw: {"value": 5, "points": 1}
    return "keys"
def _patch_presets():
    import servelab.modelspec as _ms
    _ms.ModelSpec.kv_bytes_per_token = lambda self, dtype="bfloat16": 65536
    return "presets"
for _patch in (_patch_scoring, _patch_keys, _patch_presets):
    _try(_patch)
practice5_answer = "c"
"""


def samples(student_nb) -> list[Sample]:
    """Lesson 25's samples, each with the autograde score it must get."""
    total = autograde_points(student_nb)
    partial_points = round(sum(LESSON25_PARTIAL_POINTS.values()), 3)

    def partial(nb, sol):
        return fill(fill(nb, sol), {k: v.strip() for k, v in LESSON25_PARTIAL.items()})

    def edited_test(nb, sol):
        nb = partial(nb, sol)
        for cell in test_cells(nb):
            cell.source = "# tests removed\n1.0"  # a number as output reads as full partial credit
        return nb

    def deleted_cells(nb, sol):
        nb = partial(nb, sol)
        nb.cells = [c for c in nb.cells if c not in test_cells(nb)]
        return nb

    def infinite_loop(nb, sol):
        return fill(partial(nb, sol), {"practice5-answer": 'practice5_answer = "c"\nwhile True:\n    pass'})

    def output_flood(nb, sol):
        return fill(
            partial(nb, sol),
            {"practice5-answer": 'practice5_answer = "c"\nfor i in range(30_000):\n    print("flood", i, "x" * 60)'},
        )

    def read_key(nb, sol):
        return fill(partial(nb, sol), {"practice5-answer": READ_KEY.strip()})

    def patch_checker(nb, sol):
        return fill(partial(nb, sol), {"practice5-answer": PATCH_CHECKER.strip()})

    def with_answers(answers):
        return lambda nb, sol: fill(fill(nb, sol), {k: v.strip() for k, v in answers.items()})

    near_misses = round(total - sum(LESSON25_NEAR_MISS_LOSSES.values()), 3)
    return [
        Sample("perfect", lambda nb, sol: fill(nb, sol), total, "every answer is the instructor's solution"),
        Sample(
            "other_forms",
            with_answers(LESSON25_OTHER_FORMS),
            total,
            "right answers as learners write them: numpy values, 'No', '(b)', the YAML's knob names",
        ),
        Sample(
            "near_misses",
            with_answers(LESSON25_NEAR_MISSES),
            near_misses,
            "wrong answers close to right ones: a x k, the cap blamed for the miss, only the on-call told",
        ),
        Sample("partial", partial, partial_points, "a known mix of right answers and common slips"),
        Sample("empty", lambda nb, sol: copy.deepcopy(nb), 0.0, "the student version, unanswered"),
        Sample("edited_test", edited_test, partial_points, "partial, with every test cell replaced by `1.0`"),
        Sample("deleted_cells", deleted_cells, partial_points, "partial, with every test cell deleted"),
        Sample("infinite_loop", infinite_loop, partial_points, "partial, with an infinite loop in an answer cell"),
        Sample("output_flood", output_flood, partial_points, "partial, printing 30,000 lines"),
        Sample("read_key", read_key, partial_points, "partial, reading the key from the gradebook, notebooks, /proc"),
        Sample(
            "patch_checker",
            patch_checker,
            partial_points,
            "partial, trying to patch the checkers, keys and model presets",
        ),
    ]
