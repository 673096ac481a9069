"""The class's exchange: nbgrader's filesystem exchange, laid out so that no student can share it.

nbgrader's default exchange is one folder every user writes (mode 0777, and
`release_assignment` makes it so): a student can rename it and put her own in its
place, create a hand-in folder named for a classmate, and write the time stamp
of her own hand-in. Here, as `servelab class up` lays it out (`lay_out`, as root):

    <state>/exchange/                         root, 0755: nobody but root renames or adds anything here
      <course>/                               root, 0755
        outbound/                             the first instructor, group CHECKOUT_GROUP, 2775: released
                                              assignments, written by instructors only, read by all
        feedback/                             the first instructor, 0711: nbgrader's released feedback, one
                                              file per notebook named by a hash of the hand-in's secret;
                                              nobody can list it, each student opens their own by name
        inbound/                              root, group CHECKOUT_GROUP, 0751: nobody lists it
          <student>/                          the student, group CHECKOUT_GROUP, 2750: only they write it,
                                              only they and the instructors read it; where the machine
                                              can loop-mount, its own ext4 of INBOUND_CAP_MIB (a full
                                              inbound stops its student's hand-ins, nobody else's;
                                              servelab.classroom.capfs, as each student's home)

The nbgrader classes below are the exchange's plug-ins (nbgrader's own ExchangeFactory,
configured in each role's nbgrader_config.py by `servelab class up`): they differ
from nbgrader's default exchange only in where a hand-in goes (`inbound/<login name>/`,
whatever student id the command line names) and in never asking for a writable
exchange root. Collection (servelab.grading.collection.SafeExchangeCollect) takes the
student from the folder's verified owner and the time from the file system (the
latest ctime of what it copies, which no user can set back), never from a name or
a file the student wrote; a hand-in named for someone else, past the caps, or one it
cannot read is refused with a flag, and the rest of the class is collected.
"""

from __future__ import annotations

import base64
import glob
import grp
import os
import pwd
import stat
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment
from nbgrader.exchange.default.fetch_feedback import ExchangeFetchFeedback
from nbgrader.exchange.default.list import ExchangeList
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import check_directory, check_mode, get_osusername

from . import capfs

INBOUND_CAP_MIB = 256  # one student's inbound: every hand-in they keep there (each is capped at collection too)
# A hand-in's own modes: readable by all, as nbgrader makes them, less nbgrader's world-writable top folder.
# Classmates never reach it: the student's inbound folder (2750, the instructors' group) is the boundary,
# and the instructors pass it by group and read the hand-in as "other" (its files keep the student's
# group: nbgrader's copytree copies the source folder's mode, setgid bit lost, before it writes the stamp).
HANDIN_DIR_MODE = 0o755
HANDIN_FILE_MODE = 0o644


class _ReadableRoot:
    """The exchange root exists and can be read; nbgrader's default also wants it writable by everyone."""

    root: str
    fail: Callable[[str], NoReturn]  # nbgrader's Exchange.fail, of the exchange class this is mixed into

    def ensure_root(self):
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"The class's exchange {self.root} is missing or closed to you: ask your instructor.")


class ClassFetchAssignment(_ReadableRoot, ExchangeFetchAssignment):
    """nbgrader's fetch, and each notebook it copies then states the fetching student's own numbers in its
    questions (servelab.variants.lesson.personalise, from the file `servelab class up` handed them). It runs
    as the student, on their own copy: the released notebook is everyone's and stays as it is."""

    def copy_files(self):
        existed = set(_notebooks(self.dest_path))
        super().copy_files()
        from servelab.variants import lesson

        for path in sorted(set(_notebooks(self.dest_path)) - existed):
            try:
                done = lesson.personalise_file(path)
            except (
                OSError,
                ValueError,
                KeyError,
                TypeError,
                RecursionError,
            ) as exc:  # the fetch stands: the cells print them
                self.log.warning(
                    "Could not write your numbers into %s (%s): the cell under each question prints them", path, exc
                )
                continue
            if done:
                self.log.info("Your own numbers in %s: %s", os.path.basename(path), ", ".join(done))


def _notebooks(folder: str) -> list[str]:
    return (
        glob.glob(os.path.join(glob.escape(folder), "**", "*.ipynb"), recursive=True) if os.path.isdir(folder) else []
    )


class ClassFetchFeedback(_ReadableRoot, ExchangeFetchFeedback):
    pass


def _writable(exchange, path: str) -> None:
    if not os.path.isdir(path) or not check_mode(path, write=True, execute=True):
        exchange.fail(f"{path} is missing or not writable by you: only the class's instructors release (lay_out).")


class ClassReleaseAssignment(_ReadableRoot, ExchangeReleaseAssignment):
    """nbgrader's release into outbound/, which `lay_out` made the instructors' (nbgrader's own would chmod
    the course's folders, which are root's, and open inbound/ to every user)."""

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.outbound_path = os.path.join(self.course_path, "outbound")
        self.inbound_path = os.path.join(self.course_path, "inbound")
        self.dest_path = os.path.join(self.outbound_path, self.coursedir.assignment_id)
        _writable(self, self.outbound_path)


class ClassReleaseFeedback(_ReadableRoot, ExchangeReleaseFeedback):
    """nbgrader's release of feedback into feedback/ (mode 0711: nobody lists it), made by `lay_out`."""

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.outbound_feedback_path = os.path.join(self.course_path, "feedback")
        self.dest_path = self.outbound_feedback_path
        _writable(self, self.dest_path)


class ClassList(_ReadableRoot, ExchangeList):
    def init_dest(self):
        super().init_dest()
        if self.inbound:  # the instructors' view of what was handed in: inbound/<student>/<hand-in>
            course = self.coursedir.course_id or "*"
            student = self.coursedir.student_id or "*"
            assignment = self.coursedir.assignment_id or "*"
            self.assignments = sorted(
                glob.glob(os.path.join(self.root, course, "inbound", student, f"{student}+{assignment}+*"))
            )

    def parse_assignment(self, assignment):
        if self.inbound:  # drop the student's folder, then nbgrader's own parse of the hand-in's name
            head, name = os.path.split(assignment)
            assignment = os.path.join(os.path.dirname(head), name)
        return super().parse_assignment(assignment)


class ClassSubmit(_ReadableRoot, ExchangeSubmit):
    """`nbgrader submit` into the student's own inbound folder, named by their login, closed to classmates."""

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        student = get_osusername()  # the account the kernel runs as; a --student on the command line is no one
        if not self.authenticator.has_access(student, self.coursedir.course_id):
            self.fail("You do not have access to this course.")
        self.inbound_path = os.path.join(self.root, self.coursedir.course_id, "inbound", student)
        if not os.path.isdir(self.inbound_path) or not check_mode(self.inbound_path, write=True, execute=True):
            self.fail(
                f"Your hand-in folder {self.inbound_path} is missing or not yours: ask your instructor "
                "to add you to the class (servelab class up --students ...)."
            )
        self.cache_path = os.path.join(self.cache, self.coursedir.course_id)
        random_str = base64.urlsafe_b64encode(os.urandom(9)).decode("ascii")
        self.assignment_filename = f"{student}+{self.coursedir.assignment_id}+{self.timestamp}+{random_str}"

    def copy_files(self):
        super().copy_files()
        # nbgrader leaves the top of a hand-in writable by everyone (0777, "hidden by the time stamp").
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        for folder, _dirs, files in os.walk(dest):
            for name in files:
                os.chmod(os.path.join(folder, name), HANDIN_FILE_MODE)
            os.chmod(folder, HANDIN_DIR_MODE)


PLUGINS = {
    "fetch_assignment": ClassFetchAssignment,
    "fetch_feedback": ClassFetchFeedback,
    "release_assignment": ClassReleaseAssignment,
    "release_feedback": ClassReleaseFeedback,
    "list": ClassList,
    "submit": ClassSubmit,
}


def factory_settings() -> dict[str, str]:
    """c.ExchangeFactory.<operation> for every role's nbgrader config (collect is the course's own)."""
    return {op: f"{cls.__module__}.{cls.__qualname__}" for op, cls in PLUGINS.items()}


# --- the layout, as root ---------------------------------------------------------------------------------
def _own(path: Path, user: str | int, group: str | int, mode: int) -> None:
    uid = user if isinstance(user, int) else pwd.getpwnam(user).pw_uid
    gid = group if isinstance(group, int) else grp.getgrnam(group).gr_gid
    os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, mode)


def lay_out(
    exchange: Path,
    course_id: str,
    instructors: list[str],
    students: list[str],
    group: str,
    images: Path,
    record=lambda kind, **what: None,
) -> dict[str, bool]:
    """Make the exchange as the module says (as root); which students' inbounds are size-capped.

    `record(kind, **what)` is told of every mount before it is made (servelab.classroom.journal)."""
    owner = instructors[0]
    exchange.mkdir(parents=True, exist_ok=True)
    _own(exchange, 0, 0, 0o755)
    course = exchange / course_id
    course.mkdir(exist_ok=True)
    _own(course, 0, 0, 0o755)
    for name, user, grp_, mode in (
        ("outbound", owner, group, 0o2775),
        ("feedback", owner, owner_group(owner), 0o711),
        ("inbound", 0, group, 0o751),
    ):
        (course / name).mkdir(exist_ok=True)
        _own(course / name, user, grp_, mode)
    # What an earlier class released stays its releaser's (nbgrader keeps the owner), who may now be a
    # student: everything under outbound/ and feedback/ becomes this class's first instructor's (outbound's
    # group, the instructors, keeps its write), so no former instructor can replace a release and this class's
    # instructors can release again.
    for name, grp_, keep in (("outbound", group, 0o020), ("feedback", owner_group(owner), 0)):
        _reown_tree(course / name, owner, grp_, clear=0o022 & ~keep)
    images.mkdir(parents=True, exist_ok=True)
    images.chmod(0o700)
    capped = {}
    for student in students:
        folder = course / "inbound" / student
        folder.mkdir(exist_ok=True)
        capped[student] = not capfs.cap(folder, images / f"{student}.ext4", INBOUND_CAP_MIB, record=record)
        _own(folder, student, group, 0o2750)
    # Whoever is no longer on the roster hands in nothing more (their hand-ins stay for collection).
    for folder in (course / "inbound").iterdir():
        if folder.is_dir() and folder.name not in students:
            folder.chmod(0o2550)
    return capped


def _reown_tree(top: Path, user: str, group: str | int, clear: int) -> None:
    """Everything below `top` owned by `user` and `group`, the mode bits `clear` cleared (a link is re-owned,
    never followed)."""
    uid = pwd.getpwnam(user).pw_uid
    gid = group if isinstance(group, int) else grp.getgrnam(group).gr_gid
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name in dirs + files:
            path = os.path.join(folder, name)
            os.chown(path, uid, gid, follow_symlinks=False)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~clear)


def owner_group(user: str) -> int:
    return pwd.getpwnam(user).pw_gid
