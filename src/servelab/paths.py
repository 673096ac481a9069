"""Where servelab keeps what it makes: the converted model, results, logs.

SERVELAB_CACHE moves all of it (default ~/.cache/servelab). SERVELAB_RESULTS
points the results store at one file. SERVELAB_MODELS points at the models alone,
so that a class's users can share one prepared model while each keeps their own
results and logs.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# In a source checkout, data/ sits two levels above src/servelab.
REPO_DIR = PACKAGE_DIR.parent.parent
# A source checkout (its pyproject.toml two levels up), as opposed to an installed wheel.
IN_CHECKOUT = PACKAGE_DIR.parent.name == "src" and (REPO_DIR / "pyproject.toml").is_file()


def cache_dir() -> Path:
    path = Path(os.environ.get("SERVELAB_CACHE", Path.home() / ".cache" / "servelab"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    shared = os.environ.get("SERVELAB_MODELS")
    if shared:  # another user's prepared models: read them, never create them
        return Path(shared)
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_path() -> Path:
    return Path(os.environ.get("SERVELAB_RESULTS", cache_dir() / "results.jsonl"))


def logs_dir() -> Path:
    path = cache_dir() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """The project's data/ folder (workloads, configs, recorded measurements): the checkout's, or the wheel's copy."""
    env = os.environ.get("SERVELAB_DATA")
    if env:
        return Path(env)
    # An installed wheel carries data/ inside the package (setup.py ships it as servelab/data).
    shipped = PACKAGE_DIR / "data"
    return shipped if shipped.is_dir() else REPO_DIR / "data"
