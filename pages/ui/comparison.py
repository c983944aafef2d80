"""Compare page parts: one column's controls, the comparison table with a verdict per row, the
shared chart and the comparison PDF. The rows and verdicts come from :mod:`planner.compare`."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from pages.ui import charts, models, state
from pages.ui.results import admission_badge
from pages.ui.safe_text import md
from planner.compare import CURRENT, ENGINE_SIZING, FIELDS, LETTERS, Column, compare_rows, letter_of
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_CHOICES, RUNTIMES
from planner.plan import Plan
from planner.units import fmt_bytes, fmt_money, fmt_ms, fmt_num

COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2")
BEST = "background-color: rgba(84, 162, 75, 0.28); font-weight: 600"
FIELD_SLOTS = {"model": "model", "gpu": "gpu", "device_gib": "gpu", "gpu_count": "gpu_count", "tp": "tp", "kv_dtype": "kv_dtype", "runtime": "runtime"}


def _key(name: str, i: int) -> str:
    return f"cmp_{name}_{i}"


def seed_widgets(columns: list[dict[str, Any]], n: int) -> None:
    """Widget keys from Compare's state: where absent, and all of them when the page is entered
    from another one (Streamlit may hold stale values for widgets it did not draw in between)."""
    force = state.entered_page()
    if force or "cmp_n" not in st.session_state:
        st.session_state["cmp_n"] = n
    for i, col in enumerate(columns):
        for name in FIELDS:
            if force or _key(name, i) not in st.session_state:
                st.session_state[_key(name, i)] = col[name]


def grow_from_a() -> None:
    """Callback of the plan count: a column added now starts from column A's current settings."""
    saved = st.session_state.get(state.COMPARE_KEY) or {}
    old = int(saved.get("n") or 2)
    for i in range(old, int(st.session_state.get("cmp_n") or old)):
        for name in FIELDS:
            st.session_state[_key(name, i)] = st.session_state.get(_key(name, 0))


def read_column(i: int) -> dict[str, Any]:
    return {name: st.session_state[_key(name, i)] for name in FIELDS}


def column_controls(i: int, current_label: str, names: tuple[str, ...]) -> dict[str, Any]:
    """One column's controls; returns the error slots by field."""
    st.selectbox("Model", [CURRENT, *names], key=_key("model", i), format_func=lambda n: f"Plan page: {current_label}" if n == CURRENT else models.preset_label(n))
    slot_model = st.container()
    st.selectbox("GPU", list(CATALOG), key=_key("gpu", i), format_func=lambda g: f"{g} ({CATALOG[g].memory_gib:g} GiB)")
    slot_gpu = st.container()
    a, b = st.columns(2)
    with a:
        st.number_input("GPUs", min_value=1, max_value=4096, step=1, key=_key("gpu_count", i))
    with b:
        st.number_input("TP", min_value=1, max_value=4096, step=1, key=_key("tp", i))
    slot_count = slot_tp = st.container()  # errors below both, at the column's full width
    a, b = st.columns(2)
    with a:
        st.selectbox("KV dtype", list(KV_DTYPE_CHOICES), key=_key("kv_dtype", i), help="auto: what the checkpoint declares, as vLLM's --kv-cache-dtype auto")
    with b:
        st.selectbox("Runtime", list(RUNTIMES), key=_key("runtime", i))
    slot_kv = slot_rt = st.container()
    return {"model": slot_model, "gpu": slot_gpu, "gpu_count": slot_count, "tp": slot_tp, "kv_dtype": slot_kv, "runtime": slot_rt}


def column_plan(col: Column, base: dict[str, Any], slots: dict[str, Any]) -> tuple[Plan | None, Any, str]:
    """The plan of one column (the Plan page's inputs with the column's overrides); an error
    shows under the control that caused it. Returns (plan or None, model ref or None, label)."""
    try:
        if col.model == CURRENT:
            ref, model, _notes = models.active_model()
        else:
            ref, model = models.load_preset(col.model)
    except PlannerError as exc:
        with slots["model"]:
            st.error(md(state.error_text(exc)), icon=":material/error:")
        return None, None, col.model
    label = ref.name if ref.kind == "preset" and ref.name else ref.label()
    values = dict(base) | col.overrides()
    plan, err = state.build_plan(values, model)
    if err is not None:
        key = FIELD_SLOTS.get(state.error_key(err, values) or "")
        with slots.get(key, slots["model"]) if key else slots["model"]:
            st.error(md(state.error_text(err) if key else state.error_sentence(err)), icon=":material/error:")
    return plan, ref, label


def column_metrics(plan: Plan, wide: bool) -> None:
    kv, lat = plan.kv_cache, plan.latency
    a, b = st.columns(2) if wide else (st.container(), st.container())
    a.metric("Max sequences", f"{kv.admissible_sequences:,}", help=f"memory alone: {kv.maximum_sequences_by_memory:,}")
    b.metric("Memory per sequence", f"{fmt_num(kv.mib_per_reserved_sequence)} MiB", help=f"{kv.bytes_per_reserved_sequence:,} B")
    a.metric("TTFT", fmt_ms(lat.time_to_first_token_ms))
    b.metric("ITL", fmt_ms(lat.mean_inter_token_latency_ms))
    a.metric("KV bytes / token", fmt_bytes(kv.bytes_per_token_per_sequence), help=f"{kv.bytes_per_token_per_sequence:,} B")
    if plan.cost.per_million_output_tokens is not None:
        b.metric("Cost per hour", fmt_money(plan.cost.deployment_per_hour), delta=f"{fmt_money(plan.cost.per_million_output_tokens)} per M output tokens", delta_color="gray", delta_arrow="off")
    admission_badge(plan)


def comparison_table(results: list[tuple[str, Plan | None, str]]) -> None:
    """Every row side by side; the better plan of each row is highlighted and named."""
    import pandas as pd

    names = [n for n, _p, _l in results]
    rows = compare_rows(results)
    # "Better" first, beside the row's label: last, it was the column cut off at the right edge
    # (three plans at 1280 px showed "B:" and "A,"; a phone showed only plan A).
    data = {"Better": [r.verdict(names) for r in rows]}
    data |= {name: [r.cells[j] for r in rows] for j, name in enumerate(names)}
    df = pd.DataFrame(data, index=[r.label for r in rows])
    best = {r.label: set(r.best) for r in rows}

    def highlight(row):
        return [""] + [BEST if j in best[row.name] else "" for j in range(len(names))]

    # the grid sizes a column by its header: "Better" alone cut "B: more sequences" to "B: more"
    st.dataframe(df.style.apply(highlight, axis=1), width="stretch", height=35 * (len(rows) + 1) + 3, column_config={"Better": st.column_config.TextColumn(width="medium")})
    st.caption("Green: the better plan on that row (more sequences or headroom, lower latency or cost); 'Better' names it.")
    sizing = next((r for r in rows if r.label == ENGINE_SIZING), None)
    if sizing is not None:  # the table cuts long text: the reasons in full
        st.markdown("**Why the engines' pools differ**\n\n" + "\n".join(f"- **{md(name)}**: {md(text)}" for name, text in zip(names, sizing.cells, strict=True)))


# The shared chart's panels: title, value, label. One figure each, side by side in columns that
# Streamlit stacks on a phone; three subplots in one figure had their titles run into each other
# at 390 px ("Max sequencesMiB per sequence").
CHART_PANELS = (
    ("Max sequences", lambda p: p.kv_cache.admissible_sequences, lambda v: f"{v:,}"),
    ("MiB per sequence", lambda p: p.kv_cache.mib_per_reserved_sequence, fmt_num),
    ("ITL (ms)", lambda p: p.latency.mean_inter_token_latency_ms, lambda v: f"{v:,.2f}"),
)


def comparison_charts(results: list[tuple[str, Plan | None, str]]) -> list[go.Figure]:
    """One bar figure per panel, each titled inside itself (charts.titled: clear of the toolbar)."""
    ok = [(n, p) for n, p, _ in results if p is not None]
    figs = []
    for title, getter, fmt in CHART_PANELS:
        ys = [getter(p) for _, p in ok]
        fig = go.Figure(
            go.Bar(x=[letter_of(n) for n, _ in ok], y=ys, marker_color=[COLORS[LETTERS.index(letter_of(n))] for n, _ in ok], text=[fmt(v) for v in ys], textposition="auto", showlegend=False, customdata=[n for n, _ in ok], hovertemplate="%{customdata}: %{text}<extra></extra>")
        )
        fig.update_layout(charts.titled(title), height=260)
        figs.append(fig)
    return figs


def render_comparison_charts(results: list[tuple[str, Plan | None, str]]) -> None:
    for i, (box, fig) in enumerate(zip(st.columns(len(CHART_PANELS)), comparison_charts(results), strict=True)):
        with box:
            st.plotly_chart(fig, config=charts.PLOT_CONFIG, key=f"cmp_chart_{i}")


def comparison_pdf_button(results: list[tuple[str, Plan | None, str]], refs: list, link: str) -> None:
    """Download the comparison as a PDF (built only when clicked)."""
    from planner.report import build_comparison_pdf

    entries = [(n, p, r) for (n, p, _l), r in zip(results, refs, strict=True) if p is not None and r is not None]
    if len(entries) < 2:
        return
    st.download_button(
        "Download comparison PDF",
        data=lambda: build_comparison_pdf(entries, link),
        file_name="kv-plan-comparison.pdf",
        mime="application/pdf",
        key="cmp_pdf",
        on_click="ignore",
        icon=":material/picture_as_pdf:",
    )
