"""Bundled presets: every file loads, lists, and gives the hand-computed K/V numbers.

Each expected number below is worked out by hand from the published config (bf16 = 2 bytes,
tp=1, paged runtime "vllm") and written next to its case:

* MHA/GQA/MQA layer: 2 (K and V) x KV heads x head_dim x 2 B per token;
* MLA layer (paged): (kv_lora_rank + qk_rope_head_dim) x 2 B per token, no factor 2;
* ``kv_bytes_per_token`` sums only layers whose cache grows with every token (full + MLA);
* ``kv_bytes_at_tokens`` = full x T + sliding x min(T, W) + chunked x (T mod C, or C).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from planner import presets
from planner.configio import parse_config_text
from planner.errors import PlannerError
from planner.presets import DEFAULT_PRESET, PRESETS_DIR, list_presets, load_preset

kv = pytest.importorskip("planner.kv", reason="planner.kv (inspect_config) is not available")

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

# name: (hub id, kv_bytes_per_token, layers per kind, tokens T, kv_bytes_at_tokens at T)
CASES: dict[str, tuple[str, int, dict[str, int], int, int]] = {
    # --- dense GQA / MHA ----------------------------------------------------------------------
    # 2 x 32 layers x 8 KV heads x 128 (4096/32) x 2 B = 131,072; x 4096 = 536,870,912
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B-Instruct", 131_072, {"full": 32}, 4096, 536_870_912),
    # 2 x 80 layers x 8 KV heads x 128 (8192/64) x 2 B = 327,680; x 4096 = 1,342,177,280
    "llama-3.1-70b": ("meta-llama/Llama-3.1-70B-Instruct", 327_680, {"full": 80}, 4096, 1_342_177_280),
    # MHA: 2 x 32 layers x 32 KV heads x 128 x 2 B = 524,288; x 4096 = 2,147,483,648
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", 524_288, {"full": 32}, 4096, 2_147_483_648),
    # 2 x 16 layers x 8 KV heads x 64 (explicit head_dim) x 2 B = 32,768; x 4096 = 134,217,728
    "llama-3.2-1b": ("meta-llama/Llama-3.2-1B-Instruct", 32_768, {"full": 16}, 4096, 134_217_728),
    # 2 x 36 layers x 8 KV heads x 128 (explicit head_dim) x 2 B = 147,456; x 4096 = 603,979,776
    "qwen3-8b": ("Qwen/Qwen3-8B", 147_456, {"full": 36}, 4096, 603_979_776),
    # 2 x 28 layers x 8 KV heads x 128 (explicit; 1024/16 would be 64) x 2 B = 114,688 (112 KiB);
    # x 4096 = 469,762,048
    "qwen3-0.6b": ("Qwen/Qwen3-0.6B", 114_688, {"full": 28}, 4096, 469_762_048),
    # MoE: 2 x 48 layers x 4 KV heads x 128 x 2 B = 98,304; x 4096 = 402,653,184
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", 98_304, {"full": 48}, 4096, 402_653_184),
    # use_sliding_window false (window 131072 > 32768 anyway): 2 x 28 x 4 KV heads x 128 (3584/28)
    # x 2 B = 57,344; x 4096 = 234,881,024
    "qwen2.5-7b": ("Qwen/Qwen2.5-7B-Instruct", 57_344, {"full": 28}, 4096, 234_881_024),
    # explicit head_dim 128 != 5120/32 = 160: 2 x 40 x 8 x 128 x 2 B = 163,840; x 4096 = 671,088,640
    "mistral-small-24b": ("mistralai/Mistral-Small-24B-Instruct-2501", 163_840, {"full": 40}, 4096, 671_088_640),
    # MoE, sliding_window null: 2 x 32 x 8 x 128 x 2 B = 131,072; x 4096 = 536,870,912
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", 131_072, {"full": 32}, 4096, 536_870_912),
    # window 262144 >= max_position_embeddings 131072 never binds: 2 x 32 x 32 KV heads x 96 (3072/32)
    # x 2 B = 393,216; x 8000 = 3,145,728,000
    "phi-3.5-mini": ("microsoft/Phi-3.5-mini-instruct", 393_216, {"full": 32}, 8000, 3_145_728_000),
    # --- sparse wrappers (text_config completed with the architecture's defaults) --------------
    # LLaVA text_config lists no sizes -> LlamaConfig defaults 32 layers, 32 heads, 4096 hidden:
    # 2 x 32 x 32 x 128 x 2 B = 524,288; x 4096 = 2,147,483,648
    "llava-1.5-7b": ("llava-hf/llava-1.5-7b-hf", 524_288, {"full": 32}, 4096, 2_147_483_648),
    # 40 layers, 8 of them cross-attention (3, 8, ..., 38; cache encoder states, not tokens):
    # 2 x 32 self layers x 8 x 128 x 2 B = 131,072; x 4096 = 536,870,912
    "llama-3.2-11b-vision": ("meta-llama/Llama-3.2-11B-Vision-Instruct", 131_072, {"full": 32, "cross": 8}, 4096, 536_870_912),
    # --- sliding window / interleaved local-global ---------------------------------------------
    # every layer slides with W=4096 < 32768: 0 B/token grows; at T=10000:
    # 32 layers x (2 x 8 x 128 x 2 B = 4096) x min(10000, 4096) = 536,870,912
    "mistral-7b-v0.1": ("mistralai/Mistral-7B-v0.1", 0, {"sliding": 32}, 10_000, 536_870_912),
    # Gemma 2: every other layer global (i odd) -> 21 full + 21 sliding (W 4096), head_dim 256:
    # 2 x 21 x 8 x 256 x 2 B = 172,032; at T=8000: 172,032 x 8000 = 1,376,256,000
    # + 21 x (2 x 8 x 256 x 2 = 8192) x 4096 = 704,643,072 -> 2,080,899,072
    "gemma-2-9b": ("google/gemma-2-9b", 172_032, {"full": 21, "sliding": 21}, 8000, 2_080_899_072),
    # Gemma 3 27B: 62 layers, 5 local : 1 global -> global at 5, 11, ..., 59 = 10 full, 52 sliding
    # (W 1024); 2 x 10 x 16 KV heads x 128 x 2 B = 81,920; at T=8000: 81,920 x 8000 = 655,360,000
    # + 52 x (2 x 16 x 128 x 2 = 8192) x 1024 = 436,207,616 -> 1,091,567,616
    "gemma-3-27b-it": ("google/gemma-3-27b-it", 81_920, {"full": 10, "sliding": 52}, 8000, 1_091_567_616),
    # Gemma 3 1B: 26 layers -> global at 5, 11, 17, 23 = 4 full, 22 sliding (W 512); 1 KV head x 256:
    # 2 x 4 x 1 x 256 x 2 B = 4096; at T=8000: 4096 x 8000 = 32,768,000
    # + 22 x (2 x 1 x 256 x 2 = 1024) x 512 = 11,534,336 -> 44,302,336
    "gemma-3-1b": ("google/gemma-3-1b-it", 4096, {"full": 4, "sliding": 22}, 8000, 44_302_336),
    # Gemma 3n E4B: 35 layers, global every 5th (4, 9, ..., 34); the last 15 (20..34) reuse earlier
    # caches -> "none"; own caches: layers 0..19 = 4 full (4, 9, 14, 19) + 16 sliding (W 512);
    # 2 x 4 x 2 KV heads x 256 x 2 B = 8192; at T=8000: 8192 x 8000 = 65,536,000
    # + 16 x (2 x 2 x 256 x 2 = 2048) x 512 = 16,777,216 -> 82,313,216
    "gemma-3n-e4b": ("google/gemma-3n-E4B-it", 8192, {"full": 4, "sliding": 16, "none": 15}, 8000, 82_313_216),
    # Cohere2: 3 local : 1 global (pattern 4) -> 8 full + 24 sliding (W 4096):
    # 2 x 8 x 8 x 128 x 2 B = 32,768; at T=8000: 32,768 x 8000 = 262,144,000
    # + 24 x (2 x 8 x 128 x 2 = 4096) x 4096 = 402,653,184 -> 664,797,184
    "command-r7b": ("CohereLabs/c4ai-command-r7b-12-2024", 32_768, {"full": 8, "sliding": 24}, 8000, 664_797_184),
    # gpt-oss: alternating sliding (W 128) / full, 8 KV heads x 64:
    # 20b: 2 x 12 x 8 x 64 x 2 B = 24,576; at T=8000: 24,576 x 8000 = 196,608,000
    #      + 12 x (2 x 8 x 64 x 2 = 2048) x 128 = 3,145,728 -> 199,753,728
    "gpt-oss-20b": ("openai/gpt-oss-20b", 24_576, {"full": 12, "sliding": 12}, 8000, 199_753_728),
    # 120b: 2 x 18 x 8 x 64 x 2 B = 36,864; at T=8000: 36,864 x 8000 = 294,912,000
    #      + 18 x 2048 x 128 = 4,718,592 -> 299,630,592
    "gpt-oss-120b": ("openai/gpt-oss-120b", 36_864, {"full": 18, "sliding": 18}, 8000, 299_630_592),
    # --- chunked local attention -----------------------------------------------------------------
    # Llama 4 Scout: every 4th layer NoPE global (3, 7, ..., 47) = 12 full, 36 chunked (C 8192):
    # 2 x 12 x 8 x 128 x 2 B = 49,152; at T=10000: 49,152 x 10000 = 491,520,000
    # + 36 x (2 x 8 x 128 x 2 = 4096) x (10000 - 8192 = 1808) = 266,600,448 -> 758,120,448
    "llama-4-scout": ("meta-llama/Llama-4-Scout-17B-16E", 49_152, {"full": 12, "chunked": 36}, 10_000, 758_120_448),
    # --- MLA (latent; counted as "full") --------------------------------------------------------
    # 61 layers x (512 + 64) x 2 B = 70,272; x 4096 = 287,834,112
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", 70_272, {"full": 61}, 4096, 287_834_112),
    # 27 layers x (512 + 64) x 2 B = 31,104 (q_lora_rank null); x 4096 = 127,401,984
    "deepseek-v2-lite": ("deepseek-ai/DeepSeek-V2-Lite", 31_104, {"full": 27}, 4096, 127_401_984),
    # 61 layers x (512 + 64) x 2 B = 70,272; x 4096 = 287,834,112
    "kimi-k2": ("moonshotai/Kimi-K2-Instruct", 70_272, {"full": 61}, 4096, 287_834_112),
    # --- hybrids (recurrent state excluded from K/V) ---------------------------------------------
    # Jamba: attention where i % 8 == 4 -> 4, 12, 20, 28 = 4 full, 28 mamba:
    # 2 x 4 x 8 x 128 x 2 B = 16,384; x 4096 = 67,108,864
    "jamba-v0.1": ("ai21labs/Jamba-v0.1", 16_384, {"full": 4, "mamba": 28}, 4096, 67_108_864),
    # Qwen3-Next: full every 4th layer (3, 7, ..., 47) = 12 full, 36 linear; 2 KV heads x 256:
    # 2 x 12 x 2 x 256 x 2 B = 24,576; x 4096 = 100,663,296
    "qwen3-next-80b-a3b": ("Qwen/Qwen3-Next-80B-A3B-Instruct", 24_576, {"full": 12, "linear_attention": 36}, 4096, 100_663_296),
    # Nemotron-H 8B: pattern of 52 = 24 "M", 4 "*", 24 "-" (MLP, no cache); attention_head_dim 128:
    # 2 x 4 x 8 x 128 x 2 B = 16,384; x 4096 = 67,108,864
    "nemotron-h-8b": ("nvidia/Nemotron-H-8B-Base-8K", 16_384, {"full": 4, "mamba": 24, "none": 24}, 4096, 67_108_864),
    # --- legacy key spellings --------------------------------------------------------------------
    # Falcon 7B: multi_query without new_decoder_architecture -> 1 KV head; 4544/71 = 64:
    # 2 x 32 x 1 x 64 x 2 B = 8192; x 4096 = 33,554,432
    "falcon-7b": ("tiiuae/falcon-7b", 8192, {"full": 32}, 4096, 33_554_432),
    # Falcon 40B: new_decoder_architecture + num_kv_heads 8; 8192/128 = 64:
    # 2 x 60 x 8 x 64 x 2 B = 122,880; x 4096 = 503,316,480
    "falcon-40b": ("tiiuae/falcon-40b", 122_880, {"full": 60}, 4096, 503_316_480),
    # GPT-BigCode multi_query (n_layer/n_head/n_embd): 6144/48 = 128:
    # 2 x 40 x 1 x 128 x 2 B = 20,480; x 4096 = 83,886,080
    "starcoder": ("bigcode/starcoder", 20_480, {"full": 40}, 4096, 83_886_080),
    # MPT (n_layers/n_heads/d_model, attn_config without kv_n_heads = MHA): 4096/32 = 128:
    # 2 x 32 x 32 x 128 x 2 B = 524,288; x 4096 = 2,147,483,648
    "mpt-7b": ("mosaicml/mpt-7b", 524_288, {"full": 32}, 4096, 2_147_483_648),
    # DBRX: attn_config.kv_n_heads 8, 6144/48 = 128: 2 x 40 x 8 x 128 x 2 B = 163,840;
    # x 4096 = 671,088,640
    "dbrx": ("databricks/dbrx-instruct", 163_840, {"full": 40}, 4096, 671_088_640),
    # ChatGLM: num_layers 40, multi_query_group_num 2, kv_channels 128 (4096/32):
    # 2 x 40 x 2 x 128 x 2 B = 40,960; x 4096 = 167,772,160
    "glm-4-9b": ("THUDM/glm-4-9b-chat", 40_960, {"full": 40}, 4096, 167_772_160),
    # --- 2026 families (configs as vendored by aiconfigurator-core 0.12.0) -----------------------
    # Gemma 4 26B-A4B: layer_types 5 sliding : 1 full -> full at 5, 11, 17, 23, 29 = 5 full, 25
    # sliding (W 1024). Full layers: attention_k_eq_v -> num_global_key_value_heads 2 x
    # global_head_dim 512, K and V both cached: 2 x 2 x 512 x 2 B = 4096 per layer x 5 = 20,480.
    # Sliding: 2 x 8 x 256 x 2 B = 8192 per layer. At T=8000: 20,480 x 8000 = 163,840,000
    # + 25 x 8192 x 1024 = 209,715,200 -> 373,555,200
    "gemma-4-26b-a4b": ("google/gemma-4-26B-A4B", 20_480, {"full": 5, "sliding": 25}, 8000, 373_555_200),
    # GLM-5 (DSA): 78 MLA layers x (512 + 64) x 2 B = 89,856 + indexer 78 x (128 fp8 + 128/128 x 4 B
    # scale = 132) = 10,296 -> 100,152; x 8000 = 801,216,000
    "glm-5": ("zai-org/GLM-5", 100_152, {"full": 78}, 8000, 801_216_000),
    # Nemotron 3 Ultra: layers_block_type of 108 = 48 mamba, 12 attention, 48 moe (no cache);
    # 2 x 12 x 2 KV heads x 128 x 2 B = 12,288; x 8000 = 98,304,000
    "nemotron-3-ultra": ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 12_288, {"full": 12, "mamba": 48, "none": 48}, 8000, 98_304_000),
    # Kimi K3: kda_layers (1-based) 69 KDA layers, the other 24 MLA: 24 x (512 + 64) x 2 B = 27,648;
    # x 8000 = 221,184,000
    "kimi-k3": ("moonshotai/Kimi-K3", 27_648, {"full": 24, "linear_attention": 69}, 8000, 221_184_000),
    # Qwen3.5-397B-A17B: full every 4th of 60 = 15 full, 45 linear; 2 x 15 x 2 KV heads x 256 x 2 B
    # = 30,720; x 8000 = 245,760,000
    "qwen3.5-397b-a17b": ("Qwen/Qwen3.5-397B-A17B", 30_720, {"full": 15, "linear_attention": 45}, 8000, 245_760_000),
    # DeepSeek-V4-Flash: 43 layers, compress_ratios[:43] = 0, 0, then 4/128 alternating -> 21 C4A,
    # 20 C128A layers; one 512-dim head in vLLM's FP8 sparse layout: 448 fp8 + 64 x 2 B rope + 448/64
    # scale bytes + 1 pad = 584 B per entry, whatever the KV dtype. Per token: 21 x 584 / 4 = 3066
    # + 20 x 584 / 128 = 91.25 (rounded up: 92) + indexer 21 x 132 / 4 = 693 -> 3851.
    # At T=8000: window 43 x 584 x 128 = 3,214,336 + 21 x 584 x 2000 = 24,528,000
    # + 20 x 584 x 62 (8000 // 128) = 724,160 + 21 x 132 x 2000 = 5,544,000, plus the compressors'
    # fp32 states (2 x coff x head_dim x 4 B over the last coff x ratio tokens): C4 21 x 8192 x 8 =
    # 1,376,256 + C128 20 x 4096 x 128 = 10,485,760 + indexer 21 x 2048 x 8 = 344,064 -> 46,216,576
    "deepseek-v4-flash": ("deepseek-ai/DeepSeek-V4-Flash", 3851, {"sliding": 43}, 8000, 46_216_576),
    # MiniMax-M3: 60 layers x 2 x 4 KV heads x 128 x 2 B = 122,880, plus the sparse-attention index
    # keys on the 57 layers whose sparse_attention_freq is 1: 57 x 128 x 2 B (bf16) = 14,592
    # -> 137,472; x 8000 = 1,099,776,000
    "minimax-m3": ("MiniMaxAI/MiniMax-M3", 137_472, {"full": 60}, 8000, 1_099_776_000),
    # --- the models teams deploy first (issue 27; configs as on the Hub: Qwen3-32B equals the
    # reference copy, Qwen3-235B-A22B, DeepSeek-R1 and V3.2 as vendored by aiconfigurator-core) -----
    # 2 x 64 layers x 8 KV heads x 128 x 2 B = 262,144; x 4096 = 1,073,741,824
    "qwen3-32b": ("Qwen/Qwen3-32B", 262_144, {"full": 64}, 4096, 1_073_741_824),
    # 2 x 80 x 8 x 128 (8192/64) x 2 B = 327,680 (Llama 3.1 70B's geometry); x 4096 = 1,342,177,280
    "llama-3.3-70b": ("meta-llama/Llama-3.3-70B-Instruct", 327_680, {"full": 80}, 4096, 1_342_177_280),
    # use_sliding_window false: 2 x 80 x 8 x 128 x 2 B = 327,680; x 4096 = 1,342,177,280
    "qwen2.5-72b": ("Qwen/Qwen2.5-72B-Instruct", 327_680, {"full": 80}, 4096, 1_342_177_280),
    # MoE: 2 x 94 x 4 KV heads x 128 x 2 B = 192,512; x 4096 = 788,529,152
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", 192_512, {"full": 94}, 4096, 788_529_152),
    # DeepSeek-V3's architecture: 61 x (512 + 64) x 2 B = 70,272; x 4096 = 287,834,112
    "deepseek-r1": ("deepseek-ai/DeepSeek-R1", 70_272, {"full": 61}, 4096, 287_834_112),
    # DSA: 61 MLA layers x 576 x 2 B = 70,272 + indexer 61 x (128 fp8 + 4 B scale = 132) = 8,052
    # -> 78,324; x 4096 = 320,815,104
    "deepseek-v3.2": ("deepseek-ai/DeepSeek-V3.2", 78_324, {"full": 61}, 4096, 320_815_104),
}

# recurrent state per sequence (bf16 conv/SSM unless the config asks for a float32 SSM cache)
STATE: dict[str, int] = {
    # 48 Mamba-2 layers: conv (256 x 64 + 2 x 8 groups x 128) x 3 = 55,296 x 2 B = 110,592;
    # SSM 256 heads x 64 x 128 = 2,097,152 x 4 B (mamba_ssm_cache_dtype float32) = 8,388,608;
    # 48 x 8,499,200 = 407,961,600
    "nemotron-3-ultra": 407_961_600,
    # 69 KDA layers: conv 3 x 96 heads x 128 x 3 = 110,592 x 2 B = 221,184; recurrent 96 x 128 x 128
    # = 1,572,864 x 4 B (float32, vLLM's KDA default) = 6,291,456; 69 x 6,512,640 = 449,372,160
    "kimi-k3": 449_372_160,
    # 45 Gated DeltaNet layers: conv (2 x 16 x 128 + 64 x 128) x 3 = 36,864; SSM 64 x 128 x 128 =
    # 1,048,576; (36,864 + 1,048,576) x 2 B x 45 = 97,689,600
    "qwen3.5-397b-a17b": 97_689_600,
}

# presets with recurrent layers: their state is reported separately and must be positive
RECURRENT = {"jamba-v0.1", "qwen3-next-80b-a3b", "nemotron-h-8b", *STATE}


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


@pytest.fixture(autouse=True)
def _bundled_dir(monkeypatch):
    monkeypatch.delenv(presets.ENV_VAR, raising=False)
    presets.clear_cache()
    yield
    presets.clear_cache()


def test_every_bundled_file_has_a_case():
    files = {p.stem for p in PRESETS_DIR.glob("*.json")}
    assert files == set(CASES), f"untested: {sorted(files - set(CASES))}; missing: {sorted(set(CASES) - files)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_preset_file_parses_and_names_its_hub_id(name):
    path = PRESETS_DIR / f"{name}.json"
    cfg = parse_config_text(path.read_bytes(), source=str(path))
    assert cfg["_name_or_path"] == CASES[name][0]
    assert HUB_ID.match(cfg["_name_or_path"])
    assert load_preset(name) == cfg


@pytest.mark.parametrize("name", sorted(CASES))
def test_preset_kv_numbers(name):
    _, per_token, layers, tokens, at_tokens = CASES[name]
    r = kv.inspect_config(load_preset(name), kv_dtype="bf16", tp=1, tokens=tokens, runtime="vllm")
    assert r.kv_bytes_per_token == per_token
    assert _nonzero(dict(r.layers)) == layers
    assert r.kv_bytes_at_tokens == at_tokens
    if name in STATE:
        assert r.state_bytes_per_sequence == STATE[name]
    elif name in RECURRENT:
        assert r.state_bytes_per_sequence > 0
    else:
        assert r.state_bytes_per_sequence == 0


@pytest.mark.parametrize(
    ("name", "runtime", "tp", "per_token"),
    [
        # transformers eager decompresses MLA: 61 x 128 heads x (128 + 64 K + 128 V) x 2 B = 4,997,120
        ("deepseek-v3", "transformers", 1, 4_997_120),
        # 27 x 16 heads x (128 + 64 + 128) x 2 B = 276,480
        ("deepseek-v2-lite", "transformers", 1, 276_480),
        # 61 x 64 heads x (128 + 64 + 128) x 2 B = 2,498,560
        ("kimi-k2", "transformers", 1, 2_498_560),
        # paged MLA latent is not split by TP: still 61 x 576 x 2 B = 70,272 per GPU
        ("deepseek-v3", "vllm", 8, 70_272),
        # 8 KV heads / tp 8 = 1 per GPU: 2 x 80 x 1 x 128 x 2 B = 40,960
        ("llama-3.1-70b", "vllm", 8, 40_960),
        # 2 KV heads, tp 4 -> replicated, max(1, 2 // 4) = 1: 2 x 40 x 1 x 128 x 2 B = 20,480
        ("glm-4-9b", "vllm", 4, 20_480),
        # MQA stays 1 KV head per GPU at tp 4: 2 x 40 x 1 x 128 x 2 B = 20,480
        ("starcoder", "vllm", 4, 20_480),
        # 2 KV heads, tp 2 -> 1 per GPU on the 12 global layers: 2 x 12 x 1 x 256 x 2 B = 12,288
        ("qwen3-next-80b-a3b", "vllm", 2, 12_288),
    ],
)
def test_preset_runtime_and_tp(name, runtime, tp, per_token):
    r = kv.inspect_config(load_preset(name), kv_dtype="bf16", tp=tp, tokens=4096, runtime=runtime)
    assert r.kv_bytes_per_token == per_token


def test_list_presets():
    infos = list_presets()
    assert len(infos) >= 20
    names = [p.name for p in infos]
    assert len(names) == len(set(names))
    assert names == sorted(names)
    assert DEFAULT_PRESET in names
    for p in infos:
        assert HUB_ID.match(p.hub_id), p
        assert p.model_type, p
        assert p.family and p.family != "unknown", p
    by_name = {p.name: p for p in infos}
    assert by_name["gemma-3-27b-it"].model_type == "gemma3"
    assert by_name["llama-3.1-8b"].family == "Llama"
    with pytest.raises(ValidationError):
        by_name["llama-3.1-8b"].name = "x"  # frozen


def test_list_presets_is_cached():
    assert presets.list_presets() == presets.list_presets()
    before = presets._scan.cache_info().hits
    presets.list_presets()
    assert presets._scan.cache_info().hits == before + 1


def test_default_preset_loads():
    cfg = load_preset(DEFAULT_PRESET)
    assert cfg["_name_or_path"] == "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("bad", ["no-such-model", "LLAMA-3.1-8B", "llama-3.1-8b.yaml"])
def test_unknown_preset(bad):
    with pytest.raises(PlannerError) as err:
        load_preset(bad)
    assert err.value.field == "preset"
    assert "unknown preset; known:" in err.value.reason
    assert DEFAULT_PRESET in err.value.reason


@pytest.mark.parametrize("bad", ["../x", "..", "../model_configs/llama-3.1-8b", "a/b", "a\\b", "/etc/passwd", "", "  "])
def test_preset_name_cannot_escape(bad):
    with pytest.raises(PlannerError) as err:
        load_preset(bad)
    assert err.value.field == "preset"


def test_env_override(tmp_path, monkeypatch):
    (tmp_path / "tiny.json").write_text('{"_name_or_path": "org/tiny", "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256}')
    (tmp_path / "broken.json").write_text("[1, 2]")
    monkeypatch.setenv(presets.ENV_VAR, str(tmp_path))
    assert presets.presets_dir() == Path(tmp_path)
    assert [p.name for p in list_presets()] == ["broken", "tiny"]
    assert load_preset("tiny")["_name_or_path"] == "org/tiny"
    with pytest.raises(PlannerError):
        load_preset("broken")  # ConfigError is a PlannerError
    with pytest.raises(PlannerError):
        load_preset(DEFAULT_PRESET)  # not in the overriding directory
