"""Exact per-layer KV geometry from a Hugging Face ``config.json``.

:func:`parse_geometry` turns an untrusted config dict into a frozen :class:`ModelGeometry` with
one :class:`LayerSpec` per decoder layer. It knows the key aliases of the major families, nested
``text_config``/``language_config``/``llm_config`` of multimodal wrappers, sliding and
interleaved local/global layers, chunked local attention, MLA latents, hybrid Mamba and
linear-attention stacks, cross-attention layers and KV-shared layers.

Nothing here depends on a runtime or a dtype: :mod:`planner.kv` turns the geometry into bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.errors import ConfigError
from planner.limits import MAX_DIM, MAX_HEADS, MAX_KV_BYTES_PER_TOKEN, MAX_LAYERS, MAX_POSITIONS, ByteBudgetCache, check_number

LayerKind = Literal["full", "sliding", "chunked", "cross", "mamba", "linear_attention", "none"]
KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "cross", "mamba", "linear_attention", "none")

# MAX_LAYERS, MAX_HEADS, MAX_DIM, MAX_POSITIONS: ranges documented in planner/limits.py

TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")

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
}

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


class StateSpec(BaseModel):
    """Recurrent state of one Mamba or linear-attention layer, per sequence, in elements."""

    model_config = _FROZEN

    conv_elements: int
    ssm_elements: int
    description: str


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
    layers: tuple[LayerSpec, ...]
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


_REQUIRED_ALIASES = {
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "heads": ("num_attention_heads", "n_head", "n_heads"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
}


def _is_sparse(cfg: dict) -> bool:
    return any(not any(_present(cfg, k) for k in keys) for keys in _REQUIRED_ALIASES.values())


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
    attn_config = cfg.get("attn_config")
    if isinstance(attn_config, dict) and _present(attn_config, "kv_n_heads"):
        return _int_field(attn_config, "kv_n_heads", hi=MAX_HEADS, where=f"{where}attn_config.")
    new_arch = cfg.get("new_decoder_architecture") is True
    if cfg.get("multi_query") is True and not new_arch:
        # Falcon (old architecture) and GPT-BigCode: one KV head, whatever num_kv_heads says
        # (transformers re-saves Falcon-7B with num_kv_heads = num_attention_heads)
        notes.append("multi_query: one KV head shared by all query heads")
        return 1
    if new_arch:
        found = _first(cfg, ("num_kv_heads", "n_head_kv", "num_key_value_heads"), where=where, hi=MAX_HEADS)
        return found[1] if found else heads
    found = _first(cfg, ("num_key_value_heads", "num_kv_heads", "n_head_kv"), where=where, hi=MAX_HEADS)
    if found:
        return found[1]
    if _present(cfg, "multi_query_group_num") and cfg.get("multi_query_attention", True):
        return _int_field(cfg, "multi_query_group_num", hi=MAX_HEADS, where=where)
    return heads


def _head_dim(cfg: dict, hidden: int, heads: int, where: str, notes: list[str]) -> int:
    for key in ("head_dim", "attention_head_dim", "kv_channels", "d_head"):
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


def _layer_kinds(cfg: dict, n: int, model_type: str, where: str, notes: list[str], max_pos: int | None) -> tuple[list[str], list[int | None]]:
    kinds = ["full"] * n
    windows: list[int | None] = [None] * n

    layer_types = cfg.get("layer_types")
    pattern = cfg.get("hybrid_override_pattern")
    if layer_types is not None:
        if not isinstance(layer_types, list):
            raise ConfigError(f"{where}layer_types", type(layer_types).__name__, "must be a list of layer type names")
        if len(layer_types) != n:
            raise ConfigError(f"{where}layer_types", f"{len(layer_types)} entries", f"must list exactly num_hidden_layers={n} entries")
        for i, name in enumerate(layer_types):
            if not isinstance(name, str) or name not in LAYER_TYPE_NAMES:
                raise ConfigError(f"{where}layer_types[{i}]", name, f"unknown layer type; known: {', '.join(sorted(LAYER_TYPE_NAMES))}")
            kinds[i] = LAYER_TYPE_NAMES[name]
    elif pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != n:
            raise ConfigError(f"{where}hybrid_override_pattern", pattern, f"must be a string of exactly {n} characters (M, *, -, E)")
        table = {"M": "mamba", "*": "full", "-": "none", "E": "none"}
        for i, ch in enumerate(pattern):
            if ch not in table:
                raise ConfigError(f"{where}hybrid_override_pattern[{i}]", ch, "unknown symbol; known: M (Mamba), * (attention), - (MLP), E (MoE)")
            kinds[i] = table[ch]
        notes.append("hybrid_override_pattern: only '*' layers hold K/V; 'M' layers hold recurrent state; '-'/'E' layers hold nothing")
    elif _present(cfg, "attn_layer_period") or model_type == "jamba":
        period = _int_field(cfg, "attn_layer_period", where=where) if _present(cfg, "attn_layer_period") else 8
        offset = _int_field(cfg, "attn_layer_offset", lo=0, where=where) if _present(cfg, "attn_layer_offset") else 4
        if offset >= period:
            raise ConfigError(f"{where}attn_layer_offset", offset, f"must be below attn_layer_period={period}")
        kinds = ["full" if i % period == offset else "mamba" for i in range(n)]
        notes.append(f"Jamba layout: attention every {period} layers at offset {offset}, Mamba elsewhere")
    elif _present(cfg, "full_attention_interval"):
        interval = _int_field(cfg, "full_attention_interval", where=where)
        kinds = ["full" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
        notes.append(f"full attention every {interval} layers, linear attention elsewhere")

    # Llama 4: chunked local attention on RoPE layers, global attention on NoPE layers
    chunk = cfg.get("attention_chunk_size")
    if chunk is not None and layer_types is None:
        chunk = _int_field(cfg, "attention_chunk_size", hi=MAX_POSITIONS, where=where)
        no_rope = cfg.get("no_rope_layers")
        if no_rope is None or no_rope == []:
            interval = _int_field(cfg, "no_rope_layer_interval", where=where) if _present(cfg, "no_rope_layer_interval") else 4
            no_rope = [int((i + 1) % interval != 0) for i in range(n)]
            notes.append(f"no_rope_layers not given: every {interval}th layer is global (transformers default)")
        if not isinstance(no_rope, list) or len(no_rope) != n:
            raise ConfigError(f"{where}no_rope_layers", no_rope if not isinstance(no_rope, list) else f"{len(no_rope)} entries", f"must list exactly {n} flags")
        for i, flag in enumerate(no_rope):
            if flag not in (0, 1, True, False):
                raise ConfigError(f"{where}no_rope_layers[{i}]", flag, "must be 0 or 1")
            if flag and kinds[i] == "full":
                kinds[i] = "chunked"
    if "chunked" in kinds:
        if chunk is None:
            raise ConfigError(f"{where}attention_chunk_size", None, "layer_types has chunked_attention layers but no attention_chunk_size")
        chunk = _int_field(cfg, "attention_chunk_size", hi=MAX_POSITIONS, where=where)
        for i, k in enumerate(kinds):
            if k == "chunked":
                windows[i] = chunk

    # sliding windows
    window = _optional_int(cfg, "sliding_window", where=where, hi=MAX_POSITIONS)
    use_sliding = _bool_field(cfg, "use_sliding_window", True, where)
    if window is not None and use_sliding and layer_types is None and "sliding" not in kinds:
        every = cfg.get("sliding_window_pattern")
        if every is None:
            every = SLIDING_PATTERN_DEFAULTS.get(model_type)
            if every is not None:
                notes.append(f"{model_type}: {every - 1} local layer(s) to 1 global (class default)")
        else:
            every = _int_field(cfg, "sliding_window_pattern", where=where)
        max_window_layers = _optional_int(cfg, "max_window_layers", lo=0, hi=MAX_LAYERS, where=where)
        for i in range(n):
            if kinds[i] != "full":
                continue
            if every is not None and (i + 1) % every == 0:
                continue
            if model_type.startswith("qwen2") and max_window_layers is not None and i < max_window_layers:
                continue
            kinds[i] = "sliding"
    elif window is not None and not use_sliding and layer_types is None:
        notes.append(f"use_sliding_window is false: sliding_window {window} ignored, every layer attends fully")
    if "sliding" in kinds:
        if window is None:
            raise ConfigError(f"{where}sliding_window", None, "layer_types has sliding_attention layers but no sliding_window")
        if max_pos is not None and window >= max_pos:
            notes.append(f"sliding_window {window:,} >= max_position_embeddings {max_pos:,}: the window never binds, layers counted as full")
            kinds = ["full" if k == "sliding" else k for k in kinds]
        else:
            for i, k in enumerate(kinds):
                if k == "sliding":
                    windows[i] = window

    # Llama 3.2 Vision: cross-attention layers over the image encoder's states
    cross = cfg.get("cross_attention_layers")
    if cross:
        if not isinstance(cross, list):
            raise ConfigError(f"{where}cross_attention_layers", cross, "must be a list of layer indices")
        for idx in cross:
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
                raise ConfigError(f"{where}cross_attention_layers", idx, f"layer index must be in 0..{n - 1}")
            kinds[idx] = "cross"
            windows[idx] = None
        notes.append(f"{len(set(cross))} cross-attention layers cache the image encoder's states, not the text tokens")

    # Gemma 3n: the last layers reuse the K/V of earlier layers
    shared = _optional_int(cfg, "num_kv_shared_layers", lo=0, hi=MAX_LAYERS, where=where)
    if shared:
        if shared >= n:
            raise ConfigError(f"{where}num_kv_shared_layers", shared, f"must be below num_hidden_layers={n}")
        for i in range(n - shared, n):
            kinds[i] = "none"
            windows[i] = None
        notes.append(f"the last {shared} layers reuse earlier layers' K/V and cache nothing")
    return kinds, windows


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
    d_conv = next((_int_field(cfg, k, where=where) for k in ("mamba_d_conv", "conv_kernel", "mamba_conv_kernel") if _present(cfg, k)), 4)
    d_state = next((_int_field(cfg, k, where=where) for k in ("mamba_d_state", "ssm_state_size", "state_size") if _present(cfg, k)), 16)
    if _present(cfg, "mamba_num_heads") and _present(cfg, "mamba_head_dim"):  # Mamba-2
        nheads = _int_field(cfg, "mamba_num_heads", where=where)
        head_dim = _int_field(cfg, "mamba_head_dim", where=where)
        groups = _int_field(cfg, "n_groups", where=where) if _present(cfg, "n_groups") else 1
        d_inner = nheads * head_dim
        conv = (d_inner + 2 * groups * d_state) * (d_conv - 1)
        return StateSpec(conv_elements=conv, ssm_elements=nheads * head_dim * d_state, description=f"Mamba-2: {nheads} heads x {head_dim} x state {d_state}, conv {d_conv}")
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
    canonical = json.dumps(config, sort_keys=True, default=str, allow_nan=True)
    key = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    hit = _PARSED.get(key)
    if hit is None:
        hit = _parse_canonical(canonical)
        _PARSED.put(key, hit)
    return hit  # type: ignore[return-value]


# parsed geometries by config hash, bounded in bytes (a 10,000-layer geometry holds ~11 MB)
_PARSED = ByteBudgetCache(32 << 20)


def _parse_canonical(canonical: str) -> ModelGeometry:
    config = json.loads(canonical)
    cfg, path, notes = select_text_config(config)
    where = f"{path}." if path else ""
    model_type = str(cfg.get("model_type") or config.get("model_type") or "unknown")

    found = _first(cfg, _REQUIRED_ALIASES["layers"], where=where, hi=MAX_LAYERS)
    if not found:
        raise ConfigError(f"{where}num_hidden_layers", None, "missing: no layer count (num_hidden_layers, n_layer, n_layers or num_layers)")
    n_layers = found[1]
    found = _first(cfg, _REQUIRED_ALIASES["heads"], where=where, hi=MAX_HEADS)
    if not found:
        raise ConfigError(f"{where}num_attention_heads", None, "missing: no attention head count (num_attention_heads, n_head or n_heads)")
    heads = found[1]
    found = _first(cfg, _REQUIRED_ALIASES["hidden"], where=where)
    hidden = found[1] if found else None
    max_pos = next(
        (_int_field(cfg, k, hi=MAX_POSITIONS, where=where) for k in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len") if _present(cfg, k)),
        None,
    )
    if max_pos is None:  # transformers would use the class default
        default = arch_defaults()["defaults"].get(model_type, {})
        max_pos = next((default[k] for k in ("max_position_embeddings", "n_positions") if isinstance(default.get(k), int)), None)
        if max_pos is not None:
            notes.append(f"no maximum context in the config: {model_type}'s class default of {max_pos:,} tokens applies")

    mla = _mla(cfg, where)
    kv_heads = _kv_heads(cfg, heads, where, notes)
    if hidden is None:
        if not _present(cfg, "head_dim") and mla is None:
            raise ConfigError(f"{where}hidden_size", None, "missing: need hidden_size (or n_embd/d_model) or an explicit head_dim")
        hidden = heads * (_int_field(cfg, "head_dim", where=where) if _present(cfg, "head_dim") else mla.v_head_dim)  # type: ignore[union-attr]
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

    kinds, windows = _layer_kinds(cfg, n_layers, model_type, where, notes, max_pos)
    mamba = _mamba_state(cfg, hidden, where) if "mamba" in kinds else None
    linear = _linear_state(cfg, where) if "linear_attention" in kinds else None

    _check_cache_size(kinds, kv_heads, head_dim, v_head_dim, mamba, linear, where)
    layers = []
    for i, (kind, window) in enumerate(zip(kinds, windows, strict=True)):
        cached = kind in ("full", "sliding", "chunked", "cross")
        layers.append(
            LayerSpec(
                index=i,
                kind=kind,
                window=window,
                kv_heads=kv_heads if cached else 0,
                k_head_dim=head_dim if cached else 0,
                v_head_dim=v_head_dim if cached else 0,
            )
        )
    if not any(layer.kind in ("full", "sliding", "chunked", "mla") for layer in layers) and not (mamba or linear):
        raise ConfigError(f"{where}layer_types", "no attention layers", "the config has no layer that holds a cache or state")

    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or config.get("dtype")
    archs = config.get("architectures") or cfg.get("architectures") or ()
    # fields the weights estimate reads: typed here, so a string never silently becomes a default
    if isinstance(cfg.get("intermediate_size"), list):  # per-layer sizes (Gemma 3n)
        sizes = cfg["intermediate_size"]
        if len(sizes) != n_layers:
            raise ConfigError(f"{where}intermediate_size", f"{len(sizes)} entries", f"a per-layer list must have num_hidden_layers={n_layers} entries")
        inter = max(_int_field({"intermediate_size": v}, "intermediate_size", where=where) for v in sizes)
    else:
        inter = _optional_int(cfg, "intermediate_size", where=where)
    vocab = next((_int_field(src, k, hi=1 << 24, where=w) for src, w in ((cfg, where), (config, "")) for k in ("vocab_size", "padded_vocab_size") if _present(src, k)), None)
    if vocab is None:
        vocab = arch_defaults()["defaults"].get(model_type, {}).get("vocab_size")
        if vocab is not None:
            notes.append(f"no vocab_size in the config: {model_type}'s class default of {vocab:,} applies")
    tie_src = cfg if "tie_word_embeddings" in cfg else config
    tie = _bool_field(tie_src, "tie_word_embeddings", model_type.startswith("gemma"), where if tie_src is cfg else "")
    return ModelGeometry(
        model_type=model_type,
        architectures=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
        config_path=path,
        num_layers=n_layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        hidden_size=hidden,
        intermediate_size=inter,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        tie_word_embeddings=tie,
        torch_dtype=dtype if isinstance(dtype, str) else None,
        mla=mla,
        mamba=mamba,
        linear=linear,
        layers=tuple(layers),
        notes=tuple(notes),
        config_hash=config_hash(config),
    )


def text_config(config: dict) -> dict:
    """The decoder's config dict (nested text config completed with defaults) for other modules."""
    return select_text_config(config)[0]
