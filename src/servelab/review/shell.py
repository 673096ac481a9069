"""A shell script's variables, resolved the way the shell would before vLLM sees its flags.

Launch scripts rarely write `vllm serve` with literal values: they assign `TP_SIZE=8` or
`MODEL_PATH=${MODEL_PATH:-meta-llama/...}` earlier in the same script and pass `$TP_SIZE`,
`${MODEL_PATH}` or `$((TP_SIZE * 2))`. This module substitutes, line by line (so every
flag keeps its line number):

- assignments earlier in the script (`NAME=value`, `export NAME=value`), in order;
- the environment the reviewer is given (`servelab review --var NAME=VALUE`, or a
  Kubernetes container's `env`), which `${NAME:-default}` prefers over its default and a
  plain assignment overrides, as in the shell;
- `${NAME:?message}` (the script stops unless NAME is set: its value must be passed in);
- `$((...))` integer arithmetic (+ - * / % and parentheses; / truncates as bash's does).

Single-quoted text is left alone, as the shell leaves it. What cannot be resolved (a
command substitution, a variable never assigned) stays as written; the flag parser then
refuses it with the variable's name and how to pass it (unresolved()).
"""

from __future__ import annotations

import ast
import operator
import re

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGNMENT = re.compile(rf"^\s*(?:export\s+|readonly\s+|local\s+|declare\s+(?:-\w+\s+)?)?({_NAME})=(.*?)\s*$")
_REFERENCE = re.compile(rf"\$\{{({_NAME})(?:(:?[-=?])([^}}]*))?\}}|\$({_NAME})")
_ARITHMETIC = re.compile(r"\$\(\(([^()]*(?:\([^()]*\)[^()]*)*)\)\)")
_LEFT = re.compile(rf"\$\(\(|\$\{{?{_NAME}|\$\(")
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
    ast.Div: lambda a, b: int(a / b),
}


_OPENS = re.compile(r"^\s*(if|case|while|until)\b")
_CLOSES = re.compile(r"^\s*(fi|esac|done)\b")
_FOR = re.compile(rf"^\s*for\s+({_NAME})\s+in\b")


def resolve(text: str, environment: dict[str, str] | None = None, notes: dict[str, str] | None = None) -> str:
    """The script with every variable it can resolve substituted; same lines, same order.

    A variable assigned inside an if / case / loop body, set by a for loop, or assigned a
    command's output has a value only running the script knows: it is left unresolved, and
    `notes` (when given) records why, by name, for how_to_pass()."""
    env = dict(environment or {})
    given = set(env)  # --var and the container's env stand in for what only running the script knows
    notes = notes if notes is not None else {}
    out, blocks = [], []  # blocks: (keyword, line) of the if / case / loop the line is inside
    for number, line in enumerate(text.splitlines(), 1):
        resolved = _substitute(line, env)
        loop = _FOR.match(resolved)
        if loop and loop.group(1) not in given:
            env.pop(loop.group(1), None)
            notes[loop.group(1)] = f"is set by the for loop on line {number}"
        opens = _OPENS.match(resolved)
        if loop:
            blocks.append(("for", number))
        elif opens:
            blocks.append((opens.group(1), number))
        elif _CLOSES.match(resolved) and blocks:
            blocks.pop()
        match = _ASSIGNMENT.match(resolved)
        if match and match.group(1) in given and (blocks or _LEFT.search(match.group(2))):
            pass  # the value passed in stands for the branch taken or the command's output
        elif match and blocks:
            keyword, start = blocks[-1]
            env.pop(match.group(1), None)
            notes[match.group(1)] = (
                f"is assigned inside the {keyword} on line {start} (line {number}), so its "
                "value depends on which branch runs"
            )
        elif match and _LEFT.search(match.group(2)):
            env.pop(match.group(1), None)
            if re.search(r"\$\((?!\()|`", match.group(2)):
                notes[match.group(1)] = f"is assigned a command's output on line {number}"
        elif match:
            env[match.group(1)] = _unquote(match.group(2))
            notes.pop(match.group(1), None)
        out.append(resolved)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


_LITERAL_DOLLAR = "\ue000"  # a '$' inside single quotes, kept from expansion and from unresolved()


def literal(word: str) -> str:
    """A word as the command receives it: single-quoted dollars restored."""
    return word.replace(_LITERAL_DOLLAR, "$")


def unresolved(word: str) -> list[str]:
    """The variables (or command substitutions) a word still carries after resolve()."""
    names = [m.group(1) or m.group(4) for m in _REFERENCE.finditer(word)]
    for m in _ARITHMETIC.finditer(word):
        names += re.findall(_NAME, m.group(1))
    command = re.search(r"\$\((?!\()", word)
    kubernetes = re.fullmatch(rf".*\$\(({_NAME})\).*", word)
    if kubernetes:  # Kubernetes' $(NAME): an env var the container spec does not set
        names.append(kubernetes.group(1))
    elif command:
        names.append(word[command.start() :])  # a command substitution: only running the script knows
    return list(dict.fromkeys(names))


def how_to_pass(names: list[str], notes: dict[str, str] | None = None) -> str:
    shown = ", ".join(f"${n}" if re.fullmatch(_NAME, n) else n for n in names)
    example = next((n for n in names if re.fullmatch(_NAME, n)), "NAME")
    why = [f"${n} {notes[n]}" for n in names if notes and n in notes]
    if why:
        return (
            f"{'; '.join(why)}: the reviewer does not run the script, so pass the value you deploy with: "
            f"servelab review CONFIG --var {example}=VALUE"
        )
    return (
        f"{shown} is not assigned anywhere the reviewer can see: assign it in the script before the "
        f"command ({example}=...), or pass its value: servelab review CONFIG --var {example}=VALUE"
    )


def _substitute(line: str, env: dict[str, str]) -> str:
    parts = re.split(r"('[^']*')", line)  # single quotes: no expansion
    for i in range(0, len(parts), 2):
        parts[i] = _arithmetic(_references(parts[i], env), env)
    for i in range(1, len(parts), 2):
        parts[i] = parts[i].replace("$", _LITERAL_DOLLAR)
    return "".join(parts)


def _references(text: str, env: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3)
        value = env.get(name)
        if op and (value is None or (op.startswith(":") and value == "")):
            if op.endswith("?"):  # ${NAME:?message}: bash stops the script; the value must come from outside
                return "${" + name + "}"  # the message dropped, so the word stays one word with its name
            if _LEFT.search(default or ""):
                return m.group(0)
            if op.endswith("="):
                env[name] = default
            return default
        return value if value is not None else m.group(0)

    return _REFERENCE.sub(one, text)


def _arithmetic(text: str, env: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        expression = re.sub(_NAME, lambda v: env.get(v.group(0), v.group(0)), m.group(1))
        try:
            return str(_evaluate(ast.parse(expression.strip(), mode="eval").body))
        except (SyntaxError, ValueError, ZeroDivisionError, KeyError):
            return re.sub(r"\s+", "", m.group(0))  # one shell word, so the flag parser sees it whole

    return _ARITHMETIC.sub(one, text)


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("not integer arithmetic")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value.split("#")[0].strip() if " #" in value else value
