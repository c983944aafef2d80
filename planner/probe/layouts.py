"""The cache tensors a runtime lays out for a geometry (pure Python, no torch).

``vllm``: paged K/V blocks per layer, exactly :mod:`planner.kv`'s ``paged_bytes``;
``transformers``: per-layer K/V as transformers 5.24's caches hold them (see the package
docstring for the sliding-window storage rule and MLA's compressed latent).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.geometry import ModelGeometry
from planner.kv import KV_DTYPE_BITS, QUANT_GROUP, kv_specs
from planner.probe.protocol import ELEMENT_BYTES, TORCH_DTYPE, CacheTensor


def _vector_tensors(layer: str, role: str, lead: tuple[int, ...], heads: int | None, dim: int, kv_dtype: str) -> list[CacheTensor]:
    """Tensors for ``lead x heads`` vectors of ``dim`` elements, scales included as kv.py counts them."""
    if dim <= 0:
        return []
    head = (heads,) if heads else ()
    if kv_dtype in ("int8", "int4"):
        packed = (dim * KV_DTYPE_BITS[kv_dtype] + 7) // 8
        groups = -(-dim // QUANT_GROUP)
        return [
            CacheTensor(layer=layer, role=role, shape=(*lead, *head, packed), dtype=TORCH_DTYPE[kv_dtype]),
            CacheTensor(layer=layer, role=f"{role}_scale_zero", shape=(*lead, *head, groups, 2), dtype="float16"),
        ]
    return [CacheTensor(layer=layer, role=role, shape=(*lead, *head, dim), dtype=TORCH_DTYPE[kv_dtype])]


def _label(kind: str, window: int | None) -> str:
    return f"{kind}-{window}" if window else kind


def vllm_layout(geo: ModelGeometry, kv_dtype: str, tokens: int, batch: int, block_tokens: int, tp: int = 1) -> list[CacheTensor]:
    """Paged K/V blocks one GPU holds for ``batch`` sequences of ``tokens`` tokens (vLLM layout)."""
    out: list[CacheTensor] = []
    for spec in kv_specs(geo, kv_dtype, tp, "vllm"):
        blocks = batch * spec.blocks(tokens, block_tokens)
        if blocks == 0:
            continue
        lead = (blocks, block_tokens)
        for i in range(spec.num_layers):
            name = f"{_label(spec.kind, spec.window)}[{i}]"
            if spec.latent:
                out += _vector_tensors(name, "latent", lead, None, spec.k_head_dim, kv_dtype)
            else:
                out += _vector_tensors(name, "k", lead, spec.kv_heads_per_gpu, spec.k_head_dim, kv_dtype)
                out += _vector_tensors(name, "v", lead, spec.kv_heads_per_gpu, spec.v_head_dim, kv_dtype)
    return out


class TransformersLayer(BaseModel):
    """What one decoder layer's transformers cache holds per position."""

    model_config = ConfigDict(frozen=True)

    index: int
    kind: str
    window: int | None
    heads: int
    k_dim: int
    v_dim: int


def transformers_layers(geo: ModelGeometry) -> list[TransformersLayer]:
    """The cached layers of ``geo`` as transformers 5.24 lays them out.

    MLA layers cache the compressed latent as one head (K = kv_lora_rank, V = rope part);
    chunked-attention layers are sliding windows of the chunk size. Cross-attention, recurrent
    and KV-sharing layers are not K/V layers here.
    """
    out = []
    for layer in geo.layers:
        if layer.kind not in ("full", "sliding", "chunked"):
            continue
        if geo.mla is not None:
            heads, k, v = 1, geo.mla.kv_lora_rank, geo.mla.qk_rope_head_dim
        else:
            heads, k, v = layer.kv_heads, layer.k_head_dim, layer.v_head_dim
        out.append(TransformersLayer(index=layer.index, kind=layer.kind, window=layer.window if layer.kind != "full" else None, heads=heads, k_dim=k, v_dim=v))
    return out


def transformers_positions(window: int | None, cached: int, last_step: int, static_len: int | None = None) -> tuple[int, int]:
    """(positions in the view, positions its storage keeps) of one transformers cache layer.

    ``cached`` positions have gone through the layer, the last forward adding ``last_step`` of
    them. Dynamic full layers hold all of them. ``DynamicSlidingWindowLayer`` keeps
    ``full[:, :, -W + 1:]`` of ``full = cat(previous view, new)``: the view holds
    ``min(cached, W - 1)`` positions, its storage ``min(cached - last_step, W - 1) + last_step``
    (W after a decode step, the whole prompt after a prefill longer than W). A window of 1 keeps
    everything (the slice ``[-0:]`` is the whole tensor). Static layers hold ``max_cache_len``
    (sliding: ``min(max_cache_len, W)``) from their first forward on.
    """
    if static_len is not None:
        n = static_len if window is None else min(static_len, window)
        return n, n
    if window is None or window <= 1:
        return cached, cached
    last_step = min(last_step, cached)
    return min(cached, window - 1), min(cached - last_step, window - 1) + last_step


def transformers_layout(geo: ModelGeometry, kv_dtype: str, cached: int, batch: int, *, last_step: int = 1, static_len: int | None = None, logical: bool = False) -> list[CacheTensor]:
    """Per-layer K/V ``[batch, heads, positions, dim]`` a transformers cache holds (storage, or views when ``logical``)."""
    out: list[CacheTensor] = []
    dtype = TORCH_DTYPE[kv_dtype]
    for layer in transformers_layers(geo):
        view, storage = transformers_positions(layer.window, cached, last_step, static_len)
        pos = view if logical else storage
        name = f"{_label(layer.kind, layer.window)}[{layer.index}]"
        out.append(CacheTensor(layer=name, role="k", shape=(batch, layer.heads, pos, layer.k_dim), dtype=dtype))
        out.append(CacheTensor(layer=name, role="v", shape=(batch, layer.heads, pos, layer.v_dim), dtype=dtype))
    return out


def predicted_transformers_cache_bytes(geo: ModelGeometry, tokens: int, batch: int, dtype: str, *, last_step: int = 1, static_len: int | None = None, logical: bool = False) -> int:
    """Bytes a transformers 5.24 cache keeps after ``tokens`` positions (storage; views when ``logical``).

    The default ``last_step=1`` is the steady state of decoding (sliding layers: ``min(tokens, W)``
    positions of storage, ``min(tokens, W - 1)`` in the view); ``last_step=tokens`` is the state
    right after a prefill of ``tokens``. MLA counts the compressed latent.
    """
    if dtype not in ELEMENT_BYTES and dtype not in TORCH_DTYPE:
        raise PlannerError("dtype", dtype, f"unknown dtype; choose one of {', '.join(ELEMENT_BYTES)}")
    return sum(t.nbytes for t in transformers_layout(geo, dtype, tokens, batch, last_step=last_step, static_len=static_len, logical=logical))


def planner_kv_bytes(geo: ModelGeometry, kv_dtype: str, tokens: int, batch: int, runtime: str, tp: int = 1, block_tokens: int | None = None) -> int:
    """What :mod:`planner.kv` predicts: paged bytes for vllm (with ``block_tokens``), else ``bytes_at``."""
    specs = kv_specs(geo, kv_dtype, tp, runtime)
    if block_tokens is not None:
        return batch * sum(s.paged_bytes(tokens, block_tokens) for s in specs)
    return batch * sum(s.bytes_at(tokens) for s in specs)
