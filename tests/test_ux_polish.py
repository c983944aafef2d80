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


# --------------------------------------------------------------------------- flow (item 9)

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _probe_page(model_ref: dict):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=60)
    at.session_state["model_ref"] = model_ref
    return at.run()


@pytest.mark.parametrize(("ref", "named"), [
    ({"kind": "preset", "name": "llama-3.1-70b"}, "llama-3.1-70b"),  # 70B weights: over the 2 GiB CPU budget of a runtime probe
    ({"kind": "hub", "repo_id": "org/some-model"}, "org/some-model"),  # not a preset: the probe builds presets only
])
def test_probe_says_why_it_opens_on_another_model_than_the_plans(ref, named):
    at = _probe_page(ref)
    assert not at.exception
    assert at.selectbox(key="probe_preset").value == "qwen3-0.6b"
    notes = [i.value for i in at.info if named in i.value]
    assert notes and "opens on qwen3-0.6b" in notes[0], [i.value for i in at.info]


def test_uploaders_state_the_real_one_mib_cap():
    """Plan files (planner.share.MAX_PLAN_FILE_BYTES) and probe JSON (MAX_PROBE_JSON_BYTES) stop
    at 1 MiB; the uploader printed the server's 16 MB."""
    from planner.probe.results import MAX_PROBE_JSON_BYTES
    from planner.share import MAX_PLAN_FILE_BYTES

    assert MAX_PLAN_FILE_BYTES == MAX_PROBE_JSON_BYTES == 1 << 20
    at = _probe_page({"kind": "preset", "name": "qwen3-0.6b"})
    (probe,) = [u for u in at.get("file_uploader") if u.proto.id.endswith("probe_upload") or "probe" in u.proto.label.lower()]
    assert probe.proto.max_upload_size_mb == 1
    assert not [i.value for i in at.info]  # the Plan page's own model: no note

    from streamlit.testing.v1 import AppTest

    plan = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    (upload,) = [u for u in plan.get("file_uploader") if u.proto.label == "Load a plan file"]
    assert upload.proto.max_upload_size_mb == 1 and "1 MiB" in upload.proto.help


def test_hub_failure_is_on_top_of_the_main_pane_with_a_clean_address():
    """A Hub failure showed only far down the sidebar, and its address carried U+2060 word joiners
    (pages/ui/safe_text.py) that a copy and paste kept."""
    from streamlit.testing.v1 import AppTest

    message = "Could not reach the Hub for org/x@main: the Hub at https://huggingface.co could not be reached; try again."
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["model_source"] = "Hugging Face Hub"
    at.session_state["source_errors"] = {"Hugging Face Hub": message}
    at.run()
    assert not at.exception
    top = [e.value for e in at.main.error]
    assert top and top[0].startswith("Hugging Face Hub: ") and "the address below" in top[0], top
    codes = [c.value for c in at.main.code]
    assert "https://huggingface.co" in codes and not any("\u2060" in c for c in codes)
    assert any(c.value.startswith("Still showing the previous model") for c in at.main.caption)
    assert "https://huggingface.co" in [c.value for c in at.sidebar.code]  # the sidebar's copy is clean too


# --------------------------------------------------------------------------- words (item 8)


def test_latency_by_phase_names_the_load_it_is_timed_at(llama8b):
    """The page's and the PDF's "Latency by phase (ms, one request)" plotted the estimate at the
    plan's 25 requests; both now name that load (planner.plan's roofline.load_label)."""
    import subprocess
    import tempfile

    from planner.report import build_pdf
    from planner.source import preset_ref

    plan = compute_plan(make_inputs(max_context=4096, sequences=25), llama8b)
    assert plan.roofline.load_label == "closed loop of 25 clients"  # the closed-loop model's label (issue 21)
    assert charts.title_of(charts.fig_waterfall(plan)) == "Latency by phase (roofline estimate, closed loop of 25 clients)"
    ref, _ = preset_ref("llama-3.1-8b")
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(build_pdf(plan, ref))
        f.flush()
        text = subprocess.run(["pdftotext", "-layout", f.name, "-"], capture_output=True, text=True, check=True).stdout
    assert "Latency by phase (ms, roofline estimate, closed loop of 25 clients)" in " ".join(text.split())
    assert "one request)" not in text


def test_windowed_layers_are_explained_in_words():
    """gpt-oss-120b (sliding window 128, 36,864 B a token a layer kind): the metric's delta read
    "+ 36 KiB up to 128" and vLLM's reason "window - 1 + 16,384 in-flight tokens plus a block".
    16,384 = vLLM's 2 concurrent batches x max_num_batched_tokens 8,192 (planner/engines/vllm/layout.py)."""
    from streamlit.testing.v1 import AppTest

    model = prepare_model(load_preset("gpt-oss-120b"))
    plan = compute_plan(make_inputs(max_context=32768, gpu="H200-141GB"), model)
    why = plan.kv_cache.engine.why
    assert "the 16,384 tokens in flight (2 scheduled batches of 8,192, not yet settled)" in why
    assert "one 16-token block, since the window need not start on a block boundary" in why

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["preset"] = "gpt-oss-120b"
    at.run()
    assert not at.exception
    (kv,) = [m for m in at.metric if m.label == "KV bytes / token"]
    assert kv.proto.delta == "+ 36 KiB/token in sliding layers up to 128 tokens"


def _pdf_text(plan, name: str) -> str:
    import subprocess
    import tempfile

    from planner.report import build_pdf
    from planner.source import preset_ref

    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(build_pdf(plan, preset_ref(name)[0]))
        f.flush()
        return subprocess.run(["pdftotext", "-layout", f.name, "-"], capture_output=True, text=True, check=True).stdout


def test_pdf_names_deepseek_v3s_576_element_latent():
    """The PDF printed "K/V heads per GPU, head dim 1 x 192 (V 128)" for DeepSeek-V3, whose cache
    is one MLA latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements (its config.json)."""
    model = prepare_model(load_preset("deepseek-v3"))
    plan = compute_plan(make_inputs(max_context=4096, gpu="H200-141GB", tp=8, gpu_count=8), model)
    text = " ".join(_pdf_text(plan, "deepseek-v3").split())
    assert "MLA latent 576 elements per layer and token, shared by every head; the heads attend with head dim 192 (V 128)" in text
    assert "K/V heads per GPU" not in text


def test_a_huge_workspace_is_blamed_on_the_workspace(llama8b):
    """workspace_gib 100,000 (the field's maximum) on an H100: the refusal advised a smaller weight
    dtype for 14.96 GiB of weights. The larger part gets the advice; large weights keep theirs."""
    from planner.errors import PlannerError

    with pytest.raises(PlannerError) as err:
        compute_plan(make_inputs(max_context=4096, workspace_gib=100_000), llama8b)
    assert err.value.field == "workspace_gib" and "lower the workspace" in err.value.reason
    assert "weight dtype" not in err.value.reason
    with pytest.raises(PlannerError) as err:
        compute_plan(make_inputs(max_context=4096), prepare_model(load_preset("llama-3.1-70b")))  # 131 GiB of bf16 weights on 72 GiB
    assert err.value.field == "tp" and "a smaller weight dtype" in err.value.reason  # vLLM's refusal names TP (planner/plan/budget.py)


def test_comparison_pdf_states_the_shared_context_load_slos_and_price():
    """"Every plan uses the same context, load, SLOs and price" named none of them, and with the
    catalog's price per GPU the price was not the same: H200 and B200 differ (planner/prices.py)."""
    import subprocess
    import tempfile

    from planner.report import build_comparison_pdf
    from planner.source import preset_ref

    ref, model = preset_ref("llama-3.1-8b")
    a = compute_plan(make_inputs(max_context=4096, input_tokens=2048, sequences=25, itl_slo_ms=50, gpu="H200-141GB"), model)
    b = compute_plan(make_inputs(max_context=4096, input_tokens=2048, sequences=25, itl_slo_ms=50, gpu="B200-180GB"), model)
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(build_comparison_pdf([("A", a, ref), ("B", b, ref)]))
        f.flush()
        text = " ".join(subprocess.run(["pdftotext", f.name, "-"], capture_output=True, text=True, check=True).stdout.split())
    assert "Every plan uses context 2,048 prompt + 512 output tokens; load 25 sequences; ITL SLO 50.0 ms; TTFT SLO none." in text
    assert a.cost.gpu_hour_price != b.cost.gpu_hour_price
    assert "They differ in price (A $" in text and "per GPU-hour, B $" in text


# --------------------------------------------------------------------------- first paint (item 10)


def test_the_image_compiles_the_app_before_its_first_session():
    """The image sets PYTHONDONTWRITEBYTECODE, so a replica that never compiled planner/ and pages/
    compiled about 70 modules on its first session, before the first metric went out."""
    lines = (ROOT / "deploy" / "Dockerfile").read_text().splitlines()
    assert any("PYTHONDONTWRITEBYTECODE=1" in line for line in lines)
    compile_at = next(i for i, line in enumerate(lines) if line.startswith("RUN python -m compileall") and "planner" in line and "pages" in line)
    copied = max(i for i, line in enumerate(lines) if line.startswith("COPY "))
    assert compile_at > copied  # after the last source is copied in
