"""Shared fixtures: an isolated cache and results store per test session, and `make grade` run once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path):
    from servelab.results import ResultsStore

    return ResultsStore(tmp_path / "results.jsonl")


@pytest.fixture(scope="session")
def make_grade():
    """The README's `make grade`, run once for the whole session as a newcomer would (about 110 s here: every
    sample graded in the sandbox). tests/test_readme.py checks the command and what it prints;
    tests/test_grading_pipeline.py checks what it graded, from grading/out/."""
    import test_readme  # the README's own command and the newcomer's environment

    return test_readme.run_readme(test_readme.readme_command("make grade"), timeout=1800)


def pytest_configure(config):
    # Engine logs and measured rooflines of the test run stay out of the user's cache,
    # but the converted model (a minute to build) is shared with it.
    os.environ.setdefault("SERVELAB_RESULTS", str(REPO / "test-artifacts" / "results.jsonl"))
