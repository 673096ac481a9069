"""A student's variant: parameters drawn from a seed that only the course's secret can derive.

seed = HMAC-SHA256(course secret, "servelab-variant-v3" NUL course NUL assignment NUL student NUL question)

The key is the course secret, so a student who knows every classmate's id still cannot compute their
variants; the message names the question, so adding a question later leaves every other variant as it
was. The same inputs give the same parameters on every run and every machine (the generators draw from
Python's `random.Random`, seeded with the digest as an integer, with integer-seeded draws only).

The course secret is 32 random bytes (hex) in a file only its owner reads, as the class keeps its
other secrets (the gradebook's password, the servers' keys: mode 600, made on first use). It lives
outside the checkout and outside the package: $SERVELAB_VARIANT_SECRET_FILE, else
$XDG_CONFIG_HOME/servelab/variant-secret (~/.config/servelab/variant-secret). Every instructor who
releases or grades the course must use the same file (point SERVELAB_VARIANT_SECRET_FILE at it): a new
secret is a new set of variants. A file that others can read is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import secrets
import stat
from pathlib import Path

from ..courseid import COURSE_ID
from .questions import QUESTIONS, Params, question_of, render

ASSIGNMENT = "lesson25"
VERSION = b"servelab-variant-v3"


class SecretError(RuntimeError):
    """The course secret cannot be read or made safely; the message says why and what to do."""


def secret_path() -> Path:
    env = os.environ.get("SERVELAB_VARIANT_SECRET_FILE")
    if env:
        return Path(env)
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "servelab" / "variant-secret"


def course_secret(path: Path | None = None, create: bool = True) -> bytes:
    """The course secret's bytes: read from `path` (secret_path()), made there first if absent and `create`."""
    path = Path(path) if path is not None else secret_path()
    if not path.exists():
        if not create:
            raise SecretError(
                f"There is no course secret at {path}: the variants are the course's, made where it is graded."
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # made by another process just now: read theirs
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    mode = path.stat().st_mode
    if mode & stat.S_IROTH or mode & stat.S_IWOTH:
        raise SecretError(
            f"The course secret {path} can be read by every user (mode {stat.filemode(mode)}): anyone could compute "
            f"each student's variant. `chmod o-rw {path}` (and make a new one if students could have read it)."
        )
    text = path.read_text().strip()
    if len(text) < 32:
        raise SecretError(f"The course secret {path} is too short to be a secret ({len(text)} characters).")
    return text.encode()


def seed(student: str, question: str, *, secret: bytes, course: str = COURSE_ID, assignment: str = ASSIGNMENT) -> int:
    """The seed of one student's variant of one question (the question's id, not a part's)."""
    for name, value in (("student", student), ("course", course), ("assignment", assignment), ("question", question)):
        if not isinstance(value, str) or not value or "\0" in value:
            raise ValueError(f"a variant's {name} must be a non-empty string without NUL, not {value!r}")
    message = b"\0".join([VERSION, *(s.encode() for s in (course, assignment, student, question))])
    return int.from_bytes(hmac.new(secret, message, hashlib.sha256).digest(), "big")


def params_for(
    question_id: str, student: str, *, secret: bytes, course: str = COURSE_ID, assignment: str = ASSIGNMENT
) -> Params:
    """A student's parameters for a question (or the question a part id belongs to): the same every time."""
    question = question_of(question_id)
    rng = random.Random(seed(student, question.id, secret=secret, course=course, assignment=assignment))
    return question.generate(rng)


def fresh_params(question_id: str, rng: random.Random | None = None) -> Params:
    """A new variant of a question, for practice: from `rng`, else from the operating system's randomness."""
    question = question_of(question_id)
    return question.generate(rng or random.Random(secrets.randbits(128)))


def text_for(
    question_id: str,
    student: str,
    *,
    secret: bytes,
    course: str = COURSE_ID,
    assignment: str = ASSIGNMENT,
) -> str:
    """The question's text with the student's own parameters: what their released notebook shows."""
    return render(question_id, params_for(question_id, student, secret=secret, course=course, assignment=assignment))


def all_params(
    student: str, *, secret: bytes, course: str = COURSE_ID, assignment: str = ASSIGNMENT
) -> dict[str, Params]:
    """Every question's parameters for one student (question id -> parameters): what their notebook renders.

    A student's own parameters are no secret to them; the secret is what ties them to the name. A student
    who edits their copy changes only the text they read: grading derives the parameters again from the id."""
    return {q.id: params_for(q.id, student, secret=secret, course=course, assignment=assignment) for q in QUESTIONS}
