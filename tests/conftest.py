"""Shared fixtures: an isolated cache and results store per test session, and `make grade` run once."""

from __future__ import annotations

import os
import re
import resource
import sys
import time
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

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


# The unit lane: `make test-unit` runs `pytest tests -m unit` in a process of its own. A unit test is marked
# `pytestmark = pytest.mark.unit` (a module) or `@pytest.mark.unit` (one test): it starts no server, sandbox,
# browser, database or engine, and imports no vLLM. Two guards keep it so, on every unit-marked test in any run:
#
# - vLLM: a unit test fails when `vllm` appears in sys.modules during its setup, call or teardown. An import at a
#   module's top happens at collection, before any test: the module that brought vLLM in is remembered, and every
#   unit test run after it fails naming that module. Once a test outside the lane has imported vLLM (the full
#   suite) the guard cannot see later imports; the lane, a fresh process that collects only modules carrying the
#   mark, always can.
# - time: a unit test's call phase may use at most UNIT_CPU_S of CPU time, the process's own plus the children it
#   waited for (getrusage). CPU time, not wall time: six people share this machine's two cores, and a load of 6
#   makes a 0.3 s test take 2 s of wall time while its CPU time stays 0.3 s. Counting the children keeps a test
#   from hiding its work in a subprocess. A test that waits instead of computing (a server, a sleep) uses no CPU,
#   so wall time is bounded too, at UNIT_WALL_S: far above what any load makes of a second's work.
UNIT_CPU_S = 1.0
UNIT_WALL_S = 10.0
UNIT_MARK = "pytest.mark.unit"
# Who first brought vLLM into this process: (what to call it, the module's path when it was a module's import)
_vllm_loader: list[tuple[str, Path | None]] = []
_vllm_module_holds_unit_tests: list[bool] = [False]


def _vllm_loaded() -> bool:
    return "vllm" in sys.modules


def _is_unit(item) -> bool:
    """Marked unit, by itself or its module, and not taken out: a module's mark covers its tests but those marked
    slow or browser, and those that take themselves out with `@pytest.mark.unit(False)` (say why beside it)."""
    mark = item.get_closest_marker("unit")
    if mark is None or mark.args[:1] == (False,):
        return False
    return item.get_closest_marker("slow") is None and item.get_closest_marker("browser") is None


def _unit_lane(config) -> bool:
    """True when the run selects only unit tests (`-m unit`, `-m "unit and ..."`)."""
    return re.fullmatch(r"\(?\s*unit\s*\)?(\s+and\s+.*)?", config.getoption("markexpr") or "") is not None


def pytest_ignore_collect(collection_path, config):
    # The lane imports only the modules that can hold a unit test: one without the mark anywhere in its text holds
    # none, and importing it (torch, nbgrader, a browser's driver) would only cost the lane its seconds.
    if not _unit_lane(config) or collection_path.suffix != ".py" or collection_path.name == "conftest.py":
        return None
    if not collection_path.name.startswith("test_"):
        return True  # helpers: imported by the test modules that use them, they hold no tests of their own
    return True if UNIT_MARK not in collection_path.read_text(encoding="utf-8") else None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    if not isinstance(collector, pytest.Module) or _vllm_loaded():
        return (yield)
    report = yield
    if _vllm_loaded() and not _vllm_loader:
        _vllm_loader.append((f"{collector.path.name} (at its import, when the tests were collected)", collector.path))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # The docstring examples the lane runs (--doctest-modules on src/servelab's modules with examples) are unit
    # tests by definition: they run under the same guards.
    if _vllm_loaded() and not _vllm_loader:  # by a module this conftest does not collect (src/'s examples)
        _vllm_loader.append(("a module imported at collection outside tests/", Path("<collection>")))
    for item in items:
        if isinstance(item, DoctestItem):
            item.add_marker(pytest.mark.unit)
        if _vllm_loader and _vllm_loader[0][1] == item.path and _is_unit(item):
            _vllm_module_holds_unit_tests[0] = True
    if _unit_lane(config):  # `-m unit` selects by the mark's name: the lane leaves out the tests taken out above
        out = [item for item in items if not _is_unit(item)]
        if out:
            config.hook.pytest_deselected(items=out)
            items[:] = [item for item in items if _is_unit(item)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    item.stash[_vllm_before] = loaded = _vllm_loaded()
    if loaded and _is_unit(item) and _vllm_loader and _vllm_loader[0][1] is not None:
        # A module imported vLLM at collection: no unit test after it can be checked. That module is at fault when
        # it holds unit tests, or when the run is the lane (which collects only such modules). A test that imported
        # vLLM has failed on its own; after a test outside the lane did (the full suite) nothing is left to check.
        if _unit_lane(item.config) or _vllm_module_holds_unit_tests[0]:
            pytest.fail(
                f"{item.nodeid}: a unit test runs without vLLM, but {_vllm_loader[0][0]} imported it", pytrace=False
            )
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not _is_unit(item):
        return (yield)
    if not _unit_lane(item.config):
        # The time limits hold in the lane's own run (make test-unit): in the full suite a
        # unit test shares its process with servers, kernels and threads that earlier tests started, whose CPU would
        # be charged to it. vLLM stays out of a unit test in every run.
        result = yield
        _fail_if_it_imported_vllm(item)
        return result
    cpu, wall = _cpu_s(), time.perf_counter()
    result = yield  # a failing test raises here, and fails as it is
    cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
    _fail_if_it_imported_vllm(item)
    if cpu > UNIT_CPU_S or wall > UNIT_WALL_S:
        pytest.fail(
            f"{item.nodeid} is a unit test but took {cpu:.2f} s of CPU time ({wall:.2f} s wall); the unit lane allows "
            f"{UNIT_CPU_S:g} s of CPU ({UNIT_WALL_S:g} s wall): make it faster, or take its `unit` mark off",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if _is_unit(item):
        _fail_if_it_imported_vllm(item)  # a fixture's setup or teardown
    return result


def _fail_if_it_imported_vllm(item) -> None:
    if not item.stash.get(_vllm_before, True) and _vllm_loaded():
        item.stash[_vllm_before] = True  # one failure per test
        _vllm_loader.append((item.nodeid, None))
        pytest.fail(
            f"{item.nodeid} imported vLLM: a unit test runs without it (take its `unit` mark off)", pytrace=False
        )


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_vllm_before = pytest.StashKey[bool]()
