"""The throughput-interactivity frontier, and the disaggregated half of the size search.

Every deployment shape the size search visits is evaluated along a ladder of concurrencies per
replica (1, 2, 4, ... up to what memory and vLLM's ``max_num_seqs`` admit, plus the most the ITL
SLO admits): a point of **output tokens/s per GPU** (the shape's capacity at that load, per GPU)
against **tokens/s per user** (1000 / mean TPOT), as InferenceMAX and AIConfigurator publish them.

* aggregated (one GPU kind, TP x EP, KV dtype): the plan's closed loop (:func:`planner.plan.serving.closed`) at ``c``
  requests a replica, the same served-latency model as :func:`planner.plan.compute_plan`
  (its p95 TTFT and ITL, prefill chunks riding in the decode steps);
* disaggregated: a decode shape at ``c`` sequences a replica (:mod:`planner.disagg`) with the
  prefill shape (any GPU kind, same KV and weight dtypes) and the whole x:y pool ratio that give
  the most tokens/s per GPU while prefill keeps up within the TTFT SLO.

Each point also carries the deployment that holds the size request's workload at that operating
point (its GPUs and cost per hour) and the cost per million output tokens at capacity. The
Pareto front: no other point has both more tokens/s per GPU and more tokens/s per user.
``meets_slo``: the point's p95 TTFT and ITL are inside the SLOs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from planner import capacity, disagg
from planner.disagg import DecodeModel, PoolModel, PrefillModel
from planner.plan import Plan, PreparedModel, serving

DISAGG_BLOCK_TOKENS = 64  # disaggregated pools plan 64-token blocks unless told (vLLM RFC #50913: NIXL's descriptors)
SHORTLIST = 3  # prefill shapes kept per decode shape after the quick cost screen


class PoolShape(BaseModel):
    """One pool of a disaggregated point or recommendation (the scriptable contract's ``prefill`` / ``decode``)."""

    model_config = ConfigDict(frozen=True)

    gpu: str
    tp: int
    replicas: int
    ep: int = 1
    gpu_hour_price: float = 0.0


class FrontierPoint(BaseModel):
    """One deployment at one operating point (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    gpus: int  # the deployment that holds the workload at this operating point
    cost_per_hour: float
    cost_per_million_tokens: float  # at capacity
    pareto: bool
    disaggregated: bool
    meets_slo: bool
    ttft_p95_ms: float
    itl_p95_ms: float
    tpot_ms: float
    sequences_per_replica: int  # decode replicas for a disaggregated point
    kv_dtype: str
    gpu: str  # aggregated: its GPU; disaggregated: the decode pool's
    tp: int
    ep: int
    replicas: int
    prefill: PoolShape | None = None
    decode: PoolShape | None = None
    kv_transfer_ms: float | None = None
    disagg: str | None = None  # the pools as plan --disagg takes them
    plan_values: dict  # plan inputs that open this point as a plan

    def label(self) -> str:
        if self.disaggregated:
            return f"{self.prefill.replicas}P {self.prefill.gpu} TP {self.prefill.tp} + {self.decode.replicas}D {self.decode.gpu} TP {self.decode.tp}, {self.kv_dtype} KV, {self.sequences_per_replica} seqs/decode replica"
        return f"{self.gpu} TP {self.tp}{f' EP {self.ep}' if self.ep > 1 else ''}, {self.kv_dtype} KV, {self.sequences_per_replica} seqs/replica"


def ladder(top: int, slo_top: int = 0) -> list[int]:
    """1, 2, 4, ... below ``top``, then ``top`` and the ITL SLO's limit ``slo_top`` (when in range)."""
    out, c = [], 1
    while c < top:
        out.append(c)
        c *= 2
    if top >= 1:
        out.append(top)
    if 1 <= slo_top < top and slo_top not in out:
        out.append(slo_top)
    return sorted(out)


# --------------------------------------------------------------------------- aggregated shapes


@dataclass(frozen=True)
class AggPoint:
    """An aggregated replica at ``c`` requests (the served model, as compute_plan computes it)."""

    c: int
    ttft_p95_ms: float
    itl_p95_ms: float
    tpot_ms: float
    e2e_s: float
    tokens_per_s: float  # per replica


def agg_point(plan: Plan, c: int) -> AggPoint:
    """One aggregated replica of ``plan``'s shape (a plan on ``tp`` GPUs) at ``c`` concurrent
    requests: the figures :func:`compute_plan` gives at ``sequences=c`` (its serving model's
    closed loop of ``c`` clients, :func:`planner.plan.serving.closed`; tests/test_disagg.py checks
    they agree), without planning again."""
    fig = serving.closed(plan._load.setup, c)
    queue = plan.inputs.queue_ms or 0.0
    return AggPoint(c, queue + fig.ttft_p95_ms, fig.tpot_p95_ms, fig.tpot_ms, fig.e2e_ms / 1e3, c * 1000.0 / fig.tpot_ms if fig.tpot_ms else 0.0)


def _agg_replicas(point: AggPoint, users: int | None, rate: float | None) -> int:
    if users is not None:
        return max(1, math.ceil(users / point.c))
    per_replica = point.c / point.e2e_s if point.e2e_s > 0 else math.inf
    return max(1, math.ceil(rate / per_replica - 1e-9))


def aggregated_points(pool: PoolModel, users: int | None, rate: float | None, slo: Slo, slo_top: int | None = None) -> list[FrontierPoint]:
    """The ladder of one aggregated shape (``slo_top``: the most requests a replica takes inside
    the SLOs, when the size search found it already)."""
    top = min(pool.memory_sequences, pool.runtime_sequences)
    if slo_top is None:
        slo_top = capacity.largest_within(lambda c: 0.0 if slo.met_by(agg_point(pool.plan, c)) else 1.0, 0.5, top) if slo.any else 0
    out = []
    for c in ladder(top, slo_top):
        p = agg_point(pool.plan, c)
        replicas = _agg_replicas(p, users, rate)
        per_gpu = p.tokens_per_s / pool.tp
        out.append(
            FrontierPoint(
                tokens_per_s_per_gpu=per_gpu, tokens_per_s_per_user=1000.0 / p.tpot_ms if p.tpot_ms else 0.0, gpus=replicas * pool.tp,
                cost_per_hour=round(replicas * pool.tp * pool.price, 4), cost_per_million_tokens=_per_million(pool.price, per_gpu), pareto=False,
                disaggregated=False, meets_slo=slo.met_by(p), ttft_p95_ms=p.ttft_p95_ms, itl_p95_ms=p.itl_p95_ms, tpot_ms=p.tpot_ms,
                sequences_per_replica=p.c, kv_dtype=pool.kv_dtype, gpu=pool.gpu, tp=pool.tp, ep=pool.ep, replicas=replicas,
                plan_values={**pool.values, "gpu_count": replicas * pool.tp, "sequences": users if users is not None else replicas * p.c, "max_num_seqs": p.c},
            )
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class Slo:
    """The size request's SLOs: p95 TTFT, p95 ITL and mean TPOT (each None when not set)."""

    ttft_ms: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.itl_ms, self.tpot_ms))

    def met(self, ttft_p95_ms: float, itl_p95_ms: float, tpot_ms: float) -> bool:
        return (self.ttft_ms is None or ttft_p95_ms <= self.ttft_ms) and (self.itl_ms is None or itl_p95_ms <= self.itl_ms) and (self.tpot_ms is None or tpot_ms <= self.tpot_ms)

    def met_by(self, p: AggPoint) -> bool:
        return self.met(p.ttft_p95_ms, p.itl_p95_ms, p.tpot_ms)

    @property
    def decode_ms(self) -> float | None:
        """The bound on a decode-only step (its mean is its p95): the tighter of the ITL and TPOT SLOs."""
        bounds = [v for v in (self.itl_ms, self.tpot_ms) if v is not None]
        return min(bounds) if bounds else None


def _per_million(price_per_gpu_hour: float, tokens_per_s_per_gpu: float) -> float:
    return price_per_gpu_hour / (tokens_per_s_per_gpu * 3600) * 1e6 if tokens_per_s_per_gpu > 0 else 0.0


# --------------------------------------------------------------------------- disaggregated pairs


class PrefillTable:
    """The prefill shapes of one KV dtype as arrays, so a decode shape screens all of them at once."""

    def __init__(self, pools: list[PrefillModel]) -> None:
        self.pools = pools
        devices = [p.device for p in pools]
        self.tp = np.array([p.tp for p in pools], dtype=float)
        self.prefill_s = np.array([p.prefill_s for p in pools])
        self.service_s = np.array([p.service_s for p in pools])
        self.price = np.array([p.price for p in pools])
        self.gpu = [p.gpu for p in pools]
        self.node_gpus = np.array([d.node_gpus for d in devices], dtype=float)
        self.link_gb_s = np.array([d.link_gb_s for d in devices])
        self.link_us = np.array([d.link_latency_us for d in devices])
        self.scaleout_gb_s = np.array([d.scaleout_gb_s for d in devices])
        self.scaleout_us = np.array([d.nic_latency_us for d in devices])

    def transfer_ms(self, decode: DecodeModel) -> np.ndarray:
        """:func:`disagg.transfer_ms` of every prefill shape beside one replica of ``decode``."""
        d = decode.device
        same = np.array([g == d.name for g in self.gpu]) & (self.tp + decode.tp <= self.node_gpus)
        gb_s = np.where(same, self.link_gb_s, np.minimum(self.scaleout_gb_s, d.scaleout_gb_s))
        us = np.where(same, self.link_us, np.maximum(self.scaleout_us, d.nic_latency_us))
        per_decode = decode.kv_prompt_bytes
        per_prefill = np.ceil(per_decode * decode.tp / self.tp)
        return us / 1e3 + np.maximum(per_decode, per_prefill) / (gb_s * 1e6) + decode.descriptors * disagg.NIXL_DESCRIPTOR_S * 1e3

    def utilisation(self, decode: DecodeModel, c: int, ttft_slo: float | None, transfer_ms: np.ndarray) -> np.ndarray:
        """The prefill utilisation the TTFT SLO allows each shape beside ``decode`` at ``c`` sequences (0: none)."""
        if ttft_slo is None:
            return np.full(len(self.pools), disagg.PREFILL_MAX_UTILISATION)
        room = ttft_slo / 1e3 - self.prefill_s - transfer_ms / 1e3 - disagg.handover_s(decode, c)
        k = np.searchsorted(_P95, room / self.service_s, side="right") - 1
        return np.where(room >= 0, _RHO[np.maximum(k, 0)], 0.0)


_RHO = np.array(disagg._RHO_GRID)
_P95 = np.array(disagg._P95_GRID)


def disaggregated_points(decode: DecodeModel, table: PrefillTable, users: int | None, rate: float | None, slo: Slo) -> list[FrontierPoint]:
    """The ladder of one decode shape, each point with the prefill shape (fewest GPUs per decode
    replica's worth of requests, one meeting the TTFT SLO first) and its best whole pool ratio."""
    top = decode.max_sequences
    out = []
    ttft_slo = slo.ttft_ms
    slo_top = decode.max_concurrency(slo.decode_ms) if slo.decode_ms is not None else 0
    xfer = table.transfer_ms(decode)
    for c in ladder(top, slo_top):
        mu_d = c / disagg.decode_time_s(decode, c, 0.0)
        rho = table.utilisation(decode, c, ttft_slo, xfer)
        miss = rho <= 0
        gpus = mu_d * table.service_s / np.where(miss, disagg.PREFILL_MAX_UTILISATION, rho) * table.tp + decode.tp
        best = table.pools[int(np.lexsort((gpus, miss))[0])]
        op = disagg.best_integer_ratio(best, decode, c, ttft_slo) or disagg.best_integer_ratio(best, decode, c, None)
        if op is not None:
            out.append(_disagg_point(op, c, users, rate, slo))
    return out


def _disagg_point(op: disagg.Operating, c: int, users: int | None, rate: float | None, slo: Slo) -> FrontierPoint:
    p, d = op.prefill, op.decode
    per_gpu = op.output_tokens_per_s / op.gpus
    meets = slo.met(op.ttft_ms, op.tpot_ms, op.tpot_ms)
    # the deployment that holds the workload at this operating point: whole copies of the x:y unit
    unit_rate = op.rate
    need = rate if rate is not None else users / (op.ttft_ms / 1e3 + disagg.decode_time_s(d, c, op.transfer.ms))
    copies = max(1, math.ceil(need / unit_rate - 1e-9)) if unit_rate > 0 else 1
    x, y = op.prefill_replicas * copies, op.decode_replicas * copies
    spec = disagg.format_pools(disagg.PoolSpec(role="prefill", gpu=p.gpu, tp=p.tp, replicas=x, ep=p.ep), disagg.PoolSpec(role="decode", gpu=d.gpu, tp=d.tp, replicas=y, ep=d.ep))
    price_per_gpu = op.cost_per_hour / op.gpus
    return FrontierPoint(
        tokens_per_s_per_gpu=per_gpu, tokens_per_s_per_user=1000.0 / op.tpot_ms if op.tpot_ms else 0.0, gpus=op.gpus * copies,
        cost_per_hour=round(op.cost_per_hour * copies, 4), cost_per_million_tokens=_per_million(price_per_gpu, per_gpu), pareto=False, disaggregated=True,
        meets_slo=meets, ttft_p95_ms=op.ttft_ms, itl_p95_ms=op.tpot_ms, tpot_ms=op.tpot_ms, sequences_per_replica=c, kv_dtype=d.kv_dtype, gpu=d.gpu, tp=d.tp, ep=d.ep,
        replicas=y, prefill=PoolShape(gpu=p.gpu, tp=p.tp, replicas=x, ep=p.ep, gpu_hour_price=p.price), decode=PoolShape(gpu=d.gpu, tp=d.tp, replicas=y, ep=d.ep, gpu_hour_price=d.price),
        kv_transfer_ms=op.transfer.ms, disagg=spec,
        plan_values={**d.values, "gpu_count": y * d.tp, "sequences": users if users is not None else max(1, round(need * (op.ttft_ms / 1e3 + disagg.decode_time_s(d, c, op.transfer.ms)))), "disagg": spec, "max_num_seqs": c},
    )  # fmt: skip


def mark_pareto(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """The same points, ``pareto`` True where no other point has at least as much of both figures
    and more of one (sorted by tokens/s per user, then per GPU)."""
    order = sorted(range(len(points)), key=lambda i: (-points[i].tokens_per_s_per_user, -points[i].tokens_per_s_per_gpu))
    best_gpu = -math.inf
    front = set()
    for i in order:
        if points[i].tokens_per_s_per_gpu > best_gpu:
            front.add(i)
            best_gpu = points[i].tokens_per_s_per_gpu
    return [p.model_copy(update={"pareto": i in front}) if (i in front) != p.pareto else p for i, p in enumerate(points)]


# --------------------------------------------------------------------------- disaggregated recommendations


@dataclass(frozen=True)
class DisaggCandidate:
    """The cheapest disaggregated deployment of one decode shape that holds the workload."""

    op: disagg.Operating
    max_sequences: int  # per decode replica under the ITL SLO and memory
    rate: float


def cheapest_pairing(decode: DecodeModel, table: PrefillTable, users: int | None, rate: float | None, slo: Slo) -> DisaggCandidate | str:
    """For one decode shape: the prefill shape and pool sizes of the cheapest deployment that holds
    the workload under the SLOs (a quick screen by cost, then :func:`disagg.size_pools` on the
    :data:`SHORTLIST` best), or why none does."""
    ttft_slo = slo.ttft_ms
    c = decode.max_concurrency(slo.decode_ms)
    if c < 1:
        if decode.max_sequences < 1:
            return "one sequence does not fit the decode replica"
        return f"decode step at one sequence is {decode.tpot_s(1) * 1e3:,.1f} ms, above the {slo.decode_ms:g} ms ITL / TPOT SLO"
    xfer = table.transfer_ms(decode)
    rho = table.utilisation(decode, c, ttft_slo, xfer)
    ok = rho > 0
    if not ok.any():
        return f"no prefill shape meets the {ttft_slo:g} ms TTFT SLO beside this decode pool (prefill, KV transfer and handover take longer)"
    lam = np.full(len(table.pools), rate) if rate is not None else users / (table.prefill_s + decode.generated * decode.tpot_s(c) + xfer / 1e3)
    cost = np.where(ok, np.ceil(lam * table.service_s / np.where(ok, rho, 1.0) - 1e-9) * table.tp * table.price, np.inf)
    best = None
    for i in np.argsort(cost, kind="stable")[:SHORTLIST]:
        if not ok[i]:
            break
        p = table.pools[int(i)]
        lam_i, op = rate, None
        for _ in range(4 if users is not None else 1):  # users: the rate follows the end-to-end time
            if users is not None:
                e2e = (op.ttft_ms / 1e3 if op else p.prefill_s) + disagg.decode_time_s(decode, c, op.transfer.ms if op else 0.0)
                lam_i = users / e2e
            op = disagg.size_pools(p, decode, lam_i, c, ttft_slo)
            if op is None:
                break
        if op is not None and users is not None:  # the pools at the users in flight, as the plan splits them
            op = disagg.hold_users(p, decode, op.prefill_replicas, op.decode_replicas, users, c, ttft_slo)
            lam_i = op.rate if op is not None else lam_i
        if op is not None and (best is None or (op.cost_per_hour, op.gpus) < (best.op.cost_per_hour, best.op.gpus)):
            best = DisaggCandidate(op, c, lam_i)
    if best is None:
        return f"no prefill pool holds the rate within the {ttft_slo:g} ms TTFT SLO" if ttft_slo is not None else "no prefill pool holds the rate"
    return best


def shapes(model: PreparedModel, base: dict, gpus: list[str], tps, kv_dtypes, price_of: dict, moe: bool, role: str) -> tuple[list[PoolModel], list[tuple]]:
    """Every pool replica of ``role`` the search visits (and the (gpu, tp, ep, kv, reason) of those that cannot run)."""
    out, refused = [], []
    values = dict(base)
    if role != "aggregated" and "block_tokens" not in values:
        values["block_tokens"] = DISAGG_BLOCK_TOKENS
    kind = "decode" if role == "aggregated" else role
    for g in gpus:
        for tp in tps:
            for ep in (1, tp) if moe and tp > 1 else (1,):
                for kv in kv_dtypes:
                    pool = disagg.pool_model(model, values, kind, g, tp, ep, kv, price_of[g][0])
                    if isinstance(pool, str):
                        refused.append((g, tp, ep, kv, pool))
                    else:
                        out.append(pool)
    return out, refused


@dataclass(frozen=True)
class Search:
    """What the disaggregated search and the frontier found (:func:`search`)."""

    candidates: list[DisaggCandidate]
    refused: list[tuple]  # (gpu, tp, ep, kv, reason) of decode shapes
    points: list[FrontierPoint] | None
    visited: dict  # counts of the shapes visited


def search(
    model: PreparedModel,
    base: dict,
    gpus: list[str],
    tps,
    kv_dtypes,
    price_of: dict,
    moe: bool,
    users: int | None,
    rate: float | None,
    slo: Slo,
    *,
    disaggregated: bool = True,
    frontier: bool = False,
    aggregated: list[tuple[dict, Plan, int]] | None = None,
) -> Search:
    """The disaggregated candidates (one per decode shape that holds the workload) and, with
    ``frontier``, every point of every aggregated and (with ``disaggregated``) disaggregated shape.
    ``aggregated``: the size search's own aggregated replicas (plan inputs, plan at one sequence,
    the most sequences it admits under the SLOs), which the frontier reuses instead of planning again."""
    candidates, refused, points = [], [], [] if frontier else None
    visited = {}
    if disaggregated:
        prefills, _p_refused = shapes(model, base, gpus, tps, kv_dtypes, price_of, moe, "prefill")
        decodes, d_refused = shapes(model, base, gpus, tps, kv_dtypes, price_of, moe, "decode")
        refused.extend(d_refused)
        visited |= {"prefill_shapes": len(prefills), "decode_shapes": len(decodes)}
        tables = {}
        for p in prefills:
            tables.setdefault(p.kv, []).append(p)
        tables = {kv: PrefillTable(pools) for kv, pools in tables.items()}
        for d in decodes:
            table = tables.get(d.kv)  # both pools cache in one KV dtype: the pulled blocks are copied as they are
            if table is None:
                refused.append((d.gpu, d.tp, d.ep, d.kv_dtype, "no prefill shape of this KV dtype fits"))
                continue
            out = cheapest_pairing(d, table, users, rate, slo)
            if isinstance(out, str):
                refused.append((d.gpu, d.tp, d.ep, d.kv_dtype, out))
            else:
                candidates.append(out)
            if frontier:
                points.extend(disaggregated_points(d, table, users, rate, slo))
    if frontier:
        if aggregated is None:
            aggs = [(a, None) for a in shapes(model, base, gpus, tps, kv_dtypes, price_of, moe, "aggregated")[0]]
        else:
            aggs = [
                (DecodeModel(role="aggregated", gpu=v["gpu"], tp=v["tp"], ep=v["ep"], kv_dtype=v["kv_dtype"], price=v["gpu_hour_price"], plan=one, values=v), limit if slo.any else None)
                for v, one, limit in aggregated
            ]
            aggs = [(a, top) for a, top in aggs if a.memory_sequences >= 1]
        visited["aggregated_shapes"] = len(aggs)
        for a, top in aggs:
            points.extend(aggregated_points(a, users, rate, slo, top))
        points = mark_pareto(points)
        visited["points"] = len(points)
    return Search(candidates, refused, points, visited)
