"""vLLM's start-up KV-cache sizing, predicted without vLLM: groups, pages, blocks, log lines.

:func:`vllm_capacity` follows ``EngineCore._initialize_kv_caches`` (vllm/v1/engine/core.py):
one cache spec per layer (:meth:`planner.kv.KVSpec.admission_blocks` and
:meth:`~planner.kv.KVSpec.layer_page_bytes` for attention, :class:`StatePage` for Mamba and
linear attention), the block size the backend picks (``Platform.update_block_size_for_backend``,
vllm/platforms/interface.py), the KV-cache groups (``get_kv_cache_groups``,
vllm/v1/core/kv_cache_planning.py), ``num_blocks``, the refusal check, and the two numbers of
the start-up log (``get_kv_cache_capacity``, vllm/v1/core/kv_cache_utils.py).

The rules that changed between releases are keyed by version in :data:`RULES`
(0.10, 0.19, 0.24, 0.33; the newest is the default). The backends are those vLLM selects on a
Hopper GPU: FLASH_ATTN (16-token blocks; FA4's 64-token pages for fp8 with 512-wide heads),
FLASH_ATTN_MLA for 16-bit MLA (16) and FLASHMLA for fp8 (64), the sparse-MLA backends and the
DSA indexer (64), MiniMax-M3's sparse backends (128), FlashInfer's gated-delta-net prefill
(checkpoints on a 64-token grid), FlashKDA (16). DeepSeek-V4 runs FLASHMLA_SPARSE_DSV4 and its
indexer (256) with SWA caches (64) and compressor states (4 / 8) in blocks of their own, packed
block-outermost as ``_get_packed_kv_cache_groups`` does.

One concept a module: :mod:`~planner.engines.vllm.rules` (what each release does differently),
:mod:`~planner.engines.vllm.specs` (layer specs, KV dtype, the backend's block),
:mod:`~planner.engines.vllm.groups` and :mod:`~planner.engines.vllm.packed` (KV-cache groups;
DeepSeek-V4's packed ones), :mod:`~planner.engines.vllm.layout` (what the model and settings
decide, memoised), :mod:`~planner.engines.vllm.capacity` (the sizing and fit check, memoised),
:mod:`~planner.engines.vllm.messages` (refusal sentences), :mod:`~planner.engines.vllm.preview`
(the Plan page's start-up preview and the ``vllm serve`` line). The predicted "Available KV cache
memory" is :mod:`planner.engines.vllm_memory` (term by term, per release). The shared result types are
:mod:`planner.engines.common`.
"""

from planner.engines.common import BudgetTerm, EngineRefusal
from planner.engines.vllm.capacity import _MEMO as _MEMO
from planner.engines.vllm.capacity import EngineGroup, VllmCapacity, vllm_capacity
from planner.engines.vllm.layout import _LAYOUTS as _LAYOUTS
from planner.engines.vllm.layout import VllmSettings
from planner.engines.vllm.messages import DOCS
from planner.engines.vllm.preview import VllmPreview, serve_command, serve_line, vllm_preview
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, DROPPED, NOT_REGISTERED, RULES, VLLM_VERSIONS, Rules
from planner.engines.vllm.specs import (
    DSV4_BLOCK,
    DSV4_STATE_BLOCK,
    DSV4_SWA_BLOCK,
    FLASH_ATTN_BLOCK,
    FLASHMLA_BLOCK,
    GDN_CHECKPOINT_ALIGNMENT,
    KDA_CHECKPOINT_ALIGNMENT,
    KV_CACHE_DTYPES,
    MINIMAX_M3_SPARSE_BLOCK,
    SM90_FA4_FP8_BLOCK,
    STATE_KINDS,
    StatePage,
)
from planner.units import GIB

# _MEMO and _LAYOUTS (the two memos, which benchmarks and tests clear) stay reachable here too
__all__ = [
    "DEFAULT_MAX_NUM_BATCHED_TOKENS", "DEFAULT_VLLM_VERSION", "DOCS", "DROPPED", "DSV4_BLOCK", "DSV4_STATE_BLOCK", "DSV4_SWA_BLOCK", "FLASHMLA_BLOCK",
    "FLASH_ATTN_BLOCK", "GDN_CHECKPOINT_ALIGNMENT", "GIB", "KDA_CHECKPOINT_ALIGNMENT", "KV_CACHE_DTYPES", "MINIMAX_M3_SPARSE_BLOCK",
    "NOT_REGISTERED", "RULES", "SM90_FA4_FP8_BLOCK", "STATE_KINDS", "VLLM_VERSIONS", "BudgetTerm", "EngineGroup", "EngineRefusal", "Rules", "StatePage",
    "VllmCapacity", "VllmPreview", "VllmSettings", "serve_command", "serve_line", "vllm_capacity", "vllm_preview",
]  # fmt: skip
