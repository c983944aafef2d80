"""Parameter count (total and active per token) and weight bytes from a config.

The count covers embeddings and LM head, attention (GQA/MQA and MLA), dense MLPs (gated or not),
MoE experts (routed and shared) and Mamba / linear-attention mixers, one :class:`Linear` per
weight matrix (:func:`linear_shapes`). Bytes follow the checkpoint's quantization format, matrix
by matrix, with the scales each format stores and the modules it leaves in 16 bits (the format's
``ignore`` / ``modules_to_not_convert`` / ``exclude_modules`` lists, matched on the Hugging Face
module names):

* ``fp8`` (DeepSeek / Qwen FP8): e4m3 weights, one fp32 ``weight_scale_inv`` per
  ``weight_block_size`` block (per tensor without one);
* ``compressed-tensors``: each ``config_groups`` entry's ``weights`` (``num_bits``, ``type`` int or
  float, ``strategy`` tensor / channel / group / block / tensor_group), packed as its ``format``
  says (``pack-quantized`` int32 words, ``float-quantized`` / ``int-quantized`` one byte,
  ``nvfp4-pack-quantized`` and ``mxfp4-pack-quantized`` two values a byte);
* ``mxfp4`` (gpt-oss): routed experts 4-bit with one e8m0 scale per 32 values;
* NVFP4 (``modelopt`` NVFP4, in ``config.json`` or ``hf_quant_config.json``): 4-bit float, one fp8
  scale per 16 values, a global fp32 scale per matrix;
* AWQ / GPTQ: int32-packed integers with an fp16 scale and a packed zero point per group (GPTQ
  also its ``g_idx``);
* bitsandbytes: nf4 / fp4 with an absmax per 64 values (double-quantised: one byte each plus an
  fp32 per 256), or int8 with an fp32 scale per row.

Norms, biases, attention sinks and, for multimodal checkpoints, the vision tower and audio encoder
(:func:`encoder_params`) are counted too, so that a 16-bit checkpoint comes out at its safetensors
``total_size``. ``total_params`` / ``active_params`` stay the decoder's matrices and embeddings,
as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from planner.config_keys import EXPERTS_PER_TOKEN_KEYS, ROUTED_EXPERT_KEYS
from planner.errors import ConfigError, PlannerError
from planner.geometry import ModelGeometry, text_config
from planner.limits import MAX_DIM, MAX_PARAMS, check_number

# bits per weight of a chosen weight dtype; nvfp4 / mxfp4 include their block scales
# (an fp8 per 16 values, an e8m0 per 32 values)
WEIGHT_DTYPE_BITS = {"auto": 0.0, "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0, "nvfp4": 4.5, "mxfp4": 4.25}
FP4_DTYPES = frozenset({"nvfp4", "mxfp4"})
NON_GATED = {"gpt2", "gpt_bigcode", "falcon", "phi", "mpt", "gptj", "gpt_neox", "opt", "bloom", "starcoder2", "nemotron_h", "nemotron"}


class WeightsEstimate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    total_params: int
    active_params: int
    expert_params: int  # routed-expert parameters (what mxfp4/int schemes usually quantize)
    expert_bytes: int = 0  # their bytes (a decode step reads only the experts its tokens route to)
    num_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    bytes: int  # the decoder: matrices, embeddings, norms and biases as the checkpoint stores them
    bits_per_param: float
    dtype_label: str
    source: str
    # vision tower / audio encoder and their projectors (multimodal checkpoints; vLLM loads them too)
    encoder_params: int = 0
    encoder_bytes: int = 0

    @property
    def checkpoint_bytes(self) -> int:
        """Every tensor of the checkpoint: the decoder and the encoders (its safetensors ``total_size``)."""
        return self.bytes + self.encoder_bytes


@dataclass(frozen=True, slots=True)
class Linear:
    """One weight matrix (``count`` identical ones: the routed experts of a layer)."""

    name: str  # Hugging Face module name, e.g. "model.layers.3.self_attn.q_proj" (experts: ".experts.0.")
    role: str  # attn, mlp, expert, shared_expert, router, latent, mamba, linear_attn, lm_head
    out_features: int
    in_features: int
    count: int = 1
    active: int = 1  # of ``count``, how many one token uses (routed experts: experts_per_token)

    @property
    def params(self) -> int:
        return self.out_features * self.in_features * self.count


def _get(cfg: dict, *keys: str, default: int = 0) -> int:
    """The first positive number among ``keys`` (finite and within its planner/limits.py range).

    Raises:
        ConfigError: the value is Infinity, NaN or implausibly large (e.g. ``1e308``).
    """
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (v <= 0):  # NaN is checked too
            return int(check_number(k, v, lo=0, hi=MAX_DIM, error=ConfigError))
    return default


MAX_DTYPES = 64  # distinct tensor dtypes in one checkpoint's counts (real ones list 1 to 4)


def check_parameter_counts(counts: object, field: str = "parameter_counts") -> dict[str, int] | None:
    """The checkpoint's dtype -> element counts (the Hub's safetensors metadata) through the same
    bounds as a config's numbers: whole, non-negative, at most :data:`MAX_PARAMS` together.
    None or an empty map stays None.

    Raises:
        ConfigError: naming the dtype whose count is negative, not whole, or absurdly large.
    """
    if counts is None or counts == {}:
        return None
    if not isinstance(counts, dict) or len(counts) > MAX_DTYPES:
        raise ConfigError(field, counts, f"must map at most {MAX_DTYPES} tensor dtypes to element counts")
    out, total = {}, 0
    for dtype, n in counts.items():
        if not isinstance(dtype, str) or not dtype.isascii() or not 0 < len(dtype) <= 16:
            raise ConfigError(field, dtype, "a tensor dtype is a short name such as BF16")
        out[dtype] = int(check_number(f"{field}.{dtype}", n, lo=0, hi=MAX_PARAMS, integer=True, error=ConfigError))
        total += out[dtype]
    if total > MAX_PARAMS:
        raise ConfigError(field, f"{total:.3g} parameters", f"is absurdly large (limit {MAX_PARAMS:.0e} parameters)")
    return out


def _moe_cfg(config: dict) -> dict:
    cfg = text_config(config)
    if isinstance(cfg.get("ffn_config"), dict):  # DBRX keeps its MLP and experts here
        cfg = {**cfg["ffn_config"], **cfg}
    return cfg


def _moe_shape(cfg: dict) -> tuple[int, int]:
    """(routed experts per MoE layer, experts each token is routed to); (0, 0) for dense models."""
    n_experts = _get(cfg, *ROUTED_EXPERT_KEYS)
    return n_experts, _get(cfg, *EXPERTS_PER_TOKEN_KEYS, default=2 if n_experts else 0)


def linear_shapes(config: dict, geo: ModelGeometry) -> tuple[Linear, ...]:
    """Every weight matrix of the decoder, the LM head last (none when tied to the embedding)."""
    cfg = _moe_cfg(config)
    h, heads = geo.hidden_size, geo.num_attention_heads
    vocab = geo.vocab_size or 32000
    gated = geo.model_type not in NON_GATED
    inter = _get(cfg, "intermediate_size", "ffn_hidden_size", "n_inner", default=4 * h)
    per_layer_inter = cfg.get("intermediate_size") if isinstance(cfg.get("intermediate_size"), list) else None
    n_experts, top_k = _moe_shape(cfg)
    moe_inter = _get(cfg, "moe_intermediate_size", "expert_intermediate_size", default=inter)
    shared = _get(cfg, "n_shared_experts", "num_shared_experts")
    shared_inter = _get(cfg, "shared_expert_intermediate_size", default=moe_inter * shared if shared else 0)
    first_dense = _get(cfg, "first_k_dense_replace")
    moe_every = _get(cfg, "decoder_sparse_step", "moe_layer_freq", "expert_layer_period", "interleave_moe_layer_step", default=1)
    # latent MoE (Nemotron 3 Ultra moe_latent_size, Kimi K3 routed_expert_hidden_size): routed
    # experts work in a narrower space, entered and left through two h x latent projections
    expert_h = _get(cfg, "moe_latent_size", "routed_expert_hidden_size", default=h)
    if geo.model_type.startswith("llama4"):  # one shared expert of the expert size; dense layers use intermediate_size_mlp
        shared_inter = moe_inter
        inter = _get(cfg, "intermediate_size_mlp", default=inter)
    out: list[Linear] = []

    def mlp(prefix: str, width: int, role: str, count: int = 1, active: int = 1, h_in: int = h) -> None:
        names = ("gate_proj", "up_proj", "down_proj") if gated else ("up_proj", "down_proj")
        for name in names:
            shape = (h_in, width) if name == "down_proj" else (width, h_in)
            out.append(Linear(f"{prefix}.{name}", role, *shape, count, active))

    for layer in geo.layers:
        i = layer.index
        p = f"model.layers.{i}"
        if layer.kind == "mamba":
            d_state = _get(cfg, "mamba_d_state", "ssm_state_size", default=16)
            nheads, groups = _get(cfg, "mamba_num_heads"), _get(cfg, "n_groups", default=1)
            d_inner = nheads * _get(cfg, "mamba_head_dim") if nheads else _get(cfg, "mamba_expand", default=2) * h
            out += [Linear(f"{p}.mixer.in_proj", "mamba", 2 * d_inner + 2 * groups * d_state + nheads, h), Linear(f"{p}.mixer.out_proj", "mamba", h, d_inner)]
        elif layer.kind == "linear_attention":
            out += [Linear(f"{p}.linear_attn.{n}", "linear_attn", h, h) for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
        elif layer.kind == "none" and geo.mamba is not None:
            pass  # Nemotron-H MLP-only layer: its MLP is added below
        elif geo.mla:
            m = geo.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            a = f"{p}.self_attn"
            if m.q_lora_rank:
                out += [Linear(f"{a}.q_a_proj", "attn", m.q_lora_rank, h), Linear(f"{a}.q_b_proj", "attn", heads * qk, m.q_lora_rank)]
            else:
                out.append(Linear(f"{a}.q_proj", "attn", heads * qk, h))
            out += [
                Linear(f"{a}.kv_a_proj_with_mqa", "attn", m.kv_lora_rank + m.qk_rope_head_dim, h),
                Linear(f"{a}.kv_b_proj", "attn", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
                Linear(f"{a}.o_proj", "attn", h, heads * m.v_head_dim),
            ]
        else:
            a = f"{p}.self_attn"
            kv = geo.num_kv_heads * geo.head_dim
            out += [Linear(f"{a}.q_proj", "attn", heads * geo.head_dim, h), Linear(f"{a}.k_proj", "attn", kv, h), Linear(f"{a}.v_proj", "attn", kv, h), Linear(f"{a}.o_proj", "attn", h, heads * geo.head_dim)]
        is_moe = n_experts > 0 and i >= first_dense and (i % moe_every == moe_every - 1 if moe_every > 1 else True)
        if geo.model_type.startswith("nemotron_h") and layer.kind != "none":
            continue  # Nemotron-H: mixer-only layers
        if is_moe:
            mlp(f"{p}.mlp.experts.0", moe_inter, "expert", n_experts, top_k, expert_h)
            if shared_inter:
                mlp(f"{p}.mlp.shared_experts", shared_inter, "shared_expert")
            if expert_h != h:
                out += [Linear(f"{p}.mlp.latent_down_proj", "latent", expert_h, h), Linear(f"{p}.mlp.latent_up_proj", "latent", h, expert_h)]
            out.append(Linear(f"{p}.mlp.gate", "router", n_experts, h))
        else:
            mlp(f"{p}.mlp", per_layer_inter[i] if per_layer_inter else inter, "mlp")
    if not geo.tie_word_embeddings:
        out.append(Linear("lm_head", "lm_head", vocab, h))
    return tuple(out)


def mlp_layers(config: dict, geo: ModelGeometry) -> tuple[int, int]:
    """(layers with routed experts, layers with a dense MLP) of the decoder, as :func:`linear_shapes`
    lays them out: routed experts in all but the first ``first_k_dense_replace`` layers (DeepSeek-V2 /
    V3, Kimi K2, GLM-4.5) and, with a step (``decoder_sparse_step``, ``moe_layer_freq``, Llama 4's
    ``interleave_moe_layer_step``), in every step-th; a dense MLP in the others (Nemotron-H's
    mixer-only layers have neither); (0, every layer with an MLP) for a dense model."""
    linears = linear_shapes(config, geo)
    return sum(1 for lin in linears if lin.role == "router"), sum(1 for lin in linears if lin.role == "mlp" and lin.name.endswith(".down_proj"))


def count_params(config: dict, geo: ModelGeometry) -> tuple[int, int, int]:
    """(total, active per token, routed-expert) parameter counts of the decoder."""
    linears = linear_shapes(config, geo)
    vocab = geo.vocab_size or 32000
    embed = vocab * geo.hidden_size
    total = sum(lin.params for lin in linears) + embed
    # per-token compute touches the LM head, not the input embedding lookup
    active = sum(lin.out_features * lin.in_features * lin.active for lin in linears if lin.role != "lm_head") + vocab * geo.hidden_size
    experts = sum(lin.params for lin in linears if lin.role == "expert")
    return total, active, experts


# --------------------------------------------------------------------------- other tensors


def _extra_params(config: dict, geo: ModelGeometry) -> int:
    """Norm weights, biases and attention sinks of the decoder (16-bit in every format here)."""
    cfg = _moe_cfg(config)
    h, mt = geo.hidden_size, geo.model_type
    heads, kv, hd = geo.num_attention_heads, geo.num_kv_heads, geo.head_dim
    n_experts, _ = _moe_shape(cfg)
    norms_per_layer = 4 if mt.startswith(("gemma2", "gemma3")) else 2
    total = h  # final norm
    attn_bias = bool(cfg.get("attention_bias")) or mt in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "gpt_oss")
    for layer in geo.layers:
        total += norms_per_layer * h
        if layer.kind in ("mamba", "linear_attention") or (layer.kind == "none" and geo.mamba is not None):
            continue
        if geo.mla:
            total += (geo.mla.q_lora_rank or 0) + geo.mla.kv_lora_rank  # q_a_layernorm, kv_a_layernorm
        else:
            if mt.startswith(("qwen3", "gemma3", "olmo2")):
                total += 2 * hd  # q_norm, k_norm
            if attn_bias:
                total += (heads + 2 * kv) * hd + (h if mt == "gpt_oss" or cfg.get("attention_bias") else 0)
        if mt == "gpt_oss":
            total += heads + n_experts  # attention sinks, router bias
    if mt == "gpt_oss":
        inter = _get(cfg, "intermediate_size")
        total += len(geo.layers) * n_experts * (2 * inter + h)  # expert biases (gate_up, down)
    return total


def _matches(name: str, patterns: object) -> bool:
    """``name`` is in a format's exclusion list: exact or suffix names, ``re:`` regexes
    (compressed-tensors), ``*`` globs (modelopt, gpt-oss) and substrings (AWQ/GPTQ/bitsandbytes)."""
    if not isinstance(patterns, (list, tuple)):
        return False
    for pat in patterns:
        if not isinstance(pat, str) or not pat:
            continue
        if pat.startswith("re:"):
            try:
                if re.match(pat[3:], name):
                    return True
            except re.error:
                continue
        elif "*" in pat:
            if re.fullmatch(".*".join(re.escape(part) for part in pat.split("*")), name) or re.fullmatch(".*".join(re.escape(part) for part in pat.split("*")) + r"(\..*)?", name):
                return True
        elif name == pat or name.endswith("." + pat) or name.startswith(pat + ".") or f".{pat}." in f".{name}.":
            return True
    return False


# --------------------------------------------------------------------------- quantization formats


@dataclass(frozen=True, slots=True)
class _Scheme:
    """How one format stores a quantised matrix of ``out`` x ``inp`` values."""

    label: str
    bits: int  # weight bits
    packing: str  # "byte" (one value a byte or packed into bytes), "int32_rows" (AWQ), "int32_cols" (GPTQ/compressed pack)
    scale_every: int  # values per scale along the input dim (0: one per row, -1: one per matrix, >0 group size)
    scale_bytes: int
    block: tuple[int, int] | None = None  # block scales (rows, cols) instead of scale_every
    zero_point: bool = False  # a packed zero point per scale (AWQ/GPTQ asymmetric)
    per_matrix_bytes: int = 0  # global scales, input scales, shape records, g_idx rows...
    g_idx: bool = False  # GPTQ: an int32 group index per input value

    def matrix_bytes(self, out: int, inp: int) -> int:
        if self.packing == "int32_cols":  # compressed-tensors pack-quantized, GPTQ: words along the input
            body = out * math.ceil(inp * self.bits / 32) * 4
        elif self.packing == "int32_rows":  # AWQ: words along the output
            body = inp * math.ceil(out * self.bits / 32) * 4
        else:
            body = math.ceil(out * inp * self.bits / 8)
        if self.block:
            scales = math.ceil(out / self.block[0]) * math.ceil(inp / self.block[1])
        elif self.scale_every == 0:
            scales = out
        elif self.scale_every < 0:
            scales = 1
        else:
            scales = out * math.ceil(inp / self.scale_every)
        size = body + scales * self.scale_bytes + self.per_matrix_bytes
        if self.zero_point:  # int32-packed zero points, one per scale
            size += math.ceil(scales * self.bits / 32) * 4
        if self.g_idx:
            size += inp * 4
        return size


def _ct_scheme(group: dict, fmt: str) -> _Scheme | None:
    """A compressed-tensors ``config_groups`` entry's weights scheme (None: not quantised)."""
    w = group.get("weights")
    if not isinstance(w, dict):
        return None
    bits = w.get("num_bits")
    if not (isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 16):
        raise ConfigError("quantization_config.config_groups.weights.num_bits", bits, "must be an integer number of bits from 1 to 16")
    kind = str(w.get("type", "int")).lower()
    strategy = str(w.get("strategy", "tensor")).lower()
    fmt = str(group.get("format") or fmt or "").lower()
    group_size = w.get("group_size") if isinstance(w.get("group_size"), int) and w.get("group_size") > 0 else 128
    if "nvfp4" in fmt or (kind == "float" and bits == 4 and strategy == "tensor_group"):
        # weight_packed (2 a byte), weight_scale fp8 per 16, weight_global_scale + input_global_scale fp32
        acts = group.get("input_activations")
        return _Scheme("compressed-tensors nvfp4", 4, "byte", group_size or 16, 1, per_matrix_bytes=4 + (4 if isinstance(acts, dict) else 0))
    if "mxfp4" in fmt:  # weight_packed (2 a byte), an e8m0 weight_scale per 32
        return _Scheme("compressed-tensors mxfp4", 4, "byte", 32, 1)
    packed = "pack" in fmt or (kind == "int" and bits < 8)
    packing = "int32_cols" if packed else "byte"
    label = f"compressed-tensors {'fp' if kind == 'float' else 'int'}{bits}"
    acts = group.get("input_activations")
    static_input = isinstance(acts, dict) and not acts.get("dynamic", False)
    extra = (16 if packed else 0) + (4 if static_input else 0)  # weight_shape (int64 x 2), input_scale
    zero = not w.get("symmetric", True)
    if strategy == "channel":
        return _Scheme(label, bits, packing, 0, 2, zero_point=zero, per_matrix_bytes=extra)
    if strategy in ("group", "tensor_group"):
        return _Scheme(label, bits, packing, group_size, 2, zero_point=zero, per_matrix_bytes=extra)
    if strategy == "block":
        blk = w.get("block_structure")
        block = tuple(blk) if isinstance(blk, list) and len(blk) == 2 and all(isinstance(b, int) and b > 0 for b in blk) else (128, 128)
        return _Scheme(label, bits, packing, 0, 4, block=block, per_matrix_bytes=extra)  # type: ignore[arg-type]
    return _Scheme(label, bits, packing, -1, 4, zero_point=zero, per_matrix_bytes=extra)  # one fp32 scale per tensor


def _ct_targets(group: dict, lin: Linear) -> bool:
    targets = group.get("targets") or ["Linear"]
    if "Linear" in targets:
        return True
    return _matches(lin.name, targets)


def _plan_format(config: dict, quantization: dict | None) -> tuple[str, dict] | None:
    """(method, settings) of the checkpoint's quantization, from config.json or hf_quant_config.json."""
    q = text_config(config).get("quantization_config") or config.get("quantization_config")
    if isinstance(q, dict) and q:
        return str(q.get("quant_method", "")).lower(), q
    if isinstance(quantization, dict):
        inner = quantization.get("quantization") if isinstance(quantization.get("quantization"), dict) else quantization
        algo = str(inner.get("quant_algo", "")).upper()
        if algo:
            return "modelopt", {**inner, "quant_method": "modelopt"}
    return None


def _scheme_for(method: str, q: dict, lin: Linear) -> _Scheme | None:
    """The scheme ``lin`` is stored in under this checkpoint's format (None: 16-bit)."""
    if method == "fp8" or q.get("fmt") in ("e4m3", "e5m2"):
        if lin.role in ("lm_head", "router") or _matches(lin.name, q.get("modules_to_not_convert") or q.get("ignored_layers")):
            return None
        block = q.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and 0 < b <= MAX_DIM for b in block):
            return _Scheme("fp8 (block-scaled)", 8, "byte", 0, 4, block=(block[0], block[1]))
        return _Scheme("fp8 (per-tensor)", 8, "byte", -1, 4)
    if method == "mxfp4":
        if lin.role != "expert" or _matches(lin.name, q.get("modules_to_not_convert")):
            return None
        return _Scheme("mxfp4 experts", 4, "byte", 32, 1)
    if method == "compressed-tensors":
        if _matches(lin.name, q.get("ignore")) or (lin.role == "lm_head" and "lm_head" in (q.get("ignore") or ())):
            return None
        groups = q.get("config_groups")
        for group in (groups.values() if isinstance(groups, dict) else ()):
            if isinstance(group, dict) and _ct_targets(group, lin):
                return _ct_scheme(group, str(q.get("format", "")))
        return None
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if lin.role == "router" or _matches(lin.name, q.get("exclude_modules") or q.get("ignore")):
            return None
        if "NVFP4" in algo or "FP4" in algo:
            group = q.get("group_size") if isinstance(q.get("group_size"), int) and q.get("group_size") > 0 else 16
            # weight (2 a byte), weight_scale fp8 per 16, weight_scale_2 and input_scale fp32
            return _Scheme("modelopt nvfp4", 4, "byte", group, 1, per_matrix_bytes=8)
        if "FP8" in algo:  # per-tensor fp8 weight_scale and input_scale
            return _Scheme("modelopt fp8", 8, "byte", -1, 4, per_matrix_bytes=4)
        return None
    if method in ("awq", "gptq"):
        if lin.role in ("lm_head", "router") or _matches(lin.name, q.get("modules_to_not_convert")):
            return None
        bits = q.get("bits", q.get("w_bit", 4))
        if not (isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 16):
            raise ConfigError("quantization_config.bits", bits, "must be an integer number of bits from 1 to 16")
        group = q.get("group_size", q.get("q_group_size", 128))
        group = group if isinstance(group, int) and group > 0 else lin.in_features  # -1: one group per row
        if method == "awq":
            return _Scheme(f"awq int{bits}", bits, "int32_rows", group, 2, zero_point=bool(q.get("zero_point", True)))
        return _Scheme(f"gptq int{bits}", bits, "int32_cols", group, 2, zero_point=True, g_idx=True)
    if method == "bitsandbytes":
        if lin.role in ("lm_head", "router") or _matches(lin.name, q.get("llm_int8_skip_modules")):
            return None
        if q.get("load_in_8bit"):
            return _Scheme("bitsandbytes int8", 8, "byte", 0, 4)  # SCB: an fp32 per row
        double = bool(q.get("bnb_4bit_use_double_quant"))
        # absmax per 64 values: one byte when double-quantised (plus an fp32 per 256 of them), else fp32;
        # quant_map (16 fp32) and, double-quantised, nested quant_map (256 fp32) + nested absmax per matrix
        return _Scheme(f"bitsandbytes {q.get('bnb_4bit_quant_type', 'nf4')}", 4, "byte", 64, 1 if double else 4, per_matrix_bytes=64 + (1024 if double else 0))
    return None


def stored_bytes(quantization_config: dict, out_features: int, in_features: int, name: str = "model.layers.0.mlp.down_proj", role: str = "mlp") -> int:
    """Bytes one ``out_features`` x ``in_features`` matrix named ``name`` takes in the checkpoint's
    format (``quant_method`` of ``quantization_config``; modelopt's hf_quant_config.json too), its
    scales included; 16-bit where the format leaves it out."""
    fmt = _plan_format({"quantization_config": quantization_config}, None) if "quant_method" in quantization_config else _plan_format({}, quantization_config)
    if fmt is None:
        return 2 * out_features * in_features
    lin = Linear(name, role, out_features, in_features)
    scheme = _scheme_for(fmt[0], fmt[1], lin)
    return 2 * lin.params if scheme is None else scheme.matrix_bytes(out_features, in_features) + _double_quant_absmax(fmt[1], lin)


def _double_quant_absmax(q: dict, lin: Linear) -> int:
    """bitsandbytes double quantisation: an fp32 nested absmax per 256 first-level absmax bytes."""
    return 4 * math.ceil(lin.out_features * lin.in_features / 64 / 256) if q.get("bnb_4bit_use_double_quant") and not q.get("load_in_8bit") else 0


def estimate_weights(config: dict, geo: ModelGeometry, weight_dtype: str = "auto", quantization: dict | None = None) -> WeightsEstimate:
    """Weights bytes for ``weight_dtype`` ("auto" reads the checkpoint's quantization, else the
    config dtype). ``quantization``: the checkpoint's ``hf_quant_config.json`` (modelopt), when
    config.json has no ``quantization_config``.

    Raises:
        PlannerError: unknown ``weight_dtype``.
        ConfigError: a quantization setting out of range (bits).
    """
    if weight_dtype not in WEIGHT_DTYPE_BITS:
        raise PlannerError("weight_dtype", weight_dtype, f"unknown weight dtype; choose one of {', '.join(WEIGHT_DTYPE_BITS)}")
    linears = linear_shapes(config, geo)
    total, active, experts = count_params(config, geo)
    if total > MAX_PARAMS:
        raise ConfigError("config", f"{total:.3g} parameters", f"is absurdly large (limit {MAX_PARAMS:.0e} parameters): check the layer, width and expert counts")
    n_experts, top_k = _moe_shape(_moe_cfg(config))
    extra = _extra_params(config, geo)
    enc_params = encoder_params(config)
    embed = (geo.vocab_size or 32000) * geo.hidden_size

    def made(size: float, expert_size: float, label: str, source: str, enc_bytes: int) -> WeightsEstimate:
        return WeightsEstimate(
            total_params=total, active_params=active, expert_params=experts, bytes=int(size), expert_bytes=int(expert_size), num_experts=n_experts, experts_per_token=top_k,
            bits_per_param=size * 8 / total, dtype_label=label, source=source, encoder_params=enc_params, encoder_bytes=enc_bytes,
        )  # fmt: skip

    if weight_dtype != "auto":
        bits = WEIGHT_DTYPE_BITS[weight_dtype]
        size = total * bits / 8 + extra * (4 if weight_dtype == "fp32" else 2)
        return made(size, experts * bits / 8, weight_dtype, f"config parameter count x chosen dtype ({bits:g} bits a weight{', block scales included' if weight_dtype in FP4_DTYPES else ''}); norms and biases 16-bit", enc_params * 2)
    # serving engines load float32 checkpoints in 16-bit by default (vLLM's dtype="auto"); choose
    # weight_dtype="fp32" to plan full precision
    served_from = " (checkpoint float32, served 16-bit as vLLM's dtype=auto does)" if str(geo.torch_dtype) in ("float32", "fp32") else ""
    fmt = _plan_format(config, quantization)
    plain = 2 * (embed + extra)
    if fmt is None or fmt[0] not in ("fp8", "mxfp4", "compressed-tensors", "modelopt", "awq", "gptq", "bitsandbytes"):
        size = 2 * total + 2 * extra
        return made(size, experts * 2, "bf16", f"config parameter count x bf16{served_from}; norms and biases counted", enc_params * 2)
    method, q = fmt
    size, expert_size, labels = float(plain), 0.0, set()
    for lin in linears:
        scheme = _scheme_for(method, q, lin)
        if scheme is None:
            b = 2 * lin.params
        else:
            labels.add(scheme.label)
            b = scheme.matrix_bytes(lin.out_features, lin.in_features) * lin.count + _double_quant_absmax(q, lin) * lin.count
        size += b
        if lin.role == "expert":
            expert_size += b
    enc_bytes = 2 * enc_params  # towers stay 16-bit in the formats here (they sit in every ignore list)
    label = " + ".join(sorted(labels)) or "bf16"
    return made(size, expert_size, label, f"quantization_config {method}: each matrix as the format stores it ({label}), scales included; embeddings, norms and excluded modules 16-bit", enc_bytes)


# --------------------------------------------------------------------------- encoders


def _vit_params(vc: dict, *, gated: bool, bias: bool, patch_bias: bool, positions: bool, pre_norm: bool = False, post_norm: bool = False, norm_bias: bool = True) -> int:
    """A ViT encoder: patch embedding, (learned position embeddings), ``layers`` x (attention +
    MLP + 2 norms), optional pre / post norms."""
    hidden = _get(vc, "hidden_size", "embed_dim", "width")
    layers = _get(vc, "num_hidden_layers", "depth", "layers")
    if not hidden or not layers:
        return 0
    inter = _get(vc, "intermediate_size", "mlp_dim", default=4 * hidden)
    patch = _get(vc, "patch_size", default=14)
    channels = _get(vc, "num_channels", "in_channels", default=3)
    image = _get(vc, "image_size", default=224)
    norm = hidden * (2 if norm_bias else 1)
    attn = 4 * hidden * hidden + (4 * hidden if bias else 0)
    mlp = (3 if gated else 2) * hidden * inter + ((inter + hidden) if bias else 0)
    total = channels * patch * patch * hidden + (hidden if patch_bias else 0)
    if positions:
        total += (image // patch) ** 2 * hidden
    total += layers * (attn + mlp + 2 * norm) + (norm if pre_norm else 0) + (norm if post_norm else 0)
    return total


def encoder_params(config: dict) -> int:
    """Parameters of a multimodal checkpoint's vision tower and projector (SigLIP: Gemma 3 /
    PaliGemma; Pixtral: Mistral 3.x; CLIP: LLaVA). Other towers are not counted (0)."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return 0
    vt = str(vc.get("model_type", "")).lower()
    mt = str(config.get("model_type", "")).lower()
    text_h = _get(text_config(config), "hidden_size")
    hidden = _get(vc, "hidden_size")
    if "siglip" in vt or mt in ("gemma3", "paligemma"):
        # SiglipVisionModel: conv patch embedding with bias, learned positions, biased attention/MLP,
        # LayerNorms with bias, post_layernorm; Gemma 3's projector: an input projection and an RMSNorm
        tower = _vit_params(vc, gated=False, bias=True, patch_bias=True, positions=True, post_norm=True)
        return tower + hidden * text_h + hidden if mt == "gemma3" else tower + hidden * text_h + text_h
    if vt == "pixtral" or mt in ("mistral3", "pixtral"):
        # PixtralVisionModel: bias-free conv, RMS ln_pre, gated SiLU MLP, RMS norms; Mistral3
        # projector: RMSNorm, 2x2 patch merger (4h -> h), linear_1 (h -> text) and linear_2 (text -> text)
        tower = _vit_params(vc, gated=True, bias=False, patch_bias=False, positions=False, pre_norm=True, norm_bias=False)
        merge = _get(config, "spatial_merge_size", default=2)
        bias = bool(config.get("multimodal_projector_bias", False))
        return tower + hidden + hidden * hidden * merge * merge + hidden * text_h + text_h * text_h + ((2 * text_h) if bias else 0)
    if "clip" in vt or mt == "llava":
        # CLIPVisionModel (class embedding + positions for patches + 1, pre/post LayerNorm) and LLaVA's
        # two-layer MLP projector
        image, patch = _get(vc, "image_size", default=336), _get(vc, "patch_size", default=14)
        tower = _vit_params(vc, gated=False, bias=True, patch_bias=False, positions=False, pre_norm=True, post_norm=True) + hidden + ((image // patch) ** 2 + 1) * hidden
        return tower + hidden * text_h + text_h + text_h * text_h + text_h
    return 0
