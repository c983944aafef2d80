"""What each layer caches in vLLM, and the block its attention backend picks.

vLLM's ``KVCacheSpec`` per layer (vllm/v1/kv_cache_interface.py): attention layers are
:class:`planner.kv.KVSpec` (their pages and admission blocks), with the views vLLM takes of them
here (a never-binding window is still a window, draft layers join the full group, 0.10 caches
chunked layers in full); Mamba and linear-attention layers are a :class:`StatePage`, held per
request as :class:`StateRule` says. The KV dtype a ``--kv-cache-dtype`` means, and the block
size the backend a Hopper GPU selects prefers.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.common import EngineRefusal
from planner.engines.vllm.rules import version_tuple
from planner.errors import PlannerError
from planner.geometry import SLIDING_PATTERN_DEFAULTS, ModelGeometry
from planner.kv import AUTO, KVSpec, resolve_kv_dtype

KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
FLASH_ATTN_BLOCK = 16  # FLASH_ATTN: MultipleOf(16) kernel blocks, default block size 16
FLASHMLA_BLOCK = 64  # FLASHMLA supports 64-token blocks only (so do the sparse-MLA backends and the DSA indexer)
MINIMAX_M3_SPARSE_BLOCK = 128  # MiniMaxM3SparseBackend and MiniMaxM3IndexerBackend read 128-token pages only
SM90_FA4_FP8_BLOCK = 64  # FA4's FP8-KV kernel on Hopper reads 64-token pages
KDA_CHECKPOINT_ALIGNMENT = 16  # FlashKDA prefill checkpoint grid (vllm/model_executor/layers/mamba/kda_checkpoint.py)
GDN_CHECKPOINT_ALIGNMENT = 64  # FlashInfer GDN prefill checkpoint grid (vllm/v1/attention/backends/gdn_attn.py)
# DeepSeek-V4 (vllm/models/deepseek_v4): FLASHMLA_SPARSE_DSV4 and DEEPSEEK_V4_INDEXER take 256-token blocks only;
# DeepseekV4SWACache keeps its own 64-token blocks; CompressorStateCache 4 (ratio 4) or 8 (ratio 128)
DSV4_BLOCK = 256
DSV4_SWA_BLOCK = 64
DSV4_STATE_BLOCK = {4: 4, 128: 8}
STATE_KINDS = ("mamba", "linear_attention")


@dataclass(frozen=True, slots=True)
class StatePage:
    """Mamba / linear-attention layers: one fixed-size state per request, held in pool blocks."""

    kind: str  # "mamba" or "linear_attention"
    num_layers: int
    state_bytes: int  # conv + SSM state of one layer on one GPU
    checkpoint_alignment: int  # token grid of prefill checkpoints in "align" mode


@dataclass(frozen=True, slots=True)
class StateRule:
    """vLLM ``MambaSpec.max_memory_usage_bytes`` for one request: without prefix caching one
    state ("none"); in "align" mode the running state and the last cached one (0.33: and one
    prefill checkpoint); in "all" mode (0.19 / 0.24) a state every ``block`` tokens."""

    mode: str  # none, align, all
    held: int  # states held in "align" mode
    block: int  # mamba_block_size in "all" mode

    def blocks(self, length: int) -> int:
        if self.mode == "all":
            return -(-length // self.block)
        return self.held if self.mode == "align" else 1


def planner_kv_dtype(kv_cache_dtype: str, config: dict) -> str:
    """The planner KV dtype of a vLLM ``--kv-cache-dtype``; "auto" is what the checkpoint declares
    (vLLM 0.33 ``resolve_kv_cache_dtype_string``: an fp8 ``kv_cache_scheme`` caches fp8), else the
    16-bit serving dtype (vLLM serves float32 checkpoints in bfloat16).

    Raises:
        PlannerError: an unknown dtype, or a checkpoint KV format the planner does not model.
    """
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlannerError("kv_cache_dtype", kv_cache_dtype, f"vLLM KV cache dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if kv_cache_dtype == "auto":
        kv_cache_dtype = resolve_kv_dtype(AUTO, config)[0]
    return "fp8" if kv_cache_dtype.startswith("fp8") else "bf16"


def dsv4_kv_dtype(kv_cache_dtype: str) -> str:
    """DeepSeek-V4's FlashMLA layers store every cache in the fp8_ds_mla layout: ``auto`` and every
    fp8 dtype become ``fp8_ds_mla``, a 16-bit cache is refused (models/deepseek_v4/attention.py
    ``_resolve_dsv4_kv_cache_dtype``)."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlannerError("kv_cache_dtype", kv_cache_dtype, f"vLLM KV cache dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if kv_cache_dtype in ("bfloat16", "float16"):
        raise EngineRefusal(
            "kv_cache_dtype", kv_cache_dtype,
            f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {kv_cache_dtype}. Please set `--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.",
        )
    return "fp8"


def cfg_int(cfg: dict, keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def state_pages(geo: ModelGeometry, cfg: dict, tp: int, nemotron_ssm_dtype: str = "float32", config_ssm_dtype: bool = True) -> list[StatePage]:
    """Per-layer recurrent state on one GPU as vLLM shapes it (``MambaStateShapeCalculator``):
    conv and SSM state split by TP (Mamba-2 groups padded so every shard holds whole groups);
    conv state in the 16-bit model dtype, SSM state as vLLM's per-model config rule says."""
    pages = []
    # vllm/model_executor/models/config.py: NemotronH keeps SSM state in the config's
    # mamba_ssm_cache_dtype (default: the release's, Rules.nemotron_ssm_dtype); Qwen3.5 in its
    # mamba_ssm_dtype; others in 16-bit. 0.11 does not read the config's value (config_ssm_dtype)
    ssm_name = ((cfg.get("mamba_ssm_cache_dtype") if config_ssm_dtype else None) or nemotron_ssm_dtype) if geo.model_type.startswith("nemotron_h") else cfg.get("mamba_ssm_dtype")
    ssm_bytes = 4 if str(ssm_name or "").lower() in ("float32", "fp32") else 2
    count = geo.counts()
    if geo.mamba is not None:
        d_conv = cfg_int(cfg, ("mamba_d_conv", "conv_kernel", "mamba_conv_kernel"), 4)
        d_state = cfg_int(cfg, ("mamba_d_state", "ssm_state_size", "state_size"), 16)
        if "mamba_num_heads" in cfg and "mamba_head_dim" in cfg:  # Mamba-2
            heads, head_dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
            groups = cfg_int(cfg, ("n_groups",), 1)
            groups += 0 if groups % tp == 0 else tp - groups
            conv = (heads * head_dim + 2 * groups * d_state) // tp * (d_conv - 1)
            ssm = heads // tp * head_dim * d_state
        else:  # Mamba-1 (Jamba)
            inner = cfg_int(cfg, ("mamba_expand",), 2) * geo.hidden_size // tp
            conv, ssm = inner * (d_conv - 1), inner * d_state
        pages.append(StatePage("mamba", count["mamba"], conv * 2 + ssm * ssm_bytes, 1))
    if geo.linear is not None and isinstance(cfg.get("linear_attn_config"), dict):
        # Kimi Delta Attention (models/kimi_k3, MambaStateShapeCalculator.kda_state_shape): three
        # short-conv states and a heads x head_dim x head_dim recurrent state, split by TP; FlashKDA
        # prefill checkpoints on a 16-token grid (model_executor/layers/mamba/kda_checkpoint.py)
        spec = geo.linear
        pages.append(StatePage("linear_attention", count["linear_attention"], spec.conv_elements // tp * 2 + spec.ssm_elements // tp * spec.ssm_element_bytes, KDA_CHECKPOINT_ALIGNMENT))
    elif geo.linear is not None:
        k_heads, v_heads = cfg_int(cfg, ("linear_num_key_heads",), 16), cfg_int(cfg, ("linear_num_value_heads",), 32)
        k_dim, v_dim = cfg_int(cfg, ("linear_key_head_dim",), 128), cfg_int(cfg, ("linear_value_head_dim",), 128)
        conv = (2 * k_heads * k_dim + v_heads * v_dim) // tp * (cfg_int(cfg, ("linear_conv_kernel_dim",), 4) - 1)
        ssm = v_heads // tp * v_dim * k_dim
        pages.append(StatePage("linear_attention", count["linear_attention"], conv * 2 + ssm * ssm_bytes, GDN_CHECKPOINT_ALIGNMENT))
    return pages


def spec_kind(spec: KVSpec) -> str:
    if spec.cache in ("indexer", "compressor"):
        return spec.cache
    if spec.cache == "swa":  # DeepSeek-V4's sliding-window latent cache
        return "sliding"
    return "mla" if spec.latent else spec.kind


def speculative_specs(specs: tuple[KVSpec, ...], layers: int) -> tuple[KVSpec, ...]:
    """Draft / MTP layers cached beside the model: full-attention layers of the model's shape,
    in the model's own full-attention group (vLLM leaves ``is_draft`` out of spec equality)."""
    if not layers:
        return specs
    i = next((n for n, s in enumerate(specs) if s.kind == "full"), None)
    if i is None:
        return (*specs, specs[0].model_copy(update={"kind": "full", "window": None, "num_layers": layers}))
    return (*specs[:i], specs[i].model_copy(update={"num_layers": specs[i].num_layers + layers}), *specs[i + 1 :])


def unbound_windows(specs: tuple[KVSpec, ...], geo: ModelGeometry, cfg: dict) -> tuple[KVSpec, ...]:
    """A model-level sliding window at or past the maximum context never binds, so the planner's
    geometry counts those layers as full; vLLM still gives them a ``SlidingWindowSpec`` (and its
    extra block), e.g. Phi-3.5-mini's 262,144-token window."""
    window = cfg.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or cfg.get("use_sliding_window") is False or cfg.get("layer_types") or cfg.get("sliding_window_pattern"):
        return specs
    if geo.max_position_embeddings is None or window < geo.max_position_embeddings or geo.model_type in SLIDING_PATTERN_DEFAULTS:
        return specs
    return tuple(s.model_copy(update={"kind": "sliding", "window": window}) if s.kind == "full" and not s.latent else s for s in specs)


def chunked_as_full(specs: tuple[KVSpec, ...]) -> tuple[KVSpec, ...]:
    """vLLM 0.10 ``unify_hybrid_kv_cache_specs`` (vllm/v1/core/kv_cache_utils.py): with the hybrid
    manager off, chunked local-attention layers become ``FullAttentionSpec`` layers and merge with
    the full layers of the same shape into one group that caches every position."""
    if not any(s.kind == "chunked" for s in specs):
        return specs
    out: list[KVSpec] = []
    for s in specs:
        s = s.model_copy(update={"kind": "full", "window": None}) if s.kind == "chunked" else s
        same = next((i for i, o in enumerate(out) if o.model_copy(update={"num_layers": s.num_layers}) == s), None)
        if same is None:
            out.append(s)
        else:
            out[same] = out[same].model_copy(update={"num_layers": out[same].num_layers + s.num_layers})
    return tuple(out)


def default_block(geo: ModelGeometry, mla: bool, fp8: bool, e4m3: bool, version: str) -> int:
    """The block size the backend a Hopper GPU picks prefers (``get_preferred_block_size``).

    MLA: vLLM 0.19+ (vllm/platforms/cuda.py ``_get_backend_priorities``, SM90) tries FLASH_ATTN_MLA
    first, which takes 16-bit caches in 16-token blocks; fp8 caches go to FLASHMLA (64). 0.10
    forces FLASHMLA's 64 for every MLA model (``CudaPlatform.check_and_update_config``).
    Sparse MLA (DSA) and its indexer take 64. Otherwise FLASH_ATTN's 16, except that an e4m3 fp8
    cache with 512-wide heads (Gemma 4's global layers) runs the SM90 FA4 FP8 kernel on 64-token
    pages (vllm/v1/attention/backends/flash_attn.py ``_get_sm90_fa4_fp8_kv_block_size``)."""
    if mla:
        if geo.indexer is None and not fp8 and version_tuple(version) >= (0, 19):
            return FLASH_ATTN_BLOCK
        return FLASHMLA_BLOCK
    if geo.indexer is not None:  # MiniMax-M3's sparse attention and index keys (models/minimax_m3/common)
        return MINIMAX_M3_SPARSE_BLOCK
    if fp8 and e4m3 and max((layer.k_head_dim for layer in geo.layers if layer.kind in ("full", "sliding", "chunked")), default=0) == 512:
        return SM90_FA4_FP8_BLOCK
    return FLASH_ATTN_BLOCK
