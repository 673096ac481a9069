"""The knob lab's answer key (rep 2 for any knob, the measured comparison): instructor-only.

As in lab25.py beside this file, the checker grades the learner's own two records
(real measurements from their machine, and a conclusion that follows from the
SLO metric they chose); it runs in the grader's process, outside the sandbox.
"""

TESTS = {
    "rep2-test": ("measured_comparison", {"name": "rep 2: measured comparison", "points": 4}),
}
