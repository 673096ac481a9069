"""Make a weight-quantized copy of the bundled model with llm-compressor, for the precision knob.

W4A16: 4-bit integer weights in groups of 64 (symmetric, round-to-nearest; no calibration data),
activations and the KV cache stay bfloat16. The format is compressed-tensors, which vLLM reads; on
CPU vLLM runs such layers with its CPUWNA16 kernel (vllm/model_executor/kernels/linear/mixed_precision/
cpu.py), which needs 4-bit weights, an even group size and layer sizes that are multiples of 32.
SmolLM2-135M's 576 hidden size is a multiple of 64 but not of 128, so the group is 64.
lm_head (tied to the embedding) stays unquantized.

llm-compressor pins other versions of transformers and compressed-tensors than vLLM does, so it runs
in a separate virtual environment (`make quantized-model` builds it); the checkpoint it writes is
then served by the project's vLLM:

    python bench/quantize.py [--out DIR]     # default: ~/.cache/servelab/models/SmolLM2-135M-Instruct-W4A16
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

SOURCE = (
    Path(os.environ.get("SERVELAB_CACHE", Path.home() / ".cache" / "servelab")) / "models" / "SmolLM2-135M-Instruct"
)
GROUP_SIZE = 64  # divides 576 (hidden) and 1536 (MLP); 128 would not divide 576


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="the bundled model's folder")
    parser.add_argument("--out", type=Path, default=SOURCE.with_name(SOURCE.name + "-W4A16"))
    args = parser.parse_args()

    import torch
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (args.source / "config.json").is_file():
        raise SystemExit(f"No model at {args.source}: run `servelab prepare-model` first.")
    model = AutoModelForCausalLM.from_pretrained(args.source, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(args.source)
    weights = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP_SIZE)
    recipe = QuantizationModifier(
        config_groups={"w4a16": QuantizationScheme(targets=["Linear"], weights=weights)}, ignore=["lm_head"]
    )
    oneshot(model=model, recipe=recipe)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, save_compressed=True)
    tokenizer.save_pretrained(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
