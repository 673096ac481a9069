"""Text that came from a submission, made safe to print: the one way the grader writes it to a console or a log.

A student names their file, raises their own exceptions and writes their own
answers, so any of it may hold a carriage return that rewinds a console line,
`ESC[2K` that erases it, an OSC sequence that sets the terminal's title, `ESC[8m`
that hides what follows, a newline that starts a forged line, or a bidi override
that shows text in another order. `printable` escapes every character that is not
printable text (C0 and C1 controls, DEL, format characters such as the bidi
overrides and isolates and zero-width marks, line and paragraph separators,
surrogates, private-use and unassigned code points) as a Python escape (\\x1b,
\\u202e), so the terminal shows what was there and acts on none of it.

Every value the grader prints, logs or keeps as a flag that a submission could have
shaped passes through it: the console line of each submission (pipeline.describe),
the flags in scores.json and the grading reports, refusal reasons, nbgrader's and
the sandbox's log text. A backslash is left as it is, so escaping twice changes
nothing and a literal "\\x1b" typed by a student stays four harmless characters.
"""

from __future__ import annotations


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(value: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """`value` as text with every non-printable character escaped (a space stays; with `keep_newlines`, "\\n"
    stays too, for a block of log lines); cut to `limit` characters first when given."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() or ch == " " or (keep_newlines and ch == "\n") else _escape(ch) for ch in text
    )
