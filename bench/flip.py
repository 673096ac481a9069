"""The flip, measured on this machine: speculative decoding's win at batch 1 turning into a loss.

One run, real vLLM on the bundled SmolLM2-135M-Instruct:
  1. no speculation and n-gram k=4 at batch 1..64 on the copy-heavy workload, and the crossover batch;
  2. the two fixes: load-adaptive k (vLLM's num_speculative_tokens_per_batch_size) and routing by
     load between the speculating and the plain engine;
  3. why load-adaptive k does not recover the baseline here: the same engine with k=0 at every batch
     (the speculative machinery with nothing to verify), and the n-gram proposer timed on its own;
  4. Hugging Face transformers' generate on the same model (batch 1, batch 1 with prompt lookup,
     batch 64), the peer a user would otherwise pick;
  5. this machine's roofline, and each point's fraction of it.

Writes bench/results/flip-cpu.json and the records to data/measurements/flip-cpu.jsonl (the
lab's recorded backend). Usage: python bench/flip.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from servelab import __version__, hardware, paths
from servelab.engine import Engine, EngineConfig
from servelab.measure import compare, crossover_batch, sweep, warm_up
from servelab.modelspec import ModelSpec
from servelab.results import ResultsStore
from servelab.routing import Router, threshold_from_records
from servelab.workload import load

BATCHES = [1, 2, 4, 8, 16, 32, 64]
K = 4
WORKLOAD = "copy"
OUTPUT_LEN = 64
ADAPTIVE = ((1, 2, 4), (3, 64, 0))  # k=4 at batch 1-2, off above: the quiz's "scale back as batch grows"
K0 = ((1, 64, 0),)  # the speculative machinery on, nothing to verify
K0_BATCHES = [1, 8, 64]
TARGETS = {"speedup_at_batch_1_min": 1.4, "speedup_at_batch_64_max": 0.8, "wall_time_max_s": 900}

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "flip-cpu.json"
RECORDS = paths.data_dir() / "measurements" / "flip-cpu.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batches 1, 8, 64 only (a smoke run; not committed)")
    parser.add_argument("--transformers-peer", action="store_true", help="only the transformers peer, as JSON")
    args = parser.parse_args()
    if args.transformers_peer:
        print(json.dumps(transformers_peer("float32")))
        return 0
    batches = [1, 8, 64] if args.quick else BATCHES
    t_start = time.perf_counter()
    load_before = os.getloadavg()

    # Measured once, on a quiet machine, and carried by every record of this run.
    roofline = hardware.this_machine(refresh=True)
    tmp_records = RECORDS.with_suffix(".partial.jsonl")
    tmp_records.parent.mkdir(parents=True, exist_ok=True)
    tmp_records.unlink(missing_ok=True)
    store = ResultsStore(tmp_records)
    common = dict(max_num_seqs=max(batches), kv_cache_gb=2.0)
    phases: dict[str, float] = {}

    def timed(name, fn):
        t = time.perf_counter()
        out = fn()
        phases[name] = round(time.perf_counter() - t, 1)
        print(f"[{time.perf_counter() - t_start:6.0f} s] {name} done in {phases[name]} s", file=sys.stderr)
        return out

    plain = Engine(EngineConfig(**common))
    spec = Engine(EngineConfig(spec_method="ngram", num_speculative_tokens=K, **common))
    try:
        timed("start plain engine", lambda: (plain.start(), warm_up(plain, max(batches))))
        timed("start n-gram engine", lambda: (spec.start(), warm_up(spec, max(batches))))
        base = timed("sweep none", lambda: sweep(plain.config, batches, WORKLOAD, OUTPUT_LEN, store, plain))
        ngram = timed("sweep ngram", lambda: sweep(spec.config, batches, WORKLOAD, OUTPUT_LEN, store, spec))
        rows = compare(base, ngram)
        crossover = crossover_batch(rows)
        router = Router(spec, plain, threshold_from_records(base, ngram))

        def routed_sweep():
            records = [router.measure(WORKLOAD, b, OUTPUT_LEN) for b in batches]
            store.extend(records)
            return records

        routed = timed("sweep routed", routed_sweep)
    finally:
        spec.stop()
    try:
        adaptive = timed(
            "sweep adaptive",
            lambda: sweep(
                EngineConfig(
                    spec_method="ngram",
                    num_speculative_tokens=K,
                    num_speculative_tokens_per_batch_size=ADAPTIVE,
                    **common,
                ),
                batches,
                WORKLOAD,
                OUTPUT_LEN,
                store,
            ),
        )
        k0 = timed(
            "sweep k=0 machinery",
            lambda: sweep(
                EngineConfig(
                    spec_method="ngram", num_speculative_tokens=K, num_speculative_tokens_per_batch_size=K0, **common
                ),
                [b for b in K0_BATCHES if b in batches],
                WORKLOAD,
                OUTPUT_LEN,
                store,
                note="k=0 at every batch: the speculative machinery with nothing to verify",
            ),
        )
    finally:
        plain.stop()
    info = dict(plain.info)
    proposer = timed("n-gram proposer alone", lambda: time_ngram_proposer(batches))
    peers = timed("transformers peer", transformers_peer_subprocess)

    model = ModelSpec.from_config_json(EngineConfig().resolved_model())
    wall = round(time.perf_counter() - t_start, 1)
    by_batch = lambda recs: {r.batch_size: r for r in recs}  # noqa: E731
    b, n, a, r0, k0b = by_batch(base), by_batch(ngram), by_batch(adaptive), by_batch(routed), by_batch(k0)
    speedup = {row.batch_size: round(row.speedup, 3) for row in rows}
    result = {
        "benchmark": "flip-cpu",
        "what": "vLLM offline generate, SmolLM2-135M-Instruct, greedy, every request exactly "
        f"{OUTPUT_LEN} new tokens, '{WORKLOAD}' workload; n-gram k={K}; small batches run several "
        "rounds (at least 8 requests per point)",
        "machine": hardware.run_machine(load_before),
        "versions": {
            "vllm": info["vllm_version"],
            "torch": info["torch_version"],
            "servelab": __version__,
            "transformers": hardware.package_version("transformers"),
        },
        "engine": {
            "dtype": info["dtype"],
            "enforce_eager": True,
            "threads": info["cores"],
            "prompt_lookup_min": spec.config.prompt_lookup_min,
            "prompt_lookup_max": spec.config.prompt_lookup_max,
        },
        "roofline": roofline.to_dict() | {"ridge_flop_per_byte": round(roofline.ridge_flop_per_byte, 2)},
        "table": [
            {
                "batch_size": bs,
                "none_tok_s": b[bs].output_tok_s,
                "ngram_tok_s": n[bs].output_tok_s,
                "speedup": speedup[bs],
                "adaptive_tok_s": a[bs].output_tok_s,
                "routed_tok_s": r0[bs].output_tok_s,
                "routed_to": r0[bs].engine_config["routing"]["served_by"],
                "k0_machinery_tok_s": k0b[bs].output_tok_s if bs in k0b else None,
                "none_tpot_ms_p50": b[bs].tpot_ms_p50,
                "ngram_tpot_ms_p50": n[bs].tpot_ms_p50,
                "ngram_acceptance_rate": n[bs].acceptance_rate,
                "ngram_mean_acceptance_length": n[bs].mean_acceptance_length,
                "none_roofline": roofline_fraction(b[bs], model, roofline),
                "ngram_roofline": roofline_fraction(n[bs], model, roofline),
            }
            for bs in batches
        ],
        "crossover_batch": crossover,
        "why_adaptive_does_not_recover": explain_adaptive(b, k0b, n, proposer),
        "ngram_proposer_alone": proposer,
        "transformers_peer": peers,
        "targets": TARGETS,
        "targets_met": {
            "speedup_at_batch_1": speedup.get(1, 0) >= TARGETS["speedup_at_batch_1_min"],
            "speedup_at_batch_64": speedup.get(64, 9) <= TARGETS["speedup_at_batch_64_max"],
            "vllm_ahead_of_transformers_at_batch_1": b[1].output_tok_s > peers["batch_1"]["output_tok_s"],
            "vllm_ahead_of_transformers_at_batch_64": 64 in b
            and b[64].output_tok_s > peers["batch_64"]["output_tok_s"],
            "wall_time": wall <= TARGETS["wall_time_max_s"],
        },
        "phases_s": phases,
        "wall_time_s": wall,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if not args.quick:
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
        tmp_records.replace(RECORDS)
        print(f"wrote {RESULT} and {RECORDS}", file=sys.stderr)
    print(json.dumps({k: result[k] for k in ("crossover_batch", "targets_met", "wall_time_s")}, indent=2))
    for row in result["table"]:
        print(
            {
                k: row[k]
                for k in (
                    "batch_size",
                    "none_tok_s",
                    "ngram_tok_s",
                    "speedup",
                    "adaptive_tok_s",
                    "routed_tok_s",
                    "k0_machinery_tok_s",
                )
            }
        )
    return 0


def roofline_fraction(record, model: ModelSpec, hw: hardware.Hardware) -> dict:
    """How close a point came to this machine's memory and compute ceilings.

    Tokens the model actually computed = output tokens + rejected drafts (verified but thrown away).
    Weights are read once per step; a step yields batch_size x (tokens per step) output tokens.
    """
    rejected = (record.num_draft_tokens or 0) - (record.num_accepted_tokens or 0)
    computed_tok_s = (record.output_tokens + rejected) / record.elapsed_s
    per_step = record.mean_acceptance_length or 1.0
    steps_s = record.output_tok_s / (record.batch_size * per_step)
    dtype = record.dtype if record.dtype in ("float32", "bfloat16", "float16") else "float32"
    bytes_s = steps_s * model.weight_bytes(dtype)
    flops_s = computed_tok_s * model.flops_per_token()
    return {
        "bandwidth_fraction": round(bytes_s / (hw.bandwidth_gb_s * 1e9), 3),
        "compute_fraction": round(flops_s / (hw.peak_tflops * 1e12), 3),
    }


def explain_adaptive(base, k0, ngram, proposer) -> dict:
    """Split the adaptive engine's loss at k=0 into the n-gram search and the rest of the machinery."""
    out = {}
    for bs, rec in k0.items():
        # k=0: every step yields one token per sequence; a round of bs requests takes OUTPUT_LEN steps
        t_base = base[bs].elapsed_s / (OUTPUT_LEN * base[bs].num_requests / bs)
        t_k0 = rec.elapsed_s / (OUTPUT_LEN * rec.num_requests / bs)
        search_ms = proposer.get(str(bs), {}).get("k0_ms_per_step")
        extra_ms = (t_k0 - t_base) * 1000
        out[str(bs)] = {
            "plain_ms_per_step": round(t_base * 1000, 2),
            "k0_machinery_ms_per_step": round(t_k0 * 1000, 2),
            "extra_ms_per_step": round(extra_ms, 2),
            "ngram_search_ms_per_step": search_ms,
            "other_machinery_ms_per_step": round(extra_ms - (search_ms or 0), 2),
            "k0_vs_plain_tok_s": round(rec.output_tok_s / base[bs].output_tok_s, 3),
            "ngram_k4_vs_plain_tok_s": round(ngram[bs].output_tok_s / base[bs].output_tok_s, 3)
            if bs in ngram
            else None,
        }
    return out


def time_ngram_proposer(batches) -> dict:
    """vLLM's own n-gram search (the numba kernel the engine calls each step), timed alone on
    token histories of the workload's length, with the engine's thread count (1 numba thread)."""
    # here, not at the top: the transformers peer (--transformers-peer) runs this file without vLLM or numba
    from numba import set_num_threads
    from vllm.v1.spec_decode.ngram_proposer import batch_propose_numba

    set_num_threads(1)
    spec = EngineConfig(spec_method="ngram", num_speculative_tokens=K)
    max_len = 1024
    rng = np.random.default_rng(0)
    prompt_len, out = 160, OUTPUT_LEN
    result = {}
    for bs in batches:
        tokens = np.zeros((bs, max_len), dtype=np.int32)
        for i in range(bs):  # a prompt, then an answer that copies it (the copy workload's shape)
            prompt = rng.integers(0, 49152, prompt_len)
            tokens[i, :prompt_len] = prompt
            tokens[i, prompt_len : prompt_len + out] = prompt[:out]
        num_tokens = np.full(bs, prompt_len + out // 2, dtype=np.int32)
        draft = np.zeros((bs, K), dtype=np.int32)
        ndraft = np.zeros(bs, dtype=np.int32)
        reqs = list(range(bs))
        timings = {}
        for k in (0, K):
            batch_propose_numba(
                reqs, num_tokens, tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, max_len, k, draft, ndraft
            )  # compile
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 0.3:
                batch_propose_numba(
                    reqs, num_tokens, tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, max_len, k, draft, ndraft
                )
                n += 1
            timings[f"k{k}_ms_per_step"] = round((time.perf_counter() - t0) / n * 1000, 4)
        result[str(bs)] = timings
    return result


def transformers_peer_subprocess() -> dict:
    """The peer runs in a fresh Python: nothing vLLM or numba set up in this process touches torch there."""
    out = subprocess.run([sys.executable, __file__, "--transformers-peer"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def transformers_peer(dtype: str) -> dict:
    """Hugging Face generate on the same folder: greedy, exactly OUTPUT_LEN new tokens, in float32
    (transformers' default dtype, what a user running it on a CPU gets)."""
    run = transformers_runner(dtype)
    run(1, 1)  # warm-up
    return {
        "dtype": dtype,
        "batch_1": run(1, 4),
        "batch_1_prompt_lookup": run(1, 4, prompt_lookup_num_tokens=K),
        "batch_64": run(64, 1),
    }


def transformers_runner(dtype: str, workload: str = WORKLOAD, output_len: int = OUTPUT_LEN):
    """run(batch, rounds, **generate_kwargs) -> tok/s: Hugging Face generate on the bundled model in `dtype`,
    greedy, exactly output_len new tokens per request, on the workload's prompts in the chat template."""
    import torch  # in the peer's own process only (transformers_peer_subprocess)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(hardware.cpu_cores())
    folder = EngineConfig().resolved_model()
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype, torch.float32)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype).eval()
    prompts = load(workload).prompts

    def chat(p):
        return tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)

    def run(batch, rounds, **kw):
        elapsed, tokens = 0.0, 0
        for r in range(rounds):
            texts = [chat(prompts[(r * batch + i) % len(prompts)]) for i in range(batch)]
            enc = tok(texts, return_tensors="pt", padding=True)
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    max_new_tokens=output_len,
                    min_new_tokens=output_len,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id or tok.eos_token_id,
                    **kw,
                )
            elapsed += time.perf_counter() - t0
            tokens += (out.shape[1] - enc["input_ids"].shape[1]) * batch
        return {"output_tok_s": round(tokens / elapsed, 2), "requests": batch * rounds, "elapsed_s": round(elapsed, 2)}

    return run


if __name__ == "__main__":
    sys.exit(main())
