"""The memory state SGLang measures at start-up, predicted term by term when none was measured.

SGLang reads two figures per GPU (``get_available_gpu_memory``, GiB of 2^30 bytes): the free memory
after distributed init and before the weights load (``pre_model_load_memory``; the start-up log's
"Load weight begin. avail mem=..."), and the free memory once every weight is resident, draft
weights included (``_profile_available_bytes``). Measured figures always win; these terms are what
the planner assumes without them, each naming where its number comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.sglang.gpus import SglangGpu
from planner.errors import PlannerError
from planner.results import Result

GIB = 1 << 30

# CUDA context, cuBLAS / NCCL bootstrap before any weight: total minus "Load weight begin. avail mem"
# minus "Init torch distributed ends. mem usage" in published SGLang start-up logs: 1.05-1.10 GiB on
# 8x H200 (github.com/sgl-project/sglang/pull/11716), 1.31 GiB on 8x B200 (pull/5390)
CUDA_CONTEXT_GIB = 1.1
# "Init torch distributed ends. mem usage": NCCL and custom all-reduce buffers once tp > 1 -- 1.96-2.01 GB
# at TP8 on H200 NVLink (pull/11716), 2.38-2.50 at DP8 on B200 (pull/5390), 0.39 at TP4 over PCIe
# (issues/40558); a single GPU reports 0.00 (pull/15426)
DIST_INIT_NVLINK_GIB = 2.0
DIST_INIT_PCIE_GIB = 0.4
NVLINK_GPUS = frozenset({"H100-SXM-80GB", "H200-141GB", "B200-180GB", "A100-SXM-80GB", "A100-SXM-40GB"})


@dataclass(frozen=True, slots=True)
class MemoryTerm(Result):
    name: str
    gib: float  # positive: memory the state starts from; negative: what start-up takes from it
    source: str  # "nvidia-smi ...", "fitted: ...", "assumed: ...", "derived: ..." or "measured"


@dataclass(frozen=True, slots=True)
class SglangMemory(Result):
    """The two figures ``sglang_capacity`` takes, with the terms they were built from."""

    pre_load_free_gib: float
    available_gib: float
    terms: tuple[MemoryTerm, ...]

    def summary(self) -> dict:
        return {"pre_load_free_gib": self.pre_load_free_gib, "available_gib": self.available_gib, "terms": [t.model_dump() for t in self.terms]}


def predict_memory(gpu: SglangGpu, tp: int, weights_bytes: int, *, draft_weights_bytes: int = 0, weights_source: str = "", measured_pre_load_free_gib: float | None = None) -> SglangMemory:
    """Free memory before and after the weights on one GPU of ``gpu``: the card's total as SGLang
    reads it, less the CUDA context and (tp > 1) the distributed-init buffers, then less this GPU's
    share of the weights (``weights_bytes / tp``, the checkpoint's whole weights) and of the draft
    model's. ``measured_pre_load_free_gib`` replaces the first two estimates.

    Raises:
        PlannerError: a negative weight size or a bad tp.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise PlannerError("tp", tp, "must be a positive integer")
    for field, value in (("weights_bytes", weights_bytes), ("draft_weights_bytes", draft_weights_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PlannerError(field, value, "must be a non-negative integer number of bytes")
    total = gpu.memory_mib / 1024
    terms = [MemoryTerm("card memory", total, f"{gpu.memory_mib} MiB, {gpu.source}")]
    if measured_pre_load_free_gib is not None:
        pre = float(measured_pre_load_free_gib)
        terms.append(MemoryTerm("CUDA context and distributed init", round(pre - total, 4), "measured: free memory before the weights"))
    else:
        terms.append(MemoryTerm("CUDA context", -CUDA_CONTEXT_GIB, "fitted: published SGLang start-up logs, total minus 'Load weight begin. avail mem' (H200, B200)"))
        pre = total - CUDA_CONTEXT_GIB
        if tp > 1:
            dist = DIST_INIT_NVLINK_GIB if gpu.name in NVLINK_GPUS else DIST_INIT_PCIE_GIB
            link = "NVLink" if gpu.name in NVLINK_GPUS else "PCIe"
            terms.append(MemoryTerm("NCCL and custom all-reduce buffers", -dist, f"fitted: 'Init torch distributed ends. mem usage' in published SGLang logs ({link})"))
            pre -= dist
    weights = weights_bytes / tp / GIB
    terms.append(MemoryTerm("weights", -weights, (weights_source or "derived: checkpoint weights") + (f" / tp {tp}" if tp > 1 else "")))
    available = pre - weights
    if draft_weights_bytes:
        draft = draft_weights_bytes / tp / GIB
        terms.append(MemoryTerm("draft weights", -draft, f"derived: draft model weights / tp {tp} (SGLang 0.5.23 counts them against the budget)"))
        available -= draft
    return SglangMemory(pre_load_free_gib=pre, available_gib=available, terms=tuple(terms))
