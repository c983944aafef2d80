"""Everything vLLM's KV-cache sizing decides from the model and the engine settings alone.

The architecture and setting checks, each layer's spec, the block size, Mamba state handling and
the KV-cache groups, memoised by config hash and settings (a slider move changes memory and
length, not these): :func:`layout_for`. :mod:`planner.engines.vllm.capacity` then sizes the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.common import EngineRefusal, memoised, require_int
from planner.engines.vllm.groups import Bucket, align_hybrid_block, unified_buckets
from planner.engines.vllm.packed import dsv4_caches, packed_split
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, Rules, check_architecture
from planner.engines.vllm.specs import (
    DSV4_BLOCK,
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
from planner.kv import kv_specs
from planner.limits import ByteBudgetCache


@dataclass(frozen=True, slots=True, kw_only=True)
class VllmSettings:
    """The ``vllm serve`` settings the KV-cache layout depends on (unvalidated: :func:`layout_for`
    checks them in vLLM's order). The memory budget and ``max_model_len`` are not here: they
    change on every slider move, the layout does not depend on them, and
    :func:`planner.engines.vllm.vllm_capacity` takes them beside these."""

    tp: int = 1  # --tensor-parallel-size
    kv_cache_dtype: str = "auto"  # --kv-cache-dtype
    block_size: int | None = None  # --block-size (None: the block the backend prefers)
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS  # --max-num-batched-tokens
    version: str = DEFAULT_VLLM_VERSION  # the release whose rules apply (a key of RULES)
    prefix_caching: bool = True  # --enable-prefix-caching (on by default) / --no-enable-prefix-caching
    speculative_layers: int = 0  # draft / MTP layers cached beside the model

    def memo_key(self) -> tuple:
        """The settings as a plain tuple, for the memos' keys: hashed in C and charged by the
        memos' byte budgets like the separate arguments they replace."""
        return (self.tp, self.kv_cache_dtype, self.block_size, self.max_num_batched_tokens, self.version, self.prefix_caching, self.speculative_layers)


@dataclass(frozen=True, slots=True)
class Layout:
    """Everything that depends on the model and the engine settings, not on memory or length."""

    rules: Rules
    tp: int
    kv_cache_dtype: str
    batched: int
    in_flight: int
    prefix_caching: bool
    align: bool  # prefix caching on a hybrid: states held by the rule below
    state: StateRule
    split: tuple[tuple[Bucket, int], ...]  # each spec's bucket and the groups it splits into
    fit: tuple[Bucket, ...]  # 0.10: every layer's own spec, for the fit check
    group_size: int
    bytes_per_block: int
    notes: tuple[str, ...]
    block_size: int = 0  # the pool's block size where groups keep blocks of their own (DeepSeek-V4); 0: the smallest


_LAYOUTS = ByteBudgetCache(8 << 20)  # layouts by config hash and engine settings, bounded in bytes


def layout_for(config: dict, geo: ModelGeometry, settings: VllmSettings) -> Layout:
    """The layout of this model under these settings (memoised by config hash and settings).

    Raises:
        PlannerError: a setting out of range, an unknown version or KV dtype.
        EngineRefusal: what vLLM refuses before it sizes the pool (field ``model``: an architecture
            this release cannot run; ``tp``, ``engine``, ``kv_cache_dtype``, ``block_size``: a setting).
    """
    return memoised(_LAYOUTS, (geo.config_hash, *settings.memo_key()), lambda: _build_layout(config, geo, settings))


def _build_layout(config: dict, geo: ModelGeometry, settings: VllmSettings) -> Layout:
    tp, kv_cache_dtype, block_size, batched = settings.tp, settings.kv_cache_dtype, settings.block_size, settings.max_num_batched_tokens
    version, prefix_caching, speculative_layers = settings.version, settings.prefix_caching, settings.speculative_layers
    rules = check_architecture(geo, version, config.get("model_type"))
    require_int("tp", tp, hi=4096)
    require_int("max_num_batched_tokens", batched, hi=1 << 31)
    if block_size is not None:
        require_int("block_size", block_size, hi=1 << 20)
    require_int("speculative_layers", speculative_layers, lo=0, hi=1024)
    planner_dtype = dsv4_kv_dtype(kv_cache_dtype) if geo.compressed is not None else planner_kv_dtype(kv_cache_dtype, config)
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
        return _dsv4_layout(geo, rules, settings, planner_dtype)
    specs = speculative_specs(unbound_windows(kv_specs(geo, planner_dtype, tp, "vllm"), geo, cfg), speculative_layers)
    mla = geo.mla is not None
    block = block_size or default_block(geo, mla, planner_dtype == "fp8", kv_cache_dtype != "fp8_e5m2", rules.version)
    states = state_pages(geo, cfg, tp, rules.nemotron_ssm_dtype) if hybrid else []
    state_pad, state_block = None, block
    if states and specs:
        chunk = cfg_int(cfg, ("mamba_chunk_size", "chunk_size"), 2048)  # ModelConfig.get_mamba_chunk_size: 2048 for Mamba-1
        block, state_pad, state_block = align_hybrid_block(specs, states, block, mla, rules, mode, chunk)
    state = StateRule(mode, rules.align_states, state_block)
    # 0.10 checks the fit on each layer's own spec, before chunked layers are made full
    fit = tuple(unified_buckets(geo, specs, states, state_pad, block, rules)) if rules.fit_check_per_layer else ()
    if rules.chunked_as_full:
        specs = chunked_as_full(specs)
    buckets = unified_buckets(geo, specs, states, state_pad, block, rules)
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
    return Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching and (align or not hybrid), align, state, split, fit, group_size, bytes_per_block, tuple(notes))


def _dsv4_layout(geo: ModelGeometry, rules: Rules, settings: VllmSettings, planner_dtype: str) -> Layout:
    """DeepSeek-V4 on a Hopper GPU (vLLM 0.33 models/deepseek_v4, the FlashMLA attention class): its
    caches in the order the layers register them (:func:`dsv4_caches`), packed into groups as
    ``_get_packed_kv_cache_groups`` does (:func:`packed_split`); one block spans the widest group."""
    tp, kv_cache_dtype, block_size, batched = settings.tp, settings.kv_cache_dtype, settings.block_size, settings.max_num_batched_tokens
    prefix_caching, speculative_layers = settings.prefix_caching, settings.speculative_layers
    if block_size is not None and block_size != DSV4_BLOCK:
        raise EngineRefusal("block_size", block_size, f"DeepSeek-V4's sparse MLA and indexer kernels (FLASHMLA_SPARSE_DSV4, DEEPSEEK_V4_INDEXER) take {DSV4_BLOCK}-token blocks; other block sizes are not modelled here")
    notes = []
    if speculative_layers:
        notes.append("DeepSeek-V4's MTP layers (DeepSeekV4MTP) are not counted: the figure leaves out their caches")
    specs = kv_specs(geo, planner_dtype, tp, "vllm")
    split = packed_split(dsv4_caches(geo, specs, DSV4_BLOCK))
    bytes_per_block = max(b.page_bytes if b.members else b.layers * b.page_bytes for b, _ in split)
    # packed groups are not padded to a common layer count (group size 0): a block spans the widest group
    no_state = StateRule("none", rules.align_states, DSV4_BLOCK)  # no Mamba state in DeepSeek-V4
    return Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching, False, no_state, split, (), 0, bytes_per_block, tuple(notes), DSV4_BLOCK)


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
