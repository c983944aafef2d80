"""The plan's result (:class:`Plan`) and the labels every surface shows with it."""

from __future__ import annotations

from dataclasses import dataclass

from planner import capacity, latency
from planner.context import ContextBudget
from planner.hardware import Device
from planner.kv import InspectReport
from planner.plan.inputs import PlanInputs
from planner.results import Result
from planner.weights import WeightsEstimate


@dataclass(frozen=True, slots=True)
class Plan(Result):
    """Every number a plan shows, in the seed's sections plus the extra detail."""

    inputs: PlanInputs
    device: Device
    context: ContextBudget
    inspect: InspectReport
    weights: WeightsEstimate
    reservation: capacity.SequenceReservation
    kv_cache: dict
    capacity: dict
    latency: latency.LatencyReport
    estimate: latency.LatencyReport
    roofline: dict
    prefix: dict
    cost: dict
    work: dict
    notes: tuple[str, ...]
    roof: latency.Roofline | None = None  # the step-time model behind the estimate (every term)

    def summary(self) -> dict:
        """The seed-compatible JSON: ``context``, ``kv_cache`` and ``latency`` (plus more sections)."""
        ctx = self.context
        return {
            "context": {
                "input_tokens": ctx.input_tokens,
                "reserved_output_tokens": ctx.reserved_output_tokens,
                "reserved_total_tokens": ctx.reserved_total_tokens,
                "unreserved_tokens": ctx.unreserved_tokens,
                "maximum_context_tokens": ctx.maximum_context_tokens,
                "components": dict(ctx.components),  # the budget is shared by plans with the same context
            },
            "kv_cache": self.kv_cache,
            "latency": {**self.latency.model_dump(), "at": self.roofline["load_label"], "requests_per_replica": self.roofline["decode_concurrency"], "load_admitted": self.roofline["load_admitted"]},
            "estimate": self.estimate.model_dump(),
            "capacity": self.capacity,
            "roofline": self.roofline,
            "prefix_sharing": self.prefix,
            "cost": self.cost,
            "work": self.work,
            "weights": self.weights.model_dump(),
            "device": self.device.model_dump(),
            "geometry": {k: v for k, v in self.inspect.model_dump(mode="json").items() if k != "specs"},
            "notes": list(self.notes),
            "inputs": self.inputs.model_dump(exclude_none=True),
        }


def _num(x: float) -> float | int:
    """320.0 -> 320 so JSON shows the seed's integers; other floats rounded to 4 places."""
    return int(x) if float(x).is_integer() else round(x, 4)


def at_requests(n: int) -> str:
    """The label every latency figure carries: "at 1 request" or "at N requests"."""
    return "at 1 request" if n == 1 else f"at {n:,} requests"


def memory_basis(plan: Plan) -> str:
    """Whose reservation the memory figure counts, for every place that shows it:
    "vLLM 0.33 block reservation; steady state 179" under runtime vllm, else "steady state"."""
    engine = plan.kv_cache.get("engine")
    if engine and engine.get("applies"):
        return f"vLLM {engine['vllm_version']} block reservation; steady state {plan.kv_cache['steady_state_sequences']:,}"
    return f"{plan.inputs.runtime} steady state"
