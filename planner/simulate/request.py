"""One request's life: its status and token counters, changed only through the methods here.

    pending -> waiting -> prefill -> decode -> done | cancelled
                 ^          |          |
                 +----------+----------+  preempted: blocks freed, recompute on re-admission
    (rejected at arrival when it can never fit the pool or the step's token budget)

Mirrors vLLM's ``Request`` (vllm/v1/request.py): the request carries ``status`` and
``computed`` (tokens whose K/V is cached, vLLM's ``num_computed_tokens``); the replica decides
when a transition happens, the KV manager which blocks it holds.

A request in the lazy decode batch (see ``decode_batch.py``) does not update ``computed`` and
``generated`` per token; the batch materialises them when it leaves.
"""

from __future__ import annotations

PENDING, WAITING, PREFILL, DECODE, DONE, CANCELLED, REJECTED = range(7)
OUTCOME = {DONE: "done", CANCELLED: "cancelled", REJECTED: "rejected"}

# When a request is cancelled (planner.simulate.model.Cancellation.stage)
NO_CANCEL, CANCEL_AT_ADMISSION, CANCEL_MID_PREFILL, CANCEL_AT_FIRST_TOKEN, CANCEL_IN_DECODE = range(5)
CANCEL_STAGE = {"admission": CANCEL_AT_ADMISSION, "mid-prefill": CANCEL_MID_PREFILL, "first-token": CANCEL_AT_FIRST_TOKEN, "decode": CANCEL_IN_DECODE}


class SimRequest:
    __slots__ = (
        "index", "id", "arrival_s", "prompt_tokens", "output_tokens", "uses_prefix", "rejected", "reject_reason", "cancel_stage", "cancel_after",
        "status", "computed", "generated", "target", "lease", "own_blocks", "attached", "replica", "batch_member",
        "admitted_s", "first_token_s", "last_token_s", "finished_s", "preemptions",
        "base_tick", "base_generated", "base_computed", "version",
    )  # fmt: skip

    def __init__(self, index: int, rid: int, arrival_s: float, prompt_tokens: int, output_tokens: int) -> None:
        self.index = index  # position in arrival order: a larger index is a newer request
        self.id = rid
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.uses_prefix = False
        self.rejected = False
        self.reject_reason = ""  # a key of planner.simulate.model.REJECTION_REASONS when rejected
        self.cancel_stage = NO_CANCEL
        self.cancel_after = 0  # CANCEL_IN_DECODE: tokens generated when cancelled
        self.status = PENDING
        self.computed = 0  # tokens whose K/V is cached
        self.generated = 0  # output tokens produced
        self.target = 0  # prefill length of the current admission (prompt + generated so far)
        # what it holds of the KV pool, written by the KV manager alone (kv_manager.py)
        self.lease = 0  # the pool lease holding its own blocks (0 = none)
        self.own_blocks = 0
        self.attached = False  # holds a reference on the shared prefix blocks
        self.replica = 0
        self.batch_member = False  # static batching: part of the batch being served
        self.admitted_s = -1.0
        self.first_token_s = -1.0
        self.last_token_s = 0.0
        self.finished_s = -1.0
        self.preemptions = 0
        # lazy decode batch bookkeeping (decode_batch.py)
        self.base_tick = 0
        self.base_generated = 0
        self.base_computed = 0
        self.version = 0

    @property
    def finished(self) -> bool:
        return self.status >= DONE

    @property
    def remaining_tokens(self) -> int:
        """Prompt + output tokens this request still costs, the router's load measure."""
        return 0 if self.status >= DONE else self.prompt_tokens + self.output_tokens

    def arrive(self) -> None:
        self.status = REJECTED if self.rejected else WAITING

    def admit(self, t: float, start: int) -> None:
        """Admitted at ``t``; prefill starts at token ``start`` (after a prefix hit) and runs to
        the prompt plus what was generated before a preemption."""
        self.computed = start
        self.target = self.prompt_tokens + self.generated
        self.status = PREFILL
        if self.admitted_s < 0:
            self.admitted_s = t

    def prefilled(self, tokens: int) -> bool:
        """``tokens`` more prompt tokens computed; True when the prefill is complete."""
        self.computed += tokens
        return self.computed >= self.target

    def begin_decode(self) -> None:
        """Prefill complete and first token out: it decodes from the next step on."""
        self.status = DECODE

    def emit_token(self, t: float) -> float | None:
        """One output token at ``t``; returns the gap since the previous token (None for the first)."""
        self.generated += 1
        gap = None if self.generated == 1 else t - self.last_token_s
        if self.generated == 1:
            self.first_token_s = t
        self.last_token_s = t
        return gap

    def decode_end(self) -> int:
        """Output tokens at which its decoding ends: all of them, or its cancellation point."""
        end = self.output_tokens
        if self.cancel_stage == CANCEL_IN_DECODE and self.generated < self.cancel_after < end:
            end = self.cancel_after
        return end

    def cancel_due(self) -> bool:
        """Cancelled now, right after a token (first-token or decode stage)?"""
        stage = self.cancel_stage
        return (stage == CANCEL_AT_FIRST_TOKEN and self.generated == 1) or (stage == CANCEL_IN_DECODE and self.generated >= self.cancel_after)

    def preempted(self) -> int:
        """Back to waiting with nothing cached; returns the computed tokens thrown away."""
        wasted = self.computed
        self.computed = 0
        self.status = WAITING
        self.preemptions += 1
        return wasted

    def finish(self, status: int, t: float) -> None:
        self.status = status
        self.finished_s = t
