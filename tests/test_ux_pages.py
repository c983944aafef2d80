"""Issue 27 in AppTest: one test per defect a new user met on the pages (the browser-only ones
are in test_ux_browser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest import assert_clean as _clean  # noqa: E402
from tests.apptest import run_app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def _app(query: dict[str, str] | None = None) -> AppTest:
    return run_app(query, timeout_s=60)


# --------------------------------------------------------------------------- 4. Simulate hides rejections


def test_simulate_counts_rejections_in_the_verdict_and_offers_length_profiles():
    at = _app()
    at.switch_page("pages/simulate.py").run()
    _clean(at)
    options = at.selectbox(key="sim_lengths").options
    # the box holds the profile's name, the line under it the lengths: "agent: prompt p50 12,000 / ..."
    # in the box was cut mid-number on a phone
    assert options == ["the plan's prompt and output", "chat", "rag", "agent", "summarisation"], options
    assert "agent: prompt p50 12,000 / p95 40,000 tokens" in at.selectbox(key="sim_lengths").help
    at.selectbox(key="sim_lengths").set_value("agent")
    at.number_input(key="sim_requests").set_value(120)
    at.multiselect(key="sim_policies").set_value(["fifo", "chunked"])
    at.run()
    _clean(at)
    df = at.dataframe[0].value
    fifo, chunked = df["fifo"], df["chunked"]
    assert "agent: prompt p50 12,000 / p95 40,000 tokens, output p50 400 / p95 2,000 tokens" in [c.value for c in at.caption]
    rejected = int(fifo.loc["Rejected"].split(" ")[0].replace(",", ""))
    assert rejected > 0 and "prompt longer than the step's token budget" in fifo.loc["Rejected"], fifo.loc["Rejected"]
    assert fifo.loc["Verdict"].startswith(f"rejects {rejected:,} of 120"), fifo.loc["Verdict"]
    assert chunked.loc["Rejected"] == "0" and not chunked.loc["Verdict"].startswith("rejects")  # chunked splits long prompts
    warned = [w.value for w in at.warning if w.value.startswith("fifo:")]
    assert warned and f"{rejected:,} of 120 requests" in warned[0] and "8,192-token step budget" in warned[0], [w.value for w in at.warning]


# --------------------------------------------------------------------------- 1. one deployment, two costs


def test_one_cost_basis_and_the_catalog_price_on_plan_compare_and_size():
    from planner.plan import compute_plan, make_inputs
    from planner.prices import PRICE_TABLE
    from planner.source import preset_ref

    at = _app()
    cost = next(m for m in at.metric if m.label == "Cost per hour")
    gpu = at.selectbox(key="gpu").value
    count = at.number_input(key="gpu_count").value
    want = PRICE_TABLE[gpu].usd_per_gpu_hour * count  # no price typed: the catalog's, e.g. H100 $2.95 x GPUs
    assert cost.value == f"${want:,.2f}", (cost.value, gpu, count)
    at.switch_page("pages/compare.py").run()
    _clean(at)
    df = at.dataframe[0].value if at.dataframe else None
    cells = " ".join(str(v) for v in df.to_numpy().ravel()) if df is not None else " ".join(t.value for t in at.markdown)
    assert "$" in cells, cells[:500]
    # Size's $/M tokens is the plan's own figure for the recommended deployment (one basis)
    from planner import sizing

    ref, model = preset_ref("llama-3.1-8b")
    rec = sizing.size(model, {"input_tokens": 2048, "output_tokens": 256}, users=64, ttft_p95_ms=2000, itl_p95_ms=60, gpus=["H100-SXM-80GB"]).recommendations[0]
    plan = compute_plan(make_inputs(**{k: v for k, v in rec.plan_values.items() if k != "gpu_hour_price"}), model)
    assert plan.cost.price_source.startswith("catalog default: AIMultiple") and plan.cost.gpu_hour_price == 2.95
    assert rec.cost_per_million_tokens == round(plan.cost.per_million_output_tokens, 4)
    assert "sequences / mean ITL" in plan.cost.basis


# --------------------------------------------------------------------------- 9. flow: Size opens on the plan


def test_size_opens_on_the_plans_load_gpu_and_slo():
    at = _app()
    at.selectbox(key="gpu").set_value("H200-141GB")
    at.number_input(key="sequences").set_value(64)
    at.run()
    _clean(at)
    at.switch_page("pages/size.py").run()
    _clean(at)
    assert at.number_input(key="size_users").value == 64  # was 100 whatever the plan
    assert at.multiselect(key="size_gpus").value == ["H200-141GB"]  # was all 14+ GPUs
    assert "holds 64 concurrent users" in at.success[0].value
    assert at.query_params["size_gpus"] in ("H200-141GB", ["H200-141GB"])
    # a link that asks for every GPU says so, and gets them all
    from planner.hardware import CATALOG

    at2 = AppTest.from_file(APP, default_timeout=60)
    at2.query_params.update({"m": "preset", "n": "llama-3.1-8b", "size_users": "20", "size_gpus": "all"})
    at2.run()
    _clean(at2)
    at2.switch_page("pages/size.py").run()
    assert at2.multiselect(key="size_gpus").value == list(CATALOG)


# --------------------------------------------------------------------------- 6. stale results look live


def test_stale_plan_is_greyed_under_the_error_and_the_error_names_whose_maximum():
    at = _app()
    at.session_state["group_context"] = True
    at.run()
    at.number_input(key="max_context").set_value(4096)
    at.number_input(key="input_tokens").set_value(8000)
    at.run()
    _clean(at)
    errs = [e.value for e in at.error]
    assert errs and "exceeds the maximum context you set, 4,096; the model's own is 131,072" in errs[0], errs
    assert "greyed: the last good plan" in errs[0]
    # the last good plan is drawn inside the greyed container, below the error
    blocks = list(at.main.children.values())
    stale = [k for k, b in enumerate(blocks) if str(getattr(b, "proto", "")).startswith('id: "$$ID-') and "-stale_results" in str(b.proto).split("\n")[0]]
    assert len(stale) == 1, "no greyed container"
    inside = blocks[stale[0]]
    assert any(m.label == "Max sequences" for m in inside.get("metric")), "the last good plan is not inside the greyed container"
    from pages.ui.style import CSS

    assert ".st-key-stale_results { opacity: 0.45; filter: grayscale(1); }" in CSS


# --------------------------------------------------------------------------- 7. Compare names plans by model x GPU


def test_compare_names_columns_by_model_and_gpu():
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="cmp_kv_dtype_1").set_value("fp8").run()
    _clean(at)
    df = at.dataframe[0].value
    names = [c for c in df.columns if c != "Better"]
    assert names[0].startswith("A · llama-3.1-8b × 1 H100-SXM-80GB"), names
    assert all(" × " in n for n in names), names
    verdicts = [v for v in df["Better"] if v and v != "same"]
    assert verdicts and all(v.split(":")[0].replace(", ", "") in "ABCD" for v in verdicts), verdicts  # still by letter


def test_size_table_leaves_out_empty_columns_and_shows_the_link_first():
    at = _app()
    at.switch_page("pages/size.py").run()
    _clean(at)
    cols = list(at.dataframe[0].value.columns)
    assert cols[0] == "plan" and "EP" not in cols and "sim req/s" not in cols, cols  # dense model, no capacity search run
    assert {"GPU", "TP", "GPUs", "$/h", "$/M tokens", "p95 ITL ms"} <= set(cols)
