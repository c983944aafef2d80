"""The whole context of one request: hidden components, output reserve and the model limit."""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.results import Result

MAX_TOKENS = 1 << 31


@dataclass(frozen=True, slots=True)
class ContextBudget(Result):
    """Token counts of one request, as in the seed's ContextBreakdown."""

    input_tokens: int
    reserved_output_tokens: int
    reserved_total_tokens: int
    maximum_context_tokens: int
    unreserved_tokens: int
    components: dict[str, int]


COMPONENTS = ("system_tokens", "tool_tokens", "retrieval_tokens", "history_tokens", "user_tokens")


def _count(name: str, value: object, *, positive: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerError(name, value, "must be a whole number of tokens")
    if value < 0 or (positive and value == 0):
        raise PlannerError(name, value, "must be positive" if positive else "must not be negative")
    if value > MAX_TOKENS:
        raise PlannerError(name, value, f"is absurdly large (limit {MAX_TOKENS:,} tokens)")
    return value


def context_budget(
    components: dict[str, int],
    output_tokens: int,
    maximum_context_tokens: int,
    input_tokens: int | None = None,
) -> ContextBudget:
    """Add the components (or take ``input_tokens``), reserve the output, check the model limit.

    Raises:
        PlannerError: a negative or non-integer count, zero input or output reserve, or a
            reserved total above the model's maximum context (checked before any bytes).
    """
    parts = {name: _count(name, components.get(name, 0)) for name in COMPONENTS}
    total_input = sum(parts.values()) if input_tokens is None else _count("input_tokens", input_tokens, positive=True)
    if total_input == 0:
        raise PlannerError("input_tokens", 0, "the input must be positive: give at least one context component")
    out = _count("output_tokens", output_tokens, positive=True)
    maximum = _count("max_context", maximum_context_tokens, positive=True)
    reserved = total_input + out
    if reserved > maximum:
        raise PlannerError("max_context", maximum, f"reserved total {reserved:,} tokens (input {total_input:,} + output {out:,}) exceeds the model maximum of {maximum:,}")
    return ContextBudget(
        input_tokens=total_input,
        reserved_output_tokens=out,
        reserved_total_tokens=reserved,
        maximum_context_tokens=maximum,
        unreserved_tokens=maximum - reserved,
        components=parts,
    )
