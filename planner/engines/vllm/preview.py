"""What ``vllm serve`` will print for a plan, and the command line that reproduces it."""

from __future__ import annotations

from dataclasses import dataclass

from planner.cache.engines import with_offload
from planner.engines.common import BudgetTerm, EngineBudget, EnginePreview
from planner.engines.vllm.capacity import VllmCapacity


def serve_line(
    model: str,
    *,
    tp: int,
    max_model_len: int,
    max_num_batched_tokens: int,
    replicas: int = 1,
    node_gpus: int = 8,
    gpu_memory_utilization: float | None = None,
    kv_cache_dtype: str = "auto",
    max_num_seqs: int | None = None,
    block_size: int | None = None,
    prefix_caching: bool = True,
    enforce_eager: bool = False,
    enable_lora: bool = False,
    max_loras: int = 1,
    max_lora_rank: int = 16,
    limit_mm_per_prompt: int | None = None,
    entry_point: str = "serve",
) -> str:
    """The ``vllm serve`` line (or, ``entry_point`` "llm", the ``LLM(...)`` call) of a plan: the
    model, TP, the replica layout (``--data-parallel-size`` within one node of ``node_gpus``,
    else "run N of these"), ``--max-model-len`` and ``--max-num-batched-tokens`` always, then
    every setting the plan gives (flags at vLLM's defaults are left out)."""
    flags: list[tuple[str, object]] = [("tensor-parallel-size", tp)]
    dp = replicas > 1 and tp * replicas <= node_gpus
    if dp:
        flags.append(("data-parallel-size", replicas))
    flags += [("max-model-len", max_model_len), ("max-num-batched-tokens", max_num_batched_tokens)]
    if max_num_seqs is not None:
        flags.append(("max-num-seqs", max_num_seqs))
    if gpu_memory_utilization is not None:
        flags.append(("gpu-memory-utilization", f"{gpu_memory_utilization:g}"))
    if kv_cache_dtype != "auto":
        flags.append(("kv-cache-dtype", kv_cache_dtype))
    if block_size is not None:
        flags.append(("block-size", block_size))
    if not prefix_caching:
        flags.append(("no-enable-prefix-caching", None))
    if enforce_eager:
        flags.append(("enforce-eager", None))
    if enable_lora:
        flags += [("enable-lora", None), ("max-loras", max_loras), ("max-lora-rank", max_lora_rank)]
    if limit_mm_per_prompt is not None:
        flags.append(("limit-mm-per-prompt", f'{{"image": {limit_mm_per_prompt}}}'))
    if entry_point == "llm":
        args = [f'model="{model}"'] + [f"{name.replace('-', '_')}={_py(value)}" for name, value in flags if name != "no-enable-prefix-caching"]
        if not prefix_caching:
            args.append("enable_prefix_caching=False")
        line = f"LLM({', '.join(args)})"
    else:
        line = " ".join(["vllm serve", model] + [f"--{name}" if value is None else f"--{name} {_shell(value)}" for name, value in flags])
    if replicas > 1 and not dp:
        line += f"  # run {replicas} of these ({tp} GPU{'s' if tp > 1 else ''} each) behind a load balancer"
    return line


def _shell(value: object) -> str:
    text = str(value)
    return f"'{text}'" if any(c in text for c in ' {}"') else text


def _py(value: object) -> str:
    """A flag's value as a Python literal for ``LLM(...)`` (a bare flag is True)."""
    if value is None:
        return "True"
    text = str(value)
    if text.startswith("{") or text.replace(".", "", 1).isdigit():
        return text
    return repr(text)


def serve_command(model: str, capacity: VllmCapacity, *, gpu_memory_utilization: float | None = None, max_num_seqs: int | None = None, user_block_size: int | None = None, **settings) -> str:
    """The ``vllm serve`` line that reproduces an engine sizing (:func:`serve_line` at its TP,
    length, token budget, KV dtype and prefix caching)."""
    return serve_line(
        model, tp=capacity.tp, max_model_len=capacity.max_model_len, max_num_batched_tokens=capacity.max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype=capacity.kv_cache_dtype, max_num_seqs=max_num_seqs, block_size=user_block_size, prefix_caching=capacity.prefix_caching, **settings,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class VllmPreview(EnginePreview):
    """The Plan page's start-up preview: vLLM's predicted budget, its log lines, the command."""


def vllm_preview(plan, model=None) -> VllmPreview:
    """What ``vllm serve`` will print for a plan under runtime vllm, from the plan itself: the budget
    its memory figures come from (:attr:`planner.plan.Plan.capacity`), the start-up log at the serve
    line's ``--max-model-len`` and that line (:attr:`planner.plan.Plan.serve`). A probe's measured
    terms are not mixed in: the Plan page shows them beside this budget, and the plan takes them
    through its workspace. ``model`` is accepted for callers that pass it; the plan holds everything.

    Raises:
        PlannerError: the plan is not under runtime vllm or vLLM cannot run its cache.
    """
    from planner.errors import PlannerError

    del model
    engine, budget, serve = plan.kv_cache.engine, plan.capacity.budget, plan.serve
    if budget is None or engine is None or not engine.applies:
        raise PlannerError("runtime", plan.inputs.runtime, engine.reason if engine is not None and engine.reason else "the start-up preview is vLLM's: choose runtime vllm")
    terms = tuple(BudgetTerm(t.name, t.bytes if i < 2 else -t.bytes, t.source + ("" if t.in_budget else " (outside the budget)")) for i, t in enumerate(budget.terms))
    refusal = None if serve.max_model_len is not None and serve.tp == plan.inputs.tp else (engine.startup_refusal or engine.refusal)
    return VllmPreview(budget=EngineBudget(terms=terms, available_kv_bytes=budget.available_kv_bytes), log_lines=engine.log_lines if serve.tp == plan.inputs.tp else (), refusal=refusal, command=with_offload(serve.command, plan) if serve.command else "")
