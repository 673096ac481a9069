#! /bin/bash
# Public config: Kempner Institute, DeepSeek-R1-0528 multi-node server on four 4-GPU H100 nodes (SLURM).
# Source: github.com/KempnerInstitute/distributed-inference-vllm,
#   workflows/DeepSeek-R1-0528_multinode-server/deepseek_r1_0528_h100_slurm.sh,
#   commit 6fbdc95a28680aa86ae87098b5caea13d2a2af13 (the #SBATCH lines and the vllm serve command
#   as published; the module loads and the Ray start-up between them left out)
# Teaches: a SLURM job script whose tensor parallelism is $((SLURM_NNODES * SLURM_GPUS_ON_NODE)),
#   which its own #SBATCH lines resolve (4 x 4 = 16); --enable-reasoning, which vLLM 0.10.0 removed,
#   is a finding while the rest is reviewed; TP 16 spans the nodes.
# The GPU is the job's own --constraint=h100.
#SBATCH --job-name=<job-name>           # Job name
#SBATCH --partition=<partition-name>    # Partition name
#SBATCH --account=<account-name>        # Account name
#SBATCH --nodes=4                       # Number of nodes
#SBATCH --ntasks-per-node=1             # Number of tasks per node
#SBATCH --gpus-per-node=4               # Number of GPUs per node
#SBATCH --cpus-per-task=96              # Number of CPUs per task
#SBATCH --mem=1440G                     # Total memory per node (adjust as needed) 
#SBATCH --exclusive                     # Exclusive node allocation
#SBATCH --constraint=h100               # Constraint for H100 GPUs
#SBATCH --time=03-00:00:00              # Time limit DD-HH:MM:SS

# Set model path (FileSystem: Lustre, # of stripes: 16)
MODEL_PATH="/n/holylfs06/LABS/kempner_shared/Everyone/testbed/models/DeepSeek-R1-0528"

# Setup Ray GPU config
if [[ -z $SLURM_GPUS_ON_NODE ]]; then
    RAY_NUM_GPUS=0
else
    RAY_NUM_GPUS=$SLURM_GPUS_ON_NODE
fi

# Run vLLM with DeepSeek-R1 671B model
vllm serve $MODEL_PATH \
  --tensor-parallel-size $((SLURM_NNODES * SLURM_GPUS_ON_NODE)) \
  --enable-reasoning \
  --reasoning-parser deepseek_r1 \
  --trust-remote-code \
  --enforce-eager

# Additional flags to fine-tune throughput and concurrency
#   --max-num-seqs 112 \
#   --max-model-len 2048 \
#   --max-num-batched-tokens 57344 \
#   --gpu-memory-utilization 0.9 \
