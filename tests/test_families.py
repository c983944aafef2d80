"""2026 model families: every config aiconfigurator-core vendors parses, and the new cache rules.

The vendored set (``aiconfigurator_core/model_configs/*_config.json``, 89 real Hub configs in
0.12.0) is read from the installed package when it is present; without it those tests skip and
say why. The per-family tests below use small configs written here with the fields that matter,
expected numbers worked by hand beside each.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from planner.configio import MAX_CONFIG_BYTES, parse_config_text, read_config_file
from planner.geometry import parse_geometry
from planner.kv import inspect_config, kv_specs


def _vendored_dir() -> Path | None:
    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model_configs"
    return folder if folder.is_dir() else None


VENDORED = _vendored_dir()
CONFIGS = sorted(p for p in VENDORED.glob("*_config.json") if not p.name.endswith("hf_quant_config.json")) if VENDORED else []
needs_vendored = pytest.mark.skipif(not CONFIGS, reason="aiconfigurator-core is not installed: its vendored model_configs/ are absent")


@needs_vendored
def test_vendored_set_is_the_real_one():
    assert len(CONFIGS) >= 89
    largest = max(CONFIGS, key=lambda p: p.stat().st_size)
    assert largest.stat().st_size > 1024 * 1024  # MiniMax-M3 NVFP4: several MiB of quantization lists
    assert largest.stat().st_size <= MAX_CONFIG_BYTES


@needs_vendored
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name.removesuffix("_config.json"))
def test_every_vendored_config_is_read(path):
    config = read_config_file(path, source=path.name)
    report = inspect_config(config, kv_dtype="bf16", tp=1, tokens=8192)
    # every config holds a per-token cache or a sliding/recurrent one
    assert report.kv_bytes_at_tokens > 0 or report.state_bytes_per_sequence > 0


# --------------------------------------------------------------------------- per-family rules


def _mla(n: int, **extra: object) -> dict:
    return {"model_type": "glm_moe_dsa", "num_hidden_layers": n, "num_attention_heads": 64, "hidden_size": 6144,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256,
            "max_position_embeddings": 202752, **extra}


def test_glm_dsa_layer_type_and_shared_indexers():
    # GLM-5.2: 8 layers of deepseek_sparse_attention, indexer_types full, full, shared x3, full, shared x2
    types = ["full", "full", "shared", "shared", "shared", "full", "shared", "shared"]
    cfg = _mla(8, layer_types=["deepseek_sparse_attention"] * 8, index_topk=2048, index_head_dim=128, index_n_heads=32, indexer_types=types)
    geo = parse_geometry(cfg)
    assert geo.indexer is not None and geo.indexer.layers == (0, 1, 5)
    r = inspect_config(cfg, tokens=1000)
    # latent 8 x (512 + 64) x 2 B = 9216; indexer 3 owners x (128 + 4) = 396 -> 9612 per token
    assert r.kv_bytes_per_token == 9612
    assert {s.cache for s in r.specs} == {"latent", "indexer"}


def test_deepseek_v32_indexer_on_every_layer_and_not_split_by_tp():
    cfg = _mla(4, model_type="deepseek_v32", index_topk=2048, index_head_dim=128, index_n_heads=64)
    # 4 x 1152 latent + 4 x 132 indexer = 5136, on every GPU at tp 8 (both replicated)
    assert inspect_config(cfg, tp=8).kv_bytes_per_token == 5136
    # the transformers runtimes keep no paged indexer cache: latent only
    assert inspect_config(cfg, runtime="transformers-latent").kv_bytes_per_token == 4 * 1152


def test_mtp_layers_cached_only_when_asked():
    cfg = _mla(4, num_nextn_predict_layers=1, index_topk=2048, index_head_dim=128)
    geo = parse_geometry(cfg)
    plain = sum(s.bytes_per_token for s in kv_specs(geo))
    with_mtp = sum(s.bytes_per_token for s in kv_specs(geo, mtp=True))
    # one more latent layer (1152) and its indexer (132)
    assert with_mtp - plain == 1152 + 132


def test_nemotron_h_layers_block_type_without_layer_count():
    cfg = {"model_type": "nemotron_h", "num_attention_heads": 64, "num_key_value_heads": 2, "head_dim": 128, "hidden_size": 8192,
           "layers_block_type": ["mamba", "moe", "attention", "moe", "mamba", "mlp"], "mtp_layers_block_type": ["attention", "moe"],
           "num_nextn_predict_layers": 1, "mamba_num_heads": 8, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 1, "conv_kernel": 4}
    geo = parse_geometry(cfg)
    assert geo.num_layers == 6 and geo.counts() == {"full": 1, "mamba": 2, "none": 3}
    # 1 attention layer x 2 x 2 KV heads x 128 x 2 B = 1024; the MTP module adds one more attention layer
    assert inspect_config(cfg).kv_bytes_per_token == 1024
    assert sum(s.bytes_per_token for s in kv_specs(geo, mtp=True)) == 2048


def test_nemotron_nas_block_configs():
    attn = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
    blocks = [{"attention": attn}, {"attention": {"n_heads_in_group": None, "no_op": True}}, {"attention": {**attn, "n_heads_in_group": 4}}]
    cfg = {"model_type": "nemotron-nas", "num_hidden_layers": 3, "num_attention_heads": 64, "num_key_value_heads": None,
           "hidden_size": 8192, "block_configs": blocks}
    r = inspect_config(cfg)
    # layer 0: 64 / 8 = 8 KV heads; layer 1: no-op; layer 2: 64 / 4 = 16 KV heads; head_dim 8192 / 64 = 128
    # 2 x (8 + 16) x 128 x 2 B = 12,288
    assert r.kv_bytes_per_token == 12_288
    assert r.layers == {"full": 2, "none": 1}


def test_gemma4_global_head_dim_and_k_eq_v():
    types = ["sliding_attention"] * 5 + ["full_attention"]
    base = {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
            "hidden_size": 2816, "sliding_window": 1024, "layer_types": types, "global_head_dim": 512, "num_global_key_value_heads": 2,
            "max_position_embeddings": 262144}
    # k_eq_v: the full layer has 2 KV heads x 512, K and V both cached: 2 x 2 x 512 x 2 B = 4096
    assert inspect_config({**base, "attention_k_eq_v": True}).kv_bytes_per_token == 4096
    # without k_eq_v vLLM keeps num_key_value_heads (8) at global_head_dim: 2 x 8 x 512 x 2 B = 16,384
    assert inspect_config({**base, "attention_k_eq_v": False}).kv_bytes_per_token == 16_384


def test_mimo_v2_flash_hybrid_pattern_ignores_chunk_size():
    cfg = {"model_type": "mimo_v2_flash", "num_hidden_layers": 4, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192,
           "v_head_dim": 128, "hidden_size": 4096, "sliding_window": 128, "attention_chunk_size": 128, "hybrid_layer_pattern": [0, 1, 1, 0],
           "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128, "max_position_embeddings": 262144}
    r = inspect_config(cfg, tokens=1000)
    # full: 2 layers x 4 heads x (192 + 128) x 2 B = 5120 per token;
    # sliding: 2 layers x 8 x (192 + 128) x 2 B = 10,240 per token held, W 128
    assert r.layers == {"full": 2, "sliding": 2}
    assert r.kv_bytes_per_token == 5120
    assert r.kv_bytes_at_tokens == 5120 * 1000 + 10_240 * 128


def test_config_of_several_mib_is_read():
    # a 3 MiB quantization list, as nvidia/MiniMax-M3-NVFP4 ships
    text = '{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "quantization_config": {"ignore": ["' + "x" * (3 << 20) + '"]}}'
    assert parse_config_text(text)["num_hidden_layers"] == 2


def test_latent_moe_weights():
    # Nemotron 3 Ultra "550B-A55B" and Kimi K3 route experts through a narrower latent
    # (moe_latent_size 2048 / routed_expert_hidden_size 3584): the experts are 2048 x 5120 x 2
    # (relu2, not gated) each, not 8192 x 5120 x 2, so the count lands near the name's 550B
    from planner.plan import prepare_model
    from planner.presets import load_preset

    ultra = prepare_model(load_preset("nemotron-3-ultra")).weights("auto")
    assert 530e9 < ultra.total_params < 570e9
    assert 45e9 < ultra.active_params < 60e9


# --------------------------------------------------------------------------- KV dtype auto

LLAMA_SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
FP8_KV = {"dynamic": False, "num_bits": 8, "type": "float"}


@pytest.mark.parametrize(
    ("quantization_config", "hf_quant", "expected"),
    [
        (None, None, ("bf16", "auto: model dtype bfloat16")),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": FP8_KV}, None, ("fp8", "auto: config.json quantization_config.kv_cache_scheme (8-bit float) (vLLM: fp8_e4m3)")),
        ({"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}, None, ("fp8", "auto: config.json quantization_config.kv_cache_scheme (8-bit float)")),
        (None, {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, ("fp8", "auto: hf_quant_config.json quantization.kv_cache_quant_algo FP8 (vLLM: fp8_e4m3)")),
        # config.json's own quantization_config wins: vLLM reads hf_quant_config.json only without it
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, {"quantization": {"kv_cache_quant_algo": "FP8"}}, ("bf16", "auto: model dtype bfloat16")),
    ],
)
def test_kv_dtype_auto_resolves_like_vllm(quantization_config, hf_quant, expected):
    from planner.kv import resolve_kv_dtype

    config = {**LLAMA_SMALL, **({"quantization_config": quantization_config} if quantization_config else {})}
    assert resolve_kv_dtype("auto", config, hf_quant) == expected
    assert resolve_kv_dtype("int8", config, hf_quant) == ("int8", "given")


def test_deepseek_v4_kv_dtype_auto_is_fp8():
    from planner.kv import resolve_kv_dtype
    from planner.presets import load_preset

    # vLLM 0.33 turns --kv-cache-dtype auto into fp8_ds_mla for DeepSeek-V4 (its checkpoint says bfloat16 and fp8 weights only)
    dtype, source = resolve_kv_dtype("auto", load_preset("deepseek-v4-flash"))
    assert dtype == "fp8" and "fp8_ds_mla" in source


def test_nvfp4_kv_cache_is_refused_not_guessed():
    from planner.errors import PlannerError
    from planner.kv import resolve_kv_dtype

    config = {**LLAMA_SMALL, "quantization_config": {"quant_method": "modelopt", "kv_cache_scheme": {"num_bits": 4, "type": "float"}}}
    with pytest.raises(PlannerError, match="NVFP4 KV cache"):
        resolve_kv_dtype("auto", config)


def test_inspect_and_plan_show_where_the_kv_dtype_came_from(tmp_path, capsys):
    import json as _json

    from planner.cli import main

    path = tmp_path / "config.json"
    path.write_text(_json.dumps({**LLAMA_SMALL, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": FP8_KV}}))
    assert main(["inspect", "--config", str(path), "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    # fp8: 2 layers x 2 x 2 KV heads x 64 (256 / 4) x 1 B = 512
    assert (out["kv_dtype"], out["kv_bytes_per_token"]) == ("fp8", 512)
    assert out["kv_dtype_source"].startswith("auto: config.json quantization_config.kv_cache_scheme")
    assert main(["inspect", "--config", str(path), "--kv-dtype", "bf16"]) == 0
    assert "KV dtype          bf16\n" in capsys.readouterr().out
    assert main(["plan", "--config", str(path), "--json"]) == 0
    kv = _json.loads(capsys.readouterr().out)["kv_cache"]
    assert (kv["kv_dtype"], kv["bytes_per_token_per_sequence"]) == ("fp8", 512)
    assert kv["kv_dtype_source"].startswith("auto: config.json")


def test_hub_checkpoint_with_hf_quant_config_plans_fp8(hub):
    from planner.plan import PlanInputs, compute_plan
    from planner.source import hub_ref

    hub.add_repo("org/modelopt-fp8", {"config.json": LLAMA_SMALL, "hf_quant_config.json": {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}})
    _ref, model, _fetched = hub_ref("org/modelopt-fp8")
    plan = compute_plan(PlanInputs(), model)
    assert plan.kv_cache.kv_dtype == "fp8" and plan.kv_cache.bytes_per_token_per_sequence == 512
    assert plan.kv_cache.kv_dtype_source == "auto: hf_quant_config.json quantization.kv_cache_quant_algo FP8 (vLLM: fp8_e4m3)"


def test_each_cache_group_says_what_it_holds():
    from planner.presets import load_preset

    shapes = [s.shape for s in inspect_config(load_preset("glm-5"), kv_dtype="bf16").specs]
    assert shapes == ["latent of 576", "indexer key of 128 (fp8 + scales)"]
    v4 = [s.shape for s in inspect_config(load_preset("deepseek-v4-flash")).specs]
    assert "latent of 512 in vLLM's fp8 sparse layout, one entry per 128 tokens" in v4
