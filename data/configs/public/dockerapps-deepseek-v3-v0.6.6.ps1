# Public config: a docker run of DeepSeek-V3 on vllm/vllm-openai v0.6.6.post1 (PowerShell).
# Source: github.com/yandy/dockerapps, vllm/run.ps1,
#   commit 7426a84c617e2083ba8e431ac1b7d872cf2ab4f2 (the command as published)
# Teaches: a container pinned to an old vLLM is judged as that release (0.6.6.post1, from the image
#   tag); `--gpus all` hands the container every GPU, but without --tensor-parallel-size vLLM uses
#   one, and 673 GB of FP8 weights do not fit one GPU.
# Assumed (the script names no GPU): one node of eight H200.
# deployment: {gpu: H200, gpus-per-node: 8}
docker run --rm --gpus all -v $PWD/.cache/huggingface:/root/.cache/huggingface -p 8000:8000 --ipc=host vllm/vllm-openai:v0.6.6.post1 --model deepseek-ai/DeepSeek-V3 --trust-remote-code
