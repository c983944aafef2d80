"""SGLang's start-up sizing constants, one keyword row per release (each names the code it mirrors)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one SGLang release does at start-up (paths under ``python/sglang/srt/``)."""

    version: str
    # arg_groups/memory_hook.py handle_gpu_memory_settings: (card below this many GiB (None: any),
    # chunked_prefill_size, decode CUDA-graph max batch for tp < 4, for tp >= 4)
    gpu_memory_tiers: tuple[tuple[int | None, int, int, int], ...]
    # arg_groups/fields: --max-prefill-tokens default
    max_prefill_tokens: int
    # memory_hook.handle_gpu_memory_settings: reserved = base + activation_tokens x per_token +
    # tp x pp / 8 x 1024 + graph reserve, floored on large cards; activation tokens at least 2048
    reserved_base_mib: int
    activation_mib_per_token: float
    min_activation_tokens: int
    graph_mib_per_batch: int  # memory_hook.reserve_for_graph_mb: decode graphs, 2 MiB per captured batch size
    reserve_floor_above_gib: int
    reserve_floor_mib: int
    # mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb: SGLANG_VLM_CACHE_SIZE_MB default
    vlm_cache_mib: int
    # arg_groups/fields: --swa-full-tokens-ratio default (HybridSWAPoolConfigurator)
    swa_full_tokens_ratio: float
    # arg_groups/fields: --mamba-full-memory-ratio default (_handle_max_mamba_cache)
    mamba_full_memory_ratio: float
    # kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO and the extra-buffer
    # tracking slots of allocation_sizing.get_mamba_tracking_slots (overlap scheduler on)
    mamba_base_ratio: int
    mamba_extra_buffer_slots: int
    # kv_cache_configurator.py resolve_max_num_reqs: tokens / context_len x 512, clamped
    requests_per_context: int
    min_requests: int
    max_requests: int


RULES: dict[str, Rules] = {
    "0.5.23": Rules(
        version="0.5.23",
        gpu_memory_tiers=((20, 2048, 8, 8), (35, 4096, 48, 160), (60, 4096, 32, 160), (90, 8192, 256, 512), (160, 8192, 256, 512), (None, 16384, 512, 512)),
        max_prefill_tokens=16384,
        reserved_base_mib=512,
        activation_mib_per_token=1.5,
        min_activation_tokens=2048,
        graph_mib_per_batch=2,
        reserve_floor_above_gib=60,
        reserve_floor_mib=10 * 1024,
        vlm_cache_mib=100,
        swa_full_tokens_ratio=0.8,
        mamba_full_memory_ratio=0.9,
        mamba_base_ratio=3,
        mamba_extra_buffer_slots=2,
        requests_per_context=512,
        min_requests=2048,
        max_requests=4096,
    ),
}
SGLANG_VERSIONS = tuple(RULES)
DEFAULT_SGLANG_VERSION = SGLANG_VERSIONS[-1]
