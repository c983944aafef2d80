"""vLLM's refusal sentences whose words changed between releases, keyed by ``Rules.wording``.

A one-line refusal that no release reworded (a dropped architecture, an indivisible head count)
stays beside the check that raises it; the sentences here are each release's own, character for
character, as the conformance fixtures hold them.
"""

from __future__ import annotations

from planner.engines.vllm.rules import Rules
from planner.geometry import text_config
from planner.units import GIB

DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."

# _check_enough_kv_cache_memory when nothing is left for the cache, by Rules.wording
NO_MEMORY = {
    "0.10": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "0.19": f"No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. {DOCS}",
    "0.24": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). " + DOCS,
}


def not_enough_memory(rules: Rules, max_model_len: int, needed: int, check: int, estimate: int) -> str:
    """``_check_enough_kv_cache_memory`` (vllm/v1/core/kv_cache_utils.py; kv_cache_planning.py in
    0.33): one request at ``max_model_len`` needs ``needed`` bytes, ``check`` are available; the
    binary-searched ``estimate`` of the longest that fits (0: none)."""
    hint = f"Based on the available memory, the estimated maximum model length is {estimate}." if estimate > 0 else ""
    if rules.wording == "0.10":
        return (
            f"To serve at least one request with the models's max seq len ({max_model_len}), ({needed / GIB:.2f} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({check / GIB:.2f} GiB). {hint} Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
    hint += " " if hint else ""
    head = f"To serve at least one request with the {'models' if rules.wording == '0.19' else 'model'}'s max seq len ({max_model_len}), ({round(needed / GIB, 2)} GiB KV cache is needed, which is larger than the available KV cache memory ({round(check / GIB, 2)} GiB). {hint}"
    gpu = "`gpu_memory_utilization`" if rules.wording == "0.19" else "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend)"
    return f"{head}Try increasing {gpu} or decreasing `max_model_len` when initializing the engine. {DOCS}"


def _rope_scaled(config: dict) -> bool:
    """vLLM 0.10 ``_get_and_verify_max_len`` multiplies by the RoPE factor (making the figure a
    float) when the config has rope_scaling of a type other than su / longrope / llama3, Gemma 3 aside."""
    cfg = text_config(config)
    scaling = cfg.get("rope_scaling")
    if not isinstance(scaling, dict) or "gemma3" in str(cfg.get("model_type")):
        return False
    return (scaling.get("rope_type") or scaling.get("type")) not in ("su", "longrope", "llama3")


def _max_len_key(config: dict) -> str:
    """The config key ``_get_and_verify_max_len`` names (vllm/config): transformers maps most
    models' own keys to max_position_embeddings; MPT's config has only max_seq_len."""
    return "max_seq_len" if text_config(config).get("model_type") == "mpt" else "max_position_embeddings"


def max_len_exceeded(rules: Rules, config: dict, model_type: str, max_model_len: int, derived: int) -> str:
    """vllm/config ``_get_and_verify_max_len``: ``max_model_len`` above the model's ``derived``
    maximum (printed as vLLM prints it: an integer or a float); 0.10 worded the consequence differently."""
    shown = derived if model_type in rules.int_max_len_types or (rules.float_max_len_when_scaled and not _rope_scaled(config)) else float(derived)
    head = f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len ({_max_len_key(config)}={shown} or model_max_length=None in model's config.json)."
    if not rules.long_max_len_wording:
        return f"{head} This may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    return (
        f"{head} To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
        "extreme caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute "
        "position encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
    )
