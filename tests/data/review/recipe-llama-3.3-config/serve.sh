# source: github.com/vllm-project/recipes@8959cf64189c71d36e11c6a30335f923f261b1f7 Llama/Llama3.3-70B.md (launch) + Llama/Llama3.3_Hopper.yaml
# deployment: {gpu: H100, gpus-per-node: 8}
DTYPE=FP8
YAML_CONFIG=Llama3.3_Hopper.yaml
vllm serve nvidia/Llama-3.3-70B-Instruct-$DTYPE \
  --config ${YAML_CONFIG} \
  --tensor-parallel-size 1 &
