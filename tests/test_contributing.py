"""CONTRIBUTING.md's recipes, followed as written.

Each recipe test copies the part of the checkout the recipe touches into a temporary folder (the files git
tracks there, as they are in the working tree), does the recipe's steps to those files, and runs the check the
recipe names. Where a step is left out, the check must fail and name the file to edit. The unit tests below are
the checks themselves: every knob has its measurement, every file and target a recipe names exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from servelab import knobs

REPO = Path(__file__).resolve().parent.parent
CONTRIBUTING = REPO / "CONTRIBUTING.md"
KNOB_RESULT = REPO / "bench" / "results" / "knobs-cpu.json"
KNOB_RECORDS = REPO / "data" / knobs.RECORDED


def recipe(title: str) -> str:
    """The text of CONTRIBUTING.md's section `## title`."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"CONTRIBUTING.md has no section '## {title}'"
    return match.group(1)


def copy_checkout(folder: Path, *pathspecs: str) -> Path:
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *pathspecs],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = REPO / os.fsdecode(name)
        if source.is_file():  # a tracked file another change deletes is not copied
            (folder / source.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / source.relative_to(REPO))
    return folder


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in the copy, on the copy's servelab (src/ first on the path) and its data/."""
    env = {k: v for k, v in os.environ.items() if k not in ("SERVELAB_DATA", "PYTEST_ADDOPTS")}
    env.update(PYTHONPATH=str(folder / "src"), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# --- Add a model to the reviewer's catalogue ------------------------------------------------------------------

# A model the catalogue does not hold, its fields copied from its own config.json
NEW_MODEL = "HuggingFaceTB/SmolLM2-1.7B-Instruct"
NEW_ENTRY = {
    "source": f"https://huggingface.co/{NEW_MODEL}/blob/main/config.json",
    "aliases": ["SmolLM2-1.7B"],
    "config": {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "intermediate_size": 8192,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    },
}
NEW_CASE = "smollm2-1.7b-tp-4"
NEW_CONFIG = """\
    # Tensor parallelism for a 1.7B model, split 4 ways "because more GPUs is faster".
    #
    # The model and its KV cache fit one H100 many times over; nobody compared TP 4 with replicas.
    # Teaches: lesson 25's item 3: parallelism must answer a bottleneck someone measured.
    model: SmolLM2-1.7B
    dtype: bfloat16
    tensor-parallel-size: 4
    max-num-seqs: 32
    max-model-len: 8192
    gpu-memory-utilization: 0.9
    deployment:
      gpu: H100
      gpus-per-node: 4
      nodes: 1
"""
NEW_WORKLOAD = """\
    # Workload for smollm2-1.7b-tp-4.yaml: a meeting-notes summarizer.
    name: meeting-notes
    concurrency: {typical: 12, peak: 24}
    prompt-tokens: {mean: 3000, p99: 6000}
    output-tokens: {mean: 400, p99: 1000}
    slo:
      ttft-p99-ms: 2000
      tpot-p99-ms: 30
    measurements:
      - setting: {max-num-seqs: 32, concurrency: 24, tensor-parallel-size: 4}
        metric: ttft_ms_p99
        value: 640
        source: "load test, 24 users"
      - setting: {max-num-seqs: 32, concurrency: 24, tensor-parallel-size: 4}
        metric: tpot_ms_p99
        value: 11
        source: "load test, 24 users"
"""
NEW_VERDICTS = {
    "batching": "justified",
    "quantization": "justified",
    "parallelism": "unjustified",
    "speculative_decoding": "justified",
    "max_model_len": "justified",
    "gpu_memory_utilization": "justified",
}
KNOB_COLUMNS = [
    "batching",
    "quantization",
    "parallelism",
    "speculative_decoding",
    "prefix_caching",
    "max_model_len",
    "gpu_memory_utilization",
]


def test_add_a_model_to_the_reviewers_catalogue_as_the_recipe_says(tmp_path):
    steps = recipe("Add a model to the reviewer's catalogue")
    named = [
        "src/servelab/model_configs/catalogue.json",
        "data/configs/<case>.yaml",
        "data/configs/expected.yaml",
        "data/configs/README.md",
        "make test-unit",
        "tests/test_review_inputs.py",
        "tests/test_review.py",
    ]
    missing = [name for name in named if f"`{name}`" not in steps and name not in steps]
    assert not missing, f"CONTRIBUTING.md's recipe 'Add a model to the reviewer's catalogue' no longer names {missing}"
    copy = copy_checkout(
        tmp_path, "src", "data", "pyproject.toml", "tests/conftest.py", "tests/review_helpers.py", "tests/data/review"
    )
    for test in ("test_review_inputs.py", "test_review.py"):
        shutil.copy2(REPO / "tests" / test, copy / "tests" / test)

    # 1. the entry, keyed by the Hugging Face id
    catalogue = copy / "src" / "servelab" / "model_configs" / "catalogue.json"
    entries = json.loads(catalogue.read_text(encoding="utf-8"))
    entries["models"][NEW_MODEL] = NEW_ENTRY
    catalogue.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    # 2. a reviewed example: the pair, its verdicts in expected.yaml, its row in README.md's table
    configs = copy / "data" / "configs"
    (configs / f"{NEW_CASE}.yaml").write_text(textwrap.dedent(NEW_CONFIG), encoding="utf-8")
    (configs / f"{NEW_CASE}-workload.yaml").write_text(textwrap.dedent(NEW_WORKLOAD), encoding="utf-8")
    with (configs / "expected.yaml").open("a", encoding="utf-8") as expected:
        verdicts = "".join(f"    {knob}: {verdict}\n" for knob, verdict in NEW_VERDICTS.items())
        expected.write(f"\n{NEW_CASE}:\n  exit: 1\n  verdicts:\n{verdicts}")
    readme = configs / "README.md"
    before = readme.read_text(encoding="utf-8")
    cells = [NEW_VERDICTS.get(knob, "—") for knob in KNOB_COLUMNS]
    row = f"| {NEW_CASE} | TP 4 for a 1.7B that fits on one GPU | {' | '.join(cells)} | 1 |"
    last_row = [line for line in before.splitlines() if line.startswith("| fp8-70b-measured |")]
    assert last_row, "data/configs/README.md: the verdict table's last row (fp8-70b-measured) moved; update this test"
    readme.write_text(before.replace(last_row[0], f"{last_row[0]}\n{row}"), encoding="utf-8")

    # 3. the check the recipe names: the lane's tests of the catalogue and of the examples
    run = run_pytest(copy, "tests/test_review_inputs.py", "tests/test_review.py", "-m", "unit", "-rf")
    assert run.returncode == 0, f"the recipe, followed as written, fails its own check:\n{run.stdout[-4000:]}"
    # the new case was reviewed: with its README row gone, the lane fails and names the file to edit
    readme.write_text(before, encoding="utf-8")
    run = run_pytest(copy, "tests/test_review.py", "-m", "unit", "-k", "readme", "-rf")
    assert run.returncode == 1 and "data/configs/README.md" in run.stdout and NEW_CASE in run.stdout, run.stdout


# --- Add a published config to the reviewer's examples -----------------------------------------------------------


def test_add_a_published_config_as_the_recipe_says(tmp_path):
    steps = recipe("Add a published config to the reviewer's examples")
    named = [
        "data/configs/public/<case>.<ext>",
        "data/configs/public/<case>-workload.yaml",
        "data/configs/public/expected.yaml",
        "data/configs/README.md",
        "make test-unit",
        "tests/test_review_public.py",
    ]
    missing = [name for name in named if name not in steps]
    assert not missing, f"CONTRIBUTING.md's recipe 'Add a published config' no longer names {missing}"
    copy = copy_checkout(tmp_path, "src", "data", "pyproject.toml", "tests/conftest.py", "tests/review_helpers.py")
    shutil.copy2(REPO / "tests" / "test_review_public.py", copy / "tests" / "test_review_public.py")
    public = copy / "data" / "configs" / "public"
    # The published file is one the folder holds, kept under a second case name: its source comment is real.
    source, case = "ps-basic-llama-3.1-8b", "ps-basic-llama-3.1-8b-second-copy"
    # 1. the config as published, with its source, what it teaches and what is assumed
    shutil.copy2(public / f"{source}.yaml", public / f"{case}.yaml")
    # 2. the assumed workload
    shutil.copy2(public / f"{source}-workload.yaml", public / f"{case}-workload.yaml")
    # 3. the verdicts in expected.yaml and the README's row
    entry = dict(yaml.safe_load((public / "expected.yaml").read_text(encoding="utf-8"))[source], config=f"{case}.yaml")
    with (public / "expected.yaml").open("a", encoding="utf-8") as expected:
        expected.write("\n" + yaml.safe_dump({case: entry}, sort_keys=False))
    readme = copy / "data" / "configs" / "README.md"
    before = readme.read_text(encoding="utf-8")
    row = next(line for line in before.splitlines() if line.startswith(f"| {source} |"))
    readme.write_text(before.replace(row, f"{row}\n{row.replace(source, case, 1)}", 1), encoding="utf-8")
    # 4. the check the recipe names
    run = run_pytest(copy, "tests/test_review_public.py", "-m", "unit", "-rf")
    assert run.returncode == 0, f"the recipe, followed as written, fails its own check:\n{run.stdout[-4000:]}"
    assert f"{case}.yaml" in (public / "expected.yaml").read_text(encoding="utf-8")
    # without its README row, the lane fails and names the file to edit
    readme.write_text(before, encoding="utf-8")
    run = run_pytest(copy, "tests/test_review_public.py", "-m", "unit", "-k", "readme", "-rf")
    assert run.returncode == 1 and "data/configs/README.md" in run.stdout and case in run.stdout, run.stdout


# --- Add a knob to the knob lab ---------------------------------------------------------------------------------


def knob_measure_command(name: str) -> str:
    return (
        f".venv/bin/python bench/knobs.py --knobs {name} --no-first-point --keep-from /tmp/knobs-before.json "
        "--keep-records /tmp/knobs-before.jsonl"
    )


WHERE = "CONTRIBUTING.md, 'Add a knob to the knob lab', step 4"


@pytest.mark.unit
def test_every_knob_has_its_measurement():
    """A knob added to servelab.knobs.KNOBS has its settings measured (bench/results/knobs-cpu.json) and their
    records (data/measurements/knobs-cpu.jsonl), what the lab shows offline; a setting vLLM refused has its error
    recorded instead."""
    result = json.loads(KNOB_RESULT.read_text(encoding="utf-8"))["knobs"]
    records = {(r.get("knob"), r.get("knob_setting")) for r in map(json.loads, KNOB_RECORDS.read_text().splitlines())}
    for name, knob in knobs.KNOBS.items():
        measured = result.get(name, {}).get("settings", {})
        for setting in knob.setting_names:
            got = measured.get(setting)
            assert got, (
                f"knob {name!r}, setting {setting!r} has no measurement in bench/results/knobs-cpu.json: "
                f"measure it alone as {WHERE} says (`{knob_measure_command(name)}`), then `make notebooks`"
            )
            assert "error" in got or (name, setting) in records, (
                f"knob {name!r}, setting {setting!r} is measured but has no record in data/measurements/"
                f"knobs-cpu.jsonl: measure it again as {WHERE} says (`{knob_measure_command(name)}`)"
            )


def test_add_a_knob_as_the_recipe_says_and_the_lane_asks_for_its_measurement(tmp_path):
    steps = recipe("Add a knob to the knob lab")
    assert knob_measure_command("NAME") in steps, (
        f"{WHERE} should measure the new knob alone (`{knob_measure_command('NAME')}`), not every knob again"
    )
    copy = copy_checkout(tmp_path, "src", "data", "bench/results/knobs-cpu.json", "pyproject.toml", "tests/conftest.py")
    shutil.copy2(Path(__file__), copy / "tests" / "test_contributing.py")
    # 1. a Knob in KNOBS: a setting changes the server's arguments, a workload from workloads(), its Load
    catalogue = copy / "src" / "servelab" / "knobs" / "catalogue.py"
    text = catalogue.read_text(encoding="utf-8")
    end = "\n    )\n}\n"
    assert text.count(end) >= 1, "src/servelab/knobs/catalogue.py: KNOBS no longer ends as this test expects"
    knob = """
        Knob(
            "chunked_prefill",
            "Chunked prefill: a 64-token step budget against the default",
            {"default budget": {}, "max_num_batched_tokens=64": {"--max-num-batched-tokens": "64"}},
            "chat",
            Load(num_prompts=20, output_len=16, max_concurrency=20),
            "ttft_ms_p99",
            500.0,
        ),"""
    catalogue.write_text(text.replace(end, knob + end, 1), encoding="utf-8")
    # 4 not yet run: the lane names the knob and the command that measures it alone
    run = run_pytest(copy, "tests/test_contributing.py", "-m", "unit", "-k", "every_knob_has_its_measurement")
    assert run.returncode == 1, run.stdout[-3000:]
    assert knob_measure_command("chunked_prefill") in run.stdout, run.stdout[-3000:]


# --- What every recipe names --------------------------------------------------------------------------------------


@pytest.mark.unit
def test_every_file_and_make_target_the_recipes_name_exists():
    text = CONTRIBUTING.read_text(encoding="utf-8")
    paths = {p for p in re.findall(r"`((?:src|data|grading|bench|tests|lessons|labs|solutions)/[^`<>* ]+)`", text)}
    assert len(paths) >= 10, paths
    missing = sorted(p for p in paths if not (REPO / p.split(" ")[0]).exists())
    assert not missing, f"CONTRIBUTING.md names files that are not in the checkout: {missing}"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in set(re.findall(r"`make ([a-z-]+)`", text)):
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"CONTRIBUTING.md names `make {target}`: no such target"
