"""The forms a deployment is published in, read without running anything (review/readers.py,
compose.py), the vLLM release a config pins (versions.py), the removed-flag table by release
(vllm_flags.REMOVAL_TABLE), and the input limits (limits.py). Pure: no vLLM import, no engine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab import review
from servelab.review import forms, limits, readers, versions, vllm_flags
from servelab.review.serving import read_config

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / "data" / "configs" / "public"
WORKLOAD = {
    "name": "chat",
    "task": "chat",
    "concurrency": {"typical": 8, "peak": 16},
    "prompt-tokens": {"mean": 800, "p99": 3000},
    "output-tokens": {"mean": 200, "p99": 900},
    "slo": {"ttft-p99-ms": 1000, "tpot-p99-ms": 50},
}


def cfg(path, **kwargs):
    return read_config(forms.load(path, **kwargs))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def review_text(tmp_path: Path, name: str, text: str, **kwargs) -> review.Report:
    workload = write(tmp_path, "w.yaml", "\n".join(f"{k}: {v}" for k, v in WORKLOAD.items()).replace("'", ""))
    return review.review_files(write(tmp_path, name, text), workload, **kwargs)


# --- each form on the real published file ------------------------------------------------------


def test_python_vllm_llm_script_as_published():
    c = cfg(PUBLIC / "kempner-qwen2.5-32b-llm.py")
    assert c.model.name == "Qwen/Qwen2.5-32B-Instruct"
    assert (c.parallel.tensor_parallel_size, c.cache.gpu_memory_utilization, c.model_config.dtype) == (
        1,
        0.9,
        "bfloat16",
    )
    assert c.doc.line(("gpu-memory-utilization",)) == 31


def test_ray_serve_llm_app_as_published():
    c = cfg(PUBLIC / "anyscale-llama-3.1-8b-ray-serve.py")
    assert c.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert (c.deployment.hardware.name, c.model_config.max_model_len, c.deployment.pod_replicas) == ("L4", 8192, 2)
    # os.environ["HF_TOKEN"] sits in runtime_env, which the reviewer never evaluates


def test_sagemaker_environment_as_published():
    doc = forms.load(PUBLIC / "aws-sagemaker-llama-3-8b-g6.py")
    c = read_config(doc)
    assert c.model.name == "meta-llama/Meta-Llama-3-8B-Instruct" and c.model_config.max_model_len == 2048
    assert (c.deployment.hardware.name, c.deployment.gpus_per_node) == ("L4", 1)  # ml.g6.4xlarge
    assert doc.vllm_version == "0.11.2" and "vllm:0.11.2-sagemaker-v1.2" in doc.vllm_version_source


def test_sagemaker_env_file_maps_as_the_entrypoint_does(tmp_path):
    path = write(
        tmp_path,
        "sm.env",
        "SM_VLLM_MODEL=Qwen/Qwen2.5-7B-Instruct\nSM_VLLM_TENSOR_PARALLEL_SIZE=2\nSM_VLLM_ENABLE_PREFIX_CACHING=\n"
        "HF_TOKEN=x\n# ml.g6e.12xlarge\n",
    )
    c = cfg(path)
    assert (
        c.parallel.tensor_parallel_size,
        c.cache.prefix_caching,
        c.deployment.hardware.name,
        c.deployment.gpus_per_node,
    ) == (2, True, "L40S", 4)
    bad = write(tmp_path, "bad.env", 'SM_VLLM_MODEL="Qwen/Qwen2.5-7B-Instruct\n')
    with pytest.raises(review.ReviewInputError, match=r"bad\.env:1: cannot read SM_VLLM_MODEL= .*check its quotes"):
        forms.load(bad)
    assert readers.sagemaker_instance("ml.p5.48xlarge") == ("H100", 8)
    assert readers.sagemaker_instance("ml.g5.2xlarge") == ("A10G", 1)


def test_unquoted_json_in_an_env_file_is_the_json_as_written(tmp_path):
    """SM_VLLM_SPECULATIVE_CONFIG={"method":"ngram",...} unquoted: the line's value as it stands (a shell
    would strip its double quotes; the env file reaches SageMaker's entrypoint as written); quoted, the
    same JSON."""
    c = cfg(DATA / "sagemaker-unquoted-json.env")
    assert (c.spec.method, c.spec.num_speculative_tokens) == ("ngram", 3)
    quoted = (DATA / "sagemaker-unquoted-json.env").read_text().replace("={", "='{").replace("3}\n", "3}'\n")
    assert "'{" in quoted
    q = cfg(write(tmp_path, "quoted.env", quoted))
    assert (q.spec.method, q.spec.num_speculative_tokens) == ("ngram", 3)


def test_docker_compose_as_published():
    path = PUBLIC / "warehouse-mistral-7b-compose.yml"
    c = cfg(path)
    assert c.model_name == "mistralai/Mistral-7B-v0.3"  # the catalogue's Instruct v0.3 has its architecture
    assert path.read_text().splitlines()[c.doc.line(("model",)) - 1].strip() == "- --model"


def test_docker_compose_string_command_entrypoint_and_services(tmp_path):
    text = (
        "# deployment: {gpu: L40S}\nservices:\n  web:\n    image: nginx\n  llm:\n"
        "    image: vllm/vllm-openai:v0.10.0\n"
        "    command: --model ${MODEL:-Qwen/Qwen2.5-7B-Instruct} --swap-space 16 --max-model-len 8192\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['0', '1'], "
        "capabilities: [gpu]}]}}}\n"
    )
    doc = forms.load(write(tmp_path, "docker-compose.yml", text))
    c = read_config(doc)
    assert (c.model.name, c.model_config.max_model_len, c.deployment.gpus_per_node) == (
        "Qwen/Qwen2.5-7B-Instruct",
        8192,
        2,
    )
    assert doc.vllm_version == "0.10.0" and c.removed_flags == (("swap-space", 16, 7),)
    two = text.replace("  web:\n    image: nginx\n", "  other:\n    image: vllm/vllm-openai:latest\n")
    with pytest.raises(review.ReviewInputError, match=r"2 services run vLLM \(other, llm\); pick one with --select"):
        forms.load(write(tmp_path, "two.yml", two))
    assert cfg(write(tmp_path, "two.yml", two), select="llm").model_config.max_model_len == 8192
    entry = text.replace(
        "    command: --model",
        '    entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n    command: --model',
    )
    assert cfg(write(tmp_path, "entry.yml", entry)).model_config.max_model_len == 8192


def test_slurm_script_resolves_slurm_variables_from_its_sbatch_lines():
    c = cfg(PUBLIC / "kempner-deepseek-r1-0528-4x4-h100.sh")
    assert c.parallel.tensor_parallel_size == 16  # $((SLURM_NNODES * SLURM_GPUS_ON_NODE)) = 4 x 4
    assert (c.deployment.nodes, c.deployment.gpus_per_node, c.deployment.hardware.name) == (
        4,
        4,
        "H100",
    )  # --constraint=h100
    assert [name for name, _, _ in c.removed_flags] == ["enable-reasoning"]


def test_slurm_gres_and_short_options(tmp_path):
    env, deployment, _ = readers.slurm_environment(
        "#SBATCH -N 2\n#SBATCH --gres=gpu:a100:8\n#SBATCH --ntasks-per-node=1\n"
    )
    assert env["SLURM_NNODES"] == env["SLURM_JOB_NUM_NODES"] == "2"
    assert env["SLURM_GPUS_ON_NODE"] == "8" and env["SLURM_NTASKS"] == "2"
    assert deployment == {"nodes": 2, "gpus-per-node": 8, "gpu-name": "a100"}
    c = cfg(PUBLIC / "kempner-llama-3.1-405b-2x4-slurm.sh")
    assert (
        c.deployment.nodes,
        c.deployment.gpus_per_node,
        c.parallel.tensor_parallel_size,
        c.model_config.max_model_len,
    ) == (2, 4, 8, 16384)


def test_systemd_unit_as_published():
    c = cfg(PUBLIC / "local-llm-server-llama-3.3-70b-awq.service")
    assert (c.model.name, c.model_config.quantization, c.model_config.max_model_len) == (
        "meta-llama/Llama-3.3-70B-Instruct",
        "awq",
        4096,
    )
    assert c.deployment.hardware.name == "RTX 3090" and c.doc.line(("quantization",)) == 20


def test_systemd_environment_expands_in_exec_start(tmp_path):
    unit = (
        '# deployment: {gpu: L4}\n[Service]\nEnvironment="MODEL=Qwen/Qwen2.5-7B-Instruct" "LEN=4096"\n'
        "ExecStart=-/usr/bin/vllm serve ${MODEL} \\\n    --max-model-len $LEN\nRestart=always\n"
    )
    c = cfg(write(tmp_path, "vllm.service", unit))
    assert (c.model.name, c.model_config.max_model_len, c.doc.line(("max-model-len",))) == (
        "Qwen/Qwen2.5-7B-Instruct",
        4096,
        5,
    )


def test_a_kserve_inference_service_still_reads():
    c = cfg(PUBLIC / "kserve-llama3-8b.yaml")
    assert c.model.name == "meta-llama/Meta-Llama-3-8B-Instruct"


# --- Python: literals only, refused by name otherwise ------------------------------------------


def test_python_values_that_need_running_are_refused_by_name(tmp_path):
    text = "# deployment: {gpu: H100}\nimport torch\nfrom vllm import LLM\nllm = LLM(model='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=torch.cuda.device_count())\n"
    with pytest.raises(review.ReviewInputError, match=r"x\.py:4: tensor_parallel_size=torch\.cuda\.device_count\(\)"):
        forms.load(write(tmp_path, "x.py", text))
    twice = "# deployment: {gpu: H100}\nfrom vllm import LLM\nTP = 1\nTP = 2\nLLM(model='Qwen/Qwen3-8B', tensor_parallel_size=TP)\n"
    with pytest.raises(review.ReviewInputError, match="TP is assigned more than once"):
        forms.load(write(tmp_path, "y.py", twice))
    unreviewed = "# deployment: {gpu: H100}\nimport os\nfrom vllm import LLM\nLLM(model='Qwen/Qwen3-8B', download_dir=os.path.join('a', 'b'))\n"
    assert cfg(write(tmp_path, "z.py", unreviewed)).model.name == "Qwen/Qwen3-8B"


def test_python_environment_reads_take_var_then_default(tmp_path):
    text = (
        "# deployment: {gpu: H100, gpus-per-node: 2}\nimport os\nfrom vllm import AsyncEngineArgs, AsyncLLMEngine\n"
        "args = AsyncEngineArgs(model=os.environ.get('MODEL', 'Qwen/Qwen3-8B'), tensor_parallel_size=int(2) if False else 2,\n"
        "    max_model_len=os.getenv('LEN', 4096))\nengine = AsyncLLMEngine.from_engine_args(args)\n"
    )
    with pytest.raises(review.ReviewInputError, match=r"tensor_parallel_size=int\(2\) if False else 2"):
        forms.load(write(tmp_path, "a.py", text))
    text = text.replace("int(2) if False else 2", "2")
    assert cfg(write(tmp_path, "a.py", text)).model_config.max_model_len == 4096
    assert cfg(write(tmp_path, "a.py", text), variables={"LEN": "2048"}).model_config.max_model_len == 2048


def test_a_sagemaker_models_deploy_call_gives_its_instance():
    """model = Model(image_uri=..., env={SM_VLLM_*}); model.deploy(instance_type="ml.g6e.xlarge"): one L40S."""
    c = cfg(DATA / "sagemaker-model-deploy.py")
    assert (c.deployment.hardware.name, c.deployment.gpus_per_node, c.scheduler.max_num_seqs) == ("L40S", 1, 128)
    assert c.doc.line(("deployment", "gpu")) == 18


def test_int_of_an_environment_read_takes_var_then_default(tmp_path):
    """tensor_parallel_size=int(os.environ.get("TP", "1")): the default, or --var TP=2, converted as Python does."""
    path = DATA / "python-int-of-environ.py"
    assert cfg(path).parallel.tensor_parallel_size == 1
    assert cfg(path, variables={"TP": "2"}).parallel.tensor_parallel_size == 2
    with pytest.raises(review.ReviewInputError, match=r"int\('two'\) fails in Python"):
        forms.load(path, variables={"TP": "two"})


def test_two_engines_in_one_script_ask_for_select(tmp_path):
    text = "# deployment: {gpu: H100}\nfrom vllm import LLM\na = LLM(model='Qwen/Qwen3-8B')\nb = LLM(model='Qwen/Qwen3-32B')\n"
    with pytest.raises(review.ReviewInputError, match="2 vLLM engines are built here .*--select LINE"):
        forms.load(write(tmp_path, "two.py", text))
    assert cfg(write(tmp_path, "two.py", text), select="4").model.name == "Qwen/Qwen3-32B"


# --- a form servelab does not read --------------------------------------------------------------


@pytest.mark.parametrize(
    "name, text",
    [
        ("train.py", "import torch\nmodel = torch.nn.Linear(2, 2)\n"),
        ("workflow.yaml", "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n"),
        ("notes.txt", "we deploy with vllm on Tuesdays\n"),
        ("values.json", '{"replicas": 3}\n'),
    ],
)
def test_an_unknown_form_is_named_as_one_servelab_does_not_read(tmp_path, name, text):
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(write(tmp_path, name, text))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / name}: not a form servelab reads")
    assert "YAML syntax error" not in message and "is not a flag" not in message
    for form in ("docker compose", "SLURM job script", "systemd unit", "Ray Serve LLMConfig", "SM_VLLM_"):
        assert form in message


def test_a_helm_template_and_a_markdown_recipe_are_named_for_what_they_are(tmp_path):
    """Neither reaches another format's parser (a template read as a broken command, markdown as a
    script with unbalanced quotes): each is named, with what to pass instead."""
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(DATA / "helm-template.yaml")
    message = str(info.value)
    assert message.startswith(f"{DATA / 'helm-template.yaml'}: not a form servelab reads: a Helm template (line 4")
    assert "`helm template RELEASE CHART" in message
    with pytest.raises(review.ReviewInputError) as info:
        forms.load(DATA / "recipe-qwen3-next.md")  # the head of vllm-project/recipes Qwen/Qwen3-Next.md
    message = str(info.value)
    assert (
        "not a form servelab reads: a markdown document; it shows 3 `vllm serve` commands (on lines 25, 39, 52)"
        in message
    )
    assert "copy the command or config it shows" in message
    # a Jinja chat template inside a command is not a Go template
    chat = "# deployment: {gpu: L4}\nvllm serve Qwen/Qwen3-8B --chat-template '{{- bos_token }}{{ message }}'\n"
    assert forms.load(write(tmp_path, "serve.sh", chat)).data["model"] == "Qwen/Qwen3-8B"


def test_a_broken_yaml_file_still_says_yaml(tmp_path):
    with pytest.raises(review.ReviewInputError, match="YAML syntax error"):
        forms.load(write(tmp_path, "c.yaml", "model: [a\n"))


# --- the vLLM release a config pins ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, variables, version",
    [
        ("image: vllm/vllm-openai:v0.10.0\n", None, "0.10.0"),
        ("image: docker.io/vllm/vllm-openai:v0.9.2\n", None, "0.9.2"),
        ("RUN pip install vllm==0.8.5 ray\n", None, "0.8.5"),
        ("image: vllm/vllm-openai:latest\n", None, "0.32.0"),
        ("image: vllm/vllm-openai:v0.10.0\n", {"VLLM_VERSION": "0.11.1"}, "0.11.1"),
        ("x = '123.dkr.ecr.us-west-2.amazonaws.com/vllm:0.11.2-sagemaker-v1.2'\n", None, "0.11.2"),
        ("docker run rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006 vllm serve m\n", None, "0.10.2"),
        ("image: rocm/vllm-dev:rocm6.4.1_vllm_0.9.1.post1_20250702\n", None, "0.9.1.post1"),
    ],
)
def test_version_detection(text, variables, version):
    assert versions.detect(text, variables).version == version


@pytest.mark.parametrize("service, version, line", [("vllm-server", "0.11.0", 26), ("legacy", "0.6.3.post1", 18)])
def test_the_version_is_the_selected_services_image_not_the_first_in_the_file(service, version, line):
    doc = forms.load(DATA / "compose-two-vllm-images.yaml", select=service, deployment={"gpu": "H100"})
    assert doc.vllm_version == version
    assert doc.vllm_version_source.endswith(f"(line {line})")


def test_a_bad_vllm_version_var_is_refused(tmp_path):
    with pytest.raises(review.ReviewInputError, match="VLLM_VERSION=newest: write a vLLM release"):
        forms.load(
            write(tmp_path, "c.sh", "# deployment: {gpu: L4}\nvllm serve Qwen/Qwen3-8B\n"),
            variables={"VLLM_VERSION": "newest"},
        )


# --- removed flags, by release -----------------------------------------------------------------------


def test_every_removed_flag_has_its_release_or_none_and_a_source():
    for name, (release, instead, takes_value, source) in vllm_flags.REMOVAL_TABLE.items():
        assert vllm_flags.lookup(name)[0] is None, f"{name} is still a flag of the installed vLLM"
        assert release is None or vllm_flags.release_key(release) <= vllm_flags.release_key(vllm_flags.version())
        assert instead and isinstance(takes_value, bool)
        assert re.search(r"#\d+|vllm_flags\.json", source), f"{name}: no source"


def test_removed_flags_by_release():
    assert vllm_flags.removed_by("enable-reasoning", "0.9.2") is False
    assert vllm_flags.removed_by("enable-reasoning", "0.10.0") is True
    assert vllm_flags.removed_by("swap-space", "0.17.1") is False
    assert vllm_flags.removed_by("swap-space", "v0.18.0") is True
    assert vllm_flags.removed_by("device", "0.10.0") is None  # its release is not on record
    assert vllm_flags.removed_by("device", "0.32.0") is True
    assert vllm_flags.release_key("0.6.6.post1") == (0, 6, 6)
    # a release known to still have a flag whose removing release is not on record (vllm_flags.STILL_IN)
    assert vllm_flags.removed_by("num-scheduler-steps", "0.9.2") is False
    assert vllm_flags.removed_by("num-scheduler-steps", "0.10.2") is None
    assert vllm_flags.removed_by("use-v2-block-manager", "0.6.3.post1") is False
    assert set(vllm_flags.STILL_IN) <= set(vllm_flags.REMOVAL_TABLE)
    assert all(vllm_flags.REMOVAL_TABLE[n][0] is None for n in vllm_flags.STILL_IN)


def test_dotted_json_flags_and_the_o_shorthand_read_as_vllms_parser_reads_them(tmp_path):
    """vLLM 0.32's FlexibleArgumentParser: `-cc.pass_config.fuse_rope_kvcache=True` is one key of
    --compilation-config (merged with the file's other dotted keys), a value JSON else text; `key+ a,b` a list;
    -O3 / -O 3 is --optimization-level. The AMD recipe (fenced as published) is reviewed, not refused."""
    doc = forms.load(DATA / "recipe-gpt-oss-mi355x-dotted-cc.sh", deployment={"gpu": "MI355X"})
    assert doc.data["compilation-config"] == {
        "pass_config": {"fuse_rope_kvcache": "True"},  # json.loads("True") fails: vLLM passes the text
        "use_inductor_graph_partition": "True",
    }
    assert (doc.data["tensor-parallel-size"], doc.data["block-size"], doc.data["gpu-memory-utilization"]) == (
        8,
        64,
        0.95,
    )
    text = (
        "# deployment: {gpu: H100}\nvllm serve Qwen/Qwen3-8B -O3 --compilation-config.cudagraph_capture_sizes+ 1,2 "
        "--compilation-config.cudagraph_capture_sizes+ 4 --speculative-config.method ngram "
        "--speculative-config.num_speculative_tokens 3 --speculative-config.prompt_lookup_max 4\n"
    )
    cfg = read_config(forms.load(write(tmp_path, "serve.sh", text)))
    assert cfg.doc.data["optimization-level"] == 3
    assert cfg.doc.data["compilation-config"] == {"cudagraph_capture_sizes": ["1", "2", "4"]}
    assert (cfg.spec.method, cfg.spec.num_speculative_tokens) == ("ngram", 3)
    with pytest.raises(review.ReviewInputError, match=r"serve\.sh:2: --not-a-flag is not a flag"):
        forms.load(write(tmp_path, "serve.sh", "# deployment: {gpu: H100}\nvllm serve m --not-a-flag.x 1\n"))


def test_a_config_file_the_command_names_is_merged_as_vllm_merges_it(tmp_path):
    """`vllm serve M --config ${YAML_CONFIG} --tensor-parallel-size 1` (vLLM's recipe for Llama 3.3 70B FP8):
    the YAML's keys are flags put right after the model, so the command line wins over the file."""
    folder = DATA / "recipe-llama-3.3-config"
    doc = forms.load(folder / "serve.sh")
    assert {k: v for k, v in doc.data.items() if k != "deployment"} == {
        "model": "nvidia/Llama-3.3-70B-Instruct-FP8",
        "kv-cache-dtype": "fp8",
        "async-scheduling": True,
        "enable-prefix-caching": False,  # no-enable-prefix-caching: true in the file
        "max-num-batched-tokens": 8192,
        "tensor-parallel-size": 1,
    }
    assert doc.line(("kv-cache-dtype",)) == 6  # the --config line
    text = "# deployment: {gpu: H100}\nvllm serve m --max-num-seqs 8 --config $CFG --max-num-batched-tokens 4096\n"
    write(
        tmp_path, "c.yaml", "max-num-seqs: 64\nmax-num-batched-tokens: 2048\nmodel: other\ndisable-log-stats: false\n"
    )
    merged = forms.load(write(tmp_path, "serve.sh", text), variables={"CFG": "c.yaml"})
    assert (merged.data["model"], merged.data["max-num-seqs"], merged.data["max-num-batched-tokens"]) == ("m", 8, 4096)
    assert "disable-log-stats" not in merged.data  # false, and the flag has no --no- form: vLLM passes nothing
    with pytest.raises(review.ReviewInputError, match=r"serve\.sh:2: --config \$CFG: .*--var CFG=VALUE"):
        forms.load(tmp_path / "serve.sh")
    with pytest.raises(review.ReviewInputError, match=r"--config gone\.yaml: vLLM reads its flags from that YAML file"):
        forms.load(tmp_path / "serve.sh", variables={"CFG": "gone.yaml"})


def test_a_flag_newer_than_the_pinned_release_is_a_finding(tmp_path):
    """vllm/vllm-openai:v0.6.3.post1 with --speculative-config and --async-scheduling: neither flag existed yet
    (vllm_flags.INTRODUCED_AFTER), so that vLLM will not start; on 0.32.0, or a release the table says
    nothing of, no finding."""
    workload = write(tmp_path, "w.yaml", "\n".join(f"{k}: {v}" for k, v in WORKLOAD.items()).replace("'", ""))
    old = review.review_files(DATA / "flags-newer-than-0.6.3.sh", workload)
    finding = old.finding("flags_too_new")
    assert finding.verdict == "wrong" and "vLLM 0.6.3.post1 will not start with --async-scheduling (line 5)" in (
        finding.reason
    )
    assert "--speculative-config (line 4)" in finding.reason and "PR #14434" in finding.evidence
    for release in ("0.32.0", "0.10.0"):  # has both / has speculative-config, async-scheduling not on record
        report = review.review_files(DATA / "flags-newer-than-0.6.3.sh", workload, variables={"VLLM_VERSION": release})
        assert "flags_too_new" not in report.verdicts()
    assert vllm_flags.lacked_by("async-scheduling", "0.9.1") and not vllm_flags.lacked_by("async-scheduling", "0.9.2")


def test_enable_reasoning_is_a_finding_and_the_rest_is_reviewed(tmp_path):
    text = "# deployment: {gpu: H100}\nvllm serve Qwen/Qwen3-8B --enable-reasoning --reasoning-parser deepseek_r1 --max-model-len 8192\n"
    report = review_text(tmp_path, "r.sh", text)
    finding = report.finding("removed_flags")
    assert finding.verdict == "wrong" and "removed in vLLM 0.10.0" in finding.evidence
    assert "did you mean" not in finding.reason and report.verdicts()["max_model_len"] == "justified"
    assert report.vllm_version == "0.32.0" and "judged as vLLM 0.32.0" in report.headline()


def test_a_config_pinned_to_an_older_vllm_is_judged_as_that_release(tmp_path):
    text = (
        "# deployment: {gpu: L40S}\ndocker run --gpus all vllm/vllm-openai:v0.10.0 --model Qwen/Qwen3-8B "
        "--swap-space 16 --max-model-len 8192\n"
    )
    report = review_text(tmp_path, "d.sh", text)
    finding = report.finding("removed_flags")
    assert finding.verdict == "justified" and "vLLM 0.10.0 still has --swap-space 16" in finding.reason
    assert "vLLM 0.10.0 will not start" not in finding.reason and report.vllm_version == "0.10.0"
    unsure = review_text(tmp_path, "e.sh", text.replace("--swap-space 16", "--device cuda"))
    assert unsure.finding("removed_flags").verdict == "unjustified"
    now = review_text(tmp_path, "f.sh", text.replace("v0.10.0", "v0.18.0"))
    assert (
        now.finding("removed_flags").verdict == "wrong"
        and "vLLM 0.18.0 will not start" in now.finding("removed_flags").reason
    )


# --- input limits ---------------------------------------------------------------------------------------


def test_a_huge_file_is_refused_from_its_size_without_reading_it(tmp_path):
    path = tmp_path / "huge.sh"
    with open(path, "wb") as f:  # sparse: 10 GB on paper, nothing on disk; reading it would take minutes
        f.truncate(10 * 1024**3)
    with pytest.raises(review.ReviewInputError, match=r"is 10,737,418,240 bytes; servelab reads files up to"):
        forms.load(path)


def test_a_ten_megabyte_one_line_command_is_refused(tmp_path):
    path = write(tmp_path, "long.sh", "vllm serve m --max-model-len " + "1" * 10_000_000 + "\n")
    with pytest.raises(review.ReviewInputError, match="servelab reads files up to"):
        forms.load(path)


def test_long_lines_deep_nesting_and_many_documents_are_refused(tmp_path):
    line = write(tmp_path, "line.sh", "vllm serve m \\\n  --served-model-name " + "a" * (limits.MAX_LINE + 1) + "\n")
    long = len("  --served-model-name ") + limits.MAX_LINE + 1
    with pytest.raises(review.ReviewInputError, match=rf"line\.sh:2: line 2 is {long:,} characters long"):
        forms.load(line)
    deep = write(tmp_path, "deep.yaml", "model: " + "[" * 100 + "]" * 100 + "\n")
    with pytest.raises(review.ReviewInputError, match="deep.yaml:1: nested more than 64 levels"):
        forms.load(deep)
    indented = "".join(" " * i + f"k{i}:\n" for i in range(100))
    with pytest.raises(review.ReviewInputError, match="nested more than 64 levels"):
        forms.load(write(tmp_path, "indent.yaml", indented))
    docs = write(tmp_path, "docs.yaml", "---\na: 1\n" * (limits.MAX_DOCUMENTS + 1))
    with pytest.raises(review.ReviewInputError, match="more than 200 YAML documents"):
        forms.load(docs)
    workload = write(tmp_path, "w.yaml", "name: " + "[" * 100 + "\n")
    with pytest.raises(review.ReviewInputError, match="w.yaml:1: nested more than 64 levels"):
        review.schema.load_yaml(workload, "workload")


DATA = REPO / "tests" / "data" / "review"
LAUGHS = "\n".join(
    f"x-{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi")
)  # nine anchors, each aliasing the last nine times: 9**9 values from a few hundred bytes


@pytest.mark.timeout(60)
def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    """PyYAML shares an alias's node with its anchor, so composing billion-laughs is cheap; every walk
    of it (the value, its lines) expands it. Each YAML entry point counts the expanded values first."""
    bomb = DATA / "billion-laughs.yaml"  # a vLLM YAML config whose max-num-seqs is the bomb
    says = rf"the serving config's YAML aliases \(\*name\) expand to more than {limits.MAX_YAML_NODES:,} values"
    with pytest.raises(review.ReviewInputError, match=rf"billion-laughs\.yaml: {says}"):
        forms.load(bomb)
    laughs = "x-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LAUGHS + "\n"
    workload = write(tmp_path, "w.yaml", laughs + "name: chat\ndescription: *i\n")
    with pytest.raises(review.ReviewInputError, match=r"w\.yaml: the workload's YAML aliases"):
        review.schema.load_yaml(workload, "workload")
    compose = laughs + "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    labels: *i\n"
    with pytest.raises(review.ReviewInputError, match=r"compose\.yaml: the serving config's YAML aliases"):
        forms.load(write(tmp_path, "compose.yaml", compose))
    helm = laughs + "servingEngineSpec:\n  modelSpec:\n  - name: m\n    modelURL: m\n    labels: *i\n"
    with pytest.raises(review.ReviewInputError, match=r"values\.yaml: the serving config's YAML aliases"):
        forms.load(write(tmp_path, "values.yaml", helm))
    flow = "{a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1], " + LAUGHS.replace("\n", ", ").replace(": &", ": &") + ", gpu: H100}"
    flow = flow.replace("x-", "")
    script = write(tmp_path, "serve.sh", f"# deployment: {flow}\nvllm serve Qwen/Qwen3-8B\n")
    with pytest.raises(review.ReviewInputError, match=r"serve\.sh:1: the deployment comment's YAML aliases"):
        forms.load(script)
    endless = write(tmp_path, "self.yaml", "model: m\nx: &a [1, *a]\n")  # an anchor aliasing itself
    with pytest.raises(review.ReviewInputError, match="YAML aliases"):
        forms.load(endless)
    # 300 anchors, each holding the last: the walk visits 1 + 2 + ... + 300 = 45,150 values, read;
    # 1,000 of them are 500,500 values, refused (the count is the walk's, not the text's).
    chain = "x0: &a0 [1]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 300)) + "model: m\n"
    forms.load(write(tmp_path, "chain.yaml", chain))
    longer = "x0: &a0 [1]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 1000)) + "model: m\n"
    with pytest.raises(review.ReviewInputError, match="YAML aliases"):
        forms.load(write(tmp_path, "longer.yaml", longer))


def test_every_public_config_is_within_the_limits():
    for path in PUBLIC.iterdir():
        limits.check_text(str(path), path.read_text(), "config")


def test_a_gpu_count_far_past_any_machine_is_reviewed_not_searched(tmp_path):
    """The smallest layout that holds a model is searched over TP (dividing the heads) and PP (at most
    the layers), never over every GPU a config claims: 10^22-way TP is reviewed, not looped over."""
    text = "# deployment: {gpu: L4}\nvllm serve Qwen/Qwen3-8B --tensor-parallel-size 10000000000000000000000\n"
    report = review_text(tmp_path, "tp.sh", text)
    assert report.verdicts()["parallelism"] in ("wrong", "unjustified")


def test_a_kubernetes_container_env_of_sm_vllm_settings_is_read(tmp_path):
    """AWS's vLLM image runs vLLM's SageMaker entrypoint, which turns each SM_VLLM_* variable into a flag,
    so a KServe InferenceService (or any manifest) running it carries its settings in the container's env
    list of name/value pairs; each flag keeps its env entry's line, and the image tag pins the release."""
    manifest = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama3-8b
spec:
  predictor:
    containers:
      - name: kserve-container
        image: 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11.2-gpu-py312-cu128-ubuntu22.04-sagemaker
        env:
          - name: SM_VLLM_MODEL
            value: meta-llama/Meta-Llama-3-8B-Instruct
          - name: SM_VLLM_MAX_MODEL_LEN
            value: "4096"
          - name: SM_VLLM_GPU_MEMORY_UTILIZATION
            value: "0.98"
          - name: SM_VLLM_ENABLE_PREFIX_CACHING
            value: ""
        resources:
          limits:
            nvidia.com/gpu: "1"
    nodeSelector:
      nvidia.com/gpu.product: NVIDIA-L4
"""
    c = cfg(write(tmp_path, "isvc.yaml", manifest))
    assert (c.model.name, c.model_config.max_model_len, c.cache.gpu_memory_utilization) == (
        "meta-llama/Meta-Llama-3-8B-Instruct",
        4096,
        0.98,
    )
    assert c.cache.prefix_caching and (c.deployment.hardware.name, c.deployment.gpus_per_node) == ("L4", 1)
    assert c.doc.line(("max-model-len",)) == 13 and c.doc.vllm_version == "0.11.2"
    # the 0.98 it sets is reviewed like a command line's: too little of the L4 outside vLLM's budget
    finding = review_text(tmp_path, "isvc.yaml", manifest).finding("gpu_memory_utilization")
    assert finding.verdict == "unjustified" and "(line 15)" in finding.setting
