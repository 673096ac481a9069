"""vLLM's arguments as a command line gives them, gathered into the reviewed config.

_Builder collects flags (each with its line), removed flags and the deployment facts, for every
form forms.py reads; the rest reads a `vllm serve` / `python -m vllm.entrypoints.openai.api_server`
/ `docker run vllm/vllm-openai` / Dynamo worker command line as bash splits it, and a Dockerfile's
exec-form ENTRYPOINT and CMD.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from .. import hardware
from . import limits, shell, vllm_flags
from .schema import Doc, ReviewInputError, load_yaml
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


def _deployment_comment(name: str, number: int, text: str) -> dict:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        limits.check_yaml_nodes(f"{name}:{number}", [node] if node is not None else [], "deployment comment")
        given = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError:
        given = None
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
    finally:
        loader.dispose()
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
        self.image: tuple[str, int | None] | None = None  # the read service's image (versions.detect)
        # Settings the form holds that never reach vLLM (a Helm values key the chart does not render):
        # (where, as written; value; line)
        self.unapplied: list[tuple[str, Any, int | None]] = []

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
        """vLLM's arguments: an optional positional model, then flags.

        One piece: one pass over the tokens, as vLLM's parser makes it, where how many tokens a flag takes
        depends on the flag (removed, a form's own, boolean, multiple), so each case moves the same cursor."""
        i = 0
        if model_positional and tokens and not tokens[0][0].startswith("-"):
            self._resolved("model", tokens[0][0], tokens[0][1])
            self.set("model", shell.literal(tokens[0][0]), tokens[0][1])
            i = 1
        tokens = self._with_config_file(_optimization_level(tokens), i)
        dotted: dict[str, tuple[dict[str, Any], int]] = {}  # flag -> (its dotted keys merged, first line)
        while i < len(tokens):
            token, line = tokens[i]
            if token in _SEPARATORS:
                break
            if token.startswith("-") and "." in token.partition("=")[0]:
                i = self._dotted(tokens, i, dotted)
                continue
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
                    "a second --config: vLLM takes one config file (More than one config file specified!)",
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
        for name, (merged, line) in dotted.items():  # vLLM appends them after the rest, as JSON: they win
            self.data[name] = merged
            self.lines[(name,)] = line

    def _with_config_file(self, tokens: list[tuple[str, int]], start: int) -> list[tuple[str, int]]:
        """`--config FILE.yaml`, as vLLM 0.32's FlexibleArgumentParser._pull_args_from_config reads it
        (vllm/utils/argparse_utils.py): the file's keys become flags (true: --key; false: --no-key where the
        flag has one; a list: --key item ...; a mapping: --key JSON; else --key value), put right after the
        model, so every flag on the command line, before --config or after it, wins over the file's. The file
        is looked for beside the config reviewed (vLLM opens it from the server's working directory)."""
        at = next((n for n, (t, _) in enumerate(tokens) if n >= start and re.fullmatch(r"--config(=.*)?", t)), None)
        if at is None:
            return tokens
        token, line = tokens[at]
        if "=" in token:
            written, rest = token.partition("=")[2], tokens[at + 1 :]
        elif at + 1 < len(tokens):
            written, rest = tokens[at + 1][0], tokens[at + 2 :]
        else:
            raise self.error(line, "--config needs the YAML file it reads")
        missing = shell.unresolved(written)
        if missing:
            raise self.error(line, f"--config {written}: " + shell.how_to_pass(missing, self.shell_notes))
        path = Path(written).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        if not path.is_file():
            raise self.error(
                line,
                f"--config {written}: vLLM reads its flags from that YAML file, and it is not beside this config "
                f"(looked for {path}): put the file there, or pass its path with --var NAME=PATH where the command "
                "names it by a variable, so the review merges it as vLLM does (the command line over the file)",
            )
        given = load_yaml(path, "--config file").data
        if not isinstance(given, dict):
            raise self.error(
                line, f"--config {written}: the file must be a YAML mapping of flags, such as max-num-seqs: 64"
            )
        model_given = start > 0
        from_file: list[tuple[str, int]] = []
        for key, value in given.items():
            name = str(key)
            if name.replace("_", "-") == "model" and model_given:
                continue  # the positional model wins (vllm serve takes model_tag over --model)
            if isinstance(value, bool):
                flag, _ = vllm_flags.lookup(name)
                if value:
                    from_file.append((f"--{name}", line))
                elif flag is not None and flag.negatable:
                    from_file.append((f"--no-{name}", line))
            elif isinstance(value, list):
                if value:
                    from_file += [(f"--{name}", line)] + [(str(item), line) for item in value]
            elif isinstance(value, dict):
                from_file += [(f"--{name}", line), (json.dumps(value), line)]
            elif value is not None:
                from_file += [(f"--{name}", line), (str(value), line)]
        return tokens[:start] + from_file + tokens[start:at] + rest

    def _dotted(self, tokens: list[tuple[str, int]], i: int, dotted: dict[str, tuple[dict[str, Any], int]]) -> int:
        """`--compilation-config.pass_config.fuse_rope_kvcache=True`, `-cc.mode 3`, `--x.list+ a,b`: one key of a
        JSON flag, as vLLM 0.32's FlexibleArgumentParser.parse_args reads it (vllm/utils/argparse_utils.py):
        the words after the flag name, split at '.', nest the value (JSON, else a human-readable number such as
        80g, else text; a trailing '+' splits it at commas into a list), and every dotted key of one flag
        merges into one JSON value passed after the other arguments. Returns the index after it."""
        token, line = tokens[i]
        written, has_inline, inline = token.partition("=")
        if not has_inline and (i + 1 >= len(tokens) or tokens[i + 1][0] in _SEPARATORS):
            raise self.error(line, f"{written} needs a value")
        value_text, after = (inline, i + 1) if has_inline else (tokens[i + 1][0], i + 2)
        if written.endswith("+"):
            written, value_text = written[:-1], json.dumps(value_text.split(","))
        name, *keys = written.lstrip("-").split(".")
        flag, _ = vllm_flags.lookup(name)
        if flag is None:
            raise self.error(line, vllm_flags.unknown_message(name) + f" (in the {self.form})")
        if not keys or not all(keys):
            raise self.error(line, f"{written}: write the key after the dot, such as --{flag.name}.KEY VALUE")
        try:
            value: Any = json.loads(value_text)
        except ValueError:
            value = _human_readable_int(value_text)
        for key in reversed(keys):
            value = {key: value}
        merged, first = dotted.get(flag.name, ({}, line))
        _merge(merged, value)
        dotted[flag.name] = (merged, first)
        return after

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
        doc.image = self.image
        doc.unapplied.extend(self.unapplied)
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


def _optimization_level(tokens: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """`-O3`, `-O=3` and `-O 3` as vLLM 0.32's parser rewrites them: --optimization-level 3."""
    out: list[tuple[str, int]] = []
    for index, (token, line) in enumerate(tokens):
        if token.startswith("-O") and token != "-O" and not token.startswith("-O-"):
            out += [("--optimization-level", line), (token[3:] if token[2] == "=" else token[2:], line)]
        elif token == "-O" and index + 1 < len(tokens) and tokens[index + 1][0] in {"0", "1", "2", "3"}:
            out.append(("--optimization-level", line))
        else:
            out.append((token, line))
    return out


def _human_readable_int(text: str) -> Any:
    """vLLM's human_readable_int for a dotted value that is not JSON ('80g', '1k'), else the text."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if not match:
        return text
    number, suffix = match.groups()
    if suffix in "kmgt":
        return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
    return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1)) if "." not in number else text


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    """vLLM's recursive_dict_update: nested mappings merge, lists extend, the rest is replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


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
