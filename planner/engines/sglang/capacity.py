"""``sglang_capacity``: what ``python -m sglang.launch_server`` sizes and prints at start-up."""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.engines.sglang.defaults import KV_CACHE_DTYPES, SglangDefaults, SglangRefusal, context_len_of, resolve_defaults
from planner.engines.sglang.gpus import GPUS, SglangGpu
from planner.engines.sglang.model import SglangModel, build_model
from planner.engines.sglang.pools import size_pools
from planner.engines.sglang.rules import DEFAULT_SGLANG_VERSION, RULES, SGLANG_VERSIONS
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, parse_geometry
from planner.limits import ByteBudgetCache
from planner.results import Result


@dataclass(frozen=True, slots=True)
class SglangCapacity(Result):
    """SGLang's start-up sizing for one model, GPU, memory state and setting (its log, as numbers)."""

    sglang_version: str
    gpu: str
    tp: int
    kv_cache_dtype: str  # the resolved --kv-cache-dtype (auto as SGLang resolves it for this model and GPU)
    kv_dtype: str  # the pool's torch dtype
    attention_backend: str
    mem_fraction_static: float
    chunked_prefill_size: int
    max_prefill_tokens: int
    page_size: int
    cuda_graph_max_bs: int
    context_len: int
    max_total_num_tokens: int
    swa_max_total_num_tokens: int | None
    max_running_requests: int
    max_mamba_cache_size: int | None
    kv_pool_bytes: int | None  # the K + V bytes the "KV Cache is allocated" lines report (None: DeepSeek-V4's pool prints none)
    available_kv_bytes: int  # the budget _profile_available_bytes returns (after the state pool)
    cell_bytes: float  # bytes one token costs in the pool's coefficient
    log_lines: tuple[str, ...]

    def summary(self) -> dict:
        out = self.model_dump()
        out["log_lines"] = list(self.log_lines)
        return out


def _positive(field: str, value: object, hi: int = 1 << 40) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise PlannerError(field, value, f"must be an integer from 1 to {hi:,}")
    return value


def _gib(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < float(value) < 1 << 20:
        raise PlannerError(field, value, "must be a positive number of GiB (as SGLang sees it on one GPU)")
    return float(value)


def get_gpu(name: str) -> SglangGpu:
    """The GPU by name (case-insensitive).

    Raises:
        PlannerError: a GPU SGLang's sizing is not modelled for here.
    """
    gpu = _BY_NAME.get(str(name).lower())
    if gpu is None:
        raise PlannerError("gpu", name, f"no SGLang GPU profile; known: {', '.join(GPUS)}")
    return gpu


_BY_NAME = {key.lower(): gpu for key, gpu in GPUS.items()}


def _check_args(gpu, tp, kv_cache_dtype, context_length, mem_fraction_static, chunked_prefill_size, max_running_requests, page_size, version):
    if version not in RULES:
        raise PlannerError("sglang_version", version, f"choose one of {', '.join(SGLANG_VERSIONS)}")
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if not isinstance(gpu, SglangGpu):
        raise PlannerError("gpu", gpu, "must be a GPU name")
    _positive("tp", tp, 4096)
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlannerError("kv_cache_dtype", kv_cache_dtype, f"SGLang KV cache dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if context_length is not None:
        _positive("context_length", context_length, 1 << 31)
    if mem_fraction_static is not None and (isinstance(mem_fraction_static, bool) or not isinstance(mem_fraction_static, (int, float)) or not 0 < mem_fraction_static < 1):
        raise PlannerError("mem_fraction_static", mem_fraction_static, "must be above 0 and below 1")
    if chunked_prefill_size is not None and (isinstance(chunked_prefill_size, bool) or not isinstance(chunked_prefill_size, int) or chunked_prefill_size == 0 or chunked_prefill_size < -1 or chunked_prefill_size > 1 << 24):
        raise PlannerError("chunked_prefill_size", chunked_prefill_size, "must be a positive number of tokens, or -1 (no chunking)")
    if max_running_requests is not None:
        _positive("max_running_requests", max_running_requests, 1 << 24)
    if page_size is not None:
        _positive("page_size", page_size, 1 << 16)
    return gpu


def sglang_capacity(
    config: dict,
    *,
    gpu: str | SglangGpu,
    pre_load_free_gib: float,
    available_gib: float,
    tp: int = 1,
    kv_cache_dtype: str = "auto",
    context_length: int | None = None,
    mem_fraction_static: float | None = None,
    chunked_prefill_size: int | None = None,
    max_running_requests: int | None = None,
    page_size: int | None = None,
    sglang_version: str = DEFAULT_SGLANG_VERSION,
    quantization: dict | None = None,
    geometry: ModelGeometry | None = None,
) -> SglangCapacity:
    """SGLang's start-up defaults, pool sizes and log lines (memoised).

    ``pre_load_free_gib`` is the free memory per GPU after distributed init, before the weights
    load (``pre_model_load_memory``); ``available_gib`` the free memory after every weight (draft
    weights included) has loaded: both in GiB as ``get_available_gpu_memory`` reports them
    (:func:`predict_memory` estimates them when nothing was measured). ``quantization`` is the
    checkpoint's ``hf_quant_config.json`` ``quantization`` section when it has one.

    Raises:
        PlannerError: invalid arguments.
        SglangRefusal: a setting SGLang refuses at start-up, with SGLang's reason.
    """
    gpu = _check_args(gpu, tp, kv_cache_dtype, context_length, mem_fraction_static, chunked_prefill_size, max_running_requests, page_size, sglang_version)
    pre, avail = _gib("pre_load_free_gib", pre_load_free_gib), _gib("available_gib", available_gib)
    geo = geometry if geometry is not None else parse_geometry(config)
    # one string key: the cache charges its size without walking a tuple (planner/limits.py size_of)
    settings = f"{geo.config_hash}|{_quant_key(quantization)}|{gpu.name}|{tp}|{kv_cache_dtype}|{mem_fraction_static}|{chunked_prefill_size}|{max_running_requests}|{page_size}|{sglang_version}"
    key = f"{settings}|{context_length}|{pre!r}|{avail!r}"
    hit = _MEMO.get(key)
    if hit is None:
        try:
            hit = _compute(config, geo, quantization, gpu, tp, kv_cache_dtype, context_length, mem_fraction_static, chunked_prefill_size, max_running_requests, page_size, sglang_version, pre, avail, settings)
        except SglangRefusal as exc:  # remembered without its traceback
            hit = SglangRefusal(exc.field, exc.value, exc.reason, exc.kind)
        _MEMO.put(key, hit)
    if isinstance(hit, SglangRefusal):
        raise SglangRefusal(hit.field, hit.value, hit.reason, hit.kind)
    return hit


def _quant_key(quantization: dict | None) -> str:
    if not isinstance(quantization, dict):
        return ""
    return f"{quantization.get('quant_algo')}|{quantization.get('kv_cache_quant_algo')}"


def _result_bytes(value: object) -> int:
    """Charge for one memoised entry without walking it: 1 kB plus 2 B a character of text."""
    if isinstance(value, SglangCapacity):
        return 1024 + 2 * sum(len(line) for line in value.log_lines)
    return 1024 + 2 * len(str(getattr(value, "reason", value)))


_MEMO = ByteBudgetCache(4 << 20, sizer=_result_bytes)  # results by config hash and settings (planner/limits.py)
_MODELS = ByteBudgetCache(2 << 20, sizer=lambda value: 2048)  # SglangModel (or its refusal) by config hash
_DEFAULTS = ByteBudgetCache(1 << 20, sizer=lambda value: 1024)  # SglangDefaults (or a refusal) by model and settings


def sglang_model(config: dict, geo: ModelGeometry, quantization: dict | None) -> SglangModel:
    """SGLang's view of the checkpoint (memoised by config hash).

    Raises:
        SglangRefusal: SGLang cannot load this config.
    """
    key = f"{geo.config_hash}|{_quant_key(quantization)}"
    hit = _MODELS.get(key)
    if hit is None:
        try:
            hit = build_model(config, geo, quantization)
        except PlannerError as exc:
            hit = SglangRefusal(exc.field, exc.value, exc.reason, "config")
        _MODELS.put(key, hit)
    if isinstance(hit, SglangRefusal):
        raise SglangRefusal(hit.field, hit.value, hit.reason, hit.kind)
    return hit


def _compute(config, geo, quantization, gpu, tp, kv_cache_dtype, context_length, mem_fraction_static, chunked_prefill_size, max_running_requests, page_size, version, pre, avail, settings) -> SglangCapacity:
    rules = RULES[version]
    model = sglang_model(config, geo, quantization)
    context_len = context_len_of(model, context_length)  # checked first, as ModelConfig is built first
    hit = _DEFAULTS.get(settings)  # nothing else resolved depends on the context or the memory state
    if hit is None:
        try:
            hit = resolve_defaults(rules, model, gpu, tp, kv_cache_dtype, None, mem_fraction_static, chunked_prefill_size, max_running_requests, page_size)
            _check_capability(model, gpu)
        except SglangRefusal as exc:
            hit = SglangRefusal(exc.field, exc.value, exc.reason, exc.kind)
        _DEFAULTS.put(settings, hit)
    if isinstance(hit, SglangRefusal):
        raise SglangRefusal(hit.field, hit.value, hit.reason, hit.kind)
    d = hit if hit.context_len == context_len else replace(hit, context_len=context_len)
    pools = size_pools(rules, model, d, tp, pre, avail)
    lines = (*pools.log_lines, scheduler_line(d, pools.max_total_num_tokens, pools.max_running_requests))
    return SglangCapacity(
        sglang_version=version, gpu=gpu.name, tp=tp, kv_cache_dtype=d.kv_cache_dtype, kv_dtype=d.kv_dtype, attention_backend=d.attention_backend,
        mem_fraction_static=d.mem_fraction_static, chunked_prefill_size=d.chunked_prefill_size, max_prefill_tokens=d.max_prefill_tokens, page_size=d.page_size,
        cuda_graph_max_bs=d.cuda_graph_max_bs, context_len=d.context_len, max_total_num_tokens=pools.max_total_num_tokens,
        swa_max_total_num_tokens=pools.swa_max_total_num_tokens, max_running_requests=pools.max_running_requests, max_mamba_cache_size=pools.max_mamba_cache_size,
        kv_pool_bytes=pools.kv_pool_bytes, available_kv_bytes=pools.available_bytes, cell_bytes=pools.cell_bytes, log_lines=lines,
    )


def scheduler_line(d: SglangDefaults, tokens: int, running: int) -> str:
    """managers/scheduler.py: the start-up line, without its trailing ``available_gpu_mem`` (free
    memory after CUDA-graph capture, which no sizing rule decides)."""
    return f"max_total_num_tokens={tokens}, chunked_prefill_size={d.chunked_prefill_size}, max_prefill_tokens={d.max_prefill_tokens}, max_running_requests={running}, context_len={d.context_len}"


def _check_capability(model: SglangModel, gpu: SglangGpu) -> None:
    """model_loader/loader.py _get_quantization_config: the GPU's compute capability must reach
    the quantization method's minimum (ModelOpt FP8 needs 8.9; FP8 / MXFP4 8.0)."""
    if model.quantization is not None and gpu.sm < model.quant_min_capability:
        raise SglangRefusal(
            "gpu", gpu.name,
            f"The quantization method {model.quantization} is not supported for the current GPU. Minimum capability: {model.quant_min_capability}. Current capability: {gpu.sm}.",
            "quantization",
        )
