"""Append-only JSONL store of measurements, safe against crashes and concurrent kernels.

Each record is one line, written whole under an exclusive lock, flushed and
fsynced before the call returns. A torn last line (a process killed mid-write)
is skipped with a warning when read, never raised.
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from pathlib import Path
from typing import Iterable, Iterator

from . import paths


class ResultsStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else paths.results_path()

    def append(self, record) -> None:
        """Append one record (a Measurement or a dict) durably."""
        self.extend([record])

    def extend(self, records: Iterable) -> None:
        lines = [json.dumps(_as_dict(r), sort_keys=True) + "\n" for r in records]
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A writer killed mid-line leaves no newline; start on a fresh line so
            # the torn record stays one bad line instead of corrupting ours.
            if os.fstat(fd).st_size and not _ends_with_newline(self.path):
                os.write(fd, b"\n")
            os.write(fd, "".join(lines).encode())
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.read())

    def read(self) -> list[dict]:
        """All whole records; torn or corrupt lines are skipped with a warning."""
        if not self.path.exists():
            return []
        records = []
        with open(self.path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    records.append(json.loads(raw))
                except (json.JSONDecodeError, UnicodeDecodeError):
                    warnings.warn(f"{self.path}:{number}: skipped a damaged record (torn write?)", stacklevel=2)
        return records

    def find(self, **match) -> list[dict]:
        """Records whose fields equal every given value."""
        return [r for r in self.read() if all(r.get(k) == v for k, v in match.items())]


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _as_dict(record) -> dict:
    if isinstance(record, dict):
        return record
    return record.to_dict()
