"""Eager against torch.compile: what vLLM's compiled mode buys on this CPU, with and without speculation.

bench/flip.py measures vLLM in eager mode (enforce_eager=True), the default here because an engine
starts in about 30 s instead of about 2 minutes. This run measures the same engines compiled
(enforce_eager=False) at batch 1, 8 and 64 on the same workload, and sets them beside flip.py's
eager points and its Hugging Face transformers peer from bench/results/flip-cpu.json.

Writes bench/results/compiled-cpu.json and the records to data/measurements/compiled-cpu.jsonl.
Run bench/flip.py first (this reads its result). Usage: python bench/compiled.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import __version__, hardware, paths
from servelab.engine import Engine, EngineConfig
from servelab.measure import compare, sweep, warm_up
from servelab.results import ResultsStore

BATCHES = [1, 8, 64]
K = 4
WORKLOAD = "copy"
OUTPUT_LEN = 64

ROOT = Path(__file__).resolve().parent.parent
FLIP = ROOT / "bench" / "results" / "flip-cpu.json"
RESULT = ROOT / "bench" / "results" / "compiled-cpu.json"
RECORDS = paths.data_dir() / "measurements" / "compiled-cpu.jsonl"


def main() -> int:
    if not FLIP.exists():
        print(f"{FLIP} is missing: run python bench/flip.py first.", file=sys.stderr)
        return 2
    flip = json.loads(FLIP.read_text())
    eager = {row["batch_size"]: row for row in flip["table"]}
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    partial = RECORDS.with_suffix(".partial.jsonl")
    partial.unlink(missing_ok=True)
    store = ResultsStore(partial)
    common = dict(max_num_seqs=max(BATCHES), kv_cache_gb=2.0, enforce_eager=False)
    starts, runs, info = {}, {}, {}
    for method, extra in (("none", {}), ("ngram", dict(spec_method="ngram", num_speculative_tokens=K))):
        engine = Engine(EngineConfig(**common, **extra))
        try:
            t = time.perf_counter()
            engine.start()
            warm_up(engine, max(BATCHES))
            starts[method] = round(time.perf_counter() - t, 1)
            print(
                f"[{time.perf_counter() - t_start:5.0f} s] {method} compiled engine ready in {starts[method]} s",
                file=sys.stderr,
            )
            runs[method] = sweep(
                engine.config,
                BATCHES,
                WORKLOAD,
                OUTPUT_LEN,
                store,
                engine,
                progress=False,
                note="torch.compile (enforce_eager=False)",
            )
            info = dict(engine.info)
        finally:
            engine.stop()
    speedup = {row.batch_size: round(row.speedup, 3) for row in compare(runs["none"], runs["ngram"])}
    peer = flip["transformers_peer"]
    compiled = {m: {r.batch_size: r for r in recs} for m, recs in runs.items()}
    result = {
        "benchmark": "compiled-cpu",
        "what": f"vLLM offline generate compiled (enforce_eager=False) against eager (bench/results/flip-cpu.json), "
        f"SmolLM2-135M-Instruct, greedy, {OUTPUT_LEN} new tokens, '{WORKLOAD}' workload, n-gram k={K}",
        "machine": hardware.run_machine(load_before),
        "versions": {
            "vllm": info.get("vllm_version", ""),
            "torch": info.get("torch_version", ""),
            "servelab": __version__,
        },
        "dtype": info.get("dtype", ""),
        "start_s": {
            "eager_none": flip["phases_s"].get("start plain engine"),
            "eager_ngram": flip["phases_s"].get("start n-gram engine"),
        }
        | {"compiled_" + m: s for m, s in starts.items()},  # start + one warm-up batch, both modes
        "table": [
            {
                "batch_size": b,
                "eager_none_tok_s": eager[b]["none_tok_s"],
                "compiled_none_tok_s": compiled["none"][b].output_tok_s,
                "eager_ngram_tok_s": eager[b]["ngram_tok_s"],
                "compiled_ngram_tok_s": compiled["ngram"][b].output_tok_s,
                "eager_speedup": eager[b]["speedup"],
                "compiled_speedup": speedup[b],
                "compiled_none_tpot_ms_p50": compiled["none"][b].tpot_ms_p50,
                "compiled_ngram_acceptance_rate": compiled["ngram"][b].acceptance_rate,
            }
            for b in BATCHES
        ],
        "transformers_peer": peer,
        "compiled_vllm_ahead_of_transformers": {
            "batch_1": compiled["none"][1].output_tok_s > peer["batch_1"]["output_tok_s"],
            "batch_64": compiled["none"][64].output_tok_s > peer["batch_64"]["output_tok_s"],
        },
        "wall_time_s": round(time.perf_counter() - t_start, 1),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    partial.replace(RECORDS)
    print(f"wrote {RESULT} and {RECORDS}", file=sys.stderr)
    for row in result["table"]:
        print(row)
    print(json.dumps({k: result[k] for k in ("start_s", "compiled_vllm_ahead_of_transformers", "wall_time_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
