"""`servelab class servers`: the class's two vLLM servers start, answer, and serve the lab's remote backend."""

from __future__ import annotations

import socket

import pytest

from servelab.classroom import ClassError, load
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


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    from servelab import model

    if not (model.model_dir() / "config.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    with ClassServers(off_port=free_port(), on_port=free_port(), log_dir=tmp_path_factory.mktemp("vllm")) as pair:
        yield pair


def test_both_servers_answer_and_the_lab_measures_a_point_on_each(servers):
    off = RemoteServer(servers.urls["off"], timeout_s=120)
    on = RemoteServer(servers.urls["on"], method="ngram", num_speculative_tokens=4, timeout_s=120)
    assert off.info()["model"] == on.info()["model"]
    plain, spec = off.measure("copy", 1, 16, min_requests=1), on.measure("copy", 1, 16, min_requests=1)
    assert plain.num_draft_tokens in (None, 0) and spec.num_draft_tokens > 0  # only one speculates
    for server in (servers.off, servers.on):  # vLLM's own account of how it was started
        assert "enable_prefix_caching=False" in server.log_path.read_text(errors="replace")
    assert plain.output_tokens == spec.output_tokens == 16


def test_the_servers_batch_is_the_class_s(servers):
    """A few students at the batch-1 and batch-2 sliders put more requests in the server's batch than one."""
    url = {"off": servers.urls["off"]}
    alone = load.run_class(url, 1, batch_sizes=(1, 2), timeout_s=120)
    together = load.run_class(url, 4, batch_sizes=(1, 2), timeout_s=120)
    for run, students in ((alone, 1), (together, 4)):
        assert [s["requests"] for s in run["per_student"]] == [3] * students  # nobody's point was lost
        assert run["servers"]["off"]["requests"] == 3 * students
    alone_batch = alone["servers"]["off"]["num_requests_running_peak"]
    together_batch = together["servers"]["off"]["num_requests_running_peak"]
    assert 1 <= alone_batch <= 2  # one student: the slider is the batch
    assert together_batch > 2, together  # four students: the batch is the class's
