"""vLLM's KV-cache groups: layers of one spec in buckets, pages unified, hybrid blocks aligned.

``get_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py; kv_cache_utils.py before 0.33):
one :class:`Bucket` per layer spec, pages unified as ``unify_kv_cache_spec_page_size`` does
(:func:`unified_buckets`), or one group of every layer when all are attention of one type
(``UniformTypeKVCacheSpecs``). For Mamba / linear-attention hybrids the attention block first
grows until one page holds a state (:func:`align_hybrid_block`). DeepSeek-V4's packed groups
are :mod:`planner.engines.vllm.packed`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.engines.common import EngineRefusal
from planner.engines.vllm.rules import Rules
from planner.engines.vllm.specs import FLASH_ATTN_BLOCK, FLASHMLA_BLOCK, StatePage, StateRule, spec_kind
from planner.geometry import ModelGeometry
from planner.kv import KVSpec


@dataclass(frozen=True, slots=True)
class Bucket:
    """Layers of one spec after page unification: what ``same_type_layers`` holds in vLLM; or,
    with ``members``, one group of layers of one type whose pages differ (``UniformTypeKVCacheSpecs``)."""

    spec: KVSpec | StatePage
    first_layer: int
    block_size: int
    page_bytes: int
    members: tuple[KVSpec, ...] = ()
    kind: str = field(default="", init=False)  # full, sliding, mla, "indexer+mla", ...: set once, read on every result

    def __post_init__(self) -> None:
        if self.members:
            kind = "+".join(dict.fromkeys(spec_kind(s) for s in self.members))
        else:
            kind = self.spec.kind if isinstance(self.spec, StatePage) else spec_kind(self.spec)
        object.__setattr__(self, "kind", kind)

    @property
    def layers(self) -> int:
        if self.members:
            return sum(s.num_layers for s in self.members)
        return self.spec.num_layers

    def blocks_at(self, length: int, in_flight: int, state: StateRule) -> int:
        if isinstance(self.spec, StatePage):
            return state.blocks(length)
        return self.spec.admission_blocks(length, self.block_size, in_flight)


def align_hybrid_block(specs: tuple[KVSpec, ...], states: list[StatePage], block: int, mla: bool, rules: Rules, mode: str, chunk: int) -> tuple[int, int, int]:
    """``Platform._align_hybrid_block_size`` (0.24, 0.33; ``HybridAttentionMambaModelConfig``
    in 0.19): grow the attention block until one attention page holds the largest state; states
    are then padded to exactly one attention page. Returns the attention block, the padded state
    page and the state's block (``mamba_block_size``; in "all" mode a multiple of the model's
    Mamba chunk)."""
    per_token = max(s.bytes_per_token_per_layer for s in specs)
    state = max(p.state_bytes for p in states)
    if rules.checkpoint_grid:  # 0.33
        kernel = max(FLASH_ATTN_BLOCK, block)
        if mla:
            kernel = max(kernel, 128)  # TRTLLM/FlashInfer MLA decode kernels
        if mode == "align":
            kernel = math.lcm(kernel, *(p.checkpoint_alignment for p in states))
        attn_block = kernel * -(-state // (kernel * per_token))
        attn_block = FLASH_ATTN_BLOCK * -(-attn_block // FLASH_ATTN_BLOCK)
        block = max(block, attn_block)
        return block, block * per_token, block
    kernel = max(FLASHMLA_BLOCK if mla else FLASH_ATTN_BLOCK, block)  # the backend's smallest kernel block
    if mode == "all":
        grid = math.lcm(chunk, kernel)
        tokens_per_state = -(-state // per_token)
        attn_block = grid * -(-tokens_per_state // grid)
    else:
        attn_block = kernel * -(-state // (kernel * per_token))
    block = max(block, attn_block)
    return block, block * per_token, attn_block if mode == "all" else block


def group_split(buckets: list[Bucket], rules: Rules) -> tuple[tuple[tuple[Bucket, int], ...], int, int]:
    """``get_kv_cache_groups``: each bucket with the number of groups its layers split into, the
    group size (layers per group) and the bytes of one block across a group. One spec: one group
    of every layer; else the smallest layer count, or (0.19+) the largest when within 1.5x."""
    if len(buckets) == 1:
        group_size = buckets[0].layers
    else:
        group_size = min(b.layers for b in buckets)
        most = max(b.layers for b in buckets)
        if rules.group_near_max and most < group_size * 1.5:
            group_size = most
    split = tuple((b, -(-b.layers // group_size)) for b in buckets)
    # one block across a group: its largest group's layers x the (unified) page (a uniform-type
    # group's page already spans all its layers)
    bytes_per_block = max(b.page_bytes if b.members else len(range(0, b.layers, n)) * b.page_bytes for b, n in split)
    return split, group_size, bytes_per_block


def _first_layers(geo: ModelGeometry) -> dict[tuple[str, int | None], int]:
    first: dict[tuple[str, int | None], int] = {}
    for layer in geo.layers:
        first.setdefault((layer.kind, layer.window), layer.index)
    if geo.indexer is not None and geo.indexer.layers:
        first[("indexer", None)] = min(geo.indexer.layers)
    return first


def unified_buckets(geo: ModelGeometry, specs: tuple[KVSpec, ...], states: list[StatePage], state_pad: int | None, block: int, rules: Rules) -> list[Bucket]:
    """One bucket per spec, pages unified as ``unify_kv_cache_spec_page_size`` does: a smaller
    attention page that divides the largest grows its block by the ratio, any other smaller
    page (a Mamba state, an odd attention page) is padded; ordered by each spec's first layer."""
    first = _first_layers(geo)
    uniform = _uniform_type(specs, states, first, block) if rules.uniform_type_specs else None  # 0.10 has no UniformTypeKVCacheSpecs
    if uniform is not None:
        return [uniform]
    sliding_block = max(FLASH_ATTN_BLOCK, block // FLASH_ATTN_BLOCK * FLASH_ATTN_BLOCK)  # FLASH_ATTN MultipleOf(16)
    raw: list[Bucket] = []
    for s in specs:
        b = sliding_block if s.kind == "sliding" else block
        raw.append(Bucket(s, first.get((s.kind, s.window), len(geo.layers)), b, s.layer_page_bytes(b)))
    for p in states:
        raw.append(Bucket(p, first.get((p.kind, None), 0), block, state_pad or p.state_bytes))
    largest = max(b.page_bytes for b in raw)
    if not rules.unify_pages and any(b.page_bytes != largest for b in raw if isinstance(b.spec, KVSpec)):
        # vLLM 0.10 get_kv_cache_config / 0.11 get_kv_cache_groups: neither one spec nor one page size -> NotImplementedError
        raise EngineRefusal("model", (geo.architectures or (geo.model_type,))[0], f"vLLM {rules.version} cannot lay out KV-cache pages of different sizes (get_kv_cache_config raises NotImplementedError)")
    out = []
    for b in raw:
        if b.page_bytes != largest and isinstance(b.spec, KVSpec) and largest % b.page_bytes == 0:
            b = Bucket(b.spec, b.first_layer, b.block_size * (largest // b.page_bytes), largest)
        elif b.page_bytes != largest:
            b = Bucket(b.spec, b.first_layer, b.block_size, largest)
        out.append(b)
    out.sort(key=lambda b: b.first_layer)
    if rules.sort_groups_by_type:  # 0.10 unify_kv_cache_configs: groups sorted by spec class name
        out.sort(key=lambda b: _SPEC_CLASS.get(b.kind, b.kind))
    return out


_SPEC_CLASS = {"full": "FullAttentionSpec", "mla": "FullAttentionSpec", "sliding": "SlidingWindowSpec", "chunked": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec", "linear_attention": "MambaSpec"}


def _uniform_type(specs: tuple[KVSpec, ...], states: list[StatePage], first: dict, block: int) -> Bucket | None:
    """``UniformTypeKVCacheSpecs.from_specs`` (vllm/v1/kv_cache_interface.py): when every layer is
    attention of one type (all full, incl. MLA latents and indexer keys, or all one window) at one
    block size but the specs differ, vLLM keeps one group of every layer; a block then spans every
    layer's page. Layers in model order: a layer's indexer is built before its attention."""
    if states or len(specs) < 2 or len({(s.kind, s.window) for s in specs}) > 1 or specs[0].kind == "cross":
        return None
    ordered = tuple(sorted(specs, key=lambda s: (first.get(("indexer", None) if s.cache == "indexer" else (s.kind, s.window), 0), s.cache != "indexer")))
    return Bucket(ordered[0], first.get((specs[0].kind, specs[0].window), 0), block, sum(s.num_layers * s.layer_page_bytes(block) for s in specs), ordered)
