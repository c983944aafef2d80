"""Weight bytes per quantization format against real checkpoints' stored bytes.

Each expected figure names where it comes from: a checkpoint's safetensors index
(``metadata.total_size``: the bytes of every tensor it stores), a published tensor listing (dtypes
and shapes), or the tensor shapes vLLM's loader creates for the format (what a checkpoint must hold
for vLLM to load it).
"""

from __future__ import annotations

import json

import pytest

from planner.engines.vllm_memory import GIB, vllm_weights_bytes
from planner.hardware import get_device
from planner.plan import prepare_model
from planner.presets import load_preset
from planner.weights import WEIGHT_DTYPE_BITS, estimate_weights, stored_bytes
from scripts.fit_vllm_memory import REFERENCE


def _weights(config: dict, **kw):
    return estimate_weights(config, prepare_model(config).geometry, **kw)


@pytest.mark.parametrize(("preset", "total_size", "where"), [
    # meta-llama/Llama-3.1-8B(-Instruct) model.safetensors.index.json metadata.total_size (bf16)
    ("llama-3.1-8b", 16_060_522_496, "index total_size"),
    # openai/gpt-oss-20b model.safetensors.index.json metadata.total_size: mxfp4 experts (uint8
    # blocks, two values a byte, and an e8m0 scale per 32) + bf16 attention, sinks, biases, router
    ("gpt-oss-20b", 13_761_264_768, "index total_size"),
    # openai/gpt-oss-120b: its safetensors tensor bytes
    ("gpt-oss-120b", 65_248_815_744, "tensor bytes"),
    # Gemma 3 27B with its SigLIP vision tower and projector: google/medgemma-27b-it (the same
    # Gemma3ForConditionalGeneration shapes) model.safetensors.index.json metadata.total_size
    ("gemma-3-27b-it", 54_864_813_280, "index total_size"),
])  # fmt: skip
def test_checkpoint_bytes_equal_the_safetensors_index(preset, total_size, where):
    w = _weights(load_preset(preset))
    assert w.checkpoint_bytes == total_size, where


def test_gemma3_vision_tower_is_counted_apart_from_the_decoder():
    w = _weights(load_preset("gemma-3-27b-it"))
    # SigLIP-so400m (27 layers, 1152 wide, 4304 MLP, 896 px / 14 px patches) + Gemma 3's projector
    # (1152 x 5376 and an RMSNorm): 423,060,336 parameters
    assert w.encoder_params == 423_060_336
    assert w.encoder_bytes == 2 * 423_060_336


def test_compressed_tensors_fp8_is_8_bit_not_int4():
    # RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic: config_groups.group_0.weights num_bits 8, type
    # float, strategy channel, no top-level "bits" (the planner used to read it as int4: 37.0 GiB)
    case = json.loads((REFERENCE / "vllm_startup_logs.json").read_text())["cases"][3]
    config = {**json.loads((REFERENCE / "configs/meta-llama__Llama-3.1-70B.json").read_text()), **case["config_overrides"]}
    q = case["config_overrides"]["quantization_config"]
    # one 8192 x 8192 q_proj: 67,108,864 fp8 bytes + 8,192 bf16 channel scales
    assert stored_bytes(q, 8192, 8192, "model.layers.0.self_attn.q_proj", "attn") == 8192 * 8192 + 8192 * 2
    assert stored_bytes(q, 128256, 8192, "lm_head", "lm_head") == 128256 * 8192 * 2  # "ignore": ["lm_head"]
    w = _weights(config)
    assert w.dtype_label == "compressed-tensors fp8"
    assert w.bytes / GIB == pytest.approx(67.68, abs=0.01)
    # what vLLM 0.11 loaded on one H100 ("Model loading took 67.72 GiB"): + fp32 channel scales + the RoPE cache
    loaded, _ = vllm_weights_bytes(config, prepare_model(config).geometry, get_device("H100-SXM-80GB"), release="0.11")
    assert loaded / GIB == pytest.approx(67.72, abs=0.01)


def test_gpt_oss_on_ampere_takes_marlin_padding():
    # vLLM 0.10.1 gpt-oss-120b at A100 TP 4 loaded 17.22 GiB per GPU (a published start-up log):
    # Marlin pads the per-GPU intermediate 720 -> 768 and the hidden size 2880 -> 3072
    config = load_preset("gpt-oss-120b")
    per_gpu, source = vllm_weights_bytes(config, prepare_model(config).geometry, get_device("A100-SXM-80GB"), tp=4, release="0.10")
    assert per_gpu / GIB == pytest.approx(17.22, abs=0.05)
    assert "Marlin" in source


def test_modelopt_nvfp4_expert_matrices_match_a_published_listing():
    # a modelopt NVFP4 DeepSeek-R1 checkpoint's layer-15 tensors (published dtypes and shapes):
    # down_proj.weight [7168, 1024] U8, weight_scale [7168, 128] F8_E4M3, weight_scale_2 [] F32,
    # input_scale [] F32; gate_proj.weight [2048, 3584] U8, weight_scale [2048, 448] F8_E4M3, ...
    q = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}}
    assert stored_bytes(q, 7168, 2048, "model.layers.15.mlp.experts.0.down_proj", "expert") == 7168 * 1024 + 7168 * 128 + 4 + 4
    assert stored_bytes(q, 2048, 7168, "model.layers.15.mlp.experts.0.gate_proj", "expert") == 2048 * 3584 + 2048 * 448 + 4 + 4
    # self_attn.q_b_proj.weight [24576, 1536] BF16 in the same listing: excluded modules stay 16-bit
    assert stored_bytes(q, 24576, 1536, "model.layers.15.self_attn.q_b_proj", "attn") == 24576 * 1536 * 2


def test_compressed_tensors_nvfp4_pack_quantized_as_vllm_loads_it():
    # vLLM 0.11 CompressedTensorsW4A4Fp4.create_weights: weight_packed [out, in / 2] uint8,
    # weight_scale [out, in / 16] float8_e4m3fn, weight_global_scale and input_global_scale [1] float32
    q = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True},
        "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}}}}  # fmt: skip
    assert stored_bytes(q, 14336, 4096) == 14336 * 2048 + 14336 * 256 + 4 + 4


def test_compressed_tensors_w4a16_group_packs_int32_words():
    # vLLM 0.11 CompressedTensorsWNA16.create_weights: weight_packed [out, in / 8] int32,
    # weight_scale [out, in / 128] bf16, weight_shape [2] int64; asymmetric adds weight_zero_point [out / 8, in / 128] int32
    sym = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}}
    assert stored_bytes(sym, 4096, 4096) == 4096 * 512 * 4 + 4096 * 32 * 2 + 16
    asym = json.loads(json.dumps(sym))
    asym["config_groups"]["g"]["weights"]["symmetric"] = False
    assert stored_bytes(asym, 4096, 4096) == 4096 * 512 * 4 + 4096 * 32 * 2 + 16 + 512 * 32 * 4


def test_awq_matrix_matches_a_published_listing():
    # an AWQ Llama checkpoint's model.layers.0.self_attn.q_proj (published): qweight [4096, 512]
    # int32, qzeros [32, 512] int32, scales [32, 4096] float16
    q = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    assert stored_bytes(q, 4096, 4096, "model.layers.0.self_attn.q_proj", "attn") == 4096 * 512 * 4 + 32 * 512 * 4 + 32 * 4096 * 2


def test_gptq_matrix_as_vllm_loads_it():
    # vLLM 0.11 GPTQLinearMethod.create_weights: qweight [in / 8, out] int32, g_idx [in] int32,
    # qzeros [in / 128, out / 8] int32, scales [in / 128, out] float16
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    assert stored_bytes(q, 11008, 4096) == 512 * 11008 * 4 + 4096 * 4 + 32 * 1376 * 4 + 32 * 11008 * 2


def test_fp8_block_scaled_as_deepseek_v3_stores_it():
    # DeepSeek-V3 (quant_method fp8, weight_block_size [128, 128]): e4m3 weights and a float32
    # weight_scale_inv per 128 x 128 block (vLLM 0.11 Fp8LinearMethod.create_weights:
    # [ceil(out / 128), ceil(in / 128)]); q_b_proj 24576 x 1536 -> [192, 12]; the router stays bf16
    q = load_preset("deepseek-v3")["quantization_config"]
    assert stored_bytes(q, 24576, 1536, "model.layers.3.self_attn.q_b_proj", "attn") == 24576 * 1536 + 192 * 12 * 4
    assert stored_bytes(q, 576, 7168, "model.layers.3.self_attn.kv_a_proj_with_mqa", "attn") == 576 * 7168 + 5 * 56 * 4
    assert stored_bytes(q, 256, 7168, "model.layers.3.mlp.gate", "router") == 256 * 7168 * 2


def test_bitsandbytes_nf4_double_quantised():
    # bitsandbytes Params4bit (what vLLM's BitsAndBytesModelLoader reads): weight packed two a byte,
    # absmax one uint8 per 64 values, nested_absmax float32 per 256 absmax, nested_quant_map (256)
    # and quant_map (16) float32; the quant_state JSON record (a few hundred bytes) is not counted
    q = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}
    blocks = 4096 * 4096 // 64
    assert stored_bytes(q, 4096, 4096) == 4096 * 4096 // 2 + blocks + 4 * (blocks // 256) + 1024 + 64
    int8 = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    assert stored_bytes(int8, 4096, 4096) == 4096 * 4096 + 4096 * 4  # SCB: a float32 per row


def test_fp4_weight_dtypes_can_be_chosen():
    assert {"nvfp4", "mxfp4"} <= set(WEIGHT_DTYPE_BITS)
    config = load_preset("llama-3.1-8b")
    bf16, nvfp4, mxfp4 = (_weights(config, weight_dtype=d) for d in ("bf16", "nvfp4", "mxfp4"))
    # 4 bits + an fp8 scale per 16 values = 4.5 bits; 4 bits + an e8m0 per 32 = 4.25 bits; norms 16-bit
    norms = 32 * 2 * 4096 + 4096
    assert nvfp4.bytes == int(nvfp4.total_params * 4.5 / 8 + 2 * norms)
    assert mxfp4.bytes == int(mxfp4.total_params * 4.25 / 8 + 2 * norms)
    assert bf16.bytes == 2 * (bf16.total_params + norms)
