"""Checkers: one per kind of answer, each a pure function (answer, key) -> Result.

Like nbgrader's preprocessors, each checker does one thing and says how it
decides in its docstring. A checker never raises on a learner's answer: a
malformed answer earns zero points and feedback that says what form was
expected. The key carries everything the checker needs, including the points
the question is worth, so a checker keeps no state between calls.

Feedback should teach: when a wrong answer matches a known slip (K and V
counted once, attention heads used for KV heads, bits for bytes), the feedback
names the assumption that was off instead of only saying "wrong", and
`Result.slips` names it by a short stable id, which the class report counts.

Hidden tests in the instructor notebooks build the key from servelab itself
(model presets, hardware presets, the reviewer) and call `report`, which prints
the feedback and returns the points; nbgrader reads that returned number as the
cell's partial credit.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ..measurement import METRIC_DIRECTIONS


class _Scored(NamedTuple):
    points: float
    feedback: str


class Result(_Scored):
    """Points earned (0 .. key['points']) and feedback for the learner.

    `slips` names the known slips the checker recognised in a wrong answer: a short id that stays
    the same from run to run (a hint's "slip" in the key, or the option, field or knob it is about)
    -> what the slip is, in the key's own words. It sits beside the tuple, not in it, so
    `points, feedback = result` keeps working; the grader records it and the class report counts it.
    """

    # A Result made without slips (_make, _replace) shares this one, read-only.
    slips: Mapping[str, str] = MappingProxyType({})

    def __new__(cls, points: float, feedback: str, slips: Mapping[str, str] | None = None):
        result = super().__new__(cls, points, feedback)
        result.slips = dict(slips or {})
        return result


class AnswerFormError(ValueError):
    """The answer is not built from plain values (numbers, strings, lists, dicts)."""


def plain(answer: Any) -> Any:
    """Copy an answer into plain JSON values: numbers, strings, lists, dicts, bools, None.

    This strips any custom class (an object whose __eq__ always says True, a
    float subclass) before a checker compares it with a key.
    """
    try:
        return json.loads(json.dumps(answer, allow_nan=False, default=_numpy_value))
    except (TypeError, ValueError) as exc:
        raise AnswerFormError(
            f"the answer must be built from plain numbers, strings, lists and dicts ({exc})"
        ) from None


def _numpy_value(value: Any) -> Any:
    """A numpy scalar or array as the plain value it holds (np.float64(2.77) -> 2.77, np.True_ -> True).

    A learner who computes with numpy gets numpy values; they are right answers in another type.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not a plain value")


def report(result: Result) -> float:
    """Print a result's feedback and return its points (the hidden test's last line)."""
    points, feedback = result
    print(feedback)
    return round(float(points), 3)


# --------------------------------------------------------------------------- helpers


def _max_points(key: dict) -> float:
    return float(key.get("points", 1))


def _earn(fraction: float, key: dict) -> float:
    fraction = min(1.0, max(0.0, fraction))
    return round(fraction * _max_points(key), 3)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int past float's range (10**400): no finite number
        return None
    return value if math.isfinite(value) else None


def figures_tol(value: float, figures: int) -> float:
    """Half a unit of `value`'s last significant figure when written to `figures` of them (0 for none): how far an
    answer that agrees with it to that many figures can be (2.77 and 2.773 for 2.7731 at three; 1.61 for 1.605)."""
    if not figures or not value or not math.isfinite(value):
        return 0.0
    # x (1 + 1e-9): the float of a value written to its last figure, 1.605's 1.61, sits on the edge
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - figures + 1) * (1 + 1e-9)


def _close(a: float, b: float, rel_tol: float, abs_tol: float = 0.0, figures: int = 0) -> bool:
    """a is b within the tolerances, or agrees with b to `figures` significant figures."""
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=max(abs_tol, figures_tol(b, figures)))


def _name(key: dict) -> str:
    return key.get("name", "your answer")


def _checker(check):
    """Every checker's first step: the answer as plain JSON values (see plain), or no points and why not."""

    @functools.wraps(check)
    def checked(answer: Any, key: dict) -> Result:
        try:
            answer = plain(answer)
        except AnswerFormError as exc:
            return Result(0.0, f"{_name(key)}: {exc}.")
        return check(answer, key)

    return checked


def _fmt(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


# --------------------------------------------------------------------------- number


@_checker
def number(answer: Any, key: dict) -> Result:
    """A number within a relative tolerance of key['value'].

    key: value, points (1), rel_tol (0.01), abs_tol (0), unit (""), name,
    figures (0): an answer that agrees with the value to this many significant figures is right too, as a
    question that asks for them is answered (a rel_tol tighter than that figure would refuse a right one),
    hints: [{value, feedback}] - known wrong values and the assumption behind each.
    """
    name, unit = _name(key), key.get("unit", "")
    x = _as_number(answer)
    if x is None:
        if isinstance(answer, int) and not isinstance(answer, bool):
            return Result(0.0, f"{name}: {str(answer)[:12]}... ({len(str(answer))} digits) is not a finite number.")
        return Result(0.0, f"{name}: expected a number{' in ' + unit if unit else ''}, got {answer!r}.")
    expected = float(key["value"])
    rel_tol, abs_tol = float(key.get("rel_tol", 0.01)), float(key.get("abs_tol", 0.0))
    figures = int(key.get("figures", 0))
    if _close(x, expected, rel_tol, abs_tol, figures):
        return Result(_max_points(key), f"{name}: correct ({_fmt(x)} {unit}).".replace(" )", ")"))
    # Two slips can land on the same number (K and V counted once, or bytes per
    # value left out, both halve it in bf16): name every assumption that fits.
    reasons, slips = [], {}
    for hint in key.get("hints", []):
        if _close(x, float(hint["value"]), rel_tol, abs_tol, figures) and hint["feedback"] not in reasons:
            reasons.append(hint["feedback"])
            if hint.get("slip"):
                slips[hint["slip"]] = hint["feedback"]
    if reasons:
        return Result(0.0, f"{name}: {_fmt(x)} is off. " + " Or: ".join(reasons), slips)
    ratio = x / expected if expected else math.inf
    if x * expected < 0:  # the opposite sign: a factor says nothing
        return Result(
            0.0,
            f"{name}: {_fmt(x)} has the wrong sign (the answer is {'positive' if expected > 0 else 'negative'}). "
            + key.get("otherwise", "Recheck each factor of the formula against the model's config."),
        )
    direction = "high" if ratio > 1 else "low"
    return Result(
        0.0,
        f"{name}: {_fmt(x)} is too {direction} (by a factor of {max(ratio, 1 / ratio) if ratio else math.inf:.3g}). "
        + key.get("otherwise", "Recheck each factor of the formula against the model's config."),
    )


# --------------------------------------------------------------------------- choice


@_checker
def choice(answer: Any, key: dict) -> Result:
    """One option out of several, named by its letter (case-insensitive).

    key: correct (a letter), points, options {letter: why this option is right or wrong}.
    A wrong pick gets the reason that option is wrong.
    """
    name = _name(key)
    options = {k.lower(): v for k, v in key.get("options", {}).items()}
    if not isinstance(answer, str) or answer.strip().lower().strip("()") not in options:
        letters = ", ".join(repr(k) for k in sorted(options))
        return Result(0.0, f"{name}: expected one letter out of {letters}, got {answer!r}.")
    picked = answer.strip().lower().strip("()")
    if picked == key["correct"].lower():
        return Result(_max_points(key), f"{name}: correct. {options[picked]}")
    return Result(0.0, f"{name}: ({picked}) is not it. {options[picked]}", {f"chose-{picked}": options[picked]})


# --------------------------------------------------------------------------- yes / no


@_checker
def yes_no(answer: Any, key: dict) -> Result:
    """True or False against key['value'].

    key: value (bool), points, why (the reason the right answer is right, shown when it is missed).
    """
    name = _name(key)
    if not isinstance(answer, bool):
        return Result(0.0, f"{name}: expected True or False, got {answer!r}.")
    if answer is key["value"]:
        return Result(_max_points(key), f"{name}: correct. {key.get('why', '')}".strip())
    return Result(
        0.0,
        f"{name}: it is {key['value']}. {key.get('why', '')}".strip(),
        {f"said-{str(answer).lower()}": key.get("why", f"it is {key['value']}")},
    )


# --------------------------------------------------------------------------- selection


@_checker
def selection(answer: Any, key: dict) -> Result:
    """A set of option ids: the share of right options picked, less the share of wrong options picked.

    key: correct [ids], options {id: why it belongs or not}, points.
    Score = right picks / len(correct) - wrong picks / len(wrong options), floored at zero,
    so picking every option, or none, or picking at random, earns nothing on average.
    """
    name = _name(key)
    options = key.get("options", {})
    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        return Result(0.0, f"{name}: expected a list of option names out of {sorted(options)}, got {answer!r}.")
    picked = set(answer)
    unknown = picked - set(options)
    if unknown:
        return Result(0.0, f"{name}: unknown options {sorted(unknown)}; choose from {sorted(options)}.")
    correct = set(key["correct"])
    distractors = set(options) - correct
    right, wrong, missed = picked & correct, picked - correct, correct - picked
    share = len(right) / len(correct) - (len(wrong) / len(distractors) if distractors else 0.0)
    lines = [
        f"{name}: {len(right)} of {len(correct)} right options picked, {len(wrong)} of {len(distractors)} "
        f"wrong ones (score: the share of right options picked less the share of wrong ones, "
        f"so every option or none earns 0)."
    ]
    lines += [f"- '{o}' does not belong: {options[o]}" for o in sorted(wrong)]
    lines += [f"- missing '{o}': {options[o]}" for o in sorted(missed)]
    slips = {f"picked-{o}": options[o] for o in sorted(wrong)} | {f"missed-{o}": options[o] for o in sorted(missed)}
    return Result(_earn(share, key), "\n".join(lines), slips)


@_checker
def prediction(answer: Any, key: dict) -> Result:
    """A prediction made before the reveals, graded for completion: it can be edited after them, so a score
    on its rightness would grade the edit. Any non-empty list of valid option ids earns the points; the
    feedback is selection's, naming which picks were right.

    key: correct [ids], options {id: why it belongs or not}, points.
    """
    name = _name(key)
    options = key.get("options", {})
    if not isinstance(answer, list) or not answer:
        return Result(0.0, f"{name}: pick at least one option out of {sorted(options)}, as a list.")
    graded = selection(answer, key)
    if not graded.slips and graded.points == 0 and set(answer) - set(key["correct"]) - set(options):
        return Result(0.0, graded.feedback)  # not option names: the form's message
    if not all(isinstance(a, str) for a in answer):
        return Result(0.0, graded.feedback)
    correct = set(key["correct"])
    right, wrong = set(answer) & correct, set(answer) - correct
    first = (
        f"{name}: full marks for making the prediction (it is graded for completion). How it did: "
        f"{len(right)} of the {len(correct)} wrong claims spotted, {len(wrong)} that hold marked wrong."
    )
    return Result(_earn(1.0, key), "\n".join([first] + graded.feedback.split("\n")[1:]), graded.slips)


# --------------------------------------------------------------------------- fields


@_checker
def fields(answer: Any, key: dict) -> Result:
    """A small dict whose fields are each checked against an expected value.

    key: points, fields {field: {expect, rel_tol (numbers only), feedback}}.
    Each field is worth an equal share; a wrong field gets its feedback, which
    names the assumption behind the expected value.
    """
    name = _name(key)
    spec = key["fields"]
    if not isinstance(answer, dict):
        return Result(0.0, f"{name}: expected a dict with keys {sorted(spec)}, got {type(answer).__name__}.")
    right, lines, slips = 0, [], {}
    for field, want in spec.items():
        got = answer.get(field)
        if _field_matches(got, want):
            right += 1
        else:
            shown = "missing" if field not in answer else repr(got)
            lines.append(f"- {field} ({shown}): {want['feedback']}")
            slips[want.get("slip", field)] = want["feedback"]
    head = f"{name}: {right} of {len(spec)} parts right."
    return Result(_earn(right / len(spec), key), "\n".join([head] + lines), slips)


def _field_matches(got: Any, want: dict) -> bool:
    expect = want["expect"]
    if isinstance(expect, bool) or expect is None:
        return got is expect
    if isinstance(expect, (int, float)):
        x = _as_number(got) if not isinstance(got, str) else _number_in(got)
        return x is not None and _close(x, float(expect), float(want.get("rel_tol", 0.01)))
    if isinstance(expect, str):
        return isinstance(got, str) and _normal(got) in {_normal(e) for e in [expect] + want.get("also", [])}
    return got == expect


def _number_in(text: str) -> float | None:
    """The one number in a short text such as "8-way" or "TP 8"; None when there is none or more than one."""
    found = re.findall(r"\d+(?:\.\d+)?", text.replace(",", ""))
    return float(found[0]) if len(found) == 1 and len(text) <= 20 else None


def _normal(text: str) -> str:
    return text.strip().lower().replace("-", "_").replace(" ", "_")


# --------------------------------------------------------------------------- knob audit

VERDICTS = ("justified", "unjustified", "wrong")
MIN_REASON_WORDS = 4
# A knob may be named as the checklist names it or as the config file spells it.
KNOB_ALIASES = {
    "batching": ("max_num_seqs", "batch_size", "max_num_batched_tokens", "batch"),
    "quantization": ("quantisation", "dtype", "weight_dtype"),
    "parallelism": ("tensor_parallel_size", "pipeline_parallel_size", "tensor_parallel", "tp", "pp"),
    "speculative_decoding": (
        "speculative_config",
        "speculative",
        "spec_decode",
        "speculation",
        "num_speculative_tokens",
    ),
    "prefix_caching": ("enable_prefix_caching", "prefix_cache"),
    "max_model_len": ("max_len", "context_length"),
    "gpu_memory_utilization": ("gpu_memory", "memory_utilization"),
}


def _knob_of(name: Any, knobs) -> str | None:
    """The checklist knob a learner's key names, as the knob or as one of its config-file spellings."""
    n = _normal(str(name))
    return n if n in knobs else next((k for k in knobs if n in KNOB_ALIASES.get(k, ())), None)


def _by_knob(answer: dict, knobs) -> dict:
    """The learner's entries keyed by checklist knob: an exact knob name wins over a config-file alias."""
    out = {}
    for name, entry in answer.items():
        knob = _knob_of(name, knobs)
        if knob is not None and (knob not in out or _normal(str(name)) == knob):
            out[knob] = entry
    return out


# What a reason about each knob can name its fact with: one of the knob's own facts (a measurement or the
# load for a batch cap, the weights against the memory for parallelism, ...), where each alternative is a
# tuple of patterns that must all be there ("the weights do not fit" names a fact, "it does not fit" does
# not), or the reviewer's own figures (in GB or GiB): two of them, or one with what it is set against. The
# knob's name alone, or a word every sentence has, names nothing. Free text cannot be checked for truth here: a reason that names the right
# quantity with the wrong value still counts, which is why the feedback shows the reviewer's reason beside
# every knob.
_SIZE = (
    r"weights|\b\d+b\b|param|\d\s*gi?b\b|memory|\bvram\b|\bhbm\b|\b(?:one|single|a|1) (?:\w+ )?(?:gpu|h[12]00|card)\b"
)
_RELATION = (
    r"\bfits?\b|\bhold|exceed|too (?:big|large)|(?:larger|bigger|greater|more) than|\bneeds?\b|requires?\b|"
    r"\boom\b|out of memory|enough|overflow|\bover\b"
)
# words that set a figure against another (a load against the cap, a request against the limit)
_SET_AGAINST = r"\bcovers?\b|\bfits?\b|above|below|under|exceed|\bthan\b|\bcap\b|slots?|enough|headroom"
_COMPARED = _SET_AGAINST + r"|\bmatch"
KNOB_FACTS: dict[str, tuple[tuple[str, ...], ...]] = {
    # the measurement a cap needs, or the load set against the cap
    "batching": (
        (r"measur|benchmark|\btested\b|\bttft\b|\btpot\b|latenc|\bp(?:50|9[059])\b|\bslo\b",),
        (r"peak|concurren|\busers?\b|traffic|\bqps\b|arrival|\bload\b", _COMPARED),
    ),
    # the precision the weights are served in, or the accuracy trade it does or does not make
    "quantization": (
        (
            r"\bbf16\b|bfloat16|\bfp16\b|float16|16[- ]bit|\bint[48]\b|\bfp8\b|\bw4a16\b|\bw8a8\b|\bawq\b|"
            r"\bgptq\b|unquanti|not quanti|no quanti|full precision|half precision|sixteen[- ]bit|16 bits",
        ),
        (r"accura|quality|\bevals?\b|perplexit", r"\bno\b|\bnot\b|\bloss|trade|drop|same|reference|unchanged"),
    ),
    # the weights against one GPU's memory, or the parallel degree they need
    "parallelism": (
        (_SIZE, _RELATION),
        (
            r"\btp\s*(?:=|of|size)?\s*[2-8]\b|tensor[- _]parallel\w*(?:[- _]size)?\s*(?:=|of)?\s*[2-8]\b|"
            r"(?:two|2|more|several|multiple|second|another) (?:\w+ )?(?:gpus?|h[12]00s?)\b|shard|split",
        ),
    ),
    # speculation off (nothing verified), or the regime that decides whether it pays
    "speculative_decoding": (
        (
            r"\b(?:is|it's|its|turned|switched|left|set|stays?|kept|was|being|remains?|speculation|decoding)\s+off\b|"
            r"^\s*off\b|disabled|not enabl\w*|never enabl\w*|not (?:turn|switch)\w* (?:it )?on|no speculat|not set|not configured|"
            r"no draft|no verif|nothing to verif|ridge|memory[- ]bound|compute[- ]bound|\bk\s*=\s*\d",
        ),
    ),
    "prefix_caching": ((r"prefix|shared|system prompt|hit rate|cache hits?|reuse",),),
    # the longest request the workload sends, set against the limit
    "max_model_len": (
        (
            r"longest|biggest|largest|worst[- ]case|\bp9\d\b|\bmax(?:imum)? (?:request|prompt)|truncat|"
            r"prompts? (?:plus|\+|and) (?:its |their )?outputs?",
        ),
    ),
    "gpu_memory_utilization": ((r"\bkv\b|headroom|activation",), (_SIZE, _RELATION)),
}
_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)(k\b)?")
# A bare figure (8192 alone) is not the fact: it counts with a second of the reviewer's figures or with
# what it is set against.
_AGAINST = _SET_AGAINST + r"|\bmore\b|\bless\b|\bover\b|within|[<>\u2264\u2265]|\bvs\.?\b|against|\blimit\b|\bpeak\b"
GIB = 2**30 / 1e9


def _plain(text: str) -> str:
    """Lower case, with "doesn't" as "does not" and "can't" as "cannot", so one pattern reads both."""
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"\bwon't\b", "will not", re.sub(r"\bcan't\b", "cannot", text))
    return re.sub(r"n't\b", " not", text)


def _numbers(text: str) -> list[float]:
    """The figures in text, "4.7k" as 4700."""
    return [float(raw.replace(",", "")) * (1000 if k else 1) for raw, k in _NUMBER.findall(text)]


def _names_a_fact(because: Any, knob: str, reviewer_reason: str) -> bool:
    """A reason of four words or more that names one of the knob's facts or the reviewer's figures (_AGAINST)."""
    if not isinstance(because, str) or len(because.split()) < MIN_REASON_WORDS:
        return False
    text = _plain(because)
    if any(all(re.search(p, text) for p in group) for group in KNOB_FACTS.get(knob, ())):
        return True
    refs = [n for n in _numbers(_plain(reviewer_reason)) if n not in (0.0, 1.0)]
    named = {r for n in _numbers(text) for r in refs if abs(n - r) <= 0.05 * r or abs(n - r / GIB) <= 0.05 * r / GIB}
    return len(named) >= 2 or (len(named) == 1 and re.search(_AGAINST, text) is not None)


# A reason that asserts the opposite of its verdict earns nothing, whatever fact it names: "the weights
# fit on one H200" under "wrong", "a measurement shows ..." under "unjustified". Each knob's verdict rests on
# one fact, so each knob has the claims that deny it. A claim counts as the learner's own assertion: in a
# clause of its own, with its negations counted ("do not fail to fit" is "fit"), and not when it is
# reported, hypothetical or compared ("people assume it fits", "it would fit only if", "more than one GPU
# holds") or quoted to be refuted.
_FIT = r"\bfits?\b|\bfitting\b|\bholds?\b|\bloads?\b|\baccommodat\w*|room to spare|\bwith room\b|\bis enough\b|\bstays? within\b|\bcovers?\b"
_MISFIT = (
    r"\bexceed\w*|\btoo (?:big|large|small|short|low)\b|\boverflow\w*|\b(?:bigger|larger|greater|more|longer) than\b|"
    r"\bshorter than\b|\boom\b|out of memory|\btruncat\w*|\bcut (?:off|short)\b|\bclipped\b|\brejected\b"
)
_ENDORSED = (
    r"\b(?:is|are|was|seems?|looks?)\s+(?:\w+\s+)?(?:the right (?:call|choice|setting)|fine|ok|okay|right|correct|"
    r"justified|good|enough|sufficient|appropriate)\b|\bprobably fine\b"
)
_CLAIMS_AGAINST: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    # (knob, verdict) -> (pattern, what the reason then asserts), read with the clause's negations:
    # "fit" claims assert fitting when their negations are even, "misfit" ones when odd
    ("parallelism", "wrong"): (
        ("fit", "that the weights fit on one GPU"),
        ("misfit-negated", "that the weights do not exceed one GPU"),
        ("endorsed", "that the configured parallelism is right"),
    ),
    ("gpu_memory_utilization", "wrong"): (
        ("fit", "that the weights fit in what vLLM may use"),
        ("misfit-negated", "that the weights do not exceed what vLLM may use"),
        ("endorsed", "that the setting is right"),
    ),
    ("max_model_len", "justified"): (
        ("fit-negated", "that the limit does not hold the longest request"),
        ("misfit", "that requests exceed the limit"),
    ),
    ("batching", "unjustified"): (("measured", "that a measurement backs the cap"),),
    ("quantization", "justified"): (
        ("quantized", "that the weights are quantized"),
        ("unevaluated", "that no accuracy measurement backs the precision"),
    ),
    ("speculative_decoding", "justified"): (("speculating", "that speculation is on"),),
}
_CLAIM = {
    "fit": _FIT,
    "misfit": _MISFIT,
    "endorsed": _ENDORSED,
    "measured": (
        # "a benchmark at batch 32 shows ...", "measured: p99 TTFT 900 ms at batch 32"
        r"^\s*(?:measured|benchmarked|load[- ]tested)\s*(?:$|[=-]\s*(?=.*\d))|"
        r"\b(?:measurements?|benchmarks?|load tests?|tests?|runs?|profil\w+)(?:\s+(?!not\b|never\b)[\w.,=-]+){0,4}?\s+(?:shows?|showed|found|finds|gives?|gave|"
        r"confirms?|confirmed|proves?|proved|backs?|backed)\b|\b(?:was|were|has been|have been|is|are)\s+"
        r"(?:measured|benchmarked|load[- ]tested|tested|validated|verified)\b|\b(?:we|they|the team|i)\s+"
        r"(?:measured|benchmarked|tested|load-tested|validated)\b"
    ),
    "quantized": (
        r"\bquanti[sz]ed\s+(?:to|in|as|with|at)\s+(?:int\d|fp\d|\d+[- ]?bits?|w\d|awq|gptq)|\b(?:weights|model)\s+"
        r"(?:are|is)\s+(?:in\s+)?(?:int[48]|fp8|[48][- ]bit|awq|gptq)\b|\bserved in (?:int[48]|fp8)\b|"
        r"\b(?:is|are) quanti[sz]ed\b|\b(?:int[48]|fp8|w4a16|w8a8)(?:\s+(?:awq|gptq))?\s+weights\b|"
        r"\b(?:awq|gptq)\s+weights\b"
    ),
    # a missing accuracy measurement: what makes a quantized precision unjustified ("accuracy never measured",
    # "without any accuracy eval"); "no accuracy eval is needed" says the opposite and is not one
    "unevaluated": (
        r"(?:\b(?:no|without(?:\s+an?|\s+any)?|lacks?|lacking|missing)\s+(?:\w+\s+){0,2}?(?:accuracy|quality)\s+"
        r"(?:measurements?|evals?|evaluations?|checks?|tests?|numbers?|benchmarks?)|\b(?:accuracy|quality)\s+"
        r"(?:was\s+|is\s+|has\s+|has been\s+)?(?:never|not)\s+(?:been\s+)?(?:measured|evaluated|checked|tested))"
        r"(?!.*\b(?:needed|required|necessary|called for|applies|matters|to run)\b)"
    ),
    "speculating": (
        r"\b(?:speculation|speculative decoding|spec(?:ulative)?[- ]decod\w*|it|n-?gram|eagle|a draft(?: model)?)\s+"
        r"(?:is|was|are)\s+(?:enabled|on|active|configured|turned on|switched on|in use|used)\b|\benabled with\b"
    ),
}
_CLAIM_CLAUSES = re.compile(
    r"[;:!?]|\.(?!\d)|,(?!\d{3}\b)|\s-{1,2}\s|\b(?:but|because|since|although|though|while|whereas|however|so|yet|"
    r"and|which)\b"
)
_CLAIM_NEGATORS = re.compile(
    r"\b(?:not|no|never|nothing|nobody|none|neither|nor|without|cannot|fails?|failed|false|untrue)\b"
)
_REPORTED = re.compile(
    r"\b(?:might|may|could|would|if|unless|whether|than|claims?|argues?|argued|says?|said|assumes?|assumed|thinks?|"
    r"believes?|people|someone|suppose|imagine)\b"
)
# A fit claim about a setting other than the configured one: a larger parallel degree, more GPUs
_ALTERNATIVE = re.compile(
    r"\btp\s*(?:=|of|size)?\s*[2-8]\b|tensor[- _]parallel\w*(?:[- _]size)?\s*(?:=|of)?\s*[2-8]\b|"
    r"\b(?:two|2|four|4|eight|8|more|several|multiple|second|another)\s+(?:\w+\s+)?(?:gpus|h[12]00s|cards)\b|"
    r"\bshard\w*|\bsplit\w*|\bsmallest\b|\bminimum\b|\bat least\b|\bquanti[sz]ed\b|\bfp8\b|\bint[48]\b"
)
# A reason that says the weights are not quantized owes no accuracy eval
_UNQUANTIZED = re.compile(
    r"\b(?:nothing|not|no|un)[- ]?(?:is\s+|been\s+)?quanti[sz]\w*|\bbf16\b|\bbfloat16\b|\bfp16\b|\bfloat16\b|"
    r"full precision|native precision"
)
_HEDGED = re.compile(
    r"\b(?:not sure|unsure|probably|maybe|perhaps|cannot tell|can not tell|do not know|no idea|hard to say|unclear|"
    r"it depends|depends on)\b"
)


def _asserts_against(because: Any, knob: str, verdict: str) -> str | None:
    """What a reason asserts against its own verdict (see _CLAIMS_AGAINST), or None."""
    if not isinstance(because, str):
        return None
    text = re.sub(r"(?<![a-z])'[^']*'(?![a-z])|\"[^\"]*\"|\u201c[^\u201d]*\u201d", " ", _plain(because[:2000]))
    for clause in _CLAIM_CLAUSES.split(text):
        for kind, asserts in _CLAIMS_AGAINST.get((knob, verdict), ()):
            base, _, negated = kind.partition("-")
            for m in re.finditer(_CLAIM[base], clause):
                before = clause[: m.start()]
                if _REPORTED.search(before) or (base == "fit" and _ALTERNATIVE.search(before)):
                    continue  # reported, hypothetical, or about another setting ("TP 2 is the smallest that fits")
                if base == "unevaluated" and _UNQUANTIZED.search(text):
                    continue  # "nothing quantized, so no accuracy check": no eval is owed, none is missing
                odd = len(_CLAIM_NEGATORS.findall(before)) % 2 == 1
                # "false"/"untrue" after the claim refutes it ("the claim that it fits is false")
                odd ^= bool(re.search(r"\b(?:is|are) (?:false|untrue|wrong|a myth)\b", clause[m.end() :]))
                if odd == bool(negated):
                    return asserts
    return None


@_checker
def knob_audit(answer: Any, key: dict) -> Result:
    """A verdict per knob of a serving config, each with the fact or missing measurement behind it.

    answer: {knob: {"verdict": justified|unjustified|wrong, "because": text}}.
    key: points, verdicts {knob: verdict}, reasons {knob: the reviewer's reason},
    follows {knob: the knob whose finding it repeats} (graded once, under that knob).
    Per knob: full share for the reviewer's verdict with a reason of at least
    four words that names a fact of this config or workload (a fact of the
    knob's own, KNOB_FACTS, or the reviewer's figures), half a share
    for the right verdict with no real reason, and nothing for a reason that
    asserts the opposite of its verdict (_CLAIMS_AGAINST: "the weights fit" under
    "wrong") or that only hedges ("not sure, probably fine"). Each credited knob's feedback
    shows the reviewer's reason, since a fact named with a wrong value is not
    caught here.
    """
    name = _name(key)
    verdicts, reasons = key["verdicts"], key.get("reasons", {})
    follows = key.get("follows", {})
    if not isinstance(answer, dict):
        return Result(
            0.0,
            f"{name}: expected a dict {{knob: {{'verdict': ..., 'because': ...}}}} for the knobs {sorted(verdicts)}.",
        )
    earned, lines, slips = 0.0, [], {}
    entries = _by_knob(answer, {**verdicts, **follows})
    for knob, expected in verdicts.items():
        entry, reason = entries.get(knob), reasons.get(knob, "")
        if not isinstance(entry, dict):
            lines.append(f"- {knob}: no verdict given. The reviewer says {expected}: {reason}")
            slips[f"{knob}-left-out"] = f"{knob} left out; the review says {expected}: {reason}"
            continue
        verdict = entry.get("verdict")
        because = entry.get("because")
        if not isinstance(verdict, str) or _normal(verdict) not in VERDICTS:
            lines.append(f"- {knob}: the verdict must be one of {VERDICTS}, got {verdict!r}.")
            continue
        if _normal(verdict) != expected:
            lines.append(f"- {knob}: you said {_normal(verdict)}, the review says {expected}: {reason}")
            slips[f"{knob}-{_normal(verdict)}"] = (
                f"{knob} called {_normal(verdict)}; the review says {expected}: {reason}"
            )
            continue
        if contrary := _asserts_against(because, knob, expected):
            lines.append(
                f"- {knob}: the verdict is right, but your reason asserts {contrary}, the opposite of what makes "
                f"it {expected}, so it earns nothing. The review's reason: {reason}"
            )
            slips[f"{knob}-reason-contradicts"] = f"{knob}: a reason that asserts {contrary}"
        elif _names_a_fact(because, knob, reason):
            earned += 1.0
            lines.append(f"- {knob}: right. The review's reason, to check yours against: {reason}")
        elif isinstance(because, str) and _HEDGED.search(_plain(because)):
            lines.append(
                f"- {knob}: your reason takes no position (it hedges), so the verdict stands on nothing. Name the "
                f"fact of the config or workload behind it. The review's reason: {reason}"
            )
            slips[f"{knob}-no-position"] = f"{knob}: a hedge for a reason"
        else:
            earned += 0.5
            lines.append(
                f"- {knob}: right verdict, but give the reason as a sentence of {MIN_REASON_WORDS} words or more "
                "that names the fact of the config or workload behind it (a figure and what it is set against) "
                f"or the missing measurement. The review's reason: {reason}"
            )
            slips[f"{knob}-no-reason"] = (
                f"{knob}: the right verdict with no workload fact or missing measurement behind it"
            )
    for knob, cause in follows.items():
        entry, reason = entries.get(knob), reasons.get(knob, "")
        said = _normal(entry["verdict"]) if isinstance(entry, dict) and isinstance(entry.get("verdict"), str) else None
        told = f" (you said {said}; the review says wrong)" if said and said != "wrong" else ""
        lines.append(f"- {knob}: graded once, under {cause}{told}: {reason}")
    known = set(verdicts) | set(follows)
    extra = sorted((n for n in answer if _knob_of(n, known) is None), key=str)
    if extra:
        lines.append(f"- not graded (not a knob of this config): {extra}")
    head = f"{name}: {earned:g} of {len(verdicts)} knobs."
    return Result(_earn(earned / len(verdicts), key), "\n".join([head] + lines), slips)


# --------------------------------------------------------------------------- measured comparison

# Which way is better for each metric a Measurement carries.
SAME_FIELDS = ("workload", "model", "hardware")
# The slips the measured comparison recognises, by id (Result.slips).
COMPARISON_SLIPS = {
    "not-a-comparison": "not two Measurement records of two settings on the same workload, with the SLO metric named",
    "record-disagrees": "a record's output_tok_s does not agree with its own output_tokens / elapsed_s",
    "implausible": "a record falls outside the roofline model's range for its hardware",
    "no-conclusion": "no conclusion of a sentence that says which setting serves the SLO and why",
    "against-own-numbers": "the setting picked as better is the worse one by the learner's own numbers",
    "against-own-pick": "the conclusion recommends the other setting than the one its own numbers favour",
    "no-recommendation": "the conclusion does not say plainly which setting to configure",
    "change-within-noise": "the conclusion recommends a change that the measured difference, inside the noise, does not show",
    "rates-not-measured": "the conclusion quotes a tok/s figure that neither record measured",
    "not-own-measurement": "a record is one of the course's recorded points, or does not say which machine measured it",
}
# The conclusion carries the rep: it is worth half the points, and the records' own checks (each
# agrees with itself, both are plausible) earn theirs only beside a conclusion that follows from them.
# lab.comparison() fills in the records, so those checks alone show no judgement of the learner's.
CONCLUSION_SHARE = 0.5
# "Disable it." is a recommendation; "off" alone is no sentence.
MIN_CONCLUSION_WORDS = 2


@_checker
def measured_comparison(answer: Any, key: dict) -> Result:
    """Two settings measured on the same workload, the SLO metric named, and a conclusion.

    answer: {"knob": str, "slo_metric": one of METRIC_DIRECTIONS,
             "measurements": [record_a, record_b] (Measurement dicts),
             "better": 0 or 1 (index of the setting that better serves the SLO metric),
             "conclusion": one or two sentences}.
    key: points, arith_rel_tol (0.02), tolerance (3.0, handed to simulate.plausibility),
    configured (which setting the configuration under review runs: "speculative" for the record that
    speculates, or {knob: setting name}), noise_factor (a difference on the SLO metric smaller than
    this ratio does not settle which setting is better: the lab says so; absent, any difference does).

    The conclusion is what the rep asks for, so it carries the points: a conclusion that recommends
    the setting the learner's own numbers favour on the SLO metric (recommend.py reads which one;
    inside the noise, the configured one) earns half of them, and only then do the records' own
    checks earn theirs (a quarter each: every record agrees with its own counts, both are plausible
    against the roofline simulator). A conclusion that recommends the worse setting, both, or
    nothing earns no points at all, whatever the records.

    Rep 2 takes the learner's own measurements: a record that is one of the course's recordings (data/measurements/,
    known by its measured numbers whatever its labels say), that the lab labels as recorded on the course's
    machine, or that does not say which machine measured it (servelab.provenance) earns the comparison nothing.
    """
    name = _name(key)
    records, problem = _comparison_schema(answer)
    if problem:
        return Result(0.0, f"{name}: 0 of 4 parts. {problem}", _named(COMPARISON_SLIPS, "not-a-comparison"))
    not_own = _not_own(answer["measurements"])
    if not_own:
        return Result(0.0, f"{name}: 0 of 4 parts. {not_own}", _named(COMPARISON_SLIPS, "not-own-measurement"))
    lines = ["- schema: two Measurement records on the same workload, metric named."]

    arith_tol = float(key.get("arith_rel_tol", 0.02))
    arith_ok = True
    for label, r in zip("ab", records):
        if r.elapsed_s <= 0 or r.output_tokens <= 0:
            arith_ok = False
            lines.append(f"- record {label}: elapsed_s and output_tokens must be positive.")
            continue
        derived = r.output_tokens / r.elapsed_s
        if not _close(derived, r.output_tok_s, arith_tol):
            arith_ok = False
            lines.append(
                f"- record {label}: output_tokens / elapsed_s = {derived:.4g} tok/s, "
                f"but output_tok_s says {r.output_tok_s:.4g}. A record must agree with itself; "
                "recompute the rate from the counts you measured."
            )
    if arith_ok:
        lines.append("- arithmetic: each record's rate agrees with its own counts.")

    plausible_ok = True
    for label, r in zip("ab", records):
        ok, reason = _plausible(r, float(key.get("tolerance", 3.0)))
        if not ok:
            plausible_ok = False
            lines.append(f"- record {label}: not plausible on {r.hardware or 'this hardware'}: {reason}")
    if plausible_ok:
        lines.append("- plausibility: both records fall within the roofline model's range.")

    verdict, missed = _conclusion_verdict(answer, records, key)
    lines.append(verdict)
    if missed:
        earned = 0.0
        lines.append(
            "- points: the conclusion carries this rep; the records' checks earn their points only beside a "
            "conclusion that follows from them, so this comparison earns none yet."
        )
    else:
        earned = CONCLUSION_SHARE + (1 - CONCLUSION_SHARE) / 2 * (int(arith_ok) + int(plausible_ok))
    missed += [] if arith_ok else ["record-disagrees"]
    missed += [] if plausible_ok else ["implausible"]
    got = _earn(earned, key)
    head = f"{name}: {got:g} of {_max_points(key):g} points."
    return Result(got, "\n".join([head] + lines), _named(COMPARISON_SLIPS, *missed))


def _not_own(raw: list) -> str | None:
    """What is wrong with the records' provenance, or None when both are the learner's own measurements."""
    from servelab import provenance

    why = [f"record {label}: {p}" for label, r in zip("ab", raw) if (p := provenance.problem(r))]
    if not why:
        return None
    return "; ".join(why) + f". {provenance.MEASURE_AGAIN}"


def _configured_index(records, key: dict) -> int | None:
    """Which of the two records runs the configuration under review, as the key names it."""
    configured = key.get("configured")
    if configured == "speculative":
        speculative = [i for i, r in enumerate(records) if r.method != "none"]
        return speculative[0] if len(speculative) == 1 else None
    if isinstance(configured, Mapping):
        knob = records[0].knob or ""
        setting = configured.get(knob)
        found = [i for i, r in enumerate(records) if setting is not None and r.knob_setting == setting]
        return found[0] if len(found) == 1 else None
    return None


def _label(record) -> str:
    """A setting as the feedback names it: the knob lab's setting name, or speculation off / on."""
    if record.knob_setting:
        return record.knob_setting
    if record.method == "none":
        return "speculation off"
    return f"speculation on ({record.method}, k={record.num_speculative_tokens})"


def _conclusion_verdict(answer: dict, records, key: dict) -> tuple[str, list[str]]:
    """The conclusion's feedback line and the slips it shows (none: it follows from the numbers)."""
    from servelab.grading import recommend

    metric, better = answer["slo_metric"], answer["better"]
    va, vb = (getattr(r, metric) for r in records)
    winner = (0 if va >= vb else 1) if METRIC_DIRECTIONS[metric] == "higher" else (0 if va <= vb else 1)
    ratio = max(va, vb) / min(va, vb) if min(va, vb) > 0 else math.inf
    noise = float(key.get("noise_factor", 1.01))
    within_noise = ratio < noise
    configured = _configured_index(records, key)
    labels = [_label(r) for r in records]
    numbers = f"{metric}: {labels[0]} {va:.4g}, {labels[1]} {vb:.4g}; {METRIC_DIRECTIONS[metric]} is better"
    # what the numbers support: the winner; inside the noise, the configured setting (nothing shows a change pays)
    supported = configured if within_noise and configured is not None else winner
    conclusion = answer.get("conclusion")
    if not isinstance(conclusion, str) or len(conclusion.split()) < MIN_CONCLUSION_WORDS:
        return (
            "- conclusion: say in a sentence which setting to configure for this SLO, and why.",
            ["no-conclusion"],
        )
    if not within_noise and better != winner:
        return (
            f"- conclusion: your own numbers say {labels[winner]} (setting {winner}) is better ({numbers}), "
            f"but better is {better}.",
            ["against-own-numbers"],
        )
    if unmeasured := _rates_not_measured(conclusion, records):
        return (
            f"- conclusion: it quotes {', '.join(unmeasured)} tok/s, which neither record measured "
            f"({records[0].output_tok_s:.4g} and {records[1].output_tok_s:.4g} tok/s). Quote your own numbers.",
            ["rates-not-measured"],
        )
    batches = {r.batch_size for r in records}
    choices = recommend.choices_for(records, configured)
    says = recommend.recommended(conclusion, choices, batch=batches.pop() if len(batches) == 1 else None)
    if len(conclusion) > recommend.MAX_CHARS:
        numbers += f" (the conclusion was read up to its first {recommend.MAX_CHARS:,} characters)"
    if says is None:
        return (
            f"- conclusion: it recommends neither setting. A recommendation says what to configure (for "
            f'example "keep {labels[supported]}" or "switch to {labels[1 - supported]}") and why; a description '
            'of the configuration or of the runs, or "I cannot tell", recommends nothing.',
            ["no-recommendation"],
        )
    if not isinstance(says, int):  # "both"
        return (
            "- conclusion: it recommends both settings (or hedges between them), so it recommends neither. "
            "Say which one to configure at your batch and load, and why.",
            ["no-recommendation"],
        )
    if says != supported and within_noise:
        return (
            f"- conclusion: it recommends {labels[says]}, but the two settings differ by {ratio:.2f}x on {metric}, "
            f"inside what the lab calls noise ({noise:g}x): that is no evidence for a change. Keep "
            f"{labels[supported]} and measure again ({numbers}).",
            ["change-within-noise"],
        )
    if says != supported:
        return (
            f"- conclusion: it recommends {labels[says]}, but your own numbers favour {labels[supported]} "
            f"({numbers}). Say what your numbers say.",
            ["against-own-pick"],
        )
    return f"- conclusion: follows from your numbers ({numbers}): {labels[says]}.", []


def _named(catalogue: dict, *slips: str) -> dict:
    """Result.slips for slips out of a checker's catalogue of them."""
    return {slip: catalogue[slip] for slip in slips}


def _recommends(conclusion: str, batch: float | None = None) -> str | None:
    """What a conclusion recommends for speculative decoding, the configuration speculating: 'on', 'off', 'both'
    or None (recommend.py reads it)."""
    from servelab.grading import recommend

    says = recommend.recommended(conclusion, recommend.speculation_choices(on=1, configured=1), batch)
    return {0: "off", 1: "on", "both": "both", None: None}[says]


# A rate the conclusion quotes ("87.5 tok/s") must be one of the records' own; rounding to whole
# tokens per second is fine.
_QUOTED_RATE = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(?:tok(?:ens)?\s*/\s*s(?:ec)?\b|tokens? per second)")


# A figure the conclusion gives for another batch of the lab's sweep ("at batch 1 speculation did help, 39 vs
# 26 tok/s") describes that point, not this pair: only the figures of the clauses about the pair's own batch,
# or about no batch, are held to the pair's numbers.
_RATE_CLAUSES = re.compile(r"[;:!?\n]|\.(?!\d)|\b(?:but|whereas|while|although|though|however)\b")
_NAMED_BATCH = re.compile(r"\bbatch(?:es)?(?:[- ]sizes?)?\s*(?:of\s+|=\s*)?(\d+)\b")


def _rates_not_measured(conclusion: str, records) -> list[str]:
    """The tok/s figures in the conclusion that match neither record's output_tok_s."""
    rates = [r.output_tok_s for r in records]
    own = {float(r.batch_size) for r in records if _as_number(r.batch_size) is not None}
    unmeasured = []
    for clause in _RATE_CLAUSES.split(conclusion.lower()):
        named = {float(n) for n in _NAMED_BATCH.findall(clause)}
        if own and named and not named & own:
            continue  # the figures of another batch of the sweep
        unmeasured += [
            m.group(1)
            for m in _QUOTED_RATE.finditer(clause)
            if not any(_close(float(m.group(1).replace(",", "")), v, 0.03, 0.51) for v in rates)
        ]
    return unmeasured


def _comparison_schema(answer: Any):
    """Return (records, None) or (None, what is wrong)."""
    from servelab.measurement import Measurement

    need = ("knob", "slo_metric", "measurements", "better", "conclusion")
    if not isinstance(answer, dict) or any(k not in answer for k in need):
        return None, f"Expected a dict with keys {list(need)}."
    if answer["slo_metric"] not in METRIC_DIRECTIONS:
        return None, f"slo_metric must name a Measurement metric: one of {sorted(METRIC_DIRECTIONS)}."
    if answer["better"] not in (0, 1) or isinstance(answer["better"], bool):
        return None, "better must be 0 or 1: the index of the setting that better serves the SLO metric."
    raw = answer["measurements"]
    if not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(r, dict) for r in raw):
        return None, "measurements must be a list of two Measurement dicts (record.to_dict())."
    try:
        records = [Measurement.from_dict(r) for r in raw]
    except (TypeError, ValueError) as exc:
        return None, f"A measurement is not a Measurement record: {exc}."
    for r in records:
        for f in ("elapsed_s", "output_tok_s", "output_tokens", "batch_size", answer["slo_metric"]):
            if _as_number(getattr(r, f)) is None:
                return None, f"Field {f} must be a number in both records."
    for f in SAME_FIELDS:
        same = _base_model if f == "model" else str
        if same(getattr(records[0], f)) != same(getattr(records[1], f)):
            return None, (
                f"The two records differ in {f} ({getattr(records[0], f)!r} vs "
                f"{getattr(records[1], f)!r}): a comparison holds everything but the knob fixed."
            )
    setting = ("method", "num_speculative_tokens", "batch_size", "dtype", "enforce_eager", "engine_config")
    if all(getattr(records[0], f) == getattr(records[1], f) for f in setting):
        return None, "The two records have the same settings: measure two different settings of the knob."
    return records, None


# A quantized copy of a model is the same model under the precision knob (the knob lab's "W4A16 weights").
_QUANTIZED_SUFFIX = re.compile(r"[-_.](?:w4a16|w8a8|w8a16|awq|gptq|int4|int8|fp8|4bit|8bit)$", re.I)


def _base_model(name: str) -> str:
    return _QUANTIZED_SUFFIX.sub("", str(name))


def _plausible(record, tolerance: float) -> tuple[bool, str]:
    try:
        from servelab import simulate
    except ImportError as exc:  # pragma: no cover - simulate ships with servelab
        return False, f"the simulator is not available ({exc})"
    try:
        ok, predicted, reason = simulate.plausibility(record, tolerance=tolerance)
    except Exception as exc:  # noqa: BLE001 - a learner's record must never crash the grader
        return False, f"the simulator could not assess it ({type(exc).__name__}: {exc})"
    return bool(ok), reason


# --------------------------------------------------------------------------- rollout plan

# Words that place a metric or a party in a category. Words of three letters or fewer
# ("itl", "qps", "kl") must stand alone ("kl_div" yes, "weekly" no); longer ones may sit inside a name.
LATENCY_WORDS = ("ttft", "tpot", "itl", "e2e", "latency", "inter_token", "time_to_first", "time_per_output")
THROUGHPUT_WORDS = (
    "tok_s",
    "tok/s",
    "tokens/s",
    "tokens_per_s",
    "throughput",
    "qps",
    "rps",
    "req/s",
    "requests_per",
    "goodput",
    "generation_tokens",
    "tokens_total",
)
# What sees output-distribution drift is a class, not a word list: a measure of output quality on a task
# (accuracy, an eval gate's verdicts, perplexity, a judge's win rate, ROUGE, users' ratings), or a
# comparison of the new outputs with the reference model's (agreement, match, divergence or difference of
# answers, tokens or log-probabilities against fp16, a baseline, shadow traffic). A concept alone ("drift",
# "output quality") names no metric, nor does a deferral ("TBD", "whatever the eval team tracks").
DRIFT_MEASURES = (
    "eval",
    "accuracy",
    "exact_match",
    "perplexity",
    "ppl",
    "kl",
    "kl_div",
    "divergence",
    "win_rate",
    "judge",
    "rouge",
    "bleu",
    "bertscore",
    "chrf",
    "logprob",
    "log_prob",
    "likelihood",
    "acceptance",
    "pass_rate",
    "regression_suite",
    "golden",
    "thumbs",
    "rating",
    "complaint",
    "satisfaction",
    "csat",
    "user_feedback",
    "f1",
)
DRIFT_COMPARISONS = (
    "agreement",
    "agree",
    "disagree",
    "match",
    "mismatch",
    "differ",
    "difference",
    "diff",
    "delta",
    "similarity",
    "overlap",
    "consistency",
    "changed",
    "flip",
)
# what a comparison is of (outputs) or against (the model before the change)
DRIFT_OBJECTS = ("output", "answer", "response", "token", "logit", "completion", "generation", "prediction", "text")
DRIFT_REFERENCES = ("fp16", "float16", "bf16", "bfloat16", "baseline", "reference", "shadow", "old_fleet", "before")
DRIFT_CONCEPTS = ("drift", "quality", "output_distribution", "regression")
DRIFT_WORDS = DRIFT_MEASURES + DRIFT_COMPARISONS + DRIFT_CONCEPTS  # every word that can make a name a drift metric
DEFERRALS = re.compile(
    r"^\W*(?:whatever|tbd|tba|todo|n/?a|none|unknown|something|anything|to be (?:decided|determined))\b"
)
# Names that hold a drift word but watch the engine, not its outputs: speculative decoding's draft
# acceptance (vllm:spec_decode_*), GPU memory.
NOT_DRIFT_WORDS = ("spec_decode", "speculat", "draft", "gpu_memory", "memory_usage", "kv_cache", "cache_usage")
# Which way a drift metric gets worse: those that count differences rise, those that count agreement fall;
# a delta or change of unstated sign may go either way.
RISING_DRIFT_WORDS = (
    "perplexity",
    "ppl",
    "kl",
    "kl_div",
    "divergence",
    "drift",
    "thumbs_down",
    "down",
    "complaint",
    "mismatch",
    "disagree",
    "differ",
    "difference",
    "diff",
    "reject",
    "rejection",
    "rejects",
    "error",
    "flip",
    "changed",
)
EITHER_WAY_DRIFT_WORDS = ("delta", "change", "shift")
# A rate or share (acceptance, accuracy, win rate) lies in 0..1 unless its name says percent.
SHARE_WORDS = ("rate", "acceptance", "accuracy", "share", "ratio", "exact_match")
PERCENT_WORDS = ("pct", "percent", "%")
MAX_LATENCY_THRESHOLD = 10_000  # a rollback trigger on latency past 10 s (in ms) never fires in time
# Who is told before the rollout: people outside the serving team whose assumptions can break.
# The serving team's own on-call is told too, but it is not downstream of the change.
DOWNSTREAM_WORDS = (
    "caller",
    "downstream",
    "consumer",
    "client",
    "customer",
    "user",
    "eval",
    "product",
    "partner",
    "integrator",
    "api_owner",
    "dependent",
)
MAX_CANARY_FRACTION = 0.25
# A canary must live through one daily traffic peak (24 h) and should not outlast a week (168 h): by then
# it is the rollout, run without its stages.
CANARY_HOURS = (24, 168)
DIRECTIONS = ("above", "below")
# The slips the rollout plan recognises, by id (Result.slips).
ROLLOUT_SLIPS = {
    "no-canary": "no canary on a small slice of traffic for a set time",
    "no-stages": "no staged rollout: increasing fractions of traffic ending at 1.0",
    "no-latency-metric": "no latency metric watched",
    "no-throughput-metric": "no throughput metric watched",
    "no-drift-metric": "nothing watched that sees output-distribution drift",
    "no-drift-trigger": "rollback triggers missing, malformed or none on output drift",
    "no-downstream-told": "no downstream caller told before the rollout",
}


@_checker
def rollout_plan(answer: Any, key: dict) -> Result:
    """The structure of a staged rollout: canary, watched metrics, rollback triggers, who is told.

    One piece: each part of the plan is scored in turn against the same key, and the feedback lists them in that
    order.

    answer: {"change": text, "canary_fraction": 0 < f <= 0.25, "canary_hours": 24 to 168,
             "stages": increasing fractions ending at 1.0,
             "metrics": [metric names], "rollback_triggers": [{"metric", "threshold", "direction"}],
             "notify": [who is told before rollout]}.
    key: points. Five equal parts: canary size and duration; stages; metrics that
    cover latency, throughput and output-distribution drift; triggers with numeric
    thresholds on watched metrics, one of them on drift, each pointing the way its metric gets worse
    (latency above, throughput and quality below) within a range it can cross; a downstream party told
    first (a list, or one string). Whether the thresholds suit the service is for a person to judge.
    """
    name = _name(key)
    if not isinstance(answer, dict):
        return Result(0.0, f"{name}: expected a dict; see the form in the question.")
    parts, lines, missed = 0, [], []

    fraction, hours = _as_number(answer.get("canary_fraction")), _as_number(answer.get("canary_hours"))
    low, high = CANARY_HOURS
    if fraction is not None and 0 < fraction <= MAX_CANARY_FRACTION and hours is not None and low <= hours <= high:
        parts += 1
    else:
        lines.append(
            f"- canary: give canary_fraction as a fraction of traffic (0 < f <= {MAX_CANARY_FRACTION}; "
            f"a canary is a small slice) and canary_hours from {low} to {high}: long enough to see a "
            "daily peak, short enough that it is still a canary."
        )
        missed.append("no-canary")

    stages = answer.get("stages")
    given = [_as_number(s) for s in stages] if isinstance(stages, list) else []
    nums = [n for n in given if n is not None]
    if len(nums) >= 2 and len(nums) == len(given) and nums == sorted(set(nums)) and nums[-1] == 1.0 and nums[0] > 0:
        parts += 1
    else:
        lines.append(
            "- stages: list the traffic fractions of a rolling rollout, increasing, ending at 1.0 "
            "(for example [0.05, 0.25, 0.5, 1.0])."
        )
        missed.append("no-stages")

    metrics = answer.get("metrics")
    metrics = [m for m in metrics if isinstance(m, str)] if isinstance(metrics, list) else []
    has = {kind: any(_metric_kind(m) == kind for m in metrics) for kind in ("latency", "throughput", "drift")}
    if all(has.values()):
        parts += 1
    else:
        for kind in (k for k, v in has.items() if not v):
            lines.append(f"- metrics: {METRIC_ADVICE[kind]}")
            missed.append(f"no-{kind}-metric")

    triggers = answer.get("rollback_triggers")
    triggers = [t for t in triggers if isinstance(t, dict)] if isinstance(triggers, list) else []
    problems = [_trigger_problem(t, metrics) for t in triggers]
    well_formed = [t for t, problem in zip(triggers, problems) if problem is None]
    if (
        len(well_formed) >= 2
        and len(well_formed) == len(triggers)
        and any(_metric_kind(t["metric"]) == "drift" for t in well_formed)
    ):
        parts += 1
    else:
        lines.append(
            "- rollback_triggers: at least two, each {'metric': one of your watched metrics, "
            "'threshold': a number, 'direction': 'above' or 'below'}, and one on the drift metric."
        )
        lines += [f"  - {problem}" for problem in problems if problem]
        missed.append("no-drift-trigger")

    notify = answer.get("notify")
    notify = [notify] if isinstance(notify, str) else notify
    notify = [n for n in notify if isinstance(n, str)] if isinstance(notify, list) else []
    if any(_mentions(n, DOWNSTREAM_WORDS) for n in notify):
        parts += 1
    else:
        lines.append(
            "- notify: name the downstream callers (the eval-gate owners, client teams) told "
            "before the rollout; they can break on a change the serving team cannot see."
        )
        missed.append("no-downstream-told")

    return Result(
        _earn(parts / 5, key),
        "\n".join([f"{name}: {parts} of 5 structural parts."] + lines),
        _named(ROLLOUT_SLIPS, *missed),
    )


METRIC_ADVICE = {
    "latency": "nothing watched for latency: watch a tail latency the SLO names, such as p99 TTFT or TPOT.",
    "throughput": "nothing watched for throughput: watch output tokens per second (or requests per second) "
    "per replica, so a change that costs capacity shows before the fleet runs short.",
    "drift": "nothing watched for output-distribution drift. A config change can leave p99 and throughput "
    "flat and still shift outputs: watch something that sees it, such as the downstream eval gate's "
    "acceptance rate, or the canary's outputs compared with the float16 fleet's (answer agreement, KL "
    "divergence, accuracy on a fixed task). A concept ('drift', 'output quality') is not a metric: name what "
    "you would compute and set a threshold on (speculative decoding's draft acceptance watches the engine, "
    "not the outputs).",
}


def _metric_kind(metric: str) -> str | None:
    """'latency', 'throughput', 'drift' or None, from a watched metric's name."""
    metric = _unnegated(metric)
    if _mentions(metric, LATENCY_WORDS):
        return "latency"
    if _mentions(metric, THROUGHPUT_WORDS):
        return "throughput"
    if _is_drift_metric(metric):
        return "drift"
    return None


def _is_drift_metric(metric: str) -> bool:
    """Whether a watched metric sees output drift: a quality measure, or outputs compared with the reference."""
    if DEFERRALS.search(metric.lower()) or _mentions(metric, NOT_DRIFT_WORDS):
        return False
    if _mentions(metric, DRIFT_MEASURES):
        return True
    compared = _mentions(metric, DRIFT_COMPARISONS)
    of_outputs = _mentions(metric, DRIFT_OBJECTS) or _mentions(metric, DRIFT_REFERENCES)
    if compared and of_outputs:
        return True
    # a concept with a measure or a reference: "drift vs fp16", "quality score"; not "drift" or "output quality"
    return _mentions(metric, DRIFT_CONCEPTS) and (
        _mentions(metric, DRIFT_REFERENCES) or _mentions(metric, ("score", "rate", "index"))
    )


def _unnegated(metric: str) -> str:
    """The metric's name without what it says it is not: "not latency but answer agreement" -> "answer agreement"."""
    return re.sub(r"\bnot\s+[^,;:]*?(?=\bbut\b|[,;:]|$)", " ", metric, flags=re.I)


def _trigger_problem(trigger: dict, metrics: list[str]) -> str | None:
    """Why a rollback trigger cannot work, or None: its form, its direction, its threshold's range."""
    metric, threshold, direction = trigger.get("metric"), _as_number(trigger.get("threshold")), trigger.get("direction")
    if not isinstance(metric, str) or metric not in metrics:
        return f"{metric!r}: a trigger's metric must be one of the metrics you watch."
    if threshold is None or not isinstance(direction, str) or direction.strip().lower() not in DIRECTIONS:
        return f"{metric}: give the threshold as a number and the direction as 'above' or 'below'."
    kind, direction = _metric_kind(metric), direction.strip().lower()
    worse = {"latency": "above", "throughput": "below"}.get(kind) if kind is not None else None
    if kind == "drift":
        name = _unnegated(metric)
        if _mentions(name, RISING_DRIFT_WORDS):
            worse = "above"
        elif _mentions(name, EITHER_WAY_DRIFT_WORDS):
            worse = None  # a delta of unstated sign: either way can be the bad one
        else:
            worse = "below"
    if worse and direction != worse:
        return (
            f"{metric}: it gets worse going {worse} its threshold, so roll back when it is {worse} "
            f"{threshold:g}, not {direction}."
        )
    if kind == "latency" and not 0 < threshold <= MAX_LATENCY_THRESHOLD:
        return f"{metric}: {threshold:g} is no latency a rollback could wait for; give it in ms, as the SLO does."
    if (
        kind == "drift"
        and _mentions(metric, SHARE_WORDS)
        and not _mentions(metric, PERCENT_WORDS)
        and not 0 <= threshold <= 1
    ):
        return f"{metric}: a rate lies between 0 and 1, so {threshold:g} can never be crossed; give it as a fraction."
    return None


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    text = _normal(text)
    parts = set(re.split(r"[^a-z0-9/]+", text)) | set(re.split(r"[^a-z0-9]+", text))
    return any(w in parts if len(w) <= 3 else w in text for w in words)
