"""Issue 14: the dashboard changes nothing behind the user's back, says which limit binds, shows
cost, keeps Compare's plans and speaks in the controls' labels. One AppTest per defect."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from planner.plan import PlanInputs, compute_plan, make_inputs  # noqa: E402
from planner.source import preset_ref  # noqa: E402
from tests.apptest import assert_clean as _clean  # noqa: E402
from tests.apptest import run_app as _app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def metric(at: AppTest, label: str, index: int = 0):
    hits = [m for m in at.metric if m.label == label]
    assert len(hits) > index, f"no metric {label!r}: {[m.label for m in at.metric]}"
    return hits[index]


def texts(at: AppTest) -> list[str]:
    """Every text the page shows (markdown, captions, alerts)."""
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in (at.info, at.warning, at.error, at.success):
        out += [x.value for x in kind]
    return out


def infos(at: AppTest) -> list[str]:
    return [i.value for i in at.info]


def _set(at: AppTest, **values) -> AppTest:
    for key, value in values.items():
        at.number_input(key=key).set_value(value)
    at.run()
    _clean(at)
    return at


# --------------------------------------------------------------------------- 1. no silent changes


def test_switching_model_keeps_working_inputs():
    """Llama-3.1-8B on 8 GPUs, TP 2, 1,000 sequences is admitted; mistral-7b-v0.1 (32 heads, 8 KV
    heads) works at TP 2 too, so nothing may change."""
    at = _app()
    _set(at, gpu_count=8, tp=2, sequences=1000)
    assert "Admitted" in " ".join(texts(at))
    at.selectbox(key="preset").set_value("mistral-7b-v0.1").run()
    _clean(at)
    values = at.session_state["plan_values"]
    assert (values["gpu_count"], values["tp"], values["sequences"]) == (8, 2, 1000)
    assert at.number_input(key="tp").value == 2 and at.number_input(key="gpu_count").value == 8
    assert not any("Changed" in t for t in infos(at)), infos(at)
    assert "Admitted" in " ".join(texts(at))


def test_needed_change_is_said_as_done_with_undo():
    """llama-3.1-70b: 70.6 B params x 2 B = 131.5 GiB of bf16 weights do not fit one H100 (72 GiB
    usable): the plan would fail, so TP is changed - and said, with an Undo."""
    at = _app()
    at.selectbox(key="preset").set_value("llama-3.1-70b").run()
    _clean(at)
    done = [t for t in infos(at) if t.startswith("Changed")]
    assert done and "TP 1 → 4" in done[0] and "because" in done[0] and "H100" in done[0], infos(at)
    assert at.session_state["plan_values"]["tp"] == 4
    at.button(key="suggestion_undo").click().run()
    _clean(at)
    assert at.session_state["plan_values"]["tp"] == 1
    assert not any(t.startswith("Changed") for t in infos(at))
    # back to the inputs that fail: the error is shown and the change is offered, not made
    assert [e.value for e in at.error]
    offer = [t for t in infos(at) if t.startswith("Suggestion")]
    assert offer and "TP 1 → 4" in offer[0], infos(at)
    at.button(key="suggestion_apply").click().run()
    _clean(at)
    assert at.session_state["plan_values"]["tp"] == 4 and not [e.value for e in at.error]


# --------------------------------------------------------------------------- 2. banners hold only while true


def test_suggestion_banner_goes_when_inputs_change():
    at = _app()
    at.selectbox(key="preset").set_value("llama-3.1-70b").run()
    assert any("H100" in t for t in infos(at))
    at.selectbox(key="gpu").set_value("H200-141GB").run()
    _set(at, gpu_count=8, tp=2)
    _clean(at)
    # 131.5 GiB / 2 = 65.7 GiB per GPU fits an H200: no banner talks about TP 4 or an H100 any more
    # (the budget's sources may name the H100 logs they were fitted on: banners are alerts)
    banners = [x.value for kind in (at.info, at.warning, at.error, at.success) for x in kind]
    assert not any("H100" in t or "TP 4" in t or "tensor parallelism 4" in t for t in banners), banners
    assert at.session_state["plan_values"]["tp"] == 2


# --------------------------------------------------------------------------- 3. calibration stays on its device


CPU_CAL = {"mfu": 0.004, "mbu": 0.3, "notes": [], "device": "H100-SXM-80GB", "measured_device": "cpu", "measured_on": "cpu x86_64"}
GPU_CAL = {"mfu": 0.4, "mbu": 0.6, "notes": [], "device": "H100-SXM-80GB", "measured_device": "cuda", "measured_on": "cuda NVIDIA H100 80GB HBM3"}


def test_cpu_calibration_is_not_offered_for_a_gpu_plan():
    at = _app(probe_calibration=CPU_CAL)
    assert not [b for b in at.button if b.key == "apply_calibration"]
    assert any("not on a GPU" in c for c in texts(at)), texts(at)
    ttft = metric(at, "TTFT").value
    at.run()
    assert metric(at, "TTFT").value == ttft and at.session_state["plan_values"]["mfu"] == PlanInputs().mfu


def test_gpu_calibration_only_for_the_gpu_it_was_measured_on():
    at = _app(probe_calibration=GPU_CAL)
    assert [b for b in at.button if b.key == "apply_calibration"]  # H100 plan, H100 measurement
    at.selectbox(key="gpu").set_value("H200-141GB").run()
    _clean(at)
    assert not [b for b in at.button if b.key == "apply_calibration"]
    assert any("measured on H100-SXM-80GB" in c for c in texts(at)), texts(at)


def test_gpu_probe_memory_replaces_the_vllm_budget_estimates_on_its_gpu():
    from planner.probe import ProbeResult

    # a runtime probe on an H100 (its three memory figures as the CUDA child reports them)
    probe = ProbeResult(
        mode="runtime", ok=True, runtime="transformers", device="cuda", kv_dtype="bf16", tokens=512, batch=1, layers_measured=32, layers_total=32,
        predicted_kv_bytes=1, planner_kv_bytes=1, cuda_non_torch_bytes=700 << 20, cuda_prefill_peak_bytes=50 << 20, cuda_weights_bytes=16 << 30,
    )  # fmt: skip
    at = _app(probe_calibration=GPU_CAL | {"probe": probe})
    said = [c.value for c in at.caption if c.value.startswith("Measured by the probe on this GPU")]
    # 50 MiB at 512 tokens scales to 800 MiB at the 8,192-token step: 0.78 GiB; the 700 MiB
    # non-torch figure is 0.68 GiB; each beside its prediction, outside the table's sum
    assert said and "profiling peak activations 0.78 GiB (predicted" in said[0] and "non-torch memory 0.68 GiB (predicted 0.13)" in said[0], said
    table = [m.value for m in at.markdown if "| term | GiB |" in m.value]
    assert table and "measured" not in table[0]
    at.selectbox(key="gpu").set_value("H200-141GB").run()  # another GPU: the estimates only
    _clean(at)
    assert not [c.value for c in at.caption if c.value.startswith("Measured by the probe")]


# --------------------------------------------------------------------------- 4. user-facing words


def test_observed_latency_help_and_errors_use_labels():
    at = _app()
    at.session_state["group_observed"] = True
    at.run()
    help_text = " ".join(c.value for c in at.caption)
    assert "remaining decode" in help_text and "all three" in help_text
    _set(at, prefill_ms=400.0, first_decode_ms=20.0)
    errs = [e.value for e in at.error]
    assert any("Observed remaining decode (ms)" in e or "remaining decode time" in e for e in errs), errs
    assert not any(re.search(r"\b[a-z]+_(ms|tokens|bp|gib)\b", e) for e in errs), errs


def test_error_naming_two_fields_uses_both_labels():
    at = _app()
    at.session_state["group_observed"] = True
    at.run()
    _set(at, prefill_ms=400.0)
    errs = [e.value for e in at.error]
    assert any("“Observed prefill (ms)”" in e and "“Observed first decode (ms)”" in e for e in errs), errs
    assert not any("prefill_ms" in e or "first_decode_ms" in e for e in errs), errs


# --------------------------------------------------------------------------- 5. both SLOs admit


def test_missed_ttft_slo_refuses_and_names_the_binding_slo():
    at = _app()
    at.session_state["group_load"] = True
    _set(at, ttft_slo_ms=1.0)  # far below any prefill of 2,048 tokens
    shown = " ".join(texts(at))
    assert "Refused by the TTFT SLO" in shown, shown
    assert "misses" in (metric(at, "TTFT").proto.delta or "")
    assert at.session_state["plan_values"]["ttft_slo_ms"] == 1.0
    _set(at, ttft_slo_ms=1e6)
    assert "Admitted" in " ".join(texts(at))


def test_ttft_slo_limit_is_the_largest_concurrency_meeting_it():
    """The TTFT limit L: planning L sequences meets the SLO, L + 1 misses it (library)."""
    _ref, model = preset_ref("llama-3.1-8b")
    base = dict(input_tokens=2048, output_tokens=512, sequences=150)
    free = compute_plan(make_inputs(**base | {"sequences": 1}), model)
    slo = free.roofline.ttft_p95_ms * 1.02  # a little above the (p95) TTFT of one sequence
    plan = compute_plan(make_inputs(**base, ttft_slo_ms=slo), model)
    limit = plan.kv_cache.limits["ttft_slo"]
    assert 1 <= limit < plan.kv_cache.maximum_sequences_by_memory
    assert plan.kv_cache.binding_constraint == "ttft_slo" and not plan.kv_cache.admitted
    at_limit = compute_plan(make_inputs(**base | {"sequences": limit}), model)
    over = compute_plan(make_inputs(**base | {"sequences": limit + 1}), model)
    assert at_limit.roofline.ttft_p95_ms <= slo < over.roofline.ttft_p95_ms


# --------------------------------------------------------------------------- 6. cost in the headline


def test_cost_in_headline_when_a_price_is_known():
    at = _app()
    assert metric(at, "Cost per hour").value != "–"  # the catalog's sourced price by default (issue 27 item 1)
    at.session_state["group_sharing"] = True
    at.session_state["group_hardware"] = True
    at.run()
    _set(at, gpu_count=4, gpu_hour_price=2.5)
    cost = metric(at, "Cost per hour")
    assert cost.value == "$10.00"  # 4 GPUs x $2.50
    assert "per M output tokens" in (cost.proto.delta or "")


# --------------------------------------------------------------------------- 11. whole counts, plain words


def test_no_fractional_counts_or_jargon_and_hit_rate_defaults_to_zero():
    at = _app()
    _set(at, gpu_count=4)
    shown = " ".join(texts(at))
    assert not re.search(r"\d\.\d+ sequences", shown), shown
    assert "per replica" in (metric(at, "Max sequences").proto.delta or "")
    assert "conservative KV-memory plan" not in shown
    assert at.session_state["plan_values"]["prefix_hit_rate"] == 0.0


# --------------------------------------------------------------------------- 7. Compare keeps and shares its plans


def _compare_with_three_plans() -> AppTest:
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.segmented_control(key="cmp_n").set_value(3).run()
    at.selectbox(key="cmp_kv_dtype_1").set_value("fp8").run()
    at.selectbox(key="cmp_gpu_2").set_value("H200-141GB").run()
    at.number_input(key="cmp_tp_2").set_value(2).run()
    at.number_input(key="cmp_gpu_count_2").set_value(2).run()
    _clean(at)
    return at


def test_compare_state_survives_a_page_switch_and_is_in_the_link():
    at = _compare_with_three_plans()
    link = dict(at.query_params)
    assert link["cmp"] == "3" and link["cc"] == "plan~H200-141GB~2~2~auto~vllm", link
    assert link["n"] == "llama-3.1-8b"  # the base plan travels with it
    at.switch_page("pages/plan.py").run()
    at.switch_page("pages/compare.py").run()
    _clean(at)
    assert at.segmented_control(key="cmp_n").value == 3
    assert (at.number_input(key="cmp_tp_2").value, at.number_input(key="cmp_gpu_count_2").value) == (2, 2)


def test_compare_link_reopens_the_same_comparison():
    link = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(_compare_with_three_plans().query_params).items()}
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params.update(link)
    at.switch_page("pages/compare.py")  # a reload of the Compare page's address
    at.run()
    _clean(at)
    assert at.segmented_control(key="cmp_n").value == 3
    assert at.selectbox(key="cmp_gpu_2").value == "H200-141GB" and at.number_input(key="cmp_tp_2").value == 2
    assert at.selectbox(key="cmp_kv_dtype_1").value == "fp8"
    # the notice says the columns came back too ("Restored the plan" read wrong above three plans)
    assert [s.value for s in at.success] == ["Restored the plan and the 3 compared plans from the share link."]


def test_compare_link_with_bad_column_warns_and_falls_back():
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params.update({"v": "3", "m": "preset", "n": "llama-3.1-8b", "cmp": "2", "cb": "plan~NoSuchGPU~1~1~fp8~vllm"})
    at.switch_page("pages/compare.py")
    at.run()
    _clean(at)
    assert any("NoSuchGPU" in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.selectbox(key="cmp_gpu_1").value == "H100-SXM-80GB" and at.selectbox(key="cmp_kv_dtype_1").value == "fp8"


def test_compare_names_the_better_plan_per_row():
    """Plan B (fp8 cache) holds half the K/V bytes: more sequences on the same H100."""
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="cmp_kv_dtype_1").set_value("fp8").run()
    _clean(at)
    df = at.dataframe[0].value
    assert df.iloc[0].tolist()[1:3] == ["(reference)", "KV dtype fp8"]  # what B changes
    # The verdict stands beside the row's label: as the last column it ran off the right edge
    # with three plans at 1280 px and with two on a phone.
    assert list(df.columns)[0] == "Better"
    assert json.loads(at.dataframe[0].proto.columns)["Better"]["width"] == "medium"  # sized by its header it read "B: more"
    assert df.loc["Max sequences", "Better"] == "B: more sequences"
    assert df.loc["KV bytes / token", "Better"] == "B: smaller cache"
    assert df.loc["Admitted", "Better"] == "same" and df.loc["Model", "Better"] == ""
    assert [b for b in at.get("download_button") if b.proto.label == "Download comparison PDF"]


# --------------------------------------------------------------------------- 9. Simulate starts from the plan


def test_simulate_runs_the_plan_with_its_tp_dtype_and_replicas():
    at = _app()
    at.selectbox(key="kv_dtype").set_value("fp8")
    _set(at, gpu_count=4, tp=2)
    at.switch_page("pages/simulate.py").run()
    _clean(at)
    summary = " ".join(m.value for m in at.markdown)
    assert "4 × H100-SXM-80GB, TP 2 (2 replicas), KV fp8, headroom 10 %" in summary, summary
    df = at.dataframe[0].value
    assert list(df.columns) == ["fifo", "decode-priority", "chunked", "prefill-first", "static reservation"]
    assert all(v.endswith(" ms") for v in df.loc["TTFT p95"]) and not [e.value for e in at.error]
    # the row labels have their own width: left to the grid, "End-to-end p95" read "End-to-end p" at 1280 px
    assert json.loads(at.dataframe[0].proto.columns)["_index"]["width"] == "medium"


def test_simulate_controls_survive_a_page_switch_and_bad_plan_is_named():
    at = _app()
    at.switch_page("pages/simulate.py").run()
    at.number_input(key="sim_requests").set_value(40).run()
    at.switch_page("pages/plan.py").run()
    _set(at, tp=3)  # 32 attention heads are not divisible by 3: no plan
    at.switch_page("pages/simulate.py").run()
    _clean(at)
    errs = [e.value for e in at.error]
    assert errs and "GPUs: must be a multiple of TP 3" in errs[0] and "gpu_count" not in errs[0], errs
    at.switch_page("pages/plan.py").run()
    _set(at, tp=1)
    at.switch_page("pages/simulate.py").run()
    _clean(at)
    assert at.number_input(key="sim_requests").value == 40


def test_simulate_runs_the_plans_benchmark_as_a_closed_loop():
    # "Closed loop (a benchmark)": the plan's 8 clients start at once and send 40 prompts, each client its
    # next when its last ends; the page sets the simulated mean TTFT (the API server added) beside the
    # plan's benchmark figure for 40 prompts (roofline.benchmark_ttft_ms), and the rate is unused
    from planner.plan import PlanInputs, compute_plan
    from planner.source import preset_ref
    from planner.units import fmt_ms

    at = _app()
    at.switch_page("pages/simulate.py").run()
    at.radio(key="sim_arrivals").set_value("Closed loop (a benchmark)").run()
    at.number_input(key="sim_requests").set_value(40).run()
    _clean(at)
    assert at.number_input(key="sim_rate").disabled and not [e.value for e in at.error]
    lines = [i.value for i in at.info if i.value.startswith("Closed loop of")]
    assert lines and "Closed loop of 8 clients started at once, 40 prompts: mean TTFT simulated fifo " in lines[0], [i.value for i in at.info]
    plan = compute_plan(PlanInputs(bench_prompts=40), preset_ref("llama-3.1-8b")[1])
    bench, waves, pre = plan.roofline.benchmark_ttft_ms, plan.roofline.benchmark_ttft_waves_ms, plan.latency.preprocessing_ms
    assert waves > 1.05 * bench  # 5 waves of 8: every one queued as the first is well above the first alone
    assert f"the plan's benchmark figure {fmt_ms(bench)}, {fmt_ms(waves)} if every wave queues as the first. With every request at the plan's lengths, requests that end within {fmt_ms(pre)} of each other" in lines[0]
    assert lines[0].endswith("waves the plan's steady state does not model (prefill-first keeps every wave whole).")  # whole: the page shows the planner's sentence uncut
    assert at.dataframe[0].value.loc["Completed", "fifo"] == "40"
    assert at.session_state["simulate"]["sim_arrivals"] == "Closed loop (a benchmark)"  # kept across page switches


# --------------------------------------------------------------------------- 10. Probe opens on what runs here


def test_probe_opens_on_a_setting_that_fits_and_refusals_name_fields():
    from planner.presets import load_preset
    from planner.probe import make_options, prepare_probe

    at = _app()
    at.switch_page("pages/probe.py").run()
    _clean(at)
    preset, mode = at.selectbox(key="probe_preset").value, at.radio(key="probe_mode").value
    assert mode == "runtime"
    # what the page opens on passes the CPU budget check the probe applies before it starts
    prepare_probe(load_preset(preset), make_options(mode="runtime", device="cpu", tokens=512, batch=1, decode_steps=8, layers_limit=2))
    assert any("checks the planner's arithmetic, not the engine" in c.value for c in at.caption)
    at.selectbox(key="probe_preset").set_value("llama-3.1-8b")
    at.selectbox(key="probe_device").set_value("cpu").run()
    at.button(key="probe_run").click().run()  # refused before any process starts
    errs = [e.value for e in at.error]
    assert errs and "“Layers limit”" in errs[0] and "--" not in errs[0] and "smaller preset" in errs[0], errs


def test_every_plan_input_has_a_label():
    """The app, the PDF, error messages and CLI help name inputs from planner/labels.py: a new
    PlanInputs field needs its label there (else users would read the raw field name)."""
    from planner.labels import INPUTS, humanize

    assert set(PlanInputs.model_fields) <= set(INPUTS), set(PlanInputs.model_fields) - set(INPUTS)
    assert humanize("give prefill_ms and tp 2") == "give “Observed prefill (ms)” and TP 2"


def test_window_caps_close_together_share_one_marker():
    from types import SimpleNamespace as Spec

    from pages.ui.charts import _window_marks

    # DeepSeek-V4's windows 8 and 128 on a 1M-token axis are 0.01 % apart: one marker, one label
    # (their two texts overlapped); equal windows of several groups are marked once
    specs = [Spec(window=128, kind="sliding"), Spec(window=8, kind="sliding"), Spec(window=128, kind="sliding"), Spec(window=None, kind="full")]
    assert _window_marks(specs, 1_048_576, log=False) == [(128, "sliding cap 8, 128")]
    # Gemma-style 1,024 window next to a chunked 8,192 on a 131,072-token axis: 5.5 % apart, two markers
    far = [Spec(window=1024, kind="sliding"), Spec(window=8192, kind="chunked")]
    assert _window_marks(far, 131_072, log=False) == [(1024, "sliding cap 1,024"), (8192, "chunked cap 8,192")]
    assert _window_marks(specs, 1_048_576, log=True) == [(8, "sliding cap 8"), (128, "sliding cap 128")]  # 16x apart on a log axis


def test_every_plan_chart_is_a_valid_plotly_figure():
    """pages/ui/charts.py builds figures without plotly's validation (2 ms instead of 11-26 ms a
    chart on every rerun, issue 24); a validated rebuild of each chart, for a dense, an MoE, a
    sliding-window and an MLA model, must accept every property and keep every trace."""
    import plotly.graph_objects as go

    from pages.ui import charts
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    for name in ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b", "deepseek-v2-lite"):
        model = prepare_model(load_preset(name))
        plan = compute_plan(make_inputs(max_context=4096), model)
        for fig in (charts.fig_memory(plan), charts.fig_kv_context(plan), charts.fig_kv_context(plan, True), charts.fig_heatmap(plan, model),
                    charts.fig_waterfall(plan), charts.fig_itl(plan, model), charts.fig_roofline(plan)):
            validated = go.Figure(fig.to_dict())  # raises ValueError on an invalid property
            assert len(validated.data) == len(fig.data) > 0 and charts.title_of(fig)
