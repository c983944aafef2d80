"""``compute_plan``: the stages from inputs to a :class:`~planner.plan.result.Plan`."""

from __future__ import annotations

from operator import attrgetter

from planner import capacity, latency
from planner.context import COMPONENTS, ContextBudget, context_budget
from planner.errors import PlannerError
from planner.geometry import ModelGeometry
from planner.hardware import Device
from planner.kv import InspectReport, inspect_geometry
from planner.limits import ByteBudgetCache, size_of
from planner.plan.budget import Batching, batching, fixed_memory_advice, refusal_error, taken_bytes, vllm_budget
from planner.plan.engine_view import engine_view
from planner.plan.inputs import PlanInputs, resolve_device
from planner.plan.model import PreparedModel
from planner.plan.result import Admission, Ceiling, Load, Memory, Plan, Sharing
from planner.plan.sglang_view import SglangView, sglang_memory, sglang_view
from planner.units import GIB
from planner.weights import WeightsEstimate


def build_roofline(inputs: PlanInputs, geo: ModelGeometry, weights: WeightsEstimate, specs: tuple, device: Device, resident: int, compute_dtype: str = "bf16") -> latency.Roofline:
    """The per-GPU step-time model of this plan (every term of :class:`latency.Roofline`)."""
    tp = inputs.tp
    per_param = resident * tp / weights.total_params if weights.total_params else 2.0
    vocab_params = (geo.vocab_size or 0) * geo.hidden_size / tp  # vocab-parallel LM head and embedding
    moe = bool(weights.num_experts and weights.experts_per_token)
    link_gb_s, link_us = device.link_at(tp)
    fields = dict(  # every field but the layer layout (below) and eff (FITTED)
        weights_bytes=resident,
        active_params=weights.active_params / tp,
        q_heads=max(1, geo.num_attention_heads // tp),
        head_dim=geo.head_dim,
        peak_flops=device.peak_flops(compute_dtype),
        bandwidth_bytes_s=device.bandwidth_bytes_s,
        mfu=inputs.mfu,
        mbu=inputs.mbu,
        expert_bytes=resident * weights.expert_bytes / weights.bytes if weights.bytes else 0.0,
        num_experts=weights.num_experts,
        experts_per_token=weights.experts_per_token,
        expert_active_params=weights.expert_params * weights.experts_per_token / weights.num_experts / tp if moe else 0.0,
        lm_head_params=vocab_params,
        lm_head_bytes=vocab_params * per_param,
        unread_bytes=0.0 if geo.tie_word_embeddings else vocab_params * per_param,
        layers=geo.num_layers,
        moe_layers=geo.num_layers if moe else 0,
        hidden=geo.hidden_size,
        layer_width=geo.hidden_size + (0 if moe else (geo.intermediate_size or 4 * geo.hidden_size) / tp),
        tp=tp,
        ep=inputs.ep if moe else 1,
        link_bytes_s=link_gb_s * 1e9,
        link_latency_s=link_us * 1e-6,
        moe_scale=device.moe_efficiency,
        compute_scale=device.compute_efficiency,
    )
    # one Roofline per distinct set of field values: plans that differ only in the load or the
    # context share it, and with it its memo of the steps already computed. The attention layers
    # and the window of each windowed layer are functions of the specs' (kind, window, layers).
    layout = tuple((sp.kind, sp.window, sp.num_layers) for sp in specs)
    key = (layout, *fields.values())
    roof = _ROOFLINES.get(key)
    if roof is None:
        attn_layers = sum(s.num_layers for s in specs if s.kind != "cross")
        windows = tuple(sp.window for sp in specs if sp.kind in ("sliding", "chunked") and sp.window for _ in range(sp.num_layers))
        roof = latency.Roofline(**fields, attn_layers=attn_layers, windows=windows, eff=latency.FITTED)
        _ROOFLINES.put(key, roof)
    return roof  # type: ignore[return-value]


# step models by their field values; each is charged its worst-case memo (latency.MEMO_BYTES)
_ROOFLINES = ByteBudgetCache(16 << 20, sizer=lambda roof: size_of(roof) + latency.MEMO_BYTES)


def _ttft_limit(inputs: PlanInputs, roof, ctx, kv_at, limit_memory: int, replicas: int, cached: int, load_at=None) -> int:
    """Most sequences (all replicas) whose time to first token meets the TTFT SLO.

    Observed latencies are one measurement: the SLO admits everything or nothing. The roofline's
    TTFT grows with concurrency through the first decode step, so the limit is the largest
    per-replica concurrency c with queue + preprocessing + prefill + first decode(c) <= SLO.
    """
    slo = inputs.ttft_slo_ms
    fixed = (inputs.queue_ms or 0.0) + (inputs.preprocessing_ms or 0.0)
    if inputs.observed:
        ttft = fixed + (inputs.prefill_ms or 0.0) + (inputs.first_decode_ms or 0.0)
        return 0 if ttft > slo else limit_memory
    base = fixed + roof.prefill_s(ctx.input_tokens - cached, cached) * 1000.0
    first_kv = kv_at(ctx.input_tokens + 1)

    def ttft_ms(c: int) -> float:  # p95, with the wait behind the other prompts at c requests
        wait = load_at(c).wait_p95_ms if load_at else 0.0
        return base + wait + roof.decode_step_s(c, first_kv, ctx.input_tokens + 1) * 1000.0

    return capacity.largest_within(ttft_ms, slo, max(1, limit_memory // max(1, replicas))) * replicas  # the first decode step grows with c


_COMPONENTS_OF = attrgetter(*COMPONENTS)
_CONTEXTS: dict = {}  # context budgets by their inputs (a few hundred bytes each, at most 1,024)


def _context(inputs: PlanInputs, max_ctx: int) -> ContextBudget:
    """:func:`context_budget` of the plan's components, output and maximum, memoised (a refusal is not)."""
    key = (_COMPONENTS_OF(inputs), inputs.output_tokens, max_ctx, inputs.input_tokens)
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = context_budget(dict(zip(COMPONENTS, key[0], strict=True)), inputs.output_tokens, max_ctx, inputs.input_tokens)
        latency._remember(_CONTEXTS, key, ctx, 1024)
    return ctx


def compute_plan(inputs: PlanInputs, model: PreparedModel) -> Plan:
    """Compute the whole plan: each stage below, in this order, from what the ones before found.

    Raises:
        PlannerError: reserved context above the model maximum, fixed memory above usable
            memory, an invalid tensor-parallel size, or any other invalid combination.
    """
    geo = model.geometry
    ctx = plan_context(inputs, geo)
    device = resolve_device(inputs)
    limits = batching(inputs, device)
    report, weights, res = reserve(inputs, model, ctx)
    if inputs.runtime == "sglang":  # SGLang's own budget and token pool (planner/plan/sglang_view.py)
        budget = None
        view, memory = sglang_stage(inputs, model, ctx, report, res)
    else:  # runtime vllm: vLLM's predicted start-up budget (planner/plan/budget.py)
        budget = vllm_budget(inputs, model, device, limits, ctx.maximum_context_tokens) if inputs.runtime == "vllm" else None
        view, memory = None, memory_per_gpu(inputs, device, weights, budget)
    sharing = prefix_sharing(inputs, ctx, report.specs, memory.replicas)
    ceiling = memory_ceiling(inputs, model, ctx, res.total_bytes, memory, sharing, device, limits)
    if view is not None:
        ceiling = sglang_ceiling(ceiling, view, memory.replicas)
    # the step model reads the decoder's weights (an engine's resident figure holds a vision tower too)
    engine_sized = view is not None or budget is not None
    read = -(-weights.bytes // inputs.tp) if engine_sized and inputs.model_resident_gib is None else memory.resident
    roof = roofline(inputs, geo, weights, report.specs, device, read)
    kv_at = kv_held(report, res)
    generated = inputs.generated_tokens or inputs.output_tokens
    mid = ctx.input_tokens + generated // 2
    kv_mid = kv_at(mid)
    cached = int(sharing.cached)

    def load_at(c: int) -> latency.Served:
        return latency.served(roof, ctx.input_tokens, cached, generated, c, kv_mid, mid, limits.tokens)

    admission = admit(inputs, roof, ctx, ceiling.limit_memory, memory.replicas, kv_at, load_at, cached, limits)
    # latency at the requested load on the busiest replica (the same ceil split as memory), even
    # when the load is not admitted: the plan marks it, never silently shows a smaller load
    load = Load(generated, mid, kv_mid, sharing.per_replica_load, load_at(sharing.per_replica_load))
    est, lat = latency_at_load(inputs, roof, ctx, sharing.cached, load, kv_at)
    return Plan(
        inputs=inputs,
        device=device,
        context=ctx,
        inspect=report,
        weights=weights,
        reservation=res,
        latency=lat,
        estimate=est,
        notes=plan_notes(inputs, report, device, ctx, sharing.applies),
        roof=roof,
        _memory=memory,
        _sharing=sharing,
        _ceiling=ceiling,
        _admission=admission,
        _load=load,
        _batching=limits,
        model_name=model.repo_id or "MODEL",
    )


def plan_context(inputs: PlanInputs, geo: ModelGeometry) -> ContextBudget:
    """The request's context budget against the model's maximum (the config's unless given)."""
    max_ctx = inputs.max_context or geo.max_position_embeddings
    if max_ctx is None:
        raise PlannerError("max_context", None, "the config has no max_position_embeddings: give the maximum context")
    try:
        return _context(inputs, max_ctx)
    except PlannerError as exc:
        if exc.field == "max_context" and inputs.max_context and "the model maximum of" in exc.reason:
            # the maximum is the one the user set, not the model's: say whose it is (issue 27 item 6)
            model_max = f"; the model's own is {geo.max_position_embeddings:,}" if geo.max_position_embeddings else ""
            raise PlannerError("max_context", exc.value, exc.reason.replace("the model maximum of", "the maximum context you set,") + model_max) from None
        raise


def reserve(inputs: PlanInputs, model: PreparedModel, ctx: ContextBudget) -> tuple[InspectReport, WeightsEstimate, capacity.SequenceReservation]:
    """The K/V layout per GPU (in the resolved KV dtype), the weights, and what one sequence reserves."""
    kv_dtype, kv_source = model.kv_dtype(inputs.kv_dtype)
    report = inspect_geometry(model.geometry, kv_dtype, inputs.tp, ctx.reserved_total_tokens, inputs.runtime, inputs.mtp, kv_source)
    weights = model.weights(inputs.weight_dtype)
    res = capacity.reserve(report.specs, inputs.reservation, ctx.reserved_total_tokens, ctx.maximum_context_tokens, inputs.block_tokens, report.state_bytes_per_sequence, inputs.encoder_tokens)
    return report, weights, res


def memory_per_gpu(inputs: PlanInputs, device: Device, weights: WeightsEstimate, budget=None) -> Memory:
    """Usable memory after the headroom, less the weights and workspace: the K/V pool of one GPU.
    Under runtime vllm (``budget``): vLLM's predicted start-up budget, term by term.

    Raises:
        PlannerError: fixed memory above usable memory, or (runtime vllm) vLLM would refuse to start.
    """
    replicas = inputs.gpu_count // inputs.tp
    if budget is not None:
        if budget.refusal:
            raise refusal_error(budget, inputs, device)
        weights_term = budget.term("weights per GPU")
        resident = weights_term.bytes
        workspace = taken_bytes(budget) - resident
        return Memory(budget.requested_bytes, resident, weights_term.source, workspace, resident + workspace, budget.available_kv_bytes, replicas, budget)
    usable = capacity.usable_bytes(device.memory_bytes, inputs.headroom_bp)
    if inputs.model_resident_gib is not None:
        resident = int(inputs.model_resident_gib * GIB)
        resident_source = "given"
    else:
        resident = -(-weights.bytes // inputs.tp)
        resident_source = f"weights estimate ({weights.source}) / tp {inputs.tp}"
    workspace = int((1.0 if inputs.workspace_gib is None else inputs.workspace_gib) * GIB)
    fixed = resident + workspace
    if fixed > usable:
        culprit = ("workspace_gib", workspace / GIB) if workspace > usable else ("model_resident_gib", round(resident / GIB, 3))
        advice = fixed_memory_advice(workspace, resident)
        raise PlannerError(
            *culprit,
            f"fixed memory {fixed / GIB:,.2f} GiB (model {resident / GIB:,.2f} + workspace {workspace / GIB:,.2f}) exceeds usable {usable / GIB:,.2f} GiB "
            f"({device.name} {device.memory_gib:g} GiB less {inputs.headroom_bp / 100:g} % headroom); {advice}",
        )
    return Memory(usable, resident, resident_source, workspace, fixed, usable - fixed, replicas)


def sglang_stage(inputs: PlanInputs, model: PreparedModel, ctx: ContextBudget, report: InspectReport, res: capacity.SequenceReservation) -> tuple[SglangView, Memory]:
    """Runtime sglang: SGLang's start-up sizing of one GPU (:func:`sglang_view`) and the plan's
    memory from it (usable = free before the weights x mem_fraction_static; available = the
    budget SGLang sizes the token pool from).

    Raises:
        PlannerError: SGLang's refusal to start (its own words), or a device SGLang has no profile for.
    """
    windows = tuple(sp.window for sp in report.specs if sp.kind in ("sliding", "chunked") and sp.window)
    view = sglang_view(inputs, model, res.tokens, windows)
    total, source = view.weights_bytes, view.weights_source
    per_gpu = int(inputs.model_resident_gib * GIB) if inputs.model_resident_gib is not None else -(-total // inputs.tp)
    return view, Memory(*sglang_memory(view, per_gpu, source if inputs.model_resident_gib is not None else f"{source} / tp {inputs.tp}", inputs.gpu_count // inputs.tp))


def sglang_ceiling(ceiling: Ceiling, view: SglangView, replicas: int) -> Ceiling:
    """The memory ceiling as SGLang admits: requests whose reserved tokens fit the token pool (and
    their window the SWA pool), at most max_running_requests a replica; no prefix sharing counted."""
    per_replica = view.max_sequences_per_replica
    total = per_replica * replicas
    return ceiling._replace(per_replica=per_replica, memory_max=total, shared_max=total, limit_memory=total, sglang=view)


def prefix_sharing(inputs: PlanInputs, ctx: ContextBudget, specs: tuple, replicas: int) -> Sharing:
    """A paged engine (runtime vllm) holds whole shared blocks once per tenant and replica; a
    static cache or transformers' eager cache shares nothing."""
    if inputs.shared_prefix_tokens > ctx.input_tokens:
        raise PlannerError("shared_prefix_tokens", inputs.shared_prefix_tokens, f"the shared prefix cannot exceed the input ({ctx.input_tokens:,} tokens)")
    applies = bool(inputs.shared_prefix_tokens) and inputs.reservation != "static" and inputs.runtime == "vllm"
    shared_blocks, saved = capacity.shared_prefix_bytes(specs, inputs.shared_prefix_tokens, inputs.block_tokens) if applies else (0, 0)
    per_replica_load = -(-inputs.sequences // replicas)  # the requested load, spread over the replicas
    copies = min(inputs.tenants, per_replica_load)  # each replica holds each of its tenants' prefix once
    # prefill skips the cached whole blocks (never the last prompt token, which yields the first logits)
    cached = inputs.prefix_hit_rate * min(shared_blocks * inputs.block_tokens, ctx.input_tokens - 1) if applies else 0.0
    return Sharing(applies, shared_blocks, saved, per_replica_load, max(0, per_replica_load - copies) * saved, cached)


def memory_ceiling(inputs: PlanInputs, model: PreparedModel, ctx: ContextBudget, per_seq: int, memory: Memory, sharing: Sharing, device: Device | None = None, limits: Batching | None = None) -> Ceiling:
    """The most sequences memory holds: steady state, with prefix sharing, and (runtime vllm) as
    vLLM admits them, reserving a request's blocks for all its reserved tokens."""
    available, replicas, saved = memory.available, memory.replicas, sharing.saved
    per_replica = capacity.max_sequences(available, per_seq)
    memory_max = steady_max = per_replica * replicas
    shared_max = capacity.max_sequences_shared(available, per_seq, saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
    # a static reservation is an explicit non-paged allocator: vLLM's block admission does not apply
    engine = engine_view(model, inputs, ctx, available, device, limits) if inputs.runtime == "vllm" and inputs.reservation != "static" else None
    if engine is not None and engine.applies and engine.refusal:
        per_replica = memory_max = shared_max = 0
    elif engine is not None and engine.applies:
        engine_pool = engine.num_blocks * engine.bytes_per_block
        per_replica = engine.max_sequences_per_replica
        memory_max = per_replica * replicas
        shared_max = capacity.max_sequences_shared(engine_pool, engine.bytes_per_request, saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
    return Ceiling(per_replica, memory_max, shared_max, shared_max if saved else memory_max, steady_max, engine)


def roofline(inputs: PlanInputs, geo: ModelGeometry, weights: WeightsEstimate, specs: tuple, device: Device, resident: int) -> latency.Roofline:
    """The step-time model, in fp8 where the weights are fp8 (their GEMMs run at the fp8 peak)."""
    compute_dtype = "fp8" if inputs.weight_dtype == "fp8" or "fp8" in weights.dtype_label else "bf16"
    if weights.num_experts and inputs.tp % inputs.ep:
        raise PlannerError("ep", inputs.ep, f"expert parallelism must divide tp {inputs.tp} (the experts of one replica spread over ep of its GPUs)")
    return build_roofline(inputs, geo, weights, specs, device, resident, compute_dtype)


def kv_held(report: InspectReport, res: capacity.SequenceReservation):
    """tokens -> K/V bytes one sequence holds at that context (windows capped, state and encoder included)."""
    specs, fixed = report.specs, report.state_bytes_per_sequence + res.encoder_bytes

    def kv_at(tokens: int) -> int:
        return sum(s.bytes_at(tokens) for s in specs) + fixed

    return kv_at


def admit(inputs: PlanInputs, roof: latency.Roofline, ctx: ContextBudget, limit_memory: int, replicas: int, kv_at, load_at, cached: int, scheduler: Batching | None = None) -> Admission:
    """Every limit on concurrent sequences (memory, the p95 ITL and TTFT SLOs, the runtime's
    maximum, the tenant quota) and the verdict on the requested load."""

    def itl_ms(c: int) -> float:  # p95 of the gaps between tokens (an SLO is a percentile)
        return load_at(c).itl_p95_ms

    limits = {"memory": limit_memory}
    if inputs.itl_slo_ms is not None:
        limits["latency_slo"] = capacity.largest_within(itl_ms, inputs.itl_slo_ms, max(1, limit_memory)) * replicas
    if inputs.ttft_slo_ms is not None:
        limits["ttft_slo"] = _ttft_limit(inputs, roof, ctx, kv_at, limit_memory, replicas, cached, load_at)
    seqs = inputs.max_num_seqs if scheduler is None else scheduler.seqs
    if seqs is not None:
        limits["runtime"] = seqs * replicas
    if inputs.tenant_quota is not None:
        limits["tenant_quota"] = inputs.tenant_quota
    return Admission(limits, *capacity.admission(inputs.sequences, limits))


def latency_at_load(inputs: PlanInputs, roof: latency.Roofline, ctx: ContextBudget, cached: float, load: Load, kv_at) -> tuple[latency.LatencyReport, latency.LatencyReport]:
    """(the roofline estimate, the latency the plan shows): the estimate, or the observed phases
    when they are given (then every phase must be)."""
    est = latency.estimate(
        roof,
        ctx.input_tokens,
        cached,
        load.generated,
        load.concurrency,
        kv_at,
        queue_ms=inputs.queue_ms or 0.0,
        preprocessing_ms=inputs.preprocessing_ms or 0.0,
        load=load.served,
    )
    if not inputs.observed:
        return est, est
    generated = load.generated
    for name in ("prefill_ms", "first_decode_ms"):
        if getattr(inputs, name) is None:
            raise PlannerError(name, None, "an observed latency needs prefill_ms and first_decode_ms (or give none of the measured phases for the roofline estimate)")
    if generated > 1 and inputs.remaining_decode_ms is None:
        raise PlannerError("remaining_decode_ms", None, f"{generated:,} generated tokens need the remaining decode time (0 only when one token is generated)")
    if generated > ctx.reserved_output_tokens:
        raise PlannerError("generated_tokens", generated, f"exceeds the output reserve of {ctx.reserved_output_tokens:,} tokens")
    obs = latency.LatencyObservation(
        prompt_tokens=ctx.input_tokens,
        generated_tokens=generated,
        queue_ms=inputs.queue_ms or 0.0,
        preprocessing_ms=inputs.preprocessing_ms or 0.0,
        prefill_ms=inputs.prefill_ms,
        first_decode_ms=inputs.first_decode_ms,
        remaining_decode_ms=inputs.remaining_decode_ms or 0.0,
    )
    return est, latency.observe(obs)


def plan_notes(inputs: PlanInputs, report: InspectReport, device: Device, ctx: ContextBudget, sharing: bool) -> tuple[str, ...]:
    """The geometry's notes and what this plan assumes beyond them."""
    notes = list(report.notes)
    notes.append(f"latency estimate uses MFU {inputs.mfu:g} and MBU {inputs.mbu:g} on {device.name}")
    if inputs.runtime == "sglang":
        notes.append("runtime sglang: memory is SGLang's static fraction of the free memory before the weights (mem_fraction_static), so the headroom and workspace inputs do not apply; the prefix is not deduplicated")
    elif inputs.runtime != "vllm" and any(sp.kind == "sliding" for sp in report.specs):
        notes.append("transformers keeps the last W positions of a sliding layer once decoding, but right after a prefill longer than W it briefly holds the whole prompt there (probe-measured); the reservation counts the steady W")
    if inputs.shared_prefix_tokens and not sharing:
        notes.append("the shared prefix is not deduplicated: only a paged engine (runtime vllm, dynamic or paged reservation) shares prefix blocks")
    if inputs.reservation == "static":
        notes.append(f"static reservation allocates the configured maximum ({ctx.maximum_context_tokens:,} tokens) per sequence")
    return tuple(notes)
