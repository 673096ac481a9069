"""Launch scripts with variables, LoRA adapters and benchmark-only settings, as teams write them."""

from __future__ import annotations

import json

import pytest

from servelab import review
from servelab.review import arithmetic, checks, forms, shell
from servelab.review.serving import read_config

pytestmark = pytest.mark.unit

WORKLOAD = {
    "name": "chat",
    "task": "chat",
    "concurrency": {"typical": 8, "peak": 16},
    "prompt-tokens": {"mean": 800, "p99": 3000},
    "output-tokens": {"mean": 200, "p99": 900},
}


def cfg_of(text: str, variables=None, base_dir=None, **deployment):
    return read_config(
        forms.parse(text, name="run.sh", deployment=deployment or None, variables=variables, base_dir=base_dir)
    )


# --- shell variables -----------------------------------------------------------------------

SCRIPT = """#!/bin/bash
MODEL_PATH=meta-llama/Llama-3.1-70B-Instruct
export TP_SIZE=4
DP=${DP:-2}
vllm serve ${MODEL_PATH} \\
  --tensor-parallel-size $TP_SIZE \\
  --data-parallel-size "$DP" \\
  --max-num-seqs $((TP_SIZE * DP * 16)) \\
  --served-model-name '$NOT_EXPANDED'
"""


def test_variables_assigned_earlier_in_the_script_resolve_with_their_lines():
    cfg = cfg_of(SCRIPT, gpu="H100", **{"gpus-per-node": 8})
    assert cfg.model_name == "meta-llama/Llama-3.1-70B-Instruct"
    assert (cfg.parallel.tensor_parallel_size, cfg.parallel.data_parallel_size, cfg.scheduler.max_num_seqs) == (
        4,
        2,
        128,
    )  # 4 x 2 x 16
    assert cfg.doc.line(("max-num-seqs",)) == 8


def test_the_environment_overrides_a_default_but_not_an_assignment():
    cfg = cfg_of(SCRIPT, variables={"DP": "1", "TP_SIZE": "8"}, gpu="H100", **{"gpus-per-node": 8})
    assert (cfg.parallel.tensor_parallel_size, cfg.parallel.data_parallel_size, cfg.scheduler.max_num_seqs) == (
        4,
        1,
        64,
    )


def test_an_unassigned_variable_is_refused_by_name_with_how_to_pass_it():
    with pytest.raises(review.ReviewInputError) as info:
        cfg_of("vllm serve Qwen/Qwen3-8B \\\n  --tensor-parallel-size $TP_SIZE", gpu="H100")
    message = str(info.value)
    assert message.startswith("run.sh:2:") and "$TP_SIZE" in message and "--var TP_SIZE=VALUE" in message


def test_unresolved_arithmetic_names_its_variables_not_a_star():
    with pytest.raises(review.ReviewInputError) as info:
        cfg_of("vllm serve Qwen/Qwen3-8B --max-num-seqs $((NUM_GPUS * 32))", gpu="H100")
    assert "NUM_GPUS" in str(info.value) and "'*' is not a flag" not in str(info.value)


def test_a_command_substitution_cannot_be_resolved():
    with pytest.raises(review.ReviewInputError) as info:
        cfg_of("vllm serve Qwen/Qwen3-8B --tensor-parallel-size $(nvidia-smi -L | wc -l)", gpu="H100")
    assert "$(nvidia-smi" in str(info.value)


def test_shell_arithmetic_is_integer_arithmetic():
    assert shell.resolve("A=7\necho $((A / 2)) $((A % 4)) $(((A + 1) * -2))") == "A=7\necho 3 3 -16"
    assert shell.resolve("echo ${X:-8} ${X}", {}) == "echo 8 ${X}"
    assert shell.resolve("echo ${X:=8} ${X}", {}) == "echo 8 8"


def test_the_command_line_takes_var(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("# deployment: {gpu: H100, gpus-per-node: 8}\nvllm serve Qwen/Qwen3-8B --max-num-seqs $SEQS\n")
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(WORKLOAD))
    report = review.review_files(script, workload, variables={"SEQS": "24"})
    assert report.finding("batching").setting == "max-num-seqs 24 (line 2)"


# --- LoRA ----------------------------------------------------------------------------------


def _adapter(tmp_path, name, base, rank):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": rank}))
    return folder


def test_lora_slots_take_memory_worked_by_hand():
    """Llama 3.1 8B, rank 16, 4 slots: per layer q (4096 + 4096), k and v (4096 + 1024), o (4096 + 4096),
    gate and up (4096 + 14336), down (14336 + 4096) = 81,920; x 32 layers x 16 x 4 slots x 2 bytes = 0.34 GB."""
    cfg = cfg_of("vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-lora --max-loras 4", gpu="H100")
    assert (cfg.lora.max_loras, cfg.lora.max_lora_rank) == (4, 16)
    assert arithmetic.lora_gb(cfg) == pytest.approx(81_920 * 32 * 16 * 4 * 2 / 1e9)
    assert arithmetic.rank_weight_gb(cfg) == pytest.approx(arithmetic.weight_gb(cfg) + arithmetic.lora_gb(cfg))


def test_lora_a_or_b_is_whole_on_every_tensor_parallel_gpu():
    """vLLM 0.32 (vllm/lora/layers/base_linear.py): column-parallel q/k/v and gate/up keep lora_a
    (r x input) whole on every GPU, row-parallel o and down keep lora_b (output x r) whole. Llama 3.3 70B,
    TP 8, 16 slots of rank 16, per GPU per layer per rank: q/k/v 3 x 8192 + (8192 + 2 x 1024) / 8,
    o 8192 / 8 + 8192, gate/up 2 x 8192 + 2 x 28672 / 8, down 28672 / 8 + 8192 = 70,400;
    x 80 layers x 16 x 16 slots x 2 bytes = 2.88 GB per GPU (not 23.1 / 8 split as the weights are)."""
    text = (
        "vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 8 --enable-lora --max-loras 16 "
        "--lora-modules adapter0=/models/qsq"
    )
    cfg = cfg_of(text, gpu="H100", **{"gpus-per-node": 8})
    per_gpu = 70_400 * 80 * 16 * 16 * 2 / 1e9
    assert arithmetic.lora_gb(cfg) / 8 == pytest.approx(per_gpu)
    assert round(per_gpu, 2) == 2.88
    sharded = cfg_of(text + " --fully-sharded-loras", gpu="H100", **{"gpus-per-node": 8})
    by_hand = (4 * 8192 + 2 * 8192 + 2 * 1024 + 3 * 8192 + 3 * 28672) * 80 * 16 * 16 * 2 / 1e9  # every buffer 1/TP
    assert arithmetic.lora_gb(sharded) == pytest.approx(by_hand)


def test_lora_on_a_mixture_of_experts_counts_the_expert_buffers():
    """FusedMoEWithLoRA (vllm/lora/layers/fused_moe.py) allocates, per slot and layer, for each of the
    128 local experts (no expert parallelism: all of them, width 768 / TP 2 = 384): w13 lora_a
    2 x 64 x 2048, w2 lora_b 2048 x 64, w13 lora_b 2 x 384 x 64, w2 lora_a 64 x 384 = 59,768,832
    elements; attention 64 x (3 x 2048 + 5120 / 2 + 4096 / 2 + 2048) = 819,200. Qwen3-30B-A3B, 48 layers,
    8 slots, bf16: 46.5 GB per GPU at TP 2 (the attention-only count said 0.86 GB)."""
    cfg = cfg_of(
        "vllm serve Qwen/Qwen3-30B-A3B --enable-lora --max-loras 8 --max-lora-rank 64 "
        "--max-model-len 16384 --tensor-parallel-size 2",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    experts = 2 * 128 * 64 * 2048 + 128 * 2048 * 64 + 2 * 128 * 384 * 64 + 128 * 64 * 384
    assert experts == 59_768_832
    per_gpu = (experts + 819_200) * 48 * 8 * 2 / 1e9
    assert arithmetic.lora_gb(cfg) / 2 == pytest.approx(per_gpu)
    assert round(per_gpu, 1) == 46.5
    # With expert parallelism each GPU holds 64 whole experts at the full width.
    ep = cfg_of(
        "vllm serve Qwen/Qwen3-30B-A3B --enable-lora --max-loras 8 --max-lora-rank 64 "
        "--tensor-parallel-size 2 --enable-expert-parallel",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    ep_experts = 2 * 64 * 64 * 2048 + 64 * 2048 * 64 + 3 * 64 * 768 * 64
    assert arithmetic.lora_gb(ep) / 2 == pytest.approx((ep_experts + 819_200) * 48 * 8 * 2 / 1e9)


def test_adapter_trained_on_another_base_is_wrong(tmp_path):
    _adapter(tmp_path, "sql", "Qwen/Qwen2.5-32B-Instruct", 16)
    cfg = cfg_of(
        "vllm serve Qwen/Qwen2.5-72B-Instruct --tensor-parallel-size 4 --enable-lora --lora-modules sql=./sql",
        base_dir=tmp_path,
        gpu="H100",
        **{"gpus-per-node": 4},
    )
    finding = checks.check_lora(cfg, None, None)
    assert finding.verdict == "wrong" and "trained on Qwen/Qwen2.5-32B-Instruct" in finding.reason


def test_adapter_wider_than_the_slots_is_wrong(tmp_path):
    _adapter(tmp_path, "chat", "Qwen/Qwen2.5-7B-Instruct", 64)
    cfg = cfg_of(
        "vllm serve Qwen/Qwen2.5-7B-Instruct --enable-lora --lora-modules chat=./chat", base_dir=tmp_path, gpu="H100"
    )
    finding = checks.check_lora(cfg, None, None)
    assert finding.verdict == "wrong" and "max-lora-rank to at least 64" in finding.fix


def test_adapters_matching_the_base_are_justified_and_unknown_ones_unjustified(tmp_path):
    _adapter(tmp_path, "chat", "Qwen2.5-7B-Instruct", 8)
    json_form = '\'{"name": "tool", "path": "org/tool-lora", "base_model_name": "Qwen/Qwen2.5-7B-Instruct"}\''
    cfg = cfg_of(
        f"vllm serve Qwen/Qwen2.5-7B-Instruct --enable-lora --lora-modules chat=./chat {json_form}",
        base_dir=tmp_path,
        gpu="H100",
    )
    assert [a.name for a in cfg.lora.adapters] == ["chat", "tool"]
    assert checks.check_lora(cfg, None, None).verdict == "justified"
    remote = cfg_of("vllm serve Qwen/Qwen2.5-7B-Instruct --enable-lora --lora-modules chat=org/chat-lora", gpu="H100")
    assert checks.check_lora(remote, None, None).verdict == "unjustified"


# --- benchmark-only settings -----------------------------------------------------------------


def test_dummy_weights_and_ignore_eos_are_not_production():
    text = (
        "vllm serve Qwen/Qwen3-8B --load-format dummy\n"
        "vllm bench serve --model Qwen/Qwen3-8B --ignore-eos --num-prompts 100\n"
    )
    cfg = cfg_of(text, gpu="H100")
    assert cfg.model_config.load_format == "dummy" and cfg.benchmark_flags == (("ignore-eos", 2),)
    finding = checks.check_benchmark_settings(cfg)
    assert (
        finding.verdict == "wrong"
        and "random weights" in finding.reason
        and "--ignore-eos (line 2)" in finding.evidence
    )
    plain = cfg_of("vllm serve Qwen/Qwen3-8B", gpu="H100")
    findings, _ = checks.run_checks(
        plain, review.workload_spec.read_workload(review.schema.Doc("w", WORKLOAD, "workload"))
    )
    assert "benchmark_settings" not in {f.knob for f in findings}


def test_a_manifest_env_reference_resolves_from_var():
    manifest = """# deployment: {gpu: H100}
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.32.0
        args: ["--model", "Qwen/Qwen3-8B", "--max-num-seqs", "$(MAX_SEQS)"]
        resources: {limits: {nvidia.com/gpu: 1}}
"""
    with pytest.raises(review.ReviewInputError) as info:
        cfg_of(manifest)
    assert "--var MAX_SEQS=VALUE" in str(info.value)
    assert cfg_of(manifest, variables={"MAX_SEQS": "48"}).scheduler.max_num_seqs == 48


# --- how a shell reads a command line -------------------------------------------------------


def test_a_one_line_command_with_a_json_value_is_a_command_not_yaml(tmp_path):
    """YAML reads `vllm serve M --x '{"temperature": 0.6}'` as a one-key mapping; it is a command line."""
    path = tmp_path / "serve.sh"
    path.write_text(
        "# deployment: {gpu: H100, gpus-per-node: 1}\nvllm serve meta-llama/Llama-3.1-8B-Instruct "
        "--max-model-len 16384 --override-generation-config '{\"temperature\": 0.6}'\n"
    )
    cfg = read_config(forms.load(path))
    assert (cfg.model_name, cfg.model_config.max_model_len) == ("meta-llama/Llama-3.1-8B-Instruct", 16384)
    assert "override-generation-config" in cfg.not_reviewed


def test_a_comment_inside_a_continuation_ends_the_command_as_bash_does():
    """bash: `# --max-model-len 8192 \\` is a comment to the end of its line, the `\\` included, so
    the command ends there and `--max-num-seqs 64` runs as a command of its own."""
    text = (
        "vllm serve meta-llama/Llama-3.3-70B-Instruct \\\n  --tensor-parallel-size 4 \\\n"
        "  # --max-model-len 8192 \\\n  --max-num-seqs 64\n"
    )
    with pytest.raises(
        review.ReviewInputError,
        match=r"run.sh:4: `--max-num-seqs` starts a command of its own, "
        r"because line 3 ends",
    ):
        cfg_of(text, gpu="H100", **{"gpus-per-node": 8})
    # A comment after the last continued line ends nothing early.
    cfg = cfg_of(
        "vllm serve meta-llama/Llama-3.3-70B-Instruct \\\n  --tensor-parallel-size 4 \\\n"
        "  --max-num-seqs 64  # the SLO's batch\n",
        gpu="H100",
        **{"gpus-per-node": 8},
    )
    assert (cfg.parallel.tensor_parallel_size, cfg.scheduler.max_num_seqs) == (4, 64)


def test_a_backslash_then_a_space_passes_a_space_and_ends_the_command():
    text = "vllm serve meta-llama/Llama-3.3-70B-Instruct \\\n  --tensor-parallel-size 4 \\ \n  --max-num-seqs 64\n"
    with pytest.raises(review.ReviewInputError, match=r"run.sh:2: `\\` is followed by a space, so bash passes a ' '"):
        cfg_of(text, gpu="H100", **{"gpus-per-node": 8})


def test_a_variable_only_running_the_script_knows_is_refused_with_why():
    branches = (
        'if [ "$MODE" = "big" ]; then\n  TP=8\nelse\n  TP=2\nfi\n'
        "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size $TP\n"
    )
    with pytest.raises(
        review.ReviewInputError,
        match=r"\$TP is assigned inside the if on line 1 \(line 4\), so its "
        r"value depends on which branch runs.*--var TP=VALUE",
    ):
        cfg_of(branches, gpu="H100", **{"gpus-per-node": 8})
    assert (
        cfg_of(branches, variables={"TP": "8"}, gpu="H100", **{"gpus-per-node": 8}).parallel.tensor_parallel_size == 8
    )
    loop = "for TP in 2 4 8; do\n  vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size $TP\ndone\n"
    with pytest.raises(review.ReviewInputError, match=r"\$TP is set by the for loop on line 1"):
        cfg_of(loop, gpu="H100", **{"gpus-per-node": 8})
    output = (
        "NGPU=$(nvidia-smi -L | wc -l)\nvllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size $NGPU\n"
    )
    with pytest.raises(review.ReviewInputError, match=r"\$NGPU is assigned a command's output on line 1"):
        cfg_of(output, gpu="H100", **{"gpus-per-node": 8})


def test_a_required_variable_and_a_bash_array_are_named():
    text = "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size ${TP:?set TP first}\n"
    with pytest.raises(review.ReviewInputError, match=r"--tensor-parallel-size \$\{TP\}: \$TP is not assigned"):
        cfg_of(text, gpu="H100", **{"gpus-per-node": 8})
    assert cfg_of(text, variables={"TP": "4"}, gpu="H100", **{"gpus-per-node": 8}).parallel.tensor_parallel_size == 4
    with pytest.raises(review.ReviewInputError, match=r"\$\{ARGS\[@\]\} expands a bash array"):
        cfg_of(
            'ARGS=(--tensor-parallel-size 4)\nvllm serve meta-llama/Llama-3.3-70B-Instruct "${ARGS[@]}"\n',
            gpu="H100",
            **{"gpus-per-node": 8},
        )


def test_a_dockerfile_exec_form_runs_entrypoint_then_cmd():
    """Docker's exec form runs ENTRYPOINT's words then CMD's, with no shell (no $VAR expansion)."""
    text = (
        "FROM vllm/vllm-openai:v0.11.0\nENV MODEL meta-llama/Llama-3.1-8B-Instruct\n"
        'ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
        'CMD ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16384", "--max-num-seqs", "64"]\n'
    )
    cfg = cfg_of(text, gpu="H100")
    assert (cfg.model_name, cfg.model_config.max_model_len, cfg.scheduler.max_num_seqs) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        16384,
        64,
    )
    assert cfg.doc.line(("max-num-seqs",)) == 4
    # CMD alone: the vllm/vllm-openai image's own ENTRYPOINT ["vllm", "serve"] comes first.
    cfg = cfg_of(
        'FROM vllm/vllm-openai:latest\nCMD ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "32"]\n', gpu="H100"
    )
    assert (cfg.model_name, cfg.scheduler.max_num_seqs) == ("meta-llama/Llama-3.1-8B-Instruct", 32)
