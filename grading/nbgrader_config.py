"""nbgrader configuration for the servelab course (Lesson 25 and its lab).

`python -m servelab.grading.release` and `python -m servelab.grading.pipeline`
copy this file into a throwaway course directory (grading/course/, ignored by
git) and point it at solutions/ as the source directory. An instructor running
nbgrader by hand can do the same: `cd grading/course && nbgrader ...`.
"""

import os

from servelab.courseid import COURSE_ID

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# One course, two assignments: lesson25 (solutions/lesson25/lesson25.ipynb) and
# lab25 (solutions/lab25/spec_decode_lab.ipynb).
c.CourseDirectory.course_id = COURSE_ID

# The gradebook. SQLite in the course directory is right for one instructor and a
# class of a few hundred. For a large class graded by several people at once, use
# Postgres instead, for example:
#   export SERVELAB_GRADEBOOK_URL=postgresql+psycopg2://grader@db.example.edu:5432/servelab_gradebook
# (install psycopg2-binary next to nbgrader; the database must exist, nbgrader creates the tables).
if os.environ.get("SERVELAB_GRADEBOOK_URL"):
    c.CourseDirectory.db_url = os.environ["SERVELAB_GRADEBOOK_URL"]

# Autograding runs each submission in the bubblewrap sandbox (servelab.grading.sandbox)
# and compares the captured answers with the keys in grading/keys/ here, in nbgrader's
# own process (servelab.grading.trusted). Cells are restored from the gradebook first.
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "servelab.grading.trusted.RestoreCells",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Autograde.autograde_preprocessors = [
    "servelab.grading.trusted.SandboxedExecute",
    "servelab.grading.trusted.ScoreAnswers",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# Seconds a single cell, and a whole submission, may run: SandboxedExecute's defaults,
# servelab.grading.sandbox.CELL_TIMEOUT_S and SUBMISSION_TIMEOUT_S, set there once for this
# file, the pipeline and the parallel graders. The lesson's cells take well under a second;
# the lab never starts the engine under autograde (it checks NBGRADER_EXECUTION) and grades
# recorded numbers.

# A deleted test cell is put back from the gradebook and run, so deleting a test
# never hides a failure.
c.OverwriteCells.add_missing_cells = True

# Outputs kept per cell after autograding: a cell that floods its output is cut here.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# Feedback shows the feedback the checkers print, never the hidden tests' code:
# hidden regions are removed and tracebacks from hidden tests are cut to one line.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "servelab.grading.feedback.HideHiddenTests",
    "servelab.grading.feedback.MarkUngraded",  # the page says "not graded yet" where nbgrader counts 0
]

# The feedback and formgrader's view of a submission (in the instructor's Jupyter server,
# alone or on the class hub, which loads this file too) are both nbconvert's HTMLExporter:
# these settings draw a submission's markdown and outputs there as inert HTML, cleaned by
# nh3 (servelab.grading.safe_html). No script, handler, style, frame or outside load that a
# student hands in reaches a page a person opens.
c.HTMLExporter.preprocessors = [
    # first: formgrader draws a view only where page_policy rebuilds it, and only within the view's caps
    "servelab.grading.pages.RequireRebuiltView",
    "servelab.grading.safe_html.InertOutputs",
]
c.HTMLExporter.sanitize_html = True  # nbconvert's own switch: no JavaScript or widget outputs, HTML cleaned
c.HTMLExporter.filters = {
    "markdown2html": "servelab.grading.safe_html.markdown2html",  # nbgrader's templates draw markdown uncleaned
    "clean_html": "servelab.grading.safe_html.clean_html",
}
# Around that, the templates write notebook values into their own attributes (an image's size
# unquoted, cell tags as classes): the whole page is rebuilt after the template has run
# (servelab.grading.pages): sanitized whole, its scripts by nonce under a Content-Security-Policy,
# in the language below. formgrader's view is rebuilt as it is sent (grading/jupyter/ enables it).
c.GenerateFeedback.exporter_class = "servelab.grading.pages.FeedbackExporter"
c.HTMLExporter.language_code = "en"  # the pages' <html lang>: the course is written in English

# Student notebooks carry no outputs and keep their cell tags (raises-exception for nbval).
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# zip_collect: submissions downloaded from the LMS as one zip whose files are
# named <student_id>__<notebook>.ipynb (for example ada_l__lesson25.ipynb).
c.FileNameCollectorPlugin.named_regexp = r".*/(?P<student_id>[A-Za-z0-9_.-]+)__(?P<file_id>[^/]+\.ipynb)$"

# nbgrader collect (a class hub's exchange, whose inbound every student can write): only hand-in
# folders of safe student ids, and of each only regular files, no link followed (grading/README.md).
c.ExchangeFactory.collect = "servelab.grading.collection.SafeExchangeCollect"
