"""Number formats (planner/units.py): one function a kind of figure, each checked by hand."""

from __future__ import annotations

import re

from planner.units import (
    GIB,
    fmt_byte_count,
    fmt_bytes,
    fmt_bytes_exact,
    fmt_limit,
    fmt_money,
    fmt_ms,
    fmt_ms_measured,
    fmt_ms_rounded,
    fmt_ms_step,
    fmt_num,
    fmt_value,
    gib,
    mib,
)


def test_sizes_at_a_glance():
    assert fmt_bytes(1000) == "1,000 B"
    assert fmt_bytes(1234) == "1.21 KiB"  # 1,234 / 1,024 = 1.205
    assert fmt_bytes(335_544_320) == "320 MiB"  # 320 x 1,048,576
    assert fmt_bytes(16_059_990_016) == "14.96 GiB"  # / 2^30 = 14.957
    assert fmt_bytes(10_093_173_145) == "9.4 GiB"  # / 2^30 = 9.39999...
    assert fmt_bytes(1_536 * 1024**3) == "1.5 TiB"
    assert fmt_bytes(5 << 50) == "5 PiB"
    assert fmt_bytes(None) == "–" and fmt_bytes(None, none="n/a") == "n/a"
    assert re.fullmatch(r"-?[\d,]+(\.\d+)? (B|KiB|MiB|GiB|TiB|PiB)", fmt_bytes(-3 << 30))


def test_exact_sizes():
    assert fmt_bytes_exact(131_072) == "131,072 B (128 KiB)"  # 131,072 / 1,024 = 128
    assert fmt_bytes_exact(335_544_320) == "335,544,320 B (320 MiB)"
    assert fmt_bytes_exact(512) == "512 B"
    assert fmt_byte_count(4096) == "4,096 B" and fmt_byte_count(None) == "n/a"
    assert gib(3 * GIB) == 3.0 and mib(GIB) == 1024.0


def test_numbers_and_bounds():
    assert fmt_num(1234567.5) == "1,234,567.5" and fmt_num(179) == "179" and fmt_num(2.0) == "2"
    assert fmt_num(0.005, 2) in ("0.01", "0")  # at most 2 decimals, whatever the rounding of the half
    assert fmt_limit(4096) == "4,096" and fmt_limit(1e-6) == "1e-06" and fmt_limit(1e20) == "1e+20"
    assert fmt_value(None) == "(none)" and fmt_value(True) == "yes" and fmt_value(4096) == "4,096"
    assert fmt_value(16.0) == "16" and fmt_value(0.3) == "0.3" and fmt_value("bf16") == "bf16"


def test_times():
    assert fmt_ms(7.8788) == "7.88 ms" and fmt_ms(4102.59) == "4,102.6 ms" and fmt_ms(None) == "–"
    assert fmt_ms_step(450) == "450.0 ms" and fmt_ms_step(2560) == "2,560.0 ms"
    assert fmt_ms_measured(0.123456) == "0.1235 ms" and fmt_ms_measured(1234.5) == "1,234 ms" and fmt_ms_measured(None) == "n/a"
    assert fmt_ms_measured(12345.6) == "12,346 ms" and fmt_ms_measured(5115.08) == "5,115 ms"  # no "1.235e+04 ms" (a long CPU probe prefill)
    assert fmt_ms_rounded(1200.4) == "1,200 ms" and fmt_ms_rounded(2.54) == "2.5 ms"


def test_money():
    assert fmt_money(1234.5) == "$1,234.50" and fmt_money(0) == "$0.00"
    assert fmt_money(0.042131) == "$0.04213"  # 4 significant digits under a dollar
    assert fmt_money(None) == "–"


def test_no_formatter_outside_units():
    # a local byte / time / money formatter is how the eight byte and six millisecond formatters
    # grew apart; their names are the tell
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"_?(fmt|human)(_\w+)?|_(ms|bytes|money|gib|mib)")
    found = []
    for path in [*(root / "planner").rglob("*.py"), *(root / "pages").rglob("*.py"), root / "app.py"]:
        if path.name == "units.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            returns = ast.unparse(node.returns) if isinstance(node, ast.FunctionDef) and node.returns else "str"
            if isinstance(node, ast.FunctionDef) and pattern.fullmatch(node.name) and returns == "str":  # a checker returning a number is no formatter
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not found, found
