"""Keys for the computed answers, built from servelab itself. Instructor-only: not in the students' wheel.

No value here is secret (a learner computes it from the same public presets), but the module computes
the answer and its slips for any numbers, so with each student's own warm-up numbers (servelab.variants)
it is a solver: the students' wheel leaves it out (servelab.classroom.studentenv.INSTRUCTOR_ONLY), and
nothing a student's environment runs imports it. The grader's key files (grading/keys/) use it from the checkout.

Each function returns a key for a checker in `checkers`: the value servelab
computes (model presets, hardware presets, the reviewer) plus the known slips a
learner makes on the way there, each with the assumption that was off and a short
id that names it (`slip`, stable: the class report counts slips by it). The
answers that are judgement (which option, which verdict) live only in the
instructor notebook's hidden tests, never in the package.
"""

from __future__ import annotations

from pathlib import Path

from servelab import hardware, modelspec, simulate
from servelab.paths import data_dir


def kv_bytes_per_token(model: str, dtype: str = "bfloat16", points: float = 1) -> dict:
    """KV cache bytes one token adds: 2 (K and V) x layers x KV heads x head_dim x bytes."""
    spec = modelspec.preset(model)
    value = spec.kv_bytes_per_token(dtype)
    nbytes = hardware.DTYPE_BYTES[dtype]
    return {
        "name": "KV cache bytes per token",
        "value": value,
        "unit": "bytes",
        "points": points,
        "hints": [
            {
                "slip": "kv-once",
                "value": value / 2,
                "feedback": "You counted one tensor per layer: the cache holds both K and V, so multiply by 2.",
            },
            {
                "slip": "attention-heads",
                "value": value * spec.num_heads / spec.num_kv_heads,
                "feedback": f"You used the {spec.num_heads} attention heads; with grouped-query attention only the "
                f"{spec.num_kv_heads} KV heads are cached.",
            },
            {
                "slip": "one-layer",
                "value": value / spec.num_layers,
                "feedback": f"That is one layer; every one of the {spec.num_layers} layers keeps its own K and V.",
            },
            {"slip": "bits", "value": value * 8, "feedback": "That is bits: divide by 8 for bytes."},
            {
                "slip": "no-bytes-per-value",
                "value": value / nbytes,
                "feedback": f"You left out the bytes per value ({nbytes} in {dtype}).",
            },
            {
                "slip": "float32",
                "value": value / nbytes * 4,
                "feedback": f"That counts 4-byte float32 values; {dtype} takes {nbytes} bytes per value.",
            },
        ],
        "otherwise": "Per token: 2 (K and V) x num_layers x num_kv_heads x head_dim x bytes per value.",
    }


def kv_bytes(model: str, tokens_per_sequence: int, batch_size: int, dtype: str = "bfloat16", points: float = 1) -> dict:
    """KV cache bytes for a whole batch: per-token bytes x tokens x sequences."""
    spec = modelspec.preset(model)
    value = spec.kv_bytes(tokens_per_sequence, batch_size, dtype)
    return {
        "name": "KV cache bytes for the batch",
        "value": value,
        "unit": "bytes",
        "points": points,
        "hints": [
            {
                "slip": "one-sequence",
                "value": value / batch_size,
                "feedback": "That is one sequence: weights are shared across a batch, but every sequence keeps its own KV cache.",
            },
            {
                "slip": "one-token",
                "value": value / tokens_per_sequence,
                "feedback": "That is one token per sequence: the cache grows with every token of context.",
            },
            {"slip": "gb", "value": value / 1e9, "feedback": "Give the answer in bytes, not GB."},
            {"slip": "gib", "value": value / 2**30, "feedback": "Give the answer in bytes, not GiB."},
            {"slip": "kv-once", "value": value / 2, "feedback": "The cache holds both K and V: multiply by 2."},
        ],
        "otherwise": "Batch KV bytes = bytes per token x tokens per sequence x batch size.",
    }


def ridge_flop_per_byte(gpu: str, points: float = 1) -> dict:
    """The roofline ridge: peak FLOP/s over memory bytes/s."""
    hw = hardware.get(gpu)
    value = hw.ridge_flop_per_byte
    return {
        "name": f"{hw.name} ridge point",
        "value": value,
        "unit": "FLOP/byte",
        "points": points,
        "hints": [
            {
                "slip": "bytes-per-flop",
                "value": 1 / value,
                "feedback": "That is bytes per FLOP: the ridge is peak FLOP/s divided by bandwidth in bytes/s.",
            },
            {
                "slip": "units-1000",
                "value": value * 1000,
                "feedback": "Units: TFLOP/s is 1e12 and TB/s is 1e12; GB/s is 1e9. One of them is off by 1000.",
            },
            {
                "slip": "units-1000",
                "value": value / 1000,
                "feedback": "Units: TFLOP/s is 1e12 and TB/s is 1e12; GB/s is 1e9. One of them is off by 1000.",
            },
            {
                "slip": "sparse-peak",
                "value": value * 2,
                "feedback": "That uses the sparse peak; serving runs dense matmuls, so use the dense number.",
            },
        ],
        "otherwise": f"Ridge = peak FLOP/s / bandwidth bytes/s ({hw.peak_tflops} TFLOP/s, {hw.bandwidth_gb_s} GB/s).",
    }


def ridge_tokens_per_step(gpu: str, dtype: str = "bfloat16", points: float = 1) -> dict:
    """Tokens a decode step must carry before it turns compute-bound."""
    hw = hardware.get(gpu)
    nbytes = hardware.DTYPE_BYTES[dtype]
    value = hw.ridge_tokens_per_step(nbytes)
    return {
        "name": "tokens per step at the ridge",
        "value": value,
        "unit": "tokens",
        "points": points,
        # A step carries whole tokens: the count either side of the ridge is right too (42 or 41 for 41.5, a
        # variant's fp8 ridge), where 1 % alone refused it below about 100 tokens; the slips are 2x away.
        "abs_tol": 1.0,
        "hints": [
            {
                "slip": "flop-per-token",
                "value": value * 2,
                "feedback": "Each token costs 2 FLOP per parameter (a multiply and an add): divide by 2.",
            },
            {
                "slip": "no-bytes-per-parameter",
                "value": value / nbytes,
                "feedback": f"Each parameter read costs {nbytes} bytes in {dtype}: multiply by the bytes per parameter.",
            },
            {
                "slip": "ridge-not-tokens",
                "value": hw.ridge_flop_per_byte,
                "feedback": "That is the ridge in FLOP/byte; convert it to tokens: x bytes per parameter / 2 FLOP per parameter.",
            },
        ],
        "otherwise": "Intensity of a decode step = tokens x 2 FLOP / bytes per parameter; set it equal to the ridge.",
    }


def tokens_per_verify_step(acceptance_rate: float, num_speculative_tokens: int, points: float = 1) -> dict:
    """Leviathan et al.: expected tokens per verify step = (1 - a^(k+1)) / (1 - a)."""
    a, k = acceptance_rate, num_speculative_tokens
    value = simulate.expected_tokens_per_step(a, k)
    return {
        "name": "expected tokens per verify step",
        "value": value,
        "unit": "tokens",
        "points": points,
        # Tighter than the default 1 %: a x k (2.8 at a = 0.7, k = 4) sits 1 % from the answer (2.7731),
        # so the question asks for three significant figures, and an answer is right to three: within half a
        # unit of the third (0.5 % at most, at a leading 1; 0.18 % here: 2.77 and 2.773 are right, 2.8 not).
        "rel_tol": 0.0,
        "figures": 3,
        "hints": [
            {
                "slip": "all-accepted",
                "value": k + 1,
                "feedback": "That assumes every draft token is accepted; the first rejection ends the run, so weight each position by a^i.",
            },
            {
                "slip": "one-plus-a-k",
                "value": 1 + a * k,
                "feedback": "That is 1 + a x k, which is right for vLLM's 'draft acceptance rate' (accepted / drafted "
                "tokens, which already counts the cut-off at the first rejection). Here a is Leviathan's "
                "per-token acceptance probability: position i counts only if positions 1..i-1 were "
                "accepted too, so the terms are a^i, not a.",
            },
            {
                "slip": "a-times-k",
                "value": a * k,
                "feedback": "That is a x k, or the answer cut to two figures: the question asks for "
                "three, since two cannot tell them apart. If you computed a x k: it is "
                "the accepted drafts if a were vLLM's draft acceptance rate, and "
                "without the token the target model always contributes itself (the bonus or "
                "correction token). Here a is the per-token probability: sum a^i for i = 0..k.",
            },
            {
                "slip": "no-bonus-token",
                "value": value - 1,
                "feedback": "You left out the token the target model always contributes itself (the bonus or correction token).",
            },
        ],
        "otherwise": "Sum a^i for i = 0..k, which is (1 - a^(k+1)) / (1 - a).",
    }


def verified_tokens_per_step(batch_size: int, num_speculative_tokens: int, points: float = 1) -> dict:
    """Tokens one verify step pushes through the target model: batch x (k + 1)."""
    value = batch_size * (num_speculative_tokens + 1)
    return {
        "name": "tokens verified per step",
        "value": value,
        "unit": "tokens",
        "points": points,
        "rel_tol": 0.0,
        "abs_tol": 0.5,
        "hints": [
            {
                "slip": "k-not-k-plus-1",
                "value": batch_size * num_speculative_tokens,
                "feedback": "Each sequence also runs the position after the drafts (k + 1 positions, not k).",
            },
            {
                "slip": "plain-decode",
                "value": batch_size,
                "feedback": "That is plain decode; with speculation every sequence verifies k + 1 positions in the step.",
            },
            {
                "slip": "one-sequence",
                "value": num_speculative_tokens + 1,
                "feedback": "That is one sequence; the step carries every sequence in the batch.",
            },
        ],
        "otherwise": "Every sequence in the batch verifies k draft tokens plus one: batch x (k + 1).",
    }


def is_compute_bound(
    batch_size: int, num_speculative_tokens: int, gpu: str, dtype: str = "bfloat16", points: float = 1
) -> dict:
    """Is a verify step of batch x (k + 1) tokens past the GPU's ridge?"""
    hw = hardware.get(gpu)
    tokens = batch_size * (num_speculative_tokens + 1)
    ridge = hw.ridge_tokens_per_step(hardware.DTYPE_BYTES[dtype])
    bound = tokens > ridge
    return {
        "name": "compute-bound?",
        "value": bound,
        "points": points,
        "why": f"The step carries {tokens} tokens and the {hw.name} ridge is about {ridge:.0f} tokens per step "
        f"in {dtype}, so it is {'past' if bound else 'below'} the ridge: "
        f"{'verification now costs FLOPs' if bound else 'verification still rides on weight reads'}.",
    }


def config_path(case: str) -> Path:
    """A reviewer example config: data/configs/<case>.yaml."""
    return data_dir() / "configs" / f"{case}.yaml"


def workload_path(case: str) -> Path:
    """The workload a reviewer example config claims to serve: data/configs/<case>-workload.yaml."""
    return data_dir() / "configs" / f"{case}-workload.yaml"


def knob_audit(config_path, workload_path, points: float = 4) -> dict:
    """The reviewer's verdict and reason for each knob of one config."""
    from servelab import review

    report = review.review_files(config_path, workload_path)
    verdicts = dict(report.verdicts())
    fixes = {f.knob: f.fix for f in report.findings}
    # When the weights alone do not fit, the reviewer reports the one shortfall under parallelism and
    # again under gpu-memory-utilization (whose fix is "see parallelism"): grade that fault once.
    follows = {}
    if (
        verdicts.get("parallelism") == "wrong"
        and verdicts.get("gpu_memory_utilization") == "wrong"
        and "parallelism" in fixes.get("gpu_memory_utilization", "")
    ):
        follows["gpu_memory_utilization"] = "parallelism"
        del verdicts["gpu_memory_utilization"]
    return {
        "name": "knob audit",
        "points": points,
        "verdicts": verdicts,
        "follows": follows,
        "reasons": {f.knob: f.reason for f in report.findings},
    }
