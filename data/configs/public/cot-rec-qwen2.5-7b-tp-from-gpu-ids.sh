# Public config: CoT recommendation experiments, the script that serves Qwen2.5 7B with vLLM.
# Source: github.com/Mengfanzhe0127/cot_rec, cot/script/vllm/Qwen2.5-7B-Instruct.sh,
#   commit 4eebf6d9905f927a032fd47fce216cc23524ddda (the script as published)
# Teaches: a tensor-parallel size only running the script knows (GPU_COUNT counts the GPU ids given
#   as $1, a command's output): reviewed with --var GPU_COUNT=2, the value deployed; two removed
#   flags (--swap-space, --disable-log-requests) are findings and the rest is reviewed; TP 2 for a
#   7B that fits on one GPU.
# Assumed (the script names no GPU): run as `Qwen2.5-7B-Instruct.sh 0,1 8000` on two A100 80 GB.
# deployment: {gpu: A100, gpus-per-node: 2}
GPU_ID=$1
GPU_COUNT=$(echo "$GPU_ID" | awk -F',' '{print NF}')

model=/media/public/models/huggingface/Qwen/Qwen2.5-7B-Instruct

CUDA_VISIBLE_DEVICES=${GPU_ID} vllm serve ${model} \
  --port "$2" \
  --tensor-parallel-size "${GPU_COUNT}" \
  --swap-space 0 --gpu-memory-utilization 0.95 \
  --disable-log-requests \
  --disable-frontend-multiprocessing --seed 42
#   --disable-custom-all-reduce --enforce-eager \
#   --trust-remote-code --enable-prefix-caching --seed 42 \
#   --uvicorn-log-level warning --disable-log-requests
