"""Lesson 25's numeric questions as generators of their parameters, and the text each is asked in.

A generator takes a `random.Random` and returns the question's parameters: plain JSON values (ints,
floats, strings), drawn from ranges that keep the question meaningful (a model shape that exists in
practice, a GPU between an L4 and a B300, an acceptance rate a drafter reaches) and well-posed (a batch
that is not within a tenth of the ridge, so "is it compute-bound?" has one answer at any rounding). A
generator knows nothing of the answer: the solver that turns parameters into answers is instructor-only
(grading/keys/, see servelab.variants.grading).

Each question has parts, one per graded answer; a part's id is the grade_id of the lesson's test cell
where the lesson has one (warmup1-per-token, ...), and a new id for the capacity questions the lesson
asks ungraded today (capacity-*, break-even-*, littles-law-*). `low` and `high` bound every answer the
generator's ranges can produce: a check that the question stays meaningful, not a hint.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

Params = dict[str, int | float | str]

# Bytes per stored value of the dtypes the questions name.
DTYPES = {"bfloat16": 2, "float16": 2, "fp8": 1}


@dataclass(frozen=True)
class Part:
    """One graded answer of a question."""

    id: str  # the grade_id of the lesson's test cell, or the practice id of a capacity answer
    variable: str  # the name the lesson's answer cell assigns
    name: str  # what it is, in words (the feedback's first word)
    unit: str = ""
    kind: str = "number"  # number | bool | fields (a dict of numbers and bools: `fields` names them)
    low: float = 0.0  # every answer the generator's ranges give lies in [low, high]
    high: float = float("inf")
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    id: str
    title: str
    generate: Callable[[random.Random], Params]
    text: str  # str.format with the parameters: the question as practice and the instructor's view ask it
    parts: tuple[Part, ...] = field(default_factory=tuple)
    # The lesson's own numbers (what it states without a variant: offline learners, nbval, the samples);
    # None for a question the lesson does not ask with numbers of its own.
    standard: Params | None = None
    # What the lesson's question cell states with the numbers, where it is not the whole `text` (the lesson
    # then asks its own question around it); str.format with the parameters, like `text`.
    stated: str | None = None
    # The worked case the lesson's reveal after the question ("Check the claim") takes, with these numbers:
    # the lesson marks it <!-- variant: <id>-reveal -->, and a student's copy states it with theirs.
    reveal: Callable[[Params], str] | None = None


def _grid(rng: random.Random, low: float, high: float, step: float) -> float:
    """A value on the grid low, low + step, ..., high, rounded to the step's decimals."""
    n = round((high - low) / step)
    digits = max(0, len(f"{step:.10f}".rstrip("0").split(".")[1]))
    return round(low + step * rng.randint(0, n), digits)


def _model_shape(rng: random.Random, layers=(16, 96), kv_heads=(2, 4, 8, 16)) -> dict[str, int]:
    """A grouped-query-attention decoder: layers, KV heads, query heads (2 to 8 per KV head), head_dim."""
    kv = rng.choice(kv_heads)
    return {
        "layers": rng.randrange(layers[0], layers[1] + 1, 2),
        "kv_heads": kv,
        "heads": kv * rng.choice((2, 4, 8)),
        "head_dim": rng.choice((64, 96, 128, 256)),
    }


def _gpu(rng: random.Random, bytes_per_param: int = 2) -> dict[str, float]:
    """A GPU's dense peak (for the dtype) and memory bandwidth, its ridge between 80 and 600 FLOP per byte."""
    while True:
        peak = _grid(rng, 100, 2500, 5) * (2 if bytes_per_param == 1 else 1)
        bandwidth = _grid(rng, 800, 8000, 50)
        if 80 <= peak * 1e12 / (bandwidth * 1e9) <= 600:
            return {"peak_tflops": peak, "bandwidth_gb_s": bandwidth}


# The most KV cache a question's batch may hold: what one node of 8 H200s (141 GB each, 1,128 GB) keeps
# beside a model's weights. A batch past it is arithmetic, not a deployment.
NODE_KV_BYTES = 1.0e12


def _kv_per_token(shape: dict[str, int], bytes_per_value: int) -> int:
    return 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * bytes_per_value


def warmup1(rng: random.Random) -> Params:
    dtype = rng.choice(("bfloat16", "float16"))
    shape = _model_shape(rng)
    while True:
        tokens, batch = rng.randrange(1024, 131072 + 1, 512), rng.randint(2, 256)
        if _kv_per_token(shape, DTYPES[dtype]) * tokens * batch <= NODE_KV_BYTES:
            return {
                **shape,
                "dtype": dtype,
                "bytes_per_value": DTYPES[dtype],
                "tokens_per_sequence": tokens,
                "batch": batch,
            }


def warmup2(rng: random.Random) -> Params:
    dtype = rng.choice(("bfloat16", "fp8"))
    nbytes = DTYPES[dtype]
    return {**_gpu(rng, nbytes), "dtype": dtype, "bytes_per_param": nbytes}


def _acceptance(rng: random.Random) -> dict[str, int | float]:
    return {"k": rng.randint(2, 8), "a": _grid(rng, 0.40, 0.90, 0.05)}


def warmup3(rng: random.Random) -> Params:
    gpu = _gpu(rng)
    ridge_tokens = gpu["peak_tflops"] * 1e12 / (gpu["bandwidth_gb_s"] * 1e9)  # bf16: 2 FLOP over 2 bytes
    while True:
        k, batch = rng.randint(2, 8), rng.randint(8, 256)
        a = _grid(rng, 0.40, 0.90, 0.01)  # not 0.05: 77 (a, k) pairs gave classmates each other's answer
        tokens = batch * (k + 1)
        gained = sum(a**i for i in range(k + 1))
        # Well-posed: the verify step is at least 10 % off the ridge, one side or the other, and the
        # expected tokens are told from the usual slips (all k + 1 accepted, 1 + a k, a k) beyond 2 %.
        slips_apart = all(abs(gained - slip) > 0.02 * gained for slip in (k + 1, 1 + a * k, a * k))
        if abs(tokens - ridge_tokens) >= 0.1 * ridge_tokens and slips_apart:
            return {**gpu, "k": k, "a": a, "batch": batch, "dtype": "bfloat16"}


def practice1(rng: random.Random) -> Params:
    users = rng.randint(5, 200)
    target = _grid(rng, 200, 2000, 50)
    # Most reviews find a miss; one in five finds the SLO met (the miss is then 0).
    factor = rng.uniform(1.2, 4.0) if rng.random() < 0.8 else rng.uniform(0.4, 0.9)
    return {
        "users": users,
        "max_num_seqs": rng.choice([c for c in (64, 128, 256, 512, 1024) if c >= 2 * users]),
        "target_ms": target,
        "measured_ms": round(target * factor / 10) * 10,
    }


def practice1_reveal(p: Params) -> str:
    """The case practice 1's reveal works through ("item 1's fix for a TTFT miss: a smaller batch"), with these
    numbers: a cap that never binds schedules the batches a smaller one does, so it is not why p99 misses."""
    users, cap, target, measured = (int(p[k]) for k in ("users", "max_num_seqs", "target_ms", "measured_ms"))
    smaller = 1 << (users - 1).bit_length()  # the smallest power of two that still holds every user
    same = f"{cap} and {smaller} schedule exactly the same batches"
    if measured > target:
        return (
            f"Take {users} users under `max-num-seqs` {cap}, missing a {target:,} ms p99 TTFT target with "
            f"{measured:,} ms: {same}, and the p99 does not move. The cap is *unjustified* (nothing about the "
            f"workload chose {cap}), not the cause."
        )
    return (
        f"Take {users} users under `max-num-seqs` {cap}, meeting a {target:,} ms p99 TTFT target with {measured:,} "
        f"ms: {same}, so a smaller cap would not move the p99 either way. The cap is *unjustified* (nothing about "
        f"the workload chose {cap}); had the p99 missed, the cap would not have been the cause."
    )


def practice4(rng: random.Random) -> Params:
    # Nodes of 2 to 16 GPUs; a tensor-parallel degree past the node's, one that a model's attention heads
    # divide by (TENSOR_PARALLEL_DEGREES), up to 8 nodes' worth: 35 variants.
    gpus = rng.choice((2, 4, 8, 16))
    return {
        "gpus_per_node": gpus,
        "tensor_parallel_size": rng.choice([t for t in TENSOR_PARALLEL_DEGREES if gpus < t <= 8 * gpus]),
    }


# Tensor-parallel degrees a model's attention heads divide by: 64 or 128 heads (powers of two), 96 (3 x 32),
# 40 or 80 (5 x 8, 5 x 16); vLLM refuses a degree the heads do not divide by.
TENSOR_PARALLEL_DEGREES = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128)


def capacity_context(rng: random.Random) -> Params:
    shape = _model_shape(rng, layers=(40, 126), kv_heads=(4, 8, 16))
    while True:  # the chats at the new context still fit one node's KV cache (NODE_KV_BYTES)
        old, chats = rng.choice((2048, 4096, 8192)), rng.randint(10, 100)
        new = old * rng.choice((4, 8, 16))
        if _kv_per_token(shape, 2) * new * chats <= NODE_KV_BYTES:
            return {
                **shape,
                "dtype": "bfloat16",
                "bytes_per_value": 2,
                "chats": chats,
                "old_context": old,
                "new_context": new,
            }


def capacity_sessions(rng: random.Random) -> Params:
    while True:
        shape = _model_shape(rng, layers=(32, 126), kv_heads=(4, 8, 16))
        gpus, per_gpu = rng.choice((4, 8)), rng.choice((80, 96, 141, 192))
        params_b = _grid(rng, 7, 180, 1)
        context = rng.choice((8192, 16384, 32768, 65536, 131072))
        hbm_gb = gpus * per_gpu
        weights_gb = params_b * 2
        kv_gb = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * 2 * context / 1e9
        fit = (hbm_gb - weights_gb) / kv_gb
        # Meaningful: the weights leave at least a fifth of the node, at least 3 sessions fit, the weights
        # cost at least one session (leaving them out is a different count), and the sessions asked for
        # do not fit (the binding constraint is KV memory).
        if weights_gb <= 0.8 * hbm_gb and 3 <= fit <= 500 and int(hbm_gb / kv_gb) > int(fit):
            wanted = rng.randint(int(fit) + 2, max(int(fit) * 3, int(fit) + 3))
            if weights_gb < 0.02 * (weights_gb + wanted * kv_gb):  # the weights must show in the total
                continue
            return {
                **shape,
                "dtype": "float16",
                "bytes_per_value": 2,
                "params_b": params_b,
                "gpus": gpus,
                "gpu_memory_gb": per_gpu,
                "hbm_gb": hbm_gb,
                "context": context,
                "sessions": wanted,
            }


def capacity_bandwidth(rng: random.Random) -> Params:
    dtype = rng.choice(("float16", "fp8"))
    return {
        "params_b": _grid(rng, 1, 70, 0.5),
        "dtype": dtype,
        "bytes_per_param": DTYPES[dtype],
        "bandwidth_gb_s": _grid(rng, 300, 8000, 50),
    }


def capacity_transfer(rng: random.Random) -> Params:
    return {
        **_model_shape(rng, layers=(32, 126), kv_heads=(4, 8, 16)),
        "dtype": "bfloat16",
        "bytes_per_value": 2,
        "prompt_tokens": rng.randrange(1024, 32768 + 1, 512),
        "requests_per_s": rng.randint(2, 100),
    }


def break_even(rng: random.Random) -> Params:
    return {**_gpu(rng), **_acceptance(rng), "dtype": "bfloat16", "bytes_per_param": 2}


def littles_law(rng: random.Random) -> Params:
    while True:
        in_flight, arrivals = rng.randrange(16, 1024 + 1, 8), rng.randint(5, 200)
        # Well-posed: not within 5 % of one request per request per second, where the ratio and its
        # inverse (the slip of dividing the wrong way) read the same.
        if abs(in_flight / arrivals - 1) > 0.05:
            return {"in_flight": in_flight, "arrivals_per_s": arrivals, "output_tok_s": _grid(rng, 500, 20000, 50)}


_SHAPE = (
    "a model with {layers} layers and grouped-query attention: {heads} attention heads, {kv_heads} KV heads "
    "of dimension {head_dim}"
)
_GPU = "a GPU with a dense {dtype} peak of {peak_tflops:,g} TFLOP/s and {bandwidth_gb_s:,g} GB/s of memory bandwidth"

# Practice 1 and 4 as the lesson states them (its question follows); their `text` adds what to fill.
_PRACTICE1 = (
    'A configuration proposes batch size {max_num_seqs} for a workload whose stated SLO is "p99 TTFT under '
    '{target_ms:g}ms at {users} concurrent users." You measure TTFT with max-num-seqs {max_num_seqs}, at the '
    "stated {users} users, and find p99 is {measured_ms:g}ms."
)
_PRACTICE4 = 'A configuration states "tensor parallelism: {tensor_parallel_size}-way, on {gpus_per_node} GPUs."'

QUESTIONS: tuple[Question, ...] = (
    Question(
        "warmup1",
        "KV cache bytes",
        warmup1,
        "Compute for " + _SHAPE + ", in {dtype} ({bytes_per_value} bytes per value):\n"
        "- `warmup1_kv_bytes_per_token`: KV cache bytes one token adds;\n"
        "- `warmup1_kv_bytes_batch`: KV cache bytes for a batch of {batch} sequences of "
        "{tokens_per_sequence:,} tokens each.",
        (
            Part(
                "warmup1-per-token", "warmup1_kv_bytes_per_token", "KV cache bytes per token", "bytes", low=1, high=2e7
            ),
            Part("warmup1-batch", "warmup1_kv_bytes_batch", "KV cache bytes for the batch", "bytes", low=1, high=1e15),
        ),
        standard={
            "layers": 32,
            "kv_heads": 8,
            "heads": 32,
            "head_dim": 128,
            "dtype": "bfloat16",
            "bytes_per_value": 2,
            "tokens_per_sequence": 8192,
            "batch": 32,
        },
    ),
    Question(
        "warmup2",
        "The ridge point",
        warmup2,
        "Compute for " + _GPU + ":\n"
        "- `warmup2_ridge_flop_per_byte`: the roofline ridge point, FLOP per byte;\n"
        "- `warmup2_ridge_tokens_per_step`: the tokens a {dtype} decode step must carry before it turns "
        "compute-bound (2 FLOP per parameter per token, {bytes_per_param} bytes per parameter read once per step).",
        (
            Part("warmup2-ridge", "warmup2_ridge_flop_per_byte", "ridge point", "FLOP/byte", low=80, high=600),
            Part(
                "warmup2-tokens",
                "warmup2_ridge_tokens_per_step",
                "tokens per step at the ridge",
                "tokens",
                low=40,
                high=600,
            ),
        ),
        standard={"peak_tflops": 989, "bandwidth_gb_s": 4800, "dtype": "bfloat16", "bytes_per_param": 2},
    ),
    Question(
        "warmup3",
        "Speculation at large batch",
        warmup3,
        "Compute, for n-gram speculation with `k = {k}` draft tokens and acceptance rate `a = {a}` (the chance "
        "that one draft token is accepted given the ones before it were), on " + _GPU + " (2 bytes per parameter):\n"
        "- `warmup3_tokens_per_verify_step`: the expected tokens one sequence gains per verify step, to three "
        "significant figures or more;\n"
        "- `warmup3_verified_tokens_per_step`: the tokens one verify step pushes through the target model at "
        "batch {batch};\n"
        "- `warmup3_compute_bound`: `True` if that step is past the GPU's ridge, else `False`.",
        (
            Part(
                "warmup3-tokens",
                "warmup3_tokens_per_verify_step",
                "expected tokens per verify step",
                "tokens",
                low=1,
                high=9,
            ),
            Part(
                "warmup3-verified",
                "warmup3_verified_tokens_per_step",
                "tokens verified per step",
                "tokens",
                low=24,
                high=2304,
            ),
            Part("warmup3-bound", "warmup3_compute_bound", "compute-bound?", kind="bool", low=0, high=1),
        ),
        standard={"peak_tflops": 989, "bandwidth_gb_s": 4800, "k": 4, "a": 0.7, "batch": 64, "dtype": "bfloat16"},
    ),
    Question(
        "practice1",
        "A batching cap against a TTFT SLO",
        practice1,
        _PRACTICE1 + ' Fill `practice1`\'s numeric keys: `"slo_met"` (True or False), '
        '`"slo_miss_ms"` (by how many ms the measured p99 misses the target, 0 if it meets it), '
        '`"useful_batch_limit"` (the most sequences this workload can put into one batch) and '
        '`"cap_explains_miss"` (True if lowering the cap would bring p99 TTFT under the target).',
        (
            Part(
                "practice1-test",
                "practice1",
                "practice 1 (numbers)",
                kind="fields",
                low=0,
                high=8000,
                fields=("slo_met", "slo_miss_ms", "useful_batch_limit", "cap_explains_miss"),
            ),
        ),
        standard={"users": 20, "max_num_seqs": 256, "target_ms": 500, "measured_ms": 1200},
        stated=_PRACTICE1,
        reveal=practice1_reveal,
    ),
    Question(
        "practice4",
        "Tensor parallelism on one node",
        practice4,
        _PRACTICE4 + " Its {gpus_per_node} GPUs are one node."
        ' Fill `practice4`\'s numeric keys: `"configured"` (the tensor-parallel degree asked for), '
        '`"gpus_available"` and `"max_tensor_parallel"` (the largest tensor-parallel degree this node supports).',
        (
            Part(
                "practice4-test",
                "practice4",
                "practice 4 (numbers)",
                kind="fields",
                low=2,
                high=128,
                fields=("configured", "gpus_available", "max_tensor_parallel"),
            ),
        ),
        standard={"gpus_per_node": 4, "tensor_parallel_size": 8},
        stated=_PRACTICE4,
    ),
    Question(
        "capacity-context",
        "A longer context on the same servers",
        capacity_context,
        "Each server handles about {chats} concurrent chats with {old_context:,}-token contexts, on "
        + _SHAPE
        + ", in {dtype}. Product raises the context to {new_context:,} tokens and the chats use it. Compute:\n"
        "- `kv_gb_per_sequence`: the KV cache of one chat at the new context, in GB (10^9 bytes);\n"
        "- `kv_gb_all_chats`: the KV cache of all {chats} chats at the new context, in GB.",
        (
            Part("capacity-context-per-seq", "kv_gb_per_sequence", "KV cache per sequence", "GB", low=0.01, high=500),
            Part("capacity-context-all", "kv_gb_all_chats", "KV cache for all chats", "GB", low=0.1, high=50000),
        ),
    ),
    Question(
        "capacity-sessions",
        "Full-context sessions on one node",
        capacity_sessions,
        "A {params_b:g}B-parameter model (" + _SHAPE + ") is served in {dtype} on one node of {gpus} GPUs of "
        "{gpu_memory_gb} GB each ({hbm_gb:,} GB of HBM in all). Product wants {sessions} concurrent sessions, each "
        "holding a full {context:,}-token context. Compute:\n"
        "- `sessions_that_fit`: how many full-context sessions the node holds beside the weights (a whole number);\n"
        "- `memory_needed_tb`: the memory the weights and all {sessions} sessions need, in TB (10^12 bytes).",
        (
            Part("capacity-sessions-fit", "sessions_that_fit", "full sessions that fit", "sessions", low=3, high=500),
            Part("capacity-sessions-need", "memory_needed_tb", "memory needed", "TB", low=0.01, high=1000),
        ),
    ),
    Question(
        "capacity-bandwidth",
        "The per-sequence decode ceiling",
        capacity_bandwidth,
        "You serve a {params_b:g}B-parameter model in {dtype} ({bytes_per_param} bytes per parameter) on a GPU "
        "with {bandwidth_gb_s:,g} GB/s of memory bandwidth. Compute `max_tokens_per_s`: the most tokens per second "
        "one sequence can decode alone (batch 1), from the weight reads alone.",
        (Part("capacity-bandwidth-tok-s", "max_tokens_per_s", "decode ceiling", "tokens/s", low=2, high=16000),),
    ),
    Question(
        "capacity-transfer",
        "Moving KV cache from prefill to decode",
        capacity_transfer,
        "A RAG workload sends {prompt_tokens:,}-token prompts to " + _SHAPE + ", in {dtype}, with prefill and decode "
        "on separate GPU pools. Compute `transfer_gb_s`: the KV cache, in GB/s (10^9 bytes per second), that "
        "moves from the prefill pool to the decode pool at {requests_per_s} requests per second.",
        (Part("capacity-transfer-gb-s", "transfer_gb_s", "KV transfer", "GB/s", low=0.01, high=200000),),
    ),
    Question(
        "break-even",
        "Where speculation stops paying",
        break_even,
        "On " + _GPU + " (2 bytes per parameter), with a drafter that costs nothing (n-gram), `k = {k}` and "
        "`a = {a}`, leaving out the KV reads, compute:\n"
        "- `ridge_batch`: the batch at which a verify step of B (k + 1) tokens reaches the ridge;\n"
        "- `break_even_batch`: the batch past which speculation yields fewer tokens per step than plain decoding, "
        "to three significant figures or more.",
        (
            Part("break-even-ridge-batch", "ridge_batch", "ridge batch", "sequences", low=5, high=300),
            Part("break-even-batch", "break_even_batch", "break-even batch", "sequences", low=10, high=600),
        ),
    ),
    Question(
        "littles-law",
        "Little's law in a cited measurement",
        littles_law,
        "A configuration cites {in_flight} requests in flight at {arrivals_per_s} requests per second, and "
        "{output_tok_s:,g} output tokens per second with the batch full. Compute:\n"
        "- `seconds_in_system`: the mean time a request spends in the system, in seconds;\n"
        "- `tpot_ms`: the mean time per output token of one sequence, in ms.",
        (
            Part("littles-law-time", "seconds_in_system", "time in the system", "s", low=0.05, high=250),
            Part("littles-law-tpot", "tpot_ms", "time per output token", "ms", low=0.5, high=2100),
        ),
    ),
)

BY_ID = {q.id: q for q in QUESTIONS}
PARTS = {p.id: (q, p) for q in QUESTIONS for p in q.parts}


def question_of(part_or_question: str) -> Question:
    """The question a part id (a grade_id) or a question id names; KeyError names the ids there are."""
    if part_or_question in BY_ID:
        return BY_ID[part_or_question]
    if part_or_question in PARTS:
        return PARTS[part_or_question][0]
    raise KeyError(f"no question {part_or_question!r}; there are {sorted(BY_ID)} and parts {sorted(PARTS)}")


def render(question_id: str, params: Params) -> str:
    """The question's text with these parameters: what the lesson prints in the question's markdown cell."""
    return question_of(question_id).text.format(**params)


def render_stated(question_id: str, params: Params) -> str:
    """What the lesson's question cell states with these parameters (`Question.stated`, else the whole text)."""
    question = question_of(question_id)
    return (question.stated or question.text).format(**params)


REVEAL = "-reveal"  # a marked block's id for a question's reveal: <question id>-reveal


def render_block(block_id: str, params: Params) -> str:
    """What a marked block of the lesson states with these numbers: a question's (render_stated), or its
    reveal's worked case (`<question id>-reveal`: Question.reveal). KeyError for an id that is neither."""
    if block_id.endswith(REVEAL) and block_id[: -len(REVEAL)] in BY_ID:
        reveal = BY_ID[block_id[: -len(REVEAL)]].reveal
        if reveal is None:
            raise KeyError(f"{block_id}: the question has no reveal of its own")
        return reveal(params)
    return render_stated(block_id, params)


def block_question(block_id: str) -> str:
    """The question whose numbers a marked block states (a reveal's is its question's)."""
    return block_id[: -len(REVEAL)] if block_id.endswith(REVEAL) else block_id


def params_source(params: Params, name: str = "params") -> str:
    """A Python line that binds the parameters, for the code cell a rendered notebook computes from."""
    return f"{name} = {dict(params)!r}"
