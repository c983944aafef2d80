"""Latency by phase: from observations (the seed's LatencyObservation) or from a roofline model.

Roofline model (per GPU, tensor parallel splits weights and work evenly):

* prefill time = max(FLOPs / (peak x MFU), weight bytes / (bandwidth x MBU)), with
  FLOPs = 2 x active parameters x new tokens + causal attention 4 x (query-key pairs) x heads x
  head_dim, with P^2 / 2 pairs per full layer and sum(min(t, W)) per sliding or chunked layer;
* one decode step for ``c`` sequences holding ``n`` tokens each =
  max((weights read + c x K/V(n)) / (bandwidth x MBU), c x FLOPs per token / (peak x MFU)), where a
  mixture-of-experts model reads its dense weights and the expected share of experts its ``c``
  tokens route to, 1 - (1 - k/E)^c of them.

The default efficiency factors (MFU 0.8, MBU 0.736, fitted) are stated in every plan and adjustable.

On top of the kernels (fitted to AIConfigurator's measured kernels, :data:`KERNELS`), a served
step pays what a real engine adds (:data:`FITTED`, fitted to published end-to-end runs,
docs/serving_fit.md): host work per step and per running sequence, the gaps between a real run's
kernels per layer by layer kind (dense, MoE routing and dispatch, MLA), the MoE kernel of the
weight format on the GPU generation (:func:`moe_kernel`), and the API server's preprocessing.
Load comes in three shapes, each labelled: :func:`served` for open-loop (Poisson) arrivals at a
load, :func:`closed_loop` for C clients each sending the next request when the last finishes
(what load generators at a fixed concurrency measure), :func:`offline` for every request queued
at once (max-throughput benchmarks).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from planner.errors import PlannerError
from planner.results import Result

DEFAULT_MFU = 0.8  # large dense GEMMs, fitted (docs/latency_fit.md)
DEFAULT_MBU = 0.736


@dataclass(frozen=True, slots=True)
class LatencyObservation(Result):
    """Measured phase durations of one request (milliseconds) and its token counts.

    A plain frozen record: :func:`observe` validates every field (and is the only reader).
    """

    prompt_tokens: int
    generated_tokens: int
    queue_ms: float
    preprocessing_ms: float
    prefill_ms: float
    first_decode_ms: float
    remaining_decode_ms: float


@dataclass(frozen=True, slots=True)
class LatencyReport(Result):
    """Latency by phase with the seed's field names."""

    source: str  # "observed" or "roofline estimate"
    queue_ms: float
    preprocessing_ms: float
    prefill_ms: float
    first_decode_ms: float
    remaining_decode_ms: float
    time_to_first_token_ms: float
    prefill_tokens_per_second: float
    output_tokens_per_second: float
    mean_inter_token_latency_ms: float
    end_to_end_ms: float


def _duration(name: str, value: float, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlannerError(name, value, "must be a finite number of milliseconds")
    if value < 0 or (positive and value == 0):
        raise PlannerError(name, value, "must be positive" if positive else "must not be negative")
    return float(value)


def observe(obs: LatencyObservation) -> LatencyReport:
    """TTFT, rates, mean ITL and end-to-end from an observation.

    Raises:
        PlannerError: a duration that is negative, infinite or NaN; zero prefill or first
            decode; non-positive token counts; or remaining decode > 0 with one generated token.
    """
    for name in ("queue_ms", "preprocessing_ms", "remaining_decode_ms"):
        _duration(name, getattr(obs, name))
    prefill = _duration("prefill_ms", obs.prefill_ms, positive=True)
    first = _duration("first_decode_ms", obs.first_decode_ms, positive=True)
    for name in ("prompt_tokens", "generated_tokens"):
        count = getattr(obs, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise PlannerError(name, count, "must be a positive whole number")
    if obs.generated_tokens == 1 and obs.remaining_decode_ms != 0:
        raise PlannerError("remaining_decode_ms", obs.remaining_decode_ms, "must be 0 when only one token is generated (no inter-token interval)")
    ttft = obs.queue_ms + obs.preprocessing_ms + prefill + first
    decode_s = (first + obs.remaining_decode_ms) / 1000.0
    return LatencyReport(
        source="observed",
        queue_ms=obs.queue_ms,
        preprocessing_ms=obs.preprocessing_ms,
        prefill_ms=prefill,
        first_decode_ms=first,
        remaining_decode_ms=obs.remaining_decode_ms,
        time_to_first_token_ms=ttft,
        prefill_tokens_per_second=obs.prompt_tokens / (prefill / 1000.0),
        output_tokens_per_second=obs.generated_tokens / decode_s,
        mean_inter_token_latency_ms=obs.remaining_decode_ms / (obs.generated_tokens - 1) if obs.generated_tokens > 1 else 0.0,
        end_to_end_ms=ttft + obs.remaining_decode_ms,
    )


@dataclass(frozen=True, slots=True)
class Efficiency:
    """How far each kernel family gets from the datasheet peak, as a function of shape.

    Every factor multiplies the plan's MFU (compute) or MBU (memory) of large dense GEMMs, so a
    probe calibration of MFU/MBU rescales these terms together; the fixed per-layer costs, the
    all-reduce and the all-to-all are not rescaled. ``FLAT`` (all neutral) is the classic
    roofline; :data:`FITTED` holds the defaults fitted to measured kernels (see ``FIT``).
    """

    gemm_tokens_half: float = 0.0  # dense GEMM compute efficiency x T / (T + half)
    gemm_layer_s: float = 0.0  # launch and tail of a layer's small GEMMs (what a skinny decode GEMM never hides)
    moe_mfu: float = 1.0  # grouped-GEMM peak efficiency relative to MFU
    moe_tile: float = 1.0  # rows each touched expert computes at least (the GEMM tile)
    moe_tokens_per_expert_half: float = 0.0  # ... x r / (r + half), r = rows per touched expert
    moe_width_half: float = 0.0  # ... x n / (n + half), n = one expert's intermediate width on this GPU
    moe_mbu: float = 1.0  # expert weight reads relative to MBU
    moe_layer_s: float = 0.0  # routing, top-k, permute and unpermute per MoE layer
    attn_mbu: float = 1.0  # decode attention: K/V actually read at MBU x this
    attn_mfu: float = 1.0  # prefill attention FLOPs at MFU x this x P / (P + half), P = prompt tokens
    attn_tokens_half: float = 0.0
    attn_layer_s: float = 0.0  # attention kernel launch and softmax bookkeeping per layer
    layer_s: float = 0.0  # norms, activation, residual adds, rotary: fixed per layer
    elementwise_passes: float = 0.0  # activation bytes moved per token per layer, in units of the layer's width x dtype
    link_efficiency: float = 1.0  # achieved / datasheet interconnect bandwidth in a ring all-reduce
    # serving: what a real engine adds to the kernels AIConfigurator times (0 in FLAT and KERNELS)
    step_s: float = 0.0  # host work per engine step: scheduling, input preparation, sampling, output processing
    seq_s: float = 0.0  # ... per sequence that produces a token in the step (sampling, detokenising, streaming)
    serve_layer_s: float = 0.0  # per decoder layer: gaps between a real run's kernels (launches, syncs, small ops)
    serve_moe_layer_s: float = 0.0  # per MoE layer: routing, top-k, token permutation as served, beyond moe_layer_s
    mla_layer_s: float = 0.0  # per MLA layer: latent up-projections, absorbed BMMs, rotary and norms of the latent
    api_s: float = 0.0  # the API server per request before the engine sees it (HTTP, chat template, scheduling)
    api_token_s: float = 0.0  # ... per prompt token (tokenisation)

    @property
    def kernels(self) -> Efficiency:
        """These efficiencies without the serving costs (what AIConfigurator's kernel sums compare with)."""
        return replace(self, **dict.fromkeys(SERVING_FIELDS, 0.0))


SERVING_FIELDS = ("step_s", "seq_s", "serve_layer_s", "serve_moe_layer_s", "mla_layer_s", "api_s", "api_token_s")
FLAT = Efficiency()
# Serving costs fitted by scripts/fit_serving.py (docs/serving_fit.md): vLLM's (FITTED), TensorRT-LLM's
# own host work (trtllm_*: serving_efficiency), the kernel scales per weight format (moe_kernel,
# compute_scale, format_layer_cost). Generated block: the script rewrites the numbers between the markers.
# --- serving fit (generated) ---
SERVING_FIT = {
    "step_s": 0.0006699,
    "seq_s": 6.589e-06,
    "serve_layer_s": 5.847e-06,
    "serve_moe_layer_s": 1.103e-05,
    "mla_layer_s": 3.26e-05,
    "api_s": 0.03708,
    "api_token_s": 5.629e-06,
    "trtllm_step_s": 0.001407,
    "trtllm_seq_s": 1.729e-05,
    "sglang_api_s": 0.1154,
    "sglang_step_s": 0.0004852,
    "sglang_seq_s": 1.046e-05,
    "scaleout_message_s": 0.0001246,
}
KERNEL_FIT = {"w4a16": 1.11, "int4": 1.835, "w4a8": 1, "fp4": 0.9749, "moe_fp8": 1.092, "gemm_fp8": 0.7648, "int4_layer_s": 0.0001171}
# --- end serving fit ---
# Fitted by scripts/fit_latency.py to AIConfigurator 0.12.0's measured vLLM kernels (H100, B200,
# A100; H200 and two models held out); data, rows and residuals: docs/latency_fit.md.
FITTED = Efficiency(
    gemm_tokens_half=87.7,
    gemm_layer_s=7.7e-6,
    moe_mfu=0.773,
    moe_tile=1.24,
    moe_tokens_per_expert_half=73.2,
    moe_width_half=222.5,
    moe_mbu=1.085,
    moe_layer_s=11.3e-6,
    attn_mbu=1.106,
    attn_mfu=0.753,
    attn_tokens_half=1748.0,
    attn_layer_s=11.5e-6,
    layer_s=7.67e-6,
    elementwise_passes=7.61,
    link_efficiency=0.654,
    # serving costs of vLLM (the planner's runtime), fitted by scripts/fit_serving.py to the fit
    # split of the published end-to-end runs (docs/serving_fit.md)
    step_s=SERVING_FIT["step_s"],
    seq_s=SERVING_FIT["seq_s"],
    serve_layer_s=SERVING_FIT["serve_layer_s"],
    serve_moe_layer_s=SERVING_FIT["serve_moe_layer_s"],
    mla_layer_s=SERVING_FIT["mla_layer_s"],
    api_s=SERVING_FIT["api_s"],
    api_token_s=SERVING_FIT["api_token_s"],
)
KERNELS = FITTED.kernels  # the kernels alone: what AIConfigurator's static kernel sums compare with


@dataclass(frozen=True, slots=True)
class Roofline(Result):
    """Everything the step-time model needs, per GPU.

    A step over ``T`` new tokens, ``S`` of which produce logits, costs the sum of its terms
    (:meth:`terms`), each the larger of its compute and its memory time:

    * ``dense_gemm``: dense weights read once, 2 x dense params x T FLOPs;
    * ``lm_head``: the LM head read once, 2 x its params x S FLOPs (logits for the last token of
      a prompt only, as engines compute them);
    * ``moe``: the share of expert weights the T tokens route to, 1 - (1 - k/E)^T, and their
      FLOPs at a grouped-GEMM efficiency that falls when few tokens reach each expert, plus a
      fixed cost per MoE layer;
    * ``attention``: the K/V bytes the step actually reads (windows and MLA latents included) or
      its FLOPs, plus a fixed cost per attention layer;
    * ``allreduce``: two ring all-reduces per layer under tensor parallelism,
      latency + 2 (tp - 1) / tp x T x hidden x 2 bytes / link bandwidth each (all-to-all dispatch
      and combine instead of the MoE one under attention data parallelism). Expert parallelism
      inside a tensor-parallel group keeps the MoE all-reduce: every GPU holds every token after
      attention's all-reduce, runs its own experts on the tokens routed to them and the outputs
      are summed (vLLM uses its all-to-all kernels only when dp > 1, FusedMoEParallelConfig;
      SGLang's DeepSeek MoE all-reduces the experts' output unless an all-to-all backend is chosen);
    * ``alltoall``: under attention data parallelism (``dp`` ranks, expert parallelism over all of
      them) each token's k copies leave for the GPUs holding their experts and come back
      (dispatch and combine); each MoE layer serves dp x T tokens;
    * ``other``: norms and activations, a fixed cost per layer plus their activation traffic;
    * ``runtime``: the engine's host work per step and per sequence producing a token (serving
      costs; absent from :data:`KERNELS`).

    * ``eager_launch``: a step that carries prompt tokens and runs outside CUDA graphs
      (``eager_prefill_s`` > 0) lasts at least as long as the host takes to launch one forward's
      kernels, layer by layer from Python: the shortfall of the other terms below that floor
      (:func:`eager_prefill_floor`).

    ``format_layer_s`` (per layer, in ``other``) is what the weight format's kernels add at small
    batch (AWQ / GPTQ W4A16 GEMVs: :func:`format_layer_cost`).

    The serving costs per layer kind (eff.serve_layer_s per layer in ``other``,
    eff.serve_moe_layer_s per MoE layer in ``moe``, eff.mla_layer_s per MLA layer in
    ``attention``) and ``runtime`` are multiplied by ``fixed_scale`` (the software stack).
    """

    weights_bytes: float
    active_params: float  # per GPU, LM head included
    attn_layers: int
    q_heads: int  # per GPU
    head_dim: int
    peak_flops: float
    bandwidth_bytes_s: float
    mfu: float = DEFAULT_MFU
    mbu: float = DEFAULT_MBU
    windows: tuple[int, ...] = ()  # the window (or chunk) of each attention layer that has one
    expert_bytes: float = 0.0  # the routed experts' share of weights_bytes
    num_experts: int = 0
    experts_per_token: int = 0
    expert_active_params: float = 0.0  # routed-expert params one token uses, per GPU
    lm_head_params: float = 0.0  # per GPU (0: counted with the dense weights)
    lm_head_bytes: float = 0.0
    unread_bytes: float = 0.0  # weights a step never streams (the embedding table)
    layers: int = 0  # decoder layers (fixed costs, all-reduces)
    moe_layers: int = 0
    hidden: int = 0
    layer_width: float = 0.0  # activation elements per token per layer moved by norms and activations
    tp: int = 1
    ep: int = 1
    link_bytes_s: float = 0.0  # interconnect bandwidth per GPU per direction
    link_latency_s: float = 0.0  # per message
    act_bytes: int = 2
    moe_scale: float = 1.0  # the device's grouped-GEMM efficiency relative to Hopper's (catalog)
    compute_scale: float = 1.0  # the device's large-GEMM compute efficiency relative to MFU (catalog; PCIe L40S < 1)
    mla_layers: int = 0  # layers whose attention is MLA (latent up-projections and absorbed BMMs: eff.mla_layer_s each)
    moe_kernel: float = 1.0  # the engine's grouped-GEMM kernel for this weight format on this GPU generation (moe_kernel())
    fixed_scale: float = 1.0  # the software stack's serving fixed costs relative to CUDA's (catalog fixed_cost_scale)
    dp: int = 1  # attention data-parallel ranks whose tokens every MoE layer serves together (experts over ep ranks)
    format_layer_s: float = 0.0  # what the weight format's kernels add per layer at small batch (format_layer_cost())
    pp: int = 1  # pipeline stages: this model is one stage's (parallel.pipeline_stage), a step crosses all of them
    pp_link_bytes_s: float = 0.0  # the link between consecutive stages (NVLink inside a node, the NIC between nodes)
    pp_link_latency_s: float = 0.0
    eager_prefill_s: float = 0.0  # a step carrying prompt tokens that runs outside CUDA graphs takes at least this (0: graphed; see eager_prefill_floor)
    eff: Efficiency = FLAT
    _k: _StepConstants = field(init=False, repr=False, compare=False)  # derived once (see __post_init__)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_k", _StepConstants(self))

    def weights_read(self, tokens: int) -> float:
        """Weight bytes a step over ``tokens`` tokens reads: every dense weight, and of each MoE
        layer's experts the expected share routed to, 1 - (1 - k/E)^tokens (uniform routing)."""
        return self.weights_bytes - self.unread_bytes - self.expert_bytes * (1.0 - self.expert_share(tokens))

    def expert_share(self, tokens: int) -> float:
        """Expected share of a MoE layer's experts that ``tokens`` tokens touch."""
        if not (self.num_experts and self.experts_per_token and self.expert_bytes):
            return 1.0
        return 1.0 - (1.0 - min(1.0, self.experts_per_token / self.num_experts)) ** max(1, tokens)

    @property
    def expert_width(self) -> float:
        """One expert's intermediate width on this GPU (gated: three hidden x width matrices)."""
        if not (self.moe_layers and self.experts_per_token and self.hidden):
            return 1.0
        return self.expert_active_params / self.experts_per_token / (3.0 * self.hidden * self.moe_layers)

    @property
    def ridge_point(self) -> float:
        return self.peak_flops / self.bandwidth_bytes_s

    def _pairs(self, n: int) -> float:
        """Query-key pairs a causal prefill of ``n`` positions computes, summed over the layers:
        n^2 / 2 per full layer, sum of min(t, W) for t = 1..n per windowed layer."""
        full = (self.attn_layers - len(self.windows)) * n * n / 2.0
        windowed = sum(n * (n + 1) / 2.0 if n <= w else w * (w + 1) / 2.0 + (n - w) * w for w in self.windows)
        return full + windowed

    def _attention_flops(self, tokens: int, cached: int) -> float:
        memo = self._k.memo
        key = ("attention_flops", tokens, cached)
        hit = memo.get(key)
        if hit is None:
            hit = self.unmemoised_attention_flops(tokens, cached)
            _remember(memo, key, hit)
        return hit

    def unmemoised_attention_flops(self, tokens: int, cached: int) -> float:
        """Attention FLOPs of ``tokens`` prompt tokens after ``cached`` ones (QK^T and AV over the
        layers' causal pairs), without the memo: as :meth:`unmemoised_step_s`, for the simulator."""
        return 4.0 * (self._pairs(cached + tokens) - self._pairs(cached)) * self.q_heads * self.head_dim

    def prefill_flops(self, tokens: int, cached: int = 0) -> float:
        """FLOPs to prefill ``tokens`` new tokens after ``cached`` already-cached prefix tokens
        (the LM head for the last token only)."""
        return 2.0 * (self.active_params - self.lm_head_params) * tokens + 2.0 * self.lm_head_params + self._attention_flops(tokens, cached)

    def terms(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int = 0) -> dict[str, float]:
        """Seconds of each term of one step over ``tokens`` new tokens (see the class docstring);
        ``prompt_tokens``: the query length of a prefill (0 for a decode step)."""
        return dict(self._step(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)[0])

    def step_s(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int = 0) -> float:
        """``sum(terms(...).values())``: the step's seconds."""
        return self._step(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)[1]

    def unmemoised_step_s(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int = 0) -> float:
        """:meth:`step_s` without the memo: for a caller whose steps rarely repeat (the simulator's,
        each over its own K/V read), which would only churn it."""
        return sum(self._unmemoised_terms(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens).values())

    def _unmemoised_terms(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int) -> dict[str, float]:
        """The step's terms: through the pipeline's stages where there are several, else one stage's."""
        if self.pp > 1:
            return self._pipeline_terms(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)
        return self._stage_terms(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)

    def _step(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int) -> tuple[dict[str, float], float]:
        """(terms, their sum), memoised per Roofline (a frozen model: the same step, the same seconds)."""
        k = self._k
        key = (tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)
        hit = k.memo.get(key)
        if hit is not None:
            return hit
        out = self._unmemoised_terms(tokens, logits, kv_read_bytes, attn_flops, prompt_tokens)
        hit = (out, sum(out.values()))
        _remember(k.memo, key, hit)
        return hit

    def _pipeline_terms(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int) -> dict[str, float]:
        """A step through ``pp`` pipeline stages (this model is one stage's): the step's sequences
        run as pp micro-batches, one in each stage at a time (vLLM's and SGLang's schedule), so a
        sequence's next token comes after its micro-batch crossed every stage: pp stage steps of
        one micro-batch plus pp - 1 hand-offs of its hidden states (``pipeline``). A prompt's
        tokens stay in one micro-batch (a prefill alone crosses the stages whole); decodes split
        evenly, and the micro-batch carrying the prompt sets the pace."""
        pp, t, s = self.pp, max(1, tokens), max(1, logits)
        decodes = s - 1 if t > s else t  # a step of T > S tokens carries one prompt's T - S + 1
        prompt = t - decodes
        micro_d = -(-decodes // pp)
        micro_t = prompt + micro_d
        stage = self._stage_terms(micro_t, (1 if prompt else 0) + micro_d, kv_read_bytes * (micro_d / decodes if decodes else 1.0), attn_flops * micro_t / t, prompt_tokens)
        out = {name: pp * v for name, v in stage.items()}
        out["pipeline"] = (pp - 1) * (self.pp_link_latency_s + micro_t * self.hidden * self.act_bytes / max(1.0, self.pp_link_bytes_s))
        return out

    def _stage_terms(self, tokens: int, logits: int, kv_read_bytes: float, attn_flops: float, prompt_tokens: int) -> dict[str, float]:
        """The terms of one step on this GPU (the class docstring): no pipeline."""
        k = self._k
        e = self.eff
        peak = k.peak
        t = max(1, tokens)
        gemm_eff = t / (t + e.gemm_tokens_half)
        out = {"dense_gemm": k.dense_fixed + max(k.dense_memory, k.dense_flops * t / (peak * gemm_eff))}
        if k.lm_head:
            out["lm_head"] = max(k.lm_head_memory, k.lm_head_flops * max(1, logits) / peak)
        if k.moe:
            tm = t * self.dp  # tokens every MoE layer serves (the dp ranks' together)
            share = 1.0 - k.moe_untouched**tm  # expert_share(tm)
            touched = self.num_experts * share
            rows = max(e.moe_tile, tm * self.experts_per_token / touched)  # tokens each touched expert computes
            moe_eff = k.moe_peak_eff * rows / (rows + e.moe_tokens_per_expert_half) * k.expert_width / k.expert_width_den
            flops = k.expert_flops * touched * rows
            out["moe"] = k.moe_fixed + max(self.expert_bytes * share / k.moe_bw, flops / (peak * moe_eff))
        attn_eff = e.attn_mfu * (prompt_tokens / (prompt_tokens + e.attn_tokens_half) if prompt_tokens else 1.0)
        out["attention"] = k.attn_fixed + max(kv_read_bytes / k.attn_bw, attn_flops / (peak * attn_eff))
        message = t * self.hidden * self.act_bytes
        if k.allreduce:
            out["allreduce"] = k.allreduces * (self.link_latency_s + k.ring * message / k.link)
        if k.alltoall:  # dispatch and combine: each token's k copies leave for other GPUs
            a2a = self.link_latency_s + message * self.experts_per_token * (self.ep - 1) / self.ep / k.link
            out["alltoall"] = 2 * k.moe_allreduces * a2a
        if self.layers:
            out["other"] = k.other_fixed + self.layers * t * self.layer_width * self.act_bytes * e.elementwise_passes / self.bandwidth_bytes_s
        if k.runtime:
            out["runtime"] = k.runtime_step + k.runtime_seq * max(1, logits)
        if self.eager_prefill_s and prompt_tokens:  # an eager forward: the host's launches, not the GPU, set its pace
            short = self.eager_prefill_s - sum(out.values())
            if short > 0:
                out["eager_launch"] = short
        return out

    def fixed_s(self) -> float:
        """Seconds of fixed cost every step pays whatever its size, summed over the terms that
        carry one: kernel launch and tail of each layer's GEMMs, attention and MoE kernels, and
        the per-layer bookkeeping of norms and activations (what :meth:`terms` adds to each)."""
        k = self._k
        return k.dense_fixed + k.moe_fixed * k.moe + k.attn_fixed + self.layers * self.eff.layer_s

    def prefill_terms(self, tokens: int, cached: int = 0) -> dict[str, float]:
        return self.terms(tokens, 1, 0.0, self._attention_flops(tokens, cached), cached + tokens)

    def prefill_s(self, tokens: int, cached: int = 0) -> float:
        if tokens <= 0:
            return 0.0
        return self.step_s(tokens, 1, 0.0, self._attention_flops(tokens, cached), cached + tokens)

    def decode_span(self, context: int) -> int:
        """Key positions one decode token attends to, summed over the attention layers (windows capped)."""
        memo = self._k.memo
        key = ("span", context)
        hit = memo.get(key)
        if hit is None:
            hit = (self.attn_layers - len(self.windows)) * context + sum(min(context, w) for w in self.windows)
            _remember(memo, key, hit)
        return hit

    def decode_flops_per_token(self, context: int) -> float:
        return 2.0 * self.active_params + 4.0 * self.decode_span(context) * self.q_heads * self.head_dim

    def decode_terms(self, sequences: int, kv_bytes_per_sequence: float, context: int) -> dict[str, float]:
        return self.terms(sequences, sequences, sequences * kv_bytes_per_sequence, sequences * 4.0 * self.decode_span(context) * self.q_heads * self.head_dim)

    def decode_step_s(self, sequences: int, kv_bytes_per_sequence: float, context: int) -> float:
        """One decode step for ``sequences`` sequences each holding ``kv_bytes_per_sequence``."""
        return self.step_s(sequences, sequences, sequences * kv_bytes_per_sequence, sequences * 4.0 * self.decode_span(context) * self.q_heads * self.head_dim)

    def decode_intensity(self, sequences: int, kv_bytes_per_sequence: float, context: int) -> float:
        """Arithmetic intensity (FLOP/byte) of a decode step."""
        return sequences * self.decode_flops_per_token(context) / (self.weights_read(sequences) + sequences * kv_bytes_per_sequence)

    def prefill_intensity(self, tokens: int) -> float:
        return self.prefill_flops(tokens) / self.weights_bytes if self.weights_bytes else 0.0


_MEMO_ENTRIES = 256  # steps remembered per Roofline (a plan needs a few; its SLO bisections a few dozen)
_LOAD_MEMO_ENTRIES = 512  # load figures remembered per Roofline (a size search probes a few hundred loads on one shape)
MEMO_BYTES = _MEMO_ENTRIES * 1200 + _LOAD_MEMO_ENTRIES * 1600  # what full memos hold at most (steps: key, seven terms, their sum; loads: a result of ~20 floats)


def _remember(memo: dict, key: tuple, value: object, entries: int = _MEMO_ENTRIES) -> None:
    """``memo[key] = value``, first emptying a memo that holds ``entries`` already."""
    if len(memo) >= entries:
        memo.clear()
    memo[key] = value


class _StepConstants:
    """What :meth:`Roofline.terms` needs that does not depend on the step, computed once per
    Roofline with the same operations (so the same floats) as the formulas, and a memo of the
    steps computed so far (the same step is asked for several times in a plan)."""

    __slots__ = ("peak", "bw", "dense_fixed", "dense_memory", "dense_flops", "lm_head", "lm_head_memory", "lm_head_flops", "moe", "moe_untouched", "moe_peak_eff", "expert_width")
    __slots__ += ("expert_width_den", "expert_flops", "moe_fixed", "moe_bw", "attn_fixed", "attn_bw", "allreduce", "link", "ring", "allreduces", "moe_allreduces", "memo", "load_memo")
    __slots__ += ("alltoall", "other_fixed", "runtime", "runtime_step", "runtime_seq")

    def __init__(self, r: Roofline) -> None:
        e = r.eff
        self.peak, self.bw = r.peak_flops * r.mfu * r.compute_scale, r.bandwidth_bytes_s * r.mbu
        dense_params = r.active_params - r.lm_head_params - r.expert_active_params
        dense_bytes = r.weights_bytes - r.expert_bytes - r.lm_head_bytes - r.unread_bytes
        self.dense_fixed = r.layers * e.gemm_layer_s
        self.dense_memory = dense_bytes / self.bw
        self.dense_flops = 2.0 * dense_params
        self.lm_head = bool(r.lm_head_params)
        self.lm_head_memory = r.lm_head_bytes / self.bw
        self.lm_head_flops = 2.0 * r.lm_head_params
        self.moe = bool(r.expert_bytes and r.num_experts and r.experts_per_token)
        self.moe_untouched = 1.0 - min(1.0, r.experts_per_token / r.num_experts) if self.moe else 0.0
        self.moe_peak_eff = e.moe_mfu * r.moe_scale * r.moe_kernel
        self.expert_width = r.expert_width
        self.expert_width_den = self.expert_width + e.moe_width_half
        self.expert_flops = 2.0 * r.expert_active_params / r.experts_per_token if self.moe else 0.0
        fs = r.fixed_scale
        self.moe_fixed = r.moe_layers * e.moe_layer_s + r.moe_layers * e.serve_moe_layer_s * fs
        self.moe_bw = self.bw * e.moe_mbu
        self.attn_fixed = r.attn_layers * e.attn_layer_s + r.mla_layers * e.mla_layer_s * fs
        self.attn_bw = self.bw * e.attn_mbu
        self.allreduce = bool(r.tp > 1 and r.link_bytes_s and r.layers)
        self.link = r.link_bytes_s * e.link_efficiency
        self.ring = 2.0 * (r.tp - 1) / r.tp
        self.moe_allreduces = r.moe_layers if r.ep > 1 and r.dp > 1 else 0  # all-to-all instead of the MoE all-reduce: only between attention data-parallel ranks
        self.alltoall = bool(self.moe_allreduces and r.link_bytes_s and self.moe)
        self.allreduces = 2 * r.layers - self.moe_allreduces
        self.other_fixed = r.layers * e.layer_s + r.layers * (e.serve_layer_s + r.format_layer_s) * fs
        self.runtime_step, self.runtime_seq = e.step_s * fs, e.seq_s * fs
        self.runtime = bool(self.runtime_step or self.runtime_seq)
        self.memo: dict = {}
        self.load_memo: dict = {}  # the load models' results (_per_roofline), apart from the steps so a search's steps do not evict them


DEFAULT_BATCH_TOKENS = 8192  # vLLM V1 max_num_batched_tokens for its API server on GPUs >= 70 GiB (arg_utils)


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum of floor((a i + b) / m) for i = 0..n-1 in O(log m) (the ACL floor_sum recursion)."""
    total = 0
    while True:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b = divmod(y_max, m)
        m, a = a, m


def prefill_steps(prompt_tokens: int, requests: int, budget_tokens: int) -> float:
    """Mean number of engine steps until a prompt's first token when ``requests`` prompts of
    ``prompt_tokens`` arrive together at a token-budgeted, first-come continuous batcher.

    Prompt k (1..N) completes at step ceil(k P / B), so the mean is (1/N) sum ceil(k P / B),
    summed exactly in closed form (a floor sum). Requests that already have their first token
    decode one token a step from the same budget; on average (N - 1) / 2 of them do while the
    burst is prefilled, so B is reduced by that much. Checked against the simulator in
    tests/test_latency.py.
    """
    p, n = max(1, prompt_tokens), max(1, requests)
    b = max(1, budget_tokens - (n - 1) // 2) if n * p > budget_tokens else max(1, budget_tokens)
    return _floor_sum(n, b, p, p + b - 1) / n


P95_Z = 0.05  # tail probability of the 95th percentile
P99_TAIL = 0.01  # ... and of the 99th


def queue_wait(rho: float, service_s: float) -> tuple[float, float]:
    """Mean and 95th-percentile wait of an M/D/1 queue at utilisation ``rho`` < 1 whose service
    takes ``service_s``: the Pollaczek-Khinchine mean rho S / (2 (1 - rho)); an arrival waits at
    all with probability rho, and then about exponentially with mean W / rho, so
    P(wait > t) = rho exp(-t rho / W) and the p95 is (W / rho) ln(rho / 0.05) (0 when rho <= 0.05)."""
    if rho <= 0.0 or service_s <= 0.0:
        return 0.0, 0.0
    mean = rho * service_s / (2.0 * (1.0 - rho))
    p95 = mean / rho * math.log(rho / P95_Z) if rho > P95_Z else 0.0
    return mean, p95


@dataclass(frozen=True, slots=True)
class Served(Result):
    """Latency at the requested load under continuous batching with a token budget per step (ms).

    Steady state: ``requests`` requests are in flight, so prompts arrive at requests /
    end-to-end per second (Little's law), as Poisson arrivals (what the simulator and the capacity
    search send; a closed loop of that many users is gentler). An arriving prompt finds the
    other requests - 1 decoding. Each step decodes the running sequences and gives the rest of
    the budget to prefill:

    * TTFT: the prompt's own prefill, in steps beside the decodes, plus the wait behind other
      prompts: an M/D/1 queue (:func:`queue_wait`) whose server is the prefill budget (one prompt
      takes prompt tokens x the seconds a full prefill step spends per token), plus the rest of
      the step in flight on arrival. The wait lengthens each request and so slows the arrivals;
      the wait is the fixed point of the two (a quadratic's root). Where it reaches the burst's, the
      prefill cannot keep up (``saturated``) and the burst figures stand.
    * Burst (the worst moment): all ``requests`` prompts arrive together and are prefilled first
      come (:func:`prefill_steps`); kept as ``burst_wait_ms`` and ``burst_wait_max_ms`` (the last).
    * ITL: requests x prompt / output prefill tokens a step on average, carried in chunks of
      the arriving prompt and those queued behind it (at most the budget), so a share of the
      steps are long: the mean blends them with the decode-only steps, and the p95 of the gaps
      between tokens is the long step when more than 5 % of steps are long.

    Checked against the simulator in tests/test_latency.py.
    """

    requests: int
    budget_tokens: int
    prefill_one_ms: float  # one prompt alone ("at 1 request")
    prefill_served_ms: float  # the burst's mean time from arrival to the end of its prefill
    wait_ms: float  # steady state: mean TTFT added by the load (queue, step in flight, slower own prefill)
    wait_p95_ms: float
    burst_wait_ms: float  # all prompts at once: mean wait behind the others
    burst_wait_max_ms: float  # ... and the last prompt's
    prefill_utilisation: float  # share of the prefill budget the arrivals use (>= 1: saturated)
    prefill_capacity_per_s: float  # prompts a second the budget can prefill beside the other decodes
    saturated: bool
    steps: float  # the burst's mean steps to a first token
    chunk_tokens: int
    itl_one_ms: float  # decode step of one sequence ("at 1 request")
    itl_decode_ms: float  # decode-only step at this load (static batch)
    itl_ms: float  # with the mixed-in prefill chunks (mean)
    itl_p95_ms: float
    itl_p99_ms: float
    prefill_step_share: float  # share of steps that carry a prefill chunk
    mixed_prefill_tokens_per_step: float


def _per_roofline(fn):
    """Memoise ``fn(roof, *args)`` in the Roofline's memo: ``fn`` must be a pure function of a
    (frozen) Roofline and plain arguments, returning a frozen result. A plan asks for the same
    load more than once (its SLO bisections, then the requested load), and plans that differ in
    anything but the load share the Roofline."""

    @functools.wraps(fn)
    def memoised(roof: Roofline, *args, **kwargs):
        key = (fn, *args, *kwargs.items())
        memo = roof._k.load_memo
        hit = memo.get(key)
        if hit is None:
            hit = fn(roof, *args, **kwargs)
            _remember(memo, key, hit, _LOAD_MEMO_ENTRIES)
        return hit

    return memoised


# What the served-latency model (:func:`served`) computes beside the step terms: the wait of a
# prompt for the prefill budget (M/D/1 queue, the step in flight, the all-at-once burst) and the
# prefill chunks that ride in decode steps (so the ITL and its p95 carry the interference).
SERVED_TERMS = frozenset({"prefill_queue", "mixed_prefill_decode_steps"})


def step_quantile(tail: float, share: float, decode: float, chunk_step: float) -> float:
    """The step time that a ``tail`` share of steps exceed (0.05: the p95 gap, 0.01: the p99): a
    step carrying a prefill chunk when more than ``tail`` of the steps carry one, else a
    decode-only step. The simulator agrees for prompts of one length (tests/test_latency.py:
    2,048-token prompts, 5.9 % of steps carrying a chunk: p95 and p99 both the 33 ms chunk step),
    so the percentile jumps where the share crosses ``tail``; a mean above the p95 is then a few
    long steps (planner.explain.mean_above_p95 says so)."""
    return chunk_step if share > tail else decode


class _Mix:
    """The steps of one replica that mix decoding sequences (each holding ``kv_mid`` bytes at the
    mean decode context ``mid``) with prefill tokens of a prompt of ``new`` uncached tokens after
    ``cached`` cached ones: what :func:`served` and :func:`closed_loop` time their steps with."""

    __slots__ = ("roof", "new", "cached", "kv_mid", "mid", "attn_one", "per_seq_attn")

    def __init__(self, roof: Roofline, prompt_tokens: int, cached: int, kv_mid: float, mid: int) -> None:
        self.roof, self.cached, self.kv_mid, self.mid = roof, cached, kv_mid, mid
        self.new = max(1, prompt_tokens - cached)
        self.attn_one = roof._attention_flops(self.new, cached)  # attention FLOPs of the whole prompt's prefill
        self.per_seq_attn = 4.0 * roof.decode_span(mid) * roof.q_heads * roof.head_dim  # one decode token's

    def step(self, prefill: float, decodes: float) -> float:
        """Seconds of a step of ``decodes`` decodes (rounded) and ``prefill`` prompt tokens."""
        roof, d = self.roof, max(0, int(round(decodes)))
        if prefill <= 0:
            return roof.decode_step_s(d, self.kv_mid, self.mid) if d else 0.0
        return roof.step_s(d + int(round(prefill)), d + 1, d * self.kv_mid, d * self.per_seq_attn + prefill / self.new * self.attn_one, self.cached + self.new)

    def own_prefill(self, others: float, budget_tokens: int) -> _OwnPrefill:
        """A prompt's prefill in steps beside ``others`` decodes: the budget less their tokens a step."""
        room = max(1, budget_tokens - int(round(others)))  # prefill tokens a step beside their decodes
        whole, rest = divmod(self.new, room)
        full = self.step(room, others)  # a step whose budget is full of prefill
        own = whole * full + (self.step(rest, others) if rest else 0.0)
        return _OwnPrefill(own, full, self.new * full / room, whole + (1 if rest else 0))


class _OwnPrefill(NamedTuple):
    own_s: float  # the prompt's own prefill steps
    full_step_s: float  # a step whose budget is full of prefill
    service_s: float  # the budget's seconds per prompt while prompts queue (full step x prompt / room)
    chunks: int  # steps the prompt takes


class _Burst(NamedTuple):
    """All the requests' prompts arriving at once, prefilled first come (the worst moment)."""

    one_s: float  # one prompt alone
    steps: float  # mean steps to a first token (prefill_steps)
    served_s: float  # mean time from arrival to the end of its prefill
    last_s: float  # the last prompt's


def _burst(mix: _Mix, n: int, budget_tokens: int, prompt_tokens: int) -> _Burst:
    """:class:`_Burst` of ``n`` prompts at ``budget_tokens`` tokens a step."""
    roof, new = mix.roof, mix.new
    one = roof.prefill_s(new, mix.cached)
    steps = prefill_steps(new, n, budget_tokens)
    chunk = min(budget_tokens, n * new)
    share = chunk / new  # prompts' worth of tokens in one step
    step = roof.step_s(chunk, max(1, int(share)), 0.0, share * mix.attn_one, prompt_tokens)
    return _Burst(one, steps, max(one, steps * step), max(one, -(-n * new // max(1, budget_tokens)) * step))


class _Interference(NamedTuple):
    """Prefill chunks riding in the decode steps of ``n`` decoding sequences."""

    decode_s: float  # a decode-only step
    mixed: float  # prefill tokens a step, on average
    chunk0: int  # the chunk of one prompt beside the decodes
    step0_s: float  # a step carrying that chunk
    itl0_s: float  # the mean step with one prompt's chunks mixed in


def _interference(mix: _Mix, n: int, generated: int, budget_tokens: int) -> _Interference:
    """:class:`_Interference`: n x prompt / output prefill tokens a step on average, carried now and
    then as a prompt's chunk (not a sliver every step), so the ITL blends decode-only steps with
    steps carrying ``chunk0`` prefill tokens, a share mixed / chunk0 of them."""
    new = mix.new
    decode = mix.roof.decode_step_s(n, mix.kv_mid, mix.mid)
    mixed = 0.0 if generated <= 1 else min(max(0, budget_tokens - n), n * new / generated)
    chunk0 = min(new, max(1, budget_tokens - n))
    step0 = mix.step(chunk0, n) if mixed else decode
    return _Interference(decode, mixed, chunk0, step0, decode + min(1.0, mixed / chunk0) * (step0 - decode))


class _Wait(NamedTuple):
    """A prompt's wait for the prefill budget in steady state (seconds)."""

    wait_s: float  # mean
    wait_p95_s: float
    rho: float  # the budget's utilisation
    queue_mean_s: float  # the M/D/1 queue alone
    saturated: bool
    arrivals_per_s: float  # prompts a second at this wait


def _steady_wait(n: int, own: _OwnPrefill, burst: _Burst, mix_itl0: float, generated: int) -> _Wait:
    """The steady-state wait of :func:`served`: the M/D/1 queue for the budget (service
    ``own.service_s``), the rest of the step in flight on arrival and the slower own prefill,
    at the arrival rate that wait allows (Little: n / end-to-end), solved as a fixed point."""
    others, one, service = n - 1, burst.one_s, own.service_s
    own_s = own.own_s if others else one
    in_flight = mix_itl0 / 2.0 if others else 0.0  # the rest of the step running when the prompt arrives
    tail = max(0, generated - 1) * mix_itl0

    def arrivals(w: float) -> float:  # prompts a second at this load when a request waits w (Little: n / end-to-end)
        return n / (own_s + w + tail) if others and own_s + w + tail > 0 else 0.0

    def queue(w: float) -> tuple[float, float, float]:  # (rho, mean, p95) of the prefill queue
        rho = arrivals(w) * service
        return (rho, *queue_wait(rho, service)) if rho < 1.0 else (rho, math.inf, math.inf)

    # the wait lengthens each request, which slows the arrivals: wait = d + queue(wait), d = (own - one)
    # + in flight. With rho = a / (T + w), a = n S, T = own + tail, the M/D/1 mean is a S / (2 (T + w - a)),
    # so x = T + w - a > 0 solves x^2 + (a - T - d) x - a S / 2 = 0 (its positive root)
    burst_mean, burst_max = burst.served_s - one, burst.last_s - one
    fixed = (own_s - one) + in_flight
    if others:
        a, big_t = n * service, own_s + tail
        b = a - big_t - fixed
        x = (-b + math.sqrt(b * b + 2.0 * a * service)) / 2.0
        w = min(max(0.0, x - big_t + a), max(0.0, burst_mean))
    else:
        w = 0.0
    rho, q_mean, q_p95 = queue(w)
    saturated = others > 0 and fixed + q_mean >= burst_mean
    wait = burst_mean if saturated else w
    wait_p95 = burst_max if saturated else min(burst_max, max(wait, (own_s - one) + 1.9 * in_flight + q_p95))
    return _Wait(wait, wait_p95, rho, q_mean, saturated, arrivals(wait))


class _MixedItl(NamedTuple):
    chunk_tokens: int  # a prefill step's tokens: the arriving prompt and those queued behind it
    share: float  # of the steps that carry one
    chunk_step_s: float
    itl_s: float  # mean
    itl_p95_s: float
    itl_p99_s: float


def _mixed_itl(mix: _Mix, n: int, budget_tokens: int, inter: _Interference, wait: _Wait) -> _MixedItl:
    """The ITL of :func:`served`: a prefill step holds the arriving prompt and, on average, those
    queued behind it (Little: rate x wait); that share of steps is long, and the p95 gap is such
    a step when more than 5 % of steps are."""
    queued = wait.arrivals_per_s * (wait.queue_mean_s if math.isfinite(wait.queue_mean_s) else wait.wait_s)
    chunk_tokens = int(min(max(1, budget_tokens - n), mix.new * (1.0 + queued)))
    share = min(1.0, inter.mixed / chunk_tokens) if inter.mixed else 0.0
    chunk_step = inter.step0_s if chunk_tokens == inter.chunk0 or not inter.mixed else mix.step(chunk_tokens, n)
    itl = inter.decode_s + share * (chunk_step - inter.decode_s)
    return _MixedItl(chunk_tokens, share, chunk_step, itl, step_quantile(P95_Z, share, inter.decode_s, chunk_step), step_quantile(P99_TAIL, share, inter.decode_s, chunk_step))


@_per_roofline
def served(roof: Roofline, prompt_tokens: int, cached: int, generated: int, requests: int, kv_mid: float, mid: int, budget_tokens: int = DEFAULT_BATCH_TOKENS) -> Served:
    """:class:`Served` latency for ``requests`` concurrent requests on one replica: the burst
    (:func:`_burst`), the prompt's own prefill beside the other decodes, the prefill chunks in the
    decode steps (:func:`_interference`), the steady-state wait (:func:`_steady_wait`) and the ITL
    those chunks give (:func:`_mixed_itl`)."""
    mix = _Mix(roof, prompt_tokens, cached, kv_mid, mid)
    n = max(1, requests)
    burst = _burst(mix, n, budget_tokens, prompt_tokens)
    own = mix.own_prefill(n - 1, budget_tokens)
    inter = _interference(mix, n, generated, budget_tokens)
    wait = _steady_wait(n, own, burst, inter.itl0_s, generated)
    itl = _mixed_itl(mix, n, budget_tokens, inter, wait)
    return Served(
        requests=n,
        budget_tokens=budget_tokens,
        prefill_one_ms=burst.one_s * 1e3,
        prefill_served_ms=burst.served_s * 1e3,
        wait_ms=wait.wait_s * 1e3,
        wait_p95_ms=wait.wait_p95_s * 1e3,
        burst_wait_ms=(burst.served_s - burst.one_s) * 1e3,
        burst_wait_max_ms=(burst.last_s - burst.one_s) * 1e3,
        prefill_utilisation=wait.rho,
        prefill_capacity_per_s=1.0 / max(own.service_s, 1e-12),
        saturated=wait.saturated,
        steps=burst.steps,
        chunk_tokens=itl.chunk_tokens,
        itl_one_ms=roof.decode_step_s(1, kv_mid, mid) * 1e3,
        itl_decode_ms=inter.decode_s * 1e3,
        itl_ms=itl.itl_s * 1e3,
        itl_p95_ms=max(itl.itl_p95_s, inter.decode_s) * 1e3,
        itl_p99_ms=max(itl.itl_p99_s, inter.decode_s) * 1e3,
        prefill_step_share=itl.share,
        mixed_prefill_tokens_per_step=inter.mixed,
    )


# --------------------------------------------------------------------------- serving: engines, kernels, closed loop

ENGINES = ("vllm", "sglang", "trtllm")


# each engine's own fitted serving costs (SERVING_FIT keys), where the published runs had runs of it;
# every other cost is vLLM's
ENGINE_FIT_KEYS = {
    "trtllm": {"step_s": "trtllm_step_s", "seq_s": "trtllm_seq_s"},
    "sglang": {"api_s": "sglang_api_s", "step_s": "sglang_step_s", "seq_s": "sglang_seq_s"},
}


def serving_efficiency(engine: str = "vllm", fit: dict[str, float] | None = None) -> Efficiency:
    """:data:`FITTED` with ``engine``'s own serving costs (:data:`ENGINE_FIT_KEYS`: TensorRT-LLM's
    host work per step and sequence, SGLang's per-request overhead and host work); ``fit``: other
    serving constants (SERVING_FIT keys, what scripts/fit_serving.py tries).

    Raises:
        PlannerError: an engine the model has no profile for.
    """
    if engine not in ENGINES:
        raise PlannerError("engine", engine, f"unknown serving engine; choose one of {', '.join(ENGINES)}")
    base = FITTED if fit is None else replace(FITTED, **{k: v for k, v in fit.items() if k in SERVING_FIELDS})
    fit = SERVING_FIT if fit is None else fit
    own = {name: fit[key] for name, key in ENGINE_FIT_KEYS.get(engine, {}).items() if key in fit}
    return replace(base, **own) if own else base


FP4_GENERATIONS = frozenset({"blackwell", "blackwell-ultra", "blackwell-rtx", "cdna4"})  # 4-bit float tensor cores


def kernel_dtype(weight_format: str, generation: str, engine: str = "vllm") -> str:
    """The tensor-core dtype the engine multiplies ``weight_format`` weights in on ``generation``
    (what :meth:`planner.hardware.Device.peak_flops` takes):

    * nvfp4 on a GPU with FP4 tensor cores: fp4 (W4A4, activations quantised to NVFP4 too);
    * mxfp4 there: fp8 (W4A8: MXFP4 x MXFP8, TensorRT-LLM's and vLLM's FlashInfer kernels for
      gpt-oss); fp4 on CDNA 4 (W4A4 MXFP4);
    * mxfp4 / nvfp4 on GPUs without FP4 tensor cores: bf16 (the weights are widened in the
      kernel, W4A16: Triton's matmul_ogs in vLLM and in TensorRT-LLM, whose perf overview runs
      gpt-oss on Hopper with ``moe_config.backend: TRITON``; Marlin in vLLM / SGLang);
    * int4 (AWQ / GPTQ): bf16 (W4A16 Marlin); fp8: fp8; anything else bf16.

    ``engine`` is kept for engines whose kernels differ (none of the fitted ones do here).
    """
    fp4 = generation in FP4_GENERATIONS
    if weight_format == "nvfp4" and fp4:
        return "fp4"
    if weight_format in ("mxfp4", "nvfp4"):
        return ("fp4" if generation == "cdna4" else "fp8") if fp4 else "bf16"
    return "fp8" if weight_format == "fp8" else "bf16"


def kernel_class(weight_format: str, generation: str, engine: str = "vllm") -> str | None:
    """Which fitted grouped-GEMM kernel the routed experts run on: "fp4" (native FP4 tensor
    cores), "w4a8" (4-bit float weights widened to fp8 activations), "w4a16" (widened to 16
    bits: Triton's matmul_ogs), "int4" (AWQ / GPTQ integer experts: Marlin, W4A16),
    "moe_fp8" (fp8 experts: block-scaled fp8 grouped GEMMs); None for 16-bit experts (the
    AIConfigurator fit, whose rows are all bf16)."""
    dtype = kernel_dtype(weight_format, generation, engine)
    if weight_format == "fp8":
        return "moe_fp8" if dtype == "fp8" else None
    if weight_format == "int4":
        return "int4"  # AWQ / GPTQ experts: Marlin's grouped W4A16 kernels
    if weight_format not in ("mxfp4", "nvfp4"):
        return None
    return {"fp4": "fp4", "fp8": "w4a8"}.get(dtype, "w4a16")


def moe_kernel(weight_format: str, generation: str, engine: str = "vllm") -> tuple[float, str]:
    """(scale on the grouped-GEMM compute efficiency, why) for routed experts stored as
    ``weight_format`` on ``generation`` under ``engine`` (:func:`kernel_class`; fitted on the fit
    split, docs/serving_fit.md); 16-bit experts keep the AIConfigurator fit (1)."""
    kind = kernel_class(weight_format, generation, engine)
    if kind is None:
        return 1.0, "16-bit experts: the grouped-GEMM efficiency fitted to AIConfigurator's kernels"
    what = {"fp4": "native FP4 grouped GEMMs", "w4a8": "4-bit experts widened to fp8 activations", "w4a16": "4-bit float experts widened to 16-bit activations", "int4": "AWQ / GPTQ integer experts (Marlin)", "moe_fp8": "fp8 grouped GEMMs"}[kind]
    return KERNEL_FIT[kind], f"{what} ({weight_format} on {generation} under {engine}), fitted to published runs"


def format_layer_cost(weight_format: str) -> float:
    """Seconds per decoder layer the weight format's linear kernels add at small batch: AWQ /
    GPTQ integer weights run every projection of the layer (attention's included) through W4A16
    GEMV kernels with their own launch and dequantisation, fitted (KERNEL_FIT["int4_layer_s"]);
    0 for other formats."""
    return KERNEL_FIT["int4_layer_s"] if weight_format == "int4" else 0.0


def compute_scale(dtype: str) -> float:
    """Compute efficiency of ``dtype`` GEMMs relative to the bf16 efficiency fitted to
    AIConfigurator (whose rows are all bf16): fp8's is fitted to published fp8 runs; others 1."""
    return KERNEL_FIT["gemm_fp8"] if dtype == "fp8" else 1.0


@dataclass(frozen=True, slots=True)
class RuntimeLimits(Result):
    """What the engine admits at once by default: running sequences, tokens a step, CUDA-graph batches."""

    engine: str
    max_num_seqs: int
    max_batched_tokens: int
    graph_max_batch: int
    source: str


def runtime_limits(engine: str, memory_gib: float, generation: str = "", device_name: str = "") -> RuntimeLimits:
    """The engine's default limits on this GPU (kept for the callers that need an engine's defaults
    without a plan: the disaggregated pools and the bench import; a plan takes vLLM's from
    :func:`planner.engines.vllm_memory.batch_defaults`).

    * vLLM: the API server's defaults for this GPU as vLLM 0.11's own code picks them (the release
      the serving fit's runs are read against; :func:`planner.engines.vllm_memory.batch_defaults`:
      1,024 sequences and 8,192 tokens a step on GPUs of 70 GiB and more that are not A100s, else 256
      and 2,048); CUDA graphs up to min(2 x max_num_seqs, 512) sequences (config/scheduler.py);
    * TensorRT-LLM (trtllm-bench, PyTorch backend): max_batch_size up to 2,048, max_num_tokens 8,192
      (the measured-serving notes of its perf overview); graphs padded to the batch;
    * SGLang: chunked prefill of 8,192 tokens; running requests as memory admits; graphs to 256 (estimate).

    Raises:
        PlannerError: an unknown engine.
    """
    if engine == "vllm":
        from planner.engines.vllm_memory import batch_defaults
        from planner.hardware import CATALOG, custom_device

        device = CATALOG.get(device_name) or custom_device(memory_gib)
        d = batch_defaults(device, "0.11")
        return RuntimeLimits(engine, d.max_num_seqs, d.max_num_batched_tokens, min(2 * d.max_num_seqs, 512), d.source)
    if engine == "trtllm":
        return RuntimeLimits(engine, 2048, 8192, 2048, "trtllm-bench throughput defaults (max_batch_size 2048, max_num_tokens 8192)")
    if engine == "sglang":
        return RuntimeLimits(engine, 1 << 20, 8192, 256, "SGLang defaults: chunked_prefill_size 8192, running requests by memory (estimate)")
    raise PlannerError("engine", engine, f"unknown serving engine; choose one of {', '.join(ENGINES)}")




# Host seconds per decoder layer of a DeepSeek-V2-family model (MLA attention, MoE MLP) run outside
# CUDA graphs, from SGLang's own published latencies at one request while its MLA path could not be
# captured (Triton kernels, sgl-project/sglang#1369: "due to Triton Runtime not yet supporting CUDA
# Graph, there will be higher latency"): DeepSeek-V2-Chat-0628 TP8 11.5 tok/s over 60 layers = 1.449 ms
# (#1264), DeepSeek-Coder-V2-Lite on A100 31 ms a token over 27 layers = 1.148 ms (#1369), and
# DeepSeek-Coder-V2-Lite 4x its 6.22 ms CUDA-graph step over 27 layers = 0.92 ms (#1401, the PR that
# graphed it). The median of the three; a 2024 release's Python path, so an upper estimate for later ones.
EAGER_MLA_LAYER_S = 1.148e-3


def eager_prefill_floor(roof: Roofline) -> float:
    """Seconds the host takes to launch one forward of ``roof``'s layers outside CUDA graphs, where
    published eager runs size it: its MLA layers at :data:`EAGER_MLA_LAYER_S` each (no other layer
    kind has a published eager figure: 0 for them). What ``Roofline.eager_prefill_s`` is set to for an
    engine release that runs prefill eagerly (SGLang before prefill CUDA graphs: 0.5.6's
    ``enable_piecewise_cuda_graph`` defaults to False, ForwardMode.is_cuda_graph() holds for decode,
    target-verify and idle batches only; 0.5.23 graphs prefill by default, ``default_prefill_backend``).
    Times ``roof.fixed_scale``: the launches are host work, as slow as the rest of the software stack's
    (ROCm's fitted scale, docs/serving_fresh3_plan.md)."""
    return roof.mla_layers * EAGER_MLA_LAYER_S * roof.fixed_scale


def api_preprocess_s(eff: Efficiency, prompt_tokens: int) -> float:
    """Seconds the API server spends on a request before the engine schedules it (HTTP handling,
    chat template, tokenisation): eff.api_s + eff.api_token_s x prompt tokens."""
    return eff.api_s + eff.api_token_s * max(0, prompt_tokens)


@dataclass(frozen=True, slots=True)
class ClosedLoop(Result):
    """Latency and throughput for ``clients`` clients in a closed loop, each sending its next
    request when the last one finishes (vLLM's ``benchmark_serving --max-concurrency``,
    InferenceMAX, genai-perf's concurrency mode; with ``clients`` = the engine's admission and no
    API server, an offline max-throughput run). Every figure is closed-loop (milliseconds; rates
    per replica).

    * TTFT = API preprocessing + the rest of the step running when the request reaches the
      scheduler (or the decode steps until its next poll, under a receive interval) + the wait for prefill budget behind other prompts (M/D/1, as :func:`served`; where
      the budget cannot keep up, the wait that makes arrivals equal the budget's rate, Little's law)
      + the request's own prefill steps beside the running decodes + the wait for a free slot when
      clients exceed the engine's max running sequences;
    * TPOT = the decode step of the sequences decoding, and the share of steps that carry another
      prompt's chunk (prefill interference under chunked prefill) at their longer step time; under
      attention data parallelism (``roof.dp`` ranks, the roofline of one rank) a chunk on any rank
      holds every rank's MoE layers, so that share is dp times a rank's own;
    * throughput = running sequences x output tokens / end-to-end.
    """

    clients: int
    running: int
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    requests_per_s: float
    output_tokens_per_s: float
    preprocess_ms: float
    wait_for_step_ms: float
    queue_ms: float
    slot_wait_ms: float
    prefill_ms: float
    decode_step_ms: float
    prefill_step_ms: float
    prefill_step_share: float
    decoding: float  # sequences decoding in a step on average (the others are in their TTFT)
    saturated: bool  # the prefill budget cannot keep up: the rate is the budget's
    ttft_p95_ms: float = 0.0  # the queue's p95 and the step in flight's for the means
    tpot_p95_ms: float = 0.0  # the long step when more than 5 % of steps carry a prefill chunk
    tpot_p99_ms: float = 0.0  # ... when more than 1 % do
    label: str = "closed loop"


class _LoopState(NamedTuple):
    """One pass of the closed loop's fixed point (seconds): what a request of the loop sees when
    the others take ``ttft`` and ``tpot``."""

    ttft_s: float
    tpot_s: float
    queue_s: float  # the wait for prefill budget behind the other clients' prompts
    queue_p95_s: float
    wait_s: float  # the rest of the step running when the request reaches the scheduler
    wait_p95_s: float
    own_s: float  # its own prefill steps
    decode_s: float  # a decode-only step of the decoding sequences
    chunk_step_s: float  # a step carrying another prompt's chunk
    share: float  # of the steps that carry one
    decoding: float  # sequences decoding in a step
    saturated: bool


def batch_wait_steps(iters: int, ratio: float, budget_tokens: int, prompt_tokens: int, decoding: float, arrivals_per_step: float) -> tuple[float, float]:
    """(mean, p95) decode steps a new prompt is held by TensorRT-LLM's batch waiting while
    ``decoding`` sequences decode and other prompts arrive at ``arrivals_per_step``.

    TensorRT-LLM (PyExecutor._waiting_requests, applied when generation requests are scheduled
    and attention DP is off) holds the scheduled context requests while its counter is below
    ``batch_wait_timeout_iters`` and the scheduled tokens (the held prompts' plus one per
    decoding sequence) stay below ``batch_wait_max_tokens_ratio`` x max_num_tokens; the counter
    counts the iterations it held and resets when it lets them go. The first prompt of a window so
    waits the whole window W: ``iters`` steps, or less when enough prompts arrive to reach the
    token threshold first; the k = arrivals x W that arrive during it wait W / 2 on average, so a
    prompt waits W (1 + k / 2) / (1 + k) on average and W at the p95. 0 iterations: no waiting
    (the counter already meets the timeout)."""
    if iters <= 0:
        return 0.0, 0.0
    window = float(iters)
    if ratio > 0:
        held = math.ceil(max(0.0, ratio * budget_tokens - decoding) / max(1, prompt_tokens))  # prompts that reach the threshold, the first included
        if held <= 1:
            return 0.0, 0.0
        if arrivals_per_step > 0:
            window = min(window, (held - 1) / arrivals_per_step)
    k = arrivals_per_step * window
    return window * (1.0 + k / 2.0) / (1.0 + k), window


def _closed_pass(mix: _Mix, run: int, out_tokens: int, budget_tokens: int, pre: float, ttft: float, tpot: float, queue_s: float, recv: int = 1, batch_wait: tuple[int, float] = (0, 0.0)) -> _LoopState:
    """One update of :func:`closed_loop`'s fixed point from the current TTFT, TPOT and queue: the
    other requests decoding beside an arriving prompt (their share of a cycle spent decoding),
    its own prefill, the wait for the scheduler to look for it (the step in flight, or the
    ``recv`` decode steps between its polls) and for the budget, and the share of decode steps
    that carry another prompt's chunk (dp times a rank's own under attention data parallelism:
    every MoE layer waits for the slowest rank).

    A request reaches the scheduler ``pre`` after the step that ended its client's last request.
    A scheduler that polls every step (recv 1) takes it when the step in flight ends: d - pre
    later while ``pre`` is shorter than a step d, else half a step on average. One that polls
    every ``recv`` decode steps (SGLang's ``--scheduler-recv-interval``, whose counter a finished
    request leaves at any phase) waits a further 0..recv - 1 steps, (recv - 1) / 2 on average.
    TensorRT-LLM's batch waiting (``batch_wait``) holds it further while others decode
    (:func:`batch_wait_steps`, the other clients arriving once an end-to-end each)."""
    e2e = ttft + (out_tokens - 1) * tpot
    frac = (out_tokens - 1) * tpot / e2e if e2e > 0 else 1.0  # share of a request's cycle spent decoding
    others = (run - 1) * frac  # the other requests decoding at any moment (beside an arriving prompt)
    decoding = 1.0 + others  # ... and in a step of a decoding request
    own = mix.own_prefill(others, budget_tokens)
    d_others = mix.step(0, others)
    polls = (recv - 1) * d_others  # the steps between two polls beyond the step in flight
    wait = polls / 2.0 + max(d_others / 2.0, d_others - pre) if others >= 0.5 else 0.0
    wait_p95 = 0.95 * polls + max(0.95 * d_others, d_others - pre) if others >= 0.5 else 0.0
    if batch_wait[0] and others >= 0.5 and e2e > 0:
        held, held_p95 = batch_wait_steps(batch_wait[0], batch_wait[1], budget_tokens, mix.new, others, (run - 1) / e2e * d_others)
        wait, wait_p95 = wait + held * d_others, wait_p95 + held_p95 * d_others
    unqueued = pre + wait + own.own_s + (out_tokens - 1) * tpot
    service = own.service_s  # the budget's seconds per prompt
    if run * service >= unqueued:  # the budget cannot keep up: arrivals run at its rate
        saturated, queue_new = True, run * service - unqueued
        queue_p95 = queue_new
    else:  # the other clients' prompts queue for the budget (M/D/1): a lone client never waits
        saturated = False
        rho = (run - 1) / (unqueued + queue_s) * service
        queue_new, queue_p95 = queue_wait(min(rho, 0.999), service)
    rate_others = (run - 1) / max(unqueued + queue_new, 1e-12)  # other prompts a second
    d = mix.step(0, decoding)
    chunk_step = mix.step(min(mix.new, max(1, budget_tokens - int(round(decoding)))), decoding)
    share = min(1.0, mix.roof.dp * rate_others * max(1, own.chunks) * tpot)
    return _LoopState(pre + wait + queue_new + own.own_s, d + share * (chunk_step - d), queue_new, queue_p95, wait, wait_p95, own.own_s, d, chunk_step, share, decoding, saturated)


CLOSED_LOOP_PASSES = 120  # most passes of the fixed point (where the prefill budget saturates the map can jump between two states: the last pass stands)


@_per_roofline
def closed_loop(
    roof: Roofline,
    prompt_tokens: int,
    cached: int,
    generated: int,
    clients: int,
    kv_mid: float,
    mid: int,
    budget_tokens: int = DEFAULT_BATCH_TOKENS,
    max_running: int | None = None,
    api_server: bool = True,
    preprocess_s: float | None = None,
    recv_interval: int = 1,
    batch_wait: tuple[int, float] = (0, 0.0),
) -> ClosedLoop:
    """:class:`ClosedLoop` figures for ``clients`` concurrent clients on one replica (``kv_mid``:
    K/V bytes one sequence holds at the mean decode context ``mid``); ``max_running``: the engine's
    limit on running sequences (clients beyond it wait for a slot); ``api_server``: count the API
    server's preprocessing (False for an offline benchmark that feeds the engine directly);
    ``preprocess_s``: a measured preprocessing time instead of the engine's fitted API server cost;
    ``recv_interval``: decode steps between the scheduler's polls for new requests (1: every step,
    the engines' default; SGLang's ``--scheduler-recv-interval``); ``batch_wait``: TensorRT-LLM's
    (batch_wait_timeout_iters, batch_wait_max_tokens_ratio), (0, 0.0) off.

    The TTFT, TPOT and queue are the fixed point of :func:`_closed_pass`."""
    n = max(1, clients)
    run = max(1, min(n, max_running or n))
    out_tokens = max(1, generated)
    pre = preprocess_s if preprocess_s is not None else (api_preprocess_s(roof.eff, prompt_tokens) if api_server else 0.0)
    s, ttft, tpot, queue_s = _closed_fixed_point(roof, prompt_tokens, cached, out_tokens, run, kv_mid, mid, budget_tokens, pre, max(1, recv_interval), tuple(batch_wait))
    return _closed_result(s, n, run, out_tokens, pre, ttft, tpot, queue_s)


@_per_roofline
def _closed_fixed_point(roof: Roofline, prompt_tokens: int, cached: int, out_tokens: int, run: int, kv_mid: float, mid: int, budget_tokens: int, pre: float, recv: int = 1, batch_wait: tuple[int, float] = (0, 0.0)) -> tuple:
    """The converged pass of :func:`closed_loop` for ``run`` running requests, and its TTFT, TPOT
    and queue. Memoised by the running count, not the clients: clients beyond the engine's limit
    only wait for a slot, so a search that probes many loads above the limit solves it once."""
    mix = _Mix(roof, prompt_tokens, cached, kv_mid, mid)
    ttft, tpot, queue_s = pre + roof.prefill_s(mix.new, cached), roof.decode_step_s(run, kv_mid, mid), 0.0
    damp, last = 1.0, math.inf  # plain iteration while it contracts; the step halves whenever a pass moves farther than the one before
    for _ in range(CLOSED_LOOP_PASSES):
        s = _closed_pass(mix, run, out_tokens, budget_tokens, pre, ttft, tpot, queue_s, recv, batch_wait)
        moved = max(abs(s.ttft_s - ttft) / max(1.0, ttft), abs(s.tpot_s - tpot) / max(1.0, tpot))
        if moved <= 1e-9:
            break
        if moved >= last:
            damp = max(damp / 2.0, 1.0 / 16.0)
        last = moved
        ttft, tpot, queue_s = ttft + damp * (s.ttft_s - ttft), tpot + damp * (s.tpot_s - tpot), s.queue_s
    return s, ttft, tpot, queue_s


def _closed_result(s: _LoopState, n: int, run: int, out_tokens: int, pre: float, ttft: float, tpot: float, queue_s: float) -> ClosedLoop:
    """The :class:`ClosedLoop` of the converged pass ``s``: clients beyond the running limit wait
    for a slot (a whole end-to-end per running turn); the p95s swap the mean queue for its p95 and
    the mean step for the long one when more than 5 % of steps carry a chunk."""
    e2e_run = ttft + (out_tokens - 1) * tpot
    slot_wait = e2e_run * (n - run) / run  # clients beyond the running limit wait for a slot
    rate = run / e2e_run
    tpot_p95 = step_quantile(P95_Z, s.share, s.decode_s, s.chunk_step_s)
    ttft_p95 = ttft + max(0.0, s.queue_p95_s - queue_s) + (s.wait_p95_s - s.wait_s)
    return ClosedLoop(
        clients=n,
        running=run,
        ttft_ms=(ttft + slot_wait) * 1e3,
        tpot_ms=tpot * 1e3,
        e2e_ms=(e2e_run + slot_wait) * 1e3,
        requests_per_s=rate,
        output_tokens_per_s=rate * out_tokens,
        preprocess_ms=pre * 1e3,
        wait_for_step_ms=s.wait_s * 1e3,
        queue_ms=queue_s * 1e3,
        slot_wait_ms=slot_wait * 1e3,
        prefill_ms=s.own_s * 1e3,
        decode_step_ms=s.decode_s * 1e3,
        prefill_step_ms=s.chunk_step_s * 1e3,
        prefill_step_share=s.share,
        decoding=s.decoding,
        saturated=s.saturated,
        ttft_p95_ms=(ttft_p95 + slot_wait) * 1e3,
        tpot_p95_ms=max(tpot_p95, s.decode_s) * 1e3,
        tpot_p99_ms=max(step_quantile(P99_TAIL, s.share, s.decode_s, s.chunk_step_s), s.decode_s) * 1e3,
    )


@dataclass(frozen=True, slots=True)
class Offline(Result):
    """An offline max-throughput run: ``requests`` requests queued at once, the engine running at
    most ``running`` of them (trtllm-bench throughput, vLLM's benchmark_throughput). Labelled
    "offline": every figure is the run's whole (ms; rates per replica)."""

    requests: int
    running: int  # sequences in flight in a full wave
    waves: float  # requests / running
    duration_ms: float
    output_tokens_per_s: float
    ttft_ms: float  # a request's own wait, prefill and first token inside its wave
    tpot_ms: float
    label: str = "offline"


def offline(
    roof: Roofline, prompt_tokens: int, cached: int, generated: int, requests: int, max_running: int, kv_mid: float, mid: int, budget_tokens: int = DEFAULT_BATCH_TOKENS
) -> Offline:
    """:class:`Offline` figures: the requests run in waves of the engine's admission ``max_running``
    (memory, max batch); equal-length requests of one wave finish together, so the run takes
    k = floor(requests / running) full waves, each as long as a request's end-to-end at that
    concurrency in a closed loop (:func:`closed_loop` without an API server), plus a last partial
    wave of the rest. Throughput = requests x output tokens / that duration."""
    n = max(1, requests)
    run = max(1, min(n, max_running))
    full, rest = divmod(n, run)
    wave = closed_loop(roof, prompt_tokens, cached, generated, run, kv_mid, mid, budget_tokens, None, False)
    last = closed_loop(roof, prompt_tokens, cached, generated, rest, kv_mid, mid, budget_tokens, None, False) if rest else None
    duration = full * wave.e2e_ms + (last.e2e_ms if last else 0.0)
    return Offline(
        requests=n,
        running=run,
        waves=n / run,
        duration_ms=duration,
        output_tokens_per_s=n * max(1, generated) / (duration / 1e3),
        ttft_ms=wave.ttft_ms,
        tpot_ms=wave.tpot_ms,
    )


@dataclass(frozen=True, slots=True)
class OpenLoop(Result):
    """Poisson arrivals at ``rate_per_s`` requests a second on one replica (what a production
    front end and the simulator send): the requests in flight follow from Little's law (rate x
    end-to-end, solved with the served latency at that load, :func:`served`). Labelled "open loop
    (Poisson)" (ms; rates per replica)."""

    rate_per_s: float
    in_flight: int  # requests in flight: the smallest n with n >= rate x end-to-end at n
    sustainable: bool  # False: the rate needs more than ``max_in_flight`` requests in flight, or the prefill cannot keep up
    ttft_ms: float  # preprocessing + the wait behind other prompts + the prefill
    ttft_p95_ms: float
    tpot_ms: float
    tpot_p95_ms: float
    e2e_ms: float
    output_tokens_per_s: float
    preprocess_ms: float
    tpot_p99_ms: float = 0.0
    label: str = "open loop (Poisson)"


def open_loop(
    roof: Roofline,
    prompt_tokens: int,
    cached: int,
    generated: int,
    rate_per_s: float,
    kv_mid: float,
    mid: int,
    budget_tokens: int = DEFAULT_BATCH_TOKENS,
    max_in_flight: int | None = None,
    api_server: bool = True,
    preprocess_s: float | None = None,
    recv_interval: int = 1,
    batch_wait: tuple[int, float] = (0, 0.0),
) -> OpenLoop:
    """:class:`OpenLoop` figures at ``rate_per_s`` on one replica: n = ceil(rate x end-to-end(n))
    iterated from one request (the least fixed point; end-to-end grows with n), at most
    ``max_in_flight`` (the engine's admission: beyond it requests queue without bound);
    ``recv_interval`` and ``batch_wait`` as in :func:`poisson_at`."""
    out = max(1, generated)
    pre = preprocess_s if preprocess_s is not None else (api_preprocess_s(roof.eff, prompt_tokens) if api_server else 0.0)
    cap = max(1, max_in_flight or 10_000_000)
    n, fig = 1, poisson_at(roof, prompt_tokens, cached, out, 1, kv_mid, mid, budget_tokens, pre, recv_interval, batch_wait)
    for _ in range(200):
        need = max(1, math.ceil(rate_per_s * fig.e2e_ms / 1e3 - 1e-9))
        if need <= n or n >= cap:
            break
        n = min(cap, need)
        fig = poisson_at(roof, prompt_tokens, cached, out, n, kv_mid, mid, budget_tokens, pre, recv_interval, batch_wait)
    sustainable = fig.sustainable and math.ceil(rate_per_s * fig.e2e_ms / 1e3 - 1e-9) <= n
    return replace(fig, rate_per_s=rate_per_s, sustainable=sustainable, output_tokens_per_s=rate_per_s * out if sustainable else fig.output_tokens_per_s)


def poisson_at(roof: Roofline, prompt_tokens: int, cached: int, generated: int, in_flight: int, kv_mid: float, mid: int, budget_tokens: int, preprocess_s: float, recv_interval: int = 1, batch_wait: tuple[int, float] = (0, 0.0)) -> OpenLoop:
    """:class:`OpenLoop` figures with ``in_flight`` requests in flight under Poisson arrivals
    (:func:`served`; the rate is Little's, in flight / end-to-end): TTFT = preprocessing + the
    wait behind other prompts (steady state) + the prefill alone, TPOT the served ITL.
    ``recv_interval`` R: decode steps between the scheduler's polls for new requests (SGLang's
    ``--scheduler-recv-interval``); an arrival while the others decode waits (R - 1) / 2 of their
    steps more on average (0.95 (R - 1) at the p95), as in :func:`closed_loop`; ``batch_wait``:
    TensorRT-LLM's batch waiting (:func:`batch_wait_steps`, arrivals at the rate of the figures
    without it)."""
    out = max(1, generated)
    s = served(roof, prompt_tokens, cached, out, in_flight, kv_mid, mid, budget_tokens)
    pre_ms = preprocess_s * 1e3
    polls_ms = (recv_interval - 1) * roof.decode_step_s(in_flight - 1, kv_mid, mid) * 1e3 if recv_interval > 1 and in_flight > 1 else 0.0
    s = replace(s, wait_ms=s.wait_ms + polls_ms / 2.0, wait_p95_ms=s.wait_p95_ms + 0.95 * polls_ms) if polls_ms else s
    if batch_wait[0] and in_flight > 1:
        step_ms = roof.decode_step_s(in_flight - 1, kv_mid, mid) * 1e3
        arrivals = in_flight / (pre_ms + s.prefill_one_ms + s.wait_ms + (out - 1) * s.itl_ms) * step_ms  # prompts a decode step
        held, held_p95 = batch_wait_steps(batch_wait[0], batch_wait[1], budget_tokens, prompt_tokens - cached, in_flight - 1, arrivals)
        s = replace(s, wait_ms=s.wait_ms + held * step_ms, wait_p95_ms=s.wait_p95_ms + held_p95 * step_ms)
    e2e = pre_ms + s.prefill_one_ms + s.wait_ms + (out - 1) * s.itl_ms
    return OpenLoop(
        rate_per_s=in_flight / (e2e / 1e3) if e2e > 0 else 0.0,
        in_flight=max(1, in_flight),
        sustainable=not s.saturated,
        ttft_ms=pre_ms + s.wait_ms + s.prefill_one_ms,
        ttft_p95_ms=pre_ms + s.wait_p95_ms + s.prefill_one_ms,
        tpot_ms=s.itl_ms,
        tpot_p95_ms=s.itl_p95_ms,
        tpot_p99_ms=s.itl_p99_ms,
        e2e_ms=e2e,
        output_tokens_per_s=max(1, in_flight) * out / (e2e / 1e3) if e2e > 0 else 0.0,
        preprocess_ms=pre_ms,
    )


def estimate(
    roof: Roofline,
    prompt_tokens: int,
    cached_prompt_tokens: float,
    generated_tokens: int,
    sequences: int,
    kv_bytes_at: callable,  # tokens -> K/V bytes one sequence holds
    queue_ms: float = 0.0,
    preprocessing_ms: float = 0.0,
    load: Served | None = None,
) -> LatencyReport:
    """Roofline latency by phase for one request among ``sequences`` concurrent ones.

    The prefill covers the prompt minus the expected cached prefix; the decode steps use the
    mean context (prompt + half the output) and the K/V every active sequence holds then. With
    ``load`` (:func:`served`), the queue includes the wait behind the other prompts and the ITL
    the prefill chunks mixed into decode steps.
    """
    cached = int(cached_prompt_tokens)
    prefill = roof.prefill_s(prompt_tokens - cached, cached) * 1000.0
    first = roof.decode_step_s(sequences, kv_bytes_at(prompt_tokens + 1), prompt_tokens + 1) * 1000.0
    mid = prompt_tokens + generated_tokens // 2
    itl = load.itl_ms if load else roof.decode_step_s(sequences, kv_bytes_at(mid), mid) * 1000.0
    queue_ms += load.wait_ms if load else 0.0
    remaining = itl * (generated_tokens - 1)
    ttft = queue_ms + preprocessing_ms + prefill + first
    return LatencyReport(
        source="roofline estimate",
        queue_ms=queue_ms,
        preprocessing_ms=preprocessing_ms,
        prefill_ms=prefill,
        first_decode_ms=first,
        remaining_decode_ms=remaining,
        time_to_first_token_ms=ttft,
        prefill_tokens_per_second=(prompt_tokens - cached) / (prefill / 1000.0) if prefill else 0.0,
        output_tokens_per_second=generated_tokens / ((first + remaining) / 1000.0),
        mean_inter_token_latency_ms=itl if generated_tokens > 1 else 0.0,
        end_to_end_ms=ttft + remaining,
    )


TERM_LABELS = {
    "dense_gemm": "dense GEMMs",
    "lm_head": "LM head",
    "moe": "MoE experts",
    "attention": "attention",
    "allreduce": "all-reduce",
    "alltoall": "all-to-all",
    "other": "norms and activations",
    "runtime": "engine host work",
    "pipeline": "pipeline hand-offs",
}


def formula_lines(roofline, roof: Roofline, calibrated: bool = False) -> list[str]:
    """Every term of the roofline estimate with this plan's numbers, as plain text lines (the
    latency steps of :func:`planner.explain.formula_steps`). ``roofline``: the plan's
    :class:`~planner.plan.sections.RooflineSection` (:attr:`Plan.roofline`)."""
    r, e = roofline, roof.eff

    def terms(d: dict[str, float]) -> str:
        return " + ".join(f"{TERM_LABELS.get(k, k)} {v:,.3f}" for k, v in d.items()) + f" = {sum(d.values()):,.3f} ms"

    at_n = r.load_label + ("" if r.load_admitted else " (not admitted)")
    out = [
        f"step model: peak {r.peak_tflops:,.0f} TFLOP/s"
        + (f" x this GPU's measured compute efficiency {roof.compute_scale:g} (below, peak includes it)" if roof.compute_scale != 1 else "")
        + f" x MFU {r.mfu:g}, HBM {r.bandwidth_gb_s:,.0f} GB/s x MBU {r.mbu:g}, "
        f"link {r.link_gb_s:,g} GB/s per direction + {r.link_latency_us:g} us a message, TP {roof.tp}, EP {roof.ep}; each term = max(compute, memory) + fixed cost"
        + (" (MFU/MBU from a probe calibration: they rescale the GEMM, MoE and attention compute and the weight and K/V reads; fixed costs and communication stay)" if calibrated else ""),
        f"dense GEMMs = max({roof.weights_bytes - roof.expert_bytes - roof.lm_head_bytes - roof.unread_bytes:,.0f} B / (BW x MBU), 2 x params x T / (peak x MFU x T / (T + {e.gemm_tokens_half:g}))) + {roof.layers} layers x {e.gemm_layer_s * 1e6:.2f} us",
        f"LM head = max({roof.lm_head_bytes:,.0f} B / (BW x MBU), 2 x {roof.lm_head_params:,.0f} params x logits / (peak x MFU)); logits: the last prompt token in a prefill, every sequence in a decode",
    ]
    fs = f" x {roof.fixed_scale:g} (software stack)" if roof.fixed_scale != 1 else ""
    if roof.expert_bytes:
        kernel = f" x {roof.moe_kernel:g} (the weight format's kernel)" if roof.moe_kernel != 1 else ""
        tokens = f"{roof.dp} x T (the {roof.dp} data-parallel ranks' tokens)" if roof.dp > 1 else "T"
        out.append(
            f"MoE = max({roof.expert_bytes:,.0f} B x (1 - (1 - {roof.experts_per_token}/{roof.num_experts})^{tokens}) / (BW x MBU x {e.moe_mbu:g}), expert FLOPs / (peak x MFU x {e.moe_mfu:g} x {roof.moe_scale:g}{kernel} x r / (r + {e.moe_tokens_per_expert_half:g}) x n / (n + {e.moe_width_half:g}))) "
            f"+ {roof.moe_layers} layers x ({e.moe_layer_s * 1e6:.2f} us + {e.serve_moe_layer_s * 1e6:.2f} us routing and dispatch as served{fs}); r = tokens per touched expert (at least {e.moe_tile:g}), n = expert width on this GPU {roof.expert_width:,.0f}"
        )
    mla = f" + {roof.mla_layers} MLA layers x {e.mla_layer_s * 1e6:.2f} us (latent up-projections, absorbed BMMs){fs}" if roof.mla_layers and e.mla_layer_s else ""
    out.append(
        f"attention = max(K/V read / (BW x MBU x {e.attn_mbu:g}), FLOPs / (peak x MFU x {e.attn_mfu:g} x P / (P + {e.attn_tokens_half:g}))) + {roof.attn_layers} layers x {e.attn_layer_s * 1e6:.2f} us{mla}; K/V read = what each sequence holds (windows and latents included), P = prompt tokens"
    )
    if roof.tp > 1:
        out.append(
            f"all-reduce = {2 * roof.layers - (roof.moe_layers if roof.ep > 1 and roof.dp > 1 else 0)} x ({r.link_latency_us:g} us + 2 x ({roof.tp} - 1) / {roof.tp} x T x {roof.hidden:,} x {roof.act_bytes} B / (link x {e.link_efficiency:g}))"
        )
    if roof.ep > 1 and roof.dp > 1 and roof.expert_bytes:
        out.append(
            f"all-to-all = 2 x {roof.moe_layers} x ({r.link_latency_us:g} us + T x {roof.experts_per_token} x {roof.hidden:,} x {roof.act_bytes} B x ({roof.ep} - 1) / {roof.ep} / (link x {e.link_efficiency:g}))"
        )
    out.append(
        f"norms and activations = {roof.layers} layers x ({e.layer_s * 1e6:.2f} us + {e.serve_layer_s * 1e6:.2f} us between a real run's kernels"
        + (f" + {roof.format_layer_s * 1e6:.2f} us the weight format's GEMV kernels" if roof.format_layer_s else "")
        + f"{fs} + T x {roof.layer_width:,.0f} x {roof.act_bytes} B x {e.elementwise_passes:g} / BW)"
    )
    if e.step_s or e.seq_s:
        out.append(f"engine host work = ({e.step_s * 1e3:.3f} ms a step + {e.seq_s * 1e6:.2f} us x sequences producing a token){fs} (scheduling, input preparation, sampling, output processing; fitted to published runs, docs/serving_fit.md)")
    return out + _load_lines(r, roof, at_n, terms)


def _load_lines(r, roof: Roofline, at_n: str, terms) -> list[str]:
    """formula_lines' second half: the deployment's shape, the steps at the load, the load model
    (closed or open loop), speculation, throughput and the accuracy bands."""
    e, out = roof.eff, []
    if roof.dp > 1:
        out.append(f"attention data parallel: {roof.dp} ranks of TP {roof.tp}, each with the dense and attention weights of its TP share and 1/{roof.ep} of the experts; every MoE layer serves the {roof.dp} ranks' tokens and waits for the slowest")
    if roof.pp > 1:
        out.append(
            f"pipeline: {roof.pp} stages of {roof.layers} layers; a step's sequences run as {roof.pp} micro-batches, so a token's step = {roof.pp} stage steps of its micro-batch + {roof.pp - 1} hand-offs "
            f"({roof.pp_link_latency_s * 1e6:g} us + micro-batch x {roof.hidden:,} x {roof.act_bytes} B / {roof.pp_link_bytes_s / 1e9:,g} GB/s)"
        )
    out.append(f"prefill at 1 request = {terms(r.prefill_terms_ms)}")
    out.append(f"decode step {at_n} (T = {r.decode_concurrency:,}) = {terms(r.decode_terms_ms)}; at 1 request {r.itl_ms_at_1_request:,.3f} ms")
    share = f"{r.prefill_step_share:.1%} of steps carry a prefill chunk" + (" (more than 5 % of steps are long: the p95 gap is such a step)" if r.prefill_step_share > 0.05 else " (at most 5 %: the p95 gap is a decode-only step)")
    if r.load_kind == "closed loop":
        out.append(
            f"{at_n}: each client sends its next request when the last finishes; TTFT = API preprocessing (fitted, {e.api_s * 1e3:.2f} ms + {e.api_token_s * 1e6:.2f} us a prompt token, or the given) "
            f"+ the rest of the step in flight + the M/D/1 wait for the {r.max_batched_tokens:,}-token budget behind the other clients' prompts + the own prefill beside their decodes "
            f"(+ a slot when clients exceed the running limit): {r.prefill_wait_ms:,.1f} ms over the prefill alone, p95 TTFT {r.ttft_p95_ms:,.1f} ms"
            + (" — SATURATED: the budget cannot keep up, requests arrive at its rate" if r.prefill_saturated else "")
        )
        out.append(f"TPOT {at_n} = decode-only step {r.itl_ms_decode_only:,.3f} ms, and {share}: mean {r.itl_ms_at_concurrency:,.3f} ms, p95 {r.itl_p95_ms:,.3f} ms")
    else:
        out.append(
            f"{at_n}: Poisson arrivals, in flight = rate x end-to-end (Little); wait behind other prompts = own prefill beside the other decodes - prefill at 1 request + half a step in flight + M/D/1 queue for the "
            f"{r.max_batched_tokens:,}-token budget (utilisation {r.prefill_utilisation:.2f}; mean rho S / (2 (1 - rho)), p95 (W / rho) ln(rho / 0.05)) "
            f"= {r.prefill_wait_ms:,.1f} ms mean, {r.prefill_wait_p95_ms:,.1f} ms p95 (p95 TTFT {r.ttft_p95_ms:,.1f} ms)"
            + (" — NOT SUSTAINABLE: the prefill cannot keep up with the arrivals" if r.prefill_saturated else "")
        )
        out.append(
            f"ITL {at_n} = decode-only step {r.itl_ms_decode_only:,.3f} ms, and {share} (N x prompt / output = {r.mixed_prefill_tokens_per_step:,.0f} prefill tokens a step over chunks of {r.prefill_chunk_tokens:,}): "
            f"mean {r.itl_ms_at_concurrency:,.3f} ms, p95 {r.itl_p95_ms:,.3f} ms"
        )
    out.append(
        f"worst moment, all {r.decode_concurrency:,} prompts at once: {r.prefill_steps:,.2f} steps on average (mean ceil(k x prompt / budget), k = 1..N), "
        f"wait {r.burst_wait_ms:,.1f} ms mean, {r.burst_wait_max_ms:,.1f} ms for the last"
    )
    if r.spec_method != "none":
        out.append(
            f"speculative decoding ({r.spec_method}, {r.spec_tokens} drafts a step, acceptance length {r.spec_acceptance_length:.2f}): a step drafts K tokens and verifies K + 1 per sequence, "
            f"TPOT = (draft + verify) / acceptance length = {r.spec_speedup:.2f}x faster than plain decoding at this batch"
        )
    out.append(
        f"throughput {at_n}: {r.output_tokens_per_second:,.0f} output tokens/s ({r.output_tokens_per_second_per_gpu:,.1f} a GPU); "
        f"{r.max_throughput_label}: {r.max_throughput_tokens_per_second_per_gpu:,.1f} a GPU (every admissible sequence running, no API server)"
    )
    if r.accuracy:
        out.append("accuracy on published runs like this one (planner / measured): " + "; ".join(f"{k} {v}" for k, v in r.accuracy.items()))
    return out


# --------------------------------------------------------------------------- work counts


def attention_flops_per_step(context: int, d_model: int) -> tuple[int, int]:
    """One layer's attention FLOPs at one decode step: (without cache 4 n^2 d, with cache 4 n d)."""
    return 4 * context * context * d_model, 4 * context * d_model


def cumulative_projection_flops(generated: int, d_model: int) -> tuple[int, int]:
    """One layer's QKV projection FLOPs over a generation: (naive 3 d^2 N(N+1), cached 6 d^2 N)."""
    return 3 * d_model * d_model * generated * (generated + 1), 6 * d_model * d_model * generated


def layer_operations(d: int, steps: int) -> tuple[int, int]:
    """Multiply-adds of one attention layer over ``steps`` steps: (without cache, with cache).

    Step t costs 4 t d^2 + 2 t^2 d without a cache (re-project and attend all t tokens) and
    4 d^2 + 2 t d with one (project the new token, attend the t cached ones).
    """
    no_cache = sum(4 * t * d * d + 2 * t * t * d for t in range(1, steps + 1))
    with_cache = sum(4 * d * d + 2 * t * d for t in range(1, steps + 1))
    return no_cache, with_cache


def generation_projections(prompt: int, generated: int) -> tuple[int, int]:
    """Token projections to generate ``generated`` tokens after a ``prompt``: (naive, cached).

    Without a cache each forward re-projects every position (P, P+1, ..., P+N-1); with one,
    the prefill projects P and each later step only its one new token (the first new token
    comes from the prefill).
    """
    naive = generated * prompt + generated * (generated - 1) // 2  # P + (P+1) + ... + (P+N-1)
    return naive, prompt + generated - 1


def feed_projections(prompt: int, fed: int) -> tuple[int, int]:
    """Projections when ``fed`` new tokens are all fed back: (naive 1 + 2 + ... + (P+F), cached P + F)."""
    n = prompt + fed
    return n * (n + 1) // 2, n
