"""Serving simulator: continuous batching over a paged KV pool, on a manual clock.

A deterministic discrete-event simulation of one or more engine replicas behind a router.
Requests arrive (Poisson or a trace), wait, are admitted when the step's token budget and the KV
blocks they need fit, prefill, decode one token per step and finish or are cancelled. A step's
duration comes from a roofline :class:`StepCost`; nothing reads the wall clock except the time
budget.

Read it in this order, each part a short module:

* ``model.py``       inputs (:class:`SimConfig`, :class:`Request`, :class:`Cancellation`) and the
                     result (:class:`SimResult` with its :class:`OverloadVerdict`);
* ``request.py``     one request's state machine: waiting -> prefill -> decode -> done/cancelled,
                     preemption back to waiting;
* ``block_pool.py``  the KV pool (block leases, each released exactly once) and the shared prefix;
* ``policies.py``    one class per scheduling policy: ``fifo`` (prefill first), ``decode-priority``,
                     ``chunked`` (decodes first, prompts in chunks of ``chunk_tokens``);
* ``decode_batch.py`` decoders advanced lazily, so a step costs O(events), not O(sequences);
* ``replica.py``     one engine step: KV growth (preempt the newest on exhaustion), prefill,
                     decodes, clock, apply; ``invariants.py`` what must hold after every step
                     (checked with ``check_invariants=True``, in the tests);
* ``router.py``      round robin or least outstanding tokens over replicas;
* ``engine.py``      the event loop, the budgets and the result; ``verdict.py`` the overload verdict;
* ``workload.py``    Poisson arrivals and CSV traces; ``stats.py`` percentiles; ``cost.py`` the
                     step cost and :func:`from_plan`; ``compare.py`` the same trace under other settings.

The first output token is produced at the end of the step that completes the prefill
(TTFT = that time - arrival); ITL samples are the gaps between consecutive tokens of a request.

Budget: at most 100,000 requests and 2e9 prompt + output tokens per simulation (more is refused
with a :class:`PlannerError`); a run stops cleanly after 2,000,000 engine steps or
``SimConfig.time_budget_s`` seconds of wall time (default 30) and says so in
``SimResult.stopped_early``; trace files above 8 MiB are refused before parsing.
"""

from planner.simulate.block_pool import AllocatorError, BlockAllocator, DoubleFreeError, OutOfBlocksError, PrefixCache
from planner.simulate.compare import compare_batching, compare_policies, compare_reservation
from planner.simulate.cost import StepCost, from_plan, plan_config
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
    ROUTERS,
    Cancellation,
    CancelStage,
    OverloadVerdict,
    Percentiles,
    Policy,
    ReplicaSummary,
    Request,
    RequestRecord,
    Router,
    SimConfig,
    SimResult,
    build,
)
from planner.simulate.stats import percentiles, weighted_percentiles
from planner.simulate.workload import MAX_TRACE_BYTES, TRACE_COLUMNS, parse_trace_csv, poisson_requests, read_trace

__all__ = [
    "AllocatorError", "BlockAllocator", "CANCEL_STAGES", "Cancellation", "CancelStage", "DEFAULT_TIME_BUDGET_S", "DoubleFreeError",
    "KV_SAMPLES", "MAX_REQUESTS", "MAX_STEPS", "MAX_TOKENS_PER_REQUEST", "MAX_TOTAL_TOKENS", "MAX_TRACE_BYTES", "OutOfBlocksError",
    "OverloadVerdict", "POLICIES", "Percentiles", "Policy", "PrefixCache", "ROUTERS", "ReplicaSummary", "Request", "RequestRecord",
    "Router", "SimConfig", "SimResult", "SimulationInvariantError", "StepCost", "TRACE_COLUMNS", "build", "compare_batching",
    "compare_policies", "compare_reservation", "from_plan", "plan_config", "parse_trace_csv", "percentiles", "poisson_requests", "read_trace",
    "simulate", "weighted_percentiles",
]  # fmt: skip
