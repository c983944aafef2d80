"""The Plan page's "SGLang start-up preview" card (runtime sglang): what ``launch_server`` will
print, the memory state it sizes from, term by term, and the command line. Every number comes
from the plan's :class:`planner.plan.sglang_view.SglangView`."""

from __future__ import annotations

import streamlit as st

from pages.ui.safe_text import md
from planner.units import GIB


def card_sglang_preview(r) -> None:
    """SGLang's start-up log for this plan, the memory behind it and the launch command."""
    view = r.plan.sglang
    if view is None:
        return
    from pages.ui.results import safe

    with st.container(border=True):
        st.markdown(f"**SGLang start-up preview** · SGLang {view.capacity.sglang_version}")
        safe(_render, r.plan, what="the SGLang start-up preview")


def _render(plan) -> None:
    v = plan.sglang
    st.code("\n".join(v.capacity.log_lines), language=None, wrap_lines=True)
    swa = f" · SWA pool {v.capacity.swa_max_total_num_tokens:,} tokens" if v.capacity.swa_max_total_num_tokens is not None else ""
    mamba = f" · Mamba state slots {v.capacity.max_mamba_cache_size:,}" if v.capacity.max_mamba_cache_size is not None else ""
    st.caption(
        f"mem_fraction_static {v.capacity.mem_fraction_static:g} · {md(v.capacity.attention_backend)} attention · KV {md(v.capacity.kv_dtype)} · page {v.capacity.page_size} · "
        f"{v.capacity.cell_bytes:,.{0 if float(v.capacity.cell_bytes).is_integer() else 1}f} B a token{swa}{mamba} · chunked prefill {v.capacity.chunked_prefill_size:,} · CUDA graphs to batch {v.capacity.cuda_graph_max_bs}"
    )
    # a markdown list, not a table: light to draw, and it wraps on a phone
    budget = v.capacity.available_kv_bytes / GIB
    static = v.memory.pre_load_free_gib * (1 - v.capacity.mem_fraction_static)
    other = v.memory.available_gib - static - budget  # the VLM cache reservation and a hybrid's Mamba state pool
    lines = [f"- **{md(name)}** {gib:,.2f} GiB · {md(source)}".replace(f" {gib:,.2f} ", f" {gib:,.2f} ".replace("-", "−"), 1) for name, gib, source in ((t.name, t.gib, t.source) for t in v.memory.terms)]
    lines.append(f"- **free after the weights** {v.memory.available_gib:,.2f} GiB · SGLang measures this at start-up")
    lines.append(f"- **outside the static fraction** −{static:,.2f} GiB · {v.memory.pre_load_free_gib:,.2f} GiB free before the weights × (1 − mem_fraction_static {v.capacity.mem_fraction_static:g})")
    if other > 0.005:
        what = "Mamba state pool" if v.capacity.max_mamba_cache_size is not None else "VLM cache reservation"
        lines.append(f"- **{what}** −{other:,.2f} GiB" + (f" · {v.capacity.max_mamba_cache_size:,} slots + 1" if v.capacity.max_mamba_cache_size is not None else ""))
    lines.append(f"- **= KV budget** **{budget:,.2f} GiB** · the token pool is sized from this")
    with st.expander(f"KV budget: {budget:,.2f} GiB per GPU, term by term"):
        st.markdown("\n".join(lines))
    st.caption(f"Admission: {md(v.why)} The caption under the memory chart above names each count.")
    st.code(v.command, language="bash", wrap_lines=True)
