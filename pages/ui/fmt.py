"""Number formatting shared by every page: thousands separators, binary units, milliseconds."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_num(value: float, decimals: int = 2) -> str:
    """Thousands separators, at most ``decimals`` decimals, no trailing zeros: 1234.5 -> "1,234.5"."""
    if value is None:
        return "–"
    if float(value).is_integer():
        return f"{int(value):,}"
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_bytes(n: float | None, decimals: int = 2) -> str:
    """Binary units with thousands separators: 1234 -> "1.21 KiB", 335544320 -> "320 MiB", 1000 -> "1,000 B"."""
    if n is None:
        return "–"
    size = abs(n)
    unit = 0
    while size >= 1024 and unit < len(_UNITS) - 1:
        size /= 1024
        unit += 1
    sign = "-" if n < 0 else ""
    if unit == 0:
        return f"{sign}{int(size):,} B"
    return f"{sign}{fmt_num(size, decimals)} {_UNITS[unit]}"


def fmt_bytes_exact(n: int) -> str:
    """"320 MiB (335,544,320 B)"; plain "1,000 B" under 1 KiB."""
    return fmt_bytes(n) if abs(n) < 1024 else f"{fmt_bytes(n)} ({int(n):,} B)"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:,.2f} ms" if abs(ms) < 100 else f"{ms:,.1f} ms"


def mib(n: float) -> float:
    """Bytes to MiB (unit conversion for chart axes)."""
    return n / (1 << 20)


def gib(n: float) -> float:
    """Bytes to GiB (unit conversion for chart axes)."""
    return n / (1 << 30)



def fmt_money(dollars: float | None) -> str:
    """"$1,234.50"; four significant digits under a dollar ("$0.04213"); "–" for none."""
    if dollars is None:
        return "–"
    if abs(dollars) >= 1 or dollars == 0:
        return f"${dollars:,.2f}"
    return f"${dollars:.4g}"
