"""The lesson's side of the variants: each student's parameters file, and the question cells that print from it.

In a class, the release hands each student their own parameters (`hand_out`, run by `servelab class up`
as root): ``lesson_params(student, secret=...)`` as JSON at ``~<student>/.servelab/variants/lesson25.json``,
owned by root, group the student's own, mode 0440, in their home (mode 700 in a class): the student reads
it, nobody else of the class does, and nobody writes it. Grading never reads it (the grader derives each
student's parameters from the hand-in's owner, servelab.variants.grading), so a changed copy changes only
the text its reader sees.

The lesson's question cells state the lesson's own numbers (`Question.standard`: what a learner on their
own, nbval and the sample submissions read) between two markers, ``<!-- variant: warmup1 -->`` and
``<!-- /variant -->`` (HTML comments: nothing shows); a reveal that works through a question's case marks
it the same way, ``<!-- variant: practice1-reveal -->`` (questions.render_block). In a class, fetching the assignment writes each
student's copy with their numbers there (`personalise`, run by the class's exchange as the student fetches,
servelab.classroom.exchange.ClassFetchAssignment, from their file): the question reads with their numbers,
as it is graded. The cell below each question prints it again from the file (`show(question_id)`), for a
notebook fetched before the file was handed out.

    SERVELAB_VARIANT_PARAMS   another path for the file (a test's, or a deployment's own layout)
    SERVELAB_VARIANT_NUMBERS  the numbers themselves, as the file's JSON: what the grading sandbox's kernel reads,
                              which has no home of the student's (servelab.grading.trusted.SandboxedExecute hands
                              it the hand-in's owner's numbers, so a cell that computes from them at grading
                              computes with theirs)
"""

from __future__ import annotations

import json
import os
import pwd
import re
from pathlib import Path

from .questions import BY_ID, Params, block_question, question_of, render, render_block
from .seeds import ASSIGNMENT, params_for

# The questions the lesson asks each student with their own numbers, and grades against them (practice 1
# and 4 for their numeric fields; their knob and verdict are the same for every variant, graded by the
# fixed key: servelab.variants.grading.check's fixed_key).
LESSON_QUESTIONS = ("warmup1", "warmup2", "warmup3", "practice1", "practice4")
FILE_NAME = f"{ASSIGNMENT}.json"
NUMBERS_ENV = "SERVELAB_VARIANT_NUMBERS"


def lesson_params(student: str, *, secret: bytes) -> dict[str, Params]:
    """A student's numbers of the questions the lesson asks with them (LESSON_QUESTIONS): what hand_out writes,
    what their fetched copy states and what the instructor's view shows."""
    return {qid: params_for(qid, student, secret=secret) for qid in LESSON_QUESTIONS}


def params_path(home: str | Path | None = None) -> Path:
    """Where a student's parameters file is: $SERVELAB_VARIANT_PARAMS, else ~/.servelab/variants/lesson25.json."""
    if home is None and os.environ.get("SERVELAB_VARIANT_PARAMS"):
        return Path(os.environ["SERVELAB_VARIANT_PARAMS"])
    return Path(home if home is not None else Path.home()) / ".servelab" / "variants" / FILE_NAME


def mine(path: Path | None = None) -> dict[str, Params]:
    """The parameters handed out to this user (question id -> parameters); {} when there are none to read.
    $SERVELAB_VARIANT_NUMBERS, where set (the grading sandbox), is read in place of the file."""
    try:
        if path is None and os.environ.get(NUMBERS_ENV):
            data = json.loads(os.environ[NUMBERS_ENV])
        else:
            data = json.loads((path or params_path()).read_text())
    except (OSError, ValueError, RecursionError):  # a file nested past the parser's depth is none to read
        return {}
    return data if isinstance(data, dict) else {}


def numbers(question_id: str, path: Path | None = None) -> Params:
    """This user's parameters of a question, or the lesson's own where none were handed out (or they do not fit)."""
    question = question_of(question_id)
    params = mine(path).get(question.id)
    if isinstance(params, dict):
        try:
            render(question.id, params)
            return params
        except (KeyError, ValueError, IndexError):
            pass
    if question.standard is None:
        raise KeyError(f"{question.id} has no numbers of the lesson's own")
    return dict(question.standard)


def text(question_id: str, path: Path | None = None) -> str:
    """The question's text as this user is asked it."""
    return render(question_id, numbers(question_id, path))


def show(question_id: str, path: Path | None = None) -> None:
    """What a question cell prints: its text, with this user's numbers (or the lesson's)."""
    print(text(question_id, path))


# A marked block of a question cell: what personalise rewrites. The id is a question's (questions.BY_ID).
BLOCK = re.compile(r"<!-- variant: (?P<id>[a-z0-9-]+) -->(?P<text>.*?)<!-- /variant -->", re.DOTALL)


def blocks(source: str) -> list[tuple[str, str]]:
    """The marked blocks of a markdown cell's source: (block id, the text between the markers); a block id is a
    question's id, or <question id>-reveal for its reveal's worked case (questions.render_block)."""
    return [(m["id"], m["text"]) for m in BLOCK.finditer(source)]


def personalise(notebook: dict, params: dict[str, Params]) -> list[str]:
    """Rewrite each marked block of the notebook's markdown cells with these numbers (question id ->
    parameters; a question with none, or with numbers its text cannot be stated with, keeps the lesson's);
    the question ids rewritten. Only the text between the markers changes, never a graded cell's."""
    done: list[str] = []

    def fill(match: re.Match) -> str:
        block = match["id"]
        qid = block_question(block)
        theirs = params.get(qid)
        if qid not in BY_ID or not isinstance(theirs, dict):
            return match[0]
        try:
            text = render_block(block, theirs)
        except (KeyError, ValueError, IndexError, TypeError):
            return match[0]
        if qid not in done:
            done.append(qid)
        return f"<!-- variant: {block} -->{text}<!-- /variant -->"

    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "markdown" or "nbgrader" in cell.get("metadata", {}):
            continue  # nbgrader's cells keep their checksums
        source = cell.get("source", "")
        joined = "".join(source) if isinstance(source, list) else source
        if "<!-- variant:" in joined:
            cell["source"] = BLOCK.sub(fill, joined)
    return done


def personalise_file(path: str | Path, params: dict[str, Params] | None = None) -> list[str]:
    """personalise() a notebook file in place with this user's numbers (`mine()` unless given); the ids
    rewritten ([] and the file untouched where there are none to write)."""
    import nbformat

    params = mine() if params is None else params
    if not params:
        return []
    notebook = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
    done = personalise(notebook, params)
    if done:
        nbformat.write(notebook, str(path))
    return done


def hand_out(student: str, *, secret: bytes, home: Path | None = None, record=None) -> Path:
    """Write one student's parameters where only they read them (as root); the path written.

    ~/.servelab is the student's (made theirs if absent), ~/.servelab/variants root's, 0755, and the file
    root's, group the student's own, 0440. Every step goes through an open folder, never a path the student
    could swap for a link while it is written.

    `record` (the class's journal.record, servelab.classroom.journal): told before anything is made, a
    "hand-out" entry naming the file and the folders this makes (and a folder's owner and mode before it
    became root's), so `servelab class down` removes them, after a crash too."""
    entry = pwd.getpwnam(student)
    home = Path(home) if home is not None else Path(entry.pw_dir)
    return write_params(home, lesson_params(student, secret=secret), uid=entry.pw_uid, gid=entry.pw_gid, record=record)


def write_params(home: Path, params: dict[str, Params], *, uid: int, gid: int, record=None) -> Path:
    """hand_out's writing (as root): `params` at params_path(home), for the user `uid` of group `gid`; a
    cluster's init step runs it with the numbers the hub hands it (servelab.classroom.cluster hand-out),
    where the pod has neither the secret nor a passwd entry for the student."""
    home = Path(home)
    path = params_path(home)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    opened: list[int] = []
    if record is not None:
        record("hand-out", **_hand_out_entry(home, path))
    try:
        at = os.open(home, flags)
        opened.append(at)
        for name, owner, mode in ((path.parent.parent.name, uid, 0o700), (path.parent.name, 0, 0o755)):
            made = False
            try:
                os.mkdir(name, mode, dir_fd=at)
                made = True
            except FileExistsError:
                pass
            at = os.open(name, flags, dir_fd=at)
            opened.append(at)
            if made or owner == 0:
                os.fchown(at, owner, 0 if owner == 0 else gid)
                os.fchmod(at, mode)
        tmp = f".{FILE_NAME}.tmp"
        try:
            os.unlink(tmp, dir_fd=at)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=at)
        with os.fdopen(fd, "w") as f:
            os.fchown(fd, 0, gid)
            os.fchmod(fd, 0o440)
            f.write(json.dumps(params, indent=1) + "\n")
        os.replace(tmp, FILE_NAME, src_dir_fd=at, dst_dir_fd=at)
    finally:
        for fd in reversed(opened):
            os.close(fd)
    return path


def _hand_out_entry(home: Path, path: Path) -> dict:
    """What a hand-out changes in a home, as the journal keeps it: the file, the folders it makes (those
    absent now), and the variants folder's owner and mode before the hand-out makes it root's."""
    folders = [path.parent.parent, path.parent]
    made = [str(f.relative_to(home)) for f in folders if not os.path.lexists(f)]
    entry: dict = {"home": str(home), "file": str(path.relative_to(home)), "made": made}
    if not made and path.parent.is_dir() and not path.parent.is_symlink():
        st = path.parent.lstat()
        entry["before"] = {"uid": st.st_uid, "gid": st.st_gid, "mode": st.st_mode & 0o7777}
    return entry


def instructor_view(student: str, *, secret: bytes, solver=None) -> str:
    """A student's variant as the instructor sees it: each question's text with their numbers, the worked
    solution of each part for them where the instructor-only solver is here (servelab.variants.grading)."""
    from .grading import SolverMissing, load_solver, solution

    try:
        solver = solver or load_solver()
    except SolverMissing:
        solver = None
    lines = [f"{student}'s numbers ({ASSIGNMENT}):"]
    for qid, params in lesson_params(student, secret=secret).items():
        lines += ["", f"## {BY_ID[qid].title} ({qid})", render(qid, params)]
        for part in BY_ID[qid].parts if solver is not None else ():
            lines.append(f"  {part.id}: {solution(part.id, params, solver)['worked']}")
    return "\n".join(lines)


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="variants_command", required=True)
    show_p = sub.add_parser("show", help="a student's own numbers and worked solutions, as the instructor sees them")
    show_p.add_argument("student", help="the student's id (their login on the class's hub)")
    show_p.add_argument("--secret-file", type=Path, help="the course secret (default: the class's, else seeds')")
    show_p.add_argument(
        "--notebook",
        type=Path,
        help="also write a copy of this notebook (the released lesson) with the student's numbers in its questions, "
        "as their fetched copy states them, as <name>-<student>.ipynb here (or --out; never in the release folder, which "
        "nbgrader hands out whole)",
    )
    show_p.add_argument("--out", type=Path, help="where --notebook's copy goes")
    show_p.add_argument(
        "--roster",
        help="the class's student ids, comma-separated, or a file of them (one a line, or the class's class.json); "
        "an id not on it is refused (default: the running class's class.json, where there is one)",
    )


ROSTER_NAME = "roster"  # the class's student ids, one a line, beside the course secret (written by `class up`)


def roster_file(secret_file: Path | None = None) -> Path:
    """Where the class's roster is: beside the course secret it is drawn under (seeds.secret_path())."""
    from .seeds import secret_path

    return (Path(secret_file) if secret_file is not None else secret_path()).with_name(ROSTER_NAME)


def write_roster(students, secret_file: Path) -> Path:
    """Write the class's roster beside its course secret, as readable as the secret is (by the instructors)."""
    path = roster_file(secret_file)
    path.write_text("".join(f"{s}\n" for s in students))
    path.chmod(0o600)
    return path


class RosterError(RuntimeError):
    """The roster named cannot be read; the message says which file and what to do."""


def roster_of(spec: str | None, secret_file: Path | None = None) -> list[str] | None:
    """The class's student ids from `spec` (ids, comma-separated; a file of ids; a class.json), else the course's
    roster beside its secret (roster_file), else the running class's class.json where this user may read it, else
    None: no roster known."""
    if spec is None:
        # The class's state folder (servelab.classroom.hub.DEFAULT_STATE, or the running class's), named
        # here rather than imported: the classroom imports this module to hand the numbers out. Its class.json
        # is root's (it holds the gradebook's password): an instructor reads the roster beside the secret.
        state = Path(os.environ.get("SERVELAB_CLASS_STATE") or "/var/lib/servelab-class") / "class.json"
        # A secret named here is another course's, perhaps: only the roster beside it is that course's.
        for path in (roster_file(secret_file), *(() if secret_file is not None else (state,))):
            if path.is_file() and os.access(path, os.R_OK):
                spec = str(path)
                break
        else:
            return None
    path = Path(spec)
    try:
        is_file = path.is_file()
    except OSError:  # a long list of ids is no file name
        is_file = False
    if not is_file:
        return [s.strip() for s in spec.split(",") if s.strip()]
    try:
        text = path.read_text()
        if path.suffix == ".json":
            return [str(s) for s in json.loads(text).get("students", [])]
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise RosterError(
            f"The roster {path} cannot be read ({type(exc).__name__}: {exc}). Pass --roster with the class's ids, "
            "comma-separated, or a file of them, one a line."
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


class NotOnRoster(RosterError):
    """The id is on no roster the class has: any id has a variant under the secret, and one that is nobody's
    would be shown as if it were a student's."""


def checked_student(student: str, *, secret_file: Path | None = None, roster: str | None = None):
    """(the course secret, the roster or None) for showing `student`'s numbers: SecretError where there is no
    secret, RosterError where the roster cannot be read, NotOnRoster where it does not name them."""
    from .seeds import course_secret

    secret = course_secret(secret_file, create=False)
    ids = roster_of(roster, secret_file)
    if ids is not None and student not in ids:
        raise NotOnRoster(
            f"{student!r} is not on the class's roster ({len(ids)} students): no such student's numbers. "
            "Check the id (their login on the class's hub), or pass --roster."
        )
    return secret, ids


def student_view(student: str, *, secret_file: Path | None = None, roster: str | None = None) -> str:
    """What the instructor reads of a student's variant (instructor_view), once the id is on the class's roster;
    the instructor's notebook (class/report.py) and `servelab variants show` both show it."""
    secret, _ids = checked_student(student, secret_file=secret_file, roster=roster)
    return instructor_view(student, secret=secret)


def run(args) -> int:
    from .seeds import SecretError

    try:
        secret, roster = checked_student(
            args.student, secret_file=args.secret_file, roster=getattr(args, "roster", None)
        )
    except SecretError as exc:
        print(exc)
        return 1
    except RosterError as exc:
        print(exc)
        return 2
    notebook = getattr(args, "notebook", None)
    if (
        notebook is not None
        and args.out is None
        and not re.fullmatch(r"[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*", args.student)
    ):
        print(f"{args.student!r} cannot be part of a file name: pass --out for the copy's path.")
        return 2
    if roster is None:
        print(
            f"(No class roster known here, so {args.student!r} is not checked against one: pass --roster to check it.)"
        )
    print(instructor_view(args.student, secret=secret))
    if getattr(args, "notebook", None) is not None:
        import shutil

        # Here, never beside the released notebook: nbgrader releases that whole folder, and would hand this
        # student's copy to the class. Written for the instructor alone (0600).
        out = args.out or Path.cwd() / f"{args.notebook.stem}-{args.student}.ipynb"
        shutil.copyfile(args.notebook, out)
        out.chmod(0o600)
        done = personalise_file(out, lesson_params(args.student, secret=secret))
        print(f"\n{out}: the questions {', '.join(done) or '(none marked)'} state {args.student}'s numbers")
    return 0
