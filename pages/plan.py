"""Plan page: one model, one deployment, every number of the plan with charts and formulas.

Thin UI: the numbers come from :func:`planner.plan.compute_plan`; the building blocks are in
:mod:`pages.ui` (model source, inputs, result cards, URL state, export).
"""

from __future__ import annotations

import streamlit as st

from pages.ui import inputs, models, results, state, suggest, urlstate
from pages.ui.safe_text import md


def main() -> None:
    state.enter_page("plan")
    urlstate.restore_from_query_params()  # a share link, on the session's first run
    with st.sidebar:
        st.subheader("Model")
        source_box = st.container()
        st.subheader("Inputs")
        inputs_box = st.container()  # filled last, so the plan reaches the browser first
    # A session's first run stops after the headline: its model-source controls come with the rest
    # (pages/ui/models.py model_without_widgets), so a fresh browser loads no widget before the metric.
    resolved = models.model_without_widgets() if results.headline_first() else None
    drawn = resolved is None
    if drawn:
        with source_box:
            resolved = models.model_source_widget()
    ref, model, source_notes = resolved
    suggest.apply_suggestions(ref, model)  # a new model opens on a working plan
    values = state.read_widgets()
    plan, err = state.build_plan(values, model)
    upload_config = models.active_upload_config()
    if plan is not None:
        state.remember_good(state.Shown(plan, model, ref, source_notes, upload_config))
        urlstate.sync_query_params(urlstate.share_params(ref, plan.inputs, upload_config))  # the address bar is the share link
    err_key = state.error_key(err, values)

    st.title("KV capacity plan")
    urlstate.render_restore_notice()
    models.render_source_error(ref)  # a Hub failure on top, not only far down the sidebar
    suggest.render_suggestion(ref, model, err)
    good = state.last_good()
    if err is not None:
        inputs.render_error_banner(err, err_key, good)
    if plan is None and not good:
        st.info("Fix the input in the sidebar to see a plan.")
    elif plan is None:
        with st.container(key="stale_results"):  # greyed (pages/ui/style.py) under the error above
            results.render_results(good)
    else:
        results.render_results(state.Shown(plan, model, ref, source_notes, upload_config))
    if not drawn:  # the run went on past the headline (no plan to show): the controls now
        with source_box:
            models.model_source_widget()
    with inputs_box:
        inputs.render_inputs(model, values, err_key, err)


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {md(exc)}", icon=":material/error:")
