"""The parallelism knob's simulated answer, for models tensor parallelism can split: vLLM splits the attention
heads evenly across the ranks, and refuses a size that does not divide them ("Total number of attention heads
(9) must be divisible by tensor parallel size (2)", bench/results/knobs-cpu.json). SmolLM2-135M has 9 heads,
so tensor-parallel-size 2 cannot run for it anywhere; the simulated rows are of a model it can split.
"""

from __future__ import annotations

from .. import simulate
from ..modelspec import preset

# (what, the simulator's model preset, hardware: None = this machine's measured roofline, dtype, one memory bus)
CASES = (
    ("Llama-3.1-8B on this CPU (2 cores, one memory bus)", "Llama-3.1-8B", None, "bfloat16", True),
    ("Llama-3.1-8B on 2x H100 (own HBM each, NVLink)", "Llama-3.1-8B", "H100", "bf16", False),
)


def refusal(model: str, tp: int) -> str:
    """vLLM's reason to refuse this tensor-parallel size for the model, or "" when it can split it."""
    spec = preset(model)
    if spec.num_heads % tp:
        return f"Total number of attention heads ({spec.num_heads}) must be divisible by tensor parallel size ({tp})."
    return ""


def simulated_rows(roofline: dict, batches=(1, 8, 32), tp: int = 2) -> dict[str, list[dict]]:
    """Simulated output tok/s at tp=1 and tp=`tp` per batch, for each case whose model that size can split."""
    rows = {}
    for where, model, hardware, dtype, shared in CASES:
        if refusal(model, tp):
            continue
        rows[where] = simulate.tensor_parallel_table(
            model_name=model,
            hardware=roofline if hardware is None else hardware,
            dtype=dtype,
            shared_memory=shared,
            batches=batches,
            tps=(1, tp),
        )
    return rows
