"""The class's JupyterHub on one machine, and what each role's single-user server is configured with.

`ClassHub(settings).start()` checks every piece first (root for system users,
node and configurable-http-proxy, free ports, the users), then lays out:

    <state>/exchange/                 nbgrader's filesystem exchange, root's: instructors write outbound and
                                      feedback, each student only their own inbound folder, a capped file
                                      system where the machine can loop-mount (classroom/exchange.py)
    ~<first instructor>/servelab/     the course directory (nbgrader's CourseDirectory.root), mode 700
    <state>/jupyter/<role>/           each role's Jupyter config: nbgrader's course and exchange, which of
                                      nbgrader's extensions the role gets (students: assignment list;
                                      instructors: also formgrader, course list, create assignment)
    <state>/hub/                      JupyterHub's own database, cookie secret and log
    <state>/env/                      the students' environment: a built wheel of servelab installed
                                      in a venv every user can read (classroom/studentenv.py), and the
                                      instructors' venv that sees this checkout's packages
    <state>/class.json                the settings class/jupyterhub_config.py reads
    ~<student>/.servelab/variants/    the student's own numbers of the lesson's variant questions, root's,
                                      readable by them alone (servelab.variants.lesson); the course secret
                                      they are drawn under is in the course directory (variant-secret),
                                      beside the class's roster (roster), whose numbers `variants show` shows
    <state>/changes.json              every change made outside the state folder, written before it is made
                                      (classroom/journal.py): `class down` or the next `class up` puts it back

makes every class user's home folder private (mode 700; Debian's default is 755; put back on stop)
and each student's its own file system of Limits.home_mib where the machine can loop-mount
(cap_home; the image under <state>/home-images keeps the class's work; unmounted on stop),
closes the checkout to class users (it holds the keys, solutions/ and the sample
submissions: mode 750, group CHECKOUT_GROUP, the instructors; put back on stop) and, the
same way, its git directory where that lies outside it (a linked worktree's), and
makes the class's cgroups (each student's server and kernels under memory, CPU and process
limits, with a private /tmp: classroom/limits.py), and
starts `jupyterhub -f class/jupyterhub_config.py` on 127.0.0.1. Users log in with
their system password (JupyterHub's PAM authenticator) and each gets a single-user
JupyterLab run as that user: a student's from the students' environment (the wheel,
never the checkout), an instructor's from the instructors' venv, which sees this
checkout's packages and grades with the keys. The sandbox that grades a submission mounts the students' servelab.

The same settings are what class/z2jh-values.yaml carries for Zero to JupyterHub
(tests/test_class_hub.py checks both).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..courseid import COURSE_ID
from ..grading import course
from ..paths import REPO_DIR
from . import capfs, exchange, limits, studentenv
from . import servers as class_servers
from .errors import ClassError, require_port
from .journal import Journal, process_entry

CONFIG = REPO_DIR / "class" / "jupyterhub_config.py"
CHP_VERSION = "4.6.3"  # configurable-http-proxy; 5.x needs node 22
HUB_PORT = 8000
# Outside the checkout: students reach the exchange and their environment through it, and the checkout is closed.
DEFAULT_STATE = Path("/var/lib/servelab-class")
CHECKOUT_GROUP = "servelab-instructors"  # who may read the checkout while a class runs
START_TIMEOUT_S = 180  # until the hub answers; a cold hub on 2 busy cores takes 5 to 20 s
CULL_IDLE_DEFAULT_S = 3600  # jupyterhub-idle-culler --timeout (SERVELAB_CULL_IDLE_S; z2jh cull.timeout)
# --max-age (SERVELAB_CULL_MAX_AGE_S; z2jh cull.maxAge): a server is stopped this long after it started, whatever
# activity it reports (its own token may post a last_activity ahead of the clock); a school day
CULL_MAX_AGE_DEFAULT_S = 8 * 3600
STUDENT_EXTENSIONS = ("assignment_list", "validate_assignment")
INSTRUCTOR_EXTENSIONS = ("assignment_list", "validate_assignment", "formgrader", "course_list")
ALL_EXTENSIONS = ("assignment_list", "validate_assignment", "formgrader", "course_list")
LAB_PLUGINS = {  # nbgrader's JupyterLab plugins by server extension (create-assignment is the instructor's)
    "assignment_list": "assignment-list",
    "validate_assignment": "validate-assignment",
    "formgrader": "formgrader",
    "course_list": "course-list",
}


@dataclass
class ClassSettings:
    """One class: who is in it, where it lives, which servers the lab uses."""

    state: Path = DEFAULT_STATE
    course_id: str = COURSE_ID
    instructors: list[str] = field(default_factory=list)
    students: list[str] = field(default_factory=list)
    port: int = HUB_PORT  # the hub's public port on 127.0.0.1; the proxy's API and the hub itself take the next two
    remote_off_url: str = ""  # the lab's shared server without speculation (servelab class servers prints it)
    remote_on_url: str = ""  # ... and with n-gram speculation
    gradebook_url: str = ""  # SERVELAB_GRADEBOOK_URL, handed to instructors only
    student_python: str = ""  # the students' environment's Python (<state>/env/venv), set by lay_out
    student_package: str = ""  # ... and the servelab it installed, which the grading sandbox mounts
    instructor_python: str = ""  # the instructors' venv's Python (<state>/env/instructor), set by lay_out
    limits: dict = field(default_factory=lambda: limits.Limits().as_json())  # each student's server (limits.Limits)
    inbound_capped: dict = field(default_factory=dict)  # student -> whether their inbound is a capped file system
    home_capped: dict = field(default_factory=dict)  # student -> whether their home is a capped file system
    variants: bool = True  # each student's own numbers in the lesson's variant questions, graded against them

    @property
    def variant_secret(self) -> Path:
        """The course secret the variants are drawn under: in the course directory, the instructors' alone."""
        return self.course_dir / "variant-secret"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"

    @property
    def course_dir(self) -> Path:
        """nbgrader's course directory, in the first instructor's home: the formgrader only works on a
        course inside its server's root ("The course directory root is not a subdirectory of the notebook
        server root")."""
        return Path(pwd.getpwnam(self.instructors[0]).pw_dir) / self.course_id

    def jupyter_dir(self, role: str) -> Path:
        return self.state / "jupyter" / role

    def to_json(self) -> str:
        d = asdict(self)
        d["state"] = str(self.state)
        return json.dumps(d, indent=1)

    @classmethod
    def load(cls, path: Path) -> "ClassSettings":
        d = json.loads(Path(path).read_text())
        d["state"] = Path(d["state"])
        return cls(**d)


def server_extensions(role: str) -> dict[str, bool]:
    """ServerApp.jpserver_extensions for a role: every nbgrader extension on or off."""
    wanted = INSTRUCTOR_EXTENSIONS if role == "instructor" else STUDENT_EXTENSIONS
    return {f"nbgrader.server_extensions.{e}": e in wanted for e in ALL_EXTENSIONS}


# What a class user's Python must run: servelab and nbgrader, and nbconvert's HTML exporter's own first step,
# selecting with soupsieve, which every feedback page goes through.
PYTHON_PROBE = (
    "import servelab, nbgrader, bs4; "
    "assert bs4.BeautifulSoup('<img>', 'html.parser').select('img:not([alt])'), 'a CSS selector selects nothing'"
)


def disabled_lab_plugins(role: str) -> list[str]:
    """JupyterLab plugins a role does not see (page_config.json's disabledExtensions)."""
    if role == "instructor":
        return []
    return [f"@jupyter/nbgrader:{LAB_PLUGINS[e]}" for e in ALL_EXTENSIONS if e not in STUDENT_EXTENSIONS] + [
        "@jupyter/nbgrader:create-assignment"
    ]


def nbgrader_settings(settings: ClassSettings, role: str) -> dict[str, dict]:
    """The nbgrader config a role's server reads, as {section: {trait: value}}."""
    config: dict[str, dict] = {
        "CourseDirectory": {"course_id": settings.course_id},
        "Exchange": {"root": str(settings.exchange)},
        "ExchangeFactory": exchange.factory_settings(),  # the class's layout (collect: the course's own config)
    }
    if role == "instructor":
        config["CourseDirectory"].update(root=str(settings.course_dir), source_directory=str(course.SOLUTIONS))
        if settings.variants:  # the grader checks each student's answers against their own numbers
            config["ScoreAnswers"] = {
                "variants": True,
                "variant_secret_file": str(settings.variant_secret),
                "variant_roster": list(settings.students),  # whose variants a copied answer is looked for among
            }
    return config


def python_config(config: dict[str, dict], course_config: Path | None = None) -> str:
    lines = [
        "# Written by `servelab class up`; the class's settings are in ../../class.json.",
        "c = get_config()  # noqa: F821",
    ]
    if course_config is not None:
        # The course's own settings (gradebook URL, autograde limits, feedback) for the formgrader too,
        # which reads its config from here and the server's folder, not from the course directory.
        lines.append(f"load_subconfig({str(course_config)!r})  # noqa: F821")
    lines += [f"c.{section}.{name} = {value!r}" for section, values in config.items() for name, value in values.items()]
    return "\n".join(lines) + "\n"


def shared_models_dir() -> str:
    """The models the class shares, if the hub's environment names a place for them; "" otherwise."""
    if os.environ.get("SERVELAB_MODELS"):
        return os.environ["SERVELAB_MODELS"]
    return str(Path(os.environ["SERVELAB_CACHE"]) / "models") if os.environ.get("SERVELAB_CACHE") else ""


HUB_LOG_BYTES = 20 * 2**20  # the hub's log rotates at this size ...
HUB_LOG_KEPT = 4  # ... keeping this many old ones: 100 MiB in all, however many requests a student sends


def hub_logging_config(log_path: Path) -> dict:
    """The hub's logging (traitlets' Application.logging_config, merged into its own): into `log_path` through
    Python's RotatingFileHandler, none to stderr. Every request the hub refuses writes a warning line (tornado's
    access log), about 750 MB an hour from one student's loop of keyless API calls; capped, the disk the gradebook
    and the hub's database are on keeps its room."""
    return {
        "handlers": {
            "console": {"level": "CRITICAL"},  # traitlets' own handler (stderr): the file has it all
            "capped": {
                "class": "logging.handlers.RotatingFileHandler",
                "filename": str(log_path),
                "maxBytes": HUB_LOG_BYTES,
                "backupCount": HUB_LOG_KEPT,
                "formatter": "console",
                "level": "DEBUG",
            },
        },
        "loggers": {"JupyterHub": {"handlers": ["console", "capped"]}},
    }


def lab_environment(settings: ClassSettings, role: str) -> dict[str, str]:
    """What every single-user server of a role runs with: its Jupyter config and the lab's shared servers."""
    env = {
        "JUPYTER_CONFIG_PATH": str(settings.jupyter_dir(role)),
        "SERVELAB_REMOTE_OFF_URL": settings.remote_off_url,
        "SERVELAB_REMOTE_ON_URL": settings.remote_on_url,
        # Where the hub's models are, when they were put somewhere shared (SERVELAB_CACHE or SERVELAB_MODELS):
        # each user reads those, and keeps results and logs in their own ~/.cache/servelab.
        "SERVELAB_MODELS": shared_models_dir(),
    }
    if role == "instructor" and settings.gradebook_url:
        env["SERVELAB_GRADEBOOK_URL"] = settings.gradebook_url
    if role == "instructor":
        env["SERVELAB_SANDBOX_PACKAGE"] = settings.student_package  # submissions run the students' servelab
    if role == "instructor" and settings.variants and settings.instructors:
        env["SERVELAB_VARIANT_SECRET_FILE"] = str(settings.variant_secret)  # `servelab variants show`, the report
    if role == "student" and settings.student_python:
        # Nothing of the checkout's venv on a student's PATH: its folders are closed to them.
        env["PATH"] = os.pathsep.join([str(Path(settings.student_python).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    if role == "instructor" and settings.instructor_python:
        # The instructors' venv: this venv's console scripts (alembic, which nbgrader runs) started by its Python.
        env["PATH"] = os.pathsep.join(
            [str(Path(settings.instructor_python).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        )
    return {k: v for k, v in env.items() if v}


def single_user_command(settings: ClassSettings, role: str) -> list[str]:
    """What the hub runs for a role's server: students the wheel's environment, instructors this venv."""
    if role == "student" and settings.student_python:
        return [settings.student_python, "-m", "jupyterhub.singleuser"]
    if role == "instructor" and settings.instructor_python:
        return [settings.instructor_python, "-m", "jupyterhub.singleuser"]
    return [str(Path(sys.executable).parent / "jupyterhub-singleuser")]


def chp_command() -> str:
    """configurable-http-proxy: the one `make class-deps` installs beside the venv, else the one on PATH."""
    local = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return str(local)
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    if not shutil.which("node"):
        raise ClassError(
            "JupyterHub's proxy needs Node.js, which is not installed: run `make class-deps` "
            "(Debian: apt-get install nodejs npm), then start the class again."
        )
    raise ClassError(
        f"configurable-http-proxy (JupyterHub's proxy, from npm) is not installed: run `make class-deps` "
        f"(npm install --prefix {Path(sys.prefix) / 'node'} configurable-http-proxy@{CHP_VERSION})."
    )


def git_dirs_outside(checkout: Path) -> list[Path]:
    """The checkout's git folders that lie outside it, which closing the checkout does not close.

    A clone keeps its git directory in `<checkout>/.git`. A linked worktree (`git worktree add`) or a
    submodule has a `.git` file instead, `gitdir: <path>`, naming its own git directory elsewhere,
    whose `commondir` file names the repository's shared one (objects, refs): both layouts are git's
    own (https://git-scm.com/docs/gitrepository-layout, "commondir" and "gitdir"). Any student who can
    read the shared one reads every committed file: `git --git-dir=<it> show HEAD:grading/keys/...`.
    """
    checkout = checkout.resolve()
    dot_git = checkout / ".git"
    if not dot_git.is_file():
        return []
    text = dot_git.read_text().strip()
    if not text.startswith("gitdir:"):
        return []
    git_dir = (checkout / text.removeprefix("gitdir:").strip()).resolve()
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    outside: list[Path] = []
    for folder in (common, git_dir):
        closed = [checkout, *outside]
        if folder.is_dir() and not any(folder == c or c in folder.parents for c in closed):
            outside.append(folder)
    return outside


def cap_home(user: str, images: Path, mib: int, record=lambda kind, **what: None) -> str:
    """A student's home folder made its own ext4 of `mib` MiB (nosuid,nodev; servelab.classroom.capfs), which
    starts with what the home holds; "" when capped, else why not (the home is left as it is).

    A student who fills it gets ENOSPC there and nobody else is affected. The mount is recorded in the
    class's journal before it is made (`class down` unmounts it, the home below is as it was); the image,
    <images>/<user>.ext4, keeps what the student saved during the class, and the next `class up` mounts it
    again."""
    entry = pwd.getpwnam(user)
    home = Path(entry.pw_dir)
    if not home.is_dir() or home.resolve() == Path("/"):
        return f"{home} is not a home folder of {user}'s own"
    if home.resolve() in Path(images).resolve().parents:
        return f"the class's state folder is inside {home}, which a file system mounted on it would hide"
    st = home.stat()
    if st.st_uid != entry.pw_uid:
        return f"{home} is not owned by {user} (uid {st.st_uid}); left as it is"
    images.mkdir(parents=True, exist_ok=True)
    images.chmod(0o700)
    why = capfs.cap(home, images / f"{user}.ext4", mib, options="nosuid,nodev", seed=home, record=record)
    if not why:  # the file system's top is the home: its owner and mode (700 in a class)
        os.chown(home, st.st_uid, st.st_gid)
        home.chmod(st.st_mode & 0o7777)
    return why


class ClassHub:
    """The hub, started and stopped; usable as a context manager."""

    def __init__(self, settings: ClassSettings):
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        self.log_path = settings.state / "hub" / "jupyterhub.log"  # its logging, capped (hub_logging_config)
        self.output_path = settings.state / "hub" / "jupyterhub-output.log"  # what it prints outside its logging
        self.notes: list[str] = []  # what the class could not bound on this machine, for `class up` to say
        try:
            self.journal = Journal.of(settings.state)  # what this class changed outside its state folder
        except PermissionError:  # root's record, read by someone else: `check` says they need root
            self.journal = Journal(Path("/nonexistent") / "changes.json")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port}"

    # --- checks, each with what to do ---------------------------------------------------------------
    def check(self) -> str:
        s = self.settings
        if os.geteuid() != 0:
            raise ClassError(
                "The class's hub runs each user's server as that system user, which needs root: "
                "start it with sudo (sudo .venv/bin/servelab class up ...)."
            )
        if not s.instructors:
            raise ClassError("A class needs at least one instructor: --instructors NAME (a system user).")
        state = Path(s.state).resolve()
        if state == REPO_DIR or REPO_DIR in state.parents:
            raise ClassError(
                f"The class's state folder {state} is inside the checkout, which class users cannot "
                f"read while the class runs: use --state outside it (default {DEFAULT_STATE})."
            )
        for name in s.instructors + s.students:
            try:
                pwd.getpwnam(name)
            except KeyError:
                raise ClassError(
                    f"There is no system user {name!r}: create it (useradd -m {name} && passwd {name}) "
                    "or remove it from the roster."
                ) from None
        closed = [p for p in REPO_DIR.parents if not os.stat(p).st_mode & 0o001]
        if closed:
            raise ClassError(
                f"The checkout {REPO_DIR} is inside {closed[-1]}, which other users cannot pass through (mode "
                f"{os.stat(closed[-1]).st_mode & 0o777:o}), so the instructors' servers cannot read the course: "
                f"clone it somewhere every user can reach (for example /srv/servelab), or open {closed[-1]} "
                "yourself; servelab does not open it."
            )
        studentenv.open_python()  # a Python every class user can run, or what is closed
        limits.hierarchy()  # cgroups to limit each student's server, or what to do
        chp = chp_command()
        for port, what in ((s.port, "hub"), (s.port + 1, "hub's proxy API"), (s.port + 2, "hub's internal API")):
            require_port(port, what, "--port")
        return chp

    @staticmethod
    def _check_python_for(user: str, python: Path | None = None) -> None:
        """A user's server runs `python` (default: this environment's): the user must be able to run it, and
        it must run what the class runs with it (PYTHON_PROBE): a build of Python other than this venv's own
        (Debian's, open_python) can break a package that works here, and the class would find out at feedback."""
        python = Path(python or sys.executable)
        probe = subprocess.run(
            ["runuser", "-u", user, "--", str(python), "-c", PYTHON_PROBE],
            capture_output=True,
            text=True,
            cwd="/",
        )
        if probe.returncode == 0:
            return
        real = python.resolve()
        closed = [str(p) for p in real.parents if not os.stat(p).st_mode & 0o001]
        raise ClassError(
            f"User {user!r} cannot run this environment's Python ({python} -> {real}): "
            + (
                f"{', '.join(closed)} is closed to other users; `make class-deps` opens it for "
                "traversal (chmod o+x), or build the venv from a Python every user can run."
                if closed
                else f"it cannot run what the class runs (a package of this venv that does not work under "
                f"{real}?): {probe.stderr.strip()[-500:]}"
            )
        )

    # --- layout -------------------------------------------------------------------------------------
    def lay_out(self) -> None:
        s = self.settings
        s.state.mkdir(parents=True, exist_ok=True)
        s.state.chmod(0o755)  # students reach the exchange through it
        for role in ("student", "instructor"):
            folder = s.jupyter_dir(role)
            (folder / "labconfig").mkdir(parents=True, exist_ok=True)
            course_config = s.course_dir / "nbgrader_config.py" if role == "instructor" else None
            (folder / "nbgrader_config.py").write_text(python_config(nbgrader_settings(s, role), course_config))
            (folder / "jupyter_server_config.json").write_text(
                json.dumps({"ServerApp": {"jpserver_extensions": server_extensions(role)}}, indent=1)
            )
            (folder / "labconfig" / "page_config.json").write_text(
                json.dumps({"disabledExtensions": {p: True for p in disabled_lab_plugins(role)}}, indent=1)
            )
        for name in s.instructors + s.students:
            # Debian makes homes readable by everyone (UMASK 022); in a class, a student's work is their own.
            home = Path(pwd.getpwnam(name).pw_dir)
            if home.is_dir() and home.stat().st_mode & 0o077:
                self.journal.mode(home)
                home.chmod(home.stat().st_mode & 0o700)
        home_mib = int(s.limits.get("home_mib", limits.Limits.home_mib))
        for name in s.students:  # each student's home its own file system (the instructors' hold the course)
            why = cap_home(name, s.state / "home-images", home_mib, record=self.journal.record)
            s.home_capped[name] = not why
            if why:
                self.notes.append(f"{name}'s home is not capped at {home_mib} MiB: {why}")
        python, package = studentenv.build(s.state)
        s.student_python, s.student_package = str(python), str(package)
        s.instructor_python = str(studentenv.build_instructor(s.state))
        self.close_checkout()
        if s.students:
            self._check_python_for(s.students[0], python)
        self._check_python_for(s.instructors[0], Path(s.instructor_python))
        s.inbound_capped = exchange.lay_out(
            s.exchange,
            s.course_id,
            s.instructors,
            s.students,
            CHECKOUT_GROUP,
            s.state / "inbound-images",
            record=self.journal.record,
        )
        self.notes += [
            f"{name}'s inbound is not a file system of its own (this machine cannot loop-mount); collection "
            "still copies at most 100 MiB of a hand-in"
            for name, capped in s.inbound_capped.items()
            if not capped
        ]
        limits.make_class(s.state, record=self.journal.record)
        # Keys of the class's servers for this class's users only (servers.grant makes them as servers start).
        revoked = class_servers.revoke_all_but(s.state, [*s.instructors, *s.students])
        if revoked:
            self.notes.append(f"keys for the class's servers taken back from {', '.join(revoked)} (not in this class)")
        # Every folder any user may write, made private in each student's server as /tmp is (limits.enter).
        homes = tuple(pwd.getpwnam(name).pw_dir for name in s.instructors + s.students)
        s.limits = {**s.limits, "shared_dirs": limits.shared_dirs(skip=(str(s.state.resolve()), *homes))}
        owner = s.instructors[0]
        if not (s.course_dir / "nbgrader_config.py").exists():
            course.make(s.course_dir)
        if s.variants:
            self.hand_out_variants()
        subprocess.run(["chown", "-R", f"{owner}:", str(s.course_dir)], check=True)
        s.course_dir.chmod(0o700)  # the gradebook's copies and the submissions are the instructor's alone
        hub = s.state / "hub"
        hub.mkdir(exist_ok=True)
        hub.chmod(0o700)
        (s.state / "class.json").write_text(s.to_json())
        (s.state / "class.json").chmod(0o600)  # it holds the gradebook's password

    def hand_out_variants(self) -> None:
        """Each student's own numbers for the lesson's variant questions, in their home where only they read
        them (servelab.variants.lesson.hand_out), drawn under the course secret (made on the first class)."""
        from ..variants import course_secret
        from ..variants.lesson import hand_out, write_roster

        secret = course_secret(self.settings.variant_secret)  # owned by the first instructor below (chown -R)
        for name in self.settings.students:
            hand_out(name, secret=secret, record=self.journal.record)  # `class down` removes it
        # Whose numbers `servelab variants show` may show: beside the secret, the instructors' (class.json is root's)
        write_roster(self.settings.students, self.settings.variant_secret)

    def instructors_group(self) -> int:
        """The instructors' group (CHECKOUT_GROUP), made if need be, with every instructor in it; its gid. Who
        may read the checkout while a class runs, and pass into the gradebook's socket folder."""
        try:
            grp.getgrnam(CHECKOUT_GROUP)
        except KeyError:
            self.journal.record("group", name=CHECKOUT_GROUP)
            subprocess.run(["groupadd", "--system", CHECKOUT_GROUP], check=True, capture_output=True)
        for name in self.settings.instructors:
            if CHECKOUT_GROUP not in subprocess.run(["id", "-nG", name], capture_output=True, text=True).stdout.split():
                self.journal.record("member", user=name, group=CHECKOUT_GROUP)
                subprocess.run(["usermod", "-aG", CHECKOUT_GROUP, name], check=True, capture_output=True)
        return grp.getgrnam(CHECKOUT_GROUP).gr_gid

    def close_checkout(self, checkout: Path = REPO_DIR) -> None:
        """Class users cannot read the checkout (keys, solutions/, samples) nor its git objects, which hold
        every committed version of them; the instructors can, as a group."""
        gid = self.instructors_group()
        for folder in [checkout, *git_dirs_outside(checkout)]:
            self.journal.mode(folder)  # written down (and synced) before the folder is closed
            os.chown(folder, -1, gid)
            folder.chmod(0o750)

    def recover(self) -> None:
        """If a class before this one was killed or crashed, put back what it left changed (root only: as
        anyone else `check` refuses first)."""
        if os.geteuid() == 0 and self.journal:
            print(f"A class before this one left changes on the machine ({self.journal.path}); putting them back:")
            self.restore()

    def restore(self, log=print) -> list[str]:
        """Put back everything the class changed on the machine (its journal), newest first: the hub and
        the students' processes stopped, cgroups and mounts removed, the checkout and homes as they were,
        the group and its members as they were. Safe to call again, and after a crash or a kill."""
        return self.journal.undo(log=log)

    # --- running ------------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> float:
        """Check, lay out, start; seconds until the hub answered."""
        chp = self.check()  # `class up` has put back what a killed class left (recover) before its gradebook
        try:
            self.lay_out()
        except BaseException:
            self.restore()
            raise
        env = dict(os.environ, SERVELAB_CLASS_STATE=str(self.settings.state), SERVELAB_CLASS_PROXY=chp)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.output_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)],
                cwd=self.settings.state / "hub",
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.journal.record("process", **process_entry(self.proc.pid, "the class's hub"))
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClassError(f"JupyterHub exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api", timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise ClassError(f"JupyterHub did not answer on {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the hub's log, and of what it printed outside its logging (a failed start's traceback)."""
        tails = [p.read_text(errors="replace")[-chars:] for p in (self.log_path, self.output_path) if p.exists()]
        return "\n".join(t for t in tails if t.strip())

    def stop(self) -> None:
        """Stop the hub, the proxy and every user's server (JupyterHub stops them on SIGTERM); put back
        everything the class changed (the checkout, homes, the group, cgroups, mounts)."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                return
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        finally:
            self.restore()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
