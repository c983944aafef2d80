"""Size page: how many GPUs, of which kind, at which TP, for a workload under SLOs.

Thin UI over :func:`planner.sizing.size`: the model and context come from the session's plan
(the Plan page); the workload, SLOs and candidates are this page's controls. The address bar
holds a share link (the plan's parameters plus ``size_*``); each row opens as a plan.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit, urlunsplit

import plotly.graph_objects as go
import streamlit as st

from pages.ui import state, style, urlstate
from pages.ui.export import base_url
from pages.ui.models import active_model, active_upload_config
from planner import sizing
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.limits import BOUNDS
from planner.plan import make_inputs
from planner.plan.sections import COST_BASIS_NAME
from planner.share import SIZE_ENGINES, SIZE_KV_CHOICES, decode_size_params, share_url

KV_CHOICES, ENGINES = SIZE_KV_CHOICES, SIZE_ENGINES
USERS, RATE, SESSIONS = "Concurrent users", "Requests per second", "The plan's sessions"
# Opening workload: 100 users, p95 ITL 50 ms (reading speed with margin), TTFT 2 s.
DEFAULTS = {"size_mode": USERS, "size_users": 100, "size_rate": 5.0, "size_ttft": 2000.0, "size_itl": 50.0, "size_gpus": list(CATALOG), "size_kvs": ["bf16", "fp8"], "size_disagg": False}
PARAM_OF = {"size_users": "size_users", "size_rate": "size_rate", "size_ttft": "size_ttft", "size_itl": "size_itl", "size_gpus": "size_gpus", "size_kvs": "size_kv", "size_engines": "size_eng"}


# The Alternatives table's columns a row is ranked and chosen by, right after its links.
SIZE_RANKED = ("pools", "GPU", "GPUs", "$/h", "$/M tokens", "p95 TTFT ms", "p95 ITL ms", "KV")


def opening_values(plan_values: dict) -> dict:
    """What the page opens on the first time: the plan's load, GPU and SLOs where it has them
    (a plan of 64 sequences on H200s sizes 64 users on H200s), else :data:`DEFAULTS`."""
    out = dict(DEFAULTS)
    sequences, gpu = plan_values.get("sequences"), plan_values.get("gpu")
    if isinstance(sequences, int) and BOUNDS["users"].lo <= sequences <= BOUNDS["users"].hi:
        out["size_users"] = sequences
    lower = {g.lower(): g for g in CATALOG}
    if plan_values.get("device_gib") is None and isinstance(gpu, str) and gpu.lower() in lower:
        out["size_gpus"] = [lower[gpu.lower()]]
    if isinstance(plan_values.get("sessions_per_min"), (int, float)):  # a session workload: its turns are the requests
        out["size_mode"] = SESSIONS
    for key, field in (("size_ttft", "ttft_slo_ms"), ("size_itl", "itl_slo_ms")):
        if isinstance(plan_values.get(field), (int, float)) and plan_values[field] > 0:
            out[key] = float(plan_values[field])
    return out


def apply_link_params() -> None:
    """``size_*`` query parameters (a share link, or a refused plan's link) into the controls,
    once per distinct set (:func:`planner.share.decode_size_params`); every value it could not
    take joins the restore notice."""
    params = {k: v for k, v in st.query_params.to_dict().items() if k.startswith("size_")}
    if not params or params == st.session_state.get("size_params_applied"):
        return
    st.session_state["size_params_applied"] = params
    values, notes = decode_size_params(params)
    s = st.session_state
    if "size_mode" in values:
        s["size_mode"] = {"users": USERS, "rate": RATE, "sessions": SESSIONS}[values.pop("size_mode")]
    for key, value in values.items():
        s[{"size_kv": "size_kvs", "size_eng": "size_engines"}.get(key, key)] = value
    urlstate.add_to_notice([note.text() for note in notes], restored="the sizing search")


def app_root() -> str:
    """The app's root address (the Plan page), whichever page is open."""
    parts = urlsplit(base_url())
    path = parts.path
    for page in ("/size", "/simulate", "/compare", "/probe", "/plan"):
        if path.endswith(page):
            path = path[: -len(page)] + "/"
    return urlunsplit((parts.scheme, parts.netloc, path or "/", "", ""))


@st.cache_data(show_spinner=False, max_entries=32)
def run_size(
    model_key: str, _model, base: dict, users: int | None, rate: float | None, ttft: float | None, itl: float | None, gpus: tuple[str, ...], kvs: tuple[str, ...], disagg: bool = False,
    engines: tuple[str, ...] | None = None,
) -> sizing.SizingResult:
    return sizing.size(_model, base, users=users, rate_per_s=rate, ttft_p95_ms=ttft, itl_p95_ms=itl, gpus=list(gpus), kv_dtypes=kvs, disagg=disagg, frontier=True, engines=engines)


def frontier_figure(points: list, itl_slo: float | None) -> go.Figure:
    """Output tokens/s per GPU against tokens/s per user (1000 / mean TPOT) for every point the
    search visited, aggregated and disaggregated, the Pareto front drawn and the ITL SLO's region shaded."""
    fig = go.Figure()
    if itl_slo:
        fig.add_vrect(x0=1000.0 / itl_slo, x1=max([p.tokens_per_s_per_user for p in points] + [1000.0 / itl_slo]) * 1.05, fillcolor="rgba(46,160,67,0.08)", line_width=0, layer="below")
    for disaggregated, name, colour in ((False, "aggregated", "#1f77b4"), (True, "disaggregated", "#d62728")):
        mine = [(i, p) for i, p in enumerate(points) if p.disaggregated == disaggregated]
        if not mine:
            continue
        fig.add_scatter(
            x=[p.tokens_per_s_per_user for _, p in mine], y=[p.tokens_per_s_per_gpu for _, p in mine], mode="markers", name=name, customdata=[i for i, _ in mine],
            text=[f"{p.label()}<br>{p.gpus} GPUs, ${p.cost_per_hour:,.2f}/h, ${p.cost_per_million_tokens:,.3f} per M tokens<br>p95 TTFT {p.ttft_p95_ms:,.0f} ms, ITL {p.itl_p95_ms:,.1f} ms{'' if p.meets_slo else ' (misses the SLOs)'}" for _, p in mine],
            marker=dict(color=colour, size=[9 if p.pareto else 5 for _, p in mine], opacity=[0.95 if p.meets_slo else 0.3 for _, p in mine]),
            hovertemplate="%{text}<br>%{y:,.0f} tok/s/GPU at %{x:,.1f} tok/s/user<extra></extra>",
        )  # fmt: skip
    front = sorted((p for p in points if p.pareto), key=lambda p: p.tokens_per_s_per_user)
    fig.add_scatter(x=[p.tokens_per_s_per_user for p in front], y=[p.tokens_per_s_per_gpu for p in front], mode="lines", name="Pareto front", line=dict(color="#444", width=1.5), hoverinfo="skip")
    fig.update_layout(
        title="Throughput vs interactivity", xaxis_title="tokens/s per user (1000 / TPOT)", yaxis_title="output tokens/s per GPU",
        height=420, margin=dict(l=10, r=10, t=40, b=10), legend=dict(orientation="h", y=-0.2), clickmode="event+select",
        yaxis_tickformat=",~r",  # "6,000" tok/s as the tables write it, not "6000"
    )  # fmt: skip
    return fig


def _plan_link(root: str, ref, values: dict, upload_config, pools: bool = False) -> str:
    """The share link that opens ``values`` (plan inputs) on the Plan page; their ``disagg`` (the
    pools) only when ``pools`` (a pool's link: the Plan page's pools card shows both pools)."""
    return share_url(root, urlstate.share_params(ref, make_inputs(**{k: v for k, v in values.items() if pools or k != "disagg"}), upload_config))


def _pool_links(root: str, ref, rec: sizing.Recommendation, ttft: float | None, itl: float | None, upload_config) -> dict[str, str]:
    """A disaggregated deployment's two plan links (role -> link): each pool's shape at the
    deployment's request rate, with both pools and the page's SLOs (:meth:`sizing.Recommendation.pool_inputs`)."""
    return {role: _plan_link(root, ref, rec.pool_inputs(role, ttft, itl), upload_config, pools=True) for role in ("prefill", "decode")}


def pareto_figure(recs: list[sizing.Recommendation]) -> go.Figure:
    """Cost per hour against p95 ITL: every deployment faint, each GPU's Pareto front drawn."""
    fig = go.Figure()
    for gpu in dict.fromkeys(r.gpu for r in recs):
        mine = sorted((r for r in recs if r.gpu == gpu), key=lambda r: (r.cost_per_hour, r.itl_p95_ms))
        front, best = [], math.inf
        for r in mine:
            if r.itl_p95_ms < best:
                front.append(r)
                best = r.itl_p95_ms
        text = [f"{r.gpu_count} × {r.gpu} TP {r.tp} ×{r.replicas}, {r.kv_dtype}" for r in front]
        fig.add_scatter(
            x=[r.cost_per_hour for r in front], y=[r.itl_p95_ms for r in front], mode="lines+markers", name=gpu, text=text, hovertemplate="%{text}<br>$%{x:.2f}/h, ITL %{y:.1f} ms<extra></extra>"
        )
    fig.add_scatter(x=[r.cost_per_hour for r in recs], y=[r.itl_p95_ms for r in recs], mode="markers", name="all deployments", marker=dict(color="rgba(120,120,120,0.35)", size=6), hoverinfo="skip")
    fig.update_layout(title="Cost versus p95 ITL: the Pareto front per GPU", xaxis_title="cost ($ per hour)", yaxis_title="p95 ITL (ms)", height=380, margin=dict(l=10, r=10, t=40, b=10), xaxis_tickprefix="$", xaxis_tickformat=",~r", legend=dict(orientation="h", y=-0.25))  # legend under the plot: at its right it took half a phone's width
    return fig


def main() -> None:
    state.enter_page("size")  # the Plan page re-seeds its widgets when entered from here
    urlstate.restore_from_query_params("size")  # a share link carries the plan (model, context) too
    values = dict(state.plan_values())
    for key, value in opening_values(values).items():
        st.session_state.setdefault(key, value)
    apply_link_params()
    ref, model, _notes = active_model()
    upload_config = active_upload_config()
    plan_engine = values.get("runtime") if values.get("runtime") in ENGINES else "vllm"
    st.session_state.setdefault("size_engines", [plan_engine])

    st.title("Size a deployment")
    s = st.session_state
    urlstate.render_restore_notice()  # one notice: the plan's and the search's parameters a link could not take
    answer_box = st.container()
    with st.container(border=True):
        c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
        sessions = values.get("sessions_per_min")
        modes = (USERS, RATE, SESSIONS) if sessions is not None else (USERS, RATE)
        if s.get("size_mode") not in modes:
            s["size_mode"] = USERS
        mode = c1.radio("Workload", modes, key="size_mode", horizontal=True,
                        help="The plan's sessions: the multi-turn session workload set in the Plan page's cache inputs (sessions a minute x turns, think time, shared prefix); the search also tries CPU KV tiers.")
        if mode == SESSIONS:
            c2.markdown(f"{sessions:,.4g} sessions/min × {values.get('turns') or 1} turns  \n(set on the Plan page)")
        elif mode == USERS:
            c2.number_input("Concurrent users", **BOUNDS["users"].widget(), step=10, key="size_users", help="Sequences held at once (each with the plan's context).")
        else:
            c2.number_input("Requests per second", 0.001, BOUNDS["size_rate"].hi, step=0.5, key="size_rate", format="%.3f")
        c3.number_input("TTFT p95 SLO (ms)", 0.0, BOUNDS["ttft_p95_ms"].hi, step=100.0, format="%g", key="size_ttft", help="0 = no TTFT SLO.")
        c4.number_input("ITL p95 SLO (ms)", 0.0, BOUNDS["itl_p95_ms"].hi, step=5.0, format="%g", key="size_itl", help="0 = no ITL SLO.")
        c1, c2, c3 = st.columns([3, 2, 2])
        gpus = c1.multiselect("GPUs to consider", list(CATALOG), key="size_gpus")
        kvs = c2.multiselect("KV dtypes", list(KV_CHOICES), key="size_kvs")
        engines = c3.multiselect("Engines", list(ENGINES), key="size_engines", help="Each engine's own start-up sizing and admission: vLLM's block reservation, SGLang's token pool (its GPU profiles: no H100-PCIe, H100-NVL or AMD cards).")
        st.toggle(
            "Also search disaggregated prefill / decode pools", key="size_disagg",
            help="Prefill and decode on separate replicas (vLLM NixlConnector, SGLang PD, llm-d, Dynamo), mixed GPU kinds allowed, ranked with the aggregated deployments.",
        )  # fmt: skip
    users = int(s["size_users"]) if mode == USERS else None
    rate = float(s["size_rate"]) if mode == RATE else None
    ttft = float(s["size_ttft"]) or None
    itl = float(s["size_itl"]) or None
    size_params = {"size_users": str(users)} if users is not None else {"size_rate": f"{rate:g}"} if rate is not None else {"size_sessions": "1"}
    size_params |= {"size_ttft": f"{ttft or 0:g}", "size_itl": f"{itl or 0:g}"}
    size_params["size_gpus"] = ",".join(gpus) if set(gpus) != set(CATALOG) else "all"  # the page opens on the plan's GPU: a link says which
    if list(kvs) != DEFAULTS["size_kvs"]:
        size_params["size_kv"] = ",".join(kvs)
    if list(engines) != [plan_engine]:
        size_params["size_eng"] = ",".join(engines)
    searched = None if list(engines) == [plan_engine] else tuple(engines)  # the plan's engine alone: as before
    disagg = bool(s["size_disagg"])
    if disagg:
        size_params["size_disagg"] = "1"

    base = {k: v for k, v in values.items() if v is not None}
    if not gpus or not kvs or not engines:
        answer_box.warning("Choose at least one GPU, one KV dtype and one engine.")
        return
    try:
        with st.spinner("Searching GPU × TP × KV dtype…"):
            result = run_size(ref.model_dump_json() + str(id(model)), model, base, users, rate, ttft, itl, tuple(gpus), tuple(kvs), disagg, searched)
    except PlannerError as exc:
        answer_box.error(state.error_sentence(exc), icon=":material/block:")
        return
    recs = result.recommendations
    cap_key = (ref.model_dump_json(), repr(sorted(base.items())), users, rate, ttft, itl, tuple(gpus), tuple(kvs), disagg, searched)
    capacity = s.get("size_capacity") if s.get("size_capacity_key") == cap_key else None
    if capacity:
        aggregated = [r for r in recs if not r.disaggregated]
        recs = [r.model_copy(update={"capacity": capacity[aggregated.index(r)]}) if r in aggregated[: len(capacity)] else r for r in recs]
        result = result.model_copy(update={"recommendations": recs})

    plan_params = urlstate.share_params(ref, make_inputs(**values), upload_config) if state.build_plan(values, model)[0] is not None else {}
    root = app_root()
    link = share_url(root, plan_params | size_params)  # the root: app.py opens size_* links on this page
    if {k: v for k, v in st.query_params.to_dict().items()} != plan_params | size_params:
        s["size_params_applied"] = size_params
        st.query_params.from_dict(plan_params | size_params)

    with answer_box:
        st.success(f"**{result.answer.replace(' ' + result.median_check, '') if result.median_check else result.answer}**", icon=":material/check_circle:")
        if result.median_check:  # the best breaks an SLO at its published runs' medians: said apart, as a warning
            st.warning(result.median_check, icon=":material/warning:")
        ctx = result.searched["workload"]["context_tokens"]
        st.caption(
            f"{ref.label()} at the plan's {ctx:,}-token context. Searched {result.searched['candidates']} GPU × parallel shape × KV dtype candidates ({result.searched.get('shapes', 'TP')})"
            + (f" and {dis['decode_shapes']} decode × {dis['prefill_shapes']} prefill pool shapes" if (dis := result.searched.get("disaggregated")) and dis.get("searched") else "")
            + f": {result.searched['feasible']} deployments hold the workload. Ranked by cost per hour, then per million output tokens ({COST_BASIS_NAME}, as on the Plan page); the first is minimal "
            "(one replica fewer does not hold it). p95 TTFT and ITL are the load model's: users as clients of a closed loop, a rate as Poisson arrivals (the plan's open loop), "
            "each prompt queueing for the prefill budget; the capacity search below checks them in the simulator."
        )

    rows = []
    for r in recs:
        links = _pool_links(root, ref, r, ttft, itl, upload_config) if r.disaggregated else {}
        rows.append(
            {
                "pools": r.disagg.replace(",", " + ") if r.disaggregated else "aggregated", "GPU": r.gpu, "TP": r.tp, "DP": r.dp, "PP": r.pp, "EP": r.ep, "replicas": r.replicas, "GPUs": r.gpu_count, "KV": r.kv_dtype, "engine": r.runtime, "max_num_seqs": r.max_num_seqs,
                "seqs/replica": r.sequences_per_replica, "$/h": round(r.cost_per_hour, 2), "$/M tokens": round(r.cost_per_million_tokens, 3),
                "p95 TTFT ms": round(r.ttft_p95_ms), "p95 ITL ms": round(r.itl_p95_ms, 1), "req/s": round(r.sustainable_rate, 3),
                "sim req/s": round(r.capacity.max_rate_per_s, 3) if r.capacity else None, "bound by": r.binding_constraint,
                "KV transfer ms": round(r.kv_transfer_ms, 1) if r.kv_transfer_ms is not None else None, "plan": None if r.disaggregated else _plan_link(root, ref, r.plan_inputs(), upload_config),
                "prefill pool": links.get("prefill"), "decode pool": links.get("decode"),
            }
        )  # fmt: skip
    # columns that say nothing here are left out, so the table fits 1,280 px (issue 27 item 7)
    empty = [k for k, unused in (("EP", all(r["EP"] == 1 for r in rows)), ("sim req/s", all(r["sim req/s"] is None for r in rows)),
                                 ("prefill pool", all(r["prefill pool"] is None for r in rows)), ("decode pool", all(r["decode pool"] is None for r in rows))) if unused]  # fmt: skip
    first = [k for k in ("plan", "prefill pool", "decode pool") if k not in empty]
    # the links first (always on screen); a row without a link has an empty cell, not "None"; then what
    # a row is ranked by: with the pools column and two links, $/h and the p95s came after TP, DP, PP and
    # replicas, past the right edge at 1280 px
    ranked = [k for k in SIZE_RANKED if k not in empty]
    rows = [{**{k: r[k] or "" for k in first}, **{k: r[k] for k in ranked}, **{k: v for k, v in r.items() if k not in empty and k not in first and k not in ranked}} for r in rows]
    st.subheader("Alternatives")
    links = {"plan": st.column_config.LinkColumn("plan", display_text="open", width="small", help="Opens this deployment on the Plan page."),
             "prefill pool": st.column_config.LinkColumn("prefill", display_text="open", width="small", help="Opens this deployment's prefill pool on the Plan page at the deployment's request rate."),
             "decode pool": st.column_config.LinkColumn("decode", display_text="open", width="small", help="Opens this deployment's decode pool on the Plan page at the deployment's request rate.")}  # fmt: skip
    st.dataframe(rows, hide_index=True, width="stretch", column_config={**{k: links[k] for k in first},
                 **{k: st.column_config.Column(width="small") for k in ("TP", "EP", "replicas", "GPUs", "KV")}, **style.MONEY_COLUMNS, **style.LATENCY_COLUMNS}, key="size_table")  # fmt: skip
    if disagg:
        st.caption(
            "GPU, TP, replicas and max_num_seqs of a disaggregated row are its decode pool's; GPUs and $/h both pools'. A disaggregated row opens as a plan pool by pool: "
            "each link carries that pool's GPU, TP and GPU count and the deployment's request rate (every request passes through both pools); the Plan page's pools card shows both pools at that load."
        )
    disaggregated = next((r for r in recs if r.disaggregated), None)
    if disaggregated is not None:
        pools_box(model, disaggregated, ttft, itl, _pool_links(root, ref, disaggregated, ttft, itl, upload_config))
    if result.frontier:
        frontier_box(result, itl, root, ref, upload_config)
    st.plotly_chart(pareto_figure(recs), width="stretch", key="size_pareto")
    launch_box(model, recs[0], rate)

    with st.container(border=True):
        st.markdown("**Capacity search in the simulator**")
        st.caption(
            f"For each of the top deployments: the highest Poisson rate at which simulated p95 TTFT and ITL stay inside the SLOs and the queue does not grow, "
            f"by bisection on rate (at most {sizing.CAPACITY_MAX_RUNS} runs, stopping within {sizing.CAPACITY_TOLERANCE:.0%})."
        )
        c1, c2 = st.columns([1, 3])
        top = c1.number_input("Deployments", 1, BOUNDS["capacity_top"].hi, 3, key="size_cap_top")
        if c2.button("Run capacity search", key="size_cap_run", icon=":material/monitoring:"):
            bar = st.progress(0.0, text="Starting…")
            caps = []
            for k, rec in enumerate([r for r in recs if not r.disaggregated][: int(top)]):  # the simulator runs aggregated replicas
                name = f"{rec.gpu_count} × {rec.gpu} TP {rec.tp}" + (f" DP {rec.dp}" if rec.dp > 1 else "") + (f" PP {rec.pp}" if rec.pp > 1 else "")

                def progress(frac: float, msg: str, k: int = k, name: str = name) -> None:
                    bar.progress(min(1.0, (k + frac) / int(top)), text=f"{name}: {msg}")

                caps.append(sizing.capacity_search(model, rec, ttft, itl, progress=progress))
            bar.empty()
            s["size_capacity"], s["size_capacity_key"] = caps, cap_key
            st.rerun()
        if capacity:
            for r in [r for r in recs if r.capacity]:
                st.caption(f"{r.gpu_count} × {r.gpu} TP {r.tp} ×{r.replicas} ({r.kv_dtype}): {r.capacity.note}")

    with st.container(border=True, key="size_share"):
        st.markdown("**Share and export**")
        st.code(link, language=None, wrap_lines=True)
        best_values = recs[0].plan_inputs()

        def pdf() -> bytes:
            from planner.plan import compute_plan
            from planner.report import build_pdf

            return build_pdf(compute_plan(make_inputs(**best_values), model), ref, link, sizing=result)

        st.download_button("Download PDF with the sizing", data=pdf, file_name="kv-sizing.pdf", mime="application/pdf", key="size_pdf", on_click="ignore", icon=":material/picture_as_pdf:")
    if result.refused:
        with st.expander(f"Candidates that do not hold the workload ({len(result.refused)})"):
            st.dataframe([r.model_dump() for r in result.refused], hide_index=True, width="stretch")


def pools_box(model, rec: sizing.Recommendation, ttft: float | None, itl: float | None, links: dict[str, str]) -> None:
    """The best disaggregated deployment's two pools at its request rate, its KV transfer and
    whether it pays, judged against the page's SLOs: the plan each pool's link opens
    (:meth:`sizing.Recommendation.pool_inputs`), so the Plan page's pools card shows these numbers."""
    from planner import disagg

    try:
        d = disagg.plan_disagg(model, rec.pool_inputs("decode", ttft, itl), rec.disagg, {rec.prefill.gpu: rec.prefill.gpu_hour_price, rec.decode.gpu: rec.decode.gpu_hour_price})
    except PlannerError as exc:
        st.warning(state.error_sentence(exc))
        return
    with st.container(border=True, key="size_pools"):
        st.markdown(f"**Disaggregated pools: {rec.disagg}**")
        st.dataframe(disagg.pool_rows(d), hide_index=True, width="stretch", key="size_pools_table", column_config=style.MONEY_COLUMNS)
        st.caption(disagg.describe(d))
        p, q = rec.prefill, rec.decode
        st.markdown(
            f"Open as a plan at {disagg.rate_text(d.requests_per_s)}: [prefill pool ({p.replicas} × {p.gpu} TP {p.tp})]({links['prefill']}) · "
            f"[decode pool ({q.replicas} × {q.gpu} TP {q.tp})]({links['decode']})"
        )


def frontier_box(result: sizing.SizingResult, itl: float | None, root: str, ref, upload_config) -> None:
    """The frontier chart; a clicked point opens as a plan."""
    points = result.frontier
    with st.container(border=True, key="size_frontier_box"):
        event = st.plotly_chart(frontier_figure(points, itl), width="stretch", key="size_frontier", on_select="rerun", selection_mode="points")
        chosen = [pt.get("customdata") for pt in (event.selection.points if event and event.selection else []) if isinstance(pt.get("customdata"), int)]
        front = sum(p.pareto for p in points)
        st.caption(
            f"{len(points):,} operating points ({front} on the Pareto front, drawn larger; faint ones miss the SLOs): each deployment shape at 1, 2, 4, ... sequences a replica"
            + (f"; shaded: at or above {1000 / itl:,.0f} tokens/s per user, inside the {itl:g} ms ITL SLO. " if itl else ". ")
            + "Hover for its cost; click a point to open it as a plan."
        )
        if chosen and 0 <= chosen[0] < len(points):
            p = points[chosen[0]]
            st.markdown(f"{p.label()}: {p.gpus} GPUs, ${p.cost_per_hour:,.2f}/h — [open as plan]({_plan_link(root, ref, p.plan_values, upload_config, pools=p.disaggregated)})")  # a pools card for a disaggregated point


def launch_box(model, rec: sizing.Recommendation, rate: float | None) -> None:
    """How to launch the first recommendation and the benchmark that checks it."""
    from planner.launch.bench import bench_commands
    from planner.launch.llmd import llmd_yaml
    from planner.launch.serve import serve_lines

    with st.container(border=True, key="size_launch"):
        st.markdown(f"**Launch and check: {_describe_short(rec)}**")
        try:
            tabs = st.tabs(["vLLM", "SGLang", "llm-d Helm values", "Benchmark"])
            for tab, engine in zip(tabs[:2], ("vllm", "sglang"), strict=True):
                with tab:
                    try:
                        lines = serve_lines(model, rec.plan_values, engine)
                    except PlannerError as exc:
                        st.caption(state.error_sentence(exc))
                        continue
                    for title, line in (("prefill pool", lines.prefill), ("decode pool" if lines.prefill else "each replica", lines.decode), ("router", lines.router)):
                        if line:
                            st.caption(title)
                            st.code(line, language="bash", wrap_lines=True)
                    for note in lines.notes:
                        st.caption(note)
            with tabs[2]:
                values_file = llmd_yaml(model, rec.plan_values)
                st.code(values_file, language="yaml")
                st.download_button("Download values.yaml", data=values_file, file_name="values.yaml", mime="text/yaml", key="size_llmd", on_click="ignore")
            with tabs[3]:
                b = bench_commands(model, rec.plan_values, rate_per_s=rate)
                st.caption(f"The plan's workload: {b.input_tokens:,}-token prompts, {b.output_tokens:,} output tokens, {b.load}, {b.num_prompts:,} requests.")
                st.code(b.vllm, language="bash", wrap_lines=True)
                st.code(b.guidellm, language="bash", wrap_lines=True)
                st.code(b.metrics, language="bash", wrap_lines=True)
                for note in b.notes:
                    st.caption(note)
        except PlannerError as exc:
            st.caption(state.error_sentence(exc))


def _describe_short(rec: sizing.Recommendation) -> str:
    if rec.disaggregated:
        return f"{rec.prefill.replicas} prefill × {rec.prefill.gpu} TP {rec.prefill.tp} + {rec.decode.replicas} decode × {rec.decode.gpu} TP {rec.decode.tp}"
    return f"{rec.replicas} × {rec.gpu} TP {rec.tp}"


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}", icon=":material/error:")
