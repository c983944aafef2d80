"""What a given serving engine does with the KV cache (one package or module per engine).

:mod:`planner.engines.common` holds what every engine returns or raises (:class:`EngineRefusal`,
the budget terms, the capacity seam, the start-up preview); :mod:`planner.engines.vllm` predicts
vLLM's start-up sizing: KV-cache groups, pages, blocks, the ``GPU KV cache size`` / ``Maximum
concurrency`` log lines and its refusals, per vLLM version; :mod:`planner.engines.sglang` SGLang's:
server defaults, the token / SWA / Mamba pools, the ``KV Cache is allocated`` and scheduler lines
and its refusals (:class:`SglangRefusal`, a :class:`~planner.errors.PlannerError`).
"""

from planner.engines.common import BudgetTerm, EngineBudget, EngineCapacity, EnginePreview, EngineRefusal
from planner.engines.sglang import DEFAULT_SGLANG_VERSION, SGLANG_VERSIONS, SglangCapacity, SglangPreview, SglangRefusal, SglangSettings, launch_command, sglang_capacity, sglang_preview
from planner.engines.vllm import DEFAULT_VLLM_VERSION, VLLM_VERSIONS, EngineGroup, VllmCapacity, vllm_capacity

__all__ = [
    "DEFAULT_SGLANG_VERSION", "DEFAULT_VLLM_VERSION", "SGLANG_VERSIONS", "VLLM_VERSIONS", "BudgetTerm", "EngineBudget", "EngineCapacity", "EngineGroup", "EnginePreview",
    "EngineRefusal", "SglangCapacity", "SglangPreview", "SglangRefusal", "SglangSettings", "VllmCapacity", "launch_command", "sglang_capacity", "sglang_preview", "vllm_capacity",
]
