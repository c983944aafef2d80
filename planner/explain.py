"""The explanation of one plan, written once and shown three ways.

:func:`explain` returns an :class:`Explanation`: the formula steps with this plan's numbers
(K/V cache, memory per GPU, admission, latency, cost), the help text of each headline metric,
the assumptions the figures rest on, and what the models leave out. The Plan page (its formulas
panel, metric help and "Assumptions and omissions"), the PDF report and the CLI
(``plan --explain``) render it; none of them writes its own.

What is *not modelled* is generated, never written by hand: :func:`model_terms` collects the
terms this plan's models computed (the step terms of :class:`planner.latency.Roofline`, its
fixed per-layer costs, the served-latency model's parts and the memory budget's terms of
:meth:`planner.plan.Plan.memory_terms`), and each phenomenon of :data:`PHENOMENA` that arises in
this plan is listed as not modelled only when none of the terms that would model it was computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner import latency
from planner.cache import explain as cache_explain
from planner.capacity import LIMIT_LABELS
from planner.kv import KV_DTYPE_BITS
from planner.plan import Plan, memory_basis
from planner.units import GIB, fmt_bytes, fmt_bytes_exact, fmt_money, fmt_ms, fmt_ms_step


@dataclass(frozen=True, slots=True)
class StepGroup:
    """Formula steps of one part of the plan, each a line of plain text with this plan's numbers."""

    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Note:
    """An assumption, or something not modelled: a short title and the sentence that explains it."""

    title: str
    text: str


@dataclass(frozen=True, slots=True)
class MetricHelp:
    """What each headline metric of the Plan page counts, with this plan's numbers."""

    max_sequences: str
    ttft: str
    itl: str
    kv_per_token: str
    memory_per_sequence: str
    cost: str


@dataclass(frozen=True, slots=True)
class Explanation:
    """The explanation of one plan (see the module docstring)."""

    summary: tuple[str, ...]  # the plan in a few lines (the CLI's text output)
    steps: tuple[StepGroup, ...]
    metric_help: MetricHelp
    assumptions: tuple[Note, ...]
    not_modelled: tuple[Note, ...]

    def text(self) -> str:
        """Plain text: the steps, the assumptions and what is not modelled (``plan --explain``)."""
        out = ["Formulas with this plan's numbers"]
        for group in self.steps:
            out.append(f"  {group.title}")
            out += [f"    {line}" for line in group.lines]
        out.append("Assumptions")
        out += [f"  - {n.title}: {n.text}" for n in self.assumptions]
        out.append("Not modelled")
        out += [f"  - {n.title}: {n.text}" for n in self.not_modelled]
        return "\n".join(out)


def explain(plan: Plan) -> Explanation:
    """The explanation of ``plan``: its summary, formula steps, metric help, assumptions and what
    its models leave out (each generated from the terms they computed, :func:`model_terms`)."""
    terms = model_terms(plan)
    return Explanation(summary_lines(plan), formula_steps(plan), metric_help(plan), assumptions(plan, terms), not_modelled(plan, terms))


def formula_steps(plan: Plan) -> tuple[StepGroup, ...]:
    """Every step from the config to the verdict, latency and cost, with this plan's numbers."""
    groups = [StepGroup("K/V cache", _kv_steps(plan)), StepGroup("Memory per GPU", _memory_steps(plan)), StepGroup("Admission", _admission_steps(plan)), StepGroup("Latency", _latency_steps(plan))]
    if plan.cost.per_million_output_tokens is not None:
        groups.append(StepGroup("Cost", _cost_steps(plan)))
    cache_lines = cache_explain.formula_lines(plan)
    if cache_lines:
        groups.append(StepGroup("Prefix cache under sessions", cache_lines))
    return tuple(groups)


def not_modelled(plan: Plan, terms: frozenset[str] | None = None) -> tuple[Note, ...]:
    """Each phenomenon of :data:`PHENOMENA` that arises in ``plan`` and that none of the terms its
    models computed (``terms``, default :func:`model_terms`) accounts for."""
    terms = model_terms(plan) if terms is None else terms
    return tuple(Note(p.title, p.missing) for p in PHENOMENA if p.arises(plan) and not (p.terms & terms))


# --------------------------------------------------------------------------- what the models compute


def model_terms(plan: Plan) -> frozenset[str]:
    """Every term this plan's models computed: the step terms of its decode step and prefill
    (``dense_gemm``, ``lm_head``, ``moe``, ``attention``, ``allreduce``, ``alltoall``, ``other``),
    ``fixed_per_layer`` when the step model charges fixed per-layer costs, the served-latency
    model's parts (:data:`planner.latency.SERVED_TERMS`) and the memory budget's terms."""
    r = plan.roofline
    terms = set(r.decode_terms_ms) | set(r.prefill_terms_ms) | latency.SERVED_TERMS | plan.memory_terms()
    if plan.roof is not None and plan.roof.fixed_s() > 0:
        terms.add("fixed_per_layer")
    if plan.latency.source != "observed" and plan.latency.preprocessing_ms > 0:
        terms.add("api_server")  # the engine's fitted API server time (or the given preprocessing)
    return frozenset(terms) | cache_explain.cache_terms(plan)


@dataclass(frozen=True, slots=True)
class Phenomenon:
    """Something that costs memory or time in a real deployment, the model terms any of which
    would account for it, and whether it arises in a plan at all (all-reduce only under tensor
    parallelism, say): listed as not modelled when it arises and none of its terms was computed."""

    title: str
    terms: frozenset[str]
    arises: Callable[[Plan], bool]
    missing: str  # the sentence shown when it is not modelled


def _always(_plan: Plan) -> bool:
    return True


def _is_moe(plan: Plan) -> bool:
    return bool(plan.weights.num_experts and plan.weights.experts_per_token)


PHENOMENA: tuple[Phenomenon, ...] = (
    # memory
    Phenomenon("Allocator rounding and fragmentation", frozenset({"allocator"}), _always, "PyTorch's caching allocator rounds blocks (512 B, 2 MiB segments) and keeps freed blocks cached; fragmentation outside the K/V pool is left to the headroom."),
    Phenomenon("Block rounding", frozenset({"block_rounding"}), lambda p: p.inputs.reservation == "paged" or p.kv_cache.engine is not None, "the part of a block a paged cache reserves but does not fill is not counted."),
    Phenomenon("Activations", frozenset({"activations"}), _always, "prefill activations, logits and sampler buffers are not computed: the workspace figure stands for them."),
    Phenomenon("CUDA graphs", frozenset({"cuda_graphs"}), _always, "captured graphs hold their own memory pool (hundreds of MiB to GiBs); leave room for it in the workspace or headroom."),
    Phenomenon("Runtime buffers", frozenset({"runtime_buffers"}), _always, "attention-kernel workspaces, NCCL buffers under tensor parallelism and the CUDA context are left to the headroom."),
    Phenomenon("Tensor alignment", frozenset({"padding"}), _always, "padding of heads or head dims to kernel tile sizes is not counted."),
    Phenomenon("Recurrent state", frozenset({"recurrent_state"}), lambda p: p.inspect.state_bytes_per_sequence > 0, "the Mamba / linear-attention state of each sequence is not counted."),
    Phenomenon("Encoder K/V", frozenset({"encoder_kv"}), lambda p: p.inputs.encoder_tokens > 0 and any(s.kind == "cross" for s in p.inspect.specs), "cross-attention K/V over the image tokens is not counted."),
    Phenomenon("Encoder outputs", frozenset({"encoder_outputs"}), _always, "a multimodal engine's cache of vision / audio encoder outputs is not counted (cross-attention K/V over image tokens is, as image tokens per request)."),
    Phenomenon("fp8 scales", frozenset({"fp8_scales"}), lambda p: p.inspect.kv_dtype == "fp8", "fp8 per-tensor K/V scales are not counted."),
    Phenomenon("Integer-cache scales", frozenset({"quantization_scales"}), lambda p: p.inspect.kv_dtype in ("int8", "int4"), "the fp16 scale and zero-point of each group of an integer cache are not counted."),
    Phenomenon("Speculative decoding", frozenset({"draft_model"}), lambda p: p.inputs.spec_method != "none", "draft-model weights and their K/V are not counted."),
    Phenomenon("LoRA adapters", frozenset({"lora"}), _always, "adapter weights and their slots are not counted."),
    Phenomenon("Offload", frozenset({"offload"}), _always, "K/V offload or swap to CPU or NVMe and pinned host buffers are not counted."),
    Phenomenon("Beam search / n > 1", frozenset({"beam_sharing"}), _always, "each beam or parallel sample is a sequence; prompt blocks shared across beams are not deduplicated."),
    Phenomenon("Pipeline parallelism", frozenset({"pipeline"}), lambda p: p.inputs.pp > 1, "the hand-offs between pipeline stages are not timed."),
    Phenomenon("Prefix-cache eviction", frozenset({"prefix_eviction"}), lambda p: p.prefix.applies, "shared blocks are assumed to stay resident; eviction under memory pressure is not modelled (give a session workload for the LRU model of it)."),
    # latency
    Phenomenon("Tensor-parallel all-reduce", frozenset({"allreduce"}), lambda p: p.inputs.tp > 1, "the all-reduces between tensor-parallel GPUs are not timed."),
    Phenomenon("Expert-parallel all-to-all", frozenset({"alltoall"}), lambda p: _is_moe(p) and p.roofline.ep > 1 and p.inputs.dp > 1, "the dispatch and combine between expert-parallel GPUs are not timed."),
    Phenomenon("Kernel launches", frozenset({"fixed_per_layer"}), _always, "kernel launch and tail costs per layer are not timed."),
    Phenomenon("Prefill queue", frozenset({"prefill_queue"}), _always, "the wait of a prompt behind the others for the prefill budget is not timed."),
    Phenomenon("Prefill/decode interference", frozenset({"mixed_prefill_decode_steps"}), _always, "prefill chunks that share steps with decodes (and lengthen them) are not timed."),
    Phenomenon("Engine CPU time", frozenset({"runtime"}), _always, "the engine's CPU work between steps (scheduling, sampling, detokenisation) is not timed: each step is GPU time only."),
    Phenomenon("API server", frozenset({"api_server"}), lambda p: p.latency.source != "observed", "HTTP handling, the chat template and tokenisation before the engine count only as the preprocessing time you give."),
    Phenomenon("Network", frozenset({"network"}), _always, "request transport between the client and the server counts only as the queue time you give."),
    Phenomenon("Preemption", frozenset({"preemption"}), _always, "an admitted load never preempts here; recomputation after a preemption is what the simulator shows."),
)


def _load_note(plan: Plan) -> str:
    """What the load the latency is timed at assumes (the plan's load kind)."""
    if plan.roofline.load_kind == "closed loop":
        return (
            "the requested sequences are clients in a closed loop (each sends its next request when its last one finishes, as load generators at a fixed concurrency do); "
            "a prompt waits for the step in flight and for the prefill budget behind the other clients' prompts (M/D/1), and prefill chunks ride in the decode steps; "
            "the burst figure is every prompt at once."
        )
    return "requests arrive as a Poisson stream at the given rate, the requests in flight follow from Little's law, and prompts queue for the prefill budget (M/D/1); the burst figure is every prompt at once."


def _headroom_note(plan: Plan) -> str:
    if plan.capacity.budget is not None:
        return (
            "under runtime vllm the headroom is 1 - vLLM's --gpu-memory-utilization of the total CUDA reports (the memory vLLM leaves alone), and the workspace is what "
            "vLLM's start-up takes beside the weights: the profiling run's peak, non-torch memory and (from 0.21) CUDA graphs, each predicted from vLLM's code or fitted on its logs; "
            "a workspace you give replaces those predictions."
        )
    return "the headroom covers the CUDA context, allocator fragmentation and other memory outside the plan; the workspace covers activations and temporary buffers."


def assumptions(plan: Plan, terms: frozenset[str] | None = None) -> tuple[Note, ...]:
    """What the figures rest on; the step terms are named from those computed (``terms``)."""
    terms = model_terms(plan) if terms is None else terms
    roof = plan.roof
    step_terms = [latency.TERM_LABELS.get(t, t) for t in latency.TERM_LABELS if t in terms]
    fixed = " plus a fixed cost per layer (kernel launch and tail)" if "fixed_per_layer" in terms else ""
    out = [
        Note("K/V per GPU", "K/V bytes are per sequence on one GPU; tensor parallelism splits the KV heads (and replicates them when tp exceeds the KV heads); an MLA latent is held whole on every GPU."),
        Note("Headroom and workspace", _headroom_note(plan)),
        Note("Windows", "sliding-window and chunked layers hold at most their window (vLLM adds the in-flight tokens and a block); cross-attention layers hold the encoder (image) tokens, not the text."),
        Note("Quantization", "integer caches (int8, int4) count an fp16 scale and zero-point per 64 elements; weight scales follow the config's quantization."),
        Note("Prefix sharing", "counted per tenant only, in whole blocks of the layers whose cache keeps the prefix; cross-tenant sharing is left out on purpose (it leaks prefix presence through timing)."),
        Note(
            "Latency",
            "observed when prefill and first-decode timings are given; otherwise a roofline: every step sums "
            + ", ".join(step_terms)
            + f", each the larger of its compute and memory time{fixed}, at the device's datasheet peak and bandwidth times MFU {plan.inputs.mfu:g} / MBU {plan.inputs.mbu:g} and efficiency curves fitted to measured kernels.",
        ),
        Note("Served load", _load_note(plan)),
        Note("Serving engine", f"the fixed costs a real {plan.roofline.serving_engine} run adds to the kernels (host work per step and sequence, per-layer gaps, MoE routing, MLA, the API server) are fitted to published end-to-end runs (docs/serving_fit.md); each latency and throughput figure carries the accuracy band of published runs like this plan."),
    ]
    if plan.inputs.dp > 1:
        out.append(Note("Attention data parallelism", f"{plan.inputs.dp} ranks of TP {plan.inputs.tp} each hold their own sequences' K/V and the dense and attention weights; the experts spread over EP {plan.inputs.ep}; every MoE layer waits for the slowest rank, so a prompt's chunk on any rank lengthens every rank's step."))
    if plan.inputs.pp > 1:
        out.append(Note("Pipeline parallelism", f"{plan.inputs.pp} stages split the layers evenly (K/V and weights: the busiest stage's share); the running sequences go through the stages as {plan.inputs.pp} micro-batches, so a token waits for {plan.inputs.pp} stage steps and {plan.inputs.pp - 1} hand-offs; vLLM's block reservation is not applied per stage."))
    if plan.inputs.spec_method != "none":
        r = plan.roofline
        out.append(Note("Speculative decoding", f"{r.spec_method}: {r.spec_tokens} drafts a step verified together, {r.spec_acceptance_length:.2f} tokens kept a step ({r.spec_acceptance_source}); it scales the decode steps of the load by its step model's TPOT at the same batch."))
    if roof is not None and _is_moe(plan):
        out.append(Note("Expert routing", f"uniform: a step over T tokens reads 1 - (1 - {roof.experts_per_token}/{roof.num_experts})^T of each MoE layer's experts."))
    cache_note = cache_explain.assumption(plan)
    if cache_note:
        out.append(Note(*cache_note))
        out.append(Note("Device figures", "nominal datasheet values (the memory vLLM budgets is the total CUDA reports, as the catalog says where it comes from); measure your own deployment before committing capacity."))
    return tuple(out)


# --------------------------------------------------------------------------- formula steps


def _kv_steps(plan: Plan) -> tuple[str, ...]:
    kv, ctx, res, block = plan.kv_cache, plan.context, plan.reservation, plan.inputs.block_tokens
    specs = [s for s in plan.inspect.specs if s.kind != "cross"]
    bits = KV_DTYPE_BITS.get(plan.inspect.kv_dtype)
    out = []
    for s in specs:
        line = f"K/V per token, {s.kind}{' ' + format(s.window, ',') if s.window else ''}: {s.num_layers} layers x {s.bytes_per_token_per_layer:,} B = {s.bytes_per_token:,} B"
        if bits and s.kv_heads_per_gpu * (s.k_head_dim + s.v_head_dim) * bits == s.bytes_per_token_per_layer * 8:
            line += f"   (per layer: {s.kv_heads_per_gpu} KV heads x ({s.k_head_dim} K + {s.v_head_dim} V) x {bits / 8:g} B)"
        out.append(line + ("" if s.grows_per_token else f", capped at {s.window:,} tokens" if s.window else ", not per text token"))
    growing = [s for s in specs if s.grows_per_token]
    out.append("K/V per token, growing with every token = " + (" + ".join(f"{s.bytes_per_token:,}" for s in growing) + " = " if len(growing) > 1 else "") + fmt_bytes_exact(kv.bytes_per_token_per_sequence))
    out.append(f"context = input {ctx.input_tokens:,} + output {ctx.reserved_output_tokens:,} = {ctx.reserved_total_tokens:,} <= maximum {ctx.maximum_context_tokens:,} tokens")
    if res.mode == "paged":
        parts = [f"{s.blocks(res.tokens, block):,} blocks x {block} tokens x {s.bytes_per_token:,} B" for s in specs]
        out.append(f"K/V per sequence (paged, {res.tokens:,} tokens) = " + " + ".join(parts) + f" = {fmt_bytes_exact(res.kv_bytes)}")
    else:
        what = "maximum context" if res.mode == "static" else "reserved tokens"
        parts = [f"{s.bytes_per_token:,} B x {s.tokens_held(res.tokens):,}" for s in specs]
        out.append(f"K/V per sequence ({res.mode}, {what} {res.tokens:,}) = " + " + ".join(parts) + f" = {fmt_bytes_exact(res.kv_bytes)}")
    if res.state_bytes or res.encoder_bytes:
        extra = (f" + state {res.state_bytes:,}" if res.state_bytes else "") + (f" + encoder K/V {res.encoder_bytes:,}" if res.encoder_bytes else "")
        out.append(f"per sequence = K/V {res.kv_bytes:,}{extra} = {fmt_bytes_exact(kv.bytes_per_reserved_sequence)}")
    if res.waste_bytes:
        out.append(f"of which reserved but unfilled ({res.mode}): {fmt_bytes_exact(res.waste_bytes)}")
    return tuple(out)


def _sglang_memory_steps(plan: Plan) -> tuple[str, ...]:
    """Runtime sglang: the budget and pools as SGLang computes them (GiB of 2^30, per GPU)."""
    v, cap = plan.sglang, plan.capacity
    c, m = v.capacity, v.memory
    terms = " ".join(f"{'+' if t.gib >= 0 and i else ''}{'-' if t.gib < 0 else ''} {abs(t.gib):,.4f} ({t.name})".strip() for i, t in enumerate(m.terms) if t.name not in ("weights", "draft weights"))
    weights = sum(-t.gib for t in m.terms if t.name in ("weights", "draft weights"))
    static = m.pre_load_free_gib * (1 - c.mem_fraction_static)
    budget = c.available_kv_bytes / GIB
    other = m.available_gib - static - budget
    out = [
        f"free before the weights = {terms} = {m.pre_load_free_gib:,.4f} GiB",
        f"free after the weights = {m.pre_load_free_gib:,.4f} - weights {weights:,.4f} = {m.available_gib:,.4f} GiB",
        f"KV budget = {m.available_gib:,.4f} - {m.pre_load_free_gib:,.4f} x (1 - mem_fraction_static {c.mem_fraction_static:g})"
        + (f" - {other:,.4f} ({'Mamba state pool' if c.max_mamba_cache_size is not None else 'VLM cache'})" if other > 5e-5 else "")
        + f" = {budget:,.4f} GiB = {c.available_kv_bytes:,} B (SGLang {c.sglang_version} _profile_available_bytes)",
        f"token pool = floor({c.available_kv_bytes:,} / {c.cell_bytes:,.6g} B a token)" + (f", in {c.page_size}-token pages" if c.page_size > 1 else "") + f" = {c.max_total_num_tokens:,} tokens"
        + (f"; SWA pool {c.swa_max_total_num_tokens:,} tokens" if c.swa_max_total_num_tokens is not None else ""),
        f"max sequences = min(max_running_requests {c.max_running_requests:,}, {c.max_total_num_tokens:,} // {v.tokens_per_request:,}"
        + (f", SWA {c.swa_max_total_num_tokens:,} // {v.swa_tokens_per_request:,}" if v.swa_tokens_per_request else "")
        + f") = {v.max_sequences_per_replica:,} x {cap.replicas:,} replica(s) = {plan.kv_cache.maximum_sequences_by_memory:,} ({v.binding} binds); steady state {plan.kv_cache.steady_state_sequences:,}",
    ]  # fmt: skip
    return tuple(out)


def _memory_steps(plan: Plan) -> tuple[str, ...]:
    if plan.sglang is not None:
        return _sglang_memory_steps(plan)
    kv, cap, prefix, engine = plan.kv_cache, plan.capacity, plan.prefix, plan.kv_cache.engine
    steady = kv.steady_state_sequences
    vllm = engine is not None and engine.applies
    if cap.budget is not None:  # runtime vllm: vLLM's start-up budget, each term with its source
        b = cap.budget
        out = [
            f"budget = {b.total_bytes:,} B as CUDA reports it x gpu_memory_utilization {cap.gpu_memory_utilization:g} (= 1 - headroom {cap.headroom_bp / 100:g} %) = {b.requested_bytes:,} B ({fmt_bytes(b.requested_bytes)}) [{b.terms[0].source}]",
            *(f"- {t.name} {t.bytes:,} B ({fmt_bytes(t.bytes)}) [{t.source}]" for t in b.terms[2:] if t.in_budget),
            *(f"  {t.name} {t.bytes:,} B, outside the budget [{t.source}]" for t in b.terms[2:] if not t.in_budget),
            f"available for K/V = {cap.usable_bytes:,} - {cap.fixed_bytes:,} = {cap.available_for_kv_bytes:,} B ({fmt_bytes(cap.available_for_kv_bytes)}: vLLM's \"Available KV cache memory\")",
        ]
    else:
        out = [
            f"usable = floor({cap.device_bytes:,} x (10,000 - {cap.headroom_bp:,}) / 10,000) = {cap.usable_bytes:,} B ({fmt_bytes(cap.usable_bytes)})",
            f"fixed = model {cap.model_resident_bytes:,} ({cap.model_resident_source}) + workspace {cap.workspace_bytes:,} = {cap.fixed_bytes:,} B ({fmt_bytes(cap.fixed_bytes)})",
            f"available for K/V = {cap.usable_bytes:,} - {cap.fixed_bytes:,} = {cap.available_for_kv_bytes:,} B ({fmt_bytes(cap.available_for_kv_bytes)})",
        ]
    out += [
        f"max sequences = floor({cap.available_for_kv_bytes:,} / {kv.bytes_per_reserved_sequence:,}) x {cap.replicas:,} replica(s) = "
        f"{steady // max(1, cap.replicas):,} x {cap.replicas:,} = {steady:,}" + (" in steady state" if vllm else ""),
    ]
    serve = plan.serve
    if serve.applies and serve.command:
        out.append(f"batching: {serve.max_num_batched_tokens:,} tokens a step, {serve.max_num_seqs:,} sequences a replica ({serve.batching_source})" if serve.max_num_seqs else f"batching: {serve.max_num_batched_tokens:,} tokens a step ({serve.batching_source})")
    if vllm and engine.refusal:
        out.append(f"vLLM {engine.vllm_version} admits none: {engine.refusal}")
    elif vllm:
        out.append(
            f"vLLM {engine.vllm_version} admits {engine.max_sequences_per_replica:,} a replica ({engine.num_blocks:,} blocks of {engine.bytes_per_block:,} B; a request reserves "
            f"{engine.blocks_per_request:,} for its {plan.context.reserved_total_tokens:,} tokens) x {cap.replicas:,} = {kv.maximum_sequences_by_memory:,}: the maximum by memory"
        )
    if prefix.bytes_saved_per_extra_sequence:
        out.append(f"with prefix sharing ({prefix.shared_blocks:,} shared blocks, {fmt_bytes_exact(prefix.bytes_saved_per_extra_sequence)} saved per further sequence of a tenant) = {prefix.maximum_sequences_with_sharing:,}")
    return tuple(out)


def _admission_steps(plan: Plan) -> tuple[str, ...]:
    kv = plan.kv_cache
    limits = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in kv.limits.items())
    verdict = "<=" if kv.admitted else ">"
    return (
        f"admissible = min({limits}) = {kv.admissible_sequences:,} (binding: {kv.binding_constraint.replace('_', ' ')}); "
        f"requested {kv.requested_sequences:,} {verdict} {kv.admissible_sequences:,}: {'admitted' if kv.admitted else 'refused'}",
    )


def _latency_steps(plan: Plan) -> tuple[str, ...]:
    lat, r = plan.latency, plan.roofline
    generated = plan.inputs.generated_tokens or plan.inputs.output_tokens
    first = "" if lat.source == "observed" else " (the last prefill step emits the first token)"
    out = [f"TTFT = queue {lat.queue_ms:,.1f} + preprocessing {lat.preprocessing_ms:,.1f} + prefill {lat.prefill_ms:,.1f} + first decode {lat.first_decode_ms:,.1f}{first} = {fmt_ms_step(lat.time_to_first_token_ms)} ({lat.source}, {r.load_label})"]
    if lat.source == "observed":
        if generated > 1:
            out.append(f"ITL = remaining decode {lat.remaining_decode_ms:,.1f} / ({generated:,} - 1) = {fmt_ms_step(lat.mean_inter_token_latency_ms)}")
    elif plan.roof is not None:
        out += latency.formula_lines(r, plan.roof)
    out.append(f"end-to-end = TTFT {lat.time_to_first_token_ms:,.1f} + remaining decode {lat.remaining_decode_ms:,.1f} = {fmt_ms_step(lat.end_to_end_ms)}")
    out.append(
        f"output rate = {generated:,} tokens / ((first decode {lat.first_decode_ms:,.1f} + remaining {lat.remaining_decode_ms:,.1f}) ms) = {lat.output_tokens_per_second:,.1f} tok/s"
    )
    out.append(
        f"ridge = {r.peak_tflops:,.1f} TFLOP/s / {r.bandwidth_gb_s:,.0f} GB/s = {r.ridge_flops_per_byte:,.1f} FLOP/B; "
        f"prefill {r.prefill_intensity:,.1f} FLOP/B, decode {r.decode_intensity:,.2f} FLOP/B ({'compute' if r.decode_intensity >= r.ridge_flops_per_byte else 'memory'}-bound)"
    )
    return tuple(out)


def mean_above_p95(plan: Plan) -> str | None:
    """The sentence for a mean ITL above its p95 (a few very long steps), else None."""
    r = plan.roofline
    if plan.latency.source == "observed" or r.itl_ms_at_concurrency <= r.itl_p95_ms:
        return None
    return (
        f" The mean ({fmt_ms(r.itl_ms_at_concurrency)}) is above the p95 ({fmt_ms(r.itl_p95_ms)}) because a few steps are very long: "
        f"{r.prefill_step_share:.1%} of steps carry a new prompt's prefill chunk and last up to {fmt_ms(r.itl_p99_ms)} (the p99), "
        "while the others are decode-only. The SLO judges the p95."
    )


def _cost_steps(plan: Plan) -> tuple[str, ...]:
    c = plan.cost
    return (
        f"cost = {fmt_money(c.deployment_per_hour)}/h / ({c.output_tokens_per_second:,.1f} output tokens/s x 3,600) x 1,000,000 = "
        f"{fmt_money(c.per_million_output_tokens)} per million output tokens; input {fmt_money(c.per_million_input_tokens) if c.per_million_input_tokens is not None else '-'} per million ({c.basis})",
    )


# --------------------------------------------------------------------------- summary and metric help


def summary_lines(plan: Plan) -> tuple[str, ...]:
    """The plan in a few lines: context, K/V, memory, capacity and latency (the CLI's output)."""
    kv, ctx, lat, cap, r = plan.kv_cache, plan.context, plan.latency, plan.capacity, plan.roofline
    lines = [
        f"context      input {ctx.input_tokens:,} + output {ctx.reserved_output_tokens:,} = {ctx.reserved_total_tokens:,} of {ctx.maximum_context_tokens:,} ({ctx.unreserved_tokens:,} unreserved)",
        f"K/V          {kv.bytes_per_token_per_sequence:,} B/token, {kv.mib_per_reserved_sequence:,} MiB per reserved sequence ({kv.reservation}, {kv.kv_dtype}, {kv.runtime})",
        f"memory       {cap.device}: usable {cap.usable_bytes / GIB:,.2f} GiB, fixed {cap.fixed_bytes / GIB:,.2f} GiB, KV {cap.available_for_kv_bytes / GIB:,.2f} GiB",
        f"capacity     {kv.maximum_sequences_by_memory:,} sequences by memory; requested {kv.requested_sequences:,}: " + ("admitted" if kv.admitted else "REFUSED") + f" (binding: {kv.binding_constraint})",
    ]
    if kv.admission_error:
        lines.append(f"             {kv.admission_error}")
    if plan.sglang is not None:  # runtime sglang: what launch_server will log, and its command
        v = plan.sglang
        lines.append(f"sglang       SGLang {v.capacity.sglang_version}: mem_fraction_static {v.capacity.mem_fraction_static:g}, page {v.capacity.page_size}, {v.capacity.max_total_num_tokens:,} tokens, {v.max_sequences_per_replica:,} requests a replica ({v.binding} binds)")
        lines += [f"             {line}" for line in v.capacity.log_lines]
        lines.append(f"             {v.command}")
    cache_line = cache_explain.summary_line(plan)
    at = r.load_label + ("" if r.load_admitted else ", NOT ADMITTED")
    lines.append(
        f"latency      ({lat.source}, {at}) TTFT {lat.time_to_first_token_ms:,.1f} ms, ITL {lat.mean_inter_token_latency_ms:,.1f} ms, "
        f"{lat.output_tokens_per_second:,.1f} tok/s out, end-to-end {lat.end_to_end_ms:,.1f} ms"
    )
    if lat.source != "observed":
        lines.append(f"             at 1 request: prefill {r.prefill_ms_at_1_request:,.1f} ms, ITL {r.itl_ms_at_1_request:,.2f} ms; wait the load adds {r.prefill_wait_ms:,.1f} ms")
        lines.append(
            f"             p95: TTFT {r.ttft_p95_ms:,.1f} ms, ITL {r.itl_p95_ms:,.1f} ms ({r.prefill_step_share:.0%} of steps carry a prefill chunk); "
            f"prefill budget {r.prefill_utilisation:.0%} used{' (SATURATED: prompts queue)' if r.prefill_saturated else ''}; all prompts at once: the last waits {r.burst_wait_max_ms:,.1f} ms"
        )
        if bench := benchmark_sentence(plan):
            lines.append("             " + bench)
        lines.append(
            f"throughput   {r.output_tokens_per_second_per_gpu:,.1f} output tok/s a GPU ({at}); {r.max_throughput_tokens_per_second_per_gpu:,.1f} at most ({r.max_throughput_label})"
            + (f"; speculative decoding {r.spec_method} x{r.spec_speedup:.2f}" if r.spec_method != "none" else "")
        )
        lines.append("accuracy     " + "; ".join(f"{k}: {v}" for k, v in band_texts(plan).items()))
        if r.accuracy_caveat:
            lines.append("             " + r.accuracy_caveat)
    if cache_line:
        lines.append(cache_line)
    return tuple(lines)


def pool_figures(plan: Plan) -> str:
    """What the KV pool holds, in tokens and in sequences, with each sequence count named: the
    sequences admitted at arrival (the memory limit behind Max sequences), the steady-state count
    (what the same memory holds when a running sequence keeps only what it uses) and, for vLLM,
    its log line's concurrency at the full context. Issue 27 item 8: "KV pool 1,899,303 tokens ·
    38 sequences" beside "steady state 57" with no sentence tying them together."""
    kv, cap, engine = plan.kv_cache, plan.capacity, plan.kv_cache.engine
    per = " per replica" if cap.replicas > 1 else ""
    behind = f"the memory limit behind Max sequences ({kv.maximum_sequences_by_memory:,} over {cap.replicas:,} replicas)" if cap.replicas > 1 else "the memory limit behind Max sequences"
    admitted, steady = cap.sequences_per_replica, kv.steady_state_sequences // max(1, cap.replicas)
    reserved = f"{kv.reserved_tokens_per_sequence:,} reserved tokens"
    if plan.sglang is not None:
        v = plan.sglang
        out = (
            f"The KV pool holds {v.capacity.max_total_num_tokens:,} tokens{per} (SGLang's token pool). At most {v.max_sequences_per_replica:,} sequences run at once{per}: "
            f"SGLang's pools at {v.tokens_per_request:,} tokens a request, {behind}."
        )
    elif engine is not None and engine.applies and not engine.refusal and engine.startup_kv_cache_tokens:
        out = (
            f"The KV pool holds {engine.startup_kv_cache_tokens:,} tokens{per} (vLLM's GPU KV cache size). {admitted:,} sequences fit{per} with blocks for all their {reserved}, "
            f"so none is ever preempted: {behind}."
        )
    elif cap.pool_kv_tokens is not None:
        out = f"The KV pool holds {cap.pool_kv_tokens:,} tokens{per}. At most {admitted:,} sequences run at once{per}, each reserving {reserved}: {behind}."
    else:
        out = f"At most {admitted:,} sequences run at once{per}, each reserving {reserved}: {behind}."
    if steady != admitted:
        more = "more than admission lets in" if steady > admitted else "fewer than admission lets in, since blocks are rounded"
        out += f" In steady state the same memory would hold {steady:,}{per} ({more}): that count charges a running sequence only what it holds, a sliding layer its window."
    if more := beyond_limit_sentence(plan):
        out += " " + more
    if engine is not None and engine.applies and engine.startup_max_concurrency is not None and engine.serve_max_model_len:
        out += f" vLLM's start-up log counts requests of the full {engine.serve_max_model_len:,}-token context instead: {engine.startup_max_concurrency:,.2f}x."
    return out


def beyond_limit_sentence(plan: Plan) -> str:
    """What a vLLM or SGLang engine runs under more load than the memory limit admits
    (stages.memory_running: the K/V pool at the mean decode context), when that is more; "" else."""
    setup, cap = plan._load.setup, plan.capacity
    running = setup.max_running or 0  # the engine's own limit already taken (stages.memory_running)
    if running <= cap.sequences_per_replica:
        return ""
    per = " per replica" if cap.replicas > 1 else ""
    how = (
        "SGLang takes a request in when its prompt and a share of its remaining output fit (the share decays from 0.7 to about 0.1 over 600 steps) and retracts the newest when the pool runs out"
        if plan.sglang is not None
        else f"{'vLLM' if plan.inputs.runtime == 'vllm' else 'a paged engine'} takes a request in once its prompt's blocks are free and preempts the newest when the pool runs out"
    )
    return f"Under more load than {cap.sequences_per_replica:,}{per}, {how}: about {running:,} run at once{per} at the mean context of {setup.mid:,} tokens, the count the latency uses for a load beyond the limit."


def benchmark_sentence(plan: Plan) -> str:
    """What a closed-loop benchmark of the requested clients should print as its mean TTFT (the plan's
    roofline.benchmark_ttft_ms), with the flags that run it; "" for another load or an observed latency."""
    r, inputs = plan.roofline, plan.inputs
    if not r.benchmark_prompts or plan.latency.source == "observed":
        return ""
    c, n = inputs.sequences, r.benchmark_prompts
    fig = plan._load.figures
    first = min(c, fig.running * plan._memory.ranks) if 0 < fig.running < fig.per_rank else c  # beyond what runs at once, prompts wait for a slot
    why = f"its first {first:,} prompts queue on an idle engine" if n > first and first > 1 else "no first wave to queue"
    said = f"A benchmark of {n:,} prompts from {c:,} clients started at once (--num-prompts {n} --max-concurrency {c}) prints a mean TTFT of about {fmt_ms_step(r.benchmark_ttft_ms)} ({why})."
    if upper := waves_upper_ms(r):
        said += f" At fixed lengths (the random dataset's default) requests that end together send their next prompts together, so later waves can queue as the first: up to {fmt_ms_step(upper)}; published runs land between the two."
    return said


WAVES_SHOWN = 1.05  # the whole-wave figure is said where it is this much above the benchmark figure


def waves_upper_ms(r) -> float:
    """A closed-loop benchmark's upper end, every wave queued as the first (a RooflineSection's
    benchmark_ttft_waves_ms), where it says more than its figure; 0.0 where it does not."""
    return r.benchmark_ttft_waves_ms if r.benchmark_ttft_waves_ms > r.benchmark_ttft_ms * WAVES_SHOWN else 0.0


def band_texts(plan: Plan) -> dict[str, str]:
    """Per figure ("TTFT", "TPOT", "throughput"), how far published runs like this plan landed from
    the model ("±18 % on points like this one, n=12"), or the warning that none covers it."""
    acc = plan.roofline.accuracy
    return {"TTFT": acc.get("ttft", ""), "TPOT": acc.get("tpot", ""), "throughput": acc.get("throughput", "")}


def metric_help(plan: Plan) -> MetricHelp:
    """The help text of each headline metric of the Plan page, with this plan's numbers."""
    kv, cap, lat, r, c = plan.kv_cache, plan.capacity, plan.latency, plan.roofline, plan.cost
    observed = lat.source == "observed"
    at = r.load_label + ("" if r.load_admitted else " (not admitted)")
    per_replica = f"{cap.sequences_per_replica:,} per replica x {cap.replicas:,} replicas" if cap.replicas > 1 else "one replica"
    bands = band_texts(plan)
    ttft = f"Mean time to first token {at} ({lat.source})" + (
        ""
        if observed
        else f", including the API server's {fmt_ms_step(lat.preprocessing_ms)} and {fmt_ms_step(r.prefill_wait_ms)} that the load adds (the step in flight, the other prompts ahead; p95 {fmt_ms_step(r.ttft_p95_ms)}); "
        f"at 1 request the prefill is {fmt_ms_step(r.prefill_ms_at_1_request)}. Worst moment, all prompts arriving at once: {fmt_ms_step(r.burst_wait_max_ms)} more for the last."
        + (" The prefill cannot keep up with the arrivals at this load: prompts queue." if r.prefill_saturated else "")
        + f" Accuracy: {bands['TTFT']}."
    )
    long_steps = r.prefill_step_share > 0.05
    itl = f"Mean inter-token latency {at} per replica ({lat.source})" + (
        "."
        if observed
        else f", with the prefill chunks of new prompts mixed into decode steps; at 1 request {fmt_ms_step(r.itl_ms_at_1_request)}. {r.prefill_step_share:.1%} of steps carry a prefill chunk"
        + (", so the p95 gap falls among those steps: a smaller max batched tokens shortens it." if long_steps else ", so the p95 gap is a decode-only step.")
        + f" p95 {fmt_ms_step(r.itl_p95_ms)}, p99 {fmt_ms_step(r.itl_p99_ms)}."
        + (mean_above_p95(plan) or "")
        + f" Accuracy: {bands['TPOT']}."
    )
    return MetricHelp(
        max_sequences=f"The most concurrent sequences all replicas admit (bound by {LIMIT_LABELS.get(kv.binding_constraint, kv.binding_constraint)}). Memory alone admits {kv.maximum_sequences_by_memory:,} ({per_replica}; {memory_basis(plan)}); {kv.requested_sequences:,} requested.",
        ttft=ttft + ("" if r.load_admitted else " The requested load is not admitted: this is what it would cost, not a promise."),
        itl=itl,
        kv_per_token=_kv_help(plan),
        memory_per_sequence=f"{kv.bytes_per_reserved_sequence:,} B for {kv.reserved_tokens_per_sequence:,} reserved tokens ({kv.reservation} reservation) on one GPU.",
        cost=(
            f"{plan.inputs.gpu_count:,} GPUs x {fmt_money(c.gpu_hour_price)} per GPU-hour ({c.price_source}). Per million tokens: {fmt_money(c.per_million_output_tokens)} output at {c.output_tokens_per_second:,.0f} output tokens/s, "
            f"{fmt_money(c.per_million_input_tokens) if c.per_million_input_tokens is not None else '-'} input ({c.basis})."
            if c.per_million_output_tokens is not None
            else "Set the GPU-hour price under 'Prefix sharing and cost' to see cost per hour and per million tokens."
        ),
    )


def _kv_help(plan: Plan) -> str:
    kv, ins = plan.kv_cache, plan.inspect
    capped = [s for s in ins.specs if not s.grows_per_token and s.window]
    growing, within = kv.bytes_per_token_per_sequence, kv.bytes_per_token_within_windows
    layers = ", ".join(f"{s.kind} x{s.num_layers}: {s.bytes_per_token:,} B up to {s.window:,} tokens" for s in capped)
    if growing == 0 and within > 0:  # every cached layer is windowed (e.g. Mistral-7B v0.1)
        return f"Every cached layer is windowed: {within:,} B per token of one sequence on one GPU while the context is within the window, then flat ({ins.kv_dtype}, TP {plan.inputs.tp}). {layers}."
    return f"{growing:,} B per token of one sequence on one GPU from layers whose cache grows with every token ({ins.kv_dtype}, TP {plan.inputs.tp})" + (
        f". Within the windows every layer adds up to {within:,} B per token; windowed layers stop growing at their window: {layers}" if capped else "."
    )
