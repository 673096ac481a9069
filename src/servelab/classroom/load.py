"""A class's load: simulated students moving the lab's sliders against the shared servers at once.

Each student is a bounded loop over the lab's points, as a student measures them
with the remote backend: for each batch size in `batch_sizes`, one point on
each server it is given (`batch_size` streamed requests in flight, as
RemoteServer.measure keeps them). Students start at different places in that
loop, as in a class where everybody opened the lab at the same time.

What each student sees is their own requests' timings (vLLM's definitions, see
servelab.remote); what the server sees is its batch, sampled from /metrics
(vllm:num_requests_running) every POLL_S while the class runs. On a shared
server the batch is the class's, not the slider's: twenty students at batch 1
put twenty requests in one batch, past the crossover where speculation pays.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..knobs import MetricsPoller
from ..measurement import percentile
from ..remote import RemoteServer, RequestTiming

BATCH_SIZES = (1, 2, 4)  # the batch slider's positions each student visits
OUTPUT_LEN = 24  # tokens per request: short, so a class of twenty fits in a minute on a CPU
WORKLOAD = "copy"  # the workload where n-gram speculation drafts well (the lab's default)


@dataclass
class StudentRecord:
    """One student's requests, per server, and the wall time of their whole loop."""

    student: int
    timings: dict[str, list[RequestTiming]] = field(default_factory=dict)
    seconds: float = 0.0

    def all(self) -> list[RequestTiming]:
        return [t for ts in self.timings.values() for t in ts]

    def summary(self) -> dict:
        """What this student saw: TTFT p99, TPOT p50, and output tokens per second of their own loop."""
        timings = self.all()
        ttft = [t.ttft_s * 1000 for t in timings]
        tpot = [t.tpot_s * 1000 for t in timings if t.tpot_s is not None]
        return {
            "student": self.student,
            "requests": len(timings),
            "ttft_ms_p99": round(percentile(ttft, 99), 1),
            "tpot_ms_p50": round(percentile(tpot, 50), 1),
            "output_tok_s": round(sum(t.output_tokens for t in timings) / self.seconds, 2),
        }


class BatchSampler(MetricsPoller):
    """MetricsPoller that also keeps every sample of the running batch, for its mean while the class runs."""

    def __init__(self, url: str):
        super().__init__(url)
        self.running: list[float] = []

    def _note(self, metrics: dict[str, float]) -> None:
        super()._note(metrics)
        self.running.append(metrics.get("vllm:num_requests_running", 0.0))

    def batch(self) -> dict:
        busy = [r for r in self.running if r > 0]
        return {
            "num_requests_running_peak": int(self.peaks["running"]),
            "num_requests_waiting_peak": int(self.peaks["waiting"]),
            "num_requests_running_mean_while_busy": round(sum(busy) / len(busy), 1) if busy else 0.0,
            "samples": len(self.running),
        }


def plan(student: int, batch_sizes=BATCH_SIZES, servers=("off", "on")) -> list[tuple[str, int]]:
    """The student's slider moves, (server, batch_size), rotated so students start in different places."""
    steps = [(s, b) for b in batch_sizes for s in servers]
    shift = student % len(steps)
    return steps[shift:] + steps[:shift]


async def student_loop(
    student: int,
    servers: dict[str, RemoteServer],
    batch_sizes=BATCH_SIZES,
    output_len: int = OUTPUT_LEN,
    workload: str = WORKLOAD,
) -> StudentRecord:
    """One student: a point at each slider position, on each server, one after the other; bounded."""
    record = StudentRecord(student, {key: [] for key in servers})
    start = time.perf_counter()
    for key, batch_size in plan(student, batch_sizes, tuple(servers)):
        record.timings[key] += await servers[key].astream(_prompts(workload, batch_size, student), output_len)
    record.seconds = time.perf_counter() - start
    return record


def _prompts(workload: str, batch_size: int, student: int) -> list[str]:
    from ..workload import load

    prompts = load(workload).batch(batch_size + student)
    return prompts[student : student + batch_size]  # students ask different questions, as a class does


def run_class(
    urls: dict[str, str],
    students: int,
    batch_sizes=BATCH_SIZES,
    output_len: int = OUTPUT_LEN,
    timeout_s: float = 300.0,
    keys: list[str] | None = None,
) -> dict:
    """Run `students` loops at once against the servers at `urls`; each student's summary and each server's batch.

    keys: each student's key for the class's servers (servelab.classroom.servers.grant), one per student;
    without them every student sends SERVELAB_REMOTE_API_KEY (or none)."""
    if keys is not None and len(keys) < students:
        raise ValueError(f"{students} students need {students} keys, not {len(keys)}")

    def servers_of(i: int) -> dict[str, RemoteServer]:
        servers = {name: RemoteServer(url, timeout_s=timeout_s) for name, url in urls.items()}
        for server in servers.values():
            server.api_key = server.api_key if keys is None else keys[i]
        return servers

    samplers = {key: BatchSampler(url) for key, url in urls.items()}

    async def everybody():
        return await asyncio.gather(*(student_loop(i, servers_of(i), batch_sizes, output_len) for i in range(students)))

    for sampler in samplers.values():
        sampler.__enter__()
    start = time.perf_counter()
    try:
        records = asyncio.run(everybody())
    finally:
        for sampler in samplers.values():
            sampler.__exit__(None, None, None)
    seconds = time.perf_counter() - start
    per_server = {}
    for key in urls:
        timings = [t for r in records for t in r.timings[key]]
        tpot = [t.tpot_s * 1000 for t in timings if t.tpot_s is not None]
        per_server[key] = samplers[key].batch() | {
            "requests": len(timings),
            "tpot_ms_p50": round(percentile(tpot, 50), 1),
            "ttft_ms_p99": round(percentile([t.ttft_s * 1000 for t in timings], 99), 1),
        }
    return {
        "students": students,
        "seconds": round(seconds, 1),
        "servers": per_server,
        "per_student": [r.summary() for r in records],
    }
