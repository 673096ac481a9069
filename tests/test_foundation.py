"""Unit tests of the package's foundation: presets, records, the store, workloads, vLLM's failure reasons,
batch lists, comparisons."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import re
import warnings

import pytest

from servelab import cli, hardware, modelspec
from servelab.batch_sizes import batch_sizes_arg, parse_batch_sizes
from servelab.engine import BatchResult, EngineConfig, EngineConfigError, root_cause
from servelab.measure import ComparisonRow, compare, crossover_batch, merge
from servelab.measurement import Measurement, percentile
from servelab.results import ResultsStore
from servelab.server import exit_reason
from servelab.workload import load

pytestmark = pytest.mark.unit


def make_record(**overrides) -> Measurement:
    base = dict(
        method="none",
        num_speculative_tokens=0,
        batch_size=8,
        workload="copy",
        output_len=64,
        num_requests=8,
        prompt_tokens=800,
        output_tokens=512,
        elapsed_s=4.0,
        output_tok_s=128.0,
        request_throughput=2.0,
        ttft_ms_p50=90.0,
        ttft_ms_p99=120.0,
        tpot_ms_p50=55.0,
        tpot_ms_p99=60.0,
    )
    base.update(overrides)
    return Measurement(**base)


# --- model and hardware presets ------------------------------------------------------
def test_smollm2_shape_matches_its_config():
    m = modelspec.preset("SmolLM2-135M")
    assert m.num_params == 134_515_008  # 134.5 M, tied embeddings
    assert m.kv_bytes_per_token("bfloat16") == 2 * 30 * 3 * 64 * 2 == 23_040
    assert m.kv_bytes(1000, 8, "float32") == 2 * 23_040 * 1000 * 8


def test_llama_presets_have_their_published_sizes():
    assert modelspec.preset("Llama-3.1-8B").num_params == pytest.approx(8.03e9, rel=0.005)
    assert modelspec.preset("Llama-3-70B").num_params == pytest.approx(70.55e9, rel=0.005)
    # 80 layers x 8 KV heads x 128 dims x K and V x 2 bytes
    assert modelspec.preset("Llama-3-70B").kv_bytes_per_token() == 80 * 8 * 128 * 2 * 2


def test_model_spec_reads_a_config_folder(tmp_path):
    cfg = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = modelspec.ModelSpec.from_config_json(tmp_path)
    assert m.head_dim == 16
    per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64
    assert m.num_params == 2 * per_layer + 2 * 100 * 64 + 64
    assert m.matmul_params == m.num_params - 100 * 64


def test_unknown_model_preset_lists_known_ones():
    with pytest.raises(ValueError, match="Llama-3.1-8B"):
        modelspec.preset("GPT-5")


def test_h200_ridge_point():
    h = hardware.get("H200")
    assert h.ridge_flop_per_byte == pytest.approx(989e12 / 4.8e12)
    assert h.ridge_tokens_per_step() == pytest.approx(989e12 / 4.8e12)  # bf16: 2 bytes, 2 FLOP per param


@pytest.mark.parametrize("name", ["h100", "H100-SXM", "NVIDIA H100 80GB HBM3"])
def test_gpu_names_as_people_and_torch_write_them(name):
    assert hardware.get(name).name == "H100"


def test_unknown_gpu_lists_known_types():
    with pytest.raises(hardware.UnknownHardware, match="H200, H100, A100"):
        hardware.get("H900")


# --- the record ----------------------------------------------------------------------------
def test_measurement_round_trips_through_one_json_line():
    r = make_record(acceptance_rate=0.6, roofline={"bandwidth_gb_s": 12.0})
    line = r.to_json()
    assert "\n" not in line
    assert Measurement.from_dict(json.loads(line)) == r


def test_measurement_from_dict_names_missing_fields():
    with pytest.raises(ValueError, match="output_tok_s"):
        Measurement.from_dict({"method": "none"} | {k: 1 for k in ("batch_size",)})


def test_percentile_interpolates_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10.0], 99) == 10.0
    assert percentile(list(range(101)), 99) == pytest.approx(99.0)
    assert math.isnan(percentile([], 50))


# --- the store: append-only, durable, torn lines skipped, no interleaving ------------------------
def test_store_appends_and_reads_back(store):
    store.append(make_record(batch_size=1))
    store.extend([make_record(batch_size=2), make_record(batch_size=4)])
    assert [r["batch_size"] for r in store.read()] == [1, 2, 4]
    assert [r["batch_size"] for r in store.find(batch_size=2)] == [2]


def test_torn_last_line_is_skipped_with_a_warning_and_the_next_write_is_whole(store):
    store.append(make_record(batch_size=1))
    with open(store.path, "a") as f:
        f.write('{"method": "none", "batch_si')  # a writer killed mid-line
    with pytest.warns(UserWarning, match="damaged record"):
        assert [r["batch_size"] for r in store.read()] == [1]
    store.append(make_record(batch_size=2))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert [r["batch_size"] for r in store.read()] == [1, 2]


def _writer(path, worker, n):
    s = ResultsStore(path)
    for i in range(n):
        s.append(make_record(batch_size=worker * 1000 + i, note="x" * 5000))  # long lines, many writes


def test_two_processes_writing_at_once_never_interleave_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, 60)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a damaged line would warn
        records = ResultsStore(path).read()
    assert sorted(r["batch_size"] for r in records) == sorted(
        [1000 + i for i in range(60)] + [2000 + i for i in range(60)]
    )


# --- workloads ---------------------------------------------------------------------------------
def test_workloads_are_real_text_and_batches_cycle():
    copy, open_ = load("copy"), load("open")
    assert len(copy.prompts) >= 64 and len(open_.prompts) >= 64
    assert any("speculative decoding" in p for p in copy.prompts)
    assert copy.batch(3) == list(copy.prompts[:3])
    assert copy.batch(len(copy.prompts) + 1)[-1] == copy.prompts[0]
    assert load("copy-heavy") == copy


def test_unknown_workload_says_what_exists():
    with pytest.raises(ValueError, match="copy, open"):
        load("chat")


# --- engine config checks that fail before the 40-second start --------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(spec_method="ngram", num_speculative_tokens=0), "needs k >= 1"),
        (dict(spec_method="medusa", num_speculative_tokens=2), "spec_method must be one of"),
        (dict(num_speculative_tokens=4), "spec_method is 'none'"),
        (dict(max_num_seqs=0), "max_num_seqs"),
        (
            dict(prompt_lookup_min=5, prompt_lookup_max=2, spec_method="ngram", num_speculative_tokens=2),
            "prompt_lookup_min",
        ),
        (
            dict(spec_method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=((8, 1, 2),)),
            "first <= last",
        ),
    ],
)
def test_bad_engine_configs_say_what_to_change(kwargs, message):
    with pytest.raises(EngineConfigError, match=message):
        EngineConfig(**kwargs)


def test_missing_model_folder_fails_fast(tmp_path):
    with pytest.raises(EngineConfigError, match="No model at .*config.json"):
        EngineConfig(model=str(tmp_path / "nowhere")).check_files()


@pytest.mark.unit(False)  # about 1.5 s of CPU
def test_kv_cache_too_small_for_the_batch_names_the_size_needed(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            json.loads((modelspec.resources.files("servelab.model_configs") / "SmolLM2-135M-Instruct.json").read_text())
        )
    )
    cfg = EngineConfig(model=str(tmp_path), kv_cache_gb=0.01, dtype="float32", max_num_seqs=64)
    with pytest.raises(EngineConfigError, match=r"KV cache is too small.*Raise kv_cache_gb to at least"):
        cfg.check_batch(64, 512)
    with pytest.raises(EngineConfigError, match="max_num_seqs=64"):
        cfg.check_batch(65, 10)
    cfg.check_batch(1, 100)  # 1 x 100 x 46 KB fits in 10 MB


def test_speculative_config_is_what_vllm_takes():
    cfg = EngineConfig(
        spec_method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=((1, 2, 4), (3, 256, 0))
    )
    assert cfg.speculative_config() == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 256, 0]],
    }
    assert cfg.method_label() == "adaptive"
    assert EngineConfig().speculative_config() is None


# --- vLLM's reason for failing, read one way for the engine and for `vllm serve` -----------------------------
REFUSED_LOG = """\
(APIServer pid=4242) Traceback (most recent call last):
(APIServer pid=4242)   File "/venv/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 1352, in create_engine_config
(APIServer pid=4242) pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig
(APIServer pid=4242)   Value error, Total number of attention heads (9) must be divisible by tensor parallel size (2). \
[type=value_error, input_value=ArgsKwargs((), {'tensor_parallel_size': 2}), input_type=ArgsKwargs]
"""
WRAPPED_LOG = """\
(EngineCore_DP0 pid=77) ValueError: To serve at least one request with the models's max seq len (100000), \
2.29 GiB KV cache is needed, which is larger than the available KV cache memory (1.00 GiB).
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core_client.py", line 600, in __init__
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_root_cause_is_the_refused_settings_reason_or_the_most_specific_error():
    assert (
        root_cause(REFUSED_LOG) == "Total number of attention heads (9) must be divisible by tensor parallel size (2)."
    )
    assert root_cause(WRAPPED_LOG).startswith("ValueError: To serve at least one request")
    assert root_cause("INFO 12-01 starting\nRuntimeError: Engine core initialization failed.") == (
        "RuntimeError: Engine core initialization failed."
    )  # only the wrapper: better than nothing
    assert root_cause("INFO 12-01 starting\n") == ""


def test_a_server_that_stops_says_vllms_reason_or_its_last_words():
    assert exit_reason(REFUSED_LOG) == root_cause(REFUSED_LOG)
    assert exit_reason("INFO loading\nKilled\n") == "Killed"
    assert exit_reason("") == "it printed nothing"


# --- batch lists: one syntax for every command ------------------------------------------------------------
def test_batch_sizes_are_whole_numbers_and_an_ellipsis_continues_the_ratio():
    assert parse_batch_sizes("1,2,4,...,256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_batch_sizes("3, 5") == [3, 5]
    assert parse_batch_sizes("1,3,...,27") == [1, 3, 9, 27]
    for bad, says in [
        ("1,...,8", "two batch sizes before it"),
        ("4,2,...,1", "must grow"),
        ("0,1", "'0'"),
        ("1,2.5", "'2.5'"),
        ("", "no batch sizes"),
        ("1,2,...", "one after"),
    ]:
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_batch_sizes(bad)


@pytest.mark.unit(False)  # runs the servelab command
def test_servelab_sweep_reads_the_same_batch_list_and_refuses_a_bad_one_before_any_engine(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sweep", "--batch", "1,2,x"])
    assert exit_info.value.code == 2
    assert "--batch: expected comma-separated whole numbers" in capsys.readouterr().err
    assert batch_sizes_arg("1,2,...,8") == [1, 2, 4, 8]


# --- comparing sweeps --------------------------------------------------------------------------------
def test_compare_and_crossover():
    base = [make_record(batch_size=b, output_tok_s=t) for b, t in [(1, 10), (2, 20), (4, 40), (8, 80)]]
    spec = [make_record(batch_size=b, output_tok_s=t, method="ngram") for b, t in [(1, 20), (2, 30), (4, 30), (8, 40)]]
    rows = compare(base, spec)
    assert [r.speedup for r in rows] == [2.0, 1.5, 0.75, 0.5]
    # between batch 2 (1.5x) and 4 (0.75x): 2/3 of the way in log2 space
    assert crossover_batch(rows) == pytest.approx(2 ** (1 + 2 / 3), abs=0.01)


def test_crossover_is_none_when_speculation_always_wins_and_first_batch_when_it_never_does():
    win = [ComparisonRow(b, 1, 2, 2.0, 1, 1, None) for b in (1, 2)]
    lose = [ComparisonRow(b, 2, 1, 0.5, 1, 1, None) for b in (1, 2)]
    assert crossover_batch(win) is None
    assert crossover_batch(lose) == 1.0


def test_merging_rounds_adds_times_and_counters():
    a = BatchResult(
        ["x"], [5], [64], [0.1], [0.05], 2.0, {"num_drafts": 3, "num_draft_tokens": 12, "num_accepted_tokens": 6}
    )
    b = BatchResult(
        ["y"], [6], [64], [0.2], [None], 3.0, {"num_drafts": 1, "num_draft_tokens": 4, "num_accepted_tokens": 4}
    )
    m = merge([a, b])
    assert m.elapsed_s == 5.0 and m.output_tokens == [64, 64] and m.tpot_s == [0.05, None]
    assert m.spec_counters == {"num_drafts": 4, "num_draft_tokens": 16, "num_accepted_tokens": 10}


def test_readme_quotes_the_committed_benchmark():
    """The README's flip table is the one bench/flip.py wrote, row for row: docs do not drift from results."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    flip = json.loads((repo / "bench" / "results" / "flip-cpu.json").read_text())
    readme = (repo / "README.md").read_text()
    rows = {
        int(m.group(1)): [float(x) for x in m.group(2, 3, 4, 5, 6)]
        for m in re.finditer(
            r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \| ([\d.]+) \| ([\d.]+) \|$", readme, re.MULTILINE
        )
    }
    assert sorted(rows) == [r["batch_size"] for r in flip["table"]]
    for r in flip["table"]:
        quoted = rows[r["batch_size"]]
        measured = [r["none_tok_s"], r["ngram_tok_s"], r["speedup"], r["adaptive_tok_s"], r["routed_tok_s"]]
        assert quoted == [round(x, 2 if i == 2 else 1) for i, x in enumerate(measured)], r["batch_size"]
    assert f"Crossover at batch {flip['crossover_batch']:.1f}." in readme
    assert f"{flip['wall_time_s']:.0f} s for the whole run" in readme
