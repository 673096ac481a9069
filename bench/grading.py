"""Autograde throughput: the grading pipeline on 50 submissions of Lesson 25.

    python bench/grading.py [--n 50]   ->   bench/results/grading.json

The submissions cycle through the samples in grading/submissions/lesson25 that
finish on their own (perfect, partial, empty, and the hostile ones except the
infinite loop, which costs one cell timeout by design). Each is graded the way
`python -m servelab.grading.pipeline` grades: its own nbgrader autograde
process, the notebook run in the bubblewrap sandbox, the answers scored in
nbgrader's process, then feedback and export for the class.

The sandbox's own cost: a fifth as many submissions graded again with
--trusted (the same runner and kernel, no bubblewrap), and the difference in
the notebook's run time per submission.
Target: at most 5 s per submission on the 2-core CI machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import hardware
from servelab.grading import course, pipeline, samples, sandbox

TARGET_S_PER_SUBMISSION = 5.0
MIX = ["perfect", "partial", "empty", "edited_test", "deleted_cells", "output_flood", "read_key", "patch_checker"]
RESULT = Path(__file__).resolve().parent / "results" / "grading.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50, help="submissions to grade")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)

    source = samples.SUBMISSIONS / "lesson25"

    def grade(n: int, trusted: bool):
        with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
            tmp = Path(tmp)
            subs = tmp / "submissions" / "lesson25"
            subs.mkdir(parents=True)
            for i in range(n):
                kind = MIX[i % len(MIX)]
                shutil.copy(source / f"{kind}.ipynb", subs / f"s{i:03d}_{kind}.ipynb")
            start = time.perf_counter()
            graded = pipeline.run(
                tmp / "submissions",
                tmp / "course",
                tmp / "out",
                trusted_submissions=trusted,
                assignments=[course.get("lesson25")],
                log=lambda *a: None,
            )
            return graded, time.perf_counter() - start

    results, total = grade(args.n, trusted=False)
    unsandboxed, _ = grade(max(args.n // 5, len(MIX)), trusted=True)
    run_sandboxed = statistics.mean(g.run_seconds for g in results)
    run_trusted = statistics.mean(g.run_seconds for g in unsandboxed)

    per = [g.seconds for g in results]
    expected = json.loads(samples.EXPECTED.read_text())["lesson25"]
    wrong = [g.student for g in results + unsandboxed if abs(g.score - expected[g.student.split("_", 1)[1]]) > 1e-6]
    report = {
        "benchmark": "autograde throughput, Lesson 25",
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "submissions": len(results),
        "mix": MIX,
        "seconds_total": round(total, 1),
        "seconds_per_submission": round(total / len(results), 2),
        "autograde_seconds_mean": round(statistics.mean(per), 2),
        "autograde_seconds_p50": round(statistics.median(per), 2),
        "autograde_seconds_max": round(max(per), 2),
        "class_steps_seconds": round(total - sum(per), 1),  # generate_assignment, zip_collect, feedback, export
        "run_in_sandbox_seconds_mean": round(run_sandboxed, 2),  # of autograde: bwrap, runner, kernel, cells
        "run_without_sandbox_seconds_mean": round(
            run_trusted, 2
        ),  # the same with --trusted, on len(mix) or n/5 submissions
        "sandbox_cost_seconds_per_submission": round(run_sandboxed - run_trusted, 2),
        "trusted_submissions_compared": len(unsandboxed),
        "target_seconds_per_submission": TARGET_S_PER_SUBMISSION,
        "meets_target": total / len(results) < TARGET_S_PER_SUBMISSION,
        "all_scores_as_expected": not wrong,
        "statuses": {s: sum(g.status == s for g in results) for s in {g.status for g in results}},
        "machine": {
            "cpu": hardware.cpu_name(),
            "cores": hardware.cpu_cores(),
            "platform": platform.platform(),
        },
        "versions": {
            "python": platform.python_version(),
            **{
                p: hardware.package_version(p, missing="not installed")
                for p in ("servelab", "nbgrader", "nbconvert", "nbclient", "ipykernel", "jupyter_client")
            },
        },
        "settings": {
            "cell_timeout_s": sandbox.CELL_TIMEOUT_S,
            "submission_timeout_s": sandbox.SUBMISSION_TIMEOUT_S,
            "sandbox": sandbox.bwrap_version(missing="bwrap not found"),
            "one_process_per_submission": True,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps(
            {
                k: report[k]
                for k in (
                    "submissions",
                    "seconds_total",
                    "seconds_per_submission",
                    "sandbox_cost_seconds_per_submission",
                    "meets_target",
                    "all_scores_as_expected",
                )
            }
        )
    )
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
