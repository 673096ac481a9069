"""One real vLLM engine in a worker process, so that a crash there never takes the caller down.

The caller (a notebook kernel, the CLI, a test) talks to the worker over a pipe:
start, health, generate a batch, stop. The worker runs `vllm.LLM` and writes all
of vLLM's output to a log file; when it dies, the caller gets an EngineError that
carries the last lines of that log. An engine is reusable across many batches:
starting one costs about 40 s on 2 cores, a batch costs seconds.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import re
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import NoReturn

from . import model, paths
from .hardware import DTYPE_BYTES, cpu_name, engine_cpu_dtype
from .metrics import SPEC_COUNTERS
from .modelspec import ModelSpec

SPEC_METHODS = ("none", "ngram", "draft_model", "eagle", "eagle3")
DRAFTED = ("draft_model", "eagle", "eagle3")  # methods whose proposer is a second model
START_TIMEOUT_S = 900  # first start on a cold 2-core machine, compile included, stays well below this
LOG_TAIL_LINES = 25


class EngineError(RuntimeError):
    """The engine failed: the message says what happened and what to do.

    log_tail holds vLLM's last log lines and log_path the whole log; the message itself carries
    only vLLM's root-cause line (its last "SomethingError: ..."), not the traceback frames."""

    def __init__(self, message: str, log_tail: str = "", log_path: str = ""):
        self.log_tail = log_tail
        self.log_path = log_path
        self.root_cause = root_cause(log_tail)
        text = message
        if self.root_cause and self.root_cause not in message:
            text += f"\nvLLM said: {self.root_cause}"
        if log_path:
            text += f"\nFull engine log: {log_path}"
        super().__init__(text)


_ERROR_LINE = re.compile(r"^(?:\(\S+ pid=\d+\)\s*)?(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")
_REFUSED = "Value error, "  # pydantic's words before the reason a config is refused


def root_cause(log: str) -> str:
    """vLLM's reason in its log, which says more than the traceback around it ("" when it gave none).

    One rule for the engine and for `vllm serve` (servelab.server): a config vLLM refuses is a pydantic
    ValidationError whose reason follows "Value error, " ("Total number of attention heads (9) must be
    divisible by tensor parallel size (2)."); else the most specific error line, the last 'XxxError: ...'
    that is not a generic wrapper ("Engine core initialization failed. See root cause above").
    """
    for line in reversed(log.splitlines()):
        if _REFUSED in line:
            return line.split(_REFUSED, 1)[1].split(" [type=")[0].strip()[:400]
    found = [m.group(1) + ": " + m.group(2).strip() for m in map(_ERROR_LINE.match, log.splitlines()) if m]
    specific = [f for f in found if "See root cause above" not in f and "initialization failed" not in f]
    return (specific or found or [""])[-1][:400]


class EngineConfigError(ValueError):
    """An EngineConfig that cannot work; the message says which field to change."""


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides which engine runs. Two equal configs can share one warm engine."""

    model: str = ""  # a Hugging Face folder; "" = the bundled SmolLM2-135M-Instruct
    dtype: str = "auto"  # "auto" = float32 on CPUs without native bf16, else vLLM's choice
    max_num_seqs: int = 64  # the largest batch the scheduler forms
    max_model_len: int = 1024  # prompt + output tokens per request
    kv_cache_gb: float = 1.0  # KV cache space on CPU (GiB); on GPU vLLM sizes it from memory utilization
    threads: int | None = None  # CPU threads for the model; None = every core this process may use
    enforce_eager: bool = True  # True: start in 30-45 s here; False: torch.compile, 86-104 s start, 13-18 % faster
    spec_method: str = "none"  # none | ngram | draft_model | eagle | eagle3 (EAGLE heads need a GPU build)
    num_speculative_tokens: int = 0  # k: tokens proposed per step
    prompt_lookup_min: int = 2  # n-gram: shortest match searched for in the prompt
    prompt_lookup_max: int = 4  # n-gram: longest match
    draft_model: str = ""  # draft_model/eagle: a folder or (GPU) a hub id; "" = the bundled 6-layer draft
    # Load-adaptive k: ((first_batch, last_batch, k), ...), vLLM's num_speculative_tokens_per_batch_size
    num_speculative_tokens_per_batch_size: tuple[tuple[int, int, int], ...] = ()
    seed: int = 0
    # vLLM caches prompt prefixes by default. A measurement leaves it off: the sweep's points share prompts
    # (batch 16 runs prompts 0-15, batch 8 ran 0-7), and a cached prefill made a point depend on the ones
    # before it (here, 30-45 % faster at batch 8-64 on a second pass). None leaves vLLM's default.
    prefix_caching: bool | None = False

    def __post_init__(self):
        if self.spec_method not in SPEC_METHODS:
            raise EngineConfigError(f"spec_method must be one of {', '.join(SPEC_METHODS)}, not {self.spec_method!r}.")
        if self.spec_method != "none" and self.num_speculative_tokens < 1:
            raise EngineConfigError(
                f"num_speculative_tokens is {self.num_speculative_tokens}, but {self.spec_method} speculation "
                "needs k >= 1 (try 4), or set spec_method='none' to turn speculation off."
            )
        if self.spec_method == "none" and (self.num_speculative_tokens or self.num_speculative_tokens_per_batch_size):
            raise EngineConfigError(
                "num_speculative_tokens is set but spec_method is 'none': "
                "choose spec_method='ngram' or 'draft_model', or set k to 0."
            )
        if self.max_num_seqs < 1:
            raise EngineConfigError(f"max_num_seqs must be at least 1, not {self.max_num_seqs}.")
        if self.kv_cache_gb <= 0:
            raise EngineConfigError(f"kv_cache_gb must be positive, not {self.kv_cache_gb}.")
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise EngineConfigError(
                f"Need 1 <= prompt_lookup_min <= prompt_lookup_max, got "
                f"{self.prompt_lookup_min} and {self.prompt_lookup_max}."
            )
        for entry in self.num_speculative_tokens_per_batch_size:
            if len(entry) != 3 or entry[0] > entry[1] or entry[2] < 0:
                raise EngineConfigError(
                    f"Each load-adaptive entry is (first_batch, last_batch, k) with "
                    f"first <= last and k >= 0; got {entry!r}."
                )

    # --- what the engine will actually run -------------------------------
    def resolved_model(self) -> str:
        if self.model:
            return self.model
        return str(model.model_dir())

    def resolved_draft(self) -> str:
        if self.draft_model:
            return self.draft_model
        return str(model.draft_dir(model.DEFAULT_DRAFT_LAYERS[0]))

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        if on_gpu():
            return "auto"
        return engine_cpu_dtype()

    def method_label(self) -> str:
        if self.spec_method == "none":
            return "none"
        return "adaptive" if self.num_speculative_tokens_per_batch_size else self.spec_method

    def check_files(self) -> None:
        """Fail fast, before the 40-second start, when a model folder is missing."""
        for what, folder in [("model", self.resolved_model())] + (
            [("draft_model", self.resolved_draft())] if self.spec_method in DRAFTED else []
        ):
            if _looks_like_hub_id(folder) and on_gpu():
                continue  # vLLM fetches hub ids itself on machines that can reach the hub
            if not (Path(folder) / "config.json").is_file():
                hint = (
                    "Run `servelab prepare-model` to build the bundled model."
                    if not (self.model if what == "model" else self.draft_model)
                    else f"Point EngineConfig.{what} at a folder that holds config.json and weights."
                )
                raise EngineConfigError(f"No model at {folder} (no config.json there). {hint}")

    def check_kv_cache(self) -> None:
        """vLLM refuses to start when the KV cache cannot hold one max_model_len request: say so first."""
        need = self._kv_bytes_needed(self.max_model_len, 1)
        if need is not None and need > self.kv_cache_gb * 2**30:
            raise EngineConfigError(
                f"The KV cache is too small: kv_cache_gb={self.kv_cache_gb} cannot hold one request of "
                f"max_model_len={self.max_model_len} tokens ({need / 2**30:.3f} GiB). Raise kv_cache_gb to at "
                f"least {need / 2**30 * 1.1:.3f} or lower max_model_len."
            )

    def check_batch(self, batch_size: int, tokens_per_request: int) -> None:
        """A batch that cannot run at full size fails here, with the knob to change."""
        if batch_size > self.max_num_seqs:
            raise EngineConfigError(
                f"Batch {batch_size} is larger than max_num_seqs={self.max_num_seqs}: the engine would run it "
                f"in pieces. Raise max_num_seqs to at least {batch_size} (a new engine) or measure a smaller batch."
            )
        if tokens_per_request > self.max_model_len:
            raise EngineConfigError(
                f"A request needs {tokens_per_request} tokens (prompt + output) but max_model_len is "
                f"{self.max_model_len}: raise max_model_len or shorten the output."
            )
        need = self._kv_bytes_needed(tokens_per_request, batch_size)
        if need is not None and need > self.kv_cache_gb * 2**30:
            raise EngineConfigError(
                f"The KV cache is too small for this batch: {batch_size} requests x {tokens_per_request} tokens "
                f"need {need / 2**30:.2f} GiB but kv_cache_gb={self.kv_cache_gb}. Raise kv_cache_gb to at least "
                f"{need / 2**30 * 1.1:.2f} or measure a smaller batch."
            )

    def _kv_bytes_needed(self, tokens_per_request: int, batch_size: int) -> float | None:
        """KV cache bytes for a batch on CPU, or None where servelab cannot judge it: on a GPU
        (vLLM sizes the cache from memory) or for a dtype servelab does not know (vLLM judges it)."""
        if on_gpu():
            return None
        dtype = self.resolved_dtype()
        dtype = "bfloat16" if dtype == "auto" else dtype
        if dtype not in DTYPE_BYTES:
            return None
        return ModelSpec.from_config_json(self.resolved_model()).kv_bytes(tokens_per_request, batch_size, dtype)

    def speculative_config(self) -> dict | None:
        if self.spec_method == "none":
            return None
        spec: dict = {"method": self.spec_method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.spec_method == "ngram":
            spec.update(prompt_lookup_min=self.prompt_lookup_min, prompt_lookup_max=self.prompt_lookup_max)
        else:  # draft_model, eagle, eagle3: the proposer is a model
            spec["model"] = self.resolved_draft()
        if self.num_speculative_tokens_per_batch_size:
            spec["num_speculative_tokens_per_batch_size"] = [
                list(e) for e in self.num_speculative_tokens_per_batch_size
            ]
        return spec

    def llm_kwargs(self) -> dict:
        kwargs = dict(
            model=self.resolved_model(),
            dtype=self.resolved_dtype(),
            max_num_seqs=self.max_num_seqs,
            max_model_len=self.max_model_len,
            enforce_eager=self.enforce_eager,
            seed=self.seed,
            disable_log_stats=False,  # keeps vLLM's spec-decode counters readable through get_metrics()
        )
        if self.prefix_caching is not None:
            kwargs["enable_prefix_caching"] = self.prefix_caching
        if not on_gpu():
            kwargs["kv_cache_memory_bytes"] = int(self.kv_cache_gb * 2**30)
        spec = self.speculative_config()
        if spec:
            kwargs["speculative_config"] = spec
        return kwargs

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["num_speculative_tokens_per_batch_size"] = [list(e) for e in self.num_speculative_tokens_per_batch_size]
        return d

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _looks_like_hub_id(name: str) -> bool:
    """'org/model' with no such local folder: a Hugging Face hub id."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def on_gpu() -> bool:
    try:  # torch only when asked: the lab and the reviewer import this module without it
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@dataclass
class BatchResult:
    """What one generate() call returns: texts, per-request timings, spec-decode counter deltas."""

    texts: list[str]
    prompt_tokens: list[int]
    output_tokens: list[int]
    ttft_s: list[float]
    tpot_s: list[float | None]  # None for a request that produced a single token
    elapsed_s: float
    spec_counters: dict[str, int] = field(default_factory=dict)


class Engine:
    """A vLLM engine in a worker process. Use as a context manager, or call start() and stop()."""

    def __init__(self, config: EngineConfig | None = None, log_path: str | Path | None = None):
        self.config = config or EngineConfig()
        self.log_path = Path(log_path) if log_path else paths.logs_dir() / f"engine-{os.getpid()}-{id(self):x}.log"
        self.info: dict = {}
        self.state = "stopped"  # stopped | starting | idle | busy | failed
        self.last_error: str = ""
        self._proc: BaseProcess | None = None  # the worker and its pipe: set together, cleared together
        self._conn: Connection | None = None
        self._lock = threading.RLock()

    # --- lifecycle --------------------------------------------------------
    def start(self, timeout_s: float = START_TIMEOUT_S) -> "Engine":
        with self._lock:
            if self.is_alive():
                return self
            self.config.check_files()
            self.config.check_kv_cache()
            ctx = mp.get_context("spawn")
            parent, child = ctx.Pipe()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.state = "starting"
            proc = ctx.Process(
                target=_worker_main,
                args=(child, self.config.to_dict(), str(self.log_path)),
                name="servelab-engine",
                daemon=False,
            )
            proc.start()
            child.close()
            self._proc, self._conn = proc, parent
            try:
                kind, payload = self._receive(timeout_s, "start")
            except EngineError:
                self._kill()
                raise
            if kind != "ready":
                self._kill()
                self._fail(
                    f"The engine did not start: {payload}",
                    "Check the config (the log below says what vLLM rejected) and start again.",
                )
            self.info = payload
            self.state = "idle"
            return self

    def stop(self, timeout_s: float = 5) -> None:
        """Stop the worker (and vLLM's own processes under it). Safe to call twice.

        The worker holds nothing worth saving (results are stored by the caller): it exits as soon as it
        reads "stop", and its whole process group is killed; timeout_s bounds the wait for a worker that
        is busy and does not read it."""
        with self._lock:
            if self._proc is None:
                return
            proc, conn = self._started()
            if proc.is_alive():
                try:
                    conn.send(("stop", None))
                    proc.join(timeout_s)
                except (OSError, EOFError, BrokenPipeError):
                    pass
            self._kill()
            if self.state != "failed":
                self.state = "stopped"

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def health(self, timeout_s: float = 30) -> dict:
        """Ask the worker whether it answers; raises EngineError when it is gone."""
        return self._call("health", None, timeout_s)

    def __enter__(self) -> "Engine":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):  # a forgotten engine must not outlive its kernel
        try:
            self._kill()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be half torn down
            pass

    # --- work -------------------------------------------------------------
    def generate(
        self,
        prompts: list[str],
        max_tokens: int = 64,
        temperature: float = 0.0,
        chat: bool = True,
        ignore_eos: bool = True,
        timeout_s: float = 1800,
    ) -> BatchResult:
        """Run one batch: every prompt is submitted at once, so the engine batches them together.

        ignore_eos=True makes every request produce exactly max_tokens, so batches compare fairly.
        """
        if not prompts:
            raise ValueError("generate() needs at least one prompt.")
        payload = dict(
            prompts=list(prompts), max_tokens=max_tokens, temperature=temperature, chat=chat, ignore_eos=ignore_eos
        )
        result = self._call("generate", payload, timeout_s)
        return BatchResult(**result)

    # --- plumbing ---------------------------------------------------------
    def _call(self, op: str, payload, timeout_s: float):
        with self._lock:
            if not self.is_alive():
                self._fail(f"The engine is not running ({self.state}).", "Start it again (Engine.start()).")
            _, conn = self._started()
            self.state = "busy"
            try:
                conn.send((op, payload))
            except (OSError, BrokenPipeError):
                self._kill()
                self._fail("The engine worker went away before the request was sent.", "Start the engine again.")
            kind, result = self._receive(timeout_s, op)
            if kind == "error":
                self.state = "idle"
                raise EngineError(f"The engine rejected the request: {result}")
            self.state = "idle"
            return result

    def _receive(self, timeout_s: float, op: str):
        proc, conn = self._started()
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                self._fail(
                    f"The engine did not finish '{op}' within {timeout_s:.0f} s and was stopped.",
                    "Try a smaller batch or shorter output, then start it again.",
                )
            try:
                if conn.poll(min(remaining, 0.5)):
                    return conn.recv()
            except (EOFError, OSError):
                pass
            else:
                if proc.is_alive():
                    continue
            # The pipe broke or the worker died: whatever it was doing is lost.
            proc.join(5)  # let a dying worker finish dying, so its exit code is known
            code = proc.exitcode
            self._kill()
            how = (
                f"was killed by signal {-code}"
                if code and code < 0
                else "stopped answering"
                if code is None
                else f"exited with code {code}"
            )
            self._fail(
                f"The engine worker {how} during '{op}'.",
                "Your kernel is fine and measurements already stored are kept; start the engine again.",
            )

    def _started(self) -> tuple[BaseProcess, Connection]:
        """The worker and its pipe, which start() sets and _kill() clears together."""
        if self._proc is None or self._conn is None:
            self._fail(f"The engine is not running ({self.state}).", "Start it again (Engine.start()).")
        return self._proc, self._conn

    def _fail(self, what: str, todo: str) -> NoReturn:
        self.state = "failed"
        self.last_error = what
        error = EngineError(f"{what} {todo}", self.log_tail(LOG_TAIL_LINES * 4), str(self.log_path))
        self.last_error = str(error)
        raise error

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None
        if proc is None:
            return
        if proc.pid and proc.is_alive():
            try:  # the worker leads its own process group: vLLM's processes go with it
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.join(10)
        if proc.pid:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(deque(f, maxlen=lines)).rstrip()
        except OSError:
            return ""


# --- the worker process -------------------------------------------------------
def _worker_main(conn, config_dict: dict, log_path: str) -> None:
    os.setsid()  # its own process group, so stop() can take vLLM's children down with it
    _die_with_parent(os.getppid())
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    config_dict["num_speculative_tokens_per_batch_size"] = tuple(
        tuple(e) for e in config_dict.get("num_speculative_tokens_per_batch_size") or ()
    )
    config = EngineConfig(**config_dict)
    cores = sorted(os.sched_getaffinity(0))
    threads = config.threads or len(cores)
    # vLLM keeps one core for serving unless told which cores to bind: give the model all of them.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"{cores[0]}-{cores[threads - 1]}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:  # in the engine's own process only: importing vLLM takes about 10 s and the lab opens without it
        import torch
        import vllm
        from vllm import LLM, SamplingParams

        llm = LLM(**config.llm_kwargs())
        tokenizer = llm.get_tokenizer()
    except BaseException as exc:  # noqa: BLE001 - report every start failure, then die
        _send(conn, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
    _send(
        conn,
        (
            "ready",
            {
                "vllm_version": vllm.__version__,
                "torch_version": torch.__version__,
                "hardware": gpu or cpu_name(),
                "cores": 0 if gpu else threads,
                "dtype": config.resolved_dtype(),
                "model": config.resolved_model(),
                "pid": os.getpid(),
            },
        ),
    )
    while True:
        try:
            op, payload = conn.recv()
        except (EOFError, OSError):
            return  # the caller went away
        if op == "stop":
            # Leave at once: returning would wait for vLLM's engine process, which does not end on its own
            # (still alive 60 s after "stop" on vllm-cpu 0.32.0), and nothing here is worth saving. stop()
            # then takes the rest of the process group, vLLM's processes, down with it.
            os._exit(0)
        try:
            if op == "health":
                reply = {"ok": True, "pid": os.getpid()}
            elif op == "generate":
                reply = _generate(llm, tokenizer, SamplingParams, payload)
            else:
                raise ValueError(f"unknown operation {op!r}")
            _send(conn, ("ok", reply))
        except Exception as exc:  # noqa: BLE001 - the caller gets it in words; the engine serves on
            _send(conn, ("error", f"{type(exc).__name__}: {exc}"))


def _die_with_parent(parent: int) -> None:
    """A caller killed outright (a kernel restart, kill -9) cannot stop its engine: take the
    engine's whole process group down as soon as the caller is gone, so no engine is orphaned.

    Not PR_SET_PDEATHSIG (servelab.grading.runner.die_with_parent, which the grading processes use):
    Linux sends that when the *thread* that forked the child exits, and a lab forks its engine from a
    worker thread; and it would kill this process alone, not the vLLM processes it leads."""

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="servelab-parent-watch", daemon=True).start()


def _send(conn, message) -> None:
    try:
        conn.send(message)
    except (OSError, BrokenPipeError):
        pass


# The in-process engine's counters, by the names a server exports on /metrics
ENGINE_COUNTERS = {
    **SPEC_COUNTERS,
    "vllm:prefix_cache_hits": "prefix_cache_hit_tokens",  # not speculation's, but read the same way
}


def _spec_counters(llm) -> dict[str, int]:
    """vLLM's counters; the spec-decode ones read 0 when not speculating, the others are absent if vLLM has none."""
    counts = {short: 0 for short in SPEC_COUNTERS.values()}
    for metric in llm.get_metrics():
        name = ENGINE_COUNTERS.get(metric.name)
        if name is not None and hasattr(metric, "value"):
            counts[name] = counts.get(name, 0) + int(metric.value)
    return counts


def _generate(llm, tokenizer, SamplingParams, payload: dict) -> dict:
    prompts = payload["prompts"]
    if payload["chat"]:
        prompts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
    params = SamplingParams(
        max_tokens=payload["max_tokens"], temperature=payload["temperature"], ignore_eos=payload["ignore_eos"]
    )
    before = _spec_counters(llm)
    t0 = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - t0
    after = _spec_counters(llm)
    ttft, tpot = [], []
    for out in outputs:
        m = out.metrics
        n = len(out.outputs[0].token_ids)
        ttft.append(float(getattr(m, "first_token_latency", 0.0) or 0.0))
        span = float(getattr(m, "last_token_ts", 0.0) or 0.0) - float(getattr(m, "first_token_ts", 0.0) or 0.0)
        tpot.append(span / (n - 1) if n > 1 and span > 0 else None)
    return dict(
        texts=[o.outputs[0].text for o in outputs],
        prompt_tokens=[len(o.prompt_token_ids or []) for o in outputs],
        output_tokens=[len(o.outputs[0].token_ids) for o in outputs],
        ttft_s=ttft,
        tpot_s=tpot,
        elapsed_s=elapsed,
        spec_counters={k: after[k] - before[k] for k in after},
    )
