"""The knob lab's noise band: how far apart runs of ONE knob setting land on this machine.

The knob lab compares two settings that ran minutes apart, each on its own server. Before calling a
difference real, it needs to know how much the same setting moves from run to run. This benchmark
measures it the lab's way: the same knob setting (default: batching, max_num_seqs=256, the setting the
lab opens on), under the knob's own load, on --servers freshly started `vllm serve` servers, --runs times
each, with vLLM's serving benchmark (servelab.knobs, as bench/knobs.py runs it). It first looks for repeated
records of one setting in the recorded knob benchmark (data/measurements/knobs-cpu.jsonl) and counts them
in; that file holds one record per setting, so the repeats are measured here.

The band is, for each metric the lab's tables compare, the largest over the smallest value across all the
runs (between servers and on one server), and the lab's factor is the widest of them: a difference between
two settings smaller than that is within what one setting did against itself.

Writes bench/results/noise_band.json (the knob lab reads its factor from there; servelab.knobs.noise_band).
Run it under the machine's lock when others share the cores. Usage: python bench/noise_band.py [--servers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import __version__, hardware, knobs
from servelab.results import ResultsStore

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "noise_band.json"
# the metrics the knob lab's tables set side by side (and rep 2's SLO metrics)
METRICS = ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "output_tok_s")


def _load_key(r: dict) -> tuple:
    return (
        r.get("workload"),
        r.get("num_requests"),
        r.get("max_concurrency"),
        r.get("request_rate"),
        r.get("output_len"),
    )


def recorded_repeats(path: Path) -> dict:
    """Repeated records of one knob setting under one load in the recorded knob benchmark."""
    groups: dict[tuple, list[dict]] = {}
    for r in ResultsStore(path).read() if path.is_file() else []:
        groups.setdefault((r.get("knob"), r.get("knob_setting"), *_load_key(r)), []).append(r)
    repeated = {f"{k[0]}: {k[1]}": v for k, v in groups.items() if len(v) > 1}
    return {
        "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
        "settings": len(groups),
        "records": sum(len(v) for v in groups.values()),
        "repeated_settings": {k: [_summary(r) for r in v] for k, v in repeated.items()},
    }


def _summary(r: dict) -> dict:
    return {m: r.get(m) for m in METRICS}


def band(runs: list[dict]) -> dict:
    """Per metric: the runs' smallest and largest value and their ratio; the factor is the widest ratio."""
    per_metric = {}
    for m in METRICS:
        values = [r[m] for r in runs if isinstance(r.get(m), (int, float)) and r[m] > 0]
        if len(values) < 2:
            continue
        per_metric[m] = {"min": min(values), "max": max(values), "ratio": round(max(values) / min(values), 3)}
    widest = max(per_metric, key=lambda m: per_metric[m]["ratio"])
    return {"factor": per_metric[widest]["ratio"], "widest_metric": widest, "per_metric": per_metric}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knob", default="batching")
    parser.add_argument("--setting", default=None, help="default: the knob's first setting")
    parser.add_argument("--servers", type=int, default=4, help="freshly started servers, one after another")
    parser.add_argument("--runs", type=int, default=2, help="benchmark runs on each server")
    parser.add_argument("--out", default=str(RESULT))
    args = parser.parse_args()
    knob = knobs.KNOBS[args.knob]
    setting = args.setting or knob.setting_names[0]
    plan = knobs.resolve(args.knob, setting)
    t_start = time.monotonic()
    load_before = os.getloadavg()
    recorded = recorded_repeats(knobs.recorded_path())
    model = str(knobs.ServerPool(size=1).model)
    info = knobs.machine_info(model)
    runner = knobs.BenchRunner().start()
    runs: list[dict] = []
    try:
        for server_i in range(args.servers):
            pool = knobs.ServerPool(size=1, model=model)  # a fresh server, as each setting of the lab gets
            try:
                server = pool.get(plan)
                for run_i in range(args.runs):
                    before = os.getloadavg()
                    record = knobs.to_measurement(
                        plan, runner.run(plan, server.url, model), dict(info, start_s=server.ready_s)
                    )
                    row = {
                        "server": server_i,
                        "run": run_i,
                        "server_start_s": server.ready_s,
                        **_summary(record.to_dict()),
                        "loadavg_before": [round(x, 2) for x in before],
                        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    }
                    runs.append(row)
                    print(
                        f"   server {server_i} run {run_i}: " + ", ".join(f"{m} {row[m]:.1f}" for m in METRICS),
                        flush=True,
                    )
            finally:
                pool.close()
    finally:
        runner.close()
    repeats = recorded["repeated_settings"].get(f"{args.knob}: {setting}", [])
    measured = band(runs)
    per_server = [[r for r in runs if r["server"] == i] for i in range(args.servers)]
    within = [band(group) for group in per_server if len(group) > 1]
    wall = round(time.monotonic() - t_start, 1)
    result = {
        "benchmark": "noise-band",
        "what": "repeated runs of one knob setting under the knob's own load, each server started afresh, with "
        "vLLM's serving benchmark (vllm.benchmarks.serve) as the knob lab runs it; the band is the largest "
        "over the smallest value of each metric across the runs",
        "knob": args.knob,
        "setting": setting,
        "workload": knob.workload,
        "load": knob.load.describe(),
        "servers": args.servers,
        "runs_per_server": args.runs,
        "repeats": len(runs) + len(repeats),
        "machine": hardware.run_machine(load_before, info["hardware"], info["cores"]),
        "versions": {"vllm": info["vllm_version"], "torch": info["torch_version"], "servelab": __version__},
        "model": Path(model).name,
        "recorded": recorded,
        "runs": runs,
        "band": band(runs + repeats) if repeats else measured,
        "within_one_server": {
            "factor": max((b["factor"] for b in within), default=None),
            "per_server": [b["factor"] for b in within],
        },
        "command": "python bench/noise_band.py " + " ".join(sys.argv[1:]),
        "wall_time_s": wall,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}: band {result['band']['factor']}x ({result['band']['widest_metric']}), {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
