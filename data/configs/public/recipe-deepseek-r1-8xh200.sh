# Public config: vLLM recipes, "Running DeepSeek-R1 with FP8 on 8xH200".
# Source: github.com/vllm-project/recipes, DeepSeek/DeepSeek-V3.md,
#   commit 10b3f96daf42009b447d257627e2ff8980b3345d (the command as published)
# Teaches: a shell command line with `\` continuations and an underscore flag; the FP8 checkpoint
#   the config never mentions; latent-attention KV arithmetic; max-model-len left at 163,840.
# The recipe's own heading gives the hardware: eight H200.
# deployment: {gpu: H200, gpus-per-node: 8}
vllm serve deepseek-ai/DeepSeek-R1-0528 \
  --trust-remote-code \
  --tensor-parallel-size 8 \
  --enable_expert_parallel
