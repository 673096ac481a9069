"""Does vLLM's compile cache give the lab both a fast start and the compiled speed?

bench/compiled.py found that torch.compile (enforce_eager=False) makes vLLM 13-18 % faster here, but its
engines start in 86-104 s against eager's 29-45 s. vLLM 0.32.0 keeps what it compiled under
VLLM_CACHE_ROOT (default ~/.cache/vllm): torch_compile_cache/<hash>/ holds the compiled graphs, Inductor's
cache (it points TORCHINDUCTOR_CACHE_DIR there) and, with torch >= 2.10, the ahead-of-time artifact
(torch_compile_cache/torch_aot_compile/<hash>/) a later start loads instead of tracing and compiling again.
The hash covers the engine's config (model, dtype, max_num_seqs, ...), vLLM's code and its environment.

One run, side by side, on the lab's plain engine (servelab.lab.speculation.engines.engine_config at the
lab's default settings) and workload, at batch 1 and 8:
  (a) the eager engine: start and tok/s;
  (b) the compiled engine with an empty VLLM_CACHE_ROOT (a fresh temporary folder): start and tok/s;
  (c) the compiled engine again on that now-warm folder: start and tok/s;
  (b) and (c) once per cache path vLLM has (CACHE_MODES);
  (d) Hugging Face transformers generate in the engine's dtype, same prompts and output length (flip.py's peer).
Every phase records its wall time against the CPU time its processes used (servelab.cpu_usage).

Writes bench/results/compile-cache-cpu.json. Usage: python bench/compile_cache.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import __version__, cpu_usage, hardware
from servelab.engine import Engine
from servelab.lab.speculation.engines import engine_config
from servelab.lab.speculation.points import Settings
from servelab.measure import measure_batch, warm_up

BATCHES = [1, 8]
# vLLM's two cache paths: "aot", its default with torch >= 2.10 (the whole compiled forward saved ahead of time),
# and "graphs" (VLLM_USE_AOT_COMPILE=0: Dynamo traces again, the compiled graphs and Inductor's code are read back)
CACHE_MODES = {"aot": {}, "graphs": {"VLLM_USE_AOT_COMPILE": "0"}}
SETTINGS = Settings()  # the lab's defaults: copy workload, 64 new tokens, KV cache 2 GiB, max_num_seqs 256
ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "compile-cache-cpu.json"
# vLLM's own log lines (0.32.0) that say a start read the compile cache instead of compiling
CACHE_HIT_LINES = ("Directly load", "from the cache", "load failure", "saved AOT", "Compiling a graph", "took")


def _phase(fn, pgid_of=lambda: None):
    """(fn's result, its cpu_usage record): wall against the CPU time of this process and the engine's group."""
    before = cpu_usage.snapshot(None)
    out = fn()
    return out, cpu_usage.usage(before, cpu_usage.snapshot(pgid_of()), hardware.cpu_cores())


def engine_run(label: str, compiled: bool, t_start: float) -> dict:
    """Start the lab's plain engine (eager or compiled), one warm-up batch as the lab does, then each batch."""
    config = engine_config(SETTINGS, "none")
    if compiled:
        from dataclasses import replace

        config = replace(config, enforce_eager=False)
    engine = Engine(config)
    try:
        t = time.perf_counter()
        _, start_cpu = _phase(engine.start, lambda: engine.pid)
        start_s = time.perf_counter() - t
        _, warm_cpu = _phase(lambda: warm_up(engine), lambda: engine.pid)
        ready_s = time.perf_counter() - t
        print(f"[{time.perf_counter() - t_start:5.0f} s] {label}: started in {start_s:.1f} s", file=sys.stderr)
        points = {}
        for b in BATCHES:
            record, _ = measure_batch(engine, SETTINGS.workload, b, SETTINGS.output_len, note=label)
            points[str(b)] = {
                "output_tok_s": round(record.output_tok_s, 2),
                "tpot_ms_p50": round(record.tpot_ms_p50, 2),
                "requests": record.num_requests,
                "cpu_usage": record.cpu_usage,
            }
            print(f"    batch {b}: {record.output_tok_s:.1f} tok/s", file=sys.stderr)
        log = engine.log_tail(400)
        return {
            "enforce_eager": config.enforce_eager,
            "start_s": round(start_s, 1),
            "ready_s": round(ready_s, 1),  # start + the lab's warm-up batch: what the learner waits for
            "start_cpu_usage": start_cpu,
            "warm_up_cpu_usage": warm_cpu,
            "points": points,
            "cache_log_lines": [ln.strip()[-200:] for ln in log.splitlines() if any(k in ln for k in CACHE_HIT_LINES)],
            "info": dict(engine.info),
        }
    finally:
        engine.stop()


def peer() -> dict:
    """flip.py's transformers peer in the engine's dtype at BATCHES, each batch with its CPU accounting."""
    sys.path.insert(0, str(ROOT / "bench"))
    import flip

    dtype = engine_config(SETTINGS, "none").resolved_dtype()
    run = flip.transformers_runner(dtype, SETTINGS.workload, SETTINGS.output_len)
    run(1, 1)  # warm-up
    points = {}
    for b in BATCHES:
        point, used = _phase(lambda b=b: run(b, max(1, 8 // b)))
        points[str(b)] = point | {"cpu_usage": used}
    return {"dtype": dtype, "transformers": hardware.package_version("transformers"), "points": points}


def peer_subprocess() -> tuple[dict, dict]:
    """The peer in a fresh Python (as flip.py runs it), and the phase's cpu_usage with that child's CPU time."""
    before = cpu_usage.snapshot(None)
    r0 = os.times()
    out = subprocess.run([sys.executable, __file__, "--peer"], capture_output=True, text=True, check=True)
    used = cpu_usage.usage(before, cpu_usage.snapshot(None), hardware.cpu_cores())
    child = os.times()
    used["peer_process_cpu_s"] = round(child.children_user + child.children_system - r0[2] - r0[3], 2)
    return json.loads(out.stdout.strip().splitlines()[-1]), used


def _folder_size(folder: Path) -> dict:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"files": len(files), "mb": round(sum(p.stat().st_size for p in files) / 2**20, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="store_true", help="only the transformers peer, as JSON")
    if parser.parse_args().peer:
        print(json.dumps(peer()))
        return 0
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    phases: dict[str, dict] = {"eager": engine_run("eager", False, t_start)}  # eager compiles nothing
    caches = {}
    for mode, env in CACHE_MODES.items():
        cache_root = Path(tempfile.mkdtemp(prefix="servelab-vllm-cache-"))
        saved = {k: os.environ.get(k) for k in ("VLLM_CACHE_ROOT", *env)}
        os.environ.update(env, VLLM_CACHE_ROOT=str(cache_root))  # the engines' workers inherit them
        try:
            phases[f"compiled_cold_{mode}"] = engine_run(f"compiled ({mode}), empty cache", True, t_start)
            caches[mode] = _folder_size(cache_root) | {"env": env}
            phases[f"compiled_warm_{mode}"] = engine_run(f"compiled ({mode}), warm cache", True, t_start)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            shutil.rmtree(cache_root, ignore_errors=True)
    peer_result, peer_cpu = peer_subprocess()
    print(f"[{time.perf_counter() - t_start:5.0f} s] transformers peer done", file=sys.stderr)
    info = phases["eager"]["info"]
    eager = phases["eager"]
    peer_1 = peer_result["points"]["1"]["output_tok_s"]
    result = {
        "benchmark": "compile-cache-cpu",
        "what": "the lab's plain vLLM engine (SmolLM2-135M-Instruct, max_num_seqs 256, KV cache 2 GiB) eager, compiled "
        "with an empty VLLM_CACHE_ROOT and compiled again on that warm cache, against transformers generate in the "
        f"same dtype; greedy, {SETTINGS.output_len} new tokens, '{SETTINGS.workload}' workload",
        "machine": hardware.run_machine(load_before),
        "versions": {
            "vllm": info.get("vllm_version", ""),
            "torch": info.get("torch_version", ""),
            "transformers": peer_result["transformers"],
            "servelab": __version__,
        },
        "dtype": info.get("dtype", ""),
        "compile_cache": caches,  # each mode's VLLM_CACHE_ROOT (a temporary folder) after its cold start
        "summary": {
            "ready_s": {k: p["ready_s"] for k, p in phases.items()},
            "tok_s": {k: {b: p["points"][b]["output_tok_s"] for b in p["points"]} for k, p in phases.items()}
            | {"transformers": {b: p["output_tok_s"] for b, p in peer_result["points"].items()}},
            "warm_ready_vs_eager": {
                m: round(phases[f"compiled_warm_{m}"]["ready_s"] / eager["ready_s"], 2) for m in caches
            },
            "warm_faster_than_transformers_at_batch_1": {
                m: phases[f"compiled_warm_{m}"]["points"]["1"]["output_tok_s"] > peer_1 for m in caches
            },
        },
        "phases": {k: {kk: vv for kk, vv in p.items() if kk != "info"} for k, p in phases.items()}
        | {"transformers": peer_result | {"cpu_usage": peer_cpu}},
        "wall_time_s": round(time.perf_counter() - t_start, 1),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT}", file=sys.stderr)
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
