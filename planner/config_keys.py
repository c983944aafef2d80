"""The names a config.json gives each quantity, across model families, in the order they are tried.

One table for every reader: :mod:`planner.geometry` parses the values, :mod:`planner.hub` checks
that a fetched config names a layer and a head count before it is used, and
:mod:`planner.probe` cuts a config to its first layers. Where a config carries two names for one
quantity the first listed wins.

``num_heads`` is deliberately not an attention-head name: the configs that use it for that are
encoder-decoders (T5, UMT5, Switch) or GPT-Neo, whose local-attention layers the geometry does not
read, and in Mamba-2 and xLSTM configs it counts recurrent heads; a config that has only
``num_heads`` is refused ("no attention head count") rather than sized as full attention.
"""

from __future__ import annotations

# a multimodal wrapper's decoder config (LLaVA, Gemma 3, Qwen-VL: text_config; DeepSeek-VL2:
# language_config; InternVL: llm_config)
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")

LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")  # Llama; GPT-2, BLOOM; MPT, DBRX; ChatGLM
ATTENTION_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")  # Llama; GPT-2, Falcon (old); MPT, DBRX
HIDDEN_SIZE_KEYS = ("hidden_size", "n_embd", "d_model")  # Llama; GPT-2; MPT, DBRX
# null or <= 0 means "derive it from hidden size / heads"
HEAD_DIM_KEYS = ("head_dim", "attention_head_dim", "kv_channels", "d_head")  # Llama; Nemotron-H; ChatGLM; --

# KV heads: Llama and most; Falcon; Falcon (old). Falcon's new_decoder_architecture reads its own
# name first (transformers re-saves Falcon configs with both), ChatGLM's multi_query_group_num
# counts only while multi_query_attention is not false, MPT and DBRX nest kv_n_heads in attn_config.
KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
FALCON_NEW_ARCH_KV_HEAD_KEYS = ("num_kv_heads", "n_head_kv", "num_key_value_heads")
GROUPED_KV_HEAD_KEY = "multi_query_group_num"
NESTED_KV_HEAD_KEY = ("attn_config", "kv_n_heads")

MAX_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len")
VOCAB_KEYS = ("vocab_size", "padded_vocab_size")  # padded: ChatGLM

# Mamba state (Mamba-1 / Jamba / Nemotron-H names)
MAMBA_CONV_KERNEL_KEYS = ("mamba_d_conv", "conv_kernel", "mamba_conv_kernel")
MAMBA_STATE_KEYS = ("mamba_d_state", "ssm_state_size", "state_size")

# Mixture of experts (the weights estimate and the geometry's consistency checks read these)
ROUTED_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "moe_topk", "moe_top_k", "top_k")
# counts of layers or layer strides that must not exceed the layer count (max_window_layers may:
# Qwen2.5-3B-Instruct ships 70 with 36 layers, and means "every layer")
LAYER_INDEX_KEYS = ("first_k_dense_replace", "decoder_sparse_step", "moe_layer_freq", "interleave_moe_layer_step", "expert_layer_period")

ALIASES: dict[str, tuple[str, ...]] = {
    "text config": TEXT_CONFIG_KEYS,
    "layers": LAYER_COUNT_KEYS,
    "attention heads": ATTENTION_HEAD_KEYS,
    "KV heads": (*KV_HEAD_KEYS, GROUPED_KV_HEAD_KEY, ".".join(NESTED_KV_HEAD_KEY)),
    "hidden size": HIDDEN_SIZE_KEYS,
    "head dim": HEAD_DIM_KEYS,
    "max positions": MAX_POSITION_KEYS,
    "vocab size": VOCAB_KEYS,
    "Mamba conv kernel": MAMBA_CONV_KERNEL_KEYS,
    "Mamba state": MAMBA_STATE_KEYS,
    "routed experts": ROUTED_EXPERT_KEYS,
    "experts per token": EXPERTS_PER_TOKEN_KEYS,
}


def one_of(keys: tuple[str, ...]) -> str:
    """``"a, b or c"``: the names of one quantity, for a message."""
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} or {keys[-1]}"
