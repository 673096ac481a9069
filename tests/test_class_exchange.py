"""The class's exchange, attacked by students through nbgrader's own commands (root only: system users).

One instructor and two students, each a system user, each running nbgrader's own
`release_assignment`, `fetch_assignment`, `submit`, `collect`, `release_feedback` and
`fetch_feedback` in their own account with the Jupyter config `servelab class up` writes
for their role (hub.nbgrader_settings) and the exchange laid out as it does
(classroom/exchange.py). No hub is started: the exchange is files and nbgrader (the hub
test, test_class_hub.py, runs the same attacks through a running class). A student:
cannot rename or replace the exchange or the released assignment; hands in under a
classmate's name only into her own folder, where collection refuses it with a flag and
collects the classmate's own; cannot set the time of her hand-in; cannot list or read a
classmate's hand-in, secret or feedback.
"""

from __future__ import annotations

import datetime
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import parse_utc

from servelab.classroom import capfs, exchange, hub, limits, studentenv
from servelab.classroom.journal import Journal
from servelab.grading import course, samples
from servelab.grading.collection import SafeExchangeCollect
from servelab.variants import lesson
from servelab.variants.questions import render_stated
from servelab.variants.seeds import params_for

pytestmark = pytest.mark.slow

TEACH, ANA, BO = "sl-x-teach", "sl-x-ana", "sl-x-bo"
LESSON = course.get("lesson25")


def _make_user(name: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    subprocess.run(["userdel", "--remove", name], capture_output=True)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)


@pytest.fixture(scope="module")
def cls():
    if os.geteuid() != 0:
        pytest.skip("the exchange test makes system users (CI runs as root)")
    for name in (TEACH, ANA, BO):
        _make_user(name)
    state = Path(tempfile.mkdtemp(prefix="servelab-exchange-"))
    state.chmod(0o755)
    journal = Journal.of(state)
    settings = hub.ClassSettings(state=state / "class", instructors=[TEACH], students=[ANA, BO])
    settings.state.mkdir()
    settings.state.chmod(0o755)
    try:
        if subprocess.run(["getent", "group", hub.CHECKOUT_GROUP], capture_output=True).returncode != 0:
            journal.record("group", name=hub.CHECKOUT_GROUP)
            subprocess.run(["groupadd", "--system", hub.CHECKOUT_GROUP], check=True)
        journal.record("member", user=TEACH, group=hub.CHECKOUT_GROUP)
        subprocess.run(["usermod", "-aG", hub.CHECKOUT_GROUP, TEACH], check=True)
        # as on the hub: students run the students' environment (the wheel), the instructor the instructors' venv
        student_python, _ = studentenv.build(settings.state)
        python = studentenv.build_instructor(settings.state)
        capped = exchange.lay_out(
            settings.exchange,
            settings.course_id,
            [TEACH],
            [ANA, BO],
            hub.CHECKOUT_GROUP,
            settings.state / "inbound-images",
            record=journal.record,
        )
        for role in ("student", "instructor"):
            folder = settings.jupyter_dir(role)
            folder.mkdir(parents=True)
            cfg = settings.course_dir / "nbgrader_config.py" if role == "instructor" else None
            (folder / "nbgrader_config.py").write_text(hub.python_config(hub.nbgrader_settings(settings, role), cfg))
        course.make(settings.course_dir)
        subprocess.run(["chown", "-R", f"{TEACH}:", str(settings.course_dir)], check=True)
        settings.course_dir.chmod(0o700)
        yield {
            "settings": settings,
            "python": str(python),
            "student_python": str(student_python),
            "capped": capped,
            "journal": journal,
        }
    finally:
        for name in (TEACH, ANA, BO):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        journal.undo(log=lambda line: None)
        for name in (TEACH, ANA, BO):
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def as_user(cls, name: str, *cmd: str, cwd: Path | None = None, timeout: float = 300):
    home = pwd.getpwnam(name).pw_dir
    role = "instructor" if name == TEACH else "student"
    env = {
        "HOME": home,
        "USER": name,
        "PATH": f"{Path(cls['python'] if name == TEACH else cls['student_python']).parent}:/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": str(cls["settings"].jupyter_dir(role)),
        "PYTHONHASHSEED": "0",
    }
    full = ["runuser", "-u", name, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()], *cmd]
    return subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=cwd or home)


def nbgrader(cls, name: str, *args: str, ok: bool = True):
    s = cls["settings"]
    extra = [f"--CourseDirectory.source_directory={course.SOLUTIONS}"] if name == TEACH else []
    cwd = s.course_dir if name == TEACH else None
    python = cls["python"] if name == TEACH else cls["student_python"]
    result = as_user(cls, name, python, "-m", "servelab.grading.nbgrader_cli", *args, *extra, cwd=cwd)
    if ok:
        assert result.returncode == 0, f"{name}: nbgrader {args}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def sample(name: str) -> bytes:
    return (samples.SUBMISSIONS / "lesson25" / f"{name}.ipynb").read_bytes()


def hand_in(cls, student: str, answer: bytes) -> None:
    home = Path(pwd.getpwnam(student).pw_dir)
    (home / "lesson25" / LESSON.notebook).write_bytes(answer)
    nbgrader(cls, student, "submit", "lesson25")


def test_students_share_nothing_through_the_exchange(cls):
    s = cls["settings"]
    ex = s.exchange / s.course_id
    nbgrader(cls, TEACH, "generate_assignment", "lesson25", "--force")
    nbgrader(cls, TEACH, "release_assignment", "lesson25", "--force")
    # ana was handed her own numbers (as `servelab class up` hands them out); bo was not.
    secret = b"the exchange test's course secret, 32+ bytes"
    lesson.hand_out(ANA, secret=secret, record=cls["journal"].record)
    for student in (ANA, BO):
        nbgrader(cls, student, "fetch_assignment", "lesson25")
    ana_copy = nbformat.read(Path(pwd.getpwnam(ANA).pw_dir) / "lesson25" / LESSON.notebook, as_version=4)
    stated = "\n".join(c.source for c in ana_copy.cells)
    for qid in lesson.LESSON_QUESTIONS:  # her copy's questions state her numbers, as she is graded on them
        assert render_stated(qid, params_for(qid, ANA, secret=secret)) in stated, qid

    # The exchange and the released assignment are the instructor's: renaming, replacing or writing fails.
    for attempt in (
        f"mv {s.exchange} {s.exchange}.old",
        f"mkdir {s.exchange}.mine && mv {s.exchange}.mine {s.exchange}",
        f"mv {ex} {ex}.old",
        f"mv {ex / 'outbound'} {ex / 'outbound.old'}",
        f"mkdir {ex / 'outbound' / 'lesson25' / 'x'}",
        f"echo 'import os' > {ex / 'outbound' / 'lesson25' / LESSON.notebook}",
        f"mkdir {ex / 'inbound' / 'x'}",
        f"mkdir {ex / 'inbound' / BO / 'x'}",
        f"ls {ex / 'inbound'}",
        f"ls {ex / 'feedback'}",
    ):
        tried = as_user(cls, ANA, "bash", "-c", attempt)
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, (attempt, tried.stdout, tried.stderr)
    released = (ex / "outbound" / "lesson25" / LESSON.notebook).read_bytes()
    assert (Path(pwd.getpwnam(BO).pw_dir) / "lesson25" / LESSON.notebook).read_bytes() == released

    # Each hands in through nbgrader's own submit: bo his perfect lesson, ana her partial one.
    hand_in(cls, BO, sample("perfect"))
    hand_in(cls, ANA, sample("partial"))
    handins = list((ex / "inbound" / BO).iterdir())
    assert len(handins) == 1 and handins[0].name.startswith(f"{BO}+lesson25+")
    for path in [handins[0], handins[0] / "submission_secret.txt", handins[0] / LESSON.notebook]:
        tried = as_user(cls, ANA, "cat" if path.is_file() else "ls", str(path))
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, (path, tried.stdout)

    # ana forges a later hand-in "from bo" (a blank notebook), in the only inbound she can write: her own.
    # She also names her own forged hand-in with an early time and an early timestamp.txt, after it.
    early = "2000-01-01 00:00:00.000000 UTC"
    forge = f"""
        set -e
        cd {ex / "inbound" / ANA}
        mkdir "{BO}+lesson25+2099-01-01 00:00:00.000000 UTC+x"
        cp ~/lesson25/{LESSON.notebook} "{BO}+lesson25+2099-01-01 00:00:00.000000 UTC+x/"
        mine=$(ls -d {ANA}+lesson25+*)
        echo -n "{early}" > "$mine/timestamp.txt"
        mv "$mine" "{ANA}+lesson25+{early}+y"
    """
    before = datetime.datetime.now(datetime.timezone.utc)
    forged = as_user(cls, ANA, "bash", "-c", forge)
    assert forged.returncode == 0, forged.stderr
    after = datetime.datetime.now(datetime.timezone.utc)
    blank = nbformat.v4.new_notebook()
    (Path(pwd.getpwnam(ANA).pw_dir) / "lesson25" / LESSON.notebook).write_text(nbformat.writes(blank))

    listed = nbgrader(cls, TEACH, "list", "--inbound", "lesson25")
    assert f"{s.course_id} {BO} lesson25" in listed.stderr and f"{s.course_id} {ANA} lesson25" in listed.stderr
    collected = nbgrader(cls, TEACH, "collect", "lesson25")
    submitted = s.course_dir / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == [ANA, BO]
    assert (submitted / BO / "lesson25" / LESSON.notebook).read_bytes() == sample("perfect")  # his own, not hers
    assert (submitted / ANA / "lesson25" / LESSON.notebook).read_bytes() == sample("partial")
    assert "cheating attempt" not in collected.stdout + collected.stderr
    assert "Refused" in collected.stderr and "another student's name" in collected.stderr, collected.stderr[-3000:]
    refusals = [json.loads(line) for line in (s.course_dir / SafeExchangeCollect.REFUSALS).read_text().splitlines()]
    assert [(r["claims"], r["owner"], r["flag"]) for r in refusals] == [
        (BO, ANA, "handed in under another student's name")
    ]
    # ana's time is the file system's (when she last changed her hand-in), not the one she wrote
    stamp = (submitted / ANA / "lesson25" / "timestamp.txt").read_text()
    when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=datetime.timezone.utc)
    assert before - datetime.timedelta(seconds=2) <= when <= after + datetime.timedelta(seconds=2), stamp

    # Feedback: each student gets their own; a classmate can neither list nor name it.
    for student, text in ((BO, "bo's feedback: 41 of 41"), (ANA, "ana's feedback")):
        folder = s.course_dir / "feedback" / student / "lesson25"
        folder.mkdir(parents=True)
        for name in ("timestamp.txt", "submission_secret.txt"):
            shutil.copy(submitted / student / "lesson25" / name, folder / name)
        (folder / "lesson25.html").write_text(f"<p>{text}</p>")
    subprocess.run(["chown", "-R", f"{TEACH}:", str(s.course_dir / "feedback")], check=True)
    nbgrader(cls, TEACH, "release_feedback", "lesson25")
    for student in (ANA, BO):
        nbgrader(cls, student, "fetch_feedback", "lesson25")
    got = {
        student: [p.read_text() for p in Path(pwd.getpwnam(student).pw_dir).glob("lesson25/feedback/*/lesson25.html")]
        for student in (ANA, BO)
    }
    assert got == {BO: ["<p>bo's feedback: 41 of 41</p>"], ANA: ["<p>ana's feedback</p>"]}
    peek = as_user(cls, ANA, "bash", "-c", f"cat {ex / 'feedback'}/*.html; ls {ex / 'feedback'}")
    assert "bo's" not in peek.stdout and "Permission denied" in peek.stderr


def test_a_release_left_by_an_earlier_classs_instructor_becomes_this_classs(cls):
    """nbgrader keeps a released folder its releaser's; that user may be a student of this class. class up
    makes all of outbound/ and feedback/ this class's first instructor's, so she cannot replace it."""
    s = cls["settings"]
    outbound = s.exchange / s.course_id / "outbound"
    planted = outbound / "old-lab"
    planted.mkdir()
    (planted / "old-lab.ipynb").write_text("{}")
    feedback = s.exchange / s.course_id / "feedback" / "old-hash"
    feedback.mkdir()
    for path in (planted, planted / "old-lab.ipynb", feedback):
        shutil.chown(path, ANA, ANA)
        path.chmod(0o777 if path.is_dir() else 0o666)
    try:
        exchange.lay_out(
            s.exchange,
            s.course_id,
            [TEACH],
            [ANA, BO],
            hub.CHECKOUT_GROUP,
            s.state / "inbound-images",
            cls["journal"].record,
        )
        for path in (planted, planted / "old-lab.ipynb", feedback):
            assert path.owner() == TEACH and not path.stat().st_mode & 0o002, path
        assert not feedback.stat().st_mode & 0o020
        replaced = as_user(cls, ANA, "sh", "-c", f"echo x > '{planted / 'old-lab.ipynb'}' || mkdir '{planted / 'x'}'")
        assert replaced.returncode != 0 and (planted / "old-lab.ipynb").read_text() == "{}"
    finally:
        shutil.rmtree(planted, ignore_errors=True)
        shutil.rmtree(feedback, ignore_errors=True)


def test_a_full_inbound_stops_only_its_student(cls):
    """Where the machine can loop-mount, each student's inbound is its own file system of INBOUND_CAP_MIB."""
    if not cls["capped"][ANA]:
        pytest.skip("this machine cannot loop-mount; the collection's per-hand-in cap still applies")
    s = cls["settings"]
    mine = s.exchange / s.course_id / "inbound" / ANA
    fill = as_user(cls, ANA, "bash", "-c", f"head -c {exchange.INBOUND_CAP_MIB + 16}M /dev/zero > {mine}/fill")
    assert fill.returncode != 0 and "No space left" in fill.stderr, fill.stderr
    as_user(cls, ANA, "rm", "-f", f"{mine}/fill")
    hand_in(cls, BO, sample("partial"))  # a classmate's hand-in is untouched by hers


def test_a_full_home_stops_only_its_student(cls, tmp_path):
    """Each student's home is its own ext4 (hub.cap_home, as `class up` makes it), starting with what the home
    held: filling hers gives her ENOSPC and her classmate writes on; the journal's undo (`class down`'s)
    unmounts both and leaves each home as it was below."""
    homes = {name: Path(pwd.getpwnam(name).pw_dir) for name in (ANA, BO)}
    as_user(cls, ANA, "bash", "-c", "echo mine > ~/before.txt")
    journal = Journal(tmp_path / "changes.json")
    was = homes[ANA].stat()
    try:
        why = {name: hub.cap_home(name, tmp_path / "home-images", 32, record=journal.record) for name in homes}
        if any(why.values()):
            pytest.skip(f"this machine cannot cap a home: {why}")
        # written down before each mount, where the next class up or class down finds it after a crash
        assert Journal(tmp_path / "changes.json").entries == [{"kind": "mount", "path": str(h)} for h in homes.values()]
        mounts = {line.split()[1]: line.split()[3].split(",") for line in Path("/proc/mounts").read_text().splitlines()}
        assert {"nosuid", "nodev"} <= set(mounts[str(homes[ANA])])
        now = homes[ANA].stat()  # the file system's top: the home's owner and mode
        assert now.st_dev != was.st_dev and (now.st_mode, now.st_uid, now.st_gid) == (
            was.st_mode,
            was.st_uid,
            was.st_gid,
        )
        assert as_user(cls, ANA, "cat", "before.txt").stdout == "mine\n"  # the home's files came along
        fill = as_user(cls, ANA, "bash", "-c", "head -c 48M /dev/zero > ~/fill")
        assert fill.returncode != 0 and "No space left" in fill.stderr, fill.stderr
        other = as_user(cls, BO, "bash", "-c", "head -c 4M /dev/zero > ~/fine && stat -c %s ~/fine")
        assert other.returncode == 0 and other.stdout.strip() == str(4 * 2**20), other.stderr
    finally:
        undone = journal.undo(log=lambda line: None)
    assert undone == [f"{homes[BO]} unmounted", f"{homes[ANA]} unmounted"]
    assert not any(os.path.ismount(home) for home in homes.values()) and not journal.path.exists()
    assert (homes[ANA] / "before.txt").read_text() == "mine\n" and not (homes[ANA] / "fill").exists()


def test_a_home_that_holds_more_than_the_cap_is_left_as_it_is_and_said(tmp_path):
    """The image starts with what the home holds (mkfs.ext4 -d): one that does not fit is not made, nothing is
    mounted or recorded, and the reason names the home (what `class up` prints as `not capped:`)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "work.bin").write_bytes(os.urandom(12 * 2**20))
    recorded = []
    why = capfs.cap(home, tmp_path / "home.ext4", 8, seed=home, record=lambda kind, **what: recorded.append(kind))
    assert why.startswith(f"what {home} holds does not fit in 8 MiB"), why
    assert not (tmp_path / "home.ext4").exists() and not os.path.ismount(home) and recorded == []


# --- a class up killed halfway, and what class down puts back ----------------------------------------
def _free_run(n: int) -> int:
    from servelab.classroom.errors import port_free

    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            p = sock.getsockname()[1]
        if p + n < 65535 and all(port_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no run of free ports")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def test_a_killed_class_up_is_put_back_by_class_down(cls):
    """`servelab class up` killed (SIGKILL) once its hub answers: the checkout is left closed and the hub
    runs, as seen; `servelab class down` stops the hub and the servers, and puts back the checkout, the
    homes, the cgroups and the mounts, from the record class up wrote before each change."""
    from servelab.paths import REPO_DIR

    def seen(path: Path) -> tuple[int, int]:
        st = path.stat()
        return st.st_mode & 0o7777, st.st_gid

    state = Path(tempfile.mkdtemp(prefix="servelab-killed-"))
    state.chmod(0o755)
    homes = [Path(pwd.getpwnam(n).pw_dir) for n in (TEACH, ANA)]
    before = {p: seen(p) for p in [REPO_DIR, *homes]}
    port = _free_run(3)
    servelab = str(Path(sys.executable).parent / "servelab")
    up = [servelab, "class", "up", "--state", str(state / "class"), "--instructors", TEACH, "--students", ANA]
    with open(state / "up.log", "w") as log:
        proc = subprocess.Popen([*up, "--sqlite", f"--port={port}"], stdout=log, stderr=log, start_new_session=True)
    try:
        started = time.monotonic()
        while not _answers(f"http://127.0.0.1:{port}/hub/api") or "Ctrl-C stops" not in (state / "up.log").read_text():
            assert proc.poll() is None, (state / "up.log").read_text()[-3000:]
            assert time.monotonic() - started < 900, (state / "up.log").read_text()[-3000:]
            time.sleep(1)
        print(f"class up: the hub answered {time.monotonic() - started:.0f} s after start")
        os.killpg(proc.pid, signal.SIGKILL)  # class up and what it runs itself; the hub has its own session
        proc.wait(timeout=60)
        assert seen(REPO_DIR)[0] == 0o750 and _answers(f"http://127.0.0.1:{port}/hub/api")  # left as it was
        flows = ["nft", "list", "table", "inet", limits.flows_table(state / "class")]
        capped = "flows:      capped" in (state / "up.log").read_text()
        assert capped == (subprocess.run(flows, capture_output=True).returncode == 0), (state / "up.log").read_text()
        refused = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(REPO_DIR / "Makefile")])
        assert refused.returncode != 0
        down = subprocess.run(
            [servelab, "class", "down", "--state", str(state / "class")], capture_output=True, text=True
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert {p: seen(p) for p in before} == before, down.stdout
        assert not any(os.path.ismount(home) for home in homes)  # ana's capped home unmounted too
        assert not (state / "class" / "changes.json").exists()
        assert not _answers(f"http://127.0.0.1:{port}/hub/api")
        assert str(state) not in Path("/proc/mounts").read_text()
        assert not any(folder.exists() for folder in limits.class_folders(state / "class"))
        assert subprocess.run(flows, capture_output=True).returncode != 0  # the flows' cap deleted
        opened = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-r", str(REPO_DIR / "Makefile")])
        assert opened.returncode == 0
        again = subprocess.run(
            [servelab, "class", "down", "--state", str(state / "class")], capture_output=True, text=True
        )
        assert again.returncode == 0 and "Nothing to put back" in again.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run([servelab, "class", "down", "--state", str(state / "class")], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def test_a_hand_in_that_cannot_be_taken_is_flagged_and_the_class_is_collected_again(cls):
    """After the first collect: ana hands in again, then once more with more names in one folder than
    collection lists (which would hide a later edit from a partial scan); bo hands in twice and closes the last
    hand-in to the instructor (chmod 700), each after a hand-in that can be taken. `collect --update`
    refuses both with a flag, collects each one's readable later hand-in over the first (the collected
    time stamp is nbgrader's own, so it compares), and exits 0."""
    from servelab.grading import collection

    s = cls["settings"]
    inbound = s.exchange / s.course_id / "inbound"
    submitted = s.course_dir / "submitted"
    refusals = s.course_dir / SafeExchangeCollect.REFUSALS
    seen_before = len(refusals.read_text().splitlines())
    first = {n: (submitted / n / "lesson25" / "timestamp.txt").read_text() for n in (ANA, BO)}

    hand_in(cls, ANA, sample("perfect"))
    hand_in(cls, ANA, sample("partial"))
    newest = max((inbound / ANA).glob(f"{ANA}+lesson25+*"), key=lambda p: p.stat().st_mtime_ns)
    many = collection.MAX_FOLDER_ENTRIES + 1
    made = as_user(cls, ANA, "bash", "-c", f"cd '{newest}' && mkdir $(seq -f d%g 1 {many})")
    assert made.returncode == 0, made.stderr
    hand_in(cls, BO, sample("perfect"))
    hand_in(cls, BO, sample("partial"))
    bo_newest = max((inbound / BO).glob(f"{BO}+lesson25+*"), key=lambda p: p.stat().st_mtime_ns)
    assert as_user(cls, BO, "chmod", "700", str(bo_newest)).returncode == 0

    collected = nbgrader(cls, TEACH, "collect", "--update", "lesson25")
    log = collected.stdout + collected.stderr
    assert "Traceback" not in log, log[-3000:]
    flags = {
        (r["hand_in"], r["claims"], r["owner"]): r["flag"]
        for r in map(json.loads, refusals.read_text().splitlines()[seen_before:])
    }
    assert f"more than {collection.MAX_FOLDER_ENTRIES:,} names" in flags.pop((f"{ANA}/{newest.name}", ANA, ANA))
    assert "could not be opened (Permission denied)" in flags.pop((f"{BO}/{bo_newest.name}", BO, BO))
    assert set(flags.values()) == {"handed in under another student's name"}, flags  # ana's forgery, again
    again = {n: (submitted / n / "lesson25" / "timestamp.txt").read_text() for n in (ANA, BO)}
    for student in (ANA, BO):  # each one's last hand-in that could be taken
        assert (submitted / student / "lesson25" / LESSON.notebook).read_bytes() == sample("perfect")
        assert parse_utc(again[student]) > parse_utc(first[student]) and again[student].endswith(" UTC"), again


def test_class_down_stops_the_servers_a_killed_class_servers_left():
    """`class servers` records its servers (the engines' user and folder) before they start; killed (SIGKILL),
    it leaves them running, and `class down` stops them all: each engine and what it started, nginx and its
    workers. ClassServers itself, with the class's nginx; each engine a stand-in (vLLM is the servers' test):
    a process with the engine's command-line tail that starts a child, as vLLM starts its EngineCore."""
    from servelab.classroom.errors import port_free
    from servelab.classroom.journal import SERVERS_FILE
    from servelab.classroom.servers import _engine_ids

    ids = _engine_ids()
    if ids is None:
        pytest.skip("the engines' user is made by root")
    top = Path(tempfile.mkdtemp(prefix="servelab-servers-"))
    top.chmod(0o755)  # the engines' user passes through it
    state = top / "class"
    port = _free_run(2)
    launcher = f"""
from servelab.classroom import servers
from servelab.classroom.journal import Journal
engine = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
servers.EngineServer.command = lambda self: [self.python, "-c", engine, "--uds", str(self.socket_path)]
pair = servers.ClassServers(model="stand-in", off_port={port}, on_port={port + 1}, state=servers.Path({str(state)!r}),
                            record=Journal(servers.Path({str(state / SERVERS_FILE)!r})).record)
pair.start()
"""
    proc = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # both engines and their children, nginx on both ports
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            mine = _engines_processes(ids[0])
            engines = [p for p in mine if "--uds" in p[2]]
            groups = {g for _, g, _ in engines}
            if len(groups) == 2 and sum(g in groups for _, g, _ in mine) >= 4 and not port_free(port + 1):
                break
            time.sleep(0.5)
        nginx = [p for p in _engines_processes(ids[0]) if "nginx" in p[2]]
        assert len(groups) == 2 and nginx, _engines_processes(ids[0])
        groups |= {g for _, g, _ in nginx}
        proc.kill()  # as `kill -9` of `servelab class servers`
        proc.wait()
        left = [p for p in _engines_processes(ids[0]) if p[1] in groups]
        assert len(left) >= 6 and not port_free(port), left  # all still running: two engines, two children, nginx
        servelab = str(Path(sys.executable).parent / "servelab")
        down = subprocess.run([servelab, "class", "down", "--state", str(state)], capture_output=True, text=True)
        assert down.returncode == 0 and "the class's servers in" in down.stdout, down.stdout + down.stderr
        assert [p for p in _engines_processes(ids[0]) if p[1] in groups] == []
        assert port_free(port) and port_free(port + 1)
        again = subprocess.run([servelab, "class", "down", "--state", str(state)], capture_output=True, text=True)
        assert "Nothing to put back" in again.stdout
    finally:
        proc.kill()
        for pid, group, _ in _engines_processes(ids[0]):
            if group in groups:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(top, ignore_errors=True)


def _engines_processes(uid: int) -> list[tuple[int, int, str]]:
    """(pid, process group, command line) of each running process of `uid`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    args = (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
                    found.append((int(proc.name), int(fields[2]), args))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_students_server_keeps_its_shared_memory_to_itself_and_it_ends_with_the_server():
    """System V shared memory made in a student's server (limits.enter) is in an IPC namespace of its own: the
    machine never lists it, and it does not outlive the server (class down cannot leave it behind)."""
    if os.geteuid() != 0:
        pytest.skip("a namespace of its own needs root")
    size = 4096 * 7919  # a size no other segment on the machine has
    script = f"""
import ctypes
from servelab.classroom import limits
limits.enter([], 8)
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0, {size}, 0o1600)  # IPC_PRIVATE, IPC_CREAT, no IPC_RMID: in the machine's it would stay
print(shmid, open("/proc/sysvipc/shm").read().count(" {size} "), flush=True)
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    shmid, seen_inside = map(int, ran.stdout.split())
    assert shmid >= 0 and seen_inside == 1, ran.stdout
    assert f" {size} " not in Path("/proc/sysvipc/shm").read_text()  # neither while it ran nor after


def test_every_folder_anyone_may_write_is_private_and_capped_in_a_students_server(cls):
    """As her server starts (limits.enter, with the folders `class up` finds), /var/tmp, /run/lock and every
    other world-writable folder are a tmpfs of her own: she writes there, fills it at tmp_mib, and nothing
    of it reaches the machine's disk."""
    shared = limits.shared_dirs()
    assert {"/var/tmp", "/run/lock"} <= set(shared), shared
    name = f"fill-{os.getpid()}"
    script = f"""
import errno, os, pwd
from servelab.classroom import limits
limits.enter([], 8, (), {tuple(shared)!r})
user = pwd.getpwnam({ANA!r})
os.setgroups([]); os.setgid(user.pw_gid); os.setuid(user.pw_uid)
for folder in {tuple(shared)!r}:
    path = os.path.join(folder, {name!r})
    try:
        with open(path, "wb") as f:
            f.write(b"mine")
            f.flush()
            print(folder, "wrote", flush=True)
            for _ in range(16):
                f.write(bytes(2**20))
                f.flush()
        print(folder, "all")
    except OSError as exc:
        print(folder, errno.errorcode[exc.errno])
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    for folder in shared:
        assert f"{folder} wrote\n{folder} ENOSPC\n" in ran.stdout, ran.stdout
        assert not os.path.exists(os.path.join(folder, name))  # the machine's folder never saw it
