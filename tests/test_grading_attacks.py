"""The attack corpus on everything around the sandbox: collection, names, the scan, scoring, attribution, rubric,
the console, the sandbox's memory and the per-student steps.

Written from the classes in tests/faults.md (what a student, or a careless LMS
export, hands in), several variants each. The whole corpus is graded in one
pipeline run beside three control students. The controls are also graded alone,
and that run is made from a copy of the checkout and its Python environment
under /tmp, in a folder whose name has a space, by a user who is not root: one
run is both the baseline and the proof that a checkout works anywhere. For every
attack: the attacker's result is what the same answers score without the attack
(or a refusal that names the cause), the controls' rows in grades.csv are byte
for byte those of the class without attackers, and the run ends in bounded time.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from servelab.grading import course, pipeline, samples, sandbox
from servelab.grading.console import printable
from servelab.paths import REPO_DIR

LESSON = course.get("lesson25")
CONTROLS = {"aaa_perfect": "perfect", "aab_partial": "partial", "zzz_empty": "empty"}
SELECTIONS = ("practice2-missing", "practice3-test")
PRACTICE2_OPTIONS = [
    "batch_size",
    "bottleneck",
    "on_off_measurement",
    "slo_metric",
    "draft_vendor",
    "gpu_count",
    "client_language",
]
PRACTICE3_OPTIONS = [
    "no_canary",
    "output_drift",
    "callers_not_told",
    "no_rollback_trigger",
    "int8_slower",
    "more_memory",
]
SECONDS_PER_SUBMISSION = 30  # the bound on a run: far above the ~3 s a submission takes, far below a hang
# One student's feedback page in the corpus: a lesson's takes ~1.5 s here (10 s at load average 12), and
# the long-rendering hand-in below far longer (five of its 60 blocks took 40 s at load average 17).
FEEDBACK_TIMEOUT_S = 30
SECONDS_PER_PAGE = 10  # one student's generate_feedback, bounded: ~1.5 s quiet, 8-10 s at load average 17


def _sample(name: str):
    return nbformat.read(samples.SUBMISSIONS / LESSON.name / f"{name}.ipynb", as_version=4)


def _sample_bytes(name: str) -> bytes:
    return (samples.SUBMISSIONS / LESSON.name / f"{name}.ipynb").read_bytes()


# ----------------------------------------------------------------------------- collection
# file name in the class folder -> (how it is made, words the refusal must contain)
def _symlink(target):
    return lambda path, tmp: os.symlink(target(tmp) if callable(target) else target, path)


def _hard_link(path, tmp):
    copy_of = tmp / "solution-copy.ipynb"  # a file the grader can read and the student should not
    shutil.copy(course.get("lesson25").source, copy_of)
    os.link(copy_of, path)


def _named(path, tmp):
    path.write_bytes(_sample_bytes("partial"))


def _device(path, tmp):
    try:
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers: a read never ends
    except PermissionError:
        os.symlink("/dev/zero", path)  # without CAP_MKNOD: the same device, through a link


def _socket(path, tmp):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


def _huge(path, tmp):
    with open(path, "wb") as f:
        f.truncate(64 * 2**20)  # sparse: costs no disk


COLLECTION = {
    "ln_solution.ipynb": (_symlink(lambda tmp: str(LESSON.source)), ["symbolic link"]),
    "ln_shadow.ipynb": (_symlink("/etc/shadow"), ["symbolic link"]),
    "ln_dangling.ipynb": (_symlink("/nonexistent/nothing.ipynb"), ["symbolic link"]),
    "ln_devzero.ipynb": (_symlink("/dev/zero"), ["symbolic link"]),
    "ln_folder.ipynb": (_symlink(lambda tmp: str(tmp)), ["symbolic link"]),
    "fifo.ipynb": (lambda path, tmp: os.mkfifo(path), ["named pipe"]),
    "sock.ipynb": (_socket, ["socket"]),
    "dev_zero.ipynb": (_device, ["device", "symbolic link"]),  # either, by what the test may make
    "folder.ipynb": (lambda path, tmp: path.mkdir(), ["folder"]),
    "hard_link.ipynb": (_hard_link, ["hard link"]),
    "huge.ipynb": (_huge, ["larger than"]),
    "?*.ipynb": (_named, ["not a student id"]),
    "[a-z]*.ipynb": (_named, ["not a student id"]),
    "-x.ipynb": (_named, ["not a student id"]),
    "--foo.ipynb": (_named, ["not a student id"]),
    "--student=aaa_perfect.ipynb": (_named, ["not a student id"]),
    "a b.ipynb": (_named, ["not a student id"]),
    "x__y.ipynb": (_named, ["not a student id"]),
    "new\nline.ipynb": (_named, ["not a student id"]),
    "ünï.ipynb": (_named, ["not a student id"]),
    ("l" * 65) + ".ipynb": (_named, ["not a student id"]),
}
# An LMS export with hostile entries beside one honest one: entry name -> (kind, words in the refusal)
ZIP_ENTRIES = {
    "../../zip_slip.ipynb": ("file", ["leaves the archive"]),
    "sub/../../zip_slip2.ipynb": ("file", ["leaves the archive"]),
    "/tmp/zip_absolute.ipynb": ("file", ["absolute"]),
    "zip_link.ipynb": ("symlink", ["symbolic link"]),
    "zip_fifo.ipynb": ("fifo", ["named pipe"]),
    "zip_bomb.ipynb": ("bomb", ["larger than"]),
    "--zip_option.ipynb": ("file", ["not a student id"]),
    "zip_ok.ipynb": ("file", []),  # taken: graded like the partial sample it holds
}
# What travels beside hand-ins in an LMS export or a class folder, each holding the perfect sample (so one
# taken would show): never a student, never a row.
ZIP_EXTRAS = (
    ".ipynb_checkpoints/carol-checkpoint.ipynb",
    "carol/.ipynb_checkpoints/carol-checkpoint.ipynb",
    "__MACOSX/._carol.ipynb",
    "__MACOSX/carol.ipynb",
    ".carol.ipynb",
    "carol.ipynb~",
    "sub/.hidden.ipynb",
)
FOLDER_EXTRAS = (
    ".zzz_hidden.ipynb",
    "aab_partial.ipynb~",
    "zzz_empty.ipynb.swp",
    "aaa_perfect.ipynb.bak",
    "._lms.zip",
    "~$aaa_perfect.ipynb",  # Office's lock file
    ".~lock.aab_partial.ipynb#",  # LibreOffice's
    "aaa_perfect-Copy1.ipynb",  # JupyterLab's Duplicate, beside the original: passed over with a note
)
EXTRA_NAMES = (
    "carol-checkpoint",
    "._carol",
    ".carol",
    "carol",
    ".hidden",
    ".zzz_hidden",
    "._lms",
    "~$aaa_perfect",
    ".~lock.aab_partial.ipynb#",
    "aaa_perfect-Copy1",
)
ZIP_STUDENTS = {
    "../../zip_slip.ipynb": "zip_slip",
    "sub/../../zip_slip2.ipynb": "zip_slip2",
    "/tmp/zip_absolute.ipynb": "zip_absolute",
    "--zip_option.ipynb": "--zip_option",
}


def _write_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (kind, _) in ZIP_ENTRIES.items():
            info = zipfile.ZipInfo(name)
            if kind == "symlink":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, "/etc/shadow")
            elif kind == "fifo":
                info.external_attr = (stat.S_IFIFO | 0o644) << 16
                z.writestr(info, "")
            elif kind == "bomb":
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                z.writestr(info, b"\0" * (64 * 2**20), zipfile.ZIP_DEFLATED)
            else:
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                z.writestr(info, _sample_bytes("partial"))
        for name in ZIP_EXTRAS:
            z.writestr(name, _sample_bytes("perfect"))


# ----------------------------------------------------------------------------- graded attacks
def _with_cell(nb, after: str, code: str):
    """`code` appended to the answer cell `after` (it runs after that answer is set)."""
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == after)
    cell.source = cell.source + "\n" + textwrap.dedent(code).strip()
    return nb


# Answers no capture() writes, put on the pipe directly by a replaced capture, each on a test partial earns
# points on: grade_id -> (what the line carries, a Python bytes expression; whether the grader flags it).
FORGED = {
    "practice3-test": ('b"[" * 100_000 + b"]" * 100_000', True),  # 100,000 lists deep
    "practice4-test": ("""b'{"a": ' * 50_000 + b'1' + b'}' * 50_000""", True),  # 50,000 dicts deep
    "quiz-test": ("""b'"' + b'x' * 3_000_000 + b'"'""", True),  # a 3 MB string
    "practice2-sufficient": ("b'NaN'", True),
    "rep1-test": ("b'[1, 2'", True),  # not JSON
    "practice1-test": ("b'[1, 2]'", False),  # JSON of the wrong type: a wrong answer, 0 without a flag
}
FORGE = """
import os
from servelab.grading import capture as _c
_own = _c.capture
_payloads = {%s}
def _forged(grade_id, answer):
    if grade_id not in _payloads:
        return _own(grade_id, answer)
    data = grade_id.encode() + b"\\t" + _payloads[grade_id] + b"\\n"
    while data:
        data = data[os.write(_c._fd, data):]
_c.capture = _forged
""" % ", ".join(f"{gid!r}: {payload}" for gid, (payload, _) in FORGED.items())
# Backtracking bait for the integrity scan, each far past what a quadratic scan survives.
BAIT = {
    "score_120k": "# " + "score " * 20_000,
    "points_1m": "# " + "points " * 150_000,
    "marks_lines": ("# marks " + "x" * 60 + "\n") * 8_000,
    "spaces": "# from" + " " * 400_000 + "servelab.x",
}


THREAD_FORGES = """
import os, threading, time
from servelab.grading import capture as _c
def _forge():
    while True:
        os.write(_c._fd, b'practice5-test\\t"b"\\n')
        time.sleep(0.002)
threading.Thread(target=_forge, daemon=True).start()
"""
THREAD_REPLACES = (
    THREAD_FORGES
    + """
def _quiet(grade_id, answer, _own=_c.capture):
    if grade_id == "practice5-test":
        time.sleep(0.3)  # the test's own answer is dropped; the thread writes meanwhile
    else:
        _own(grade_id, answer)
_c.capture = _quiet
"""
)
FORK_REPLACES = """
import os, time
from servelab.grading import capture as _c
if os.fork() == 0:
    for _ in range(20000):
        os.write(_c._fd, b'practice5-test\\t"b"\\n')
        time.sleep(0.002)
    os._exit(0)
def _quiet(grade_id, answer, _own=_c.capture):
    if grade_id == "practice5-test":
        time.sleep(0.3)
    else:
        _own(grade_id, answer)
_c.capture = _quiet
"""


# Console forgery: an error message that rewinds the line (\r), erases it (ESC[2K), sets the terminal's title
# (OSC 0), hides what follows (ESC[8m), reverses it (U+202E), uses the 8-bit CSI (U+009B) and starts a line of
# its own with a forged row. Raised after the answer is set, so it costs nothing but shows in a flag.
FORGED_ROW = "  zzz_forged       graded     41.00 / 41  (1.0 s)"
CONSOLE_ESCAPES = (
    "raise MemoryError("
    + repr(
        f"\r\x1b[2K  m_console_escapes graded 41.00 / 41\x1b]0;graded by the student\x07\x1b[8m\u202e\x9b2K\n{FORGED_ROW}"
    )
    + ")"
)
# Memory: /tmp filled with 60 MiB files until it is full, and six forked children touching 600 MiB each.
TMPFS_HOG = """
import os
_blob = os.urandom(2**20) * 60
_i = 0
while True:
    with open(f"/tmp/hog{_i}", "wb") as _f:
        _f.write(_blob)
    _i += 1
"""
FORK_HOG = """
import os, time
_kids = []
for _ in range(6):
    _pid = os.fork()
    if _pid == 0:
        _b = bytearray(600 * 2**20)
        for _j in range(0, len(_b), 4096):
            _b[_j] = 1
        time.sleep(1)
        os._exit(0)
    _kids.append(_pid)
for _k in _kids:
    os.waitpid(_k, 0)
"""


# Outputs that cost nothing by their data: empty bundles with big metadata, past every per-cell and per-run cap.
OUTPUT_FLOOD = """
from IPython.display import publish_display_data
for _i in range(3000):
    publish_display_data({}, metadata={"k": "M" * 300})
for _i in range(3000):
    publish_display_data({"text/plain": "x"})
"""


def _renders_long(nb):
    """60 markdown cells, each a fenced Python block of 186,000 characters on one line (11 MB in all, under the
    collection's caps): nothing runs, but the feedback page has Pygments highlight every block."""
    nb = copy.deepcopy(nb)
    block = "```python\n" + "+-" * 93_000 + "\n```\n"
    nb.cells += [nbformat.v4.new_markdown_cell(block) for _ in range(60)]
    return nb


def _select(nb, practice2, practice3):
    return samples.fill(
        nb,
        {
            "practice2-answer": f'practice2_sufficient = "no"\npractice2_missing = {practice2!r}',
            "practice3-answer": f"practice3_problems = {practice3!r}",
        },
    )


# name -> (make the notebook, how its tests compare with a control's: {grade_id: points or "base"}, base control)
def _graded_attacks():
    partial, empty = _sample("partial"), _sample("empty")
    attacks = {
        # the integrity scan: every bait in one notebook (each is timed alone in the scan's own test)
        "scan_baits": (_with_cell(partial, "practice5-answer", "\n".join(BAIT.values())), {}, "aab_partial"),
        # scoring: six forged answers in one notebook, each costs its own test only
        "forged_answers": (_with_cell(partial, "warmup1-answer", FORGE), {gid: 0.0 for gid in FORGED}, "aab_partial"),
        # attribution: a thread or a forked process writes an answer line while the test runs
        "thread_beside_capture": (_with_cell(partial, "practice5-answer", THREAD_FORGES), {}, "aab_partial"),
        "thread_instead_of_capture": (
            _with_cell(partial, "practice5-answer", THREAD_REPLACES),
            {"practice5-test": "perfect"},
            "aab_partial",
        ),
        "fork_instead_of_capture": (
            _with_cell(partial, "practice5-answer", FORK_REPLACES),
            {"practice5-test": "perfect"},
            "aab_partial",
        ),
        # the rubric: every option, or none
        "select_all_empty": (
            _select(empty, PRACTICE2_OPTIONS, PRACTICE3_OPTIONS),
            {"practice2-sufficient": "perfect"},
            "zzz_empty",
        ),
        "select_none_empty": (_select(empty, [], []), {"practice2-sufficient": "perfect"}, "zzz_empty"),
        "select_all_partial": (
            _select(partial, PRACTICE2_OPTIONS, PRACTICE3_OPTIONS),
            {"practice2-missing": 0.0, "practice3-test": 0.0},
            "aab_partial",
        ),
        # the console: control characters and a forged row in an error message
        "console_escapes": (_with_cell(partial, "warmup1-answer", CONSOLE_ESCAPES), {}, "aab_partial"),
        # memory: the sandbox's /tmp and its processes together, in one cgroup
        "tmpfs_hog": (_with_cell(partial, "warmup1-answer", TMPFS_HOG), {}, "aab_partial"),
        "fork_hog": (_with_cell(partial, "warmup1-answer", FORK_HOG), {}, "aab_partial"),
        # outputs: counted by their whole JSON and their number, per cell and per run
        "output_flood": (_with_cell(partial, "warmup1-answer", OUTPUT_FLOOD), {}, "aab_partial"),
        # the per-student steps: a page that takes minutes to render
        "renders_long": (_renders_long(partial), {}, "aab_partial"),
    }
    return {f"m_{name}": value for name, value in attacks.items()}


# ----------------------------------------------------------------------------- one run for the corpus
def _rows(out: Path) -> dict[str, str]:
    lines = (out / "grades.csv").read_text().splitlines(keepends=True)
    return {line.split(",")[3]: line for line in lines[1:]}


def _controls(folder: Path) -> None:
    folder.mkdir(parents=True)
    for student, sample in CONTROLS.items():
        (folder / f"{student}.ipynb").write_bytes(_sample_bytes(sample))


INSTRUCTOR_UID = 4242  # a user with no passwd entry and no home: an instructor's account at its barest


def _grade_from_a_copy_under_tmp(submissions: Path, out: Path) -> dict:
    """Grade `submissions` with `python -m servelab.grading.pipeline` run from a copy of the checkout and its
    Python environment in /tmp/servelab clone .../, as INSTRUCTOR_UID when the tests run as root; results to `out`."""
    venv = Path(sys.prefix)
    with tempfile.TemporaryDirectory(prefix="servelab clone ", dir="/tmp") as where:
        clone = Path(where) / "servelab"
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO_DIR,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for name in filter(None, (f.decode() for f in files)):
            if (REPO_DIR / name).is_file():
                (clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO_DIR / name, clone / name)
        # The environment, hard-linked where it can be (the same disk), so the copy costs seconds.
        link = subprocess.run(["cp", "-al", str(venv), str(clone / ".venv")], capture_output=True)
        if link.returncode != 0:
            return {
                "skipped": f"the Python environment cannot be hard-linked under /tmp: {link.stderr.decode()[-200:]}"
            }
        shutil.copytree(submissions, clone / "subs")
        python = clone / ".venv" / "bin" / "python"
        env = {
            "PATH": f"{python.parent}:/usr/bin:/bin",
            "PYTHONPATH": str(clone / "src"),
            "HOME": where,
            "LANG": "C.UTF-8",
            "USER": "instructor",
        }
        as_user = []
        if (
            os.geteuid() == 0
        ):  # the copied checkout becomes the instructor's; the hard-linked environment stays as it is
            os.chown(where, INSTRUCTOR_UID, INSTRUCTOR_UID)
            for folder, dirs, names in os.walk(clone):
                if Path(folder) == clone:
                    dirs.remove(".venv")
                for name in [folder, *(os.path.join(folder, n) for n in names)]:
                    os.chown(name, INSTRUCTOR_UID, INSTRUCTOR_UID, follow_symlinks=False)
            as_user = ["setpriv", f"--reuid={INSTRUCTOR_UID}", f"--regid={INSTRUCTOR_UID}", "--clear-groups"]
        who = [*as_user, str(python), "-c", "import os, servelab; print(os.getuid(), servelab.__file__)"]
        uid, servelab_file = subprocess.run(who, env=env, capture_output=True, text=True).stdout.split(" ", 1)
        result = subprocess.run(
            [
                *as_user,
                str(python),
                "-m",
                "servelab.grading.pipeline",
                "--submissions",
                str(clone / "subs"),
                "--course",
                str(clone / "grading" / "course"),
                "--out",
                str(clone / "grading" / "out"),
                "--cell-timeout",
                "8",
                "--submission-timeout",
                "60",
                LESSON.name,
            ],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if (clone / "grading" / "out").exists():
            shutil.copytree(clone / "grading" / "out", out)
        return {
            "returncode": result.returncode,
            "output": result.stdout[-2000:] + result.stderr[-3000:],
            "where": where,
            "uid": int(uid),
            "servelab": servelab_file.strip(),
        }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    quiet = lambda *a: None  # noqa: E731
    _controls(tmp / "controls" / LESSON.name)
    # The class without attackers is graded from a copy of the checkout under /tmp, by a user who is not root:
    # one run that is both the controls' baseline and the proof that a checkout works anywhere.
    copy = _grade_from_a_copy_under_tmp(tmp / "controls", tmp / "out-controls")
    (tmp / "copy.json").write_text(json.dumps(copy))
    if copy.get("skipped") or copy["returncode"] != 0:
        pipeline.run(
            tmp / "controls",
            tmp / "course-controls",
            tmp / "out-controls",
            assignments=[LESSON],
            cell_timeout=8,
            submission_timeout=60,
            log=quiet,
        )
    folder = tmp / "hostile" / LESSON.name
    _controls(folder)
    for name, (make, _) in COLLECTION.items():
        make(folder / name, tmp)
    _write_zip(folder / "lms_export.zip")
    for name in FOLDER_EXTRAS:
        (folder / name).write_bytes(_sample_bytes("perfect"))
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / ".ipynb_checkpoints" / "aab_partial-checkpoint.ipynb").write_bytes(_sample_bytes("perfect"))
    graded = _graded_attacks()
    for student, (nb, _, _) in graded.items():
        nbformat.write(nb, folder / f"{student}.ipynb")
    console: list[str] = []
    start = time.monotonic()
    results = pipeline.run(
        tmp / "hostile",
        tmp / "course-hostile",
        tmp / "out-hostile",
        assignments=[LESSON],
        cell_timeout=8,
        submission_timeout=60,
        feedback_timeout=FEEDBACK_TIMEOUT_S,
        log=console.append,
    )
    wall = time.monotonic() - start
    (tmp / "console.json").write_text(json.dumps(console))
    return {g.student: g for g in results}, tmp, wall, len(graded) + len(CONTROLS) + 1


def test_the_run_ends_in_bounded_time_and_writes_grades(corpus):
    results, tmp, wall, graded = corpus
    # each graded student's autograde and feedback page, and the one page stopped at its time limit
    assert wall < 120 + (SECONDS_PER_SUBMISSION + SECONDS_PER_PAGE) * graded + FEEDBACK_TIMEOUT_S, wall
    assert (tmp / "out-hostile" / "grades.csv").exists()
    scores = json.loads((tmp / "out-hostile" / "scores.json").read_text())
    assert {s["student"] for s in scores} == set(results)


def test_the_controls_rows_are_byte_for_byte_those_of_a_class_without_attackers(corpus):
    results, tmp, _, _ = corpus
    alone, beside = _rows(tmp / "out-controls"), _rows(tmp / "out-hostile")
    assert set(alone) == set(CONTROLS)
    for student in CONTROLS:
        assert beside[student] == alone[student], student
        assert results[student].flags == [] and results[student].status == "graded", results[student].flags
    assert float(alone["aaa_perfect"].split(",")[9]) == json.loads(samples.EXPECTED.read_text())["lesson25"]["perfect"]


@pytest.mark.parametrize("name", list(COLLECTION))
def test_collection_refuses_what_is_not_a_regular_notebook_with_a_safe_name(corpus, name):
    results, tmp, _, _ = corpus
    g = results[name[: -len(".ipynb")]]
    assert g.status == "refused" and g.score == 0, (g.status, g.log_tail)
    assert any(word in g.reason for word in COLLECTION[name][1]), g.reason
    assert g.flags and g.flags[0].startswith("refused at collection"), g.flags
    assert name[: -len(".ipynb")] not in _rows(tmp / "out-hostile")  # never handed to nbgrader
    scores = (tmp / "out-hostile" / "scores.json").read_text()
    assert "root:" not in scores  # nothing of /etc/shadow (the grader may run as root)


@pytest.mark.parametrize("entry", list(ZIP_ENTRIES))
def test_an_archive_is_read_entry_by_entry_and_only_regular_entries_are_taken(corpus, entry):
    results, tmp, _, _ = corpus
    student = ZIP_STUDENTS.get(entry, entry.rsplit("/", 1)[-1][: -len(".ipynb")])
    g = results[student]
    words = ZIP_ENTRIES[entry][1]
    if not words:
        assert g.status == "graded" and g.tests == pytest.approx(results["aab_partial"].tests)
        return
    assert g.status == "refused" and any(word in g.reason for word in words), g.reason
    for slipped in ("zip_slip.ipynb", "zip_slip2.ipynb"):  # nothing was written outside the course
        assert not list(tmp.parent.glob(slipped)) and not list(tmp.glob(f"**/{slipped}"))
    assert not Path("/tmp/zip_absolute.ipynb").exists()


@pytest.mark.parametrize("student", list(_graded_attacks()))
def test_a_graded_attack_scores_what_its_answers_score(corpus, student):
    results, _, _, _ = corpus
    _, changed, base = _graded_attacks()[student]
    g, control = results[student], results[base]
    assert g.status == "graded", g.log_tail
    expected = dict(control.tests)
    for grade_id, points in changed.items():
        expected[grade_id] = results["aaa_perfect"].tests[grade_id] if points == "perfect" else points
    if student.startswith("m_select"):
        assert all(g.tests[s] == 0 for s in SELECTIONS), g.tests
    assert g.tests == pytest.approx(expected), {
        k: (g.tests.get(k), v) for k, v in expected.items() if g.tests.get(k) != v
    }
    if student == "m_forged_answers":
        for grade_id, (_, flagged) in FORGED.items():
            assert flagged == any(f.startswith(f"{grade_id}:") and "scored 0" in f for f in g.flags), (
                grade_id,
                g.flags,
            )


# ----------------------------------------------------------------------------- the console
@pytest.mark.parametrize(
    "raw",
    ["\r", "\x1b[2K", "\x1b]0;title\x07", "\x1b[8m", "\x9b2K", "\x00", "\x7f", "\n", "\t", "\u202e", "\u2066", "\u200f",
     "\u2028", "\ufeff", "\ud800"],
)  # fmt: skip
def test_printable_escapes_every_control_character_and_keeps_text(raw):
    text = printable(f"ana{raw}41.00")
    assert text.isprintable() and raw not in text and text.startswith("ana\\") and text.endswith("41.00"), text
    assert printable(text) == text  # escaping twice changes nothing
    plain = "élève 41.00 / 41 — ‘ok’ 模型 \\x1b typed"
    assert printable(plain) == plain


def test_console_lines_are_text_whatever_a_submission_raised(corpus):
    results, tmp, _, _ = corpus
    console = json.loads((tmp / "console.json").read_text())
    assert console and all(line.isprintable() for line in console), [ascii(x) for x in console if not x.isprintable()]
    mine = [line for line in console if line.startswith("  m_console_escapes ")]
    assert len(mine) == 1, mine  # one line: the newline in the message did not start a forged row
    real = f"graded    {results['aab_partial'].score:6.2f} / 41"
    assert mine[0].startswith(f"  m_console_escapes {real}"), mine[0]
    assert all(
        escaped in mine[0] for escaped in ("\\x0d", "\\x1b[2K", "\\x1b]0;", "\\x07", "\\x1b[8m", "\\u202e", "\\x9b")
    ), mine[0]
    assert not any(line.lstrip().startswith("zzz_forged") for line in console)
    # the flags, kept in scores.json and read by the class report, are the same text
    for g in json.loads((tmp / "out-hostile" / "scores.json").read_text()):
        assert all(isinstance(f, str) and f.isprintable() for f in g["flags"]), (g["student"], g["flags"])
        assert g["reason"].isprintable(), g["reason"]
    assert any("MemoryError" in f and "\\x1b[2K" in f for f in results["m_console_escapes"].flags)


# ----------------------------------------------------------------------------- memory
@pytest.mark.parametrize(
    "student, flag, least",
    [
        ("m_tmpfs_hog", "filled the sandbox's disk", sandbox.TMP_BYTES),  # /tmp's pages count in the cgroup
        ("m_fork_hog", "reached its memory limit", 600 * 2**20),  # one child's 600 MiB, at least
    ],
)
def test_a_memory_hog_stays_within_the_cgroup_its_sandbox_runs_in(corpus, student, flag, least):
    results, _, _, _ = corpus
    limits = sandbox.limits_in_force()
    if limits.startswith("no cgroup"):
        pytest.skip(limits)
    g = results[student]
    assert g.status == "graded" and any(flag in f for f in g.flags), g.flags
    # the cgroup's own peak (memory.max_usage_in_bytes or memory.peak), read by the grader when the run ended
    assert least <= g.peak_memory <= sandbox.CGROUP_LIMITS.memory_bytes, g.peak_memory
    # (that the cgroup is removed after the run, a child left behind with it: test_grading_sandbox.py)


# ----------------------------------------------------------------------------- per-student steps, extras
def test_a_page_that_renders_for_minutes_costs_its_own_feedback_alone(corpus):
    results, tmp, _, _ = corpus
    g = results["m_renders_long"]
    assert g.status == "graded", g.log_tail
    assert any(f.startswith("feedback:") and f"longer than {FEEDBACK_TIMEOUT_S} s" in f for f in g.flags), g.flags
    assert "m_renders_long" in _rows(tmp / "out-hostile")  # the grade it was given is kept
    pages = tmp / "out-hostile" / "feedback" / LESSON.name
    assert not (pages / "m_renders_long.html").exists()
    for student, other in results.items():
        if other.status == "graded" and student != "m_renders_long":
            assert (pages / f"{student}.html").exists(), student
            assert not any(f.startswith("feedback:") for f in other.flags), (student, other.flags)


def test_an_output_flood_is_cut_in_the_sandbox_and_formgrader_draws_what_is_left(corpus):
    """85,000 empty bundles once took nbgrader's processes to 741 MB and froze formgrader for minutes."""
    from servelab.grading import pages, runner

    results, tmp, _, _ = corpus
    g = results["m_output_flood"]
    assert any("output cut" in f for f in g.flags), g.flags
    graded = tmp / "course-hostile" / "autograded"
    nb = nbformat.read(graded / "m_output_flood" / LESSON.name / f"{LESSON.notebook_id}.ipynb", as_version=4)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert len(outputs) <= runner.MAX_CELL_OUTPUTS + len(nb.cells), len(outputs)
    assert sum(len(json.dumps(o)) for o in outputs) < runner.MAX_RUN_OUTPUT_CHARS
    assert pages.too_large_to_draw(nb) is None  # the instructor can open it
    for student in CONTROLS:
        assert (
            pages.too_large_to_draw(nbformat.read(graded / student / LESSON.name / f"{LESSON.notebook_id}.ipynb", 4))
            is None
        )
    long = nbformat.read(graded / "m_renders_long" / LESSON.name / f"{LESSON.notebook_id}.ipynb", as_version=4)
    assert "markdown and raw cells hold" in (pages.too_large_to_draw(long) or "")  # refused, not drawn for minutes


def test_checkpoints_hidden_files_and_backups_are_never_students(corpus):
    results, tmp, _, _ = corpus
    rows = _rows(tmp / "out-hostile")
    for name in EXTRA_NAMES:
        assert name not in results and name not in rows, name
    assert not [g for g in results.values() if g.status == "refused" and "~" in g.student]  # no failing exit
    console = json.loads((tmp / "console.json").read_text())
    assert any("passed over 'aaa_perfect-Copy1'" in line and "JupyterLab's copy" in line for line in console)
    assert not [s for s in results if "checkpoint" in s or s.startswith((".", "_"))]
    assert not any(".ipynb_checkpoints" in g.reason or "__MACOSX" in g.reason for g in results.values())


@pytest.mark.parametrize("bait", list(BAIT))
def test_the_integrity_scan_is_linear_on_backtracking_bait(bait):
    # A 1 MB line of "points" with no digit: the pattern this replaced took about 35 minutes on it here.
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BAIT[bait])])
    start = time.monotonic()
    flags = pipeline.integrity_flags(nb)
    assert time.monotonic() - start < pipeline.MAX_SCAN_S and "prints or displays a score" not in flags
    nb.cells[0].source += " 1" if bait != "marks_lines" else "# marks 1"
    if bait != "spaces":
        assert "prints or displays a score" in pipeline.integrity_flags(nb)


def test_the_integrity_scan_reads_a_capped_amount():
    huge = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\n" * (pipeline.MAX_SCAN_CHARS // 4))])
    assert "the integrity scan read the first" in pipeline.integrity_flags(huge)[0]


# ----------------------------------------------------------------------------- a checkout anywhere
def test_a_copy_of_the_checkout_under_tmp_in_a_path_with_a_space_grades_in_the_sandbox_as_a_non_root_user(corpus):
    """The controls' class was graded from a copy of the checkout and its Python environment under /tmp (the
    sandbox's own /tmp is a fresh tmpfs), in a folder whose name has a space, by a user who is not root."""
    _, tmp, _, _ = corpus
    copy = json.loads((tmp / "copy.json").read_text())
    if copy.get("skipped"):
        pytest.skip(copy["skipped"])
    base = Path(os.path.realpath(sys.base_prefix))
    closed = [str(p) for p in base.parents if not os.stat(p).st_mode & 0o001]
    if copy["uid"] != 0 and closed:
        # The sandbox binds the environment's base Python at its own path, and a user who may not pass
        # through the closed folder above it (root's home, for a pyenv Python) cannot have it bound: the run
        # is refused at once with what to open, and grades nothing (studentenv.open_python's case for a class).
        assert copy["returncode"] != 0 and "readable by every user" in copy["output"], copy["output"]
        return
    assert copy["returncode"] == 0, copy["output"]
    assert copy["servelab"].startswith(copy["where"]) and " " in copy["where"] and copy["where"].startswith("/tmp/")
    assert copy["uid"] != 0
    # the run says what bounded each submission: a cgroup, or (a user who may make none) the stated fallback
    said = next(line for line in copy["output"].splitlines() if line.startswith("limits: "))
    assert said.startswith("limits: cgroup v") or (
        said.startswith("limits: no cgroup per submission") and f"{sandbox.CGROUP_MODE}=required" in said
    ), said
    scores = json.loads((tmp / "out-controls" / "scores.json").read_text())
    assert {(s["student"], s["status"], s["run"]) for s in scores} == {(c, "graded", "ok") for c in CONTROLS}


# ----------------------------------------------------------------------------- nbgrader collect on a hub
def test_nbgrader_collect_from_a_hostile_inbound_takes_regular_files_only(tmp_path):
    """A hub's inbound is writable by every student: links, pipes, hard links and glob names in it (real nbgrader collect)."""
    root = course.make(tmp_path / "course")
    inbound = tmp_path / "exchange" / "servelab" / "inbound"
    stamp = "2026-12-01 08:00:00.000000 UTC"
    carol = inbound / f"carol+{LESSON.name}+{stamp}"
    carol.mkdir(parents=True)
    (carol / LESSON.notebook).write_bytes(_sample_bytes("partial"))
    # as `nbgrader submit` names it on a hub: a login name, and a random part after the time stamp
    dan = inbound / f"sl-dan+{LESSON.name}+{stamp}+q1Zr-9xY_4aB"
    dan.mkdir()
    (dan / LESSON.notebook).write_bytes(_sample_bytes("perfect"))
    alice = inbound / f"alice+{LESSON.name}+{stamp}"
    alice.mkdir()
    os.symlink(LESSON.source, alice / LESSON.notebook)  # the solutions, through a link
    os.mkfifo(alice / "notes.ipynb")  # would block a plain copy
    shutil.copy(LESSON.source, tmp_path / "solution-copy.ipynb")
    os.link(tmp_path / "solution-copy.ipynb", alice / "linked.ipynb")
    (alice / "timestamp.txt").write_text(stamp)
    os.symlink(LESSON.source.parent, inbound / f"bob+{LESSON.name}+{stamp}")  # a whole folder, through a link
    glob_name = inbound / f"c*+{LESSON.name}+{stamp}"
    glob_name.mkdir()
    (glob_name / LESSON.notebook).write_bytes(_sample_bytes("perfect"))
    (inbound / f"mallory+{LESSON.name}+garbage").mkdir()  # a time stamp nbgrader's own parse stops on
    # The course's own config (grading/nbgrader_config.py), as a hub's instructor server loads it.
    result = course.nbgrader(
        root,
        "collect",
        LESSON.name,
        f"--Exchange.root={tmp_path / 'exchange'}",
        "--CollectApp.check_owner=False",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    submitted = root / "submitted"
    assert (submitted / "carol" / LESSON.name / LESSON.notebook).read_bytes() == _sample_bytes("partial")
    assert sorted(p.name for p in (submitted / "alice" / LESSON.name).iterdir()) == ["timestamp.txt"]
    assert (submitted / "sl-dan" / LESSON.name / LESSON.notebook).read_bytes() == _sample_bytes("perfect")
    assert sorted(p.name for p in submitted.iterdir()) == ["alice", "carol", "sl-dan"]
    log = result.stderr
    assert "symbolic link" in log and "named pipe" in log and "hard link" in log and "not a student id" in log, log[
        -3000:
    ]
    assert "'mallory'" in log and "'garbage' is not a time" in log, log[-3000:]
