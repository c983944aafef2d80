"""Speculative decoding as production engines run it: MTP, EAGLE-3 and draft models.

Each engine step a proposer drafts ``K`` tokens per sequence, then the target model verifies them
in one step over K + 1 tokens per sequence (every draft plus the bonus token); the accepted
prefix and the bonus token are kept. So a step costs the drafting plus a verify step of
c x (K + 1) tokens, and emits on average the *acceptance length* tau(K) = 1 + sum of the
probabilities that draft positions 1..K are accepted, per sequence:

* TPOT = (draft + verify) / tau;  throughput = c x tau / (draft + verify).

Proposers:

* ``mtp``: the model's own multi-token-prediction layer(s) (DeepSeek-V3/R1, GLM-4.5+, Qwen3-Next,
  MiMo): one decoder layer and the shared LM head per drafted token (vLLM reuses its one MTP layer
  for K > 1, vllm PR #13626). Its weights are the MTP layer; its K/V one more layer per sequence
  (what PlanInputs ``mtp`` already counts in the K/V).
* ``eagle3``: an EAGLE-3 head (one dense decoder layer over the target's fused low/mid/high
  features, with its own LM head): one dense layer and an LM head per drafted token.
* ``draft``: a separate small model, K of its decode steps per engine step (its own step model).

Default acceptance per method comes from published measurements (``METHODS``, each sourced); a
measured acceptance length overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.latency import Roofline
from planner.results import Result


@dataclass(frozen=True, slots=True)
class SpecMethod:
    """A proposer and its published acceptance: ``accepted[i]`` = probability that draft position
    i + 1 is accepted (cumulative: all positions before it accepted too). Beyond the listed
    positions each further one keeps the last ratio between neighbours (the i.i.d. acceptance of
    Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding")."""

    name: str
    label: str
    default_tokens: int
    accepted: tuple[float, ...]
    source: str

    def position(self, i: int) -> float:
        """P(draft position i, 1-based, is accepted)."""
        a = self.accepted
        if i <= len(a):
            return a[i - 1]
        ratio = a[-1] / a[-2] if len(a) > 1 else a[0]
        return a[-1] * ratio ** (i - len(a))


METHODS: dict[str, SpecMethod] = {
    m.name: m
    for m in (
        SpecMethod(
            name="mtp",
            label="MTP (the model's multi-token-prediction layer)",
            default_tokens=1,
            accepted=(0.875,),
            source="DeepSeek-V3 technical report (arXiv 2412.19437, section 5.4.3): the second token is accepted 85-90 % of the time (midpoint 0.875); "
            "SGLang's MTP for DeepSeek-V3/R1 measured an acceptance length of about 1.9 with one draft token (sgl-project/sglang PR #3582); "
            "further positions at the same ratio (i.i.d. acceptance, an upper estimate)",
        ),
        SpecMethod(
            name="eagle3",
            label="EAGLE-3 (one-layer draft head)",
            default_tokens=3,
            accepted=(0.73, 0.52, 0.35),
            source="vLLM's EAGLE-3 acceptance regression test (vllm-project/vllm PR #32030, MT-bench, 3 draft tokens): Llama-3.1-8B-Instruct with "
            "RedHatAI's speculator, per-position acceptance 0.73, 0.52, 0.35 (mean acceptance length 2.60); Qwen3-8B 0.65, 0.40, 0.20; gpt-oss-20b 0.72, 0.51, 0.32",
        ),
        SpecMethod(
            name="draft",
            label="a separate draft model",
            default_tokens=4,
            accepted=(0.7,),
            source="Leviathan et al. 2023 (arXiv 2211.17192), table 3: per-token acceptance alpha 0.5-0.9 across their target/draft pairs; 0.7 taken "
            "as a typical same-family pair (e.g. Llama-3.2-1B drafting for Llama-3.1-8B); i.i.d. positions",
        ),
    )
}


def method(name: str) -> SpecMethod:
    """The proposer by name.

    Raises:
        PlannerError: an unknown method.
    """
    if name not in METHODS:
        raise PlannerError("spec_method", name, f"unknown speculative method; choose one of {', '.join(METHODS)}")
    return METHODS[name]


def acceptance_length(name: str, tokens: int) -> float:
    """Mean tokens a verify step emits per sequence with ``tokens`` drafts: 1 (the bonus token)
    + the acceptance probability of each draft position.

    Raises:
        PlannerError: an unknown method or fewer than one draft token.
    """
    if tokens < 1:
        raise PlannerError("spec_tokens", tokens, "must be at least 1 draft token")
    m = method(name)
    return 1.0 + sum(m.position(i) for i in range(1, tokens + 1))


@dataclass(frozen=True, slots=True)
class Speculative(Result):
    """A decode step with speculative decoding at ``sequences`` sequences (ms; rates per replica)."""

    method: str
    tokens: int  # K drafts per sequence per step
    acceptance_length: float  # tokens each sequence gains per step
    acceptance_source: str
    draft_ms: float  # proposing K tokens for every sequence
    verify_ms: float  # the target's step over sequences x (K + 1) tokens
    step_ms: float
    tpot_ms: float
    tokens_per_s: float
    plain_tpot_ms: float  # the same load without speculation
    speedup: float  # plain TPOT / TPOT


def _layer_share(roof: Roofline, terms: dict[str, float], dense: bool) -> float:
    """Seconds one decoder layer of ``terms`` (a decode step's) costs: the per-layer terms divided
    by the layers; ``dense`` leaves the experts out (an EAGLE head is a dense layer)."""
    per_layer = ("dense_gemm", "attention", "allreduce", "alltoall", "other") + (() if dense else ("moe",))
    return sum(terms.get(k, 0.0) for k in per_layer) / max(1, roof.layers)


def speculative(
    roof: Roofline,
    name: str,
    sequences: int,
    kv_bytes_per_sequence: float,
    context: int,
    tokens: int | None = None,
    accepted_length: float | None = None,
    draft_roof: Roofline | None = None,
    draft_kv_bytes_per_sequence: float = 0.0,
) -> Speculative:
    """:class:`Speculative` figures for ``sequences`` sequences holding ``kv_bytes_per_sequence``
    at ``context`` tokens, with ``tokens`` drafts (the method's default) and an acceptance length
    (``accepted_length``, measured; else the method's published default).

    Draft cost per drafted token: ``mtp`` one decoder layer of the target at the load plus its LM
    head; ``eagle3`` one dense layer (no experts) plus the LM head; ``draft`` one decode step of
    ``draft_roof`` (required). The verify step is the target's step over sequences x (K + 1)
    tokens: every sequence's K/V read once, K + 1 queries attending to it, K + 1 logits.

    Raises:
        PlannerError: an unknown method, K below 1, an acceptance length outside 1..K + 1, or a
            draft model missing its step model.
    """
    m = method(name)
    k = m.default_tokens if tokens is None else tokens
    tau = acceptance_length(name, k) if accepted_length is None else accepted_length
    if not 1.0 <= tau <= k + 1:
        raise PlannerError("spec_acceptance", accepted_length, f"the acceptance length is between 1 and K + 1 = {k + 1} tokens a step")
    c = max(1, sequences)
    span = roof.decode_span(context)
    attn_per_token = 4.0 * span * roof.q_heads * roof.head_dim
    plain = roof.decode_step_s(c, kv_bytes_per_sequence, context)
    if name == "draft":
        if draft_roof is None:
            raise PlannerError("spec_method", name, "a draft model needs its own step model (the draft's config)")
        draft = k * draft_roof.decode_step_s(c, draft_kv_bytes_per_sequence, context)
    else:
        full = roof.decode_terms(c, kv_bytes_per_sequence, context)
        layer = _layer_share(roof, full, dense=name == "eagle3")
        draft = k * (layer + full.get("lm_head", 0.0))
    verify = roof.step_s(c * (k + 1), c * (k + 1), c * kv_bytes_per_sequence, c * (k + 1) * attn_per_token)
    step = draft + verify
    tpot = step / tau
    return Speculative(
        method=name,
        tokens=k,
        acceptance_length=tau,
        acceptance_source="measured (given)" if accepted_length is not None else m.source,
        draft_ms=draft * 1e3,
        verify_ms=verify * 1e3,
        step_ms=step * 1e3,
        tpot_ms=tpot * 1e3,
        tokens_per_s=c * tau / step,
        plain_tpot_ms=plain * 1e3,
        speedup=plain / tpot,
    )


def draft_memory(name: str, hidden: int, intermediate: int, vocab: int, layer_weights_bytes: float, kv_bytes_per_token_per_layer: float, weight_bytes_per_param: float = 2.0, tp: int = 1) -> tuple[float, float]:
    """(draft weights bytes, draft K/V bytes per token) per GPU that speculation adds to the budget.

    * ``mtp``: the MTP layer, as heavy as one target layer (``layer_weights_bytes``, per GPU), and
      one layer of K/V (``kv_bytes_per_token_per_layer``); it shares the target's embedding and
      LM head;
    * ``eagle3``: a dense layer of hidden x (4 hidden + 3 intermediate) params, the 3 hidden x
      hidden fusion of the target's features and its own LM head (vocab x hidden), at
      ``weight_bytes_per_param``, over ``tp`` GPUs; one layer of K/V;
    * ``draft``: 0, 0 here: a draft model is its own plan (its weights and K/V come from its config).

    Raises:
        PlannerError: an unknown method.
    """
    method(name)
    if name == "mtp":
        return layer_weights_bytes, kv_bytes_per_token_per_layer
    if name == "eagle3":
        params = hidden * (4 * hidden + 3 * intermediate) + 3 * hidden * hidden + vocab * hidden
        return params * weight_bytes_per_param / tp, kv_bytes_per_token_per_layer
    return 0.0, 0.0
