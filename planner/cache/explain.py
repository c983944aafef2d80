"""The cache section in words: formula lines, the summary line, notes and model terms.

:mod:`planner.explain` renders these with the rest of a plan (page, PDF, CLI); nothing else
writes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.plan.result import Plan

TIER_NAMES = {"gpu": "GPU pool", "cpu": "CPU DRAM", "disk": "local NVMe"}


def _section(plan: Plan):
    if plan.inputs.sessions_per_min is None:
        return None
    cache = plan.cache
    return cache if cache.applies else None


def cache_terms(plan: Plan) -> frozenset[str]:
    """Terms the cache model computes: LRU eviction of the prefix cache, and offload to the
    CPU / disk tiers it sizes."""
    cache = _section(plan)
    if cache is None:
        return frozenset()
    return frozenset({"prefix_eviction", *(("offload",) if len(cache.tiers) > 1 else ())})


def summary_line(plan: Plan) -> str | None:
    """The CLI's line: hit rate and TTFT with the tiers, without them, and with no prefix cache."""
    inputs = plan.inputs
    if inputs.sessions_per_min is None and not (inputs.cpu_tier_gib or inputs.disk_tier_gib):
        return None
    cache = plan.cache
    if not cache.applies:
        return f"cache        not modelled: {cache.reason}"
    a, g, n = cache.ttft, cache.ttft_gpu_only, cache.ttft_no_cache
    below = " + ".join(TIER_NAMES[t.name] for t in cache.tiers[1:])
    if below:
        return (
            f"cache        hit rate {cache.hit_rate:.1%} with {below} ({cache.hit_rate_gpu_only:.1%} GPU pool alone); TTFT mean / p95 "
            f"{a.mean_ms:,.1f} / {a.p95_ms:,.1f} ms with it, {g.mean_ms:,.1f} / {g.p95_ms:,.1f} ms without, {n.mean_ms:,.1f} / {n.p95_ms:,.1f} ms with no prefix cache"
        )
    return f"cache        hit rate {cache.hit_rate:.1%} (GPU pool); TTFT mean / p95 {a.mean_ms:,.1f} / {a.p95_ms:,.1f} ms, {n.mean_ms:,.1f} / {n.p95_ms:,.1f} ms with no prefix cache"


def formula_lines(plan: Plan) -> tuple[str, ...]:
    """The cache model's steps with this plan's numbers (empty without a workload)."""
    cache = _section(plan)
    if cache is None:
        return ()
    out = [
        f"sessions = {cache.sessions_per_min:,.4g}/min x {cache.turns} turns = {cache.requests_per_s:,.3g} requests/s; mean prompt {cache.mean_prompt_tokens:,.0f} tokens; "
        f"think {cache.think_time_s:g} s (exponential); a turn takes {cache.turn_seconds:,.2f} s in the engine; {cache.concurrency_per_replica:,} in flight a replica",
    ]
    for t in cache.tiers:
        held = "everything reused" if t.characteristic_s is None else f"what was used in the last {t.characteristic_s:,.1f} s"
        load = f"; a load {t.load_ms_per_hit:,.2f} ms a request ({t.link_gb_s:g} GB/s)" if t.name != "gpu" and t.link_gb_s else ""
        out.append(f"{TIER_NAMES[t.name]}: {t.capacity_tokens:,} tokens ({t.capacity_gib:,.1f} GiB, {t.unit_tokens}-token units) keeps {held}: serves {t.hit_rate:.1%} of prompt tokens{load}")
    for name, s in (("with the tiers", cache.ttft), ("GPU pool alone", cache.ttft_gpu_only), ("no prefix cache", cache.ttft_no_cache)):
        out.append(
            f"TTFT {name} = wait {s.wait_ms:,.1f} + load {s.load_ms:,.1f} + prefill {s.prefill_ms:,.1f} + first decode {s.first_decode_ms:,.1f} = {s.mean_ms:,.1f} ms mean, "
            f"{s.p95_ms:,.1f} ms p95 (hit rate {s.hit_rate:.1%})"
        )
    out.append(f"prefill GPU time saved = {cache.gpu_seconds_saved_per_hour:,.0f} GPU-s/h ({cache.gpu_seconds_saved_by_offload_per_hour:,.0f} by the tiers below the GPU); tiers cost ${cache.tier_cost_per_hour:,.2f}/h")
    return tuple(out)


def assumption(plan: Plan) -> tuple[str, str] | None:
    """(title, text) of the cache model's assumption note."""
    cache = _section(plan)
    if cache is None:
        return None
    return (
        "Prefix cache under sessions",
        cache.model + ". Sessions stick to one replica; a request's blocks are not pinned while it runs (the GPU figure is pessimistic where T is shorter than a turn); "
        "the history is resent unchanged; the plan's single request still uses its own prefix hit rate.",
    )


def ttft_rows(plan: Plan) -> list[list[str]]:
    """The report's table: hit rate and TTFT with the tiers, with the GPU pool alone, with no
    prefix cache (empty without a workload)."""
    cache = _section(plan)
    if cache is None:
        return []
    below = " + ".join(TIER_NAMES[t.name] for t in cache.tiers[1:])
    rows = [["Cache", "hit rate", "TTFT mean", "TTFT p95", "wait", "load", "prefill"]]
    scenarios = [(f"GPU pool + {below}", cache.ttft)] if below else []
    scenarios += [("GPU pool alone", cache.ttft_gpu_only), ("no prefix cache", cache.ttft_no_cache)]
    for name, s in scenarios:
        rows.append([name, f"{s.hit_rate:.1%}", f"{s.mean_ms:,.1f} ms", f"{s.p95_ms:,.1f} ms", f"{s.wait_ms:,.1f} ms", f"{s.load_ms:,.1f} ms", f"{s.prefill_ms:,.1f} ms"])
    return rows


def tier_rows(plan: Plan) -> list[list[str]]:
    """The report's table of tiers: capacity, share of prompt tokens served, load, cost."""
    cache = _section(plan)
    if cache is None:
        return []
    rows = [["Tier", "capacity (tokens)", "GiB", "serves", "load a request", "cost"]]
    for t in cache.tiers:
        rows.append([TIER_NAMES[t.name], f"{t.capacity_tokens:,}", f"{t.capacity_gib:,.1f}", f"{t.hit_rate:.1%}", "-" if t.name == "gpu" else f"{t.load_ms_per_hit:,.2f} ms", "-" if t.name == "gpu" else f"${t.cost_per_hour:,.2f}/h"])
    return rows
