"""The paged KV pool: free block ids handed out through reference-counted leases.

Like vLLM's ``BlockPool`` (vllm/v1/core/block_pool.py) the pool owns the free list, who holds
each block and how many holders share it (``touch`` adds one, ``release`` drops one; the blocks
go back when the last lets go); the KV manager above it decides how many blocks a request needs
and when.
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

    ``open()`` returns a lease id held once; ``allocate(lease, n)`` moves ``n`` free blocks into
    it (``allocate_each`` one into each of several); ``touch(lease)`` adds a holder (a request
    sharing its blocks); ``release(lease)`` drops one, and the last release returns all of its
    blocks and closes it. Releasing a closed lease, or a block whose owner is not the lease,
    raises :class:`DoubleFreeError`. ``free_count`` and ``in_use`` are plain attributes (read
    every step), kept equal to the free list's length and the rest.
    """

    __slots__ = ("total", "free_count", "in_use", "_free", "_owner", "_leases", "_refs", "_next", "opened", "released", "allocated", "freed")

    def __init__(self, total_blocks: int) -> None:
        if total_blocks < 1:
            raise PlannerError("total_blocks", total_blocks, "must be at least 1")
        self.total = total_blocks
        self.free_count = total_blocks
        self.in_use = 0
        self._free = list(range(total_blocks - 1, -1, -1))
        self._owner = [0] * total_blocks  # 0 = free, else the lease id
        self._leases: dict[int, list[int]] = {}
        self._refs: dict[int, int] = {}  # lease -> holders
        self._next = 1
        self.opened = self.released = self.allocated = self.freed = 0

    def open(self) -> int:
        lid = self._next
        self._next += 1
        self._leases[lid] = []
        self._refs[lid] = 1
        self.opened += 1
        return lid

    def touch(self, lease: int) -> None:
        """One more holder of ``lease``'s blocks."""
        if lease not in self._refs:
            raise AllocatorError(f"lease {lease} is not open")
        self._refs[lease] += 1

    def refs(self, lease: int) -> int:
        """Holders of ``lease`` (0 once it is closed)."""
        return self._refs.get(lease, 0)

    def state(self) -> tuple[list[int], dict[int, list[int]], dict[int, int], list[int]]:
        """The free list, each open lease's blocks, each open lease's holders and each block's
        owner (0 = free), not copied: read-only, for the invariant checks, never for the step loop."""
        return self._free, self._leases, self._refs, self._owner

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
        self.free_count -= n
        self.in_use += n

    def allocate_each(self, leases: list[int]) -> None:
        """One free block into each of ``leases`` (decoders crossing into a new block)."""
        free = self._free
        n = len(leases)
        if n > len(free):
            raise OutOfBlocksError(f"{n} leases asked for a block each, {len(free)} free")
        owner = self._owner
        held = self._leases
        taken = 0
        for lease in leases:
            blocks = held.get(lease)
            if blocks is None:
                break
            b = free.pop()
            owner[b] = lease
            blocks.append(b)
            taken += 1
        self.allocated += taken
        self.free_count -= taken
        self.in_use += taken
        if taken < n:
            raise AllocatorError(f"lease {leases[taken]} is not open")

    def release(self, lease: int) -> int:
        """Drop one holder of ``lease``; the last one returns its blocks to the free list and
        closes it. Returns the blocks returned (0 while other holders remain)."""
        refs = self._refs.get(lease)
        if refs is None:
            raise DoubleFreeError(f"lease {lease} released twice (or never opened)")
        if refs > 1:
            self._refs[lease] = refs - 1
            return 0
        del self._refs[lease]
        blocks = self._leases.pop(lease)
        owner = self._owner
        for b in blocks:
            if owner[b] != lease:
                raise DoubleFreeError(f"block {b} freed by lease {lease} but owned by {owner[b]}")
            owner[b] = 0
        n = len(blocks)
        self._free.extend(blocks)
        self.freed += n
        self.free_count += n
        self.in_use -= n
        self.released += 1
        return n


class PrefixCache:
    """The full blocks of one common prompt prefix, held once in a shared lease of the pool.

    The first request that uses the prefix while nobody holds it *owns* it: it leases the blocks
    and computes them. Requests admitted after the owner's prefill has passed the prefix *hit*:
    they attach (the pool's ``touch``) and skip those tokens. The pool frees the blocks when the
    last attached request lets go.
    """

    __slots__ = ("blocks", "tokens", "lease", "ready", "owner")

    def __init__(self, blocks: int, block_tokens: int) -> None:
        self.blocks = blocks
        self.tokens = blocks * block_tokens
        self.lease = 0  # the shared lease while anyone holds the prefix (0 = nobody)
        self.ready = False  # the owner has computed the prefix tokens
        self.owner = -1

    def take_ownership(self, pool: BlockAllocator, owner: int) -> None:
        self.lease = pool.open()
        pool.allocate(self.lease, self.blocks)
        self.ready = False
        self.owner = owner

    def attach(self, pool: BlockAllocator) -> None:
        pool.touch(self.lease)

    def detach(self, pool: BlockAllocator) -> None:
        if pool.release(self.lease):  # the last holder: the prefix's blocks went back to the pool
            self.lease = 0
            self.ready = False
            self.owner = -1
