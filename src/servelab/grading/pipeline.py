"""The instructor's grading pipeline, run for real on submissions.

    python -m servelab.grading.pipeline                    # the samples in grading/submissions/
    python -m servelab.grading.pipeline --submissions DIR  # DIR/<assignment>/<student>.ipynb

Steps, all nbgrader's own, in a throwaway course directory (grading/course/,
ignored by git) whose source_directory is solutions/:

1. generate_assignment, for every assignment in solutions/ (fills the gradebook);
2. collection (collection.py): only regular files under safe student ids, and the
   regular entries of any .zip, are taken; each refusal is that student's result
   (status "refused"). What is taken is zipped the way an LMS hands it over and
   nbgrader's zip_collect files it in submitted/<student>/<assignment>/;
3. autograde, one student at a time (`grade_submission`), each in its own nbgrader
   process: test cells restored from the gradebook, the notebook run in the
   bubblewrap sandbox (sandbox.py) in a cgroup of its own, the captured answers
   compared with the keys in grading/keys/ in nbgrader's process (trusted.py),
   grades saved by nbgrader;
4. generate_feedback (hidden tests removed, see feedback.py), one student at a time
   (`generate_feedback --student`), each with its own time limit (FEEDBACK_TIMEOUT_S);
5. export -> grading/out/grades.csv, plus grading/out/scores.json with each
   test's points, each submission's status and integrity flags, and the
   feedback HTML under grading/out/feedback/.

Every nbgrader step that touches a submission runs for that one student, in its own
process group and, where the machine has cgroups, its own cgroup (`step_limits`: nbgrader's
own process under NBGRADER_STEP_MEMORY, with the sandbox's cgroup inside it for autograde),
with its own time limit: a step that fails or runs out of time is a
flag (or a "failed" status) on that student's row, and the class's grades.csv,
scores.json and every other student's feedback are written. The instructor-side steps
(generate_assignment, zip_collect, export) touch no student code; their limit
(INSTRUCTOR_STEP_TIMEOUT_S) is far past what a busy machine needs, and running past
it stops the run with PipelineError naming the step and the machine's load, after
scores.json holds every grade given so far. Everything a submission shaped is
printed through console.printable.

Autograde never starts the vLLM engine: the sandbox sets NBGRADER_EXECUTION, which
the lab checks. Where bubblewrap cannot run, grading stops before the first
submission with the fix, unless --trusted says every submission is trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from servelab.grading import cgroup, collection, course, runner, sandbox, trusted
from servelab.grading.console import printable
from servelab.paths import REPO_DIR

COURSE = REPO_DIR / "grading" / "course"
OUT = REPO_DIR / "grading" / "out"
SUBMISSIONS = REPO_DIR / "grading" / "submissions"
GRADER_MARGIN_S = 120  # nbgrader's own steps around the run (gradebook, restore, scoring)
# One student's generate_feedback: about 1.5 s for a lesson here (nbgrader's start included); past this
# limit the student's row says no feedback page was written, and the class goes on.
FEEDBACK_TIMEOUT_S = 120
# One student's nbgrader process (autograde's scoring and saving, generate_feedback's page): a graded lesson
# peaks near 105 MiB here; a notebook at the runner's output caps (2,000 outputs, 4,000,000 characters) fits
# too. Past it the step is killed by its cgroup and that student's row says so; the class goes on.
NBGRADER_STEP_MEMORY = 768 * 2**20
NBGRADER_STEP_PIDS = 64


def step_limits(with_sandbox: bool) -> cgroup.Limits:
    """One per-student nbgrader step's cgroup: its own process, plus (autograde, on cgroup v1, where the
    sandbox's cgroup is made inside it) the sandbox's whole limits."""
    inner = sandbox.CGROUP_LIMITS if with_sandbox else cgroup.Limits(0, 0, 0.0)
    return cgroup.Limits(
        memory_bytes=NBGRADER_STEP_MEMORY + inner.memory_bytes,
        pids=NBGRADER_STEP_PIDS + inner.pids,
        cpus=1.0 + inner.cpus,
    )


# generate_assignment, zip_collect and export read only the instructor's notebooks and the gradebook
# (seconds each here); the limit is for a machine that is stuck, not one that is busy.
INSTRUCTOR_STEP_TIMEOUT_S = 1800


class PipelineError(RuntimeError):
    """An instructor-side step failed or ran out of time; the message names it and what to do."""


# Code in a submission that reaches for the grading machinery, the key, the
# interpreter's internals or the machine. Flagged for a person to look at; the
# sandbox and the grader's own scoring are what keep it from mattering.
# The text is hostile, so each pattern is literals and single runs (\s+, \w+) whose
# next character is one the run cannot match: the regex engine never backtracks
# more than one run, and the scan is linear in the text's length.
SUSPICIOUS = {
    label: re.compile(pattern)
    for label, pattern in {
        "imports the grading package": r"servelab\.grading|from\s+servelab\s+import\s+grading",
        "opens a database": r"sqlite3|gradebook",
        "reads notebooks or the course's files": r"\.ipynb|solutions|submissions|/proc/",
        "patches modules or builtins": r"sys\.modules|builtins|__import__|importlib|setattr\s*\(|"
        r"\b(?:math|json|os|sys)\.\w+\s*=[^=]",
        "changes how cells run or display": r"input_transformers|register_magic|events\.register|"
        r"get_ipython\(\)\.(?:run_cell|ast_|display)|displayhook|display_pub|"
        r"sys\.std(?:out|err)\s*=",
        "reaches for C-level access": r"ctypes|cffi",
        "starts processes or signals": r"subprocess|multiprocessing|os\.(?:system|popen|fork|exec|spawn|kill|_exit)|signal\.",
        "opens network connections": r"\bsocket\b|urllib|http\.client|requests\.",
    }.items()
}
SCORE_WORD = re.compile(r"(?i)\b(?:score|points|marks)\b")  # then a digit later on the same line: "prints a score"
DIGIT = re.compile(r"\d")
MAX_SCAN_CHARS = 2_000_000  # code scanned per submission; past it the flag says the rest was not read
MAX_SCAN_S = 5.0  # the scan's time budget (linear patterns take well under a second on MAX_SCAN_CHARS)


@dataclass
class Graded:
    """One submission's outcome."""

    assignment: str
    student: str
    status: str  # graded | failed (the grader itself failed: see log_tail) | refused (at collection: see reason)
    seconds: float
    score: float = 0.0
    max_score: float = 0.0
    tests: dict = field(default_factory=dict)  # grade_id -> auto points
    needs_manual_grade: bool = False
    flags: list = field(default_factory=list)
    run: str = ""  # how the notebook's run in the sandbox ended: ok | kernel died | timed out | ...
    run_seconds: float = 0.0  # of `seconds`, the notebook's run (sandbox, runner, kernel, cells)
    feedback: dict = field(default_factory=dict)  # grade_id -> the checker's feedback
    log_tail: str = ""
    reason: str = ""  # why a hand-in was refused, and what to do
    peak_memory: int = 0  # bytes: the most its sandbox's cgroup held at once (0 where no cgroup was made)


def integrity_flags(nb) -> list[str]:
    """What a submission's code cells reach for (every code cell: metadata can lie about which are tests)."""
    text = "\n".join(
        c.get("source", "") for c in nb.cells if c.get("cell_type") == "code" and isinstance(c.get("source", ""), str)
    )
    flags = []
    if len(text) > MAX_SCAN_CHARS:
        flags.append(
            f"its code cells hold {len(text):,} characters; the integrity scan read the first {MAX_SCAN_CHARS:,}"
        )
        text = text[:MAX_SCAN_CHARS]
    deadline = time.monotonic() + MAX_SCAN_S
    flags += [label for label, pattern in SUSPICIOUS.items() if pattern.search(text)]
    if "raw=True" in text or _prints_a_score(text, deadline):
        flags.append("prints or displays a score")
    if time.monotonic() > deadline:
        flags.append(f"the integrity scan ran past {MAX_SCAN_S:g} s and stopped; a person should read the code")
    return flags


def _prints_a_score(text: str, deadline: float) -> bool:
    """A line naming a score, points or marks with a digit after it: one pass per line, no backtracking."""
    for line in text.split("\n"):
        word = SCORE_WORD.search(line)
        if word and DIGIT.search(line, word.end()):
            return True
        if time.monotonic() > deadline:
            return False
    return False


def scan(path: Path) -> list[str]:
    """The integrity flags of a collected notebook, read as a regular file with the collection's cap."""
    try:
        return integrity_flags(nbformat.reads(collection.read_regular(path).decode("utf-8"), as_version=4))
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
        return [f"not a readable notebook ({type(exc).__name__})"]


def collect(
    root: Path, assignment: course.Assignment, folder: Path, log=lambda *a: None
) -> tuple[list[str], list[Graded]]:
    """Take what the collection rules take from a folder (collection.py), zip it as an LMS would and let
    nbgrader's zip_collect file it; the students taken, and a result for each one refused. What collection
    passed over that could look like a student (a JupyterLab copy) is said in `log`."""
    taken, refused = [], []
    notes: list[str] = []
    handed_in = collection.gather(folder, assignment.notebook, notes)
    for note in notes:
        log(f"{assignment.name}: {note}")
    for h in handed_in:
        if h.refused:
            refused.append(
                Graded(
                    assignment.name,
                    h.student,
                    "refused",
                    0.0,
                    reason=printable(h.reason),
                    flags=[printable(f"refused at collection: {h.reason}")],
                )
            )
        else:
            taken.append(h)
    archive = root / "downloaded" / assignment.name / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive / f"{assignment.name}-submissions.zip", "w") as z:
        for h in taken:
            if h.data is None:  # taken holds only the hand-ins that were not refused
                raise RuntimeError(f"{h.student}: a refused hand-in was taken")
            z.writestr(f"{h.student}__{assignment.notebook}", h.data)
    if taken:
        # The file names follow FileNameCollectorPlugin.named_regexp in grading/nbgrader_config.py.
        instructor_step(root, "zip_collect", assignment.name, "--force")
    return [h.student for h in taken], refused


def instructor_step(root: Path, *args: str) -> subprocess.CompletedProcess:
    """An nbgrader step that runs no student code (generate_assignment, zip_collect, export), or PipelineError
    saying what failed: its own error, or a time limit met on a machine as loaded as it says."""
    what = " ".join(a for a in args if not a.startswith("--"))
    try:
        result = course.nbgrader(root, *args, timeout=INSTRUCTOR_STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        raise PipelineError(
            f"nbgrader {what} did not finish in {INSTRUCTOR_STEP_TIMEOUT_S} s (load average {load} on "
            f"{os.cpu_count()} cores); it reads only the course's own files, so the machine is stuck or "
            "overloaded: grade again when it is quieter (every grade given before this step is in scores.json)"
        ) from None
    if result.returncode != 0:
        raise PipelineError(f"nbgrader {what} failed:\n{printable(result.stderr[-3000:], keep_newlines=True)}")
    return result


MEMORY_STOPPED = "[stopped by its cgroup's memory limit]"


def _bounded(cmd: list[str], root: Path, timeout: float, with_sandbox: bool = False) -> tuple[int | None, float, str]:
    """Run one per-student nbgrader step in its own process group and cgroup (step_limits), killed whole at
    `timeout`; (exit status, or None when it ran out of time; seconds; its output, ending with MEMORY_STOPPED
    when its cgroup's memory limit killed it). Where no cgroup can be made the step runs without one, as the
    sandbox does (sandbox.limits_in_force says why)."""
    start = time.monotonic()
    env = course.nbgrader_env()
    try:
        group: cgroup.Cgroup | None = cgroup.Cgroup(step_limits(with_sandbox))
    except cgroup.CgroupUnavailable:
        group = None
    if group is not None and group.version == 2 and "SERVELAB_CGROUP_ROOT" not in env:
        # v2 puts no cgroup of its own under one holding processes: the sandbox's goes beside the step's
        env["SERVELAB_CGROUP_ROOT"] = str(group.paths["memory"].parent)

    def child() -> None:
        runner.die_with_parent()  # a grader killed mid-run leaves no nbgrader writing grades behind it
        if group is not None:
            group.enter()

    try:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            preexec_fn=child,
        )
        try:
            log, _ = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            code = None
        log = log or ""
        if group is not None and code != 0 and group.oom_kills():
            log += f"\n{MEMORY_STOPPED}"
    finally:
        if group is not None:
            group.close()
    return code, time.monotonic() - start, log


def autograde(
    root: Path,
    assignment: course.Assignment,
    student: str,
    *,
    cell_timeout: int,
    submission_timeout: int,
    trusted_submissions: bool = False,
) -> tuple[str, float, str]:
    """nbgrader autograde for one submission, in its own process group; (status, seconds, log tail)."""
    collection.check_student_id(student)  # nbgrader reads --student as a glob: one safe id, never a pattern
    cmd = course.nbgrader_command(
        root,
        "autograde",
        assignment.name,
        f"--student={student}",
        "--force",
        f"--SandboxedExecute.timeout={cell_timeout}",
        f"--SandboxedExecute.run_timeout={submission_timeout}",
        f"--SandboxedExecute.trusted={trusted_submissions}",
    )
    code, seconds, log = _bounded(cmd, root, submission_timeout + GRADER_MARGIN_S, with_sandbox=True)
    if log.endswith(MEMORY_STOPPED):
        log += f" (nbgrader's autograde process may hold {NBGRADER_STEP_MEMORY >> 20} MiB beside the sandbox)"
    if code is None:
        log += f"\n[autograde ran past {submission_timeout + GRADER_MARGIN_S} s and was stopped]"
    return ("graded" if code == 0 else "failed"), seconds, log[-2000:]


def feedback(root: Path, assignment: course.Assignment, student: str, timeout: float = FEEDBACK_TIMEOUT_S) -> str:
    """nbgrader generate_feedback for one student, bounded by `timeout`; "" when its page was written, else why not."""
    collection.check_student_id(student)
    cmd = course.nbgrader_command(root, "generate_feedback", assignment.name, f"--student={student}", "--force")
    code, seconds, log = _bounded(cmd, root, timeout)
    html = root / "feedback" / student / assignment.name / f"{assignment.notebook_id}.html"
    if code is None:
        return f"its feedback page took longer than {timeout:g} s to render and was stopped; no page was written"
    if code != 0 and log.endswith(MEMORY_STOPPED):
        return (
            f"its feedback page needed more than the {NBGRADER_STEP_MEMORY >> 20} MiB generate_feedback may hold "
            "and was stopped; no page was written"
        )
    if code != 0 or not html.exists():
        said = [line for line in log.strip().splitlines() if "ERROR" in line or "Error" in line][-1:] or ["no output"]
        return f"generate_feedback failed on it ({printable(said[0], limit=200)}); no page was written"
    return ""


def gradebook_url(root: Path) -> str:
    """The gradebook nbgrader writes: SERVELAB_GRADEBOOK_URL (PostgreSQL for a class), else SQLite in the course."""
    return os.environ.get("SERVELAB_GRADEBOOK_URL") or f"sqlite:///{root / 'gradebook.db'}"


def grade_submission(
    root: Path,
    assignment: course.Assignment,
    student: str,
    flags: list[str] | None = None,
    *,
    cell_timeout: int = sandbox.CELL_TIMEOUT_S,
    submission_timeout: int = sandbox.SUBMISSION_TIMEOUT_S,
    trusted_submissions: bool = False,
) -> Graded:
    """Grade one student's collected submission in a course directory; the result, as the gradebook holds it.

    The course at `root` has had generate_assignment and the submission is in
    submitted/<student>/<assignment>/. `flags`: its integrity flags when already
    scanned (the parallel graders scan before they claim); otherwise it is scanned here.
    """
    problem = collection.student_id_problem(student)
    path = root / "submitted" / student / assignment.name / assignment.notebook
    if problem is None and os.path.lexists(path):  # a hub's collect takes files, not notebooks: the rules again
        # (a notebook that is missing is nbgrader's to score: every test 0)
        try:
            problem = collection.notebook_problem(collection.read_regular(path))
        except collection.Refused as exc:
            problem = str(exc)
    if problem:
        problem = printable(problem)
        return Graded(assignment.name, student, "refused", 0.0, reason=problem, flags=[f"refused: {problem}"])
    if flags is None:
        flags = scan(path)
    status, seconds, tail = autograde(
        root,
        assignment,
        student,
        cell_timeout=cell_timeout,
        submission_timeout=submission_timeout,
        trusted_submissions=trusted_submissions,
    )
    report = trusted.read_report(
        root / trusted.REPORT_DIR / assignment.name / student / f"{assignment.notebook_id}.json"
    )
    flags = [printable(f) for f in report.get("flags", []) + flags]
    grades = read_grades(root, assignment, student) if status == "graded" else {}
    g = Graded(
        assignment.name,
        student,
        status,
        round(seconds, 2),
        flags=flags,
        run=report.get("execution", {}).get("status", ""),
        run_seconds=report.get("execution", {}).get("seconds", 0.0),
        feedback={k: v.get("feedback", "") for k, v in report.get("tests", {}).items()},
        log_tail="" if status == "graded" else tail,
        peak_memory=report.get("execution", {}).get("peak_memory", 0),
        **grades,
    )
    if status != "graded":
        g.score = 0.0
        g.flags.append("the grader failed on this submission: see log_tail")
    return g


def read_grades(root: Path, assignment: course.Assignment, student: str) -> dict:
    """Score, max score and per-test auto points of one submission, from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        try:
            nb = gb.find_submission_notebook(assignment.notebook_id, assignment.name, student)
        except MissingEntry:
            return {}
        tests = {g.name: g.auto_score for g in nb.grades if g.cell_type == "code"}
        return {
            "score": nb.score,
            "max_score": nb.max_score,
            "tests": tests,
            "needs_manual_grade": nb.needs_manual_grade,
        }


def describe(g: Graded) -> str:
    """One submission's line in the grader's log."""
    who = g.student if collection.student_id_problem(g.student) is None else collection.shown(g.student)
    return printable(
        f"  {who:16s} {g.status:9s} {g.score:6.2f} / {g.max_score:g}  ({g.seconds:.1f} s)"
        + (f"  flagged: {'; '.join(g.flags)}" if g.flags else "")
    )


def run(
    submissions: Path = SUBMISSIONS,
    root: Path = COURSE,
    out: Path = OUT,
    *,
    assignments: list[course.Assignment] | None = None,
    cell_timeout: int = sandbox.CELL_TIMEOUT_S,
    submission_timeout: int = sandbox.SUBMISSION_TIMEOUT_S,
    trusted_submissions: bool = False,
    feedback_timeout: float = FEEDBACK_TIMEOUT_S,
    log=print,
) -> list[Graded]:
    """Grade every submission under `submissions`; write out/grades.csv, out/scores.json, out/feedback/.

    Raises sandbox.SandboxUnavailable (saying how to fix it) before anything is graded
    when the sandbox cannot run here, unless `trusted_submissions`.
    """
    assignments = assignments if assignments is not None else course.available()
    if not trusted_submissions:
        sandbox.check()
    log(f"limits: {sandbox.limits_in_force()}")
    root = course.make(root)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    results: list[Graded] = []

    def keep() -> None:  # every grade given so far, whatever stops the run later
        (out / "scores.json").write_text(json.dumps([asdict(g) for g in results], indent=1) + "\n")

    for assignment in assignments:
        folder = submissions / assignment.name
        if not folder.is_dir():
            continue
        instructor_step(root, "generate_assignment", assignment.name, "--force")
        students, refused = collect(root, assignment, folder, log)
        log(f"{assignment.name}: {len(students)} submissions" + (f", {len(refused)} refused" if refused else ""))
        for g in refused:
            results.append(g)
            log(describe(g))
        graded = []
        for student in students:
            g = grade_submission(
                root,
                assignment,
                student,
                cell_timeout=cell_timeout,
                submission_timeout=submission_timeout,
                trusted_submissions=trusted_submissions,
            )
            results.append(g)
            graded.append(g)
            log(describe(g))
            keep()
        for g in graded:
            if g.status != "graded":
                continue
            why = feedback(root, assignment, g.student, feedback_timeout)
            html = root / "feedback" / g.student / assignment.name / f"{assignment.notebook_id}.html"
            if why:
                g.flags.append(f"feedback: {why}")
                log(describe(g))
            elif html.exists():
                dest = out / "feedback" / assignment.name / f"{g.student}.html"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(html, dest)
        keep()
    instructor_step(root, "export", f"--to={out / 'grades.csv'}")
    keep()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.grading.pipeline", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--submissions",
        type=Path,
        default=SUBMISSIONS,
        help="folder holding <assignment>/<student>.ipynb (default: grading/submissions)",
    )
    parser.add_argument(
        "--course", type=Path, default=COURSE, help="throwaway course directory (default: grading/course)"
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where grades.csv and scores.json go (default: grading/out)"
    )
    parser.add_argument("--cell-timeout", type=int, default=sandbox.CELL_TIMEOUT_S, help="seconds one cell may run")
    parser.add_argument(
        "--submission-timeout",
        type=int,
        default=sandbox.SUBMISSION_TIMEOUT_S,
        help="seconds one submission's notebook may run in the sandbox in all",
    )
    parser.add_argument(
        "--feedback-timeout",
        type=float,
        default=FEEDBACK_TIMEOUT_S,
        help="seconds one student's feedback page may take to render",
    )
    parser.add_argument(
        "--trusted",
        action="store_true",
        help="run submissions without the sandbox: only when every one comes from a trusted source",
    )
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in solutions/)")
    args = parser.parse_args(argv)
    chosen = [course.get(a) for a in args.assignments] if args.assignments else None
    try:
        results = run(
            args.submissions.resolve(),
            args.course.resolve(),
            args.out.resolve(),
            assignments=chosen,
            cell_timeout=args.cell_timeout,
            submission_timeout=args.submission_timeout,
            trusted_submissions=args.trusted,
            feedback_timeout=args.feedback_timeout,
        )
    except (sandbox.SandboxUnavailable, PipelineError) as exc:
        print(f"error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'grades.csv'} ({len(results)} submissions)")
    return 0 if results and all(g.status == "graded" for g in results) else 1  # a refusal is for a person to read


if __name__ == "__main__":
    sys.exit(main())
