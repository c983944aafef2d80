"""What must hold after every step of a replica: checked by ``simulate(..., check_invariants=True)``.

Off by default (it walks every running request, so it is not for the hot path); the tests run
with it on, and a failure raises :class:`SimulationInvariantError` naming what disagrees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.simulate.request import DECODE, PREFILL

if TYPE_CHECKING:
    from planner.simulate.replica import Replica
    from planner.simulate.request import SimRequest


class SimulationInvariantError(AssertionError):
    """Raised by ``simulate(..., check_invariants=True)`` when the bookkeeping is inconsistent."""


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def check_step(rep: Replica, step_tokens: int, chunks: list[tuple[SimRequest, int, int]]) -> None:
    """After a step that scheduled ``step_tokens`` tokens in ``chunks`` of prefill plus its decodes."""
    fail = SimulationInvariantError
    kv, batch = rep.kv, rep.batch
    pool, prefix = kv.pool, kv.prefix
    prefix_blocks = prefix.blocks if prefix is not None else 0
    held = attached = 0
    for r in rep.running.values():
        if r.status not in (PREFILL, DECODE):
            raise fail(f"request {r.id} is running in status {r.status}")
        if pool.held(r.lease) != r.own_blocks:
            raise fail(f"request {r.id}: lease holds {pool.held(r.lease)} blocks, bookkeeping says {r.own_blocks}")
        held += r.own_blocks
        attached += r.attached
        tokens = batch.cached_tokens(r) if r in batch.members else r.computed
        want = max(0, _blocks(tokens, kv.block_tokens) - (prefix_blocks if r.attached else 0)) if kv.dynamic else kv.static_blocks - (prefix_blocks if r.attached else 0)
        if r.own_blocks != want:
            raise fail(f"request {r.id} holds {r.own_blocks} own blocks for {tokens} tokens; expected {want}")
        if tokens > r.prompt_tokens + r.output_tokens - 1:
            raise fail(f"request {r.id} caches {tokens} tokens, more than prompt + output - 1")
    refs = pool.refs(prefix.lease) if prefix is not None and prefix.lease else 0
    if refs != attached:
        raise fail(f"prefix refcount {refs} but {attached} attached requests")
    if refs:
        if pool.held(prefix.lease) != prefix.blocks:
            raise fail("prefix lease does not hold the prefix blocks")
        held += prefix.blocks
    if held != pool.in_use:
        raise fail(f"leases hold {held} blocks but {pool.in_use} are in use")
    if len(rep.running) > rep.max_num_seqs:
        raise fail(f"{len(rep.running)} running sequences > max_num_seqs {rep.max_num_seqs}")
    budget = rep.policy.token_budget
    if step_tokens > budget and not (len(chunks) == 1 and step_tokens == chunks[0][2]):
        raise fail(f"step scheduled {step_tokens} tokens > max_num_batched_tokens {budget}")
    if sum(batch.cached_tokens(r) for r in batch.members) != batch.context_tokens:
        raise fail("lazy context sum disagrees with the members")
    if pool.opened - pool.released != len(rep.running) + (1 if refs else 0):
        raise fail("open leases do not match running requests")
