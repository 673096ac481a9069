"""Measurement records the grading tests hand in: one builder, so a new required field is added in one place."""

from __future__ import annotations

from servelab.measurement import Measurement

# What servelab.cpu_usage.machine_fingerprint writes on a learner's machine: the records are the learner's own.
LEARNER_MACHINE = "Intel(R) Xeon(R) Processor; 2 cores; host 0123456789ab"


def comparison_record(method: str, k: int, tok_s: float, **overrides) -> dict:
    """A record of 8 requests of 64 tokens on the copy workload at `tok_s`, as the lab writes one on the learner's machine (TPOT p50 90 ms
    without speculation, 110 with; acceptance 0.63 with), with `overrides` replacing any field afterwards."""
    output_tokens = 64 * 8
    elapsed = output_tokens / tok_s
    record = Measurement(
        method=method,
        num_speculative_tokens=k,
        batch_size=8,
        workload="copy",
        output_len=64,
        num_requests=8,
        prompt_tokens=400,
        output_tokens=output_tokens,
        elapsed_s=round(elapsed, 4),
        output_tok_s=tok_s,
        request_throughput=8 / elapsed,
        ttft_ms_p50=100,
        ttft_ms_p99=150,
        tpot_ms_p50=90 if k == 0 else 110,
        tpot_ms_p99=120,
        model="SmolLM2-135M-Instruct",
        dtype="float32",
        hardware="Intel(R) Xeon(R) Processor",
        acceptance_rate=0.63 if k else None,
        machine=LEARNER_MACHINE,
    ).to_dict()
    record.update(overrides)
    return record
