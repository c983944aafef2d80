"""What goes into a simulation (requests, engine settings) and what comes out (the result)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import PlannerError

Policy = Literal["fifo", "decode-priority", "chunked", "prefill-first"]
Router = Literal["round-robin", "least-outstanding-tokens"]
CancelStage = Literal["admission", "mid-prefill", "first-token", "decode"]
POLICIES: tuple[str, ...] = ("fifo", "decode-priority", "chunked", "prefill-first")
ROUTERS: tuple[str, ...] = ("round-robin", "least-outstanding-tokens")
CANCEL_STAGES: tuple[str, ...] = ("admission", "mid-prefill", "first-token", "decode")

# Budget (documented in the package docstring): work above these is refused or stopped.
MAX_REQUESTS = 100_000  # per simulation; more is refused with a PlannerError
MAX_TOKENS_PER_REQUEST = 10_000_000
MAX_TOTAL_TOKENS = 2_000_000_000  # prompt + output tokens over the whole trace; more is refused
MAX_STEPS = 2_000_000  # engine steps over all replicas; the run stops there and says so
DEFAULT_TIME_BUDGET_S = 30.0  # wall-clock seconds; the run stops there and says so
KV_SAMPLES = 500


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
    """Engine and scheduler settings for one simulation (per replica unless said otherwise)."""

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
    replicas: int = Field(default=1, ge=1, le=1024)  # identical engine replicas behind one router
    router: Router = "round-robin"
    time_budget_s: float = Field(default=DEFAULT_TIME_BUDGET_S, gt=0, le=3600)


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
    outcome: Literal["done", "cancelled", "rejected", "unfinished"]
    tokens_generated: int
    queue_ms: float | None  # arrival -> first admission
    ttft_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None  # mean gap between output tokens
    preemptions: int
    replica: int = 0


REJECTION_REASONS = {
    "step_budget": "prompt longer than the step's token budget",
    "pool": "prompt + output larger than the whole KV pool",
    "static_reservation": "prompt + output longer than the static reservation",
}


class Rejection(BaseModel):
    """Requests rejected at arrival for one reason: they can never run under these settings."""

    model_config = ConfigDict(frozen=True)

    reason: Literal["step_budget", "pool", "static_reservation"]
    count: int
    limit_tokens: int  # the step budget, the pool's tokens or the static reservation
    largest_tokens: int  # the largest rejected request, measured as the limit is
    message: str


class OverloadVerdict(BaseModel):
    """Does the deployment keep up with the arrivals?

    Measured over the second half of the arrivals (from the middle arrival to the last): the
    arrival rate, the rate at which requests finished, and the waiting queue at both ends.
    ``overloaded`` when requests finished below 95 % of the arrival rate *and* the queue grew by
    more than 10 % of the requests that arrived in that window (at least 5). ``thrashing`` when
    more than a quarter of all prefill work was thrown away by preemption.
    """

    model_config = ConfigDict(frozen=True)

    overloaded: bool
    thrashing: bool
    arrival_rate_per_s: float | None  # None for a single burst (all arrivals at one instant)
    served_rate_per_s: float | None
    sustainable_rate_per_s: float | None  # the served rate while saturated; None when keeping up
    queue_at_mid: int
    queue_at_end: int
    message: str
    rejected: int = 0  # requests rejected at arrival (they can never run): not in the rates above


class ReplicaSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    replica: int
    requests: int
    completed: int
    preemptions: int
    peak_kv_utilisation: float
    step_count: int


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
    peak_blocks_in_use: int  # the busiest replica's peak
    peak_kv_utilisation: float
    kv_utilisation: list[tuple[float, float]]  # (t_s, fraction of blocks in use), <= 500 points, busiest replica
    leases_opened: int
    leases_released: int
    blocks_allocated: int
    blocks_freed: int
    step_count: int
    makespan_s: float
    overload: OverloadVerdict
    replicas: int = 1
    router: str = "round-robin"
    per_replica: list[ReplicaSummary] = []
    requests_unfinished: int = 0  # still in flight when the run stopped early
    stopped_early: str | None = None  # why the run stopped before every request ended
    per_request: list[RequestRecord] | None = None
    rejections: list[Rejection] = []  # why the rejected requests were rejected, largest group first
