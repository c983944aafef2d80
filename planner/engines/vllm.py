"""vLLM's start-up KV-cache sizing, predicted without vLLM: groups, pages, blocks, log lines.

:func:`vllm_capacity` follows ``EngineCore._initialize_kv_caches`` (vllm/v1/engine/core.py):
one cache spec per layer (:meth:`planner.kv.KVSpec.admission_blocks` and
:meth:`~planner.kv.KVSpec.layer_page_bytes` for attention, :class:`StatePage` for Mamba and
linear attention), the block size the backend picks (``Platform.update_block_size_for_backend``,
vllm/platforms/interface.py), the KV-cache groups (``get_kv_cache_groups``,
vllm/v1/core/kv_cache_planning.py), ``num_blocks``, the refusal check, and the two numbers of
the start-up log (``get_kv_cache_capacity``, vllm/v1/core/kv_cache_utils.py).

The rules that changed between releases are keyed by version in :data:`RULES`
(0.10, 0.19, 0.24, 0.33; the newest is the default). The backends are those vLLM selects on a
Hopper GPU: FLASH_ATTN (16-token blocks; FA4's 64-token pages for fp8 with 512-wide heads),
FLASH_ATTN_MLA for 16-bit MLA (16) and FLASHMLA for fp8 (64), the sparse-MLA backends and the
DSA indexer (64), MiniMax-M3's sparse backends (128), FlashInfer's gated-delta-net prefill
(checkpoints on a 64-token grid), FlashKDA (16). DeepSeek-V4 runs FLASHMLA_SPARSE_DSV4 and its
indexer (256) with SWA caches (64) and compressor states (4 / 8) in blocks of their own, packed
block-outermost as ``_get_packed_kv_cache_groups`` does (:func:`_packed_split`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from planner.errors import PlannerError
from planner.geometry import SLIDING_PATTERN_DEFAULTS, ModelGeometry, parse_geometry, text_config
from planner.kv import AUTO, KVSpec, kv_specs, resolve_kv_dtype, vector_bytes
from planner.limits import ByteBudgetCache
from planner.results import Result

GIB = 1 << 30
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
FLASH_ATTN_BLOCK = 16  # FLASH_ATTN: MultipleOf(16) kernel blocks, default block size 16
FLASHMLA_BLOCK = 64  # FLASHMLA supports 64-token blocks only (so do the sparse-MLA backends and the DSA indexer)
MINIMAX_M3_SPARSE_BLOCK = 128  # MiniMaxM3SparseBackend and MiniMaxM3IndexerBackend read 128-token pages only
SM90_FA4_FP8_BLOCK = 64  # FA4's FP8-KV kernel on Hopper reads 64-token pages
KDA_CHECKPOINT_ALIGNMENT = 16  # FlashKDA prefill checkpoint grid (vllm/model_executor/layers/mamba/kda_checkpoint.py)
GDN_CHECKPOINT_ALIGNMENT = 64  # FlashInfer GDN prefill checkpoint grid (vllm/v1/attention/backends/gdn_attn.py)
# DeepSeek-V4 (vllm/models/deepseek_v4): FLASHMLA_SPARSE_DSV4 and DEEPSEEK_V4_INDEXER take 256-token blocks only;
# DeepseekV4SWACache keeps its own 64-token blocks; CompressorStateCache 4 (ratio 4) or 8 (ratio 128)
DSV4_BLOCK = 256
DSV4_SWA_BLOCK = 64
DSV4_STATE_BLOCK = {4: 4, 128: 8}
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # `vllm serve` on an 80 GB-class GPU
STATE_KINDS = ("mamba", "linear_attention")


@dataclass(frozen=True, slots=True)
class Rules:
    """What one vLLM release does differently at start-up (each field names the vLLM code it mirrors)."""

    version: str
    tokens_from_concurrency: bool  # 0.24+: tokens = int(concurrency x max_model_len) (kv_cache_utils.get_kv_cache_capacity)
    concurrent_batches: int  # batches in flight: 2 once async scheduling is the default (0.33)
    hybrid_prefix_caching: bool  # 0.19+ keep prefix caching on for Mamba hybrids (MambaModelConfig)
    reserve_null_block: bool  # 0.33 checks one request against num_blocks - 1 (the null block)
    one_log_line: bool  # 0.33 prints size and concurrency in one line
    mllama: bool  # Mllama (cross-attention) still has a vLLM implementation (dropped after 0.10.2)
    # 0.19+ get_kv_cache_groups / _get_kv_cache_groups_uniform_page_size: the group size is the
    # largest layer count when it is under 1.5x the smallest, and a spec's layers are dealt out
    # round-robin (layers[i::n]); 0.10 _get_kv_cache_config_uniform_page_size: the smallest count
    # and consecutive slices (layers[i:i + group_size])
    group_near_max: bool = True
    # 0.19+ unify_kv_cache_spec_page_size grows smaller pages' blocks; 0.10 raises NotImplementedError
    unify_pages: bool = True
    # 0.10 unify_kv_cache_configs sorts the groups by (spec class name, spec fields)
    sort_groups_by_type: bool = False
    # 0.10 check_enough_kv_cache_memory sums every layer's own max_memory_usage_bytes; 0.19+
    # _max_memory_usage_bytes_from_groups counts the padded groups (group size x page x blocks)
    fit_check_per_layer: bool = False
    # 0.10 VllmConfig.__post_init__: chunked local attention turns the hybrid KV-cache manager off,
    # and unify_hybrid_kv_cache_specs makes those layers FullAttentionSpec (every position cached)
    chunked_as_full: bool = False
    wording: str = "0.24"  # which release's refusal sentences (_check_enough_kv_cache_memory)
    # Mamba hybrids. 0.10: EngineArgs._is_v1_supported_oracle sends them to the V0 engine by default
    v1_hybrids: bool = True
    # 0.19 / 0.24 MambaModelConfig: with prefix caching, models that support Mamba prefix caching
    # (Mamba-1/2: Jamba, NemotronH, Bamba ...) cache every state ("all" mode), others "align"
    mamba_all_mode: bool = False
    # MambaSpec.max_memory_usage_bytes in "align" mode: 2 states (0.19, 0.24); 0.33 adds one prefill checkpoint
    align_states: int = 3
    # 0.33 Platform._align_hybrid_block_size: the kernel block grows to 128 for MLA and to the GDN
    # checkpoint grid in "align" mode, the attention block is rounded to 16; 0.19 / 0.24 align to
    # the backend's smallest kernel block (16, FlashMLA 64) only
    checkpoint_grid: bool = True
    # vllm/model_executor/models/config.py NemotronHForCausalLMConfig: the SSM state dtype when the
    # config names none (0.19: float16; 0.24+: float32)
    nemotron_ssm_dtype: str = "float32"
    # model types whose config this release cannot load (its transformers or vLLM has no such
    # model type; found by running the release: the fixtures' config errors)
    unknown_model_types: frozenset[str] = frozenset()
    # model types whose derived maximum length vLLM prints as an integer: _get_and_verify_max_len
    # multiplies by the RoPE scaling factor (a float) only where the loaded config has RoPE parameters
    int_max_len_types: frozenset[str] = frozenset()


RULES: dict[str, Rules] = {
    "0.10": Rules(
        "0.10", False, 1, False, False, False, True, group_near_max=False, unify_pages=False, sort_groups_by_type=True, fit_check_per_layer=True, chunked_as_full=True, wording="0.10", v1_hybrids=False,
        unknown_model_types=frozenset({"deepseek_ref", "deepseek_v4", "gemma4", "glm_moe_dsa", "kimi_k2", "kimi_k3", "minimax_m3", "qwen3_5", "qwen3_5_moe", "qwen3_next", "qwen3_vl"}),
        int_max_len_types=frozenset({"deepseek_v2"}),
    ),
    "0.19": Rules(
        "0.19", False, 1, True, False, False, False, wording="0.19", mamba_all_mode=True, align_states=2, checkpoint_grid=False, nemotron_ssm_dtype="float16",
        unknown_model_types=frozenset({"deepseek_ref", "deepseek_v4", "gemma4", "glm_moe_dsa", "kimi_k3", "minimax_m3"}), int_max_len_types=frozenset({"deepseek_v2"}),
    ),
    "0.24": Rules(
        "0.24", True, 1, True, False, False, False, mamba_all_mode=True, align_states=2, checkpoint_grid=False,
        unknown_model_types=frozenset({"deepseek_ref", "gemma4", "kimi_k3", "minimax_m3"}), int_max_len_types=frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4"}),
    ),
    # sgl-project's DeepSeek-V4 FP8 checkpoints say "deepseek_ref", which the transformers 0.33 pins does not know
    "0.33": Rules("0.33", True, 2, True, True, True, False, unknown_model_types=frozenset({"deepseek_ref"})),
}
VLLM_VERSIONS = tuple(RULES)
DEFAULT_VLLM_VERSION = VLLM_VERSIONS[-1]


# architectures vLLM removed, with the last release that served them (vllm/model_executor/models/registry.py)
DROPPED = {"MPTForCausalLM": "0.28.0"}
# architectures of real 2026 checkpoints that no supported vLLM version registers (vLLM 0.33 has the
# look-alikes MiniMaxM3SparseForCausalLM and Step3p7ForConditionalGeneration, not these names)
NOT_REGISTERED = frozenset({"MiniMaxM3ForCausalLM", "Step3p7FlashForCausalLM"})


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class EngineRefusal(PlannerError):
    """vLLM would refuse to start with these settings; ``reason`` is vLLM's own message."""


@dataclass(frozen=True, slots=True)
class StatePage:
    """Mamba / linear-attention layers: one fixed-size state per request, held in pool blocks."""

    kind: str  # "mamba" or "linear_attention"
    num_layers: int
    state_bytes: int  # conv + SSM state of one layer on one GPU
    checkpoint_alignment: int  # token grid of prefill checkpoints in "align" mode


@dataclass(frozen=True, slots=True)
class _StateRule:
    """vLLM ``MambaSpec.max_memory_usage_bytes`` for one request: without prefix caching one
    state ("none"); in "align" mode the running state and the last cached one (0.33: and one
    prefill checkpoint); in "all" mode (0.19 / 0.24) a state every ``block`` tokens."""

    mode: str  # none, align, all
    held: int  # states held in "align" mode
    block: int  # mamba_block_size in "all" mode

    def blocks(self, length: int) -> int:
        if self.mode == "all":
            return -(-length // self.block)
        return self.held if self.mode == "align" else 1


@dataclass(frozen=True, slots=True)
class EngineGroup(Result):
    """One KV-cache group: layers sharing one block table."""

    kind: str  # full, sliding, chunked, mla, mamba, linear_attention
    layers: int
    block_size: int
    page_bytes: int  # one layer's page (one block of block_size tokens, or one padded state)
    blocks_per_request: int
    window: int | None = None


@dataclass(frozen=True, slots=True)
class VllmCapacity(Result):
    """What vLLM computes and prints at start-up for one model, GPU budget and setting."""

    vllm_version: str
    tp: int
    kv_cache_dtype: str
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_in_flight_tokens: int
    prefix_caching: bool
    available_kv_bytes: int
    groups: tuple[EngineGroup, ...]
    group_size: int  # layers per group: the smallest layer count of any spec (0: packed groups of their own sizes, DeepSeek-V4)
    bytes_per_block: int  # one block across a whole group: group_size x page bytes (packed: the widest group's pages)
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    log_lines: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def bytes_per_request(self) -> int:
        """Pool bytes one request at max_model_len reserves (what vLLM admits with)."""
        return self.blocks_per_request * self.bytes_per_block

    def summary(self) -> dict:
        out = self.model_dump()
        out["groups"] = [g.model_dump() for g in self.groups]
        out["log_lines"] = list(self.log_lines)
        out["notes"] = list(self.notes)
        out["bytes_per_request"] = self.bytes_per_request
        return out


# --------------------------------------------------------------------------- layer specs


def _dtype_bytes(kv_cache_dtype: str, config: dict) -> str:
    """The planner KV dtype of a vLLM ``--kv-cache-dtype``; "auto" is what the checkpoint declares
    (vLLM 0.33 ``resolve_kv_cache_dtype_string``: an fp8 ``kv_cache_scheme`` caches fp8), else the
    16-bit serving dtype (vLLM serves float32 checkpoints in bfloat16).

    Raises:
        PlannerError: an unknown dtype, or a checkpoint KV format the planner does not model.
    """
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlannerError("kv_cache_dtype", kv_cache_dtype, f"vLLM KV cache dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if kv_cache_dtype == "auto":
        kv_cache_dtype = resolve_kv_dtype(AUTO, config)[0]
    return "fp8" if kv_cache_dtype.startswith("fp8") else "bf16"


def _cfg_int(cfg: dict, keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def _state_pages(geo: ModelGeometry, cfg: dict, tp: int, nemotron_ssm_dtype: str = "float32") -> list[StatePage]:
    """Per-layer recurrent state on one GPU as vLLM shapes it (``MambaStateShapeCalculator``):
    conv and SSM state split by TP (Mamba-2 groups padded so every shard holds whole groups);
    conv state in the 16-bit model dtype, SSM state as vLLM's per-model config rule says."""
    pages = []
    # vllm/model_executor/models/config.py: NemotronH keeps SSM state in the config's
    # mamba_ssm_cache_dtype (default: the release's, Rules.nemotron_ssm_dtype); Qwen3.5 in its
    # mamba_ssm_dtype; others in 16-bit
    ssm_name = (cfg.get("mamba_ssm_cache_dtype") or nemotron_ssm_dtype) if geo.model_type.startswith("nemotron_h") else cfg.get("mamba_ssm_dtype")
    ssm_bytes = 4 if str(ssm_name or "").lower() in ("float32", "fp32") else 2
    count = geo.counts()
    if geo.mamba is not None:
        d_conv = _cfg_int(cfg, ("mamba_d_conv", "conv_kernel", "mamba_conv_kernel"), 4)
        d_state = _cfg_int(cfg, ("mamba_d_state", "ssm_state_size", "state_size"), 16)
        if "mamba_num_heads" in cfg and "mamba_head_dim" in cfg:  # Mamba-2
            heads, head_dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
            groups = _cfg_int(cfg, ("n_groups",), 1)
            groups += 0 if groups % tp == 0 else tp - groups
            conv = (heads * head_dim + 2 * groups * d_state) // tp * (d_conv - 1)
            ssm = heads // tp * head_dim * d_state
        else:  # Mamba-1 (Jamba)
            inner = _cfg_int(cfg, ("mamba_expand",), 2) * geo.hidden_size // tp
            conv, ssm = inner * (d_conv - 1), inner * d_state
        pages.append(StatePage("mamba", count["mamba"], conv * 2 + ssm * ssm_bytes, 1))
    if geo.linear is not None and isinstance(cfg.get("linear_attn_config"), dict):
        # Kimi Delta Attention (models/kimi_k3, MambaStateShapeCalculator.kda_state_shape): three
        # short-conv states and a heads x head_dim x head_dim recurrent state, split by TP; FlashKDA
        # prefill checkpoints on a 16-token grid (model_executor/layers/mamba/kda_checkpoint.py)
        spec = geo.linear
        pages.append(StatePage("linear_attention", count["linear_attention"], spec.conv_elements // tp * 2 + spec.ssm_elements // tp * spec.ssm_element_bytes, KDA_CHECKPOINT_ALIGNMENT))
    elif geo.linear is not None:
        k_heads, v_heads = _cfg_int(cfg, ("linear_num_key_heads",), 16), _cfg_int(cfg, ("linear_num_value_heads",), 32)
        k_dim, v_dim = _cfg_int(cfg, ("linear_key_head_dim",), 128), _cfg_int(cfg, ("linear_value_head_dim",), 128)
        conv = (2 * k_heads * k_dim + v_heads * v_dim) // tp * (_cfg_int(cfg, ("linear_conv_kernel_dim",), 4) - 1)
        ssm = v_heads // tp * v_dim * k_dim
        pages.append(StatePage("linear_attention", count["linear_attention"], conv * 2 + ssm * ssm_bytes, GDN_CHECKPOINT_ALIGNMENT))
    return pages


def _kind(spec: KVSpec) -> str:
    if spec.cache in ("indexer", "compressor"):
        return spec.cache
    if spec.cache == "swa":  # DeepSeek-V4's sliding-window latent cache
        return "sliding"
    return "mla" if spec.latent else spec.kind


def _speculative_specs(specs: tuple[KVSpec, ...], layers: int) -> tuple[KVSpec, ...]:
    """Draft / MTP layers cached beside the model: full-attention layers of the model's shape,
    in the model's own full-attention group (vLLM leaves ``is_draft`` out of spec equality)."""
    if not layers:
        return specs
    i = next((n for n, s in enumerate(specs) if s.kind == "full"), None)
    if i is None:
        return (*specs, specs[0].model_copy(update={"kind": "full", "window": None, "num_layers": layers}))
    return (*specs[:i], specs[i].model_copy(update={"num_layers": specs[i].num_layers + layers}), *specs[i + 1 :])


# --------------------------------------------------------------------------- the computation


def vllm_capacity(
    config: dict,
    *,
    available_kv_bytes: int,
    tp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int | None = None,
    max_model_len: int | None = None,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    vllm_version: str = DEFAULT_VLLM_VERSION,
    prefix_caching: bool = True,
    speculative_layers: int = 0,
    geometry: ModelGeometry | None = None,
) -> VllmCapacity:
    """vLLM's KV-cache groups, ``num_blocks``, token capacity and maximum concurrency (memoised).

    ``available_kv_bytes`` is what vLLM logs as "Available KV cache memory" (per GPU).
    ``geometry`` is ``parse_geometry(config)`` when the caller already has it.

    Raises:
        PlannerError: invalid arguments (unknown version or dtype, bad tp, sizes below 1).
        EngineRefusal: a setting vLLM refuses at start-up (``max_model_len`` above the model's,
            one request does not fit, an architecture this version dropped), with vLLM's reason.
        ConfigError: the config itself is invalid.
    """
    geo = geometry if geometry is not None else parse_geometry(config)
    args = (available_kv_bytes, tp, kv_cache_dtype, block_size, max_model_len, max_num_batched_tokens, vllm_version, prefix_caching, speculative_layers)
    return _memoised(_MEMO, _capacity, config, geo, *args)


def _result_bytes(value: object) -> int:
    """What one memoised result holds, charged without walking it (``size_of`` cost more than the
    sizing itself on every slider move): measured with ``size_of`` at 1.1-1.7 kB for 1-6 groups, so
    1 kB, 256 B a group and 2 B a character of text (log lines, notes, a refusal's reason) over-count."""
    if isinstance(value, VllmCapacity):
        return 1024 + 256 * len(value.groups) + 2 * sum(len(text) for text in (*value.log_lines, *value.notes))
    return 1024 + 2 * len(str(getattr(value, "reason", value)))


_MEMO = ByteBudgetCache(8 << 20, sizer=_result_bytes)  # results by config hash and settings, bounded in bytes (planner/limits.py)


def _memoised(memo: ByteBudgetCache, compute, config: dict, geo: ModelGeometry, *args):
    """``compute(config, geo, *args)`` memoised by the config's hash and ``args``; a refusal is
    remembered too and raised afresh on every hit."""
    key = (geo.config_hash, *args)
    hit = memo.get(key)
    if hit is None:
        try:
            hit = compute(config, geo, *args)
        except EngineRefusal as exc:  # kept without its traceback, whose frames hold the whole geometry
            hit = EngineRefusal(exc.field, exc.value, exc.reason)
        memo.put(key, hit)
    if isinstance(hit, EngineRefusal):
        raise EngineRefusal(hit.field, hit.value, hit.reason)
    return hit


def _positive(field: str, value: object, hi: int = 1 << 40) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise PlannerError(field, value, f"must be an integer from 1 to {hi:,}")
    return value


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


def _check_architecture(geo: ModelGeometry, version: str, top_model_type: str | None = None) -> Rules:
    """vLLM resolves the architecture before anything else: dropped ones are refused first."""
    rules = RULES.get(version)
    if rules is None:
        raise PlannerError("vllm_version", version, f"choose one of {', '.join(VLLM_VERSIONS)}")
    for arch in geo.architectures:
        last = DROPPED.get(arch)
        if last is not None and _version_tuple(rules.version) > _version_tuple(last):
            raise EngineRefusal("model", arch, f"Model architecture {arch} was supported in vLLM until v{last}, and is not supported anymore. Please use an older version of vLLM if you want to use this model architecture.")
    unknown_type = next((t for t in (geo.model_type, top_model_type) if t in rules.unknown_model_types), None)
    if unknown_type is not None:
        arch = (geo.architectures or (geo.model_type,))[0]
        raise EngineRefusal("model", arch, f"vLLM {rules.version} cannot load a config of model type `{unknown_type}` (its transformers or vLLM does not know it yet)")
    unknown = [arch for arch in geo.architectures if arch in NOT_REGISTERED]
    if unknown and len(unknown) == len(geo.architectures):
        # vllm/model_executor/models/registry.py: _raise_for_unsupported (the supported list is left out)
        raise EngineRefusal("model", unknown[0], f"Model architectures {unknown} are not supported for now (vLLM {rules.version} registers no such architecture)")
    if any(layer.kind == "cross" for layer in geo.layers):
        arch = (geo.architectures or (geo.model_type,))[0]
        problem = "runs on vLLM 0.10's V0 engine only, whose KV cache this planner does not model" if rules.mllama else "has no vLLM implementation since vLLM 0.10.2 (cross-attention models were dropped)"
        raise EngineRefusal("model", arch, f"{arch} {problem}")
    return rules


def _capacity(config, geo, available, tp, kv_cache_dtype, block_size, max_model_len, batched, version, prefix_caching, speculative_layers) -> VllmCapacity:
    if isinstance(available, bool) or not isinstance(available, int):
        raise PlannerError("available_kv_bytes", available, "must be an integer number of bytes")
    try:  # the memoised layout refuses an architecture first, as vLLM resolves it before anything else
        layout, held = _layout(config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers), None
    except EngineRefusal as exc:
        if exc.field == "model":
            raise
        layout, held = None, exc  # a parallel-config refusal: vLLM checks max_model_len before it
    derived = geo.max_position_embeddings
    if max_model_len is None:
        if derived is None:
            raise PlannerError("max_model_len", None, "the config has no max_position_embeddings: give --max-model-len")
        max_model_len = derived
    _positive("max_model_len", max_model_len, 1 << 31)
    if derived is not None and max_model_len > derived:
        # vllm/config: _get_and_verify_max_len; 0.10 worded the consequence differently
        rules = RULES[version]
        shown = derived if geo.model_type in rules.int_max_len_types or (rules.wording == "0.10" and not _rope_scaled(config)) else float(derived)
        head = f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len ({_max_len_key(config)}={shown} or model_max_length=None in model's config.json)."
        if rules.wording == "0.10":
            text = f"{head} This may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        else:
            text = (
                f"{head} To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
                "extreme caution. If the model uses relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute "
                "position encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
            )
        raise EngineRefusal("max_model_len", max_model_len, text)
    if held is not None:
        raise held
    return _assemble(layout, available, max_model_len)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Everything that depends on the model and the engine settings, not on memory or length."""

    rules: Rules
    tp: int
    kv_cache_dtype: str
    batched: int
    in_flight: int
    prefix_caching: bool
    align: bool  # prefix caching on a hybrid: states held by the rule below
    state: _StateRule
    split: tuple[tuple[_Bucket, int], ...]  # each spec's bucket and the groups it splits into
    fit: tuple[_Bucket, ...]  # 0.10: every layer's own spec, for the fit check
    group_size: int
    bytes_per_block: int
    notes: tuple[str, ...]
    block_size: int = 0  # the pool's block size where groups keep blocks of their own (DeepSeek-V4); 0: the smallest


_LAYOUTS = ByteBudgetCache(8 << 20)  # layouts by config hash and engine settings, bounded in bytes


def _layout(config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers) -> _Layout:
    return _memoised(_LAYOUTS, _build_layout, config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers)


def _build_layout(config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers) -> _Layout:
    rules = _check_architecture(geo, version, config.get("model_type"))
    _positive("tp", tp, 4096)
    _positive("max_num_batched_tokens", batched, 1 << 31)
    if block_size is not None:
        _positive("block_size", block_size, 1 << 20)
    if isinstance(speculative_layers, bool) or not isinstance(speculative_layers, int) or not 0 <= speculative_layers <= 1024:
        raise PlannerError("speculative_layers", speculative_layers, "must be an integer from 0 to 1,024")
    planner_dtype = _dsv4_dtype(kv_cache_dtype) if geo.compressed is not None else _dtype_bytes(kv_cache_dtype, config)
    if geo.num_attention_heads % tp:  # ModelConfig.verify_with_parallel_config
        raise EngineRefusal("tp", tp, f"Total number of attention heads ({geo.num_attention_heads}) must be divisible by tensor parallel size ({tp}).")
    hybrid = geo.mamba is not None or geo.linear is not None
    if hybrid and not rules.v1_hybrids:
        arch = (geo.architectures or (geo.model_type,))[0]
        # field "engine": vLLM 0.10 picks its engine after it has checked max_model_len
        raise EngineRefusal("engine", arch, f"vLLM {version} serves Mamba hybrids such as {arch} on its V0 engine by default, whose KV cache this planner does not model")
    align = prefix_caching and hybrid and rules.hybrid_prefix_caching
    mode = "none" if not align else ("all" if rules.mamba_all_mode and geo.mamba is not None else "align")
    cfg = text_config(config)
    notes = list(_unverified(geo, cfg))
    if hybrid and prefix_caching and not rules.hybrid_prefix_caching:
        notes.append(f"vLLM {version} turns prefix caching off for Mamba / linear-attention hybrids")
    if geo.compressed is not None:
        return _dsv4_layout(geo, rules, tp, kv_cache_dtype, block_size, batched, prefix_caching, speculative_layers, planner_dtype)
    specs = _speculative_specs(_unbound_windows(kv_specs(geo, planner_dtype, tp, "vllm"), geo, cfg), speculative_layers)
    mla = geo.mla is not None
    if block_size is not None and mla and geo.indexer is not None and block_size % FLASHMLA_BLOCK:
        # vLLM 0.33 CudaPlatformBase.get_attn_backend_cls on SM90: every sparse-MLA backend
        # (FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90) takes MultipleOf(64) blocks
        raise EngineRefusal("block_size", block_size, f"No valid attention backend found for cuda: sparse MLA (DeepSeek sparse attention) needs a block size that is a multiple of {FLASHMLA_BLOCK} (FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90: 'block_size not supported'); vLLM stops while building the model")
    if mla and geo.indexer is not None and planner_dtype == "fp8" and kv_cache_dtype != "fp8":
        # FLASHMLA_SPARSE (the fp8_ds_mla layout) lists "fp8" but not "fp8_e4m3", which an explicit
        # --kv-cache-dtype fp8_e4m3 or a modelopt checkpoint's FP8 KV ("auto") resolves to: vLLM 0.33's
        # selector falls to FLASHINFER_MLA_SPARSE_SM90, plain fp8 latent pages (576 B a token)
        specs = tuple(s.model_copy(update={"bytes_per_token_per_layer": vector_bytes(geo.mla.latent_dim, "fp8")}) if s.cache == "latent" else s for s in specs)
    block = block_size or _default_block(geo, mla, planner_dtype == "fp8", kv_cache_dtype != "fp8_e5m2", rules.version)
    states = _state_pages(geo, cfg, tp, rules.nemotron_ssm_dtype) if hybrid else []
    state_pad, state_block = None, block
    if states and specs:
        chunk = _cfg_int(cfg, ("mamba_chunk_size", "chunk_size"), 2048)  # ModelConfig.get_mamba_chunk_size: 2048 for Mamba-1
        block, state_pad, state_block = _align_hybrid_block(specs, states, block, mla, rules, mode, chunk)
    state = _StateRule(mode, rules.align_states, state_block)
    # 0.10 checks the fit on each layer's own spec, before chunked layers are made full
    fit = tuple(_buckets(geo, specs, states, state_pad, block, rules)) if rules.fit_check_per_layer else ()
    if rules.chunked_as_full:
        specs = _chunked_as_full(specs)
    buckets = _buckets(geo, specs, states, state_pad, block, rules)
    if len(buckets) == 1:  # one spec: one group of every layer
        group_size = buckets[0].layers
    else:  # vLLM: group size = the smallest layer count, or (0.19+) the largest when within 1.5x
        group_size = min(b.layers for b in buckets)
        most = max(b.layers for b in buckets)
        if rules.group_near_max and most < group_size * 1.5:
            group_size = most
    split = tuple((b, -(-b.layers // group_size)) for b in buckets)
    # one block across a group: its largest group's layers x the (unified) page (a uniform-type
    # group's page already spans all its layers)
    bytes_per_block = max(b.page_bytes if b.members else len(range(0, b.layers, n)) * b.page_bytes for b, n in split)
    return _Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching and (align or not hybrid), align, state, split, fit, group_size, bytes_per_block, tuple(notes))


def _chunked_as_full(specs: tuple[KVSpec, ...]) -> tuple[KVSpec, ...]:
    """vLLM 0.10 ``unify_hybrid_kv_cache_specs`` (vllm/v1/core/kv_cache_utils.py): with the hybrid
    manager off, chunked local-attention layers become ``FullAttentionSpec`` layers and merge with
    the full layers of the same shape into one group that caches every position."""
    if not any(s.kind == "chunked" for s in specs):
        return specs
    out: list[KVSpec] = []
    for s in specs:
        s = s.model_copy(update={"kind": "full", "window": None}) if s.kind == "chunked" else s
        same = next((i for i, o in enumerate(out) if o.model_copy(update={"num_layers": s.num_layers}) == s), None)
        if same is None:
            out.append(s)
        else:
            out[same] = out[same].model_copy(update={"num_layers": out[same].num_layers + s.num_layers})
    return tuple(out)


def _dsv4_dtype(kv_cache_dtype: str) -> str:
    """DeepSeek-V4's FlashMLA layers store every cache in the fp8_ds_mla layout: ``auto`` and every
    fp8 dtype become ``fp8_ds_mla``, a 16-bit cache is refused (models/deepseek_v4/attention.py
    ``_resolve_dsv4_kv_cache_dtype``)."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise PlannerError("kv_cache_dtype", kv_cache_dtype, f"vLLM KV cache dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if kv_cache_dtype in ("bfloat16", "float16"):
        raise EngineRefusal(
            "kv_cache_dtype", kv_cache_dtype,
            f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {kv_cache_dtype}. Please set `--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.",
        )
    return "fp8"


def _dsv4_layout(geo, rules, tp, kv_cache_dtype, block_size, batched, prefix_caching, speculative_layers, planner_dtype) -> _Layout:
    """DeepSeek-V4 on a Hopper GPU (vLLM 0.33 models/deepseek_v4, the FlashMLA attention class): its
    caches in the order the layers register them (:func:`_dsv4_caches`), packed into groups as
    ``_get_packed_kv_cache_groups`` does (:func:`_packed_split`); one block spans the widest group."""
    if block_size is not None and block_size != DSV4_BLOCK:
        raise EngineRefusal("block_size", block_size, f"DeepSeek-V4's sparse MLA and indexer kernels (FLASHMLA_SPARSE_DSV4, DEEPSEEK_V4_INDEXER) take {DSV4_BLOCK}-token blocks; other block sizes are not modelled here")
    notes = []
    if speculative_layers:
        notes.append("DeepSeek-V4's MTP layers (DeepSeekV4MTP) are not counted: the figure leaves out their caches")
    specs = kv_specs(geo, planner_dtype, tp, "vllm")
    split = _packed_split(_dsv4_caches(geo, specs, DSV4_BLOCK))
    bytes_per_block = max(b.page_bytes if b.members else b.layers * b.page_bytes for b, _ in split)
    # packed groups are not padded to a common layer count (group size 0): a block spans the widest group
    no_state = _StateRule("none", rules.align_states, DSV4_BLOCK)  # no Mamba state in DeepSeek-V4
    return _Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching, False, no_state, split, (), 0, bytes_per_block, tuple(notes), DSV4_BLOCK)


def _dsv4_caches(geo: ModelGeometry, specs: tuple[KVSpec, ...], block: int) -> list[tuple[KVSpec, int]]:
    """(spec, block size) of every cache of every layer, in the order DeepSeek-V4's modules register
    in the forward context (models/deepseek_v4/attention.py ``DeepseekV4Attention.__init__``): a
    ratio-4 layer's indexer keys and the indexer compressor's state, then every layer's SWA cache,
    then a compressed layer's latent and its compressor's state."""
    comp = geo.compressed
    swa = next(s for s in specs if s.cache == "swa")
    latent = {s.compress_ratio: s for s in specs if s.cache == "compressed"}
    indexer = next((s for s in specs if s.cache == "indexer"), None)
    states = {(s.window, s.k_head_dim): s for s in specs if s.cache == "compressor"}
    out: list[tuple[KVSpec, int]] = []
    for r in comp.ratios:
        ratio = max(1, r)
        if ratio > 1 and ratio not in DSV4_STATE_BLOCK:  # CompressorStateCache: "Invalid compress ratio"
            raise EngineRefusal("model", r, f"Invalid compress ratio: {ratio}")
        if ratio == 4 and indexer is not None:
            out += [(indexer, block), (states[(8, 4 * comp.index_head_dim)], DSV4_STATE_BLOCK[4])]
        out.append((swa, DSV4_SWA_BLOCK))
        if ratio > 1:
            coff = 2 if ratio == 4 else 1
            out += [(latent[ratio], block), (states[(coff * ratio, 2 * coff * comp.head_dim)], DSV4_STATE_BLOCK[ratio])]
    return out


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM ``_approximate_gcd``: the chunk size in [lower_bound, max(values)] that pads the values
    least when each is rounded up to a multiple of it (ties: the larger)."""
    lo, hi = max(1, lower_bound), max(values)
    best, best_pad = lo, None
    for d in range(lo, hi + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


def _packed_split(layers: list[tuple[KVSpec, int]]) -> tuple[tuple[_Bucket, int], ...]:
    """``_get_packed_kv_cache_groups`` (vllm/v1/core/kv_cache_planning.py, block-outermost layout):
    layers go to buckets of one type (same block size; full, or sliding with one window); a bucket
    whose page sizes each hold the same number of layers is a repeating pattern, and all such
    buckets split into groups of the same number of repeats (:func:`_approximate_gcd`, no fewer than
    the largest mixed-page bucket has); sliding buckets with no pattern to follow are states, split
    to fit the widest group. Each group is one bucket here (a group whose layers differ keeps them as
    ``members``, its page the sum of theirs)."""
    keyed: dict[tuple, list[tuple[KVSpec, int, int]]] = {}
    for spec, block in layers:
        key = (spec.kind, spec.window if spec.kind == "sliding" else None, block)
        keyed.setdefault(key, []).append((spec, block, spec.layer_page_bytes(block)))
    info = []
    for members in keyed.values():
        by_page: dict[int, list[int]] = {}
        for j, (_, _, page) in enumerate(members):
            by_page.setdefault(page, []).append(j)
        info.append((members, by_page, len({len(v) for v in by_page.values()}) == 1))

    def most(by_page: dict) -> int:
        return max(len(v) for v in by_page.values())

    floor = max((most(bp) for _, bp, balanced in info if balanced and len(bp) > 1), default=0)
    repeats = _approximate_gcd([most(bp) for _, bp, balanced in info if balanced], floor) if floor else None

    def groups_for(by_page: dict, balanced: bool) -> int:
        return -(-most(by_page) // repeats) if balanced and repeats is not None else 1

    def is_state(members: list) -> bool:
        return repeats is None and members[0][0].kind == "sliding"

    def widest(members: list, by_page: dict, n: int) -> int:
        return sum(-(-len(idx) // n) * members[idx[0]][2] for idx in by_page.values())

    anchor = max(widest(m, bp, len(m) if is_state(m) else groups_for(bp, bal)) for m, bp, bal in info)
    split: list[tuple[_Bucket, int]] = []
    for members, by_page, balanced in info:
        n = groups_for(by_page, balanced)
        if anchor and is_state(members):
            n = max(n, -(-len(members) // max(anchor // members[0][2], 1)))
        if n == 1:
            chosen = [list(range(len(members)))]
        else:
            pattern = list(zip(*by_page.values(), strict=False))  # vLLM zips the page lists as they are
            chosen = [[j for repeat in pattern[i::n] for j in repeat] for i in range(n)]
        split += [(_group_bucket([members[j] for j in idx]), 1) for idx in chosen]
    return tuple(split)


def _group_bucket(members: list[tuple[KVSpec, int, int]]) -> _Bucket:
    counts: dict[KVSpec, int] = {}
    for spec, _, _ in members:
        counts[spec] = counts.get(spec, 0) + 1
    block, page = members[0][1], members[0][2]
    if len(counts) == 1:
        return _Bucket(members[0][0].model_copy(update={"num_layers": len(members)}), 0, block, page)
    specs = tuple(s.model_copy(update={"num_layers": n}) for s, n in counts.items())
    return _Bucket(specs[0], 0, block, sum(p for _, _, p in members), specs)


def _unverified(geo: ModelGeometry, cfg: dict) -> tuple[str, ...]:
    """Inputs vLLM 0.33 serves whose start-up sizing the conformance fixture does not cover, said on
    every result so nobody takes the figure for vLLM's own.

    Nemotron-NAS (DeciLM) is covered (Llama-3.3-Nemotron-Super-49B: no-op attention layers and
    per-layer KV heads) except for attention blocks marked ``replace_with_linear``: vLLM 0.33's
    ``DeciLMDecoderLayer`` (model_executor/models/nemotron_nas.py) reads only ``no_op`` and builds
    attention on such a layer (or fails where its ``n_heads_in_group`` is null), while the planner
    counts no cache for it."""
    if geo.model_type == "nemotron-nas":
        blocks = cfg.get("block_configs") or []
        if any(isinstance(b, dict) and isinstance(b.get("attention"), dict) and b["attention"].get("replace_with_linear") is True and not b["attention"].get("no_op") for b in blocks):
            return ("Nemotron-NAS (DeciLM) with linear-replaced attention layers: vLLM 0.33 ignores replace_with_linear "
                    "(DeciLMDecoderLayer builds attention there); these numbers count no cache for those layers and are "
                    "not checked against vLLM's sizing code",)
    return ()


def _default_block(geo: ModelGeometry, mla: bool, fp8: bool, e4m3: bool, version: str) -> int:
    """The block size the backend a Hopper GPU picks prefers (``get_preferred_block_size``).

    MLA: vLLM 0.19+ (vllm/platforms/cuda.py ``_get_backend_priorities``, SM90) tries FLASH_ATTN_MLA
    first, which takes 16-bit caches in 16-token blocks; fp8 caches go to FLASHMLA (64). 0.10
    forces FLASHMLA's 64 for every MLA model (``CudaPlatform.check_and_update_config``).
    Sparse MLA (DSA) and its indexer take 64. Otherwise FLASH_ATTN's 16, except that an e4m3 fp8
    cache with 512-wide heads (Gemma 4's global layers) runs the SM90 FA4 FP8 kernel on 64-token
    pages (vllm/v1/attention/backends/flash_attn.py ``_get_sm90_fa4_fp8_kv_block_size``)."""
    if mla:
        if geo.indexer is None and not fp8 and _version_tuple(version) >= (0, 19):
            return FLASH_ATTN_BLOCK
        return FLASHMLA_BLOCK
    if geo.indexer is not None:  # MiniMax-M3's sparse attention and index keys (models/minimax_m3/common)
        return MINIMAX_M3_SPARSE_BLOCK
    if fp8 and e4m3 and max((layer.k_head_dim for layer in geo.layers if layer.kind in ("full", "sliding", "chunked")), default=0) == 512:
        return SM90_FA4_FP8_BLOCK
    return FLASH_ATTN_BLOCK


def _unbound_windows(specs: tuple[KVSpec, ...], geo: ModelGeometry, cfg: dict) -> tuple[KVSpec, ...]:
    """A model-level sliding window at or past the maximum context never binds, so the planner's
    geometry counts those layers as full; vLLM still gives them a ``SlidingWindowSpec`` (and its
    extra block), e.g. Phi-3.5-mini's 262,144-token window."""
    window = cfg.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or cfg.get("use_sliding_window") is False or cfg.get("layer_types") or cfg.get("sliding_window_pattern"):
        return specs
    if geo.max_position_embeddings is None or window < geo.max_position_embeddings or geo.model_type in SLIDING_PATTERN_DEFAULTS:
        return specs
    return tuple(s.model_copy(update={"kind": "sliding", "window": window}) if s.kind == "full" and not s.latent else s for s in specs)


def _align_hybrid_block(specs: tuple[KVSpec, ...], states: list[StatePage], block: int, mla: bool, rules: Rules, mode: str, chunk: int) -> tuple[int, int, int]:
    """``Platform._align_hybrid_block_size`` (0.24, 0.33; ``HybridAttentionMambaModelConfig``
    in 0.19): grow the attention block until one attention page holds the largest state; states
    are then padded to exactly one attention page. Returns the attention block, the padded state
    page and the state's block (``mamba_block_size``; in "all" mode a multiple of the model's
    Mamba chunk)."""
    per_token = max(s.bytes_per_token_per_layer for s in specs)
    state = max(p.state_bytes for p in states)
    if rules.checkpoint_grid:  # 0.33
        kernel = max(FLASH_ATTN_BLOCK, block)
        if mla:
            kernel = max(kernel, 128)  # TRTLLM/FlashInfer MLA decode kernels
        if mode == "align":
            kernel = math.lcm(kernel, *(p.checkpoint_alignment for p in states))
        attn_block = kernel * -(-state // (kernel * per_token))
        attn_block = FLASH_ATTN_BLOCK * -(-attn_block // FLASH_ATTN_BLOCK)
        block = max(block, attn_block)
        return block, block * per_token, block
    kernel = max(FLASHMLA_BLOCK if mla else FLASH_ATTN_BLOCK, block)  # the backend's smallest kernel block
    if mode == "all":
        grid = math.lcm(chunk, kernel)
        tokens_per_state = -(-state // per_token)
        attn_block = grid * -(-tokens_per_state // grid)
    else:
        attn_block = kernel * -(-state // (kernel * per_token))
    block = max(block, attn_block)
    return block, block * per_token, attn_block if mode == "all" else block


@dataclass(frozen=True, slots=True)
class _Bucket:
    """Layers of one spec after page unification: what ``same_type_layers`` holds in vLLM; or,
    with ``members``, one group of layers of one type whose pages differ (``UniformTypeKVCacheSpecs``)."""

    spec: KVSpec | StatePage
    first_layer: int
    block_size: int
    page_bytes: int
    members: tuple[KVSpec, ...] = ()
    kind: str = field(default="", init=False)  # full, sliding, mla, "indexer+mla", ...: set once, read on every result

    def __post_init__(self) -> None:
        if self.members:
            kind = "+".join(dict.fromkeys(_kind(s) for s in self.members))
        else:
            kind = self.spec.kind if isinstance(self.spec, StatePage) else _kind(self.spec)
        object.__setattr__(self, "kind", kind)

    @property
    def layers(self) -> int:
        if self.members:
            return sum(s.num_layers for s in self.members)
        return self.spec.num_layers

    def blocks_at(self, length: int, in_flight: int, state: _StateRule) -> int:
        if isinstance(self.spec, StatePage):
            return state.blocks(length)
        return self.spec.admission_blocks(length, self.block_size, in_flight)


def _first_layers(geo: ModelGeometry) -> dict[tuple[str, int | None], int]:
    first: dict[tuple[str, int | None], int] = {}
    for layer in geo.layers:
        first.setdefault((layer.kind, layer.window), layer.index)
    if geo.indexer is not None and geo.indexer.layers:
        first[("indexer", None)] = min(geo.indexer.layers)
    return first


def _buckets(geo: ModelGeometry, specs: tuple[KVSpec, ...], states: list[StatePage], state_pad: int | None, block: int, rules: Rules) -> list[_Bucket]:
    """One bucket per spec, pages unified as ``unify_kv_cache_spec_page_size`` does: a smaller
    attention page that divides the largest grows its block by the ratio, any other smaller
    page (a Mamba state, an odd attention page) is padded; ordered by each spec's first layer."""
    first = _first_layers(geo)
    uniform = _uniform_type(specs, states, first, block) if rules.unify_pages else None  # 0.10 has no UniformTypeKVCacheSpecs
    if uniform is not None:
        return [uniform]
    sliding_block = max(FLASH_ATTN_BLOCK, block // FLASH_ATTN_BLOCK * FLASH_ATTN_BLOCK)  # FLASH_ATTN MultipleOf(16)
    raw: list[_Bucket] = []
    for s in specs:
        b = sliding_block if s.kind == "sliding" else block
        raw.append(_Bucket(s, first.get((s.kind, s.window), len(geo.layers)), b, s.layer_page_bytes(b)))
    for p in states:
        raw.append(_Bucket(p, first.get((p.kind, None), 0), block, state_pad or p.state_bytes))
    largest = max(b.page_bytes for b in raw)
    if not rules.unify_pages and any(b.page_bytes != largest for b in raw if isinstance(b.spec, KVSpec)):
        # vLLM 0.10 get_kv_cache_config: neither one spec nor one page size -> NotImplementedError
        raise EngineRefusal("model", (geo.architectures or (geo.model_type,))[0], f"vLLM {rules.version} cannot lay out KV-cache pages of different sizes (get_kv_cache_config raises NotImplementedError)")
    out = []
    for b in raw:
        if b.page_bytes != largest and isinstance(b.spec, KVSpec) and largest % b.page_bytes == 0:
            b = _Bucket(b.spec, b.first_layer, b.block_size * (largest // b.page_bytes), largest)
        elif b.page_bytes != largest:
            b = _Bucket(b.spec, b.first_layer, b.block_size, largest)
        out.append(b)
    out.sort(key=lambda b: b.first_layer)
    if rules.sort_groups_by_type:  # 0.10 unify_kv_cache_configs: groups sorted by spec class name
        out.sort(key=lambda b: _SPEC_CLASS.get(b.kind, b.kind))
    return out


_SPEC_CLASS = {"full": "FullAttentionSpec", "mla": "FullAttentionSpec", "sliding": "SlidingWindowSpec", "chunked": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec", "linear_attention": "MambaSpec"}


def _uniform_type(specs: tuple[KVSpec, ...], states: list[StatePage], first: dict, block: int) -> _Bucket | None:
    """``UniformTypeKVCacheSpecs.from_specs`` (vllm/v1/kv_cache_interface.py): when every layer is
    attention of one type (all full, incl. MLA latents and indexer keys, or all one window) at one
    block size but the specs differ, vLLM keeps one group of every layer; a block then spans every
    layer's page. Layers in model order: a layer's indexer is built before its attention."""
    if states or len(specs) < 2 or len({(s.kind, s.window) for s in specs}) > 1 or specs[0].kind == "cross":
        return None
    ordered = tuple(sorted(specs, key=lambda s: (first.get(("indexer", None) if s.cache == "indexer" else (s.kind, s.window), 0), s.cache != "indexer")))
    return _Bucket(ordered[0], first.get((specs[0].kind, specs[0].window), 0), block, sum(s.num_layers * s.layer_page_bytes(block) for s in specs), ordered)


def _assemble(layout: _Layout, available: int, max_model_len: int) -> VllmCapacity:
    rules, in_flight, state_rule = layout.rules, layout.in_flight, layout.state
    groups: list[EngineGroup] = []
    per_request = 0
    for b, n in layout.split:
        blocks = b.blocks_at(max_model_len, in_flight, state_rule)
        per_request += n * blocks
        state = isinstance(b.spec, StatePage)
        window = None if state else b.spec.window
        # without prefix caching a state's "block" spans the whole request (mamba_block_size = max_model_len)
        block_size = (max_model_len if state_rule.mode == "none" else state_rule.block) if state else b.block_size
        for i in range(n):  # 0.19+: layers[i::n] go to the i-th group; 0.10: layers[i * size:(i + 1) * size]
            layers = len(range(i, b.layers, n)) if rules.group_near_max else min(layout.group_size, b.layers - i * layout.group_size)
            groups.append(EngineGroup(b.kind, layers, block_size, b.page_bytes, blocks, window))
    bytes_per_block = layout.bytes_per_block

    def needed_at(length: int) -> int:
        if rules.fit_check_per_layer:  # 0.10: every layer's own pages, no group padding
            return sum(b.layers * b.page_bytes * b.blocks_at(length, in_flight, state_rule) for b in layout.fit)
        if length == max_model_len:  # the blocks one request reserves, counted above
            return bytes_per_block * per_request
        return bytes_per_block * sum(n * b.blocks_at(length, in_flight, state_rule) for b, n in layout.split)

    _check_fits(rules, available, bytes_per_block, max_model_len, needed_at)
    num_blocks = available // bytes_per_block
    concurrency = num_blocks / per_request
    min_block = layout.block_size or min((g.block_size for g in groups if g.kind not in STATE_KINDS), default=groups[0].block_size)
    tokens = int(concurrency * max_model_len) if rules.tokens_from_concurrency else num_blocks // len(groups) * min_block
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
    lines = (f"{size}, {conc}",) if rules.one_log_line else (size, conc)
    return VllmCapacity(
        rules.version, layout.tp, layout.kv_cache_dtype, min_block, max_model_len, layout.batched, in_flight, layout.prefix_caching, available,
        tuple(groups), layout.group_size, bytes_per_block, num_blocks, per_request, concurrency, tokens, lines, layout.notes,
    )


DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _check_fits(rules: Rules, available: int, bytes_per_block: int, max_model_len: int, needed_at) -> None:
    """``_check_enough_kv_cache_memory``: one request at max_model_len must fit (0.33 keeps the
    null block out of the budget); the message is vLLM's, with its binary-searched estimate, in
    the words of the release (vllm/v1/core/kv_cache_utils.py; kv_cache_planning.py in 0.33)."""
    check = available - bytes_per_block if rules.reserve_null_block else available
    if check <= 0:
        raise EngineRefusal("available_kv_bytes", available, _NO_MEMORY[rules.wording])
    needed = needed_at(max_model_len)
    if needed <= check:
        return
    estimate = 0
    if needed_at(1) <= check:
        lo, hi = 1, max_model_len
        while lo <= hi:
            mid = (lo + hi) // 2
            if needed_at(mid) <= check:
                estimate, lo = mid, mid + 1
            else:
                hi = mid - 1
    hint = f"Based on the available memory, the estimated maximum model length is {estimate}." if estimate > 0 else ""
    if rules.wording == "0.10":
        text = (
            f"To serve at least one request with the models's max seq len ({max_model_len}), ({needed / GIB:.2f} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({check / GIB:.2f} GiB). {hint} Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
    else:
        hint += " " if hint else ""
        head = f"To serve at least one request with the {'models' if rules.wording == '0.19' else 'model'}'s max seq len ({max_model_len}), ({round(needed / GIB, 2)} GiB KV cache is needed, which is larger than the available KV cache memory ({round(check / GIB, 2)} GiB). {hint}"
        gpu = "`gpu_memory_utilization`" if rules.wording == "0.19" else "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend)"
        text = f"{head}Try increasing {gpu} or decreasing `max_model_len` when initializing the engine. {DOCS}"
    raise EngineRefusal("max_model_len", max_model_len, text)


_NO_MEMORY = {
    "0.10": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "0.19": f"No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. {DOCS}",
    "0.24": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). " + DOCS,
}


# --------------------------------------------------------------------------- memory budget


@dataclass(frozen=True, slots=True)
class BudgetTerm(Result):
    name: str
    bytes: int  # positive: what the budget starts from; negative: what start-up takes from it
    source: str


@dataclass(frozen=True, slots=True)
class VllmBudget(Result):
    """Predicted "Available KV cache memory" per GPU: requested memory less what start-up takes."""

    terms: tuple[BudgetTerm, ...]
    available_kv_bytes: int

    def summary(self) -> dict:
        return {"available_kv_bytes": self.available_kv_bytes, "available_kv_gib": round(self.available_kv_bytes / GIB, 2), "terms": [t.model_dump() for t in self.terms]}


CUDA_GRAPH_BYTES = 768 << 20  # graphs captured for decode batch sizes up to 512 (vLLM's default list)
NON_TORCH_BYTES = 512 << 20  # CUDA context, cuBLAS workspaces
NCCL_BYTES = 256 << 20  # NCCL buffers once tp > 1
SAMPLER_SEQS = 1024  # vLLM's dummy sampler run: max_num_seqs default of `vllm serve` on H100-class GPUs


def predict_budget(device_bytes: int, utilization: float, weights_bytes: int, geometry: ModelGeometry, *, tp: int = 1, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS, max_num_seqs: int = SAMPLER_SEQS, device_source: str = "", weights_source: str = "", measured: dict[str, int] | None = None) -> VllmBudget:
    """What vLLM's ``determine_available_memory`` will find (vllm/v1/worker/gpu_worker.py):
    ``device x gpu_memory_utilization`` less the weights, the profiling run's peak activations at
    ``max_num_batched_tokens``, CUDA-graph memory and non-torch memory, per GPU.

    ``measured`` (term name -> bytes, e.g. from a probe run on a GPU) replaces the estimates.

    Raises:
        PlannerError: utilization outside (0, 1] or a non-positive device size.
    """
    if not 0 < utilization <= 1:
        raise PlannerError("gpu_memory_utilization", utilization, "must be above 0 and at most 1")
    if device_bytes <= 0:
        raise PlannerError("device_bytes", device_bytes, "must be positive")
    geo = geometry
    inter = (geo.intermediate_size or 4 * geo.hidden_size) // tp
    qkv = (geo.num_attention_heads + 2 * geo.num_kv_heads) * geo.head_dim // tp
    # one layer's live tensors at the peak: residual + normed input, QKV, gate/up and the activated
    # product, in 16-bit; then the sampler's float32 logits for max_num_seqs dummy requests
    activations = max_num_batched_tokens * 2 * (2 * geo.hidden_size + qkv + 3 * inter)
    logits = max_num_seqs * (geo.vocab_size or 32000) * 4
    requested = int(device_bytes * utilization)
    terms = [
        BudgetTerm("device memory", device_bytes, device_source or "device catalog"),
        BudgetTerm(f"x gpu_memory_utilization {utilization:g}", requested - device_bytes, "vLLM --gpu-memory-utilization: the share of the device vLLM may use"),
        BudgetTerm("weights per GPU", -(-weights_bytes // tp), weights_source or "weights estimate" + (f" / tp {tp}" if tp > 1 else "")),
        BudgetTerm("profiling peak activations", activations, f"estimate: one layer's hidden, QKV and gated-MLP tensors at {max_num_batched_tokens:,} batched tokens (16-bit)"),
        BudgetTerm("sampler logits", logits, f"estimate: float32 logits of {max_num_seqs:,} dummy requests x {geo.vocab_size or 32000:,} vocabulary"),
        BudgetTerm("CUDA graphs", CUDA_GRAPH_BYTES, "assumed: typical capture for decode batch sizes up to 512"),
        BudgetTerm("non-torch memory", NON_TORCH_BYTES + (NCCL_BYTES if tp > 1 else 0), "assumed: CUDA context and cuBLAS workspaces" + (", NCCL buffers" if tp > 1 else "")),
    ]
    for name, value in (measured or {}).items():
        terms = [BudgetTerm(t.name, value, "measured by the probe on a GPU") if t.name == name else t for t in terms]
    taken = sum(t.bytes for t in terms[2:])
    terms = [terms[0], terms[1], *(BudgetTerm(t.name, -t.bytes, t.source) for t in terms[2:])]
    return VllmBudget(terms=tuple(terms), available_kv_bytes=requested - taken)


def serve_command(model: str, capacity: VllmCapacity, *, gpu_memory_utilization: float | None = None, max_num_seqs: int | None = None, user_block_size: int | None = None) -> str:
    """The ``vllm serve`` line that reproduces a plan (flags at their defaults are left out)."""
    parts = ["vllm serve", model, f"--tensor-parallel-size {capacity.tp}", f"--max-model-len {capacity.max_model_len}"]
    if gpu_memory_utilization is not None:
        parts.append(f"--gpu-memory-utilization {gpu_memory_utilization:g}")
    if capacity.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {capacity.kv_cache_dtype}")
    if max_num_seqs is not None:
        parts.append(f"--max-num-seqs {max_num_seqs}")
    if capacity.max_num_batched_tokens != DEFAULT_MAX_NUM_BATCHED_TOKENS:
        parts.append(f"--max-num-batched-tokens {capacity.max_num_batched_tokens}")
    if user_block_size is not None:
        parts.append(f"--block-size {user_block_size}")
    if not capacity.prefix_caching:
        parts.append("--no-enable-prefix-caching")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class VllmPreview(Result):
    """The Plan page's start-up preview: vLLM's predicted budget, its log lines, the command."""

    budget: VllmBudget
    log_lines: tuple[str, ...]
    refusal: str | None
    command: str


def vllm_preview(plan, model, measured: dict[str, int] | None = None) -> VllmPreview:
    """What ``vllm serve`` will print for a plan under runtime vllm: the budget vLLM will find
    on one GPU at ``gpu_memory_utilization = 1 - headroom``, the start-up log at the plan's
    maximum context, and the command line that reproduces the plan. ``measured``: budget terms a
    probe measured on this plan's GPU (:func:`planner.probe.budget_measurements`), which replace
    the estimates.

    Raises:
        PlannerError: the plan's KV dtype has no vLLM equivalent (int8, int4, fp32).
    """
    inputs = plan.inputs
    resolved = plan.kv_cache.get("kv_dtype", inputs.kv_dtype)  # "auto" as the checkpoint resolved it
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}.get(resolved)
    if dtype is None:
        raise PlannerError("kv_dtype", resolved, "vLLM has no such KV cache dtype; choose bf16, fp16 or fp8")
    utilization = (10_000 - inputs.headroom_bp) / 10_000
    cap = plan.capacity
    budget = predict_budget(
        cap["device_bytes"], utilization, cap["model_resident_bytes"] * inputs.tp, model.geometry, tp=inputs.tp, max_num_batched_tokens=inputs.max_batched_tokens,
        max_num_seqs=inputs.max_num_seqs or SAMPLER_SEQS, device_source=plan.device.source, weights_source=cap["model_resident_source"], measured=measured,
    )  # fmt: skip
    block = None if inputs.block_tokens == 16 else inputs.block_tokens
    length = plan.context.maximum_context_tokens
    try:
        r = vllm_capacity(model.config, geometry=model.geometry, available_kv_bytes=budget.available_kv_bytes, tp=inputs.tp, kv_cache_dtype=dtype, block_size=block, max_model_len=length, vllm_version=inputs.vllm_version)
        lines, refusal = r.log_lines, None
        # the checkpoint's own format stays "auto" on the command line; a chosen one is spelled out
        shown = replace(r, kv_cache_dtype="auto") if inputs.kv_dtype == AUTO else r
        command = serve_command(model.repo_id or "MODEL", shown, gpu_memory_utilization=utilization, max_num_seqs=inputs.max_num_seqs, user_block_size=block)
    except EngineRefusal as exc:
        lines, refusal = (), exc.reason
        parts = ["vllm serve", model.repo_id or "MODEL", f"--tensor-parallel-size {inputs.tp}", f"--max-model-len {length}", f"--gpu-memory-utilization {utilization:g}"]
        if inputs.kv_dtype != AUTO:
            parts.append(f"--kv-cache-dtype {dtype}")
        command = " ".join(parts)
    return VllmPreview(budget=budget, log_lines=tuple(lines), refusal=refusal, command=command)
