"""servelab prepare-model says a step is still going from its start, every HEARTBEAT_S, until the step's own
progress bar starts or the step ends; a fake slow step stands in for the model (nothing is converted)."""

from __future__ import annotations

import re
import sys
import threading
import types

import pytest
import tqdm

from servelab import model

pytestmark = pytest.mark.unit

WAIT_S = 10  # at most, for an event a beat of a few milliseconds brings


class Log:
    """The step's log: its lines, and an event when a line matching a pattern arrives."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._waits: list[tuple[re.Pattern, threading.Event]] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        for pattern, event in self._waits:
            if pattern.search(line):
                event.set()

    def wait_for(self, pattern: str) -> None:
        event = threading.Event()
        self._waits.append((re.compile(pattern), event))
        if any(re.search(pattern, line) for line in self.lines):
            event.set()
        assert event.wait(WAIT_S), f"no line like {pattern!r} in {self.lines}"


def beaters() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "prepare-model-progress"]


def test_a_slow_step_beats_from_its_start_and_stops_when_it_ends():
    log = Log()
    with model.step(log, "A slow step", heartbeat_s=0.02):
        assert log.lines == ["A slow step ..."]
        log.wait_for(r"^  A slow step: \d+ s so far$")  # the first beat, while the step still runs
    assert log.lines[-1].startswith("  A slow step: done in ") and not beaters()
    beats = [line for line in log.lines if line.endswith("s so far")]
    assert log.lines == ["A slow step ...", *beats, log.lines[-1]]


def test_a_step_with_its_own_bar_stops_beating_once_the_bar_starts():
    log = Log()
    bar_started = threading.Event()

    with model.step(log, "Reading", heartbeat_s=0.02, own_bar=bar_started.is_set):
        log.wait_for(r"^  Reading: \d+ s so far$")
        bar_started.set()
        for beater in beaters():
            beater.join(WAIT_S)
        assert not beaters()  # gone while the step still runs: no beat writes over the bar
        lines_at_bar = len(log.lines)
    assert len(log.lines) == lines_at_bar + 1 and log.lines[-1].startswith("  Reading: done in ")


def test_reading_the_weights_beats_until_transformers_bar_starts(monkeypatch, tmp_path):
    """The GGUF's weights: "so far" lines from the step's start, none once transformers' tqdm bar is drawn."""
    monkeypatch.setattr(model, "HEARTBEAT_S", 0.02)
    log = Log()
    weights = "Reading the weights out of the GGUF (transformers' progress bar follows)"

    class Tokenizer:
        @staticmethod
        def from_pretrained(folder, gguf_file):
            return "tokenizer"

    class Model:
        @staticmethod
        def from_pretrained(folder, gguf_file):
            log.wait_for(re.escape(f"  {weights}: ") + r"\d+ s so far$")  # still quiet, no bar yet: a beat
            with open(tmp_path / "bar", "w") as out, tqdm.tqdm(total=2, file=out) as bar:
                for beater in beaters():
                    beater.join(WAIT_S)
                assert not beaters()  # the heartbeat ended with the bar on the screen
                log.lines.append("<bar>")
                bar.update(2)
            return "model"

    fake = types.ModuleType("transformers")
    fake.AutoTokenizer, fake.AutoModelForCausalLM = Tokenizer, Model
    monkeypatch.setitem(sys.modules, "transformers", fake)
    assert model._load_gguf(tmp_path / "model.gguf", log) == ("model", "tokenizer")
    start = log.lines.index(f"{weights} ...")
    after = log.lines[log.lines.index("<bar>") + 1 :]
    assert any(line.endswith("s so far") for line in log.lines[start:])
    assert len(after) == 1 and after[0].startswith(f"  {weights}: done in "), log.lines
