"""The planner's roofline against AIConfigurator's rows (tests/data/aic_latency_rows.json).

Shared by ``benchmarks/bench_latency_accuracy.py``, ``scripts/fit_latency.py`` and the accuracy
test. Which rows were fitted and which held out is decided here, once:

* held-out GPU: every H200 row (no row of it is used by the fit);
* held-out models: every Qwen3-32B and Qwen3-235B-A22B row (on every GPU, L40S included);
* fitted: the other models (Llama-3.1-8B/70B, Qwen3-8B, Qwen3-30B-A3B, Mixtral-8x7B) on H100,
  B200, A100 and L40S (L40S's per-TP all-reduce figures and compute efficiency come from its
  fit rows only).
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path

from planner import latency
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model

ROWS_PATH = Path(__file__).resolve().parent.parent / "tests" / "data" / "aic_latency_rows.json"
HELD_OUT_GPUS = frozenset({"H200-141GB"})
HELD_OUT_MODELS = frozenset({"Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B"})
# planner term -> AIConfigurator op group (scripts/gen_aic_latency_rows.py folds its ops into these)
TERM_GROUP = {"dense_gemm": "gemm", "lm_head": "logits", "moe": "moe", "attention": "attention", "allreduce": "allreduce", "alltoall": "allreduce", "other": "other", "runtime": "other"}


def split(row: dict) -> str:
    """ "fit", "held-out GPU" or "held-out model" (a held-out model on H200 counts as a held-out model)."""
    if row["model"] in HELD_OUT_MODELS:
        return "held-out model"
    if row["gpu"] in HELD_OUT_GPUS:
        return "held-out GPU"
    return "fit"


@lru_cache(maxsize=1)
def load() -> dict:
    return json.loads(ROWS_PATH.read_text())


@dataclasses.dataclass(frozen=True)
class Case:
    """One fixture row with the planner's step model for it."""

    row: dict
    roof: latency.Roofline
    kv_mid: float  # K/V bytes one sequence holds at the mean decode context
    mid: int


@lru_cache(maxsize=4096)
def _case(index: int) -> Case | None:
    """The row's case, or None where the planner refuses the layout (weights above the GPU's memory).
    Runtime transformers: the whole device for weights and K/V (vLLM's start-up budget would refuse
    a utilization of 1.0); the kernels are the same."""
    data = load()
    row = data["rows"][index]
    model = prepare_model(data["configs"][row["model"]])
    inputs = make_inputs(gpu=row["gpu"], tp=row["tp"], gpu_count=row["tp"], input_tokens=row["isl"], output_tokens=row["osl"], sequences=row["batch"], headroom_bp=0, workspace_gib=0, runtime="transformers")  # the raw step model: no engine budget (vLLM refuses 0 % headroom)
    try:
        plan = compute_plan(inputs, model)
    except PlannerError:
        return None
    mid = row["isl"] + row["osl"] // 2
    kv_mid = sum(s.bytes_at(mid) for s in plan.inspect.specs)
    # AIConfigurator times kernels in a static batch: the roofline's kernels alone, no serving costs
    return Case(row=row, roof=dataclasses.replace(plan.roof, eff=latency.KERNELS), kv_mid=kv_mid, mid=mid)


def cases() -> list[Case]:
    """Every row the planner can plan (rows whose weights do not fit the GPU are left out)."""
    return [c for c in (_case(i) for i in range(len(load()["rows"]))) if c is not None]


def with_efficiency(roof: latency.Roofline, eff: latency.Efficiency, mfu: float, mbu: float, link_latency_s: float | None, moe_scale: float | None, **device: float) -> latency.Roofline:
    """The case's roofline with other efficiencies (None: keep the catalog's value); ``device``:
    other per-device Roofline fields to replace (link_bytes_s, compute_scale)."""
    changes = {"eff": eff, "mfu": mfu, "mbu": mbu, **device}
    if link_latency_s is not None:
        changes["link_latency_s"] = link_latency_s
    if moe_scale is not None:
        changes["moe_scale"] = moe_scale
    return dataclasses.replace(roof, **changes)


def prefill_terms(case: Case, roof: latency.Roofline | None = None) -> dict[str, float]:
    """Seconds of each term for the row's prefill of ``batch`` prompts in one step (AIConfigurator's static TTFT)."""
    roof = roof or case.roof
    r = case.row
    return roof.terms(r["batch"] * r["isl"], r["batch"], 0.0, r["batch"] * roof._attention_flops(r["isl"], 0), r["isl"])


def decode_terms(case: Case, roof: latency.Roofline | None = None) -> dict[str, float]:
    """Seconds of each term of one decode step at the row's batch and mean context."""
    roof = roof or case.roof
    return roof.decode_terms(case.row["batch"], case.kv_mid, case.mid)


def grouped(terms: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, seconds in terms.items():
        group = TERM_GROUP[name]
        out[group] = out.get(group, 0.0) + seconds * 1e3
    return out


def ratios(case: Case, roof: latency.Roofline | None = None) -> tuple[float, float]:
    """(planner / AIC) for the ITL at the row's batch and for the row's prefill."""
    itl = sum(decode_terms(case, roof).values()) * 1e3
    prefill = sum(prefill_terms(case, roof).values()) * 1e3
    return itl / case.row["itl_ms"], prefill / case.row["prefill_ms"]
