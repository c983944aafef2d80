"""Disaggregated prefill / decode pools, the KV transfer, the pool ratio and the frontier.

Expected numbers are hand arithmetic on Qwen3-32B's geometry (its public config.json: 64 layers,
8 KV heads of 128, hidden 5,120), the catalog's link figures and the served-latency model's own
functions; each is written out beside its test.
"""

from __future__ import annotations

import math

import pytest

from planner import disagg, frontier, latency
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.sizing import size

QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128, "hidden_size": 5120, "intermediate_size": 25600,
    "max_position_embeddings": 40960, "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
    "vocab_size": 151936, "tie_word_embeddings": False,
}  # fmt: skip
BASE = {"input_tokens": 4000, "output_tokens": 1000, "weight_dtype": "fp8"}
PER_TOKEN_FP8 = 64 * 2 * 8 * 128  # K and V, 64 layers, 8 heads of 128, one byte each: 131,072 B


@pytest.fixture(scope="module")
def qwen():
    return prepare_model(QWEN3_32B)


def pool(model, role, gpu="H200-141GB", tp=1, kv="fp8", block=16, **extra):
    out = disagg.pool_model(model, {**BASE, "block_tokens": block, **extra}, role, gpu, tp, 1, kv, 4.0)
    assert not isinstance(out, str), out
    return out


# --------------------------------------------------------------------------- the pools text


def test_parse_pools_reads_both_pools_and_the_default_gpu():
    p, d = disagg.parse_pools("2P:4@H200-141GB,1D:8@b200-180gb", "H100-SXM-80GB")
    assert (p.role, p.replicas, p.tp, p.gpu, p.gpu_count) == ("prefill", 2, 4, "H200-141GB", 8)
    assert (d.role, d.replicas, d.tp, d.gpu, d.gpu_count) == ("decode", 1, 8, "B200-180GB", 8)  # the catalog's spelling
    p, d = disagg.parse_pools(" 3p:1 , 2d:2 ", "H100-SXM-80GB")
    assert p.gpu == d.gpu == "H100-SXM-80GB" and (p.replicas, d.replicas, d.tp) == (3, 2, 2)
    assert disagg.format_pools(p, d) == "3P:1@H100-SXM-80GB,2D:2@H100-SXM-80GB"
    assert disagg.parse_pools(disagg.format_pools(p, d), "A10-24GB") == (p, d)  # the text round-trips


@pytest.mark.parametrize(
    ("text", "why"),
    [("2P:4", "write the pools"), ("0P:1,1D:1", "1 to 1,024 replicas"), ("1P:0,1D:1", "1 to 64"), ("1P:1@NOPE,1D:1", "unknown GPU"), ("1D:1,1P:1", "write the pools"), ("x" * 5000, "write the pools")],
)
def test_parse_pools_refuses_in_one_line(text, why):
    with pytest.raises(PlannerError) as exc:
        disagg.parse_pools(text, "H100-SXM-80GB")
    assert why in str(exc.value) and "\n" not in str(exc.value) and len(str(exc.value)) < 400


# --------------------------------------------------------------------------- the transfer


def test_kv_transfer_bytes_descriptors_and_nvlink(qwen):
    prefill, decode = pool(qwen, "prefill", tp=1), pool(qwen, "decode", tp=2)
    t = disagg.kv_transfer(prefill, decode, 3)
    # each decode GPU (TP 2) holds 4 of the 8 KV heads: 4,000 tokens x 64 layers x 2 x 4 x 128 x 1 B
    assert t.bytes_per_decode_gpu == 4000 * 64 * 2 * 4 * 128 == 262_144_000
    assert t.bytes_per_request == 4000 * PER_TOKEN_FP8 == 524_288_000
    assert t.bytes_per_prefill_gpu == 524_288_000  # one prefill GPU sends both shards
    # 16-token blocks: 250 blocks x 64 layers x (K and V) descriptors per decode GPU
    assert t.descriptors_per_gpu == 250 * 64 * 2 == 32_000
    assert t.link == "NVLink" and t.link_gb_s == 450.0  # one H200 node (3 GPUs <= 8)
    assert t.terms_ms["bytes"] == pytest.approx(524_288_000 / 450e9 * 1e3)  # the sender is the slower side
    assert t.terms_ms["nixl_descriptors"] == pytest.approx(32_000 * 2.0e-3)  # 2 us each: 64 ms
    assert t.terms_ms["link_latency"] == pytest.approx(4.36e-3)
    assert t.ms == pytest.approx(sum(t.terms_ms.values()))
    assert disagg.transfer_ms(prefill, decode, 3) == pytest.approx(t.ms)


def test_kv_transfer_64_token_blocks_and_the_scale_out_nic(qwen):
    prefill, decode = pool(qwen, "prefill", tp=2, block=64), pool(qwen, "decode", gpu="B200-180GB", tp=2, block=64)
    t = disagg.kv_transfer(prefill, decode, 4)
    assert t.descriptors_per_gpu == math.ceil(4000 / 64) * 64 * 2 == 8_064  # 63 blocks
    # two GPU kinds never share an NVLink domain: one 400 Gb/s NIC per GPU, 50 GB/s, 25 us
    assert t.link == "scale-out NIC" and t.link_gb_s == 50.0 and t.link_latency_us == 25.0
    assert t.terms_ms["bytes"] == pytest.approx(262_144_000 / 50e9 * 1e3)  # 5.24 ms
    assert t.ms == pytest.approx(0.025 + 5.24288 + 8_064 * 2.0e-3)
    # one kind, but the deployment is larger than a node: the NIC too
    same = pool(qwen, "decode", tp=2, block=64)
    assert disagg.kv_transfer(prefill, same, 8).link == "NVLink"
    assert disagg.kv_transfer(prefill, same, 9).link == "scale-out NIC"


def test_cached_prefix_is_not_transferred(qwen):
    decode = pool(qwen, "decode", tp=1, shared_prefix_tokens=2000, prefix_hit_rate=1.0)
    # the whole shared blocks are cached: 2,000 tokens (125 blocks of 16) are not pulled
    assert decode.kv_prompt_bytes == (4000 - 2000) * PER_TOKEN_FP8
    assert decode.descriptors == (250 - 125) * 64 * 2


# --------------------------------------------------------------------------- each pool's figures come from compute_plan


def test_decode_step_is_the_plans_decode_only_itl(qwen):
    decode = pool(qwen, "decode", tp=2)
    for c in (1, 16, 100):
        plan = compute_plan(make_inputs(**BASE, gpu="H200-141GB", tp=2, gpu_count=2, kv_dtype="fp8", sequences=c), qwen)
        # the plan's closed loop of c clients has fewer decoding at a time (the others are in their
        # TTFT); a decode pool's sequences all decode: its step at that many is the plan's decode-only step
        decoding = round(plan._load.figures.decoding)
        assert decode.tpot_s(decoding) * 1e3 == pytest.approx(plan.roofline.itl_ms_decode_only, rel=1e-12)
    assert decode.memory_sequences == compute_plan(make_inputs(**BASE, gpu="H200-141GB", tp=2, gpu_count=2, kv_dtype="fp8"), qwen).kv_cache.maximum_sequences_by_memory
    # vLLM's default max_num_seqs on a >= 70 GiB GPU (latency.runtime_limits)
    assert decode.runtime_sequences == 1024


def test_prefill_pool_reserves_the_prompt_alone(qwen):
    prefill = pool(qwen, "prefill", tp=1)
    assert prefill.plan.context.reserved_total_tokens == 4001  # the prompt and the one token it returns
    assert prefill.plan.inputs.output_tokens == 1
    assert prefill.service_s == pytest.approx(1 / prefill.plan.roofline.prefill_capacity_per_s)
    # its TTFT at utilisation rho is its prefill plus the M/D/1 queue's p95 (latency.queue_wait)
    assert prefill.ttft_p95_s(0.5) == pytest.approx(prefill.prefill_s + latency.queue_wait(0.5, prefill.service_s)[1])


def test_aggregated_point_is_what_compute_plan_shows(qwen):
    one = compute_plan(make_inputs(**BASE, gpu="H200-141GB", tp=2, gpu_count=2, kv_dtype="fp8", sequences=1), qwen)
    for c in (1, 8, 64):
        p = frontier.agg_point(one, c)
        plan = compute_plan(make_inputs(**BASE, gpu="H200-141GB", tp=2, gpu_count=2, kv_dtype="fp8", sequences=c), qwen)
        r = plan.roofline
        assert (p.ttft_p95_ms, p.itl_p95_ms, p.tpot_ms) == pytest.approx((r.ttft_p95_ms, r.itl_p95_ms, r.itl_ms_at_concurrency), rel=1e-12)
        assert p.tokens_per_s * 1 == pytest.approx(r.decode_tokens_per_second, rel=1e-12)  # one replica


def test_max_utilisation_inverts_the_queue_p95():
    service = 0.2
    for budget in (0.0, 0.05, 0.3, 1.0):
        rho = disagg.max_utilisation(budget, service)
        assert latency.queue_wait(rho, service)[1] <= budget + 1e-12 if rho > 0 else True
        if rho < disagg.PREFILL_MAX_UTILISATION:
            assert latency.queue_wait(rho + 0.0005, service)[1] > budget  # the grid's next step misses
    assert disagg.max_utilisation(-1.0, service) == 0.0
    assert disagg.max_utilisation(1e9, service) == disagg.PREFILL_MAX_UTILISATION


# --------------------------------------------------------------------------- the ratio and a plan


def test_balanced_ratio_is_decode_rate_over_usable_prefill_rate(qwen):
    prefill, decode = pool(qwen, "prefill", tp=2, block=64), pool(qwen, "decode", tp=4, block=64)
    c = 64
    ratio, rho = disagg.balanced_ratio(prefill, decode, c, 300.0)
    xfer = disagg.transfer_ms(prefill, decode, 6)
    mu_d = c / (xfer / 1e3 + 2 * decode.tpot_s(c) + 999 * decode.tpot_s(c))  # requests/s a decode replica finishes
    room = 0.300 - prefill.prefill_s - xfer / 1e3 - (2 * decode.tpot_s(c) + decode.api_s)
    assert rho == disagg.max_utilisation(room, prefill.service_s) and 0 < rho < 0.9
    assert ratio == pytest.approx(mu_d * prefill.service_s / rho)
    # no SLO: the prefill queue may run to 90 %
    assert disagg.balanced_ratio(prefill, decode, c, None)[1] == 0.9
    # an SLO below the prefill alone: no utilisation holds it
    assert disagg.balanced_ratio(prefill, decode, c, 1.0) == (math.inf, 0.0)


def test_plan_disagg_little_and_ttft_terms(qwen):
    values = {**BASE, "gpu": "H200-141GB", "kv_dtype": "fp8", "sequences": 96, "ttft_slo_ms": 600, "itl_slo_ms": 20, "block_tokens": 64}
    d = disagg.plan_disagg(qwen, values, "2P:2,1D:4")
    assert d.spec == "2P:2@H200-141GB,1D:4@H200-141GB" and d.gpus == 8
    assert d.ttft_p95_ms == pytest.approx(sum(d.ttft_terms_ms.values()))
    assert d.ttft_terms_ms["kv_transfer"] == pytest.approx(d.kv_transfer_ms)
    # Little's law: the requests in flight are the rate times a request's mean end-to-end time
    # (the prefill queue's mean wait, not its p95, then 999 more tokens)
    rho = d.prefill.utilisation
    mean_queue = latency.queue_wait(rho, 1 / d.prefill.requests_per_s_capacity)[0]
    e2e_s = (d.ttft_p95_ms - d.ttft_terms_ms["prefill_queue_p95"]) / 1e3 + mean_queue + 999 * d.tpot_ms / 1e3
    assert d.requests_per_s * e2e_s == pytest.approx(96, rel=1e-6)
    assert d.output_tokens_per_s == pytest.approx(d.requests_per_s * 1000)
    assert d.tokens_per_s_per_gpu == pytest.approx(d.output_tokens_per_s / 8)
    assert d.cost_per_hour == pytest.approx(8 * 4.0)  # the price table's H200
    assert d.prefill.utilisation == pytest.approx(d.requests_per_s * (1 / d.prefill.requests_per_s_capacity) / 2)
    assert d.tpot_ms == d.itl_p95_ms  # no prefill chunks in the decode steps
    assert d.aggregated is not None and d.aggregated["gpus"] == 8
    assert d.verdict and "aggregated" in d.verdict


def test_plan_disagg_refuses_a_pool_whose_weights_do_not_fit(qwen):
    with pytest.raises(PlannerError) as exc:
        disagg.plan_disagg(qwen, {**BASE, "weight_dtype": "bf16", "gpu": "L4-24GB"}, "1P:1,1D:1")
    assert exc.value.field == "disagg" and "prefill pool" in exc.value.reason


# --------------------------------------------------------------------------- size and the frontier


def test_size_prefers_disaggregation_where_chunks_bind_the_aggregated_itl(qwen):
    # long prompts and a tight mean TPOT: aggregated replicas must stay small to keep prefill
    # chunks from stretching the decode steps; a decode pool runs many more sequences
    r = size(qwen, {**BASE, "input_tokens": 8000, "output_tokens": 256}, users=512, ttft_p95_ms=1500, tpot_ms=15, gpus=["H200-141GB"], kv_dtypes=("fp8",), disagg=True)
    best = r.recommendations[0]
    agg = next(x for x in r.recommendations if not x.disaggregated)
    assert best.disaggregated and best.cost_per_hour < agg.cost_per_hour
    assert best.prefill is not None and best.decode is not None and best.kv_transfer_ms > 0
    assert best.gpu_count == best.prefill.replicas * best.prefill.tp + best.decode.replicas * best.decode.tp
    assert best.ttft_p95_ms <= 1500 and best.itl_p95_ms <= 15
    assert "Disaggregated is" in r.answer and "cheaper" in r.answer
    assert best.plan_values["disagg"] == best.disagg
    assert r.searched["disaggregated"]["feasible"] >= 1


def test_size_says_disaggregation_does_not_pay_for_short_prompts(qwen):
    r = size(qwen, {**BASE, "input_tokens": 128, "output_tokens": 512}, users=64, itl_p95_ms=30, gpus=["H200-141GB"], kv_dtypes=("fp8",), disagg=True)
    assert not r.recommendations[0].disaggregated
    assert "does not pay" in r.answer


def test_size_without_disagg_is_unchanged(qwen):
    a = size(qwen, BASE, users=64, itl_p95_ms=30, gpus=["H200-141GB"], kv_dtypes=("fp8",))
    assert all(not x.disaggregated for x in a.recommendations) and a.frontier is None and "disaggregated" not in a.searched


def test_frontier_points_and_pareto(qwen):
    r = size(qwen, BASE, users=128, ttft_p95_ms=1000, tpot_ms=20, gpus=["H200-141GB", "B200-180GB"], kv_dtypes=("fp8",), disagg=True, frontier=True)
    pts = r.frontier
    assert pts and any(p.disaggregated for p in pts) and any(not p.disaggregated for p in pts)
    for p in pts:  # the scriptable contract
        row = p.model_dump()
        for key in ("tokens_per_s_per_gpu", "tokens_per_s_per_user", "gpus", "cost_per_hour", "pareto", "disaggregated", "meets_slo"):
            assert key in row
        if p.disaggregated:
            assert {"gpu", "tp", "replicas"} <= set(row["prefill"]) and {"gpu", "tp", "replicas"} <= set(row["decode"])
            assert p.gpus == p.prefill.replicas * p.prefill.tp + p.decode.replicas * p.decode.tp
        assert p.meets_slo == (p.ttft_p95_ms <= 1000 and p.tpot_ms <= 20)
    front = [p for p in pts if p.pareto]
    # on the front: nobody beats a point on both axes; off it: somebody does
    for p in pts:
        dominated = any(
            q.tokens_per_s_per_gpu >= p.tokens_per_s_per_gpu
            and q.tokens_per_s_per_user >= p.tokens_per_s_per_user
            and (q.tokens_per_s_per_gpu, q.tokens_per_s_per_user) != (p.tokens_per_s_per_gpu, p.tokens_per_s_per_user)
            for q in pts
        )
        assert p.pareto == (not dominated)
    assert len(front) >= 3
    # cost per million output tokens at capacity: price per GPU-hour over tokens a GPU-hour
    agg = next(p for p in pts if not p.disaggregated)
    assert agg.cost_per_million_tokens == pytest.approx(4.0 / (agg.tokens_per_s_per_gpu * 3600) * 1e6)


def test_ladder():
    assert frontier.ladder(1) == [1]
    assert frontier.ladder(20, 13) == [1, 2, 4, 8, 13, 16, 20]
    assert frontier.ladder(8, 8) == [1, 2, 4, 8]
    assert frontier.ladder(0) == []


def test_size_with_the_plans_own_fields_in_base(qwen):
    # the Size page and the CLI pass the whole plan (its sequences, GPU, TP, ...): the pool search sets those itself
    plain = size(qwen, BASE, users=128, ttft_p95_ms=1000, tpot_ms=20, gpus=["H200-141GB"], kv_dtypes=("fp8",), disagg=True)
    full = size(qwen, {**BASE, "sequences": 8, "gpu": "A10-24GB", "tp": 4, "gpu_count": 4, "max_num_seqs": 3}, users=128, ttft_p95_ms=1000, tpot_ms=20, gpus=["H200-141GB"], kv_dtypes=("fp8",), disagg=True)
    assert [r.model_dump() for r in full.recommendations] == [r.model_dump() for r in plain.recommendations]
    dis = next(r for r in plain.recommendations if r.disaggregated)
    inputs = dis.plan_inputs()  # its decode pool, at the sequences that pool holds: it plans and is admitted
    assert "disagg" not in inputs and inputs["gpu"] == dis.decode.gpu and inputs["sequences"] <= dis.max_num_seqs * dis.replicas
    assert compute_plan(make_inputs(**inputs), qwen).kv_cache.admitted


def test_size_recommendation_and_plan_disagg_split_the_users_alike(qwen):
    # the Size page shows a recommendation's pools through plan_disagg at the same users: one split
    # (disagg.at_users, Little on the mean end-to-end time) must give the same sequences, TTFT and
    # TPOT, and no decode replica past its limit (once 253 sequences on a 251 limit vs 244 promised)
    for users, slo in ((256, {"ttft_p95_ms": 2000, "itl_p95_ms": 50}), (128, {"ttft_p95_ms": 1000, "tpot_ms": 20})):
        r = size(qwen, BASE, users=users, gpus=["H200-141GB", "MI300X-192GB"], kv_dtypes=("fp8",), disagg=True, **slo)
        recs = [x for x in r.recommendations if x.disaggregated]
        assert recs
        for rec in recs[:3]:
            d = disagg.plan_disagg(qwen, rec.plan_values, rec.disagg, {rec.prefill.gpu: rec.prefill.gpu_hour_price, rec.decode.gpu: rec.decode.gpu_hour_price})
            assert d.sequences == users
            assert math.ceil(d.decode.sequences_per_replica - 1e-9) == rec.sequences_per_replica <= rec.max_num_seqs
            assert d.decode.utilisation <= 1.0 and d.prefill.utilisation <= disagg.PREFILL_MAX_UTILISATION + 1e-9
            assert d.ttft_p95_ms == pytest.approx(rec.ttft_p95_ms, rel=1e-9) and d.tpot_ms == pytest.approx(rec.itl_p95_ms, rel=1e-9)
            assert d.ttft_p95_ms <= slo["ttft_p95_ms"]
            # Little: users = rate x mean end-to-end time
            op = disagg.at_users(*_pools(qwen, rec), users)
            assert op.rate * op.e2e_mean_s == pytest.approx(users, rel=1e-6)


def _pools(model, rec):
    p = disagg.pool_model(model, {**BASE}, "prefill", rec.prefill.gpu, rec.prefill.tp, rec.prefill.ep, rec.kv_dtype, rec.prefill.gpu_hour_price)
    d = disagg.pool_model(model, {**BASE}, "decode", rec.decode.gpu, rec.decode.tp, rec.decode.ep, rec.kv_dtype, rec.decode.gpu_hour_price)
    return p, d, rec.prefill.replicas, rec.decode.replicas


def test_each_pool_opens_as_a_plan_at_the_deployments_request_rate(qwen):
    # issue 25 leftover: a disaggregated recommendation opens pool by pool. Each pool's plan inputs
    # carry that pool's shape (GPU count = replicas x TP) and the deployment's request rate, and the
    # plan's pools card (disagg.plan_of: Poisson arrivals at that rate) gives back the
    # recommendation's TTFT and TPOT. For a rate workload the rate is the one sized exactly (at the
    # Little sequences the old link carried, TTFT came back a few ms off: 6.5 ms on Llama-3.1-70B)
    for load in ({"users": 256}, {"rate_per_s": 5.0}):
        r = size(qwen, BASE, **load, ttft_p95_ms=2000, itl_p95_ms=50, gpus=["H200-141GB", "MI300X-192GB"], kv_dtypes=("fp8",), disagg=True)
        for rec in [x for x in r.recommendations if x.disaggregated][:3]:
            if "rate_per_s" in load:
                assert rec.requests_per_s == 5.0
            for role, shape in (("prefill", rec.prefill), ("decode", rec.decode)):
                values = rec.pool_inputs(role, 2000, 50)
                assert (values["gpu"], values["tp"], values["gpu_count"], values["disagg"]) == (shape.gpu, shape.tp, shape.replicas * shape.tp, rec.disagg)
                assert values["request_rate"] == rec.requests_per_s and (values["ttft_slo_ms"], values["itl_slo_ms"]) == (2000, 50)
                d = disagg.plan_of(compute_plan(make_inputs(**values), qwen), qwen)
                assert d.requests_per_s == rec.requests_per_s and d.meets_slo is True
                assert d.ttft_p95_ms == pytest.approx(rec.ttft_p95_ms, rel=1e-9) and d.tpot_ms == pytest.approx(rec.itl_p95_ms, rel=1e-9)
    agg = next(x for x in r.recommendations if not x.disaggregated)
    with pytest.raises(PlannerError, match="only a disaggregated deployment has pools"):
        agg.pool_inputs("prefill")


SESSIONS_BASE = {"system_tokens": 0, "tool_tokens": 0, "retrieval_tokens": 0, "user_tokens": 1000, "history_tokens": 1000, "output_tokens": 1000}


def test_a_session_cache_halves_the_prefill_pools_prompt_tokens_and_its_own_prefill():
    """Issue 26 leftover: size --disagg ignored the session cache. Two turns of a 1,000-token
    message and a 1,000-token answer: turn 1's prompt is 1,000 tokens, turn 2's 1,000 + 1,000 +
    1,000 = 3,000, so the mean prompt is 2,000 (the plan's, with 1,000 tokens of history). At 6
    sessions a minute one H100 holds every session: turn 2 finds turn 1's 1,999 tokens with K/V
    (the last answer token is never fed back) as floor(1,999 / 16) = 124 whole 16-token blocks =
    1,984 tokens, so the cache serves 1,984 / 4,000 = 49.6 % and a turn prefills 2,000 x 0.504 =
    1,008 tokens on average: the prefill pool's seconds a prompt are 1,008 / 2,000 of the plain
    prompt's (planner.cache.section.prefill_speedup, the aggregated search's own factor)."""
    from planner.source import preset_ref

    model = preset_ref("llama-3.1-8b")[1]
    plain = disagg.pool_model(model, SESSIONS_BASE, "prefill", "H100-SXM-80GB", 1, 1, "fp8", 2.95)
    cached = disagg.pool_model(model, {**SESSIONS_BASE, "sessions_per_min": 6, "turns": 2, "think_time_s": 1.0}, "prefill", "H100-SXM-80GB", 1, 1, "fp8", 2.95)
    assert plain.cache_hit_rate is None and plain.speedup == 1.0
    assert cached.cache_hit_rate == pytest.approx(1984 / 4000, abs=1e-12)
    assert cached.service_s == pytest.approx(plain.service_s * 1008 / 2000, rel=1e-12)
    # one turn's own prefill (in TTFT) is the mean of the two turns' (it counted the whole 2,000-token
    # prompt before): turn 1 prefills its 1,000 tokens, turn 2 the 3,000 - 1,984 = 1,016 uncached ones
    # beside the 1,984 cached (the step model's prefill_s(new, cached))
    roof = cached.plan.roof
    assert cached.prefill_s == pytest.approx((roof.prefill_s(1000, 0) + roof.prefill_s(1016, 1984)) / 2, rel=1e-12)
    assert plain.prefill_s == pytest.approx(roof.prefill_s(2000, 0), rel=1e-12) and cached.prefill_s < 0.6 * plain.prefill_s


def test_size_disagg_sizes_the_prefill_pool_for_the_uncached_tokens():
    """2,400 sessions a minute x 2 turns = 80 requests/s of 2,000-token prompts. Without the cache
    a prefill replica (H100, TP 1) takes a prompt in s seconds of its token budget and runs at most
    90 % busy: ceil(80 x s / 0.9) = 4 replicas. With it, one replica's GPU pool under all the
    sessions keeps a hit rate h (43 %: the pool cannot hold every session), a turn prefills
    2,000 x (1 - h) tokens on average and the pool needs ceil(80 x s x (1 - h) / 0.9) = 3 replicas;
    the answer says the cache was applied. The same rate without sessions sizes 4."""
    from planner.source import preset_ref

    model = preset_ref("llama-3.1-8b")[1]
    search = dict(ttft_p95_ms=2000, itl_p95_ms=30, gpus=["H100-SXM-80GB"], kv_dtypes=("fp8",), disagg=True)
    with_cache = size(model, {**SESSIONS_BASE, "sessions_per_min": 2400, "turns": 2, "think_time_s": 1.0}, **search)
    assert with_cache.searched["workload"]["rate_per_s"] == pytest.approx(80.0)
    without = size(model, SESSIONS_BASE, rate_per_s=80.0, **search)
    best = next(r for r in with_cache.recommendations if r.disaggregated)
    plain = next(r for r in without.recommendations if r.disaggregated)
    s = disagg.pool_model(model, SESSIONS_BASE, "prefill", "H100-SXM-80GB", 1, 1, "fp8", 2.95).service_s
    h = best.cache_hit_rate
    assert 0.3 < h < 0.5 and plain.cache_hit_rate is None
    mean_prompt = (1000 + 3000) / 2
    assert plain.prefill.replicas == math.ceil(80 * s / disagg.PREFILL_MAX_UTILISATION) == 4
    assert best.prefill.replicas == math.ceil(80 * s * mean_prompt * (1 - h) / 2000 / disagg.PREFILL_MAX_UTILISATION) == 3
    assert best.decode == plain.decode and best.cost_per_hour < plain.cost_per_hour
    assert f"the session cache on its GPUs serves {h:.0%} of them" in with_cache.answer and "session cache" not in without.answer


def test_the_pools_cards_note_names_the_pool_the_plans_own_figures_are(qwen):
    # the Plan page's pools card says whose GPUs the plan's own figures are: the pool with the
    # plan's GPU, TP and GPU count; two pools of one shape (2 x H200 TP 1 each) are each pool's,
    # where it named the prefill pool for the decode link too. The rate reads as the Size page's
    # pools box writes it (rate_text: 4 significant digits; the box wrote 3)
    values = {**BASE, "gpu": "H200-141GB", "tp": 1, "gpu_count": 2, "request_rate": 1.23456}
    both = disagg.plan_disagg(qwen, values, "2P:1@H200-141GB,2D:1@H200-141GB")
    inputs = make_inputs(**values)
    assert disagg.rate_text(1.23456) == "1.235 requests/s"
    assert disagg.own_figures_note(both, inputs) == (
        "The plan's own figures above are each pool's 2 GPUs (2 × H200-141GB TP 1) serving the whole workload aggregated; "
        "the pools in this card serve 1.235 requests/s, every request through both."
    )
    one = disagg.plan_disagg(qwen, values, "2P:1@H200-141GB,1D:2@H200-141GB")
    assert "are the prefill pool's 2 GPUs (2 × H200-141GB TP 1)" in disagg.own_figures_note(one, inputs)
    assert "are its aggregated replicas'" in disagg.own_figures_note(one, make_inputs(**{**values, "gpu_count": 4}))


def test_a_request_rate_past_the_decode_pools_limit_is_timed_at_the_limit():
    # plan_disagg times a plan's request_rate (s4-size); past the decode pool's capacity Little's
    # count has no fixed point: at 100 requests/s on 1P:1,1D:1 H100 it showed an ITL of
    # 1.19e30 ms and an infinite TTFT. The pool now runs at its limit (max_sequences a replica),
    # timed at the rate that serves: limit / (the pull + handover steps + other tokens) at it
    from planner.source import preset_ref

    model = preset_ref("llama-3.1-8b")[1]
    values = {**BASE, "gpu": "H100-SXM-80GB", "tp": 1, "gpu_count": 2, "ttft_slo_ms": 5000, "itl_slo_ms": 200}
    pools = "1P:1@H100-SXM-80GB,1D:1@H100-SXM-80GB"
    fine = disagg.plan_disagg(model, {**values, "request_rate": 1.0}, pools)
    assert fine.requests_per_s == 1.0 and not any("cannot keep up" in n for n in fine.notes)
    d = disagg.plan_disagg(model, {**values, "request_rate": 100.0}, pools)
    dec = disagg.pool_model(model, {k: v for k, v in values.items() if k not in ("gpu", "tp", "gpu_count", "ttft_slo_ms", "itl_slo_ms")}, "decode", "H100-SXM-80GB", 1, 1, "bf16", 2.95)
    limit = dec.max_sequences
    cap = limit / disagg.decode_time_s(dec, limit, d.kv_transfer_ms)
    assert d.decode.sequences_per_replica == limit and d.requests_per_s == pytest.approx(cap, rel=1e-12) and cap < 100
    assert d.tpot_ms == pytest.approx(dec.step_at(limit) * 1e3) and d.tpot_ms < 1e3 and math.isfinite(d.ttft_p95_ms)
    assert d.meets_slo is False and d.output_tokens_per_s == pytest.approx(cap * 1000)
    (note,) = [n for n in d.notes if "cannot keep up" in n]
    assert note.startswith(f"the decode pool cannot keep up with 100 requests/s: at its limit of {limit:,} sequences per replica (memory ")
    assert note.endswith(f") it serves {disagg.rate_text(cap)}; the pools are timed at that rate and the rest queue without bound: add decode replicas")
    # the verdict's aggregated alternative is planned at that same served rate, not the offered 100/s
    # (same GPUs aggregated: 2 H100 replicas at 3.65 requests/s are admitted, at 100/s they were not)
    served = {**values, "request_rate": cap}
    assert d.aggregated == disagg.aggregated_alternative(model, served, dec, d.gpus, make_inputs(**served).sequences) and d.aggregated["admitted"] is True


def test_a_prefill_pool_whose_sessions_do_not_fit_says_why():
    # pool_model returns why a pool cannot run; its session-cache plan (the turns' real answers)
    # raised instead when the answer did not fit in max_context where the prefill's one token did
    from planner.source import preset_ref

    model = preset_ref("llama-3.1-8b")[1]
    base = {**SESSIONS_BASE, "sessions_per_min": 6, "turns": 2, "think_time_s": 1.0, "max_context": 2500}
    why = disagg.pool_model(model, base, "prefill", "H100-SXM-80GB", 1, 1, "fp8", 2.95)
    assert why == "reserved total 3,000 tokens (input 2,000 + output 1,000) exceeds the maximum context you set, 2,500"


def test_a_saturated_prefill_pool_reads_unbounded_not_inf():
    # 20 requests/s of 4,000-token prompts on one H100 prefill replica: 20 x its 65 ms prefill =
    # 130 % utilisation, an M/M/1 queue with no steady state, so TTFT p95 is infinite. Every text
    # said "inf ms" (the card's fmt_ms "inf h"); they say "unbounded" (review finding)
    from planner.source import preset_ref
    from planner.units import fmt_ms

    model = preset_ref("llama-3.1-8b")[1]
    values = {**BASE, "gpu": "H100-SXM-80GB", "tp": 1, "gpu_count": 2, "ttft_slo_ms": 5000, "itl_slo_ms": 200, "request_rate": 20.0}
    d = disagg.plan_disagg(model, values, "1P:1@H100-SXM-80GB,8D:1@H100-SXM-80GB")
    assert math.isinf(d.ttft_p95_ms) and d.meets_slo is False
    text = disagg.describe(d)
    assert "TTFT p95 unbounded = " in text and "prefill queue p95 unbounded" in text and "inf" not in text
    assert disagg.pool_slo(d, "prefill") == "saturated (130% busy): TTFT unbounded"
    assert fmt_ms(math.inf) == "unbounded" and fmt_ms(math.nan) == "–"
