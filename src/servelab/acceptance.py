"""From vLLM's speculative-decoding counters to the lesson's acceptance rate a, E and the break-even batch.

vLLM counts, for each verify step, one draft (num_drafts), the k draft tokens it proposed
(num_draft_tokens) and the ones the target model accepted (num_accepted_tokens). It reports two ratios:

    draft acceptance rate  = accepted / drafted      (a Measurement's acceptance_rate)
    mean acceptance length = 1 + accepted / drafts   (E: tokens a sequence gains per verify step)

The lesson's a (Leviathan et al., 2022) is the chance that one draft token is accepted given that the
ones before it were, and E follows from it:

    E = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a)

so a is the root of that equation for the measured E. It is higher than vLLM's ratio: the ratio counts
the drafts discarded after an earlier rejection as failures, a counts only the drafts that were judged.
Past the ridge a verify step of B(k + 1) tokens keeps E of each sequence's k + 1 positions, so
speculation breaks even near ridge tokens x E / (k + 1) sequences (the lesson's item 4 box).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab import hardware as hardware_mod
from servelab.hardware import DTYPE_BYTES, Hardware

BISECTION_STEPS = 60  # halves [0, 1] to below 1e-15: far finer than any counter can resolve


def expected_tokens(a: float, k: int) -> float:
    """E = (1 - a^(k+1)) / (1 - a): tokens per verify step for per-token acceptance a and k drafts."""
    return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def per_token_acceptance(mean_acceptance_length: float, k: int) -> float:
    """The a whose E equals the measured mean acceptance length (E rises with a, so bisect)."""
    if k < 1:
        raise ValueError(f"num_speculative_tokens must be 1 or more to have an acceptance rate, not {k}.")
    if not 1.0 <= mean_acceptance_length <= k + 1:
        raise ValueError(
            f"a mean acceptance length with k = {k} lies between 1 and {k + 1}, not "
            f"{mean_acceptance_length}: check that the record's k matches its counters."
        )
    low, high = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        mid = (low + high) / 2
        low, high = (mid, high) if expected_tokens(mid, k) < mean_acceptance_length else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class Acceptance:
    """One speculative record's acceptance, in vLLM's terms and in the lesson's."""

    batch_size: int
    num_speculative_tokens: int  # k
    draft_acceptance_rate: float  # vLLM: accepted / drafted
    mean_acceptance_length: float  # vLLM: 1 + accepted / drafts = E
    acceptance_rate: float  # the lesson's a, per draft token given the ones before it
    ridge_tokens_per_step: float  # where this hardware's step turns compute-bound
    break_even_batch: float  # ridge tokens x E / (k + 1)


def from_record(record: dict, hw: Hardware | None = None) -> Acceptance | None:
    """A record's acceptance, or None for a record without speculation counters.

    hw: the hardware to place the break-even on; by default the roofline measured with the record
    (a CPU run carries it) or the named GPU.
    """
    k = int(record.get("num_speculative_tokens") or 0)
    rate, length = record.get("acceptance_rate"), record.get("mean_acceptance_length")
    if k < 1:
        return None
    if length is not None:
        length = float(length)
        rate = float(rate) if rate is not None else (length - 1.0) / k
    elif rate is not None:
        rate = float(rate)
        length = 1.0 + k * rate
    else:
        return None
    a = per_token_acceptance(length, k)
    hw = hw or _record_hardware(record)
    ridge = hw.ridge_tokens_per_step(DTYPE_BYTES.get(record.get("dtype") or hw.dtype, DTYPE_BYTES[hw.dtype]))
    return Acceptance(
        batch_size=int(record.get("batch_size") or 0),
        num_speculative_tokens=k,
        draft_acceptance_rate=rate,
        mean_acceptance_length=length,
        acceptance_rate=a,
        ridge_tokens_per_step=ridge,
        break_even_batch=ridge * length / (k + 1),
    )


def from_records(records, hw: Hardware | None = None) -> list[Acceptance]:
    """Every speculative record's acceptance, in the records' order."""
    return [acc for acc in (from_record(r, hw) for r in records) if acc is not None]


def _record_hardware(record: dict) -> Hardware:
    if record.get("roofline"):
        return hardware_mod.from_dict(record["roofline"])
    try:
        return hardware_mod.get(record.get("hardware") or "")
    except hardware_mod.UnknownHardware as exc:
        raise ValueError(
            f"the record names no roofline and its hardware {record.get('hardware')!r} is not a "
            "known GPU: pass hw=hardware.get('H200') (or this_machine()) to place the break-even."
        ) from exc


def table(accs: list[Acceptance]) -> str:
    """The acceptances as a small text table, one line per record."""
    head = "batch  k  vLLM accepted/drafted  E (mean length)  a (lesson)  ridge tok/step  break-even batch"
    rows = [
        f"{x.batch_size:5d} {x.num_speculative_tokens:2d} {x.draft_acceptance_rate:22.2f} "
        f"{x.mean_acceptance_length:16.2f} {x.acceptance_rate:11.3f} {x.ridge_tokens_per_step:15.1f} "
        f"{x.break_even_batch:17.1f}"
        for x in accs
    ]
    return "\n".join([head] + rows)
