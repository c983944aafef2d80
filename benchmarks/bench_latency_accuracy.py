"""Planner roofline vs NVIDIA AIConfigurator 0.12.0 (vLLM backend, static mode, bf16).

    .venv/bin/python -m benchmarks.bench_latency_accuracy

Reads the committed rows (tests/data/aic_latency_rows.json, scripts/gen_aic_latency_rows.py), so
AIConfigurator need not be installed. The issue's grid: Llama-3.1-8B TP1, Llama-3.1-70B TP4 and
TP8, Qwen3-32B TP4, Qwen3-30B-A3B TP1, Qwen3-235B-A22B TP8; ISL/OSL 2048/512 and 8192/1024;
batch 1, 8, 32, 64; H100 and H200. ITL = the planner's decode step at the batch and mean context
against AIC's TPOT; prefill = one prompt (batch-1 rows) against AIC's TTFT. Roofline path, default
efficiencies, no probe calibration. Splits as in benchmarks/latency_rows.py (fit / held-out GPU /
held-out model). Goal: median within 15 % and worst within 1.5x.
"""

from __future__ import annotations

import statistics

from benchmarks import latency_rows as L

GOAL_MEDIAN = 0.15
GOAL_WORST = 1.5


def _worst(values: list[float]) -> float:
    return max(values, key=lambda q: max(q, 1 / q))


def table(cases: list[L.Case], group) -> list[tuple]:
    """Rows of (group, n ITL, ITL median, ITL worst, n prefill, prefill median, prefill worst, goal met)."""
    buckets: dict = {}
    for c in cases:
        buckets.setdefault(group(c), []).append(c)
    out = []
    for key, cs in sorted(buckets.items()):
        itl = [L.ratios(c)[0] for c in cs]
        pre = [L.ratios(c)[1] for c in cs if c.row["batch"] == 1]
        ok = all(abs(statistics.median(v) - 1) <= GOAL_MEDIAN and max(_worst(v), 1 / _worst(v)) <= GOAL_WORST for v in (itl, pre) if v)
        out.append((key, len(itl), statistics.median(itl), _worst(itl), len(pre), statistics.median(pre) if pre else float("nan"), _worst(pre) if pre else float("nan"), ok))
    return out


def main() -> None:
    cases = L.cases()
    grid = [c for c in cases if c.row["in_issue_grid"]]
    print(f"AIC rows: {len(cases)} ({L.load()['source']}); issue grid: {len(grid)}")
    print("\n| rows | GPU | split | ITL n | ITL median | ITL worst | prefill n | prefill median | prefill worst | goal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, subset in (("issue grid", grid), ("all rows", cases)):
        for (gpu, split), n, im, iw, pn, pm, pw, ok in table(subset, lambda c: (c.row["gpu"], L.split(c.row))):
            print(f"| {label} | {gpu} | {split} | {n} | {im:.3f} | {iw:.3f} | {pn} | {pm:.3f} | {pw:.3f} | {'met' if ok else 'NOT met'} |")
    print("\nIssue grid by model (all its GPUs):")
    for (model, tp), n, im, iw, pn, pm, pw, _ in table(grid, lambda c: (c.row["model"], c.row["tp"])):
        print(f"  {model:32s} TP{tp}: ITL median {im:.3f} worst {iw:.3f} ({n}); prefill median {pm:.3f} worst {pw:.3f} ({pn})")


if __name__ == "__main__":
    main()
