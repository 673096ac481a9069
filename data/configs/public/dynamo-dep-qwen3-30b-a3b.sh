# Public config: NVIDIA Dynamo's vLLM data-parallel attention / expert-parallel example.
# Source: github.com/ai-dynamo/dynamo, examples/backends/vllm/launch/dep.sh,
#   commit b7f730feb6b2ac8da2200631a3dec0732a6231a1 (the worker loop as published; one iteration
#   is one data-parallel rank of four)
# Teaches: Dynamo's `python3 -m dynamo.vllm` worker; DP 4 with expert parallelism, each rank on
#   one GPU; a loop variable ($i) in flags the review does not weigh; --enforce-eager.
# The script's comment names L40S as the GPU it fits on; four L40S assumed.
# deployment: {gpu: L40S, gpus-per-node: 4}
python -m dynamo.frontend --router-mode kv &

for i in {0..3}; do
    VLLM_NIXL_SIDE_CHANNEL_PORT=$((20096 + i)) \
    CUDA_VISIBLE_DEVICES=$i python3 -m dynamo.vllm \
    --model Qwen/Qwen3-30B-A3B \
    --data-parallel-rank $i \
    --data-parallel-size 4 \
    --enable-expert-parallel \
    --enforce-eager \
    --kv-events-config "{\"publisher\":\"zmq\",\"topic\":\"kv-events\",\"endpoint\":\"tcp://*:$((20080 + i))\",\"enable_kv_cache_events\":true}" &
done
