"""Engine parity: planner.engines.vllm against numbers computed by vLLM's own code.

``tests/data/vllm_engine_cases.json`` is written by ``scripts/gen_vllm_engine_cases.py`` in a
throw-away venv holding vllm 0.33.0 (never in CI): every reference config and every preset at
several (tp, kv dtype, max_model_len, available memory) settings, with vLLM's groups, blocks,
tokens, concurrency and refusals. The fixture carries the configs, so this test needs nothing else.
The two published start-up logs (vLLM 0.10.1) are checked against the numbers vLLM printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.engines import EngineRefusal, vllm_capacity
from planner.errors import PlannerError

DATA = json.loads((Path(__file__).parent / "data" / "vllm_engine_cases.json").read_text())
CASES = DATA["cases"]
CONFIGS = DATA["configs"]
SIZED = [c for c in CASES if "num_blocks" in c]
REFUSED = [c for c in CASES if "refusal" in c or "config_error" in c or "unsupported" in c]


def _id(c: dict) -> str:
    return f"{Path(c['source']).stem}-tp{c['tp']}-{c['kv_cache_dtype']}-{c['max_model_len']}-{c.get('available_kv_bytes', 0) >> 20}MiB"


def _run(c: dict, **over):
    args = dict(available_kv_bytes=c["available_kv_bytes"], tp=c["tp"], kv_cache_dtype=c["kv_cache_dtype"], max_model_len=c["max_model_len"], max_num_batched_tokens=c["max_num_batched_tokens"], prefix_caching=c["enable_prefix_caching"], vllm_version="0.33")
    args.update(over)
    return vllm_capacity(CONFIGS[c["source"]], **args)


def test_fixture_covers_every_family():
    assert DATA["vllm_version"] == "0.33.0"
    assert len(SIZED) >= 300 and len(REFUSED) >= 40
    kinds = {g["kind"] for c in SIZED for g in c["groups"]}
    assert {"full", "sliding", "mla", "mamba"} <= kinds
    assert not [c for c in CASES if "error" in c]  # every case ran through vLLM


@pytest.mark.parametrize("case", SIZED, ids=[_id(c) for c in SIZED])
def test_sized_case_matches_vllm(case):
    r = _run(case)
    assert r.num_blocks == case["num_blocks"]
    assert r.blocks_per_request == case["blocks_per_request"]
    assert r.kv_cache_tokens == case["kv_cache_tokens"]
    assert f"{r.max_concurrency:.2f}" == f"{case['max_concurrency']:.2f}"
    assert r.max_concurrency == pytest.approx(case["max_concurrency"], rel=1e-12)
    assert [(g.kind, g.layers, g.block_size, g.page_bytes, g.blocks_per_request) for g in r.groups] == [
        (g["kind"], g["layers"], g["block_size"], g["page_bytes"], g["blocks_per_request"]) for g in case["groups"]
    ]


@pytest.mark.parametrize("case", REFUSED, ids=[_id(c) for c in REFUSED])
def test_refused_case_matches_vllm(case):
    with pytest.raises(EngineRefusal) as err:
        _run(case)
    if "refusal" in case:
        assert err.value.reason == case["refusal"]
    elif "config_error" in case and "max_model_len" in case["config_error"]:
        assert err.value.reason == case["config_error"].split(": ", 1)[1]


def test_published_gpt_oss_120b_vllm_0_10_1():
    # vLLM 0.10.1 log, TP4, 16,384 tokens/request, 45.32 GiB available:
    # "GPU KV cache size: 2,640,144 tokens", "Maximum concurrency ... 284.25x".
    # 18 full + 18 sliding(128) layers, 2 KV heads of 64 per GPU: page 16 x 2 x 128 x 2 = 8,192 B,
    # block over 18 layers 147,456 B; 2,640,144 = num_blocks // 2 groups x 16 -> 330,018 blocks.
    config = CONFIGS["reference/openai__gpt-oss-120b.json"]
    r = vllm_capacity(config, available_kv_bytes=330_018 * 147_456, tp=4, max_model_len=16384, max_num_batched_tokens=2048, vllm_version="0.10")
    assert round(r.available_kv_bytes / 2**30, 2) == 45.32
    assert r.log_lines == ("GPU KV cache size: 2,640,144 tokens", "Maximum concurrency for 16,384 tokens per request: 284.25x")
    # full 1,024 blocks + sliding cdiv(127 + 2,048, 16) + 1 = 137
    assert r.blocks_per_request == 1024 + 137


def test_published_qwen2_7b_vllm_0_10_1():
    # 28 layers, 2 KV heads of 128 per GPU at TP2: 16 x 2 x 256 x 2 = 16,384 B page, 458,752 B a block;
    # 1,192,160 tokens / 16 = 74,510 blocks = 31.83 GiB; 74,510 / 1,024 = 72.76x
    config = CONFIGS["published/Qwen__Qwen2-7B-Instruct.json"]
    assert config is not None
    r = vllm_capacity(config, available_kv_bytes=74_510 * 458_752, tp=2, max_model_len=16384, vllm_version="0.10")
    assert round(r.available_kv_bytes / 2**30, 2) == 31.83
    assert r.log_lines == ("GPU KV cache size: 1,192,160 tokens", "Maximum concurrency for 16,384 tokens per request: 72.76x")


def test_token_figure_changed_in_0_24():
    config = CONFIGS["reference/openai__gpt-oss-120b.json"]
    args = dict(available_kv_bytes=330_018 * 147_456, tp=4, max_model_len=16384, max_num_batched_tokens=2048)
    old, new = vllm_capacity(config, vllm_version="0.19", **args), vllm_capacity(config, vllm_version="0.24", **args)
    assert old.kv_cache_tokens == 330_018 // 2 * 16
    assert new.kv_cache_tokens == int(330_018 / 1161 * 16384)
    # 0.33 runs two batches in flight (async scheduling): sliding holds cdiv(127 + 4,096, 16) + 1 = 265
    assert vllm_capacity(config, vllm_version="0.33", **args).blocks_per_request == 1024 + 265


def test_bad_arguments_are_planner_errors():
    config = CONFIGS["reference/openai__gpt-oss-120b.json"]
    for kwargs, field in ((dict(vllm_version="0.5"), "vllm_version"), (dict(kv_cache_dtype="int4"), "kv_cache_dtype"), (dict(tp=0), "tp"), (dict(block_size=0), "block_size")):
        with pytest.raises(PlannerError) as err:
            vllm_capacity(config, available_kv_bytes=1 << 34, **kwargs)
        assert err.value.field == field and not isinstance(err.value, EngineRefusal)
