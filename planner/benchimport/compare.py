"""Measured beside predicted: the plan's figures at the benchmark's own load, and their ratios.

The prediction is made for the run as it ran: the run's mean prompt and output lengths (when the
file says them and they differ from the plan's, the plan is redone with them and a warning says
so) and its load:

* a fixed concurrency (``--max-concurrency C``, guidellm's ``concurrent``): C clients in a closed
  loop spread over the ranks (:func:`planner.plan.serving.closed`, with the API server's
  preprocessing, as load generators measure it);
* a request rate (``--request-rate R``, guidellm's ``constant`` / ``poisson``): Poisson arrivals
  at R / ranks a rank, the requests in flight from Little's law (:func:`planner.plan.serving.open_at_rate`);
* a ``/metrics`` scrape: the running requests it saw, in flight under Poisson arrivals
  (:func:`planner.plan.serving.poisson`).

Each is the plan's own load function on the plan's own setup, so a prediction is what the plan
shows when asked for the run's load. A rank is a replica, or an attention data-parallel rank of one.

A disaggregated plan (``disagg`` set) is predicted by :func:`planner.disagg.plan_disagg` at the
same load. The ratios measured / predicted are the deployment's calibration: :func:`format_calibration`
writes the chief of them as the plan's ``bench_calibration`` input (plan file and share link), :func:`parse_calibration`
reads them back.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from planner import latency
from planner.bench_calibration import LABELS, MAX_CALIBRATION_CHARS, SOURCES, format_calibration, load_text, parse_calibration  # noqa: F401 - re-exported
from planner.benchimport.readers import Measured
from planner.errors import PlannerError
from planner.plan import Plan, PreparedModel, compute_plan, make_inputs, serving

LENGTH_TOLERANCE = 0.10  # prompts or outputs this far from the plan's: plan again with the run's


class Row(BaseModel):
    model_config = ConfigDict(frozen=True)

    figure: str
    label: str
    measured: float
    predicted: float
    ratio: float  # measured / predicted


class Comparison(BaseModel):
    """A benchmark run beside the plan's prediction for it."""

    model_config = ConfigDict(frozen=True)

    tool: str
    source: str
    load: str  # the load the prediction is made at, in words
    rows: list[Row]
    warnings: list[str]
    calibration: str  # format_calibration(rows): what the plan file and the share link keep
    measured: Measured

    def summary(self) -> dict:
        return {
            "tool": self.tool,
            "source": self.source,
            "load": self.load,
            "rows": [r.model_dump() for r in self.rows],
            "warnings": self.warnings,
            "calibration": self.calibration,
            "measured": self.measured.model_dump(),
        }


def _replan(inputs, model: PreparedModel, measured: Measured, warnings: list[str]) -> dict:
    """The plan's inputs, with the run's mean prompt and output lengths where they differ."""
    values = inputs.model_dump(exclude_none=True)
    plan = compute_plan(make_inputs(**{k: v for k, v in values.items() if k != "disagg"}), model)
    prompt, output = plan.context.input_tokens, inputs.output_tokens
    if measured.input_tokens_mean and abs(measured.input_tokens_mean - prompt) > LENGTH_TOLERANCE * prompt:
        values["input_tokens"] = max(1, round(measured.input_tokens_mean))
        warnings.append(f"the run's prompts average {measured.input_tokens_mean:,.0f} tokens, the plan's {prompt:,}: predicted for the run's")
    if measured.output_tokens_mean and abs(measured.output_tokens_mean - output) > LENGTH_TOLERANCE * output:
        values["output_tokens"] = max(1, round(measured.output_tokens_mean))
        warnings.append(f"the run's outputs average {measured.output_tokens_mean:,.0f} tokens, the plan's {output:,}: predicted for the run's")
    return values


def _aggregated(plan: Plan, measured: Measured) -> tuple[dict[str, float], str]:
    """The plan's figures at the run's load (module docstring), one aggregated deployment: the
    plan's own load functions (:mod:`planner.plan.serving`) on the plan's own setup (its engine's
    scheduler poll and batch wait, its preprocessing, its speculation, its running limit), per rank
    (a replica, or an attention data-parallel rank of one), times the ranks."""
    setup, ranks = plan._load.setup, plan._memory.ranks
    kv_mid, pool = setup.kv_mid, plan.capacity.available_for_kv_bytes
    where = f"over {ranks} {'ranks' if plan.inputs.dp > 1 else 'replicas'}" if ranks > 1 else "on one replica"

    def figures(fig: serving.LoadFigures) -> dict[str, float]:
        return {
            "ttft_ms": fig.ttft_ms, "ttft_p95_ms": fig.ttft_p95_ms, "tpot_ms": fig.tpot_ms, "itl_ms": fig.tpot_ms, "itl_p95_ms": fig.tpot_p95_ms, "e2e_ms": fig.e2e_ms,
            "output_tokens_per_s": fig.output_tokens_per_s * ranks, "requests_per_s": fig.requests_per_s * ranks, "running": fig.running * ranks,
            "kv_cache_usage": min(1.0, fig.running * kv_mid / pool) if pool > 0 else 0.0,
        }  # fmt: skip

    if measured.request_rate is None and measured.max_concurrency:
        fig = serving.closed(setup, max(1, math.ceil(measured.max_concurrency / ranks)))
        return figures(fig), f"{measured.max_concurrency:,} concurrent clients in a closed loop {where}"
    if measured.request_rate is not None:
        fig = serving.open_at_rate(setup._replace(rate=measured.request_rate / ranks))
        return figures(fig), f"{measured.request_rate:g} requests/s, Poisson, {fig.per_rank:,} in flight per rank (open loop, Little's law)"
    n = max(1, math.ceil((measured.figures.get("running") or plan.inputs.sequences) / ranks))
    out = figures(serving.poisson(setup, n))
    return out | {"output_tokens_per_s": n * ranks * 1000.0 / out["itl_ms"] if out["itl_ms"] else 0.0}, f"{n * ranks:,} running requests (the scrape's), the served model"


def _disaggregated(model: PreparedModel, values: dict, measured: Measured) -> tuple[dict[str, float], str]:
    from planner import disagg

    def at(sequences: int):  # the run's load: its clients (plan_disagg times a request_rate instead, so the plan's is dropped)
        return disagg.plan_disagg(model, {**{k: v for k, v in values.items() if k != "request_rate"}, "sequences": max(1, sequences)}, values["disagg"])

    if measured.request_rate is None and measured.max_concurrency:
        d, load = at(measured.max_concurrency), f"{measured.max_concurrency:,} concurrent clients over the disaggregated pools"
    else:
        rate = measured.request_rate
        if rate is None:
            d = at(round(measured.figures.get("running") or values.get("sequences", 8)))
            load = f"{d.sequences:,} running requests (the scrape's) over the disaggregated pools"
        else:
            n = max(1, round(values.get("sequences", 8)))
            for _ in range(8):  # the requests in flight that carry the rate (Little), by fixed point
                d = at(n)
                n_new = max(1, round(n * rate / max(d.requests_per_s, 1e-12)))
                if n_new == n:
                    break
                n = n_new
            load = f"{rate:g} requests/s over the disaggregated pools ({d.sequences:,} in flight)"
    ttft_mean = d.ttft_p95_ms - d.ttft_terms_ms["prefill_queue_p95"] + latency.queue_wait(min(d.prefill.utilisation, 0.999), 1 / d.prefill.requests_per_s_capacity)[0] * 1e3
    out = {
        "ttft_ms": ttft_mean, "ttft_p95_ms": d.ttft_p95_ms, "tpot_ms": d.tpot_ms, "itl_ms": d.tpot_ms, "itl_p95_ms": d.itl_p95_ms,
        "e2e_ms": ttft_mean + d.tpot_ms * max(0, values.get("output_tokens", 512) - 1), "output_tokens_per_s": d.output_tokens_per_s,
        "requests_per_s": d.requests_per_s, "running": d.decode.sequences_per_replica * d.decode.replicas,
    }  # fmt: skip
    return out, load


def compare(measured: Measured, inputs, model: PreparedModel, disagg: str | None = None) -> Comparison:
    """``measured`` beside the plan's prediction for that run (see the module docstring);
    ``disagg``: the run's deployment was these disaggregated pools (:func:`planner.disagg.parse_pools` text).

    Raises:
        PlannerError: the plan does not plan, or the run measured nothing the plan predicts.
    """
    warnings: list[str] = []
    values = _replan(inputs, model, measured, warnings)
    if disagg:
        values["disagg"] = disagg
    if values.get("disagg"):
        predicted, load = _disaggregated(model, values, measured)
    else:
        plan = compute_plan(make_inputs(**{k: v for k, v in values.items() if k != "disagg"}), model)
        predicted, load = _aggregated(plan, measured)
    rows = [
        Row(figure=k, label=LABELS[k], measured=v, predicted=predicted[k], ratio=v / predicted[k]) for k, v in measured.figures.items() if k in LABELS and k in predicted and predicted[k] > 0 and v > 0
    ]
    if not rows:
        raise PlannerError("file", measured.tool, "measured nothing the plan predicts (no TTFT, TPOT, ITL or throughput)")
    for r in rows:
        if not 0.2 <= r.ratio <= 5.0:
            warnings.append(f"{r.label}: measured {r.measured:,.4g} is {r.ratio:.2f}x the prediction; check the run matches the plan (GPU, TP, load, prefix caching)")
    return Comparison(tool=measured.tool, source=measured.source, load=load, rows=rows, warnings=warnings, calibration=format_calibration(measured.source, rows, None if values.get("disagg") else load_text(measured.max_concurrency, measured.request_rate)), measured=measured)
