"""DeepSeek-V4's caches, packed into KV-cache groups block-outermost.

vLLM 0.33 (models/deepseek_v4) registers several caches per layer, each with its own block
size (:func:`dsv4_caches`); ``_get_packed_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py)
packs them into groups of one type whose layers may differ (:func:`packed_split`).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.common import EngineRefusal
from planner.engines.vllm.groups import Bucket
from planner.engines.vllm.specs import DSV4_STATE_BLOCK, DSV4_SWA_BLOCK
from planner.geometry import ModelGeometry
from planner.kv import KVSpec


def dsv4_caches(geo: ModelGeometry, specs: tuple[KVSpec, ...], block: int) -> list[tuple[KVSpec, int]]:
    """(spec, block size) of every cache of every layer, in the order DeepSeek-V4's modules register
    in the forward context (models/deepseek_v4/attention.py ``DeepseekV4Attention.__init__``): a
    ratio-4 layer's indexer keys and the indexer compressor's state, then every layer's SWA cache,
    then a compressed layer's latent and its compressor's state."""
    comp = geo.compressed
    swa = next(s for s in specs if s.cache == "swa")
    latent = {s.compress_ratio: s for s in specs if s.cache == "compressed"}
    indexer = next((s for s in specs if s.cache == "indexer"), None)
    states = {(s.window, s.k_head_dim): s for s in specs if s.cache == "compressor"}
    out: list[tuple[KVSpec, int]] = []
    for r in comp.ratios:
        ratio = max(1, r)
        if ratio > 1 and ratio not in DSV4_STATE_BLOCK:  # CompressorStateCache: "Invalid compress ratio"
            raise EngineRefusal("model", r, f"Invalid compress ratio: {ratio}")
        if ratio == 4 and indexer is not None:
            out += [(indexer, block), (states[(8, 4 * comp.index_head_dim)], DSV4_STATE_BLOCK[4])]
        out.append((swa, DSV4_SWA_BLOCK))
        if ratio > 1:
            coff = 2 if ratio == 4 else 1
            out += [(latent[ratio], block), (states[(coff * ratio, 2 * coff * comp.head_dim)], DSV4_STATE_BLOCK[ratio])]
    return out


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM ``_approximate_gcd``: the chunk size in [lower_bound, max(values)] that pads the values
    least when each is rounded up to a multiple of it (ties: the larger)."""
    lo, hi = max(1, lower_bound), max(values)
    best, best_pad = lo, None
    for d in range(lo, hi + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


@dataclass(frozen=True, slots=True)
class _TypeBucket:
    """Layers of one type (same block size; full, or sliding with one window) in registration
    order, each as (spec, block size, page bytes), and their indices by page size."""

    members: list[tuple[KVSpec, int, int]]
    by_page: dict[int, list[int]]

    @property
    def balanced(self) -> bool:
        """Every page size holds the same number of layers: a repeating pattern."""
        return len({len(v) for v in self.by_page.values()}) == 1

    @property
    def most(self) -> int:
        return max(len(v) for v in self.by_page.values())

    def groups(self, repeats: int | None) -> int:
        """Groups a pattern splits into at ``repeats`` repeats a group; 1 without a pattern."""
        return -(-self.most // repeats) if self.balanced and repeats is not None else 1

    def is_state(self, repeats: int | None) -> bool:
        """A sliding bucket with no pattern to follow: split to fit the widest group."""
        return repeats is None and self.members[0][0].kind == "sliding"

    def widest(self, n: int) -> int:
        """The page bytes of the widest of ``n`` groups."""
        return sum(-(-len(idx) // n) * self.members[idx[0]][2] for idx in self.by_page.values())

    def deal(self, n: int) -> list[list[int]]:
        """The layer indices of each of ``n`` groups: repeats of the pattern dealt out round-robin."""
        if n == 1:
            return [list(range(len(self.members)))]
        pattern = list(zip(*self.by_page.values(), strict=False))  # vLLM zips the page lists as they are
        return [[j for repeat in pattern[i::n] for j in repeat] for i in range(n)]


def _type_buckets(layers: list[tuple[KVSpec, int]]) -> list[_TypeBucket]:
    keyed: dict[tuple, list[tuple[KVSpec, int, int]]] = {}
    for spec, block in layers:
        key = (spec.kind, spec.window if spec.kind == "sliding" else None, block)
        keyed.setdefault(key, []).append((spec, block, spec.layer_page_bytes(block)))
    out = []
    for members in keyed.values():
        by_page: dict[int, list[int]] = {}
        for j, (_, _, page) in enumerate(members):
            by_page.setdefault(page, []).append(j)
        out.append(_TypeBucket(members, by_page))
    return out


def packed_split(layers: list[tuple[KVSpec, int]]) -> tuple[tuple[Bucket, int], ...]:
    """``_get_packed_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py, block-outermost layout):
    layers go to buckets of one type (same block size; full, or sliding with one window); a bucket
    whose page sizes each hold the same number of layers is a repeating pattern, and all such
    buckets split into groups of the same number of repeats (:func:`_approximate_gcd`, no fewer than
    the largest mixed-page bucket has); sliding buckets with no pattern to follow are states, split
    to fit the widest group. Each group is one bucket here (a group whose layers differ keeps them as
    ``members``, its page the sum of theirs)."""
    typed = _type_buckets(layers)
    floor = max((t.most for t in typed if t.balanced and len(t.by_page) > 1), default=0)
    repeats = _approximate_gcd([t.most for t in typed if t.balanced], floor) if floor else None
    anchor = max(t.widest(len(t.members) if t.is_state(repeats) else t.groups(repeats)) for t in typed)
    split: list[tuple[Bucket, int]] = []
    for t in typed:
        n = t.groups(repeats)
        if anchor and t.is_state(repeats):
            n = max(n, -(-len(t.members) // max(anchor // t.members[0][2], 1)))
        split += [(_group_bucket([t.members[j] for j in idx]), 1) for idx in t.deal(n)]
    return tuple(split)


def _group_bucket(members: list[tuple[KVSpec, int, int]]) -> Bucket:
    counts: dict[KVSpec, int] = {}
    for spec, _, _ in members:
        counts[spec] = counts.get(spec, 0) + 1
    block, page = members[0][1], members[0][2]
    if len(counts) == 1:
        return Bucket(members[0][0].model_copy(update={"num_layers": len(members)}), 0, block, page)
    specs = tuple(s.model_copy(update={"num_layers": n}) for s, n in counts.items())
    return Bucket(specs[0], 0, block, sum(p for _, _, p in members), specs)
