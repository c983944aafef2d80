"""What a runtime probe's measurements change in a plan: MFU/MBU and vLLM's budget terms."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.limits import MIN_UTILISATION
from planner.probe.results import ProbeResult


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
    """The terms of vLLM's memory budget (:func:`planner.engines.vllm_memory.predict_memory`) that a
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
