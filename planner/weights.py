"""Parameter count (total and active per token) and weight bytes from a config.

The count covers embeddings and LM head, attention (GQA/MQA and MLA), dense MLPs (gated or not),
MoE experts (routed and shared) and Mamba / linear-attention mixers; norms and biases are
ignored (well under 0.1 %). Bytes follow ``quantization_config`` when present: fp8 blocks,
mxfp4 experts (4 bits + one 8-bit scale per 32 values) and AWQ/GPTQ integer weights with one
fp16 scale and one packed zero-point per group; modules the config excludes stay 16-bit.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.config_keys import EXPERTS_PER_TOKEN_KEYS, ROUTED_EXPERT_KEYS
from planner.errors import ConfigError, PlannerError
from planner.geometry import ModelGeometry, text_config
from planner.limits import MAX_DIM, MAX_PARAMS, check_number

WEIGHT_DTYPE_BITS = {"auto": 0.0, "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0}
NON_GATED = {"gpt2", "gpt_bigcode", "falcon", "phi", "mpt", "gptj", "gpt_neox", "opt", "bloom", "starcoder2", "nemotron_h", "nemotron"}


class WeightsEstimate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    total_params: int
    active_params: int
    expert_params: int  # routed-expert parameters (what mxfp4/int schemes usually quantize)
    expert_bytes: int = 0  # their bytes (a decode step reads only the experts its tokens route to)
    num_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    bytes: int
    bits_per_param: float
    dtype_label: str
    source: str


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


def count_params(config: dict, geo: ModelGeometry) -> tuple[int, int, int]:
    """(total, active per token, routed-expert) parameter counts of the decoder."""
    cfg = _moe_cfg(config)
    h, heads = geo.hidden_size, geo.num_attention_heads
    vocab = geo.vocab_size or 32000
    embed = vocab * h * (1 if geo.tie_word_embeddings else 2)

    if geo.mla:
        m = geo.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (h * m.q_lora_rank + m.q_lora_rank * heads * qk) if m.q_lora_rank else h * heads * qk
        attn = q + h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) + heads * m.v_head_dim * h
    else:
        attn = h * heads * geo.head_dim + 2 * h * geo.num_kv_heads * geo.head_dim + heads * geo.head_dim * h

    gated = geo.model_type not in NON_GATED
    mats = 3 if gated else 2
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
    latent_proj = 2 * h * expert_h if expert_h != h else 0
    if geo.model_type.startswith("llama4"):  # one shared expert of the expert size; dense layers use intermediate_size_mlp
        shared_inter = moe_inter
        inter = _get(cfg, "intermediate_size_mlp", default=inter)

    total = active = experts = 0
    for layer in geo.layers:
        i = layer.index
        if layer.kind == "mamba":
            d_state = _get(cfg, "mamba_d_state", "ssm_state_size", default=16)
            nheads, groups = _get(cfg, "mamba_num_heads"), _get(cfg, "n_groups", default=1)
            d_inner = nheads * _get(cfg, "mamba_head_dim") if nheads else _get(cfg, "mamba_expand", default=2) * h
            mix = h * (2 * d_inner + 2 * groups * d_state + nheads) + d_inner * h
        elif layer.kind == "linear_attention":
            mix = 4 * h * h
        elif layer.kind == "none" and geo.mamba is not None:
            mix = 0  # Nemotron-H MLP-only layer: its MLP is counted below
        else:
            mix = attn
        is_moe = n_experts > 0 and i >= first_dense and (i % moe_every == moe_every - 1 if moe_every > 1 else True)
        if geo.model_type.startswith("nemotron_h") and layer.kind != "none":
            mlp_total = mlp_active = 0  # Nemotron-H: mixer-only layers
        elif is_moe:
            per_expert = mats * expert_h * moe_inter
            routed = n_experts * per_expert
            shared_p = mats * h * shared_inter + latent_proj
            mlp_total = routed + shared_p + h * n_experts
            mlp_active = top_k * per_expert + shared_p + h * n_experts
            experts += routed
        else:
            width = per_layer_inter[i] if per_layer_inter else inter
            mlp_total = mlp_active = mats * h * width
        total += mix + mlp_total
        active += mix + mlp_active
    # per-token compute touches the LM head, not the input embedding lookup
    return total + embed, active + vocab * h, experts


def estimate_weights(config: dict, geo: ModelGeometry, weight_dtype: str = "auto") -> WeightsEstimate:
    """Weights bytes for ``weight_dtype`` ("auto" reads quantization_config, else the config dtype).

    Raises:
        PlannerError: unknown ``weight_dtype``.
    """
    if weight_dtype not in WEIGHT_DTYPE_BITS:
        raise PlannerError("weight_dtype", weight_dtype, f"unknown weight dtype; choose one of {', '.join(WEIGHT_DTYPE_BITS)}")
    total, active, experts = count_params(config, geo)
    if total > MAX_PARAMS:
        raise ConfigError("config", f"{total:.3g} parameters", f"is absurdly large (limit {MAX_PARAMS:.0e} parameters): check the layer, width and expert counts")
    n_experts, top_k = _moe_shape(_moe_cfg(config))

    def made(size: float, expert_bits: float, **kw) -> WeightsEstimate:
        return WeightsEstimate(total_params=total, active_params=active, expert_params=experts, bytes=int(size), expert_bytes=int(experts * expert_bits / 8), num_experts=n_experts, experts_per_token=top_k, **kw)

    if weight_dtype != "auto":
        bits = WEIGHT_DTYPE_BITS[weight_dtype]
        return made(total * bits / 8, bits, bits_per_param=bits, dtype_label=weight_dtype, source="config parameter count x chosen dtype")
    q = text_config(config).get("quantization_config") or config.get("quantization_config")
    # serving engines load float32 checkpoints in 16-bit by default (vLLM's dtype="auto"); choose
    # weight_dtype="fp32" to plan full precision
    base_bits = 16.0
    label = "bf16"
    served_from = " (checkpoint float32, served 16-bit as vLLM's dtype=auto does)" if str(geo.torch_dtype) in ("float32", "fp32") else ""
    if isinstance(q, dict):
        method = str(q.get("quant_method", "")).lower()
        if method == "fp8" or q.get("fmt") in ("e4m3", "e5m2"):
            block = q.get("weight_block_size") or [128, 128]
            scale_bits = 32.0 / (block[0] * block[1]) if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and 0 < b <= MAX_DIM for b in block) else 0.0
            bits = 8.0 + scale_bits
            body = total - (geo.vocab_size or 0) * geo.hidden_size * (1 if geo.tie_word_embeddings else 2)
            size = body * bits / 8 + (total - body) * base_bits / 8
            return made(size, bits, bits_per_param=size * 8 / total, dtype_label="fp8 (block-scaled)", source="quantization_config fp8: linear layers 8-bit + fp32 scale per block, embeddings 16-bit")
        if method == "mxfp4":
            size = experts * 4.25 / 8 + (total - experts) * base_bits / 8
            return made(size, 4.25, bits_per_param=size * 8 / total, dtype_label="mxfp4 experts", source="quantization_config mxfp4: routed experts 4 bits + 8-bit scale per 32, the rest 16-bit")
        if method in ("awq", "gptq", "compressed-tensors", "bitsandbytes") and not (isinstance(q.get("bits", 4), int) and not isinstance(q.get("bits", 4), bool) and 1 <= q.get("bits", 4) <= 16):
            raise ConfigError("quantization_config.bits", q.get("bits"), "must be an integer number of bits from 1 to 16")
        if method in ("awq", "gptq", "compressed-tensors", "bitsandbytes"):
            wbits = float(q.get("bits", 4))
            group = q.get("group_size", 128)
            group = group if isinstance(group, int) and group > 0 else 128
            bits = wbits + (16.0 + wbits) / group
            body = total - (geo.vocab_size or 0) * geo.hidden_size * (1 if geo.tie_word_embeddings else 2)
            size = body * bits / 8 + (total - body) * base_bits / 8
            return made(size, bits, bits_per_param=size * 8 / total, dtype_label=f"{method} int{int(wbits)}", source=f"quantization_config {method}: {int(wbits)}-bit + fp16 scale and zero-point per {group}, embeddings 16-bit")
    return made(total * base_bits / 8, base_bits, bits_per_param=base_bits, dtype_label=label, source=f"config parameter count x {label}{served_from}")
