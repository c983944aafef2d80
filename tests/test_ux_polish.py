"""Issue 27's charts, words and flow, second pass: each test fails on the defect it names."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from pages.ui import charts
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset


@pytest.fixture(scope="module")
def llama8b():
    return prepare_model(load_preset("llama-3.1-8b"))


def test_refused_plans_memory_chart_starts_at_zero_with_its_note_above_the_bars(llama8b):
    """Llama-3.1-8B at 32,768 tokens, 5,000 sequences on an H100: KV needs 5,000 x 32,768 x 128 KiB
    / 1 GPU = 1.53 TiB against 72 GiB usable. The note anchored at x = 80 GiB had pulled plotly's
    autorange to -1,000 GiB and sat over the bars."""
    plan = compute_plan(make_inputs(max_context=32768, sequences=5000), llama8b)
    fig = charts.fig_memory(plan)
    lo, hi = fig.layout.xaxis.range
    assert lo == 0 and hi >= sum(t.x[0] for t in fig.data)  # every bar is inside, nothing below 0 GiB
    (note,) = [a for a in fig.layout.annotations if "exceeds" in a.text]
    assert note.xref == "paper" and note.yref == "paper" and note.y >= 1 and note.yanchor == "bottom"  # above the bars
    go.Figure(fig.to_dict())  # still a valid figure


def test_log_axes_label_powers_of_ten_only(llama8b):
    """Bare "2" and "5" minor labels on the roofline, the log K/V chart and the simulator's latency
    chart: each log axis labels decades (dtick 1) with unlabelled minor grid lines."""
    from pages.ui.simulation import fig_latency
    from planner import simulate as sim

    plan = compute_plan(make_inputs(max_context=4096), llama8b)
    axes = [charts.fig_roofline(plan).layout.xaxis, charts.fig_roofline(plan).layout.yaxis, charts.fig_kv_context(plan, True).layout.xaxis]
    stats = sim.Percentiles(p50=12.0, p95=40.0, p99=90.0, mean=15.0, min=1.0, max=95.0, count=10)
    result = type("Result", (), {"ttft_ms": stats, "itl_ms": stats, "e2e_ms": stats})()
    axes.append(fig_latency({"fifo": result}).layout.yaxis)
    for axis in axes:
        assert axis.type == "log" and axis.dtick == 1
    assert charts.fig_kv_context(plan, False).layout.xaxis.dtick is None  # linear axes keep plotly's ticks


def test_titles_drawn_inside_a_figure_leave_the_toolbar_its_row():
    """Simulate's titles were at the figure's top, under plotly's toolbar (right end hidden on a phone)."""
    from pages.ui.simulation import fig_utilisation

    fig = fig_utilisation({})
    assert fig.layout.title.text == "KV pool utilisation over time"
    assert fig.layout.title.yref == "paper" and fig.layout.title.yanchor == "bottom"  # on the plot area's top edge
    assert fig.layout.margin.t >= 60  # the toolbar's row above it
