"""The environment every class user's server runs: a built wheel of servelab, never the checkout.

    <state>/env/wheel/servelab-*.whl    the package, built from this checkout (pip wheel)
    <state>/env/deps/                   the heavy dependencies (vLLM, torch, JupyterLab, nbgrader, ...):
                                        this venv's site-packages without servelab, as hard links
    <state>/env/venv/                   a venv of the base Python: the wheel installed in it (not editable),
                                        deps/ added as a site folder by a .pth file, Jupyter's share/ and etc/

The checkout holds the keys, the instructor notebooks and the sample submissions, so
class users must never need it: nothing here points into it. The wheel leaves out the package's
instructor-only files too (INSTRUCTOR_ONLY: servelab/grading/keys.py, a solver for any student's numbers),
so neither a student's kernel nor a grading sandbox that mounts this package can import them. The venv's base Python is
one every user can run without any folder being opened (`open_python`): this venv's
own where every folder above it lets others through, else the system's Python of the
same version (a pyenv Python under /root, mode 700, is not opened for the class). Hard links cost no disk and
about 4 s for this venv's 4 GB (bench: `python -m servelab.classroom.studentenv --time`);
where the state is on another filesystem they become copies. Every file stays as this
venv has it (readable by all); the folders are made readable by all, the checkout is not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from ..launch import install_lab_settings
from ..paths import IN_CHECKOUT, REPO_DIR
from .errors import ClassError

# What of this venv's site-packages the student env must not see: the checkout's own editable install.
EDITABLE = ("servelab", "__editable__")
JUPYTER_DIRS = ("share/jupyter", "etc/jupyter")  # lab extensions (nbgrader, widgets, plotly), server config


def _link_tree(src: Path, dst: Path, skip=lambda name: False) -> None:
    """dst as a hard-linked copy of src (a copy where linking fails: another filesystem)."""

    def copy(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(
        src,
        dst,
        symlinks=True,
        copy_function=copy,
        ignore=lambda folder, names: [n for n in names if Path(folder) == src and skip(n)],
    )


# The checkout's top-level folders a wheel is not built from (the course folder, venvs, outputs).
NOT_FOR_THE_WHEEL = (
    ".venv",
    ".venv-quantize",
    ".git",
    ".class",
    "grading",
    "solutions",
    "tests",
    "bench",
    "build",
    "dist",
    "test-artifacts",
)


# The package's files the wheel's copy leaves out, as the instructor's alone: the keys module computes the answer
# and its slips for any numbers, a solver for each student's own warm-ups (servelab.variants), so only the checkout
# has it (the instructors' venv, its editable install, and the grader's trusted process that loads grading/keys/).
INSTRUCTOR_ONLY = ("src/servelab/grading/keys.py",)


def _not_for_the_wheel(folder: str, names: list[str]) -> list[str]:
    top = Path(folder) == REPO_DIR
    here = Path(folder).relative_to(REPO_DIR)
    return [
        n
        for n in names
        if (top and n in NOT_FOR_THE_WHEEL)
        or (here / n).as_posix() in INSTRUCTOR_ONLY
        or n == "__pycache__"
        or n.endswith(".egg-info")
    ]


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def build_wheel(out: Path) -> Path:
    """A wheel of this checkout, built by pip with this venv's setuptools (no network)."""
    if not IN_CHECKOUT:
        raise ClassError(
            "The class's student environment is built from a servelab checkout; this servelab is "
            f"installed at {REPO_DIR}. Run `servelab class up` from the checkout's .venv."
        )
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="servelab-wheel-") as tmp:
        # Build from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
        src = Path(tmp) / "servelab"
        shutil.copytree(REPO_DIR, src, ignore=_not_for_the_wheel)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    wheels = list(out.glob("servelab-*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        raise ClassError(f"Building servelab's wheel for the students failed:\n{result.stderr[-2000:]}")
    return wheels[0]


def _new_venv(venv: Path) -> tuple[Path, Path]:
    """A fresh venv of `open_python()` at `venv` (any old one removed), without pip: its Python and its site folder."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [open_python(), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True, timeout=300
    )
    python = _python(venv)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return python, Path(purelib)


def build(state: Path) -> tuple[Path, Path]:
    """Make <state>/env; return the Python every student's server runs and the servelab it installed."""
    env = Path(state) / "env"
    env.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(env / "wheel")
    site = Path(sysconfig.get_paths()["purelib"])
    _link_tree(site, env / "deps", skip=lambda name: name.startswith(EDITABLE) or name == "__pycache__")
    venv = env / "venv"
    python, purelib = _new_venv(venv)
    # `import site; site.addsitedir(...)`: deps/ is a site folder, so its own .pth files work as in this venv.
    (purelib / "zz-servelab-deps.pth").write_text(f"import site; site.addsitedir({str(env / 'deps')!r})\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--force-reinstall",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise ClassError(f"Installing servelab's wheel into the students' environment failed:\n{result.stderr[-2000:]}")
    for folder in JUPYTER_DIRS:
        if (Path(sys.prefix) / folder).is_dir():
            _link_tree(Path(sys.prefix) / folder, venv / folder)
    install_lab_settings(venv)  # JupyterLab's news question off for every student (servelab.launch.LAB_SETTINGS)
    for folder, dirs, _files in os.walk(env):
        for d in [folder, *[os.path.join(folder, x) for x in dirs]]:
            os.chmod(d, os.stat(d).st_mode | 0o555)
    return python, purelib / "servelab"


def _closed(path: Path) -> list[Path]:
    """The folders above `path` that other users cannot pass through (no o+x)."""
    return [p for p in Path(path).parents if not os.stat(p).st_mode & 0o001]


def open_python() -> str:
    """A base Python of this venv's version that every user can run without any folder being opened.

    This venv's own base Python when every folder above it lets other users through; else the system's
    Python of the same version (Debian's /usr/bin/python3.X: the wheels of this venv are built for the
    version, not for one build of it); else ClassError naming the closed folder. Nothing is chmodded.
    """
    base = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    closed = _closed(base)
    if not closed:
        return str(base)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(f"/usr/bin/python{version}"), Path(f"/usr/local/bin/python{version}")):
        real = Path(os.path.realpath(candidate))
        if real.is_file() and os.access(real, os.X_OK) and not _closed(real):
            return str(real)
    raise ClassError(
        f"Class users cannot run this venv's Python ({base}): {closed[-1]} is closed to other users, and "
        f"there is no Python {version} outside it (/usr/bin/python{version}). Install one every user can run "
        f"(Debian: apt-get install python{version} python{version}-venv) or build the venv from one; servelab does "
        f"not open {closed[-1]}."
    )


def _sh_preamble(python: str) -> bytes:
    """pip's start of a console script whose Python's path holds a space (a shebang cannot quote one)."""
    return f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n".encode()


def _script_body(data: bytes, bin_dir: Path) -> bytes | None:
    """The Python body of a console script that a Python in `bin_dir` starts, or None for any other file: pip
    writes `#!<bin_dir>/python` or, where that path holds a space, a /bin/sh preamble that execs it."""
    first, _, rest = data.partition(b"\n")
    if first.startswith(f"#!{bin_dir}/python".encode()):
        return rest
    second, _, after = rest.partition(b"\n")
    third, _, body = after.partition(b"\n")
    if first == b"#!/bin/sh" and second.startswith(f"'''exec' \"{bin_dir}/python".encode()) and third == b"' '''":
        return body
    return None


def _shebang(python: Path) -> bytes:
    return _sh_preamble(str(python)) if " " in str(python) else f"#!{python}\n".encode()


def build_instructor(state: Path) -> Path:
    """<state>/env/instructor: a venv of `open_python()` that sees this venv's packages (the checkout's
    editable servelab included) through a .pth file, so an instructor runs the course's own code, with its
    keys, without opening the folder this venv's base Python lives in. Returns its Python."""
    venv = Path(state) / "env" / "instructor"
    python, purelib = _new_venv(venv)
    site = Path(sysconfig.get_paths()["purelib"])
    (purelib / "zz-servelab-checkout.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    # This venv's console scripts (alembic, which nbgrader runs; jupyter; nbgrader), started by this Python.
    here = Path(sys.prefix) / "bin"
    for script in here.iterdir():
        if script.name.startswith(("python", "activate", "pip")) or not script.is_file():
            continue
        body = _script_body(script.read_bytes(), here)
        if body is not None:
            target = venv / "bin" / script.name
            target.write_bytes(_shebang(python) + body)
            target.chmod(0o755)
    for folder in JUPYTER_DIRS:
        if (Path(sys.prefix) / folder).is_dir():
            _link_tree(Path(sys.prefix) / folder, venv / folder)
    install_lab_settings(venv)
    for folder, dirs, _files in os.walk(venv):
        for d in [folder, *[os.path.join(folder, x) for x in dirs]]:
            os.chmod(d, os.stat(d).st_mode | 0o555)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.classroom.studentenv", description=__doc__.split("\n")[0])
    parser.add_argument("state", type=Path, help="the class's state folder (the env goes to STATE/env)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    python, package = build(args.state)
    print(f"{python}, servelab in {package} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
