"""JupyterLab in a subprocess and Debian's Chromium driven by Playwright, for the browser tests.

A learner's path is: JupyterLab serves the notebooks, a browser shows them, the
kernel runs the cells. `JupyterLab` starts a real server on a free port with a
token, in a throwaway root that holds copies of labs/ and lessons/, and always
stops it (kernels and anything they started included). `chromium()` launches
Debian's Chromium headless with a fresh profile; Playwright's own browser
download is not used. The page helpers act as a learner does: menus, keyboard,
clicks, and read what the page shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps calling home, which a closed network punishes.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
ARTIFACTS = REPO / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
SERVER_START_TIMEOUT_S = 90  # a cold JupyterLab on 2 busy cores starts in 5 to 20 s
VIEWPORT = {"width": 1400, "height": 1000}


def require_chromium() -> None:
    """Skip without Chromium on a developer machine; in CI (CI set) a missing browser is a failure."""
    if Path(CHROMIUM).exists():
        return
    message = (
        f"{CHROMIUM} is missing: install Debian's Chromium with `make browser-deps` "
        "(apt-get install chromium chromium-driver) to run the browser tests."
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the server ---------------------------------------------------------------------------
class JupyterLab:
    """A JupyterLab server on localhost in its own temporary root; use as a context manager."""

    def __init__(
        self,
        root: Path,
        env: dict[str, str] | None = None,
        copy: tuple[str, ...] = ("labs", "lessons"),
        settings: dict[tuple[str, str], dict] | None = None,
        quiet_news: bool = True,
    ):
        self.root = Path(root)
        # Whether the user settings answer JupyterLab's news question themselves; without them, what answers it
        # is the environment's own overrides.d file (servelab.launch.install_lab_settings, run by `make setup`).
        self.quiet_news = quiet_news
        self.settings = dict(settings or {})  # {(plugin package, plugin): values}: user settings to start with
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.extra_env = dict(env or {})
        self.copy = copy
        self.proc: subprocess.Popen | None = None
        self.state = self.root.parent / f"{self.root.name}-jupyter-state"
        self.log_path = self.state / "server.log"
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path}{sep}token={self.token}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            JUPYTER_RUNTIME_DIR=str(self.state / "runtime"),
            JUPYTER_CONFIG_DIR=str(self.state / "config"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
        )
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("NBGRADER_EXECUTION", None)
        env.update(self.extra_env)
        return env

    def start(self) -> "JupyterLab":
        self.root.mkdir(parents=True, exist_ok=True)
        for folder in self.copy:
            if (REPO / folder).is_dir():
                shutil.copytree(
                    REPO / folder,
                    self.root / folder,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
                )
        settings = self.state / "settings"
        if self.quiet_news:  # no news or update checks (they reach out to the network) and no toast over the page
            _write_settings(
                settings,
                "@jupyterlab/apputils-extension",
                "notification",
                {"fetchNews": "false", "checkForUpdates": False},
            )
        for (package, plugin), values in self.settings.items():
            _write_settings(settings, package, plugin, values)
        self.state.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.state / 'workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--ServerApp.shutdown_no_activity_timeout=1800",  # a test run that dies still lets it go
            "--MappingKernelManager.cull_idle_timeout=1800",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        # The server's cwd is the root: nbgrader's Validate handler reads nbgrader_config.py from there.
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=self.env(), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode} before it answered:\n{self.log()}")
            try:
                self.api("GET", "api/status")
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S} s:\n{self.log()}"
                    ) from None
                time.sleep(0.3)

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.base_url}/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def kernels(self) -> list[dict]:
        return self.api("GET", "api/kernels")

    def log(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Shut kernels down, stop the server, then kill whatever it or its kernels left behind."""
        if self.proc is None:
            return
        family = _descendants(self.proc.pid)
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                for kernel in self.kernels():
                    self.api("DELETE", f"api/kernels/{kernel['id']}", timeout=15)
            family |= _descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        for pid in family | {self.proc.pid}:
            _kill_group_and_pid(pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        if self._log:
            self._log.close()
        self.proc = None

    def __enter__(self) -> "JupyterLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _write_settings(settings_dir: Path, plugin_package: str, plugin: str, values: dict) -> None:
    path = settings_dir / plugin_package / f"{plugin}.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))


def _descendants(pid: int) -> set[int]:
    import psutil

    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def _kill_group_and_pid(pid: int) -> None:
    """SIGKILL one process we started (directly or through the server) and, if it leads one, its group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


# --- the browser --------------------------------------------------------------------------
@contextlib.contextmanager
def chromium(playwright):
    """Debian's Chromium, headless, with a profile made fresh for this run; closed afterwards."""
    profile = tempfile.mkdtemp(prefix="servelab-chromium-")
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT, timeout=60_000
    )
    try:
        yield context
    finally:
        with contextlib.suppress(Exception):
            context.close()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(page, name: str, full_page: bool = False) -> Path:
    """Save what the learner sees as test-artifacts/screenshots/NAME.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


# --- JupyterLab, as a learner works it ----------------------------------------------------------
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{NOTEBOOK} .jp-Notebook .jp-Cell"


def open_notebook(page, server: JupyterLab, path: str, timeout_s: float = 90) -> None:
    """Open a notebook from the root and wait until its kernel is idle."""
    page.goto(server.url(f"lab/tree/{path}") + "&reset", wait_until="domcontentloaded", timeout=timeout_s * 1000)
    page.locator(CELLS).first.wait_for(state="visible", timeout=timeout_s * 1000)
    wait_kernel_idle(page, timeout_s)


def wait_kernel_idle(page, timeout_s: float = 90) -> None:
    page.wait_for_function(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            const el = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
            const name = panel && panel.querySelector('.jp-KernelName');
            return el && el.getAttribute('data-status') === 'idle'
                && name && !/No Kernel/.test(name.textContent);
        }""",
        timeout=timeout_s * 1000,
    )


def menu(page, top: str, command: str) -> None:
    """Click a top menu (File, Edit, Run, ...) and then the item that runs `command`."""
    page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text=top).first.click()
    item = page.locator(f".lm-Menu li.lm-Menu-item[data-command='{command}']").first
    item.wait_for(state="visible", timeout=10_000)
    item.click()


def run_all_cells(page, timeout_s: float = 180) -> None:
    """Run > Run All Cells, then wait until no cell is queued or running and the kernel is idle."""
    menu(page, "Run", "runmenu:run-all")
    wait_cells_done(page, timeout_s)


def wait_cells_done(page, timeout_s: float = 180) -> None:
    page.wait_for_timeout(300)  # let the first prompt turn to [*]
    page.wait_for_function(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            if (!panel) return false;
            const busy = Array.from(panel.querySelectorAll('.jp-InputArea-prompt'))
                .some(p => p.textContent.includes('*'));
            const el = panel.querySelector('.jp-Notebook-ExecutionIndicator');
            return !busy && el && el.getAttribute('data-status') === 'idle';
        }""",
        timeout=timeout_s * 1000,
    )


def cell(page, index: int):
    """The index-th cell of the open notebook, scrolled into view."""
    loc = page.locator(CELLS).nth(index)
    loc.scroll_into_view_if_needed()
    return loc


def type_into_cell(page, index: int, text: str) -> None:
    """Click into a cell's editor, select what is there and type text in its place."""
    target = cell(page, index)
    editor = target.locator(".cm-content").first
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def save(page, timeout_s: float = 30) -> None:
    """Ctrl+S, then wait until the tab no longer shows unsaved changes."""
    page.keyboard.press("Control+S")
    page.wait_for_function(
        """() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')
                    ?.classList.contains('jp-mod-dirty')
               && !document.querySelector('.lm-DockPanel-tabBar .lm-mod-current.jp-mod-dirty')""",
        timeout=timeout_s * 1000,
    )


# --- accessibility: axe-core in the page ---------------------------------------------------------------
# axe-core from npm, installed beside the venv by `make browser-deps` (as configurable-http-proxy is).
AXE = Path(sys.prefix) / "node" / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # WCAG 2.1 levels A and AA


def require_axe() -> None:
    if AXE.exists():
        return
    message = f"{AXE} is missing: run `make browser-deps` (npm install axe-core) for the accessibility audit."
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def axe_audit(page, ours: str, tags: list[str] = WCAG_TAGS) -> list[dict]:
    """Run axe-core's WCAG 2.1 A and AA rules (or `tags`) over the page; each violation's nodes say whether they are ours.

    A node is ours when it sits inside an element matching the CSS selector `ours` (what this project
    renders: markdown, outputs, widgets, charts); every other node is the host page's (JupyterLab's chrome,
    nbgrader's feedback template)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated as the browser's tools evaluate, not as a <script>: a page whose policy admits only its own
        # scripts (the feedback page's nonce) still gets audited.
        page.evaluate(AXE.read_text() + "\n;0")
    return page.evaluate(
        """async ([tags, ours]) => {
            const result = await axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                    resultTypes: ['violations'], elementRef: true});
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help, url: v.helpUrl,
                nodes: v.nodes.map(n => ({
                    target: n.target.join(' '), html: n.html.slice(0, 300),
                    summary: (n.failureSummary || '').slice(0, 400),
                    ours: !!(n.element && n.element.closest && n.element.closest(ours)),
                })),
            }));
        }""",
        [tags, ours],
    )


def split_violations(violations: list[dict]) -> tuple[list[dict], list[dict]]:
    """(ours, theirs): each violation narrowed to the nodes on either side, empty ones dropped."""
    ours, theirs = [], []
    for v in violations:
        for side, keep in ((ours, True), (theirs, False)):
            nodes = [n for n in v["nodes"] if n["ours"] == keep]
            if nodes:
                side.append({**v, "nodes": nodes})
    return ours, theirs


def describe_violations(violations: list[dict], limit: int = 3) -> str:
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {v['help']} {v['url']}")
        for n in v["nodes"][:limit]:
            lines.append(f"    {n['target']}: {n['html'][:160]}")
    return "\n".join(lines)
