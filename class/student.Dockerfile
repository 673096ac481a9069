# The students' image for a class on a cluster (class/z2jh-values.yaml, singleuser.image): servelab
# installed from its wheel, and nothing of the course folder (no grading/: keys and sample submissions;
# no solutions/), as on the local hub (servelab.classroom.studentenv).
#
#   .venv/bin/python -m pip wheel --no-deps --no-build-isolation -w dist .
#   docker build -f class/student.Dockerfile -t registry.example.edu/servelab/student:0.1.0 .
#
# The build context is the checkout, but class/student.Dockerfile.dockerignore lets in dist/*.whl only
# (BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile): nothing else can be copied in.
FROM quay.io/jupyter/base-notebook:python-3.11
ARG SERVELAB_WHEEL=servelab-0.1.0-py3-none-any.whl
COPY dist/${SERVELAB_WHEEL} /tmp/wheels/
RUN pip install --no-cache-dir "/tmp/wheels/${SERVELAB_WHEEL}[gpu]" && rm -rf /tmp/wheels
# Pods run as uid 20000 + the hub's id for the user, which /etc/passwd does not list; nss_wrapper gives it
# the hub's name (python -m servelab.classroom.cluster pod-start, the pods' command in class/z2jh-values.yaml).
USER root
RUN apt-get update -qq && apt-get install -y -qq libnss-wrapper && rm -rf /var/lib/apt/lists/*
USER ${NB_UID}
