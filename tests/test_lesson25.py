"""Lesson 25 as a notebook: every section of the lesson is there, it runs, and it grades as designed."""

import os
import re
import subprocess
import sys

import nbformat
import pytest

from servelab.grading import course
from servelab.paths import REPO_DIR

pytestmark = pytest.mark.unit

LESSON = course.get("lesson25")
SOURCE = nbformat.read(LESSON.source, as_version=4)
STUDENT = nbformat.read(LESSON.student, as_version=4)
TEXT = "\n".join(" ".join(c.source.split()) for c in STUDENT.cells)

# One phrase from every part of the lesson and the quiz, in order of the lesson text.
LESSON_PHRASES = [
    # title, mission link, primary source, prerequisites
    "Lesson 25. Reviewing a Serving Configuration",
    "defend the latency and throughput numbers it produces.",
    "spot the mismatch before it reaches production",
    'Docs: "Speculative Decoding", vLLM Project',
    "Lesson 2, Lesson 6, Lesson 12, Lesson 18, Lesson 22, Lesson 23",
    # warm-up
    "What causes the cache to grow, and what does batching do to that cost?",
    "What actually governs which direction the trade moves?",
    "Does that mechanism change when your batch size gets very large?",
    # know this: the checklist
    "does each knob match the stated workload?",
    "or was it cargo-culted from a different workload's defaults?",
    "Is the batching configuration matched to the workload's concurrency and SLO?",
    "padding with 118 empty requests",
    "only 12% utilization",
    "Is the quantization scheme actually earning its keep for this workload's latency target?",
    "measure your own task's accuracy loss at your own batch size",
    "Does the parallelism strategy actually address a real bottleneck?",
    "8-way tensor parallelism on a 4-GPU node is nonsensical",
    "the configuration has knobs turned but not choices made",
    "Is speculative decoding actually turned on for the right reason, for this workload's batch size?",
    "under medium-to-low QPS (queries per second), memory-bound workloads.",
    "Disabled for batch size > 64 where compute becomes the bottleneck",
    # carrying a change through what others depend on
    "Carrying a change through what others depend on",
    "Canary** a new configuration on a small slice of traffic before a full cutover",
    "Stage** the change the same way you stage a model version",
    "Communicate** the change to callers before rolling it out at scale",
    "switching from float16 to int8 quantization can shift the output distribution",
    "watching the eval gate's acceptance rate during the canary phase sees it drop",
    # saying when the usual answer is wrong
    "Saying when the usual answer is wrong, and settling a disputed claim from the primary source",
    "fleet throughput (the total tokens generated per second across all requests) may fall",
    '"measure your workload\'s bottleneck first."',
    "Measure your system's current bottleneck",
    "Compare two measurements",
    "Cite what you measured.",
    "3,200 tokens/sec with spec decode on and 3,400 tokens/sec with it off",
    # practice
    "p99 TTFT under 500ms at 20 concurrent users.",
    "What is the configuration's actual error?",
    '"speculative decoding reduces latency, and latency is important."',
    "roll it out all at once to the entire fleet",
    '"tensor parallelism: 8-way, on 4 GPUs."',
    "Speculative decoding always reduces latency and always improves throughput",
    "the extra verification work can reduce fleet throughput even as per-request mean TPOT improves",
    "Speculative decoding is only useful for very large batch sizes",
    "should only be enabled if latency is more important than throughput",
    # real-world reps
    "Take a serving configuration from your own work",
    "Write down which knobs are justified and which are just defaults.",
    "compare two different settings on the same workload",
    "Record which metric matters more for your SLO",
    "design a safe rollout plan for a configuration change you are planning",
    "what would trigger a rollback",
    # going further
    "Fast Inference from Transformers via Speculative Decoding",
    "Not landing? Reread the primary source at the top",
    "that is a defect: open an issue.",
    # the quiz on speculation at peak, and its related questions as extension problems
    "aggregate throughput is 15% lower than with speculation disabled",
    "the loss is the draft model's KV cache, which doubles the bytes each sequence reads per step",
    "Batching shifts the target model's sampling distribution",
    "verifying draft tokens that get rejected burns scarce FLOPs",
    "Speculation only speeds up prefill",
    "Product raises the maximum context to 32K tokens",
    "Product wants 256 concurrent sessions, each holding a full 32K-token context",
    "reserves a contiguous KV region sized for max_tokens = 8,192",
    "summarize 10 million documents overnight",
    "Which hardware spec most directly increases per-sequence decode speed?",
    "move prefill and decode onto separate GPU pools",
    # recaps of the lessons this one leans on
    "Memory footprint (lesson 2)",
    "The batch trade-off (lesson 6)",
    "Speculative decoding (lesson 18)",
    "SLOs (lesson 23)",
]


@pytest.mark.parametrize("phrase", LESSON_PHRASES)
def test_every_part_of_the_lesson_is_in_the_student_notebook(phrase):
    assert " ".join(phrase.split()) in TEXT


def test_extension_problems_have_worked_answers():
    worked = [c for c in STUDENT.cells if "Worked answer" in c.source]
    assert len(worked) == 6


def _grade_cells(nb):
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


def test_points():
    from servelab.grading import trusted

    keyed = trusted.load_tests("lesson25")
    tests = {k: c for k, c in _grade_cells(SOURCE).items() if c.cell_type == "code"}
    written = {k: c for k, c in _grade_cells(SOURCE).items() if c.cell_type == "markdown"}
    assert sum(c.metadata.nbgrader.points for c in tests.values()) == 30  # 28 + the prediction's 2
    assert sum(c.metadata.nbgrader.points for c in written.values()) == 11
    assert set(keyed) == set(tests), "every autograded test has exactly one checker and key in grading/keys/lesson25.py"
    for grade_id, cell in tests.items():
        assert keyed[grade_id][1]["points"] == cell.metadata.nbgrader.points, f"{grade_id}: key points == cell points"


def test_every_test_checks_its_answer_form_visibly():
    for grade_id, cell in _grade_cells(STUDENT).items():
        if cell.cell_type == "code":
            checks = [line for line in cell.source.strip().splitlines() if not line.startswith("import ")]
            assert checks[0].startswith("assert"), grade_id


def test_hidden_tests_only_hand_the_answer_over():
    """No key, no checker, no points in any notebook a kernel runs: the grader compares outside it."""
    for grade_id, cell in _grade_cells(SOURCE).items():
        if cell.cell_type == "code":
            hidden = cell.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
            lines = hidden.strip().splitlines()
            assert lines[0] == "from servelab.grading.capture import capture as _capture", grade_id
            assert lines[1].startswith(f"_capture({grade_id!r}, ") and len(lines) == 2, grade_id
    text = LESSON.source.read_text()
    assert "'correct'" not in text and '\\"correct\\"' not in text
    assert "checkers" not in text and "_keys" not in text


def test_no_judgement_key_ships_in_the_package():
    from servelab.paths import PACKAGE_DIR

    for path in PACKAGE_DIR.rglob("*.py"):
        if path.name == "samples.py":
            continue  # its hostile samples search for a key; they hold none
        text = path.read_text()
        assert '"correct":' not in text and "'correct':" not in text, f"{path} holds a key"


def test_lesson_never_starts_the_engine():
    for nb in (SOURCE, STUDENT):
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "servelab.engine" not in code and "import engine" not in code and "vllm" not in code


@pytest.mark.unit(False)  # runs the notebooks under nbval
def test_nbval_passes_on_student_and_instructor_versions():
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "-q",
            "-p",
            "no:cacheprovider",
            str(LESSON.student),
            str(LESSON.source.parent),
        ],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


# --------------------------------------------------------------------------- predict, then reveal

# Each correction opens after the practice it belongs to, so no reveal answers a later practice.
REVEALS = {
    "claim-batching": "practice1",
    "claim-ttft-driver": "practice1",
    "claim-bottleneck": "practice2",
    "claim-littles-law": "practice2",
    "claim-lossless": "practice3",
    "claim-parallelism": "practice4",
    "claim-latency-throughput": "practice5",
    "claim-spec-threshold": "quiz",
}
STEPS = ["practice1", "practice2", "practice3", "practice4", "practice5", "quiz", "rep1"]


def test_each_reveal_sits_after_its_practice_and_before_the_next():
    at = {c.get("id"): i for i, c in enumerate(STUDENT.cells)}
    predict = at["predict-question"]
    for box, practice in REVEALS.items():
        after = STEPS[STEPS.index(practice) + 1]
        assert at[f"{practice}-question"] < at[box] < at[f"{after}-question"], (box, practice)
        assert at[box] > predict, f"{box} comes before the prediction it reveals"
        assert STUDENT.cells[at[box]].source.startswith("<details>"), f"{box} should open collapsed"


def test_the_prediction_table_offers_exactly_the_keys_options():
    from servelab.grading import trusted

    KEYS = trusted.load_key_module("lesson25")  # grading/keys/lesson25.py, instructor-only

    question = next(c.source for c in STUDENT.cells if c.get("id") == "predict-question")
    offered = set(re.findall(r'^\| `"(\w+)"` \|', question, re.M))
    assert offered == set(KEYS.PREDICT_KEY["options"])
    assert 0 < len(KEYS.PREDICT_KEY["correct"]) < len(offered), "a prediction needs claims that hold, too"


@pytest.mark.parametrize(
    "question, answer",
    [
        ("warmup1-question", "34 GB"),  # warm-up 1's KV cache per step
        ("practice4-question", "vLLM will not start if"),  # practice 4's verdict
        ("quiz-question", "[129, 1024, 0]"),  # a k of 0 at large batch: the quiz's answer C
        ("quiz-question", "loses past break-even"),
        ("quiz-question", "break-even of 114"),  # 114 is worked out after the quiz
    ],
)
def test_no_cell_gives_an_answer_away_before_its_question(question, answer):
    """Predict, then reveal: a question's answer appears in no cell before the question."""
    ids = [c.get("id") for c in SOURCE.cells]
    before = SOURCE.cells[: ids.index(question)]
    assert not [c.get("id") for c in before if answer in c.source]


def test_the_lab_question_does_not_give_the_direction_away():
    """The student lab has no solution below its rep 2 question, and the question does not say which way it goes."""
    lab = nbformat.read(course.get("lab25").student, as_version=4)
    question = next(c.source for c in lab.cells if c.get("id") == "rep2-question")
    assert "solution below" not in question and "turn\nspeculation off" not in question


def _cell(nb, cell_id: str) -> str:
    return " ".join(re.sub(r"(?m)^> ?", "", next(c.source for c in nb.cells if c.get("id") == cell_id)).split())


def test_every_crossover_the_lesson_names_says_for_which_context_and_drafter():
    from servelab import hardware, modelspec, simulate

    claim = _cell(STUDENT, "claim-spec-threshold")
    sim = simulate.default_simulator(modelspec.preset("Llama-3.1-8B"), hardware.get("H200"))
    rows = {r["context_len"]: r for r in simulate.crossover_by_context(sim, (512, 1024), 4, "ngram", 0.7)}
    assert "drafter that costs nothing" in claim and "256-token context" in claim
    assert f"near {rows[512]['crossover_batch']:.0f} at 512" in claim
    # from 1,024 tokens on no batch that fits crosses: the claim says so, with the largest batch that fits
    assert rows[1024]["crossover_batch"] is None and rows[1024]["searched_up_to"] == int(rows[1024]["max_batch"])
    assert "from 1,024 tokens on finds none at any batch whose KV caches fit" in claim
    assert f"at most {int(rows[1024]['max_batch']):,} sequences at 1,024 tokens" in claim
    # the quiz's model answer is about a draft model, at the contexts where its loss holds
    solution = " ".join(" ".join(c.source.split()) for c in SOURCE.cells)
    assert "a Llama-3.2-1B draft" in solution and "it loses at 256 tokens" in solution
    assert "about breaks even at 2,048 (0.99x)" in solution  # 0.99x is break-even, not a loss
    assert "past that break-even (about 114" not in solution
    # the table of crossovers by context is in the lesson, filled from the simulator; a batch that does
    # not fit is said not to fit, never given a speedup
    assert "| context (tokens) | n-gram crossover |" in TEXT
    # fitted at vLLM's default gpu_memory_utilization, 0.92 of the H200's memory
    assert "| 8,192 | none up to 114 (the largest batch that fits) | does not fit" in TEXT


def test_the_quizs_answer_holds_by_the_lessons_own_model():
    """C's 15 % loss at batch 200 holds for the contexts the key names; A's premises fail by the same model."""
    from servelab import hardware, modelspec, simulate

    target, h200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
    draft = modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct")
    sim = simulate.Simulator(target, h200, draft=draft)
    rows = {r["context_len"]: r for r in simulate.crossover_by_context(sim, (256, 1024, 2048, 4096), 4, "draft_model")}
    assert all(rows[c]["fits"] and rows[c]["speedup_at_batch"] < 0.9 for c in (256, 1024))
    assert rows[1024]["speedup_at_batch"] == pytest.approx(0.85, abs=0.03)  # the quiz fleet's 15 % loss
    assert rows[2048]["speedup_at_batch"] == pytest.approx(1.0, abs=0.03)  # break-even, not a loss
    assert not rows[4096]["fits"]  # 200 sequences of 4,096 tokens and the draft's cache: no H200 holds them
    # A: the verify step at batch 200 is past the ridge, and the draft's KV cache is a quarter of the target's
    assert 200 * 5 > h200.ridge_tokens_per_step() and sim.step(200, 4, "draft_model").bound == "compute"
    assert draft.kv_bytes_per_token() == target.kv_bytes_per_token() / 4
    question = _cell(STUDENT, "quiz-question")
    assert "At batch 200 the verify step still waits on memory" in question
    assert "about 1,024 tokens of context" in question  # the stem's context is the one the 15 % loss fits
    # C names the verify step, compute-bound by the datasheet ridge and by the simulated H200's own
    assert "the verify step (B(k+1) = 1,000 tokens) is compute-bound" in question
    assert 200 * 5 > sim.compute_bound_tokens() and sim.step(200).bound == "compute"
    from servelab.grading import trusted

    key = trusted.load_key_module("lesson25").QUIZ_KEY
    assert key["correct"] == "c" and "about breaks even at 2,048" in key["options"]["c"]
    assert "do not fit an H200" in key["options"]["c"] and "0.25 of the target's KV bytes" in key["options"]["a"]


def test_the_knob_audit_does_not_give_its_verdicts_away():
    assert "no-tp" not in TEXT and "one-gpu" not in TEXT  # the config's file name names no finding
    assert "unquantized bf16 weights give up no accuracy" not in TEXT
    assert "speculation off adds no verification work" not in TEXT


def test_the_recap_does_not_settle_a_prediction_before_its_cell():
    recap = _cell(STUDENT, "recap")
    assert "change the output distribution" not in recap and "shift" not in recap
