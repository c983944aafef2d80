"""The paged KV pool: free block ids handed out through leases, each released exactly once.

Like vLLM's ``BlockPool`` (vllm/v1/core/block_pool.py) the pool owns the free list and who holds
each block; the replica above it decides how many blocks a request needs and when.
"""

from __future__ import annotations

from planner.errors import PlannerError


class AllocatorError(RuntimeError):
    """Misuse of the block allocator (a simulator bug, not bad input)."""


class DoubleFreeError(AllocatorError):
    pass


class OutOfBlocksError(AllocatorError):
    pass


class BlockAllocator:
    """A paged KV pool of ``total_blocks`` block ids handed out through leases.

    ``open()`` returns a lease id; ``allocate(lease, n)`` moves ``n`` free blocks into it;
    ``release(lease)`` returns all of its blocks and closes it. Releasing a closed lease, or a
    block whose owner is not the lease, raises :class:`DoubleFreeError`.
    """

    __slots__ = ("total", "_free", "_owner", "_leases", "_next", "opened", "released", "allocated", "freed")

    def __init__(self, total_blocks: int) -> None:
        if total_blocks < 1:
            raise PlannerError("total_blocks", total_blocks, "must be at least 1")
        self.total = total_blocks
        self._free = list(range(total_blocks - 1, -1, -1))
        self._owner = [0] * total_blocks  # 0 = free, else the lease id
        self._leases: dict[int, list[int]] = {}
        self._next = 1
        self.opened = self.released = self.allocated = self.freed = 0

    @property
    def free_count(self) -> int:
        return len(self._free)

    @property
    def in_use(self) -> int:
        return self.total - len(self._free)

    def open(self) -> int:
        lid = self._next
        self._next += 1
        self._leases[lid] = []
        self.opened += 1
        return lid

    def held(self, lease: int) -> int:
        blocks = self._leases.get(lease)
        if blocks is None:
            raise AllocatorError(f"lease {lease} is not open")
        return len(blocks)

    def allocate(self, lease: int, n: int = 1) -> None:
        blocks = self._leases.get(lease)
        if blocks is None:
            raise AllocatorError(f"lease {lease} is not open")
        free = self._free
        if n > len(free):
            raise OutOfBlocksError(f"lease {lease} asked for {n} blocks, {len(free)} free")
        if n == 1:
            b = free.pop()
            self._owner[b] = lease
            blocks.append(b)
        elif n:
            taken = free[-n:]
            del free[-n:]
            owner = self._owner
            for b in taken:
                owner[b] = lease
            blocks.extend(taken)
        self.allocated += n

    def release(self, lease: int) -> int:
        blocks = self._leases.pop(lease, None)
        if blocks is None:
            raise DoubleFreeError(f"lease {lease} released twice (or never opened)")
        owner = self._owner
        for b in blocks:
            if owner[b] != lease:
                raise DoubleFreeError(f"block {b} freed by lease {lease} but owned by {owner[b]}")
            owner[b] = 0
        self._free.extend(blocks)
        self.freed += len(blocks)
        self.released += 1
        return len(blocks)


class PrefixCache:
    """The full blocks of one common prompt prefix, held once in a reference-counted lease.

    The first request that uses the prefix while nobody holds it *owns* it: it leases the blocks
    and computes them. Requests admitted after the owner's prefill has passed the prefix *hit*:
    they attach (reference +1) and skip those tokens. The lease is released when the last
    attached request lets go.
    """

    __slots__ = ("blocks", "tokens", "refs", "lease", "ready", "owner")

    def __init__(self, blocks: int, block_tokens: int) -> None:
        self.blocks = blocks
        self.tokens = blocks * block_tokens
        self.refs = 0
        self.lease = 0
        self.ready = False  # the owner has computed the prefix tokens
        self.owner = -1

    def take_ownership(self, pool: BlockAllocator, owner: int) -> None:
        self.lease = pool.open()
        pool.allocate(self.lease, self.blocks)
        self.refs = 1
        self.ready = False
        self.owner = owner

    def attach(self) -> None:
        self.refs += 1

    def detach(self, pool: BlockAllocator) -> None:
        self.refs -= 1
        if self.refs == 0:
            pool.release(self.lease)
            self.lease = 0
            self.ready = False
            self.owner = -1
