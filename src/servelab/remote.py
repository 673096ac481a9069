"""Measure a remote OpenAI-compatible `vllm serve`, as a class on a hub shares one GPU server.

The lab's batch size becomes concurrency here: batch_size streamed requests are
kept in flight at once (vLLM's `--max-concurrency` in its serving benchmark),
until at least min_requests have finished. Timings come from the stream, with
vLLM's benchmark definitions:

    TTFT = time from sending a request to its first streamed token
    TPOT = (latency - TTFT) / (output_tokens - 1)   per request
    ITL  = time between successive streamed chunks

Acceptance comes from the server's /metrics (Prometheus text):
vllm:spec_decode_num_accepted_tokens / vllm:spec_decode_num_draft_tokens,
the difference of the counters before and after the point. Those counters are
server-wide: on a shared server, other people's requests count too.

Every point is the same flat Measurement record the local engine produces, with
backend="remote" and the URL in engine_config. A URL that refuses, times out or
answers with an error raises RemoteError that says which, after how long, and
what to check.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from .cpu_usage import machine_fingerprint
from .measurement import (
    MIN_REQUESTS,
    Measurement,
    latency_fields,
    percentile,
    speculation_fields,
    stamped,
    throughput_fields,
)
from .metrics import parse_prometheus, spec_counters
from .workload import PromptSet, load

DEFAULT_TIMEOUT_S = 30.0  # connect, and the longest wait for the next streamed chunk


class RemoteError(RuntimeError):
    """The server could not be reached or answered with an error; the message says what to check."""


@dataclass
class RequestTiming:
    """One streamed request, timed from the client."""

    ttft_s: float
    latency_s: float
    output_tokens: int
    prompt_tokens: int
    itl_s: list[float] = field(default_factory=list)
    text: str = ""

    @property
    def tpot_s(self) -> float | None:
        if self.output_tokens <= 1:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass
class RemoteServer:
    """One `vllm serve` URL and what it was started with (the server cannot tell us its speculation)."""

    url: str
    method: str = "none"  # how the server speculates, as it was started: none | ngram | draft_model | eagle ...
    num_speculative_tokens: int = 0  # k it was started with
    hardware: str = ""  # e.g. "H100": lets the roofline simulator judge its records
    model: str = ""  # the served model id; "" = the first one /v1/models lists
    timeout_s: float = DEFAULT_TIMEOUT_S
    # The class's servers want each student's own key; the hub puts it in SERVELAB_REMOTE_API_KEY.
    api_key: str = field(default_factory=lambda: os.environ.get("SERVELAB_REMOTE_API_KEY", ""))

    def __post_init__(self):
        self.url = normalize_url(self.url)
        self._info: dict | None = None

    # --- what a router and the lab need -----------------------------------------------
    @property
    def config(self):
        return None  # no EngineConfig: Router describes a remote target with describe()

    def describe(self) -> dict:
        return {
            "url": self.url,
            "method": self.method,
            "num_speculative_tokens": self.num_speculative_tokens,
            "hardware": self.hardware,
            "server": "vllm serve",
        }

    def measure(
        self,
        workload: PromptSet | str,
        batch_size: int,
        output_len: int = 64,
        note: str = "",
        min_requests: int = MIN_REQUESTS,
    ) -> Measurement:
        """Measure one point (blocking). Safe to call from a notebook cell, whose event loop is already running."""
        return run_sync(self.ameasure(workload, batch_size, output_len, note, min_requests))

    def info(self) -> dict:
        """The served model and vLLM version (blocking); raises RemoteError when the server does not answer."""
        return run_sync(self.ainfo())

    # --- async API ----------------------------------------------------------------------
    def _client(self, connections: int = 8):
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s),
            limits=httpx.Limits(max_connections=connections + 2),
        )

    async def ainfo(self, client=None) -> dict:
        if self._info is not None:
            return self._info
        own = client is None
        client = client or self._client()
        try:
            models = await self._get_json(client, "/v1/models")
            ids = [m["id"] for m in models.get("data", []) if isinstance(m, dict) and isinstance(m.get("id"), str)]
            if not ids:
                raise RemoteError(f"{self.url}/v1/models lists no model: is this a vLLM server with a model loaded?")
            model = self.model or ids[0]
            if self.model and self.model not in ids:
                raise RemoteError(
                    f"{self.url} serves {', '.join(ids)}, not {self.model!r}: "
                    "set model to one of those, or leave it empty."
                )
            try:
                version = (await self._get_json(client, "/version")).get("version", "")
            except RemoteError:
                version = ""  # an OpenAI-compatible server that is not vLLM has no /version
            self._info = {"model": model, "vllm_version": version}
            return self._info
        finally:
            if own:
                await client.aclose()

    async def ametrics(self, client) -> dict[str, float] | None:
        """The server's Prometheus counters, or None when it has no /metrics."""
        try:
            response = await self._request(client, "GET", "/metrics")
        except RemoteError:
            return None
        return parse_prometheus(response.text)

    async def ameasure(
        self,
        workload: PromptSet | str,
        batch_size: int,
        output_len: int = 64,
        note: str = "",
        min_requests: int = MIN_REQUESTS,
    ) -> Measurement:
        """Keep batch_size streamed requests in flight until max(batch_size, min_requests) finish."""
        if batch_size < 1:
            raise ValueError(f"batch_size (concurrency) must be at least 1, not {batch_size}.")
        wl = load(workload) if isinstance(workload, str) else workload
        total = batch_size * max(1, math.ceil(min_requests / batch_size))
        prompts = wl.batch(total)
        async with self._client(batch_size) as client:
            info = await self.ainfo(client)
            before = await self.ametrics(client)
            t0 = time.perf_counter()
            timings = await self._stream_all(client, info["model"], prompts, batch_size, output_len)
            elapsed = time.perf_counter() - t0
            after = await self.ametrics(client)
        counters = None
        if before is not None and after is not None:
            b, a = spec_counters(before), spec_counters(after)
            counters = {k: a[k] - b[k] for k in a}
        return self._record(timings, elapsed, counters, info, wl.name, batch_size, output_len, note)

    async def astream(self, prompts: list[str], output_len: int = 64) -> list[RequestTiming]:
        """All the prompts in flight at once, each streamed; every request's timings (nothing recorded)."""
        async with self._client(len(prompts)) as client:
            info = await self.ainfo(client)
            return await self._stream_all(client, info["model"], prompts, len(prompts), output_len)

    async def _stream_all(
        self, client, model: str, prompts: list[str], concurrency: int, output_len: int
    ) -> list[RequestTiming]:
        """Stream every prompt, at most `concurrency` in flight; on any failure the rest are cancelled."""
        gate = asyncio.Semaphore(concurrency)

        async def one(prompt: str) -> RequestTiming:
            async with gate:
                return await self._stream(client, model, prompt, output_len)

        tasks = [asyncio.ensure_future(one(p)) for p in prompts]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    # --- one streamed request -----------------------------------------------------------
    async def _stream(self, client, model: str, prompt: str, output_len: int) -> RequestTiming:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": output_len,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }  # vLLM's extra parameter: every request produces exactly output_len tokens
        start = time.perf_counter()
        first = last = None
        itl: list[float] = []
        chunks, text, usage = 0, [], None
        try:
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._status_error("POST /v1/chat/completions", response)
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        # keep-alive comments are not progress: a server that sends only those has stalled
                        if time.perf_counter() - (last or start) > self.timeout_s:
                            raise RemoteError(
                                f"{self.url} did not stream a token within {self.timeout_s:g} s (it sent only "
                                "keep-alives). The server may be stuck or overloaded; check its log, or raise timeout_s."
                            )
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError:
                        raise RemoteError(f"{self.url} streamed something that is not JSON: {data[:120]!r}") from None
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content") or ""
                        if piece:
                            now = time.perf_counter()
                            if first is None:
                                first = now
                            elif last is not None:  # always, once the first token came
                                itl.append(now - last)
                            last = now
                            chunks += 1
                            text.append(piece)
        except httpx.HTTPError as exc:
            raise self._transport_error("POST /v1/chat/completions", exc) from None
        end = time.perf_counter()
        if first is None:
            raise RemoteError(
                f"{self.url} finished a request without streaming a single token: "
                "check the server log (max_tokens, context length)."
            )
        out = int(usage.get("completion_tokens", chunks)) if usage else chunks
        prompt_tokens = int(usage.get("prompt_tokens", 0)) if usage else 0
        return RequestTiming(
            ttft_s=first - start,
            latency_s=end - start,
            output_tokens=out,
            prompt_tokens=prompt_tokens,
            itl_s=itl,
            text="".join(text),
        )

    # --- records --------------------------------------------------------------------------
    def _record(
        self,
        timings: list[RequestTiming],
        elapsed: float,
        counters: dict | None,
        info: dict,
        workload: str,
        batch_size: int,
        output_len: int,
        note: str,
    ) -> Measurement:
        out_tokens = sum(t.output_tokens for t in timings)
        ttft = [t.ttft_s * 1000 for t in timings]
        tpot = [t.tpot_s * 1000 for t in timings if t.tpot_s is not None]
        itl = [x * 1000 for t in timings for x in t.itl_s]
        speculative = self.method != "none"
        drafts = counters.get("num_drafts", 0) if counters else 0
        proposed = counters.get("num_draft_tokens", 0) if counters else 0
        accepted = counters.get("num_accepted_tokens", 0) if counters else 0
        known = speculative and counters is not None
        itl_note = f"ITL p50 {percentile(itl, 50):.1f} ms" if itl else "no ITL (single chunks)"
        where = f"remote vllm serve at {self.url}, {batch_size} requests in flight, {itl_note}"
        if speculative:
            where += (
                "; acceptance from the server's /metrics (server-wide counters)"
                if counters is not None
                else "; the server has no /metrics, so acceptance is unknown"
            )
        return stamped(
            method=self.method,
            num_speculative_tokens=self.num_speculative_tokens if speculative else 0,
            batch_size=batch_size,
            workload=workload,
            output_len=output_len,
            num_requests=len(timings),
            prompt_tokens=sum(t.prompt_tokens for t in timings),
            output_tokens=out_tokens,
            **throughput_fields(out_tokens, len(timings), elapsed),
            **latency_fields(ttft, tpot),
            **speculation_fields(known, drafts, proposed, accepted),
            backend="remote",
            model=info["model"].rstrip("/").rsplit("/", 1)[-1],
            dtype="",
            enforce_eager=False,  # vllm serve's default: compiled, CUDA graphs
            hardware=self.hardware or f"remote {urlsplit(self.url).netloc}",
            vllm_version=info.get("vllm_version", ""),
            engine_config=self.describe(),
            machine=machine_fingerprint(self.hardware or f"remote {urlsplit(self.url).netloc}", 0),
            note=f"{note}; {where}" if note else where,
        )

    # --- plumbing: every failure becomes a RemoteError that says what to check -------------
    async def _get_json(self, client, path: str) -> dict:
        response = await self._request(client, "GET", path)
        try:
            return response.json()
        except ValueError:
            raise RemoteError(
                f"{self.url}{path} did not answer with JSON: is this an OpenAI-compatible vLLM server?"
            ) from None

    async def _request(self, client, method: str, path: str):
        try:
            response = await client.request(method, path)
        except httpx.HTTPError as exc:
            raise self._transport_error(f"{method} {path}", exc) from None
        if response.status_code >= 400:
            raise self._status_error(f"{method} {path}", response)
        return response

    def _transport_error(self, what: str, exc) -> RemoteError:
        if isinstance(exc, httpx.ConnectTimeout):
            return RemoteError(
                f"{self.url} did not accept a connection within {self.timeout_s:g} s ({what}). "
                "Check the host and port, and that the server is up."
            )
        if isinstance(exc, httpx.TimeoutException):
            return RemoteError(
                f"{self.url} did not answer within {self.timeout_s:g} s ({what}). The server may "
                "be overloaded or still loading its model; try again, or raise timeout_s."
            )
        if isinstance(exc, httpx.ConnectError):
            return RemoteError(
                f"{self.url} refused the connection ({what}): nothing is listening there. "
                "Check the URL and port, and that `vllm serve` is running."
            )
        return RemoteError(
            f"{self.url}: {what} failed ({type(exc).__name__}: {exc}). Check the URL and the server's log."
        )

    def _status_error(self, what: str, response) -> RemoteError:
        try:
            body = response.text.strip().replace("\n", " ")
        except Exception:  # noqa: BLE001 - a body that cannot be decoded says nothing more
            body = ""
        if response.status_code == 401:
            return RemoteError(
                f"{self.url} refused {what} without a valid key (HTTP 401): a class's server needs your own "
                "key, which the hub sets as SERVELAB_REMOTE_API_KEY in your lab; restart your server from the "
                "hub's control panel, or ask the instructor."
            )
        if response.status_code == 429:
            return RemoteError(
                f"{self.url} refused {what}: over your share of this shared server (HTTP 429"
                + (f": {body[:300]}" if body else "")
                + "). Measure at a smaller batch size, or wait for your other requests to finish."
            )
        return RemoteError(
            f"{self.url} answered {what} with HTTP {response.status_code}"
            + (f": {body[:200]}" if body else "")
            + ". Check the server's log; the URL must point at the server root "
            "(http://host:port), not at /v1."
        )


def normalize_url(url: str) -> str:
    """'localhost:8000/v1/' -> 'http://localhost:8000': the server root every path is joined to."""
    url = (url or "").strip()
    if not url:
        raise RemoteError("No server URL given: enter the URL of a running `vllm serve`, like http://host:8000.")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"{url!r} is not an http(s) URL of a server: use the form http://host:8000.")
    return url


def run_sync(coro):
    """Run a coroutine to completion from sync code, even where an event loop already runs (a notebook cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="servelab-remote", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
