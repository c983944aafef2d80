"""Sizing: how many GPUs, of which kind, at which tensor parallelism, for a workload under SLOs.

For every candidate GPU x TP x KV dtype, one replica (``tp`` GPUs) is planned with
:func:`planner.plan.compute_plan`; its admissible concurrency ``max_num_seqs`` is the smallest of
the memory ceiling (the engine's own admission), the ITL SLO (the latency model's decode step),
the TTFT SLO and any runtime limit. The workload then fixes the replica count:

* ``users`` concurrent sequences: ``replicas = ceil(users / max_num_seqs)``;
* ``rate`` requests/s: a replica sustains ``min(c / e2e, prefill capacity)`` requests/s at
  concurrency ``c`` (Little's law, and the prompts a second its token budget can prefill beside
  the decodes), and ``replicas = ceil(rate / that)``. Poisson arrivals also wait for a free
  sequence slot: that p95 wait (Erlang C over ``max_num_seqs`` slots, :func:`slot_wait_p95_s`)
  is added to the p95 TTFT.

The count is then checked with the whole deployment's plan and moved until it is minimal: the
deployment holds the workload and one replica fewer does not: ``users`` as a closed loop of that
many clients, a ``rate`` as Poisson arrivals (the plan's open loop). Deployments are ranked by
cost per hour, then cost per million output tokens. For MoE models the shapes served in
production are searched too: EP 1 and EP = TP inside each replica, and attention data
parallelism (DP = EP = N ranks of TP 1, SGLang's --enable-dp-attention, vLLM's data parallel
with expert parallel, TensorRT-LLM's DEP). Where no single node of a GPU holds the weights, the
search adds the deployments across two nodes: TP over both (the NICs between them), TP inside a
node with two pipeline stages, and for MoE models attention DP over both.

:func:`capacity_search` refines a recommendation with the simulator: the highest Poisson rate at
which p95 TTFT and ITL stay inside the SLOs and the queue does not grow, by bisection.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from planner import accuracy
from planner.capacity import largest_within, smallest_passing
from planner.errors import PlannerError
from planner.frontier import FrontierPoint, PoolShape
from planner.hardware import AMD_PREFILL_SLOWER, CATALOG
from planner.limits import BOUNDS, CAPACITY_TIME_BUDGET_S
from planner.plan import Plan, PreparedModel, compute_plan, make_inputs, sections
from planner.prices import PRICE_TABLE
from planner.units import fmt_ms_rounded

TP_CANDIDATES = (1, 2, 4, 8)
KV_DTYPES = ("bf16", "fp8")
MAX_REPLICAS = 1024
# a latency SLO's limit where a p95 jumps (one more sequence a replica raises it by JUMP_RATIO or
# more: a prompt's chunk steps passing 5 % of the steps) is sized JUMP_MARGIN below the jump
JUMP_RATIO = 1.5
JUMP_MARGIN = 0.10
MAX_USERS = 10_000_000
MAX_RATE = 1e6
CAPACITY_TOLERANCE = 0.10  # bisection stops when the bracket is within 10 % of its top
CAPACITY_MAX_RUNS = 6
SIM_REPLICAS = 4  # the capacity search simulates at most this many replicas of a deployment
# Plan inputs the search sets itself; the rest of ``base`` passes through.
# Observed latencies describe one measured deployment, not the candidates: they are dropped too.
SEARCHED = (
    "gpu", "tp", "ep", "dp", "pp", "gpu_count", "kv_dtype", "sequences", "request_rate", "itl_slo_ms", "ttft_slo_ms", "gpu_hour_price", "device_gib", "device_bandwidth_gb_s", "device_bf16_tflops",
    "max_num_seqs", "queue_ms", "preprocessing_ms", "prefill_ms", "first_decode_ms", "remaining_decode_ms", "generated_tokens",
    "bench_calibration",  # one deployment's benchmark run: not carried to the sizer's candidates
    "disagg",  # one deployment's pools: size searches its own (size --disagg)
)  # fmt: skip

Progress = Callable[[float, str], None]


class CapacityResult(BaseModel):
    """Highest request rate the deployment sustains in the simulator (bisection on rate)."""

    model_config = ConfigDict(frozen=True)

    max_rate_per_s: float  # 0 when even the lowest rate tried misses the SLOs
    runs: int
    tolerance: float  # relative width of the final bracket
    requests_per_run: int
    ttft_p95_ms: float | None  # at max_rate_per_s
    itl_p95_ms: float | None
    note: str


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    gpu: str
    tp: int
    replicas: int
    gpu_count: int
    ep: int = 1  # expert parallelism inside a replica (MoE models; divides tp, or dp x tp)
    dp: int = 1  # attention data-parallel ranks a replica (MoE models)
    pp: int = 1  # pipeline stages a replica
    kv_dtype: str
    runtime: str = "vllm"  # whose sizing and admission the plan follows (vllm or sglang; the search's engines)
    max_num_seqs: int  # admissible concurrency per replica (the engine setting)
    sequences_per_replica: int  # the workload's concurrency per replica
    cost_per_hour: float
    cost_per_million_tokens: float  # output tokens
    ttft_p95_ms: float  # served-latency model at the workload's concurrency (steady-state queueing)
    itl_p95_ms: float
    sustainable_rate: float  # requests/s the deployment sustains at max_num_seqs per replica
    binding_constraint: str  # what limits max_num_seqs: memory, latency_slo, ttft_slo, runtime, throughput
    gpu_hour_price: float
    price_source: str
    plan_values: dict  # plan inputs that reproduce this deployment (for "open as plan")
    capacity: CapacityResult | None = None
    margin_note: str | None = None  # where a p95 jumps above max_num_seqs, and the margin kept below it
    serve_command: str = ""  # runtime vllm: the line that starts one replica set of it (Plan.serve)
    # a session workload's cache (None without one): the CPU tier searched, its cost (in
    # cost_per_hour), the share of prompt tokens served from a cache
    cpu_tier_gib: float | None = None
    tier_cost_per_hour: float | None = None
    cache_hit_rate: float | None = None
    # a disaggregated deployment (planner.disagg): gpu / tp / ep / replicas / max_num_seqs are its decode
    # pool's, gpu_count both pools'; ``disagg`` the pools as plan --disagg takes them
    disaggregated: bool = False
    prefill: PoolShape | None = None
    decode: PoolShape | None = None
    kv_transfer_ms: float | None = None
    disagg: str | None = None
    requests_per_s: float | None = None  # disaggregated: the requests a second it serves at the workload (every request passes through both pools)

    def pool_inputs(self, role: str, ttft_slo_ms: float | None = None, itl_slo_ms: float | None = None) -> dict:
        """Plan inputs that open one pool (``role`` prefill or decode) of a disaggregated
        deployment: that pool's GPU, TP, EP and GPU count (replicas x TP), the deployment's load as
        its request rate (both pools serve every request) and its requests in flight, the pools
        (``disagg``: the plan's pools card shows both pools at this load, as
        :func:`planner.disagg.plan_disagg` planned them here) and the SLOs it was searched under.
        Table prices (what the search used) price both pools."""
        if not self.disaggregated:
            raise PlannerError("role", role, "only a disaggregated deployment has pools")
        pool = {"prefill": self.prefill, "decode": self.decode}.get(role)
        if pool is None:
            raise PlannerError("role", role, "must be prefill or decode")
        values = {k: v for k, v in self.plan_values.items() if k not in ("gpu_hour_price", "max_num_seqs")}
        values |= {"gpu": pool.gpu, "tp": pool.tp, "ep": pool.ep, "gpu_count": pool.replicas * pool.tp, "request_rate": self.requests_per_s, "disagg": self.disagg}
        if role == "decode":
            values["max_num_seqs"] = self.max_num_seqs
        return values | {k: v for k, v in (("ttft_slo_ms", ttft_slo_ms), ("itl_slo_ms", itl_slo_ms)) if v is not None}

    def plan_inputs(self) -> dict:
        """Plan inputs :func:`planner.plan.compute_plan` takes for this deployment: ``plan_values``
        as they are, or, disaggregated, its decode pool at the sequences that pool holds."""
        values = {k: v for k, v in self.plan_values.items() if k != "disagg"}
        if self.disaggregated:
            values["sequences"] = max(1, min(self.sequences_per_replica, self.max_num_seqs) * self.replicas)
        return values


class Refusal(BaseModel):
    model_config = ConfigDict(frozen=True)

    gpu: str
    tp: int
    kv_dtype: str
    reason: str
    ep: int = 1
    dp: int = 1
    pp: int = 1
    runtime: str = "vllm"


class SizingResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    recommendations: list[Recommendation]
    searched: dict
    refused: list[Refusal]
    answer: str
    frontier: list[FrontierPoint] | None = None  # size(frontier=True): every point the search visits
    median_check: str = ""  # the answer's last sentence where the best breaks an SLO at its published runs' medians (_median_check); "" else


def _check_request(users: int | None, rate_per_s: float | None, ttft_p95_ms: float | None, itl_p95_ms: float | None, tpot_ms: float | None = None) -> None:
    if (users is None) == (rate_per_s is None):
        raise PlannerError("workload", None, "give either users (concurrent sequences) or rate (requests per second), not both or neither")
    if users is not None and (isinstance(users, bool) or not isinstance(users, int) or not 1 <= users <= MAX_USERS):
        raise PlannerError("users", users, f"must be a whole number of concurrent users from 1 to {MAX_USERS:,}")
    if rate_per_s is not None and (not isinstance(rate_per_s, (int, float)) or not math.isfinite(rate_per_s) or not 0 < rate_per_s <= MAX_RATE):
        raise PlannerError("rate", rate_per_s, f"must be a request rate above 0 and at most {MAX_RATE:,.0f} per second")
    for name, v in (("ttft_p95_ms", ttft_p95_ms), ("itl_p95_ms", itl_p95_ms), ("tpot_ms", tpot_ms)):
        if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1e7):
            raise PlannerError(name, v, "must be a latency above 0 and at most 10,000,000 ms")
    if ttft_p95_ms is not None and itl_p95_ms is not None and ttft_p95_ms < itl_p95_ms:
        raise PlannerError("ttft_p95_ms", ttft_p95_ms, f"is below the ITL SLO of {itl_p95_ms:g} ms: the first token takes a prefill and a decode step, so it can never come sooner than the next ones")


def resolve_prices(gpus: list[str], prices: dict[str, float] | float | None) -> dict[str, tuple[float, str]]:
    """Price per GPU-hour and its source for each GPU: a single number for all, a name -> price
    map (the table fills the rest), or the table (:data:`planner.prices.PRICE_TABLE`)."""
    out = {}
    for g in gpus:
        if isinstance(prices, (int, float)) and not isinstance(prices, bool):
            out[g] = (float(prices), "given")
        elif isinstance(prices, dict) and g in prices:
            out[g] = (float(prices[g]), "given")
        else:
            row = PRICE_TABLE[g]
            out[g] = (row.usd_per_gpu_hour, f"{row.source}, {row.as_of}")
    return out


def resolve_gpus(gpus: list[str] | None) -> list[str]:
    """Catalog names for ``gpus`` (case-insensitive); the whole catalog when None.

    Raises:
        PlannerError: an unknown GPU name.
    """
    if not gpus:
        return list(CATALOG)
    lower = {k.lower(): k for k in CATALOG}
    out = []
    for g in gpus:
        name = lower.get(str(g).strip().lower())
        if name is None:
            raise PlannerError("gpus", str(g)[:80], f"unknown GPU; known: {', '.join(CATALOG)}")
        if name not in out:
            out.append(name)
    return out


def _p95(plan: Plan) -> tuple[float, float]:
    """(p95 TTFT, p95 ITL) of a plan in ms: what the SLOs bound (the plan's served-latency model)."""
    return plan.roofline.ttft_p95_ms, plan.roofline.itl_p95_ms


def slot_wait_p95_s(slots: int, offered: float, hold_s: float) -> float:
    """95th-percentile wait for a free sequence slot when Poisson arrivals offer ``offered``
    slots' worth of load (arrival rate x time a request holds its slot) to ``slots`` slots:
    Erlang C (M/M/c). An arrival waits with probability C, then exponentially with mean
    hold / (slots - offered), so the p95 is hold / (slots - offered) x ln(C / 0.05), or 0 when
    C <= 0.05; infinite at offered >= slots (the queue grows without bound)."""
    if offered <= 0:
        return 0.0
    if offered >= slots:
        return math.inf
    b = 1.0  # Erlang B by its stable recursion, then C from B
    for k in range(1, slots + 1):
        b = offered * b / (k + offered * b)
    c = slots * b / (slots - offered * (1.0 - b))
    return hold_s / (slots - offered) * math.log(c / 0.05) if c > 0.05 else 0.0


class Shape(NamedTuple):
    """One replica's parallelism: tp x dp x pp GPUs, experts over ep of them."""

    tp: int
    dp: int = 1
    pp: int = 1
    ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp * self.pp

    def label(self) -> str:
        parts = [f"TP {self.tp}"] + ([f"DP {self.dp}"] if self.dp > 1 else []) + ([f"PP {self.pp}"] if self.pp > 1 else []) + ([f"EP {self.ep}"] if self.ep > 1 else [])
        return ", ".join(parts)


def shapes(model: PreparedModel, base: dict, gpu: str, tps: tuple[int, ...] | list[int]) -> list[Shape]:
    """The replica shapes searched on ``gpu``: every TP; for MoE models EP = TP and attention data
    parallelism over as many ranks; and, where the TPs reach a whole node of this GPU and no
    single node holds the weights, two nodes (TP over both, TP and two pipeline stages, attention
    DP over both)."""
    weights = model.weights(base.get("weight_dtype", "auto"))
    moe = bool(weights.num_experts)
    out = []
    for tp in tps:
        out.append(Shape(tp))
        if moe and tp > 1:
            out += [Shape(tp, ep=tp), Shape(1, dp=tp, ep=tp)]
    device = CATALOG[gpu]
    node = device.node_gpus
    # two nodes only where the searched TPs reach a whole node and one node cannot hold the weights
    if max(tps, default=1) >= node and weights.bytes > node * device.memory_bytes * 0.9 and node * 2 <= 4096:
        out += [Shape(2 * node), Shape(node, pp=2)] + ([Shape(2 * node, ep=2 * node), Shape(1, dp=2 * node, ep=2 * node)] if moe else [])
    return out


class _Candidate:
    """One GPU x replica shape x KV dtype: plans one replica, then the replica count for the workload."""

    def __init__(
        self,
        model: PreparedModel,
        base: dict,
        gpu: str,
        shape: Shape,
        kv: str,
        price: float,
        price_source: str,
        users: int | None,
        rate: float | None,
        ttft_slo: float | None,
        itl_slo: float | None,
        tpot_slo: float | None = None,
        cpu_gib: float | None = None,
    ) -> None:
        self.model = model
        self.gpu, self.shape, self.kv, self.price, self.price_source = gpu, shape, kv, price, price_source
        self.tp, self.ep = shape.tp, shape.ep
        self.users, self.rate, self.ttft_slo, self.itl_slo, self.tpot_slo = users, rate, ttft_slo, itl_slo, tpot_slo
        # with a session workload the TTFT SLO judges its turns (the cache section), not the plan's one request
        self.sessions = base.get("sessions_per_min") is not None
        self.values = {
            **{k: v for k, v in base.items() if k not in SEARCHED},
            **{"gpu": gpu, "tp": shape.tp, "ep": shape.ep, "dp": shape.dp, "pp": shape.pp, "kv_dtype": kv, "itl_slo_ms": itl_slo, "ttft_slo_ms": None if self.sessions else ttft_slo, "gpu_hour_price": price},
        }
        if self.sessions:
            self.values["cpu_tier_gib"] = cpu_gib
        self._plans: dict[tuple, Plan] = {}

    def plan(self, replicas: int, sequences: int, max_num_seqs: int | None = None, rate: float | None = None) -> Plan:
        """The deployment of ``replicas``: a closed loop of ``sequences`` clients, or Poisson arrivals at ``rate``;
        ``max_num_seqs`` per replica (spread over its data-parallel ranks). Memoised by these four
        (the candidate's other inputs are fixed): the margin check, the replica count's search and
        the recommendation ask for some of the same deployments."""
        key = (replicas, sequences, max_num_seqs, rate)
        if key not in self._plans:
            per_rank = None if max_num_seqs is None else max(1, max_num_seqs // self.shape.dp)
            self._plans[key] = compute_plan(make_inputs(**self.values, gpu_count=self.shape.gpus * replicas, sequences=sequences, max_num_seqs=per_rank, request_rate=rate), self.model)
        return self._plans[key]

    def workload(self, replicas: int, limit: int) -> Plan:
        """The deployment of ``replicas`` under the workload: its users as a closed loop, its rate as Poisson arrivals."""
        return self.plan(replicas, self.users or 1, limit, self.rate)

    def evaluate(self) -> Recommendation | str:
        try:
            one = self.plan(1, 1, rate=self.rate)
        except PlannerError as exc:
            return exc.reason.split(";")[0]
        self._ctx = one.context  # the context does not depend on the load: no plan of its own
        self.one = one  # the replica's plan at one sequence (the frontier's aggregated shape)
        kv = one.kv_cache
        limit, binding = kv.admissible_sequences, kv.binding_constraint
        # the plan's admission already holds both SLOs (its p95 ITL and TTFT limits): limit is theirs too
        if limit < 1:
            if binding == "latency_slo":
                return f"p95 ITL at one sequence is {_p95(one)[1]:,.1f} ms, above the {self.itl_slo:g} ms SLO"
            if binding == "ttft_slo":
                return f"p95 TTFT at one sequence is {_p95(one)[0]:,.0f} ms, above the {self.ttft_slo:g} ms SLO"
            return f"one sequence's K/V ({kv.mib_per_reserved_sequence:,} MiB) does not fit next to the weights"
        if self.tpot_slo is not None:  # the mean time per output token (the served model's mean ITL) bounds it too
            from planner.frontier import agg_point

            tpot_limit = largest_within(lambda c: agg_point(one, c).tpot_ms, self.tpot_slo, limit)
            if tpot_limit < 1:
                return f"mean TPOT at one sequence is {agg_point(one, 1).tpot_ms:,.1f} ms, above the {self.tpot_slo:g} ms SLO"
            if tpot_limit < limit:
                limit, binding = tpot_limit, "tpot_slo"
        limit, self.margin_note = self._margin_below_jump(limit, binding)
        self.limit = limit
        plan_at_limit = self.plan(1, limit)
        e2e_s = plan_at_limit.latency.end_to_end_ms / 1e3
        little = limit / e2e_s if e2e_s > 0 else math.inf
        # the prompts a second the prefill budget can take beside the decodes (its ITL already
        # carries the prefill steps, so this is the only other bound on the rate)
        gpu_bound = plan_at_limit.roofline.prefill_capacity_per_s * self.shape.dp
        if self.sessions:  # cached turns prefill only their new tokens
            from planner.cache.section import prefill_speedup

            gpu_bound *= prefill_speedup(plan_at_limit)
        per_replica_rate = min(little, gpu_bound)
        if self.rate is not None and gpu_bound < little:
            binding = "throughput"
        need = math.ceil(self.users / limit) if self.users is not None else math.ceil(self.rate / per_replica_rate)
        try:
            replicas = self._minimal(max(1, need), limit, per_replica_rate)
        except PlannerError as exc:  # e.g. more GPUs than a plan takes
            return exc.reason
        if isinstance(replicas, str):
            return replicas
        return self._recommend(self.workload(replicas, limit), replicas, limit, binding, per_replica_rate)

    def _margin_below_jump(self, limit: int, binding: str) -> tuple[int, str | None]:
        """``limit`` backed off by :data:`JUMP_MARGIN` when a latency SLO sets it where its p95
        jumps (a load a little above the plan would fall off the cliff, not degrade), with the note
        saying where the jump is; else ``limit`` and None."""
        if binding not in ("latency_slo", "ttft_slo") or limit < 2:
            return limit, None
        k = 1 if binding == "latency_slo" else 0  # _p95's (TTFT, ITL)
        at, above = _p95(self.plan(1, limit))[k], _p95(self.plan(1, limit + 1))[k]
        if above < JUMP_RATIO * at:
            return limit, None
        backed = max(1, math.floor(limit * (1 - JUMP_MARGIN)))
        return backed, (f"p95 {'ITL' if k else 'TTFT'} jumps from {fmt_ms_rounded(at)} to {fmt_ms_rounded(above)} above {limit:,} "
                        f"sequences a replica: sized at {backed:,}, {JUMP_MARGIN:.0%} below the jump")

    def _recommend(self, final: Plan, replicas: int, limit: int, binding: str, per_replica_rate: float) -> Recommendation:
        """The :class:`Recommendation` of ``replicas`` replicas admitting ``limit`` sequences each, from
        ``final``, the deployment's plan under the workload."""
        load = final.kv_cache.requested_sequences
        queue_ms = self._slot_wait_ms(replicas, limit, final)
        gpus = self.shape.gpus * replicas
        cache = final.cache if self.sessions and final.cache.applies else None
        tier_cost = cache.tier_cost_per_hour if cache is not None else None
        gpu_per_hour = self.price * gpus
        per_hour = gpu_per_hour + (tier_cost or 0.0)
        # the plan's own cost section: one basis (COST_BASIS_NAME) on Plan, Compare and Size; a CPU
        # tier's cost scales it on the same basis
        plan_per_million = final.cost.per_million_output_tokens
        per_million = plan_per_million * per_hour / gpu_per_hour if plan_per_million is not None and gpu_per_hour > 0 else math.inf
        return Recommendation(
            gpu=self.gpu,
            tp=self.shape.tp,
            ep=self.shape.ep,
            dp=self.shape.dp,
            pp=self.shape.pp,
            runtime=self.values.get("runtime", "vllm"),
            replicas=replicas,
            gpu_count=gpus,
            kv_dtype=self.kv,
            max_num_seqs=limit,
            sequences_per_replica=-(-load // replicas),
            cost_per_hour=round(per_hour, 4),
            cost_per_million_tokens=round(per_million, 4) if math.isfinite(per_million) else 0.0,
            ttft_p95_ms=(cache.ttft.p95_ms if cache is not None else _p95(final)[0]) + queue_ms,
            itl_p95_ms=_p95(final)[1],
            sustainable_rate=per_replica_rate * replicas,
            binding_constraint=binding,
            margin_note=getattr(self, "margin_note", None),
            gpu_hour_price=self.price,
            price_source=self.price_source,
            plan_values={**{k: v for k, v in self.values.items() if v is not None}, "gpu_count": gpus, "sequences": self.users or load, "max_num_seqs": max(1, limit // self.shape.dp), **({"request_rate": self.rate} if self.rate is not None else {})},
            serve_command=final.serve.command,
            cpu_tier_gib=self.values.get("cpu_tier_gib"),
            tier_cost_per_hour=tier_cost,
            cache_hit_rate=cache.hit_rate if cache is not None else None,
        )

    def _output(self) -> int:
        return int(self._plan_context().reserved_output_tokens)

    def _plan_context(self):
        if not hasattr(self, "_ctx"):
            self._ctx = self.plan(1, 1).context
        return self._ctx

    def _slot_wait_ms(self, replicas: int, limit: int, plan: Plan) -> float:
        """A request rate's p95 wait for one of a replica's ``limit`` slots (Erlang C); users
        hold their own slots, so they never wait for one."""
        if self.rate is None:
            return 0.0
        e2e_s = plan.latency.end_to_end_ms / 1e3
        return slot_wait_p95_s(limit, self.rate / replicas * e2e_s, e2e_s) * 1e3

    def holds(self, replicas: int, limit: int, per_replica_rate: float) -> bool:
        """The deployment of ``replicas`` admits the load inside both SLOs (a request rate also
        waits for a free slot: Erlang C over ``limit`` slots a replica, and must be sustainable)."""
        if self.rate is not None and replicas * per_replica_rate < self.rate * (1 - 1e-9):
            return False
        p = self.workload(replicas, limit)
        ttft, itl = _p95(p)
        if self.sessions and p.cache.applies:
            ttft = p.cache.ttft.p95_ms
        ttft += self._slot_wait_ms(replicas, limit, p)
        sustainable = self.rate is None or not p.roofline.prefill_saturated
        tpot_ok = self.tpot_slo is None or p.latency.mean_inter_token_latency_ms <= self.tpot_slo
        return p.kv_cache.admitted and sustainable and tpot_ok and (self.ttft_slo is None or ttft <= self.ttft_slo) and (self.itl_slo is None or itl <= self.itl_slo)

    def _minimal(self, replicas: int, limit: int, per_replica_rate: float) -> int | str:
        """The fewest replicas that hold the load, searched from the estimate ``replicas``: a
        step either way first (the estimate is usually right or one off), then galloping and
        bisection (more replicas never hold less)."""

        def holds(n: int) -> bool:
            return self.holds(n, limit, per_replica_rate)

        if holds(replicas):
            fail, ok, step = replicas - 1, replicas, 1
            while fail >= 1 and holds(fail):  # gallop down to a count that fails (or 0)
                ok, step = fail, step * 2
                fail = max(0, ok - step)
        else:
            fail, ok, step = replicas, replicas + 1, 1
            while not holds(ok):  # gallop up to a count that holds
                if ok >= MAX_REPLICAS:
                    return f"needs more than {MAX_REPLICAS:,} replicas"
                fail, step = ok, step * 2
                ok = min(MAX_REPLICAS, ok + step)
        return smallest_passing(holds, fail, ok)


def size(
    model: PreparedModel,
    base: dict | None = None,
    *,
    users: int | None = None,
    rate_per_s: float | None = None,
    ttft_p95_ms: float | None = None,
    itl_p95_ms: float | None = None,
    tpot_ms: float | None = None,
    gpus: list[str] | None = None,
    kv_dtypes: tuple[str, ...] | list[str] = KV_DTYPES,
    tps: tuple[int, ...] | list[int] = TP_CANDIDATES,
    prices: dict[str, float] | float | None = None,
    capacity_top: int = 0,
    capacity_requests: int | None = None,
    progress: Progress | None = None,
    engines: tuple[str, ...] | list[str] | None = None,
    disagg: bool = False,
    frontier: bool = False,
    _fallback: bool = True,
) -> SizingResult:
    """Rank the deployments that hold the workload (see the module docstring).

    ``base`` holds any other plan inputs (context components or ``input_tokens``,
    ``output_tokens``, ``max_context``, ``reservation``, ``headroom_bp``, ...).
    ``capacity_top`` runs :func:`capacity_search` on that many of the best recommendations.
    ``disagg`` also searches disaggregated prefill / decode pools (:mod:`planner.frontier`, mixed
    GPU kinds allowed) and ranks them with the aggregated deployments; ``frontier`` returns every
    point the search visits (tokens/s per GPU against tokens/s per user, Pareto front marked).
    ``capacity_top`` is at most :data:`~planner.limits.MAX_CAPACITY_TOP`; the capacity searches together run within
    :data:`~planner.limits.CAPACITY_TIME_BUDGET_S` of wall time: the ones not reached are left without a
    capacity and ``searched["capacity_search"]`` says so.
    ``engines`` (runtimes ``vllm`` and / or ``sglang``) searches each aggregated candidate under
    each engine's own sizing and admission (default: the base's runtime alone); an engine that
    refuses a candidate (SGLang has no profile for the GPU, or would not start) makes it a
    refused candidate with the reason. The disaggregated search and the frontier use the first.

    Raises:
        PlannerError: both or neither of users and rate, zero users, an unknown GPU or KV
            dtype, contradictory SLOs, or no candidate holds the workload (the message names the
            cheapest deployment over the whole catalog that would, when there is one).
    """
    base = dict(base or {})
    sessions = _session_workload(base)
    if sessions is not None and users is None and rate_per_s is None:
        rate_per_s = sessions.requests_per_s  # the sessions' turns are the requests
    _check_request(users, rate_per_s, ttft_p95_ms, itl_p95_ms, tpot_ms)
    names, runtimes = _check_search(base, gpus, kv_dtypes, capacity_top, engines)
    price_of = resolve_prices(names, prices)
    moe = bool(model.weights(base.get("weight_dtype", "auto")).num_experts)
    combos = [(g, shape, kv, rt) for rt in runtimes for g in names for shape in shapes(model, base, g, tps) for kv in kv_dtypes]
    # a session workload: each deployment also with CPU tiers of these sizes (GiB a replica)
    tiers = (base.pop("cpu_tier_gib", None),) if base.get("cpu_tier_gib") is not None else CPU_TIER_SEARCH if sessions is not None else (None,)
    workload_args = (users, rate_per_s, ttft_p95_ms, itl_p95_ms, tpot_ms)
    recs, refused, visited = _evaluate_all(model, base, combos, tiers, runtimes, bool(engines), price_of, workload_args, progress, 0.5 if capacity_top else 1.0)
    found = None
    if disagg or frontier:
        if progress:
            progress(0.5 if capacity_top else 0.9, "disaggregated pools and the frontier")
        found = _pool_search(model, base, names, tps, kv_dtypes, price_of, moe, users, rate_per_s, (ttft_p95_ms, itl_p95_ms, tpot_ms), disagg, frontier, visited)
        recs.extend(_disagg_recommendation(cand, users, price_of) for cand in found.candidates)
        refused.extend(Refusal(gpu=g, tp=tp, ep=ep, kv_dtype=kv, reason=f"disaggregated decode pool: {why}") for g, tp, ep, kv, why in found.refused)
    recs.sort(key=lambda r: (r.cost_per_hour, r.cost_per_million_tokens, r.gpu_count, r.gpu, r.tp, r.dp, r.pp, r.ep, r.kv_dtype, r.disaggregated, r.runtime))
    workload = (f"{users:,} concurrent users" if users is not None else f"{rate_per_s:,.4g} requests/s") + (
        f" ({base['sessions_per_min']:,.4g} sessions/min x {sessions.turns} turns)" if sessions is not None else "")
    if not recs:
        wider = None
        if _fallback and gpus and set(names) != set(CATALOG):
            search = dict(users=users, rate_per_s=rate_per_s, ttft_p95_ms=ttft_p95_ms, itl_p95_ms=itl_p95_ms, tpot_ms=tpot_ms, kv_dtypes=kv_dtypes, tps=tps, prices=prices, disagg=disagg, engines=engines)
            wider = lambda: size(model, base, **search, _fallback=False)  # noqa: E731 - the whole catalog, only when asked
        raise _nothing_holds(workload, names, refused, wider)
    capacity_note = _capacity_searches(model, recs, capacity_top, ttft_p95_ms, itl_p95_ms, capacity_requests, progress) if capacity_top else None
    if progress:
        progress(1.0, "done")
    answer, context_tokens, check = _answer(model, recs, workload, disagg, (ttft_p95_ms, itl_p95_ms))
    workload_fields = {"users": users, "rate_per_s": rate_per_s, "ttft_p95_ms": ttft_p95_ms, "itl_p95_ms": itl_p95_ms, **({"tpot_ms": tpot_ms} if tpot_ms is not None else {}), "context_tokens": context_tokens}
    searched = _searched(names, tps, moe, kv_dtypes, len(combos), [t or 0 for t in tiers] if sessions is not None else None, len(recs), len(refused), workload_fields)
    extras = {"engines": list(runtimes) if engines else None, "capacity_search": capacity_note,
              "disaggregated": {"searched": disagg, **found.visited, "feasible": len(found.candidates)} if found is not None else None}
    searched.update({k: v for k, v in extras.items() if v})
    return SizingResult(recommendations=recs, searched=searched, refused=refused, answer=answer, frontier=found.points if found is not None else None, median_check=check)


def _evaluate_all(model: PreparedModel, base: dict, combos: list, tiers: tuple, runtimes: tuple, per_engine: bool, price_of: dict,
                  workload: tuple, progress: Progress | None, progress_share: float) -> tuple[list[Recommendation], list[Refusal], list]:
    """Every aggregated candidate (GPU x shape x KV dtype x engine, each CPU tier) evaluated:
    (recommendations, refusals, the frontier's visited one-sequence plans)."""
    recs: list[Recommendation] = []
    refused: list[Refusal] = []
    visited: list = []  # (candidate, its plan at one sequence, the most sequences it admits under the SLOs) for the frontier
    for k, (g, shape, kv, rt) in enumerate(combos):
        if progress:
            progress(k / max(1, len(combos)) * progress_share, f"{g}, {shape.label()}, {kv}" + (f", {rt}" if len(runtimes) > 1 else ""))
        for cpu_gib in tiers:
            cand = _Candidate(model, {**base, "runtime": rt} if per_engine else base, g, shape, kv, *price_of[g], *workload, cpu_gib=cpu_gib)
            _collect(cand, cand.evaluate(), cpu_gib == tiers[0], rt, rt == runtimes[0], recs, refused, visited)
    return recs, refused, visited


# the published AMD runs measure prefill slower than any plan of them (docs/serving_fresh3_plan.md's result)
AMD_TTFT_CAVEAT = f"On AMD GPUs published runs measure prefill {AMD_PREFILL_SLOWER} slower than planned, so benchmark the p95 TTFT before committing (docs/serving_fresh3.md)."


def _at_medians(model: PreparedModel, rec: Recommendation, plan: Plan | None = None) -> tuple[float, float]:
    """``rec``'s p95 TTFT and ITL (ms) scaled by how much longer published runs like its plan measured
    them at their median, where all of them did (:func:`planner.accuracy.longer_by`: TTFT by the
    TTFT band's factor, ITL by the TPOT band's; a figure no such band flags stays as planned)."""
    bands = sections.accuracy_bands(plan or compute_plan(make_inputs(**rec.plan_inputs()), model))
    return rec.ttft_p95_ms * accuracy.longer_by(bands["ttft"]), rec.itl_p95_ms * accuracy.longer_by(bands["tpot"])


def _median_check(model: PreparedModel, recs: list[Recommendation], best_plan: Plan, slos: tuple[float | None, float | None]) -> str:
    """Where published runs like the best deployment all measured a latency longer than planned, and
    at their median factor its p95 would break the SLO: the sentence that says so and names the
    cheapest aggregated deployment searched whose p95s hold the SLOs at its own runs' medians ("" when
    the best holds them so, or no SLO is given)."""
    ttft_slo, itl_slo = slos

    def breaks(ttft: float, itl: float) -> list[str]:
        out = []
        if ttft_slo is not None and ttft > ttft_slo:
            out.append(f"p95 TTFT would be about {fmt_ms_rounded(ttft)}, over the {fmt_ms_rounded(ttft_slo)} SLO")
        if itl_slo is not None and itl > itl_slo:
            out.append(f"p95 ITL would be about {fmt_ms_rounded(itl)}, over the {fmt_ms_rounded(itl_slo)} SLO")
        return out

    best = recs[0]
    over = breaks(*_at_medians(model, best, best_plan))
    if not over:
        return ""
    said = "Scaled by those medians, its " + " and its ".join(over)
    holds = next((r for r in recs[1:] if not r.disaggregated and not breaks(*_at_medians(model, r))), None)
    if holds is None:
        return f"{said}, and no deployment searched holds the SLOs at its own published runs' medians."
    return f"{said}: the cheapest deployment searched that holds them at its own published runs' medians is {_describe(holds)}."


def _answer(model: PreparedModel, recs: list[Recommendation], workload: str, disagg: bool, slos: tuple[float | None, float | None] = (None, None)) -> tuple[str, int, str]:
    """The search's one-sentence answer (the best deployment, the workload, its p95s), the context
    it plans and the answer's check at published runs' medians ("" where it holds: :func:`_median_check`;
    ``slos``: p95 TTFT and p95 ITL in ms)."""
    best = recs[0]
    best_plan = compute_plan(make_inputs(**best.plan_inputs()), model)
    ctx = best_plan.context
    slo_bits = [f"p95 ITL {fmt_ms_rounded(best.itl_p95_ms)}", f"p95 TTFT {fmt_ms_rounded(best.ttft_p95_ms)}"]
    answer = f"{_describe(best)} — holds {workload} at {ctx.reserved_total_tokens:,}-token context with " + " and ".join(slo_bits) + "."
    if best.margin_note:
        answer += f" The {best.margin_note}."
    amd = best.gpu in CATALOG and CATALOG[best.gpu].vendor == "amd"
    if amd:
        answer += f" {AMD_TTFT_CAVEAT}"
    check = ""
    if caveat := best_plan.roofline.accuracy_caveat:  # every published run like it missed a figure one way by 1.5x or more
        answer += f" {caveat}" if amd else f" {caveat[:-1]}: benchmark the p95s before committing."
        if not best.disaggregated and (check := _median_check(model, recs, best_plan, slos)):
            answer += f" {check}"
    if disagg:
        answer += " " + _disagg_why(recs)
    return answer, ctx.reserved_total_tokens, check


def _pool_search(model: PreparedModel, base: dict, names, tps, kv_dtypes, price_of: dict, moe: bool, users, rate_per_s, slos: tuple, disagg: bool, frontier: bool, visited: list):
    """:func:`planner.frontier.search` over disaggregated pools and / or the frontier's points."""
    from planner import frontier as pareto

    searched_base = {k: v for k, v in base.items() if k not in SEARCHED}  # the search sets these itself (as each aggregated candidate does)
    return pareto.search(model, searched_base, names, tps, kv_dtypes, price_of, moe, users, rate_per_s, pareto.Slo(*slos), disaggregated=disagg, frontier=frontier, aggregated=visited)


def _collect(cand: _Candidate, out, first_tier: bool, runtime: str, first_runtime: bool, recs: list, refused: list, visited: list) -> None:
    """One evaluated candidate into the search's lists: a recommendation, or a refusal (once, at
    its first CPU tier); its one-sequence plan into ``visited`` for the frontier, whose shapes are
    TP (and EP) only."""
    shape = cand.shape
    if first_tier and first_runtime and hasattr(cand, "one") and shape.dp == 1 and shape.pp == 1:
        visited.append((cand.values, cand.one, getattr(cand, "limit", 0)))
    if not isinstance(out, str):
        recs.append(out)
    elif first_tier:
        refused.append(Refusal(gpu=cand.gpu, tp=shape.tp, ep=shape.ep, dp=shape.dp, pp=shape.pp, kv_dtype=cand.kv, reason=out, runtime=runtime))


def _searched(names: list[str], tps, moe: bool, kv_dtypes, candidates: int, cpu_tiers: list | None, feasible: int, refused: int, workload: dict) -> dict:
    """What :func:`size` searched, for ``SizingResult.searched``."""
    return {
        "gpus": names,
        "tps": list(tps),
        "eps": "1 and tp, and attention DP = EP (MoE models)" if moe else "1 (dense model)",
        "shapes": "TP; EP = TP and DP = EP ranks for MoE models; two nodes (TP over both, TP with PP 2, DP over both) where one node cannot hold the weights",
        "kv_dtypes": list(kv_dtypes),
        "candidates": candidates,
        "cpu_tiers_gib": cpu_tiers,
        "feasible": feasible,
        "refused": refused,
        "workload": workload,
        "ranking": "cost per hour, then cost per million output tokens",
    }


def _check_search(base: dict, gpus: list[str] | None, kv_dtypes, capacity_top: int, engines) -> tuple[list[str], tuple[str, ...]]:
    """:func:`size`'s search settings checked: (the GPUs by catalog name, the runtimes searched)."""
    BOUNDS["capacity_top"].check("capacity_top", capacity_top)
    names = resolve_gpus(gpus)
    runtimes = tuple(engines) if engines else (base.get("runtime", "vllm"),)
    for engine in runtimes:
        if engine not in ("vllm", "sglang") and engines:
            raise PlannerError("engines", engine, "must be vllm or sglang")
    for kv in kv_dtypes:
        if kv not in ("fp32", "fp16", "bf16", "fp8", "int8", "int4"):
            raise PlannerError("kv_dtypes", kv, "must be among fp32, fp16, bf16, fp8, int8, int4")
    make_inputs(**{k: v for k, v in base.items() if k not in SEARCHED})  # bad base inputs fail here, once
    return names, runtimes


def _nothing_holds(workload: str, names: list[str], refused: list[Refusal], wider=None) -> PlannerError:
    """The error when no candidate holds the workload: the nearest misses per GPU and, when
    ``wider`` (a search over the whole catalog) finds one, the smallest deployment that would."""
    hint = ""
    if wider is not None:
        try:
            hint = f"; the smallest deployment that would: {_describe(wider().recommendations[0])}"
        except PlannerError:
            hint = "; no GPU in the catalog holds it either"
    last = {r.gpu: r for r in refused}  # per GPU, its largest TP and last KV dtype: the nearest miss
    reasons = "; ".join(f"{r.gpu} at TP {r.tp}: {r.reason}" for r in list(last.values())[:3]) + ("; ..." if len(last) > 3 else "")
    return PlannerError("gpus", ",".join(names)[:80], f"no deployment holds {workload} under the SLOs ({reasons}){hint}")


def _capacity_searches(model: PreparedModel, recs: list[Recommendation], capacity_top: int, ttft_p95_ms, itl_p95_ms,
                       capacity_requests: int | None, progress: Progress | None) -> str | None:
    """:func:`capacity_search` on the best ``capacity_top`` aggregated recommendations, in place,
    within :data:`CAPACITY_TIME_BUDGET_S` together; the note saying where it stopped, if it did."""
    top = [r for r in recs if not r.disaggregated][:capacity_top]  # the simulator runs aggregated replicas
    started = time.monotonic()
    for k, rec in enumerate(top):
        if k and time.monotonic() - started > CAPACITY_TIME_BUDGET_S:  # the budget of all searches together (the best is always searched)
            return f"capacity search stopped after {CAPACITY_TIME_BUDGET_S:g} s: {k} of {len(top)} recommendations searched"

        def step(frac: float, msg: str, k: int = k) -> None:
            if progress:
                progress(0.5 + 0.5 * (k + frac) / len(top), f"capacity search {k + 1}/{len(top)}: {msg}")

        left = CAPACITY_TIME_BUDGET_S - (time.monotonic() - started)
        cap = capacity_search(model, rec, ttft_p95_ms, itl_p95_ms, requests=capacity_requests, progress=step, time_budget_s=left)
        recs[recs.index(rec)] = rec.model_copy(update={"capacity": cap})
    return None


def _disagg_recommendation(cand, users: int | None, price_of: dict) -> Recommendation:
    """A :class:`Recommendation` for a disaggregated candidate (:class:`planner.frontier.DisaggCandidate`)."""
    from planner import disagg

    op, c = cand.op, cand.max_sequences
    p, d = op.prefill, op.decode
    x, y = op.prefill_replicas, op.decode_replicas
    spec = disagg.format_pools(disagg.PoolSpec(role="prefill", gpu=p.gpu, tp=p.tp, replicas=x, ep=p.ep), disagg.PoolSpec(role="decode", gpu=d.gpu, tp=d.tp, replicas=y, ep=d.ep))
    tokens_per_s = op.output_tokens_per_s
    per_hour = op.cost_per_hour
    decode_rate = y * c / disagg.decode_time_s(d, c, op.transfer.ms)
    _ratio, rho = disagg.balanced_ratio(p, d, c, None)
    sustainable = min(decode_rate, x / p.service_s * rho)
    binding = "latency_slo" if c < d.max_sequences else ("memory" if d.memory_sequences <= d.runtime_sequences else "runtime")
    sequences = users if users is not None else max(1, math.floor(op.rate * op.e2e_mean_s + 1e-9))  # Little, as plan_disagg reads them back
    return Recommendation(
        gpu=d.gpu, tp=d.tp, ep=d.ep, replicas=y, gpu_count=op.gpus, kv_dtype=d.kv_dtype, max_num_seqs=c, sequences_per_replica=math.ceil(op.sequences - 1e-9),
        cost_per_hour=round(per_hour, 4), cost_per_million_tokens=round(per_hour / (tokens_per_s * 3600) * 1e6, 4) if tokens_per_s > 0 else 0.0,
        ttft_p95_ms=op.ttft_ms, itl_p95_ms=op.tpot_ms, sustainable_rate=sustainable, binding_constraint=binding, gpu_hour_price=d.price, price_source=price_of[d.gpu][1],
        plan_values={**{k: v for k, v in d.values.items() if v is not None}, "gpu_count": y * d.tp, "sequences": sequences, "max_num_seqs": c, "disagg": spec},
        disaggregated=True, prefill=PoolShape(gpu=p.gpu, tp=p.tp, replicas=x, ep=p.ep, gpu_hour_price=p.price),
        decode=PoolShape(gpu=d.gpu, tp=d.tp, replicas=y, ep=d.ep, gpu_hour_price=d.price), kv_transfer_ms=op.transfer.ms, disagg=spec, requests_per_s=op.rate,
        cache_hit_rate=p.cache_hit_rate,
    )  # fmt: skip


def _disagg_why(recs: list[Recommendation]) -> str:
    """Why the best deployment is (or is not) disaggregated, from the best of each kind."""
    agg = next((r for r in recs if not r.disaggregated), None)
    dis = next((r for r in recs if r.disaggregated), None)
    if dis is None:
        return "No disaggregated deployment holds the workload under the SLOs."
    cache = (f" Its prefill pool prefills only the turns' uncached prompt tokens: the session cache on its GPUs serves {dis.cache_hit_rate:.0%} of them."
             if dis.cache_hit_rate is not None else "")  # fmt: skip
    return _disagg_verdict(agg, dis) + cache


def _disagg_verdict(agg: Recommendation | None, dis: Recommendation) -> str:
    """Whether the best disaggregated deployment ``dis`` beats the best aggregated one ``agg``, and why."""
    if agg is None:
        return f"Only disaggregated pools hold it: no aggregated replica meets the SLOs (a decode pool runs {dis.max_num_seqs:,} sequences a replica with no prefill chunks in its steps)."
    saving = 1 - dis.cost_per_hour / agg.cost_per_hour if agg.cost_per_hour else 0.0
    bound = {"latency_slo": "the ITL SLO", "tpot_slo": "the TPOT SLO", "ttft_slo": "the TTFT SLO", "memory": "memory", "runtime": "vLLM's max_num_seqs", "throughput": "the prefill budget"}
    agg_limit = f"aggregated, {bound.get(agg.binding_constraint, agg.binding_constraint)} holds a replica to {agg.max_num_seqs:,} sequences ({_describe(agg)})"
    if dis.cost_per_hour < agg.cost_per_hour:
        return (
            f"Disaggregated is {saving:.0%} cheaper than the best aggregated deployment: {agg_limit}, while a decode replica whose steps carry no prefill chunks "
            f"runs {dis.max_num_seqs:,} sequences inside the SLOs; the KV transfer adds {dis.kv_transfer_ms:,.0f} ms to TTFT."
        )
    return (
        f"Disaggregation does not pay here: its best ({dis.disagg}, ${dis.cost_per_hour:,.2f}/h) costs {-saving:.0%} more than {_describe(agg)}"
        f" ({agg_limit.split(' (')[0]}; the KV transfer adds {dis.kv_transfer_ms:,.0f} ms and the prefill pool is sized in whole replicas)."
    )


CPU_TIER_SEARCH = (None, 128.0, 512.0)  # CPU tiers (GiB a replica) searched for a session workload


def _session_workload(base: dict):
    """The session workload of ``base`` (None without ``sessions_per_min``)."""
    if base.get("sessions_per_min") is None:
        return None
    from planner.cache.section import workload_of

    return workload_of(make_inputs(**{k: v for k, v in base.items() if k not in SEARCHED}))


def _describe(r: Recommendation) -> str:
    if r.disaggregated:
        p, d = r.prefill, r.decode
        return f"{r.gpu_count} GPUs disaggregated: {p.replicas} prefill × {p.gpu} TP {p.tp} + {d.replicas} decode × {d.gpu} TP {d.tp}, {r.kv_dtype} KV, ${r.cost_per_hour:,.2f}/h"
    reps = f"{r.replicas} replica" + ("s" if r.replicas != 1 else "")
    engine = ", SGLang" if r.runtime == "sglang" else ""
    tier = f", {r.cpu_tier_gib:g} GiB CPU tier a replica" if r.cpu_tier_gib else ""
    return f"{r.gpu_count} × {r.gpu}, {Shape(r.tp, r.dp, r.pp, r.ep).label()}{engine}, {reps}, {r.kv_dtype} KV{tier}, ${r.cost_per_hour:,.2f}/h"


def capacity_search(
    model: PreparedModel,
    rec: Recommendation,
    ttft_p95_ms: float | None,
    itl_p95_ms: float | None,
    *,
    requests: int | None = None,
    tolerance: float = CAPACITY_TOLERANCE,
    max_runs: int = CAPACITY_MAX_RUNS,
    seed: int = 0,
    progress: Progress | None = None,
    time_budget_s: float = CAPACITY_TIME_BUDGET_S,
) -> CapacityResult:
    """Highest Poisson rate at which the simulated deployment keeps p95 TTFT and ITL inside the
    SLOs, finishes every request and is not overloaded (Vidur-style search: bracket, then bisect
    until the bracket is within ``tolerance`` of its top or ``max_runs`` simulations ran).

    The replicas are identical, so at most ``SIM_REPLICAS`` of them are simulated behind the
    least-outstanding-tokens router with their share of the arrivals, and the rate found is scaled
    back to the whole deployment (a larger pool balances at least as well, so this errs low). Each
    replica uses the plan's pool and step cost, ``max_num_seqs`` and chunked prefill with the
    plan's token budget per step (a prompt's chunk takes what the budget leaves, as in vLLM V1);
    prompts and outputs are the plan's. No simulation starts after ``time_budget_s`` of wall time
    (each one is itself stopped by then), so a search ends within about that budget.
    """
    from planner import simulate as sim

    deadline = time.monotonic() + max(time_budget_s, 0.1)
    plan = compute_plan(make_inputs(**rec.plan_values), model)
    cost, blocks = sim.from_plan(plan)
    n = requests or 160
    replicas = rec.replicas
    simulated = min(replicas, SIM_REPLICAS)
    budget = plan.batching.tokens  # given, or vLLM's default for this GPU (the plan's own)
    cfg = sim.SimConfig(
        block_tokens=plan.inputs.block_tokens,
        total_blocks=blocks,
        max_num_seqs=rec.max_num_seqs,
        max_num_batched_tokens=budget,
        chunk_tokens=budget,  # as vLLM V1: a prompt's chunk is whatever the step's budget leaves
        policy="chunked",
        replicas=simulated,
        router="least-outstanding-tokens",
        time_budget_s=min(10.0, max(time_budget_s, 0.1)),
    )
    prompt, output = plan.context.input_tokens, plan.context.reserved_output_tokens
    seen: dict[float, tuple[bool, float, float]] = {}

    def run(rate: float) -> bool:
        r = sim.simulate(sim.poisson_requests(rate * simulated / replicas, n, prompt, output, seed=seed), cfg, cost)
        ok = (
            r.requests_completed == n
            and not r.overload.overloaded
            and r.stopped_early is None
            and (ttft_p95_ms is None or r.ttft_ms.p95 <= ttft_p95_ms)
            and (itl_p95_ms is None or r.itl_ms.p95 <= itl_p95_ms)
        )
        seen[rate] = (ok, r.ttft_ms.p95, r.itl_ms.p95)
        if progress:
            progress(min(1.0, len(seen) / max_runs), f"{rate:,.3g} req/s {'holds' if ok else 'misses'}")
        return ok

    lo, hi = 0.0, max(rec.sustainable_rate, 1e-3)
    while len(seen) < max_runs and (not seen or time.monotonic() < deadline) and run(hi):  # bracket: double until a rate fails
        lo, hi = hi, hi * 2
    while len(seen) < max_runs and time.monotonic() < deadline and hi - lo > tolerance * hi:
        mid = (lo + hi) / 2
        if run(mid):
            lo = mid
        else:
            hi = mid
    width = (hi - lo) / hi if hi > 0 else 0.0
    if lo > 0:
        _ok, ttft, itl = seen[lo]
        note = f"{len(seen)} simulations of {n:,} requests on {simulated} of {replicas} replica{'s' if replicas > 1 else ''}; holds at {lo:,.3g} req/s, misses at {hi:,.3g} req/s (bracket {width:.0%})"
        return CapacityResult(max_rate_per_s=lo, runs=len(seen), tolerance=width, requests_per_run=n, ttft_p95_ms=ttft, itl_p95_ms=itl, note=note)
    low = min(seen)
    note = f"{len(seen)} simulations of {n:,} requests on {simulated} of {replicas} replica{'s' if replicas > 1 else ''}; misses the SLOs even at {low:,.3g} req/s (p95 TTFT {seen[low][1]:,.0f} ms, p95 ITL {seen[low][2]:,.1f} ms)"
    return CapacityResult(max_rate_per_s=0.0, runs=len(seen), tolerance=width, requests_per_run=n, ttft_p95_ms=None, itl_p95_ms=None, note=note)
