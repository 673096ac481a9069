# Public config: vLLM recipes, gpt-oss "example deployment on 8xH100" for accuracy evaluation.
# Source: github.com/vllm-project/recipes, OpenAI/GPT-OSS.md,
#   commit 59dc5f185d181041960623e355715e0ad46e967e (the command as published)
# Teaches: a mixture of experts with MXFP4 experts (all 128 experts in memory, 4 active per token)
#   split 8 ways although it fits one GPU; the chunked-prefill budget; max-model-len 131,072.
# The recipe's comment gives the hardware: eight H100.
# deployment: {gpu: H100, gpus-per-node: 8}
vllm serve openai/gpt-oss-120b \
  --tensor_parallel_size 8 \
  --max-model-len 131072 \
  --max-num-batched-tokens 10240 \
  --max-num-seqs 128 \
  --gpu-memory-utilization 0.85 \
  --no-enable-prefix-caching
