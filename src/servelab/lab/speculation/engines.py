"""Warm engines for the lab, and how one point gets measured on each backend.

Starting an engine costs about 40 s on 2 cores; a batch costs seconds. So the
lab keeps a small pool of started engines, one per EngineConfig, and only a new
config (method, k, model, draft, KV cache size) starts a new one. Batch size,
workload and output length are per-request settings: they never restart
anything. The pool holds two engines, enough for the baseline plus one
speculating config, which is also exactly what routing needs. The least
recently used engine is stopped to make room, and every engine is stopped when
the kernel exits.

One point flows one way, like a knob lab point (servelab.knobs):

    resolve(point) -> PointPlan          engine config (routed: the side that serves it) and workload, once
    plan.check()                         refused before any start: missing model, batch the KV cache cannot hold
    measure_local / measure_remote       a warm engine (or server) runs the plan's prompts -> Measurement
    the lab stores the record            and the charts redraw from the store
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import platform
import statistics
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

from ...engine import Engine, EngineConfig
from ...measurement import Measurement
from ...routing import Router, Threshold
from ...workload import PromptSet
from .points import BATCHES, Settings, adaptive_schedule

POOL_SIZE = 2
MAX_NUM_SEQS = max(BATCHES)  # the engine's cap is the slider's top batch: moving the slider never restarts it
# What the status line promises before this machine has recorded a start of its own: eager starts on
# 2 cores took 28.7 s without speculation and 44.5 s with n-gram (bench/results/compiled-cpu.json).
START_SECONDS = {False: 29.0, True: 45.0}
STARTS_KEPT = 10  # the estimate is the median of this many latest starts on this machine


def engine_config(settings: Settings, method: str, threshold: int | None = None) -> EngineConfig:
    """The EngineConfig that measures `method` for these settings (routed is not one engine: see Router)."""
    config = functools.partial(
        EngineConfig, model=settings.model, max_num_seqs=MAX_NUM_SEQS, kv_cache_gb=settings.kv_cache_gb
    )
    if method == "none":
        return config()
    if method == "ngram":
        return config(spec_method="ngram", num_speculative_tokens=settings.k)
    if method == "draft_model":
        return config(spec_method="draft_model", num_speculative_tokens=settings.k, draft_model=settings.draft_model)
    if method == "adaptive":
        if threshold is None:
            raise ValueError("load-adaptive speculation needs the batch where k drops to 0 (threshold).")
        return config(
            spec_method="ngram",
            num_speculative_tokens=settings.k,
            num_speculative_tokens_per_batch_size=adaptive_schedule(settings.k, threshold),
        )
    raise ValueError(f"No single engine measures method {method!r}.")


def describe(config: EngineConfig) -> str:
    if config.spec_method == "none":
        return "no speculation"
    if config.num_speculative_tokens_per_batch_size:
        return f"load-adaptive n-gram k={config.num_speculative_tokens}"
    return f"{config.spec_method.replace('_', ' ')} k={config.num_speculative_tokens}"


class EnginePool:
    """Started engines by config, at most `size` of them; the least recently used one is stopped for a new one."""

    def __init__(
        self,
        size: int = POOL_SIZE,
        engine_factory: Callable[[EngineConfig], Engine] = Engine,
        record_starts: bool | None = None,
    ):
        self.size = size
        self.engine_factory = engine_factory
        # Only real vLLM starts teach the estimate; a stand-in engine would teach it nonsense.
        self.record_starts = engine_factory is Engine if record_starts is None else record_starts
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._lock = threading.RLock()
        _POOLS.add(self)

    def get(
        self,
        config: EngineConfig,
        on_start: Callable[[str], None] | None = None,
        keep: tuple[EngineConfig, ...] = (),
        on_phase: Callable[[str, float, "StartEstimate"], None] | None = None,
    ) -> Engine:
        """A started engine for config: warm if there is one, else started now (30-45 s on 2 cores).

        An engine whose worker died (killed, crashed) is started again here.
        `keep` names configs that must not be stopped to make room (routing needs two at once).
        While it starts, on_phase(phase, seconds so far, estimate) is called about once a second; the
        start's duration is then recorded, so the next estimate is this machine's own.
        """
        from ...measure import attach_roofline, warm_up

        key = config.key()
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                self._make_room({key} | {c.key() for c in keep})
                engine = self.engine_factory(config)
                self._engines[key] = engine
            self._engines.move_to_end(key)
        if not engine.is_alive():
            if on_start:
                on_start(describe(config))
            estimate = start_estimate(config)
            t0 = time.monotonic()
            watcher = _StartWatcher(getattr(engine, "log_path", None), on_phase, estimate, t0) if on_phase else None
            try:
                engine.start()
                if watcher:
                    watcher.phase = "warming up"
                warm_up(engine)
            finally:
                if watcher:
                    watcher.stop()
            attach_roofline(engine)
            if self.record_starts:
                record_start(config, time.monotonic() - t0)
        return engine

    def _make_room(self, keep: set[str]) -> None:
        while len(self._engines) >= self.size:
            victim = next((k for k in self._engines if k not in keep), None)
            if victim is None:
                return
            self._engines.pop(victim).stop()

    def warm(self) -> list[str]:
        """Descriptions of the engines that are running now."""
        with self._lock:
            return [describe(e.config) for e in self._engines.values() if e.is_alive()]

    def engines(self) -> list[Engine]:
        with self._lock:
            return list(self._engines.values())

    def close(self) -> None:
        """Stop every engine (safe to call twice)."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), OrderedDict()
        for engine in engines:
            try:
                engine.stop()
            except Exception:  # noqa: BLE001 - stopping is best effort at exit
                pass


_POOLS: "weakref.WeakSet[EnginePool]" = weakref.WeakSet()


# --- how long a start takes on this machine ---------------------------------------------------------
# Each start the lab makes is recorded (seconds from start to a warmed-up engine, with the machine's name
# and cores) in the cache folder, beside the results store; the status line's estimate is the median of the
# latest ones for this machine and this kind of engine (speculating or not: a draft proposer costs more).
@dataclass(frozen=True)
class StartEstimate:
    seconds: float
    starts: int  # how many recorded starts it comes from; 0: none yet, the benchmark's figure
    speculating: bool = False  # the kind of engine asked for
    other_kind: bool = False  # only the other kind has started here yet: its starts stand in
    busy: str = ""  # how the machine's load stretched the estimate (under_load), "" on a quiet machine

    def under_load(self, load: float | None = None, cores: int | None = None, threads: int | None = None):
        """The estimate on a machine this busy now: other runnable work shares the cores with the engine.

        With R other runnable tasks (the 1-minute load average, read before the engine adds its own) and the
        engine's T threads on C cores, a fair scheduler gives the engine C*T/(R+T) cores where R+T > C, so its
        start takes (R+T)/C times as long. Applied only past 1.5x: the recorded starts were themselves taken
        with some load on the machine."""
        if load is None:
            try:
                load = os.getloadavg()[0]
            except OSError:
                return self
        cores = cores or len(os.sched_getaffinity(0))
        threads = min(threads or cores, cores)
        factor = (load + threads) / cores
        if factor < 1.5:
            return self
        return replace(
            self,
            seconds=self.seconds * factor,
            busy=f"{factor:.1f}x for load {load:.1f} on {cores} cores, the cores other work holds now",
        )

    def describe(self) -> str:
        if self.busy:
            return f"{replace(self, busy='').describe()}, stretched {self.busy}"
        kind = "speculating" if self.speculating != self.other_kind else "non-speculating"
        if self.starts:
            also = (
                f"; no {'speculating' if self.speculating else 'non-speculating'} engine has started here yet"
                if self.other_kind
                else ""
            )
            which = (
                f"the median of the last {self.starts} {kind} engine starts"
                if self.starts > 1
                else f"as the one {kind} engine start recorded took"
            )
            return f"about {self.seconds:.0f} s, {which} on this machine{also}"
        cores = _machine()["cores"]
        return (
            f"about {self.seconds:.0f} s, as a {kind} engine took to start on the benchmark's 2 cores "
            f"(this machine has {cores}; no start recorded on it yet)"
        )


def starts_path():
    from ...paths import cache_dir

    return cache_dir() / "engine-starts.jsonl"


def _machine() -> dict:
    return {
        "host": platform.node(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }


def record_start(config: EngineConfig, seconds: float, path=None) -> None:
    """Append one start's duration; a cache folder that cannot be written only loses the estimate."""
    entry = {
        "seconds": round(seconds, 1),
        "engine": describe(config),
        "speculating": config.spec_method != "none",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **_machine(),
    }
    try:
        with open(path or starts_path(), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    except OSError:
        pass


def start_estimate(config: EngineConfig, path=None) -> StartEstimate:
    """How long a start of this kind of engine takes here: recorded starts first, else the benchmark's."""
    speculating = config.spec_method != "none"
    machine = _machine()
    seen = []
    try:
        with open(path or starts_path(), encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    seconds = float(entry["seconds"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn or foreign line
                if entry.get("host") == machine["host"] and entry.get("cores") == machine["cores"]:
                    seen.append((bool(entry.get("speculating")), seconds))
    except OSError:
        pass
    same = [sec for spec, sec in seen if spec == speculating][-STARTS_KEPT:]
    if same:
        return StartEstimate(statistics.median(same), len(same), speculating)
    other = [sec for _, sec in seen][-STARTS_KEPT:]
    if other:
        return StartEstimate(statistics.median(other), len(other), speculating, other_kind=True)
    return StartEstimate(START_SECONDS[speculating], 0, speculating)


def start_phase(log_text: str) -> str:
    """Where an engine start is, read from what vLLM has logged so far (its own log lines, vLLM 0.32.0:
    "Starting to load model" in the CPU model runner, "Model loading took" / "Loading weights took" once the
    weights are in, "init engine (profile, create kv cache, warmup model)" when the engine is up)."""
    if "init engine (profile, create kv cache, warmup model)" in log_text:
        return "warming up"
    if "Model loading took" in log_text or "Loading weights took" in log_text:
        return "preparing the KV cache"
    if "Starting to load model" in log_text:
        return "loading the model"
    return "starting the engine"


class _StartWatcher:
    """Reads the engine log while it starts and reports the phase, the seconds so far and the estimate."""

    def __init__(self, log_path, on_phase, estimate: StartEstimate, t0: float, every_s: float = 1.0):
        self.log_path, self.on_phase, self.estimate, self.t0, self.every_s = log_path, on_phase, estimate, t0, every_s
        self.phase = ""  # set from outside once the engine is up
        try:
            self.offset = os.path.getsize(log_path) if log_path else 0  # a restart appends to the same log
        except OSError:
            self.offset = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="servelab-engine-start", daemon=True)
        self._thread.start()

    def _read(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                f.seek(self.offset)
                return f.read()
        except (OSError, TypeError):
            return ""

    def _watch(self) -> None:
        while True:
            phase = self.phase or start_phase(self._read())
            try:
                self.on_phase(phase, time.monotonic() - self.t0, self.estimate)
            except Exception:  # noqa: BLE001 - a status line that fails must not stop the start
                pass
            if self._done.wait(self.every_s):
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


@atexit.register
def _stop_all() -> None:  # a kernel that exits takes its engines with it
    for pool in list(_POOLS):
        pool.close()


# --- one point on one backend ------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One measurement the lab asks for: a curve of a setting, at one batch."""

    settings: Settings
    method: str
    batch_size: int
    threshold: int | None = None  # adaptive and routed: the largest batch that speculates
    threshold_source: str = ""

    @property
    def label(self) -> str:
        from .points import series_label

        return f"{series_label(self.method, self.settings.k)} at batch {self.batch_size}"


# One point flows one way: resolve(point) -> PointPlan (engine config and workload, decided once)
# -> measure_local / measure_remote -> Measurement -> the lab stores it -> the charts read the store.
@dataclass(frozen=True)
class PointPlan:
    """Everything one point needs, decided before anything starts: which engine serves it, on which prompts."""

    point: Point
    workload: PromptSet  # loaded once, here; every later step is handed this value
    config: EngineConfig | None  # the engine that serves this batch (routed: the side the threshold picks); None remote
    keep: tuple[EngineConfig, ...] = ()  # routed: the other side, not stopped to make room for this one
    threshold: Threshold | None = None  # routed: the largest batch that goes to the speculating side
    router: Router | None = None  # routed on this machine: describes the record as the router's (both sides)

    @property
    def label(self) -> str:
        return self.point.label

    def check(self) -> None:
        """Raise EngineConfigError if this point cannot run on this machine's engine (before a 40-second start)."""
        from ...measure import check_point

        if self.config is None:
            return
        self.config.check_files()
        check_point(self.config, self.workload, self.point.batch_size, self.point.settings.output_len)


def resolve(point: Point) -> PointPlan:
    """The engine config and the loaded workload for one point (a bad workload name raises ValueError here)."""
    from ...workload import load

    s = point.settings
    workload = load(s.workload)
    if point.method != "routed":
        config = engine_config(s, point.method, point.threshold) if s.backend == "local" else None
        return PointPlan(point, workload, config)
    threshold = Threshold(point.threshold if point.threshold is not None else 0, point.threshold_source)
    if s.backend != "local":
        return PointPlan(point, workload, None, threshold=threshold)
    plain, spec = engine_config(s, "none"), engine_config(s, "ngram")
    serves, other = (spec, plain) if threshold.speculates(point.batch_size) else (plain, spec)
    # Only the side that serves this batch has to be running; the router only describes the record.
    return PointPlan(
        point, workload, serves, keep=(other,), threshold=threshold, router=Router(_Side(spec), _Side(plain), threshold)
    )


def measure_local(
    plan: PointPlan,
    pool: EnginePool,
    on_start: Callable[[str], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    on_phase=None,
) -> Measurement:
    """Measure one resolved point on this machine's engine, starting or reusing a warm one.

    on_start(what) is called before an engine starts, on_phase(phase, seconds, estimate) while it starts,
    on_ready() once the engine that serves the point runs.
    """
    from ...measure import measure_batch

    if plan.config is None:
        raise ValueError(f"{plan.label} runs on a remote server, not this machine's engine: use measure_remote.")
    engine = pool.get(plan.config, on_start, keep=plan.keep, on_phase=on_phase)
    if on_ready:
        on_ready()
    s, batch_size = plan.point.settings, plan.point.batch_size
    record, _ = measure_batch(engine, plan.workload, batch_size, s.output_len, note="lab")
    return plan.router.relabel(record, batch_size) if plan.router else record


class _Side:
    """One side of the router, as the record describes it: its engine config (the engine itself is in the pool)."""

    def __init__(self, config: EngineConfig):
        self.config = config


def measure_remote(plan: PointPlan, timeout_s: float = 30.0) -> Measurement:
    """Measure one resolved point on the two remote servers (speculation off / on), by concurrency."""
    from ...remote import RemoteServer

    point = plan.point
    s, batch_size = point.settings, point.batch_size
    if point.method == "none":  # only the plain server's URL is needed
        return RemoteServer(s.remote_off_url, timeout_s=timeout_s).measure(
            plan.workload, batch_size, s.output_len, note="lab"
        )
    # The server cannot say how it speculates: the method control names it (routed: an n-gram server).
    spec = RemoteServer(
        s.remote_on_url,
        method="ngram" if plan.threshold is not None else point.method,
        num_speculative_tokens=s.k,
        timeout_s=timeout_s,
    )
    if plan.threshold is None:
        return spec.measure(plan.workload, batch_size, s.output_len, note="lab")
    plain = RemoteServer(s.remote_off_url, timeout_s=timeout_s)
    router = Router(spec, plain, plan.threshold)
    record = router.target_for(batch_size).measure(plan.workload, batch_size, s.output_len, note="lab")
    return router.relabel(record, batch_size)
