# Public config: vLLM recipes, "Running Qwen2.5-VL with BF16 on 4xA100".
# Source: github.com/vllm-project/recipes, Qwen/Qwen2.5-VL.md,
#   commit ff7a06d9736b528a43b55836714dbe2b62df07be (the 72B command as published)
# Teaches: a vision-language model: the vision tower (0.63B) held beside the 72.7B language model;
#   max-model-len left at the model's 128,000; multimodal flags accepted and listed as not reviewed.
# The recipe's heading gives the hardware: four A100 (80 GB, its notes say).
# deployment: {gpu: A100, gpus-per-node: 4}
export CUDA_VISIBLE_DEVICES=0,1,2,3
vllm serve Qwen/Qwen2.5-VL-72B-Instruct  \
  --host 0.0.0.0 \
  --port 8000 \
  --tensor-parallel-size 4 \
  --mm-encoder-tp-mode data \
  --limit-mm-per-prompt '{"image":2,"video":0}' \

