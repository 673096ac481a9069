"""The reviewer on configs as teams have them: command lines, manifests, Helm values,
the model catalogue's arithmetic, vLLM's own flag list, and workloads without an SLO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab import modelspec, review
from servelab.review import forms, vllm_flags
from servelab.review.serving import read_config

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent

WORKLOAD = {
    "name": "chat",
    "task": "chat",
    "concurrency": {"typical": 8, "peak": 16},
    "prompt-tokens": {"mean": 800, "p99": 3000},
    "output-tokens": {"mean": 200, "p99": 900},
    "slo": {"ttft-p99-ms": 1000, "tpot-p99-ms": 50},
}


def cfg_of(text: str, **deployment):
    return read_config(forms.parse(text, name="cmd.sh", deployment=deployment or None))


# --- the model catalogue: arithmetic worked by hand -------------------------------------


def test_mixture_of_experts_holds_every_expert_and_computes_two():
    """Mixtral 8x7B: 32 layers; attention 4096x4096x2 + 4096x1024x2; eight experts of
    3 x 4096 x 14336; a 4096 x 8 router; two norms per layer; 32,000 x 4096 embeddings and head."""
    m = modelspec.from_catalogue("mistralai/Mixtral-8x7B-Instruct-v0.1")
    attention = 4096 * 4096 * 2 + 4096 * 1024 * 2
    expert = 3 * 4096 * 14336
    per_layer_all = attention + 8 * expert + 4096 * 8 + 2 * 4096
    per_layer_active = attention + 2 * expert + 4096 * 8 + 2 * 4096
    embeddings = 32000 * 4096
    assert m.num_params == 32 * per_layer_all + 2 * embeddings + 4096  # 46.7B
    assert m.active_params == 32 * per_layer_active + 2 * embeddings + 4096  # 12.9B
    assert round(m.num_params / 1e9, 1) == 46.7 and round(m.active_params / 1e9, 1) == 12.9
    assert m.weight_bytes("bfloat16") == m.num_params * 2  # all experts in memory
    assert m.flops_per_token() == 2 * (m.active_params - embeddings)  # compute follows the active ones


def test_deepseek_latent_attention_and_its_fp8_checkpoint():
    m = modelspec.from_catalogue("deepseek-ai/DeepSeek-R1")
    # one compressed latent per layer: kv_lora_rank 512 + rope 64, in bf16
    assert m.kv_bytes_per_token("bfloat16") == 61 * (512 + 64) * 2 == 70_272
    # every tensor-parallel GPU holds the whole latent
    assert m.kv_bytes_per_token("bfloat16", tensor_parallel_size=8) == 8 * 70_272
    assert m.kv_bytes_per_token("fp8") == 61 * 576
    assert round(m.num_params / 1e9) == 671 and round(m.active_params / 1e9, 1) == 37.6
    assert m.quant_method == "fp8" and m.native_quantization
    routers = 58 * 7168 * 256
    unquantized = m.num_params - m.quantized_params
    assert unquantized == 2 * 129280 * 7168 + routers + 7168 + 61 * 2 * 7168 + 61 * (
        1536 + 512
    )  # tables, routers, norms
    assert m.weight_bytes() == m.quantized_params * 1 + unquantized * 2


def test_sliding_window_layers_stop_growing_at_the_window():
    gemma2 = modelspec.from_catalogue("google/gemma-2-9b-it")  # 42 layers, every other one local (4,096)
    per_layer_token = 2 * 8 * 256 * 2
    assert gemma2.sliding_layers == 21 and gemma2.sliding_window == 4096
    assert gemma2.kv_bytes(1000) == 42 * 1000 * per_layer_token  # under the window: no saving
    assert gemma2.kv_bytes(8192) == (21 * 8192 + 21 * 4096) * per_layer_token
    gemma3 = modelspec.from_catalogue("google/gemma-3-27b-it")  # 62 layers, one global in six
    assert (gemma3.sliding_layers, gemma3.sliding_window) == (62 - 10, 1024)
    assert gemma3.kv_bytes(32768) == (10 * 32768 + 52 * 1024) * 2 * 16 * 128 * 2
    oss = modelspec.from_catalogue("openai/gpt-oss-120b")  # alternating 128-token windows
    assert (oss.sliding_layers, oss.sliding_window) == (18, 128)
    mistral = modelspec.from_catalogue("mistralai/Mistral-7B-Instruct-v0.1")  # every layer, 4,096
    assert mistral.kv_bytes(32768) == mistral.kv_bytes(4096)


def test_tied_embeddings_are_counted_once():
    m = modelspec.from_catalogue("meta-llama/Llama-3.2-1B-Instruct")
    layer = 2048 * 2048 * 2 + 2048 * 512 * 2 + 3 * 2048 * 8192 + 2 * 2048
    assert m.tie_word_embeddings
    assert m.num_params == 16 * layer + 128256 * 2048 + 2048  # 1.24B: no separate LM head


def test_mxfp4_covers_only_the_experts():
    m = modelspec.from_catalogue("openai/gpt-oss-120b")
    experts = 36 * 128 * 3 * 2880 * 2880
    assert m.quantized_params == experts
    assert m.weight_bytes() == pytest.approx(experts * 4.25 / 8 + (m.num_params - experts) * 2)


@pytest.mark.parametrize(
    "model",
    [
        "meta-llama/Llama-3.2-1B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.1-405B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-235B-A22B",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        "google/gemma-2-27b-it",
        "google/gemma-3-12b-it",
        "deepseek-ai/DeepSeek-V3",
        "microsoft/phi-4",
        "openai/gpt-oss-20b",
    ],
)
def test_catalogue_covers_the_families_with_sources(model):
    entry = modelspec.catalogue()[model]
    assert entry["source"].startswith("https://huggingface.co/" + model)
    spec = modelspec.from_catalogue(model.split("/")[-1].lower())  # the name alone finds it too
    assert spec.name == model and spec.num_params > 0 and spec.max_position_embeddings > 0


def test_every_catalogue_entry_has_its_source_and_reads_as_a_model():
    """What CONTRIBUTING.md's recipe promises for a new entry: the source URL of its own config.json,
    and a config the reviewer reads by id and by each alias."""
    for model, entry in modelspec.catalogue().items():
        assert entry["source"].startswith("https://huggingface.co/" + model), model
        assert "config.json" in entry["source"], model
        for name in (model, *entry.get("aliases", [])):
            spec = modelspec.from_catalogue(name)
            assert spec.name == model and spec.num_params > 0 and spec.max_position_embeddings > 0, name


def test_published_sizes_match_the_names():
    sizes = {
        "meta-llama/Llama-3.1-405B-Instruct": 405.9,
        "Qwen/Qwen3-235B-A22B": 235.1,
        "Qwen/Qwen3-30B-A3B": 30.5,
        "openai/gpt-oss-120b": 116.8,
        "openai/gpt-oss-20b": 20.9,
        "google/gemma-3-27b-it": 27.0,
    }
    for model, billions in sizes.items():
        assert round(modelspec.from_catalogue(model).num_params / 1e9, 1) == billions, model
    assert round(modelspec.from_catalogue("Qwen/Qwen3-235B-A22B").active_params / 1e9, 1) == 22.2


# --- vLLM's own flags ------------------------------------------------------------------


@pytest.mark.unit(False)  # imports vLLM
def test_cached_flags_match_the_installed_vllm():
    pytest.importorskip("vllm")
    # in a child process: importing vLLM sets up logging and torch for the whole process
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from servelab.review import vllm_flags; print(json.dumps(vllm_flags.generate()))",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    installed = json.loads(result.stdout.strip().splitlines()[-1])
    cached = json.loads((REPO / "src" / "servelab" / "review" / vllm_flags.FLAGS_FILE).read_text())
    assert cached == installed, "run `python -m servelab.review.vllm_flags` after upgrading vLLM"


def test_every_flag_vllm_knows_is_accepted_and_listed_as_not_reviewed(tmp_path):
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --compilation-config '{\"level\": 3}' "
        "--max-cudagraph-capture-size 512 --async-scheduling",
        gpu="H100",
    )
    assert {"compilation-config", "max-cudagraph-capture-size", "async-scheduling"} <= set(cfg.not_reviewed)
    (tmp_path / "serve.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --async-scheduling\n")
    (tmp_path / "workload.yaml").write_text(json.dumps(WORKLOAD))  # JSON is YAML
    report = review.review_files(tmp_path / "serve.sh", tmp_path / "workload.yaml", deployment={"gpu": "H100"})
    assert report.not_reviewed == ["async-scheduling"]
    assert "async-scheduling" in str(report)


def test_unknown_flag_names_the_closest_and_its_line():
    with pytest.raises(review.ReviewInputError) as info:
        cfg_of(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  --tensor-parallel-size 2 \\\n  --max-num-seq 8",
            gpu="H100",
        )
    assert "cmd.sh:3:" in str(info.value) and "did you mean --max-num-seqs" in str(info.value)


def test_removed_flag_is_a_finding_and_the_rest_is_reviewed():
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --use-v2-block-manager --max-num-seqs 32", gpu="H100")
    assert cfg.removed_flags == (("use-v2-block-manager", True, 1),) and cfg.scheduler.max_num_seqs == 32
    finding = review.checks.check_removed_flags(cfg)
    assert finding.verdict == "wrong" and "will not start with --use-v2-block-manager (line 1)" in finding.reason
    assert "--use-v2-block-manager was removed" in finding.evidence and "delete it" in finding.fix


def test_old_speculative_and_device_flags_are_findings_naming_what_replaced_them():
    """vLLM 0.32's parser (vllm_flags.json) has none of these; speculation is speculative-config or its
    --spec-model / --spec-tokens shorthand (EngineArgs.create_speculative_config, vllm/engine/arg_utils.py)."""
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-model yuhuili/EAGLE3-LLaMA3.1-Instruct-8B "
        "--num-speculative-tokens 5 --device cuda --worker-use-ray --calculate-kv-scales --max-num-seqs 32",
        gpu="H100",
    )
    assert [name for name, _, _ in cfg.removed_flags] == [
        "speculative-model",
        "num-speculative-tokens",
        "device",
        "worker-use-ray",
        "calculate-kv-scales",
    ]
    assert cfg.scheduler.max_num_seqs == 32 and cfg.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    finding = review.checks.check_removed_flags(cfg)
    assert "--speculative-model: use --speculative-config" in finding.fix
    assert "--worker-use-ray: use --distributed-executor-backend ray" in finding.fix


def test_spec_shorthand_flags_make_the_speculative_config():
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --spec-method eagle3 "
        "--spec-model yuhuili/EAGLE3-LLaMA3.1-Instruct-8B --spec-tokens 3",
        gpu="H100",
    )
    assert (cfg.spec.method, cfg.spec.draft_model, cfg.spec.num_speculative_tokens) == (
        "eagle3",
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        3,
    )
    with pytest.raises(review.ReviewInputError, match="mutually exclusive"):
        cfg_of(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --spec-tokens 3 "
            '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 4}\'',
            gpu="H100",
        )


def test_removed_flag_in_yaml_and_its_value_are_set_aside():
    doc = review.schema.Doc(
        "c.yaml",
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "swap_space": 16,
            "max-num-seqs": 8,
            "deployment": {"gpu": "L4", "gpus-per-node": 1},
        },
        "serving config",
    )
    cfg = read_config(doc)
    assert cfg.removed_flags == (("swap-space", 16, None),) and cfg.scheduler.max_num_seqs == 8
    report = review.review(doc.data | {"swap_space": 16}, WORKLOAD)
    assert report.verdicts()["removed_flags"] == "wrong" and "batching" in report.verdicts()


# --- the input forms ----------------------------------------------------------------------


def test_command_line_quoting_continuations_and_equals():
    text = """# deployment: {gpu: H100, gpus-per-node: 8}
CUDA_VISIBLE_DEVICES=0,1 vllm serve meta-llama/Llama-3.1-70B-Instruct \\
    -tp 2 --max_num_seqs=64 \\
    --no-enable-prefix-caching --enforce-eager \\
    --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}' \\
    --kv-cache-dtype fp8 --gpu-memory-utilization 0.85
"""
    cfg = read_config(forms.parse(text, name="serve.sh"))
    assert cfg.model.name == "meta-llama/Llama-3.1-70B-Instruct"
    assert (cfg.parallel.tensor_parallel_size, cfg.scheduler.max_num_seqs, cfg.cache.prefix_caching) == (2, 64, False)
    assert (
        cfg.model_config.enforce_eager
        and cfg.cache.kv_cache_dtype == "fp8"
        and cfg.cache.gpu_memory_utilization == 0.85
    )
    assert cfg.spec.method == "ngram" and cfg.spec.num_speculative_tokens == 3
    assert (cfg.deployment.hardware.name, cfg.deployment.gpus_per_node) == ("H100", 8)
    assert "line 3" in cfg.knob("max-num-seqs", 64)


def test_python_module_form_and_docker_run():
    cfg = cfg_of("python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --port 8000", gpu="L40S")
    assert cfg.model.name == "Qwen/Qwen3-8B"
    cfg = cfg_of("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.2 --model openai/gpt-oss-20b", gpu="H100")
    assert cfg.model.name == "openai/gpt-oss-20b" and cfg.model_config.quantization == "mxfp4"


def test_command_line_without_a_gpu_says_how_to_give_one():
    with pytest.raises(review.ReviewInputError) as info:
        forms.parse("vllm serve Qwen/Qwen3-8B", name="cmd.sh")
    assert "# deployment: {gpu:" in str(info.value) and "--gpu" in str(info.value)


def test_statefulset_gpu_type_from_gpu_feature_discovery_label():
    text = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: qwen}
spec:
  replicas: 3
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "Qwen/Qwen2.5-72B-Instruct", "--tensor-parallel-size", "4", "--max-model-len", "16384"]
        resources:
          limits: {nvidia.com/gpu: 4}
"""
    cfg = read_config(forms.parse(text, name="sts.yaml"))
    assert (cfg.deployment.hardware.name, cfg.deployment.gpus_per_node, cfg.deployment.pod_replicas) == ("H100", 4, 3)
    assert (cfg.parallel.tensor_parallel_size, cfg.model_config.max_model_len) == (4, 16384)
    assert "line 13" in cfg.knob("tensor-parallel-size", 4)


def test_helm_values_with_several_models_need_a_selection():
    path = REPO / "data" / "configs" / "public" / "ps-kv-aware-llama-3.1-8b.yaml"
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(path)
    assert "llama1, llama2" in str(info.value) and "--select" in str(info.value)
    cfg = read_config(forms.load(path, select="llama2"))
    assert cfg.model_config.max_model_len == 32000 and cfg.cache.prefix_caching


DATA = REPO / "tests" / "data" / "review"


def test_helm_values_are_read_as_production_stacks_chart_renders_them(tmp_path):
    """helm/templates/deployment-vllm-multi.yaml (vllm-project/production-stack@a6c01db): a vllmConfig without
    enablePrefixCaching: true renders --no-enable-prefix-caching; keys the template never renders reach no
    flag (a finding, not a refusal); v0: "1" is the env VLLM_USE_V1=0; the image is repository:tag."""
    offload = read_config(forms.load(REPO / "data" / "configs" / "public" / "ps-cpu-offload-mistral-7b.yaml"))
    assert offload.cache.prefix_caching is False and "line 23" in offload.knob("enable-prefix-caching", False)
    dropped = forms.load(DATA / "ps-keys-the-chart-drops.yaml", deployment={"gpu": "H100"})
    cfg = read_config(dropped)
    assert cfg.unapplied == (("vllmConfig.kvCacheDtype", "fp8", 24), ("vllmConfig.pipelineParallelSize", 2, 25))
    assert (cfg.cache.kv_cache_dtype, cfg.parallel.pipeline_parallel_size) == ("bfloat16", 1)
    assert (cfg.cache.prefix_caching, cfg.scheduler.chunked_prefill) == (False, False)
    finding = review.checks.check_unapplied_settings(cfg)
    assert finding.verdict == "wrong" and "not applied by the chart" in finding.reason
    assert "will not start" not in finding.reason
    v100 = forms.load(DATA / "ps-v100-tp2.yaml", deployment={"gpu": "T4"})  # --v0 would be refused as a flag
    assert (v100.vllm_version, v100.data["tensor-parallel-size"], v100.data["enforce-eager"]) == ("0.8.5", 2, True)
    assert "v0" not in v100.data and not v100.unapplied
    assert v100.vllm_version_source == "the image tag vllm/vllm-openai:v0.8.5 (line 27)"
    empty = "# deployment: {gpu: L4}\nservingEngineSpec:\n  modelSpec:\n  - name: m\n    modelURL: Qwen/Qwen3-8B\n"
    assert read_config(forms.parse(empty + "    vllmConfig: {}\n")).cache.prefix_caching is True  # nothing renders
    text = empty + '    vllmConfig:\n      enablePrefixCaching: "false"\n'  # a Go template's `if` of "false": true
    assert read_config(forms.parse(text)).cache.prefix_caching is True


def test_aibrix_stormservice_roles_are_workloads_and_kserve_llmisvc_is_named():
    """An AIBrix StormService's roles (prefill, decode) each run vLLM in a pod template of their own; a KServe
    LLMInferenceService whose container holds no vLLM command is named as a form servelab does not read."""
    storm = DATA / "aibrix-stormservice-1p1d.yaml"
    with pytest.raises(review.ReviewInputError, match=r"2 containers run vLLM here \(prefill, decode\)"):
        forms.load(storm, deployment={"gpu": "H100"})
    doc = forms.load(storm, select="decode", deployment={"gpu": "H100"})
    assert (doc.data["model"], doc.data["served-model-name"], doc.vllm_version) == (
        "/models/Qwen3-8B",
        "qwen3-8B",
        "0.10.0",
    )
    assert doc.data["deployment"]["gpus-per-node"] == 1
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(DATA / "kserve-llmisvc-single-gpu.yaml")
    message = str(info.value)
    assert "not a form servelab reads: a KServe LLMInferenceService whose container states no vLLM command" in message
    assert "kubectl get pod NAME -o yaml" in message and "It reads:" in message


def test_manifest_without_vllm_is_refused_clearly(tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n"
        "    spec:\n      containers:\n      - name: web\n        image: nginx\n"
    )
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(path, deployment={"gpu": "H100"})
    assert "no container in this manifest runs vLLM" in str(info.value)


# --- the checks the new inputs need ----------------------------------------------------------

BASE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "max-num-seqs": 16,
    "max-model-len": 8192,
    "deployment": {"gpu": "H100", "gpus-per-node": 1},
}


def test_kv_cache_dtype_fp8_is_a_quantization_that_needs_accuracy():
    report = review.review({**BASE, "kv-cache-dtype": "fp8"}, WORKLOAD)
    q = report.finding("quantization")
    assert q.verdict == "unjustified" and "kv-cache-dtype fp8" in q.reason
    assert "65,536 B per token" in q.evidence  # half of bf16's 131,072
    # max-num-seqs left to the H100's default 1,024: the fix names the peak's batch (16), not the cap
    uncapped = review.review(
        {k: v for k, v in BASE.items() if k != "max-num-seqs"} | {"kv-cache-dtype": "fp8"}, WORKLOAD
    )
    assert "at the peak's batch of 16" in uncapped.finding("quantization").fix
    assert "1024" not in uncapped.finding("quantization").fix
    measured = {
        **WORKLOAD,
        "slo": {**WORKLOAD["slo"], "max-accuracy-drop": 1},
        "measurements": [
            {
                "setting": {"kv-cache-dtype": "fp8", "batch": 16, "task": "chat"},
                "metric": "accuracy_drop",
                "value": 0.3,
                "source": "eval run 12",
            }
        ],
    }
    assert review.review({**BASE, "kv-cache-dtype": "fp8"}, measured).finding("quantization").verdict == "justified"
    too_much = {**measured, "slo": {**measured["slo"], "max-accuracy-drop": 0.1}}
    assert review.review({**BASE, "kv-cache-dtype": "fp8"}, too_much).finding("quantization").verdict == "wrong"


def test_checkpoint_quantization_config_is_read(tmp_path):
    config = json.loads((REPO / "src" / "servelab" / "model_configs" / "Llama-3.1-8B-Instruct.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 4}}},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = review.review(
        {**BASE, "model": "acme/llama-8b-w4", "deployment": {**BASE["deployment"], "model-config": "config.json"}},
        WORKLOAD,
        base_dir=tmp_path,
    )
    q = report.finding("quantization")
    assert q.verdict == "unjustified" and "quantization_config" in q.setting
    assert report.facts["weight_dtype"] == "int4"


def test_workload_without_slo_is_reviewed_with_exit_1(tmp_path):
    no_slo = {k: v for k, v in WORKLOAD.items() if k != "slo"}
    report = review.review({**BASE, "speculative-config": {"method": "ngram", "num_speculative_tokens": 2}}, no_slo)
    assert report.exit_code == 1
    assert (
        report.finding("batching").verdict == "unjustified"
        and "no latency or throughput SLO" in report.finding("batching").reason
    )
    assert report.finding("speculative_decoding").verdict == "unjustified"
    assert report.finding("parallelism").verdict == "justified"


def test_weights_that_do_not_fit_stay_apart_from_kv_short_of_the_peak():
    big = {**BASE, "model": "meta-llama/Llama-3.1-70B-Instruct", "deployment": {"gpu": "H100", "gpus-per-node": 1}}
    report = review.review(big, WORKLOAD)
    assert report.finding("parallelism").verdict == "wrong" and "weights alone" in report.finding("parallelism").reason
    crowded = {**WORKLOAD, "concurrency": {"typical": 200, "peak": 400}, "prompt-tokens": {"mean": 4000, "p99": 7000}}
    report = review.review({**BASE, "max-num-seqs": 512}, crowded)
    assert report.finding("parallelism").verdict == "justified"
    assert report.finding("gpu_memory_utilization").verdict == "wrong"


def test_enforce_eager_needs_a_reason_on_a_gpu():
    report = review.review({**BASE, "enforce-eager": True}, WORKLOAD)
    assert report.finding("enforce_eager").verdict == "unjustified"
    measured = {
        **WORKLOAD,
        "measurements": [
            {
                "setting": {"enforce-eager": True, "max-num-seqs": 16},
                "metric": "tpot_ms_p99",
                "value": 38,
                "source": "load test",
            }
        ],
    }
    assert review.review({**BASE, "enforce-eager": True}, measured).finding("enforce_eager").verdict == "justified"
    assert "enforce_eager" not in review.review(BASE, WORKLOAD).verdicts()


def test_chunked_prefill_off_needs_a_budget_for_the_longest_request():
    report = review.review({**BASE, "enable-chunked-prefill": False, "max-num-batched-tokens": 4096}, WORKLOAD)
    finding = report.finding("chunked_prefill")
    assert finding.verdict == "wrong" and "below max-model-len 8,192" in finding.reason


@pytest.mark.unit(False)  # runs the servelab command
def test_cli_reads_a_command_line_with_gpu_flags(tmp_path):
    cmd = tmp_path / "serve.sh"
    cmd.write_text("vllm serve Qwen/Qwen3-8B --max-num-seqs 32 --max-model-len 8192\n")
    workload = tmp_path / "w.yaml"
    workload.write_text("concurrency: {typical: 8, peak: 16}\nprompt-tokens: {mean: 800}\noutput-tokens: {mean: 200}\n")
    script = Path(sys.executable).parent / "servelab"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "servelab.cli"]
    result = subprocess.run(
        [*command, "review", str(cmd), "--workload", str(workload), "--gpu", "L40S", "--gpus-per-node", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["facts"]["hardware"] == "L40S" and data["verdicts"]["batching"] == "unjustified"


def test_a_script_ends_the_command_at_the_line_without_a_continuation():
    text = (
        "#!/bin/bash\nexport HF_HOME=/models\nvllm serve Qwen/Qwen3-8B \\\n  --max-num-seqs 32\n"
        "sleep 5\ncurl localhost:8000/health\n"
    )
    cfg = cfg_of(text, gpu="L4")
    assert cfg.scheduler.max_num_seqs == 32 and cfg.model.name == "Qwen/Qwen3-8B"


def test_chunk_budget_left_unset_is_vllms_default_for_the_gpu():
    h100 = review.review({**BASE, "enable-chunked-prefill": True}, WORKLOAD).finding("chunked_prefill")
    assert "carries 8,192 tokens" in h100.evidence
    l4 = {**BASE, "enable-chunked-prefill": True, "deployment": {"gpu": "L4", "gpus-per-node": 1}}
    assert "carries 2,048 tokens" in review.review(l4, WORKLOAD).finding("chunked_prefill").evidence


def test_removed_flag_names_the_release_where_it_is_on_record():
    cfg = cfg_of("vllm serve Qwen/Qwen3-8B --swap-space 16 --max-model-len 8192", gpu="L4")
    assert cfg.removed_flags == (("swap-space", 16, 1),) and cfg.model_config.max_model_len == 8192
    finding = review.checks.check_removed_flags(cfg)
    assert (
        "--swap-space was removed in vLLM 0.18.0" in finding.evidence and finding.setting == "--swap-space 16 (line 1)"
    )


def test_llama4_scout_counts_all_sixteen_experts_and_the_shared_one():
    """The issue's example: counted as one expert, Scout's weights came to 78.9 GB instead of about 218 GB."""
    m = modelspec.from_catalogue("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    attention = 5120 * 40 * 128 * 2 + 5120 * 8 * 128 * 2
    expert = 3 * 5120 * 8192
    per_layer = attention + (16 + 1) * expert + 5120 * 16 + 2 * 5120
    assert m.decoder_params == 48 * per_layer + 2 * 202048 * 5120 + 5120
    # the vision encoder: 34 blocks of 4 x 1408^2 attention and a 2 x 1408 x 5632 GELU MLP
    assert m.tower_params == 34 * (4 * 1408**2 + 2 * 1408 * 5632)
    assert round(m.weight_bytes("bfloat16") / 1e9, 1) == 217.2  # 215.5 of language model + 1.6 of vision: ~218
    assert round(m.active_params / 1e9, 1) == 17.2  # one routed and the shared expert per token


def test_yaml_and_dict_configs_take_every_spelling_vllm_takes():
    report = review.review(
        {**BASE, "no-enable-prefix-caching": True, "tp": 1},
        {**WORKLOAD, "shared-prefix": {"tokens": 600, "fraction": 1.0}},
    )
    assert report.finding("prefix_caching").verdict == "wrong"  # caching off with a shared prefix
    with pytest.raises(review.ReviewInputError) as info:
        review.review({**BASE, "max_num_seqs": 8}, WORKLOAD)
    assert "given twice" in str(info.value)


def test_a_broken_deployment_comment_names_its_line(tmp_path):
    path = tmp_path / "serve.sh"
    path.write_text("# serving the assistant\n# deployment: {gpu: H100, gpus-per-node: [8}\nvllm serve Qwen/Qwen3-8B\n")
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(path)
    assert f"{path}:2:" in str(info.value) and "YAML mapping" in str(info.value)


def test_a_bad_gpu_count_in_a_manifest_names_its_line():
    text = """# deployment: {gpu: H100}
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        args: ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
        resources:
          limits: {nvidia.com/gpu: "two"}
"""
    with pytest.raises(review.ReviewInputError) as info:
        read_config(forms.parse(text, name="deploy.yaml"))
    assert "deploy.yaml:13:" in str(info.value) and "whole number" in str(info.value)


def test_lengths_read_as_vllm_reads_them():
    """vLLM 0.32's human_readable_int / human_readable_int_or_auto (vllm/utils/argparse_utils.py):
    k = 1,000 and K = 1,024; max-model-len also takes auto or -1 (the model's length, fitted to memory)."""
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32K --max-num-batched-tokens 16k", gpu="H100"
    )
    assert (cfg.model_config.max_model_len, cfg.scheduler.max_num_batched_tokens) == (32 * 1024, 16_000)
    assert (
        cfg_of(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 25.6k", gpu="H100"
        ).model_config.max_model_len
        == 25_600
    )
    for auto in ("auto", "-1"):
        cfg = cfg_of(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len {auto}", gpu="H100")
        assert (
            cfg.model_config.max_model_len_auto and cfg.model_config.max_model_len == 131_072
        )  # max_position_embeddings
    with pytest.raises(review.ReviewInputError, match="did you mean 1.5k"):
        cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 1.5K", gpu="H100")
    with pytest.raises(review.ReviewInputError, match="must be at least 1"):
        cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens -1", gpu="H100")


def test_gpu_names_resolve_to_the_part_they_name():
    """GKE: nvidia-tesla-a100 is the 40 GB A100 and nvidia-a100-80gb the 80 GB one; an H100 NVL has 94 GB
    and an H100 PCIe 2.0 TB/s (datasheets, cited in hardware.PRESETS); an unknown part says how to describe it."""
    from servelab import hardware

    assert hardware.get("nvidia-tesla-a100").name == "A100-40GB"
    assert hardware.get("nvidia-a100-80gb").name == "A100"
    assert (hardware.get("NVIDIA H100 NVL").name, hardware.get("NVIDIA H100 NVL").memory_gb) == ("H100-NVL", 94)
    pcie = hardware.get("NVIDIA H100 PCIe")
    assert (pcie.name, pcie.bandwidth_gb_s) == ("H100-PCIE", 2000) and hardware.get("H100").bandwidth_gb_s == 3350
    assert hardware.get("nvidia-h100-80gb").name == "H100"
    assert (hardware.get("A800").interconnect_gb_s, hardware.get("MI325X").memory_gb, hardware.get("T4").dtype) == (
        400,
        256,
        "float16",
    )
    with pytest.raises(review.ReviewInputError, match="unknown GPU type 'Gaudi3'.*deployment.hardware-file"):
        cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct", gpu="Gaudi3")


def test_a_workload_with_qps_alone_says_how_to_get_concurrency():
    doc = review.schema.Doc(
        "w.yaml",
        {"qps": {"typical": 5, "peak": 20}, "prompt-tokens": {"mean": 1000}, "output-tokens": {"mean": 200}},
        "workload",
    )
    with pytest.raises(review.ReviewInputError, match=r"qps but no 'concurrency'.*Little's law"):
        review.workload_spec.read_workload(doc)


def test_a_ray_serve_llm_config_is_read_as_its_llm_config(tmp_path):
    path = tmp_path / "serve.yaml"
    path.write_text(
        "# deployment: {gpu: L40S, gpus-per-node: 2}\n"
        "applications:\n- name: llm_app\n  import_path: ray.serve.llm:build_openai_app\n  args:\n"
        "    llm_configs:\n      - model_loading_config: {model_id: q, model_source: Qwen/Qwen2.5-7B-Instruct}\n"
        "        engine_kwargs: {tensor_parallel_size: 2}\n"
    )
    cfg = read_config(review.forms.load(path))
    assert cfg.model.name == "Qwen/Qwen2.5-7B-Instruct" and cfg.parallel.tensor_parallel_size == 2


def test_a_yaml_merge_key_with_an_override_is_not_a_duplicate(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "defaults: &d\n  max-model-len: 16384\n  max-num-seqs: 32\nserving:\n  <<: *d\n  max-num-seqs: 64\n"
    )
    doc = review.schema.load_yaml(path, "serving config")
    assert doc.data["serving"] == {"max-model-len": 16384, "max-num-seqs": 64}
    assert doc.line(("serving", "max-num-seqs")) == 6
    path.write_text("model: a\nmodel: b\n")
    with pytest.raises(review.ReviewInputError, match="c.yaml:2: model: duplicate key"):
        review.schema.load_yaml(path, "serving config")


@pytest.mark.parametrize(
    "rows, says",
    [
        ("oops", "must be a list of [min_batch, max_batch, k] rows, got 'oops'"),
        ("[[1, 59]]", "num_speculative_tokens_per_batch_size[0]: each row is [min_batch, max_batch, k], got a list"),
    ],
)
def test_a_malformed_speculation_schedule_is_refused_with_what_it_got(rows, says, tmp_path):
    text = (REPO / "data" / "configs" / "load-varies-adaptive-k-set.yaml").read_text()
    path = tmp_path / "schedule.yaml"
    path.write_text(text.replace("[[1, 59, 4], [60, 73, 3], [74, 98, 2], [99, 128, 1]]", rows))
    with pytest.raises(review.ReviewInputError) as info:
        read_config(forms.load(path))
    assert says in str(info.value)


def test_a_hardware_file_and_a_model_config_that_do_not_parse_say_so_alike(tmp_path):
    """The two JSON files a config names are read by one reader: the file's line, then the config line naming it."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "H200",\n "memory_gb": }\n')
    for deployment in ({"hardware-file": str(bad)}, {"gpu": "H100", "model-config": str(bad)}):
        with pytest.raises(review.ReviewInputError, match=rf"^{bad}:2: not valid JSON \(Expecting value\); named by "):
            cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct", **deployment)
    with pytest.raises(review.ReviewInputError, match=r"hardware-file: no such file: .*missing\.json"):
        cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct", **{"hardware-file": str(tmp_path / "missing.json")})
    (tmp_path / "model").mkdir()
    with pytest.raises(review.ReviewInputError, match=r"model-config: no config.json in .*model"):
        cfg_of(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct", **{"gpu": "H100", "model-config": str(tmp_path / "model")}
        )
