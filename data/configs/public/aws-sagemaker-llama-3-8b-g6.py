# Public config: AWS model-hosting-container-standards, "Basic Endpoint" notebook: vLLM on a
#   SageMaker endpoint, configured through SM_VLLM_* environment variables.
# Source: github.com/aws/model-hosting-container-standards, examples/vllm/notebooks/basic_endpoint.ipynb,
#   commit 99ce3955f2a338b7ef98d0ed05f46ebee513ab17 (the code of the cells that name the image, the
#   model, the instance and the container's environment, as published; the token is the notebook's
#   own placeholder)
# Teaches: a SageMaker model's SM_VLLM_* environment is vLLM's flags (the container's entrypoint turns
#   SM_VLLM_MAX_MODEL_LEN=2048 into --max-model-len 2048); ml.g6.4xlarge is one L4; the image tag
#   pins vLLM 0.11.2, so the config is judged as that release.
import boto3
import json
import time
from datetime import datetime

session = boto3.Session()
region = session.region_name
sagemaker_client = boto3.client('sagemaker', region_name=region)
sts_client = boto3.client('sts', region_name=region)
account_id = sts_client.get_caller_identity()['Account']
timestamp = datetime.now().strftime('%Y%m%d-%H%M%S')
model_name = f'vllm-model-{timestamp}'

container_image = f'{account_id}.dkr.ecr.{region}.amazonaws.com/vllm:0.11.2-sagemaker-v1.2'

huggingface_model_id = 'meta-llama/Meta-Llama-3-8B-Instruct'
huggingface_token = 'hf_your_token_here'  # Replace with your actual token

instance_type = 'ml.g6.4xlarge'  # For 8B model
execution_role = f'arn:aws:iam::{account_id}:role/SageMakerExecutionRole'

create_model_response = sagemaker_client.create_model(
    ModelName=model_name,
    PrimaryContainer={
        'Image': container_image,
        'Environment': {
            'SM_VLLM_MODEL': huggingface_model_id, # indicate your hf model here 
            'HUGGING_FACE_HUB_TOKEN': huggingface_token,  # Required for Llama 3
            'SAGEMAKER_CONTAINER_LOG_LEVEL': 'INFO',
            # Optional vLLM configuration:
            'SM_VLLM_MAX_MODEL_LEN': '2048',
            # 'SM_VLLM_GPU_MEMORY_UTILIZATION': '0.9',
        }
    },
    ExecutionRoleArn=execution_role,
)
