"""A probe's result (:class:`ProbeResult`, the ``kvp-probe/1`` JSON) and its import from a file."""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import PlannerError
from planner.limits import safe_json_loads

FORMAT = "kvp-probe/1"
MAX_PROBE_JSON_BYTES = 1 << 20
MAX_INT = 1 << 62
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
        data = safe_json_loads(raw.decode("utf-8-sig"), parse_constant=_reject_constant)
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
