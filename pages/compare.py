"""Compare page: two to four plans side by side, a shared chart, the better plan named per row.

Each column takes the Plan page's inputs and overrides the model, GPU, GPU count, TP, KV dtype
and runtime. The columns live in the session (they survive page switches) and in the address
bar (the link reopens the same comparison). Every number comes from :mod:`planner`.
"""

from __future__ import annotations

import streamlit as st

from pages.ui import comparison, export, models, results, state, urlstate
from pages.ui.safe_text import md
from planner.compare import LETTERS, Column, plan_name
from planner.share import share_url


def main() -> None:
    state.enter_page("compare")
    urlstate.restore_from_query_params("compare")  # the base plan of a shared link, on the session's first run
    urlstate.restore_compare_from_query_params()
    st.title("Compare plans")
    base = dict(state.plan_values())
    ref, _model, _notes = models.active_model()
    current_label = ref.name if ref.kind == "preset" and ref.name else ref.label()
    st.caption(f"Every column uses the Plan page's inputs (context, headroom, load, SLOs, price…) for **{md(current_label)}** and overrides the model, GPU, TP, KV dtype and runtime. A new column starts as a copy of A; the table's first row says what each one changes.")
    urlstate.render_restore_notice()  # one notice: the plan's, the columns' and any dropped key
    saved = state.compare_state(base)
    comparison.seed_widgets(saved["columns"], saved["n"])
    n = st.segmented_control("Plans", [2, 3, 4], key="cmp_n", required=True, on_change=comparison.grow_from_a, format_func=lambda k: f"{k} plans") or 2
    names = models.preset_names()
    shown, refs, columns = [], [], []
    for i, box in enumerate(st.columns(n, border=True)):
        with box:
            st.subheader(f"Plan {LETTERS[i]}")
            slots = comparison.column_controls(i, current_label, names)
            col = Column(**comparison.read_column(i))
            plan, col_ref, label = comparison.column_plan(col, base, slots)
            if plan is not None:
                comparison.column_metrics(plan, wide=n <= 2)
            else:
                st.caption("No plan for these settings.")
            shown.append((plan_name(LETTERS[i], label, plan), plan, label))
            refs.append(col_ref)
            columns.append(col)
    st.session_state[state.COMPARE_KEY] = {"n": n, "columns": [comparison.read_column(i) for i in range(n)] + saved["columns"][n:]}
    current, _err = state.current()
    link = None
    if current is not None:
        params = urlstate.compare_params(current.ref, current.plan.inputs, current.config, columns)
        urlstate.sync_query_params(params)
        link = share_url(export.base_url(), params)
    if any(p is not None for _, p, _ in shown):
        results.safe(comparison.render_comparison_charts, shown, what="the comparison chart")
        results.safe(comparison.comparison_table, shown, what="the comparison table")
        if link:
            st.caption("The address bar holds this comparison: share it to reopen the same plans.")
            results.safe(comparison.comparison_pdf_button, shown, refs, link, what="the comparison PDF")


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {md(exc)}", icon=":material/error:")
