"""The tiered cache simulator on a plan: its session workload, or a recorded trace, through the
plan's GPU pool and its CPU / disk tiers (the CLI's ``simulate`` and the Simulate page call these).

* :func:`simulate_plan`: the plan's session workload (:func:`planner.cache.section.sim_setup`),
  the first fifth of the sessions warming the caches, as the model is of the steady state;
* :func:`replay_plan`: a Mooncake-style trace (:mod:`planner.simulate.mooncake`) through the
  same tiers; no session workload is needed, the trace is the traffic. A turn is timed with the
  plan's step model at the plan's load (prefill of what is not cached, first decode step, ITL).
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


def trace_setup(plan: Plan) -> tuple[list[Tier], TurnTiming, int]:
    """(tiers of one replica, turn timing at the plan's load, replicas) for a trace replay.

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
    timing = TurnTiming(plan.roof.prefill_s, est.first_decode_ms / 1e3, est.mean_inter_token_latency_ms / 1e3, inputs.tp)
    return [gpu_tier(pool, block), *lower], timing, max(1, plan.capacity.replicas)


def replay_plan(plan: Plan, requests: list[TraceRequest], *, time_budget_s: float = DEFAULT_TIME_BUDGET_S) -> CacheSimResult:
    """Replay trace ``requests`` (512-token hash blocks) through the plan's tiers and replicas.

    Raises:
        PlannerError: as :func:`trace_setup`.
    """
    tiers, timing, replicas = trace_setup(plan)
    return replay(requests, tiers, timing, block_tokens=BLOCK_TOKENS, replicas=replicas, time_budget_s=time_budget_s)


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
    if r.hit_rate_by_turn:
        out.append("             hit rate by turn: " + ", ".join(f"{h:.0%}" for h in r.hit_rate_by_turn[:12]) + (" ..." if len(r.hit_rate_by_turn) > 12 else ""))
    if r.stopped_early:
        out.append(f"             stopped early: {r.stopped_early}")
    return tuple(out)
