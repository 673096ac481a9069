"""The lab's answer key (rep 2, the measured comparison): instructor-only, read by the grader's process.

The checker grades the learner's own two records against the roofline simulator;
there is no hidden value to compare with, but the check runs here, outside the
sandbox, like every other test (see lesson25.py beside this file).
"""

TESTS = {
    "rep2-test": (
        "measured_comparison",
        # the question's configuration enables n-gram speculation: "the configured choice" is the record that speculates
        {"name": "rep 2: measured comparison", "points": 4, "configured": "speculative"},
    ),
}
