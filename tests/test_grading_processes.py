"""How grading starts its processes: one time limit (servelab.grading.sandbox), one nbgrader command and
environment (servelab.grading.course), one parent-death mechanism (servelab.grading.runner)."""

import inspect
import os
import sys
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from servelab.grading import course, parallel, pipeline, sandbox, trusted

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def test_a_bare_nbgrader_autograde_uses_the_same_cell_limit_as_the_pipeline():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    execute = trusted.SandboxedExecute(config=config)
    assert (execute.timeout, execute.run_timeout) == (sandbox.CELL_TIMEOUT_S, sandbox.SUBMISSION_TIMEOUT_S)
    for fn in (pipeline.grade_submission, pipeline.run):  # the pipeline's own defaults are the same setting
        params = inspect.signature(fn).parameters
        assert params["cell_timeout"].default == sandbox.CELL_TIMEOUT_S, fn.__name__
        assert params["submission_timeout"].default == sandbox.SUBMISSION_TIMEOUT_S, fn.__name__


def test_the_parallel_graders_default_to_the_same_limits():
    for fn in (parallel.work, parallel.grade_all):
        params = inspect.signature(fn).parameters
        assert params["cell_timeout"].default == sandbox.CELL_TIMEOUT_S, fn.__name__
        assert params["submission_timeout"].default == sandbox.SUBMISSION_TIMEOUT_S, fn.__name__


@pytest.mark.unit(False)  # starts grading processes
def test_a_grading_child_dies_with_its_parent(tmp_path):
    """runner.die_with_parent, the pipeline's preexec_fn: a parent killed outright takes its nbgrader child along."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from servelab.grading import runner\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
            " preexec_fn=runner.die_with_parent)\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(600)\n",
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            # the orphan is reparented and reaped by init (or a subreaper): a zombie counts as gone
            stat = Path(f"/proc/{child}/stat")
            if stat.exists() and stat.read_text().split(") ")[1].startswith("Z"):
                break
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the child outlived its parent by 30 s")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_every_nbgrader_step_starts_the_same_way(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    env = course.nbgrader_env({"EXTRA": "1"})
    assert "NBGRADER_EXECUTION" not in env and env["EXTRA"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    cmd = course.nbgrader_command(Path("/course"), "autograde", "lesson25")
    assert cmd[:5] == [sys.executable, "-m", "servelab.grading.nbgrader_cli", "autograde", "lesson25"]
    assert f"--CourseDirectory.source_directory={course.SOLUTIONS}" in cmd


@pytest.mark.unit(False)  # starts grading processes
def test_a_per_student_nbgrader_step_runs_in_a_cgroup_of_its_own_under_its_memory_limit(tmp_path, monkeypatch):
    """autograde and generate_feedback hold a submission's outputs outside the sandbox: each per-student step
    runs in its own cgroup, a step past its memory is stopped and says so, and the cgroup is gone after."""
    from servelab.grading import cgroup

    try:
        cgroup.plan()
    except cgroup.CgroupUnavailable as exc:
        pytest.skip(f"no cgroup can be made here: {exc}")
    monkeypatch.setattr(pipeline, "NBGRADER_STEP_MEMORY", 96 * 2**20)
    where = "print(open('/proc/self/cgroup').read())"
    code, _, log = pipeline._bounded([sys.executable, "-c", where], tmp_path, 60)
    assert code == 0 and cgroup.PREFIX in log, log
    mine = {line.split(":", 2)[2] for line in log.splitlines() if cgroup.PREFIX in line}
    for path in mine:  # removed when the step ended
        assert not any((cgroup.ROOT / c / path.lstrip("/")).exists() for c in ("", *cgroup.CONTROLLERS)), path
    hog = "x = b'x' * (512 * 2**20); print('held', len(x))"
    code, seconds, log = pipeline._bounded([sys.executable, "-c", hog], tmp_path, 60)
    assert code != 0 and "held" not in log and log.endswith(pipeline.MEMORY_STOPPED), (code, log)
    assert seconds < 30
