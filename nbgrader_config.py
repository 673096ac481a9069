"""nbgrader's configuration for JupyterLab started in this folder (`make lab`, `servelab lab`).

nbgrader reads nbgrader_config.py from the directory the server starts in. The course
settings are grading/nbgrader_config.py's; this file points the Nbgrader menu at this
checkout's course: grading/course/ (the gradebook; `make grade` fills it with the
graded samples), the instructor notebooks in solutions/ as its source, and a local
exchange in grading/exchange/ for the Assignment List. formgrader's view of a submission
draws it with the course's HTMLExporter settings, as inert HTML (servelab.grading.safe_html).
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
here = os.path.dirname(os.path.abspath(__file__))

load_subconfig("nbgrader_config.py", path=os.path.join(here, "grading"))  # noqa: F821 - provided likewise
c.CourseDirectory.root = os.path.join(here, "grading", "course")
c.CourseDirectory.source_directory = os.path.join(here, "solutions")
c.Exchange.root = os.path.join(here, "grading", "exchange")
