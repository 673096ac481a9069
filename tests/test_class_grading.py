"""The class's gradebook on PostgreSQL, and parallel autograding into it (about a minute on 2 cores).

A PostgreSQL cluster is made for the module (Debian's initdb and pg_ctl, on a Unix
socket only); each test grades into its own database in it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from servelab.classroom import ClassError, studentenv
from servelab.classroom.postgres import Postgres
from servelab.grading import parallel, samples

EXPECTED = json.loads(samples.EXPECTED.read_text())["lesson25"]
STUDENTS = {"ada": "perfect", "bo": "partial", "cy": "empty", "di": "perfect", "ed": "partial", "fa": "empty"}

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    # Not under pytest's tmp (mode 700): when root runs the tests, the cluster belongs to `postgres`.
    folder = Path(tempfile.mkdtemp(prefix="servelab-pg-"))
    folder.chmod(0o711)
    pg = Postgres(folder / "db", port=free_port())
    pg.start()
    yield pg
    pg.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def class_submissions(tmp_path):
    """Six students' lesson25 notebooks: the committed perfect, partial and empty samples, twice each."""
    folder = tmp_path / "submissions" / "lesson25"
    folder.mkdir(parents=True)
    for student, sample in STUDENTS.items():
        shutil.copy(samples.SUBMISSIONS / "lesson25" / f"{sample}.ipynb", folder / f"{student}.ipynb")
    return folder.parent


def gradebook(cluster, name: str) -> str:
    cluster.create_database(name)
    return cluster.url(name)


def grade(course: Path, url: str, *args: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, SERVELAB_GRADEBOOK_URL=url, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servelab.grading.parallel",
            "--course",
            str(course),
            "--cell-timeout=20",
            "--submission-timeout=240",
            *args,
            "lesson25",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def claims(log: str) -> list[str]:
    return [line.split("grading lesson25/")[1] for line in log.splitlines() if " grading lesson25/" in line]


def test_two_graders_grade_each_submission_once_into_postgres(cluster, class_submissions, tmp_path, monkeypatch):
    url = gradebook(cluster, "two_graders")
    proc = grade(tmp_path / "course", url, "--workers=2", "--submissions", str(class_submissions))
    log, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, log
    graded = claims(log)
    assert sorted(graded) == sorted(STUDENTS), log  # every student claimed, none twice
    assert len({line.split()[0] for line in log.splitlines() if " grading " in line}) == 2, log  # both graders worked

    # The grades are nbgrader's, in PostgreSQL: its own Gradebook and export read them there.
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        for student, sample in STUDENTS.items():
            submission = gb.find_submission("lesson25", student)
            assert submission.score == pytest.approx(EXPECTED[sample]), student
    monkeypatch.setenv("SERVELAB_GRADEBOOK_URL", url)
    from servelab.grading import course

    exported = course.nbgrader(tmp_path / "course", "export", f"--to={tmp_path / 'grades.csv'}", timeout=300)
    assert exported.returncode == 0, exported.stderr[-2000:]
    with open(tmp_path / "grades.csv") as f:
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
    assert rows == pytest.approx({s: EXPECTED[sample] for s, sample in STUDENTS.items()})


def test_a_killed_grader_loses_nothing_and_a_rerun_grades_only_what_is_missing(cluster, class_submissions, tmp_path):
    url = gradebook(cluster, "killed_grader")
    course = tmp_path / "course"
    proc = grade(course, url, "--workers=2", "--submissions", str(class_submissions), start_new_session=True)
    seen = []
    for line in proc.stdout:  # kill the graders once the first submission is graded and two more are claimed
        seen.append(line)
        if " graded " in line and len(claims("".join(seen))) >= 3:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)

    conn = parallel.connect(url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(f"SELECT student, status FROM {parallel.QUEUE}")
            before = dict(cur.fetchall())
    finally:
        conn.close()
    done_before = {s for s, status in before.items() if status == "graded"}
    assert set(before) == set(STUDENTS)
    assert done_before and len(done_before) < len(STUDENTS), "".join(seen)  # killed mid-run, claims back to pending

    rerun = grade(course, url, "--workers=2")
    log, _ = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, log
    assert sorted(claims(log)) == sorted(set(STUDENTS) - done_before), log  # only what was missing
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        for student, sample in STUDENTS.items():
            assert gb.find_submission("lesson25", student).score == pytest.approx(EXPECTED[sample]), student


def test_parallel_grading_asks_for_postgres(monkeypatch):
    monkeypatch.setenv("SERVELAB_GRADEBOOK_URL", "sqlite:///gradebook.db")
    with pytest.raises(parallel.ParallelGradingError, match="PostgreSQL"):
        parallel.gradebook_url()


def test_the_gradebook_has_no_port_and_its_socket_lets_no_one_else_in(cluster):
    """300 logins begun on a loopback port and never finished once filled max_connections: the gradebook
    listens on no TCP port, and its socket's folder keeps out every user not let in."""
    import psycopg2

    conn = cluster.connect()  # the cluster's owner (and root) get in through the socket
    assert conn.closed == 0
    conn.close()
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(host="127.0.0.1", port=cluster.port, user="servelab", password="x", connect_timeout=5)
    with socket.socket() as probe:  # nothing at all answers on its number as a TCP port
        assert probe.connect_ex(("127.0.0.1", cluster.port)) != 0
    if os.geteuid() != 0:
        pytest.skip("the other user's try needs root (runuser)")
    socket_path = str(cluster.socket_dir / f".s.PGSQL.{cluster.port}")
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({socket_path!r})"
    tried = subprocess.run(
        ["runuser", "-u", "nobody", "--", studentenv.open_python(), "-c", code], capture_output=True, text=True
    )
    assert tried.returncode != 0 and "PermissionError" in tried.stderr, tried.stderr


def test_a_socket_path_too_long_is_named_with_what_to_do(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with pytest.raises(ClassError, match="longer than a Unix socket's"):
        Postgres(deep / "db").start()
    assert not (deep / "db").exists()  # refused before initdb made anything
