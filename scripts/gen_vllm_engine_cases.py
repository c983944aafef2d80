"""Regenerate ``tests/data/vllm_engine_cases*.json`` with vLLM's own KV-cache sizing code.

Run it in a throw-away venv that holds vLLM (never in CI, never in the project's venv); each
release writes its own fixture (0.33: ``vllm_engine_cases.json``; older: ``_0.10``, ``_0.19``, ``_0.24``)::

    python3 -m venv /work/venvs/vllm033 && /work/venvs/vllm033/bin/pip install vllm==0.33.0
    HF_HUB_OFFLINE=1 /work/venvs/vllm033/bin/python scripts/gen_vllm_engine_cases.py
    # likewise vllm==0.24.0, 0.19.0, 0.11.0 and 0.10.1.1 (0.10: then pip install transformers==4.56.2, the
    # transformers of its release; it resolves 5.x, whose configs 0.10 cannot read)
    # 0.11.0: transformers==4.57.1 likewise (pip resolves 5.x, whose config errors are not 0.11's), and
    # CUDA_VISIBLE_DEVICES="" so that vllm.triton_utils keeps the real Triton on a CPU (with no driver
    # it swaps in a placeholder without tl.exp, and Qwen3-Next's model class then fails to import)

Older releases go through small shims (section "vLLM 0.10 - 0.24"): their block-size rule, their
spec classes (fields filtered per release), their ``get_kv_cache_config(s)`` and log lines; 0.10
also needs the CUDA platform's answers patched in (it finds no platform on a CPU) and lets the V1
oracle pick V0 for Mamba hybrids as ``vllm serve`` does. Models whose specs only the 0.33 builders
write (indexer / compressed caches) are left out of the older fixtures when those releases load them.

For every config in ``$KVP_REFERENCE_DIR/configs`` (default ``../shared/reference/configs``) and
every preset in ``model_configs/`` it builds a real ``VllmConfig`` with
``EngineArgs(...).create_engine_config()`` from a folder holding only ``config.json``, then
follows ``EngineCore._initialize_kv_caches`` (vllm/v1/engine/core.py) on a CPU:

* attention backend: for MLA and sparse MLA, vLLM's own selector (``CudaPlatformBase.get_attn_backend_cls``
  with SM 9.0), which also refuses an explicit ``--block-size`` no Hopper backend takes (16 for
  DeepSeek-V3.2 / GLM-5.x: "No valid attention backend found"); FLASH_ATTN for other attention;
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
  Nemotron-NAS / DeciLM (model_type ``nemotron-nas``, which transformers lacks: vLLM reads it only
  with --trust-remote-code) loads through a stand-in config class written here
  (``_nemotron_nas_config``) that replaces the checkpoint's remote ``configuration_decilm.py``,
  which is never run; its layers are built as ``DeciLMDecoderLayer`` builds them (plus one
  synthetic variant, ``VARIANTS``, whose layers' KV heads differ);
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
VLLM = (0, 33)  # (major, minor) of the vLLM that runs this script; set by main()

# (tp, kv dtype, max_model_len, max_num_batched_tokens, available GiB, prefix caching)
SETTINGS = (
    (1, "auto", 8192, 8192, 20.0, True),
    (2, "auto", 32768, 8192, 31.83, True),
    (4, "fp8", 16384, 2048, 45.32, True),
    (1, "auto", 131072, 8192, 60.0, False),
    (8, "fp8_e4m3", 65536, 8192, 9.5, True),
    (1, "auto", 262144, 8192, 2.0, True),  # small memory: refusals
)
# explicit --block-size settings run (with the first SETTINGS row) for MLA configs
USER_BLOCK_SIZES = (16, 64)
# the two published start-up logs (vLLM 0.10.1); here computed with 0.33's code at 2048
# batched tokens, the 0.10 rules are checked against the printed numbers in the test
PUBLISHED = (
    ("openai__gpt-oss-120b.json", 4, "auto", 16384, 2048, 45.32, True),
    ("Qwen__Qwen2-7B-Instruct.json", 2, "auto", 16384, 2048, 31.83, True),  # QWEN2_7B_INSTRUCT below
)


# real 2026 configs vendored by aiconfigurator-core 0.12.0 (its model_configs/), one or two per new family
AIC_CONFIGS = (
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json",  # Nemotron-NAS: per-layer KV heads, no-op attention layers
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


def _mixed_heads(config: dict) -> dict:
    """Llama-3.3-Nemotron-Super-49B with n_heads_in_group cycling 8, 16, 32, 64, 4 over its attention
    layers (KV heads 8, 4, 2, 1, 16): a synthetic config, not a checkpoint, whose layers' pages differ,
    as in other Nemotron-NAS checkpoints (vLLM groups them as one uniform-type group)."""
    out = json.loads(json.dumps(config))
    attention = [b["attention"] for b in out["block_configs"] if not b["attention"]["no_op"]]
    for i, attn in enumerate(attention):
        attn["n_heads_in_group"] = (8, 16, 32, 64, 4)[i % 5]
    return out


# synthetic variants of AIC configs (origin "variant"): (file name, AIC config it derives from, how)
VARIANTS = (("nvidia--Llama-3_3-Nemotron-Super-49B-v1_mixed-heads.json", "nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json", _mixed_heads),)


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
    cls = type(current_platform)
    if hasattr(cls, "support_hybrid_kv_cache"):
        cls.support_hybrid_kv_cache = classmethod(lambda cls: True)
    if VLLM < (0, 19):
        _patch_platform_0_10(current_platform)
    _register_local_configs()
    from vllm.config import ModelConfig

    if not hasattr(ModelConfig, "get_total_num_hidden_layers"):  # 0.10 counted them inline
        ModelConfig.get_total_num_hidden_layers = lambda self: getattr(self.hf_text_config, "num_hidden_layers", 0)
    return current_platform


# model types the Hub checkpoints load with --trust-remote-code on a transformers that lacks them
# (vLLM 0.10 / 0.19 pin transformers 4.x); vLLM ships its own copy of these config classes
LOCAL_CONFIGS = {"nemotron_h": ("vllm.transformers_utils.configs.nemotron_h", "NemotronHConfig")}


def _register_local_configs() -> None:
    """Stand in for the checkpoint's remote configuration code with vLLM's own config class."""
    import importlib

    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type, (module, name) in LOCAL_CONFIGS.items():
        if model_type in CONFIG_MAPPING:
            continue
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        AutoConfig.register(model_type, cls, exist_ok=True)
        _REGISTERED_HERE.add(model_type)
    if "nemotron-nas" not in CONFIG_MAPPING and VLLM >= (0, 33):
        AutoConfig.register("nemotron-nas", _nemotron_nas_config(), exist_ok=True)
        _REGISTERED_HERE.add("nemotron-nas")


def _nemotron_nas_config():
    """A config class for model_type ``nemotron-nas`` (Llama-3.3-Nemotron-Super-49B & co.) that stands
    in for the checkpoint's remote ``configuration_decilm.DeciLMConfig`` (never downloaded nor run).

    Like that class it is a ``LlamaConfig`` whose ``num_key_value_heads`` and ``intermediate_size``
    are None and whose ``block_configs`` (one per layer) read as objects: vLLM 0.33 reads
    ``block_configs[i].attention.no_op`` / ``.n_heads_in_group`` and ``.ffn.*`` as attributes
    (model_executor/models/nemotron_nas.py ``DeciLMDecoderLayer``;
    transformers_utils/model_arch_config_convertor.py ``NemotronNasModelArchConfigConvertor``).
    Only the fields the checkpoint's config.json holds are kept; nothing is derived from them here."""
    from types import SimpleNamespace

    from huggingface_hub.dataclasses import strict
    from transformers import LlamaConfig

    def block(b):
        return SimpleNamespace(**{k: SimpleNamespace(**v) if isinstance(v, dict) else v for k, v in b.items()}) if isinstance(b, dict) else b

    @strict
    class NemotronNasStandInConfig(LlamaConfig):
        model_type = "nemotron-nas"
        block_configs: list | None = None
        intermediate_size: int | None = None  # per layer in block_configs[i].ffn

        def __post_init__(self, **kwargs):
            super().__post_init__(**kwargs)
            self.num_key_value_heads = None  # per layer: num_attention_heads // n_heads_in_group
            self.block_configs = [block(b) for b in self.block_configs or []]

        def to_dict(self):
            out = super().to_dict()
            out["block_configs"] = [{k: vars(v) if isinstance(v, SimpleNamespace) else v for k, v in vars(b).items()} for b in self.block_configs]
            return out

    return NemotronNasStandInConfig


_REGISTERED_HERE: set[str] = set()


def _patch_platform_0_10(platform) -> None:
    """vLLM 0.10 on a machine without CUDA finds no platform (UnspecifiedPlatform): answer the
    questions ``EngineArgs.create_engine_config`` asks as ``CudaPlatform`` does on a Hopper GPU."""
    cls = type(platform)
    cls.supports_v1 = classmethod(lambda cls, model_config: True)
    cls.is_async_output_supported = classmethod(lambda cls, enforce_eager: not enforce_eager)
    # CudaPlatform.is_kv_cache_dtype_supported: FLASH_ATTN (FA3 on Hopper) supports fp8 caches
    cls.is_kv_cache_dtype_supported = classmethod(lambda cls, kv_cache_dtype, *args: kv_cache_dtype.startswith("fp8"))

    def check_and_update_config(cls, vcfg) -> None:
        # vllm 0.10 platforms/cuda.py CudaPlatform.check_and_update_config: 16-token blocks,
        # FlashMLA (the default MLA backend before Blackwell) forces 64
        cache = vcfg.cache_config
        if cache and cache.block_size is None:
            cache.block_size = 16
        if vcfg.model_config is not None and vcfg.model_config.use_mla and cache.block_size != 64:
            cache.block_size = 64

    cls.check_and_update_config = classmethod(check_and_update_config)
    # the safetensors look-up of a local folder fails and is retried after 2 s: no wait
    from vllm.transformers_utils import config as hf_config

    hf_config.with_retry.__defaults__ = (2, 0)


def vllm_version() -> str:
    import vllm

    return vllm.__version__


def _host_args() -> dict:
    """EngineArgs that only this host needs: up to 0.19 vLLM reserves 4 GiB of CPU swap per GPU
    and refuses TP 8 on a machine with less than 46 GiB of RAM; no swap changes no GPU number."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return {"swap_space": 0} if "swap_space" in {f.name for f in dataclasses.fields(EngineArgs)} else {}


def _cuda_hybrid_manager_0_10(vcfg) -> None:
    """vLLM 0.10 ``VllmConfig.__post_init__`` turns the hybrid KV-cache manager off on anything
    but CUDA / ROCm; on CUDA only chunked local attention (without
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE) turns it off."""
    vcfg.scheduler_config.disable_hybrid_kv_cache_manager = vcfg.model_config.attention_chunk_size is not None


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
    elif getattr(hf, "model_type", None) == "nemotron-nas":
        # DeciLMDecoderLayer: a layer whose block_configs[i].attention.no_op is set has no self_attn
        # (no KV cache); every other layer builds DeciLMAttention (full attention). vLLM 0.33 reads no
        # other attention field (replace_with_linear is not looked at).
        kinds = [("none", None) if b.attention.no_op else ("full", None) for b in hf.block_configs[:n]]
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
    """(sparse MLA backend, cache dtype string, indexer backend) on a Hopper GPU: the sparse backend
    from vLLM's own selector (vllm/platforms/cuda.py sparse_tail: FLASH_ATTN_MLA_SPARSE takes 16-bit
    caches only, so fp8 goes to FLASHMLA_SPARSE, which serves any fp8 dtype as ``fp8_ds_mla``:
    mla_attention.py ``_canonicalize_sparse_mla_kv_cache_dtype``); the DSA indexer's backend."""
    try:
        from vllm.v1.attention.backends.mla.flashattn_mla_sparse import FlashAttnMLASparseBackend  # noqa: F401
    except ImportError:  # on a CPU the first import trips over the missing FA extensions; the module is loaded by then
        pass
    from vllm.v1.attention.backends.mla.flashmla_sparse import FlashMLASparseBackend
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend

    backend = _vllm_selected_backend(vcfg, use_sparse=True)
    return backend, "fp8_ds_mla" if backend is FlashMLASparseBackend else vcfg.cache_config.cache_dtype, DeepseekV32IndexerBackend


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


def _vllm_selected_backend(vcfg, *, use_sparse: bool = False):
    """The decoder attention backend vLLM 0.33's own selector picks on a Hopper GPU:
    ``CudaPlatformBase.get_attn_backend_cls`` (vllm/platforms/cuda.py) with SM 9.0, i.e. the
    Hopper priority list of ``_get_backend_priorities`` and each backend's
    ``validate_configuration`` (head size, dtype, KV cache dtype, block size when the user gave
    one, MLA / sparse / sinks). Raises vLLM's ValueError ("No valid attention backend found ...")
    where no backend takes the setting, e.g. ``--block-size 16`` for sparse MLA, whose backends
    all need a multiple of 64. (RECIPES: the CUDA platform module imports here with a stub for
    its op-registration extension; FA3's MLA support and the MLA prefill backend answer as on an H100.)"""
    import types

    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    import vllm.v1.attention.backends.fa_utils as fa_utils
    import vllm.v1.attention.ops.flashmla as flashmla_ops
    from vllm.config import set_current_vllm_config
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability
    from vllm.utils.import_utils import resolve_obj_by_qualname
    from vllm.v1.attention.selector import AttentionSelectorConfig

    for name in ("flash_attn_varlen_func", "get_scheduler_metadata"):
        if not hasattr(fa_utils, name):
            setattr(fa_utils, name, None)
    # FA3's MLA support and the FlashMLA kernels are present on an H100 (their CUDA extensions are not here)
    saved = [(mod, name, getattr(mod, name)) for mod, names in ((fa_utils, ("flash_attn_supports_mla",)), (flashmla_ops, ("is_flashmla_dense_supported", "is_flashmla_sparse_supported"))) for name in names if hasattr(mod, name)]
    for mod, name, _ in saved:
        setattr(mod, name, (lambda *a, **k: True) if mod is fa_utils else (lambda *a, **k: (True, None)))
    mc, cache = vcfg.model_config, vcfg.cache_config
    config = AttentionSelectorConfig(
        head_size=mc.get_head_size(), dtype=mc.dtype, kv_cache_dtype=cache.cache_dtype,
        block_size=cache.block_size if cache.user_specified_block_size else None,
        use_mla=mc.use_mla, has_sink=bool(getattr(mc.hf_text_config, "attention_sink", False) or mc.hf_text_config.model_type == "gpt_oss"), use_sparse=use_sparse,
    )  # fmt: skip
    cls = CudaPlatformBase
    capability = cls.__dict__.get("get_device_capability")
    cls.get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(9, 0))
    try:
        with set_current_vllm_config(vcfg):
            if os.environ.get("KVP_SELECTOR_DEBUG"):
                print(cls.get_valid_backends(DeviceCapability(9, 0), config, num_heads=mc.get_num_attention_heads(vcfg.parallel_config))[1], file=sys.stderr)
            return resolve_obj_by_qualname(cls.get_attn_backend_cls(vcfg.attention_config.backend, config, num_heads=mc.get_num_attention_heads(vcfg.parallel_config)))
    finally:
        if capability is None:
            del cls.get_device_capability
        else:
            cls.get_device_capability = capability
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def _attention_backend(vcfg):
    """The decoder attention backend on a Hopper GPU. MLA (dense and sparse) through vLLM's own
    selector (:func:`_vllm_selected_backend`), which also refuses a user block size no backend
    takes; other attention is FLASH_ATTN, the first of the SM90 priorities (its
    validate_configuration reads the FA3 extension's version, which a CPU cannot answer)."""
    if _is_dsv4(vcfg):
        return _dsv4_backends()[1]
    if _is_dsa(vcfg):
        return _dsa_backends(vcfg)[0]
    if vcfg.model_config.use_mla:
        return _vllm_selected_backend(vcfg)
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


def _mamba_state(vcfg) -> tuple[tuple, tuple]:
    """Shapes and dtypes of one layer's Mamba / linear-attention state on one GPU: the model
    class's ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``."""
    from vllm.model_executor.models import ModelRegistry

    mc = vcfg.model_config
    model_cls, _ = ModelRegistry.resolve_model_cls(mc.architecture, model_config=mc)
    return tuple(tuple(x) for x in model_cls.get_mamba_state_shape_from_config(vcfg)), tuple(model_cls.get_mamba_state_dtype_from_config(vcfg))


def _cached_layers(vcfg):
    """(index, layer name, kind, window) of every layer that caches something.

    Raises:
        NotImplementedError: cross-attention layers (vLLM's V1 start-up has no spec for them).
    """
    for i, (kind, window) in enumerate(_layer_kinds(vcfg)):
        if kind == "cross":
            raise NotImplementedError("cross-attention (encoder-decoder) layers")
        if kind != "none":
            yield i, f"model.layers.{i}", kind, window


def _layer_specs(vcfg, backend) -> dict:
    """One KVCacheSpec per layer, as vLLM's attention and Mamba layers build them."""
    import torch
    from vllm.model_executor.layers.attention.attention import _largest_kernel_block_within
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
    for i, name, kind, window in _cached_layers(vcfg):
        if kind == "mamba":
            if mamba_spec is None:
                shapes, dtypes = _mamba_state(vcfg)
                mamba_spec = MambaSpec(
                    shapes=shapes,
                    dtypes=dtypes,
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
    * Nemotron-NAS (model_executor/models/nemotron_nas.py ``DeciLMDecoderLayer``): KV heads
      ``num_attention_heads // block_configs[i].attention.n_heads_in_group``, head size
      ``head_dim`` or hidden_size // num_attention_heads (``LlamaAttention``), K = V.
    Heads split over TP as ``Gemma4Attention`` / ``MiMoV2Attention`` / ``LlamaAttention`` do: max(1, total // tp).
    """
    hf = vcfg.model_config.hf_text_config
    tp = vcfg.parallel_config.tensor_parallel_size
    if _is_gemma4(vcfg):
        layer = hf.per_layer_config[i]
        return max(1, layer.num_key_value_heads // tp), layer.head_dim, layer.head_dim, hf.sliding_window if kind == "sliding" else None
    if getattr(hf, "model_type", None) == "nemotron-nas":
        head = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
        return max(1, hf.num_attention_heads // hf.block_configs[i].attention.n_heads_in_group // tp), head, head, None
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


# --------------------------------------------------------------------------- vLLM 0.10 - 0.24


def _spec(cls, **fields):
    """A spec dataclass built with the fields this vLLM's version of ``cls`` has."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def _legacy_backend(vcfg):
    """The backend a Hopper GPU runs in 0.19 / 0.24 (vllm/platforms/cuda.py
    ``_get_backend_priorities``, SM90, as in 0.33): MLA with a 16-bit cache FLASH_ATTN_MLA
    (MultipleOf(16) blocks), with fp8 FLASHMLA (64); otherwise FLASH_ATTN."""
    if vcfg.model_config.use_mla:
        if not vcfg.cache_config.cache_dtype.startswith("fp8"):
            try:
                import vllm.vllm_flash_attn  # noqa: F401
            except ImportError:  # the CUDA kernels; the backend class (block sizes) is all this script reads
                import types

                stub = types.ModuleType("vllm.vllm_flash_attn")
                stub.__getattr__ = lambda name: None
                sys.modules["vllm.vllm_flash_attn"] = stub
            from vllm.v1.attention.backends.mla.flashattn_mla import FlashAttnMLABackend

            return FlashAttnMLABackend
        from vllm.v1.attention.backends.mla.flashmla import FlashMLABackend

        return FlashMLABackend
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    return FlashAttentionBackend


def _legacy_block_size(vcfg, backend) -> None:
    """The block size the worker settles on before the specs are read.

    0.24: ``Platform.update_block_size_for_backend`` (vllm/platforms/interface.py) with the
    backend a Hopper GPU picks, hybrids aligned by ``_align_hybrid_block_size`` in it.
    0.19: the same function reads the backend off the instantiated layers; not hybrid: the
    backend's ``get_preferred_block_size(16)``; hybrid: 16, the Mamba-aligned attention page
    already set by ``HybridAttentionMambaModelConfig`` (vllm/model_executor/models/config.py)
    is restored by ``unify_kv_cache_spec_page_size``.
    0.10: ``CudaPlatform.check_and_update_config`` (patched in) and
    ``HybridAttentionMambaModelConfig`` already set it while the config was built.
    """
    from vllm.platforms.interface import Platform

    if VLLM >= (0, 24):
        saved = Platform._find_non_ssm_backend
        Platform._find_non_ssm_backend = classmethod(lambda cls, _cfg: backend)
        try:
            Platform.update_block_size_for_backend(vcfg)
        finally:
            Platform._find_non_ssm_backend = saved
    elif VLLM >= (0, 19):
        from vllm.config.cache import CacheConfig
        from vllm.config.vllm import set_current_vllm_config

        cache = vcfg.cache_config
        if cache.user_specified_block_size:
            return
        if vcfg.model_config.is_hybrid:
            cache.block_size = CacheConfig.DEFAULT_BLOCK_SIZE
            return
        with set_current_vllm_config(vcfg):
            cache.block_size = backend.get_preferred_block_size(CacheConfig.DEFAULT_BLOCK_SIZE)


def _legacy_kv_dtype(vcfg):
    mc, cache = vcfg.model_config, vcfg.cache_config
    try:
        from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    except ImportError:  # 0.10
        from vllm.utils import STR_DTYPE_TO_TORCH_DTYPE

        return mc.dtype if cache.cache_dtype == "auto" else STR_DTYPE_TO_TORCH_DTYPE[cache.cache_dtype]
    return kv_cache_dtype_str_to_dtype(cache.cache_dtype, mc)


def _legacy_layer_specs(vcfg) -> dict:
    """One KVCacheSpec per layer as 0.10 ``GPUModelRunner.get_kv_cache_spec`` (vllm/v1/worker/
    gpu_model_runner.py) and 0.19 / 0.24 ``Attention.get_kv_cache_spec``,
    ``MLAAttention.get_kv_cache_spec``, ``MambaBase.get_kv_cache_spec`` build them."""
    from vllm.v1 import kv_cache_interface as kvi

    mc, cache, par = vcfg.model_config, vcfg.cache_config, vcfg.parallel_config
    dtype = _legacy_kv_dtype(vcfg)
    quant = kvi.get_kv_quant_mode(cache.cache_dtype) if hasattr(kvi, "get_kv_quant_mode") else None
    common = dict(block_size=cache.block_size, num_kv_heads=mc.get_num_kv_heads(par), head_size=mc.get_head_size(), dtype=dtype, use_mla=mc.use_mla, kv_quant_mode=quant)
    hf = mc.hf_text_config
    if not mc.use_mla and getattr(hf, "v_head_dim", None):
        common["head_size_v"] = hf.v_head_dim
    layers = list(_cached_layers(vcfg))
    if any(kind == "mamba" for _, _, kind, _ in layers):  # one state spec shared by every Mamba layer
        shapes, dtypes = _mamba_state(vcfg)
        # 0.10: "block_size=max_model_len, so that mamba model will always have only one block"
        mamba_block = getattr(cache, "mamba_block_size", None) or mc.max_model_len
        mamba = _spec(kvi.MambaSpec, shapes=shapes, dtypes=dtypes, block_size=mamba_block, page_size_padded=cache.mamba_page_size_padded, mamba_cache_mode=getattr(cache, "mamba_cache_mode", "none"), num_speculative_blocks=0)
    specs: dict = {}
    for i, name, kind, window in layers:
        if kind == "mamba":
            specs[name] = mamba
            continue
        layer = common
        shape = _layer_shape(vcfg, i, kind)
        if shape is not None:  # families whose layers differ in heads or head size (the model classes build them so)
            layer_heads, layer_head, layer_head_v, window = shape
            layer = {**common, "num_kv_heads": layer_heads, "head_size": layer_head, "head_size_v": layer_head_v}
        if mc.use_mla:
            mla_cls = getattr(kvi, "MLAAttentionSpec", kvi.FullAttentionSpec)  # 0.10: FullAttentionSpec(use_mla=True)
            specs[name] = _spec(mla_cls, **{**layer, "num_kv_heads": 1, "cache_dtype_str": cache.cache_dtype})
        elif kind == "sliding":
            specs[name] = _spec(kvi.SlidingWindowSpec, sliding_window=window, **layer)
        elif kind == "chunked":
            specs[name] = _spec(kvi.ChunkedLocalAttentionSpec, attention_chunk_size=window, **layer)
        else:
            specs[name] = _spec(kvi.FullAttentionSpec, **layer)
    return specs


class _LogLines:
    """Collects what ``vllm.v1.core.kv_cache_utils`` logs at INFO (``info_once`` made plain, so a
    repeated setting logs again)."""

    def __enter__(self):
        import logging

        from vllm.v1.core import kv_cache_utils

        self.lines: list[str] = []
        self.logger = kv_cache_utils.logger
        outer = self

        class Keep(logging.Handler):
            def emit(self, record):
                outer.lines.append(record.getMessage())

        self.handler, self.level = Keep(logging.INFO), self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        self.logger.info_once = lambda msg, *args, scope=None, **kw: self.logger.info(msg, *args)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        del self.logger.info_once
        return False

    def capacity(self) -> list[str]:
        return [line for line in self.lines if "KV cache size" in line or "Maximum concurrency" in line]


def _legacy_size(vcfg, specs: dict, available: int):
    """``EngineCore._initialize_kv_caches`` of 0.10 - 0.24 (vllm/v1/engine/core.py): the
    scheduler's KVCacheConfig, the token figure and concurrency of the start-up log, its lines
    (0.11 already merges the workers' specs in ``get_kv_cache_configs``; its block sizes and
    platform answers are 0.10's).

    Raises:
        ValueError: vLLM's refusal (one request does not fit).
    """
    from vllm.v1.core import kv_cache_utils as kcu

    with _LogLines() as log:
        if VLLM >= (0, 11):
            configs = kcu.get_kv_cache_configs(vcfg, [specs], [available])
            sched = kcu.generate_scheduler_kv_cache_config(configs)
        else:  # 0.10: one config per worker, then unified
            configs = [kcu.get_kv_cache_config(vcfg, specs, available)]
            kcu.unify_kv_cache_configs(configs)
            sched = configs[0]
    lines = log.capacity()
    if hasattr(kcu, "get_kv_cache_capacity"):  # 0.24
        tokens, concurrency = kcu.get_kv_cache_capacity(vcfg, sched)
    else:  # 0.10 / 0.19 compute the token figure inside the log call only
        tokens = int(lines[0].split("GPU KV cache size: ", 1)[1].split(" tokens", 1)[0].replace(",", ""))
        concurrency = kcu.get_max_concurrency_for_kv_cache_config(vcfg, sched)
    return sched, tokens, concurrency, lines


def _group_kind(spec, name: str = "") -> str:
    """The fixture's name for a layer's cache kind; DeepSeek-V4's are told apart by the module that
    registers them (``...indexer.k_cache``, ``...compressor.state_cache``). Spec classes a release
    lacks are looked up by name (0.10 marks MLA with ``use_mla`` on a FullAttentionSpec)."""
    from vllm.v1 import kv_cache_interface as kvi

    if isinstance(spec, getattr(kvi, "UniformTypeKVCacheSpecs", ())):
        name, spec = next(iter(spec.kv_cache_specs.items()))
    if name.endswith("compressor.state_cache"):
        return "compressor"
    if name.endswith("indexer.k_cache"):
        return "indexer"
    if isinstance(spec, getattr(kvi, "MLAAttentionSpec", ())) or getattr(spec, "use_mla", False):
        role = getattr(spec, "cache_role", None)
        return "indexer" if role is not None and role.value == "indexer" else "mla"
    if isinstance(spec, kvi.SlidingWindowSpec):
        return "sliding"
    if isinstance(spec, kvi.ChunkedLocalAttentionSpec):
        return "chunked"
    if isinstance(spec, kvi.MambaSpec):
        return "mamba"
    return "full"


def _first_reason(exc: Exception) -> str:
    """The sentence vLLM raised (pydantic wraps it as 'Value error, ... [type=...')."""
    text = str(exc)
    if "Value error, " in text:
        text = text.split("Value error, ", 1)[1].split(" [type=", 1)[0]
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def _is_mla_config(config: dict) -> bool:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    return bool(text.get("kv_lora_rank")) and text.get("model_type") not in ("deepseek_v4", "deepseek_ref")


def derived_max_model_len(config: dict) -> int | None:
    """vLLM's own default max_model_len for a config (None when vLLM refuses the model)."""
    from vllm.engine.arg_utils import EngineArgs

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        try:
            return EngineArgs(model=tmp, skip_tokenizer_init=True).create_engine_config().model_config.max_model_len
        except Exception:
            return None


def run_case(config: dict, tp: int, kv_dtype: str, max_model_len: int, batched: int, avail_gib: float, prefix: bool, block_size: int | None = None) -> dict | None:
    from vllm.engine.arg_utils import EngineArgs

    available = int(avail_gib * GIB)
    case = {"tp": tp, "kv_cache_dtype": kv_dtype, "max_model_len": max_model_len, "max_num_batched_tokens": batched, "available_kv_bytes": available, "enable_prefix_caching": prefix}
    if block_size is not None:
        case["user_block_size"] = block_size
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        os.environ.pop("VLLM_USE_V1", None)  # 0.10: the V1 oracle decides afresh for every case, as `vllm serve` does
        try:
            extra = {"block_size": block_size} if block_size is not None else {}
            args = EngineArgs(model=tmp, skip_tokenizer_init=True, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype, max_model_len=max_model_len, max_num_batched_tokens=batched, enable_prefix_caching=prefix, distributed_executor_backend="mp", **extra, **_host_args())
            vcfg = args.create_engine_config()
        except Exception as exc:  # vLLM refuses the configuration itself
            if config.get("model_type") in _REGISTERED_HERE and max_model_len <= (derived_max_model_len(config) or 0):
                return None  # the stand-in config class (not the checkpoint's own code) failed: no fair answer
            case["config_error"] = _first_reason(exc)
            return case
        if VLLM < (0, 33):
            return _legacy_case(case, vcfg, None if VLLM < (0, 19) else _legacy_backend(vcfg), available)
        from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
        from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
        from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config, get_kv_cache_capacity

        try:
            backend = _attention_backend(vcfg)
        except ValueError as exc:  # vLLM's selector: no backend takes this setting (it stops building the model)
            case["backend_error"] = str(exc).split(". Reasons:")[0]
            return case
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


# sparse / compressed attention whose per-layer specs (indexer caches, compressed KV) only the
# 0.33 spec builder writes: left out of the older fixtures when that release loads the config
LEGACY_UNMODELLED = frozenset({"deepseek_v32", "deepseek_v4", "glm_moe_dsa"})


def _legacy_case(case: dict, vcfg, backend, available: int) -> dict | None:
    """``run_case`` for vLLM 0.10 - 0.24: their block-size, spec and sizing functions (None:
    a model whose specs this script does not build for them)."""
    from vllm.v1.core.kv_cache_utils import cdiv

    if vcfg.model_config.hf_text_config.model_type in LEGACY_UNMODELLED:
        return None
    if VLLM < (0, 19):
        import vllm.envs as envs

        if not envs.VLLM_USE_V1:  # EngineArgs._is_v1_supported_oracle fell back (Mamba, encoder-decoder)
            case["unsupported"] = f"vLLM {vllm_version()} serves {vcfg.model_config.architectures} on its V0 engine (the V1 oracle falls back by default)"
            return case
        _cuda_hybrid_manager_0_10(vcfg)
    try:
        _legacy_block_size(vcfg, backend)
        specs = _legacy_layer_specs(vcfg)
    except NotImplementedError as exc:
        case["unsupported"] = str(exc)
        return case
    case["block_size"] = vcfg.cache_config.block_size
    case["mamba_cache_mode"] = getattr(vcfg.cache_config, "mamba_cache_mode", "none")
    case["prefix_caching_resolved"] = bool(vcfg.cache_config.enable_prefix_caching)
    try:
        sched, tokens, concurrency, lines = _legacy_size(vcfg, specs, available)
    except ValueError as exc:
        case["refusal"] = str(exc)
        return case
    except NotImplementedError as exc:  # 0.10: no layout for pages of different sizes
        case["unsupported"] = f"NotImplementedError: {exc}"
        return case
    groups = []
    for g in sched.kv_cache_groups:
        spec = g.kv_cache_spec
        groups.append({"kind": _group_kind(spec), "layers": len(g.layer_names), "block_size": spec.block_size, "page_bytes": spec.page_size_bytes, "blocks_per_request": cdiv(spec.max_memory_usage_bytes(vcfg), spec.page_size_bytes)})
    case.update(num_blocks=sched.num_blocks, kv_cache_tokens=tokens, max_concurrency=concurrency, blocks_per_request=sum(g["blocks_per_request"] for g in groups), groups=groups, log_lines=lines)
    return case


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, default=Path(os.environ.get("KVP_REFERENCE_DIR", ROOT.parent / "shared" / "reference")) / "configs", help="folder of reference config.json files (default ../shared/reference/configs)")
    p.add_argument("--out", type=Path, default=None, help="fixture to write (default tests/data/vllm_engine_cases.json for 0.33, vllm_engine_cases_<major.minor>.json for older vLLM)")
    p.add_argument("--aic", type=Path, default=None, help="aiconfigurator-core's model_configs folder (default: found from the installed package or /work/venvs/aic)")
    p.add_argument("--only", default="", help="comma-separated case-insensitive substrings of config file names to run (default: all)")
    p.add_argument("--merge", action="store_true", help="keep the cases of configs not rerun from the existing fixture (default: write only what ran)")
    args = p.parse_args(argv)

    import vllm

    global VLLM
    VLLM = tuple(int(x) for x in vllm.__version__.split(".")[:2])
    if args.out is None:
        suffix = "" if VLLM >= (0, 33) else f"_{VLLM[0]}.{VLLM[1]}"
        args.out = ROOT / "tests" / "data" / f"vllm_engine_cases{suffix}.json"
    _patch_platform()
    sources = [("reference", f) for f in sorted(args.reference.glob("*.json"))] + [("preset", f) for f in sorted((ROOT / "model_configs").glob("*.json"))]
    sources.append(("published", Path("Qwen__Qwen2-7B-Instruct.json")))
    aic = args.aic or _aic_dir()
    # the 2026 checkpoints' configs run on 0.33 only: older releases know few of them, and their
    # large configs would make each older fixture several MB
    if aic is not None and VLLM >= (0, 33):
        sources += [("aic", aic / name) for name in AIC_CONFIGS if (aic / name).is_file()]
        sources += [("variant", Path(name)) for name, base, _ in VARIANTS if (aic / base).is_file()]
    cases: list[dict] = []
    configs: dict[str, dict] = {}
    t0 = time.time()
    for origin, path in sources:
        if args.only and not any(part.strip() and part.strip().lower() in path.name.lower() for part in args.only.split(",")):
            continue
        if origin == "variant":
            _, base, derive = next(v for v in VARIANTS if v[0] == path.name)
            config = derive(json.loads((aic / base).read_text()))
        else:
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
        # an explicit --block-size for MLA models (0.33): sparse MLA (DSA) has no Hopper backend for 16
        blocks = [(*clamp[0], block) for block in USER_BLOCK_SIZES] if VLLM >= (0, 33) and _is_mla_config(config) else []
        for setting in dict.fromkeys((*clamp, *over, *settings, *blocks)):
            try:
                case = run_case(config, *setting)
                if case is None:
                    continue
            except Exception as exc:
                traceback.print_exc()
                case = {"tp": setting[0], "kv_cache_dtype": setting[1], "max_model_len": setting[2], "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            case = {"source": f"{origin}/{path.name}", **case}
            cases.append(case)
            print(json.dumps({k: case.get(k) for k in ("source", "tp", "kv_cache_dtype", "max_model_len", "num_blocks", "kv_cache_tokens", "max_concurrency", "config_error", "unsupported", "backend_error", "error")}), file=sys.stderr)
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
