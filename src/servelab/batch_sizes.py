"""One way to write a list of batch sizes, for every command that takes one.

    1,2,4,8          the batch sizes, comma separated
    1,2,4,...,256    '...' continues the ratio of the two before it up to the one after: 1, 2, 4, 8, ..., 256

`servelab sweep --batch` reads its list here; a command that takes batch sizes reads them with
parse_batch_sizes (or batch_sizes_arg, its argparse type), so the same list means the same batches everywhere.
"""

from __future__ import annotations

import argparse

EXAMPLE = "1,2,4,...,256"


def parse_batch_sizes(text: str) -> list[int]:
    """'1,2,4,...,256' -> [1, 2, 4, ..., 256]; ValueError says what is allowed."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    out: list[float] = []
    for i, part in enumerate(parts):
        if part == "...":
            if len(out) < 2 or i + 1 >= len(parts):
                raise ValueError(f"'...' needs two batch sizes before it and one after: {EXAMPLE}")
            ratio, end = out[-1] / out[-2], _whole(parts[i + 1], text)
            if ratio <= 1:
                raise ValueError(f"the batch sizes before '...' must grow: {EXAMPLE}")
            while out[-1] * ratio < end:
                out.append(out[-1] * ratio)
        else:
            out.append(_whole(part, text))
    if not out:
        raise ValueError(f"no batch sizes in {text!r}: write them comma separated, like 1,2,4,8 or {EXAMPLE}")
    return [int(round(b)) for b in out]


def _whole(part: str, text: str) -> int:
    try:
        value = int(part)
    except ValueError:
        raise ValueError(
            f"expected comma-separated whole numbers, like 1,2,4,8 or {EXAMPLE}; {part!r} in {text!r} is not one"
        ) from None
    if value < 1:
        raise ValueError(f"batch sizes must be whole numbers of at least 1; {part!r} in {text!r} is not")
    return value


def batch_sizes_arg(text: str) -> list[int]:
    """parse_batch_sizes as an argparse type: a list argparse refuses says the same as the ValueError."""
    try:
        return parse_batch_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
