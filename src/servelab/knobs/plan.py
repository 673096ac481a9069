"""Step 1: a knob's setting, the dataset and the load resolved once into a Plan: the server's command line
and what the benchmark sends it. Nothing starts here; a setting that cannot run is refused with what can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalogue import BASE_ARGS, KNOBS, BenchDataset, KnobError, Load, setting_changes, workloads


@dataclass(frozen=True)
class Plan:
    """Everything one measurement needs, decided before anything starts."""

    knob: str
    setting: str
    server_args: tuple[str, ...]
    workload: BenchDataset
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
    changes = setting_changes(knob, setting)
    wls = workloads()
    name = workload or KNOBS[knob].workload
    if name not in wls:
        raise KnobError(f"No workload named {name!r}: choose one of {', '.join(wls)}.")
    load = load or KNOBS[knob].load
    if load.num_prompts < 1 or load.output_len < 1:
        raise KnobError("A load needs at least one request of at least one output token.")
    if load.request_rate is not None and not (load.request_rate > 0 and math.isfinite(load.request_rate)):
        raise KnobError(
            f"request_rate must be a positive number of requests per second, not {load.request_rate}; "
            "leave it empty to send every request at once."
        )
    if load.max_concurrency is not None and load.max_concurrency < 1:
        raise KnobError(f"max_concurrency (users) must be at least 1, not {load.max_concurrency}.")
    return Plan(knob, setting, server_args(changes), wls[name], load)
