"""Parallelism as deployed: attention data parallelism with expert parallelism, and pipeline stages.

Tensor parallelism is the step model's own (:class:`planner.latency.Roofline` splits weights and
work over ``tp`` GPUs). Two other layouts are served in production and change both memory and
latency, so they are model functions here (the plan, the sizing search and the app call them):

* **Attention data parallelism + expert parallelism** (SGLang ``--enable-dp-attention``, vLLM
  ``--data-parallel-size`` with ``--enable-expert-parallel``, TensorRT-LLM's "DEP"): each of ``dp``
  ranks runs attention for its own sequences with the attention and dense weights whole (tp 1
  inside the rank), the routed experts are spread over the ``dp`` ranks, and every MoE layer sends
  each token's k copies to the ranks holding their experts and back (an all-to-all dispatch and
  combine). Each rank holds only its own sequences' K/V (MLA latents are not replicated, as tensor
  parallelism replicates them), so the sequences a deployment holds grow with ``dp``.
* **Pipeline parallelism** (``pp`` stages of consecutive layers, usually one per node): each stage
  holds its layers' weights and its layers' K/V of every sequence; a token crosses every stage in
  turn, handing its hidden state to the next over the link between them.
"""

from __future__ import annotations

import dataclasses
import math

from planner.errors import PlannerError
from planner.kv import InspectReport
from planner.latency import Roofline
from planner.results import Result
from planner.units import GIB


def expert_data_parallel(roof_all: Roofline, dp: int, link_gb_s: float | None = None, link_latency_us: float | None = None) -> Roofline:
    """The per-rank step model of attention data parallelism over ``dp`` ranks of ``tp`` GPUs each
    with expert parallelism over all ``ep = dp x tp`` GPUs, from the tensor-parallel model of the
    same GPUs (``roof_all.tp == dp x tp``, what a plan at tensor parallelism dp x tp builds).

    Everything tensor parallelism split over the dp x tp GPUs except the routed experts is split
    over a rank's tp GPUs only: dense and attention weights and their FLOPs, the query heads, the
    LM head (dp times the TP share). The experts stay split over all of them; each MoE layer serves
    the tokens of all dp ranks (``Roofline.dp``); between ranks the only communication is the
    dispatch and combine all-to-all over ``link_gb_s`` / ``link_latency_us`` (default: the TP
    model's link).

    Raises:
        PlannerError: ``dp`` below 1 or not dividing the TP model's GPUs, or a model without routed experts.
    """
    if dp < 1:
        raise PlannerError("dp", dp, "must be at least 1")
    if not (roof_all.num_experts and roof_all.expert_bytes):
        raise PlannerError("dp", dp, "attention data parallelism with expert parallelism needs a mixture-of-experts model (a dense model replicates instead: use more replicas)")
    if roof_all.tp % dp:
        raise PlannerError("dp", dp, f"build the rank's model from the tensor-parallel model over all dp x tp GPUs (its tp {roof_all.tp} is no multiple of dp)")
    dense_bytes = roof_all.weights_bytes - roof_all.expert_bytes
    dense_params = roof_all.active_params - roof_all.expert_active_params
    changes = dict(
        weights_bytes=dense_bytes * dp + roof_all.expert_bytes,
        active_params=dense_params * dp + roof_all.expert_active_params,
        q_heads=roof_all.q_heads * dp,
        lm_head_params=roof_all.lm_head_params * dp,
        lm_head_bytes=roof_all.lm_head_bytes * dp,
        unread_bytes=roof_all.unread_bytes * dp,
        tp=roof_all.tp // dp,
        ep=roof_all.tp,
        dp=dp,
    )
    if link_gb_s is not None:
        changes["link_bytes_s"] = link_gb_s * 1e9
    if link_latency_us is not None:
        changes["link_latency_s"] = link_latency_us * 1e-6
    return dataclasses.replace(roof_all, **changes)


def rank_kv_bytes(specs: tuple, tokens: int, num_kv_heads: int) -> float:
    """K/V bytes one sequence of ``tokens`` tokens holds on the attention data-parallel rank that
    runs it, from a tensor-parallel plan's specs: tensor parallelism splits K/V heads over its GPUs
    (``kv_heads_per_gpu``), a DP rank (tp 1) holds all ``num_kv_heads`` of its own sequences; MLA
    latents and other per-sequence caches are whole on every GPU either way."""
    total = 0.0
    for sp in specs:
        whole = sp.latent or sp.cache != "kv" or not sp.kv_heads_per_gpu
        total += sp.bytes_at(tokens) * (1.0 if whole else max(1.0, num_kv_heads / sp.kv_heads_per_gpu))
    return total


@dataclasses.dataclass(frozen=True, slots=True)
class RankMemory(Result):
    """What one rank of an attention data-parallel deployment holds (bytes) and the sequences
    the deployment admits by memory."""

    dp: int
    weights_bytes: float  # dense and attention weights whole, 1/dp of the routed experts
    available_bytes: float  # for K/V after weights and workspace
    kv_bytes_per_sequence: float  # one sequence's K/V on the rank that runs it (rank_kv_bytes: all K/V heads, the whole MLA latent)
    sequences_per_rank: int
    sequences: int  # all ranks together


def dp_memory(usable_bytes: float, rank_weights_bytes: float, workspace_bytes: float, kv_bytes_per_sequence: float, dp: int) -> RankMemory:
    """Sequences ``dp`` ranks admit when each holds its own sequences' K/V:
    dp x floor((usable - rank weights - workspace) / K/V per sequence).

    Raises:
        PlannerError: the rank's weights and workspace exceed its usable memory.
    """
    available = usable_bytes - rank_weights_bytes - workspace_bytes
    if available <= 0:
        raise PlannerError("dp", dp, f"each rank holds the whole dense and attention weights: {rank_weights_bytes / GIB:,.1f} GiB + workspace exceed its usable {usable_bytes / GIB:,.1f} GiB")
    per_rank = int(available // max(1.0, kv_bytes_per_sequence))
    return RankMemory(dp=dp, weights_bytes=rank_weights_bytes, available_bytes=available, kv_bytes_per_sequence=kv_bytes_per_sequence, sequences_per_rank=per_rank, sequences=per_rank * dp)


@dataclasses.dataclass(frozen=True, slots=True)
class Pipeline(Result):
    """A decode step through ``pp`` pipeline stages (seconds) and what each stage holds (bytes)."""

    pp: int
    stage_step_s: float  # one stage's step for its micro-batch
    handoff_s: float  # one hand-off of the micro-batch's hidden states to the next stage
    tpot_s: float  # a token's trip through every stage
    micro_batches: int  # in flight at once (one per stage keeps every stage busy)
    tokens_per_s: float  # all micro-batches together
    weights_bytes_per_stage: float
    kv_bytes_per_sequence_per_stage: float


def pipeline(stage: Roofline, sequences: int, kv_bytes_per_sequence: float, context: int, weights_bytes: float) -> Pipeline:
    """Decode through the stages of ``stage`` (:func:`pipeline_stage`: one stage's step model,
    its layers' weights and work, with the link between stages): ``sequences`` running sequences
    in ``stage.pp`` micro-batches (vLLM's and SGLang's pipeline schedule keeps one micro-batch in
    each stage).

    A token's time per output token is pp stage steps of its micro-batch plus pp - 1 hand-offs
    of hidden x act bytes per sequence over the link between stages (latency + bytes / bandwidth),
    what ``stage.decode_step_s`` charges; the stages work on different micro-batches at once, so
    the throughput is pp micro-batches per token time. Each stage holds weights / pp and its
    layers' share of every sequence's K/V (``kv_bytes_per_sequence`` / pp for a uniform stack)."""
    pp = stage.pp
    micro = max(1, math.ceil(sequences / pp))
    one = dataclasses.replace(stage, pp=1)
    step = one.decode_step_s(micro, kv_bytes_per_sequence / pp, context)
    handoff = stage.pp_link_latency_s + micro * stage.hidden * stage.act_bytes / max(1.0, stage.pp_link_bytes_s) if pp > 1 else 0.0
    tpot = stage.decode_step_s(sequences, kv_bytes_per_sequence / pp, context)
    return Pipeline(
        pp=pp,
        stage_step_s=step,
        handoff_s=handoff,
        tpot_s=tpot,
        micro_batches=min(pp, max(1, sequences)),
        tokens_per_s=sequences / tpot if tpot else 0.0,
        weights_bytes_per_stage=weights_bytes / pp,
        kv_bytes_per_sequence_per_stage=kv_bytes_per_sequence / pp,
    )


def pipeline_stage(roof: Roofline, pp: int, link_gb_s: float = 0.0, link_latency_us: float = 0.0) -> Roofline:
    """One stage's step model from the whole model's (same tp): layers, weights and work / pp,
    and the link between consecutive stages (``link_gb_s`` per direction, ``link_latency_us`` a
    message) its steps hand their hidden states over.

    Raises:
        PlannerError: ``pp`` below 1 or above the layer count.
    """
    if pp < 1 or (roof.layers and pp > roof.layers):
        raise PlannerError("pp", pp, f"must be between 1 and the {roof.layers} layers")
    if pp == 1:
        return roof
    f = 1.0 / pp
    return dataclasses.replace(
        roof,
        weights_bytes=roof.weights_bytes * f,
        active_params=roof.active_params * f,
        expert_bytes=roof.expert_bytes * f,
        expert_active_params=roof.expert_active_params * f,
        lm_head_params=roof.lm_head_params * f,
        lm_head_bytes=roof.lm_head_bytes * f,
        unread_bytes=roof.unread_bytes * f,
        attn_layers=max(1, round(roof.attn_layers * f)),
        layers=max(1, round(roof.layers * f)),
        moe_layers=round(roof.moe_layers * f),
        mla_layers=round(roof.mla_layers * f),
        windows=roof.windows[: round(len(roof.windows) * f)],
        pp=pp,
        pp_link_bytes_s=link_gb_s * 1e9,
        pp_link_latency_s=link_latency_us * 1e-6,
    )


def stage_report(report: InspectReport, pp: int) -> InspectReport:
    """The K/V layout of the busiest of ``pp`` pipeline stages: each layer group keeps
    ceil(layers / pp) of its layers (stages split the stack evenly, vLLM's get_pp_indices; the
    first stages take the remainder), the recurrent state likewise; ``report`` itself at pp 1."""
    if pp <= 1:
        return report
    specs = tuple(s.model_copy(update={"num_layers": -(-s.num_layers // pp)}) for s in report.specs)
    share = sum(s.num_layers for s in specs) / max(1, sum(s.num_layers for s in report.specs))
    return report.model_copy(
        update={
            "specs": specs,
            "kv_bytes_per_token": sum(s.bytes_per_token for s in specs if s.grows_per_token),
            "kv_bytes_at_tokens": sum(s.bytes_at(report.tokens) for s in specs),
            "state_bytes_per_sequence": -(-report.state_bytes_per_sequence // pp),
            "cross_bytes_per_encoder_token": sum(s.bytes_per_token for s in specs if s.kind == "cross"),
            "mha_equivalent_bytes_per_token": int(report.mha_equivalent_bytes_per_token * share),
            "notes": (*report.notes, f"pipeline parallel {pp}: K/V of the busiest stage's layers (ceil(layers / {pp}) of each kind) per GPU"),
        }
    )
