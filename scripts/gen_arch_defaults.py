"""Regenerate planner/arch_defaults.json from the pinned transformers' config classes.

The geometry completes sparse nested configs (a Gemma 3 ``text_config`` lists no heads, LLaVA's
lists no sizes) with their architecture's class defaults. Importing transformers costs 3-4 s
(it imports torch), so the defaults the planner reads are tabulated here once, per model_type.
tests/test_arch_defaults.py checks the table still equals what transformers says.

Run: .venv/bin/python scripts/gen_arch_defaults.py
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner import config_keys as names  # noqa: E402

# the keys planner.geometry / planner.weights read (every alias of planner/config_keys.py); lists
# that are derived from the layer count (layer_types) are left out: the geometry derives them for
# the actual count
KEYS = (
    *names.LAYER_COUNT_KEYS, *names.ATTENTION_HEAD_KEYS, *names.KV_HEAD_KEYS, names.GROUPED_KV_HEAD_KEY, "multi_query", "new_decoder_architecture",
    *names.HIDDEN_SIZE_KEYS, *names.HEAD_DIM_KEYS, "intermediate_size",
    *names.VOCAB_KEYS, *names.MAX_POSITION_KEYS, "sliding_window", "use_sliding_window", "sliding_window_pattern",
    "max_window_layers", "attention_chunk_size", "no_rope_layer_interval", "cross_attention_layers", "num_kv_shared_layers",
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "tie_word_embeddings",
    "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
    "first_k_dense_replace", "full_attention_interval", "attn_layer_period", "attn_layer_offset",
)


def main() -> None:
    table: dict[str, dict] = {}
    for model_type, cls in sorted(CONFIG_MAPPING.items()):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = cls().to_dict()
        except Exception:  # composite configs that need arguments: not a text decoder
            continue
        row = {k: values[k] for k in KEYS if k in values and values[k] is not None and not isinstance(values[k], dict)}
        heads, hidden = row.get("num_attention_heads"), row.get("hidden_size")
        # values the class derives from others when not given (head_dim = hidden / heads, KV heads =
        # heads) must stay derived: a sparse config with other sizes would otherwise inherit them
        if isinstance(heads, int) and heads and row.get("head_dim") == (hidden or 0) // heads:
            row.pop("head_dim", None)
        if "num_key_value_heads" in row and row["num_key_value_heads"] == heads:
            row.pop("num_key_value_heads", None)
        if any(k in row for k in names.LAYER_COUNT_KEYS):
            table[model_type] = row
    out = ROOT / "planner" / "arch_defaults.json"
    out.write_text(json.dumps({"transformers_version": transformers.__version__, "defaults": table}, indent=0, sort_keys=True) + "\n")
    print(f"{len(table)} model types written to {out} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
