# Public config: AMD's vLLM guide for the MI300X, the online serving benchmark's server for Llama 3.1 70B FP8.
# Source: github.com/ROCm/vllm, docs/dev-docker/README.md,
#   commit b309ea79418c6fc9058a6b2dec312375d3c75753 (the "Online Serving Benchmark" server as published)
# Teaches: gpu-memory-utilization 0.99 in graph mode leaves 1% of the GPU outside vLLM's budget for the
#   CUDA/HIP context and graph capture (the same guide advises 0.92 - 0.95 without --enforce-eager), and
#   65,536 batched tokens size the profile run's activations, taken from the KV cache; three removed flags.
# The guide is for the MI300X and runs TP 8 on one node; MI300X assumed. amd/Llama-3.1-70B-Instruct-FP8-KV
#   is AMD's FP8 quantization of Llama 3.1 70B Instruct, which the catalogue does not hold: its shape is the
#   base model's (rocm-llama-3.1-70b-fp8-mi300x-model-config.json).
# deployment: {gpu: MI300X, gpus-per-node: 8, model-config: rocm-llama-3.1-70b-fp8-mi300x-model-config.json}
export VLLM_USE_TRITON_FLASH_ATTN=0
vllm serve amd/Llama-3.1-70B-Instruct-FP8-KV \
    --swap-space 16 \
    --disable-log-requests \
    --quantization fp8 \
    --kv-cache-dtype fp8 \
    --dtype float16 \
    --max-model-len 8192 \
    --tensor-parallel-size 8 \
    --max-num-batched-tokens 65536 \
    --gpu-memory-utilization 0.99 \
    --num_scheduler-steps 10
