"""The grading time limits are set in one place (servelab.grading.sandbox) and reach every way of grading."""

import inspect
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from servelab.grading import parallel, pipeline, sandbox, trusted

REPO = Path(__file__).resolve().parents[1]


def test_a_bare_nbgrader_autograde_uses_the_same_cell_limit_as_the_pipeline():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    execute = trusted.SandboxedExecute(config=config)
    assert (execute.timeout, execute.run_timeout) == (sandbox.CELL_TIMEOUT_S, sandbox.SUBMISSION_TIMEOUT_S)
    assert (pipeline.CELL_TIMEOUT_S, pipeline.SUBMISSION_TIMEOUT_S) == (
        sandbox.CELL_TIMEOUT_S,
        sandbox.SUBMISSION_TIMEOUT_S,
    )


def test_the_parallel_graders_default_to_the_same_limits():
    for fn in (parallel.work, parallel.grade_all):
        params = inspect.signature(fn).parameters
        assert params["cell_timeout"].default == sandbox.CELL_TIMEOUT_S, fn.__name__
        assert params["submission_timeout"].default == sandbox.SUBMISSION_TIMEOUT_S, fn.__name__
