"""The roofline's mechanism measured on this CPU: verify-step time against tokens per step, B x (k + 1).

The lesson's claim is that a step reads all its weights once whatever it carries, so extra tokens ride
free until the step's arithmetic catches up with its weight reads (the ridge), and cost time in
proportion past it. The lab's live engine cannot show that on this machine (its 135M model's steps are
mostly fixed overhead, bench/results/flip-cpu.json), so this script times the step itself for a model
whose weight reads dominate: one decoder layer of Llama-3.1-8B's exact shape plus its 128,256-token
output head (tied to the embedding, to keep the weights to 3 GB in float32), random weights, after
CONTEXT_LEN cached tokens per sequence. It reuses bench/gpu_step.py's machinery (StepRunner, the CPU
timer, the roofline probe) and sweeps the verify step at k = 4 over batch sizes, so tokens per step run
5, 10, 20, ... Time should stay near the weight reads' floor and then grow linearly; the knee is this
CPU's ridge, read from the measurement (the floor over the linear slope, knee() below), not from a
datasheet.

    python bench/ridge_cpu.py            # about 1-2 minutes on 2 quiet cores; writes bench/results/ridge-cpu.json

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


def _gpu_step():
    spec = importlib.util.spec_from_file_location("gpu_step", ROOT / "bench" / "gpu_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(gpu_step, layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = json.loads(gpu_step.config_path(PRESET).read_text())
    config.update(num_hidden_layers=layers, tie_word_embeddings=True)
    with torch.device("cpu"):
        model = LlamaForCausalLM(LlamaConfig(**config))
    gpu_step.set_attention(model, gpu_step.GQA_ATTENTION)
    return model.to(dtype=torch.float32).eval()


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
    args = parser.parse_args(argv)

    import torch

    gpu_step = _gpu_step()
    t0 = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    model = build(gpu_step, args.layers)
    params = sum(p.numel() for p in model.parameters())
    roofline = gpu_step.measure_roofline(torch.device("cpu"), torch.float32)
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
    weight_bytes = params * 4
    roofline_ridge = roofline["gemm_tflops"] * 1e12 / (roofline["copy_gb_s"] / 2 * 1e9) * 4 / 2
    result = {
        "benchmark": "ridge-cpu",
        "what": (
            f"verify step (k = {K}) of {args.layers} decoder layer(s) of {PRESET}'s shape plus its tied "
            f"output head, random float32 weights ({params / 1e6:.0f}M parameters, {weight_bytes / 1e9:.2f} GB "
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
        "versions": gpu_step.versions(),
        "roofline_probe": roofline,
        # the probe's copy counts read + write; a step reads its weights, so half the copy rate is the read rate
        "ridge_tokens_from_probe": round(roofline_ridge, 1),
        "weights_gb": round(weight_bytes / 1e9, 3),
        "points": points,
        "knee": knee(points),
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
