"""Grading for Lesson 25 and its lab: checkers, keys, and the nbgrader release and grading pipeline.

- checkers: one pure function per kind of answer, (answer, key) -> Result(points, feedback)
- keys: the keys of computed answers, built from servelab's own presets and reviewer
- author, lesson25: the instructor notebook, built from readable Python and Markdown
- release: nbgrader generate_assignment -> lessons/ and labs/
- samples: sample submissions (perfect, partial, empty, hostile) made from the source notebook
- pipeline: zip_collect, autograde, generate_feedback, export on the samples -> grades.csv
- sandbox, runner, capture: the bubblewrap sandbox a submission runs in, the nbclient runner and
  kernel inside it, and the hidden tests' answer hand-over
- trusted: the nbgrader preprocessors on the grader's side (restore cells, run in the sandbox,
  compare answers with the keys in grading/keys/)
- feedback: the feedback filter that keeps hidden tests out of feedback pages
"""
