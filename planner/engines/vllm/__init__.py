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
block-outermost as ``_get_packed_kv_cache_groups`` does (:func:`packed_split`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.engines.common import BudgetTerm, EnginePreview, EngineRefusal, memoised, require_int
from planner.engines.vllm.budget import CUDA_GRAPH_BYTES, NCCL_BYTES, NON_TORCH_BYTES, SAMPLER_SEQS, VllmBudget, predict_budget
from planner.engines.vllm.groups import Bucket, align_hybrid_block, unified_buckets
from planner.engines.vllm.messages import DOCS, NO_MEMORY, max_len_exceeded, not_enough_memory
from planner.engines.vllm.packed import dsv4_caches, packed_split
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, DROPPED, NOT_REGISTERED, RULES, VLLM_VERSIONS, Rules, check_architecture
from planner.engines.vllm.specs import (
    DSV4_BLOCK,
    DSV4_STATE_BLOCK,
    DSV4_SWA_BLOCK,
    FLASH_ATTN_BLOCK,
    FLASHMLA_BLOCK,
    GDN_CHECKPOINT_ALIGNMENT,
    KDA_CHECKPOINT_ALIGNMENT,
    KV_CACHE_DTYPES,
    MINIMAX_M3_SPARSE_BLOCK,
    SM90_FA4_FP8_BLOCK,
    STATE_KINDS,
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
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, parse_geometry, text_config
from planner.hardware import GIB
from planner.kv import AUTO, kv_specs
from planner.limits import ByteBudgetCache
from planner.results import Result

__all__ = [
    "CUDA_GRAPH_BYTES", "DEFAULT_MAX_NUM_BATCHED_TOKENS", "DEFAULT_VLLM_VERSION", "DOCS", "DROPPED", "DSV4_BLOCK", "DSV4_STATE_BLOCK", "DSV4_SWA_BLOCK", "FLASHMLA_BLOCK",
    "FLASH_ATTN_BLOCK", "GDN_CHECKPOINT_ALIGNMENT", "GIB", "KDA_CHECKPOINT_ALIGNMENT", "KV_CACHE_DTYPES", "MINIMAX_M3_SPARSE_BLOCK", "NCCL_BYTES", "NON_TORCH_BYTES",
    "NOT_REGISTERED", "RULES", "SAMPLER_SEQS", "SM90_FA4_FP8_BLOCK", "STATE_KINDS", "VLLM_VERSIONS", "BudgetTerm", "EngineGroup", "EngineRefusal", "Rules", "StatePage",
    "VllmBudget", "VllmCapacity", "VllmPreview", "predict_budget", "serve_command", "vllm_capacity", "vllm_preview",
]  # fmt: skip


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
    def kv_pool_bytes(self) -> int:
        """Bytes of the pool vLLM allocates on one GPU: ``num_blocks`` blocks across every group."""
        return self.num_blocks * self.bytes_per_block

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
    return memoised(_MEMO, _capacity, config, geo, *args)


def _result_bytes(value: object) -> int:
    """What one memoised result holds, charged without walking it (``size_of`` cost more than the
    sizing itself on every slider move): measured with ``size_of`` at 1.1-1.7 kB for 1-6 groups, so
    1 kB, 256 B a group and 2 B a character of text (log lines, notes, a refusal's reason) over-count."""
    if isinstance(value, VllmCapacity):
        return 1024 + 256 * len(value.groups) + 2 * sum(len(text) for text in (*value.log_lines, *value.notes))
    return 1024 + 2 * len(str(getattr(value, "reason", value)))


_MEMO = ByteBudgetCache(8 << 20, sizer=_result_bytes)  # results by config hash and settings, bounded in bytes (planner/limits.py)


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
    require_int("max_model_len", max_model_len, hi=1 << 31)
    if derived is not None and max_model_len > derived:
        raise EngineRefusal("max_model_len", max_model_len, max_len_exceeded(RULES[version], config, geo.model_type, max_model_len, derived))
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
    state: StateRule
    split: tuple[tuple[Bucket, int], ...]  # each spec's bucket and the groups it splits into
    fit: tuple[Bucket, ...]  # 0.10: every layer's own spec, for the fit check
    group_size: int
    bytes_per_block: int
    notes: tuple[str, ...]
    block_size: int = 0  # the pool's block size where groups keep blocks of their own (DeepSeek-V4); 0: the smallest


_LAYOUTS = ByteBudgetCache(8 << 20)  # layouts by config hash and engine settings, bounded in bytes


def _layout(config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers) -> _Layout:
    return memoised(_LAYOUTS, _build_layout, config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers)


def _build_layout(config, geo, tp, kv_cache_dtype, block_size, batched, version, prefix_caching, speculative_layers) -> _Layout:
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
        return _dsv4_layout(geo, rules, tp, kv_cache_dtype, block_size, batched, prefix_caching, speculative_layers, planner_dtype)
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
    return _Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching and (align or not hybrid), align, state, split, fit, group_size, bytes_per_block, tuple(notes))


def _dsv4_layout(geo, rules, tp, kv_cache_dtype, block_size, batched, prefix_caching, speculative_layers, planner_dtype) -> _Layout:
    """DeepSeek-V4 on a Hopper GPU (vLLM 0.33 models/deepseek_v4, the FlashMLA attention class): its
    caches in the order the layers register them (:func:`dsv4_caches`), packed into groups as
    ``_get_packed_kv_cache_groups`` does (:func:`packed_split`); one block spans the widest group."""
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
    return _Layout(rules, tp, kv_cache_dtype, batched, rules.concurrent_batches * batched, prefix_caching, False, no_state, split, (), 0, bytes_per_block, tuple(notes), DSV4_BLOCK)


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


def _check_fits(rules: Rules, available: int, bytes_per_block: int, max_model_len: int, needed_at) -> None:
    """``_check_enough_kv_cache_memory``: one request at max_model_len must fit (0.33 keeps the
    null block out of the budget); the message is vLLM's, with its binary-searched estimate, in
    the words of the release (vllm/v1/core/kv_cache_utils.py; kv_cache_planning.py in 0.33)."""
    check = available - bytes_per_block if rules.reserve_null_block else available
    if check <= 0:
        raise EngineRefusal("available_kv_bytes", available, NO_MEMORY[rules.wording])
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
    raise EngineRefusal("max_model_len", max_model_len, not_enough_memory(rules, max_model_len, needed, check, estimate))


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
class VllmPreview(EnginePreview):
    """The Plan page's start-up preview: vLLM's predicted budget, its log lines, the command."""


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
