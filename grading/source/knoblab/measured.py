"""The knob lab's measured parts: what the build fills into knob_lab.py's {{ ... }} places.

The text quotes bench/results/knobs-cpu.json (bench/knobs.py): numbers measured on the
course's machine, never typed in by hand. A table's rows, and a sentence whose claim depends
on what was measured (faster or slower, preempted or not), are made here; the prose around
them is in knob_lab.py. Rep 2's solution is built from the instructor's own measurement of a knob that is not
speculation (REP2_RECORDS, measured as a learner measures, with the machine's fingerprint: the grader refuses the
recordings the lab ships, data/measurements/knobs-cpu.jsonl).
"""

from __future__ import annotations

import json
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[3]
RESULT = REPO_DIR / "bench" / "results" / "knobs-cpu.json"
FLIP_RESULT = REPO_DIR / "bench" / "results" / "flip-cpu.json"  # the spec-decode lab's measured crossover
REP2_KNOB = "batching"
REP2_RECORDS = Path(__file__).resolve().parent / "rep2-records.jsonl"
REP2_MEASURE = f"python bench/knobs.py --knobs {REP2_KNOB} --no-first-point --out /dev/null --records {REP2_RECORDS}"


def _band():
    """The measured noise band (bench/noise_band.py, bench/results/noise_band.json): its one home."""
    from servelab import knobs

    band = knobs.noise_band()
    if band is None:
        raise SystemExit(
            f"{knobs.noise.result_path()} is missing: run `python bench/noise_band.py` first; the lab's text quotes it."
        )
    return band


def context() -> dict:
    """Every value the lab's text names, by the name it uses."""
    if not RESULT.is_file():
        raise SystemExit(f"{RESULT} is missing: run `python bench/knobs.py` first; the lab's text quotes it.")
    r = json.loads(RESULT.read_text())
    k = r["knobs"]
    return {
        "intro": _intro(r),
        "knobs_intro": _knobs_intro(r),
        "noise": _noise(r),
        "batching": _batching(k["batching"]),
        "prefix": _prefix(k["prefix_caching"]),
        "precision": _precision(k["precision"]),
        "speculation": _speculation(k["speculation"]),
        "kv": _kv(k["kv_cache"]),
        "parallelism": _parallelism(k["parallelism"]),
        "rep2": _rep2(),
    }


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "not recorded"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def _intro(r: dict) -> dict:
    m = r["machine"]
    fp = r.get("first_point") or {}
    first = (
        f"Recorded on the course's machine ({m['cpu']}, {m['cores']} cores): a click the moment the lab opens "
        f"shows the first setting's point after "
        f"{fp['cold_click_s']:.0f} s (its server has to start first); a click after a minute of reading, "
        f"after {fp['warm_click_s']:.0f} s, most of it the load itself ({fp['load']})."
        if "warm_click_s" in fp
        else ""
    )
    starts = list((r.get("server") or {}).get("start_s", {}).values())
    start = f"{min(starts):.0f}-{max(starts):.0f} s each on this course's machine" if starts else "30-60 s each"
    return {
        "machine": f"{m['cpu']}, {m['cores']} cores, vLLM {r['versions']['vllm']}",
        "first_point": first,
        "start": start,
    }


def _knobs_intro(r: dict) -> dict:
    m = r["machine"]
    return {
        "cores": m.get("cores", 2),
        "load_before": f"{m['loadavg_before'][0]:.1f}",
        "load_after": f"{m['loadavg_after'][0]:.1f}",
        "kept": _kept(r),
    }


def _noise(r: dict) -> dict:
    band = _band()
    knob_load = max(r["machine"]["loadavg_before"][0], r["machine"]["loadavg_after"][0])
    low, high = band.run_loadavg or (min(band.loadavg), max(band.loadavg))
    busier = (
        f" The machine was far busier during these runs (load average {low:.1f} to {high:.1f} on "
        f"{r['machine'].get('cores', 2)} cores) than during the knob runs (up to {knob_load:.1f}): this band "
        "measures the shared machine's contention as much as the setting, so it is wider than a quiet machine's "
        "would be, and a difference inside it is not shown to be noise either; only measuring again, quieter, says which."
        if low > knob_load
        else ""
    )
    return {
        "factor": f"{band.factor:.2g}",
        "measured": (
            f"The same setting, run again and again, is the yardstick: {band.provenance()}. Between the fastest "
            f"and the slowest of those runs the widest metric, {_METRIC_WORDS.get(band.metric, band.metric)}, "
            f"moved by {band.factor:.2g}x; every other metric the tables compare moved less.{busier}"
        ),
    }


_METRIC_WORDS = {
    "ttft_ms_p50": "median TTFT",
    "ttft_ms_p99": "p99 TTFT",
    "tpot_ms_p50": "median TPOT",
    "output_tok_s": "output tok/s",
}


def _kept(r: dict) -> str:
    kept = r.get("kept_from_earlier_run") or {}
    if not kept.get("knobs"):
        return ""

    def when(name: str) -> str:
        run = r["knobs"][name].get("measured_in") or {}
        after = (run.get("loadavg_after") or (kept.get("machine") or {}).get("loadavg_after") or [0])[0]
        return f"{name.replace('_', ' ')} (load average {after:.1f} when its run ended)"

    return (
        f"Some knobs come from earlier runs of the same benchmark on the course's machine, under the same load: "
        f"{', '.join(when(n) for n in kept['knobs'])}."
    )


def _batching(k: dict) -> dict:
    big, small = k["settings"]["max_num_seqs=256"], k["settings"]["max_num_seqs=4"]
    budget = k["settings"].get("max_num_batched_tokens=256", {})
    measured_budget = "ttft_ms_p50" in budget
    rows = [
        ("TTFT p50 / p99, ms", lambda x: f"{_f(x['ttft_ms_p50'])} / {_f(x['ttft_ms_p99'])}"),
        ("TPOT p50, ms", lambda x: _f(x["tpot_ms_p50"])),
        ("output tok/s", lambda x: _f(x["output_tok_s"])),
        (
            "requests running / waiting (peak)",
            lambda x: f"{x['num_requests_running_max']} / {x['num_requests_waiting_max']}",
        ),
        ("queue time (mean), ms", lambda x: _f(x.get("queue_time_ms_mean"))),
    ]
    table = "\n".join(
        f"| {label} | {row(big)} | {row(small)} |" + (f" {row(budget)} |" if measured_budget else "")
        for label, row in rows
    )
    swept = k.get("harness", "").startswith("vllm.benchmarks.sweep")
    return {
        "load": k["load"],
        "slo": f"{k['slo_value']:g}",
        "swept": (
            "The settings were measured with vLLM's serve-parameter sweep (`vllm bench sweep serve`), which "
            "starts a server per setting and loads each the same way."
            if swept
            else ""
        ),
        "head": " max_num_batched_tokens=256 |" if measured_budget else "",
        "rule": "---|" if measured_budget else "",
        "table": table,
        "budget_seen": _budget_seen(big, budget),
    }


def _budget_seen(big: dict, budget: dict) -> str:
    if "ttft_ms_p50" not in budget:
        return ""
    waited = budget.get("num_requests_waiting_max") or 0
    return (
        "max-num-batched-tokens is the other batching cap: the tokens one step may process, prompts and "
        "decodes together. At 256, the 20 users' prefills no longer fit in one step: they are spread over "
        "several steps (chunked prefill), "
        + (f"up to {waited} requests waited for room in a step, " if waited else "")
        + "and the running requests' decodes share each step with them: TTFT p99 went "
        f"from {_f(big['ttft_ms_p99'])} to {_f(budget['ttft_ms_p99'])} ms, TPOT p50 from "
        f"{_f(big['tpot_ms_p50'])} to {_f(budget['tpot_ms_p50'])} ms. A small budget keeps each step short; "
        + _budget_verdict(big, budget)
        + "vLLM refuses a budget below max_num_seqs."
    )


def _budget_verdict(big: dict, budget: dict) -> str:
    """What the token budget did, said no more strongly than the numbers allow (settings ran minutes apart)."""
    ttft, tpot = budget["ttft_ms_p99"] / big["ttft_ms_p99"], budget["tpot_ms_p50"] / big["tpot_ms_p50"]
    band = _band()
    if band.inside(ttft) and band.inside(tpot):
        return (
            f"here both moved by less than the noise band ({ttft:.2f}x and {tpot:.2f}x, against one setting's "
            f"{band.factor:.2g}x between its own runs, section 2): for 20 short chat prompts a budget of 256 "
            "tokens is barely a limit. "
        )
    if ttft > 1 and tpot > 1:
        return "here it cost both the first token and the ones after it. "
    return "what it buys and costs shows in the two rows. "


def _prefix(k: dict) -> dict:
    off, on = k["settings"]["prefix caching off"], k["settings"]["prefix caching on"]

    def cached(s: dict) -> str:
        q = s.get("prefix_cache_queries_tokens") or 0
        if not q:
            return "none (no lookups: the cache is off)"
        return f"{s['prefix_cache_hit_tokens']:,} of {q:,} ({100 * s['prefix_cache_hit_tokens'] / q:.0f} %)"

    return {
        "load": k["load"],
        "workload": k["workload"],
        "table": "\n".join(
            [
                f"| TTFT p50 / p99, ms | {_f(off['ttft_ms_p50'])} / {_f(off['ttft_ms_p99'])} | "
                f"{_f(on['ttft_ms_p50'])} / {_f(on['ttft_ms_p99'])} |",
                f"| prompt tokens served from the cache | {cached(off)} | {cached(on)} |",
                f"| output tok/s | {_f(off['output_tok_s'])} | {_f(on['output_tok_s'])} |",
            ]
        ),
        "throughput": _prefix_throughput(k, off, on),
    }


def _prefix_throughput(k: dict, off: dict, on: dict) -> str:
    """Output tok/s under an arrival rate: what the arrivals send, while the server keeps up either way."""
    from servelab import knobs

    load = knobs.KNOBS["prefix_caching"].load
    sent = load.request_rate * load.output_len
    ratio = on["output_tok_s"] / off["output_tok_s"]
    moved = (
        f"within the noise band ({ratio:.2f}x)" if _band().inside(ratio) else f"{ratio:.2f}x, outside the noise band"
    )
    return (
        f"Output tok/s is another matter: under Poisson arrivals at {load.request_rate:g} req/s with "
        f"{load.output_len} tokens each, the arrivals send about {sent:.0f} tok/s, and a server that keeps up "
        f"serves what arrives: {_f(off['output_tok_s'])} against {_f(on['output_tok_s'])} tok/s, {moved}. "
        + _prefix_verdict(off, on)
    )


def _prefix_verdict(off: dict, on: dict) -> str:
    ttft = on["ttft_ms_p50"] / off["ttft_ms_p50"]
    if _band().inside(ttft):
        return (
            f"Median TTFT moved {ttft:.2f}x, within the noise band too: this run shows no gain from the cache on "
            "either row."
        )
    said = "fell to" if ttft < 1 else "rose to"
    return (
        f"Median TTFT {said} {ttft:.2f}x, beyond the noise band: a throughput benchmark at this rate would miss "
        "what the cache does to the latency."
    )


def _precision(k: dict) -> dict:
    bf, fp = k["settings"]["bfloat16"], k["settings"]["float32"]
    q = k["settings"].get("W4A16 weights", {})
    acc = k.get("accuracy", {})
    a_bf, a_fp, a_q = acc.get("bfloat16", {}), acc.get("float32", {}), acc.get("W4A16 weights", {})
    measured = "output_tok_s" in q

    def right(a: dict) -> str:
        return f"{a.get('right', 0)} of {a.get('questions', 0)} ({100 * a.get('answer_match_rate', 0):.1f} %)"

    def extra(value: str) -> str:
        return f" {value} |" if measured else ""

    return {
        "load": k["load"],
        "questions": a_bf.get("questions", 0),
        "head": " W4A16 (4-bit weights) |" if measured else "",
        "rule": "---|" if measured else "",
        "table": "\n".join(
            [
                f"| output tok/s | {_f(bf['output_tok_s'])} | {_f(fp['output_tok_s'])} |"
                + extra(_f(q.get("output_tok_s"))),
                f"| TPOT p50, ms | {_f(bf['tpot_ms_p50'])} | {_f(fp['tpot_ms_p50'])} |"
                + extra(_f(q.get("tpot_ms_p50"))),
                f"| TTFT p50, ms | {_f(bf['ttft_ms_p50'])} | {_f(fp['ttft_ms_p50'])} |"
                + extra(_f(q.get("ttft_ms_p50"))),
                f"| right answers | {right(a_bf)} | {right(a_fp)} |" + extra(right(a_q)),
            ]
        ),
        "made": QUANTIZED_MADE,
        "float32_seen": _float32_seen(bf, fp),
        "quantized_seen": _quantized_seen(bf, q, a_bf, a_q),
    }


QUANTIZED_MADE = (
    "W4A16 is the same model with 4-bit integer weights in groups of 64 (activations stay bfloat16), "
    "made by llm-compressor (`make quantized-model`, `bench/quantize.py`) and run by vLLM's CPU kernel "
    "for such weights (CPUWNA16)."
)


def _float32_seen(bf: dict, fp: dict) -> str:
    ratio = fp["output_tok_s"] / bf["output_tok_s"]
    said = f"Here float32 served {_f(fp['output_tok_s'])} against bfloat16's {_f(bf['output_tok_s'])} output tok/s ({ratio:.2f}x)"
    if _band().inside(ratio):
        return said + ", within the noise band: one run cannot tell it from one setting's own spread, either way."
    return (
        said
        + (", outside the noise band: slower in the wider type" if ratio < 1 else ", outside the noise band: faster")
        + "; one table cannot say how much of it is the reads and how much the arithmetic's fast path."
    )


def _quantized_seen(bf: dict, q: dict, a_bf: dict, a_q: dict) -> str:
    if "output_tok_s" not in q:
        return f"W4A16 was not measured here: {q.get('error', 'no record')}"
    band = _band()
    ratio = q["output_tok_s"] / bf["output_tok_s"]
    change = f"{ratio - 1:+.0%}"
    if band.inside(ratio):
        speed = (
            f"That {change} is inside the noise band (one setting's runs moved by up to {band.factor:.2g}x, "
            "section 2): one run does not show that 4-bit weights changed the speed, either way, on a model "
            "whose weight reads are a small part of each step here. Measure both again, several times, before "
            "crediting the bytes. "
        )
    elif ratio > 1:
        speed = f"A {change} change, outside this section's noise band: measured faster with 4-bit weights. "
    else:
        speed = (
            f"A {change} change, outside this section's noise band: slower with 4-bit weights, whose groups "
            "cost compute to unpack. "
        )
    return (
        f"Against bfloat16, W4A16 ran at {_f(q['output_tok_s'])} against {_f(bf['output_tok_s'])} output "
        f"tok/s and answered {a_q.get('right', 0)} of {a_q.get('questions', 0)} against {a_bf.get('right', 0)}. "
        + speed
        + "Quantization is a trade measured on the task, both ways."
    )


def _speculation(k: dict) -> dict:
    off, on = k["settings"]["no speculation"], k["settings"]["n-gram k=4"]
    return {
        "load": k["load"],
        "batch": _spec_batch(off, on),
        "seen": _spec_seen(off, on),
        "table": "\n".join(
            [
                f"| TPOT p50 / p99, ms | {_f(off['tpot_ms_p50'])} / {_f(off['tpot_ms_p99'])} | "
                f"{_f(on['tpot_ms_p50'])} / {_f(on['tpot_ms_p99'])} |",
                f"| TTFT p50 / p99, ms | {_f(off['ttft_ms_p50'])} / {_f(off['ttft_ms_p99'])} | "
                f"{_f(on['ttft_ms_p50'])} / {_f(on['ttft_ms_p99'])} |",
                f"| end-to-end p99, ms | {_f(off.get('e2el_ms_p99'))} | {_f(on.get('e2el_ms_p99'))} |",
                f"| draft acceptance | - | {_f(on.get('acceptance_rate'))} |",
                f"| output tok/s | {_f(off['output_tok_s'])} | {_f(on['output_tok_s'])} |",
                f"| requests running (peak) | {off.get('num_requests_running_max', '-')} | "
                f"{on.get('num_requests_running_max', '-')} |",
            ]
        ),
    }


def _spec_batch(off: dict, on: dict) -> str:
    """The running batch the runs reached, beside the spec-decode lab's measured crossover on this machine."""
    peak = max(off.get("num_requests_running_max") or 0, on.get("num_requests_running_max") or 0)
    if not peak:
        return ""
    cross = json.loads(FLIP_RESULT.read_text()).get("crossover_batch") if FLIP_RESULT.is_file() else None
    if cross is None:
        return f"here at most {peak} requests ran at once."
    side = "past" if peak > cross else "below"
    return (
        f"here at most {peak} requests ran at once, {side} the batch of {cross:.1f} where the spec-decode lab "
        "measured n-gram speculation to stop paying on the course's machine (`bench/results/flip-cpu.json`), and the "
        "batch moved below and above it as requests came and went."
    )


def _spec_seen(off: dict, on: dict) -> str:
    """What the run shows, read from every latency row: a median alone hides what the tail did."""
    if not on.get("acceptance_rate"):
        return (
            "Here no draft token was accepted, so whatever TPOT difference there is comes from the run, "
            "not from speculation."
        )
    n = on.get("num_requests") or off.get("num_requests")
    band = _band()
    fell, rose, within = [], [], []
    for label, key in (
        ("median TPOT", "tpot_ms_p50"),
        ("p99 TPOT", "tpot_ms_p99"),
        ("median TTFT", "ttft_ms_p50"),
        ("p99 TTFT", "ttft_ms_p99"),
        ("p99 end-to-end latency", "e2el_ms_p99"),
    ):
        a, b = off.get(key), on.get(key)
        if not a or not b:
            continue
        said = f"{label} {_f(a)} to {_f(b)} ms ({b / a:.2f}x)"
        (within if band.inside(b / a) else fell if b < a else rose).append(said)
    parts = [f"Here {100 * on['acceptance_rate']:.0f} % of the drafted tokens were accepted."]
    if fell:
        parts.append("With speculation on, these fell by more than the noise band: " + ", ".join(fell) + ".")
    if rose:
        parts.append(
            (
                "These rose by more than it: "
                if fell
                else "With speculation on, these rose by more than the noise band: "
            )
            + ", ".join(rose)
            + "."
        )
    if within:
        parts.append(
            f"These moved by less than the noise band ({band.factor:.2g}x, section 2): one run cannot tell them from "
            "one setting's own spread on that busy machine, so they are not shown either way (they may be real: "
            "measure again, on a quieter machine): " + ", ".join(within) + "."
        )
    if n and n < 100:
        parts.append(
            f"With {n} requests each p99 is in effect the slowest request of its run (see above), so the tail rows "
            "are one request each: measure several hundred before reading them as a p99."
        )
    if fell and rose:
        parts.append(
            "Speculation moved some rows down and others up here: whether it pays depends on which of these the "
            "SLO names."
        )
    elif fell:
        parts.append("Every latency row that moved beyond the noise band fell.")
    elif rose:
        parts.append("No latency row fell by more than the noise band at this rate.")
    else:
        parts.append("No latency row moved beyond the noise band: one run at this rate shows no effect either way.")
    return " ".join(parts)


def _kv(k: dict) -> dict:
    big, small = k["settings"]["kv_cache=1GiB"], k["settings"]["kv_cache=16MiB"]
    return {
        "load": k["load"],
        "seen": _kv_seen(small),
        "table": "\n".join(
            [
                f"| TTFT p50 / p99, ms | {_f(big['ttft_ms_p50'])} / {_f(big['ttft_ms_p99'])} | "
                f"{_f(small['ttft_ms_p50'])} / {_f(small['ttft_ms_p99'])} |",
                f"| KV cache usage (peak) | {100 * big['kv_cache_usage_max']:.0f} % | "
                f"{100 * small['kv_cache_usage_max']:.0f} % |",
                f"| preemptions | {big['num_preemptions']} | {small['num_preemptions']} |",
                f"| requests running / waiting (peak) | {big['num_requests_running_max']} / "
                f"{big['num_requests_waiting_max']} | {small['num_requests_running_max']} / "
                f"{small['num_requests_waiting_max']} |",
                f"| output tok/s | {_f(big['output_tok_s'])} | {_f(small['output_tok_s'])} |",
            ]
        ),
    }


def _kv_seen(small: dict) -> str:
    if small.get("num_preemptions"):
        return (
            f"Here the small cache preempted {small['num_preemptions']} times and held at most "
            f"{small['num_requests_running_max']} requests running while {small['num_requests_waiting_max']} "
            "waited."
        )
    if small.get("num_requests_waiting_max"):
        return (
            f"Here nothing was preempted, but at most {small['num_requests_running_max']} requests ran while "
            f"{small['num_requests_waiting_max']} waited for cache blocks."
        )
    return (
        f"Here the small cache peaked at {100 * small.get('kv_cache_usage_max', 0):.0f} % and nothing was "
        "preempted or kept waiting: these prompts are short. Raise the output length in the lab to see the "
        "counters move."
    )


def _parallelism(k: dict) -> dict:
    from servelab import knobs
    from servelab.knobs import parallel
    from servelab.modelspec import preset
    from servelab.results import ResultsStore

    tp2 = k["settings"].get("tp=2", {})
    tp1 = k["settings"].get("tp=1", {})
    error = tp2.get("error", "")
    reason = error.split("before it answered: ", 1)[-1].split(" (full log")[0] if error else ""
    heads = preset("SmolLM2-135M").num_heads
    if not reason and parallel.refusal("SmolLM2-135M", 2):
        raise SystemExit(
            f"{RESULT}: tp=2 has no recorded refusal, yet SmolLM2-135M's {heads} heads do not divide by 2."
        )
    # the simulated rows: only models tensor-parallel-size 2 can split, on this machine's recorded roofline
    record = knobs.latest(ResultsStore(knobs.recorded_path()).read(), "parallelism", "tp=1")
    if record is None:
        raise SystemExit(f"{knobs.recorded_path()} has no parallelism tp=1 record: run `python bench/knobs.py` first.")
    rows = parallel.simulated_rows(record["roofline"])
    table = "\n".join(
        f"| {where} | " + " | ".join(f"{row['tp1_tok_s']:,.1f} / {row['tp2_tok_s']:,.1f}" for row in data) + " |"
        for where, data in rows.items()
    )
    measured = (
        f"Measured, tp=1: {_f(tp1.get('output_tok_s'))} output tok/s under {k['load']}."
        if "output_tok_s" in tp1
        else ""
    )
    refused = (
        f'vLLM refused tensor-parallel-size 2 for this model: "{reason}" SmolLM2-135M has {heads} attention '
        "heads, and tensor parallelism splits the heads evenly across the ranks; 3 would divide them, but "
        "this machine has 2 cores. So there is no tp=2 row for it here, measured or simulated."
        if reason
        else f"tp=2 measured: {_f(tp2.get('output_tok_s'))} output tok/s."
    )
    return {
        "load": k["load"],
        "heads": heads,
        "refused": refused,
        "measured": measured,
        "table": table,
        "seen": _parallelism_seen(rows),
    }


def _parallelism_seen(rows: dict) -> str:
    """What the simulated rows show, read from them: the gain of tp=2 on one memory bus and on two GPUs."""
    from servelab.knobs import parallel

    cpu, gpu = (rows.get(where, []) for where, *_ in parallel.CASES[:2])

    def span(data: list[dict]) -> tuple[float, float]:
        ratios = [row["tp2_tok_s"] / row["tp1_tok_s"] for row in data]
        return min(ratios), max(ratios)

    def between(lo: float, hi: float) -> str:
        return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}x to {hi:.2f}x"

    parts = []
    if cpu:
        lo, hi = span(cpu)
        gain = "nothing gained" if hi < 1.05 else f"up to {hi:.2f}x"
        parts.append(
            f"On the two cores of one CPU the shares come from the same memory bus and the same cores: "
            f"simulated, tp=2 serves {between(lo, hi)} tp=1's output tok/s, {gain}."
        )
    if gpu:
        lo, hi = span(gpu)
        parts.append(
            f"On two H100s, each reading its own memory, the weight reads that set a decode step are halved and "
            f"tp=2 serves {between(lo, hi)} tp=1's: a gain, and short of 2x, since the all-reduces take their "
            "share of every step."
        )
    return " ".join(parts)


def _grading_margin() -> str:
    """The grader's margin for "no difference" (grading/keys/knoblab.py), said beside the measured band."""
    import importlib.util

    path = REPO_DIR / "grading" / "keys" / "knoblab.py"
    spec = importlib.util.spec_from_file_location("servelab_keys_knoblab", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: Python cannot load it as a module.")
    keys = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(keys)
    margin, band = float(keys.NOISE_FACTOR), _band()
    wider = "wider than" if margin > band.factor else "the same as" if margin == band.factor else "narrower than"
    return (
        f"{margin:g}x (the grader's margin, a grading rule {wider} the {band.factor:.2g}x one setting moved by in "
        "section 2 on a busy machine; `servelab.knobs.noise.GRADING_MARGIN` says why)"
    )


def _rep2() -> dict:
    from servelab import knobs
    from servelab.lab.rep2 import answer_source, comparison
    from servelab.results import ResultsStore

    records = ResultsStore(REP2_RECORDS).read() if REP2_RECORDS.is_file() else []
    k = knobs.KNOBS[REP2_KNOB]
    a_name, b_name = k.setting_names[:2]  # the knob's first two settings: the ones the lab opens on
    a, b = knobs.latest(records, REP2_KNOB, a_name), knobs.latest(records, REP2_KNOB, b_name)
    if a is None or b is None:
        raise SystemExit(
            f"{REP2_RECORDS} has no {REP2_KNOB} records: the solution of rep 2 is built from the instructor's own "
            f"measurement. Measure it on a quiet machine: {REP2_MEASURE}"
        )
    metric = k.slo_metric
    va, vb = a[metric], b[metric]
    better = 0 if va <= vb else 1
    solution = answer_source(
        comparison(
            REP2_KNOB,
            a,
            b,
            metric,
            better=better,
            conclusion=(
                f"The SLO is p99 TTFT under {k.slo_value:g} ms at 20 concurrent users. With max_num_seqs=256 the p99 TTFT "
                f"was {va:.0f} ms against {vb:.0f} ms with max_num_seqs=4: a cap below the number of users queues "
                f"requests and their wait lands in TTFT, while a cap far above it changes nothing, since continuous "
                f"batching never runs more than the 20 requests in flight. Keep the cap at or above the peak "
                f"concurrency; 256 is not wrong, just not a reason in itself."
                + (
                    ""
                    if min(va, vb) <= k.slo_value
                    else f" Neither setting meets the {k.slo_value:g} ms SLO on this 2-core CPU: that takes faster hardware "
                    "or fewer users per server, not another cap."
                )
            ),
        )
    )
    return {
        "knob": REP2_KNOB,
        "noise": _grading_margin(),
        "slo": f"{k.slo_value:g}",
        "a": a_name,
        "b": b_name,
        "metric": metric,
        "solution": solution,
    }
