"""Engine parity: planner.engines.vllm against numbers computed by vLLM's own code.

``tests/data/vllm_engine_cases.json`` (vllm 0.33.0) and ``vllm_engine_cases_0.10.json`` / ``_0.11``
/ ``_0.19`` / ``_0.24`` (vllm 0.10.1.1, 0.11.0 with its transformers 4.57, 0.19.0, 0.24.0) are written by
``scripts/gen_vllm_engine_cases.py``, each in a throw-away venv holding that release (never in
CI): every reference config and every preset at several (tp, kv dtype, max_model_len, available
memory) settings, with that release's groups, blocks, tokens, concurrency, log lines and refusals.
Every case is checked against the engine's rules for its release. The fixtures carry their configs,
so this test needs nothing else. The two published start-up logs (vLLM 0.10.1) are checked against
the numbers vLLM printed and against 0.10.1.1's own code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.engines import EngineRefusal, vllm_capacity
from planner.engines.vllm import NOT_REGISTERED, VLLM_VERSIONS
from planner.errors import PlannerError
from planner.presets import load_preset

HERE = Path(__file__).parent / "data"
# one fixture per vLLM release, each written by that release's own code; "0.33.0" -> rules "0.33"
FIXTURES = {path.name: json.loads(path.read_text()) for path in sorted(HERE.glob("vllm_engine_cases*.json"))}
DATA = FIXTURES["vllm_engine_cases.json"]
CONFIGS = DATA["configs"]
VLLM_KIND = {"linear_attention": "mamba"}


def _rules(data: dict) -> str:
    return ".".join(data["vllm_version"].split(".")[:2])


def _cases(sized: bool) -> list[tuple[dict, dict]]:
    out = []
    for data in FIXTURES.values():
        for c in data["cases"]:
            if sized == ("num_blocks" in c) and (sized or "refusal" in c or "config_error" in c or "unsupported" in c or "backend_error" in c):
                out.append((data, c))
    return out


LOAD_FAILURES = ("Transformers does not recognize this architecture", "contains custom code which must be executed", "is a per-layer attribute", "object has no setter", "This effectively limits the maximum sequence length to max_num_batched_tokens")
SIZED = _cases(True)
REFUSED = _cases(False)
SIZED_033 = [c for data, c in SIZED if data is DATA]  # vLLM 0.33, the default release
REFUSED_033 = [c for data, c in REFUSED if data is DATA]


def _id(item: tuple[dict, dict]) -> str:
    data, c = item
    return f"{_rules(data)}-{Path(c['source']).stem}-tp{c['tp']}-{c['kv_cache_dtype']}-{c['max_model_len']}-{c.get('available_kv_bytes', 0) >> 20}MiB"


def _run(data: dict, c: dict, **over):
    args = dict(available_kv_bytes=c["available_kv_bytes"], tp=c["tp"], kv_cache_dtype=c["kv_cache_dtype"], max_model_len=c["max_model_len"], max_num_batched_tokens=c["max_num_batched_tokens"], prefix_caching=c["enable_prefix_caching"], vllm_version=_rules(data), block_size=c.get("user_block_size"))
    args.update(over)
    return vllm_capacity(data["configs"][c["source"]], **args)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_covers_every_family(name):
    data = FIXTURES[name]
    assert _rules(data) in VLLM_VERSIONS
    sized = [c for c in data["cases"] if "num_blocks" in c]
    refused = [c for c in data["cases"] if "refusal" in c or "config_error" in c or "unsupported" in c]
    assert len(sized) >= 300 and len(refused) >= 40
    kinds = {g["kind"] for c in sized for g in c["groups"]}
    # vLLM 0.10 serves Mamba hybrids on its V0 engine: no Mamba group in its V1 start-up log
    assert {"full", "sliding", "mla"} | ({"mamba"} if _rules(data) != "0.10" else set()) <= kinds
    assert not [c for c in data["cases"] if "error" in c]  # every case ran through vLLM


def test_every_version_has_its_own_fixture():
    assert sorted(_rules(d) for d in FIXTURES.values()) == sorted(VLLM_VERSIONS)
    assert DATA["vllm_version"] == "0.33.0"


def _text(source: str) -> dict:
    config = CONFIGS[source]
    return config.get("text_config") or config.get("llm_config") or config


def _kinds(c: dict) -> set[str]:
    return {g["kind"] for g in c["groups"]}


def _heads(t: dict) -> tuple[int | None, int | None]:
    heads = t.get("num_attention_heads") or t.get("n_head")
    return heads, 1 if t.get("multi_query") else t.get("num_key_value_heads", heads)


# issue 11's families and the 2026 families vLLM 0.33 serves (issue 16): what makes a sized case one
FAMILIES = {
    "dense (GQA)": lambda c, t: _kinds(c) == {"full"} and 1 < (_heads(t)[1] or 0) < (_heads(t)[0] or 0),
    "MQA": lambda c, t: _kinds(c) == {"full"} and _heads(t)[1] == 1,
    "MHA": lambda c, t: _kinds(c) == {"full"} and "kv_lora_rank" not in t and _heads(t)[1] == _heads(t)[0],
    "sliding interleaved": lambda c, t: _kinds(c) == {"full", "sliding"},
    "model-level sliding": lambda c, t: _kinds(c) == {"sliding"},
    "chunked": lambda c, t: "chunked" in _kinds(c),
    "MLA": lambda c, t: _kinds(c) == {"mla"},
    "MLA with indexer": lambda c, t: _kinds(c) == {"indexer+mla"} and t.get("index_topk"),
    "Mamba2 hybrids": lambda c, t: _kinds(c) == {"full", "mamba"} and "mamba_num_heads" in t,
    "gated-delta-net hybrids": lambda c, t: _kinds(c) == {"full", "mamba"} and "linear_num_value_heads" in t,
    # 2026 families (issue 16)
    "GLM-5.x DSA": lambda c, t: CONFIGS[c["source"]].get("architectures") == ["GlmMoeDsaForCausalLM"],
    "GLM-5.2 shared indexers": lambda c, t: "shared" in (t.get("indexer_types") or []),
    "DeepSeek-V3.2": lambda c, t: CONFIGS[c["source"]].get("architectures") == ["DeepseekV32ForCausalLM"],
    "Gemma 4": lambda c, t: t.get("global_head_dim") is not None and _kinds(c) == {"full", "sliding"},
    "MiMo-V2-Flash": lambda c, t: "swa_num_key_value_heads" in t and _kinds(c) == {"full", "sliding"},
    "Nemotron 3 Ultra (layers_block_type)": lambda c, t: "layers_block_type" in t and "mamba" in _kinds(c),
    "Kimi K3 (MLA + Kimi Delta Attention)": lambda c, t: "linear_attn_config" in t and _kinds(c) == {"mla", "mamba"},
    "MiniMax-M3 sparse attention (index keys)": lambda c, t: CONFIGS[c["source"]].get("architectures") == ["MiniMaxM3SparseForConditionalGeneration"],
    "Qwen3.5 MoE": lambda c, t: CONFIGS[c["source"]].get("architectures") == ["Qwen3_5MoeForConditionalGeneration"],
    "DeepSeek-V4 (SWA + compressed latent + indexer + compressor states, packed)": lambda c, t: (
        CONFIGS[c["source"]].get("architectures") == ["DeepseekV4ForCausalLM"] and _kinds(c) == {"sliding", "indexer+mla", "compressor"}
    ),
    # the generator's stand-in config class replaces the checkpoint's remote DeciLMConfig
    "Nemotron-NAS (DeciLM: no-op attention layers, per-layer KV heads)": lambda c, t: (
        t.get("model_type") == "nemotron-nas" and _kinds(c) == {"full"}
        and any(b["attention"]["no_op"] for b in t["block_configs"]) and c["groups"][0]["layers"] < t["num_hidden_layers"]
    ),
    # a synthetic variant (the generator's VARIANTS): KV heads differing by layer, one uniform-type group of summed pages
    "Nemotron-NAS with differing KV heads": lambda c, t: (
        t.get("model_type") == "nemotron-nas" and len(c["groups"]) == 1
        and len({b["attention"]["n_heads_in_group"] for b in t["block_configs"] if not b["attention"]["no_op"]}) > 1
    ),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_a_vllm_computed_case(family):
    cases = [c for c in SIZED_033 if FAMILIES[family](c, _text(c["source"]))]
    assert cases, f"no vLLM-computed case for {family}"
    # each family is checked at more than one setting, sized ones by vLLM's numbers (test above)
    assert len({(c["tp"], c["kv_cache_dtype"], c["max_model_len"]) for c in cases}) >= 2


def test_block_size_16_for_sparse_mla_is_refused_as_vllm_0_33_refuses():
    # DeepSeek-V3.2 and GLM-5.x on Hopper: every sparse-MLA backend needs a multiple of 64, so
    # vLLM's own selector (run by the generator) finds none for --block-size 16; 64 sizes as usual
    refused = [c for c in REFUSED_033 if c.get("user_block_size") == 16 and "backend_error" in c]
    archs = {CONFIGS[c["source"]]["architectures"][0] for c in refused}
    assert {"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"} <= archs
    assert [c for c in SIZED_033 if c.get("user_block_size") == 64 and CONFIGS[c["source"]]["architectures"][0] == "DeepseekV32ForCausalLM"]
    # dense MLA (DeepSeek-V3) takes 16 on FLASH_ATTN_MLA
    assert [c for c in SIZED_033 if c.get("user_block_size") == 16 and CONFIGS[c["source"]]["architectures"][0] == "DeepseekV3ForCausalLM"]


def test_cross_attention_family_is_refused_as_vllm_0_33_refuses():
    cases = [c for c in REFUSED_033 if _text(c["source"]).get("cross_attention_layers")]
    assert cases and not [c for c in SIZED_033 if _text(c["source"]).get("cross_attention_layers")]


@pytest.mark.parametrize("item", SIZED, ids=[_id(i) for i in SIZED])
def test_sized_case_matches_vllm(item):
    data, case = item
    r = _run(data, case)
    assert r.num_blocks == case["num_blocks"]
    assert r.blocks_per_request == case["blocks_per_request"]
    assert r.kv_cache_tokens == case["kv_cache_tokens"]
    assert f"{r.max_concurrency:.2f}" == f"{case['max_concurrency']:.2f}"
    assert r.max_concurrency == pytest.approx(case["max_concurrency"], rel=1e-12)
    # vLLM keeps gated-delta-net (linear attention) state in a MambaSpec: the fixture says "mamba"
    assert [(VLLM_KIND.get(g.kind, g.kind), g.layers, g.block_size, g.page_bytes, g.blocks_per_request) for g in r.groups] == [
        (g["kind"], g["layers"], g["block_size"], g["page_bytes"], g["blocks_per_request"]) for g in case["groups"]
    ]
    if "log_lines" in case:
        assert list(r.log_lines) == case["log_lines"]


@pytest.mark.parametrize("item", REFUSED, ids=[_id(i) for i in REFUSED])
def test_refused_case_matches_vllm(item):
    data, case = item
    with pytest.raises(EngineRefusal) as err:
        _run(data, case)
    if "refusal" in case:
        assert err.value.reason == case["refusal"]
    elif "backend_error" in case:  # vLLM's attention selector found no backend for the user's --block-size
        assert case["backend_error"].startswith("No valid attention backend found for cuda")
        assert err.value.field == "block_size" and err.value.reason.startswith("No valid attention backend found for cuda")
    elif "unsupported" in case:  # 0.10: V0-only models, pages of different sizes; cross-attention
        assert err.value.field in ("model", "engine")
    elif err.value.field == "model" and "Mllama" in str(err.value.value):
        # vLLM 0.33 has no Mllama: it fails on the missing image processor (or, past the maximum
        # length, on max_model_len first); the planner refuses the architecture up front
        assert "OSError: Can't load image processor" in case["config_error"] or "max_model_len" in case["config_error"]
    elif err.value.field == "model" and str(err.value.value) in NOT_REGISTERED and _rules(data) == "0.33":
        # from a folder holding only config.json, vLLM 0.33 fails first in transformers, which does
        # not know the model type; the architecture is not in its registry either (the planner's
        # reason), so both refuse to start
        assert "Transformers does not recognize this architecture" in case["config_error"]
        assert err.value.reason.startswith(f"Model architectures ['{err.value.value}'] are not supported for now")
    elif "config_error" in case and "User-specified max_model_len" in case["config_error"]:
        expected = case["config_error"].split(": ", 1)[1]  # the generator kept vLLM's first line (0.33: its first 400 characters)
        assert len(expected) > 200 and err.value.reason.startswith(expected)
    elif "config_error" in case:  # heads not divisible by tp, an architecture vLLM dropped, a model type it cannot load
        expected = case["config_error"].split(": ", 1)[1]
        if err.value.field in ("model", "engine") and any(text in expected for text in LOAD_FAILURES):
            # the release cannot load this config: its transformers does not know the model type
            # (or would need the checkpoint's own code, which the generator's config-only folder
            # lacks), the config class fails, or 0.10's V0 fallback refuses the setting; those
            # words are transformers' or V0's, not the V1 start-up the planner predicts
            return
        assert err.value.reason == expected


@pytest.mark.parametrize(("source", "tp", "gib", "tokens", "concurrency"), [
    ("reference/openai__gpt-oss-120b.json", 4, 45.32, 2_640_144, "284.25"),
    ("published/Qwen__Qwen2-7B-Instruct.json", 2, 31.83, 1_192_160, "72.76"),
])
def test_published_logs_reproduced_by_vllm_0_10_1_itself(source, tp, gib, tokens, concurrency):
    # vLLM 0.10.1.1's own code at int(GiB x 2^30) bytes, and the planner's 0.10 rules on the same
    # case; the published figures come from a budget vLLM printed rounded to 0.01 GiB, so some
    # block count within +-0.005 GiB must print exactly the published tokens and concurrency
    data = FIXTURES["vllm_engine_cases_0.10.json"]
    assert data["vllm_version"] == "0.10.1.1"
    case = next(c for c in data["cases"] if c["source"] == source and c["tp"] == tp and c["kv_cache_dtype"] == "auto" and c["max_model_len"] == 16384 and c["available_kv_bytes"] == int(gib * 2**30))
    assert _run(data, case).log_lines == tuple(case["log_lines"])
    bytes_per_block = sum(g["layers"] * g["page_bytes"] for g in case["groups"]) // len(case["groups"])  # 147,456 and 458,752 B
    groups, block = len(case["groups"]), min(g["block_size"] for g in case["groups"])
    printed = {
        (n // groups * block, f"{n / case['blocks_per_request']:.2f}")
        for n in range(int((gib - 0.005) * 2**30) // bytes_per_block, int((gib + 0.005) * 2**30) // bytes_per_block + 1)
    }
    assert (tokens, concurrency) in printed


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


def test_architectures_vllm_does_not_register_are_refused_but_planned():
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    # vLLM 0.33's registry has MiniMaxM3SparseForCausalLM, not the checkpoint's MiniMaxM3ForCausalLM
    config = load_preset("minimax-m3")
    with pytest.raises(EngineRefusal) as err:
        vllm_capacity(config, available_kv_bytes=1 << 36, tp=8)
    assert err.value.field == "model" and "['MiniMaxM3ForCausalLM'] are not supported for now" in err.value.reason
    # nor StepFun's Step3p7FlashForCausalLM (0.33 has Step3p7ForConditionalGeneration)
    step = {"architectures": ["Step3p7FlashForCausalLM"], "model_type": "step3p7", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096}
    with pytest.raises(EngineRefusal) as err:
        vllm_capacity(step, available_kv_bytes=1 << 30)
    assert err.value.reason.startswith("Model architectures ['Step3p7FlashForCausalLM'] are not supported for now")
    # sgl-project's DeepSeek-V4 FP8 checkpoints say model_type "deepseek_ref", which transformers
    # does not know: vLLM stops reading the config there
    ref = load_preset("deepseek-v4-flash") | {"model_type": "deepseek_ref"}
    with pytest.raises(EngineRefusal) as err:
        vllm_capacity(ref, available_kv_bytes=1 << 36, tp=8)
    assert err.value.field == "model" and "cannot load a config of model type `deepseek_ref`" in err.value.reason
    # the plan keeps the planner's own paged figure and says why the engine's does not apply
    plan = compute_plan(make_inputs(gpu="H200-141GB", tp=8, gpu_count=8), prepare_model(config))
    engine = plan.kv_cache.engine
    assert engine.applies is False and "not supported for now" in engine.reason
    assert plan.kv_cache.maximum_sequences_by_memory > 0


def test_families_without_vllm_computed_cases_say_so():
    # Nemotron-NAS is covered by vLLM-computed cases (Llama-3.3-Nemotron-Super-49B, test_sized_case_matches_vllm)
    # except for linear-replaced attention blocks, which vLLM 0.33 ignores (DeciLMDecoderLayer reads only no_op):
    # no case covers them, so the figure is an estimate
    attn = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
    linear = {"n_heads_in_group": None, "no_op": False, "replace_with_linear": True}
    nas = {"model_type": "nemotron-nas", "architectures": ["DeciLMForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 64, "num_key_value_heads": None,
           "hidden_size": 8192, "max_position_embeddings": 131072, "block_configs": [{"attention": attn}, {"attention": linear}]}
    r = vllm_capacity(nas, available_kv_bytes=40 << 30, max_model_len=8192)
    assert any("Nemotron-NAS" in note and "not checked against vLLM's sizing code" in note for note in r.notes)
    assert not vllm_capacity({**nas, "block_configs": [{"attention": attn}, {"attention": {**attn, "no_op": True}}]}, available_kv_bytes=40 << 30, max_model_len=8192).notes
    assert not vllm_capacity(load_preset("glm-5"), available_kv_bytes=400 << 30, tp=8, max_model_len=65536).notes
    # DeepSeek-V4 has vLLM-computed cases now (test_sized_case_matches_vllm): no estimate note
    assert not vllm_capacity(load_preset("deepseek-v4-flash"), available_kv_bytes=400 << 30, tp=8, max_model_len=65536).notes


def test_deepseek_v4_packed_groups_by_hand():
    # DeepSeek-V4-Flash, 43 layers: compress ratios 0, 0, then 4 / 128 alternating, the last 4 (21 x C4A, 20 x C128A).
    # Pages, each padded to 576 B (vLLM 0.33 models/deepseek_v4, alignment=576):
    #   SWA 64 tokens x 584 B = 37,376 -> 37,440; C4 latent 256 / 4 = 64 x 584 -> 37,440; C128 latent 2 x 584 = 1,168 -> 1,728;
    #   indexer keys 64 x 132 = 8,448 -> 8,640; C4 compressor 4 x 8,192 = 32,768 -> 32,832; its indexer's 4 x 2,048 -> 8,640;
    #   C128 compressor 8 x 4,096 = 32,768 -> 32,832.
    # Buckets (one type, one block size): SWA 43; latents + indexer 62; ratio-4 states 21 + 21 (a 1:1 pattern); ratio-128
    # states 20. The chunk that pads [43, 21, 20] least, and at least 21, is 22: SWA splits into 22 + 21 layers.
    # Widest group: 21 x 8,640 + 21 x 37,440 + 20 x 1,728 = 1,002,240 B a block; 20 GiB // 1,002,240 = 21,426 blocks.
    # Per request at 8,192 tokens, 2 x 8,192 in flight: SWA cdiv(8,192, 64) + 1 = 129 (x 2 groups), latent cdiv(8,192, 256) = 32,
    # ratio-4 states cdiv(8,192, 4) + 1 = 2,049, ratio-128 states cdiv(8,192, 8) + 1 = 1,025: 3,364 blocks.
    r = vllm_capacity(load_preset("deepseek-v4-flash"), available_kv_bytes=20 << 30, tp=1, max_model_len=8192)
    assert [(g.kind, g.layers, g.block_size, g.page_bytes, g.blocks_per_request) for g in r.groups] == [
        ("sliding", 22, 64, 37_440, 129), ("sliding", 21, 64, 37_440, 129), ("indexer+mla", 62, 256, 1_002_240, 32),
        ("compressor", 42, 4, 870_912, 2_049), ("compressor", 20, 8, 32_832, 1_025),
    ]
    assert (r.bytes_per_block, r.num_blocks, r.blocks_per_request, r.block_size) == (1_002_240, 21_426, 3_364, 256)
    assert f"{r.max_concurrency:.2f}" == "6.37" and r.kv_cache_tokens == int(21_426 / 3_364 * 8192) == 52_176


def test_deepseek_v4_refuses_a_16_bit_cache_and_other_block_sizes():
    config = load_preset("deepseek-v4-flash")
    with pytest.raises(EngineRefusal) as err:
        vllm_capacity(config, available_kv_bytes=20 << 30, kv_cache_dtype="bfloat16", max_model_len=8192)
    assert err.value.reason.startswith("DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got bfloat16.")
    with pytest.raises(EngineRefusal) as err:
        vllm_capacity(config, available_kv_bytes=20 << 30, block_size=16, max_model_len=8192)
    assert err.value.field == "block_size" and "256-token blocks" in err.value.reason


def test_remembered_refusals_hold_no_traceback():
    # a refusal's traceback keeps the frames, and with them the whole geometry (about 11 MB for a
    # 10,000-layer config): the memo must keep the reason only, or distinct configs grow the server
    from planner.engines import vllm as engine

    config = {"model_type": "llama", "num_hidden_layers": 10_000, "num_attention_heads": 2, "num_key_value_heads": 1, "hidden_size": 64, "vocab_size": 1234, "max_position_embeddings": 1 << 20}
    for _ in range(2):  # the second call is answered from the memo
        with pytest.raises(EngineRefusal):
            vllm_capacity(config, available_kv_bytes=1 << 20)
    kept = [value for value, _ in engine._MEMO._data.values() if isinstance(value, EngineRefusal)]
    assert kept and all(value.__traceback__ is None for value in kept)



def test_vllm_result_answers_the_shared_engine_seam():
    # the published gpt-oss-120b log (vLLM 0.10.1, tp 4): 330,018 blocks; a block is one group's 18
    # layers x 8,192 B pages (16 tokens x 8 KV heads / 4 x head dim 64 x K and V x 2 B) = 147,456 B
    from planner.engines.common import EngineCapacity

    r = vllm_capacity(load_preset("gpt-oss-120b"), available_kv_bytes=330_018 * 147_456, tp=4, max_model_len=16384, max_num_batched_tokens=2048, vllm_version="0.10")
    assert isinstance(r, EngineCapacity)
    assert r.kv_pool_bytes == 330_018 * 147_456 == r.available_kv_bytes
    assert r.kv_cache_tokens == 2_640_144 and r.log_lines[0] == "GPU KV cache size: 2,640,144 tokens"



def test_every_setting_reaches_the_layout_under_its_own_name():
    # the memos key the settings as a plain tuple in VllmSettings' field order; a setting landing
    # in another's place would show here. Llama-3.1-8B at tp 2 in fp8 with 32-token blocks: a page
    # is 32 tokens x 8 KV heads / 2 x head dim 128 x K and V x 1 B = 32,768 B, and the one draft
    # layer joins the 32 full-attention layers' group: 33 x 32,768 = 1,081,344 B a block
    from planner.engines.vllm import VllmSettings

    s = VllmSettings(tp=2, kv_cache_dtype="fp8", block_size=32, max_num_batched_tokens=4096, version="0.24", prefix_caching=False, speculative_layers=1)
    assert VllmSettings.from_key(s.memo_key()) == s
    with pytest.raises(TypeError):
        VllmSettings(2)  # keyword-only
    r = vllm_capacity(load_preset("llama-3.1-8b"), available_kv_bytes=1 << 30, tp=2, kv_cache_dtype="fp8", block_size=32, max_model_len=8192, max_num_batched_tokens=4096, vllm_version="0.24", prefix_caching=False, speculative_layers=1)
    assert (r.tp, r.kv_cache_dtype, r.block_size, r.max_num_batched_tokens, r.vllm_version, r.prefix_caching) == (2, "fp8", 32, 4096, "0.24", False)
    assert [(g.kind, g.layers, g.page_bytes) for g in r.groups] == [("full", 33, 32_768)] and r.bytes_per_block == 1_081_344
    assert r.max_in_flight_tokens == 4096  # one batch in flight before 0.33


# --------------------------------------------------------------------------- CLI


def test_cli_engine_json_reproduces_the_published_gpt_oss_log(capsys):
    from planner.cli import main

    rc = main(["engine", "--preset", "gpt-oss-120b", "--tp", "4", "--max-model-len", "16384", "--max-num-batched-tokens", "2048", "--available-kv-bytes", str(330_018 * 147_456), "--vllm-version", "0.10", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["vllm_version"] == "0.10" and out["num_blocks"] == 330_018 and out["kv_cache_tokens"] == 2_640_144
    assert out["blocks_per_request"] == 1161 and out["max_concurrency"] == 330_018 / 1161
    assert out["log_lines"] == ["GPU KV cache size: 2,640,144 tokens", "Maximum concurrency for 16,384 tokens per request: 284.25x"]
    # vLLM 0.10 unify_kv_cache_configs sorts the groups by spec class: FullAttentionSpec first
    assert [(g["kind"], g["layers"], g["block_size"], g["page_bytes"]) for g in out["groups"]] == [("full", 18, 16, 8192), ("sliding", 18, 16, 8192)]
    assert out["serve_command"].startswith("vllm serve openai/gpt-oss-120b --tensor-parallel-size 4 --max-model-len 16384")


def test_cli_engine_refusal_exits_2_with_vllms_reason(capsys):
    from planner.cli import main

    # Llama-3.1-8B at 131,072 tokens: 32 layers x 8 heads x 256 x 2 B x 131,072 = 16 GiB for one request
    rc = main(["engine", "--preset", "llama-3.1-8b", "--available-kv-gib", "1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "refuses to start: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed" in err
    # 1 GiB less the null block (2 MiB) holds 511 blocks of 16 tokens: 8,176 tokens
    assert "the estimated maximum model length is 8176" in err


def test_cli_engine_predicts_the_budget_term_by_term(capsys):
    from planner.cli import main

    rc = main(["engine", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--gpu-memory-utilization", "0.9", "--max-model-len", "32768", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    terms = out["budget"]["terms"]
    assert [t["name"] for t in terms][:3] == ["device memory", "x gpu_memory_utilization 0.9", "weights per GPU"]
    assert all(t["source"] for t in terms)
    # the first two terms are what the budget starts from (the total, less its unused share); the rest is what start-up takes
    taken = sum(t["bytes"] for t in terms[2:] if t["in_budget"])
    assert terms[0]["bytes"] + terms[1]["bytes"] - taken == out["budget"]["available_kv_bytes"] == out["available_kv_bytes"]
    # the total CUDA reports on an H100 SXM (79.18 GiB, published vLLM start-up logs), not the nominal 80
    total = int(79.18 * 2**30)
    assert terms[0]["bytes"] == total and terms[1]["bytes"] == int(total * 0.9) - total
    assert "--gpu-memory-utilization 0.9" in out["serve_command"] and "--max-num-seqs 1024" in out["serve_command"]


# --------------------------------------------------------------------------- plans


def test_plan_under_vllm_admits_with_the_engine_reservation():
    from planner.plan import compute_plan, make_inputs, memory_basis, prepare_model
    from planner.presets import load_preset

    model = prepare_model(load_preset("gemma-3-1b"))
    plan = compute_plan(make_inputs(), model)  # 2,560 reserved tokens
    kv, engine = plan.kv_cache, plan.kv_cache.engine
    # 22 sliding (512) + 4 full layers, 1 KV head of 256: page 16 x 256 x 2 x 2 B = 16,384 B;
    # group size 4 -> 6 sliding groups + 1 full, 4 x 16,384 = 65,536 B a block
    assert engine.bytes_per_block == 65_536 and engine.groups == "4 sliding (512), 4 sliding (512), 4 sliding (512), 4 sliding (512), 3 sliding (512), 3 sliding (512), 4 full"
    # a request: full cdiv(2,560, 16) = 160; sliding cdiv(min(511 + 2 x 8,192, 2,560), 16) + 1 = 161
    assert engine.blocks_per_request == 160 + 6 * 161
    blocks = plan.capacity.available_for_kv_bytes // 65_536
    assert kv.maximum_sequences_by_memory == blocks // 1126
    assert kv.steady_state_sequences > 3 * kv.maximum_sequences_by_memory  # sliding layers hold 512, not 2,560
    assert "admits a request only when blocks for all 2,560 reserved tokens are free" in engine.why
    assert memory_basis(plan) == f"vLLM 0.33 block reservation; steady state {kv.steady_state_sequences:,}"
    older = compute_plan(make_inputs(vllm_version="0.24"), model).kv_cache.engine
    assert older.blocks_per_request == 160 + 6 * 161  # 2,560 tokens bind before one batch of 8,192 does


def test_plan_engine_does_not_apply_to_int8_or_static():
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    model = prepare_model(load_preset("llama-3.1-8b"))
    int8 = compute_plan(make_inputs(kv_dtype="int8"), model)
    assert int8.kv_cache.engine.applies is False and "no int8 KV cache" in int8.kv_cache.engine.reason
    assert int8.kv_cache.maximum_sequences_by_memory == int8.kv_cache.steady_state_sequences
    static = compute_plan(make_inputs(reservation="static"), model)
    assert static.kv_cache.engine is None and "engine" not in static.summary()["kv_cache"]


def test_plan_page_shows_the_vllm_startup_preview():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert any("vLLM start-up preview" in m.value and "vLLM 0.33" in m.value for m in at.markdown)
    codes = [c.value for c in at.code]
    assert any(c.startswith("GPU KV cache size: ") and "Maximum concurrency for 131,072 tokens per request" in c for c in codes)
    assert any(c.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --max-model-len 131072 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9") for c in codes)
