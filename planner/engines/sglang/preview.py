"""One call for a plan's SGLang start-up card: memory state, sizing (or refusal) and the command line."""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.sglang.capacity import SglangCapacity, get_gpu, sglang_capacity
from planner.engines.sglang.defaults import SglangRefusal
from planner.engines.sglang.memory import SglangMemory, predict_memory
from planner.engines.sglang.rules import DEFAULT_SGLANG_VERSION
from planner.geometry import ModelGeometry
from planner.results import Result


@dataclass(frozen=True, slots=True)
class SglangSettings(Result):
    """The ``launch_server`` flags a plan sets (None / "auto": SGLang resolves its own default)."""

    tp: int = 1
    kv_cache_dtype: str = "auto"
    context_length: int | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_running_requests: int | None = None
    page_size: int | None = None
    sglang_version: str = DEFAULT_SGLANG_VERSION
    scheduler_recv_interval: int | None = None  # a scheduler flag: changes the serving latency, not the sizing


# (settings field, launch_server flag), in the order the command line lists them
_FLAGS = (
    ("tp", "--tp-size"), ("context_length", "--context-length"), ("mem_fraction_static", "--mem-fraction-static"), ("kv_cache_dtype", "--kv-cache-dtype"),
    ("chunked_prefill_size", "--chunked-prefill-size"), ("max_running_requests", "--max-running-requests"), ("page_size", "--page-size"),
    ("scheduler_recv_interval", "--scheduler-recv-interval"),
)


def launch_command(model: str, settings: SglangSettings) -> str:
    """The ``python -m sglang.launch_server`` line for these settings (flags left at their defaults are left out)."""
    parts = ["python -m sglang.launch_server", f"--model-path {model}"]
    for name, flag in _FLAGS:
        value = getattr(settings, name)
        if value is not None and not (name == "kv_cache_dtype" and value == "auto"):
            parts.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class SglangPreview(Result):
    """What ``launch_server`` will find, size and print for one plan on one GPU type."""

    memory: SglangMemory
    capacity: SglangCapacity | None  # None when SGLang refuses to start
    refusal: str | None  # SGLang's own message
    refusal_kind: str | None
    command: str

    def summary(self) -> dict:
        return {
            "memory": self.memory.summary(), "capacity": self.capacity.summary() if self.capacity else None, "refusal": self.refusal,
            "refusal_kind": self.refusal_kind, "command": self.command,
        }


def sglang_preview(
    config: dict,
    *,
    gpu: str,
    weights_bytes: int,
    settings: SglangSettings = SglangSettings(),
    model: str = "MODEL",
    draft_weights_bytes: int = 0,
    weights_source: str = "",
    measured_pre_load_free_gib: float | None = None,
    measured_available_gib: float | None = None,
    quantization: dict | None = None,
    geometry: ModelGeometry | None = None,
) -> SglangPreview:
    """The memory state (measured figures where given, else :func:`predict_memory` from the GPU and
    the checkpoint's weights), SGLang's sizing of it, and the command that reproduces it. A refusal
    is returned, not raised: the card shows SGLang's reason.

    Raises:
        PlannerError: invalid arguments (unknown GPU, sizes out of range).
    """
    card = get_gpu(gpu)
    memory = predict_memory(card, settings.tp, weights_bytes, draft_weights_bytes=draft_weights_bytes, weights_source=weights_source, measured_pre_load_free_gib=measured_pre_load_free_gib)
    available = measured_available_gib if measured_available_gib is not None else memory.available_gib
    command = launch_command(model, settings)
    if available <= 0:
        # the weights are loaded before anything is sized: CUDA runs out of memory there
        reason = f"The weights need {memory.pre_load_free_gib - available:.2f} GiB on each GPU but only {memory.pre_load_free_gib:.2f} GiB is free before loading (CUDA out of memory while loading weights)"
        return SglangPreview(memory=memory, capacity=None, refusal=reason, refusal_kind="weights", command=command)
    try:
        capacity = sglang_capacity(config, gpu=card, pre_load_free_gib=memory.pre_load_free_gib, available_gib=available, quantization=quantization, geometry=geometry, **{k: v for k, v in settings.model_dump().items() if k != "scheduler_recv_interval"})
    except SglangRefusal as exc:
        return SglangPreview(memory=memory, capacity=None, refusal=exc.reason, refusal_kind=exc.kind, command=command)
    return SglangPreview(memory=memory, capacity=capacity, refusal=None, refusal_kind=None, command=command)
