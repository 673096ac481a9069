"""The course id has one home, servelab.courseid.COURSE_ID: nbgrader's config, the class
hub, the class report and the variants' seeds all read it there, so renaming the course is one edit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
# the places that name the course, each of which imports COURSE_ID rather than writing it
USERS = (
    "grading/nbgrader_config.py",
    "src/servelab/classroom/hub.py",
    "src/servelab/classroom/report.py",
    "src/servelab/variants/seeds.py",
)


def test_nbgrader_and_the_variants_read_the_one_constant():
    from traitlets.config import PyFileConfigLoader

    from servelab import variants
    from servelab.courseid import COURSE_ID

    config = PyFileConfigLoader("nbgrader_config.py", str(REPO / "grading")).load_config()
    assert config.CourseDirectory.course_id == variants.COURSE_ID == COURSE_ID


def test_no_place_writes_the_course_id_itself():
    """Read as text: the hub and the report import nbgrader, seconds of imports for a unit test."""
    written = re.compile(r"""(?:course_id|COURSE_ID|HUB_COURSE)\b[^=\n]*=\s*["']""")
    found = [rel for rel in USERS if written.search((REPO / rel).read_text())]
    assert not found, f"these write the course id instead of importing servelab.courseid.COURSE_ID: {found}"
    reading = [rel for rel in USERS if "COURSE_ID" in (REPO / rel).read_text()]
    assert reading == list(USERS), "each place that names the course reads servelab.courseid.COURSE_ID"
