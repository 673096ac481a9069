"""The spec-decode lab's measured parts: what the build fills into spec_decode_lab.py's {{ ... }} places.

The lab's text quotes what was measured on the course's machine, never numbers typed in by hand:
- the flip benchmark (bench/flip.py -> bench/results/flip-cpu.json), in the introduction and section 2;
- the verify step against tokens per step (bench/ridge_cpu.py -> bench/results/ridge-cpu.json), in section 1;
- the class's load (bench/class.py --students 20 -> the "load" section of bench/results/class.json), in section 4;
- rep 2's solution, from the instructor's own measurement of speculation on and off at batch 64 (REP2_RECORDS,
  measured as a learner measures, with the machine's fingerprint: the grader refuses the recordings the lab ships);
- the acceptance those recorded runs show, in vLLM's terms and the lesson's (servelab.acceptance).
"""

from __future__ import annotations

import json
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[3]
FLIP_RESULT = REPO_DIR / "bench" / "results" / "flip-cpu.json"
CLASS_RESULT = REPO_DIR / "bench" / "results" / "class.json"
RIDGE_RESULT = REPO_DIR / "bench" / "results" / "ridge-cpu.json"
RIDGE_FLOAT32 = REPO_DIR / "bench" / "results" / "ridge-cpu-float32.json"  # the same benchmark in float32
WHY_BATCHES = ("1", "8", "64")
REP2_BATCH = 64  # the solution's comparison: speculation on and off at a high batch, where throughput is the SLO
# The solution's records: measured as a learner measures them, not the course's recordings (which rep 2 refuses).
REP2_RECORDS = Path(__file__).resolve().parent / "rep2-records.jsonl"
REP2_MEASURE = (
    f"servelab sweep --spec ngram --k 4 --batch {REP2_BATCH} --workload copy --output-len 64 --results {REP2_RECORDS}"
)


def context() -> dict:
    """Every value the lab's text names, by the name it uses."""
    return {
        **_flip(),
        "class_load": _class_load(),
        "rep2_solution": _rep2_solution(),
        "recorded_acceptance": _recorded_acceptance(),
        "ridge": _ridge(),
        "sim": _simulated(),
    }


def _simulated() -> dict:
    """The simulated H200's numbers the lab's text names, each with its assumptions (servelab.simulate)."""
    from servelab import hardware, modelspec, simulate

    k, a = 4, simulate.ACCEPTANCE_RATE
    sim = simulate.default_simulator(modelspec.preset("Llama-3.1-8B"), hardware.get("H200"))
    rows = {r["context_len"]: r for r in simulate.crossover_by_context(sim, (256, 1024, 2048), k, "ngram", a, 64)}

    def cross(context: int) -> str:
        row = rows[context]
        if row["crossover_batch"] is not None:
            return f"near {row['crossover_batch']:.0f} at {context:,} tokens"
        limited = row["searched_up_to"] < simulate.SEARCH_BATCHES[-1]
        return f"none at {context:,} tokens up to batch {row['searched_up_to']:,.0f}" + (
            ", the largest that fits" if limited else ""
        )

    return {
        "assumed": f"Llama-3.1-8B in bf16, n-gram drafts, k = {k}, a = {a:g}",
        "speedup_64_short": f"{rows[256]['speedup_at_batch']:.1f}x",
        "speedup_64_1024": f"{rows[1024]['speedup_at_batch']:.1f}x",
        "crossovers": "; ".join(cross(c) for c in (256, 1024, 2048)),
        "short": f"{simulate.CONTEXT_LEN:,}",
        "ridge": f"{hardware.get('H200').ridge_tokens_per_step():.0f}",
        "efficiency": (
            f"{simulate.BANDWIDTH_EFFICIENCY * 100:.0f} % of its bandwidth and "
            f"{simulate.COMPUTE_EFFICIENCY * 100:.0f} % of its compute"
        ),
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

    # flip.py's shares are against the roofline its run measured (servelab.hardware.this_machine; the recording
    # predates probe_cpu and holds a float32 GEMM peak and a sum's read rate); the engine runs bfloat16, so where
    # the verify-step benchmark recorded servelab.hardware.probe_cpu in bfloat16 on the same machine, both shares
    # are rescaled to that one probe, whose ratio is the lab's CPU ridge
    flip_peak, flip_bw = flip["roofline"]["peak_tflops"], flip["roofline"]["bandwidth_gb_s"]
    peak, bw = flip_peak, flip_bw
    probe_words = (
        f"{flip_bw:.1f} GB/s of reads and {flip_peak * 1000:.0f} GFLOP/s of "
        f"{flip['roofline'].get('dtype', 'float32')} GEMM, flip.py's own probe"
    )
    if RIDGE_RESULT.is_file():
        probe = json.loads(RIDGE_RESULT.read_text())["roofline_probe"]
        if probe.get("dtype") == "bfloat16" and "read_gb_s" in probe:
            peak, bw = probe["gemm_tflops"], probe["read_gb_s"]
            probe_words = (
                f"{bw:.1f} GB/s of reads and {peak * 1000:,.0f} GFLOP/s of bfloat16 GEMM, both from one roofline "
                f"probe, `{RIDGE_RESULT.relative_to(REPO_DIR).as_posix()}`"
            )
    scale = {"compute_fraction": flip_peak / peak, "bandwidth_fraction": flip_bw / bw}

    def share(r, key):
        value = r["none_roofline"][key] * scale[key]
        return f"{value:.1%}" if value < 0.1 else f"{value:.0%}"

    # the plain step's time and what of it the weight reads take, from the recording (flip.py's bandwidth share)
    plain = {b: why[b]["plain_ms_per_step"] for b in why}
    read_ms_flip = first["none_roofline"]["bandwidth_fraction"] * plain[str(first["batch_size"])]
    weights_mb = read_ms_flip * flip_bw  # ms x GB/s = MB
    lo, hi = min(plain, key=int), max(plain, key=int)

    return {
        "flip_machine": _machine(flip),
        # what the plain step reaches of this CPU's measured roofline, from the smallest batch to the largest
        "flip_roofline": {
            "batches": f"{first['batch_size']} to {last['batch_size']}",
            "bandwidth": f"{share(first, 'bandwidth_fraction')} to {share(last, 'bandwidth_fraction')}",
            "compute": f"{share(first, 'compute_fraction')} to {share(last, 'compute_fraction')}",
            "probe": probe_words,
            "weights_mb": f"{weights_mb:.0f}",
            "read_ms": f"{weights_mb / bw:.1f}",
            "overhead": f"{plain[lo]:.0f} ms at batch {lo}, {plain[hi]:.0f} ms at {hi}",
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
    verdict = _class_verdict(pays, tok_s)
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


def _class_verdict(pays: dict, tok_s: dict) -> str:
    """What the class runs show, hedged by the measured noise band: each case is one run."""
    from servelab import knobs

    band = knobs.noise_band()
    ratios = {case: tok_s[case]["on"] / tok_s[case]["off"] for case in ("alone", "together")}
    spread = " and ".join(f"{max(r, 1 / r):.2f}x" for r in ratios.values())
    if band is not None and all(band.inside(r) for r in ratios.values()):
        return (
            f"{_class_reading(pays)} But each case is one run, and both differences ({spread}) are inside the noise "
            f"band one knob setting moved by against itself on the course's machine ({band.factor:.2g}x, "
            f"`{knobs.noise.RESULT.as_posix()}`, the knob lab's section 2): one run each cannot tell them from noise. "
            "Repeat the runs before you lean on the class's flip."
        )
    if band is None:
        return (
            f"{_class_reading(pays)} Each case is one run ({spread}), and no noise band is recorded to read it against."
        )
    words = {"alone": "one student alone", "together": "the whole class"}
    inside = [words[case] for case, r in ratios.items() if band.inside(r)]
    return f"{_class_reading(pays)} Each case is one run ({spread}); " + (
        f"the difference for {inside[0]} is inside the {band.factor:.2g}x noise band one knob setting moved by "
        f"against itself (`{knobs.noise.RESULT.as_posix()}`), so one run cannot tell that one from noise."
        if inside
        else f"both differences are beyond the {band.factor:.2g}x noise band one knob setting moved by against "
        f"itself (`{knobs.noise.RESULT.as_posix()}`)."
    )


def _class_reading(pays: dict) -> str:
    """What the one run of each case shows, in words."""
    if pays["alone"] and not pays["together"]:
        return (
            "In these runs speculation paid for one student alone and cost every student once the class was on: "
            "the flip you found by moving the batch slider, with nobody touching it, as the class's load grew."
        )
    if pays["alone"] and pays["together"]:
        return (
            "In these runs speculation still paid with the whole class on: the class's batch stayed below the "
            "crossover. A bigger class, or longer answers, pushes it past."
        )
    if not pays["alone"] and not pays["together"]:
        return (
            "In these runs speculation did not pay even for one student alone: the batch a single student's loop "
            "puts on the server is already past this pair's crossover."
        )
    return "In these runs speculation lost for one student alone and paid with the class on: look at the batches above."


def _load_row(label: str, run: dict) -> str:
    view = run.get("per_student") or {m: {"median": v} for m, v in run["student"].items()}
    return (
        f"| {label} | {run['server']['num_requests_running_peak']} | "
        f"{view['ttft_ms_p99']['median'] / 1000:.1f} s | {view['output_tok_s']['median']:.1f} |"
    )


def _rep2_solution() -> str:
    from servelab.lab.common import clean
    from servelab.lab.rep2 import answer_source, comparison
    from servelab.results import ResultsStore

    records = ResultsStore(REP2_RECORDS).read() if REP2_RECORDS.is_file() else []

    def newest(method: str) -> dict | None:
        found = [
            r
            for r in records
            if r.get("method") == method and r.get("batch_size") == REP2_BATCH and r.get("workload") == "copy"
        ]
        return clean(found[-1]) if found else None

    base, spec = newest("none"), newest("ngram")
    if base is None or spec is None:
        raise SystemExit(
            f"{REP2_RECORDS} has no none/ngram pair at batch {REP2_BATCH}: the solution of rep 2 is built from the "
            f"instructor's own measurement. Measure it on a quiet machine: {REP2_MEASURE}"
        )
    off_wins = base["output_tok_s"] >= spec["output_tok_s"]
    return answer_source(
        comparison(
            "speculative_decoding",
            base,
            spec,
            "output_tok_s",
            better=0 if off_wins else 1,
            conclusion=(
                f"The SLO is fleet throughput at batch {REP2_BATCH}: with n-gram speculation (k=4) the engine made "
                f"{spec['output_tok_s']:.1f} tok/s against {base['output_tok_s']:.1f} without it, so "
                + (
                    "the configured choice (speculation on) is wrong at this batch; turn it off, or route large "
                    "batches to a plain engine."
                    if off_wins
                    else "the configured choice (speculation on) is right at this batch; keep it on."
                )
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


def _ridge_value(ridge: dict) -> tuple[float, str]:
    """The one ridge a recorded run quotes (bench/ridge_cpu.py's ridge_of), and where it came from, in words."""
    chosen = ridge.get("ridge") or {"tokens_per_step": ridge["knee"]["ridge_tokens_per_step"], "from": "knee"}
    if chosen["from"] == "knee":
        return chosen["tokens_per_step"], "read off the measured steps (the floor over the slope past the knee)"
    probe = ridge["roofline_probe"]
    return chosen["tokens_per_step"], (
        f"the probe's ratio, not a knee in these steps: {probe['gemm_tflops'] * 1000:.0f} GFLOP/s of "
        f"{probe['dtype']} GEMM peak over {probe['read_gb_s']:.1f} GB/s of reads, measured beside the run "
        f"({chosen['why']})"
    )


def _read_rate(ridge: dict) -> tuple[float, str]:
    """GB/s a step's weight reads run at: the read probe's, or half an old copy probe's (which counted read + write)."""
    probe = ridge["roofline_probe"]
    if "read_gb_s" in probe:
        return probe["read_gb_s"], "the read probe's rate"
    return probe["copy_gb_s"] / 2, "half the copy probe's read + write rate"


def _ms_per_token(points: list[dict], low: int, high: int) -> float:
    a = next(p for p in points if p["tokens_per_step"] == low)
    b = next(p for p in points if p["tokens_per_step"] == high)
    return (b["step_ms"] - a["step_ms"]) / (high - low)


def _float32_note() -> str:
    """What the same benchmark in float32 showed, where it was recorded: arithmetic added to the reads."""
    if not RIDGE_FLOAT32.is_file():
        return ""
    f32 = json.loads(RIDGE_FLOAT32.read_text())
    pts = sorted(f32["points"], key=lambda p: p["tokens_per_step"])
    knee = f32["knee"]
    below = [p["tokens_per_step"] for p in pts if p["tokens_per_step"] < knee["ridge_tokens_per_step"]]
    if len(below) < 2:
        return ""
    growth = _ms_per_token(pts, below[0], below[-1])
    return (
        f" The same run in float32 (`{RIDGE_FLOAT32.relative_to(REPO_DIR)}`, the dtype this benchmark used "
        f"before) grew {growth:.2f} ms per token from {below[0]} to {below[-1]} tokens and "
        f"{knee['ms_per_token_past_ridge']:.2f} ms past the knee its fit reports: in either dtype this CPU adds "
        "arithmetic to its reads at every size measured, so no stretch of its steps is free."
    )


def _ridge() -> dict:
    if not RIDGE_RESULT.is_file():
        raise SystemExit(f"{RIDGE_RESULT} is missing: run `python bench/ridge_cpu.py` first; the lab's text quotes it.")
    ridge = json.loads(RIDGE_RESULT.read_text())
    machine = ridge["machine"]
    dtype = ridge.get("dtype", "float32")
    k = ridge["points"][0]["num_speculative_tokens"]
    points = sorted(ridge["points"], key=lambda p: p["tokens_per_step"])
    rows = [f"| {p['batch_size']} | {p['tokens_per_step']} | {p['step_ms']:.0f} |" for p in points]
    low = points[0]["tokens_per_step"]
    ridge_t, ridge_from = _ridge_value(ridge)
    rate, rate_name = _read_rate(ridge)
    read_ms = ridge["weights_gb"] / rate * 1000
    floor = points[0]["step_ms"]
    # how the step grows below the ridge: the measured steps that carry fewer tokens than it
    below = [p for p in points if p["tokens_per_step"] <= ridge_t]
    parts = [
        f"The {low}-token step takes {floor:.0f} ms against {read_ms:.0f} ms to read its {ridge['weights_gb']:.2f} GB "
        f"of {dtype} weights once at {rate:.1f} GB/s ({rate_name}), {floor / read_ms:.2f}x the read time."
    ]
    if len(below) >= 2:
        last = below[-1]
        growth = _ms_per_token(points, low, last["tokens_per_step"])
        parts.append(
            f"Below the ridge it grows {growth:.2f} ms per token ({last['tokens_per_step']} tokens take "
            f"{last['step_ms'] / floor:.2f}x the {low}-token step for {last['tokens_per_step'] / low:.0f}x the "
            "tokens): not flat, as on the ideal roofline, but far from proportional to the tokens."
        )
    past = [p for p in points if p["tokens_per_step"] > ridge_t]
    if len(past) >= 2:
        jumps = [(q, r) for q, r in zip(past, past[1:]) if r["step_ms"] > 2.5 * q["step_ms"]]
        # the steps past the ridge up to the first shape off the fast path
        smooth = past[: past.index(jumps[0][1])] if jumps else past
        if len(smooth) >= 2:
            past_growth = _ms_per_token(points, smooth[0]["tokens_per_step"], smooth[-1]["tokens_per_step"])
            parts.append(
                f"Past it, from {smooth[0]['tokens_per_step']} to {smooth[-1]['tokens_per_step']} tokens, it grows "
                f"{past_growth:.2f} ms per token, unevenly (the CPU's matrix kernels run some shapes faster than "
                "others, and the runs of one shape scatter)"
                + (
                    ", near the rate below it: the steps show no knee at the ridge."
                    if len(below) >= 2 and 0.5 <= past_growth / growth <= 2
                    else "."
                )
            )
        for q, r in jumps:
            parts.append(
                f"The {r['tokens_per_step']}-token step takes {r['step_ms'] / q['step_ms']:.1f}x the "
                f"{q['tokens_per_step']}-token one: a shape off the fast path, not the roofline."
            )
    parts.append(
        f"This machine's ridge, the one the lab quotes, is {ridge_t:.0f} tokens per step, {ridge_from}. A verify "
        f"step with k = {k} reaches it near batch {ridge_t / (k + 1):.0f}."
    )
    reading = " ".join(parts) + _float32_note()
    return {
        "what": ridge["what"],
        "table": "\n".join(rows),
        "reading": reading,
        "machine": f"{machine['cpu']}, {machine['cores']} cores, torch {ridge['versions'].get('torch', '?')}",
        "load": f"{machine['loadavg_before'][0]:.1f} before, {machine['loadavg_after'][0]:.1f} after",
        "k": str(k),
        "dtype": dtype,
        "tokens": f"{ridge_t:.0f}",
        "what_ridge": (
            f"the ratio of its {dtype} GEMM peak to its read bandwidth that the roofline probe measured, "
            "not a knee in its steps"
            if (ridge.get("ridge") or {}).get("from") == "probe"
            else "the knee of its measured steps"
        ),
        "batch": f"{ridge_t / (k + 1):.0f}",
        "bf16_fast_path": "yes" if ridge.get("cpu_bf16_fast_path") else "no",
    }
