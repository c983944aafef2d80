"""The plan's ``cache`` section: a session workload on the plan's replicas and its cache tiers.

Built (lazily, like every section) from a plan whose inputs give a session workload
(``sessions_per_min``): the workload (:class:`~planner.cache.workload.SessionWorkload` from the
plan's context parts: shared prefix, retrieved context as the session's document, user message,
output), the tiers of one replica (:mod:`planner.cache.tiers`), Che's model of each
(:mod:`planner.cache.hitrate`) and the plan's step model for the time of each turn.

Three scenarios are timed on the same replicas: no prefix cache, the GPU pool alone, and the
GPU pool with the CPU / disk tiers. In each, a turn's outcome is drawn from one uniform number
U per request (segment s is found in tier t when U < its probability there), which keeps both
nestings the LRU tiers have (a chain's head is found whenever its tail is; a smaller tier's
content is in the larger one) and gives every segment its modelled probability. Each outcome
loads from a lower tier or recomputes, whichever is faster (:func:`~planner.cache.timing.
choose_loads`), and waits the served model's prefill wait at the workload's concurrency
(requests a second per replica x a turn's time in the engine). TTFT = wait + load + prefill +
first decode step; its p95 is the p95 over the outcomes plus the p95 wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner import latency
from planner.cache.engines import sglang_hicache_flags, vllm_offload_flags
from planner.cache.hitrate import TierFit, fit_tier
from planner.cache.tiers import Tier, gpu_tier, hicache_tiers, offload_tiers
from planner.cache.timing import TurnTiming, choose_loads
from planner.cache.workload import SessionWorkload
from planner.capacity import smallest_passing
from planner.errors import PlannerError
from planner.hardware import GIB
from planner.plan.sections import Section

if TYPE_CHECKING:
    from planner.plan.result import Plan

DEFAULT_TURNS = 1
DEFAULT_THINK_S = 30.0
DEFAULT_ZIPF = 1.0
MODEL = (
    "Che's approximation for LRU (a cache of C units keeps what was used in the last T seconds, T such that the expected units used within T is C), "
    "per segment of the session's context (shared prefix, document, each turn's history) from its reuse times: think time exponential, sessions Poisson, "
    "keys scoped to the tenant; tiers nested (every use touches every tier)"
)


def prefill_speedup(plan: Plan) -> float:
    """How many times fewer prompt tokens a request prefills under the plan's session cache: the
    plan's prompt over a turn's uncached tokens (its mean prompt less the share a cache serves);
    1 without a session workload. A prefill budget's requests a second scale by it (size's
    aggregated replicas and its disaggregated prefill pools)."""
    cache = plan.cache
    if not cache.applies:
        return 1.0
    return plan.context.input_tokens / max(1.0, cache.mean_prompt_tokens * (1.0 - cache.hit_rate))


def workload_of(inputs) -> SessionWorkload | None:
    """The session workload a plan's inputs give (None without ``sessions_per_min``)."""
    if inputs.sessions_per_min is None:
        return None
    return SessionWorkload(
        sessions_per_s=inputs.sessions_per_min / 60.0,
        turns=inputs.turns or DEFAULT_TURNS,
        think_time_s=DEFAULT_THINK_S if inputs.think_time_s is None else inputs.think_time_s,
        shared_prefix_tokens=inputs.shared_prefix_tokens,
        doc_tokens=inputs.retrieval_tokens,
        doc_catalog=inputs.doc_catalog or 0,
        doc_zipf=DEFAULT_ZIPF if inputs.doc_zipf is None else inputs.doc_zipf,
        user_tokens=max(1, inputs.user_tokens),
        output_tokens=inputs.generated_tokens or inputs.output_tokens,
        tenants=inputs.tenants,
    )


@dataclass(frozen=True, slots=True)
class TierRow(Section):
    """One tier of one replica under the workload."""

    name: str
    capacity_tokens: int
    capacity_gib: float
    unit_tokens: int
    characteristic_s: float | None  # Che's T; None: everything reused fits
    hit_rate: float  # share of prompt tokens served from this tier
    load_ms_per_hit: float  # mean load of a request that loads from it (0: the GPU pool)
    link_gb_s: float | None
    link_source: str
    cost_per_hour: float  # all replicas
    price_source: str


@dataclass(frozen=True, slots=True)
class TTFTSplit(Section):
    """Mean time to first token by phase, and its p95 (ms)."""

    mean_ms: float
    p95_ms: float
    wait_ms: float
    load_ms: float
    prefill_ms: float
    first_decode_ms: float
    hit_rate: float
    concurrency: int  # requests in flight a replica at the workload's rate
    keeps_up: bool  # False: even the memory ceiling's concurrency cannot carry the rate (the wait is the burst's)


@dataclass(frozen=True, slots=True)
class CacheSection(Section):
    """The workload's hit rate per tier, TTFT with and without the tiers, GPU time and cost."""

    applies: bool
    reason: str | None = None
    model: str = MODEL
    connector: str = ""
    sessions_per_min: float = 0.0
    turns: int = 0
    think_time_s: float = 0.0
    requests_per_s: float = 0.0
    mean_prompt_tokens: float = 0.0
    concurrency_per_replica: int = 0
    turn_seconds: float = 0.0  # a turn's time in the engine (the occupancy model's S)
    hit_rate: float = 0.0
    hit_rate_gpu_only: float = 0.0
    tiers: tuple[TierRow, ...] = ()
    ttft: TTFTSplit | None = None
    ttft_gpu_only: TTFTSplit | None = None
    ttft_no_cache: TTFTSplit | None = None
    ttft_saved_ms: float = 0.0  # mean, against recomputing every prompt
    ttft_saved_by_offload_ms: float = 0.0  # mean, against the GPU pool alone
    gpu_seconds_saved_per_hour: float = 0.0
    gpu_seconds_saved_by_offload_per_hour: float = 0.0
    tier_cost_per_hour: float = 0.0
    gpu_time_saved_value_per_hour: float | None = None  # GPU-hours the offload tiers save x the GPU-hour price
    shareable: tuple[tuple[str, str], ...] = ()
    vllm_flags: tuple[str, ...] = ()
    sglang_flags: str = ""

    def to_json(self) -> dict:
        if not self.applies:
            return {"applies": False, "reason": self.reason}
        out = Section.to_json(self)
        out["tiers"] = [t.to_json() for t in self.tiers]
        for name in ("ttft", "ttft_gpu_only", "ttft_no_cache"):
            out[name] = getattr(self, name).to_json()
        out["shareable"] = [{"part": p, "shared": who} for p, who in self.shareable]
        del out["reason"]
        return out


def pool_layout(plan: Plan) -> tuple[int, int, int]:
    """(block tokens, bytes of a block on one GPU, blocks in the GPU pool of one replica): the
    engine's figures when it sized the pool (SGLang: pages of its token pool, where the radix
    cache keeps prefixes), else the plan's block and K/V budget."""
    sg = plan.kv_cache.sglang
    if plan.inputs.runtime == "sglang" and sg is not None:  # the radix cache over SGLang's token pool, in pages
        page = sg.capacity.page_size
        return page, plan.inspect.kv_bytes_per_token * page, sg.capacity.max_total_num_tokens // page
    engine = plan.kv_cache.engine
    if engine is not None and engine.applies and engine.refusal is None:
        return engine.block_size, engine.bytes_per_block, engine.num_blocks
    block = plan.inputs.block_tokens
    per_block = plan.inspect.kv_bytes_per_token * block
    return block, per_block, plan.capacity.available_for_kv_bytes // per_block


def lower_tiers(plan: Plan, cpu_gib: float, disk_gib: float) -> tuple[str, list[Tier]]:
    """(connector, CPU and disk tiers of one replica) of ``plan`` at these sizes (GiB a replica).

    Raises:
        PlannerError: a tier too small to hold one chunk of this model.
    """
    inputs = plan.inputs
    block, per_block, pool = pool_layout(plan)
    if inputs.runtime == "sglang":
        return hicache_tiers(gpu=plan.device.name, tp=inputs.tp, page=block, bytes_per_token=plan.inspect.kv_bytes_per_token, cpu_gib=cpu_gib, disk_gib=disk_gib,
                             device_tokens=pool * block, cpu_link_gb_s=inputs.cpu_link_gb_s, disk_gb_s=inputs.disk_gb_s)  # fmt: skip
    return offload_tiers(gpu=plan.device.name, tp=inputs.tp, block_tokens=block, bytes_per_block=per_block, bytes_per_token=plan.inspect.kv_bytes_per_token,
                         cpu_gib=cpu_gib, disk_gib=disk_gib, cpu_link_gb_s=inputs.cpu_link_gb_s, disk_gb_s=inputs.disk_gb_s, vllm_version=inputs.vllm_version)  # fmt: skip


class CacheModel:
    """A plan's workload, tiers, fits and timing, evaluated per scenario (and per CPU tier size
    for the sweep)."""

    def __init__(self, plan: Plan, workload: SessionWorkload) -> None:
        inputs = plan.inputs
        self.plan, self.w = plan, workload
        self.replicas = max(1, plan.capacity.replicas)
        self.bytes_per_token = plan.inspect.kv_bytes_per_token
        self.block, self.bytes_per_block, pool = pool_layout(plan)
        self.gpu = gpu_tier(pool, self.block)
        roof = plan.roof
        est = plan.estimate
        self.per_replica_rate = workload.requests_per_s / self.replicas
        self.prompts = [workload.prompt_tokens(k) for k in range(1, workload.turns + 1)]
        self.mean_prompt = sum(self.prompts) / workload.turns
        self.max_concurrency = max(1, min(plan._ceiling.per_replica, plan.batching.seqs or plan._ceiling.per_replica))
        # a turn's time in the engine: first at the plan's load, then at the concurrency that
        # carries the workload's rate with what the GPU pool finds cached
        self.turn_s = est.end_to_end_ms / 1e3
        first = fit_tier(workload, self.block, self.gpu.capacity_units, self.replicas, self.turn_s)
        cached = sum(first.hit_tokens(k) for k in range(1, workload.turns + 1)) / workload.turns
        served, self.concurrency, _ = self.served_at_rate(cached)
        self.turn_s = self.turn_seconds(served)
        self.timing = TurnTiming(roof.prefill_s, est.first_decode_ms / 1e3, served.itl_ms / 1e3, inputs.tp)
        self.gpu_fit = fit_tier(workload, self.block, self.gpu.capacity_units, self.replicas, self.turn_s)

    def turn_seconds(self, served: latency.Served) -> float:
        """A turn's time in the engine: prefill, the wait behind other prompts, the answer."""
        return (served.prefill_one_ms + served.wait_ms + self.plan._load.generated * served.itl_ms) / 1e3

    def served_at_rate(self, cached: float) -> tuple[latency.Served, int, bool]:
        """(served latency, concurrency, keeps up) at the concurrency whose throughput
        (concurrency / a turn's time, Little's law) is the workload's request rate a replica,
        with ``cached`` prompt tokens of a mean prompt found cached; the memory ceiling when
        even that falls short (the replica does not keep up)."""
        plan, load = self.plan, self.plan._load
        prompt = round(self.mean_prompt)
        hit = min(round(cached), prompt - 1)

        def at(c: int) -> latency.Served:
            return latency.served(plan.roof, prompt, hit, load.generated, c, load.kv_mid, load.mid, plan.batching.tokens)

        def enough(c: int) -> bool:
            return c >= self.per_replica_rate * self.turn_seconds(at(c))

        top = self.max_concurrency
        if not enough(top):
            return at(top), top, False
        c = smallest_passing(enough, 0, top)
        return at(c), c, True

    def lower_tiers(self, cpu_gib: float, disk_gib: float) -> tuple[str, list[Tier]]:
        return lower_tiers(self.plan, cpu_gib, disk_gib)

    def fit(self, tier: Tier) -> TierFit:
        return fit_tier(self.w, tier.unit_tokens, tier.capacity_units, self.replicas, self.turn_s)

    def scenario(self, tiers: list[Tier], fits: list[TierFit]) -> tuple[TTFTSplit, list[float], list[float]]:
        """(TTFT split, tokens a session is served from each tier, the mean load of a request
        that loads from each tier in ms)."""
        w, timing = self.w, self.timing
        n = w.turns
        segs = [w.segments(t.unit_tokens) for t in tiers]
        served = [0.0] * len(tiers)
        load_weight = [0.0] * len(tiers)  # probability x load seconds, of the requests that load from a tier
        loading = [0.0] * len(tiers)  # probability a request loads from the tier
        outcomes: list[tuple[float, float]] = []  # (TTFT less the wait, probability)
        mean_load = mean_prefill = cached_total = 0.0
        for k in range(1, n + 1):
            prompt = self.prompts[k - 1]
            cap = prompt - 1
            cuts = sorted({p for fit in fits for p in fit.presence[k - 1] if 0.0 < p < 1.0} | {1.0})
            lo = 0.0
            for hi in cuts:
                u = (lo + hi) / 2.0
                weight = (hi - lo) / n
                lo = hi
                found = []
                for fit, sg, tier in zip(fits, segs, tiers, strict=True):
                    p_prefix, p_doc, p_hist = fit.presence[k - 1]
                    units = (sg.prefix if u < p_prefix else 0) + (sg.doc if u < p_doc else 0) + (sg.history_before(k) if u < p_hist else 0)
                    found.append(min(units * tier.unit_tokens, cap - cap % tier.unit_tokens))
                gpu_hit = found[0] if found else 0
                lower, best = [], gpu_hit
                for f, tier in zip(found[1:], tiers[1:], strict=True):
                    lower.append((max(0, f - best), tier.load_s_per_token))
                    best = max(best, f)
                loaded, load_s, cached = choose_loads(timing, prompt, gpu_hit, lower)
                prefill = timing.prefill(prompt - cached, cached)
                if found:
                    served[0] += weight * gpu_hit
                for i, tokens in enumerate(loaded, start=1):
                    if tokens:
                        served[i] += weight * tokens
                        load_weight[i] += weight * tokens * tiers[i].load_s_per_token
                        loading[i] += weight
                mean_load += weight * load_s
                mean_prefill += weight * prefill
                cached_total += weight * cached
                outcomes.append((load_s + prefill + timing.first_decode_s, weight))
        mean_prompt = self.mean_prompt
        wait, concurrency, keeps_up = self.served_at_rate(cached_total)
        p95 = _weighted_p95(outcomes)
        # a replica that cannot carry the rate: its queue grows; the wait shown is the burst's (every prompt at once)
        wait_ms, wait_p95_ms = (wait.wait_ms, wait.wait_p95_ms) if keeps_up else (wait.burst_wait_ms, wait.burst_wait_max_ms)
        split = TTFTSplit(
            mean_ms=wait_ms + (mean_load + mean_prefill + timing.first_decode_s) * 1e3,
            p95_ms=wait_p95_ms + p95 * 1e3,
            wait_ms=wait_ms,
            load_ms=mean_load * 1e3,
            prefill_ms=mean_prefill * 1e3,
            first_decode_ms=timing.first_decode_s * 1e3,
            hit_rate=cached_total / mean_prompt,
            concurrency=concurrency,
            keeps_up=keeps_up,
        )
        return split, [s * n for s in served], [lw / p * 1e3 if p else 0.0 for lw, p in zip(load_weight, loading, strict=True)]


SWEEP_GIB = (0.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0)  # CPU tier sizes the chart sweeps (GiB a replica)


@dataclass(frozen=True, slots=True)
class SweepPoint(Section):
    """The workload at one CPU tier size (the Plan page's chart)."""

    cpu_tier_gib: float
    hit_rate: float
    ttft_mean_ms: float
    ttft_p95_ms: float
    tier_cost_per_hour: float  # all replicas


def cpu_tier_sweep(plan: Plan, sizes: tuple[float, ...] = SWEEP_GIB) -> tuple[SweepPoint, ...]:
    """Hit rate and TTFT of the plan's workload at each CPU tier size (its disk tier kept);
    empty when the plan has no workload the cache model applies to. A size too small for one
    chunk is left out."""
    w = workload_of(plan.inputs)
    if w is None or not_applicable(plan):
        return ()
    model = CacheModel(plan, w)
    out = []
    for gib in sizes:
        try:
            _, lower = model.lower_tiers(gib, plan.inputs.disk_tier_gib or 0.0)
        except PlannerError:
            continue
        tiers = [model.gpu, *lower]
        split, _, _ = model.scenario(tiers, [model.gpu_fit, *(model.fit(t) for t in lower)])
        out.append(SweepPoint(gib, split.hit_rate, split.mean_ms, split.p95_ms, sum(t.usd_per_hour for t in lower) * model.replicas))
    return tuple(out)


def sim_setup(plan: Plan) -> tuple[SessionWorkload, list[Tier], TurnTiming, int]:
    """(workload, tiers of one replica, turn timing, replicas) of a plan with a session workload,
    for :func:`planner.simulate.sessions.simulate_sessions`.

    Raises:
        PlannerError: no workload, or one the cache model does not apply to.
    """
    w = workload_of(plan.inputs)
    if w is None:
        raise PlannerError("sessions_per_min", None, "give a session workload (sessions per minute) to simulate its cache")
    reason = not_applicable(plan)
    if reason:
        raise PlannerError("runtime", plan.inputs.runtime, reason)
    model = CacheModel(plan, w)
    _, lower = model.lower_tiers(plan.inputs.cpu_tier_gib or 0.0, plan.inputs.disk_tier_gib or 0.0)
    return w, [model.gpu, *lower], model.timing, model.replicas


def _weighted_p95(outcomes: list[tuple[float, float]]) -> float:
    """The 95th percentile of a discrete distribution of (value, probability)."""
    total = sum(p for _, p in outcomes)
    cum = 0.0
    for value, p in sorted(outcomes):
        cum += p
        if cum >= 0.95 * total - 1e-12:
            return value
    return max((v for v, _ in outcomes), default=0.0)


def offload_flags(plan: Plan) -> tuple[str, ...]:
    """The ``vllm serve`` flags (and LMCache's environment, ``environment: ...``) of the plan's
    CPU / disk tiers, with or without a session workload; () without tiers, under another runtime
    or where the cache model does not apply."""
    inputs = plan.inputs
    cpu, disk = inputs.cpu_tier_gib or 0.0, inputs.disk_tier_gib or 0.0
    if not (cpu or disk) or inputs.runtime != "vllm" or not_applicable(plan):
        return ()
    try:
        connector, _ = lower_tiers(plan, cpu, disk)
    except PlannerError:
        return ()
    return vllm_offload_flags(inputs.vllm_version, connector, cpu, disk, bytes_per_block=pool_layout(plan)[1], tp=inputs.tp)


def not_applicable(plan: Plan) -> str | None:
    """Why a plan's workload gets no cache model (None: it does)."""
    inputs = plan.inputs
    if inputs.runtime == "sglang":
        sg = plan.kv_cache.sglang
        if sg is None:
            return "SGLang did not size a token pool for this plan: there is no radix cache to model"
        if sg.capacity.swa_max_total_num_tokens is not None or sg.capacity.max_mamba_cache_size is not None:
            return "SGLang's radix cache over a sliding-window or Mamba pool is not modelled (the full-attention token pool only)"
    elif inputs.runtime != "vllm" or inputs.reservation == "static":
        return "a prefix cache needs a paged engine (runtime vllm with a dynamic or paged reservation, or runtime sglang)"
    if inputs.observed:
        return "observed latencies time one request, not a workload's turns: clear them for the cache model"
    if not plan.inspect.kv_bytes_per_token:
        return "no layer's cache grows with the context: there is no prefix to reuse"
    w = workload_of(inputs)
    top = plan.context.maximum_context_tokens
    if w is not None and w.prompt_tokens(w.turns) + w.output_tokens > top:  # the engine refuses a longer request
        return f"turn {w.turns:,}'s prompt and answer are {w.prompt_tokens(w.turns) + w.output_tokens:,} tokens, more than the {top:,}-token maximum context: fewer turns or shorter messages"
    return None


def cache_section(plan: Plan) -> CacheSection:
    """The ``cache`` section of ``plan`` (see the module docstring)."""
    w = workload_of(plan.inputs)
    if w is None:
        tiers = plan.inputs.cpu_tier_gib or plan.inputs.disk_tier_gib
        return CacheSection(applies=False, reason="no session workload (sessions per minute) given" + (": the tiers are in the start-up command and a trace replay uses them" if tiers else ""))
    reason = not_applicable(plan)
    if reason:
        return CacheSection(applies=False, reason=reason)
    inputs = plan.inputs
    try:
        model = CacheModel(plan, w)
        connector, lower = model.lower_tiers(inputs.cpu_tier_gib or 0.0, inputs.disk_tier_gib or 0.0)
    except PlannerError as exc:  # a tier too small for one chunk of this model
        return CacheSection(applies=False, reason=str(exc))
    tiers = [model.gpu, *lower]
    fits = [model.gpu_fit, *(model.fit(t) for t in lower)]
    with_tiers, served, load_ms = model.scenario(tiers, fits)
    gpu_only, gpu_served, _ = model.scenario(tiers[:1], fits[:1])
    none, _, _ = model.scenario([], [])
    prompt = w.prompt_total()
    reps = model.replicas
    rows = []
    for i, (tier, fit) in enumerate(zip(tiers, fits, strict=True)):
        share = served[i] / prompt
        rows.append(TierRow(
            name=tier.name, capacity_tokens=tier.capacity_tokens, capacity_gib=(tier.bytes or tier.capacity_tokens * model.bytes_per_token) / GIB, unit_tokens=tier.unit_tokens,
            characteristic_s=None if math.isinf(fit.characteristic_s) else fit.characteristic_s, hit_rate=share,
            load_ms_per_hit=load_ms[i],
            link_gb_s=tier.link_gb_s, link_source=tier.link_source, cost_per_hour=tier.usd_per_hour * reps, price_source=tier.price_source,
        ))  # fmt: skip
    rate_h = w.requests_per_s * 3600.0
    gpus = inputs.tp
    saved = (none.prefill_ms - with_tiers.prefill_ms) / 1e3 * rate_h * gpus
    saved_offload = (gpu_only.prefill_ms - with_tiers.prefill_ms) / 1e3 * rate_h * gpus
    tier_cost = sum(r.cost_per_hour for r in rows)
    price = inputs.gpu_hour_price
    return CacheSection(
        applies=True,
        connector=connector if lower else "",
        sessions_per_min=inputs.sessions_per_min,
        turns=w.turns,
        think_time_s=w.think_time_s,
        requests_per_s=w.requests_per_s,
        mean_prompt_tokens=prompt / w.turns,
        concurrency_per_replica=with_tiers.concurrency,
        turn_seconds=model.turn_s,
        hit_rate=sum(served) / prompt,
        hit_rate_gpu_only=gpu_served[0] / prompt,
        tiers=tuple(rows),
        ttft=with_tiers,
        ttft_gpu_only=gpu_only,
        ttft_no_cache=none,
        ttft_saved_ms=none.mean_ms - with_tiers.mean_ms,
        ttft_saved_by_offload_ms=gpu_only.mean_ms - with_tiers.mean_ms,
        gpu_seconds_saved_per_hour=saved,
        gpu_seconds_saved_by_offload_per_hour=saved_offload,
        tier_cost_per_hour=tier_cost,
        gpu_time_saved_value_per_hour=saved_offload / 3600.0 * price if price is not None and lower else None,
        shareable=w.shareable(),
        vllm_flags=offload_flags(plan) if lower else (),
        sglang_flags=sglang_hicache_flags(
            inputs.cpu_tier_gib or 0.0, inputs.disk_tier_gib or 0.0, tp=inputs.tp, device_tokens=model.gpu.capacity_tokens, host_tokens=next((t.capacity_tokens for t in lower if t.name == "cpu"), 0)
        )
        if lower
        else "",
    )
