"""The simulator's step times, checked on the chip: one decode step and one verify step, timed.

What decides whether speculation pays is the time of one verify step of B x (k+1)
tokens against one decode step of B tokens. This script builds a model of a
preset's exact shape from its config alone (LlamaForCausalLM(config), random
weights: their values change nothing about time), fills a KV cache to a context
length, and times both steps for each batch B and draft length k (k = 0 is the
plain decode step). On a CUDA device it runs bfloat16, captures each step in a
CUDA graph as vLLM does (falling back to eager where capture fails) and times
with CUDA events; on a CPU it runs the same code with a small preset and a short
batch list, timed with perf_counter. It also measures the chip's own roofline:
device-to-device copy bandwidth and the GEMM peak in the run's dtype.

From the step times it computes the speedup speculation would give at acceptance
a (expected tokens (1 - a^(k+1)) / (1 - a) per sequence, simulate.expected_tokens_per_step)
and the crossover batch per k, and sets beside each number what servelab.simulate
predicts for the same chip: its verify pass, KV reads + max(weight reads, arithmetic)
+ launches, with
the engine's per-step costs (scheduler, sampler, drafting) left out, since a
forward pass alone has none. Then it calibrates the simulator's efficiencies on
half the batches and predicts the other half.

    python bench/gpu_step.py                  # CUDA if torch sees it, else the CPU
    python bench/gpu_step.py --device cpu     # the short CPU run that the tests run

On an H200 the default sweep (Llama-3.1-8B, B = 1..512, k = 0..8) takes about
2 minutes and stops timing new points after --budget-s seconds, so the whole
command stays under 8 minutes. Writes bench/results/gpu-step-<chip>.json (h200,
h100, ..., or cpu) and prints a short table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import inspect
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import __version__, hardware, modelspec, simulate
from servelab.batch_sizes import batch_sizes_arg

# --- settings --------------------------------------------------------------------
GPU_PRESET = "Llama-3.1-8B"  # the model the lesson's H200 numbers are for
GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
GPU_KS = (0, 1, 2, 3, 4, 5, 6, 7, 8)  # k = 0: the plain decode step, one token per sequence
GPU_REPEATS = 20  # timed replays per point; the median is reported
CPU_PRESET = "SmolLM2-135M"  # the bundled model's shape: small enough for two cores
CPU_BATCHES = (1, 2, 4, 8, 16)
CPU_KS = (0, 2, 4)
CPU_REPEATS = 3
CPU_DTYPE = (
    "float32"  # eager bfloat16 on a CPU falls off the fast path for some shapes (a masked verify step 7x slower)
)
WARMUP = 2  # untimed runs per point before timing (and before graph capture)
CONTEXT_LEN = simulate.CONTEXT_LEN  # tokens already in each sequence's KV cache: the simulator's context
ACCEPTANCE_RATE = simulate.ACCEPTANCE_RATE  # the a of the speedup table and crossovers; 1.0 = every draft accepted
BUDGET_S = 360.0  # stop timing new points after this many seconds of sweep: the command stays under 8 minutes
FIT_PARAMS = ("bandwidth_efficiency", "compute_efficiency", "layer_overhead_s")  # what a forward pass can tell apart

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CONFIG_DIR = ROOT / "src" / "servelab" / "model_configs"


class BenchError(Exception):
    """The run cannot go on; the message says why and what to do."""


# --- the device and the model ------------------------------------------------------------
def pick_device(name: str):
    """'auto' is CUDA when torch sees a device, else the CPU."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BenchError(
            f"--device {name}: torch {torch.__version__} sees no CUDA device here. "
            "Run with --device cpu, or on a machine where torch.cuda.is_available() is True."
        )
    return torch.device(name)


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return hardware.cpu_name()


def chip_slug(device) -> str:
    """h200 for 'NVIDIA H200', a preset's name where one matches, else the device name in lower-case words."""
    if device.type != "cuda":
        return "cpu"
    name = device_name(device)
    try:
        return hardware.get(name).name.lower()
    except hardware.UnknownHardware:
        return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-") or "gpu"


def config_path(preset: str) -> Path:
    """The preset's config.json in the repository (what the model's shape is read from)."""
    for key, filename in modelspec.PRESET_FILES.items():
        if preset.lower() in (key.lower(), filename[:-5].lower()):
            return CONFIG_DIR / filename
    raise BenchError(f"Unknown model preset {preset!r}: use one of {', '.join(modelspec.PRESET_FILES)}.")


def build_model(preset: str, device, dtype):
    """LlamaForCausalLM of the preset's shape, random weights, made on the device in its dtype."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**json.loads(config_path(preset).read_text()))
    spec = modelspec.preset(preset)
    need_gb = spec.num_params * dtype.itemsize / 1e9
    if device.type == "cuda":
        free_gb = torch.cuda.mem_get_info(device)[0] / 1e9
        if need_gb > 0.8 * free_gb:
            raise BenchError(
                f"{preset} needs {need_gb:.0f} GB of weights in {dtype} and the device has "
                f"{free_gb:.0f} GB free: choose a smaller --model."
            )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # made in the dtype directly: an 8B model never exists in float32
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.to(device=device, dtype=dtype).eval()


# --- attention: K and V read once per KV head, as vLLM's kernels do ------------------------
GQA_ATTENTION = "servelab_gqa_sdpa"


def gqa_sdpa(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Scaled dot-product attention that reads each KV head once, for every query head that shares it.

    transformers' sdpa path copies K and V once per query head (repeat_kv) whenever there
    is a mask, which a verify step always has: at batch 512 that copy costs more than the
    weights. Here the query heads of one group are folded into the query length instead,
    so the kernel sees one head per KV head and K, V stay where the cache holds them.
    With no mask given, queries are the last tokens of the cache (causal, bottom-right).
    """
    import torch

    batch, heads, q_len, head_dim = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    group = heads // kv_heads
    # head h uses KV head h // group (repeat_kv's order): rows g * q_len + i of the folded query
    folded = query.reshape(batch, kv_heads, group * q_len, head_dim)
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :kv_len]
        mask = (
            mask[:, :, None]
            .expand(mask.shape[0], 1, group, q_len, kv_len)
            .reshape(mask.shape[0], 1, group * q_len, kv_len)
        )
    elif q_len > 1:
        rows = torch.arange(q_len, device=query.device) + (kv_len - q_len)
        mask = (torch.arange(kv_len, device=query.device)[None, :] <= rows[:, None]).repeat(group, 1)
    else:
        mask = None  # one query token sees the whole cache
    out = torch.nn.functional.scaled_dot_product_attention(
        folded, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )
    return out.reshape(batch, heads, q_len, head_dim).transpose(1, 2).contiguous(), None


def set_attention(model, name: str) -> None:
    """Switch the model's attention implementation ('sdpa' or GQA_ATTENTION)."""
    if name == GQA_ATTENTION:
        from transformers import AttentionInterface

        AttentionInterface.register(GQA_ATTENTION, gqa_sdpa)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:  # transformers before set_attn_implementation: layers read the shared config at call time
        model.config._attn_implementation = name


# --- one step: the cache, the inputs, the forward pass -------------------------------------
class StepRunner:
    """One forward pass of batch_size sequences, k + 1 new tokens each, after context_len cached ones.

    The cache holds exactly context_len + k + 1 positions, so every step reads the same
    cache as a real one would; rewind() puts it back to context_len before each run,
    so a run can be repeated (and replayed from a CUDA graph) without the cache growing.
    """

    def __init__(self, model, batch_size: int, k: int, context_len: int, cache: str = "static"):
        import torch

        self.model, self.context_len, self.cache_kind = model, context_len, cache
        config = model.config
        self.tokens = k + 1
        device = model.device
        self.input_ids = torch.randint(0, config.vocab_size, (batch_size, self.tokens), device=device)
        positions = torch.arange(context_len, context_len + self.tokens, device=device)
        self.position_ids = positions.expand(batch_size, self.tokens).contiguous()
        forward_args = inspect.signature(type(model.model).forward).parameters
        self.extra = {"cache_position": positions} if "cache_position" in forward_args else {}
        self.batch_size = batch_size
        self.cache = self._new_cache(context_len + self.tokens)
        self.fill()

    def _new_cache(self, max_len: int):
        from transformers import DynamicCache, StaticCache

        if self.cache_kind == "dynamic":
            return DynamicCache()
        offered = {
            "config": self.model.config,
            "max_cache_len": max_len,
            "max_batch_size": self.batch_size,
            "batch_size": self.batch_size,
            "device": self.model.device,
            "dtype": self.model.dtype,
        }
        params = inspect.signature(StaticCache.__init__).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            wanted = {n for n in params if n != "self"}  # a **kwargs that swallows old names: pass only its own
        else:
            wanted = set(params)
        return StaticCache(**{n: v for n, v in offered.items() if n in wanted})

    def fill(self) -> None:
        """Random keys and values for the first context_len positions of every layer (their values do not matter)."""
        import torch

        config, model = self.model.config, self.model
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        shape = (self.batch_size, config.num_key_value_heads, self.context_len, head_dim)
        positions = torch.arange(self.context_len, device=model.device)
        for layer in range(config.num_hidden_layers):
            keys = torch.randn(shape, device=model.device, dtype=model.dtype)
            self.cache.update(keys, torch.randn_like(keys), layer, {"cache_position": positions})

    def prefill(self, input_ids) -> None:
        """Fill the cache by running the model over real tokens instead (for checking the step against a full pass)."""
        if self.cache_kind == "dynamic":
            self.cache = self._new_cache(0)
        else:
            self.cache = self._new_cache(self.context_len + self.tokens)
        positions = self.position_ids.new_tensor(range(self.context_len))
        extra = {"cache_position": positions} if self.extra else {}
        self.model(
            input_ids=input_ids,
            position_ids=positions.expand(input_ids.shape[0], -1),
            past_key_values=self.cache,
            use_cache=True,
            **extra,
        )

    def rewind(self) -> None:
        """Back to context_len cached tokens: the next run writes the same positions again."""
        if self.cache_kind == "dynamic":
            self.cache = self._new_cache(0)  # a DynamicCache only grows: fill a fresh one (outside the timing)
            self.fill()
            return
        for layer in getattr(self.cache, "layers", ()):
            length = getattr(layer, "cumulative_length", None)  # newer StaticCache layers write at this counter
            if hasattr(length, "fill_"):
                length.fill_(self.context_len)
            elif length is not None:
                layer.cumulative_length = self.context_len

    def run(self):
        """One forward pass; returns the logits of every new token (a verify step needs them all)."""
        return self.model(
            input_ids=self.input_ids,
            position_ids=self.position_ids,
            past_key_values=self.cache,
            use_cache=True,
            **self.extra,
        ).logits


# --- timing -----------------------------------------------------------------------------
def time_cpu(runner: StepRunner, repeats: int) -> list[float]:
    for _ in range(WARMUP):
        runner.rewind()
        runner.run()
    times = []
    for _ in range(repeats):
        runner.rewind()
        t0 = time.perf_counter()
        runner.run()
        times.append(time.perf_counter() - t0)
    return times


def time_cuda_eager(runner: StepRunner, repeats: int) -> list[float]:
    import torch

    for _ in range(WARMUP):
        runner.rewind()
        runner.run()
    pairs = []
    for _ in range(repeats):
        runner.rewind()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        runner.run()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1000.0 for s, e in pairs]


def time_cuda_graph(runner: StepRunner, repeats: int) -> list[float]:
    """Capture the step once, replay it: the kernels run without Python between them, as in vLLM's decode."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch.cuda.graph's docs ask
        for _ in range(WARMUP):
            runner.rewind()
            runner.run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    runner.rewind()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        logits = runner.run()
    pairs = []
    for i in range(repeats + 1):
        runner.rewind()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        if i:  # the first replay is a warm-up
            pairs.append((start, end))
    torch.cuda.synchronize()
    del graph, logits
    return [s.elapsed_time(e) / 1000.0 for s, e in pairs]


def measure_point(runner: StepRunner, repeats: int, use_graph: bool) -> tuple[list[float], bool, str]:
    """(step times in s, whether a CUDA graph ran, why not if it was asked for and failed)."""
    import torch

    device = runner.model.device
    if device.type != "cuda":
        return time_cpu(runner, repeats), False, ""
    if use_graph:
        stream = torch.cuda.current_stream()
        try:
            return time_cuda_graph(runner, repeats), True, ""
        except Exception as exc:  # noqa: BLE001 capture is the fragile part: time the same step eagerly instead
            # a failed capture_end leaves torch.cuda.graph's capture stream current: go back to ours
            torch.cuda.set_stream(stream)
            torch.cuda.synchronize()
            return time_cuda_eager(runner, repeats), False, _first_line(exc)
    return time_cuda_eager(runner, repeats), False, ""


def _first_line(exc: BaseException) -> str:
    """The error in one line, with the one it interrupted (a failed capture raises again on the way out)."""

    def line(e):
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"

    cause = exc.__cause__ or exc.__context__
    return (line(exc) + (f" (while handling {line(cause)})" if cause else ""))[:500]


# --- the chip's own roofline -----------------------------------------------------------------
def measure_roofline(device, dtype, seconds: float = 0.5) -> dict:
    """Copy bandwidth (read + write, as CUDA's bandwidthTest counts a device-to-device copy) and GEMM peak."""
    import torch

    def best_s(fn) -> float:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best, deadline = math.inf, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) / 1000.0)
            else:
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
        return best

    copy_bytes = (1 << 30) if device.type == "cuda" else (256 << 20)
    src = torch.ones(copy_bytes // dtype.itemsize, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    copy_gb_s = 2 * copy_bytes / best_s(lambda: dst.copy_(src)) / 1e9
    src = dst = None  # free the buffers before the GEMM's
    m, n, kk = (8192, 8192, 8192) if device.type == "cuda" else (256, 2048, 2048)
    a = torch.randn(m, kk, device=device, dtype=dtype)
    b = torch.randn(kk, n, device=device, dtype=dtype)
    gemm_tflops = 2 * m * n * kk / best_s(lambda: torch.mm(a, b)) / 1e12
    return {
        "copy_gb_s": round(copy_gb_s, 1),
        "copy_bytes": copy_bytes,
        "gemm_tflops": round(gemm_tflops, 3),
        "gemm_shape_mnk": [m, n, kk],
        "dtype": str(dtype).replace("torch.", ""),
    }


# --- the simulator beside the measurement ------------------------------------------------------
def forward_simulator(spec, hw, dtype: str, context_len: int, on_gpu: bool) -> simulate.Simulator:
    """The simulator's verify pass alone: its default settings, minus the costs a bare forward pass never pays."""
    base = (
        simulate.Simulator(spec, hw, dtype=dtype, context_len=context_len)
        if on_gpu
        else simulate.cpu_simulator(spec, hw, dtype=dtype, context_len=context_len)
    )
    return dataclasses.replace(
        base, step_overhead_s=0.0, spec_overhead_s=0.0, ngram_s_per_token=0.0, ngram_match_rate=1.0
    )


def simulated_step_s(sim: simulate.Simulator, batch_size: int, k: int) -> float:
    return sim.step(batch_size, k, "ngram" if k else "none", ACCEPTANCE_RATE).time_s


def as_records(points: list[dict], acceptance_rate: float) -> list[dict]:
    """Step times as the records calibrate() reads: output tok/s of decode steps at that acceptance."""
    records = []
    for p in points:
        k = p["num_speculative_tokens"]
        tokens = simulate.expected_tokens_per_step(acceptance_rate, k)
        record = {
            "method": "ngram" if k else "none",
            "num_speculative_tokens": k,
            "batch_size": p["batch_size"],
            "output_tok_s": p["batch_size"] * tokens / (p["step_ms"] / 1000.0),
        }
        if k:
            record["mean_acceptance_length"] = tokens  # gives calibrate() this acceptance back
        records.append(record)
    return records


def split_batches(batches) -> tuple[list, list]:
    """(calibrate, evaluate): odd- and even-indexed distinct batch sizes, the rule of bench/simulator_accuracy.py."""
    ordered = sorted(set(batches))
    return ordered[1::2], ordered[0::2]


def speedups(step_s: dict, batches, k: int, acceptance_rate: float) -> dict:
    """Batch -> speedup: expected tokens per verify step x decode step time / verify step time."""
    tokens = simulate.expected_tokens_per_step(acceptance_rate, k)
    return {b: tokens * step_s[(b, 0)] / step_s[(b, k)] for b in batches if (b, 0) in step_s and (b, k) in step_s}


def compare(points: list[dict], spec, hw, dtype: str, context_len: int, on_gpu: bool, acceptance_rate: float) -> dict:
    """Per point, per k and overall: measured, the simulator's default, and the simulator calibrated on half."""
    sim = forward_simulator(spec, hw, dtype, context_len, on_gpu)
    batches = sorted({p["batch_size"] for p in points})
    cal_batches, eval_batches = split_batches(batches)
    cal_points = [p for p in points if p["batch_size"] in cal_batches]
    calibrated = None
    if cal_points:
        calibrated = simulate.calibrate(
            as_records(cal_points, acceptance_rate),
            spec,
            hw,
            dtype=dtype,
            context_len=context_len,
            start=sim,
            params=FIT_PARAMS,
        )
    for p in points:
        b, k = p["batch_size"], p["num_speculative_tokens"]
        p["simulated_step_ms"] = 1000.0 * simulated_step_s(sim, b, k)
        p["error_pct"] = 100.0 * (p["simulated_step_ms"] - p["step_ms"]) / p["step_ms"]
        p["half"] = "calibrate" if b in cal_batches else "evaluate"
        if calibrated is not None:
            p["calibrated_step_ms"] = 1000.0 * simulated_step_s(calibrated, b, k)
            p["calibrated_error_pct"] = 100.0 * (p["calibrated_step_ms"] - p["step_ms"]) / p["step_ms"]

    def steps(key):
        return {(p["batch_size"], p["num_speculative_tokens"]): p[key] for p in points if key in p}

    ks = sorted({p["num_speculative_tokens"] for p in points if p["num_speculative_tokens"]})
    rows, crossovers = [], []
    for k in ks:
        found = {
            name: speedups(steps(key), batches, k, acceptance_rate)
            for name, key in (
                ("measured", "step_ms"),
                ("simulated", "simulated_step_ms"),
                ("calibrated", "calibrated_step_ms"),
            )
        }
        for b in batches:
            if b in found["measured"]:
                rows.append({"batch_size": b, "k": k, **{name: found[name].get(b) for name in found}})
        crossovers.append(
            {
                "k": k,
                **{
                    name: simulate.crossover(list(s), list(s.values())) if len(s) > 1 else None
                    for name, s in found.items()
                },
            }
        )

    def mape(selected, key):
        errors = [abs(p[key]) for p in selected if key in p]
        return statistics.fmean(errors) if errors else None

    held_out = [p for p in points if p["half"] == "evaluate"]
    return {
        "simulator": {
            "what": "simulate.Simulator's verify pass: KV reads + max(weight reads, arithmetic) + layers x layer_overhead_s; "
            "step_overhead_s, spec_overhead_s and n-gram cost set to 0, since a forward pass pays none",
            "hardware": hw.to_dict(),
            "settings": sim.settings(),
            "mape_pct": mape(points, "error_pct"),
        },
        "calibration": {
            "rule": "distinct batch sizes sorted; odd-indexed (0-based) calibrate, even-indexed evaluate; "
            f"simulate.calibrate fits {', '.join(FIT_PARAMS)}",
            "calibrate_batches": cal_batches,
            "evaluate_batches": eval_batches,
            "fitted": {name: getattr(calibrated, name) for name in FIT_PARAMS} if calibrated else None,
            "calibration_mape_pct": mape(cal_points, "calibrated_error_pct"),
            "held_out_mape_pct": mape(held_out, "calibrated_error_pct"),
            "held_out_mape_pct_default": mape(held_out, "error_pct"),
        },
        "speedup": {
            "acceptance_rate": acceptance_rate,
            "formula": "(1 - a^(k+1)) / (1 - a) x decode_step_ms / verify_step_ms (simulate.expected_tokens_per_step)",
            "rows": rows,
        },
        "crossover_batch": crossovers,
    }


# --- the sweep ------------------------------------------------------------------------------
def sweep(
    model, batches, ks, context_len: int, repeats: int, cache: str, use_graph: bool, budget_s: float, estimate
) -> tuple[list[dict], list[dict], list[str]]:
    """Time every (B, k); past the budget, fewer repeats, then no more points. (points, skipped, graph failures)."""
    import torch

    plan = [(b, k) for b in batches for k in ks]
    points, skipped, graph_failures = [], [], []
    t_start = time.perf_counter()
    failures = 0  # points failed in a row
    scale = 1.0  # actual wall time per point over the estimate, learned as points finish
    for i, (b, k) in enumerate(plan):
        elapsed = time.perf_counter() - t_start
        left = sum(estimate(bb, kk, repeats) for bb, kk in plan[i:]) * scale
        if elapsed >= budget_s:
            skipped.extend(
                {"batch_size": bb, "num_speculative_tokens": kk, "why": "time budget"} for bb, kk in plan[i:]
            )
            break
        reps = repeats if elapsed + left <= budget_s else max(3, repeats // 4)
        t_point = time.perf_counter()
        runner = None
        try:
            with torch.inference_mode():
                runner = StepRunner(model, b, k, context_len, cache)
                times, graphed, failure = measure_point(runner, reps, use_graph)
        except Exception as exc:  # noqa: BLE001 one shape failing (out of memory, say) should not lose the others
            if model.device.type == "cuda":
                torch.cuda.synchronize()
            failures += 1
            skipped.append({"batch_size": b, "num_speculative_tokens": k, "why": _first_line(exc)})
            print(f"B={b} k={k} failed: {skipped[-1]['why']}", file=sys.stderr, flush=True)
            if failures >= 3:
                skipped.extend(
                    {"batch_size": bb, "num_speculative_tokens": kk, "why": "three points failed"}
                    for bb, kk in plan[i + 1 :]
                )
                break
            continue
        finally:
            del runner
            if model.device.type == "cuda":
                torch.cuda.empty_cache()
        failures = 0
        if failure:
            graph_failures.append(f"B={b} k={k}: {failure}")
            use_graph = False  # one failed capture is enough: the rest run eagerly, and the record says so
        wall = time.perf_counter() - t_point
        scale = max(0.2, 0.5 * scale + 0.5 * wall / max(estimate(b, k, reps), 1e-3))
        points.append(
            {
                "batch_size": b,
                "num_speculative_tokens": k,
                "tokens_per_seq": k + 1,
                "step_ms": 1000.0 * statistics.median(times),
                "step_ms_min": 1000.0 * min(times),
                "step_ms_max": 1000.0 * max(times),
                "repeats": len(times),
                "cuda_graph": graphed,
            }
        )
        print(
            f"[{time.perf_counter() - t_start:6.1f} s] B={b:<4} k={k}  {points[-1]['step_ms']:9.3f} ms"
            f"{'  (graph)' if graphed else ''}",
            file=sys.stderr,
            flush=True,
        )
    return points, skipped, graph_failures


def check_attention(model, context_len: int) -> tuple[str, str]:
    """Use the GQA attention if it gives sdpa's logits on this device and transformers version, else sdpa."""
    import torch

    try:
        with torch.inference_mode():
            runner = StepRunner(model, 2, 2, context_len, "static")
            set_attention(model, "sdpa")
            runner.rewind()
            reference = runner.run().float()
            set_attention(model, GQA_ATTENTION)
            runner.rewind()
            logits = runner.run().float()
        scale = reference.abs().max().item() or 1.0
        diff = (logits - reference).abs().max().item() / scale
        tolerance = 1e-4 if model.dtype == torch.float32 else 3e-2
        if diff <= tolerance:
            return GQA_ATTENTION, f"max |logits - sdpa's| / max |logits| = {diff:.2g}"
        reason = f"its logits differ from sdpa's by {diff:.2g} (relative)"
    except Exception as exc:  # noqa: BLE001 any failure of the GQA path falls back to sdpa, with the reason
        reason = _first_line(exc)
    set_attention(model, "sdpa")
    return "sdpa", f"GQA attention not used ({reason}): transformers' sdpa copies K and V per query head"


# --- provenance -------------------------------------------------------------------------------
def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict:
    import torch

    found = {
        "python": platform.python_version(),
        "servelab": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
    }
    for name in ("transformers", "numpy"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def device_info(device) -> dict:
    import torch

    info = {"type": device.type, "name": device_name(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            memory_gb=round(props.total_memory / 1e9, 1),
            multiprocessors=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
        )
    else:
        info.update(threads=torch.get_num_threads())
    return info


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# --- command line ------------------------------------------------------------------------------
def parse_ints(text: str) -> list[int]:
    """Draft lengths k, comma separated (0 is the plain decode step); batch sizes use servelab.batch_sizes."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, like 1,4,16; got {text!r}"
        ) from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative whole numbers, like 1,4,16; got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA if torch sees it, else cpu), cuda, cuda:1, cpu")
    parser.add_argument(
        "--model", default=None, help=f"model preset (default: {GPU_PRESET} on CUDA, {CPU_PRESET} on the CPU)"
    )
    parser.add_argument(
        "--batches", type=batch_sizes_arg, default=None, help="batch sizes, e.g. 1,2,4,8 or 1,2,4,...,256"
    )
    parser.add_argument("--ks", type=parse_ints, default=None, help="draft lengths k; 0 is the decode step")
    parser.add_argument("--context-len", type=int, default=CONTEXT_LEN, help="tokens already in each KV cache")
    parser.add_argument("--dtype", default=None, help="bfloat16 (default on CUDA), float32 (default on the CPU)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per point (median reported)")
    parser.add_argument(
        "--cache",
        choices=("static", "dynamic"),
        default="static",
        help="transformers' StaticCache (default; needed for CUDA graphs) or DynamicCache",
    )
    parser.add_argument("--no-cuda-graphs", action="store_true", help="time eager forward passes on CUDA")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's); 1 keeps a shared machine's timings steady",
    )
    parser.add_argument("--acceptance", type=float, default=ACCEPTANCE_RATE, help="a for the speedup and crossovers")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds of sweep before points are skipped")
    parser.add_argument(
        "--output", type=Path, default=None, help="where the JSON goes (default: bench/results/gpu-step-<chip>.json)"
    )
    args = parser.parse_args(argv)
    try:
        return run(args, list(sys.argv[1:] if argv is None else argv))
    except BenchError as exc:
        print(f"gpu_step: {exc}", file=sys.stderr)
        return 2


def run(args, argv: list[str]) -> int:
    import torch

    t_start = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    device = pick_device(args.device)
    on_gpu = device.type == "cuda"
    preset = args.model or (GPU_PRESET if on_gpu else CPU_PRESET)
    batches = args.batches or list(GPU_BATCHES if on_gpu else CPU_BATCHES)
    ks = sorted(set(args.ks if args.ks is not None else (GPU_KS if on_gpu else CPU_KS)) | {0})  # k=0 is the baseline
    repeats = args.repeats or (GPU_REPEATS if on_gpu else CPU_REPEATS)
    dtype_name = (
        simulate.DTYPE_ALIASES.get(args.dtype, args.dtype) if args.dtype else ("bfloat16" if on_gpu else CPU_DTYPE)
    )
    if dtype_name not in ("bfloat16", "float16", "float32"):
        raise BenchError(f"--dtype {args.dtype}: use bfloat16, float16 or float32.")
    if not 0.0 <= args.acceptance < 1.0:
        raise BenchError(f"--acceptance {args.acceptance}: a is a probability, at least 0 and below 1.")
    if 0 in batches or args.context_len < 1:
        raise BenchError("Batch sizes and --context-len must be at least 1.")
    dtype = getattr(torch, dtype_name)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = modelspec.preset(preset) if preset.lower() in (p.lower() for p in modelspec.PRESET_FILES) else None
    config = config_path(preset)
    spec = spec or modelspec.ModelSpec.from_config_json(config)
    if on_gpu:
        torch.cuda.set_device(device)
    name = device_name(device)
    print(
        f"gpu_step: {preset} ({dtype_name}) on {name}, batches {batches}, k {ks}, context {args.context_len}",
        file=sys.stderr,
        flush=True,
    )

    roofline = measure_roofline(device, dtype)
    measured_hw = hardware.Hardware(
        name=f"{name} (measured)",
        memory_gb=0.0,
        bandwidth_gb_s=roofline["copy_gb_s"],
        peak_tflops=roofline["gemm_tflops"],
        dtype=dtype_name,
        source=f"bench/gpu_step.py: {roofline['copy_bytes'] >> 20} MiB copy, "
        f"{'x'.join(map(str, roofline['gemm_shape_mnk']))} GEMM",
    )
    datasheet = None
    if on_gpu:
        try:
            datasheet = hardware.get(name)
        except hardware.UnknownHardware:
            pass
    # The simulator as learners see it: the datasheet preset for a known GPU, else what was just measured.
    sim_hw = datasheet or measured_hw
    print(
        f"gpu_step: roofline {roofline['copy_gb_s']:.0f} GB/s copy, {roofline['gemm_tflops']:.3g} TFLOP/s GEMM"
        + (f" (datasheet {datasheet.bandwidth_gb_s:g} GB/s, {datasheet.peak_tflops:g} TFLOP/s)" if datasheet else ""),
        file=sys.stderr,
        flush=True,
    )

    t_build = time.perf_counter()
    model = build_model(preset, device, dtype)
    build_s = time.perf_counter() - t_build
    attention, attention_note = check_attention(model, args.context_len)
    use_graph = on_gpu and not args.no_cuda_graphs and args.cache == "static"

    estimator = forward_simulator(spec, measured_hw, dtype_name, args.context_len, on_gpu)
    per_run_overhead_s = 0.0 if use_graph else (0.03 if on_gpu else 0.0)  # eager Python per forward pass on a GPU

    def estimate(b, k, reps):
        """Wall seconds for one point: warm-up, capture and timed runs at the simulated step time."""
        runs = WARMUP + reps + (2 if use_graph else 0)
        return runs * (simulated_step_s(estimator, b, k) + per_run_overhead_s) + (0.1 if on_gpu else 0.0)

    planned = sum(estimate(b, k, repeats) for b in batches for k in ks)
    print(
        f"gpu_step: {len(batches) * len(ks)} points, about {planned:.0f} s by the roofline "
        f"(budget {args.budget_s:g} s); attention: {attention}",
        file=sys.stderr,
        flush=True,
    )
    points, skipped, graph_failures = sweep(
        model, batches, ks, args.context_len, repeats, args.cache, use_graph, args.budget_s, estimate
    )
    if not any(p["num_speculative_tokens"] == 0 for p in points):
        raise BenchError("No decode step was timed (every point was skipped): raise --budget-s or shorten --batches.")
    comparison = compare(points, spec, sim_hw, dtype_name, args.context_len, on_gpu, args.acceptance)

    timing = (
        "CUDA graphs, CUDA events"
        if any(p["cuda_graph"] for p in points)
        else "eager forward passes, CUDA events"
        if on_gpu
        else "eager forward passes, time.perf_counter"
    )
    result = {
        "benchmark": "gpu-step",
        "what": f"one forward pass of {preset}'s shape (random weights) over B sequences x (k+1) new tokens after "
        f"{args.context_len} cached tokens each: k = 0 is the decode step, k > 0 the verify step; median "
        f"of the timed runs; beside it servelab.simulate's verify pass for the same chip",
        "command": " ".join(["python bench/gpu_step.py", *argv]),
        "device": device_info(device),
        "machine": {
            "cpu": hardware.cpu_name(),
            "cores": hardware.cpu_cores(),
            "platform": platform.platform(),
            "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": versions(),
        "commit": git_commit(),
        "model": {
            "preset": preset,
            "config": relative(config),
            "num_params": spec.num_params,
            "weights": "random: LlamaForCausalLM(config), nothing downloaded",
            "build_s": round(build_s, 1),
        },
        "dtype": dtype_name,
        "context_len": args.context_len,
        "cache": f"transformers {'StaticCache' if args.cache == 'static' else 'DynamicCache'}, "
        "filled with random keys and values",
        "attention": attention,
        "attention_note": attention_note,
        "timing": timing,
        "warmup_runs": WARMUP,
        "cuda_graph_failures": graph_failures,
        "roofline": {
            **roofline,
            "datasheet": datasheet.to_dict() if datasheet else None,
            "copy_over_datasheet": round(roofline["copy_gb_s"] / datasheet.bandwidth_gb_s, 3) if datasheet else None,
            "gemm_over_datasheet": round(roofline["gemm_tflops"] / datasheet.peak_tflops, 3) if datasheet else None,
        },
        "batches": batches,
        "ks": ks,
        "repeats": repeats,
        "budget_s": args.budget_s,
        "estimated_sweep_s": round(planned, 1),
        "points": points,
        "skipped": skipped,
        **comparison,
        "wall_time_s": round(time.perf_counter() - t_start, 1),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    output = args.output or RESULTS / f"gpu-step-{chip_slug(device)}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"gpu_step: wrote {relative(output)} in {result['wall_time_s']:.0f} s", file=sys.stderr)
    print(table(result))
    return 0


def table(result: dict) -> str:
    """The short table printed last: per k, speedup at batch 1 and the crossover, measured against simulated."""
    a = result["speedup"]["acceptance_rate"]
    first = min(result["batches"])
    at_first = {r["k"]: r for r in result["speedup"]["rows"] if r["batch_size"] == first}
    cal = result["calibration"]

    def num(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    lines = [
        f"{result['model']['preset']} on {result['device']['name']} ({result['dtype']}, {result['timing']}, "
        f"context {result['context_len']}), a = {a:g}; measured / simulator (calibrated on half)",
        f"{'k':>2} {'speedup at B=' + str(first):>22} {'crossover batch':>26}",
    ]
    for c in result["crossover_batch"]:
        r = at_first.get(c["k"], {})
        lines.append(
            f"{c['k']:>2} {num(r.get('measured'), '.2f'):>8} / {num(r.get('simulated'), '.2f'):>5}"
            f" ({num(r.get('calibrated'), '.2f'):>5}) {num(c['measured'], '.1f'):>9} / "
            f"{num(c['simulated'], '.1f'):>6} ({num(c['calibrated'], '.1f'):>6})"
        )
    lines.append(
        f"step time error, simulator: {num(result['simulator']['mape_pct'], '.1f')} % mean over "
        f"{len(result['points'])} points; calibrated on B={cal['calibrate_batches']}, held-out B="
        f"{cal['evaluate_batches']}: {num(cal['held_out_mape_pct'], '.1f')} % "
        f"(uncalibrated {num(cal['held_out_mape_pct_default'], '.1f')} %)"
    )
    roof = result["roofline"]
    lines.append(
        f"roofline: copy {roof['copy_gb_s']:g} GB/s, GEMM {roof['gemm_tflops']:g} TFLOP/s"
        + (
            f" ({roof['copy_over_datasheet']:.0%} and {roof['gemm_over_datasheet']:.0%} of the datasheet)"
            if roof.get("datasheet")
            else ""
        )
    )
    if result["skipped"]:
        lines.append(f"skipped {len(result['skipped'])} points: {result['skipped'][0]['why']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
