"""The spec-decode lab's measured parts: what the build fills into spec_decode_lab.py's {{ ... }} places.

The lab's text quotes what was measured on the course's machine, never numbers typed in by hand:
- the flip benchmark (bench/flip.py -> bench/results/flip-cpu.json), in the introduction and section 2;
- the verify step against tokens per step (bench/ridge_cpu.py -> bench/results/ridge-cpu.json), in section 1;
- the class's load (bench/class.py --students 20 -> the "load" section of bench/results/class.json), in section 4;
- rep 2's solution, from the recorded measurements (data/measurements/): speculation on and off at batch 64;
- the acceptance those recorded runs show, in vLLM's terms and the lesson's (servelab.acceptance).
"""

from __future__ import annotations

import json
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[3]
FLIP_RESULT = REPO_DIR / "bench" / "results" / "flip-cpu.json"
CLASS_RESULT = REPO_DIR / "bench" / "results" / "class.json"
RIDGE_RESULT = REPO_DIR / "bench" / "results" / "ridge-cpu.json"
WHY_BATCHES = ("1", "8", "64")
REP2_BATCH = 64  # the solution's comparison: speculation on and off at a high batch, where throughput is the SLO


def context() -> dict:
    """Every value the lab's text names, by the name it uses."""
    return {
        **_flip(),
        "class_load": _class_load(),
        "rep2_solution": _rep2_solution(),
        "recorded_acceptance": _recorded_acceptance(),
        "ridge": _ridge(),
    }


def _machine(result: dict) -> str:
    return f"{result['machine']['cpu']}, {result['machine']['cores']} cores, vLLM {result['versions']['vllm']}"


def _flip() -> dict:
    if not FLIP_RESULT.is_file():
        raise SystemExit(f"{FLIP_RESULT} is missing: run `python bench/flip.py` first; the lab's text quotes it.")
    flip = json.loads(FLIP_RESULT.read_text())
    row = {str(r["batch_size"]): r for r in flip["table"]}
    why = flip["why_adaptive_does_not_recover"]
    table = sorted(flip["table"], key=lambda r: r["batch_size"])
    first, last = table[0], table[-1]

    def share(r, key):
        return f"{r['none_roofline'][key]:.0%}"

    return {
        "flip_machine": _machine(flip),
        # what the plain step reaches of this CPU's measured roofline, from the smallest batch to the largest
        "flip_roofline": {
            "batches": f"{first['batch_size']} to {last['batch_size']}",
            "bandwidth": f"{share(first, 'bandwidth_fraction')} to {share(last, 'bandwidth_fraction')}",
            "compute": f"{share(first, 'compute_fraction')} to {share(last, 'compute_fraction')}",
            "ridge": f"{flip['roofline']['ridge_flop_per_byte']:.1f}",
            "crossover": f"{flip['crossover_batch']:.1f}",
        },
        "flip_tok_s": {
            key: " / ".join(f"{row[b][key]:.0f}" for b in WHY_BATCHES)
            for key in ("adaptive_tok_s", "none_tok_s", "ngram_tok_s")
        },
        "flip_ms": {
            key: " / ".join(f"{why[b][key]:.3g}" for b in WHY_BATCHES)
            for key in (
                "k0_machinery_ms_per_step",
                "plain_ms_per_step",
                "ngram_search_ms_per_step",
                "other_machinery_ms_per_step",
            )
        },
    }


def _class_load() -> dict:
    load = json.loads(CLASS_RESULT.read_text()).get("load") if CLASS_RESULT.is_file() else None
    if not load:
        raise SystemExit(
            f"{CLASS_RESULT} has no load section: run `python bench/class.py --students 20` first; "
            "the lab's text quotes it."
        )
    off, on = load["off"], load["on"]
    n = off["together"]["students"]
    tok_s = load["student_output_tok_s"]
    pays = load["speculation_pays"]
    if pays["alone"] and not pays["together"]:
        verdict = (
            "Speculation paid for one student alone and cost every student once the class was on: the flip "
            "you found by moving the batch slider happened with nobody touching it, as the class's load grew."
        )
    elif pays["alone"] and pays["together"]:
        verdict = (
            "Speculation still paid with the whole class on here: the class's batch stayed below the "
            "crossover. A bigger class, or longer answers, pushes it past."
        )
    elif not pays["alone"] and not pays["together"]:
        verdict = (
            "Speculation did not pay even for one student alone here: the batch a single student's loop "
            "puts on the server is already past this pair's crossover."
        )
    else:
        verdict = "Speculation lost for one student alone and paid with the class on: look at the batches above."
    rows = [
        _load_row("one student, no speculation", off["alone"]),
        _load_row(f"{n} students, no speculation", off["together"]),
        _load_row("one student, n-gram k = 4", on["alone"]),
        _load_row(f"{n} students, n-gram k = 4", on["together"]),
    ]
    return {
        "machine": _machine(load),
        "students": n,
        "batch_sizes": ", ".join(map(str, load["batch_sizes"])),
        "rows": "\n".join(rows),
        "verdict": verdict,
        "alone_on": f"{tok_s['alone']['on']:.1f}",
        "alone_off": f"{tok_s['alone']['off']:.1f}",
        "together_on": f"{tok_s['together']['on']:.1f}",
        "together_off": f"{tok_s['together']['off']:.1f}",
    }


def _load_row(label: str, run: dict) -> str:
    view = run.get("per_student") or {m: {"median": v} for m, v in run["student"].items()}
    return (
        f"| {label} | {run['server']['num_requests_running_peak']} | "
        f"{view['ttft_ms_p99']['median'] / 1000:.1f} s | {view['output_tok_s']['median']:.1f} |"
    )


def _rep2_solution() -> str:
    from servelab.lab.rep2 import answer_source, comparison
    from servelab.lab.speculation.points import PointBook, Settings

    book = PointBook(read_store=False)
    s = Settings(batch_size=REP2_BATCH, method="ngram", workload="copy", output_len=64)
    base, spec = book.points(s, "none").get(REP2_BATCH), book.points(s, "ngram").get(REP2_BATCH)
    if base is None or spec is None:
        raise SystemExit(
            f"The recorded measurements ({book.recorded}) have no none/ngram pair at batch "
            f"{REP2_BATCH}: the solution of rep 2 is built from them."
        )
    return answer_source(
        comparison(
            "speculative_decoding",
            base,
            spec,
            "output_tok_s",
            conclusion=(
                f"The SLO is fleet throughput at batch {REP2_BATCH}: with n-gram speculation (k=4) the engine made "
                f"{spec['output_tok_s']:.1f} tok/s against {base['output_tok_s']:.1f} without it, so the configured "
                "choice (speculation on) is wrong at this batch; turn it off, or route large batches to a plain "
                "engine."
            ),
        )
    )


def _recorded_acceptance() -> dict:
    from servelab import acceptance
    from servelab.lab.speculation.points import PointBook

    accs = acceptance.from_records(PointBook(read_store=False).all_records())
    if not accs:
        raise SystemExit(
            "The recorded measurements have no speculative run with acceptance counters: "
            "run `python bench/flip.py` first; the lab's acceptance section quotes them."
        )

    def span(values, fmt):
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}"

    return {
        "ratio": span([x.draft_acceptance_rate for x in accs], "{:.2f}"),
        "length": span([x.mean_acceptance_length for x in accs], "{:.1f}"),
        "a": span([x.acceptance_rate for x in accs], "{:.2f}"),
    }


def _ridge() -> dict:
    if not RIDGE_RESULT.is_file():
        raise SystemExit(f"{RIDGE_RESULT} is missing: run `python bench/ridge_cpu.py` first; the lab's text quotes it.")
    ridge = json.loads(RIDGE_RESULT.read_text())
    knee, machine = ridge["knee"], ridge["machine"]
    k = ridge["points"][0]["num_speculative_tokens"]
    rows = [f"| {p['batch_size']} | {p['tokens_per_step']} | {p['step_ms']:.0f} |" for p in ridge["points"]]
    points = ridge["points"]
    low, high = points[0]["tokens_per_step"], points[-1]["tokens_per_step"]
    readable = knee["ms_per_token_past_ridge"] > 0 and low <= knee["ridge_tokens_per_step"] <= high
    if readable:
        probe = ridge["roofline_probe"]
        read_ms = ridge["weights_gb"] / (probe["copy_gb_s"] / 2) * 1000
        floor, slope, ridge_t = knee["flat_ms"], knee["ms_per_token_past_ridge"], knee["ridge_tokens_per_step"]
        fitted = knee.get("fitted_through_tokens") or [low, high]
        floor_is_reads = abs(floor / read_ms - 1) <= 0.15
        reads = (
            f"about the time to read its {ridge['weights_gb']:.2f} GB of weights once at the probe's read rate "
            f"({read_ms:.0f} ms at {probe['copy_gb_s'] / 2:.1f} GB/s, half its copy rate): it reads the same "
            "weights whatever it carries"
            if floor_is_reads
            else f"against {read_ms:.0f} ms to read its {ridge['weights_gb']:.2f} GB of weights at the probe's read rate"
        )
        # a step below the ridge, to show what extra tokens cost there
        below = [p for p in points[1:] if p["tokens_per_step"] < ridge_t and p["step_ms"] >= points[0]["step_ms"]]
        cheap = ""
        if below:
            b = below[-1]
            cost, more = b["step_ms"] / points[0]["step_ms"], b["tokens_per_step"] / low
            if cost < more:
                cheap = (
                    f" Below it extra tokens are cheap ({b['tokens_per_step']} tokens cost {cost:.1f}x the {low}-token "
                    f"step, not {more:.0f}x); past it each token adds the same {slope:.1f} ms."
                )
        # whether reads and arithmetic overlap: where the fitted line meets zero tokens, with its uncertainty
        overlap = ""
        se = knee.get("intercept_se_ms")
        if se is not None:
            at, lo, hi = knee["intercept_ms"], knee["intercept_ms"] - 2 * se, knee["intercept_ms"] + 2 * se
            if lo <= floor <= hi and lo > 0:
                overlap = (
                    f" The fitted line meets zero tokens at {at:.0f} ms (give or take {2 * se:.0f}), within reach "
                    "of the floor: on this CPU the arithmetic mostly adds to the reads instead of hiding under "
                    "them, so the part below the ridge rises instead of lying level as on the ideal roofline."
                )
            elif lo <= 0 <= hi:
                overlap = (
                    f" The fitted line meets zero tokens near 0 ms ({at:.0f}, give or take {2 * se:.0f}), as on "
                    "the ideal roofline, where the arithmetic hides under the reads."
                )
        odd = [
            q
            for q, r in zip(points, points[1:])
            if q["step_ms"] > r["step_ms"] and q is not points[0] and q["tokens_per_step"] < fitted[0]
        ]
        aside = ""
        if odd:
            named = " and ".join(str(q["tokens_per_step"]) for q in odd)
            aside = (
                f" The {named}-token step{'s run' if len(odd) > 1 else ' runs'} slower than the next larger one, "
                "run after run: something of that shape on this CPU, not the roofline, and below the steps the "
                "slope is fitted through."
            )
        reading = (
            f"The {low}-token step takes {floor:.0f} ms, {reads}. Past the knee every token adds about "
            f"{slope:.1f} ms of arithmetic (fitted from {fitted[0]} to {fitted[-1]} tokens). The ridge, where a "
            f"step's arithmetic takes as long as its weight reads, is near {ridge_t:.0f} tokens per step (the "
            f"bandwidth and GEMM probe predicts {ridge['ridge_tokens_from_probe']:.0f}): a verify step with "
            f"k = {k} reaches it near batch {ridge_t / (k + 1):.0f}.{cheap}{overlap}{aside}"
        )
    else:
        first, last = points[0], points[-1]
        small = [p["step_ms"] for p in points[: len(points) // 2]]
        scatter = max(small) / min(small)
        reading = (
            f"This recorded run was taken while the machine was shared (the load average above, on "
            f"{machine['cores']} cores), and it is too noisy to read a knee from: the step took "
            f"{first['step_ms'] / 1000:.1f} s at {first['tokens_per_step']} tokens and "
            f"{last['step_ms'] / 1000:.1f} s at {last['tokens_per_step']} ({high / low:.0f}x the tokens for "
            f"{last['step_ms'] / first['step_ms']:.1f}x the time), but the steps below "
            f"{points[len(points) // 2]['tokens_per_step']} tokens scatter by {scatter:.1f}x. The "
            f"probe's ridge is {ridge['ridge_tokens_from_probe']:.0f} tokens per step. Rerun "
            "`python bench/ridge_cpu.py` on a quiet machine (load average below the core count) to see "
            "the flat part and the knee; the lab's text is rebuilt from what it records."
        )
    return {
        "what": ridge["what"],
        "table": "\n".join(rows),
        "reading": reading,
        "machine": f"{machine['cpu']}, {machine['cores']} cores, torch {ridge['versions'].get('torch', '?')}",
        "load": f"{machine['loadavg_before'][0]:.1f} before, {machine['loadavg_after'][0]:.1f} after",
        "k": str(k),
        "tokens": f"{knee['ridge_tokens_per_step']:.0f}" if readable else "(not readable from the recorded run)",
        "batch": f"{knee['ridge_tokens_per_step'] / (k + 1):.0f}" if readable else "(not readable)",
    }
