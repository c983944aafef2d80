"""How far this checkout's plan latencies moved from a saved plan-equivalence grid.

    .venv/bin/python -m benchmarks.latency_shift --compare GRID.json

GRID.json: a grid saved with ``python -m benchmarks.plan_equivalence --save`` (or by its
``--compare`` baseline). For every plan both grids computed, prints the median and the extremes
of new / old for the mean ITL (TPOT), TTFT, their p95s and the decode tokens/s, overall and by
load; and how many plans changed admission (an SLO limit that now binds or frees) or refusal.
A change of the latency model is meant to move these; a restructuring must leave them at 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.plan_equivalence import exact, snapshot

FIGURES = {
    "TPOT (mean ITL)": ("latency", "mean_inter_token_latency_ms"),
    "TTFT": ("latency", "time_to_first_token_ms"),
    "ITL p95": ("roofline", "itl_p95_ms"),
    "TTFT p95": ("roofline", "ttft_p95_ms"),
    "decode tok/s": ("roofline", "decode_tokens_per_second"),
}


def ratios(base: dict, here: dict) -> dict[str, dict[str, list[float]]]:
    """figure -> load ("all", "1", "8", "64") -> new / old for every plan both computed."""
    out: dict[str, dict[str, list[float]]] = {name: {} for name in FIGURES}
    for key, old in base.items():
        new = here.get(key)
        if not new or "summary" not in old or "summary" not in new:
            continue
        load = key.rsplit("|", 1)[-1]
        for name, (section, field) in FIGURES.items():
            a, b = old["summary"][section].get(field), new["summary"][section].get(field)
            if a and b:
                for bucket in ("all", load):
                    out[name].setdefault(bucket, []).append(b / a)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", type=Path, required=True, help="a grid saved by benchmarks.plan_equivalence --save")
    args = ap.parse_args()
    base = json.loads(args.compare.read_text())
    here = snapshot()
    both = [k for k in base if "summary" in base[k] and "summary" in here.get(k, {})]
    refusals = sum(("refused" in base[k]) != ("refused" in here.get(k, {})) for k in base)
    admitted = sum(base[k]["summary"]["kv_cache"]["admitted"] != here[k]["summary"]["kv_cache"]["admitted"] for k in both)
    same = sum(exact(base[k], here.get(k)) for k in base)
    print(f"{len(base)} plans, {len(both)} computed by both, {same} identical; refusal changed in {refusals}, admission changed in {admitted}")
    print("\n| figure | load | plans | median new/old | min | max |\n|---|---|---|---|---|---|")
    for name, by_load in ratios(base, here).items():
        for load in ("all", "1", "8", "64"):
            v = by_load.get(load)
            if v:
                print(f"| {name} | {load} | {len(v)} | {statistics.median(v):.3f} | {min(v):.3f} | {max(v):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
