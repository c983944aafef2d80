"""planner.simulate: the serving simulator (continuous batching over a paged KV pool).

Most scenarios use a *fixed* step time D = 10 ms (weights 1 GB over 100 GB/s, no K/V bytes, no
FLOPs), so TTFT, ITL and end-to-end times are exact multiples of D that can be worked out by hand.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import simulate as sim
from planner.errors import PlannerError
from planner.simulate import (
    BlockAllocator,
    Cancellation,
    DoubleFreeError,
    Request,
    SimConfig,
    SimulationInvariantError,
    StepCost,
    build,
    compare_batching,
    compare_policies,
    compare_reservation,
    parse_trace_csv,
    percentiles,
    poisson_requests,
    simulate,
    weighted_percentiles,
)

D = 0.01  # seconds per step under FIXED
FIXED = StepCost(weights_bytes=1e9, kv_bytes_per_token=0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=0, peak_flops=1e15, mfu=1.0)

# Memory time 10 ms + 1e-9 s per cached token read; compute 1e-5 s per new token (an 8,000-token
# prefill = 80 ms, a 512-token chunk = 5.1 ms, i.e. still memory-bound).
ROOF = StepCost(weights_bytes=1e9, kv_bytes_per_token=100.0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=1e9, peak_flops=1e14, mfu=1.0, attn_flops_per_token_ctx=10.0)


def req(i: int, t: float, p: int, o: int) -> Request:
    return Request(id=i, arrival_s=t, prompt_tokens=p, output_tokens=o)


def assert_clean(r: sim.SimResult) -> None:
    """Every block and lease went back exactly once."""
    assert r.blocks_in_use_at_end == 0
    assert r.leases_opened == r.leases_released
    assert r.blocks_allocated == r.blocks_freed


# ---------------------------------------------------------------------------------------------
# Step cost and the allocator
# ---------------------------------------------------------------------------------------------


def test_step_cost_roofline():
    # memory: (1e9 + 100 * 1000) / 1e11 = 10.001 ms; compute: (1e9 * 10 + 10 * 0) / 1e14 = 0.1 ms
    assert ROOF.step_time_s(10, 1000) == pytest.approx(0.010001)
    # compute-bound: 8000 new tokens -> 8e12 / 1e14 = 80 ms (+ attention 10 * 1e6 / 1e14, negligible)
    assert ROOF.step_time_s(8000, 8000, 1_000_000) == pytest.approx(0.08 + 1e-7)
    assert FIXED.step_time_s(123, 456, 789) == pytest.approx(D)
    with_overhead = FIXED.model_copy(update={"overhead_s": 0.002})
    assert with_overhead.step_time_s(1, 1) == pytest.approx(0.012)


def test_allocator_leases_and_double_free():
    a = BlockAllocator(4)
    x = a.open()
    y = a.open()
    a.allocate(x, 3)
    assert (a.free_count, a.in_use, a.held(x)) == (1, 3, 3)
    with pytest.raises(sim.OutOfBlocksError):
        a.allocate(y, 2)  # only one block left
    a.allocate(y, 1)
    assert a.release(x) == 3
    assert a.free_count == 3
    with pytest.raises(DoubleFreeError):
        a.release(x)  # second release of the same lease
    assert a.release(y) == 1
    assert (a.opened, a.released, a.allocated, a.freed, a.in_use) == (2, 2, 4, 4, 0)


def test_invariant_checker_catches_a_leaking_allocator(monkeypatch):
    # A mutant allocator that hands out one extra block per growth allocation (a decode step's
    # new blocks): the per-step check must notice that a lease holds more blocks than its tokens need.
    class Leaky(BlockAllocator):
        def allocate_each(self, leases):
            super().allocate_each(leases)
            if self.free_count:
                self.allocate(leases[0], 1)

    monkeypatch.setattr(sim.block_pool, "BlockAllocator", Leaky)
    with pytest.raises(SimulationInvariantError):
        simulate([req(0, 0.0, 16, 20)], SimConfig(total_blocks=64), FIXED, check_invariants=True)


# ---------------------------------------------------------------------------------------------
# Hand-computed scenarios
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", sim.POLICIES)
def test_single_request_exact_times(policy):
    # P=32, O=4, fixed step D. Step 1 prefills 32 tokens (< chunk 512) and emits token 1 at D;
    # steps 2-4 decode tokens 2-4. TTFT = D, e2e = 4D, 3 ITL samples of D each.
    # Blocks (16 tokens): 2 for the prompt; step 2 caches token 33 -> a third block; final cache
    # 32 + 3 = 35 tokens -> 3 blocks.
    r = simulate([req(0, 0.0, 32, 4)], SimConfig(total_blocks=8, policy=policy), FIXED, check_invariants=True, record_requests=True)
    assert r.requests_completed == 1
    assert r.ttft_ms.p50 == pytest.approx(1 * D * 1e3)
    assert r.e2e_ms.p50 == pytest.approx(4 * D * 1e3)
    assert r.itl_ms.count == 3
    assert r.itl_ms.min == pytest.approx(D * 1e3) and r.itl_ms.max == pytest.approx(D * 1e3)
    assert r.step_count == 4
    assert r.blocks_allocated == 3 and r.peak_blocks_in_use == 3
    assert r.output_tokens == 4 and r.prefill_tokens == 32
    assert r.throughput_tokens_per_s == pytest.approx(4 / (4 * D))
    assert r.per_request[0].tpot_ms == pytest.approx(D * 1e3)
    assert_clean(r)


def test_chunked_single_request_exact_times():
    # P=40, chunk 16: steps 1-3 prefill 16, 16, 8 tokens; token 1 at 3D, token 2 at 4D.
    # 40 tokens -> 3 blocks; the decode caches token 41 inside block 3 (40 % 16 = 8), no new block.
    cfg = SimConfig(total_blocks=8, policy="chunked", chunk_tokens=16)
    r = simulate([req(0, 0.0, 40, 2)], cfg, FIXED, check_invariants=True)
    assert r.ttft_ms.p50 == pytest.approx(3 * D * 1e3)
    assert r.e2e_ms.p50 == pytest.approx(4 * D * 1e3)
    assert r.step_count == 4 and r.blocks_allocated == 3
    assert_clean(r)


def test_goodput_counts_requests_meeting_both_slos():
    # The single request of the exact scenario: TTFT = 10 ms, mean ITL (TPOT) = 10 ms, e2e 40 ms.
    one = [req(0, 0.0, 32, 4)]
    for ttft_slo, itl_slo, good in [(None, None, 1.0), (15.0, 15.0, 1.0), (5.0, 15.0, 0.0), (15.0, 5.0, 0.0)]:
        r = simulate(one, SimConfig(total_blocks=8, ttft_slo_ms=ttft_slo, itl_slo_ms=itl_slo), FIXED)
        assert r.goodput_fraction == good
        assert r.goodput_requests_per_s == pytest.approx(good / (4 * D))


def test_kv_utilisation_is_downsampled_keeping_the_peak():
    reqs = poisson_requests(20, 300, (64, 512), (16, 128), seed=5)
    r = simulate(reqs, SimConfig(total_blocks=800), ROOF)
    assert r.step_count > 500
    assert len(r.kv_utilisation) == 500
    assert max(u for _, u in r.kv_utilisation) == r.peak_kv_utilisation == r.peak_blocks_in_use / 800
    ts = [t for t, _ in r.kv_utilisation]
    assert ts == sorted(ts) and ts[-1] == pytest.approx(reqs[0].arrival_s + r.makespan_s)  # the last bucket ends at the last step


@pytest.mark.parametrize(
    ("kv_bytes", "attn", "policy", "steps", "ttft_s", "decode_s"),
    [
        # Attention-bound: prefilling P=1000 from scratch makes sum_{j=1..1000} j = 500,500
        # (new, context) pairs x 1e6 FLOPs / 1e14 = 5.005 ms, in one step or in chunks of
        # 400, 400, 200 (80,200 + 240,200 + 180,100 pairs); K/V reads (1 kB/token at 1 GB/s,
        # <= 1 ms) are hidden. The decode reads 1,001 tokens = 1.001 ms > 1,001 pairs x 1e-8 s.
        (1e3, 1e6, "fifo", 2, 5.005e-3, 1.001e-3),
        (1e3, 1e6, "chunked", 4, 5.005e-3, 1.001e-3),
        # K/V-read-bound (1 MB/token): one prefill step reads 1,000 tokens = 1 s; chunks re-read
        # the earlier chunks: 400 + 800 + 1,000 tokens = 2.2 s. Decode reads 1,001 tokens.
        (1e6, 0.0, "fifo", 2, 1.0, 1.001),
        (1e6, 0.0, "chunked", 4, 2.2, 1.001),
        # Decode attention-bound: 1,001 pairs x 1e9 / 1e14 = 10.01 ms (prefill: 5.005 s).
        (0.0, 1e9, "fifo", 2, 5.005, 10.01e-3),
    ],
)
def test_step_time_charges_attention_and_kv_reads(kv_bytes, attn, policy, steps, ttft_s, decode_s):
    cost = StepCost(weights_bytes=0, kv_bytes_per_token=kv_bytes, bandwidth_bytes_per_s=1e9, mbu=1.0, flops_per_token=0, attn_flops_per_token_ctx=attn, peak_flops=1e14, mfu=1.0)
    r = simulate([req(0, 0.0, 1000, 2)], SimConfig(total_blocks=100, policy=policy, chunk_tokens=400), cost)
    assert r.step_count == steps
    assert r.ttft_ms.p50 == pytest.approx(ttft_s * 1e3)
    assert r.e2e_ms.p50 == pytest.approx((ttft_s + decode_s) * 1e3)


def test_late_arrival_jumps_the_clock():
    # Idle until t = 5 s: TTFT is measured from arrival, so it is still D.
    r = simulate([req(0, 5.0, 8, 2)], SimConfig(total_blocks=4), FIXED)
    assert r.ttft_ms.p50 == pytest.approx(D * 1e3)
    assert r.makespan_s == pytest.approx(2 * D)


def test_preemption_newest_first_and_recompute():
    # Block = 4 tokens, pool = 4 blocks. A and B (P=4, O=8) both arrive at 0, each needs
    # ceil((4 + 8 - 1) / 4) = 3 blocks at the end, 6 together > 4.
    # Step 1 prefills both (1 block each), tokens 1 at D. Step 2: both caches are 4 = a block
    # boundary -> 1 block each (pool full). Steps 3-5: caches 5..7 -> 8, no new block.
    # Step 6: both at 8 again need a block, none is free -> preempt the newest (B, holding 2).
    # B has 5 tokens (D..5D); its recompute prefill is 4 + 5 = 9 tokens and needs 3 blocks, which
    # only fit after A finishes at step 8 (A: token 1 at D, tokens 2..8 at 2D..8D).
    # Step 9 re-prefills B (token 6 at 9D), steps 10-11 decode tokens 7, 8 -> B done at 11D.
    cfg = SimConfig(block_tokens=4, total_blocks=4)
    r = simulate([req(0, 0.0, 4, 8), req(1, 0.0, 4, 8)], cfg, FIXED, check_invariants=True, record_requests=True)
    a, b = r.per_request
    assert r.preemptions == 1 and (a.preemptions, b.preemptions) == (0, 1)
    assert a.e2e_ms == pytest.approx(8 * D * 1e3)
    assert b.e2e_ms == pytest.approx(11 * D * 1e3)
    assert r.prefill_tokens == 4 + 4 + 9
    assert r.prefill_tokens_wasted == 8  # B's 8 cached tokens were thrown away
    assert r.itl_ms.max == pytest.approx(4 * D * 1e3)  # B: token 5 at 5D, token 6 at 9D
    assert r.output_tokens == 16
    assert_clean(r)


def test_pool_too_small_forces_preemptions_and_still_completes():
    # 8 requests x ceil((32 + 64 - 1) / 16) = 6 blocks = 48 blocks wanted, 16 in the pool.
    reqs = [req(i, 0.0, 32, 64) for i in range(8)]
    r = simulate(reqs, SimConfig(total_blocks=16), ROOF, check_invariants=True)
    assert r.requests_completed == 8
    assert r.preemptions > 0
    assert r.prefill_tokens > 8 * 32  # recomputation happened
    assert r.peak_blocks_in_use <= 16
    assert_clean(r)


def test_requests_that_can_never_run_are_rejected():
    reqs = [req(0, 0.0, 100, 10), req(1, 0.0, 9000, 10), req(2, 0.0, 10, 200)]
    # pool 8 blocks x 16 = 128 tokens: request 2 needs ceil(209 / 16) = 14 blocks -> rejected;
    # request 1's prompt exceeds the 8,192-token step budget -> rejected unless chunked... and
    # chunked it still needs 564 blocks -> rejected too.
    r = simulate(reqs, SimConfig(total_blocks=8), FIXED, record_requests=True)
    assert [x.outcome for x in r.per_request] == ["done", "rejected", "rejected"]
    assert r.requests_rejected == 2
    big = SimConfig(total_blocks=1000, max_num_batched_tokens=8192)
    assert simulate([req(1, 0.0, 9000, 10)], big, FIXED).requests_rejected == 1
    r2 = simulate([req(1, 0.0, 9000, 10)], big.model_copy(update={"policy": "chunked"}), FIXED, check_invariants=True)
    assert r2.requests_completed == 1  # chunks of 512 make it schedulable


# ---------------------------------------------------------------------------------------------
# Cancellation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "generated", "prefilled", "ttft_count"),
    [
        ("admission", 0, 64, 0),  # leased then cancelled before compute: only request 1 prefills
        ("mid-prefill", 0, 64 + 48, 0),  # first chunk (48 of 96, chunk=48) computed, then cancelled
        ("first-token", 1, 64 + 96, 1),
        ("decode", 5, 64 + 96, 1),  # after_tokens=5
    ],
)
def test_cancellation_returns_blocks_exactly_once(stage, generated, prefilled, ttft_count):
    # Request 0 (P=96, O=20) is cancelled at `stage`; request 1 (P=64, O=20) runs alongside and
    # must complete normally. The allocator raises on a second release, and every lease opened
    # must be released: leases_opened == leases_released and blocks in use end at zero.
    cancels = (Cancellation(request_id=0, stage=stage, after_tokens=5 if stage == "decode" else None),)
    cfg = SimConfig(total_blocks=32, policy="chunked", chunk_tokens=48, cancellations=cancels)
    r = simulate([req(0, 0.0, 96, 20), req(1, 0.0, 64, 20)], cfg, FIXED, check_invariants=True, record_requests=True)
    c, ok = r.per_request
    assert c.outcome == "cancelled" and ok.outcome == "done"
    assert c.tokens_generated == generated
    assert r.prefill_tokens == prefilled
    assert r.requests_cancelled == 1 and r.requests_completed == 1
    assert r.ttft_ms.count == ttft_count + 1
    assert_clean(r)
    # request 0's lease (and request 1's) were opened once each and released once each
    assert r.leases_opened == 2


def test_cancellation_mid_prefill_whole_prompt_releases_before_first_token():
    # FIFO prefills the whole prompt in one step; a mid-prefill cancel discards it (no token).
    cfg = SimConfig(total_blocks=16, cancellations=(Cancellation(request_id=7, stage="mid-prefill"),))
    r = simulate([req(7, 0.0, 100, 10)], cfg, FIXED, check_invariants=True)
    assert r.requests_cancelled == 1 and r.output_tokens == 0 and r.ttft_ms.count == 0
    assert r.prefill_tokens_wasted == 100
    assert r.kv_utilisation[-1][1] == 0.0  # the pool is back to empty right after that step
    assert_clean(r)


def test_decode_cancel_after_the_end_completes_normally():
    cfg = SimConfig(total_blocks=16, cancellations=(Cancellation(request_id=0, stage="decode", after_tokens=50),))
    r = simulate([req(0, 0.0, 10, 10)], cfg, FIXED)
    assert r.requests_completed == 1 and r.requests_cancelled == 0


def test_unknown_cancellation_id_is_refused():
    cfg = SimConfig(total_blocks=16, cancellations=(Cancellation(request_id=99, stage="decode"),))
    with pytest.raises(PlannerError, match="cancellations"):
        simulate([req(0, 0.0, 10, 10)], cfg, FIXED)


def test_random_cancellations_are_seeded():
    reqs = poisson_requests(50, 200, (16, 256), (2, 64), seed=3)
    cfg = SimConfig(total_blocks=400, cancel_rate=0.3, seed=1)
    a = simulate(reqs, cfg, ROOF, check_invariants=True)
    b = simulate(reqs, cfg, ROOF)
    c = simulate(reqs, cfg.model_copy(update={"seed": 2}), ROOF)
    assert a == b
    assert a.requests_cancelled != c.requests_cancelled or a.ttft_ms != c.ttft_ms
    # 30% of 200 draw a stage; 'decode' cancels of outputs shorter than the cut still complete,
    # so somewhat fewer than 60 end cancelled, and well above zero.
    assert 30 <= a.requests_cancelled <= 75
    assert_clean(a)


# ---------------------------------------------------------------------------------------------
# Prefix caching, reservation, batching, policies
# ---------------------------------------------------------------------------------------------


def test_prefix_cache_hits_skip_prefill_and_share_blocks():
    # 64-token prefix = 4 full blocks. Request 0 (t=0) owns it and runs 50 tokens; requests 1-5
    # arrive while it is resident and computed -> hits: each prefills only 100 - 64 = 36 tokens.
    reqs = [req(0, 0.0, 100, 50)] + [req(i, 0.05 * i, 100, 5) for i in range(1, 6)]
    cfg = SimConfig(total_blocks=64, prefix_tokens=64, prefix_share=1.0)
    r = simulate(reqs, cfg, FIXED, check_invariants=True)
    assert r.prefix_hits == 5
    assert r.prefill_tokens == 100 + 5 * 36
    no_prefix = simulate(reqs, cfg.model_copy(update={"prefix_share": 0.0}), FIXED)
    assert no_prefix.prefix_hits == 0 and no_prefix.prefill_tokens == 600
    assert r.peak_blocks_in_use < no_prefix.peak_blocks_in_use  # the prefix blocks are held once
    assert_clean(r)


# prefill-first runs one step of at most chunk_tokens prefill in all, so request 1 cannot be admitted
# beside request 0 in its first step: the scenario below needs two prompts admitted in one step
@pytest.mark.parametrize("policy", [p for p in sim.POLICIES if p != "prefill-first"])
def test_prefix_is_not_shared_before_it_is_computed(policy):
    # Requests 0 and 1 arrive together: 0 leases the prefix blocks and computes them; 1 is
    # admitted in the same step, before they are computed, so it prefills all 100 tokens itself
    # (a miss). Request 2 arrives at 0.2 s while 0 (50 tokens, to 50D = 0.5 s) still holds the
    # computed prefix: a hit, 36 tokens. Total 100 + 100 + 36 = 236.
    reqs = [req(0, 0.0, 100, 50), req(1, 0.0, 100, 5), req(2, 0.2, 100, 5)]
    cfg = SimConfig(total_blocks=64, prefix_tokens=64, prefix_share=1.0, policy=policy, chunk_tokens=32)
    r = simulate(reqs, cfg, FIXED, check_invariants=True)
    assert r.prefix_hits == 1
    assert r.prefill_tokens == 236
    assert_clean(r)


def test_static_reservation_holds_more_and_admits_less():
    # Static reservation leases ceil(static_tokens / 16) blocks per request up front: with a
    # 64-block pool and static_tokens = 512 (32 blocks) only 2 requests fit at once, while
    # dynamic growth fits all 8 short ones (each needs ceil((64 + 32 - 1) / 16) = 6 blocks).
    reqs = [req(i, 0.0, 64, 32) for i in range(8)]
    cfg = SimConfig(total_blocks=64, static_tokens=512)
    out = compare_reservation(reqs, cfg, FIXED)
    dyn, sta = out["dynamic"], out["static"]
    assert dyn.requests_completed == sta.requests_completed == 8
    assert sta.peak_blocks_in_use == 64 and dyn.peak_blocks_in_use == 8 * 6
    assert dyn.e2e_ms.mean < sta.e2e_ms.mean
    assert sta.preemptions == 0  # nothing grows, so nothing is preempted
    assert_clean(sta)
    with pytest.raises(PlannerError, match="static_tokens"):
        simulate(reqs, cfg.model_copy(update={"reservation": "static", "static_tokens": 4096}), FIXED)


def test_continuous_beats_static_batching():
    # Mixed output lengths: static batching keeps finished slots idle until the longest member
    # ends and makes new arrivals wait for the whole batch.
    reqs = poisson_requests(40, 300, (32, 512), (4, 256), seed=11)
    cfg = SimConfig(total_blocks=4000, max_num_seqs=32)
    out = compare_batching(reqs, cfg, ROOF)
    cont, stat = out["continuous"], out["static"]
    assert cont.requests_completed == stat.requests_completed == 300
    assert cont.e2e_ms.mean < stat.e2e_ms.mean
    assert cont.throughput_tokens_per_s > stat.throughput_tokens_per_s
    assert simulate(reqs, cfg.model_copy(update={"batching": "static"}), ROOF, check_invariants=True) == stat


def test_static_batch_waits_for_its_longest_member():
    # Batch {0, 1} starts at 0; request 1 finishes at 2D but request 2 (arrives at 0.001 s, after
    # the batch formed) may only start when request 0 ends at 10D: TTFT(2) = 11D - 0.001.
    reqs = [req(0, 0.0, 8, 10), req(1, 0.0, 8, 2), req(2, 0.001, 8, 2)]
    r = simulate(reqs, SimConfig(total_blocks=16, batching="static"), FIXED, record_requests=True, check_invariants=True)
    assert r.per_request[2].ttft_ms == pytest.approx((11 * D - 0.001) * 1e3)
    rc = simulate(reqs, SimConfig(total_blocks=16), FIXED, record_requests=True)
    assert rc.per_request[2].ttft_ms == pytest.approx((2 * D - 0.001) * 1e3)  # joins at step 2


def test_chunked_lowers_itl_p95_under_long_prompt_burst():
    # 8 streams decode 300 tokens each; from t=0.2 s a burst of 20 long prompts (8,000 tokens)
    # arrives every 0.1 s. FIFO prefills each whole prompt in one ~80 ms compute-bound step, so
    # every stream sees an ~80 ms gap about once per 0.1 s (~1 in 3 samples during the burst:
    # > 5% of all samples) -> ITL p95 >= 80 ms. Chunked feeds 512-token chunks per request,
    # which ride along memory-bound ~10 ms steps (a few concurrent chunks stay well under
    # 80 ms), so p95 stays far lower; the price is paid in the long prompts' TTFT.
    reqs = [req(i, 0.0, 64, 300) for i in range(8)] + [req(8 + k, 0.2 + 0.1 * k, 8000, 2) for k in range(20)]
    out = compare_policies(reqs, SimConfig(total_blocks=20_000), ROOF)
    fifo, chunked = out["fifo"], out["chunked"]
    assert fifo.itl_ms.p95 >= 80.0
    assert chunked.itl_ms.p95 < fifo.itl_ms.p95 / 2
    assert chunked.requests_completed == fifo.requests_completed == 28
    r = simulate(reqs, SimConfig(total_blocks=20_000, policy="chunked"), ROOF, check_invariants=True)
    assert r == chunked


def test_decode_priority_differs_from_fifo_when_the_budget_binds():
    # Budget 1,024 tokens; 8 decoders and prompts of 1,020 tokens. FIFO admits a prompt first and
    # leaves 4 tokens for decodes (4 of the 8 skip the step); decode-priority runs all 8 decodes
    # and the prompt (1,020 > 1,016 left) waits until the decoders finish.
    reqs = [req(i, 0.0, 8, 40) for i in range(8)] + [req(8, 0.05, 1020, 2)]
    cfg = SimConfig(total_blocks=1000, max_num_batched_tokens=1024)
    fifo = simulate(reqs, cfg, FIXED, record_requests=True, check_invariants=True)
    dp = simulate(reqs, cfg.model_copy(update={"policy": "decode-priority"}), FIXED, record_requests=True, check_invariants=True)
    assert fifo.per_request[8].ttft_ms < dp.per_request[8].ttft_ms
    assert fifo.itl_ms.max > dp.itl_ms.max == pytest.approx(D * 1e3)
    assert dp.max_queue_age_ms > fifo.max_queue_age_ms


# ---------------------------------------------------------------------------------------------
# Determinism and invariants over random inputs
# ---------------------------------------------------------------------------------------------


def test_same_seed_same_result_different_seed_different():
    cfg = SimConfig(total_blocks=2000, policy="chunked", prefix_tokens=128, prefix_share=0.5, seed=4)
    a = simulate(poisson_requests(20, 300, (64, 1024), (8, 128), seed=1), cfg, ROOF)
    b = simulate(poisson_requests(20, 300, (64, 1024), (8, 128), seed=1), cfg, ROOF)
    c = simulate(poisson_requests(20, 300, (64, 1024), (8, 128), seed=2), cfg, ROOF)
    assert a == b
    assert a.ttft_ms != c.ttft_ms and a.e2e_ms != c.e2e_ms
    d = simulate(poisson_requests(20, 300, (64, 1024), (8, 128), seed=1), cfg.model_copy(update={"seed": 5}), ROOF)
    assert d.prefix_hits != a.prefix_hits or d.prefill_tokens != a.prefill_tokens  # which requests share the prefix


def _expected_rejections(reqs: list[Request], cfg: SimConfig) -> int:
    static = cfg.static_tokens or max(r.prompt_tokens + r.output_tokens for r in reqs)
    n = 0
    for r in reqs:
        if cfg.policy not in ("chunked", "prefill-first") and r.prompt_tokens > cfg.max_num_batched_tokens:
            n += 1
        elif cfg.reservation == "dynamic" and math.ceil((r.prompt_tokens + r.output_tokens - 1) / cfg.block_tokens) > cfg.total_blocks:
            n += 1
        elif cfg.reservation == "static" and r.prompt_tokens + r.output_tokens > static:
            n += 1
    return n


@st.composite
def scenarios(draw):
    seed = draw(st.integers(0, 10_000))
    n = draw(st.integers(1, 30))
    plo = draw(st.integers(1, 150))
    olo = draw(st.integers(1, 60))
    reqs = poisson_requests(draw(st.sampled_from([5.0, 50.0, 500.0])), n, (plo, plo + draw(st.integers(0, 200))), (olo, olo + draw(st.integers(0, 60))), seed=seed)
    reservation = draw(st.sampled_from(["dynamic", "dynamic", "static"]))
    block = draw(st.sampled_from([1, 4, 16]))
    cfg = SimConfig(
        block_tokens=block,
        total_blocks=max(1, draw(st.integers(300, 4000)) // block),  # pool of 300..4,000 tokens: tight to roomy
        max_num_batched_tokens=draw(st.sampled_from([256, 512, 2048])),
        max_num_seqs=draw(st.integers(1, 16)),
        policy=draw(st.sampled_from(sim.POLICIES)),
        chunk_tokens=draw(st.sampled_from([8, 32, 512])),
        prefix_tokens=draw(st.sampled_from([0, 16, 64])),
        prefix_share=draw(st.sampled_from([0.0, 0.5, 1.0])),
        reservation=reservation,
        static_tokens=None if reservation == "dynamic" else draw(st.sampled_from([None, 300, 600])),
        batching=draw(st.sampled_from(["continuous", "continuous", "static"])),
        cancel_rate=draw(st.sampled_from([0.0, 0.0, 0.3])),
        seed=seed,
    )
    return reqs, cfg


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_over_random_scenarios(scenario):
    reqs, cfg = scenario
    static = cfg.static_tokens or max(r.prompt_tokens + r.output_tokens for r in reqs)
    if cfg.reservation == "static" and math.ceil(static / cfg.block_tokens) > cfg.total_blocks:
        with pytest.raises(PlannerError):
            simulate(reqs, cfg, ROOF)
        return
    if cfg.prefix_share > 0 and cfg.prefix_tokens // cfg.block_tokens >= cfg.total_blocks:
        with pytest.raises(PlannerError):
            simulate(reqs, cfg, ROOF)
        return
    # check_invariants raises inside the run if, after any step, a request holds a block count
    # other than ceil(cached tokens / block) minus the shared prefix blocks (dynamic) or its
    # static reservation, if leases and the pool disagree, or if budgets are exceeded.
    r = simulate(reqs, cfg, ROOF, check_invariants=True, record_requests=True)
    # every request ends done, cancelled or (unschedulable) rejected
    assert r.requests_completed + r.requests_cancelled + r.requests_rejected == len(reqs)
    assert r.requests_rejected == _expected_rejections(reqs, cfg)
    assert {x.outcome for x in r.per_request} <= {"done", "cancelled", "rejected"}
    for x in r.per_request:
        if x.outcome == "done":
            assert x.tokens_generated == x.output_tokens
    # blocks and leases all returned, exactly once
    assert_clean(r)
    # every ITL sample spans at least one step; a step with a decode is at least step_time(1, 1)
    if r.itl_ms.count:
        assert r.itl_ms.min >= ROOF.step_time_s(1, 1, 1) * 1e3 * (1 - 1e-9)
    # ITL bookkeeping (lazy decoders) agrees with per-request token times
    assert r.itl_ms.count == sum(x.tokens_generated - 1 for x in r.per_request if x.tokens_generated)
    assert r.output_tokens == sum(x.tokens_generated for x in r.per_request)
    if r.requests_cancelled == 0:
        total_gap_ms = sum(x.tpot_ms * (x.output_tokens - 1) for x in r.per_request if x.outcome == "done" and x.output_tokens > 1)
        assert r.itl_ms.mean * r.itl_ms.count == pytest.approx(total_gap_ms, rel=1e-6, abs=1e-6)
    assert len(r.kv_utilisation) <= 500
    assert all(0.0 <= u <= 1.0 for _, u in r.kv_utilisation)


# ---------------------------------------------------------------------------------------------
# Inputs, statistics, traces
# ---------------------------------------------------------------------------------------------


def test_poisson_requests_validation_and_determinism():
    a = poisson_requests(10, 50, (10, 20), 5, seed=1)
    assert a == poisson_requests(10, 50, (10, 20), 5, seed=1)
    assert a != poisson_requests(10, 50, (10, 20), 5, seed=2)
    assert all(10 <= r.prompt_tokens <= 20 and r.output_tokens == 5 for r in a)
    assert all(x.arrival_s < y.arrival_s for x, y in zip(a, a[1:], strict=False))
    # mean gap ~ 1/rate = 0.1 s over 50 draws
    assert 0.05 < a[-1].arrival_s / 50 < 0.2
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(PlannerError, match="rate_per_s"):
            poisson_requests(bad, 10, 10, 10)
    with pytest.raises(PlannerError, match="requests"):
        poisson_requests(1.0, 0, 10, 10)
    with pytest.raises(PlannerError, match="prompt_tokens"):
        poisson_requests(1.0, 10, (20, 10), 10)
    with pytest.raises(PlannerError, match="output_tokens"):
        poisson_requests(1.0, 10, 10, 0)


def test_build_turns_validation_errors_into_planner_errors():
    with pytest.raises(PlannerError, match="total_blocks"):
        build(SimConfig, total_blocks=0)
    with pytest.raises(PlannerError, match="policy"):
        build(SimConfig, total_blocks=10, policy="lifo")
    with pytest.raises(PlannerError, match="bandwidth_bytes_per_s"):
        build(StepCost, weights_bytes=1, kv_bytes_per_token=1, bandwidth_bytes_per_s=0, flops_per_token=1, peak_flops=1)
    assert build(SimConfig, total_blocks=10).total_blocks == 10


def test_duplicate_request_ids_are_refused():
    with pytest.raises(PlannerError, match="duplicate"):
        simulate([req(1, 0.0, 8, 2), req(1, 0.1, 8, 2)], SimConfig(total_blocks=8), FIXED)


def test_percentiles_nearest_rank():
    p = percentiles([float(x) for x in range(1, 101)])
    assert (p.p50, p.p95, p.p99, p.mean, p.min, p.max, p.count) == (50.0, 95.0, 99.0, 50.5, 1.0, 100.0, 100)
    # 90 samples of 1 and 10 of 100: p50 = 1, p95 = 100 (rank 95 falls in the tail)
    w = weighted_percentiles([100.0, 1.0], [10, 90])
    assert (w.p50, w.p95, w.p99, w.count) == (1.0, 100.0, 100.0, 100)
    assert w.mean == pytest.approx((90 + 1000) / 100)
    assert percentiles([]).count == 0 and weighted_percentiles([], []).count == 0


def test_parse_trace_csv_ok():
    text = "\ufeffprompt_tokens, arrival_s ,output_tokens,tenant\n100,0.5,20,a\n\n50,0.1,5,b\n"
    reqs = parse_trace_csv(text)
    assert [(r.id, r.arrival_s, r.prompt_tokens, r.output_tokens) for r in reqs] == [(0, 0.5, 100, 20), (1, 0.1, 50, 5)]
    r = simulate(reqs, SimConfig(total_blocks=64), FIXED)
    assert r.requests_completed == 2


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("arrival_s,prompt_tokens\n0,1\n", "missing column"),
        ("arrival_s,prompt_tokens,output_tokens\n", "no rows"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,ten,5\n", r"row 3 prompt_tokens"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10,5\n-1,10,5\n", r"row 4 arrival_s"),
        ("arrival_s,prompt_tokens,output_tokens\nnan,10,5\n", r"row 2 arrival_s"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10,0\n", r"row 2 output_tokens"),
        ("arrival_s,prompt_tokens,output_tokens\n0,10\n", r"row 2"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1.5,3\n", r"row 2 prompt_tokens"),
    ],
)
def test_parse_trace_csv_errors_name_the_row(text, match):
    with pytest.raises(PlannerError, match=match):
        parse_trace_csv(text)


def test_parse_trace_csv_row_limit():
    text = "arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 11
    assert len(parse_trace_csv(text, max_rows=11)) == 11
    with pytest.raises(PlannerError, match="too many rows"):
        parse_trace_csv(text, max_rows=10)


# ---------------------------------------------------------------- CLI and page (wiring to the plan)


def test_cli_simulate_json_contract():
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "simulate", "--preset", "llama-3.1-8b", "--requests", "60", "--rate", "2", "--policy", "chunked", "--seed", "3", "--json"],
        capture_output=True, text=True, cwd=root, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("requests_completed", "requests_cancelled", "throughput_tokens_per_s", "preemptions", "blocks_in_use_at_end"):
        assert key in out
    for key in ("ttft_ms", "itl_ms", "e2e_ms"):
        assert set(out[key]) >= {"p50", "p95", "p99"}
        assert out[key]["p50"] <= out[key]["p95"] <= out[key]["p99"]
    assert out["requests_completed"] + out["requests_cancelled"] + out["requests_rejected"] == 60
    assert out["blocks_in_use_at_end"] == 0
    assert out["policy"] == "chunked"
    again = subprocess.run(proc.args, capture_output=True, text=True, cwd=root, timeout=120)
    assert json.loads(again.stdout)["ttft_ms"] == out["ttft_ms"]  # same seed, same result


def test_from_plan_pool_matches_plan_memory():
    from planner.plan import EXAMPLE_INPUTS, compute_plan, example_model
    from planner.simulate import from_plan

    plan = compute_plan(EXAMPLE_INPUTS, example_model())
    cost, blocks = from_plan(plan)
    # 10,093,173,145 B for K/V // (131,072 B/token x 16 tokens) = 4,812 blocks
    assert blocks == 10093173145 // (131072 * 16) == 4812
    assert cost.kv_bytes_per_token == 131072
    assert cost.weights_bytes == 4 * 2**30


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_a_simulated_client_times_its_steps_as_the_plan_does(preset):
    # from_plan's step cost is the plan's own step model (PlanStepCost over the Roofline its load
    # figures use), so one client sending one request at a time on a plan of one sequence sees the
    # plan's TTFT (its preprocessing added, as the benchmark prints it) and the plan's ITL. The MoE
    # model is the case a plain roofline got wrong: reading every expert's weights a decode step made
    # Qwen3-30B-A3B's ITL 24.8 ms against the plan's 5.7 on one H100
    from planner.plan import compute_plan, make_inputs
    from planner.source import preset_ref

    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", sequences=1, input_tokens=4096, output_tokens=256), preset_ref(preset)[1])
    cost, blocks = sim.from_plan(plan)
    cfg = sim.plan_config(plan, blocks, max_num_batched_tokens=plan._load.setup.budget, policy="chunked", chunk_tokens=plan._load.setup.budget)
    r = simulate([req(i, 0.0, 4096, 256) for i in range(5)], cfg, cost, clients=1, check_invariants=True)
    assert sim.benchmark_ttft_ms(plan, r) == pytest.approx(plan.latency.time_to_first_token_ms, rel=1e-9)
    assert r.itl_ms.p50 == pytest.approx(plan.latency.mean_inter_token_latency_ms, rel=0.01)
    assert isinstance(cost, sim.PlanStepCost) and cost.kv_bytes_per_token == plan.reservation.used_kv_bytes // plan.reservation.tokens


def test_simulate_page_runs():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../pages/simulate.py", default_timeout=90).run()
    assert not at.exception
    assert at.metric[0].value == "300 of 300"  # every one of the 300 default requests completes
    at.number_input(key="sim_rate").set_value(0.0).run()  # below the widget's minimum: clamped, no crash
    assert not at.exception


def test_prefill_first_runs_prefill_alone_and_decodes_in_steps_without_it():
    # SGLang's scheduler (prefill-first): 3 requests of P=64, O=3 at 0 with a 32-token prefill a step,
    # fixed step D. Steps 1-6 are prefill alone, 32 tokens each (r0 in 1-2, r1 in 3-4, r2 in 5-6), so the
    # first tokens land at 2D, 4D, 6D; r0 and r1 decode nothing while r1 and r2 prefill. Steps 7-8 decode
    # all three together (tokens 2-3), so all three end at 8D. Under chunked (decodes first, 32 tokens
    # per prompt a step, budget 64): r0 and r1 prefill 32 + 32 in step 1 and finish in step 2 (first
    # tokens at 2D); step 3 decodes both and starts r2 (62 tokens left: 32), step 4 ends r2's prefill
    # beside their last decodes: r0 and r1 end at 4D, r2 at 6D
    reqs = [req(i, 0.0, 64, 3) for i in range(3)]
    cfg = SimConfig(total_blocks=32, max_num_batched_tokens=64, chunk_tokens=32, policy="prefill-first")
    r = simulate(reqs, cfg, FIXED, check_invariants=True, record_requests=True)
    assert [x.ttft_ms for x in r.per_request] == pytest.approx([2 * D * 1e3, 4 * D * 1e3, 6 * D * 1e3])
    assert [x.e2e_ms for x in r.per_request] == pytest.approx([8 * D * 1e3] * 3)
    assert r.step_count == 8
    assert_clean(r)
    mixed = simulate(reqs, cfg.model_copy(update={"policy": "chunked"}), FIXED, check_invariants=True, record_requests=True)
    assert [x.ttft_ms for x in mixed.per_request] == pytest.approx([2 * D * 1e3, 2 * D * 1e3, 4 * D * 1e3])
    assert [x.e2e_ms for x in mixed.per_request] == pytest.approx([4 * D * 1e3, 4 * D * 1e3, 6 * D * 1e3])


def test_prefill_first_keeps_a_fixed_length_closed_loop_in_waves():
    # 3 clients, 9 requests of P=64, O=3 under prefill-first (as above): every wave ends in one step
    # (8D after it starts), its clients send the next wave together, and each wave's TTFTs are
    # 2D, 4D, 6D again: the second and third waves queue exactly as the first (planner candidate W,
    # serving.waves_ttft_ms). Under chunked the waves spread out and the later ones queue less
    reqs = [req(i, 0.0, 64, 3) for i in range(9)]
    cfg = SimConfig(total_blocks=32, max_num_batched_tokens=64, chunk_tokens=32, policy="prefill-first")
    r = simulate(reqs, cfg, FIXED, check_invariants=True, record_requests=True, clients=3)
    ttft = [round(x.ttft_ms / (D * 1e3), 6) for x in r.per_request]
    assert sorted(ttft[:3]) == sorted(ttft[3:6]) == sorted(ttft[6:]) == [2, 4, 6]
    assert sorted(x.arrival_s for x in r.per_request) == pytest.approx([0.0] * 3 + [8 * D] * 3 + [16 * D] * 3)
    assert r.makespan_s == pytest.approx(24 * D)
    mixed = simulate(reqs, cfg.model_copy(update={"policy": "chunked"}), FIXED, record_requests=True, clients=3)
    later = [x.ttft_ms for x in mixed.per_request[3:]]
    assert sum(later) / len(later) < 4 * D * 1e3  # below the waves' mean of 4D
    # under chunked, r0 and r1 end at 4D and r2 at 6D (above); with a lag of 2D from an end to the next
    # prompt reaching the scheduler, r3 and r4 arrive at 6D on an idle engine and prefill 32 + 32 tokens in
    # each of two steps (first tokens at 8D: TTFT 2D), and r5 arrives at 8D
    lagged = simulate(reqs, cfg.model_copy(update={"policy": "chunked"}), FIXED, record_requests=True, clients=3, lag_s=2 * D)
    assert [x.arrival_s for x in lagged.per_request[3:6]] == pytest.approx([6 * D, 6 * D, 8 * D])
    assert [x.ttft_ms for x in lagged.per_request[3:5]] == pytest.approx([2 * D * 1e3] * 2)


def test_a_closed_loop_sends_each_next_request_when_one_ends():
    # 2 clients, 4 requests of P=32, O=4 on the fixed step D (every step costs D, any batch): requests 0
    # and 1 arrive at 0 and prefill together in step 1 (first tokens at D), decode tokens 2-4 in steps
    # 2-4 and end at 4D; requests 2 and 3 arrive then, prefill in step 5 (first tokens at 5D: TTFT D)
    # and end at 8D. So every TTFT is D, every e2e 4D, and the makespan 8D
    reqs = [req(i, 0.0, 32, 4) for i in range(4)]
    r = simulate(reqs, SimConfig(total_blocks=16), FIXED, check_invariants=True, record_requests=True, clients=2)
    assert r.requests_completed == 4 and r.step_count == 8
    arrivals = [x.arrival_s for x in r.per_request]
    assert arrivals == pytest.approx([0.0, 0.0, 4 * D, 4 * D])
    assert all(x.ttft_ms == pytest.approx(D * 1e3) and x.e2e_ms == pytest.approx(4 * D * 1e3) for x in r.per_request)
    assert r.makespan_s == pytest.approx(8 * D)
    assert_clean(r)
    # one client: strictly one request at a time, each arriving when the last ends
    one = simulate(reqs, SimConfig(total_blocks=16), FIXED, record_requests=True, clients=1)
    assert [x.arrival_s for x in one.per_request] == pytest.approx([0.0, 4 * D, 8 * D, 12 * D])
    # a lag of 1.5D from an end to the next prompt reaching the scheduler: requests 2 and 3 arrive at
    # 5.5D (the engine idles from 4D), prefill in one step (first tokens at 6.5D: TTFT D) and end at 9.5D
    lagged = simulate(reqs, SimConfig(total_blocks=16), FIXED, check_invariants=True, record_requests=True, clients=2, lag_s=1.5 * D)
    assert [x.arrival_s for x in lagged.per_request] == pytest.approx([0.0, 0.0, 5.5 * D, 5.5 * D])
    assert all(x.ttft_ms == pytest.approx(D * 1e3) for x in lagged.per_request) and lagged.makespan_s == pytest.approx(9.5 * D) and lagged.step_count == 8
    assert_clean(lagged)
    for bad in (-0.1, float("nan"), float("inf"), True, "1"):
        with pytest.raises(PlannerError, match="lag_s"):
            simulate(reqs, SimConfig(total_blocks=16), FIXED, clients=2, lag_s=bad)
    with pytest.raises(PlannerError, match="one replica"):
        simulate(reqs, SimConfig(total_blocks=16, replicas=2), FIXED, clients=2)
    with pytest.raises(PlannerError, match="at least one client"):
        simulate(reqs, SimConfig(total_blocks=16), FIXED, clients=0)
