"""vLLM's start-up KV-cache sizing: ``num_blocks``, the fit check, the two log figures.

:func:`vllm_capacity` follows ``EngineCore._initialize_kv_caches`` (vllm/v1/engine/core.py)
once the layout is known (:mod:`planner.engines.vllm.layout`): the maximum length check
(``_get_and_verify_max_len``), the groups at ``max_model_len``, ``num_blocks``, the refusal
check (``_check_enough_kv_cache_memory``) and the two numbers of the start-up log
(``get_kv_cache_capacity``, vllm/v1/core/kv_cache_utils.py); memoised by config hash,
memory, length and settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.engines.common import EngineRefusal, memoised, require_int
from planner.engines.vllm.layout import Layout, SettingsKey, VllmSettings, layout_for
from planner.engines.vllm.messages import NO_MEMORY, max_len_exceeded, not_enough_memory
from planner.engines.vllm.rules import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, RULES, Rules
from planner.engines.vllm.specs import STATE_KINDS, StatePage
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, parse_geometry
from planner.limits import ByteBudgetCache
from planner.results import Result


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
    # the settings as VllmSettings.memo_key() orders them (the object is built only with a new layout)
    key: SettingsKey = (tp, kv_cache_dtype, block_size, max_num_batched_tokens, vllm_version, prefix_caching, speculative_layers)
    return memoised(_MEMO, (geo.config_hash, available_kv_bytes, max_model_len, *key), lambda: _capacity(config, geo, key, available=available_kv_bytes, max_model_len=max_model_len))


def _result_bytes(value: object) -> int:
    """What one memoised result holds, charged without walking it (``size_of`` cost more than the
    sizing itself on every slider move): measured with ``size_of`` at 1.1-1.7 kB for 1-6 groups, so
    1 kB, 256 B a group and 2 B a character of text (log lines, notes, a refusal's reason) over-count."""
    if isinstance(value, VllmCapacity):
        return 1024 + 256 * len(value.groups) + 2 * sum(len(text) for text in (*value.log_lines, *value.notes))
    return 1024 + 2 * len(str(getattr(value, "reason", value)))


_MEMO = ByteBudgetCache(8 << 20, sizer=_result_bytes)  # results by config hash and settings, bounded in bytes (planner/limits.py)


def _capacity(config: dict, geo: ModelGeometry, key: SettingsKey, *, available: int, max_model_len: int | None) -> VllmCapacity:
    if isinstance(available, bool) or not isinstance(available, int):
        raise PlannerError("available_kv_bytes", available, "must be an integer number of bytes")
    try:  # the memoised layout refuses an architecture first, as vLLM resolves it before anything else
        layout, held = layout_for(config, geo, key), None
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
        raise EngineRefusal("max_model_len", max_model_len, max_len_exceeded(RULES[VllmSettings.from_key(key).version], config, geo.model_type, max_model_len, derived))
    if held is not None:
        raise held
    return _assemble(layout, available, max_model_len)


def _assemble(layout: Layout, available: int, max_model_len: int) -> VllmCapacity:
    """The layout at ``max_model_len`` with ``available`` bytes: the groups, the fit check,
    ``num_blocks`` and the two figures of the start-up log."""
    rules, in_flight, state_rule, bytes_per_block = layout.rules, layout.in_flight, layout.state, layout.bytes_per_block
    groups, per_request = _groups_at(layout, max_model_len)

    def needed_at(length: int) -> int:  # bytes one request of this length needs, as the release's fit check counts them
        if rules.fit_check_per_layer:  # 0.10: every layer's own pages, no group padding
            return sum(b.layers * b.page_bytes * b.blocks_at(length, in_flight, state_rule) for b in layout.fit)
        if length == max_model_len:  # the blocks one request reserves, counted by _groups_at
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
    # positional, in VllmCapacity's field order: by keyword this costs about 0.5 us on every slider move
    return VllmCapacity(
        rules.version, layout.tp, layout.kv_cache_dtype, min_block, max_model_len, layout.batched, layout.in_flight, layout.prefix_caching, available,
        groups, layout.group_size, bytes_per_block, num_blocks, per_request, concurrency, tokens, lines, layout.notes,
    )


def _groups_at(layout: Layout, max_model_len: int) -> tuple[tuple[EngineGroup, ...], int]:
    """Every KV-cache group with the blocks one request of ``max_model_len`` tokens holds in it,
    and the blocks that request reserves in all of them."""
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
        for i in range(n):  # 0.11+: layers[i::n] go to the i-th group; 0.10: layers[i * size:(i + 1) * size]
            layers = len(range(i, b.layers, n)) if rules.round_robin_groups else min(layout.group_size, b.layers - i * layout.group_size)
            # positional, in EngineGroup's field order: by keyword this costs about 0.3 us a group on every slider move
            groups.append(EngineGroup(b.kind, layers, block_size, b.page_bytes, blocks, window))
    return tuple(groups), per_request


def _check_fits(rules: Rules, available: int, bytes_per_block: int, max_model_len: int, needed_at: Callable[[int], int]) -> None:
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
    raise EngineRefusal("max_model_len", max_model_len, not_enough_memory(rules, max_model_len, needed, check, estimate), estimate)
