"""The class's settings, as the local hub lays them out and as the Zero to JupyterHub values carry them.

The cluster plan is read by the libraries that would run it: the values' hub config goes into
JupyterHub's own app (JupyterHub.initialize, with OAuthenticator's GenericOAuthenticator and
KubeSpawner as Zero to JupyterHub sets them), and each role's pod is KubeSpawner's own manifest after
the values' pre_spawn_hook ran on it.
"""

from __future__ import annotations

import ast
import asyncio
import fnmatch
import json
import logging
import os
import re
import subprocess
import sys
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
INSTRUCTOR_EGRESS = yaml.safe_load((REPO / "class" / "instructor-egress.yaml").read_text())
GATEWAY = {d["kind"]: d for d in yaml.safe_load_all((REPO / "class" / "engine-gateway.yaml").read_text())}
ROSTER = ["teacher", "someone", "ada", "bo"]  # the users the pods below are spawned for
ROLES = ("student", "instructor")
GROUP = {"student": "students", "instructor": "instructors"}
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none, namespace: servelab}}]
current-context: none
"""


def hub_config(values: dict = VALUES):
    """The hub's traitlets Config from the values, the way Zero to JupyterHub's jupyterhub_config.py builds it
    (jupyterhub/zero-to-jupyterhub-k8s, jupyterhub/files/hub/jupyterhub_config.py): hub.config merged as is,
    the singleuser keys used here mapped to KubeSpawner's traits, then every hub.extraConfig snippet run
    with `c`, in the order of their names."""
    from traitlets.config import Config

    c = Config()
    for section, traits in values["hub"]["config"].items():
        c[section].merge(Config(traits))
    su = values["singleuser"]
    c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
    c.KubeSpawner.image = f"{su['image']['name']}:{su['image']['tag']}"
    c.KubeSpawner.cpu_limit, c.KubeSpawner.cpu_guarantee = su["cpu"]["limit"], su["cpu"]["guarantee"]
    c.KubeSpawner.mem_limit, c.KubeSpawner.mem_guarantee = su["memory"]["limit"], su["memory"]["guarantee"]
    c.KubeSpawner.extra_resource_limits = su["extraResource"]["limits"]
    c.KubeSpawner.extra_resource_guarantees = su["extraResource"]["guarantees"]
    c.KubeSpawner.environment = dict(su["extraEnv"])
    assert su["storage"]["type"] == "dynamic"
    c.KubeSpawner.storage_capacity = su["storage"]["capacity"]
    c.KubeSpawner.volumes = [
        {"name": "volume-{user_server}", "persistentVolumeClaim": {"claimName": "claim-{user_server}"}}
    ] + su["storage"]["extraVolumes"]
    c.KubeSpawner.volume_mounts = [{"name": "volume-{user_server}", "mountPath": su["storage"]["homeMountPath"]}]
    c.KubeSpawner.volume_mounts += su["storage"]["extraVolumeMounts"]
    c.Spawner.cmd, c.Spawner.default_url = su["cmd"], su["defaultUrl"]
    for name in sorted(values["hub"]["extraConfig"]):
        exec(compile(values["hub"]["extraConfig"][name], f"hub.extraConfig.{name}", "exec"), {"c": c})
    return c


@pytest.fixture
def hub_env(monkeypatch, tmp_path):
    """What the hub's pod has: the Secrets as environment variables, a (never contacted) Kubernetes API."""
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("SERVELAB_GRADEBOOK_URL", "postgresql+psycopg2://from-the-secret")
    monkeypatch.setenv("OAUTH_CLIENT_ID", "from-the-secret")
    monkeypatch.setenv("OAUTH_CLIENT_SECRET", "from-the-secret")
    # the engines' gateway's Secret, as hub.extraVolumes mounts its keys.json (cluster engine-keys)
    from servelab.classroom import cluster

    secret = cluster.gateway_manifests(cluster.engine_keys(ROSTER))[0]
    (tmp_path / "keys.json").write_text(secret["stringData"]["keys.json"])
    monkeypatch.setenv("SERVELAB_ENGINE_KEYS", str(tmp_path / "keys.json"))
    return tmp_path


def start_hub(config, folder: Path):
    """JupyterHub's own initialize() with this config (its database in `folder`): what the hub pod runs first."""
    from jupyterhub.app import JupyterHub

    config.JupyterHub.db_url = f"sqlite:///{folder / 'jupyterhub.sqlite'}"
    config.JupyterHub.cookie_secret_file = str(folder / "jupyterhub_cookie_secret")
    config.JupyterHub.pid_file = str(folder / "jupyterhub.pid")
    app = JupyterHub(config=config)
    asyncio.run(app.initialize([]))
    return app


def pods(*users: tuple[str, int, str]) -> dict[str, dict]:
    """KubeSpawner's pod manifest for each (role, hub user id, name), after the values' pre_spawn_hook, as JSON."""
    from jupyterhub import orm
    from kubernetes_asyncio.client import ApiClient
    from kubespawner import KubeSpawner

    config = hub_config()
    db = orm.new_session_factory("sqlite://")()  # the hub's own database, knowing these users
    instructors = orm.Group(name="instructors")  # the provider's groups, as manage_groups keeps them
    for role, user_id, name in users:
        user = orm.User(name=name, id=user_id)
        db.add(user)
        if role == "instructor":
            instructors.users.append(user)
    db.add(instructors)
    db.commit()

    async def manifests():
        out = {}
        for role, user_id, name in users:
            groups = [SimpleNamespace(name=GROUP[role])]
            user = SimpleNamespace(name=name, id=user_id, groups=groups, url="/", db=db)
            spawner = KubeSpawner(_mock=True, config=config, user=user)
            spawner.pre_spawn_hook(spawner)
            out[name] = ApiClient().sanitize_for_serialization(await spawner.get_pod_manifest())
        return out

    return asyncio.run(manifests())


def container(pod: dict) -> dict:
    (notebook,) = [c for c in pod["spec"]["containers"] if c["name"] == "notebook"]
    return notebook


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container(pod)["env"]}


def mounts_of(pod: dict) -> dict[str, dict]:
    return {m["mountPath"]: m for m in container(pod)["volumeMounts"]}


def extra_file(role: str, kind: str):
    return VALUES["singleuser"]["extraFiles"][f"{role}-{kind}"]


def assigned(python_config: str) -> dict[str, dict]:
    """c.Section.trait = value lines of an nbgrader_config.py, as {section: {trait: value}}."""
    config: dict[str, dict] = {}
    for section, trait, value in re.findall(r"^c\.(\w+)\.(\w+)\s*=\s*(.+)$", python_config, re.M):
        try:
            config.setdefault(section, {})[trait] = ast.literal_eval(value)
        except ValueError:  # computed when the file is read (the variants' roster): read it as nbgrader does
            continue
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


# --- the hub starts ------------------------------------------------------------------------------------------
def test_the_hub_starts_with_the_values_and_its_groups_come_from_the_identity_provider(hub_env):
    app = start_hub(hub_config(), hub_env)
    assert type(app.authenticator).__name__ == "GenericOAuthenticator" and app.authenticator.manage_groups
    assert set(app.authenticator.allowed_groups) == {"instructors", "students"} and not app.load_groups
    assert type(app.spawner_class).__name__ != "" and app.spawner_class.__name__ == "KubeSpawner"
    # the same machinery refuses what the values used to say: groups both loaded and managed
    loaded = json.loads(json.dumps(VALUES))
    loaded["hub"]["config"]["JupyterHub"]["load_groups"] = {"instructors": {"users": []}}
    (hub_env / "again").mkdir()
    with pytest.raises(ValueError, match="Group management has been offloaded to the authenticator"):
        start_hub(hub_config(loaded), hub_env / "again")


def test_login_is_the_institutions_with_the_two_groups_and_tls():
    config = VALUES["hub"]["config"]
    assert config["JupyterHub"]["authenticator_class"] == "generic-oauth"  # not Z2JH's default dummy login
    oauth = config["GenericOAuthenticator"]
    assert oauth["oauth_callback_url"].startswith("https://")
    env = VALUES["hub"]["extraEnv"]
    assert {env[k]["valueFrom"]["secretKeyRef"]["name"] for k in ("OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET")} == {
        "servelab-oauth"
    }
    https = VALUES["proxy"]["https"]
    assert https["enabled"] is True and https["hosts"] and https["type"] == "letsencrypt"
    assert https["hosts"][0] in oauth["oauth_callback_url"]


def test_a_user_name_that_cannot_be_a_passwd_line_is_refused_at_login(hub_env):
    app = start_hub(hub_config(), hub_env)
    assert app.authenticator.validate_username("ada.lovelace")
    for name in ("ada:x:0:0", "ada\nroot", "../ada", ""):
        assert not app.authenticator.validate_username(name)


# --- each role's pod ------------------------------------------------------------------------------------------
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
def test_same_course_and_an_exchange_every_pod_mounts(role, local, hub_env):
    pod_config = assigned(extra_file(role, "nbgrader")["stringData"])
    here = nbgrader_settings(local, role)
    assert pod_config["CourseDirectory"]["course_id"] == here["CourseDirectory"]["course_id"] == local.course_id
    pod = pods((role, 1, "someone"))["someone"]
    mounts = mounts_of(pod)
    exchange = f"{pod_config['Exchange']['root']}/{local.course_id}"
    assert any(exchange.startswith(path) or path.startswith(exchange) for path in mounts)  # the shared volume
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    # every folder a pod works in is a claim (the course secret, instructors' only, is a Secret's read-only file)
    shared = [
        m
        for m in mounts.values()
        if volumes[m["name"]].get("secret", {}).get("secretName") != "servelab-variant-secret"
    ]
    assert all("persistentVolumeClaim" in volumes[m["name"]] for m in shared)
    assert ("root" in pod_config["CourseDirectory"]) == ("root" in here["CourseDirectory"]) == (role == "instructor")
    # instructors' servers (the formgrader) read the course's own config: gradebook URL, autograde limits
    pod_loads = re.findall(r"load_subconfig\('([^']+)'\)", extra_file(role, "nbgrader")["stringData"])
    assert pod_loads == (
        [f"{pod_config['CourseDirectory']['root']}/nbgrader_config.py"] if role == "instructor" else []
    )


def test_the_lab_points_at_the_shared_servers_and_only_instructors_get_the_gradebook(local, hub_env):
    pod_env = VALUES["singleuser"]["extraEnv"]
    for role in ROLES:
        env = lab_environment(local, role)
        assert {"SERVELAB_REMOTE_OFF_URL", "SERVELAB_REMOTE_ON_URL"} <= set(env) & set(pod_env)
        assert ("SERVELAB_GRADEBOOK_URL" in env) == (role == "instructor")
        assert env["JUPYTER_CONFIG_PATH"] == str(local.jupyter_dir(role))
    assert "SERVELAB_GRADEBOOK_URL" not in pod_env  # not in every pod: the hub hands it to instructors
    # the instructor spawned first: nothing of theirs may stay behind for the student spawned next
    spawned = pods(("instructor", 1, "teacher"), ("student", 7, "ada"))
    assert env_of(spawned["teacher"])["SERVELAB_GRADEBOOK_URL"] == os.environ["SERVELAB_GRADEBOOK_URL"]
    assert "SERVELAB_GRADEBOOK_URL" not in env_of(spawned["ada"])
    assert VALUES["hub"]["extraEnv"]["SERVELAB_GRADEBOOK_URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    # what the lab does with the URLs, on either hub
    assert class_defaults(pod_env)["backend"] == "remote"
    assert class_defaults(lab_environment(local, "student")) == {
        "backend": "remote",
        "remote_off_url": local.remote_off_url,
        "remote_on_url": local.remote_on_url,
    }
    assert class_defaults({}) == {}


def test_a_students_pod_reads_releases_and_feedback_and_writes_only_its_own_inbound(hub_env):
    spawned = pods(("student", 7, "ada"), ("student", 8, "bo"), ("instructor", 1, "teacher"))
    ada, bo, teacher = spawned["ada"], spawned["bo"], spawned["teacher"]
    exchange = mounts_of(ada)
    del exchange["/home/jovyan"]  # her own home volume, claim-ada
    assert {m["mountPath"].split("/servelab/", 1)[1] for m in exchange.values()} == {
        "outbound",
        "feedback",
        "inbound/ada",
    }
    assert exchange["/srv/nbgrader/exchange/servelab/inbound/ada"]["name"] == "inbound"  # her own claim
    assert all(m.get("readOnly") for path, m in exchange.items() if not path.endswith("/inbound/ada"))
    assert "/srv/nbgrader/exchange/servelab/inbound/bo" in mounts_of(bo)  # the hub's name, not hers
    uids = {name: container(pod)["securityContext"]["runAsUser"] for name, pod in spawned.items()}
    assert len(set(uids.values())) == 3 and min(uids.values()) >= 1000  # nbgrader's distinct uids
    assert container(ada)["image"] == ":".join(VALUES["singleuser"]["image"].values())
    assert container(teacher)["image"] != container(ada)["image"]
    assert {"/srv/nbgrader/exchange", "/home/jovyan/servelab"} <= set(mounts_of(teacher))
    # each pod's user is named by the hub in its passwd (pod-start) before the server starts
    for name, pod in spawned.items():
        args = container(pod)["args"]
        assert args[:4] == ["python", "-m", "servelab.classroom.cluster", "pod-start"]
        assert args[-2:] == ["--", "jupyterhub-singleuser"] and env_of(pod)["JUPYTERHUB_USER"] == name


def test_each_users_hand_ins_are_a_claim_of_their_own_of_the_local_inbound_cap(hub_env):
    """`cluster inbound-claims` makes one claim per roster user, of the local class's inbound cap; the hook names
    it as the command does (its own copy: the hub's image has no servelab), mounts it as the student's inbound
    folder, made theirs (2750) by a root step before the server, and mounts every one read-only for instructors.
    A user the roster does not list gets no inbound."""
    import yaml

    from servelab.classroom import cluster, exchange

    roster = [*ROSTER, "cy_d", "e.f"]
    (hub_env / "keys.json").write_text(json.dumps(cluster.engine_keys(roster)))
    out = subprocess.run(
        [sys.executable, "-m", "servelab.classroom.cluster", "inbound-claims", "--users", ",".join(roster)]
        + ["--storage-class", "cephfs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    claims = {c["metadata"]["annotations"]["servelab.example.edu/user"]: c for c in yaml.safe_load_all(out.stdout)}
    assert list(claims) == roster
    for name, claim in claims.items():
        assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claim["spec"]["resources"]["requests"]["storage"] == f"{exchange.INBOUND_CAP_MIB}Mi"
        assert claim["spec"]["storageClassName"] == "cephfs"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", claim["metadata"]["name"]), name  # a Kubernetes name
    assert len({c["metadata"]["name"] for c in claims.values()}) == len(roster)
    assert claims["ada"]["metadata"]["name"] == "servelab-inbound-ada"
    spawned = pods(("student", 7, "ada"), ("student", 8, "cy_d"), ("student", 9, "zed"), ("instructor", 1, "teacher"))

    def claim_at(pod: dict, path: str) -> str:
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        return volumes[mounts_of(pod)[path]["name"]]["persistentVolumeClaim"]["claimName"]

    inbound = "/srv/nbgrader/exchange/servelab/inbound"
    for name in ("ada", "cy_d"):
        pod = spawned[name]
        assert claim_at(pod, f"{inbound}/{name}") == claims[name]["metadata"]["name"]
        assert not mounts_of(pod)[f"{inbound}/{name}"].get("readOnly")
        (step,) = [c for c in pod["spec"]["initContainers"] if c["name"] == "servelab-inbound"]
        uid = container(pod)["securityContext"]["runAsUser"]
        assert step["command"][-1] == f"chown {uid}:100 /inbound && chmod 2750 /inbound"
        assert step["volumeMounts"] == [{"name": mounts_of(pod)[f"{inbound}/{name}"]["name"], "mountPath": "/inbound"}]
        assert step["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
        assert step["securityContext"]["runAsGroup"] == 100  # chmod keeps 2750's setgid bit for the group's member
        assert not any(p.startswith(inbound) and p != f"{inbound}/{name}" for p in mounts_of(pod))  # no classmate's
    assert not any(p.startswith(inbound) for p in mounts_of(spawned["zed"]))  # not on the roster: no inbound
    teacher = spawned["teacher"]
    for name, claim in claims.items():
        assert claim_at(teacher, f"{inbound}/{name}") == claim["metadata"]["name"]
        assert mounts_of(teacher)[f"{inbound}/{name}"]["readOnly"] is True


def test_a_pods_uid_gets_a_passwd_entry_named_by_the_hub_so_nbgrader_knows_the_student(hub_env):
    """nbgrader's student id is pwd.getpwuid(os.getuid()) (nbgrader.utils.get_osusername); a uid the image does
    not list has none, until pod-start's passwd file and nss_wrapper give it the hub's name."""
    from servelab.classroom import cluster

    if os.geteuid() != 0:
        pytest.skip("running as another uid needs root")
    if not Path("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so").exists() and not list(
        Path("/usr/lib").glob("*/libnss_wrapper.so")
    ):
        pytest.fail("Debian's libnss-wrapper is not installed: run `make class-deps`")
    uid = 20000 + 4711
    ask = ["setpriv", f"--reuid={uid}", "--regid=100", "--clear-groups", "/usr/bin/python3", "-c"]
    who = "import os, pwd; print(pwd.getpwuid(os.getuid()).pw_name)"
    bare = subprocess.run(ask + [who], capture_output=True, text=True, cwd="/", timeout=60)
    assert bare.returncode != 0 and "uid not found" in bare.stderr  # what nbgrader met in every student pod
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="servelab-pod-"))  # a pod's /tmp: readable by its own uid
    folder.chmod(0o755)
    passwd = folder / "passwd"
    env = dict(os.environ) | cluster.pod_environment("ada", uid, 100, "/home/jovyan", passwd)
    named = subprocess.run(ask + [who], capture_output=True, text=True, cwd="/", env=env, timeout=60)
    assert named.returncode == 0 and named.stdout.strip() == "ada", named.stderr
    # An instructor's pod names every user the hub knows, by the uid their pods run as: collection reads the
    # owner of ada's and bo's inbound folders with pwd, as here.
    teacher = pods(("instructor", 1, "teacher"), ("student", 7, "ada"), ("student", 8, "bo"))["teacher"]
    others = cluster.class_users(env_of(teacher)[cluster.CLASS_USERS])
    assert others == {"teacher": 20001, "ada": 20007, "bo": 20008}
    env = dict(os.environ) | cluster.pod_environment("teacher", 20001, 100, "/home/jovyan", passwd, others)
    owners = "import pwd; print(pwd.getpwuid(20007).pw_name, pwd.getpwuid(20008).pw_name, pwd.getpwuid(20009))"
    teach = [*ask[:1], "--reuid=20001", *ask[2:]]
    named = subprocess.run(teach + [owners], capture_output=True, text=True, cwd="/", env=env, timeout=60)
    assert named.returncode != 0 and "uid not found: 20009" in named.stderr, named.stderr  # one the hub never met
    named = subprocess.run(teach + [owners.rsplit(",", 1)[0] + ")"], capture_output=True, text=True, cwd="/", env=env)
    assert named.returncode == 0 and named.stdout.split() == ["ada", "bo"], named.stderr
    with pytest.raises(SystemExit, match="not name:uid"):
        cluster.class_users("root:0")
    passwd.unlink()
    folder.rmdir()
    with pytest.raises(SystemExit, match="not a user name"):
        cluster.passwd_lines("ada:x:0:0:", uid, 100, "/home/jovyan", "")


def test_instructors_grade_in_a_user_namespaced_pod_where_bubblewrap_mounts_proc(hub_env):
    spawned = pods(("student", 7, "ada"), ("instructor", 1, "teacher"))
    teacher, ada = spawned["teacher"], spawned["ada"]
    context = container(teacher)["securityContext"]
    assert teacher["spec"]["hostUsers"] is False  # its own user namespace: a root in the pod is nobody on the node
    assert context["procMount"] == "Unmasked"  # allowed with hostUsers: false; bubblewrap mounts a fresh /proc
    assert context["seccompProfile"]["type"] == "Unconfined" and context["appArmorProfile"]["type"] == "Unconfined"
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert not context.get("privileged")
    assert "procMount" not in container(ada)["securityContext"] and "hostUsers" not in ada["spec"]
    assert "bubblewrap" in (REPO / "class" / "instructor.Dockerfile").read_text()


def test_the_course_is_laid_out_before_the_instructors_server_and_checked_to_be_in_force(hub_env):
    teacher = pods(("instructor", 1, "teacher"))["teacher"]
    (init,) = [c for c in teacher["spec"]["initContainers"] if c["name"] == "servelab-course"]
    course = "/home/jovyan/servelab"
    assert init["command"] == ["python", "-m", "servelab.classroom.cluster", "lay-out", course]
    assert init["image"] == container(teacher)["image"]
    assert {m["mountPath"]: m["subPath"] for m in init["volumeMounts"]} == {
        course: mounts_of(teacher)[course]["subPath"]
    }
    assert init["securityContext"]["runAsUser"] == container(teacher)["securityContext"]["runAsUser"]
    assert container(teacher)["args"][4:6] == ["--check-course", course]
    assert env_of(teacher)["TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR"] == "1"


def test_the_course_check_finds_a_course_volume_that_is_empty(tmp_path):
    """traitlets skips a missing config file silently; the check reads nbgrader's config as its apps do."""
    from servelab.classroom import cluster

    course = tmp_path / "course"
    config_dir = tmp_path / "jupyter"
    config_dir.mkdir()
    pod_config = extra_file("instructor", "nbgrader")["stringData"].replace("/home/jovyan/servelab", str(course))
    (config_dir / "nbgrader_config.py").write_text(pod_config)
    course.mkdir()
    missing = cluster.differences(course, [str(config_dir)])
    assert (
        "ExchangeFactory.collect is not set (the project sets 'servelab.grading.collection.SafeExchangeCollect')"
        in missing
    )
    assert any(m.startswith("Autograde.autograde_preprocessors") for m in missing)
    assert cluster.lay_out(course, [str(config_dir)]) == []  # laid out: the project's config is in force
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.HTMLExporter.sanitize_html = False\n"
    )
    assert cluster.differences(course, [str(config_dir)]) == [
        "HTMLExporter.sanitize_html is False, not the project's True"
    ]


def test_each_pod_has_cpu_memory_and_disk_limits_and_a_home_of_its_own(hub_env):
    for pod in pods(("student", 7, "ada"), ("instructor", 1, "teacher")).values():
        resources = container(pod)["resources"]
        assert {"cpu", "memory", "ephemeral-storage"} <= set(resources["limits"])
        assert {"cpu", "memory"} <= set(resources["requests"])
        (home,) = [m for m in container(pod)["volumeMounts"] if m["mountPath"] == "/home/jovyan"]
        volume = {v["name"]: v for v in pod["spec"]["volumes"]}[home["name"]]
        assert (
            volume["persistentVolumeClaim"]["claimName"]
            == f"claim-{pod['metadata']['labels']['hub.jupyter.org/username']}"
        )
    assert VALUES["singleuser"]["storage"]["capacity"]  # each home's size: the quota on a user's work


VARIANT_SECRET = b"0123456789abcdef0123456789abcdef-test-course"


def test_instructors_grade_against_each_students_numbers_and_a_students_pod_gets_only_their_own(
    local, hub_env, monkeypatch
):
    """The cluster's instructors grade with the local class's variants settings (ScoreAnswers.variants, the
    course secret from a Secret mounted in their pods alone, the class's students as the roster); a student's
    pod never mounts the secret nor the hub's numbers, and its init step writes their own numbers alone
    into their home, as `servelab class up` hands them out."""
    from traitlets.config.loader import PyFileConfigLoader

    from servelab.classroom import cluster
    from servelab.grading import trusted
    from servelab.variants import lesson, seeds

    numbers = cluster.variant_params(ROSTER, VARIANT_SECRET)
    assert numbers["kind"] == "Secret" and numbers["metadata"]["name"] == "servelab-variant-params"
    (hub_env / "params.json").write_text(numbers["stringData"]["params.json"])
    monkeypatch.setenv("SERVELAB_VARIANT_PARAMS_FILE", str(hub_env / "params.json"))
    spawned = pods(("instructor", 1, "teacher"), ("student", 7, "ada"), ("student", 8, "bo"))
    teacher, ada, bo = spawned["teacher"], spawned["ada"], spawned["bo"]

    # Instructors: the secret mounted read-only, and nbgrader's config (read as nbgrader reads it) as the
    # local class's instructor config has it.
    secret_volumes = {
        v["name"]
        for v in teacher["spec"]["volumes"]
        if v.get("secret", {}).get("secretName") == "servelab-variant-secret"
    }
    env = env_of(teacher)
    secret_file = env["SERVELAB_VARIANT_SECRET_FILE"]
    (mount,) = [m for m in container(teacher)["volumeMounts"] if m["name"] in secret_volumes]
    assert mount["readOnly"] and secret_file == mount["mountPath"] + "/secret"
    (hub_env / "nbgrader_config.py").write_text(extra_file("instructor", "nbgrader")["stringData"])
    monkeypatch.setenv("SERVELAB_VARIANT_ROSTER", env["SERVELAB_VARIANT_ROSTER"])
    scorer = trusted.ScoreAnswers(config=PyFileConfigLoader("nbgrader_config.py", str(hub_env)).load_config())
    here = nbgrader_settings(local, "instructor")["ScoreAnswers"]
    assert scorer.variants is here["variants"] is True
    assert scorer.variant_secret_file == secret_file
    assert scorer.variant_roster == ["ada", "bo", "someone"]  # the roster's users less the instructors
    assert set(here) == {"variants", "variant_secret_file", "variant_roster"}

    # Students: neither the secret nor the hub's numbers; their own numbers, written before the server starts.
    for pod in (ada, bo):
        names = {v.get("secret", {}).get("secretName") for v in pod["spec"]["volumes"]}
        assert not names & {"servelab-variant-secret", "servelab-variant-params"}
        assert not any(
            "variant" in m["mountPath"]
            for c in pod["spec"]["initContainers"] + [container(pod)]
            for m in c.get("volumeMounts", [])
        )
        assert "SERVELAB_VARIANT_SECRET_FILE" not in env_of(pod)
    (step,) = [c for c in ada["spec"]["initContainers"] if c["name"] == "servelab-variants"]
    given = json.loads({e["name"]: e["value"] for e in step["env"]}[cluster.VARIANT_PARAMS_ENV])
    own = {q: seeds.params_for(q, "ada", secret=VARIANT_SECRET) for q in lesson.LESSON_QUESTIONS}
    theirs = {q: seeds.params_for(q, "bo", secret=VARIANT_SECRET) for q in lesson.LESSON_QUESTIONS}
    assert given == own != theirs and json.dumps(json.dumps(theirs["warmup1"]))[1:-1] not in json.dumps(ada)
    home = {
        v["name"] for v in ada["spec"]["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "claim-ada"
    }
    assert [m["name"] for m in step["volumeMounts"]] == list(home)
    assert step["command"][:5] == ["python", "-m", "servelab.classroom.cluster", "hand-out", "/home/jovyan"]
    uid = container(ada)["securityContext"]["runAsUser"]
    assert step["command"][5:] == ["--uid", str(uid), "--gid", "100"]
    if os.geteuid() == 0:  # the step itself, on a home of its own (it chowns, as the init step runs as root)
        folder = hub_env / "ada-home"
        folder.mkdir()
        written = cluster.hand_out(folder, uid, 100, json.dumps(given))
        assert lesson.mine(written) == own and written == lesson.params_path(folder)
        st = written.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 100, 0o440)
        assert written.parent.parent.stat().st_uid == uid
    with pytest.raises(SystemExit, match="not one of the lesson's questions"):
        cluster.hand_out(hub_env, uid, 100, json.dumps({"capacity-context": {}}))
    # The hub reads the numbers from its own mount of their Secret; without it, no step, the lesson's numbers.
    hub_mounts = {m["name"]: m["mountPath"] for m in VALUES["hub"]["extraVolumeMounts"]}
    (hub_volume,) = [v for v in VALUES["hub"]["extraVolumes"] if v["name"] == "variant-params"]
    assert hub_volume["secret"]["secretName"] == "servelab-variant-params" and hub_volume["secret"]["optional"]
    assert hub_mounts["variant-params"] + "/params.json" == "/etc/servelab/variant-params/params.json"
    monkeypatch.setenv("SERVELAB_VARIANT_PARAMS_FILE", str(hub_env / "absent.json"))
    alone = pods(("student", 7, "ada"))["ada"]
    assert not any(c["name"] == "servelab-variants" for c in alone["spec"]["initContainers"])


def test_the_gradebook_password_is_a_secret_never_a_value():
    text = yaml.safe_dump(VALUES)  # the values, not the comments that explain them
    assert "postgresql+psycopg2://" not in text and not re.search(r"password\s*:", text, re.I)
    assert VALUES["hub"]["extraEnv"]["SERVELAB_GRADEBOOK_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "servelab-gradebook",
        "key": "url",
    }


def selects(policy: dict, pod: dict) -> bool:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return all(pod["metadata"]["labels"].get(k) == v for k, v in wanted.items())


def test_students_reach_the_lab_servers_and_nothing_else_and_only_instructors_reach_postgres(hub_env):
    specs = {s["name"]: s for s in STACK["servingEngineSpec"]["modelSpec"]}
    assert set(specs) == {"off", "ngram"} and len({s["modelURL"] for s in specs.values()}) == 1
    for spec in specs.values():
        assert spec["requestGPU"] >= 1 and "--no-enable-prefix-caching" in spec["vllmConfig"]["extraArgs"]
    spec_args = specs["ngram"]["vllmConfig"]["extraArgs"]
    speculative = json.loads(spec_args[spec_args.index("--speculative-config") + 1])
    assert speculative["method"] == "ngram" and speculative["num_speculative_tokens"] == 4
    assert "--speculative-config" not in specs["off"]["vllmConfig"]["extraArgs"]
    env = VALUES["singleuser"]["extraEnv"]
    gateway = GATEWAY["Service"]["metadata"]["name"]
    assert env["SERVELAB_REMOTE_OFF_URL"] == f"http://{gateway}.servelab.svc.cluster.local:8100"
    assert env["SERVELAB_REMOTE_ON_URL"] == f"http://{gateway}.servelab.svc.cluster.local:8101"
    # every user pod: Z2JH's policy, its own allow rules off but DNS, and the engines' port
    policy = VALUES["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    allowed = {rule for rule, on in policy["egressAllowRules"].items() if on}
    assert allowed <= {"dnsPortsCloudMetadataServer", "dnsPortsKubeSystemNamespace", "dnsPortsPrivateIPs"}
    assert policy["egressAllowRules"]["nonPrivateIPs"] is False  # no internet
    rules = [
        (rule["to"][0]["podSelector"]["matchLabels"], [p["port"] for p in rule["ports"]]) for rule in policy["egress"]
    ]
    gateway_pods = GATEWAY["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert rules == [(gateway_pods, [8100, 8101])]  # the gateway's ports, not the engines'
    assert GATEWAY["Service"]["spec"]["selector"] == gateway_pods
    # the engines take connections from the gateway alone, on vLLM's own port
    engines = GATEWAY["NetworkPolicy"]["spec"]
    assert engines["podSelector"]["matchLabels"] == STACK["servingEngineSpec"]["labels"]
    assert engines["policyTypes"] == ["Ingress"]
    assert [
        (r["from"][0]["podSelector"]["matchLabels"], [p["port"] for p in r["ports"]]) for r in engines["ingress"]
    ] == [(gateway_pods, [8000])]
    # PostgreSQL: a policy of its own that selects instructors' pods, as KubeSpawner labels them, and no student's
    spawned = pods(("student", 7, "ada"), ("instructor", 1, "teacher"))
    assert INSTRUCTOR_EGRESS["kind"] == "NetworkPolicy" and INSTRUCTOR_EGRESS["spec"]["policyTypes"] == ["Egress"]
    assert selects(INSTRUCTOR_EGRESS, spawned["teacher"]) and not selects(INSTRUCTOR_EGRESS, spawned["ada"])
    assert [p["port"] for rule in INSTRUCTOR_EGRESS["spec"]["egress"] for p in rule["ports"]] == [5432]


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
    assert "libnss-wrapper" in dockerfile  # pod-start's passwd entry
    assert VALUES["singleuser"]["image"]["name"].endswith("/student")


def test_the_clusters_engines_bound_each_request_as_the_local_class_does():
    """Each modelSpec, read as production-stack's chart renders it into vLLM's flags (servelab.review's reader
    of deployment-vllm-multi.yaml), carries the local engines' bounds (servers.engine_bounds): the gate's
    middleware and its max_tokens default; its image is vLLM's with servelab's wheel, where the middleware
    imports with nothing but Python's standard library (the wheel goes in without dependencies)."""
    from servelab.classroom import gate, servers
    from servelab.review import forms

    bounds = servers.engine_bounds()
    wanted = dict(zip(bounds[::2], bounds[1::2]))
    deployment = {"gpu": "H100", "gpus-per-node": 1, "nodes": 1}
    for spec in STACK["servingEngineSpec"]["modelSpec"]:
        rendered = forms.load(REPO / "class" / "vllm-stack-values.yaml", select=spec["name"], deployment=deployment)
        assert rendered.data["middleware"] == wanted["--middleware"] == servers.GATE, spec["name"]
        defaults = json.loads(rendered.data["override-generation-config"])
        assert defaults == json.loads(wanted["--override-generation-config"]) == {"max_new_tokens": gate.MAX_TOKENS}
        assert defaults["max_new_tokens"] < rendered.data["max-model-len"] and not rendered.unapplied
        # the gate's tokenizer is the model's the engine serves (production-stack appends modelSpec.env)
        assert {e["name"]: e["value"] for e in spec["env"]}["SERVELAB_GATE_MODEL"] == spec["modelURL"], spec["name"]
        image, _line = rendered.image
        assert image == f"{spec['repository']}:{spec['tag']}" and image.startswith(
            "registry.example.edu/servelab/engine:"
        )
    assert build_context("engine.Dockerfile") == ["dist/servelab-0.1.0-py3-none-any.whl"]
    dockerfile = (REPO / "class" / "engine.Dockerfile").read_text()
    pinned = re.search(r'"vllm==([^"]+)"', (REPO / "pyproject.toml").read_text())  # the course's one vLLM release
    assert pinned and re.search(rf"^FROM vllm/vllm-openai:v{re.escape(pinned[1])}$", dockerfile, re.M), (
        "class/engine.Dockerfile: the cluster's engines run the vLLM release pyproject.toml pins"
    )
    assert re.search(r"pip install .*--no-deps .*\.whl", dockerfile.replace("${SERVELAB_WHEEL}", "x.whl"))
    bare = subprocess.run(  # -S: no site-packages, as in vLLM's image where only servelab's wheel is added
        ["python3", "-S", "-c", f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); import {gate.__name__}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bare.returncode == 0, bare.stderr


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
    assert (
        "c.JupyterHub.load_groups" in local_hub
    )  # the local hub's groups are its roster; the cluster's, the provider's


def test_every_server_is_stopped_after_a_school_day_whatever_activity_it_reports():
    """The culler's idle timeout trusts activity the user's own server reports; --max-age does not."""
    import sys

    from servelab.classroom import hub

    local_hub = (REPO / "class" / "jupyterhub_config.py").read_text()
    assert 'f"--max-age={CULL_MAX_AGE_S}"' in local_hub
    assert hub.CULL_MAX_AGE_DEFAULT_S == 8 * 3600 and hub.CULL_IDLE_DEFAULT_S == 3600
    assert VALUES["cull"] == {"enabled": True, "timeout": 3600, "every": 300, "maxAge": hub.CULL_MAX_AGE_DEFAULT_S}
    helped = subprocess.run([sys.executable, "-m", "jupyterhub_idle_culler", "--help"], capture_output=True, text=True)
    assert "--max-age" in helped.stdout + helped.stderr


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
    # The instructors' venv, the exchange's owners and mounts, and the cgroups are root's (test_class_exchange.py).
    monkeypatch.setattr(
        hub.studentenv, "build_instructor", lambda state: state / "env" / "instructor" / "bin" / "python"
    )
    laid_out = []
    monkeypatch.setattr(hub.exchange, "lay_out", lambda *a, **k: laid_out.append(a) or {})
    monkeypatch.setattr(hub.limits, "make_class", lambda state, record: [])
    handed = []  # each student's own numbers go to their home as root (test_class_hub.py walks them)
    monkeypatch.setattr(hub.ClassHub, "hand_out_variants", lambda self: handed.append(self.settings.students))
    scanned = []
    monkeypatch.setattr(hub.limits, "shared_dirs", lambda skip: scanned.append(skip) or ["/run/lock", "/var/tmp"])
    hub.ClassHub(local).lay_out()
    assert handed == [local.students]
    assert hub.nbgrader_settings(local, "instructor")["ScoreAnswers"]["variants"] is True
    assert "ScoreAnswers" not in hub.nbgrader_settings(local, "student")
    # the world-writable folders each student's server gets privately, found once, outside the class's own
    assert scanned and str(local.state.resolve()) in scanned[0]
    assert json.loads((local.state / "class.json").read_text())["limits"]["shared_dirs"] == ["/run/lock", "/var/tmp"]
    assert laid_out == [
        (
            local.exchange,
            local.course_id,
            local.instructors,
            local.students,
            hub.CHECKOUT_GROUP,
            local.state / "inbound-images",
        )
    ]
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
    class_hub = hub.ClassHub(ClassSettings(state=main.parent / "class-state"))  # its journal goes there
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
        class_hub.restore(log=lambda line: None)
    assert {p: (p.stat().st_mode & 0o7777, p.stat().st_gid) for p in was} == was


def test_the_instructors_venv_takes_console_scripts_whatever_the_checkout_path(tmp_path):
    """pip starts a console script with `#!<venv>/bin/python`, or, where that path holds a space (a checkout in
    "/tmp/ci run/"), with a /bin/sh preamble that execs it: the instructors' venv reads both bodies, and gives
    each the shebang its own Python needs."""
    from servelab.classroom import studentenv

    body = b"import sys\nfrom alembic.config import main\n"
    for where in (tmp_path / "plain" / "bin", tmp_path / "with space" / "bin"):
        start = studentenv._shebang(where / "python")
        assert studentenv._script_body(start + body, where) == body
        assert (b"/bin/sh" in start) == (" " in str(where))
    assert studentenv._script_body(b"#!/usr/bin/env python3\n" + body, tmp_path / "plain" / "bin") is None
    assert studentenv._script_body(b"\x7fELF...", tmp_path / "plain" / "bin") is None


def test_the_clusters_engines_take_each_users_key_and_share_from_the_roster(hub_env, tmp_path):
    """The gateway in front of the cluster's engines is the local class's nginx (servers.nginx_config): its key
    map and shares come from the roster, the hub hands each user's pod their own key, and nginx accepts it."""
    from servelab.classroom import cluster, servers

    keys = cluster.engine_keys(["teacher", "ada", "bo"])
    secret, config = cluster.gateway_manifests(keys, per_student=6)
    assert cluster.engine_keys(["ada", "cy"], keys)["ada"] == keys["ada"]  # a new roster keeps the keys handed out
    assert len(set(keys.values())) == 3
    assert json.loads(secret["stringData"]["keys.json"]) == keys
    assert secret["stringData"]["keys.map"].splitlines() == [f'"Bearer {keys[n]}" "{n}";' for n in sorted(keys)]
    conf = config["data"]["nginx.conf"]
    # a share at each engine, each in its own zone: 6 at one engine and 6 at the other, not 6 between them
    shares = re.findall(r"limit_conn (\S+) 6;", conf)
    assert len(shares) == len(set(shares)) == 2 and conf.count("burst=12 nodelay;") == 2, shares
    assert len(set(re.findall(r"limit_req zone=(\S+) burst=12 nodelay;", conf))) == 2
    assert "map $http_authorization $student" in conf and 'if ($student = "") { return 401; }' in conf
    # the upstreams are production-stack's Services of the two modelSpecs, port 80
    specs = [spec["name"] for spec in STACK["servingEngineSpec"]["modelSpec"]]
    upstreams = re.findall(r"^    server (\S+);$", conf, re.M)
    assert upstreams == [f"vllm-{spec}-engine-service.servelab.svc.cluster.local:80" for spec in specs]
    listens = re.findall(r"listen 0\.0\.0\.0:(\d+);", conf)
    assert [int(p) for p in listens] == [p["port"] for p in GATEWAY["Service"]["spec"]["ports"]] == [8100, 8101]
    # what the pod mounts is what the configuration includes
    (pod,) = GATEWAY["Deployment"]["spec"]["template"]["spec"]["containers"]
    mounted = {m["mountPath"] for m in pod["volumeMounts"]}
    assert {f"{cluster.GATEWAY_DIR}/conf/nginx.conf", f"{cluster.GATEWAY_DIR}/conf/keys.map"} <= mounted
    assert f"include {cluster.GATEWAY_DIR}/conf/keys.map;" in conf and f"pid {cluster.GATEWAY_DIR}/run/" in conf
    # the hub hands each user's pod their key; a user the roster does not list gets none (the gateway says 401)
    (hub_env / "keys.json").write_text(secret["stringData"]["keys.json"])
    spawned = pods(("instructor", 1, "teacher"), ("student", 7, "ada"), ("student", 9, "zed"))
    assert env_of(spawned["teacher"])["SERVELAB_REMOTE_API_KEY"] == keys["teacher"]
    assert env_of(spawned["ada"])["SERVELAB_REMOTE_API_KEY"] == keys["ada"]
    assert "SERVELAB_REMOTE_API_KEY" not in env_of(spawned["zed"])
    with pytest.raises(servers.ClassError):
        servers.key_map({"ada": 'x" "root'})
    # nginx itself reads it (Debian's nginx 1.22.1; the gateway image runs 1.22.1), the Services' names
    # answered as the cluster's DNS would (a hosts file over /etc/hosts, in a mount namespace of its own)
    if not Path(servers.NGINX).exists() or os.geteuid() != 0:
        pytest.skip("nginx -t of the gateway's configuration needs Debian's nginx and root (a private /etc/hosts)")
    folder = tmp_path / "gateway"
    for part in ("conf", "run"):
        (folder / part).mkdir(parents=True)
    (folder / "conf" / "nginx.conf").write_text(cluster.gateway_config(folder, per_student=6))
    (folder / "conf" / "keys.map").write_text(secret["stringData"]["keys.map"])
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"10.0.0.{i} {u.split(':')[0]}\n" for i, u in enumerate(upstreams, 1)))
    test = f"mount --bind {hosts} /etc/hosts && {servers.NGINX} -t -p {folder} -e {folder}/run/error.log -c {folder}/conf/nginx.conf"
    checked = subprocess.run(["unshare", "--mount", "sh", "-c", test], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "test is successful" in checked.stderr, checked.stderr


def test_a_class_server_takes_one_sequence_per_request(tmp_path):
    """vLLM's --middleware on both engines (servelab.classroom.gate): a batch of prompts, n or best_of above 1,
    beam search or max_tokens past the cap is answered 400 before vLLM; one prompt (text or token ids) reaches
    vLLM with its body as sent, however it was chunked. (Checked against vLLM 0.32 itself by hand: README.)"""
    from servelab.classroom import gate, servers

    args = servers.ClassServers(state=tmp_path).args
    assert ["--middleware", servers.GATE] == args[-2:] == servers.engine_bounds()[-2:]
    # a request that names no max_tokens gets the cap as vLLM's default, not the rest of the context
    defaults = json.loads(args[args.index("--override-generation-config") + 1])
    assert defaults == {"max_new_tokens": gate.MAX_TOKENS} and gate.MAX_TOKENS < gate.CONTEXT
    assert args[args.index("--max-model-len") + 1] == str(gate.CONTEXT)
    assert servers.GATE == f"{gate.__name__}.{gate.OneSequencePerRequest.__name__}"

    def call(body: bytes, path: str = "/v1/completions") -> tuple[int, bytes]:
        seen: list = []

        async def app(scope, receive, send):
            got = b""
            while True:
                message = await receive()
                got += message.get("body", b"")
                if not message.get("more_body"):
                    break
            seen.append(got)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        chunks = [body[:7], body[7:]]
        messages = [{"type": "http.request", "body": c, "more_body": i == 0} for i, c in enumerate(chunks)]
        sent: list = []

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": path}
        asyncio.run(gate.OneSequencePerRequest(app)(scope, receive, send))
        assert seen in ([], [body])
        return sent[0]["status"], sent[1]["body"]

    from servelab.lab.speculation.points import OUTPUT_LENS

    assert max(OUTPUT_LENS) <= gate.MAX_TOKENS  # the speculation lab's longest output passes, as the cap itself
    ok = [
        {"prompt": "The capital of France is", "max_tokens": 64},
        {"prompt": [1, 2, 3], "n": 1},
        {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": gate.MAX_TOKENS},
    ]
    for body in ok:
        assert call(json.dumps(body).encode())[0] == 200, body
    assert call(b"not json")[0] == 200  # vLLM answers what it cannot parse itself
    refused = [
        {"prompt": ["a story"] * 64, "max_tokens": 128, "ignore_eos": True},
        {"prompt": [[1, 2], [3, 4]]},
        {"messages": [{"role": "user", "content": "hi"}], "n": 4},
        {"prompt": "x", "best_of": 2},
        {"prompt": "x", "use_beam_search": True},
        {"prompt": "x", "max_tokens": gate.MAX_TOKENS + 1},
    ]
    for body in refused:
        status, answer = call(
            json.dumps(body).encode(), "/v1/chat/completions" if "messages" in body else "/v1/completions"
        )
        assert status == 400 and json.loads(answer)["error"]["message"], body
    assert call(b'{"prompt": "x", "n": 1, "n": 3}')[0] == 400  # the last of a repeated key, as vLLM reads it


def test_the_python_a_class_runs_runs_the_feedback_pages_first_step():
    """A class's users run the Python studentenv.open_python() finds (Debian's where this venv's own is closed to
    them) with this venv's packages: what the class runs with it (hub.PYTHON_PROBE, nbconvert's HTML exporter
    selecting with soupsieve) works there, as class up checks for each role."""
    import sysconfig

    from servelab.classroom import hub, studentenv

    python = studentenv.open_python()
    code = f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r}); exec({hub.PYTHON_PROBE!r})"
    probe = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert probe.returncode == 0, (python, probe.stderr[-1500:])


def test_class_up_takes_back_the_servers_keys_of_users_not_in_the_class(tmp_path):
    """A key the class's servers know outlives its class unless taken back: class up keeps this class's users'."""
    from servelab.classroom import servers

    keys = servers.grant(tmp_path, ["ada", "bo", "old-student"])
    assert servers.revoke_all_but(tmp_path, ["ada", "bo", "teacher"]) == ["old-student"]
    kept = json.loads((servers.engines_dir(tmp_path) / "keys.json").read_text())
    assert kept == {"ada": keys["ada"], "bo": keys["bo"]}
    assert keys["old-student"] not in (servers.engines_dir(tmp_path) / "conf" / "keys.map").read_text()
    assert servers.revoke_all_but(tmp_path, ["ada", "bo"]) == []
    assert servers.revoke_all_but(tmp_path / "none", ["ada"]) == []


def test_the_local_hubs_log_is_capped_and_nothing_goes_around_it(local, monkeypatch, tmp_path, capfd):
    """A student's loop of refused requests writes a warning line each: the local hub's own config (loaded by
    traitlets as `jupyterhub -f` loads it) logs into a file that rotates, and nothing of it to its stderr, which
    `class up` keeps uncapped for what runs before logging does."""
    from jupyterhub.app import JupyterHub
    from traitlets.config.loader import PyFileConfigLoader

    from servelab.classroom import hub

    (local.state / "hub").mkdir()
    (local.state / "class.json").write_text(local.to_json())  # as ClassHub.lay_out writes it
    monkeypatch.setenv("SERVELAB_CLASS_STATE", str(local.state))
    monkeypatch.setattr(hub, "HUB_LOG_BYTES", 20_000)  # read as the config is loaded
    config = PyFileConfigLoader("jupyterhub_config.py", str(REPO / "class")).load_config()
    app = JupyterHub(config=config)
    app.init_logging()
    log = local.state / "hub" / "jupyterhub.log"
    assert log == hub.ClassHub(local).log_path
    refused = logging.getLogger("tornado.access")  # where JupyterHub's request log goes (its log_request)
    try:
        for i in range(3000):
            refused.warning("403 GET /hub/api/users (@127.0.0.1) 1.2ms %d", i)
    finally:
        for handler in app.log.handlers:
            handler.close()
    files = sorted(log.parent.glob("jupyterhub.log*"))
    assert [f.name for f in files] == [
        "jupyterhub.log",
        *(f"jupyterhub.log.{i}" for i in range(1, hub.HUB_LOG_KEPT + 1)),
    ]
    assert sum(f.stat().st_size for f in files) <= (hub.HUB_LOG_KEPT + 1) * 20_000
    assert log.read_text().rstrip().endswith(" 2999")  # the newest line is in the log
    assert "403 GET" not in capfd.readouterr().err
