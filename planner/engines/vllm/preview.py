"""What ``vllm serve`` will print for a plan, and the command line that reproduces it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.cache.engines import with_offload
from planner.engines.common import EnginePreview, EngineRefusal
from planner.engines.vllm.budget import SAMPLER_SEQS, predict_budget
from planner.engines.vllm.capacity import VllmCapacity, vllm_capacity
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.errors import PlannerError
from planner.kv import AUTO


def serve_command(model: str, capacity: VllmCapacity, *, gpu_memory_utilization: float | None = None, max_num_seqs: int | None = None, user_block_size: int | None = None) -> str:
    """The ``vllm serve`` line that reproduces a plan (flags at their defaults are left out)."""
    parts = ["vllm serve", model, f"--tensor-parallel-size {capacity.tp}", f"--max-model-len {capacity.max_model_len}"]
    if gpu_memory_utilization is not None:
        parts.append(f"--gpu-memory-utilization {gpu_memory_utilization:g}")
    if capacity.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {capacity.kv_cache_dtype}")
    if max_num_seqs is not None:
        parts.append(f"--max-num-seqs {max_num_seqs}")
    if capacity.max_num_batched_tokens != DEFAULT_MAX_NUM_BATCHED_TOKENS:
        parts.append(f"--max-num-batched-tokens {capacity.max_num_batched_tokens}")
    if user_block_size is not None:
        parts.append(f"--block-size {user_block_size}")
    if not capacity.prefix_caching:
        parts.append("--no-enable-prefix-caching")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class VllmPreview(EnginePreview):
    """The Plan page's start-up preview: vLLM's predicted budget, its log lines, the command."""


def vllm_preview(plan, model, measured: dict[str, int] | None = None) -> VllmPreview:
    """What ``vllm serve`` will print for a plan under runtime vllm: the budget vLLM will find
    on one GPU at ``gpu_memory_utilization = 1 - headroom``, the start-up log at the plan's
    maximum context, and the command line that reproduces the plan. ``measured``: budget terms a
    probe measured on this plan's GPU (:func:`planner.probe.budget_measurements`), which replace
    the estimates.

    Raises:
        PlannerError: the plan's KV dtype has no vLLM equivalent (int8, int4, fp32).
    """
    inputs = plan.inputs
    resolved = plan.kv_cache.kv_dtype  # "auto" as the checkpoint resolved it
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}.get(resolved)
    if dtype is None:
        raise PlannerError("kv_dtype", resolved, "vLLM has no such KV cache dtype; choose bf16, fp16 or fp8")
    utilization = (10_000 - inputs.headroom_bp) / 10_000
    cap = plan.capacity
    budget = predict_budget(
        cap.device_bytes, utilization, cap.model_resident_bytes * inputs.tp, model.geometry, tp=inputs.tp, max_num_batched_tokens=inputs.max_batched_tokens,
        max_num_seqs=inputs.max_num_seqs or SAMPLER_SEQS, device_source=plan.device.source, weights_source=cap.model_resident_source, measured=measured,
    )  # fmt: skip
    block = None if inputs.block_tokens == 16 else inputs.block_tokens
    length = plan.context.maximum_context_tokens
    try:
        r = vllm_capacity(model.config, geometry=model.geometry, available_kv_bytes=budget.available_kv_bytes, tp=inputs.tp, kv_cache_dtype=dtype, block_size=block, max_model_len=length, vllm_version=inputs.vllm_version)
        lines, refusal = r.log_lines, None
        # the checkpoint's own format stays "auto" on the command line; a chosen one is spelled out
        shown = replace(r, kv_cache_dtype="auto") if inputs.kv_dtype == AUTO else r
        command = with_offload(serve_command(model.repo_id or "MODEL", shown, gpu_memory_utilization=utilization, max_num_seqs=inputs.max_num_seqs, user_block_size=block), plan)
    except EngineRefusal as exc:
        lines, refusal = (), exc.reason
        parts = ["vllm serve", model.repo_id or "MODEL", f"--tensor-parallel-size {inputs.tp}", f"--max-model-len {length}", f"--gpu-memory-utilization {utilization:g}"]
        if inputs.kv_dtype != AUTO:
            parts.append(f"--kv-cache-dtype {dtype}")
        command = " ".join(parts)
    return VllmPreview(budget=budget, log_lines=tuple(lines), refusal=refusal, command=command)
