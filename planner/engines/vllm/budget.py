"""The memory vLLM will find for its KV cache on one GPU, predicted term by term.

``determine_available_memory`` (vllm/v1/worker/gpu_worker.py) profiles a dummy run and
logs "Available KV cache memory": the requested share of the device less the weights, the
profiling peak, CUDA graphs and non-torch memory. The figures that are not the user's inputs are
estimates or assumptions, each named as such; a probe's measurements replace them.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.common import BudgetTerm, EngineBudget
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.errors import PlannerError
from planner.geometry import ModelGeometry

__all__ = ["CUDA_GRAPH_BYTES", "NCCL_BYTES", "NON_TORCH_BYTES", "SAMPLER_SEQS", "BudgetTerm", "VllmBudget", "predict_budget"]


@dataclass(frozen=True, slots=True)
class VllmBudget(EngineBudget):
    """Predicted "Available KV cache memory" per GPU: requested memory less what start-up takes."""


CUDA_GRAPH_BYTES = 768 << 20  # graphs captured for decode batch sizes up to 512 (vLLM's default list)
NON_TORCH_BYTES = 512 << 20  # CUDA context, cuBLAS workspaces
NCCL_BYTES = 256 << 20  # NCCL buffers once tp > 1
SAMPLER_SEQS = 1024  # vLLM's dummy sampler run: max_num_seqs default of `vllm serve` on H100-class GPUs


def predict_budget(device_bytes: int, utilization: float, weights_bytes: int, geometry: ModelGeometry, *, tp: int = 1, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS, max_num_seqs: int = SAMPLER_SEQS, device_source: str = "", weights_source: str = "", measured: dict[str, int] | None = None) -> VllmBudget:
    """What vLLM's ``determine_available_memory`` will find (vllm/v1/worker/gpu_worker.py):
    ``device x gpu_memory_utilization`` less the weights, the profiling run's peak activations at
    ``max_num_batched_tokens``, CUDA-graph memory and non-torch memory, per GPU.

    ``measured`` (term name -> bytes, e.g. from a probe run on a GPU) replaces the estimates.

    Raises:
        PlannerError: utilization outside (0, 1] or a non-positive device size.
    """
    if not 0 < utilization <= 1:
        raise PlannerError("gpu_memory_utilization", utilization, "must be above 0 and at most 1")
    if device_bytes <= 0:
        raise PlannerError("device_bytes", device_bytes, "must be positive")
    geo = geometry
    inter = (geo.intermediate_size or 4 * geo.hidden_size) // tp
    qkv = (geo.num_attention_heads + 2 * geo.num_kv_heads) * geo.head_dim // tp
    # one layer's live tensors at the peak: residual + normed input, QKV, gate/up and the activated
    # product, in 16-bit; then the sampler's float32 logits for max_num_seqs dummy requests
    activations = max_num_batched_tokens * 2 * (2 * geo.hidden_size + qkv + 3 * inter)
    logits = max_num_seqs * (geo.vocab_size or 32000) * 4
    requested = int(device_bytes * utilization)
    terms = [
        BudgetTerm("device memory", device_bytes, device_source or "device catalog"),
        BudgetTerm(f"x gpu_memory_utilization {utilization:g}", requested - device_bytes, "vLLM --gpu-memory-utilization: the share of the device vLLM may use"),
        BudgetTerm("weights per GPU", -(-weights_bytes // tp), weights_source or "weights estimate" + (f" / tp {tp}" if tp > 1 else "")),
        BudgetTerm("profiling peak activations", activations, f"estimate: one layer's hidden, QKV and gated-MLP tensors at {max_num_batched_tokens:,} batched tokens (16-bit)"),
        BudgetTerm("sampler logits", logits, f"estimate: float32 logits of {max_num_seqs:,} dummy requests x {geo.vocab_size or 32000:,} vocabulary"),
        BudgetTerm("CUDA graphs", CUDA_GRAPH_BYTES, "assumed: typical capture for decode batch sizes up to 512"),
        BudgetTerm("non-torch memory", NON_TORCH_BYTES + (NCCL_BYTES if tp > 1 else 0), "assumed: CUDA context and cuBLAS workspaces" + (", NCCL buffers" if tp > 1 else "")),
    ]
    for name, value in (measured or {}).items():
        terms = [BudgetTerm(t.name, value, "measured by the probe on a GPU") if t.name == name else t for t in terms]
    taken = sum(t.bytes for t in terms[2:])
    terms = [terms[0], terms[1], *(BudgetTerm(t.name, -t.bytes, t.source) for t in terms[2:])]
    return VllmBudget(terms=tuple(terms), available_kv_bytes=requested - taken)
