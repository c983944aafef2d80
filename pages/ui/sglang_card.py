"""The Plan page's "SGLang start-up preview" card (runtime sglang): what ``launch_server`` will
print, the memory state it sizes from, term by term, and the command line. Every number comes
from the plan's :class:`planner.plan.sglang_view.SglangView`."""

from __future__ import annotations

import streamlit as st

from pages.ui.safe_text import md


def card_sglang_preview(r) -> None:
    """SGLang's start-up log for this plan, the memory behind it and the launch command."""
    view = r.plan.sglang
    if view is None:
        return
    from pages.ui.results import safe

    with st.container(border=True):
        st.markdown(f"**SGLang start-up preview** · SGLang {view.sglang_version}")
        safe(_render, r.plan, what="the SGLang start-up preview")


def _render(plan) -> None:
    v = plan.sglang
    st.code("\n".join(v.log_lines), language=None, wrap_lines=True)
    swa = f" · SWA pool {v.swa_max_total_num_tokens:,} tokens" if v.swa_max_total_num_tokens is not None else ""
    mamba = f" · Mamba state slots {v.max_mamba_cache_size:,}" if v.max_mamba_cache_size is not None else ""
    st.caption(
        f"mem_fraction_static {v.mem_fraction_static:g} · {md(v.attention_backend)} attention · KV {md(v.kv_dtype)} · page {v.page_size} · "
        f"{v.cell_bytes:,.{0 if float(v.cell_bytes).is_integer() else 1}f} B a token{swa}{mamba} · chunked prefill {v.chunked_prefill_size:,} · CUDA graphs to batch {v.cuda_graph_max_bs}"
    )
    # a markdown table: light to draw, so the charts below are not held up
    rows = [f"| {md(name)} | {gib:,.2f} | {md(source)} |" for name, gib, source in v.memory_terms]
    budget = v.available_kv_bytes / 2**30
    with st.expander(f"KV budget: {budget:,.2f} GiB per GPU, term by term"):
        st.markdown(
            "| term | GiB | source |\n|---|--:|---|\n" + "\n".join(rows)
            + f"\n| free after the weights | {v.available_gib:,.2f} | SGLang measures this at start-up |"
            + f"\n| less the free memory before the weights x (1 − {v.mem_fraction_static:g}) | −{v.pre_load_free_gib * (1 - v.mem_fraction_static):,.2f} | mem_fraction_static |"
            + f"\n| **= KV budget** | **{budget:,.2f}** | after the VLM cache and any Mamba state pool |"
        )  # fmt: skip
    st.caption(f"Admission: {md(v.why)} Steady state: {plan.kv_cache.steady_state_sequences:,} sequences; SGLang's pools: {plan.kv_cache.maximum_sequences_by_memory:,}.")
    st.code(v.command, language="bash", wrap_lines=True)
