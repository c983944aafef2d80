"""Timings of the pure library (never asserted in unit tests): geometry parsing, one plan, a grid.

Plan time on the roofline path (issue 12: < 100 us) is printed per preset, two ways: the same
inputs again (what a rerun without a change costs) and a new context length every call (every
load-dependent figure computed afresh: the cost of moving a slider). Each figure is the median
of rounds of calls, timed in this thread's CPU time (a 2-core machine shared with other work
only adds wall time while this thread waits), with the load average printed beside it.

Run: .venv/bin/python -m benchmarks.bench_core [--plans-only | --opcodes]

``--opcodes`` prints bytecode instructions per plan instead (deterministic: compare revisions on a
busy machine).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from planner.configio import parse_config_text
from planner.geometry import _GEOMETRIES, parse_geometry
from planner.kv import inspect_geometry
from planner.plan import EXAMPLE_INPUTS, compute_plan, example_model, grid, make_inputs, prepare_model
from planner.presets import PRESETS_DIR, load_preset

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


def cpu_us(fn, n: int, rounds: int = 15) -> tuple[float, float]:
    """(median, minimum) over ``rounds`` rounds of ``n`` calls of this thread's CPU time per call (us)."""
    for _ in range(max(1, n // 5)):
        fn()
    per_round = []
    for _ in range(rounds):
        t = time.thread_time()
        for _ in range(n):
            fn()
        per_round.append((time.thread_time() - t) / n * 1e6)
    return statistics.median(per_round), min(per_round)


# (label, preset or None for the seed example, plan inputs): the roofline path (no observed phases)
ROOFLINE_PLANS = (
    ("seed example (16 GiB device)", None, {"device_gib": 16.0, "model_resident_gib": 4.0, "generated_tokens": 129}),
    ("llama-3.1-8b, H100", "llama-3.1-8b", {"gpu": "H100-SXM-80GB"}),
    ("llama-3.1-70b, H100 TP4", "llama-3.1-70b", {"gpu": "H100-SXM-80GB", "tp": 4, "gpu_count": 4}),
    ("qwen3-30b-a3b (MoE), H100", "qwen3-30b-a3b", {"gpu": "H100-SXM-80GB"}),
    ("gemma-3-27b-it (sliding), H200", "gemma-3-27b-it", {"gpu": "H200-141GB"}),
    ("deepseek-v3 (MLA, MoE), B200 TP8 EP8", "deepseek-v3", {"gpu": "B200-180GB", "tp": 8, "gpu_count": 8, "ep": 8}),
)


SCENARIOS = ("same inputs", "new load", "new context")


def plan_times(n: int = 500) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """(label, {scenario: (median, min) us per plan}) per preset: the same inputs again, a new load
    (sequences) every call, a new context (input tokens) every call; 2,000 distinct values each, so
    a new load or context is computed afresh (caches keep a few hundred steps)."""
    out = []
    for label, preset, values in ROOFLINE_PLANS:
        model = example_model() if preset is None else prepare_model(load_preset(preset))
        inputs = make_inputs(**values)
        base = inputs.input_tokens or 2048
        loads = iter([inputs.model_copy(update={"sequences": 1 + i % 2000}) for i in range(40_000)])
        contexts = iter([inputs.model_copy(update={"input_tokens": base - 1000 + i % 2000}) for i in range(40_000)])
        times = {
            "same inputs": cpu_us(lambda: compute_plan(inputs, model), n),  # noqa: B023
            "new load": cpu_us(lambda: compute_plan(next(loads), model), n),  # noqa: B023
            "new context": cpu_us(lambda: compute_plan(next(contexts), model), n),  # noqa: B023
        }
        out.append((label, times))
    return out


def print_plan_times() -> None:
    load = os.getloadavg()
    print(f"plan time, roofline path (CPU us per plan, median / min of 15 rounds; target < 100 us; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):")
    print(f"  {'':40s} " + "".join(f"{name:>22s}" for name in SCENARIOS))
    for label, times in plan_times():
        print(f"  {label:40s} " + "".join(f"{times[name][0]:12.1f} / {times[name][1]:6.1f}" for name in SCENARIOS))


def opcodes(fn) -> int:
    """Python bytecode instructions one call of ``fn`` executes: a figure the machine's load cannot
    change (C-level work such as dict lookups is not counted), for comparing revisions."""
    count = 0

    def tracer(frame, event, arg):  # noqa: ARG001
        nonlocal count
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def print_plan_opcodes() -> None:
    print("plan, roofline path: bytecode instructions per plan (load-independent)")
    print(f"  {'':40s} " + "".join(f"{name:>14s}" for name in SCENARIOS))
    for label, preset, values in ROOFLINE_PLANS:
        model = example_model() if preset is None else prepare_model(load_preset(preset))
        inputs = make_inputs(**values)
        compute_plan(inputs, model)
        compute_plan(inputs, model)
        load = inputs.model_copy(update={"sequences": 777})
        context = inputs.model_copy(update={"input_tokens": (inputs.input_tokens or 2048) + 333})
        counts = [opcodes(lambda i=i, m=model: compute_plan(i, m)) for i in (inputs, load, context)]
        print(f"  {label:40s} " + "".join(f"{c:14,d}" for c in counts))


def main() -> None:
    if "--opcodes" in sys.argv:
        print_plan_opcodes()
        return
    if "--plans-only" in sys.argv:
        print_plan_times()
        return
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
    print_plan_times()


if __name__ == "__main__":
    main()
