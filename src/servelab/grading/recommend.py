"""What a learner's conclusion recommends: which of two measured settings to configure.

A recommendation is a claim about what to configure. The reader cuts the conclusion into clauses and
reads each one as one of three things:

- a recommendation: an action on the knob ("turn it off", "lower the cap to 4", "keep bf16",
  "speculation should not be enabled", "there is no reason to disable it", "I would use tp=1"), or a
  verdict on a setting ("plain decoding wins", "float32 is slower", "the configured choice is wrong");
- a description of the configuration or of a run ("the configuration enables n-gram speculation",
  "speculation made 88 tok/s against 168 tok/s without it", "with max_num_seqs=4 the p99 was 2.3 s"):
  it has no action in the learner's voice and no verdict, so it recommends nothing;
- a condition on the batch ("only below batch 8", "at 64 it should be off"): the recommendation
  holds where its condition holds at the learner's own batch; "only" gives the other setting
  everywhere else.

A negation flips an action only when it governs it: it stands before the action's verb with nothing
but auxiliaries between ("should not be enabled", "never turn it on", "there is no reason to disable
it", "turning it on is not worth it"); a "not" elsewhere in the clause does not. Calling an action a
mistake flips it ("it would be wrong to disable it"), and so does a negated mistake twice ("it would
not be a mistake to disable it").

A quantifier subject negates its verb ("nobody should disable it" reads as "one should not disable it"), and
negations are counted ("there is no reason not to keep bf16" keeps it).

The last word stands: after a self-correction ("keep it, no wait, turn it off", "just kidding") only what
follows is read; a verdict conceded before the learner's own action ("W4A16 is faster but I would not ship
it: stay on bf16") is a concession, not a second recommendation; a question the conclusion asks itself is
read with its answer ("Enable speculation at batch 16? Never": off, where batch 16 is the learner's); a
label names a setting ("Speculation: off"); a routing rule is a policy by batch ("route batches of 1-2 to the
speculating engine, batch 64 to the plain one"), and "only" may follow its condition ("for batch <= 2 only").

The lesson is written in English; a slip of one key in the reader's own words ("trun", "bach") and the
Spanish and German verbs for the same actions ("desactivar", "abschalten") read as the English words.

A conclusion that recommends both settings is a hedge (or a contradiction) and recommends neither.

This is a clause reader, not a parser of English: the patterns are plain alternations and bounded
repeats over one clause at a time, so reading is linear in the text's length and the same text is
always read the same way. A dependency parser would read the grammar more generally, but its English
model packages are not published on PyPI by their maintainers, and on this text (short, technical,
often telegraphic: "Spec decode OFF at batch 64.") its errors would be the grader's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- the two settings' names


@dataclass(frozen=True)
class Choices:
    """What a conclusion can name, for two measured settings (index 0 and 1).

    feature: a pattern for the knob or feature itself ("speculation", "the cap").
    on: for a feature that is on or off, the index of the setting that has it on (None otherwise).
    values: per setting, a pattern that names it by its value ("256", "bf16", "tp=2"), or "".
    larger: for settings with sizes, the index of the larger one (None otherwise).
    configured: the index of the configuration's own setting, when the question names it.
    plain: a pattern that names the "off" setting as a thing ("plain decoding"), or "".
    """

    feature: str
    on: int | None = None
    values: tuple[str, str] = ("", "")
    larger: int | None = None
    configured: int | None = None
    plain: str = ""
    extra: dict = field(default_factory=dict)


SPECULATION = (
    r"(?:speculative[- ]decoding|speculation|speculating|spec[- ]?decod(?:e|ing)|n-?gram(?: speculation| drafting|"
    r" lookup| proposer)?|prompt[- ]lookup|eagle(?:-?3)?|the drafter|drafting|draft(?:ing)? tokens|the draft model)"
)
PLAIN_DECODING = (
    r"(?:plain decoding|plain decode|plain|the baseline|baseline|no speculation|non-speculative decoding|"
    r"ordinary decoding|normal decoding|standard decoding|regular decoding|vanilla decoding|k\s*=\s*0)"
)


def speculation_choices(on: int, configured: int | None = None) -> Choices:
    return Choices(feature=SPECULATION, on=on, configured=configured, plain=PLAIN_DECODING)


# --------------------------------------------------------------------------- reading


def _normal(text: str) -> str:
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"\bwon't\b", "will not", re.sub(r"\bcan't\b", "can not", text))
    text = re.sub(r"\bcannot\b", "can not", text)
    text = re.sub(r"n't\b", " not", text)
    text = re.sub(r"\b(i|we|you|it|they)'d\b", r"\1 would", text)
    text = re.sub(r"\blet's\b", "let us", text)
    # a quantifier subject negates its verb: "nobody should disable it" says "one should not disable it"
    text = re.sub(
        r"\b(?:nobody|no one|no-one|none of us)\s+(should|would|must|will|could|can|needs? to|ought to|has to|"
        r"wants? to)\b",
        r"one \1 not",
        text,
    )
    text = _TYPO.sub(lambda m: _TYPOS[m.group(0)], text)
    for pattern, english in _SECOND_LANGUAGE:
        text = pattern.sub(english, text)
    # a bracket holds a description or an aside ("the configured choice (speculation on) is right")
    for _ in range(3):
        text = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text)
    return text


# The reader's key words, each with the slips of one key a learner makes typing fast: two neighbouring
# letters swapped ("trun", "decodign") or one letter left out ("bach", "disble"). A slip that is a word of
# its own ("bath", "urn") is left alone.
_KEY_WORDS = (
    "turn turning enable enabled disable disabled speculation speculative decoding decode batch keep leave "
    "switch lower raise reduce increase prefix caching quantization stay"
).split()
_REAL_WORDS = frozenset("bath batc urn tun keep kep leve lave rise".split()) | frozenset(_KEY_WORDS)


def _slips(word: str) -> set[str]:
    swapped = {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
    dropped = {word[:i] + word[i + 1 :] for i in range(1, len(word))} if len(word) >= 5 else set()
    return {w for w in swapped | dropped if len(w) >= 4 and w != word}


_TYPOS = {slip: word for word in _KEY_WORDS for slip in _slips(word) if slip not in _REAL_WORDS}
_TYPO = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, _TYPOS), key=len, reverse=True)) + r")\b")

# The lesson is in English, but a conclusion in Spanish or German names the same actions: their verbs and
# the feature's name, read as the English the rest of the reader knows. A German infinitive stands last
# ("Spekulatives Decoding bei Batch 32 abschalten"): it moves to the front, as an English imperative.
_SECOND_LANGUAGE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), english)
    for pattern, english in (
        (
            r"^(?P<rest>[^:;.]*?)\s+(?P<verb>abschalten|ausschalten|deaktivieren|einschalten|aktivieren|"
            r"beibehalten|behalten)\b",
            r"\g<verb> \g<rest>",
        ),
        (
            r"\b(?:desactivar|desactiva|desactive|deshabilitar|deshabilita|apagar|apaga|abschalten|ausschalten|"
            r"deaktivieren)\b",
            "disable",
        ),
        (r"\b(?:activar|activa|habilitar|habilita|encender|enciende|einschalten|aktivieren)\b", "enable"),
        (r"\b(?:mantener|mantenga|mantén|manten|conservar|conserva|beibehalten|behalten)\b", "keep"),
        (
            r"\b(?:la |el )?decodificaci[oó]n especulativa\b|\b(?:das |die )?spekulative[sn]? (?:decoding|dekodierung)\b|"
            r"\bspekulation\b|\bespeculaci[oó]n\b",
            "speculation",
        ),
        (r"\b(?:en|bei|beim) (?:el |la )?(batch|lote)\b", r"at \1"),
        (r"\b(?:sin ella|sin él|ohne)\b", "without it"),
        (r"\b(?:en|auf|bei)\s+(\d+)\b", r"at \1"),
    )
)

# Clauses end at punctuation (not at a comma inside a figure such as 1,200, nor at a decimal point) and
# at the words that join a reason, a contrast or a second recommendation to the first.
_CLAUSES = re.compile(
    r"[;:!?\n]|\.(?!\d)|,(?!\d{3}\b)|\s-{1,2}\s|\s\u2014\s|\u2014|"
    r"\b(?:so|but|because|since|although|though|while|whereas|however|therefore|thus|hence|and|then|which|"
    r"yet|as(?! (?:is|it is|it was|configured|it stands)\b)|otherwise|instead|unless|whereby|meaning)\b"
)

# Words that may stand between a negation and the verb it governs.
_AUX = frozenset(
    "be been being to it them this that really ever even just simply necessarily always have has had get "
    "go do does did should would will shall can could must might may i we you they one is are was were "
    "reason need point sense worth bother try want recommend suggest advise yet any longer at all "
    "ought there's there anymore a an".split()
)
_NEGATORS = frozenset({"not", "never", "no", "nor", "neither", "nothing", "none", "without"})

# Actions, each with what it does to the knob: "on", "off", "keep" (the configured setting, or the
# setting the clause names), "use" (the setting the clause names), "smaller", "larger".
_PARTICLE = r"(?:\s+(?:[\w=.-]+\s+){0,3}?)"
_ACTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        (
            "on",
            r"\b(?:re-?)?enabl(?:e|es|ed|ing)\b|\bspeculate\b|\bactivat\w*|\bswitch(?:ing|ed)? on\b|\bturn(?:ing|ed)? on\b",
        ),
        (
            "off",
            r"\bdisabl(?:e|es|ed|ing)\b|\bdeactivat\w*|\bremov(?:e|ing)\b|\bget rid of\b|\bstop using\b|"
            r"\bdrop(?:ping)?\b(?!\s+(?:it\s+)?(?:to|from)\b)|\babandon\w*|\bdo without\b|\bskip(?:ping)?\b|"
            r"(?<=should )go\b|(?<=must )go\b|(?<=has to )go\b|(?<=needs to )go\b|(?<=ought to )go\b|"
            r"\b(?:run|running|serve|serving|go|going|do|decode|decoding)\s+without\b",
        ),
        (
            "state",
            r"\b(?:turn|turning|turned|keep|keeping|kept|leave|leaving|left|switch|switching|switched|"
            r"stay|stays|staying|remain|remains|be|set|setting|flip|flipping|have|having|run|running|put)"
            + _PARTICLE
            + r"(?:on|off)\b",
        ),
        (
            "keep",
            r"\b(?:keep|keeping|kept|leave|leaving|retain|retaining|maintain|maintaining|stick with|"
            r"sticking with|stay (?:with|at)|staying (?:with|at)|stays (?:with|at)|remain at|hold)\b",
        ),
        (
            "use",
            r"\b(?:use|using|prefer|preferring|choose|choosing|pick|picking|go with|going with|adopt|"
            r"adopting|opt for|deploy|deploying|ship|shipping|serve (?:it )?(?:in|with|at)|serving (?:it )?(?:in|with|at)|"
            r"run (?:it )?(?:with|in|at|on)|running (?:it )?(?:with|in|at|on)|switch(?:ing)? to|move to|moving to|"
            r"revert(?:ing)? to|go back to|going back to|fall back to|falling back to|return to|set (?:it |the \w+ )?to|"
            r"setting (?:it |the \w+ )?to|change (?:it |the \w+ )?to|changing (?:it |the \w+ )?to|"
            r"recommend(?:ing)?|favou?r(?:ing)?)\b",
        ),
        (
            "smaller",
            r"\b(?:lower|lowering|reduce|reducing|decrease|decreasing|cut|cutting|shrink|shrinking|"
            r"tighten|tightening)\b",
        ),
        (
            "larger",
            r"\b(?:raise|raising|increase|increasing|grow|growing|enlarge|enlarging|loosen|loosening|"
            r"bump|bumping|double|doubling)\b",
        ),
    )
)
# What marks a clause as the learner's own recommendation when its action is not an imperative at the
# clause's start: a modal, a recommending verb, an evaluation of the action.
_VOICE = re.compile(
    r"\b(?:should|must|ought|need to|needs to|has to|have to|had better|would|will|shall|recommend\w*|"
    r"suggest\w*|advis\w*|propos\w*|prefer\w*|better to|best to|wise to|right to|wrong to|worth|reason (?:not )?to|"
    r"no need|mistake|idea|is to|let us|i'?m for|my (?:call|choice|pick|recommendation|advice)|"
    r"the (?:right|correct|better|best|sensible|safe) (?:call|choice|move|option|setting|thing)|"
    r"makes? sense|pays?\b|paid off|justified|counterproductive|harmful|unwise|a win\b)"
)
# Fillers a clause may open with before an imperative.
_OPENERS = (
    r"^\s*(?:(?:so|then|thus|hence|therefore|just|simply|please|instead|rather|definitely|clearly|now|"
    r"overall|conclusion|recommendation|verdict|answer|fix|action|for (?:a |the |this |our )?(?:[\w-]+ ){0,3}slo|"
    r"for the fleet|here|"
    r"at this batch|at this load|on this machine|on this cpu|in production|for production|i think|"
    r"in short|in sum|bottom line|my advice|the advice|i say|we|i|you|do not|do|never|don't|not|also|"
    r"better|best)\b\s*)*"
)
_MISTAKE = re.compile(
    r"\b(?:mistake|mistaken|wrong|counterproductive|a bad idea|bad idea|unwise|harmful|an error|"
    r"misguided|a bad call|a poor choice|a bad choice|self-defeating|a loss)\b"
)
_WORTH = re.compile(
    r"\b(?:worth|pays?|paid off|makes? sense|is justified|is the right call|helps|a good idea|something|"
    r"recommend\w*|advisable|wise|the way to go)\b"
)
# An epistemic hedge: a clause under it takes no position on what it names.
_HEDGE = re.compile(
    r"\b(?:not sure|unsure|uncertain|not certain|can not tell|could not tell|can not say|do not know|no idea|"
    r"hard to say|unclear|undecided|on the fence)\b"
)
_GOOD = (
    r"(?:wins|win|won|winning|beats|beat|is better|are better|was better|is faster|was faster|is quicker|"
    r"is the better|is the faster|is the right|is the best|is best|performs better|performed better|"
    r"comes out ahead|came out ahead|pays off|pays|paid off|helps|helped|is worth it|is a win|"
    r"serves the slo better|meets the slo|met the slo|is preferable|is ahead|leads|is superior|"
    r"outperforms|outperformed|gives more|delivers more|is the clear winner|is the winner|is fine|is ok|"
    r"is okay|is right|is correct|meets|satisfies|works|is enough|suffices|is sufficient|is the one to keep|"
    r"faster|quicker|better|stays|remains|should stay|can stay|is kept|should be kept|is the keeper)"
)
_BAD = (
    r"(?:loses|lose|lost|is slower|was slower|are slower|is worse|was worse|is counterproductive|hurts|hurt|"
    r"costs|cost|is harmful|backfires|backfired|is a bad idea|is the wrong|is a loss|is behind|lags|"
    r"underperforms|underperformed|misses the slo|missed the slo|is not worth it|does not pay|did not pay|"
    r"is inferior|slows|slowed|gives less|delivers less|is a net loss|degrades|degraded|is too small|"
    r"is too slow|breaks the slo|broke the slo|is not enough|is insufficient|queues|slower|worse|goes|"
    r"has to go|must go|should go|should be dropped|is out)"
)
_BETWEEN = r"\s+(?:[\w=.,%-]+\s+){0,5}?"
_CONFIGURED = r"(?:configured|current|existing|chosen|original|seed|deployed|production|config'?s?|configuration'?s?)"
_CONFIGURED_VERDICT = re.compile(
    r"\b(?:(?:the|this|its|our)\s+)?(?:configured|current (?:choice|setting|config\w*|value|cap)|existing (?:choice|"
    r"setting|config\w*)|original (?:choice|setting|config\w*)|config'?s? (?:choice|setting)|configuration'?s? "
    r"(?:choice|setting))\b(?P<rest>.*)"
)
_RIGHT = re.compile(
    r"\b(?:right|correct|justified|fine|good|sound|ok|okay|stands|holds|the right one|better|best|"
    r"appropriate|sensible|optimal)\b"
)
_WRONG_WORD = re.compile(
    r"\b(?:wrong|incorrect|unjustified|mistaken|a mistake|bad|worse|suboptimal|not right|"
    r"inappropriate|should change|must change|needs to change|a poor)\b"
)

# A condition on the batch or the load: "only below batch 8", "at batch 64", "for batches above 32",
# "at 64", "only if the users drop to 4 or fewer", "at 20 users", "at low batch", "at a low load like this".
_BATCH_WORD = (
    r"(?:batch(?:es)?(?:[- ]sizes?)?|concurrenc(?:y|ies)|concurrent (?:users|requests)|sequences|seqs|"
    r"requests in flight|users|in flight)"
)
_OPS = (
    r"below|under|less than|fewer than|smaller than|up to|at most|until|above|over|more than|past|beyond|"
    r"greater than|larger than|bigger than|at least|from|at|for|of|to|<=|>=|<|>|\u2264|\u2265"
)
_CONDITION = re.compile(
    r"(?P<only>\bonly\s+)?"
    r"(?:\b(?:when|while|if|once|where|whenever)\s+(?:the\s+)?(?:(?:fleet\s+|load\s+|number of\s+)?"
    + _BATCH_WORD
    + r"|fleet|load|server|engine|traffic|it|we|you|they)\s+(?:\w+\s+){0,2}?)?"
    r"(?P<op>\b(?:" + _OPS + r")\s*)"
    r"(?:(?:a|the|its|this fleet's|our)\s+)?(?P<word1>" + _BATCH_WORD + r"\s*(?:of\s+|sizes?\s+)?"
    r"(?:(?P<op2>below|under|above|over|of|at)\s+|(?P<op3><=|>=|<|>|\u2264|\u2265)\s*)?)?"
    r"(?P<n>\d+)(?![\d.,]*\s*(?:ms|s\b|sec|tok|tokens|%|x\b|gb|gib|mb|mib|k\b|b\b|req/s|requests? per))(?![.,]\d)"
    r"(?:\s*(?:and|or)\s+(?P<more>above|below|up|upward|down|over|under|higher|lower|beyond|less|more|fewer))?"
    r"(?:\s+(?P<upward>upwards?|onwards?|and up|or more|or higher|or fewer|or less|or lower|and beyond))?"
    r"(?P<word2>\s+" + _BATCH_WORD + r")?"
    r"(?P<only2>\s+only\b)?"
)
_QUALITATIVE = re.compile(
    r"(?P<only>\bonly\s+)?\b(?:at|for|under|with|in)\s+(?:a\s+|the\s+)?(?P<size>low|small|light|high|large|heavy|big)\s+"
    r"(?:batch(?:es)?(?:[- ]sizes?)?|loads?|arrival rates?|concurrenc(?:y|ies)|traffic|qps|request rates?)"
    r"(?P<here>\s+(?:like|as|such as)\s+(?:this|here|ours|this one|the one measured)\b)?"
)
_LOW = ("low", "small", "light")
_CHANGED = re.compile(
    r"\b(?:lower|lowering|reduce|reducing|decrease|cut|drop|raise|raising|increase|set|keep|keeping|leave|shrink|"
    r"shrinking|grow)\s+(?:it\s+|(?:the\s+)?(?:cap|limit|max[-_ ]num[-_ ]seqs|cache|kv cache)\s+)?$"
)
# "low batch" and "high batch" placed at the learner's batch: the spec-decode lab's crossover on this CPU is
# near batch 3 (bench/results/flip-cpu.json), and from 32 up a batch is high on every backend the course runs.
LOW_BATCH, HIGH_BATCH = 4, 32


def _words_before(text: str, end: int) -> list[str]:
    return re.findall(r"[\w'-]+", text[:end])


def _governed(text: str, start: int) -> bool:
    """Whether a negation governs the phrase starting at start: negators before it, with only auxiliaries between,
    counted ("there is no reason not to keep it" is "keep it")."""
    negations = 0
    for word in reversed(_words_before(text, start)[-8:]):
        if word in _NEGATORS:
            negations += 1
        elif word not in _AUX:
            break
    return negations % 2 == 1


def _mentions(clause: str, choices: Choices, states_only: bool = False) -> list[tuple[int, int, int]]:
    """(start, end, setting index) for each place the clause names a setting by its value or its state.

    The feature's bare name ("speculation") names its "on" setting unless states_only. Where two names
    overlap ("no speculation" holds "speculation") the earlier, longer one counts.
    """
    found: list[tuple[int, int, int]] = []
    for i, pattern in enumerate(choices.values):
        if pattern:
            found += [(m.start(), m.end(), i) for m in re.finditer(pattern, clause)]
    if choices.on is not None:
        on, off, feature = choices.on, 1 - choices.on, choices.feature
        state = r"\s+(?:is\s+|was\s+|being\s+|turned\s+|switched\s+|set\s+)?"
        found += [
            (m.start(), m.end(), on)
            for m in re.finditer(
                r"\b" + feature + state + r"(?:on|enabled)\b"
                r"(?!\s+(?:this|the|a|an|that|these|those|my|our|its|batch|each|every|h\d+|cpu|gpu|\d)\b)",
                clause,
            )
        ]
        found += [
            (m.start(), m.end(), off)
            for m in re.finditer(
                r"\b"
                + feature
                + state
                + r"(?:off|disabled)\b|\bno\s+"
                + feature
                + r"|\bwithout\s+(?:any\s+)?"
                + feature,
                clause,
            )
        ]
        if choices.plain:
            found += [(m.start(), m.end(), off) for m in re.finditer(r"\b" + choices.plain + r"\b", clause)]
        if states_only:
            # a label that opens the clause: "off at batch 8", "on: 88 tok/s"
            found += [
                (m.start(), m.end(), on if m.group(1) == "on" else off) for m in re.finditer(r"^\s*(on|off)\b", clause)
            ]
        else:
            found += [(m.start(), m.end(), on) for m in re.finditer(r"\b" + feature, clause)]
    kept: list[tuple[int, int, int]] = []
    for start, end, i in sorted(found, key=lambda f: (f[0], -f[1])):
        if not kept or start >= kept[-1][1]:
            kept.append((start, end, i))
    return kept


def _figure_target(after: str, choices: Choices) -> int | None:
    """A cap named by a figure that is neither setting ("reduce max-num-seqs to 32"): the setting it acts like.

    A batching cap binds only below the load (continuous batching never runs more sequences than are in
    flight), so a cap at or above the load schedules like the setting at or above it, and one below it
    queues like the setting below it.
    """
    caps, load = choices.extra.get("caps"), choices.extra.get("load")
    if not caps or not load:
        return None
    m = re.match(
        r"\s*(?:the\s+)?(?:cap\s+|limit\s+|max[-_ ]num[-_ ]seqs\s+)?(?P<op>to|at|of|below|under|above|over)?\s*"
        r"(?:the\s+)?(?P<n>\d+)\b(?!\s*(?:ms|%))",
        after,
    )
    if m is None:
        return None
    n = float(m.group("n")) + {"below": -1, "under": -1, "above": 1, "over": 1}.get(m.group("op") or "", 0)
    sides = [c >= load for c in caps]
    if sides[0] == sides[1]:
        return None
    return sides.index(n >= load)


def _target(what: str, clause: str, end: int, choices: Choices, start: int) -> int | None:
    """The setting an action found at clause[start:end] points at."""
    after = clause[end:]
    # "from 1 GiB" names where a change starts, not where it goes
    named_after = re.sub(r"\bfrom\s+(?:the\s+)?\S+(?:\s+\S+)?", lambda m: " " * len(m.group(0)), after)
    named = [i for _, _, i in _mentions(named_after, choices)]
    to = re.search(r"\b(?:to|at)\b", after)
    if to:
        named_to = [i for _, _, i in _mentions(after[to.end() :], choices)]
        if named_to:
            named = named_to
    if what == "on":
        return choices.on if choices.on is not None else (named[0] if named else None)
    if what == "off":
        return 1 - choices.on if choices.on is not None else None
    if what == "state":
        state = re.findall(r"\b(on|off)\b", clause[start:end])[-1]
        if choices.on is None:
            return named[0] if named else None
        return choices.on if state == "on" else 1 - choices.on
    if what in ("keep", "use"):
        # "keep prefix caching as configured": the configured setting, whatever the feature's name says
        if (
            what == "keep"
            and choices.configured is not None
            and re.match(
                r"\s*(?:(?:it|this|that|the setting|" + choices.feature + r")\s+)?(?:as (?:is|it is|it was|configured|"
                r"it was configured|it stands)|unchanged|where it is)\b",
                after,
            )
        ):
            return choices.configured
        if named:
            return named[0]
        figure = _figure_target(after, choices)
        if figure is not None:
            return figure
        if choices.on is not None and re.match(r"\s*(?:the\s+|with\s+|using\s+)?" + choices.feature, after):
            return choices.on  # "use speculation", "keep n-gram speculation"
        if (
            what == "keep"
            and choices.configured is not None
            and re.match(
                r"\s*(?:it|this|that|the (?:config\w*|current \w+|setting|knob|cap|value|choice|default)|"
                r"as (?:is|it is|configured)|things as they are|" + choices.feature + r")\b",
                after,
            )
        ):
            return choices.configured
        return None
    if what in ("smaller", "larger") and choices.larger is not None:
        figure = _figure_target(re.sub(r"^.*?\bto\b", " to", after, count=1) if to else after, choices)
        if named and to:
            return named[0]
        if figure is not None:
            return figure
        if re.match(r"\s*(?:it|the|this|" + choices.feature + r")", after):
            return choices.larger if what == "larger" else 1 - choices.larger
    return None


def _verdict(clause: str, choices: Choices) -> int | None:
    """A verdict on a setting: "plain decoding wins", "float32 is slower", "the configured choice is wrong"."""
    m = _CONFIGURED_VERDICT.search(clause)
    if m and choices.configured is not None:
        rest = m.group("rest")
        right, wrong = _RIGHT.search(rest), _WRONG_WORD.search(rest)
        if right or wrong:
            first = min((x for x in (right, wrong) if x), key=lambda x: x.start())
            good = first is right
            if _governed(rest, first.start()) or re.search(r"\b(?:not|never)\b", rest[: first.start()]):
                good = not good
            return choices.configured if good else 1 - choices.configured
    for _, end, i in _mentions(clause, choices) + _mentions(clause, choices, states_only=True)[:1]:
        rest = clause[end:]
        g = re.match(_BETWEEN + "(?P<p>" + _GOOD + r")\b", rest)
        b = re.match(_BETWEEN + "(?P<p>" + _BAD + r")\b", rest)
        hit = g or b
        if hit is None:
            continue
        if g and b:
            hit = g if g.start("p") <= b.start("p") else b
        if re.search(r"\b(?:was|were|had been)\b", rest[: hit.end("p")]):
            continue  # "W4A16 was 18% faster": what a run measured, a description
        good = hit is g
        # "speculation is not faster", "plain decoding does not lose"
        if re.search(r"\b(?:not|never|no longer)\b", rest[: hit.start("p")]):
            good = not good
        return i if good else 1 - i
    # "faster without it", "slower with speculation", "better with bf16"
    for m in re.finditer(r"\b(faster|better|quicker|slower|worse)\s+(with|without|using|on|in)\s+", clause):
        rest = clause[m.end() :]
        mentions = _mentions(m.group(2) + " " + rest, choices) if m.group(2) == "without" else _mentions(rest, choices)
        if not mentions and choices.on is not None and re.match(r"(?:it|" + choices.feature + r")\b", rest):
            mentions = [(0, 0, choices.on if m.group(2) != "without" else 1 - choices.on)]
        if not mentions or mentions[0][0] > 2:
            continue
        good = m.group(1) in ("faster", "better", "quicker")
        if _governed(clause, m.start()):
            good = not good
        return mentions[0][2] if good else 1 - mentions[0][2]
    return None


def _read_clause(clause: str, choices: Choices) -> tuple[int | str | None, str]:
    """(what the clause recommends: 0, 1, "both" or None; how: "action", "verdict", "label", "elliptic", "")."""
    stripped = clause.strip()
    if re.fullmatch(r"(?:but\s+)?(?:not|never)\b.*", stripped) and not any(p.search(stripped) for _, p in _ACTIONS):
        if not _mentions(stripped, choices) and not _CONFIGURED_VERDICT.search(stripped):
            return None, "elliptic"
    if _HEDGE.search(clause):
        return ("both" if _mentions(clause, choices) or _CONFIGURED_VERDICT.search(clause) else None), "verdict"
    # "run this workload with prefix caching off" sets the feature: the action, not a description of a run
    clause = re.sub(
        r"\b(?P<verb>run|running|serve|serving|deploy|deploying|ship|shipping|operate)\b(?:\s+[\w-]+){0,4}?\s+with\s+"
        r"(?P<feature>" + choices.feature + r")\s+(?P<state>on|off|enabled|disabled)\b",
        lambda m: f"{m.group('verb')} {m.group('feature')} {'on' if m.group('state') in ('on', 'enabled') else 'off'}",
        clause,
    )
    # descriptions of a run: "with it enabled", "with max_num_seqs=4", "when speculation was on"
    clause = re.sub(
        r"(?<!stick )(?<!go )(?<!do )(?<!sticking )(?<!going )\bwith(?:out)?\s+(?:it|them|"
        + choices.feature
        + r")\s+(?:on|off|enabled|disabled|turned on|turned off)\b",
        " ",
        clause,
    )
    clause = re.sub(
        r"\b(?:was|were|had been|has been|have been|got)\s+(?:(?:it|"
        + choices.feature
        + r")\s+)?(?:enabled|disabled|on|off)\b",
        " ",
        clause,
    )
    voice = _VOICE.search(clause) is not None
    opener = re.match(_OPENERS, clause)
    head = opener.end() if opener else 0
    best: tuple[int, int] | None = None
    for what, pattern in _ACTIONS:
        for m in pattern.finditer(clause):
            if what == "state" and re.search(r"\b(?:on|off)\b", clause[m.start() : m.end()]) is None:
                continue
            imperative = m.start() <= head + 1
            if not (imperative or voice):
                continue  # a description: "the configuration enables n-gram speculation"
            target = _target(what, clause, m.end(), choices, m.start())
            if target is None:
                continue
            flip = _governed(clause, m.start())
            mistake = _MISTAKE.search(clause)
            if mistake:
                flip ^= True
                if _governed(clause, mistake.start()):
                    flip ^= True
            worth = _WORTH.search(clause, m.end())
            if worth and _governed(clause, worth.start()):
                flip ^= True
            if best is None or m.start() < best[0]:
                best = (m.start(), 1 - target if flip else target)
    if best is not None:
        return best[1], "action"
    verdict = _verdict(clause, choices)
    if verdict is not None:
        return verdict, "verdict"
    # a label: "Spec decode OFF.", "tp=1.", "Off at batch 8: ..." (counted only where nothing else recommends)
    mentions = _mentions(clause, choices, states_only=True)
    if mentions and len({i for _, _, i in mentions}) == 1:
        rest = clause
        for start, end, _ in reversed(mentions):
            rest = rest[:start] + " " + rest[end:]
        rest = re.sub(r"\d[\d.,]*\s*(?:tok/s|tokens?/s|ms|%|x\b|s\b)?", " ", rest)
        if set(re.findall(r"[a-z']+", rest)) <= _LABEL_WORDS:
            return mentions[0][2], "label"
    return None, ""


_HEADING = re.compile(
    r"(?:my |the )?(?:recommend(?:ation)?|i recommend|verdict|conclusion|decision|answer|call|advice|choice|fix|"
    r"action|bottom line|in short)"
)
_OTHER_SIDE = re.compile(
    r"\b(?:above|below|beyond|over|under|past) (?:that|this|it|there)\b|\b(?:otherwise|elsewhere|else)\b|"
    r"\b(?:above|below|beyond)\s*$"
)
_LABEL_WORDS = frozenset(
    "it is then please go all the way definitely recommended recommendation for this our fleet here now".split()
)


def _holds(op: str, more: str, upward: str, n: float, batch: float) -> bool:
    up = more in ("above", "up", "upward", "over", "higher", "beyond", "more") or upward in (
        "upward",
        "upwards",
        "onward",
        "onwards",
        "and up",
        "or more",
        "or higher",
        "and beyond",
    )
    down = more in ("below", "down", "lower", "less", "under", "fewer") or upward in ("or fewer", "or less", "or lower")
    if up:
        return batch >= n
    if down:
        return batch <= n
    if op in ("below", "under", "less than", "fewer than", "smaller than", "<", "until"):
        return batch < n
    if op in ("up to", "at most", "<=", "\u2264"):
        return batch <= n
    if op in ("above", "over", "more than", "past", "beyond", "greater than", "larger than", "bigger than", ">"):
        return batch > n
    if op in ("at least", ">=", "\u2265", "from"):
        return batch >= n
    return batch == n  # at, for, of, to: at that batch


def _condition(clause: str, batch: float | None) -> tuple[str, bool | None, bool, str | None]:
    """(the clause without its conditions, whether they hold at batch (None: none, or none placeable),
    whether one says "only", the size word of a qualitative condition that could not be placed)."""
    holds: bool | None = None
    only = False
    unplaced = None
    for m in list(_CONDITION.finditer(clause)):
        op = m.group("op").strip()
        if _CHANGED.search(clause[: m.start()]):
            continue  # "lower the cap below the 20 users": where the change goes, not when it applies
        batch_word = bool(m.group("word1") or m.group("word2")) or re.search(_BATCH_WORD, m.group(0)) is not None
        bare = not batch_word and op not in ("<", ">", "<=", ">=", "\u2264", "\u2265")
        opens = not clause[: m.start()].strip()  # "at 64 it should be off": a condition before the action
        if bare and not (op in ("at", "for") and (opens or (batch is not None and float(m.group("n")) == batch))):
            continue  # "at 4" or "to 32" names no batch unless it opens the clause or is the learner's own
        if op in ("of", "to") and not batch_word:
            continue
        clause = clause[: m.start()] + " " * (m.end() - m.start()) + clause[m.end() :]
        only = only or bool(m.group("only") or m.group("only2"))
        if batch is None:
            holds = False if holds is None else holds
            continue
        ok = _holds(
            m.group("op2") or m.group("op3") or op,
            m.group("more") or "",
            (m.group("upward") or "").strip(),
            float(m.group("n")),
            batch,
        )
        holds = ok if holds is None else (holds and ok)
    for m in list(_QUALITATIVE.finditer(clause)):
        clause = clause[: m.start()] + " " * (m.end() - m.start()) + clause[m.end() :]
        only = only or bool(m.group("only"))
        low = m.group("size") in _LOW
        if m.group("here"):
            here = True
        elif batch is not None and "batch" in m.group(0) and (batch <= LOW_BATCH or batch >= HIGH_BATCH):
            here = (batch <= LOW_BATCH) == low
        else:
            unplaced = m.group("size")
            continue
        holds = here if holds is None else (holds and here)
    return clause, holds, only, unplaced


# A conclusion is a sentence or two: the reader reads this much of it, so a pasted essay costs the grader
# milliseconds, not seconds (some readings look ahead through the rest of a clause).
MAX_CHARS = 2000


# A self-correction: what comes after it is the recommendation ("keep it, no wait, turn it off").
_CORRECTION = re.compile(
    r"\bno,?\s+wait\b[\s,.:!\u2014-]*|(?:^|[,.;:!?\u2014-])\s*wait\s*(?:[,:!\u2014-]|\.\.\.)|\bjust kidding\b|\bscratch that\b|\bon second thought\b|"
    r"\bi take (?:that|it) back\b|\bcorrection\s*:"
)
# The answer to a question the conclusion asks itself ("Enable speculation at batch 16? Never: ...").
_ANSWER = re.compile(
    r"^\s*(?:(?P<no>no way|nope|no|never|absolutely not|definitely not|certainly not|of course not|not at all|"
    r"not a chance|not here|not now|not (?:at|for) (?:this|our|that|the) (?:batch|load|fleet|size))|(?P<yes>yes|yep|absolutely|definitely|certainly|of course|sure))\b[\s,.:!\u2014-]*"
)
_CONCLUDING = frozenset({"so", "therefore", "thus", "hence", "then"})
_CONTRAST = frozenset({"but", "yet", "however", "though", "although"})
# A routing policy sends batches to an engine: "route batches of 1-2 to the speculating engine, batch 64 to the
# plain one" says "from batch 1 up to batch 2 use the speculating engine; at batch 64 use the plain one".
_ROUTING = re.compile(r"\b(?:route|routes|routing|send|sending|steer|steering|dispatch|direct)\b")
_ROUTE_RANGE = re.compile(
    r"\b(?:batch(?:es)?|batch sizes?)\s+(?:of\s+)?(\d+)\s*(?:-|to|\u2013)\s*(\d+)\s+(?:go(?:es)?\s+)?to\b(?!\s*\d)"
)
_ROUTE_ONE = re.compile(r"\b(?:batch(?:es)?|batch sizes?)\s+(?:of\s+)?(\d+)\s+(?:go(?:es)?\s+)?to\b(?!\s*\d)")


def _clauses(sentence: str) -> list[tuple[str, str]]:
    """(the word or mark that joins it to the clause before, the clause) for each clause of a sentence."""
    out, pos, joiner = [], 0, ""
    for m in _CLAUSES.finditer(sentence):
        out.append((joiner, sentence[pos : m.start()]))
        joiner, pos = m.group(0).strip(), m.end()
    out.append((joiner, sentence[pos:]))
    return out


def _voiced_action(clause: str) -> bool:
    """Whether a clause holds an action in the learner's voice ("I would not ship it", "stay on bf16")."""
    if not any(p.search(clause) for _, p in _ACTIONS):
        return False
    opener = re.match(_OPENERS, clause)
    return _VOICE.search(clause) is not None or any(
        m.start() <= (opener.end() if opener else 0) + 1 for _, p in _ACTIONS for m in p.finditer(clause)
    )


def _question(question: str, choices: Choices, batch: float | None) -> tuple[int | None, bool | None]:
    """What a question proposes (the first setting it names) and whether its condition holds at batch."""
    for _, raw in _clauses(question.rstrip(" ?")):
        if raw.strip():
            clause, holds, _, _ = _condition(raw, batch)
            target, _ = _read_clause(clause, choices)
            if isinstance(target, int):
                return target, holds
    return None, None


def recommended(conclusion: str, choices: Choices, batch: float | None = None) -> int | str | None:
    """The setting a conclusion recommends: 0 or 1, "both" (a hedge or a contradiction), or None (neither).

    Only the first MAX_CHARS characters are read. One piece: it reads the clauses in order, each one's reading
    depending on what the clauses before it said (`said`, `labels`, `previous`)."""
    said: set[int] = set()
    labels: set[int] = set()
    previous: int | None = None
    pending: list[tuple[str, int, bool]] = []
    hedged = False
    last_holds: bool | None = None
    text = _normal(conclusion[:MAX_CHARS])
    corrections = list(_CORRECTION.finditer(text))
    if corrections and text[corrections[-1].end() :].strip():
        text = text[corrections[-1].end() :]  # the last word stands: "keep it, no wait, turn it off"
    # a label with a colon: "Speculation: off", "Prefix caching: on"
    text = re.sub(
        r"\b(?P<feature>" + choices.feature + r")\s*[:=]\s*(?P<state>on|off|enabled|disabled)\b",
        lambda m: f"{m.group('feature')} {m.group('state')}",
        text,
    )
    question = None
    for sentence in re.split(r"(?<=[.!?;\n])\s+|(?<=[.!?])$", text):
        if sentence.strip().endswith("?"):
            question = sentence  # a question asks; its answer, in the next sentence, recommends
            continue
        asked, question = question, None
        answer = _ANSWER.match(sentence) if asked else None
        if asked and answer:
            proposed, applies = _question(asked, choices, batch)
            if proposed is not None and (applies is not False or batch is None):
                previous = 1 - proposed if answer.group("no") else proposed
                said.add(previous)
            sentence = sentence[answer.end() :]
        if _ROUTING.search(sentence):
            sentence = re.sub(_ROUTING.pattern + r"\s+(?:all\s+|the\s+)?(?=batch)", "", sentence)
            sentence = _ROUTE_RANGE.sub(r"from batch \1 up to batch \2 use", sentence)
            sentence = _ROUTE_ONE.sub(r"at batch \1 use", sentence)
        previous_here = heading = other_side_next = False
        parts = _clauses(sentence)
        for n, (joiner, raw) in enumerate(parts):
            if not raw or not raw.strip():
                continue
            after_heading, heading = heading, bool(_HEADING.fullmatch(raw.strip()))
            clause, holds, only, unplaced = _condition(raw, batch)
            # "... below batch 16; above that, turn it off": the other side of the condition before
            other_side = _OTHER_SIDE.search(clause)
            if (other_side or other_side_next) and holds is None and last_holds is not None:
                if other_side:
                    clause = clause[: other_side.start()] + " " + clause[other_side.end() :]
                if not clause.strip():
                    other_side_next = True  # "above that," alone: the next clause is on the other side
                    continue
                holds = not last_holds
            other_side_next = False
            if holds is not None:
                last_holds = holds
            target, how = _read_clause(clause, choices)
            if how == "elliptic":
                if previous is not None and (holds is not False or batch is None):
                    said.add(1 - previous)
                continue
            if target == "both":
                hedged = True
                continue
            if target is None:
                continue
            assert isinstance(target, int)
            # "W4A16 is faster but I would not ship it": a verdict conceded before the learner's own action
            if how == "verdict" and n + 1 < len(parts):
                joined, nxt = parts[n + 1]
                if joined in _CONTRAST and _voiced_action(nxt):
                    continue
            # "off at low batch and on at high batch": the second half carries the first half's action;
            # "Recommendation: no speculation at batch 64": a label after a heading is the recommendation
            follows = (n > 0 and previous_here) or after_heading or joiner in _CONCLUDING
            previous_here = True
            previous = target
            into = said
            if how == "label" and not follows:
                if n > 0:
                    continue  # a label opens its sentence: "Off at batch 8: ...", not "... and on in the other"
                into = labels
            if unplaced is not None:
                pending.append((unplaced, target, only))
                continue
            if holds is None or holds:
                into.add(target)
            elif only:
                into.add(1 - target)  # "enable it only below batch 8", at batch 64: off
            elif batch is None:
                into.add(target)  # a condition with no batch to place it: the hedge shows as both
    # a qualitative condition ("at high arrival rates") that names the other side of one placed here
    if not said:
        said = {target for _, target, _ in pending}
    if hedged:
        return "both"
    if not said:
        said = labels
    if len(said) == 2:
        return "both"
    return said.pop() if said else None


# --------------------------------------------------------------------------- the names of a measured setting

# How learners name the knob lab's settings, by the setting's own name (servelab.knobs.KNOBS).
_NAMED_SETTINGS = {
    "bfloat16": r"\b(?:bf16|bfloat16|bfloat-16|brain[- ]float(?:16)?|16[- ]bit(?! weights? quant))\b",
    "float32": r"\b(?:fp32|float32|float-32|f32|32[- ]bit|full precision|single precision)\b",
    "w4a16 weights": r"\b(?:w4a16|4[- ]bit|int4|gptq|awq|(?<!un)quanti[sz]ed(?: weights| model)?)\b",
}
_FEATURES = {
    "prefix_caching": r"(?:(?:automatic\s+)?prefix[- ]?cach(?:e|ing)|\bapc\b|(?:the\s+)?prefix cache)",
    "speculation": SPECULATION,
    "speculative_decoding": SPECULATION,
    "parallelism": r"(?:tensor[- _]parallel(?:ism)?|\btp\b|tensor[- _]parallel[- _]size)",
    "batching": r"(?:(?:the\s+)?(?:batch(?:ing)?\s+)?cap|max[-_ ]num[-_ ]seqs|batch(?:ing)? (?:size|limit)|limit)",
    "kv_cache": r"(?:kv[- ]?cache|(?:the\s+)?cache|kv memory|kv budget)",
    "precision": r"(?:precision|dtype|data ?type|weights)",
}
_UNITS = {"": 1.0, "k": 1e3, "kib": 2**10, "kb": 1e3, "mib": 2**20, "mb": 1e6, "gib": 2**30, "gb": 1e9}
_NUMBERED = re.compile(r"^\s*(?P<name>[a-z_ ]+?)\s*=\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[a-z]*)\s*$")


def _flexible(name: str) -> str:
    return r"[-_ ]?".join(re.escape(part) for part in re.split(r"[-_ ]+", name.strip()))


def _numbered_name(name: str, n: str, unit: str, unique: bool) -> str:
    """A pattern for "max_num_seqs=4": the name with the figure, or the figure alone when it names one setting."""
    figure = re.escape(n) + (r"\s*" + unit[0] + r"(?:i?b)?\b" if unit else r"\b")
    named = _flexible(name) + r"\s*(?:=|of|at|to|is|:)?\s*" + figure
    word = {
        "tp": r"(?:tp|tensor[- _]parallel(?:[- _]size)?)",
        "max_num_seqs": r"(?:max[-_ ]num[-_ ]seqs|cap|limit)",
        "kv_cache": r"(?:kv[- ]?cache|cache)",
        "k": r"(?:k|num[-_ ]speculative[-_ ]tokens)",
    }.get(name.strip())
    alternatives = [named]
    if word:
        alternatives.append(r"\b" + word + r"\s*(?:=|of|at|to|is|:)?\s*(?:a\s+)?" + figure)
    if unique:
        alternatives.append(
            r"(?<![\d.,])\b" + figure + r"(?![.,]\d)(?!\s*(?:ms|s\b|sec|%|x\b|tok|tokens|users?|concurrent|"
            r"requests|req|seconds|cores?|gb/s|fold|times))"
        )
    if name.strip() == "tp" and n == "2":
        alternatives.append(r"\b(?:two|2)[- ]way\b|\btwo (?:workers|ranks|shards)\b")
    if name.strip() == "tp" and n == "1":
        alternatives.append(r"\b(?:no|without)\s+tensor[- _]parallel\w*|\bsingle (?:worker|rank|process)\b")
    return "(?:" + "|".join(alternatives) + ")"


def choices_for(records, configured: int | None = None) -> Choices:
    """The names a conclusion can give two measured settings (Measurement records), for reading it."""
    a, b = records
    if (a.method == "none") != (b.method == "none"):
        return speculation_choices(on=0 if a.method != "none" else 1, configured=configured)
    knob = (a.knob or b.knob or "").strip()
    settings = [(r.knob_setting or "").strip().lower() for r in records]
    feature = _FEATURES.get(knob, r"(?:it|the knob|the setting)")
    if not all(settings) and a.method == b.method and a.num_speculative_tokens != b.num_speculative_tokens:
        settings = [f"k={r.num_speculative_tokens}" for r in records]
        feature = r"(?:\bk\b|num[-_ ]speculative[-_ ]tokens|draft tokens|speculation depth)"
    if not all(settings) and a.method != b.method:
        settings = [r.method for r in records]
    states = [re.search(r"\b(on|off)$", s) for s in settings]
    if all(states) and {m.group(1) for m in states if m} == {"on", "off"}:
        on = 0 if states[0] and states[0].group(1) == "on" else 1
        return Choices(feature=feature, on=on, configured=configured)
    numbered = [_NUMBERED.match(s) for s in settings]
    values: list[str] = []
    larger = None
    if all(numbered):
        ma, mb = numbered[0], numbered[1]
        assert ma is not None and mb is not None
        unique = ma.group("n") != mb.group("n")
        values = [_numbered_name(m.group("name"), m.group("n"), m.group("unit"), unique) for m in (ma, mb)]
        if ma.group("name").strip() == mb.group("name").strip():
            size = [float(m.group("n")) * _UNITS.get(m.group("unit"), 1.0) for m in (ma, mb)]
            larger = 0 if size[0] > size[1] else 1 if size[1] > size[0] else None
        extra = {}
        if all(m.group("name").strip() == "max_num_seqs" for m in (ma, mb)):
            load = a.max_concurrency or a.batch_size
            extra = {"caps": [float(ma.group("n")), float(mb.group("n"))], "load": float(load) if load else None}
            return Choices(
                feature=feature, values=(values[0], values[1]), larger=larger, configured=configured, extra=extra
            )
        if knob == "parallelism" and {ma.group("n"), mb.group("n")} == {"1", "2"}:
            on = 0 if ma.group("n") == "2" else 1
            return Choices(feature=feature, on=on, values=(values[0], values[1]), larger=larger, configured=configured)
    else:
        values = [_NAMED_SETTINGS.get(s, r"\b" + _flexible(s) + r"\b") if s else "" for s in settings]
    return Choices(feature=feature, values=(values[0], values[1]), larger=larger, configured=configured)
