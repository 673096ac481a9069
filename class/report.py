# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What the class got wrong
#
# The instructor's notebook for after grading (a jupytext percent file: in JupyterLab, right-click it,
# *Open With > Notebook*). It is not an assignment: nothing here is released to students.
#
# Once `nbgrader autograde` (or `python -m servelab.grading.parallel`) has graded an assignment, the cell
# below reads the gradebook (the class's PostgreSQL when `SERVELAB_GRADEBOOK_URL` is set, as it is in an
# instructor's lab on the hub; else `gradebook.db` in the course) and the slips the grader recorded, and
# writes the class report: one page that opens offline, and a CSV. It shows what to re-teach here, with
# links that open the lesson at the section that teaches each slip. No student is named unless `NAMES`.

# %%
from pathlib import Path

from IPython.display import Markdown

from servelab.classroom import report
from servelab.variants.lesson import student_view

ASSIGNMENT = "lesson25"  # lesson25, lab25 or knoblab
# The course directory: the hub's (~/servelab, where `servelab class up` makes it), else this checkout's
# grading/course (the samples `make grade` graded). Set it to another course's folder to report on that one.
COURSE = report.default_course()
NAMES = False  # True lists the students who made each slip

built = report.build(ASSIGNMENT, COURSE, names=NAMES)
page, table = report.write(built, COURSE / "class-reports")
Markdown(
    "\n\n".join(part for part in (report.reteach_markdown(built, Path.cwd()), report.variants_markdown(built)) if part)
    + f"\n\nThe whole report: `{page}`, and its numbers in `{table}`."
)

# %% [markdown]
# ## A student's numbers
#
# In a class each student is asked warm-ups 1 to 3 and practices 1 and 4 with numbers of their own. Name a
# student (their login on the hub) to read their questions as they were asked, with the worked solution of
# each part for their numbers; an id not on the class's roster is refused. (In a terminal: `servelab variants
# show STUDENT --notebook release/lesson25/lesson25.ipynb` also writes the copy of the lesson they fetched.)

# %%
STUDENT = ""  # e.g. "ada"
print(student_view(STUDENT) if STUDENT else "Set STUDENT to a student's id to see their numbers.")
