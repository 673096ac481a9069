"""servelab lab's choices, without starting JupyterLab: the port, the URL, the command, the errors."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from servelab import launch
from servelab.cli import main

pytestmark = pytest.mark.unit


def test_a_free_port_is_kept_and_a_taken_one_gives_the_next_free_one():
    with socket.socket() as s:
        s.bind((launch.HOST, 0))
        port = s.getsockname()[1]
    assert launch.pick_port(port) == port
    with socket.socket() as taken:
        taken.bind((launch.HOST, port))
        taken.listen()
        chosen = launch.pick_port(port)
    assert port < chosen < port + launch.PORT_TRIES


def test_when_every_port_tried_is_taken_the_error_says_how_to_choose_one():
    with socket.socket() as taken:
        taken.bind((launch.HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(launch.LabError, match="LAB_PORT"):
            launch.pick_port(port, tries=1)


def test_the_url_opens_the_lab_notebook_with_the_lessons_in_the_file_browser():
    url = launch.lab_url(8888, "abc")
    assert url == ("http://127.0.0.1:8888/lab/tree/labs/spec_decode_lab.ipynb?file-browser-path=/lessons&token=abc")


def test_jupyter_runs_from_this_python_and_as_root_with_allow_root(tmp_path):
    cmd = launch.command(8888, tmp_path, ["--ServerApp.ip=0.0.0.0"])
    assert cmd[:4] == [sys.executable, "-m", "jupyter", "lab"]
    assert f"--ServerApp.root_dir={tmp_path}" in cmd and cmd[-1] == "--ServerApp.ip=0.0.0.0"
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)


def test_no_display_means_no_browser(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert launch.has_display() == (sys.platform in ("darwin", "win32"))
    monkeypatch.setenv("DISPLAY", ":0")
    assert launch.has_display()


def test_a_checkout_without_the_lab_notebook_is_told_to_run_make_release(tmp_path):
    with pytest.raises(launch.LabError, match="make release"):
        launch.run(root=tmp_path)
    assert not (tmp_path / "grading").exists()


def test_the_lab_command_reports_a_missing_notebook_in_one_line(tmp_path, capsys, monkeypatch):
    real_run = launch.run
    monkeypatch.setattr(launch, "run", lambda **kw: real_run(root=Path(tmp_path), **kw))
    assert main(["lab", "--port", "8888"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: labs/spec_decode_lab.ipynb is missing") and "make release" in err
