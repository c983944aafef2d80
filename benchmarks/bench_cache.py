"""Benchmark the session cache model: its agreement with the tiered simulator on real plans, what it
adds to a plan, and a 10,000-session simulation with tiers.

1. Model against simulator: six plans (bundled presets on catalog GPUs) with a session workload;
   the plan's ``cache.hit_rate`` (Che's model) beside the simulator's on the same tiers and the
   plan's own step times (3,000 sessions, the first 600 warming the caches). Target: within
   10 % relative.
2. Cost: the hit-rate model (Che's characteristic time and hits of every tier) per plan, and the
   whole cache section (three scenarios timed), median of 200. Target: the model under 1 ms.
3. 10,000 sessions of 4 turns on GPU + CPU + disk tiers. Target: under 5 s.

The machine may be shared: every timing is printed with the load average, and CPU time beside
the wall time. Run: ``.venv/bin/python -m benchmarks.bench_cache`` (exit 1 when a target is missed).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from planner.cache.hitrate import fit_tier
from planner.cache.section import CacheModel, sim_setup, workload_of
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset
from planner.simulate.sessions import simulate_sessions

CHAT = dict(system_tokens=1024, tool_tokens=1024, shared_prefix_tokens=2048, retrieval_tokens=0, history_tokens=0)
SCENARIOS = {
    "8B H100, 6 turns, GPU pool": ("llama-3.1-8b", dict(gpu="H100-SXM-80GB", sessions_per_min=60, turns=6, think_time_s=60, user_tokens=600, output_tokens=300, **CHAT)),
    "8B H100 + 128 GiB CPU": ("llama-3.1-8b", dict(gpu="H100-SXM-80GB", sessions_per_min=60, turns=6, think_time_s=120, user_tokens=600, output_tokens=300, cpu_tier_gib=128, **CHAT)),
    "8B L40S, 4 tenants, Zipf documents": (
        "llama-3.1-8b",
        dict(gpu="L40S-48GB", sessions_per_min=15, turns=3, think_time_s=30, user_tokens=200, output_tokens=200, tenants=4, doc_catalog=400, doc_zipf=1.0, **{**CHAT, "retrieval_tokens": 6000}),
    ),
    "70B 4 x H100 TP 4 + 256 GiB CPU + 1 TiB disk": (
        "llama-3.1-70b",
        dict(gpu="H100-SXM-80GB", tp=4, gpu_count=4, sessions_per_min=12, turns=8, think_time_s=120, user_tokens=1000, output_tokens=300, cpu_tier_gib=256, disk_tier_gib=1024, **CHAT),
    ),
    "8B GB200 (NVLink-C2C) + 256 GiB, 10 turns": ("llama-3.1-8b", dict(gpu="GB200-NVL72-186GB", sessions_per_min=60, turns=10, think_time_s=90, user_tokens=800, output_tokens=200, cpu_tier_gib=256, **CHAT)),
    "8B 2 x H100 (2 replicas), 2 tenants + 256 GiB": (
        "llama-3.1-8b",
        dict(gpu="H100-SXM-80GB", gpu_count=2, sessions_per_min=120, turns=5, think_time_s=90, user_tokens=700, output_tokens=300, tenants=2, cpu_tier_gib=256, **CHAT),
    ),
}


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def agreement() -> bool:
    print("1. Model against simulator (hit rate: share of prompt tokens served from a cache)")
    print(f"   {'scenario':46} {'model':>7} {'sim':>7} {'rel':>6}   per tier (model / sim)                      TTFT mean model / sim")
    ok = True
    for name, (preset, values) in SCENARIOS.items():
        model = prepare_model(load_preset(preset))
        plan = compute_plan(make_inputs(sequences=16, **values), model)
        cache = plan.cache
        w, tiers, timing, replicas = sim_setup(plan)
        r = simulate_sessions(w, tiers, timing, sessions=3000, replicas=replicas, seed=1, warmup=600)
        rel = abs(cache.hit_rate - r.hit_rate) / r.hit_rate
        ok &= rel <= 0.10
        per = ", ".join(f"{t.name} {t.hit_rate:.3f}/{s.hit_rate:.3f}" for t, s in zip(cache.tiers, r.tiers, strict=True))
        keeps = "" if cache.ttft.keeps_up else " (the model: does not keep up)"
        print(f"   {name:46} {cache.hit_rate:7.3f} {r.hit_rate:7.3f} {rel:6.1%}   {per:44} {cache.ttft.mean_ms:7.1f} / {r.ttft_ms.mean:7.1f} ms{keeps}")
    print(f"   ({load()})")
    return ok


def cost() -> bool:
    print("2. What the model adds to a plan (median of 200)")
    model = prepare_model(load_preset("llama-3.1-8b"))
    ok = True
    for label, extra in (("GPU + CPU tier", {}), ("GPU + CPU + disk, 10,000-document catalog", {"disk_tier_gib": 1024, "doc_catalog": 10_000, "retrieval_tokens": 4000})):
        values = dict(gpu="H100-SXM-80GB", sessions_per_min=120, turns=6, think_time_s=60, user_tokens=600, output_tokens=300, cpu_tier_gib=256, **{**CHAT, **extra})
        fits, sections = [], []
        for k in range(200):
            plan = compute_plan(make_inputs(sequences=8 + k % 50, **values), model)
            w = workload_of(plan.inputs)
            t0 = time.perf_counter()
            cm = CacheModel(plan, w)
            _, lower = cm.lower_tiers(plan.inputs.cpu_tier_gib or 0.0, plan.inputs.disk_tier_gib or 0.0)
            t1 = time.perf_counter()
            for t in [cm.gpu, *lower]:
                fit_tier(w, t.unit_tokens, t.capacity_units, cm.replicas, cm.turn_s)
            fits.append(time.perf_counter() - t1)
            t2 = time.perf_counter()
            plan.cache  # noqa: B018 - the section, built on first read
            sections.append(time.perf_counter() - t2)
            del t0
        model_ms, section_ms = statistics.median(fits) * 1e3, statistics.median(sections) * 1e3
        ok &= model_ms < 1.0
        print(f"   {label:44} hit-rate model {model_ms:.3f} ms, whole cache section {section_ms:.2f} ms ({load()})")
    return ok


def simulation() -> bool:
    print("3. 10,000 sessions x 4 turns, GPU + 256 GiB CPU + 1 TiB disk tiers")
    model = prepare_model(load_preset("llama-3.1-8b"))
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", sessions_per_min=120, turns=4, think_time_s=60, user_tokens=600, output_tokens=300, cpu_tier_gib=256, disk_tier_gib=1024, **CHAT), model)
    w, tiers, timing, replicas = sim_setup(plan)
    walls, cpus = [], []
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        r = simulate_sessions(w, tiers, timing, sessions=10_000, replicas=replicas, seed=2)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    print(f"   {r.requests:,} requests, hit rate {r.hit_rate:.3f}; wall {min(walls):.2f} s (best of 3; {', '.join(f'{x:.2f}' for x in walls)}), CPU {min(cpus):.2f} s ({load()})")
    return min(walls) < 5.0


def main() -> int:
    results = [agreement(), cost(), simulation()]
    print("targets: " + ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in zip(("agreement within 10 %", "model under 1 ms", "10,000 sessions under 5 s"), results, strict=True)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
