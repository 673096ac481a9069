"""Accuracy on a bundled task, for the precision knob: the short-answer questions asked once each.

Speed is half of what precision trades; this is the other half, measured on the same server
(data/tasks/short-answers.jsonl).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from .. import paths
from ..remote import run_sync

TASK = Path("tasks") / "short-answers.jsonl"


def task_items(limit: int | None = None) -> list[dict]:
    path = paths.data_dir() / TASK
    items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return items[:limit] if limit else items


def answer_match(url: str, model: str, limit: int | None = None, concurrency: int = 16, max_tokens: int = 16) -> dict:
    """Ask the bundled task's questions once each (greedy); right = the expected answer appears in the reply."""
    items = task_items(limit)

    async def ask_all():
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(300.0)) as client:

            async def ask(item):
                async with gate:
                    body = {
                        "model": model,
                        "messages": [{"role": "user", "content": item["question"]}],
                        "max_tokens": max_tokens,
                        "temperature": 0.0,
                    }
                    response = await client.post("/v1/chat/completions", json=body)
                    response.raise_for_status()
                    return response.json()["choices"][0]["message"]["content"] or ""

            return await asyncio.gather(*(ask(i) for i in items))

    replies = run_sync(ask_all())
    right = [i["answer"].lower() in reply.lower() for i, reply in zip(items, replies)]
    return {
        "task": str(TASK),
        "questions": len(items),
        "right": sum(right),
        "answer_match_rate": round(sum(right) / len(items), 4),
        "replies": replies,
    }
