"""The class's gradebook server: a PostgreSQL cluster the class owns, in a folder, on a loopback port.

Debian's binaries (/usr/lib/postgresql/<version>/bin) make and run it: initdb
into the folder, pg_ctl to start and stop. PostgreSQL refuses to run as root, so
when the class is started by root the cluster belongs to the `postgres` system
user (Debian's package makes it). It listens on 127.0.0.1 only, with no Unix
socket, and a password (scram-sha-256) that sits in the folder readable by its
owner only: students on the same machine cannot open the gradebook.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from .errors import ClassError, port_free

DB_PORT = 5433  # not 5432, so a system PostgreSQL on the machine keeps its port
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
    """One PostgreSQL cluster in `folder`, listening on 127.0.0.1:`port`."""

    def __init__(self, folder: Path, port: int = DB_PORT):
        self.folder = Path(folder).resolve()
        self.port = port
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
        return f"postgresql+psycopg2://{DB_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

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

    def start(self) -> str:
        """Start the cluster (made first if need be) and create the gradebook database; its URL."""
        self.init()
        if not self.running():
            if not port_free(self.port):
                raise ClassError(
                    f"Port {self.port} on 127.0.0.1 is taken, so the gradebook's PostgreSQL "
                    f"cannot listen there: stop whatever holds it (ss -ltnp 'sport = :{self.port}') "
                    "or choose another with --db-port."
                )
            options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
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
            host="127.0.0.1", port=self.port, user=DB_USER, password=self.password, dbname=database, connect_timeout=30
        )

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
