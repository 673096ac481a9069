"""`servelab class servers`: the class's two vLLM servers start, answer, and serve the lab's remote backend."""

from __future__ import annotations

import socket

import pytest

from servelab.classroom import ClassError
from servelab.classroom.servers import ClassServers
from servelab.remote import RemoteServer

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_taken_port_is_refused_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        servers = ClassServers(off_port=taken.getsockname()[1], on_port=free_port())
        with pytest.raises(ClassError, match="--off-port"):
            servers.start()
        assert servers.off.proc is None and servers.on.proc is None


def test_both_servers_answer_and_the_lab_measures_a_point_on_each(tmp_path):
    from servelab import model

    if not (model.model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    with ClassServers(off_port=free_port(), on_port=free_port(), log_dir=tmp_path) as servers:
        off = RemoteServer(servers.urls["off"], timeout_s=120)
        on = RemoteServer(servers.urls["on"], method="ngram", num_speculative_tokens=4, timeout_s=120)
        assert off.info()["model"] == on.info()["model"]
        plain, spec = off.measure("copy", 1, 16, min_requests=1), on.measure("copy", 1, 16, min_requests=1)
        assert plain.num_draft_tokens in (None, 0) and spec.num_draft_tokens > 0  # only one speculates
        for server in (servers.off, servers.on):  # vLLM's own account of how it was started
            assert "enable_prefix_caching=False" in server.log_path.read_text(errors="replace")
        assert plain.output_tokens == spec.output_tokens == 16
