"""What each vLLM release does differently at start-up, one keyword row per release.

A :class:`Rules` field's default is what the newest release (0.33) does; each row of
:data:`RULES` names only what its release does differently. Every field names the vLLM code it
mirrors (paths under ``vllm/``). :func:`check_architecture` is the first thing vLLM resolves: a
model this release dropped, cannot load or does not register is refused before any sizing.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.common import EngineRefusal
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, text_config

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # `vllm serve` on an 80 GB-class GPU


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one vLLM release does at start-up; the defaults are vLLM 0.33's."""

    version: str
    # v1/core/kv_cache_utils.py get_kv_cache_capacity: 0.24+ logs tokens = int(concurrency x
    # max_model_len); 0.10 / 0.19: num_blocks // groups x block size
    tokens_from_concurrency: bool = True
    # batches in flight (the blocks one request may hold ahead of its tokens): 2 once async
    # scheduling (config/scheduler.py SchedulerConfig.async_scheduling) is the default (0.33), else 1
    concurrent_batches: int = 2
    # model_executor/models/config.py MambaModelConfig: 0.19+ keep prefix caching on for Mamba hybrids
    hybrid_prefix_caching: bool = True
    # v1/core/kv_cache_planning.py _check_enough_kv_cache_memory: 0.33 checks one request against
    # num_blocks - 1 (the null block); earlier releases against every block
    reserve_null_block: bool = True
    # the start-up log (v1/core/kv_cache_utils.py): 0.33 prints size and concurrency in one line
    one_log_line: bool = True
    # model_executor/models/mllama.py: Mllama (cross-attention) still has a vLLM implementation
    # (dropped after 0.10.2)
    mllama: bool = False
    # 0.19+ get_kv_cache_groups / _get_kv_cache_groups_uniform_page_size: the group size is the
    # largest layer count when it is under 1.5x the smallest; 0.10 / 0.11: the smallest count
    group_near_max: bool = True
    # 0.11+ assign a spec's layers to its groups round-robin (layers[i::n]); 0.10 in consecutive slices
    round_robin_groups: bool = True
    # 0.19+ unify_kv_cache_spec_page_size grows smaller pages' blocks; 0.10 / 0.11 raise NotImplementedError
    unify_pages: bool = True
    # 0.11+ UniformTypeKVCacheSpecs: layers of one attention type with different specs share one group
    uniform_type_specs: bool = True
    # 0.10 unify_kv_cache_configs sorts the groups by (spec class name, spec fields)
    sort_groups_by_type: bool = False
    # 0.10 check_enough_kv_cache_memory sums every layer's own max_memory_usage_bytes; 0.19+
    # _max_memory_usage_bytes_from_groups counts the padded groups (group size x page x blocks)
    fit_check_per_layer: bool = False
    # 0.10 VllmConfig.__post_init__: chunked local attention turns the hybrid KV-cache manager off,
    # and unify_hybrid_kv_cache_specs makes those layers FullAttentionSpec (every position cached)
    chunked_as_full: bool = False
    # which release's refusal sentences (_check_enough_kv_cache_memory, _get_and_verify_max_len):
    # "0.10", "0.19", or "0.24" (0.24 and 0.33 word them alike)
    wording: str = "0.24"
    # _get_and_verify_max_len: 0.11 already words an over-long max_model_len as 0.19 does (the
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN caution), with 0.10's memory sentences
    long_max_len_wording: bool = True
    # 0.10 / 0.11 (transformers 4.x): the derived length prints as a float only where the config's
    # rope_scaling multiplies it; 0.19+ (transformers 5 always carries rope parameters): a float but
    # for the int_max_len_types
    float_max_len_when_scaled: bool = False
    # Mamba hybrids. 0.10: EngineArgs._is_v1_supported_oracle sends them to the V0 engine by default
    v1_hybrids: bool = True
    # 0.19 / 0.24 MambaModelConfig: with prefix caching, models that support Mamba prefix caching
    # (Mamba-1/2: Jamba, NemotronH, Bamba ...) cache every state ("all" mode), others "align"
    mamba_all_mode: bool = False
    # v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes in "align" mode: 2 states (0.19,
    # 0.24); 0.33 adds one prefill checkpoint
    align_states: int = 3
    # platforms/interface.py Platform._align_hybrid_block_size (0.33): the kernel block grows to 128
    # for MLA and to the GDN checkpoint grid in "align" mode, the attention block is rounded to 16;
    # 0.19 / 0.24 align to the backend's smallest kernel block (16, FlashMLA 64) only
    checkpoint_grid: bool = True
    # model_executor/models/config.py NemotronHForCausalLMConfig: the SSM state dtype when the
    # config names none (0.11 / 0.19: float16; 0.24+: float32)
    nemotron_ssm_dtype: str = "float32"
    # 0.19+ take a NemotronH config's own mamba_ssm_cache_dtype; 0.11 keeps its default whatever the
    # config says (the 0.11 fixture: Nemotron-3-Nano's float32 config sized with 16-bit SSM pages)
    config_ssm_dtype: bool = True
    # model types whose config this release cannot load (its transformers or vLLM has no such
    # model type; found by running the release: the fixtures' config errors)
    unknown_model_types: frozenset[str] = frozenset()
    # model types whose derived maximum length vLLM prints as an integer: config _get_and_verify_max_len
    # multiplies by the RoPE scaling factor (a float) only where the loaded config has RoPE parameters
    int_max_len_types: frozenset[str] = frozenset()
    # (model type, key, config class): keys the release's transformers derives (a read-only
    # property), so a config.json that sets them cannot be loaded
    read_only_config_keys: tuple[tuple[str, str, str], ...] = ()


RULES: dict[str, Rules] = {
    "0.10": Rules(
        version="0.10", tokens_from_concurrency=False, concurrent_batches=1, hybrid_prefix_caching=False, reserve_null_block=False, one_log_line=False, mllama=True,
        group_near_max=False, round_robin_groups=False, unify_pages=False, uniform_type_specs=False, sort_groups_by_type=True, fit_check_per_layer=True, chunked_as_full=True,
        wording="0.10", long_max_len_wording=False, float_max_len_when_scaled=True, v1_hybrids=False,
        unknown_model_types=frozenset({"deepseek_ref", "deepseek_v4", "gemma4", "glm_moe_dsa", "kimi_k2", "kimi_k3", "minimax_m3", "qwen3_5", "qwen3_5_moe", "qwen3_next", "qwen3_vl"}),
        int_max_len_types=frozenset({"deepseek_v2"}),
    ),
    "0.11": Rules(
        version="0.11", tokens_from_concurrency=False, concurrent_batches=1, hybrid_prefix_caching=False, reserve_null_block=False, one_log_line=False,
        group_near_max=False, unify_pages=False, fit_check_per_layer=True, chunked_as_full=True, wording="0.10", float_max_len_when_scaled=True, nemotron_ssm_dtype="float16", config_ssm_dtype=False,
        unknown_model_types=frozenset({"deepseek_ref", "deepseek_v4", "gemma4", "glm_moe_dsa", "kimi_k2", "kimi_k3", "minimax_m3", "qwen3_5", "qwen3_5_moe"}),
        # vLLM 0.11 reads deepseek_v3 / deepseek_v32 with its own DeepseekV3Config
        # (transformers_utils/config.py), which keeps the integer YaRN factor: 4,096 x 40 prints as 163840
        int_max_len_types=frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32"}),
        # transformers 4.57 (the release's): NemotronHConfig.layers_block_type is a property derived
        # from hybrid_override_pattern; Nemotron 3 Ultra's config.json (written by transformers 5) sets it
        read_only_config_keys=(("nemotron_h", "layers_block_type", "NemotronHConfig"),),
    ),
    "0.19": Rules(
        version="0.19", tokens_from_concurrency=False, concurrent_batches=1, reserve_null_block=False, one_log_line=False,
        wording="0.19", mamba_all_mode=True, align_states=2, checkpoint_grid=False, nemotron_ssm_dtype="float16",
        unknown_model_types=frozenset({"deepseek_ref", "deepseek_v4", "gemma4", "glm_moe_dsa", "kimi_k3", "minimax_m3"}),
        int_max_len_types=frozenset({"deepseek_v2"}),
    ),
    "0.24": Rules(
        version="0.24", concurrent_batches=1, reserve_null_block=False, one_log_line=False, mamba_all_mode=True, align_states=2, checkpoint_grid=False,
        unknown_model_types=frozenset({"deepseek_ref", "gemma4", "kimi_k3", "minimax_m3"}),
        int_max_len_types=frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4"}),
    ),
    # sgl-project's DeepSeek-V4 FP8 checkpoints say "deepseek_ref", which the transformers 0.33 pins does not know
    "0.33": Rules(version="0.33", unknown_model_types=frozenset({"deepseek_ref"})),
}
VLLM_VERSIONS = tuple(RULES)
DEFAULT_VLLM_VERSION = VLLM_VERSIONS[-1]


# architectures vLLM removed, with the last release that served them (vllm/model_executor/models/registry.py)
DROPPED = {"MPTForCausalLM": "0.28.0"}
# architectures of real 2026 checkpoints that no supported vLLM version registers (vLLM 0.33 has the
# look-alikes MiniMaxM3SparseForCausalLM and Step3p7ForConditionalGeneration, not these names)
NOT_REGISTERED = frozenset({"MiniMaxM3ForCausalLM", "Step3p7FlashForCausalLM"})


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def check_architecture(geo: ModelGeometry, version: str, top_model_type: str | None = None, config: dict | None = None) -> Rules:
    """The release's rules, once vLLM has resolved the architecture (before anything else):
    dropped ones are refused first.

    Raises:
        PlannerError: an unknown ``version``.
        EngineRefusal: (field ``model``) an architecture this release dropped, cannot load, does
            not register, or a cross-attention model.
    """
    rules = RULES.get(version)
    if rules is None:
        raise PlannerError("vllm_version", version, f"choose one of {', '.join(VLLM_VERSIONS)}")
    for arch in geo.architectures:
        last = DROPPED.get(arch)
        if last is not None and version_tuple(rules.version) > version_tuple(last):
            raise EngineRefusal("model", arch, f"Model architecture {arch} was supported in vLLM until v{last}, and is not supported anymore. Please use an older version of vLLM if you want to use this model architecture.")
    unknown_type = next((t for t in (geo.model_type, top_model_type) if t in rules.unknown_model_types), None)
    if unknown_type is not None:
        arch = (geo.architectures or (geo.model_type,))[0]
        raise EngineRefusal("model", arch, f"vLLM {rules.version} cannot load a config of model type `{unknown_type}` (its transformers or vLLM does not know it yet)")
    cfg = text_config(config or {})
    for model_type, key, cls in rules.read_only_config_keys:
        if cfg.get("model_type") == model_type and key in cfg:
            arch = (geo.architectures or (geo.model_type,))[0]
            raise EngineRefusal("model", arch, f"vLLM {rules.version} cannot load this config: property '{key}' of '{cls}' object has no setter (its transformers derives {key}; the config.json sets it)")
    unknown = [arch for arch in geo.architectures if arch in NOT_REGISTERED]
    if unknown and len(unknown) == len(geo.architectures):
        # vllm/model_executor/models/registry.py: _raise_for_unsupported (the supported list is left out)
        raise EngineRefusal("model", unknown[0], f"Model architectures {unknown} are not supported for now (vLLM {rules.version} registers no such architecture)")
    if any(layer.kind == "cross" for layer in geo.layers):
        arch = (geo.architectures or (geo.model_type,))[0]
        problem = "runs on vLLM 0.10's V0 engine only, whose KV cache this planner does not model" if rules.mllama else "has no vLLM implementation since vLLM 0.10.2 (cross-attention models were dropped)"
        raise EngineRefusal("model", arch, f"{arch} {problem}")
    return rules
