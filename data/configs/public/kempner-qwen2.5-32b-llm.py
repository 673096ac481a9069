#!/usr/bin/env python3
# Public config: Kempner Institute workshop (2026-03-26), lab 2.a, vLLM batch inference on one GPU.
# Source: github.com/KempnerInstitute/distributed-inference-vllm,
#   workshops/workshop_260326/scripts/vllm_inference_2a.py,
#   commit b60718d34e3b1b5e615d232829497abc23c4432a (the imports, the model name, the sampling
#   parameters and the LLM(...) call as published; the prints, timing and output loop left out)
# Teaches: a Python script read without running it: LLM(model=model_name, ...) takes model_name
#   from the literal bound earlier in the function; max-model-len left at the model's 32,768 for
#   prompts of a few dozen tokens and max_tokens=150.
# Assumed (the lab says "1 GPU" and runs on the Kempner cluster): one H100 80 GB.
# deployment: {gpu: H100, gpus-per-node: 1}
import time
import torch
from vllm import LLM, SamplingParams

def main():
    # Model configuration
    model_name = "Qwen/Qwen2.5-32B-Instruct"

    # Sampling parameters
    sampling_params = SamplingParams(
        temperature=0.7,
        top_p=0.9,
        max_tokens=150,
    )

    llm = LLM(
        model=model_name,
        dtype="bfloat16",
        tensor_parallel_size=1,  # Single GPU
        gpu_memory_utilization=0.9,  # Use up to 90% of GPU memory
    )

if __name__ == "__main__":
    main()
