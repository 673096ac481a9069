# Public config: NVIDIA Dynamo's vLLM speculative-decoding example, Llama 3.1 8B with an EAGLE-3 head.
# Source: github.com/ai-dynamo/dynamo, examples/backends/vllm/launch/agg_spec_decoding.sh,
#   commit f8b33ac68562b85fb83ddaccc07253316ee04c82 (the worker as published)
# Teaches: the EAGLE-3 draft head's weights (0.42B, sharing the target's embeddings) and its
#   one layer of KV counted beside the target; a multi-line JSON speculative config.
# One GPU (CUDA_VISIBLE_DEVICES=0); H100 assumed.
# deployment: {gpu: H100, gpus-per-node: 1}
python -m dynamo.frontend --http-port=8000 &

DYN_SYSTEM_ENABLED=true DYN_SYSTEM_PORT=8081 \
CUDA_VISIBLE_DEVICES=0 python -m dynamo.vllm \
    --model meta-llama/Meta-Llama-3.1-8B-Instruct \
    --enforce-eager \
    --speculative_config '{
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "draft_tensor_parallel_size": 1,
        "num_speculative_tokens": 2,
        "method": "eagle3"
    }' \
    --gpu-memory-utilization 0.8
