"""The event loop: requests arrive in time order, a router picks a replica, replicas step.

Each replica keeps its own clock. Before a request is handed to a replica, that replica is run
up to the request's arrival (every replica, for a router that looks at their load), so a step
never sees a request that has not arrived; an idle replica's clock jumps to the arrival. After
the last arrival every replica runs until its requests have ended.

Budgets (refused up front with a PlannerError, or stopped cleanly with ``stopped_early`` set in
the result): at most ``MAX_REQUESTS`` requests and ``MAX_TOTAL_TOKENS`` prompt + output tokens;
at most ``MAX_STEPS`` engine steps and ``SimConfig.time_budget_s`` seconds of wall time.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time

from planner.errors import PlannerError
from planner.simulate import block_pool
from planner.simulate.cost import PlanStepCost, StepCost
from planner.simulate.invariants import check_end
from planner.simulate.model import MAX_REQUESTS, MAX_STEPS, MAX_TOTAL_TOKENS, Rejection, ReplicaSummary, Request, RequestRecord, SimConfig, SimResult
from planner.simulate.replica import Replica
from planner.simulate.request import CANCEL_IN_DECODE, CANCEL_STAGE, DONE, OUTCOME, SimRequest
from planner.simulate.router import ROUTER_CLASSES
from planner.simulate.stats import RequestTally, _downsample, percentiles, summed, weighted_percentiles
from planner.simulate.verdict import overload_verdict, rejection_sentence, with_rejections

CHECK_EVERY_STEPS = 512  # wall-clock budget checked this often


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()
        self.steps = 0

    def check(self, replicas: list[Replica]) -> None:
        steps = sum(rep.stats.steps for rep in replicas)
        if steps >= MAX_STEPS:
            raise _Stop(f"step budget of {MAX_STEPS:,} engine steps reached")
        if time.perf_counter() - self.start > self.seconds:
            raise _Stop(f"time budget of {self.seconds:g} s reached")


def simulate(requests: list[Request], cfg: SimConfig, cost: StepCost | PlanStepCost, *, record_requests: bool = False, check_invariants: bool = False, clients: int | None = None, lag_s: float = 0.0) -> SimResult:
    """Run the serving simulation (see the package docstring).

    ``clients``: a closed loop instead of the requests' arrival times, as a benchmark at
    ``--max-concurrency`` runs it: that many clients send the first requests at once (at the first
    arrival time), and each sends the next (in arrival order) when its last one ends (one
    replica); every later arrival time is the end that released it plus ``lag_s``.

    ``lag_s``: in a closed loop, the time from a request's end to the next one reaching the
    scheduler (the client's turnaround and the API server's preprocessing); requests that end within
    it of each other reach the scheduler together.

    ``record_requests`` adds one :class:`RequestRecord` per request; ``check_invariants``
    verifies the block, request and counter bookkeeping after every step and at the end
    (``invariants.py``; slow, for tests) and raises :class:`SimulationInvariantError` on the
    first inconsistency.

    Raises:
        PlannerError: too many requests or tokens for the budget, duplicate ids, a static
            reservation or shared prefix larger than the pool, an unknown cancellation id.
    """
    if clients is not None and cfg.replicas != 1:
        raise PlannerError("replicas", cfg.replicas, "a closed loop is simulated on one replica")
    if clients is not None and clients < 1:
        raise PlannerError("clients", clients, "a closed loop needs at least one client")
    if isinstance(lag_s, bool) or not isinstance(lag_s, (int, float)) or not 0.0 <= lag_s <= MAX_LAG_S:
        raise PlannerError("lag_s", lag_s, f"the closed loop's lag must be a number of seconds from 0 to {MAX_LAG_S:g}")
    reqs = _prepare(requests, cfg)
    static_blocks = _static_blocks(reqs, cfg)
    replicas = [Replica(k, cfg, cost, static_blocks, block_pool.BlockAllocator) for k in range(cfg.replicas)]
    _mark_rejections(reqs, cfg, replicas[0], static_blocks)
    for rep in replicas:
        rep.t = reqs[0].arrival_s if reqs else 0.0
        rep.check_invariants = check_invariants
    router = ROUTER_CLASSES[cfg.router](replicas)
    budget = _Budget(cfg.time_budget_s)
    queue = [0, 0]
    stopped = None
    try:
        if clients is not None:
            _run_closed(reqs, replicas[0], clients, budget, replicas, lag_s)
        else:
            _run_open(reqs, replicas, router, budget, queue)
    except _Stop as stop:
        stopped = stop.reason
    if check_invariants:
        check_end(replicas, reqs, stopped is not None)
    return _result(reqs, cfg, replicas, router.name, queue, stopped, record_requests)


MAX_LAG_S = 3600.0  # a closed loop's lag above an hour is refused


def _run_open(reqs: list[SimRequest], replicas: list[Replica], router, budget: _Budget, queue: list[int]) -> None:
    """Every request at its arrival time on the replica the router picks, then every replica to its
    end; ``queue`` gets the waiting requests when the middle and the last request arrive."""
    n = len(reqs)
    mid = n // 2
    for r in reqs:
        a = r.arrival_s
        if router.needs_current_load or r.index in (mid, n - 1):
            for rep in replicas:
                _run_until(rep, a, budget, replicas)
            rep = router.choose(r)
        else:
            rep = router.choose(r)
            _run_until(rep, a, budget, replicas)
        rep.add(r)
        if r.index in (mid, n - 1):
            queue[r.index != mid] = sum(len(x.waiting) for x in replicas)
    for rep in replicas:
        _drain(rep, budget, replicas)


def _run_closed(reqs: list[SimRequest], rep: Replica, clients: int, budget: _Budget, replicas: list[Replica], lag_s: float = 0.0) -> None:
    """A closed loop of ``clients`` on ``rep``: the first requests arrive together at the start, each
    next one ``lag_s`` after a request ends (its arrival time is that end + the lag, whatever the
    request said); every request is run to its end."""
    t0 = reqs[0].arrival_s if reqs else 0.0
    rep.t = t0
    rep.ended = []
    queue = iter(reqs)
    for r in itertools.islice(queue, clients):
        r.arrival_s = t0
        rep.add(r)
    stats = rep.stats
    pending: list[tuple[float, int, SimRequest]] = []  # sent, not yet at the scheduler: (arrival, index, request)
    while stats.finished < len(reqs):
        while rep.ended:
            ended = rep.ended.pop()
            nxt = next(queue, None)
            if nxt is not None:
                nxt.arrival_s = max(t0, ended.finished_s if ended.finished_s >= 0 else rep.t) + lag_s
                heapq.heappush(pending, (nxt.arrival_s, nxt.index, nxt))
        while pending and pending[0][0] <= rep.t:
            rep.add(heapq.heappop(pending)[2])
        if stats.finished >= len(reqs):
            break
        if not rep.step():
            if not pending:
                raise RuntimeError(f"closed-loop simulation stalled at t={rep.t:.6f}s with {len(rep.waiting)} waiting and {len(rep.running)} running")
            rep.t = pending[0][0]  # idle until the next request reaches the scheduler
        if stats.steps % CHECK_EVERY_STEPS == 0:
            budget.check(replicas)
    rep.ended = None


def _run_until(rep: Replica, t: float, budget: _Budget, replicas: list[Replica]) -> None:
    while rep.t < t:
        if not rep.step():
            rep.t = t  # idle: the clock jumps to the arrival
            return
        if rep.stats.steps % CHECK_EVERY_STEPS == 0:
            budget.check(replicas)


def _drain(rep: Replica, budget: _Budget, replicas: list[Replica]) -> None:
    stats = rep.stats
    while stats.finished < stats.requests:
        if not rep.step():
            raise RuntimeError(f"simulation stalled at t={rep.t:.6f}s with {len(rep.waiting)} waiting and {len(rep.running)} running")
        if stats.steps % CHECK_EVERY_STEPS == 0:
            budget.check(replicas)


# ---------------------------------------------------------------------------------- set-up


def _prepare(requests: list[Request], cfg: SimConfig) -> list[SimRequest]:
    if len(requests) > MAX_REQUESTS:
        raise PlannerError("requests", len(requests), f"at most {MAX_REQUESTS:,} requests per simulation")
    total = sum(r.prompt_tokens + r.output_tokens for r in requests)
    if total > MAX_TOTAL_TOKENS:
        raise PlannerError("requests", f"{total:,} tokens", f"at most {MAX_TOTAL_TOKENS:,} prompt + output tokens per simulation")
    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    seen: set[int] = set()
    for r in ordered:
        if r.id in seen:
            raise PlannerError("requests", r.id, "duplicate request id")
        seen.add(r.id)
    reqs = [SimRequest(k, r.id, float(r.arrival_s), r.prompt_tokens, r.output_tokens) for k, r in enumerate(ordered)]
    n = len(reqs)
    # Prefix caching: requests drawn with probability prefix_share whose prompt extends past the prefix.
    if cfg.prefix_share > 0 and cfg.prefix_tokens // cfg.block_tokens:
        if cfg.prefix_tokens // cfg.block_tokens >= cfg.total_blocks:
            raise PlannerError("prefix_tokens", cfg.prefix_tokens, f"the prefix alone needs {cfg.prefix_tokens // cfg.block_tokens:,} blocks of a {cfg.total_blocks:,}-block pool")
        prng = random.Random(f"prefix-{cfg.seed}")
        for r in reqs:
            r.uses_prefix = prng.random() < cfg.prefix_share and r.prompt_tokens > cfg.prefix_tokens
    # Cancellations: drawn at cancel_rate, then the explicit ones.
    if cfg.cancel_rate > 0:
        crng = random.Random(f"cancel-{cfg.seed}")
        for r in reqs:
            u = crng.random()
            stage = crng.randrange(4)
            if u < cfg.cancel_rate:
                r.cancel_stage = stage + 1
    if cfg.cancellations:
        by_id = {r.id: r for r in reqs}
        for c in cfg.cancellations:
            r = by_id.get(c.request_id)
            if r is None:
                raise PlannerError("cancellations", c.request_id, "no request has this id")
            r.cancel_stage = CANCEL_STAGE[c.stage]
            if c.after_tokens is not None:
                r.cancel_after = c.after_tokens
    for r in reqs:
        if r.cancel_stage == CANCEL_IN_DECODE and r.cancel_after == 0:
            r.cancel_after = max(2, r.output_tokens // 2)
    assert len(reqs) == n
    return reqs


def _static_tokens(reqs: list[SimRequest], cfg: SimConfig) -> int:
    return cfg.static_tokens if cfg.static_tokens is not None else max((r.prompt_tokens + r.output_tokens for r in reqs), default=1)


def _static_blocks(reqs: list[SimRequest], cfg: SimConfig) -> int:
    """Blocks every admitted request leases up front under static reservation."""
    static_tokens = _static_tokens(reqs, cfg)
    blocks = -(-static_tokens // cfg.block_tokens)
    if cfg.reservation == "static" and blocks > cfg.total_blocks:
        raise PlannerError("static_tokens", static_tokens, f"a static reservation needs {blocks:,} blocks but the pool has {cfg.total_blocks:,}")
    return blocks


def _mark_rejections(reqs: list[SimRequest], cfg: SimConfig, replica: Replica, static_blocks: int) -> None:
    """Requests that can never run are rejected on arrival, each with its reason."""
    dynamic = cfg.reservation == "dynamic"
    static_tokens = _static_tokens(reqs, cfg)
    for r in reqs:
        if not replica.policy.can_ever_run(r.prompt_tokens):
            r.reject_reason = "step_budget"  # a whole prompt must fit one step's token budget
        elif dynamic and -(-(r.prompt_tokens + r.output_tokens - 1) // cfg.block_tokens) > cfg.total_blocks:
            r.reject_reason = "pool"  # its final K/V exceeds the whole pool
        elif not dynamic and r.prompt_tokens + r.output_tokens > static_tokens:
            r.reject_reason = "static_reservation"  # longer than the static reservation
        r.rejected = bool(r.reject_reason)


def _rejections(reqs: list[SimRequest], cfg: SimConfig) -> list[Rejection]:
    """The rejected requests grouped by reason, largest group first, each with its sentence."""
    counts: dict[str, list[int]] = {}
    for r in reqs:
        if r.reject_reason:
            counts.setdefault(r.reject_reason, []).append(r.prompt_tokens + (0 if r.reject_reason == "step_budget" else r.output_tokens))
    out = []
    for reason, sizes in counts.items():
        limit = {"step_budget": cfg.max_num_batched_tokens, "pool": cfg.total_blocks * cfg.block_tokens, "static_reservation": _static_tokens(reqs, cfg)}[reason]
        out.append(Rejection(reason=reason, count=len(sizes), limit_tokens=limit, largest_tokens=max(sizes), message=rejection_sentence(reason, len(sizes), limit, max(sizes), cfg.policy)))
    return sorted(out, key=lambda x: -x.count)


# ---------------------------------------------------------------------------------- results


def _result(reqs: list[SimRequest], cfg: SimConfig, replicas: list[Replica], router: str, queue: list[int], stopped: str | None, record_requests: bool) -> SimResult:
    n = len(reqs)
    start = reqs[0].arrival_s if n else 0.0
    makespan = max(rep.t for rep in replicas) - start if n else 0.0
    ttft_slo = cfg.ttft_slo_ms / 1e3 if cfg.ttft_slo_ms is not None else math.inf
    itl_slo = cfg.itl_slo_ms / 1e3 if cfg.itl_slo_ms is not None else math.inf
    tally = RequestTally(reqs, ttft_slo, itl_slo)
    good, unfinished = tally.good, tally.unfinished
    stats = [rep.final_stats() for rep in replicas]
    total = summed(stats)
    busiest = max(stats, key=lambda s: s.peak_blocks)
    peak = busiest.peak_blocks
    total_blocks = cfg.total_blocks
    rejections = _rejections(reqs, cfg)
    verdict = overload_verdict([r.arrival_s for r in reqs], tally.finish_times, queue[0], queue[1], total.prefill_tokens, total.preempted_tokens)
    verdict = with_rejections(verdict, rejections, n)
    output_tokens = total.output_tokens
    records = [_record(r) for r in reqs] if record_requests else None
    if stopped:
        stopped = f"{stopped} at simulated t = {makespan:,.3f} s with {unfinished:,} of {n:,} requests unfinished; results cover the requests that ended"
    return SimResult(
        policy=cfg.policy,
        batching=cfg.batching,
        reservation=cfg.reservation,
        requests_total=n,
        requests_completed=tally.completed,
        requests_cancelled=tally.cancelled,
        requests_rejected=tally.rejected,
        ttft_ms=percentiles(tally.ttft, 1e3),
        itl_ms=weighted_percentiles(total.itl_values, total.itl_weights, 1e3),
        e2e_ms=percentiles(tally.e2e, 1e3),
        tpot_ms=percentiles(tally.tpot, 1e3),
        output_tokens=output_tokens,
        prefill_tokens=total.prefill_tokens,
        prefill_tokens_wasted=total.wasted_tokens,
        throughput_tokens_per_s=output_tokens / makespan if makespan > 0 else 0.0,
        goodput_requests_per_s=good / makespan if makespan > 0 else 0.0,
        goodput_fraction=good / n if n else 0.0,
        max_queue_age_ms=tally.queue_age * 1e3,
        preemptions=total.preemptions,
        prefix_hits=total.prefix_hits,
        blocks_in_use_at_end=total.blocks_in_use,
        peak_blocks_in_use=peak,
        peak_kv_utilisation=peak / total_blocks,
        kv_utilisation=_downsample(busiest.sample_t, busiest.sample_used, total_blocks),
        leases_opened=total.leases_opened,
        leases_released=total.leases_released,
        blocks_allocated=total.blocks_allocated,
        blocks_freed=total.blocks_freed,
        step_count=total.steps,
        makespan_s=makespan,
        overload=verdict,
        replicas=cfg.replicas,
        router=router,
        per_replica=[
            ReplicaSummary(
                replica=rep.number,
                requests=s.requests,
                completed=sum(1 for r in reqs if r.replica == rep.number and r.status == DONE),
                preemptions=s.preemptions,
                peak_kv_utilisation=s.peak_blocks / total_blocks,
                step_count=s.steps,
            )
            for rep, s in zip(replicas, stats, strict=True)
        ],
        requests_unfinished=unfinished,
        stopped_early=stopped,
        per_request=records,
        rejections=rejections,
    )


def _record(r: SimRequest) -> RequestRecord:
    done = r.status == DONE
    return RequestRecord(
        id=r.id,
        arrival_s=r.arrival_s,
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        outcome=OUTCOME.get(r.status, "unfinished"),
        tokens_generated=r.generated,
        queue_ms=(r.admitted_s - r.arrival_s) * 1e3 if r.admitted_s >= 0 else None,
        ttft_ms=(r.first_token_s - r.arrival_s) * 1e3 if r.first_token_s >= 0 else None,
        e2e_ms=(r.finished_s - r.arrival_s) * 1e3 if done else None,
        tpot_ms=(r.finished_s - r.first_token_s) / (r.output_tokens - 1) * 1e3 if done and r.output_tokens > 1 else None,
        preemptions=r.preemptions,
        replica=r.replica,
    )
