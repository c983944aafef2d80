"""What a given serving engine does with the KV cache (one package or module per engine).

:mod:`planner.engines.common` holds what every engine returns or raises (:class:`EngineRefusal`,
the budget terms, the capacity seam, the start-up preview); :mod:`planner.engines.vllm` predicts
vLLM's start-up sizing: KV-cache groups, pages, blocks, the ``GPU KV cache size`` / ``Maximum
concurrency`` log lines and its refusals, per vLLM version.
"""

from planner.engines.common import BudgetTerm, EngineBudget, EngineCapacity, EnginePreview, EngineRefusal
from planner.engines.vllm import DEFAULT_VLLM_VERSION, VLLM_VERSIONS, EngineGroup, VllmCapacity, vllm_capacity

__all__ = ["DEFAULT_VLLM_VERSION", "VLLM_VERSIONS", "BudgetTerm", "EngineBudget", "EngineCapacity", "EngineGroup", "EnginePreview", "EngineRefusal", "VllmCapacity", "vllm_capacity"]
