"""The same trace under different settings: policies, reservation, batching."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.simulate.cost import PlanStepCost, StepCost
from planner.simulate.engine import simulate
from planner.simulate.model import POLICIES, Request, SimConfig, SimResult


def compare_policies(requests: list[Request], cfg: SimConfig, cost: StepCost | PlanStepCost, policies: tuple[str, ...] = POLICIES) -> dict[str, SimResult]:
    """The same trace under each scheduling policy (everything else from ``cfg``)."""
    out = {}
    for p in policies:
        if p not in POLICIES:
            raise PlannerError("policy", p, f"must be one of {', '.join(POLICIES)}")
        out[p] = simulate(requests, cfg.model_copy(update={"policy": p}), cost)
    return out


def compare_reservation(requests: list[Request], cfg: SimConfig, cost: StepCost | PlanStepCost, static_tokens: int | None = None) -> dict[str, SimResult]:
    """Dynamic (grow block by block) versus static (lease ``static_tokens`` up front; default:
    the longest prompt + output in the trace) on the same trace."""
    st = static_tokens if static_tokens is not None else cfg.static_tokens
    return {
        "dynamic": simulate(requests, cfg.model_copy(update={"reservation": "dynamic"}), cost),
        "static": simulate(requests, cfg.model_copy(update={"reservation": "static", "static_tokens": st}), cost),
    }


def compare_batching(requests: list[Request], cfg: SimConfig, cost: StepCost | PlanStepCost) -> dict[str, SimResult]:
    """Continuous versus static batching on the same trace."""
    return {b: simulate(requests, cfg.model_copy(update={"batching": b}), cost) for b in ("continuous", "static")}
