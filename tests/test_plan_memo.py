"""The plan's speed-ups change no number: the Roofline's step memo, the shared Rooflines and the
memoised engine view return what a cold computation returns (issue 12: plan time < 100 us;
benchmarks/plan_equivalence.py compares 3,075 plans with another revision's planner)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from planner import latency
from planner import plan as plan_module
from planner.limits import size_of
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset


def _cold() -> None:
    plan_module._ROOFLINES.clear()
    plan_module._ENGINE_VIEWS.clear()
    plan_module._CONTEXTS.clear()


def test_a_plan_is_the_same_with_cold_and_warm_caches():
    model = prepare_model(load_preset("qwen3-30b-a3b"))
    a = make_inputs(gpu="H100-SXM-80GB", tp=2, gpu_count=2, sequences=8, itl_slo_ms=30.0, ttft_slo_ms=2000.0)
    others = [a.model_copy(update=u) for u in ({"sequences": 40}, {"input_tokens": 4096}, {"ep": 2}, {"itl_slo_ms": 12.0})]
    _cold()
    cold = compute_plan(a, model)
    for other in others:  # warm the shared Roofline's memo with other loads, contexts and limits
        compute_plan(other, model)
    warm = compute_plan(a, model)
    assert warm.roof is cold.roof  # one Roofline for one set of field values, memo and all
    assert warm.summary() == cold.summary()
    assert warm.kv_cache.engine is cold.kv_cache.engine  # one memoised view: frozen, so plans share it
    with pytest.raises(dataclasses.FrozenInstanceError):
        warm.kv_cache.engine.num_blocks = 0
    summary = warm.summary()
    assert summary["kv_cache"]["engine"]["log_lines"] is not warm.summary()["kv_cache"]["engine"]["log_lines"]  # a caller's JSON is its own
    summary["context"]["components"]["user_tokens"] = -1  # a caller's JSON is its own: the shared context budget is untouched
    assert compute_plan(a, model).context.components["user_tokens"] == a.user_tokens
    _cold()
    assert compute_plan(a, model).summary() == cold.summary()


def test_memoised_steps_equal_a_fresh_rooflines():
    roof = compute_plan(make_inputs(gpu="H200-141GB", tp=4, gpu_count=4, sequences=16), prepare_model(load_preset("llama-3.1-70b"))).roof
    steps = [(1, 1, 0.0, 0.0, 0), (8, 8, 8 * 3e8, 1e12, 0), (8, 1, 8 * 3e8, 1e12, 0), (2048, 1, 0.0, 5e13, 2048), (2048, 1, 0.0, 5e13, 4096), (8192, 4, 0.0, 2e14, 2048)]
    for args in steps:
        roof.terms(*args)  # warm
    for args in steps:
        fresh = dataclasses.replace(roof)  # same fields, empty memo
        assert roof.terms(*args) == fresh.terms(*args)
        assert roof.step_s(*args) == sum(fresh.terms(*args).values())  # the same float, not just close
    assert roof.decode_step_s(16, 3e8, 3000) == sum(roof.decode_terms(16, 3e8, 3000).values())
    assert roof.prefill_s(2048, 512) == sum(roof.prefill_terms(2048, 512).values())
    terms = roof.terms(*steps[1])
    terms["dense_gemm"] = -1.0  # a caller's dict is its own: the memo is untouched
    assert roof.terms(*steps[1])["dense_gemm"] > 0
    assert "_k" not in roof.model_dump()  # derived state is not a result field


def test_the_step_memo_is_bounded():
    roof = latency.Roofline(weights_bytes=1e9, active_params=5e8, attn_layers=4, q_heads=8, head_dim=64, peak_flops=1e14, bandwidth_bytes_s=1e12)
    for n in range(1, 3 * latency._MEMO_ENTRIES):
        roof.decode_step_s(n, 1e6, 100)
    assert len(roof._k.memo) <= latency._MEMO_ENTRIES


def test_size_of_counts_each_leaf_once_and_stops_64_levels_down():
    # hand arithmetic with sys.getsizeof: a shared leaf is charged once, a dict's keys and values
    # both, and nothing deeper than 64 levels (the leaf fast path in limits.size_of keeps all three)
    leaf = "a shared string"
    obj = {"k": [leaf, leaf, 7, None]}
    assert size_of(obj) == sys.getsizeof(obj) + sys.getsizeof("k") + sys.getsizeof(obj["k"]) + sys.getsizeof(leaf) + sys.getsizeof(7) + sys.getsizeof(None)
    value = 12345.5
    levels: list[list] = [[]]  # levels[d] sits at depth d and holds the value and levels[d + 1]
    for _ in range(70):
        levels.append([value])
        levels[-2].append(levels[-1])
    assert size_of(levels[0]) == sum(sys.getsizeof(x) for x in levels[:65]) + sys.getsizeof(value)
