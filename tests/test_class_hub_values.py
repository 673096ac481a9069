"""The class's settings, as the local hub lays them out and as the Zero to JupyterHub values carry them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from servelab.classroom.hub import (ClassSettings, disabled_lab_plugins, lab_environment, nbgrader_settings,
                                    server_extensions)
from servelab.lab.data import class_defaults

REPO = Path(__file__).resolve().parent.parent
VALUES = yaml.safe_load((REPO / "class" / "z2jh-values.yaml").read_text())
ROLES = ("student", "instructor")


def extra_file(role: str, kind: str):
    return VALUES["singleuser"]["extraFiles"][f"{role}-{kind}"]


def assigned(python_config: str) -> dict[str, dict]:
    """c.Section.trait = value lines of an nbgrader_config.py, as {section: {trait: value}}."""
    config: dict[str, dict] = {}
    for section, trait, value in re.findall(r"^c\.(\w+)\.(\w+)\s*=\s*(.+)$", python_config, re.M):
        config.setdefault(section, {})[trait] = eval(value, {})  # literals only: the file is ours
    return config


@pytest.fixture
def local(tmp_path):
    return ClassSettings(state=tmp_path, instructors=["root"], students=["ada"],
                         remote_off_url="http://127.0.0.1:8100", remote_on_url="http://127.0.0.1:8101",
                         gradebook_url="postgresql+psycopg2://servelab:pw@127.0.0.1:5433/servelab_gradebook")


@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_the_same_nbgrader_extensions(role):
    files = extra_file(role, "server")
    assert files["mountPath"] == f"/etc/servelab/jupyter/{role}/jupyter_server_config.json"
    assert files["data"]["ServerApp"]["jpserver_extensions"] == server_extensions(role)
    lab = extra_file(role, "lab")["data"]["disabledExtensions"]
    assert sorted(lab) == sorted(disabled_lab_plugins(role))


def test_students_get_the_assignment_list_and_not_the_formgrader():
    assert server_extensions("student")["nbgrader.server_extensions.assignment_list"]
    assert not server_extensions("student")["nbgrader.server_extensions.formgrader"]
    assert server_extensions("instructor")["nbgrader.server_extensions.formgrader"]
    assert "@jupyter/nbgrader:formgrader" in disabled_lab_plugins("student")


@pytest.mark.parametrize("role", ROLES)
def test_same_course_and_an_exchange_every_pod_mounts(role, local):
    pod = assigned(extra_file(role, "nbgrader")["stringData"])
    here = nbgrader_settings(local, role)
    assert pod["CourseDirectory"]["course_id"] == here["CourseDirectory"]["course_id"] == local.course_id
    mounts = {m["mountPath"]: m for m in VALUES["singleuser"]["storage"]["extraVolumeMounts"]}
    assert pod["Exchange"]["root"] in mounts  # the exchange is the shared volume, in every pod
    volume = next(v for v in VALUES["singleuser"]["storage"]["extraVolumes"] if v["name"] == mounts[pod["Exchange"]["root"]]["name"])
    assert "persistentVolumeClaim" in volume
    assert ("root" in pod["CourseDirectory"]) == ("root" in here["CourseDirectory"]) == (role == "instructor")
    # instructors' servers (the formgrader) read the course's own config: gradebook URL, autograde limits
    pod_loads = re.findall(r"load_subconfig\('([^']+)'\)", extra_file(role, "nbgrader")["stringData"])
    assert pod_loads == ([f"{pod['CourseDirectory']['root']}/nbgrader_config.py"] if role == "instructor" else [])


def test_the_lab_points_at_the_shared_servers_and_only_instructors_get_the_gradebook(local):
    pod_env = VALUES["singleuser"]["extraEnv"]
    for role in ROLES:
        env = lab_environment(local, role)
        assert {"SERVELAB_REMOTE_OFF_URL", "SERVELAB_REMOTE_ON_URL"} <= set(env) & set(pod_env)
        assert ("SERVELAB_GRADEBOOK_URL" in env) == (role == "instructor")
        assert env["JUPYTER_CONFIG_PATH"] == str(local.jupyter_dir(role))
    assert "SERVELAB_GRADEBOOK_URL" not in pod_env  # not in every pod: the hub hands it to instructors
    hook = VALUES["hub"]["extraConfig"]["servelab-roles"]
    assert 'spawner.environment["SERVELAB_GRADEBOOK_URL"]' in hook and 'role == "instructor"' in hook
    assert VALUES["hub"]["extraEnv"]["SERVELAB_GRADEBOOK_URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    # what the lab does with the URLs, on either hub
    assert class_defaults(pod_env)["backend"] == "remote"
    assert class_defaults(lab_environment(local, "student")) == {
        "backend": "remote", "remote_off_url": local.remote_off_url, "remote_on_url": local.remote_on_url}
    assert class_defaults({}) == {}


def test_same_single_user_server():
    local_hub = (REPO / "class" / "jupyterhub_config.py").read_text()
    assert VALUES["singleuser"]["cmd"] == "jupyterhub-singleuser" and '"jupyterhub-singleuser"' in local_hub
    assert VALUES["singleuser"]["defaultUrl"] == "/lab" and 'c.Spawner.default_url = "/lab"' in local_hub
    assert VALUES["singleuser"]["image"]["name"] and VALUES["singleuser"]["image"]["tag"]
    groups = VALUES["hub"]["config"]["JupyterHub"]["load_groups"]
    assert set(groups) == {"instructors", "students"} and "c.JupyterHub.load_groups" in local_hub


def test_the_hub_writes_what_the_tests_compare(local, monkeypatch):
    """lay_out() writes each role's files from the same functions the values are checked against."""
    from servelab.classroom import hub

    monkeypatch.setattr(hub.ClassSettings, "course_dir", property(lambda s: s.state / "course"))
    monkeypatch.setattr(hub.subprocess, "run", lambda *a, **k: None)  # chown to a user this machine may not have
    monkeypatch.setattr(hub.pwd, "getpwnam", lambda name: type("P", (), {"pw_dir": str(local.state / "no-home")}))
    # The students' environment and the closed checkout are the class test's (they need root and users).
    env = local.state / "env" / "venv"
    monkeypatch.setattr(hub.studentenv, "build", lambda state: (env / "bin" / "python", env / "servelab"))
    monkeypatch.setattr(hub.ClassHub, "close_checkout", lambda self: None)
    monkeypatch.setattr(hub.ClassHub, "_check_python_for", staticmethod(lambda user, python=None: None))
    hub.ClassHub(local).lay_out()
    assert local.student_python == str(env / "bin" / "python")
    assert hub.single_user_command(local, "student")[0] == local.student_python
    assert hub.lab_environment(local, "instructor")["SERVELAB_SANDBOX_PACKAGE"] == str(env / "servelab")
    for role in ROLES:
        folder = local.jupyter_dir(role)
        assert json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"] \
            == server_extensions(role)
        written = (folder / "nbgrader_config.py").read_text()
        assert assigned(written) == nbgrader_settings(local, role)
        assert ("load_subconfig(" in written) == (role == "instructor")
    assert oct(local.exchange.stat().st_mode & 0o777) == "0o777"
    assert oct(local.course_dir.stat().st_mode & 0o777) == "0o700"


# --- what `servelab class up` says when a piece is missing ------------------------------------------
def test_a_missing_proxy_or_node_says_what_to_install(monkeypatch, tmp_path):
    from servelab.classroom import ClassError, hub

    monkeypatch.setattr(hub.sys, "prefix", str(tmp_path))  # no proxy beside this venv
    monkeypatch.setattr(hub.shutil, "which", lambda name: "/usr/bin/node" if name == "node" else None)
    with pytest.raises(ClassError, match=r"configurable-http-proxy.*make class-deps"):
        hub.chp_command()
    monkeypatch.setattr(hub.shutil, "which", lambda name: None)
    with pytest.raises(ClassError, match=r"Node\.js.*make class-deps"):
        hub.chp_command()


def test_missing_postgres_says_what_to_install(monkeypatch):
    from servelab.classroom import ClassError, postgres

    monkeypatch.setattr(postgres.Path, "glob", lambda self, pattern: iter(()))
    monkeypatch.setattr(postgres.shutil, "which", lambda name: None)
    with pytest.raises(ClassError, match=r"PostgreSQL is not installed.*make class-deps"):
        postgres.bin_dir()


def test_the_roster_is_checked_before_anything_starts(local):
    import os

    from servelab.classroom import ClassError, hub

    if os.geteuid() != 0:
        with pytest.raises(ClassError, match="needs root"):
            hub.ClassHub(local).check()
        return
    with pytest.raises(ClassError, match="at least one instructor"):
        hub.ClassHub(ClassSettings(state=local.state)).check()
    local.instructors, local.students = ["root"], ["no-such-student-here"]
    with pytest.raises(ClassError, match=r"no system user 'no-such-student-here'.*useradd"):
        hub.ClassHub(local).check()


def test_a_shared_model_cache_is_read_by_students_who_keep_their_own_results(local, monkeypatch, tmp_path):
    """With the hub's models in a shared place, each user reads them there and writes results in their own home."""
    from servelab import paths

    shared = tmp_path / "course-cache"
    monkeypatch.setenv("SERVELAB_CACHE", str(shared))
    monkeypatch.delenv("SERVELAB_MODELS", raising=False)
    env = lab_environment(local, "student")
    assert env["SERVELAB_MODELS"] == str(shared / "models")
    assert not {"SERVELAB_CACHE", "SERVELAB_RESULTS"} & set(env)  # results and logs stay the student's own
    assert "SERVELAB_CACHE" not in (REPO / "class" / "jupyterhub_config.py").read_text()

    student_home = tmp_path / "home" / "student"
    monkeypatch.setenv("HOME", str(student_home))
    monkeypatch.delenv("SERVELAB_CACHE")
    monkeypatch.delenv("SERVELAB_RESULTS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert paths.models_dir() == shared / "models" and not (shared / "models").exists()  # read, never made
    assert paths.results_path() == student_home / ".cache" / "servelab" / "results.jsonl"
    assert paths.logs_dir().is_relative_to(student_home)

    monkeypatch.delenv("SERVELAB_MODELS")
    assert "SERVELAB_MODELS" not in lab_environment(local, "student")  # nothing shared: each user's own cache
