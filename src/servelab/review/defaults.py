"""vLLM 0.32.0's defaults for the knobs a config may leave out, as vLLM itself picks them.

Batch defaults depend on where the server runs (EngineArgs.get_batch_defaults in
vllm/engine/arg_utils.py, vLLM 0.32.0), for `vllm serve` (the OpenAI API server's usage
context; `LLM(...)` in Python uses larger offline values):

    GPU memory >= 160 GiB (B200, MI300X)         max-num-seqs 1,024, max-num-batched-tokens 16,384
    GPU memory >= 70 GiB, not an A100 (H100/H200) max-num-seqs 1,024, max-num-batched-tokens 8,192
    any other GPU (A100, L40S, L4)                max-num-seqs 256,   max-num-batched-tokens 2,048
    CPU                                           max-num-seqs 128 x world size, 2,048 x world size tokens

serve_defaults applies the rules vLLM 0.32 lays over these (performance-mode throughput
doubles them; data parallelism with expert parallelism on deepep_low_latency or nixl_ep
takes 256 tokens; chunked prefill off raises the token default to max-model-len).
world size is tensor-parallel-size x pipeline-parallel-size. GPU memory is what the driver
reports (hardware.PRESETS), compared in GiB as vLLM does. tests/test_review_defaults.py
checks these against the installed vLLM's own get_batch_defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import hardware
from ..hardware import Hardware
from .vllm_flags import release_key

# vLLM 0.32.0's CacheConfig.gpu_memory_utilization default (vllm/config/cache.py, "If unspecified, will use
# the default value of 0.92"); tests/test_review.py compares it with the installed vLLM's
GPU_MEMORY_UTILIZATION = 0.92
PREFIX_CACHING = True  # the V1 engine caches prefixes unless told not to
# Before vLLM 0.8.0 the V0 engine served by default, and it cached no prefixes unless told to; 0.8.0 made V1
# the default engine, with prefix caching on (IBM/fmwork PR #36: "With the release of VLLM 0.8.0, the V1 engine
# is now the default. With prefix caching now default enabled").
PREFIX_CACHING_SINCE = "0.8.0"


def prefix_caching_default(release: str) -> tuple[bool, str]:
    """enable-prefix-caching's default in the release a config is judged as, and that release's name for it."""
    if release and release_key(release) < release_key(PREFIX_CACHING_SINCE):
        return False, f"vLLM {release}'s default: its V0 engine caches no prefix unless told to (V1, from 0.8.0, does)"
    return PREFIX_CACHING, ""


CHUNKED_PREFILL = True  # the V1 engine chunks prefills unless told not to
LARGEST_GIB = 160  # from here vLLM takes "the largest defaults" (B200/B300)
LARGE_GIB = 70  # from here, except on an A100, the H100/H200 defaults


@dataclass(frozen=True)
class BatchDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    why: str  # the rule vLLM applied, for the evidence line


def is_cpu(hw: Hardware) -> bool:
    return hw.name not in hardware.PRESETS and bool(re.search(r"cpu|processor|xeon|epyc|ryzen|core", hw.name, re.I))


def batch_defaults(hw: Hardware, world_size: int = 1) -> BatchDefaults:
    """max-num-seqs and max-num-batched-tokens `vllm serve` 0.32.0 takes on this hardware when unset."""
    if is_cpu(hw):
        return BatchDefaults(128 * world_size, 2048 * world_size, f"vLLM 0.32 on CPU: 128 x world size {world_size}")
    gib = hardware.memory_gib(hw)
    if gib >= LARGEST_GIB:
        return BatchDefaults(1024, 16384, f"vLLM 0.32 on a GPU with {gib:.0f} GiB (at least {LARGEST_GIB})")
    if gib >= LARGE_GIB and "a100" not in hw.name.lower():
        return BatchDefaults(1024, 8192, f"vLLM 0.32 on a GPU with {gib:.0f} GiB (at least {LARGE_GIB}, not an A100)")
    return BatchDefaults(256, 2048, f"vLLM 0.32 on {hw.name} ({gib:.0f} GiB)")


# vLLM 0.32's SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP (vllm/config/scheduler.py):
# the token budget of a data-parallel expert-parallel server on a low-latency all-to-all backend.
BATCHED_DP_TOKENS = 256
BATCHED_DP_BACKENDS = ("deepep_low_latency", "nixl_ep")  # ParallelConfig.use_batched_dp_moe


def serve_defaults(
    hw: Hardware,
    world_size: int,
    *,
    max_num_seqs: int | None,
    max_num_batched_tokens: int | None,
    max_model_len: int,
    chunked_prefill: bool = True,
    performance_mode: str = "balanced",
    batched_dp_moe: bool = False,
) -> tuple[int, int, str]:
    """(max-num-seqs, max-num-batched-tokens, why) as `vllm serve` 0.32.0 settles them, the given ones
    kept: EngineArgs._set_default_max_num_seqs_and_batched_tokens_args (vllm/engine/arg_utils.py).
    From the platform defaults (batch_defaults): DP + EP on deepep_low_latency / nixl_ep takes 256
    tokens; --performance-mode throughput doubles each default; without chunked prefill the token
    default is at least max-model-len; a token default is at most max-num-seqs x max-model-len, and a
    max-num-seqs default at most the token budget. (A multimodal prefix-LM's floor of one item is
    left out: it needs the model's processor.)"""
    base = batch_defaults(hw, world_size)
    why = [base.why]
    seqs = max_num_seqs if max_num_seqs is not None else base.max_num_seqs
    tokens = max_num_batched_tokens
    if tokens is None:
        tokens = BATCHED_DP_TOKENS if batched_dp_moe else base.max_num_batched_tokens
        if batched_dp_moe:
            why.append(
                f"{BATCHED_DP_TOKENS} tokens for data parallelism with expert parallelism on a "
                "low-latency all-to-all backend"
            )
    if performance_mode == "throughput":
        if max_num_batched_tokens is None:
            tokens *= 2
        if max_num_seqs is None:
            seqs *= 2
        why.append("doubled by performance-mode throughput")
    if max_num_batched_tokens is None:
        if not chunked_prefill:
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    if max_num_seqs is None:
        seqs = min(seqs, tokens)
    return seqs, tokens, "; ".join(why)
