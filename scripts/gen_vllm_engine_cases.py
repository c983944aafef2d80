"""Regenerate ``tests/data/vllm_engine_cases.json`` with vLLM's own KV-cache sizing code.

Run it in a throw-away venv that holds vLLM (never in CI, never in the project's venv)::

    python3 -m venv /work/venvs/vllm033 && /work/venvs/vllm033/bin/pip install vllm==0.33.0
    HF_HUB_OFFLINE=1 /work/venvs/vllm033/bin/python scripts/gen_vllm_engine_cases.py

For every config in ``$KVP_REFERENCE_DIR/configs`` (default ``../shared/reference/configs``) and
every preset in ``model_configs/`` it builds a real ``VllmConfig`` with
``EngineArgs(...).create_engine_config()`` from a folder holding only ``config.json``, then
follows ``EngineCore._initialize_kv_caches`` (vllm/v1/engine/core.py) on a CPU:

* block size: ``Platform._preferred_block_size_for_backends`` and, for Mamba / linear-attention
  hybrids, ``Platform._align_hybrid_block_size`` (vllm/platforms/interface.py) with the
  backend a Hopper GPU selects (FLASH_ATTN, FA4 for Gemma 4; FLASH_ATTN_MLA for 16-bit MLA and
  FLASHMLA for fp8; FLASH_ATTN_MLA_SPARSE / FLASHMLA_SPARSE and the DSA indexer for DeepSeek
  sparse attention; MiniMax-M3's sparse backends; FlashInfer GDN and FlashKDA prefill);
* one ``KVCacheSpec`` per layer built the way the attention / Mamba layers build theirs
  (``Attention.get_kv_cache_spec``, ``MLAAttention.get_kv_cache_spec``,
  ``MambaBase.get_kv_cache_spec`` with the model class's own
  ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``). Which layer
  is sliding, chunked, Mamba or linear attention is read from the Hugging Face config vLLM
  loaded (``layer_types``, ``hybrid_override_pattern``, the model's sliding window,
  ``linear_attn_config.kda_layers``); the 2026 families have their own builders, each citing
  the model file it follows (DSA latent + indexer, MiniMax-M3 index keys, Gemma 4 and MiMo-V2
  per-layer heads). Real 2026 configs come from aiconfigurator-core's ``model_configs/``
  (``AIC_CONFIGS``). DeepSeek-V4 (SWA, compressed latent, indexer and compressor-state caches,
  grouped by ``_get_packed_kv_cache_groups``) is built as its FlashMLA layers build it;
  Nemotron-NAS (needs --trust-remote-code) is not covered;
* grouping, block counts and the refusal: ``resolve_kv_cache_layout``,
  ``get_global_kv_cache_groups``, ``get_kv_cache_configs`` (its ValueError is vLLM's refusal),
  ``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity`` (the log line's numbers).

The model itself is never instantiated (that needs a GPU), so the per-layer spec list is the
one part written here rather than called; everything from the specs on is vLLM's code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30

# (tp, kv dtype, max_model_len, max_num_batched_tokens, available GiB, prefix caching)
SETTINGS = (
    (1, "auto", 8192, 8192, 20.0, True),
    (2, "auto", 32768, 8192, 31.83, True),
    (4, "fp8", 16384, 2048, 45.32, True),
    (1, "auto", 131072, 8192, 60.0, False),
    (8, "fp8_e4m3", 65536, 8192, 9.5, True),
    (1, "auto", 262144, 8192, 2.0, True),  # small memory: refusals
)
# the two published start-up logs (vLLM 0.10.1); here computed with 0.33's code at 2048
# batched tokens, the 0.10 rules are checked against the printed numbers in the test
PUBLISHED = (
    ("openai__gpt-oss-120b.json", 4, "auto", 16384, 2048, 45.32, True),
    ("Qwen__Qwen2-7B-Instruct.json", 2, "auto", 16384, 2048, 31.83, True),  # QWEN2_7B_INSTRUCT below
)


# real 2026 configs vendored by aiconfigurator-core 0.12.0 (its model_configs/), one or two per new family
AIC_CONFIGS = (
    "deepseek-ai--DeepSeek-V3.2_config.json",  # MLA with an indexer on every layer
    "nvidia--GLM-5.2-NVFP4_config.json",  # DSA with shared indexers (21 owners of 78 layers), fp8 KV by checkpoint
    "nvidia--GLM-5.1-NVFP4_config.json",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16_config.json",  # layers_block_type
    "Qwen--Qwen3.5-122B-A10B_config.json",
    "google--gemma-4-26B-A4B_config.json",  # heterogeneous head sizes, K = V on global layers
    "nvidia--Gemma-4-31B-IT-NVFP4_config.json",
    "XiaomiMiMo--MiMo-V2-Flash_config.json",  # SWA heads of their own, K 192 / V 128
    "moonshotai--Kimi-K3_config.json",  # MLA + Kimi Delta Attention state
    "nvidia--MiniMax-M3-NVFP4_config.json",  # MiniMaxM3SparseForConditionalGeneration: GQA + index keys
    "deepseek-ai--DeepSeek-V4-Flash_config.json",  # SWA + compressed MLA + indexer + compressor states, packed
    "deepseek-ai--DeepSeek-V4-Pro_config.json",  # 61 layers, ratio-128 layers first
    "nvidia--DeepSeek-V4-Flash-NVFP4_config.json",  # modelopt NVFP4 experts: the cache is fp8_ds_mla all the same
)


def _aic_dir() -> Path | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec("aiconfigurator_core")
    except ImportError:
        spec = None
    for base in ([Path(p) for p in spec.submodule_search_locations] if spec and spec.submodule_search_locations else []) + sorted(Path("/work/venvs/aic/lib").glob("python3*/site-packages/aiconfigurator_core")):
        if (base / "model_configs").is_dir():
            return base / "model_configs"
    return None


# architectures vLLM 0.33 serves whose per-layer specs this script does not build (yet): left out of
# the fixture, and the engine says its figures for them are estimates
NOT_BUILT: dict[str, str] = {}


# Qwen2-7B-Instruct's config.json (Hub, the fields that shape the cache): the second published log
QWEN2_7B_INSTRUCT = {
    "_name_or_path": "Qwen/Qwen2-7B-Instruct", "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768, "max_window_layers": 28,
    "sliding_window": 131072, "use_sliding_window": False, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "vocab_size": 152064, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645,
}


def _patch_platform():
    """Make the CPU-only platform look like CUDA for the config builders (RECIPES.md)."""
    from vllm.platforms import current_platform

    current_platform.device_type = "cuda"
    type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)
    return current_platform


def _is_kda_config(hf) -> bool:
    return isinstance(getattr(hf, "linear_attn_config", None), dict) and "kda_layers" in hf.linear_attn_config


def _layer_kinds(vcfg) -> list[tuple[str, int | None]]:
    """(kind, window) per decoder layer, from the HF config vLLM loaded."""
    hf = vcfg.model_config.hf_text_config
    n = vcfg.model_config.get_total_num_hidden_layers()
    names = getattr(hf, "layer_types", None)
    pattern = getattr(hf, "hybrid_override_pattern", None)
    window = vcfg.model_config.get_sliding_window()
    chunk = getattr(hf, "attention_chunk_size", None)
    kinds: list[tuple[str, int | None]] = []
    if names:
        # "indexed_attention": the layer_types vLLM's transformers gives GLM-5.x DSA (MLA + indexer);
        # Nemotron-H's layers_block_type arrives as layer_types with "linear_attention" for Mamba-2
        table = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding", "linear_attention": "mamba", "mamba": "mamba", "chunked_attention": "chunked", "mlp": "none", "moe": "none", "indexed_attention": "full"}
        for name in names[:n]:
            kind = table[name]  # a name missing here stops the case: add it rather than guess
            sw = getattr(hf, "sliding_window", None) if kind == "sliding" else None
            kinds.append((kind, sw if kind == "sliding" else (chunk if kind == "chunked" else None)))
    elif _is_kda_config(hf):
        # models/kimi_k3 (KimiLinearConfig.is_kda_layer): 1-based kda_layers hold KDA state, the rest are MLA
        kda = set(hf.linear_attn_config["kda_layers"])
        kinds = [("mamba", None) if i + 1 in kda else ("full", None) for i in range(n)]
    elif pattern:
        table = {"M": ("mamba", None), "*": ("full", None), "-": ("none", None), "E": ("none", None)}
        kinds = [table[ch] for ch in pattern]
    elif getattr(hf, "attn_layer_period", None):
        period, offset = hf.attn_layer_period, hf.attn_layer_offset
        kinds = [("full", None) if i % period == offset else ("mamba", None) for i in range(n)]
    elif chunk and getattr(hf, "no_rope_layers", None):
        kinds = [("chunked", chunk) if flag else ("full", None) for flag in hf.no_rope_layers[:n]]
    elif window:
        kinds = [("sliding", window)] * n
    else:
        kinds = [("full", None)] * n
    cross = getattr(hf, "cross_attention_layers", None) or []
    for i in cross:
        kinds[i] = ("cross", None)
    shared = getattr(hf, "num_kv_shared_layers", 0) or 0
    for i in range(n - shared, n):
        kinds[i] = ("none", None)
    return kinds


def _is_dsa(vcfg) -> bool:
    """DeepSeek sparse attention (DeepSeek-V3.2, GLM-5.x): MLA with a lightning indexer."""
    mc = vcfg.model_config
    return bool(mc.use_mla and getattr(mc.hf_text_config, "index_topk", None)) and mc.architecture in ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")


def _dsa_indexer_layers(hf, n: int) -> set[int]:
    """Layers that own an indexer (vllm/models/deepseek_v32/attention.py DeepseekV32Attention.__init__:
    ``skip_topk`` from index_topk_freq / index_skip_topk_offset / index_topk_pattern)."""
    freq = getattr(hf, "index_topk_freq", 1)
    pattern = getattr(hf, "index_topk_pattern", None)
    offset = getattr(hf, "index_skip_topk_offset", 2)
    owners = set()
    for layer_id in range(n):
        if pattern is None:
            skip = max(layer_id - offset + 1, 0) % freq != 0
        elif 0 <= layer_id < len(pattern):
            skip = pattern[layer_id] == "S"
        else:
            skip = False
        if not skip:
            owners.add(layer_id)
    return owners


def _dsa_backends(vcfg):
    """(sparse MLA backend, cache dtype string) a Hopper GPU selects (vllm/platforms/cuda.py
    sparse_tail: FLASH_ATTN_MLA_SPARSE takes 16-bit caches only, so fp8 goes to FLASHMLA_SPARSE,
    which serves any fp8 dtype as ``fp8_ds_mla``: mla_attention.py
    ``_canonicalize_sparse_mla_kv_cache_dtype``), and the indexer's backend."""
    try:
        from vllm.v1.attention.backends.mla.flashattn_mla_sparse import FlashAttnMLASparseBackend
    except ImportError:  # on a CPU the first import trips over the missing FA extensions; the module is loaded by then
        from vllm.v1.attention.backends.mla.flashattn_mla_sparse import FlashAttnMLASparseBackend
    from vllm.v1.attention.backends.mla.flashmla_sparse import FlashMLASparseBackend
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend

    if vcfg.cache_config.cache_dtype.startswith("fp8"):
        return FlashMLASparseBackend, "fp8_ds_mla", DeepseekV32IndexerBackend
    return FlashAttnMLASparseBackend, vcfg.cache_config.cache_dtype, DeepseekV32IndexerBackend


def _is_dsv4(vcfg) -> bool:
    return vcfg.model_config.architecture in ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration")


def _dsv4_backends():
    """DeepSeek-V4's backends on a Hopper GPU, in the order its layers register them: the FlashMLA
    attention class (models/deepseek_v4/nvidia/model.py ``_select_dsv4_attn_cls``: every CUDA arch but
    SM12 takes ``DeepseekV4FlashMLAAttention``) with its SWA cache backend, the lightning indexer's
    and the compressor states' (``CompressorBackend``). The sparse MLA and indexer kernels take
    256-token blocks only, so the shared block size is 256."""
    from vllm.models.deepseek_v4.compressor import CompressorBackend
    from vllm.models.deepseek_v4.nvidia.flashmla import DeepseekSparseSWAFlashMLABackend, DeepseekV4FlashMLAAttention
    from vllm.v1.attention.backends.mla.indexer import DeepseekV4IndexerBackend

    return [DeepseekSparseSWAFlashMLABackend, DeepseekV4FlashMLAAttention.backend_cls, DeepseekV4IndexerBackend, CompressorBackend]


def _attention_backend(vcfg):
    if _is_dsv4(vcfg):
        return _dsv4_backends()[1]
    if _is_dsa(vcfg):
        return _dsa_backends(vcfg)[0]
    if vcfg.model_config.use_mla:
        # vllm/platforms/cuda.py _get_backend_priorities on SM90: FLASH_ATTN_MLA first (16-bit caches
        # only, FA3 present), then FLASHMLA, which takes the fp8 caches
        if not vcfg.cache_config.cache_dtype.startswith("fp8"):
            import vllm.v1.attention.backends.fa_utils as fa_utils

            # fa_utils binds the CUDA kernels only on a CUDA platform; the class itself (block
            # sizes, layouts) is all this script reads, so stand-ins let it import on a CPU
            for name in ("flash_attn_varlen_func", "get_scheduler_metadata"):
                if not hasattr(fa_utils, name):
                    setattr(fa_utils, name, None)
            from vllm.v1.attention.backends.mla.flashattn_mla import FlashAttnMLABackend

            return FlashAttnMLABackend
        from vllm.v1.attention.backends.mla.flashmla import FlashMLABackend

        return FlashMLABackend
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    return FlashAttentionBackend


def _resolve_block_size(vcfg, backend) -> None:
    """Platform.update_block_size_for_backend with the backend a Hopper GPU picks."""
    from vllm.config.cache import CacheConfig
    from vllm.platforms.interface import Platform

    cache = vcfg.cache_config
    backends = [backend]
    if _is_dsv4(vcfg):
        backends = _dsv4_backends()
    elif _is_dsa(vcfg):
        backends.append(_dsa_backends(vcfg)[2])
    elif _is_minimax_m3_sparse(vcfg):
        backends = [*_minimax_m3_backends(), backend]
    if not cache.user_specified_block_size:
        cache.block_size = Platform._preferred_block_size_for_backends(backends, CacheConfig.DEFAULT_BLOCK_SIZE, vcfg)
    if vcfg.model_config.is_hybrid:
        saved = Platform._find_non_ssm_backends
        Platform._find_non_ssm_backends = classmethod(lambda cls, _cfg: [backend])
        try:
            import vllm.model_executor.layers.mamba.abstract as mamba_abstract

            kinds = {k for k, _ in _layer_kinds(vcfg)}
            align = _checkpoint_alignment(vcfg) if cache.mamba_cache_mode == "align" else None
            orig = mamba_abstract.get_mamba_prefill_checkpoint_alignment
            mamba_abstract.get_mamba_prefill_checkpoint_alignment = lambda _cfg: align if "mamba" in kinds else None
            try:
                Platform._align_hybrid_block_size(vcfg, backend)
            finally:
                mamba_abstract.get_mamba_prefill_checkpoint_alignment = orig
        finally:
            Platform._find_non_ssm_backends = saved


def _is_kda(vcfg) -> bool:
    """Kimi Linear / Kimi K3: Kimi Delta Attention layers listed in linear_attn_config.kda_layers."""
    return _is_kda_config(vcfg.model_config.hf_text_config)


def _checkpoint_alignment(vcfg) -> int:
    """Token grid of the prefill checkpoints a Mamba-like layer exports in "align" mode: FlashInfer
    GDN prefill 64; FlashKDA (the KDA prefill backend on SM90/SM10x with head_dim 128, bf16 and a
    gate lower bound: models/kimi_k3/nvidia/kda.py ``resolve_kda_prefill_backend``) 16
    (model_executor/layers/mamba/kda_checkpoint.py); MambaMixer2 1."""
    if _is_gdn(vcfg):
        return 64
    if _is_kda(vcfg):
        return 16
    return 1


def _is_gdn(vcfg) -> bool:
    hf = vcfg.model_config.hf_text_config
    return getattr(hf, "linear_num_value_heads", None) is not None


def _layer_specs(vcfg, backend) -> dict:
    """One KVCacheSpec per layer, as vLLM's attention and Mamba layers build them."""
    import torch
    from vllm.model_executor.layers.attention.attention import _largest_kernel_block_within
    from vllm.model_executor.models import ModelRegistry
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import ChunkedLocalAttentionSpec, FullAttentionSpec, MambaSpec, MLAAttentionSpec, SlidingWindowSpec, get_kv_quant_mode

    mc, cache, par = vcfg.model_config, vcfg.cache_config, vcfg.parallel_config
    dtype = kv_cache_dtype_str_to_dtype(cache.cache_dtype, mc)
    quant = get_kv_quant_mode(cache.cache_dtype)
    block = cache.block_size
    heads = mc.get_num_kv_heads(par)
    head = mc.get_head_size()
    hf = mc.hf_text_config
    head_v = getattr(hf, "v_head_dim", None) if not mc.use_mla and getattr(hf, "v_head_dim", None) else head
    if _is_dsv4(vcfg):
        return _dsv4_layer_specs(vcfg)
    if _is_dsa(vcfg):
        return _dsa_layer_specs(vcfg)
    if _is_minimax_m3_sparse(vcfg):
        return _minimax_m3_layer_specs(vcfg)
    specs: dict = {}
    mamba_spec = None
    for i, (kind, window) in enumerate(_layer_kinds(vcfg)):
        name = f"model.layers.{i}"
        if kind == "none":
            continue
        if kind == "cross":
            raise NotImplementedError("cross-attention (encoder-decoder) layers")
        if kind == "mamba":
            if mamba_spec is None:
                model_cls, _ = ModelRegistry.resolve_model_cls(mc.architecture, model_config=mc)
                mamba_spec = MambaSpec(
                    shapes=tuple(model_cls.get_mamba_state_shape_from_config(vcfg)),
                    dtypes=tuple(model_cls.get_mamba_state_dtype_from_config(vcfg)),
                    block_size=cache.mamba_block_size,
                    page_size_padded=cache.mamba_page_size_padded,
                    mamba_cache_mode=cache.mamba_cache_mode,
                    num_speculative_blocks=vcfg.num_speculative_tokens,
                )
                if cache.mamba_cache_mode == "align":
                    # MambaMixer2 and FlashInfer-GDN layers export prefill checkpoints
                    mamba_spec = replace(mamba_spec, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=_checkpoint_alignment(vcfg))
            specs[name] = mamba_spec
            continue
        if mc.use_mla:
            specs[name] = MLAAttentionSpec(block_size=block, num_kv_heads=1, max_tp_shards=1, head_size=head, dtype=dtype, cache_dtype_str=cache.cache_dtype, kv_quant_mode=quant)
            continue
        shape = _layer_shape(vcfg, i, kind)
        if shape is not None:  # families whose layers differ in heads or head size
            layer_heads, layer_head, layer_head_v, window = shape
            common = dict(num_kv_heads=layer_heads, head_size=layer_head, head_size_v=layer_head_v, dtype=dtype, kv_quant_mode=quant)
        else:
            common = dict(num_kv_heads=heads, head_size=head, head_size_v=head_v, dtype=dtype, kv_quant_mode=quant)
        if kind == "sliding":
            probe = backend.customize_spec(SlidingWindowSpec(block_size=1, sliding_window=window, **common))
            per_token = probe.real_page_size_bytes
            sw_block = _largest_kernel_block_within(backend, per_token, per_token * block, block, probe)
            specs[name] = SlidingWindowSpec(block_size=sw_block, sliding_window=window, **common)
        elif kind == "chunked":
            specs[name] = ChunkedLocalAttentionSpec(block_size=block, attention_chunk_size=window, **common)
        else:
            specs[name] = FullAttentionSpec(block_size=block, **common)
    del torch
    return specs


def _dsa_layer_specs(vcfg) -> dict:
    """DeepSeek-V3.2 / GLM-5.x: per layer the indexer's key cache (built first: the indexer is
    constructed before the attention, vllm/models/deepseek_v32/attention.py) and the sparse MLA
    latent, each passed through the model runner's ``customize_attention_spec``
    (vllm/v1/worker/gpu_model_runner.py ``get_kv_cache_spec``).

    * latent: ``MLAAttention.get_kv_cache_spec`` (model_executor/layers/attention/mla_attention.py):
      one head of kv_lora_rank + qk_rope_head_dim, ``fp8_ds_mla`` packed to 656 B a token,
      ``topk_buffer_width`` = index_topk (the shared top-k buffer), ``is_index_group_leader`` on
      the layers that own an indexer;
    * indexer: ``DeepseekV32IndexerCache.get_kv_cache_spec`` (model_executor/models/deepseek_v2.py):
      head_dim + head_dim // 128 x 4 bytes (fp8 keys + fp32 scales) of uint8, role INDEXER.
    """
    import torch
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import MLAAttentionSpec, SparseCacheRole, get_kv_quant_mode
    from vllm.v1.worker.utils import customize_attention_spec

    mc, cache = vcfg.model_config, vcfg.cache_config
    hf = mc.hf_text_config
    sparse, cache_dtype, indexer_backend = _dsa_backends(vcfg)
    block = cache.block_size
    n = mc.get_total_num_hidden_layers()
    owners = _dsa_indexer_layers(hf, n)
    index_head = hf.index_head_dim + hf.index_head_dim // 128 * 4
    specs: dict = {}
    for i in range(n):
        if i in owners:
            idx = MLAAttentionSpec(block_size=block, num_kv_heads=1, max_tp_shards=1, head_size=index_head, dtype=torch.uint8, cache_role=SparseCacheRole.INDEXER)
            specs[f"model.layers.{i}.self_attn.indexer.k_cache"] = customize_attention_spec(indexer_backend, idx)
        latent = MLAAttentionSpec(
            block_size=block, num_kv_heads=1, max_tp_shards=1, head_size=mc.get_head_size(), dtype=kv_cache_dtype_str_to_dtype(cache_dtype, mc), cache_dtype_str=cache_dtype,
            kv_quant_mode=get_kv_quant_mode(cache_dtype), state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype),
            topk_buffer_width=hf.index_topk, is_index_group_leader=i in owners,
        )
        specs[f"model.layers.{i}.self_attn.attn"] = customize_attention_spec(sparse, latent)
    return specs


def _dsv4_layer_specs(vcfg) -> dict:
    """DeepSeek-V4 (models/deepseek_v4/attention.py ``DeepseekV4Attention``, the FlashMLA subclass of
    models/deepseek_v4/nvidia/flashmla.py), in the order its modules register in the forward
    context, each spec passed through the model runner's ``customize_attention_spec``:

    * the compress ratio of layer i: ``compress_rates[layer_types[i]]`` (1 when absent: SWA only);
    * ratio 4 ("compressed sparse attention"): the indexer's key cache first
      (``DeepseekV4IndexerCache``: index_head_dim + index_head_dim // 128 x 4 bytes of uint8, fp8 keys
      plus fp32 scales, ``tokens_per_state`` = 4, pages aligned to 576 B under ``fp8_ds_mla``), then
      the indexer compressor's state (``CompressorStateCache`` of 2 x 2 x index_head_dim fp32);
    * every layer: its sliding-window cache (``DeepseekV4SWACache``: 64-token blocks, head_dim 512
      packed to 584 B a token, pages aligned to 576 B, window ``sliding_window``);
    * ratio > 1: the compressed latent (``DeepseekV4Attention.get_kv_cache_spec``: one 512-wide
      head packed to 584 B, ``tokens_per_state`` = ratio, 576-B alignment), then its compressor's
      state (``CompressorStateCache``: 2 x coff x head_dim fp32 with coff 2 for ratio 4, 1 for 128;
      4-token blocks and window 8 for ratio 4, 8-token blocks and window 128 for ratio 128).

    The FlashMLA class stores the fp8_ds_mla layout, so ``--kv-cache-dtype auto`` and every fp8
    dtype become ``fp8_ds_mla`` (``_resolve_dsv4_kv_cache_dtype`` writes it back on the cache
    config); a 16-bit cache is refused there.
    """
    import torch
    from vllm.models.deepseek_v4.compressor import CompressorBackend
    from vllm.v1.attention.backends.mla.indexer import DeepseekV4IndexerBackend
    from vllm.v1.kv_cache_interface import MLAAttentionSpec, SlidingWindowMLASpec, get_kv_quant_mode
    from vllm.v1.worker.utils import customize_attention_spec

    swa_backend, mla_backend, _, _ = _dsv4_backends()
    mc, cache = vcfg.model_config, vcfg.cache_config
    hf = mc.hf_config
    if cache.cache_dtype == "auto":
        cache.cache_dtype = "fp8"
    if not cache.cache_dtype.startswith("fp8"):
        raise NotImplementedError(f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {cache.cache_dtype}")
    cache.cache_dtype = "fp8_ds_mla"
    quant = get_kv_quant_mode("fp8_ds_mla")
    head = hf.head_dim
    index_head = hf.index_head_dim + hf.index_head_dim // 128 * 4

    def state(ratio: int, dim: int):
        coff = 1 + (ratio == 4)
        spec = SlidingWindowMLASpec(block_size=4 if ratio == 4 else 8, num_kv_heads=1, max_tp_shards=1, head_size=2 * coff * dim, dtype=torch.float32, sliding_window=coff * ratio, alignment=576)
        return customize_attention_spec(CompressorBackend, spec)

    specs: dict = {}
    for i in range(hf.num_hidden_layers):
        ratio = max(1, hf.compress_rates.get(hf.layer_types[i], 0))
        prefix = f"model.layers.{i}.attn"
        if ratio == 4:
            idx = MLAAttentionSpec(block_size=cache.block_size, num_kv_heads=1, max_tp_shards=1, head_size=index_head, dtype=torch.uint8, tokens_per_state=4, alignment=576)
            specs[f"{prefix}.indexer.k_cache"] = customize_attention_spec(DeepseekV4IndexerBackend, idx)
            specs[f"{prefix}.indexer.compressor.state_cache"] = state(4, hf.index_head_dim)
        swa = SlidingWindowMLASpec(
            block_size=64, num_kv_heads=1, max_tp_shards=1, head_size=head, dtype=torch.uint8, sliding_window=hf.sliding_window, cache_dtype_str="fp8_ds_mla",
            state_content_bytes=584, alignment=576, model_version="deepseek_v4", kv_quant_mode=quant,
        )
        specs[f"{prefix}.swa_cache"] = customize_attention_spec(swa_backend, swa)
        if ratio > 1:
            latent = MLAAttentionSpec(
                block_size=cache.block_size, num_kv_heads=1, max_tp_shards=1, head_size=head, dtype=torch.uint8, tokens_per_state=ratio, cache_dtype_str="fp8_ds_mla",
                alignment=576, model_version="deepseek_v4", kv_quant_mode=quant, state_content_bytes=584,
            )
            specs[prefix] = customize_attention_spec(mla_backend, latent)
            specs[f"{prefix}.compressor.state_cache"] = state(ratio, head)
    return specs


def _is_minimax_m3_sparse(vcfg) -> bool:
    return vcfg.model_config.architecture.startswith("MiniMaxM3Sparse")


def _minimax_m3_backends():
    """MiniMax-M3's sparse-attention and index-key backends (models/minimax_m3/common): both read
    128-token pages only."""
    from vllm.models.minimax_m3.common.indexer import MiniMaxM3IndexerBackend
    from vllm.models.minimax_m3.common.sparse_attention import MiniMaxM3SparseBackend

    return MiniMaxM3SparseBackend, MiniMaxM3IndexerBackend


def _minimax_m3_layer_specs(vcfg) -> dict:
    """MiniMax-M3 (models/minimax_m3/nvidia/model.py ``MiniMaxM3DecoderLayer``): layers flagged in
    sparse_attention_config.sparse_attention_freq run ``MiniMaxM3SparseAttention``, which builds its
    ``MiniMaxM3IndexerCache`` (index keys of sparse_index_dim, bf16 unless --attention-config sets
    indexer_kv_dtype; one vector a token, role INDEXER) before registering its own GQA K/V
    ``FullAttentionSpec``; the other layers are plain ``Attention`` (FLASH_ATTN). KV heads split as
    max(1, heads // tp)."""
    import torch
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SparseCacheRole, get_kv_quant_mode
    from vllm.v1.worker.utils import customize_attention_spec

    mc, cache = vcfg.model_config, vcfg.cache_config
    hf = mc.hf_text_config
    sparse_backend, indexer_backend = _minimax_m3_backends()
    sparse_cfg = hf.sparse_attention_config
    flagged = {i for i, f in enumerate(sparse_cfg.get("sparse_attention_freq") or []) if f != 0}
    heads = max(1, hf.num_key_value_heads // vcfg.parallel_config.tensor_parallel_size)
    dtype = kv_cache_dtype_str_to_dtype(cache.cache_dtype, mc)
    main = dict(block_size=cache.block_size, num_kv_heads=heads, head_size=hf.head_dim, head_size_v=hf.head_dim, dtype=dtype, kv_quant_mode=get_kv_quant_mode(cache.cache_dtype))
    specs: dict = {}
    for i in range(mc.get_total_num_hidden_layers()):
        if i in flagged:
            idx = MLAAttentionSpec(block_size=cache.block_size, num_kv_heads=1, head_size=sparse_cfg["sparse_index_dim"], dtype=torch.bfloat16, cache_role=SparseCacheRole.INDEXER)
            specs[f"model.layers.{i}.self_attn.indexer.k_cache"] = customize_attention_spec(indexer_backend, idx)
            specs[f"model.layers.{i}.self_attn"] = customize_attention_spec(sparse_backend, FullAttentionSpec(**main))
        else:
            specs[f"model.layers.{i}.self_attn.attn"] = customize_attention_spec(FlashAttentionBackend, FullAttentionSpec(**main))
    return specs


def _is_gemma4(vcfg) -> bool:
    return vcfg.model_config.hf_text_config.model_type in ("gemma4", "gemma4_text")


def _layer_shape(vcfg, i: int, kind: str) -> tuple[int, int, int, int | None] | None:
    """(KV heads on one GPU, K head size, V head size, window) of layer ``i`` where they vary by layer:

    * Gemma 4 (model_executor/models/gemma4.py ``Gemma4DecoderLayer``): ``per_layer_config[i]``
      head_dim / num_key_value_heads (global layers: global_head_dim and, with attention_k_eq_v,
      num_global_key_value_heads; K is loaded into both K and V, so V is cached at K's size);
    * MiMo-V2 (model_executor/models/mimo_v2.py ``MiMoV2DecoderLayer``): sliding layers use the
      swa_* heads and ``sliding_window_size``, full layers num_key_value_heads / head_dim /
      v_head_dim (K and V of different sizes: the FLASH_ATTN_DIFFKV backend).
    Heads split over TP as ``Gemma4Attention`` / ``MiMoV2Attention`` do: max(1, total // tp).
    """
    hf = vcfg.model_config.hf_text_config
    tp = vcfg.parallel_config.tensor_parallel_size
    if _is_gemma4(vcfg):
        layer = hf.per_layer_config[i]
        return max(1, layer.num_key_value_heads // tp), layer.head_dim, layer.head_dim, hf.sliding_window if kind == "sliding" else None
    if vcfg.model_config.architecture in ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"):
        if kind == "sliding":
            return max(1, hf.swa_num_key_value_heads // tp), hf.swa_head_dim, getattr(hf, "swa_v_head_dim", None) or hf.swa_head_dim, hf.sliding_window_size
        return max(1, hf.num_key_value_heads // tp), hf.head_dim, getattr(hf, "v_head_dim", None) or hf.head_dim, None
    return None


def _gemma4_hopper_backend(vcfg) -> None:
    """``Gemma4Config.verify_and_update_config`` (model_executor/models/config.py) on a Hopper GPU
    with FA4 (vllm_flash_attn ships it; SM90 qualifies): 16-bit caches run FA4 on every layer,
    fp8 ones pick FA3/FA4 per layer; either way FLASH_ATTN. On this CPU FA4 is missing and vLLM
    would force TRITON_ATTN, so the choice is set back to what the GPU does. The block size: an
    fp8 cache with 512-wide heads on SM90 needs the 64-token pages of the FA4 FP8 kernel
    (``FlashAttentionBackend._get_sm90_fa4_fp8_kv_block_size``)."""
    vcfg.attention_config.backend = None
    if vcfg.cache_config.cache_dtype.startswith("fp8"):
        vcfg.attention_config.flash_attn_version = None
        if vcfg.model_config.get_head_size() == 512 and vcfg.cache_config.cache_dtype in ("fp8", "fp8_e4m3") and not vcfg.cache_config.user_specified_block_size:
            vcfg.cache_config.block_size = 64
    else:
        vcfg.attention_config.flash_attn_version = 4


def _group_kind(spec, name: str = "") -> str:
    """The fixture's name for a layer's cache kind; DeepSeek-V4's are told apart by the module that
    registers them (``...indexer.k_cache``, ``...compressor.state_cache``)."""
    from vllm.v1.kv_cache_interface import ChunkedLocalAttentionSpec, MambaSpec, MLAAttentionSpec, SlidingWindowSpec, UniformTypeKVCacheSpecs

    if isinstance(spec, UniformTypeKVCacheSpecs):
        name, spec = next(iter(spec.kv_cache_specs.items()))
    if name.endswith("compressor.state_cache"):
        return "compressor"
    if name.endswith("indexer.k_cache"):
        return "indexer"
    if isinstance(spec, MLAAttentionSpec):
        return "indexer" if spec.cache_role.value == "indexer" else "mla"
    if isinstance(spec, SlidingWindowSpec):
        return "sliding"
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return "chunked"
    if isinstance(spec, MambaSpec):
        return "mamba"
    return "full"


def _first_reason(exc: Exception) -> str:
    """The sentence vLLM raised (pydantic wraps it as 'Value error, ... [type=...')."""
    text = str(exc)
    if "Value error, " in text:
        text = text.split("Value error, ", 1)[1].split(" [type=", 1)[0]
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def derived_max_model_len(config: dict) -> int | None:
    """vLLM's own default max_model_len for a config (None when vLLM refuses the model)."""
    from vllm.engine.arg_utils import EngineArgs

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        try:
            return EngineArgs(model=tmp, skip_tokenizer_init=True).create_engine_config().model_config.max_model_len
        except Exception:
            return None


def run_case(config: dict, tp: int, kv_dtype: str, max_model_len: int, batched: int, avail_gib: float, prefix: bool) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config, get_kv_cache_capacity

    available = int(avail_gib * GIB)
    case = {"tp": tp, "kv_cache_dtype": kv_dtype, "max_model_len": max_model_len, "max_num_batched_tokens": batched, "available_kv_bytes": available, "enable_prefix_caching": prefix}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        try:
            args = EngineArgs(model=tmp, skip_tokenizer_init=True, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype, max_model_len=max_model_len, max_num_batched_tokens=batched, enable_prefix_caching=prefix, distributed_executor_backend="mp")
            vcfg = args.create_engine_config()
        except Exception as exc:  # vLLM refuses the configuration itself
            case["config_error"] = _first_reason(exc)
            return case
        backend = _attention_backend(vcfg)
        try:
            _resolve_block_size(vcfg, backend)
            if _is_gemma4(vcfg):
                _gemma4_hopper_backend(vcfg)
            specs = _layer_specs(vcfg, backend)
        except NotImplementedError as exc:
            case["unsupported"] = str(exc)
            return case
        used = [*_minimax_m3_backends(), backend] if _is_minimax_m3_sparse(vcfg) else (_dsv4_backends() if _is_dsv4(vcfg) else [backend])
        layouts = [m.name for m in get_supported_kv_cache_layouts(used)]
        resolve_kv_cache_layout(vcfg, [layouts], list(specs.values()))
        case["block_size"] = vcfg.cache_config.block_size
        case["mamba_cache_mode"] = vcfg.cache_config.mamba_cache_mode
        case["max_in_flight_tokens"] = vcfg.max_in_flight_tokens
        groups = get_global_kv_cache_groups(vcfg, [specs])
        try:
            configs = get_kv_cache_configs(vcfg, [specs], [available], groups)
        except ValueError as exc:
            case["refusal"] = str(exc)
            return case
        sched = generate_scheduler_kv_cache_config(configs)
        tokens, concurrency = get_kv_cache_capacity(vcfg, sched)
        out_groups = []
        from vllm.utils.math_utils import cdiv
        from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

        for worker, g in zip(configs[0].kv_cache_groups, sched.kv_cache_groups, strict=True):
            spec = g.kv_cache_spec
            whole = worker.kv_cache_spec
            if isinstance(whole, UniformTypeKVCacheSpecs) and len(set(whole.kv_cache_specs.values())) > 1:
                # one group of layers of one type but different specs (MLA latent + indexer): the
                # scheduler keeps its first layer's spec; the pool's block spans every layer's page
                kinds = "+".join(dict.fromkeys(_group_kind(s, name) for name, s in whole.kv_cache_specs.items()))
                out_groups.append({"kind": kinds, "layers": len(g.layer_names), "block_size": whole.block_size, "page_bytes": whole.page_size_bytes, "blocks_per_request": whole.max_memory_usage_pages(vcfg)})
                continue
            out_groups.append({"kind": _group_kind(whole, g.layer_names[0]) if isinstance(whole, UniformTypeKVCacheSpecs) else _group_kind(spec, g.layer_names[0]), "layers": len(g.layer_names), "block_size": spec.block_size, "page_bytes": spec.page_size_bytes, "blocks_per_request": cdiv(spec.max_memory_usage_bytes(vcfg), spec.page_size_bytes)})
        case.update(num_blocks=sched.num_blocks, kv_cache_tokens=tokens, max_concurrency=concurrency, blocks_per_request=sum(g["blocks_per_request"] for g in out_groups), groups=out_groups)
        return case


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, default=Path(os.environ.get("KVP_REFERENCE_DIR", ROOT.parent / "shared" / "reference")) / "configs", help="folder of reference config.json files (default ../shared/reference/configs)")
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "vllm_engine_cases.json", help="fixture to write")
    p.add_argument("--aic", type=Path, default=None, help="aiconfigurator-core's model_configs folder (default: found from the installed package or /work/venvs/aic)")
    p.add_argument("--only", default="", help="comma-separated case-insensitive substrings of config file names to run (default: all)")
    p.add_argument("--merge", action="store_true", help="keep the cases of configs not rerun from the existing fixture (default: write only what ran)")
    args = p.parse_args(argv)

    import vllm

    _patch_platform()
    sources = [("reference", f) for f in sorted(args.reference.glob("*.json"))] + [("preset", f) for f in sorted((ROOT / "model_configs").glob("*.json"))]
    sources.append(("published", Path("Qwen__Qwen2-7B-Instruct.json")))
    aic = args.aic or _aic_dir()
    if aic is not None:
        sources += [("aic", aic / name) for name in AIC_CONFIGS if (aic / name).is_file()]
    cases: list[dict] = []
    configs: dict[str, dict] = {}
    t0 = time.time()
    for origin, path in sources:
        if args.only and not any(part.strip() and part.strip().lower() in path.name.lower() for part in args.only.split(",")):
            continue
        config = QWEN2_7B_INSTRUCT if origin == "published" else json.loads(path.read_text())
        skipped = NOT_BUILT.get(next(iter(config.get("architectures") or []), ""))
        if skipped:
            print(f"skipped {origin}/{path.name}: {skipped}", file=sys.stderr)
            continue
        configs[f"{origin}/{path.name}"] = config
        settings = [tuple(s) for name, *s in PUBLISHED if name == path.name] if origin != "preset" else []
        derived = derived_max_model_len(config)
        clamp = [(tp, dt, min(length, derived or length), *rest) for tp, dt, length, *rest in SETTINGS]
        # one setting past the model's maximum: vLLM refuses it before sizing anything
        over = [(1, "auto", 2 * derived, 8192, 20.0, True)] if derived else []
        for setting in dict.fromkeys((*clamp, *over, *settings)):
            try:
                case = run_case(config, *setting)
            except Exception as exc:
                traceback.print_exc()
                case = {"tp": setting[0], "kv_cache_dtype": setting[1], "max_model_len": setting[2], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            case = {"source": f"{origin}/{path.name}", **case}
            cases.append(case)
            print(json.dumps({k: case.get(k) for k in ("source", "tp", "kv_cache_dtype", "max_model_len", "num_blocks", "kv_cache_tokens", "max_concurrency", "config_error", "unsupported", "error")}), file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.merge and args.out.is_file():
        old = json.loads(args.out.read_text())
        ran = {c["source"] for c in cases}
        cases = [c for c in old["cases"] if c["source"] not in ran] + cases
        configs = {**old["configs"], **configs}
    write_fixture(args.out, vllm.__version__, round(time.time() - t0, 1), cases, configs)
    print(f"{len(cases)} cases -> {args.out}", file=sys.stderr)
    return 0


def write_fixture(out: Path, version: str, seconds: float, cases: list[dict], configs: dict[str, dict]) -> None:
    """The fixture carries the configs it was computed from, so the test needs nothing else."""
    used = {c["source"] for c in cases}
    out.write_text(json.dumps({"vllm_version": version, "assumptions": "CUDA Hopper (SM90) backends: FLASH_ATTN (block 16; FA4 for Gemma 4), FLASH_ATTN_MLA (block 16) for 16-bit MLA and FLASHMLA (block 64) for fp8, FLASH_ATTN_MLA_SPARSE / FLASHMLA_SPARSE + the DSA indexer (block 64), DeepSeek-V4's FLASHMLA_SPARSE_DSV4 + its indexer (block 256; SWA 64, compressor states 4 / 8), FlashInfer GDN prefill, FlashKDA; async scheduling as vLLM defaults", "generated_s": seconds, "cases": cases, "configs": {k: v for k, v in configs.items() if k in used}}, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
