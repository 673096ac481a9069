"""The lab's answer key (rep 2, the measured comparison): instructor-only, read by the grader's process.

The checker grades the learner's own two records against the roofline simulator;
there is no hidden value to compare with, but the check runs here, outside the
sandbox, like every other test (see lesson25.py beside this file).
"""

TESTS = {
    "rep2-test": (
        "measured_comparison",
        # the question's configuration enables n-gram speculation: "the configured choice" is the record that speculates.
        # No noise_factor: any difference on the SLO metric counts here, unlike the knob lab's margin
        # (servelab.knobs.noise.GRADING_MARGIN, 2x), which would call the rep's recorded pair at batch 64 (1.92x in
        # bench/results/flip-cpu.json, its cost taken apart in the lab's section 2) no difference.
        {"name": "rep 2: measured comparison", "points": 4, "configured": "speculative"},
    ),
}
