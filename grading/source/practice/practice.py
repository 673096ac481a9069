# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] id="intro"
# # Practice: Lesson 25's numbers, as often as you need
#
# Each question here is one of Lesson 25's numeric questions (the KV cache's bytes, the ridge point,
# speculation's tokens per step, the capacity questions) with **fresh numbers every time**. Your answer
# is checked at once by the same checkers that grade the lesson, with the worked solution for your numbers.
# A question you miss comes back within a minute; one you get right comes back later each time you get it
# right (ten minutes, then days, then longer). This is
# `servelab practice` in cells: both read and write the same schedule, your own file
# (`~/.local/share/servelab/practice.json`, or `$SERVELAB_PRACTICE_FILE`). Nothing here is graded or sent
# anywhere.
#
# Practice shows answers, so it runs only in a clone of servelab (`make lab` in your checkout), where the
# answers live. On the class hub the next cell says so, and the cells after it do nothing: your graded work
# is checked when it is graded.

# %% id="start"
from servelab.variants import notebook

session = notebook.start()

# %% [markdown] id="form-heading"
# ## The form
#
# Read the question, write each answer in its box (a number such as `1,234.5` or `2.1e9`; `True` or `False`
# where it asks), press **Check**, then **Next question**.

# %% id="form"
session.widget() if session else None

# %% [markdown] id="cells-heading"
# ## Or in plain cells
#
# The same steps as code: draw the next question, fill in `answers` with the names it gives, check.

# %% id="draw"
if session:
    drawn = session.next()
    print(drawn.text)
    print("\nanswers =", session.names())

# %% id="check"
answers = {}  # the names the question gives, e.g. {"max_tokens_per_s": 197.2}; a practice dict's fields in a dict

session.check(answers) if session else None

# %% [markdown] id="schedule-heading"
# ## When each question comes back

# %% id="schedule"
if session:
    print(session.schedule())
