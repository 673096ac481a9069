"""Measure an engine config over batch sizes; every point becomes a Measurement in the results store.

A point is stored the moment it is measured, so a sweep that dies half-way keeps
what it measured. Each engine is warmed up with one small batch before the first
point, so the first point does not pay for lazy initialisation.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Iterable

from . import cpu_usage
from .cpu_usage import machine_fingerprint
from .engine import DRAFTED, BatchResult, Engine, EngineConfig
from .hardware import this_machine
from .measurement import MIN_REQUESTS, Measurement, latency_fields, speculation_fields, stamped, throughput_fields
from .results import ResultsStore
from .workload import PromptSet, load

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_OUTPUT_LEN = 64


def to_measurement(
    result: BatchResult,
    config: EngineConfig,
    info: dict,
    workload: str,
    output_len: int,
    note: str = "",
    batch_size: int | None = None,
) -> Measurement:
    """Turn one batch's raw timings and counters into a flat record with provenance."""
    out_tokens = sum(result.output_tokens)
    ttft_ms = [t * 1000 for t in result.ttft_s]
    tpot_ms = [t * 1000 for t in result.tpot_s if t is not None]
    drafts = result.spec_counters.get("num_drafts", 0)
    draft_tokens = result.spec_counters.get("num_draft_tokens", 0)
    accepted = result.spec_counters.get("num_accepted_tokens", 0)
    speculative = config.spec_method != "none"
    return stamped(
        method=config.method_label(),
        num_speculative_tokens=config.num_speculative_tokens,
        batch_size=batch_size or len(result.texts),
        workload=workload,
        output_len=output_len,
        num_requests=len(result.texts),
        prompt_tokens=sum(result.prompt_tokens),
        output_tokens=out_tokens,
        **throughput_fields(out_tokens, len(result.texts), result.elapsed_s),
        **latency_fields(ttft_ms, tpot_ms),
        **speculation_fields(speculative, drafts, draft_tokens, accepted),
        prefix_cache_hit_tokens=result.spec_counters.get("prefix_cache_hit_tokens"),
        backend="local",
        model=_model_name(info.get("model", config.resolved_model())),
        draft_model=_model_name(config.resolved_draft()) if config.spec_method in DRAFTED else "",
        dtype=info.get("dtype", config.resolved_dtype()),
        enforce_eager=config.enforce_eager,
        prompt_lookup_min=config.prompt_lookup_min if config.spec_method == "ngram" else None,
        prompt_lookup_max=config.prompt_lookup_max if config.spec_method == "ngram" else None,
        hardware=info.get("hardware", ""),
        cores=info.get("cores", 0),
        vllm_version=info.get("vllm_version", ""),
        torch_version=info.get("torch_version", ""),
        engine_config=config.to_dict(),
        roofline=info.get("roofline", {}),
        machine=machine_fingerprint(info.get("hardware", ""), info.get("cores", 0)),
        note=note,
    )


def _model_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def measure_batch(
    engine: Engine,
    workload: PromptSet | str,
    batch_size: int,
    output_len: int = DEFAULT_OUTPUT_LEN,
    note: str = "",
    min_requests: int = MIN_REQUESTS,
) -> tuple[Measurement, BatchResult]:
    """Run batch_size requests at a time through a started engine and describe it.

    Small batches run several rounds on successive prompts (at least min_requests
    requests in all), so one unusual prompt does not decide the number.
    """
    wl = load(workload) if isinstance(workload, str) else workload
    rounds = max(1, math.ceil(min_requests / batch_size))
    prompts = wl.batch(batch_size * rounds)
    check_point(engine.config, wl, batch_size, output_len, min_requests)
    group = getattr(engine, "pid", None)  # the engine runs in its own process group (Engine.start)
    before = cpu_usage.snapshot(group)
    results = [
        engine.generate(prompts[r * batch_size : (r + 1) * batch_size], max_tokens=output_len) for r in range(rounds)
    ]
    used = cpu_usage.usage(before, cpu_usage.snapshot(group), int(engine.info.get("cores") or 0) or 1)
    merged = merge(results)
    record = to_measurement(merged, engine.config, engine.info, wl.name, output_len, note, batch_size=batch_size)
    return dataclasses.replace(record, cpu_usage=used), merged


def check_point(
    config: EngineConfig,
    workload: PromptSet | str,
    batch_size: int,
    output_len: int = DEFAULT_OUTPUT_LEN,
    min_requests: int = MIN_REQUESTS,
) -> None:
    """Everything about a point that can be refused without starting an engine (EngineConfigError)."""
    wl = load(workload) if isinstance(workload, str) else workload
    prompts = wl.batch(batch_size * max(1, math.ceil(min_requests / batch_size)))
    config.check_batch(batch_size, _longest_prompt_tokens(prompts) + output_len)


def merge(results: list[BatchResult]) -> BatchResult:
    """Several rounds of one batch size as one result: times and counters add up."""
    if len(results) == 1:
        return results[0]
    counters: dict[str, int] = {}
    for r in results:
        for k, v in r.spec_counters.items():
            counters[k] = counters.get(k, 0) + v
    return BatchResult(
        texts=[t for r in results for t in r.texts],
        prompt_tokens=[t for r in results for t in r.prompt_tokens],
        output_tokens=[t for r in results for t in r.output_tokens],
        ttft_s=[t for r in results for t in r.ttft_s],
        tpot_s=[t for r in results for t in r.tpot_s],
        elapsed_s=sum(r.elapsed_s for r in results),
        spec_counters=counters,
    )


def _longest_prompt_tokens(prompts: list[str]) -> int:
    # A safe over-estimate without a tokenizer: English runs ~1.3 tokens a word, plus the chat template.
    return max(int(len(p.split()) * 1.6) + 32 for p in prompts)


def attach_roofline(engine: Engine) -> None:
    """CPU records carry this machine's measured roofline, so the simulator can judge them."""
    if engine.info.get("cores") and "roofline" not in engine.info:
        engine.info["roofline"] = this_machine(engine.info["cores"]).to_dict()


def warm_up(engine: Engine, batch_size: int = 2) -> None:
    """A short batch at the largest size to come, so lazy initialisation is not billed to a measured point.

    Its prompt is not one a measurement uses, and the engines measure with prefix caching off
    (EngineConfig.prefix_caching), so a point never reuses the prefill of one before it."""
    engine.generate(["Say hello."] * min(batch_size, engine.config.max_num_seqs), max_tokens=16)


def sweep(
    config: EngineConfig,
    batches: Iterable[int] = DEFAULT_BATCHES,
    workload: str = "copy",
    output_len: int = DEFAULT_OUTPUT_LEN,
    store: ResultsStore | None = None,
    engine: Engine | None = None,
    progress: bool = True,
    on_point: Callable[[Measurement], None] | None = None,
    note: str = "",
) -> list[Measurement]:
    """Measure config at each batch size; each record is stored as soon as it is measured."""
    batches = list(batches)
    store = store if store is not None else ResultsStore()
    own = engine is None
    engine = engine or Engine(config)
    config.check_files()
    config.check_kv_cache()
    for batch_size in batches:  # refuse a point the engine cannot run before a 40-second start
        check_point(config, workload, batch_size, output_len)
    records: list[Measurement] = []
    bar = _progress(len(batches), f"{config.method_label()} k={config.num_speculative_tokens}", progress)
    try:
        if not engine.is_alive():
            engine.start()
            warm_up(engine, max(batches))
        attach_roofline(engine)
        for batch_size in batches:
            record, _ = measure_batch(engine, workload, batch_size, output_len, note)
            store.append(record)
            records.append(record)
            if on_point:
                on_point(record)
            bar.set_postfix_str(f"batch {batch_size}: {record.output_tok_s:.1f} tok/s")
            bar.update(1)
    finally:
        bar.close()
        if own:
            engine.stop()
    return records


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm  # here, not at the top: tqdm.auto imports ipywidgets in a notebook

    return tqdm(total=total, desc=desc, disable=not enabled, leave=True)


# --- comparing two sweeps ----------------------------------------------------------
@dataclass(frozen=True)
class ComparisonRow:
    batch_size: int
    base_tok_s: float
    spec_tok_s: float
    speedup: float
    base_tpot_ms: float
    spec_tpot_ms: float
    acceptance_rate: float | None


def compare(base: Iterable[Measurement | dict], spec: Iterable[Measurement | dict]) -> list[ComparisonRow]:
    """Pair two sweeps by batch size (latest record wins) and compute the speedup at each batch."""
    b = {r["batch_size"]: r for r in map(_as_dict, base)}
    s = {r["batch_size"]: r for r in map(_as_dict, spec)}
    rows = []
    for batch_size in sorted(b.keys() & s.keys()):
        x, y = b[batch_size], s[batch_size]
        rows.append(
            ComparisonRow(
                batch_size,
                x["output_tok_s"],
                y["output_tok_s"],
                y["output_tok_s"] / x["output_tok_s"],
                x["tpot_ms_p50"],
                y["tpot_ms_p50"],
                y.get("acceptance_rate"),
            )
        )
    return rows


def crossover_batch(rows: list[ComparisonRow]) -> float | None:
    """The batch where speedup falls through 1.0, interpolated in log2(batch); None if it never does."""
    for a, b in zip(rows, rows[1:]):
        if a.speedup >= 1.0 > b.speedup:
            la, lb = math.log2(a.batch_size), math.log2(b.batch_size)
            t = (a.speedup - 1.0) / (a.speedup - b.speedup)
            return round(2 ** (la + t * (lb - la)), 2)
    if rows and rows[0].speedup < 1.0:
        return float(rows[0].batch_size)  # already losing at the smallest batch measured
    return None


def _as_dict(r) -> dict:
    return r if isinstance(r, dict) else r.to_dict()
