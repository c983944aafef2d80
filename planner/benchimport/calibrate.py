"""A kept benchmark calibration applied to the plan's latency figures, only where it was measured.

A plan's ``bench_calibration`` (:mod:`planner.bench_calibration`) holds, for TTFT, TPOT and output
tokens/s, what a run measured and what the plan predicted for that run. It applies to this plan
only if this plan is that deployment: the run is predicted again from this plan at the run's load
(``at=``) and every kept prediction must come back to its 4 significant digits (same model, GPU,
parallelism, engine, lengths and serving constants; anything else moves some figure). Then each
ratio measured / predicted multiplies the plan's own figure at its own load, shown beside the
model's as "calibrated by a measured run: x1.12 TPOT", never in place of it. Otherwise the
calibration is shown, not applied, with the reason.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.bench_calibration import LABELS, calibration_load, parse_calibration
from planner.benchimport.compare import compare
from planner.benchimport.readers import Measured
from planner.errors import PlannerError
from planner.plan import Plan, PreparedModel, make_inputs

MATCH_REL = 1e-3  # 4 significant digits kept: a re-prediction within this is the same one
# the kept figure -> the plan's figure it scales, at the plan's load: mean TTFT and TPOT of a request,
# output tokens a second of the whole deployment (what the runs measure)
PLAN_FIGURES = {
    "ttft_ms": lambda plan: plan.latency.time_to_first_token_ms, "tpot_ms": lambda plan: plan.latency.mean_inter_token_latency_ms,
    "itl_ms": lambda plan: plan.latency.mean_inter_token_latency_ms, "output_tokens_per_s": lambda plan: plan.roofline.output_tokens_per_second_per_gpu * plan.inputs.gpu_count,
}  # fmt: skip
SHORT = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "output_tokens_per_s": "output tok/s"}


class Calibrated(BaseModel):
    """The plan's figures scaled by a kept run's ratios, or why they are not."""

    model_config = ConfigDict(frozen=True)

    applied: bool
    source: str
    label: str  # "calibrated by a measured run (vllm-bench, 8 concurrent clients): x3.15 TTFT, x0.52 TPOT, ..."
    reason: str | None = None  # why not applied
    ratios: dict[str, float] = {}  # kept figure -> measured / predicted
    figures: dict[str, tuple[float, float]] = {}  # kept figure -> (the model's, calibrated), at the plan's load


def calibrate(plan: Plan, model: PreparedModel) -> Calibrated | None:
    """The plan's calibration applied (:class:`Calibrated`), or None when it keeps none."""
    text = plan.inputs.bench_calibration
    if not text:
        return None
    source, kept = parse_calibration(text)
    clients, rate = calibration_load(text)

    def refused(why: str) -> Calibrated:
        return Calibrated(applied=False, source=source, label=f"kept from a {source} run, not applied: {why}", reason=why)

    if plan.inputs.disagg:
        return refused("the plan also has disaggregated pools; a run's ratios are applied to one aggregated deployment")
    if clients is None and rate is None:
        return refused("the calibration does not say the run's load (a /metrics scrape, or kept before the load was recorded), so it cannot be checked against this deployment")
    if plan.inputs.observed:
        return refused("the plan's latency is observed, not predicted")
    measured = Measured(source=source, tool=source, max_concurrency=clients, request_rate=rate, figures={k: m for k, (m, _p) in kept.items()})
    try:
        again = compare(measured, make_inputs(**plan.inputs.model_dump(exclude={"bench_calibration"})), model)
    except PlannerError as exc:
        return refused(f"this plan cannot predict that run ({exc.reason})")
    now = {r.figure: r.predicted for r in again.rows}
    for figure, (_m, predicted) in kept.items():
        p = now.get(figure)
        if p is None or abs(p - predicted) > MATCH_REL * abs(predicted):
            return refused(
                f"it was measured on another deployment: the run's {LABELS[figure]} was predicted {predicted:,.4g}, this plan predicts {p:,.4g} at that load" if p is not None else f"this plan predicts no {LABELS[figure]}"
            )
    ratios = {k: m / p for k, (m, p) in kept.items()}
    figures = {k: (PLAN_FIGURES[k](plan), PLAN_FIGURES[k](plan) * r) for k, r in ratios.items() if k in PLAN_FIGURES}
    load = f"{clients:,} concurrent clients" if clients is not None else f"{rate:g} requests/s"
    label = f"calibrated by a measured run ({source}, {load}): " + ", ".join(f"×{r:.2f} {SHORT.get(k, k)}" for k, r in ratios.items())
    return Calibrated(applied=True, source=source, label=label, ratios=ratios, figures=figures)
