"""DeepSeek-V4's pools in SGLang 0.5.23: ``DSV4PoolConfigurator`` (model_executor/pool_configurator.py).

Each full token costs its compressed caches (ratio-4 latent + indexer, ratio-128 latent, the
ratio-1/2 sources' latent + fp4 index keys) plus ``swa_full_tokens_ratio`` (0.1) SWA slots over
every layer, each SWA slot carrying its share of the ratio-4 compressor state; the ratio-128
compressor states are a fixed reservation per request slot. Pages are the V4 FlashMLA layout
(``KVLayout.V4``: 576 + 8 bytes a token, pages padded to 576 bytes) on the default
``SGLANG_DSV4_KV_LAYOUT=v4``, 256 tokens a page. No speculative decoding, no encoder replay, no
unified KV (the defaults).
"""

from __future__ import annotations

from planner.engines.sglang.defaults import SglangDefaults, SglangRefusal
from planner.engines.sglang.model import SglangModel
from planner.engines.sglang.pools import PoolSizes, _check_tokens, available_kv_bytes, max_running_requests
from planner.engines.sglang.rules import Rules

V4_BYTES_PER_TOKEN = 576 + 8  # kernels/ops/attention/dsv4/kv_layout.py KVLayout.V4: data + scale bytes
V4_PAGE_ALIGN = 576  # KVLayout.V4.page_align
STATE_BYTES = 4  # SGLANG_DSV4_COMPRESS_STATE_DTYPE=float32
RING = {4: 8, 128: 128, 2: 2}  # deepseek_v4_memory_pool.py get_compress_state_ring_size without drafts
LOW_RATIO_INDEX_PAGE = 64  # DSV41_INDEX_PAGE_SIZE (DeepGEMM paged sparse MQA logits off)


def _paged_bytes_per_token(page_size: int, ratio: int = 0) -> float:
    """``_get_paged_kv_bytes_per_token``: one V4 page of ``page_size // ratio`` compressed slots."""
    page = page_size // ratio if ratio else page_size
    padded = -(-(page * V4_BYTES_PER_TOKEN) // V4_PAGE_ALIGN) * V4_PAGE_ALIGN
    return padded / page


def _owners(model: SglangModel) -> dict[int, list[int]]:
    """``collect_sources_by_ratio``: every layer of ratio 4 / 128, the kv-source layers of 1 / 2."""
    ratios, sources, _, _, _, _ = model.dsv4
    stage = range(model.num_layers)
    out: dict[int, list[int]] = {}
    for ratio in (4, 128, 1, 2):
        layers = [i for i in sources if i in stage and ratios[i] == ratio] if ratio in (1, 2) else [i for i in stage if ratios[i] == ratio]
        if layers:
            out[ratio] = layers
    return out


def size_dsv4_pools(rules: Rules, model: SglangModel, d: SglangDefaults, tp: int, pre_load_free_gib: float, available_gib: float) -> PoolSizes:
    """``DSV4PoolConfigurator.calculate_pool_sizes`` on the budget ``_profile_available_bytes`` gives.

    Raises:
        SglangRefusal: no memory for the KV cache, or an SWA pool that cannot hold a request.
    """
    available, _, _ = available_kv_bytes(rules, model, d, tp, pre_load_free_gib, available_gib)
    _, _, window, nope, rope, index_dim = model.dsv4
    page = d.page_size
    owners = _owners(model)
    head = nope + rope
    index_bytes = index_dim + index_dim // 128 * 4  # get_dsv4_indexer_bytes_per_token (fp8)
    low_index_bytes = index_dim // 2 + index_dim // 32  # the fp4 low-ratio indexer pools
    n_layers = model.num_layers
    c4_layers = len(owners.get(4, ()))
    # _get_bytes_per_swa_token: the SWA page over every layer + the ratio-4 compressor state per slot
    c4_state = 2 * 2 * head * STATE_BYTES + 2 * 2 * index_dim * STATE_BYTES
    bytes_per_swa = _paged_bytes_per_token(page) * n_layers + RING[4] / page * c4_state * c4_layers if 4 in owners else _paged_bytes_per_token(page) * n_layers

    def compressed(ratio: int) -> float:  # _compressed_bytes_per_full_token
        if ratio in (1, 2):
            return (_paged_bytes_per_token(page, ratio) + low_index_bytes) / ratio
        if ratio == 4:
            return 1 / 4 * _paged_bytes_per_token(page, 4) + 1 / 4 * index_bytes
        return 1 / 128 * _paged_bytes_per_token(page, 128)

    ratio_swa = d.swa_full_tokens_ratio
    bytes_per_full = ratio_swa * bytes_per_swa + sum(compressed(r) * len(layers) for r, layers in owners.items())
    running = d.max_running_requests
    if running is None:  # _resolve_max_running_requests_per_worker
        guess = int(available / bytes_per_full)
        running = min(max(min(int(guess / d.context_len * 512), 4096), 2048), guess // 2)
    slots = running + 1
    fixed = 0
    if 128 in owners:  # _get_c128_state_fixed_bytes
        rows = slots * RING[128] + RING[128] + 1
        fixed += -(-rows // 128) * 128 * (2 * head) * STATE_BYTES * len(owners[128])
    if 2 in owners:  # _get_c2_state_fixed_bytes
        rows = slots * RING[2] + RING[2] + 1
        fixed += -(-rows // 2) * 2 * (2 * head) * 4 * len(owners[2])
    for_tokens = max(available - fixed, 0)
    full = int(for_tokens / bytes_per_full) // page * page
    while full > 0 and full * bytes_per_full + _low_ratio_padding(owners, page, full, low_index_bytes) > for_tokens:
        full -= page
    swa = int(full * ratio_swa) // page * page
    if window is not None and window + page >= swa:
        raise SglangRefusal(
            "available_gib", available_gib,
            f"SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is sliding_window_size ({window}) + page_size ({page}). "
            "Increase --swa-full-tokens-ratio or the total KV budget.",
            "swa_pool",
        )
    c4_state_size = swa // page * RING[4] if 4 in owners else 0
    line = f"DSV4 pool sizes: full={full}, swa={swa}, c4={full // 4}, c128={full // 128}, c4_state={c4_state_size}, c128_state=0"
    _check_tokens(full)
    reqs = max_running_requests(rules, model, d, full, None)
    return PoolSizes(full, swa, reqs, None, None, available, bytes_per_full, (line,))


def _low_ratio_padding(owners: dict[int, list[int]], page: int, full: int, low_index_bytes: int) -> float:
    """``_get_low_ratio_kv_padding_bytes``: the reserved main / indexer pages of ratio-1/2 layers."""
    padding = 0.0
    for ratio in (1, 2):
        layers = len(owners.get(ratio, ()))
        if not layers:
            continue
        main = page * _paged_bytes_per_token(page, ratio)
        index_size = (full + page) // ratio
        slots = -(-(index_size + LOW_RATIO_INDEX_PAGE) // LOW_RATIO_INDEX_PAGE) * LOW_RATIO_INDEX_PAGE
        padding += (main + (slots - full // ratio) * low_index_bytes) * layers
    return padding
