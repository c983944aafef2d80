"""Typed errors shared by every module.

Every error the planner raises for bad input is a :class:`PlannerError` carrying the field,
the offending value and the reason, so the CLI can print one line and the app can show the
message next to the widget that caused it.
"""

from __future__ import annotations


class PlannerError(ValueError):
    """Bad input: ``field`` names what was wrong, ``value`` what was given, ``reason`` why."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field}={shown}: {reason}")


class ConfigError(PlannerError):
    """A model config that cannot be turned into a trustworthy geometry."""
