"""How big an input the reviewer reads: checked before any parser sees it.

A serving config or workload is a few kilobytes (the largest in data/configs/public/ is under
7 KB). A file far past that is a log, a bundle or an attack, and every parser the reviewer uses
(PyYAML, shlex, Python's ast) takes time and memory that grow with it, or with its nesting: a
10 MB one-line command took 89 s and 514 MB in the shell splitter before failing. So each input
is refused, with what to do, when it is over any of these, in time that does not grow with the
file (its size is read from the file system before its text, and the text is scanned once).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import yaml


class LimitError(Exception):
    """An input over a limit; str() names the file (and line) and what to do. schema.read_text
    raises it as a ReviewInputError (this module imports nothing of the reviewer's)."""


MAX_BYTES = 256 * 1024  # the whole file: 37x the largest public config (under 7 KB)
MAX_LINE = 16 * 1024  # characters in one line (a speculative-config JSON is a few hundred)
MAX_LINES = 20_000
MAX_DEPTH = 64  # brackets, braces and parentheses open at once, or YAML indentation levels
MAX_DOCUMENTS = 200  # `---` separated YAML documents (a Helm chart's rendered manifests are tens)
# Values in a YAML document once its aliases are expanded: PyYAML shares an alias's node with its
# anchor, but every walk of the document (the value, its lines) visits it once per alias, so a
# chain of nine anchors each aliasing the last nine times ("billion laughs", 441 bytes) is 9**9
# values. The largest public config is a few hundred values; 100,000 is 100x a Helm chart's values.
MAX_YAML_NODES = 100_000


def check_file(path: Path, role: str) -> None:
    """Refuse a file too large to be a config, from its size alone (before reading it)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return  # read_text says what is wrong with the path
    if size > MAX_BYTES:
        raise LimitError(
            f"{path}: the {role} is {size:,} bytes; servelab reads files up to {MAX_BYTES:,} bytes "
            "(a deployment's config is a few KB): pass the file that holds the vLLM command or config "
            "itself, not a log, an archive or a whole repository's manifests"
        )


def check_text(name: str, text: str, role: str) -> None:
    """Refuse text over the limits above, naming the line; one pass over the characters."""
    if len(text) > MAX_BYTES:
        raise LimitError(
            f"{name}: the {role} is {len(text):,} characters; servelab reads up to {MAX_BYTES:,}: "
            "pass the config itself, not a log or a bundle"
        )
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise LimitError(
            f"{name}: the {role} has {len(lines):,} lines; servelab reads up to {MAX_LINES:,}: "
            "pass the one file that deploys vLLM"
        )
    documents = 0
    indents: list[int] = []
    depth = 0
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE:
            raise LimitError(
                f"{name}:{number}: line {number} is {len(line):,} characters long; servelab reads lines "
                f"up to {MAX_LINE:,}: split the command with `\\` continuations, or put a long JSON value "
                "in a file of its own"
            )
        if line.startswith("---"):
            documents += 1
            if documents > MAX_DOCUMENTS:
                raise LimitError(
                    f"{name}:{number}: more than {MAX_DOCUMENTS} YAML documents; pass the manifest that runs vLLM"
                )
        stripped = line.lstrip(" ")
        if stripped and not stripped.startswith("#"):
            indent = len(line) - len(stripped)
            while indents and indents[-1] >= indent:
                indents.pop()
            indents.append(indent)
            if len(indents) > MAX_DEPTH:
                raise _too_deep(name, number)
        for char in line:
            if char in "[{(":
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(name, number)
            elif char in "]})":
                depth = max(0, depth - 1)


def _too_deep(name: str, number: int) -> LimitError:
    return LimitError(
        f"{name}:{number}: nested more than {MAX_DEPTH} levels deep; a serving config nests a few "
        "levels (a speculative-config inside a manifest's args): pass the config itself"
    )


def check_yaml_nodes(name: str, roots: Iterable[yaml.Node], role: str = "serving config") -> None:
    """Refuse composed YAML whose aliases expand past MAX_YAML_NODES values, before anything
    constructs or walks it. Each distinct node's expanded size is counted once (memoized by
    identity), so the count costs time in the nodes written, not in the expansion; an anchor that
    contains an alias to itself expands without end and is refused too."""
    sizes: dict[int, int] = {}
    for root in roots:
        if _expanded_size(root, sizes) > MAX_YAML_NODES:
            raise LimitError(
                f"{name}: the {role}'s YAML aliases (*name) expand to more than {MAX_YAML_NODES:,} values "
                "(a config has hundreds); write the values out, or alias each anchor once or twice, "
                "not anchors of anchors"
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _expanded_size(root: yaml.Node, sizes: dict[int, int]) -> int:
    """Values under root with every alias expanded, capped at MAX_YAML_NODES + 1; iterative, so a
    long chain of anchors cannot exhaust Python's stack."""
    over = MAX_YAML_NODES + 1
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = min(over, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # an anchor holding an alias to itself: endless
            return over
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]
