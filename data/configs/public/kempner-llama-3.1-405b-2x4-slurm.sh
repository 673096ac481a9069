#!/bin/bash
# Public config: Kempner Institute workshop (2026-03-26), multi-node vLLM server for Llama 3.1 405B.
# Source: github.com/KempnerInstitute/distributed-inference-vllm,
#   workshops/workshop_260326/setup_vllm_multinode_server.sh,
#   commit 7138431f6bd9375d9a1460c8e7b1153b544bf9f0 (the #SBATCH lines, the configuration block and
#   the server command as published; the Ray and NCCL set-up and the health-check loop left out)
# Teaches: #SBATCH --gres=gpu:4 on --nodes=2 gives 8 GPUs; the script's own comment says TP 8 is
#   "Total GPUs (4 GPUs/node x 2 nodes)", so tensor parallelism crosses the nodes, and 405B in bf16
#   (811.7 GB) does not fit eight 80 GB GPUs at all.
# Assumed (the script names the partition only as "gpu"): H100 80 GB nodes, the Kempner cluster's.
# deployment: {gpu: H100}
#SBATCH --job-name=vLLM_MultiNode_Server
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=500G
#SBATCH --partition=gpu            # Replace with your partition
#SBATCH --time=12:00:00

# Model configuration
MODEL_NAME="meta-llama/Meta-Llama-3.1-405B-Instruct"  # Adjust as needed
TENSOR_PARALLEL_SIZE=8  # Total GPUs (4 GPUs/node × 2 nodes)
MAX_MODEL_LEN=16384     # Adjust based on model and use case
GPU_MEMORY_UTIL=0.90    # GPU memory utilization (0.85-0.95)

python -m vllm.entrypoints.openai.api_server \
    --model $MODEL_NAME \
    --tensor-parallel-size $TENSOR_PARALLEL_SIZE \
    --max-model-len $MAX_MODEL_LEN \
    --distributed-executor-backend ray \
    --gpu-memory-utilization $GPU_MEMORY_UTIL \
    --trust-remote-code \
    --disable-custom-all-reduce \
    --enforce-eager &
