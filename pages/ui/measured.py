"""The Plan page's "Measured beside predicted" card: a benchmark result read back against the plan.

Thin UI: the file is read by :func:`planner.benchimport.read_result` (its size, nesting, types and
time bounded; a bad file is one line), the prediction for the run's own load is
:func:`planner.benchimport.compare`, and the calibration kept in the plan (its
``bench_calibration`` input: the plan file and the share link carry it) is
:mod:`planner.bench_calibration`'s text and table.
"""

from __future__ import annotations

import streamlit as st

from pages.ui.safe_text import md
from pages.ui.state import Shown, error_sentence
from planner.bench_calibration import calibration_rows
from planner.benchimport import compare, read_result
from planner.benchimport.calibrate import SHORT, calibrate
from planner.benchimport.readers import MAX_JSON_BYTES
from planner.errors import PlannerError

UPLOAD_KEY = "bench_upload"


def keep_calibration(text: str) -> None:
    """The button's callback: the calibration becomes the plan's input (before the widgets are drawn)."""
    st.session_state["bench_calibration"] = text


def _table(rows: list[dict]) -> list[dict]:
    """Ratio second, so a phone's narrow table shows it before it scrolls."""
    return [{"figure": r["figure"], "ratio": f"{r['ratio']:.2f}x", "measured": f"{r['measured']:,.4g}", "predicted": f"{r['predicted']:,.4g}"} for r in rows]


def render(r: Shown) -> None:
    """The upload, the comparison table for it and the calibration this plan keeps."""
    kept = r.plan.inputs.bench_calibration
    with st.expander("Measured beside predicted" + (" · calibration kept" if kept else ""), icon=":material/speed:", expanded=bool(kept), key="bench_box", on_change="ignore"):
        st.caption(
            "Upload the result of the benchmark that checks this plan (`vllm bench serve --save-result` JSON, a guidellm report JSON, aiperf's `profile_export_aiperf.json`, "
            "or a Prometheus text scrape of vLLM's /metrics): each figure is put beside the plan's prediction for that run's load."
        )
        uploaded = st.file_uploader("Benchmark result", type=["json", "txt", "prom"], key=UPLOAD_KEY, help=f"At most {min(MAX_JSON_BYTES >> 20, int(st.get_option('server.maxUploadSize')))} MiB.")
        if uploaded is not None:
            try:
                if uploaded.size > MAX_JSON_BYTES:
                    raise PlannerError("file", f"{uploaded.size:,} bytes", f"a benchmark file must be at most {MAX_JSON_BYTES >> 20} MiB")
                c = compare(read_result(uploaded.getvalue()), r.plan.inputs, r.model)
            except PlannerError as exc:
                st.error(md(error_sentence(exc)), icon=":material/error:")
            else:
                st.markdown(f"**{md(c.tool)}** · predicted at {md(c.load)} · ratio = measured / predicted")
                rows = [{"figure": x.label, "measured": x.measured, "predicted": x.predicted, "ratio": x.ratio} for x in c.rows]
                st.dataframe(_table(rows), hide_index=True, width="stretch", key="bench_compare_table")
                for w in c.warnings:
                    st.warning(md(w), icon=":material/warning:")
                if c.calibration != kept:
                    st.button(
                        "Keep as this plan's calibration", key="bench_keep", on_click=keep_calibration, args=(c.calibration,), icon=":material/push_pin:",
                        help=f"Keeps {c.calibration!r} in the plan (its share link and plan file): the TTFT, TPOT and output tokens/s measured beside predicted.",
                    )
        if kept:
            try:
                rows = calibration_rows(kept)
            except PlannerError as exc:  # the input validated it; kept for safety
                st.error(md(error_sentence(exc)), icon=":material/error:")
                return
            st.markdown("**Kept calibration** (the plan file and the share link carry it; the figures above stay the model's)")
            st.dataframe(_table(rows), hide_index=True, width="stretch", key="bench_calibration_table")
            st.caption(f"{md(kept)} · predicted as the plan stood when it was measured. Clear it under Observed latency → Benchmark calibration.")
            _calibrated(r)


def _calibrated(r: Shown) -> None:
    """The plan's figures with the kept run's ratios applied, labelled, when the run was this deployment."""
    try:
        cal = calibrate(r.plan, r.model)
    except PlannerError as exc:
        st.caption(md(error_sentence(exc)))
        return
    if cal is None:
        return
    if not cal.applied:
        st.info(md(cal.label[:1].upper() + cal.label[1:]) + ".", icon=":material/info:")
        return
    st.markdown(f"**{md(cal.label[:1].upper() + cal.label[1:])}**")
    cols = st.columns(len(cal.figures) or 1)
    for col, (k, (model_value, value)) in zip(cols, cal.figures.items(), strict=False):
        unit = " tok/s" if k == "output_tokens_per_s" else " ms"
        col.metric(f"{SHORT.get(k, k)}, calibrated", f"{value:,.4g}{unit}", f"model {model_value:,.4g}{unit}", delta_color="off", delta_arrow="off")
    st.caption("The run was predicted again from this plan at its load and came back the same, so it measured this deployment; the ratios scale the plan's own figures at its own load.")
