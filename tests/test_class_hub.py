"""A class, end to end: JupyterHub on loopback, nbgrader's exchange, the gradebook in PostgreSQL, Chromium.

The test makes one instructor and three students as system users (root only),
starts the class as `servelab class up` does, with the class's shared vLLM
server without speculation (one server keeps the test lean; the pair is tested
in test_class_servers.py), and walks a week of it: the instructor releases
lesson25 and lab25; each student logs in through the hub, fetches both from the
Assignments list, answers (perfect, partial, and one who types a single answer
into the lesson in the browser), opens the lab, measures one live point on the
shared server with the Measure button, saves, and submits both; the instructor
collects, autogrades both with two graders into PostgreSQL, generates and
releases feedback; each student fetches feedback and sees their own score. A
student reaching for another student's server or folder, the exchange's inbound
folder, or the instructor's course is refused.

Screenshots go to test-artifacts/screenshots/class-*.png.
"""

from __future__ import annotations

import datetime
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import nbformat
import pytest
from browser_helpers import (
    CELLS,
    chromium,
    free_port,
    menu,
    require_chromium,
    run_all_cells,
    save,
    screenshot,
    type_into_cell,
    wait_cells_done,
    wait_kernel_idle,
)
from test_browser import FLIP, choose_the_first_point, status, wait_for_lab

from servelab.classroom import limits
from servelab.classroom.hub import CHECKOUT_GROUP, ClassHub, ClassSettings
from servelab.classroom.limits import Limits
from servelab.classroom.postgres import Postgres
from servelab.classroom.servers import CPU_ARGS
from servelab.grading import course, samples
from servelab.knobs import read_metrics
from servelab.paths import REPO_DIR
from servelab.server import VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]

INSTRUCTOR = "sl-teach"
# student -> the samples they hand in, lesson25 and lab25; "typed" starts from the released lesson and types one answer
ANSWERS = {
    "sl-ana": ("perfect", "perfect"),
    "sl-ben": ("partial", "conclusion_contradicts"),
    "sl-cat": ("typed", "empty"),
}
# The class runs variants: each student's warm-ups and practices 1 and 4 have numbers of their own (the lesson's
# variant questions, servelab.variants.lesson.LESSON_QUESTIONS). sl-ana hands in her own right answers; sl-ben
# hands in hers (copied), which fit her numbers, not his.
COPIES = {"sl-ben": "sl-ana"}
CLASS_SECRET = "0000-class-hub-test-course-secret-0123456789abcdef"  # the class's course secret (see klass)
TYPED = ("practice5-answer", 'practice5_answer = "b"', "practice5-test")  # the cell, what is typed, the test it passes
LAB_FILE = {"lesson25": "lesson25/lesson25.ipynb", "lab25": "lab25/spec_decode_lab.ipynb"}


def points(assignment: str, grade_id: str) -> float:
    path = REPO_DIR / "solutions" / LAB_FILE[assignment]
    cell = next(
        c for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )
    return float(cell.metadata["nbgrader"]["points"])


def expected(assignment: str, sample: str) -> float:
    if sample == "typed":
        return points(assignment, TYPED[2])
    return json.loads(samples.EXPECTED.read_text())[assignment][sample]


def variant_secret(klass) -> bytes:
    from servelab.variants import course_secret

    return course_secret(klass["settings"].variant_secret, create=False)


def lesson_keys() -> dict:
    """The lesson's fixed key (grade_id -> (checker, key)), whose knob and verdict a practice part keeps."""
    import runpy

    return runpy.run_path(str(REPO_DIR / "grading" / "keys" / "lesson25.py"))["TESTS"]


def warmup_answers(klass, student: str) -> dict[str, object]:
    """grade_id -> the right answer to each variant part for `student`'s own numbers (the instructor's solver;
    a practice's fields as the grader keys them: its numbers the variant's, its knob and verdict the lesson's)."""
    from servelab.variants import BY_ID, params_for
    from servelab.variants import grading as vgrading
    from servelab.variants.lesson import LESSON_QUESTIONS

    solver, secret, tests = vgrading.load_solver(), variant_secret(klass), lesson_keys()
    answers: dict[str, object] = {}
    for qid in LESSON_QUESTIONS:
        for part in BY_ID[qid].parts:
            fixed = tests[part.id][1] if part.id in tests else None
            key = vgrading.with_fixed(
                vgrading.solution(part.id, params_for(qid, student, secret=secret), solver), fixed
            )
            answers[part.id] = (
                {name: field["expect"] for name, field in key["key"]["fields"].items()}
                if "fields" in key["key"]
                else key["key"]["value"]
            )
    return answers


def with_warmups(nb: dict, klass, student: str) -> dict:
    """The notebook with its warm-up answer cells set to `student`'s right answers, as literals."""
    from servelab.variants import BY_ID
    from servelab.variants.lesson import LESSON_QUESTIONS

    answers = warmup_answers(klass, student)
    cells = {
        f"{qid}-answer": "\n".join(f"{p.variable} = {answers[p.id]!r}" for p in BY_ID[qid].parts)
        for qid in LESSON_QUESTIONS
    }
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in cells:
            cell["source"] = cells[grade_id]
    return nb


def expected_in_class(klass, student: str, assignment: str, sample: str) -> float:
    """What a hand-in scores in the class, where the warm-ups are graded against each student's own numbers:
    sl-ana's own answers score what the sample does; sl-ben's copied ones lose what partial earned there and
    earn only where sl-ana's answer is right for his numbers too (a True or False they share by chance)."""
    base = expected(assignment, sample)
    if assignment != "lesson25" or student not in COPIES:
        return base
    import runpy

    from servelab.variants import grading as vgrading

    earned = runpy.run_path(str(REPO_DIR / "grading" / "samples" / "lesson25.py"))["LESSON25_PARTIAL_POINTS"]
    copied = warmup_answers(klass, COPIES[student])
    secret, solver = variant_secret(klass), vgrading.load_solver()
    tests = lesson_keys()
    lost = sum(earned[part] for part in copied)
    gained = sum(
        vgrading.check(
            p, student, a, secret=secret, solver=solver, fixed_key=tests[p][1] if p in tests else None
        ).points
        for p, a in copied.items()
    )
    return base - lost + gained


def each_student_sees_their_own_numbers(klass) -> dict[str, str]:
    """Each student's kernel (the students' environment) prints warm-up 1 with their own numbers, the ones
    the instructor's view names; nobody else of the class can read a student's numbers."""
    from servelab.variants import text_for

    shown = {}
    for student in ANSWERS:
        ran = as_user(
            student,
            klass["settings"].student_python,
            "-c",
            "from servelab.variants import lesson; lesson.show('warmup1')",
        )
        assert ran.returncode == 0, ran.stderr
        shown[student] = ran.stdout
        assert ran.stdout == text_for("warmup1", student, secret=variant_secret(klass)) + "\n", ran.stdout
    assert len(set(shown.values())) == len(ANSWERS), shown  # the same question, each with other numbers
    theirs = Path(pwd.getpwnam("sl-ana").pw_dir) / ".servelab" / "variants" / "lesson25.json"
    peek = as_user("sl-ben", "cat", str(theirs))
    assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek.stdout[:200]
    return shown


def the_fetched_lesson_states_their_numbers(klass, student: str) -> None:
    """The copy a student fetched (from the Assignments tab) asks each variant question with their numbers."""
    from servelab.variants import lesson, params_for
    from servelab.variants.questions import render_stated

    fetched = nbformat.read(Path(pwd.getpwnam(student).pw_dir) / LAB_FILE["lesson25"], as_version=4)
    stated = "\n".join(c.source for c in fetched.cells if c.cell_type == "markdown")
    secret = variant_secret(klass)
    for qid in lesson.LESSON_QUESTIONS:
        assert render_stated(qid, params_for(qid, student, secret=secret)) in stated, (student, qid)


def copies_are_flagged(klass) -> None:
    """sl-ben's report names whose variant his warm-up 1 answers fit; the instructor sees any student's numbers."""
    s = klass["settings"]
    report = json.loads((s.course_dir / "servelab-reports" / "lesson25" / "sl-ben" / "lesson25.json").read_text())
    for part in ("warmup1-per-token", "warmup1-batch"):
        assert report["tests"][part]["points"] == 0 and report["tests"][part]["copied_from"] == ["sl-ana"], part
        assert "sl-ana" not in report["tests"][part]["feedback"]  # the student's feedback names nobody
    assert any("sl-ana" in f for f in report["flags"]), report["flags"]
    mine = json.loads((s.course_dir / "servelab-reports" / "lesson25" / "sl-ana" / "lesson25.json").read_text())
    tests = lesson_keys()
    full = {
        p: tests[p][1]["points"] if p in tests and "points" in tests[p][1] else 1
        for p in warmup_answers(klass, "sl-ana")
    }
    assert all(mine["tests"][p]["points"] == full[p] and not mine["tests"][p]["copied_from"] for p in full), {
        p: mine["tests"][p]["points"] for p in full
    }
    assert "Worked solution:" in mine["tests"]["warmup1-batch"]["feedback"]
    env = {
        "SERVELAB_VARIANT_SECRET_FILE": str(s.variant_secret),
        "PATH": f"{Path(s.instructor_python).parent}:/usr/bin:/bin",
    }
    # from / : in the instructor's home, ~/servelab (the course) would shadow the package for `python -m`
    shown = as_user(
        INSTRUCTOR, s.instructor_python, "-m", "servelab.cli", "variants", "show", "sl-ben", env=env, cwd=Path("/")
    )
    assert shown.returncode == 0 and "warmup1-batch:" in shown.stdout, shown.stdout[-500:] + shown.stderr[-1000:]
    # whose numbers: the class's roster, which class up wrote beside the secret (class.json is root's)
    stranger = as_user(
        INSTRUCTOR, s.instructor_python, "-m", "servelab.cli", "variants", "show", "sl-zed", env=env, cwd=Path("/")
    )
    assert stranger.returncode == 2 and "not on the class's roster" in stranger.stdout, stranger.stdout[-500:]
    # The class report, as the instructor writes it: the copy is on the page, under the variant questions.
    made = as_user(
        INSTRUCTOR,
        s.instructor_python,
        "-m",
        "servelab.cli",
        "class",
        "report",
        "lesson25",
        "--course",
        str(s.course_dir),
        "--db-url",
        s.gradebook_url,
        "--names",
        env=env,
        cwd=Path("/"),
    )
    assert made.returncode == 0, made.stdout[-1000:] + made.stderr[-1500:]
    page = (s.course_dir / "class-reports" / "lesson25-class-report.html").read_text()
    assert 'id="variants-heading"' in page and 'id="copied-heading"' in page
    copied = page[page.index('id="copied-heading"') :]
    assert "warmup1-per-token" in copied and "sl-ben" in copied and "sl-ana" in copied


LIMITS = Limits(memory_mib=2048, cpus=1.0, pids=400, tmp_mib=64)  # each student's server, in this class
REPO_ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
LOGIN_TIMEOUT_MS = 300_000  # login, spawn and JupyterLab's first load on 2 busy cores


def make_user(name: str) -> str:
    password = secrets.token_urlsafe(12)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    return password


def remove_user(name: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)  # the user's own processes only
    subprocess.run(["userdel", "--remove", name], capture_output=True)


def as_user(name: str, *cmd: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    """Run a command as a system user, with that user's HOME and the class's environment."""
    home = pwd.getpwnam(name).pw_dir
    pairs = {
        "HOME": home,
        "USER": name,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        **(env or {}),
    }
    full = ["runuser", "-u", name, "--", "env", *[f"{k}={v}" for k, v in pairs.items()], *cmd]
    return subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=cwd or home)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the class test makes system users and runs the hub as root (CI runs as root)")
    require_chromium()
    from servelab import model

    if not (model.model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    from servelab.classroom.hub import chp_command

    chp_command()  # a missing proxy fails here with what to install
    users = [INSTRUCTOR, *ANSWERS]
    for name in users:
        remove_user(name)  # left over from an interrupted run
    passwords = {name: make_user(name) for name in users}
    started = time.time()  # a file changed since then was changed by the class (its ctime says so)
    state = Path(tempfile.mkdtemp(prefix="servelab-class-"))
    state.chmod(0o755)
    db = Postgres(state / "db", port=free_port())
    # one vLLM server without speculation, as the class's shared one runs it (the pair, behind its proxy
    # with each student's key and share, is tested in test_class_servers.py); it loads while the hub starts
    shared = VllmServer(
        [*CPU_ARGS, "--no-enable-prefix-caching"],
        port=free_port(),
        name="class-off",
        log_path=tmp_path_factory.mktemp("vllm") / "vllm-off.log",
    )
    settings = ClassSettings(
        state=state / "class",
        instructors=[INSTRUCTOR],
        students=list(ANSWERS),
        port=free_port_run(3),
        remote_off_url=shared.url,
        limits=LIMITS.as_json(),
    )
    # The variants drawn under a fixed course secret, as a course keeps one from class to class: whose numbers sl-ben's
    # copy fits is then the same in every run (under a fresh random secret, about one class in fifteen gives sl-cat
    # a warm-up 1 number of sl-ana's too, and the copy is rightly left unnamed)
    settings.variant_secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings.variant_secret.write_text(CLASS_SECRET + "\n")
    settings.variant_secret.chmod(0o600)
    hub = ClassHub(settings)
    try:
        hub.instructors_group()  # as `class up` does: the gradebook's socket lets the instructors in, no one else
        settings.gradebook_url = db.start(group=CHECKOUT_GROUP)
        shared.start()
        hub.start()
        shared.wait_ready(600)
        yield {
            "hub": hub,
            "settings": settings,
            "passwords": passwords,
            "db": db,
            "shared": shared,
            "started": started,
        }
    finally:
        hub.stop()
        shared.stop()
        db.stop()
        (REPO_ARTIFACTS / "class-hub.log").parent.mkdir(parents=True, exist_ok=True)
        (REPO_ARTIFACTS / "class-hub.log").write_text(hub.log_tail(2_000_000))
        for name in users:
            remove_user(name)
        shutil.rmtree(state, ignore_errors=True)


def free_port_run(n: int) -> int:
    """A port p with p .. p+n-1 all free (the hub takes three in a row)."""
    from servelab.classroom.errors import port_free

    for _ in range(50):
        p = free_port()
        if p + n < 65535 and all(port_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no run of free ports")


def instructor_nbgrader(klass, *args: str, timeout: float = 600):
    s = klass["settings"]
    env = {
        "JUPYTER_CONFIG_PATH": str(s.jupyter_dir("instructor")),
        "SERVELAB_GRADEBOOK_URL": s.gradebook_url,
        "PATH": f"{Path(s.instructor_python).parent}:/usr/bin:/bin",  # as the instructor's server has it
    }
    result = as_user(
        INSTRUCTOR,
        s.instructor_python,
        "-m",
        "servelab.grading.nbgrader_cli",
        *args,
        env=env,
        cwd=s.course_dir,
        timeout=timeout,
    )
    assert result.returncode == 0, f"nbgrader {' '.join(args)}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def login(context, klass, name: str):
    """Log in through the hub's form and wait for the user's JupyterLab."""
    hub = klass["hub"]
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login", wait_until="domcontentloaded")
    page.fill("#username_input", name)
    page.fill("#password_input", klass["passwords"][name])
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf".*/user/{name}/lab.*"), timeout=LOGIN_TIMEOUT_MS)
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=LOGIN_TIMEOUT_MS)
    return page


def open_assignments(page):
    menu(page, "Nbgrader", "nbgrader:open-assignment-list")
    page.locator("#released_assignments_list").wait_for(state="visible", timeout=60_000)


def row(page, listing: str, assignment: str):
    return page.locator(f"#{listing} .list_item", has_text=assignment).first


def save_as_student(page, path: str, notebook: dict) -> None:
    """Save a notebook into the student's own folder through their server, as JupyterLab's save does."""
    status = page.evaluate(
        """async ([path, nb]) => {
        const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
        const base = document.querySelector('body').dataset.baseUrl
            || JSON.parse(document.getElementById('jupyter-config-data').textContent).baseUrl;
        const r = await fetch(base + 'api/contents/' + path, {method: 'PUT', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json', 'X-XSRFToken': decodeURIComponent(xsrf)},
            body: JSON.stringify({type: 'notebook', format: 'json', content: nb})});
        return r.status;
    }""",
        [path, notebook],
    )
    assert status in (200, 201), status


def open_in_lab(page, klass, student: str, path: str) -> None:
    """Open a notebook in the student's JupyterLab through the hub and wait for its kernel."""
    page.goto(f"{klass['hub'].url}/user/{student}/lab/tree/{path}?reset", wait_until="domcontentloaded")
    page.locator(CELLS).first.wait_for(state="visible", timeout=LOGIN_TIMEOUT_MS)
    wait_kernel_idle(page, 180)


def type_the_answer(page, klass, student: str) -> None:
    """Open the fetched lesson, type one answer into its cell, run it, save: as a student does."""
    open_in_lab(page, klass, student, LAB_FILE["lesson25"])
    home = Path(pwd.getpwnam(student).pw_dir)
    released = nbformat.read(home / LAB_FILE["lesson25"], as_version=4)
    at = next(i for i, c in enumerate(released.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == TYPED[0])
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length >= n", arg=[CELLS, len(released.cells)])
    type_into_cell(page, at, TYPED[1])
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    wait_cells_done(page, 60)
    save(page)
    assert TYPED[1] in nbformat.read(home / LAB_FILE["lesson25"], as_version=4).cells[at].source
    screenshot(page, f"class-2-{student}-typed-an-answer")


def the_students_lab_runs_the_wheel(klass, student: str) -> None:
    """The student's JupyterLab and its kernel run the students' environment, never the checkout's venv."""
    python = klass["settings"].student_python
    ps = subprocess.run(["ps", "-u", student, "-o", "args="], capture_output=True, text=True).stdout.splitlines()
    server = [line for line in ps if "jupyterhub.singleuser" in line]
    kernels = [line for line in ps if "ipykernel" in line]
    assert server and all(line.startswith(python) for line in server), ps
    assert kernels and all(line.startswith(python) for line in kernels), ps
    assert not any(str(REPO_DIR) in line for line in ps), ps


def requests_served(klass) -> float:
    return read_metrics(klass["shared"].url).get("vllm:request_success", 0.0)


def measure_a_live_point(page, klass, student: str) -> None:
    """Open the lab, run it, and measure batch 1 without speculation on the class's shared server (Measure)."""
    open_in_lab(page, klass, student, LAB_FILE["lab25"])
    run_all_cells(page, 300)
    page.locator(FLIP).first.scroll_into_view_if_needed()
    wait_for_lab(page, "s.settings.backend === 'remote'", 60)  # the hub pointed the lab at the class's server
    choose_the_first_point(page)
    before = requests_served(klass)
    page.locator(".servelab-measure.servelab-view-flip").first.click()
    page.wait_for_function(
        "() => { const l = document.querySelector('.servelab-status.servelab-view-flip "
        ".servelab-status-line'); return l && (l.dataset.state === 'failed' "
        "|| /measured 1 of 1/.test(l.textContent)); }",
        timeout=300_000,
    )
    state, text = status(page)
    assert state == "idle" and "measured 1 of 1" in text, text
    assert requests_served(klass) > before  # the point's requests went to the shared server
    page.locator(FLIP).first.scroll_into_view_if_needed()
    screenshot(page, f"class-2-{student}-measured-on-the-shared-server")
    menu(page, "File", "docmanager:save")  # the focus is on the lab's button: save through the menu
    page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')?.classList.contains('jp-mod-dirty')",
        timeout=30_000,
    )


FORGED_TIME = "2026-01-01 00:00:00.000000 UTC"


def forge_hand_ins(klass) -> dict:
    """sl-ana, after every hand-in: tries to replace the exchange, hands in a blank lesson "from sl-ben" later
    than his, and writes an early time into her own hand-in. What she could do is returned for the checks."""
    s = klass["settings"]
    ex = s.exchange / s.course_id
    for attempt in (
        f"mv {s.exchange} {s.exchange}.old",
        f"mv {ex / 'outbound'} {ex / 'outbound.old'}",
        f"mkdir '{ex / 'inbound' / 'sl-ben+lesson25+2099-01-01 00:00:00.000000 UTC+x'}'",
        f"mkdir {ex / 'inbound' / 'sl-ben' / 'x'}",
    ):
        tried = as_user("sl-ana", "bash", "-c", attempt)
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, (attempt, tried.stdout, tried.stderr)
    mine = ex / "inbound" / "sl-ana"
    script = f"""
        set -e
        fake="{mine}/sl-ben+lesson25+2099-01-01 00:00:00.000000 UTC+x"
        mkdir "$fake"
        cp ~/{LAB_FILE["lesson25"]} "$fake/"
        for h in {mine}/sl-ana+lesson25+*; do echo -n "{FORGED_TIME}" > "$h/timestamp.txt"; done
    """
    done = as_user("sl-ana", "bash", "-c", script)
    assert done.returncode == 0, done.stderr  # her own inbound is hers to write
    return {"after": datetime.datetime.now(datetime.timezone.utc)}


def forgeries_refused(klass, forged: dict) -> None:
    """Collection took sl-ben's own hand-in, flagged sl-ana's forgery, and stamped sl-ana's with the file
    system's time (sl-ben's grade is checked with everyone's after grading)."""
    s = klass["settings"]
    refusals = (s.course_dir / "collect-refusals.jsonl").read_text().splitlines()
    flags = [json.loads(line) for line in refusals]
    assert [(f["assignment"], f["claims"], f["owner"]) for f in flags] == [("lesson25", "sl-ben", "sl-ana")], flags
    stamp = (s.course_dir / "submitted" / "sl-ana" / "lesson25" / "timestamp.txt").read_text()
    assert stamp != FORGED_TIME
    when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=datetime.timezone.utc)
    assert forged["after"] - datetime.timedelta(minutes=30) <= when <= forged["after"] + datetime.timedelta(seconds=2)
    ben = s.course_dir / "submitted" / "sl-ben" / LAB_FILE["lesson25"]
    assert ben.read_bytes() == (Path(pwd.getpwnam("sl-ben").pw_dir) / LAB_FILE["lesson25"]).read_bytes()


def test_a_week_of_class(klass):
    from playwright.sync_api import sync_playwright

    s = klass["settings"]
    # The instructor releases both assignments through the exchange.
    for assignment in ("lesson25", "lab25"):
        instructor_nbgrader(klass, "generate_assignment", assignment, "--force")
        instructor_nbgrader(klass, "release_assignment", assignment, "--force")
    assert (s.exchange / s.course_id / "outbound" / "lesson25").is_dir()
    each_student_sees_their_own_numbers(klass)

    with sync_playwright() as pw, chromium(pw) as browser_context:
        # Each student, in a browser of their own: log in, fetch, answer, submit.
        for student, sample in ANSWERS.items():
            browser_context.clear_cookies()  # a fresh login: nothing of the previous student's session
            page = login(browser_context, klass, student)
            open_assignments(page)
            for assignment in ("lesson25", "lab25"):
                row(page, "released_assignments_list", assignment).get_by_role(
                    "button", name="Fetch", exact=True
                ).click()
                row(page, "fetched_assignments_list", assignment).wait_for(timeout=60_000)
            the_fetched_lesson_states_their_numbers(klass, student)
            screenshot(page, f"class-1-{student}-fetched")
            lesson, lab = sample
            if lesson == "typed":
                type_the_answer(page, klass, student)
            else:
                answer = json.loads((samples.SUBMISSIONS / "lesson25" / f"{lesson}.ipynb").read_text())
                save_as_student(page, LAB_FILE["lesson25"], with_warmups(answer, klass, COPIES.get(student, student)))
            if lab != "empty":
                answer = json.loads((samples.SUBMISSIONS / "lab25" / f"{lab}.ipynb").read_text())
                save_as_student(page, LAB_FILE["lab25"], answer)
            measure_a_live_point(page, klass, student)
            if student == "sl-ana":
                the_students_lab_runs_the_wheel(klass, student)
            page.goto(f"{klass['hub'].url}/user/{student}/lab?reset", wait_until="domcontentloaded")
            page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=LOGIN_TIMEOUT_MS)
            open_assignments(page)
            for assignment in ("lesson25", "lab25"):
                row(page, "fetched_assignments_list", assignment).locator("button", has_text="Submit").click()
                row(page, "submitted_assignments_list", assignment).wait_for(timeout=60_000)
            screenshot(page, f"class-2-{student}-submitted")
            # Another student's server is not theirs to open.
            other = next(n for n in ANSWERS if n != student)
            response = page.goto(f"{klass['hub'].url}/user/{other}/lab", wait_until="domcontentloaded")
            assert response.status in (403, 404) or "/user/{other}/lab" not in page.url, page.url
            assert not page.locator("#jp-main-dock-panel").is_visible()
            if student == "sl-ana":
                screenshot(page, "class-3-sl-ana-refused-other-server")
            page.close()

        forged = forge_hand_ins(klass)
        # The instructor collects, autogrades with two graders into PostgreSQL, and returns feedback.
        for assignment in ("lesson25", "lab25"):
            instructor_nbgrader(klass, "collect", assignment)
        forgeries_refused(klass, forged)
        env = {
            "SERVELAB_GRADEBOOK_URL": s.gradebook_url,
            "JUPYTER_CONFIG_PATH": str(s.jupyter_dir("instructor")),
            "SERVELAB_SANDBOX_PACKAGE": s.student_package,
            "PATH": f"{Path(s.instructor_python).parent}:/usr/bin:/bin",
        }  # as the instructor's server has it (lab_environment)
        graded = as_user(
            INSTRUCTOR,
            s.instructor_python,
            "-m",
            "servelab.grading.parallel",
            "--course",
            str(s.course_dir),
            "--workers=2",
            "--cell-timeout=30",
            "lesson25",
            "lab25",
            env=env,
            cwd=s.course_dir,
            timeout=900,
        )
        assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-2000:]
        from nbgrader.api import Gradebook

        with Gradebook(s.gradebook_url) as gb:
            for student, sample in ANSWERS.items():
                for assignment, handed_in in zip(("lesson25", "lab25"), sample):
                    score = gb.find_submission(assignment, student).score
                    want = expected_in_class(klass, student, assignment, handed_in)
                    assert score == pytest.approx(want), (student, assignment)
        copies_are_flagged(klass)

        # Outside the browser: a student's account cannot read another's work, the exchange's inbound, or the course.
        exchange = s.exchange / s.course_id
        for target in (
            Path(pwd.getpwnam("sl-ben").pw_dir) / "lesson25",
            exchange / "inbound",
            s.course_dir,
            s.course_dir / "submitted",
        ):
            refused = as_user("sl-ana", "ls", str(target))
            assert refused.returncode != 0 and "Permission denied" in refused.stderr, (target, refused.stdout)
        # the gradebook is the instructors': no TCP port at all, and a socket in a folder she cannot enter
        for host, why in (("127.0.0.1", "Connection refused"), (str(klass["db"].socket_dir), "Permission denied")):
            peek = as_user(
                "sl-ana",
                s.student_python,
                "-c",
                f"import psycopg2; psycopg2.connect(host={host!r}, "
                f"port={klass['db'].port}, user='servelab', dbname='servelab_gradebook')",
            )
            assert peek.returncode != 0 and why in peek.stderr, peek.stderr

        for assignment in ("lesson25", "lab25"):
            instructor_nbgrader(klass, "generate_feedback", assignment, "--force")
            instructor_nbgrader(klass, "release_feedback", assignment)
        browser_context.clear_cookies()
        feedback = s.exchange / s.course_id / "feedback"
        for target in (f"ls {feedback}", f"ls {exchange / 'inbound' / 'sl-ben'}"):
            refused = as_user("sl-ana", "bash", "-c", target)
            assert refused.returncode != 0 and "Permission denied" in refused.stderr, (target, refused.stdout)
        unnamed = as_user("sl-ana", "bash", "-c", f"cat {feedback}/*.html")  # nothing to name them by
        assert unnamed.returncode != 0 and not unnamed.stdout, unnamed.stdout[:300]

        # Each student fetches feedback for both assignments and sees their own score, and nobody else's.
        notebooks = {"lesson25": "lesson25.html", "lab25": "spec_decode_lab.html"}
        for student, sample in ANSWERS.items():
            page = login(browser_context, klass, student)
            home = Path(pwd.getpwnam(student).pw_dir)
            for assignment, handed_in in zip(("lesson25", "lab25"), sample):
                open_assignments(page)
                submitted = row(page, "submitted_assignments_list", assignment)
                submitted.locator("button", has_text="Fetch Feedback").click()
                submitted.locator("a", has_text="view feedback").first.wait_for(timeout=60_000)
                pages = sorted(home.glob(f"{assignment}/feedback/*/{notebooks[assignment]}"))
                assert len(pages) == 1, pages  # their own submission's feedback only
                feedback = browser_context.new_page()  # beside the lab, which keeps the assignment list
                feedback.goto(
                    f"{klass['hub'].url}/user/{student}/files/{pages[0].relative_to(home)}",
                    wait_until="domcontentloaded",
                )
                text = feedback.inner_text("body")
                score = float(re.search(r"Score:\s*([\d.]+)", text).group(1))
                want = expected_in_class(klass, student, assignment, handed_in)
                assert score == pytest.approx(want, abs=0.01), (student, text[:300])
                screenshot(
                    feedback,
                    f"class-5-{student}-feedback"
                    if assignment == "lesson25"
                    else f"class-5-{student}-{assignment}-feedback",
                )
                feedback.close()
            page.close()
            browser_context.clear_cookies()

        # The instructor's formgrader reads the same PostgreSQL gradebook.
        page = login(browser_context, klass, INSTRUCTOR)
        page.goto(
            f"{klass['hub'].url}/user/{INSTRUCTOR}/formgrader/gradebook/lesson25/lesson25",
            wait_until="domcontentloaded",
        )
        try:
            page.get_by_text(f"Submission #{len(ANSWERS)}").wait_for(timeout=60_000)
            page.get_by_role("button", name="Show All Names").click()  # the formgrader hides names by default
            for student in ANSWERS:
                page.get_by_text(student, exact=True).first.wait_for(timeout=30_000)
        finally:
            screenshot(page, "class-6-instructor-formgrader")
        page.close()


# --- what a student can read -------------------------------------------------------------------------
SIZE_CAP_KIB = 4096  # files above it are counted and skipped: shared libraries, wheels' data, fonts


def _other_checkouts() -> list[str]:
    """Other clones of the course on this machine: the instructor's to close, not the class's (class up
    closes the one it runs from). Reported, and left out of the walk."""
    found = subprocess.run(
        [
            "find",
            "/",
            "-maxdepth",
            "5",
            "(",
            "-path",
            "/proc",
            "-o",
            "-path",
            "/sys",
            "-o",
            "-path",
            "/dev",
            ")",
            "-prune",
            "-o",
            "-type",
            "d",
            "-path",
            "*/grading/keys",
            "-print",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout.split()
    clones = {
        str(Path(keys).parent.parent) for keys in found if (Path(keys).parent.parent / "src" / "servelab").is_dir()
    }
    return sorted(c for c in clones if Path(c).resolve() != REPO_DIR)


def _made_by_the_class(found: dict, klass) -> tuple[dict, dict]:
    """Split the scan's hits: those the class or this checkout is answerable for, and the rest.

    A hit is the class's when it lies in this checkout, in the class's state (its exchange, its
    environments), in a class user's home, or when its ctime (which no program can set back) is after
    the class fixture started: whatever the hub, the spawner, nbgrader or a student wrote or chmodded
    anywhere. What is left was on the machine before, untouched: another program's copy of the course
    (a CI runner's record of a change, a download), which a student can read there whether or not a
    class runs."""
    s = klass["settings"]
    homes = [Path(pwd.getpwnam(u).pw_dir) for u in [*s.instructors, *s.students]]
    answerable = [REPO_DIR, Path(s.state).resolve(), *(h.resolve() for h in homes)]
    ours, foreign = {}, {}
    for path, what in found.items():
        real = Path(path).resolve()
        inside = any(real == a or a in real.parents for a in answerable)
        changed = os.stat(path).st_ctime >= klass["started"] - 1
        (ours if inside or changed else foreign)[path] = what
    return ours, foreign


def test_a_student_reads_no_answer_anywhere_on_the_machine(klass):
    """As a class user, search every file they can read for the keys' values and the solutions' text.

    The student is sl-cat, who typed one short answer: a student's own answers are theirs. Markers are
    derived here from grading/keys/ and solutions/ (secrets_helpers.py, with its rule for dropping
    generic ones), each also as JSON writes it (a notebook holds text that way). The walk skips /proc,
    /sys and /dev, files over SIZE_CAP_KIB (counted), the folder holding the markers themselves, the
    student's own feedback (released to them on purpose), and other clones of the course (reported).
    A hit fails the test when the class is answerable for it (_made_by_the_class); a file that was on the
    machine before the class started and that nothing of the class touched is reported as a warning.
    Then, in the same students' environment, the released lesson and both labs run as before.
    """
    import secrets_helpers

    s = klass["settings"]
    student = "sl-cat"
    home = pwd.getpwnam(student).pw_dir
    markers = secrets_helpers.markers()
    patterns = sorted(set(markers) | {json.dumps(m)[1:-1] for m in markers})
    scan = Path(tempfile.mkdtemp(prefix="servelab-scan-"))
    try:
        scan.chmod(0o755)
        (scan / "markers.txt").write_text("\n".join(patterns) + "\n")
        (scan / "markers.txt").chmod(0o644)
        skipped = ["/proc", "/sys", "/dev", str(scan), *_other_checkouts(), *map(str, Path(home).glob("*/feedback"))]
        prune = " -o ".join(f"-path {shlex.quote(p)}" for p in skipped)
        walk = f"find / \\( {prune} \\) -prune -o -type f -readable"
        script = (
            f"{walk} -size -{SIZE_CAP_KIB}k -print0 > ~/files.0; tr -cd '\\0' < ~/files.0 | wc -c; "
            f"{walk} -size +{SIZE_CAP_KIB - 1}k -print | wc -l; "
            f"xargs -0 -n 2000 grep -lFZ -f {scan / 'markers.txt'} -- < ~/files.0; rm -f ~/files.0; true"
        )
        result = as_user(student, "bash", "-c", script, timeout=900)
        searched, over_cap, listed = result.stdout.split("\n", 2)  # two counts, then the hits' names, NUL-ended
        searched, over_cap, hits = int(searched), int(over_cap), [p for p in listed.split("\0") if p]
        found = {}
        for path in hits:
            data = Path(path).read_bytes().decode("utf-8", "replace")
            found[path] = [f"{m[:60]!r} ({markers.get(m) or 'as JSON'})" for m in patterns if m in data][:3]
        print(
            f"searched {searched} files as {student} ({over_cap} over {SIZE_CAP_KIB} KiB skipped), "
            f"{len(markers)} markers ({len(patterns)} patterns); skipped {skipped}; hits: {found}"
        )
        assert searched > 10_000 and len(markers) > 100
        ours, foreign = _made_by_the_class(found, klass)
        if foreign:
            warnings.warn(
                "files on this machine that hold the course's answers and that neither the class nor this "
                f"checkout made (unchanged since before the class started; the machine's owner's to close): {foreign}",
                stacklevel=1,
            )
        assert ours == {}, ours
    finally:
        shutil.rmtree(scan, ignore_errors=True)

    # The students' environment is the wheel, installed as any package is, and it runs the course.
    shown = as_user(student, s.student_python, "-m", "pip", "show", "servelab")
    assert shown.returncode == 0 and "Editable project location" not in shown.stdout, shown.stdout + shown.stderr
    assert f"Location: {Path(s.student_package).parent}" in shown.stdout, shown.stdout
    work = Path(home) / "run-course"
    work.mkdir()
    for a in course.ASSIGNMENTS:
        shutil.copy(a.student, work / a.student.name)
    subprocess.run(["chown", "-R", f"{student}:", str(work)], check=True)
    ran = as_user(
        student,
        s.student_python,
        "-c",
        RUN_ALL,
        *[a.student.name for a in course.ASSIGNMENTS],
        # runuser's env keeps the test's own variables: the results store goes back to the student's
        env={
            "SERVELAB_OFFLINE": "1",
            "PATH": f"{Path(s.student_python).parent}:/usr/bin:/bin",
            "SERVELAB_RESULTS": f"{home}/.cache/servelab/results.jsonl",
        },
        cwd=work,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]


# Each notebook top to bottom in a kernel of the students' environment; only cells tagged
# raises-exception (answers not yet written) may raise, as under nbval.
RUN_ALL = """
import sys, nbformat, nbclient, servelab
assert "site-packages" in servelab.__file__, servelab.__file__
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3").execute()
    for cell in nb.cells:
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        trace = chr(10).join(errors[0].traceback)[-3000:] if errors else ""
        assert not errors or "raises-exception" in cell.metadata.get("tags", []), (path, cell.id, trace)
    print("ran", path)
"""


# --- what a student's server may use ------------------------------------------------------------------
def test_a_students_server_and_kernels_are_held_to_their_limits(klass):
    """sl-ana's server and the kernels it started are in her cgroups, with a private /tmp; in them, memory
    past the limit is killed, processes past the limit are refused, /tmp past its size is full."""
    s = klass["settings"]
    student = "sl-ana"
    folders = [parent / student for parent in limits.class_folders(s.state)]
    ps = subprocess.run(["ps", "-u", student, "-o", "pid=,args="], capture_output=True, text=True).stdout
    pids = [int(line.split()[0]) for line in ps.splitlines() if "jupyterhub.singleuser" in line or "ipykernel" in line]
    assert pids, ps
    inside = {int(p) for folder in folders for p in (folder / "cgroup.procs").read_text().split()}
    assert set(pids) <= inside, (pids, ps)
    hub_children = subprocess.run(["ps", "--ppid", str(klass["hub"].proc.pid), "-o", "args="], capture_output=True)
    assert b"jupyterhub_idle_culler" in hub_children.stdout  # the hub's service that stops idle servers
    mounts = Path(f"/proc/{pids[0]}/mountinfo").read_text()
    assert any(line.split()[4] == "/tmp" and " tmpfs " in line for line in mounts.splitlines()), mounts[-2000:]
    # her home, as her server sees it, is its own ext4 of limits.home_mib (the machine caps both or neither)
    assert s.home_capped[student] == s.inbound_capped[student]
    if s.home_capped[student]:
        home = pwd.getpwnam(student).pw_dir
        (line,) = [line for line in mounts.splitlines() if line.split()[4] == home]
        assert " - ext4 " in line and {"nosuid", "nodev"} <= set(line.split()[5].split(",")), line
    # Anything in her cgroups, as her: what her kernel can run.
    join = "; ".join(f"echo $$ > {folder / 'cgroup.procs'}" for folder in folders)
    hog = f"""
import os, subprocess
kids = []
try:
    for _ in range({LIMITS.pids + 50}):
        kids.append(subprocess.Popen(["sleep", "30"]))
    print("processes: all started")
except OSError as exc:
    print("processes: refused", exc.errno)
for k in kids:
    k.kill()
    k.wait()
buf = bytearray({(LIMITS.memory_mib + 512) * 2**20})
print("memory: allocated")
"""
    result = subprocess.run(
        ["sh", "-c", f'{join}; exec runuser -u {student} -- {s.student_python} -c "$0"', hog],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "processes: refused 11" in result.stdout and "memory: allocated" not in result.stdout, result.stdout
    assert result.returncode in (-9, 137), (result.returncode, result.stdout, result.stderr[-1000:])
