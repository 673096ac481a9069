"""Prompt sets to measure on: copy-heavy (n-gram drafts hit) and open-ended (few hits)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import paths

ALIASES = {"copy": "copy", "copy-heavy": "copy", "open": "open", "open-ended": "open"}


@dataclass(frozen=True)
class PromptSet:
    """A named set of prompts; a batch takes the first ones."""

    name: str
    prompts: tuple[str, ...]

    def batch(self, batch_size: int) -> list[str]:
        """The first batch_size prompts, cycling when the set is smaller than the batch."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}.")
        return [self.prompts[i % len(self.prompts)] for i in range(batch_size)]


def names() -> list[str]:
    return sorted({v for v in ALIASES.values()})


@lru_cache(maxsize=None)
def load(name: str) -> PromptSet:
    """Load a workload by name ('copy', 'open') or from a JSONL path."""
    key = ALIASES.get(name)
    path = paths.data_dir() / "workloads" / f"{key}.jsonl" if key else Path(name)
    if not path.is_file():
        raise ValueError(
            f"Unknown workload {name!r}. Use one of: {', '.join(names())}, or a path to a JSONL "
            'file with one {"prompt": ...} object per line.'
        )
    prompts = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    prompts.append(json.loads(line)["prompt"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise ValueError(
                        f'{path}:{number}: each line must be a JSON object with a "prompt" field.'
                    ) from None
    if not prompts:
        raise ValueError(f"{path} holds no prompts.")
    return PromptSet(key or path.stem, tuple(prompts))
