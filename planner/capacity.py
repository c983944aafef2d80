"""Device memory, per-sequence reservation, the memory-only ceiling and admission.

All byte arithmetic is in Python integers (exact, no overflow); headroom is applied in basis
points without multiplying the whole capacity by 10,000 first, as the seed requires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from planner.errors import PlannerError
from planner.kv import KVSpec
from planner.results import Result

Reservation = Literal["dynamic", "static", "paged"]
RESERVATIONS = ("dynamic", "static", "paged")
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


def usable_bytes(capacity: int, headroom_bp: int) -> int:
    """``capacity x (10000 - headroom_bp) / 10000``, floored, computed as quotient and remainder.

    Raises:
        PlannerError: headroom outside 0..9999 basis points or a negative capacity.
    """
    if isinstance(headroom_bp, bool) or not isinstance(headroom_bp, int) or not 0 <= headroom_bp < 10_000:
        raise PlannerError("headroom_bp", headroom_bp, "headroom must be an integer from 0 to 9,999 basis points (0-99.99 %)")
    if capacity < 0:
        raise PlannerError("device_bytes", capacity, "must not be negative")
    keep = 10_000 - headroom_bp
    return (capacity // 10_000) * keep + (capacity % 10_000) * keep // 10_000


@dataclass(frozen=True, slots=True)
class SequenceReservation(Result):
    """Bytes one sequence reserves on one GPU under a reservation mode."""

    mode: str
    tokens: int  # tokens the reservation is sized for
    kv_bytes: int  # K/V reserved (paged: whole blocks)
    used_kv_bytes: int  # K/V the tokens actually fill
    waste_bytes: int  # reserved but unfilled (block rounding, static over-allocation)
    state_bytes: int  # recurrent state (Mamba/linear), fixed per sequence
    blocks: dict[str, int]  # paged: blocks per layer for each layer group
    encoder_bytes: int = 0  # cross-attention K/V over the encoder's (image) tokens
    draft_bytes: int = 0  # a speculative proposer's K/V of the reserved tokens (EAGLE-3 head, draft model)

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.state_bytes + self.encoder_bytes + self.draft_bytes


def _group_label(spec: KVSpec) -> str:
    return f"{spec.kind}{'-' + str(spec.window) if spec.window else ''}"


def reserve(specs: tuple[KVSpec, ...], mode: str, reserved_tokens: int, max_context: int, block_tokens: int, state: int, encoder_tokens: int = 0) -> SequenceReservation:
    """Reservation of one sequence: dynamic (reserved tokens), static (max context) or paged.

    ``encoder_tokens`` (image tokens of a vision encoder) fill the cross-attention layers' cache,
    in whole blocks under paged reservation.

    Raises:
        PlannerError: unknown mode or a block size outside 1..4096.
    """
    if mode not in RESERVATIONS:
        raise PlannerError("reservation", mode, f"choose one of {', '.join(RESERVATIONS)}")
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or not 1 <= block_tokens <= 4096:
        raise PlannerError("block_tokens", block_tokens, "block size must be an integer from 1 to 4,096 tokens")
    used = sum(s.peak_bytes(reserved_tokens) for s in specs)
    cross = sum(s.bytes_per_token for s in specs if s.kind == "cross")
    if mode == "dynamic":
        return SequenceReservation(mode=mode, tokens=reserved_tokens, kv_bytes=used, used_kv_bytes=used, waste_bytes=0, state_bytes=state, blocks={}, encoder_bytes=cross * encoder_tokens)
    if mode == "static":
        kv = sum(s.peak_bytes(max_context) for s in specs)
        return SequenceReservation(mode=mode, tokens=max_context, kv_bytes=kv, used_kv_bytes=used, waste_bytes=kv - used, state_bytes=state, blocks={}, encoder_bytes=cross * encoder_tokens)
    blocks = {_group_label(s): s.blocks(reserved_tokens, block_tokens) for s in specs if s.kind != "cross"}
    kv = sum(s.paged_bytes(reserved_tokens, block_tokens) for s in specs)
    encoder = cross * (-(-encoder_tokens // block_tokens) * block_tokens)
    if encoder_tokens and cross:
        blocks["cross"] = -(-encoder_tokens // block_tokens)
    return SequenceReservation(mode=mode, tokens=reserved_tokens, kv_bytes=kv, used_kv_bytes=used, waste_bytes=kv - used, state_bytes=state, blocks=blocks, encoder_bytes=encoder)


def max_sequences(available: int, per_sequence: int) -> int:
    """floor(available / per_sequence); 0 when nothing is available."""
    if per_sequence <= 0:
        raise PlannerError("kv_bytes_per_sequence", per_sequence, "a sequence must reserve a positive number of bytes")
    return max(0, available) // per_sequence


def shared_prefix_bytes(specs: tuple[KVSpec, ...], shared_tokens: int, block_tokens: int) -> tuple[int, int]:
    """(whole shared blocks, bytes they hold) of a prefix shared by sequences of one tenant.

    Only full blocks are shared, and only by layers whose cache keeps the prefix (full
    attention; a sliding or chunked layer drops it once the window moves on).
    """
    blocks = shared_tokens // block_tokens
    per_block = sum(s.page_bytes(block_tokens) for s in specs if s.kind == "full")
    return blocks, blocks * per_block


def max_sequences_shared(available: int, per_sequence: int, saved: int, copies: int) -> int:
    """Largest N with N x per_sequence - (N - copies) x saved <= available (copies >= 1)."""
    if saved <= 0:
        return max_sequences(available, per_sequence)
    n = (available - copies * saved) // (per_sequence - saved) if per_sequence > saved else 0
    if n < copies:  # fewer sequences than tenants: each holds its own copy
        return max_sequences(available, per_sequence)
    return max(0, n)


def largest_within(cost: Callable[[int], float], bound: float, top: int) -> int:
    """The largest ``c`` in 1..``top`` with ``cost(c) <= bound``, for a ``cost`` that does not fall
    as ``c`` grows (a p95 latency against concurrency); 0 when ``cost(1)`` already exceeds it.
    Bisection: about log2(top) calls of ``cost``."""
    if cost(1) > bound:
        return 0
    return _largest_from(cost, bound, 1, top)


def largest_within_galloping(cost: Callable[[int], float], bound: float, top: int) -> int:
    """:func:`largest_within` found from below: ``cost`` at 1, 2, 4, ... until it exceeds
    ``bound`` (or ``top``), then bisection between the last two. The same answer for a ``cost``
    that does not fall as ``c`` grows, in about 2 log2(answer) calls that stay near the answer:
    a closed-loop p95 far above the SLO (a saturated prefill budget) is the slowest to compute."""
    if cost(1) > bound:
        return 0
    lo = 1
    while lo < top:
        probe = min(top, 2 * lo)
        if cost(probe) > bound:
            return _largest_from(cost, bound, lo, probe - 1)
        lo = probe
    return lo


def _largest_from(cost: Callable[[int], float], bound: float, lo: int, hi: int) -> int:
    """The largest ``c`` in ``lo``..``hi`` with ``cost(c) <= bound``, given ``cost(lo) <= bound`` (bisection)."""
    while lo < hi:
        m = (lo + hi + 1) // 2
        if cost(m) <= bound:
            lo = m
        else:
            hi = m - 1
    return lo


def smallest_passing(passes: Callable[[int], bool], fail: int, ok: int) -> int:
    """The smallest ``n`` in ``fail + 1 .. ok`` with ``passes(n)``, for a ``passes`` that stays
    true from some n on, given that ``passes(ok)`` holds and ``passes(fail)`` does not (or
    ``fail`` is below the range). Bisection: about log2(ok - fail) calls."""
    while ok - fail > 1:
        mid = (ok + fail) // 2
        if passes(mid):
            ok = mid
        else:
            fail = mid
    return ok


LIMIT_PHRASES = {
    "memory": "the conservative KV-memory plan",  # the seed's wording (its worked admission error)
    "latency_slo": "the inter-token latency (ITL) SLO",
    "ttft_slo": "the time-to-first-token (TTFT) SLO",
    "runtime": "the runtime's maximum number of sequences",
    "tenant_quota": "the tenant quota",
}

# Short names of the same limits for badges, tables and reports ("bound by KV-cache memory").
LIMIT_LABELS = {
    "memory": "KV-cache memory",
    "latency_slo": "ITL SLO",
    "ttft_slo": "TTFT SLO",
    "runtime": "runtime's max sequences",
    "tenant_quota": "tenant quota",
}


def admission(requested: int, limits: dict[str, int]) -> tuple[bool, int, str, str | None]:
    """(admitted, admissible maximum, binding constraint, error sentence or None).

    Ties are broken in the order memory, ITL SLO, TTFT SLO, runtime limit, tenant quota.
    """
    binding = min(limits, key=lambda k: (limits[k], list(LIMIT_PHRASES).index(k)))
    limit = limits[binding]
    if requested <= limit:
        return True, limit, binding, None
    return False, limit, binding, f"requested {requested} sequences, but {LIMIT_PHRASES[binding]} admits at most {limit}"
