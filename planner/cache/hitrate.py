"""Expected prefix-cache hits of a session workload in an LRU cache of a given size (Che's model).

The model (Che, Tung and Wang, IEEE JSAC 2002, in the form of Fricker, Robert and Roberts 2012
for non-Poisson reuse): an LRU cache of C units behaves like a cache that keeps every unit used
in the last T seconds, where the *characteristic time* T makes the expected number of such units
equal C. Each segment of :class:`~planner.cache.workload.Segments` has one age (its units are
always used together), so:

* occupancy: a request uses its units when it arrives and again when its answer is out (S
  later: a turn's time in the engine), and a unit stays for T after each use, so a segment used
  by every turn of a session is held for L(T) = N min(S, T) + (N - 1) E[min(think, T)] + T
  seconds of each session that uses it, and a session's own segment of turn j (computed in
  turn j) for (N - j + 1) min(S, T) + (N - j) E[min(think, T)] + T. Sessions start as a
  Poisson stream at r a second per replica, so Little's law gives the private units held
  (r x size x time held), and a segment shared by a stream of r' sessions a second is held with
  probability 1 - exp(-r' x L(T)) (the Poisson cluster formula, L = N S + (N - 1) E[min] + T);
* hits: the session's history is found when the think time before the turn was below T; a
  shared segment when that holds or another session used it within T: 1 - P(think > T) x
  exp(-r' L(T)) (for a session's first turn, 1 - exp(-r' L(T))).

Keys carry the tenant, so each tenant's prefix and documents are distinct segments used by that
tenant's sessions only (r' = r / tenants for the prefix, x the document's popularity for a
document): no model or simulation ever hits across tenants. Sessions stick to one replica (a
prefix-aware router) and each replica has its own tiers, so rates are per replica.

Every use touches every tier (vLLM's offloading connector stores each computed block and
records every request's access to the blocks it already holds; SGLang's hierarchical cache
writes through), so LRU tiers are nested: a tier sees a unit whenever it is in a smaller one,
and the hierarchy finds what its largest tier finds. Checked against the tiered LRU simulator
(:mod:`planner.simulate.sessions`) in tests/test_cache.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.cache.workload import SessionWorkload
from planner.roots import illinois

SOLVE_REL = 1e-7  # the characteristic time is solved to this relative occupancy
MAX_T = 1e12  # seconds: beyond it a cache holds every segment that is ever reused


@dataclass(frozen=True, slots=True)
class TierFit:
    """One LRU cache of ``capacity_units`` units of ``unit`` tokens under the workload."""

    unit: int
    capacity_units: int
    characteristic_s: float  # Che's T (inf: everything ever reused fits)
    hit_units: tuple[float, ...]  # expected units a request of turn k finds (k = 1..N)
    prefix_presence: float  # probability a new session finds its tenant's shared prefix
    # per turn: the probability a request finds its prefix, its document and its history here
    presence: tuple[tuple[float, float, float], ...]

    def hit_tokens(self, turn: int) -> float:
        return self.hit_units[turn - 1] * self.unit


class _Occupancy:
    """Occupancy(T) and hits(T) of one workload in units of one size (the sums precomputed)."""

    __slots__ = ("w", "seg", "rate", "tenant_rate", "service", "theta", "fixed", "turns", "hist_sizes", "a1", "a2", "total", "docs", "doc_private")

    def __init__(self, w: SessionWorkload, unit: int, replicas: int, service_s: float) -> None:
        self.w = w
        self.seg = w.segments(unit)
        self.rate = w.sessions_per_s / replicas
        self.tenant_rate = self.rate / w.tenants
        self.service = service_s
        self.theta = w.think_time_s
        self.fixed = w.think == "fixed"
        n = self.turns = w.turns
        sizes = self.seg.turn
        self.hist_sizes = sizes
        self.a1 = sum(s * (n - j + 1) for j, s in enumerate(sizes, start=1))
        self.a2 = sum(s * (n - j) for j, s in enumerate(sizes, start=1))
        self.total = sum(sizes)
        self.docs = w.doc_weights() if self.seg.doc else ()
        self.doc_private = bool(self.seg.doc) and not w.shared_docs

    def think(self, t: float) -> tuple[float, float]:
        """(E[min(think, t)], P(think < t))."""
        theta = self.theta
        if self.fixed or theta <= 0:
            return min(theta, t), 1.0 if theta < t else 0.0
        if math.isinf(t):
            return theta, 1.0
        e = math.exp(-t / theta)
        return theta * (1.0 - e), 1.0 - e

    def span(self, t: float, mean_min: float) -> float:
        """L(T): seconds of a session during which a segment used by all its turns is held."""
        return self.turns * min(self.service, t) + (self.turns - 1) * mean_min + t

    def occupancy(self, t: float) -> float:
        mean_min, _ = self.think(t)
        span = self.span(t, mean_min)
        seg, w = self.seg, self.w
        out = self.rate * (self.a1 * min(self.service, t) + self.a2 * mean_min + self.total * t)
        if seg.prefix:
            out += w.tenants * seg.prefix * -math.expm1(-self.tenant_rate * span)
        if self.doc_private:
            out += self.rate * seg.doc * span
        elif self.docs:
            a = self.tenant_rate * span
            out += w.tenants * seg.doc * sum(count * -math.expm1(-a * q) for count, q in self.docs)
        return out

    def hits(self, t: float) -> tuple[tuple[float, ...], float, tuple[tuple[float, float, float], ...]]:
        """(expected units found per turn, probability a first turn finds the prefix, the
        probabilities each turn finds its prefix, document and history)."""
        mean_min, reuse = self.think(t)
        span = self.span(t, mean_min)
        seg = self.seg
        miss_others = math.exp(-self.tenant_rate * span) if not math.isinf(span) else 0.0
        prefix_first = 1.0 - miss_others
        prefix_later = 1.0 - (1.0 - reuse) * miss_others
        if self.doc_private:
            doc_first, doc_later = 0.0, reuse
        elif self.docs:
            a = self.tenant_rate * span
            gone = [count * q * math.exp(-a * q) for count, q in self.docs]  # sessions' chance their document is gone
            doc_first = 1.0 - sum(gone)
            doc_later = 1.0 - (1.0 - reuse) * sum(gone)
        else:
            doc_first = doc_later = 0.0
        out = [seg.prefix * prefix_first + seg.doc * doc_first]
        history = 0
        for k in range(2, self.turns + 1):
            history += self.hist_sizes[k - 2]
            out.append(seg.prefix * prefix_later + seg.doc * doc_later + reuse * history)
        first = (prefix_first if seg.prefix else 0.0, doc_first if seg.doc else 0.0, 0.0)
        later = (prefix_later if seg.prefix else 0.0, doc_later if seg.doc else 0.0, reuse)
        return tuple(out), prefix_first, (first,) + (later,) * (self.turns - 1)


def fit_tier(w: SessionWorkload, unit: int, capacity_units: int, replicas: int = 1, service_s: float = 0.0) -> TierFit:
    """Che's characteristic time of an LRU cache of ``capacity_units`` units and what each turn
    finds in it (see the module docstring). ``service_s``: a turn's time in the engine."""
    occ = _Occupancy(w, unit, replicas, service_s)
    t = solve_characteristic_time(occ.occupancy, float(capacity_units), max(w.think_time_s, service_s, 1e-3))
    hits, prefix, presence = occ.hits(t)
    return TierFit(unit, capacity_units, t, hits, prefix, presence)


def solve_characteristic_time(occupancy, capacity: float, scale: float) -> float:
    """The T with occupancy(T) = capacity for an increasing ``occupancy`` with occupancy(0) = 0:
    0 for an empty cache, inf when everything fits; else bracketed by growing from ``scale``
    and found by the Illinois variant of regula falsi (:func:`planner.roots.illinois`)."""
    if capacity <= 0:
        return 0.0
    lo, f_lo = 0.0, -capacity
    hi = scale
    f_hi = occupancy(hi) - capacity
    while f_hi < 0:
        lo, f_lo = hi, f_hi
        hi *= 4.0
        if hi > MAX_T:
            return math.inf
        f_hi = occupancy(hi) - capacity
    return illinois(lambda t: occupancy(t) - capacity, lo, hi, f_lo, f_hi, f_tol=SOLVE_REL * capacity, x_rel=SOLVE_REL, iterations=100)


def hit_rate(w: SessionWorkload, fit: TierFit) -> float:
    """Share of the workload's prompt tokens a request finds in the tier."""
    found = sum(fit.hit_tokens(k) for k in range(1, w.turns + 1))
    return found / w.prompt_total()
