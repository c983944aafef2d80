"""Serving simulator: continuous batching over a paged KV pool, on a manual clock.

A deterministic discrete-event simulation of one or more engine replicas behind a router.
Requests arrive (Poisson or a trace), wait, are admitted when the step's token budget and the KV
blocks they need fit, prefill, decode one token per step and finish or are cancelled. A step's
duration comes from a roofline :class:`StepCost`, or from a plan's own step model
(:class:`PlanStepCost`, what :func:`from_plan` gives); nothing reads the wall clock except the time
budget.

Read it in this order, each part a short module:

* ``model.py``       inputs (:class:`SimConfig`, :class:`Request`, :class:`Cancellation`) and the
                     result (:class:`SimResult` with its :class:`OverloadVerdict`);
* ``request.py``     one request's state machine: waiting -> prefill -> decode -> done/cancelled,
                     preemption back to waiting;
* ``block_pool.py``  the KV pool: the free list, block leases and their reference counts (each
                     freed once, with its last holder), and the shared prefix's record;
* ``kv_manager.py``  how many blocks each request needs and whether they fit
                     (``allocate_slots`` returns the blocks taken or None), ``free``, the shared
                     prefix looked up and shared: the only caller of the pool;
* ``policies.py``    one class per scheduling policy: ``fifo`` (prefill first), ``decode-priority``,
                     ``chunked`` (decodes first, prompts in chunks of ``chunk_tokens``: vLLM),
                     ``prefill-first`` (a step of prefill chunks alone while any prompt waits: SGLang);
* ``decode_batch.py`` the decoders: advanced lazily, so a step costs O(events), not O(sequences),
                     and the stalled ones outside the batch;
* ``replica.py``     the scheduler of one engine: KV growth (preempt the newest on exhaustion),
                     prefill, decodes, clock, apply; ``invariants.py`` what must hold after every
                     step and at the end (checked with ``check_invariants=True``, in the tests);
* ``router.py``      round robin or least outstanding tokens over replicas;
* ``engine.py``      the event loop, the budgets and the result; ``verdict.py`` the overload verdict;
* ``stats.py``       the counters of each replica (:class:`ReplicaStats`), the requests' outcomes
                     and percentiles; ``cost.py`` the step costs and their clocks (:class:`StepClock`,
                     :class:`RoofClock` over the plan's Roofline) and :func:`from_plan`;
* ``workload.py``    Poisson arrivals (fixed, uniform or a named length profile) and CSV traces; ``compare.py`` the same trace under other settings.

The first output token is produced at the end of the step that completes the prefill
(TTFT = that time - arrival); ITL samples are the gaps between consecutive tokens of a request.

Budget: at most 100,000 requests and 2e9 prompt + output tokens per simulation (more is refused
with a :class:`PlannerError`); a run stops cleanly after 2,000,000 engine steps or
``SimConfig.time_budget_s`` seconds of wall time (default 30) and says so in
``SimResult.stopped_early``; trace files above 8 MiB are refused before parsing.
"""

from planner.simulate.block_pool import AllocatorError, BlockAllocator, DoubleFreeError, OutOfBlocksError, PrefixCache
from planner.simulate.compare import compare_batching, compare_policies, compare_reservation
from planner.simulate.cost import PlanStepCost, StepCost, benchmark_ttft_ms, closed_loop_lag_s, from_plan, plan_config, simulate_benchmark
from planner.simulate.engine import simulate
from planner.simulate.invariants import SimulationInvariantError
from planner.simulate.model import (
    CANCEL_STAGES,
    DEFAULT_TIME_BUDGET_S,
    KV_SAMPLES,
    MAX_REQUESTS,
    MAX_STEPS,
    MAX_TOKENS_PER_REQUEST,
    MAX_TOTAL_TOKENS,
    POLICIES,
    REJECTION_REASONS,
    ROUTERS,
    Cancellation,
    CancelStage,
    OverloadVerdict,
    Percentiles,
    Policy,
    Rejection,
    ReplicaSummary,
    Request,
    RequestRecord,
    Router,
    SimConfig,
    SimResult,
    build,
)
from planner.simulate.stats import percentiles, weighted_percentiles
from planner.simulate.verdict import verdict_label
from planner.simulate.workload import LENGTH_PROFILES, MAX_TRACE_BYTES, TRACE_COLUMNS, LengthProfile, parse_trace_csv, plan_requests, poisson_requests, profile_requests, read_trace

__all__ = [
    "AllocatorError", "BlockAllocator", "CANCEL_STAGES", "Cancellation", "CancelStage", "DEFAULT_TIME_BUDGET_S", "DoubleFreeError",
    "KV_SAMPLES", "LENGTH_PROFILES", "LengthProfile", "MAX_REQUESTS", "MAX_STEPS", "MAX_TOKENS_PER_REQUEST", "MAX_TOTAL_TOKENS", "MAX_TRACE_BYTES", "OutOfBlocksError",
    "OverloadVerdict", "POLICIES", "Percentiles", "Policy", "PrefixCache", "REJECTION_REASONS", "ROUTERS", "Rejection", "ReplicaSummary", "Request", "RequestRecord",
    "PlanStepCost", "Router", "SimConfig", "SimResult", "SimulationInvariantError", "StepCost", "TRACE_COLUMNS", "benchmark_ttft_ms", "build", "closed_loop_lag_s", "compare_batching",
    "compare_policies", "compare_reservation", "from_plan", "plan_config", "parse_trace_csv", "percentiles", "plan_requests", "poisson_requests", "profile_requests", "read_trace",
    "simulate", "simulate_benchmark", "verdict_label", "weighted_percentiles",
]  # fmt: skip
