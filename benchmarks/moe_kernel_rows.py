"""The planner's MoE term against each engine's measured MoE kernels (tests/data/aic_moe_rows.json).

Shared by ``scripts/fit_moe_kernels.py`` (which extracts the rows from aiconfigurator-core 0.12.0 and fits
``latency.MOE_KERNEL_FIT``), ``benchmarks/bench_moe_kernels.py`` and the tests. A row is one engine's
measured fused-MoE kernel (vLLM 0.24.0, SGLang 0.5.14, TensorRT-LLM 1.3.0rc20) on one GPU for one
weight format, expert shape (a preset's), tensor-parallel size and token count; balanced routing, no
expert parallelism. The planner's figure is its step model's MoE term per MoE layer
(``Roofline.terms``) without the serving extra per MoE layer (``serve_moe_layer_s``: what a
served step adds to the kernels, fitted to serving runs, docs/serving_fit.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from functools import lru_cache
from pathlib import Path

from planner import latency
from planner.errors import PlannerError
from planner.hardware import get_device
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset

ROWS_PATH = Path(__file__).resolve().parent.parent / "tests" / "data" / "aic_moe_rows.json"
FIT_TOKENS = 1024  # rows at this many tokens or more fit the scales: prompt-sized steps, compute-bound
BANDS = ((1, 32, "1-32 tokens (decode)"), (33, 512, "33-512 tokens"), (513, 1 << 30, "513+ tokens (prompts)"))


@lru_cache(maxsize=1)
def load() -> dict:
    return json.loads(ROWS_PATH.read_text())


def rows() -> list[dict]:
    """Every row as a dict of the file's columns."""
    data = load()
    return [dict(zip(data["columns"], r, strict=True)) for r in data["rows"]]


@lru_cache(maxsize=512)
def roofline(preset: str, gpu: str, tp: int, weight_dtype: str, engine: str) -> latency.Roofline | None:
    """The step model of ``preset`` over ``tp`` GPUs, or None where the planner refuses the layout
    (weights above the GPU's memory)."""
    try:
        plan = compute_plan(
            make_inputs(gpu=gpu, tp=tp, gpu_count=tp, input_tokens=1024, output_tokens=128, sequences=1, weight_dtype=weight_dtype, serving_engine=engine), prepare_model(load_preset(preset))
        )
    except PlannerError:
        return None
    return plan.roof


def kernel_class(row: dict) -> str | None:
    return latency.kernel_class(row["weight_dtype"], get_device(row["gpu"]).generation, row["engine"])


def planner_s(row: dict, scale: float | None = None) -> float | None:
    """The planner's MoE kernel time per MoE layer for ``row`` (seconds), at its shipped kernel scale
    or at ``scale``; None where the planner refuses the layout."""
    roof = roofline(row["preset"], row["gpu"], row["tp"], row["weight_dtype"], row["engine"])
    if roof is None:
        return None
    if scale is not None:
        roof = dataclasses.replace(roof, moe_kernel=scale)
    t = row["tokens"]
    moe = roof.terms(t, t, 0.0, 0.0, 0)["moe"]
    return moe / roof.moe_layers - roof.eff.serve_moe_layer_s * roof.fixed_scale


def band(tokens: int) -> str:
    return next(name for lo, hi, name in BANDS if lo <= tokens <= hi)


def median_abs_log(ratios: list[float]) -> float:
    return statistics.median(abs(math.log(r)) for r in ratios)
