"""One engine replica: a paged KV pool, a waiting queue and a scheduler, one step at a time.

Per step (:meth:`Replica.step`):

1. *KV growth*: every decoder whose next token crosses a block boundary needs one new block; if
   the pool cannot supply them, the newest running request is preempted (blocks freed, back to
   the head of the waiting queue, its prefill recomputed on re-admission).
2. *Prefill*: prompts being prefilled in chunks continue first; then waiting prompts are admitted
   in arrival order while the step's token budget, ``max_num_seqs`` and the pool allow. A prompt
   is admitted only when the blocks of its *whole* prefill are free after what running requests
   still need for theirs, and never in a step that had to preempt: like vLLM's scheduler
   (vllm/v1/core/sched/scheduler.py skips the waiting queue in a step with preemptions), so a new
   prompt never forces a running one out and chunked prefill does not thrash.
3. *Decodes*: the policy says how many decoders run; the rest skip the step.
4. *Clock*: the step lasts ``StepCost`` of the tokens computed and the K/V read (``StepClock``).
5. *Apply*: finished prefills produce their first token; every decoder produces one token;
   requests that reach their output length (or their cancellation point) end.

Who runs is decided here and by the policy (``policies.py``); how many blocks a request needs
and whether they fit, by the KV manager (``kv_manager.py``); which blocks, by the pool below it.
"""

from __future__ import annotations

from bisect import insort
from collections import deque

from planner.simulate.block_pool import BlockAllocator
from planner.simulate.cost import PlanStepCost, StepCost
from planner.simulate.decode_batch import DecodeBatch
from planner.simulate.invariants import check_step
from planner.simulate.kv_manager import NO_PREFIX, PREFIX_HIT, KVManager
from planner.simulate.model import SimConfig
from planner.simulate.policies import make_policy
from planner.simulate.request import (
    CANCEL_AT_ADMISSION,
    CANCEL_MID_PREFILL,
    CANCELLED,
    DECODE,
    DONE,
    PREFILL,
    SimRequest,
)
from planner.simulate.stats import ReplicaStats


class Replica:
    """The scheduler of one engine replica: its waiting queue, running requests and clock. Block
    arithmetic goes through ``kv`` (:class:`KVManager`), the decoders through ``batch``
    (:class:`DecodeBatch`), counters into ``stats`` (:class:`ReplicaStats`)."""

    def __init__(self, number: int, cfg: SimConfig, cost: StepCost | PlanStepCost, static_blocks: int, allocator: type[BlockAllocator] = BlockAllocator) -> None:
        self.number = number
        self.max_num_seqs = cfg.max_num_seqs
        self.static_batching = cfg.batching == "static"
        self.policy = make_policy(cfg.policy, cfg.max_num_batched_tokens, cfg.chunk_tokens)
        self.clock = cost.clock()
        self.kv = KVManager(cfg, static_blocks, allocator)
        self.waiting: deque[SimRequest] = deque()
        self.running: dict[int, SimRequest] = {}  # by arrival index: max() is the newest
        self.prefilling: list[SimRequest] = []  # chunked prefills in progress, in arrival order
        self.batch = DecodeBatch(cfg.block_tokens, self.kv.dynamic)
        self.t = 0.0
        self.outstanding_tokens = 0  # prompt + output tokens of requests routed here and not ended
        self.batch_left = 0  # static batching: members of the current batch not yet ended
        self.stats = ReplicaStats()
        self.check_invariants = False
        # the waiting head that last did not fit, and the blocks it found: while the same head
        # finds no more, the admission loop is skipped (overloaded runs spend most steps here)
        self._blocked_head: SimRequest | None = None
        self._blocked_avail = 0
        self.ended: list[SimRequest] | None = None  # a closed loop's driver collects the requests that end here (engine._run_closed)

    # ------------------------------------------------------------------ arrivals and endings

    def add(self, r: SimRequest) -> None:
        r.replica = self.number
        r.arrive()
        self.stats.requests += 1
        if r.rejected:
            self.stats.finished += 1
            if self.ended is not None:
                self.ended.append(r)
        else:
            self.outstanding_tokens += r.prompt_tokens + r.output_tokens
            self.waiting.append(r)

    def _release(self, r: SimRequest) -> None:
        self.kv.free(r)
        del self.running[r.index]

    def _end(self, r: SimRequest, status: int) -> None:
        if r.lease:
            self._release(r)
        r.finish(status, self.t)
        self.stats.finished += 1
        if self.ended is not None:
            self.ended.append(r)
        self.outstanding_tokens -= r.prompt_tokens + r.output_tokens
        if r.batch_member:
            self.batch_left -= 1

    def _cancel(self, r: SimRequest) -> None:
        self.stats.wasted_tokens += min(r.computed, r.target)  # prefill work thrown away
        self._end(r, CANCELLED)

    def _preempt(self, r: SimRequest) -> None:
        if r.status == DECODE:
            self.batch.remove(r)
        elif self.policy.splits_prompts:
            self.prefilling.remove(r)
        self._release(r)
        wasted = r.preempted()
        stats = self.stats
        stats.wasted_tokens += wasted
        stats.preempted_tokens += wasted
        stats.preemptions += 1
        self.waiting.appendleft(r)

    def _preempt_newest(self) -> SimRequest:
        r = self.running[max(self.running)]
        self._preempt(r)
        return r

    def final_stats(self) -> ReplicaStats:
        """The counters at the end of the run, the pool's lease and block counts included."""
        self.kv.count_blocks(self.stats)
        return self.stats

    # ------------------------------------------------------------------ one step

    def step(self) -> bool:
        """Run one engine step at ``self.t``. Returns False when there was nothing to do (the
        caller moves the clock to the next arrival) and True otherwise."""
        stats = self.stats
        finished_before = stats.finished
        if self.static_batching and self.batch_left == 0 and self.waiting:
            self._close_batch()
        preempted_before = stats.preemptions
        crossing = self._grow_decoders()
        chunks, prefill_tokens = self._schedule_prefills(crossing, preempted_before)
        joiners, grown = self.batch.schedule(self.policy.decode_room(prefill_tokens), crossing)
        if grown:
            self.kv.append_blocks(grown)  # room was made in _grow_decoders
        decoders = len(self.batch.members)
        if not chunks and not decoders:
            return stats.finished != finished_before  # e.g. cancelled at admission: try again
        self.t += self.clock.step_s(chunks, prefill_tokens + decoders, self.batch.context_tokens + decoders)
        stats.steps += 1
        if chunks:
            self._apply_prefills(chunks)
        if decoders:
            self._apply_decodes(decoders, joiners)
        stats.sample_t.append(self.t)
        stats.sample_used.append(self.kv.blocks_in_use)
        if self.check_invariants:
            check_step(self, prefill_tokens + decoders, chunks)
        return True

    def _close_batch(self) -> None:
        """Static batching: the next ``max_num_seqs`` waiting requests form the batch."""
        k = 0
        for r in self.waiting:
            if k == self.max_num_seqs:
                break
            r.batch_member = True
            k += 1
        self.batch_left = k

    def _grow_decoders(self) -> set[SimRequest]:
        """Decoders needing a block this step; preempts the newest running while they don't fit."""
        kv = self.kv
        if not kv.dynamic:
            return set()
        crossing = self.batch.crossings_now()
        while len(crossing) > kv.free_blocks:
            crossing.discard(self._preempt_newest())
        return crossing

    def _schedule_prefills(self, crossing: set[SimRequest], preempted_before: int) -> tuple[list[tuple[SimRequest, int, int]], int]:
        policy = self.policy
        decoders = len(self.batch.members) + len(self.batch.stalled)
        budget = policy.prefill_budget(decoders)
        chunks: list[tuple[SimRequest, int, int]] = []
        scheduled = 0
        if self.prefilling:
            budget, scheduled = self._continue_prefills(chunks, crossing, budget)
        if self.stats.preemptions != preempted_before:
            return chunks, scheduled  # no new prompt in a step that had to preempt (vLLM v1)
        room = self.max_num_seqs - len(self.running)
        waiting = self.waiting
        if not waiting or room <= 0 or budget <= 0:
            return chunks, scheduled
        kv = self.kv
        shares_prefix = kv.prefix is not None
        reserve = kv.prefill_reserve(self.prefilling) if self.prefilling else 0
        if waiting[0] is self._blocked_head and not shares_prefix and kv.free_blocks - len(crossing) - reserve <= self._blocked_avail:
            return chunks, scheduled  # the head still does not fit: nothing behind it may pass
        while waiting and room > 0 and budget > 0:
            r = waiting[0]
            if self.static_batching and not r.batch_member:
                break
            match = kv.match_prefix(r) if shares_prefix else NO_PREFIX
            whole = kv.blocks_to_admit(r, match)
            avail = kv.free_blocks - len(crossing) - reserve
            if whole > avail:
                self._blocked_head, self._blocked_avail = r, avail
                break  # its whole prefill must fit, or it would force preempting a running request later
            start = kv.prefix_tokens(match)
            m = policy.first_chunk(r.prompt_tokens + r.generated - start, budget, bool(chunks), decoders)
            if m == 0:
                break  # head-of-line: the whole prompt must fit the step
            waiting.popleft()
            self.running[r.index] = r
            r.admit(self.t, start)
            kv.admit(r, match)
            taken = kv.allocate_slots(r, m, len(crossing) + reserve)  # never None: the whole prefill fits
            if match == PREFIX_HIT:
                self.stats.prefix_hits += 1
            if r.cancel_stage == CANCEL_AT_ADMISSION:
                r.computed = 0
                self._cancel(r)
                continue
            room -= 1
            chunks.append((r, start, m))
            scheduled += m
            budget -= m
            if policy.splits_prompts:
                insort(self.prefilling, r, key=_arrival)  # older requests continue first
                # the rest of its prefill; for a prefix owner ``whole`` also counts the prefix
                # blocks it already took, so those stay reserved for the rest of this step
                reserve += whole - taken
        return chunks, scheduled

    def _continue_prefills(self, chunks: list, crossing: set[SimRequest], budget: int) -> tuple[int, int]:
        """Chunked prefill: the next chunk of every prompt in progress, oldest first."""
        allocate_slots = self.kv.allocate_slots
        chunk_tokens = self.policy.chunk_tokens
        scheduled = 0
        for r in list(self.prefilling):
            if budget <= 0:
                break
            if r.status != PREFILL:
                continue  # preempted while making room for an older request
            c = r.computed
            m = min(chunk_tokens, r.target - c, budget)
            if allocate_slots(r, m, len(crossing)) is None:
                m = self._make_room(r, m, crossing)
                if m <= 0:
                    continue
            chunks.append((r, c, m))
            scheduled += m
            budget -= m
        return budget, scheduled

    def _make_room(self, r: SimRequest, m: int, crossing: set[SimRequest]) -> int:
        """The next ``m`` tokens of ``r``'s prefill do not fit: preempt newer requests until they
        do, else shrink the chunk to the blocks left. Returns the tokens to run (<= 0: none)."""
        kv = self.kv
        while max(self.running) > r.index:
            crossing.discard(self._preempt_newest())
            if kv.allocate_slots(r, m, len(crossing)) is not None:
                return m
        m = min(m, kv.tokens_fitting(r, len(crossing)) - r.computed)
        if m > 0:
            kv.allocate_slots(r, m, len(crossing))
        return m

    def _apply_prefills(self, chunks: list[tuple[SimRequest, int, int]]) -> None:
        kv = self.kv
        stats = self.stats
        t = self.t
        any_ended = False
        for r, _c, m in chunks:
            complete = r.prefilled(m)
            stats.prefill_tokens += m
            kv.cache_blocks(r)
            if r.cancel_stage == CANCEL_MID_PREFILL and r.generated == 0:
                self._cancel(r)
                any_ended = True
                continue
            if not complete:
                continue
            any_ended = True
            gap = r.emit_token(t)
            stats.output_tokens += 1
            if gap is not None:
                stats.itl_values.append(gap)
                stats.itl_weights.append(1)
            if r.generated >= r.output_tokens:
                self._end(r, DONE)
            elif r.cancel_due():
                self._cancel(r)
            else:
                r.begin_decode()
                self.batch.stall(r)
        if any_ended and self.prefilling:
            self.prefilling = [r for r in self.prefilling if r.status == PREFILL and r.computed < r.target]

    def _apply_decodes(self, decoders: int, joiners: list[SimRequest]) -> None:
        t = self.t
        batch = self.batch
        stats = self.stats
        old = decoders - len(joiners)
        if old:
            stats.itl_values.append(t - batch.last_tick_s)
            stats.itl_weights.append(old)
        for r in joiners:
            stats.itl_values.append(t - r.last_token_s)
            stats.itl_weights.append(1)
        stats.output_tokens += decoders
        for r in batch.advance(t):
            batch.leave(r)
            if r.generated >= r.output_tokens:
                self._end(r, DONE)
            else:
                self._cancel(r)


def _arrival(r: SimRequest) -> int:
    return r.index
