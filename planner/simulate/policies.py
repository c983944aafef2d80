"""Scheduling policies: how one step's token budget is split between prompts and decodes.

One small class per policy behind :class:`SchedulingPolicy`; a new policy is a new class (and a
name in ``POLICIES``), not a new branch in the replica. Shaped after vLLM's request queues
(vllm/v1/core/sched/request_queue.py): each answers a few questions and holds no request state.
"""

from __future__ import annotations

from typing import ClassVar


class SchedulingPolicy:
    """Base: decodes first, whole prompts with the budget that is left."""

    name: ClassVar[str]
    splits_prompts: ClassVar[bool] = False  # chunked prefill: a prompt may span several steps

    def __init__(self, token_budget: int, chunk_tokens: int) -> None:
        self.token_budget = token_budget  # max_num_batched_tokens
        self.chunk_tokens = chunk_tokens

    def can_ever_run(self, prompt_tokens: int) -> bool:
        """False when a prompt can never be scheduled (rejected at arrival)."""
        return self.splits_prompts or prompt_tokens <= self.token_budget

    def prefill_budget(self, decoders: int) -> int:
        """Tokens left for prefill this step, given ``decoders`` sequences ready to decode."""
        return self.token_budget - min(decoders, self.token_budget)

    def decode_room(self, prefill_tokens: int) -> int:
        """How many decoders may run this step after ``prefill_tokens`` of prefill."""
        return self.token_budget

    def first_chunk(self, tokens: int, budget: int, step_has_prefill: bool, decoders: int) -> int:
        """Tokens of a newly admitted prompt (``tokens`` to compute) to run this step, given the
        ``budget`` left; 0 keeps it waiting, and everyone behind it (head-of-line)."""
        if tokens <= budget:
            return tokens
        # A recompute after preemption can exceed the whole budget: it then runs alone.
        if tokens > self.token_budget and not step_has_prefill and self._may_run_alone(decoders):
            return tokens
        return 0

    def _may_run_alone(self, decoders: int) -> bool:
        return decoders == 0


class FifoPolicy(SchedulingPolicy):
    """Prefill first: waiting prompts are admitted whole, in arrival order, and decodes take the
    budget that is left; decodes that do not fit skip the step."""

    name = "fifo"

    def prefill_budget(self, decoders: int) -> int:
        return self.token_budget

    def decode_room(self, prefill_tokens: int) -> int:
        room = self.token_budget - prefill_tokens
        return room if room > 0 else 0

    def _may_run_alone(self, decoders: int) -> bool:
        return True


class DecodePriorityPolicy(SchedulingPolicy):
    """Every running decode first, then whole prompts with the remaining budget."""

    name = "decode-priority"


class ChunkedPrefillPolicy(SchedulingPolicy):
    """Decodes first, then at most ``chunk_tokens`` of prefill per request per step; prompts
    already being prefilled continue before new ones are admitted (vLLM's chunked prefill)."""

    name = "chunked"
    splits_prompts = True

    def first_chunk(self, tokens: int, budget: int, step_has_prefill: bool, decoders: int) -> int:
        return min(tokens, self.chunk_tokens, budget)


class PrefillFirstPolicy(ChunkedPrefillPolicy):
    """SGLang's default scheduler: whenever a prefill batch can be formed (prompts in progress
    first, then new ones, up to ``chunk_tokens`` a step: ``--chunked-prefill-size``), the step is that
    prefill alone and every decode waits; decodes run in steps with no prefill to do
    (``Scheduler.get_next_batch_to_run``, "Run prefill first if possible", without
    ``--enable-mixed-chunk``). Prompts are chunked as :class:`ChunkedPrefillPolicy` chunks them, within
    the step's whole prefill budget."""

    name = "prefill-first"

    def prefill_budget(self, decoders: int) -> int:
        return min(self.token_budget, self.chunk_tokens)

    def decode_room(self, prefill_tokens: int) -> int:
        return 0 if prefill_tokens > 0 else self.token_budget


POLICY_CLASSES: dict[str, type[SchedulingPolicy]] = {p.name: p for p in (FifoPolicy, DecodePriorityPolicy, ChunkedPrefillPolicy, PrefillFirstPolicy)}


def make_policy(name: str, token_budget: int, chunk_tokens: int) -> SchedulingPolicy:
    return POLICY_CLASSES[name](token_budget, chunk_tokens)
