"""Planner vs published end-to-end serving runs: TPOT, TTFT and output tokens/s per GPU.

    .venv/bin/python -m benchmarks.bench_serving_accuracy [--points]

Runs every point of ../shared/reference/measured_serving.json through the planner
(benchmarks/serving_points.py: ``compute_plan`` and its summary, then the latency functions for
what PlanInputs cannot state yet: DEP, NVFP4 peaks, the engine's serving costs, closed-loop and
offline load) and prints planner / measured by split and by regime (dense/MoE, TP, concurrency
band, GPU generation, engine). The split (fit / held-out GPU / held-out engine / held-out point)
was fixed before fitting (docs/serving_fit.md). Goal on the held-out points: TPOT median within
1.2x and worst within 2x, TTFT median within 1.5x and worst within 3x, throughput median within
1.2x and worst within 2x. ``--points`` also prints every point.
"""

from __future__ import annotations

import sys

from benchmarks import serving_points as S

GROUPS = {
    "split": lambda pt: pt.split,
    "dense/MoE": lambda pt: S.regime(pt)["arch"],
    "TP": lambda pt: S.regime(pt)["tp"],
    "concurrency": lambda pt: S.regime(pt)["concurrency"],
    "GPU generation": lambda pt: S.regime(pt)["family"],
    "engine": lambda pt: pt.engine,
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    results = [(pt, S.ratios(pt)) for pt in S.points()]
    held = [(pt, r) for pt, r in results if pt.split != "fit"]
    fit = [(pt, r) for pt, r in results if pt.split == "fit"]
    print(f"measured points: {len(results)} ({len(fit)} fit, {len(held)} held out); anomalies left out of the goal: {', '.join(f'{p} {m}' for p, m in S.ANOMALIES)}")
    print("\n| set | metric | n | median | worst | goal |\n|---|---|---|---|---|---|")
    for label, subset in (("fit", fit), ("held-out", held), ("held-out without the SGLang engine", [(pt, r) for pt, r in held if pt.split != "held-out engine"])):
        for _g, m, n, med, bad in S.summary_rows(subset, lambda pt: "all"):
            print(f"| {label} | {m} | {n} | {med:.3f} | {bad:.3f} | {'met' if S.goal_met(m, med, bad) else 'NOT met'} |")
    for label, subset in (("fit", fit), ("held-out", held)):
        print(f"\n{label} points by regime (planner / measured):\n\n| regime | metric | n | median | worst |\n|---|---|---|---|---|")
        for name, group in GROUPS.items():
            for g, m, n, med, bad in S.summary_rows(subset, group):
                print(f"| {name}: {g} | {m} | {n} | {med:.3f} | {bad:.3f} |")
    if "--points" in argv:
        print("\n| point | split | engine | model | GPU | TP | clients | TPOT | TTFT | tok/s/GPU |\n|---|---|---|---|---|---|---|---|---|---|")
        for pt, r in results:
            p = pt.raw
            cells = " | ".join(f"{r[m]:.3f}" if m in r else "" for m in S.METRICS)
            print(f"| {pt.id} | {pt.split} | {pt.engine} | {p['preset']} | {p['gpu']} | {p['tp']} | {p['concurrency'] or 'offline'} | {cells} |")


if __name__ == "__main__":
    main()
