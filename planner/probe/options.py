"""What one probe run is asked to do (:class:`ProbeOptions`) and the settings that bound it.

``KVP_DISABLE_PROBE`` turns the probe off (shared deployments); ``KVP_PROBE_CPU_BUDGET_BYTES``
(default 2 GiB) caps what a CPU probe may allocate. On CUDA the cap is 80 % of the free memory.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner import settings
from planner.errors import PlannerError

ENV_DISABLE = settings.KVP_DISABLE_PROBE.name
ENV_CPU_BUDGET = settings.KVP_PROBE_CPU_BUDGET_BYTES.name
DEFAULT_CPU_BUDGET = 2 << 30
DEFAULT_TIMEOUT_S = 120.0
GPU_FREE_FRACTION = 0.8
CUDA_ROUND = 512  # the CUDA caching allocator rounds every block up to 512 bytes
MODES = ("allocate", "runtime")
DEVICES = ("auto", "cpu", "cuda")
RUNTIME_DTYPES = ("fp32", "bf16", "fp16")  # what a transformers model computes and caches in


# The pinned transformers (5.24) caches MLA latents (huggingface/transformers#47761): the planner
# runtime whose K/V semantics match what this probe measures.
INSTALLED_TRANSFORMERS_RUNTIME = "transformers-latent"


def probe_disabled() -> str | None:
    """The reason the probe is off (``KVP_DISABLE_PROBE`` set), or None when it may run."""
    if settings.kvp_disable_probe():
        return f"the live probe is disabled on this deployment ({ENV_DISABLE}=1): run `python -m planner probe ...` on your own machine and import its JSON instead"
    return None


def check_enabled() -> None:
    """Raises: PlannerError: the probe is disabled by ``KVP_DISABLE_PROBE``."""
    reason = probe_disabled()
    if reason:
        raise PlannerError("probe", f"{ENV_DISABLE}={settings.given(settings.KVP_DISABLE_PROBE)}", reason)


def cpu_budget_bytes() -> int:
    """The CPU memory budget of one probe (``KVP_PROBE_CPU_BUDGET_BYTES``, default 2 GiB).

    Raises:
        PlannerError: the variable is set but not a positive integer.
    """
    return settings.kvp_probe_cpu_budget_bytes()


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
    check_combination(opts)
    return opts


def check_combination(opts: ProbeOptions) -> None:
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
