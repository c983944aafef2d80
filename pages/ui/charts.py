"""Plotly figures of a plan (one function a chart; numbers from the plan, units converted here)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from planner.plan import Plan, PreparedModel, grid_limits, itl_curve
from planner.units import fmt_bytes, fmt_bytes_exact, fmt_money, fmt_ms, fmt_num, gib, mib

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#EECA3B", "#9D755D")
CHART_HEIGHT = 340
CHART_TABS = ("K/V vs context", "Context × concurrency", "Latency", "Roofline")
# Log axes label powers of ten only: plotly's default on a few decades adds bare "2" and "5" minor
# labels between them, which read as values of their own. Every chart's log axis spans a decade or
# more (the roofline pads its points by 10x each side), so each keeps at least two labels.
LOG_TICKS = {"dtick": 1, "minor": {"dtick": "D1", "showgrid": True}}
TOOLBAR_PX = 64  # top margin of a figure titled inside: plotly's toolbar (about 30 px) above the title


def titled(text: str) -> dict:
    """Layout for a figure whose title is drawn inside it: the title sits on the plot area's top
    edge and the top margin above it leaves plotly's toolbar its own row, so the toolbar (shown on
    hover, always on a phone) never covers the title's right end."""
    return {"title": {"text": text, "font": {"size": 14}, "x": 0, "xanchor": "left", "y": 1, "yref": "paper", "yanchor": "bottom", "pad": {"b": 6}}, "margin": {"l": 10, "r": 10, "t": TOOLBAR_PX, "b": 10}}


PLOT_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def _vline(x: float, text: str, color: str = "#888", dash: str = "dash", anchor: str = "left", log: bool = False, label_y: float = 1.0) -> tuple[dict, dict]:
    """A vertical line across the plot with a label at the top (as layout shape + annotation).

    On a log x axis plotly places annotations (not shapes) at log10(x): pass ``log=True``.
    """
    label_x = math.log10(x) if log else x
    shape = {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": {"color": color, "dash": dash, "width": 1.5}}
    note = {"x": label_x, "xref": "x", "y": label_y, "yref": "paper", "text": text, "showarrow": False, "xanchor": anchor, "yanchor": "bottom", "font": {"size": 11, "color": color}}
    return shape, note


def _hline(y: float, text: str, color: str = "#E45756") -> tuple[dict, dict]:
    shape = {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": y, "y1": y, "line": {"color": color, "dash": "dash", "width": 1.5}}
    note = {"x": 1, "xref": "paper", "y": y, "yref": "y", "text": text, "showarrow": False, "xanchor": "right", "yanchor": "bottom", "font": {"size": 11, "color": color}}
    return shape, note


def _figure(traces: list[dict], title: str, lines: list[tuple[dict, dict]] = (), height: int = CHART_HEIGHT, **layout) -> go.Figure:
    """One Figure built in a single pass (plotly validates each property once).

    The title is not drawn inside the figure (``layout.meta["title"]``; :func:`title_of`): the
    page writes it above the chart, where plotly's toolbar cannot cover it on a phone. The
    legend sits at the bottom of the figure's container, under the x-axis title, and plotly
    grows the bottom margin to fit it, so axis titles and legends never overlap.

    Built without plotly's per-property validation (``_validate=False``): the specs are this
    module's own, checked once by a test that rebuilds every chart validated
    (tests/test_dashboard.py), and a validated build cost 11-26 ms a chart on every rerun of
    every session (2 ms without).
    """
    base = {
        "meta": {"title": title},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 28, "b": 10},
        "legend": {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0},
        "shapes": [ln[0] for ln in lines],
        "annotations": [ln[1] for ln in lines] + list(layout.pop("annotations", [])),
    }
    return go.Figure(data=traces, layout=base | layout, _validate=False)


def title_of(fig: go.Figure) -> str:
    meta = fig.layout.meta
    return str(meta.get("title", "")) if isinstance(meta, dict) else ""


def fig_memory(plan: Plan) -> go.Figure:
    cap = plan.capacity
    headroom = cap.headroom_bytes
    free = cap.free_bytes_at_requested_load
    parts = [
        ("Weights", cap.model_resident_bytes, PALETTE[0]),
        ("Workspace", cap.workspace_bytes, PALETTE[5]),
        (f"KV at {plan.kv_cache.requested_sequences:,} sequences", cap.kv_bytes_at_requested_load, PALETTE[1]),
        ("Free", max(0, free), PALETTE[2]),
        ("Headroom", headroom, "#9E9E9E"),
    ]
    traces = [
        {
            "type": "bar",
            "name": name,
            "y": ["one GPU"],
            "x": [gib(value)],
            "orientation": "h",
            "marker": {"color": color},
            "text": [fmt_bytes(value)],
            "textposition": "inside",
            "insidetextanchor": "middle",
            "hovertemplate": f"{name}: {fmt_bytes_exact(value)}<extra></extra>",
        }
        for name, value, color in parts
    ]
    # A refused plan's note sits above the bars at the right edge, never over them, and the axis
    # starts at 0 GiB: plotly's autorange counts annotations, so a note anchored at the device's
    # size once pulled the axis to -1,000 GiB. The "usable" label turns to the side with room.
    top = gib(sum(value for _, value, _ in parts))
    notes = []
    if free < 0:
        notes.append({"x": 1, "xref": "paper", "y": 1, "yref": "paper", "yanchor": "bottom", "text": f"KV exceeds the space by {fmt_bytes(-free)}", "showarrow": False, "xanchor": "right", "font": {"size": 11, "color": "#E45756"}})
    usable = gib(cap.usable_bytes)
    return _figure(
        traces,
        f"Memory on one GPU: {plan.device.name}, {fmt_bytes(cap.device_bytes)}",
        [_vline(usable, f"usable {fmt_bytes(cap.usable_bytes)}", anchor="right" if usable > top / 2 else "left")],
        height=210,
        barmode="stack",
        uniformtext={"minsize": 9, "mode": "hide"},
        xaxis={"title": {"text": "GiB"}, "range": [0, max(top, gib(cap.device_bytes)) * 1.02]},
        yaxis={"visible": False},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0, "traceorder": "normal"},
        annotations=notes,
    )


def _kv_x(plan: Plan, log: bool) -> list[int]:
    """Context lengths to sample: even (or log) spacing plus every window edge and the reserved length."""
    top = plan.context.maximum_context_tokens
    if log:
        xs = {max(1, round(top ** (i / 300))) for i in range(301)}
    else:
        xs = {round(top * i / 300) for i in range(301)}
    xs.add(plan.context.reserved_total_tokens)
    for s in plan.inspect.specs:
        if s.window and s.window < top:
            if s.kind == "chunked" and top // s.window <= 64:
                for k in range(1, top // s.window + 1):
                    xs |= {k * s.window - 1, k * s.window}
            xs.add(s.window)
    return sorted(x for x in xs if (1 if log else 0) <= x <= top)


def _window_marks(specs, top: int, log: bool) -> list[tuple[int, str]]:
    """One marker per cluster of window caps (equal windows once; caps closer than 3 % of a linear
    axis, or 1.5x on a log one, share a marker and a label, so their texts do not overlap)."""
    caps = sorted({(s.window, s.kind) for s in specs if s.window and s.window < top})
    clusters: list[list[tuple[int, str]]] = []
    for w, kind in caps:
        last = clusters[-1][0][0] if clusters else None
        if last is not None and (w <= last * 1.5 if log else w - last <= 0.03 * top):
            clusters[-1].append((w, kind))
        else:
            clusters.append([(w, kind)])
    out = []
    for c in clusters:
        kinds = "/".join(dict.fromkeys(k for _, k in c))
        windows = ", ".join(format(w, ",") for w in dict.fromkeys(w for w, _ in c))
        out.append((c[-1][0], f"{kinds} cap {windows}"))
    return out


def fig_kv_context(plan: Plan, log: bool = False) -> go.Figure:
    ins = plan.inspect
    xs = _kv_x(plan, log)
    top = max([ins.mha_equivalent_bytes_per_token * xs[-1], *(s.bytes_at(xs[-1]) for s in ins.specs)])
    unit, conv = ("GiB", gib) if top >= 16 << 30 else ("MiB", mib)
    traces = []
    for i, s in enumerate(ins.specs):
        what = {"latent": "MLA latent", "indexer": "indexer keys" + (f" 1/{s.compress_ratio}" if s.compress_ratio > 1 else ""), "swa": "sliding latent", "compressed": f"compressed 1/{s.compress_ratio}", "compressor": "compressor state"}.get(s.cache)
        label = f"{s.kind}{' ' + format(s.window, ',') if s.window else ''} ×{s.num_layers}" + (f" ({what})" if what else " (MLA latent)" if s.latent else "")
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": [conv(s.bytes_at(x)) for x in xs],
                "name": label,
                "mode": "lines",
                "stackgroup": "kv",
                "line": {"width": 1.5, "color": PALETTE[i % len(PALETTE)]},
                "hovertemplate": f"{label}: %{{y:,.2f}} {unit}<extra></extra>",
            }
        )
    mha = ins.mha_equivalent_bytes_per_token
    mha_x = xs if log else [xs[0], xs[-1]]
    traces.append(
        {
            "type": "scatter",
            "x": mha_x,
            "y": [conv(mha * x) for x in mha_x],
            "name": f"MHA equivalent ({fmt_bytes(mha)}/token)",
            "mode": "lines",
            "line": {"dash": "dot", "color": "#888", "width": 2},
            "hovertemplate": f"MHA equivalent: %{{y:,.2f}} {unit}<extra></extra>",
        }
    )
    lines = [_vline(w, label, "#E45756", anchor="right", log=log) for w, label in _window_marks(ins.specs, xs[-1], log)]
    lines.append(_vline(plan.context.reserved_total_tokens, f"reserved {plan.context.reserved_total_tokens:,}", "#54A24B", "solid", "left", log=log, label_y=0.92))
    axis_type = "log" if log else "linear"
    return _figure(
        traces,
        f"K/V bytes vs context per layer kind ({ins.kv_dtype}, TP {ins.tp}; stacked)",
        lines,
        height=380,
        xaxis={"title": {"text": "context (tokens)"}, "tickformat": ",~r" if log else ",d", "type": axis_type} | (LOG_TICKS if log else {}),
        yaxis={"title": {"text": f"{unit} per sequence (one GPU)"}, "tickformat": ",~r", "type": axis_type} | (LOG_TICKS if log else {}),
        hovermode="x unified",
    )


def _axis_points(lo: int, hi: int, extra: int, limit: int = 14) -> list[int]:
    pts = []
    v = lo
    while v <= hi:
        pts.append(v)
        v *= 2
    if len(pts) > limit:
        step = -(-len(pts) // limit)
        pts = pts[::step]
    return sorted(set(pts) | {extra})


def fig_heatmap(plan: Plan, model: PreparedModel) -> go.Figure:
    inputs = plan.inputs
    max_ctx = plan.context.maximum_context_tokens
    lo = 1 << max(9, (inputs.output_tokens + 1).bit_length())
    contexts = [c for c in _axis_points(lo, max_ctx, plan.context.reserved_total_tokens) if c > inputs.output_tokens]
    ceiling = max(8, plan.kv_cache.admissible_sequences, inputs.sequences)
    concs = _axis_points(1, 1 << ceiling.bit_length(), inputs.sequences)
    limits = grid_limits(inputs, model, contexts)  # admissible sequences per reserved context (-1: does not fit)
    cells = [[c <= lim for c in concs] for lim in limits]
    xs = [f"{c:,}" for c in concs]
    ys = [f"{c:,}" for c in contexts]

    def hover(i: int, j: int, ok: bool) -> str:
        lim = limits[i]
        ceiling = "does not fit at all" if lim < 0 else f"admits at most {lim:,} sequences"
        return f"{ys[i]} tokens × {xs[j]} sequences: {'admitted' if ok else 'refused'} ({ys[i]} tokens {ceiling})"

    grey, green = "rgba(158,158,158,0.35)", "rgba(84,162,75,0.85)"
    traces = [
        {
            "type": "heatmap",
            "z": [[1 if ok else 0 for ok in row] for row in cells],
            "x": xs,
            "y": ys,
            "zmin": 0,
            "zmax": 1,
            "colorscale": [[0, grey], [0.5, grey], [0.5, green], [1, green]],
            "showscale": False,
            "xgap": 1,
            "ygap": 1,
            "text": [[hover(i, j, ok) for j, ok in enumerate(row)] for i, row in enumerate(cells)],
            "hovertemplate": "%{text}<extra></extra>",
        },
        {
            "type": "scatter",
            "x": [f"{inputs.sequences:,}"],
            "y": [f"{plan.context.reserved_total_tokens:,}"],
            "mode": "markers",
            "marker": {"symbol": "x", "size": 14, "color": "#E45756", "line": {"width": 2}},
            "name": "this plan",
            "hovertemplate": "this plan<extra></extra>",
        },
    ]
    return _figure(
        traces,
        "Admitted region (green) by reserved context × concurrent sequences",
        height=380,
        xaxis={"title": {"text": "concurrent sequences"}, "type": "category"},
        yaxis={"title": {"text": "reserved context (tokens)"}, "type": "category"},
    )


def fig_waterfall(plan: Plan) -> go.Figure:
    lat = plan.latency
    steps = [
        ("Queue", lat.queue_ms, "relative", lat.queue_ms),
        ("Preprocessing", lat.preprocessing_ms, "relative", lat.preprocessing_ms),
        ("Prefill", lat.prefill_ms, "relative", lat.prefill_ms),
        ("First decode", lat.first_decode_ms, "relative", lat.first_decode_ms),
        ("TTFT", 0, "total", lat.time_to_first_token_ms),
        ("Remaining decode", lat.remaining_decode_ms, "relative", lat.remaining_decode_ms),
        ("End to end", 0, "total", lat.end_to_end_ms),
    ]
    trace = {
        "type": "waterfall",
        "x": [s[0] for s in steps],
        "y": [s[1] for s in steps],
        "measure": [s[2] for s in steps],
        "text": [fmt_ms(s[3]) for s in steps],
        "textposition": "outside",
        "connector": {"line": {"color": "#888", "dash": "dot"}},
        "increasing": {"marker": {"color": PALETTE[0]}},
        "totals": {"marker": {"color": PALETTE[1]}},
        "hovertemplate": "%{x}: %{text}<extra></extra>",
    }
    return _figure([trace], f"Latency by phase ({latency_load(plan)})", yaxis={"title": {"text": "ms"}}, showlegend=False)


def latency_load(plan: Plan) -> str:
    """The load the phase figures are at: an estimate is timed at the plan's load ("roofline
    estimate at 25 requests"), an observation is one request; the title once said "one request"
    over the 25-request estimate."""
    lat = plan.latency
    return f"{lat.source}, one request" if lat.source == "observed" else f"{lat.source}, {plan.roofline.load_label}"


def fig_itl(plan: Plan, model: PreparedModel) -> go.Figure:
    curve = itl_curve(plan, model)
    c = plan.roofline.decode_concurrency
    traces = [
        {"type": "scatter", "x": [k for k, _, _ in curve], "y": [v for _, v, _ in curve], "mode": "lines+markers", "name": "mean ITL", "line": {"color": PALETTE[0]}, "hovertemplate": "%{x:,} sequences: mean %{y:,.2f} ms<extra></extra>"},
        {"type": "scatter", "x": [k for k, _, _ in curve], "y": [v for _, _, v in curve], "mode": "lines", "name": "p95 ITL (the SLO's)", "line": {"color": PALETTE[2], "dash": "dot"}, "hovertemplate": "%{x:,} sequences: p95 %{y:,.2f} ms<extra></extra>"},
        {"type": "scatter", "x": [c], "y": [plan.roofline.itl_ms_at_concurrency], "mode": "markers", "marker": {"size": 12, "color": "#E45756", "symbol": "x"}, "name": "this plan", "hovertemplate": "this plan: %{y:,.2f} ms<extra></extra>"},
    ]
    lines = [_hline(plan.inputs.itl_slo_ms, f"SLO {fmt_ms(plan.inputs.itl_slo_ms)}")] if plan.inputs.itl_slo_ms is not None else []
    return _figure(
        traces,
        "ITL vs concurrency (roofline estimate)",
        lines,
        xaxis={"title": {"text": "concurrent sequences per replica"}},
        yaxis={"title": {"text": "ms per token"}, "rangemode": "tozero"},
    )


def fig_roofline(plan: Plan) -> go.Figure:
    r = plan.roofline
    peak = r.peak_tflops
    bw_tb = r.bandwidth_gb_s / 1000  # TB/s = TFLOP/s per FLOP/byte (unit conversion)
    ridge = r.ridge_flops_per_byte
    pts = [
        ("prefill", r.prefill_intensity, r.prefill_attainable_tflops, PALETTE[1]),
        ("decode", r.decode_intensity, r.decode_attainable_tflops, PALETTE[0]),
    ]
    intensities = [p[1] for p in pts if p[1] > 0] + [ridge]
    x0, x1 = min(intensities) / 10, max(intensities) * 10  # axis range
    traces = [
        {
            "type": "scatter",
            "x": [x0, ridge, x1],
            "y": [x0 * bw_tb, peak, peak],
            "mode": "lines",
            "name": f"roof: {fmt_num(peak, 1)} TFLOP/s, {fmt_num(r.bandwidth_gb_s)} GB/s",
            "line": {"color": "#888", "width": 2},
            "hovertemplate": "%{x:,.1f} FLOP/B: %{y:,.1f} TFLOP/s<extra></extra>",
        }
    ]
    for name, x, attainable, color in pts:
        if x > 0:
            bound = "compute-bound" if x >= ridge else "memory-bound"
            traces.append(
                {
                    "type": "scatter",
                    "x": [x],
                    "y": [attainable],
                    "mode": "markers+text",
                    "text": [name],
                    "textposition": "bottom center",
                    "marker": {"size": 13, "color": color},
                    "name": f"{name}: {fmt_num(x)} FLOP/B ({bound})",
                    "hovertemplate": f"{name}: %{{x:,.2f}} FLOP/B, attainable %{{y:,.1f}} TFLOP/s<extra></extra>",
                }
            )
    return _figure(
        traces,
        f"Roofline on {plan.device.name} ({r.decode_concurrency:,} sequences decoding)",
        [_vline(ridge, f"ridge {fmt_num(ridge, 1)} FLOP/B", "#E45756", log=True)],
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}} | LOG_TICKS,
        yaxis={"type": "log", "title": {"text": "attainable TFLOP/s"}} | LOG_TICKS,
    )




def fig_cache_tiers(plan: Plan) -> go.Figure:
    """The session workload's hit rate and p95 TTFT against the CPU tier's size a replica
    (:func:`planner.cache.section.cpu_tier_sweep`; the plan's own size marked)."""
    from planner.cache.section import SWEEP_GIB, cpu_tier_sweep

    own = plan.inputs.cpu_tier_gib or 0.0
    points = cpu_tier_sweep(plan, tuple(sorted({*SWEEP_GIB, own})))
    xs = [f"{p.cpu_tier_gib:,.4g} GiB" for p in points]
    mine = [i for i, p in enumerate(points) if p.cpu_tier_gib == own]
    traces = [
        {"type": "scatter", "x": xs, "y": [p.hit_rate * 100 for p in points], "mode": "lines+markers", "name": "hit rate (%)", "line": {"color": PALETTE[0]},
         "customdata": [fmt_money(p.tier_cost_per_hour) for p in points], "hovertemplate": "CPU tier %{x}: hit rate %{y:.1f} %, tier %{customdata}/h<extra></extra>"},
        {"type": "scatter", "x": xs, "y": [p.ttft_p95_ms for p in points], "mode": "lines+markers", "name": "p95 TTFT (ms)", "yaxis": "y2", "line": {"color": PALETTE[1], "dash": "dot"},
         "hovertemplate": "CPU tier %{x}: p95 TTFT %{y:,.1f} ms<extra></extra>"},
        {"type": "scatter", "x": [xs[i] for i in mine], "y": [points[i].hit_rate * 100 for i in mine], "mode": "markers", "name": "this plan", "marker": {"size": 13, "color": "#E45756", "symbol": "x"},
         "hovertemplate": "this plan: hit rate %{y:.1f} %<extra></extra>"},
    ]  # fmt: skip
    return _figure(
        traces,
        "Prefix-cache hit rate and p95 TTFT against the CPU tier a replica",
        xaxis={"title": {"text": "CPU DRAM tier per replica"}, "type": "category"},
        yaxis={"title": {"text": "hit rate (%)"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": "p95 TTFT (ms)"}, "overlaying": "y", "side": "right", "rangemode": "tozero", "showgrid": False, "tickformat": ",.0f"},
    )
