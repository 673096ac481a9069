"""The class report on the class's PostgreSQL gradebook, after the parallel graders, for a class of 300.

    python bench/class_report.py [--students 300]   ->   bench/results/class.json  (its "report" section)

1. A PostgreSQL cluster in a throwaway folder (servelab.classroom.postgres), and a course
   with lesson 25's perfect, partial, near_misses and empty samples collected into it.
2. The parallel graders (python -m servelab.grading.parallel, 2 graders) grade those four
   in the sandbox, into PostgreSQL: the gradebook and the grader's records as a class leaves them.
3. servelab.grading.replicate copies them to --students students (40 % perfect, 30 % partial,
   20 % near_misses, 10 % empty) through nbgrader's Gradebook API: sandbox-grading 300 takes
   8 minutes here (bench/results/class.json, "grading"), and the report reads only what grading
   wrote, which is the same for every student with the same answers.
4. `servelab class report lesson25` (report.build + report.write), run three times; the median
   is the number. Target: under 10 s. The slips' counts are checked against the mix.

Rewrites only the "report" section of class.json; the grading, hub and load sections stay.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import hardware
from servelab.classroom import report
from servelab.classroom.postgres import Postgres
from servelab.grading import course, replicate, samples

RESULT = Path(__file__).resolve().parent / "results" / "class.json"
MIX = {"perfect": 0.4, "partial": 0.3, "near_misses": 0.2, "empty": 0.1}
TARGET_S = 10.0
RUNS = 3


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    counts = {k: round(v * args.students) for k, v in MIX.items()}
    tmp = Path(tempfile.mkdtemp(prefix="servelab-bench-report-"))
    tmp.chmod(0o755)
    db = Postgres(tmp / "db", port=free_port())
    load_before = [round(x, 2) for x in os.getloadavg()]
    lesson = course.get("lesson25")
    try:
        url = db.start()
        os.environ["SERVELAB_GRADEBOOK_URL"] = url  # the graders and the report read the gradebook from here
        subs = tmp / "submissions" / "lesson25"
        subs.mkdir(parents=True)
        for kind in MIX:
            shutil.copy(samples.SUBMISSIONS / "lesson25" / f"{kind}.ipynb", subs / f"{kind}.ipynb")
        root = tmp / "course"
        started = time.perf_counter()
        graded = subprocess.run(
            [
                sys.executable,
                "-m",
                "servelab.grading.parallel",
                "--course",
                str(root),
                "--submissions",
                str(subs.parent),
                "--workers=2",
                "lesson25",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        grading_s = time.perf_counter() - started
        if graded.returncode != 0:
            raise SystemExit(f"the parallel graders failed:\n{graded.stdout[-3000:]}\n{graded.stderr[-2000:]}")
        mix = [(f"s{i:03d}_{kind}", kind) for i, kind in enumerate(k for k, n in counts.items() for _ in range(n))]
        started = time.perf_counter()
        replicate.replicate(root, url, lesson, mix)
        replicate_s = time.perf_counter() - started
        seconds = []
        for _ in range(RUNS):
            started = time.perf_counter()
            built = report.build("lesson25", root)
            page, table = report.write(built, tmp / "out")
            seconds.append(time.perf_counter() - started)
        page_bytes = page.stat().st_size
    finally:
        db.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    slips = {(s.grade_id, s.slip): s.count for q in built.questions for s in q.slips}
    checks = {  # each from samples.py: what partial and near_misses get wrong
        ("warmup1-batch", "kv-once"): counts["partial"],
        ("warmup3-tokens", "all-accepted"): counts["partial"],
        ("warmup3-tokens", "a-times-k"): counts["near_misses"],
        ("practice1-test", "cap_explains_miss"): counts["partial"] + counts["near_misses"],
        ("practice5-test", "chose-c"): counts["partial"],
        ("rep3-test", "no-downstream-told"): counts["near_misses"],
    }
    off = {
        f"{g} {slip}": {"report": slips.get((g, slip)), "mix": v}
        for (g, slip), v in checks.items()
        if slips.get((g, slip)) != v
    }
    off |= {
        f"{q.question.grade_id} blank": {"report": q.blank, "mix": counts["empty"]}
        for q in built.questions
        if q.question.autograded and q.blank != counts["empty"]
    }
    if built.submissions != args.students:
        off["submissions"] = {"report": built.submissions, "mix": args.students}
    as_mixed = not off
    median = statistics.median(seconds)
    section = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "what": f"`servelab class report lesson25` (report.build + report.write: gradebook read through nbgrader's "
        f"API from PostgreSQL, {args.students} grader records, the page with plotly.js inline and the CSV), "
        f"median of {RUNS} runs; the class: 4 lesson25 samples graded by 2 parallel graders in the sandbox, "
        "copied to the class by servelab.grading.replicate",
        "students": args.students,
        "mix": counts,
        "seconds": [round(s, 2) for s in seconds],
        "seconds_median": round(median, 2),
        "target_seconds": TARGET_S,
        "meets_target": median < TARGET_S,
        "numbers_as_mixed": as_mixed,
        **({"not_as_mixed": off} if off else {}),
        "page_bytes": page_bytes,
        "setup_seconds": {
            "parallel_graders_4_submissions": round(grading_s, 1),
            "replicate_to_class": round(replicate_s, 1),
        },
        "machine": {
            "cpu": hardware.cpu_name(),
            "cores": hardware.cpu_cores(),
            "platform": platform.platform(),
            "load_average_at_start": load_before,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {
            "python": platform.python_version(),
            **{
                p: hardware.package_version(p, missing="not installed")
                for p in ("servelab", "nbgrader", "plotly", "jinja2", "psycopg2-binary", "sqlalchemy")
            },
            "postgresql": db.bin.parent.name,
        },
    }
    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    result["report"] = section  # the other sections (grading, hub, load) are bench/class.py's
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(section, indent=1))
    return 0 if as_mixed and median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
