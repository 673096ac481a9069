"""The forms a serving config comes in, each turned into the same reviewed config.

- the YAML `vllm serve --config` reads (plus a `deployment` block);
- a `vllm serve MODEL --flag value ...` command line, or
  `python -m vllm.entrypoints.openai.api_server --model MODEL ...`, as written in a
  shell script, a Dockerfile or a README (quoting, `\\` continuations, `--flag=value`);
- a Kubernetes manifest whose container runs vLLM: Deployment, StatefulSet, Pod,
  LeaderWorkerSet, KServe InferenceService, AIBrix RayClusterFleet;
- the values of vLLM's production-stack Helm chart (servingEngineSpec.modelSpec), or of
  llm-d's model service chart (modelArtifacts, decode.parallelism).

Each comes out as a Doc whose data maps vLLM flag names (dashed) to values, plus
a `deployment` block, and whose line numbers point into the original file. The
GPU count and type come from the manifest (resources, node selectors) where it
says them; otherwise from a comment line `# deployment: {gpu: H100, gpus-per-node: 8}`
or the command line's --gpu / --gpus-per-node / --nodes.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .. import hardware
from . import compose, readers, shell, versions, vllm_flags
from .cmdline import (
    _DEPLOYMENT_COMMENT,
    _DOCKER_FROM,
    _Builder,
    _deployment_comment,
    _dockerfile_exec_form,
    _from_command_text,
    _from_command_tokens,
    _looks_like_command,
)
from .manifests import (
    NoVllmContainer,
    _from_helm,
    _from_llm_d,
    _from_manifest,
    _from_skypilot,
    _has_key,
    _line_of,
    _value,
    _yaml_nodes,
)
from .schema import Doc, ReviewInputError, load_yaml, read_text
from .serving import REVIEWED_KEYS

FORMS_READ = (
    "vLLM's YAML config (model: ..., with a deployment block); a `vllm serve MODEL --flag value` command "
    "line or launch script (also `docker run ... vllm/vllm-openai`, a Dockerfile, a SLURM job script, an "
    "NVIDIA Dynamo worker); a Python script building vllm.LLM(...), AsyncEngineArgs(...), EngineArgs(...) "
    "or a Ray Serve LLMConfig(...); a Ray Serve LLM config (applications: ... llm_configs); a docker "
    "compose file; a SageMaker SM_VLLM_* environment (an env file, or a model's env= in Python); a "
    "systemd unit; a Kubernetes manifest whose container runs vLLM (Deployment, StatefulSet, Pod, "
    "LeaderWorkerSet, KServe InferenceService, AIBrix RayClusterFleet or StormService); production-stack or "
    "llm-d Helm "
    "values; a SkyPilot task"
)


def not_a_form(name: str, what: str = "") -> ReviewInputError:
    return ReviewInputError(
        f"{name}: not a form servelab reads{': ' + what if what else ''}. It reads: {FORMS_READ}. "
        "Review the file that starts vLLM, or write the settings it deploys as a `vllm serve` command line"
    )


def load(
    path: str | Path,
    *,
    select: str | None = None,
    deployment: dict | None = None,
    variables: dict[str, str] | None = None,
) -> Doc:
    """Read a serving config in any of the forms above; `deployment` fills what the file does not say."""
    path = Path(path)
    name = str(path)
    text = read_text(path, "serving config", "UTF-8")
    doc = _load(path, name, text, select, deployment, variables)
    try:
        judged = versions.detect(text, variables, doc.image)
    except ValueError as exc:
        raise ReviewInputError(f"{name}: {exc}") from None
    doc.vllm_version, doc.vllm_version_source = judged.version, judged.source
    return doc


# Go template actions, as Helm's templates hold them: `{{ .Values.x }}`, `{{- if ... }}`, `{{ include ... }}`.
# A Jinja chat template inside a config writes `{{ message }}` and `{% if %}`, never these.
_GO_TEMPLATE = re.compile(
    r"\{\{-?\s*(?:\.[A-Z]\w*|\$|(?:include|template|define|end|if|else|range|with|toYaml|tpl|default|quote)\b)"
)
_MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".rst")
# A script or config with a recipe's ``` fences pasted around its command is still that script.
_SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".ps1", ".yaml", ".yml", ".py", ".env", ".service", ".sbatch", ".slurm")
_FENCE = re.compile(r"^\s*(```|~~~)", re.M)


def _refuse_other_formats(path: Path, name: str, text: str) -> None:
    """Formats that would otherwise reach a parser of another one (a Helm template reads as a broken
    command, a recipe's markdown as a script with unbalanced quotes): named for what they are."""
    template = _GO_TEMPLATE.search(text)
    if template:
        line = text.count("\n", 0, template.start()) + 1
        raise not_a_form(
            name,
            f"a Helm template (line {line}: `{template.group(0)} ...}}}}` is a Go template action, which Helm "
            "fills in from the chart's values): render it first with `helm template RELEASE CHART -f values.yaml "
            "> rendered.yaml` and review the rendered manifest, or review the chart's values file if it is "
            "production-stack's or llm-d's",
        )
    fenced = len(_FENCE.findall(text)) >= 2 and path.suffix.lower() not in _SCRIPT_SUFFIXES
    if path.suffix.lower() in _MARKDOWN_SUFFIXES or fenced:
        shown = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"\bvllm\s+serve\b", text)]
        where = (
            f"; it shows {len(shown)} `vllm serve` command{'s' if len(shown) > 1 else ''} (on "
            f"line{'s' if len(shown) > 1 else ''} {', '.join(map(str, shown[:8]))}{', ...' if len(shown) > 8 else ''})"
            if shown
            else ""
        )
        raise not_a_form(
            name,
            f"a markdown document{where}: copy the command or config it shows for the deployment into a file "
            "of its own (serve.sh, config.yaml) and review that",
        )


def _load(
    path: Path,
    name: str,
    text: str,
    select: str | None,
    deployment: dict | None,
    variables: dict[str, str] | None,
) -> Doc:
    base_dir = path.resolve().parent
    if not text.strip():
        raise ReviewInputError(f"{name}: the serving config file is empty")
    _refuse_other_formats(path, name, text)
    if readers.is_systemd(text):
        reading = readers.read_systemd(name, text)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    if readers.looks_like_python(text, path.suffix):
        try:
            reading = readers.read_python(name, text, dict(variables or {}), select)
        except readers.NoEngine as exc:
            raise not_a_form(name, str(exc).removeprefix(f"{name}: ")) from None
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    if readers.looks_like_env_file(text):
        reading = readers.read_env_file(name, text)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    nodes = _yaml_nodes(text, name)
    roots = [n for n in nodes if isinstance(n, yaml.MappingNode)] if nodes is not None else []
    if len(roots) == 1 and _has_key(roots[0], "services") and readers.is_compose(_value(roots[0])):
        reading = compose.read_compose(name, roots[0], select, dict(variables or {}))
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    if len(roots) == 1 and _has_key(roots[0], "applications") and "llm_configs" in text:
        reading = readers.read_ray_yaml(name, _value(roots[0]), _line_of(roots[0]), select)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    command = _looks_like_command(text) or bool(_DOCKER_FROM.search(text))
    if (
        len(roots) == 1
        and not _is_manifest_or_helm(roots)
        and not _is_command_line(roots[0])
        and not (command and readers.is_slurm(text))
    ):
        if not _names_a_flag(roots[0]):
            raise not_a_form(
                name, "a YAML mapping, but none of its keys is a vLLM flag (model, tensor-parallel-size, ...)"
            )
        return _from_yaml(load_yaml(path, "serving config"), text, deployment)
    if not roots and not command:
        if nodes is None and path.suffix in (".yaml", ".yml"):
            return _from_yaml(load_yaml(path, "serving config"), text, deployment)  # its YAML syntax error
        raise not_a_form(name, "no vLLM command, engine or config found in it")
    return parse(text, name=name, base_dir=base_dir, select=select, deployment=deployment, variables=variables)


def _names_a_flag(node: yaml.MappingNode) -> bool:
    keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
    return any(
        str(k).strip().replace("_", "-") in ("deployment", "model")
        or vllm_flags.lookup(str(k))[0] is not None
        or vllm_flags.removed(str(k))
        for k in keys
    )


def _doc_of(
    reading: readers.Reading,
    text: str,
    name: str,
    base_dir: Path,
    deployment: dict | None,
    variables: dict[str, str] | None,
) -> Doc:
    builder = _Builder(name, base_dir, variables)
    _from_reading(builder, reading)
    builder.comment_deployment(text)
    builder.fill_deployment(deployment)
    return builder.doc()


def _from_reading(builder: _Builder, reading: readers.Reading) -> None:
    """A reader's findings fed through the same flag parser as a command line's."""
    builder.form = reading.form
    builder.image = reading.image
    for key, value, line in reading.kwargs:
        if key in reading.refused:
            flag, _ = vllm_flags.lookup(key)
            if vllm_flags.removed(key) is None and (flag is None or flag.name in REVIEWED_KEYS):
                raise builder.error(line, reading.refused[key])
            value = str(value)
        builder.set(key, value, line)
    gpu_name = reading.deployment.pop("gpu-name", None)
    builder.deployment.update(reading.deployment)
    builder.lines.update(reading.lines)
    if gpu_name:
        try:
            builder.deployment["gpu"] = hardware.get(str(gpu_name)).name
        except hardware.UnknownHardware:
            builder.unknown_gpu = str(gpu_name)
    if reading.argv is not None:
        builder.argv(reading.argv, model_positional=reading.model_positional)
    if reading.tokens is not None:
        env = {**reading.env, **builder.variables}
        tokens = [(shell.resolve(word, env, builder.shell_notes).rstrip("\n"), line) for word, line in reading.tokens]
        _from_command_tokens(builder, tokens)
    if reading.command is not None:
        _from_command_text(builder, reading.command[0], reading.command[1], reading.env)


def _is_manifest_or_helm(roots: list[yaml.MappingNode]) -> bool:
    return any(
        _has_key(n, "apiVersion")
        and _has_key(n, "kind")
        or _has_key(n, "servingEngineSpec")
        or _has_key(n, "modelArtifacts")
        or _is_skypilot(n)
        for n in roots
    )


def _is_command_line(node: yaml.MappingNode) -> bool:
    """A command line YAML reads as a mapping: `vllm serve M --x '{"a": 1}'` parses as the key
    `vllm serve M --x '{"a"` (a plain scalar, style None or libyaml's "", may hold spaces and quotes). A vLLM config's keys
    are flag names, never a command."""
    return any(
        isinstance(key, yaml.ScalarNode) and not key.style and " " in key.value and _looks_like_command(key.value)
        for key, _ in node.value
    )


def _is_skypilot(node: yaml.Node) -> bool:
    return _has_key(node, "run") and (_has_key(node, "resources") or _has_key(node, "envs"))


def parse(
    text: str,
    *,
    name: str = "config",
    base_dir: Path | None = None,
    select: str | None = None,
    deployment: dict | None = None,
    variables: dict[str, str] | None = None,
) -> Doc:
    """The reviewed config in `text` when it is a command line, a manifest or Helm values."""
    if not text.strip():
        raise ReviewInputError(f"{name}: the serving config file is empty")
    nodes = _yaml_nodes(text, name)
    roots = [n for n in nodes if isinstance(n, yaml.MappingNode)] if nodes is not None else []
    builder = _Builder(name, base_dir, variables)
    if roots and any(_has_key(n, "apiVersion") and _has_key(n, "kind") for n in roots):
        try:
            _from_manifest(builder, roots, select)
        except NoVllmContainer as exc:
            if "LLMInferenceService" not in exc.kinds:
                raise
            raise not_a_form(
                name,
                "a KServe LLMInferenceService whose container states no vLLM command: KServe's controller "
                "fills in the `vllm serve` command from its LLMInferenceServiceConfig template when it renders "
                "the pod (the model from spec.model, extra flags from VLLM_ADDITIONAL_ARGS), so this file does not "
                "hold it. Review the rendered pod (`kubectl get pod NAME -o yaml`), or write the command as a "
                "`vllm serve` line",
            ) from None
    elif roots and any(_has_key(n, "servingEngineSpec") for n in roots):
        _from_helm(builder, roots[0], select)
    elif roots and _has_key(roots[0], "modelArtifacts"):
        _from_llm_d(builder, roots[0], select)
    elif roots and _is_skypilot(roots[0]):
        _from_skypilot(builder, roots[0])
    elif readers.is_slurm(text):
        env, given, lines = readers.slurm_environment(text)
        builder.form = "SLURM job script"
        gpu_name = given.pop("gpu-name", None)
        for feature in given.pop("gpu-candidates", []):  # --constraint: the first feature that is a GPU
            try:
                gpu_name = gpu_name or hardware.get(feature).name
            except hardware.UnknownHardware:
                continue
        builder.deployment.update(given)
        builder.lines.update(lines)
        if gpu_name:
            try:
                builder.deployment["gpu"] = hardware.get(str(gpu_name)).name
            except hardware.UnknownHardware:
                pass
        _from_command_text(builder, text, 1, env)
    elif _looks_like_command(text) or _DOCKER_FROM.search(text):
        _from_command_text(builder, _dockerfile_exec_form(text), 1)
    else:
        raise not_a_form(name, "no vLLM command, engine or config found in it")
    builder.comment_deployment(text)
    builder.fill_deployment(deployment)
    return builder.doc()


# --- the YAML form ---------------------------------------------------------------


def _from_yaml(doc: Doc, text: str, deployment: dict | None) -> Doc:
    data = doc.data
    if isinstance(data, dict):
        if deployment and "deployment" not in data:
            data["deployment"] = dict(deployment)
        elif deployment and isinstance(data.get("deployment"), dict):
            data["deployment"] = {**deployment, **data["deployment"]}
        if "deployment" not in data:
            for number, line in enumerate(text.splitlines(), 1):
                match = _DEPLOYMENT_COMMENT.match(line)
                if match:
                    data["deployment"] = _deployment_comment(doc.name, number, match.group(1))
                    doc.lines[("deployment",)] = number
    return doc
