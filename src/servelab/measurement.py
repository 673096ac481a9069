"""The Measurement record: one batch of one engine config on one workload.

A flat, frozen record whose field names carry their units, serialized to one
JSON line. Provenance (machine, versions, model, engine mode) travels in the
record itself, so a number is never separated from where it came from.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from . import __version__

SCHEMA_VERSION = 1
# The fewest requests one measured point runs, whatever its batch: small batches repeat on successive prompts
# until this many ran (servelab.measure on the engine, servelab.remote on a server).
MIN_REQUESTS = 8
METHODS = ("none", "ngram", "draft_model", "eagle", "eagle3", "adaptive", "routed")
# Which way is better for each metric an SLO can name: the lab's rep 2 offers these and the grader judges by them.
METRIC_DIRECTIONS = {
    "output_tok_s": "higher",
    "request_throughput": "higher",
    "ttft_ms_p50": "lower",
    "ttft_ms_p99": "lower",
    "tpot_ms_p50": "lower",
    "tpot_ms_p99": "lower",
}


@dataclass(frozen=True)
class Measurement:
    # what was measured
    method: str  # none | ngram | draft_model | adaptive | routed
    num_speculative_tokens: int  # k; 0 when method is none
    batch_size: int  # requests submitted together (offline) or concurrency (remote)
    workload: str  # copy | open (see data/workloads/)
    output_len: int  # max new tokens per request
    # what came out
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    elapsed_s: float  # wall time of the whole batch
    output_tok_s: float  # output_tokens / elapsed_s
    request_throughput: float  # num_requests / elapsed_s
    ttft_ms_p50: float
    ttft_ms_p99: float
    tpot_ms_p50: float  # time per output token after the first, per request
    tpot_ms_p99: float
    acceptance_rate: float | None = None  # accepted / proposed draft tokens (vLLM counters)
    mean_acceptance_length: float | None = None  # tokens per verify step = 1 + accepted / drafts
    num_drafts: int | None = None
    num_draft_tokens: int | None = None
    num_accepted_tokens: int | None = None
    prefix_cache_hit_tokens: int | None = None  # prompt tokens vLLM served from its prefix cache (0 when off)
    # a served knob under load (servelab.knobs): None for the engine's closed batches
    knob: str | None = None  # batching | prefix_caching | precision | speculation | kv_cache | parallelism
    knob_setting: str | None = None  # the setting's name, e.g. "max_num_seqs=4"
    request_rate: float | None = None  # Poisson arrivals per second; None = every request at once (closed loop)
    max_concurrency: int | None = None  # users: requests in flight at most
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    e2el_ms_p99: float | None = None  # end-to-end latency of one request
    queue_time_ms_mean: float | None = None  # vLLM's vllm:request_queue_time_seconds, sum / count over the run
    num_requests_running_max: int | None = None  # the server's gauges, peak over the run (polled /metrics)
    num_requests_waiting_max: int | None = None
    kv_cache_usage_max: float | None = None  # 0..1
    num_preemptions: int | None = None  # vllm:num_preemptions during the run
    prefix_cache_queries_tokens: int | None = None  # prompt tokens looked up in the prefix cache during the run
    server_start_s: float | None = None  # seconds from starting the server to its first answer
    answer_match_rate: float | None = None  # right answers on data/tasks/short-answers.jsonl (precision knob)
    # where it came from
    backend: str = "local"  # local | remote | simulated | transformers
    model: str = ""
    draft_model: str = ""
    dtype: str = ""
    enforce_eager: bool = True
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    hardware: str = ""  # CPU model string or GPU name
    cores: int = 0
    vllm_version: str = ""
    torch_version: str = ""
    servelab_version: str = ""
    timestamp: str = ""  # ISO 8601, UTC
    engine_config: dict = field(default_factory=dict)
    roofline: dict = field(default_factory=dict)  # the machine's measured Hardware (CPU runs), see hardware.py
    machine: str = ""  # which machine measured it: CPU, cores, a hash of the host name (servelab.cpu_usage)
    cpu_usage: dict = field(default_factory=dict)  # what the engine got while it ran, and whether it was contended
    note: str = ""
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        known = {f.name for f in dataclasses.fields(cls)}
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in d and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"Measurement record is missing fields: {', '.join(missing)}")
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def is_speculative(self) -> bool:
        return self.method != "none"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in 0..100. NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --- building a record: what every path that measures fills the same way (the engine's batches in measure.py,
# a remote server's requests in remote.py, vLLM's serving benchmark in knobs/records.py) ----------------------


def throughput_fields(output_tokens: int, num_requests: int, elapsed_s: float) -> dict:
    """elapsed_s, output_tok_s and request_throughput, rounded as every record rounds them."""
    return {
        "elapsed_s": round(elapsed_s, 6),
        "output_tok_s": round(output_tokens / elapsed_s, 3),
        "request_throughput": round(num_requests / elapsed_s, 4),
    }


def latency_fields(ttft_ms: list[float], tpot_ms: list[float]) -> dict:
    """TTFT and TPOT p50 / p99 from per-request times in ms (NaN TPOT where no request made a second token)."""
    return {
        "ttft_ms_p50": round(percentile(ttft_ms, 50), 3),
        "ttft_ms_p99": round(percentile(ttft_ms, 99), 3),
        "tpot_ms_p50": round(percentile(tpot_ms, 50), 3) if tpot_ms else math.nan,
        "tpot_ms_p99": round(percentile(tpot_ms, 99), 3) if tpot_ms else math.nan,
    }


def speculation_fields(known: bool, drafts: int, proposed: int, accepted: int) -> dict:
    """The speculative counters as a record holds them, from vLLM's: acceptance rate = accepted / proposed,
    mean acceptance length = 1 + accepted / drafts; all None where speculation was off or the counters unknown."""
    return {
        "acceptance_rate": round(accepted / proposed, 4) if known and proposed else None,
        "mean_acceptance_length": round(1 + accepted / drafts, 4) if known and drafts else None,
        "num_drafts": drafts if known else None,
        "num_draft_tokens": proposed if known else None,
        "num_accepted_tokens": accepted if known else None,
    }


def stamped(**fields) -> Measurement:
    """A Measurement of these fields, stamped with this servelab's version and the time (UTC, to the second)."""
    return Measurement(
        servelab_version=__version__, timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"), **fields
    )
