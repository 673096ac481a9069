"""Grading for Lesson 25 and its lab: checkers, keys, and the nbgrader release and grading pipeline.

- checkers: one pure function per kind of answer, (answer, key) -> Result(points, feedback)
- keys: the keys of computed answers, built from servelab's own presets and reviewer (instructor-only:
  a solver for any student's numbers, left out of the students' wheel)
- author: builds the instructor notebooks in solutions/ from their text sources in grading/source/
  (jupytext percent files, instructor-only, with the keys: no solution text is in this package)
- release: nbgrader generate_assignment -> lessons/ and labs/
- samples: sample submissions (perfect, partial, empty, hostile) made from the notebooks, as
  grading/samples/<assignment>.py defines them
- pipeline: zip_collect, autograde, generate_feedback, export on the samples -> grades.csv
- sandbox, runner, capture: the bubblewrap sandbox a submission runs in, the nbclient runner and
  kernel inside it, and the hidden tests' answer hand-over
- trusted: the nbgrader preprocessors on the grader's side (restore cells, run in the sandbox,
  compare answers with the keys in grading/keys/)
- feedback: the feedback filter that keeps hidden tests out of feedback pages
"""
