"""The simulator's parts: routers and replicas, the overload verdict, thrashing, budgets.

Step times use FIXED (10 ms a step, whatever the batch) so times are multiples of D.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner import simulate as sim
from planner.errors import PlannerError
from planner.simulate import Request, SimConfig, StepCost, poisson_requests, simulate

D = 0.01
FIXED = StepCost(weights_bytes=1e9, kv_bytes_per_token=0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=0, peak_flops=1e15, mfu=1.0)
ROOT = Path(__file__).resolve().parents[1]


def test_pool_shared_lease_frees_with_its_last_holder():
    # The shared prefix's lease: opened once (one holder), touched by two more requests. The
    # first two releases only drop holders; the third returns its 2 blocks and closes it.
    pool = sim.BlockAllocator(4)
    lease = pool.open()
    pool.allocate(lease, 2)
    pool.touch(lease)
    pool.touch(lease)
    assert pool.refs(lease) == 3
    assert (pool.release(lease), pool.release(lease)) == (0, 0)
    assert (pool.in_use, pool.released, pool.freed) == (2, 0, 0)
    assert pool.release(lease) == 2
    assert (pool.refs(lease), pool.in_use, pool.released, pool.freed) == (0, 0, 1, 2)
    with pytest.raises(sim.DoubleFreeError):
        pool.release(lease)
    with pytest.raises(sim.AllocatorError):
        pool.touch(lease)


def test_kv_manager_allocates_what_fits_and_shares_the_prefix():
    # Blocks of 4 tokens, a pool of 10, a shared prefix of 8 tokens = 2 blocks.
    from planner.simulate.kv_manager import NO_PREFIX, PREFIX_HIT, PREFIX_OWNER, KVManager
    from planner.simulate.request import SimRequest

    kv = KVManager(SimConfig(block_tokens=4, total_blocks=10, prefix_tokens=8, prefix_share=1.0), static_blocks=0)
    a, b, c = (SimRequest(k, k, 0.0, prompt, 5) for k, prompt in enumerate((10, 12, 9)))
    a.uses_prefix = b.uses_prefix = c.uses_prefix = True
    # A owns the prefix: its 10 tokens need ceil(10 / 4) = 3 blocks, 2 of them the prefix's.
    assert kv.match_prefix(a) == PREFIX_OWNER and kv.blocks_to_admit(a, PREFIX_OWNER) == 3
    a.admit(0.0, 0)
    kv.admit(a, PREFIX_OWNER)
    assert kv.allocate_slots(a, 10) == 1 and kv.free_blocks == 7
    # Until A has computed the prefix, B finds nothing to share; then it hits and skips 8 tokens.
    assert kv.match_prefix(b) == NO_PREFIX
    a.prefilled(10)
    kv.cache_blocks(a)
    assert kv.match_prefix(b) == PREFIX_HIT and kv.prefix_tokens(PREFIX_HIT) == 8
    assert kv.blocks_to_admit(b, PREFIX_HIT) == 1  # ceil(12 / 4) = 3 blocks less the 2 shared
    b.admit(0.0, 8)
    kv.admit(b, PREFIX_HIT)
    assert kv.allocate_slots(b, 4) == 1 and kv.free_blocks == 6 and kv.pool.refs(kv.prefix.lease) == 2
    # 100 more tokens need ceil(112 / 4) - 2 - 1 = 25 blocks, 6 are free: nothing is taken.
    assert kv.allocate_slots(b, 100) is None and (kv.free_blocks, b.own_blocks) == (6, 1)
    assert kv.allocate_slots(b, 8, reserved=5) == 1  # 8 + 8 = 16 tokens: one more block, 1 of 6 free past the reserve
    assert kv.allocate_slots(b, 12, reserved=5) is None  # 20 tokens: one more again, 5 free, all reserved
    assert kv.tokens_fitting(b, reserved=1) == (2 + 2 + 5 - 1) * 4
    # A lets go: its own block returns, the prefix stays (B holds it) and C would still hit.
    kv.free(a)
    assert kv.free_blocks == 6 and kv.match_prefix(c) == PREFIX_HIT and (a.lease, a.own_blocks, a.attached) == (0, 0, False)
    # B lets go: its 2 blocks and the prefix's 2 return; C would own the prefix again.
    kv.free(b)
    assert kv.free_blocks == 10 and kv.match_prefix(c) == PREFIX_OWNER
    assert (kv.pool.opened, kv.pool.released, kv.pool.allocated, kv.pool.freed) == (3, 3, 5, 5)


def test_kv_manager_static_reservation_leases_up_front():
    from planner.simulate.kv_manager import NO_PREFIX, KVManager
    from planner.simulate.request import SimRequest

    kv = KVManager(SimConfig(block_tokens=4, total_blocks=10, reservation="static"), static_blocks=4)
    r = SimRequest(0, 0, 0.0, 6, 10)
    assert kv.blocks_to_admit(r, NO_PREFIX) == 4  # the reservation, whatever the prompt
    r.admit(0.0, 0)
    kv.admit(r, NO_PREFIX)
    assert kv.allocate_slots(r, 6) == 4 and kv.allocate_slots(r, 1000) == 0 and kv.free_blocks == 6


# Mutants: each breaks one piece of bookkeeping; check_invariants must name it.


def _preempting_run() -> sim.SimResult:
    # test_preemption_newest_first_and_recompute's scenario, plus a shared prefix and a third request
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=12, output_tokens=8) for i in range(3)]
    return simulate(reqs, SimConfig(block_tokens=4, total_blocks=9, prefix_tokens=8, prefix_share=1.0), FIXED, check_invariants=True)


def test_invariants_pass_and_change_nothing():
    reqs = poisson_requests(40, 300, (16, 300), (2, 80), seed=11)
    cfg = SimConfig(block_tokens=8, total_blocks=200, max_num_seqs=12, policy="chunked", chunk_tokens=48, prefix_tokens=32, prefix_share=0.5, cancel_rate=0.1, replicas=2)
    checked = simulate(reqs, cfg, FIXED, check_invariants=True, record_requests=True)
    assert checked.preemptions > 0 and checked.prefix_hits > 0 and checked.requests_cancelled > 0  # the checks saw each case
    assert checked == simulate(reqs, cfg, FIXED, record_requests=True)
    assert _preempting_run().preemptions > 0


def test_invariants_catch_a_pool_that_loses_a_block(monkeypatch):
    class Losing(sim.BlockAllocator):
        def release(self, lease):
            self._leases[lease][-1:] = []  # the lease forgets its last block: nobody holds it, it is not free
            return super().release(lease)

    monkeypatch.setattr(sim.block_pool, "BlockAllocator", Losing)
    with pytest.raises(sim.SimulationInvariantError, match="leased .* free blocks"):
        _preempting_run()


def test_invariants_catch_a_request_keeping_its_freed_lease(monkeypatch):
    from planner.simulate import replica
    from planner.simulate.kv_manager import KVManager

    class Keeping(KVManager):
        def free(self, r):
            lease = r.lease
            super().free(r)
            r.lease = lease

    monkeypatch.setattr(replica, "KVManager", Keeping)
    with pytest.raises(sim.SimulationInvariantError, match="still holds lease|ended holding lease"):
        _preempting_run()


def test_invariants_catch_a_prefix_hold_the_pool_does_not_count(monkeypatch):
    monkeypatch.setattr(sim.PrefixCache, "attach", lambda self, pool: None)
    with pytest.raises(sim.SimulationInvariantError, match="prefix has 1 holders but 2 requests are attached"):
        _preempting_run()


def test_invariants_catch_inconsistent_token_counters(monkeypatch):
    from planner.simulate import engine, request

    real = request.SimRequest.emit_token

    def twice_at_first(self, t):
        gap = real(self, t)
        self.generated += self.generated == 1  # counts the first token twice
        return gap

    monkeypatch.setattr(request.SimRequest, "emit_token", twice_at_first)
    with pytest.raises(sim.SimulationInvariantError, match="cached 12 tokens with 2 of 8 generated"):
        _preempting_run()
    monkeypatch.undo()

    class Miscounting(engine.Replica):
        def _apply_decodes(self, decoders, joiners):
            super()._apply_decodes(decoders, joiners)
            self.stats.output_tokens += 1  # one token too many a decode step

    monkeypatch.setattr(engine, "Replica", Miscounting)
    with pytest.raises(sim.SimulationInvariantError, match="output tokens"):
        _preempting_run()


def test_round_robin_replicas_equal_separate_runs():
    # Round robin over 2 replicas sends even arrivals to replica 0 and odd ones to replica 1;
    # replicas share nothing, so each request's record equals a one-replica run of its half.
    reqs = poisson_requests(30, 200, (64, 512), (8, 128), seed=2)
    cfg = SimConfig(total_blocks=300, max_num_seqs=8)
    both = simulate(reqs, cfg.model_copy(update={"replicas": 2}), FIXED, record_requests=True, check_invariants=True)
    ordered = sorted(reqs, key=lambda r: (r.arrival_s, r.id))
    for k in (0, 1):
        half = simulate(ordered[k::2], cfg, FIXED, record_requests=True)
        mine = [x for x in both.per_request if x.replica == k]
        assert [x.model_dump(exclude={"replica"}) for x in mine] == [x.model_dump(exclude={"replica"}) for x in half.per_request]
    assert [s.requests for s in both.per_replica] == [100, 100]


@pytest.mark.parametrize("router", sim.ROUTERS)
@pytest.mark.parametrize("replicas", [1, 3])
def test_every_request_ends_exactly_once_across_replicas(router, replicas):
    reqs = poisson_requests(80, 300, (32, 400), (4, 64), seed=7)
    cfg = SimConfig(total_blocks=120, max_num_seqs=6, replicas=replicas, router=router, policy="chunked", chunk_tokens=64, cancel_rate=0.1)
    r = simulate(reqs, cfg, FIXED, record_requests=True, check_invariants=True)
    assert r.requests_completed + r.requests_cancelled + r.requests_rejected == 300
    assert sorted(x.id for x in r.per_request) == sorted(q.id for q in reqs)
    assert sum(s.requests for s in r.per_replica) == 300
    assert r.blocks_in_use_at_end == 0 and r.leases_opened == r.leases_released
    assert r.output_tokens == sum(x.tokens_generated for x in r.per_request)


def test_least_outstanding_tokens_balances_unequal_requests():
    # Alternating huge and tiny requests: round robin puts every huge one on replica 0;
    # least-outstanding-tokens sends the next request to the replica with less unfinished work.
    reqs = [Request(id=i, arrival_s=0.001 * i, prompt_tokens=2000 if i % 2 == 0 else 10, output_tokens=200 if i % 2 == 0 else 2) for i in range(40)]
    cfg = SimConfig(total_blocks=2000, replicas=2)
    rr = simulate(reqs, cfg, FIXED, record_requests=True)
    lot = simulate(reqs, cfg.model_copy(update={"router": "least-outstanding-tokens"}), FIXED, record_requests=True)
    assert {x.replica for x in rr.per_request if x.prompt_tokens == 2000} == {0}
    assert {x.replica for x in lot.per_request if x.prompt_tokens == 2000} == {0, 1}
    assert lot.e2e_ms.p95 < rr.e2e_ms.p95


def test_overload_verdict_under_and_over_capacity():
    # One sequence at a time (max_num_seqs 1), 10 output tokens per request: each request holds
    # the engine 10 steps = 100 ms, so it serves 10 requests/s. At 2/s it keeps up; at 40/s the
    # queue grows by about 30 requests per second of arrivals.
    cfg = SimConfig(total_blocks=100, max_num_seqs=1)
    light = simulate(poisson_requests(2, 200, 16, 10, seed=1), cfg, FIXED)
    heavy = simulate(poisson_requests(40, 200, 16, 10, seed=1), cfg, FIXED)
    assert not light.overload.overloaded and light.overload.sustainable_rate_per_s is None
    assert light.overload.message.startswith("Keeps up")
    v = heavy.overload
    assert v.overloaded and v.message.startswith("Overloaded")
    assert v.arrival_rate_per_s == pytest.approx(40, rel=0.3)
    assert v.sustainable_rate_per_s == pytest.approx(1 / (10 * D), rel=0.05)  # 10 requests/s
    assert v.queue_at_end > v.queue_at_mid + 20


def test_too_few_requests_gives_no_verdict():
    r = simulate(poisson_requests(1000, 5, 16, 10, seed=1), SimConfig(total_blocks=100, max_num_seqs=1), FIXED)
    assert not r.overload.overloaded and r.overload.message.startswith("No verdict")


def test_chunked_prefill_does_not_thrash_under_overload():
    # The issue's reproducer in miniature: a pool of 40 sequences' worth of blocks, arrivals
    # well above capacity. Before the fix, chunked prefill admitted prompts whose later chunks
    # evicted running requests (tens of times FIFO's preemptions, 2.5x lower throughput).
    # New prompts are now admitted only when their whole prefill fits after what running
    # requests still need, and never in a step that preempted (vLLM v1's rule).
    cost = StepCost(weights_bytes=16e9, kv_bytes_per_token=131072, bandwidth_bytes_per_s=3.35e12, mbu=0.6, flops_per_token=16e9, peak_flops=989e12, mfu=0.5)
    reqs = poisson_requests(20, 2000, 2048, 512, seed=0)
    cfg = SimConfig(total_blocks=4812)
    fifo = simulate(reqs, cfg, cost)
    chunked = simulate(reqs, cfg.model_copy(update={"policy": "chunked"}), cost)
    assert chunked.preemptions <= 2 * fifo.preemptions + 10
    assert chunked.throughput_tokens_per_s > 0.8 * fifo.throughput_tokens_per_s
    assert not chunked.overload.thrashing
    assert chunked.overload.overloaded and fifo.overload.overloaded


def test_thrashing_is_reported():
    # Tiny pool (2 requests' final K/V), many long decodes arriving together: decode growth
    # keeps evicting the newest request, whose prefill is recomputed again and again.
    reqs = [Request(id=i, arrival_s=0.0, prompt_tokens=64, output_tokens=300) for i in range(30)]
    r = simulate(reqs, SimConfig(block_tokens=16, total_blocks=48), FIXED)
    # 30 requests x 64 prompt tokens = 1,920 first prefills; the rest is recomputation.
    assert r.preemptions > 10 and r.prefill_tokens_wasted > 0.25 * r.prefill_tokens
    assert r.overload.thrashing and "Thrashing" in r.overload.message


def test_request_budget_is_refused():
    many = [Request.model_construct(id=i, arrival_s=0.0, prompt_tokens=1, output_tokens=1) for i in range(sim.MAX_REQUESTS + 1)]
    with pytest.raises(PlannerError, match="at most 100,000 requests"):
        simulate(many, SimConfig(total_blocks=10), FIXED)
    with pytest.raises(PlannerError, match="requests"):
        poisson_requests(1.0, sim.MAX_REQUESTS + 1, 1, 1)
    big = [Request(id=i, arrival_s=0.0, prompt_tokens=10_000_000, output_tokens=10_000_000) for i in range(101)]
    with pytest.raises(PlannerError, match="prompt \\+ output tokens"):
        simulate(big, SimConfig(total_blocks=10), FIXED)


def test_time_budget_stops_cleanly_and_says_so():
    reqs = poisson_requests(1e9, 20_000, 2048, 512, seed=0)
    t0 = time.perf_counter()
    r = simulate(reqs, SimConfig(total_blocks=4812, time_budget_s=0.3), FIXED)
    assert time.perf_counter() - t0 < 5  # 0.3 s of stepping plus set-up and results
    assert r.stopped_early is not None and "time budget of 0.3 s" in r.stopped_early
    assert r.requests_unfinished > 0
    assert r.requests_completed + r.requests_unfinished + r.requests_cancelled + r.requests_rejected == 20_000


def test_read_trace_caps_size_before_parsing(tmp_path):
    ok = tmp_path / "t.csv"
    ok.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n")
    assert len(sim.read_trace(ok)) == 1
    with pytest.raises(PlannerError, match="larger than"):
        sim.read_trace("/dev/zero")
    big = tmp_path / "big.csv"
    big.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n" + b"0,1,1\n" * 200)
    with pytest.raises(PlannerError, match="larger than"):
        sim.read_trace(big, max_bytes=1000)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PlannerError, match="UTF-8"):
        sim.read_trace(binary)
    with pytest.raises(PlannerError, match="cannot read"):
        sim.read_trace(tmp_path / "missing.csv")


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_cli_trace_dev_zero_refused_in_one_line():
    t0 = time.perf_counter()
    proc = _cli("simulate", "--example", "--trace", "/dev/zero")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "larger than 8 MiB" in proc.stderr
    assert time.perf_counter() - t0 < 20


def test_cli_huge_burst_stops_within_its_time_budget():
    # The reproducer took 146 s and 3.2 GB; now the run stops at its wall-time budget.
    import json

    t0 = time.perf_counter()
    proc = _cli("simulate", "--example", "--requests", "100000", "--rate", "1e9", "--time-budget-s", "2", "--json")
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "time budget of 2 s" in out["stopped_early"]
    assert out["overload"]["overloaded"] is True
    assert out["requests_unfinished"] > 0
    assert wall < 30
