"""Disaggregated serving: a prefill pool and a decode pool, and the K/V each request moves between them.

A disaggregated deployment (NVIDIA Dynamo, llm-d, SGLang PD, vLLM's NixlConnector) runs ``x``
prefill replicas of ``tp_p`` GPUs (kind A) and ``y`` decode replicas of ``tp_d`` GPUs (kind B).
Each pool is planned by :func:`planner.plan.compute_plan` (its memory and step model):

* the **prefill pool** plans the prompt alone (one output token: the prefill returns the first
  token and frees the request once its K/V is pulled). A replica prefills ``1 / S`` prompts a
  second, S = the prompt's share of a full token budget (``roofline.prefill_capacity_per_s``);
  prompts queue for it as an M/D/1 queue (:func:`planner.latency.queue_wait`, as the served
  model queues them), so at utilisation rho its p95 TTFT is its own prefill plus the queue's p95.
  Under a session workload the pool's GPUs cache the turns (:mod:`planner.cache`): a prompt takes
  only its uncached tokens' share of the budget, and its own prefill is the turns' mean of loading
  the cached tokens and prefilling the rest. The decode pool is taken to hold none of the earlier
  turns, so each request still pulls its whole prompt but the shared prefix;
* the **KV transfer** moves the prompt's K/V in the decode pool's layout: each decode GPU pulls
  its shard (``kv_at(prompt)`` of the decode plan), one NIXL descriptor per block and layer for K
  and for V; the link is NVLink when the whole deployment sits in one scale-up domain, else the
  scale-out NIC (InfiniBand / RoCE, the catalog's ``scaleout_gb_s``), and the slower side
  (receivers, or the prefill GPUs sending all decode shards) bounds it. NIXL's per-descriptor
  cost is :data:`NIXL_DESCRIPTOR_S`;
* the **decode pool** plans the whole context; its steps carry no prefill chunks, so its ITL is
  the decode step at its concurrency (the served model's ``itl_ms_decode_only``), and a request
  reaches its first token :data:`HANDOVER_STEPS` decode steps after the pull completes, after a
  second API hop (the decode server tokenises the prompt again).

TTFT = the prefill pool's (queue + prefill) + the transfer + the handover + the second API hop.
The pool ratio that balances the rates is ``x / y = mu_d / (rho* mu_p)``: decode replicas finish
``mu_d = c / T_decode`` requests a second at ``c`` sequences each, prefill replicas take ``mu_p``
prompts a second at most and ``rho*`` is the highest utilisation at which the TTFT SLO holds.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import BaseModel, ConfigDict

from planner import capacity, latency
from planner.errors import PlannerError
from planner.hardware import Device
from planner.plan import Plan, PreparedModel, compute_plan, make_inputs, serving
from planner.plan.stages import kv_held
from planner.pools import DISAGG_FORMAT, MAX_POOL_REPLICAS, POOLS_RE, PoolSpec, format_pools, parse_pools  # noqa: F401 - the pools text, read in planner.pools
from planner.roots import illinois
from planner.units import fmt_ms_whole, ms_whole

# NIXL's cost per transfer descriptor (one block of one layer's K or V on one GPU). vLLM's RFC
# #50913 (NixlConnector, 8 x L20, Qwen3-32B-FP8 TP2 3P1D, ~4.9k-token prompts): --block-size 16
# fragments a pull into ~39,000 descriptors of 8 KiB, --block-size 64 into ~9,800, and the larger
# block cut the transfer window by ~58 ms: 58 ms / ~29,000 descriptors = 2.0 us each.
NIXL_DESCRIPTOR_S = 2.0e-6
NIXL_SOURCE = (
    "NIXL cost per descriptor 2.0 us, derived from vLLM RFC #50913 (NixlConnector on 8 x L20, Qwen3-32B-FP8 TP2, ~4.9k-token prompts: "
    "block size 16 -> 64 cut ~29,000 descriptors and ~58 ms from the transfer window)"
)
# The decode side sees a pulled request's first token two steps after the pull completes: the step in
# flight ends before the scheduler sees the finished pull, and the next one recomputes token 1 (vLLM
# RFC #50913 / PR #51919: "recomputing a token the prefill already sampled, waiting for engine-step boundaries")
HANDOVER_STEPS = 2
HANDOVER_SOURCE = "vLLM NixlConnector handover (RFC #50913, PR #51919): the step in flight plus one step that recomputes the first token, and a second API hop at the decode server"
PREFILL_MAX_UTILISATION = 0.9  # without a TTFT SLO the prefill queue is still kept short of saturation
RATIO_DECODE_REPLICAS = 16  # integer pool ratios x:y are searched with y up to this many decode replicas


# --------------------------------------------------------------------------- one replica of each pool


def _p95_over_service(rho: float) -> float:
    """The M/D/1 p95 wait in units of the service time (:func:`latency.queue_wait` with S = 1)."""
    return latency.queue_wait(rho, 1.0)[1] if 0.0 < rho < 1.0 else (0.0 if rho <= 0 else math.inf)


_RHO_GRID = tuple(i / 2000 for i in range(int(PREFILL_MAX_UTILISATION * 2000) + 1))
_P95_GRID = tuple(_p95_over_service(r) for r in _RHO_GRID)  # non-decreasing in rho


def max_utilisation(budget_s: float, service_s: float) -> float:
    """The highest prefill-queue utilisation whose p95 wait fits in ``budget_s`` (at most
    :data:`PREFILL_MAX_UTILISATION`; 0 when even an empty queue leaves no room)."""
    if budget_s < 0 or service_s <= 0:
        return 0.0
    k = bisect.bisect_right(_P95_GRID, budget_s / service_s) - 1
    return _RHO_GRID[max(0, k)]


@dataclass(frozen=True)
class PoolModel:
    """One replica of a pool, planned by :func:`compute_plan` (``plan``: one sequence on ``tp`` GPUs)."""

    role: str
    gpu: str
    tp: int
    ep: int
    kv_dtype: str
    price: float  # USD per GPU-hour
    plan: Plan
    values: dict  # the plan inputs (without the load) that reproduce this replica

    @property
    def device(self) -> Device:
        return self.plan.device

    @cached_property
    def kv(self) -> str:
        """The KV dtype this replica caches in (the plan's, "auto" resolved)."""
        return self.plan.kv_cache.kv_dtype

    @cached_property
    def prompt_tokens(self) -> int:
        return self.plan.context.input_tokens

    @cached_property
    def cached_tokens(self) -> int:
        return int(self.plan.prefix.cached_prompt_tokens_expected)

    @cached_property
    def memory_sequences(self) -> int:
        """Sequences one replica's K/V pool holds at this pool's reservation (vLLM's admission)."""
        return self.plan.kv_cache.maximum_sequences_by_memory

    @cached_property
    def runtime_sequences(self) -> int:
        """vLLM's default ``max_num_seqs`` on this GPU (:func:`latency.runtime_limits`)."""
        d = self.device
        return latency.runtime_limits("vllm", d.memory_gib, d.generation, d.name).max_num_seqs

    @cached_property
    def api_s(self) -> float:
        """The API server's preprocessing of one request (tokenising the prompt)."""
        return latency.api_preprocess_s(self.plan.roof.eff, self.prompt_tokens)

    @cached_property
    def kv_prompt_bytes(self) -> int:
        """K/V (and recurrent state) one GPU of this pool holds for the prompt (not the cached prefix)."""
        return kv_held(self.plan.inspect, self.plan.reservation)(self.prompt_tokens) - kv_held(self.plan.inspect, self.plan.reservation)(self.cached_tokens)

    @cached_property
    def descriptors(self) -> int:
        """NIXL descriptors one GPU's share of the prompt takes: a block of one layer's K and one
        of its V (one for a latent or single cache) per block the prompt fills."""
        block = self.plan.inputs.block_tokens
        total = 0
        for spec in self.plan.inspect.specs:
            held = spec.tokens_held(self.prompt_tokens) - spec.tokens_held(self.cached_tokens)
            if held > 0:
                total += -(-held // block) * spec.num_layers * (2 if spec.cache == "kv" and not spec.latent else 1)
        return total


@dataclass(frozen=True)
class PrefillModel(PoolModel):
    """A prefill replica: prompts a second and the p95 TTFT at a utilisation."""

    # a session workload's cache (planner.cache.section.prefill_speedup): times fewer prompt
    # tokens a request prefills, and the share of prompt tokens the cache serves (None: no sessions)
    speedup: float = 1.0
    cache_hit_rate: float | None = None
    # a turn's own prefill under that cache: the mean over the workload's turns of loading the
    # cached tokens from their tier and prefilling the rest (the cache section's TTFT terms)
    cached_prefill_s: float | None = None

    @cached_property
    def service_s(self) -> float:
        """Seconds of the token budget one prompt takes (1 / prompts a second at most): a session
        workload's turns prefill only their uncached tokens."""
        return 1.0 / max(self.plan.roofline.prefill_capacity_per_s * self.speedup, 1e-12)

    @cached_property
    def prefill_s(self) -> float:
        """One prompt's own prefill (in TTFT): a session workload's turn prefills only its uncached tokens."""
        if self.cached_prefill_s is not None:
            return self.cached_prefill_s
        return self.plan.roofline.prefill_ms_at_1_request / 1e3

    def ttft_p95_s(self, rho: float) -> float:
        """Own prefill + the queue's p95 wait at utilisation ``rho`` (inf at rho >= 1)."""
        return self.prefill_s + _p95_over_service(rho) * self.service_s

    def queue_p95_s(self, rho: float) -> float:
        return _p95_over_service(rho) * self.service_s


@dataclass(frozen=True)
class DecodeModel(PoolModel):
    """A decode replica: its decode step at ``c`` sequences (no prefill chunks in its steps)."""

    @cached_property
    def generated(self) -> int:
        return self.plan.inputs.output_tokens

    @cached_property
    def _steps(self) -> dict[int, float]:
        return {}

    def tpot_s(self, sequences: int) -> float:
        """The decode step at ``sequences`` sequences (memoised: the search asks for each many times)."""
        hit = self._steps.get(sequences)
        if hit is None:
            hit = self._steps[sequences] = serving.decode_step_s(self.plan._load.setup, sequences)  # the plan's serving model
        return hit

    def step_at(self, sequences: float) -> float:
        """The decode step at a mean of ``sequences`` sequences (a load spread over replicas is not
        whole): between the steps of the whole numbers around it, linearly."""
        low = max(1, math.floor(sequences))
        frac = sequences - low
        return self.tpot_s(low) if frac <= 0 else self.tpot_s(low) + frac * (self.tpot_s(low + 1) - self.tpot_s(low))

    @cached_property
    def max_sequences(self) -> int:
        """Memory's and vLLM's default limit on sequences a replica runs."""
        return min(self.memory_sequences, self.runtime_sequences)

    def max_concurrency(self, itl_slo_ms: float | None) -> int:
        """Most sequences a replica runs with its decode step inside the ITL SLO (0: not even one)."""
        top = self.max_sequences
        if top < 1 or itl_slo_ms is None:
            return max(0, top)
        return capacity.largest_within(lambda c: self.tpot_s(c) * 1e3, itl_slo_ms, top)


def _pool_values(base: dict, gpu: str, tp: int, ep: int, kv: str, price: float, role: str) -> dict:
    values = {**base, "gpu": gpu, "tp": tp, "ep": ep, "kv_dtype": kv, "gpu_hour_price": price, "gpu_count": tp}
    if role == "prefill":
        values["output_tokens"] = 1  # the prefill returns the first token and hands the request over
    return values


def pool_model(model: PreparedModel, base: dict, role: str, gpu: str, tp: int, ep: int, kv: str, price: float) -> PoolModel | str:
    """One replica of a pool (:class:`PrefillModel` or :class:`DecodeModel`), or why it cannot run."""
    values = _pool_values(base, gpu, tp, ep, kv, price, role)
    try:
        plan = compute_plan(make_inputs(**values, sequences=1), model)
    except PlannerError as exc:
        return exc.reason.split(";")[0]
    if plan.kv_cache.maximum_sequences_by_memory < 1:
        return f"one sequence's K/V ({plan.kv_cache.mib_per_reserved_sequence:,} MiB) does not fit next to the weights"
    if role == "decode":
        return DecodeModel(role=role, gpu=gpu, tp=tp, ep=ep, kv_dtype=kv, price=price, plan=plan, values=values)
    cache = {}
    if base.get("sessions_per_min") is not None:  # the sessions' cache on this pool's GPUs: planned with the turns' real answers (the prefill plan has one token)
        from planner.cache.section import prefill_speedup

        try:
            whole = compute_plan(make_inputs(**_pool_values(base, gpu, tp, ep, kv, price, "decode"), sequences=1), model)
        except PlannerError as exc:  # the turns' real answers may not fit where one token does: why it cannot run, as above
            return exc.reason.split(";")[0]
        if whole.cache.applies:
            cache = {"speedup": prefill_speedup(whole), "cache_hit_rate": whole.cache.hit_rate}
            if whole.cache.ttft is not None:
                cache["cached_prefill_s"] = (whole.cache.ttft.load_ms + whole.cache.ttft.prefill_ms) / 1e3
    return PrefillModel(role=role, gpu=gpu, tp=tp, ep=ep, kv_dtype=kv, price=price, plan=plan, values=values, **cache)


# --------------------------------------------------------------------------- the transfer


class KVTransfer(BaseModel):
    """One request's K/V moved from the prefill pool to the decode pool."""

    model_config = ConfigDict(frozen=True)

    bytes_per_request: int  # the prompt's K/V over the decode pool's GPUs (its layout)
    bytes_per_decode_gpu: int
    bytes_per_prefill_gpu: int  # the decode shards each prefill GPU sends
    descriptors_per_gpu: int
    block_tokens: int
    link: str  # "NVLink" (one scale-up domain) or "scale-out NIC"
    link_gb_s: float
    link_latency_us: float
    ms: float
    terms_ms: dict[str, float]
    source: str


def link_between(prefill: PoolModel, decode: PoolModel, gpus_total: int) -> tuple[str, float, float, str]:
    """(link name, GB/s per GPU per direction, latency us, source) of the K/V's path: NVLink when
    both pools are one GPU kind and the whole deployment fits its scale-up domain, else the slower
    of the two pools' scale-out NICs."""
    p, d = prefill.device, decode.device
    if p.name == d.name and gpus_total <= p.node_gpus:
        return "NVLink", p.link_gb_s, p.link_latency_us, p.link_source
    if p.scaleout_gb_s <= d.scaleout_gb_s:
        return "scale-out NIC", p.scaleout_gb_s, max(p.nic_latency_us, d.nic_latency_us), p.scaleout_source
    return "scale-out NIC", d.scaleout_gb_s, max(p.nic_latency_us, d.nic_latency_us), d.scaleout_source


def transfer_terms(prefill: PoolModel, decode: PoolModel, gpus_total: int) -> tuple[dict[str, float], tuple[str, float, float, str], int, int]:
    """(the transfer's terms in ms, the link, bytes per decode GPU, bytes per prefill GPU): the
    slower of the decode GPUs receiving their shards and the prefill GPUs sending them, NIXL's
    descriptors (each decode GPU posts the reads of its own shard, in parallel) and the link's latency."""
    link = link_between(prefill, decode, gpus_total)
    per_decode = decode.kv_prompt_bytes
    per_prefill = -(-per_decode * decode.tp // prefill.tp)
    terms = {"link_latency": link[2] / 1e3, "bytes": max(per_decode, per_prefill) / (link[1] * 1e6), "nixl_descriptors": decode.descriptors * NIXL_DESCRIPTOR_S * 1e3}
    return terms, link, per_decode, per_prefill


def transfer_ms(prefill: PoolModel, decode: PoolModel, gpus_total: int) -> float:
    """:func:`kv_transfer`'s milliseconds alone (the search's inner loop)."""
    link = link_between(prefill, decode, gpus_total)
    per_decode = decode.kv_prompt_bytes
    return link[2] / 1e3 + max(per_decode, -(-per_decode * decode.tp // prefill.tp)) / (link[1] * 1e6) + decode.descriptors * NIXL_DESCRIPTOR_S * 1e3


def kv_transfer(prefill: PoolModel, decode: PoolModel, gpus_total: int) -> KVTransfer:
    """The K/V transfer of one request (see :func:`transfer_terms` and the module docstring)."""
    terms, (link, gb_s, latency_us, source), per_decode, per_prefill = transfer_terms(prefill, decode, gpus_total)
    return KVTransfer(
        bytes_per_request=per_decode * decode.tp,
        bytes_per_decode_gpu=per_decode,
        bytes_per_prefill_gpu=per_prefill,
        descriptors_per_gpu=decode.descriptors,
        block_tokens=decode.plan.inputs.block_tokens,
        link=link,
        link_gb_s=gb_s,
        link_latency_us=latency_us,
        ms=sum(terms.values()),
        terms_ms=terms,
        source=f"{link}: {source}; {NIXL_SOURCE}",
    )


# --------------------------------------------------------------------------- a pairing of the two pools


@dataclass(frozen=True)
class Operating:
    """A disaggregated deployment at one operating point: ``prefill_replicas`` x ``decode_replicas``,
    ``sequences`` per decode replica, ``rate`` requests a second in all."""

    prefill: PrefillModel
    decode: DecodeModel
    prefill_replicas: int
    decode_replicas: int
    sequences: float  # per decode replica
    rate: float  # requests/s
    transfer: KVTransfer
    ttft_terms_ms: dict[str, float] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.prefill_replicas * self.prefill.tp + self.decode_replicas * self.decode.tp

    @property
    def tpot_ms(self) -> float:
        return self.decode.step_at(self.sequences) * 1e3

    @property
    def ttft_ms(self) -> float:
        return sum(self.ttft_terms_ms.values())

    @property
    def e2e_mean_s(self) -> float:
        """A request's mean end-to-end time: the mean prefill queue instead of its p95, then its other tokens."""
        rho = self.prefill_utilisation
        queue = latency.queue_wait(rho, self.prefill.service_s)[0] if rho < 1 else math.inf
        ttft = (self.ttft_ms - self.ttft_terms_ms["prefill_queue_p95"]) / 1e3 + queue
        return ttft + max(0, self.decode.generated - 1) * self.tpot_ms / 1e3

    @property
    def prefill_utilisation(self) -> float:
        return self.rate / (self.prefill_replicas / self.prefill.service_s) if self.prefill_replicas else math.inf

    @property
    def decode_utilisation(self) -> float:
        return self.sequences / max(1, self.decode.max_sequences)

    @property
    def output_tokens_per_s(self) -> float:
        return self.rate * self.decode.generated

    @property
    def cost_per_hour(self) -> float:
        return self.prefill_replicas * self.prefill.tp * self.prefill.price + self.decode_replicas * self.decode.tp * self.decode.price


def handover_s(decode: DecodeModel, sequences: float) -> float:
    """The decode side's part of the first token: :data:`HANDOVER_STEPS` decode steps and the second API hop."""
    return HANDOVER_STEPS * decode.step_at(sequences) + decode.api_s


def decode_time_s(decode: DecodeModel, sequences: float, transfer_ms: float) -> float:
    """Seconds a request holds its decode slot: the pull, the handover steps and the other tokens."""
    tpot = decode.step_at(sequences)
    return transfer_ms / 1e3 + HANDOVER_STEPS * tpot + max(0, decode.generated - 1) * tpot


def operate(prefill: PrefillModel, decode: DecodeModel, x: int, y: int, rate: float, sequences: float | None = None) -> Operating:
    """The deployment ``x`` prefill x ``y`` decode replicas at ``rate`` requests a second (the
    decode pool holds ``rate`` x its time per request, split over its replicas, unless ``sequences``
    per decode replica is given)."""
    transfer = kv_transfer(prefill, decode, x * prefill.tp + y * decode.tp)
    if sequences is None:  # Little: the decode pool holds rate x each request's time there, which grows with its load
        sequences = rate * decode_time_s(decode, 1, transfer.ms) / y
        for _ in range(20):
            new = rate * decode_time_s(decode, sequences, transfer.ms) / y
            if abs(new - sequences) <= 1e-6 * max(1.0, sequences):
                break
            sequences = new
    rho = rate * prefill.service_s / x if x else math.inf
    terms = {
        "prefill": prefill.prefill_s * 1e3,
        "prefill_queue_p95": prefill.queue_p95_s(rho) * 1e3,
        "kv_transfer": transfer.ms,
        "handover_steps": HANDOVER_STEPS * decode.step_at(sequences) * 1e3,
        "decode_api_hop": decode.api_s * 1e3,
    }
    return Operating(prefill, decode, x, y, sequences, rate, transfer, terms)


def at_users(prefill: PrefillModel, decode: DecodeModel, x: int, y: int, users: float) -> Operating:
    """The deployment ``x`` prefill x ``y`` decode replicas with ``users`` requests in flight: a
    request spends its mean end-to-end time in the system, so users = rate x e2e (Little); e2e grows
    with the rate (the prefill queue, the decode pool's load), so the rate is solved for
    (:func:`planner.roots.illinois`; past saturation its step halves the bracket). The one split
    of the users between the pools that the plan (:func:`plan_disagg`) and the size search
    (:func:`hold_users`) both show."""
    def excess(rate: float) -> float:
        return rate * operate(prefill, decode, x, y, rate).e2e_mean_s - users  # increasing in the rate

    hi = users / max(1e-9, prefill.prefill_s + decode_time_s(decode, 1, 0.0))  # the rate if nothing waited: above the root
    rate = illinois(excess, 0.0, hi, -float(users), excess(hi), f_tol=1e-9 * users, x_rel=1e-12, iterations=200)
    return operate(prefill, decode, x, y, rate)


def hold_users(prefill: PrefillModel, decode: DecodeModel, x: int, y: int, users: int, sequences: int, ttft_slo_ms: float | None) -> Operating | None:
    """The fewest replicas, from ``x`` prefill x ``y`` decode up, that hold ``users`` requests in
    flight (:func:`at_users`) with at most ``sequences`` per decode replica, the prefill queue at
    most :data:`PREFILL_MAX_UTILISATION` busy and the TTFT SLO (None past :data:`MAX_POOL_REPLICAS`).
    Prefill replicas are found by doubling the step, then halving back to the fewest that hold."""

    def prefill_holds(op: Operating) -> bool:
        return op.prefill_utilisation <= PREFILL_MAX_UTILISATION + 1e-9 and (ttft_slo_ms is None or op.ttft_ms <= ttft_slo_ms)

    while x <= MAX_POOL_REPLICAS and y <= MAX_POOL_REPLICAS:
        op = at_users(prefill, decode, x, y, users)
        if op.sequences > sequences + 1e-9:
            y = max(y + 1, math.ceil(y * op.sequences / sequences - 1e-9))
            continue
        if prefill_holds(op):
            return op
        lo, step = x, 1  # lo misses
        while not prefill_holds(at_users(prefill, decode, lo + step, y, users)):
            lo += step
            step *= 2
            if lo > MAX_POOL_REPLICAS:
                return None
        hi = lo + step  # hi holds
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if prefill_holds(at_users(prefill, decode, mid, y, users)) else (mid, hi)
        x = hi  # more prefill raises the rate: the decode pool is checked again
    return None


def balanced_ratio(prefill: PrefillModel, decode: DecodeModel, sequences: int, ttft_slo_ms: float | None, gpus_hint: int = 0) -> tuple[float, float]:
    """(prefill replicas per decode replica that balance the pools' rates, the prefill utilisation
    rho* they run at): decode replicas finish c / T_decode requests a second; a prefill replica
    takes rho* / S of them, rho* the highest utilisation at which the TTFT SLO still holds
    (0 when the SLO cannot hold at any)."""
    transfer = kv_transfer(prefill, decode, gpus_hint or prefill.tp + decode.tp)
    mu_d = sequences / decode_time_s(decode, sequences, transfer.ms)
    if ttft_slo_ms is None:
        rho = PREFILL_MAX_UTILISATION
    else:
        room = ttft_slo_ms / 1e3 - prefill.prefill_s - transfer.ms / 1e3 - handover_s(decode, sequences)
        rho = max_utilisation(room, prefill.service_s) if room >= 0 else 0.0
    if rho <= 0:
        return math.inf, 0.0
    return mu_d * prefill.service_s / rho, rho


def size_pools(prefill: PrefillModel, decode: DecodeModel, rate: float, sequences: int, ttft_slo_ms: float | None) -> Operating | None:
    """The fewest replicas of each pool that hold ``rate`` requests a second with at most
    ``sequences`` per decode replica and the TTFT SLO (None when the SLO cannot hold)."""
    transfer = kv_transfer(prefill, decode, prefill.tp + decode.tp)
    y = max(1, math.ceil(rate * decode_time_s(decode, sequences, transfer.ms) / sequences - 1e-9))
    for _ in range(3):  # the link (NVLink or NIC) and the utilisations depend on the sizes: settle them
        _r, rho = balanced_ratio(prefill, decode, sequences, ttft_slo_ms, prefill.tp + y * decode.tp)
        if rho <= 0:
            return None
        x = max(1, math.ceil(rate * prefill.service_s / rho - 1e-9))
        op = operate(prefill, decode, x, y, rate)
        if op.sequences > sequences + 1e-9:
            y = max(y + 1, math.ceil(y * op.sequences / sequences))
            continue
        if ttft_slo_ms is not None and op.ttft_ms > ttft_slo_ms:
            x += 1
            op = operate(prefill, decode, x, y, rate)
            if op.ttft_ms > ttft_slo_ms:
                continue
        if x > MAX_POOL_REPLICAS or y > MAX_POOL_REPLICAS:
            return None
        return op
    return None


def best_integer_ratio(prefill: PrefillModel, decode: DecodeModel, sequences: int, ttft_slo_ms: float | None) -> Operating | None:
    """The x:y pools (y up to :data:`RATIO_DECODE_REPLICAS`) with the most output tokens a second
    per GPU when every decode replica runs ``sequences`` sequences and prefill keeps up within the SLO."""
    ratio, rho = balanced_ratio(prefill, decode, sequences, ttft_slo_ms)
    if rho <= 0 or not math.isfinite(ratio):
        return None
    transfer = kv_transfer(prefill, decode, prefill.tp + decode.tp)
    mu_d = sequences / decode_time_s(decode, sequences, transfer.ms)
    best, best_per_gpu = None, -1.0
    for y in range(1, RATIO_DECODE_REPLICAS + 1):
        x = max(1, math.ceil(y * ratio - 1e-9))
        per_gpu = y * mu_d / (x * prefill.tp + y * decode.tp)
        if per_gpu > best_per_gpu * (1 + 1e-9):
            best, best_per_gpu = (x, y), per_gpu
    x, y = best
    return operate(prefill, decode, x, y, y * mu_d, sequences)


# --------------------------------------------------------------------------- a disaggregated plan (plan --disagg)


class PoolReport(BaseModel):
    """One pool of a disaggregated plan as every surface shows it."""

    model_config = ConfigDict(frozen=True)

    role: str
    gpu: str
    tp: int
    ep: int
    replicas: int
    gpu_count: int
    kv_dtype: str
    gpu_hour_price: float
    model_resident_bytes: int  # per GPU
    available_for_kv_bytes: int  # per GPU
    sequences_by_memory: int  # per replica, at this pool's reservation
    utilisation: float  # prefill: share of its token budget in use; decode: sequences / its limit
    requests_per_s_capacity: float  # per replica: prefill at full budget; decode at this load
    sequences_per_replica: float  # decode: sequences each decode replica runs; prefill: prompts held (Little)
    step_ms: float  # prefill: one prompt alone; decode: the decode step at this load
    plan_values: dict  # plan inputs that open this pool's replica as a plan


class DisaggPlan(BaseModel):
    """A disaggregated deployment at the plan's load: both pools, the transfer, TTFT and TPOT."""

    model_config = ConfigDict(frozen=True)

    spec: str
    prefill: PoolReport
    decode: PoolReport
    kv_transfer: KVTransfer
    kv_transfer_ms: float
    sequences: int  # the requested load (concurrent requests over the deployment)
    requests_per_s: float
    ttft_p95_ms: float
    ttft_terms_ms: dict[str, float]
    tpot_ms: float  # mean = p95: decode steps carry no prefill chunks
    itl_p95_ms: float
    output_tokens_per_s: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    gpus: int
    cost_per_hour: float
    cost_per_million_tokens: float | None
    balanced_prefill_per_decode: float  # prefill replicas per decode replica that balance the rates (rho* applied)
    meets_slo: bool | None  # None: the plan sets neither SLO
    ttft_slo_ms: float | None = None  # the SLOs it was judged against (the plan's)
    itl_slo_ms: float | None = None
    aggregated: dict | None  # the same GPUs as aggregated replicas of the decode shape, at the same load
    verdict: str  # does disaggregation pay here, and why
    notes: list[str]


def _report(pool: PoolModel, spec: PoolSpec, utilisation: float, capacity: float, sequences: float, step_ms: float) -> PoolReport:
    cap = pool.plan.capacity
    return PoolReport(
        role=pool.role, gpu=pool.gpu, tp=pool.tp, ep=pool.ep, replicas=spec.replicas, gpu_count=spec.gpu_count, kv_dtype=pool.plan.kv_cache.kv_dtype,
        gpu_hour_price=pool.price, model_resident_bytes=cap.model_resident_bytes, available_for_kv_bytes=cap.available_for_kv_bytes,
        sequences_by_memory=pool.memory_sequences, utilisation=utilisation, requests_per_s_capacity=capacity, sequences_per_replica=sequences,
        step_ms=step_ms, plan_values={**pool.values, "gpu_count": spec.gpu_count},
    )  # fmt: skip


def pool_slo(plan: DisaggPlan, role: str) -> str:
    """The SLO verdict of one pool: the prefill pool answers for TTFT (its queue and prefill, the
    transfer and the handover), the decode pool for ITL and its sequence limit; a dash and the
    reason when the plan sets no such SLO."""
    if role == "prefill":
        if plan.prefill.utilisation >= 1:
            return f"saturated ({plan.prefill.utilisation:.0%} busy): TTFT unbounded"
        if plan.ttft_slo_ms is None:
            return f"— no TTFT SLO (TTFT p95 {fmt_ms_whole(plan.ttft_p95_ms)})"
        ok = plan.ttft_p95_ms <= plan.ttft_slo_ms
        return f"{'meets' if ok else 'misses'} TTFT {plan.ttft_slo_ms:,.0f} ms (p95 {ms_whole(plan.ttft_p95_ms)})"
    if plan.decode.utilisation > 1:
        return f"over its sequence limit ({plan.decode.utilisation:.0%})"
    if plan.itl_slo_ms is None:
        return f"— no ITL SLO (ITL {plan.itl_p95_ms:,.1f} ms)"
    ok = plan.itl_p95_ms <= plan.itl_slo_ms
    return f"{'meets' if ok else 'misses'} ITL {plan.itl_slo_ms:,.4g} ms (p95 {plan.itl_p95_ms:,.1f})"


def pool_rows(plan: DisaggPlan) -> list[dict]:
    """One row per pool of a disaggregated plan, as the Size page, the Plan page, the PDF and the CLI show them."""
    rows = []
    for r in (plan.prefill, plan.decode):
        rows.append(
            {
                "pool": r.role, "SLO": pool_slo(plan, r.role), "GPU": r.gpu, "TP": r.tp, "replicas": r.replicas, "GPUs": r.gpu_count, "KV": r.kv_dtype, "$/h": round(r.gpu_hour_price * r.gpu_count, 2),
                "weights GiB/GPU": round(r.model_resident_bytes / 2**30, 1), "KV pool GiB/GPU": round(r.available_for_kv_bytes / 2**30, 1),
                "seqs/replica": round(r.sequences_per_replica, 1), "utilisation": f"{r.utilisation:.0%}",
                "step ms": round(r.step_ms, 1), "req/s/replica": round(r.requests_per_s_capacity, 3),
            }
        )  # fmt: skip
    return rows


def describe(plan: DisaggPlan) -> str:
    """The transfer, TTFT's terms, the balancing ratio and the verdict in one paragraph (the Size
    page's and the Plan page's caption under the pool table, the CLI's text after it)."""
    t = plan.kv_transfer
    verdict = plan.verdict[:1].upper() + plan.verdict[1:]
    return (
        f"KV transfer per request: {t.bytes_per_request / 2**20:,.0f} MiB over the {t.link} ({t.link_gb_s:g} GB/s), {t.descriptors_per_gpu:,} NIXL descriptors a GPU at "
        f"{t.block_tokens}-token blocks: {t.ms:,.1f} ms added to TTFT. TTFT p95 {fmt_ms_whole(plan.ttft_p95_ms)} = "
        + " + ".join(f"{k.replace('_', ' ')} {ms_whole(v)}" for k, v in plan.ttft_terms_ms.items())
        + f" ms. Balanced pools: {plan.balanced_prefill_per_decode:.2f} prefill replicas per decode replica. {verdict}."
    )


def rate_text(requests_per_s: float) -> str:
    """The request rate a disaggregated deployment's pools serve, as the Size page's pools box and
    the Plan page's pools card both show it."""
    return f"{requests_per_s:,.4g} requests/s"


def load_text(plan: DisaggPlan, inputs) -> str:
    """The load a disaggregated plan's pools serve, in words (the Plan page's pools card, the CLI
    and the PDF): the request rate, and the concurrent requests it came from when the plan gives
    clients, not a rate (:func:`plan_disagg` times a rate as given)."""
    return rate_text(plan.requests_per_s) + ("" if inputs.request_rate is not None else f" ({plan.sequences:,} concurrent requests)")


def own_figures_note(plan: DisaggPlan, inputs) -> str:
    """What the figures of a plan with pools are beside its pools (the Plan page's pools card):
    the plan's own GPUs serving the whole workload aggregated, named as the pool whose shape they
    are (a Size row's pool link opens that pool), and the load both pools serve."""
    load = load_text(plan, inputs)
    shapes = [p for p in (plan.prefill, plan.decode) if (p.gpu, p.tp, p.gpu_count) == (inputs.gpu, inputs.tp, inputs.gpu_count)]
    whose = "each pool's" if len(shapes) == 2 else f"the {shapes[0].role} pool's" if shapes else ""  # two pools of one shape: either link opens these figures
    own = f"{whose} {shapes[0].gpu_count:,} GPUs ({shapes[0].replicas:,} × {shapes[0].gpu} TP {shapes[0].tp}) serving the whole workload aggregated" if shapes else "its aggregated replicas'"
    return f"The plan's own figures above are {own}; the pools in this card serve {load}, every request through both."


def plan_of(plan: Plan, model: PreparedModel) -> DisaggPlan | None:
    """The disaggregated deployment a plan's ``disagg`` input names, at the plan's workload
    (its sequences, context and SLOs); None when the plan has none.

    Raises:
        PlannerError: a pool that cannot run (its weights do not fit), or a pool without a GPU on a custom device.
    """
    if plan.inputs.disagg is None:
        return None
    return plan_disagg(model, plan.inputs.model_dump(), plan.inputs.disagg)


def plan_disagg(model: PreparedModel, values: dict, pools: str | tuple[PoolSpec, PoolSpec], prices: dict[str, float] | None = None) -> DisaggPlan:
    """The plan's workload (``values["request_rate"]`` requests a second when it has one, else
    ``values["sequences"]`` concurrent requests over the deployment; its context and SLOs) on disaggregated pools (``"2P:4@H200-141GB,1D:8@B200-180GB"``). A ``disagg``
    key in ``values`` (a size recommendation's ``plan_values``) is ignored: ``pools`` says them.

    Raises:
        PlannerError: a bad pools text, a pool whose weights do not fit, or any bad plan input.
    """
    from planner.sizing import resolve_prices

    inputs = make_inputs(**{k: v for k, v in values.items() if k != "disagg"})
    spec_p, spec_d = parse_pools(pools, inputs.gpu) if isinstance(pools, str) else pools
    kv = inputs.kv_dtype
    price_of = resolve_prices(sorted({spec_p.gpu, spec_d.gpu}), prices if prices is not None else inputs.gpu_hour_price)
    base = {k: v for k, v in values.items() if k not in _POOL_FIELDS and k != "request_rate"}  # each pool's replica is planned without the load (as size --disagg plans it)
    built = []
    for spec in (spec_p, spec_d):
        pool = pool_model(model, base, spec.role, spec.gpu, spec.tp, spec.ep, kv, price_of[spec.gpu][0])
        if isinstance(pool, str):
            raise PlannerError("disagg", format_pools(spec_p, spec_d), f"the {spec.role} pool ({spec.label()}) cannot run: {pool}")
        built.append(pool)
    prefill, decode = built
    held = None
    if inputs.request_rate is not None:  # Poisson arrivals at the rate: every request through both pools
        op = operate(prefill, decode, spec_p.replicas, spec_d.replicas, inputs.request_rate)
        if not op.sequences <= decode.max_sequences:  # more than the decode pool admits (past its capacity Little's count has no fixed point): it runs at its limit, the rest queue
            held = spec_d.replicas * decode.max_sequences / decode_time_s(decode, decode.max_sequences, op.transfer.ms)
            op = operate(prefill, decode, spec_p.replicas, spec_d.replicas, held, sequences=decode.max_sequences)  # timed at the rate it serves
    else:
        op = at_users(prefill, decode, spec_p.replicas, spec_d.replicas, inputs.sequences)
    return _disagg_plan(model, values, inputs, spec_p, spec_d, prefill, decode, op, price_of, held)


_POOL_FIELDS = ("gpu", "tp", "ep", "gpu_count", "gpu_hour_price", "disagg", "sequences", "max_num_seqs")


def _disagg_plan(model, values, inputs, spec_p, spec_d, prefill, decode, op, price_of, over: float | None = None) -> DisaggPlan:
    """``over``: the request rate is more than the decode pool admits; the requests a second it
    serves at its limit, which ``op`` is timed at."""
    rho = op.prefill_utilisation
    ttft = op.ttft_ms
    itl_slo, ttft_slo = inputs.itl_slo_ms, inputs.ttft_slo_ms
    seq_cap = decode.max_concurrency(itl_slo)
    c = max(1, math.ceil(op.sequences))
    ratio, _rho_star = balanced_ratio(prefill, decode, min(max(1, seq_cap), c) if seq_cap else c, ttft_slo, op.gpus)
    slo = None
    if itl_slo is not None or ttft_slo is not None:
        slo = (ttft_slo is None or ttft <= ttft_slo) and (itl_slo is None or op.tpot_ms <= itl_slo) and c <= decode.max_sequences and rho < 1 and over is None
    out_tps = op.output_tokens_per_s
    per_hour = op.cost_per_hour
    notes = [HANDOVER_SOURCE, op.transfer.source]
    if c > decode.max_sequences:
        notes.append(
            f"the decode pool runs {c:,} sequences per replica, above its limit of {decode.max_sequences:,} (memory {decode.memory_sequences:,}, vLLM's max_num_seqs {decode.runtime_sequences:,}): add decode replicas"
        )
    if over is not None:
        notes.append(
            f"the decode pool cannot keep up with {rate_text(inputs.request_rate)}: at its limit of {decode.max_sequences:,} sequences per replica (memory {decode.memory_sequences:,}, "
            f"vLLM's max_num_seqs {decode.runtime_sequences:,}) it serves {rate_text(over)}; the pools are timed at that rate and the rest queue without bound: add decode replicas"
        )
    if rho >= 1:
        notes.append(f"the prefill pool is saturated (utilisation {rho:.0%}): its queue grows without bound; add prefill replicas")
    if op.transfer.block_tokens < 64 and op.transfer.terms_ms["nixl_descriptors"] > op.transfer.terms_ms["bytes"]:
        notes.append(
            f"NIXL's descriptors ({op.transfer.terms_ms['nixl_descriptors']:,.1f} ms) cost more than the bytes ({op.transfer.terms_ms['bytes']:,.1f} ms) at {op.transfer.block_tokens}-token blocks: --block-size 64 would cut them by {1 - op.transfer.block_tokens / 64:.0%}"
        )
    # the same GPUs aggregated, at the load the pools are timed at (the rate they serve when the
    # decode pool is at its limit, so the verdict compares one load)
    agg = aggregated_alternative(model, values if over is None else {**values, "request_rate": over}, decode, op.gpus, inputs.sequences)
    prefill_cap = 1.0 / prefill.service_s
    held = op.rate / spec_p.replicas * (op.ttft_terms_ms["prefill"] + op.ttft_terms_ms["prefill_queue_p95"] + op.transfer.ms) / 1e3
    return DisaggPlan(
        spec=format_pools(spec_p, spec_d),
        prefill=_report(prefill, spec_p, rho, prefill_cap, held, prefill.prefill_s * 1e3),
        decode=_report(decode, spec_d, op.decode_utilisation, op.sequences / decode_time_s(decode, op.sequences, op.transfer.ms), op.sequences, op.tpot_ms),
        kv_transfer=op.transfer,
        kv_transfer_ms=op.transfer.ms,
        sequences=inputs.sequences,
        requests_per_s=op.rate,
        ttft_p95_ms=ttft,
        ttft_terms_ms=op.ttft_terms_ms,
        tpot_ms=op.tpot_ms,
        itl_p95_ms=op.tpot_ms,
        output_tokens_per_s=out_tps,
        tokens_per_s_per_gpu=out_tps / op.gpus,
        tokens_per_s_per_user=1000.0 / op.tpot_ms if op.tpot_ms else 0.0,
        gpus=op.gpus,
        cost_per_hour=per_hour,
        cost_per_million_tokens=per_hour / (out_tps * 3600) * 1e6 if out_tps else None,
        balanced_prefill_per_decode=ratio,
        meets_slo=slo,
        ttft_slo_ms=ttft_slo,
        itl_slo_ms=itl_slo,
        aggregated=agg,
        verdict=verdict(op, agg, inputs),
        notes=notes,
    )


def aggregated_alternative(model: PreparedModel, values: dict, decode: DecodeModel, gpus: int, sequences: int) -> dict | None:
    """The same number of GPUs (rounded down to whole replicas of the decode pool's shape) serving
    the same load aggregated: its p95 TTFT and ITL, output tokens a second (None if it cannot run)."""
    replicas = gpus // decode.tp
    if replicas < 1:
        return None
    base = {k: v for k, v in values.items() if k not in _POOL_FIELDS}
    try:
        plan = compute_plan(
            make_inputs(
                **{**base, "gpu": decode.gpu, "tp": decode.tp, "ep": decode.ep, "kv_dtype": decode.kv_dtype, "gpu_count": replicas * decode.tp, "sequences": sequences, "gpu_hour_price": decode.price}
            ),
            model,
        )
    except PlannerError:
        return None
    r = plan.roofline
    return {
        "gpu": decode.gpu, "tp": decode.tp, "replicas": replicas, "gpus": replicas * decode.tp, "ttft_p95_ms": r.ttft_p95_ms, "itl_p95_ms": r.itl_p95_ms,
        "tpot_ms": r.itl_ms_at_concurrency, "output_tokens_per_s": r.decode_tokens_per_second, "admitted": plan.kv_cache.admitted,
        "prefill_step_share": r.prefill_step_share, "cost_per_hour": decode.price * replicas * decode.tp, "binding_constraint": plan.kv_cache.binding_constraint,
    }  # fmt: skip


def verdict(op: Operating, agg: dict | None, inputs) -> str:
    """Whether splitting the pools pays at this load, and the reason in the numbers: the transfer's
    share of TTFT, an idle pool, prompts too short for their chunks to slow the decode steps."""
    reasons = []
    share = op.transfer.ms / op.ttft_ms if op.ttft_ms else 0.0
    if share >= 0.25:
        reasons.append(f"the KV transfer takes {op.transfer.ms:,.0f} ms, {share:.0%} of TTFT")
    rho = op.prefill_utilisation
    if rho < 0.3:
        reasons.append(f"the prefill pool idles ({rho:.0%} of its token budget used)")
    if op.decode_utilisation < 0.1:
        reasons.append(f"the decode pool idles ({op.sequences:,.1f} sequences a replica of {op.decode.max_sequences:,})")
    if agg is not None and agg.get("prefill_step_share", 1.0) <= latency.P95_Z:
        reasons.append(f"prompts are short: aggregated, only {agg['prefill_step_share']:.1%} of decode steps carry a prefill chunk, so its p95 ITL is its decode step")
    if agg is None:
        return "no aggregated deployment of the decode pool's shape fits these GPUs to compare with"
    better_itl = op.tpot_ms < agg["itl_p95_ms"] * 0.95
    better_tps = op.output_tokens_per_s > agg["output_tokens_per_s"] * 1.05
    pays = (better_itl or better_tps) and agg["admitted"]
    head = (
        f"disaggregated p95 ITL {op.tpot_ms:,.1f} ms vs {agg['itl_p95_ms']:,.1f} ms aggregated on the same {agg['gpus']} GPUs; TTFT {ms_whole(op.ttft_ms)} vs {ms_whole(agg['ttft_p95_ms'])} ms; "
        f"{op.output_tokens_per_s:,.0f} vs {agg['output_tokens_per_s']:,.0f} output tokens/s"
    )
    if not agg["admitted"]:
        why = {"memory": "its K/V does not fit", "latency_slo": "the ITL SLO binds first", "ttft_slo": "the TTFT SLO binds first"}.get(
            agg["binding_constraint"], f"its {agg['binding_constraint']} limit binds"
        )
        return head + f": aggregated, these GPUs do not admit this load ({why})" + (", and disaggregated misses an SLO too" if op_misses(op, inputs) else ", so the split pays")
    if pays and not reasons:
        return head + ": disaggregation pays (decode steps carry no prefill chunks)"
    if pays:
        return head + ": disaggregation pays, though " + "; ".join(reasons)
    return head + ": disaggregation does not pay here" + (" — " + "; ".join(reasons) if reasons else "")


def op_misses(op: Operating, inputs) -> bool:
    """The deployment misses the plan's TTFT or ITL SLO."""
    return (inputs.ttft_slo_ms is not None and op.ttft_ms > inputs.ttft_slo_ms) or (inputs.itl_slo_ms is not None and op.tpot_ms > inputs.itl_slo_ms)
