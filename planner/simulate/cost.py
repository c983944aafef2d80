"""How long one engine step takes: a roofline over the bytes read and the FLOPs done."""

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
        weights_bytes=cap.model_resident_bytes,
        kv_bytes_per_token=per_token,
        bandwidth_bytes_per_s=plan.device.bandwidth_bytes_s,
        mbu=plan.inputs.mbu,
        flops_per_token=2.0 * plan.weights.active_params / plan.inputs.tp,
        attn_flops_per_token_ctx=4.0 * roof.q_heads_per_gpu * plan.inspect.head_dim * roof.attention_layers,
        peak_flops=roof.peak_tflops * 1e12,
        mfu=plan.inputs.mfu,
    )
    block = plan.inputs.block_tokens
    blocks = max(1, cap.available_for_kv_bytes // (per_token * block))
    return cost, blocks


def benchmark_ttft_ms(plan, result) -> float:
    """A simulated closed loop's mean TTFT as its benchmark prints it: the simulator has no API
    server, so the plan's preprocessing is added (what the CLI, the Simulate page and
    benchmarks/bench_closed_loop.py set beside the plan's roofline.benchmark_ttft_ms)."""
    return result.ttft_ms.mean + plan.latency.preprocessing_ms


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
