"""Runtime vllm's memory of one GPU: vLLM's own batching defaults and its start-up budget.

Under runtime ``vllm`` a plan's memory is what vLLM will find at start-up
(:func:`planner.engines.vllm_memory.predict_memory`): the total CUDA reports times
``--gpu-memory-utilization`` (= 1 - the plan's headroom), less the weights as vLLM loads them, the
profiling run's peak (sampler, multimodal encoder cache), LoRA slots, non-torch memory and (from
0.21) CUDA graphs. A given ``workspace_gib`` replaces the predicted profiling, non-torch and graph
terms; a given ``model_resident_gib`` the weights. ``max_batched_tokens`` / ``max_num_seqs``
left empty take vLLM's defaults for the GPU, release and entry point (:class:`Batching`), which
the budget, the latency model, the admission and the serve line all use.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from planner import latency
from planner.engines.vllm_memory import MemoryBudget, batch_defaults, predict_memory, vllm_weights_bytes
from planner.errors import PlannerError
from planner.hardware import GIB, Device
from planner.limits import ByteBudgetCache, size_of
from planner.plan.inputs import PlanInputs
from planner.plan.model import PreparedModel

ENTRY_POINTS = {"serve": "vllm serve", "llm": "LLM class"}  # PlanInputs.entry_point -> vllm_memory's names


class Batching(NamedTuple):
    """The scheduler's limits a plan runs with: tokens a step, running sequences a replica (None: no
    limit), and where they come from."""

    tokens: int
    seqs: int | None
    source: str


def batching(inputs: PlanInputs, device: Device) -> Batching:
    """``max_batched_tokens`` and ``max_num_seqs`` as given, else (runtime vllm) vLLM's defaults for
    this GPU, release and entry point; other runtimes: 8,192 tokens a step and no sequence limit."""
    tokens, seqs = inputs.max_batched_tokens, inputs.max_num_seqs
    if inputs.runtime != "vllm":
        return Batching(tokens or latency.DEFAULT_BATCH_TOKENS, seqs, "given" if tokens else f"the planner's default {latency.DEFAULT_BATCH_TOKENS:,} tokens a step")
    if tokens is not None and seqs is not None:
        return Batching(tokens, seqs, "given")
    d = batch_defaults(device, inputs.vllm_version, ENTRY_POINTS[inputs.entry_point])
    source = d.source if tokens is None and seqs is None else f"{'max_num_seqs' if tokens is not None else 'max_num_batched_tokens'} from {d.source}, the other given"
    return Batching(tokens or d.max_num_batched_tokens, seqs or d.max_num_seqs, source)


def utilization(inputs: PlanInputs) -> float:
    """vLLM's ``--gpu-memory-utilization``: 1 - the plan's headroom (1,000 bp -> 0.9)."""
    return (10_000 - inputs.headroom_bp) / 10_000


def vllm_budget(inputs: PlanInputs, model: PreparedModel, device: Device, limits: Batching, max_model_len: int, tp: int | None = None) -> MemoryBudget:
    """vLLM's predicted start-up budget for one GPU of this plan (at ``tp``, default the plan's);
    memoised by everything it reads."""
    tp = tp or inputs.tp
    key = (
        model.geometry.config_hash, json.dumps(model.quantization, sort_keys=True) if model.quantization else "", tuple(sorted((model.parameter_counts or {}).items())),
        device.name, device.memory_gib, device.cuda_memory_gib, inputs.weight_dtype, inputs.model_resident_gib, inputs.workspace_gib, inputs.headroom_bp, tp, inputs.dp, inputs.pp, inputs.vllm_version, inputs.entry_point, inputs.enforce_eager,
        limits.tokens, limits.seqs, max_model_len, inputs.limit_mm_per_prompt, inputs.enable_lora, inputs.max_loras, inputs.max_lora_rank,
    )  # fmt: skip
    hit = _BUDGETS.get(key)
    if hit is None:
        if inputs.model_resident_gib is not None:
            weights, source = int(inputs.model_resident_gib * GIB), "given (model resident per GPU)"
        else:
            estimate = model.weights(inputs.weight_dtype)
            weights, source = vllm_weights_bytes(model.config, model.geometry, device, tp=tp, release=inputs.vllm_version, weights=estimate, quantization=model.quantization)
            weights, source = _shaped(weights, source, estimate, tp, inputs.dp, inputs.pp)
        hit = predict_memory(
            model.config, model.geometry, device, gpu_memory_utilization=utilization(inputs), tp=tp, max_model_len=max_model_len, max_num_batched_tokens=limits.tokens,
            max_num_seqs=limits.seqs, release=inputs.vllm_version, entry_point=ENTRY_POINTS[inputs.entry_point], enforce_eager=inputs.enforce_eager, weights_bytes=weights,
            weights_source=source, limit_mm_per_prompt=inputs.limit_mm_per_prompt, enable_lora=inputs.enable_lora, max_loras=inputs.max_loras, max_lora_rank=inputs.max_lora_rank,
            workspace_bytes=None if inputs.workspace_gib is None else int(inputs.workspace_gib * GIB),
        )  # fmt: skip
        _BUDGETS.put(key, hit)
    return hit  # type: ignore[return-value]


def _shaped(per_tp: int, source: str, estimate, tp: int, dp: int, pp: int) -> tuple[int, str]:
    """vLLM's weights on one GPU of a ``tp`` replica, on the busiest GPU of a DP / PP shape:
    attention data parallelism splits the routed experts over ep = dp x tp GPUs instead of tp
    (planner.plan.stages.resident_weights), pipeline stages a uniform stack / pp."""
    if dp > 1 and estimate.num_experts:
        experts = estimate.expert_bytes
        per_tp -= -(-experts // tp) - -(-experts // (tp * dp))
        source += f", experts / ep {tp * dp}"
    if pp > 1:
        per_tp = -(-per_tp // pp)
        source += f", / pp {pp} stages"
    return per_tp, source


_BUDGETS = ByteBudgetCache(4 << 20, sizer=size_of)  # predicted budgets by everything they read, bounded in bytes


def taken_bytes(budget: MemoryBudget) -> int:
    """What start-up takes from the requested memory: every in-budget term after the first two."""
    return sum(t.bytes for t in budget.terms[2:] if t.in_budget)


def refusal_text(budget: MemoryBudget, gpu_memory_utilization: float, device_name: str) -> str:
    """vLLM's refusal as one line with the numbers: its own first sentence (the advice after it is
    vLLM's, about its flags), then the weights, what the rest of start-up takes, the budget and the
    shortfall. The plan, ``size``, ``engine``, the Plan page and the PDF all word it so."""
    refusal = budget.refusal or ""
    if refusal.startswith("Free memory on device"):  # already carries its numbers
        return f"vLLM {budget.release} refuses to start: {refusal}"
    gib = lambda b: f"{b / GIB:,.2f} GiB"  # noqa: E731
    taken = taken_bytes(budget)
    rest = ", ".join(f"{t.name} {gib(t.bytes)}" for t in budget.terms[3:] if t.in_budget)
    numbers = (
        f"weights {gib(budget.term('weights per GPU').bytes)}{' + ' + rest if rest else ''} = {gib(taken)} against the budget {gib(budget.requested_bytes)} "
        f"({gib(budget.total_bytes)} x {gpu_memory_utilization:g} on {device_name}): short by {gib(max(0, taken - budget.requested_bytes))}"
    )
    return f"vLLM {budget.release} refuses to start: {refusal.split('. ')[0].rstrip('.')} ({numbers})"


def fixed_memory_advice(workspace_bytes: float, resident_bytes: float) -> str:
    """What to change when fixed memory does not fit: the larger part gets the advice (a 100,000
    GiB workspace was once told to use a smaller weight dtype)."""
    if workspace_bytes > resident_bytes:
        return "lower the workspace (activations and CUDA graphs; a few GiB is typical)"
    return "use more GPUs (tp), a smaller weight dtype or a larger device"


def refusal_error(budget: MemoryBudget, inputs: PlanInputs, device: Device) -> PlannerError:
    """vLLM's refusal to start (:func:`refusal_text`); the field is the control that changes it
    (headroom for the start-up check, a given workspace or weights that alone exceed the budget, else TP)."""
    text = refusal_text(budget, utilization(inputs), device.name)
    if budget.refusal and budget.refusal.startswith("Free memory on device"):
        return PlannerError("headroom_bp", inputs.headroom_bp, text)
    if inputs.workspace_gib is not None and inputs.workspace_gib * GIB >= budget.requested_bytes:
        field, value = "workspace_gib", inputs.workspace_gib
    elif inputs.model_resident_gib is not None and inputs.model_resident_gib * GIB >= budget.requested_bytes:
        field, value = "model_resident_gib", inputs.model_resident_gib
    else:
        field, value = "tp", inputs.tp
    workspace = (inputs.workspace_gib or 0) * GIB
    return PlannerError(field, value, f"{text}; {fixed_memory_advice(workspace, budget.term('weights per GPU').bytes)}")
