"""Computed results are frozen dataclasses (cheap to build on every slider move).

Inputs are pydantic models (validated once); results built from validated inputs are plain
frozen dataclasses with the same ``model_dump()`` call, so callers treat both alike.
"""

from __future__ import annotations

from dataclasses import asdict, fields


class Result:
    """Mixin for frozen result dataclasses: ``model_dump()`` like a pydantic model."""

    __slots__ = ()

    def model_dump(self, **_: object) -> dict:
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name.startswith("_"):  # private derived state (e.g. a memo), not a result
                continue
            value = getattr(self, f.name)
            if hasattr(value, "model_dump"):
                value = value.model_dump(mode="json") if not isinstance(value, Result) else value.model_dump()
            elif hasattr(value, "__dataclass_fields__"):
                value = asdict(value)
            out[f.name] = value
        return out
