"""How long `servelab review` takes to read a config, and to refuse one that is too big.

    python bench/review_inputs.py        ->   bench/results/review-inputs.json

Each case is forms.load() (reading and parsing the config, no review), timed over repeats
with its peak Python allocation (tracemalloc):

- every config in data/configs/public/ (the largest published form the reviewer reads);
- a 10 MB one-line command (which took 89 s and 514 MB before the limits: refused from its
  size, before its text is read);
- a 10 GB sparse file (refused from its size alone);
- a config just under the limits: 256 KB of script, lines up to 16,384 characters;
- 64 levels of brackets plus one, and 201 YAML documents.

Target: every refusal in under 0.1 s and 20 MB whatever the file's size; every public
config read in under 0.5 s.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

from servelab import hardware
from servelab.review import ReviewInputError, forms, limits

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / "data" / "configs" / "public"
OUT = REPO / "bench" / "results" / "review-inputs.json"


def timed(path: Path, repeats: int = 5, **kwargs) -> dict:
    seconds, outcome = [], ""
    tracemalloc.start()
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            forms.load(path, **kwargs)
            outcome = "read"
        except ReviewInputError as exc:
            outcome = "refused: " + str(exc).split(": ", 1)[-1][:100]
        seconds.append(time.perf_counter() - start)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "bytes": path.stat().st_size,
        "median_s": round(statistics.median(seconds), 5),
        "max_s": round(max(seconds), 5),
        "peak_mb": round(peak / 1e6, 2),
        "outcome": outcome,
    }


def main() -> None:
    load_before = [round(x, 2) for x in os.getloadavg()]
    results: dict = {"public": {}, "limits": {}}
    for path in sorted(PUBLIC.iterdir()):
        if path.name == "expected.yaml" or path.name.endswith(("-workload.yaml", "-hardware.json")):
            continue
        variables = {"GPU_COUNT": "2"} if path.name.startswith("cot-rec") else None
        select = {"ps-kv-aware-llama-3.1-8b.yaml": "llama1", "ps-multiple-models-mistral-7b.yaml": "mistral"}
        results["public"][path.name] = timed(path, variables=variables, select=select.get(path.name))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        big = d / "ten-mb-one-line.sh"
        big.write_text("vllm serve m --max-model-len " + "1" * 10_000_000 + "\n")
        sparse = d / "ten-gb-sparse.sh"
        with open(sparse, "wb") as f:
            f.truncate(10 * 1024**3)
        near = d / "just-under.sh"
        line = "# " + "x" * (limits.MAX_LINE - 2) + "\n"
        body = line * ((limits.MAX_BYTES - 200) // len(line))
        near.write_text("# deployment: {gpu: L4}\n" + body + "vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
        deep = d / "deep.yaml"
        deep.write_text("model: " + "[" * (limits.MAX_DEPTH + 1) + "]" * (limits.MAX_DEPTH + 1) + "\n")
        docs = d / "documents.yaml"
        docs.write_text("---\na: 1\n" * (limits.MAX_DOCUMENTS + 1))
        for path in (big, sparse, near, deep, docs):
            results["limits"][path.name] = timed(path)
    worst_public = max(r["max_s"] for r in results["public"].values())
    refusals = [r for r in results["limits"].values() if r["outcome"].startswith("refused")]
    results["targets"] = {
        "refusal_under_0.1_s": all(r["max_s"] < 0.1 for r in refusals),
        "refusal_under_20_mb": all(r["peak_mb"] < 20 for r in refusals),
        "public_read_under_0.5_s": worst_public < 0.5,
        "worst_public_s": worst_public,
    }
    results["machine"] = {
        "cpu": hardware.cpu_name(),
        "cores": hardware.cpu_cores(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": load_before,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    results["measured_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results["limits"], indent=1))
    print(json.dumps(results["targets"], indent=1))


if __name__ == "__main__":
    main()
