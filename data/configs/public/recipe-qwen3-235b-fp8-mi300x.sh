# Public config: vLLM recipes, Qwen3-235B-A22B-FP8 on AMD MI300X, with its benchmark.
# Source: github.com/vllm-project/recipes, Qwen/Qwen3.md,
#   commit 4993e16a150dfe32c03a2857292c6c34cb77d540 (the FP8 server and the benchmark as published)
# Teaches: two flags vLLM 0.32 has removed (--disable-log-requests, --swap-space) reviewed as one
#   finding while the rest is still reviewed; an FP8 checkpoint no fix asks to quantize again;
#   the benchmark's --ignore-eos beside the server.
# The recipe names MI300X/MI325X/MI355X and four devices (HIP_VISIBLE_DEVICES); MI300X assumed.
# deployment: {gpu: MI300X, gpus-per-node: 4}
HIP_VISIBLE_DEVICES="4,5,6,7" \
VLLM_USE_V1=1 \
VLLM_ROCM_USE_AITER=1 \
VLLM_ROCM_USE_AITER_MHA=0 \
VLLM_V1_USE_PREFILL_DECODE_ATTENTION=1 \
VLLM_USE_TRITON_FLASH_ATTN=0 \
SAFETENSORS_FAST_GPU=1  \
vllm serve Qwen/Qwen3-235B-A22B-FP8 \
--trust-remote-code \
-tp 4 \
--disable-log-requests \
--swap-space 16 \
--distributed-executor-backend mp \
--max-num-batched-tokens 32768 \
--max-model-len 32768 \
--no-enable-prefix-caching \
--gpu-memory-utilization 0.8

vllm bench serve \
  --model "Qwen/Qwen3-235B-A22B-FP8" \
  --dataset-name random \
  --random-input-len 8192 \
  --random-output-len 1024 \
  --request-rate 10000 \
  --num-prompts 16 \
  --ignore-eos \
  --trust-remote-code
