"""The unit lane's guards (tests/conftest.py) at work: pytest runs tiny test files under a copy of the suite's
conftest, in a process of its own, with a stand-in `vllm` package on its path, and each guard must fail the test
it is there for, naming it. A guard that stops working fails here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# The limits are the conftest's own code with lower numbers, so that breaking them costs these tests a fraction of
# a second of CPU: what is checked is that the guard measures and fails, not the size of the limit.
LIMITS = "\nUNIT_CPU_S = 0.2\nUNIT_WALL_S = 1.5\n"


def _pytest(folder: Path, files: dict[str, str], *args: str) -> str:
    (folder / "conftest.py").write_text((TESTS / "conftest.py").read_text(encoding="utf-8") + LIMITS, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    unit: the unit lane\n", encoding="utf-8")
    (folder / "vllm").mkdir()
    (folder / "vllm" / "__init__.py").write_text("", encoding="utf-8")  # a stand-in: importing it is what counts
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "1000"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run.stdout + run.stderr


def _outcome(output: str, test: str) -> str:
    """The summary line -rA prints for `test` (PASSED, FAILED, ERROR ...), with its message."""
    lines = [line for line in output.splitlines() if line.split(" ", 1)[-1].startswith(test)]
    assert lines, f"no summary line for {test} in:\n{output}"
    return lines[0]


CASES = {
    "test_cases.py": """
                import subprocess, sys, time
                import pytest

                pytestmark = pytest.mark.unit

                def test_imports_vllm():
                    import vllm  # noqa: F401

                def test_computes_too_long():
                    start = time.process_time()
                    while time.process_time() - start < 0.4:
                        pass

                def test_computes_too_long_in_a_child():
                    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                                    "while time.process_time() - t < 0.4: pass"], check=True)

                def test_waits_too_long():
                    time.sleep(2)

                def test_quick():
                    pass

                @pytest.mark.skip
                def test_outside_the_lane_may_take_its_time():
                    pass
            """,
    "test_not_unit.py": """
                import time

                def test_slow_but_not_unit():
                    start = time.process_time()
                    while time.process_time() - start < 0.4:
                        pass
            """,
}


def test_each_guard_fails_the_unit_test_it_catches_and_names_it(tmp_path):
    output = _pytest(tmp_path, CASES, "-m", "unit")
    vllm = _outcome(output, "test_cases.py::test_imports_vllm")
    assert vllm.startswith("FAILED") and "test_cases.py::test_imports_vllm imported vLLM" in vllm, vllm
    for test, words in [
        ("test_computes_too_long", "of CPU time"),
        ("test_computes_too_long_in_a_child", "of CPU time"),
        ("test_waits_too_long", "s wall"),
    ]:
        line = _outcome(output, f"test_cases.py::{test}")
        assert line.startswith("FAILED") and f"test_cases.py::{test} is a unit test but took" in line, line
        assert words in line, line
    assert _outcome(output, "test_cases.py::test_quick").startswith("PASSED"), output


def test_in_the_full_suite_only_the_vllm_guard_holds(tmp_path):
    """The full suite runs unit tests beside servers and threads that earlier tests started: their time limits hold
    in the lane's own run, the vLLM guard in both."""
    output = _pytest(tmp_path, CASES)
    vllm = _outcome(output, "test_cases.py::test_imports_vllm")
    assert vllm.startswith("FAILED") and "test_cases.py::test_imports_vllm imported vLLM" in vllm, vllm
    for test in ("test_computes_too_long", "test_waits_too_long", "test_quick"):
        assert _outcome(output, f"test_cases.py::{test}").startswith("PASSED"), output
    assert _outcome(output, "test_not_unit.py::test_slow_but_not_unit").startswith("PASSED"), output


def test_the_lane_names_a_module_that_imports_vllm_and_skips_modules_without_the_mark(tmp_path):
    output = _pytest(
        tmp_path,
        {
            "test_imports_at_the_top.py": """
                import pytest
                import vllm  # noqa: F401

                pytestmark = pytest.mark.unit

                def test_here():
                    pass
            """,
            "test_innocent.py": """
                import pytest

                @pytest.mark.unit
                def test_elsewhere():
                    pass

                def test_not_in_the_lane():
                    pass
            """,
            # Not a unit module: the lane must not even import it.
            "test_heavy.py": """
                raise RuntimeError("the unit lane imported a module that holds no unit test")
            """,
        },
        "-m",
        "unit",
    )
    assert "the unit lane imported a module" not in output, output
    for test in ("test_imports_at_the_top.py::test_here", "test_innocent.py::test_elsewhere"):
        line = _outcome(output, test)
        assert line.startswith("ERROR") and "test_imports_at_the_top.py (at its import" in line, line  # at setup
    assert "test_not_in_the_lane" not in output.split("short test summary")[-1], output


@pytest.mark.unit
def test_the_lane_is_recognised_from_the_mark_expression():
    import conftest

    class Config:
        def __init__(self, expression):
            self.expression = expression

        def getoption(self, name):
            assert name == "markexpr"
            return self.expression

    assert all(conftest._unit_lane(Config(e)) for e in ["unit", "unit and not slow", "(unit)"])
    assert not any(conftest._unit_lane(Config(e)) for e in ["", "not unit", "slow", "unit or slow", "units"])
