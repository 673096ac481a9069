"""What one request to a class server may cost: its prompt's tokens (servelab.classroom.gate).

The share counts a student's requests; the gate bounds what each may ask of the engine, the prompt among it,
counted with the served model's own tokenizer. The course's own prompts pass; a long one is refused, wherever in
the request its text sits.
"""

from __future__ import annotations

import json
import random

import pytest

from servelab import model, workload
from servelab.classroom import gate

CAP = gate.MAX_PROMPT_TOKENS


@pytest.fixture(scope="module")
def tokenizer():
    if not (model.model_dir() / "tokenizer.json").is_file():
        pytest.skip("the bundled model is not prepared: run `servelab prepare-model`")
    return gate._tokenizer()


def chat(text: str, **more) -> bytes:
    """A request as the lab sends one (servelab.remote)."""
    served = str(model.model_dir())  # the servers' model name is its path: long, and not counted
    body = {"model": served, "messages": [{"role": "user", "content": text}], "max_tokens": 256, "stream": True}
    return json.dumps({**body, **more}).encode()


def words(tokenizer, n: int) -> str:
    """English-like text of exactly n tokens."""
    text, vocabulary = "", "the engine batches each request of the class and measures its first token".split()
    rng = random.Random(n)
    while len(tokenizer.encode(text, add_special_tokens=False)) < n:
        text += " " + rng.choice(vocabulary)
    while len(tokenizer.encode(text, add_special_tokens=False)) > n:
        text = text[:-1]
    return text


def test_every_prompt_of_the_course_passes_and_fits_the_context(tokenizer):
    longest = 0
    for name in workload.names():
        for prompt in workload.load(name).prompts:
            assert gate.problem(chat(prompt)) is None, prompt[:80]
            assert gate.problem(json.dumps({"prompt": prompt, "max_tokens": 256}).encode()) is None
            templated = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            longest = max(longest, len(tokenizer.encode(templated, add_special_tokens=False)))
    assert longest > 100  # what vLLM is sent: the course's longest prompt, with the template's tokens
    assert longest + gate.MAX_TOKENS <= gate.CONTEXT  # the chat template's own tokens included
    assert longest < CAP  # with room to spare: the cap is not the course's longest prompt


def test_a_prompt_past_the_cap_is_refused_wherever_its_text_sits(tokenizer):
    under, over = words(tokenizer, CAP - 20), words(tokenizer, CAP + 1)
    assert gate.problem(chat(under)) is None
    assert gate.problem(chat(under, min_tokens=256, ignore_eos=True)) is None  # the heaviest a class server takes
    assert f"at most {CAP} tokens" in gate.problem(chat(over))
    assert "at most" in gate.problem(json.dumps({"prompt": over}).encode())
    assert "at most" in gate.problem(json.dumps({"prompt": list(range(CAP + 1))}).encode())
    assert gate.problem(json.dumps({"prompt": list(range(CAP))}).encode()) is None
    half = words(tokenizer, CAP // 2 + 10)
    spread = [
        {"role": "user", "content": half},
        {"role": "assistant", "content": half},
    ]
    assert "at most" in gate.problem(json.dumps({"messages": spread}).encode())  # over several messages
    parts = [{"type": "text", "text": half}, {"type": "text", "text": half}]
    assert "at most" in gate.problem(json.dumps({"messages": [{"role": "user", "content": parts}]}).encode())
    # a field the endpoint ignores, or one the chat template renders (tools), counts as much as the prompt
    assert "at most" in gate.problem(chat("hi", prompt=over))
    assert "at most" in gate.problem(chat(half, tools=[{"type": "function", "function": {"description": half}}]))
    assert "at most" in gate.problem(chat(half, prompt=list(range(CAP // 2 + 10))))


def test_the_count_never_falls_below_the_tokenizers(tokenizer):
    """What lets the gate pass a short text uncounted: every token of the model's tokenizer is at least a byte,
    the special tokens' text and any Unicode included."""
    rng = random.Random(7)
    alphabet = [chr(c) for c in (*range(32, 127), 0xE9, 0x4E2D, 0x1F600, 0x0301, 0x200B)]
    specials = [t for t in tokenizer.all_special_tokens if t]
    for _ in range(300):
        pieces = [rng.choice(alphabet) for _ in range(rng.randint(1, 300))]
        pieces += rng.sample(specials, k=min(3, len(specials)))
        rng.shuffle(pieces)
        text = "".join(pieces)
        assert len(tokenizer.encode(text, add_special_tokens=False)) <= len(text.encode()), text


@pytest.mark.unit
def test_short_and_very_long_texts_are_decided_without_the_tokenizer(monkeypatch):
    def no_tokenizer():
        raise AssertionError("the tokenizer ran")

    monkeypatch.setattr(gate, "_tokenizer", no_tokenizer)
    assert gate.problem(chat("x" * (CAP - 8))) is None  # the body's strings (its model's name aside) within CAP bytes
    long = gate.problem(chat("y" * (CAP * gate.PROMPT_BYTES_PER_TOKEN + 1)))
    assert f"at most {CAP} tokens" in long and "bytes" in long
    nested = {"messages": [{"role": "user", "content": [[[["z" * (CAP * gate.PROMPT_BYTES_PER_TOKEN)]]]]}]}
    assert "at most" in gate.problem(json.dumps(nested).encode())
    deep = "[" * 900 + '"w"' + "]" * 900  # deep, as json.loads allows: counted without recursion
    assert gate.problem(('{"messages": ' + deep + "}").encode()) is None
