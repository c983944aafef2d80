"""SGLang's start-up sizing, predicted without SGLang: defaults, KV pools, log lines, refusals.

:func:`sglang_capacity` follows what ``python -m sglang.launch_server`` (SGLang 0.5.23) does before
its first forward: server-argument resolution (``srt/arg_groups/``: GPU-memory defaults, model
overrides, attention backend, page size, KV dtype; :mod:`.defaults`), the KV budget
(``KVCacheConfigurator._profile_available_bytes``), the Mamba state pool, the per-token cell of
the model's pool configurator and the pools' "KV Cache is allocated" lines (:mod:`.pools`,
:mod:`.dsv4`), ``max_running_requests`` and the scheduler's start-up line. :func:`predict_memory`
estimates the two free-memory figures SGLang measures when none were measured;
:func:`sglang_preview` puts both together with the ``launch_server`` command for a plan.
Constants are keyed by release in :data:`RULES`; the GPUs SGLang reads are in :data:`GPUS`.
"""

from planner.engines.sglang.capacity import SglangCapacity, get_gpu, scheduler_line, sglang_capacity
from planner.engines.sglang.defaults import KV_CACHE_DTYPES, SglangRefusal
from planner.engines.sglang.gpus import GPUS, SglangGpu
from planner.engines.sglang.memory import MemoryTerm, SglangMemory, predict_memory
from planner.engines.sglang.preview import SglangPreview, SglangSettings, launch_command, sglang_preview
from planner.engines.sglang.rules import DEFAULT_SGLANG_VERSION, RULES, SGLANG_VERSIONS

__all__ = [
    "DEFAULT_SGLANG_VERSION", "GPUS", "KV_CACHE_DTYPES", "RULES", "SGLANG_VERSIONS", "MemoryTerm", "SglangCapacity", "SglangGpu", "SglangMemory",
    "SglangPreview", "SglangRefusal", "SglangSettings", "get_gpu", "launch_command", "predict_memory", "scheduler_line", "sglang_capacity", "sglang_preview",
]
