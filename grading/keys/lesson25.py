"""Lesson 25's answer key: instructor-only, read by the grader's own process (servelab.grading.trusted).

Nothing here enters a notebook a kernel runs, the installed servelab package
or the grading sandbox: hidden tests only hand answers over (capture.py), and
the grader compares them with these keys. A class hub's student image must not
hold this folder (nor solutions/).

TESTS maps each autograded test cell's grade_id to (checker in
servelab.grading.checkers, key). Numeric keys are computed from servelab's own
presets (servelab.grading.keys); the judgement keys are written out below.
"""

from servelab import hardware, modelspec, simulate
from servelab.grading import keys

# The simulated numbers the feedback quotes, each with its assumptions: Llama-3.1-8B on an H200 in bf16,
# k = 4, a = 0.7; n-gram drafts (free) or a Llama-3.2-1B draft model; the context each sequence attends over.
_TARGET, _H200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
_DRAFT_SPEC = modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct")
_NGRAM = {
    r["context_len"]: r
    for r in simulate.crossover_by_context(
        simulate.Simulator(_TARGET, _H200), (256, 512, 1024, 2048), 4, "ngram", 0.7, batch=200
    )
}
_DRAFT = {
    r["context_len"]: r
    for r in simulate.crossover_by_context(
        simulate.Simulator(_TARGET, _H200, draft=_DRAFT_SPEC), (256, 1024, 2048, 4096), 4, "draft_model", 0.7, batch=200
    )
}
_BREAK_EVEN = simulate.Simulator(_TARGET, _H200).break_even_batch(4, 0.7)
_ASSUMED = "Llama-3.1-8B on an H200, k = 4, a = 0.7"
# where the simulated H200 (80 % of the datasheet bandwidth, 70 % of its peak) turns compute-bound, in tokens per step
_SIM_RIDGE = simulate.Simulator(_TARGET, _H200).compute_bound_tokens()
_TPOT_ON, _TPOT_OFF = (
    s.tpot_ms
    for s in (
        simulate.Simulator(_TARGET, _H200).step(256, 4, "ngram", 0.7),
        simulate.Simulator(_TARGET, _H200).step(256),
    )
)


def _at(rows: dict, context: int) -> str:
    cross = rows[context]["crossover_batch"]
    if cross is not None:
        return f"{cross:.0f}"
    return f"none up to batch {rows[context]['searched_up_to']:,.0f}, the largest whose KV caches fit"


def _speedup(rows: dict, context: int) -> str:
    row = rows[context]
    if not row["fits"]:
        return f"does not fit (at most {int(row['max_batch'])} sequences)"
    return f"{row['speedup_at_batch']:.2f}x"


# The config the knob audit reviews (the lesson's AUDIT_CASE).
AUDIT_CASE = "70b-upgrade-h200"

# --------------------------------------------------------------------------- the keys that are judgement

PREDICT_KEY = {
    "name": "prediction (which claims are wrong)",
    "points": 2,
    "correct": [
        "padding",
        "tp8_wasted",
        "disable_above_64",
        "alters_outputs",
        "latency_improves",
        "util_means_compute",
    ],
    "options": {
        "padding": "vLLM does not pad: max-num-seqs caps a batch formed from the requests that are there (the "
        "reveal after practice 1).",
        "cap_needs_measurement": "this one holds: a cap is justified by TTFT and TPOT measured at the workload's load.",
        "tp8_wasted": "it is worse than waste: on one 4-GPU node vLLM does not start (the reveal after practice 4).",
        "memory_bound_pays": "this one holds: below the ridge verification rides on weight reads, so each step "
        "yields more tokens per sequence for little more time, and TPOT falls (a verify step itself takes longer, "
        "so the gap between streamed chunks, ITL, grows).",
        "disable_above_64": f"64 is a guess. By the simulator ({_ASSUMED}, n-gram drafts) speculation stops paying "
        f"near batch {_at(_NGRAM, 256)} at a 256-token context and near {_at(_NGRAM, 512)} at 512, and not at all "
        f"from 1,024 tokens on ({_at(_NGRAM, 1024)}); the roofline's break-even without KV reads is near "
        f"{_BREAK_EVEN:.0f}. So every batch from 64 to about {_NGRAM[256]['crossover_batch']:.0f} still gains at "
        "every context, and at 1,024 tokens or more so does every batch that fits: the rule switches speculation "
        "off where it still pays. A draft model, which costs time of its own, pulls the crossover in (the reveal "
        "after the quiz).",
        "alters_outputs": "vLLM's standard rejection sampler is lossless up to numerics (the reveal after practice 3).",
        "int8_shifts_outputs": "this one holds: quantization does shift outputs, which is why it gets a canary (the "
        "reveal after practice 3).",
        "latency_improves": "in steady state at a fixed load mean TPOT and throughput move together "
        "(throughput = B / mean TPOT): past break-even both get worse. A median TPOT can move the other way "
        "(bench/results/flip-cpu.json, batches 4 and 8); the claim says mean (the reveal after practice 5).",
        "util_means_compute": "utilization.gpu counts time a kernel runs, near 100% in memory-bound decode too "
        "(the reveal after practice 2).",
        "measure_on_off": "this one holds: it is the lesson's own settlement.",
    },
}

PRACTICE1_KEY = {
    "name": "practice 1",
    "points": 3,
    "fields": {
        "knob": {
            "expect": "batching",
            "also": ["batch_size", "max_num_seqs", "max-num-seqs"],
            "feedback": "The knob under review is the batching cap, max-num-seqs 256, copied from a benchmark config.",
        },
        "verdict": {
            "expect": "unjustified",
            "feedback": "Nothing about this workload backs 256, so it is unjustified. It is not wrong: with 20 "
            "users the running batch never exceeds 20, so a cap of 256 and a cap of 32 schedule the "
            "same batches, and 256 is vLLM's own default on many GPUs. 'Wrong' needs a fact the "
            "setting contradicts, and the 1,200 ms is not caused by the cap.",
        },
        "slo_met": {"expect": False, "feedback": "p99 TTFT of 1200 ms against a 500 ms target misses the SLO."},
        "slo_miss_ms": {
            "expect": 700,
            "rel_tol": 0.01,
            "feedback": "The miss is measured p99 minus the target: 1200 ms - 500 ms.",
        },
        "useful_batch_limit": {
            "expect": 20,
            "rel_tol": 0.0,
            "feedback": "20 concurrent users can put at most 20 sequences in a batch: "
            "vLLM forms the batch from the requests that are there and pads nothing.",
        },
        "cap_explains_miss": {
            "expect": False,
            "feedback": "The cap never binds at 20 users (no request waits for a batch slot), so "
            "lowering it cannot move p99 TTFT. Split TTFT into queue time and prefill "
            "time (vLLM exports both: request_queue_time_seconds, request_prefill_time_seconds) "
            "to find the real driver.",
        },
    },
}

PRACTICE2_SUFFICIENT_KEY = {
    "name": "practice 2 (sufficient?)",
    "points": 1,
    "correct": "no",
    "options": {
        "yes": "'Latency is important' names no workload, batch size or measurement: speculation helps while the "
        "step is memory-bandwidth-bound, and only up to a break-even batch past the ridge; the justification "
        "does not show where this deployment sits.",
        "no": "It names no batch size, no bottleneck and no measurement, so it cannot show speculation helps here.",
    },
}

PRACTICE2_MISSING_KEY = {
    "name": "practice 2 (what is missing)",
    "points": 2,
    "correct": ["batch_size", "bottleneck", "on_off_measurement", "slo_metric"],
    "options": {
        "batch_size": "the batch size (concurrency) decides whether verification rides free on weight reads.",
        "bottleneck": "speculation is nearly free while the step is memory-bandwidth-bound, costs FLOPs past the ridge, "
        "and loses past its break-even batch (near ridge x E / (k + 1) for a free drafter without KV reads; "
        "the KV reads push it out as the context grows, a costly drafter pulls it in).",
        "on_off_measurement": "the only settlement is throughput and latency measured with it on and off, on this workload.",
        "slo_metric": "latency or fleet throughput: the SLO says which one the knob must move.",
        "draft_vendor": "who made the draft model decides nothing; its acceptance rate and cost do.",
        "gpu_count": "the GPU count is the parallelism knob; it does not decide whether speculation helps at this batch.",
        "client_language": "the caller's programming language has no bearing on the serving step.",
    },
}

PRACTICE3_KEY = {
    "name": "practice 3",
    "points": 2,
    "correct": ["no_canary", "output_drift", "callers_not_told", "no_rollback_trigger"],
    "options": {
        "no_canary": "all at once means the first to see a regression is the whole fleet; a canary on a small slice sees it first.",
        "output_drift": "int8 can shift the output distribution; an eval gate tuned on float16 outputs may start rejecting valid answers "
        "while throughput and p99 look unchanged.",
        "callers_not_told": "callers with tight assumptions (exact matching, a latency distribution) must hear about it before the rollout.",
        "no_rollback_trigger": "without a metric and threshold that trigger a rollback, a bad canary has no defined exit.",
        "int8_slower": "int8 halves the weight bytes a decode step reads; decode usually gets faster, not slower.",
        "more_memory": "int8 weights take half the memory of float16, not more.",
    },
}

PRACTICE4_KEY = {
    "name": "practice 4",
    "points": 2,
    "fields": {
        "knob": {
            "expect": "parallelism",
            "also": ["tensor_parallel_size", "tensor_parallelism", "tensor_parallel", "tp"],
            "feedback": "The knob at fault is the tensor-parallel degree.",
        },
        "verdict": {
            "expect": "wrong",
            "feedback": "vLLM needs tensor-parallel-size x pipeline-parallel-size GPUs and does not start "
            "with 8 on this one 4-GPU node: it is wrong, not just unmeasured.",
        },
        "configured": {"expect": 8, "rel_tol": 0.0, "feedback": "The configuration asks for 8-way tensor parallelism."},
        "gpus_available": {"expect": 4, "rel_tol": 0.0, "feedback": "The node has 4 GPUs."},
        "max_tensor_parallel": {
            "expect": 4,
            "rel_tol": 0.0,
            "feedback": "On this one 4-GPU node a tensor-parallel group has at most 4 GPUs (vLLM "
            "does not start when TP x PP exceeds the GPUs it has). With more nodes vLLM "
            "can run TP across them (on Ray, or with its multiprocessing backend and --nnodes), but every "
            "all-reduce then crosses the "
            "network, so that is a choice to measure; vLLM's guide keeps TP inside a "
            "node and adds pipeline stages across nodes, each with GPUs of its own.",
        },
    },
}

PRACTICE5_KEY = {
    "name": "practice 5",
    "points": 1,
    "correct": "b",
    "options": {
        "a": "Speculation's verification work is not free once the step is compute-bound; 'always' is what the primary source contradicts.",
        "b": "It comes closest, for its first half: memory-bound, verification rides on weights read "
        "anyway; compute-bound, the extra tokens compete for FLOPs and fleet throughput falls once the batch is "
        "past break-even (not at the ridge itself; how far past depends on the context, since every sequence's KV "
        "reads add to the step, and on the drafter). Its last clause does not hold in "
        "steady state at a fixed load: there mean TPOT moves with throughput, throughput = B / mean TPOT (the "
        "simulator, for Llama-3.1-8B on an H200 with n-gram "
        f"k = 4, a = 0.7 at a 256-token context, at batch 256: {_TPOT_ON:.1f} ms per token with "
        f"speculation, {_TPOT_OFF:.1f} ms without), so past break-even mean TPOT gets worse too. A median TPOT "
        "is not bound by that and can improve while throughput falls (bench/results/flip-cpu.json, batches 4 "
        "and 8).",
        "c": "It is the reverse: speculation pays at small batch, where the step waits on memory, and stops paying at large batch.",
        "d": "It need not reduce throughput: while the step is memory-bound it can raise throughput and cut latency together.",
    },
}

QUIZ_KEY = {
    "name": "quiz",
    "points": 1,
    "correct": "c",
    "options": {
        "a": "Both of its premises fail. At batch 200 the verify step carries 200 x 5 = 1,000 tokens, about five "
        "times the 206-token ridge: it waits on arithmetic, not memory, so the draft tokens do not ride free. And a "
        f"Llama-3.2-1B draft holds {_DRAFT_SPEC.kv_bytes_per_token() / _TARGET.kv_bytes_per_token():.2f} of the "
        "target's KV bytes per token, not as many again: it adds a quarter to the KV reads, and sharing caches "
        "is not the fix.",
        "b": "Batching does not change the target model's sampling distribution, so it cannot lower acceptance.",
        "c": "At batch 200 the verify step carries 200 x 5 = 1,000 tokens, far past the datasheet's 206-token ridge "
        f"and the {_SIM_RIDGE:.0f} tokens where the simulated H200 (80 % of the datasheet bandwidth, 70 % of its "
        "peak) turns compute-bound (a plain step's 200 sits between the two, at the ridge): verifying draft tokens, rejected ones included, burns scarce FLOPs, and the draft "
        "model's own steps cost time. "
        f"By the simulator ({_ASSUMED}, a Llama-3.2-1B draft) the crossover is near batch {_at(_DRAFT, 256)} at "
        f"256 tokens, {_at(_DRAFT, 1024)} at 1,024 and {_at(_DRAFT, 2048)} at 2,048, so batch 200 loses at 256 "
        f"tokens ({_speedup(_DRAFT, 256)}) and at the fleet's 1,024 ({_speedup(_DRAFT, 1024)}), about breaks even "
        f"at 2,048 ({_speedup(_DRAFT, 2048)}), and at 4,096 tokens 200 sequences do not fit an H200 at all "
        f"(at most {int(_DRAFT[4096]['max_batch'])} with the draft's weights and cache, at vLLM's default "
        "gpu-memory-utilization of 0.92). The measured 15 % loss fits this fleet's 1,024-token context. Scale speculation back, or off, as the batch grows.",
        "d": "Speculation speeds up decode, not prefill; it adds verification work to decode steps.",
    },
}


# --------------------------------------------------------------------------- test cell -> (checker, key)

TESTS = {
    "warmup1-per-token": ("number", keys.kv_bytes_per_token("Llama-3.1-8B", "bfloat16", points=1)),
    "warmup1-batch": ("number", keys.kv_bytes("Llama-3.1-8B", 8192, 32, "bfloat16", points=1)),
    "warmup2-ridge": ("number", keys.ridge_flop_per_byte("H200", points=1)),
    "warmup2-tokens": ("number", keys.ridge_tokens_per_step("H200", "bfloat16", points=1)),
    "warmup3-tokens": ("number", keys.tokens_per_verify_step(0.7, 4, points=1)),
    "warmup3-verified": ("number", keys.verified_tokens_per_step(64, 4, points=1)),
    "warmup3-bound": ("yes_no", keys.is_compute_bound(64, 4, "H200", points=1)),
    "predict-test": ("prediction", PREDICT_KEY),
    "practice1-test": ("fields", PRACTICE1_KEY),
    "practice2-sufficient": ("choice", PRACTICE2_SUFFICIENT_KEY),
    "practice2-missing": ("selection", PRACTICE2_MISSING_KEY),
    "practice3-test": ("selection", PRACTICE3_KEY),
    "practice4-test": ("fields", PRACTICE4_KEY),
    "practice5-test": ("choice", PRACTICE5_KEY),
    "quiz-test": ("choice", QUIZ_KEY),
    "rep1-test": (
        "knob_audit",
        keys.knob_audit(keys.config_path(AUDIT_CASE), keys.workload_path(AUDIT_CASE), points=4),
    ),
    "rep3-test": ("rollout_plan", {"name": "rollout plan", "points": 5}),
}
