"""Everything vLLM's KV-cache sizing decides from the model and the engine settings alone.

The architecture and setting checks, each layer's spec, the block size, Mamba state handling and
the KV-cache groups, memoised by config hash and settings (a slider move changes memory and
length, not these): :func:`layout_for`. :mod:`planner.engines.vllm.capacity` then sizes the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from planner.engines.common import EngineRefusal, memoised, require_int
from planner.engines.vllm.groups import Bucket, align_hybrid_block, group_split, unified_buckets
from planner.engines.vllm.packed import dsv4_caches, packed_split
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, Rules, check_architecture
from planner.engines.vllm.specs import (
    DSV4_BLOCK,
    FLASHMLA_BLOCK,
    StatePage,
    StateRule,
    cfg_int,
    chunked_as_full,
    default_block,
    dsv4_kv_dtype,
    planner_kv_dtype,
    speculative_specs,
    state_pages,
    unbound_windows,
)
from planner.geometry import ModelGeometry, text_config
from planner.kv import KVSpec, kv_specs, vector_bytes
from planner.limits import ByteBudgetCache


@dataclass(frozen=True, slots=True, kw_only=True)
class VllmSettings:
    """The ``vllm serve`` settings the KV-cache layout depends on (unvalidated: :func:`layout_for`
    checks them in vLLM's order). The memory budget and ``max_model_len`` are not here: they
    change on every slider move, the layout does not depend on them, and
    :func:`planner.engines.vllm.vllm_capacity` takes them beside these.

    The memos are keyed by :meth:`memo_key` (the fields in order, a plain tuple); the object is
    built from that key only when a layout is (:meth:`from_key`): building one costs about as much
    as the rest of a memo hit, and a slider move sizes twice."""

    tp: int = 1  # --tensor-parallel-size
    kv_cache_dtype: str = "auto"  # --kv-cache-dtype
    block_size: int | None = None  # --block-size (None: the block the backend prefers)
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS  # --max-num-batched-tokens
    version: str = DEFAULT_VLLM_VERSION  # the release whose rules apply (a key of RULES)
    prefix_caching: bool = True  # --enable-prefix-caching (on by default) / --no-enable-prefix-caching
    speculative_layers: int = 0  # draft / MTP layers cached beside the model

    def memo_key(self) -> SettingsKey:
        """The fields in order as a plain tuple: hashed in C, and charged by the memos' byte
        budgets like the separate arguments they replace."""
        return tuple(getattr(self, name) for name in _SETTING_NAMES)  # type: ignore[return-value]

    @classmethod
    def from_key(cls, key: SettingsKey) -> VllmSettings:
        """The settings whose :meth:`memo_key` is ``key``."""
        return cls(**dict(zip(_SETTING_NAMES, key, strict=True)))


_SETTING_NAMES = tuple(f.name for f in fields(VllmSettings))
# VllmSettings.memo_key(): tp, kv_cache_dtype, block_size, max_num_batched_tokens, version, prefix_caching, speculative_layers
SettingsKey = tuple[int, str, int | None, int, str, bool, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Everything that depends on the model and the engine settings, not on memory or length."""

    rules: Rules
    tp: int
    kv_cache_dtype: str
    batched: int  # max_num_batched_tokens
    in_flight: int  # tokens scheduled ahead of a request's own: concurrent batches x batched
    prefix_caching: bool  # as vLLM runs it (a release may turn it off for hybrids)
    align: bool  # prefix caching on a hybrid: states held by the rule below
    state: StateRule
    split: tuple[tuple[Bucket, int], ...]  # each spec's bucket and the groups it splits into
    fit: tuple[Bucket, ...]  # 0.10: every layer's own spec, for the fit check
    group_size: int
    bytes_per_block: int
    notes: tuple[str, ...]
    block_size: int = 0  # the pool's block size where groups keep blocks of their own (DeepSeek-V4); 0: the smallest


_LAYOUTS = ByteBudgetCache(8 << 20)  # layouts by config hash and engine settings, bounded in bytes


def layout_for(config: dict, geo: ModelGeometry, key: SettingsKey) -> Layout:
    """The layout of this model under the settings ``key`` (:meth:`VllmSettings.memo_key`),
    memoised by config hash and settings.

    Raises:
        PlannerError: a setting out of range, an unknown version or KV dtype.
        EngineRefusal: what vLLM refuses before it sizes the pool (field ``model``: an architecture
            this release cannot run; ``tp``, ``engine``, ``kv_cache_dtype``, ``block_size``: a setting).
    """
    return memoised(_LAYOUTS, (geo.config_hash, *key), lambda: _build_layout(config, geo, VllmSettings.from_key(key)))


def _build_layout(config: dict, geo: ModelGeometry, settings: VllmSettings) -> Layout:
    rules = check_architecture(geo, settings.version, config.get("model_type"), config)
    planner_dtype = _checked_settings(config, geo, settings, rules)
    if geo.compressed is not None:
        return _dsv4_layout(geo, rules, settings, planner_dtype)
    return _grouped_layout(config, geo, settings, rules, planner_dtype)


def _is_hybrid(geo: ModelGeometry) -> bool:
    """Mamba or linear-attention layers beside attention: per-request states in pool blocks."""
    return geo.mamba is not None or geo.linear is not None


def _checked_settings(config: dict, geo: ModelGeometry, settings: VllmSettings, rules: Rules) -> str:
    """The planner's KV dtype for these settings, once the settings vLLM checks before sizing
    anything pass, in vLLM's order.

    Raises:
        PlannerError: a setting out of range or an unknown KV dtype.
        EngineRefusal: a head count the tensor-parallel size does not divide, a 16-bit cache for
            DeepSeek-V4, a Mamba hybrid on a release that serves it on its V0 engine.
    """
    tp = settings.tp
    require_int("tp", tp, hi=4096)
    require_int("max_num_batched_tokens", settings.max_num_batched_tokens, hi=1 << 31)
    if settings.block_size is not None:
        require_int("block_size", settings.block_size, hi=1 << 20)
    require_int("speculative_layers", settings.speculative_layers, lo=0, hi=1024)
    kv_cache_dtype = settings.kv_cache_dtype
    planner_dtype = dsv4_kv_dtype(kv_cache_dtype) if geo.compressed is not None else planner_kv_dtype(kv_cache_dtype, config)
    if geo.num_attention_heads % tp:  # ModelConfig.verify_with_parallel_config
        raise EngineRefusal("tp", tp, f"Total number of attention heads ({geo.num_attention_heads}) must be divisible by tensor parallel size ({tp}).")
    if _is_hybrid(geo) and not rules.v1_hybrids:
        arch = (geo.architectures or (geo.model_type,))[0]
        # field "engine": vLLM 0.10 picks its engine after it has checked max_model_len
        raise EngineRefusal("engine", arch, f"vLLM {settings.version} serves Mamba hybrids such as {arch} on its V0 engine by default, whose KV cache this planner does not model")
    return planner_dtype


def _grouped_layout(config: dict, geo: ModelGeometry, settings: VllmSettings, rules: Rules, planner_dtype: str) -> Layout:
    """Every model but DeepSeek-V4: each layer kind's spec, the block, the states, and the groups
    ``get_kv_cache_groups`` forms of them (:func:`group_split`)."""
    hybrid = _is_hybrid(geo)
    align = settings.prefix_caching and hybrid and rules.hybrid_prefix_caching
    mode = "none" if not align else ("all" if rules.mamba_all_mode and geo.mamba is not None else "align")
    cfg = text_config(config)
    notes = _notes(geo, cfg, rules, hybrid and settings.prefix_caching)
    specs = _sparse_mla_specs(geo, settings, planner_dtype, speculative_specs(unbound_windows(kv_specs(geo, planner_dtype, settings.tp, "vllm"), geo, cfg), settings.speculative_layers))
    block, states, state_pad, state = _blocks(geo, cfg, settings, rules, specs, planner_dtype == "fp8", mode)
    # 0.10 checks the fit on each layer's own spec, before chunked layers are made full
    fit = tuple(unified_buckets(geo, specs, states, state_pad, block, rules)) if rules.fit_check_per_layer else ()
    if rules.chunked_as_full:
        specs = chunked_as_full(specs)
    split, group_size, bytes_per_block = group_split(unified_buckets(geo, specs, states, state_pad, block, rules), rules)
    batched = settings.max_num_batched_tokens
    return Layout(
        rules=rules, tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype, batched=batched, in_flight=rules.concurrent_batches * batched,
        prefix_caching=settings.prefix_caching and (align or not hybrid), align=align, state=state, split=split, fit=fit, group_size=group_size,
        bytes_per_block=bytes_per_block, notes=notes,
    )  # fmt: skip


def _sparse_mla_specs(geo: ModelGeometry, settings: VllmSettings, planner_dtype: str, specs: tuple[KVSpec, ...]) -> tuple[KVSpec, ...]:
    """What vLLM 0.33's attention-backend selector decides for sparse MLA (DeepSeek sparse
    attention) on Hopper: the block size it accepts, and the latent page of the backend it picks."""
    if geo.mla is None or geo.indexer is None:
        return specs
    if settings.block_size is not None and settings.block_size % FLASHMLA_BLOCK:
        # CudaPlatformBase.get_attn_backend_cls on SM90: every sparse-MLA backend
        # (FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90) takes MultipleOf(64) blocks
        raise EngineRefusal("block_size", settings.block_size, f"No valid attention backend found for cuda: sparse MLA (DeepSeek sparse attention) needs a block size that is a multiple of {FLASHMLA_BLOCK} (FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_SM90: 'block_size not supported'); vLLM stops while building the model")
    if planner_dtype == "fp8" and settings.kv_cache_dtype != "fp8":
        # FLASHMLA_SPARSE (the fp8_ds_mla layout) lists "fp8" but not "fp8_e4m3", which an explicit
        # --kv-cache-dtype fp8_e4m3 or a modelopt checkpoint's FP8 KV ("auto") resolves to: the
        # selector falls to FLASHINFER_MLA_SPARSE_SM90, plain fp8 latent pages (576 B a token)
        return tuple(s.model_copy(update={"bytes_per_token_per_layer": vector_bytes(geo.mla.latent_dim, "fp8")}) if s.cache == "latent" else s for s in specs)
    return specs


def _notes(geo: ModelGeometry, cfg: dict, rules: Rules, hybrid_prefix_caching: bool) -> tuple[str, ...]:
    """What every result of this layout says beside its figures: an input the fixture does not
    cover, or prefix caching that this release turns off for a hybrid."""
    notes = list(_unverified(geo, cfg))
    if hybrid_prefix_caching and not rules.hybrid_prefix_caching:
        notes.append(f"vLLM {rules.version} turns prefix caching off for Mamba / linear-attention hybrids")
    return tuple(notes)


def _blocks(geo: ModelGeometry, cfg: dict, settings: VllmSettings, rules: Rules, specs: tuple[KVSpec, ...], fp8: bool, mode: str) -> tuple[int, list[StatePage], int | None, StateRule]:
    """The attention block (the user's, else the one the backend prefers, grown for a hybrid
    until one page holds a state), the state pages, their padded page and the state rule."""
    mla = geo.mla is not None
    block = settings.block_size or default_block(geo, mla, fp8, settings.kv_cache_dtype != "fp8_e5m2", rules.version)
    states = state_pages(geo, cfg, settings.tp, rules.nemotron_ssm_dtype, rules.config_ssm_dtype) if _is_hybrid(geo) else []
    state_pad, state_block = None, block
    if states and specs:
        chunk = cfg_int(cfg, ("mamba_chunk_size", "chunk_size"), 2048)  # ModelConfig.get_mamba_chunk_size: 2048 for Mamba-1
        block, state_pad, state_block = align_hybrid_block(specs, states, block, mla, rules, mode, chunk)
    return block, states, state_pad, StateRule(mode, rules.align_states, state_block)


def _dsv4_layout(geo: ModelGeometry, rules: Rules, settings: VllmSettings, planner_dtype: str) -> Layout:
    """DeepSeek-V4 on a Hopper GPU (vLLM 0.33 models/deepseek_v4, the FlashMLA attention class): its
    caches in the order the layers register them (:func:`dsv4_caches`), packed into groups as
    ``_get_packed_kv_cache_groups`` does (:func:`packed_split`); one block spans the widest group."""
    if settings.block_size is not None and settings.block_size != DSV4_BLOCK:
        raise EngineRefusal("block_size", settings.block_size, f"DeepSeek-V4's sparse MLA and indexer kernels (FLASHMLA_SPARSE_DSV4, DEEPSEEK_V4_INDEXER) take {DSV4_BLOCK}-token blocks; other block sizes are not modelled here")
    notes = []
    if settings.speculative_layers:
        notes.append("DeepSeek-V4's MTP layers (DeepSeekV4MTP) are not counted: the figure leaves out their caches")
    split = packed_split(dsv4_caches(geo, kv_specs(geo, planner_dtype, settings.tp, "vllm"), DSV4_BLOCK))
    # packed groups are not padded to a common layer count (group size 0): a block spans the widest group
    bytes_per_block = max(b.page_bytes if b.members else b.layers * b.page_bytes for b, _ in split)
    batched = settings.max_num_batched_tokens
    return Layout(
        rules=rules, tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype, batched=batched, in_flight=rules.concurrent_batches * batched,
        prefix_caching=settings.prefix_caching, align=False, state=StateRule("none", rules.align_states, DSV4_BLOCK),  # no Mamba state in DeepSeek-V4
        split=split, fit=(), group_size=0, bytes_per_block=bytes_per_block, notes=tuple(notes), block_size=DSV4_BLOCK,
    )  # fmt: skip


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
