"""Simulate page parts: the plan it starts from, the traffic controls (kept in the session), the
run with a progress bar, and the results formatted like the rest of the app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from pages.ui import charts, state
from pages.ui.safe_text import md
from planner import simulate as sim
from planner.errors import PlannerError
from planner.limits import BOUNDS
from planner.simulate.workload import trace_text
from planner.units import fmt_ms

TRACE_MIB = sim.MAX_TRACE_BYTES >> 20  # the uploaders' cap: a trace is refused above it (not the server's 16 MiB)
MOONCAKE_HELP = f"At most {TRACE_MIB} MiB and {sim.MAX_REQUESTS:,} requests; a malformed line is refused by its number."

STORE = "simulate"  # st.session_state[STORE]: the traffic controls' values
FIXED_LENGTHS = "the plan's prompt and output"
POISSON, CLOSED = "Poisson arrivals", "Closed loop (a benchmark)"
DEFAULTS: dict[str, Any] = {"sim_arrivals": POISSON, "sim_rate": 4.0, "sim_requests": 300, "sim_lengths": FIXED_LENGTHS, "sim_policies": list(sim.POLICIES), "sim_chunk": 512, "sim_budget": 8192, "sim_seed": 0}
LABELS = {
    "rate": "Arrival rate (requests/s, whole deployment)",
    "requests": "Requests",
    "lengths": "Request lengths",
    "trace": "Trace (CSV)",
    "chunk_tokens": "Chunk tokens (chunked: a prompt a step; prefill-first: a step)",
    "max_num_batched_tokens": "Max batched tokens per step",
    "seed": "Seed",
}


@dataclass(frozen=True)
class Traffic:
    rate: float
    requests: int
    policies: tuple[str, ...]
    chunk: int
    budget: int
    seed: int
    trace_text: str | None
    lengths: str | None = None  # a name of planner.simulate.LENGTH_PROFILES; None: the plan's lengths
    clients: int | None = None  # a closed loop of this many clients on one replica (None: the arrivals above)


def plan_summary(current: state.Shown) -> None:
    """What the simulation takes from the plan (one line, and where to change it)."""
    plan, ref = current.plan, current.ref
    cap, ctx, inputs = plan.capacity, plan.context, plan.inputs
    name = ref.name if ref.kind == "preset" and ref.name else ref.label()
    with st.container(border=True):
        st.markdown(
            f"**From the plan:** {md(name)} on {cap.gpu_count:,} × {plan.device.name}, TP {cap.tp:,} "
            f"({cap.replicas:,} replica{'s' if cap.replicas != 1 else ''}), KV {inputs.kv_dtype}, headroom {inputs.headroom_bp / 100:g} %, "
            f"prompt {ctx.input_tokens:,} + output {ctx.reserved_output_tokens:,} tokens"
            + (f", SLOs TTFT {fmt_ms(inputs.ttft_slo_ms)}" if inputs.ttft_slo_ms else "")
            + (f", ITL {fmt_ms(inputs.itl_slo_ms)}" if inputs.itl_slo_ms else "")
            + "."
        )
        plan_link("Change these on the Plan page")


def plan_link(text: str) -> None:
    """A link to the Plan page (plain text when the page runs outside the app's navigation)."""
    try:
        st.page_link("pages/plan.py", label=text, icon=":material/calculate:")
    except Exception:  # noqa: BLE001 - StreamlitPageNotFoundError when run on its own
        st.caption(f"{text}.")


def _seed() -> None:
    saved = st.session_state.get(STORE) or {}
    force = state.entered_page()
    for key, default in DEFAULTS.items():
        if force or key not in st.session_state:
            st.session_state[key] = saved.get(key, default)


def profile_lengths(name: str) -> str:
    """One built-in length profile in words: "chat: prompt p50 1,000 / p95 4,000 tokens, output p50 250 / p95 800 tokens"."""
    k = sim.LENGTH_PROFILES[name]
    return f"{name}: prompt p50 {k.prompt_p50:,} / p95 {k.prompt_p95:,} tokens, output p50 {k.output_p50:,} / p95 {k.output_p95:,} tokens"


def traffic_controls(plan) -> Traffic | None:
    """The traffic controls (their values survive page switches); None when none can run."""
    _seed()
    traced = st.session_state.get("sim_trace") is not None  # a trace sets arrivals and lengths itself
    off = "Unused while a trace is loaded: the trace gives every arrival and length."
    replicas = max(1, plan.capacity.replicas)
    clients = max(1, -(-plan.inputs.sequences // replicas))  # the plan's clients on one replica
    closed = st.radio(
        "Arrivals", [POISSON, CLOSED], key="sim_arrivals", horizontal=True, disabled=traced,
        help=off if traced else f"Poisson: requests arrive at the rate below. Closed loop: the plan's {clients:,} clients on one replica start at once and each sends its next request when its last one ends, "
        "as a benchmark at --max-concurrency does; the requests below are its --num-prompts.",
    ) == CLOSED and not traced  # fmt: skip
    c1, c2, c3 = st.columns(3)
    c1.number_input(LABELS["rate"], 0.01, min(10_000.0, BOUNDS["rate"].hi), step=0.5, key="sim_rate", disabled=traced or closed, help=off if traced else ("Unused in a closed loop: each client sends its next request when its last one ends." if closed else "Poisson arrivals per second across all replicas; each replica receives its share."))
    c2.number_input(LABELS["requests"], 1, min(10_000, BOUNDS["requests"].hi), step=100, key="sim_requests", disabled=traced, help=off if traced else ("Prompts the benchmark sends in all (its --num-prompts), on one replica." if closed else "Requests simulated on one replica."))
    c3.number_input(LABELS["seed"], **BOUNDS["seed"].widget(), key="sim_seed", disabled=traced, help=off if traced else "Seed of the arrival times and lengths.")
    profiles = sim.LENGTH_PROFILES
    # The box shows the profile's name and the line under it its lengths: with the lengths in the box
    # ("chat: prompt p50 1,000 / p95 4,000, output p50 250 / p95 800 tokens") a phone cut it mid-number.
    chosen = st.selectbox(
        LABELS["lengths"], [FIXED_LENGTHS, *profiles], key="sim_lengths", disabled=traced,
        help=off if traced else "Log-normal prompt and output lengths with the stated p50 and p95 (assumed shapes, capped at the plan's context), or every request at the plan's prompt and output.  \n"
        + "  \n".join(profile_lengths(k) for k in profiles),
    )  # fmt: skip
    if chosen in profiles and not traced:
        st.caption(profile_lengths(chosen))
    c1, c2, c3 = st.columns([2, 1, 1])  # room for the three policies' chips
    c1.multiselect("Policies", list(sim.POLICIES), key="sim_policies", help="fifo: first come first served; decode-priority: running sequences first; chunked: prefills split into chunks beside the decodes (vLLM); prefill-first: a step of prefill chunks alone while any prompt waits, decodes only in steps without one (SGLang).")
    c2.number_input(LABELS["chunk_tokens"], 1, min(65_536, BOUNDS["chunk_tokens"].hi), step=128, key="sim_chunk")
    c3.number_input(LABELS["max_num_batched_tokens"], 1, min(1_000_000, BOUNDS["max_batched_tokens"].hi), step=1024, key="sim_budget", help="Tokens one engine step may process (vLLM max_num_batched_tokens).")
    trace = st.file_uploader(
        "Or upload a trace (CSV: arrival_s, prompt_tokens, output_tokens)", type=["csv"], key="sim_trace",
        max_upload_size=TRACE_MIB, help=f"At most {TRACE_MIB} MiB and {sim.MAX_REQUESTS:,} requests.",
    )  # fmt: skip
    if trace is not None:
        st.caption("The trace replaces the arrival rate, the requests, the seed and the lengths above.")
    st.session_state[STORE] = {key: st.session_state[key] for key in DEFAULTS}
    policies = tuple(st.session_state["sim_policies"])
    if not policies:
        st.warning("Choose at least one policy.", icon=":material/warning:")
        return None
    try:
        text = trace_text(trace.getvalue(), trace.name) if trace is not None else None
    except PlannerError as exc:  # oversized, not UTF-8 or binary: one line
        st.error(f"{LABELS['trace']} {md(exc.value)}: {md(exc.reason)}.", icon=":material/error:")
        return None
    lengths = st.session_state["sim_lengths"]
    return Traffic(float(st.session_state["sim_rate"]) / replicas, int(st.session_state["sim_requests"]), policies, int(st.session_state["sim_chunk"]), int(st.session_state["sim_budget"]), int(st.session_state["sim_seed"]), text,
                   lengths if lengths in sim.LENGTH_PROFILES else None, clients if closed and text is None else None)  # fmt: skip


@st.cache_data(show_spinner=False, max_entries=16)
def _run_one(_plan, plan_key: str, traffic: Traffic, policy: str, reservation: str):
    cost, blocks = sim.from_plan(_plan)
    ctx = _plan.context
    requests = sim.plan_requests(ctx, traffic.rate, traffic.requests, lengths=traffic.lengths, trace_text=traffic.trace_text or None, seed=traffic.seed)
    cfg = sim.plan_config(
        _plan,
        blocks,
        max_num_batched_tokens=traffic.budget,
        chunk_tokens=traffic.chunk,
        seed=traffic.seed,
        policy=policy,
        time_budget_s=10,
    )
    if reservation == "static":
        cfg = cfg.model_copy(update={"reservation": "static", "static_tokens": ctx.maximum_context_tokens})
    lag = sim.closed_loop_lag_s(_plan) if traffic.clients is not None else 0.0
    return sim.simulate(requests, cfg, cost, clients=traffic.clients, lag_s=lag), blocks


@dataclass
class Outcome:
    results: dict[str, Any]
    static: Any
    blocks: int
    ceiling: int
    error: str | None = None
    benchmark: str | None = None  # a closed loop: the simulated mean TTFT beside the plan's benchmark figure


def run(current: state.Shown, traffic: Traffic) -> Outcome:
    """Each policy, then the static-reservation comparison, with a progress bar between runs."""
    plan = current.plan
    key = plan.inputs.model_dump_json() + "|" + current.ref.model_dump_json()
    steps = [*traffic.policies, "static"]
    bar = st.progress(0.0, text=f"Simulating {steps[0]}…")
    results: dict[str, Any] = {}
    blocks = 0
    try:
        for i, name in enumerate(steps):
            bar.progress(i / len(steps), text=f"Simulating {'the static reservation' if name == 'static' else name} ({i + 1} of {len(steps)})…")
            if name == "static":
                static, blocks = _run_one(plan, key, traffic, steps[0], "static")
            else:
                results[name], blocks = _run_one(plan, key, traffic, name, "dynamic")
    except PlannerError as exc:
        bar.empty()
        return Outcome({}, None, blocks, 0, run_error(exc))
    bar.empty()
    return Outcome(results, static, blocks, plan.capacity.sequences_per_replica, benchmark=_benchmark_line(plan, current.model, traffic, results))


def _benchmark_line(plan, model, traffic: Traffic, results: dict[str, Any]) -> str | None:
    """A closed loop's mean TTFT per policy (the plan's API server added: the simulator has none)
    beside what the plan says that benchmark prints (its roofline.benchmark_ttft_ms at these prompts)."""
    if traffic.clients is None:
        return None
    from planner.explain import waves_upper_ms
    from planner.plan import compute_plan

    replicas = max(1, plan.capacity.replicas)
    roof = compute_plan(plan.inputs.model_copy(update={"bench_prompts": traffic.requests * replicas}), model).roofline
    upper = waves_upper_ms(roof)
    bench = fmt_ms(roof.benchmark_ttft_ms) + (f", {fmt_ms(upper)} if every wave queues as the first" if upper else "")
    pre = plan.latency.preprocessing_ms
    said = ", ".join(f"{name} {fmt_ms(sim.benchmark_ttft_ms(plan, r))}" for name, r in results.items())
    waves = f" With every request at the plan's lengths, requests that end within {fmt_ms(pre)} of each other send their next prompts to the scheduler together: waves the plan's steady state does not model (prefill-first keeps every wave whole)." if traffic.lengths is None and traffic.clients > 1 else ""
    return f"Closed loop of {traffic.clients:,} clients started at once, {traffic.requests:,} prompts: mean TTFT simulated {said} (the API server's {fmt_ms(pre)} included: each next prompt reaches the scheduler that long after the last ended); the plan's benchmark figure {bench}.{waves}"


# The index column of a table whose rows are named ("Longest queue wait"): wide enough for the name.
LABEL_COLUMN = {"_index": st.column_config.TextColumn(width="medium")}


def run_error(exc: PlannerError) -> str:
    """A refused run in one line, named by its control or by the trace's row: "Trace, row 3
    prompt_tokens: not an integer (ASCII digits) (got 'abc')". (A trace row's field is no control's:
    the reason read twice, "not an integer ... (got 'abc'): not an integer ... (got 'abc')", and a
    missing output_tokens column read as the "Output reserve (tokens)" control.)"""
    field = str(exc.field)
    if field in LABELS:
        return f"{LABELS[field]}: {state.error_text(exc)}"
    if field.startswith("row "):  # the file's own column names, not the controls' labels
        return f"Trace, {field}: {state.error_text(exc, humanized=False)}"
    if field.startswith("trace"):
        return f"{field.capitalize()}: {state.error_text(exc, humanized=False)}"
    return state.error_sentence(exc)


ROWS: tuple[tuple[str, Any], ...] = (
    ("Completed", lambda r: f"{r.requests_completed:,}"),
    ("Cancelled", lambda r: f"{r.requests_cancelled:,}"),
    ("Rejected", lambda r: f"{r.requests_rejected:,}" + (f" ({'; '.join(sim.REJECTION_REASONS[x.reason] for x in r.rejections)})" if r.rejections else "")),
    ("TTFT p50", lambda r: fmt_ms(r.ttft_ms.p50)),
    ("TTFT p95", lambda r: fmt_ms(r.ttft_ms.p95)),
    ("TTFT p99", lambda r: fmt_ms(r.ttft_ms.p99)),
    ("ITL p50", lambda r: fmt_ms(r.itl_ms.p50)),
    ("ITL p95", lambda r: fmt_ms(r.itl_ms.p95)),
    ("ITL p99", lambda r: fmt_ms(r.itl_ms.p99)),
    ("End-to-end p95", lambda r: fmt_ms(r.e2e_ms.p95)),
    ("Output tokens/s", lambda r: f"{r.throughput_tokens_per_s:,.0f}"),
    ("Longest queue wait", lambda r: fmt_ms(r.max_queue_age_ms)),
    ("Preemptions", lambda r: f"{r.preemptions:,}"),
    ("Peak KV pool use", lambda r: f"{r.peak_kv_utilisation * 100:,.0f} %"),
    ("Verdict", lambda r: sim.verdict_label(r.overload, r.requests_total, r.stopped_early)),
)


def show(out: Outcome) -> None:
    """Metrics, one table (a column per policy, so it fits any width) and two charts."""
    if out.error:
        st.error(md(out.error), icon=":material/error:")
        return
    first_name, first = next(iter(out.results.items()))
    st.caption(f"KV pool: {out.blocks:,} blocks per replica; memory admits {out.ceiling:,} sequences per replica at the plan's reserved length.")
    if out.benchmark:
        st.info(md(out.benchmark, limit=1200), icon=":material/timer:")  # the planner's own sentence, numbers included
    for name, r in out.results.items():  # the overload verdict (planner.simulate.verdict) and early stops
        if r.overload.overloaded or r.overload.thrashing or r.overload.rejected:
            st.warning(f"{name}: {r.overload.message}", icon=":material/warning:")
        if r.stopped_early:
            st.warning(f"{name}: stopped early: {r.stopped_early}.", icon=":material/timer_off:")
    c1, c2, c3 = st.columns(3)
    c1.metric(f"Completed ({first_name})", f"{first.requests_completed:,} of {first.requests_total:,}")
    c2.metric("Preemptions", f"{first.preemptions:,}")
    c3.metric("Static reservation: completed", f"{out.static.requests_completed:,} of {out.static.requests_total:,}", help="The same requests when every one reserves the model's whole context up front.")
    import pandas as pd

    table = {name: [fn(r) for _label, fn in ROWS] for name, r in out.results.items()}
    table["static reservation"] = [fn(out.static) for _label, fn in ROWS]
    # The row labels get their own width: sized by the grid, "End-to-end p95" read "End-to-end p" at 1280 px.
    st.dataframe(pd.DataFrame(table, index=[label for label, _fn in ROWS]), width="stretch", height=35 * (len(ROWS) + 1) + 3, column_config=LABEL_COLUMN)
    st.plotly_chart(fig_utilisation(out.results), config={"displaylogo": False}, key="sim_util")
    st.plotly_chart(fig_latency(out.results), config={"displaylogo": False}, key="sim_latency")


def fig_utilisation(results: dict) -> go.Figure:
    """KV pool blocks in use over time, one line a policy."""
    fig = go.Figure()
    for name, r in results.items():
        if r.kv_utilisation:
            t, u = zip(*r.kv_utilisation, strict=True)
            fig.add_scatter(x=t, y=[x * 100 for x in u], mode="lines", name=name)
    fig.update_layout(charts.titled("KV pool utilisation over time"), xaxis_title="time (s)", yaxis_title="blocks in use (%)", height=320, legend={"orientation": "h", "y": -0.25})
    return fig


def fig_latency(results: dict) -> go.Figure:
    """TTFT, ITL and end-to-end p50/p95/p99 per policy on a log axis labelled at powers of ten."""
    fig = go.Figure()
    for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
        for q in ("p50", "p95", "p99"):
            fig.add_bar(name=f"{metric[:-3].upper()} {q}", x=list(results), y=[getattr(getattr(r, metric), q) for r in results.values()])
    fig.update_layout(charts.titled("Latency percentiles per policy (ms, log scale)"), barmode="group", yaxis={"type": "log"} | charts.LOG_TICKS, height=360, legend={"orientation": "h", "y": -0.2})
    return fig


# --------------------------------------------------------------------------- prefix-cache tiers


@st.cache_data(show_spinner=False, max_entries=8)
def _cache_run(_plan, plan_key: str, sessions: int, seed: int, trace: bytes | None, trace_name: str):
    """The plan's session workload, or an uploaded Mooncake trace, through its tiers
    (:mod:`planner.cache.runs`); a refusal comes back as its text, never raised."""
    from planner.cache.runs import replay_plan, simulate_plan
    from planner.simulate.mooncake import parse_mooncake

    try:
        if trace is not None:
            return replay_plan(_plan, parse_mooncake(trace_text(trace, trace_name, kind="JSONL")), time_budget_s=10), None
        return simulate_plan(_plan, sessions, seed=seed, time_budget_s=10), None
    except PlannerError as exc:  # "Trace, line 7 hash_ids: why" (a line by its number; its text is in the file)
        label = "Trace" if trace is not None else "Sessions"
        return None, f"{label}: {exc.reason}" if exc.field in ("trace", "sessions") else f"{label}, {exc.field}: {exc.reason}"


def cache_tiers(current: state.Shown) -> None:
    """Sessions or a recorded trace through the plan's GPU pool and its CPU / disk tiers, beside
    the analytic model's figures when the plan has a session workload."""
    plan = current.plan
    inputs = plan.inputs
    st.subheader("Prefix cache: sessions and traces through the tiers")
    below = " and ".join(f"{gib:,.4g} GiB of {name}" for name, gib in (("CPU DRAM", inputs.cpu_tier_gib), ("local NVMe", inputs.disk_tier_gib)) if gib)
    tiers = f"The plan's GPU pool and {below} a replica" if below else "The plan's GPU pool (no tier below it: give a CPU or disk tier on the Plan page)"
    st.caption(
        f"{tiers}, LRU per tier with promotion, keys scoped to the tenant. The Plan page's session workload runs here as sessions; "
        "a trace in the Mooncake JSONL format (timestamp in ms, input_length, output_length, hash_ids of 512-token blocks, optional tenant) replays instead."
    )
    sessions = 0
    if inputs.sessions_per_min is not None:
        c1, c2 = st.columns([1, 2])
        sessions = c1.number_input(
            "Sessions", **BOUNDS["sessions"].widget(), value=2000, step=500, key="sim_cache_sessions",
            help="Sessions of the plan's workload; the first fifth warm the caches (short runs read high: the caches fill over the first session lifetimes). Sessions × turns is at most 100,000 requests.",
        )  # fmt: skip
        upload = c2.file_uploader("Or replay a Mooncake trace (JSONL)", type=["jsonl", "json"], key="sim_cache_trace", max_upload_size=TRACE_MIB, help=MOONCAKE_HELP)
    else:
        upload = st.file_uploader("Replay a Mooncake trace (JSONL)", type=["jsonl", "json"], key="sim_cache_trace", max_upload_size=TRACE_MIB, help=MOONCAKE_HELP)
        if upload is None:
            st.caption("Or give a session workload (sessions per minute) on the Plan page to simulate its sessions here.")
            return
    key = plan.inputs.model_dump_json() + "|" + current.ref.model_dump_json()
    data = upload.getvalue() if upload is not None else None
    with st.spinner("Simulating the cache tiers…"):
        result, err = _cache_run(plan, key, int(sessions), int(st.session_state.get("sim_seed", 0)), data, upload.name if upload is not None else "")
    if err is not None:
        st.error(md(err), icon=":material/error:")
        return
    show_cache(result, plan if data is None else None)


def show_cache(r, plan=None) -> None:
    """A tiered cache run: hit rate per tier and TTFT by phase (with the model's figures for a
    plan's own workload)."""
    from planner.cache.explain import TIER_NAMES

    if r.stopped_early:
        st.warning(f"Stopped early: {md(r.stopped_early)}.", icon=":material/timer_off:")
    model = plan.cache if plan is not None and plan.cache.applies else None
    c1, c2, c3 = st.columns(3)
    c1.metric("Hit rate (simulated)", f"{r.hit_rate:.1%}", f"model {model.hit_rate:.1%}" if model else None, delta_color="off", help="Share of prompt tokens served from any tier.")
    c2.metric("TTFT p95 (simulated)", fmt_ms(r.ttft_ms.p95), f"model {fmt_ms(model.ttft.p95_ms)}" if model else None, delta_color="off")
    c3.metric("Prefill GPU-s saved", f"{r.gpu_seconds_saved:,.0f}", help=f"Of {r.prefill_gpu_seconds + r.gpu_seconds_saved:,.0f} GPU-s of prefill without a cache, over the run.")
    what = f"{r.requests:,} requests of {r.sessions:,} sessions" if r.hit_rate_by_turn else f"{r.requests:,} trace requests, {r.sessions:,} tenant(s)"
    timed = f" Turns timed at {md(r.timed_at)}." if r.timed_at else ""
    st.caption(f"{what} on {r.replicas:,} replica(s). TTFT = queue + load + prefill + first decode step.{timed}")
    head = ["Tier", "tokens", "serves", *(["model"] if model else []), "loads (ms each)"]
    rows = ["| " + " | ".join(head) + " |", "|---" + "|--:" * (len(head) - 1) + "|"]
    for i, t in enumerate(r.tiers):
        m = [f"{model.tiers[i].hit_rate:.1%}" if i < len(model.tiers) else "–"] if model else []
        loads = f"{t.requests_loading:,} × {t.load_ms_per_hit:,.2f}" if t.requests_loading else "–"
        rows.append("| " + " | ".join([TIER_NAMES.get(t.name, t.name), f"{t.capacity_tokens:,}", f"{t.hit_rate:.1%}", *m, loads]) + " |")
    st.markdown("\n".join(rows))
    phases = [("queue", r.queue_ms), ("load", r.load_ms), ("prefill", r.prefill_ms), ("TTFT", r.ttft_ms)]
    st.markdown("| ms | mean | p50 | p95 | p99 |\n|---|--:|--:|--:|--:|\n" + "\n".join(f"| {name} | {p.mean:,.1f} | {p.p50:,.1f} | {p.p95:,.1f} | {p.p99:,.1f} |" for name, p in phases))
    evicted = ", ".join(f"{TIER_NAMES.get(t.name, t.name)} {t.evicted_tokens:,}" for t in r.tiers)
    st.caption(f"Tokens evicted over the run: {evicted}. A load moves a hit found only below the GPU back over the tier's link when that beats recomputing it.")
    if r.hit_rate_by_turn:
        fig = go.Figure()
        fig.add_bar(x=[f"turn {k}" for k in range(1, len(r.hit_rate_by_turn) + 1)], y=[h * 100 for h in r.hit_rate_by_turn], name="simulated", marker_color="#4C78A8")
        fig.update_layout(charts.titled("Hit rate by turn (simulated, %)"), yaxis_title="% of the prompt cached", height=300, showlegend=False)
        st.plotly_chart(fig, config={"displaylogo": False}, key="sim_cache_turns")
