"""The sections of a :class:`~planner.plan.result.Plan`, each built from the stages' results.

:class:`~planner.plan.result.Plan` calls these the first time a section is read (see its
docstring), so each is a pure function of the plan's fields: no error is raised here (the
stages refused every bad input already) and no figure depends on when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from planner import accuracy, latency, speculative
from planner.plan import serving
from planner.prices import PRICE_TABLE
from planner.results import Result
from planner.units import MIB

if TYPE_CHECKING:
    from planner.engines.vllm_memory import MemoryBudget
    from planner.plan.engine_view import EngineView
    from planner.plan.result import Plan
    from planner.plan.sglang_view import SglangView

# why prefix sharing stops at a tenant (the JSON says it beside the figures)
SHARING_SCOPE = "per tenant (cross-tenant sharing leaks prefix presence through timing and can serve another tenant's derived state)"
COST_BASIS = "each price assumes the deployment does only that phase at the planned concurrency"
# The one cost basis of every page, the CLI and the PDF (Plan, Compare and Size alike): output
# tokens a second = sequences in flight x replicas / mean ITL at the planned load.
COST_BASIS_NAME = "output tokens/s at the planned concurrency (sequences / mean ITL)"


class Section(Result):
    """A frozen section of a plan: ``to_json()`` is its part of :meth:`Plan.summary`, each field
    under its own name in declaration order (nested dicts and tuples copied, so a caller's JSON
    is its own)."""

    __slots__ = ()

    def to_json(self) -> dict:
        names, nested = _layout(type(self))
        out = {name: getattr(self, name) for name in names}
        for name in nested:
            value = out[name]
            out[name] = list(value) if isinstance(value, tuple) else dict(value)
        return out


_LAYOUTS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _layout(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every field name, the names of dict and tuple fields) of a section class, found once."""
    hit = _LAYOUTS.get(cls)
    if hit is None:
        every = fields(cls)  # type: ignore[arg-type]
        hit = _LAYOUTS[cls] = (tuple(f.name for f in every), tuple(f.name for f in every if str(f.type).startswith(("dict", "tuple"))))
    return hit


def _num(x: float) -> float | int:
    """320.0 -> 320 so JSON shows the seed's integers; other floats rounded to 4 places."""
    return int(x) if float(x).is_integer() else round(x, 4)


def at_requests(n: int) -> str:
    """The label every latency figure carries: "at 1 request" or "at N requests"."""
    return "at 1 request" if n == 1 else f"at {n:,} requests"


def _kv_at_requested(plan: Plan) -> int:
    """K/V bytes the requested load holds on the busiest rank (shared prefix blocks once)."""
    return plan._sharing.per_replica_load * plan.reservation.total_bytes - plan._sharing.saved_per_replica


@dataclass(frozen=True, slots=True)
class KVCacheSection(Section):
    """K/V per token and per reserved sequence on one GPU, the memory ceiling on concurrent
    sequences and the verdict on the requested load."""

    # bytes per token of one sequence (growing layers; within the windows every layer counts)
    bytes_per_token_per_sequence: int
    bytes_per_token_within_windows: int
    mha_equivalent_bytes_per_reserved_sequence: int
    # one reserved sequence: K/V, recurrent state, encoder (cross-attention) tokens, their sum
    kv_bytes_per_reserved_sequence: int
    state_bytes_per_sequence: int
    encoder_bytes_per_sequence: int
    bytes_per_reserved_sequence: int
    mib_per_reserved_sequence: float | int  # 320.0 is written 320 (the seed's integers)
    reservation: str
    reserved_tokens_per_sequence: int
    paged_waste_bytes: int
    static_waste_bytes: int
    blocks_per_layer: dict[str, int]
    # the ceiling and the admission: every limit, the one that binds, the verdict
    requested_sequences: int
    maximum_sequences_by_memory: int
    admissible_sequences: int
    binding_constraint: str
    limits: dict[str, int]
    admitted: bool
    kv_bytes_at_requested: int  # the busiest replica, shared prefix blocks once
    # the cache the runtime keeps, and its dtype
    runtime: str
    kv_dtype: str
    kv_dtype_source: str
    steady_state_sequences: int  # memory alone in steady state (before vLLM's block reservation)
    engine: EngineView | None = None  # vLLM's view (runtime vllm, not static)
    admission_error: str | None = None  # the refusal, in the seed's words (None: admitted)
    sglang: SglangView | None = None  # SGLang's sizing (runtime sglang)

    def to_json(self) -> dict:
        """As the summary has always written it: ``engine``, ``admission_error`` and ``sglang`` only when set."""
        out = Section.to_json(self)
        if self.sglang is None:
            del out["sglang"]
        else:
            out["sglang"] = self.sglang.to_json()
        if self.engine is None:
            del out["engine"]
        else:
            out["engine"] = self.engine.to_json()
        if self.admission_error is None:
            del out["admission_error"]
        return out


def kv_cache_section(plan: Plan) -> KVCacheSection:
    report, res, ceiling, adm = plan.inspect, plan.reservation, plan._ceiling, plan._admission
    per_seq = res.total_bytes
    return KVCacheSection(
        bytes_per_token_per_sequence=report.kv_bytes_per_token,
        bytes_per_token_within_windows=sum(sp.bytes_per_token for sp in report.specs if sp.kind != "cross"),
        mha_equivalent_bytes_per_reserved_sequence=report.mha_equivalent_bytes_per_token * res.tokens,
        kv_bytes_per_reserved_sequence=res.kv_bytes,
        state_bytes_per_sequence=res.state_bytes,
        encoder_bytes_per_sequence=res.encoder_bytes,
        bytes_per_reserved_sequence=per_seq,
        mib_per_reserved_sequence=_num(per_seq / MIB),
        reservation=res.mode,
        reserved_tokens_per_sequence=res.tokens,
        paged_waste_bytes=res.waste_bytes if res.mode == "paged" else 0,
        static_waste_bytes=res.waste_bytes if res.mode == "static" else 0,
        blocks_per_layer=res.blocks,
        requested_sequences=adm.requested or plan.inputs.sequences,
        maximum_sequences_by_memory=ceiling.memory_max,
        admissible_sequences=adm.limit,
        binding_constraint=adm.binding,
        limits=adm.limits,
        admitted=adm.admitted,
        kv_bytes_at_requested=_kv_at_requested(plan),
        runtime=plan.inputs.runtime,
        kv_dtype=report.kv_dtype,
        kv_dtype_source=report.kv_dtype_source,
        steady_state_sequences=ceiling.steady_max,
        engine=ceiling.engine,
        admission_error=adm.error or None,
        sglang=ceiling.sglang,
    )


@dataclass(frozen=True, slots=True)
class CapacitySection(Section):
    """One GPU's memory from the device down to the K/V pool (bytes per GPU), and the replicas."""

    # the device less its headroom (runtime vllm: the total CUDA reports x --gpu-memory-utilization)
    device: str
    device_bytes: int
    device_source: str
    headroom_bp: int
    usable_bytes: int
    headroom_bytes: int
    # the fixed part, and what is left for K/V
    model_resident_bytes: int
    model_resident_source: str
    workspace_bytes: int
    fixed_bytes: int
    available_for_kv_bytes: int
    # replicas and the sequences each holds at the reserved length (per rank: an attention
    # data-parallel rank holds its own sequences, a pipeline stage its layers of all of them)
    gpu_count: int
    tp: int
    replicas: int
    sequences_per_replica: int
    pool_kv_tokens: int | None  # what a paged engine prints at start-up (None: nothing grows per token)
    max_concurrency_at_reserved_tokens: float
    # the requested load on the busiest replica
    kv_bytes_at_requested_load: int
    free_bytes_at_requested_load: int
    # the deployment's shape: data-parallel ranks and pipeline stages a replica, and a speculative proposer's weights
    dp: int = 1
    pp: int = 1
    ep: int = 1
    ranks: int = 1  # replicas x dp: the K/V pools the sequences spread over
    gpus_per_replica: int = 1
    draft_weights_bytes: int = 0
    # runtime vllm: vLLM's start-up budget term by term (each with its source), and the utilization
    gpu_memory_utilization: float | None = None
    budget: MemoryBudget | None = None

    def to_json(self) -> dict:
        out = Section.to_json(self)
        out["budget"] = None if self.budget is None else self.budget.summary()
        return out


def capacity_section(plan: Plan) -> CapacitySection:
    mem, inputs = plan._memory, plan.inputs
    budget = mem.budget
    device_bytes = budget.total_bytes if budget is not None else plan.device.memory_bytes
    device_source = budget.terms[0].source if budget is not None else f"{plan.device.name}: nominal {plan.device.memory_gib:g} GiB ({plan.device.source or 'catalog'})"
    per_token = plan.inspect.kv_bytes_per_token
    at_requested = _kv_at_requested(plan)
    return CapacitySection(
        device=plan.device.name,
        device_bytes=device_bytes,
        device_source=device_source,
        headroom_bp=inputs.headroom_bp,
        usable_bytes=mem.usable,
        headroom_bytes=device_bytes - mem.usable,
        model_resident_bytes=mem.resident,
        model_resident_source=mem.resident_source,
        workspace_bytes=mem.workspace,
        fixed_bytes=mem.fixed,
        available_for_kv_bytes=mem.available,
        gpu_count=inputs.gpu_count,
        tp=inputs.tp,
        replicas=mem.replicas,
        sequences_per_replica=plan._ceiling.per_replica,
        pool_kv_tokens=plan.sglang.capacity.max_total_num_tokens if plan.sglang is not None else mem.available // per_token if per_token else None,
        max_concurrency_at_reserved_tokens=round(mem.available / plan.reservation.total_bytes, 2),
        kv_bytes_at_requested_load=at_requested,
        free_bytes_at_requested_load=mem.available - at_requested,
        dp=inputs.dp,
        pp=inputs.pp,
        ep=inputs.ep,
        ranks=mem.ranks,
        gpus_per_replica=inputs.gpus_per_replica,
        draft_weights_bytes=mem.draft,
        gpu_memory_utilization=(10_000 - inputs.headroom_bp) / 10_000 if budget is not None else None,
        budget=budget,
    )


@dataclass(frozen=True, slots=True)
class RooflineSection(Section):
    """The step-time model's figures: the requested load on the busiest rank, labelled by what it
    assumes (``load_label``: "closed loop of 8 clients", "open loop (Poisson) at 2 requests/s (12 in
    flight)"), beside one request alone, the p95s the SLOs bound, the deployment's throughput at
    the load and at most (max throughput, offline), and how far such figures landed from
    published runs (``accuracy``: a band per figure, or the warning that none covers it)."""

    # the roof: efficiency factors, peak and bandwidth, and the arithmetic intensities under it
    mfu: float
    mbu: float
    peak_tflops: float  # in the compute dtype, with the device's compute efficiency
    bandwidth_gb_s: float
    ridge_flops_per_byte: float
    q_heads_per_gpu: int
    attention_layers: int
    prefill_intensity: float
    decode_intensity: float
    prefill_attainable_tflops: float
    decode_attainable_tflops: float
    # the load the latency is timed at, and whether it is admitted
    decode_concurrency: int
    load_label: str
    load_admitted: bool
    # inter-token latency: at the load (mean, with prefill chunks), alone, and decode-only
    itl_ms_at_concurrency: float
    itl_ms_at_1_request: float
    itl_ms_decode_only: float
    # prefill: alone, the wait the load adds (mean, p95), the all-at-once burst, the budget
    prefill_ms_at_1_request: float
    prefill_wait_ms: float
    prefill_wait_p95_ms: float
    burst_wait_ms: float
    burst_wait_max_ms: float
    prefill_utilisation: float
    prefill_capacity_per_s: float
    prefill_saturated: bool
    prefill_step_share: float
    prefill_chunk_tokens: int
    # the 95th percentiles the TTFT and ITL SLOs bound (of the load's kind)
    ttft_p95_ms: float
    itl_p95_ms: float
    prefill_steps: float
    mixed_prefill_tokens_per_step: float
    max_batched_tokens: int
    # every term of a decode step at the load and of a prefill alone (ms), and the interconnect
    ep: int
    decode_terms_ms: dict[str, float]
    prefill_terms_ms: dict[str, float]
    link_gb_s: float
    link_latency_us: float
    compute_efficiency: float
    # throughput of the whole deployment, and the TTFT SLO's verdict (None: no TTFT SLO)
    decode_tokens_per_second: float
    prefill_tokens_per_second: float
    ttft_slo_met: bool | None
    # the load model, the deployment's throughput under it and at most, the serving engine
    load_kind: str = serving.CLOSED
    request_rate: float | None = None
    output_tokens_per_second: float = 0.0  # the deployment at the load (requests' whole cycles)
    output_tokens_per_second_per_gpu: float = 0.0
    max_throughput_tokens_per_second_per_gpu: float = 0.0  # max throughput (offline): every admissible sequence running
    max_throughput_label: str = ""
    serving_engine: str = "vllm"
    weight_format: str = "bf16"
    compute_dtype: str = "bf16"
    # the shape: attention data-parallel ranks and pipeline stages a replica
    dp: int = 1
    pp: int = 1
    # speculative decoding (method "none": off)
    spec_method: str = "none"
    spec_tokens: int = 0
    spec_acceptance_length: float = 1.0
    spec_acceptance_source: str = ""
    spec_speedup: float = 1.0
    # planner / measured on published runs like this one: {"tpot"|"ttft"|"throughput": band text or the warning}
    accuracy: dict[str, str] = field(default_factory=dict)
    accuracy_caveat: str = ""  # when every run like this one missed a figure the same way by 1.5x or more at the median (accuracy.caveat)
    # what a closed-loop benchmark of benchmark_prompts prompts from the requested clients, started at
    # once, prints as its mean TTFT (serving.benchmark_ttft_ms; 0: not a closed loop)
    benchmark_prompts: int = 0
    benchmark_ttft_ms: float = 0.0
    # the same benchmark if every wave queues as the first (serving.waves_ttft_ms): at fixed lengths the
    # prompts that end together (SGLang), or within the API server's lag of each other, reach the scheduler
    # together; measured runs land between the two (docs/serving_fresh5.md). 0: not a closed loop
    benchmark_ttft_waves_ms: float = 0.0
    itl_p99_ms: float = 0.0  # the served model's 99th-percentile gap (continuous in the load like the p95)


def roofline_section(plan: Plan) -> RooflineSection:
    inputs, device, roof, est, lat, ctx = plan.inputs, plan.device, plan.roof, plan.estimate, plan.latency, plan.context
    load, fig, setup, cached = plan._load, plan._load.figures, plan._load.setup, plan._sharing.cached
    concurrency = load.concurrency
    served = latency.served(roof, setup.prompt, setup.cached, max(1, setup.generated), fig.per_rank, setup.kv_mid, setup.mid, setup.budget)
    peak = roof.peak_flops  # the device's peak in the compute dtype (build_roofline)
    prefill_ai = roof.prefill_intensity(ctx.input_tokens)
    decode_ai = roof.decode_intensity(concurrency, load.kv_mid, load.mid)
    queue = inputs.queue_ms or 0.0
    ttft_p95 = queue + fig.ttft_p95_ms  # an observed TTFT is one measurement: the SLO judges it as it is
    added = fig.ttft_ms - fig.preprocess_ms - served.prefill_one_ms  # what the load adds to a prompt's own prefill alone
    mem = plan._memory
    gpus = plan.inputs.gpu_count
    out_tps = fig.output_tokens_per_s * mem.ranks
    best, best_label = _most_throughput(plan, fig)
    spec = setup.spec
    texts, caveat = _accuracy(plan)
    bench_n, bench_ttft, bench_waves = _benchmark_ttft(plan, queue)
    return RooflineSection(
        mfu=inputs.mfu,
        mbu=inputs.mbu,
        peak_tflops=peak / 1e12,
        bandwidth_gb_s=device.bandwidth_gb_s,
        ridge_flops_per_byte=peak / device.bandwidth_bytes_s,
        q_heads_per_gpu=roof.q_heads,
        attention_layers=roof.attn_layers,
        prefill_intensity=prefill_ai,
        decode_intensity=decode_ai,
        prefill_attainable_tflops=min(peak, prefill_ai * device.bandwidth_bytes_s) / 1e12,
        decode_attainable_tflops=min(peak, decode_ai * device.bandwidth_bytes_s) / 1e12,
        decode_concurrency=concurrency,
        load_label=serving.label(fig, inputs.request_rate),
        load_admitted=plan._admission.admitted,
        itl_ms_at_concurrency=est.mean_inter_token_latency_ms,
        itl_ms_at_1_request=served.itl_one_ms,
        itl_ms_decode_only=fig.decode_step_ms,
        prefill_ms_at_1_request=served.prefill_one_ms,
        prefill_wait_ms=max(0.0, added),
        prefill_wait_p95_ms=max(0.0, added + fig.ttft_p95_ms - fig.ttft_ms),
        burst_wait_ms=served.burst_wait_ms,
        burst_wait_max_ms=served.burst_wait_max_ms,
        prefill_utilisation=served.prefill_utilisation,
        prefill_capacity_per_s=served.prefill_capacity_per_s,
        prefill_saturated=fig.saturated,
        prefill_step_share=fig.step_share,
        prefill_chunk_tokens=served.chunk_tokens,
        ttft_p95_ms=ttft_p95,
        itl_p95_ms=fig.tpot_p95_ms,
        itl_p99_ms=fig.tpot_p99_ms,
        prefill_steps=served.steps,
        mixed_prefill_tokens_per_step=served.mixed_prefill_tokens_per_step,
        max_batched_tokens=setup.budget,
        ep=roof.ep,
        decode_terms_ms={k: v * 1e3 for k, v in roof.decode_terms(concurrency, load.kv_mid, load.mid).items()},
        prefill_terms_ms={k: v * 1e3 for k, v in roof.prefill_terms(max(1, ctx.input_tokens - int(cached)), int(cached)).items()},
        link_gb_s=roof.link_bytes_s / 1e9,
        link_latency_us=roof.link_latency_s * 1e6,
        compute_efficiency=roof.compute_scale,
        decode_tokens_per_second=_decode_tokens_per_second(plan),
        prefill_tokens_per_second=est.prefill_tokens_per_second,
        ttft_slo_met=None if inputs.ttft_slo_ms is None else (lat.time_to_first_token_ms if inputs.observed else ttft_p95) <= inputs.ttft_slo_ms,
        load_kind=fig.kind,
        request_rate=inputs.request_rate,
        output_tokens_per_second=out_tps,
        output_tokens_per_second_per_gpu=out_tps / gpus if gpus else 0.0,
        max_throughput_tokens_per_second_per_gpu=best.output_tokens_per_s * mem.ranks / gpus if best and gpus else 0.0,
        max_throughput_label=best_label,
        serving_engine=serving.serving_engine(inputs.runtime, inputs.serving_engine),
        weight_format=plan._weight_format,
        compute_dtype=latency.kernel_dtype(plan._weight_format, device.generation, serving.serving_engine(inputs.runtime, inputs.serving_engine)),
        dp=inputs.dp,
        pp=inputs.pp,
        spec_method=inputs.spec_method,
        spec_tokens=spec.tokens if spec else 0,
        spec_acceptance_length=_spec_result(plan).acceptance_length if spec else 1.0,
        spec_acceptance_source=_spec_result(plan).acceptance_source if spec else "",
        spec_speedup=fig.speedup,
        accuracy=texts,
        accuracy_caveat=caveat,
        benchmark_prompts=bench_n,
        benchmark_ttft_ms=bench_ttft,
        benchmark_ttft_waves_ms=bench_waves,
    )


def _most_throughput(plan: Plan, fig: serving.LoadFigures) -> tuple[serving.LoadFigures | None, str]:
    """The max-throughput figures and their label: one offline wave (:func:`_max_throughput`),
    or the load's ``fig`` when its steady state (prefill chunks riding in the decode steps)
    beats that wave, which prefills every prompt before decoding any (not for a tie, as
    prefill-bound loads give). A load memory does not admit runs what the K/V pool holds at the
    mean context (stages.memory_running), more than the wave's admitted count: "at most" is never
    below the load's own figure."""
    best = _max_throughput(plan)
    if best is None:
        return None, f"{serving.OFFLINE}: memory admits no sequence"
    if fig.output_tokens_per_s > best.output_tokens_per_s * 1.001:
        return fig, f"{serving.label(fig, plan.inputs.request_rate)}: steady state beats one offline wave"
    return best, serving.label(best)


def _max_throughput(plan: Plan) -> serving.LoadFigures | None:
    """Every sequence memory (and the runtime's limit) admits on a rank running at once, no API server."""
    per_rank = plan._ceiling.per_replica
    if plan.inputs.max_num_seqs is not None:
        per_rank = min(per_rank, plan.inputs.max_num_seqs)
    return serving.offline(plan._load.setup, per_rank) if per_rank >= 1 else None


def _spec_result(plan: Plan):
    """Speculative decoding's step at the requested load (its acceptance length and source)."""
    s, setup = plan._load.setup.spec, plan._load.setup
    return speculative.speculative(setup.roof, s.method, plan._load.concurrency, setup.kv_mid, setup.mid, s.tokens, s.acceptance, s.draft_roof, s.draft_kv_mid)


def _benchmark_ttft(plan: Plan, queue_ms: float) -> tuple[int, float, float]:
    """A closed loop's benchmark: the prompts it sends in all (inputs.bench_prompts), the mean TTFT it
    prints (serving.benchmark_ttft_ms on the busiest rank, its share of the prompts as of the clients)
    and the same if every wave queues as the first (serving.waves_ttft_ms); (0, 0.0, 0.0) for another load."""
    fig, setup, inputs = plan._load.figures, plan._load.setup, plan.inputs
    if fig.kind != serving.CLOSED:
        return 0, 0.0, 0.0
    per_rank = max(1, round(inputs.bench_prompts * fig.per_rank / max(1, inputs.sequences)))
    first = serving.benchmark_ttft_ms(setup, fig.per_rank, per_rank, fig.ttft_ms)
    return inputs.bench_prompts, queue_ms + first, queue_ms + max(first, serving.waves_ttft_ms(setup, fig.per_rank, per_rank, fig.ttft_ms))


def _regime(plan: Plan) -> dict[str, str]:
    inputs, device = plan.inputs, plan.device
    moe = bool(plan.weights.num_experts and plan.weights.experts_per_token)
    engine = serving.serving_engine(inputs.runtime, inputs.serving_engine)
    return accuracy.regime(moe, inputs.gpus_per_replica, plan._load.concurrency * inputs.dp, device.generation, engine, device.node_gpus, plan._weight_format)


def _bands(reg: dict[str, str]) -> dict[str, accuracy.Band | None]:
    return {metric: accuracy.band(metric, reg) for metric in ("tpot", "ttft", "throughput")}


def accuracy_bands(plan: Plan) -> dict[str, accuracy.Band | None]:
    """Per figure ("tpot", "ttft", "throughput"), the accuracy band of published runs in this plan's
    regime (None where none covers it: :func:`planner.accuracy.band`)."""
    return _bands(_regime(plan))


def _accuracy(plan: Plan) -> tuple[dict[str, str], str]:
    """Per figure, the accuracy band of published runs in this plan's regime, or the warning that
    none covers it; and the headline's caveat where they all missed one way (:mod:`planner.accuracy`)."""
    reg = _regime(plan)
    bands = _bands(reg)
    texts = {metric: b.text if b is not None else accuracy.warning(metric, reg) for metric, b in bands.items()}
    said = accuracy.caveat(bands)
    adm = plan._admission
    if not adm.admitted and adm.binding == "memory" and (beyond := accuracy.beyond_limit_caveat()):
        said = f"{said} {beyond}".strip()
    return texts, said


def _decode_tokens_per_second(plan: Plan) -> float:
    """Output tokens a second of the whole deployment at the requested load (the estimate's ITL)."""
    itl = plan.estimate.mean_inter_token_latency_ms
    return plan._load.concurrency * plan._memory.ranks * 1000.0 / itl if itl else 0.0


@dataclass(frozen=True, slots=True)
class PrefixSection(Section):
    """Prefix sharing: a paged engine holds a tenant's shared prefix once per replica, in whole
    blocks; ``applies`` is False where nothing is shared (static or eager caches)."""

    # the shared prefix and the blocks it fills
    shared_prefix_tokens: int
    shared_blocks: int
    bytes_saved_per_extra_sequence: int
    memory_saved_at_requested_bytes: int  # all replicas, at the requested load
    applies: bool
    # what sharing adds to the memory ceiling
    maximum_sequences_with_sharing: int
    extra_sequences: int
    tenants: int
    scope: str
    # the prefill a cached prefix skips
    cached_prompt_tokens_expected: float
    hit_rate: float


def prefix_section(plan: Plan) -> PrefixSection:
    inputs, sharing, ceiling = plan.inputs, plan._sharing, plan._ceiling
    return PrefixSection(
        shared_prefix_tokens=inputs.shared_prefix_tokens,
        shared_blocks=sharing.shared_blocks,
        bytes_saved_per_extra_sequence=sharing.saved,
        memory_saved_at_requested_bytes=sharing.saved_per_replica * plan._memory.ranks,
        applies=sharing.applies,
        maximum_sequences_with_sharing=ceiling.shared_max,
        extra_sequences=ceiling.shared_max - ceiling.memory_max,
        tenants=inputs.tenants,
        scope=SHARING_SCOPE,
        cached_prompt_tokens_expected=sharing.cached,
        hit_rate=inputs.prefix_hit_rate,
    )


@dataclass(frozen=True, slots=True)
class CostSection(Section):
    """Cost per hour and per million tokens at the requested load; every figure but the price is
    None without a GPU-hour price (and the JSON then carries the price alone)."""

    gpu_hour_price: float | None
    # the deployment's price and its token rates (output: the estimate's ITL; input: its prefill rate)
    deployment_per_hour: float | None = None
    output_tokens_per_second: float | None = None
    input_tokens_per_second: float | None = None
    # per million tokens, each as if the deployment did only that phase (None at a zero rate)
    per_million_output_tokens: float | None = None
    per_million_input_tokens: float | None = None
    basis: str | None = None
    price_source: str | None = None  # "given", or the catalog row's source and date (planner/prices.py)

    def to_json(self) -> dict:
        return Section.to_json(self) if self.gpu_hour_price is not None else {"gpu_hour_price": None}


def gpu_hour_price(inputs) -> tuple[float | None, str | None]:
    """The GPU-hour price a plan uses and where it comes from: the one given, else the catalog's
    sourced default for a catalog GPU (planner/prices.py), else none (a custom device)."""
    if inputs.gpu_hour_price is not None:
        return inputs.gpu_hour_price, "given"
    from planner.hardware import get_device

    row = PRICE_TABLE.get(get_device(inputs.gpu).name) if inputs.device_gib is None else None
    if row is None:
        return None, None
    return row.usd_per_gpu_hour, f"catalog default: {row.source}, {row.as_of}"


def cost_section(plan: Plan) -> CostSection:
    inputs = plan.inputs
    price, source = gpu_hour_price(inputs)
    if price is None:
        return CostSection(gpu_hour_price=None)
    per_hour = price * inputs.gpu_count
    out_tps = _decode_tokens_per_second(plan)
    in_tps = plan.estimate.prefill_tokens_per_second * plan._memory.ranks
    return CostSection(
        gpu_hour_price=price,
        deployment_per_hour=per_hour,
        output_tokens_per_second=out_tps,
        input_tokens_per_second=in_tps,
        per_million_output_tokens=per_hour / (out_tps * 3600) * 1e6 if out_tps else None,
        per_million_input_tokens=per_hour / (in_tps * 3600) * 1e6 if in_tps else None,
        basis=f"{COST_BASIS_NAME}; {COST_BASIS}",
        price_source=source,
    )


@dataclass(frozen=True, slots=True)
class WorkSection(Section):
    """What the cache saves: the last decode step's attention and the token projections of the
    whole generation, without a cache and with one."""

    # attention at the last step, summed over the attention layers (4 n^2 d vs 4 n d a layer)
    context_at_last_step: int
    attention_flops_last_step_without_cache: int
    attention_flops_last_step_with_cache: int
    # token projections over the generation (P + (P+1) + ... vs P + N - 1)
    token_projections_without_cache: int
    token_projections_with_cache: int
    projection_ratio: float
    basis: str


def work_section(plan: Plan) -> WorkSection:
    prompt, generated = plan.context.input_tokens, plan._load.generated
    attn_layers, hidden = plan.roof.attn_layers, plan.roof.hidden
    final_ctx = prompt + generated
    attn_naive, attn_cached = latency.attention_flops_per_step(final_ctx, hidden)
    proj_naive, proj_cached = latency.generation_projections(prompt, generated)
    return WorkSection(
        context_at_last_step=final_ctx,
        attention_flops_last_step_without_cache=attn_naive * attn_layers,
        attention_flops_last_step_with_cache=attn_cached * attn_layers,
        token_projections_without_cache=proj_naive,
        token_projections_with_cache=proj_cached,
        projection_ratio=proj_naive / proj_cached,
        basis=f"{attn_layers} attention layers of d_model {hidden}; attention 4 n^2 d vs 4 n d per layer at the last step; projections P + (P+1) + ... vs P + N - 1",
    )


@dataclass(frozen=True, slots=True)
class ServeSection(Section):
    """The command that starts the plan's engine (runtime vllm): a ``--max-model-len`` that fits (the
    maximum context, else vLLM's estimate of the longest that fits, else the TP that holds the
    maximum context), ``--max-num-batched-tokens``, the replica layout, and why it says what it says."""

    applies: bool
    command: str = ""
    tp: int = 1
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    batching_source: str = ""
    replicas: int = 1
    layout: str = ""  # "one replica", "--data-parallel-size N" or "run N of these ..."
    note: str = ""


def serve_section(plan: Plan) -> ServeSection:
    from planner.engines.vllm.preview import serve_line

    inputs, engine, limits = plan.inputs, plan.kv_cache.engine, plan._batching
    if inputs.runtime != "vllm" or engine is None or not engine.applies or limits is None:
        return ServeSection(applies=False)
    replicas = plan._memory.replicas
    tp, length, note = inputs.tp, engine.serve_max_model_len, ""
    maximum = plan.context.maximum_context_tokens
    if length is None and engine.fits_at_tp:
        tp, length = engine.fits_at_tp, maximum
        note = f"--max-model-len {maximum:,} does not start at TP {inputs.tp} (vLLM: {engine.startup_refusal}); TP {tp} holds it"
    elif length is not None and length < maximum:
        note = f"--max-model-len {maximum:,} (the maximum context) does not start: vLLM: {engine.startup_refusal} This line starts with vLLM's estimate, {length:,} tokens" + (
            f"; --tensor-parallel-size {engine.fits_at_tp} holds the whole {maximum:,}" if engine.fits_at_tp else ""
        )
    elif length is None:
        return ServeSection(applies=True, tp=tp, replicas=replicas, batching_source=limits.source, note=f"vLLM does not start at any TP up to 64: {engine.startup_refusal or engine.refusal}")
    dtype = plan.kv_cache.kv_dtype if inputs.kv_dtype != "auto" else "auto"
    node = plan.device.node_gpus
    layout = "one replica" if replicas == 1 else f"--data-parallel-size {replicas}" if tp * replicas <= node else f"run {replicas} of these ({tp} GPU{'s' if tp > 1 else ''} each) behind a load balancer"
    command = serve_line(
        plan.model_name, tp=tp, max_model_len=length, max_num_batched_tokens=limits.tokens, replicas=replicas, node_gpus=node, gpu_memory_utilization=(10_000 - inputs.headroom_bp) / 10_000,
        kv_cache_dtype={"bf16": "bfloat16", "fp16": "float16"}.get(dtype, dtype), max_num_seqs=inputs.max_num_seqs, block_size=None if inputs.block_tokens == 16 else inputs.block_tokens,
        enforce_eager=inputs.enforce_eager, enable_lora=inputs.enable_lora, max_loras=inputs.max_loras, max_lora_rank=inputs.max_lora_rank, limit_mm_per_prompt=inputs.limit_mm_per_prompt,
        entry_point=inputs.entry_point,
    )  # fmt: skip
    return ServeSection(
        applies=True, command=command, tp=tp, max_model_len=length, max_num_batched_tokens=limits.tokens, max_num_seqs=limits.seqs, batching_source=limits.source,
        replicas=replicas, layout=layout, note=note,
    )  # fmt: skip
