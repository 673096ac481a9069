"""The flags `vllm serve` accepts, taken from vLLM's own argument parser.

Importing vLLM takes seconds, so the list is generated once into vllm_flags.json
(with the vLLM version it came from) and read from there:

    python -m servelab.review.vllm_flags      # regenerate after upgrading vLLM

tests/test_review_inputs.py checks that the file matches the installed vLLM.
Flags vLLM has removed are not in any parser; REMOVAL_TABLE names the ones real
configs still carry, with the release that dropped them, its source and what to use instead:
such a config is reviewed, the flag a "wrong" finding of its own. A flag that is in
neither list is still refused with the closest flag vLLM knows: most such flags are
typos, and without vLLM's parser entry the reviewer cannot tell whether the next word
is the flag's value or the model, so reviewing the rest would guess at the config.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

FLAGS_FILE = "vllm_flags.json"

# Flags gone from vLLM that public configs still set, with the release that dropped each and
# where that is on record. Each entry: (the first release whose parser rejects it, or None where
# only vLLM 0.32.0's parser is on record (it lacks the flag); what to do instead; whether it took a
# value; the source). A config is judged as the vLLM it pins (versions.py): a flag removed at or
# before that release is a "wrong" finding of its own (vLLM will not start with it), one removed
# later is not (that vLLM still has it), and one whose release is not on record is unjustified
# on an older pin (whether that release had it is not known here). The rest of the config is
# weighed as usual either way.
_PARSER = "absent from vLLM 0.32.0's argument parser (review/vllm_flags.json)"
_SPEC = _PARSER + "; folded into --speculative-config by vllm-project/vllm PR #14434"
REMOVAL_TABLE: dict[str, tuple[str | None, str, bool, str]] = {
    "enable-reasoning": (
        "0.10.0",
        "delete it: --reasoning-parser NAME alone turns on the reasoning output",
        False,
        "deprecated from vLLM 0.9.0 (vllm-project/vllm PRs #17452 and #18404); vLLM 0.10.0 rejects it "
        "as an unrecognized argument (vllm-project/vllm issue #18538)",
    ),
    "use-v2-block-manager": (
        None,
        "delete it: block manager v2 became the only one (deprecated by vLLM PR #8704)",
        False,
        _PARSER + "; deprecated by vllm-project/vllm PR #8704; still listed in vLLM 0.6.3.post1's engine "
        "arguments (docs.vllm.ai/en/v0.6.3.post1/models/engine_args.html)",
    ),
    "disable-log-requests": (
        "0.12.0",
        "delete it: requests are not logged unless --enable-log-requests",
        False,
        "replaced by --enable-log-requests (vllm-project/vllm PR #21739); the deprecated flag removed by "
        "vllm-project/vllm PR #29402 for 0.12.0 (ovg-project/kvcached PR #270; llm-d/llm-d-benchmark "
        "PR #781 reports it accepted until 0.17.0)",
    ),
    "swap-space": (
        "0.18.0",
        "delete it: the V1 engine recomputes preempted requests instead of swapping",
        True,
        "EngineArgs has swap_space through 0.17.1 and not from 0.18.0 (every release from 0.15.0 to "
        "0.29.0 installed and inspected: unslothai/unsloth-zoo issue #1210)",
    ),
    "num-scheduler-steps": (
        None,
        "delete it: the V1 engine has no multi-step scheduling",
        True,
        _PARSER + "; its arguments removed by vllm-project/vllm PR #22779 (2025-08-13, after PR #22138 removed "
        "multi-step scheduling on 2025-08-03), after vLLM 0.9.2 was out (vllm-project/vllm-ascend PR #1820, "
        "2025-07-16, tested on it); the first release without it is not on record",
    ),
    "max-seq-len-to-capture": (None, "use max-cudagraph-capture-size", True, _PARSER),
    "guided-decoding-backend": (None, "use structured-outputs-config", True, _PARSER),
    "preemption-mode": (None, "delete it: the V1 engine always recomputes", True, _PARSER),
    "tokenizer-pool-size": (None, "delete it", True, _PARSER),
    "task": (None, "use runner / convert", True, _PARSER),
    "cuda-graph-sizes": (None, "use cudagraph-capture-sizes or max-cudagraph-capture-size", True, _PARSER),
    # The old speculative flags: vLLM 0.32 takes one speculative-config JSON, or its --spec-method /
    # --spec-model / --spec-tokens shorthand (EngineArgs.create_speculative_config, vllm/engine/arg_utils.py).
    "speculative-model": (
        None,
        'use --speculative-config \'{"model": ..., "num_speculative_tokens": N}\' (or --spec-model)',
        True,
        _SPEC,
    ),
    "num-speculative-tokens": (
        None,
        "put num_speculative_tokens in --speculative-config (or use --spec-tokens)",
        True,
        _SPEC,
    ),
    "speculative-draft-tensor-parallel-size": (
        None,
        "put draft_tensor_parallel_size in --speculative-config",
        True,
        _SPEC,
    ),
    "ngram-prompt-lookup-max": (None, "put prompt_lookup_max in --speculative-config with method ngram", True, _SPEC),
    "ngram-prompt-lookup-min": (None, "put prompt_lookup_min in --speculative-config with method ngram", True, _SPEC),
    "speculative-disable-by-batch-size": (None, "put disable_by_batch_size in --speculative-config", True, _SPEC),
    "device": (None, "delete it: vLLM detects the platform", True, _PARSER),
    "worker-use-ray": (None, "use --distributed-executor-backend ray", False, _PARSER),
    "engine-use-ray": (None, "delete it: the engine runs in its own process", False, _PARSER),
    "calculate-kv-scales": (
        None,
        "delete it: FP8 KV scales come from the checkpoint (or default to 1.0)",
        False,
        _PARSER,
    ),
    "enable-prompt-adapter": (None, "delete it: prompt adapters are gone; use LoRA", False, _PARSER),
    "disable-async-output-proc": (None, "delete it: the V1 engine always overlaps output processing", False, _PARSER),
    "disable-frontend-multiprocessing": (
        None,
        "delete it: the V1 engine ignores it (the API server and the engine core are separate processes)",
        False,
        _PARSER + "; removed by vllm-project/vllm PR #37612 (March 2026; V1 had warned it was ignored)",
    ),
}
# Flags vLLM 0.32 has that an older release did not have yet: (the newest release on record that lacks it;
# the source). A config judged as that release or an older one that sets the flag will not start (its
# parser rejects an unknown flag). The release that brought each flag is not on record here, so a
# release after the one named says nothing either way (no finding).
INTRODUCED_AFTER: dict[str, tuple[str, str]] = {
    "speculative-config": (
        "0.6.3.post1",
        '--speculative-config was added by vllm-project/vllm PR #14434 (opened 2025-03-07: "It requires users to '
        'provide a JSON string ... with --speculative-config"), after vLLM 0.6.3.post1 was released (run in '
        "vllm-project/vllm issue #10116, 2024-11-07)",
    ),
    "async-scheduling": (
        "0.9.1",
        '--async-scheduling was added by vllm-project/vllm PR #19970 (opened 2025-06-23: "can be enabled using '
        'the --async-scheduling flag"), after vLLM 0.9.1 was released (main was already 0.9.2.dev121 on '
        "2025-06-17, vllm-project/vllm issue #19775)",
    ),
}


def lacked_by(name: str, judged: str) -> str | None:
    """The source saying vLLM `judged` did not have the flag yet, else None (it had it, or it is not known)."""
    entry = INTRODUCED_AFTER.get(name)
    if entry is None or not judged:
        return None
    last_without, source = entry
    return source if release_key(judged) <= release_key(last_without) else None


# Removed flags whose removing release is not on record, but a release known to still have them is: a config
# judged as that release or an older one still starts with the flag. (the newest release on record with it;
# the source is in REMOVAL_TABLE's entry.)
STILL_IN: dict[str, str] = {
    "use-v2-block-manager": "0.6.3.post1",
    "num-scheduler-steps": "0.9.2",
}

# The older view: (release in words, what instead, takes a value).
REMOVED = {
    name: (release or "before 0.32.0", instead, takes) for name, (release, instead, takes, _) in REMOVAL_TABLE.items()
}


def removed(raw: str) -> str | None:
    """The dashed name of a flag some vLLM release removed ('swap_space' -> 'swap-space'), else None."""
    name = raw.strip().lstrip("-").replace("_", "-")
    return name if name in REMOVED else None


def removed_takes_value(name: str) -> bool:
    return REMOVED[name][2]


def release_key(release: str) -> tuple[int, ...]:
    """'v0.10.1.1' -> (0, 10, 1, 1) for comparing releases; ValueError if it names none."""
    numbers = []
    for part in release.strip().lstrip("vV").split("+")[0].split("."):
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        numbers.append(int(digits))
        if digits != part:  # 0.10.0rc1: the release it leads to
            break
    if not numbers:
        raise ValueError(f"{release!r} is not a vLLM release")
    return tuple(numbers)


def removed_by(name: str, judged: str) -> bool | None:
    """Whether vLLM `judged` lacks the removed flag: True; False (that release still has it); None
    (the release that dropped it is not on record and `judged` is older than the parser on record)."""
    release = REMOVAL_TABLE[name][0]
    if release is not None:
        return release_key(judged) >= release_key(release)
    if name in STILL_IN and release_key(judged) <= release_key(STILL_IN[name]):
        return False
    return True if release_key(judged) >= release_key(version()) else None


def removal(name: str) -> tuple[str, str]:
    """(when it went, in words; what to do instead) for a removed flag."""
    release, instead, _, _ = REMOVAL_TABLE[name]
    when = (
        f"was removed in vLLM {release}"
        if release
        else f"was removed from vLLM (before 0.32.0: vLLM {version()} no longer has it)"
    )
    return when, instead


def removal_source(name: str) -> str:
    return REMOVAL_TABLE[name][3]


@dataclass(frozen=True)
class Flag:
    name: str  # dashed long name without '--'
    takes_value: bool
    negatable: bool  # a --no-NAME form exists
    dest: str
    multiple: bool = False  # takes one or more values (nargs '+')


def generate() -> dict:
    """Every option of `vllm serve`'s parser, as the installed vLLM builds it."""
    import vllm
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    flags, aliases = {}, {}
    for action in parser._actions:
        longs = [s[2:] for s in action.option_strings if s.startswith("--") and not s.startswith("--no-")]
        if not longs or action.dest == "help":
            continue
        name = longs[0]
        negatable = any(s.startswith("--no-") for s in action.option_strings)
        flags[name] = {
            "takes_value": action.nargs != 0,
            "negatable": negatable,
            "dest": action.dest,
            "multiple": action.nargs in ("+", "*"),
        }
        for alt in longs[1:]:
            aliases[alt] = name
        for short in action.option_strings:
            if short.startswith("-") and not short.startswith("--"):
                aliases[short[1:]] = name
    return {
        "vllm_version": vllm.__version__,
        "flags": dict(sorted(flags.items())),
        "aliases": dict(sorted(aliases.items())),
    }


@lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(resources.files("servelab.review").joinpath(FLAGS_FILE).read_text())


def version() -> str:
    """The vLLM version the flag list was taken from."""
    return _data()["vllm_version"]


def lookup(raw: str) -> tuple[Flag | None, bool]:
    """(the flag, whether it was written in its --no- form) for a name as written
    ('max_num_seqs', 'max-num-seqs', 'tp', 'no-enable-prefix-caching'); (None, False) if unknown."""
    name = raw.strip().lstrip("-")
    data = _data()
    for candidate in (name, name.replace("_", "-")):
        if candidate in data["aliases"]:
            candidate = data["aliases"][candidate]
        if candidate in data["flags"]:
            return Flag(candidate, **data["flags"][candidate]), False
        if candidate.startswith("no-") and candidate[3:] in data["flags"] and data["flags"][candidate[3:]]["negatable"]:
            return Flag(candidate[3:], **data["flags"][candidate[3:]]), True
    return None, False


def unknown_message(raw: str) -> str:
    """Why a flag is refused: removed (when, and what instead) or unknown (the closest one)."""
    name = raw.strip().lstrip("-").replace("_", "-")
    if name in REMOVED:
        when, instead = removal(name)
        return f"--{name} {when}; {instead}"
    close = difflib.get_close_matches(name, list(_data()["flags"]), n=1, cutoff=0.6)
    hint = f"; did you mean --{close[0]}?" if close else "; see `vllm serve --help`"
    return f"--{name} is not a flag of vLLM {version()}{hint}"


def main() -> None:
    path = Path(__file__).with_name(FLAGS_FILE)
    data = generate()
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{path}: {len(data['flags'])} flags from vLLM {data['vllm_version']}")


def names() -> tuple[str, ...]:
    """Every long flag name the installed vLLM accepts, dashed."""
    return tuple(_data()["flags"])


if __name__ == "__main__":
    main()
