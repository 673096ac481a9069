"""JupyterHub configuration for a servelab class on one machine.

`servelab class up` writes the class's settings to <state>/class.json and starts
`jupyterhub -f class/jupyterhub_config.py` with SERVELAB_CLASS_STATE pointing at
the state folder (see src/servelab/classroom/hub.py for the layout). Every
setting below comes from there; the Zero to JupyterHub values in
class/z2jh-values.yaml carry the same ones for a cluster.
"""

import os
import sys
from pathlib import Path

from servelab.classroom import limits
from servelab.classroom import servers as class_servers
from servelab.classroom.hub import (
    CULL_IDLE_DEFAULT_S,
    CULL_MAX_AGE_DEFAULT_S,
    ClassSettings,
    hub_logging_config,
    lab_environment,
    single_user_command,
)
from servelab.paths import REPO_DIR

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

settings = ClassSettings.load(Path(os.environ["SERVELAB_CLASS_STATE"]) / "class.json")
hub_dir = settings.state / "hub"
PAGE_POLICY_CONFIG = REPO_DIR / "grading" / "jupyter"  # jupyter_server_config.d/ enabling servelab.grading.page_policy

# Loopback only: the public port (the proxy), the proxy's API and the hub on the next two ports.
c.JupyterHub.bind_url = f"http://127.0.0.1:{settings.port}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.port + 1}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{settings.port + 2}"
c.ConfigurableHTTPProxy.command = [os.environ.get("SERVELAB_CLASS_PROXY", "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(hub_dir / "jupyterhub.pid")
c.JupyterHub.logging_config = hub_logging_config(hub_dir / "jupyterhub.log")  # capped: rotates at 20 MiB, 4 kept

# Users are the machine's accounts, logging in with their own password.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False  # no login session per spawn: containers and CI have no logind
c.Authenticator.allowed_users = set(settings.instructors + settings.students)
c.JupyterHub.load_groups = {"instructors": {"users": settings.instructors}, "students": {"users": settings.students}}

# Each user's server, run as that user in their home folder: a student's from the students' environment
# (<state>/env, a built wheel of servelab), an instructor's from the instructors' venv (pre_spawn_hook).
# JupyterHub's LocalProcessSpawner, each server started in its user's cgroup: a student's under memory,
# CPU and process limits with a private /tmp (servelab.classroom.limits; systemdspawner where PID 1 is systemd).
c.JupyterHub.spawner_class = limits.spawner_class()
c.CgroupSpawner.class_state = str(settings.state)
c.CgroupSpawner.limits = settings.limits
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 180  # JupyterLab with nbgrader's extensions on 2 busy cores
c.Spawner.http_timeout = 180
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL"]  # each user's own cache: see lab_environment

# Idle servers stopped by jupyterhub-idle-culler, a hub service with only the scopes it needs (its README).
# Activity is reported by the user's own server (its token may post any last_activity the hub accepts),
# so it is not trusted alone: --max-age stops every server that old, active or not.
CULL_IDLE_S = int(os.environ.get("SERVELAB_CULL_IDLE_S", str(CULL_IDLE_DEFAULT_S)))
CULL_MAX_AGE_S = int(os.environ.get("SERVELAB_CULL_MAX_AGE_S", str(CULL_MAX_AGE_DEFAULT_S)))
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [
            sys.executable,
            "-m",
            "jupyterhub_idle_culler",
            f"--timeout={CULL_IDLE_S}",
            f"--max-age={CULL_MAX_AGE_S}",
            "--cull-every=300",
        ],
    }
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }
]


def role_of(name: str) -> str:
    return "instructor" if name in settings.instructors else "student"


def pre_spawn_hook(spawner):
    """The role's environment and command, nbgrader extensions and config, and the lab's shared servers
    (the gradebook for instructors)."""
    role = role_of(spawner.user.name)
    spawner.limited = role == "student"
    spawner.cmd = single_user_command(settings, role)
    env = lab_environment(settings, role)
    if role == "instructor":
        # formgrader draws submissions through the course's nbgrader_config.py (sanitized, see
        # servelab.grading.safe_html); this adds a Content-Security-Policy on its pages of a
        # submission and sandboxes the files handed in beside the notebook (servelab.grading.page_policy).
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([env["JUPYTER_CONFIG_PATH"], str(PAGE_POLICY_CONFIG)])
    if settings.remote_off_url:  # the user's own key for the class's servers (servelab.classroom.servers)
        env["SERVELAB_REMOTE_API_KEY"] = class_servers.key_for(settings.state, spawner.user.name)
    spawner.environment = {**spawner.environment, **env}


c.Spawner.pre_spawn_hook = pre_spawn_hook
