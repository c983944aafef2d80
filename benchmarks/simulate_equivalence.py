"""Do two versions of the simulator compute the same results? (a check for restructurings)

Runs a grid of simulations with the simulator of this checkout and with that of a git revision
(``--against``, default ``main``: its tree is exported with ``git archive`` into a temporary
folder and run there in a subprocess) and compares every result's JSON exactly, per-request
records included. The grid: every scheduling policy, three step costs (a fixed 10 ms step, a
synthetic roofline and the plans of three bundled presets on an H100), rates below and above
overload, with and without a shared prefix, static reservation and static batching,
cancellations (drawn and explicit), a CSV trace, two and four replicas behind both routers, and
the capacity search that sizing runs on the simulator.

Run: .venv/bin/python -m benchmarks.simulate_equivalence [--against REV] [--save FILE | --compare FILE]
"""

from __future__ import annotations

import json
import sys

PRESETS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b-it")

# Rows of a small trace: bursts, a long prompt, a one-token output, out-of-order arrival times.
TRACE = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{(k * 37 % 101) / 40:.3f},{64 + (k * 389) % 1900},{1 + (k * 53) % 300}\n" for k in range(240)) + "0.5,6000,40\n0.5,17,1\n"


def _costs() -> dict:
    from planner.plan import compute_plan, make_inputs
    from planner.simulate import StepCost, from_plan
    from planner.source import preset_ref

    costs = {
        "fixed": (StepCost(weights_bytes=1e9, kv_bytes_per_token=0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=0, peak_flops=1e15, mfu=1.0), 600),
        "roof": (StepCost(weights_bytes=1e9, kv_bytes_per_token=100.0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=1e9, peak_flops=1e14, mfu=1.0,
                          attn_flops_per_token_ctx=10.0, overhead_s=0.0005), 900),
    }  # fmt: skip
    for name in PRESETS:
        plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", input_tokens=1024, output_tokens=256), preset_ref(name)[1])
        cost, blocks = from_plan(plan)
        costs[name] = (cost, min(blocks, 3000))  # a smaller pool than the plan's, so it fills
    return costs


def runs() -> list[tuple[str, list, dict]]:
    """(key, requests, SimConfig fields) for every simulation of the grid."""
    from planner.simulate import Request, parse_trace_csv, poisson_requests

    out: list[tuple[str, list, dict]] = []
    light = poisson_requests(4.0, 400, (32, 1500), (4, 300), seed=1)
    heavy = poisson_requests(60.0, 600, (32, 1500), (4, 300), seed=2)
    for policy in ("fifo", "decode-priority", "chunked"):
        base = {"policy": policy, "chunk_tokens": 256, "max_num_batched_tokens": 2048, "max_num_seqs": 48}
        for load, reqs in (("light", light), ("heavy", heavy)):
            out.append((f"{policy}|{load}", reqs, base))
            out.append((f"{policy}|{load}|prefix", reqs, {**base, "prefix_tokens": 400, "prefix_share": 0.6, "seed": 3}))
            out.append((f"{policy}|{load}|cancel", reqs, {**base, "cancel_rate": 0.2, "seed": 5}))
            out.append((f"{policy}|{load}|static-res", reqs, {**base, "reservation": "static", "static_tokens": 1800}))
            out.append((f"{policy}|{load}|static-batch", reqs, {**base, "batching": "static"}))
            out.append((f"{policy}|{load}|slo", reqs, {**base, "ttft_slo_ms": 400.0, "itl_slo_ms": 40.0}))
        out.append((f"{policy}|heavy|prefix+cancel+small-blocks", heavy, {**base, "block_tokens": 8, "prefix_tokens": 300, "prefix_share": 0.9, "cancel_rate": 0.3}))
        explicit = tuple(
            {"request_id": i, "stage": stage, **({"after_tokens": 3} if stage == "decode" else {})}
            for i, stage in zip(range(0, 40, 4), ["admission", "mid-prefill", "first-token", "decode"] * 3, strict=False)
        )
        out.append((f"{policy}|heavy|explicit-cancel", heavy, {**base, "cancellations": explicit}))
        out.append((f"{policy}|trace", parse_trace_csv(TRACE), {**base, "prefix_tokens": 64, "prefix_share": 0.5}))
        out.append((f"{policy}|thrash", [Request(id=i, arrival_s=0.0, prompt_tokens=64, output_tokens=300) for i in range(30)], {**base, "total_blocks": 48}))
        out.append((f"{policy}|burst", poisson_requests(1e6, 200, 700, (1, 80), seed=4), {**base, "max_num_batched_tokens": 1024}))
        for replicas in (2, 4):
            for router in ("round-robin", "least-outstanding-tokens"):
                out.append((f"{policy}|heavy|{replicas}x{router}", heavy, {**base, "replicas": replicas, "router": router, "prefix_tokens": 256, "prefix_share": 0.3}))
    return out


def _capacity() -> dict:
    """Sizing's capacity search (bracket and bisect over simulations) for one recommendation."""
    from planner.sizing import capacity_search, size
    from planner.source import preset_ref

    model = preset_ref("llama-3.1-8b")[1]
    result = size(model, {"input_tokens": 1024, "output_tokens": 128}, users=16, itl_p95_ms=30, ttft_p95_ms=800, gpus=["H100-SXM-80GB"], kv_dtypes=("bf16",), tps=(1,))
    rec = result.recommendations[0]
    wide = rec.model_copy(update={"replicas": 6})  # 4 of 6 replicas simulated behind the router
    return {
        "recommendation": rec.model_dump(mode="json"),
        "capacity": capacity_search(model, rec, 800, 30, requests=120).model_dump(mode="json"),
        "capacity_6_replicas": capacity_search(model, wide, 800, 30, requests=120).model_dump(mode="json"),
    }


def snapshot() -> dict:
    """Every simulation of the grid as JSON-ready data (run by whichever ``planner`` is importable)."""
    from planner.simulate import SimConfig, simulate

    out: dict = {}
    for cost_name, (cost, blocks) in _costs().items():
        for key, reqs, fields in runs():
            cfg = SimConfig(**{"total_blocks": blocks, **fields})
            out[f"{cost_name}|{key}"] = simulate(reqs, cfg, cost, record_requests=True).model_dump(mode="json")
    out["capacity_search"] = _capacity()
    return json.loads(json.dumps(out))


def compare(base: dict, here: dict) -> int:
    from benchmarks.plan_equivalence import differences, exact

    if base.keys() != here.keys():
        print(f"different grids: {len(base)} vs {len(here)} entries; only in one: {sorted(base.keys() ^ here.keys())[:10]}")
        return 1
    bad = {k: differences(base[k], here[k], 0.0) for k in base if not exact(base[k], here[k])}
    print(f"{len(base)} entries (simulations, and sizing's capacity search): {len(base) - len(bad)} identical to the last digit, {len(bad)} different")
    for k, v in list(bad.items())[:10]:
        print(f"  {k}: {len(v)} differences, e.g. {v[:3]}")
    return 1 if bad else 0


if __name__ == "__main__":
    from benchmarks.equivalence import main

    sys.exit(main(__doc__, "simulate_equivalence", snapshot, compare, "entries"))
