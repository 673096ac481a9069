"""A function over LONG_LINES lines is split, or says in its docstring why it is one piece."""

from __future__ import annotations

import ast

import pytest

from servelab.paths import REPO_DIR

pytestmark = pytest.mark.unit

LONG_LINES = 80


def _functions(body: list):
    """Every function defined in these statements, nested ones too: a def is a statement, so only statements'
    bodies are looked into (a whole ast.walk, every expression too, was a quarter of the test's time)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                yield from _functions(inner)
        for case in getattr(node, "cases", []):  # match statements
            yield from _functions(case.body)


def test_every_long_function_says_why_it_is_one_piece():
    unexplained = []
    for path in sorted((REPO_DIR / "src" / "servelab").rglob("*.py")):
        for node in _functions(ast.parse(path.read_text(encoding="utf-8")).body):
            lines = node.end_lineno - node.lineno + 1
            if lines > LONG_LINES and "one piece:" not in " ".join((ast.get_docstring(node) or "").split()).lower():
                unexplained.append(f"{path.relative_to(REPO_DIR)}:{node.lineno} {node.name} ({lines} lines)")
    assert not unexplained, (
        f"functions over {LONG_LINES} lines: split each, or add to its docstring a sentence 'One piece: <why>' "
        f"(in the file named): {unexplained}"
    )
