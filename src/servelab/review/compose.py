"""A docker compose file's vLLM service, read as compose would start it (compose-spec.io,
"Services top-level elements"):

- `image`, `command` and `entrypoint`, each a list (exec form, one word per item) or a string
  (split into words as a shell would, without running one);
- with no `entrypoint`, the image's own: vllm/vllm-openai's is `vllm serve` (the vllm-openai
  target of vLLM's docker/Dockerfile), so `command` holds its arguments, model first;
- `environment`, a list of NAME=VALUE or a mapping: the values `${NAME}` and `${NAME:-default}`
  in the command resolve from (compose interpolates from the shell and `.env`, which the
  reviewer does not see: `--var NAME=VALUE` gives them);
- the GPUs: `deploy.resources.reservations.devices` (`count`, or `device_ids`), else
  NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES in its environment.

With several vLLM services, --select NAME picks one. Returns a readers.Reading for forms.py.
"""

from __future__ import annotations

import yaml

from . import limits
from .manifests import _value
from .readers import Reading
from .schema import ReviewInputError


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _runs_vllm(service: yaml.Node) -> bool:
    text = " ".join(str(_value(_get(service, k)) or "") for k in ("image", "command", "entrypoint"))
    return "vllm" in text.lower()


def read_compose(name: str, root: yaml.MappingNode, select: str | None, variables: dict[str, str]) -> Reading:
    try:  # forms.load's nodes are checked already (manifests._yaml_nodes); a direct caller's are not
        limits.check_yaml_nodes(name, [root])
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
    services = _get(root, "services")
    found = [(str(_value(k)), v) for k, v in (services.value if isinstance(services, yaml.MappingNode) else [])]
    running = [(n, s) for n, s in found if _runs_vllm(s)]
    if select:
        running = [(n, s) for n, s in found if n == select]
        if not running:
            raise ReviewInputError(f"{name}: no service named {select!r}; found: {', '.join(n for n, _ in found)}")
    if not running:
        raise ReviewInputError(
            f"{name}: no service in this docker compose file runs vLLM (a vllm/vllm-openai image, or a "
            f"`vllm serve` command); services: {', '.join(n for n, _ in found) or 'none'}"
        )
    if len(running) > 1:
        raise ReviewInputError(
            f"{name}: {len(running)} services run vLLM ({', '.join(n for n, _ in running)}); pick one with --select NAME"
        )
    service_name, service = running[0]
    reading = Reading(form=f"docker compose service {service_name}")
    environment = _get(service, "environment")
    if isinstance(environment, yaml.MappingNode):
        for k, v in environment.value:
            reading.env[str(_value(k))] = "" if _value(v) is None else str(_value(v))
    elif isinstance(environment, yaml.SequenceNode):
        for item in environment.value:
            key, _, value = str(_value(item)).partition("=")
            reading.env[key] = value
    reading.env.update(variables)
    image = str(_value(_get(service, "image")) or "")
    if image:
        reading.image = (image, _line(_get(service, "image")))
    words: list[tuple[str, int]] = []
    shell_text = None
    for part in ("entrypoint", "command"):
        node = _get(service, part)
        if isinstance(node, yaml.SequenceNode):
            words += [(str(_value(item)), _line(item)) for item in node.value]
        elif isinstance(node, yaml.ScalarNode) and _value(node) not in (None, ""):
            first = _line(node) + (1 if node.style in ("|", ">") else 0)
            text = str(_value(node))
            if node.style == ">":  # folded: one line, as compose reads it
                first = _line(node)
            if words:  # entrypoint as a list, command as a string: its words follow
                words += [(w, first) for w in text.split()]
            else:
                shell_text = (text, first) if part == "command" else None
                if part == "entrypoint":
                    words += [(w, first) for w in text.split()]
    entrypoint_given = _get(service, "entrypoint") is not None
    if shell_text and not entrypoint_given:
        command, first = shell_text
        if "vllm" in command.split()[0] or any(w in command for w in ("vllm serve", "-m vllm.", "bash", "sh -c")):
            reading.command = (command, first)
        else:  # the image's entrypoint (vllm serve) takes these words
            reading.command = ("vllm serve " + command, first)
    elif words and (entrypoint_given or any("vllm" in w for w, _ in words[:3]) or words[0][0] in ("bash", "sh")):
        if words[0][0].split("/")[-1] in ("bash", "sh") and len(words) >= 3 and words[1][0].startswith("-"):
            reading.command = (words[-1][0], words[-1][1])
        else:
            reading.tokens = words
    elif "vllm/vllm-openai" in image:
        reading.argv = words
    else:
        reading.tokens = words
    _gpus(reading, service)
    return reading


def _gpus(reading: Reading, service: yaml.Node) -> None:
    devices = _get(_get(_get(_get(service, "deploy"), "resources"), "reservations"), "devices")
    for device in devices.value if isinstance(devices, yaml.SequenceNode) else []:
        count, ids = _get(device, "count"), _get(device, "device_ids")
        number = _value(count)
        if isinstance(number, int) and not isinstance(number, bool):
            reading.deployment["gpus-per-node"] = number
            reading.lines[("deployment", "gpus-per-node")] = _line(count)
        elif isinstance(ids, yaml.SequenceNode):
            reading.deployment["gpus-per-node"] = len(ids.value)
            reading.lines[("deployment", "gpus-per-node")] = _line(ids)
        if "gpus-per-node" in reading.deployment:
            return
    for key in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        visible = reading.env.get(key, "")
        if visible and all(p.strip().isdigit() for p in visible.split(",")):
            reading.deployment["gpus-per-node"] = len(visible.split(","))
            return
