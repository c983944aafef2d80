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

from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.limits import BOUNDS, CAPACITY_TIME_BUDGET_S
from planner.plan import Plan, PreparedModel, compute_plan, make_inputs
from planner.prices import PRICE_TABLE
from planner.units import fmt_ms_rounded

TP_CANDIDATES = (1, 2, 4, 8)
KV_DTYPES = ("bf16", "fp8")
MAX_REPLICAS = 1024
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


class Refusal(BaseModel):
    model_config = ConfigDict(frozen=True)

    gpu: str
    tp: int
    kv_dtype: str
    reason: str
    ep: int = 1
    dp: int = 1
    pp: int = 1


class SizingResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    recommendations: list[Recommendation]
    searched: dict
    refused: list[Refusal]
    answer: str


def _check_request(users: int | None, rate_per_s: float | None, ttft_p95_ms: float | None, itl_p95_ms: float | None) -> None:
    if (users is None) == (rate_per_s is None):
        raise PlannerError("workload", None, "give either users (concurrent sequences) or rate (requests per second), not both or neither")
    if users is not None and (isinstance(users, bool) or not isinstance(users, int) or not 1 <= users <= MAX_USERS):
        raise PlannerError("users", users, f"must be a whole number of concurrent users from 1 to {MAX_USERS:,}")
    if rate_per_s is not None and (not isinstance(rate_per_s, (int, float)) or not math.isfinite(rate_per_s) or not 0 < rate_per_s <= MAX_RATE):
        raise PlannerError("rate", rate_per_s, f"must be a request rate above 0 and at most {MAX_RATE:,.0f} per second")
    for name, v in (("ttft_p95_ms", ttft_p95_ms), ("itl_p95_ms", itl_p95_ms)):
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
    ) -> None:
        self.model = model
        self.gpu, self.shape, self.kv, self.price, self.price_source = gpu, shape, kv, price, price_source
        self.tp, self.ep = shape.tp, shape.ep
        self.users, self.rate, self.ttft_slo, self.itl_slo = users, rate, ttft_slo, itl_slo
        self.values = {
            **{k: v for k, v in base.items() if k not in SEARCHED},
            **{"gpu": gpu, "tp": shape.tp, "ep": shape.ep, "dp": shape.dp, "pp": shape.pp, "kv_dtype": kv, "itl_slo_ms": itl_slo, "ttft_slo_ms": ttft_slo, "gpu_hour_price": price},
        }

    def plan(self, replicas: int, sequences: int, max_num_seqs: int | None = None, rate: float | None = None) -> Plan:
        """The deployment of ``replicas``: a closed loop of ``sequences`` clients, or Poisson arrivals at ``rate``;
        ``max_num_seqs`` per replica (spread over its data-parallel ranks)."""
        per_rank = None if max_num_seqs is None else max(1, max_num_seqs // self.shape.dp)
        return compute_plan(make_inputs(**self.values, gpu_count=self.shape.gpus * replicas, sequences=sequences, max_num_seqs=per_rank, request_rate=rate), self.model)

    def workload(self, replicas: int, limit: int) -> Plan:
        """The deployment of ``replicas`` under the workload: its users as a closed loop, its rate as Poisson arrivals."""
        return self.plan(replicas, self.users or 1, limit, self.rate)

    def evaluate(self) -> Recommendation | str:
        try:
            one = self.plan(1, 1, rate=self.rate)
        except PlannerError as exc:
            return exc.reason.split(";")[0]
        self._ctx = one.context  # the context does not depend on the load: no plan of its own
        kv = one.kv_cache
        limit, binding = kv.admissible_sequences, kv.binding_constraint
        # the plan's admission already holds both SLOs (its p95 ITL and TTFT limits): limit is theirs too
        if limit < 1:
            if binding == "latency_slo":
                return f"p95 ITL at one sequence is {_p95(one)[1]:,.1f} ms, above the {self.itl_slo:g} ms SLO"
            if binding == "ttft_slo":
                return f"p95 TTFT at one sequence is {_p95(one)[0]:,.0f} ms, above the {self.ttft_slo:g} ms SLO"
            return f"one sequence's K/V ({kv.mib_per_reserved_sequence:,} MiB) does not fit next to the weights"
        plan_at_limit = self.plan(1, limit)
        e2e_s = plan_at_limit.latency.end_to_end_ms / 1e3
        little = limit / e2e_s if e2e_s > 0 else math.inf
        # the prompts a second the prefill budget can take beside the decodes (its ITL already
        # carries the prefill steps, so this is the only other bound on the rate)
        gpu_bound = plan_at_limit.roofline.prefill_capacity_per_s * self.shape.dp
        per_replica_rate = min(little, gpu_bound)
        if self.rate is not None and gpu_bound < little:
            binding = "throughput"
        need = math.ceil(self.users / limit) if self.users is not None else math.ceil(self.rate / per_replica_rate)
        replicas = self._minimal(max(1, need), limit, per_replica_rate)
        if isinstance(replicas, str):
            return replicas
        final = self.workload(replicas, limit)
        load = final.kv_cache.requested_sequences
        queue_ms = self._slot_wait_ms(replicas, limit, final)
        lat = final.latency
        gpus = self.shape.gpus * replicas
        per_hour = self.price * gpus
        if self.users is not None:
            tokens_per_s = self.users * self._output() / (lat.end_to_end_ms / 1e3) if lat.end_to_end_ms > 0 else 0.0
        else:
            tokens_per_s = self.rate * self._output()
        per_million = per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else math.inf
        return Recommendation(
            gpu=self.gpu,
            tp=self.shape.tp,
            ep=self.shape.ep,
            dp=self.shape.dp,
            pp=self.shape.pp,
            replicas=replicas,
            gpu_count=gpus,
            kv_dtype=self.kv,
            max_num_seqs=limit,
            sequences_per_replica=-(-load // replicas),
            cost_per_hour=round(per_hour, 4),
            cost_per_million_tokens=round(per_million, 4) if math.isfinite(per_million) else 0.0,
            ttft_p95_ms=_p95(final)[0] + queue_ms,
            itl_p95_ms=_p95(final)[1],
            sustainable_rate=per_replica_rate * replicas,
            binding_constraint=binding,
            gpu_hour_price=self.price,
            price_source=self.price_source,
            plan_values={**{k: v for k, v in self.values.items() if v is not None}, "gpu_count": gpus, "sequences": self.users or load, "max_num_seqs": max(1, limit // self.shape.dp), **({"request_rate": self.rate} if self.rate is not None else {})},
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
        ttft += self._slot_wait_ms(replicas, limit, p)
        sustainable = self.rate is None or not p.roofline.prefill_saturated
        return p.kv_cache.admitted and sustainable and (self.ttft_slo is None or ttft <= self.ttft_slo) and (self.itl_slo is None or itl <= self.itl_slo)

    def _minimal(self, replicas: int, limit: int, per_replica_rate: float) -> int | str:
        while not self.holds(replicas, limit, per_replica_rate):
            replicas += 1
            if replicas > MAX_REPLICAS:
                return f"needs more than {MAX_REPLICAS:,} replicas"
        while replicas > 1 and self.holds(replicas - 1, limit, per_replica_rate):
            replicas -= 1
        if replicas > MAX_REPLICAS:
            return f"needs {replicas:,} replicas, more than {MAX_REPLICAS:,}"
        return replicas


def size(
    model: PreparedModel,
    base: dict | None = None,
    *,
    users: int | None = None,
    rate_per_s: float | None = None,
    ttft_p95_ms: float | None = None,
    itl_p95_ms: float | None = None,
    gpus: list[str] | None = None,
    kv_dtypes: tuple[str, ...] | list[str] = KV_DTYPES,
    tps: tuple[int, ...] | list[int] = TP_CANDIDATES,
    prices: dict[str, float] | float | None = None,
    capacity_top: int = 0,
    capacity_requests: int | None = None,
    progress: Progress | None = None,
    _fallback: bool = True,
) -> SizingResult:
    """Rank the deployments that hold the workload (see the module docstring).

    ``base`` holds any other plan inputs (context components or ``input_tokens``,
    ``output_tokens``, ``max_context``, ``reservation``, ``headroom_bp``, ...).
    ``capacity_top`` (at most :data:`~planner.limits.MAX_CAPACITY_TOP`) runs
    :func:`capacity_search` on that many of the best recommendations, within
    :data:`~planner.limits.CAPACITY_TIME_BUDGET_S` of wall time together: the ones not reached are
    left without a capacity and ``searched["capacity_search"]`` says so.

    Raises:
        PlannerError: both or neither of users and rate, zero users, an unknown GPU or KV
            dtype, contradictory SLOs, or no candidate holds the workload (the message names the
            cheapest deployment over the whole catalog that would, when there is one).
    """
    base = dict(base or {})
    _check_request(users, rate_per_s, ttft_p95_ms, itl_p95_ms)
    BOUNDS["capacity_top"].check("capacity_top", capacity_top)
    names = resolve_gpus(gpus)
    for kv in kv_dtypes:
        if kv not in ("fp32", "fp16", "bf16", "fp8", "int8", "int4"):
            raise PlannerError("kv_dtypes", kv, "must be among fp32, fp16, bf16, fp8, int8, int4")
    make_inputs(**{k: v for k, v in base.items() if k not in SEARCHED})  # bad base inputs fail here, once
    price_of = resolve_prices(names, prices)
    recs: list[Recommendation] = []
    refused: list[Refusal] = []
    moe = bool(model.weights(base.get("weight_dtype", "auto")).num_experts)
    combos = [(g, shape, kv) for g in names for shape in shapes(model, base, g, tps) for kv in kv_dtypes]
    for k, (g, shape, kv) in enumerate(combos):
        if progress:
            progress(k / max(1, len(combos)) * (0.5 if capacity_top else 1.0), f"{g}, {shape.label()}, {kv}")
        out = _Candidate(model, base, g, shape, kv, *price_of[g], users, rate_per_s, ttft_p95_ms, itl_p95_ms).evaluate()
        if isinstance(out, str):
            refused.append(Refusal(gpu=g, tp=shape.tp, ep=shape.ep, dp=shape.dp, pp=shape.pp, kv_dtype=kv, reason=out))
        else:
            recs.append(out)
    recs.sort(key=lambda r: (r.cost_per_hour, r.cost_per_million_tokens, r.gpu_count, r.gpu, r.tp, r.dp, r.pp, r.ep, r.kv_dtype))
    workload = f"{users:,} concurrent users" if users is not None else f"{rate_per_s:,.4g} requests/s"
    if not recs:
        hint = ""
        if _fallback and gpus and set(names) != set(CATALOG):
            try:
                wider = size(model, base, users=users, rate_per_s=rate_per_s, ttft_p95_ms=ttft_p95_ms, itl_p95_ms=itl_p95_ms, kv_dtypes=kv_dtypes, tps=tps, prices=prices, _fallback=False)
                hint = f"; the smallest deployment that would: {_describe(wider.recommendations[0])}"
            except PlannerError:
                hint = "; no GPU in the catalog holds it either"
        last = {r.gpu: r for r in refused}  # per GPU, its largest TP and last KV dtype: the nearest miss
        reasons = "; ".join(f"{r.gpu} at TP {r.tp}: {r.reason}" for r in list(last.values())[:3]) + ("; ..." if len(last) > 3 else "")
        raise PlannerError("gpus", ",".join(names)[:80], f"no deployment holds {workload} under the SLOs ({reasons}){hint}")
    capacity_note = None
    if capacity_top:
        top = recs[:capacity_top]
        started = time.monotonic()
        for k, rec in enumerate(top):
            if k and time.monotonic() - started > CAPACITY_TIME_BUDGET_S:  # the budget of all searches together (the best is always searched)
                capacity_note = f"capacity search stopped after {CAPACITY_TIME_BUDGET_S:g} s: {k} of {len(top)} recommendations searched"
                break

            def step(frac: float, msg: str, k: int = k) -> None:
                if progress:
                    progress(0.5 + 0.5 * (k + frac) / len(top), f"capacity search {k + 1}/{len(top)}: {msg}")

            left = CAPACITY_TIME_BUDGET_S - (time.monotonic() - started)
            cap = capacity_search(model, rec, ttft_p95_ms, itl_p95_ms, requests=capacity_requests, progress=step, time_budget_s=left)
            recs[k] = rec.model_copy(update={"capacity": cap})
    if progress:
        progress(1.0, "done")
    best = recs[0]
    ctx = compute_plan(make_inputs(**best.plan_values), model).context
    slo_bits = [f"p95 ITL {fmt_ms_rounded(best.itl_p95_ms)}", f"p95 TTFT {fmt_ms_rounded(best.ttft_p95_ms)}"]
    answer = f"{_describe(best)} — holds {workload} at {ctx.reserved_total_tokens:,}-token context with " + " and ".join(slo_bits) + "."
    searched = {
        "gpus": names,
        "tps": list(tps),
        "eps": "1 and tp, and attention DP = EP (MoE models)" if moe else "1 (dense model)",
        "shapes": "TP; EP = TP and DP = EP ranks for MoE models; two nodes (TP over both, TP with PP 2, DP over both) where one node cannot hold the weights",
        "kv_dtypes": list(kv_dtypes),
        "candidates": len(combos),
        "feasible": len(recs),
        "refused": len(refused),
        "workload": {"users": users, "rate_per_s": rate_per_s, "ttft_p95_ms": ttft_p95_ms, "itl_p95_ms": itl_p95_ms, "context_tokens": ctx.reserved_total_tokens},
        "ranking": "cost per hour, then cost per million output tokens",
    }
    if capacity_note:
        searched["capacity_search"] = capacity_note
    return SizingResult(recommendations=recs, searched=searched, refused=refused, answer=answer)


def _describe(r: Recommendation) -> str:
    reps = f"{r.replicas} replica" + ("s" if r.replicas != 1 else "")
    return f"{r.gpu_count} × {r.gpu}, {Shape(r.tp, r.dp, r.pp, r.ep).label()}, {reps}, {r.kv_dtype} KV, ${r.cost_per_hour:,.2f}/h"


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
    budget = plan.inputs.max_batched_tokens
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
