"""The simulator's counters (one :class:`ReplicaStats` per replica, summed for the result), the
requests' outcomes (:class:`RequestTally`), percentiles of latency samples and the down-sampled
KV utilisation series."""

from __future__ import annotations

import math
from array import array

from planner.simulate.model import KV_SAMPLES, Percentiles
from planner.simulate.request import DONE, REJECTED, SimRequest

_EMPTY = Percentiles(p50=0.0, p95=0.0, p99=0.0, mean=0.0, min=0.0, max=0.0, count=0)


class ReplicaStats:
    """One replica's counters and samples. The replica updates the plain attributes in place as
    it steps (no method calls on the hot path); :func:`summed` adds replicas up for the result."""

    __slots__ = (
        "requests", "finished", "steps", "preemptions", "prefix_hits", "prefill_tokens", "wasted_tokens", "preempted_tokens",
        "output_tokens", "itl_values", "itl_weights", "sample_t", "sample_used",
        "leases_opened", "leases_released", "blocks_allocated", "blocks_freed", "blocks_in_use",
    )  # fmt: skip

    def __init__(self) -> None:
        self.requests = 0  # routed to this replica
        self.finished = 0  # of those, ended (done, cancelled or rejected)
        self.steps = 0
        self.preemptions = 0
        self.prefix_hits = 0
        self.prefill_tokens = 0  # computed, including recomputation after preemption
        self.wasted_tokens = 0  # prefill work thrown away: cancelled or preempted
        self.preempted_tokens = 0  # ... of which by preemption
        self.output_tokens = 0
        self.itl_values = array("d")  # ITL samples: value k occurs itl_weights[k] times
        self.itl_weights = array("q")
        self.sample_t = array("d")  # after every step: time and blocks in use
        self.sample_used = array("q")
        # the pool's own counts, copied in at the end of the run (KVManager.count_blocks)
        self.leases_opened = self.leases_released = self.blocks_allocated = self.blocks_freed = self.blocks_in_use = 0

    @property
    def peak_blocks(self) -> int:
        return max(self.sample_used, default=0)


_SUMMED = (
    "requests", "finished", "steps", "preemptions", "prefix_hits", "prefill_tokens", "wasted_tokens", "preempted_tokens", "output_tokens",
    "leases_opened", "leases_released", "blocks_allocated", "blocks_freed", "blocks_in_use",
)  # fmt: skip


def summed(stats: list[ReplicaStats]) -> ReplicaStats:
    """The counters of all ``stats`` added up and their ITL samples joined, replica by replica
    (the KV samples stay per replica: the result shows the busiest one)."""
    total = ReplicaStats()
    for s in stats:
        for name in _SUMMED:
            setattr(total, name, getattr(total, name) + getattr(s, name))
        total.itl_values.extend(s.itl_values)
        total.itl_weights.extend(s.itl_weights)
    return total


class RequestTally:
    """What the requests' own times add up to: latency samples (seconds), outcomes, how many met
    both SLOs (``good``) and the longest wait from arrival to first admission."""

    def __init__(self, reqs: list[SimRequest], ttft_slo_s: float, itl_slo_s: float) -> None:
        self.ttft: list[float] = []
        self.e2e: list[float] = []
        self.tpot: list[float] = []  # mean gap between output tokens, requests with more than one
        self.finish_times: list[float] = []  # done or cancelled
        self.good = self.completed = self.cancelled = self.rejected = self.unfinished = 0
        self.queue_age = 0.0
        for r in reqs:
            self._add(r, ttft_slo_s, itl_slo_s)

    def _add(self, r: SimRequest, ttft_slo: float, itl_slo: float) -> None:
        st = r.status
        if st == REJECTED:
            self.rejected += 1
            return
        if r.admitted_s >= 0 and r.admitted_s - r.arrival_s > self.queue_age:
            self.queue_age = r.admitted_s - r.arrival_s
        if r.first_token_s >= 0:
            self.ttft.append(r.first_token_s - r.arrival_s)
        if st == DONE:
            self.completed += 1
            self.finish_times.append(r.finished_s)
            self.e2e.append(r.finished_s - r.arrival_s)
            tp = (r.finished_s - r.first_token_s) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
            if r.output_tokens > 1:
                self.tpot.append(tp)
            if r.first_token_s - r.arrival_s <= ttft_slo and tp <= itl_slo:
                self.good += 1
        elif r.finished:
            self.cancelled += 1
            self.finish_times.append(r.finished_s)
        else:
            self.unfinished += 1


def _rank(n: int, q: float) -> int:
    return min(n - 1, max(0, math.ceil(q * n) - 1))


def percentiles(values: list[float], scale: float = 1.0) -> Percentiles:
    """Nearest-rank p50/p95/p99, mean, min and max of ``values`` times ``scale``."""
    n = len(values)
    if not n:
        return _EMPTY
    v = sorted(values)
    return Percentiles(
        p50=v[_rank(n, 0.50)] * scale,
        p95=v[_rank(n, 0.95)] * scale,
        p99=v[_rank(n, 0.99)] * scale,
        mean=math.fsum(v) / n * scale,
        min=v[0] * scale,
        max=v[-1] * scale,
        count=n,
    )


def weighted_percentiles(values: list[float], weights: list[int], scale: float = 1.0) -> Percentiles:
    """Nearest-rank percentiles of ``values`` where value ``k`` occurs ``weights[k]`` times."""
    total = sum(weights)
    if not total:
        return _EMPTY
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [(_rank(total, q), q) for q in (0.50, 0.95, 0.99)]
    found: dict[float, float] = {}
    cum = 0
    r = 0
    for k in order:
        cum += weights[k]
        while r < len(ranks) and ranks[r][0] < cum:
            found[ranks[r][1]] = values[k]
            r += 1
        if r == len(ranks):
            break
    mean = math.fsum(v * w for v, w in zip(values, weights, strict=True)) / total
    return Percentiles(
        p50=found[0.50] * scale,
        p95=found[0.95] * scale,
        p99=found[0.99] * scale,
        mean=mean * scale,
        min=values[order[0]] * scale,
        max=values[order[-1]] * scale,
        count=total,
    )


def _downsample(ts: list[float], us: list[int], total: int, points: int = KV_SAMPLES) -> list[tuple[float, float]]:
    n = len(ts)
    if n <= points:
        return [(ts[k], us[k] / total) for k in range(n)]
    out = []
    for j in range(points):
        lo = j * n // points
        hi = (j + 1) * n // points
        out.append((ts[hi - 1], max(us[lo:hi]) / total))  # bucket maximum keeps peaks visible
    return out
