"""The lesson, the simulator and `servelab review` tell the same story.

Every example the lesson grades or cites is run through the `servelab review`
command line, and its verdict is compared with the lesson's key; the numbers
the lesson's "check the claim" boxes quote are recomputed from the simulator.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from servelab import hardware, modelspec, simulate
from servelab.grading import course, samples
from servelab.grading import trusted as _trusted

pytestmark = pytest.mark.unit

KEYS = _trusted.load_key_module("lesson25")  # grading/keys/lesson25.py, instructor-only

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "data" / "configs"
STUDENT = nbformat.read(course.get("lesson25").student, as_version=4)
# The lesson's words, with the "> " of the claim boxes taken off so wrapped sentences read whole.
TEXT = "\n".join(" ".join(re.sub(r"(?m)^> ?", "", c.source).split()) for c in STUDENT.cells)


def review_cli(config: Path, workload: Path) -> dict:
    """`servelab review CONFIG --workload WORKLOAD --json`, as a learner runs it."""
    script = Path(sys.executable).parent / "servelab"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "servelab.cli"]
    result = subprocess.run(
        [*command, "review", str(config), "--workload", str(workload), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def example(case: str) -> dict:
    return review_cli(CONFIGS / f"{case}.yaml", CONFIGS / f"{case}-workload.yaml")


def finding(report: dict, knob: str) -> dict:
    return next(f for f in report["findings"] if f["knob"] == knob)


@pytest.mark.unit(False)  # runs the servelab command
def test_practice_1_key_is_the_reviewers_verdict():
    batching = finding(example("practice-1-batch-256"), "batching")
    key = KEYS.PRACTICE1_KEY["fields"]
    assert key["verdict"]["expect"] == batching["verdict"] == "unjustified"
    # The key says the cap does not explain the miss; so does the reviewer, and neither prescribes 32.
    assert key["cap_explains_miss"]["expect"] is False and "not the cause" in batching["reason"]
    assert "request_queue_time_seconds" in batching["fix"] and "request_queue_time_seconds" in TEXT
    assert "set max-num-seqs to" not in batching["fix"]


@pytest.mark.unit(False)  # runs the servelab command
def test_practice_4_key_is_the_reviewers_verdict():
    report = example("practice-4-tp8-on-4-gpus")
    parallelism = finding(report, "parallelism")
    key = KEYS.PRACTICE4_KEY["fields"]
    assert key["verdict"]["expect"] == parallelism["verdict"] == "wrong"
    assert "will not start" in parallelism["reason"] and "does not start" in key["verdict"]["feedback"]
    assert key["max_tensor_parallel"]["expect"] == report["facts"]["gpus_available"] == 4


@pytest.mark.unit(False)  # runs the servelab command
def test_rep1_model_answer_is_the_reviewers_audit():
    scope: dict = {"h200": hardware.get("H200")}  # the lesson's presets cell defines it
    exec(samples.solutions(nbformat.read(course.get("lesson25").source, as_version=4))["rep1-answer"], scope)
    report = example(KEYS.AUDIT_CASE)
    assert {knob: entry["verdict"] for knob, entry in scope["audit"].items()} == report["verdicts"]


def test_rep1_shows_the_settings_without_the_header_that_explains_the_case():
    show = next(c for c in STUDENT.cells if c.get("id") == "rep1-show")
    assert 'startswith("#")' in show.source
    header = [line for line in (CONFIGS / f"{KEYS.AUDIT_CASE}.yaml").read_text().splitlines() if line.startswith("#")]
    assert not any("TP 2" in line or "does not fit" in line for line in header)


@pytest.mark.unit(False)  # runs the servelab command
def test_cite_what_you_measured_example_is_reviewed_as_the_lesson_says():
    off = finding(example("lesson-3200-vs-3400"), "speculative_decoding")
    on = finding(example("lesson-3200-vs-3400-spec-on"), "speculative_decoding")
    assert off["verdict"] == "justified" and on["verdict"] == "wrong"
    # Little's law: 256 in flight at 80 requests/s is 3.2 s in the system; the repaired citation uses TPOT.
    assert "256 / 80 = 3.2 s" in TEXT and "mean TPOT 75 ms vs 80 ms" in TEXT
    assert round(256 / 3400 * 1000) == 75 and round(256 / 3200 * 1000) == 80


# --- speculation: where it starts to cost, where it stops paying ---------------------------

LLAMA_8B, H200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
SIM = simulate.default_simulator(LLAMA_8B, H200)


def test_the_lessons_speculation_numbers_are_the_simulators():
    ridge_batch, break_even = SIM.ridge_batch(4), SIM.break_even_batch(4, 0.7)
    crossover = SIM.crossover_batch(4, "ngram")
    assert round(ridge_batch) == 41 and round(break_even) == 114
    for quoted in ("is 41", "about **114**", f"near **{crossover:.0f}**"):
        assert quoted in TEXT, quoted
    # The break-even sits between the ridge batch and the simulator's crossover, which adds overheads.
    assert ridge_batch < break_even < crossover


def test_tpot_moves_with_throughput_as_the_lesson_says():
    on, off = SIM.step(256, 4, "ngram"), SIM.step(256)
    quoted = f"{on.tpot_ms:.1f} ms per token with speculation, {off.tpot_ms:.1f} ms without"
    assert quoted in TEXT
    assert quoted in KEYS.PRACTICE5_KEY["options"]["b"]
    assert on.output_tok_s < off.output_tok_s  # both worse: throughput and TPOT move together


def _spec_config(tmp_path: Path, batch: int) -> dict:
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": batch,
        "speculative-config": {
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_max": 4,
            "prompt_lookup_min": 2,
        },
        "deployment": {"gpu": "H200", "gpus-per-node": 1},
    }
    workload = {
        "concurrency": {"typical": batch, "peak": batch},
        "prompt-tokens": {"mean": 700, "p99": 2000},
        "output-tokens": {"mean": 250, "p99": 800},
        "slo": {"tpot-p99-ms": 60},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump(workload))
    return finding(review_cli(tmp_path / "config.yaml", tmp_path / "workload.yaml"), "speculative_decoding")


@pytest.mark.unit(False)  # runs the servelab command
@pytest.mark.parametrize(
    "batch, verdict",
    [
        (32, "unjustified"),  # memory-bound: may well help, unmeasured
        (64, "unjustified"),  # past the ridge batch (41), below break-even (114): still pays in the simulator
        (100, "unjustified"),
        (128, "unjustified"),  # near break-even (114 on the roofline, 121 in the simulator): measure
        (160, "wrong"),  # well past break-even
        (256, "wrong"),
    ],
)
def test_reviewer_speculation_rule_follows_the_break_even(tmp_path, batch, verdict):
    spec = _spec_config(tmp_path, batch)
    assert spec["verdict"] == verdict, spec["reason"]
    assert "above batch 41" in spec["evidence"] and "near batch 114" in spec["evidence"]
    # and the simulator agrees on the side of 1.0 wherever the reviewer names one
    if verdict == "wrong":
        assert SIM.speedup(batch, 4, "ngram") < 1.0
    if batch <= SIM.break_even_batch(4, 0.7):
        assert SIM.speedup(batch, 4, "ngram") > 1.0
    if SIM.ridge_batch(4) < batch <= SIM.break_even_batch(4, 0.7):
        assert "can still pay" in spec["reason"]


def test_simulator_docstring_states_the_break_even_not_the_ridge():
    doc = " ".join(simulate.__doc__.split())
    assert "speculation loses." not in doc
    crossover = SIM.crossover_batch(4, "ngram")
    assert "ridge tokens per step x E / (k + 1)" in doc and "about 114" in doc and f"about {crossover:.0f}" in doc


def test_every_claim_box_is_marked_and_cites_evidence():
    boxes = [c.source for c in STUDENT.cells if c.source.startswith("<details><summary><b>Check the claim:</b>")]
    assert len(boxes) >= 9
    assert all(box.rstrip().endswith("</details>") for box in boxes), "every correction is a collapsed reveal"
    for box in boxes:
        cites = (
            "simulator" in box
            or "servelab review" in box
            or "https://docs.vllm.ai" in box
            or "vLLM 0.32" in box
            or "Little's law" in box
        )
        assert cites, box[:120]
    assert re.search(r"docs\.vllm\.ai/en/latest/features/speculative_decoding/", TEXT)
    assert "spec_decode.html" not in TEXT and "v0.8.3" not in TEXT, "stale vLLM links"
