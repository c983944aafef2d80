"""Simulate page: continuous batching over the plan's paged KV pool, per scheduling policy."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages.ui.safe_text import md
from planner import simulate as sim
from planner.errors import PlannerError, shorten
from planner.hardware import CATALOG, DEFAULT_GPU
from planner.plan import compute_plan, make_inputs
from planner.presets import DEFAULT_PRESET, list_presets
from planner.source import preset_ref

st.title("Simulate a deployment")
st.caption("A deterministic discrete-event simulation of a paged engine: Poisson arrivals or an uploaded trace, per-step token budgets, block leases, preemption on exhaustion. The memory ceiling is not a latency promise; this shows what happens under a stream of requests.")

names = [p.name for p in list_presets()]
c1, c2, c3 = st.columns(3)
preset = c1.selectbox("Model preset", names, index=names.index(DEFAULT_PRESET) if DEFAULT_PRESET in names else 0, key="sim_preset")
gpu = c2.selectbox("GPU", list(CATALOG), index=list(CATALOG).index(DEFAULT_GPU), key="sim_gpu")
tp = c3.selectbox("Tensor parallel", [1, 2, 4, 8], key="sim_tp")
c1, c2, c3, c4 = st.columns(4)
prompt = c1.number_input("Prompt tokens", 1, 1_000_000, 2048, step=256, key="sim_prompt")
output = c2.number_input("Output tokens", 1, 1_000_000, 512, step=64, key="sim_output")
rate = c3.number_input("Arrival rate (requests/s)", 0.01, 10_000.0, 4.0, step=0.5, key="sim_rate")
count = c4.number_input("Requests", 1, 10_000, 500, step=100, key="sim_requests")
c1, c2, c3, c4 = st.columns(4)
policies = c1.multiselect("Policies", list(sim.POLICIES), default=list(sim.POLICIES), key="sim_policies")
chunk = c2.number_input("Chunk tokens (chunked)", 1, 65_536, 512, step=128, key="sim_chunk")
budget = c3.number_input("Max batched tokens per step", 1, 1_000_000, 8192, step=1024, key="sim_budget")
seed = c4.number_input("Seed", 0, 2**31 - 1, 0, key="sim_seed")
trace = st.file_uploader("Or upload a trace (CSV: arrival_s, prompt_tokens, output_tokens)", type=["csv"], key="sim_trace")


@st.cache_data(show_spinner=False, max_entries=32)
def run(preset: str, gpu: str, tp: int, prompt: int, output: int, rate: float, count: int, policies: tuple[str, ...], chunk: int, budget: int, seed: int, trace_text: str | None):
    _ref, model = preset_ref(preset)
    max_ctx = max(prompt + output, model.geometry.max_position_embeddings or 0)
    inputs = make_inputs(input_tokens=prompt, output_tokens=output, max_context=max_ctx, gpu=gpu, tp=tp, gpu_count=tp, reservation="paged")
    plan = compute_plan(inputs, model)
    cost, blocks = sim.from_plan(plan)
    requests = sim.parse_trace_csv(trace_text) if trace_text else sim.poisson_requests(rate, count, prompt, output, seed=seed)
    cfg = sim.build(sim.SimConfig, block_tokens=inputs.block_tokens, total_blocks=blocks, max_num_batched_tokens=budget, chunk_tokens=chunk, seed=seed)
    results = {p: sim.simulate(requests, cfg.model_copy(update={"policy": p}), cost) for p in policies}
    static = sim.simulate(requests, cfg.model_copy(update={"reservation": "static", "static_tokens": plan.context.maximum_context_tokens}), cost)
    return plan.kv_cache["maximum_sequences_by_memory"], blocks, results, static


if not policies:
    st.warning("Choose at least one policy.")
    st.stop()
try:
    trace_text = trace.getvalue().decode("utf-8") if trace is not None else None
    with st.spinner("Simulating…"):
        ceiling, blocks, results, static = run(preset, gpu, int(tp), int(prompt), int(output), float(rate), int(count), tuple(policies), int(chunk), int(budget), int(seed), trace_text)
except PlannerError as exc:
    st.error(md(f"{exc.field}: {exc.reason}" + (f" (value {shorten(exc.value)})" if exc.value is not None else "")))
    st.stop()
except UnicodeDecodeError:
    st.error("trace: the file is not UTF-8 text")
    st.stop()

st.caption(f"KV pool: {blocks:,} blocks per replica; the memory-only ceiling for this context is {ceiling:,} sequences.")
rows = []
for name, r in results.items():
    rows.append(
        {
            "policy": name,
            "completed": r.requests_completed,
            "cancelled": r.requests_cancelled,
            "rejected": r.requests_rejected,
            "TTFT p50 ms": round(r.ttft_ms.p50, 1),
            "TTFT p95 ms": round(r.ttft_ms.p95, 1),
            "TTFT p99 ms": round(r.ttft_ms.p99, 1),
            "ITL p50 ms": round(r.itl_ms.p50, 2),
            "ITL p95 ms": round(r.itl_ms.p95, 2),
            "ITL p99 ms": round(r.itl_ms.p99, 2),
            "E2E p95 ms": round(r.e2e_ms.p95, 1),
            "tokens/s": round(r.throughput_tokens_per_s, 1),
            "max queue age ms": round(r.max_queue_age_ms, 1),
            "preemptions": r.preemptions,
        }
    )
st.dataframe(rows, hide_index=True, width="stretch")
first = next(iter(results.values()))
c1, c2, c3 = st.columns(3)
c1.metric("Completed (first policy)", f"{first.requests_completed:,}")
c2.metric("Preemptions", f"{first.preemptions:,}")
c3.metric("Static reservation: completed", f"{static.requests_completed:,}", help="The same trace when every request reserves the full configured context up front.")

fig = go.Figure()
for name, r in results.items():
    if r.kv_utilisation:
        t, u = zip(*r.kv_utilisation, strict=True)
        fig.add_scatter(x=t, y=[x * 100 for x in u], mode="lines", name=name)
fig.update_layout(title="KV pool utilisation over time", xaxis_title="time (s)", yaxis_title="blocks in use (%)", height=320, margin=dict(l=10, r=10, t=40, b=10))
st.plotly_chart(fig, width="stretch")

fig = go.Figure()
for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
    for q in ("p50", "p95", "p99"):
        fig.add_bar(name=f"{metric[:-3].upper()} {q}", x=list(results), y=[getattr(getattr(r, metric), q) for r in results.values()])
fig.update_layout(title="Latency percentiles per policy (ms, log scale)", barmode="group", yaxis_type="log", height=360, margin=dict(l=10, r=10, t=40, b=10))
st.plotly_chart(fig, width="stretch")
