"""Collection: what a student handed in, taken as hostile, before any nbgrader command sees it.

    handed_in = collection.gather(folder, assignment.notebook)   # DIR/<student>.ipynb and DIR/*.zip

A hand-in is taken only when it is a regular file, read without following links
and without blocking, of at most MAX_NOTEBOOK_BYTES, with one name (a hard link
is refused: it may name a file the grader can read and the student cannot), under
a student id of one safe alphabet (STUDENT_ID: letters and digits, single
underscores between them). No glob character, leading dash or space ever reaches a
command line, so nbgrader's `--student` (a glob) names one student.

Zip archives (an LMS export) are read entry by entry, never extracted by path:
an absolute name, `..`, a link or device entry, an encrypted or oversized entry
is refused. Everything refused belongs to the student it names (status "refused",
the reason, a flag); the rest of the class is graded.

`SafeExchangeCollect` applies the same rules to `nbgrader collect` on a class hub,
whose exchange inbound every student can write: configure it with
`c.ExchangeFactory.collect = "servelab.grading.collection.SafeExchangeCollect"`.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect

STUDENT_ID = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")  # a subset of grading/nbgrader_config.py's named_regexp
MAX_STUDENT_ID = 64
MAX_NOTEBOOK_BYTES = 20 * 2**20  # one notebook with its outputs; plots included, this is generous
MAX_ARCHIVE_BYTES = 512 * 2**20  # one LMS export
MAX_ARCHIVE_ENTRIES = 10_000
MAX_TREE_BYTES = 100 * 2**20  # one hand-in folder in a hub's exchange
MAX_TREE_FILES = 200
NAME_RULE = "letters and digits, with single underscores between them, at most 64 characters"


class Refused(ValueError):
    """A hand-in the grader does not take; the message says why and what to do."""


@dataclass
class HandedIn:
    """One student's hand-in: the notebook's bytes, or why it was refused."""

    student: str  # as handed in (printable only after `shown`)
    data: bytes | None = None
    reason: str = ""  # set when refused

    @property
    def refused(self) -> bool:
        return self.data is None


def student_id_problem(student: str) -> str | None:
    """Why `student` cannot be a student id, or None when it can."""
    if len(student) > MAX_STUDENT_ID or not STUDENT_ID.fullmatch(student):
        return (f"the name {shown(student)} is not a student id ({NAME_RULE}); "
                "rename the file to <student id>.ipynb and grade again")
    return None


def check_student_id(student: str) -> str:
    """`student`, or Refused: the one check before a student id goes on any command line."""
    problem = student_id_problem(student)
    if problem:
        raise Refused(problem)
    return student


def shown(name: str) -> str:
    """A file name as it can be printed: quoted, control characters escaped, cut at 80 characters."""
    text = ascii(name[:80])
    return text + ("..." if len(name) > 80 else "")


def _kind(mode: int) -> str:
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a folder" if stat.S_ISDIR(mode) else "not a regular file")


def read_regular(path: str | Path, cap: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of `path` if it is a regular file with one name and at most `cap` bytes, else Refused.

    lstat first (a link is never followed, a FIFO or device never opened), then
    open with O_NOFOLLOW | O_NONBLOCK and check the open file is the one looked at,
    so a name swapped for a link or a pipe in between is refused, not followed.
    """
    try:
        before = os.lstat(path)
    except OSError as exc:
        raise Refused(f"it could not be looked at ({exc.strerror})") from None
    if not stat.S_ISREG(before.st_mode):
        raise Refused(f"it is {_kind(before.st_mode)}, not a file: hand in the notebook itself")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise Refused(f"it could not be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise Refused("it changed while it was being read: hand it in again")
        if st.st_nlink != 1:
            raise Refused(f"it is a hard link ({st.st_nlink} names for one file): hand in a copy of the notebook")
        if st.st_size > cap:
            raise Refused(f"it is larger than {cap:,} bytes ({st.st_size:,}): clear large outputs and hand it in again")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise Refused(f"it grew past {cap:,} bytes while it was being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _entry_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip entry is not taken, or None."""
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or "\0" in name:
        return "its path in the archive is absolute"
    if ".." in parts:
        return "its path in the archive leaves the archive's folder (..)"
    mode = info.external_attr >> 16
    if mode and not stat.S_ISREG(mode):
        return f"it is {_kind(mode)} in the archive, not a file"
    if info.flag_bits & 0x1:
        return "it is encrypted in the archive"
    if info.file_size > MAX_NOTEBOOK_BYTES:
        return f"it is larger than {MAX_NOTEBOOK_BYTES:,} bytes ({info.file_size:,})"
    return None


def _archive_student(name: str, notebook: str) -> str:
    """The student an archive entry names: <student>.ipynb or the LMS form <student>__<notebook>."""
    base = name.replace("\\", "/").rstrip("/").split("/")[-1]
    for suffix in (f"__{notebook}", ".ipynb"):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def _from_archive(path: Path, notebook: str) -> list[HandedIn]:
    try:
        data = read_regular(path, MAX_ARCHIVE_BYTES)
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (Refused, zipfile.BadZipFile, OSError, ValueError) as exc:
        return [HandedIn(path.stem, reason=f"the archive {shown(path.name)} was not read: {exc}")]
    if len(entries) > MAX_ARCHIVE_ENTRIES:
        return [HandedIn(path.stem, reason=f"the archive {shown(path.name)} holds more than {MAX_ARCHIVE_ENTRIES:,} entries")]
    found = []
    for info in entries:
        if info.is_dir() and not (info.external_attr >> 16 and stat.S_ISLNK(info.external_attr >> 16)):
            continue
        if not info.filename.endswith(".ipynb") and not stat.S_ISLNK(info.external_attr >> 16):
            continue
        student = _archive_student(info.filename, notebook)
        problem = _entry_problem(info) or student_id_problem(student)
        if problem:
            found.append(HandedIn(student, reason=f"{shown(info.filename)} in {shown(path.name)}: {problem}"))
            continue
        try:
            with archive.open(info) as f:
                content = f.read(MAX_NOTEBOOK_BYTES + 1)  # the sizes in the header can lie; this cap cannot
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
            found.append(HandedIn(student, reason=f"{shown(info.filename)} in {shown(path.name)} was not read: {exc}"))
            continue
        if len(content) > MAX_NOTEBOOK_BYTES:
            found.append(HandedIn(student, reason=f"{shown(info.filename)} in {shown(path.name)} unpacks to more "
                                                  f"than {MAX_NOTEBOOK_BYTES:,} bytes"))
            continue
        found.append(HandedIn(student, content))
    return found


def gather(folder: Path, notebook: str) -> list[HandedIn]:
    """Every hand-in in `folder` (<student>.ipynb files and .zip archives), taken or refused, by student."""
    found: list[HandedIn] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.endswith(".zip"):
            found += _from_archive(Path(entry.path), notebook)
        elif entry.name.endswith(".ipynb"):
            student = entry.name[: -len(".ipynb")]
            try:
                check_student_id(student)
                found.append(HandedIn(student, read_regular(entry.path)))
            except Refused as exc:
                found.append(HandedIn(student, reason=f"{shown(entry.name)}: {exc}"))
    by_student: dict[str, list[HandedIn]] = {}
    for h in found:
        by_student.setdefault(h.student, []).append(h)
    out = []
    for student, hands in sorted(by_student.items()):
        if len(hands) == 1:
            out.append(hands[0])
        else:  # which one counts is not the grader's guess to make
            what = "; ".join(h.reason or "a notebook" for h in hands)
            out.append(HandedIn(student, reason=f"handed in {len(hands)} times ({what}): keep one and grade again"))
    return out


def copy_tree(src: str | Path, dest: str | Path) -> list[str]:
    """Copy a hand-in folder's regular files (and plain subfolders) only; what was left out, and why.

    Links are not followed, FIFOs, sockets and devices never opened, hard links
    and names outside the safe alphabet refused, the total capped.
    """
    src, dest = Path(src), Path(dest)
    left_out: list[str] = []
    total = files = 0
    top = os.lstat(src)
    if not stat.S_ISDIR(top.st_mode):
        raise Refused(f"{shown(src.name)} is {_kind(top.st_mode)}, not a hand-in folder")
    dest.mkdir(parents=True, exist_ok=True)
    stack = [Path(".")]
    while stack:
        rel = stack.pop()
        for entry in sorted(os.scandir(src / rel), key=lambda e: e.name):
            name = rel / entry.name
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", entry.name):
                left_out.append(f"{shown(str(name))}: a file name outside {NAME_RULE.split(',')[0]}, '.', '-'")
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                (dest / name).mkdir(exist_ok=True)
                stack.append(name)
                continue
            try:
                data = read_regular(src / name, min(MAX_NOTEBOOK_BYTES, MAX_TREE_BYTES - total))
            except Refused as exc:
                left_out.append(f"{shown(str(name))}: {exc}")
                continue
            files += 1
            total += len(data)
            if files > MAX_TREE_FILES:
                left_out.append(f"{shown(str(name))}: more than {MAX_TREE_FILES} files in one hand-in")
                continue
            target = os.open(dest / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(target, "wb") as f:
                f.write(data)
    return left_out


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect from the exchange, taking only what `copy_tree` takes, from safe student ids."""

    def init_src(self):
        super().init_src()
        kept = []
        for record in self.src_records:
            problem = student_id_problem(record["username"])
            if problem is None:
                mode = os.lstat(os.path.join(self.inbound_path, record["filename"])).st_mode
                if not stat.S_ISDIR(mode):
                    problem = f"{shown(record['filename'])} is {_kind(mode)}, not a hand-in folder"
            if problem:
                self.log.error("Not collected: %s", problem)
                continue
            kept.append(record)
        self.src_records = kept

    def do_copy(self, src, dest, log=None):
        for why in copy_tree(src, dest):
            self.log.warning("Not collected from %s: %s", shown(os.path.basename(src)), why)
