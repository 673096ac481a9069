# deployment: {gpu: H100, gpus-per-node: 1}
docker run --gpus all --ipc=host vllm/vllm-openai:v0.6.3.post1 \
  --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 \
  --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}' \
  --async-scheduling --kv-cache-dtype fp8
