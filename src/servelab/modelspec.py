"""A model's serving-relevant shape, read from its Hugging Face config.json.

Parameters decide the weight bytes a decode step reads and the FLOPs each
token costs; layers x KV heads x head_dim decide how fast the KV cache grows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from .hardware import DTYPE_BYTES


@dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int = 0

    @classmethod
    def from_config(cls, config: dict, name: str = "model") -> "ModelSpec":
        heads = config["num_attention_heads"]
        hidden = config["hidden_size"]
        return cls(
            name=name,
            num_layers=config["num_hidden_layers"],
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=config.get("num_key_value_heads", heads),
            head_dim=config.get("head_dim") or hidden // heads,
            intermediate_size=config["intermediate_size"],
            vocab_size=config["vocab_size"],
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            max_position_embeddings=config.get("max_position_embeddings", 0),
        )

    @classmethod
    def from_config_json(cls, path: str | Path, name: str | None = None) -> "ModelSpec":
        """Read a config.json file, or a model folder holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        with open(path) as f:
            config = json.load(f)
        return cls.from_config(config, name or path.parent.name)

    # --- sizes -------------------------------------------------------------
    @property
    def params_per_layer(self) -> int:
        h, hd = self.hidden_size, self.head_dim
        attention = h * self.num_heads * hd * 2 + h * self.num_kv_heads * hd * 2  # q, o, k, v
        mlp = 3 * h * self.intermediate_size  # gate, up, down
        norms = 2 * h
        return attention + mlp + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """All parameters; a tied LM head shares the embedding table."""
        head = 0 if self.tie_word_embeddings else self.embedding_params
        return self.num_layers * self.params_per_layer + self.embedding_params + head + self.hidden_size

    @property
    def matmul_params(self) -> int:
        """Parameters that take part in a matmul per token (the embedding lookup does not)."""
        if self.tie_word_embeddings:
            return self.num_params  # the table doubles as the LM head
        return self.num_params - self.embedding_params

    def flops_per_token(self, context_len: int = 0) -> float:
        """Forward FLOPs for one token: 2 per matmul parameter, plus attention over the context."""
        attention = 4 * self.num_layers * self.num_heads * self.head_dim * context_len
        return 2.0 * self.matmul_params + attention

    def weight_bytes(self, dtype: str = "bfloat16") -> float:
        return self.num_params * DTYPE_BYTES[dtype]

    def kv_bytes_per_token(self, dtype: str = "bfloat16") -> float:
        """K and V, every layer, every KV head: 2 x layers x kv_heads x head_dim x bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * DTYPE_BYTES[dtype]

    def kv_bytes(self, tokens_per_sequence: int, batch_size: int = 1, dtype: str = "bfloat16") -> float:
        """KV cache for a batch: grows linearly with context and with batch."""
        return self.kv_bytes_per_token(dtype) * tokens_per_sequence * batch_size

    def to_dict(self) -> dict:
        d = asdict(self)
        d["num_params"] = self.num_params
        return d


PRESET_FILES = {
    "SmolLM2-135M": "SmolLM2-135M-Instruct.json",
    "Llama-3.1-8B": "Llama-3.1-8B-Instruct.json",
    "Llama-3-70B": "Llama-3-70B-Instruct.json",
    "Llama-3.1-70B": "Llama-3.1-70B-Instruct.json",  # Llama-3-70B's shape with a 128K context
}


def preset(name: str) -> ModelSpec:
    """A model preset by short name ('SmolLM2-135M', 'Llama-3.1-8B', 'Llama-3-70B', 'Llama-3.1-70B')."""
    for key, filename in PRESET_FILES.items():
        if name.lower() in (key.lower(), filename[:-5].lower()):
            text = resources.files("servelab.model_configs").joinpath(filename).read_text()
            return ModelSpec.from_config(json.loads(text), key)
    raise ValueError(f"Unknown model preset {name!r}. Known presets: {', '.join(PRESET_FILES)}.")
