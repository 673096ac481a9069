# Public config: Anyscale examples, "Deploy Llama 3.1 8B" with Ray Serve LLM.
# Source: github.com/anyscale/examples, 03_deploy_llama_3_8b/serve_llama_3_1_8b.py,
#   commit 2798137f1a5d0b626c4dc084833a27d831f3c5ae (the script as published)
# Teaches: a Ray Serve LLM app read without running it: LLMConfig's model_loading_config names the
#   model (model_source), accelerator_type the GPU (L4), autoscaling up to 2 replicas, engine_kwargs
#   vLLM's arguments; os.environ["HF_TOKEN"] sits only where no knob is weighed, so it is not needed.
from ray import serve
from ray.serve.llm import LLMConfig, build_openai_app
import os

llm_config = LLMConfig(
    model_loading_config=dict(
        model_id="my-llama-3.1-8B",
        # Or Qwen/Qwen2.5-7B for an ungated model
        model_source="meta-llama/Llama-3.1-8B-Instruct",
    ),
    accelerator_type="L4",
    deployment_config=dict(
        autoscaling_config=dict(
            min_replicas=1, max_replicas=2,
        )
    ),
    # We need to share our Hugging Face Token to the workers so they can access the gated model.
    # If your model is not gated, you can skip this.
    runtime_env=dict(
        env_vars={
          "HF_TOKEN": os.environ["HF_TOKEN"]
        }
    ),
    engine_kwargs=dict(
        max_model_len=8192
    )
)

app = build_openai_app({"llm_configs": [llm_config]})

# Uncomment the below line to run the service locally with Python.
# serve.run(app, blocking=True)
