"""Lesson 25's variant solver: instructor-only, read by the grader's own process and by practice in a checkout.

SOLVE maps each question id of servelab.variants.questions to a function of the question's parameters
that returns, per part (grade_id), the checker in servelab.grading.checkers, its key and the worked
solution for those parameters. It works from the parameters alone and from first principles (the
recap's formulas), never from the generators, servelab.simulate or servelab.grading.keys' values: only
the tolerances are keys' (the lesson's conventions for each kind of answer), so that the variant is
graded as the fixed lesson is. Like every file here it stays in the checkout: the students' wheel is
built without grading/ (servelab.classroom.studentenv.NOT_FOR_THE_WHEEL), and the hub's secrets scan
(tests/secrets_helpers.py) searches the package and the wheel for this file's lines.
"""

from servelab.grading import keys

# The lesson's tolerances, taken from the fixed lesson's keys: a number within checkers.number's default
# (1 %); the expected tokens per verify step to three significant figures (a x k can sit 1 % away); a count
# of tokens or sessions to the half unit. A field of a practice dict: a count exactly (rel_tol 0.0, as
# grading/keys/lesson25.py's practice 1 and 4), a number within checkers.fields' default.
_DEFAULT_TOL: dict = {}
_FIGURES_TOL = {name: keys.tokens_per_verify_step(0.7, 4)[name] for name in ("rel_tol", "figures")}
_COUNT_TOL = {name: keys.verified_tokens_per_step(2, 1)[name] for name in ("rel_tol", "abs_tol")}
_FIELD_COUNT_TOL = 0.0
_WHOLE_TOL = {"abs_tol": keys.ridge_tokens_per_step("H200")["abs_tol"]}  # a count of tokens or sequences, either side


def _number(value, unit, worked, hints=(), tol=_DEFAULT_TOL, otherwise="", points=1):
    """A key for checkers.number; its name is the part's own (servelab.variants.questions), set by the grader."""
    key = {"value": value, "unit": unit, "points": points, **tol, "hints": list(hints)}
    if otherwise:
        key["otherwise"] = otherwise
    return {"checker": "number", "key": key, "worked": worked}


def _hint(slip, value, feedback):
    return {"slip": slip, "value": value, "feedback": feedback}


def _kv_per_token(p):
    """2 (K and V) x layers x KV heads x head_dim x bytes per value."""
    return 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["bytes_per_value"]


def _shape_sum(p):
    return (
        f"2 (K and V) x {p['layers']} layers x {p['kv_heads']} KV heads x {p['head_dim']} x "
        f"{p['bytes_per_value']} bytes = {_kv_per_token(p):,} bytes per token"
    )


def _expected_tokens(a, k):
    """Leviathan et al.: the drafts kept in order, each with probability a^i, plus the target's own token."""
    total, term = 0.0, 1.0
    for _ in range(k + 1):
        total += term
        term *= a
    return total


def _ridge_tokens(p, nbytes=2):
    """FLOP/s over bytes/s, then x bytes per parameter / 2 FLOP per parameter per token."""
    return (p["peak_tflops"] * 1e12) / (p["bandwidth_gb_s"] * 1e9) * nbytes / 2


def solve_warmup1(p):
    per_token = _kv_per_token(p)
    total = per_token * p["tokens_per_sequence"] * p["batch"]
    b = p["bytes_per_value"]
    return {
        "warmup1-per-token": _number(
            per_token,
            "bytes",
            _shape_sum(p) + ".",
            [
                _hint("kv-once", per_token / 2, "You counted one tensor per layer: the cache holds both K and V."),
                _hint(
                    "attention-heads",
                    per_token * p["heads"] / p["kv_heads"],
                    f"You used the {p['heads']} attention heads; only the {p['kv_heads']} KV heads are cached.",
                ),
                _hint("one-layer", per_token / p["layers"], f"That is one layer of the {p['layers']}."),
                _hint("bits", per_token * 8, "That is bits: divide by 8 for bytes."),
                _hint("no-bytes-per-value", per_token / b, f"You left out the {b} bytes per value."),
            ],
        ),
        "warmup1-batch": _number(
            total,
            "bytes",
            f"{per_token:,} bytes per token x {p['tokens_per_sequence']:,} tokens x {p['batch']} sequences "
            f"= {total:,} bytes ({total / 1e9:,.1f} GB).",
            [
                _hint("one-sequence", total / p["batch"], "That is one sequence: every sequence keeps its own cache."),
                _hint("one-token", total / p["tokens_per_sequence"], "That is one token per sequence."),
                _hint("gb", total / 1e9, "Give the answer in bytes, not GB."),
                _hint("gib", total / 2**30, "Give the answer in bytes, not GiB."),
                _hint("kv-once", total / 2, "The cache holds both K and V: multiply by 2."),
            ],
        ),
    }


def solve_warmup2(p):
    nbytes = p["bytes_per_param"]
    ridge = p["peak_tflops"] * 1e12 / (p["bandwidth_gb_s"] * 1e9)
    tokens = ridge * nbytes / 2
    token_hints = [_hint("flop-per-token", tokens * 2, "Each token costs 2 FLOP per parameter: divide by 2.")]
    if nbytes != 1:
        token_hints.append(
            _hint("no-bytes-per-parameter", tokens / nbytes, f"Multiply by the {nbytes} bytes per parameter.")
        )
    if nbytes != 2:
        token_hints.append(
            _hint("ridge-not-tokens", ridge, "That is the ridge in FLOP/byte: x bytes per parameter / 2 FLOP.")
        )
    return {
        "warmup2-ridge": _number(
            ridge,
            "FLOP/byte",
            f"{p['peak_tflops']:g}e12 FLOP/s / {p['bandwidth_gb_s']:g}e9 bytes/s = {ridge:.1f} FLOP per byte.",
            [
                _hint("bytes-per-flop", 1 / ridge, "That is bytes per FLOP: peak FLOP/s over bytes/s."),
                _hint("units-1000", ridge * 1000, "Units: TFLOP/s is 1e12, GB/s is 1e9."),
                _hint("units-1000", ridge / 1000, "Units: TFLOP/s is 1e12, GB/s is 1e9."),
            ],
        ),
        "warmup2-tokens": _number(
            tokens,
            "tokens",
            f"{ridge:.1f} FLOP/byte x {nbytes} bytes per parameter / 2 FLOP per parameter per token = {tokens:.1f} tokens.",
            token_hints,
            tol=_WHOLE_TOL,
        ),
    }


def solve_warmup3(p):
    a, k, batch = p["a"], p["k"], p["batch"]
    gained = _expected_tokens(a, k)
    verified = batch * (k + 1)
    ridge = _ridge_tokens(p)
    bound = verified > ridge
    terms = " + ".join(["1"] + [f"{a}^{i}" for i in range(1, k + 1)])
    return {
        "warmup3-tokens": _number(
            gained,
            "tokens",
            f"{terms} = (1 - {a}^{k + 1}) / (1 - {a}) = {gained:.4f} tokens.",
            [
                _hint("all-accepted", k + 1, "That assumes every draft is accepted: weight position i by a^i."),
                _hint(
                    "one-plus-a-k",
                    1 + a * k,
                    "That is 1 + a x k: a position counts only if all before it were accepted.",
                ),
                _hint("a-times-k", a * k, "That is a x k (or two figures): sum a^i for i = 0..k."),
                _hint("no-bonus-token", gained - 1, "You left out the token the target model always adds itself."),
            ],
            tol=_FIGURES_TOL,
        ),
        "warmup3-verified": _number(
            verified,
            "tokens",
            f"{batch} sequences x ({k} drafts + 1) = {verified} tokens.",
            [
                _hint("k-not-k-plus-1", batch * k, "Each sequence also runs the position after its drafts: k + 1."),
                _hint("plain-decode", batch, "That is plain decode: each sequence verifies k + 1 positions."),
                _hint("one-sequence", k + 1, "That is one sequence; the step carries the whole batch."),
            ],
            tol=_COUNT_TOL,
        ),
        "warmup3-bound": {
            "checker": "yes_no",
            "key": {
                "value": bound,
                "points": 1,
                "why": f"The step carries {verified} tokens and the ridge is {ridge:.0f} tokens per step, so it is "
                f"{'past' if bound else 'below'} the ridge.",
            },
            "worked": f"{verified} tokens {'>' if bound else '<'} the ridge's {ridge:.1f} tokens per step: {bound}.",
        },
    }


def solve_practice1(p):
    met = p["measured_ms"] <= p["target_ms"]
    miss = max(0, p["measured_ms"] - p["target_ms"])
    limit = min(p["users"], p["max_num_seqs"])
    binds = p["max_num_seqs"] < p["users"]
    fields = {
        "slo_met": {"expect": met, "feedback": f"p99 {p['measured_ms']:g} ms against {p['target_ms']:g} ms."},
        "slo_miss_ms": {
            "expect": miss,
            "feedback": f"The miss is measured minus target, 0 if met: {miss:g} ms.",
        },
        "useful_batch_limit": {
            "expect": limit,
            "rel_tol": _FIELD_COUNT_TOL,
            "feedback": f"{p['users']} users put at most {limit} sequences in a batch: vLLM pads nothing.",
        },
        "cap_explains_miss": {
            "expect": binds and not met,
            "feedback": f"The cap of {p['max_num_seqs']} {'binds' if binds else 'never binds'} at {p['users']} users.",
        },
    }
    worked = (
        f"slo_met {met} ({p['measured_ms']:g} vs {p['target_ms']:g} ms); slo_miss_ms {miss:g}; useful_batch_limit "
        f"min({p['users']} users, cap {p['max_num_seqs']}) = {limit}; cap_explains_miss {binds and not met}."
    )
    # The knob and verdict are the fixed key's (the same for every variant: the cap never binds); what they
    # are told in, this variant's numbers.
    judgement = {
        "knob": f"The knob under review is the batching cap, max-num-seqs {p['max_num_seqs']}.",
        "verdict": f"Nothing about this workload backs {p['max_num_seqs']}, so it is unjustified. It is not wrong: "
        f"with {p['users']} users the running batch never exceeds {p['users']}, so the cap never binds. 'Wrong' "
        f"needs a fact the setting contradicts, and the {p['measured_ms']:g} ms is not caused by the cap.",
    }
    return {
        "practice1-test": {
            "checker": "fields",
            "key": {"points": 2, "fields": fields},
            "worked": worked,
            "judgement": judgement,
        }
    }


def solve_practice4(p):
    gpus = p["gpus_per_node"]
    fields = {
        "configured": {
            "expect": p["tensor_parallel_size"],
            "rel_tol": _FIELD_COUNT_TOL,
            "feedback": "The degree asked for.",
        },
        "gpus_available": {"expect": gpus, "rel_tol": _FIELD_COUNT_TOL, "feedback": f"The node has {gpus} GPUs."},
        "max_tensor_parallel": {
            "expect": gpus,
            "rel_tol": _FIELD_COUNT_TOL,
            "feedback": f"A tensor-parallel group on one node of {gpus} GPUs has at most {gpus}.",
        },
    }
    worked = (
        f"configured {p['tensor_parallel_size']}; gpus_available {gpus}; max_tensor_parallel {gpus} (TP x PP <= GPUs)."
    )
    judgement = {
        "knob": "The knob at fault is the tensor-parallel degree.",
        "verdict": f"vLLM needs tensor-parallel-size x pipeline-parallel-size GPUs and does not start with "
        f"{p['tensor_parallel_size']} on this one {gpus}-GPU node: it is wrong, not just unmeasured.",
    }
    return {
        "practice4-test": {
            "checker": "fields",
            "key": {"points": 1, "fields": fields},
            "worked": worked,
            "judgement": judgement,
        }
    }


def solve_capacity_context(p):
    per_token = _kv_per_token(p)
    per_seq = per_token * p["new_context"] / 1e9
    total = per_seq * p["chats"]
    old = per_token * p["old_context"] / 1e9
    return {
        "capacity-context-per-seq": _number(
            per_seq,
            "GB",
            f"{_shape_sum(p)}; x {p['new_context']:,} tokens = {per_seq:.3f} GB.",
            [
                _hint("old-context", old, f"That is the old {p['old_context']:,}-token context."),
                _hint("gib", per_seq * 1e9 / 2**30, "That is GiB: the question asks for GB (10^9 bytes)."),
                _hint("kv-once", per_seq / 2, "The cache holds both K and V."),
            ],
        ),
        "capacity-context-all": _number(
            total,
            "GB",
            f"{per_seq:.3f} GB x {p['chats']} chats = {total:.1f} GB.",
            [
                _hint("old-context", old * p["chats"], f"That is the old {p['old_context']:,}-token context."),
                _hint("gib", total * 1e9 / 2**30, "That is GiB: the question asks for GB (10^9 bytes)."),
                _hint("one-chat", per_seq, "That is one chat; each keeps its own cache."),
            ],
        ),
    }


def solve_capacity_sessions(p):
    weights = p["params_b"] * 1e9 * p["bytes_per_value"]
    per_session = _kv_per_token(p) * p["context"]
    hbm = p["hbm_gb"] * 1e9
    fit = int((hbm - weights) // per_session)
    need = (weights + p["sessions"] * per_session) / 1e12
    return {
        "capacity-sessions-fit": _number(
            fit,
            "sessions",
            f"({p['hbm_gb']:,} GB - {weights / 1e9:.0f} GB of weights) / {per_session / 1e9:.2f} GB per session "
            f"({_kv_per_token(p):,} bytes x {p['context']:,} tokens), rounded down: {fit}.",
            [
                _hint("weights-left-in", int(hbm // per_session), "That leaves no room for the weights."),
                _hint("kv-once", int((hbm - weights) // (per_session / 2)), "The cache holds both K and V."),
            ],
            tol=_COUNT_TOL,
        ),
        "capacity-sessions-need": _number(
            need,
            "TB",
            f"{weights / 1e9:.0f} GB of weights + {p['sessions']} x {per_session / 1e9:.2f} GB = {need:.3f} TB.",
            [
                _hint("no-weights", p["sessions"] * per_session / 1e12, "Add the weights."),
                _hint("tib", need * 1e12 / 2**40, "That is TiB: the question asks for TB (10^12 bytes)."),
            ],
        ),
    }


def solve_capacity_bandwidth(p):
    weight_bytes = p["params_b"] * 1e9 * p["bytes_per_param"]
    ceiling = p["bandwidth_gb_s"] * 1e9 / weight_bytes
    return {
        "capacity-bandwidth-tok-s": _number(
            ceiling,
            "tokens/s",
            f"Each step reads {weight_bytes / 1e9:g} GB of weights ({p['params_b']:g}e9 x {p['bytes_per_param']} bytes): "
            f"{p['bandwidth_gb_s']:g} GB/s / {weight_bytes / 1e9:g} GB = {ceiling:.1f} tokens/s.",
            [
                _hint(
                    "params-not-bytes", p["bandwidth_gb_s"] / p["params_b"], "Multiply the parameters by their bytes."
                ),
                _hint("bits", ceiling / 8, "That counts bits per parameter: bytes, not bits."),
            ]
            if p["bytes_per_param"] != 1
            else [_hint("bits", ceiling / 8, "That counts bits per parameter: bytes, not bits.")],
        ),
    }


def solve_capacity_transfer(p):
    per_request = _kv_per_token(p) * p["prompt_tokens"]
    rate = per_request * p["requests_per_s"] / 1e9
    return {
        "capacity-transfer-gb-s": _number(
            rate,
            "GB/s",
            f"{_shape_sum(p)}; x {p['prompt_tokens']:,} tokens = {per_request / 1e9:.3f} GB per request; "
            f"x {p['requests_per_s']} requests/s = {rate:.2f} GB/s.",
            [
                _hint("one-request", per_request / 1e9, "That is one request; multiply by the request rate."),
                _hint("kv-once", rate / 2, "The cache holds both K and V."),
                _hint("gib", rate * 1e9 / 2**30, "That is GiB/s: the question asks for GB/s."),
            ],
        ),
    }


def solve_break_even(p):
    a, k = p["a"], p["k"]
    ridge = _ridge_tokens(p, p["bytes_per_param"])
    gained = _expected_tokens(a, k)
    ridge_batch = ridge / (k + 1)
    even = ridge * gained / (k + 1)
    return {
        "break-even-ridge-batch": _number(
            ridge_batch,
            "sequences",
            f"ridge {ridge:.1f} tokens per step / ({k} + 1) positions = {ridge_batch:.1f} sequences.",
            [
                _hint("ridge-tokens", ridge, "That is the ridge in tokens; each sequence carries k + 1."),
                _hint("k-not-k-plus-1", ridge / k, "Each sequence verifies k + 1 positions, not k."),
            ],
            tol=_WHOLE_TOL,  # a batch is whole sequences
        ),
        "break-even-batch": _number(
            even,
            "sequences",
            f"Past the ridge a step yields E x ridge / (k + 1) tokens against B without speculation; E = "
            f"(1 - {a}^{k + 1}) / (1 - {a}) = {gained:.4f}, so {ridge:.1f} x {gained:.4f} / {k + 1} = {even:.1f}.",
            [
                _hint(
                    "ridge-batch",
                    ridge_batch,
                    "That is where speculation starts to cost; it still pays until E x that.",
                ),
                _hint("ridge-tokens", ridge, "That is the ridge in tokens for plain decode."),
                _hint("a-times-k", ridge * a * k / (k + 1), "E is the sum of a^i for i = 0..k, not a x k."),
            ],
            tol=_FIGURES_TOL,  # E to three figures, as in warm-up 3: a x k can sit 1 % from it
        ),
    }


def solve_littles_law(p):
    seconds = p["in_flight"] / p["arrivals_per_s"]
    tpot = p["in_flight"] / p["output_tok_s"] * 1000
    return {
        "littles-law-time": _number(
            seconds,
            "s",
            f"Little's law: {p['in_flight']} in flight / {p['arrivals_per_s']} requests/s = {seconds:.2f} s.",
            [_hint("inverted", 1 / seconds, "That is arrivals over requests in flight: invert it.")],
        ),
        "littles-law-tpot": _number(
            tpot,
            "ms",
            f"Each of {p['in_flight']} sequences gets {p['output_tok_s']:g} / {p['in_flight']} tokens/s: "
            f"{p['in_flight']} / {p['output_tok_s']:g} x 1000 = {tpot:.1f} ms.",
            [
                _hint(
                    "fleet-token-time",
                    1000 / p["output_tok_s"],
                    "That is the fleet's time per token, not one sequence's.",
                ),
                _hint("seconds", tpot / 1000, "That is seconds: the question asks for ms."),
            ],
        ),
    }


SOLVE = {
    "warmup1": solve_warmup1,
    "warmup2": solve_warmup2,
    "warmup3": solve_warmup3,
    "practice1": solve_practice1,
    "practice4": solve_practice4,
    "capacity-context": solve_capacity_context,
    "capacity-sessions": solve_capacity_sessions,
    "capacity-bandwidth": solve_capacity_bandwidth,
    "capacity-transfer": solve_capacity_transfer,
    "break-even": solve_break_even,
    "littles-law": solve_littles_law,
}
