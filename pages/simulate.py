"""Simulate page: continuous batching over the current plan's KV pool, per scheduling policy.

It starts from the session's plan (model, GPU, TP, replicas, KV dtype, headroom, context, SLOs:
the Plan page sets them) and adds only the traffic: arrivals, requests, scheduler settings.
"""

from __future__ import annotations

import streamlit as st

from pages.ui import simulation, state
from pages.ui.safe_text import md


def main() -> None:
    state.enter_page("simulate")
    st.title("Simulate a deployment")
    st.caption(
        "A deterministic discrete-event simulation of a paged engine on the current plan: Poisson arrivals or an uploaded trace, "
        "per-step token budgets, block leases, preemption when the pool runs out. The memory ceiling is not a latency promise; "
        "this shows what happens under a stream of requests."
    )
    current, err = state.current()
    if current is None:
        st.error(f"The Plan page's inputs give no plan, so there is nothing to simulate: {md(state.error_sentence(err))}", icon=":material/error:")
        simulation.plan_link("Fix it on the Plan page")
        return
    simulation.plan_summary(current)
    settings = simulation.traffic_controls(current.plan)
    if settings is not None:
        simulation.show(simulation.run(current, settings))
    simulation.cache_tiers(current)


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {md(exc)}", icon=":material/error:")
