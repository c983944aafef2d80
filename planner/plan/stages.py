"""``compute_plan``: the stages from inputs to a :class:`~planner.plan.result.Plan`."""

from __future__ import annotations

from operator import attrgetter

from planner import capacity, latency
from planner.context import COMPONENTS, ContextBudget, context_budget
from planner.errors import PlannerError
from planner.geometry import ModelGeometry
from planner.hardware import GIB, Device
from planner.kv import inspect_geometry
from planner.limits import ByteBudgetCache, size_of
from planner.plan.engine_view import engine_view
from planner.plan.inputs import PlanInputs, resolve_device
from planner.plan.model import PreparedModel
from planner.plan.result import Plan, _num, at_requests
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


def _ttft_limit(inputs: PlanInputs, roof, ctx, kv_at, limit_memory: int, replicas: int, sharing: bool, shared_blocks: int, load_at=None) -> int:
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
    cached = int(inputs.prefix_hit_rate * min(shared_blocks * inputs.block_tokens, ctx.input_tokens - 1)) if sharing else 0
    base = fixed + roof.prefill_s(ctx.input_tokens - cached, cached) * 1000.0
    first_kv = kv_at(ctx.input_tokens + 1)

    def ttft_ms(c: int) -> float:  # p95, with the wait behind the other prompts at c requests
        wait = load_at(c).wait_p95_ms if load_at else 0.0
        return base + wait + roof.decode_step_s(c, first_kv, ctx.input_tokens + 1) * 1000.0

    hi = max(1, limit_memory // max(1, replicas))
    if ttft_ms(1) > slo:
        return 0
    lo = 1
    while lo < hi:  # largest c with ttft(c) <= slo (the first decode step grows with c)
        m = (lo + hi + 1) // 2
        if ttft_ms(m) <= slo:
            lo = m
        else:
            hi = m - 1
    return lo * replicas


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
    """Compute the whole plan.

    Raises:
        PlannerError: reserved context above the model maximum, fixed memory above usable
            memory, an invalid tensor-parallel size, or any other invalid combination.
    """
    geo = model.geometry
    max_ctx = inputs.max_context or geo.max_position_embeddings
    if max_ctx is None:
        raise PlannerError("max_context", None, "the config has no max_position_embeddings: give the maximum context")
    ctx = _context(inputs, max_ctx)

    device = resolve_device(inputs)
    kv_dtype, kv_source = model.kv_dtype(inputs.kv_dtype)
    report = inspect_geometry(geo, kv_dtype, inputs.tp, ctx.reserved_total_tokens, inputs.runtime, inputs.mtp, kv_source)
    specs = report.specs
    weights = model.weights(inputs.weight_dtype)
    res = capacity.reserve(specs, inputs.reservation, ctx.reserved_total_tokens, ctx.maximum_context_tokens, inputs.block_tokens, report.state_bytes_per_sequence, inputs.encoder_tokens)
    per_seq = res.total_bytes

    # ---- memory per GPU
    device_bytes = device.memory_bytes
    usable = capacity.usable_bytes(device_bytes, inputs.headroom_bp)
    if inputs.model_resident_gib is not None:
        resident = int(inputs.model_resident_gib * GIB)
        resident_source = "given"
    else:
        resident = -(-weights.bytes // inputs.tp)
        resident_source = f"weights estimate ({weights.source}) / tp {inputs.tp}"
    workspace = int(inputs.workspace_gib * GIB)
    fixed = resident + workspace
    if fixed > usable:
        culprit = ("workspace_gib", inputs.workspace_gib) if workspace > usable else ("model_resident_gib", round(resident / GIB, 3))
        raise PlannerError(
            *culprit,
            f"fixed memory {fixed / GIB:,.2f} GiB (model {resident / GIB:,.2f} + workspace {workspace / GIB:,.2f}) exceeds usable {usable / GIB:,.2f} GiB "
            f"({device.name} {device.memory_gib:g} GiB less {inputs.headroom_bp / 100:g} % headroom); use more GPUs (tp), a smaller weight dtype or a larger device",
        )
    available = usable - fixed
    replicas = inputs.gpu_count // inputs.tp
    per_replica = capacity.max_sequences(available, per_seq)
    memory_max = per_replica * replicas

    # ---- prefix sharing: a paged engine (runtime vllm) holds whole shared blocks once per tenant
    # and replica; a static cache or transformers' eager cache shares nothing
    if inputs.shared_prefix_tokens > ctx.input_tokens:
        raise PlannerError("shared_prefix_tokens", inputs.shared_prefix_tokens, f"the shared prefix cannot exceed the input ({ctx.input_tokens:,} tokens)")
    sharing = bool(inputs.shared_prefix_tokens) and inputs.reservation != "static" and inputs.runtime == "vllm"
    shared_blocks, saved = capacity.shared_prefix_bytes(specs, inputs.shared_prefix_tokens, inputs.block_tokens) if sharing else (0, 0)
    per_rep_seqs = -(-inputs.sequences // replicas)  # the requested load, spread over the replicas
    copies = min(inputs.tenants, per_rep_seqs)  # each replica holds each of its tenants' prefix once
    saved_per_replica = max(0, per_rep_seqs - copies) * saved
    shared_max = capacity.max_sequences_shared(available, per_seq, saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
    limit_memory = shared_max if saved else memory_max
    steady_max = memory_max
    # a static reservation is an explicit non-paged allocator: vLLM's block admission does not apply
    engine = engine_view(model, inputs, ctx, available) if inputs.runtime == "vllm" and inputs.reservation != "static" else None
    if engine is not None and engine["applies"] and engine["refusal"]:
        per_replica = memory_max = shared_max = limit_memory = 0
    elif engine is not None and engine["applies"]:
        # runtime vllm admits as vLLM does: a request reserves its blocks for all reserved tokens
        engine_pool = engine["num_blocks"] * engine["bytes_per_block"]
        per_replica = engine["max_sequences_per_replica"]
        memory_max = per_replica * replicas
        shared_max = capacity.max_sequences_shared(engine_pool, engine["bytes_per_request"], saved, min(inputs.tenants, per_replica or 1)) * replicas if saved else memory_max
        limit_memory = shared_max if saved else memory_max

    # ---- roofline
    compute_dtype = "fp8" if inputs.weight_dtype == "fp8" or "fp8" in weights.dtype_label else "bf16"
    if weights.num_experts and inputs.tp % inputs.ep:
        raise PlannerError("ep", inputs.ep, f"expert parallelism must divide tp {inputs.tp} (the experts of one replica spread over ep of its GPUs)")
    roof = build_roofline(inputs, geo, weights, specs, device, resident, compute_dtype)
    heads_gpu, attn_layers = roof.q_heads, roof.attn_layers  # max(1, heads // tp); layers with attention (not cross)
    def kv_at(tokens: int) -> int:
        return sum(s.bytes_at(tokens) for s in specs) + report.state_bytes_per_sequence + res.encoder_bytes

    generated = inputs.generated_tokens or inputs.output_tokens
    mid = ctx.input_tokens + generated // 2
    kv_mid = kv_at(mid)

    # prefill skips the cached whole blocks (never the last prompt token, which yields the first logits)
    cached = inputs.prefix_hit_rate * min(shared_blocks * inputs.block_tokens, ctx.input_tokens - 1) if sharing else 0.0

    def load_at(c: int) -> latency.Served:
        return latency.served(roof, ctx.input_tokens, int(cached), generated, c, kv_mid, mid, inputs.max_batched_tokens)

    def itl_ms(c: int) -> float:  # p95 of the gaps between tokens (an SLO is a percentile)
        return load_at(c).itl_p95_ms

    limits = {"memory": limit_memory}
    if inputs.itl_slo_ms is not None:
        hi = max(1, limit_memory)
        if itl_ms(1) > inputs.itl_slo_ms:
            limits["latency_slo"] = 0
        else:
            lo = 1
            while lo < hi:  # largest c with itl(c) <= slo (itl grows with c)
                m = (lo + hi + 1) // 2
                if itl_ms(m) <= inputs.itl_slo_ms:
                    lo = m
                else:
                    hi = m - 1
            limits["latency_slo"] = lo * replicas
    if inputs.ttft_slo_ms is not None:
        limits["ttft_slo"] = _ttft_limit(inputs, roof, ctx, kv_at, limit_memory, replicas, sharing, shared_blocks, load_at)
    if inputs.max_num_seqs is not None:
        limits["runtime"] = inputs.max_num_seqs * replicas
    if inputs.tenant_quota is not None:
        limits["tenant_quota"] = inputs.tenant_quota
    admitted, limit, binding, error = capacity.admission(inputs.sequences, limits)

    # latency at the requested load on the busiest replica (the same ceil split as memory), even
    # when the load is not admitted: the plan marks it, never silently shows a smaller load
    concurrency = per_rep_seqs
    load = load_at(concurrency)
    est = latency.estimate(
        roof,
        ctx.input_tokens,
        cached,
        generated,
        concurrency,
        kv_at,
        queue_ms=inputs.queue_ms or 0.0,
        preprocessing_ms=inputs.preprocessing_ms or 0.0,
        load=load,
    )
    if inputs.observed:
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
        lat = latency.observe(obs)
    else:
        lat = est

    # ---- pool view (what a paged engine prints at start-up)
    full_per_token = report.kv_bytes_per_token
    pool_tokens = available // full_per_token if full_per_token else None
    kv_cache = {
        "bytes_per_token_per_sequence": report.kv_bytes_per_token,
        "bytes_per_token_within_windows": sum(sp.bytes_per_token for sp in specs if sp.kind != "cross"),
        "mha_equivalent_bytes_per_reserved_sequence": report.mha_equivalent_bytes_per_token * res.tokens,
        "kv_bytes_per_reserved_sequence": res.kv_bytes,
        "state_bytes_per_sequence": res.state_bytes,
        "encoder_bytes_per_sequence": res.encoder_bytes,
        "bytes_per_reserved_sequence": per_seq,
        "mib_per_reserved_sequence": _num(per_seq / (1 << 20)),
        "reservation": res.mode,
        "reserved_tokens_per_sequence": res.tokens,
        "paged_waste_bytes": res.waste_bytes if res.mode == "paged" else 0,
        "static_waste_bytes": res.waste_bytes if res.mode == "static" else 0,
        "blocks_per_layer": res.blocks,
        "requested_sequences": inputs.sequences,
        "maximum_sequences_by_memory": memory_max,
        "admissible_sequences": limit,
        "binding_constraint": binding,
        "limits": limits,
        "admitted": admitted,
        "kv_bytes_at_requested": per_rep_seqs * per_seq - saved_per_replica,
        "runtime": inputs.runtime,
        "kv_dtype": kv_dtype,
        "kv_dtype_source": kv_source,
        "steady_state_sequences": steady_max,
    }
    if engine is not None:
        kv_cache["engine"] = engine
    if error:
        kv_cache["admission_error"] = error
    cap = {
        "device": device.name,
        "device_bytes": device_bytes,
        "headroom_bp": inputs.headroom_bp,
        "usable_bytes": usable,
        "headroom_bytes": device_bytes - usable,
        "model_resident_bytes": resident,
        "model_resident_source": resident_source,
        "workspace_bytes": workspace,
        "fixed_bytes": fixed,
        "available_for_kv_bytes": available,
        "gpu_count": inputs.gpu_count,
        "tp": inputs.tp,
        "replicas": replicas,
        "sequences_per_replica": per_replica,
        "pool_kv_tokens": pool_tokens,
        "max_concurrency_at_reserved_tokens": round(available / per_seq, 2),
        "kv_bytes_at_requested_load": kv_cache["kv_bytes_at_requested"],
        "free_bytes_at_requested_load": available - kv_cache["kv_bytes_at_requested"],
    }
    peak = device.peak_flops(compute_dtype)
    ridge = peak / device.bandwidth_bytes_s
    prefill_ai = roof.prefill_intensity(ctx.input_tokens)
    decode_ai = roof.decode_intensity(concurrency, kv_mid, mid)
    # the estimate's p95 swaps the mean wait for its p95 (an observed TTFT is one measurement: the SLO judges it as it is)
    ttft_p95 = est.time_to_first_token_ms - load.wait_ms + load.wait_p95_ms
    roofline = {
        "mfu": inputs.mfu,
        "mbu": inputs.mbu,
        "peak_tflops": peak / 1e12,
        "bandwidth_gb_s": device.bandwidth_gb_s,
        "ridge_flops_per_byte": ridge,
        "q_heads_per_gpu": heads_gpu,
        "attention_layers": attn_layers,
        "prefill_intensity": prefill_ai,
        "decode_intensity": decode_ai,
        "prefill_attainable_tflops": min(peak, prefill_ai * device.bandwidth_bytes_s) / 1e12,
        "decode_attainable_tflops": min(peak, decode_ai * device.bandwidth_bytes_s) / 1e12,
        "decode_concurrency": concurrency,
        "load_label": at_requests(concurrency),
        "load_admitted": admitted,
        "itl_ms_at_concurrency": est.mean_inter_token_latency_ms,
        "itl_ms_at_1_request": load.itl_one_ms,
        "itl_ms_decode_only": load.itl_decode_ms,
        "prefill_ms_at_1_request": load.prefill_one_ms,
        "prefill_wait_ms": load.wait_ms,
        "prefill_wait_p95_ms": load.wait_p95_ms,
        "burst_wait_ms": load.burst_wait_ms,
        "burst_wait_max_ms": load.burst_wait_max_ms,
        "prefill_utilisation": load.prefill_utilisation,
        "prefill_capacity_per_s": load.prefill_capacity_per_s,
        "prefill_saturated": load.saturated,
        "prefill_step_share": load.prefill_step_share,
        "prefill_chunk_tokens": load.chunk_tokens,
        "ttft_p95_ms": ttft_p95,
        "itl_p95_ms": load.itl_p95_ms,
        "prefill_steps": load.steps,
        "mixed_prefill_tokens_per_step": load.mixed_prefill_tokens_per_step,
        "max_batched_tokens": inputs.max_batched_tokens,
        "ep": roof.ep,
        "decode_terms_ms": {k: v * 1e3 for k, v in roof.decode_terms(concurrency, kv_mid, mid).items()},
        "prefill_terms_ms": {k: v * 1e3 for k, v in roof.prefill_terms(max(1, ctx.input_tokens - int(cached)), int(cached)).items()},
        "link_gb_s": roof.link_bytes_s / 1e9,
        "link_latency_us": roof.link_latency_s * 1e6,
        "compute_efficiency": roof.compute_scale,
        "decode_tokens_per_second": concurrency * replicas * 1000.0 / est.mean_inter_token_latency_ms if est.mean_inter_token_latency_ms else 0.0,
        "prefill_tokens_per_second": est.prefill_tokens_per_second,
        "ttft_slo_met": None if inputs.ttft_slo_ms is None else (lat.time_to_first_token_ms if inputs.observed else ttft_p95) <= inputs.ttft_slo_ms,
    }
    prefix = {
        "shared_prefix_tokens": inputs.shared_prefix_tokens,
        "shared_blocks": shared_blocks,
        "bytes_saved_per_extra_sequence": saved,
        "memory_saved_at_requested_bytes": saved_per_replica * replicas,
        "applies": sharing,
        "maximum_sequences_with_sharing": shared_max,
        "extra_sequences": shared_max - memory_max,
        "tenants": inputs.tenants,
        "scope": "per tenant (cross-tenant sharing leaks prefix presence through timing and can serve another tenant's derived state)",
        "cached_prompt_tokens_expected": cached,
        "hit_rate": inputs.prefix_hit_rate,
    }
    cost: dict = {"gpu_hour_price": inputs.gpu_hour_price}
    if inputs.gpu_hour_price is not None:
        per_hour = inputs.gpu_hour_price * inputs.gpu_count
        out_tps = roofline["decode_tokens_per_second"]
        in_tps = est.prefill_tokens_per_second * replicas
        cost.update(
            deployment_per_hour=per_hour,
            output_tokens_per_second=out_tps,
            input_tokens_per_second=in_tps,
            per_million_output_tokens=per_hour / (out_tps * 3600) * 1e6 if out_tps else None,
            per_million_input_tokens=per_hour / (in_tps * 3600) * 1e6 if in_tps else None,
            basis="each price assumes the deployment does only that phase at the planned concurrency",
        )
    final_ctx = ctx.input_tokens + generated
    attn_naive, attn_cached = latency.attention_flops_per_step(final_ctx, geo.hidden_size)
    proj_naive, proj_cached = latency.generation_projections(ctx.input_tokens, generated)
    work = {
        "context_at_last_step": final_ctx,
        "attention_flops_last_step_without_cache": attn_naive * attn_layers,
        "attention_flops_last_step_with_cache": attn_cached * attn_layers,
        "token_projections_without_cache": proj_naive,
        "token_projections_with_cache": proj_cached,
        "projection_ratio": proj_naive / proj_cached,
        "basis": f"{attn_layers} attention layers of d_model {geo.hidden_size}; attention 4 n^2 d vs 4 n d per layer at the last step; projections P + (P+1) + ... vs P + N - 1",
    }
    notes = list(report.notes)
    notes.append(f"latency estimate uses MFU {inputs.mfu:g} and MBU {inputs.mbu:g} on {device.name}")
    if inputs.runtime != "vllm" and any(sp.kind == "sliding" for sp in specs):
        notes.append("transformers keeps the last W positions of a sliding layer once decoding, but right after a prefill longer than W it briefly holds the whole prompt there (probe-measured); the reservation counts the steady W")
    if inputs.shared_prefix_tokens and not sharing:
        notes.append("the shared prefix is not deduplicated: only a paged engine (runtime vllm, dynamic or paged reservation) shares prefix blocks")
    if inputs.reservation == "static":
        notes.append(f"static reservation allocates the configured maximum ({ctx.maximum_context_tokens:,} tokens) per sequence")
    return Plan(
        inputs=inputs,
        device=device,
        context=ctx,
        inspect=report,
        weights=weights,
        reservation=res,
        kv_cache=kv_cache,
        capacity=cap,
        latency=lat,
        estimate=est,
        roofline=roofline,
        prefix=prefix,
        cost=cost,
        work=work,
        notes=tuple(notes),
        roof=roof,
    )
