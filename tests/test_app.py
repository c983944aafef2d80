"""The Streamlit app through ``streamlit.testing.v1.AppTest`` (no browser, no server).

Every number the pages show comes from :mod:`planner`; these tests check that the widgets
reach the library and that the library's numbers reach the screen, formatted as promised.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
LLAMA_8B = json.loads((ROOT / "model_configs" / "llama-3.1-8b.json").read_text())


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    _clean(at)
    return at


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def metric(at: AppTest, label: str, index: int = 0) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert len(values) > index, f"no metric {label!r}: {[m.label for m in at.metric]}"
    return values[index]


def as_bytes(text: str) -> float:
    """'128 KiB' -> 131072; '1,234 B' -> 1234."""
    number, unit = text.rsplit(" ", 1)
    return float(number.replace(",", "")) * UNITS[unit]


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


# --------------------------------------------------------------------------- Plan page


def test_plan_page_opens_on_default_preset():
    at = _app()
    # llama-3.1-8b, bf16, TP 1: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B = 128 KiB per token;
    # 2,560 reserved tokens (2,048 input + 512 output) x 128 KiB = 320 MiB per sequence.
    assert metric(at, "KV bytes / token") == "128 KiB"
    assert metric(at, "MiB / reserved sequence") == "320 MiB"
    assert metric(at, "Max sequences") == "179"
    assert metric(at, "TTFT").endswith(" ms") and metric(at, "ITL").endswith(" ms")
    assert not errors(at)
    text = " ".join(m.value for m in at.markdown)
    assert "32 full" in text and "KV heads per GPU" in text  # geometry card
    assert len(at.get("plotly_chart")) >= 2  # memory stack + the open chart tab
    assert any("Admitted · 8 of at most 179 sequences" in t for t in (m.value for m in at.markdown))
    expanders = [e.label for e in at.expander]
    assert "Assumptions and omissions" in expanders and "Formulas with this plan's numbers" in expanders
    assert "CUDA graphs" in text and "Allocator rounding" in text
    # formulas carry this plan's numbers
    assert "335,544,320 B" in text and "77,309,411,328 B" in text


def test_kv_dtype_bf16_to_fp8_halves_bytes_per_token():
    at = _app()
    before = as_bytes(metric(at, "KV bytes / token"))
    per_seq = as_bytes(metric(at, "MiB / reserved sequence"))
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    _clean(at)
    assert metric(at, "KV bytes / token") == "64 KiB"
    assert as_bytes(metric(at, "KV bytes / token")) * 2 == before
    assert as_bytes(metric(at, "MiB / reserved sequence")) * 2 == per_seq
    assert as_int(metric(at, "Max sequences")) > 179


def test_headroom_changes_max_sequences_as_the_arithmetic_says():
    """llama-3.1-8b on one H100-SXM-80GB, bf16 weights and cache, workspace 1 GiB, defaults otherwise.

    device   = 80 GiB                          = 85,899,345,920 B
    weights  = 8,029,995,008 params x 2 B      = 16,059,990,016 B
    fixed    = weights + 1 GiB workspace       = 17,133,731,840 B
    per seq  = 2,560 tokens x 131,072 B        =    335,544,320 B
    10 %: usable 77,309,411,328; available 60,175,679,488; / per seq = 179.3 -> 179
    20 %: usable 68,719,476,736; available 51,585,744,896; / per seq = 153.7 -> 153
     0 %: usable 85,899,345,920; available 68,765,614,080; / per seq = 204.9 -> 204
    """
    at = _app()
    assert metric(at, "Max sequences") == "179"
    at.slider(key="headroom_pct").set_value(20.0).run()
    _clean(at)
    assert metric(at, "Max sequences") == "153"
    assert at.session_state["plan_values"]["headroom_bp"] == 2000  # stored as basis points
    at.slider(key="headroom_pct").set_value(0.0).run()
    assert metric(at, "Max sequences") == "204"


def test_every_chart_tab_renders():
    at = _app()
    for tab in ("K/V vs context", "Context × concurrency", "Latency", "Roofline"):
        at.session_state["chart_tab"] = tab
        at.run()
        _clean(at)
        assert len(at.get("plotly_chart")) >= 2, tab
        assert not errors(at), (tab, errors(at))


def test_bad_pasted_config_shows_its_error_and_keeps_the_plan():
    at = _app()
    shown = [m.value for m in at.metric]
    at.segmented_control(key="model_source").set_value("Paste JSON").run()
    at.text_area(key="config_paste").input('{"num_hidden_layers": 0}').run()
    _clean(at)
    assert any("num_hidden_layers" in e and "at least 1" in e for e in errors(at)), errors(at)
    assert [m.value for m in at.metric] == shown
    at.text_area(key="config_paste").input("this is not json").run()
    _clean(at)
    assert any("not valid JSON" in e for e in errors(at)), errors(at)
    assert [m.value for m in at.metric] == shown


def test_upload_good_then_bad_config_keeps_the_previous_plan():
    at = _app()
    at.segmented_control(key="model_source").set_value("Upload config.json").run()
    half = dict(LLAMA_8B, num_hidden_layers=16, _name_or_path="test/llama-16-layers")
    at.file_uploader(key="config_upload").set_value(("half.json", json.dumps(half).encode(), "application/json")).run()
    _clean(at)
    assert not errors(at), errors(at)
    assert metric(at, "KV bytes / token") == "64 KiB"  # 16 layers instead of 32
    shown = [m.value for m in at.metric]
    at.file_uploader(key="config_upload").set_value(("broken.json", b"{not json", "application/json")).run()
    _clean(at)
    assert any("broken.json" in e and "not valid JSON" in e for e in errors(at)), errors(at)
    assert [m.value for m in at.metric] == shown


def test_invalid_input_shows_error_next_to_field_and_keeps_last_plan():
    at = _app()
    at.number_input(key="tp").set_value(2).run()
    at.number_input(key="gpu_count").set_value(3).run()
    _clean(at)
    side = [e.value for e in at.sidebar.error]
    assert any("multiple of tp 2" in e for e in side), side
    assert any("last good plan" in e for e in errors(at))
    assert metric(at, "Max sequences")  # the last good plan is still on screen
    at.number_input(key="gpu_count").set_value(4).run()
    assert not errors(at)
    # 2 replicas x 179 sequences; tp 2 halves the KV heads per GPU -> 64 KiB per token per GPU
    assert metric(at, "KV bytes / token") == "64 KiB"


def test_model_too_large_points_at_tensor_parallelism():
    at = _app()
    at.selectbox(key="preset").set_value("llama-3.1-70b").run()
    _clean(at)
    assert any("exceeds usable" in e for e in [e.value for e in at.sidebar.error])
    at.number_input(key="gpu_count").set_value(4).run()
    at.number_input(key="tp").set_value(4).run()
    _clean(at)
    assert not errors(at), errors(at)
    # 2 x 80 layers x (8 / 4) KV heads x 128 x 2 B = 81,920 B = 80 KiB per token per GPU
    assert metric(at, "KV bytes / token") == "80 KiB"


def test_error_opens_the_collapsed_group_of_its_field():
    at = _app()
    shown = [m.value for m in at.metric]
    at.selectbox(key="preset").set_value("falcon-7b").run()  # no max_position_embeddings: the class default 2,048 applies
    _clean(at)
    assert [m.value for m in at.metric] == shown  # the last good plan (llama-3.1-8b) stays
    side = [e.value for e in at.sidebar.error]
    assert any("exceeds the model maximum of 2,048" in e for e in side), side
    at.number_input(key="max_context").set_value(4096).run()  # the field is there, in the opened group
    _clean(at)
    assert not errors(at), errors(at)
    # falcon-7b is MQA: 2 x 32 layers x 1 KV head x 64 x 2 B = 8,192 B = 8 KiB per token
    assert metric(at, "KV bytes / token") == "8 KiB"


def test_reset_restores_defaults():
    at = _app()
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    at.button(key="reset_inputs").click().run()
    _clean(at)
    assert at.selectbox(key="kv_dtype").value == "bf16"
    assert metric(at, "KV bytes / token") == "128 KiB"


def test_start_preset_from_command_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["app.py", "--preset", "qwen3-8b"])
    at = _app()
    # 2 x 36 layers x 8 KV heads x 128 x 2 B = 147,456 B = 144 KiB
    assert metric(at, "KV bytes / token") == "144 KiB"
    assert at.selectbox(key="preset").value == "qwen3-8b"


# --------------------------------------------------------------------------- Compare page


def test_compare_shows_two_plans_with_differences():
    at = _app()
    at.switch_page("pages/compare.py").run()
    _clean(at)
    assert metric(at, "KV bytes / token", 0) == "128 KiB"  # Plan A: the Plan page's plan
    assert metric(at, "KV bytes / token", 1) == "64 KiB"  # Plan B: fp8 by default
    assert len([m for m in at.metric if m.label == "Max sequences"]) == 2
    assert len(at.get("plotly_chart")) == 1 and len(at.dataframe) == 1
    at.segmented_control(key="cmp_n").set_value(3).run()
    _clean(at)
    assert len([m for m in at.metric if m.label == "Max sequences"]) == 3
    # Plan C defaults to an H200 (141 GiB): more sequences than Plan A
    assert as_int(metric(at, "Max sequences", 2)) > as_int(metric(at, "Max sequences", 0))


def test_compare_error_stays_in_its_column():
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.number_input(key="cmp_tp_1").set_value(3).run()
    _clean(at)
    assert any("does not divide" in e or "multiple of tp" in e for e in errors(at)), errors(at)
    assert len([m for m in at.metric if m.label == "Max sequences"]) == 1  # Plan A still shown


def test_plan_values_survive_page_switches():
    at = _app()
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    at.switch_page("pages/compare.py").run()
    assert metric(at, "KV bytes / token", 0) == "64 KiB"  # Plan A uses the Plan page's inputs
    at.switch_page("pages/plan.py").run()
    _clean(at)
    assert at.selectbox(key="kv_dtype").value == "fp8"
    assert metric(at, "KV bytes / token") == "64 KiB"


# --------------------------------------------------------------------------- Hub source


def test_hub_fetch_success_and_error(monkeypatch, tmp_path):
    hub_mod = pytest.importorskip("planner.hub", reason="planner.hub is not available")
    fakehub = pytest.importorskip("tests.fakehub", reason="tests/fakehub.py is not available")
    from huggingface_hub import constants

    fake = fakehub.FakeHub().start()
    try:
        cache = str(tmp_path / "hf_cache")
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_HUB_CACHE", cache)
        for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "KVP_HUB_TTL_S"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
        hub_mod.clear_cache()
        sha = fake.add_repo("org/half-llama", {"config.json": dict(LLAMA_8B, num_hidden_layers=16)})

        at = _app()
        shown = [m.value for m in at.metric]
        at.segmented_control(key="model_source").set_value("Hugging Face Hub").run()
        at.text_input(key="hub_repo").input("org/missing").run()
        at.button(key="hub_fetch").click().run()
        _clean(at)
        assert errors(at), "a missing repo must show an error"
        assert [m.value for m in at.metric] == shown

        at.text_input(key="hub_repo").input("org/half-llama").run()
        at.text_input(key="hub_token").input("hf_secretsecretsecretsecretsecret00").run()
        at.button(key="hub_fetch").click().run()
        _clean(at)
        assert not errors(at), errors(at)
        assert metric(at, "KV bytes / token") == "64 KiB"
        assert at.session_state["model_ref"]["commit"] == sha
        assert "hf_secret" not in json.dumps(at.session_state["model_ref"])
    finally:
        hub_mod.clear_cache()
        fake.stop()


# --------------------------------------------------------------------------- formatting and imports


def test_number_formatting():
    from pages.common import fmt_bytes, fmt_ms, fmt_num

    assert fmt_bytes(1000) == "1,000 B"
    assert fmt_bytes(1234) == "1.21 KiB"
    assert fmt_bytes(335_544_320) == "320 MiB"
    assert fmt_bytes(16_059_990_016) == "14.96 GiB"
    assert fmt_bytes(5 << 50) == "5 PiB"
    assert fmt_num(1234567.5) == "1,234,567.5" and fmt_num(179) == "179"
    assert fmt_ms(7.8788) == "7.88 ms" and fmt_ms(4102.59) == "4,102.6 ms"
    assert re.fullmatch(r"-?[\d,]+(\.\d+)? (B|KiB|MiB|GiB|TiB|PiB)", fmt_bytes(-3 << 30))


def test_plan_and_compare_pages_do_not_import_torch():
    code = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({APP!r}, default_timeout=30)\n"
        "at.run(); at.switch_page('pages/compare.py').run()\n"
        "assert not at.exception\n"
        "print(sorted(m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
