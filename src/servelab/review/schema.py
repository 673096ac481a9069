"""Reading what a team hands the reviewer: YAML with the line of every key, typed and checked.

Every key is checked against the keys it may be, every value against the type it must have,
and a bad one stops the review with one message that names the file, the line and the key
(ReviewInputError), never a traceback. serving.py and workload_spec.py read their documents
with these validators.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import limits


class ReviewInputError(ValueError):
    """Bad input to the reviewer; str() is one message naming the file and line."""


# --- YAML with line numbers --------------------------------------------------


@dataclass
class Doc:
    """One input document: its data, where each key sits, and where its paths are relative to."""

    name: str
    data: Any
    role: str  # "serving config" or "workload"
    base_dir: Path | None = None
    lines: dict[tuple, int] = field(default_factory=dict)
    # Flags vLLM has removed, as written, with their line: reviewed as a finding, not refused.
    removed_flags: list[tuple[str, Any, int | None]] = field(default_factory=list)
    # Benchmark-only settings written beside the server (a `vllm bench serve --ignore-eos` in the script).
    benchmark_flags: list[tuple[str, int | None]] = field(default_factory=list)
    # The vLLM release the config is judged as, and what said so (versions.detect).
    vllm_version: str = ""
    vllm_version_source: str = ""
    # The image of the service or container read (compose, a manifest, Helm values), and its line.
    image: tuple[str, int | None] | None = None
    # Settings written that never reach vLLM (a Helm values key the chart does not render): (where, value, line).
    unapplied: list[tuple[str, Any, int | None]] = field(default_factory=list)

    def line(self, path: tuple) -> int | None:
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def where(self, path: tuple = ()) -> str:
        line = self.line(path)
        return f"{self.name}:{line}" if line else self.name

    def error(self, path: tuple, message: str) -> ReviewInputError:
        return ReviewInputError(f"{self.where(path)}: {message}")

    def resolve(self, path_text: str) -> Path:
        path = Path(path_text).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        return path


def read_text(path: Path, role: str, form: str = "UTF-8 YAML") -> str:
    """A file's text, or a ReviewInputError naming the file and what it should have been."""
    name = str(path)
    try:
        limits.check_file(path, role)  # by its size, before reading it
        text = path.read_text(encoding="utf-8")
        limits.check_text(name, text, role)
        return text
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
    except FileNotFoundError:
        raise ReviewInputError(f"{name}: no such file (the {role})") from None
    except IsADirectoryError:
        raise ReviewInputError(f"{name}: is a folder, not a {role} file") from None
    except UnicodeDecodeError:
        raise ReviewInputError(f"{name}: not a text file (the {role} must be {form})") from None
    except OSError as exc:
        raise ReviewInputError(f"{name}: cannot read the {role}: {exc.strerror}") from None


def load_yaml(path: str | Path, role: str) -> Doc:
    """Read one YAML file, keeping the line of every key and list item."""
    path = Path(path)
    name = str(path)
    text = read_text(path, role)

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ReviewInputError(f"{name}: the {role} file is empty")
        limits.check_yaml_nodes(name, [node], role)  # before anything expands its aliases
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if mark else name
        problem = exc.problem or exc.context or "not valid YAML"
        column = f" (column {mark.column + 1})" if mark else ""
        started = ""
        if exc.context and exc.context_mark and mark and exc.context_mark.line != mark.line:
            started = f"; {exc.context} that starts on line {exc.context_mark.line + 1}"
        raise ReviewInputError(f"{where}: YAML syntax error: {problem}{column}{started}") from None
    except yaml.YAMLError as exc:
        raise ReviewInputError(f"{name}: YAML syntax error: {exc}") from None
    except limits.LimitError as exc:
        raise ReviewInputError(str(exc)) from None
    finally:
        loader.dispose()

    doc = Doc(name=name, data=data, role=role, base_dir=path.resolve().parent)
    _record_lines(doc, node, ())
    return doc


def _record_lines(doc: Doc, node: yaml.Node, path: tuple) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        seen_own: dict[str, bool] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key, line = key_node.value, key_node.start_mark.line + 1
            # A merge key (`<<: *anchor`) puts the anchor's keys first (PyYAML's flatten_mapping);
            # they lie outside this mapping's own lines, and a key of its own overrides them.
            own = node.start_mark.index <= key_node.start_mark.index <= node.end_mark.index
            if not own and key in seen:
                continue
            if key in seen and seen_own.get(key):
                raise ReviewInputError(
                    f"{doc.name}:{line}: {label(path + (key,))}: duplicate key "
                    f"(already given on line {seen[key]}); keep one"
                )
            seen[key], seen_own[key] = line, own
            doc.lines[path + (key,)] = line
            _record_lines(doc, value_node, path + (key,))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            doc.lines[path + (index,)] = item.start_mark.line + 1
            _record_lines(doc, item, path + (index,))


# --- small validators ----------------------------------------------------------


def label(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the document"


def show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a yes/no value)"
    if isinstance(value, str):
        return f"{value!r} (text)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def mapping(
    doc: Doc, path: tuple, value: Any, known: tuple[str, ...], what: str, sep: str = "-"
) -> dict[str, tuple[Any, tuple]]:
    """Check a mapping's keys; return {canonical key: (value, path of that key)}.

    vLLM accepts both spellings of a flag name, so 'max_num_seqs' and 'max-num-seqs'
    are one key here too: sep is the spelling the known keys use.
    """
    if not isinstance(value, dict):
        raise doc.error(
            path, f"{label(path)}: expected a mapping with keys such as {', '.join(known[:4])}, got {show(value)}"
        )
    out: dict[str, tuple[Any, tuple]] = {}
    other = "_" if sep == "-" else "-"
    for raw, item in value.items():
        key_path = path + (raw,)
        if not isinstance(raw, str):
            raise doc.error(key_path, f"{label(path)}: key {raw!r} is not a name")
        key = raw.strip().replace(other, sep)
        if key not in known:
            raise doc.error(key_path, f"{label(key_path)}: unknown key in the {what}{suggest(key, known)}")
        if key in out:
            raise doc.error(key_path, f"{label(key_path)}: given twice (as '{out[key][1][-1]}' too); keep one")
        out[key] = (item, key_path)
    return out


def suggest(key: str, known: tuple[str, ...], noun: str = "keys") -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f". Known {noun}: {', '.join(known)}"


def as_int(doc: Doc, path: tuple, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise doc.error(path, f"{label(path)}: must be a whole number, got {show(value)}")
    if minimum is not None and value < minimum:
        raise doc.error(path, f"{label(path)}: must be at least {minimum}, got {value}")
    return value


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def as_human_int(doc: Doc, path: tuple, value: Any, minimum: int | None = None, auto: bool = False) -> int:
    """A whole number as vLLM 0.32's parser reads it (human_readable_int and
    human_readable_int_or_auto, vllm/utils/argparse_utils.py): '16k' = 16,000 (k m g t decimal),
    '32K' = 32,768 (K M G T binary, whole numbers only); with auto, 'auto' or -1 is -1."""
    if isinstance(value, str):
        text = value.strip()
        if auto and (text == "-1" or text.lower() == "auto"):
            return -1
        match = _HUMAN_INT.fullmatch(text)
        if match:
            number, suffix = match.groups()
            if suffix in _DECIMAL:
                value = int(float(number) * _DECIMAL[suffix])
            elif "." in number:
                raise doc.error(
                    path,
                    f"{label(path)}: decimals are not allowed with the binary suffix {suffix} "
                    f"(vLLM refuses {text}); did you mean {number}{suffix.lower()}?",
                )
            else:
                value = int(number) * _BINARY[suffix]
        elif re.fullmatch(r"[+-]?\d+", text):
            value = int(text)
    if auto and value == -1:
        return -1
    return as_int(doc, path, value, minimum)


def as_number(
    doc: Doc,
    path: tuple,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise doc.error(path, f"{label(path)}: must be a number, got {show(value)}")
    if minimum is not None and value < minimum:
        raise doc.error(path, f"{label(path)}: must be at least {minimum}, got {value}")
    if above is not None and value <= above:
        raise doc.error(path, f"{label(path)}: must be above {above}, got {value}")
    if maximum is not None and value > maximum:
        raise doc.error(path, f"{label(path)}: must be at most {maximum}, got {value}")
    return float(value)


def as_bool(doc: Doc, path: tuple, value: Any) -> bool:
    if not isinstance(value, bool):
        raise doc.error(path, f"{label(path)}: must be true or false, got {show(value)}")
    return value


def as_str(doc: Doc, path: tuple, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"{label(path)}: must be text, got {show(value)}")
    return value.strip()


def as_text(value: Any) -> str:
    """Free text (a source, a note): any scalar YAML gives, dates included."""
    return "" if value is None else str(value).strip()


def choice(doc: Doc, path: tuple, value: Any, choices: dict[str, str], what: str) -> str:
    text = as_str(doc, path, value).lower()
    if text not in choices:
        raise doc.error(path, f"{label(path)}: unknown {what} {value!r}{suggest(text, tuple(choices), 'values')}")
    return choices[text]


def swap(pair: tuple[Any, tuple]) -> tuple[tuple, Any]:
    """(value, path) -> (path, value), the order the validators take."""
    value, path = pair
    return path, value


def required(doc: Doc, fields: dict, key: str, parent: tuple) -> tuple[tuple, Any]:
    if key not in fields:
        raise doc.error(parent, f"{label(parent)}: '{key}' is required")
    value, path = fields[key]
    return path, value


def json_or_mapping(doc: Doc, path: tuple, value: Any) -> Any:
    """A JSON-valued flag as either form writes it: the command line's JSON string parsed, YAML's mapping as is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise doc.error(
            path, f"{label(path)}: not valid JSON ({exc.msg}); write it as a YAML mapping instead"
        ) from None
