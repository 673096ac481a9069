"""The course's id, one for all that names it: nbgrader's CourseDirectory.course_id (grading/nbgrader_config.py),
the class hub's course folder and exchange (classroom.hub.ClassSettings.course_id) and a part of every variant's
seed (variants.seeds).

A module of its own, importing nothing: the students' package holds it, and so does the grading sandbox, where the
lesson's question cells draw a student's numbers through servelab.variants (servelab.grading.course, the
instructors' course builder, is not in the sandbox: grading.sandbox.SANDBOX_GRADING_FILES)."""

COURSE_ID = "servelab"
