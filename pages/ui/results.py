"""Result cards of the Plan page, one function a card.

A new card is a new ``card_*(r: Shown)`` function here, called from :func:`render_results` (at
the bottom of this file) in the place it should appear. Each card takes the shown plan (plan,
model, reference, notes, uploaded config) and draws itself; :func:`safe` keeps an unexpected
error in one card from breaking the page.
"""

from __future__ import annotations

import streamlit as st

from pages.ui import charts, export, measured
from pages.ui.safe_text import md
from pages.ui.sglang_card import card_sglang_preview
from pages.ui.state import Shown, error_sentence
from pages.ui.style import FIRST_PAINT_KEY, MONEY_COLUMNS
from planner import settings
from planner.errors import PlannerError
from planner.explain import assumptions, formula_steps, metric_help, not_modelled, pool_figures
from planner.geometry import config_hash
from planner.limits import ByteBudgetCache
from planner.plan import Plan
from planner.units import GIB, fmt_bytes, fmt_money, fmt_ms, fmt_num


def safe(render, *args, what: str = "this section", **kwargs) -> None:
    """Run a render function; an unexpected error becomes one line, never a traceback."""
    try:
        render(*args, **kwargs)
    except PlannerError as exc:
        st.error(f"Cannot draw {what}: {md(exc)}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the UI must never show a traceback
        st.error(f"Cannot draw {what}: {type(exc).__name__}: {md(exc)}", icon=":material/error:")


# --------------------------------------------------------------------------- shared result pieces


def binding_phrase(plan: Plan) -> str:
    """The limit that binds, in the words of the badge: "KV-cache memory", "TTFT SLO"."""
    from planner.capacity import LIMIT_LABELS

    binding = plan.kv_cache.binding_constraint
    return LIMIT_LABELS.get(binding, binding)


def admission_badge(plan: Plan) -> None:
    """Admitted or refused, and which limit binds (memory, ITL SLO, TTFT SLO, runtime, quota)."""
    kv = plan.kv_cache
    bound = binding_phrase(plan)
    if kv.admitted:
        st.badge(f"Admitted · {kv.requested_sequences:,} of at most {kv.admissible_sequences:,} sequences · bound by {bound}", icon=":material/check_circle:", color="green")
    else:
        st.badge(f"Refused by the {bound} · at most {kv.admissible_sequences:,} of {kv.requested_sequences:,} requested", icon=":material/block:", color="red")
        size_link(plan)
    limits = " · ".join(f"{LIMIT_NAMES.get(k, k)} {v:,}" for k, v in kv.limits.items())
    st.caption(f"Limits on concurrent sequences: {limits}.")


def size_link(plan: Plan) -> None:
    """A refused plan links to the Size page for its load (users and SLOs)."""
    params = {"size_users": str(plan.kv_cache.requested_sequences)}
    params["size_itl"] = f"{plan.inputs.itl_slo_ms or 0:g}"
    params["size_ttft"] = f"{plan.inputs.ttft_slo_ms or 0:g}"
    try:
        st.page_link("pages/size.py", label=f"Size a deployment for {plan.kv_cache.requested_sequences:,} sequences", icon=":material/dns:", query_params=params)
    except Exception:  # noqa: BLE001 - the page is not registered (a page run on its own, as in some tests)
        st.caption("The Size page answers how many GPUs this load needs.")


LIMIT_NAMES = {"memory": "memory", "latency_slo": "ITL SLO", "ttft_slo": "TTFT SLO", "runtime": "runtime", "tenant_quota": "tenant quota"}


# Drawn right after the headline on a session's first run, with a hidden button (style.FIRST_PAINT_KEY,
# hidden by the page style): once the page holds a metric and two animation frames have passed
# since, the browser has painted the headline, and the script clicks the button, which asks for the
# rest of the page (a rerun). A hidden tab runs no animation frames: the timer clicks it anyway.
# Both are elements of Streamlit's own bundle (st.html already styles the page): a custom
# component loaded its frame code and Arrow (about 200 KB) before the first metric.
_PAINTED_SCRIPT = """<script>
(() => {
  let done = false;
  const click = () => {
    const button = document.querySelector(".st-key-%(key)s button");
    if (done || !button) return done;
    done = true;
    button.click();
    return true;
  };
  const watch = () => {
    if (done) return;
    if (document.querySelector("[data-testid=stMetricValue]")) requestAnimationFrame(() => requestAnimationFrame(() => click() || requestAnimationFrame(watch)));
    else requestAnimationFrame(watch);
  };
  watch();
  const late = () => click() || setTimeout(late, 100);
  setTimeout(late, %(fallback_ms)d);
})();
</script>"""


def headline_first() -> bool:
    """Whether this run is one that :func:`first_paint_pause` stops after the headline numbers
    (a session's first Plan run, unless ``KVP_FIRST_PAINT_PAUSE_S`` is 0)."""
    return not st.session_state.get("_first_paint_done") and 0 < settings.kvp_first_paint_pause_s() <= 2


def first_paint_pause() -> None:
    """On a session's first run, stop after the headline numbers; the browser asks for the rest
    (charts, cards, the sidebar's controls) once it has painted them.

    Sending the whole page at once made a fresh browser build every element (plotly, tables, some
    forty inputs) before it painted the first metric: 13-31 s at load 10 against 3 s for a
    one-metric page; stopping after the headline took it to 3.5-4 s (benchmarks/bench_app.py).
    ``KVP_FIRST_PAINT_PAUSE_S`` is the longest the browser waits for its paint before it asks
    anyway (0 turns the headline-first run off; tests use 0).
    """
    first = headline_first()
    st.session_state["_first_paint_done"] = True  # any later run, whatever starts it, draws the whole page
    if first:
        st.button("Show the rest of the page", key=FIRST_PAINT_KEY)
        st.html(_PAINTED_SCRIPT % {"key": FIRST_PAINT_KEY, "fallback_ms": round(settings.kvp_first_paint_pause_s() * 1000)}, unsafe_allow_javascript=True)
        st.stop()


# --------------------------------------------------------------------------- results


def _load_delta(at: str, slo: float | None, judged: float, p95: bool) -> dict:
    """A latency metric's delta: the load it is timed at ("at N requests"), the estimate's p95, and
    the SLO verdict on ``judged`` (the estimate's p95, or an observed value as it is)."""
    shown = f"{at} · p95 {fmt_ms(judged)}" if p95 else at
    if slo is None:
        return {"delta": shown, "delta_color": "gray", "delta_arrow": "off"}
    met = judged <= slo
    return {"delta": f"{shown} {'meets' if met else 'misses'} {fmt_ms(slo)} SLO", "delta_color": "green" if met else "red", "delta_arrow": "off"}


def render_metrics(plan: Plan) -> None:
    kv, cap, lat = plan.kv_cache, plan.capacity, plan.latency
    help_of = metric_help(plan)
    capped = [s for s in plan.inspect.specs if not s.grows_per_token and s.window]
    growing = kv.bytes_per_token_per_sequence
    within = kv.bytes_per_token_within_windows
    if growing == 0 and within > 0:  # every cached layer is windowed (e.g. Mistral-7B v0.1)
        value = fmt_bytes(within)
        delta = "within the window" + ("s" if len(capped) > 1 else "") + " (up to " + ", ".join(f"{s.window:,}" for s in capped) + " tokens)"
    else:
        value = fmt_bytes(growing)
        # a windowed layer's bytes stop growing at its window: "+ 36 KiB/token in sliding layers up to 128 tokens"
        delta = ("+ " + ", ".join(f"{fmt_bytes(s.bytes_per_token)}/token in {s.kind} layers up to {s.window:,} tokens" for s in capped)) if capped else None
    row1 = st.columns(3)
    row2 = st.columns(3)
    per_replica_text = f"{cap.sequences_per_replica:,} per replica × {cap.replicas:,} replicas" if cap.replicas > 1 else "one replica"
    if cap.replicas > 1:
        max_delta = f"memory: {per_replica_text}"
    elif kv.binding_constraint != "memory":
        max_delta = f"memory alone: {kv.maximum_sequences_by_memory:,}"
    else:
        max_delta = None
    row1[0].metric("Max sequences", f"{kv.admissible_sequences:,}", delta=max_delta, delta_color="gray", delta_arrow="off", help=_help(help_of.max_sequences))
    ttft_slo, roof = plan.inputs.ttft_slo_ms, plan.roofline
    at = roof.load_label + ("" if roof.load_admitted else " (not admitted)")
    estimated = lat.source != "observed"
    row1[1].metric(
        "TTFT",
        fmt_ms(lat.time_to_first_token_ms),
        **_load_delta(at, ttft_slo, roof.ttft_p95_ms if estimated else lat.time_to_first_token_ms, estimated),
        help=_help(help_of.ttft),
    )
    row1[2].metric(
        "ITL",
        fmt_ms(lat.mean_inter_token_latency_ms),
        **_load_delta(at, plan.inputs.itl_slo_ms, roof.itl_p95_ms if estimated else lat.mean_inter_token_latency_ms, estimated),
        help=_help(help_of.itl),
    )
    row2[0].metric("KV bytes / token", value, delta=delta, delta_color="gray", delta_arrow="off", help=_help(help_of.kv_per_token))
    row2[1].metric(
        "Memory per sequence",
        f"{fmt_num(kv.mib_per_reserved_sequence)} MiB",
        delta=f"{kv.reserved_tokens_per_sequence:,} tokens reserved",
        delta_color="gray",
        delta_arrow="off",
        help=_help(help_of.memory_per_sequence),
    )
    cost = plan.cost
    if cost.per_million_output_tokens is not None:
        row2[2].metric(
            "Cost per hour",
            fmt_money(cost.deployment_per_hour),
            delta=f"{fmt_money(cost.per_million_output_tokens)} per M output tokens",
            delta_color="gray",
            delta_arrow="off",
            help=_help(help_of.cost),
        )
    else:
        row2[2].metric("Cost per hour", "–", delta="give a GPU-hour price", delta_color="gray", delta_arrow="off", help=_help(help_of.cost))
    if estimated and roof.accuracy_caveat:  # every published run like this one missed the same way by 1.5x or more
        st.warning(md(roof.accuracy_caveat), icon=":material/straighten:")


def _help(text: str) -> str:
    """A metric's help text (from :mod:`planner.explain`) as literal markdown ("$" is no formula)."""
    return md(text, limit=2000)


def _source_rows(ref) -> list[tuple[str, str]]:
    """Where the config came from: the Hub commit or the upload's hash (presets say it in the title)."""
    rows: list[tuple[str, str]] = []
    if ref.kind == "hub":
        rows.append(("Hub model", f"{md(ref.repo_id)} (revision {md(ref.revision or 'main')})"))
        rows.append(("Pinned commit", md(ref.commit) if ref.commit else "not resolved"))
    elif ref.kind == "upload":
        rows.append(("Uploaded config", f"{md(ref.name or 'config.json')}, sha256 {md(str(ref.config_hash)[:16])}…"))
    return rows


def _weights_row(plan: Plan) -> tuple[str, str]:
    """The model's weights, and beside them what one GPU holds once loaded when that reads
    differently: the memory chart's Weights bar is the per-GPU figure (a TP shard, plus buffers
    such as the RoPE cos/sin cache), which read as a second weights figure (14.96 vs 14.99 GiB)."""
    w = plan.weights
    source = "safetensors metadata" if str(w.source).startswith("safetensors") else "config estimate"
    text = f"{fmt_bytes(w.bytes)} ({md(w.dtype_label)}) · source: **{source}**" + ("" if source == "safetensors metadata" else f" ({md(w.source)})")
    resident = plan.capacity.model_resident_bytes
    if fmt_bytes(resident) != fmt_bytes(w.bytes):
        text += f" · **{fmt_bytes(resident)} per GPU** as loaded (the memory chart's Weights: {md(plan.capacity.model_resident_source)})"
    return ("Weights", text)


def render_geometry(plan: Plan, ref, notes: tuple[str, ...]) -> None:
    ins, w = plan.inspect, plan.weights
    with st.container(border=True):
        st.markdown(f"**Geometry** · {md(ref.label())}")
        layers = ", ".join(f"{n} {k}" for k, n in ins.layers.items())
        rows = [
            *_source_rows(ref),
            ("Model type", md(ins.model_type) + (f" (from {md(ins.config_path)})" if ins.config_path else "")),
            ("Layers", layers or "–"),
            ("KV heads per GPU", f"{ins.kv_heads_per_gpu:,} (TP {ins.tp})"),
            ("Head dims (K / V)", f"{ins.head_dim:,} / {ins.v_head_dim:,}"),
            ("Windows", ", ".join(f"{k}: {v:,} tokens" for k, v in ins.windows.items()) or "none"),
            ("MLA latent", f"{ins.mla_latent_dim:,} elements" if ins.mla_latent_dim else "none"),
            ("KV dtype", f"{ins.kv_dtype}" + (f" ({md(ins.kv_dtype_source)})" if ins.kv_dtype_source != "given" else "")),
            ("Recurrent state / sequence", fmt_bytes(ins.state_bytes_per_sequence) if ins.state_bytes_per_sequence else "none"),
            ("Parameters", f"{w.total_params:,} total, {w.active_params:,} active"),
            _weights_row(plan),
        ]
        if ins.cross_bytes_per_encoder_token:
            rows.append(("Cross-attention / encoder token", fmt_bytes(ins.cross_bytes_per_encoder_token)))
        st.markdown("\n".join(f"- **{k}:** {v}" for k, v in rows))
        groups = []
        for s in ins.specs:
            label = s.kind + (f" (window {s.window:,})" if s.window else "") + (" · MLA latent" if s.cache == "latent" else f" · {s.cache}" if s.cache != "kv" else "")
            groups.append(f"- **{label} ×{s.num_layers:,}:** {s.shape} → {s.bytes_per_token_per_layer:,} B per {'entry' if s.compress_ratio > 1 else 'token'} per layer, **{s.bytes_per_token:,} B** per token")
        if groups:
            st.markdown("**Cached layer groups** (one GPU, " + ins.kv_dtype + ")\n" + "\n".join(groups))
        cache_notes = [n for n in notes if "served from the local cache" in n]
        for n in cache_notes:
            st.caption(f":material/cached: {md(n[:1].upper() + n[1:])}: the Hub was not asked again; the commit above is the cached one.")
        all_notes = [n for n in (*notes, *plan.notes) if n not in cache_notes]
        if all_notes:
            st.caption("Notes: " + " · ".join(md(n) for n in all_notes))


def render_formulas(plan: Plan) -> None:
    """The formula steps of :func:`planner.explain.formula_steps`, one group a paragraph."""
    parts = []
    for group in formula_steps(plan):
        parts.append(f"**{group.title}**\n" + "\n".join(f"- {md(line, limit=2000)}" for line in group.lines))
    st.markdown("\n\n".join(parts))


def render_assumptions(plan: Plan) -> None:
    """The assumptions and what is not modelled (:mod:`planner.explain`: generated from the terms this plan's models computed)."""
    notes = "\n".join(f"- **{md(n.title)}**: {md(n.text, limit=2000)}" for n in assumptions(plan))
    missing = "\n".join(f"- **{md(n.title)}**: {md(n.text, limit=2000)}" for n in not_modelled(plan))
    st.markdown(f"**Assumptions**\n{notes}\n\n**Not modelled**\n{missing}")


# --------------------------------------------------------------------------- cards

CHART_TABS = ("K/V vs context", "Context × concurrency", "Latency", "Roofline")


# Figures shared by every session of the process: a team opening the same link builds each chart
# once (a figure is a pure function of the plan's inputs and the model); bounded in bytes.
_FIGURES = ByteBudgetCache(32 << 20)


def _memo_key(fig_fn, r: Shown, args: tuple) -> tuple:
    """What a figure depends on: the chart, the model (config, checkpoint counts, quantization),
    the plan's inputs and any plain extra argument (the log-scale toggle)."""
    model = r.model
    extras = tuple(a for a in args if isinstance(a, (bool, int, float, str)))
    return (fig_fn.__name__, model.geometry.config_hash, config_hash({"c": model.parameter_counts, "q": model.quantization}), r.plan.inputs.model_dump_json(), extras)


def _chart(fig_fn, *args, key: str, what: str, shown: Shown | None = None) -> None:
    """A plan chart with its title written above it (see :func:`pages.ui.charts._figure`);
    with ``shown``, the figure comes from the process-wide memo when another session built it."""

    def draw() -> None:
        memo = _memo_key(fig_fn, shown, args) if shown is not None else None
        fig = _FIGURES.get(memo) if memo is not None else None
        if fig is None:
            fig = fig_fn(*args)
            if memo is not None:
                _FIGURES.put(memo, fig)
        st.markdown(f"**{charts.title_of(fig)}**")
        st.plotly_chart(fig, config=charts.PLOT_CONFIG, key=key)

    safe(draw, what=what)


def card_headline(r: Shown) -> None:
    """The headline metrics and the admission badge."""
    render_metrics(r.plan)
    admission_badge(r.plan)


def card_latency_models(r: Shown) -> None:
    """Roofline or roofline + measured kernels (AIConfigurator) side by side with their ratio."""
    plan = r.plan
    if plan.latency.source == "observed":
        return
    measured_on = st.toggle(
        "Latency model: roofline + measured kernels",
        key="latency_model_measured",
        value=False,
        help="Off: the planner's roofline (fitted to measured kernels). On: also NVIDIA AIConfigurator's database of measured kernel timings (the serving engine's own: vLLM, SGLang or TensorRT-LLM, in the plan's weight format), side by side; where it has no data for this GPU, model family or dtype, it says so and the roofline stands.",
    )
    if not measured_on:
        return
    from planner import measured  # lazy: the first paint never loads it

    with st.spinner("Loading AIConfigurator's measured kernels (first time about 2 s)…"):
        cmp = measured.compare(plan, r.model)
    if not cmp.covered:
        st.info(f"Measured kernels not available: {cmp.reason}. Showing the roofline only.", icon=":material/info:")
        return
    n = plan.roofline.load_label
    ratio = cmp.difference()
    rows = [
        ("Prefill, one prompt (at 1 request)", cmp.roofline_prefill_ms_at_1, cmp.prefill_ms_at_1, ratio.get("prefill_at_1")),
        ("ITL (at 1 request)", cmp.roofline_itl_ms_at_1, cmp.itl_ms_at_1, ratio.get("itl_at_1")),
        (f"ITL, static batch ({n})", cmp.roofline_itl_ms_at_n, cmp.itl_ms_at_n, ratio.get("itl_at_n")),
    ]
    st.table(
        {"figure": [x[0] for x in rows], "roofline": [fmt_ms(x[1]) for x in rows], "measured": [fmt_ms(x[2]) for x in rows], "roofline ÷ measured": [f"{x[3]:.2f}×" if x[3] else "–" for x in rows]}
    )
    st.caption(
        f"Measured: {cmp.source}; {cmp.measured_share:.0%} of the decode time from measured rows (the rest AIConfigurator's own estimates). Static batches on both sides; the headline TTFT/ITL add the served queue and prefill chunks."
    )


def card_serving(r: Shown) -> None:
    """Throughput at the load and at most, the load the figures assume, their accuracy bands."""
    if r.plan.latency.source == "observed":
        return
    from pages.ui.serving import render_serving

    safe(render_serving, r.plan, what="the serving figures")


def card_geometry(r: Shown) -> None:
    render_geometry(r.plan, r.ref, r.notes)


def card_export(r: Shown) -> None:
    safe(export.render_share, r.plan, r.ref, r.config, r.model, what="the share and export controls")


def card_memory(r: Shown) -> None:
    """The memory stack of one GPU and the pool figures under it."""
    plan = r.plan
    _chart(charts.fig_memory, plan, key="chart_memory", what="the memory chart", shown=r)
    st.caption(pool_figures(plan))  # tokens, sequences admitted, steady state: each figure named
    extra = []
    if plan.prefix.extra_sequences:
        extra.append(f"prefix sharing adds {plan.prefix.extra_sequences:,} sequences")
    if plan.cost.per_million_output_tokens is not None:
        extra.append(f"{fmt_money(plan.cost.per_million_output_tokens)} per million output tokens")
    if extra:
        st.caption(" · ".join(extra))


def card_vllm_preview(r: Shown) -> None:
    """What vLLM will print at start-up for this plan, the budget behind it and the command line."""
    plan = r.plan
    if plan.inputs.runtime != "vllm":
        return
    with st.container(border=True):
        st.markdown(f"**vLLM start-up preview** · vLLM {plan.inputs.vllm_version}")
        engine = plan.kv_cache.engine
        if engine is not None and not engine.applies and engine.reason:  # an architecture this release cannot run: a fact, not an error
            st.info(f"No start-up preview: {md(engine.reason)}", icon=":material/info:")
            return
        safe(_render_vllm_preview, r, what="the vLLM start-up preview")


def _render_vllm_preview(r: Shown) -> None:
    from pages.ui.state import measured_budget
    from planner.engines.vllm import vllm_preview

    plan = r.plan
    preview = vllm_preview(plan, r.model)  # the plan's own budget: its rows add up to what vLLM will log
    measured = measured_budget(plan)
    serve, engine, cap = plan.serve, plan.kv_cache.engine, plan.capacity
    if preview.log_lines:
        st.code("\n".join(preview.log_lines), language=None, wrap_lines=True)
    if serve.note:
        st.warning(serve.note, icon=":material/warning:")
    elif preview.refusal:
        st.warning(f"vLLM {plan.inputs.vllm_version} refuses to start: {preview.refusal}", icon=":material/block:")
    # a markdown table: light to draw, so the charts below are not held up
    # two narrow columns (a third with the sources overflowed the card at 1280 and 390 px); each
    # term's source follows as a numbered note
    rows = [f"| {md(t.name)} [{i}] | {t.bytes / GIB:,.2f} |" for i, t in enumerate(preview.budget.terms, 1)]
    title = f"Available KV cache memory: {preview.budget.available_kv_bytes / GIB:,.2f} GiB per GPU, term by term"
    with st.expander(title):
        st.markdown("| term | GiB |\n|---|--:|\n" + "\n".join(rows) + f"\n| **= available** (what vLLM will log; the headline's sequences come from it) | **{preview.budget.available_kv_bytes / GIB:,.2f}** |")
        st.caption("\n\n".join(f"[{i}] {md(t.source, limit=1200)}" for i, t in enumerate(preview.budget.terms, 1)))  # our own source texts: whole
        st.caption(
            f"Headroom {cap.headroom_bp / 100:g} % is vLLM's `--gpu-memory-utilization {cap.gpu_memory_utilization:g}` of the total CUDA reports; "
            "the workspace is the profiling peak, non-torch memory and CUDA graphs above (enter a workspace to replace those predictions with your own figure)."
        )
        if measured:  # a probe on this GPU: beside the prediction, never silently mixed into its sum
            predicted = {t.name: -t.bytes for t in preview.budget.terms}
            said = "; ".join(f"{md(name)} {value / GIB:,.2f} GiB (predicted {predicted[name] / GIB:,.2f})" if name in predicted else f"{md(name)} {value / GIB:,.2f} GiB" for name, value in measured.items())
            st.caption(f"Measured by the probe on this GPU: {said}. Set the workspace to their sum to plan with them.")
    batching = f"{serve.max_num_batched_tokens:,} tokens a step" + (f", {serve.max_num_seqs:,} sequences a replica" if serve.max_num_seqs else "")
    st.caption(f"Batching: {batching} ({md(serve.batching_source)}).")
    if engine is not None and engine.why:
        st.caption(f"Admission: {engine.why} The caption under the memory chart above names each count.")
    if preview.command:
        st.code(preview.command, language="bash" if plan.inputs.entry_point == "serve" else "python", wrap_lines=True)


@st.fragment
def card_chart_tabs(r: Shown) -> None:
    """The chart tabs; only the open tab's charts are built (on_change="rerun" makes .open reliable).

    A fragment: switching tabs or the log-scale toggle reruns only this card, not the page.
    """
    plan, model = r.plan, r.model
    tabs = st.tabs(list(CHART_TABS), key="chart_tab", on_change="rerun")
    if tabs[0].open is not False:
        with tabs[0]:
            log = st.toggle("Log scales", key="kv_log", value=False, help="Log-log axes show window caps and small caches next to the MHA line.")
            _chart(charts.fig_kv_context, plan, log, key="chart_kv", what="the K/V chart", shown=r)
    if tabs[1].open is not False:
        with tabs[1]:
            _chart(charts.fig_heatmap, plan, model, key="chart_heatmap", what="the heatmap", shown=r)
    if tabs[2].open is not False:
        with tabs[2]:
            _chart(charts.fig_waterfall, plan, key="chart_waterfall", what="the latency waterfall", shown=r)
            _chart(charts.fig_itl, plan, model, key="chart_itl", what="the ITL chart", shown=r)
    if tabs[3].open is not False:
        with tabs[3]:
            _chart(charts.fig_roofline, plan, key="chart_roofline", what="the roofline", shown=r)


def _table(rows: list[list[str]], transpose: bool = False) -> str:
    """A markdown table of rows (the first the header; numbers right-aligned); ``transpose``:
    the rows become columns (a few wide columns fit a phone where many narrow ones do not)."""
    if transpose:
        rows = [list(col) for col in zip(*rows, strict=True)]
    head, *body = rows
    return "\n".join(["| " + " | ".join(head) + " |", "|---" + "|--:" * (len(head) - 1) + "|", *("| " + " | ".join(md(c) for c in row) + " |" for row in body)])


def card_cache(r: Shown) -> None:
    """The session workload's prefix cache: hit rate per tier, TTFT with and without the tiers
    below the GPU, what is shareable, the engines' flags, and the CPU tier chart."""
    plan = r.plan
    inputs = plan.inputs
    if inputs.sessions_per_min is None and not (inputs.cpu_tier_gib or inputs.disk_tier_gib):
        return
    with st.container(border=True):
        st.markdown("**Prefix cache under sessions**")
        cache = plan.cache
        if not cache.applies:
            st.info(f"Not modelled: {md(cache.reason)}.", icon=":material/info:")
            return
        safe(_render_cache, r, what="the cache card")


def _render_cache(r: Shown) -> None:
    from planner.cache.explain import TIER_NAMES, tier_rows, ttft_rows

    plan = r.plan
    cache = plan.cache
    below = " + ".join(TIER_NAMES[t.name] for t in cache.tiers[1:])
    a, g, n = cache.ttft, cache.ttft_gpu_only, cache.ttft_no_cache
    c1, c2, c3 = st.columns(3)
    if below:
        c1.metric("Hit rate", f"{cache.hit_rate:.1%}", f"{(cache.hit_rate - cache.hit_rate_gpu_only) * 100:+.1f} pts by {below}", help="Share of the turns' prompt tokens served from a cache (Che's LRU model per tier).")
        c2.metric("TTFT p95", fmt_ms(a.p95_ms), f"{a.p95_ms - g.p95_ms:+,.1f} ms vs GPU pool alone", delta_color="inverse", help=f"GPU pool alone: mean {fmt_ms(g.mean_ms)}, p95 {fmt_ms(g.p95_ms)}.")
    else:
        c1.metric("Hit rate (GPU pool)", f"{cache.hit_rate:.1%}", help="Share of the turns' prompt tokens served from the GPU pool's prefix cache (Che's LRU model). Add a CPU tier to see what it adds.")
        c2.metric("TTFT p95", fmt_ms(a.p95_ms), f"{a.p95_ms - n.p95_ms:+,.1f} ms vs no prefix cache", delta_color="inverse")
    c3.metric(
        "Prefill GPUs freed", f"{cache.gpu_seconds_saved_per_hour / 3600:,.2f}",
        help=f"Prefill GPU time the cache saves against recomputing every prompt, {cache.gpu_seconds_saved_per_hour:,.0f} GPU-s an hour, as GPUs busy all hour; "
        f"{cache.gpu_seconds_saved_by_offload_per_hour / 3600:,.2f} of them by the tiers below the GPU.",
    )  # fmt: skip
    if not a.keeps_up:
        st.warning(f"A replica cannot carry {cache.requests_per_s:,.3g} requests/s even at its memory ceiling: the wait shown is a burst's. Add replicas or shorten the turns.", icon=":material/warning:")
    st.caption(
        f"{cache.sessions_per_min:,.4g} sessions/min × {cache.turns} turns = {cache.requests_per_s:,.3g} requests/s; mean prompt {cache.mean_prompt_tokens:,.0f} tokens; "
        f"{cache.concurrency_per_replica:,} in flight a replica; a turn takes {cache.turn_seconds:,.2f} s in the engine."
    )
    st.markdown(_table(ttft_rows(plan), transpose=True))
    st.markdown(_table(tier_rows(plan), transpose=True))
    _chart(charts.fig_cache_tiers, plan, key="chart_cache", what="the cache chart", shown=r)
    with st.expander("What is shared, and with whom (tenant-scoped keys)"):
        st.markdown("\n".join(f"- **{md(part)}**: {md(who)}" for part, who in cache.shareable))
    if cache.vllm_flags or cache.sglang_flags:
        with st.expander("Engine flags for these tiers"):
            if cache.vllm_flags:
                flags = [f for f in cache.vllm_flags if not f.startswith("environment: ")]
                env = [f.removeprefix("environment: ") for f in cache.vllm_flags if f.startswith("environment: ")]
                st.markdown(f"vLLM ({md(cache.connector)} connector), also in the start-up command above:")
                st.code(" ".join([*env, "vllm serve ...", *flags]), language="bash", wrap_lines=True)
            if cache.sglang_flags:
                st.markdown("SGLang hierarchical cache" + (", to add to the start-up command above:" if r.plan.inputs.runtime == "sglang" else ":"))
                st.code(f"python -m sglang.launch_server ... {cache.sglang_flags}", language="bash", wrap_lines=True)


def card_disagg(r: Shown) -> None:
    """The plan's workload on the disaggregated pools its ``disagg`` input names (Hardware and
    memory): both pools, the KV transfer, TTFT with it, and whether the split pays."""
    spec = r.plan.inputs.disagg
    if not spec:
        return
    with st.expander(f"Disaggregated prefill / decode: {md(spec)}", icon=":material/call_split:", expanded=True, key="disagg_box"):
        safe(_render_disagg, r, what="the disaggregated pools")


def _render_disagg(r: Shown) -> None:
    from planner import disagg

    memo_key = (r.plan.inputs.model_dump_json(), id(r.model))
    memo = st.session_state.get("_disagg_memo")
    if memo is not None and memo[0] == memo_key:
        d = memo[1]
    else:
        try:
            d = disagg.plan_of(r.plan, r.model)
        except PlannerError as exc:
            st.warning(error_sentence(exc), icon=":material/warning:")
            return
        st.session_state["_disagg_memo"] = (memo_key, d)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("TTFT p95", fmt_ms(d.ttft_p95_ms), help="Prefill queue and prefill, the KV transfer, the handover steps and the decode server's API hop.")
    c2.metric("KV transfer", fmt_ms(d.kv_transfer_ms), help=f"{d.kv_transfer.bytes_per_request / 2**20:,.0f} MiB a request over the {d.kv_transfer.link}.")
    c3.metric("TPOT", fmt_ms(d.tpot_ms), help="The decode pool's step: no prefill chunks in its steps, so mean and p95 are one.")
    c4.metric("Cost", fmt_money(d.cost_per_hour) + "/h", help=f"{d.gpus:,} GPUs: {d.prefill.gpu_count:,} prefill, {d.decode.gpu_count:,} decode.")
    st.dataframe(disagg.pool_rows(d), hide_index=True, width="stretch", key="disagg_pools_table", column_config=MONEY_COLUMNS)
    st.caption(md(disagg.describe(d), limit=2000))  # the library's own text: the pools were checked by the parser
    st.caption(md(disagg.own_figures_note(d, r.plan.inputs)))


def card_assumptions(r: Shown) -> None:
    with st.expander("Assumptions and omissions", icon=":material/info:"):
        safe(render_assumptions, r.plan, what="the assumptions")


def card_formulas(r: Shown) -> None:
    with st.expander("Formulas with this plan's numbers", icon=":material/function:"):
        safe(render_formulas, r.plan, what="the formulas")


# --------------------------------------------------------------------------- layout


def render_results(r: Shown) -> None:
    """The Plan page's results: headline, then two columns of cards, then the expanders.

    To add a card, write a ``card_*`` function above and call it here where it belongs.
    """
    card_headline(r)
    first_paint_pause()  # a session's first run ends here: the headline numbers, then the rest
    if r.plan.inputs.disagg:  # a plan of pools (a Size row's pool link): the pools first, under the headline
        safe(card_disagg, r, what="the disaggregated pools")
    safe(card_latency_models, r, what="the measured-kernel comparison")
    left, right = st.columns([5, 7])
    with left:
        card_geometry(r)
        card_export(r)
    with right:
        card_serving(r)
        card_memory(r)
        card_chart_tabs(r)
        card_vllm_preview(r)
        card_sglang_preview(r)
    safe(card_cache, r, what="the cache card")
    safe(measured.render, r, what="the measured-beside-predicted card")
    card_assumptions(r)
    card_formulas(r)
