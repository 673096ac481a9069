"""Per-student variants of Lesson 25's numeric questions, graded against each student's own numbers.

    questions.py   each question once: a generator of its parameters, its text, its parts (grade_ids)
    seeds.py       a student's variant: HMAC-SHA256 of (course, assignment, student, question) under the
                   course secret, so nobody without the secret can compute a classmate's numbers
    grading.py     check(part_id, student_id, answer): the student's variant, solved by the
                   instructor-only solver (grading/keys/lesson25_variants.py), checked by the lesson's
                   own checkers; a hand-in whose numbers fit one classmate's variant throughout names
                   them (copied_from, Variants.copy), beside the chance of it (Variants.chance)
    lesson.py      the lesson's side: each student's parameters file (hand_out, at `servelab class up`),
                   the question cells' show(question_id), the instructor's view (`servelab variants show`)
    practice.py    `servelab practice`: fresh variants, checked at once, missed questions brought back
                   by an FSRS schedule in the learner's own file

The generators and texts ship to students; the solver never does (it lives in grading/keys/, which the
students' wheel is built without). Nothing here reads a name a notebook writes: the student id is the
grader's (nbgrader's student of the hand-in).

How the lesson uses it (grading/source/lesson25/lesson25.py; warm-ups 1 to 3, practice 1 and 4: lesson.LESSON_QUESTIONS):

1. nbgrader releases one notebook to the whole class, and a student's kernel has no course secret, so
   the release hands each student their parameters beside it: ``all_params(student,
   secret=course_secret())`` (question id -> parameters, JSON; the course secret is made here, on first
   use) written where only that student reads it (their home on the hub: lesson.hand_out; the class keeps
   the secret in its course directory). The question cells then print their text from it (lesson.show;
   the lesson's own numbers, Question.standard, where no file was handed out):
   ``render("warmup1", mine["warmup1"])`` is warm-up 1's "Compute for a model with ... layers" text, the
   same format string for every student with their numbers in it (``text_for(question_id, student,
   secret=...)`` is the same text, for an instructor's view). The answer cells keep their names
   (``Part.variable``: warmup1_kv_bytes_per_token, ...), and the hidden tests keep handing the answer
   over with capture(grade_id, value), as today.
2. At grading, the key for a variant part is not the fixed TESTS entry of grading/keys/lesson25.py but
   ``check(grade_id, student, answer, roster=grading.roster(db_url))``, with the student nbgrader
   grades (never one the notebook names); its points and feedback go where the checker's Result goes
   today, and ``copied_from`` goes to the instructor's report (servelab.grading.trusted.ScoreAnswers, with
   ``ScoreAnswers.variants``: on in a class, off by default, so a course graded offline keeps the lesson's
   numbers). The sandbox's kernel, which has no home of the student's, is handed the same
   student's numbers (lesson.NUMBERS_ENV, by servelab.grading.trusted.SandboxedExecute): the question cells
   print theirs, and an answer a cell computes from ``lesson.numbers(question_id)`` is computed with theirs,
   as in their own kernel. The sandbox holds this package, never servelab.grading's course builder or keys.
3. The lesson's code cells that compute with `llama_8b`, `h200` compute with the student's parameters
   instead (``params_source(params)`` writes them as ``params = {...}`` for a cell that needs a literal).
   Editing one's parameters file changes only the text one reads: grading derives them from the id.

practice1 and practice4 are graded here for their numeric fields (the knob and verdict are judgement,
the same for every variant: the grader hands check() the lesson's key, fixed_key, which grades them
beside the student's numbers, for the lesson's points); the capacity questions (capacity-*), the spec-decode break-even
(break-even-*) and Little's law (littles-law-*) are ungraded in the lesson today and graded here for
practice, ready for the lesson to add cells with those grade_ids.
"""

from .questions import BY_ID, PARTS, QUESTIONS, Part, Question, params_source, question_of, render
from .seeds import COURSE_ID, SecretError, all_params, course_secret, fresh_params, params_for, seed, text_for

__all__ = [
    "BY_ID",
    "COURSE_ID",
    "PARTS",
    "QUESTIONS",
    "Part",
    "Question",
    "all_params",
    "SecretError",
    "course_secret",
    "fresh_params",
    "params_for",
    "params_source",
    "question_of",
    "render",
    "seed",
    "text_for",
]
