"""A folder with a size of its own: an ext4 image loop-mounted on it, so one user filling it fills nothing else.

The class gives each student two such folders (as root, in `servelab class up`):

    <state>/exchange/<course>/inbound/<student>/   INBOUND_CAP_MIB, nosuid,nodev,noexec (servelab.classroom.exchange)
    the student's home folder                      Limits.home_mib, nosuid,nodev (servelab.classroom.hub)

Each image is a sparse file under the class's state folder (root's, 0700); `cap` records the mount in
the class's journal before it is made (journal "mount"), so `servelab class down`, or the next
`class up` after a crash, unmounts it. The image stays: it holds what the student wrote there, and
the next `class up` mounts it again. A machine that cannot loop-mount (a container without loop
devices, no mkfs.ext4) gets the reason back, and the folder stays as it was.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def cap(
    folder: Path,
    image: Path,
    mib: int,
    options: str = "nosuid,nodev,noexec",
    seed: Path | None = None,
    record=lambda kind, **what: None,
) -> str:
    """Mount an ext4 of `mib` MiB (the image, made when missing) on `folder`; "" when done, else why not.

    `seed`: a folder whose contents (owners and modes kept) a new image starts with (mkfs.ext4 -d),
    such as the home folder the image is mounted over. A folder that is already a mount point is
    left as it is ("" only when it is this image's mount)."""
    folder, image = Path(folder), Path(image)
    if os.path.ismount(folder):
        return "" if _mounted_from(folder, image) else f"{folder} is already a file system of its own; left as it is"
    made = not image.exists()
    if made:
        with open(image, "wb") as f:
            f.truncate(mib * 2**20)
        image.chmod(0o600)
        mkfs = ["mkfs.ext4", "-q", "-F", "-m", "0"] + (["-d", str(seed)] if seed is not None else []) + [str(image)]
        try:
            done = subprocess.run(mkfs, capture_output=True, text=True)
        except FileNotFoundError:
            image.unlink()
            return "mkfs.ext4 is not installed (Debian: e2fsprogs)"
        if done.returncode != 0:
            image.unlink()
            said = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            if seed is not None and any(w in done.stderr.lower() for w in ("allocate", "space", "inode")):
                return f"what {seed} holds does not fit in {mib} MiB (mkfs.ext4: {said[0]})"
            return f"mkfs.ext4 failed: {said[0]}"
    record("mount", path=str(folder))  # written down before the mount: class down finds it after a crash
    mounted = subprocess.run(
        ["mount", "-o", f"loop,{options}", str(image), str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        return f"this machine cannot loop-mount ({mounted.stderr.strip()[-200:] or 'mount failed'})"
    lost = folder / "lost+found"
    if lost.is_dir() and not any(lost.iterdir()):
        lost.rmdir()
    return ""


def _mounted_from(folder: Path, image: Path) -> bool:
    """Whether `folder` is the mount of `image` (a loop device whose backing file it is)."""
    target = str(Path(folder).resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == target:
            source = line.split(" - ", 1)[1].split()[1] if " - " in line else ""
            backing = Path("/sys/block", Path(source).name, "loop", "backing_file")
            try:
                return backing.read_text().strip() == str(Path(image).resolve())
            except OSError:
                return False
    return False


def _unescape(path: str) -> str:
    """mountinfo's octal escapes (space, tab, newline, backslash) undone."""
    return path.encode().decode("unicode_escape") if "\\" in path else path


def unmount(path: str) -> None:
    """Unmount a capped folder (lazily when something still has it open)."""
    if os.path.ismount(path):
        if subprocess.run(["umount", path], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", path], capture_output=True)
