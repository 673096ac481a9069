"""Collection: what a student handed in, taken as hostile, before any nbgrader command sees it.

    handed_in = collection.gather(folder, assignment.notebook)   # DIR/<student>.ipynb and DIR/*.zip

A hand-in is taken only when it is a regular file, read without following links
and without blocking, of at most MAX_NOTEBOOK_BYTES, with one name (a hard link
is refused: it may name a file the grader can read and the student cannot), under
a student id of one safe alphabet (STUDENT_ID: letters and digits, single
underscores, dots or hyphens between them). No glob character, leading dash or space ever reaches a
command line, so nbgrader's `--student` (a glob) names one student.

Zip archives (an LMS export) are read entry by entry, never extracted by path:
an absolute name, `..`, a link or device entry, an encrypted or oversized entry
is refused; an entry with no file type in its mode (zipfile.writestr) is a file.
An archive never displaces or refuses a student who handed in their own notebook
(see `gather`). What travels beside hand-ins is no student's and is passed over
(`is_extra`): hidden files and folders (Jupyter's `.ipynb_checkpoints/`, macOS's `._*`
and `__MACOSX/`, LibreOffice's `.~lock.*#`), editor backups (`~`, `.bak`, `.swp`) and Office's
lock files (`~$*`). JupyterLab's Duplicate and "Save a copy" name a copy `<name>-Copy<N>.ipynb`
(COPY_NAME): beside `<name>.ipynb` it is the same student's extra, passed over with a note in the log
(`gather`'s `notes`); alone it is graded under its own name, with the note. What is taken must be a
notebook (`notebook_problem`), within MAX_CELLS cells and MAX_OUTPUTS outputs, its
markdown and raw cells at most MAX_TEXT_CELL_CHARS each, so the count of cells never
costs the grader minutes (the page's drawing time is bounded per student by the
pipeline's feedback time limit). Everything
refused belongs to the student it names, or to the archive (status "refused",
the reason, a flag); the rest of the class is graded.

`SafeExchangeCollect` applies the same rules to `nbgrader collect` on a class hub,
whose exchange inbound every student can write: configure it with
`c.ExchangeFactory.collect = "servelab.grading.collection.SafeExchangeCollect"`.
"""

from __future__ import annotations

import datetime
import io
import itertools
import json
import os
import pwd
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import check_directory, check_mode, parse_utc

# Login names as a hub makes them (sl-ana, a.smith, b_k): no leading separator, no two in a row (so no "__",
# which zip_collect's file names use, and no ".."), nothing a glob or an option parser reads.
STUDENT_ID = re.compile(r"[A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)*")  # a subset of grading/nbgrader_config.py's named_regexp
MAX_STUDENT_ID = 64
MAX_NOTEBOOK_BYTES = 20 * 2**20  # one notebook with its outputs; plots included, this is generous
MAX_ARCHIVE_BYTES = 512 * 2**20  # one LMS export
MAX_ARCHIVE_ENTRIES = 10_000
MAX_TREE_BYTES = 100 * 2**20  # one hand-in folder in a hub's exchange
MAX_TREE_FILES = 200
MAX_NOTEBOOK_DEPTH = 200  # JSON nesting of a whole notebook; json.loads recurses per level
MAX_TREE_DEPTH = 8  # folders inside a hand-in folder
MAX_FOLDER_ENTRIES = 1_000  # names listed from one folder: a million empty files cost no more than this
# A lesson has about 100 cells of at most a few thousand characters; each cell costs nbgrader and the
# feedback page time, so a notebook of 200,000 tiny cells is refused here, not run.
MAX_CELLS = 2_000
# One markdown or raw cell, drawn whole on the feedback page (the lesson's longest is about 4,400 characters).
# Code cells are bounded by the notebook's size and the integrity scan's own cap instead.
MAX_TEXT_CELL_CHARS = 200_000
MAX_OUTPUTS = 5_000  # outputs handed in, across the notebook (autograde replaces them; the page draws them)
EXTRA_SUFFIXES = ("~", ".bak", ".swp", ".swo", ".orig", ".tmp")  # editors' backups and swap files
EXTRA_PREFIXES = (".", "~$")  # hidden (LibreOffice's .~lock.<name>#), Office's lock files
COPY_NAME = re.compile(r"(.+)-Copy\d{1,4}")  # JupyterLab's Duplicate / Save a copy: <name>-Copy<N>.ipynb
NAME_RULE = "letters and digits, with single underscores, dots or hyphens between them, at most 64 characters"


class Refused(ValueError):
    """A hand-in the grader does not take; the message says why and what to do."""


@dataclass
class HandedIn:
    """One student's hand-in: the notebook's bytes, or why it was refused."""

    student: str  # as handed in (printable only after `shown`)
    data: bytes | None = None
    reason: str = ""  # set when refused
    via: str = ""  # the archive it came from, when it came from one

    @property
    def refused(self) -> bool:
        return self.data is None


def student_id_problem(student: str) -> str | None:
    """Why `student` cannot be a student id, or None when it can."""
    if len(student) > MAX_STUDENT_ID or not STUDENT_ID.fullmatch(student):
        return (
            f"the name {shown(student)} is not a student id ({NAME_RULE}); "
            "rename the file to <student id>.ipynb and grade again"
        )
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


def is_extra(name: str) -> bool:
    """Whether a name in a class folder or an archive is something that travels beside hand-ins and is nobody's
    (a hidden file or folder anywhere on its path, `__MACOSX/`, an editor's backup), never a student."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return any(p.startswith(EXTRA_PREFIXES) or p == "__MACOSX" for p in parts) or name.endswith(EXTRA_SUFFIXES)


def _kind(mode: int) -> str:
    return (
        "a symbolic link"
        if stat.S_ISLNK(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a folder"
        if stat.S_ISDIR(mode)
        else "not a regular file"
    )


def read_regular(path: str | Path, cap: int = MAX_NOTEBOOK_BYTES, dir_fd: int | None = None) -> bytes:
    """The bytes of `path` if it is a regular file with one name and at most `cap` bytes, else Refused.

    lstat first (a link is never followed, a FIFO or device never opened), then
    open with O_NOFOLLOW | O_NONBLOCK and check the open file is the one looked at,
    so a name swapped for a link or a pipe in between is refused, not followed.
    With `dir_fd`, `path` is one name in that open folder, so no path is resolved again.
    """
    try:
        before = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise Refused(f"it could not be looked at ({exc.strerror})") from None
    if not stat.S_ISREG(before.st_mode):
        raise Refused(f"it is {_kind(before.st_mode)}, not a file: hand in the notebook itself")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
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


def notebook_problem(data: bytes) -> str | None:
    """Why `data` is not a notebook nbgrader can grade, or None.

    Checked at collection, so a malformed hand-in is refused for its student alone
    instead of failing in autograde: JSON read with bounds (trusted.read_answer's
    depth check), nbformat's schema, and grade ids that are text.
    """
    from servelab.grading.trusted import Unreadable, read_answer  # trusted imports nbgrader's preprocessors

    try:
        nb = read_answer(data.decode("utf-8"), cap=MAX_NOTEBOOK_BYTES, max_depth=MAX_NOTEBOOK_DEPTH, constants=True)
    except UnicodeDecodeError:
        return "it is not UTF-8 text, so not a notebook: hand in the .ipynb file Jupyter saved"
    except Unreadable as exc:
        return f"it is not a notebook ({exc}): hand in the .ipynb file Jupyter saved"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return "it is JSON but not a notebook (no list of cells): hand in the .ipynb file Jupyter saved"
    if len(nb["cells"]) > MAX_CELLS:
        return (
            f"it has {len(nb['cells']):,} cells, more than the {MAX_CELLS:,} the grader takes: "
            "start again from the released notebook"
        )
    cells = [c for c in nb["cells"] if isinstance(c, dict)]  # before the schema check, which is slow on many cells
    outputs = sum(len(c["outputs"]) for c in cells if isinstance(c.get("outputs"), list))
    if outputs > MAX_OUTPUTS:
        return f"it holds {outputs:,} outputs, more than {MAX_OUTPUTS:,}: clear the outputs and hand it in again"
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):  # nbformat stores a source as one string or a list of lines
            source = "".join(line for line in source if isinstance(line, str))
        size = len(source) if isinstance(source, str) else 0
        if size > MAX_TEXT_CELL_CHARS:
            return (
                f"cell {i + 1} holds {size:,} characters of text, more than the {MAX_TEXT_CELL_CHARS:,} one markdown "
                "cell may: "
                "shorten it and hand it in again"
            )
    try:
        nbformat.validate(nbformat.from_dict(nb))
    except Exception as exc:  # noqa: BLE001 - nbformat raises ValidationError and, on odd input, others
        what = str(getattr(exc, "message", exc)).splitlines()[0][:160]
        return f"it does not follow the notebook format ({what}): open it in Jupyter, save it and hand it in again"
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is not None and (not isinstance(meta, dict) or not isinstance(meta.get("grade_id", ""), str)):
            return (
                "a cell's nbgrader metadata was changed (its grade id is not text): "
                "start again from the released notebook, or restore the cell's metadata"
            )
    return None


def _entry_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip entry is not taken, or None."""
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or "\0" in name:
        return "its path in the archive is absolute"
    if ".." in parts:
        return "its path in the archive leaves the archive's folder (..)"
    mode = info.external_attr >> 16
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # type 0: permission bits only (zipfile.writestr), a file
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
    """The entries of one archive, each marked `via` the archive; a refusal of the whole archive is filed
    under the archive's file name, which is no student id, never under a student named inside it."""
    via = path.name
    try:
        data = read_regular(path, MAX_ARCHIVE_BYTES)
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (Refused, zipfile.BadZipFile, OSError, ValueError) as exc:
        return [HandedIn(via, reason=f"the archive {shown(via)} was not read: {exc}")]
    if len(entries) > MAX_ARCHIVE_ENTRIES:
        return [HandedIn(via, reason=f"the archive {shown(via)} holds more than {MAX_ARCHIVE_ENTRIES:,} entries")]
    found = []
    for info in entries:
        if info.is_dir() and not stat.S_ISLNK(info.external_attr >> 16):
            continue
        if is_extra(info.filename) and ".." not in info.filename.replace("\\", "/").split("/"):
            continue  # .ipynb_checkpoints/carol-checkpoint.ipynb, __MACOSX/._carol.ipynb: nobody's hand-in
        if not info.filename.endswith(".ipynb") and not stat.S_ISLNK(info.external_attr >> 16):
            continue
        student = _archive_student(info.filename, notebook)
        where = f"{shown(info.filename)} in {shown(via)}"
        problem = _entry_problem(info) or student_id_problem(student)
        if problem:
            found.append(HandedIn(student, reason=f"{where}: {problem}", via=via))
            continue
        try:
            with archive.open(info) as f:
                content = f.read(MAX_NOTEBOOK_BYTES + 1)  # the sizes in the header can lie; this cap cannot
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
            found.append(HandedIn(student, reason=f"{where} was not read: {exc}", via=via))
            continue
        if len(content) > MAX_NOTEBOOK_BYTES:
            found.append(
                HandedIn(student, reason=f"{where} unpacks to more than {MAX_NOTEBOOK_BYTES:,} bytes", via=via)
            )
            continue
        found.append(HandedIn(student, content, via=via))
    return found


def gather(folder: Path, notebook: str, notes: list[str] | None = None) -> list[HandedIn]:
    """Every hand-in in `folder` (<student>.ipynb files and .zip archives), taken or refused, by student.

    An archive is an LMS export: its entries name their students. A student's own
    <student>.ipynb always counts over an entry naming them, and that entry is refused
    as the archive's problem (a row under the archive's file name): whoever wrote an archive
    cannot displace or refuse a student who handed in. A student named by more than one
    entry and nothing of their own is refused, the reason naming each archive: which
    export is the real one is for the instructor to say.

    A JupyterLab copy (`<name>-Copy<N>`) of a student who is also handed in is passed over; one whose
    original is not there is graded under its own name. Either way `notes` (when given) says so.
    """
    found: list[HandedIn] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if is_extra(entry.name):
            continue  # .ipynb_checkpoints/, .DS_Store, carol.ipynb~: nobody's hand-in
        if entry.name.endswith(".zip"):
            found += _from_archive(Path(entry.path), notebook)
        elif entry.name.endswith(".ipynb"):
            student = entry.name[: -len(".ipynb")]
            try:
                check_student_id(student)
                found.append(HandedIn(student, read_regular(entry.path)))
            except Refused as exc:
                found.append(HandedIn(student, reason=f"{shown(entry.name)}: {exc}"))
    named = {h.student for h in found}
    kept = []
    for h in found:
        copy = COPY_NAME.fullmatch(h.student)
        if copy and copy.group(1) in named:
            where = f" in {shown(h.via)}" if h.via else ""
            if notes is not None:
                notes.append(
                    f"passed over {shown(h.student)}{where}: JupyterLab's copy of {shown(copy.group(1))}, "
                    "whose own notebook is graded (rename the copy to grade it instead)"
                )
            continue
        if copy and notes is not None:
            notes.append(
                f"graded {shown(h.student)} under its own name: it is named like JupyterLab's copy of "
                f"{shown(copy.group(1))}, who handed in nothing else; check whose it is"
            )
        kept.append(h)
    found = kept
    own = {h.student for h in found if not h.via}
    by_student: dict[str, list[HandedIn]] = {}
    for h in found:
        if h.via and h.student in own:
            by_student.setdefault(h.via, []).append(
                HandedIn(
                    h.via,
                    reason=(
                        f"the archive {shown(h.via)} holds a notebook for {shown(h.student)}, who handed in their own: "
                        "theirs is graded and the archive's entry is not; remove it from the archive"
                    ),
                )
            )
        else:
            by_student.setdefault(h.student, []).append(h)
    out = []
    for student, hands in sorted(by_student.items()):
        if len(hands) == 1:
            out.append(hands[0])
        elif all(h.refused and h.student == student and not h.via for h in hands) and student not in own:
            out.append(HandedIn(student, reason="; ".join(h.reason for h in hands)))  # an archive's own refusals
        else:  # which one counts is not the grader's guess to make
            what = "; ".join(h.reason or (f"an entry in {shown(h.via)}" if h.via else "a notebook") for h in hands)
            out.append(HandedIn(student, reason=f"handed in {len(hands)} times ({what}): keep one and grade again"))
    for h in out:
        problem = None if h.data is None else notebook_problem(h.data)
        if problem:
            h.data, h.reason = None, problem
    return out


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def copy_tree(src: str | Path, dest: str | Path) -> list[str]:
    """Copy a hand-in folder's regular files (and plain subfolders) only; what was left out, and why.

    Links are not followed, FIFOs, sockets and devices never opened, hard links
    and names outside the safe alphabet refused, the depth, the names listed per
    folder, the file count and the total capped. The walk holds each folder open
    and names children relative to it (dir_fd), so no path is resolved twice: a
    folder swapped for a link between the listing and the descent is refused, and
    a deep tree never makes a path too long.
    """
    return _walk(src, dest, strict=False)[0]


def copy_hand_in(src: str | Path, dest: str | Path | None) -> tuple[list[str], datetime.datetime]:
    """`copy_tree` for an exchange hand-in, and the latest ctime of exactly what it copied.

    The time is the latest ctime of every folder and file the walk took, each looked at
    as it was copied (a file after it was read too, so a write during the copy counts);
    nothing is taken whose time was not looked at. A hand-in past a cap (the names in a
    folder, the files, the bytes, the depth) is Refused whole, never copied in part.
    With `dest` None, the same walk reads and copies nothing out (the time a copy would have).
    """
    left_out, latest = _walk(src, dest, strict=True)
    return left_out, datetime.datetime.fromtimestamp(latest / 1e9, datetime.timezone.utc)


def _walk(src: str | Path, dest: str | Path | None, strict: bool) -> tuple[list[str], int]:
    src = Path(src)
    try:
        top = os.open(src, _DIR_FLAGS)
    except OSError as opening:
        try:
            mode = os.lstat(src).st_mode
        except OSError as exc:
            raise Refused(f"{shown(src.name)} is not readable ({exc.strerror}), not a hand-in folder") from None
        if stat.S_ISDIR(mode):  # a folder its student closed (chmod 700): theirs to hand in again
            raise Refused(
                f"{shown(src.name)} could not be opened ({opening.strerror}): hand in again, without changing "
                "the hand-in's permissions"
            ) from None
        raise Refused(f"{shown(src.name)} is {_kind(mode)}, not a hand-in folder") from None
    left_out: list[str] = []
    budget = {"files": 0, "bytes": 0, "latest": 0}
    try:
        if dest is None:
            _copy_folder(top, None, "", 0, budget, left_out, strict)
        else:
            Path(dest).mkdir(parents=True, exist_ok=True)
            out = os.open(dest, _DIR_FLAGS)
            try:
                _copy_folder(top, out, "", 0, budget, left_out, strict)
            finally:
                os.close(out)
    finally:
        os.close(top)
    return left_out, budget["latest"]


def _copy_folder(
    src_fd: int, dest_fd: int | None, rel: str, depth: int, budget: dict, left_out: list[str], strict: bool
) -> None:
    def over(why: str) -> None:
        if strict:
            raise Refused(f"{why}: a hand-in past the class's caps is not collected; hand in the notebook alone")
        left_out.append(why)

    budget["latest"] = max(budget["latest"], os.fstat(src_fd).st_ctime_ns)
    names: list[str] = []
    with os.scandir(src_fd) as listing:
        for entry in listing:
            if len(names) == MAX_FOLDER_ENTRIES:
                over(
                    f"{shown(rel or '.')}: more than {MAX_FOLDER_ENTRIES:,} names in one folder; "
                    "the rest were not looked at"
                )
                break
            names.append(entry.name)
    for name in sorted(names):
        path = f"{rel}/{name}" if rel else name
        if not _PLAIN_NAME.fullmatch(name):
            left_out.append(f"{shown(path)}: a file name outside {NAME_RULE.split(',')[0]}, '.', '-'")
            continue
        try:
            looked = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        except OSError as exc:
            left_out.append(f"{shown(path)}: it could not be looked at ({exc.strerror})")
            continue
        mode = looked.st_mode
        if stat.S_ISDIR(mode):
            if depth >= MAX_TREE_DEPTH:
                over(f"{shown(path)}: folders nested more than {MAX_TREE_DEPTH} deep in one hand-in")
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=src_fd)
            except OSError as exc:  # ELOOP/ENOTDIR: swapped for a link or a file since it was looked at
                left_out.append(f"{shown(path)}: it changed while it was being copied ({exc.strerror})")
                continue
            try:
                if dest_fd is None:
                    _copy_folder(child, None, path, depth + 1, budget, left_out, strict)
                    continue
                os.mkdir(name, dir_fd=dest_fd)
                made = os.open(name, _DIR_FLAGS, dir_fd=dest_fd)
                try:
                    _copy_folder(child, made, path, depth + 1, budget, left_out, strict)
                finally:
                    os.close(made)
            finally:
                os.close(child)
            continue
        if budget["files"] >= MAX_TREE_FILES:  # counted before opening, so empty files cost nothing
            over(f"{shown(path)}: more than {MAX_TREE_FILES} files in one hand-in")
            continue
        room = MAX_TREE_BYTES - budget["bytes"]
        if room <= 0:
            over(f"{shown(path)}: past {MAX_TREE_BYTES:,} bytes in one hand-in")
            continue
        budget["files"] += 1
        try:
            data = read_regular(name, min(MAX_NOTEBOOK_BYTES, room), dir_fd=src_fd)
            after = os.stat(name, dir_fd=src_fd, follow_symlinks=False)  # a write while it was read counts
        except Refused as exc:
            left_out.append(f"{shown(path)}: {exc}")
            continue
        except OSError as exc:
            left_out.append(f"{shown(path)}: it changed while it was being copied ({exc.strerror})")
            continue
        budget["latest"] = max(budget["latest"], looked.st_ctime_ns, after.st_ctime_ns)
        budget["bytes"] += len(data)
        if dest_fd is None:
            continue
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dest_fd)
        with os.fdopen(target, "wb") as f:
            f.write(data)
    budget["latest"] = max(budget["latest"], os.fstat(src_fd).st_ctime_ns)  # a name added or taken meanwhile


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect from the exchange, taking only what `copy_tree` takes, from safe student ids.

    `init_src` is nbgrader's own (nbgrader 0.9.6, exchange/default/collect.py) with each
    inbound folder read on its own: a folder whose name or timestamp cannot be read is
    skipped and logged with its student, and the rest of the class is collected.

    Two layouts of the inbound folder:

    - nbgrader's own (`inbound/<student>+<assignment>+<time>[+<random>]/`, one folder every
      user writes): the student and time come from the name. A hand-in owned by anyone but
      the student it names is refused with a flag (nbgrader only warns "cheating attempt?"
      and collects it), unless `CollectApp.check_owner` is off (hand-ins copied in by root).
    - the class hub's (servelab.classroom.exchange: `inbound/<student>/<hand-in>/`, each
      student's folder theirs alone): the student is the verified owner of the folder and
      of the hand-in, and the time is the latest ctime of exactly what is copied (folders
      included: `copy_hand_in`), which no user can set back; the name's time and the
      hand-in's timestamp.txt are the student's and are ignored (the collected timestamp.txt
      says the file system's time, in nbgrader's own format, so `collect --update` compares
      it). A hand-in named for another student, one past the caps, or one that cannot be
      read or copied is refused with a flag, and the rest of the class is collected.

    Every refusal is logged and appended to REFUSALS in the course directory, one JSON
    object a line: the assignment, the hand-in, whom it claims, who owns it, why.
    """

    REFUSALS = "collect-refusals.jsonl"

    def ensure_root(self) -> None:  # collect reads the exchange; nbgrader's default asks for it writable
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"The exchange {self.root} is missing or cannot be read.")

    def init_src(self) -> None:
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        wanted = self.coursedir.student_id or None
        if wanted == "*":
            wanted = None
        self._server_time: dict[str, str] = {}  # hand-in path -> the time stamp the collected copy gets
        self._refusals: list[dict] = []
        usergroups: dict[str, list[dict]] = {}
        with os.scandir(self.inbound_path) as listing:
            for n, entry in enumerate(listing):
                if n == MAX_FOLDER_ENTRIES * 10:
                    self.log.error("Inbound lists more than %d names; the rest were not looked at", n)
                    break
                if "+" not in entry.name and entry.is_dir(follow_symlinks=False):
                    records = self._student_folder(entry, wanted)
                else:
                    records = [r for r in [self._record(entry, wanted)] if r]
                for record in records:
                    usergroups.setdefault(record["username"], []).append(record)
        self._write_refusals()
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for records in usergroups.values():
            records = self._sort_by_timestamp(records)
            if self.duedate is not None and self.before_duedate:
                records = [r for r in records if r["timestamp"] <= self.duedate] or records
            self.src_records.append(records[0])

    def _record(self, entry: os.DirEntry, wanted: str | None) -> dict | None:
        """nbgrader's record for one inbound folder <student>+<assignment>+<timestamp>[+<random>], or None (logged).

        `nbgrader submit` adds the random part by default (ExchangeSubmit.add_random_string). A student id
        has no '+' (STUDENT_ID), so the name splits from the left."""
        parts = entry.name.split("+", 3)
        if len(parts) not in (3, 4) or parts[1] != self.coursedir.assignment_id:
            return None  # another assignment's hand-in, or not a hand-in at all
        student, stamp = parts[0], parts[2]
        if wanted is not None and student != wanted:
            return None
        problem = student_id_problem(student)
        st = None
        if problem is None:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                problem = f"{shown(entry.name)} is {_kind(st.st_mode)}, not a hand-in folder"
        if problem is None:
            try:
                timestamp = parse_utc(stamp)
            except (ValueError, OverflowError, TypeError) as exc:  # dateutil's ParserError is a ValueError
                problem = (
                    f"{shown(entry.name)}: its time stamp {shown(stamp)} is not a time ({type(exc).__name__}); "
                    f"{shown(student)} should submit again"
                )
        if problem:
            self.log.error("Not collected from %s: %s", shown(student), problem)
            return None
        assert st is not None
        if self.check_owner and _owner(st) != student:
            self._refuse(entry.name, student, _owner(st), "handed in under another student's name")
            return None
        return {"username": student, "filename": entry.name, "timestamp": timestamp}

    def _student_folder(self, folder: os.DirEntry, wanted: str | None) -> list[dict]:
        """The hand-ins in one student's own inbound folder (the class hub's layout), each checked."""
        student = folder.name
        if wanted is not None and student != wanted:
            return []
        problem = student_id_problem(student)
        if problem:
            self.log.error("Not collected from inbound/%s: %s", shown(student), problem)
            return []
        owner = _owner(folder.stat(follow_symlinks=False))
        if owner != student:
            self._refuse(student + "/", student, owner, f"the inbound folder of {student} is owned by {owner}")
            return []
        records = []
        path = os.path.join(self.inbound_path, student)
        try:
            listing = os.scandir(path)
        except OSError as exc:
            self._refuse(student + "/", student, owner, f"the inbound of {student} cannot be read ({exc.strerror})")
            return []
        with listing:
            entries = list(itertools.islice(listing, MAX_FOLDER_ENTRIES + 1))
        if len(entries) > MAX_FOLDER_ENTRIES:  # never a choice among the hand-ins that happened to be listed
            self._refuse(
                student + "/",
                student,
                student,
                f"more than {MAX_FOLDER_ENTRIES:,} names in the inbound of {student}: keep fewer hand-ins there",
            )
            return []
        for entry in entries:
            parts = entry.name.split("+", 3)
            if len(parts) not in (3, 4) or parts[1] != self.coursedir.assignment_id:
                continue  # another assignment's hand-in, or not a hand-in at all
            name = f"{student}/{entry.name}"
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                self._refuse(name, student, student, f"it could not be looked at ({exc.strerror})")
                continue
            if parts[0] != student:
                self._refuse(name, parts[0], student, "handed in under another student's name")
                continue
            if _owner(st) != student:
                self._refuse(name, student, _owner(st), f"a hand-in in {student}'s inbound owned by {_owner(st)}")
                continue
            if not stat.S_ISDIR(st.st_mode):
                self._refuse(
                    name, student, student, f"{shown(entry.name)} is {_kind(st.st_mode)}, not a hand-in folder"
                )
                continue
            src = os.path.join(self.inbound_path, name)
            try:  # the walk the copy makes, copying nothing: its time, or why it is not taken
                _, when = copy_hand_in(src, None)
            except (Refused, OSError) as exc:
                self._refuse(name, student, student, _why(exc))
                continue
            self._server_time[src] = self._stamp(when)
            records.append({"username": student, "filename": name, "timestamp": parse_utc(when)})
        return records

    def _stamp(self, when: datetime.datetime) -> str:
        """A time as nbgrader writes a hand-in's timestamp.txt (Exchange.timestamp_format) and reads it back
        (parse_utc, naive UTC), so `collect --update` and the due date compare it with nbgrader's own."""
        return when.astimezone(datetime.timezone.utc).strftime(self.timestamp_format)

    def _refuse(self, hand_in: str, claims: str, owner: str, reason: str) -> None:
        self.log.error(
            "Refused %s (flag: %s): it claims to be %s's and is owned by %s; nothing of it is collected",
            shown(hand_in),
            reason,
            shown(claims),
            shown(owner),
        )
        self._refusals.append(
            {
                "assignment": self.coursedir.assignment_id,
                "hand_in": hand_in,
                "claims": claims,
                "owner": owner,
                "flag": reason,
                "seen": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            }
        )

    def _write_refusals(self) -> None:
        if not self._refusals:
            return
        with open(os.path.join(self.coursedir.root, self.REFUSALS), "a") as f:
            for refusal in self._refusals:
                f.write(json.dumps(refusal) + "\n")
        self._refusals = []

    def do_copy(self, src, dest, log=None):
        """One hand-in copied; whatever fails in it is a refusal with a flag, and the class goes on."""
        hub_layout = src in getattr(self, "_server_time", {})
        try:
            if hub_layout:  # the time is that of exactly what was copied, over whatever the student wrote there
                left_out, when = copy_hand_in(src, dest)
            else:
                left_out, when = copy_tree(src, dest), None
            for why in left_out:
                self.log.warning("Not collected from %s: %s", shown(os.path.basename(src)), why)
            if when is not None:
                stamp = os.path.join(dest, "timestamp.txt")
                if os.path.lexists(stamp):
                    os.unlink(stamp)
                with open(stamp, "x") as f:
                    f.write(self._stamp(when))
        except (Refused, OSError) as exc:
            shutil.rmtree(dest, ignore_errors=True)
            name = os.path.relpath(src, self.inbound_path)
            student = name.split("/", 1)[0].split("+", 1)[0]
            self._refusals = getattr(self, "_refusals", [])
            self._refuse(name, student, student, _why(exc))
            self._write_refusals()


def _why(exc: Exception) -> str:
    if isinstance(exc, Refused):
        return str(exc)
    return f"it could not be copied ({getattr(exc, 'strerror', None) or exc})"


def _owner(st: os.stat_result) -> str:
    try:
        return pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        return f"uid {st.st_uid}"
