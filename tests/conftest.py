"""Shared fixtures: an isolated cache and results store per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path):
    from servelab.results import ResultsStore

    return ResultsStore(tmp_path / "results.jsonl")


def pytest_configure(config):
    # Engine logs and measured rooflines of the test run stay out of the user's cache,
    # but the converted model (a minute to build) is shared with it.
    os.environ.setdefault("SERVELAB_RESULTS", str(REPO / "test-artifacts" / "results.jsonl"))
