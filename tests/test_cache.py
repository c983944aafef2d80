"""The session workload's prefix cache: segments, Che's model, the tiered LRU simulator, traces.

Hand-computed cases use a 16-token unit, 16-token messages and answers (a turn adds 32 tokens)
and, with a shared prefix, 64 prefix tokens (4 units). Synthetic timing: prefill 2e-5 s a token
(+ 1e-10 s a token and cached token), first decode and ITL 20 ms.
"""

from __future__ import annotations

import random

import pytest

from planner.cache import SessionWorkload, Tier, TurnTiming, choose_loads, fit_tier, hit_rate
from planner.cache.engines import sglang_hicache_flags, vllm_offload_flags
from planner.cache.tiers import lmcache_chunks, native_cpu_chunks, offload_tiers
from planner.errors import PlannerError
from planner.simulate.mooncake import TraceRequest, parse_mooncake, session_trace, write_mooncake
from planner.simulate.sessions import replay, simulate_sessions
from planner.simulate.tiers import SegmentLRU

TIMING = TurnTiming(lambda new, cached: 2e-5 * new + 1e-10 * new * cached, 0.02, 0.02)
INSTANT = TurnTiming(lambda new, cached: 0.0, 0.0, 0.0)  # a turn takes no time (S = 0)
TURN_S = 0.02 * 300  # a turn of 300 output tokens at 20 ms a token: the model's S
SMALL = dict(shared_prefix_tokens=64, user_tokens=16, output_tokens=16, turns=4)


def analytic(w: SessionWorkload, tiers: list[Tier], service_s: float, replicas: int = 1) -> float:
    """The hierarchy's hit rate: per turn, what its largest tier finds (tiers are nested)."""
    fits = [fit_tier(w, t.unit_tokens, t.capacity_units, replicas, service_s) for t in tiers]
    return sum(max(f.hit_tokens(k) for f in fits) for k in range(1, w.turns + 1)) / w.prompt_total()


# --------------------------------------------------------------------------- the workload


def test_segments_by_hand():
    # prefix 64 = 4 units; after turn j the cache holds 64 + 32 j - 1 tokens: units 5, 7, 9, 11
    w = SessionWorkload(sessions_per_s=1, **SMALL)
    seg = w.segments(16)
    assert (seg.prefix, seg.doc, seg.turn) == (4, 0, (1, 2, 2, 2))
    assert [w.prompt_tokens(k) for k in (1, 2, 3, 4)] == [80, 112, 144, 176]
    assert w.prompt_total() == 512
    # a 256-token chunk: the prefix fills none, a session of 4 turns never completes one
    assert w.segments(256) == type(seg)(256, 0, 0, (0, 0, 0, 0))
    # a document of 100 tokens after the prefix: units 4..10 ((64 + 100) // 16 = 10)
    assert SessionWorkload(sessions_per_s=1, doc_tokens=100, **SMALL).segments(16).doc == 6


def test_shareable_parts_name_the_tenant():
    parts = dict(SessionWorkload(sessions_per_s=1, doc_tokens=500, doc_catalog=20, **SMALL).shareable())
    assert "never across tenants" in parts["shared prefix"]
    assert "same document (20 in the catalog)" in parts["document"]
    assert "same session only" in parts["history"]
    assert "never cached" in parts["new user message"]


# --------------------------------------------------------------------------- hand-computed hit rates


def test_everything_cached_by_hand():
    # every turn finds all it can: the prefix (64) then 80, 112, 144 tokens of history: 400 / 512
    w = SessionWorkload(sessions_per_s=10, think="fixed", think_time_s=30, **SMALL)
    fit = fit_tier(w, 16, 10**12, 1, 0.0)
    assert hit_rate(w, fit) == pytest.approx(400 / 512, abs=1e-9)


def test_history_evicted_prefix_kept_by_hand():
    # 400 units, 10 sessions a second, no turn time: occupancy = prefix 4 + 10 x (9 + 7) T (the
    # private units weighted by turns left, E[min(30, T)] = T) so T = 396 / 160 = 2.475 s < 30:
    # the history is gone before the next turn, the prefix (used every 25 ms) stays: 4 x 64 / 512
    w = SessionWorkload(sessions_per_s=10, think="fixed", think_time_s=30, **SMALL)
    fit = fit_tier(w, 16, 400, 1, 0.0)
    assert fit.characteristic_s == pytest.approx(396 / 160, rel=1e-6)
    assert hit_rate(w, fit) == pytest.approx(0.5, abs=1e-9)


K_SESSIONS = dict(shared_prefix_tokens=0, user_tokens=16, output_tokens=16, turns=2, think="fixed", think_time_s=10.5, arrivals="fixed")


@pytest.mark.parametrize(("units", "hit"), [(84, 0.25), (21, 0.0)])
def test_tier_of_k_sessions_analytic_by_hand(units, hit):
    # one session a second, 2 turns 10.5 s apart: turn 1 completes 1 unit, turn 2 two more; turn
    # 2 (48 tokens) finds turn 1's 16 when it survived: 16 / (16 + 48). Occupancy = min(10.5, T) + T
    # (turn 1's unit) + 2 T (turn 2's): 84 units -> T = 24.5 s > 10.5 (hit), 21 -> T = 5.25 s (miss)
    w = SessionWorkload(sessions_per_s=1, **K_SESSIONS)
    fit = fit_tier(w, 16, units, 1, 0.0)
    assert fit.characteristic_s == pytest.approx(24.5 if hit else 5.25, rel=1e-6)
    assert hit_rate(w, fit) == pytest.approx(hit, abs=1e-12)


@pytest.mark.parametrize(("units", "hitting"), [(41, 180), (40, 10)])
def test_tier_of_k_sessions_simulated_by_hand(units, hitting):
    # the same sessions in exact LRU: between session j's turns (10.5 s) the tier sees turn 1 of
    # sessions j+1..j+10 (1 unit each) and turn 2 of j-10..j-1 (3 units each): 40 more recent
    # units, so its unit survives in a tier of 41 (13.7 sessions of 3 units) and not in one of 40,
    # except for the last 10 of the 200 sessions, which fewer sessions follow. Sessions 20..199
    # are counted: 180 hit in 41 units, 10 in 40; each hit is 16 of a session's 64 prompt tokens
    w = SessionWorkload(sessions_per_s=1, **K_SESSIONS)
    r = simulate_sessions(w, [Tier("gpu", 16, units * 16)], INSTANT, sessions=200, warmup=20)
    assert r.hit_rate == pytest.approx(hitting * 16 / (180 * 64), abs=1e-12)
    assert r.hit_rate_by_turn == pytest.approx([0.0, hitting * 16 / (180 * 48)])


# --------------------------------------------------------------------------- the model against the simulator

W1 = dict(sessions_per_s=2, turns=5, think_time_s=30, shared_prefix_tokens=1000, user_tokens=200, output_tokens=300)
SCENARIOS = {
    "one tenant, GPU pool": (SessionWorkload(**W1), [Tier("gpu", 16, 200_000)], 1),
    "GPU pool and CPU tier": (SessionWorkload(**W1), [Tier("gpu", 16, 100_000), Tier("cpu", 16, 400_000, 1e-7)], 1),
    "four tenants, small pool": (SessionWorkload(sessions_per_s=3, turns=4, think_time_s=20, shared_prefix_tokens=3000, user_tokens=100, output_tokens=200, tenants=4), [Tier("gpu", 16, 60_000)], 1),
    "Zipf documents": (
        SessionWorkload(sessions_per_s=2, turns=3, think_time_s=30, shared_prefix_tokens=500, doc_tokens=4000, doc_catalog=1000, user_tokens=100, output_tokens=200, tenants=2),
        [Tier("gpu", 16, 300_000)],
        1,
    ),
    "fixed think time": (SessionWorkload(**{**W1, "think": "fixed"}), [Tier("gpu", 16, 150_000)], 1),
    "GPU, CPU and disk (256-token chunks)": (
        SessionWorkload(sessions_per_s=2, turns=6, think_time_s=60, shared_prefix_tokens=2000, user_tokens=300, output_tokens=400),
        [Tier("gpu", 16, 100_000), Tier("cpu", 256, 300_000, 1e-7), Tier("disk", 256, 2_000_000, 1e-6)],
        1,
    ),
    "two replicas, three tenants": (SessionWorkload(**{**W1, "sessions_per_s": 4, "tenants": 3}), [Tier("gpu", 16, 150_000)], 2),
    "ten turns": (SessionWorkload(sessions_per_s=1, turns=10, think_time_s=10, shared_prefix_tokens=1000, user_tokens=100, output_tokens=200), [Tier("gpu", 16, 80_000)], 1),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_model_agrees_with_simulator(name):
    w, tiers, replicas = SCENARIOS[name]
    model = analytic(w, tiers, TURN_S * w.output_tokens / 300, replicas)
    r = simulate_sessions(w, tiers, TIMING, sessions=2500, replicas=replicas, seed=3, warmup=500)
    assert r.hit_rate == pytest.approx(model, rel=0.10), (name, model, r.hit_rate)
    assert 0.1 < r.hit_rate < 0.95  # a scenario where the size matters


# --------------------------------------------------------------------------- tenant safety


def test_tenants_never_share_in_the_model():
    # two tenants with identical prompts at twice the rate in twice the cache find exactly what
    # one tenant finds alone: nothing of the other's is ever a hit
    one = SessionWorkload(sessions_per_s=1, turns=3, think_time_s=20, shared_prefix_tokens=2000, user_tokens=100, output_tokens=100)
    two = one.model_copy(update={"sessions_per_s": 2, "tenants": 2})
    for units in (500, 3000, 20_000):
        assert hit_rate(two, fit_tier(two, 16, 2 * units, 1, 1.0)) == pytest.approx(hit_rate(one, fit_tier(one, 16, units, 1, 1.0)), rel=1e-9)


def test_tenants_never_share_in_the_simulator():
    # tenant b sends exactly tenant a's prompts (the same hash ids) right after them: none hits
    ids = tuple(range(8))
    a = [TraceRequest(float(i), 4096, 10, ids, "a") for i in range(5)]
    b = [TraceRequest(10.0 + i, 4096, 10, ids, "b") for i in range(5)]
    r = replay(a + b, [Tier("gpu", 512, 10**7)], TIMING, block_tokens=512)
    # a: the first request misses, the next four find 7 whole blocks (the last token is recomputed);
    # b: the same. Cross-tenant sharing would have made b's first request a hit too.
    assert r.tiers[0].tokens_served == 2 * 4 * 7 * 512
    only_a = replay(a, [Tier("gpu", 512, 10**7)], TIMING, block_tokens=512)
    assert only_a.tiers[0].tokens_served == 4 * 7 * 512


# --------------------------------------------------------------------------- the tiers


def test_segment_lru_equals_block_lru():
    # segments of whole units behave exactly as an LRU of single units touched tail first
    rng = random.Random(7)
    seg_pool, unit_pool = SegmentLRU(40), SegmentLRU(40)
    for _ in range(400):
        chain = [((k, j), (3 * k + j) % 5 + 1) for j, k in enumerate(rng.randrange(6) for _ in range(rng.randint(1, 5)))]  # a key has one size
        units = [((key, i), 1) for key, size in chain for i in range(size)]
        assert seg_pool.found(chain) == unit_pool.found(units)
        seg_pool.touch(chain)
        unit_pool.touch(units)
        assert seg_pool.used == unit_pool.used <= 40


def test_choose_loads_takes_the_faster():
    # 1,000 tokens found only in the CPU tier: at 1e-6 s a token loading (1 ms) beats recomputing
    # (20 ms); at 1e-4 s a token (100 ms) recomputing wins and the tier serves nothing
    fast = choose_loads(TIMING, 2000, 0, [(1000, 1e-6)])
    slow = choose_loads(TIMING, 2000, 0, [(1000, 1e-4)])
    assert fast[0] == [1000] and fast[1] == pytest.approx(1e-3) and fast[2] == 1000
    assert slow == ([0], 0.0, 0)


def test_tier_capacity_per_engine_layout():
    # llama-3.1-8b, bf16, TP 1: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B a token,
    # 2 MiB a 16-token block. vLLM 0.33 --kv-offloading-size 256: 256 GiB / 2 MiB = 131,072 chunks;
    # at TP 2 each GPU's block is 1 MiB but a chunk holds both ranks' shards: the same count
    assert native_cpu_chunks(256, 2 << 20, 1) == native_cpu_chunks(256, 1 << 20, 2) == 131_072
    # a 3,000-byte block pads to 4,096 in 0.33 (page alignment), not in 0.24
    assert (native_cpu_chunks(1, 3000, 1), native_cpu_chunks(1, 3000, 1, vllm_version="0.24")) == ((1 << 30) // 4096, (1 << 30) // 3000)
    # LMCache: 256-token chunks of 32 MiB per worker: 8,192 chunks in 256 GiB
    assert lmcache_chunks(256, 131_072, 1) == 8192
    connector, tiers = offload_tiers(gpu="H100-SXM-80GB", tp=1, block_tokens=16, bytes_per_block=2 << 20, bytes_per_token=131_072, cpu_gib=256, disk_gib=0)
    assert connector == "native" and tiers[0].capacity_tokens == 2_097_152 and tiers[0].link_gb_s == 53.6
    # loading a token back: 131,072 B over 53.6 GB/s
    assert tiers[0].load_s_per_token == pytest.approx(131_072 / 53.6e9)
    connector, tiers = offload_tiers(gpu="GB200-NVL72-186GB", tp=1, block_tokens=16, bytes_per_block=2 << 20, bytes_per_token=131_072, cpu_gib=64, disk_gib=512)
    assert connector == "lmcache" and [t.name for t in tiers] == ["cpu", "disk"] and tiers[0].link_gb_s == 450.0
    assert tiers[1].capacity_tokens == 512 * 8 * 256 * 4  # 512 GiB / 32 MiB chunks x 256 tokens
    with pytest.raises(PlannerError, match="cpu_tier_gib"):
        offload_tiers(gpu="H100-SXM-80GB", tp=1, block_tokens=16, bytes_per_block=2 << 20, bytes_per_token=131_072, cpu_gib=0.001, disk_gib=0)


def test_engine_flags():
    assert vllm_offload_flags("0.33", "native", 64, 0, bytes_per_block=2 << 20, tp=1) == ("--kv-offloading-size 64 --kv-offloading-backend native",)
    # vLLM 0.11: num_cpu_blocks of the connector (64 GiB / (2 MiB x TP 2) = 16,384)
    (flag,) = vllm_offload_flags("0.11", "native", 64, 0, bytes_per_block=2 << 20, tp=2)
    assert '"num_cpu_blocks":16384' in flag and "OffloadingConnector" in flag
    flag, env = vllm_offload_flags("0.33", "lmcache", 64, 512, bytes_per_block=2 << 20, tp=2)
    assert "LMCacheConnectorV1" in flag and "LMCACHE_CHUNK_SIZE=256" in env and "LMCACHE_MAX_LOCAL_CPU_SIZE=32" in env and "LMCACHE_MAX_LOCAL_DISK_SIZE=256" in env
    # SGLang: --hicache-size is whole GB (10^9 B) per rank: 256 GiB = 274.9 GB
    assert sglang_hicache_flags(256, 0, tp=1, device_tokens=1, host_tokens=1) == "--enable-hierarchical-cache --hicache-size 274"


# --------------------------------------------------------------------------- traces


def test_generated_trace_round_trips_and_replays():
    w = SessionWorkload(sessions_per_s=1, turns=4, think_time_s=20, shared_prefix_tokens=2048, user_tokens=300, output_tokens=300, tenants=2)
    trace = session_trace(w, 300, turn_s=6.0, seed=1)
    text = write_mooncake(trace)
    assert '"hash_ids"' in text.splitlines()[0] and '"timestamp"' in text.splitlines()[0]
    back = parse_mooncake(text)
    assert back == trace
    r = replay(back, [Tier("gpu", 512, 4_000_000)], TIMING, block_tokens=512)
    # a cache that holds everything: a trace hashes prompts only, so turn k finds the whole blocks
    # of turn k - 1's prompt (2,348, 2,948, 3,548 tokens: 4, 5, 6 blocks) and turn 1 the prefix's
    # 4: (2,048 + 2,048 + 2,560 + 3,072) / (2,348 + 2,948 + 3,548 + 4,148) = 9,728 / 12,992
    assert r.hit_rate == pytest.approx(9728 / 12992, rel=0.01)  # less: each tenant's first session misses its prefix


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("not json", "line 2"),
        ("[1, 2]", "line 2"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 1}', "line 2"),
        ('{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}', "line 2 timestamp"),
        ('{"timestamp": 1e300, "input_length": 10, "output_length": 1, "hash_ids": [1]}', "line 2 timestamp"),  # a replay's sub-ms steps vanish in its seconds
        ('{"timestamp": NaN, "input_length": 10, "output_length": 1, "hash_ids": [1]}', "line 2"),
        ('{"timestamp": 0, "input_length": true, "output_length": 1, "hash_ids": [1]}', "line 2 input_length"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 0, "hash_ids": [1]}', "line 2 output_length"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}', "line 2 hash_ids"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-1]}', "line 2 hash_ids"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1], "tenant": [1]}', "line 2 tenant"),
    ],
)
def test_malformed_lines_refused_by_number(line, field):
    good = '{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}'
    with pytest.raises(PlannerError) as exc:
        parse_mooncake(good + "\n" + line + "\n" + good)
    assert exc.value.field == field


def test_trace_bounds():
    with pytest.raises(PlannerError, match="no request"):
        parse_mooncake("\n\n")
    with pytest.raises(PlannerError, match="at most 2"):
        parse_mooncake('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n' * 3, max_rows=2)
    with pytest.raises(PlannerError, match="characters"):
        parse_mooncake('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "x": "' + "a" * (1 << 20) + '"}')


# --------------------------------------------------------------------------- the plan's cache section

from planner.plan import compute_plan, make_inputs, prepare_model  # noqa: E402
from planner.presets import load_preset  # noqa: E402

CHAT = dict(gpu="H100-SXM-80GB", system_tokens=1024, tool_tokens=1024, shared_prefix_tokens=2048, retrieval_tokens=0, history_tokens=0, user_tokens=600, output_tokens=300)


@pytest.fixture(scope="module")
def llama8b():
    return prepare_model(load_preset("llama-3.1-8b"))


def test_plan_json_contract(llama8b):
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, cpu_tier_gib=128, **CHAT), llama8b)
    cache = plan.summary()["cache"]
    assert 0 < cache["hit_rate"] < 1 and cache["ttft_saved_ms"] > 0
    assert [t["name"] for t in cache["tiers"]] == ["gpu", "cpu"]
    for t in cache["tiers"]:
        assert {"name", "capacity_tokens", "hit_rate", "load_ms_per_hit"} <= t.keys()
    gpu, cpu = cache["tiers"]
    # the CPU tier: 128 GiB / 2 MiB blocks x 16 tokens; a load moves 131,072 B a token over 53.6 GB/s
    assert cpu["capacity_tokens"] == 128 * 512 * 16
    assert gpu["load_ms_per_hit"] == 0 and cpu["load_ms_per_hit"] > 0
    assert cache["hit_rate"] == pytest.approx(gpu["hit_rate"] + cpu["hit_rate"])
    assert cache["ttft"]["mean_ms"] < cache["ttft_gpu_only"]["mean_ms"] < cache["ttft_no_cache"]["mean_ms"]
    assert cache["vllm_flags"] == ["--kv-offloading-size 128 --kv-offloading-backend native"]
    assert [p["part"] for p in cache["shareable"]] == ["shared prefix", "history", "new user message"]


def test_plan_without_workload_has_no_cache(llama8b):
    plan = compute_plan(make_inputs(**CHAT), llama8b)
    summary = plan.summary()
    assert "cache" not in summary
    assert not any(k in summary["inputs"] for k in ("sessions_per_min", "turns", "cpu_tier_gib"))
    assert plan.cache.applies is False
    with pytest.raises(PlannerError, match="sessions per minute"):
        make_inputs(turns=4, **CHAT)


def test_cache_needs_a_paged_engine(llama8b):
    plan = compute_plan(make_inputs(sessions_per_min=60, runtime="transformers", **CHAT), llama8b)
    assert plan.summary()["cache"] == {"applies": False, "reason": "a prefix cache needs a paged engine (runtime vllm with a dynamic or paged reservation, or runtime sglang)"}


def test_sglang_radix_cache_and_hicache_tiers(llama8b):
    """Runtime sglang: the GPU tier is the radix cache over SGLang's token pool (page 1), the CPU tier
    its HiCache host pool. Hand arithmetic (SGLang 0.5.23 mem_cache/pool_host/base.py): 128 GiB on one
    rank = 137.4e9 B -> --hicache-size 137 (whole GB) -> 137e9 // 131,072 B a token = 1,045,227 tokens."""
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, cpu_tier_gib=128, runtime="sglang", **CHAT), llama8b)
    cache = plan.summary()["cache"]
    gpu, cpu = cache["tiers"]
    assert gpu["unit_tokens"] == 1 and gpu["capacity_tokens"] == plan.kv_cache.sglang.capacity.max_total_num_tokens
    assert cpu["unit_tokens"] == 1 and cpu["capacity_tokens"] == 1_045_227
    assert cache["connector"] == "hicache" and cache["vllm_flags"] == []
    assert cache["sglang_flags"] == "--enable-hierarchical-cache --hicache-size 137"
    assert 0 < cache["hit_rate_gpu_only"] < cache["hit_rate"] < 1
    assert cache["ttft"]["mean_ms"] < cache["ttft_gpu_only"]["mean_ms"] < cache["ttft_no_cache"]["mean_ms"]
    # without a session workload the section says why, and a hybrid pool is refused in one line
    assert compute_plan(make_inputs(runtime="sglang", **CHAT), llama8b).cache.applies is False


def test_hicache_host_pool_below_one_gb_is_a_ratio():
    """0.5 GiB on one rank is under 1 GB: --hicache-ratio of the device pool, two decimals; 4,096
    tokens over a 414,757-token pool round to the 0.01 floor -> int(414,757 x 0.01) = 4,147 tokens."""
    from planner.cache.tiers import hicache_host_tokens

    assert hicache_host_tokens(0.5, 1, 131_072, 1, 414_757) == 4_147
    assert hicache_host_tokens(0.5, 1, 131_072, 64, 414_757) == 4_096  # whole 64-token pages
    assert sglang_hicache_flags(0.5, 0.0, tp=1, device_tokens=414_757, host_tokens=4_147) == "--enable-hierarchical-cache --hicache-ratio 0.01"


def test_a_disk_tier_alone_sets_no_hicache_ratio(llama8b):
    """--hicache-ratio sizes SGLang's host pool (host / device tokens); a disk tier alone gives no
    CPU tier, so no ratio (it printed the disk tier's 819,200 tokens over the 414,757-token device
    pool as '--hicache-ratio 1.98')."""
    assert sglang_hicache_flags(0.0, 100.0, tp=1, device_tokens=414_757, host_tokens=0) == "--enable-hierarchical-cache --hicache-storage-backend file"
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, disk_tier_gib=100, runtime="sglang", **CHAT), llama8b)
    cache = plan.summary()["cache"]
    assert [t["name"] for t in cache["tiers"]] == ["gpu", "cpu", "disk"]  # the cpu tier: SGLang's default host pool (next test)
    assert cache["sglang_flags"] == "--enable-hierarchical-cache --hicache-storage-backend file"


def test_not_modelled_loses_offload_with_a_tier(llama8b):
    from planner.explain import explain

    def missing(**values):
        return {n.title for n in explain(compute_plan(make_inputs(**CHAT, **values), llama8b)).not_modelled}

    assert {"Offload", "Prefix-cache eviction"} <= missing()
    assert "Prefix-cache eviction" not in missing(sessions_per_min=60) and "Offload" in missing(sessions_per_min=60)
    assert not {"Offload", "Prefix-cache eviction"} & missing(sessions_per_min=60, cpu_tier_gib=64)


def test_sweep_rises_with_the_tier(llama8b):
    from planner.cache.section import cpu_tier_sweep

    plan = compute_plan(make_inputs(sessions_per_min=120, turns=8, think_time_s=120, **{**CHAT, "user_tokens": 800}), llama8b)
    points = cpu_tier_sweep(plan)
    rates = [p.hit_rate for p in points]
    # never falls as the tier grows (a plateau may wobble in the last bit: 1e-12)
    assert points[0].cpu_tier_gib == 0 and all(b >= a - 1e-12 for a, b in zip(rates, rates[1:], strict=False)) and rates[-1] > rates[0] + 0.3
    assert points[-1].ttft_p95_ms < points[0].ttft_p95_ms
    assert points[0].hit_rate == pytest.approx(plan.cache.hit_rate)


def test_size_may_take_a_cpu_tier_over_gpus(llama8b):
    from planner.sizing import size

    base = dict(sessions_per_min=600, turns=8, think_time_s=300, shared_prefix_tokens=2048, system_tokens=1024, tool_tokens=1024, retrieval_tokens=0, history_tokens=0, user_tokens=1500, output_tokens=300, input_tokens=2048 + 7 * 1800 + 1500)
    r = size(llama8b, base, ttft_p95_ms=300, itl_p95_ms=200, gpus=["H100-SXM-80GB"], kv_dtypes=("bf16",), tps=(2,))
    best = r.recommendations[0]
    without = min((x for x in r.recommendations if x.cpu_tier_gib is None), key=lambda x: x.cost_per_hour)
    assert r.searched["workload"]["rate_per_s"] == pytest.approx(80.0)  # 600 / 60 x 8 turns
    assert best.cpu_tier_gib and best.gpu_count < without.gpu_count and best.cost_per_hour < without.cost_per_hour
    assert best.tier_cost_per_hour == pytest.approx(best.replicas * best.cpu_tier_gib * 0.004237)
    assert "CPU tier" in r.answer


# --------------------------------------------------------------------------- the simulator on a plan, traces through its tiers


def test_simulate_plan_agrees_with_the_plans_model(llama8b):
    from planner.cache.runs import sim_lines, simulate_plan

    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, cpu_tier_gib=128, sequences=16, **CHAT), llama8b)
    r = simulate_plan(plan, 2500, seed=1)
    assert r.sessions == 2000 and r.requests == 2000 * 6  # the first fifth warm the caches, uncounted
    assert r.hit_rate == pytest.approx(plan.cache.hit_rate, rel=0.10)  # the bound on hit rate
    assert [t.name for t in r.tiers] == ["gpu", "cpu"] and r.tiers[1].requests_loading > 0
    assert "cache sim" in sim_lines(r)[0] and "CPU DRAM" in sim_lines(r)[0]
    with pytest.raises(PlannerError, match="100,000 requests"):
        simulate_plan(plan, 20_000)  # x 6 turns


def test_tiers_stand_without_a_workload(llama8b):
    from planner.engines.vllm import vllm_preview
    from planner.explain import summary_lines

    plan = compute_plan(make_inputs(cpu_tier_gib=128, **CHAT), llama8b)
    assert "cache" not in plan.summary()  # no session workload: the plan's numbers are as without the tier
    assert plan.summary()["capacity"] == compute_plan(make_inputs(**CHAT), llama8b).summary()["capacity"]
    assert vllm_preview(plan, llama8b).command.endswith("--kv-offloading-size 128 --kv-offloading-backend native")
    assert summary_lines(plan)[-1].startswith("cache        not modelled: no session workload")
    tiny = compute_plan(make_inputs(sessions_per_min=5, cpu_tier_gib=0.0001, **CHAT), llama8b)
    # 0.0001 GiB = 107,374 B, below one 16-token block of 8B (16 x 131,072 B): one line, no crash
    assert tiny.summary()["cache"] == {"applies": False, "reason": "cpu_tier_gib=0.0001: too small to hold one 16-token chunk of this model"}


def _trace_line(t_ms, ids, tenant, tokens=None):
    import json

    return json.dumps({"timestamp": t_ms, "input_length": tokens or 512 * len(ids) + 1, "output_length": 4, "hash_ids": ids, "tenant": tenant})


def test_replay_plan_through_a_cpu_tier_by_hand(llama8b):
    from planner.cache.runs import replay_plan, trace_setup

    plan = compute_plan(make_inputs(cpu_tier_gib=128, **CHAT), llama8b)
    tiers, _, replicas, _ = trace_setup(plan)
    assert [t.name for t in tiers] == ["gpu", "cpu"] and replicas == 1
    # tenant a sends blocks 1-4 twice, tenant b the same ids once: b finds nothing (keys carry the
    # tenant); a's second request finds its 4 blocks: 2,048 of 3 x 2,049 prompt tokens
    text = "\n".join([_trace_line(0, [1, 2, 3, 4], "a"), _trace_line(1000, [1, 2, 3, 4], "b"), _trace_line(2000, [1, 2, 3, 4], "a")])
    r = replay_plan(plan, parse_mooncake(text))
    assert r.requests == 3 and r.sessions == 2
    assert r.hit_rate == pytest.approx(2048 / (3 * 2049))
    assert r.tiers[0].tokens_served == 2048  # held by the GPU pool: nothing loads from the CPU


def test_a_trace_is_timed_at_its_own_arrival_rate(llama8b):
    """Issue 26 leftover: a trace's turns were timed at the plan's load (its sequences), not at the
    trace's. 3 requests at 0, 1,000 and 2,000 ms arrive at 2 gaps / 2 s = 1 request/s: the replay's
    ITL is the plan's own open loop at request_rate 1 (the same plan with that input); a trace
    whose timestamps are all one is timed at the plan's load and says so."""
    from planner.cache.runs import replay_plan, sim_lines, trace_rate, trace_setup

    plan = compute_plan(make_inputs(cpu_tier_gib=128, sequences=64, **CHAT), llama8b)
    spread = parse_mooncake("\n".join(_trace_line(t, [1, 2], "a") for t in (0, 1000, 2000)))
    assert trace_rate(spread) == (1.0, 2.0)
    _, timing, _, timed_at = trace_setup(plan, spread)
    at_rate = compute_plan(make_inputs(cpu_tier_gib=128, sequences=64, request_rate=1.0, **CHAT), llama8b).estimate
    assert timing.itl_s == pytest.approx(at_rate.mean_inter_token_latency_ms / 1e3, rel=1e-12)
    assert timing.itl_s < plan.estimate.mean_inter_token_latency_ms / 1e3  # 1 request/s is lighter than 64 clients
    assert timed_at.startswith("the trace's own arrival rate, 1 requests/s over 2 s")
    r = replay_plan(plan, spread)
    assert r.timed_at == timed_at and any(line.strip() == f"timed at {timed_at}" for line in sim_lines(r))
    still = parse_mooncake("\n".join(_trace_line(0, [1, 2], "a") for _ in range(3)))
    _, timing, _, timed_at = trace_setup(plan, still)
    assert trace_rate(still) is None and timing.itl_s == pytest.approx(plan.estimate.mean_inter_token_latency_ms / 1e3)
    assert timed_at.startswith("the plan's load (") and timed_at.endswith("the trace's timestamps span no time")
    # 3 requests 1 ms apart: 1,000 requests/s is more than one H100 serves; the line says so (it
    # read as a plain rate at the engine's 1,024 in flight). The open loop stops at what the K/V pool
    # runs at once, the plan's memory limit here (481 with the shared prefix held once: more than the
    # 57,832,407,991 B pool / 366,739,456 B a sequence at the mean context = 157 without sharing)
    burst = parse_mooncake("\n".join(_trace_line(t, [1, 2], "a") for t in (0, 0.5, 1)))
    _, timing, _, timed_at = trace_setup(plan, burst)
    assert plan._admission.limits["memory"] == 481
    assert timed_at.startswith("the trace's own arrival rate, 2,000 requests/s over 0.001 s (481 in flight a replica")
    assert timed_at.endswith("; not sustainable on the plan's 1 replica(s): timed at the engine's limit, further requests queue")
    assert "not sustainable" not in trace_setup(plan, spread)[3]
    # under attention data parallelism the open loop's count is a rank's (the rate is split over replicas x dp)
    dp2 = compute_plan(make_inputs(cpu_tier_gib=64, dp=2, ep=2, gpu_count=2, **CHAT), prepare_model(load_preset("qwen3-30b-a3b")))
    assert dp2._admission.limits["memory"] == 922 and "(461 in flight a rank, 2 ranks a replica, the plan's context lengths)" in trace_setup(dp2, burst)[3]


def test_replay_stops_at_its_time_budget(llama8b):
    from planner.cache.runs import replay_plan

    plan = compute_plan(make_inputs(**CHAT), llama8b)
    text = "\n".join(_trace_line(k, [k], "t") for k in range(3000))
    r = replay_plan(plan, parse_mooncake(text), time_budget_s=1e-9)
    assert r.requests == 1 and "time budget" in r.stopped_early  # checked after every request


def test_trace_bytes_refused_in_one_line():
    from planner.simulate.workload import trace_text

    with pytest.raises(PlannerError, match="larger than 8 MiB"):
        trace_text(b"{" * (8 * 2**20 + 1), "big.jsonl", kind="JSONL")
    with pytest.raises(PlannerError, match="not UTF-8"):
        trace_text(b"\xff\xfe", "bad.jsonl", kind="JSONL")
    with pytest.raises(PlannerError, match="binary data, not JSONL"):
        trace_text(b'{"a": 1}\x00', "nul.jsonl", kind="JSONL")


def test_cli_simulate_replays_a_mooncake_trace(tmp_path, capsys):
    from planner.cli import main

    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join([_trace_line(0, [1, 2, 3, 4], "a"), _trace_line(1000, [1, 2, 3, 4], "a")]) + "\n")
    assert main(["simulate", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--trace", str(path), "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)["cache_simulation"]
    assert out["requests"] == 2 and out["hit_rate"] == pytest.approx(2048 / (2 * 2049))
    path.write_text(_trace_line(0, [1], "a") + "\n" + '{"timestamp": 1, "input_length": 10}\n')
    assert main(["simulate", "--preset", "llama-3.1-8b", "--trace", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: line 2=") and "missing output_length, hash_ids" in err[0]


def test_pdf_shows_hit_rate_and_ttft_with_and_without_the_tier(tmp_path):
    import re
    import subprocess

    from planner.cache.explain import ttft_rows
    from planner.report import build_pdf
    from planner.source import preset_ref

    ref, model = preset_ref("llama-3.1-8b")
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, cpu_tier_gib=128, **CHAT), model)
    path = tmp_path / "cache.pdf"
    path.write_bytes(build_pdf(plan, ref, None))
    text = re.sub(r"[ \t]+", " ", subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True, timeout=60).stdout)
    assert "Prefix cache under sessions" in text
    rows = ttft_rows(plan)  # the same cells the page and the PDF show
    assert [r[0] for r in rows[1:]] == ["GPU pool + CPU DRAM", "GPU pool alone", "no prefix cache"]
    for row in rows[1:]:
        assert f"{row[0]} {row[1]} {row[2]} {row[3]}" in text
    assert "shared prefix: 2,048 tokens: shared by the sessions of one tenant, never across tenants" in text  # what is shareable, and with whom


def test_cli_plan_contract_and_size_recommends_a_tier(capsys):
    """The issue's scriptable contract, through the flags the controls give every PlanInputs field."""
    import json

    from planner.cli import main

    chat = ["--system-tokens", "1024", "--tool-tokens", "1024", "--retrieval-tokens", "0", "--history-tokens", "0", "--user-tokens", "600", "--output-tokens", "300", "--gpu", "H100-SXM-80GB"]
    flags = ["--turns", "6", "--think-time-s", "120", "--sessions-per-min", "60", "--shared-prefix-tokens", "2048", "--cpu-tier-gib", "128"]
    assert main(["plan", "--preset", "llama-3.1-8b", *chat, *flags, "--json"]) == 0
    cache = json.loads(capsys.readouterr().out)["cache"]
    assert [t["name"] for t in cache["tiers"]] == ["gpu", "cpu"] and cache["tiers"][1]["capacity_tokens"] == 128 * 512 * 16
    assert 0 < cache["hit_rate"] < 1 and cache["ttft_saved_ms"] > 0
    assert main(["plan", "--preset", "llama-3.1-8b", *chat, "--json"]) == 0
    assert "cache" not in json.loads(capsys.readouterr().out)  # without the workload flags the plan is as today
    size = ["--sessions-per-min", "600", "--turns", "8", "--think-time-s", "300", "--shared-prefix-tokens", "2048", "--system-tokens", "1024", "--tool-tokens", "1024", "--retrieval-tokens", "0",
            "--history-tokens", "0", "--user-tokens", "1500", "--output-tokens", "300", "--input-tokens", str(2048 + 7 * 1800 + 1500), "--ttft-p95-ms", "300", "--itl-p95-ms", "200",
            "--gpus", "H100-SXM-80GB", "--kv-dtypes", "bf16", "--tps", "2", "--json"]  # fmt: skip
    assert main(["size", "--preset", "llama-3.1-8b", *size]) == 0
    best = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert best["cpu_tier_gib"] == 512 and best["cache_hit_rate"] > 0.5  # fewer GPUs plus a CPU tier is the cheaper answer


def test_share_link_round_trips_the_workload_and_drops_orphan_details():
    from planner.share import decode_query, encode_query
    from planner.source import preset_ref

    ref, _ = preset_ref("llama-3.1-8b")
    inputs = make_inputs(sessions_per_min=60, turns=6, think_time_s=120, cpu_tier_gib=128, disk_tier_gib=1024, doc_catalog=400, **CHAT)
    query = encode_query(ref, inputs)
    assert {k: query[k] for k in ("spm", "turns", "think", "cpu", "disk", "docs")} == {"spm": "60", "turns": "6", "think": "120", "cpu": "128", "disk": "1024", "docs": "400"}
    back = decode_query(query)
    assert back.inputs == inputs and not back.warnings
    # a tampered link: turns without a rate is dropped with a warning; the rest of the plan stays
    tampered = decode_query({**query, "spm": "-1", "cpu": "1e400"})
    assert tampered.inputs.sessions_per_min is None and tampered.inputs.turns is None and tampered.inputs.cpu_tier_gib is None
    assert tampered.inputs.shared_prefix_tokens == 2048 and tampered.inputs.disk_tier_gib == 1024  # the tiers stand alone
    assert "turns (turns) 6 describes a session workload: give the sessions per minute too; using the default (none: not set)" in tampered.warnings


def test_sessions_longer_than_the_context_are_not_modelled(llama8b):
    # 200 turns of 512 + 512 tokens: turn 200's prompt is the 2,048-token shared prefix + 199 x 1,024
    # of history + 512 = 206,336, with its 512-token answer 206,848 > llama-3.1-8b's 131,072:
    # vLLM refuses such a request
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=200, cpu_tier_gib=512, **{**CHAT, "user_tokens": 512, "output_tokens": 512}), llama8b)
    assert plan.summary()["cache"] == {"applies": False, "reason": "turn 200's prompt and answer are 206,848 tokens, more than the 131,072-token maximum context: fewer turns or shorter messages"}


def test_a_vanishing_session_rate_is_refused_in_one_line():
    # found by the link fuzzer (spm=5e-324): 5e-324 sessions a minute / 60 underflows to 0 sessions
    # a second, which the session model refused with a pydantic traceback; the input's floor is
    # 0.001 a minute (1.4 sessions a day)
    from planner.errors import PlannerError
    from planner.plan import make_inputs
    from planner.share import decode_query

    with pytest.raises(PlannerError) as err:
        make_inputs(sessions_per_min=5e-324)
    assert str(err.value).startswith("sessions_per_min=5e-324") and "0.001" in str(err.value) and "\n" not in str(err.value)
    assert make_inputs(sessions_per_min=0.001).sessions_per_min == 0.001
    decoded = decode_query({"spm": "5e-324"})  # a link: the value is dropped with a note, the plan has no session workload
    assert decoded.inputs.sessions_per_min is None
    assert any(n.key == "sessions_per_min (spm)" and "must be >= 0.001" in n.why for n in decoded.notes)


def test_sglang_disk_tier_alone_keeps_sglangs_default_host_pool(llama8b):
    """A disk tier alone under runtime sglang: SGLang still keeps a host pool between the GPU and the
    file backend, at --hicache-ratio's default 2.0 in cache mode (SGLang 0.5.23
    arg_groups/fields/memory.py), so the model has it and prices it: 2 x 414,757 = 829,514 tokens
    x 131,072 B = 101.26 GiB a replica; the flags set no ratio (the default holds)."""
    plan = compute_plan(make_inputs(sessions_per_min=60, turns=6, think_time_s=120, disk_tier_gib=100, runtime="sglang", **CHAT), llama8b)
    cache = plan.summary()["cache"]
    gpu, cpu, disk = cache["tiers"]
    assert gpu["capacity_tokens"] == 414_757 == plan.kv_cache.sglang.capacity.max_total_num_tokens
    assert cpu["capacity_tokens"] == 829_514 and cpu["capacity_gib"] == pytest.approx(829_514 * 131_072 / 2**30)
    assert cpu["cost_per_hour"] == pytest.approx(829_514 * 131_072 / 2**30 * 0.004237) and "--hicache-ratio 2.0" in cpu["price_source"]
    assert disk["capacity_tokens"] == 100 * 2**30 // 131_072
    assert cache["sglang_flags"] == "--enable-hierarchical-cache --hicache-storage-backend file"
