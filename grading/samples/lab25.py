"""The spec-decode lab's sample submissions: what each fills in, and what it must score.

Instructor-only, beside the keys: `perfect` is the instructor's solution.
"""

from __future__ import annotations

import copy

from servelab.grading.samples import Sample, autograde_points, fill, points

# Rep 2's conclusion recommends the setting the learner's own pick says is worse. The solution is built from the
# instructor's own measurement, so which setting wins is read from it: {the solution's better: conclusion}.
LAB25_CONTRADICTING_CONCLUSION = {
    0: "Speculation is the right call at this batch: keep it on for the fleet.",
    1: "Speculation is the wrong call at this batch: turn it off for the fleet.",
}
# The solution's own recommendation, negated the way learners write it: it must keep every point.
LAB25_NEGATED_CONCLUSION = {
    0: (
        "With it enabled the rate fell, so speculation should not be enabled at this batch; "
        "I would never turn it on here without a new measurement."
    ),
    1: (
        "With it disabled the rate fell, so speculation should not be disabled at this batch; "
        "I would never turn it off here without a new measurement."
    ),
}


def samples(student_nb) -> list[Sample]:
    """The spec-decode lab's samples, each with the autograde score it must get."""
    total = autograde_points(student_nb)
    rep2_points = points(student_nb, "rep2-test")

    def concluding(conclusions):
        def filled(nb, sol):
            answer = sol["rep2-answer"]
            head = answer[: answer.index("'conclusion':")]
            conclusion = conclusions[1 if "'better': 1" in head else 0]
            return fill(fill(nb, sol), {"rep2-answer": head + f"'conclusion': {conclusion!r}}}"})

        return filled

    return [
        Sample("perfect", lambda nb, sol: fill(nb, sol), total, "every answer is the instructor's solution"),
        Sample("empty", lambda nb, sol: copy.deepcopy(nb), 0.0, "the student version, unanswered"),
        Sample(
            "conclusion_contradicts",
            concluding(LAB25_CONTRADICTING_CONCLUSION),
            total - rep2_points,
            "the solution's numbers, with a conclusion that recommends the setting they show is worse (the "
            "conclusion carries rep 2: no points for it)",
        ),
        Sample(
            "conclusion_negated",
            concluding(LAB25_NEGATED_CONCLUSION),
            total,
            "the solution's numbers, with its recommendation written as a negation",
        ),
    ]
