"""Kubernetes manifests, Helm values (production-stack, llm-d) and SkyPilot tasks: the container
or values that run vLLM, read from the YAML nodes (so every flag keeps its line) into a _Builder.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import Any

import yaml

from .. import hardware
from . import limits
from .cmdline import _API_SERVER, _Builder, _from_command_text, _from_command_tokens
from .readers import _SAGEMAKER_PREFIX
from .schema import ReviewInputError

# What production-stack's chart renders from a modelSpec, as its template writes it
# (helm/templates/deployment-vllm-multi.yaml, vllm-project/production-stack@a6c01db05f65f556235413ba8dbcfb0c01132fff):
# the container runs `vllm serve {{ modelURL }}` from the image "{{ repository }}:{{ tag }}"; these modelSpec
# keys add a flag when set (a true value, or any value for the ones that take one);
_CHART_MODEL_FLAGS = {
    "enableLoRA": "enable-lora",
    "enableTool": "enable-auto-tool-choice",
    "toolCallParser": "tool-call-parser",
    "modelRevision": "revision",
}
_CHART_SWITCHES = {"enable-lora", "enable-auto-tool-choice"}
# inside `{{- with $modelSpec.vllmConfig }}` (so only when vllmConfig is there and not empty), each of these
# renders its flag with the value when the key is there (`hasKey`); enableChunkedPrefill renders
# --enable-chunked-prefill or --no-enable-chunked-prefill; enablePrefixCaching is `if .enablePrefixCaching`
# --enable-prefix-caching `else` --no-enable-prefix-caching, so left out it turns prefix caching off; each
# extraArgs item is one more argument. Any other vllmConfig key renders nothing: vLLM never sees it.
_CHART_VALUE_FLAGS = {
    "maxModelLen": "max-model-len",
    "dtype": "dtype",
    "tensorParallelSize": "tensor-parallel-size",
    "maxNumSeqs": "max-num-seqs",
    "gpuMemoryUtilization": "gpu-memory-utilization",
    "maxLoras": "max-loras",
    "runner": "runner",
    "convert": "convert",
}
# Keys of vllmConfig that are the chart's own: v0 "1" sets the env VLLM_USE_V1=0 (the V0 engine),
# prometheusMultiprocDir an env; extraArgs is read above.
_CHART_ONLY_KEYS = {"v0", "v1", "extraArgs", "prometheusMultiprocDir"}


def _key_line(mapping: yaml.MappingNode, value: yaml.Node) -> int:
    """The line of the key whose value is `value`."""
    return next(_line_of(k) for k, v in mapping.value if v is value)


def _go_truthy(value: Any) -> bool:
    """A value as a Go template's `if` reads it: false, 0, "", nil and empty collections are false;
    every other value, the string "false" included, is true."""
    return value not in (None, False, 0, "") and value != [] and value != {}


_GPU_RESOURCE = ("nvidia.com/gpu", "amd.com/gpu")

# --- YAML helpers ----------------------------------------------------------------------


# libyaml's parser where PyYAML was built with it: the pure-Python one reads about 3 us a character
# (a 1 MB file took over 20 s to compose), libyaml's some tens of times faster; the nodes are the same.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=4)  # forms.load and parse both ask for the same text's nodes
def _yaml_nodes(text: str, name: str = "config") -> tuple | None:
    """The text's YAML documents as nodes (None when it is not YAML), refused when their aliases
    expand past limits.MAX_YAML_NODES: every reader walks these nodes, expanding each alias."""
    try:
        nodes = tuple(n for n in yaml.compose_all(text, Loader=_LOADER) if n is not None)
    except yaml.YAMLError:
        return None
    try:
        limits.check_yaml_nodes(name, nodes)
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
    return nodes


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
    try:  # the nodes come from _yaml_nodes, checked there; this bounds any other caller's
        limits.check_yaml_nodes("the YAML", [node])
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
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


def _pod_specs(roots: list[yaml.MappingNode]) -> list[tuple[str, Any, Any, Any]]:
    """Each workload's (name, pod spec, replicas, nodes): Deployment, StatefulSet, ReplicaSet, Job, Pod,
    LeaderWorkerSet (nodes: the group's size), KServe InferenceService and LLMInferenceService, AIBrix
    RayClusterFleet and StormService (one workload per role, named by the role)."""
    found = []
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
        elif kind == "StormService":  # AIBrix: each role (prefill, decode, ...) is a pod template of its own
            for role in _seq(_get(root, "spec", "template", "spec", "roles")):
                role_name = str(_value(_get(role, "name")) or name)
                role_replicas = _count(_value(_get(role, "replicas")) or 1)
                total = _count(replicas) * role_replicas if isinstance(_count(replicas), int) else role_replicas
                found.append((role_name, _get(role, "template", "spec"), total, 1))
        elif kind == "LLMInferenceService":  # KServe: spec.template is the pod spec
            found.append((name, _get(root, "spec", "template"), replicas, 1))
        elif kind == "RayClusterFleet":
            cluster = _get(root, "spec", "template", "spec")
            workers = sum(
                _count(_value(_get(w, "replicas")) or 0)
                for w in _seq(_get(cluster, "workerGroupSpecs"))
                if isinstance(_count(_value(_get(w, "replicas")) or 0), int)
            )
            found.append((name, _get(cluster, "headGroupSpec", "template", "spec"), replicas, 1 + workers))
    return found


class NoVllmContainer(ReviewInputError):
    """A manifest none of whose containers states a vLLM command or image; `kinds` are its documents' kinds."""

    def __init__(self, message: str, kinds: set[str]):
        super().__init__(message)
        self.kinds = kinds


def _from_manifest(builder: _Builder, roots: list[yaml.MappingNode], select: str | None) -> None:
    builder.form = "Kubernetes manifest"
    _, pod, container, replicas, nodes = _vllm_container(builder, roots, select)
    image = _get(container, "image")
    if image is not None and _value(image):
        builder.image = (str(_value(image)), _line(image))
    env = _container_env(builder, container, nodes)
    words = _container_words(container, env)
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
    if _sagemaker_words(container):
        builder.argv(_sagemaker_words(container), model_positional=False)
    if "model" not in builder.data and "MODEL_ID" in env:
        builder.set("model", env["MODEL_ID"], None)
    _deployment_from_pod(builder, pod, container, replicas, nodes)


def _vllm_container(builder: _Builder, roots: list[yaml.MappingNode], select: str | None) -> tuple:
    """The one (workload name, pod spec, container, replicas, nodes) that runs vLLM, or --select's."""
    candidates = []
    for name, pod, replicas, nodes in _pod_specs(roots):
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
        kinds = {str(_value(_get(r, "kind")) or "") for r in roots}
        raise NoVllmContainer(
            f"{builder.name}:{_line(roots[0])}: no container in this manifest runs vLLM (a `vllm serve` or "
            f"`{_API_SERVER}` command, or a vllm/vllm-openai image)",
            kinds,
        )
    if len(candidates) > 1:
        raise builder.error(
            None,
            f"{len(candidates)} containers run vLLM here "
            f"({', '.join(c[0] for c in candidates)}); pick one with --select NAME",
        )
    return candidates[0]


def _container_env(builder: _Builder, container: yaml.Node, nodes: Any) -> dict[str, str]:
    """The container's environment as its command sees it: LeaderWorkerSet's, its own env:, then --var."""
    env = {}
    if _count(nodes) != 1:  # LeaderWorkerSet tells each pod its group's size; the leader is index 0
        env.update({"LWS_GROUP_SIZE": str(_count(nodes)), "LWS_WORKER_INDEX": "0"})
    for item in _seq(_get(container, "env")):
        key, value = _value(_get(item, "name")), _value(_get(item, "value"))
        if key is not None and value is not None:
            env[str(key)] = str(value)
    env.update(builder.variables)  # --var NAME=VALUE stands in for what the cluster injects
    return env


def _container_words(container: yaml.Node, env: dict[str, str]) -> list[tuple[str, int]]:
    """command: then args:, each word with its line, $(VAR) expanded as Kubernetes expands it."""
    words: list[tuple[str, int]] = []
    for part in ("command", "args"):
        node = _get(container, part)
        items = _seq(node) if isinstance(node, yaml.SequenceNode) else ([node] if node is not None else [])
        for item in items:
            text = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), str(_value(item)))
            words.append((text, _line_of(item)))
    return words


def _deployment_from_pod(builder: _Builder, pod: yaml.Node, container: yaml.Node, replicas: Any, nodes: Any) -> None:
    """GPUs per node from the container's resources, nodes and replicas, and the GPU from the pod's selectors."""
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
    return "vllm" in text.lower() or bool(_sagemaker_words(container))


def _sagemaker_words(container: yaml.Node) -> list[tuple[str, int]]:
    """A container's SM_VLLM_* env as the flags vLLM's SageMaker entrypoint passes on (readers.sagemaker_env's
    rule: the prefix dropped, the rest lower-cased with `_` as `-`, an empty value the flag alone), each on the
    line of its env entry; the image that runs the entrypoint reads them wherever the container runs."""
    words: list[tuple[str, int]] = []
    for item in _seq(_get(container, "env")):
        key, value = _value(_get(item, "name")), _value(_get(item, "value"))
        if isinstance(key, str) and key.startswith(_SAGEMAKER_PREFIX) and len(key) > len(_SAGEMAKER_PREFIX):
            words.append(("--" + key[len(_SAGEMAKER_PREFIX) :].lower().replace("_", "-"), _line_of(item)))
            if value not in (None, ""):
                words.append((str(value).lower() if isinstance(value, bool) else str(value), _line_of(item)))
    return words


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
    spec = _chart_model_spec(builder, root, select)
    url = _get(spec, "modelURL")
    if url is None:
        raise builder.error(_line(spec), "the modelSpec has no modelURL (the model it serves)")
    builder.set("model", str(_value(url)), _line_of(url))
    repository, tag = _get(spec, "repository"), _get(spec, "tag")
    if repository is not None and tag is not None:  # image: "{{ repository }}:{{ tag }}"
        builder.image = (f"{_value(repository)}:{_value(tag)}", _line_of(tag))
    for key, flag in _CHART_MODEL_FLAGS.items():
        node = _get(spec, key)
        if node is not None and _go_truthy(_value(node)):
            builder.set(flag, True if flag in _CHART_SWITCHES else str(_value(node)), _line_of(node))
    _chart_vllm_config(builder, spec, _get(spec, "vllmConfig"))
    _chart_deployment(builder, spec)


def _chart_model_spec(builder: _Builder, root: yaml.MappingNode, select: str | None) -> yaml.Node:
    """The one servingEngineSpec.modelSpec entry reviewed, or --select's."""
    specs = _seq(_get(root, "servingEngineSpec", "modelSpec"))
    if not specs:
        raise builder.error(_line(root), "servingEngineSpec.modelSpec lists no model")
    names = [str(_value(_get(s, "name"))) for s in specs]
    if select:
        if select not in names:
            raise builder.error(None, f"no modelSpec named {select!r}; found: {', '.join(names)}")
        return specs[names.index(select)]
    if len(specs) > 1:
        raise builder.error(
            _line(specs[1]),
            f"servingEngineSpec.modelSpec lists {len(specs)} models ({', '.join(names)}); pick one with --select NAME",
        )
    return specs[0]


def _chart_vllm_config(builder: _Builder, spec: yaml.Node, config: yaml.Node | None) -> None:
    """vllmConfig as deployment-vllm-multi.yaml renders it into vLLM's flags (and what it never renders)."""
    # `{{- with $modelSpec.vllmConfig }}`: nothing of vllmConfig renders when it is absent or empty
    if isinstance(config, yaml.MappingNode) and config.value:
        given = {k.value: (k, v) for k, v in config.value if isinstance(k, yaml.ScalarNode)}
        for key, (key_node, value_node) in given.items():
            value = _value(value_node)
            if key in _CHART_ONLY_KEYS or key == "enablePrefixCaching":
                continue
            if key == "enableChunkedPrefill":  # hasKey: --enable-chunked-prefill or --no-enable-chunked-prefill
                builder.set("enable-chunked-prefill", _go_truthy(value), _line_of(key_node))
            elif key in _CHART_VALUE_FLAGS:
                builder.set(_CHART_VALUE_FLAGS[key], value, _line_of(key_node))
            else:
                builder.unapplied.append((f"vllmConfig.{key}", value, _line_of(key_node)))
        # `if .enablePrefixCaching` ... `else` --no-enable-prefix-caching: off unless it is set true
        prefix = given.get("enablePrefixCaching")
        on = prefix is not None and _go_truthy(_value(prefix[1]))
        # (its line: the key's, else vllmConfig's, where the chart's --no-enable-prefix-caching comes from)
        builder.set("enable-prefix-caching", on, _line_of(prefix[0]) if prefix else _key_line(spec, config))
        extra = _get(config, "extraArgs")
        if extra is not None:
            tokens = [(str(_value(item)), _line_of(item)) for item in _seq(extra)]
            split: list[tuple[str, int]] = []
            for token, line in tokens:  # "--flag value" in one list item is two words
                split += [(word, line) for word in shlex.split(token)] if " " in token else [(token, line)]
            builder.argv(split, model_positional=False)


def _chart_deployment(builder: _Builder, spec: yaml.Node) -> None:
    """GPUs per replica, replicas and the GPU type from the modelSpec's requests and node selector terms."""
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
