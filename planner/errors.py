"""Typed errors shared by every module.

Every error the planner raises for bad input is a :class:`PlannerError` carrying the field,
the offending value and the reason, so the CLI can print one line and the app can show the
message next to the widget that caused it.
"""

from __future__ import annotations

import math

SHOWN_CHARS = 80  # a value in a message is cut to this many characters


def shorten(value: object, width: int = SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``width`` characters; a huge integer is shown by its digit count.

    Never raises (Python refuses ``str()`` of integers over 4,300 digits).
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'-' if value < 0 else ''}<an integer of about {digits:,} digits>"
    try:
        shown = repr(value)
    except Exception:  # noqa: BLE001 - a hostile object's repr must not break the message
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= width else shown[: width - 3] + "..."


class PlannerError(ValueError):
    """Bad input: ``field`` names what was wrong, ``value`` what was given, ``reason`` why."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        name = str(field) if len(str(field)) <= SHOWN_CHARS else str(field)[: SHOWN_CHARS - 3] + "..."
        super().__init__(f"{name}={shorten(value)}: {reason}")


class ConfigError(PlannerError):
    """A model config that cannot be turned into a trustworthy geometry."""
