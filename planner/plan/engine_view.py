"""vLLM's view of a plan: the per-request reservation it admits with and the start-up log it prints."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields

from planner.context import ContextBudget
from planner.kv import vllm_kv_cache_dtype
from planner.limits import ByteBudgetCache
from planner.plan.inputs import PlanInputs
from planner.plan.model import PreparedModel
from planner.plan.sections import Section

# the plan's resolved KV dtype as vLLM's --kv-cache-dtype ("auto" would re-read the checkpoint,
# which may declare fp8 where the plan asked for 16-bit)
VLLM_KV_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}


@dataclass(frozen=True, slots=True)
class EngineView(Section):
    """vLLM's view of a plan (runtime vllm): the per-request block reservation it admits with,
    at the plan's reserved tokens, and the start-up log it prints at the maximum context.
    ``applies`` is False when vLLM cannot run this cache at all (then only ``reason`` is set)."""

    applies: bool
    vllm_version: str
    reason: str | None = None  # why vLLM does not apply (applies False)
    # the start-up log at the serve line's --max-model-len (the maximum context where it fits),
    # and vLLM's refusal to start at the maximum context itself
    log_lines: tuple[str, ...] = ()
    startup_max_concurrency: float | None = None
    startup_kv_cache_tokens: int | None = None
    startup_refusal: str | None = None
    # the --max-model-len the serve line starts with: the maximum context, else vLLM's estimate of
    # the longest that fits when that still holds the reserved tokens (None: nothing starts)
    serve_max_model_len: int | None = None
    fits_at_tp: int | None = None  # the smallest larger TP at which the maximum context fits (when it does not here)
    # the reservation of one request of the reserved tokens (all 0 when vLLM cannot hold one)
    num_blocks: int = 0
    bytes_per_block: int = 0
    bytes_per_request: int = 0
    blocks_per_request: int = 0
    max_sequences_per_replica: int = 0
    max_concurrency_at_reserved_tokens: float | None = None  # None with a refusal
    block_size: int | None = None  # None with a refusal
    groups: str = ""
    refusal: str | None = None  # why vLLM cannot hold one request of the reserved tokens
    why: str = ""  # why vLLM's figure differs from the planner's steady state

    def to_json(self) -> dict:
        """As the summary has always written it: ``applies``, ``vllm_version`` and ``reason`` when
        vLLM does not apply; otherwise every other field (a refusal has no concurrency or block size)."""
        if not self.applies:
            return {"applies": False, "vllm_version": self.vllm_version, "reason": self.reason}
        out = Section.to_json(self)
        del out["reason"]
        if self.refusal is not None:
            del out["max_concurrency_at_reserved_tokens"], out["block_size"]
        return out


def engine_view(model: PreparedModel, inputs: PlanInputs, ctx: ContextBudget, available: int, device=None, limits=None) -> EngineView:
    """vLLM's view of the plan: the per-request reservation it admits with (at the reserved
    tokens), the start-up log it prints (at the serve line's --max-model-len), and why it differs
    from the planner's steady-state figure. ``applies`` is False when vLLM cannot run this cache at
    all. With the plan's ``device`` and batching ``limits``, a maximum context that does not fit is
    also tried at larger TP (:attr:`EngineView.fits_at_tp`). Memoised (a plan's load does not
    change it; the view is frozen, so plans share it)."""
    budget_key = (
        (device.name, device.memory_gib, device.cuda_memory_gib, tuple(limits), inputs.headroom_bp, inputs.weight_dtype, inputs.model_resident_gib, inputs.workspace_gib, inputs.entry_point,
         inputs.enforce_eager, inputs.limit_mm_per_prompt, inputs.enable_lora, inputs.max_loras, inputs.max_lora_rank, inputs.gpu_count)
        if device is not None and limits is not None else None
    )  # fmt: skip
    key = (model.geometry.config_hash, inputs.vllm_version, inputs.kv_dtype, inputs.tp, inputs.block_tokens, available, ctx.maximum_context_tokens, ctx.reserved_total_tokens, budget_key)
    hit = _ENGINE_VIEWS.get(key)
    if hit is None:
        hit = _engine_view(model, inputs, ctx, available, device, limits)
        _ENGINE_VIEWS.put(key, hit)
    return hit  # type: ignore[return-value]


def _view_bytes(view: EngineView) -> int:
    """Bytes an engine view holds: the object, its values and the log lines (nothing nests deeper)."""
    values = [getattr(view, f.name) for f in fields(view)]
    return sys.getsizeof(view) + sum(map(sys.getsizeof, values)) + sum(map(sys.getsizeof, view.log_lines))


_ENGINE_VIEWS = ByteBudgetCache(4 << 20, sizer=_view_bytes)  # engine_view by everything it reads, bounded in bytes


def _tp_that_fits(model: PreparedModel, inputs: PlanInputs, ctx: ContextBudget, device, limits, args: dict) -> int | None:
    """The smallest TP above the plan's (dividing the attention heads, up to 64 and the deployment's
    GPUs) at which vLLM starts with the maximum context: its budget there, then its fit check."""
    from planner.engines.vllm import EngineRefusal, vllm_capacity
    from planner.plan.budget import vllm_budget

    geo = model.geometry
    tp = inputs.tp * 2
    while tp <= 64:
        if geo.num_attention_heads % tp == 0 and (geo.mla is not None or geo.num_kv_heads % tp == 0 or tp % geo.num_kv_heads == 0):
            budget = vllm_budget(inputs, model, device, limits, ctx.maximum_context_tokens, tp=tp)
            if budget.refusal is None:
                try:
                    vllm_capacity(model.config, max_model_len=ctx.maximum_context_tokens, **{**args, "available_kv_bytes": budget.available_kv_bytes, "tp": tp})
                    return tp
                except EngineRefusal:
                    pass
        tp *= 2
    return None


def _engine_view(model: PreparedModel, inputs: PlanInputs, ctx: ContextBudget, available: int, device=None, limits=None) -> EngineView:
    from planner.engines.vllm import EngineRefusal, vllm_capacity

    version = inputs.vllm_version
    resolved, source = model.kv_dtype(inputs.kv_dtype)
    dtype = vllm_kv_cache_dtype(resolved, source)  # fp8_e4m3 where a ModelOpt checkpoint's FP8 KV resolved "auto"
    if dtype is None:
        return EngineView(applies=False, vllm_version=version, reason=f"vLLM has no {resolved} KV cache; the steady-state figure applies")
    batched = {} if limits is None else {"max_num_batched_tokens": limits.tokens}
    args = dict(geometry=model.geometry, available_kv_bytes=available, tp=inputs.tp, kv_cache_dtype=dtype, block_size=None if inputs.block_tokens == 16 else inputs.block_tokens, vllm_version=version, **batched)
    try:
        startup = vllm_capacity(model.config, max_model_len=ctx.maximum_context_tokens, **args)
    except EngineRefusal as exc:
        if exc.field in ("model", "engine"):  # an architecture this release cannot run at all, or runs on its V0 engine
            return EngineView(applies=False, vllm_version=version, reason=f"{exc.reason}; the steady-state paged figure applies")
        startup = exc
    if isinstance(startup, EngineRefusal):
        # vLLM's own estimate of the longest --max-model-len that fits, when it still holds the reserved tokens
        estimate = startup.estimated_max_model_len
        shorter = None
        if estimate >= ctx.reserved_total_tokens:
            try:
                shorter = vllm_capacity(model.config, max_model_len=estimate, **args)
            except EngineRefusal:
                shorter = None
        fits_at = _tp_that_fits(model, inputs, ctx, device, limits, args) if device is not None and limits is not None and startup.field == "max_model_len" else None
        log = dict(startup_refusal=startup.reason, fits_at_tp=fits_at)
        if shorter is not None:
            log.update(log_lines=tuple(shorter.log_lines), startup_max_concurrency=shorter.max_concurrency, startup_kv_cache_tokens=shorter.kv_cache_tokens, serve_max_model_len=estimate)
    else:
        log = dict(log_lines=tuple(startup.log_lines), startup_max_concurrency=startup.max_concurrency, startup_kv_cache_tokens=startup.kv_cache_tokens, startup_refusal=None, serve_max_model_len=ctx.maximum_context_tokens)
    try:
        at = vllm_capacity(model.config, max_model_len=ctx.reserved_total_tokens, **args)
    except EngineRefusal as exc:
        return EngineView(applies=True, vllm_version=version, **log, refusal=exc.reason, why=f"vLLM {version} cannot hold one request of {ctx.reserved_total_tokens:,} tokens: {exc.reason}")
    kinds = {g.kind for g in at.groups}
    reasons = []
    if "sliding" in kinds or "chunked" in kinds:
        reasons.append(f"sliding and chunked layers keep window - 1 + {at.max_in_flight_tokens:,} in-flight tokens plus a block")
    if kinds & {"mamba", "linear_attention"}:
        reasons.append(f"each recurrent layer holds {next(g.blocks_per_request for g in at.groups if g.kind in ('mamba', 'linear_attention'))} state blocks padded to one attention page")
    if len(at.groups) > 1 and any(g.layers < at.group_size for g in at.groups):
        reasons.append(f"groups are padded to {at.group_size} layers")
    if not reasons:
        reasons.append(f"whole {at.block_size}-token blocks are reserved")
    return EngineView(
        applies=True,
        vllm_version=version,
        **log,
        num_blocks=at.num_blocks,
        bytes_per_block=at.bytes_per_block,
        bytes_per_request=at.bytes_per_request,
        blocks_per_request=at.blocks_per_request,
        max_sequences_per_replica=int(at.max_concurrency),
        max_concurrency_at_reserved_tokens=at.max_concurrency,
        block_size=at.block_size,
        groups=", ".join(f"{g.layers} {g.kind}" + (f" ({g.window:,})" if g.window else "") for g in at.groups),
        refusal=None,
        why=f"vLLM {version} admits a request only when blocks for all {ctx.reserved_total_tokens:,} reserved tokens are free in every KV-cache group ({'; '.join(reasons)}); the steady-state figure counts what a running sequence holds.",
    )
