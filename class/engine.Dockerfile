# The cluster's engine image (class/vllm-stack-values.yaml, each modelSpec's repository and tag): vLLM's own
# image with servelab's wheel added, so that `--middleware servelab.classroom.gate.OneSequencePerRequest`
# imports in the engine as on the local class's (servelab.classroom.servers.engine_bounds). The gate needs
# nothing beyond Python's standard library: the wheel goes in without its dependencies, and the image's
# vLLM, torch and the rest stay as vLLM built them.
#
#   .venv/bin/python -m pip wheel --no-deps --no-build-isolation -w dist .
#   docker build -f class/engine.Dockerfile -t registry.example.edu/servelab/engine:0.1.0 .
#
# As for the students' image, class/engine.Dockerfile.dockerignore lets in dist/*.whl only.
FROM vllm/vllm-openai:v0.32.0
ARG SERVELAB_WHEEL=servelab-0.1.0-py3-none-any.whl
COPY dist/${SERVELAB_WHEEL} /tmp/wheels/
RUN python3 -m pip install --no-cache-dir --no-deps "/tmp/wheels/${SERVELAB_WHEEL}" && rm -rf /tmp/wheels \
    && python3 -c "import servelab.classroom.gate"
