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
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from ..engine import Engine, EngineConfig
from ..measurement import Measurement
from ..routing import Router, Threshold
from ..workload import Workload
from .data import Settings, adaptive_schedule

POOL_SIZE = 2
MAX_NUM_SEQS = 256  # the largest batch on the slider: a batch never restarts the engine
START_SECONDS = 40  # what the status line promises for a start on 2 cores (eager mode)


def engine_config(settings: Settings, method: str, threshold: int | None = None) -> EngineConfig:
    """The EngineConfig that measures `method` for these settings (routed is not one engine: see Router)."""
    common = dict(model=settings.model, max_num_seqs=MAX_NUM_SEQS, kv_cache_gb=settings.kv_cache_gb)
    if method == "none":
        return EngineConfig(**common)
    if method == "ngram":
        return EngineConfig(spec_method="ngram", num_speculative_tokens=settings.k, **common)
    if method == "draft_model":
        return EngineConfig(spec_method="draft_model", num_speculative_tokens=settings.k,
                            draft_model=settings.draft_model, **common)
    if method == "adaptive":
        if threshold is None:
            raise ValueError("load-adaptive speculation needs the batch where k drops to 0 (threshold).")
        return EngineConfig(spec_method="ngram", num_speculative_tokens=settings.k,
                            num_speculative_tokens_per_batch_size=adaptive_schedule(settings.k, threshold), **common)
    raise ValueError(f"No single engine measures method {method!r}.")


def describe(config: EngineConfig) -> str:
    if config.spec_method == "none":
        return "no speculation"
    if config.num_speculative_tokens_per_batch_size:
        return f"load-adaptive n-gram k={config.num_speculative_tokens}"
    return f"{config.spec_method.replace('_', ' ')} k={config.num_speculative_tokens}"


class EnginePool:
    """Started engines by config, at most `size` of them; the least recently used one is stopped for a new one."""

    def __init__(self, size: int = POOL_SIZE, engine_factory: Callable[[EngineConfig], Engine] = Engine):
        self.size = size
        self.engine_factory = engine_factory
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._lock = threading.RLock()
        _POOLS.add(self)

    def get(self, config: EngineConfig, on_start: Callable[[str], None] | None = None,
            keep: tuple[EngineConfig, ...] = ()) -> Engine:
        """A started engine for config: warm if there is one, else started now (about 40 s on 2 cores).

        An engine whose worker died (killed, crashed) is started again here.
        `keep` names configs that must not be stopped to make room (routing needs two at once).
        """
        from ..measure import attach_roofline, warm_up

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
            engine.start()
            warm_up(engine)
            attach_roofline(engine)
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
        from .data import series_label

        return f"{series_label(self.method, self.settings.k)} at batch {self.batch_size}"


# One point flows one way: resolve(point) -> PointPlan (engine config and workload, decided once)
# -> measure_local / measure_remote -> Measurement -> the lab stores it -> the charts read the store.
@dataclass(frozen=True)
class PointPlan:
    """Everything one point needs, decided before anything starts: which engine serves it, on which prompts."""

    point: Point
    workload: Workload  # loaded once, here; every later step is handed this value
    config: EngineConfig | None  # the engine that serves this batch (routed: the side the threshold picks); None remote
    keep: tuple[EngineConfig, ...] = ()  # routed: the other side, not stopped to make room for this one
    threshold: Threshold | None = None  # routed: the largest batch that goes to the speculating side
    router: Router | None = None  # routed on this machine: describes the record as the router's (both sides)

    @property
    def label(self) -> str:
        return self.point.label

    def check(self) -> None:
        """Raise EngineConfigError if this point cannot run on this machine's engine (before a 40-second start)."""
        from ..measure import check_point

        if self.config is None:
            return
        self.config.check_files()
        check_point(self.config, self.workload, self.point.batch_size, self.point.settings.output_len)


def resolve(point: Point) -> PointPlan:
    """The engine config and the loaded workload for one point (a bad workload name raises ValueError here)."""
    from ..workload import load

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
    return PointPlan(point, workload, serves, keep=(other,), threshold=threshold,
                     router=Router(_Side(spec), _Side(plain), threshold))


def measure_local(plan: PointPlan, pool: EnginePool, on_start: Callable[[str], None] | None = None,
                  on_ready: Callable[[], None] | None = None) -> Measurement:
    """Measure one resolved point on this machine's engine, starting or reusing a warm one.

    on_start(what) is called before an engine starts, on_ready() once the engine that serves the point runs.
    """
    from ..measure import measure_batch

    engine = pool.get(plan.config, on_start, keep=plan.keep)
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
    from ..remote import RemoteServer

    point = plan.point
    s, batch_size = point.settings, point.batch_size
    if point.method == "none":  # only the plain server's URL is needed
        return RemoteServer(s.remote_off_url, timeout_s=timeout_s).measure(
            plan.workload, batch_size, s.output_len, note="lab")
    # The server cannot say how it speculates: the method control names it (routed: an n-gram server).
    spec = RemoteServer(s.remote_on_url, method="ngram" if plan.threshold is not None else point.method,
                        num_speculative_tokens=s.k, timeout_s=timeout_s)
    if plan.threshold is None:
        return spec.measure(plan.workload, batch_size, s.output_len, note="lab")
    plain = RemoteServer(s.remote_off_url, timeout_s=timeout_s)
    router = Router(spec, plain, plan.threshold)
    record = router.target_for(batch_size).measure(plan.workload, batch_size, s.output_len, note="lab")
    return router.relabel(record, batch_size)
