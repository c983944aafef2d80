"""Many plans of one model: the ITL curve, the (context, concurrency) grid and input suggestions."""

from __future__ import annotations

from planner import capacity
from planner.context import COMPONENTS
from planner.errors import PlannerError
from planner.plan.budget import batching, vllm_budget
from planner.plan.inputs import PlanInputs, make_inputs, resolve_device
from planner.plan.model import PreparedModel
from planner.plan.result import Plan
from planner.plan.stages import compute_plan
from planner.units import GIB


def itl_curve(plan: Plan, model: PreparedModel, points: int = 24) -> list[tuple[int, float, float]]:
    """(concurrency, estimated mean ITL ms, its p95) from 1 to the memory ceiling, for charts."""
    top = max(1, plan.kv_cache.maximum_sequences_by_memory // max(1, plan.capacity.replicas))
    cs = sorted({max(1, round(top * i / (points - 1))) for i in range(points)} | {1})
    out = []
    for c in cs:
        p = compute_plan(plan.inputs.model_copy(update={"sequences": c * plan.capacity.replicas, "itl_slo_ms": None}), model)
        out.append((c, p.estimate.mean_inter_token_latency_ms, p.roofline.itl_p95_ms))
    return out


def grid(inputs: PlanInputs, model: PreparedModel, contexts: list[int], concurrencies: list[int]) -> list[list[bool]]:
    """Admitted (True) or not for each (context, concurrency) pair: the heatmap's cells.

    ``contexts`` are reserved totals; the input is scaled so input + output = context.
    """
    return [[c <= limit for c in concurrencies] for limit in grid_limits(inputs, model, contexts)]


def grid_limits(inputs: PlanInputs, model: PreparedModel, contexts: list[int]) -> list[int]:
    """The admissible concurrency (min over every limit) for each reserved context; -1 where the
    context does not fit at all (heatmap hover text; :func:`grid` compares against these)."""
    out = []
    for total in contexts:
        try:
            base = compute_plan(inputs.model_copy(update={"input_tokens": max(1, total - inputs.output_tokens), "sequences": 1}), model)
            out.append(base.kv_cache.admissible_sequences)
        except PlannerError:
            out.append(-1)
    return out


def suggest_inputs(model: PreparedModel, values: dict) -> tuple[dict, list[str]]:
    """Updates that make a plan possible for ``model``: a maximum context where the config has none,
    a context that fits, and the smallest valid tensor-parallel size whose weights fit the device.

    Returns (updates to apply to ``values``, sentences saying why). Nothing is changed that
    already works.
    """
    geo = model.geometry
    updates: dict = {}
    why: list[str] = []
    inputs = make_inputs(**values)
    reserved = (inputs.input_tokens or sum(getattr(inputs, n) for n in COMPONENTS)) + inputs.output_tokens
    max_ctx = inputs.max_context or geo.max_position_embeddings
    if max_ctx is None:
        updates["max_context"] = max(reserved, 2048)
        why.append(f"the config states no maximum context: assumed {updates['max_context']:,} tokens")
    elif reserved > max_ctx:
        updates["input_tokens"] = max(1, max_ctx - min(inputs.output_tokens, max_ctx // 4))
        updates["output_tokens"] = max_ctx - updates["input_tokens"]
        why.append(f"the request was resized to the model's {max_ctx:,}-token maximum")
    device = resolve_device(inputs)
    usable = capacity.usable_bytes(device.memory_bytes, inputs.headroom_bp)
    weights = model.weights(inputs.weight_dtype).bytes
    workspace = int((1.0 if inputs.workspace_gib is None else inputs.workspace_gib) * GIB)
    limits = batching(inputs, device)

    def fits(tp: int) -> bool:  # runtime vllm: vLLM's own budget starts with room for the cache
        if inputs.runtime == "vllm":
            budget = vllm_budget(inputs, model, device, limits, max_ctx or 4096, tp=tp)
            return budget.refusal is None and budget.available_kv_bytes > 0.1 * budget.requested_bytes
        return -(-weights // tp) + workspace < usable * 0.9

    if inputs.model_resident_gib is None:
        for tp in (1, 2, 4, 8, 16, 32, 64):
            if geo.num_attention_heads % tp or (geo.mla is None and geo.num_kv_heads % tp and tp % geo.num_kv_heads):
                continue
            if fits(tp):
                if tp != inputs.tp:
                    updates["tp"] = tp
                    updates["gpu_count"] = max(tp, inputs.gpu_count // inputs.tp * tp)
                    why.append(f"{weights / GIB:,.1f} GiB of weights need tensor parallelism {tp} on {device.name}")
                break
        else:
            why.append(f"{weights / GIB:,.1f} GiB of weights do not fit {device.name} at tensor parallelism up to 64")
    return updates, why
