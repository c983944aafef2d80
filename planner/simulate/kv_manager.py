"""The KV manager: how many blocks each request needs, whether they fit, and the shared prefix.

Between the scheduler (``replica.py``) and the pool (``block_pool.py``), like vLLM's
``KVCacheManager`` (vllm/v1/core/kv_cache_manager.py) between its scheduler and ``BlockPool``:

* :meth:`KVManager.allocate_slots` gives a request the blocks for its next tokens and returns how
  many it took, or ``None`` when they do not fit (the scheduler then preempts or waits);
* :meth:`KVManager.free` gives back everything a request holds;
* :meth:`KVManager.match_prefix`, :meth:`KVManager.admit` and :meth:`KVManager.cache_blocks`
  look up, share and publish the common prompt prefix (vLLM's ``get_computed_blocks`` and
  ``cache_blocks``).

The pool owns the free list and the reference counts; the scheduler only ever talks to this
class. What a request holds is written on it (``lease``, ``own_blocks``, ``attached``) by this
class alone, and the pool's counts are copied into ``free_blocks`` / ``blocks_in_use`` after
every change this class makes (it makes them all), so the scheduler's loops read plain
attributes: a call a step costs about half a percent of a simulation.
"""

from __future__ import annotations

from planner.simulate.block_pool import BlockAllocator, PrefixCache
from planner.simulate.model import SimConfig
from planner.simulate.request import PREFILL, SimRequest
from planner.simulate.stats import ReplicaStats

# What a waiting request finds of the shared prefix (match_prefix)
NO_PREFIX, PREFIX_HIT, PREFIX_OWNER = range(3)


class KVManager:
    """Block arithmetic for one replica's pool: dynamic (a block at a time, as tokens are cached)
    or static (``static_blocks`` leased up front per request) reservation, and the prefix."""

    __slots__ = ("pool", "prefix", "block_tokens", "dynamic", "static_blocks", "prefix_blocks", "free_blocks", "blocks_in_use")

    def __init__(self, cfg: SimConfig, static_blocks: int, allocator: type[BlockAllocator] = BlockAllocator) -> None:
        self.pool = allocator(cfg.total_blocks)
        self.block_tokens = cfg.block_tokens
        self.dynamic = cfg.reservation == "dynamic"
        self.static_blocks = static_blocks  # blocks leased up front per request (static reservation)
        self.prefix_blocks = cfg.prefix_tokens // cfg.block_tokens if cfg.prefix_share > 0 else 0
        self.prefix = PrefixCache(self.prefix_blocks, cfg.block_tokens) if self.prefix_blocks else None
        self.free_blocks = self.pool.free_count  # the pool's counts, as of this class's last change
        self.blocks_in_use = self.pool.in_use

    def own_blocks(self, tokens: int, attached: bool) -> int:
        """Blocks of a request's own (outside the shared prefix) that hold ``tokens`` cached tokens."""
        shared = self.prefix_blocks if attached else 0
        if self.dynamic:
            need = -(-tokens // self.block_tokens) - shared
            return need if need > 0 else 0
        return self.static_blocks - shared

    # ------------------------------------------------------------------ admission

    def match_prefix(self, r: SimRequest) -> int:
        """What waiting ``r`` finds of the shared prefix: ``PREFIX_HIT`` (its owner has computed
        it: attach and skip it), ``PREFIX_OWNER`` (nobody holds it: lease it and compute it) or
        ``NO_PREFIX`` (no prefix, or its owner is still computing it)."""
        prefix = self.prefix
        if prefix is None or not r.uses_prefix:
            return NO_PREFIX
        if prefix.lease:
            return PREFIX_HIT if prefix.ready else NO_PREFIX
        return PREFIX_OWNER

    def prefix_tokens(self, match: int) -> int:
        """Prompt tokens a request skips for ``match`` (the prefix's, on a hit)."""
        return self.prefix.tokens if match == PREFIX_HIT else 0

    def blocks_to_admit(self, r: SimRequest, match: int) -> int:
        """Blocks waiting ``r`` takes from the pool over its whole prefill (prompt plus what it
        generated before a preemption): its own, plus the prefix's when it would own it."""
        own = self.own_blocks(r.prompt_tokens + r.generated, match != NO_PREFIX)
        return own + self.prefix_blocks if match == PREFIX_OWNER else own

    def admit(self, r: SimRequest, match: int) -> None:
        """Open ``r``'s lease (empty: :meth:`allocate_slots` fills it) and share the prefix per
        ``match``: attach to it, or lease its blocks for ``r`` to compute."""
        pool = self.pool
        r.lease = pool.open()
        r.own_blocks = 0
        r.attached = match != NO_PREFIX
        if match == PREFIX_OWNER:
            self.prefix.take_ownership(pool, r.index)
            self.free_blocks, self.blocks_in_use = pool.free_count, pool.in_use
        elif match == PREFIX_HIT:
            self.prefix.attach(pool)

    # ------------------------------------------------------------------ growth and release

    def allocate_slots(self, r: SimRequest, new_tokens: int, reserved: int = 0) -> int | None:
        """Blocks for ``new_tokens`` more tokens of running ``r`` (beyond ``r.computed``), leaving
        ``reserved`` free blocks untouched. Returns the blocks allocated (0 when its blocks
        already hold them) or ``None`` when they do not fit, allocating nothing."""
        need = self.own_blocks(r.computed + new_tokens, r.attached) - r.own_blocks
        if need <= 0:
            return 0
        if need > self.free_blocks - reserved:
            return None
        pool = self.pool
        pool.allocate(r.lease, need)
        self.free_blocks, self.blocks_in_use = pool.free_count, pool.in_use
        r.own_blocks += need
        return need

    def tokens_fitting(self, r: SimRequest, reserved: int = 0) -> int:
        """Cached tokens ``r`` could hold with its blocks plus the free ones beyond ``reserved``."""
        shared = self.prefix_blocks if r.attached else 0
        return (r.own_blocks + shared + self.free_blocks - reserved) * self.block_tokens

    def append_blocks(self, decoders: list[SimRequest]) -> None:
        """Each of ``decoders`` starts a new block with its next token: one more block each (the
        scheduler made room)."""
        leases = []
        for r in decoders:
            leases.append(r.lease)
            r.own_blocks += 1
        pool = self.pool
        pool.allocate_each(leases)
        self.free_blocks, self.blocks_in_use = pool.free_count, pool.in_use

    def prefill_reserve(self, prefilling: list[SimRequest]) -> int:
        """Blocks the prompts being prefilled in chunks will still take for the rest of their
        prefill (0 under static reservation: theirs were leased up front)."""
        if not self.dynamic:
            return 0
        own = self.own_blocks
        return sum(max(0, own(r.target, r.attached) - r.own_blocks) for r in prefilling if r.status == PREFILL)

    def cache_blocks(self, r: SimRequest) -> None:
        """``r`` has computed ``r.computed`` tokens: once the prefix's owner is past the prefix,
        later requests may hit it (vLLM's ``cache_blocks``)."""
        prefix = self.prefix
        if prefix is not None and prefix.owner == r.index and not prefix.ready and r.computed >= prefix.tokens:
            prefix.ready = True

    def count_blocks(self, stats: ReplicaStats) -> None:
        """Copy the pool's lease and block counts into ``stats`` (for the result)."""
        pool = self.pool
        stats.leases_opened, stats.leases_released = pool.opened, pool.released
        stats.blocks_allocated, stats.blocks_freed, stats.blocks_in_use = pool.allocated, pool.freed, pool.in_use

    def free(self, r: SimRequest) -> None:
        """Give back ``r``'s own blocks and its hold on the shared prefix."""
        pool = self.pool
        pool.release(r.lease)
        r.lease = 0
        r.own_blocks = 0
        if r.attached:
            r.attached = False
            self.prefix.detach(pool)
        self.free_blocks, self.blocks_in_use = pool.free_count, pool.in_use
