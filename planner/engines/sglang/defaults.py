"""SGLang 0.5.23's server-argument resolution, the part that sizes the KV pool.

``ServerArgs(...).resolve_once()`` runs ``srt/arg_groups/pipeline.py``: GPU-memory defaults
(``memory_hook.handle_gpu_memory_settings``), then the per-model overrides
(``model_overrides/``, ``overrides.py``) that pick the attention backend, page size and KV dtype.
:func:`resolve_defaults` follows that order for the settings a user gives on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.sglang.gpus import SglangGpu
from planner.engines.sglang.model import DEEPSEEK_FAMILY_ARCHS, MIMO_V2_ARCHS, SglangModel
from planner.engines.sglang.rules import Rules
from planner.errors import PlannerError

# model_overrides/qwen3_5.py registers _qwen3_5_hybrid_overrides for these
GDN_SM100_TRITON_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration", "Qwen3_5ForConditionalGeneration"})

KV_CACHE_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2", "bfloat16", "bf16")


class SglangRefusal(PlannerError):
    """SGLang would refuse to start with these settings; ``reason`` is SGLang's own message.

    ``kind`` says which check refused (``context_length``, ``no_kv_memory``, ``mamba_state``,
    ``mamba_requests``, ``swa_pool``, ``not_enough_memory``, ``kv_cache_dtype``, ``quantization``,
    ``config``), so callers can group refusals without parsing the text."""

    def __init__(self, field: str, value: object, reason: str, kind: str = "") -> None:
        super().__init__(field, value, reason)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class SglangDefaults:
    """The resolved server arguments the pool sizing reads (each as ``resolve_once`` leaves it)."""

    mem_fraction_static: float
    chunked_prefill_size: int
    max_prefill_tokens: int
    page_size: int
    cuda_graph_max_bs: int
    attention_backend: str
    kv_cache_dtype: str  # the resolved --kv-cache-dtype string (auto / fp8_e4m3 / fp8_e5m2 / bfloat16)
    kv_dtype: str  # the pool's torch dtype name (configure_kv_cache_dtype): bfloat16, float16, float8_e4m3fn, float8_e5m2
    context_len: int
    max_running_requests: int | None  # the user's, or a model default (DeepSeek-V4: 256)
    swa_full_tokens_ratio: float
    mamba_ratio: int  # state slots a running request keeps (resolve_max_num_reqs' cap)
    dsa_decode_backend: str = ""
    dsa_prefill_backend: str = ""
    vlm_reservation_gib: float = 0.0
    sm: int = 0  # the GPU's compute capability as major x 10 + minor

    @property
    def kv_bytes(self) -> int:
        return 1 if self.kv_dtype.startswith("float8") else 2


def _chunk_and_graph(rules: Rules, gpu_mib: int, tp: int) -> tuple[int, int]:
    """memory_hook.handle_gpu_memory_settings: chunked_prefill_size and the decode CUDA-graph max
    batch by card size (below 20 / 35 / 60 / 90 / 160 GiB / above; the batch by tp < 4 | tp >= 4)."""
    for limit_gib, chunk, small_tp, large_tp in rules.gpu_memory_tiers:
        if limit_gib is None or gpu_mib < limit_gib * 1024:
            return chunk, small_tp if tp < 4 else large_tp
    raise AssertionError("the last tier has no limit")


def mem_fraction_static(rules: Rules, gpu_mib: int, tp: int, chunked_prefill_size: int, max_prefill_tokens: int, cuda_graph_max_bs: int, model: SglangModel) -> float:
    """memory_hook.handle_gpu_memory_settings with --mem-fraction-static unset: reserve
    ``512 + 1.5 x max(chunk, 2048) + tp x pp / 8 x 1024 + graph`` MiB (graph: 2 MiB per decode
    batch, ``reserve_for_graph_mb``; prefill graphs are off by default), at least 10 GiB on cards
    over 60 GiB, then ``round((gpu - reserved) / gpu, 3)``; a VLM's fraction is scaled by its ViT
    factor (``adjust_mem_fraction_for_vlm``), not re-rounded."""
    activation_tokens = max(chunked_prefill_size if chunked_prefill_size > 0 else max_prefill_tokens, rules.min_activation_tokens)
    reserved = rules.reserved_base_mib
    reserved += activation_tokens * rules.activation_mib_per_token
    reserved += tp * 1 / 8 * 1024
    reserved += cuda_graph_max_bs * rules.graph_mib_per_batch
    if gpu_mib > rules.reserve_floor_above_gib * 1024:
        reserved = max(reserved, rules.reserve_floor_mib)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    if model.multimodal and model.vit_layers is not None:
        ratio = model.vit_layers * model.vit_hidden**2 / (24 * 1024**2)
        factor = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
        fraction = fraction * (0.95 * factor)
    return fraction


def _attention_backend(model: SglangModel, gpu: SglangGpu, kv_cache_dtype: str) -> tuple[str, str, str]:
    """(attention backend, DSA prefill backend, DSA decode backend) as the model overrides and
    ``get_default_attn_backend`` (arg_groups/model_override_base.py) pick them on this GPU."""
    major = gpu.capability[0]
    sm90, sm100 = major == 9, major == 10
    arch = model.arch
    if model.attention == "dsv4":
        return "dsv4", "", ""  # model_overrides/deepseek_v4.py
    if model.attention == "dsa":  # model_overrides/deepseek_v2.py; overrides.py _dsa_split_backend_resolution
        if model.learnable_sink:
            return "dsa", "flashmla_sparse", "flashmla_sparse"
        if arch == "GlmMoeDsaForCausalLM" and major == 12 and kv_cache_dtype == "fp8_e4m3":
            return "dsa", "flashinfer_sparse_mla", "flashinfer_sparse_mla"
        if kv_cache_dtype == "fp8_e4m3":
            backend = "trtllm" if major >= 10 else "flashmla_kv"
            return "dsa", backend, backend
        return "dsa", "flashmla_sparse", "trtllm" if major >= 10 else "fa3"
    if model.attention in ("mla",):
        if arch in DEEPSEEK_FAMILY_ARCHS and sm100:
            return "trtllm_mla", "", ""  # deepseek_v2.py: DeepSeek V3/R1 on SM100
        if arch in ("KimiK3ForConditionalGeneration", "KimiK3LinearForCausalLM") and gpu.sm in (100, 103):
            return "trtllm_mla", "", ""  # model_overrides/kimi_k3.py
        if sm90:
            return "fa3", "", ""
        if sm100:
            return "flashinfer", "", ""
        return "triton", "", ""
    if arch == "GptOssForCausalLM":  # model_overrides/gpt_oss.py
        return ("trtllm_mha" if sm100 else "fa3" if sm90 else "triton"), "", ""
    if arch in ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"):  # model_overrides/llama4.py
        return ("trtllm_mha" if sm100 else "fa3" if sm90 else "triton"), "", ""
    if arch in ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"):  # model_overrides/gemma4.py
        return ("trtllm_mha" if sm100 else "triton"), "", ""
    if arch in MIMO_V2_ARCHS and sm100:  # model_overrides/mimo_v2.py
        return "fa4", "", ""
    if model.attention == "minimax_sparse":  # model_overrides/minimax_m3.py
        if sm100:
            return ("trtllm_mha" if kv_cache_dtype == "fp8_e4m3" else "fa4"), "", ""
        if sm90:
            return "fa3", "", ""
    if arch in GDN_SM100_TRITON_ARCHS and sm100:
        # model_overrides/qwen3_5.py _qwen3_5_hybrid_overrides: triton on SM100 while the radix cache
        # keeps page 1 (the extra-buffer strategy is chosen after this override runs)
        return "triton", "", ""
    if model.state_kind == "mamba2" and sm100:  # model_overrides/nemotron_h.py (no speculative decoding)
        return "trtllm_mha", "", ""
    # get_default_attn_backend, MHA: FA3 on Hopper, trtllm_mha on SM100 (fa4 when K and V rows
    # differ), else FlashInfer unless the model has attention sinks
    if sm90:
        backend = "fa3"
    elif sm100:
        backend = "fa4" if model.has_asymmetric_kv else "trtllm_mha"
    else:
        backend = "triton" if model.attention_sinks else "flashinfer"
    return backend, "", ""


def context_len_of(model: SglangModel, context_length: int | None) -> int:
    """``ModelConfig._derive_context_length``: the model's own length, or the user's when it is not
    longer (a longer one is refused, not clamped).

    Raises:
        SglangRefusal: a context length above the model's.
    """
    derived = model.derived_context_len
    if context_length is None:
        return derived
    if context_length > derived:
        raise SglangRefusal(
            "context_length", context_length,
            f"Warning: User-specified context_length ({context_length}) is greater than the derived context_length ({derived}). This may lead to incorrect model "
            "outputs or CUDA errors. Note that the derived context_length may differ from max_position_embeddings in the model's config. To allow overriding "
            "this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
            "context_length",
        )
    return context_length


def resolve_defaults(
    rules: Rules, model: SglangModel, gpu: SglangGpu, tp: int, kv_cache_dtype: str, context_length: int | None, mem_fraction: float | None,
    chunked_prefill_size: int | None, max_running_requests: int | None, page_size: int | None,
) -> SglangDefaults:
    """The resolved server arguments, in the order ``run_resolution_pipeline`` resolves them.

    Raises:
        SglangRefusal: a setting SGLang refuses while resolving its arguments (context above the
            model's, a KV dtype the model's attention backend rejects).
    """
    context_len = context_len_of(model, context_length)
    gpu_mib = gpu.memory_mib
    chunk, graph_bs = _chunk_and_graph(rules, gpu_mib, tp)
    if chunked_prefill_size is not None:
        chunk = chunked_prefill_size
    if max_running_requests is not None and graph_bs > max_running_requests:
        graph_bs = max_running_requests  # a default decode max_bs never exceeds the request limit
    max_prefill = rules.max_prefill_tokens
    fraction = mem_fraction if mem_fraction is not None else mem_fraction_static(rules, gpu_mib, tp, chunk, max_prefill, graph_bs, model)

    if model.no_chunked_prefill:
        chunk = -1  # model_hook.py _handle_model_capability_adjustments, after the memory defaults
    # the model overrides, then the generic passes (overrides.py)
    kv = {"bf16": "bfloat16"}.get(kv_cache_dtype, kv_cache_dtype)
    if model.attention == "dsa" and model.arch in DEEPSEEK_FAMILY_ARCHS:
        # overrides.py _dsa_kv_cache_dtype_default: FP8 on SM100+, bf16 before (and with attention sinks)
        if kv == "auto":
            kv = "fp8_e4m3" if gpu.capability[0] >= 10 and not model.learnable_sink else "bfloat16"
        if kv not in ("bfloat16", "fp8_e4m3"):
            raise SglangRefusal("kv_cache_dtype", kv_cache_dtype, "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", "kv_cache_dtype")
    if model.attention == "dsv4":
        # overrides.py _deepseek_v4_kv_cache_dtype
        if kv == "auto":
            kv = "fp8_e4m3"
        if kv not in ("fp8_e4m3", "bfloat16"):
            raise SglangRefusal("kv_cache_dtype", kv_cache_dtype, f"{kv} is not supported for {model.arch}", "kv_cache_dtype")
    backend, dsa_prefill, dsa_decode = _attention_backend(model, gpu, kv)
    vlm_mib = rules.vlm_cache_mib if model.multimodal else 0
    if model.multimodal and model.model_type in ("qwen3_vl", "qwen3_vl_moe") and gpu.capability[0] == 9 and gpu_mib >= 60 * 1024:
        # model_overrides/qwen3_vl.py _qwen3vl_hopper_serving_overrides: no embedding cache, CUDA-IPC feature
        # transport, whose pool (SGLANG_MM_FEATURE_CACHE_MB: 1 GiB, 3 GiB from 400 running requests) is
        # reserved out of the KV budget (kv_cache_configurator.py mm_runtime_reservation_gb)
        vlm_mib = 3 * 1024 if max_running_requests is not None and max_running_requests >= 400 else 1024
    if backend == "fa3" and kv == "fp8_e5m2":
        backend = "triton"  # overrides.py _attention_backend_fa3_fp8_fallback
    if backend == "trtllm_mla" and kv not in ("fp8_e4m3", "bf16", "auto", "bfloat16"):
        # overrides.py _mla_kv_cache_dtype_checks
        raise SglangRefusal("kv_cache_dtype", kv_cache_dtype, "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.", "kv_cache_dtype")
    page = _page_size(model, gpu, backend, page_size)

    mrr = max_running_requests
    if model.attention == "dsv4" and mrr is None:
        mrr = 256  # deepseek_v4_hook.apply_deepseek_v4_defaults
    swa_ratio = rules.swa_full_tokens_ratio
    if model.attention == "dsv4":
        swa_ratio = 0.1  # model_overrides/deepseek_v4.py declares it, so the pool sizes by ratio, not by the request cap
    mamba_ratio = rules.mamba_base_ratio + (rules.mamba_extra_buffer_slots if model.mamba_extra_buffer else 0)
    return SglangDefaults(
        mem_fraction_static=fraction, chunked_prefill_size=chunk, max_prefill_tokens=max_prefill, page_size=page, cuda_graph_max_bs=graph_bs,
        attention_backend=backend, kv_cache_dtype=kv, kv_dtype=_kv_dtype(model, kv), context_len=context_len, max_running_requests=mrr,
        swa_full_tokens_ratio=swa_ratio, mamba_ratio=mamba_ratio, dsa_decode_backend=dsa_decode, dsa_prefill_backend=dsa_prefill,
        vlm_reservation_gib=vlm_mib / 1024, sm=gpu.sm,
    )


def _page_size(model: SglangModel, gpu: SglangGpu, backend: str, page_size: int | None) -> int:
    """Page size: the model's own (DSA 64 x index_kpool, DeepSeek-V4 256, MiniMax-M3 128), then the
    backends' constraints (overrides.py _mla_backend_page_constraints, _fa4_page_constraint), then
    the default of 1 (_page_size_default)."""
    major = gpu.capability[0]
    if model.attention == "dsa":
        return 64 * model.index_kpool
    if model.attention == "dsv4":
        return 256
    if model.attention == "minimax_sparse" and page_size is None and major in (9, 10) and backend in ("fa3", "fa4", "trtllm_mha"):
        page_size = 128  # model_overrides/minimax_m3.py: MSA's sparse blocks
    if model.arch in GDN_SM100_TRITON_ARCHS and major == 10:
        return 1  # model_overrides/qwen3_5.py: page 1 with triton
    if backend in ("trtllm_mla", "cutedsl_mla") and page_size not in (32, 64):
        page_size = 64
    if backend == "trtllm_mha" and page_size not in (16, 32, 64, 128):
        page_size = 64
    if backend == "fa4" and major == 10 and model.attention not in ("mla", "dsa"):
        page_size = 128
    return page_size if page_size is not None else 1


def _kv_dtype(model: SglangModel, kv_cache_dtype: str) -> str:
    """mem_cache/kv_cache_dtype.py configure_kv_cache_dtype: ``auto`` caches FP8 when the checkpoint
    declares an FP8 KV cache (the loader's quant config), else the serving dtype."""
    if kv_cache_dtype == "auto":
        return "float8_e4m3fn" if model.kv_fp8_declared else model.dtype
    return {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "bfloat16": "bfloat16"}[kv_cache_dtype]
