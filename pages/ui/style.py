"""The app's few style rules (applied once per run from ``app.py``).

Streamlit cuts long metric values, labels, deltas and badges with an ellipsis; a planner's
numbers must never be cut, so they wrap instead (checked in Chromium at 1280 and 390 px by
``tests/test_browser.py``).
"""

from __future__ import annotations

import streamlit as st

# The first Plan run's hidden button that asks for the rest of the page (clicked by its script,
# pages/ui/results.py first_paint_pause): one key for the button and the rule that hides it.
FIRST_PAINT_KEY = "first_paint"

CSS = """
<style>
[data-testid="stMetricValue"], [data-testid="stMetricValue"] *,
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *,
[data-testid="stMetricDelta"], [data-testid="stMetricDelta"] *,
.stMarkdownBadge {
  white-space: normal !important;
  overflow: visible !important;
  text-overflow: clip !important;
  overflow-wrap: anywhere;
}
[data-testid="stMetricValue"] { font-size: clamp(1.5rem, 2.4vw, 2.1rem); }
/* the last good plan under an input error: greyed, so it does not read as the current answer */
.st-key-stale_results { opacity: 0.45; filter: grayscale(1); }
/* the first run's button that asks for the rest of the page: clicked by its script (pages/ui/results.py) */
"""
CSS += f".st-key-{FIRST_PAINT_KEY} {{ display: none; }}\n</style>\n"


def apply() -> None:
    st.html(CSS)


# Price columns of a table, as prices: "$9.90" an hour and "$0.123" a million tokens (the Size page's
# tables and the Plan page's pools card; bare they read 9.9 beside 14.75)
MONEY_COLUMNS = {"$/h": st.column_config.NumberColumn("$/h", format="$%.2f"), "$/M tokens": st.column_config.NumberColumn("$/M tokens", format="$%.3f")}
# The Size table's p95s, each to one rule: whole ms with thousands separators, ITL to 0.1 ms (the
# grid's default dropped a trailing zero: "8.4, 5.6, 3" in one column)
LATENCY_COLUMNS = {"p95 TTFT ms": st.column_config.NumberColumn("p95 TTFT ms", format="localized"), "p95 ITL ms": st.column_config.NumberColumn("p95 ITL ms", format="%.1f")}
