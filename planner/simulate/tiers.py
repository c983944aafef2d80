"""Cache tiers below and beside the GPU pool: one LRU block pool per tier, with promotion.

A request's cacheable context is a *chain* of segments ``(key, units)`` in prompt order: units
(blocks or chunks) that are always used together, keyed by the tenant and what comes before
them (a session's turn, a tenant's shared prefix, a trace's 512-token hash block). A tier
(:class:`SegmentLRU`) holds whole units up to its capacity and evicts the least recently used
first; within one request's chain the tail is evicted before the head, as vLLM's free block
queue and its CPU offloading LRU order them (vllm/v1/core/kv_cache_utils.py
``FreeKVCacheBlockQueue``; vllm/v1/kv_offload/cpu/policies/lru.py: "tails precede heads"), so
what a tier holds of a chain is always a prefix of each segment and the lookup
(:meth:`SegmentLRU.found`) is the longest cached prefix.

Every request touches its whole chain in every tier (:meth:`TierStack.touch`): the GPU pool
holds what runs, the offload connector stores every computed block to the CPU tier and records
each request's use of the blocks it already holds, a disk tier writes through the same way, and
a block loaded from a lower tier is promoted to the tiers above it. Keys always carry the
tenant: nothing is ever found across tenants.
"""

from __future__ import annotations

from collections import OrderedDict

Chain = list[tuple[object, int]]


class SegmentLRU:
    """An LRU pool of ``capacity`` units holding segments (whole or their head part)."""

    __slots__ = ("capacity", "used", "_held", "evicted")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, int(capacity))
        self.used = 0
        self._held: OrderedDict[object, int] = OrderedDict()
        self.evicted = 0  # units evicted so far

    def __len__(self) -> int:
        return len(self._held)

    def held(self, key: object) -> int:
        """Units of segment ``key`` held (its head part: tails go first)."""
        return self._held.get(key, 0)

    def found(self, chain: Chain) -> int:
        """Units of the longest prefix of ``chain`` this pool holds."""
        held = self._held
        n = 0
        for key, size in chain:
            have = held.get(key, 0)
            n += have
            if have < size:
                break
        return n

    def touch(self, chain: Chain) -> None:
        """Use ``chain``: every segment whole and most recent, its head the most recent of all;
        then evict the least recently used units beyond the capacity."""
        if not self.capacity:
            return
        held = self._held
        get = held.get
        to_end = held.move_to_end
        used = self.used
        for key, size in reversed(chain):
            have = get(key)
            if have is None:
                held[key] = size
                used += size
            else:
                if have != size:
                    used += size - have
                    held[key] = size
                to_end(key)
        capacity = self.capacity
        if used > capacity:
            pop = held.popitem
            while used > capacity:
                key, have = pop(last=False)
                excess = used - capacity
                if have > excess:  # its tail goes; its head stays the least recent
                    held[key] = have - excess
                    to_end(key, last=False)
                    used -= excess
                    self.evicted += excess
                else:
                    used -= have
                    self.evicted += have
        self.used = used


class TierStack:
    """The tiers of one replica, largest last (GPU pool, CPU DRAM, local disk), each with its own
    unit size: ``found`` answers each tier's longest cached prefix in tokens, ``touch`` uses a
    chain in all of them (a chain per tier, in that tier's units)."""

    __slots__ = ("names", "units", "pools")

    def __init__(self, tiers: list[tuple[str, int, int]]) -> None:
        """``tiers``: (name, unit tokens, capacity in units) each."""
        self.names = tuple(name for name, _, _ in tiers)
        self.units = tuple(unit for _, unit, _ in tiers)
        self.pools = tuple(SegmentLRU(capacity) for _, _, capacity in tiers)

    def found(self, chains: list[Chain]) -> list[int]:
        return [pool.found(chain) * unit for pool, chain, unit in zip(self.pools, chains, self.units, strict=True)]

    def touch(self, chains: list[Chain]) -> None:
        for pool, chain in zip(self.pools, chains, strict=True):
            pool.touch(chain)
