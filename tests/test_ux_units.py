"""Issue 27 item 7: huge latencies read in minutes and hours, not 13-digit milliseconds."""

from __future__ import annotations

from planner.units import fmt_ms


def test_fmt_ms_switches_to_minutes_and_hours():
    assert fmt_ms(59_999.0) == "59,999.0 ms"
    assert fmt_ms(90_000.0) == "1.5 min"  # 90 s
    assert fmt_ms(3_599_000.0) == "60.0 min"
    assert fmt_ms(7_200_000.0) == "2.0 h"
    # the 10M-sequence plan: TTFT 1,873,867,277,549.6 ms = 520,518.7 h
    assert fmt_ms(1_873_867_277_549.6) == "520,518.7 h"
    assert fmt_ms(-90_000.0) == "-1.5 min"
