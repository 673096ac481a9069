"""`servelab lab` (and `make lab`): JupyterLab on this checkout, opened at the lab notebook.

JupyterLab runs as a child of this process, from the same Python
(`sys.executable -m jupyter lab`), so nothing has to be activated first. Its root is
the checkout and its working directory too, where nbgrader finds nbgrader_config.py
(the course in grading/course, sources in solutions/). Its log goes to a file, and
the terminal shows what the learner needs, the URL to open last: the lab notebook,
with the file browser in lessons/ so the lesson is one click away.

JupyterLab asks on its first start whether to fetch Jupyter's news, in a pop-up over
the notebook. Learners should meet the lab, not that question:
`install_lab_settings()` turns it off for every JupyterLab this environment runs
(this command's, one started by hand, and a class hub's user servers, which run the
same Python; `make setup` calls it, and so does every `servelab lab` start), as an
overrides.d file in the environment's JupyterLab settings folder
(https://jupyterlab.readthedocs.io/en/stable/user/directories.html#overridesjson).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path

from .paths import REPO_DIR, logs_dir

LAB_NOTEBOOK = "labs/spec_decode_lab.ipynb"
LESSONS = "lessons"  # where the file browser opens, so the lesson is one click away
DEFAULT_PORT = 8888  # JupyterLab's own default
PORT_TRIES = 50  # when the port is taken, the next free one up to this many above it
HOST = "127.0.0.1"  # this machine only; pass --ServerApp.ip=0.0.0.0 after -- to serve others
START_TIMEOUT_S = 180  # a cold JupyterLab on 2 busy cores answers in 5 to 30 s
STOP_TIMEOUT_S = 30  # time to shut kernels down after Ctrl-C before the server is killed


# Defaults for every learner, namespaced so they sit beside anyone else's overrides (jupyterlab_server reads
# {sys.prefix}/share/jupyter/lab/settings/overrides.d/*.json, then overrides.json, which a user's own settings
# still override). "fetchNews": "false" answers the news question; no update check reaches the network either.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


class LabError(RuntimeError):
    pass


def pick_port(preferred: int, tries: int = PORT_TRIES) -> int:
    """The preferred port if nothing listens there, else the next free one above it."""
    for port in range(preferred, preferred + tries):
        with socket.socket() as s:
            if sys.platform != "win32":  # as JupyterLab binds: closed connections do not hold the port
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise LabError(
        f"Ports {preferred} to {preferred + tries - 1} are all taken on {HOST}: "
        f"pick another one with `make lab LAB_PORT=N` or `servelab lab --port N`."
    )


def has_display() -> bool:
    """Whether a browser window can open here (on Linux: an X or Wayland display)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def lab_url(port: int, token: str) -> str:
    return f"http://{HOST}:{port}/lab/tree/{LAB_NOTEBOOK}?file-browser-path=/{LESSONS}&token={token}"


def command(port: int, root: Path, extra: list[str]) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd + extra


def lab_settings_path(prefix: str | Path = sys.prefix) -> Path:
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / "servelab.json"


def install_lab_settings(prefix: str | Path = sys.prefix) -> Path | None:
    """Write LAB_SETTINGS where this environment's JupyterLab reads its defaults; None where it cannot."""
    path = lab_settings_path(prefix)
    text = json.dumps(LAB_SETTINGS, indent=2) + "\n"
    try:
        if path.exists() and path.read_text() == text:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new file, swapped in: the folder may be a hard-linked copy of another environment's (a class's students')
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        say(
            f"Could not write {path} ({exc.strerror}): JupyterLab will ask about its news once; "
            "answer No, or make that folder writable."
        )
        return None
    return path


def _answers(port: int, token: str) -> bool:
    req = urllib.request.Request(f"http://{HOST}:{port}/api/status", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _course_dirs(root: Path) -> None:
    """grading/course and grading/exchange, which the Nbgrader menu works in (see nbgrader_config.py)."""
    for name in ("course", "exchange"):
        with contextlib.suppress(OSError):  # a read-only checkout: the lab works, the formgrader cannot save
            (root / "grading" / name).mkdir(parents=True, exist_ok=True)


def run(port: int = DEFAULT_PORT, browser: bool = True, extra: list[str] | None = None, root: Path = REPO_DIR) -> int:
    """Start JupyterLab, print the URL, open a browser where there is a display; return when it stops."""
    if not (root / LAB_NOTEBOOK).exists():
        raise LabError(f"{LAB_NOTEBOOK} is missing in {root}: run `make release` to write it from solutions/.")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        say("Running as root: passing --allow-root to JupyterLab (it refuses root without it).")
    chosen = pick_port(port)
    if chosen != port:
        say(f"Port {port} is taken; using {chosen} (choose with `make lab LAB_PORT=N`).")
    _course_dirs(root)
    install_lab_settings()
    token = secrets.token_hex(24)
    log_path = logs_dir() / f"jupyterlab-{chosen}.log"
    env = dict(os.environ, JUPYTER_TOKEN=token)  # in the environment, not in `ps` for all to read
    # The venv's own tools first, as if it were activated: nbgrader's gradebook runs `alembic`,
    # and a terminal opened in the lab should find `servelab` and `nbgrader`.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # formgrader's submission pages get a Content-Security-Policy (servelab.grading.page_policy)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        filter(None, [str(REPO_DIR / "grading" / "jupyter"), env.get("JUPYTER_CONFIG_PATH")])
    )
    env.pop("NBGRADER_EXECUTION", None)  # the lab would think it is being graded and never measure
    say(f"Starting JupyterLab in {root} (its log: {log_path}) ...")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command(chosen, root, extra or []),
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    # Ctrl-C or a terminate reaches this process first or together with JupyterLab: either
    # way, JupyterLab gets SIGTERM, shuts its kernels down, and this process waits for it.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(chosen, token):
            if proc.poll() is not None:
                say(
                    f"JupyterLab exited with {proc.returncode} before it answered. The end of its log:\n"
                    f"{_tail(log_path)}"
                )
                return 1
            if time.monotonic() > deadline:
                say(f"JupyterLab did not answer within {START_TIMEOUT_S} s. The end of its log:\n{_tail(log_path)}")
                _stop(proc)
                return 1
            time.sleep(0.2)
        url = lab_url(chosen, token)
        if not browser:
            say("No browser opened (--no-browser).")
        elif has_display():
            opened = webbrowser.open(url)
            say("Opened the lab in your browser." if opened else "Could not open a browser here.")
        else:
            say("No display here (DISPLAY is not set), so no browser is opened.")
        say(f"JupyterLab is running; Ctrl-C stops it. Open the lab at:\n\n    {url}\n")
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        say("JupyterLab stopped.")
        return 0


def say(text: str) -> None:
    print(text, flush=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _stop(proc: subprocess.Popen) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave the server orphaned
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
