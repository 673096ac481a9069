"""servelab review: the example configs, the command line, and bad input.

Every example pair in data/configs/ is reviewed and compared with
data/configs/expected.yaml; the command line runs as a subprocess, the way CI
runs it, so exit statuses and error messages are the real ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from review_helpers import assert_mentions

from servelab import review
from servelab.review import Finding, Report, ReviewInputError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "data" / "configs"
EXPECTED = yaml.safe_load((CONFIGS / "expected.yaml").read_text())
CASES = sorted(EXPECTED)


def config_path(case: str) -> Path:
    return CONFIGS / f"{case}.yaml"


def workload_path(case: str) -> Path:
    return CONFIGS / f"{case}-workload.yaml"


def servelab_command() -> list[str]:
    script = Path(sys.executable).parent / "servelab"
    return [str(script)] if script.exists() else [sys.executable, "-m", "servelab.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [*servelab_command(), "review", *map(str, args)], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )


# --- the examples ------------------------------------------------------------------


def test_every_example_pair_has_expectations():
    configs = {p.stem for p in CONFIGS.glob("*.yaml")} - {"expected"}
    cases = {c for c in configs if not c.endswith("-workload")}
    assert cases == set(EXPECTED), "expected.yaml and the example configs disagree"
    for case in cases:
        assert workload_path(case).exists(), f"{case} has no workload file"
    assert len(cases) >= 12


@pytest.mark.parametrize("case", CASES)
def test_example_has_a_header_saying_what_it_teaches(case):
    lines = config_path(case).read_text().splitlines()
    header = [line for line in lines[:12] if line.startswith("#")]
    assert len(header) >= 3, f"{case}.yaml should open with a comment saying what it teaches"
    assert any("Teaches" in line for line in header), f"{case}.yaml: say what the case teaches"


@pytest.mark.parametrize("case", CASES)
def test_example_findings(case):
    expected = EXPECTED[case]
    report = review.review_files(config_path(case), workload_path(case))
    assert report.verdicts() == expected["verdicts"]
    assert report.exit_code == expected["exit"]
    assert_mentions(report, expected, case)
    for finding in report.findings:
        assert finding.reason.endswith("."), f"{case}/{finding.knob}: the reason is one sentence"
        assert finding.evidence and finding.fix


def readme_tables() -> dict[str, dict[str, str]]:
    """Every verdict table in data/configs/README.md (those headed "| case"), merged by case."""
    table: dict[str, dict[str, str]] = {}
    columns: list[str] = []
    for line in (CONFIGS / "README.md").read_text().splitlines():
        if line.startswith("| case"):
            columns = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("| ") and columns:
            cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
            table.setdefault(cells["case"], {}).update(cells)
        elif not line.startswith("|"):
            columns = []
    return table


def test_readme_lists_the_same_verdicts():
    table = readme_tables()
    where = "data/configs/README.md's verdict table (a row per case) and data/configs/expected.yaml"
    assert set(table) == set(EXPECTED), f"{where} list different cases: {sorted(set(table) ^ set(EXPECTED))}"
    for case, expected in EXPECTED.items():
        listed = {knob: table[case][knob] for knob in review.KNOBS if table[case].get(knob, "—") != "—"}
        assert listed == expected["verdicts"], f"{case}: {where} give different verdicts"
        assert int(table[case]["exit"]) == expected["exit"], f"{case}: {where} give different exit statuses"


def test_practice_1_cap_that_never_binds_is_unjustified_not_the_cause():
    report = review.review_files(config_path("practice-1-batch-256"), workload_path("practice-1-batch-256"))
    batching = report.finding("batching")
    assert batching.verdict == "unjustified"
    assert "never binds" in batching.reason and "breaks the 500 ms SLO" in batching.reason
    assert "queue time and prefill time" in batching.fix and "set max-num-seqs" not in batching.fix
    assert "line 12" in batching.setting  # where the knob is set


def _batching(max_num_seqs: int, peak: int, measured_ttft: float | None) -> review.Finding:
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": max_num_seqs,
        "deployment": {"gpu": "H100", "gpus-per-node": 1},
    }
    workload = {
        "concurrency": {"typical": peak, "peak": peak},
        "prompt-tokens": {"mean": 700, "p99": 2500},
        "output-tokens": {"mean": 250, "p99": 900},
        "slo": {"ttft-p99-ms": 500},
    }
    if measured_ttft is not None:
        workload["measurements"] = [
            {
                "setting": {"max-num-seqs": max_num_seqs, "concurrency": peak},
                "metric": "ttft_ms_p99",
                "value": measured_ttft,
                "source": "load test",
            }
        ]
    return review.review(config, workload).finding("batching")


@pytest.mark.parametrize("max_num_seqs", [256, 1024])  # vLLM's defaults: 256, and 1,024 for vllm serve on an H100
def test_vllm_default_cap_is_never_wrong_for_an_interactive_load(max_num_seqs):
    for ttft in (None, 300, 1200):
        finding = _batching(max_num_seqs, peak=20, measured_ttft=ttft)
        assert finding.verdict != "wrong", (ttft, finding.reason)
    assert _batching(max_num_seqs, peak=20, measured_ttft=300).verdict == "justified"


def test_a_cap_below_the_load_that_misses_the_slo_is_wrong():
    finding = _batching(16, peak=64, measured_ttft=1200)
    assert finding.verdict == "wrong" and "wait in the queue" in finding.reason


def test_speculation_crossover_comes_from_the_hardware_preset():
    from servelab import hardware

    report = review.review_files(
        config_path("spec-decode-latency-matters"), workload_path("spec-decode-latency-matters")
    )
    ridge = hardware.get("H100").ridge_tokens_per_step(2)
    assert report.facts["ridge_tokens_per_step"] == pytest.approx(ridge, abs=0.1)
    assert f"above batch {int(ridge // 5)}" in report.finding("speculative_decoding").evidence


# --- the command line ---------------------------------------------------------------


@pytest.mark.unit(False)  # runs the servelab command
def test_cli_exit_status_clean_and_findings():
    clean = run_cli(config_path("well-justified-chat"), "--workload", workload_path("well-justified-chat"))
    assert clean.returncode == 0, clean.stderr
    findings = run_cli(config_path("practice-1-batch-256"), "--workload", workload_path("practice-1-batch-256"))
    assert findings.returncode == 1, findings.stderr


@pytest.mark.unit(False)  # runs the servelab command
def test_cli_table_names_each_knob_and_verdict():
    result = run_cli(config_path("rag-prefix-caching-off"), "--workload", workload_path("rag-prefix-caching-off"))
    assert result.returncode == 1
    for knob in EXPECTED["rag-prefix-caching-off"]["verdicts"]:
        assert knob in result.stdout, f"{knob} missing from the table"
    assert "wrong" in result.stdout and "justified" in result.stdout
    assert "exit status 1" in result.stdout


@pytest.mark.unit(False)  # runs the servelab command
def test_cli_json_parses_and_matches_the_api():
    case = "lesson-3200-vs-3400-spec-on"
    result = run_cli(config_path(case), "--workload", workload_path(case), "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["verdicts"] == EXPECTED[case]["verdicts"]
    assert data["exit_code"] == 1
    assert {f["knob"] for f in data["findings"]} == set(EXPECTED[case]["verdicts"])
    for finding in data["findings"]:
        assert set(finding) >= {"knob", "verdict", "reason", "evidence", "fix"}
    assert data["facts"]["gpus_used"] == 4


@pytest.mark.unit(False)  # runs the servelab command
def test_cli_without_workload_is_a_usage_error():
    result = run_cli(config_path("well-justified-chat"))
    assert result.returncode == 2
    assert "--workload" in result.stderr


# --- bad input: one clear message, file and line, no traceback ----------------------


def _edited(tmp_path: Path, case: str, old: str, new: str, workload: bool = False) -> Path:
    source = workload_path(case) if workload else config_path(case)
    text = source.read_text()
    assert old in text, f"{old!r} is not in {source.name}"
    out = tmp_path / source.name
    out.write_text(text.replace(old, new, 1))
    return out


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


BAD_CONFIG = [
    # (name, old text, new text, the line holding this text, phrases the message must contain)
    (
        "unknown key",
        "max-num-seqs: 256",
        "max-num-seq: 256",
        "max-num-seq:",
        ["unknown key", "did you mean --max-num-seqs"],
    ),
    (
        "wrong type",
        "tensor-parallel-size: 1",
        "tensor-parallel-size: four",
        "tensor-parallel-size",
        ["tensor-parallel-size", "whole number", "'four'"],
    ),
    (
        "out of range",
        "gpu-memory-utilization: 0.9",
        "gpu-memory-utilization: 1.5",
        "gpu-memory-utilization",
        ["gpu-memory-utilization", "at most 1"],
    ),
    ("yaml syntax error", "max-num-seqs: 256", "max-num-seqs: [256", "max-model-len", ["YAML syntax error"]),
    (
        "unknown gpu",
        "gpu: H100",
        "gpu: V100",
        "gpu: V100",
        [
            "unknown GPU type 'V100'",
            "H200, H100, A100, A100-40GB, H100-PCIE, H100-NVL, A800, MI325X, T4, L40S, L4, H20, B200, MI300X",
        ],
    ),
    (
        "unknown model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "tiiuae/falcon-40b-instruct",
        "model:",
        ["not in servelab's model catalogue", "model-config"],
    ),
    (
        "missing model config",
        "  nodes: 1",
        "  nodes: 1\n  model-config: nowhere/config.json",
        "model-config",
        ["no such file", "config.json"],
    ),
    (
        "duplicate key",
        "max-model-len: 8192",
        "max-model-len: 8192\nmax-model-len: 4096",
        "max-model-len: 4096",
        ["duplicate key"],
    ),
    (
        "unknown quantization",
        "dtype: bfloat16",
        "dtype: bfloat16\nquantization: int3",
        "quantization",
        ["unknown quantization 'int3'"],
    ),
]


@pytest.mark.unit(False)  # runs the servelab command
@pytest.mark.parametrize("name,old,new,needle,phrases", BAD_CONFIG, ids=[b[0] for b in BAD_CONFIG])
def test_bad_config_gives_one_clear_message(tmp_path, name, old, new, needle, phrases):
    path = _edited(tmp_path, "practice-1-batch-256", old, new)
    result = run_cli(path, "--workload", workload_path("practice-1-batch-256"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"{path}:{_line_of(path, needle)}:" in message, message
    for phrase in phrases:
        assert phrase in message, message


BAD_WORKLOAD = [
    ("unknown key", "concurrency:", "concurency:", "concurency:", ["did you mean 'concurrency'"]),
    ("wrong type", "ttft-p99-ms: 500", "ttft-p99-ms: fast", "ttft-p99-ms", ["slo.ttft-p99-ms", "must be a number"]),
    ("unknown metric", "metric: ttft_ms_p99", "metric: ttft_p99", "metric:", ["did you mean 'ttft_ms_p99'"]),
    (
        "unknown setting",
        "setting: {max-num-seqs: 256",
        "setting: {max-num-seq: 256",
        "setting:",
        ["measurements[0].setting.max-num-seq", "did you mean 'max-num-seqs'"],
    ),
    (
        "missing source",
        '    source: "load test, 20 simulated users for 30 min, vllm bench serve"\n',
        "",
        "- setting",
        ["'source' is required"],
    ),
    ("missing records", "slo:", "records: nowhere.jsonl\nslo:", "records:", ["no such file", "nowhere.jsonl"]),
    (
        "typical above peak",
        "concurrency: {typical: 12, peak: 20}",
        "concurrency: {typical: 30, peak: 20}",
        "concurrency",
        ["typical (30) is above peak (20)"],
    ),
]


@pytest.mark.unit(False)  # runs the servelab command
@pytest.mark.parametrize("name,old,new,needle,phrases", BAD_WORKLOAD, ids=[b[0] for b in BAD_WORKLOAD])
def test_bad_workload_gives_one_clear_message(tmp_path, name, old, new, needle, phrases):
    path = _edited(tmp_path, "practice-1-batch-256", old, new, workload=True)
    result = run_cli(config_path("practice-1-batch-256"), "--workload", path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"{path}:{_line_of(path, needle)}:" in message, message
    for phrase in phrases:
        assert phrase in message, message


@pytest.mark.unit(False)  # runs the servelab command
def test_missing_file_names_the_file(tmp_path):
    missing = tmp_path / "no-such-config.yaml"
    result = run_cli(missing, "--workload", workload_path("practice-1-batch-256"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{missing}: no such file" in result.stderr


@pytest.mark.unit(False)  # runs the servelab command
def test_swapped_files_say_so():
    result = run_cli(workload_path("practice-1-batch-256"), "--workload", config_path("practice-1-batch-256"))
    assert result.returncode == 2
    assert "looks like a workload file" in result.stderr


@pytest.mark.unit(False)  # runs the servelab command
def test_damaged_record_names_its_line(tmp_path):
    records = tmp_path / "records.jsonl"
    lines = (CONFIGS / "lab-cpu" / "records.jsonl").read_text().splitlines()
    records.write_text("\n".join([lines[0], '{"method": "none", "batch_size": 8', *lines[1:]]) + "\n")
    workload = tmp_path / "workload.yaml"
    workload.write_text(
        workload_path("smollm2-cpu-lab-records")
        .read_text()
        .replace("records: lab-cpu/records.jsonl", f"records: {records}")
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        config_path("smollm2-cpu-lab-records")
        .read_text()
        .replace("hardware-file: lab-cpu/hardware.json", f"hardware-file: {CONFIGS / 'lab-cpu' / 'hardware.json'}")
    )
    result = run_cli(config, "--workload", workload)
    assert result.returncode == 2
    assert f"{records}:2: not a servelab Measurement record" in result.stderr


# --- the Python API ------------------------------------------------------------------


def base_config(**changes) -> dict:
    config = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max-num-seqs": 32,
        "max-model-len": 8192,
        "deployment": {"gpu": "H100", "gpus-per-node": 1, "nodes": 1},
    }
    config.update(changes)
    return config


def base_workload(**changes) -> dict:
    workload = {
        "task": "qa",
        "concurrency": {"typical": 16, "peak": 24},
        "prompt-tokens": {"mean": 1000, "p99": 3000},
        "output-tokens": {"mean": 200, "p99": 800},
        "slo": {"ttft-p99-ms": 800, "tpot-p99-ms": 50},
        "measurements": [
            {
                "setting": {"max-num-seqs": 32, "concurrency": 24},
                "metric": "ttft_ms_p99",
                "value": 400,
                "source": "load test",
            },
        ],
    }
    workload.update(changes)
    return workload


def verdict(report: Report, knob: str) -> str:
    return report.finding(knob).verdict


def test_review_from_dicts_matches_the_api():
    report = review.review(base_config(), base_workload(), config_name="team.yaml")
    assert isinstance(report, Report)
    assert all(isinstance(f, Finding) for f in report.findings)
    assert report.verdicts() == {
        k: "justified"
        for k in (
            "batching",
            "quantization",
            "parallelism",
            "speculative_decoding",
            "max_model_len",
            "gpu_memory_utilization",
        )
    }
    assert report.exit_code == 0
    json.dumps(report.to_dict())
    assert report.to_dict()["config"] == "team.yaml"


def test_finding_is_frozen_and_checked():
    finding = Finding("batching", "wrong", "r.", "e", "f")
    with pytest.raises(AttributeError):
        finding.verdict = "justified"
    with pytest.raises(ValueError):
        Finding("batch", "wrong", "r.", "e", "f")
    with pytest.raises(ValueError):
        Finding("batching", "bad", "r.", "e", "f")


def test_html_table_escapes_and_colours():
    workload = base_workload()
    workload["measurements"][0]["source"] = "<script>alert(1)</script>"
    html = review.review(base_config(), workload)._repr_html_()
    assert "<table>" in html and "<script>" not in html and "&lt;script&gt;" in html
    for knob in ("batching", "parallelism", "gpu_memory_utilization"):
        assert f"<code>{knob}</code>" in html


def test_plain_text_report_lists_every_finding(tmp_path):
    # a checkout deep in the file system: the paths in the headline wrap, the counts must not
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 6))
    deep.mkdir(parents=True)
    config, workload = deep / "config.yaml", deep / "workload.yaml"
    config.write_text(config_path("70b-upgrade-h200").read_text())
    workload.write_text(workload_path("70b-upgrade-h200").read_text())
    report = review.review_files(config, workload)
    text = str(report)
    assert text.splitlines()[0].startswith("2 wrong, 1 unjustified, 3 justified: review of ")
    for finding in report.findings:
        assert finding.knob in text
    assert "\x1b[" not in text  # no colour codes in plain text


def test_bad_dict_input_names_the_key():
    with pytest.raises(ReviewInputError) as error:
        review.review(base_config(**{"max-num-seqs": "lots"}), base_workload())
    assert isinstance(error.value, ValueError)
    assert str(error.value).startswith("config: max-num-seqs: must be a whole number")


def test_underscore_keys_and_json_speculative_config_are_accepted():
    config = base_config(max_num_seqs=32, speculative_config='{"method": "ngram", "num_speculative_tokens": 2}')
    del config["max-num-seqs"]
    report = review.review(config, base_workload())
    assert "ngram, k=2" in report.finding("speculative_decoding").setting


def test_quantization_wrong_when_the_measured_drop_exceeds_the_tolerance():
    workload = base_workload(slo={"ttft-p99-ms": 800, "max-accuracy-drop": 1.0})
    workload["measurements"] += [
        {
            "setting": {"quantization": "none", "task": "qa", "batch": 32},
            "metric": "accuracy",
            "value": 80.0,
            "source": "eval",
        },
        {
            "setting": {"quantization": "awq", "task": "qa", "batch": 32},
            "metric": "accuracy",
            "value": 76.5,
            "source": "eval",
        },
    ]
    report = review.review(base_config(quantization="awq"), workload)
    finding = report.finding("quantization")
    assert finding.verdict == "wrong"
    assert "3.5 points" in finding.reason


def test_quantization_measured_at_another_batch_is_set_aside():
    workload = base_workload()
    workload["measurements"].append(
        {
            "setting": {"quantization": "gptq", "task": "qa", "batch": 1},
            "metric": "accuracy_drop",
            "value": 0.2,
            "source": "eval at batch 1",
        }
    )
    finding = review.review(base_config(quantization="gptq"), workload).finding("quantization")
    assert finding.verdict == "unjustified"
    assert "measured at batch 1, served at 32" in finding.evidence


def test_quantization_read_from_the_model_id():
    report = review.review(base_config(model="hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"), base_workload())
    finding = report.finding("quantization")
    assert finding.verdict == "unjustified"
    assert "from the model id" in finding.setting
    assert report.facts["weight_dtype"] == "int4"


def test_measurement_on_another_gpu_does_not_count():
    workload = base_workload()
    workload["measurements"][0]["setting"]["gpu"] = "A100"
    finding = review.review(base_config(), workload).finding("batching")
    assert finding.verdict == "unjustified"
    assert "measured on A100, not H100" in finding.evidence


def test_speculation_memory_bound_but_unmeasured_is_unjustified():
    config = base_config(**{"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}})
    finding = review.review(config, base_workload()).finding("speculative_decoding")
    assert finding.verdict == "unjustified"
    assert "memory-bound at batch 24" in finding.reason


def test_adaptive_schedule_keeps_every_step_under_the_ridge():
    ridge = 147.6
    schedule = review.adaptive_schedule(4, ridge, 256)
    assert schedule[0] == [1, 29, 4] and schedule[-1] == [74, 256, 0]  # k=1 fits up to 147.6 // 2 = 73
    covered = []
    for low, high, k in schedule:
        covered += range(low, high + 1)
        if k:
            assert high * (k + 1) <= ridge
    assert covered == list(range(1, 257))


def test_schedule_sets_k_per_batch():
    config = base_config(
        **{
            "max-num-seqs": 128,
            "speculative-config": {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "num_speculative_tokens_per_batch_size": [[1, 20, 4], [21, 128, 0]],
            },
        }
    )
    workload = base_workload(concurrency={"typical": 8, "peak": 100})
    report = review.review(config, workload)
    finding = report.finding("speculative_decoding")
    assert "100 x (0+1) = 100 tokens" in finding.evidence
    assert finding.verdict == "unjustified" and "k to 0" in finding.reason


def test_tensor_parallel_size_must_divide_the_heads():
    config = base_config(**{"tensor-parallel-size": 3, "deployment": {"gpu": "H100", "gpus-per-node": 4}})
    finding = review.review(config, base_workload()).finding("parallelism")
    assert finding.verdict == "wrong" and "32 attention heads" in finding.reason


def test_max_model_len_below_the_longest_request_is_wrong():
    finding = review.review(base_config(**{"max-model-len": 2048}), base_workload()).finding("max_model_len")
    assert finding.verdict == "wrong" and "3,800 tokens" in finding.reason


def test_max_model_len_beyond_the_model_is_wrong():
    config = base_config(
        model="meta-llama/Meta-Llama-3-70B-Instruct",
        **{"max-model-len": 32768, "tensor-parallel-size": 4, "deployment": {"gpu": "H100", "gpus-per-node": 4}},
    )
    finding = review.review(config, base_workload()).finding("max_model_len")
    assert finding.verdict == "wrong" and "8,192 positions" in finding.reason


def test_prefix_caching_off_with_little_to_share_is_fine():
    workload = base_workload(**{"shared-prefix": {"tokens": 50, "fraction": 0.5}})
    finding = review.review(base_config(**{"enable-prefix-caching": False}), workload).finding("prefix_caching")
    assert finding.verdict == "justified"
    assert "prefix_caching" not in review.review(base_config(), base_workload()).verdicts()


def test_kv_cache_that_cannot_hold_the_peak_is_wrong():
    config = base_config(**{"max-num-seqs": 512, "gpu-memory-utilization": 0.5})
    workload = base_workload(concurrency={"typical": 300, "peak": 500})
    finding = review.review(config, workload).finding("gpu_memory_utilization")
    assert finding.verdict == "wrong"
    assert "cannot hold the peak" in finding.reason


def test_model_config_json_for_an_unknown_model(tmp_path):
    model_config = tmp_path / "config.json"
    model_config.write_text(
        json.dumps(
            {
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 32768,
                "max_position_embeddings": 32768,
                "torch_dtype": "bfloat16",
            }
        )
    )
    config = base_config(model="mistralai/Mistral-7B-Instruct-v0.3")
    config["deployment"]["model-config"] = "config.json"
    report = review.review(config, base_workload(), base_dir=tmp_path)
    assert 7.0 < report.facts["num_params_b"] < 7.5
    assert report.facts["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2


@pytest.mark.parametrize(
    "model_id,preset",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "Llama-3-70B"),
        ("casperhansen/llama-3-70b-instruct-awq", "Llama-3-70B"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M"),
    ],
)
def test_model_ids_map_to_presets(model_id, preset):
    from servelab.review.serving import preset_key

    assert preset_key(model_id) == preset


def test_exit_codes_are_documented_values():
    assert (review.EXIT_CLEAN, review.EXIT_FINDINGS, review.EXIT_BAD_INPUT) == (0, 1, 2)
    assert re.search(r"0 .*1 .*2", review.__doc__, re.S)


@pytest.mark.unit(False)  # imports vLLM
def test_the_reviewers_gpu_memory_utilization_default_is_vllms():
    """The reviewer assumes vLLM's own default where a config leaves gpu-memory-utilization unset."""
    from vllm.config import CacheConfig

    from servelab.review import defaults

    assert defaults.GPU_MEMORY_UTILIZATION == CacheConfig.__pydantic_fields__["gpu_memory_utilization"].default
