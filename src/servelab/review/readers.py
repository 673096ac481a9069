"""The forms a deployment is published in beyond a command line, YAML, manifests and Helm values,
each read without running anything and handed to forms.py as vLLM's own arguments:

- a Python script that builds the engine: `vllm.LLM(...)`, `AsyncEngineArgs(...)`,
  `EngineArgs(...)`, or a Ray Serve LLM app (`LLMConfig(model_loading_config=...,
  engine_kwargs=..., accelerator_type=...)`, served with `build_openai_app`). The script is
  parsed with `ast` and never imported: a value is read only when it is a literal, a name the
  module binds once to a literal, `dict(...)` of literals, or `os.environ.get("NAME", default)`
  (`--var NAME=VALUE`, else the default), or `int(...)`, `float(...)`, `str(...)` of those; anything else is refused by name where a reviewed
  knob needs it. Ray Serve LLM's fields are those of `ray.serve.llm.LLMConfig`: the model is
  `model_loading_config.model_source` (else `model_id`), `engine_kwargs` are vLLM's engine
  arguments, `accelerator_type` the GPU (docs.ray.io, "Serving LLMs", Ray 2.4x);
- the same Ray Serve LLM config written as a Serve YAML (`applications: ... args: llm_configs:`);
- a SageMaker deployment's `SM_VLLM_*` environment (a dict passed as a model's `env=`, or a
  KEY=VALUE env file): vLLM's SageMaker entrypoint turns each `SM_VLLM_NAME=value` into
  `--name value` (prefix dropped, lower case, `_` to `-`; an empty value passes the flag alone)
  and runs `vllm serve` with them (vllm-project/vllm
  `examples/online_serving/sagemaker-entrypoint.sh`; AWS's vLLM container,
  aws/deep-learning-containers `vllm/build_artifacts/sagemaker_entrypoint.sh`, does the same);
  the instance type (`ml.p5.48xlarge`) names the GPUs;
- docker compose: each service's `image`, `command` and `entrypoint` (list or string),
  `environment` (list or mapping) and the GPUs its `deploy.resources.reservations.devices` ask
  for; the vllm/vllm-openai image's entrypoint is `vllm serve`;
- a SLURM job script: its `#SBATCH` lines (`--nodes`, `--gpus-per-node`, `--ntasks-per-node`,
  `--gres=gpu:N`) set what SLURM exports to the job (`SLURM_NNODES`, `SLURM_JOB_NUM_NODES`,
  `SLURM_GPUS_ON_NODE`, `SLURM_GPUS_PER_NODE`, `SLURM_NTASKS_PER_NODE`, `SLURM_NTASKS`), so
  `$((SLURM_NNODES * SLURM_GPUS_ON_NODE))` resolves in the script's vLLM command;
- a systemd unit: `ExecStart=` is the command, `Environment=` its environment.

Nothing here imports forms.py: each reader returns a Reading that forms.py feeds into the same
flag parser every other form goes through.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from .schema import ReviewInputError


@dataclass
class Reading:
    """What a reader found: vLLM's arguments in one of three shapes, plus the deployment facts."""

    form: str
    kwargs: list[tuple[str, Any, int]] = field(default_factory=list)  # engine arguments by name
    argv: list[tuple[str, int]] | None = None  # vLLM's command-line arguments, with their lines
    model_positional: bool = True
    command: tuple[str, int] | None = None  # shell text holding a vLLM command, and its first line
    tokens: list[tuple[str, int]] | None = None  # a command's words (a compose exec-form list)
    env: dict[str, str] = field(default_factory=dict)
    deployment: dict[str, Any] = field(default_factory=dict)
    lines: dict[tuple, int] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # engine argument -> why its value is not read
    image: tuple[str, int | None] | None = None  # the image the read service runs, and its line


# --- Python scripts ------------------------------------------------------------------------

_ENGINE_CALLS = {"LLM", "AsyncEngineArgs", "EngineArgs", "AsyncLLMEngine", "LLMEngine"}
_RAY_CALLS = {"LLMConfig"}
_SAGEMAKER_PREFIX = "SM_VLLM_"


class NoEngine(ReviewInputError):
    """A Python script that builds no engine: forms.py refuses it as a form it does not read."""


_CONVERSIONS = ("int", "float", "str", "bool")


def _convert(node: ast.Call, called: str, value: Any) -> Any:
    """int(...), float(...), str(...) of a value the reviewer read (an environment variable's text, mostly:
    int(os.environ.get("TP", "1"))), as Python converts it; bool of text is refused: bool("0") is True,
    which is seldom what the script meant, so the reviewer does not guess."""
    if called == "str" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    if called in ("int", "float") and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return int(value) if called == "int" else float(value)
        except ValueError:
            raise _NotLiteral(node, f"{called}({value!r}) fails in Python") from None
    if called == "bool" and isinstance(value, (bool, int)):
        return bool(value)
    raise _NotLiteral(node, f"{called}() of {value!r}")


class _NotLiteral(Exception):
    def __init__(self, node: ast.AST, why: str = ""):
        super().__init__(why)
        self.node, self.why = node, why


def looks_like_python(text: str, suffix: str) -> bool:
    if suffix == ".py":
        return True
    return bool(
        re.search(r"^\s*(?:from\s+[\w.]+\s+import\s|import\s+\w)", text, re.M)
        and re.search(r"\b(LLM|AsyncEngineArgs|EngineArgs|LLMConfig)\s*\(|SM_VLLM_", text)
    )


def read_python(name: str, text: str, variables: dict[str, str], select: str | None) -> Reading:
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise ReviewInputError(f"{name}:{exc.lineno}: Python syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ReviewInputError(f"{name}: the Python script nests too deeply to read") from None
    scope = _Scope(tree, variables)
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = _called(node)
            if called in _ENGINE_CALLS | _RAY_CALLS and (node.args or node.keywords):
                calls.append((called, node))
            elif _sagemaker_env(node, scope) is not None:
                calls.append(("SageMaker", node))
    if not calls:
        env_dict = next((d for d in ast.walk(tree) if isinstance(d, ast.Dict) and _has_sagemaker_key(d)), None)
        if env_dict is not None:  # boto3's create_model(PrimaryContainer={"Environment": {...}})
            reading = _sagemaker_from_dict(name, env_dict, scope, None)
            instance = next(
                (
                    (n.value, n.lineno)
                    for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and sagemaker_instance(n.value)
                ),
                None,
            )
            if instance:
                _instance(reading, *instance)
            return reading
        raise NoEngine(
            f"{name}: a Python script that builds no vLLM engine the reviewer reads (vllm.LLM(...), "
            "AsyncEngineArgs(...), EngineArgs(...), a Ray Serve LLMConfig(...), or a SageMaker model with "
            "an SM_VLLM_* env)"
        )
    calls.sort(key=lambda c: c[1].lineno)
    if select:
        chosen = [c for c in calls if select in (str(c[1].lineno), c[0])]
        if not chosen:
            raise ReviewInputError(f"{name}: no engine built on line or by call {select!r}; found: " + _listing(calls))
        calls = chosen
    if len(calls) > 1 and len({id(c[1]) for c in calls}) > 1:
        calls = _outermost(calls)
    if len(calls) > 1:
        raise ReviewInputError(
            f"{name}: {len(calls)} vLLM engines are built here ({_listing(calls)}); pick one with --select LINE"
        )
    called, node = calls[0]
    if called == "SageMaker":
        env_node = _sagemaker_env(node, scope)
        reading = _sagemaker_from_dict(name, env_node, scope, node)
        deploy = _deploy_call(tree, node)  # the SDK's model.deploy(instance_type="ml.g6e.xlarge", ...)
        if deploy is not None and "gpu-name" not in reading.deployment:
            for kw in deploy.keywords:
                if kw.arg == "instance_type":
                    try:
                        _instance(reading, str(scope.value(kw.value, kw.arg, name)), kw.value.lineno)
                    except ReviewInputError:
                        pass
        return reading
    if called in _RAY_CALLS:
        values = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        reading = Reading(form="Ray Serve LLM app (LLMConfig)")
        _ray(reading, name, values, scope, node.lineno)
        return reading
    reading = Reading(form=f"Python script ({called}(...))")
    if node.args:
        reading.kwargs.append(("model", scope.value(node.args[0], "model", name), node.args[0].lineno))
    for kw in node.keywords:
        if kw.arg is None:  # LLM(**engine_kwargs): a dict of literals
            mapping = scope.value(kw.value, "**", name)
            if not isinstance(mapping, dict):
                raise ReviewInputError(f"{name}:{kw.value.lineno}: **{ast.unparse(kw.value)} is not a dict literal")
            reading.kwargs += [(str(k), v, kw.value.lineno) for k, v in mapping.items()]
            continue
        _keyword(reading, scope, name, kw.arg, kw.value)
    return reading


def _listing(calls: list[tuple[str, ast.Call]]) -> str:
    return ", ".join(f"{called} on line {node.lineno}" for called, node in calls)


def _outermost(calls: list[tuple[str, ast.Call]]) -> list[tuple[str, ast.Call]]:
    """AsyncLLMEngine.from_engine_args(AsyncEngineArgs(...)) is one engine: keep the one with arguments."""
    inner = {id(n) for _, node in calls for n in ast.walk(node) if n is not node}
    kept = [c for c in calls if id(c[1]) not in inner]
    with_args = [c for c in calls if c[1].keywords]
    return with_args if len(with_args) == 1 else kept


def _keyword(reading: Reading, scope: _Scope, name: str, key: str, node: ast.expr) -> None:
    try:
        reading.kwargs.append((key, scope.value(node, key, name, strict=False), node.lineno))
    except _NotLiteral as exc:
        reading.refused[key] = _refusal(key, exc)
        reading.kwargs.append((key, _Unread(ast.unparse(node)), node.lineno))


class _Unread(str):
    """An engine argument whose value is an expression the reviewer does not evaluate."""


def _refusal(key: str, exc: _NotLiteral) -> str:
    shown = ast.unparse(exc.node)
    why = f" ({exc.why})" if exc.why else ""
    return (
        f"{key}={shown}: the reviewer reads a Python script without running it, so it evaluates only "
        f"literals, names bound once to a literal, dict(...), os.environ.get(NAME, default) and int/float/str of "
        f"those{why}: "
        "write the value deployed, or pass it with --var NAME=VALUE where the script reads it from the environment"
    )


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr == "from_engine_args":
            return ""
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


class _Scope:
    """Names the module binds, each to the one literal assigned (more than once: not resolvable)."""

    def __init__(self, tree: ast.AST, variables: dict[str, str]):
        self.variables = variables
        self.bound: dict[str, ast.AST | None] = {}
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    self.bound[target.id] = value if target.id not in self.bound else None

    def value(self, node: ast.AST, key: str, name: str, *, strict: bool = True, depth: int = 0) -> Any:
        try:
            return self._eval(node, depth)
        except _NotLiteral as exc:
            if strict:
                raise ReviewInputError(f"{name}:{getattr(node, 'lineno', '?')}: " + _refusal(key, exc)) from None
            raise

    def _eval(self, node: ast.AST, depth: int) -> Any:
        if depth > 32:
            raise _NotLiteral(node, "names bound to names more than 32 deep")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self._eval(e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _NotLiteral(node, "a ** inside a dict")
            return {
                self._eval(k, depth + 1): self._eval(v, depth + 1)
                for k, v in zip(node.keys, node.values)
                if k is not None
            }
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._eval(node.operand, depth + 1)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
            left, right = self._eval(node.left, depth + 1), self._eval(node.right, depth + 1)
            both = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
            if both and abs(left) < 2**40 and abs(right) < 2**40:  # 1024 * 8: arithmetic on numbers only
                return {ast.Mult: left * right, ast.Add: left + right, ast.Sub: left - right}[type(node.op)]
        if isinstance(node, ast.Name):
            bound = self.bound.get(node.id, ...)
            if bound is ...:
                raise _NotLiteral(node, f"{node.id} is not assigned in the script")
            if bound is None:
                raise _NotLiteral(node, f"{node.id} is assigned more than once, or by a loop")
            return self._eval(bound, depth + 1)
        if isinstance(node, ast.Call):
            called = _called(node) if not isinstance(node.func, ast.Name) else node.func.id
            if called in ("dict", "ModelLoadingConfig", "LoraConfig", "LLMServingArgs") and not node.args:
                return {kw.arg: self._eval(kw.value, depth + 1) for kw in node.keywords if kw.arg}
            env = self._environment(node, depth)
            if env is not None:
                return env
            if called in _CONVERSIONS and len(node.args) == 1 and not node.keywords:
                return _convert(node, called, self._eval(node.args[0], depth + 1))
        raise _NotLiteral(node)

    def _environment(self, node: ast.Call, depth: int) -> Any:
        """os.environ.get("NAME", default) / os.getenv("NAME", default): --var NAME=VALUE, else the default."""
        func = node.func
        text = ast.unparse(func)
        if text not in ("os.environ.get", "os.getenv", "environ.get", "getenv") or not node.args:
            return None
        key = self._eval(node.args[0], depth + 1)
        if not isinstance(key, str):
            return None
        if key in self.variables:
            return self.variables[key]
        default = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "default"), None)
        )
        if default is None:
            raise _NotLiteral(node, f"${key} has no default in the script: pass --var {key}=VALUE")
        return self._eval(default, depth + 1)


# --- Ray Serve LLM ------------------------------------------------------------------------------


def _ray(reading: Reading, name: str, values: dict[str, Any], scope: _Scope | None, line: int) -> None:
    """One LLMConfig: its fields as ast nodes (a script) or plain values (a Serve YAML)."""

    def plain(key: str) -> Any:
        node = values.get(key)
        if node is None or scope is None:
            return node
        return scope.value(node, key, name)

    loading = plain("model_loading_config") or {}
    if not isinstance(loading, dict) or not (loading.get("model_source") or loading.get("model_id")):
        raise ReviewInputError(
            f"{name}:{line}: the LLMConfig has no model_loading_config with a model_source or model_id"
        )
    model = loading.get("model_source") or loading.get("model_id")
    if isinstance(model, dict):  # a remote source: {bucket_uri: ...}
        model = loading.get("model_id")
    reading.kwargs.append(("model", model, line))
    engine_node = values.get("engine_kwargs")
    if scope is not None and isinstance(engine_node, ast.Dict):
        for key_node, value_node in zip(engine_node.keys, engine_node.values):
            key = scope.value(key_node, "engine_kwargs", name) if key_node is not None else None
            if isinstance(key, str):
                _keyword(reading, scope, name, key, value_node)
    elif scope is not None and isinstance(engine_node, ast.Call) and not engine_node.args:
        for kw in engine_node.keywords:
            if kw.arg:
                _keyword(reading, scope, name, kw.arg, kw.value)
    else:
        engine = plain("engine_kwargs") or {}
        if not isinstance(engine, dict):
            raise ReviewInputError(f"{name}:{line}: engine_kwargs must be a mapping of vLLM engine arguments")
        reading.kwargs += [(str(k), v, line) for k, v in engine.items()]
    accelerator = plain("accelerator_type")
    if isinstance(accelerator, str):
        reading.deployment["gpu-name"] = accelerator
        reading.lines[("deployment", "gpu")] = line
    autoscaling = (plain("deployment_config") or {}).get("autoscaling_config") or {}
    if isinstance(autoscaling, dict):
        replicas = autoscaling.get("max_replicas") or autoscaling.get("min_replicas")
        if isinstance(replicas, int) and replicas > 1:
            reading.deployment["replicas"] = replicas


def read_ray_yaml(name: str, data: Any, line: int, select: str | None) -> Reading:
    """A Ray Serve config file: applications[].args.llm_configs[] (each an LLMConfig as a mapping)."""
    configs = []
    for app in (data or {}).get("applications") or []:
        args = app.get("args") if isinstance(app, dict) else None
        for config in (args or {}).get("llm_configs") or []:
            if isinstance(config, dict):
                configs.append(config)
    if not configs:
        raise ReviewInputError(f"{name}: a Ray Serve config whose applications list no llm_configs")
    ids = [str((c.get("model_loading_config") or {}).get("model_id")) for c in configs]
    if select:
        if select not in ids:
            raise ReviewInputError(f"{name}: no llm_config with model_id {select!r}; found: {', '.join(ids)}")
        configs = [configs[ids.index(select)]]
    elif len(configs) > 1:
        raise ReviewInputError(
            f"{name}: {len(configs)} llm_configs ({', '.join(ids)}); pick one with --select MODEL_ID"
        )
    reading = Reading(form="Ray Serve LLM config")
    _ray(reading, name, configs[0], None, line)
    return reading


# --- SageMaker -----------------------------------------------------------------------------------

# GPUs of SageMaker's GPU instance families (aws.amazon.com/sagemaker/pricing, "Instance types"):
# the family's GPU, and the count by size.
_SAGEMAKER_FAMILIES = {
    "g5": "A10G",
    "g6": "L4",
    "g6e": "L40S",
    "p4d": "A100-40GB",
    "p4de": "A100",
    "p5": "H100",
    "p5e": "H200",
    "p5en": "H200",
}
_SAGEMAKER_COUNTS = {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8}


def sagemaker_instance(instance: str) -> tuple[str, int] | None:
    match = re.fullmatch(r"ml\.([a-z0-9]+)\.(\d*xlarge)", instance.strip())
    if not match or match.group(1) not in _SAGEMAKER_FAMILIES:
        return None
    family, size = match.groups()
    count = 8 if family.startswith("p") else _SAGEMAKER_COUNTS.get(size, 1)
    return _SAGEMAKER_FAMILIES[family], count


def _has_sagemaker_key(node: ast.Dict) -> bool:
    return any(isinstance(k, ast.Constant) and str(k.value).startswith(_SAGEMAKER_PREFIX) for k in node.keys)


def _sagemaker_env(node: ast.Call, scope: _Scope) -> ast.AST | None:
    """The env= of a call (sagemaker Model(...), HuggingFaceModel(...)) that holds SM_VLLM_* keys."""
    for kw in node.keywords:
        if kw.arg == "env":
            target: ast.AST | None = kw.value
            if isinstance(target, ast.Name) and isinstance(scope.bound.get(target.id), ast.Dict):
                target = scope.bound[target.id]
            if isinstance(target, ast.Dict) and _has_sagemaker_key(target):
                return target
    return None


def _deploy_call(tree: ast.AST, model_call: ast.Call) -> ast.Call | None:
    """The `.deploy(...)` of a SageMaker model: `Model(...).deploy(...)`, or `m = Model(...)` then
    `m.deploy(...)` (the SDK's Model.deploy takes instance_type, the instance that runs the container)."""
    names = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and node.value is model_call
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "deploy":
            owner = node.func.value
            if owner is model_call or (isinstance(owner, ast.Name) and owner.id in names):
                return node
    return None


def _sagemaker_from_dict(name: str, env_node: Any, scope: _Scope, call: ast.Call | None) -> Reading:
    pairs = []
    for key_node, value_node in zip(env_node.keys, env_node.values):
        key = scope.value(key_node, "env", name) if key_node is not None else None
        if isinstance(key, str):
            pairs.append((key, scope.value(value_node, key, name), key_node.lineno))
    reading = sagemaker_env(pairs)
    if call is not None:
        for kw in call.keywords:
            if kw.arg in ("instance_type",):
                try:
                    _instance(reading, str(scope.value(kw.value, kw.arg, name)), kw.value.lineno)
                except ReviewInputError:
                    pass
    return reading


def _instance(reading: Reading, instance: str, line: int) -> None:
    found = sagemaker_instance(instance)
    if found:
        reading.deployment["gpu-name"], reading.deployment["gpus-per-node"] = found
        reading.lines[("deployment", "gpu")] = line
        reading.lines[("deployment", "gpus-per-node")] = line


def sagemaker_env(pairs: list[tuple[str, Any, int]]) -> Reading:
    """SM_VLLM_NAME=value pairs as vLLM's SageMaker entrypoint passes them to `vllm serve`."""
    reading = Reading(form="SageMaker SM_VLLM_* environment", argv=[], model_positional=False)
    assert reading.argv is not None
    for key, value, line in pairs:
        if key.startswith(_SAGEMAKER_PREFIX):
            flag = "--" + key[len(_SAGEMAKER_PREFIX) :].lower().replace("_", "-")
            reading.argv.append((flag, line))
            if value not in (None, ""):
                reading.argv.append((str(value).lower() if isinstance(value, bool) else str(value), line))
        else:
            reading.env[key] = "" if value is None else str(value)
    if not any(word.startswith("--") for word, _ in reading.argv):
        raise ReviewInputError("no SM_VLLM_* variable found")
    return reading


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def looks_like_env_file(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and all(_ENV_LINE.match(ln) for ln in lines) and any(_SAGEMAKER_PREFIX in ln for ln in lines)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def read_env_file(name: str, text: str) -> Reading:
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _ENV_LINE.match(line)
        if match:
            raw = match.group(2).strip()
            if raw[:1] in ("{", "[") and _is_json(raw):
                # JSON written unquoted (docker's --env-file and SageMaker take the line as it stands;
                # a shell would strip its double quotes): the value is the JSON as written
                pairs.append((match.group(1), raw, number))
                continue
            try:
                words = shlex.split(match.group(2), comments=True) or [""]
            except ValueError as exc:  # an unclosed quote
                raise ReviewInputError(
                    f"{name}:{number}: cannot read {match.group(1)}= ({exc}); check its quotes"
                ) from None
            pairs.append((match.group(1), words[0], number))
    reading = sagemaker_env(pairs)
    for number, line in enumerate(text.splitlines(), 1):
        instance = re.search(r"\bml\.[a-z0-9]+\.\d*xlarge\b", line)
        if instance:
            _instance(reading, instance.group(0), number)
            break
    return reading


# --- docker compose --------------------------------------------------------------------------


def is_compose(data: Any) -> bool:
    services = data.get("services") if isinstance(data, dict) else None
    return isinstance(services, dict) and any(
        isinstance(s, dict) and ({"image", "build", "command"} & set(s)) for s in services.values()
    )


# --- SLURM ---------------------------------------------------------------------------------------

_SBATCH = re.compile(r"^#SBATCH\s+(.*)$", re.M)


def is_slurm(text: str) -> bool:
    return bool(_SBATCH.search(text))


def slurm_environment(text: str) -> tuple[dict[str, str], dict[str, Any], dict[tuple, int]]:
    """What SLURM exports to the job from its #SBATCH lines, and the deployment they ask for.

    SLURM_NNODES and SLURM_JOB_NUM_NODES from --nodes / -N; SLURM_GPUS_ON_NODE and
    SLURM_GPUS_PER_NODE from --gpus-per-node or --gres=gpu[:type]:N; SLURM_NTASKS_PER_NODE from
    --ntasks-per-node; SLURM_NTASKS from --ntasks / -n, or nodes x tasks per node (sbatch(1),
    "OUTPUT ENVIRONMENT VARIABLES")."""
    options: dict[str, tuple[str, int]] = {}
    for match in _SBATCH.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        try:
            words = shlex.split(match.group(1), comments=True)
        except ValueError:
            continue
        i = 0
        while i < len(words):
            word = words[i]
            if word.startswith("--") and "=" in word:
                key, value = word[2:].split("=", 1)
            elif word in ("-N", "-n", "-G") and i + 1 < len(words):
                key, value = {"-N": "nodes", "-n": "ntasks", "-G": "gpus"}[word], words[i + 1]
                i += 1
            elif word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-"):
                key, value = word[2:], words[i + 1]
                i += 1
            else:
                key, value = word.lstrip("-"), ""
            options.setdefault(key, (value, line))
            i += 1
    env: dict[str, str] = {}
    deployment: dict[str, Any] = {}
    lines: dict[tuple, int] = {}
    nodes = options.get("nodes")
    if nodes and re.fullmatch(r"\d+(-\d+)?", nodes[0]):
        count = nodes[0].split("-")[0]
        env.update(SLURM_NNODES=count, SLURM_JOB_NUM_NODES=count)
        deployment["nodes"] = int(count)
        lines[("deployment", "nodes")] = nodes[1]
    gpus = options.get("gpus-per-node")
    gres = options.get("gres")
    per_node = None
    if gpus:
        kind, _, count = gpus[0].rpartition(":")
        per_node = (count, kind, gpus[1])
    elif gres:
        for item in gres[0].split(","):
            parts = item.split(":")
            if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
                per_node = (parts[-1], parts[1] if len(parts) == 3 else "", gres[1])
    if per_node and per_node[0].isdigit():
        count, kind, line = per_node
        env.update(SLURM_GPUS_ON_NODE=count, SLURM_GPUS_PER_NODE=count)
        deployment["gpus-per-node"] = int(count)
        lines[("deployment", "gpus-per-node")] = line
        if kind:
            deployment["gpu-name"] = kind
            lines[("deployment", "gpu")] = line
    constraint = options.get("constraint")  # a node feature, often the GPU: --constraint=h100
    if constraint and "gpu-name" not in deployment:
        for feature in re.split(r"[&|,\[\]*]", constraint[0].strip("'\"")):
            if feature and not feature.isdigit():
                deployment.setdefault("gpu-candidates", []).append(feature)
                lines[("deployment", "gpu")] = constraint[1]
    tasks_per_node = options.get("ntasks-per-node")
    if tasks_per_node and tasks_per_node[0].isdigit():
        env["SLURM_NTASKS_PER_NODE"] = tasks_per_node[0]
    tasks = options.get("ntasks")
    if tasks and tasks[0].isdigit():
        env["SLURM_NTASKS"] = tasks[0]
    elif tasks_per_node and tasks_per_node[0].isdigit() and "SLURM_NNODES" in env:
        env["SLURM_NTASKS"] = str(int(tasks_per_node[0]) * int(env["SLURM_NNODES"]))
    return env, deployment, lines


# --- systemd units -------------------------------------------------------------------------------


def is_systemd(text: str) -> bool:
    return bool(re.search(r"^\s*\[Service\]\s*$", text, re.M) and re.search(r"^\s*ExecStart\s*=", text, re.M))


def read_systemd(name: str, text: str) -> Reading:
    """ExecStart= as the command (on its own lines, continuations kept), Environment= as its environment.

    systemd expands ${NAME} and $NAME from Environment= in ExecStart= (systemd.service(5),
    "Command lines"), as the shell resolver does; a leading -, @, :, + or ! on the command is
    systemd's, not the program's."""
    reading = Reading(form="systemd unit")
    out = []
    in_exec = False
    section = ""
    found = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if re.fullmatch(r"\[\w+\]", stripped):
            section, in_exec = stripped, False
            out.append("")
            continue
        if in_exec:
            out.append(line)
            in_exec = line.rstrip().endswith("\\")
            continue
        key, sep, value = stripped.partition("=")
        if section == "[Service]" and sep and key.strip() == "Environment":
            try:
                for word in shlex.split(value):
                    k, eq, v = word.partition("=")
                    if eq:
                        reading.env[k] = v
            except ValueError:
                raise ReviewInputError(
                    f"{name}:{number}: cannot split Environment= ({value}); check its quotes"
                ) from None
            out.append("")
        elif section == "[Service]" and sep and key.strip() == "ExecStart" and value.strip():
            found = found or number
            out.append(value.strip().lstrip("-@:+!"))
            in_exec = line.rstrip().endswith("\\")
        else:
            out.append("")
    if found is None:
        raise ReviewInputError(f"{name}: the systemd unit has no ExecStart= in its [Service] section")
    reading.command = ("\n".join(out) + "\n", 1)
    return reading
