# SageMaker Python SDK deployment of the vLLM DLC (pattern from aws/deep-learning-containers vLLM SageMaker examples, 2025)
import sagemaker
from sagemaker.model import Model

role = sagemaker.get_execution_role()
image_uri = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.10.2-gpu-py312-cu128-ubuntu22.04-sagemaker"
model = Model(
    image_uri=image_uri,
    role=role,
    env={
        "SM_VLLM_MODEL": "meta-llama/Llama-3.1-8B-Instruct",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_MAX_NUM_SEQS": "128",
        "SM_VLLM_ENABLE_PREFIX_CACHING": "",
        "HF_TOKEN": "<hf_token>",
    },
)
predictor = model.deploy(initial_instance_count=1, instance_type="ml.g6e.xlarge")
