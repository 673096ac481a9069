"""The class's settings, as the local hub lays them out and as the Zero to JupyterHub values carry them."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from servelab.classroom.hub import (
    ClassSettings,
    disabled_lab_plugins,
    lab_environment,
    nbgrader_settings,
    server_extensions,
)
from servelab.lab.speculation.points import class_defaults

REPO = Path(__file__).resolve().parent.parent
VALUES = yaml.safe_load((REPO / "class" / "z2jh-values.yaml").read_text())
STACK = yaml.safe_load((REPO / "class" / "vllm-stack-values.yaml").read_text())
ROLES = ("student", "instructor")


def spawn(role: str, user_id: int, name: str = "someone"):
    """What the values' pre_spawn_hook does to a KubeSpawner for one user of a role (run, not parsed)."""
    hook_source = VALUES["hub"]["extraConfig"]["servelab-roles"]
    c = SimpleNamespace(KubeSpawner=SimpleNamespace())
    scope = {"c": c}
    exec(compile(hook_source, "hub.extraConfig.servelab-roles", "exec"), scope)
    group = "instructors" if role == "instructor" else "students"
    spawner = SimpleNamespace(
        user=SimpleNamespace(name=name, id=user_id, groups=[SimpleNamespace(name=group)]),
        environment={},
        volume_mounts=[],
        image=VALUES["singleuser"]["image"]["name"],
        uid=None,
        gid=None,
        container_security_context=None,
    )
    # The hook reads the secret from the hub's environment; put it back, or every later test's nbgrader
    # (tests/test_release.py's) would open this made-up PostgreSQL gradebook.
    had = os.environ.get("SERVELAB_GRADEBOOK_URL")
    os.environ.setdefault("SERVELAB_GRADEBOOK_URL", "postgresql+psycopg2://from-the-secret")
    try:
        c.KubeSpawner.pre_spawn_hook(spawner)
    finally:
        if had is None:
            del os.environ["SERVELAB_GRADEBOOK_URL"]
    return spawner


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
    return ClassSettings(
        state=tmp_path,
        instructors=["root"],
        students=["ada"],
        remote_off_url="http://127.0.0.1:8100",
        remote_on_url="http://127.0.0.1:8101",
        gradebook_url="postgresql+psycopg2://servelab:pw@127.0.0.1:5433/servelab_gradebook",
    )


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
    mounts = {m["mountPath"]: m for m in spawn(role, 1).volume_mounts}
    exchange = f"{pod['Exchange']['root']}/{local.course_id}"
    assert any(exchange.startswith(path) or path.startswith(exchange) for path in mounts)  # the shared volume
    volumes = {v["name"]: v for v in VALUES["singleuser"]["storage"]["extraVolumes"]}
    assert all("persistentVolumeClaim" in volumes[m["name"]] for m in mounts.values())
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
        "backend": "remote",
        "remote_off_url": local.remote_off_url,
        "remote_on_url": local.remote_on_url,
    }
    assert class_defaults({}) == {}


def test_login_is_the_institutions_with_the_two_groups_and_tls():
    config = VALUES["hub"]["config"]
    assert config["JupyterHub"]["authenticator_class"] == "generic-oauth"  # not Z2JH's default dummy login
    oauth = config["GenericOAuthenticator"]
    assert oauth["manage_groups"] is True and set(oauth["allowed_groups"]) == {"instructors", "students"}
    assert oauth["oauth_callback_url"].startswith("https://")
    env = VALUES["hub"]["extraEnv"]
    assert {env[k]["valueFrom"]["secretKeyRef"]["name"] for k in ("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET")} == {
        "servelab-oauth"
    }
    https = VALUES["proxy"]["https"]
    assert https["enabled"] is True and https["hosts"] and https["type"] == "letsencrypt"
    assert https["hosts"][0] in oauth["oauth_callback_url"]


def test_a_students_pod_reads_releases_and_feedback_and_writes_only_inbound():
    student, other, teacher = spawn("student", 7), spawn("student", 8), spawn("instructor", 1)
    mounts = {m["mountPath"].rsplit("/", 1)[-1]: m for m in student.volume_mounts}
    assert set(mounts) == {"outbound", "feedback", "inbound"}  # not the whole exchange, not the course
    assert mounts["outbound"]["readOnly"] and mounts["feedback"]["readOnly"] and not mounts["inbound"].get("readOnly")
    assert all(m["subPath"].endswith(name) for name, m in mounts.items())
    assert len({student.uid, other.uid, teacher.uid}) == 3 and student.uid >= 1000  # nbgrader's distinct uids
    assert student.image == VALUES["singleuser"]["image"]["name"] and teacher.image != student.image
    assert "SERVELAB_GRADEBOOK_URL" not in student.environment
    assert {m["mountPath"] for m in teacher.volume_mounts} >= {"/srv/nbgrader/exchange", "/home/jovyan/servelab"}


def test_graders_run_in_instructors_pods_with_what_bubblewrap_needs():
    student, teacher = spawn("student", 7), spawn("instructor", 1)
    context = teacher.container_security_context
    assert context["seccompProfile"]["type"] == "Unconfined" and context["appArmorProfile"]["type"] == "Unconfined"
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in context and context["procMount"] == "Default"
    assert student.container_security_context is None  # students' pods keep the chart's defaults
    assert "bubblewrap" in (REPO / "class" / "instructor.Dockerfile").read_text()


def test_the_gradebook_password_is_a_secret_never_a_value():
    text = yaml.safe_dump(VALUES)  # the values, not the comments that explain them
    assert "postgresql+psycopg2://" not in text and not re.search(r"password\s*:", text, re.I)
    assert VALUES["hub"]["extraEnv"]["SERVELAB_GRADEBOOK_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "servelab-gradebook",
        "key": "url",
    }


def test_the_lab_servers_come_from_production_stack_and_user_pods_may_reach_them_and_postgres():
    specs = {s["name"]: s for s in STACK["servingEngineSpec"]["modelSpec"]}
    assert set(specs) == {"off", "ngram"} and len({s["modelURL"] for s in specs.values()}) == 1
    for spec in specs.values():
        assert spec["requestGPU"] >= 1 and "--no-enable-prefix-caching" in spec["vllmConfig"]["extraArgs"]
    spec_args = specs["ngram"]["vllmConfig"]["extraArgs"]
    speculative = json.loads(spec_args[spec_args.index("--speculative-config") + 1])
    assert speculative["method"] == "ngram" and speculative["num_speculative_tokens"] == 4
    assert "--speculative-config" not in specs["off"]["vllmConfig"]["extraArgs"]
    env = VALUES["singleuser"]["extraEnv"]
    assert env["SERVELAB_REMOTE_OFF_URL"].startswith("http://vllm-off-engine-service.")
    assert env["SERVELAB_REMOTE_ON_URL"].startswith("http://vllm-ngram-engine-service.")
    policy = VALUES["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    rules = [(rule["to"][0]["podSelector"]["matchLabels"], rule["ports"][0]["port"]) for rule in policy["egress"]]
    assert (STACK["servingEngineSpec"]["labels"], 8000) in rules  # vLLM's own port in the engine pods
    assert any(port == 5432 for _, port in rules)  # the gradebook's PostgreSQL, for instructors' graders


def build_context(dockerfile: str) -> list[str]:
    """The files of this checkout (and a built wheel) that enter a Dockerfile's build context, reading its
    <Dockerfile>.dockerignore as Docker does: the last pattern a path (or a folder above it) matches decides."""
    patterns = [
        line.strip()
        for line in (REPO / "class" / f"{dockerfile}.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    files += ["dist/servelab-0.1.0-py3-none-any.whl", ".venv/bin/python", ".git/config"]

    def ignored(path: str) -> bool:
        verdict = False
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for pattern in patterns:
            keep = pattern.startswith("!")
            glob = pattern.lstrip("!").replace("**/", "")
            if any(fnmatch.fnmatch(p, glob) or fnmatch.fnmatch(p.rsplit("/", 1)[-1], glob) for p in prefixes):
                verdict = not keep
        return verdict

    return sorted(f for f in files if not ignored(f))


def test_the_student_image_holds_the_wheel_and_nothing_of_the_course_folder():
    assert build_context("student.Dockerfile") == ["dist/servelab-0.1.0-py3-none-any.whl"]
    dockerfile = (REPO / "class" / "student.Dockerfile").read_text()
    copies = [line for line in dockerfile.splitlines() if line.startswith(("COPY", "ADD"))]
    assert copies and all(line.split()[1].startswith("dist/") for line in copies)
    assert re.search(r"pip install .*\.whl", dockerfile.replace("${SERVELAB_WHEEL}", "x.whl"))
    assert VALUES["singleuser"]["image"]["name"].endswith("/student")


def test_the_instructor_image_holds_the_keys_and_solutions_for_the_grader():
    context = build_context("instructor.Dockerfile")
    assert "grading/keys/lesson25.py" in context and "solutions/lesson25/lesson25.ipynb" in context
    assert not any(f.startswith((".venv", ".git/", "dist/")) for f in context)
    dockerfile = (REPO / "class" / "instructor.Dockerfile").read_text()
    image = VALUES["singleuser"]["image"]
    assert f"FROM {image['name']}:{image['tag']}" in dockerfile and "o-rwx" in dockerfile
    assert "registry.example.edu/servelab/instructor" in VALUES["hub"]["extraConfig"]["servelab-roles"]


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
        assert json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"][
            "jpserver_extensions"
        ] == server_extensions(role)
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


def _git(*args, cwd):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def linked_worktree():
    """A repository with a committed key and a linked worktree of it, in a folder any user can traverse."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="servelab worktree "))
    try:
        top.chmod(0o755)
        main = top / "main"
        (main / "grading" / "keys").mkdir(parents=True)
        (main / "grading" / "keys" / "lesson25.py").write_text("ANSWER = 'unjustified'\n")
        _git("init", "-q", cwd=main)
        _git("add", ".", cwd=main)
        _git("commit", "-q", "-m", "key", cwd=main)
        _git("worktree", "add", "-q", str(top / "linked"), cwd=main)
        yield main, top / "linked"
    finally:
        shutil.rmtree(top)


def test_a_linked_worktrees_git_directory_is_closed_with_the_checkout(linked_worktree):
    """A linked worktree's objects live in the main repository's .git: closing the checkout closes that too."""
    from servelab.classroom import hub

    main, linked = linked_worktree
    assert hub.git_dirs_outside(main) == []  # a clone's .git is inside it: closing the checkout closes it
    assert hub.git_dirs_outside(linked) == [(main / ".git").resolve()]  # worktrees/linked lies inside that
    if os.geteuid() != 0:
        pytest.skip("closing a folder to other users (chown to the instructors' group) needs root")
    read = [
        "runuser",
        "-u",
        "nobody",
        "--",
        "git",
        "-c",
        f"safe.directory={main / '.git'}",
        f"--git-dir={main / '.git'}",
        "show",
        "HEAD:grading/keys/lesson25.py",
    ]
    assert "unjustified" in subprocess.run(read, capture_output=True, text=True, cwd="/", timeout=60).stdout
    was = {p: (p.stat().st_mode & 0o7777, p.stat().st_gid) for p in (linked, main / ".git")}
    class_hub = hub.ClassHub(ClassSettings(state=Path("/nonexistent")))
    class_hub.close_checkout(linked)
    try:
        for folder in was:
            assert (
                folder.stat().st_mode & 0o7777 == 0o750
                and folder.stat().st_gid == hub.grp.getgrnam(hub.CHECKOUT_GROUP).gr_gid
            )
        denied = subprocess.run(read, capture_output=True, text=True, cwd="/", timeout=60)
        assert denied.returncode != 0 and "unjustified" not in denied.stdout
    finally:
        class_hub.reopen_checkout()
    assert {p: (p.stat().st_mode & 0o7777, p.stat().st_gid) for p in was} == was
