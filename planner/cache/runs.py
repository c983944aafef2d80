"""The tiered cache simulator on a plan: its session workload, or a recorded trace, through the
plan's GPU pool and its CPU / disk tiers (the CLI's ``simulate`` and the Simulate page call these).

* :func:`simulate_plan`: the plan's session workload (:func:`planner.cache.section.sim_setup`),
  the first fifth of the sessions warming the caches, as the model is of the steady state;
* :func:`replay_plan`: a Mooncake-style trace (:mod:`planner.simulate.mooncake`) through the
  same tiers; no session workload is needed, the trace is the traffic. A turn is timed with the
  plan's step model (prefill of what is not cached, first decode step, ITL) at the trace's own
  load when its timestamps span time: its arrival rate as the plan's open loop (Poisson at that
  rate over the plan's replicas, the plan's context lengths); else at the plan's load. The
  result's ``timed_at`` says which.
* :func:`sim_lines`: the result in words, per tier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.cache.explain import TIER_NAMES
from planner.cache.section import lower_tiers, not_applicable, pool_layout, sim_setup
from planner.cache.tiers import Tier, gpu_tier
from planner.cache.timing import TurnTiming
from planner.errors import PlannerError
from planner.simulate.model import DEFAULT_TIME_BUDGET_S, MAX_REQUESTS
from planner.simulate.mooncake import BLOCK_TOKENS, TraceRequest
from planner.simulate.sessions import CacheSimResult, replay, simulate_sessions

if TYPE_CHECKING:
    from planner.plan.result import Plan

DEFAULT_SESSIONS = 2000
WARMUP_SHARE = 0.2  # of the sessions, not counted (they fill the caches)


def simulate_plan(plan: Plan, sessions: int = DEFAULT_SESSIONS, *, seed: int = 0, time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> CacheSimResult:
    """``sessions`` sessions of the plan's workload through its tiers (the first fifth warm up).

    Raises:
        PlannerError: no session workload, one the cache model does not apply to, or more than
            100,000 requests (sessions x turns).
    """
    w, tiers, timing, replicas = sim_setup(plan)
    if isinstance(sessions, bool) or not isinstance(sessions, int) or not 1 <= sessions * w.turns <= MAX_REQUESTS:
        raise PlannerError("sessions", sessions, f"sessions x {w.turns} turns must be from 1 to {MAX_REQUESTS:,} requests")
    return simulate_sessions(w, tiers, timing, sessions=sessions, replicas=replicas, seed=seed, warmup=int(sessions * WARMUP_SHARE), time_budget_s=time_budget_s)


def trace_rate(requests: list[TraceRequest]) -> tuple[float, float] | None:
    """(requests a second, seconds spanned) of a trace's arrivals: n - 1 gaps over the time from
    the first arrival to the last; None when fewer than two requests or every timestamp is one."""
    if len(requests) < 2:
        return None
    arrivals = [r.arrival_s for r in requests]
    span = max(arrivals) - min(arrivals)
    return ((len(requests) - 1) / span, span) if span > 0 else None


def trace_setup(plan: Plan, requests: list[TraceRequest] | None = None) -> tuple[list[Tier], TurnTiming, int, str]:
    """(tiers of one replica, turn timing, replicas, the load it is timed at in words) for a
    trace replay: at the trace's own arrival rate when ``requests`` span time (the plan's open
    loop at that rate: :func:`planner.plan.serving.open_at_rate`), else at the plan's load. A
    plan with observed latencies keeps them.

    Raises:
        PlannerError: a plan the cache model does not apply to, or a tier too small for a chunk.
    """
    reason = not_applicable(plan)
    if reason:
        raise PlannerError("runtime", plan.inputs.runtime, reason)
    inputs = plan.inputs
    block, _, pool = pool_layout(plan)
    _, lower = lower_tiers(plan, inputs.cpu_tier_gib or 0.0, inputs.disk_tier_gib or 0.0)
    est = plan.estimate
    replicas = max(1, plan.capacity.replicas)
    own = trace_rate(requests) if requests else None
    timed_at = f"the plan's load ({plan.roofline.load_label})"
    if own is not None and est.source == ESTIMATED:
        from planner.plan import serving

        rate, span = own
        setup = plan._load.setup
        fig = serving.open_at_rate(setup._replace(rate=serving.per_rank_rate(rate, replicas * inputs.dp)))
        est = serving.report(fig, setup.prompt, setup.cached, setup.generated, 0.0)
        timed_at = f"the trace's own arrival rate, {rate:,.4g} requests/s over {span:,.4g} s ({fig.per_rank:,} in flight a {'replica' if inputs.dp == 1 else f'rank, {inputs.dp} ranks a replica'}, the plan's context lengths)"
        if fig.saturated:  # the open loop stops at the engine's admission limit: more arrive than that serves
            timed_at += f"; not sustainable on the plan's {replicas:,} replica(s): timed at the engine's limit, further requests queue"
    elif own is not None:
        timed_at = f"the plan's observed latencies ({est.source}), not the trace's {own[0]:,.4g} requests/s"
    elif requests:
        timed_at += ": the trace's timestamps span no time"
    timing = TurnTiming(plan.roof.prefill_s, est.first_decode_ms / 1e3, est.mean_inter_token_latency_ms / 1e3, inputs.tp)
    return [gpu_tier(pool, block), *lower], timing, replicas, timed_at


ESTIMATED = "roofline estimate"  # planner.plan.serving.report's source: the plan's own step model


def replay_plan(plan: Plan, requests: list[TraceRequest], *, time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> CacheSimResult:
    """Replay trace ``requests`` (512-token hash blocks) through the plan's tiers and replicas,
    timed at the trace's own arrival rate where its timestamps give one (:func:`trace_setup`).

    Raises:
        PlannerError: as :func:`trace_setup`.
    """
    tiers, timing, replicas, timed_at = trace_setup(plan, requests)
    result = replay(requests, tiers, timing, block_tokens=BLOCK_TOKENS, replicas=replicas, time_budget_s=time_budget_s)
    return result.model_copy(update={"timed_at": timed_at})


def sim_lines(r: CacheSimResult) -> tuple[str, ...]:
    """The run in words: hit rate per tier, TTFT by phase, GPU time saved, an early stop."""
    what = f"{r.requests:,} requests ({r.sessions:,} sessions)" if r.hit_rate_by_turn else f"{r.requests:,} trace requests ({r.sessions:,} tenant{'s' if r.sessions != 1 else ''})"
    tiers = "; ".join(
        f"{TIER_NAMES.get(t.name, t.name)} {t.capacity_tokens:,} tokens serves {t.hit_rate:.1%}" + (f" (a load {t.load_ms_per_hit:,.2f} ms, {t.requests_loading:,} requests)" if t.requests_loading else "")
        for t in r.tiers
    )
    out = [
        f"cache sim    {what} on {r.replicas:,} replica{'s' if r.replicas != 1 else ''}: hit rate {r.hit_rate:.1%}; {tiers}",
        f"             TTFT mean / p95 {r.ttft_ms.mean:,.1f} / {r.ttft_ms.p95:,.1f} ms = queue {r.queue_ms.mean:,.1f} + load {r.load_ms.mean:,.1f} + prefill {r.prefill_ms.mean:,.1f} ms mean (+ first decode); "
        f"prefill {r.prefill_gpu_seconds:,.1f} GPU-s, {r.gpu_seconds_saved:,.1f} GPU-s saved by the cache",
    ]
    if r.timed_at:
        out.append(f"             timed at {r.timed_at}")
    if r.hit_rate_by_turn:
        out.append("             hit rate by turn: " + ", ".join(f"{h:.0%}" for h in r.hit_rate_by_turn[:12]) + (" ..." if len(r.hit_rate_by_turn) > 12 else ""))
    if r.stopped_early:
        out.append(f"             stopped early: {r.stopped_early}")
    return tuple(out)
