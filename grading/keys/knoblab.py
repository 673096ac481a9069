"""The knob lab's answer key (rep 2 for any knob, the measured comparison): instructor-only.

As in lab25.py beside this file, the checker grades the learner's own two records
(real measurements from their machine, and a conclusion that follows from the
SLO metric they chose); it runs in the grader's process, outside the sandbox.
"""

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
# The lab's own reading of its numbers: settings run minutes apart on two shared cores, so "read differences
# of less than about 2x as possibly noise" (knob_lab.py, section 2). Inside it, the numbers show no change pays.
NOISE_FACTOR = 2.0

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
