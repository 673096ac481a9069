"""The knob lab as an nbgrader source notebook.

`python -m servelab.lab.knob_notebook` writes solutions/knoblab/knob_lab.ipynb,
the instructor version; `python -m servelab.grading.release` then writes the
student version, labs/knob_lab.ipynb. Edit the lab here, never in the notebooks.

The text quotes bench/results/knobs-cpu.json (bench/knobs.py): numbers measured
on this machine, never typed in by hand. Rep 2's solution is built from the
recorded records (data/measurements/knobs-cpu.jsonl) of a knob that is not
speculation.
"""

from __future__ import annotations

import json
import sys

from servelab.grading.author import answer, capture, code, md, notebook, test, write_source
from servelab.paths import REPO_DIR

ASSIGNMENT = "knoblab"
SOURCE = REPO_DIR / "solutions" / ASSIGNMENT / "knob_lab.ipynb"
RESULT = REPO_DIR / "bench" / "results" / "knobs-cpu.json"
REP2_KNOB = "batching"
REP2_POINTS = 4


def result() -> dict:
    if not RESULT.is_file():
        raise SystemExit(f"{RESULT} is missing: run `python bench/knobs.py` first; the lab's text quotes it.")
    return json.loads(RESULT.read_text())


def _s(r: dict, knob: str, setting: str) -> dict:
    return r["knobs"][knob]["settings"][setting]


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "not recorded"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def cells() -> list:
    r = result()
    return _intro(r) + _lab() + _knobs(r) + _rep2() + _going_further()


def _intro(r: dict) -> list:
    m = r["machine"]
    fp = r.get("first_point") or {}
    first = (f"Measured on this machine: a click the moment the lab opens shows the first setting's point after "
             f"{fp['cold_click_s']:.0f} s (its server has to start first); a click after a minute of reading, "
             f"after {fp['warm_click_s']:.0f} s, most of it the load itself ({fp['load']})."
             if "warm_click_s" in fp else "")
    return [
        md(f"""
        # Lab: every knob of the checklist, measured

        The lesson's checklist has five knobs: batching, quantization (precision), parallelism, speculative
        decoding and prefix caching, plus the KV cache size behind them. In this lab you measure each of them
        the way vLLM's own benchmarks do: a real OpenAI-compatible vLLM server per setting, loaded by vLLM's
        serving benchmark (`vllm bench serve`) with Poisson arrivals at a request rate, or with a fixed number
        of users, and read TTFT and TPOT percentiles, throughput, and the server's own counters from its
        `/metrics`: queue time, running and waiting requests, KV cache usage, preemptions, prefix-cache hits and
        draft acceptance.

        **How this notebook runs.** Opening the lab starts a vLLM server for each of the two settings in the
        background (30-60 s each on 2 cores), so that by the time you have read the controls, **Measure** has
        warm servers to load. Running the cells measures nothing by itself; the charts show what was recorded
        on this course's machine ({m['cpu']}, {m['cores']} cores, vLLM {r['versions']['vllm']}) and whatever you
        measure yourself. While nbgrader grades this notebook, and under `make nbval`, no server starts and
        the lab shows the recorded measurements only. {first}
        """, "intro"),
        code("""
        from servelab.lab import offline_reason
        from servelab.lab.knoblab import KnobLab

        print("live measurement:", "off (" + offline_reason() + ")" if offline_reason() else "on a click on Measure")
        """, "imports"),
    ]


def _lab() -> list:
    return [
        md("""
        ## 1. The lab

        - **knob**: which checklist item; it brings its two settings, the workload and the load the benchmark
          used, and an SLO. Change any of them.
        - **setting a / setting b**: the two server configurations compared. Each is one `vllm serve` command
          line; settings that share a command line share a server.
        - **workload**: *chat* (open-ended questions), *copy* (copy-heavy prompts, where n-gram drafts match) or
          *shared-prefix* (every request opens with the same 1,024-token system prompt, as in RAG).
        - **load**: a fixed number of **users** (at most that many requests in flight, each user sending the
          next as soon as the last one ends), or **Poisson arrivals** at a request rate (requests come when they
          come, and queue if the server is busy).

        **Measure** runs vLLM's serving benchmark against setting a, then setting b, and each record is kept in
        your results store the moment it exists. Bars are the two settings (the legend names them); the dashed
        red line is the SLO, on the panel of its metric.
        """, "lab-controls"),
        code("""
        lab = KnobLab()
        lab
        """, "lab"),
    ]


def _knobs(r: dict) -> list:
    k = r["knobs"]
    m = r["machine"]
    out = [md(f"""
        ## 2. What each knob did on this machine

        The course's benchmark (`bench/knobs.py`, results in `bench/results/knobs-cpu.json`) measured each
        knob's settings under the same load. Select the knob in the lab to see its charts. The settings
        of a knob ran one after the other, minutes apart, on {m.get('cores', 2)} cores (load average
        {m['loadavg_before'][0]:.1f} when the run began, {m['loadavg_after'][0]:.1f} when it ended): read
        differences of less than about 2x as possibly noise, and measure again to see how much they move.
        {_kept(r)}
        """, "knobs-intro")]
    out += _batching(k["batching"], k["batching"].get("harness", "").startswith("vllm.benchmarks.sweep"))
    out += _prefix(k["prefix_caching"]) + _precision(k["precision"])
    out += _speculation(k["speculation"]) + _kv(k["kv_cache"]) + _parallelism(k["parallelism"])
    return out


def _kept(r: dict) -> str:
    kept = r.get("kept_from_earlier_run") or {}
    if not kept.get("knobs"):
        return ""
    def when(name: str) -> str:
        run = r["knobs"][name].get("measured_in") or {}
        after = (run.get("loadavg_after") or (kept.get("machine") or {}).get("loadavg_after") or [0])[0]
        return f"{name.replace('_', ' ')} (load average {after:.1f} when its run ended)"
    return (f"Some knobs come from earlier runs of the same benchmark on this machine, under the same load: "
            f"{', '.join(when(n) for n in kept['knobs'])}.")


def _batching(k: dict, swept: bool = False) -> list:
    big, small = k["settings"]["max_num_seqs=256"], k["settings"]["max_num_seqs=4"]
    budget = k["settings"].get("max_num_batched_tokens=256", {})
    def col(name: str, x: dict, row) -> str:
        return f" {row(x)} |" if "ttft_ms_p50" in x else ""
    head = " max_num_batched_tokens=256 |" if "ttft_ms_p50" in budget else ""
    rows = [("TTFT p50 / p99, ms", lambda x: f"{_f(x['ttft_ms_p50'])} / {_f(x['ttft_ms_p99'])}"),
            ("TPOT p50, ms", lambda x: _f(x['tpot_ms_p50'])),
            ("output tok/s", lambda x: _f(x['output_tok_s'])),
            ("requests running / waiting (peak)",
             lambda x: f"{x['num_requests_running_max']} / {x['num_requests_waiting_max']}"),
            ("queue time (mean), ms", lambda x: _f(x.get('queue_time_ms_mean')))]
    table = "\n        ".join(f"| {label} | {row(big)} | {row(small)} |" + col("budget", budget, row)
                              for label, row in rows)
    return [md(f"""
        ### Batching: max-num-seqs against 20 concurrent users (Practice 1, measured)

        Load: {k['load']}. SLO: p99 TTFT under {k['slo_value']:g} ms. {_swept(swept)}

        | | max_num_seqs=256 | max_num_seqs=4 |{head}
        |---|---|---|{'---|' if head else ''}
        {table}

        What this teaches. vLLM's continuous batching admits a request into the running batch at the next step,
        so a cap far above the number of users changes nothing: with 20 users, at most 20 requests are ever
        running, whether the cap is 256 or 10,000. A cap *below* the number of users is a real limit: the rest
        wait in the server's queue (the waiting gauge and the queue time say so), and their wait is part of
        their TTFT. Practice 1's question "is batch 256 justified?" is therefore answered by the number of
        concurrent users and the TTFT it produces, not by the cap itself. {_budget_seen(big, budget)}
        """, "knob-batching")]


def _swept(swept: bool) -> str:
    if not swept:
        return ""
    return ("The settings were measured with vLLM's serve-parameter sweep (`vllm bench sweep serve`), which starts "
            "a server per setting and loads each the same way.")


def _budget_seen(big: dict, budget: dict) -> str:
    if "ttft_ms_p50" not in budget:
        return ""
    waited = budget.get("num_requests_waiting_max") or 0
    return ("max-num-batched-tokens is the other batching cap: the tokens one step may process, prompts and "
            "decodes together. At 256, the 20 users' prefills no longer fit in one step: they are spread over "
            "several steps (chunked prefill), "
            + (f"up to {waited} requests waited for room in a step, " if waited else "")
            + "and the running requests' decodes share each step with them: TTFT p99 went "
            f"from {_f(big['ttft_ms_p99'])} to {_f(budget['ttft_ms_p99'])} ms, TPOT p50 from "
            f"{_f(big['tpot_ms_p50'])} to {_f(budget['tpot_ms_p50'])} ms. A small budget keeps each step short; "
            + _budget_verdict(big, budget)
            + "vLLM refuses a budget below max_num_seqs.")


def _budget_verdict(big: dict, budget: dict) -> str:
    """What the token budget did, said no more strongly than the numbers allow (settings ran minutes apart)."""
    ttft, tpot = budget["ttft_ms_p99"] / big["ttft_ms_p99"], budget["tpot_ms_p50"] / big["tpot_ms_p50"]
    if max(ttft, tpot, 1 / ttft, 1 / tpot) < 1.25:
        return ("here both moved by less than a quarter, within what two runs minutes apart on these shared cores "
                "differ by: for 20 short chat prompts a budget of 256 tokens is barely a limit. ")
    if ttft > 1 and tpot > 1:
        return "here it cost both the first token and the ones after it. "
    return "what it buys and costs shows in the two rows. "


def _prefix(k: dict) -> list:
    off, on = k["settings"]["prefix caching off"], k["settings"]["prefix caching on"]
    def cached(s: dict) -> str:
        q = s.get("prefix_cache_queries_tokens") or 0
        if not q:
            return "none (no lookups: the cache is off)"
        return f"{s['prefix_cache_hit_tokens']:,} of {q:,} ({100 * s['prefix_cache_hit_tokens'] / q:.0f} %)"
    return [md(f"""
        ### Prefix caching: a long shared system prompt

        Load: {k['load']}. Workload: {k['workload']} (a 1,024-token prefix shared by every request).

        | | off | on |
        |---|---|---|
        | TTFT p50 / p99, ms | {_f(off['ttft_ms_p50'])} / {_f(off['ttft_ms_p99'])} | {_f(on['ttft_ms_p50'])} / {_f(on['ttft_ms_p99'])} |
        | prompt tokens served from the cache | {cached(off)} | {cached(on)} |
        | output tok/s | {_f(off['output_tok_s'])} | {_f(on['output_tok_s'])} |

        What this teaches. With the cache on, the shared prefix is computed once and every later request reads
        its KV blocks instead of recomputing them: the hit counter shows how many prompt tokens were skipped, and
        TTFT, which is mostly prefill here, falls with it. The cache is worth as much as the prompts share; on
        the chat workload (no shared prefix) turn it on and watch the hit counter stay near zero.
        """, "knob-prefix")]


def _precision(k: dict) -> list:
    bf, fp = k["settings"]["bfloat16"], k["settings"]["float32"]
    q = k["settings"].get("W4A16 weights", {})
    acc = k.get("accuracy", {})
    a_bf, a_fp, a_q = acc.get("bfloat16", {}), acc.get("float32", {}), acc.get("W4A16 weights", {})
    measured = "output_tok_s" in q
    def right(a: dict) -> str:
        return f"{a.get('right', 0)} of {a.get('questions', 0)} ({100 * a.get('answer_match_rate', 0):.1f} %)"
    head, line = (" W4A16 (4-bit weights) |", "---|") if measured else ("", "")
    def extra(value: str) -> str:
        return f" {value} |" if measured else ""
    return [md(f"""
        ### Precision: bfloat16 against float32, and 4-bit weights

        Load: {k['load']}. Accuracy: the bundled short-answer task (`data/tasks/short-answers.jsonl`,
        {a_bf.get('questions', 0)} questions: capitals and small sums), greedy, asked of each server.

        | | bfloat16 | float32 |{head}
        |---|---|---|{line}
        | output tok/s | {_f(bf['output_tok_s'])} | {_f(fp['output_tok_s'])} |{extra(_f(q.get('output_tok_s')))}
        | TPOT p50, ms | {_f(bf['tpot_ms_p50'])} | {_f(fp['tpot_ms_p50'])} |{extra(_f(q.get('tpot_ms_p50')))}
        | TTFT p50, ms | {_f(bf['ttft_ms_p50'])} | {_f(fp['ttft_ms_p50'])} |{extra(_f(q.get('ttft_ms_p50')))}
        | right answers | {right(a_bf)} | {right(a_fp)} |{extra(right(a_q))}

        What this teaches. Halving the bytes per weight halves what a decode step reads; whether that turns
        into speed depends on the hardware having a fast path for the narrower type (this CPU has AVX512-BF16
        and AMX). The accuracy row is the lesson's "accuracy measured on this task": a precision change is
        justified by a measurement on the task the model serves, not by the format's reputation.
        {_quantized_seen(bf, q, a_bf, a_q)}
        """, "knob-precision")]


def _quantized_seen(bf: dict, q: dict, a_bf: dict, a_q: dict) -> str:
    made = ("W4A16 is the same model with 4-bit integer weights in groups of 64 (activations stay bfloat16), "
            "made by llm-compressor (`make quantized-model`, `bench/quantize.py`) and run by vLLM's CPU kernel "
            "for such weights (CPUWNA16).")
    if "output_tok_s" not in q:
        return f"{made} It was not measured here: {q.get('error', 'no record')}"
    faster = q["output_tok_s"] > bf["output_tok_s"]
    return (f"{made} Against bfloat16 it ran at {_f(q['output_tok_s'])} against {_f(bf['output_tok_s'])} output "
            f"tok/s ({'faster' if faster else 'slower'}) and answered {a_q.get('right', 0)} of "
            f"{a_q.get('questions', 0)} against {a_bf.get('right', 0)}. "
            + ("Fewer bytes did not buy speed: a 135M-parameter model's weights are a small part of each step "
               "here, and unpacking 4-bit groups costs compute. "
               if not faster else "Fewer bytes per weight read bought speed. ")
            + "Quantization is a trade measured on the task, both ways.")


def _speculation(k: dict) -> list:
    off, on = k["settings"]["no speculation"], k["settings"]["n-gram k=4"]
    return [md(f"""
        ### Speculative decoding: n-gram k=4 under Poisson arrivals

        Load: {k['load']}. Workload: copy-heavy prompts.

        | | no speculation | n-gram k=4 |
        |---|---|---|
        | TPOT p50 / p99, ms | {_f(off['tpot_ms_p50'])} / {_f(off['tpot_ms_p99'])} | {_f(on['tpot_ms_p50'])} / {_f(on['tpot_ms_p99'])} |
        | TTFT p50 / p99, ms | {_f(off['ttft_ms_p50'])} / {_f(off['ttft_ms_p99'])} | {_f(on['ttft_ms_p50'])} / {_f(on['ttft_ms_p99'])} |
        | draft acceptance | - | {_f(on.get('acceptance_rate'))} |
        | output tok/s | {_f(off['output_tok_s'])} | {_f(on['output_tok_s'])} |

        What this teaches. Under an arrival rate the batch is whatever happens to be running, usually small at
        a low rate: the regime where the spec-decode lab found speculation paying. {_spec_seen(off, on)} Raise
        the request rate and watch the running gauge grow and the gain shrink, as the flip predicts.
        """, "knob-speculation")]


def _spec_seen(off: dict, on: dict) -> str:
    if not on.get("acceptance_rate"):
        return ("Here no draft token was accepted, so whatever TPOT difference there is comes from the run, "
                "not from speculation.")
    faster = on["tpot_ms_p50"] < off["tpot_ms_p50"]
    return (f"Here {100 * on['acceptance_rate']:.0f} % of the drafted tokens were accepted and the median TPOT "
            f"went from {_f(off['tpot_ms_p50'])} to {_f(on['tpot_ms_p50'])} ms"
            + (": speculation paid at this rate." if faster else ": even so, it did not pay at this rate."))


def _kv(k: dict) -> list:
    big, small = k["settings"]["kv_cache=1GiB"], k["settings"]["kv_cache=16MiB"]
    return [md(f"""
        ### KV cache size: a cache too small for the load

        Load: {k['load']}. Both servers run a 512-token context (max-model-len 512). SmolLM2-135M keeps 23,040
        bytes of KV cache per token in bfloat16, so 16 MiB holds 728 tokens, 45 blocks of 16: one request of the
        full context (vLLM refuses to start a server whose cache cannot hold one), but not 20 users' prompts
        and answers at once.

        | | 1 GiB | 16 MiB |
        |---|---|---|
        | TTFT p50 / p99, ms | {_f(big['ttft_ms_p50'])} / {_f(big['ttft_ms_p99'])} | {_f(small['ttft_ms_p50'])} / {_f(small['ttft_ms_p99'])} |
        | KV cache usage (peak) | {100 * big['kv_cache_usage_max']:.0f} % | {100 * small['kv_cache_usage_max']:.0f} % |
        | preemptions | {big['num_preemptions']} | {small['num_preemptions']} |
        | requests running / waiting (peak) | {big['num_requests_running_max']} / {big['num_requests_waiting_max']} | {small['num_requests_running_max']} / {small['num_requests_waiting_max']} |
        | output tok/s | {_f(big['output_tok_s'])} | {_f(small['output_tok_s'])} |

        What this teaches. When the cache is full, the scheduler stops admitting requests (they wait, and their
        TTFT grows) and, when a running request needs a block that is not there, preempts one: its KV cache is
        dropped and its prefill is computed again later. {_kv_seen(small)} The preemption counter is the alarm:
        on a production dashboard, a non-zero rate means the cache (gpu_memory_utilization, max-model-len,
        max-num-seqs) is sized below the load.
        """, "knob-kv")]


def _kv_seen(small: dict) -> str:
    if small.get("num_preemptions"):
        return (f"Here the small cache preempted {small['num_preemptions']} times and held at most "
                f"{small['num_requests_running_max']} requests running while {small['num_requests_waiting_max']} "
                "waited.")
    if small.get("num_requests_waiting_max"):
        return (f"Here nothing was preempted, but at most {small['num_requests_running_max']} requests ran while "
                f"{small['num_requests_waiting_max']} waited for cache blocks.")
    return (f"Here the small cache peaked at {100 * small.get('kv_cache_usage_max', 0):.0f} % and nothing was "
            "preempted or kept waiting: these prompts are short. Raise the output length in the lab to see the "
            "counters move.")


def _parallelism(k: dict) -> list:
    tp2 = k["settings"].get("tp=2", {})
    tp1 = k["settings"].get("tp=1", {})
    error = tp2.get("error", "")
    reason = error.split("before it answered: ", 1)[-1].split(" (full log")[0] if error else ""
    rows = k.get("simulated", {}).get("rows", {})
    table = "\n        ".join(
        f"| {where} | " + " | ".join(f"{row['tp1_tok_s']:,.0f} / {row['tp2_tok_s']:,.0f}" for row in data) + " |"
        for where, data in rows.items())
    measured = (f"Measured, tp=1: {_f(tp1.get('output_tok_s'))} output tok/s under {k['load']}."
                if "output_tok_s" in tp1 else "")
    refused = (f"vLLM refused tensor-parallel-size 2 for this model: \"{reason}\" SmolLM2-135M has 9 attention "
               "heads, and tensor parallelism splits the heads evenly across devices; 3 would divide them, but "
               "this machine has 2 cores." if reason else
               f"tp=2 measured: {_f(tp2.get('output_tok_s'))} output tok/s.")
    return [md(f"""
        ### Parallelism: tensor-parallel-size 2 on the two cores

        {refused} {measured}

        So here is the **simulator's** answer instead (`servelab.simulate.tensor_parallel_table`, simulated, not
        measured): output tok/s at tp=1 / tp=2, for batch 1, 8 and 32.

        | | batch 1 | batch 8 | batch 32 |
        |---|---|---|---|
        {table}

        What this teaches. Tensor parallelism splits every weight matrix, so each device reads and computes a
        share, and pays two all-reduces per layer to put the results together. On two cores of one CPU the
        shares come from the same memory bus and the same cores: nothing to gain, the all-reduces to pay. On
        two GPUs with their own memory, a model that fits one GPU (135M parameters) still loses to the
        all-reduces; a model whose weights dominate the step (8B) gains. Split a model when it does not fit, or
        when the weight reads dominate; never by default.
        """, "knob-parallelism")]


def _rep2() -> list:
    from servelab import knobs
    from servelab.lab.rep2 import answer_source, comparison
    from servelab.results import ResultsStore

    records = ResultsStore(knobs.recorded_path()).read()
    k = knobs.KNOBS[REP2_KNOB]
    a_name, b_name = k.setting_names[:2]  # the knob's first two settings: the ones the lab opens on
    a, b = knobs.latest(records, REP2_KNOB, a_name), knobs.latest(records, REP2_KNOB, b_name)
    if a is None or b is None:
        raise SystemExit(f"{knobs.recorded_path()} has no {REP2_KNOB} records: run `python bench/knobs.py` first.")
    metric = k.slo_metric
    va, vb = a[metric], b[metric]
    better = 0 if va <= vb else 1
    solution = answer_source(comparison(REP2_KNOB, a, b, metric, better=better, conclusion=(
        f"The SLO is p99 TTFT under {k.slo_value:g} ms at 20 concurrent users. With max_num_seqs=256 the p99 TTFT "
        f"was {va:.0f} ms against {vb:.0f} ms with max_num_seqs=4: a cap below the number of users queues "
        f"requests and their wait lands in TTFT, while a cap far above it changes nothing, since continuous "
        f"batching never runs more than the 20 requests in flight. Keep the cap at or above the peak "
        f"concurrency; 256 is not wrong, just not a reason in itself."
        + ("" if min(va, vb) <= k.slo_value else
           f" Neither setting meets the {k.slo_value:g} ms SLO on this 2-core CPU: that takes faster hardware "
           "or fewer users per server, not another cap."))))
    return [
        md(f"""
        ## 3. Real-world rep 2 for any knob

        *Pick one config knob and compare two different settings on the same workload, measuring throughput
        and latency with each. Record which metric matters more for your SLO and whether the configured choice
        is the right one.*

        Any knob of this lab will do. The solution below uses batching: Practice 1's configuration runs
        max-num-seqs 256 for 20 concurrent users with a p99 TTFT SLO of {k.slo_value:g} ms; is the cap the
        right choice, and what would a smaller one do?

        1. Choose the knob, the two settings, the workload and the load in the lab, and click **Measure**
           (skip it if the records are already there).
        2. Fetch the two records (the cell below; it sets the lab to the knob first).
        3. `lab.comparison(...)` prints your hand-in with your numbers. Paste it into the answer cell, set
           `"better"` to the index of the setting that serves the SLO better, and write the conclusion.

        The answer cell holds the numbers themselves: the grader runs this notebook on another machine, without
        your results store and without a server. It checks that both records are Measurements of the same
        workload on the same machine, that each agrees with itself (`output_tokens / elapsed_s` is
        `output_tok_s`), that both are plausible against the roofline simulator, and that your conclusion
        follows from your own numbers. The records can also be evidence for `servelab review`: list them under
        `records:` in a workload file.
        """, "rep2-question"),
        code(f"""
        lab.set(knob="{REP2_KNOB}")
        setting_a = lab.record("{a_name}")
        setting_b = lab.record("{b_name}")
        lab.show_comparison(setting_a, setting_b)
        """, "rep2-fetch"),
        code(f"""
        draft = lab.comparison(setting_a, setting_b, slo_metric="{metric}")
        """, "rep2-draft"),
        answer("rep2-answer", solution,
               preamble="# Paste what lab.comparison(...) printed; set \"better\" and write \"conclusion\"."),
        test("rep2-test", REP2_POINTS, _form(), capture("comparison")),
    ]


def _form() -> str:
    return (
        "assert isinstance(comparison, dict), \"comparison should be the dict lab.comparison(...) printed\"\n"
        "_missing = {'knob', 'slo_metric', 'measurements', 'better', 'conclusion'} - set(comparison)\n"
        "assert not _missing, f\"comparison is missing the keys {sorted(_missing)}\"\n"
        "assert isinstance(comparison['measurements'], list) and len(comparison['measurements']) == 2, \\\n"
        "    \"measurements should hold the two records, as values\"\n"
        "assert comparison['better'] in (0, 1), \"better should be 0 or 1\""
    )


def _going_further() -> list:
    return [md("""
        ## Going further

        - `vllm bench serve --help` (here: `python -m servelab.benchrun` runs the same `main()`): every dataset
          and load shape of vLLM's serving benchmark, including bursty arrivals (`--burstiness` below 1).
        - vLLM docs, "Metrics": every counter the server exports on `/metrics`.
        - The spec-decode lab: where speculation's gain flips into a loss as the batch grows.
        """, "going-further")]


def build():
    """The instructor notebook, built the same way every time (from the recorded benchmark)."""
    return notebook(cells())


def main(argv: list[str] | None = None) -> int:
    return write_source(build(), SOURCE)


if __name__ == "__main__":
    sys.exit(main())
