"""A vLLM server's /metrics: Prometheus text read as numbers, counters differenced over a run, gauges' peaks.

vLLM exports its counters and gauges on /metrics in Prometheus' text format (vLLM docs, "Metrics").
One parser reads that text for every caller: a knob's run and the helper running vLLM's benchmark
(servelab.knobs, servelab.benchrun), a remote server's acceptance (servelab.remote) and a class's
batch (servelab.classroom).
"""

from __future__ import annotations

import os
import re
import threading
import urllib.request

COUNTERS = {  # Prometheus counter -> short name; differences over the run
    "vllm:num_preemptions": "num_preemptions",
    "vllm:prefix_cache_queries": "prefix_cache_queries",
    "vllm:prefix_cache_hits": "prefix_cache_hits",
    "vllm:request_queue_time_seconds_sum": "queue_time_s_sum",
    "vllm:request_queue_time_seconds_count": "queue_time_count",
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}
# Speculation's counters: what acceptance is computed from
SPEC_COUNTERS = {name: short for name, short in COUNTERS.items() if name.startswith("vllm:spec_decode_")}
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
}
POLL_S = 0.1


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum each metric over its label sets: {'vllm:spec_decode_num_draft_tokens': 316.0, ...}.

    Counters carry prometheus_client's '_total' suffix on the wire; it is removed,
    so names read as vLLM documents them.
    """
    totals: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)", line)
        if not match:
            continue
        name, value = match.group(1), match.group(3)
        try:
            number = float(value)
        except ValueError:
            continue
        if name.endswith("_created"):
            continue  # a counter's creation time, not a count
        name = name[: -len("_total")] if name.endswith("_total") else name
        totals[name] = totals.get(name, 0.0) + number
    return totals


def spec_counters(metrics: dict[str, float]) -> dict[str, int]:
    return {short: int(metrics.get(name, 0)) for name, short in SPEC_COUNTERS.items()}


def read_metrics(url: str) -> dict[str, float]:
    """A server's /metrics now (url: the server root, http://host:port), with the class key if one is set."""
    key = os.environ.get("SERVELAB_REMOTE_API_KEY", "")
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {key}"} if key else {})
    with urllib.request.urlopen(request, timeout=5) as r:
        return parse_prometheus(r.read().decode())


class MetricsPoller:
    """Counters before and after, gauges' peaks in between (polled every POLL_S while the load runs)."""

    def __init__(self, url: str):
        self.url = url
        self.peaks = {short: 0.0 for short in GAUGES.values()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.before: dict[str, float] = {}

    def __enter__(self) -> "MetricsPoller":
        self.before = read_metrics(self.url)
        self._thread = threading.Thread(target=self._poll, name="servelab-metrics", daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self._note(read_metrics(self.url))
            except OSError:
                pass
            self._stop.wait(POLL_S)

    def _note(self, metrics: dict[str, float]) -> None:
        for name, short in GAUGES.items():
            self.peaks[short] = max(self.peaks[short], metrics.get(name, 0.0))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)

    def counters(self) -> dict[str, float]:
        after = read_metrics(self.url)
        self._note(after)
        return {short: after.get(name, 0.0) - self.before.get(name, 0.0) for name, short in COUNTERS.items()}
