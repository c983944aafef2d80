"""Live probe: build the K/V cache (or run a random model) on this machine, beside the estimate.

Two modes, both run in a child process (``python -m planner.probe --child``, JSON on stdout)
under a timeout, so an out-of-memory kill or a crash returns an error result instead of taking
the CLI or the app down:

* ``allocate``: the cache tensors of the model's per-layer geometry under a runtime's layout,
  allocated on the device. ``vllm``: per layer paged K and V of shape
  ``[blocks, block_tokens, kv_heads_per_gpu, head_dim]`` (MLA: one latent tensor
  ``[blocks, block_tokens, kv_lora_rank + rope]``); ``transformers``: per layer K/V
  ``[batch, kv_heads, positions, head_dim]`` as a ``DynamicCache`` holds them one decode step
  after ``tokens`` tokens. Measured: tensor storage bytes on CPU; ``torch.cuda.memory_allocated``
  before/after and ``max_memory_allocated`` on CUDA.
* ``runtime``: a randomly initialised transformers model built from the (text) config, never with
  remote code and without downloading weights, optionally cut to its first ``layers_limit``
  layers; a prefill of ``tokens`` tokens and ``decode_steps`` single-token decode steps with a
  ``DynamicCache`` (or ``StaticCache``). Measured: the cache tensors' storage bytes, prefill,
  first decode step, p50/p95 decode step, peak memory; beside the planner's bytes and its
  roofline latency, and MFU/MBU calibrated from the measurement.

Integer KV formats are allocated (vllm layout only) exactly as :mod:`planner.kv` counts them:
packed data plus one fp16 scale and one fp16 zero-point per 64 elements of each head vector.

What transformers 5.24 caches (measured, modelled by :func:`transformers_positions` and
:func:`predicted_transformers_cache_bytes`; :mod:`planner.kv` differs where noted):

* full attention: ``tokens`` positions, storage equal to the view;
* sliding window ``W`` (and chunked attention of chunk ``C``, which transformers caches as a
  sliding window of ``C``): the view ``keys`` holds the last ``W - 1`` positions, but it is a
  slice of the concatenation of the previous view and the new states, whose storage it keeps
  alive: ``min(previous, W - 1) + new`` positions, i.e. ``W`` after a decode step and the whole
  prompt right after a prefill longer than the window;
* MLA (DeepSeek-V2/V3, Kimi-K2): the compressed latent, one "head" with K = ``kv_lora_rank``
  and V = ``qk_rope_head_dim`` elements, not decompressed per-head K/V;
* ``StaticCache``: ``max_cache_len`` positions per full layer and ``min(max_cache_len, W)``
  per sliding layer, allocated at the first forward.

Safety: the prediction is checked against 80 % of the free device memory
(``torch.cuda.mem_get_info``) or a CPU budget (``KVP_PROBE_CPU_BUDGET_BYTES``, default 2 GiB)
before anything is allocated; ``KVP_DISABLE_PROBE=1`` turns the probe off (shared deployments).

This module never imports torch at import time: only the child's functions do.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import PlannerError
from planner.geometry import ModelGeometry, parse_geometry, text_config
from planner.kv import KV_DTYPE_BITS, QUANT_GROUP, kv_specs
from planner.limits import MIN_UTILISATION

FORMAT = "kvp-probe/1"
ENV_DISABLE = "KVP_DISABLE_PROBE"
ENV_CPU_BUDGET = "KVP_PROBE_CPU_BUDGET_BYTES"
DEFAULT_CPU_BUDGET = 2 << 30
DEFAULT_TIMEOUT_S = 120.0
GPU_FREE_FRACTION = 0.8
MAX_PROBE_JSON_BYTES = 1 << 20
MAX_REQUEST_BYTES = 4 << 20
MODES = ("allocate", "runtime")
DEVICES = ("auto", "cpu", "cuda")
RUNTIME_DTYPES = ("fp32", "bf16", "fp16")  # what a transformers model computes and caches in
CUDA_ROUND = 512  # the CUDA caching allocator rounds every block up to 512 bytes
MAX_INT = 1 << 62

TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn", "int8": "int8", "int4": "uint8"}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "int8": 1, "uint8": 1}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

ROOT = Path(__file__).resolve().parents[2]  # the checkout: planner/probe/__init__.py -> ../..

_TRUTHY = {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------- settings



# The pinned transformers (5.24) caches MLA latents (huggingface/transformers#47761): the planner
# runtime whose K/V semantics match what this probe measures.
INSTALLED_TRANSFORMERS_RUNTIME = "transformers-latent"

def probe_disabled() -> str | None:
    """The reason the probe is off (``KVP_DISABLE_PROBE`` set), or None when it may run."""
    if os.environ.get(ENV_DISABLE, "").strip().lower() in _TRUTHY:
        return f"the live probe is disabled on this deployment ({ENV_DISABLE}=1): run `python -m planner probe ...` on your own machine and import its JSON instead"
    return None


def check_enabled() -> None:
    """Raises: PlannerError: the probe is disabled by ``KVP_DISABLE_PROBE``."""
    reason = probe_disabled()
    if reason:
        raise PlannerError("probe", f"{ENV_DISABLE}={os.environ.get(ENV_DISABLE)}", reason)


def cpu_budget_bytes() -> int:
    """The CPU memory budget of one probe (``KVP_PROBE_CPU_BUDGET_BYTES``, default 2 GiB).

    Raises:
        PlannerError: the variable is set but not a positive integer.
    """
    raw = os.environ.get(ENV_CPU_BUDGET, "").strip()
    if not raw:
        return DEFAULT_CPU_BUDGET
    try:
        value = int(raw)
    except ValueError:
        raise PlannerError(ENV_CPU_BUDGET, raw, "must be a positive integer number of bytes") from None
    if value < 1:
        raise PlannerError(ENV_CPU_BUDGET, raw, "must be a positive integer number of bytes")
    return value


# --------------------------------------------------------------------------- options


class ProbeOptions(BaseModel):
    """Everything one probe run needs besides the config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["allocate", "runtime"] = "allocate"
    runtime: Literal["vllm", "transformers"] | None = None  # None: vllm for allocate, transformers for runtime
    device: Literal["auto", "cpu", "cuda"] = "auto"
    tokens: int = Field(default=512, ge=1, le=1 << 24)
    batch: int = Field(default=1, ge=1, le=4096)
    decode_steps: int = Field(default=8, ge=0, le=4096)
    kv_dtype: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"] = "bf16"
    layers_limit: int | None = Field(default=None, ge=1, le=100_000)
    block_tokens: int = Field(default=16, ge=1, le=4096)
    tp: int = Field(default=1, ge=1, le=4096)
    static: bool = False
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600, allow_inf_nan=False)
    gpu: str | None = Field(default=None, max_length=64)  # catalog device for the roofline
    warmup: bool = True

    @property
    def effective_runtime(self) -> str:
        return self.runtime or ("transformers" if self.mode == "runtime" else "vllm")


def make_options(**values: object) -> ProbeOptions:
    """Validate probe options (one :class:`PlannerError` for the first bad field).

    Raises:
        PlannerError: an out-of-range value or a combination the probe cannot measure.
    """
    values = {k: v for k, v in values.items() if v is not None or k in ("runtime", "layers_limit", "gpu")}
    try:
        opts = ProbeOptions(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "options"
        raise PlannerError(field, err.get("input"), err.get("msg", "invalid")) from None
    _check_combination(opts)
    return opts


def _check_combination(opts: ProbeOptions) -> None:
    runtime = opts.effective_runtime
    if opts.mode == "runtime" and runtime != "transformers":
        raise PlannerError("runtime", runtime, "runtime mode runs a transformers model; use --mode allocate for the paged (vLLM) layout")
    if runtime == "transformers" and opts.kv_dtype not in RUNTIME_DTYPES:
        raise PlannerError(
            "kv_dtype",
            opts.kv_dtype,
            "the transformers runtime caches in the model dtype (fp32, bf16 or fp16); its quantized caches (fp8, quanto, HQQ) keep extra full-precision buffers the probe does not model: use --runtime vllm --mode allocate for fp8/int8/int4",
        )
    if runtime == "transformers" and opts.tp != 1:
        raise PlannerError("tp", opts.tp, "the transformers runtime runs on one device: tp must be 1 (use --runtime vllm to allocate one GPU's share)")
    if opts.static and runtime != "transformers":
        raise PlannerError("static", True, "StaticCache is a transformers cache: use --runtime transformers")
    if opts.gpu is not None:
        from planner.hardware import get_device

        get_device(opts.gpu)


# --------------------------------------------------------------------------- layouts (pure Python)


class CacheTensor(BaseModel):
    """One tensor the allocate mode creates."""

    model_config = ConfigDict(frozen=True)

    layer: str
    role: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


def _vector_tensors(layer: str, role: str, lead: tuple[int, ...], heads: int | None, dim: int, kv_dtype: str) -> list[CacheTensor]:
    """Tensors for ``lead x heads`` vectors of ``dim`` elements, scales included as kv.py counts them."""
    if dim <= 0:
        return []
    head = (heads,) if heads else ()
    if kv_dtype in ("int8", "int4"):
        packed = (dim * KV_DTYPE_BITS[kv_dtype] + 7) // 8
        groups = -(-dim // QUANT_GROUP)
        return [
            CacheTensor(layer=layer, role=role, shape=(*lead, *head, packed), dtype=TORCH_DTYPE[kv_dtype]),
            CacheTensor(layer=layer, role=f"{role}_scale_zero", shape=(*lead, *head, groups, 2), dtype="float16"),
        ]
    return [CacheTensor(layer=layer, role=role, shape=(*lead, *head, dim), dtype=TORCH_DTYPE[kv_dtype])]


def _label(kind: str, window: int | None) -> str:
    return f"{kind}-{window}" if window else kind


def vllm_layout(geo: ModelGeometry, kv_dtype: str, tokens: int, batch: int, block_tokens: int, tp: int = 1) -> list[CacheTensor]:
    """Paged K/V blocks one GPU holds for ``batch`` sequences of ``tokens`` tokens (vLLM layout)."""
    out: list[CacheTensor] = []
    for spec in kv_specs(geo, kv_dtype, tp, "vllm"):
        blocks = batch * spec.blocks(tokens, block_tokens)
        if blocks == 0:
            continue
        lead = (blocks, block_tokens)
        for i in range(spec.num_layers):
            name = f"{_label(spec.kind, spec.window)}[{i}]"
            if spec.latent:
                out += _vector_tensors(name, "latent", lead, None, spec.k_head_dim, kv_dtype)
            else:
                out += _vector_tensors(name, "k", lead, spec.kv_heads_per_gpu, spec.k_head_dim, kv_dtype)
                out += _vector_tensors(name, "v", lead, spec.kv_heads_per_gpu, spec.v_head_dim, kv_dtype)
    return out


class TransformersLayer(BaseModel):
    """What one decoder layer's transformers cache holds per position."""

    model_config = ConfigDict(frozen=True)

    index: int
    kind: str
    window: int | None
    heads: int
    k_dim: int
    v_dim: int


def transformers_layers(geo: ModelGeometry) -> list[TransformersLayer]:
    """The cached layers of ``geo`` as transformers 5.24 lays them out.

    MLA layers cache the compressed latent as one head (K = kv_lora_rank, V = rope part);
    chunked-attention layers are sliding windows of the chunk size. Cross-attention, recurrent
    and KV-sharing layers are not K/V layers here.
    """
    out = []
    for layer in geo.layers:
        if layer.kind not in ("full", "sliding", "chunked"):
            continue
        if geo.mla is not None:
            heads, k, v = 1, geo.mla.kv_lora_rank, geo.mla.qk_rope_head_dim
        else:
            heads, k, v = layer.kv_heads, layer.k_head_dim, layer.v_head_dim
        out.append(TransformersLayer(index=layer.index, kind=layer.kind, window=layer.window if layer.kind != "full" else None, heads=heads, k_dim=k, v_dim=v))
    return out


def transformers_positions(window: int | None, cached: int, last_step: int, static_len: int | None = None) -> tuple[int, int]:
    """(positions in the view, positions its storage keeps) of one transformers cache layer.

    ``cached`` positions have gone through the layer, the last forward adding ``last_step`` of
    them. Dynamic full layers hold all of them. ``DynamicSlidingWindowLayer`` keeps
    ``full[:, :, -W + 1:]`` of ``full = cat(previous view, new)``: the view holds
    ``min(cached, W - 1)`` positions, its storage ``min(cached - last_step, W - 1) + last_step``
    (W after a decode step, the whole prompt after a prefill longer than W). A window of 1 keeps
    everything (the slice ``[-0:]`` is the whole tensor). Static layers hold ``max_cache_len``
    (sliding: ``min(max_cache_len, W)``) from their first forward on.
    """
    if static_len is not None:
        n = static_len if window is None else min(static_len, window)
        return n, n
    if window is None or window <= 1:
        return cached, cached
    last_step = min(last_step, cached)
    return min(cached, window - 1), min(cached - last_step, window - 1) + last_step


def transformers_layout(geo: ModelGeometry, kv_dtype: str, cached: int, batch: int, *, last_step: int = 1, static_len: int | None = None, logical: bool = False) -> list[CacheTensor]:
    """Per-layer K/V ``[batch, heads, positions, dim]`` a transformers cache holds (storage, or views when ``logical``)."""
    out: list[CacheTensor] = []
    dtype = TORCH_DTYPE[kv_dtype]
    for layer in transformers_layers(geo):
        view, storage = transformers_positions(layer.window, cached, last_step, static_len)
        pos = view if logical else storage
        name = f"{_label(layer.kind, layer.window)}[{layer.index}]"
        out.append(CacheTensor(layer=name, role="k", shape=(batch, layer.heads, pos, layer.k_dim), dtype=dtype))
        out.append(CacheTensor(layer=name, role="v", shape=(batch, layer.heads, pos, layer.v_dim), dtype=dtype))
    return out


def predicted_transformers_cache_bytes(geo: ModelGeometry, tokens: int, batch: int, dtype: str, *, last_step: int = 1, static_len: int | None = None, logical: bool = False) -> int:
    """Bytes a transformers 5.24 cache keeps after ``tokens`` positions (storage; views when ``logical``).

    The default ``last_step=1`` is the steady state of decoding (sliding layers: ``min(tokens, W)``
    positions of storage, ``min(tokens, W - 1)`` in the view); ``last_step=tokens`` is the state
    right after a prefill of ``tokens``. MLA counts the compressed latent.
    """
    if dtype not in ELEMENT_BYTES and dtype not in TORCH_DTYPE:
        raise PlannerError("dtype", dtype, f"unknown dtype; choose one of {', '.join(ELEMENT_BYTES)}")
    return sum(t.nbytes for t in transformers_layout(geo, dtype, tokens, batch, last_step=last_step, static_len=static_len, logical=logical))


def planner_kv_bytes(geo: ModelGeometry, kv_dtype: str, tokens: int, batch: int, runtime: str, tp: int = 1, block_tokens: int | None = None) -> int:
    """What :mod:`planner.kv` predicts: paged bytes for vllm (with ``block_tokens``), else ``bytes_at``."""
    specs = kv_specs(geo, kv_dtype, tp, runtime)
    if block_tokens is not None:
        return batch * sum(s.paged_bytes(tokens, block_tokens) for s in specs)
    return batch * sum(s.bytes_at(tokens) for s in specs)


# --------------------------------------------------------------------------- layer limit


_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")


def limit_layers(cfg: dict, limit: int | None) -> tuple[dict, list[str]]:
    """The first ``limit`` layers of a (text) config, keeping the per-layer pattern.

    Per-layer lists (``layer_types``, ``no_rope_layers``, ``hybrid_override_pattern``) are cut;
    index lists (``cross_attention_layers``, ``mlp_only_layers``) keep the indices below the limit.
    """
    key = next((k for k in _LAYER_KEYS if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)), None)
    if limit is None or key is None or limit >= cfg[key]:
        return cfg, []
    out = dict(cfg)
    out[key] = limit
    notes = []
    for name in ("layer_types", "no_rope_layers", "hybrid_override_pattern"):
        if isinstance(out.get(name), (list, str)):
            out[name] = out[name][:limit]
    for name in ("cross_attention_layers", "mlp_only_layers"):
        if isinstance(out.get(name), list):
            out[name] = [i for i in out[name] if isinstance(i, int) and i < limit]
    if out.get("num_kv_shared_layers"):
        out["num_kv_shared_layers"] = 0
        notes.append("num_kv_shared_layers set to 0: in the first layers every layer owns its K/V")
    return out, notes


# --------------------------------------------------------------------------- results


_F = Field(default=None, ge=0, le=1e15, allow_inf_nan=False)
_I = Field(default=None, ge=0, le=MAX_INT)


class LayerMeasurement(BaseModel):
    """One layer of a runtime-mode cache: transformers' class and its bytes."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: int = Field(ge=0, le=1_000_000)
    cache_class: str = Field(max_length=100)
    planner_kind: str = Field(default="", max_length=40)
    window: int | None = _I
    keys_shape: tuple[int, ...] = Field(default=(), max_length=8)
    values_shape: tuple[int, ...] = Field(default=(), max_length=8)
    predicted_bytes: int | None = _I
    measured_bytes: int = Field(ge=0, le=MAX_INT)
    logical_bytes: int = Field(ge=0, le=MAX_INT)


class ProbeResult(BaseModel):
    """One probe: predicted vs measured K/V bytes, timings and how every difference arises."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    format: Literal["kvp-probe/1"] = FORMAT
    ok: bool
    error: str | None = Field(default=None, max_length=4000)
    mode: Literal["allocate", "runtime"]
    runtime: Literal["vllm", "transformers"]
    device: str = Field(max_length=40)
    device_name: str = Field(default="", max_length=200)
    model: str = Field(default="", max_length=300)
    model_type: str = Field(default="", max_length=100)
    kv_dtype: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
    tokens: int = Field(ge=0, le=1 << 31)
    batch: int = Field(ge=1, le=1_000_000)
    decode_steps: int = Field(default=0, ge=0, le=1_000_000)
    cached_tokens: int = Field(default=0, ge=0, le=1 << 32)
    block_tokens: int | None = _I
    tp: int = Field(default=1, ge=1, le=4096)
    static: bool = False
    layers_measured: int = Field(ge=0, le=1_000_000)
    layers_total: int = Field(ge=0, le=1_000_000)
    layer_scale: float = Field(default=1.0, ge=0, le=1e9, allow_inf_nan=False)

    predicted_kv_bytes: int = Field(ge=0, le=MAX_INT)
    predicted_logical_kv_bytes: int | None = _I
    planner_kv_bytes: int = Field(ge=0, le=MAX_INT)
    measured_kv_bytes: int | None = _I
    measured_logical_kv_bytes: int | None = _I
    measured_storage_bytes: int | None = _I
    ratio: float | None = _F
    planner_ratio: float | None = _F
    predicted_kv_bytes_after_prefill: int | None = _I
    measured_kv_bytes_after_prefill: int | None = _I
    predicted_full_model_kv_bytes: int | None = _I
    planner_full_model_kv_bytes: int | None = _I
    scaled_measured_kv_bytes: int | None = _I
    measured_state_bytes: int | None = _I

    cuda_allocated_delta_bytes: int | None = _I
    cuda_peak_delta_bytes: int | None = _I
    cuda_released: bool | None = None
    peak_rss_delta_bytes: int | None = _I
    measured_weights_bytes: int | None = _I
    predicted_weights_bytes: int | None = _I
    cuda_weights_bytes: int | None = _I  # runtime on CUDA: memory_allocated after loading the model
    cuda_non_torch_bytes: int | None = _I  # device memory in use outside torch's pool (mem_get_info - memory_reserved)
    cuda_prefill_peak_bytes: int | None = _I  # the prefill's peak above weights and cache: activations at batch x tokens

    allocate_ms: float | None = _F
    prefill_ms: float | None = _F
    first_decode_ms: float | None = _F
    ttft_ms: float | None = _F
    decode_ms_p50: float | None = _F
    decode_ms_p95: float | None = _F
    decode_ms_mean: float | None = _F
    decode_steps_ms: tuple[float, ...] = Field(default=(), max_length=8192)

    roofline_device: str | None = Field(default=None, max_length=100)
    assumed_mfu: float | None = _F
    assumed_mbu: float | None = _F
    predicted_prefill_ms: float | None = _F
    predicted_prefill_compute_ms: float | None = _F
    predicted_first_decode_ms: float | None = _F
    predicted_ttft_ms: float | None = _F
    predicted_decode_step_ms: float | None = _F
    predicted_decode_memory_ms: float | None = _F
    calibrated_mfu: float | None = _F
    calibrated_mbu: float | None = _F

    layers: tuple[LayerMeasurement, ...] = Field(default=(), max_length=100_000)
    explanation: tuple[str, ...] = Field(default=(), max_length=200)
    source: dict[str, str | int | float | bool | None] | None = None
    torch_version: str | None = Field(default=None, max_length=100)
    transformers_version: str | None = Field(default=None, max_length=100)
    elapsed_s: float | None = _F

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=indent)


def load_probe_json(text: str | bytes) -> ProbeResult:
    """Import a probe JSON produced elsewhere (``python -m planner probe --json`` on a GPU box).

    Raises:
        PlannerError: over 1 MiB, not UTF-8 JSON, not a probe result, a field out of range, or
            a ratio that does not follow from its bytes.
    """
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if len(raw) > MAX_PROBE_JSON_BYTES:
        raise PlannerError("probe_json", f"{len(raw):,} bytes", f"a probe JSON is at most {MAX_PROBE_JSON_BYTES:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8-sig"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise PlannerError("probe_json", "bytes", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PlannerError("probe_json", f"line {exc.lineno} column {exc.colno}", f"not valid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise PlannerError("probe_json", "content", str(exc)[:200]) from None
    if not isinstance(data, dict):
        raise PlannerError("probe_json", type(data).__name__, "a probe result is a JSON object")
    if data.get("format") != FORMAT:
        raise PlannerError("probe_json.format", data.get("format"), f"not a probe result (expected format {FORMAT!r})")
    try:
        result = ProbeResult.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "probe_json"
        raise PlannerError(f"probe_json.{field}", err.get("input"), err.get("msg", "invalid")) from None
    if result.ok and result.measured_kv_bytes is None:
        raise PlannerError("probe_json.measured_kv_bytes", None, "a successful probe must carry its measured bytes")
    if result.measured_kv_bytes is not None and result.predicted_kv_bytes and result.ratio is not None:
        expect = result.measured_kv_bytes / result.predicted_kv_bytes
        if not math.isclose(expect, result.ratio, rel_tol=1e-6, abs_tol=1e-9):
            raise PlannerError("probe_json.ratio", result.ratio, f"does not equal measured / predicted ({expect:.6g})")
    return result


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed in a probe JSON")


# --------------------------------------------------------------------------- calibration


class Calibration(BaseModel):
    """MFU/MBU derived from a runtime probe, ready for ``make_inputs(mfu=..., mbu=...)``."""

    model_config = ConfigDict(frozen=True)

    mfu: float
    mbu: float
    assumed_mfu: float
    assumed_mbu: float
    roofline_device: str
    measured_on: str
    notes: tuple[str, ...] = ()

    def plan_values(self) -> dict[str, float]:
        return {"mfu": self.mfu, "mbu": self.mbu}

    def apply(self, inputs: Any) -> Any:
        """A copy of a :class:`~planner.plan.PlanInputs` with the calibrated MFU and MBU."""
        from planner.plan import make_inputs

        return make_inputs(**{**inputs.model_dump(exclude_none=True), "mfu": self.mfu, "mbu": self.mbu})


_MIN_EFF = MIN_UTILISATION  # the plan inputs' floor (planner/limits.py)


def budget_measurements(result: ProbeResult, max_num_batched_tokens: int, tp: int = 1) -> dict[str, int]:
    """The terms of vLLM's memory budget (:func:`planner.engines.vllm.predict_budget`) that a
    runtime probe on a GPU measured, by term name; empty for a CPU or allocate-mode probe, and
    for ``tp`` > 1 (the probe runs the whole model on one GPU; a tensor-parallel rank holds a
    shard of the activations and NCCL buffers besides).

    * "non-torch memory": device memory in use outside torch's pool after loading the model;
    * "profiling peak activations": the prefill's peak above the weights and the cache, scaled
      from the probe's batch x tokens to ``max_num_batched_tokens`` (activations grow with the
      tokens of the step; vLLM's profiling run is one step of that many tokens).

    The weights stay the planner's count: the probe loads them in its cache dtype, which need not
    be the deployment's (its measured weights are reported beside the prediction instead).
    """
    if result.mode != "runtime" or not result.ok or result.device != "cuda" or tp != 1:
        return {}
    out: dict[str, int] = {}
    if result.cuda_non_torch_bytes is not None:
        out["non-torch memory"] = result.cuda_non_torch_bytes
    tokens = result.batch * result.tokens
    if result.cuda_prefill_peak_bytes is not None and tokens > 0:
        out["profiling peak activations"] = round(result.cuda_prefill_peak_bytes * max_num_batched_tokens / tokens)
    return out


def calibrate(result: ProbeResult) -> Calibration:
    """MFU from the prefill, MBU from the median decode step of a runtime probe.

    ``mfu = predicted prefill compute time x assumed MFU / measured prefill`` and
    ``mbu = predicted decode memory time x assumed MBU / measured p50 decode step``, each clamped
    to (0, 1] (the plan's bounds).

    Raises:
        PlannerError: not a successful runtime probe with a prefill and at least one decode step.
    """
    if result.mode != "runtime" or not result.ok:
        raise PlannerError("probe", result.mode, "calibration needs a successful runtime-mode probe")
    need = (result.prefill_ms, result.decode_ms_p50, result.predicted_prefill_compute_ms, result.predicted_decode_memory_ms, result.assumed_mfu, result.assumed_mbu)
    if any(v is None or v <= 0 for v in need):
        raise PlannerError("decode_steps", result.decode_steps, "calibration needs a measured prefill and at least one decode step")
    mfu_raw = result.predicted_prefill_compute_ms * result.assumed_mfu / result.prefill_ms  # type: ignore[operator]
    mbu_raw = result.predicted_decode_memory_ms * result.assumed_mbu / result.decode_ms_p50  # type: ignore[operator]
    notes = []
    for name, raw in (("MFU", mfu_raw), ("MBU", mbu_raw)):
        if raw > 1:
            notes.append(f"measured {name} {raw:.3g} exceeds 1 (the roofline over-counts work for this model): capped at 1")
        elif raw < 1e-3:
            notes.append(f"measured {name} {raw:.3g} is tiny: per-step overheads dominate this small a model or device mismatch; do not plan with it")
    notes.append(
        "applied to a plan, MFU rescales the compute of the GEMM, MoE and attention terms and MBU the weight and K/V reads "
        "(both relative to the fitted shape curves); the fixed per-layer costs, all-reduce and all-to-all are not rescaled"
    )
    if result.device == "cpu":
        notes.append(f"measured on CPU against {result.roofline_device}'s datasheet: these factors describe this CPU, not that GPU")
    clamp = lambda x: min(1.0, max(_MIN_EFF, x))  # noqa: E731
    return Calibration(
        mfu=float(f"{clamp(mfu_raw):.6g}"),
        mbu=float(f"{clamp(mbu_raw):.6g}"),
        assumed_mfu=result.assumed_mfu,  # type: ignore[arg-type]
        assumed_mbu=result.assumed_mbu,  # type: ignore[arg-type]
        roofline_device=result.roofline_device or "",
        measured_on=f"{result.device} {result.device_name}".strip(),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- roofline


def match_catalog_device(name: str, total_bytes: int | None = None) -> str | None:
    """The catalog GPU a CUDA device name denotes ("NVIDIA H200" -> "H200-141GB"), or None."""
    import re

    n = name.upper()
    gib = (total_bytes or 0) / (1 << 30)
    if "MI325X" in n:
        return "MI325X-256GB"
    if "MI300X" in n:
        return "MI300X-192GB"
    if "B200" in n:
        return "B200-180GB"
    if "H200" in n:
        return "H200-141GB"
    if "H100" in n:
        if "NVL" in n:
            return "H100-NVL-94GB"
        return "H100-PCIe-80GB" if "PCIE" in n else "H100-SXM-80GB"
    if "A100" in n:
        return "A100-SXM-40GB" if ("40GB" in n or 0 < gib < 60) else "A100-SXM-80GB"
    if "L40S" in n:
        return "L40S-48GB"
    if re.search(r"\bL4\b", n):
        return "L4-24GB"
    if re.search(r"\bA10G?\b", n):
        return "A10-24GB"
    if re.search(r"\bT4\b", n):
        return "T4-16GB"
    if "4090" in n:
        return "RTX-4090-24GB"
    return None


def _roofline(cfg: dict, geo: ModelGeometry, opts: ProbeOptions, device_name: str) -> dict:
    from planner import latency
    from planner.hardware import get_device
    from planner.weights import estimate_weights

    dev = get_device(device_name)
    weights = estimate_weights(cfg, geo, opts.kv_dtype)
    specs = kv_specs(geo, opts.kv_dtype, 1, INSTALLED_TRANSFORMERS_RUNTIME)
    attn_layers = sum(s.num_layers for s in specs if s.kind != "cross")
    peak = dev.peak_flops("bf16")
    roof = latency.Roofline(
        weights_bytes=weights.bytes,
        active_params=weights.active_params,
        attn_layers=attn_layers,
        q_heads=geo.num_attention_heads,
        head_dim=geo.head_dim,
        peak_flops=peak,
        bandwidth_bytes_s=dev.bandwidth_bytes_s,
        mfu=latency.DEFAULT_MFU,
        mbu=latency.DEFAULT_MBU,
    )
    B, T, N = opts.batch, opts.tokens, opts.decode_steps

    def kv_at(n: int) -> int:
        return sum(s.bytes_at(n) for s in specs)

    prefill_compute = B * roof.prefill_flops(T) / (peak * roof.mfu)
    prefill = max(prefill_compute, weights.bytes / (dev.bandwidth_bytes_s * roof.mbu))
    first = roof.decode_step_s(B, kv_at(T + 1), T + 1)
    mid = T + max(N, 1) // 2
    step = roof.decode_step_s(B, kv_at(mid), mid)
    step_memory = (weights.bytes + B * kv_at(mid)) / (dev.bandwidth_bytes_s * roof.mbu)
    return {
        "roofline_device": dev.name,
        "assumed_mfu": roof.mfu,
        "assumed_mbu": roof.mbu,
        "predicted_weights_bytes": weights.bytes,
        "predicted_prefill_ms": prefill * 1e3,
        "predicted_prefill_compute_ms": prefill_compute * 1e3,
        "predicted_first_decode_ms": first * 1e3,
        "predicted_ttft_ms": (prefill + first) * 1e3,
        "predicted_decode_step_ms": step * 1e3,
        "predicted_decode_memory_ms": step_memory * 1e3,
    }


# --------------------------------------------------------------------------- preparation (parent)


class _Prepared(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    options: ProbeOptions
    text_cfg: dict  # the (limited) decoder config the child builds
    geo_full: ModelGeometry
    geo: ModelGeometry  # the measured layers
    label: str
    layout: tuple[CacheTensor, ...] = ()  # allocate mode
    cached: int
    predicted: int
    predicted_logical: int | None = None
    predicted_after_prefill: int | None = None
    planner: int
    predicted_full: int
    planner_full: int
    need_bytes: int  # the pre-check estimate
    weights_estimate: int = 0
    work_estimate: int = 0
    notes: tuple[str, ...] = ()


def _work_bytes(cfg: dict, geo: ModelGeometry, opts: ProbeOptions) -> int:
    """A rough working-set estimate of one forward: activations, attention scores, logits, slack."""
    elem = ELEMENT_BYTES.get(opts.kv_dtype, 2)
    inter = cfg.get("intermediate_size") if isinstance(cfg.get("intermediate_size"), int) else 4 * geo.hidden_size
    tokens = opts.batch * opts.tokens
    acts = tokens * (16 * geo.hidden_size + 4 * inter) * elem
    scores = opts.batch * geo.num_attention_heads * opts.tokens * opts.tokens * 4
    logits = opts.batch * (geo.vocab_size or 32000) * 4
    return acts + scores + logits + (64 << 20)


def prepare_probe(config: dict, options: ProbeOptions, *, label: str | None = None) -> _Prepared:
    """Predictions and the child's request for one probe, without torch.

    Raises:
        ConfigError / PlannerError: an invalid config, options, or a prediction above the CPU
            budget when the device is ``cpu`` (refused before anything is allocated).
    """
    _check_combination(options)
    opts = options
    geo_full = parse_geometry(config)
    cfg_full = text_config(config)
    cfg, notes = limit_layers(cfg_full, opts.layers_limit)
    geo = parse_geometry(cfg) if cfg is not cfg_full else geo_full
    runtime = opts.effective_runtime
    T, B, N = opts.tokens, opts.batch, opts.decode_steps
    name = label or str(config.get("_name_or_path") or geo.model_type)
    fields: dict[str, Any] = {"options": opts, "text_cfg": cfg, "geo_full": geo_full, "geo": geo, "label": name, "notes": tuple(notes)}
    if opts.mode == "allocate":
        cached = T
        if runtime == "vllm":
            layout = vllm_layout(geo, opts.kv_dtype, T, B, opts.block_tokens, opts.tp)
            planner = planner_kv_bytes(geo, opts.kv_dtype, T, B, "vllm", opts.tp, opts.block_tokens)
            full_pred = planner_full = planner_kv_bytes(geo_full, opts.kv_dtype, T, B, "vllm", opts.tp, opts.block_tokens)
            logical = None
        else:
            static = T if opts.static else None
            layout = transformers_layout(geo, opts.kv_dtype, T, B, last_step=1, static_len=static)
            logical = sum(t.nbytes for t in transformers_layout(geo, opts.kv_dtype, T, B, last_step=1, static_len=static, logical=True))
            planner = planner_kv_bytes(geo, opts.kv_dtype, T, B, INSTALLED_TRANSFORMERS_RUNTIME)
            full_pred = predicted_transformers_cache_bytes(geo_full, T, B, opts.kv_dtype, static_len=static)
            planner_full = planner_kv_bytes(geo_full, opts.kv_dtype, T, B, INSTALLED_TRANSFORMERS_RUNTIME)
        predicted = sum(t.nbytes for t in layout)
        fields.update(layout=tuple(layout), cached=cached, predicted=predicted, predicted_logical=logical, planner=planner, predicted_full=full_pred, planner_full=planner_full, need_bytes=predicted)
    else:
        cached = T + N
        static = cached if opts.static else None
        last = 1 if N else T
        predicted = predicted_transformers_cache_bytes(geo, cached, B, opts.kv_dtype, last_step=last, static_len=static)
        logical = predicted_transformers_cache_bytes(geo, cached, B, opts.kv_dtype, last_step=last, static_len=static, logical=True)
        after_prefill = predicted_transformers_cache_bytes(geo, T, B, opts.kv_dtype, last_step=T, static_len=static)
        from planner.weights import estimate_weights

        weights = estimate_weights(cfg, geo, opts.kv_dtype).bytes
        work = _work_bytes(cfg, geo, opts)
        fields.update(
            cached=cached,
            predicted=predicted,
            predicted_logical=logical,
            predicted_after_prefill=after_prefill,
            planner=planner_kv_bytes(geo, opts.kv_dtype, cached, B, INSTALLED_TRANSFORMERS_RUNTIME),
            predicted_full=predicted_transformers_cache_bytes(geo_full, cached, B, opts.kv_dtype, last_step=last, static_len=static),
            planner_full=planner_kv_bytes(geo_full, opts.kv_dtype, cached, B, INSTALLED_TRANSFORMERS_RUNTIME),
            need_bytes=max(predicted, after_prefill) + weights + work,
            weights_estimate=weights,
            work_estimate=work,
        )
    prep = _Prepared(**fields)
    if opts.device == "cpu":
        _refuse_over_budget(prep.need_bytes, cpu_budget_bytes(), "the CPU budget", f" ({ENV_CPU_BUDGET})", prep)
    return prep


def _refuse_over_budget(need: int, limit: float, what: str, hint: str, prep: _Prepared | None) -> None:
    if need <= limit:
        return
    parts = ""
    if prep is not None and prep.options.mode == "runtime":
        parts = f" (K/V {max(prep.predicted, prep.predicted_after_prefill or 0):,} + weights about {prep.weights_estimate:,} + working memory about {prep.work_estimate:,})"
    raise PlannerError(
        "probe",
        f"{need:,} bytes",
        f"the probe would need {need:,} bytes{parts}, above {what} of {int(limit):,} bytes{hint}: refused before allocating; lower --tokens or --batch, or use --layers-limit",
    )


def _request(prep: _Prepared) -> dict:
    o = prep.options
    return {
        "mode": o.mode,
        "runtime": o.effective_runtime,
        "device": o.device,
        "kv_dtype": o.kv_dtype,
        "tokens": o.tokens,
        "batch": o.batch,
        "decode_steps": o.decode_steps,
        "static": o.static,
        "warmup": o.warmup,
        "text_config": prep.text_cfg,
        "layout": [t.model_dump(mode="json") for t in prep.layout],
        "need_bytes": prep.need_bytes,
        "kv_peak_bytes": max(prep.predicted, prep.predicted_after_prefill or 0),
        "work_bytes": prep.work_estimate,
        "cpu_budget": cpu_budget_bytes(),
    }


# --------------------------------------------------------------------------- running


def run_probe(config: dict, options: ProbeOptions | None = None, *, source: dict | None = None, label: str | None = None, isolate: bool = True) -> ProbeResult:
    """Run one probe and return predicted vs measured.

    ``isolate`` (the default) runs the measurement in a child process under ``options.timeout_s``;
    a crash, an out-of-memory kill or a timeout gives a result with ``ok=False`` and ``error``.

    Raises:
        PlannerError: the probe is disabled, the options or config are invalid, or the
            predicted memory exceeds the budget (refused before allocating, in this process or
            in the child).
    """
    check_enabled()
    opts = options or ProbeOptions()
    started = time.perf_counter()
    prep = prepare_probe(config, opts, label=label)
    request = _request(prep)
    reply = _run_child(request, opts.timeout_s) if isolate else execute(request)
    if reply.get("status") == "refused":
        raise PlannerError(str(reply.get("field", "probe")), reply.get("value"), str(reply.get("reason", "refused")))
    return _finish(prep, reply, source, time.perf_counter() - started)


def _child_command() -> list[str]:
    return [sys.executable, "-m", "planner.probe", "--child"]


def _run_child(request: dict, timeout_s: float) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    payload = json.dumps(request)
    try:
        proc = subprocess.run(_child_command(), input=payload, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"the probe did not finish within {timeout_s:g} s and its process was stopped (everything it allocated went with it); lower --tokens, --batch or --decode-steps, use --layers-limit, or raise --timeout"}
    except OSError as exc:
        return {"status": "error", "error": f"could not start the probe process: {exc.strerror or exc}"}
    reply = None
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                reply = None
            break
    if isinstance(reply, dict) and reply.get("status") in ("ok", "refused", "error"):
        return reply
    if proc.returncode < 0:
        sig = -proc.returncode
        why = " (SIGKILL: usually the out-of-memory killer)" if sig == 9 else ""
        return {"status": "error", "error": f"the probe process was killed by signal {sig}{why}; nothing is left allocated"}
    tail = next((ln for ln in reversed(proc.stderr.strip().splitlines()) if ln.strip()), "no output")
    return {"status": "error", "error": f"the probe process exited with code {proc.returncode} without a result: {tail[:300]}"}


def _finish(prep: _Prepared, reply: dict, source: dict | None, elapsed: float) -> ProbeResult:
    o = prep.options
    m = reply.get("measurement") or {}
    base: dict[str, Any] = {
        "ok": reply.get("status") == "ok",
        "error": None if reply.get("status") == "ok" else str(reply.get("error") or "unknown error")[:4000],
        "mode": o.mode,
        "runtime": o.effective_runtime,
        "device": m.get("device") or o.device,
        "device_name": m.get("device_name", ""),
        "model": prep.label[:300],
        "model_type": prep.geo.model_type[:100],
        "kv_dtype": o.kv_dtype,
        "tokens": o.tokens,
        "batch": o.batch,
        "decode_steps": o.decode_steps if o.mode == "runtime" else 0,
        "cached_tokens": prep.cached,
        "block_tokens": o.block_tokens if o.effective_runtime == "vllm" else None,
        "tp": o.tp,
        "static": o.static,
        "layers_measured": prep.geo.num_layers,
        "layers_total": prep.geo_full.num_layers,
        "layer_scale": prep.geo_full.num_layers / max(1, prep.geo.num_layers),
        "predicted_kv_bytes": prep.predicted,
        "predicted_logical_kv_bytes": prep.predicted_logical,
        "planner_kv_bytes": prep.planner,
        "predicted_kv_bytes_after_prefill": prep.predicted_after_prefill,
        "predicted_full_model_kv_bytes": prep.predicted_full,
        "planner_full_model_kv_bytes": prep.planner_full,
        "source": _flat_source(source),
        "torch_version": m.get("torch_version"),
        "transformers_version": m.get("transformers_version"),
        "elapsed_s": round(elapsed, 3),
    }
    if not base["ok"]:
        base["explanation"] = (f"no measurement: {base['error']}", *_prediction_sentences(prep))
        return ProbeResult(**base)
    measured = int(m["kv_bytes"])
    base.update(
        measured_kv_bytes=measured,
        measured_logical_kv_bytes=m.get("logical_kv_bytes"),
        measured_storage_bytes=m.get("storage_bytes"),
        ratio=measured / prep.predicted if prep.predicted else None,
        planner_ratio=measured / prep.planner if prep.planner else None,
        measured_kv_bytes_after_prefill=m.get("kv_bytes_after_prefill"),
        scaled_measured_kv_bytes=round(measured * prep.predicted_full / prep.predicted) if prep.predicted else None,
        measured_state_bytes=m.get("state_bytes"),
        cuda_allocated_delta_bytes=m.get("cuda_allocated_delta_bytes"),
        cuda_peak_delta_bytes=m.get("cuda_peak_delta_bytes"),
        cuda_released=m.get("cuda_released"),
        peak_rss_delta_bytes=m.get("peak_rss_delta_bytes"),
        measured_weights_bytes=m.get("weights_bytes"),
        cuda_weights_bytes=m.get("cuda_weights_bytes"),
        cuda_non_torch_bytes=m.get("cuda_non_torch_bytes"),
        cuda_prefill_peak_bytes=m.get("cuda_prefill_peak_bytes"),
        allocate_ms=m.get("allocate_ms"),
    )
    layers = []
    if o.mode == "runtime":
        steps = [float(x) for x in m.get("decode_steps_ms", [])]
        prefill, first = m.get("prefill_ms"), (steps[0] if steps else None)
        base.update(
            prefill_ms=prefill,
            first_decode_ms=first,
            ttft_ms=prefill + first if prefill is not None and first is not None else prefill,
            decode_ms_p50=statistics.median(steps) if steps else None,
            decode_ms_p95=sorted(steps)[max(0, math.ceil(0.95 * len(steps)) - 1)] if steps else None,
            decode_ms_mean=statistics.fmean(steps) if steps else None,
            decode_steps_ms=tuple(round(s, 4) for s in steps),
        )
        roof_dev = o.gpu or (match_catalog_device(base["device_name"], m.get("device_total_bytes")) if base["device"] == "cuda" else None)
        from planner.hardware import DEFAULT_GPU

        base.update(_roofline(prep.text_cfg, prep.geo, o, roof_dev or DEFAULT_GPU))
        layers = _layer_rows(prep, m.get("layers", []))
        base["layers"] = tuple(layers)
        if steps and prefill:
            cal = calibrate(ProbeResult(**base))
            base.update(calibrated_mfu=cal.mfu, calibrated_mbu=cal.mbu)
    base["explanation"] = tuple(_explain(prep, base, m, layers))
    return ProbeResult(**base)


def _flat_source(source: dict | None) -> dict | None:
    if not source:
        return None
    return {str(k)[:64]: (v if isinstance(v, (int, float, bool)) or v is None else str(v)[:300]) for k, v in list(source.items())[:32]}


def _layer_rows(prep: _Prepared, measured: list[dict]) -> list[LayerMeasurement]:
    o = prep.options
    static = prep.cached if o.static else None
    last = 1 if o.decode_steps else o.tokens
    expected = {layer.index: layer for layer in transformers_layers(prep.geo)}
    kinds = {layer.index: layer for layer in prep.geo.layers}
    rows = []
    for row in measured[:100_000]:
        i = int(row["index"])
        exp = expected.get(i)
        pred = None
        if exp is not None:
            _, pos = transformers_positions(exp.window, prep.cached, last, static)
            pred = o.batch * pos * (exp.k_dim + exp.v_dim) * exp.heads * ELEMENT_BYTES[o.kv_dtype]
        geo_layer = kinds.get(i)
        rows.append(
            LayerMeasurement(
                index=i,
                cache_class=str(row.get("cache_class", ""))[:100],
                planner_kind=geo_layer.kind if geo_layer else "",
                window=geo_layer.window if geo_layer else None,
                keys_shape=tuple(row.get("keys_shape", ()))[:8],
                values_shape=tuple(row.get("values_shape", ()))[:8],
                predicted_bytes=pred,
                measured_bytes=int(row.get("storage_bytes", 0)),
                logical_bytes=int(row.get("logical_bytes", 0)),
            )
        )
    return rows


def _fmt(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,} B"


def _prediction_sentences(prep: _Prepared) -> list[str]:
    """Why the probe's prediction differs from planner.kv's, per layer group."""
    o = prep.options
    out = []
    geo = prep.geo
    if o.effective_runtime == "vllm":
        out.append(f"vLLM layout: each sequence takes whole blocks of {o.block_tokens} positions per layer (sliding and chunked layers at most their window's blocks plus one), exactly as planner.kv's paged_bytes counts them, so the prediction equals the planner's ({_fmt(prep.planner)}).")
        if o.kv_dtype in ("int8", "int4"):
            out.append(f"{o.kv_dtype}: packed data plus one fp16 scale and one fp16 zero-point per {QUANT_GROUP} elements of each head vector, planner.kv's accounting (vLLM itself has no per-group int cache; real int formats may differ).")
        if o.kv_dtype == "fp8":
            out.append("fp8: float8_e4m3fn tensors, one byte per element; per-tensor scales are a few bytes per layer and not allocated.")
        if any(layer.kind == "cross" for layer in geo.layers):
            out.append("cross-attention layers hold the encoder's states, not text tokens: nothing is allocated for them.")
        return out
    sliding = [layer for layer in transformers_layers(geo) if layer.window]
    if sliding and not o.static:
        w = sliding[0].window
        if prep.cached >= w:
            out.append(
                f"transformers' DynamicSlidingWindowLayer keeps the last W-1 = {w - 1:,} positions in its view, but the view is a slice of cat(previous, new) and keeps that storage alive: "
                f"min(previous, W-1) + new positions, i.e. W = {w:,} after a decode step (what planner.kv's min(tokens, W) counts) and the whole prompt right after a prefill longer than W."
            )
    if any(layer.kind == "chunked" for layer in geo.layers):
        out.append("transformers caches chunked-attention layers as a sliding window of the chunk size (min(T, C) positions), which planner.kv's transformers runtimes count; a paged engine holds the current chunk.")
    if geo.mla is not None:
        m = geo.mla
        per = geo.num_attention_heads * (geo.head_dim + geo.v_head_dim)
        out.append(
            f"transformers {INSTALLED_TRANSFORMERS_RUNTIME!r} semantics: MLA is cached compressed, one head with K = kv_lora_rank {m.kv_lora_rank} and V = qk_rope_head_dim {m.qk_rope_head_dim} elements ({m.latent_dim} per token and layer); "
            f"transformers before #47761 (planner runtime 'transformers') cached decompressed per-head K/V ({per} per token and layer), {per / m.latent_dim:.1f}x more."
        )
    if prep.predicted != prep.planner:
        if o.static:
            out.append(f"StaticCache allocates max_cache_len = {prep.cached:,} positions per full layer and min(max_cache_len, W) per sliding layer at the first forward.")
    if any(layer.kind == "cross" for layer in geo.layers):
        out.append("cross-attention layers are not modelled by the probe (they cache encoder states).")
    return out


def _explain(prep: _Prepared, r: dict, m: dict, layers: list[LayerMeasurement]) -> list[str]:
    o = prep.options
    out = []
    measured, predicted = r["measured_kv_bytes"], r["predicted_kv_bytes"]
    if r["device"] == "cuda" and o.mode == "allocate":
        out.append(f"Measured = torch.cuda.memory_allocated after minus before allocating {m.get('tensors', 0)} tensors; tensor storage alone is {_fmt(m.get('storage_bytes'))}.")
    elif o.mode == "allocate":
        out.append(f"Measured = the storage bytes (untyped_storage().nbytes()) of the {m.get('tensors', 0)} allocated tensors.")
    else:
        out.append("Measured = the storage bytes of every cache layer's keys and values tensors after the last forward (bookkeeping scalars excluded).")
    if predicted == 0:
        out.append("The measured layers hold no K/V (recurrent, MLP-only or cross-attention layers): raise --layers-limit to include attention layers.")
    if measured == predicted:
        out.append(f"Measured K/V bytes equal the prediction exactly ({_fmt(measured)}).")
    else:
        diff = measured - predicted
        rounded = m.get("rounded_bytes")
        if r["device"] == "cuda" and o.mode == "allocate" and rounded == measured and m.get("storage_bytes") == predicted:
            out.append(f"Measured exceeds the prediction by {diff:,} B: the CUDA caching allocator rounds every tensor up to a multiple of {CUDA_ROUND} bytes; the storage itself matches exactly.")
        else:
            ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.6f}"
            out.append(f"Measured differs from the prediction by {diff:+,} B (ratio {ratio}); see the per-layer rows for where.")
            for row in layers:
                if row.predicted_bytes is not None and row.predicted_bytes != row.measured_bytes:
                    out.append(f"layer {row.index} ({row.cache_class}, planner kind {row.planner_kind}): predicted {_fmt(row.predicted_bytes)}, measured {_fmt(row.measured_bytes)} (keys {list(row.keys_shape)}, values {list(row.values_shape)}).")
                    break
    if prep.planner != predicted:
        pr = "n/a" if r["planner_ratio"] is None else f"{r['planner_ratio']:.4f}"
        out.append(f"planner.kv predicts {_fmt(prep.planner)} for these layers (measured/planner {pr}):")
    out += _prediction_sentences(prep)
    for row in layers:
        sliding_cls = "Sliding" in row.cache_class
        if row.planner_kind in ("sliding", "chunked") and not sliding_cls or row.planner_kind == "full" and sliding_cls:
            out.append(f"layer {row.index}: transformers uses {row.cache_class} where the planner's geometry says {row.planner_kind}.")
    if r["layers_measured"] < r["layers_total"]:
        out.append(
            f"Measured the first {r['layers_measured']} of {r['layers_total']} layers (same layer-kind pattern); the full model is predicted at {_fmt(prep.predicted_full)} "
            f"(planner {_fmt(prep.planner_full)}), and the measurement scaled by predicted full / predicted measured gives {_fmt(r.get('scaled_measured_kv_bytes'))}."
        )
        if o.mode == "runtime":
            out.append(f"Timings cover {r['layers_measured']} layers plus the embedding and LM head: the layer part of a full-model step is roughly {r['layer_scale']:.1f}x longer.")
    if o.mode == "runtime":
        after_p, after_m = r.get("predicted_kv_bytes_after_prefill"), r.get("measured_kv_bytes_after_prefill")
        if after_m is not None:
            eq = "equal to" if after_p == after_m else "against"
            out.append(f"Right after the prefill the cache held {_fmt(after_m)} ({eq} the predicted {_fmt(after_p)}); the cache grows by one position per full layer per decode step.")
        out.append(f"The cache holds {prep.cached:,} positions: the {o.tokens:,}-token prefill plus {o.decode_steps} decode steps, each writing one position (generate() would write one fewer: the last token's K/V is never stored).")
        if r.get("prefill_ms") is not None:
            out.append(
                f"Prefill {r['prefill_ms']:.2f} ms vs roofline {r['predicted_prefill_ms']:.4g} ms; decode step p50 {_fmt_ms(r.get('decode_ms_p50'))} vs roofline {r['predicted_decode_step_ms']:.4g} ms "
                f"(roofline for {r['roofline_device']} at MFU {r['assumed_mfu']:g}, MBU {r['assumed_mbu']:g}, weights as planner.weights counts them, bf16 peak)."
            )
        if r["device"] == "cpu":
            out.append(f"Ran on CPU: the roofline describes {r['roofline_device']}, so latency ratios and the calibrated MFU/MBU describe this CPU against that GPU's datasheet and should not be used for a GPU plan.")
            if r.get("peak_rss_delta_bytes") is not None:
                out.append(f"Peak memory on CPU is the child process's peak RSS growth ({_fmt(r['peak_rss_delta_bytes'])}): weights, activations, allocator caches and Python objects, not the cache alone.")
        elif r.get("cuda_peak_delta_bytes") is not None:
            out.append(f"Peak CUDA memory above the baseline was {_fmt(r['cuda_peak_delta_bytes'])} (weights {_fmt(r.get('measured_weights_bytes'))}, cache and activations).")
        if r.get("measured_state_bytes"):
            out.append(f"Recurrent (Mamba/linear-attention) layers hold {_fmt(r['measured_state_bytes'])} of state, outside the K/V comparison.")
        if m.get("warmup"):
            out.append("A short warm-up forward ran first so one-time start-up costs are not in the timings.")
    if r["device"] == "cuda" and r.get("cuda_released") is False:
        out.append("CUDA memory was not fully back at the baseline after release (the caching allocator may hold blocks).")
    out += list(prep.notes)
    return out


def _fmt_ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g} ms"


# --------------------------------------------------------------------------- child (imports torch)


class _Refused(Exception):
    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(reason)
        self.field, self.value, self.reason = field, value, reason


def execute(request: dict) -> dict:
    """Measure one request in this process (the child's work). Never raises: returns a status dict."""
    try:
        if request.get("mode") == "allocate":
            measurement = _measure_allocate(request)
        else:
            measurement = _measure_runtime(request)
        return {"status": "ok", "measurement": measurement}
    except _Refused as exc:
        return {"status": "refused", "field": exc.field, "value": str(exc.value), "reason": exc.reason}
    except PlannerError as exc:
        return {"status": "refused", "field": exc.field, "value": str(exc.value), "reason": exc.reason}
    except Exception as exc:  # noqa: BLE001 - the child reports every failure as a result
        return {"status": "error", "error": f"{type(exc).__name__}: {str(exc)[:1000]}"}
    finally:
        _release()


def _release() -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _device(torch: Any, wanted: str) -> Any:
    if wanted == "cuda" and not torch.cuda.is_available():
        raise _Refused("device", "cuda", "CUDA is not available on this machine (torch.cuda.is_available() is False); use --device cpu or auto")
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(wanted)


def _device_info(torch: Any, dev: Any) -> dict:
    import platform

    info = {"device": dev.type, "torch_version": torch.__version__}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(device_name=props.name, device_total_bytes=int(props.total_memory))
    else:
        info.update(device_name=f"{platform.machine()} {platform.processor() or ''} ({torch.get_num_threads()} threads)".replace("  ", " "))
    return info


def _check_memory(torch: Any, dev: Any, need: int, budget: int) -> None:
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        _refuse_child(need, GPU_FREE_FRACTION * free, f"80 % of the free device memory ({free:,} bytes free)")
    else:
        _refuse_child(need, budget, f"the CPU budget ({ENV_CPU_BUDGET})")


def _refuse_child(need: int, limit: float, what: str) -> None:
    if need > limit:
        raise _Refused("probe", f"{need:,} bytes", f"the probe would need {need:,} bytes, above {what} of {int(limit):,} bytes: refused before allocating; lower --tokens or --batch, or use --layers-limit")


def _storage_bytes(tensors: list, seen: set | None = None) -> int:
    seen = set() if seen is None else seen
    total = 0
    for t in tensors:
        s = t.untyped_storage()
        key = (s.data_ptr(), s.nbytes())
        if s.nbytes() and key in seen:
            continue
        seen.add(key)
        total += s.nbytes()
    return total


def _sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _measure_allocate(req: dict) -> dict:
    import torch

    dev = _device(torch, req["device"])
    specs = [CacheTensor(**t) for t in req["layout"]]
    dtypes = {}
    for t in specs:
        if t.dtype not in dtypes:
            dt = getattr(torch, t.dtype, None)
            if dt is None:
                raise _Refused("kv_dtype", t.dtype, f"this torch ({torch.__version__}) has no {t.dtype}")
            dtypes[t.dtype] = dt
    storage_pred = sum(t.nbytes for t in specs)
    rounded = sum(-(-t.nbytes // CUDA_ROUND) * CUDA_ROUND for t in specs)
    _check_memory(torch, dev, rounded if dev.type == "cuda" else storage_pred, int(req.get("cpu_budget", DEFAULT_CPU_BUDGET)))
    info = _device_info(torch, dev)
    tensors: list = []
    if dev.type == "cuda":
        torch.cuda.init()
        _sync(torch, dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
    t0 = time.perf_counter()
    try:
        for t in specs:
            tensors.append(torch.zeros(t.shape, dtype=dtypes[t.dtype], device=dev))
        _sync(torch, dev)
        elapsed = (time.perf_counter() - t0) * 1e3
        storage = _storage_bytes(tensors)
        out = {**info, "tensors": len(tensors), "storage_bytes": storage, "logical_kv_bytes": sum(t.numel() * t.element_size() for t in tensors), "allocate_ms": round(elapsed, 4), "rounded_bytes": rounded}
        if dev.type == "cuda":
            after = torch.cuda.memory_allocated(dev)
            out["cuda_allocated_delta_bytes"] = after - before
            out["cuda_peak_delta_bytes"] = torch.cuda.max_memory_allocated(dev) - before
            out["kv_bytes"] = after - before
        else:
            out["kv_bytes"] = storage
    finally:
        tensors.clear()
        _release()
    if dev.type == "cuda":
        out["cuda_released"] = torch.cuda.memory_allocated(dev) == before
    return out


_DROP_KEYS = {"model_type", "architectures", "auto_map", "quantization_config", "torch_dtype", "dtype", "transformers_version", "attn_implementation", "use_cache", "trust_remote_code"}


def build_transformers_config(text_cfg: dict) -> Any:
    """A transformers config from a (text) config dict, completed with the class defaults; never remote code."""
    from transformers import AutoConfig

    model_type = text_cfg.get("model_type")
    if not isinstance(model_type, str):
        raise _Refused("model_type", model_type, "the config names no model_type: transformers cannot build a model from it")
    fields = {k: v for k, v in text_cfg.items() if not k.startswith("_") and k not in _DROP_KEYS}
    try:
        cfg = AutoConfig.for_model(model_type, **fields)
    except ValueError as exc:
        raise _Refused("model_type", model_type, f"transformers does not know this model type (the probe never runs remote code): {str(exc)[:200]}") from None
    cfg.use_cache = True
    return cfg


def _cache_tensors(cache: Any) -> tuple[list[dict], list, list, int]:
    """Per-layer rows, K/V tensors, other state tensors of a cache, and the state bytes."""
    import torch

    rows, kv, state = [], [], []
    for i, layer in enumerate(cache.layers):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        pair = [t for t in (keys, values) if isinstance(t, torch.Tensor)]
        kv += pair
        for name, value in vars(layer).items():
            if name not in ("keys", "values") and isinstance(value, torch.Tensor) and value.dim() > 0 and value.numel() > 1:
                state.append(value)
        if pair:
            rows.append(
                {
                    "index": i,
                    "cache_class": type(layer).__name__,
                    "keys_shape": list(keys.shape) if isinstance(keys, torch.Tensor) else [],
                    "values_shape": list(values.shape) if isinstance(values, torch.Tensor) else [],
                    "storage_bytes": _storage_bytes(pair),
                    "logical_bytes": sum(t.numel() * t.element_size() for t in pair),
                }
            )
        else:
            rows.append({"index": i, "cache_class": type(layer).__name__, "storage_bytes": 0, "logical_bytes": 0})
    return rows, kv, state, _storage_bytes(state)


def _forward(model: Any, ids: Any, cache: Any) -> Any:
    try:
        return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    except TypeError:
        return model(input_ids=ids, cache=cache, use_cache=True)


def _measure_runtime(req: dict) -> dict:
    import resource

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, DynamicCache, StaticCache

    dev = _device(torch, req["device"])
    dtype = getattr(torch, TORCH_DTYPE[req["kv_dtype"]])
    cfg = build_transformers_config(req["text_config"])
    B, T, N = int(req["batch"]), int(req["tokens"]), int(req["decode_steps"])
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    weights = sum(p.numel() * p.element_size() for p in meta.parameters()) + sum(b.numel() * b.element_size() for b in meta.buffers())
    del meta
    need = weights + int(req["kv_peak_bytes"]) + int(req.get("work_bytes", 0))
    _check_memory(torch, dev, need, int(req.get("cpu_budget", DEFAULT_CPU_BUDGET)))
    info = _device_info(torch, dev)
    info.update(transformers_version=transformers.__version__, weights_bytes=weights)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if dev.type == "cuda":
        torch.cuda.init()
        _sync(torch, dev)
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(dev)
    torch.manual_seed(0)
    model = cache = out = None
    try:
        with torch.device(dev):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        model = model.to(dev).eval()
        if dev.type == "cuda":
            _sync(torch, dev)
            loaded = torch.cuda.memory_allocated(dev)
            free, total = torch.cuda.mem_get_info(dev)
            # what the device uses beyond torch's own pool: the CUDA context, cuBLAS/cuDNN workspaces
            non_torch = max(0, (total - free) - torch.cuda.memory_reserved(dev))
        vocab = int(getattr(cfg, "vocab_size", 0) or model.get_input_embeddings().num_embeddings)
        ids = torch.randint(0, vocab, (B, T), device=dev)
        with torch.inference_mode():
            if req.get("warmup", True):
                warm = DynamicCache(config=cfg)
                o = _forward(model, ids[:, : min(T, 8)], warm)
                _forward(model, o.logits[:, -1:].argmax(-1), warm)
                del warm, o
            cache = StaticCache(config=cfg, max_cache_len=T + N) if req.get("static") else DynamicCache(config=cfg)
            if dev.type == "cuda":
                _sync(torch, dev)
                torch.cuda.reset_peak_memory_stats(dev)
            t0 = time.perf_counter()
            out = _forward(model, ids, cache)
            nxt = out.logits[:, -1:].argmax(-1)
            _sync(torch, dev)
            prefill_ms = (time.perf_counter() - t0) * 1e3
            _, kv_after_prefill, _, _ = _cache_tensors(cache)
            after_prefill = _storage_bytes(kv_after_prefill)
            del kv_after_prefill
            steps = []
            for _ in range(N):
                t0 = time.perf_counter()
                out = _forward(model, nxt, cache)
                nxt = out.logits[:, -1:].argmax(-1)
                _sync(torch, dev)
                steps.append((time.perf_counter() - t0) * 1e3)
        rows, kv, _state, state_bytes = _cache_tensors(cache)
        result = {
            **info,
            "kv_bytes": _storage_bytes(kv),
            "storage_bytes": _storage_bytes(kv),
            "logical_kv_bytes": sum(t.numel() * t.element_size() for t in kv),
            "kv_bytes_after_prefill": after_prefill,
            "state_bytes": state_bytes,
            "prefill_ms": round(prefill_ms, 4),
            "decode_steps_ms": [round(s, 4) for s in steps],
            "layers": rows,
            "warmup": bool(req.get("warmup", True)),
            "peak_rss_delta_bytes": max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0),
        }
        del kv, _state
        if dev.type == "cuda":
            result["cuda_peak_delta_bytes"] = torch.cuda.max_memory_allocated(dev) - base
            result["cuda_weights_bytes"] = loaded - base
            result["cuda_non_torch_bytes"] = non_torch
            # the prefill's peak above the weights and the cache it filled: its activations at B x T tokens
            result["cuda_prefill_peak_bytes"] = max(0, result["cuda_peak_delta_bytes"] - (loaded - base) - after_prefill)
    finally:
        del model, cache, out
        _release()
    if dev.type == "cuda":
        result["cuda_released"] = torch.cuda.memory_allocated(dev) == base
    return result


def _child_main() -> int:
    """``python -m planner.probe --child``: a request on stdin, one JSON line on stdout."""
    real_out = os.dup(1)
    os.dup2(2, 1)  # stray prints from libraries go to stderr, not into the reply
    sys.stdout = sys.stderr
    try:
        raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
        if len(raw) > MAX_REQUEST_BYTES:
            reply = {"status": "error", "error": "probe request too large"}
        else:
            reply = execute(json.loads(raw))
    except Exception as exc:  # noqa: BLE001
        reply = {"status": "error", "error": f"{type(exc).__name__}: {str(exc)[:1000]}"}
    os.write(real_out, (json.dumps(reply) + "\n").encode("utf-8"))
    return 0


# --------------------------------------------------------------------------- text summary


def probe_summary(r: ProbeResult) -> str:
    lines = [
        f"probe        {r.mode} / {r.runtime} on {r.device} {r.device_name}".rstrip(),
        f"model        {r.model} ({r.model_type}), {r.layers_measured} of {r.layers_total} layers, {r.kv_dtype}, batch {r.batch}, {r.tokens:,} tokens" + (f" + {r.decode_steps} decode steps" if r.mode == "runtime" else ""),
        f"K/V bytes    predicted {_fmt(r.predicted_kv_bytes)}, measured {_fmt(r.measured_kv_bytes)}, ratio {r.ratio:.6f}" if r.ratio is not None else f"K/V bytes    predicted {_fmt(r.predicted_kv_bytes)}, measured n/a",
        f"planner.kv   {_fmt(r.planner_kv_bytes)}" + (f" (measured/planner {r.planner_ratio:.4f})" if r.planner_ratio is not None else ""),
    ]
    if r.layers_measured < r.layers_total:
        lines.append(f"full model   predicted {_fmt(r.predicted_full_model_kv_bytes)}, measured scaled {_fmt(r.scaled_measured_kv_bytes)}")
    if r.allocate_ms is not None:
        lines.append(f"allocate     {r.allocate_ms:.2f} ms")
    if r.prefill_ms is not None:
        lines.append(f"prefill      {r.prefill_ms:.2f} ms (roofline {r.predicted_prefill_ms:.4g} ms on {r.roofline_device}); TTFT {_fmt_ms(r.ttft_ms)}")
        lines.append(f"decode step  p50 {_fmt_ms(r.decode_ms_p50)}, p95 {_fmt_ms(r.decode_ms_p95)} (roofline {_fmt_ms(r.predicted_decode_step_ms)})")
    if r.calibrated_mfu is not None:
        lines.append(f"calibrate    MFU {r.calibrated_mfu:.4g}, MBU {r.calibrated_mbu:.4g} (plan with --mfu {r.calibrated_mfu:.4g} --mbu {r.calibrated_mbu:.4g})")
    if r.error:
        lines.append(f"error        {r.error}")
    lines += [f"- {s}" for s in r.explanation]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m planner.probe --child``: the measuring process (the ``probe`` command is in :mod:`planner.cli`)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child_main()
    print("error: run the probe as `python -m planner probe ...`; `python -m planner.probe --child` is the measuring process", file=sys.stderr)
    return 2

