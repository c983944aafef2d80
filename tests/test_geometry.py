"""Geometry and K/V arithmetic: the seeds' numbers, every family's quirks, bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.config_keys import ATTENTION_HEAD_KEYS, HIDDEN_SIZE_KEYS, KV_HEAD_KEYS, LAYER_COUNT_KEYS
from planner.configio import parse_config_text
from planner.errors import ConfigError, PlannerError
from planner.geometry import LAYOUT_READERS, parse_geometry
from planner.kv import inspect_config, vector_bytes


def dense(layers=32, heads=32, kv=8, hidden=4096, **extra) -> dict:
    return {"model_type": "llama", "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "hidden_size": hidden, "max_position_embeddings": 131072, **extra}


# ---------------------------------------------------------------- the seeds' numbers


def test_seed_example_131072_bytes_per_token():
    # 2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072
    r = inspect_config(dense(), tokens=2560)
    assert r.kv_bytes_per_token == 131072
    # x 2,560 reserved tokens = 335,544,320 B = 320 MiB
    assert r.kv_bytes_at_tokens == 335544320 == 320 * 2**20


def test_llama_3_1_70b_327680():
    # 2 x 80 x 8 x 128 x 2 = 327,680
    assert inspect_config(dense(layers=80, heads=64, kv=8, hidden=8192)).kv_bytes_per_token == 327680


def test_qwen3_0_6b_explicit_head_dim_112_kib():
    # Qwen3-0.6B: hidden 1024, 16 heads but head_dim 128 (not 64): 2 x 28 x 8 x 128 x 2 = 114,688 = 112 KiB
    cfg = {"model_type": "qwen3", "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "hidden_size": 1024, "head_dim": 128}
    r = inspect_config(cfg)
    assert r.kv_bytes_per_token == 114688 == 112 * 1024
    assert any("head_dim 128 is explicit" in n for n in r.notes)


def test_7b_mha_524288_and_gqa_ratio_4x():
    # 2 x 32 x 32 x 128 x 2 = 524,288; with 8 KV heads a quarter of it
    mha = inspect_config(dense(kv=32)).kv_bytes_per_token
    gqa = inspect_config(dense(kv=8)).kv_bytes_per_token
    assert mha == 524288
    assert mha == 4 * gqa


def test_24_layers_8_kv_heads_64_dims_49152():
    # 2 x 24 x 8 x 64 x 2 = 49,152; at 2,000 tokens 98,304,000 bytes
    r = inspect_config(dense(layers=24, heads=8, kv=8, hidden=512), tokens=2000)
    assert r.kv_bytes_per_token == 49152
    assert r.kv_bytes_at_tokens == 98_304_000


DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 163840,
    "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048, "intermediate_size": 18432, "first_k_dense_replace": 3, "vocab_size": 129280,
}


def test_deepseek_v3_mla_paged_vs_transformers():
    # paged: 61 layers x (512 + 64) latent x 2 bytes = 70,272 (no K/V factor 2, no heads)
    assert inspect_config(DEEPSEEK_V3).kv_bytes_per_token == 70272
    # transformers eager: 61 x 128 heads x (K 128+64 + V 128) x 2 bytes = 4,997,120
    assert inspect_config(DEEPSEEK_V3, runtime="transformers").kv_bytes_per_token == 4997120
    # the latent is not split by tensor parallelism
    assert inspect_config(DEEPSEEK_V3, tp=8).kv_bytes_per_token == 70272
    assert inspect_config(DEEPSEEK_V3).layers == {"full": 61}
    # transformers since #47761 (the pinned 5.24, measured by the probe) caches the latent too
    assert inspect_config(DEEPSEEK_V3, runtime="transformers-latent").kv_bytes_per_token == 70272


def test_transformers_runtimes_cache_chunked_layers_as_windows():
    cfg = dense(layers=4, attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0])
    per_layer = 8 * 128 * 2 * 2
    # paged: the current chunk (10,000 mod 8,192 = 1,808); transformers: a window of 8,192
    assert inspect_config(cfg, tokens=10000).kv_bytes_at_tokens == per_layer * (10000 + 3 * 1808)
    for runtime in ("transformers", "transformers-latent"):
        assert inspect_config(cfg, tokens=10000, runtime=runtime).kv_bytes_at_tokens == per_layer * (10000 + 3 * 8192)


# ---------------------------------------------------------------- families


def test_aliases_gpt2_style():
    # n_layer/n_head/n_embd: 2 x 12 x 12 x 64 x 2 = 36,864
    r = inspect_config({"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024})
    assert r.kv_bytes_per_token == 36864


@pytest.mark.parametrize(
    ("canonical", "keys"),
    [("num_hidden_layers", LAYER_COUNT_KEYS), ("num_attention_heads", ATTENTION_HEAD_KEYS), ("num_key_value_heads", KV_HEAD_KEYS), ("hidden_size", HIDDEN_SIZE_KEYS)],
)
def test_every_alias_in_the_table_reads_the_same(canonical, keys):
    # dense(): 32 layers, 32 heads, 8 KV heads, hidden 4096: 2 x 32 x 8 x 128 x 2 = 131,072 under every name
    for key in keys:
        cfg = dense()
        cfg[key] = cfg.pop(canonical)
        assert inspect_config(cfg).kv_bytes_per_token == 131072, key


def test_the_first_alias_listed_wins():
    # 16 layers under the first name, 99 under each later one: 2 x 16 x 8 x 128 x 2 = 65,536
    cfg = {**dense(layers=16), **{k: 99 for k in LAYER_COUNT_KEYS[1:]}}
    assert parse_geometry(cfg).num_layers == 16
    assert inspect_config(cfg).kv_bytes_per_token == 65536


def test_num_heads_alone_is_not_an_attention_head_count():
    # Mamba-2 (transformers Mamba2Config) counts its 128 SSM heads in num_heads: sizing it as 128
    # full-attention heads would invent a K/V cache, so the config is refused with the names it lacks
    mamba2 = {"model_type": "mamba2", "num_hidden_layers": 64, "num_heads": 128, "head_dim": 64, "hidden_size": 4096}
    with pytest.raises(ConfigError, match=r"no attention head count \(num_attention_heads, n_head or n_heads\)"):
        parse_geometry(mamba2)


def test_class_default_context_under_any_alias():
    # MPT names its context max_seq_len; transformers 5.24 MptConfig defaults it to 2,048, which
    # planner/arch_defaults.json tabulates since it is generated from the same table of names
    geo = parse_geometry({"model_type": "mpt", "n_layers": 2, "n_heads": 4, "d_model": 64})
    assert geo.max_position_embeddings == 2048
    assert "mpt's class default of 2,048 tokens applies" in geo.notes[0]


def test_falcon_multi_query_and_new_decoder_architecture():
    base = {"model_type": "falcon", "num_hidden_layers": 32, "num_attention_heads": 71, "hidden_size": 4544}
    # multi_query: one KV head: 2 x 32 x 1 x 64 x 2 = 8,192
    assert inspect_config({**base, "multi_query": True}).kv_bytes_per_token == 8192
    # without multi_query: MHA, 71 heads: 8,192 x 71
    assert inspect_config({**base, "multi_query": False}).kv_bytes_per_token == 8192 * 71
    # new_decoder_architecture uses num_kv_heads and ignores multi_query: 2 x 60 x 8 x 64 x 2 = 122,880
    f40 = {"model_type": "falcon", "num_hidden_layers": 60, "num_attention_heads": 128, "hidden_size": 8192, "new_decoder_architecture": True, "num_kv_heads": 8, "multi_query": True}
    assert inspect_config(f40).kv_bytes_per_token == 122880


def test_gpt_bigcode_multi_query_and_mpt_attn_config_and_chatglm():
    sc = {"model_type": "gpt_bigcode", "n_layer": 40, "n_head": 48, "n_embd": 6144, "multi_query": True}
    assert inspect_config(sc).kv_bytes_per_token == 2 * 40 * 1 * 128 * 2
    mpt = {"model_type": "dbrx", "n_layers": 40, "n_heads": 48, "d_model": 6144, "attn_config": {"kv_n_heads": 8}}
    assert inspect_config(mpt).kv_bytes_per_token == 2 * 40 * 8 * 128 * 2
    glm = {"model_type": "chatglm", "num_layers": 40, "num_attention_heads": 32, "hidden_size": 4096, "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128}
    assert inspect_config(glm).kv_bytes_per_token == 2 * 40 * 2 * 128 * 2


def test_head_dim_null_or_nonpositive_is_derived():
    assert parse_geometry(dense(head_dim=None)).head_dim == 128
    assert parse_geometry(dense(head_dim=0)).head_dim == 128
    assert parse_geometry(dense(head_dim=-1)).head_dim == 128
    # Nemotron's attention_head_dim
    assert parse_geometry(dense(attention_head_dim=96)).head_dim == 96


def test_gemma2_alternates_and_gemma3_five_to_one_and_cohere2_three_to_one():
    g2 = {"model_type": "gemma2", "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8, "hidden_size": 3584, "head_dim": 256, "sliding_window": 4096, "max_position_embeddings": 8192}
    assert parse_geometry(g2).counts() == {"full": 21, "sliding": 21}
    g3 = {"model_type": "gemma3_text", "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1, "hidden_size": 1152, "head_dim": 256, "sliding_window": 512, "max_position_embeddings": 32768}
    geo = parse_geometry(g3)
    assert geo.counts() == {"full": 4, "sliding": 22}
    assert [layer.index for layer in geo.layers if layer.kind == "full"] == [5, 11, 17, 23]
    c2 = {"model_type": "cohere2", "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "sliding_window": 4096, "max_position_embeddings": 8192}
    assert parse_geometry(c2).counts() == {"full": 8, "sliding": 24}


def test_sliding_bytes_capped_at_window():
    cfg = dense(sliding_window=4096)
    r = inspect_config(cfg, tokens=10000)
    assert r.layers == {"sliding": 32}
    assert r.kv_bytes_per_token == 0  # no layer grows with every token
    assert r.kv_bytes_at_tokens == 131072 * 4096


def test_use_sliding_window_false_and_window_beyond_max_positions():
    assert parse_geometry(dense(sliding_window=4096, use_sliding_window=False)).counts() == {"full": 32}
    geo = parse_geometry(dense(sliding_window=262144, max_position_embeddings=131072))
    assert geo.counts() == {"full": 32}
    assert any("never binds" in n for n in geo.notes)


def test_layer_types_gpt_oss():
    types = ["sliding_attention", "full_attention"] * 12
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 2880, "head_dim": 64, "sliding_window": 128, "layer_types": types, "max_position_embeddings": 131072}
    # full: 12 x 8 x 64 x 2 x 2 = 24,576 per token; at 1000 tokens + sliding 12 x 128 x 2,048
    r = inspect_config(cfg, tokens=1000)
    assert r.kv_bytes_per_token == 24576
    assert r.kv_bytes_at_tokens == 24576 * 1000 + 12 * 128 * 2048


def test_llama4_chunked_with_no_rope_layers():
    n = 8
    cfg = dense(layers=n, heads=40, kv=8, hidden=5120, attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0, 1, 1, 1, 0])
    geo = parse_geometry(cfg)
    assert geo.counts() == {"full": 2, "chunked": 6}
    r = inspect_config(cfg, tokens=10000)
    per_layer = 8 * 128 * 2 * 2
    # full layers hold 10,000; chunked ones the current chunk: 10,000 mod 8,192 = 1,808
    assert r.kv_bytes_at_tokens == 2 * per_layer * 10000 + 6 * per_layer * 1808
    # exactly at a chunk boundary a chunked layer holds the whole chunk
    assert inspect_config(cfg, tokens=8192).kv_bytes_at_tokens == 2 * per_layer * 8192 + 6 * per_layer * 8192


def test_nemotron_h_pattern_and_jamba_and_qwen3_next():
    pattern = "M-M-M*-M-M-M*-"
    nem = dense(layers=len(pattern), kv=8, hybrid_override_pattern=pattern, model_type="nemotron_h", mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4)
    r = inspect_config(nem)
    assert r.layers == {"full": 2, "mamba": 6, "none": 6}
    assert r.kv_bytes_per_token == 2 * 2 * 8 * 128 * 2
    # Mamba-2 state per layer: conv (128x64 + 2x8x128) x 3 in bf16 + ssm 128 x 64 x 128 in float32
    # (vLLM's Nemotron-H default when the config names no mamba_ssm_cache_dtype), x 6 layers
    assert r.state_bytes_per_sequence == 6 * ((8192 + 2048) * 3 * 2 + 128 * 64 * 128 * 4)
    bf16_ssm = inspect_config({**nem, "mamba_ssm_cache_dtype": "bfloat16"})
    assert bf16_ssm.state_bytes_per_sequence == 6 * ((8192 + 2048) * 3 + 128 * 64 * 128) * 2
    jamba = dense(layers=32, model_type="jamba", attn_layer_period=8, attn_layer_offset=4)
    assert parse_geometry(jamba).counts() == {"full": 4, "mamba": 28}
    q3n = dense(layers=48, model_type="qwen3_next", full_attention_interval=4, head_dim=256, kv=2)
    assert parse_geometry(q3n).counts() == {"full": 12, "linear_attention": 36}


def test_the_first_layout_reader_that_claims_a_config_wins():
    pattern = "M*M*"
    block_types = ["mamba", "attention", "moe", "attention"]
    # layer_types is tried first: the Nemotron names and the pattern beside it are not read
    both = dense(layers=4, layer_types=["full_attention"] * 4, layers_block_type=block_types, hybrid_override_pattern=pattern)
    assert parse_geometry(both).counts() == {"full": 4}
    # layers_block_type (an explicit per-layer list) comes before hybrid_override_pattern
    assert parse_geometry(dense(layers=4, layers_block_type=block_types, hybrid_override_pattern="****")).counts() == {"full": 2, "mamba": 1, "none": 1}
    # an explicit list also keeps the Llama 4 chunking and the sliding class default away: the
    # same config without it has 3 chunked layers of 4 (every 4th is global) and no sliding layer
    nas = dense(layers=4, model_type="llama4_text", attention_chunk_size=8192, block_configs=[{"attention": {"n_heads_in_group": 4}}] * 4)
    assert parse_geometry(nas).counts() == {"full": 4}
    assert parse_geometry({k: v for k, v in nas.items() if k != "block_configs"}).counts() == {"full": 1, "chunked": 3}
    # the last reader claims every config
    assert LAYOUT_READERS[-1].claims({}, "")


def test_cross_attention_layers_and_kv_shared_layers():
    cfg = {"model_type": "mllama", "text_config": {"model_type": "mllama_text_model", "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38], "max_position_embeddings": 131072}, "vision_config": {"num_hidden_layers": 999}}
    r = inspect_config(cfg)
    assert r.layers == {"full": 32, "cross": 8}
    assert r.kv_bytes_per_token == 131072  # cross layers cache the image encoder's states, not text
    assert r.cross_bytes_per_encoder_token == 8 * 8 * 128 * 2 * 2
    shared = dense(layers=10, num_kv_shared_layers=4)
    assert parse_geometry(shared).counts() == {"full": 6, "none": 4}


def test_nested_text_config_completed_with_transformers_defaults():
    # a Gemma 3 text_config lists no heads: the class defaults (8 heads, 4 KV heads, head_dim 256,
    # 5 local : 1 global) complete it: 5 full layers x 4 x 256 x 2 x 2 = 20,480
    cfg = {"model_type": "gemma3", "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34, "sliding_window": 1024}, "vision_config": {"hidden_size": 1152}}
    r = inspect_config(cfg)
    assert r.layers == {"full": 5, "sliding": 29}
    assert r.kv_bytes_per_token == 20480
    assert r.config_path == "text_config"
    # LLaVA's text_config lists no sizes: Llama defaults (32 layers, 32 heads, 4096): 524,288
    llava = {"model_type": "llava", "text_config": {"model_type": "llama", "max_position_embeddings": 4096}, "vision_config": {}}
    assert inspect_config(llava).kv_bytes_per_token == 524288


def test_real_world_json_quirks():
    text = '{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "time_step_limit": [0.0, Infinity], "x": NaN, "eos_token_id": [1, 2], "dtype": "bfloat16", "quantization_config": {"quant_method": "fp8"}}'
    cfg = parse_config_text(text)
    geo = parse_geometry(cfg)
    assert geo.torch_dtype == "bfloat16"
    assert inspect_config(cfg).kv_bytes_per_token == 2 * 2 * 4 * 64 * 2


# ---------------------------------------------------------------- dtypes and tensor parallelism


def test_dtypes_and_integer_scale_overhead():
    bf16 = inspect_config(dense()).kv_bytes_per_token
    assert inspect_config(dense(), kv_dtype="fp32").kv_bytes_per_token == 2 * bf16
    assert inspect_config(dense(), kv_dtype="fp8").kv_bytes_per_token == bf16 // 2
    # int8: 128 bytes + 2 groups of 64 x (fp16 scale + fp16 zero) = 136 bytes per head vector
    assert vector_bytes(128, "int8") == 136
    assert vector_bytes(128, "int4") == 64 + 8
    assert inspect_config(dense(), kv_dtype="int4").kv_bytes_per_token == 2 * 32 * 8 * 72


def test_tp_split_replication_and_refusal():
    assert inspect_config(dense(), tp=2).kv_bytes_per_token == 65536
    r = inspect_config(dense(), tp=16)  # 8 KV heads over 16 GPUs: each head replicated twice
    assert r.kv_heads_per_gpu == 1
    assert r.kv_bytes_per_token == 16384
    assert any("replicated" in n for n in r.notes)
    with pytest.raises(PlannerError, match="tensor parallel size 3"):
        inspect_config(dense(), tp=3)
    with pytest.raises(PlannerError, match="tensor parallel size 8 with 12 attention heads"):
        inspect_config(dense(heads=12, kv=12, hidden=768), tp=8)


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 200), kv=st.sampled_from([1, 2, 4, 8, 16]), group=st.integers(1, 8), dim=st.sampled_from([64, 80, 128, 256]))
def test_property_linear_in_layers_heads_dtype(layers, kv, group, dim):
    heads = kv * group
    cfg = dense(layers=layers, heads=heads, kv=kv, hidden=heads * dim)
    one = inspect_config(dense(layers=1, heads=heads, kv=kv, hidden=heads * dim)).kv_bytes_per_token
    r = inspect_config(cfg)
    assert r.kv_bytes_per_token == layers * one == 2 * layers * kv * dim * 2
    assert inspect_config(cfg, kv_dtype="fp32").kv_bytes_per_token == 2 * r.kv_bytes_per_token
    assert inspect_config(cfg, kv_dtype="fp8").kv_bytes_per_token * 2 == r.kv_bytes_per_token


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(0, 100_000), window=st.integers(1, 50_000))
def test_property_sliding_never_exceeds_full(tokens, window):
    full = inspect_config(dense(layers=4), tokens=tokens).kv_bytes_at_tokens
    sliding = inspect_config(dense(layers=4, sliding_window=window), tokens=tokens).kv_bytes_at_tokens
    assert sliding <= full
    assert sliding == 4 * 4096 * min(tokens, window)


@settings(max_examples=40, deadline=None)
@given(kv=st.sampled_from([1, 2, 4, 8, 16, 32]), tp=st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_property_tp_never_increases_bytes_per_gpu(kv, tp):
    cfg = dense(heads=32, kv=kv)
    one = inspect_config(cfg).kv_bytes_per_token
    assert inspect_config(cfg, tp=tp).kv_bytes_per_token <= one


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("cfg", "field", "why"),
    [
        ({"num_attention_heads": 8, "hidden_size": 512}, "num_hidden_layers", "missing"),
        ({"num_hidden_layers": 2, "hidden_size": 512}, "num_attention_heads", "missing"),
        (dense(layers=0), "num_hidden_layers", "at least 1"),
        (dense(layers=-3), "num_hidden_layers", "at least 1"),
        (dense(layers=2.5), "num_hidden_layers", "whole number"),
        (dense(layers="32"), "num_hidden_layers", "must be an integer"),
        (dense(layers=True), "num_hidden_layers", "must be an integer"),
        (dense(layers=200_000), "num_hidden_layers", "absurdly large"),
        (dense(layers=float("nan")), "num_hidden_layers", "whole number"),
        (dense(kv=5), "num_key_value_heads", "does not divide"),
        (dense(kv=64), "num_key_value_heads", "exceeds"),
        (dense(layers=4, layer_types=["full_attention"] * 3), "layer_types", "exactly num_hidden_layers=4"),
        (dense(layers=2, layer_types=["full_attention", "banana"]), "layer_types[1]", "unknown layer type"),
        (dense(heads=7, kv=7, hidden=100), "hidden_size", "not divisible"),
        (dense(layers=3, hybrid_override_pattern="M*"), "hybrid_override_pattern", "exactly 3"),
        ({"text_config": [1, 2]}, "text_config", "JSON object"),
    ],
)
def test_bad_configs_name_field_value_and_reason(cfg, field, why):
    with pytest.raises(ConfigError) as err:
        parse_geometry(cfg)
    assert err.value.field.endswith(field)
    assert why in str(err.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [("[1, 2]", "JSON object"), ("{not json", "not valid JSON"), ("", "empty"), (b"\xff\xfe{", "UTF-8"), ('{"a": ' + "[" * 40 + "]" * 40 + "}", "deeper")],
)
def test_bad_config_text(text, why):
    with pytest.raises(ConfigError, match=why):
        parse_config_text(text)


def test_oversized_config_refused():
    big = json.dumps({"num_hidden_layers": 2, "pad": "x" * (16 * 1024 * 1024)})
    with pytest.raises(ConfigError, match="larger than 16,777,216 bytes"):
        parse_config_text(big)


def test_geometry_is_frozen():
    geo = parse_geometry(dense())
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
        geo.num_layers = 3  # type: ignore[misc]
    assert math.isclose(len(geo.layers), 32)


def test_falcon_multi_query_wins_over_resaved_num_kv_heads():
    # transformers re-saves Falcon-7B with num_kv_heads = 71; the old architecture still has 1 KV head
    cfg = {"model_type": "falcon", "num_hidden_layers": 32, "num_attention_heads": 71, "hidden_size": 4544, "multi_query": True, "new_decoder_architecture": False, "num_kv_heads": 71}
    assert inspect_config(cfg).kv_bytes_per_token == 8192


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"use_sliding_window": "false", "sliding_window": 4096}, "use_sliding_window"), ({"tie_word_embeddings": "false"}, "tie_word_embeddings"), ({"intermediate_size": "2048"}, "intermediate_size")],
)
def test_typed_fields_refuse_strings(extra, field):
    with pytest.raises(ConfigError) as err:
        parse_geometry(dense(**extra))
    assert err.value.field == field


def test_huge_integer_literal_is_a_clear_error():
    with pytest.raises(ConfigError, match="not a usable JSON number"):
        parse_config_text('{"num_hidden_layers": ' + "9" * 5000 + "}")


def test_vocab_from_padded_vocab_size_or_class_default():
    assert parse_geometry(dense(padded_vocab_size=151552)).vocab_size == 151552
    geo = parse_geometry({"model_type": "gemma3_text", "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "hidden_size": 2560, "head_dim": 256})
    assert geo.vocab_size == 262208  # Gemma3TextConfig's default
