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
4. *Clock*: the step lasts ``StepCost`` of the tokens computed and the K/V read.
5. *Apply*: finished prefills produce their first token; every decoder produces one token;
   requests that reach their output length (or their cancellation point) end.

Who runs is decided by the policy (``policies.py``); how many blocks a request needs, here;
which blocks, by the pool (``block_pool.py``).
"""

from __future__ import annotations

from bisect import insort
from collections import deque

from planner.simulate.block_pool import BlockAllocator, PrefixCache
from planner.simulate.cost import StepCost
from planner.simulate.decode_batch import DecodeBatch
from planner.simulate.invariants import check_step
from planner.simulate.model import SimConfig
from planner.simulate.policies import make_policy
from planner.simulate.request import (
    CANCEL_AT_ADMISSION,
    CANCEL_IN_DECODE,
    CANCEL_MID_PREFILL,
    CANCELLED,
    DECODE,
    DONE,
    PREFILL,
    SimRequest,
)
from planner.simulate.stats import ReplicaStats


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


class Replica:
    def __init__(self, number: int, cfg: SimConfig, cost: StepCost, static_blocks: int, allocator: type[BlockAllocator] = BlockAllocator) -> None:
        self.number = number
        self.block_tokens = cfg.block_tokens
        self.max_num_seqs = cfg.max_num_seqs
        self.dynamic = cfg.reservation == "dynamic"
        self.static_batching = cfg.batching == "static"
        self.static_blocks = static_blocks  # blocks leased up front per request (static reservation)
        self.policy = make_policy(cfg.policy, cfg.max_num_batched_tokens, cfg.chunk_tokens)
        self.cost = cost
        # StepCost.step_time_s with its constants folded: seconds per byte read and per FLOP
        mem = 1.0 / (cost.bandwidth_bytes_per_s * cost.mbu)
        cmp = 1.0 / (cost.peak_flops * cost.mfu)
        self._weights_s = cost.weights_bytes * mem
        self._kv_token_s = cost.kv_bytes_per_token * mem
        self._new_token_s = cost.flops_per_token * cmp
        self._pair_s = cost.attn_flops_per_token_ctx * cmp
        self._overhead_s = cost.overhead_s
        self.pool = allocator(cfg.total_blocks)
        prefix_blocks = cfg.prefix_tokens // cfg.block_tokens if cfg.prefix_share > 0 else 0
        self.prefix = PrefixCache(prefix_blocks, cfg.block_tokens) if prefix_blocks else None
        self.waiting: deque[SimRequest] = deque()
        self.running: dict[int, SimRequest] = {}  # by arrival index: max() is the newest
        self.prefilling: list[SimRequest] = []  # chunked prefills in progress, in arrival order
        self.stalled: list[SimRequest] = []  # decoders outside the lazy batch (new or skipped)
        self.batch = DecodeBatch(cfg.block_tokens, self.dynamic)
        self.t = 0.0
        self.outstanding_tokens = 0  # prompt + output tokens of requests routed here and not ended
        self.batch_left = 0  # static batching: members of the current batch not yet ended
        self.stats = ReplicaStats()
        self.check_invariants = False
        # the waiting head that last did not fit, and the blocks it found: while the same head
        # finds no more, the admission loop is skipped (overloaded runs spend most steps here)
        self._blocked_head: SimRequest | None = None
        self._blocked_avail = 0

    # ------------------------------------------------------------------ arrivals and endings

    def add(self, r: SimRequest) -> None:
        r.replica = self.number
        r.arrive()
        self.stats.requests += 1
        if r.rejected:
            self.stats.finished += 1
        else:
            self.outstanding_tokens += r.prompt_tokens + r.output_tokens
            self.waiting.append(r)

    def _release(self, r: SimRequest) -> None:
        self.pool.release(r.lease)
        if r.attached:
            r.attached = False
            self.prefix.detach(self.pool)
        del self.running[r.index]

    def _end(self, r: SimRequest, status: int) -> None:
        if r.lease:
            self._release(r)
        r.finish(status, self.t)
        self.stats.finished += 1
        self.outstanding_tokens -= r.prompt_tokens + r.output_tokens
        if r.batch_member:
            self.batch_left -= 1

    def _cancel(self, r: SimRequest) -> None:
        self.stats.wasted_tokens += min(r.computed, r.target)  # prefill work thrown away
        self._end(r, CANCELLED)

    def _preempt(self, r: SimRequest) -> None:
        if r in self.batch.members:
            self.batch.leave(r)
        elif r.status == DECODE:
            self.stalled.remove(r)
        elif r.status == PREFILL and self.policy.splits_prompts:
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
        joiners = self._schedule_decodes(prefill_tokens, crossing)
        decoders = len(self.batch.members)
        if not chunks and not decoders:
            return stats.finished != finished_before  # e.g. cancelled at admission: try again
        self._advance_clock(chunks, prefill_tokens, decoders)
        if chunks:
            self._apply_prefills(chunks)
        if decoders:
            self._apply_decodes(decoders, joiners)
        stats.sample_t.append(self.t)
        stats.sample_used.append(self.pool.in_use)
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
        if not self.dynamic:
            return set()
        crossing = set(self.batch.crossings_now())
        if self.stalled:
            block = self.block_tokens
            for r in self.stalled:
                if r.computed % block == 0:
                    crossing.add(r)
        free = self.pool._free
        while len(crossing) > len(free):
            crossing.discard(self._preempt_newest())
        return crossing

    def _schedule_prefills(self, crossing: set[SimRequest], preempted_before: int) -> tuple[list[tuple[SimRequest, int, int]], int]:
        policy = self.policy
        decoders = len(self.batch.members) + len(self.stalled)
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
        free = self.pool._free
        block = self.block_tokens
        prefix = self.prefix
        reserve = self._prefill_reserve() if self.prefilling and self.dynamic else 0
        if waiting[0] is self._blocked_head and prefix is None and len(free) - len(crossing) - reserve <= self._blocked_avail:
            return chunks, scheduled  # the head still does not fit: nothing behind it may pass
        while waiting and room > 0 and budget > 0:
            r = waiting[0]
            if self.static_batching and not r.batch_member:
                break
            hit = owner = False
            if r.uses_prefix and prefix is not None:
                if prefix.lease:
                    hit = prefix.ready
                else:
                    owner = True
            attached_blocks = prefix.blocks if (hit or owner) else 0
            owner_blocks = prefix.blocks if owner else 0
            target = r.prompt_tokens + r.generated
            if self.dynamic:
                whole = -(-target // block) - attached_blocks
                whole = (whole if whole > 0 else 0) + owner_blocks
            else:
                whole = self.static_blocks - attached_blocks + owner_blocks
            if whole > len(free) - len(crossing) - reserve:
                self._blocked_head, self._blocked_avail = r, len(free) - len(crossing) - reserve
                break  # its whole prefill must fit, or it would force preempting a running request later
            start = prefix.tokens if hit else 0
            m = policy.first_chunk(target - start, budget, bool(chunks), decoders)
            if m == 0:
                break  # head-of-line: the whole prompt must fit the step
            if self.dynamic and m < target - start:
                need = -(-(start + m) // block) - attached_blocks
                need = (need if need > 0 else 0) + owner_blocks
            else:
                need = whole
            waiting.popleft()
            lease = self.pool.open()
            self.running[r.index] = r
            if owner:
                prefix.take_ownership(self.pool, r.index)
                need -= prefix.blocks
            elif hit:
                prefix.attach(self.pool)
                self.stats.prefix_hits += 1
            if need:
                self.pool.allocate(lease, need)
            r.admit(self.t, lease, need, start, hit or owner)
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
                reserve += whole - need
        return chunks, scheduled

    def _prefill_reserve(self) -> int:
        """Blocks the prompts being prefilled will still take for the rest of their prefill."""
        block = self.block_tokens
        prefix_blocks = self.prefix.blocks if self.prefix is not None else 0
        return sum(max(0, _blocks(r.target, block) - (prefix_blocks if r.attached else 0) - r.own_blocks) for r in self.prefilling if r.status == PREFILL)

    def _continue_prefills(self, chunks: list, crossing: set[SimRequest], budget: int) -> tuple[int, int]:
        """Chunked prefill: the next chunk of every prompt in progress, oldest first."""
        block = self.block_tokens
        free = self.pool._free
        prefix_blocks = self.prefix.blocks if self.prefix is not None else 0
        chunk_tokens = self.policy.chunk_tokens
        scheduled = 0
        for r in list(self.prefilling):
            if budget <= 0:
                break
            if r.status != PREFILL:
                continue  # preempted while making room for an older request
            c = r.computed
            m = min(chunk_tokens, r.target - c, budget)
            if self.dynamic:
                attached = prefix_blocks if r.attached else 0
                extra = max(0, _blocks(c + m, block) - attached) - r.own_blocks
                if extra > len(free) - len(crossing):
                    while extra > len(free) - len(crossing) and max(self.running) > r.index:
                        crossing.discard(self._preempt_newest())
                    avail = len(free) - len(crossing)
                    if extra > avail:
                        m = min(m, (r.own_blocks + attached + avail) * block - c)  # shrink the chunk to the blocks available
                        if m <= 0:
                            continue
                        extra = max(0, _blocks(c + m, block) - attached) - r.own_blocks
                if extra > 0:
                    self.pool.allocate(r.lease, extra)
                    r.own_blocks += extra
            chunks.append((r, c, m))
            scheduled += m
            budget -= m
        return budget, scheduled

    def _schedule_decodes(self, prefill_tokens: int, crossing: set[SimRequest]) -> list[SimRequest]:
        batch = self.batch
        members = batch.members
        room = self.policy.decode_room(prefill_tokens)
        while len(members) > room:  # the most recently joined skip the step; they resume as stalled
            r = batch.newest()
            batch.leave(r)
            self.stalled.append(r)
        room -= len(members)
        joiners: list[SimRequest] = []
        stalled = self.stalled
        if stalled and room > 0:
            if room >= len(stalled):
                joiners, self.stalled = stalled, []
            else:
                joiners, self.stalled = stalled[:room], stalled[room:]
            for r in joiners:
                end = r.output_tokens
                if r.cancel_stage == CANCEL_IN_DECODE and r.generated < r.cancel_after < end:
                    end = r.cancel_after
                batch.join(r, end)
        if crossing:
            tick = batch.tick
            allocate = self.pool.allocate
            for r in crossing:
                if r in members:
                    allocate(r.lease, 1)
                    r.own_blocks += 1
                    if r.base_tick != tick:  # joiners scheduled their next crossing in join()
                        batch.next_crossing_in_a_block(r)
        return joiners

    def _advance_clock(self, chunks: list[tuple[SimRequest, int, int]], prefill_tokens: int, decoders: int) -> None:
        kv_read = self.batch.context_tokens + decoders
        pairs = kv_read
        for _r, c, m in chunks:
            kv_read += c + m
            pairs += m * c + m * (m + 1) // 2
        t_mem = self._weights_s + self._kv_token_s * kv_read
        t_cmp = self._new_token_s * (prefill_tokens + decoders) + self._pair_s * pairs
        self.t += (t_mem if t_mem > t_cmp else t_cmp) + self._overhead_s
        self.stats.steps += 1

    def _apply_prefills(self, chunks: list[tuple[SimRequest, int, int]]) -> None:
        prefix = self.prefix
        stats = self.stats
        t = self.t
        any_ended = False
        for r, _c, m in chunks:
            complete = r.prefilled(m)
            stats.prefill_tokens += m
            if prefix is not None and prefix.owner == r.index and not prefix.ready and r.computed >= prefix.tokens:
                prefix.ready = True
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
                r.status = DECODE
                self.stalled.append(r)
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
