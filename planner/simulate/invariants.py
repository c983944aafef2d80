"""What must hold while a simulation runs: checked by ``simulate(..., check_invariants=True)``.

After every step of a replica (:func:`check_step`), one layer at a time:

* the pool (:func:`check_pool`): every block is either free or in exactly one open lease (block
  conservation), its owner says which, and the pool's counters agree with its lists;
* what requests hold (:func:`check_holdings`): each running request's lease is open and holds
  exactly the blocks its cached tokens need (dynamic) or its reservation (static), less the
  shared prefix; the prefix's holders are the attached requests; the leases account for every
  block in use; no waiting or ended request holds a lease or blocks;
* the scheduler (:func:`check_queues`): each running request in exactly one place for its status,
  token counters consistent (a decoder has cached every token but its newest), the step within
  ``max_num_seqs`` and its token budget, the replica's own tallies equal to its queues.

After the run (:func:`check_end`): every block and lease went back, every request ended once, and
the output tokens counted equal those the requests generated.

Off by default (it walks every request and block, so it is never on the hot path); the tests run
with it on, and a failure raises :class:`SimulationInvariantError` naming what disagrees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.simulate.request import DECODE, DONE, PREFILL

if TYPE_CHECKING:
    from planner.simulate.block_pool import BlockAllocator
    from planner.simulate.replica import Replica
    from planner.simulate.request import SimRequest


class SimulationInvariantError(AssertionError):
    """Raised by ``simulate(..., check_invariants=True)`` when the bookkeeping is inconsistent."""


def _fail(message: str) -> None:
    raise SimulationInvariantError(message)


def check_step(rep: Replica, step_tokens: int, chunks: list[tuple[SimRequest, int, int]]) -> None:
    """After a step that scheduled ``step_tokens`` tokens (``chunks`` of prefill plus decodes)."""
    check_pool(rep.kv.pool)
    check_holdings(rep)
    check_queues(rep, step_tokens, chunks)


def check_pool(pool: BlockAllocator) -> None:
    """Block conservation and the pool's counters."""
    free, leases, refs, owner = pool.state()
    if len(set(free)) != len(free):
        _fail("a block is on the free list twice")
    if pool.free_count != len(free) or pool.in_use != pool.total - len(free):
        _fail(f"pool counts {pool.free_count} free / {pool.in_use} in use, its free list has {len(free)} of {pool.total}")
    if any(owner[b] for b in free):
        _fail("a free block is owned by a lease")
    if leases.keys() != refs.keys() or min(refs.values(), default=1) < 1:
        _fail("the open leases and their holder counts disagree")
    leased = 0
    for lease, blocks in leases.items():
        if any(owner[b] != lease for b in blocks):
            _fail(f"a block in lease {lease} is owned by another")
        leased += len(blocks)
    if leased + len(free) != pool.total:
        _fail(f"{leased} leased + {len(free)} free blocks != {pool.total} in the pool")
    if pool.allocated - pool.freed != pool.in_use:
        _fail(f"{pool.allocated} blocks allocated - {pool.freed} freed != {pool.in_use} in use")
    if pool.opened - pool.released != len(leases):
        _fail(f"{pool.opened} leases opened - {pool.released} released != {len(leases)} open")


def check_holdings(rep: Replica) -> None:
    """What each request holds against what its tokens need, and against the pool."""
    kv, batch = rep.kv, rep.batch
    pool, prefix = kv.pool, kv.prefix
    _free, leases, holders, _owner = pool.state()
    held = attached = 0
    for r in rep.running.values():
        if r.lease not in leases:
            _fail(f"running request {r.id} holds lease {r.lease}, which is not open")
        if holders[r.lease] != 1:
            _fail(f"request {r.id}'s own lease has {holders[r.lease]} holders")
        if len(leases[r.lease]) != r.own_blocks:
            _fail(f"request {r.id}: lease holds {len(leases[r.lease])} blocks, bookkeeping says {r.own_blocks}")
        held += r.own_blocks
        attached += r.attached
        tokens = batch.cached_tokens(r) if r in batch.members else r.computed
        want = kv.own_blocks(tokens, r.attached)
        if r.own_blocks != want:
            _fail(f"request {r.id} holds {r.own_blocks} own blocks for {tokens} tokens; expected {want}")
    if len({r.lease for r in rep.running.values()}) != len(rep.running):
        _fail("two running requests share a lease")
    refs = pool.refs(prefix.lease) if prefix is not None and prefix.lease else 0
    if refs != attached:
        _fail(f"prefix has {refs} holders but {attached} requests are attached")
    if refs:
        if len(leases[prefix.lease]) != prefix.blocks:
            _fail("prefix lease does not hold the prefix blocks")
        held += prefix.blocks
    elif prefix is not None and (prefix.ready or prefix.owner != -1):
        _fail("nobody holds the prefix but it is still marked computed or owned")
    if (kv.free_blocks, kv.blocks_in_use) != (pool.free_count, pool.in_use):
        _fail(f"the KV manager counts {kv.free_blocks} free / {kv.blocks_in_use} in use, the pool {pool.free_count} / {pool.in_use}")
    if held != pool.in_use:
        _fail(f"leases hold {held} blocks but {pool.in_use} are in use")
    if len(leases) != len(rep.running) + (1 if refs else 0):
        _fail(f"{len(leases)} open leases for {len(rep.running)} running requests{' and the prefix' if refs else ''}")
    for r in rep.waiting:
        if r.lease or r.own_blocks or r.attached:
            _fail(f"waiting request {r.id} still holds lease {r.lease} ({r.own_blocks} blocks, prefix {r.attached})")


def check_queues(rep: Replica, step_tokens: int, chunks: list[tuple[SimRequest, int, int]]) -> None:
    """Where each request is, its token counters, the step's limits and the replica's tallies."""
    batch, running = rep.batch, rep.running
    prefilling = {id(r) for r in rep.prefilling}
    stalled = {id(r) for r in batch.stalled}
    for r in running.values():
        places = {"decode batch": r in batch.members, "stalled list": id(r) in stalled, "chunked-prefill list": id(r) in prefilling}
        where = [name for name, here in places.items() if here]
        if r.status == PREFILL:
            # a prompt that is not split finishes its prefill in the step that admits it
            if where != (["chunked-prefill list"] if rep.policy.splits_prompts else []):
                _fail(f"request {r.id} is prefilling on {where or 'no list'}")
            if r.computed > r.target or r.target != r.prompt_tokens + r.generated or r.generated >= r.output_tokens:
                _fail(f"request {r.id} prefills {r.computed} of {r.target} tokens (prompt {r.prompt_tokens}, {r.generated} of {r.output_tokens} generated)")
        elif r.status == DECODE:
            if len(where) != 1 or "chunked-prefill list" in where:
                _fail(f"decoding request {r.id} is on {where or 'no list'}")
            generated = _generated(rep, r)
            tokens = batch.cached_tokens(r) if r in batch.members else r.computed
            if tokens != r.prompt_tokens + generated - 1 or not 1 <= generated < r.output_tokens:
                _fail(f"request {r.id} has cached {tokens} tokens with {generated} of {r.output_tokens} generated (prompt {r.prompt_tokens})")
        else:
            _fail(f"request {r.id} is running in status {r.status}")
    if len(prefilling) != len(rep.prefilling) or len(stalled) != len(batch.stalled) or any(r.index not in running for r in (*rep.prefilling, *batch.stalled)):
        _fail("the prefill or stalled list holds a request twice or one that is not running")
    if any(r.index in running for r in rep.waiting):
        _fail("a request is both waiting and running")
    if len(running) > rep.max_num_seqs:
        _fail(f"{len(running)} running sequences > max_num_seqs {rep.max_num_seqs}")
    budget = rep.policy.token_budget
    if step_tokens > budget and not (len(chunks) == 1 and step_tokens == chunks[0][2]):
        _fail(f"step scheduled {step_tokens} tokens > max_num_batched_tokens {budget}")
    if sum(batch.cached_tokens(r) for r in batch.members) != batch.context_tokens:
        _fail("lazy context sum disagrees with the members")
    stats = rep.stats
    if stats.requests - stats.finished != len(rep.waiting) + len(running):
        _fail(f"{stats.requests} requests routed - {stats.finished} ended != {len(rep.waiting)} waiting + {len(running)} running")
    if rep.outstanding_tokens != sum(r.prompt_tokens + r.output_tokens for r in (*rep.waiting, *running.values())):
        _fail(f"outstanding tokens {rep.outstanding_tokens} != the prompt + output tokens of the waiting and running requests")


def check_end(replicas: list[Replica], reqs: list[SimRequest], stopped: bool) -> None:
    """After the run: blocks, leases and requests all accounted for (all returned, unless the run
    stopped early), and the output tokens counted equal to those generated."""
    for rep in replicas:
        check_pool(rep.kv.pool)
        check_holdings(rep)
        pool = rep.kv.pool
        if not stopped and (pool.in_use or pool.opened != pool.released or rep.stats.finished != rep.stats.requests):
            _fail(f"replica {rep.number} ended with {pool.in_use} blocks in use, {pool.opened - pool.released} open leases, {rep.stats.requests - rep.stats.finished} requests unfinished")
    generated = [0] * len(replicas)
    for r in reqs:
        if r.finished and (r.lease or r.own_blocks or r.attached):
            _fail(f"request {r.id} ended holding lease {r.lease} ({r.own_blocks} blocks, prefix {r.attached})")
        if r.status == DONE and r.generated != r.output_tokens:
            _fail(f"request {r.id} is done with {r.generated} of {r.output_tokens} tokens")
        generated[r.replica] += _generated(replicas[r.replica], r)
    for rep in replicas:
        if rep.stats.output_tokens != generated[rep.number]:
            _fail(f"replica {rep.number} counted {rep.stats.output_tokens} output tokens, its requests generated {generated[rep.number]}")


def _generated(rep: Replica, r: SimRequest) -> int:
    """Output tokens of ``r`` so far (a member of the lazy decode batch has not written them yet)."""
    batch = rep.batch
    return r.base_generated + batch.tick - r.base_tick if r in batch.members else r.generated
