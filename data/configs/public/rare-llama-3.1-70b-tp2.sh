# Public config: RARE (retrieval-augmented reasoning), the script that serves Llama 3.1 70B.
# Source: github.com/infinityreader/RARE, scripts/deploy_llama31_70b.sh,
#   commit e65c9419af433c69b9a2f76f73777228bf18ee8e (the script as published)
# Teaches: two flags later vLLM releases removed (--tokenizer-pool-size, --swap-space) are findings
#   and the rest is reviewed; 70B in bf16 over TP 2 leaves little KV cache for 32,000-token requests.
# Assumed (CUDA_VISIBLE_DEVICES=2,3 names no GPU type): two A100 80 GB of an eight-GPU node.
# deployment: {gpu: A100, gpus-per-node: 2}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
export CUDA_VISIBLE_DEVICES=2,3
export VLLM_WORKER_MULTIPROC_METHOD=spawn
python3 -m vllm.entrypoints.openai.api_server \
--model /home/htran/llama/Meta-Llama-3.1-70B-Instruct \
--gpu-memory-utilization 0.9 --tensor-parallel-size 2 \
--served-model-name llama31_7b_with_openai_api \
--max-model-len 32000 \
--tokenizer-pool-size 128 --swap-space 8 --block-size 32 \
--port 5999
