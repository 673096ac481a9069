"""The instructor's grading pipeline, run for real on submissions.

    python -m servelab.grading.pipeline                    # the samples in grading/submissions/
    python -m servelab.grading.pipeline --submissions DIR  # DIR/<assignment>/<student>.ipynb

Steps, all nbgrader's own, in a throwaway course directory (grading/course/,
ignored by git) whose source_directory is solutions/:

1. generate_assignment, for every assignment in solutions/ (fills the gradebook);
2. zip_collect: the submissions, zipped the way an LMS hands them over, are
   extracted into submitted/<student>/<assignment>/;
3. autograde, one student at a time, each in its own process with a wall-clock
   limit, in the sandbox kernel (see sandbox.py) with a per-cell timeout: one
   bad submission never stops the others from being graded;
4. generate_feedback (hidden tests removed, see feedback.py);
5. export -> grading/out/grades.csv, plus grading/out/scores.json with each
   test's points, each submission's status and integrity flags, and the
   feedback HTML under grading/out/feedback/.

Autograde never starts the vLLM engine: nbgrader sets NBGRADER_EXECUTION, which
the lab checks.
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

from servelab.grading import course
from servelab.paths import REPO_DIR

COURSE = REPO_DIR / "grading" / "course"
OUT = REPO_DIR / "grading" / "out"
SUBMISSIONS = REPO_DIR / "grading" / "submissions"
CELL_TIMEOUT_S = 30  # per cell while grading; an infinite loop costs this much, then the cell is marked wrong
SUBMISSION_TIMEOUT_S = 300  # per submission, whole autograde; past it the process is killed and the score is 0

# Code in a submission that reaches for the grading machinery, the key or the
# kernel's internals. Flagged for a person to look at; the score stands.
SUSPICIOUS = {
    "imports the grading package": r"servelab\.grading|from\s+servelab\s+import\s+grading",
    "opens a database": r"sqlite3|gradebook",
    "reads notebooks or the course's files": r"\.ipynb|solutions|submissions|/proc/",
    "patches modules or builtins": r"sys\.modules|builtins|__import__|importlib|setattr\s*\(",
    "changes how cells run": r"input_transformers|register_magic|events\.register|get_ipython\(\)\.(run_cell|ast_)",
    "reaches for C-level access": r"ctypes|cffi",
}


@dataclass
class Graded:
    """One submission's outcome."""

    assignment: str
    student: str
    status: str  # graded | timed out | failed
    seconds: float
    score: float = 0.0
    max_score: float = 0.0
    tests: dict = field(default_factory=dict)  # grade_id -> auto points
    needs_manual_grade: bool = False
    flags: list = field(default_factory=list)
    log_tail: str = ""


def integrity_flags(nb) -> list[str]:
    """What a submission's own cells (not the test cells nbgrader restores) reach for."""
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "code"
                     and not (c.metadata.get("nbgrader", {}).get("grade")
                              and not c.metadata.get("nbgrader", {}).get("solution")))
    return [label for label, pattern in SUSPICIOUS.items() if re.search(pattern, text)]


def silent_tests(root: Path, assignment: course.Assignment, student: str) -> list[str]:
    """Test cells that ran without reporting a grade: no points printed, no error.

    Every hidden test ends by returning its points, so a test cell with neither a
    result nor an error did not run as written (nbgrader would count it as full marks).
    """
    path = root / "autograded" / student / assignment.name / assignment.notebook
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no autograded notebook: nothing ran, nothing to flag
        return []
    silent = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and meta.get("points"):
            kinds = {o.get("output_type") for o in cell.get("outputs", [])}
            if not kinds & {"execute_result", "error"}:
                silent.append(meta["grade_id"])
    return silent


def collect(root: Path, assignment: course.Assignment, folder: Path) -> list[str]:
    """Zip a folder of submissions as an LMS would and let nbgrader's zip_collect file them."""
    students = sorted(p.stem for p in folder.glob("*.ipynb"))
    archive = root / "downloaded" / assignment.name / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive / f"{assignment.name}-submissions.zip", "w") as z:
        for student in students:
            z.write(folder / f"{student}.ipynb", f"{student}__{assignment.notebook}")
    # The file names follow FileNameCollectorPlugin.named_regexp in grading/nbgrader_config.py.
    result = course.nbgrader(root, "zip_collect", assignment.name, "--force", timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"zip_collect {assignment.name} failed:\n{result.stderr[-3000:]}")
    return students


def die_with_parent() -> None:
    """In a child before exec: Linux SIGKILLs it when its parent dies (PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)


def autograde(root: Path, assignment: course.Assignment, student: str, *, cell_timeout: int,
              submission_timeout: int) -> tuple[str, float, str]:
    """Autograde one submission in its own process group; (status, seconds, log tail)."""
    cmd = [sys.executable, "-m", "servelab.grading.nbgrader_cli", "autograde", assignment.name, f"--student={student}", "--force",
           f"--CourseDirectory.root={root}", f"--CourseDirectory.source_directory={course.SOLUTIONS}",
           f"--Execute.timeout={cell_timeout}", f"--Execute.kernel_name={course.SANDBOX_KERNEL}"]
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(root / "jupyter"), env.get("JUPYTER_PATH")]))
    start = time.monotonic()
    # die_with_parent: a grader killed mid-run leaves no nbgrader writing grades behind it.
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=die_with_parent)
    try:
        log, _ = proc.communicate(timeout=submission_timeout)
        status = "graded" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the sandbox kernel dies with its parent
        log, _ = proc.communicate()
        status = "timed out"
    return status, time.monotonic() - start, (log or "")[-2000:]


def gradebook_url(root: Path) -> str:
    """The gradebook nbgrader writes: SERVELAB_GRADEBOOK_URL (PostgreSQL for a class), else SQLite in the course."""
    return os.environ.get("SERVELAB_GRADEBOOK_URL") or f"sqlite:///{root / 'gradebook.db'}"


def read_grades(root: Path, assignment: course.Assignment, student: str) -> dict:
    """Score, max score and per-test auto points of one submission, from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        try:
            nb = gb.find_submission_notebook(assignment.notebook_id, assignment.name, student)
        except MissingEntry:
            return {}
        tests = {g.name: g.auto_score for g in nb.grades if g.cell_type == "code"}
        return {"score": nb.score, "max_score": nb.max_score, "tests": tests,
                "needs_manual_grade": nb.needs_manual_grade}


def grade_submission(root: Path, assignment: course.Assignment, student: str, notebook: Path, *,
                     cell_timeout: int = CELL_TIMEOUT_S, submission_timeout: int = SUBMISSION_TIMEOUT_S) -> Graded:
    """Grade one student's collected submission (submitted/<student>/<assignment>/) into the gradebook.

    `notebook` is the file as the student handed it in, read for integrity flags only.
    This is the unit the parallel graders (parallel.py) claim and run.
    """
    status, seconds, tail = autograde(root, assignment, student, cell_timeout=cell_timeout,
                                      submission_timeout=submission_timeout)
    try:
        flags = integrity_flags(nbformat.read(notebook, as_version=4))
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
        flags = [f"not a readable notebook ({type(exc).__name__})"]
    grades = read_grades(root, assignment, student) if status == "graded" else {}
    silent = silent_tests(root, assignment, student) if status == "graded" else []
    if silent:
        flags.append(f"test cells reported no grade (check them by hand): {', '.join(silent)}")
    g = Graded(assignment.name, student, status, round(seconds, 2), flags=flags,
               log_tail="" if status == "graded" else tail, **grades)
    if status != "graded":
        g.score = 0.0
    return g


def describe(g: Graded) -> str:
    return (f"  {g.student:16s} {g.status:9s} {g.score:6.2f} / {g.max_score:g}  ({g.seconds:.1f} s)"
            + (f"  flagged: {'; '.join(g.flags)}" if g.flags else ""))


def run(submissions: Path = SUBMISSIONS, root: Path = COURSE, out: Path = OUT, *,
        assignments: list[course.Assignment] | None = None, cell_timeout: int = CELL_TIMEOUT_S,
        submission_timeout: int = SUBMISSION_TIMEOUT_S, log=print) -> list[Graded]:
    """Grade every submission under `submissions`; write out/grades.csv, out/scores.json, out/feedback/."""
    assignments = assignments if assignments is not None else course.available()
    root = course.make(root, sandbox=True, deny=[submissions])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    results: list[Graded] = []
    for assignment in assignments:
        folder = submissions / assignment.name
        if not folder.is_dir():
            continue
        result = course.nbgrader(root, "generate_assignment", assignment.name, "--force", timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"generate_assignment {assignment.name} failed:\n{result.stderr[-3000:]}")
        students = collect(root, assignment, folder)
        log(f"{assignment.name}: {len(students)} submissions")
        for student in students:
            g = grade_submission(root, assignment, student, folder / f"{student}.ipynb",
                                 cell_timeout=cell_timeout, submission_timeout=submission_timeout)
            results.append(g)
            log(describe(g))
        fb = course.nbgrader(root, "generate_feedback", assignment.name, "--force", timeout=600)
        if fb.returncode != 0:
            log(f"generate_feedback {assignment.name} reported errors:\n{fb.stderr[-2000:]}")
        for student in students:
            html = root / "feedback" / student / assignment.name / f"{assignment.notebook_id}.html"
            if html.exists():
                dest = out / "feedback" / assignment.name / f"{student}.html"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(html, dest)
    exported = course.nbgrader(root, "export", f"--to={out / 'grades.csv'}", timeout=300)
    if exported.returncode != 0:
        raise RuntimeError(f"nbgrader export failed:\n{exported.stderr[-3000:]}")
    (out / "scores.json").write_text(json.dumps([asdict(g) for g in results], indent=1) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.grading.pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=Path, default=SUBMISSIONS,
                        help="folder holding <assignment>/<student>.ipynb (default: grading/submissions)")
    parser.add_argument("--course", type=Path, default=COURSE, help="throwaway course directory (default: grading/course)")
    parser.add_argument("--out", type=Path, default=OUT, help="where grades.csv and scores.json go (default: grading/out)")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT_S, help="seconds one cell may run")
    parser.add_argument("--submission-timeout", type=int, default=SUBMISSION_TIMEOUT_S,
                        help="seconds one submission's autograde may take in all")
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in solutions/)")
    args = parser.parse_args(argv)
    chosen = [course.get(a) for a in args.assignments] if args.assignments else None
    results = run(args.submissions.resolve(), args.course.resolve(), args.out.resolve(), assignments=chosen,
                  cell_timeout=args.cell_timeout, submission_timeout=args.submission_timeout)
    print(f"wrote {args.out / 'grades.csv'} ({len(results)} submissions)")
    return 0 if results and all(g.status == "graded" for g in results) else 1


if __name__ == "__main__":
    sys.exit(main())
