"""A model's serving-relevant shape, read from its Hugging Face config.json.

Parameters decide the weight bytes a decode step reads and the FLOPs each
token costs; layers x KV heads x head_dim decide how fast the KV cache grows.

Where models differ from a dense Llama, the arithmetic follows the difference:

- mixture of experts: every expert's weights sit in memory, but a token runs
  through only experts_per_token of them, so compute (and the ridge) follows
  the active parameters;
- multi-head latent attention (DeepSeek-V3/R1): the KV cache holds one
  compressed latent of kv_lora_rank + qk_rope_head_dim values per layer per
  token, not K and V per head;
- sliding-window layers (Gemma, Mistral 7B v0.1, gpt-oss): those layers keep
  at most sliding_window tokens of KV, however long the sequence;
- interleaved experts (Llama 4 Maverick's interleave_moe_layer_step, DeepSeek's
  first_k_dense_replace and moe_layer_freq, Qwen-MoE's decoder_sparse_step and
  mlp_only_layers): only those layers hold experts, the others a dense MLP;
- chunked local attention (Llama 4's attention_chunk_size; every fourth layer,
  the NoPE one, is global): those layers keep at most one chunk of KV;
- linear attention and state-space layers (Qwen3-Next's Gated DeltaNet, Mamba in Jamba,
  Nemotron-H and Granite 4.0-H, MiniMax's lightning attention): they keep no KV cache, only a
  fixed state per sequence (recurrent state plus a short convolution window), so only the
  attention layers grow with the context; read from layer_types, full_attention_interval,
  layers_block_type / attn_layer_period, hybrid_override_pattern or attn_type_list;
- tied embeddings: the LM head is the embedding table, counted once (where config.json leaves
  tie_word_embeddings out, the default of the model type's transformers config: True for Gemma);
- a checkpoint's quantization_config: its quantized layers are stored in the
  checkpoint's bits; embeddings, norms and routers stay in the model's dtype, and
  so does every module its ignore list names (modules_to_not_convert, ignore,
  exclude_modules);
- vision and audio towers (vision_config, audio_config): held in memory in the
  model's dtype, run on the prompt's images, not in a decode step.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from .dtypes import DTYPE_BYTES

# Bytes per weight a checkpoint's quantization_config leaves, by quant_method and bits.
# mxfp4: 4-bit values plus one 8-bit scale per 32 (4.25 bits).
# NVFP4: 4-bit E2M1 values plus one FP8 (E4M3) scale per 16 (4.5 bits).
NVFP4_BYTES = 4.5 / 8
_QUANT_BYTES = {
    "fp8": 1.0,
    "fbgemm_fp8": 1.0,
    "mxfp4": 4.25 / 8,
    "awq": 0.5,
    "gptq": 0.5,
    "bitsandbytes": 0.5,
    "modelopt": 1.0,
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # the dense MLP's width (and each expert's, where moe_intermediate_size is 0)
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int = 0
    # mixture of experts (0: a dense model)
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0  # each routed expert's MLP width
    shared_expert_intermediate_size: int = 0  # always-active expert(s), summed width
    dense_layers: int = 0  # layers with a dense MLP instead of experts (DeepSeek's first three, Maverick's odd ones)
    moe_layer_ids: tuple[int, ...] = ()  # which layers hold experts (empty: the last num_layers - dense_layers)
    dense_intermediate_size: int = 0  # a dense layer's MLP width where it differs (Llama 4's intermediate_size_mlp)
    # multi-head latent attention (0: ordinary attention)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # sliding-window attention
    sliding_window: int = 0
    sliding_layers: int = 0  # how many of num_layers use the window
    window_kind: str = "sliding"  # "sliding" (the last window tokens) or "chunked" (Llama 4: the current chunk)
    # layers without a KV cache (linear attention, Mamba) and the fixed state each keeps per sequence
    no_kv_layers: int = 0  # layers that are not attention (state layers, and Nemotron-H's MLP-only layers)
    state_layers: int = 0  # of those, layers that keep a per-sequence state
    state_elements: int = 0  # one state layer's state per sequence (recurrent state + convolution window)
    state_dtype: str = ""  # the recurrent state's dtype where config.json names one (mamba_ssm_dtype)
    layer_kind: str = ""  # what the state layers are ("Gated DeltaNet linear attention", "Mamba")
    # the checkpoint's own quantization (quantization_config)
    quant_method: str = ""
    quant_bytes: float = 0.0  # bytes per quantized weight
    quant_experts_only: bool = False  # only the expert MLPs are quantized (gpt-oss's mxfp4)
    quant_ignore: tuple[str, ...] = ()  # module names or patterns the checkpoint keeps unquantized
    tower_params: int = 0  # vision / audio encoder parameters (estimated from their config blocks)
    tower_note: str = ""
    # draft heads: an EAGLE-3 head shares the target's embeddings and predicts over its own draft vocabulary
    eagle3: bool = False
    draft_vocab_size: int = 0
    mtp_layers: int = 0  # DeepSeek's multi-token-prediction layers (num_nextn_predict_layers), loaded for method mtp
    torch_dtype: str = "bfloat16"
    source: str = ""
    native_quantization: str = ""  # why the checkpoint's quantization is the model itself, not a trade made later

    @classmethod
    def from_config(cls, config: dict, name: str = "model") -> "ModelSpec":
        outer = config
        if isinstance(config.get("text_config"), dict):  # multimodal checkpoints (Gemma 3) nest the LM
            config = {**config["text_config"]}
            config.setdefault("torch_dtype", outer.get("torch_dtype"))
            config.setdefault("quantization_config", outer.get("quantization_config"))
        heads = config["num_attention_heads"]
        hidden = config["hidden_size"]
        layers = config["num_hidden_layers"]
        experts = config.get("num_local_experts") or config.get("n_routed_experts") or config.get("num_experts") or 0
        moe_width = config.get("moe_intermediate_size") or 0
        shared = config.get("shared_expert_intermediate_size") or 0
        if config.get("n_shared_experts"):
            shared = config["n_shared_experts"] * moe_width
        if experts and str(config.get("model_type", "")).startswith("llama4"):
            shared = config["intermediate_size"]  # one shared expert as wide as a routed one
        moe_ids = _moe_layer_ids(config, layers) if experts else ()
        dense_layers = layers - len(moe_ids) if experts else 0
        window, sliding = _sliding(config, layers)
        kind = "sliding"
        if not window and config.get("attention_chunk_size"):
            window, sliding, kind = config["attention_chunk_size"], _chunked_layers(config, layers), "chunked"
        no_kv, state_layers, layer_kind = _state_layers(config, layers)
        quant = config.get("quantization_config") or {}
        method, qbytes, experts_only = _quantization(quant)
        ignore = _quant_ignore(quant)
        tower, tower_note = _towers(outer)
        return cls(
            name=name,
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or hidden // heads,
            intermediate_size=config["intermediate_size"],
            vocab_size=config["vocab_size"] if "vocab_size" in config else _default(config, "vocab_size"),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", _default(config, "tie_word_embeddings", False))),
            max_position_embeddings=config.get(
                "max_position_embeddings", _default(config, "max_position_embeddings", 0)
            ),
            num_experts=experts,
            experts_per_token=(config.get("num_experts_per_tok") or config.get("experts_per_token") or 0)
            if experts
            else 0,
            moe_intermediate_size=moe_width,
            shared_expert_intermediate_size=shared,
            dense_layers=dense_layers,
            moe_layer_ids=moe_ids if moe_ids and list(moe_ids) != list(range(dense_layers, layers)) else (),
            dense_intermediate_size=(config.get("intermediate_size_mlp") or 0) if experts else 0,
            kv_lora_rank=config.get("kv_lora_rank") or 0,
            q_lora_rank=config.get("q_lora_rank") or 0,
            qk_rope_head_dim=config.get("qk_rope_head_dim") or 0,
            qk_nope_head_dim=config.get("qk_nope_head_dim") or 0,
            v_head_dim=config.get("v_head_dim") or 0,
            sliding_window=window,
            sliding_layers=sliding,
            window_kind=kind,
            no_kv_layers=no_kv,
            state_layers=state_layers,
            state_elements=_state_elements(config) if state_layers else 0,
            state_dtype=str(config.get("mamba_ssm_dtype") or "") if state_layers else "",
            layer_kind=layer_kind,
            quant_method=method,
            quant_bytes=qbytes,
            quant_experts_only=experts_only,
            quant_ignore=ignore,
            tower_params=tower,
            tower_note=tower_note,
            eagle3=any("eagle3" in str(a).lower() for a in outer.get("architectures") or ()),
            draft_vocab_size=config.get("draft_vocab_size") or 0,
            mtp_layers=config.get("num_nextn_predict_layers") or config.get("mtp_num_hidden_layers") or 0,
            torch_dtype=str(config.get("torch_dtype") or outer.get("torch_dtype") or "bfloat16"),
            source=str(outer.get("_source", "")),
            native_quantization=str(outer.get("_native_quantization", "")),
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

    # --- what kind of model -------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    # --- sizes -------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """One layer's attention projections (and its norms for MLA's low-rank paths)."""
        h = self.hidden_size
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                h * self.q_lora_rank + self.q_lora_rank * self.num_heads * qk + self.q_lora_rank
                if self.q_lora_rank
                else h * self.num_heads * qk
            )
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
            )
            o = self.num_heads * self.v_head_dim * h
            return q + kv + o
        hd = self.head_dim
        return h * self.num_heads * hd * 2 + h * self.num_kv_heads * hd * 2  # q, o, k, v

    @property
    def expert_params(self) -> int:
        """One routed expert's MLP (gate, up, down)."""
        return 3 * self.hidden_size * (self.moe_intermediate_size or self.intermediate_size)

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    def is_moe_layer(self, layer: int) -> bool:
        if not self.is_moe:
            return False
        if self.moe_layer_ids:
            return layer in self.moe_layer_ids
        return layer >= self.dense_layers

    @property
    def dense_mlp_params(self) -> int:
        """One dense layer's MLP (gate, up, down)."""
        return 3 * self.hidden_size * (self.dense_intermediate_size or self.intermediate_size)

    def moe_mlp_params(self, experts: int) -> int:
        """One MoE layer's MLP with `experts` routed experts: those, the shared expert, the router."""
        h = self.hidden_size
        return experts * self.expert_params + 3 * h * self.shared_expert_intermediate_size + h * self.num_experts

    def _mlp_params(self, experts: int) -> int:
        """Every layer's MLP, counting `experts` routed experts in each MoE layer."""
        if not self.is_moe:
            return self.num_layers * self.dense_mlp_params
        return self.dense_layers * self.dense_mlp_params + self.moe_layers * self.moe_mlp_params(experts)

    @property
    def params_per_layer(self) -> int:
        """A dense layer's parameters (for a mixture of experts: the average layer, all experts)."""
        return self.attention_params + self._mlp_params(self.num_experts) // self.num_layers + 2 * self.hidden_size

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @functools.cached_property  # a frozen spec's count: the simulator asks for it per step
    def _layer_params_total(self) -> int:
        return self.num_layers * (self.attention_params + 2 * self.hidden_size) + self._mlp_params(self.num_experts)

    @functools.cached_property  # a frozen spec's count: the simulator asks for it per step
    def decoder_params(self) -> int:
        """The language model's parameters (every expert); a tied LM head shares the embedding table."""
        if self.eagle3:
            return self._eagle3_params
        head = 0 if self.tie_word_embeddings else self.embedding_params
        return self._layer_params_total + self.embedding_params + head + self.hidden_size

    @property
    def _eagle3_params(self) -> int:
        """An EAGLE-3 head: its layers' q, k and v read the token embedding and the fused target
        features side by side (2 x hidden in); a fusion layer maps three target layers' features
        (3 x hidden) to one; its LM head covers the draft vocabulary; embeddings are the target's."""
        h, hd = self.hidden_size, self.head_dim
        attention = 2 * h * (self.num_heads + 2 * self.num_kv_heads) * hd + self.num_heads * hd * h
        layer = attention + self.dense_mlp_params + 3 * h  # three norms (input, hidden, post-attention)
        return self.num_layers * layer + 3 * h * h + (self.draft_vocab_size or self.vocab_size) * h + h

    @property
    def mtp_params(self) -> int:
        """DeepSeek's multi-token-prediction layers: an average decoder layer each, plus the
        projection of [embedding; hidden] (2 x hidden -> hidden) and its two norms."""
        h = self.hidden_size
        if not self.mtp_layers:
            return 0
        layer = (
            self.attention_params
            + (self.moe_mlp_params(self.num_experts) if self.is_moe else self.dense_mlp_params)
            + 2 * h
        )
        return self.mtp_layers * (layer + 2 * h * h + 2 * h)

    @property
    def num_params(self) -> int:
        """Every parameter held in memory: the language model and its vision / audio towers."""
        return self.decoder_params + self.tower_params

    @functools.cached_property  # a frozen spec's count: the simulator asks for it per step
    def active_params(self) -> int:
        """Parameters one generated token runs through: the decoder, with only the routed top-k
        experts of a mixture of experts (towers run on the prompt's images, not per token)."""
        if not self.is_moe:
            return self.decoder_params
        inactive = self._mlp_params(self.num_experts) - self._mlp_params(self.experts_per_token)
        return self.decoder_params - inactive

    @functools.cached_property  # a frozen spec's count: the simulator asks for it per step
    def matmul_params(self) -> int:
        """Parameters that take part in a matmul per token (the embedding lookup does not)."""
        if self.tie_word_embeddings:
            return self.active_params  # the table doubles as the LM head
        return self.active_params - self.embedding_params

    def flops_per_token(self, context_len: int = 0) -> float:
        """Forward FLOPs for one token: 2 per active matmul parameter, plus attention over the context."""
        head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim
        attention = 4 * self.num_layers * self.num_heads * head_dim * context_len
        return 2.0 * self.matmul_params + attention

    @property
    def quantized_params(self) -> int:
        """Parameters the checkpoint stores in its quantized format (0 when it is not quantized).

        The linear layers of every block, less what the quantization_config keeps unquantized:
        routers always, every module its ignore list names, and for gpt-oss's mxfp4 all but the experts."""
        if not self.quant_method:
            return 0
        h = self.hidden_size
        total = 0
        for layer in range(self.num_layers):
            if not self._ignored(layer, "self_attn"):
                total += self.attention_params
                if self.is_mla:  # the low-rank paths' norms sit inside attention_params and stay unquantized
                    total -= self.q_lora_rank + self.kv_lora_rank
            if self.is_moe_layer(layer):
                if not self._ignored(layer, "experts"):
                    total += self.num_experts * self.expert_params
                if self.shared_expert_intermediate_size and not self._ignored(layer, "shared_expert"):
                    total += 3 * h * self.shared_expert_intermediate_size
            elif not self._ignored(layer, "mlp"):
                total += self.dense_mlp_params
        if self.quant_ignore and not self.tie_word_embeddings and not self._ignored(None, "lm_head"):
            total += self.embedding_params  # an ignore list that leaves out lm_head quantizes it
        return total

    def _ignored(self, layer: int | None, module: str) -> bool:
        """Whether the checkpoint keeps this module unquantized (gpt-oss: everything but the experts)."""
        if self.quant_experts_only:
            return module != "experts"
        if not self.quant_ignore:
            return module == "lm_head"
        return any(_matches(pattern, name) for name in _module_names(layer, module) for pattern in self.quant_ignore)

    def weight_bytes(self, dtype: str = "bfloat16", linear_bytes: float | None = None) -> float:
        """Weight memory. dtype: the unquantized parts; linear_bytes: bytes per weight of the
        quantized layers (default: the checkpoint's own quantization, if any)."""
        if linear_bytes is None and self.quant_method:
            linear_bytes = self.quant_bytes
        if linear_bytes is None:
            return self.num_params * DTYPE_BYTES[dtype]
        quantized = self.quantized_params or (
            self.num_layers * self.attention_params + self._mlp_params(self.num_experts)
        )
        return quantized * linear_bytes + (self.num_params - quantized) * DTYPE_BYTES[dtype]

    def expert_weight_bytes(self, dtype: str = "bfloat16", linear_bytes: float | None = None) -> float:
        """The routed experts' share of weight_bytes: what expert parallelism shards across its group."""
        if not self.is_moe:
            return 0.0
        experts = self.moe_layers * self.num_experts * self.expert_params
        if linear_bytes is None and self.quant_method:
            first = next(i for i in range(self.num_layers) if self.is_moe_layer(i))
            linear_bytes = self.quant_bytes if not self._ignored(first, "experts") else None
        return experts * (linear_bytes if linear_bytes is not None else DTYPE_BYTES[dtype])

    @property
    def unquantized_params(self) -> int:
        """Parameters a quantized checkpoint keeps in its dtype (embeddings, norms, routers, ignored modules, towers)."""
        return self.num_params - self.quantized_params if self.quant_method else self.num_params

    def kv_bytes_per_token(self, dtype: str = "bfloat16", tensor_parallel_size: int = 1) -> float:
        """KV cache bytes one token adds in every layer, across tensor_parallel_size GPUs.

        Ordinary attention: K and V, every KV head: 2 x layers x kv_heads x head_dim x bytes.
        A GPU holds at least one KV head, so past tp = kv_heads the heads are copied.
        MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer, copied on every TP rank.
        Only attention layers count (kv_layers): linear-attention and Mamba layers keep a fixed
        state per sequence instead (state_bytes_per_sequence).
        """
        if self.is_mla:
            return (
                self.kv_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * DTYPE_BYTES[dtype] * tensor_parallel_size
            )
        heads = max(self.num_kv_heads, tensor_parallel_size) if tensor_parallel_size > 1 else self.num_kv_heads
        return 2 * self.kv_layers * heads * self.head_dim * DTYPE_BYTES[dtype]

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV cache (attention layers: full, sliding or chunked)."""
        return self.num_layers - self.no_kv_layers

    def state_bytes_per_sequence(self, dtype: str = "bfloat16") -> float:
        """The fixed state every sequence keeps in the linear-attention / Mamba layers, whatever its
        length: vLLM holds it in the KV cache's memory (its mamba cache dtypes default to the
        model's dtype; a config.json mamba_ssm_dtype such as float32 is taken for the state)."""
        if not self.state_layers:
            return 0.0
        width = DTYPE_BYTES.get(DTYPE_NAMES_STATE.get(self.state_dtype, dtype), DTYPE_BYTES[dtype])
        return float(self.state_layers * self.state_elements * width)

    def kv_bytes(
        self,
        tokens_per_sequence: int,
        batch_size: int = 1,
        dtype: str = "bfloat16",
        tensor_parallel_size: int = 1,
        windows: bool = True,
    ) -> float:
        """KV cache for a batch: linear in batch; in context, except that sliding-window
        layers stop growing at the window (windows=False: the server caches them in full), and
        linear-attention / Mamba layers hold a fixed state per sequence."""
        layers = max(1, self.kv_layers)
        per_layer = self.kv_bytes_per_token(dtype, tensor_parallel_size) / layers
        window = self.sliding_window if windows else tokens_per_sequence
        full = layers - self.sliding_layers
        tokens = full * tokens_per_sequence + self.sliding_layers * min(tokens_per_sequence, window)
        state = self.state_bytes_per_sequence(DTYPE_NAMES_STATE.get(self.torch_dtype, "bfloat16"))
        return (per_layer * tokens + state) * batch_size

    def to_dict(self) -> dict:
        d = asdict(self)
        d["num_params"] = self.num_params
        d["active_params"] = self.active_params
        return d


# Names a module has in Hugging Face checkpoints, by the kinds the arithmetic counts; an ignore
# list names modules in these forms ("lm_head", "model.layers.0.mlp", "re:.*self_attn.*").
_MODULE_FORMS = {
    "self_attn": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "self_attn"),
    "mlp": (
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
        "mlp",
        "feed_forward.gate_proj",
        "feed_forward.up_proj",
        "feed_forward.down_proj",
        "feed_forward",
    ),
    "experts": ("mlp.experts", "feed_forward.experts", "block_sparse_moe.experts"),
    "shared_expert": ("mlp.shared_expert", "mlp.shared_experts", "feed_forward.shared_expert"),
}


def _module_names(layer: int | None, module: str) -> list[str]:
    if layer is None:
        return [module]
    names = []
    for form in _MODULE_FORMS[module]:
        for prefix in ("model.layers", "language_model.model.layers", "model.language_model.layers"):
            names.append(f"{prefix}.{layer}.{form}")
    return names


def _matches(pattern: str, name: str) -> bool:
    """compressed-tensors' 're:' regular expressions, modelopt's globs, or a name (transformers
    matches modules_to_not_convert as a part of the module's name)."""
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return ("." + pattern.strip(".") + ".") in ("." + name + ".")  # whole dotted parts: layers.1 is not layers.12


def _moe_layer_ids(config: dict, layers: int) -> tuple[int, ...]:
    """Which layers hold experts, from the ways config.json files say it."""
    if isinstance(config.get("moe_layers"), list):
        return tuple(config["moe_layers"])
    step = config.get("interleave_moe_layer_step")
    if str(config.get("model_type", "")).startswith("llama4") and step:  # Llama 4: every step-th layer
        return tuple(i for i in range(layers) if (i + 1) % step == 0)
    first = config.get("first_k_dense_replace") or 0
    freq = config.get("moe_layer_freq") or 1
    if first or freq > 1:  # DeepSeek: dense first, then experts every freq-th layer
        return tuple(i for i in range(layers) if i >= first and i % freq == 0)
    sparse_step = config.get("decoder_sparse_step") or 1
    dense_only = set(config.get("mlp_only_layers") or ())
    return tuple(i for i in range(layers) if i not in dense_only and (i + 1) % sparse_step == 0)


def _chunked_layers(config: dict, layers: int) -> int:
    """Llama 4: RoPE layers attend within their chunk; the NoPE ones (no_rope_layers 0, by default
    every fourth) attend to everything."""
    flags = config.get("no_rope_layers")
    if isinstance(flags, list) and len(flags) == layers:
        return sum(1 for f in flags if f)
    interval = config.get("no_rope_layer_interval") or 4
    return sum(1 for i in range(layers) if (i + 1) % interval != 0)


def _quant_ignore(quant: dict) -> tuple[str, ...]:
    if not isinstance(quant, dict):
        return ()
    for key in ("modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"):
        value = quant.get(key)
        if isinstance(value, list) and value:
            return tuple(str(v) for v in value)
    return ()


def _towers(config: dict) -> tuple[int, str]:
    """Vision / audio encoder parameters, estimated from their config blocks: per block, attention
    4 x hidden^2 and an MLP of 2 (GELU) or 3 (gated) x hidden x intermediate; patch embedding and
    projector, which are small, are left out."""
    total, parts = 0, []
    for key, what in (("vision_config", "vision"), ("audio_config", "audio")):
        tower = config.get(key)
        if not isinstance(tower, dict):
            continue
        h = tower.get("hidden_size") or tower.get("embed_dim") or tower.get("d_model") or 0
        blocks = tower.get("num_hidden_layers") or tower.get("depth") or tower.get("encoder_layers") or 0
        inter = tower.get("intermediate_size") or tower.get("encoder_ffn_dim") or 4 * h
        if not (h and blocks):
            continue
        gated = 3 if str(tower.get("hidden_act", "")).lower() in ("silu", "swiglu") else 2
        params = blocks * (4 * h * h + gated * h * inter)
        total += params
        parts.append(f"{what} tower {params / 1e9:.2f}B ({blocks} blocks of {h})")
    return total, "; ".join(parts)


def _sliding(config: dict, layers: int) -> tuple[int, int]:
    """(window, layers that use it) from the ways config.json files say it."""
    window = config.get("sliding_window") or 0
    if not window or config.get("use_sliding_window") is False:
        return 0, 0
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        return window, sum(1 for t in types if t == "sliding_attention")
    pattern = config.get("sliding_window_pattern") or _default(config, "sliding_window_pattern", None)
    if isinstance(pattern, int) and pattern > 1:  # Gemma 3: every pattern-th layer is global
        return window, layers - layers // pattern
    if str(config.get("model_type", "")).startswith("gemma2"):  # alternating local and global
        return window, layers - layers // 2
    return window, layers  # Mistral 7B v0.1: every layer


def _quantization(quant: dict) -> tuple[str, float, bool]:
    """(method, bytes per quantized weight, experts only) from a quantization_config."""
    if not isinstance(quant, dict) or not quant:
        return "", 0.0, False
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits") or quant.get("w_bit")
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        for group in groups.values():
            weights = (group or {}).get("weights") or {}
            if weights.get("num_bits"):
                bits = weights["num_bits"]
                if bits == 4 and weights.get("type") == "float" and weights.get("group_size") == 16:
                    return method, NVFP4_BYTES, False  # NVFP4 in compressed-tensors' words
                break
        return method, (bits or 8) / 8, False
    if method == "mxfp4":
        return method, _QUANT_BYTES["mxfp4"], True
    if "nvfp4" in str(quant.get("quant_algo", "")).lower():
        return method, NVFP4_BYTES, False
    if "fp4" in str(quant.get("quant_algo", "")).lower():
        return method, 0.5, False
    if bits:
        return method, bits / 8, False
    return method, _QUANT_BYTES.get(method, 1.0), False


PRESET_FILES = {
    "SmolLM2-135M": "SmolLM2-135M-Instruct.json",
    "Llama-3.1-8B": "Llama-3.1-8B-Instruct.json",
    "Llama-3-70B": "Llama-3-70B-Instruct.json",
}
CATALOGUE_FILE = "catalogue.json"


def preset(name: str) -> ModelSpec:
    """A model by short name: a preset ('SmolLM2-135M', 'Llama-3.1-8B', 'Llama-3-70B'), else a catalogued
    model by its id or its name without the owner ('Llama-3.1-70B-Instruct')."""
    for key, filename in PRESET_FILES.items():
        if name.lower() in (key.lower(), filename[:-5].lower()):
            text = resources.files("servelab.model_configs").joinpath(filename).read_text()
            return ModelSpec.from_config(json.loads(text), key)
    if catalogue_key(name) is not None:
        return from_catalogue(name)
    raise ValueError(
        f"Unknown model {name!r}. Known presets: {', '.join(PRESET_FILES)}; "
        "or a model id from the catalogue (model_configs/catalogue.json)."
    )


def catalogue() -> dict[str, dict]:
    """The shipped catalogue: Hugging Face model id -> {source, aliases, config (config.json fields)}."""
    text = resources.files("servelab.model_configs").joinpath(CATALOGUE_FILE).read_text()
    return json.loads(text)["models"]


def catalogue_key(model_id: str) -> str | None:
    """The catalogue entry a model id names: the id itself, its name without the owner, or an alias."""
    wanted = model_id.strip().rstrip("/").lower()
    base = wanted.split("/")[-1]
    for key, entry in catalogue().items():
        names = [key.lower(), key.lower().split("/")[-1]] + [a.lower() for a in entry.get("aliases", [])]
        if wanted in names or base in names:
            return key
    return None


def from_catalogue(model_id: str) -> ModelSpec:
    """A catalogued model's spec, by its Hugging Face id (or name without the owner)."""
    key = catalogue_key(model_id)
    if key is None:
        raise ValueError(f"{model_id!r} is not in the model catalogue")
    entry = catalogue()[key]
    return ModelSpec.from_config(
        {**entry["config"], "_source": entry["source"], "_native_quantization": entry.get("native_quantization", "")},
        key,
    )


# A config.json's mamba_ssm_dtype, in the names DTYPE_BYTES knows.
DTYPE_NAMES_STATE = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "float16": "float16"}

# What transformers' config class gives a key config.json leaves out, by model_type (each class's
# __init__ defaults: Gemma2Config and Gemma3TextConfig tie_word_embeddings=True, Gemma3TextConfig
# vocab_size=262_208, max_position_embeddings=131_072 and sliding_window_pattern=6 (five local layers
# to one global); LlamaConfig, MistralConfig, Qwen2Config
# and the other decoders here default to untied). Gemma 3's published config.json states neither
# tie_word_embeddings nor vocab_size in its text_config.
_MODEL_TYPE_DEFAULTS: dict[str, dict] = {
    "gemma": {"tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True},
    "gemma3_text": {
        "tie_word_embeddings": True,
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
        "sliding_window_pattern": 6,
    },
}


def _default(config: dict, key: str, *fallback):
    """A key's value where config.json leaves it out: its model type's default, else fallback
    (none given: the KeyError a missing size raises)."""
    defaults = _MODEL_TYPE_DEFAULTS.get(str(config.get("model_type", "")), {})
    if key in defaults:
        return defaults[key]
    if fallback:
        return fallback[0]
    raise KeyError(key)


# layer_types values for layers without a KV cache (transformers' and vLLM's names).
_STATE_LAYER_TYPES = {"linear_attention", "mamba", "mamba2", "mamba1", "ssm", "recurrent", "deltanet"}
_ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention", "attention", "hybrid"}


def _state_layers(config: dict, layers: int) -> tuple[int, int, str]:
    """(layers without a KV cache, of those the ones with a per-sequence state, what they are),
    from the ways hybrid models' config.json files say it:

    - layer_types (Qwen3.5, Granite 4.0-H, gpt-oss, newer transformers): one name per layer;
    - full_attention_interval (Qwen3-Next, which leaves layer_types unset): every interval-th layer
      is full attention, the rest Gated DeltaNet (transformers' Qwen3NextConfig default);
    - layers_block_type (vLLM's name for Jamba-style lists) or attn_layer_period / attn_layer_offset
      (Jamba: layer i is attention where i % period == offset);
    - hybrid_override_pattern (Nemotron-H): one character a layer, M Mamba, * attention, - MLP, E MoE;
    - attn_type_list (MiniMax-Text-01 / M1): 0 lightning (linear) attention, 1 softmax attention.
    """
    mamba_keys = ("mamba_num_heads", "mamba_n_heads", "mamba_d_state", "ssm_state_size", "mamba_expand")
    kind = "Mamba" if any(k in config for k in mamba_keys) else "linear attention"
    if "linear_num_value_heads" in config:
        kind = "Gated DeltaNet linear attention"
    types = config.get("layer_types") or config.get("layers_block_type")
    if isinstance(types, list) and len(types) == layers:
        names = [str(t).lower() for t in types]
        state = sum(1 for t in names if t in _STATE_LAYER_TYPES)
        if any(t.startswith("mamba") for t in names):
            kind = "Mamba"
        no_kv = sum(1 for t in names if t not in _ATTENTION_LAYER_TYPES)
        return no_kv, state, kind if state else ""
    interval = config.get("full_attention_interval")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 1:
        linear = sum(1 for i in range(layers) if (i + 1) % interval != 0)
        return linear, linear, kind
    period, offset = config.get("attn_layer_period"), config.get("attn_layer_offset")
    if isinstance(period, int) and isinstance(offset, int) and period > 0 and "mamba_d_state" in config:
        attention = sum(1 for i in range(layers) if i % period == offset)
        return layers - attention, layers - attention, "Mamba"
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == layers:
        return layers - pattern.count("*"), pattern.count("M"), "Mamba"
    kinds = config.get("attn_type_list")
    if isinstance(kinds, list) and len(kinds) == layers:
        linear = sum(1 for k in kinds if k == 0)
        return linear, linear, "lightning (linear) attention" if linear else ""
    return 0, 0, ""


def _state_elements(config: dict) -> int:
    """One state layer's state per sequence, in elements: the recurrent state plus the
    convolution window (conv_kernel - 1 past inputs), as vLLM's mamba state shapes size them
    (vllm/model_executor/layers/mamba/mamba_utils.py: gated_delta_net_state_shape,
    mamba2_state_shape, mamba1_state_shape); 0 where config.json gives no state sizes."""

    def num(*keys: str) -> int:
        for key in keys:
            value = config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return 0

    if num("linear_num_value_heads"):  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        v_heads, k_heads = num("linear_num_value_heads"), num("linear_num_key_heads")
        k_dim, v_dim = num("linear_key_head_dim"), num("linear_value_head_dim")
        conv = (num("linear_conv_kernel_dim") or 4) - 1
        return v_heads * k_dim * v_dim + conv * (2 * k_heads * k_dim + v_heads * v_dim)
    heads, head_dim = num("mamba_num_heads", "mamba_n_heads"), num("mamba_head_dim", "mamba_d_head")
    d_state = num("ssm_state_size", "mamba_d_state")
    conv = (num("conv_kernel", "mamba_d_conv") or 4) - 1
    if heads and head_dim and d_state:  # Mamba2 (Nemotron-H, Granite 4.0-H)
        groups = num("n_groups", "mamba_n_groups") or 1
        inner = heads * head_dim
        return inner * d_state + conv * (inner + 2 * groups * d_state)
    if d_state:  # Mamba1 (Jamba): expand x hidden channels
        inner = (num("mamba_expand") or 2) * num("hidden_size")
        return inner * d_state + conv * inner
    if num("linear_attn_heads") or config.get("attn_type_list"):  # MiniMax lightning attention
        heads = num("num_attention_heads")
        dim = num("head_dim") or num("hidden_size") // max(1, heads)
        return heads * dim * dim
    return 0
