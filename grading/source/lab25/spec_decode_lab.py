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
# # Lab 25: watch speculative decoding's win turn into a loss
#
# Lesson 25 claims that speculative decoding pays while a decode step waits on memory and stops paying
# once the step waits on arithmetic, and that the batch size decides which. In this lab you check that
# claim on a real vLLM engine: move the sliders, measure, and watch throughput with speculation fall
# below throughput without it as the batch grows. Then you fix it, and you hand in one measured
# comparison (the lesson's real-world rep 2).
#
# **What this machine shows, and what it does not.** On this CPU the engine's step is not the lesson's
# roofline step. Recorded on the course's machine ({{ flip_machine }}; `bench/results/flip-cpu.json`), the
# plain decode step of the lab's 135M-parameter model reaches only {{ flip_roofline.bandwidth }} of the
# machine's read bandwidth and {{ flip_roofline.compute }} of its compute peak, from batch
# {{ flip_roofline.batches }} ({{ flip_roofline.probe }}). The
# model's weights are small ({{ flip_roofline.weights_mb }} MB in bfloat16), so each step is dominated by
# per-step and per-sequence overhead that grows with the batch ({{ flip_roofline.overhead }}; computed from
# the recording), far above the {{ flip_roofline.read_ms }} ms of weight reads, and not by the arithmetic
# either. Where this machine's speculation stops paying, and why, is yours to predict and then measure; section 2 takes the cost apart. The mechanism the
# lesson teaches, weights read once per step so that extra tokens ride on the reads until the arithmetic
# catches up, needs a model whose reads dominate the step: a GPU serving an 8B model, whose numbers this lab
# gives as *simulated* (the GPU backends), never as measured. Section 1's verify-step benchmark shows what
# this CPU does with such a model: one ridge, {{ ridge.tokens }} tokens per step ({{ ridge.what_ridge }}), and
# no stretch where extra tokens are free.
#
# **How this notebook runs.** Running every cell never measures anything: it builds the controls and
# draws the charts from measurements already recorded (`data/measurements/`, and your own results store)
# and from the roofline simulator. Only a click on **Measure** runs the engine, and only for the points
# that are missing. While nbgrader grades this notebook, and under `make nbval`, the Measure button is
# off and the lab shows recorded measurements only.

# %% id="imports"
from servelab.lab import SpecDecodeLab, offline_reason, recorded_path

print("live measurement:", "off (" + offline_reason() + ")" if offline_reason() else "on a click on Measure")
print("recorded measurements:", recorded_path().name)

# %% [markdown] id="flip-controls"
# ## 1. The flip
#
# The controls:
#
# - **batch size**: requests run together, 1 to 256 (powers of two). On a remote server it is the
#   number of streamed requests in flight.
# - **num_speculative_tokens** (k): draft tokens proposed per step.
# - **method**: *off*, *n-gram* (drafts copied from the prompt), *draft model* (a small model
#   drafts), *load-adaptive* (k drops to 0 above a batch) and *routed* (a plain engine takes the large
#   batches; section 2).
# - **workload**: *copy-heavy* prompts, where n-gram drafts often match, or *open-ended* ones.
# - **output length**: new tokens per request.
# - **backend**: this machine's engine, a remote `vllm serve` (two URLs: speculation off and on), or a
#   simulated H200, H100 or A100 serving Llama-3.1-8B (its *draft model* is Llama-3.2-1B, the lesson's).
#
# - **context tokens (simulated)**: shown with a simulated GPU, the tokens each sequence attends over
#   (prompt plus answer so far). Each sequence reads its own KV cache every step, with speculation and
#   without, so the context moves where the simulated crossover falls. This machine's context is its
#   workload's prompts, and the control hides.
#
# Moving a control redraws at once from what is already measured and from the simulator. **Measure**
# runs the points still missing, from batch 1 up to the chosen batch, for both curves, with a progress
# bar; each point is saved in your results store the moment it is measured. The engine is started once
# per configuration (about 40 s on 2 cores) and then kept warm; only a new method, k, model or KV cache
# size starts another. The status line says what the engine is doing, and why it failed if it did.

# %% [markdown] id="predict"
# **Predict before you measure.** Write down two batch sizes before you press Measure or move to a GPU
# backend: where n-gram speculation with k = 4 stops paying (its throughput falls below the plain engine's)
# on *this machine's* engine, on the copy-heavy workload; and where it stops paying on a simulated H200
# serving Llama-3.1-8B, at a context you choose (256, 512, 1,024, 2,048, 4,096 or 8,192 tokens; the lesson's
# step time says what the context does). If you think it never stops paying (speculation pays at every batch
# whose KV caches fit), write `"never"`. Leave a value `None` if you have no guess; after the charts,
# `lab.prediction_vs_result(prediction)` sets each beside the result. Nothing here is graded: a prediction
# is for finding out which part of your model of the step was off.

# %% id="prediction"
prediction = {
    "context": 1024,  # tokens per sequence for the simulated H200
    "crossover_this_machine": None,  # batch where n-gram k=4 stops paying here, or "never"
    "crossover_h200": None,  # batch where it stops paying on the H200 at that context, or "never"
}

# %% id="flip-lab"
lab = SpecDecodeLab()
lab

# %% [markdown] id="flip-reading"
# **Reading the charts.** Filled markers joined by a line are points measured here; hollow diamonds are
# points recorded on the course's machine (until you measure your own); a grey cross is a point measured
# while this machine was busy, left out of the fit. Dashed lines are the roofline simulator: calibrated on
# this machine's points, or, for a simulated GPU, its datasheet at {{ sim.efficiency }}, plus per-step
# overheads (`servelab.simulate`). Top left: output tokens per
# second across all requests. Top right: speedup, speculation over no speculation, with the 1.0 line and
# the crossover batch where speculation stops paying. Bottom left: TPOT, the time per output token of one
# request, the latency speculation improves. Bottom right: the acceptance rate of draft tokens.
#
# The text under the charts takes the step at the chosen batch apart. On a simulated GPU it gives the
# three parts of the lesson's step time: the weight reads (once per step), the KV reads (every sequence's
# own cache, B x context, the same however many tokens it verifies) and the arithmetic of B(k+1) tokens;
# the simulator adds the KV reads to the larger of the weight reads and the arithmetic, as the lesson's step
# time does. While the weight reads set that larger part, the draft tokens ride on them; once the arithmetic
# does, each verified token costs time and rejected ones are wasted. The H200's ridge, about 206 tokens per
# step in bf16, counts the weight reads alone; the longer the context, the larger the KV reads' share of the
# step, which speculation does not change, so the later it stops paying. A batch whose KV caches do not fit
# the simulated GPU's memory is marked as such: it is no operating point. On this machine the text
# quotes the recorded verify-step benchmark instead of a datasheet ridge: this CPU adds its arithmetic to
# its reads (section 1 below).
#
# Try: batch 1, then 64, on this machine; the same on a simulated H200, at 256 tokens of context and at
# 4,096; copy-heavy against open-ended; k = 1 against k = 8. Where does the crossover move, and why?

# %% id="prediction-result"
lab.prediction_vs_result(prediction)

# %% [markdown] id="ridge-measured"
# ### The mechanism itself, measured on this CPU
#
# To see the roofline the engine above cannot show here, `bench/ridge_cpu.py` times the verify step
# alone for a model whose weight reads dominate: {{ ridge.what }}. Measured on {{ ridge.machine }}
# (load average {{ ridge.load }}):
#
# | batch B | tokens per step B(k + 1), k = {{ ridge.k }} | verify step (ms) |
# |---|---|---|
# {{ ridge.table }}
#
# {{ ridge.reading }}
#
# The lesson's ideal roofline would be flat while the step waits on its weight reads and linear once its
# arithmetic does; the reading above says how far this CPU's steps are from that, from the numbers in the
# table. This is the course machine's recording (`bench/results/ridge-cpu.json`); whether your CPU has a
# bfloat16 fast path (AVX512-BF16 or AMX in `/proc/cpuinfo`) decides the dtype `python bench/ridge_cpu.py`
# measures yours in. The same step on a GPU, for the whole 8B model, is `python bench/gpu_step.py`
# (bench/results/gpu-step-<chip>.json).

# %% [markdown] id="acceptance-question"
# ### Your acceptance rate, in the lesson's terms
#
# vLLM reports two numbers for speculation (the bottom-right chart shows the first): the *draft
# acceptance rate*, accepted / drafted tokens, and the *mean acceptance length*, E = 1 + accepted /
# drafts, the tokens a sequence gains per verify step. The lesson's `a` is neither: it is the chance that
# one draft is accepted given the ones before it were, and E = (1 - a^(k+1)) / (1 - a). Solving that for
# `a` turns your records into the lesson's terms, and ridge x E / (k + 1) is where a free drafter would
# break even on an ideal roofline with no KV reads: on the H200 a number to set beside the simulated
# crossover, on this CPU (whose crossover comes from the speculative path's cost, section 2) only a
# comparison. The recorded runs give a vLLM ratio of {{ recorded_acceptance.ratio }}, E of
# {{ recorded_acceptance.length }}, and an `a` of {{ recorded_acceptance.a }}: the lesson's 0.7 is a cautious choice, and n-gram on copy-heavy prompts
# accepts far more. The cell reads every record the lab has, yours included.
#
# Solving for one `a` assumes every draft position is accepted with the same chance, given the ones
# before it. vLLM also counts acceptance per draft position (`vllm:spec_decode_num_accepted_tokens_per_pos`
# on `/metrics`, divided by `vllm:spec_decode_num_drafts`; vLLM 0.32.0 `v1/spec_decode/metrics.py`): how
# often position i is accepted, which counts only when every position before it was. One `a` predicts
# a, a², a³, ... for those shares; on a remote server, read them and see whether the later positions fall
# off faster than that.

# %% id="acceptance"
from servelab import acceptance, hardware

records = sorted(lab.book.all_records(), key=lambda r: r["batch_size"])
print("acceptance of each speculative run (this machine's engine):")
for x in acceptance.from_records(records, hw=hardware.get("H200")):
    print(f"  batch {x.batch_size:3d}, k = {x.num_speculative_tokens}: vLLM accepted/drafted "
          f"{x.draft_acceptance_rate:.2f}, E {x.mean_acceptance_length:.2f}, a {x.acceptance_rate:.3f}")
print("where a free drafter with the first run's acceptance breaks even on a simulated H200")
print("(its datasheet roofline, bf16, no KV reads; the lab's H200 curves add them, at the context you choose):")
print(acceptance.table(acceptance.from_records(records, hw=hardware.get("H200"))[:1]))

# %% [markdown] id="fix-intro"
# ## 2. The fix: scale speculation back as the batch grows
#
# The lesson's answer to the quiz is to scale back or disable speculation as the batch grows. vLLM has a
# knob for it, `num_speculative_tokens_per_batch_size`: a schedule like `((1, 2, 4), (3, 64, 0))`
# speculates with k = 4 up to batch 2 and with k = 0 above. The lab sets the switch batch from the
# measured crossover (or the simulator's, before anything is measured).
#
# Recorded on the course's machine ({{ flip_machine }}; `bench/results/flip-cpu.json`): load-adaptive k does not get
# back to the baseline. At batch 1 / 8 / 64 it made {{ flip_tok_s.adaptive_tok_s }} tok/s, against
# {{ flip_tok_s.none_tok_s }} without speculation and {{ flip_tok_s.ngram_tok_s }} with plain n-gram k = 4.
#
# Why? The benchmark took the loss apart. The same engine with k = 0 at *every* batch (the speculative
# machinery switched on, nothing to verify) needs {{ flip_ms.k0_machinery_ms_per_step }} ms per step (a round's
# time over its 64 steps, prefill included) against {{ flip_ms.plain_ms_per_step }} ms for the plain engine at
# batch 1 / 8 / 64. Verification compute
# cannot explain that: there are no draft tokens to verify. vLLM's n-gram search, timed on its own, costs
# {{ flip_ms.ngram_search_ms_per_step }} ms per step: nothing. What is left, {{ flip_ms.other_machinery_ms_per_step }} ms
# per step and growing with the batch, is a remainder: the k = 0 engine's time less the plain engine's and
# the search's. Nobody has profiled it here; the speculative step path's scheduling, metadata and sampling
# for multi-token verification are where to look, and a `torch.profiler` trace of the k = 0 engine's steps
# would say which. What the benchmark does settle: the usual suspects, the proposer and the verification
# FLOPs, were not the cost here.
#
# So the lab also does it the other way: **routing by load**. Two engines, one speculating and one plain,
# and a router that sends a batch to the speculating engine only while the batch is at most the
# crossover. Each batch then runs on an engine with no speculative machinery at all once speculation
# stops paying. The dotted line is the simulator's ideal policy: the best k at every batch.
#
# This view shows every policy at once. Its Measure button measures all four curves up to the chosen
# batch (routing reuses the two warm engines, so it costs no new start).

# %% id="fix-lab"
fix = SpecDecodeLab("fix")
fix

# %% [markdown] id="fix-question"
# **Question.** In two or three sentences: why does routing get back to the baseline at high batch
# where load-adaptive k does not on this machine, and what would you expect of load-adaptive k on a GPU
# whose speculative path costs little at k = 0?

# %% [markdown] nbgrader={"grade": true, "grade_id": "fix-answer", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# Routing sends a large batch to an engine that has no speculative path at all, so it pays exactly the
# baseline's cost per step; load-adaptive k keeps one engine whose speculative step path (not the n-gram
# search, which costs microseconds, but the rest of the path, unprofiled here) still runs every step at
# k = 0, and on two cores that cost comes straight out of the model's time. On a GPU where that path is cheap at k = 0, load-adaptive k should come close to the better of the
# two curves without a second engine (which also costs a second copy of the weights).

# %% [markdown] id="rep2-question"
# ## 3. Real-world rep 2: a measured comparison
#
# *Pick one config knob and compare two different settings on the same workload, measuring throughput
# and latency with each. Record which metric matters more for your SLO and whether the configured choice
# is the right one.*
#
# **Two answers at batch 64 can both be right.** The lesson's simulator ({{ sim.assumed }}) says an H200
# still gains about {{ sim.speedup_64_short }} at batch 64 with a {{ sim.short }}-token context, and
# {{ sim.speedup_64_1024 }} at 1,024; what this CPU does at batch 64 is yours to measure. Should the two
# disagree, that is no contradiction. On the H200 a verify step of 64 x 5 = 320 tokens is past its
# {{ sim.ridge }}-token ridge, so the simulated step waits on its arithmetic, but 64 sequences are still
# below its crossover ({{ sim.crossovers }}): the tokens accepted still pay for the arithmetic of the
# rejected ones.
# On this CPU the speculative step path has a fixed cost per step (section 2), which the batch multiplies.
# For a draft model instead of n-gram, or another model or context, the simulated numbers move (the
# lesson's table after the quiz). The configured choice is judged on the hardware and workload it runs
# on, which is why the rep asks for a measurement and not a rule.
#
# Here the knob is speculative decoding. Suppose the configuration under review enables n-gram
# speculation (k = 4) for a fleet that runs at batch 64, and its SLO is stated in one metric:
# fleet throughput (`output_tok_s`), or per-request latency (`tpot_ms_p50`, `ttft_ms_p99`, ...).
#
# 1. In the lab above, set the batch, the workload and the method, and click **Measure** (skip it if you
#    measured those points already: the ones recorded on the course's machine do not count for rep 2).
# 2. Fetch the two records and compare them (the cell below). Change the arguments to the settings you
#    measured.
# 3. `lab.comparison(...)` prints your hand-in, with your numbers in it. Paste it into the answer cell,
#    set `"better"` to the index of the setting that serves the SLO better, and write the conclusion:
#    which metric matters for the SLO, and whether the configured choice is right.
#
# The answer cell must hold the numbers themselves, not a call that looks them up: the grader runs this
# notebook on another machine, without your results store and without an engine. It checks that both
# records are Measurements of the same workload, measured by you (a record says which machine measured it,
# and the points recorded on the course's machine earn nothing), that each agrees with itself
# (`output_tokens / elapsed_s` is `output_tok_s`), that both are plausible against the roofline
# simulator, and that your conclusion follows from your own numbers.
#
# **The conclusion carries the rep.** Write it as a recommendation: what to configure at your batch (a
# setting, "on" or "off", at the batch you measured, or a policy that names its batches, such as "on
# below batch N, off above"), with the metric and the numbers
# behind it. A conclusion that recommends the setting your own numbers favour on the SLO metric earns half
# the points, and the two record checks a quarter each. A conclusion against your numbers, one that
# recommends both settings, or one that only describes the configuration or the runs earns no points at
# all, however good the records: `lab.comparison(...)` fills those in, the judgement is yours.

# %% id="rep2-fetch" tags=["raises-exception"]
setting_a = lab.record(method="none", batch_size=64)
setting_b = lab.record(method="ngram", num_speculative_tokens=4, batch_size=64)
lab.show_comparison(setting_a, setting_b)

# %% id="rep2-draft" tags=["raises-exception"]
draft = lab.comparison("speculative_decoding", setting_a, setting_b, slo_metric="output_tok_s")

# %% nbgrader={"grade": false, "grade_id": "rep2-answer", "locked": false, "schema_version": 3, "solution": true} tags=["raises-exception"]
# Paste what lab.comparison(...) printed; set "better" and write "conclusion".
### BEGIN SOLUTION
{{ rep2_solution }}
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

# %% id="rep2-save" tags=["raises-exception"]
lab.save_comparison(comparison)

# %% [markdown] id="gpu"
# ## 4. On a GPU, and on a class's shared server
#
# **A CUDA machine.** The same notebook drives official vLLM there (`make lab` installs the GPU build
# when `nvidia-smi` sees a GPU). Open *engine: model, draft, KV cache* under the controls and set the
# model and draft to a folder or a Hugging Face id. A pair that fits one 80 GB GPU and shows the flip
# clearly:
#
# - target `meta-llama/Llama-3.1-8B-Instruct` (bf16, 16 GB of weights);
# - n-gram speculation needs no draft; for a trained drafter, the EAGLE-3 head
#   `RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3` (vLLM method `eagle3`) or the EAGLE head
#   `yuhuili/EAGLE-LLaMA3.1-Instruct-8B` (method `eagle`); for a classic draft model,
#   `meta-llama/Llama-3.2-1B-Instruct` (same tokenizer).
#
# An H100's ridge sits near 300 tokens per step in bf16 (its weight reads against its arithmetic), so with
# k = 4 a verify step reaches it near batch 60, not near {{ ridge.batch }} as on this CPU's ridge; where
# speculation stops paying depends on the context as well: compare with the simulated H100 backend at a
# short and a long context, then measure.
#
# **A class on a hub.** Point the lab at two `vllm serve` instances of the same model, one without and
# one with speculation, and choose *remote vllm serve*:
#
# ```
# vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000 --no-enable-prefix-caching
# vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8001 --no-enable-prefix-caching \
#     --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
# ```
#
# Name both n-gram bounds: given only `prompt_lookup_max`, vLLM 0.32.0 sets the minimum to the same
# value (`SpeculativeConfig`), so a lone `"prompt_lookup_max": 4` searches only 4-grams, not the 2- to
# 4-grams the lab's own engines use.
#
# The batch size becomes the number of streamed requests in flight; TTFT and TPOT come from the stream,
# the acceptance rate from each server's `/metrics`. Those counters are server-wide: on a shared server
# other people's requests count too. Prefix caching is off because every point sends the same prompts:
# with vLLM's default cache a later point would skip prefills an earlier one paid for (on this CPU that
# made a second pass 22-46 % faster), and the lab's own engines measure with it off as well.

# %% [markdown] id="class-load"
# **On a shared server the batch is the class's.** `servelab class servers` starts such a pair for a
# class, and the hub hands every student its URLs. Your batch slider then sets only how many of *your*
# requests are in flight; the server batches everybody's. Recorded on the course's machine ({{ class_load.machine }};
# `bench/results/class.json`, `python bench/class.py --students {{ class_load.students }}`): simulated students each moved the
# batch slider to {{ class_load.batch_sizes }} and measured a point at each, one student alone
# and then {{ class_load.students }} at once, on the server without speculation and then on the one with it.
#
# | run | server's batch (peak) | TTFT p99 | tok/s per student |
# |---|---|---|---|
# {{ class_load.rows }}
#
# (For the class: the median student's TTFT p99 and tok/s.) Per student, speculation made
# {{ class_load.alone_on }} tok/s against {{ class_load.alone_off }} without it for one student alone, and
# {{ class_load.together_on }} against {{ class_load.together_off }} with the class on. {{ class_load.verdict }}

# %% [markdown] id="going-further"
# ## Going further
#
# - `servelab sweep` measures the same curves from a terminal; `servelab simulate --hardware H100` prints
#   the simulator's table and the best k per batch.
# - vLLM docs, "Speculative Decoding": the `speculative_config` keys and the spec-decode metrics.
# - Leviathan et al., 2022: expected tokens per step (1 - a^(k+1)) / (1 - a), and when a draft pays.
# - MagicDec (https://arxiv.org/abs/2408.11049): long contexts keep decode memory-bound, so speculation can
#   pay even at large batch; the context control above shows it on the simulated GPUs.
