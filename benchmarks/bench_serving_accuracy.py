"""Planner vs published end-to-end serving runs: TPOT, TTFT and output tokens/s per GPU.

    .venv/bin/python -m benchmarks.bench_serving_accuracy [--points] [--cv]

Runs every point of ../shared/reference/measured_serving.json through the planner
(benchmarks/serving_points.py: one ``compute_plan`` a point, its closed loop or the offline run of
its harness) and prints planner / measured by regime (dense/MoE, TP, concurrency band, GPU
generation, engine) for the shipped constants (fitted on every point, in sample), then the
held-out estimates scripts/fit_serving.py recorded in planner/serving_accuracy.json: the
pre-registered split (fit / held-out GPU / held-out engine / held-out point, fixed before any
fitting; docs/serving_fit.md) and leave-one-group-out cross-validation by engine, GPU and sweep.
``--cv`` recomputes the cross-validation here (scipy; minutes). Goal on held-out points: TPOT
median within 1.2x and worst within 2x, TTFT 1.5x / 3x, throughput 1.2x / 2x. ``--points`` also
prints every point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import serving_points as S
from planner import accuracy, latency

GROUPS = {
    "split": lambda pt: pt.split,
    "dense/MoE": lambda pt: S.regime(pt)["arch"],
    "TP": lambda pt: S.regime(pt)["tp"],
    "concurrency": lambda pt: S.regime(pt)["concurrency"],
    "GPU generation": lambda pt: S.regime(pt)["family"],
    "engine": lambda pt: pt.engine,
}


def _recorded(pts: list[S.Point], key: str, cv: str | None = None) -> list[tuple[S.Point, dict[str, float]]]:
    """The ratios scripts/fit_serving.py recorded for every point under ``key`` (or its ``cv`` fold)."""
    rows = {p["id"]: (p["cv"][cv] if cv else p[key]) for p in accuracy.load()["points"]}
    return [(pt, rows[pt.id]) for pt in pts]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    pts = S.points()
    results = [(pt, S.ratios(pt)) for pt in pts]
    pre = _recorded(pts, "preregistered")
    cv = {name: _recorded(pts, "", name) for name in ("engine", "GPU", "sweep")}
    if "--cv" in argv:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        import fit_serving

        x = {**latency.SERVING_FIT, **latency.KERNEL_FIT}
        cv = fit_serving.cross_validate(pts, x)
    print(f"measured points: {len(results)}; anomalies left out of the goal: {', '.join(f'{p} {m}' for p, m in S.ANOMALIES)}")
    print("\n| set | metric | n | median | worst | goal |\n|---|---|---|---|---|---|")
    sets = [("fit: shipped constants, all points (in sample)", results), ("pre-registered held-out", [(pt, r) for pt, r in pre if pt.split != "fit"])]
    sets += [("pre-registered held-out without SGLang", [(pt, r) for pt, r in pre if pt.split not in ("fit", "held-out engine")])]
    sets += [("pre-registered held-out, SGLang only", [(pt, r) for pt, r in pre if pt.split != "fit" and pt.engine == "sglang"])]
    sets += [(f"cross-validation: leave one {name} out", preds) for name, preds in cv.items()]
    for label, subset in sets:
        for _g, m, n, med, bad in S.summary_rows(subset, lambda pt: "all"):
            print(f"| {label} | {m} | {n} | {med:.3f} | {bad:.3f} | {'met' if S.goal_met(m, med, bad) else 'NOT met'} |")
    for label, subset in (("fit (all points)", results), ("leave-one-sweep-out", cv["sweep"])):
        print(f"\n{label} by regime (planner / measured):\n\n| regime | metric | n | median | worst |\n|---|---|---|---|---|")
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
