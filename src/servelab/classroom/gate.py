"""One request, one sequence: what a class server refuses before vLLM schedules it.

The class's nginx bounds each student's requests at once (limit_conn), but one request
can ask vLLM for many sequences: a list of prompts on /v1/completions, `n` or `best_of`
above 1, beam search. Eight such requests from one key filled the engine's batch and a
classmate waited minutes for a first token. nginx cannot read JSON (Debian's nginx-light
has no njs), so the bound is in vLLM's own server, through its `--middleware` option
(vllm/entrypoints/serve/middleware/register.py: an ASGI class added to its app), which
`servelab class servers` passes to both engines:

    vllm serve ... --middleware servelab.classroom.gate.OneSequencePerRequest

A generation request's body (at most nginx's client_max_body_size, MAX_BODY here) is read
whole and parsed as vLLM parses it (json.loads: the last of a repeated key counts), then
refused with 400 when it asks for more than one sequence or more than MAX_TOKENS new
tokens. A request that names no `max_tokens` (nor `max_completion_tokens`) would run to the
end of the context (CONTEXT), holding one of its student's slots all that while: the engines
take MAX_TOKENS as their default (vLLM's --override-generation-config with max_new_tokens,
DEFAULTS here; servers.engine_bounds() gives both options to the class's and the cluster's
engines). Anything else, malformed bodies included, goes to vLLM as sent, which answers them
itself. The lab sends one chat or completion prompt per request with `max_tokens` of its
output length: at most 256 (the knobs lab's slider; the speculation lab's go to 128).

The share counts requests, so what one request costs is bounded too: its prompt is at most
MAX_PROMPT_TOKENS tokens (eight of vLLM's 1,024-token contexts filled with prompt once slowed
a classmate's first token about 4x). The prompt is counted with the served model's own
tokenizer (SERVELAB_GATE_MODEL, which `class servers` sets to the model it serves; else the
bundled model): every string in the request but its `model` (a chat's messages, a completion's
prompt; the chat template's few tokens are not counted) and a token-id prompt's length. The
tokenizer runs only where it has to, a few microseconds' worth: byte-level BPE gives every
token at least one byte, so a prompt of at most MAX_PROMPT_TOKENS bytes passes uncounted, and
one of more than PROMPT_BYTES_PER_TOKEN bytes a token (English runs about 4.5) is refused
uncounted. The course's longest prompt is 155 tokens (data/workloads/copy.jsonl; the test
tests/test_class_gate.py counts every one).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")
MAX_BODY = 256 * 1024  # also nginx's client_max_body_size in front of the engines (servers.nginx_config reads it)
CONTEXT = 1024  # prompt and output of one request: servers.CPU_ARGS gives the CPU engines this context
MAX_TOKENS = 256  # new tokens one request may ask for, and what one that names none gets: the labs' longest output
MAX_PROMPT_TOKENS = 256  # prompt tokens one request may send: the course's longest prompt is 155
PROMPT_BYTES_PER_TOKEN = 16  # a longer prompt text than this many bytes a token is refused without counting
LENGTHS = ("max_tokens", "max_completion_tokens")
DEFAULTS = json.dumps(
    {"max_new_tokens": MAX_TOKENS}, separators=(",", ":")
)  # vLLM's --override-generation-config: a request's default
ONE = {"n", "best_of"}  # each must be absent, null or 1


def problem(body: bytes) -> str | None:
    """Why a generation request is refused, or None (vLLM parses and answers everything else)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict):
        return None
    prompt = request.get("prompt")
    if isinstance(prompt, list) and not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return "one prompt per request (a list of prompts is a batch): send each as its own request"
    for key in sorted(ONE):
        if request.get(key) not in (None, 1):
            return f"`{key}` must be 1 on a class server: one sequence per request"
    if request.get("use_beam_search"):
        return "beam search asks for several sequences per request: not on a class server"
    for key in LENGTHS:
        value = request.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_TOKENS:
            return f"`{key}` is at most {MAX_TOKENS} on a class server"
    return _prompt_problem(request)


def _prompt_problem(request: dict) -> str | None:
    """Why the prompt is too long for a class server, or None. Every string in the request counts (a chat's
    messages, a completion's prompt, tools, a chat field vLLM ignores on a completion and the other way round:
    no field can carry uncounted text; only `model`, which vLLM answers with 404 unless it names the model it
    serves), and a token-id prompt by its length."""
    prompt = request.get("prompt")
    ids = len(prompt) if isinstance(prompt, list) else 0  # token ids (a list of prompts was refused above)
    texts = _strings({k: v for k, v in request.items() if k != "model"})  # a name vLLM does not serve is a 404
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if ids + size <= MAX_PROMPT_TOKENS:
        return None  # at least one byte a token: it cannot be over
    if size > MAX_PROMPT_TOKENS * PROMPT_BYTES_PER_TOKEN:
        return _over(None, f"its text is {size:,} bytes")
    encode = _tokenizer().encode
    return _over(ids + sum(len(encode(t, add_special_tokens=False)) for t in texts))


def _over(tokens: int | None, what: str = "") -> str | None:
    if tokens is not None and tokens <= MAX_PROMPT_TOKENS:
        return None
    return (
        f"a prompt is at most {MAX_PROMPT_TOKENS} tokens on a class server "
        f"({what or f'this one is {tokens}'}): send a shorter one"
    )


def _strings(value) -> list[str]:
    """Every string inside a JSON value (keys left out), however deep (no recursion: json.loads allows ~1,000 levels)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
    return found


@lru_cache(maxsize=1)
def _tokenizer():
    from transformers import AutoTokenizer

    from .. import model

    return AutoTokenizer.from_pretrained(os.environ.get("SERVELAB_GATE_MODEL") or str(model.model_dir()))


class OneSequencePerRequest:
    """ASGI middleware: a generation request that asks for more than one sequence is answered 400."""

    def __init__(self, app):
        self.app = app
        _tokenizer()  # loaded as the server starts: a model without one fails then, not at a request

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in GENERATION_PATHS:
            await self.app(scope, receive, send)
            return
        received, body = [], b""
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                await _answer(send, 413, f"a request body is at most {MAX_BODY:,} bytes")
                return
            if not message.get("more_body", False):
                break
        why = problem(body)
        if why is not None:
            await _answer(send, 400, why)
            return

        async def replay():
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)


async def _answer(send, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "BadRequestError", "code": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
