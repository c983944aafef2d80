"""``compute_plan``: the stages from inputs to a :class:`~planner.plan.result.Plan`."""

from __future__ import annotations

import dataclasses
import math
from operator import attrgetter

from planner import capacity, latency, parallel, speculative
from planner.context import COMPONENTS, ContextBudget, context_budget
from planner.errors import PlannerError
from planner.geometry import ModelGeometry
from planner.hardware import AMD_PREFILL_SLOWER, Device
from planner.kv import InspectReport, inspect_geometry
from planner.limits import ByteBudgetCache, size_of
from planner.plan import serving
from planner.plan.budget import Batching, batching, fixed_memory_advice, refusal_error, taken_bytes, vllm_budget
from planner.plan.engine_view import engine_view
from planner.plan.inputs import PlanInputs, resolve_device
from planner.plan.model import PreparedModel
from planner.plan.result import Admission, Ceiling, Draft, Load, Memory, Plan, Sharing
from planner.plan.sglang_view import SglangView, sglang_memory, sglang_view
from planner.units import GIB
from planner.weights import WeightsEstimate


def build_roofline(
    inputs: PlanInputs,
    geo: ModelGeometry,
    weights: WeightsEstimate,
    specs: tuple,
    device: Device,
    resident: int,
    weight_format: str = "bf16",
    engine: str = "vllm",
    tp: int | None = None,
    ep: int | None = None,
    layout: tuple[int, int] | None = None,
) -> latency.Roofline:
    """The per-GPU step-time model of a tensor-parallel replica of this plan over ``tp`` GPUs
    (default ``inputs.tp``; every term of :class:`latency.Roofline`): the tensor cores the weight
    format multiplies in on this GPU (:func:`latency.kernel_dtype`) and their efficiency, the MoE
    kernel of the format (:func:`latency.moe_kernel`), the format's per-layer cost, the fixed
    cost of every MLA layer, the software stack's fixed-cost scale (AMD), and ``engine``'s
    serving costs (:func:`latency.serving_efficiency`). ``layout``: (layers with routed experts,
    layers with a dense MLP) (:meth:`PreparedModel.mlp_layers`; None: every layer's MLP is the
    model's kind); a dense MLP layer of a MoE model pays a dense MLP's costs: its weights (in
    ``weights``), its activation width, no routing."""
    tp = inputs.tp if tp is None else tp
    per_param = resident * tp / weights.total_params if weights.total_params else 2.0
    vocab_params = (geo.vocab_size or 0) * geo.hidden_size / tp  # vocab-parallel LM head and embedding
    moe = bool(weights.num_experts and weights.experts_per_token)
    n_moe, n_dense = layout or (geo.num_layers, 0)
    if not moe:
        n_moe, n_dense = 0, geo.num_layers  # a dense model's width as before: every layer's
    elif not n_moe:
        n_moe = geo.num_layers  # experts the layout places in no layer: every layer, as before
    dense_mlp = (geo.intermediate_size or 4 * geo.hidden_size) / tp  # a dense MLP layer's activation width on this GPU
    link_gb_s, link_us = device.link_at(tp)
    dtype = latency.kernel_dtype(weight_format, device.generation, engine)
    fields = dict(  # every field but the layer layout (below)
        weights_bytes=resident,
        active_params=weights.active_params / tp,
        q_heads=max(1, geo.num_attention_heads // tp),
        head_dim=geo.head_dim,
        peak_flops=device.peak_flops(dtype),
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
        moe_layers=n_moe,
        hidden=geo.hidden_size,
        layer_width=geo.hidden_size + dense_mlp * n_dense / max(1, geo.num_layers),  # the mean over the layers: a MoE or MLP-less layer's is the hidden size
        tp=tp,
        ep=(inputs.ep if ep is None else ep) if moe else 1,
        link_bytes_s=link_gb_s * 1e9,
        link_latency_s=link_us * 1e-6,
        moe_scale=device.moe_efficiency,
        compute_scale=device.compute_efficiency * latency.compute_scale(dtype),
        moe_kernel=latency.moe_kernel(weight_format, device.generation, engine)[0] if moe else 1.0,
        fixed_scale=device.fixed_cost_scale,
        format_layer_s=latency.format_layer_cost(weight_format),
        eff=latency.serving_efficiency(engine),
    )
    # one Roofline per distinct set of field values: plans that differ only in the load or the
    # context share it, and with it its memo of the steps already computed. The attention layers
    # and the window of each windowed layer are functions of the specs' (kind, window, layers).
    layout = tuple((sp.kind, sp.window, sp.num_layers) for sp in specs)
    key = (layout, bool(geo.mla), *fields.values())
    roof = _ROOFLINES.get(key)
    if roof is None:
        attn_layers = sum(s.num_layers for s in specs if s.kind != "cross")
        windows = tuple(sp.window for sp in specs if sp.kind in ("sliding", "chunked") and sp.window for _ in range(sp.num_layers))
        roof = latency.Roofline(**fields, attn_layers=attn_layers, windows=windows, mla_layers=geo.num_layers if geo.mla else 0)
        _ROOFLINES.put(key, roof)
    return roof  # type: ignore[return-value]


# step models by their field values; each is charged its worst-case memo (latency.MEMO_BYTES)
_ROOFLINES = ByteBudgetCache(16 << 20, sizer=lambda roof: size_of(roof) + latency.MEMO_BYTES)


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
    check_parallel(inputs, weights, geo)
    draft = draft_model(inputs, model, report, device, weights, ctx)
    res = with_draft(res, draft, ctx)
    if inputs.runtime == "sglang":  # SGLang's own budget and token pool (planner/plan/sglang_view.py)
        budget = None
        view, memory = sglang_stage(inputs, model, ctx, report, res)
        limits = sglang_batching(inputs, limits, view)
    else:  # runtime vllm: vLLM's predicted start-up budget (planner/plan/budget.py)
        budget = vllm_budget(inputs, model, device, limits, ctx.maximum_context_tokens) if inputs.runtime == "vllm" else None
        view, memory = None, memory_per_gpu(inputs, device, weights, draft, budget)
    # the step model reads the decoder's weights (an engine's resident figure holds a vision tower too)
    engine_sized = view is not None or budget is not None
    read = resident_weights(inputs, weights)[0] if engine_sized and inputs.model_resident_gib is None else memory.resident
    roof = roofline(inputs, geo, weights, model, report, device, read)
    kv_at = kv_held(report, res)
    generated = inputs.generated_tokens or inputs.output_tokens
    mid = ctx.input_tokens + generated // 2
    kv_mid = kv_at(mid) + (draft.kv_per_token * mid if draft else 0)
    cached = int(prefix_sharing(inputs, ctx, report.specs, memory.ranks).cached)
    setup = load_setup(inputs, roof, ctx, cached, generated, kv_mid, mid, memory.ranks, draft, limits)
    requested = inputs.sequences if setup.rate is None else serving.open_at_rate(setup).per_rank * memory.ranks
    sharing = prefix_sharing(inputs, ctx, report.specs, memory.ranks, requested)
    ceiling = memory_ceiling(inputs, model, ctx, res.total_bytes, memory, sharing, device, limits)
    if view is not None:
        ceiling = sglang_ceiling(ceiling, view, memory.ranks)
    setup = memory_running(inputs, setup, memory, ceiling)
    admission = admit(inputs, setup, ceiling.limit_memory, memory.ranks, requested, limits)
    # latency at the requested load on the busiest rank (the same ceil split as memory), even
    # when the load is not admitted: the plan marks it, never silently shows a smaller load
    figures = serving.open_at_rate(setup) if setup.rate is not None else serving.closed(setup, sharing.per_replica_load)
    load = Load(generated, mid, kv_mid, sharing.per_replica_load, figures, setup)
    est, lat = latency_at_load(inputs, ctx, sharing.cached, load)
    return Plan(
        inputs=inputs,
        device=device,
        context=ctx,
        inspect=report,
        weights=weights,
        reservation=res,
        latency=lat,
        estimate=est,
        notes=plan_notes(inputs, report, device, ctx, sharing.applies) + recv_notes(inputs, setup, figures, sharing.per_replica_load) + eager_notes(inputs, roof),
        roof=roof,
        _memory=memory,
        _sharing=sharing,
        _ceiling=ceiling,
        _admission=admission,
        _load=load,
        _weight_format=model.weight_format(inputs.weight_dtype),
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
    """The K/V layout per GPU (in the resolved KV dtype; of the busiest stage under pipeline
    parallelism), the weights, and what one sequence reserves."""
    kv_dtype, kv_source = model.kv_dtype(inputs.kv_dtype)
    report = inspect_geometry(model.geometry, kv_dtype, inputs.tp, ctx.reserved_total_tokens, inputs.runtime, inputs.mtp or inputs.spec_method == "mtp", kv_source)
    report = parallel.stage_report(report, inputs.pp)  # the busiest pipeline stage's layers
    weights = model.weights(inputs.weight_dtype)
    res = capacity.reserve(report.specs, inputs.reservation, ctx.reserved_total_tokens, ctx.maximum_context_tokens, inputs.block_tokens, report.state_bytes_per_sequence, inputs.encoder_tokens)
    return report, weights, res


def memory_per_gpu(inputs: PlanInputs, device: Device, weights: WeightsEstimate, draft: Draft | None = None, budget=None) -> Memory:
    """Usable memory after the headroom, less the weights (and a speculative draft's) and
    workspace: the K/V pool of one GPU. Under runtime vllm (``budget``): vLLM's predicted start-up
    budget, term by term (under DP / PP its weights term is the busiest GPU's share; a draft's
    weights come out of its K/V pool).

    Raises:
        PlannerError: fixed memory above usable memory, or (runtime vllm) vLLM would refuse to start.
    """
    replicas = inputs.gpu_count // inputs.gpus_per_replica
    draft_bytes = draft.weights_bytes if draft else 0
    if budget is not None:
        if budget.refusal:
            raise refusal_error(budget, inputs, device)
        weights_term = budget.term("weights per GPU")
        resident, source = weights_term.bytes, weights_term.source
        workspace = taken_bytes(budget) - resident
        available = budget.available_kv_bytes
        available -= draft_bytes
        if available <= 0:
            raise PlannerError("gpu_count", inputs.gpu_count, f"vLLM's budget leaves {available / GIB:,.2f} GiB for K/V once the {draft.what if draft else 'weights'} are loaded; use more GPUs or a larger device")
        return Memory(budget.requested_bytes, resident, source, workspace, resident + workspace + draft_bytes, available, replicas, replicas * inputs.dp, draft_bytes, budget)
    usable = capacity.usable_bytes(device.memory_bytes, inputs.headroom_bp)
    if inputs.model_resident_gib is not None:
        resident = int(inputs.model_resident_gib * GIB)
        resident_source = "given"
    else:
        resident, resident_source = resident_weights(inputs, weights)
    workspace = int((1.0 if inputs.workspace_gib is None else inputs.workspace_gib) * GIB)
    fixed = resident + workspace + draft_bytes
    if fixed > usable:
        culprit = ("workspace_gib", workspace / GIB) if workspace > usable else ("model_resident_gib", round(resident / GIB, 3))
        advice = fixed_memory_advice(workspace, resident)
        extra = f" + {draft.what} {draft_bytes / GIB:,.2f}" if draft_bytes else ""
        raise PlannerError(
            *culprit,
            f"fixed memory {fixed / GIB:,.2f} GiB (model {resident / GIB:,.2f} + workspace {workspace / GIB:,.2f}{extra}) exceeds usable {usable / GIB:,.2f} GiB "
            f"({device.name} {device.memory_gib:g} GiB less {inputs.headroom_bp / 100:g} % headroom); {advice}",
        )
    return Memory(usable, resident, resident_source, workspace, fixed, usable - fixed, replicas, replicas * inputs.dp, draft_bytes)


def resident_weights(inputs: PlanInputs, weights: WeightsEstimate) -> tuple[int, str]:
    """(weight bytes on one GPU, what they are): weights / tp; under attention data parallelism
    the dense and attention weights / tp and the routed experts / ep (= dp x tp); under pipeline
    parallelism the busiest stage's share, / pp (a uniform stack)."""
    tp, dp, pp = inputs.tp, inputs.dp, inputs.pp
    if dp == 1 and pp == 1:
        return -(-weights.bytes // tp), f"weights estimate ({weights.source}) / tp {tp}"
    experts = weights.expert_bytes if weights.num_experts else 0
    per_gpu = -(-(weights.bytes - experts) // tp) + -(-experts // (tp * dp))
    what = f"dense and attention / tp {tp}, experts / ep {tp * dp}" if dp > 1 else f"/ tp {tp}"
    return -(-per_gpu // pp), f"weights estimate ({weights.source}) {what}" + (f", / pp {pp} stages" if pp > 1 else "")


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
    return view, Memory(*sglang_memory(view, per_gpu, source if inputs.model_resident_gib is not None else f"{source} / tp {inputs.tp}", inputs.gpu_count // inputs.tp), ranks=inputs.gpu_count // inputs.tp * inputs.dp)


def sglang_batching(inputs: PlanInputs, limits: Batching, view: SglangView) -> Batching:
    """Runtime sglang's scheduler limits: the step's prefill tokens are SGLang's chunked_prefill_size
    (its default per GPU, or the one given) unless max_batched_tokens is given, and at most
    max_running_requests run at once (a Mamba hybrid's are its state slots: memory's limit)."""
    c = view.capacity
    tokens, seqs, source = limits.tokens, limits.seqs, []
    if inputs.max_batched_tokens is None and c.chunked_prefill_size > 0:
        tokens = c.chunked_prefill_size
        source.append(f"SGLang's chunked_prefill_size {tokens:,} tokens a step")
    else:
        source.append(limits.source)
    if inputs.max_num_seqs is None and c.max_mamba_cache_size is None:
        seqs = c.max_running_requests
        source.append(f"max_running_requests {seqs:,} from SGLang's start-up sizing")
    return Batching(tokens, seqs, "; ".join(source))


def sglang_ceiling(ceiling: Ceiling, view: SglangView, replicas: int) -> Ceiling:
    """The memory ceiling as SGLang admits: requests whose reserved tokens fit the token pool (and
    their window the SWA pool), at most max_running_requests a replica; no prefix sharing counted."""
    per_replica = view.max_sequences_per_replica
    total = per_replica * replicas
    if view.binding == "max_running_requests" and view.capacity.max_mamba_cache_size is None:
        # the request limit binds, not memory: memory's own figure is the pools' (the admission's
        # runtime limit is max_running_requests, so the plan names what binds)
        pools = view.capacity.max_total_num_tokens // view.tokens_per_request
        if view.swa_tokens_per_request:
            pools = min(pools, view.capacity.swa_max_total_num_tokens // view.swa_tokens_per_request)
        total = pools * replicas
    return ceiling._replace(per_replica=per_replica, memory_max=total, shared_max=total, limit_memory=total, sglang=view)


def prefix_sharing(inputs: PlanInputs, ctx: ContextBudget, specs: tuple, replicas: int, sequences: int | None = None) -> Sharing:
    """A paged engine (runtime vllm) holds whole shared blocks once per tenant and replica (rank:
    each attention data-parallel rank has its own pool); a static cache or transformers' eager
    cache shares nothing. ``sequences``: the requested load (default the requested sequences)."""
    if inputs.shared_prefix_tokens > ctx.input_tokens:
        raise PlannerError("shared_prefix_tokens", inputs.shared_prefix_tokens, f"the shared prefix cannot exceed the input ({ctx.input_tokens:,} tokens)")
    applies = bool(inputs.shared_prefix_tokens) and inputs.reservation != "static" and inputs.runtime == "vllm"
    shared_blocks, saved = capacity.shared_prefix_bytes(specs, inputs.shared_prefix_tokens, inputs.block_tokens) if applies else (0, 0)
    per_replica_load = -(-(inputs.sequences if sequences is None else sequences) // replicas)  # the requested load, spread over the replicas
    copies = min(inputs.tenants, per_replica_load)  # each replica holds each of its tenants' prefix once
    # prefill skips the cached whole blocks (never the last prompt token, which yields the first logits)
    cached = inputs.prefix_hit_rate * min(shared_blocks * inputs.block_tokens, ctx.input_tokens - 1) if applies else 0.0
    return Sharing(applies, shared_blocks, saved, per_replica_load, max(0, per_replica_load - copies) * saved, cached)


def memory_ceiling(inputs: PlanInputs, model: PreparedModel, ctx: ContextBudget, per_seq: int, memory: Memory, sharing: Sharing, device: Device | None = None, limits: Batching | None = None) -> Ceiling:
    """The most sequences memory holds: steady state, with prefix sharing, and (runtime vllm) as
    vLLM admits them, reserving a request's blocks for all its reserved tokens (not under pipeline
    parallelism: a stage's blocks are the steady-state figure of its layers). Per rank, times the ranks."""
    available, replicas, saved = memory.available, memory.ranks, sharing.saved
    per_replica = capacity.max_sequences(available, per_seq)
    memory_max = steady_max = per_replica * replicas
    shared_max = capacity.max_sequences_shared(available, per_seq, saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
    # a static reservation is an explicit non-paged allocator: vLLM's block admission does not apply
    engine = engine_view(model, inputs, ctx, available, device, limits) if inputs.runtime == "vllm" and inputs.reservation != "static" and inputs.pp == 1 else None
    if engine is not None and engine.applies and engine.refusal:
        per_replica = memory_max = shared_max = 0
    elif engine is not None and engine.applies:
        engine_pool = engine.num_blocks * engine.bytes_per_block
        per_replica = engine.max_sequences_per_replica
        memory_max = per_replica * replicas
        shared_max = capacity.max_sequences_shared(engine_pool, engine.bytes_per_request, saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
    return Ceiling(per_replica, memory_max, shared_max, shared_max if saved else memory_max, steady_max, engine)


def check_parallel(inputs: PlanInputs, weights: WeightsEstimate, geo: ModelGeometry) -> None:
    """The deployment's shape: expert parallelism divides tp, or spreads the experts over all
    dp x tp GPUs of attention data-parallel ranks; data parallelism needs routed experts; every
    pipeline stage gets a layer.

    Raises:
        PlannerError: the first of these a shape breaks.
    """
    moe = bool(weights.num_experts)
    if inputs.dp > 1:
        if not moe:
            raise PlannerError("dp", inputs.dp, "attention data parallelism spreads a mixture-of-experts model's experts over its ranks; a dense model replicates instead: use more GPUs (gpu_count)")
        if inputs.ep != inputs.dp * inputs.tp:
            raise PlannerError("ep", inputs.ep, f"with {inputs.dp} attention data-parallel ranks of tp {inputs.tp} the experts spread over ep = dp x tp = {inputs.dp * inputs.tp} GPUs (vLLM --enable-expert-parallel, SGLang --ep-size, TensorRT-LLM DEP)")
    elif moe and inputs.tp % inputs.ep:
        raise PlannerError("ep", inputs.ep, f"expert parallelism must divide tp {inputs.tp} (the experts of one replica spread over ep of its GPUs), or equal dp x tp with attention data parallelism")
    if inputs.pp > geo.num_layers:
        raise PlannerError("pp", inputs.pp, f"more pipeline stages than the model's {geo.num_layers} layers")


def roofline(inputs: PlanInputs, geo: ModelGeometry, weights: WeightsEstimate, model: PreparedModel, report: InspectReport, device: Device, resident: int) -> latency.Roofline:
    """One rank's step model: the weight format's kernels on this GPU, the serving engine's
    costs, and the deployment's shape (attention data parallelism and pipeline stages,
    :func:`serving.shaped`, from the tensor-parallel model over a rank's dp x tp GPUs)."""
    fmt = model.weight_format(inputs.weight_dtype)
    engine = serving.serving_engine(inputs.runtime, inputs.serving_engine)
    tp, dp, pp = inputs.tp, inputs.dp, inputs.pp
    if dp == 1 and pp == 1:
        return build_roofline(inputs, geo, weights, report.specs, device, resident, fmt, engine, layout=model.mlp_layers())
    full = inspect_geometry(geo, report.kv_dtype, tp * dp, report.tokens, inputs.runtime, inputs.mtp or inputs.spec_method == "mtp", report.kv_dtype_source)
    base = build_roofline(inputs, geo, weights, full.specs, device, -(-weights.bytes // (tp * dp)), fmt, engine, tp=tp * dp, ep=tp * dp if dp > 1 else inputs.ep, layout=model.mlp_layers())
    roof = serving.shaped(base, device, dp, pp, tp)
    if eager_prefill(engine, pp):  # a stage's prefill steps run outside CUDA graphs: its layers' host launches bound them
        roof = dataclasses.replace(roof, eager_prefill_s=latency.eager_prefill_floor(roof))
    return roof


def eager_prefill(engine: str, pp: int) -> bool:
    """Whether the serving engine runs this deployment's prefill steps outside CUDA graphs: SGLang
    0.5.23 graphs prefill by default (``default_prefill_backend``: breakable graphs on CUDA) but
    turns them off for pipeline parallelism (``arg_groups/cuda_graph_hook.py``: "Disabling
    breakable prefill CUDA graph by default for pipeline parallelism"). vLLM's piecewise graphs
    have no such rule, and no published eager figure to size one."""
    return engine == "sglang" and pp > 1


def eager_notes(inputs: PlanInputs, roof: latency.Roofline) -> tuple[str, ...]:
    """What running prefill outside CUDA graphs adds to this plan (:func:`eager_prefill`)."""
    if not roof.eager_prefill_s:
        return ()
    return (
        f"SGLang with pipeline parallelism (pp {inputs.pp}) runs prefill outside CUDA graphs (its default for pp > 1): a step carrying prompt tokens "
        f"lasts at least its {roof.mla_layers} MLA layers' host launches, {roof.mla_layers} x {latency.EAGER_MLA_LAYER_S * 1e3:.3f} ms" + (f" x {roof.fixed_scale:g} (software stack)" if roof.fixed_scale != 1 else "") + " = "
        f"{roof.eager_prefill_s * 1e3:,.1f} ms a stage (SGLang's published eager DeepSeek-V2-family latencies); decode steps stay graphed",
    )


def draft_model(inputs: PlanInputs, model: PreparedModel, report: InspectReport, device: Device, weights: WeightsEstimate, ctx: ContextBudget) -> Draft | None:
    """What speculative decoding adds to a GPU: the proposer's weights and its K/V per token of a
    sequence (:func:`speculative.draft_memory`: an MTP layer, whose K/V the MTP layers of the
    K/V layout already hold; an EAGLE-3 head; a draft model's own weights and K/V, planned from
    its preset), and the draft model's step model.

    Raises:
        PlannerError: ``spec_draft`` missing or unknown for a draft model, or given without one.
    """
    if inputs.spec_method == "none":
        if inputs.spec_draft or inputs.spec_tokens or inputs.spec_acceptance:
            field = "spec_draft" if inputs.spec_draft else ("spec_tokens" if inputs.spec_tokens else "spec_acceptance")
            raise PlannerError(field, getattr(inputs, field), "needs speculative decoding on (spec_method mtp, eagle3 or draft)")
        return None
    geo, tp = model.geometry, inputs.tp
    k = serving.spec_tokens(inputs.spec_method, inputs.spec_tokens)
    if inputs.spec_acceptance is not None and not 1 <= inputs.spec_acceptance <= k + 1:
        raise PlannerError("spec_acceptance", inputs.spec_acceptance, f"the acceptance length is between 1 and drafts + 1 = {k + 1} tokens a step")
    full_kv = next((s for s in report.specs if s.kind == "full" and s.cache in ("kv", "latent")), None)
    per_layer_kv = full_kv.bytes_per_token_per_layer if full_kv else 0
    if inputs.spec_method == "draft":
        if not inputs.spec_draft:
            raise PlannerError("spec_draft", None, "a draft model needs its preset (e.g. llama-3.2-1b drafting for llama-3.1-8b)")
        from planner.plan.model import prepare_model
        from planner.presets import load_preset

        dm = prepare_model(load_preset(inputs.spec_draft))
        dw = dm.weights("auto")
        d_report = inspect_geometry(dm.geometry, report.kv_dtype, tp, ctx.reserved_total_tokens, inputs.runtime, False, report.kv_dtype_source)
        d_resident = -(-dw.bytes // tp)
        d_roof = build_roofline(inputs.model_copy(update={"ep": 1}), dm.geometry, dw, d_report.specs, device, d_resident, dm.weight_format("auto"), serving.serving_engine(inputs.runtime, inputs.serving_engine), layout=dm.mlp_layers())
        return Draft("draft", f"draft model {inputs.spec_draft}", d_resident, d_report.kv_bytes_per_token, d_roof, k)
    if inputs.spec_method == "mtp":
        if not geo.mtp_layers:
            raise PlannerError("spec_method", "mtp", "the config has no next-token-prediction layers (num_nextn_predict_layers): choose eagle3 or a draft model")
        layer = (weights.bytes - 2 * (geo.vocab_size or 0) * geo.hidden_size * weights.bits_per_param / 8) / max(1, geo.num_layers)
        wb, _ = speculative.draft_memory("mtp", geo.hidden_size, geo.intermediate_size or 4 * geo.hidden_size, geo.vocab_size or 0, -(-int(layer) // tp), per_layer_kv, 2.0, tp)
        return Draft("mtp", "MTP layer", int(wb), 0, None, k)  # its K/V: the MTP layers the K/V layout holds
    wb, kv = speculative.draft_memory("eagle3", geo.hidden_size, geo.intermediate_size or 4 * geo.hidden_size, geo.vocab_size or 0, 0.0, per_layer_kv, 2.0, tp)
    return Draft("eagle3", "EAGLE-3 head", int(wb), int(kv), None, k)


def with_draft(res: capacity.SequenceReservation, draft: Draft | None, ctx: ContextBudget) -> capacity.SequenceReservation:
    """The reservation with the draft's K/V of the reserved tokens (EAGLE-3 head, draft model)."""
    if draft is None or not draft.kv_per_token:
        return res
    return dataclasses.replace(res, draft_bytes=draft.kv_per_token * res.tokens)


def load_setup(inputs: PlanInputs, roof: latency.Roofline, ctx: ContextBudget, cached: int, generated: int, kv_mid: float, mid: int, ranks: int, draft: Draft | None, limits: Batching) -> serving.Setup:
    """What the load figures are computed from on one rank: the engine's token budget and running
    limit, the measured preprocessing if given, the rank's share of a request rate, speculation."""
    spec = None
    if draft is not None:
        spec = serving.Spec(draft.method, draft.tokens, inputs.spec_acceptance, draft.roof, draft.kv_per_token * mid if draft.roof else 0.0)
    pre = inputs.preprocessing_ms / 1e3 if inputs.preprocessing_ms is not None else None
    return serving.Setup(roof, ctx.input_tokens, cached, generated, kv_mid, mid, limits.tokens, limits.seqs, pre, serving.per_rank_rate(inputs.request_rate, ranks), spec, recv_interval(inputs), batch_wait(inputs))


def batch_wait(inputs: PlanInputs) -> tuple[int, float]:
    """TensorRT-LLM's batch waiting the latency uses: (batch_wait_timeout_iters,
    batch_wait_max_tokens_ratio) under its serving costs, (0, 0.0) (off) for every other engine."""
    if serving.serving_engine(inputs.runtime, inputs.serving_engine) != "trtllm":
        return (0, 0.0)
    return (inputs.batch_wait_iters, inputs.batch_wait_tokens_ratio)


def recv_interval(inputs: PlanInputs) -> int:
    """The decode steps between the scheduler's polls for new requests the latency uses: the
    input under SGLang's serving costs (its ``--scheduler-recv-interval``), 1 for every other
    engine (vLLM and TensorRT-LLM take new requests every step)."""
    return inputs.recv_interval if serving.serving_engine(inputs.runtime, inputs.serving_engine) == "sglang" else 1


def memory_running(inputs: PlanInputs, setup: serving.Setup, memory: Memory, ceiling: Ceiling) -> serving.Setup:
    """``setup`` with the most sequences a rank runs at once under load: the engine's limit, and
    what its K/V pool holds. vLLM and SGLang take a request in when its prompt's blocks are free
    and grow each sequence as it decodes (vLLM preempts the newest when the pool runs out; SGLang
    charges the remaining output at a ratio that decays to about a tenth): in steady state the pool
    holds about ``available / kv_mid`` sequences, each at the mean decode context.
    TensorRT-LLM's default capacity policy (GUARANTEED_NO_EVICT) starts a request only when its
    prompt and whole output fit, as does a static reservation: the plan's own memory limit.
    Never below that limit. Clients of a closed loop beyond the result wait for a slot
    (latency.closed_loop); an open loop beyond it is not sustainable."""
    per_rank = ceiling.limit_memory // max(1, memory.ranks)
    reserves = serving.serving_engine(inputs.runtime, inputs.serving_engine) == "trtllm" or inputs.reservation == "static"
    if not reserves and setup.kv_mid > 0:
        per_rank = max(per_rank, capacity.max_sequences(memory.available, math.ceil(setup.kv_mid)))
    per_rank = max(1, per_rank)
    return setup._replace(max_running=per_rank if setup.max_running is None else min(setup.max_running, per_rank))


def kv_held(report: InspectReport, res: capacity.SequenceReservation):
    """tokens -> K/V bytes one sequence holds at that context (windows capped, state and encoder included)."""
    specs, fixed = report.specs, report.state_bytes_per_sequence + res.encoder_bytes

    def kv_at(tokens: int) -> int:
        return sum(s.bytes_at(tokens) for s in specs) + fixed

    return kv_at


def admit(inputs: PlanInputs, setup: serving.Setup, limit_memory: int, ranks: int, requested: int, scheduler: Batching | None = None) -> Admission:
    """Every limit on concurrent sequences (memory, the p95 ITL and TTFT SLOs, the runtime's
    maximum, the tenant quota) and the verdict on the requested load. The SLOs judge the p95s of
    the load the plan assumes (:func:`serving.at`: a closed loop of that many clients a rank, or
    Poisson arrivals with that many in flight); observed latencies are one measurement, so a TTFT
    SLO admits everything or nothing by them."""
    limits = {"memory": limit_memory}
    top = max(1, limit_memory // max(1, ranks))
    queue = inputs.queue_ms or 0.0
    seen: dict[int, serving.LoadFigures] = {}  # both SLO searches probe the same loads first

    def at(c: int) -> serving.LoadFigures:
        if c not in seen:
            seen[c] = serving.at(setup, c)
        return seen[c]

    if inputs.itl_slo_ms is not None:
        limits["latency_slo"] = capacity.largest_within_galloping(lambda c: at(c).tpot_p95_ms, inputs.itl_slo_ms, top) * ranks
    if inputs.ttft_slo_ms is not None:
        if inputs.observed:
            ttft = queue + (inputs.preprocessing_ms or 0.0) + (inputs.prefill_ms or 0.0) + (inputs.first_decode_ms or 0.0)
            limits["ttft_slo"] = 0 if ttft > inputs.ttft_slo_ms else limit_memory
        else:
            limits["ttft_slo"] = capacity.largest_within_galloping(lambda c: queue + at(c).ttft_p95_ms, inputs.ttft_slo_ms, top) * ranks
    seqs = inputs.max_num_seqs if scheduler is None else scheduler.seqs
    if seqs is not None:
        limits["runtime"] = seqs * ranks
    if inputs.tenant_quota is not None:
        limits["tenant_quota"] = inputs.tenant_quota
    return Admission(limits, *capacity.admission(requested, limits), requested)


def latency_at_load(inputs: PlanInputs, ctx: ContextBudget, cached: float, load: Load) -> tuple[latency.LatencyReport, latency.LatencyReport]:
    """(the roofline estimate, the latency the plan shows): the estimate at the load's figures, or
    the observed phases when they are given (then every phase must be)."""
    est = serving.report(load.figures, ctx.input_tokens, cached, load.generated, inputs.queue_ms or 0.0)
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


def recv_notes(inputs: PlanInputs, setup: serving.Setup, figures: serving.LoadFigures, per_replica_load: int) -> tuple[str, ...]:
    """What a receive interval other than 1 (SGLang) or batch waiting (TensorRT-LLM) does to this
    plan's figures (nothing under another engine's serving costs): the TTFT at this load less the
    same load's with the scheduler taking new requests every step."""
    return _recv_notes(inputs, setup, figures, per_replica_load) + _batch_wait_notes(inputs, setup, figures, per_replica_load)


def _extra_ttft_ms(setup: serving.Setup, figures: serving.LoadFigures, per_replica_load: int, **without) -> float:
    """The TTFT of ``figures`` less the same load's with ``setup`` changed by ``without`` (its open
    loop at the rate, or its closed loop of ``per_replica_load`` clients)."""
    other = setup._replace(**without)
    return figures.ttft_ms - (serving.open_at_rate(other) if setup.rate is not None else serving.closed(other, per_replica_load)).ttft_ms


def _batch_wait_notes(inputs: PlanInputs, setup: serving.Setup, figures: serving.LoadFigures, per_replica_load: int) -> tuple[str, ...]:
    n, ratio = inputs.batch_wait_iters, inputs.batch_wait_tokens_ratio
    if not n:
        return ()
    if batch_wait(inputs) == (0, 0.0):
        return (f"batch waiting {n} iterations: TensorRT-LLM's batch_wait_timeout_iters, not used under {serving.serving_engine(inputs.runtime, inputs.serving_engine)}'s serving costs",)
    extra = _extra_ttft_ms(setup, figures, per_replica_load, batch_wait=(0, 0.0))
    at_load = f"{extra:,.1f} ms more TTFT at this load" if extra > 0 else "none at this load: no other request decodes while one waits"
    until = f" or until the held prompts and the decodes reach {ratio:g} x the {setup.budget:,}-token budget" if ratio else ""
    return (
        f"TensorRT-LLM batch waiting (batch_wait_timeout_iters {n}, batch_wait_max_tokens_ratio {ratio:g}): while others decode, new prompts are held "
        f"for {n} iterations{until}, then scheduled together; a prompt waits the rest of that window (the first all of it); {at_load}",
    )


def _recv_notes(inputs: PlanInputs, setup: serving.Setup, figures: serving.LoadFigures, per_replica_load: int) -> tuple[str, ...]:
    r = inputs.recv_interval
    if r == 1:
        return ()
    if recv_interval(inputs) == 1:
        return (f"receive interval {r}: SGLang's --scheduler-recv-interval, not used under {serving.serving_engine(inputs.runtime, inputs.serving_engine)}'s serving costs (its scheduler takes new requests every step)",)
    extra = _extra_ttft_ms(setup, figures, per_replica_load, recv_interval=1)
    at_load = f"{extra:,.1f} ms more TTFT at this load" if extra > 0 else "none at this load: no other request decodes while one waits (an idle scheduler polls every loop)"
    return (
        f"SGLang --scheduler-recv-interval {r}: the scheduler polls for new requests once every {r} decode steps (SchedulerRecvSkipper), "
        f"so a new request waits (R - 1) / 2 = {(r - 1) / 2:g} decode steps of the others more on average before its prefill; {at_load}",
    )


def stack_note(device: Device) -> str:
    """What ROCm's own serving fixed costs (catalog ``fixed_cost_scale``, its source in
    ``fixed_cost_source``) and AMD's prefill miss do to an AMD plan's latency figures; short enough for the page's
    400-character cap on a shown value (pages/ui/safe_text.MAX_SHOWN)."""
    return (
        f"{device.name}: the serving fixed costs are {device.fixed_cost_scale:g}x CUDA's (ROCm's, fitted on 13 published SGLang runs on MI300X, "
        "adopted on 9 later vLLM runs on MI355X: docs/serving_fresh3.md); prefill runs at the efficiency fitted on NVIDIA GPUs, which those "
        f"AMD runs measure {AMD_PREFILL_SLOWER} slower, so TTFT is likely optimistic"
    )


def plan_notes(inputs: PlanInputs, report: InspectReport, device: Device, ctx: ContextBudget, sharing: bool) -> tuple[str, ...]:
    """The geometry's notes and what this plan assumes beyond them."""
    notes = list(report.notes)
    notes.append(f"latency estimate uses MFU {inputs.mfu:g} and MBU {inputs.mbu:g} on {device.name}")
    if device.vendor == "amd":
        notes.append(stack_note(device))
    if inputs.runtime == "sglang":
        notes.append("runtime sglang: memory is SGLang's static fraction of the free memory before the weights (mem_fraction_static), so the headroom and workspace inputs do not apply; the prefix is not deduplicated")
    elif inputs.runtime != "vllm" and any(sp.kind == "sliding" for sp in report.specs):
        notes.append("transformers keeps the last W positions of a sliding layer once decoding, but right after a prefill longer than W it briefly holds the whole prompt there (probe-measured); the reservation counts the steady W")
    if inputs.shared_prefix_tokens and not sharing:
        notes.append("the shared prefix is not deduplicated: only a paged engine (runtime vllm, dynamic or paged reservation) shares prefix blocks")
    if inputs.reservation == "static":
        notes.append(f"static reservation allocates the configured maximum ({ctx.maximum_context_tokens:,} tokens) per sequence")
    return tuple(notes)
