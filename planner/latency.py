"""Latency by phase: from observations (the seed's LatencyObservation) or from a roofline model.

Roofline model (per GPU, tensor parallel splits weights and work evenly):

* prefill time = max(FLOPs / (peak x MFU), weight bytes / (bandwidth x MBU)), with
  FLOPs = 2 x active parameters x new tokens + causal attention 4 x (query-key pairs) x heads x
  head_dim, with P^2 / 2 pairs per full layer and sum(min(t, W)) per sliding or chunked layer;
* one decode step for ``c`` sequences holding ``n`` tokens each =
  max((weights read + c x K/V(n)) / (bandwidth x MBU), c x FLOPs per token / (peak x MFU)), where a
  mixture-of-experts model reads its dense weights and the expected share of experts its ``c``
  tokens route to, 1 - (1 - k/E)^c of them.

The default efficiency factors (MFU 0.5, MBU 0.7) are stated in every plan and adjustable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import PlannerError
from planner.results import Result

DEFAULT_MFU = 0.5
DEFAULT_MBU = 0.7


@dataclass(frozen=True, slots=True)
class LatencyObservation(Result):
    """Measured phase durations of one request (milliseconds) and its token counts.

    A plain frozen record: :func:`observe` validates every field (and is the only reader).
    """

    prompt_tokens: int
    generated_tokens: int
    queue_ms: float
    preprocessing_ms: float
    prefill_ms: float
    first_decode_ms: float
    remaining_decode_ms: float


@dataclass(frozen=True, slots=True)
class LatencyReport(Result):
    """Latency by phase with the seed's field names."""

    source: str  # "observed" or "roofline estimate"
    queue_ms: float
    preprocessing_ms: float
    prefill_ms: float
    first_decode_ms: float
    remaining_decode_ms: float
    time_to_first_token_ms: float
    prefill_tokens_per_second: float
    output_tokens_per_second: float
    mean_inter_token_latency_ms: float
    end_to_end_ms: float


def _duration(name: str, value: float, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlannerError(name, value, "must be a finite number of milliseconds")
    if value < 0 or (positive and value == 0):
        raise PlannerError(name, value, "must be positive" if positive else "must not be negative")
    return float(value)


def observe(obs: LatencyObservation) -> LatencyReport:
    """TTFT, rates, mean ITL and end-to-end from an observation.

    Raises:
        PlannerError: a duration that is negative, infinite or NaN; zero prefill or first
            decode; non-positive token counts; or remaining decode > 0 with one generated token.
    """
    for name in ("queue_ms", "preprocessing_ms", "remaining_decode_ms"):
        _duration(name, getattr(obs, name))
    prefill = _duration("prefill_ms", obs.prefill_ms, positive=True)
    first = _duration("first_decode_ms", obs.first_decode_ms, positive=True)
    for name in ("prompt_tokens", "generated_tokens"):
        count = getattr(obs, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise PlannerError(name, count, "must be a positive whole number")
    if obs.generated_tokens == 1 and obs.remaining_decode_ms != 0:
        raise PlannerError("remaining_decode_ms", obs.remaining_decode_ms, "must be 0 when only one token is generated (no inter-token interval)")
    ttft = obs.queue_ms + obs.preprocessing_ms + prefill + first
    decode_s = (first + obs.remaining_decode_ms) / 1000.0
    return LatencyReport(
        source="observed",
        queue_ms=obs.queue_ms,
        preprocessing_ms=obs.preprocessing_ms,
        prefill_ms=prefill,
        first_decode_ms=first,
        remaining_decode_ms=obs.remaining_decode_ms,
        time_to_first_token_ms=ttft,
        prefill_tokens_per_second=obs.prompt_tokens / (prefill / 1000.0),
        output_tokens_per_second=obs.generated_tokens / decode_s,
        mean_inter_token_latency_ms=obs.remaining_decode_ms / (obs.generated_tokens - 1) if obs.generated_tokens > 1 else 0.0,
        end_to_end_ms=ttft + obs.remaining_decode_ms,
    )


@dataclass(frozen=True, slots=True)
class Roofline(Result):
    """Everything the step-time model needs, per GPU."""

    weights_bytes: float
    active_params: float  # per GPU
    attn_layers: int
    q_heads: int  # per GPU
    head_dim: int
    peak_flops: float
    bandwidth_bytes_s: float
    mfu: float = DEFAULT_MFU
    mbu: float = DEFAULT_MBU
    windows: tuple[int, ...] = ()  # the window (or chunk) of each attention layer that has one
    expert_bytes: float = 0.0  # the routed experts' share of weights_bytes
    num_experts: int = 0
    experts_per_token: int = 0

    def weights_read(self, tokens: int) -> float:
        """Weight bytes a step over ``tokens`` tokens reads: every dense weight, and of each MoE
        layer's experts the expected share routed to, 1 - (1 - k/E)^tokens (uniform routing)."""
        if not (self.num_experts and self.experts_per_token and self.expert_bytes):
            return self.weights_bytes
        untouched = (1.0 - min(1.0, self.experts_per_token / self.num_experts)) ** max(1, tokens)
        return self.weights_bytes - self.expert_bytes * untouched

    @property
    def ridge_point(self) -> float:
        return self.peak_flops / self.bandwidth_bytes_s

    def _pairs(self, n: int) -> float:
        """Query-key pairs a causal prefill of ``n`` positions computes, summed over the layers:
        n^2 / 2 per full layer, sum of min(t, W) for t = 1..n per windowed layer."""
        full = (self.attn_layers - len(self.windows)) * n * n / 2.0
        windowed = sum(n * (n + 1) / 2.0 if n <= w else w * (w + 1) / 2.0 + (n - w) * w for w in self.windows)
        return full + windowed

    def prefill_flops(self, tokens: int, cached: int = 0) -> float:
        """FLOPs to prefill ``tokens`` new tokens after ``cached`` already-cached prefix tokens."""
        attn = 4.0 * (self._pairs(cached + tokens) - self._pairs(cached)) * self.q_heads * self.head_dim
        return 2.0 * self.active_params * tokens + attn

    def prefill_s(self, tokens: int, cached: int = 0) -> float:
        if tokens <= 0:
            return 0.0
        compute = self.prefill_flops(tokens, cached) / (self.peak_flops * self.mfu)
        memory = self.weights_read(tokens) / (self.bandwidth_bytes_s * self.mbu)
        return max(compute, memory)

    def decode_flops_per_token(self, context: int) -> float:
        span = (self.attn_layers - len(self.windows)) * context + sum(min(context, w) for w in self.windows)
        return 2.0 * self.active_params + 4.0 * span * self.q_heads * self.head_dim

    def decode_step_s(self, sequences: int, kv_bytes_per_sequence: float, context: int) -> float:
        """One decode step for ``sequences`` sequences each holding ``kv_bytes_per_sequence``."""
        memory = (self.weights_read(sequences) + sequences * kv_bytes_per_sequence) / (self.bandwidth_bytes_s * self.mbu)
        compute = sequences * self.decode_flops_per_token(context) / (self.peak_flops * self.mfu)
        return max(memory, compute)

    def decode_intensity(self, sequences: int, kv_bytes_per_sequence: float, context: int) -> float:
        """Arithmetic intensity (FLOP/byte) of a decode step."""
        return sequences * self.decode_flops_per_token(context) / (self.weights_read(sequences) + sequences * kv_bytes_per_sequence)

    def prefill_intensity(self, tokens: int) -> float:
        return self.prefill_flops(tokens) / self.weights_bytes if self.weights_bytes else 0.0


def estimate(
    roof: Roofline,
    prompt_tokens: int,
    cached_prompt_tokens: float,
    generated_tokens: int,
    sequences: int,
    kv_bytes_at: callable,  # tokens -> K/V bytes one sequence holds
    queue_ms: float = 0.0,
    preprocessing_ms: float = 0.0,
) -> LatencyReport:
    """Roofline latency by phase for one request among ``sequences`` concurrent ones.

    The prefill covers the prompt minus the expected cached prefix; the decode steps use the
    mean context (prompt + half the output) and the K/V every active sequence holds then.
    """
    cached = int(cached_prompt_tokens)
    prefill = roof.prefill_s(prompt_tokens - cached, cached) * 1000.0
    first = roof.decode_step_s(sequences, kv_bytes_at(prompt_tokens + 1), prompt_tokens + 1) * 1000.0
    mid = prompt_tokens + generated_tokens // 2
    itl = roof.decode_step_s(sequences, kv_bytes_at(mid), mid) * 1000.0
    remaining = itl * (generated_tokens - 1)
    ttft = queue_ms + preprocessing_ms + prefill + first
    return LatencyReport(
        source="roofline estimate",
        queue_ms=queue_ms,
        preprocessing_ms=preprocessing_ms,
        prefill_ms=prefill,
        first_decode_ms=first,
        remaining_decode_ms=remaining,
        time_to_first_token_ms=ttft,
        prefill_tokens_per_second=(prompt_tokens - cached) / (prefill / 1000.0) if prefill else 0.0,
        output_tokens_per_second=generated_tokens / ((first + remaining) / 1000.0),
        mean_inter_token_latency_ms=itl if generated_tokens > 1 else 0.0,
        end_to_end_ms=ttft + remaining,
    )


# --------------------------------------------------------------------------- work counts


def attention_flops_per_step(context: int, d_model: int) -> tuple[int, int]:
    """One layer's attention FLOPs at one decode step: (without cache 4 n^2 d, with cache 4 n d)."""
    return 4 * context * context * d_model, 4 * context * d_model


def cumulative_projection_flops(generated: int, d_model: int) -> tuple[int, int]:
    """One layer's QKV projection FLOPs over a generation: (naive 3 d^2 N(N+1), cached 6 d^2 N)."""
    return 3 * d_model * d_model * generated * (generated + 1), 6 * d_model * d_model * generated


def layer_operations(d: int, steps: int) -> tuple[int, int]:
    """Multiply-adds of one attention layer over ``steps`` steps: (without cache, with cache).

    Step t costs 4 t d^2 + 2 t^2 d without a cache (re-project and attend all t tokens) and
    4 d^2 + 2 t d with one (project the new token, attend the t cached ones).
    """
    no_cache = sum(4 * t * d * d + 2 * t * t * d for t in range(1, steps + 1))
    with_cache = sum(4 * d * d + 2 * t * d for t in range(1, steps + 1))
    return no_cache, with_cache


def generation_projections(prompt: int, generated: int) -> tuple[int, int]:
    """Token projections to generate ``generated`` tokens after a ``prompt``: (naive, cached).

    Without a cache each forward re-projects every position (P, P+1, ..., P+N-1); with one,
    the prefill projects P and each later step only its one new token (the first new token
    comes from the prefill).
    """
    naive = generated * prompt + generated * (generated - 1) // 2  # P + (P+1) + ... + (P+N-1)
    return naive, prompt + generated - 1


def feed_projections(prompt: int, fed: int) -> tuple[int, int]:
    """Projections when ``fed`` new tokens are all fed back: (naive 1 + 2 + ... + (P+F), cached P + F)."""
    n = prompt + fed
    return n * (n + 1) // 2, n
