"""The class's two shared vLLM servers: one without speculation, one with n-gram speculation.

Both serve the same model with prefix caching off (every lab point sends the
same prompts; a cached prefill would make later points look faster). The lab's
remote backend takes their URLs: the hub hands them to every student as
SERVELAB_REMOTE_OFF_URL and SERVELAB_REMOTE_ON_URL.

On this CPU the bundled SmolLM2-135M-Instruct runs in float32, eager, with 1 GiB
of KV cache each; on a GPU machine pass a hub id or folder and vLLM's own
defaults apply (add --gpu-memory-utilization 0.45 to put both on one GPU).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..server import ServerError, VllmServer
from .errors import ClassError, require_port

OFF_PORT, ON_PORT = 8100, 8101
NGRAM_K = 4  # num_speculative_tokens on the speculating server
CPU_ARGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "1024", "--kv-cache-memory-bytes", str(1 << 30)]


def speculative_config(k: int = NGRAM_K) -> str:
    return json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4})


@dataclass
class ClassServers:
    """The pair, started together; `urls` is what the hub hands the lab."""

    model: str = ""  # "" = the bundled model on this CPU; else a folder or hub id
    off_port: int = OFF_PORT
    on_port: int = ON_PORT
    k: int = NGRAM_K
    extra_args: tuple[str, ...] = ()
    log_dir: Path | None = None

    def __post_init__(self):
        args = list(self.extra_args) + ["--no-enable-prefix-caching"]
        if not self.model:
            args = CPU_ARGS + args
        logs = (
            {} if self.log_dir is None else {"off": self.log_dir / "vllm-off.log", "on": self.log_dir / "vllm-on.log"}
        )
        self.off = VllmServer(
            args, model=self.model or None, port=self.off_port, name="class-off", log_path=logs.get("off")
        )
        self.on = VllmServer(
            args + ["--speculative-config", speculative_config(self.k)],
            model=self.model or None,
            port=self.on_port,
            name="class-on",
            log_path=logs.get("on"),
        )

    @property
    def urls(self) -> dict[str, str]:
        return {"off": self.off.url, "on": self.on.url}

    def start(self, timeout_s: float = 600) -> dict[str, float]:
        """Start both, wait until both answer /v1/models; seconds each took. Stops both if either fails."""
        require_port(self.off_port, "server without speculation", "--off-port")
        require_port(self.on_port, "server with speculation", "--on-port")
        self.off.start()
        self.on.start()
        try:
            return {"off": self.off.wait_ready(timeout_s), "on": self.on.wait_ready(timeout_s)}
        except ServerError as exc:
            self.stop()
            raise ClassError(str(exc)) from exc

    def stop(self) -> None:
        self.off.stop()
        self.on.stop()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
