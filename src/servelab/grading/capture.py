"""What a hidden test does while a submission is graded: hand the answer over as plain JSON, nothing else.

A hidden test cell holds no key and awards no points. It calls

    from servelab.grading.capture import capture as _capture
    _capture("warmup1-per-token", warmup1_kv_bytes_per_token)

and the grader, in its own process outside the sandbox, compares what arrived
with the key (see trusted.py). The answer travels as one line,
`<grade_id> TAB <json>`, written to a pipe the sandbox's runner reads (file
descriptor SERVELAB_ANSWER_FD, taken once when the kernel starts); the runner
keeps it only when it arrives while the test cell of that grade_id runs.

Everything the encoder uses is bound when this module is first imported, before
any submission code runs: a submission that later replaces `json`, `math`,
`isinstance`, `os.write` or the display machinery changes nothing here. Code
that goes after this module by name can at most change or drop its own answers.
Outside the grader (a learner's own kernel) there is no pipe and capture does nothing.
"""

from __future__ import annotations

import json.encoder as _json_encoder
import os

ANSWER_FD_ENV = "SERVELAB_ANSWER_FD"
MAX_ANSWER_BYTES = 1_000_000  # one answer; a larger one arrives as "too large" and earns nothing
MAX_DEPTH = 32

_isinstance, _type, _len, _repr, _str = isinstance, type, len, repr, str
_bool, _int, _float, _list, _tuple, _dict = bool, int, float, list, tuple, dict
_float_repr, _int_repr = float.__repr__, int.__repr__
_list_iter, _tuple_iter, _dict_items = list.__iter__, tuple.__iter__, dict.items
_join = "".join
_escape = _json_encoder.encode_basestring_ascii  # C, when the interpreter has it (CPython does)
_encode_utf8 = str.encode
_write, _getattr = os.write, getattr
_INF = float("inf")

_fd = None


class NotPlain(ValueError):
    """The answer holds something that is not a plain JSON value."""


def _number(x) -> str:
    if x != x or x == _INF or x == -_INF:
        raise NotPlain("NaN or infinity is not a number the grader can compare")
    return _float_repr(x)


def _key(k) -> str:
    if _isinstance(k, _str):
        return _escape(k)
    if k is True or k is False:
        return '"true"' if k else '"false"'
    if k is None:
        return '"null"'
    if _isinstance(k, _int):
        return '"' + _int_repr(k) + '"'
    if _isinstance(k, _float):
        return '"' + _number(k) + '"'
    raise NotPlain(f"a dict key of type {_type(k).__name__}")


def encode(value, depth: int = 0) -> str:
    """`value` as JSON text, the way json.dumps(allow_nan=False) writes it, or NotPlain."""
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if _isinstance(value, _str):
        return _escape(value)
    if _isinstance(value, _int) and not _isinstance(value, _bool):
        return _int_repr(value)
    if _isinstance(value, _float):
        return _number(value)
    if _isinstance(value, _list):
        return "[" + ", ".join([encode(v, depth + 1) for v in _list_iter(value)]) + "]"
    if _isinstance(value, _tuple):
        return "[" + ", ".join([encode(v, depth + 1) for v in _tuple_iter(value)]) + "]"
    if _isinstance(value, _dict):
        return "{" + ", ".join([_key(k) + ": " + encode(v, depth + 1) for k, v in _dict_items(value)]) + "}"
    if _type(value).__module__ == "numpy" and _type(value).__name__ in _NUMPY_SCALARS:
        item = value.item()  # a numpy number or bool: its plain Python value
        if _type(item) in (_bool, _int, _float):
            return encode(item, depth + 1)
    if _type(value).__module__ == "numpy" and _type(value).__name__ == "ndarray":
        return encode(value.tolist(), depth + 1)  # an array of numbers: the list it holds
    raise NotPlain(f"a value of type {_type(value).__name__}")


_NUMPY_SCALARS = frozenset(
    {
        "bool_",
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "longlong",
        "ulonglong",
        "intc",
        "uintc",
    }
)


def capture(grade_id: str, answer) -> None:
    """Hand one test's answer to the grader; a no-op outside the grader."""
    if _fd is None:
        return
    try:
        text = encode(answer)
        if _len(text) > MAX_ANSWER_BYTES:
            text = "!too large: " + _repr(_len(text)) + " characters"
    except NotPlain as exc:
        text = "!" + _str(exc)
    except RecursionError:
        text = "!nested too deeply"
    line = _encode_utf8(
        _str(grade_id).replace("\t", " ").replace("\n", " ") + "\t" + text.replace("\n", " ") + "\n", "utf-8", "replace"
    )
    while line:
        line = line[_write(_fd, line) :]


def install_from_environment() -> None:
    """Bind the pipe named by SERVELAB_ANSWER_FD (the sandbox kernel calls this before any cell runs)."""
    global _fd
    value = os.environ.pop(ANSWER_FD_ENV, "")
    if value.isdigit():
        _fd = int(value)
        os.set_inheritable(_fd, False)  # a child process the submission starts does not get it
