"""What a given serving engine does with the KV cache (one module per engine).

:mod:`planner.engines.vllm` predicts vLLM's start-up sizing: KV-cache groups, pages, blocks,
the ``GPU KV cache size`` / ``Maximum concurrency`` log lines and its refusals, per vLLM version.
"""

from planner.engines.vllm import DEFAULT_VLLM_VERSION, VLLM_VERSIONS, EngineGroup, EngineRefusal, VllmCapacity, vllm_capacity

__all__ = ["DEFAULT_VLLM_VERSION", "VLLM_VERSIONS", "EngineGroup", "EngineRefusal", "VllmCapacity", "vllm_capacity"]
