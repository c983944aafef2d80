"""Time the PDF sizing report (target < 3 s) and the share-link round trip.

Run: .venv/bin/python -m benchmarks.bench_report
"""

from __future__ import annotations

import time

from planner.plan import EXAMPLE_INPUTS, PlanInputs, compute_plan, example_model
from planner.report import build_pdf
from planner.share import decode_query, encode_query, share_url
from planner.source import example_ref, preset_ref

TARGET_S = 3.0


def best_of(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    t = time.perf_counter()
    ref, _ = example_ref()
    plan = compute_plan(EXAMPLE_INPUTS, example_model())
    link = share_url("http://localhost:8501/", encode_query(ref, EXAMPLE_INPUTS))
    pdf = build_pdf(plan, ref, link)
    first = time.perf_counter() - t
    print(f"report: first build_pdf incl. reportlab import (seed example): {first:.3f} s, {len(pdf):,} bytes (target < {TARGET_S:g} s)")
    warm = best_of(lambda: build_pdf(plan, ref, link), 5)
    print(f"report: build_pdf, warm (seed example):  {warm:.3f} s (target < {TARGET_S:g} s)")
    gref, gmodel = preset_ref("gemma-2-9b")
    gplan = compute_plan(PlanInputs(reservation="paged"), gmodel)
    print(f"report: build_pdf, warm (gemma-2-9b paged): {best_of(lambda: build_pdf(gplan, gref, link), 5):.3f} s")
    params = encode_query(ref, EXAMPLE_INPUTS)
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        decode_query(encode_query(ref, EXAMPLE_INPUTS))
    print(f"share: encode + decode a link: {(time.perf_counter() - t) / n * 1e6:,.0f} us ({len(share_url('http://localhost:8501/', params))} characters)")
    if max(first, warm) >= TARGET_S:
        raise SystemExit(f"report slower than {TARGET_S:g} s")


if __name__ == "__main__":
    main()
