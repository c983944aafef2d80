"""The tabulated class defaults (planner/arch_defaults.json) agree with transformers' config classes."""

from __future__ import annotations

import sys

import pytest
import transformers
from transformers import AutoConfig

from planner.geometry import arch_defaults, parse_geometry
from planner.kv import inspect_config


def test_table_matches_pinned_transformers_version():
    # regenerate with scripts/gen_arch_defaults.py when transformers is bumped
    assert arch_defaults()["transformers_version"] == transformers.__version__
    assert len(arch_defaults()["defaults"]) > 300


SPARSE = [
    {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34, "sliding_window": 1024},
    {"model_type": "llama", "max_position_embeddings": 4096, "vocab_size": 32064},
    {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32},  # head_dim must be derived: 64
    {"model_type": "mistral", "hidden_size": 5120, "num_hidden_layers": 40},
    {"model_type": "qwen2", "num_hidden_layers": 28},
    {"model_type": "mllama_text_model", "num_hidden_layers": 40},
    {"model_type": "gemma2", "num_hidden_layers": 42},
    {"model_type": "phi3", "num_hidden_layers": 32},
]


@pytest.mark.parametrize("sub", SPARSE, ids=[f"{s['model_type']}-{i}" for i, s in enumerate(SPARSE)])
def test_completion_equals_transformers(sub):
    """The wrapper completed from the table gives the same geometry as transformers' own class."""
    fields = {k: v for k, v in sub.items() if k != "model_type"}
    full = AutoConfig.for_model(sub["model_type"], **fields).to_dict()
    ours = inspect_config({"model_type": "wrapper", "text_config": sub}, tokens=5000)
    theirs = inspect_config(full, tokens=5000)
    assert (ours.kv_bytes_per_token, ours.kv_bytes_at_tokens, ours.layers, ours.head_dim) == (theirs.kv_bytes_per_token, theirs.kv_bytes_at_tokens, theirs.layers, theirs.head_dim)


def test_sparse_configs_do_not_import_transformers():
    before = set(sys.modules)
    parse_geometry({"model_type": "llava", "text_config": {"model_type": "llama", "max_position_embeddings": 4096, "num_hidden_layers": 7}})
    assert not any(m.startswith("torch") for m in set(sys.modules) - before)


def test_unknown_sparse_type_keeps_raw_keys_with_note():
    geo = parse_geometry({"model_type": "wrapper", "text_config": {"model_type": "no_such_arch", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64}})
    assert (geo.num_layers, geo.hidden_size, geo.head_dim) == (2, 256, 64)
    assert any("no known class defaults; raw keys used" in n for n in geo.notes)
