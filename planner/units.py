"""Units and number formats: every place the planner shows a size, a time, a price or a bound
(the app, the CLI, the PDF, error messages) formats it here, so one quantity reads the same on
every surface.

Sizes are binary (``KiB`` = 1,024 B; ``GiB`` = 2**30 B, what ``nvidia-smi`` and vLLM's logs call
GiB); numbers carry thousands separators. ``None`` shows as a dash (or the ``none`` text a
caller passes, such as "n/a" on the Probe page).

=====================  ==============================  ===========================================
formatter              example                         for
=====================  ==============================  ===========================================
``fmt_num``            ``1,234.5``, ``179``            counts and plain figures (at most 2 decimals)
``fmt_bytes``          ``320 MiB``, ``1.21 KiB``       a size at a glance (metrics, charts, PDF)
``fmt_bytes_exact``    ``131,072 B (128 KiB)``         a size whose every byte matters (formulas,
                                                       the PDF's tables, ``inspect``, hovers)
``fmt_byte_count``     ``4,096 B``                     exact bytes only (probe differences)
``fmt_ms``             ``7.88 ms``, ``4,102.6 ms``     a latency figure (2 decimals under 100 ms)
``fmt_ms_step``        ``450.0 ms``                    a formula step: every term to 0.1 ms, so a
                                                       sum reads as the sum of its terms
``fmt_ms_measured``    ``0.1234 ms``, ``1,234 ms``     a measured time (4 significant digits)
``fmt_ms_rounded``     ``50 ms``, ``2.5 ms``           a target in a sentence (whole ms from 10 ms)
``fmt_money``          ``$1,234.50``, ``$0.04213``     a price (4 significant digits under $1)
``fmt_value``          ``4,096``, ``yes``, ``(none)``  any input value in the PDF's inputs table
``fmt_limit``          ``4,096``, ``1e-06``            a bound in a message
=====================  ==============================  ===========================================
"""

from __future__ import annotations

import math

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
NONE_SHOWN = "–"  # an absent figure
UNBOUNDED = "unbounded"  # an infinite wait: a saturated queue (utilisation at or above 1)

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")

__all__ = [
    "GIB", "KIB", "MIB", "NONE_SHOWN", "TIB", "fmt_byte_count", "fmt_bytes", "fmt_bytes_exact", "fmt_limit", "fmt_money", "fmt_ms",
    "fmt_ms_measured", "fmt_ms_rounded", "fmt_ms_step", "fmt_num", "fmt_value", "gib", "mib",
]


# --------------------------------------------------------------------------- conversions


def gib(n: float) -> float:
    """Bytes to GiB (a chart axis)."""
    return n / GIB


def mib(n: float) -> float:
    """Bytes to MiB (a chart axis)."""
    return n / MIB


# --------------------------------------------------------------------------- numbers


def fmt_num(value: float | None, decimals: int = 2) -> str:
    """Thousands separators, at most ``decimals`` decimals, no trailing zeros: 1234.5 -> "1,234.5"."""
    if value is None:
        return NONE_SHOWN
    if float(value).is_integer():
        return f"{int(value):,}"
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_limit(x: float) -> str:
    """A bound as a message shows it: whole numbers with separators ("4,096"), others by ``g``."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def fmt_value(x: object) -> str:
    """Any input value in a table: "(none)", "yes"/"no", "4,096", "0.9", or the text itself."""
    if x is None:
        return "(none)"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.0f}" if x.is_integer() and abs(x) < 1e15 else f"{x:,.6g}"
    return str(x)


# --------------------------------------------------------------------------- bytes


def fmt_bytes(n: float | None, decimals: int = 2, none: str = NONE_SHOWN) -> str:
    """Binary units with thousands separators: 1234 -> "1.21 KiB", 335544320 -> "320 MiB", 1000 -> "1,000 B"."""
    if n is None:
        return none
    size = abs(n)
    unit = 0
    while size >= 1024 and unit < len(_BINARY_UNITS) - 1:
        size /= 1024
        unit += 1
    sign = "-" if n < 0 else ""
    if unit == 0:
        return f"{sign}{int(size):,} B"
    return f"{sign}{fmt_num(size, decimals)} {_BINARY_UNITS[unit]}"


def fmt_bytes_exact(n: int) -> str:
    """Exact bytes, then binary units: "131,072 B (128 KiB)"; plain "512 B" under 1 KiB."""
    return f"{int(n):,} B" + (f" ({fmt_bytes(n)})" if abs(n) >= KIB else "")


def fmt_byte_count(n: int | None, none: str = "n/a") -> str:
    """Exact bytes only: "4,096 B"."""
    return none if n is None else f"{n:,} B"


# --------------------------------------------------------------------------- times


def fmt_ms(ms: float | None, none: str = NONE_SHOWN) -> str:
    """A latency: "7.88 ms" under 100 ms, "4,102.6 ms" under a minute, then in minutes ("2.5 min")
    and from an hour in hours ("520,519.2 h"): a refused 10M-sequence plan's TTFT reads as time."""
    if ms is None:
        return none
    if not math.isfinite(ms):
        return UNBOUNDED if ms > 0 else none
    size = abs(ms)
    if size < 100:
        return f"{ms:,.2f} ms"
    if size < 60_000:
        return f"{ms:,.1f} ms"
    if size < 3_600_000:
        return f"{ms / 60_000:,.1f} min"
    return f"{ms / 3_600_000:,.1f} h"


def ms_whole(ms: float) -> str:
    """Whole milliseconds, no unit ("1,234"); "unbounded" for a saturated queue's infinite wait."""
    return f"{ms:,.0f}" if math.isfinite(ms) else UNBOUNDED


def fmt_ms_whole(ms: float) -> str:
    """:func:`ms_whole` with its unit ("1,234 ms"); "unbounded" for a saturated queue's infinite wait."""
    return f"{ms_whole(ms)} ms" if math.isfinite(ms) else UNBOUNDED


def fmt_ms_step(ms: float) -> str:
    """A term or a total of a formula step, to 0.1 ms: "2,560.0 ms"."""
    return f"{ms:,.1f} ms"


def fmt_ms_measured(ms: float | None, none: str = "n/a") -> str:
    """A measured time to 4 significant digits, whole ms from 1,000 ms: "0.1234 ms", "1,234 ms",
    "12,346 ms" (``,.4g`` alone wrote 12,345.6 ms as "1.235e+04 ms")."""
    if ms is None:
        return none
    return f"{ms:,.0f} ms" if abs(ms) >= 1000 else f"{ms:,.4g} ms"


def fmt_ms_rounded(ms: float) -> str:
    """A target or a p95 in a sentence: whole ms from 10 ms ("1,200 ms"), 2 significant digits below ("2.5 ms")."""
    return f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.2g} ms"


# --------------------------------------------------------------------------- money


def fmt_money(dollars: float | None, none: str = NONE_SHOWN) -> str:
    """"$1,234.50"; four significant digits under a dollar ("$0.04213"); "–" for none."""
    if dollars is None:
        return none
    if abs(dollars) >= 1 or dollars == 0:
        return f"${dollars:,.2f}"
    return f"${dollars:.4g}"
