"""What the parent and the measuring child exchange, typed and validated on both sides.

One JSON object each way: the parent writes a :class:`ProbeRequest` to the child's stdin, the
child answers with one line on stdout, a :data:`ProbeReply`: :class:`MeasuredReply` (with an
:class:`AllocateMeasurement` or a :class:`RuntimeMeasurement`), :class:`RefusedReply` (the
child's own memory check or a dtype this torch lacks: raised as a
:class:`~planner.errors.PlannerError` in the parent) or :class:`FailedReply` (anything else that
went wrong). Every message carries :data:`PROTOCOL`; a message of another version, or one that
fails validation, is a :class:`ProtocolError` naming the field.

The text is plain ``json.dumps`` (not pydantic's JSON mode), so a config's bare ``Infinity``
(Nemotron-H's ``time_step_limit``) reaches the child as it was read.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planner.errors import ProbeProtocolError

PROTOCOL = "kvp-probe-child/1"  # bump when a field is added, removed or changes meaning
MAX_REQUEST_BYTES = 4 << 20
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn", "int8": "int8", "int4": "uint8"}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "int8": 1, "uint8": 1}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

_MESSAGE = ConfigDict(frozen=True, extra="forbid")
_Bytes = Annotated[int, Field(ge=0)]


ProtocolError = ProbeProtocolError  # a message that is not JSON, not of PROTOCOL, or fails validation (planner.errors)


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


class ProbeRequest(BaseModel):
    """What the child measures: the options it needs, the config or the tensors, its budgets."""

    model_config = _MESSAGE

    protocol: Literal["kvp-probe-child/1"] = PROTOCOL
    mode: Literal["allocate", "runtime"]
    runtime: Literal["vllm", "transformers"]
    device: Literal["auto", "cpu", "cuda"]
    kv_dtype: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
    tokens: int = Field(ge=1)
    batch: int = Field(ge=1)
    decode_steps: int = Field(ge=0)
    static: bool
    warmup: bool
    text_config: dict[str, Any]  # runtime mode: the (limited) decoder config the child builds
    layout: tuple[CacheTensor, ...] = ()  # allocate mode: the tensors to create
    kv_peak_bytes: _Bytes  # runtime mode: the predicted cache at its largest, for the memory check
    work_bytes: _Bytes  # runtime mode: the forward's working memory, for the memory check
    cpu_budget: int = Field(ge=1)


class CacheLayer(BaseModel):
    """One layer of a transformers cache as the child found it after the last forward."""

    model_config = _MESSAGE

    index: int = Field(ge=0)
    cache_class: str
    keys_shape: tuple[int, ...] = ()
    values_shape: tuple[int, ...] = ()
    storage_bytes: _Bytes
    logical_bytes: _Bytes


class _Measurement(BaseModel):
    """What both modes measure: the device and the cache's bytes."""

    model_config = _MESSAGE

    device: Literal["cpu", "cuda"]
    device_name: str
    device_total_bytes: _Bytes | None = None  # CUDA only
    torch_version: str
    kv_bytes: _Bytes  # the measured figure: allocator delta on CUDA (allocate mode), storage otherwise
    storage_bytes: _Bytes
    logical_kv_bytes: _Bytes
    cuda_peak_delta_bytes: int | None = None
    cuda_released: bool | None = None


class AllocateMeasurement(_Measurement):
    mode: Literal["allocate"] = "allocate"
    tensors: _Bytes
    allocate_ms: float = Field(ge=0)
    rounded_bytes: _Bytes  # every tensor rounded up to the CUDA allocator's block
    cuda_allocated_delta_bytes: int | None = None


class RuntimeMeasurement(_Measurement):
    mode: Literal["runtime"] = "runtime"
    transformers_version: str
    weights_bytes: _Bytes
    kv_bytes_after_prefill: _Bytes
    state_bytes: _Bytes  # recurrent (Mamba, linear-attention) state, outside the K/V figure
    prefill_ms: float = Field(ge=0)
    decode_steps_ms: tuple[float, ...] = ()
    layers: tuple[CacheLayer, ...] = ()
    warmup: bool
    peak_rss_delta_bytes: _Bytes
    cuda_weights_bytes: int | None = None
    cuda_non_torch_bytes: int | None = None
    cuda_prefill_peak_bytes: int | None = None


class MeasuredReply(BaseModel):
    model_config = _MESSAGE

    protocol: Literal["kvp-probe-child/1"] = PROTOCOL
    status: Literal["ok"] = "ok"
    measurement: Annotated[AllocateMeasurement | RuntimeMeasurement, Field(discriminator="mode")]


class RefusedReply(BaseModel):
    """Refused before allocating: ``field``, ``value`` and ``reason`` as a PlannerError has them."""

    model_config = _MESSAGE

    protocol: Literal["kvp-probe-child/1"] = PROTOCOL
    status: Literal["refused"] = "refused"
    field: str
    value: str
    reason: str


class FailedReply(BaseModel):
    model_config = _MESSAGE

    protocol: Literal["kvp-probe-child/1"] = PROTOCOL
    status: Literal["error"] = "error"
    error: str


ProbeReply = Annotated[MeasuredReply | RefusedReply | FailedReply, Field(discriminator="status")]
_REPLY: TypeAdapter[MeasuredReply | RefusedReply | FailedReply] = TypeAdapter(ProbeReply)


def encode(message: BaseModel) -> str:
    """One message as one line of JSON."""
    return json.dumps(message.model_dump())


def decode_request(raw: str | bytes) -> ProbeRequest:
    """Raises: ProtocolError: not JSON, another protocol version, or a field out of its type."""
    return _decode(raw, ProbeRequest.model_validate, "request")


def decode_reply(raw: str | bytes) -> MeasuredReply | RefusedReply | FailedReply:
    """Raises: ProtocolError: not JSON, another protocol version, or a field out of its type."""
    return _decode(raw, _REPLY.validate_python, "reply")


def _decode(raw: str | bytes, validate: Any, what: str) -> Any:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"the probe {what} is not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("protocol") != PROTOCOL:
        found = data.get("protocol") if isinstance(data, dict) else type(data).__name__
        raise ProtocolError(f"the probe {what} speaks {found!r}, not {PROTOCOL!r}: parent and child come from different planner versions")
    try:
        return validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or what
        raise ProtocolError(f"the probe {what}'s {field} is invalid: {err.get('msg', 'invalid')}") from None
