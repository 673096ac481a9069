"""The flags `vllm serve` accepts, taken from vLLM's own argument parser.

Importing vLLM takes seconds, so the list is generated once into vllm_flags.json
(with the vLLM version it came from) and read from there:

    python -m servelab.review.vllm_flags      # regenerate after upgrading vLLM

tests/test_review_inputs.py checks that the file matches the installed vLLM.
Flags vLLM has removed are not in any parser; REMOVED names the ones real
configs still carry, with the release that dropped them and what to use instead:
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

# Flags gone from vLLM that public configs still set: (the release that dropped it, what to do
# instead, whether it took a value). "before 0.32.0" where the release is not on record here,
# only that the installed 0.32.0 lacks it. A config carrying one is still reviewed: the flag is a
# finding of its own (vLLM will not start with it), the rest of the config is weighed as usual.
REMOVED = {
    "use-v2-block-manager": (
        "before 0.32.0",
        "delete it: block manager v2 became the only one (deprecated by vLLM PR #8704)",
        False,
    ),
    "disable-log-requests": ("before 0.32.0", "delete it: requests are not logged unless --enable-log-requests", False),
    # EngineArgs has swap_space through 0.17.1 and not from 0.18.0 (every release from 0.15.0 to
    # 0.29.0 installed and inspected: github.com/unslothai/unsloth-zoo issue #1210)
    "swap-space": ("0.18.0", "delete it: the V1 engine recomputes preempted requests instead of swapping", True),
    "num-scheduler-steps": ("before 0.32.0", "delete it: the V1 engine has no multi-step scheduling", True),
    "max-seq-len-to-capture": ("before 0.32.0", "use max-cudagraph-capture-size", True),
    "guided-decoding-backend": ("before 0.32.0", "use structured-outputs-config", True),
    "preemption-mode": ("before 0.32.0", "delete it: the V1 engine always recomputes", True),
    "tokenizer-pool-size": ("before 0.32.0", "delete it", True),
    "task": ("before 0.32.0", "use runner / convert", True),
    "cuda-graph-sizes": ("before 0.32.0", "use cudagraph-capture-sizes or max-cudagraph-capture-size", True),
    # The old speculative flags: vLLM 0.32 takes one speculative-config JSON, or its --spec-method /
    # --spec-model / --spec-tokens shorthand (EngineArgs.create_speculative_config, vllm/engine/arg_utils.py).
    "speculative-model": (
        "before 0.32.0",
        'use --speculative-config \'{"model": ..., "num_speculative_tokens": N}\' (or --spec-model)',
        True,
    ),
    "num-speculative-tokens": (
        "before 0.32.0",
        "put num_speculative_tokens in --speculative-config (or use --spec-tokens)",
        True,
    ),
    "speculative-draft-tensor-parallel-size": (
        "before 0.32.0",
        "put draft_tensor_parallel_size in --speculative-config",
        True,
    ),
    "ngram-prompt-lookup-max": (
        "before 0.32.0",
        "put prompt_lookup_max in --speculative-config with method ngram",
        True,
    ),
    "ngram-prompt-lookup-min": (
        "before 0.32.0",
        "put prompt_lookup_min in --speculative-config with method ngram",
        True,
    ),
    "speculative-disable-by-batch-size": ("before 0.32.0", "put disable_by_batch_size in --speculative-config", True),
    "device": ("before 0.32.0", "delete it: vLLM detects the platform", True),
    "worker-use-ray": ("before 0.32.0", "use --distributed-executor-backend ray", False),
    "engine-use-ray": ("before 0.32.0", "delete it: the engine runs in its own process", False),
    "calculate-kv-scales": (
        "before 0.32.0",
        "delete it: FP8 KV scales come from the checkpoint (or default to 1.0)",
        False,
    ),
    "enable-prompt-adapter": ("before 0.32.0", "delete it: prompt adapters are gone; use LoRA", False),
    "disable-async-output-proc": ("before 0.32.0", "delete it: the V1 engine always overlaps output processing", False),
}


def removed(raw: str) -> str | None:
    """The dashed name of a flag vLLM has removed ('swap_space' -> 'swap-space'), else None."""
    name = raw.strip().lstrip("-").replace("_", "-")
    return name if name in REMOVED else None


def removed_takes_value(name: str) -> bool:
    return REMOVED[name][2]


def removal(name: str) -> tuple[str, str]:
    """(when it went, in words; what to do instead) for a removed flag."""
    release, instead, _ = REMOVED[name]
    when = (
        f"was removed in vLLM {release}"
        if release[0].isdigit()
        else f"was removed from vLLM ({release}: vLLM {version()} no longer has it)"
    )
    return when, instead


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
