"""What every engine's start-up sizing returns or raises, whichever engine it models.

An engine module (:mod:`planner.engines.vllm`; SGLang's beside it) predicts what its engine
computes and prints at start-up. Each keeps its engine's own names for its own numbers (vLLM's
``num_blocks``, SGLang's ``max_total_num_tokens``) in one frozen result, and shares these:

* :class:`~planner.errors.EngineRefusal` (defined with every user error in :mod:`planner.errors`):
  the engine would not start; ``reason`` is the engine's own message.
* :class:`BudgetTerm` and :class:`EngineBudget`: the memory the engine will find for its KV
  cache on one GPU, term by term, each term with its source.
* :class:`EngineCapacity`: what every engine's result answers in common terms (pool bytes,
  tokens, concurrency, the start-up log lines, notes).
* :class:`EnginePreview`: the Plan page's start-up card (budget, log lines or the refusal, the
  command line that reproduces the plan).
* :func:`memoised` and :func:`require_int`: the memo every engine keeps by config hash and
  settings (refusals included), and the integer check its settings go through.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from planner.errors import EngineRefusal, PlannerError  # EngineRefusal lives in planner.errors; importable here too
from planner.limits import ByteBudgetCache
from planner.results import Result
from planner.units import GIB

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BudgetTerm(Result):
    """One line of a memory budget on one GPU."""

    name: str
    bytes: int  # positive: what the budget starts from; negative: what start-up takes from it
    source: str  # where the figure comes from: a catalog, an engine default, an estimate, a measurement


@dataclass(frozen=True, slots=True)
class EngineBudget(Result):
    """Predicted memory an engine finds for its KV cache per GPU: what it may use less what start-up takes."""

    terms: tuple[BudgetTerm, ...]
    available_kv_bytes: int

    def summary(self) -> dict:
        return {"available_kv_bytes": self.available_kv_bytes, "available_kv_gib": round(self.available_kv_bytes / GIB, 2), "terms": [t.model_dump() for t in self.terms]}


@runtime_checkable
class EngineCapacity(Protocol):
    """What every engine's start-up result answers, as fields or properties of its own result.

    ``kv_pool_bytes``: the KV pool the engine allocates on one GPU; ``kv_cache_tokens``: the
    tokens that pool holds as the engine logs them; ``max_concurrency``: requests at the maximum
    length it holds at once; ``log_lines``: the start-up lines, exactly as the engine prints
    them; ``notes``: what the planner says beside them (a setting it does not check against the
    engine's own code, a default the engine changes).
    """

    @property
    def kv_pool_bytes(self) -> int: ...

    @property
    def kv_cache_tokens(self) -> int: ...

    @property
    def max_concurrency(self) -> float: ...

    @property
    def log_lines(self) -> tuple[str, ...]: ...

    @property
    def notes(self) -> tuple[str, ...]: ...

    def summary(self) -> dict: ...


@dataclass(frozen=True, slots=True)
class EnginePreview(Result):
    """The Plan page's start-up preview under one engine: its predicted budget, the log lines it will
    print (none when it refuses), its refusal and the command line that reproduces the plan."""

    budget: EngineBudget
    log_lines: tuple[str, ...]
    refusal: str | None
    command: str


def memoised(memo: ByteBudgetCache, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` memoised under ``key`` (an engine's key: the config's hash and its settings as
    a plain tuple); a refusal is remembered too and raised afresh on every hit.

    Raises:
        EngineRefusal: what ``compute`` raised for this key, now or on an earlier call.
    """
    hit = memo.get(key)
    if hit is None:
        try:
            hit = compute()
        except EngineRefusal as exc:  # kept without its traceback, whose frames hold the whole geometry
            hit = EngineRefusal(exc.field, exc.value, exc.reason, exc.estimated_max_model_len)
        memo.put(key, hit)
    if isinstance(hit, EngineRefusal):
        raise EngineRefusal(hit.field, hit.value, hit.reason, hit.estimated_max_model_len)
    return hit


def require_int(field: str, value: object, *, lo: int = 1, hi: int = 1 << 40) -> int:
    """``value`` when it is an integer (not a bool) from ``lo`` to ``hi``.

    Raises:
        PlannerError: anything else, naming ``field`` and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise PlannerError(field, value, f"must be an integer from {lo:,} to {hi:,}")
    return value
