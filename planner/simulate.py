"""Serving simulator: continuous batching over a paged KV pool, on a manual clock.

A deterministic discrete-event simulation of one engine replica. Requests arrive (Poisson or a
trace), wait, are admitted when both the step's token budget and the KV blocks they need *now*
fit, prefill, decode one token per step and finish or are cancelled. A step's duration comes
from a roofline :class:`StepCost`; nothing reads the wall clock.

States: pending (not arrived) -> waiting -> prefilling -> decoding -> done | cancelled
(or rejected at arrival when the request can never fit the pool or the token budget).

Scheduling, per step:

* KV growth first: every decoding sequence whose next token crosses a block boundary needs one
  new block; if the pool cannot supply them, the newest running request (latest arrival) is
  preempted: its blocks are freed, it goes back to the head of the waiting queue and will
  recompute its prefill (prompt + tokens generated so far) when re-admitted.
* ``fifo`` (prefill first): waiting prompts are admitted whole, in arrival order, before decodes
  take the budget that is left; decodes that do not fit skip the step.
* ``decode-priority``: every running decode first, then whole prompts with the remaining budget.
* ``chunked``: decodes first, then at most ``chunk_tokens`` of prefill per request per step
  (continuing prefills before new admissions).

The first output token is produced at the end of the step that completes the prefill
(TTFT = that time - arrival); ITL samples are the gaps between consecutive tokens of a request.

Blocks are held through explicit leases (:class:`BlockAllocator`): a lease is opened on admission
and released exactly once on completion, cancellation or preemption; a second release raises.
With prefix caching, the full blocks of a common prefix live in one reference-counted lease;
a request that finds them resident and computed skips their prefill.

Hot loop: decoding sequences are advanced lazily (a global tick plus per-request base values),
so a step costs O(events) rather than O(running sequences); block-boundary crossings and
completions are pre-scheduled per tick. Pydantic objects are built only at the boundary.
"""

from __future__ import annotations

import csv
import io
import math
import random
from bisect import insort
from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import PlannerError

Policy = Literal["fifo", "decode-priority", "chunked"]
CancelStage = Literal["admission", "mid-prefill", "first-token", "decode"]
POLICIES: tuple[str, ...] = ("fifo", "decode-priority", "chunked")
CANCEL_STAGES: tuple[str, ...] = ("admission", "mid-prefill", "first-token", "decode")

MAX_REQUESTS = 1_000_000
MAX_TOKENS_PER_REQUEST = 10_000_000
KV_SAMPLES = 500


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


class StepCost(BaseModel):
    """Roofline step-time model: the duration of one engine step (per GPU).

    ``step_time_s = max(bytes / (bandwidth x mbu), flops / (peak x mfu)) + overhead`` with
    ``bytes = weights + kv_bytes_per_token x kv_tokens_read`` and
    ``flops = flops_per_token x new_tokens + attn_flops_per_token_ctx x ctx_token_pairs``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    weights_bytes: float = Field(ge=0)
    kv_bytes_per_token: float = Field(ge=0)
    bandwidth_bytes_per_s: float = Field(gt=0)
    mbu: float = Field(default=0.6, gt=0, le=1)
    flops_per_token: float = Field(ge=0)
    attn_flops_per_token_ctx: float = Field(default=0.0, ge=0)
    peak_flops: float = Field(gt=0)
    mfu: float = Field(default=0.5, gt=0, le=1)
    overhead_s: float = Field(default=0.0, ge=0)

    def step_time_s(self, new_tokens: int, kv_tokens_read: int, ctx_token_pairs: int = 0) -> float:
        t_mem = (self.weights_bytes + self.kv_bytes_per_token * kv_tokens_read) / (self.bandwidth_bytes_per_s * self.mbu)
        t_cmp = (self.flops_per_token * new_tokens + self.attn_flops_per_token_ctx * ctx_token_pairs) / (self.peak_flops * self.mfu)
        return max(t_mem, t_cmp) + self.overhead_s


class Cancellation(BaseModel):
    """Cancel request ``request_id`` at ``stage``.

    * ``admission``: right after it is admitted (blocks leased), before any compute;
    * ``mid-prefill``: at the end of its first prefill step, before its first token;
    * ``first-token``: right after its first token;
    * ``decode``: when it has generated ``after_tokens`` tokens (default ``max(2, output // 2)``);
      a request whose output ends first completes normally.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: int
    stage: CancelStage
    after_tokens: int | None = Field(default=None, ge=2)


class SimConfig(BaseModel):
    """Engine and scheduler settings for one simulation."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    block_tokens: int = Field(default=16, ge=1, le=1_048_576)
    total_blocks: int = Field(ge=1, le=100_000_000)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    max_num_seqs: int = Field(default=256, ge=1)
    policy: Policy = "fifo"
    chunk_tokens: int = Field(default=512, ge=1)
    prefix_tokens: int = Field(default=0, ge=0)
    prefix_share: float = Field(default=0.0, ge=0, le=1)
    reservation: Literal["dynamic", "static"] = "dynamic"
    static_tokens: int | None = Field(default=None, ge=1)
    batching: Literal["continuous", "static"] = "continuous"
    ttft_slo_ms: float | None = Field(default=None, gt=0)
    itl_slo_ms: float | None = Field(default=None, gt=0)
    cancellations: tuple[Cancellation, ...] = ()
    cancel_rate: float = Field(default=0.0, ge=0, le=1)
    seed: int = 0  # drives prefix_share and cancel_rate draws


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    id: int
    arrival_s: float = Field(ge=0)
    prompt_tokens: int = Field(ge=1, le=MAX_TOKENS_PER_REQUEST)
    output_tokens: int = Field(ge=1, le=MAX_TOKENS_PER_REQUEST)


def build(model: type[BaseModel], **kwargs: object) -> BaseModel:
    """Construct ``model(**kwargs)``, turning a pydantic ValidationError into a PlannerError."""
    try:
        return model(**kwargs)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or model.__name__
        raise PlannerError(field, err.get("input"), err.get("msg", "invalid")) from None


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


class Percentiles(BaseModel):
    """Nearest-rank percentiles; all zero with ``count == 0`` when there were no samples."""

    model_config = ConfigDict(frozen=True)

    p50: float
    p95: float
    p99: float
    mean: float
    min: float
    max: float
    count: int


class RequestRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    outcome: Literal["done", "cancelled", "rejected"]
    tokens_generated: int
    queue_ms: float | None  # arrival -> first admission
    ttft_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None  # mean gap between output tokens
    preemptions: int


class SimResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    policy: str
    batching: str
    reservation: str
    requests_total: int
    requests_completed: int
    requests_cancelled: int
    requests_rejected: int
    ttft_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    tpot_ms: Percentiles
    output_tokens: int
    prefill_tokens: int  # computed, including recomputation after preemption
    prefill_tokens_wasted: int  # computed for cancelled or preempted work
    throughput_tokens_per_s: float  # output tokens / makespan
    goodput_requests_per_s: float  # completed requests meeting both SLOs / makespan
    goodput_fraction: float  # ... / all requests
    max_queue_age_ms: float  # longest wait from arrival to first admission (starvation)
    preemptions: int
    prefix_hits: int
    blocks_in_use_at_end: int
    peak_blocks_in_use: int
    peak_kv_utilisation: float
    kv_utilisation: list[tuple[float, float]]  # (t_s, fraction of blocks in use), <= 500 points
    leases_opened: int
    leases_released: int
    blocks_allocated: int
    blocks_freed: int
    step_count: int
    makespan_s: float
    per_request: list[RequestRecord] | None = None


# --------------------------------------------------------------------------------------------
# Block allocator with leases
# --------------------------------------------------------------------------------------------


class AllocatorError(RuntimeError):
    """Misuse of the block allocator (a simulator bug, not bad input)."""


class DoubleFreeError(AllocatorError):
    pass


class OutOfBlocksError(AllocatorError):
    pass


class BlockAllocator:
    """A paged KV pool of ``total_blocks`` block ids handed out through leases.

    ``open()`` returns a lease id; ``allocate(lease, n)`` moves ``n`` free blocks into it;
    ``release(lease)`` returns all of its blocks and closes it. Releasing a closed lease, or a
    block whose owner is not the lease, raises :class:`DoubleFreeError`.
    """

    __slots__ = ("total", "_free", "_owner", "_leases", "_next", "opened", "released", "allocated", "freed")

    def __init__(self, total_blocks: int) -> None:
        if total_blocks < 1:
            raise PlannerError("total_blocks", total_blocks, "must be at least 1")
        self.total = total_blocks
        self._free = list(range(total_blocks - 1, -1, -1))
        self._owner = [0] * total_blocks  # 0 = free, else the lease id
        self._leases: dict[int, list[int]] = {}
        self._next = 1
        self.opened = self.released = self.allocated = self.freed = 0

    @property
    def free_count(self) -> int:
        return len(self._free)

    @property
    def in_use(self) -> int:
        return self.total - len(self._free)

    def open(self) -> int:
        lid = self._next
        self._next += 1
        self._leases[lid] = []
        self.opened += 1
        return lid

    def held(self, lease: int) -> int:
        blocks = self._leases.get(lease)
        if blocks is None:
            raise AllocatorError(f"lease {lease} is not open")
        return len(blocks)

    def allocate(self, lease: int, n: int = 1) -> None:
        blocks = self._leases.get(lease)
        if blocks is None:
            raise AllocatorError(f"lease {lease} is not open")
        free = self._free
        if n > len(free):
            raise OutOfBlocksError(f"lease {lease} asked for {n} blocks, {len(free)} free")
        owner = self._owner
        for _ in range(n):
            b = free.pop()
            owner[b] = lease
            blocks.append(b)
        self.allocated += n

    def release(self, lease: int) -> int:
        blocks = self._leases.pop(lease, None)
        if blocks is None:
            raise DoubleFreeError(f"lease {lease} released twice (or never opened)")
        owner = self._owner
        free = self._free
        for b in blocks:
            if owner[b] != lease:
                raise DoubleFreeError(f"block {b} freed by lease {lease} but owned by {owner[b]}")
            owner[b] = 0
            free.append(b)
        self.freed += len(blocks)
        self.released += 1
        return len(blocks)


class SimulationInvariantError(AssertionError):
    """Raised by ``simulate(..., check_invariants=True)`` when the bookkeeping is inconsistent."""


# --------------------------------------------------------------------------------------------
# Request generation and traces
# --------------------------------------------------------------------------------------------


def _length_spec(name: str, spec: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(spec, bool):
        raise PlannerError(name, spec, "must be a token count or a (low, high) range")
    if isinstance(spec, int):
        lo = hi = spec
    elif isinstance(spec, (tuple, list)) and len(spec) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in spec):
        lo, hi = spec
    else:
        raise PlannerError(name, spec, "must be a token count or a (low, high) range")
    if lo < 1 or hi > MAX_TOKENS_PER_REQUEST or lo > hi:
        raise PlannerError(name, spec, f"must satisfy 1 <= low <= high <= {MAX_TOKENS_PER_REQUEST:,}")
    return lo, hi


def poisson_requests(rate_per_s: float, n: int, prompt_tokens: int | tuple[int, int], output_tokens: int | tuple[int, int], seed: int = 0) -> list[Request]:
    """``n`` requests with exponential inter-arrival gaps at ``rate_per_s``; lengths fixed or
    uniform over an inclusive ``(low, high)`` range. Deterministic for a given ``seed``."""
    if isinstance(rate_per_s, bool) or not isinstance(rate_per_s, (int, float)) or not math.isfinite(rate_per_s) or rate_per_s <= 0:
        raise PlannerError("rate_per_s", rate_per_s, "must be a positive finite request rate")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > MAX_REQUESTS:
        raise PlannerError("requests", n, f"must be an integer from 1 to {MAX_REQUESTS:,}")
    plo, phi = _length_spec("prompt_tokens", prompt_tokens)
    olo, ohi = _length_spec("output_tokens", output_tokens)
    rng = random.Random(seed)
    t = 0.0
    out: list[Request] = []
    for i in range(n):
        t += rng.expovariate(rate_per_s)
        p = plo if plo == phi else rng.randint(plo, phi)
        o = olo if olo == ohi else rng.randint(olo, ohi)
        out.append(Request.model_construct(id=i, arrival_s=t, prompt_tokens=p, output_tokens=o))
    return out


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def parse_trace_csv(text: str, max_rows: int = 100_000) -> list[Request]:
    """Parse an untrusted trace: a header naming ``arrival_s,prompt_tokens,output_tokens``
    (any order, other columns ignored) and one request per row. Rows are numbered as in a
    spreadsheet (the header is row 1); a bad row raises :class:`PlannerError` naming it."""
    if not isinstance(text, str):
        raise PlannerError("trace", type(text).__name__, "must be CSV text")
    if len(text) > max_rows * 200 + 4096:
        raise PlannerError("trace", f"{len(text):,} characters", f"trace is too large (at most {max_rows:,} rows)")
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        header = next(reader, None)
        while header is not None and not any(c.strip() for c in header):
            header = next(reader, None)
        if header is None:
            raise PlannerError("trace", "", "trace is empty (a header arrival_s,prompt_tokens,output_tokens is required)")
        names = [c.strip().lower() for c in header]
        missing = [c for c in TRACE_COLUMNS if c not in names]
        if missing:
            raise PlannerError("trace header", ",".join(header), f"missing column(s) {', '.join(missing)}; expected arrival_s,prompt_tokens,output_tokens")
        idx = {c: names.index(c) for c in TRACE_COLUMNS}
        need = max(idx.values()) + 1
        out: list[Request] = []
        for row in reader:
            rowno = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(out) >= max_rows:
                raise PlannerError("trace", f"more than {max_rows:,} rows", f"trace has too many rows (at most {max_rows:,})")
            if len(row) < need:
                raise PlannerError(f"row {rowno}", ",".join(row), f"has {len(row)} column(s), expected at least {need}")
            raw = row[idx["arrival_s"]].strip()
            try:
                arrival = float(raw)
            except ValueError:
                raise PlannerError(f"row {rowno} arrival_s", raw, "not a number") from None
            if not math.isfinite(arrival) or arrival < 0:
                raise PlannerError(f"row {rowno} arrival_s", raw, "must be a finite time >= 0 seconds")
            vals = []
            for col in ("prompt_tokens", "output_tokens"):
                raw = row[idx[col]].strip()
                try:
                    v = int(raw)
                except ValueError:
                    raise PlannerError(f"row {rowno} {col}", raw, "not an integer") from None
                if v < 1 or v > MAX_TOKENS_PER_REQUEST:
                    raise PlannerError(f"row {rowno} {col}", raw, f"must be from 1 to {MAX_TOKENS_PER_REQUEST:,}")
                vals.append(v)
            out.append(Request.model_construct(id=len(out), arrival_s=arrival, prompt_tokens=vals[0], output_tokens=vals[1]))
    except csv.Error as exc:
        raise PlannerError(f"row {reader.line_num}", "", f"malformed CSV: {exc}") from None
    if not out:
        raise PlannerError("trace", "", "trace has a header but no rows")
    return out


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------

_EMPTY = Percentiles(p50=0.0, p95=0.0, p99=0.0, mean=0.0, min=0.0, max=0.0, count=0)


def _rank(n: int, q: float) -> int:
    return min(n - 1, max(0, math.ceil(q * n) - 1))


def percentiles(values: list[float], scale: float = 1.0) -> Percentiles:
    """Nearest-rank p50/p95/p99, mean, min and max of ``values`` times ``scale``."""
    n = len(values)
    if not n:
        return _EMPTY
    v = sorted(values)
    return Percentiles(
        p50=v[_rank(n, 0.50)] * scale,
        p95=v[_rank(n, 0.95)] * scale,
        p99=v[_rank(n, 0.99)] * scale,
        mean=math.fsum(v) / n * scale,
        min=v[0] * scale,
        max=v[-1] * scale,
        count=n,
    )


def weighted_percentiles(values: list[float], weights: list[int], scale: float = 1.0) -> Percentiles:
    """Nearest-rank percentiles of ``values`` where value ``k`` occurs ``weights[k]`` times."""
    total = sum(weights)
    if not total:
        return _EMPTY
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [(_rank(total, q), q) for q in (0.50, 0.95, 0.99)]
    found: dict[float, float] = {}
    cum = 0
    r = 0
    for k in order:
        cum += weights[k]
        while r < len(ranks) and ranks[r][0] < cum:
            found[ranks[r][1]] = values[k]
            r += 1
        if r == len(ranks):
            break
    mean = math.fsum(v * w for v, w in zip(values, weights, strict=True)) / total
    return Percentiles(
        p50=found[0.50] * scale,
        p95=found[0.95] * scale,
        p99=found[0.99] * scale,
        mean=mean * scale,
        min=values[order[0]] * scale,
        max=values[order[-1]] * scale,
        count=total,
    )


def _downsample(ts: list[float], us: list[int], total: int, points: int = KV_SAMPLES) -> list[tuple[float, float]]:
    n = len(ts)
    if n <= points:
        return [(ts[k], us[k] / total) for k in range(n)]
    out = []
    for j in range(points):
        lo = j * n // points
        hi = (j + 1) * n // points
        out.append((ts[hi - 1], max(us[lo:hi]) / total))  # bucket maximum keeps peaks visible
    return out


# --------------------------------------------------------------------------------------------
# The simulation
# --------------------------------------------------------------------------------------------

_PENDING, _WAITING, _PREFILL, _DECODE, _DONE, _CANCELLED, _REJECTED = range(7)
_C_NONE, _C_ADMIT, _C_MID, _C_FIRST, _C_DECODE = range(5)
_STAGE_CODE = {"admission": _C_ADMIT, "mid-prefill": _C_MID, "first-token": _C_FIRST, "decode": _C_DECODE}
_OUTCOME = {_DONE: "done", _CANCELLED: "cancelled", _REJECTED: "rejected"}


def simulate(requests: list[Request], cfg: SimConfig, cost: StepCost, *, record_requests: bool = False, check_invariants: bool = False) -> SimResult:
    """Run the serving simulation; see the module docstring for the semantics.

    ``record_requests`` adds one :class:`RequestRecord` per request; ``check_invariants``
    verifies the block and sequence bookkeeping after every step (slow; for tests) and raises
    :class:`SimulationInvariantError` on the first inconsistency.
    """
    if len(requests) > MAX_REQUESTS:
        raise PlannerError("requests", len(requests), f"at most {MAX_REQUESTS:,} requests")
    reqs = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    n = len(reqs)
    B = cfg.block_tokens
    TOT = cfg.total_blocks
    MB = cfg.max_num_batched_tokens
    MS = cfg.max_num_seqs
    CH = cfg.chunk_tokens
    FIFO = cfg.policy == "fifo"
    CHUNKED = cfg.policy == "chunked"
    DYN = cfg.reservation == "dynamic"
    SBATCH = cfg.batching == "static"

    rid = [r.id for r in reqs]
    if len(set(rid)) != n:
        seen: set[int] = set()
        dup = next(x for x in rid if x in seen or seen.add(x))
        raise PlannerError("requests", dup, "duplicate request id")
    arr = [float(r.arrival_s) for r in reqs]
    P = [r.prompt_tokens for r in reqs]
    OUT = [r.output_tokens for r in reqs]

    # Static reservation: every admitted request leases ceil(static_tokens / B) blocks up front.
    static_tokens = cfg.static_tokens if cfg.static_tokens is not None else max((P[i] + OUT[i] for i in range(n)), default=1)
    R = -(-static_tokens // B)
    if not DYN and R > TOT:
        raise PlannerError("static_tokens", static_tokens, f"a static reservation needs {R:,} blocks but the pool has {TOT:,}")

    # Prefix caching: requests drawn with probability prefix_share whose prompt extends past the prefix.
    KP = cfg.prefix_tokens // B if cfg.prefix_share > 0 else 0  # shared full blocks
    if KP >= TOT:
        raise PlannerError("prefix_tokens", cfg.prefix_tokens, f"the prefix alone needs {KP:,} blocks of a {TOT:,}-block pool")
    KPT = KP * B
    use_pre = [False] * n
    if KP:
        prng = random.Random(f"prefix-{cfg.seed}")
        share = cfg.prefix_share
        for i in range(n):
            use_pre[i] = prng.random() < share and P[i] > cfg.prefix_tokens

    # Cancellations.
    cstage = [_C_NONE] * n
    cat = [0] * n  # decode-stage cancel point (tokens generated)
    if cfg.cancel_rate > 0:
        crng = random.Random(f"cancel-{cfg.seed}")
        rate = cfg.cancel_rate
        for i in range(n):
            u = crng.random()
            s = crng.randrange(4)
            if u < rate:
                cstage[i] = s + 1
    if cfg.cancellations:
        pos = {rid[i]: i for i in range(n)}
        for c in cfg.cancellations:
            i = pos.get(c.request_id)
            if i is None:
                raise PlannerError("cancellations", c.request_id, "no request has this id")
            cstage[i] = _STAGE_CODE[c.stage]
            if c.after_tokens is not None:
                cat[i] = c.after_tokens
    for i in range(n):
        if cstage[i] == _C_DECODE and cat[i] == 0:
            cat[i] = max(2, OUT[i] // 2)

    # Requests that can never run are rejected on arrival.
    rejected = [False] * n
    for i in range(n):
        if not CHUNKED and P[i] > MB:
            rejected[i] = True  # a whole prompt must fit one step's token budget
        elif DYN and -(-(P[i] + OUT[i] - 1) // B) > TOT:
            rejected[i] = True  # its final K/V exceeds the whole pool
        elif not DYN and P[i] + OUT[i] > static_tokens:
            rejected[i] = True  # longer than the static reservation

    # Cost model constants (same expression as StepCost.step_time_s).
    WB = cost.weights_bytes
    KVB = cost.kv_bytes_per_token
    BWM = cost.bandwidth_bytes_per_s * cost.mbu
    FPT = cost.flops_per_token
    AF = cost.attn_flops_per_token_ctx
    PKM = cost.peak_flops * cost.mfu
    OH = cost.overhead_s

    alloc = BlockAllocator(TOT)
    free_list = alloc._free  # read-only length checks in the hot loop
    lease = [0] * n
    own = [0] * n  # blocks in the request's own lease
    comp = [0] * n  # tokens whose K/V is cached (materialised value for lazy decoders)
    gen = [0] * n  # output tokens produced
    target = [0] * n  # prefill length of the current admission (prompt + generated)
    state = [_PENDING] * n
    attached = [False] * n
    first_t = [-1.0] * n
    last_t = [0.0] * n
    done_t = [-1.0] * n
    admit_t = [-1.0] * n
    npre = [0] * n
    member = [False] * n
    base_tick = [0] * n
    base_gen = [0] * n
    base_cache = [0] * n
    version = [0] * n

    waiting: deque[int] = deque()
    running: set[int] = set()
    prefilling: list[int] = []  # chunked: admitted, prefill incomplete (sorted by arrival)
    stalled: list[int] = []  # decoders with materialised state (new or skipped)
    L: dict[int, None] = {}  # lazy decoders: advance one token per tick
    pre_alloc: dict[int, list[tuple[int, int]]] = {}  # pre-step tick -> members crossing a block boundary
    post_ev: dict[int, list[tuple[int, int]]] = {}  # post-step tick -> members finishing or cancelling
    itl_v: list[float] = []
    itl_w: list[int] = []
    kv_t: list[float] = []
    kv_u: list[int] = []

    sv = {"S": 0, "tick": 0, "last_tick_t": 0.0, "t": arr[0] if n else 0.0, "terminal": 0, "batch_left": 0, "preempt": 0, "wasted": 0, "pref_ref": 0, "pref_lease": 0, "pref_ready": False, "pref_owner": -1}

    # ---- helpers (not in the per-token path) ----
    def leave_lazy(i: int) -> None:
        d = sv["tick"] - base_tick[i]
        c = base_cache[i] + d
        gen[i] = base_gen[i] + d
        comp[i] = c
        if d:
            last_t[i] = sv["last_tick_t"]
        sv["S"] -= c
        del L[i]
        version[i] += 1

    def release(i: int) -> None:
        alloc.release(lease[i])
        lease[i] = 0
        own[i] = 0
        if attached[i]:
            attached[i] = False
            sv["pref_ref"] -= 1
            if sv["pref_ref"] == 0:
                alloc.release(sv["pref_lease"])
                sv["pref_lease"] = 0
                sv["pref_ready"] = False
                sv["pref_owner"] = -1
        running.discard(i)

    def terminate(i: int, st: int) -> None:
        if lease[i]:
            release(i)
        state[i] = st
        done_t[i] = sv["t"]
        sv["terminal"] += 1
        if member[i]:
            sv["batch_left"] -= 1

    def cancel(i: int) -> None:
        sv["wasted"] += min(comp[i], target[i])  # prefill work thrown away
        terminate(i, _CANCELLED)

    def preempt(v: int) -> None:
        if v in L:
            leave_lazy(v)
        elif state[v] == _DECODE:
            stalled.remove(v)
        elif state[v] == _PREFILL and CHUNKED:
            prefilling.remove(v)
        sv["wasted"] += comp[v]
        release(v)
        comp[v] = 0
        state[v] = _WAITING
        waiting.appendleft(v)
        npre[v] += 1
        sv["preempt"] += 1

    def join(i: int, tick: int) -> None:
        c = comp[i]
        g = gen[i]
        base_tick[i] = tick
        base_gen[i] = g
        base_cache[i] = c
        L[i] = None
        sv["S"] += c
        end = OUT[i]
        if cstage[i] == _C_DECODE and g < cat[i] < end:
            end = cat[i]
        post = tick + (end - g)
        ev = post_ev.get(post)
        if ev is None:
            post_ev[post] = [(i, version[i])]
        else:
            ev.append((i, version[i]))
        if DYN:
            nxt_cross = tick + (B - c % B)  # c % B == 0 is handled this step; the next is B later
            if nxt_cross < post:
                ev = pre_alloc.get(nxt_cross)
                if ev is None:
                    pre_alloc[nxt_cross] = [(i, version[i])]
                else:
                    ev.append((i, version[i]))

    def check(step_new: int, chunks: list[tuple[int, int, int]]) -> None:
        fail = SimulationInvariantError
        held = 0
        attached_n = 0
        for i in running:
            if state[i] not in (_PREFILL, _DECODE):
                raise fail(f"request {i} is running in state {state[i]}")
            if alloc.held(lease[i]) != own[i]:
                raise fail(f"request {i}: lease holds {alloc.held(lease[i])} blocks, bookkeeping says {own[i]}")
            held += own[i]
            katt = KP if attached[i] else 0
            attached_n += attached[i]
            tok = base_cache[i] + sv["tick"] - base_tick[i] if i in L else comp[i]
            want = max(0, -(-tok // B) - katt) if DYN else R - katt
            if own[i] != want:
                raise fail(f"request {i} holds {own[i]} own blocks for {tok} tokens; expected {want}")
            if tok > P[i] + OUT[i] - 1:
                raise fail(f"request {i} caches {tok} tokens, more than prompt + output - 1")
        if sv["pref_ref"] != attached_n:
            raise fail(f"prefix refcount {sv['pref_ref']} but {attached_n} attached requests")
        if sv["pref_ref"]:
            if alloc.held(sv["pref_lease"]) != KP:
                raise fail("prefix lease does not hold the prefix blocks")
            held += KP
        if held != alloc.in_use:
            raise fail(f"leases hold {held} blocks but {alloc.in_use} are in use")
        if len(running) > MS:
            raise fail(f"{len(running)} running sequences > max_num_seqs {MS}")
        if step_new > MB and not (len(chunks) == 1 and step_new == chunks[0][2]):
            raise fail(f"step scheduled {step_new} tokens > max_num_batched_tokens {MB}")
        s = sum(base_cache[i] + sv["tick"] - base_tick[i] for i in L)
        if s != sv["S"]:
            raise fail(f"lazy context sum {sv['S']} != {s}")
        if alloc.opened - alloc.released != len(running) + (1 if sv["pref_ref"] else 0):
            raise fail("open leases do not match running requests")

    # ---- main loop ----
    nxt = 0
    steps = 0
    prefill_tokens = 0
    out_tokens = 0
    prefix_hits = 0
    t = sv["t"]
    while sv["terminal"] < n:
        terminal_before = sv["terminal"]
        while nxt < n and arr[nxt] <= t:
            if rejected[nxt]:
                state[nxt] = _REJECTED
                sv["terminal"] += 1
            else:
                state[nxt] = _WAITING
                waiting.append(nxt)
            nxt += 1
        if SBATCH and sv["batch_left"] == 0 and waiting:
            k = 0
            for j in waiting:
                if k == MS:
                    break
                member[j] = True
                k += 1
            sv["batch_left"] = k
        tick = sv["tick"]

        # 1. KV growth for decoders crossing a block boundary; preempt the newest on exhaustion.
        crossing: set[int] = set()
        if DYN:
            evs = pre_alloc.pop(tick, None)
            if evs:
                for i, v in evs:
                    if version[i] == v and i in L:
                        crossing.add(i)
            for i in stalled:
                if comp[i] % B == 0:
                    crossing.add(i)
            while len(crossing) > len(free_list):
                v = max(running)
                preempt(v)
                crossing.discard(v)

        # 2. Prefill.
        chunks: list[tuple[int, int, int]] = []
        ptoks = 0
        n_dec = len(L) + len(stalled)
        pbudget = MB if FIFO else MB - min(n_dec, MB)
        if CHUNKED and prefilling:
            for i in list(prefilling):
                if pbudget <= 0:
                    break
                if state[i] != _PREFILL:
                    continue  # preempted while making room for an older request
                c = comp[i]
                m = min(CH, target[i] - c, pbudget)
                katt = KP if attached[i] else 0
                if DYN:
                    extra = max(0, -(-(c + m) // B) - katt) - own[i]
                    if extra > len(free_list) - len(crossing):
                        while extra > len(free_list) - len(crossing):
                            v = max(running)
                            if v <= i:
                                break
                            preempt(v)
                            crossing.discard(v)
                        avail = len(free_list) - len(crossing)
                        if extra > avail:
                            m = min(m, (own[i] + katt + avail) * B - c)  # shrink the chunk to the blocks available
                            if m <= 0:
                                continue
                            extra = max(0, -(-(c + m) // B) - katt) - own[i]
                    if extra > 0:
                        alloc.allocate(lease[i], extra)
                        own[i] += extra
                chunks.append((i, c, m))
                ptoks += m
                pbudget -= m
        seq_room = MS - len(running)
        while waiting and seq_room > 0 and pbudget > 0:
            i = waiting[0]
            if SBATCH and not member[i]:
                break
            hit = owner = False
            if use_pre[i]:
                if sv["pref_ref"] > 0:
                    hit = sv["pref_ready"]
                else:
                    owner = True
            katt = KP if (hit or owner) else 0
            start = KPT if hit else 0
            tgt = P[i] + gen[i]
            m = tgt - start
            if CHUNKED:
                if m > CH:
                    m = CH
                if m > pbudget:
                    m = pbudget
            elif m > pbudget and not (m > MB and not chunks and (FIFO or n_dec == 0)):
                break  # head-of-line: the whole prompt must fit (an over-budget recompute runs alone)
            need = (max(0, -(-(start + m) // B) - katt) if DYN else R - katt) + (KP if owner else 0)
            if need > len(free_list) - len(crossing):
                break
            waiting.popleft()
            lid = alloc.open()
            lease[i] = lid
            running.add(i)
            if admit_t[i] < 0:
                admit_t[i] = t
            if owner:
                pl = alloc.open()
                alloc.allocate(pl, KP)
                sv["pref_lease"] = pl
                sv["pref_ref"] = 1
                sv["pref_ready"] = False
                sv["pref_owner"] = i
                attached[i] = True
                need -= KP
            elif hit:
                sv["pref_ref"] += 1
                attached[i] = True
                prefix_hits += 1
            if need:
                alloc.allocate(lid, need)
            own[i] = need
            comp[i] = start
            target[i] = tgt
            state[i] = _PREFILL
            if cstage[i] == _C_ADMIT:
                comp[i] = 0
                cancel(i)
                continue
            seq_room -= 1
            chunks.append((i, start, m))
            ptoks += m
            pbudget -= m
            if CHUNKED:
                insort(prefilling, i)  # arrival order: older requests continue first

        # 3. Decodes.
        room = MB - ptoks if FIFO else MB
        if room < 0:
            room = 0
        while len(L) > room:  # skip the most recently joined; they resume as stalled decoders
            i = next(reversed(L))
            leave_lazy(i)
            stalled.append(i)
        room -= len(L)
        joiners: list[int] = []
        if stalled and room > 0:
            if room >= len(stalled):
                joiners = stalled
                stalled = []
            else:
                joiners = stalled[:room]
                stalled = stalled[room:]
            for i in joiners:
                join(i, tick)
        for i in crossing:
            if i in L:
                alloc.allocate(lease[i], 1)
                own[i] += 1
                if base_tick[i] != tick:  # joiners scheduled their next crossing in join()
                    nc = tick + B
                    ev = pre_alloc.get(nc)
                    if ev is None:
                        pre_alloc[nc] = [(i, version[i])]
                    else:
                        ev.append((i, version[i]))
        nL = len(L)

        if not chunks and not nL:
            if sv["terminal"] != terminal_before:
                continue  # cancellations at admission or a closed batch: try again
            if nxt < n:
                t = sv["t"] = max(t, arr[nxt])
                continue
            if sv["terminal"] < n:
                raise RuntimeError(f"simulation stalled at t={t:.6f}s with {len(waiting)} waiting and {len(running)} running")
            break

        # 4. Step time.
        S = sv["S"]
        kv = S + nL
        pairs = kv
        for _i, c, m in chunks:
            kv += c + m
            pairs += m * c + m * (m + 1) // 2
        new_tok = ptoks + nL
        tm = (WB + KVB * kv) / BWM
        tc = (FPT * new_tok + AF * pairs) / PKM
        t += (tm if tm > tc else tc) + OH
        sv["t"] = t
        steps += 1

        # 5. Apply: prefill progress and first tokens.
        finished_prefill = False
        for i, c, m in chunks:
            e = c + m
            comp[i] = e
            prefill_tokens += m
            if sv["pref_owner"] == i and not sv["pref_ready"] and e >= KPT:
                sv["pref_ready"] = True
            if e < target[i]:
                if cstage[i] == _C_MID and gen[i] == 0:
                    cancel(i)
                    finished_prefill = True
                continue
            finished_prefill = True
            if cstage[i] == _C_MID and gen[i] == 0:
                cancel(i)
                continue
            g = gen[i] + 1
            gen[i] = g
            out_tokens += 1
            if g == 1:
                first_t[i] = t
            else:
                itl_v.append(t - last_t[i])
                itl_w.append(1)
            last_t[i] = t
            if g >= OUT[i]:
                terminate(i, _DONE)
            elif (cstage[i] == _C_FIRST and g == 1) or (cstage[i] == _C_DECODE and g >= cat[i]):
                cancel(i)
            else:
                state[i] = _DECODE
                stalled.append(i)
        if CHUNKED and finished_prefill:
            prefilling = [i for i in prefilling if state[i] == _PREFILL and comp[i] < target[i]]

        # 6. Apply: one token for every lazy decoder.
        if nL:
            n_old = nL - len(joiners)
            if n_old:
                itl_v.append(t - sv["last_tick_t"])
                itl_w.append(n_old)
            for i in joiners:
                itl_v.append(t - last_t[i])
                itl_w.append(1)
            out_tokens += nL
            sv["S"] = S + nL
            tick += 1
            sv["tick"] = tick
            sv["last_tick_t"] = t
            evs = post_ev.pop(tick, None)
            if evs:
                for i, v in evs:
                    if version[i] == v and i in L:
                        leave_lazy(i)
                        if gen[i] >= OUT[i]:
                            terminate(i, _DONE)
                        else:
                            cancel(i)

        kv_t.append(t)
        kv_u.append(TOT - len(free_list))
        if check_invariants:
            check(new_tok, chunks)

    # ---- results ----
    makespan = (sv["t"] - arr[0]) if n else 0.0
    ttft = []
    e2e = []
    tpot = []
    good = 0
    queue_age = 0.0
    ttft_slo = cfg.ttft_slo_ms / 1e3 if cfg.ttft_slo_ms is not None else math.inf
    itl_slo = cfg.itl_slo_ms / 1e3 if cfg.itl_slo_ms is not None else math.inf
    completed = cancelled = rej = 0
    for i in range(n):
        st = state[i]
        if st == _REJECTED:
            rej += 1
            continue
        if admit_t[i] >= 0 and admit_t[i] - arr[i] > queue_age:
            queue_age = admit_t[i] - arr[i]
        if first_t[i] >= 0:
            ttft.append(first_t[i] - arr[i])
        if st == _DONE:
            completed += 1
            e2e.append(done_t[i] - arr[i])
            tp = (done_t[i] - first_t[i]) / (OUT[i] - 1) if OUT[i] > 1 else 0.0
            if OUT[i] > 1:
                tpot.append(tp)
            if first_t[i] - arr[i] <= ttft_slo and tp <= itl_slo:
                good += 1
        else:
            cancelled += 1
    records = None
    if record_requests:
        records = []
        for i in range(n):
            st = state[i]
            done = st == _DONE
            records.append(
                RequestRecord(
                    id=rid[i],
                    arrival_s=arr[i],
                    prompt_tokens=P[i],
                    output_tokens=OUT[i],
                    outcome=_OUTCOME[st],
                    tokens_generated=gen[i],
                    queue_ms=(admit_t[i] - arr[i]) * 1e3 if admit_t[i] >= 0 else None,
                    ttft_ms=(first_t[i] - arr[i]) * 1e3 if first_t[i] >= 0 else None,
                    e2e_ms=(done_t[i] - arr[i]) * 1e3 if done else None,
                    tpot_ms=(done_t[i] - first_t[i]) / (OUT[i] - 1) * 1e3 if done and OUT[i] > 1 else None,
                    preemptions=npre[i],
                )
            )
    peak = max(kv_u, default=0)
    return SimResult(
        policy=cfg.policy,
        batching=cfg.batching,
        reservation=cfg.reservation,
        requests_total=n,
        requests_completed=completed,
        requests_cancelled=cancelled,
        requests_rejected=rej,
        ttft_ms=percentiles(ttft, 1e3),
        itl_ms=weighted_percentiles(itl_v, itl_w, 1e3),
        e2e_ms=percentiles(e2e, 1e3),
        tpot_ms=percentiles(tpot, 1e3),
        output_tokens=out_tokens,
        prefill_tokens=prefill_tokens,
        prefill_tokens_wasted=sv["wasted"],
        throughput_tokens_per_s=out_tokens / makespan if makespan > 0 else 0.0,
        goodput_requests_per_s=good / makespan if makespan > 0 else 0.0,
        goodput_fraction=good / n if n else 0.0,
        max_queue_age_ms=queue_age * 1e3,
        preemptions=sv["preempt"],
        prefix_hits=prefix_hits,
        blocks_in_use_at_end=alloc.in_use,
        peak_blocks_in_use=peak,
        peak_kv_utilisation=peak / TOT,
        kv_utilisation=_downsample(kv_t, kv_u, TOT),
        leases_opened=alloc.opened,
        leases_released=alloc.released,
        blocks_allocated=alloc.allocated,
        blocks_freed=alloc.freed,
        step_count=steps,
        makespan_s=makespan,
        per_request=records,
    )


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------


def compare_policies(requests: list[Request], cfg: SimConfig, cost: StepCost, policies: tuple[str, ...] = POLICIES) -> dict[str, SimResult]:
    """The same trace under each scheduling policy (everything else from ``cfg``)."""
    out = {}
    for p in policies:
        if p not in POLICIES:
            raise PlannerError("policy", p, f"must be one of {', '.join(POLICIES)}")
        out[p] = simulate(requests, cfg.model_copy(update={"policy": p}), cost)
    return out


def compare_reservation(requests: list[Request], cfg: SimConfig, cost: StepCost, static_tokens: int | None = None) -> dict[str, SimResult]:
    """Dynamic (grow block by block) versus static (lease ``static_tokens`` up front; default:
    the longest prompt + output in the trace) on the same trace."""
    st = static_tokens if static_tokens is not None else cfg.static_tokens
    return {
        "dynamic": simulate(requests, cfg.model_copy(update={"reservation": "dynamic"}), cost),
        "static": simulate(requests, cfg.model_copy(update={"reservation": "static", "static_tokens": st}), cost),
    }


def compare_batching(requests: list[Request], cfg: SimConfig, cost: StepCost) -> dict[str, SimResult]:
    """Continuous versus static batching on the same trace."""
    return {b: simulate(requests, cfg.model_copy(update={"batching": b}), cost) for b in ("continuous", "static")}


# --------------------------------------------------------------------------------------------
# From a plan
# --------------------------------------------------------------------------------------------


def from_plan(plan) -> tuple[StepCost, int]:
    """(step cost, KV pool blocks per replica) for a :class:`planner.plan.Plan`.

    The step cost uses the plan's roofline inputs (weights per GPU, MFU/MBU, device peak and
    bandwidth); K/V bytes per token are the plan's bytes at its reserved length divided by that
    length (so sliding layers count their capped share), and the pool is the plan's memory for
    K/V split into blocks of the plan's block size.
    """
    res, cap, roof = plan.reservation, plan.capacity, plan.roofline
    per_token = max(1, res.used_kv_bytes // max(1, res.tokens))
    cost = StepCost(
        weights_bytes=cap["model_resident_bytes"],
        kv_bytes_per_token=per_token,
        bandwidth_bytes_per_s=plan.device.bandwidth_bytes_s,
        mbu=plan.inputs.mbu,
        flops_per_token=2.0 * plan.weights.active_params / plan.inputs.tp,
        attn_flops_per_token_ctx=4.0 * roof["q_heads_per_gpu"] * plan.inspect.head_dim * roof["attention_layers"],
        peak_flops=roof["peak_tflops"] * 1e12,
        mfu=plan.inputs.mfu,
    )
    block = plan.inputs.block_tokens
    blocks = max(1, cap["available_for_kv_bytes"] // (per_token * block))
    return cost, blocks
