"""A hand-in graded in the sandbox with the course's variants on: the lesson's own cells (its imports, the cells
that print each question) run there as in the student's kernel, and an answer computed from the student's numbers
(servelab.variants.lesson.numbers) is computed with the hand-in's owner's numbers, so it scores.

One notebook, the same bytes for two students: each gets full points on the warm-ups, because each is graded
with their own numbers, and neither is named a copy of the other."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from servelab.grading import course, pipeline, trusted
from servelab.variants import BY_ID, seeds

SECRET = "f" * 64
STUDENTS = ("sl-ana", "sl-ben")

# The warm-ups answered from the student's numbers, as the question states them, written from the questions'
# text (warm-up 1: KV bytes; warm-up 2: the roofline ridge; warm-up 3: speculative decoding's verify step).
ANSWERS = {
    "warmup1-answer": """
p = variants.numbers("warmup1")
warmup1_kv_bytes_per_token = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["bytes_per_value"]
warmup1_kv_bytes_batch = warmup1_kv_bytes_per_token * p["tokens_per_sequence"] * p["batch"]
""",
    "warmup2-answer": """
p = variants.numbers("warmup2")
warmup2_ridge_flop_per_byte = p["peak_tflops"] * 1e12 / (p["bandwidth_gb_s"] * 1e9)
warmup2_ridge_tokens_per_step = warmup2_ridge_flop_per_byte * p["bytes_per_param"] / 2
""",
    "warmup3-answer": """
p = variants.numbers("warmup3")
a, k = p["a"], p["k"]
warmup3_tokens_per_verify_step = sum(a ** i for i in range(k + 1))
warmup3_verified_tokens_per_step = p["batch"] * (k + 1)
warmup3_compute_bound = warmup3_verified_tokens_per_step > p["peak_tflops"] * 1e12 / (p["bandwidth_gb_s"] * 1e9)
""",
}
PARTS = [p.id for q in ("warmup1", "warmup2", "warmup3") for p in BY_ID[q].parts]  # every warm-up part


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = course.make(tmp_path_factory.mktemp("variants-sandbox") / "course")
    secret = root.parent / "variant-secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    with (root / "nbgrader_config.py").open("a") as config:  # as `servelab class up` configures an instructor
        config.write(f"\nc.ScoreAnswers.variants = True\nc.ScoreAnswers.variant_secret_file = {str(secret)!r}\n")
    assignment = course.get("lesson25")
    made = course.nbgrader(root, "generate_assignment", "lesson25", "--force", timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    released = nbformat.read(str(root / "release" / "lesson25" / assignment.notebook), as_version=4)
    for cell in released.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ANSWERS:
            cell.source = ANSWERS[grade_id].strip()
    hand_ins = root.parent / "hand-ins"
    hand_ins.mkdir()
    for student in STUDENTS:
        nbformat.write(released, str(hand_ins / f"{student}.ipynb"))
    pipeline.collect(root, assignment, hand_ins)
    results = {}
    for student in STUDENTS:
        g = pipeline.grade_submission(root, assignment, student, cell_timeout=20, submission_timeout=240)
        assert g.status == "graded", g.log_tail
        report = json.loads((root / trusted.REPORT_DIR / "lesson25" / student / "lesson25.json").read_text())
        results[student] = report
    return root, results


def test_an_answer_computed_from_the_students_numbers_scores_for_each_student(graded):
    _, results = graded
    own = {s: seeds.params_for("warmup1", s, secret=SECRET.encode()) for s in STUDENTS}
    assert own["sl-ana"] != own["sl-ben"]  # two variants, one notebook
    for student, report in results.items():
        points = {p: (report["tests"][p]["points"], report["tests"][p]["max_points"]) for p in PARTS}
        assert all(got == full > 0 for got, full in points.values()), (student, points)
        assert all(report["tests"][p]["copied_from"] == [] for p in PARTS), student
        assert not any("copied" in f or "fit only" in f for f in report["flags"]), report["flags"]


def test_the_lessons_own_cells_run_in_the_sandbox(graded):
    """The imports cell and each question's printing cell end without an error, and print the student's numbers."""
    root, _ = graded
    for student in STUDENTS:
        nb = nbformat.read(str(root / "autograded" / student / "lesson25" / "lesson25.ipynb"), as_version=4)
        cells = {c.get("id"): c for c in nb.cells}
        for cell_id in ("imports", "warmup1-numbers"):
            outputs = cells[cell_id].get("outputs", [])
            assert not [o for o in outputs if o.get("output_type") == "error"], (student, cell_id, outputs)
        printed = "".join(o.get("text", "") for o in cells["warmup1-numbers"].outputs)
        layers = seeds.params_for("warmup1", student, secret=SECRET.encode())["layers"]
        assert f"{layers} layers" in printed, printed
    shutil.rmtree(root / "autograded", ignore_errors=True)
