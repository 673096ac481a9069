"""The class's gradebook server: a PostgreSQL cluster the class owns, in a folder, on a socket only instructors reach.

Debian's binaries (/usr/lib/postgresql/<version>/bin) make and run it: initdb
into the folder, pg_ctl to start and stop. PostgreSQL refuses to run as root, so
when the class is started by root the cluster belongs to the `postgres` system
user (Debian's package makes it).

It listens on no TCP port at all, only on a Unix socket in a folder of its own
(`<folder>-socket`, mode 750, group the instructors' group when `start` is given
one): a student cannot open a connection to it, so cannot fill its
max_connections with logins that never finish (300 half-open connections to a
loopback port once left the instructors with "too many clients already"). The
port is only the socket's number (`.s.PGSQL.<port>`). Logins also need the
password (scram-sha-256), which sits beside the folder, readable by root only.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

from .errors import ClassError

DB_PORT = 5433  # the socket's number: not 5432's, so a system PostgreSQL's socket keeps its name
SOCKET_PATH_MAX = 107  # bytes in a Unix socket's path (sun_path less its NUL); PostgreSQL refuses a longer one
DB_USER = "servelab"
GRADEBOOK_DB = "servelab_gradebook"
START_TIMEOUT_S = 120  # pg_ctl -w waits this long for the server to accept connections


def bin_dir() -> Path:
    """The newest PostgreSQL's bin folder (Debian keeps them versioned), else the one on PATH."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise ClassError(
        "PostgreSQL is not installed (no pg_ctl in /usr/lib/postgresql/*/bin or on PATH): "
        "run `make class-deps` (Debian: apt-get install postgresql)."
    )


class Postgres:
    """One PostgreSQL cluster in `folder`, listening on `<folder>-socket/.s.PGSQL.<port>` only."""

    def __init__(self, folder: Path, port: int = DB_PORT):
        self.folder = Path(folder).resolve()
        self.port = port
        self.socket_dir = self.folder.parent / f"{self.folder.name}-socket"
        self.bin = bin_dir()
        self.owner = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        self.password_file = self.folder.parent / f"{self.folder.name}.password"

    # --- running Debian's tools as the cluster's owner -----------------------------------------
    def _run(self, tool: str, *args: str, timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", self.owner, "--", *cmd]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/")
        if result.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise ClassError(
                f"PostgreSQL's {tool} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-1500:]}\n{tail}".strip()
            )
        return result

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def url(self, database: str = GRADEBOOK_DB) -> str:
        """The SQLAlchemy URL nbgrader takes as its db_url (SERVELAB_GRADEBOOK_URL)."""
        host = quote(str(self.socket_dir), safe="/")
        return (
            f"postgresql+psycopg2://{DB_USER}:{quote(self.password, safe='')}@/{database}?host={host}&port={self.port}"
        )

    def running(self) -> bool:
        if not (self.folder / "postmaster.pid").exists():
            return False
        cmd = [str(self.bin / "pg_ctl"), "status", "-D", str(self.folder)]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", self.owner, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, cwd="/").returncode == 0

    # --- lifecycle -------------------------------------------------------------------------------
    def init(self) -> None:
        """initdb once: a cluster whose superuser is `servelab`, password only, owned by the cluster's user."""
        if (self.folder / "PG_VERSION").exists():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._check_reachable()
        self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
        self.password_file.chmod(0o600)
        if os.geteuid() == 0:
            shutil.chown(self.folder, self.owner, self.owner)
            # initdb reads the password as the cluster's user; the file is removed from its reach after.
            shutil.chown(self.password_file, self.owner)
        self.folder.chmod(0o700)
        try:
            self._run(
                "initdb",
                "-D",
                str(self.folder),
                "-U",
                DB_USER,
                "--auth=scram-sha-256",
                f"--pwfile={self.password_file}",
                "--encoding=UTF8",
                "--no-instructions",
            )
        finally:
            if os.geteuid() == 0:
                shutil.chown(self.password_file, "root", "root")

    def start(self, group: str | None = None) -> str:
        """Start the cluster (made first if need be) and create the gradebook database; its URL.

        `group` (a group's name, run as root) may pass into the socket's folder; else only the cluster's user."""
        self._check_socket_path()  # before initdb makes anything
        self.init()
        self._socket_folder(group)
        if not self.running():
            options = f"-p {self.port} -c listen_addresses='' -k {shlex.quote(str(self.socket_dir))}"
            self._run(
                "pg_ctl",
                "start",
                "-D",
                str(self.folder),
                "-l",
                str(self.folder / "server.log"),
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "-o",
                options,
            )
        self.create_database(GRADEBOOK_DB)
        return self.url()

    def stop(self) -> None:
        if self.running():
            self._run("pg_ctl", "stop", "-D", str(self.folder), "-m", "fast", "-w")

    def connect(self, database: str = GRADEBOOK_DB):
        import psycopg2

        return psycopg2.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=DB_USER,
            password=self.password,
            dbname=database,
            connect_timeout=30,
        )

    def _check_socket_path(self) -> None:
        path = self.socket_dir / f".s.PGSQL.{self.port}"
        if len(os.fsencode(path)) > SOCKET_PATH_MAX or "," in str(self.socket_dir):
            raise ClassError(
                f"The gradebook's socket {path} is longer than a Unix socket's {SOCKET_PATH_MAX} bytes or holds a "
                "comma (PostgreSQL's list separator): choose a shorter state folder with --state."
            )

    def _socket_folder(self, group: str | None) -> None:
        """The socket's folder: the cluster's user's, mode 750, its group `group` (who may connect) or the user's."""
        self.socket_dir.mkdir(exist_ok=True)
        self.socket_dir.chmod(0o700)  # closed first: its group may change below
        if os.geteuid() == 0:
            try:
                gid = grp.getgrnam(group).gr_gid if group else pwd.getpwnam(self.owner).pw_gid
            except KeyError:
                raise ClassError(f"There is no group {group!r} to let into the gradebook's socket.") from None
            os.chown(self.socket_dir, pwd.getpwnam(self.owner).pw_uid, gid)
        self.socket_dir.chmod(0o750)

    def create_database(self, name: str) -> None:
        conn = self.connect("postgres")
        try:
            conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()

    def _check_reachable(self) -> None:
        """The cluster's user must be able to reach the folder: every parent must let it through."""
        if os.geteuid() != 0:
            return
        for parent in self.folder.parents:
            if not os.stat(parent).st_mode & 0o001:
                raise ClassError(
                    f"The PostgreSQL folder {self.folder} sits under {parent}, which the "
                    f"'{self.owner}' user cannot enter (mode {oct(os.stat(parent).st_mode & 0o777)}): "
                    "choose a state folder outside it with --state."
                )
