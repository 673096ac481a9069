"""servelab's command line: prepare-model | sweep | simulate | review | lab | class | practice | variants."""

from __future__ import annotations

import argparse
import sys

from .batch_sizes import batch_sizes_arg

# Each command imports what it needs inside its own function, so `servelab review` and `servelab simulate`
# run without importing the engine, the hub or vLLM.


def cmd_prepare_model(args) -> int:
    from . import model

    try:
        prepared = model.prepare(force=args.force, verify=not args.no_verify)
    except model.ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(prepared.path)
    for layers, folder in prepared.drafts.items():
        print(f"draft ({layers} layers): {folder}")
    return 0


def cmd_sweep(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .engine import EngineConfig, EngineConfigError, EngineError
    from .measure import compare, crossover_batch, sweep
    from .results import ResultsStore

    store = ResultsStore(args.results) if args.results else ResultsStore()
    try:
        common = dict(
            dtype=args.dtype,
            max_num_seqs=max(max(args.batch), 1),
            kv_cache_gb=args.kv_cache_gb,
            enforce_eager=not args.compile,
        )
        base = EngineConfig(**common)
        spec = (
            EngineConfig(spec_method=args.spec, num_speculative_tokens=args.k, **common)
            if args.spec != "none"
            else None
        )
        runs = {}
        for label, config in [("none", base)] + ([("spec", spec)] if spec else []):
            print(
                f"Measuring {config.method_label()} (k={config.num_speculative_tokens}) at batch "
                f"{','.join(map(str, args.batch))} on '{args.workload}' ...",
                file=sys.stderr,
            )
            runs[label] = sweep(config, args.batch, args.workload, args.output_len, store=store)
    except (EngineConfigError, EngineError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    console = Console()
    table = Table(title=f"{args.workload} workload, {args.output_len} new tokens per request")
    if spec is None:
        for col in ("batch", "tok/s", "TPOT p50 ms", "TTFT p99 ms"):
            table.add_column(col, justify="right")
        for r in runs["none"]:
            table.add_row(str(r.batch_size), f"{r.output_tok_s:.1f}", f"{r.tpot_ms_p50:.1f}", f"{r.ttft_ms_p99:.0f}")
        console.print(table)
    else:
        rows = compare(runs["none"], runs["spec"])
        for col in (
            "batch",
            "no spec tok/s",
            f"{args.spec} k={args.k} tok/s",
            "speedup",
            "TPOT p50 ms off/on",
            "acceptance",
        ):
            table.add_column(col, justify="right")
        for row in rows:
            style = "green" if row.speedup >= 1 else "red"
            table.add_row(
                str(row.batch_size),
                f"{row.base_tok_s:.1f}",
                f"{row.spec_tok_s:.1f}",
                f"[{style}]{row.speedup:.2f}x[/{style}]",
                f"{row.base_tpot_ms:.1f} / {row.spec_tpot_ms:.1f}",
                "-" if row.acceptance_rate is None else f"{row.acceptance_rate:.0%}",
            )
        console.print(table)
        cross = crossover_batch(rows)
        console.print(
            "Crossover batch: "
            + (
                f"about {cross:g} (speculation loses above it)"
                if cross
                else "none in this range (speculation never lost)"
            )
        )
    console.print(f"Stored {sum(map(len, runs.values()))} records in {store.path}")
    return 0


def cmd_lab(args) -> int:
    from . import launch

    extra = args.jupyter_args[1:] if args.jupyter_args[:1] == ["--"] else args.jupyter_args
    try:
        return launch.run(port=args.port, browser=not args.no_browser, extra=extra)
    except launch.LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare-model", help="convert the bundled SmolLM2-135M-Instruct once and check it")
    p.add_argument("--force", action="store_true", help="rebuild even if the folder is complete")
    p.add_argument("--no-verify", action="store_true", help="skip the greedy-generation check")
    p.set_defaults(func=cmd_prepare_model)

    p = sub.add_parser("sweep", help="measure throughput with and without speculation over batch sizes")
    p.add_argument(
        "--spec",
        choices=["none", "ngram", "draft_model"],
        default="ngram",
        help="speculation method to compare against no speculation",
    )
    p.add_argument("--k", type=int, default=4, help="num_speculative_tokens (tokens proposed per step)")
    p.add_argument(
        "--batch",
        type=batch_sizes_arg,
        default=[1, 2, 4, 8, 16, 32, 64],
        help="batch sizes, comma separated; '...' continues the last ratio: 1,2,4,...,64",
    )
    p.add_argument("--workload", default="copy", help="copy (n-gram drafts hit) or open (few hits)")
    p.add_argument("--output-len", type=int, default=64, help="new tokens per request")
    p.add_argument("--dtype", default="auto", help="auto = float32 on CPUs without native bf16")
    p.add_argument("--kv-cache-gb", type=float, default=2.0, help="KV cache space on CPU, GiB")
    p.add_argument("--compile", action="store_true", help="use torch.compile (slower start, faster steps)")
    p.add_argument("--results", help="results store (default: $SERVELAB_RESULTS or ~/.cache/servelab/results.jsonl)")
    p.set_defaults(func=cmd_sweep)

    from . import review, simulate

    for module, name, help_text in [
        (review, "review", "review a serving config against its workload"),
        (simulate, "simulate", "roofline model of speculative decoding on a GPU you may not have"),
    ]:
        if hasattr(module, "add_arguments"):
            p = sub.add_parser(name, help=help_text)
            module.add_arguments(p)
            p.set_defaults(func=module.run)

    from .classroom import cli as class_cli

    p = sub.add_parser("class", help="a class on a hub: gradebook, exchange, JupyterHub, shared vLLM servers")
    class_cli.add_arguments(p)
    p.set_defaults(func=class_cli.run)

    p = sub.add_parser("lab", help="open the lab notebook in JupyterLab")
    p.add_argument("--port", type=int, default=8888, help="JupyterLab's port; the next free one if it is taken")
    p.add_argument("--no-browser", action="store_true", help="print the URL, open no browser")
    p.add_argument(
        "jupyter_args",
        nargs=argparse.REMAINDER,
        help="after --, more options for jupyter lab (e.g. -- --ServerApp.ip=0.0.0.0)",
    )
    p.set_defaults(func=cmd_lab)

    from .variants import practice

    p = sub.add_parser("practice", help="fresh variants of the lesson's numeric questions; missed ones come back")
    practice.add_arguments(p)
    p.set_defaults(func=practice.run)

    from .variants import lesson as variant_lesson

    p = sub.add_parser("variants", help="a student's own numbers of the lesson's variant questions (instructors)")
    variant_lesson.add_arguments(p)
    p.set_defaults(func=variant_lesson.run)

    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
