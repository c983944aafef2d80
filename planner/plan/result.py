"""The plan's result (:class:`Plan`): what its stages found, and its sections built from them.

``compute_plan`` runs the stages and keeps their results (:class:`Memory`, :class:`Ceiling`,
:class:`Admission`, :class:`Load`: small immutable tuples, cheap to make on every slider move).
Each section (``kv_cache``, ``capacity``, ``roofline``, ``prefix``, ``cost``, ``work``) is built
from them by :mod:`planner.plan.sections` the first time it is read and then kept, so a caller
that reads one figure of a plan (a grid cell, a sizing step) pays for that section only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from planner import capacity, latency
from planner.context import ContextBudget
from planner.engines.vllm_memory import MemoryBudget
from planner.hardware import Device
from planner.kv import INTEGER_DTYPES, InspectReport
from planner.plan import sections, serving
from planner.plan.budget import Batching
from planner.plan.engine_view import EngineView
from planner.plan.inputs import PlanInputs
from planner.plan.sglang_view import SglangView
from planner.results import Result
from planner.weights import WeightsEstimate


class Memory(NamedTuple):
    """One GPU's memory: usable after the headroom, the fixed part, what is left for K/V."""

    usable: int
    resident: int  # model weights on this GPU
    resident_source: str
    workspace: int
    fixed: int  # resident + workspace
    available: int  # usable - fixed: the K/V pool
    replicas: int  # gpu_count / (tp x dp x pp)
    ranks: int  # K/V pools that hold sequences of their own: replicas x dp (attention data-parallel ranks)
    draft: int = 0  # a speculative proposer's weights on this GPU
    budget: MemoryBudget | None = None  # runtime vllm: vLLM's predicted start-up budget, term by term


class Sharing(NamedTuple):
    """The shared prefix: whole blocks held once per tenant and replica by a paged engine."""

    applies: bool
    shared_blocks: int
    saved: int  # bytes each further sequence of a tenant saves
    per_replica_load: int  # the requested load on the busiest replica (ceil split)
    saved_per_replica: int  # bytes saved at that load
    cached: float  # prompt tokens a request finds cached (hit rate x the whole shared blocks)


class Ceiling(NamedTuple):
    """Concurrent sequences memory admits: steady state, with sharing, and as vLLM admits."""

    per_replica: int
    memory_max: int  # all replicas
    shared_max: int  # with prefix sharing
    limit_memory: int  # the memory limit the admission uses
    steady_max: int  # the steady-state figure (before vLLM's block reservation)
    engine: EngineView | None  # vLLM's view (runtime vllm, not static)
    sglang: SglangView | None = None  # SGLang's sizing (runtime sglang)


class Admission(NamedTuple):
    """Every limit on concurrent sequences and the verdict on the requested load."""

    limits: dict[str, int]
    admitted: bool
    limit: int
    binding: str
    error: str | None
    requested: int = 0  # sequences the load puts on the deployment (the requested, or an open loop's in flight)


class Load(NamedTuple):
    """The requested load on the busiest rank and its figures (:mod:`planner.plan.serving`)."""

    generated: int  # tokens a request generates
    mid: int  # context halfway through the generation (the mean decode step's)
    kv_mid: float  # K/V one sequence holds there
    concurrency: int  # requests on the busiest rank
    figures: serving.LoadFigures  # closed loop, or open loop at the request rate
    setup: serving.Setup  # what the figures are computed from (the offline figure and a benchmark redo them)


class Draft(NamedTuple):
    """A speculative proposer's share of a GPU and its step model (a draft model's)."""

    method: str  # mtp, eagle3 or draft
    what: str  # "MTP layer", "EAGLE-3 head", "draft model llama-3.2-1b"
    weights_bytes: int
    kv_per_token: int  # its K/V per token of a sequence (the MTP layers' are in the K/V layout)
    roof: latency.Roofline | None  # the draft model's step model
    tokens: int  # drafts a step


@dataclass(frozen=True, slots=True)
class Plan(Result):
    """Every number a plan shows, in the seed's sections plus the extra detail."""

    inputs: PlanInputs
    device: Device
    context: ContextBudget
    inspect: InspectReport
    weights: WeightsEstimate
    reservation: capacity.SequenceReservation
    latency: latency.LatencyReport
    estimate: latency.LatencyReport
    notes: tuple[str, ...]
    roof: latency.Roofline | None  # the step-time model behind the estimate (every term)
    # the stages' results the sections are built from
    _memory: Memory
    _sharing: Sharing
    _ceiling: Ceiling
    _admission: Admission
    _load: Load
    _weight_format: str = "bf16"  # what the kernels run (PreparedModel.weight_format)
    _batching: Batching | None = None  # the scheduler's token budget and sequence limit (given or the engine's defaults)
    model_name: str = "MODEL"  # the repo id the serve line names
    _built: dict = field(default_factory=dict, repr=False, compare=False)  # sections read so far

    @property
    def batching(self) -> Batching:
        """The scheduler's limits this plan runs with: tokens a step and sequences a replica, given
        or (runtime vllm) vLLM's defaults for the GPU, release and entry point."""
        if self._batching is not None:
            return self._batching
        from planner.plan.budget import batching

        return batching(self.inputs, self.device)

    def _section(self, name: str, build):
        hit = self._built.get(name)
        if hit is None:
            hit = self._built[name] = build(self)
        return hit

    @property
    def kv_cache(self) -> sections.KVCacheSection:
        """K/V per token and per sequence, the memory ceiling and the admission verdict."""
        return self._section("kv_cache", sections.kv_cache_section)

    @property
    def capacity(self) -> sections.CapacitySection:
        """One GPU's memory from the device down to the K/V pool, and the replicas."""
        return self._section("capacity", sections.capacity_section)

    @property
    def roofline(self) -> sections.RooflineSection:
        """The step-time model's figures at the requested load and at one request."""
        return self._section("roofline", sections.roofline_section)

    @property
    def serve(self) -> sections.ServeSection:
        """The engine command line that reproduces the plan and always starts (runtime vllm)."""
        return self._section("serve", sections.serve_section)

    @property
    def prefix(self) -> sections.PrefixSection:
        """Prefix sharing: blocks held once per tenant, memory saved, sequences gained."""
        return self._section("prefix", sections.prefix_section)

    @property
    def cost(self) -> sections.CostSection:
        """Cost per hour and per million tokens (a GPU-hour price given)."""
        return self._section("cost", sections.cost_section)

    @property
    def work(self) -> sections.WorkSection:
        """What the cache saves: attention FLOPs and token projections with and without it."""
        return self._section("work", sections.work_section)

    @property
    def sglang(self) -> SglangView | None:
        """SGLang's start-up sizing of this plan (runtime sglang; None otherwise)."""
        return self._ceiling.sglang

    @property
    def cache(self):
        """The session workload's prefix cache: hit rate per tier, TTFT with and without the
        tiers (:mod:`planner.cache.section`; ``applies`` False without a workload)."""
        from planner.cache.section import cache_section

        return self._section("cache", cache_section)

    def memory_terms(self) -> frozenset[str]:
        """The terms of this plan's memory budget (what :mod:`planner.explain` may say is counted):
        the headroom, weights, workspace and K/V pool always; recurrent state, cross-attention K/V
        over encoder tokens, whole-block rounding, a static reservation's over-allocation, shared
        prefix blocks and integer-cache scales where this plan computes them."""
        res, specs = self.reservation, self.inspect.specs
        terms = {"headroom", "weights", "workspace", "kv_cache"}
        engine = self._ceiling.engine
        if res.state_bytes:
            terms.add("recurrent_state")
        if any(s.kind == "cross" for s in specs):
            terms.add("encoder_kv")
        if res.mode == "paged" or (engine is not None and engine.applies):
            terms.add("block_rounding")
        if res.mode == "static":
            terms.add("static_reservation")
        if self._sharing.applies:
            terms.add("prefix_sharing")
        if self.inspect.kv_dtype in INTEGER_DTYPES:
            terms.add("quantization_scales")
        if self._memory.draft or res.draft_bytes:
            terms.add("draft_model")
        budget = self._memory.budget
        if budget is not None:  # runtime vllm: the terms of vLLM's start-up budget this plan computed
            names = {t.name for t in budget.terms}
            if "profiling peak activations" in names:
                terms.update({"activations", "runtime_buffers"})  # the profiling peak; non-torch memory (context, NCCL)
            if "CUDA graphs" in names:
                terms.add("cuda_graphs")
            if "multimodal encoder cache (profiling)" in names:
                terms.add("encoder_outputs")
            if "LoRA adapter slots" in names:
                terms.add("lora")
        return frozenset(terms)

    def summary(self) -> dict:
        """The seed-compatible JSON: ``context``, ``kv_cache`` and ``latency`` (plus more sections)."""
        ctx, roofline = self.context, self.roofline
        return {
            "context": {
                "input_tokens": ctx.input_tokens,
                "reserved_output_tokens": ctx.reserved_output_tokens,
                "reserved_total_tokens": ctx.reserved_total_tokens,
                "unreserved_tokens": ctx.unreserved_tokens,
                "maximum_context_tokens": ctx.maximum_context_tokens,
                "components": dict(ctx.components),  # the budget is shared by plans with the same context
            },
            "kv_cache": self.kv_cache.to_json(),
            "latency": {**self.latency.model_dump(), "at": roofline.load_label, "requests_per_replica": roofline.decode_concurrency, "load_admitted": roofline.load_admitted},
            "estimate": self.estimate.model_dump(),
            "capacity": self.capacity.to_json(),
            "roofline": roofline.to_json(),
            "serve": self.serve.to_json(),
            "prefix_sharing": self.prefix.to_json(),
            "cost": self.cost.to_json(),
            "work": self.work.to_json(),
            "weights": self.weights.model_dump(),
            "device": {**self.device.model_dump(), "scaleout_latency_us": self.device.scaleout_us},  # the fitted figure where the entry has none
            "geometry": {k: v for k, v in self.inspect.model_dump(mode="json").items() if k != "specs"},
            "notes": list(self.notes),
            "inputs": self.inputs.model_dump(exclude_none=True),
            **({"cache": self.cache.to_json()} if self.inputs.sessions_per_min is not None else {}),
        }


def memory_basis(plan: Plan, *, short: bool = False) -> str:
    """Whose reservation the memory figure counts, for every place that shows it:
    "vLLM 0.33 block reservation; steady state 179" under runtime vllm, else "steady state".
    ``short``: a table cell's width where a row beside it names the engine and its release
    ("blocks · steady state 179"; the long form was cut to "…steady st" in a three-plan table)."""
    engine, sglang = plan.kv_cache.engine, plan.kv_cache.sglang
    steady = f"steady state {plan.kv_cache.steady_state_sequences:,}"
    if sglang is not None:
        return f"token pool · {steady}" if short else f"SGLang {sglang.capacity.sglang_version} token pool; {steady}"
    if engine is not None and engine.applies:
        return f"blocks · {steady}" if short else f"vLLM {engine.vllm_version} block reservation; {steady}"
    return f"{plan.inputs.runtime} steady state"
