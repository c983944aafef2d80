"""Sessions through a tiered prefix cache: arrivals, think time, hits per tier, TTFT by phase.

A request-level discrete-event simulation (the step-level engine simulator is ``engine.py``):
sessions start as a Poisson stream; each turn arrives, finds the longest cached prefix of its
context in every tier of its replica (:class:`~planner.simulate.tiers.TierStack`), loads what
only a lower tier holds when that is faster than recomputing it
(:func:`planner.cache.timing.choose_loads`), waits for the replica's prefill (one prompt at a
time, first come), prefills the rest, decodes its answer, and the user thinks before the next
turn. Sessions stick to one replica. Every use touches the request's whole chain in every tier
at arrival and again when it ends (promotion included), so what each tier holds is exact LRU
over whole units.

TTFT = queue + load + prefill + first decode step. :func:`replay` runs the same loop over a
recorded trace (:mod:`planner.simulate.mooncake`). Budget: at most ``MAX_REQUESTS`` requests
(refused beyond) and ``time_budget_s`` seconds of wall time (the run stops and says so).
"""

from __future__ import annotations

import heapq
import random
import time
from bisect import bisect_right
from itertools import accumulate

from pydantic import BaseModel, ConfigDict

from planner.cache.tiers import Tier
from planner.cache.timing import TurnTiming, choose_loads
from planner.cache.workload import SessionWorkload
from planner.errors import PlannerError
from planner.simulate.model import DEFAULT_TIME_BUDGET_S, MAX_REQUESTS, Percentiles
from planner.simulate.stats import percentiles
from planner.simulate.tiers import Chain, TierStack

CHECK_EVERY = 1024  # requests between wall-clock checks


class TierResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    unit_tokens: int
    capacity_tokens: int  # per replica
    hit_rate: float  # share of all prompt tokens served from this tier
    tokens_served: int
    requests_loading: int  # requests that loaded from this tier (0 for the GPU pool)
    load_ms_per_hit: float  # mean load time of those requests
    evicted_tokens: int


class CacheSimResult(BaseModel):
    """What a tiered-cache run found (per-tier hits, TTFT by phase, GPU time saved)."""

    model_config = ConfigDict(frozen=True)

    requests: int
    sessions: int
    replicas: int
    prompt_tokens: int
    hit_rate: float  # share of prompt tokens served from any tier
    tiers: list[TierResult]
    hit_rate_by_turn: list[float]  # sessions only; [] for a trace
    ttft_ms: Percentiles
    queue_ms: Percentiles
    load_ms: Percentiles
    prefill_ms: Percentiles
    prefill_gpu_seconds: float
    gpu_seconds_saved: float  # prefill GPU time the cache saved (x GPUs per replica)
    makespan_s: float
    stopped_early: str | None = None
    timed_at: str | None = None  # a trace replay: the load its turns are timed at (planner.cache.runs.trace_setup)


class _Replica:
    """One replica's tiers and its prefill queue (the time its prefill is next free)."""

    __slots__ = ("tiers", "free_at")

    def __init__(self, tiers: list[Tier]) -> None:
        self.tiers = TierStack([(t.name, t.unit_tokens, t.capacity_units) for t in tiers])
        self.free_at = 0.0


class _Tally:
    """Counters and samples of the run."""

    def __init__(self, tiers: list[Tier], turns: int) -> None:
        self.tiers = tiers
        self.served = [0] * len(tiers)
        self.loading = [0] * len(tiers)
        self.load_s = [0.0] * len(tiers)
        self.prompt = 0
        self.requests = 0
        self.by_turn_hit = [0] * turns
        self.by_turn_prompt = [0] * turns
        self.ttft: list[float] = []
        self.queue: list[float] = []
        self.load: list[float] = []
        self.prefill: list[float] = []
        self.gpu_s = 0.0
        self.saved_s = 0.0
        self.last = 0.0


def _serve(rep: _Replica, tiers: list[Tier], timing: TurnTiming, tally: _Tally | None, now: float, prompt: int, output: int, chains: list[Chain], turn: int) -> float:
    """One request at ``now``: look up, load or recompute, queue, prefill; returns when it ends
    (counted in ``tally`` unless it is None: a warm-up request)."""
    stack = rep.tiers
    found = stack.found(chains)
    cap = prompt - 1  # the last prompt token is always computed
    found = [min(f, cap - cap % t.unit_tokens) for f, t in zip(found, tiers, strict=True)]
    gpu_hit = found[0]
    lower, best = [], gpu_hit
    for f, t in zip(found[1:], tiers[1:], strict=True):
        lower.append((max(0, f - best), t.load_s_per_token))
        best = max(best, f)
    loaded, load_s, cached = choose_loads(timing, prompt, gpu_hit, lower)
    stack.touch(chains)
    prefill_s = timing.prefill(prompt - cached, cached)
    start = max(now + load_s, rep.free_at)
    rep.free_at = start + prefill_s
    first = start + prefill_s + timing.first_decode_s
    end = first + max(0, output - 1) * timing.itl_s
    if tally is None:
        return end
    tally.requests += 1
    tally.prompt += prompt
    tally.served[0] += gpu_hit
    for i, tokens in enumerate(loaded, start=1):
        if tokens:
            tally.served[i] += tokens
            tally.loading[i] += 1
            tally.load_s[i] += tokens * tiers[i].load_s_per_token
    tally.ttft.append(first - now)
    tally.queue.append(start - now - load_s)
    tally.load.append(load_s)
    tally.prefill.append(prefill_s)
    full = timing.prefill(prompt, 0)
    tally.gpu_s += prefill_s * timing.gpus_per_replica
    tally.saved_s += (full - prefill_s) * timing.gpus_per_replica
    if turn:
        tally.by_turn_hit[turn - 1] += cached
        tally.by_turn_prompt[turn - 1] += prompt
    tally.last = max(tally.last, end)
    return end


def _result(tally: _Tally, sessions: int, replicas: int, start: float, stopped: str | None, stacks: list[TierStack]) -> CacheSimResult:
    prompt = max(1, tally.prompt)
    tiers = []
    for i, t in enumerate(tally.tiers):
        n = tally.loading[i]
        evicted = sum(stack.pools[i].evicted for stack in stacks) * t.unit_tokens
        tiers.append(TierResult(name=t.name, unit_tokens=t.unit_tokens, capacity_tokens=t.capacity_units * t.unit_tokens, hit_rate=tally.served[i] / prompt, tokens_served=tally.served[i],
                                requests_loading=n, load_ms_per_hit=tally.load_s[i] / n * 1e3 if n else 0.0, evicted_tokens=evicted))  # fmt: skip
    return CacheSimResult(
        requests=tally.requests,
        sessions=sessions,
        replicas=replicas,
        prompt_tokens=tally.prompt,
        hit_rate=sum(tally.served) / prompt,
        tiers=tiers,
        hit_rate_by_turn=[h / p if p else 0.0 for h, p in zip(tally.by_turn_hit, tally.by_turn_prompt, strict=True)],
        ttft_ms=percentiles(tally.ttft, 1e3),
        queue_ms=percentiles(tally.queue, 1e3),
        load_ms=percentiles(tally.load, 1e3),
        prefill_ms=percentiles(tally.prefill, 1e3),
        prefill_gpu_seconds=tally.gpu_s,
        gpu_seconds_saved=tally.saved_s,
        makespan_s=max(0.0, tally.last - start),
        stopped_early=stopped,
    )


def _check_tiers(tiers: list[Tier]) -> None:
    if not tiers or tiers[0].name != "gpu":
        raise PlannerError("tiers", [t.name for t in tiers], "the first tier must be the GPU pool")


def doc_sampler(w: SessionWorkload):
    """Draw a document rank from the catalog's Zipf groups (the model's): a group by its share,
    then a rank uniformly inside it."""
    groups = w.doc_weights()
    if not groups:
        return None
    cum = list(accumulate(count * q for count, q in groups))
    starts = list(accumulate((int(count) for count, _ in groups), initial=1))

    def draw(rng: random.Random) -> int:
        g = min(bisect_right(cum, rng.random() * cum[-1]), len(groups) - 1)
        return rng.randrange(starts[g], starts[g] + int(groups[g][0]))

    return draw


def simulate_sessions(
    w: SessionWorkload, tiers: list[Tier], timing: TurnTiming, *, sessions: int, replicas: int = 1, seed: int = 0, warmup: int = 0, time_budget_s: float = DEFAULT_TIME_BUDGET_S
) -> CacheSimResult:
    """Run ``sessions`` sessions of workload ``w`` over ``replicas`` replicas, each with
    ``tiers`` (GPU pool first; capacities per replica). The first ``warmup`` sessions fill the
    caches and are not counted (the model is of the steady state).

    Raises:
        PlannerError: more than ``MAX_REQUESTS`` requests, or no GPU tier first.
    """
    _check_tiers(tiers)
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1 or sessions * w.turns > MAX_REQUESTS:
        raise PlannerError("sessions", sessions, f"sessions x turns must be from 1 to {MAX_REQUESTS:,} requests")
    rng = random.Random(seed)
    draw_doc = doc_sampler(w)
    units = sorted({t.unit_tokens for t in tiers})
    segs = {u: w.segments(u) for u in units}  # tiers of one unit size share a chain
    reps = [_Replica(tiers) for _ in range(replicas)]
    tally = _Tally(tiers, w.turns)
    think = w.think_time_s
    fixed = w.think == "fixed" or think <= 0
    # events: (time, order, session, turn); a session: [replica, tenant, doc key, chains per tier]
    events: list[tuple[float, int, int, int]] = []
    t = 0.0
    state = []
    for s in range(sessions):
        t += 1.0 / w.sessions_per_s if w.arrivals == "fixed" else rng.expovariate(w.sessions_per_s)
        tenant = rng.randrange(w.tenants)
        doc = ("doc", tenant, draw_doc(rng)) if draw_doc else ("own-doc", s)
        by_unit = {u: [seg for seg in ((("prefix", tenant), sg.prefix), (doc, sg.doc)) if seg[1]] for u, sg in segs.items()}
        state.append((reps[s % replicas], by_unit, [by_unit[t.unit_tokens] for t in tiers]))
        events.append((t, s, s, 1))
    heapq.heapify(events)
    order = sessions
    start = events[0][0] if events else 0.0
    deadline = time.perf_counter() + time_budget_s
    stopped = None
    while events:
        now, _, s, turn = heapq.heappop(events)
        rep, by_unit, chains = state[s]
        if turn > 0:  # an arrival: add this turn's segment, serve, come back at its end
            for u, chain in by_unit.items():
                size = segs[u].turn[turn - 1]
                if size:
                    chain.append((("turn", s, turn), size))
            prompt = w.prompt_tokens(turn)
            end = _serve(rep, tiers, timing, tally if s >= warmup else None, now, prompt, w.output_tokens, chains, turn)
            order += 1
            heapq.heappush(events, (end, order, s, -turn))
            if order % CHECK_EVERY == 0 and time.perf_counter() > deadline:
                stopped = f"time budget of {time_budget_s:g} s reached after {tally.requests:,} requests"
                break
        else:  # the answer is out: its blocks are used once more; the user thinks
            rep.tiers.touch(chains)
            turn = -turn
            if turn < w.turns:
                gap = think if fixed else rng.expovariate(1.0 / think)
                order += 1
                heapq.heappush(events, (now + gap, order, s, turn + 1))
    return _result(tally, sessions - min(warmup, sessions), replicas, start, stopped, [r.tiers for r in reps])


def replay(requests: list, tiers: list[Tier], timing: TurnTiming, *, block_tokens: int, replicas: int = 1, time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> CacheSimResult:
    """Replay trace requests (:class:`~planner.simulate.mooncake.TraceRequest`: arrival, lengths,
    ``hash_ids`` of ``block_tokens``-token blocks, tenant) through the tiers. A request's chain
    is its hash blocks, keyed by its tenant; tiers count in the trace's blocks. A prefix-aware
    router sends each request to the replica that holds the longest prefix of it (the least
    busy one on a tie).

    Raises:
        PlannerError: no GPU tier first.
    """
    _check_tiers(tiers)
    units = [Tier(t.name, block_tokens, t.capacity_tokens // block_tokens * block_tokens, t.load_s_per_token, t.bytes, t.link_gb_s, t.link_source, t.usd_per_hour, t.price_source) for t in tiers]
    reps = [_Replica(units) for _ in range(replicas)]
    tally = _Tally(units, 0)
    ordered = sorted(requests, key=lambda r: r.arrival_s)
    start = ordered[0].arrival_s if ordered else 0.0
    deadline = time.perf_counter() + time_budget_s
    stopped = None
    for i, r in enumerate(ordered):
        chains = [[((r.tenant, h), 1) for h in r.hash_ids]] * len(units)
        rep = reps[0] if replicas == 1 else max(reps, key=lambda x: (max(x.tiers.found(chains)), -x.free_at))
        _serve(rep, units, timing, tally, r.arrival_s, r.input_length, r.output_length, chains, 0)
        if time.perf_counter() > deadline:  # every request: a routed request looks at every replica's tiers
            if i + 1 < len(ordered):
                stopped = f"time budget of {time_budget_s:g} s reached after {i + 1:,} of {len(ordered):,} requests"
            break
    return _result(tally, len({r.tenant for r in ordered}), replicas, start, stopped, [r.tiers for r in reps])
