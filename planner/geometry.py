"""Exact per-layer KV geometry from a Hugging Face ``config.json``.

:func:`parse_geometry` turns an untrusted config dict into a frozen :class:`ModelGeometry` with
one :class:`LayerSpec` per decoder layer. It knows the key aliases of the major families
(:mod:`planner.config_keys`), nested ``text_config``/``language_config``/``llm_config`` of
multimodal wrappers, sliding and interleaved local/global layers, chunked local attention, MLA
latents, hybrid Mamba and linear-attention stacks, cross-attention layers and KV-shared layers.
Which layer is which comes from :data:`LAYOUT_READERS` (one per config convention, the first that
claims a config wins) refined by :data:`POST_PASSES`.

Nothing here depends on a runtime or a dtype: :mod:`planner.kv` turns the geometry into bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.config_keys import (
    ATTENTION_HEAD_KEYS,
    EXPERTS_PER_TOKEN_KEYS,
    FALCON_NEW_ARCH_KV_HEAD_KEYS,
    GROUPED_KV_HEAD_KEY,
    HEAD_DIM_KEYS,
    HIDDEN_SIZE_KEYS,
    KV_HEAD_KEYS,
    LAYER_COUNT_KEYS,
    LAYER_INDEX_KEYS,
    MAMBA_CONV_KERNEL_KEYS,
    MAMBA_STATE_KEYS,
    MAX_POSITION_KEYS,
    NESTED_KV_HEAD_KEY,
    ROUTED_EXPERT_KEYS,
    TEXT_CONFIG_KEYS,
    VOCAB_KEYS,
    one_of,
)
from planner.errors import ConfigError
from planner.limits import MAX_DIM, MAX_HEADS, MAX_KV_BYTES_PER_TOKEN, MAX_LAYERS, MAX_POSITIONS, ByteBudgetCache, check_number

LayerKind = Literal["full", "sliding", "chunked", "cross", "mamba", "linear_attention", "none"]
KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "cross", "mamba", "linear_attention", "none")

# MAX_LAYERS, MAX_HEADS, MAX_DIM, MAX_POSITIONS: ranges documented in planner/limits.py

INDEXER_QUANT_BLOCK = 128  # vLLM 0.33 DeepseekV32IndexerCache: one fp32 scale per 128 fp8 values

# layer_types names used by transformers and the Hub, mapped to our kinds
LAYER_TYPE_NAMES: dict[str, str] = {
    "full_attention": "full",
    "attention": "full",
    "global": "full",
    "global_attention": "full",
    "sliding_attention": "sliding",
    "sliding_window_attention": "sliding",
    "local": "sliding",
    "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear_attention",
    "mamba": "mamba",
    "mamba2": "mamba",
    "cross_attention": "cross",
    # GLM-5.2/5.3 (GlmMoeDsaForCausalLM): MLA with DeepSeek sparse attention; the latent grows
    # per token like full attention, the indexer cache is counted separately (IndexerSpec)
    "deepseek_sparse_attention": "full",
}

# Nemotron 3 Ultra (NemotronHForCausalLM) lists its blocks by name in layers_block_type instead
# of hybrid_override_pattern; vLLM 0.33 nemotron_h.py maps the same names to its layer classes.
BLOCK_TYPE_NAMES: dict[str, str] = {"mamba": "mamba", "attention": "full", "moe": "none", "mlp": "none"}

# Class defaults of interleaved local/global families: every Nth layer is global.
SLIDING_PATTERN_DEFAULTS = {"gemma2": 2, "gemma3_text": 6, "gemma3": 6, "cohere2": 4}

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LayerSpec(BaseModel):
    """One decoder layer: what it caches per token."""

    model_config = _FROZEN

    index: int
    kind: LayerKind
    window: int | None = None  # sliding window W or attention chunk C
    kv_heads: int = 0  # total KV heads of the layer (before tensor parallelism)
    k_head_dim: int = 0
    v_head_dim: int = 0


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2)."""

    model_config = _FROZEN

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    @property
    def latent_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim


class IndexerSpec(BaseModel):
    """Lightning indexer of DeepSeek sparse attention (DeepSeek-V3.2, GLM-5.x, DeepSeek-V4).

    vLLM 0.33 ``deepseek_v2.py`` ``DeepseekV32IndexerCache.get_kv_cache_spec`` caches one key of
    ``index_head_dim`` fp8 values plus a 4-byte fp32 scale per 128 values for every token of every
    layer that owns an indexer, whatever ``--kv-cache-dtype`` says (132 bytes for 128 dims).
    """

    model_config = _FROZEN

    head_dim: int
    n_heads: int
    layers: tuple[int, ...]  # decoder layers that own an indexer cache (GLM-5.2 "shared" layers reuse one)
    element_bytes: int = 0  # 0: fp8 keys + fp32 scales (DeepSeek); 2: plain bf16 keys (MiniMax-M3)

    @property
    def bytes_per_token_per_layer(self) -> int:
        if self.element_bytes:
            return self.head_dim * self.element_bytes
        return self.head_dim + -(-self.head_dim // INDEXER_QUANT_BLOCK) * 4

    @property
    def dtype(self) -> str:
        return "bf16" if self.element_bytes == 2 else "fp8"


class CompressedSpec(BaseModel):
    """DeepSeek-V4 compressed sparse attention (``compress_ratios``, ``sliding_window``).

    vLLM 0.33 ``layers/deepseek_v4_attention.py``: every layer keeps a sliding-window cache
    (``DeepseekV4SWACache``) of the last ``window`` tokens, and a layer with compress ratio r > 1
    also keeps one compressed entry per r tokens (``DeepseekV4MLAAttention``, C4A / C128A). Both
    hold one ``head_dim`` head in vLLM's fixed FP8 sparse layout: (head_dim - rope) fp8 NoPE values,
    rope bf16 values, one scale byte per 64 NoPE values and one pad byte (584 B for 512 / 64),
    whatever ``--kv-cache-dtype`` says. Ratio-4 layers also own an indexer whose keys are
    compressed by 4 (``DeepseekV4Indexer``, 132 B per entry).
    """

    model_config = _FROZEN

    window: int
    head_dim: int
    rope_dim: int
    ratios: tuple[int, ...]  # per decoder layer; 0 (or 1) means sliding window only
    mtp_ratios: tuple[int, ...] = ()
    index_head_dim: int = 0  # 0: no indexer

    @property
    def index_entry_bytes(self) -> int:
        return self.index_head_dim + -(-self.index_head_dim // INDEXER_QUANT_BLOCK) * 4

    @property
    def entry_bytes(self) -> int:
        nope = self.head_dim - self.rope_dim
        return nope + self.rope_dim * 2 + nope // 64 + 1


class StateSpec(BaseModel):
    """Recurrent state of one Mamba or linear-attention layer, per sequence, in elements."""

    model_config = _FROZEN

    conv_elements: int
    ssm_elements: int
    description: str
    ssm_element_bytes: int = 2  # 4 when the config asks for a float32 SSM cache (mamba_ssm_cache_dtype)


class ModelGeometry(BaseModel):
    """Validated, frozen geometry of a decoder (the text part of a multimodal wrapper)."""

    model_config = _FROZEN

    model_type: str
    architectures: tuple[str, ...] = ()
    config_path: str = ""  # "" for a plain config, "text_config" etc. for a wrapper
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    hidden_size: int
    intermediate_size: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    torch_dtype: str | None = None
    mla: MLASpec | None = None
    mamba: StateSpec | None = None
    linear: StateSpec | None = None
    indexer: IndexerSpec | None = None
    compressed: CompressedSpec | None = None
    layers: tuple[LayerSpec, ...]
    # layers of the multi-token-prediction (MTP) modules (num_nextn_predict_layers): an engine
    # caches them only when MTP speculative decoding is on (vLLM --speculative-config method=mtp)
    mtp_layers: tuple[LayerSpec, ...] = ()
    mtp_indexer_layers: int = 0
    notes: tuple[str, ...] = ()
    config_hash: str = ""

    def counts(self) -> dict[str, int]:
        """Number of layers of each kind (MLA layers are "full": their cache grows per token)."""
        c = Counter(layer.kind for layer in self.layers)
        return {k: c[k] for k in KINDS if c[k]}


# --------------------------------------------------------------------------- helpers


def _present(cfg: dict, key: str) -> bool:
    return key in cfg and cfg[key] is not None


def _int_field(cfg: dict, key: str, *, lo: int = 1, hi: int = MAX_DIM, where: str = "") -> int:
    """Read an integer field; accept 4096.0 but not 4096.5, True, "4096" or NaN."""
    return int(check_number(f"{where}{key}", cfg[key], lo=lo, hi=hi, integer=True, error=ConfigError))


def _bool_field(cfg: dict, key: str, default: bool, where: str) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}{key}", value, "must be true or false")
    return value


def _first(cfg: dict, keys: tuple[str, ...], *, where: str, lo: int = 1, hi: int = MAX_DIM) -> tuple[str, int] | None:
    for key in keys:
        if _present(cfg, key):
            return key, _int_field(cfg, key, lo=lo, hi=hi, where=where)
    return None


def _optional_int(cfg: dict, key: str, *, where: str, lo: int = 1, hi: int = MAX_DIM) -> int | None:
    return _int_field(cfg, key, lo=lo, hi=hi, where=where) if _present(cfg, key) else None


def config_hash(config: dict) -> str:
    """Stable SHA-256 of a config (canonical JSON), used to pin uploads in links and reports."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- text config


_ARCH_DEFAULTS: dict | None = None


def arch_defaults() -> dict:
    """model_type -> class defaults of the fields the planner reads, tabulated from transformers.

    ``planner/arch_defaults.json`` is generated by ``scripts/gen_arch_defaults.py`` from the pinned
    transformers' config classes (importing transformers itself costs seconds: it imports torch).
    """
    global _ARCH_DEFAULTS
    if _ARCH_DEFAULTS is None:
        _ARCH_DEFAULTS = json.loads((Path(__file__).with_name("arch_defaults.json")).read_text(encoding="utf-8"))
    return _ARCH_DEFAULTS


def _complete_with_defaults(sub: dict, where: str, notes: list[str]) -> dict:
    """Fill a sparse sub-config with its architecture's class defaults (as transformers does)."""
    model_type = sub.get("model_type")
    table = arch_defaults()
    defaults = table["defaults"].get(model_type) if isinstance(model_type, str) else None
    if defaults is None:
        notes.append(f"{where} of type {model_type!r} is incomplete and has no known class defaults; raw keys used")
        return sub
    added = sorted(k for k in defaults if k not in sub)
    if added:
        notes.append(f"{where} completed with transformers {table['transformers_version']} {model_type} class defaults ({', '.join(added)})")
    return {**defaults, **sub}


def _is_sparse(cfg: dict) -> bool:
    """No layer count, head count or hidden size under any of their names."""
    return any(not any(_present(cfg, k) for k in keys) for keys in (LAYER_COUNT_KEYS, ATTENTION_HEAD_KEYS, HIDDEN_SIZE_KEYS))


def select_text_config(config: dict) -> tuple[dict, str, list[str]]:
    """Return the decoder's config (the nested text config of a wrapper), its path and notes."""
    notes: list[str] = []
    for key in TEXT_CONFIG_KEYS:
        sub = config.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            raise ConfigError(key, type(sub).__name__, "must be a JSON object")
        merged = dict(sub)
        # a wrapper's top-level context limit applies when the sub-config has none
        for inherit in ("max_position_embeddings", "torch_dtype", "dtype", "quantization_config"):
            if inherit not in merged and inherit in config:
                merged[inherit] = config[inherit]
        if _is_sparse(merged):
            merged = _complete_with_defaults(merged, key, notes)
        notes.insert(0, f"geometry read from the nested {key} (model_type {sub.get('model_type', '?')})")
        return merged, key, notes
    if _is_sparse(config) and isinstance(config.get("model_type"), str):
        config = _complete_with_defaults(dict(config), "config", notes)
    return config, "", notes


# --------------------------------------------------------------------------- geometry


def _kv_heads(cfg: dict, heads: int, where: str, notes: list[str]) -> int:
    outer, inner = NESTED_KV_HEAD_KEY
    nested = cfg.get(outer)
    if isinstance(nested, dict) and _present(nested, inner):
        return _int_field(nested, inner, hi=MAX_HEADS, where=f"{where}{outer}.")
    new_arch = cfg.get("new_decoder_architecture") is True
    if cfg.get("multi_query") is True and not new_arch:
        # Falcon (old architecture) and GPT-BigCode: one KV head, whatever num_kv_heads says
        # (transformers re-saves Falcon-7B with num_kv_heads = num_attention_heads)
        notes.append("multi_query: one KV head shared by all query heads")
        return 1
    if new_arch:
        found = _first(cfg, FALCON_NEW_ARCH_KV_HEAD_KEYS, where=where, hi=MAX_HEADS)
        return found[1] if found else heads
    found = _first(cfg, KV_HEAD_KEYS, where=where, hi=MAX_HEADS)
    if found:
        return found[1]
    if _present(cfg, GROUPED_KV_HEAD_KEY) and cfg.get("multi_query_attention", True):
        return _int_field(cfg, GROUPED_KV_HEAD_KEY, hi=MAX_HEADS, where=where)
    return heads


def _head_dim(cfg: dict, hidden: int, heads: int, where: str, notes: list[str]) -> int:
    for key in HEAD_DIM_KEYS:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            continue  # null or <= 0 means "derive it"
        dim = _int_field(cfg, key, where=where)
        if dim * heads != hidden:
            notes.append(f"{key} {dim} is explicit (hidden_size / heads would give {hidden / heads:g})")
        return dim
    if hidden % heads:
        raise ConfigError(f"{where}hidden_size", hidden, f"is not divisible by {heads} attention heads and no head_dim is given")
    return hidden // heads


# --------------------------------------------------------------------------- layer layout
#
# Which layers attend fully, in a window or a chunk, hold recurrent state or nothing: configs say
# it in a dozen conventions. LAYOUT_READERS lists them in the order they are tried; the first that
# claims the config gives every layer's kind and the others are not read (so layer_types beats
# everything, a per-layer list beats hybrid_override_pattern, and so on). Then every POST_PASSES
# step runs in order on the kinds: class-default patterns (only for a layout no explicit list
# fixed), window sizes, windows that never bind, cross-attention and KV-shared layers.


@dataclass(frozen=True)
class LayoutReader:
    """One config convention for the kind of every layer."""

    convention: str  # what it reads, as the docs name it
    claims: Callable[[dict, str], bool]  # (text config, model_type): whether this convention applies
    read: Callable[[dict, int, str, list[str]], list[str]]  # (text config, layers, where, notes) -> kinds
    # an explicit per-layer layout: the Llama 4 chunking and the sliding-window class defaults
    # (POST_PASSES) leave it as it is
    final: bool = True


@dataclass
class _Layout:
    """The kinds and windows the post-passes refine, with what they read."""

    cfg: dict
    model_type: str
    where: str
    notes: list[str]
    max_pos: int | None
    kinds: list[str]
    windows: list[int | None]
    final: bool
    sliding_window: int | None = None  # set by _sliding_window_size


def _layer_kinds(cfg: dict, n: int, model_type: str, where: str, notes: list[str], max_pos: int | None) -> tuple[list[str], list[int | None]]:
    reader = next(r for r in LAYOUT_READERS if r.claims(cfg, model_type))
    layout = _Layout(cfg=cfg, model_type=model_type, where=where, notes=notes, max_pos=max_pos, kinds=reader.read(cfg, n, where, notes), windows=[None] * n, final=reader.final)
    for post_pass in POST_PASSES:
        post_pass(layout)
    return layout.kinds, layout.windows


def _read_layer_types(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """transformers' per-layer names (Gemma 2/3/4, GPT-OSS, Qwen3-Next, Llama 4, ...)."""
    layer_types = cfg["layer_types"]
    if not isinstance(layer_types, list):
        raise ConfigError(f"{where}layer_types", type(layer_types).__name__, "must be a list of layer type names")
    if len(layer_types) != n:
        raise ConfigError(f"{where}layer_types", f"{len(layer_types)} entries", f"must list exactly num_hidden_layers={n} entries")
    for i, name in enumerate(layer_types):
        if not isinstance(name, str) or name not in LAYER_TYPE_NAMES:
            raise ConfigError(f"{where}layer_types[{i}]", name, f"unknown layer type; known: {', '.join(sorted(LAYER_TYPE_NAMES))}")
    return [LAYER_TYPE_NAMES[name] for name in layer_types]


def _read_layers_block_type(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Nemotron 3 Ultra: vLLM 0.33 nemotron_h.py builds one layer class per name."""
    names = _str_list(cfg["layers_block_type"], n, f"{where}layers_block_type")
    for i, name in enumerate(names):
        if name not in BLOCK_TYPE_NAMES:
            raise ConfigError(f"{where}layers_block_type[{i}]", name, f"unknown block type; known: {', '.join(BLOCK_TYPE_NAMES)}")
    notes.append("layers_block_type: only 'attention' layers hold K/V; 'mamba' layers hold recurrent state; 'moe'/'mlp' layers hold nothing")
    return [BLOCK_TYPE_NAMES[name] for name in names]


def _read_hybrid_layer_pattern(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """MiMo-V2-Flash: vLLM 0.33 mimo_v2_flash.py, hybrid_layer_pattern[i] == 1 is a sliding-window layer."""
    pattern = cfg["hybrid_layer_pattern"]
    if not isinstance(pattern, list) or len(pattern) != n:
        raise ConfigError(f"{where}hybrid_layer_pattern", pattern if not isinstance(pattern, list) else f"{len(pattern)} entries", f"must list exactly num_hidden_layers={n} flags")
    for i, flag in enumerate(pattern):
        if flag not in (0, 1) or isinstance(flag, bool):
            raise ConfigError(f"{where}hybrid_layer_pattern[{i}]", flag, "must be 0 (full attention) or 1 (sliding window)")
    notes.append("hybrid_layer_pattern: 1 marks a sliding-window layer with its own swa_* heads, 0 a full-attention layer")
    return ["sliding" if flag else "full" for flag in pattern]


def _read_block_configs(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Llama-3.x-Nemotron (DeciLM, model_type nemotron-nas): vLLM 0.33 nemotron_nas.py skips the
    attention of a no_op block and builds num_attention_heads // n_heads_in_group KV heads otherwise
    (the heads are :func:`_layer_shapes`'s)."""
    kinds = ["full"] * n
    for i, block in enumerate(_block_configs(cfg["block_configs"], n, where)):
        attn = block.get("attention") or {}
        if attn.get("no_op") is True or attn.get("replace_with_linear") is True:
            kinds[i] = "none"
    notes.append("block_configs: per-layer attention; no-op and linear-replaced attention layers cache nothing")
    return kinds


def _read_compress_ratios(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """DeepSeek-V4: every layer has a sliding-window cache; the compressed part is :func:`_compressed`'s."""
    return ["sliding"] * n


def _read_kda_layers(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Kimi Linear / Kimi K3: vLLM 0.33 kimi_linear.py, KimiLinearConfig.is_kda_layer(i) tests
    (i + 1) in linear_attn_config["kda_layers"]; the other layers are MLA."""
    kda = cfg["linear_attn_config"].get("kda_layers")
    if not isinstance(kda, list) or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n for v in kda):
        raise ConfigError(f"{where}linear_attn_config.kda_layers", kda, f"must list 1-based layer numbers from 1 to {n}")
    kinds = ["full"] * n
    for v in kda:
        kinds[v - 1] = "linear_attention"
    notes.append(f"linear_attn_config: {len(set(kda))} Kimi Delta Attention layers hold recurrent state, the other {n - len(set(kda))} are MLA")
    return kinds


def _read_hybrid_override_pattern(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Nemotron-H: one character per layer, M (Mamba), * (attention), - (MLP), E (MoE)."""
    pattern = cfg["hybrid_override_pattern"]
    if not isinstance(pattern, str) or len(pattern) != n:
        raise ConfigError(f"{where}hybrid_override_pattern", pattern, f"must be a string of exactly {n} characters (M, *, -, E)")
    table = {"M": "mamba", "*": "full", "-": "none", "E": "none"}
    for i, ch in enumerate(pattern):
        if ch not in table:
            raise ConfigError(f"{where}hybrid_override_pattern[{i}]", ch, "unknown symbol; known: M (Mamba), * (attention), - (MLP), E (MoE)")
    notes.append("hybrid_override_pattern: only '*' layers hold K/V; 'M' layers hold recurrent state; '-'/'E' layers hold nothing")
    return [table[ch] for ch in pattern]


def _read_attn_layer_period(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Jamba: attention every attn_layer_period layers at attn_layer_offset (class defaults 8 and 4), Mamba elsewhere."""
    period = _int_field(cfg, "attn_layer_period", where=where) if _present(cfg, "attn_layer_period") else 8
    offset = _int_field(cfg, "attn_layer_offset", lo=0, where=where) if _present(cfg, "attn_layer_offset") else 4
    if offset >= period:
        raise ConfigError(f"{where}attn_layer_offset", offset, f"must be below attn_layer_period={period}")
    notes.append(f"Jamba layout: attention every {period} layers at offset {offset}, Mamba elsewhere")
    return ["full" if i % period == offset else "mamba" for i in range(n)]


def _read_full_attention_interval(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """Qwen3-Next / Qwen3.5 without layer_types: every interval-th layer attends, the others are Gated DeltaNet."""
    interval = _int_field(cfg, "full_attention_interval", where=where)
    notes.append(f"full attention every {interval} layers, linear attention elsewhere")
    return ["full" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]


def _every_layer_full(cfg: dict, n: int, where: str, notes: list[str]) -> list[str]:
    """No convention: every layer attends fully (the post-passes may add windows and chunks)."""
    return ["full"] * n


LAYOUT_READERS: tuple[LayoutReader, ...] = (
    LayoutReader("layer_types", lambda cfg, _: cfg.get("layer_types") is not None, _read_layer_types),
    LayoutReader("layers_block_type (Nemotron 3 Ultra)", lambda cfg, _: cfg.get("layers_block_type") is not None, _read_layers_block_type),
    LayoutReader("hybrid_layer_pattern (MiMo-V2-Flash)", lambda cfg, _: cfg.get("hybrid_layer_pattern") is not None, _read_hybrid_layer_pattern),
    LayoutReader("block_configs (Nemotron-NAS)", lambda cfg, _: cfg.get("block_configs") is not None, _read_block_configs),
    LayoutReader("compress_ratios (DeepSeek-V4)", lambda cfg, _: isinstance(cfg.get("compress_ratios"), list), _read_compress_ratios),
    LayoutReader("linear_attn_config.kda_layers (Kimi Linear)", lambda cfg, _: isinstance(cfg.get("linear_attn_config"), dict), _read_kda_layers),
    LayoutReader("hybrid_override_pattern (Nemotron-H)", lambda cfg, _: cfg.get("hybrid_override_pattern") is not None, _read_hybrid_override_pattern, final=False),
    LayoutReader("attn_layer_period (Jamba)", lambda cfg, model_type: _present(cfg, "attn_layer_period") or model_type == "jamba", _read_attn_layer_period, final=False),
    LayoutReader("full_attention_interval (Qwen3-Next)", lambda cfg, _: _present(cfg, "full_attention_interval"), _read_full_attention_interval, final=False),
    LayoutReader("every layer full attention", lambda cfg, _: True, _every_layer_full, final=False),
)


def _llama4_chunked_layers(layout: _Layout) -> None:
    """Llama 4: chunked local attention on RoPE layers, global attention on NoPE layers."""
    cfg, where, kinds, n = layout.cfg, layout.where, layout.kinds, len(layout.kinds)
    if cfg.get("attention_chunk_size") is None or layout.final:
        return
    _int_field(cfg, "attention_chunk_size", hi=MAX_POSITIONS, where=where)
    no_rope = cfg.get("no_rope_layers")
    if no_rope is None or no_rope == []:
        interval = _int_field(cfg, "no_rope_layer_interval", where=where) if _present(cfg, "no_rope_layer_interval") else 4
        no_rope = [int((i + 1) % interval != 0) for i in range(n)]
        layout.notes.append(f"no_rope_layers not given: every {interval}th layer is global (transformers default)")
    if not isinstance(no_rope, list) or len(no_rope) != n:
        raise ConfigError(f"{where}no_rope_layers", no_rope if not isinstance(no_rope, list) else f"{len(no_rope)} entries", f"must list exactly {n} flags")
    for i, flag in enumerate(no_rope):
        if flag not in (0, 1, True, False):
            raise ConfigError(f"{where}no_rope_layers[{i}]", flag, "must be 0 or 1")
        if flag and kinds[i] == "full":
            kinds[i] = "chunked"


def _chunk_windows(layout: _Layout) -> None:
    """Chunked layers attend within attention_chunk_size positions."""
    if "chunked" not in layout.kinds:
        return
    if layout.cfg.get("attention_chunk_size") is None:
        raise ConfigError(f"{layout.where}attention_chunk_size", None, "layer_types has chunked_attention layers but no attention_chunk_size")
    chunk = _int_field(layout.cfg, "attention_chunk_size", hi=MAX_POSITIONS, where=layout.where)
    layout.windows = [chunk if k == "chunked" else w for k, w in zip(layout.kinds, layout.windows, strict=True)]


def _sliding_window_size(layout: _Layout) -> None:
    """sliding_window, validated whatever the layout; Gemma 4's bidirectional models halve it."""
    window = _optional_int(layout.cfg, "sliding_window", where=layout.where, hi=MAX_POSITIONS)
    if window is not None and layout.model_type.startswith("gemma4") and layout.cfg.get("use_bidirectional_attention") == "all":
        # transformers Gemma4TextConfig: bidirectional models keep an exclusive window of W // 2 + 1
        window = window // 2 + 1
        layout.notes.append(f"use_bidirectional_attention 'all': the sliding window is {window:,} (sliding_window // 2 + 1)")
    layout.sliding_window = window


def _sliding_class_pattern(layout: _Layout) -> None:
    """A sliding_window without a per-layer list: every layer slides except every
    sliding_window_pattern-th (or the family's class default), and Qwen2's first max_window_layers."""
    cfg, where, kinds, window = layout.cfg, layout.where, layout.kinds, layout.sliding_window
    use_sliding = _bool_field(cfg, "use_sliding_window", True, where)
    if window is None or layout.final:
        return
    if not use_sliding:
        layout.notes.append(f"use_sliding_window is false: sliding_window {window} ignored, every layer attends fully")
        return
    if "sliding" in kinds:
        return
    every = cfg.get("sliding_window_pattern")
    if every is None:
        every = SLIDING_PATTERN_DEFAULTS.get(layout.model_type)
        if every is not None:
            layout.notes.append(f"{layout.model_type}: {every - 1} local layer(s) to 1 global (class default)")
    else:
        every = _int_field(cfg, "sliding_window_pattern", where=where)
    max_window_layers = _optional_int(cfg, "max_window_layers", lo=0, hi=MAX_LAYERS, where=where)
    for i in range(len(kinds)):
        if kinds[i] != "full":
            continue
        if every is not None and (i + 1) % every == 0:
            continue
        if layout.model_type.startswith("qwen2") and max_window_layers is not None and i < max_window_layers:
            continue
        kinds[i] = "sliding"


def _sliding_windows_that_bind(layout: _Layout) -> None:
    """Sliding layers keep sliding_window positions; a window as long as the context never binds:
    those layers are counted as full."""
    if "sliding" not in layout.kinds:
        return
    window = layout.sliding_window
    if window is None:
        raise ConfigError(f"{layout.where}sliding_window", None, "layer_types has sliding_attention layers but no sliding_window")
    if layout.max_pos is not None and window >= layout.max_pos:
        layout.notes.append(f"sliding_window {window:,} >= max_position_embeddings {layout.max_pos:,}: the window never binds, layers counted as full")
        layout.kinds = ["full" if k == "sliding" else k for k in layout.kinds]
    else:
        layout.windows = [window if k == "sliding" else w for k, w in zip(layout.kinds, layout.windows, strict=True)]


def _cross_attention_layers(layout: _Layout) -> None:
    """Llama 3.2 Vision: cross-attention layers over the image encoder's states."""
    cross = layout.cfg.get("cross_attention_layers")
    if not cross:
        return
    n, where = len(layout.kinds), layout.where
    if not isinstance(cross, list):
        raise ConfigError(f"{where}cross_attention_layers", cross, "must be a list of layer indices")
    for idx in cross:
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
            raise ConfigError(f"{where}cross_attention_layers", idx, f"layer index must be in 0..{n - 1}")
        layout.kinds[idx] = "cross"
        layout.windows[idx] = None
    layout.notes.append(f"{len(set(cross))} cross-attention layers cache the image encoder's states, not the text tokens")


def _kv_shared_layers(layout: _Layout) -> None:
    """Gemma 3n: the last num_kv_shared_layers layers reuse the K/V of earlier layers."""
    n, where = len(layout.kinds), layout.where
    shared = _optional_int(layout.cfg, "num_kv_shared_layers", lo=0, hi=MAX_LAYERS, where=where)
    if not shared:
        return
    if shared >= n:
        raise ConfigError(f"{where}num_kv_shared_layers", shared, f"must be below num_hidden_layers={n}")
    for i in range(n - shared, n):
        layout.kinds[i] = "none"
        layout.windows[i] = None
    layout.notes.append(f"the last {shared} layers reuse earlier layers' K/V and cache nothing")


POST_PASSES: tuple[Callable[[_Layout], None], ...] = (
    _llama4_chunked_layers,
    _chunk_windows,
    _sliding_window_size,
    _sliding_class_pattern,
    _sliding_windows_that_bind,
    _cross_attention_layers,
    _kv_shared_layers,
)


def _str_list(value: object, n: int, field: str) -> list[str]:
    if not isinstance(value, list) or len(value) != n:
        raise ConfigError(field, value if not isinstance(value, list) else f"{len(value)} entries", f"must list exactly {n} layer type names")
    for i, name in enumerate(value):
        if not isinstance(name, str):
            raise ConfigError(f"{field}[{i}]", name, "must be a layer type name")
    return value


def _block_configs(value: object, n: int, where: str) -> list[dict]:
    if not isinstance(value, list) or len(value) != n:
        raise ConfigError(f"{where}block_configs", value if not isinstance(value, list) else f"{len(value)} entries", f"must list exactly num_hidden_layers={n} blocks")
    for i, block in enumerate(value):
        if not isinstance(block, dict) or not isinstance(block.get("attention", {}), dict):
            raise ConfigError(f"{where}block_configs[{i}]", type(block).__name__, "must be an object with an 'attention' object")
    return value


def _mla(cfg: dict, where: str) -> MLASpec | None:
    if not (_present(cfg, "kv_lora_rank") and _present(cfg, "qk_rope_head_dim")):
        return None
    return MLASpec(
        kv_lora_rank=_int_field(cfg, "kv_lora_rank", where=where),
        qk_rope_head_dim=_int_field(cfg, "qk_rope_head_dim", where=where),
        qk_nope_head_dim=_int_field(cfg, "qk_nope_head_dim", lo=0, where=where) if _present(cfg, "qk_nope_head_dim") else 0,
        v_head_dim=_int_field(cfg, "v_head_dim", where=where) if _present(cfg, "v_head_dim") else _int_field(cfg, "qk_rope_head_dim", where=where),
        q_lora_rank=_optional_int(cfg, "q_lora_rank", where=where),
    )


def _mamba_state(cfg: dict, hidden: int, where: str) -> StateSpec:
    """Mamba-1 (Jamba) or Mamba-2 (Nemotron-H) state per layer and sequence, in elements."""
    d_conv = next((_int_field(cfg, k, where=where) for k in MAMBA_CONV_KERNEL_KEYS if _present(cfg, k)), 4)
    d_state = next((_int_field(cfg, k, where=where) for k in MAMBA_STATE_KEYS if _present(cfg, k)), 16)
    if _present(cfg, "mamba_num_heads") and _present(cfg, "mamba_head_dim"):  # Mamba-2
        nheads = _int_field(cfg, "mamba_num_heads", where=where)
        head_dim = _int_field(cfg, "mamba_head_dim", where=where)
        groups = _int_field(cfg, "n_groups", where=where) if _present(cfg, "n_groups") else 1
        d_inner = nheads * head_dim
        conv = (d_inner + 2 * groups * d_state) * (d_conv - 1)
        # vLLM 0.33 model_executor/models/config.py NemotronHForCausalLMConfig: with
        # --mamba-ssm-cache-dtype auto a Nemotron-H SSM state takes the config's
        # mamba_ssm_cache_dtype, float32 when the config names none; other Mamba-2 models keep
        # the model dtype (MambaStateDtypeCalculator._mamba_state_dtype)
        default = "float32" if str(cfg.get("model_type", "")).startswith("nemotron_h") else None
        ssm_dtype = cfg.get("mamba_ssm_cache_dtype", default)
        ssm_bytes = 4 if ssm_dtype == "float32" else 2
        return StateSpec(conv_elements=conv, ssm_elements=nheads * head_dim * d_state, ssm_element_bytes=ssm_bytes,
                         description=f"Mamba-2: {nheads} heads x {head_dim} x state {d_state}, conv {d_conv}" + (", float32 SSM state" if ssm_bytes == 4 else ""))
    expand = _int_field(cfg, "mamba_expand", where=where) if _present(cfg, "mamba_expand") else 2
    d_inner = expand * hidden
    return StateSpec(conv_elements=d_inner * (d_conv - 1), ssm_elements=d_inner * d_state, description=f"Mamba: d_inner {d_inner} x state {d_state}, conv {d_conv}")


def _linear_state(cfg: dict, where: str) -> StateSpec:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5) state per layer and sequence, in elements."""
    def get(key: str, default: int) -> int:
        return _int_field(cfg, key, where=where) if _present(cfg, key) else default

    k_heads, v_heads = get("linear_num_key_heads", 16), get("linear_num_value_heads", 32)
    k_dim, v_dim = get("linear_key_head_dim", 128), get("linear_value_head_dim", 128)
    conv_k = get("linear_conv_kernel_dim", 4)
    conv = (2 * k_heads * k_dim + v_heads * v_dim) * (conv_k - 1)
    return StateSpec(conv_elements=conv, ssm_elements=v_heads * k_dim * v_dim, description=f"linear attention: {v_heads} value heads x {k_dim} x {v_dim}, conv {conv_k}")


def _check_cache_size(kinds: list[str], kv_heads: int, head_dim: int, v_head_dim: int, mamba: StateSpec | None, linear: StateSpec | None, where: str) -> None:
    """Refuse a geometry whose fp32 K/V per token, or recurrent state per sequence, exceeds 1 TiB."""
    cached = sum(1 for k in kinds if k in ("full", "sliding", "chunked", "cross"))
    per_token = 4 * cached * kv_heads * (head_dim + v_head_dim)
    if per_token > MAX_KV_BYTES_PER_TOKEN:
        raise ConfigError(f"{where}num_hidden_layers", len(kinds), f"with {kv_heads:,} KV heads x head_dim {head_dim:,} the cache would hold {per_token:.3g} bytes per token (limit 1 TiB): the geometry is implausible")
    state = 4 * sum(kinds.count(kind) * (spec.conv_elements + spec.ssm_elements) for spec, kind in ((mamba, "mamba"), (linear, "linear_attention")) if spec)
    if state > MAX_KV_BYTES_PER_TOKEN:
        raise ConfigError(f"{where}num_hidden_layers", len(kinds), f"the recurrent state would hold {state:.3g} bytes per sequence (limit 1 TiB): the geometry is implausible")
def _layer_shapes(cfg: dict, kinds: list[str], base: tuple[int, int, int], heads: int, where: str, notes: list[str]) -> list[tuple[int, int, int]]:
    """(KV heads, K dim, V dim) of each layer, for families whose layers differ in shape."""
    shapes = [base] * len(kinds)
    kv_heads, head_dim, v_head_dim = base
    gemma4 = str(cfg.get("model_type", "")).startswith("gemma4")
    if gemma4 or _present(cfg, "global_head_dim") or _present(cfg, "num_global_key_value_heads"):
        # Gemma 4: vLLM 0.33 gemma4.py Gemma4DecoderLayer gives full-attention layers head_dim =
        # global_head_dim and, when attention_k_eq_v, num_global_key_value_heads KV heads. k_eq_v
        # layers ship only K weights; vLLM loads them into both the K and V slots of qkv_proj and
        # caches both, and transformers' Gemma4 attention stores value_states = key_states in the
        # cache as well, so both runtimes hold K and V. (transformers Gemma4TextConfig)
        # transformers 5.20 Gemma4TextConfig.__post_init__ turns these into per_layer_config overrides
        # of the full layers (global_head_dim defaults to 512 there)
        global_dim = _int_field(cfg, "global_head_dim", where=where) if _present(cfg, "global_head_dim") else (512 if gemma4 else head_dim)
        k_eq_v = _bool_field(cfg, "attention_k_eq_v", False, where)
        global_heads = _int_field(cfg, "num_global_key_value_heads", hi=MAX_HEADS, where=where) if k_eq_v and _present(cfg, "num_global_key_value_heads") else kv_heads
        if heads % global_heads:
            raise ConfigError(f"{where}num_global_key_value_heads", global_heads, f"does not divide num_attention_heads={heads}")
        shapes = [(global_heads, global_dim, global_dim) if k == "full" else base for k in kinds]
        notes.append(f"full-attention layers: {global_heads} KV heads x {global_dim} (global_head_dim), sliding layers: {kv_heads} x {head_dim}"
                     + ("; attention_k_eq_v: V is a copy of K, still cached as both K and V" if k_eq_v else ""))
    elif _present(cfg, "swa_num_key_value_heads") or _present(cfg, "swa_head_dim"):
        # MiMo-V2-Flash: vLLM 0.33 mimo_v2_flash.py builds sliding layers from the swa_* fields
        swa_heads = _int_field(cfg, "swa_num_key_value_heads", hi=MAX_HEADS, where=where) if _present(cfg, "swa_num_key_value_heads") else kv_heads
        swa_k = _int_field(cfg, "swa_head_dim", where=where) if _present(cfg, "swa_head_dim") else head_dim
        swa_v = _int_field(cfg, "swa_v_head_dim", where=where) if _present(cfg, "swa_v_head_dim") else swa_k
        full_v = _int_field(cfg, "v_head_dim", where=where) if _present(cfg, "v_head_dim") else v_head_dim  # V narrower than K
        shapes = [(swa_heads, swa_k, swa_v) if k == "sliding" else (kv_heads, head_dim, full_v) for k in kinds]
        notes.append(f"sliding layers: {swa_heads} KV heads, K {swa_k} / V {swa_v} (swa_*); full layers: {kv_heads} KV heads, K {head_dim} / V {full_v}")
    block_configs = cfg.get("block_configs")
    if isinstance(block_configs, list) and len(block_configs) == len(kinds):
        for i, block in enumerate(_block_configs(block_configs, len(kinds), where)):  # objects, even when layer_types gave the kinds
            group = (block.get("attention") or {}).get("n_heads_in_group")
            if kinds[i] == "none":
                continue
            if group is None:
                raise ConfigError(f"{where}block_configs[{i}].attention.n_heads_in_group", None, "an attention layer needs n_heads_in_group")
            group = _int_field({"n_heads_in_group": group}, "n_heads_in_group", hi=MAX_HEADS, where=f"{where}block_configs[{i}].attention.")
            if heads % group:
                raise ConfigError(f"{where}block_configs[{i}].attention.n_heads_in_group", group, f"does not divide num_attention_heads={heads}")
            shapes[i] = (heads // group, head_dim, v_head_dim)
    return shapes


def _indexer(cfg: dict, n: int, kinds: list[str], where: str, notes: list[str]) -> IndexerSpec | None:
    """The lightning-indexer cache of DeepSeek sparse attention, when the config has one.

    vLLM 0.33 deepseek_v2.py builds an indexer on every layer when the config has index_topk
    (DeepSeek-V3.2, GLM-5 glm_moe_dsa); GLM-5.2/5.3 list indexer_types per layer and only "full"
    layers compute (and cache) their own top-k, "shared" layers reuse the previous one.
    """
    sparse = cfg.get("sparse_attention_config")
    if isinstance(sparse, dict) and sparse.get("use_sparse_attention") is True and not _present(cfg, "index_topk"):
        return _minimax_indexer(sparse, n, kinds, where, notes)
    if not (_present(cfg, "index_topk") and _present(cfg, "index_head_dim")):
        return None
    head_dim = _int_field(cfg, "index_head_dim", where=where)
    n_heads = _int_field(cfg, "index_n_heads", hi=MAX_HEADS, where=where) if _present(cfg, "index_n_heads") else 1
    types = cfg.get("indexer_types")
    pattern = cfg.get("index_topk_pattern")
    if _present(cfg, "index_topk_freq") or pattern is not None:
        # vLLM 0.33 models/deepseek_v32/attention.py: a layer skips its own top-k (and builds no
        # indexer) when max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0, or where
        # index_topk_pattern[i] == "S"; GLM-5.2's indexer_types say the same in words
        freq = _int_field(cfg, "index_topk_freq", where=where) if _present(cfg, "index_topk_freq") else 1
        offset = _int_field(cfg, "index_skip_topk_offset", lo=0, hi=MAX_LAYERS, where=where) if _present(cfg, "index_skip_topk_offset") else 2
        if pattern is not None and not isinstance(pattern, (list, str)):
            raise ConfigError(f"{where}index_topk_pattern", pattern, "must be a list or string of 'S' (shared) / other per layer")
        def skips(i: int) -> bool:
            if pattern is None:
                return max(i - offset + 1, 0) % freq != 0
            return i < len(pattern) and pattern[i] == "S"
        owners = tuple(i for i, k in enumerate(kinds) if k == "full" and not skips(i))
        types = ["full" if i in owners else "shared" for i in range(n)]
    elif types is not None:
        names = _str_list(types, n, f"{where}indexer_types")
        for i, name in enumerate(names):
            if name not in ("full", "shared"):
                raise ConfigError(f"{where}indexer_types[{i}]", name, "must be 'full' or 'shared'")
        owners = tuple(i for i, name in enumerate(names) if name == "full" and kinds[i] == "full")
    else:
        owners = tuple(i for i, k in enumerate(kinds) if k == "full")
    spec = IndexerSpec(head_dim=head_dim, n_heads=n_heads, layers=owners)
    shared = "" if types is None else f" ({n - len(owners)} 'shared' layers reuse another layer's)"
    notes.append(f"sparse-attention indexer: {len(owners)} layers cache a {head_dim}-dim fp8 key + scale, {spec.bytes_per_token_per_layer} B per token each{shared}")
    return spec


def _compressed(cfg: dict, n: int, head_dim: int, where: str, notes: list[str]) -> CompressedSpec | None:
    """DeepSeek-V4's compress_ratios (n entries, plus one per MTP layer in the released configs)."""
    ratios = cfg.get("compress_ratios")
    if not isinstance(ratios, list):
        return None
    if len(ratios) < n:
        raise ConfigError(f"{where}compress_ratios", f"{len(ratios)} entries", f"must list at least num_hidden_layers={n} ratios")
    for i, r in enumerate(ratios):
        if isinstance(r, bool) or not isinstance(r, int) or r < 0 or r > MAX_POSITIONS:
            raise ConfigError(f"{where}compress_ratios[{i}]", r, "must be a non-negative integer (0: sliding window only)")
    window = _optional_int(cfg, "sliding_window", where=where, hi=MAX_POSITIONS) or 128
    rope = _optional_int(cfg, "qk_rope_head_dim", where=where) or 64
    if rope >= head_dim:
        raise ConfigError(f"{where}qk_rope_head_dim", rope, f"must be below head_dim={head_dim}")
    index_dim = _optional_int(cfg, "index_head_dim", where=where) or 0
    spec = CompressedSpec(window=window, head_dim=head_dim, rope_dim=rope, ratios=tuple(ratios[:n]), mtp_ratios=tuple(ratios[n:]), index_head_dim=index_dim)
    by_ratio = Counter(r for r in spec.ratios if r > 1)
    parts = ", ".join(f"{c} layers 1 entry per {r} tokens" for r, c in sorted(by_ratio.items()))
    notes.append(f"DeepSeek-V4 compressed sparse attention: every layer keeps the last {window} tokens, {parts}; "
                 f"{spec.entry_bytes} B per entry in vLLM's FP8 sparse layout whatever the KV dtype; ratio-4 layers add a "
                 f"{index_dim}-dim indexer compressed by 4; the compressors keep fp32 states over their last 8 or 128 tokens; "
                 "hash layers (num_hash_layers) only change MoE routing")
    return spec


def _minimax_indexer(sparse: dict, n: int, kinds: list[str], where: str, notes: list[str]) -> IndexerSpec:
    """MiniMax-M3 sparse attention: vLLM 0.33 models/minimax_m3 (MiniMaxM3IndexerCache) keeps one
    key-only index vector of sparse_index_dim per token on each layer whose sparse_attention_freq
    is non-zero, in bf16 unless --attention-config sets indexer_kv_dtype."""
    w = f"{where}sparse_attention_config."
    dim = _int_field(sparse, "sparse_index_dim", where=w) if _present(sparse, "sparse_index_dim") else 128
    heads = _int_field(sparse, "sparse_num_index_heads", hi=MAX_HEADS, where=w) if _present(sparse, "sparse_num_index_heads") else 1
    freq = sparse.get("sparse_attention_freq")
    if freq is None:
        owners = tuple(i for i, k in enumerate(kinds) if k == "full")
    elif not isinstance(freq, list) or len(freq) != n:
        raise ConfigError(f"{w}sparse_attention_freq", freq if not isinstance(freq, list) else f"{len(freq)} entries", f"must list exactly num_hidden_layers={n} flags")
    else:
        owners = tuple(i for i, f in enumerate(freq) if f and kinds[i] == "full")
    notes.append(f"sparse attention: {len(owners)} layers keep a {dim}-dim bf16 index key per token ({dim * 2} B each)")
    return IndexerSpec(head_dim=dim, n_heads=heads, layers=owners, element_bytes=2)


def _mtp_layers(cfg: dict, layers: list[LayerSpec], indexer: IndexerSpec | None, where: str, notes: list[str]) -> tuple[tuple[LayerSpec, ...], int]:
    """The cached layers of the next-token-prediction modules (num_nextn_predict_layers).

    Each MTP module of DeepSeek-V3/V3.2, GLM-5, Kimi and MiMo is one more decoder layer shaped like
    the model's last full-attention layer (vLLM 0.33 deepseek_mtp.py, glm4_moe_mtp.py); Nemotron-H
    lists the module's blocks in mtp_layers_block_type (vLLM 0.33 nemotron_h_mtp.py).
    """
    count = _optional_int(cfg, "num_nextn_predict_layers", lo=0, hi=64, where=where) or 0
    if not count:
        return (), 0
    full = [layer for layer in layers if layer.kind == "full"]
    if not full:
        return (), 0
    template = full[-1]
    per_module = 1
    block_types = cfg.get("mtp_layers_block_type")
    if isinstance(block_types, list):
        per_module = sum(1 for name in block_types if name == "attention")
    n = len(layers)
    mtp = tuple(LayerSpec(index=n + i, kind="full", kv_heads=template.kv_heads, k_head_dim=template.k_head_dim, v_head_dim=template.v_head_dim) for i in range(count * per_module))
    mtp_indexer = len(mtp) if indexer is not None else 0
    if mtp:
        notes.append(f"{len(mtp)} MTP layer(s) (num_nextn_predict_layers {count}) are cached only with MTP speculative decoding on")
    return mtp, mtp_indexer


def _kda_state(linear_cfg: dict, where: str) -> StateSpec:
    """Kimi Delta Attention state per layer and sequence, in elements.

    vLLM 0.33 kimi_linear.py / MambaStateShapeCalculator.kda_state_shape: three short-conv states
    (q, k, v) of num_heads x head_dim x (kernel - 1) and a num_heads x head_dim x head_dim
    recurrent state.
    """
    w = f"{where}linear_attn_config."
    heads = _int_field(linear_cfg, "num_heads", hi=MAX_HEADS, where=w) if _present(linear_cfg, "num_heads") else 32
    dim = _int_field(linear_cfg, "head_dim", where=w) if _present(linear_cfg, "head_dim") else 128
    kernel = _int_field(linear_cfg, "short_conv_kernel_size", where=w) if _present(linear_cfg, "short_conv_kernel_size") else 4
    # MambaStateDtypeCalculator.kda_state_dtype: the recurrent state is float32 under "auto"
    return StateSpec(conv_elements=3 * heads * dim * (kernel - 1), ssm_elements=heads * dim * dim, ssm_element_bytes=4,
                     description=f"Kimi Delta Attention: {heads} heads x {dim} x {dim} (float32), conv {kernel}")


def parse_geometry(config: dict) -> ModelGeometry:
    """Derive the per-layer KV geometry of a config dict.

    Raises:
        ConfigError: the config is not a dict, misses the layer or head count, has a zero,
            negative, non-integer or absurd value, heads not divisible by KV heads,
            ``layer_types`` of the wrong length or with unknown names, and similar; the
            message names the field, the value and the reason.
    """
    if not isinstance(config, dict):
        raise ConfigError("config", type(config).__name__, "must be a JSON object")
    # one canonical text serves as the cache key's source and as config_hash (configs of several
    # MiB are keyed by their digest, so the cache never holds their text)
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str, allow_nan=True)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    hit = _GEOMETRIES.get(digest)
    if hit is None:
        hit = _parse(json.loads(canonical), digest)
        _GEOMETRIES.put(digest, hit)
    return hit  # type: ignore[return-value]


# parsed geometries by config digest, bounded in bytes (a 10,000-layer geometry holds ~11 MB)
_GEOMETRIES = ByteBudgetCache(32 << 20)


def _parse(config: dict, digest: str) -> ModelGeometry:
    cfg, path, notes = select_text_config(config)
    where = f"{path}." if path else ""
    model_type = str(cfg.get("model_type") or config.get("model_type") or "unknown")
    n_layers, heads, hidden = _sizes(cfg, where)
    max_pos = _max_positions(cfg, model_type, where, notes)
    mla = _mla(cfg, where)
    kv_heads = _kv_heads(cfg, heads, where, notes)
    hidden, kv_heads, head_dim, v_head_dim = _attention_dims(cfg, heads, kv_heads, hidden, mla, where, notes)

    kinds, windows = _layer_kinds(cfg, n_layers, model_type, where, notes, max_pos)
    mamba = _mamba_state(cfg, hidden, where) if "mamba" in kinds else None
    linear = None
    if "linear_attention" in kinds:
        linear = _kda_state(cfg["linear_attn_config"], where) if isinstance(cfg.get("linear_attn_config"), dict) else _linear_state(cfg, where)
    _check_cache_size(kinds, kv_heads, head_dim, v_head_dim, mamba, linear, where)
    shapes = _layer_shapes(cfg, kinds, (kv_heads, head_dim, v_head_dim), heads, where, notes)
    layers = []
    for i, (kind, window) in enumerate(zip(kinds, windows, strict=True)):
        cached = kind in ("full", "sliding", "chunked", "cross")
        layer_heads, k_dim, v_dim = shapes[i] if cached else (0, 0, 0)
        layers.append(LayerSpec(index=i, kind=kind, window=window, kv_heads=layer_heads, k_head_dim=k_dim, v_head_dim=v_dim))
    cached_heads = {layer.kv_heads for layer in layers if layer.kv_heads}
    if mla is None and cached_heads and kv_heads not in cached_heads:
        kv_heads = max(cached_heads)  # e.g. Nemotron-NAS: num_key_value_heads is null, the blocks say
    compressed = _compressed(cfg, n_layers, head_dim, where, notes)
    indexer = None if compressed else _indexer(cfg, n_layers, kinds, where, notes)
    mtp_layers, mtp_indexer = _mtp_layers(cfg, layers, indexer, where, notes)
    if not any(layer.kind in ("full", "sliding", "chunked", "mla") for layer in layers) and not (mamba or linear):
        raise ConfigError(f"{where}layer_types", "no attention layers", "the config has no layer that holds a cache or state")
    weights = _weights_fields(config, cfg, n_layers, model_type, where, notes)
    return ModelGeometry(
        model_type=model_type,
        config_path=path,
        num_layers=n_layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        hidden_size=hidden,
        max_position_embeddings=max_pos,
        mla=mla,
        mamba=mamba,
        linear=linear,
        indexer=indexer,
        compressed=compressed,
        layers=tuple(layers),
        mtp_layers=mtp_layers,
        mtp_indexer_layers=mtp_indexer,
        **weights,
        notes=tuple(notes),
        config_hash=digest,
    )


def _sizes(cfg: dict, where: str) -> tuple[int, int, int | None]:
    """(layers, attention heads, hidden size or None) under any of their names."""
    found = _first(cfg, LAYER_COUNT_KEYS, where=where, hi=MAX_LAYERS)
    if not found and isinstance(cfg.get("layers_block_type"), list) and 0 < len(cfg["layers_block_type"]) <= MAX_LAYERS:
        # Nemotron 3 Ultra gives no num_hidden_layers: its NemotronHConfig counts layers_block_type
        found = ("layers_block_type", len(cfg["layers_block_type"]))
    if not found:
        raise ConfigError(f"{where}num_hidden_layers", None, f"missing: no layer count ({one_of((*LAYER_COUNT_KEYS, 'a layers_block_type list'))})")
    n_layers = found[1]
    found = _first(cfg, ATTENTION_HEAD_KEYS, where=where, hi=MAX_HEADS)
    if not found:
        raise ConfigError(f"{where}num_attention_heads", None, f"missing: no attention head count ({one_of(ATTENTION_HEAD_KEYS)})")
    heads = found[1]
    found = _first(cfg, HIDDEN_SIZE_KEYS, where=where)
    return n_layers, heads, found[1] if found else None


def _max_positions(cfg: dict, model_type: str, where: str, notes: list[str]) -> int | None:
    """The context limit the config gives, else its architecture's class default (as transformers)."""
    max_pos = next((_int_field(cfg, k, hi=MAX_POSITIONS, where=where) for k in MAX_POSITION_KEYS if _present(cfg, k)), None)
    if max_pos is None:  # transformers would use the class default
        default = arch_defaults()["defaults"].get(model_type, {})
        max_pos = next((default[k] for k in MAX_POSITION_KEYS if isinstance(default.get(k), int)), None)
        if max_pos is not None:
            notes.append(f"no maximum context in the config: {model_type}'s class default of {max_pos:,} tokens applies")
    return max_pos


def _attention_dims(cfg: dict, heads: int, kv_heads: int, hidden: int | None, mla: MLASpec | None, where: str, notes: list[str]) -> tuple[int, int, int, int]:
    """(hidden size, KV heads, K head dim, V head dim), checked; MLA caches one latent per head group."""
    if hidden is None:
        if not _present(cfg, "head_dim") and mla is None:
            raise ConfigError(f"{where}hidden_size", None, "missing: need hidden_size (or n_embd/d_model) or an explicit head_dim")
        hidden = heads * (_int_field(cfg, "head_dim", where=where) if _present(cfg, "head_dim") else mla.v_head_dim)  # type: ignore[union-attr]
    if hidden < heads:
        raise ConfigError(f"{where}hidden_size", hidden, f"is below num_attention_heads={heads}: every head needs at least one dimension of the hidden state, no engine could load it")
    head_dim = _head_dim(cfg, hidden, heads, where, notes) if mla is None else mla.qk_nope_head_dim + mla.qk_rope_head_dim
    v_head_dim = mla.v_head_dim if mla else head_dim
    if mla is None:
        if kv_heads > heads:
            raise ConfigError(f"{where}num_key_value_heads", kv_heads, f"exceeds num_attention_heads={heads}")
        if heads % kv_heads:
            raise ConfigError(f"{where}num_key_value_heads", kv_heads, f"does not divide num_attention_heads={heads}")
    else:
        kv_heads = heads
        notes.append(f"MLA: paged runtimes cache one {mla.latent_dim}-element latent (kv_lora_rank {mla.kv_lora_rank} + rope {mla.qk_rope_head_dim}) per layer and token")
    return hidden, kv_heads, head_dim, v_head_dim


def _first_positive(cfg: dict, keys: tuple[str, ...]) -> tuple[str, float] | None:
    """(key, value) of the first positive number among ``keys``, as the weights estimate reads them."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return key, value
    return None


def _moe_consistency(cfg: dict, n_layers: int, where: str) -> None:
    """Refuse MoE fields no engine could load: more experts per token than experts, a dense-prefix
    or MoE stride beyond the layer count, an MLP-only layer index outside the layers."""
    scope = {**cfg["ffn_config"], **cfg} if isinstance(cfg.get("ffn_config"), dict) else cfg  # DBRX
    experts, per_token = _first_positive(scope, ROUTED_EXPERT_KEYS), _first_positive(scope, EXPERTS_PER_TOKEN_KEYS)
    if experts and per_token and per_token[1] > experts[1]:
        raise ConfigError(f"{where}{per_token[0]}", per_token[1], f"routes each token to more experts than the {experts[1]:,g} routed experts ({experts[0]}): no engine could load it")
    for key in LAYER_INDEX_KEYS:
        found = _first_positive(scope, (key,))
        if found and found[1] > n_layers:
            raise ConfigError(f"{where}{key}", found[1], f"is beyond the model's {n_layers:,} layers (num_hidden_layers)")
    only = scope.get("mlp_only_layers")
    if isinstance(only, list):
        for idx in only:
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n_layers:
                raise ConfigError(f"{where}mlp_only_layers", idx, f"layer index must be in 0..{n_layers - 1}")


def _weights_fields(config: dict, cfg: dict, n_layers: int, model_type: str, where: str, notes: list[str]) -> dict:
    """The fields the weights estimate reads: typed here, so a string never silently becomes a default."""
    _moe_consistency(cfg, n_layers, where)
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or config.get("dtype")
    archs = config.get("architectures") or cfg.get("architectures") or ()
    if isinstance(cfg.get("intermediate_size"), list):  # per-layer sizes (Gemma 3n)
        sizes = cfg["intermediate_size"]
        if len(sizes) != n_layers:
            raise ConfigError(f"{where}intermediate_size", f"{len(sizes)} entries", f"a per-layer list must have num_hidden_layers={n_layers} entries")
        inter = max(_int_field({"intermediate_size": v}, "intermediate_size", where=where) for v in sizes)
    else:
        inter = _optional_int(cfg, "intermediate_size", where=where)
    vocab = next((_int_field(src, k, hi=1 << 24, where=w) for src, w in ((cfg, where), (config, "")) for k in VOCAB_KEYS if _present(src, k)), None)
    if vocab is None:
        vocab = arch_defaults()["defaults"].get(model_type, {}).get("vocab_size")
        if vocab is not None:
            notes.append(f"no vocab_size in the config: {model_type}'s class default of {vocab:,} applies")
    tie_src = cfg if "tie_word_embeddings" in cfg else config
    return {
        "architectures": tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": _bool_field(tie_src, "tie_word_embeddings", model_type.startswith("gemma"), where if tie_src is cfg else ""),
        "torch_dtype": dtype if isinstance(dtype, str) else None,
    }


def text_config(config: dict) -> dict:
    """The decoder's config dict (nested text config completed with defaults) for other modules."""
    return select_text_config(config)[0]
