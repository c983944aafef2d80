"""SGLang 0.5.23's KV budget, pool configurators and pool classes, as pure arithmetic.

``KVCacheConfigurator.configure`` (mem_cache/kv_cache_configurator.py): the byte budget
(``_profile_available_bytes``, which first carves out the Mamba state pool for hybrids:
``_handle_max_mamba_cache``), the token count from the per-token cell of the model's pool
configurator (model_executor/pool_configurator.py), ``max_running_requests``
(``resolve_max_num_reqs``), then the pool classes (mem_cache/memory_pool.py,
swa_memory_pool.py), whose constructors print the "KV Cache is allocated" lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.engines.sglang.defaults import SglangDefaults, SglangRefusal
from planner.engines.sglang.model import SglangModel
from planner.engines.sglang.rules import Rules

GIB = 1 << 30
QUANT_BLOCK = 128  # DSATokenToKVPool.quant_block_size: one fp32 scale per 128 latent / index elements
_TORCH = {"bfloat16": "torch.bfloat16", "float16": "torch.float16", "float8_e4m3fn": "torch.float8_e4m3fn", "float8_e5m2": "torch.float8_e5m2"}


@dataclass(frozen=True, slots=True)
class PoolSizes:
    """What the configurator and the pools settle on (before the scheduler reads them)."""

    max_total_num_tokens: int
    swa_max_total_num_tokens: int | None
    max_running_requests: int
    max_mamba_cache_size: int | None
    kv_pool_bytes: int | None  # what the "KV Cache is allocated" lines add up (K + V, all pools)
    available_bytes: int  # _profile_available_bytes' result: the KV budget after the state pool
    cell_bytes: float  # bytes one token costs across the pool (the configurator's coefficient)
    log_lines: tuple[str, ...]


def state_bytes_per_request(model: SglangModel, tp: int) -> tuple[int, int, int]:
    """(conv bytes, ssm bytes, total) of one request's Mamba / linear-attention state over all
    state layers on one GPU: ``BaseLinearStateParams.mamba_cache_per_req`` with the TP split of
    ``Mamba2StateShape.create`` (groups padded so every shard holds whole groups) or
    ``KimiLinearStateShape.create``; conv state in bf16, SSM state in float32 unless the config
    names ``mamba_ssm_dtype``.

    Raises:
        SglangRefusal: a state dimension TP does not divide (``divide`` asserts).
    """

    def divide(value: int, what: str) -> int:
        if value % tp:
            raise SglangRefusal("tp", tp, f"{value} is not divisible by {tp} ({what} of the {model.state_kind} state, srt/distributed/utils.py divide)", "tp")
        return value // tp

    heads, head_dim, state = model.state_ssm
    if model.state_kind == "mamba2":
        groups = model.mamba_groups
        if groups % tp:
            groups += tp - groups  # extra_groups_for_head_shards
        conv = divide(model.mamba_intermediate + 2 * groups * model.mamba_state_size, "conv_dim") * model.state_conv_window
    else:
        conv = sum(divide(dim, "conv_dim") for dim in model.state_conv) * model.state_conv_window
    ssm = divide(heads, "heads") * head_dim * state
    conv_bytes, ssm_bytes = conv * 2 * model.state_layers, ssm * model.ssm_bytes * model.state_layers
    return conv_bytes, ssm_bytes, conv_bytes + ssm_bytes


def _gb(value: float) -> str:
    return f"{value / GIB:.2f}"


def available_kv_bytes(rules: Rules, model: SglangModel, d: SglangDefaults, tp: int, pre_load_free_gib: float, available_gib: float) -> tuple[int, int | None, str | None]:
    """``_profile_available_bytes``: ``rest = free after weights - pre_load_free x (1 - fraction)
    - multimodal reservation`` (GiB floats, as SGLang computes them), less the Mamba pool
    (``_handle_max_mamba_cache``: ``budget = rest x r / (1 + r)``, ``size = (budget - per_req) //
    per_req`` slots, ``rest - (size + 1) x per_req``). Returns (bytes, Mamba slots, Mamba log line).

    Raises:
        SglangRefusal: no memory left for the KV cache, or none for the state cache.
    """
    slack = pre_load_free_gib * (1 - d.mem_fraction_static)
    rest = available_gib - slack - d.vlm_reservation_gib
    size, line = None, None
    if model.state_kind:
        conv, ssm, per_req = state_bytes_per_request(model, tp)
        ratio = rules.mamba_full_memory_ratio
        budget = rest * ratio / (1 + ratio) * (1 << 30)
        size = int((budget - 0 - per_req) // per_req)
        if size <= 0:
            raise SglangRefusal(
                "available_gib", available_gib,
                f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size={size} (total_rest_memory={rest:.2f} GB, "
                f"mamba_cache_per_req={per_req / (1 << 20):.2f} MB). Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
                "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.",
                "mamba_state",
            )
        rest = rest - (size + 1) * per_req / (1 << 30)
        # memory_pool.py MambaPool: conv and SSM states on size + 1 slots
        line = f"Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {_gb((size + 1) * conv)}GB, ssm_state size: {_gb((size + 1) * ssm)}GB "
    if rest <= 0:
        minimum = 1 - available_gib / pre_load_free_gib
        raise SglangRefusal(
            "available_gib", available_gib,
            f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={d.mem_fraction_static}. Raise --mem-fraction-static above "
            f"{math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative decoding, draft weights are now counted.",
            "no_kv_memory",
        )
    return int(rest * (1 << 30)), size, line


def _mla_dim(model: SglangModel, d: SglangDefaults) -> int:
    """kv_cache_configurator.py calculate_mla_kv_cache_dim: the latent plus the rope part; DSA
    with an fp8 cache in FlashMLA's scaled layout stores 512 fp8 + 4 fp32 scales + 64 bf16 rope
    (656 B), the raw layout (TRT-LLM DSA kernels, Blackwell) 576."""
    dim = model.kv_lora_rank + model.qk_rope_head_dim
    if model.attention != "dsa" or "trtllm" in (d.dsa_prefill_backend, d.dsa_decode_backend):
        return dim
    if d.dsa_prefill_backend == "tilelang" and d.dsa_decode_backend == "tilelang":
        return dim
    if d.kv_dtype == "float8_e4m3fn":
        return model.kv_lora_rank + model.kv_lora_rank // QUANT_BLOCK * 4 + model.qk_rope_head_dim * 2
    return dim


def _indexer_bytes(model: SglangModel) -> int:
    """pool_configurator.py _compute_dsa_indexer_cell_size: fp8 index keys + one fp32 scale per 128
    (132 B at head dim 128), pooled by index_kpool, on the layers that compute their own top-k."""
    per_token = -(-(model.index_head_dim + model.index_head_dim // QUANT_BLOCK * 4) // model.index_kpool)
    return per_token * model.indexer_layers


def size_pools(rules: Rules, model: SglangModel, d: SglangDefaults, tp: int, pre_load_free_gib: float, available_gib: float) -> PoolSizes:
    """The whole of ``KVCacheConfigurator.configure`` for the standard and hybrid pools.

    Raises:
        SglangRefusal: SGLang's start-up refusals (memory, state cache, SWA pool).
    """
    if model.attention == "dsv4":
        from planner.engines.sglang.dsv4 import size_dsv4_pools

        return size_dsv4_pools(rules, model, d, tp, pre_load_free_gib, available_gib)
    available, mamba_size, mamba_line = available_kv_bytes(rules, model, d, tp, pre_load_free_gib, available_gib)
    elem = d.kv_bytes
    page = d.page_size
    heads = max(1, model.kv_heads // tp)
    lines: list[str] = []
    swa_tokens = None
    if model.hybrid_swa:
        # pool_configurator.py HybridSWAPoolConfigurator: full + ratio x SWA bytes per full token
        full_per_token = heads * (model.head_dim + model.v_head_dim) * elem
        swa_heads = max(1, model.swa_kv_heads // tp)
        swa_per_token = swa_heads * (model.swa_head_dim + model.swa_v_head_dim) * elem
        ratio = d.swa_full_tokens_ratio
        cell: float = full_per_token * model.full_layers + ratio * (swa_per_token * model.swa_layers)
        tokens = int(available // cell)
        full = tokens // page * page
        swa_tokens = int(full * ratio) // page * page
        if model.sliding_window is not None and model.sliding_window + page >= swa_tokens:
            # MemoryPoolConfigurator.validate_swa_pool_size
            raise SglangRefusal(
                "available_gib", available_gib,
                f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor is sliding_window_size ({model.sliding_window}) + "
                f"page_size ({page}). Increase --swa-full-tokens-ratio or the total KV budget.",
                "swa_pool",
            )
        tokens = full
        _check_tokens(tokens)
        lines.append(f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa_tokens}")
        dtype = _TORCH[d.kv_dtype]
        fk = (full + page) * heads * model.head_dim * model.full_layers * elem
        fv = (full + page) * heads * model.v_head_dim * model.full_layers * elem
        sk = (swa_tokens + page) * swa_heads * model.swa_head_dim * model.swa_layers * elem
        sv = (swa_tokens + page) * swa_heads * model.swa_v_head_dim * model.swa_layers * elem
        lines.append(f"Full KV Cache is allocated. dtype: {dtype}, #tokens: {full}, K size: {_gb(fk)} GB, V size: {_gb(fv)} GB")
        lines.append(f"SWA KV Cache is allocated. dtype: {dtype}, #tokens: {swa_tokens}, K size: {_gb(sk)} GB, V size: {_gb(sv)} GB")
        kv_bytes = fk + fv + sk + sv
    else:
        # pool_configurator.py DefaultPoolConfigurator: hybrids count their full-attention layers only
        layers = model.full_layers if model.state_kind else model.num_layers
        if model.attention in ("mla", "dsa"):
            cell = _mla_dim(model, d) * layers * elem
            if model.attention == "dsa":
                cell += _indexer_bytes(model)
        elif model.attention == "minimax_sparse":
            return _minimax_pools(rules, model, d, tp, available, elem, page)
        else:
            cell = heads * (model.head_dim + model.v_head_dim) * layers * elem
        tokens = available // cell // page * page
        _check_tokens(tokens)
        dtype = _TORCH[d.kv_dtype]
        rows = tokens + page
        if model.attention in ("mla", "dsa"):
            kv_bytes = rows * cell
            lines.append(f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, KV size: {_gb(kv_bytes)} GB")
        else:
            k = rows * heads * model.head_dim * layers * elem
            v = rows * heads * model.v_head_dim * layers * elem
            kv_bytes = k + v
            lines.append(f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {_gb(k)} GB, V size: {_gb(v)} GB")
    running = max_running_requests(rules, model, d, tokens, mamba_size)
    if mamba_line is not None:
        lines.insert(0, mamba_line)
    return PoolSizes(tokens, swa_tokens, running, mamba_size, kv_bytes, available, cell, tuple(lines))


def _check_tokens(tokens: int) -> None:
    if tokens <= 0:
        # pool_configurator.py MemoryPoolConfig.__post_init__
        raise SglangRefusal("available_gib", tokens, "Not enough memory. Please try to increase --mem-fraction-static.", "not_enough_memory")


def max_running_requests(rules: Rules, model: SglangModel, d: SglangDefaults, tokens: int, mamba_size: int | None) -> int:
    """``resolve_max_num_reqs``: ``min(clamp(tokens / context x 512, 2048, 4096), tokens // 2)``,
    or the user's limit capped by ``tokens // 2``; hybrids are capped at ``mamba slots // ratio``
    (5 with the extra-buffer strategy and the overlap scheduler, ``_calculate_mamba_ratio``).

    Raises:
        SglangRefusal: the state cache is too small to serve one request.
    """
    estimated = int(tokens / d.context_len * rules.requests_per_context)
    estimated = max(min(estimated, rules.max_requests), rules.min_requests)
    if d.max_running_requests is not None:
        reqs = min(max(1, d.max_running_requests), tokens // 2)
    else:
        reqs = min(estimated, tokens // 2)
    if mamba_size is not None:
        reqs = min(reqs, mamba_size // d.mamba_ratio)
        if reqs <= 0:
            raise SglangRefusal(
                "max_running_requests", reqs,
                f"Hybrid (mamba/linear-attention) state cache is too small to serve any requests. max_mamba_cache_size={mamba_size}, mamba_ratio={d.mamba_ratio}, "
                f"resulting max_num_reqs={reqs}. Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.",
                "mamba_requests",
            )
    return reqs


def _minimax_pools(rules: Rules, model: SglangModel, d: SglangDefaults, tp: int, available: int, elem: int, page: int) -> PoolSizes:
    """MiniMax-M3 sparse attention (DefaultPoolConfigurator._compute_cell_size, MiniMaxSparseKVPool):
    a main K/V pool over every layer, an index pool of one head on the sparse layers (K and V, or
    K only where ``sparse_disable_index_value`` says so), index keys in the KV dtype under fp8
    attention GEMMs (fp8_e4m3 + trtllm_mha on SM100) or fp8_e4m3 on Hopper, else the model dtype
    (memory_pool.py get_minimax_sparse_index_dtype)."""
    dense, sparse, k_only, index_dim = model.sparse
    heads = max(1, model.kv_heads // tp)
    fp8_gemm = d.kv_cache_dtype == "fp8_e4m3" and d.attention_backend == "trtllm_mha" and d.sm == 100
    index_kv_dtype = d.kv_dtype if fp8_gemm or (d.sm == 90 and d.kv_dtype == "float8_e4m3fn") else model.dtype
    index_elem = 1 if index_kv_dtype.startswith("float8") else 2
    kv_index = sparse - k_only
    cell = (dense + sparse) * 2 * heads * model.head_dim * elem + (kv_index * 2 + k_only) * index_dim * index_elem
    tokens = available // cell // page * page
    _check_tokens(tokens)
    rows = tokens + page
    k = rows * heads * model.head_dim * (dense + sparse) * elem
    lines = [f"KV Cache is allocated. dtype: {_TORCH[d.kv_dtype]}, #tokens: {tokens}, K size: {_gb(k)} GB, V size: {_gb(k)} GB"]
    kv_bytes = 2 * k
    index_dtype = _TORCH[index_kv_dtype]
    if kv_index:
        ik = rows * index_dim * kv_index * index_elem
        lines.append(f"KV Cache is allocated. dtype: {index_dtype}, #tokens: {tokens}, K size: {_gb(ik)} GB, V size: {_gb(ik)} GB")
        kv_bytes += 2 * ik
    if k_only:
        ik = rows * index_dim * k_only * index_elem
        lines.append(f"KV Cache is allocated. dtype: {index_dtype}, #tokens: {tokens}, K size: {_gb(ik)} GB, V size: 0.00 GB")
        kv_bytes += ik
    running = max_running_requests(rules, model, d, tokens, None)
    return PoolSizes(tokens, None, running, None, kv_bytes, available, cell, tuple(lines))
