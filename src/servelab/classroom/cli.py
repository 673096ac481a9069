"""`servelab class up | servers | report`: up and servers run in the foreground until Ctrl-C, then stop what
they started; report writes the class report of an assignment and returns."""

from __future__ import annotations

import json
import os
import pwd
import signal
import sys
import threading
import time
from pathlib import Path

from .errors import ClassError
from .hub import DEFAULT_STATE

RETEACH_CHARS = 90  # of a re-teach item's description in `class report`'s summary, cut between words


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="class_command", required=True)
    up = sub.add_parser(
        "up", help="the gradebook's PostgreSQL (on a Unix socket), nbgrader's exchange and the hub (on 127.0.0.1)"
    )
    up.add_argument(
        "--state",
        type=Path,
        default=DEFAULT_STATE,
        help="where the class keeps everything, outside the checkout (the checkout is closed to class users)",
    )
    up.add_argument("--instructors", type=_names, required=True, help="system users, comma-separated")
    up.add_argument("--students", type=_names, default=[], help="system users, comma-separated")
    up.add_argument("--port", type=int, default=8000, help="the hub's port (the next two are taken too)")
    up.add_argument(
        "--db-port", type=int, default=5433, help="the gradebook's PostgreSQL socket number (.s.PGSQL.N; no TCP port)"
    )
    up.add_argument("--sqlite", action="store_true", help="keep the gradebook in SQLite (one instructor)")
    up.add_argument(
        "--home-mib",
        type=int,
        default=1024,
        help="each student's home folder, its own file system of this size where the machine can loop-mount",
    )
    up.add_argument(
        "--servers",
        default="",
        help="OFF_URL,ON_URL of the lab's shared servers (default: the ones `servelab class servers` started)",
    )
    up.set_defaults(class_func=cmd_up)

    down = sub.add_parser(
        "down",
        help="put back everything a class changed on the machine (after Ctrl-C this is already done; after a "
        "kill or a crash, this does it): its hub and users' servers stopped, the checkout and homes as they were",
    )
    down.add_argument("--state", type=Path, default=DEFAULT_STATE, help="the class's state folder")
    down.set_defaults(class_func=cmd_down)

    servers = sub.add_parser("servers", help="the two shared vLLM servers the lab's remote backend uses")
    servers.add_argument("--state", type=Path, default=DEFAULT_STATE)
    servers.add_argument("--model", default="", help="folder or hub id (default: the bundled model, on CPU)")
    servers.add_argument("--off-port", type=int, default=8100)
    servers.add_argument("--on-port", type=int, default=8101)
    servers.add_argument("--k", type=int, default=4, help="num_speculative_tokens of the n-gram server")
    servers.add_argument(
        "--per-student",
        type=int,
        default=8,
        help="requests one student may have at a server at once, running or queued (more get HTTP 429)",
    )
    servers.set_defaults(class_func=cmd_servers)

    report = sub.add_parser(
        "report",
        help="after grading: what the class got wrong, per question, and what to "
        "re-teach (one HTML page that opens offline, and a CSV)",
    )
    report.add_argument("assignment", help="the assignment id (lesson25, lab25, knoblab)")
    report.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    report.add_argument("--out", type=Path, help="where the page and the CSV go (default: COURSE/class-reports)")
    report.add_argument(
        "--db-url", default="", help="the gradebook (default: SERVELAB_GRADEBOOK_URL, else COURSE/gradebook.db)"
    )
    report.add_argument("--names", action="store_true", help="name the students who made each slip")
    report.add_argument(
        "--lab-url",
        help="the JupyterLab the page's lesson links open (default: this hub user's "
        "JUPYTERHUB_SERVICE_PREFIX, else a JupyterLab of yours running here that serves the lesson, such as "
        "make lab's, else /; e.g. http://localhost:8888/ to open the page outside it)",
    )
    report.add_argument(
        "--lab-root", type=Path, help="the folder that JupyterLab serves (default: that JupyterLab's, else your home)"
    )
    report.set_defaults(class_func=cmd_report)


def run(args) -> int:
    try:
        return args.class_func(args)
    except ClassError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _wait_for_stop() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def cmd_servers(args) -> int:
    from .journal import SERVERS_FILE, Journal
    from .servers import ClassServers

    args.state.mkdir(parents=True, exist_ok=True)
    journal = Journal(args.state.resolve() / SERVERS_FILE)
    if journal:  # servers a killed `class servers` left running
        print(f"Stopping what the last `class servers` in {args.state} left ({journal.path}):")
        journal.undo()
    servers = ClassServers(
        model=args.model,
        off_port=args.off_port,
        on_port=args.on_port,
        k=args.k,
        log_dir=args.state / "logs",
        state=args.state.resolve(),
        per_student=args.per_student,
        record=journal.record,
    )
    print(
        f"Starting two vLLM servers ({args.model or 'the bundled model, CPU'}): this takes a minute or more ...",
        flush=True,
    )
    took = servers.start()
    user = pwd.getpwuid(servers.ids[0] if servers.ids else os.geteuid()).pw_name  # who answers on their ports
    (args.state / "servers.json").write_text(json.dumps({**servers.urls, "user": user}, indent=1) + "\n")
    print(f"speculation off: {servers.urls['off']}   (ready after {took['off']:.0f} s)")
    print(f"n-gram k={args.k}:   {servers.urls['on']}   (ready after {took['on']:.0f} s)")
    print(f"connections: {servers.connections}")
    print(
        f"`servelab class up` hands these to every student's lab, with the student's own key; each student may "
        f"have {args.per_student} requests at a server at once. Ctrl-C stops both.",
        flush=True,
    )
    try:
        _wait_for_stop()
    finally:
        servers.stop()
        journal.undo(log=lambda line: None)  # nothing is left to stop: the record goes
    return 0


def cmd_up(args) -> int:
    from . import limits
    from .hub import CHECKOUT_GROUP, ClassHub, ClassSettings
    from .limits import Limits
    from .postgres import Postgres

    off, on = (_names(args.servers) + ["", ""])[:2] if args.servers else ("", "")
    saved = args.state / "servers.json"
    owner = ""  # who answers on the class servers' ports: known for the class's own (servers.json), not --servers'
    if not off and saved.exists():
        urls = json.loads(saved.read_text())
        off, on, owner = urls["off"], urls["on"], urls.get("user", "")
    settings = ClassSettings(
        state=args.state.resolve(),
        instructors=args.instructors,
        students=args.students,
        port=args.port,
        remote_off_url=off,
        remote_on_url=on,
        limits=Limits(home_mib=args.home_mib).as_json(),
    )
    started = time.monotonic()
    hub = ClassHub(settings)
    hub.recover()  # what a class killed before this one left (its hub on the port too) is put back first
    hub.check()  # every missing piece is named before anything starts
    guarded = _guard_servers(hub, settings, [off, on], owner)
    flows = limits.cap_flows(settings.state, [*settings.instructors, *settings.students], hub.journal.record)
    db = None
    if not args.sqlite:
        db = Postgres(settings.state / "db", port=args.db_port)
        hub.instructors_group()  # before the gradebook: its socket's folder lets this group in, no one else
        hub.journal.record("postgres", folder=str(db.folder), port=args.db_port)
        settings.gradebook_url = db.start(group=CHECKOUT_GROUP)
    try:
        hub.start()
        took = time.monotonic() - started
        print(f"hub:        {hub.url}  (up {took:.0f} s after start; log {hub.log_path})")
        print(
            f"users:      instructors {', '.join(settings.instructors)}; students {', '.join(settings.students) or '-'}"
        )
        print(
            f"gradebook:  {f'PostgreSQL on its socket in {db.socket_dir} (instructors only)' if db else 'SQLite in the course'}"
        )
        print(f"exchange:   {settings.exchange}   course: {settings.course_dir}")
        capped = [name for name, yes in settings.home_capped.items() if yes]
        if capped:
            print(f"homes:      {', '.join(capped)}: each their own file system of {args.home_mib} MiB")
        for note in hub.notes:
            print(f"not capped: {note}")
        if guarded:
            print(f"servers:    {guarded}")
        print(f"flows:      {flows}")
        print(f"lab:        {off or 'no shared servers (run `servelab class servers` first)'} {on}")
        print("Ctrl-C stops the hub, every user's server and the gradebook.", flush=True)
        _wait_for_stop()
    finally:
        hub.stop()
        if db is not None:
            db.stop()
    return 0


def _guard_servers(hub, settings, urls: list[str], owner: str) -> str:
    """The ports of the servers the labs are handed answer only from the user `class servers` runs them as, while
    the class runs (limits.guard_ports: a student listening there while they are stopped would be sent a
    classmate's key); servers named with --servers are not the class's, and their user is not known."""
    from urllib.parse import urlsplit

    from . import limits

    ports = sorted({urlsplit(u if "//" in u else f"http://{u}").port or 80 for u in urls if u})
    if not ports:
        return ""
    if not owner:
        return "not guarded: servers named with --servers (the ports of `class servers`' own are guarded)"
    return limits.guard_ports(settings.state, ports, owner, record=hub.journal.record)


def cmd_down(args) -> int:
    from .journal import SERVERS_FILE, Journal

    engines = Journal(args.state.resolve() / SERVERS_FILE)  # what `class servers` started
    journal = Journal.of(args.state.resolve())
    if not journal and not engines:
        print(f"Nothing to put back: no class's changes are recorded in {journal.path} or {engines.path}.")
        return 0
    for record in (engines, journal):
        if record:
            print(f"Putting back what the class in {args.state} changed ({record.path}):")
            record.undo()
    print("done.")
    return 0


def cmd_report(args) -> int:
    from . import report

    out = args.out or args.course / "class-reports"
    built = report.build(
        args.assignment,
        args.course.resolve(),
        args.db_url or None,
        names=args.names,
        lab_url=args.lab_url,
        lab_root=args.lab_root,
    )
    page, table = report.write(built, out)
    print(f"{built.submissions} submissions of {built.assignment}: {page}  (and {table.name})")
    print(f"  gradebook: {built.gradebook}")
    for i, s in enumerate(built.reteach, 1):
        print(
            f"  re-teach {i}: {report.shorten(s.about, RETEACH_CHARS)} ({', '.join(s.grade_ids)}, {s.count} students, "
            f"{s.points_lost:g} points) -> {'; '.join(s.sections)}"
        )
    return 0
