"""SGLang's view of a checkpoint: what ``ModelConfig`` and the hybrid-model helpers read from it.

One :class:`SglangModel` per config (memoised by the caller). Shapes come from the planner's
geometry (:func:`planner.geometry.parse_geometry`, checked against SGLang's own cell sizes for
every fixture config); what SGLang decides by architecture name (which models are hybrid SWA,
Mamba-ish, MLA, DSA, multimodal; which layers are full attention) follows SGLang 0.5.23's lists,
each named beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.geometry import ModelGeometry, text_config

# srt/configs/model_config.py _derive_model_shapes: architectures SGLang serves with its MLA
# attention (one latent per token), Kimi's linear hybrids included
MLA_ARCHS = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
    "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM", "HYV4ForCausalLM", "DotsVLMForCausalLM", "Dots3NoteForCausalLM",
    "MistralLarge3ForCausalLM", "KimiK25ForConditionalGeneration", "GigaChat35ForCausalLM", "MiniCPM3ForCausalLM", "DeepseekVL2ForCausalLM",
    "KimiVLForConditionalGeneration", "KimiLinearForCausalLM", "KimiK3LinearForCausalLM", "KimiK3ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration", "SarvamMLAForCausalLM",
})
DSV4_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
# srt/configs/model_config.py is_deepseek_dsa (and an index_topk in the config)
DSA_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
    "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM", "Dots3NoteForCausalLM", "HYV4ForCausalLM",
})
# srt/arg_groups/overrides.py _DEEPSEEK_FAMILY_ARCHS: the DSA dtype and backend passes run for these only
DEEPSEEK_FAMILY_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "LongcatFlashForCausalLM",
})
MINIMAX_SPARSE_ARCHS = frozenset({"MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration"})  # is_minimax_sparse
# srt/configs/model_config.py is_hybrid_swa_model (the architectures among this planner's families)
SWA_SINK_ARCHS = frozenset({"GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM"})
MIMO_V2_ARCHS = frozenset({"MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM"})
HYBRID_SWA_ARCHS = frozenset({
    "Llama4ForConditionalGeneration", *DSV4_ARCHS, *SWA_SINK_ARCHS, *MIMO_V2_ARCHS, "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration",
    "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "LagunaForCausalLM", "MellumForCausalLM",
})
# srt/arg_groups/model_overrides/{gemma2_gemma3,exaone,olmo2}.py: disable_hybrid_swa_memory
NO_HYBRID_SWA_ARCHS = frozenset({"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration"})
# srt/configs/hybrid_arch.py mambaish_config: config classes with a Mamba / linear-attention state pool
MAMBA_ARCHS = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "FalconH1ForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "MambaForCausalLM", "Mamba2ForCausalLM"})
GDN_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"})
KDA_ARCHS = frozenset({"KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "KimiK3LinearForCausalLM"})
# srt/arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS (with the triton linear-attention backend)
MAMBA_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3NextForCausalLM", "FalconH1ForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "KimiK3ForConditionalGeneration",
})
# srt/configs/model_config.py multimodal_model_archs (those among this planner's families)
MULTIMODAL_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "Llama4ForConditionalGeneration", "LlavaForConditionalGeneration", "LlavaLlamaForCausalLM", "LlavaMistralForCausalLM", "LlavaQwenForCausalLM",
    "MiMoV2ForCausalLM", "Mistral3ForConditionalGeneration", "MllamaForConditionalGeneration", "PixtralForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Phi4MMForCausalLM", "InternVLChatModel",
})
# the config carries a multimodal sub-config (hf_config is not hf_text_config) for these as well
_TEXT_KEYS = ("thinker_config", "llm_config", "language_config", "text_config")

# srt/configs/model_config.py ModelConfig.__init__: multimodal is off by default for these
MM_DISABLED_ARCHS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration", "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})
# is_multimodal_chunked_prefill_supported: multimodal models that run without chunked prefill
# (model_hook.py _handle_model_capability_adjustments sets --chunked-prefill-size -1)
NO_CHUNKED_PREFILL_ARCHS = frozenset({"Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "MllamaForConditionalGeneration", "MossVLForConditionalGeneration", "CLIPModel"})


def _multimodal(arch: str, config: dict) -> bool:
    """``ModelConfig.is_multimodal``: a multimodal architecture or a separate text sub-config,
    unless multimodal is off by default for the architecture (MiMo-V2 needs vision and audio configs)."""
    if arch in MM_DISABLED_ARCHS:
        return False
    if arch in ("MiMoV2ForCausalLM",) and not (isinstance(config.get("vision_config"), dict) and isinstance(config.get("audio_config"), dict)):
        return False
    return arch in MULTIMODAL_ARCHS or any(isinstance(config.get(k), dict) for k in _TEXT_KEYS)


# the vision_config a config class builds when config.json has none (its defaults): Gemma3nVisionConfig
# and Qwen3.5's vision config have no num_hidden_layers (adjust_mem_fraction_for_vlm assumes 24),
# Kimi's MoonViT counts vt_num_hidden_layers (27 by default, hidden size 1024 unless vt_hidden_size says)
DEFAULT_VISION_CONFIGS = {
    "Gemma3nForConditionalGeneration": {"hidden_size": 2048},
    "Qwen3_5ForConditionalGeneration": {"hidden_size": 1152},
    "Qwen3_5MoeForConditionalGeneration": {"hidden_size": 1152},
    "KimiK3ForConditionalGeneration": {"num_hidden_layers": 27},
}
# config classes that keep vision_config as a plain dict, so getattr finds neither field (24 x 1024 assumed)
DICT_VISION_ARCHS = frozenset({"MiniMaxM3SparseForConditionalGeneration"})


def _vision(arch: str, config: dict) -> tuple[int | None, int | None]:
    """(num_hidden_layers, hidden_size) as memory_hook.adjust_mem_fraction_for_vlm reads them off
    ``hf_config.vision_config`` (24 / 1024 where an attribute is missing; None: no vision config)."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        vision = DEFAULT_VISION_CONFIGS.get(arch)
        if vision is None:
            return None, None
    if arch in DICT_VISION_ARCHS:
        return 24, 1024
    if arch.startswith("Kimi"):  # MoonViT's vt_* fields are what its config class exposes
        return vision.get("num_hidden_layers", vision.get("vt_num_hidden_layers", 27)), vision.get("hidden_size", vision.get("vt_hidden_size", 1024))
    return vision.get("num_hidden_layers", 24), vision.get("hidden_size", 1024)

# transformers 5.19 (the release SGLang 0.5.23 pins) has no config class for these model types, and
# SGLang registers none: without --trust-remote-code the config does not load
UNKNOWN_MODEL_TYPES = frozenset({"minimax_m3", "mimo", "deepseek_ref"})

_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "half": "float16", "float32": "float32", "float": "float32", "fp32": "float32"}


@dataclass(frozen=True, slots=True)
class SglangModel:
    """What SGLang 0.5.23 reads from one checkpoint, before any server argument."""

    arch: str
    model_type: str
    dtype: str  # the serving dtype (_get_and_verify_dtype)
    derived_context_len: int
    attention: str  # mha, mla, dsa, dsv4, minimax_sparse
    num_layers: int  # num_hidden_layers (the pool's layer count for plain models)
    kv_heads: int  # total KV heads of a full-attention layer
    head_dim: int
    v_head_dim: int
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    hybrid_swa: bool = False
    full_layers: int = 0  # hybrid SWA: full-attention layers; Mamba hybrids: attention layers
    swa_layers: int = 0
    swa_kv_heads: int = 0
    swa_head_dim: int = 0
    swa_v_head_dim: int = 0
    sliding_window: int | None = None
    state_kind: str = ""  # mamba2, gdn, kda ("" : no state pool)
    state_layers: int = 0
    state_conv: tuple[int, ...] = ()  # conv dims to split by TP (per layer, elements before TP)
    state_ssm: tuple[int, int, int] = (0, 0, 0)  # (heads, head_dim, state) before TP
    state_conv_window: int = 0  # conv kernel - 1
    ssm_bytes: int = 4
    mamba_extra_buffer: bool = False
    mamba_groups: int = 0  # Mamba-2 n_groups (padded to TP) and state size for the conv shape
    mamba_state_size: int = 0
    mamba_intermediate: int = 0
    index_head_dim: int = 0  # DSA indexer
    index_kpool: int = 1
    indexer_layers: int = 0
    learnable_sink: bool = False
    multimodal: bool = False
    no_chunked_prefill: bool = False
    vit_layers: int | None = None  # vision_config.num_hidden_layers / hidden_size (None: no vision_config)
    vit_hidden: int | None = None
    quantization: str | None = None  # SGLang's quantization method name
    quant_min_capability: int = 0
    kv_fp8_declared: bool = False  # kv_cache_quant_algo FP8 (config.json or hf_quant_config.json)
    has_asymmetric_kv: bool = False
    attention_sinks: bool = False
    sparse: tuple = ()  # MiniMax sparse: (dense layers, sparse layers, k-only indexer layers, index head dim)
    dsv4: tuple = ()  # DeepSeek-V4: (ratios, source layer ids, window, qk nope, qk rope, index head dim)


def _get(cfg: dict, key: str, default=None):
    value = cfg.get(key)
    return default if value is None else value


def _serving_dtype(cfg: dict, top: dict, arch: str, quant: dict | None) -> str:
    """``_get_and_verify_dtype(hf_text_config, "auto")``: the config's dtype; float32 is served in
    float16 (bfloat16 for Gemma); gpt-oss MXFP4 checkpoints are forced to bfloat16
    (model_overrides/gpt_oss.py); Llava-style archs read float16 (get_hf_text_config)."""
    if arch.startswith("Llava") and arch.endswith("ForCausalLM"):
        return "float16"
    if arch == "GptOssForCausalLM" and isinstance(quant, dict) and quant.get("quant_method") == "mxfp4":
        return "bfloat16"
    name = cfg.get("dtype") or cfg.get("torch_dtype") or top.get("dtype") or top.get("torch_dtype")
    dtype = _DTYPES.get(str(name).lower()) if isinstance(name, str) else None
    if dtype is None or dtype == "float32":
        return "bfloat16" if str(cfg.get("model_type") or top.get("model_type") or "").startswith("gemma") else "float16"
    return dtype


def _context_len(cfg: dict, geo: ModelGeometry) -> int:
    """``get_context_length`` (srt/utils/hf_transformers/common.py): the first of its keys on the
    transformers config (``max_position_embeddings`` as transformers defaults or maps it, e.g.
    GPT-2's ``n_positions``: the geometry's figure), times the RoPE factor unless the scaling keeps
    an original length or is llama3's. Gemma 3's RoPE parameters are per layer type in
    transformers 5, so no single factor is found there."""
    scaling = cfg.get("rope_scaling")
    factor = 1
    if isinstance(scaling, dict) and scaling and not str(cfg.get("model_type", "")).startswith("gemma3"):
        factor = scaling.get("factor", 1)
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length"):
        if cfg.get(key) is not None:
            return int(factor * cfg[key])
    if geo.max_position_embeddings is not None:
        return int(factor * geo.max_position_embeddings)
    return 2048


def _quantization(config: dict, cfg: dict, quant: dict | None) -> tuple[str | None, int, bool]:
    """(SGLang's quantization name, the loader's minimum compute capability, FP8 KV declared)
    as ``ModelConfig._parse_quant_hf_config`` and the quantization classes' ``get_min_capability``
    report them (model_loader/loader.py _get_quantization_config checks the GPU against it)."""
    qc = config.get("quantization_config") or cfg.get("quantization_config")
    if isinstance(qc, dict) and qc.get("quant_method") not in (None, "modelopt"):
        method = str(qc["quant_method"])
        kv_fp8 = str(qc.get("kv_cache_quant_algo") or "").upper() == "FP8" or _compressed_kv_fp8(qc)
        return method, _MIN_CAPABILITY.get(method, 0), kv_fp8
    body = qc if isinstance(qc, dict) else quant
    if not isinstance(body, dict):
        return None, 0, False
    algo = str(body.get("quant_algo") or "").upper()
    # ModelOpt: config.json's quantization_config when it has one (a float8 kv_cache_scheme dict
    # declares FP8 KV there), else hf_quant_config.json's kv_cache_quant_algo
    kv_fp8 = str(body.get("kv_cache_quant_algo") or "").upper() == "FP8" or _compressed_kv_fp8(body)
    method = {"FP8": "modelopt_fp8", "NVFP4": "modelopt_fp4"}.get(algo)
    if algo == "MIXED_PRECISION":  # ModelConfig._parse_modelopt_quant_config: named by its layers' algorithms
        layers = body.get("quantized_layers") or {}
        nvfp4 = any(isinstance(v, dict) and str(v.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4") for v in layers.values())
        method = "modelopt_mixed" if nvfp4 else "w4afp8"
    return method, _MIN_CAPABILITY.get(method or "", 0), kv_fp8


def _compressed_kv_fp8(qc: dict) -> bool:
    scheme = qc.get("kv_cache_scheme")
    return isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8


# get_min_capability() of each quantization class (srt/layers/quantization/), read off SGLang 0.5.23
_MIN_CAPABILITY = {"fp8": 80, "mxfp4": 80, "awq": 75, "compressed-tensors": 70, "modelopt_fp8": 89, "modelopt_fp4": 80, "modelopt_mixed": 80, "w4afp8": 90}


def _hybrid_swa_layers(arch: str, cfg: dict, n: int, geo: ModelGeometry) -> tuple[int, int]:
    """``get_hybrid_layer_ids`` (srt/configs/model_config.py): Llama 4 every 4th layer full; gpt-oss,
    Gemma 4 and the others by ``layer_types``; MiMo-V2 by ``hybrid_layer_pattern`` (1: SWA)."""
    if arch == "Llama4ForConditionalGeneration":
        full = sum(1 for i in range(n) if (i + 1) % 4 == 0)
        return full, n - full
    if arch in MIMO_V2_ARCHS:
        pattern = cfg.get("hybrid_layer_pattern") or []
        swa = sum(1 for i in range(n) if i < len(pattern) and pattern[i] == 1)
        full = sum(1 for i in range(n) if i < len(pattern) and pattern[i] == 0)
        return full, swa
    types = cfg.get("layer_types") or []
    return sum(1 for t in types if t == "full_attention"), sum(1 for t in types if t == "sliding_attention")


def _layer_shape(geo: ModelGeometry, kind: str) -> tuple[int, int, int] | None:
    for layer in geo.layers:
        if layer.kind == kind:
            return layer.kv_heads, layer.k_head_dim, layer.v_head_dim
    return None


def _state(arch: str, cfg: dict) -> dict:
    """The state pool's shape per layer before TP, as each model's config class builds its
    ``mamba2_cache_params`` (srt/configs/mamba_utils.py Mamba2StateShape.create /
    KimiLinearStateShape.create; GDN in srt/configs/qwen3_next.py & qwen3_5.py)."""
    ssm_name = cfg.get("mamba_ssm_dtype")
    ssm_bytes = {"float32": 4, "bfloat16": 2, "float16": 2}.get(ssm_name, 4) if isinstance(ssm_name, str) else 4
    if arch in MAMBA_ARCHS:
        heads = _get(cfg, "mamba_num_heads", 0)
        head_dim = _get(cfg, "mamba_head_dim", 0)
        state = _get(cfg, "ssm_state_size", 0)
        kernel = _get(cfg, "conv_kernel", 4)
        return {"state_kind": "mamba2", "mamba_groups": _get(cfg, "n_groups", 1), "mamba_state_size": state, "mamba_intermediate": heads * head_dim,
                "state_ssm": (heads, head_dim, state), "state_conv_window": kernel - 1, "ssm_bytes": ssm_bytes}
    if arch in GDN_ARCHS:
        k_heads, v_heads = _get(cfg, "linear_num_key_heads", 16), _get(cfg, "linear_num_value_heads", 32)
        k_dim, v_dim = _get(cfg, "linear_key_head_dim", 128), _get(cfg, "linear_value_head_dim", 128)
        kernel = _get(cfg, "linear_conv_kernel_dim", 4)
        return {"state_kind": "gdn", "state_conv": (k_heads * k_dim, k_heads * k_dim, v_heads * v_dim), "state_ssm": (v_heads, k_dim, v_dim),
                "state_conv_window": kernel - 1, "ssm_bytes": ssm_bytes}
    if arch in KDA_ARCHS:
        lin = cfg.get("linear_attn_config") or {}
        heads, head_dim = _get(lin, "num_heads", 32), _get(lin, "head_dim", 128)
        kernel = _get(lin, "short_conv_kernel_size", 4)
        return {"state_kind": "kda", "state_conv": (heads * head_dim, heads * head_dim, heads * head_dim), "state_ssm": (heads, head_dim, head_dim),
                "state_conv_window": kernel - 1, "ssm_bytes": ssm_bytes}
    return {}


def build_model(config: dict, geo: ModelGeometry, quantization: dict | None) -> SglangModel:
    """SGLang's ``ModelConfig`` for ``config`` (and the checkpoint's ``hf_quant_config.json``
    ``quantization`` section, where it has one).

    Raises:
        PlannerError: a model type SGLang 0.5.23 cannot load without remote code.
    """
    cfg = text_config(config)
    arch = (geo.architectures or ("",))[0]
    model_type = str(config.get("model_type") or geo.model_type)
    for mt in (model_type, str(cfg.get("model_type") or "")):
        if mt in UNKNOWN_MODEL_TYPES:
            raise SglangConfigRefusal(
                "model", mt,
                f"The checkpoint you are trying to load has model type `{mt}` but Transformers does not recognize this architecture "
                "(SGLang 0.5.23 pins transformers 5.19.0; the checkpoint's own config code needs --trust-remote-code)",
            )
    quant_method, min_cap, kv_fp8 = _quantization(config, cfg, quantization)
    qc = config.get("quantization_config") or cfg.get("quantization_config")
    n = geo.num_layers
    fields: dict = {
        "arch": arch, "model_type": model_type, "dtype": _serving_dtype(cfg, config, arch, qc if isinstance(qc, dict) else None),
        "derived_context_len": _context_len(cfg, geo), "num_layers": n, "kv_heads": geo.num_kv_heads, "head_dim": geo.head_dim, "v_head_dim": geo.v_head_dim,
        "quantization": quant_method, "quant_min_capability": min_cap, "kv_fp8_declared": kv_fp8,
        "multimodal": _multimodal(arch, config),
        "no_chunked_prefill": arch in NO_CHUNKED_PREFILL_ARCHS and _multimodal(arch, config),
    }
    fields["vit_layers"], fields["vit_hidden"] = _vision(arch, config)
    attention = "mha"
    if geo.compressed is not None or arch in DSV4_ARCHS:
        attention = "dsv4"
    elif arch in MLA_ARCHS and geo.mla is not None:
        attention = "dsa" if arch in DSA_ARCHS and cfg.get("index_topk") is not None else "mla"
        fields.update(kv_lora_rank=geo.mla.kv_lora_rank, qk_rope_head_dim=geo.mla.qk_rope_head_dim)
        if attention == "dsa":
            fields.update(index_head_dim=cfg["index_head_dim"], index_kpool=_get(cfg, "index_kpool", 1), indexer_layers=len(geo.indexer.layers) if geo.indexer else n,
                          learnable_sink=bool(cfg.get("learnable_sink", False)))
    elif arch in MINIMAX_SPARSE_ARCHS:
        attention = "minimax_sparse"
        # configs/model_config.py get_minimax_sparse_layer_ids / get_minimax_sparse_disable_value_layer_ids
        sparse_cfg = cfg.get("sparse_attention_config") or config.get("sparse_attention_config") or {}
        freq = sparse_cfg.get("sparse_attention_freq") or []
        flags = sparse_cfg.get("sparse_disable_index_value") or []
        sparse_ids = [i for i, f in enumerate(freq) if f != 0]
        k_only = sum(1 for i in sparse_ids if i < len(flags) and flags[i] != 0)
        fields["sparse"] = (len(freq) - len(sparse_ids), len(sparse_ids), k_only, sparse_cfg.get("sparse_index_dim", 0))
    fields["attention"] = attention
    if arch in HYBRID_SWA_ARCHS and arch not in NO_HYBRID_SWA_ARCHS and attention != "dsv4":
        full, swa = _hybrid_swa_layers(arch, cfg, n, geo)
        full_shape = _layer_shape(geo, "full") or (geo.num_kv_heads, geo.head_dim, geo.v_head_dim)
        swa_shape = _layer_shape(geo, "sliding") or _layer_shape(geo, "chunked") or full_shape
        fields.update(hybrid_swa=True, full_layers=full, swa_layers=swa, kv_heads=full_shape[0], head_dim=full_shape[1], v_head_dim=full_shape[2],
                      swa_kv_heads=swa_shape[0], swa_head_dim=swa_shape[1], swa_v_head_dim=swa_shape[2])
        # load_model_utils.py resolve_sliding_window_size (no model hook: the config's window, else the
        # attention chunk of Llama 4's local layers)
        for key in ("sliding_window_size", "sliding_window", "window_size", "attention_chunk_size"):
            if cfg.get(key) is not None:
                fields["sliding_window"] = cfg[key]
                break
    if attention == "dsv4":
        # srt/configs/model_config.py: DeepSeek-V4 keeps qk_nope = head_dim - rope; srt/configs/deepseek_v4.py
        # kv_source_layer_ids defaults to none
        rope = _get(cfg, "qk_rope_head_dim", 64)
        ratios = tuple(int(r) for r in (cfg.get("compress_ratios") or ()))
        fields.update(hybrid_swa=True, dsv4=(ratios, tuple(cfg.get("kv_source_layer_ids") or ()), cfg.get("sliding_window"), geo.head_dim - rope, rope, _get(cfg, "index_head_dim", 0)))
    state = _state(arch, cfg)
    if state:
        kinds = [layer.kind for layer in geo.layers]
        fields.update(state, state_layers=sum(1 for k in kinds if k in ("mamba", "linear_attention")), full_layers=sum(1 for k in kinds if k == "full"),
                      mamba_extra_buffer=arch in MAMBA_EXTRA_BUFFER_ARCHS)
    fields["has_asymmetric_kv"] = fields["head_dim"] != fields["v_head_dim"] or (fields.get("swa_head_dim") or fields["head_dim"]) != (fields.get("swa_v_head_dim") or fields["v_head_dim"])
    fields["attention_sinks"] = arch in SWA_SINK_ARCHS or (arch in MIMO_V2_ARCHS and bool(cfg.get("add_swa_attention_sink_bias") or cfg.get("add_full_attention_sink_bias"))) or bool(cfg.get("learnable_sink"))
    return SglangModel(**fields)


class SglangConfigRefusal(PlannerError):
    """SGLang cannot load this config at all (raised before anything is sized)."""
