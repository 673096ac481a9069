# The instructors' image for a class on a cluster (hub.extraConfig in class/z2jh-values.yaml): the
# students' image plus the course folder, which holds the keys (grading/keys/), the instructor
# notebooks (solutions/) and the sample submissions. servelab is installed from that folder, so the
# grader finds the keys where the local class finds them. Only instructors' pods run this image.
#
#   docker build -f class/instructor.Dockerfile -t registry.example.edu/servelab/instructor:0.1.0 .
FROM registry.example.edu/servelab/student:0.1.0
USER root
COPY --chown=root:100 . /srv/servelab-course
# Group 100 (the pods' gid) reads the course; nobody else on the image does.
RUN chmod -R o-rwx /srv/servelab-course && pip install --no-cache-dir --no-deps -e /srv/servelab-course \
    && apt-get update -qq && apt-get install -y -qq bubblewrap && rm -rf /var/lib/apt/lists/*
USER ${NB_UID}
