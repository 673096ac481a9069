"""The knob lab's answer key (rep 2 for any knob, the measured comparison): instructor-only.

As in lab25.py beside this file, the checker grades the learner's own two records
(real measurements from their machine, and a conclusion that follows from the
SLO metric they chose); it runs in the grader's process, outside the sandbox.
"""

from servelab.knobs import noise

# The configuration under review, knob by knob, as the rep's question states it: Practice 1's cap, vLLM's
# default token budget, the lab's bfloat16 engine, a 1 GiB KV cache, one tensor-parallel rank, prefix caching
# off, and n-gram speculation on.
CONFIGURED = {
    "batching": "max_num_seqs=256",
    "prefix_caching": "prefix caching off",
    "precision": "bfloat16",
    "speculation": "n-gram k=4",
    "kv_cache": "kv_cache=1GiB",
    "parallelism": "tp=1",
}
# The graders' "no difference" margin on the SLO metric: inside it, the numbers show no change pays. One home,
# beside the measured noise band it is stated with (servelab.knobs.noise.GRADING_MARGIN, which says why it is
# narrower than the band the lab quotes from bench/results/noise_band.json).
NOISE_FACTOR = noise.GRADING_MARGIN

TESTS = {
    "rep2-test": (
        "measured_comparison",
        {
            "name": "rep 2: measured comparison",
            "points": 4,
            "configured": CONFIGURED,
            "noise_factor": NOISE_FACTOR,
        },
    ),
}
