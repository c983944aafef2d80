"""The Plan page's serving card: what load the latency figures assume, the deployment's
throughput under it and at most, its shape, speculation, and how far such figures landed from
published runs (each figure's accuracy band, or the warning that no measured run is like it).

Every number comes from the plan (:attr:`planner.plan.Plan.roofline`); this module only draws it.
"""

from __future__ import annotations

import streamlit as st

from pages.ui.safe_text import md
from planner.explain import band_texts, benchmark_sentence
from planner.plan import Plan


def _tps(x: float) -> str:
    return f"{x:,.0f} tok/s" if x >= 100 else f"{x:,.1f} tok/s"


def render_serving(plan: Plan) -> None:
    """Throughput at the load and at most, each with its band; the load, shape and speculation."""
    r = plan.roofline
    bands = band_texts(plan)
    with st.container(border=True):
        st.markdown(f"**Serving** · {md(r.load_label)} · {md(r.serving_engine)} costs")
        for col, (title, value, delta, what) in zip(
            st.columns(2),
            (
                ("Throughput per GPU", r.output_tokens_per_second_per_gpu, r.load_label + ("" if r.load_admitted else " (not admitted)"), f"Output tokens a second per GPU at the requested load ({r.load_label}): every request's whole cycle, TTFT included."),
                ("Max throughput per GPU", r.max_throughput_tokens_per_second_per_gpu, r.max_throughput_label, "Every sequence memory and the runtime's limit admit running at once, fed directly (no API server): an offline benchmark's figure, or the requested load's when its steady state does better than one offline wave."),
            ),
            strict=True,
        ):
            col.metric(title, _tps(value), delta=delta, delta_color="gray", delta_arrow="off", help=md(f"{what} Accuracy: {bands['throughput']}.", limit=2000))
        if bench := benchmark_sentence(plan):  # the benchmark that checks the plan, and what it should print
            st.markdown(f"**Check it:** {md(bench)}")
        rows = [f"- **{md(name)}:** {md(text)}" for name, text in bands.items()]
        st.markdown("**Accuracy on published runs like this one** (planner ÷ measured)\n" + "\n".join(rows))
        if any("outside every measured regime" in text for text in bands.values()):
            st.warning("Part of this plan lies outside every measured regime: those figures are the model's alone.", icon=":material/warning:")
        shape = [f"TP {plan.inputs.tp}"]
        if plan.inputs.dp > 1:
            shape.append(f"{plan.inputs.dp} attention data-parallel ranks, experts over EP {plan.inputs.ep}")
        elif plan.inputs.ep > 1:
            shape.append(f"EP {plan.inputs.ep}")
        if plan.inputs.pp > 1:
            shape.append(f"{plan.inputs.pp} pipeline stages")
        notes = [", ".join(shape) + f" · {plan.capacity.gpus_per_replica:,} GPU{'s' if plan.capacity.gpus_per_replica != 1 else ''} a replica · weights {md(r.weight_format)} on {md(r.compute_dtype)} tensor cores"]
        if r.spec_method != "none":
            notes.append(f"speculative decoding {md(r.spec_method)}: {r.spec_tokens} drafts a step, {r.spec_acceptance_length:.2f} tokens kept a step, TPOT ÷ {r.spec_speedup:.2f}")
        st.caption(" · ".join(notes))
