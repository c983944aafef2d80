"""What one turn costs the engine: prefill of the uncached tokens, loads from lower tiers, decode.

Shared by the analytic cache section and the tiered cache simulator, so both time a request the
same way: a hit found only in a lower tier is either loaded back (bytes over the tier's link)
or recomputed, whichever is faster for that request, as LMCache's and vLLM's connectors decide
per request whether a load is worth it (:func:`choose_loads`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TurnTiming:
    """A replica's times: ``prefill_s(new_tokens, cached_tokens)`` (the plan's step model),
    the first decode step, the gap between later tokens, and the GPUs of one replica."""

    prefill_s: Callable[[int, int], float]
    first_decode_s: float
    itl_s: float
    gpus_per_replica: int = 1
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def prefill(self, new: int, cached: int) -> float:
        """``prefill_s`` memoised (a workload has few distinct prompts)."""
        key = (new, cached)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) > 65_536:
                self._memo.clear()
            hit = self._memo[key] = self.prefill_s(new, cached) if new > 0 else 0.0
        return hit


def choose_loads(timing: TurnTiming, prompt: int, gpu_hit: int, lower: list[tuple[int, float]]) -> tuple[list[int], float, int]:
    """Which lower-tier hits a request loads: ``lower`` lists, tier by tier below the GPU, the
    tokens that tier adds beyond the ones above it and its seconds per token. Loading the first
    j tiers' tokens costs their load times plus the prefill of what is left; the fastest j wins
    (j = 0: recompute all of it). Returns (tokens loaded per lower tier, load seconds, cached
    tokens in all)."""
    best_j, best_s, best_load = 0, timing.prefill(prompt - gpu_hit, gpu_hit), 0.0
    cached, load = gpu_hit, 0.0
    for j, (tokens, s_per_token) in enumerate(lower, start=1):
        if tokens <= 0:
            continue  # this tier adds nothing beyond the ones above it; the next may
        cached += tokens
        load += tokens * s_per_token
        total = load + timing.prefill(prompt - cached, cached)
        if total < best_s:
            best_j, best_s, best_load = j, total, load
    loaded = [tokens if i < best_j else 0 for i, (tokens, _) in enumerate(lower)]
    return loaded, best_load, gpu_hit + sum(loaded)
