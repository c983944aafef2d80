"""Plan core: the seeds' numbers, each beside its arithmetic; admission; paged/static; sharing."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from planner import capacity, latency
from planner.cli import main
from planner.errors import PlannerError
from planner.kv import inspect_config
from planner.plan import EXAMPLE_CONFIG, EXAMPLE_INPUTS, compute_plan, example_model, grid, grid_limits, make_inputs, prepare_model, suggest_inputs
from planner.source import preset_ref

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def example(**update):
    return compute_plan(EXAMPLE_INPUTS.model_copy(update=update), example_model())


# ---------------------------------------------------------------- the seed example


def test_seed_example_exactly():
    p = example()
    # system 128 + tools 256 + retrieval 512 + history 640 + user 512 = 2,048; + 512 output = 2,560 of 4,096
    c = p.context
    assert (c.input_tokens, c.reserved_output_tokens, c.reserved_total_tokens, c.unreserved_tokens) == (2048, 512, 2560, 1536)
    kv = p.kv_cache
    assert kv.bytes_per_token_per_sequence == 131072  # 2 x 32 x 8 x 128 x 2
    assert kv.mib_per_reserved_sequence == 320  # 131,072 x 2,560 / 2^20
    assert kv.requested_sequences == 8
    # usable = 16 GiB x 0.9 = 15,461,882,265 B (floored); - 5 GiB fixed = 10,093,173,145; / 335,544,320 = 30.08 -> 30
    assert p.capacity.usable_bytes == 15461882265
    assert p.capacity.available_for_kv_bytes == 10093173145
    assert kv.maximum_sequences_by_memory == 30
    assert kv.admitted is True
    lat = p.latency
    assert lat.time_to_first_token_ms == 450.0  # 20 + 10 + 400 + 20
    assert lat.prefill_tokens_per_second == 5120.0  # 2048 / 0.4
    assert lat.output_tokens_per_second == 50.0  # 129 / (0.020 + 2.560)
    assert lat.mean_inter_token_latency_ms == 20.0  # 2560 / (129 - 1)
    assert lat.end_to_end_ms == 3010.0  # 450 + 2560


def test_plan_sections_are_frozen_records_read_by_name():
    p = example()
    summary = p.summary()
    for name, key in (("kv_cache", "kv_cache"), ("capacity", "capacity"), ("roofline", "roofline"), ("prefix", "prefix_sharing"), ("cost", "cost"), ("work", "work")):
        section = getattr(p, name)
        assert getattr(p, name) is section  # built once, on first read
        first = dataclasses.fields(section)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(section, first, None)
        assert section.to_json() == summary[key]
    with pytest.raises(AttributeError):
        p.kv_cache.admissable_sequences  # noqa: B018 - a mistyped field fails loudly
    with pytest.raises(TypeError):
        p.kv_cache["admitted"]  # noqa: B018 - no dict access left
    summary["kv_cache"]["limits"]["memory"] = -1  # a caller's JSON is its own
    assert p.kv_cache.limits["memory"] == 30


def test_seed_refusal_31_sequences():
    p = example(sequences=31)
    assert p.kv_cache.admitted is False
    assert p.kv_cache.admission_error == "requested 31 sequences, but the conservative KV-memory plan admits at most 30"
    assert p.kv_cache.binding_constraint == "memory"


def test_cli_plan_example_json_matches_seed():
    proc = subprocess.run([sys.executable, "-m", "planner", "plan", "--example", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["context"] == {**out["context"], "input_tokens": 2048, "reserved_output_tokens": 512, "reserved_total_tokens": 2560, "unreserved_tokens": 1536}
    assert {k: out["kv_cache"][k] for k in ("bytes_per_token_per_sequence", "mib_per_reserved_sequence", "requested_sequences", "maximum_sequences_by_memory", "admitted")} == {
        "bytes_per_token_per_sequence": 131072, "mib_per_reserved_sequence": 320, "requested_sequences": 8, "maximum_sequences_by_memory": 30, "admitted": True,
    }
    assert {k: out["latency"][k] for k in ("time_to_first_token_ms", "prefill_tokens_per_second", "output_tokens_per_second", "mean_inter_token_latency_ms", "end_to_end_ms")} == {
        "time_to_first_token_ms": 450.0, "prefill_tokens_per_second": 5120.0, "output_tokens_per_second": 50.0, "mean_inter_token_latency_ms": 20.0, "end_to_end_ms": 3010.0,
    }


def test_cli_refusal_exits_0_with_admission_error(capsys):
    assert main(["plan", "--example", "--sequences", "31", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_cache"]["admitted"] is False
    assert out["kv_cache"]["admission_error"] == "requested 31 sequences, but the conservative KV-memory plan admits at most 30"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--headroom-bp", "-1"], "--headroom-bp"),
        (["--headroom-bp", "10000"], "headroom"),
        (["--user-tokens", "0", "--system-tokens", "0", "--tool-tokens", "0", "--retrieval-tokens", "0", "--history-tokens", "0"], "input"),
        (["--output-tokens", "0"], "--output-tokens"),
        (["--gpu", "NOPE-9000"], "unknown GPU"),
        (["--prefill-ms", "nan"], "--prefill-ms"),
        (["--queue-ms", "inf"], "--queue-ms"),
        (["--input-tokens", "5000"], "exceeds the model maximum of 4,096"),
        (["--model-resident-gib", "15"], "refuses to start"),  # vLLM: weights 15 + workspace 1 GiB > 16 x 0.9
        (["--tp", "3"], "tensor parallel size 3"),
    ],
)
def test_cli_invalid_values_exit_2_one_line(argv, needle):
    proc = subprocess.run([sys.executable, "-m", "planner", "plan", "--example", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- reservation modes


def test_static_reservation_uses_configured_maximum():
    p = example(reservation="static")
    # 131,072 x 4,096 = 536,870,912 B = 512 MiB; 10,093,173,145 / 536,870,912 = 18.8 -> 18
    assert p.kv_cache.bytes_per_reserved_sequence == 536870912
    assert p.kv_cache.maximum_sequences_by_memory == 18
    assert p.kv_cache.static_waste_bytes == 131072 * (4096 - 2560)


def test_paged_rounding_and_waste():
    # output 500 -> 2,548 tokens -> ceil(2548 / 16) = 160 blocks = 2,560 slots; waste 12 x 131,072
    p = example(reservation="paged", output_tokens=500)
    assert p.kv_cache.bytes_per_reserved_sequence == 160 * 16 * 131072
    assert p.kv_cache.paged_waste_bytes == 12 * 131072 == 1572864
    assert p.kv_cache.blocks_per_layer == {"full": 160}
    # block 256: ceil(2548/256) = 10 blocks = 2,560 slots too; block 1: no waste
    assert example(reservation="paged", output_tokens=500, block_tokens=1).kv_cache.paged_waste_bytes == 0


def test_paged_sliding_layers_capped_at_window_plus_one_block():
    cfg = {**EXAMPLE_CONFIG, "sliding_window": 1000, "max_position_embeddings": 8192}
    model = prepare_model(cfg)
    p = compute_plan(EXAMPLE_INPUTS.model_copy(update={"reservation": "paged", "block_tokens": 16}), model)
    # window 1,000 -> ceil(1000/16) + 1 = 64 blocks (not ceil(2560/16) = 160)
    assert p.kv_cache.blocks_per_layer == {"sliding-1000": 64}
    assert p.kv_cache.bytes_per_reserved_sequence == 64 * 16 * 131072


# ---------------------------------------------------------------- prefix sharing


def test_prefix_sharing_whole_blocks_only():
    # 100 shared tokens with 16-token blocks: 6 whole blocks (96 tokens) held once
    p = example(reservation="paged", shared_prefix_tokens=100)
    assert p.prefix.shared_blocks == 6
    saved = 96 * 131072
    assert p.prefix.bytes_saved_per_extra_sequence == saved == 12582912
    # 8 sequences of one tenant: 7 of them skip the shared blocks
    assert p.prefix.memory_saved_at_requested_bytes == 7 * saved
    # N x 335,544,320 - (N - 1) x 12,582,912 <= 10,093,173,145 -> N = floor((10,093,173,145 - 12,582,912) / 322,961,408) = 31
    assert p.prefix.maximum_sequences_with_sharing == 31
    assert p.prefix.extra_sequences == 1
    # 15 tokens share no whole block
    assert example(reservation="paged", shared_prefix_tokens=15).prefix.bytes_saved_per_extra_sequence == 0


def test_prefix_scoped_per_tenant_and_cached_prefill_skipped():
    one = example(reservation="paged", shared_prefix_tokens=1024, prefix_hit_rate=1.0, queue_ms=None, prefill_ms=None, first_decode_ms=None, remaining_decode_ms=None)
    four = example(reservation="paged", shared_prefix_tokens=1024, tenants=4)
    assert four.prefix.memory_saved_at_requested_bytes == (8 - 4) * 1024 * 131072
    assert one.prefix.memory_saved_at_requested_bytes == (8 - 1) * 1024 * 131072
    none = example(reservation="paged", queue_ms=None, prefill_ms=None, first_decode_ms=None, remaining_decode_ms=None)
    assert one.estimate.prefill_ms < none.estimate.prefill_ms  # 1,024 cached tokens skip prefill
    miss = example(reservation="paged", shared_prefix_tokens=1024, prefix_hit_rate=0.0, queue_ms=None, prefill_ms=None, first_decode_ms=None, remaining_decode_ms=None)
    assert miss.estimate.prefill_ms == pytest.approx(none.estimate.prefill_ms)


# ---------------------------------------------------------------- capacity and admission


def test_headroom_in_basis_points_without_overflow():
    # 16 GiB x (10000 - 1000) / 10000 with quotient/remainder: 1,717,986 x 9,000 + 9,184 x 9,000 // 10,000
    assert capacity.usable_bytes(16 * GIB, 1000) == 1717986 * 9000 + 9184 * 9000 // 10000
    huge = 2**80 + 12345
    assert capacity.usable_bytes(huge, 2500) == huge * 7500 // 10000
    with pytest.raises(PlannerError, match="headroom"):
        capacity.usable_bytes(GIB, 10000)


def test_fixed_memory_above_usable_is_clear_error():
    # runtime vllm: 16 GiB x 0.9 = 14.4 GiB budget; weights 14 + workspace 1 = 15 GiB: vLLM's refusal
    # with the numbers, short by 0.60 GiB
    with pytest.raises(PlannerError, match="refuses to start: No available memory for the cache blocks") as err:
        example(model_resident_gib=14.0)
    assert "short by 0.60 GiB" in str(err.value) and "budget 14.40 GiB" in str(err.value)
    with pytest.raises(PlannerError, match="exceeds usable"):  # other runtimes: the planner's own budget
        example(model_resident_gib=14.0, runtime="transformers")


def test_tp_replication_in_capacity():
    # tp 16 on 8 KV heads: one (replicated) KV head per GPU: 2 x 32 x 1 x 128 x 2 = 16,384 B/token
    p = example(tp=16, gpu_count=16)
    assert p.kv_cache.bytes_per_token_per_sequence == 16384
    assert any("replicated" in n for n in p.notes)
    # tp 2 halves the per-GPU bytes: 65,536 x 2,560 = 160 MiB; floor(10,093,173,145 / 167,772,160) = 60
    p2 = example(tp=2, gpu_count=2)
    assert p2.kv_cache.mib_per_reserved_sequence == 160
    assert p2.kv_cache.maximum_sequences_by_memory == 60


def test_data_parallel_replicas_multiply_capacity():
    assert example(gpu_count=2).kv_cache.maximum_sequences_by_memory == 60  # 2 replicas x 30


def test_admission_takes_minimum_and_names_binding():
    assert example(max_num_seqs=12, sequences=13).kv_cache.admission_error == "requested 13 sequences, but the runtime's maximum number of sequences admits at most 12"
    p = example(tenant_quota=5, sequences=6)
    assert p.kv_cache.binding_constraint == "tenant_quota"
    assert p.kv_cache.admissible_sequences == 5
    assert example(tenant_quota=40).kv_cache.binding_constraint == "memory"


def test_latency_slo_limit_is_largest_concurrency_meeting_itl():
    # the ITL SLO bounds the p95 of the gaps between tokens (the plan's served-latency model)
    base = example()
    itl_1 = compute_plan(base.inputs.model_copy(update={"sequences": 1}), example_model()).roofline.itl_p95_ms
    slo = itl_1 * 1.05
    p = example(itl_slo_ms=slo, sequences=30)
    limit = p.kv_cache.limits["latency_slo"]
    assert 1 <= limit < 30
    ok = compute_plan(base.inputs.model_copy(update={"sequences": limit}), example_model()).roofline.itl_p95_ms
    over = compute_plan(base.inputs.model_copy(update={"sequences": limit + 1}), example_model()).roofline.itl_p95_ms
    assert ok <= slo < over
    assert p.kv_cache.binding_constraint == "latency_slo"


def test_largest_within_is_the_last_concurrency_meeting_the_bound():
    # hand arithmetic: c^2 <= 50 holds up to c = 7 (49), not at 8 (64); the SLO limits bisect with it
    calls: list[int] = []

    def square(c: int) -> int:
        calls.append(c)
        return c * c

    assert capacity.largest_within(square, 50, 100) == 7
    assert len(calls) <= 1 + math.ceil(math.log2(100))  # cost(1), then one call per halving
    assert capacity.largest_within(square, 50, 5) == 5  # the top itself meets the bound
    assert capacity.largest_within(square, 0.5, 100) == 0  # even one misses it
    assert capacity.largest_within(square, 1, 1) == 1


def test_pool_view_tokens_and_concurrency():
    p = example()
    # 10,093,173,145 // 131,072 = 77,004 tokens; 10,093,173,145 / 335,544,320 = 30.08x at 2,560 tokens
    assert p.capacity.pool_kv_tokens == 77004
    assert p.capacity.max_concurrency_at_reserved_tokens == 30.08


def test_cost_per_million_tokens():
    p = example(gpu_hour_price=3.6)
    out_tps = p.cost.output_tokens_per_second
    assert p.cost.per_million_output_tokens == pytest.approx(3.6 / (out_tps * 3600) * 1e6)
    assert p.cost.per_million_input_tokens > 0


# ---------------------------------------------------------------- latency: observed and roofline


def test_observation_validation():
    ok = dict(prompt_tokens=10, generated_tokens=1, queue_ms=0, preprocessing_ms=0, prefill_ms=5, first_decode_ms=1, remaining_decode_ms=0)
    assert latency.observe(latency.LatencyObservation(**ok)).mean_inter_token_latency_ms == 0.0
    for bad, field in [({"remaining_decode_ms": 3}, "remaining_decode_ms"), ({"prefill_ms": 0}, "prefill_ms"), ({"queue_ms": -1}, "queue_ms"), ({"first_decode_ms": float("nan")}, "first_decode_ms"), ({"prompt_tokens": 0}, "prompt_tokens")]:
        with pytest.raises(PlannerError) as err:
            latency.observe(latency.LatencyObservation(**{**ok, **bad}))
        assert err.value.field == field


def test_decode_step_table_14gb_1tbs():
    # step = (14e9 + cache bytes) / 1e12 with MBU 1: MHA 524,288 B/token, GQA 131,072 B/token
    roof = latency.Roofline(weights_bytes=14e9, active_params=7e9, attn_layers=32, q_heads=32, head_dim=128, peak_flops=1e30, bandwidth_bytes_s=1e12, mfu=1.0, mbu=1.0)
    mha = inspect_config({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096})
    gqa = inspect_config({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096})
    got = [(round(roof.decode_step_s(1, mha.specs[0].bytes_at(n), n) * 1000, 1), round(roof.decode_step_s(1, gqa.specs[0].bytes_at(n), n) * 1000, 1)) for n in (1000, 8192, 32000)]
    assert got == [(14.5, 14.1), (18.3, 15.1), (30.8, 18.2)]
    # tokens/s for MHA: 68.9, 54.7, 32.5
    assert [round(1000 / roof.decode_step_s(1, mha.specs[0].bytes_at(n), n) / 1000, 1) for n in (1000, 8192, 32000)] == [68.9, 54.7, 32.5]


def test_sixteen_requests_68_7_vs_17_2_gb():
    mha = inspect_config({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}, tokens=8192)
    gqa = inspect_config({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}, tokens=8192)
    assert round(16 * mha.kv_bytes_at_tokens / 1e9, 1) == 68.7  # 524,288 x 8,192 x 16
    assert round(16 * gqa.kv_bytes_at_tokens / 1e9, 1) == 17.2


def test_llama_70b_table():
    r = inspect_config({"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192})
    per = r.kv_bytes_per_token  # 327,680
    assert [round(per * n / 1e9, 2) for n in (4096, 32000, 128000)] == [1.34, 10.49, 41.94]
    assert round(per * 4096 * 32 / 1e9, 1) == 42.9


def test_operation_counts_and_ratios():
    assert latency.layer_operations(4, 3) == (496, 240)  # 72+160+264 vs 72+80+88
    no, yes = latency.layer_operations(128, 1000)
    assert round(no / yes) == 611
    # per-step attention at d_model 4,096: n = 100 -> 163.8 M vs 1.64 M; n = 2,000 -> 65.54 G vs 32.77 M
    assert [round(x / 1e6, 2) for x in latency.attention_flops_per_step(100, 4096)] == [163.84, 1.64]
    naive, cached = latency.attention_flops_per_step(2000, 4096)
    assert (round(naive / 1e9, 2), round(cached / 1e6, 2)) == (65.54, 32.77)
    naive, cached = latency.cumulative_projection_flops(2048, 4096)
    assert round(naive / cached) == 1024  # (N + 1) / 2 = 1,024.5
    assert latency.generation_projections(3, 3) == (12, 5)  # 3 + 4 + 5 vs 3 + 2
    assert latency.feed_projections(4, 2) == (21, 6)  # 1 + ... + 6 vs 4 + 1 + 1


def test_roofline_estimate_is_consistent():
    p = example(queue_ms=None, preprocessing_ms=None, prefill_ms=None, first_decode_ms=None, remaining_decode_ms=None, generated_tokens=None)
    est = p.latency
    assert est.source == "roofline estimate"
    assert est.time_to_first_token_ms == pytest.approx(est.queue_ms + est.preprocessing_ms + est.prefill_ms + est.first_decode_ms)
    assert est.end_to_end_ms == pytest.approx(est.time_to_first_token_ms + est.remaining_decode_ms)
    assert p.roofline.ridge_flops_per_byte > p.roofline.decode_intensity  # decode is memory-bound
    assert math.isfinite(p.roofline.prefill_intensity)


def test_make_inputs_names_bad_field():
    with pytest.raises(PlannerError) as err:
        make_inputs(headroom_bp=-5)
    assert err.value.field == "headroom_bp"
    with pytest.raises(PlannerError) as err:
        make_inputs(tp=2, gpu_count=3)
    assert err.value.field == "gpu_count"
    with pytest.raises(PlannerError) as err:
        make_inputs(prefill_ms=float("nan"))
    assert err.value.field == "prefill_ms"


def test_plan_reports_work_with_and_without_cache():
    w = example().work
    # 2,048 prompt + 129 generated = 2,177 positions; 32 layers of d_model 4,096
    assert w.attention_flops_last_step_without_cache == 32 * 4 * 2177 * 2177 * 4096
    assert w.attention_flops_last_step_with_cache == 32 * 4 * 2177 * 4096
    # projections: 2,048 + 2,049 + ... + 2,176 (129 passes) vs 2,048 + 128
    assert w.token_projections_without_cache == sum(range(2048, 2177))
    assert w.token_projections_with_cache == 2176


def test_headroom_and_window_figures():
    p = example()
    assert p.capacity.headroom_bytes == 16 * GIB - 15461882265
    assert p.kv_cache.bytes_per_token_within_windows == 131072
    slid = compute_plan(EXAMPLE_INPUTS, prepare_model({**EXAMPLE_CONFIG, "sliding_window": 1024}))
    # every layer is sliding: nothing grows past the window, but below it each token costs 131,072 B
    assert slid.kv_cache.bytes_per_token_per_sequence == 0
    assert slid.kv_cache.bytes_per_token_within_windows == 131072
    assert slid.kv_cache.kv_bytes_per_reserved_sequence == 131072 * 1024


def test_grid_limits_agree_with_grid():
    contexts = [1024, 2560, 4096, 8192]
    limits = grid_limits(EXAMPLE_INPUTS, example_model(), contexts)
    # 2,560 tokens: 30 (the seed); 4,096 (the maximum): floor(10,093,173,145 / 536,870,912) = 18; 8,192 > max: -1
    assert limits[1:] == [30, 18, -1]
    cells = grid(EXAMPLE_INPUTS, example_model(), contexts, [1, 18, 19, 30, 31])
    assert cells[1] == [True, True, True, True, False]
    assert cells[2] == [True, True, False, False, False]
    assert cells[3] == [False] * 5


def test_suggest_inputs_makes_presets_plannable():
    _ref, big = preset_ref("llama-3.1-70b")
    updates, why = suggest_inputs(big, {})
    # ~131 GiB of bf16 weights: 2 x 80 GiB H100 leaves too little; 4 fits
    assert updates == {"tp": 4, "gpu_count": 4}
    assert "tensor parallelism 4" in why[0]
    assert compute_plan(make_inputs(**updates), big).kv_cache.maximum_sequences_by_memory > 0
    _ref, small = preset_ref("mpt-7b")  # 2,048-token maximum below the default 2,560 reserved
    updates, why = suggest_inputs(small, {})
    assert updates["input_tokens"] + updates["output_tokens"] == 2048
    assert suggest_inputs(example_model(), EXAMPLE_INPUTS.model_dump(exclude_defaults=True)) == ({}, [])


def test_custom_device_bandwidth_drives_the_memory_bound_decode():
    base = dict(queue_ms=None, preprocessing_ms=None, prefill_ms=None, first_decode_ms=None, remaining_decode_ms=None)
    slow = example(**base, device_bandwidth_gb_s=1000.0, device_bf16_tflops=1e5)
    fast = example(**base, device_bandwidth_gb_s=2000.0, device_bf16_tflops=1e5)
    # with compute effectively free, the step is a fixed cost per layer (launches, norms and, since
    # the serving fit, the gaps between a real run's kernels: not bandwidth) and the engine's host
    # work per step and per sequence, plus bytes / (bandwidth x MBU): twice the bandwidth, half the
    # bandwidth-bound part
    e = latency.FITTED
    sequences = slow.roofline.decode_concurrency
    fixed_ms = (32 * (e.gemm_layer_s + e.attn_layer_s + e.layer_s + e.serve_layer_s) + e.step_s + sequences * e.seq_s) * 1e3
    # the decode-only step of the same batch exactly (the closed loop's own decode figures average
    # the sequences decoding, a share of the cycle that moves with the TTFT and so with the
    # bandwidth too); the mean ITL within 5 %: the few steps that carry a prompt's chunk pay the
    # host work of one more sequence, and their share of the steps moves with the step time
    kv = sum(sp.bytes_at(2304) for sp in slow.inspect.specs)
    slow_ms, fast_ms = (p.roof.decode_step_s(sequences, kv, 2304) * 1e3 for p in (slow, fast))
    assert fast_ms - fixed_ms == pytest.approx((slow_ms - fixed_ms) / 2, rel=1e-9)
    assert fast.estimate.mean_inter_token_latency_ms - fixed_ms == pytest.approx((slow.estimate.mean_inter_token_latency_ms - fixed_ms) / 2, rel=0.05)
    assert fast.device.bandwidth_gb_s == 2000.0


def test_float32_checkpoint_is_planned_in_16_bit_unless_asked():
    _ref, model = preset_ref("gemma-2-9b")  # published with torch_dtype float32
    auto = model.weights("auto")
    norms = 42 * 4 * 3584 + 3584  # 42 layers x 4 RMSNorms (Gemma 2) x hidden 3,584, and the final norm
    assert auto.bytes == (auto.total_params + norms) * 2
    assert "served 16-bit" in auto.source
    assert model.weights("fp32").bytes == (auto.total_params + norms) * 4


def test_cross_attention_encoder_tokens_count_per_sequence():
    _ref, vision = preset_ref("llama-3.2-11b-vision")
    base = make_inputs()
    without = compute_plan(base, vision)
    # 4 image tiles x 1,601 tokens; 8 cross layers x 8 KV heads x (128 + 128) x 2 B = 32,768 B per image token
    with_images = compute_plan(base.model_copy(update={"encoder_tokens": 6404}), vision)
    assert with_images.kv_cache.encoder_bytes_per_sequence == 32768 * 6404 == 209846272
    assert with_images.kv_cache.bytes_per_reserved_sequence == without.kv_cache.bytes_per_reserved_sequence + 209846272
    assert with_images.kv_cache.maximum_sequences_by_memory < without.kv_cache.maximum_sequences_by_memory
    # paged: whole blocks of 16: ceil(6404 / 16) = 401 blocks = 6,416 slots
    paged = compute_plan(base.model_copy(update={"encoder_tokens": 6404, "reservation": "paged"}), vision)
    assert paged.kv_cache.encoder_bytes_per_sequence == 32768 * 6416
    assert paged.kv_cache.blocks_per_layer["cross"] == 401


# ---------------------------------------------------------------- review findings, pinned


def test_chunked_layers_reserve_a_whole_chunk():
    # Llama 4: a chunked layer holds T mod C now, but a request grows through a full chunk
    _ref, scout = preset_ref("llama-4-scout")
    at_8192 = compute_plan(make_inputs(input_tokens=7680, output_tokens=512, tp=8, gpu_count=8, gpu="H200-141GB"), scout)
    at_8193 = compute_plan(make_inputs(input_tokens=7681, output_tokens=512, tp=8, gpu_count=8, gpu="H200-141GB"), scout)
    assert at_8193.kv_cache.bytes_per_reserved_sequence >= at_8192.kv_cache.bytes_per_reserved_sequence
    assert at_8193.kv_cache.maximum_sequences_by_memory <= at_8192.kv_cache.maximum_sequences_by_memory


def test_prefix_sharing_per_replica_and_only_in_paged_engines():
    # 2 replicas x 4 sequences; 1,024 shared tokens = 64 blocks of 131,072 x 16 B = 134,217,728 B each
    p = example(gpu_count=2, shared_prefix_tokens=1024)
    assert p.kv_cache.kv_bytes_at_requested == 4 * 335544320 - 3 * 134217728 == 939524096
    assert p.prefix.memory_saved_at_requested_bytes == 2 * 3 * 134217728
    eager = example(runtime="transformers", shared_prefix_tokens=1024)
    assert eager.prefix.applies is False and eager.prefix.bytes_saved_per_extra_sequence == 0
    assert any("not deduplicated" in n for n in eager.notes)
    with pytest.raises(PlannerError, match="shared prefix cannot exceed"):
        example(reservation="static", shared_prefix_tokens=5000)


def test_observed_latency_must_be_complete():
    with pytest.raises(PlannerError) as err:
        example(first_decode_ms=None)
    assert err.value.field == "first_decode_ms"
    with pytest.raises(PlannerError) as err:
        example(remaining_decode_ms=None)
    assert err.value.field == "remaining_decode_ms"
    with pytest.raises(PlannerError) as err:
        example(generated_tokens=600)  # output reserve is 512
    assert err.value.field == "generated_tokens"


def test_workspace_overflow_names_workspace():
    with pytest.raises(PlannerError) as err:
        example(workspace_gib=100.0)
    assert err.value.field == "workspace_gib"


def test_moe_weights_from_nested_ffn_config_and_llama4_shared_expert():
    _ref, dbrx = preset_ref("dbrx")  # 132 B total, 36 B active (Databricks)
    w = dbrx.weights("auto")
    assert 125e9 < w.total_params < 140e9 and 33e9 < w.active_params < 40e9
    _ref, scout = preset_ref("llama-4-scout")  # 109 B total with vision, ~107.8 B text; 17 B active
    w = scout.weights("auto")
    assert 105e9 < w.total_params < 110e9 and 16e9 < w.active_params < 18e9


def test_roofline_attention_respects_windows():
    kw = dict(weights_bytes=1e9, active_params=0.0, attn_layers=2, q_heads=1, head_dim=1, peak_flops=1e12, bandwidth_bytes_s=1e12)
    full = latency.Roofline(**kw)
    windowed = latency.Roofline(**kw, windows=(4,))
    # decode at context 10: full 4 x (10 + 10) = 80 FLOPs; one layer windowed at 4: 4 x (10 + 4) = 56
    assert full.decode_flops_per_token(10) == 80 and windowed.decode_flops_per_token(10) == 56
    # prefill of 10: full layer 10^2 / 2 = 50 pairs; window 4: 1+2+3+4 + 6 x 4 = 34 pairs; x 4 FLOPs
    assert full.prefill_flops(10) == 4 * (50 + 50)
    assert windowed.prefill_flops(10) == 4 * (50 + 34)


def test_moe_decode_reads_only_the_experts_its_tokens_route_to():
    kw = dict(weights_bytes=10e9, active_params=0.0, attn_layers=1, q_heads=1, head_dim=1, peak_flops=1e30, bandwidth_bytes_s=1e12, mbu=1.0)
    moe = latency.Roofline(**kw, expert_bytes=8e9, num_experts=8, experts_per_token=2)
    # one token touches 2 of 8 experts: 2 GB dense + 8 GB x (1 - (6/8)^1) = 4 GB -> 4 ms at 1 TB/s
    assert moe.weights_read(1) == pytest.approx(4e9)
    assert moe.decode_step_s(1, 0, 1) == pytest.approx(4e-3)
    # 8 tokens: 1 - 0.75^8 = 89.99 % of the experts
    assert moe.weights_read(8) == pytest.approx(2e9 + 8e9 * (1 - 0.75**8))
    assert latency.Roofline(**kw).weights_read(1) == 10e9  # dense: every weight, every step
    _ref, gpt_oss = preset_ref("gpt-oss-120b")
    w = gpt_oss.weights("auto")
    assert (w.num_experts, w.experts_per_token) == (128, 4)
    assert w.expert_bytes == int(w.expert_params * 4.25 / 8)  # mxfp4 experts
