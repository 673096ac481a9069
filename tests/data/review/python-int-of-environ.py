import os
from vllm import LLM
# deployment: {gpu: H100, gpus-per-node: 8}
llm = LLM(model="Qwen/Qwen3-8B", tensor_parallel_size=int(os.environ.get("TP", "1")))
