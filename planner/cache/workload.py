"""A multi-turn workload: sessions of turns with think time, a shared prefix per tenant, documents.

A session is ``turns`` requests. Turn k's prompt is the tenant's shared prefix (system prompt and
tool schemas), the session's document (optional), the history of the k - 1 earlier turns (each
the user's message and the answer, resent unchanged) and the new user message:

    prompt_k = prefix + document + (k - 1) x (user + output) + user

Between the answer of one turn and the next request the user thinks (``think_time_s``, mean of
an exponential by default). Sessions start as a Poisson stream. A cache holds whole *units*
(the engine's block, or an offload connector's chunk) of the token chain, each keyed by the
tenant and every token before it, so the context splits into segments that are always used
together (:meth:`SessionWorkload.segments`):

* the shared prefix, shared by every session of one tenant;
* the document, shared by the tenant's sessions that use it (a catalog with Zipf popularity),
  or the session's own when there is no catalog;
* one segment per turn: the whole units that turn's message and answer complete, private to the
  session.

Only whole units are cached, a unit that straddles two parts belongs to the later one (its key
depends on both), and the last token of a prompt is always recomputed (it yields the first
logits), as in vLLM's prefix cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TURNS = 1000
MAX_CATALOG = 10_000_000

Think = Literal["exponential", "fixed"]
Arrivals = Literal["poisson", "fixed"]


class SessionWorkload(BaseModel):
    """A session workload (rates are of the whole deployment; tokens are per turn)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    sessions_per_s: float = Field(gt=0, le=1e6)
    turns: int = Field(default=1, ge=1, le=MAX_TURNS)
    think_time_s: float = Field(default=30.0, ge=0, le=1e7)
    think: Think = "exponential"  # think time distribution (fixed: every gap is think_time_s)
    arrivals: Arrivals = "poisson"  # session starts (fixed: one every 1 / sessions_per_s seconds)
    shared_prefix_tokens: int = Field(default=0, ge=0, le=1 << 31)  # per tenant
    doc_tokens: int = Field(default=0, ge=0, le=1 << 31)  # the session's document
    doc_catalog: int = Field(default=0, ge=0, le=MAX_CATALOG)  # documents to draw from; 0: each session's own
    doc_zipf: float = Field(default=1.0, ge=0, le=10)  # popularity skew of the catalog (0: uniform)
    user_tokens: int = Field(default=512, ge=1, le=1 << 31)
    output_tokens: int = Field(default=512, ge=1, le=1 << 31)
    tenants: int = Field(default=1, ge=1, le=1_000_000)

    @property
    def requests_per_s(self) -> float:
        return self.sessions_per_s * self.turns

    @property
    def shared_docs(self) -> bool:
        """Documents come from a catalog the tenant's sessions share."""
        return self.doc_catalog > 0 and self.doc_tokens > 0

    def prompt_tokens(self, turn: int) -> int:
        """Prompt of turn ``turn`` (1-based)."""
        return self.shared_prefix_tokens + self.doc_tokens + (turn - 1) * (self.user_tokens + self.output_tokens) + self.user_tokens

    def prompt_total(self) -> int:
        """Prompt tokens of a whole session."""
        n = self.turns
        return n * (self.shared_prefix_tokens + self.doc_tokens + self.user_tokens) + n * (n - 1) // 2 * (self.user_tokens + self.output_tokens)

    def segments(self, unit: int) -> Segments:
        """The context in whole cache units of ``unit`` tokens (see the module docstring)."""
        return _segments(self.shared_prefix_tokens, self.doc_tokens, self.user_tokens, self.output_tokens, self.turns, unit)

    def doc_weights(self) -> tuple[tuple[float, float], ...]:
        """(documents, probability of each) groups of the catalog's Zipf popularity (:func:`zipf_groups`)."""
        return zipf_groups(self.doc_catalog, self.doc_zipf) if self.shared_docs else ()

    def shareable(self) -> tuple[tuple[str, str], ...]:
        """Which parts of the context a cache may share, and with whom (the plan shows it)."""
        out = [("shared prefix", f"{self.shared_prefix_tokens:,} tokens: shared by the sessions of one tenant, never across tenants")]
        if self.doc_tokens:
            who = f"by the sessions of one tenant that use the same document ({self.doc_catalog:,} in the catalog)" if self.shared_docs else "by the turns of one session (no shared catalog)"
            out.append(("document", f"{self.doc_tokens:,} tokens: shared {who}"))
        out.append(("history", "earlier turns: reused by the later turns of the same session only"))
        out.append(("new user message", f"{self.user_tokens:,} tokens a turn: never cached before it is sent"))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Segments:
    """A session's context in whole cache units: the shared prefix, the document, and the units
    each turn completes (``turn[j - 1]`` for turn j: its message and answer, computed during it)."""

    unit: int
    prefix: int
    doc: int
    turn: tuple[int, ...]

    def history_before(self, turn: int) -> int:
        """Units of the session's own history a request of turn ``turn`` can find cached."""
        return sum(self.turn[: turn - 1])


@lru_cache(maxsize=256)
def _segments(prefix: int, doc: int, user: int, output: int, turns: int, unit: int) -> Segments:
    prefix_units = prefix // unit
    doc_end = (prefix + doc) // unit
    ends = [doc_end]
    for j in range(1, turns + 1):
        # after turn j the cache holds every token but the answer's last (its K/V is never computed)
        ends.append((prefix + doc + j * (user + output) - 1) // unit)
    return Segments(unit, prefix_units, doc_end - prefix_units, tuple(ends[j] - ends[j - 1] for j in range(1, turns + 1)))


EXACT_RANKS = 32  # the most popular documents are summed one by one
GROUP_RATIO = 1.1  # then ranks in geometric groups, each 10 % wider than the last


@lru_cache(maxsize=64)
def zipf_groups(catalog: int, skew: float) -> tuple[tuple[float, float], ...]:
    """The catalog's Zipf popularity q_d = d^-s / sum_i i^-s as (documents, probability of each)
    groups: the first 32 ranks one by one, then ranks in geometric groups 1.1x wide, each at the
    popularity of its geometric middle rank. A sum over documents of a smooth function of q (the
    cache model's) then takes ~100 terms for any catalog; the groups' counts sum to the catalog."""
    if catalog <= 0:
        return ()
    bounds = list(range(1, min(catalog, EXACT_RANKS) + 1))
    lo = bounds[-1] + 1
    while lo <= catalog:
        hi = min(catalog, max(lo, int(lo * GROUP_RATIO)))
        bounds.append(hi)
        lo = hi + 1
    groups = []
    start = 1
    for end in bounds:
        count = end - start + 1
        mid = (start * end) ** 0.5
        groups.append((count, mid**-skew))
        start = end + 1
    total = sum(count * w for count, w in groups)
    return tuple((float(count), w / total) for count, w in groups)
