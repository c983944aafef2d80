"""How long one engine step takes: a roofline over the bytes read and the FLOPs done (:class:`StepCost`),
or a plan's own step model (:class:`PlanStepCost`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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


    def clock(self) -> StepClock:
        """The replica's per-step clock of this cost."""
        return StepClock(self)


class PlanStepCost:
    """The plan's own step model (:class:`planner.latency.Roofline`, its fitted kernels and serving
    costs: MoE experts touched, fixed costs a layer, all-reduce, the engine's host work) as the
    simulator's step cost, so a simulation of a plan times its steps as the plan does.
    ``kv_bytes_per_token``: the plan's K/V bytes a cached token; ``weights_bytes``: the weights a GPU
    holds (reported, not timed: the step model reads what a step touches)."""

    __slots__ = ("roof", "kv_bytes_per_token", "weights_bytes", "span_per_token")

    def __init__(self, roof, kv_bytes_per_token: float, weights_bytes: float, mid: int) -> None:
        self.roof = roof
        self.kv_bytes_per_token = kv_bytes_per_token
        self.weights_bytes = weights_bytes
        m = max(1, mid)
        self.span_per_token = roof.decode_span(m) / m  # key positions a decode token attends to per cached token, over the layers (windows capped at the plan's mean context)

    def clock(self) -> RoofClock:
        return RoofClock(self)


class StepClock:
    """:meth:`StepCost.step_time_s` with its constants folded (seconds per byte read and per
    FLOP), for the replica's step loop: one call a step, plain attributes."""

    __slots__ = ("weights_s", "kv_token_s", "new_token_s", "pair_s", "overhead_s")

    def __init__(self, cost: StepCost) -> None:
        mem = 1.0 / (cost.bandwidth_bytes_per_s * cost.mbu)
        cmp = 1.0 / (cost.peak_flops * cost.mfu)
        self.weights_s = cost.weights_bytes * mem
        self.kv_token_s = cost.kv_bytes_per_token * mem
        self.new_token_s = cost.flops_per_token * cmp
        self.pair_s = cost.attn_flops_per_token_ctx * cmp
        self.overhead_s = cost.overhead_s

    def step_s(self, chunks: list[tuple[object, int, int]], new_tokens: int, decode_read: int) -> float:
        """Seconds of a step computing ``new_tokens`` tokens: prefill ``chunks`` of ``(request,
        start, tokens)`` read their K/V up to ``start + tokens`` and attend over every (new,
        context) pair; decoders read ``decode_read`` cached tokens (one pair each)."""
        kv_read = decode_read
        pairs = kv_read
        for _r, c, m in chunks:
            kv_read += c + m
            pairs += m * c + m * (m + 1) // 2
        t_mem = self.weights_s + self.kv_token_s * kv_read
        t_cmp = self.new_token_s * new_tokens + self.pair_s * pairs
        return (t_mem if t_mem > t_cmp else t_cmp) + self.overhead_s


class RoofClock:
    """:class:`PlanStepCost`'s per-step clock: one step as :meth:`Roofline.step_s` times it, over the
    step's tokens (its prefill chunks and one a decoder), its logits (a decoder's each, and a chunk's),
    the K/V it reads and its attention FLOPs (a chunk's over its context, a decoder's over its own)."""

    __slots__ = ("roof", "kv_token", "decode_pair")

    def __init__(self, cost: PlanStepCost) -> None:
        roof = cost.roof
        self.roof = roof
        self.kv_token = cost.kv_bytes_per_token
        self.decode_pair = 4.0 * cost.span_per_token * roof.q_heads * roof.head_dim

    def step_s(self, chunks: list[tuple[object, int, int]], new_tokens: int, decode_read: int) -> float:
        """Seconds of a step of ``new_tokens`` tokens: prefill ``chunks`` of ``(request, start,
        tokens)`` and, for the rest, one token a decoder over ``decode_read`` cached tokens in all."""
        roof = self.roof
        kv_read = decode_read
        attn = self.decode_pair * decode_read
        prefill = prompt = 0
        for _r, c, m in chunks:
            kv_read += c + m
            attn += roof.unmemoised_attention_flops(m, c)
            prefill += m
            prompt = max(prompt, c + m)
        decoders = new_tokens - prefill
        return roof.unmemoised_step_s(new_tokens, decoders + len(chunks), kv_read * self.kv_token, attn, prompt)


def from_plan(plan) -> tuple[PlanStepCost, int]:
    """(step cost, KV pool blocks per replica) for a :class:`planner.plan.Plan`.

    The step cost is the plan's own step model (:class:`PlanStepCost` over the Roofline its load
    figures use: the same kernels, fixed costs and engine host work); K/V bytes per token are the
    plan's bytes at its reserved length divided by that length (so sliding layers count their
    capped share), and the pool is the plan's memory for K/V split into blocks of the plan's block
    size.
    """
    res, cap = plan.reservation, plan.capacity
    per_token = max(1, res.used_kv_bytes // max(1, res.tokens))
    setup = plan._load.setup
    cost = PlanStepCost(setup.roof, per_token, cap.model_resident_bytes, setup.mid)
    block = plan.inputs.block_tokens
    blocks = max(1, cap.available_for_kv_bytes // (per_token * block))
    return cost, blocks


def benchmark_ttft_ms(plan, result) -> float:
    """A simulated closed loop's mean TTFT as its benchmark prints it: the simulator has no API
    server, so the plan's preprocessing is added (what the CLI, the Simulate page and
    benchmarks/bench_closed_loop.py set beside the plan's roofline.benchmark_ttft_ms)."""
    return result.ttft_ms.mean + plan.latency.preprocessing_ms


def simulate_benchmark(plan, clients: int, prompts: int, policy: str, token_budget: int, *, lag: bool = True, record_requests: bool = False):
    """The closed-loop benchmark of a plan, simulated: ``clients`` clients started at once send
    ``prompts`` prompts in all at the plan's prompt and output lengths, on one replica of the plan's
    pool and step cost (:func:`from_plan`), under ``policy`` with ``token_budget`` tokens a step (the
    chunk size too); ``lag``: each next prompt reaches the scheduler :func:`closed_loop_lag_s` after
    the last ended, else at once. Returns the :class:`SimResult` (:func:`benchmark_ttft_ms` reads its
    mean TTFT as the benchmark prints it)."""
    from planner.simulate.engine import simulate
    from planner.simulate.model import Request

    cost, blocks = from_plan(plan)
    cfg = plan_config(plan, blocks, max_num_batched_tokens=token_budget, policy=policy, chunk_tokens=token_budget, time_budget_s=60)
    isl, osl = plan.context.input_tokens, plan.inputs.output_tokens
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=isl, output_tokens=osl) for i in range(prompts)]
    return simulate(reqs, cfg, cost, clients=clients, record_requests=record_requests, lag_s=closed_loop_lag_s(plan) if lag else 0.0)


def closed_loop_lag_s(plan) -> float:
    """How long after a request ends the next prompt of its client reaches the scheduler in a closed
    loop: the plan's API-server preprocessing (:func:`benchmark_ttft_ms` counts it in every TTFT, so
    the prompt cannot be scheduled before it is done). Prompts that end within it of each other
    reach the scheduler together (``simulate(..., lag_s=...)``)."""
    return plan.latency.preprocessing_ms / 1e3


def plan_config(plan, total_blocks: int, **settings: object):
    """The :class:`SimConfig` of a plan's replica: its block size, ``total_blocks`` of pool, its
    ``max_num_seqs`` (256 when the plan sets none) and its TTFT/ITL SLOs; ``settings`` add the
    scheduler and traffic choices (policy, budgets, seed, replicas, time budget).

    Raises:
        PlannerError: a setting the simulator refuses, naming the field.
    """
    from planner.simulate.model import SimConfig, build

    inputs = plan.inputs
    return build(SimConfig, block_tokens=inputs.block_tokens, total_blocks=total_blocks, max_num_seqs=inputs.max_num_seqs or 256,
                 ttft_slo_ms=inputs.ttft_slo_ms, itl_slo_ms=inputs.itl_slo_ms, **settings)
