"""Timings of the pure library (never asserted in unit tests): geometry parsing, one plan, a grid.

Run: .venv/bin/python -m benchmarks.bench_core
"""

from __future__ import annotations

import time
from pathlib import Path

from planner.configio import parse_config_text
from planner.geometry import _GEOMETRIES, parse_geometry
from planner.kv import inspect_geometry
from planner.plan import EXAMPLE_INPUTS, compute_plan, example_model, grid
from planner.presets import PRESETS_DIR

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "configs"


def per_call_us(fn, n: int, repeats: int = 5) -> float:
    """Best of ``repeats`` rounds of ``n`` calls (as timeit does: the VM's noise only adds time)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def main() -> None:
    folder = REFERENCE if REFERENCE.is_dir() else PRESETS_DIR
    configs = [parse_config_text(p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    for cfg in configs:  # warm transformers' import for the sparse multimodal configs
        parse_geometry(cfg)

    def parse_all_uncached() -> None:
        _GEOMETRIES.clear()
        for cfg in configs:
            inspect_geometry(parse_geometry(cfg), tokens=4096)

    us = per_call_us(parse_all_uncached, 20) / len(configs)
    print(f"geometry: parse + inspect, uncached: {us:,.0f} us per config ({len(configs)} configs from {folder.name})")
    us = per_call_us(lambda: [inspect_geometry(parse_geometry(c), tokens=4096) for c in configs], 50) / len(configs)
    print(f"geometry: parse + inspect, cached:   {us:,.1f} us per config")

    model = example_model()
    print(f"plan: one plan (seed example):        {per_call_us(lambda: compute_plan(EXAMPLE_INPUTS, model), 5000):,.1f} us (target < 50 us)")
    est = EXAMPLE_INPUTS.model_copy(update={"queue_ms": None, "preprocessing_ms": None, "prefill_ms": None, "first_decode_ms": None, "remaining_decode_ms": None})
    print(f"plan: one plan (roofline latency):    {per_call_us(lambda: compute_plan(est, model), 5000):,.1f} us")
    contexts = [64 + 40 * i for i in range(100)]
    conc = list(range(1, 101))
    ms = per_call_us(lambda: grid(EXAMPLE_INPUTS, model, contexts, conc), 20) / 1000
    print(f"plan: 100 x 100 (context, concurrency) grid: {ms:,.1f} ms (target < 100 ms)")


if __name__ == "__main__":
    main()
