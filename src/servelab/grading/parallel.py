"""Grade a class in parallel: N graders, each submission graded once, nothing lost when a grader dies.

    export SERVELAB_GRADEBOOK_URL="postgresql+psycopg2://servelab:...@/servelab_gradebook?host=/var/lib/servelab-class/db-socket&port=5433"
    python -m servelab.grading.parallel --course DIR --workers 2           # everything collected in DIR
    python -m servelab.grading.parallel --course DIR --submissions SUBS   # zip_collect SUBS first

The queue is a table in the gradebook's own PostgreSQL database, one row per
collected submission (submitted/<student>/<assignment>/ in the course):

    servelab_autograde(assignment, student, status, worker, seconds, score, max_score, result, scan_flags)

Each submission's integrity scan runs when it is queued (scan_flags), before any
claim, so no scan of hostile text happens while a claim's transaction is open.
A grader claims a pending row with SELECT ... FOR UPDATE SKIP LOCKED and keeps
that transaction open while nbgrader grades the submission (pipeline.grade_submission,
the same isolated autograde a single grader runs), then writes the outcome and
commits. Other graders skip the locked row, so no submission is graded twice. A
grader that dies (killed, its machine gone) drops its connection; PostgreSQL rolls
its transaction back and the row is pending again, so the next claim, by another
grader or by a rerun, grades it. Graders may be processes here or machines that
share the database and the course directory. SQLite has no row locks: parallel
grading needs PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, cast

from servelab.grading import course, pipeline, runner, sandbox
from servelab.grading.console import printable

QUEUE = "servelab_autograde"
# One grader's own nbgrader process: the memory limit of the step's cgroup beside its submission's
# (pipeline.NBGRADER_STEP_MEMORY; a lesson's autograde peaks near 105 MiB here, grading/README.md).
GRADER_BYTES = pipeline.NBGRADER_STEP_MEMORY
STATUSES = ("pending", "graded", "timed out", "failed", "refused")


class ParallelGradingError(RuntimeError):
    """Parallel grading cannot run as asked; the message says what to do."""


def gradebook_url() -> str:
    url = os.environ.get("SERVELAB_GRADEBOOK_URL", "")
    if not url.startswith("postgresql"):
        raise ParallelGradingError(
            "Parallel grading keeps its queue in a PostgreSQL gradebook: set SERVELAB_GRADEBOOK_URL to a "
            "postgresql+psycopg2:// URL (`servelab class up` prints one), or grade one at a time with "
            "python -m servelab.grading.pipeline."
        )
    return url


def connect(url: str | None = None):
    """A psycopg2 connection to the gradebook database; TCP keepalives notice a grader's machine gone."""
    import psycopg2
    from sqlalchemy.engine import make_url

    u = make_url(url or gradebook_url())
    _, where = u.get_dialect()().create_connect_args(u)  # as nbgrader's SQLAlchemy reads it (a socket: ?host=)
    return psycopg2.connect(
        **where,
        connect_timeout=30,
        keepalives=1,
        keepalives_idle=30,
        keepalives_interval=10,
        keepalives_count=3,
    )


def create_queue(conn) -> None:
    with conn, conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (QUEUE,))  # several graders may start at once
        cur.execute(f"""CREATE TABLE IF NOT EXISTS {QUEUE} (
            assignment text NOT NULL,
            student text NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            worker text,
            seconds double precision,
            score double precision,
            max_score double precision,
            result jsonb,
            graded_at timestamptz,
            PRIMARY KEY (assignment, student))""")
        cur.execute(f"ALTER TABLE {QUEUE} ADD COLUMN IF NOT EXISTS scan_flags jsonb")  # queues made before the column


def enqueue(root: Path, assignments: list[course.Assignment], conn, refused: Sequence[pipeline.Graded] = ()) -> int:
    """A pending row, with its integrity scan, for every collected submission not in the queue yet, and a
    refused row for each hand-in collection refused; how many were added."""
    create_queue(conn)
    cur = conn.cursor()
    cur.execute(f"SELECT assignment, student FROM {QUEUE}")
    queued = set(cur.fetchall())
    conn.rollback()
    new = []
    for assignment in assignments:  # scanned here, outside any transaction: the text is hostile
        for folder in sorted((root / "submitted").glob(f"*/{assignment.name}")):
            if (assignment.name, folder.parent.name) not in queued:
                flags = pipeline.scan(folder / assignment.notebook)
                new.append((assignment.name, folder.parent.name, json.dumps(flags)))
    added = 0
    with conn, conn.cursor() as cur:
        for row in new:
            cur.execute(
                f"INSERT INTO {QUEUE} (assignment, student, scan_flags) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", row
            )
            added += cur.rowcount
        for g in refused:
            cur.execute(
                f"INSERT INTO {QUEUE} (assignment, student, status, seconds, score, max_score, result) "
                "VALUES (%s, %s, 'refused', 0, 0, 0, %s) ON CONFLICT DO NOTHING",
                (g.assignment, g.student, json.dumps(asdict(g))),
            )
            added += cur.rowcount
    return added


def requeue(conn, statuses: tuple[str, ...] = ("failed", "timed out")) -> int:
    """Put submissions that did not grade back in the queue (after fixing what made them fail)."""
    with conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {QUEUE} SET status = 'pending' WHERE status = ANY(%s)", (list(statuses),))
        return cur.rowcount


def work(
    root: Path,
    name: str,
    *,
    cell_timeout: int = sandbox.CELL_TIMEOUT_S,
    submission_timeout: int = sandbox.SUBMISSION_TIMEOUT_S,
    log=print,
) -> int:
    """One grader: claim, grade, record, until no pending submission is left; how many it graded."""
    conn = connect()
    graded = 0
    try:
        while True:
            with conn, conn.cursor() as cur:  # one transaction per submission: the claim lives as long as the grading
                cur.execute(
                    f"SELECT assignment, student, scan_flags FROM {QUEUE} WHERE status = 'pending' "
                    "ORDER BY assignment, student LIMIT 1 FOR UPDATE SKIP LOCKED"
                )
                row = cur.fetchone()
                if row is None:
                    return graded
                assignment, student = course.get(row[0]), row[1]
                log(printable(f"{name} grading {assignment.name}/{student}"))
                flags = row[2] if isinstance(row[2], list) else None  # None: a row queued before scans were stored
                g = pipeline.grade_submission(
                    root, assignment, student, flags, cell_timeout=cell_timeout, submission_timeout=submission_timeout
                )
                cur.execute(
                    f"UPDATE {QUEUE} SET status = %s, worker = %s, seconds = %s, score = %s, "
                    "max_score = %s, result = %s, graded_at = now() WHERE assignment = %s AND student = %s",
                    (g.status, name, g.seconds, g.score, g.max_score, json.dumps(asdict(g)), assignment.name, student),
                )
                log(f"{name} {pipeline.describe(g).strip()}")
                graded += 1
    finally:
        conn.close()


def results(conn) -> list[pipeline.Graded]:
    """Every graded submission in the queue, as the single grader reports them."""
    with conn, conn.cursor() as cur:
        cur.execute(f"SELECT result FROM {QUEUE} WHERE status <> 'pending' ORDER BY assignment, student")
        return [pipeline.Graded(**r[0]) for r in cur.fetchall()]


def counts(conn) -> dict[str, int]:
    with conn, conn.cursor() as cur:
        cur.execute(f"SELECT status, count(*) FROM {QUEUE} GROUP BY status")
        return dict(cur.fetchall())


def worst_case_bytes(workers: int) -> int:
    """The most memory `workers` graders can hold at once: each one's submission cgroup (its processes and its
    /tmp) at its limit, plus the grader's own nbgrader process."""
    return workers * (sandbox.CGROUP_LIMITS.memory_bytes + GRADER_BYTES)


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (0 where it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_memory(workers: int) -> str:
    """The worst case for `workers` graders on this machine, or ParallelGradingError when it is more than the
    machine has available: every grader's submission could be at its limit at once."""
    worst, free = worst_case_bytes(workers), available_bytes()
    said = (
        f"{workers} graders hold at most {worst / 2**30:.1f} GiB at once "
        f"({sandbox.CGROUP_LIMITS.memory_bytes >> 20} MiB per submission's cgroup + {GRADER_BYTES >> 20} MiB per "
        f"grader); {free / 2**30:.1f} GiB is available"
    )
    if free and worst > free:
        fits = max(1, free // (sandbox.CGROUP_LIMITS.memory_bytes + GRADER_BYTES))
        raise ParallelGradingError(f"{said}: grade with --workers {fits} or fewer, or on a machine with more memory.")
    return said


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def grade_all(
    root: Path,
    workers: int,
    *,
    cell_timeout: int = sandbox.CELL_TIMEOUT_S,
    submission_timeout: int = sandbox.SUBMISSION_TIMEOUT_S,
    log=print,
) -> dict[str, int]:
    """Run `workers` grader processes on the course at `root` until the queue is empty; the queue's counts."""
    if workers < 1:
        raise ParallelGradingError(f"--workers must be at least 1, not {workers}.")
    try:  # fail closed, once for the class, before any grader claims a submission
        sandbox.check()
    except sandbox.SandboxUnavailable as exc:
        raise ParallelGradingError(str(exc)) from None
    limits = sandbox.limits_in_force()
    log(f"limits: {limits}" + ("" if limits.startswith("no cgroup") else f"; {check_memory(workers)}"))
    procs = []
    for i in range(workers):
        cmd = [
            sys.executable,
            "-m",
            "servelab.grading.parallel",
            "--course",
            str(root),
            "--worker-name",
            f"grader-{os.uname().nodename}-{os.getpid()}-{i}",
            f"--cell-timeout={cell_timeout}",
            f"--submission-timeout={submission_timeout}",
            "--one-worker",
        ]
        procs.append(
            subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=runner.die_with_parent
            )
        )
    try:
        import selectors

        sel = selectors.DefaultSelector()
        for p in procs:
            if p.stdout is None:
                raise ParallelGradingError("a grader started without its output pipe")
            sel.register(p.stdout, selectors.EVENT_READ)
        open_streams = len(procs)
        while open_streams:
            for key, _ in sel.select():
                line = cast(IO[str], key.fileobj).readline()  # registered above: a grader's text stdout
                if line:
                    log(printable(line.rstrip()))  # a grader's lines quote what submissions raised
                else:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
        codes = [p.wait() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    if any(codes):
        raise ParallelGradingError(
            f"A grader exited with {max(codes)}; its claimed submission is pending again: "
            "rerun the same command to grade what is missing."
        )
    conn = connect()
    try:
        return counts(conn)
    finally:
        conn.close()


def prepare(
    root: Path, assignments: list[course.Assignment], submissions: Path | None, log=print
) -> tuple[Path, list[pipeline.Graded]]:
    """A course at `root` with every assignment generated and (if given) `submissions` zip-collected into it;
    the course and the hand-ins collection refused."""
    if not (root / "nbgrader_config.py").exists():  # an existing course keeps what it has collected and graded
        root = course.make(root)
    refused: list[pipeline.Graded] = []
    for assignment in assignments:
        try:
            pipeline.instructor_step(root, "generate_assignment", assignment.name, "--force")
        except pipeline.PipelineError as exc:
            raise ParallelGradingError(str(exc)) from None
        if submissions is not None and (submissions / assignment.name).is_dir():
            try:
                students, turned_away = pipeline.collect(root, assignment, submissions / assignment.name, log)
            except pipeline.PipelineError as exc:
                raise ParallelGradingError(str(exc)) from None
            refused += turned_away
            log(f"{assignment.name}: {len(students)} submissions collected, {len(turned_away)} refused")
            for g in turned_away:
                log(pipeline.describe(g))
    return root, refused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.grading.parallel", description=__doc__.split("\n")[0])
    parser.add_argument("--course", type=Path, required=True, help="the course directory (shared by every grader)")
    parser.add_argument("--submissions", type=Path, help="zip_collect DIR/<assignment>/<student>.ipynb first")
    parser.add_argument("--workers", type=int, default=default_workers(), help="graders at once (default: cores)")
    parser.add_argument("--queue-only", action="store_true", help="collect and queue, grade nothing yet")
    parser.add_argument("--requeue-failed", action="store_true", help="grade failed and timed-out submissions again")
    parser.add_argument("--cell-timeout", type=int, default=sandbox.CELL_TIMEOUT_S)
    parser.add_argument("--submission-timeout", type=int, default=sandbox.SUBMISSION_TIMEOUT_S)
    parser.add_argument("--worker-name", default=f"grader-{os.uname().nodename}-{os.getpid()}")
    parser.add_argument("--one-worker", action="store_true", help=argparse.SUPPRESS)  # grade_all's child processes
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in solutions/)")
    args = parser.parse_args(argv)
    root = args.course.resolve()
    try:
        gradebook_url()
        if args.one_worker:
            work(
                root,
                args.worker_name,
                cell_timeout=args.cell_timeout,
                submission_timeout=args.submission_timeout,
                log=lambda text: print(text, flush=True),
            )
            return 0
        chosen = [course.get(a) for a in args.assignments] if args.assignments else course.available()
        refused: list[pipeline.Graded] = []
        if args.submissions is not None or not (root / "nbgrader_config.py").exists():
            root, refused = prepare(root, chosen, args.submissions.resolve() if args.submissions else None)
        conn = connect()
        try:
            added = enqueue(root, chosen, conn, refused)
            if args.requeue_failed:
                added += requeue(conn)
        finally:
            conn.close()
        print(f"{added} submissions newly queued", flush=True)
        if args.queue_only:
            return 0
        start = time.monotonic()
        final = grade_all(
            root,
            args.workers,
            cell_timeout=args.cell_timeout,
            submission_timeout=args.submission_timeout,
            log=lambda text: print(text, flush=True),
        )
    except ParallelGradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"queue: {final} ({time.monotonic() - start:.1f} s with {args.workers} graders)")
    return 0 if set(final) <= {"graded"} else 1


if __name__ == "__main__":
    sys.exit(main())
