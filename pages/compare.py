"""Compare page: two to four plans side by side, a shared chart, differences highlighted.

Each column takes the Plan page's inputs and overrides the model, GPU, GPU count, TP, KV dtype
and runtime. Every number comes from :func:`planner.plan.compute_plan`.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from pages.ui import models, state
from pages.ui.fmt import fmt_bytes, fmt_bytes_exact, fmt_ms, fmt_num
from pages.ui.results import admission_badge, binding_phrase, safe
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_BITS, RUNTIMES
from planner.plan import Plan, memory_basis

CURRENT = "__plan_page__"
LETTERS = "ABCD"
COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2")
FIELD_KEYS = {"model": "model", "gpu": "gpu", "device_gib": "gpu", "gpu_count": "gpu_count", "tp": "tp", "kv_dtype": "kv_dtype", "runtime": "runtime"}
HIGHLIGHT = "background-color: rgba(245, 133, 24, 0.28); font-weight: 600"


def _defaults(i: int, base: dict) -> dict:
    """Starting overrides of column ``i``: A is the Plan page, B..D vary one thing each."""
    gpu = base["gpu"] if base["gpu"] in CATALOG else next(iter(CATALOG))
    d = {"model": CURRENT, "gpu": gpu, "gpu_count": base["gpu_count"], "tp": base["tp"], "kv_dtype": base["kv_dtype"], "runtime": base["runtime"]}
    if i == 1:
        d["kv_dtype"] = "fp8" if base["kv_dtype"] != "fp8" else "bf16"
    elif i == 2:
        d["gpu"] = "H200-141GB" if gpu != "H200-141GB" else "H100-SXM-80GB"
    elif i == 3:
        d["tp"] = base["tp"] * 2
        d["gpu_count"] = base["gpu_count"] * 2
    return d


def _seed(i: int, base: dict) -> None:
    for name, value in _defaults(i, base).items():
        st.session_state.setdefault(f"cmp_{name}_{i}", value)


def _column(i: int, base: dict, current_label: str, names: tuple[str, ...]):
    """Controls of one column; returns (overrides, plan or None, error or None, model label)."""
    _seed(i, base)
    opts = [CURRENT, *names]
    st.selectbox("Model", opts, key=f"cmp_model_{i}", format_func=lambda n: f"Plan page: {current_label}" if n == CURRENT else models.preset_label(n))
    slot_model = st.container()
    st.selectbox("GPU", list(CATALOG), key=f"cmp_gpu_{i}", format_func=lambda g: f"{g} ({CATALOG[g].memory_gib:g} GiB)")
    slot_gpu = st.container()
    a, b = st.columns(2)
    with a:
        st.number_input("GPUs", min_value=1, max_value=4096, step=1, key=f"cmp_gpu_count_{i}")
        slot_count = st.container()
    with b:
        st.number_input("TP", min_value=1, max_value=4096, step=1, key=f"cmp_tp_{i}")
        slot_tp = st.container()
    a, b = st.columns(2)
    with a:
        st.selectbox("KV dtype", list(KV_DTYPE_BITS), key=f"cmp_kv_dtype_{i}")
        slot_kv = st.container()
    with b:
        st.selectbox("Runtime", list(RUNTIMES), key=f"cmp_runtime_{i}")
        slot_rt = st.container()
    slots = {"model": slot_model, "gpu": slot_gpu, "gpu_count": slot_count, "tp": slot_tp, "kv_dtype": slot_kv, "runtime": slot_rt}

    over = {k: st.session_state[f"cmp_{k}_{i}"] for k in ("model", "gpu", "gpu_count", "tp", "kv_dtype", "runtime")}
    try:
        if over["model"] == CURRENT:
            ref, model, _notes = models.active_model()
        else:
            ref, model = models.load_preset(over["model"])
    except PlannerError as exc:
        with slots["model"]:
            st.error(str(exc), icon=":material/error:")
        return over, None, exc, over["model"]
    label = ref.name if ref.kind == "preset" and ref.name else ref.label()
    values = dict(base) | {k: v for k, v in over.items() if k != "model"} | {"device_gib": None}
    plan, err = state.build_plan(values, model)
    if err is not None:
        key = state.error_key(err, values)
        key = FIELD_KEYS.get(key or "", None)
        with slots.get(key, slot_model) if key else slot_model:
            st.error(state.error_text(err) if key else str(err), icon=":material/error:")
    return over, plan, err, label


def _metrics(plan: Plan, wide: bool) -> None:
    kv, lat = plan.kv_cache, plan.latency
    if wide:
        a, b = st.columns(2)
    else:
        a = b = st.container()
    a.metric("KV bytes / token", fmt_bytes(kv["bytes_per_token_per_sequence"]), help=f"{kv['bytes_per_token_per_sequence']:,} B")
    b.metric("MiB / reserved sequence", f"{fmt_num(kv['mib_per_reserved_sequence'])} MiB", help=f"{kv['bytes_per_reserved_sequence']:,} B")
    a.metric("Max sequences", f"{kv['admissible_sequences']:,}", help=f"memory alone: {kv['maximum_sequences_by_memory']:,} ({memory_basis(plan)})")
    b.metric("TTFT", fmt_ms(lat.time_to_first_token_ms))
    a.metric("ITL", fmt_ms(lat.mean_inter_token_latency_ms))
    admission_badge(plan)


ROWS = (
    ("Model", lambda p, lab: lab),
    ("GPU", lambda p, lab: f"{p.device.name} × {p.capacity['gpu_count']:,}"),
    ("TP", lambda p, lab: f"{p.capacity['tp']:,}"),
    ("KV dtype", lambda p, lab: p.inputs.kv_dtype),
    ("Runtime", lambda p, lab: p.inputs.runtime + (f" (vLLM {p.inputs.vllm_version})" if p.inputs.runtime == "vllm" else "")),
    ("KV bytes / token", lambda p, lab: fmt_bytes_exact(p.kv_cache["bytes_per_token_per_sequence"])),
    ("MiB / reserved sequence", lambda p, lab: f"{fmt_num(p.kv_cache['mib_per_reserved_sequence'])} MiB"),
    ("Weights per GPU", lambda p, lab: fmt_bytes(p.capacity["model_resident_bytes"])),
    ("Available for K/V per GPU", lambda p, lab: fmt_bytes(p.capacity["available_for_kv_bytes"])),
    ("Max sequences", lambda p, lab: f"{p.kv_cache['admissible_sequences']:,}"),
    ("Memory figure counts", lambda p, lab: memory_basis(p)),
    ("Binding constraint", lambda p, lab: binding_phrase(p)),
    ("Admitted", lambda p, lab: "yes" if p.kv_cache["admitted"] else "no"),
    ("TTFT", lambda p, lab: fmt_ms(p.latency.time_to_first_token_ms)),
    ("ITL", lambda p, lab: fmt_ms(p.latency.mean_inter_token_latency_ms)),
    ("Decode tokens/s", lambda p, lab: f"{p.roofline['decode_tokens_per_second']:,.0f}"),
)


def _table(results: list[tuple[str, Plan | None, str]]) -> None:
    import pandas as pd

    cols = {}
    for name, plan, label in results:
        cols[name] = [fn(plan, label) if plan is not None else "–" for _, fn in ROWS]
    df = pd.DataFrame(cols, index=[r[0] for r in ROWS])
    first = df.columns[0]

    def highlight(row):
        return ["" if j == 0 or v == row[first] else HIGHLIGHT for j, v in enumerate(row)]

    st.dataframe(df.style.apply(highlight, axis=1), width="stretch", height=35 * (len(ROWS) + 1) + 3)
    st.caption(f"Highlighted: values that differ from Plan {first[-1]}.")


def _chart(results: list[tuple[str, Plan | None, str]]) -> go.Figure:
    ok = [(n, p) for n, p, _ in results if p is not None]
    fig = make_subplots(rows=1, cols=3, subplot_titles=("Max sequences", "MiB per reserved sequence", "ITL (ms)"))
    for col, (getter, fmt) in enumerate(
        (
            (lambda p: p.kv_cache["admissible_sequences"], lambda v: f"{v:,}"),
            (lambda p: p.kv_cache["mib_per_reserved_sequence"], fmt_num),
            (lambda p: p.latency.mean_inter_token_latency_ms, lambda v: f"{v:,.2f}"),
        ),
        start=1,
    ):
        ys = [getter(p) for _, p in ok]
        fig.add_trace(
            go.Bar(
                x=[n for n, _ in ok],
                y=ys,
                marker_color=[COLORS["ABCD".index(n[-1])] for n, _ in ok],
                text=[fmt(v) for v in ys],
                textposition="auto",
                showlegend=False,
                hovertemplate="%{x}: %{text}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def main() -> None:
    st.title("Compare plans")
    base = dict(state.plan_values())
    ref, _model, _notes = models.active_model()
    current_label = ref.name if ref.kind == "preset" and ref.name else ref.label()
    st.caption(f"Every column uses the Plan page's inputs (context, headroom, load, SLOs…) for **{current_label}** and overrides the model, GPU, TP, KV dtype and runtime.")
    st.session_state.setdefault("cmp_n", 2)
    n = st.segmented_control("Plans", [2, 3, 4], key="cmp_n", required=True, format_func=lambda k: f"{k} plans")
    n = n or 2
    names = models.preset_names()
    results = []
    cols = st.columns(n, border=True)
    for i in range(n):
        with cols[i]:
            st.subheader(f"Plan {LETTERS[i]}")
            over, plan, err, label = _column(i, base, current_label, names)
            if plan is not None:
                _metrics(plan, wide=n <= 2)
            elif err is not None:
                st.caption("No plan for these settings.")
            results.append((f"Plan {LETTERS[i]}", plan, label))
    if any(p is not None for _, p, _ in results):
        safe(lambda: st.plotly_chart(_chart(results), config={"displaylogo": False}, key="cmp_chart"), what="the comparison chart")
        safe(_table, results, what="the comparison table")


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}", icon=":material/error:")
