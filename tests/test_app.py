"""The Streamlit app through ``streamlit.testing.v1.AppTest`` (no browser, no server).

Every number the pages show comes from :mod:`planner`; these tests check that the widgets
reach the library and that the library's numbers reach the screen, formatted as promised.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest import assert_clean as _clean  # noqa: E402
from tests.apptest import run_app as _app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
LLAMA_8B = json.loads((ROOT / "model_configs" / "llama-3.1-8b.json").read_text())


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
    assert metric(at, "Memory per sequence") == "320 MiB"
    # vLLM 0.33's budget (see test_headroom_changes_max_sequences_as_the_arithmetic_says): 172, the
    # same figure the start-up card's log line gives (27,576 blocks = 441,216 tokens / 2,560)
    assert metric(at, "Max sequences") == "172"
    assert metric(at, "TTFT").endswith(" ms") and metric(at, "ITL").endswith(" ms")
    assert not errors(at)
    text = " ".join(m.value for m in at.markdown)
    assert "32 full" in text and "KV heads per GPU" in text  # geometry card
    assert len(at.get("plotly_chart")) >= 2  # memory stack + the open chart tab
    assert any("Admitted · 8 of at most 172 sequences" in t for t in (m.value for m in at.markdown))
    expanders = [e.label for e in at.expander]
    assert "Assumptions and omissions" in expanders and "Formulas with this plan's numbers" in expanders
    assert "CUDA graphs" in text and "Allocator rounding" in text
    # formulas carry this plan's numbers
    assert "335,544,320 B" in text and "76,516,989,861" in text
    codes = [c.value for c in at.code]
    assert any(c.startswith("GPU KV cache size: 441,216 tokens") for c in codes), codes
    assert any("The KV pool holds 441,216 tokens (vLLM's GPU KV cache size)" in c.value for c in at.caption)  # the memory card says the same
    assert any("Available KV cache memory: 53.86 GiB per GPU, term by term" in e for e in expanders), expanders


def test_kv_dtype_bf16_to_fp8_halves_bytes_per_token():
    at = _app()
    before = as_bytes(metric(at, "KV bytes / token"))
    per_seq = as_bytes(metric(at, "Memory per sequence"))
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    _clean(at)
    assert metric(at, "KV bytes / token") == "64 KiB"
    assert as_bytes(metric(at, "KV bytes / token")) * 2 == before
    assert as_bytes(metric(at, "Memory per sequence")) * 2 == per_seq
    assert as_int(metric(at, "Max sequences")) > 179


def test_headroom_changes_max_sequences_as_the_arithmetic_says():
    """llama-3.1-8b on one H100-SXM-80GB under runtime vllm (the default): vLLM 0.33's start-up budget.

    device   = 79.18 GiB as CUDA reports it                         = 85,018,877,624 B
    weights  = 16,060,522,496 B (the checkpoint's safetensors total)
               + RoPE cos/sin 131,072 x 128 x 2 B = 33,554,432      = 16,094,076,928 B
    start-up = weights + profiling 2,028,937,969 + non-torch 142,807,662 + graphs 418,759,311
                                                                    = 18,684,581,870 B
    a block  = 32 layers x 16 tokens x 8 KV heads x 128 x 2 (K, V) x 2 B = 2,097,152 B; a request 2,560 / 16 = 160 blocks
    10 % (--gpu-memory-utilization 0.9):  76,516,989,861 - start-up = 57,832,407,991 -> 27,576 blocks / 160 = 172
    20 % (0.8):                           68,015,102,099 - start-up = 49,330,520,229 -> 23,522 blocks / 160 = 147
     5 % (0.95):                          80,767,933,742 - start-up = 62,083,351,872 -> 29,603 blocks / 160 = 185
     0 % (1.0): 79.18 GiB wanted, 78.57 free at start-up: vLLM refuses; the last good plan stays
    """
    at = _app()
    assert metric(at, "Max sequences") == "172"
    at.slider(key="headroom_pct").set_value(20.0).run()
    _clean(at)
    assert metric(at, "Max sequences") == "147"
    assert at.session_state["plan_values"]["headroom_bp"] == 2000  # stored as basis points
    at.slider(key="headroom_pct").set_value(5.0).run()
    assert metric(at, "Max sequences") == "185"
    at.slider(key="headroom_pct").set_value(0.0).run()
    _clean(at)
    side = [e.value for e in at.sidebar.error]
    assert any("vLLM 0.33 refuses to start: Free memory on device (78.57/79.18 GiB) on startup is less than desired GPU memory utilization (1.0, 79.18 GiB)" in e for e in side), side
    assert metric(at, "Max sequences") == "185"


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
    assert any("multiple of TP 2" in e for e in side), side
    assert any("last good plan" in e for e in errors(at))
    assert metric(at, "Max sequences")  # the last good plan is still on screen
    at.number_input(key="gpu_count").set_value(4).run()
    assert not errors(at)
    # 2 replicas x 179 sequences; tp 2 halves the KV heads per GPU -> 64 KiB per token per GPU
    assert metric(at, "KV bytes / token") == "64 KiB"


def test_model_too_large_opens_with_tensor_parallelism_suggested():
    at = _app()
    at.selectbox(key="preset").set_value("llama-3.1-70b").run()
    _clean(at)
    # 70.6e9 params x 2 B = 131.4 GiB: TP 2 leaves 65.7 + 1 GiB workspace > 90 % of 72 GiB usable, TP 4 fits
    infos = [i.value for i in at.info]
    assert any("131.4 GiB of weights need tensor parallelism 4 on H100-SXM-80GB" in i for i in infos), infos
    assert not errors(at), errors(at)
    assert at.number_input(key="tp").value == 4 and at.number_input(key="gpu_count").value == 4
    # 2 x 80 layers x (8 / 4) KV heads x 128 x 2 B = 81,920 B = 80 KiB per token per GPU
    assert metric(at, "KV bytes / token") == "80 KiB"
    shown = [m.value for m in at.metric]
    at.number_input(key="tp").set_value(1).run()  # back to one GPU per replica: the weights do not fit
    _clean(at)
    side = [e.value for e in at.sidebar.error]
    # runtime vllm: vLLM's own refusal in one line with the numbers (131.42 GiB of bf16 parameters +
    # 0.03 GiB RoPE buffer against 79.18 GiB x 0.9 = 71.26 GiB; the CLI test derives them)
    assert any(
        e.startswith("vLLM 0.33 refuses to start: No available memory for the cache blocks (weights 131.45 GiB")
        and "against the budget 71.26 GiB (79.18 GiB x 0.9 on H100-SXM-80GB): short by 62.68 GiB); use more GPUs (TP)" in e
        for e in side
    ), side
    assert [m.value for m in at.metric] == shown  # the last good plan stays


def test_falcon_7b_opens_resized_to_its_class_default_context():
    at = _app()
    at.selectbox(key="preset").set_value("falcon-7b").run()  # no max_position_embeddings: the class default 2,048 applies
    _clean(at)
    assert not errors(at), errors(at)
    infos = [i.value for i in at.info]
    assert any("resized to the model's 2,048-token maximum" in i for i in infos), infos
    values = at.session_state["plan_values"]
    assert values["input_tokens"] == 1536 and values["output_tokens"] == 512  # 1,536 + 512 = 2,048
    # falcon-7b is MQA: 2 x 32 layers x 1 KV head x 64 x 2 B = 8,192 B = 8 KiB per token
    assert metric(at, "KV bytes / token") == "8 KiB"
    assert metric(at, "Memory per sequence") == "16 MiB"  # 2,048 tokens x 8 KiB


def test_error_opens_the_collapsed_group_of_its_field():
    at = _app()
    shown = [m.value for m in at.metric]
    assert "max_context" not in [w.key for w in at.number_input]  # the Context group starts collapsed
    at.session_state["max_context"] = 1024  # below the 2,560 reserved tokens
    at.run()
    _clean(at)
    assert [m.value for m in at.metric] == shown  # the last good plan stays
    side = [e.value for e in at.sidebar.error]
    assert any("2,560" in e and "1,024" in e for e in side), side
    at.number_input(key="max_context").set_value(4096).run()  # the field is there, in the opened group
    _clean(at)
    assert not errors(at), errors(at)
    assert metric(at, "KV bytes / token") == "128 KiB"


def test_reset_restores_defaults():
    at = _app()
    at.selectbox(key="kv_dtype").set_value("fp8").run()
    at.button(key="reset_inputs").click().run()
    _clean(at)
    assert at.selectbox(key="kv_dtype").value == "auto"  # resolves to the checkpoint's bfloat16
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
    assert metric(at, "KV bytes / token", 1) == "128 KiB"  # Plan B starts as a copy of A (issue 27 item 3)
    at.selectbox(key="cmp_kv_dtype_1").set_value("fp8").run()
    assert metric(at, "KV bytes / token", 0) == "128 KiB"  # Plan A: the Plan page's plan
    assert metric(at, "KV bytes / token", 1) == "64 KiB"  # Plan B: fp8
    assert len([m for m in at.metric if m.label == "Max sequences"]) == 2
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe) == 1  # one figure per panel (Max sequences, MiB per sequence, ITL)
    at.segmented_control(key="cmp_n").set_value(3).run()
    _clean(at)
    assert len([m for m in at.metric if m.label == "Max sequences"]) == 3
    assert at.selectbox(key="cmp_kv_dtype_2").value == at.selectbox(key="cmp_kv_dtype_0").value  # C starts from A, not from B's fp8
    at.selectbox(key="cmp_gpu_2").set_value("H200-141GB").run()
    # Plan C on an H200 (141 GiB): more sequences than Plan A
    assert as_int(metric(at, "Max sequences", 2)) > as_int(metric(at, "Max sequences", 0))


def test_compare_error_stays_in_its_column():
    at = _app()
    at.switch_page("pages/compare.py").run()
    at.number_input(key="cmp_tp_1").set_value(3).run()
    _clean(at)
    assert any("does not divide" in e or "multiple of TP" in e for e in errors(at)), errors(at)
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


@pytest.fixture
def fake_hub(hub):
    """tests/fakehub.py on 127.0.0.1 (the ``hub`` fixture of tests/conftest.py)."""
    return hub


def _fetch(at: AppTest, repo: str, revision: str = "main", token: str = "") -> AppTest:
    if at.segmented_control(key="model_source").value != "Hugging Face Hub":
        at.segmented_control(key="model_source").set_value("Hugging Face Hub").run()
    at.text_input(key="hub_repo").input(repo)
    at.text_input(key="hub_revision").input(revision)
    at.text_input(key="hub_token").input(token)
    at.button(key="hub_fetch").click().run()
    _clean(at)
    return at


def _card(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown) + " " + " ".join(c.value for c in at.caption)


def test_hub_fetch_success_pins_the_commit_and_keeps_the_token_out(fake_hub):
    from tests.fakehub import make_safetensors

    weights = make_safetensors({"w": ("BF16", [1024, 1024]), "b": ("F32", [1024])})
    sha = fake_hub.add_repo("org/half-llama", {"config.json": dict(LLAMA_8B, num_hidden_layers=16), "model.safetensors": weights})
    at = _fetch(_app(), "org/half-llama", token="hf_secretsecretsecretsecretsecret00")
    assert not errors(at), errors(at)
    assert metric(at, "KV bytes / token") == "64 KiB"
    assert at.session_state["model_ref"]["commit"] == sha
    card = _card(at)
    assert sha in card and "safetensors metadata" in card  # pinned commit and the weights source
    assert "2 MiB" in card  # 1,048,576 x 2 B + 1,024 x 4 B, exactly what the checkpoint stores
    assert "hf_secret" not in json.dumps(at.session_state["model_ref"]) and "hf_secret" not in json.dumps(dict(at.query_params))
    assert at.query_params["m"] == "hub" and at.query_params["c"] == sha


HUB_ERRORS = {
    "gated": ("org/gated", "main", "accept the licence"),
    "missing repo": ("org/missing", "main", "was not found on the Hub: check the id"),
    "missing revision": ("org/tiny", "no-such-branch", "Revision 'no-such-branch' does not exist"),
    "no config.json": ("org/gguf-only", "main", "has no config.json"),
    "malformed JSON": ("org/broken", "main", "is not usable: not valid JSON"),
}


@pytest.mark.parametrize("case", list(HUB_ERRORS))
def test_hub_errors_show_next_to_the_hub_fields_and_keep_the_plan(fake_hub, case):
    fake_hub.add_repo("org/tiny", {"config.json": LLAMA_8B})
    fake_hub.add_repo("org/gated", {"config.json": LLAMA_8B})
    fake_hub.gate("org/gated")
    fake_hub.add_repo("org/gguf-only", {"README.md": "weights only", "model.gguf": b"GGUF"})
    fake_hub.add_repo("org/broken", {"config.json": b'{"num_hidden_layers": 4,'})
    at = _app()
    shown = [m.value for m in at.metric]
    link = dict(at.query_params)
    repo, revision, expect = HUB_ERRORS[case]
    _fetch(at, repo, revision)
    side = [e.value for e in at.sidebar.error]
    assert len(side) == 1 and expect in side[0], side
    if case == "gated":
        assert "token" in side[0]
    assert [m.value for m in at.metric] == shown  # the previous plan stays
    assert dict(at.query_params) == link


def test_hub_token_from_streamlit_secrets(fake_hub):
    fake_hub.add_repo("org/gated", {"config.json": LLAMA_8B})
    fake_hub.gate("org/gated", allowed_tokens=("hf_fromsecretsfromsecrets0000",))
    at = AppTest.from_file(APP, default_timeout=30)
    at.secrets["HF_TOKEN"] = "hf_fromsecretsfromsecrets0000"
    at.run()
    _fetch(at, "org/gated")
    assert not errors(at), errors(at)
    assert at.session_state["model_ref"]["repo_id"] == "org/gated"


def test_hub_link_restores_at_the_pinned_commit_then_from_cache(fake_hub, monkeypatch):
    from huggingface_hub import constants

    from planner import hub as hub_mod

    sha = fake_hub.add_repo("org/half-llama", {"config.json": dict(LLAMA_8B, num_hidden_layers=16)})
    fake_hub.add_repo("org/half-llama", {"config.json": dict(LLAMA_8B, num_hidden_layers=8)})  # main moved on
    link = {"v": "3", "m": "hub", "r": "org/half-llama", "rv": "main", "c": sha, "kvd": "fp8"}
    at = _app(link)
    assert not errors(at), errors(at)
    assert metric(at, "KV bytes / token") == "32 KiB"  # 16 layers at the pinned commit, fp8
    assert at.session_state["model_ref"]["commit"] == sha
    assert at.query_params["c"] == sha and at.text_input(key="hub_revision").value == sha

    hub_mod.clear_cache()  # a new process: only the disk cache is left, and the Hub is out of reach
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    again = _app(link)
    assert metric(again, "KV bytes / token") == "32 KiB"
    assert "served from the local cache" in _card(again).lower()

    missing = _app({"v": "3", "m": "hub", "r": "org/nothing-here", "c": "0" * 40})
    assert any("could not be loaded" in w.value for w in missing.warning)
    assert any("not in the local" in e.value for e in missing.sidebar.error), [e.value for e in missing.sidebar.error]
    assert metric(missing, "KV bytes / token") == "128 KiB"  # the default plan
    assert missing.query_params["r"] == "org/nothing-here"  # the link stays as opened


# --------------------------------------------------------------------------- formatting and imports


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


def test_vision_model_offers_encoder_tokens():
    at = _app()
    at.session_state["group_context"] = True  # open the Context group
    at.run()
    assert "encoder_tokens" not in [w.key for w in at.number_input]  # llama-3.1-8b has no cross-attention
    at.selectbox(key="preset").set_value("llama-3.2-11b-vision").run()
    _clean(at)
    assert metric(at, "Memory per sequence") == "320 MiB"  # 131,072 B x 2,560 tokens
    at.number_input(key="encoder_tokens").set_value(6404).run()
    _clean(at)
    # + 8 cross layers x 8 KV heads x (128 + 128) x 2 B = 32,768 B per image token x 6,404 = 200.125 MiB
    assert metric(at, "Memory per sequence") == "520.12 MiB"


def test_vllm_startup_controls_change_the_budget_and_the_serve_line():
    at = _app()
    assert at.selectbox(key="entry_point").value == "serve"
    assert not [n for n in at.number_input if n.key == "max_loras"]  # shown once LoRA is on
    at.selectbox(key="entry_point").set_value("llm").run()
    _clean(at)
    # vLLM 0.33's LLM class on an H100: 16,384 tokens a step (EngineArgs.get_batch_defaults), in the serve line too
    codes = [c.value for c in at.code]
    assert any(c.startswith('LLM(model="meta-llama/Llama-3.1-8B-Instruct", tensor_parallel_size=1') and "max_num_batched_tokens=16384" in c for c in codes), codes
    at.checkbox(key="enable_lora").check().run()
    _clean(at)
    assert at.number_input(key="max_loras").value == 1 and at.number_input(key="max_lora_rank").value == 16
    text = " ".join(m.value for m in at.markdown)
    assert "LoRA adapter slots [" in text  # a term of the start-up card's budget


def test_a_plan_like_runs_that_all_ran_slower_warns_beside_its_headline():
    # a share link to Kimi-K2 INT4 on 8 x H200 under SGLang at 16 clients: its published int4 runs
    # (the SGLang cookbook's g88, g94, g96) all measured TPOT about 4.6x the plan's, which the page
    # says under the headline figures, in the planner's words (planner.accuracy.caveat)
    from planner.plan import PlanInputs, compute_plan
    from planner.source import preset_ref

    query = {"v": "3", "m": "preset", "n": "kimi-k2", "in": "500", "out": "500", "gpu": "H200-141GB", "gpus": "8", "tp": "8", "seq": "16", "wd": "int4", "serving_engine": "sglang"}
    at = _app(query)
    _ref, model = preset_ref("kimi-k2")
    plan = compute_plan(PlanInputs(gpu="H200-141GB", tp=8, gpu_count=8, sequences=16, weight_dtype="int4", input_tokens=500, output_tokens=500, serving_engine="sglang"), model)
    warned = [w.value for w in at.warning if w.value.startswith("Published runs like this one")]
    assert warned and "TPOT 4.6x" in warned[0] and warned[0] == plan.roofline.accuracy_caveat
    # the same link in fp8 weights: the runs like it miss both ways, no such warning
    fp8 = _app({**query, "wd": "auto", "n": "deepseek-v3"})
    assert not [w.value for w in fp8.warning if w.value.startswith("Published runs like this one")]


def test_the_serving_card_names_the_benchmark_that_checks_the_plan():
    # a link with bench_prompts: the card says what --num-prompts 80 --max-concurrency 8 should print as its
    # mean TTFT, in the planner's words (planner.explain.benchmark_sentence), and the link keeps the input
    at = _app({"v": "3", "m": "preset", "n": "llama-3.1-8b", "in": "4096", "out": "256", "seq": "8", "bench_prompts": "80"})
    checks = [m.value for m in at.markdown if m.value.startswith("**Check it:**")]
    assert checks and "--num-prompts 80 --max-concurrency 8" in checks[0] and "its first 8 prompts queue on an idle engine" in checks[0]
    assert at.query_params.get("bench_prompts") in ("80", ["80"])
    at.session_state["group_load"] = True  # the control under "Load and SLOs" holds the link's value
    at.run()
    assert at.number_input(key="bench_prompts").value == 80 and at.number_input(key="bench_prompts").label == "Benchmark prompts"
