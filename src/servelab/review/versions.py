"""Which vLLM a config runs: the release its own text pins, else the one the flag list is from.

A deployment says its vLLM in one of three ways, read here without running anything:

- the container image's tag: `vllm/vllm-openai:v0.10.0`, or another registry's build of that
  image (AIBrix's `.../aibrix/vllm-openai:v0.7.3.self.post1`) (Docker Hub's tags are the release
  names with a `v`; `latest`, `nightly` and a digest pin no release, and are read as none), or
  AWS's vLLM container, `.../vllm:0.11.2-sagemaker-v1.2` (its tags lead with the vLLM release),
  or AMD's ROCm build, `rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006` (the release after `_vllm_`);
  in a compose file, a manifest or Helm values, the image of the service or container reviewed;
- a pip pin: `vllm==0.10.0` (in a `pip install` line, a requirements list or a Dockerfile);
- `servelab review --var VLLM_VERSION=0.10.0`, or a `VLLM_VERSION=...` the file assigns.

Where none says, the config is judged as vLLM 0.32.0, the release review/vllm_flags.json was
taken from, and the report says so. A config pinned to an older vLLM is judged as that release:
a flag it dropped later (vllm_flags.REMOVAL_TABLE) is not a finding there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import vllm_flags

_RELEASE = r"v?(\d+\.\d+(?:\.\d+)*(?:(?:rc|\.post)\d+)?)"
_IMAGE = re.compile(r"\b(?:[\w.-]+/)*vllm-openai(?:-rocm)?:" + _RELEASE)  # any registry's build of it
# AWS's vLLM containers: deep-learning-containers/vllm:0.11.2-gpu-..., or a private copy .../vllm:0.11.2-sagemaker-...
_AWS_IMAGE = re.compile(r"(?<=/)vllm:" + _RELEASE + r"(?=-)")
# AMD's ROCm builds: rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006 (ROCm, then vLLM, then the build date)
_ROCM_IMAGE = re.compile(r"\b(?:[\w.-]+/)*vllm(?:-dev)?:[\w.-]*?_vllm_" + _RELEASE + r"(?![\d.])")
_IMAGES = ((_IMAGE, "the image tag"), (_AWS_IMAGE, "the image tag"), (_ROCM_IMAGE, "the image tag"))
_PIP = re.compile(r"(?<![\w-])vllm(?:\[[\w,]+\])?\s*==\s*" + _RELEASE)
_ASSIGNED = re.compile(r"^\s*(?:export\s+|ENV\s+|ARG\s+)?VLLM_VERSION[=\s]\s*[\"']?" + _RELEASE, re.M)


@dataclass(frozen=True)
class Judged:
    """The vLLM release a review judges against, and what said so."""

    version: str
    source: str  # "the image tag vllm/vllm-openai:v0.10.0 (line 3)", or why the default


def default() -> Judged:
    return Judged(
        vllm_flags.version(),
        "the config names no vLLM version, so the release servelab's flag list is from "
        "(--var VLLM_VERSION=X judges another)",
    )


def detect(text: str, variables: dict[str, str] | None = None, image: tuple[str, int | None] | None = None) -> Judged:
    """The release the text pins (the first found: --var, then image tag, pip pin, assignment).

    `image` is the image of the service or container the review reads (a compose service's
    `image`, a manifest container's, a Helm chart's repository:tag), with its line: its tag is the
    release, not the first tag anywhere in the file (another service's). An image that pins no
    release (`latest`) leaves the pip pin and VLLM_VERSION to say."""
    given = (variables or {}).get("VLLM_VERSION")
    if given:
        try:
            vllm_flags.release_key(given)
        except ValueError:
            raise ValueError(f"--var VLLM_VERSION={given}: write a vLLM release, such as 0.10.0") from None
        return Judged(given.lstrip("vV"), f"--var VLLM_VERSION={given}")
    if image is not None:
        image_text, line = image
        for pattern, what in _IMAGES:
            match = pattern.search(image_text)
            if match:
                where = f" (line {line})" if line else ""
                return Judged(match.group(1), f"{what} {image_text.strip()}{where}")
    found = (*(_IMAGES if image is None else ()), (_PIP, "the pip pin"), (_ASSIGNED, "VLLM_VERSION"))
    for pattern, what in found:
        match = pattern.search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            written = re.match(r"[^\s'\"]+", text[match.start() :])  # the whole tag, suffix and all
            shown = written.group(0) if written else match.group(0).strip()
            return Judged(match.group(1), f"{what} {shown} (line {line})")
    return default()
