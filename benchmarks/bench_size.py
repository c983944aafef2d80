"""Benchmark: ``size`` for Llama-3.1-70B over the whole catalog on one core.

Targets (issue 13): under 2 s without simulation; under 15 s with the simulator's capacity
search (bisection on rate) for the top 5 recommendations. Workload: 200 concurrent users at an
8k context (7,680 + 512 tokens), p95 ITL <= 50 ms, TTFT <= 2 s, bf16 and fp8 KV, TP 1-8.

Run: ``.venv/bin/python benchmarks/bench_size.py`` (exit status 1 if a target is missed).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.sizing import size  # noqa: E402
from planner.source import preset_ref  # noqa: E402


def main() -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    _ref, model = preset_ref("llama-3.1-70b")
    base = {"input_tokens": 7680, "output_tokens": 512}
    ok = True
    for top, target in ((0, 2.0), (5, 15.0)):
        t0 = time.perf_counter()
        result = size(model, base, users=200, ttft_p95_ms=2000, itl_p95_ms=50, capacity_top=top)
        wall = time.perf_counter() - t0
        ok &= wall < target
        print(f"capacity search on top {top}: {wall:.2f} s (target < {target:g} s) {'PASS' if wall < target else 'FAIL'}; "
              f"{result.searched['candidates']} candidates, {result.searched['feasible']} feasible")  # fmt: skip
        if top:
            for r in result.recommendations[:top]:
                print(f"  {r.gpu_count} x {r.gpu} TP {r.tp} {r.kv_dtype}: model {r.sustainable_rate:.3g} req/s; {r.capacity.note}")
    print(result.answer)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
