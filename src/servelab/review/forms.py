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

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from .. import hardware
from . import compose, readers, shell, versions, vllm_flags
from .schema import Doc, ReviewInputError, load_yaml, read_text
from .serving import REVIEWED_KEYS

_DEPLOYMENT_COMMENT = re.compile(r"^\s*#\s*deployment:\s*(\{.*\})\s*$")
_SEPARATORS = {"&&", "||", ";", "|", "&"}
_API_SERVER = "vllm.entrypoints.openai.api_server"
_DYNAMO = "dynamo.vllm"  # NVIDIA Dynamo's vLLM worker: vLLM's engine flags plus its own
_DYNAMO_ONLY = {
    "is-prefill-worker",
    "is-decode-worker",
    "connector",
    "migration-limit",
    "endpoint",
    "store-kv",
    "request-plane",
    "event-plane",
    "use-vllm-tokenizer",
    "is-encode-worker",
}
# Keys of production-stack's vllmConfig that are the chart's, not vLLM flags.
_CHART_ONLY_KEYS = {"v1", "extraArgs"}
# KServe's Hugging Face server flags that map to vLLM's.
_KSERVE_FLAGS = {
    "model_id": "model",
    "model-id": "model",
    "model_name": "served-model-name",
    "model-name": "served-model-name",
}
_KSERVE_ONLY = {
    "backend",
    "model_dir",
    "model-dir",
    "return_probabilities",
    "disable_lower_case",
    "disable_special_tokens",
    "max_length",
    "tensor_input_names",
    "return_token_type_ids",
}
_GPU_RESOURCE = ("nvidia.com/gpu", "amd.com/gpu")
# Flags of vLLM's benchmark client that make its requests unlike production's.
_BENCHMARK_ONLY = {"--ignore-eos", "--ignore_eos"}


FORMS_READ = (
    "vLLM's YAML config (model: ..., with a deployment block); a `vllm serve MODEL --flag value` command "
    "line or launch script (also `docker run ... vllm/vllm-openai`, a Dockerfile, a SLURM job script, an "
    "NVIDIA Dynamo worker); a Python script building vllm.LLM(...), AsyncEngineArgs(...), EngineArgs(...) "
    "or a Ray Serve LLMConfig(...); a Ray Serve LLM config (applications: ... llm_configs); a docker "
    "compose file; a SageMaker SM_VLLM_* environment (an env file, or a model's env= in Python); a "
    "systemd unit; a Kubernetes manifest whose container runs vLLM (Deployment, StatefulSet, Pod, "
    "LeaderWorkerSet, KServe InferenceService, AIBrix RayClusterFleet); production-stack or llm-d Helm "
    "values; a SkyPilot task"
)


def not_a_form(name: str, what: str = "") -> ReviewInputError:
    return ReviewInputError(f"{name}: not a form servelab reads{': ' + what if what else ''}. It reads: {FORMS_READ}")


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
    try:
        judged = versions.detect(text, variables)
    except ValueError as exc:
        raise ReviewInputError(f"{name}: {exc}") from None
    doc = _load(path, name, text, select, deployment, variables)
    doc.vllm_version, doc.vllm_version_source = judged.version, judged.source
    return doc


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
    if readers.is_systemd(text):
        reading = readers.read_systemd(name, text)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    if readers.looks_like_python(text, path.suffix):
        reading = readers.read_python(name, text, dict(variables or {}), select)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    if readers.looks_like_env_file(text):
        reading = readers.read_env_file(name, text)
        return _doc_of(reading, text, name, base_dir, deployment, variables)
    nodes = _yaml_nodes(text)
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
    `vllm serve M --x '{"a"` (a plain scalar may hold spaces and quotes). A vLLM config's keys
    are flag names, never a command."""
    return any(
        isinstance(key, yaml.ScalarNode) and key.style is None and " " in key.value and _looks_like_command(key.value)
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
    nodes = _yaml_nodes(text)
    roots = [n for n in nodes if isinstance(n, yaml.MappingNode)] if nodes is not None else []
    builder = _Builder(name, base_dir, variables)
    if roots and any(_has_key(n, "apiVersion") and _has_key(n, "kind") for n in roots):
        _from_manifest(builder, roots, select)
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


def _deployment_comment(name: str, number: int, text: str) -> dict:
    try:
        given = yaml.safe_load(text)
    except yaml.YAMLError:
        given = None
    if not isinstance(given, dict):
        raise ReviewInputError(
            f"{name}:{number}: the deployment comment must be a YAML mapping, such as "
            "# deployment: {gpu: H100, gpus-per-node: 8}"
        )
    return given


# --- building the reviewed config from flags -------------------------------------------


class _Builder:
    """Collects flags (with the line each was written on) and the deployment facts."""

    def __init__(self, name: str, base_dir: Path | None, variables: dict[str, str] | None = None):
        self.name, self.base_dir = name, base_dir
        self.variables = dict(variables or {})  # the environment a script's $VARS resolve from
        self.shell_notes: dict[str, str] = {}  # why a script's variable has no value the reviewer can know
        self.data: dict[str, Any] = {}
        self.lines: dict[tuple, int] = {}
        self.deployment: dict[str, Any] = {}
        self.removed: list[tuple[str, Any, int | None]] = []
        self.benchmark: list[tuple[str, int | None]] = []
        self.form = ""
        self.unknown_gpu = ""  # a GPU the form names that servelab has no preset for

    def error(self, line: int | None, message: str) -> ReviewInputError:
        where = f"{self.name}:{line}" if line else self.name
        return ReviewInputError(f"{where}: {message}")

    def set(self, key: str, value: Any, line: int | None) -> None:
        gone = vllm_flags.removed(key)
        if gone:
            self.removed.append((gone, value, line))
            return
        flag, negated = vllm_flags.lookup(key)
        if flag is None:
            raise self.error(line, vllm_flags.unknown_message(key) + f" (in the {self.form})")
        if negated:
            value = False
        self.data[flag.name] = value
        if line:
            self.lines[(flag.name,)] = line

    def argv(self, tokens: list[tuple[str, int]], model_positional: bool = True) -> None:
        """vLLM's arguments: an optional positional model, then flags."""
        i = 0
        if model_positional and tokens and not tokens[0][0].startswith("-"):
            self._resolved("model", tokens[0][0], tokens[0][1])
            self.set("model", shell.literal(tokens[0][0]), tokens[0][1])
            i = 1
        while i < len(tokens):
            token, line = tokens[i]
            if token in _SEPARATORS:
                break
            if re.fullmatch(r"\$\{\w+\[[@*]\]\}|\$\w+\[[@*]\]", token):
                raise self.error(
                    line,
                    f"{token} expands a bash array into flags, which the reviewer does not "
                    "evaluate: write those flags out in the command, or review the command "
                    "line the script prints (bash -x shows it)",
                )
            if not token.startswith("-") or token in ("-", "--"):
                raise self.error(
                    line, f"{token!r} is not a flag (vLLM flags start with --); quote values that contain spaces"
                )
            name, _, inline = token.lstrip("-").partition("=")
            gone = vllm_flags.removed(name)
            if gone:  # a finding of its own; its value, if it took one, is skipped
                takes = (
                    vllm_flags.removed_takes_value(gone)
                    and not inline
                    and i + 1 < len(tokens)
                    and not tokens[i + 1][0].startswith("-")
                    and tokens[i + 1][0] not in _SEPARATORS
                )
                value: Any = _scalar(inline) if inline else (_scalar(tokens[i + 1][0]) if takes else True)
                self.removed.append((gone, value, line))
                i += 2 if takes else 1
                continue
            flag, negated = vllm_flags.lookup(name)
            if (
                flag is None
                and self.form.startswith("Dynamo")
                and (name.startswith("dyn-") or name.replace("_", "-") in _DYNAMO_ONLY)
            ):
                i += 1 if inline or i + 1 >= len(tokens) or tokens[i + 1][0].startswith("-") else 2
                continue
            if flag is None and name.replace("_", "-") in _KSERVE_FLAGS:
                flag, negated = vllm_flags.lookup(_KSERVE_FLAGS[name.replace("_", "-")])
            if flag is None and name in _KSERVE_ONLY and self.form == "Kubernetes manifest":
                i += 1 if inline or i + 1 >= len(tokens) or tokens[i + 1][0].startswith("-") else 2
                continue
            if flag is None:
                raise self.error(line, vllm_flags.unknown_message(name) + f" (in the {self.form})")
            if flag.name == "config":
                raise self.error(
                    line,
                    "--config points at another file: review that YAML file itself "
                    "(servelab review CONFIG.yaml), with these flags added to it",
                )
            if not flag.takes_value or negated:
                value = not negated
                if inline:
                    value = _scalar(inline)
                i += 1
            elif inline:
                value, i = _scalar(inline), i + 1
            elif flag.multiple:
                values = []
                i += 1
                while i < len(tokens) and not tokens[i][0].startswith("-") and tokens[i][0] not in _SEPARATORS:
                    values.append(_scalar(tokens[i][0]))
                    i += 1
                value = values if len(values) != 1 else values[0]
            else:
                if i + 1 >= len(tokens) or tokens[i + 1][0] in _SEPARATORS:
                    raise self.error(line, f"--{flag.name} needs a value")
                value, i = _scalar(tokens[i + 1][0]), i + 2
            for word in value if isinstance(value, list) else [value]:
                self._resolved(flag.name, word, line)
            self.data[flag.name] = _literal(value)
            self.lines[(flag.name,)] = line

    def _resolved(self, flag: str, word: Any, line: int | None) -> None:
        """A value the review weighs must not still carry a $VARIABLE the script never assigned."""
        missing = shell.unresolved(word) if isinstance(word, str) else []
        if missing and flag in REVIEWED_KEYS:
            raise self.error(line, f"--{flag} {word}: " + shell.how_to_pass(missing, self.shell_notes))

    def comment_deployment(self, text: str) -> None:
        for number, line in enumerate(text.splitlines(), 1):
            match = _DEPLOYMENT_COMMENT.match(line)
            if match:
                given = _deployment_comment(self.name, number, match.group(1))
                for key, value in given.items():
                    self.deployment.setdefault(key, value)
                self.lines.setdefault(("deployment",), number)

    def fill_deployment(self, deployment: dict | None) -> None:
        """What the command line says (--gpu ...), where the file does not say it."""
        for key, value in (deployment or {}).items():
            if value is not None:
                self.deployment.setdefault(key, value)

    def doc(self) -> Doc:
        if "gpus-per-node" not in self.deployment and "nodes" not in self.deployment:
            # Nothing says how many GPUs: take the ones the flags make vLLM use, on one node.
            gpus = 1
            for key in ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"):
                value = self.data.get(key, 1)
                gpus *= value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1
            self.deployment["gpus-per-node"] = gpus
        data = dict(self.data)
        data["deployment"] = dict(self.deployment)
        doc = Doc(name=self.name, data=data, role="serving config", base_dir=self.base_dir)
        doc.lines.update(self.lines)
        doc.removed_flags.extend(self.removed)
        doc.benchmark_flags.extend(self.benchmark)
        for key in self.deployment:
            line = self.lines.get(("deployment", key)) or self.lines.get(("deployment",))
            if line:
                doc.lines[("deployment", key)] = line
        if not self.deployment.get("gpu") and not self.deployment.get("hardware-file") and self.unknown_gpu:
            raise ReviewInputError(
                f"{self.name}: the {self.form} runs on {self.unknown_gpu}, a GPU servelab has no preset for "
                f"({', '.join(hardware.PRESETS)}): describe it in a hardware file (deployment.hardware-file, from "
                "its datasheet or hardware.measure_this_machine()) or pass --gpu with the nearest preset"
            )
        if not self.deployment.get("gpu") and not self.deployment.get("hardware-file"):
            raise ReviewInputError(
                f"{self.name}: the {self.form} does not say which GPU it runs on: add a comment line "
                "`# deployment: {gpu: H100, gpus-per-node: 8, nodes: 1}` to the file, or pass "
                "--gpu and --gpus-per-node to servelab review"
            )
        return doc


def _literal(value: Any) -> Any:
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return shell.literal(value) if isinstance(value, str) else value


def _scalar(text: str) -> Any:
    """A flag's value as vLLM would read it: whole numbers and decimals as numbers, the rest as text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# --- command lines --------------------------------------------------------------------

_DOCKER_FROM = re.compile(r"^\s*FROM\s+(\S*/)?vllm/vllm-openai\b", re.M | re.I)
_DOCKER_FROM_LINE = re.compile(r"^[ \t]*FROM[ \t]+.*$", re.M | re.I)
_DOCKER_EXEC = re.compile(r"^([ \t]*)(ENTRYPOINT|CMD)[ \t]+(\[.*\])[ \t]*$", re.M)


def _dockerfile_exec_form(text: str) -> str:
    """A Dockerfile's JSON (exec) form ENTRYPOINT ["..."] and CMD ["..."] as the one command line
    Docker runs, ENTRYPOINT then CMD, on CMD's line (other lines keep theirs). With CMD alone on
    the vllm/vllm-openai image, its own ENTRYPOINT ["vllm", "serve"] (the vllm-openai target of
    vLLM's docker/Dockerfile) comes first. Exec form has no shell: $VARS in it stay as written."""
    found = {}
    for m in _DOCKER_EXEC.finditer(text):
        try:
            words = json.loads(m.group(3))
        except json.JSONDecodeError:
            continue
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            found[m.group(2).upper()] = (m, words)
    vllm_image = bool(_DOCKER_FROM.search(text))
    if vllm_image:  # Dockerfile instructions are not commands: FROM goes, ENV assigns
        text = _DOCKER_FROM_LINE.sub("", text)
        text = re.sub(r"^[ \t]*ENV[ \t]+(\w+)[ \t]+(?!.*=)(.+)$", r"\1=\2", text, flags=re.M)
        text = re.sub(r"^[ \t]*ENV[ \t]+", "", text, flags=re.M)
        found = {
            k: (next(m2 for m2 in _DOCKER_EXEC.finditer(text) if m2.group(2).upper() == k), w)
            for k, (_, w) in found.items()
        }
    if not found:
        return text
    entry = found["ENTRYPOINT"][1] if "ENTRYPOINT" in found else (["vllm", "serve"] if vllm_image else [])
    cmd = found["CMD"][1] if "CMD" in found else []
    last = (found["CMD"] if "CMD" in found else found["ENTRYPOINT"])[0]  # the regex finds no other keys
    lines = text.splitlines()
    for m, _ in found.values():
        number = text.count("\n", 0, m.start())
        lines[number] = " ".join(shlex.quote(w) for w in entry + cmd) if m is last else ""
    return "\n".join(lines) + "\n"


def _looks_like_command(text: str) -> bool:
    return bool(
        re.search(r"\bvllm\s+serve\b|" + re.escape(_API_SERVER) + r"|\bvllm/vllm-openai\b|-m\s+dynamo\.vllm\b", text)
    )


def _tokens(text: str, first_line: int) -> list[tuple[str, int]]:
    """Shell words with the line each is on, as bash reads them: comments dropped, and a line
    continues onto the next only where it ends in a `\\` outside a comment or quotes. A `\\`
    inside a comment ends the command there (bash's comment runs to the newline), and `\\`
    followed by a space passes a literal space and ends the command."""
    out: list[tuple[str, int]] = []
    try:
        continuing, command_line = False, None
        for number, line in enumerate(text.splitlines(), first_line):
            line = line.rstrip("\r")
            words = _split(line.removesuffix("\\")) if _continues(line) else _split(line)
            if line.rstrip() != line and _continues(line.rstrip()):
                raise _ShellLineError(
                    number,
                    "`\\` is followed by a space, so bash passes a ' ' argument (which vLLM "
                    "refuses) and ends the command on this line instead of continuing it: delete the space after `\\`",
                )
            if words and not continuing and command_line is not None and words[0].startswith("-"):
                raise _ShellLineError(
                    number,
                    f"`{words[0]}` starts a command of its own, because line {command_line} "
                    "ends the command above without a `\\` continuation (a comment inside a continuation "
                    "runs to the end of its line, `\\` and all): bash never passes these flags to vLLM; "
                    "move the comment out of the continuation, or end the line above with `\\`",
                )
            out += [(word, number) for word in words]
            was_continuing, continuing = continuing, _continues(line)
            if not continuing:
                if was_continuing or words:
                    command_line = number
                out.append((";", number))  # a line without a continuation ends the command
        return out
    except _ShellLineError:
        raise
    except ValueError:  # a quoted value spans lines: split the whole text, at its first line
        try:
            return [(word, first_line) for word in _split(text.replace("\\\n", " "))]
        except ValueError as exc:
            raise ReviewInputError(
                f"line {first_line}: cannot split the command line ({exc}); check its quotes"
            ) from None


class _ShellLineError(ReviewInputError):
    """A line bash reads otherwise than it looks; the caller names the file."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line, self.message = line, message


def _continues(line: str) -> bool:
    """The line ends in a `\\` bash reads as a continuation: outside quotes and comments, unescaped."""
    if not line.endswith("\\"):
        return False
    try:
        _split(line)
    except ValueError as exc:  # shlex: a trailing escape with nothing after it
        return "escaped" in str(exc)
    return False  # the `\\` sat in a comment, or was itself escaped


def _split(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _from_command_text(builder: _Builder, text: str, first_line: int, env: dict[str, str] | None = None) -> None:
    builder.form = builder.form or "vllm serve command line"
    try:
        tokens = _tokens(shell.resolve(text, {**(env or {}), **builder.variables}, builder.shell_notes), first_line)
    except _ShellLineError as exc:
        raise builder.error(exc.line, exc.message) from None
    for word, line in tokens:  # a benchmark run beside the server: its settings are not production's
        if word.split("=")[0] in _BENCHMARK_ONLY:
            builder.benchmark.append((word.split("=")[0].lstrip("-").replace("_", "-"), line))
    _from_command_tokens(builder, tokens)


def _from_command_tokens(builder: _Builder, tokens: list[tuple[str, int]]) -> None:
    words = [t for t, _ in tokens]
    for i, word in enumerate(words):
        if word.endswith("vllm") and i + 1 < len(words) and words[i + 1] == "serve":
            builder.argv(_until_separator(tokens[i + 2 :]))
            return
        if word == "-m" and i + 1 < len(words) and words[i + 1] == _API_SERVER:
            builder.argv(_until_separator(tokens[i + 2 :]), model_positional=False)
            return
        if word == "-m" and i + 1 < len(words) and words[i + 1] == _DYNAMO:
            builder.form = "Dynamo vLLM worker command line"
            builder.argv(_until_separator(tokens[i + 2 :]), model_positional=False)
            return
        if re.match(r"^(docker\.io/)?vllm/vllm-openai(:\S+)?$", word):  # docker run IMAGE ARGS
            builder.argv(_until_separator(tokens[i + 1 :]))
            return
    line = tokens[0][1] if tokens else None
    raise builder.error(
        line,
        f"no vLLM command found in the {builder.form}: expected `vllm serve MODEL ...` "
        f"or `python -m {_API_SERVER} --model MODEL ...`",
    )


def _until_separator(tokens: list[tuple[str, int]]) -> list[tuple[str, int]]:
    out = []
    for token in tokens:
        if token[0] in _SEPARATORS:
            break
        out.append(token)
    return out


# --- YAML helpers ----------------------------------------------------------------------


def _yaml_nodes(text: str) -> list | None:
    try:
        return [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    except yaml.YAMLError:
        return None


def _has_key(node: yaml.Node, key: str) -> bool:
    return isinstance(node, yaml.MappingNode) and any(k.value == key for k, _ in node.value)


def _get(node: yaml.Node | None, *path: str) -> yaml.Node | None:
    for key in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return node


def _value(node: yaml.Node | None) -> Any:
    """The plain value of a YAML node."""
    if node is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _line(node: yaml.Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None


def _line_of(node: yaml.Node) -> int:
    """The line of a node that is there (a sequence item, a key, a node found and checked)."""
    return node.start_mark.line + 1


def _seq(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


# --- Kubernetes manifests ---------------------------------------------------------------


def _from_manifest(builder: _Builder, roots: list[yaml.MappingNode], select: str | None) -> None:
    builder.form = "Kubernetes manifest"
    found = []  # (label, pod spec node, replicas, nodes)
    for root in roots:
        kind = str(_value(_get(root, "kind")) or "")
        name = str(_value(_get(root, "metadata", "name")) or kind)
        replicas = _value(_get(root, "spec", "replicas")) or 1
        if kind in ("Deployment", "StatefulSet", "ReplicaSet", "Job"):
            found.append((name, _get(root, "spec", "template", "spec"), replicas, 1))
        elif kind == "Pod":
            found.append((name, _get(root, "spec"), 1, 1))
        elif kind == "LeaderWorkerSet":
            group = _get(root, "spec", "leaderWorkerTemplate")
            size = _value(_get(group, "size")) or 1
            pod = _get(group, "leaderTemplate", "spec") or _get(group, "workerTemplate", "spec")
            found.append((name, pod, replicas, size))
        elif kind == "InferenceService":
            predictor = _get(root, "spec", "predictor")
            replicas = _value(_get(predictor, "minReplicas")) or 1
            found.append((name, predictor, replicas, 1))
        elif kind == "RayClusterFleet":
            cluster = _get(root, "spec", "template", "spec")
            workers = sum(
                _count(_value(_get(w, "replicas")) or 0)
                for w in _seq(_get(cluster, "workerGroupSpecs"))
                if isinstance(_count(_value(_get(w, "replicas")) or 0), int)
            )
            found.append((name, _get(cluster, "headGroupSpec", "template", "spec"), replicas, 1 + workers))
    candidates = []
    for name, pod, replicas, nodes in found:
        for container in _seq(_get(pod, "containers")) + ([_get(pod, "model")] if _get(pod, "model") else []):
            if _runs_vllm(container):
                candidates.append((name, pod, container, replicas, nodes))
    if select:
        chosen = [c for c in candidates if c[0] == select or str(_value(_get(c[2], "name"))) == select]
        if not chosen:
            raise builder.error(
                None,
                f"no workload named {select!r} runs vLLM here; found: {', '.join(c[0] for c in candidates) or 'none'}",
            )
        candidates = chosen
    if not candidates:
        raise builder.error(
            _line(roots[0]),
            "no container in this manifest runs vLLM (a `vllm serve` or "
            f"`{_API_SERVER}` command, or a vllm/vllm-openai image)",
        )
    if len(candidates) > 1:
        raise builder.error(
            None,
            f"{len(candidates)} containers run vLLM here "
            f"({', '.join(c[0] for c in candidates)}); pick one with --select NAME",
        )
    name, pod, container, replicas, nodes = candidates[0]
    env = {}
    if _count(nodes) != 1:  # LeaderWorkerSet tells each pod its group's size; the leader is index 0
        env.update({"LWS_GROUP_SIZE": str(_count(nodes)), "LWS_WORKER_INDEX": "0"})
    for item in _seq(_get(container, "env")):
        key, value = _value(_get(item, "name")), _value(_get(item, "value"))
        if key is not None and value is not None:
            env[str(key)] = str(value)
    env.update(builder.variables)  # --var NAME=VALUE stands in for what the cluster injects
    words: list[tuple[str, int]] = []
    for part in ("command", "args"):
        node = _get(container, part)
        items = _seq(node) if isinstance(node, yaml.SequenceNode) else ([node] if node is not None else [])
        for item in items:
            text = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), str(_value(item)))
            words.append((text, _line_of(item)))
    shell = (
        len(words) >= 2
        and words[0][0].split("/")[-1] in ("sh", "bash")
        and any(w.startswith("-") and "c" in w for w, _ in words[1:3])
    )
    if shell:
        script_index = max(i for i, (w, _) in enumerate(words) if not w.startswith("-") or i == len(words) - 1)
        text, line = words[script_index]
        _from_command_text(builder, text, line, env)
    elif _get(container, "modelFormat") is not None:  # KServe's Hugging Face runtime takes vLLM's flags
        builder.argv(words, model_positional=False)
    else:
        joined = [w for w, _ in words]
        if any(w.endswith("vllm") for w in joined) or _API_SERVER in joined:
            _from_command_tokens(builder, words)
        else:  # the vllm-openai image's entrypoint is vLLM's server: args are its flags
            builder.argv(words)
    if "model" not in builder.data and "MODEL_ID" in env:
        builder.set("model", env["MODEL_ID"], None)
    gpus = None
    for section in ("limits", "requests"):
        for resource in _GPU_RESOURCE:
            node = _get(container, "resources", section, resource)
            if node is not None and gpus is None:
                gpus = _value(node)
                builder.lines[("deployment", "gpus-per-node")] = _line_of(node)
    if gpus is not None:
        builder.deployment["gpus-per-node"] = _count(gpus)
    if _count(nodes) != 1:
        builder.deployment["nodes"] = _count(nodes)
    if _count(replicas) != 1:
        builder.deployment["replicas"] = _count(replicas)
    gpu = _gpu_from_selectors(_get(pod, "nodeSelector"), _get(pod, "affinity"))
    if gpu:
        builder.deployment["gpu"], line = gpu
        builder.lines[("deployment", "gpu")] = line


def _count(value: Any) -> Any:
    """A count as Kubernetes writes it ("8" or 8) as a number; anything else is left for the
    reviewer's own checks to refuse with its line."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _runs_vllm(container: yaml.Node) -> bool:
    if container is None:
        return False
    if _get(container, "modelFormat") is not None:
        return True
    text = " ".join(str(_value(_get(container, part)) or "") for part in ("image", "command", "args"))
    return "vllm" in text.lower()


def _gpu_from_selectors(selector: yaml.Node | None, affinity: yaml.Node | None) -> tuple[str, int] | None:
    """A GPU type named by a node selector or a node-affinity term (GKE, NVIDIA GPU feature discovery, EKS)."""
    values: list[yaml.Node] = []
    if isinstance(selector, yaml.MappingNode):
        values += [v for _, v in selector.value]
    terms = _get(affinity, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    for term in _seq(terms):
        for expression in _seq(_get(term, "matchExpressions")):
            values += _seq(_get(expression, "values"))
    for node in values:
        text = str(_value(node))
        try:
            return hardware.get(text).name, _line_of(node)
        except hardware.UnknownHardware:
            continue
    return None


# --- production-stack Helm values ----------------------------------------------------------


def _camel_to_flag(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", key).lower()


def _from_helm(builder: _Builder, root: yaml.MappingNode, select: str | None) -> None:
    builder.form = "production-stack Helm values"
    specs = _seq(_get(root, "servingEngineSpec", "modelSpec"))
    if not specs:
        raise builder.error(_line(root), "servingEngineSpec.modelSpec lists no model")
    names = [str(_value(_get(s, "name"))) for s in specs]
    if select:
        if select not in names:
            raise builder.error(None, f"no modelSpec named {select!r}; found: {', '.join(names)}")
        spec = specs[names.index(select)]
    elif len(specs) > 1:
        raise builder.error(
            _line(specs[1]),
            f"servingEngineSpec.modelSpec lists {len(specs)} models ({', '.join(names)}); pick one with --select NAME",
        )
    else:
        spec = specs[0]
    url = _get(spec, "modelURL")
    if url is None:
        raise builder.error(_line(spec), "the modelSpec has no modelURL (the model it serves)")
    builder.set("model", str(_value(url)), _line_of(url))
    config = _get(spec, "vllmConfig")
    if isinstance(config, yaml.MappingNode):
        for key_node, value_node in config.value:
            key = key_node.value
            if key in _CHART_ONLY_KEYS:
                continue
            builder.set(_camel_to_flag(key), _value(value_node), _line_of(key_node))
        extra = _get(config, "extraArgs")
        if extra is not None:
            tokens = [(str(_value(item)), _line_of(item)) for item in _seq(extra)]
            split: list[tuple[str, int]] = []
            for token, line in tokens:  # "--flag value" in one list item is two words
                split += [(word, line) for word in shlex.split(token)] if " " in token else [(token, line)]
            builder.argv(split, model_positional=False)
    gpus = _get(spec, "requestGPU")
    if gpus is not None:
        builder.deployment["gpus-per-node"] = _count(_value(gpus))
        builder.lines[("deployment", "gpus-per-node")] = _line_of(gpus)
    replicas = _value(_get(spec, "replicaCount"))
    if replicas is not None and _count(replicas) != 1:
        builder.deployment["replicas"] = _count(replicas)
    gpu_type = _get(spec, "requestGPUType")
    if gpu_type is not None:
        try:
            builder.deployment["gpu"] = hardware.get(str(_value(gpu_type))).name
            builder.lines[("deployment", "gpu")] = _line_of(gpu_type)
        except hardware.UnknownHardware:
            pass
    terms = _get(spec, "nodeSelectorTerms")
    if terms is not None and "gpu" not in builder.deployment:
        affinity_like: dict[str, list[yaml.Node]] = {"values": []}
        for term in _seq(terms):
            for expression in _seq(_get(term, "matchExpressions")):
                affinity_like["values"] += _seq(_get(expression, "values"))
        for node in affinity_like["values"]:
            try:
                builder.deployment["gpu"] = hardware.get(str(_value(node))).name
                builder.lines[("deployment", "gpu")] = _line_of(node)
                break
            except hardware.UnknownHardware:
                continue


# --- llm-d's model service Helm values ----------------------------------------------------


def _from_llm_d(builder: _Builder, root: yaml.MappingNode, select: str | None) -> None:
    """llm-d-modelservice values: modelArtifacts names the model, decode (or prefill) the vLLM pods."""
    builder.form = "llm-d model service Helm values"
    name = _get(root, "modelArtifacts", "name")
    if name is None:
        raise builder.error(_line(root), "modelArtifacts has no name (the model it serves)")
    builder.set("model", str(_value(name)), _line(name))
    role = select or "decode"
    pods = _get(root, role)
    if pods is None or _value(_get(pods, "create")) is False:
        raise builder.error(_line(root), f"no '{role}' pods are created here; pick decode or prefill with --select")
    tensor = _get(pods, "parallelism", "tensor")
    data = _get(pods, "parallelism", "data")
    tp, dp = _count(_value(tensor) or 1), _count(_value(data) or 1)
    if tensor is not None:  # the chart adds --tensor-parallel-size from parallelism
        builder.set("tensor-parallel-size", tp, _line(tensor))
    if data is not None and dp > 1:
        builder.set("data-parallel-size", dp, _line(data))
    if isinstance(tp, int) and isinstance(dp, int):
        builder.deployment["gpus-per-node"] = tp * dp  # the chart requests one GPU per rank
    if tensor is not None:
        builder.lines[("deployment", "gpus-per-node")] = _line_of(tensor)
    replicas = _value(_get(pods, "replicas"))
    if replicas is not None and _count(replicas) != 1:
        builder.deployment["replicas"] = _count(replicas)
    containers = [c for c in _seq(_get(pods, "containers")) if _runs_vllm(c) or _get(c, "modelCommand") is not None]
    if containers:
        args = [(str(_value(item)), _line_of(item)) for item in _seq(_get(containers[0], "args"))]
        builder.argv(args, model_positional=False)


# --- SkyPilot task YAML ---------------------------------------------------------------------


def _from_skypilot(builder: _Builder, root: yaml.MappingNode) -> None:
    """A SkyPilot task: `envs` and the accelerators SkyPilot exports ($SKYPILOT_NUM_GPUS_PER_NODE)
    resolve the `run` script's variables; `resources.accelerators` names the GPU (the first choice
    where it lists several); `num_nodes` and `service.replicas` size the deployment."""
    builder.form = "SkyPilot task"
    envs = _get(root, "envs")
    env = {str(_value(k)): str(_value(v)) for k, v in (envs.value if envs else []) if _value(v) is not None}
    accelerators = _get(root, "resources", "accelerators")
    choice: tuple[str, Any, int] | None = None
    if isinstance(accelerators, yaml.MappingNode) and accelerators.value:
        key, count = accelerators.value[0]
        name, _, inline = str(_value(key)).partition(":")  # `{ H100:8 }` is one key "H100:8" in YAML
        choice = (name, _value(count) if _value(count) is not None else (inline or 1), _line_of(key))
    elif isinstance(accelerators, yaml.SequenceNode) and accelerators.value:
        accelerators = accelerators.value[0]
    if choice is None and isinstance(accelerators, yaml.ScalarNode):
        text = str(_value(accelerators))
        gpu, _, count = text.partition(":")
        choice = (gpu, count or 1, _line_of(accelerators))
    if choice is not None:
        gpu, count, line = choice
        try:
            builder.deployment["gpu"] = hardware.get(gpu).name
            builder.lines[("deployment", "gpu")] = line
        except hardware.UnknownHardware:
            pass
        builder.deployment["gpus-per-node"] = _count(count)
        builder.lines[("deployment", "gpus-per-node")] = line
        env.setdefault("SKYPILOT_NUM_GPUS_PER_NODE", str(_count(count)))
    nodes = _value(_get(root, "num_nodes"))
    if nodes not in (None, 1):
        builder.deployment["nodes"] = _count(nodes)
        env.setdefault("SKYPILOT_NUM_NODES", str(_count(nodes)))
    replicas = _value(_get(root, "service", "replicas"))
    if replicas not in (None, 1):
        builder.deployment["replicas"] = _count(replicas)
    run = _get(root, "run")
    if run is None:  # _is_skypilot chose this form for its run key
        raise builder.error(_line(root), "the SkyPilot task has no run script")
    first = _line_of(run) + (1 if isinstance(run, yaml.ScalarNode) and run.style == "|" else 0)
    _from_command_text(builder, str(_value(run)), first, env)
