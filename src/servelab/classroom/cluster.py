"""The course on a cluster: laid out by the instructor pod's init step, and checked to be the config in force.

    python -m servelab.classroom.cluster lay-out /home/jovyan/servelab   # the init container (class/z2jh-values.yaml)
    python -m servelab.classroom.cluster pod-start [--check-course DIR] -- jupyterhub-singleuser   # every pod

`pod-start` gives the pod's user a passwd entry and starts the server. Pods run
as uid 20000 + the hub's id for the user, which no image lists in /etc/passwd;
nbgrader takes the student id from pwd.getpwuid(os.getuid()) (nbgrader.utils.
get_osusername), and so does every tool that asks who is running. nss_wrapper
(Debian's libnss-wrapper, the mechanism OpenShift's images use for arbitrary
uids) answers those look-ups from a file: this writes that file, /etc/passwd
plus one line naming the uid JUPYTERHUB_USER (set by the hub), and runs the
command with nss_wrapper preloaded. With --check-course, the server only starts
when the course's nbgrader config is the one in force (below).

An instructor's pod also names every other user of the hub: collection takes a
hand-in's student from the owner of its inbound folder (pwd.getpwuid of its uid),
so the hub hands instructors' pods SERVELAB_CLASS_USERS, "name:uid,..." for every
user it knows (class/z2jh-values.yaml), and pod-start writes a passwd line for each.
A user the hub first met after the instructor's server started is not in it: their
hand-in is refused at collection as owned by "uid N" (collect-refusals.jsonl) until
that server is restarted.

`engine-keys` writes the class's gateway in front of the cluster's engines, the same
per-user keys and shares as the local class's nginx (servelab.classroom.servers):

    python -m servelab.classroom.cluster engine-keys --users teacher,ada,bo [--keys old.json] | kubectl apply -n servelab -f -

a Secret `servelab-engine-keys` (keys.json, name -> key, which the hub reads to hand each
user's pod SERVELAB_REMOTE_API_KEY; keys.map, nginx's map of those keys) and a ConfigMap
`servelab-engine-gateway` (nginx.conf: servers.nginx_config with the engines' Services as
its upstreams), which class/engine-gateway.yaml's nginx runs. `--keys` keeps the keys
already handed out (`kubectl get secret servelab-engine-keys -o jsonpath='{.data.keys\\.json}' | base64 -d`).

    python -m servelab.classroom.cluster inbound-claims --users ada,bo [--size-mib 256] [--storage-class X] | kubectl apply -n servelab -f -

one ReadWriteMany claim per user, servelab-inbound-<user> (inbound_claim), of the local class's
inbound cap (exchange.INBOUND_CAP_MIB): the user's hand-ins, mounted by their pod as
exchange/servelab/inbound/<user>/ and read by instructors' pods (class/z2jh-values.yaml), so a
full one stops that user's hand-ins and nobody else's, as the local class's own ext4 does.

The variants (servelab.variants): each student's own numbers of the lesson's variant questions, drawn
under the course secret, which only instructors' pods mount (a Secret `servelab-variant-secret`, key
`secret`: the course secret's text, as servelab.variants.seeds writes it):

    python -m servelab.classroom.cluster variant-params --users ada,bo --secret-file SECRET | kubectl apply -n servelab -f -

a Secret `servelab-variant-params` (params.json: user -> their numbers) that the hub reads; the hub hands a
student's pod their own numbers alone, and the pod's init step, root's, writes them into the student's home
as `servelab class up` does (hand-out, servelab.variants.lesson.write_params): the students' pods never see
the secret, nor a classmate's numbers.

`lay-out` makes the course directory from this package's course config when it
is missing (servelab.grading.course.make), then loads nbgrader's config the way
nbgrader's own apps and the formgrader do (nbgrader.apps.NbGrader.load_config_file:
every nbgrader_config.py on the Jupyter config path, then the folder it runs in)
and compares it with the project's grading/nbgrader_config.py, trait by trait. A
trait the project sets that is missing or different in what nbgrader would run
with is an error: traitlets skips a config file that is not there without a
word (its load_subconfig looks the file up and moves on), so a pod whose course
volume is empty would grade with nbgrader's defaults (no sandbox, no safe
collection, no sanitized pages) unless something checks. The init container
exits non-zero, and the pod does not start, when the check fails.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from traitlets.config import Config, PyFileConfigLoader


def project_config() -> Config:
    """The project's own course config (grading/nbgrader_config.py), as traitlets reads it."""
    from ..grading import course

    path = Path(course.CONFIG)
    return PyFileConfigLoader(path.name, str(path.parent)).load_config()


def config_in_force(course_dir: Path, config_path: list[str] | None = None) -> Config:
    """What nbgrader would run with in course_dir: its apps' own config loading, from that folder."""
    from nbgrader.apps.baseapp import NbGrader

    was_cwd, was_path = os.getcwd(), os.environ.get("JUPYTER_CONFIG_PATH")
    try:
        if config_path is not None:
            os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(config_path)
        os.chdir(course_dir)
        app = NbGrader()
        app.load_config_file()
        return app.config
    finally:
        os.chdir(was_cwd)
        if config_path is not None:
            if was_path is None:
                os.environ.pop("JUPYTER_CONFIG_PATH", None)
            else:
                os.environ["JUPYTER_CONFIG_PATH"] = was_path


def differences(course_dir: Path, config_path: list[str] | None = None) -> list[str]:
    """Each trait of the project's config that nbgrader in course_dir would not run with, said plainly."""
    wanted, found = project_config(), config_in_force(course_dir, config_path)
    out = []
    for section, traits in wanted.items():
        for name, value in traits.items():
            if section not in found or name not in found[section]:
                out.append(f"{section}.{name} is not set (the project sets {value!r})")
            elif found[section][name] != value:
                out.append(f"{section}.{name} is {found[section][name]!r}, not the project's {value!r}")
    return out


def lay_out(course_dir: Path, config_path: list[str] | None = None) -> list[str]:
    """Make the course when missing, then the differences (empty: the project's config is in force)."""
    from ..grading import course

    course_dir = Path(course_dir)
    if not (course_dir / "nbgrader_config.py").is_file():
        course.make(course_dir)
    return differences(course_dir, config_path)


NSS_WRAPPER = "libnss_wrapper.so"  # Debian's libnss-wrapper, found by the dynamic loader
PASSWD_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")  # hub.config.Authenticator.username_pattern


def passwd_lines(user: str, uid: int, gid: int, home: str, system: str, others: dict[str, int] | None = None) -> str:
    """The passwd file nss_wrapper reads: the system's entries, the pod's uid named `user`, and each of `others`
    (name -> uid: the class's other users, for an instructor's pod), every uid the system does not list."""
    if not PASSWD_NAME.match(user):
        raise SystemExit(f"JUPYTERHUB_USER {user!r} is not a user name a passwd entry can hold; see username_pattern")
    lines = [line for line in system.splitlines() if line.strip()]
    taken = {line.split(":")[2] for line in lines if line.count(":") >= 2}
    names = {line.split(":")[0] for line in lines}
    entries = [(user, uid, gid, home, "/bin/bash")]
    entries += [(name, n, gid, "/nonexistent", "/usr/sbin/nologin") for name, n in sorted((others or {}).items())]
    for name, n, g, folder, shell in entries:
        if str(n) not in taken and name not in names:
            lines.append(f"{name}:x:{n}:{g}:{name}:{folder}:{shell}")
            taken.add(str(n))
            names.add(name)
    return "\n".join(lines) + "\n"


CLASS_USERS = "SERVELAB_CLASS_USERS"  # "name:uid,name:uid": the hub's users, handed to instructors' pods
FIRST_UID = 20000  # a pod's uid is FIRST_UID + the hub's id for its user (class/z2jh-values.yaml)


def class_users(text: str) -> dict[str, int]:
    """SERVELAB_CLASS_USERS read: only names a passwd line can hold, only uids the hub hands out."""
    users = {}
    for item in filter(None, text.split(",")):
        name, _, number = item.partition(":")
        if not PASSWD_NAME.match(name) or not number.isdigit() or int(number) < FIRST_UID:
            raise SystemExit(f"{CLASS_USERS} holds {item!r}, which is not name:uid (a uid of {FIRST_UID} or more)")
        users[name] = int(number)
    return users


def pod_environment(
    user: str, uid: int, gid: int, home: str, passwd: Path, others: dict[str, int] | None = None
) -> dict[str, str]:
    """Write `passwd` for this uid (and `others`) and return what nss_wrapper needs in the environment."""
    passwd.write_text(passwd_lines(user, uid, gid, home, Path("/etc/passwd").read_text(), others))
    passwd.chmod(0o644)
    preload = " ".join(filter(None, [NSS_WRAPPER, os.environ.get("LD_PRELOAD", "")]))
    return {"NSS_WRAPPER_PASSWD": str(passwd), "NSS_WRAPPER_GROUP": "/etc/group", "LD_PRELOAD": preload}


def pod_start(command: list[str], check_course: Path | None = None) -> None:
    """Write the pod user's passwd file, check the course if asked, exec `command` under nss_wrapper."""
    if not command:
        raise SystemExit("pod-start needs the command to run after --, e.g. -- jupyterhub-singleuser")
    user = os.environ.get("JUPYTERHUB_USER", "")
    if not user:
        raise SystemExit("pod-start runs in a hub's pod: JUPYTERHUB_USER is not set")
    passwd = Path(os.environ.get("TMPDIR", "/tmp")) / f"servelab-passwd-{os.getuid()}"
    others = class_users(os.environ.get(CLASS_USERS, ""))
    env = dict(os.environ) | pod_environment(
        user, os.getuid(), os.getgid(), os.environ.get("HOME", "/home/jovyan"), passwd, others
    )
    if check_course is not None:
        problems = differences(check_course)
        if problems:
            raise SystemExit(
                f"The course in {check_course} is not the one in force for nbgrader here:\n  " + "\n  ".join(problems)
            )
    os.execvpe(command[0], command, env)


# --- the engines' gateway: each user's key and share, in front of production-stack's engines -----------------
GATEWAY_DIR = Path("/srv/gateway")  # the gateway pod's folder (class/engine-gateway.yaml mounts conf/ and run/)
GATEWAY_PORTS = {"off": 8100, "on": 8101}  # the lab's two servers, as `servelab class servers` numbers them
ENGINE_SERVICES = {"off": "off", "on": "ngram"}  # class/vllm-stack-values.yaml's modelSpec names
ENGINE_RELEASE, NAMESPACE = "vllm", "servelab"  # helm release and namespace of the charts (class/*.yaml)


def engine_upstreams(release: str = ENGINE_RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
    """Each engine's Service, as production-stack names it (<release>-<modelSpec name>-engine-service, port 80)."""
    return {
        name: f"{release}-{spec}-engine-service.{namespace}.svc.cluster.local:80"
        for name, spec in ENGINE_SERVICES.items()
    }


def gateway_config(folder: Path = GATEWAY_DIR, per_student: int | None = None, **kw) -> str:
    """The gateway's nginx.conf: the local class's (servers.nginx_config), listening on the pod's address."""
    from . import servers

    return servers.nginx_config(
        Path(folder),
        GATEWAY_PORTS,
        per_student or servers.PER_STUDENT,
        upstreams=kw.pop("upstreams", None) or engine_upstreams(),
        listen="0.0.0.0",
        stream_logs=True,
        **kw,
    )


def engine_keys(users: list[str], keys: dict[str, str] | None = None) -> dict[str, str]:
    """A key for each user (the ones in `keys` kept, new ones made); only names the hub allows (username_pattern)."""
    import secrets

    kept = dict(keys or {})
    for name in users:
        if not PASSWD_NAME.match(name):
            raise SystemExit(f"{name!r} is not a user name the hub allows (username_pattern): no key")
        kept.setdefault(name, "sl-" + secrets.token_urlsafe(24))
    return {name: kept[name] for name in users}


def gateway_manifests(keys: dict[str, str], per_student: int | None = None) -> list[dict]:
    """The Secret of the users' keys (keys.json for the hub, keys.map for nginx) and the gateway's ConfigMap."""
    import json

    from . import servers

    labels = {"app.kubernetes.io/name": "servelab-engine-gateway"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "servelab-engine-keys", "labels": labels},
            "type": "Opaque",
            "stringData": {"keys.json": json.dumps(keys, indent=1, sort_keys=True), "keys.map": servers.key_map(keys)},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "servelab-engine-gateway", "labels": labels},
            "data": {"nginx.conf": gateway_config(per_student=per_student)},
        },
    ]


VARIANT_PARAMS_ENV = "SERVELAB_VARIANT_PARAMS_JSON"  # the student's numbers, handed to the init step by the hub


def variant_params(users: list[str], secret: bytes) -> dict:
    """The Secret of each user's numbers of the lesson's variant questions (params.json), for the hub to hand out."""
    import json

    from ..variants.lesson import LESSON_QUESTIONS
    from ..variants.seeds import params_for

    for name in users:
        if not PASSWD_NAME.match(name):
            raise SystemExit(f"{name!r} is not a user name the hub allows (username_pattern): no numbers")
    params = {name: {q: params_for(q, name, secret=secret) for q in LESSON_QUESTIONS} for name in users}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "servelab-variant-params", "labels": {"app.kubernetes.io/part-of": "servelab"}},
        "type": "Opaque",
        "stringData": {"params.json": json.dumps(params, indent=1, sort_keys=True)},
    }


def hand_out(home: Path, uid: int, gid: int, text: str) -> Path:
    """The student pod's init step: the numbers the hub handed over (JSON: question id -> parameters), each
    one the lesson can ask, written into their home as `servelab class up` writes them (root's, 0440)."""
    import json

    from ..variants.lesson import LESSON_QUESTIONS, write_params
    from ..variants.questions import render

    try:
        params = json.loads(text)
    except ValueError:
        params = None
    if not isinstance(params, dict) or not params:
        raise SystemExit(f"{VARIANT_PARAMS_ENV} holds no numbers")
    for qid, p in params.items():
        if qid not in LESSON_QUESTIONS or not isinstance(p, dict):
            raise SystemExit(f"{VARIANT_PARAMS_ENV}: {qid!r} is not one of the lesson's questions {LESSON_QUESTIONS}")
        render(qid, p)  # raises on numbers the question cannot be asked with
    return write_params(home, params, uid=uid, gid=gid)


INBOUND_CLAIM = "servelab-inbound-"  # each user's hand-ins: a claim of its own (hub.extraConfig.servelab-roles)
KUBE_NAME = re.compile(r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$")  # a user name that is a Kubernetes object's name as is


def inbound_claim(user: str) -> str:
    """The name of a user's inbound claim: theirs where it can name a Kubernetes object, else a hash of it after
    a second dash (no user name starts with one, so the two kinds never meet). hub.extraConfig.servelab-roles
    names it the same way: the hub's image has no servelab."""
    if KUBE_NAME.match(user) and len(user) <= 63:
        return INBOUND_CLAIM + user
    import hashlib

    return INBOUND_CLAIM + "-" + hashlib.sha256(user.encode()).hexdigest()[:16]


def inbound_claims(users: list[str], size_mib: int | None = None, storage_class: str | None = None) -> list[dict]:
    """One ReadWriteMany claim of `size_mib` (default: the local class's inbound cap) per user: their pod mounts
    it as exchange/servelab/inbound/<user>/, instructors' pods read it; a full one stops that user's hand-ins."""
    from .exchange import INBOUND_CAP_MIB

    claims = []
    for name in users:
        if not PASSWD_NAME.match(name):
            raise SystemExit(f"{name!r} is not a user name the hub allows (username_pattern): no inbound")
        spec: dict = {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": f"{size_mib or INBOUND_CAP_MIB}Mi"}},
        }
        if storage_class:
            spec["storageClassName"] = storage_class
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": inbound_claim(name),
                    "labels": {"app.kubernetes.io/part-of": "servelab", "app.kubernetes.io/component": "inbound"},
                    "annotations": {"servelab.example.edu/user": name},
                },
                "spec": spec,
            }
        )
    return claims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.classroom.cluster", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("lay-out", "check"):
        p = sub.add_parser(name, help="make the course if missing, then check" if name == "lay-out" else "check only")
        p.add_argument("course", type=Path, help="the course directory (nbgrader's CourseDirectory.root)")
    start = sub.add_parser("pod-start", help="the pod user's passwd entry (nss_wrapper), then the command")
    start.add_argument("--check-course", type=Path, help="start only if this course's config is in force")
    start.add_argument("cmd", nargs=argparse.REMAINDER, help="-- and the command to run")
    gate = sub.add_parser("engine-keys", help="the engines' gateway: each user's key and share (YAML on stdout)")
    gate.add_argument("--users", required=True, help="the hub's user names that get a key, comma-separated")
    gate.add_argument("--keys", type=Path, help="keys.json of the keys already handed out (kept)")
    gate.add_argument("--per-student", type=int, help="requests one user may have at an engine at once")
    inbound = sub.add_parser("inbound-claims", help="each user's inbound volume claim, of a size (YAML on stdout)")
    inbound.add_argument("--users", required=True, help="the hub's user names, comma-separated (the roster)")
    inbound.add_argument("--size-mib", type=int, help="each user's inbound, MiB (default: the local class's cap)")
    inbound.add_argument("--storage-class", help="a storage class whose provisioner enforces the size")
    numbers = sub.add_parser("variant-params", help="each user's numbers of the variant questions (YAML on stdout)")
    numbers.add_argument("--users", required=True, help="the hub's user names, comma-separated (the roster)")
    numbers.add_argument("--secret-file", type=Path, required=True, help="the course secret (never made here)")
    give = sub.add_parser("hand-out", help=f"a student pod's init step: ${VARIANT_PARAMS_ENV} into their home")
    give.add_argument("home", type=Path, help="the student's home, as the init step mounts it")
    give.add_argument("--uid", type=int, required=True, help="the uid the student's server runs as")
    give.add_argument("--gid", type=int, required=True, help="its group")
    args = parser.parse_args(argv)
    if args.command == "variant-params":
        import yaml

        from ..variants.seeds import course_secret

        users = [n.strip() for n in args.users.split(",") if n.strip()]
        secret = course_secret(args.secret_file, create=False)
        print(yaml.safe_dump(variant_params(users, secret), sort_keys=False), end="")
        return 0
    if args.command == "hand-out":
        print(hand_out(args.home, args.uid, args.gid, os.environ.get(VARIANT_PARAMS_ENV, "")))
        return 0
    if args.command == "inbound-claims":
        import yaml

        users = [n.strip() for n in args.users.split(",") if n.strip()]
        print(yaml.safe_dump_all(inbound_claims(users, args.size_mib, args.storage_class), sort_keys=False), end="")
        return 0
    if args.command == "engine-keys":
        import json

        import yaml

        old = json.loads(args.keys.read_text()) if args.keys else {}
        users = [n.strip() for n in args.users.split(",") if n.strip()]

        class Literal(yaml.SafeDumper):  # the files as blocks of lines, as one would write them by hand
            pass

        Literal.add_representer(
            str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="|" if "\n" in v else None)
        )
        docs = gateway_manifests(engine_keys(users, old), args.per_student)
        print(yaml.dump_all(docs, Dumper=Literal, sort_keys=False), end="")
        return 0
    if args.command == "pod-start":
        pod_start(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd, args.check_course)
        return 0
    problems = lay_out(args.course) if args.command == "lay-out" else differences(args.course)
    if problems:
        print(
            f"nbgrader in {args.course} would not run with the project's course config "
            f"(grading/nbgrader_config.py):\n  " + "\n  ".join(problems) + "\nCheck that the course volume holds "
            "the course (python -m servelab.classroom.cluster lay-out COURSE) and that the role's "
            "nbgrader_config.py loads it.",
            file=sys.stderr,
        )
        return 1
    print(f"{args.course}: the project's nbgrader config is the one in force")
    return 0


if __name__ == "__main__":
    sys.exit(main())
