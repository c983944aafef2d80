"""Do two versions of the planner compute the same plans? (a check for speed-only changes)

Computes a grid of plans (every bundled preset x GPUs x loads x SLO / prefix / TP variants) with
the planner of this checkout and with the planner of a git revision (``--against``, default
``main``: its tree is exported with ``git archive`` into a temporary folder and run there in a
subprocess), then compares every number of every plan: the JSON summary, the formulas lines,
the refusal messages. Floats must agree within ``--rel`` (default 1e-12) relative; everything
else exactly.

Run: .venv/bin/python -m benchmarks.plan_equivalence [--against REV] [--save FILE | --compare FILE]
"""

from __future__ import annotations

import json
import math
import sys

GPUS = ("H100-SXM-80GB", "H200-141GB", "B200-180GB", "A100-SXM-80GB", "L40S-48GB", "MI300X-192GB")  # an AMD GPU: its own stack costs (catalog fixed_cost_scale)
LOADS = (1, 8, 64)


def variants() -> list[dict]:
    """Plan inputs for one preset (before the GPU and load are set)."""
    return [
        {},
        {"input_tokens": 8192, "output_tokens": 1024, "itl_slo_ms": 30.0, "ttft_slo_ms": 2000.0},
        {"shared_prefix_tokens": 1024, "prefix_hit_rate": 0.5, "tenants": 2, "max_batched_tokens": 2048, "ttft_slo_ms": 500.0},
        {"input_tokens": 2048, "output_tokens": 512, "tp": 4, "gpu_count": 8, "itl_slo_ms": 15.0, "runtime": "transformers"},
        {"input_tokens": 1000, "output_tokens": 1, "tp": 8, "gpu_count": 8, "ep": 2, "reservation": "static", "max_context": 4096, "mfu": 0.5, "mbu": 0.6},
    ]


def snapshot() -> dict:
    """Every plan of the grid as JSON-ready data (computed by whichever ``planner`` is importable)."""
    from planner.errors import PlannerError
    from planner.latency import formula_lines
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import PRESETS_DIR

    out: dict = {}
    for path in sorted(PRESETS_DIR.glob("*.json")):
        model = prepare_model(json.loads(path.read_text()))
        for i, extra in enumerate(variants()):
            for gpu in GPUS:
                for load in LOADS:
                    key = f"{path.stem}|{i}|{gpu}|{load}"
                    try:
                        plan = compute_plan(make_inputs(gpu=gpu, sequences=load, **extra), model)
                        out[key] = {"summary": plan.summary(), "formulas": formula_lines(plan.roofline, plan.roof) if plan.roof else None}
                    except PlannerError as exc:
                        out[key] = {"refused": str(exc)}
    return json.loads(json.dumps(out, default=str))


def differences(a: object, b: object, rel: float, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (floats beyond ``rel`` relative; all else exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], rel, f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, rel, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and not (math.isnan(a) and math.isnan(b)):
        return [] if a == b or abs(a - b) <= rel * max(abs(a), abs(b)) else [f"{where}: {a!r} vs {b!r}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} vs {b!r}"]


def exact(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def compare(base: dict, here: dict, rel: float) -> int:
    if base.keys() != here.keys():
        print(f"different plan grids: {len(base)} vs {len(here)} plans")
        return 1
    same = sum(exact(base[k], here[k]) for k in base)
    diffs = {k: differences(base[k], here[k], rel) for k in base}
    bad = {k: v for k, v in diffs.items() if v}
    refused = sum("refused" in v for v in here.values())
    print(f"{len(base)} plans ({len(base) - refused} computed, {refused} refused): {same} identical to the last digit, {len(base) - same - len(bad)} within {rel:g} relative, {len(bad)} different")
    for k, v in list(bad.items())[:10]:
        print(f"  {k}: {len(v)} differences, e.g. {v[:3]}")
    return 1 if bad else 0


if __name__ == "__main__":
    from benchmarks.equivalence import main

    sys.exit(main(__doc__, "plan_equivalence", snapshot, compare, "plans", rel=1e-12))
