"""A class made of graded submissions: each one's grades and grader record copied to many students.

The class report's tests and bench need classes of 60 and 300 with known answer mixes.
Grading one notebook in the sandbox costs about 3 s here (bench/results/grading.json), so
300 cost 8 minutes. A checker is a pure function of (answer, key), so students who hand in
the same answers get the same grades and the same per-test records: grade each distinct
mix once, for real (pipeline or parallel graders), then copy it to as many students as the
mix asks for, through nbgrader's own Gradebook API (students, submissions, grades) and
trusted.py's report files. The graded originals are removed after, so the class is exactly
the mix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from servelab.grading import course, trusted


def replicate(
    root: Path, db_url: str, assignment: course.Assignment, mix: list[tuple[str, str]], keep_originals: bool = False
) -> None:
    """mix: [(new student, graded student to copy)]; grades and records of `assignment` copied in `root`."""
    from nbgrader.api import Gradebook

    reports = Path(root) / trusted.REPORT_DIR / assignment.name
    nb_id = assignment.notebook_id
    with Gradebook(db_url) as gb:
        originals = {}
        for source in {s for _, s in mix}:
            nb = gb.find_submission_notebook(nb_id, assignment.name, source)
            originals[source] = {
                g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade) for g in nb.grades
            }
        for student, source in mix:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment.name, student)
            for g in gb.find_submission_notebook(nb_id, assignment.name, student).grades:
                g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade = originals[source][g.name]
            (reports / student).mkdir(parents=True, exist_ok=True)
            shutil.copy(reports / source / f"{nb_id}.json", reports / student / f"{nb_id}.json")
        gb.db.commit()
        if not keep_originals:
            for source in originals:
                gb.remove_submission(assignment.name, source)
                shutil.rmtree(reports / source, ignore_errors=True)
