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

from pages.ui import state, urlstate
from pages.ui.export import base_url
from pages.ui.models import active_model, active_upload_config
from planner import sizing
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.limits import BOUNDS, Bound, parse_number_text
from planner.plan import make_inputs
from planner.share import share_url

KV_CHOICES = ("bf16", "fp8", "int8", "fp16", "int4")
USERS, RATE = "Concurrent users", "Requests per second"
# Opening workload: 100 users, p95 ITL 50 ms (reading speed with margin), TTFT 2 s.
DEFAULTS = {"size_mode": USERS, "size_users": 100, "size_rate": 5.0, "size_ttft": 2000.0, "size_itl": 50.0, "size_gpus": list(CATALOG), "size_kvs": ["bf16", "fp8"]}
PARAM_OF = {"size_users": "size_users", "size_rate": "size_rate", "size_ttft": "size_ttft", "size_itl": "size_itl", "size_gpus": "size_gpus", "size_kvs": "size_kv"}


def _number(text: str, bound: Bound) -> float | int | None:
    """The link's number in ASCII digits (planner/limits.py) inside ``bound``, else None."""
    value = parse_number_text(text.strip(), integer=bound.integer) if isinstance(text, str) else None
    return value if value is not None and bound.lo <= value <= bound.hi else None


def apply_link_params() -> None:
    """``size_*`` query parameters (a share link, or a refused plan's link) into the controls,
    once per distinct set; bad values keep the defaults."""
    params = {k: v for k, v in st.query_params.to_dict().items() if k.startswith("size_")}
    if not params or params == st.session_state.get("size_params_applied"):
        return
    st.session_state["size_params_applied"] = params
    s = st.session_state
    if (v := _number(params.get("size_users", ""), BOUNDS["users"])) is not None:
        s["size_users"], s["size_mode"] = v, USERS
    if (v := _number(params.get("size_rate", ""), BOUNDS["size_rate"])) is not None:
        s["size_rate"], s["size_mode"] = v, RATE
    for key in ("size_ttft", "size_itl"):
        if key in params and (v := _number(params[key], Bound(0, BOUNDS["ttft_p95_ms"].hi))) is not None:
            s[key] = v
    if "size_gpus" in params:
        lower = {g.lower(): g for g in CATALOG}
        gpus = [lower[g.strip().lower()] for g in params["size_gpus"].split(",") if g.strip().lower() in lower]
        s["size_gpus"] = gpus or list(CATALOG)
    if "size_kv" in params:
        kvs = [k for k in params["size_kv"].split(",") if k in KV_CHOICES]
        s["size_kvs"] = kvs or DEFAULTS["size_kvs"]


def app_root() -> str:
    """The app's root address (the Plan page), whichever page is open."""
    parts = urlsplit(base_url())
    path = parts.path
    for page in ("/size", "/simulate", "/compare", "/probe", "/plan"):
        if path.endswith(page):
            path = path[: -len(page)] + "/"
    return urlunsplit((parts.scheme, parts.netloc, path or "/", "", ""))


@st.cache_data(show_spinner=False, max_entries=32)
def run_size(model_key: str, _model, base: dict, users: int | None, rate: float | None, ttft: float | None, itl: float | None, gpus: tuple[str, ...], kvs: tuple[str, ...]) -> sizing.SizingResult:
    return sizing.size(_model, base, users=users, rate_per_s=rate, ttft_p95_ms=ttft, itl_p95_ms=itl, gpus=list(gpus), kv_dtypes=kvs)


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
    fig.update_layout(title="Cost versus p95 ITL: the Pareto front per GPU", xaxis_title="cost ($ per hour)", yaxis_title="p95 ITL (ms)", height=380, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def main() -> None:
    state.enter_page("size")  # the Plan page re-seeds its widgets when entered from here
    urlstate.restore_from_query_params()  # a share link carries the plan (model, context) too
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)
    apply_link_params()
    ref, model, _notes = active_model()
    values = dict(state.plan_values())
    upload_config = active_upload_config()

    st.title("Size a deployment")
    answer_box = st.container()
    with st.container(border=True):
        c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
        mode = c1.radio("Workload", (USERS, RATE), key="size_mode", horizontal=True)
        if mode == USERS:
            c2.number_input("Concurrent users", **BOUNDS["users"].widget(), step=10, key="size_users", help="Sequences held at once (each with the plan's context).")
        else:
            c2.number_input("Requests per second", 0.001, BOUNDS["size_rate"].hi, step=0.5, key="size_rate", format="%.3f")
        c3.number_input("TTFT p95 SLO (ms)", 0.0, BOUNDS["ttft_p95_ms"].hi, step=100.0, key="size_ttft", help="0 = no TTFT SLO.")
        c4.number_input("ITL p95 SLO (ms)", 0.0, BOUNDS["itl_p95_ms"].hi, step=5.0, key="size_itl", help="0 = no ITL SLO.")
        c1, c2 = st.columns([4, 1])
        gpus = c1.multiselect("GPUs to consider", list(CATALOG), key="size_gpus")
        kvs = c2.multiselect("KV dtypes", list(KV_CHOICES), key="size_kvs")
    s = st.session_state
    users = int(s["size_users"]) if mode == USERS else None
    rate = float(s["size_rate"]) if mode == RATE else None
    ttft = float(s["size_ttft"]) or None
    itl = float(s["size_itl"]) or None
    size_params = {"size_users": str(users)} if users is not None else {"size_rate": f"{rate:g}"}
    size_params |= {"size_ttft": f"{ttft or 0:g}", "size_itl": f"{itl or 0:g}"}
    if set(gpus) != set(CATALOG):
        size_params["size_gpus"] = ",".join(gpus)
    if list(kvs) != DEFAULTS["size_kvs"]:
        size_params["size_kv"] = ",".join(kvs)

    base = {k: v for k, v in values.items() if v is not None}
    if not gpus or not kvs:
        answer_box.warning("Choose at least one GPU and one KV dtype.")
        return
    try:
        with st.spinner("Searching GPU × TP × KV dtype…"):
            result = run_size(ref.model_dump_json() + str(id(model)), model, base, users, rate, ttft, itl, tuple(gpus), tuple(kvs))
    except PlannerError as exc:
        answer_box.error(state.error_sentence(exc), icon=":material/block:")
        return
    recs = result.recommendations
    cap_key = (ref.model_dump_json(), repr(sorted(base.items())), users, rate, ttft, itl, tuple(gpus), tuple(kvs))
    capacity = s.get("size_capacity") if s.get("size_capacity_key") == cap_key else None
    if capacity:
        recs = [r.model_copy(update={"capacity": capacity[i]}) if i < len(capacity) else r for i, r in enumerate(recs)]
        result = result.model_copy(update={"recommendations": recs})

    plan_params = urlstate.share_params(ref, make_inputs(**values), upload_config) if state.build_plan(values, model)[0] is not None else {}
    root = app_root()
    link = share_url(root, plan_params | size_params)  # the root: app.py opens size_* links on this page
    if {k: v for k, v in st.query_params.to_dict().items()} != plan_params | size_params:
        s["size_params_applied"] = size_params
        st.query_params.from_dict(plan_params | size_params)

    with answer_box:
        st.success(f"**{result.answer}**", icon=":material/check_circle:")
        ctx = result.searched["workload"]["context_tokens"]
        st.caption(
            f"{ref.label()} at the plan's {ctx:,}-token context. Searched {result.searched['candidates']} GPU × parallel shape × KV dtype candidates "
            f"({result.searched.get('shapes', 'TP')}): {result.searched['feasible']} hold the workload. Ranked by cost per hour, then per million output tokens; the first is minimal "
            "(one replica fewer does not hold it). p95 TTFT and ITL are the load model's: users as clients of a closed loop, a rate as Poisson arrivals (the plan's open loop), "
            "each prompt queueing for the prefill budget; the capacity search below checks them in the simulator."
        )

    rows = []
    for r in recs:
        inputs = make_inputs(**r.plan_values)
        rows.append(
            {
                "GPU": r.gpu, "TP": r.tp, "DP": r.dp, "PP": r.pp, "EP": r.ep, "replicas": r.replicas, "GPUs": r.gpu_count, "KV": r.kv_dtype, "max_num_seqs": r.max_num_seqs,
                "seqs/replica": r.sequences_per_replica, "$/h": round(r.cost_per_hour, 2), "$/M tokens": round(r.cost_per_million_tokens, 3),
                "p95 TTFT ms": round(r.ttft_p95_ms), "p95 ITL ms": round(r.itl_p95_ms, 1), "req/s": round(r.sustainable_rate, 3),
                "sim req/s": round(r.capacity.max_rate_per_s, 3) if r.capacity else None, "bound by": r.binding_constraint,
                "plan": share_url(root, urlstate.share_params(ref, inputs, upload_config)),
            }
        )  # fmt: skip
    st.subheader("Alternatives")
    st.dataframe(rows, hide_index=True, width="stretch", column_config={"plan": st.column_config.LinkColumn("open as plan", display_text="open as plan")}, key="size_table")
    st.plotly_chart(pareto_figure(recs), width="stretch", key="size_pareto")

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
            for k, rec in enumerate(recs[: int(top)]):
                name = f"{rec.gpu_count} × {rec.gpu} TP {rec.tp}" + (f" DP {rec.dp}" if rec.dp > 1 else "") + (f" PP {rec.pp}" if rec.pp > 1 else "")

                def progress(frac: float, msg: str, k: int = k, name: str = name) -> None:
                    bar.progress(min(1.0, (k + frac) / int(top)), text=f"{name}: {msg}")

                caps.append(sizing.capacity_search(model, rec, ttft, itl, progress=progress))
            bar.empty()
            s["size_capacity"], s["size_capacity_key"] = caps, cap_key
            st.rerun()
        if capacity:
            for r in recs[: len(capacity)]:
                st.caption(f"{r.gpu_count} × {r.gpu} TP {r.tp} ×{r.replicas} ({r.kv_dtype}): {r.capacity.note}")

    with st.container(border=True, key="size_share"):
        st.markdown("**Share and export**")
        st.code(link, language=None, wrap_lines=True)
        best_values = recs[0].plan_values

        def pdf() -> bytes:
            from planner.plan import compute_plan
            from planner.report import build_pdf

            return build_pdf(compute_plan(make_inputs(**best_values), model), ref, link, sizing=result)

        st.download_button("Download PDF with the sizing", data=pdf, file_name="kv-sizing.pdf", mime="application/pdf", key="size_pdf", on_click="ignore", icon=":material/picture_as_pdf:")
    if result.refused:
        with st.expander(f"Candidates that do not hold the workload ({len(result.refused)})"):
            st.dataframe([r.model_dump() for r in result.refused], hide_index=True, width="stretch")


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}", icon=":material/error:")
