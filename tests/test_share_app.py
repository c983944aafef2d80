"""Share links, plan files, the PDF button, deployment suggestions and the probe calibration in the app.

Through ``streamlit.testing.v1.AppTest``: ``at.query_params`` set before the first run is a share
link being opened; after a run it holds what the page wrote back (the address bar).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.runtime.media_file_manager import MediaFileManager  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from planner.plan import PlanInputs, compute_plan, make_inputs, suggest_inputs  # noqa: E402
from planner.presets import list_presets  # noqa: E402
from planner.share import encode_query, load_plan_file  # noqa: E402
from planner.source import ModelRef, preset_ref, upload_ref  # noqa: E402
from tests.apptest import assert_clean as _clean  # noqa: E402
from tests.apptest import run_app as _app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = json.loads((ROOT / "model_configs" / "llama-3.1-8b.json").read_text())
SEED_LINK = "v=1&m=example&dev=16&mres=4&q=20&pre=10&pf=400&fd=20&rd=2560&gen=129"


def _params(query: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in query.split("&"))


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def warnings(at: AppTest) -> list[str]:
    """The page's warnings but the serving card's own (a plan outside every measured regime of the
    serving fit says so: not a warning about the link)."""
    return [w.value for w in at.warning if "outside every measured regime" not in w.value]


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def share_link(at: AppTest) -> str:
    codes = [c.value for c in at.code if "?v=3" in c.value]
    assert len(codes) == 1, [c.value for c in at.code]
    return codes[0]


@pytest.fixture
def downloads(monkeypatch):
    """What the download buttons would serve: deferred callables by file id, static data by URL."""
    got: dict[str, object] = {}
    add, add_deferred = MediaFileManager.add, MediaFileManager.add_deferred

    def spy_add(self, data, *args, **kwargs):
        url = add(self, data, *args, **kwargs)
        got[url] = data
        return url

    def spy_deferred(self, fn, *args, **kwargs):
        file_id = add_deferred(self, fn, *args, **kwargs)
        got[file_id] = fn
        return file_id

    monkeypatch.setattr(MediaFileManager, "add", spy_add)
    monkeypatch.setattr(MediaFileManager, "add_deferred", spy_deferred)
    return got


# --------------------------------------------------------------------------- share links


def test_seed_example_link_restores_the_plan():
    at = _app(_params(SEED_LINK))
    m = metrics(at)
    # the seed: 128 KiB per token, 2,560 tokens -> 320 MiB; (14.4 - 4 - 1) GiB / 320 MiB = 30; TTFT 20 + 10 + 400 + 20
    assert (m["KV bytes / token"], m["Memory per sequence"], m["Max sequences"]) == ("128 KiB", "320 MiB", "30")
    assert m["TTFT"] == "450.0 ms"
    assert not warnings(at) and not errors(at)
    assert any("Restored the plan from the share link" in s.value for s in at.success)
    assert at.selectbox(key="gpu").value == "custom" and at.number_input(key="device_gib").value == 16.0
    # the address bar now holds the same plan (plus the example's config hash)
    written = at.query_params
    # rewritten as a version-3 link: the version-1 link's absent kvd meant bf16, now said outright
    assert {k: v for k, v in written.items() if k != "h"} == _params(SEED_LINK) | {"v": "3", "kvd": "bf16", "ws": "1", "mbt": "8192"}  # the version-1 link's implied values are written out at version 3
    assert share_link(at).startswith("http://localhost:8501/?v=3&m=example&")


def test_tampered_link_warns_field_by_field_and_shows_a_valid_plan():
    at = _app({"v": "3", "hr": "abc", "kvd": "fp4", "tp": "3"})
    text = " ".join(warnings(at))
    assert "headroom_bp (hr) 'abc' is not a whole number" in text
    assert "kv_dtype (kvd) 'fp4' is not one of" in text
    assert "tp 3" in text and "does not divide" in text
    assert not errors(at), errors(at)
    m = metrics(at)
    assert (m["KV bytes / token"], m["Max sequences"]) == ("128 KiB", "172")  # the default plan: vLLM 0.33's budget on one H100 (test_app.py test_headroom_changes_max_sequences_as_the_arithmetic_says)
    assert at.query_params["v"] == "3" and "hr" not in at.query_params and "tp" not in at.query_params
    at.button(key="dismiss_restore").click().run()
    assert not warnings(at)


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ({"v": "9", "kvd": "fp8"}, "not supported"),
        ({"v": "3", "m": "preset", "n": "no-such-model", "kvd": "fp8"}, "not a bundled preset"),
        ({"v": "3", "m": "hub"}, "without a Hub id"),
        ({"v": "3", "m": "upload", "h": "zz", "cfg": "!!!"}, "not a 64-character hex"),
        ({"v": "3", "seq": "-5", "mfu": "nan", "gpu": "TPU-9000"}, "unknown GPU"),
    ],
)
def test_bad_links_never_crash(query, expect):
    at = _app(query)
    assert any(expect in w for w in warnings(at)), warnings(at)
    assert metrics(at)["KV bytes / token"] in ("128 KiB", "64 KiB")


def test_partial_link_to_a_large_model_gets_the_suggestions():
    at = _app({"v": "3", "m": "preset", "n": "llama-3.1-70b", "kvd": "fp8"})
    assert any("deployment suggestions apply" in w and "tensor parallelism 4" in w for w in warnings(at)), warnings(at)
    assert not errors(at)
    assert metrics(at)["KV bytes / token"] == "40 KiB"  # 2 x 80 x 2 KV heads per GPU x 128 x 1 B
    assert at.query_params["tp"] == "4" and at.query_params["kvd"] == "fp8"


def test_out_of_range_for_a_control_is_clamped_with_a_warning():
    at = _app({"v": "3", "m": "preset", "n": "llama-3.1-8b", "hr": "6000"})
    assert any("headroom 60 % is above the control's maximum; using 50 %" in w for w in warnings(at)), warnings(at)
    assert at.slider(key="headroom_pct").value == 50.0


def test_widget_changes_are_written_to_the_query_string():
    at = _app()
    assert at.query_params["v"] == "3" and at.query_params["m"] == "preset" and at.query_params["n"] == "llama-3.1-8b"
    assert "kvd" not in at.query_params  # only what differs from the defaults
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    at.slider(key="headroom_pct").set_value(20.0).run()
    _clean(at)
    assert at.query_params["kvd"] == "fp8" and at.query_params["hr"] == "2000"
    assert "kvd=fp8" in share_link(at) and "hr=2000" in share_link(at)
    # an invalid input keeps the last good link
    at.number_input(key="tp").set_value(3).run()
    assert at.query_params.get("tp") is None and at.query_params["kvd"] == "fp8"
    # the model is in the link too
    at.number_input(key="tp").set_value(1).run()
    at.selectbox(key="preset").set_value("qwen3-8b").run()
    assert at.query_params["n"] == "qwen3-8b"


def test_a_fresh_session_reproduces_the_address_bar():
    at = _app()
    at.selectbox(key="preset").set_value("gemma-3-27b-it").run()
    at.selectbox(key="kv_dtype").set_value("int8").run()
    at.number_input(key="sequences").set_value(3).run()
    _clean(at)
    first = metrics(at)
    again = _app(dict(at.query_params))
    assert metrics(again) == first
    assert not warnings(again)


def test_uploaded_config_small_enough_is_embedded_in_the_link():
    half = dict(LLAMA_8B, num_hidden_layers=16, _name_or_path="test/llama-16-layers")
    ref, _model = upload_ref(half, "half.json")
    query = encode_query(ref, PlanInputs(kv_dtype="fp8"), half)
    assert "cfg" in query
    at = _app(query)
    assert metrics(at)["KV bytes / token"] == "32 KiB"  # 16 layers, fp8
    assert at.session_state["model_ref"]["config_hash"] == ref.config_hash
    assert at.query_params["cfg"] == query["cfg"]


def test_uploaded_config_too_large_asks_for_the_file():
    filler = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(64))  # does not compress below 2 KB
    big = dict(LLAMA_8B, num_hidden_layers=16, _name_or_path="test/llama-16-layers", _filler=filler)
    ref, _model = upload_ref(big, "big.json")
    query = encode_query(ref, PlanInputs(kv_dtype="fp8"), big)
    assert "cfg" not in query
    at = _app(query)
    side = [w.value for w in at.sidebar.warning]
    assert any("upload the same config.json to reproduce it" in w for w in side), side
    assert metrics(at)["KV bytes / token"] == "64 KiB"  # the default model with the link's fp8
    assert at.query_params["m"] == "upload"  # the link stays as opened until the file arrives
    at.file_uploader(key="config_upload").set_value(("big.json", json.dumps(big).encode(), "application/json")).run()
    _clean(at)
    assert metrics(at)["KV bytes / token"] == "32 KiB"
    assert not [w.value for w in at.sidebar.warning if "not the config" in w.value]
    assert at.query_params["h"] == ref.config_hash


# --------------------------------------------------------------------------- PDF and plan files


def test_pdf_button_builds_the_report_only_when_clicked(downloads):
    at = _app()
    button = at.download_button(key="pdf_download")
    assert button.label == "Download PDF sizing report"
    build = downloads[button.proto.deferred_file_id]
    assert callable(build)  # deferred: nothing is built on a rerun
    pdf = build()
    assert pdf[:5] == b"%PDF-" and len(pdf) > 5000
    assert build() is pdf  # cached for the same plan


def test_plan_file_round_trip_through_the_uploader(downloads):
    at = _app()
    at.selectbox(key="preset").set_value("qwen3-8b").run()
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    at.slider(key="headroom_pct").set_value(20.0).run()
    at.number_input(key="sequences").set_value(16).run()
    _clean(at)
    first = metrics(at)
    text = downloads[at.download_button(key="plan_download").proto.url]
    text = text.encode() if isinstance(text, str) else text
    state = load_plan_file(text)
    assert state.ref.name == "qwen3-8b" and state.inputs.kv_dtype == "fp8" and state.inputs.headroom_bp == 2000

    fresh = _app()
    assert metrics(fresh) != first
    fresh.file_uploader(key="plan_upload").set_value(("plan.json", text, "application/json")).run()
    _clean(fresh)
    assert metrics(fresh) == first
    assert fresh.selectbox(key="preset").value == "qwen3-8b" and fresh.selectbox(key="kv_dtype").value == "fp8"
    assert any("plan file plan.json" in s.value for s in fresh.success)
    assert fresh.query_params["n"] == "qwen3-8b" and fresh.query_params["hr"] == "2000"

    fresh.file_uploader(key="plan_upload").set_value(("broken.json", b"{not json", "application/json")).run()
    _clean(fresh)
    assert any("broken.json" in e and "not valid JSON" in e for e in errors(fresh)), errors(fresh)
    assert metrics(fresh) == first  # the plan stays

    doc = json.loads(text)
    doc["inputs"]["sequences"] = "many"
    fresh.file_uploader(key="plan_upload").set_value(("edited.json", json.dumps(doc).encode(), "application/json")).run()
    _clean(fresh)
    assert any("inputs.sequences 'many' is not a whole number" in w for w in warnings(fresh)), warnings(fresh)
    assert not errors(fresh)


# --------------------------------------------------------------------------- suggestions and calibration


def test_every_preset_yields_a_plan_after_the_suggestions():
    """What the Plan page does when a preset is picked, for every bundled preset (library level)."""
    defaults = PlanInputs().model_dump()
    for preset in list_presets():
        _ref, model = preset_ref(preset.name)
        updates, _why = suggest_inputs(model, defaults)
        plan = compute_plan(make_inputs(**(defaults | updates)), model)
        assert plan.kv_cache.maximum_sequences_by_memory >= 1, preset.name


def test_picking_each_preset_in_the_app_opens_a_plan():
    at = _app()
    for preset in list_presets():
        at.selectbox(key="preset").set_value(preset.name).run()
        _clean(at)
        assert not errors(at), (preset.name, errors(at))
        assert at.query_params["n"] == preset.name
    at.selectbox(key="preset").set_value("__example__").run()
    assert at.query_params["m"] == "example" and not errors(at)


def test_all_windowed_model_shows_bytes_within_the_window():
    at = _app({"v": "3", "m": "preset", "n": "mistral-7b-v0.1"})
    # every layer slides over 4,096 tokens: 2 x 32 x 8 x 128 x 2 B = 128 KiB per token within the window
    m = [x for x in at.metric if x.label == "KV bytes / token"][0]
    assert m.value == "128 KiB"
    assert "within the window" in (m.proto.delta or "")


def test_probe_calibration_can_be_applied_and_is_clamped():
    cal = {"mfu": 0.004, "mbu": 0.62, "notes": [], "device": "H100-SXM-80GB", "measured_device": "cuda", "measured_on": "cuda NVIDIA H100 80GB HBM3"}
    at = _app(probe_calibration=cal)
    button = at.button(key="apply_calibration")
    assert button.label == "Apply probe calibration (MFU 0.004, MBU 0.62 from H100-SXM-80GB)"
    before = metrics(at)["ITL"]
    button.click().run()
    _clean(at)
    notes = [s.value for s in at.success]
    assert any("MFU 0.01, MBU 0.62" in n and "MFU 0.004 is below the control's minimum; using 0.01" in n for n in notes), notes
    assert at.session_state["plan_values"]["mfu"] == 0.01 and at.session_state["plan_values"]["mbu"] == 0.62
    assert at.query_params["mfu"] == "0.01" and at.query_params["mbu"] == "0.62"
    assert metrics(at)["ITL"] != before


def test_reset_brings_back_the_suggestions():
    at = _app({"v": "3", "m": "preset", "n": "llama-3.1-70b", "tp": "8", "gpus": "8"})
    assert metrics(at)["KV bytes / token"] == "40 KiB"  # 8 KV heads over TP 8: one per GPU
    at.button(key="reset_inputs").click().run()
    _clean(at)
    assert not errors(at)
    assert at.number_input(key="tp").value == 4
    assert ModelRef(**at.session_state["model_ref"]).name == "llama-3.1-70b"


def test_custom_device_figures_travel_in_the_link():
    at = _app({"v": "3", "m": "example", "dev": "16", "mres": "4", "bw": "2000", "tf": "300"})
    assert not warnings(at) and not errors(at)
    assert at.number_input(key="device_bandwidth_gb_s").value == 2000.0 and at.number_input(key="device_bf16_tflops").value == 300.0
    assert (at.query_params["bw"], at.query_params["tf"]) == ("2000", "300")
    at.selectbox(key="gpu").set_value("H100-SXM-80GB").run()  # a catalog GPU: the custom figures drop out
    _clean(at)
    assert not {"dev", "bw", "tf"} & set(at.query_params)
