"""The plan: every control in :class:`PlanInputs`, every number in :class:`Plan`.

``compute_plan(inputs, model)`` is the single function behind the CLI, the app, share links
and PDF reports. A :class:`PreparedModel` (geometry + parameter counts) is built once per
config and cached, so a plan itself is pure integer and float arithmetic (microseconds).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner import capacity, latency, limits
from planner.context import COMPONENTS, ContextBudget, context_budget
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, config_hash, parse_geometry
from planner.hardware import CATALOG, DEFAULT_GPU, GIB, Device, custom_device, get_device
from planner.kv import InspectReport, inspect_geometry, resolve_kv_dtype
from planner.limits import ByteBudgetCache, size_of
from planner.results import Result
from planner.weights import WeightsEstimate, check_parameter_counts, estimate_weights

# The seed's runnable case: a dense 32-layer decoder with 8 KV heads of 128 (Llama-3.1-8B shape)
# with a 4,096-token context on a 16 GiB device.
EXAMPLE_CONFIG: dict = {
    "_name_or_path": "example/dense-32L-8kv-128",
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


class PlanInputs(BaseModel):
    """Every control of a plan. Defaults are a meaningful plan for a preset on one H100."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system_tokens: int = Field(default=128, ge=0, le=1 << 31)
    tool_tokens: int = Field(default=256, ge=0, le=1 << 31)
    retrieval_tokens: int = Field(default=512, ge=0, le=1 << 31)
    history_tokens: int = Field(default=640, ge=0, le=1 << 31)
    user_tokens: int = Field(default=512, ge=0, le=1 << 31)
    input_tokens: int | None = Field(default=None, ge=1, le=1 << 31)  # overrides the components
    output_tokens: int = Field(default=512, ge=1, le=1 << 31)
    encoder_tokens: int = Field(default=0, ge=0, le=1 << 24)  # image tokens cached by cross-attention layers
    max_context: int | None = Field(default=None, ge=1, le=1 << 31)  # None: the config's
    kv_dtype: Literal["auto", "fp32", "fp16", "bf16", "fp8", "int8", "int4"] = "auto"  # auto: as the checkpoint declares (vLLM's --kv-cache-dtype auto)
    mtp: bool = False  # count the MTP (next-token-prediction) layers an engine caches with MTP speculative decoding
    weight_dtype: Literal["auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "auto"
    runtime: Literal["vllm", "transformers", "transformers-latent"] = "vllm"
    vllm_version: Literal["0.10", "0.19", "0.24", "0.33"] = "0.33"  # whose start-up sizing runtime vllm follows
    reservation: Literal["dynamic", "static", "paged"] = "dynamic"
    block_tokens: int = Field(default=16, ge=1, le=4096)
    gpu: str = DEFAULT_GPU
    device_gib: float | None = Field(default=None, ge=limits.MIN_DEVICE_GIB, le=4096)  # custom device size
    device_bandwidth_gb_s: float | None = Field(default=None, ge=limits.MIN_BANDWIDTH_GB_S, le=100_000)  # custom device HBM bandwidth
    device_bf16_tflops: float | None = Field(default=None, ge=limits.MIN_TFLOPS, le=100_000)  # custom device dense peak
    gpu_count: int = Field(default=1, ge=1, le=4096)
    tp: int = Field(default=1, ge=1, le=4096)
    ep: int = Field(default=1, ge=1, le=4096)  # expert parallelism within a replica (MoE only)
    max_batched_tokens: int = Field(default=latency.DEFAULT_BATCH_TOKENS, ge=1, le=1 << 24)  # scheduler token budget per step
    headroom_bp: int = Field(default=1000, ge=0, le=9999)
    model_resident_gib: float | None = Field(default=None, ge=0, le=100_000)  # None: weights estimate / tp
    workspace_gib: float = Field(default=1.0, ge=0, le=100_000)
    sequences: int = Field(default=8, ge=1, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=10_000_000)  # runtime hard limit
    tenant_quota: int | None = Field(default=None, ge=1, le=10_000_000)
    itl_slo_ms: float | None = Field(default=None, gt=0, le=1e7)
    ttft_slo_ms: float | None = Field(default=None, gt=0, le=1e9)
    shared_prefix_tokens: int = Field(default=0, ge=0, le=1 << 31)
    prefix_hit_rate: float = Field(default=0.0, ge=0, le=1)  # nothing assumed cached until the user says
    tenants: int = Field(default=1, ge=1, le=1_000_000)  # prefixes are shared within a tenant only
    gpu_hour_price: float | None = Field(default=None, ge=0, le=1e6)
    mfu: float = Field(default=latency.DEFAULT_MFU, ge=limits.MIN_UTILISATION, le=1)
    mbu: float = Field(default=latency.DEFAULT_MBU, ge=limits.MIN_UTILISATION, le=1)
    queue_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    preprocessing_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    prefill_ms: float | None = Field(default=None, ge=limits.MIN_PHASE_MS, le=1e9, allow_inf_nan=False)
    first_decode_ms: float | None = Field(default=None, ge=limits.MIN_PHASE_MS, le=1e9, allow_inf_nan=False)
    remaining_decode_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    generated_tokens: int | None = Field(default=None, ge=1, le=1 << 31)

    @model_validator(mode="after")
    def _check(self) -> PlanInputs:
        problem = _cross_field_problem(self.gpu, self.device_gib, self.gpu_count, self.tp)
        if problem:
            raise ValueError(f"{problem[0]}={problem[1]!r}: {problem[2]}")
        return self

    @property
    def observed(self) -> bool:
        """Latency comes from observations when any measured phase is given (then all must be)."""
        return any(v is not None for v in (self.prefill_ms, self.first_decode_ms, self.remaining_decode_ms))


def _cross_field_problem(gpu: object, device_gib: object, gpu_count: object, tp: object) -> tuple[str, object, str] | None:
    if isinstance(gpu_count, int) and isinstance(tp, int) and tp >= 1 and gpu_count % tp:
        return "gpu_count", gpu_count, f"must be a multiple of tp {tp} (each replica uses tp GPUs)"
    if device_gib is None and str(gpu).lower() not in {k.lower() for k in CATALOG}:
        return "gpu", gpu, f"unknown GPU; known: {', '.join(CATALOG)} (or give a custom device size)"
    return None


def make_inputs(**values: object) -> PlanInputs:
    """Validate plan inputs, turning pydantic's errors into one :class:`PlannerError`.

    Raises:
        PlannerError: the first invalid field, its value and why.
    """
    try:
        return PlanInputs(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err.get("loc"):  # the cross-field check: every field alone was valid, so int() is safe
            problem = _cross_field_problem(values.get("gpu", DEFAULT_GPU), values.get("device_gib"), int(values.get("gpu_count", 1)), int(values.get("tp", 1)))
            if problem:
                raise PlannerError(*problem) from None
        field = ".".join(str(p) for p in err.get("loc", ())) or "inputs"
        raise PlannerError(field, err.get("input"), err.get("msg", "invalid").replace("Value error, ", "")) from None


EXAMPLE_INPUTS = PlanInputs(
    device_gib=16.0,
    headroom_bp=1000,
    model_resident_gib=4.0,
    workspace_gib=1.0,
    sequences=8,
    queue_ms=20.0,
    preprocessing_ms=10.0,
    prefill_ms=400.0,
    first_decode_ms=20.0,
    remaining_decode_ms=2560.0,
    generated_tokens=129,
)


class PreparedModel(BaseModel):
    """A parsed config: geometry and parameter counts, computed once."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: dict
    geometry: ModelGeometry
    repo_id: str | None = None
    parameter_counts: dict[str, int] | None = None  # safetensors dtype -> elements (Hub metadata)
    quantization: dict | None = None  # hf_quant_config.json, when config.json has no quantization_config

    def kv_dtype(self, requested: str) -> tuple[str, str]:
        """(KV dtype, source): ``requested``, or what ``"auto"`` resolves to for this checkpoint."""
        return resolve_kv_dtype(requested, self.config, self.quantization)

    def weights(self, weight_dtype: str) -> WeightsEstimate:
        key = (self.geometry.config_hash, weight_dtype, tuple(sorted((self.parameter_counts or {}).items())))
        hit = _WEIGHTS_CACHE.get(key)
        if hit is None:
            hit = estimate_weights(self.config, self.geometry, weight_dtype)
            if weight_dtype == "auto" and self.parameter_counts:
                hit = measured_weights(hit, self.parameter_counts)
            _WEIGHTS_CACHE.put(key, hit)
        return hit  # type: ignore[return-value]


_WEIGHTS_CACHE = ByteBudgetCache(4 << 20)  # bounded in bytes (planner/limits.py)

# bytes per element of safetensors dtypes (packed 4-bit formats are stored in U8/I32 containers,
# so element counts x container size are the exact stored bytes)
SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}


def measured_weights(estimate: WeightsEstimate, counts: dict[str, int]) -> WeightsEstimate:
    """Weights bytes from the checkpoint's tensor dtypes and element counts (the Hub's metadata)."""
    size = sum(n * SAFETENSORS_BYTES.get(str(dtype).upper(), 2) for dtype, n in counts.items())
    label = "+".join(sorted(counts))
    return estimate.model_copy(update={"bytes": size, "expert_bytes": int(estimate.expert_bytes * size / estimate.bytes) if estimate.bytes else 0, "bits_per_param": size * 8 / max(1, estimate.total_params), "dtype_label": f"checkpoint ({label})", "source": "safetensors metadata (exact stored tensor bytes)"})


_PREPARED = ByteBudgetCache(32 << 20)  # parsed configs by content hash, bounded in bytes


def prepare_model(config: dict, parameter_counts: dict[str, int] | None = None, quantization: dict | None = None) -> PreparedModel:
    """Parse and cache a config (by content hash), with the checkpoint's parameter counts if known.

    ``quantization`` is the checkpoint's ``hf_quant_config.json`` (read when config.json has no
    ``quantization_config``); ``kv_dtype="auto"`` resolves from it.

    Raises:
        ConfigError: the config is invalid.
    """
    quantization = quantization if "quantization_config" not in config else None
    parameter_counts = check_parameter_counts(parameter_counts)  # Hub numbers pass the config's bounds
    key = config_hash({"config": config, "counts": parameter_counts}) + (config_hash(quantization) if quantization else "")
    hit = _PREPARED.get(key)
    if hit is None:
        geo = parse_geometry(config)
        repo = config.get("_name_or_path")
        hit = PreparedModel(config=config, geometry=geo, repo_id=repo if isinstance(repo, str) and repo else None, parameter_counts=parameter_counts or None, quantization=quantization)
        hit.weights("auto")  # the weights fields are checked here too, so a bad config fails on load
        _PREPARED.put(key, hit)
    return hit  # type: ignore[return-value]


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


def resolve_device(inputs: PlanInputs) -> Device:
    """The catalog GPU, or a custom device (its bandwidth and peak default to 1,000 GB/s and 100 TFLOP/s)."""
    if inputs.device_gib is None:
        return get_device(inputs.gpu)
    return custom_device(inputs.device_gib, inputs.device_bandwidth_gb_s or 1000.0, inputs.device_bf16_tflops or 100.0)


def at_requests(n: int) -> str:
    """The label every latency figure carries: "at 1 request" or "at N requests"."""
    return "at 1 request" if n == 1 else f"at {n:,} requests"


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


# the plan's resolved KV dtype as vLLM's --kv-cache-dtype ("auto" would re-read the checkpoint,
# which may declare fp8 where the plan asked for 16-bit)
VLLM_KV_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}


def memory_basis(plan: Plan) -> str:
    """Whose reservation the memory figure counts, for every place that shows it:
    "vLLM 0.33 block reservation; steady state 179" under runtime vllm, else "steady state"."""
    engine = plan.kv_cache.get("engine")
    if engine and engine.get("applies"):
        return f"vLLM {engine['vllm_version']} block reservation; steady state {plan.kv_cache['steady_state_sequences']:,}"
    return f"{plan.inputs.runtime} steady state"


def engine_view(model: PreparedModel, inputs: PlanInputs, ctx: ContextBudget, available: int) -> dict:
    """vLLM's view of the plan: the per-request reservation it admits with (at the reserved
    tokens), the start-up log it prints (at the maximum context), and why it differs from the
    planner's steady-state figure. ``applies`` is False when vLLM cannot run this cache at all.
    Memoised (a plan's load does not change it); each call gets its own copy."""
    key = (model.geometry.config_hash, inputs.vllm_version, inputs.kv_dtype, inputs.tp, inputs.block_tokens, available, ctx.maximum_context_tokens, ctx.reserved_total_tokens)
    hit = _ENGINE_VIEWS.get(key)
    if hit is None:
        hit = _engine_view(model, inputs, ctx, available)
        _ENGINE_VIEWS.put(key, hit)
    out = dict(hit)  # type: ignore[call-overload]
    if "log_lines" in out:
        out["log_lines"] = list(out["log_lines"])
    return out


def _view_bytes(view: dict) -> int:
    """Bytes an engine view holds: the dict, its values and the log lines (its only list; nothing nests deeper)."""
    return sys.getsizeof(view) + sum(map(sys.getsizeof, view.values())) + sum(map(sys.getsizeof, view.get("log_lines", ())))


_ENGINE_VIEWS = ByteBudgetCache(4 << 20, sizer=_view_bytes)  # engine_view by everything it reads, bounded in bytes


def _engine_view(model: PreparedModel, inputs: PlanInputs, ctx: ContextBudget, available: int) -> dict:
    from planner.engines.vllm import EngineRefusal, vllm_capacity

    version = inputs.vllm_version
    resolved = model.kv_dtype(inputs.kv_dtype)[0]
    dtype = VLLM_KV_DTYPES.get(resolved)
    if dtype is None:
        return {"applies": False, "vllm_version": version, "reason": f"vLLM has no {resolved} KV cache; the steady-state figure applies"}
    args = dict(geometry=model.geometry, available_kv_bytes=available, tp=inputs.tp, kv_cache_dtype=dtype, block_size=None if inputs.block_tokens == 16 else inputs.block_tokens, vllm_version=version)
    out: dict = {"applies": True, "vllm_version": version}
    try:
        startup = vllm_capacity(model.config, max_model_len=ctx.maximum_context_tokens, **args)
    except EngineRefusal as exc:
        if exc.field in ("model", "engine"):  # an architecture this release cannot run at all, or runs on its V0 engine
            return {"applies": False, "vllm_version": version, "reason": f"{exc.reason}; the steady-state paged figure applies"}
        startup = exc
    if isinstance(startup, EngineRefusal):
        out.update(log_lines=[], startup_max_concurrency=None, startup_kv_cache_tokens=None, startup_refusal=startup.reason)
    else:
        out.update(log_lines=list(startup.log_lines), startup_max_concurrency=startup.max_concurrency, startup_kv_cache_tokens=startup.kv_cache_tokens, startup_refusal=None)
    try:
        at = vllm_capacity(model.config, max_model_len=ctx.reserved_total_tokens, **args)
    except EngineRefusal as exc:
        out.update(num_blocks=0, bytes_per_block=0, bytes_per_request=0, blocks_per_request=0, max_sequences_per_replica=0, groups="", refusal=exc.reason,
                   why=f"vLLM {version} cannot hold one request of {ctx.reserved_total_tokens:,} tokens: {exc.reason}")
        return out
    per_replica = int(at.max_concurrency)
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
    out.update(
        num_blocks=at.num_blocks, bytes_per_block=at.bytes_per_block, bytes_per_request=at.bytes_per_request, blocks_per_request=at.blocks_per_request,
        max_sequences_per_replica=per_replica, max_concurrency_at_reserved_tokens=at.max_concurrency, block_size=at.block_size,
        groups=", ".join(f"{g.layers} {g.kind}" + (f" ({g.window:,})" if g.window else "") for g in at.groups), refusal=None,
        why=f"vLLM {version} admits a request only when blocks for all {ctx.reserved_total_tokens:,} reserved tokens are free in every KV-cache group ({'; '.join(reasons)}); the steady-state figure counts what a running sequence holds.",
    )
    return out


@lru_cache(maxsize=1)
def example_model() -> PreparedModel:
    return prepare_model(EXAMPLE_CONFIG)


def itl_curve(plan: Plan, model: PreparedModel, points: int = 24) -> list[tuple[int, float, float]]:
    """(concurrency, estimated mean ITL ms, its p95) from 1 to the memory ceiling, for charts."""
    top = max(1, plan.kv_cache["maximum_sequences_by_memory"] // max(1, plan.capacity["replicas"]))
    cs = sorted({max(1, round(top * i / (points - 1))) for i in range(points)} | {1})
    out = []
    for c in cs:
        p = compute_plan(plan.inputs.model_copy(update={"sequences": c * plan.capacity["replicas"], "itl_slo_ms": None}), model)
        out.append((c, p.estimate.mean_inter_token_latency_ms, p.roofline["itl_p95_ms"]))
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
            out.append(base.kv_cache["admissible_sequences"])
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
    if inputs.model_resident_gib is None:
        for tp in (1, 2, 4, 8, 16, 32, 64):
            if geo.num_attention_heads % tp or (geo.mla is None and geo.num_kv_heads % tp and tp % geo.num_kv_heads):
                continue
            if -(-weights // tp) + int(inputs.workspace_gib * GIB) < usable * 0.9:
                if tp != inputs.tp:
                    updates["tp"] = tp
                    updates["gpu_count"] = max(tp, inputs.gpu_count // inputs.tp * tp)
                    why.append(f"{weights / GIB:,.1f} GiB of weights need tensor parallelism {tp} on {device.name}")
                break
        else:
            why.append(f"{weights / GIB:,.1f} GiB of weights do not fit {device.name} at tensor parallelism up to 64")
    return updates, why
