"""Live probe on CPU: exact cache bytes for tiny random models, safety paths, JSON import, page.

Expected bytes are worked out by hand next to each case (fp32 = 4 B, batch B, positions P):
full layer 2 x B x kv_heads x head_dim x P x 4; transformers' sliding layer keeps W - 1 positions
in its view and min(previous, W - 1) + new in storage (W after a decode step, the whole prompt
after a long prefill); transformers' MLA caches one head of kv_lora_rank (K) + rope (V).
Most runs are in-process (``isolate=False``) to stay fast; the subprocess path is covered by the
CLI, timeout, crash and page tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from planner import probe
from planner.cli import main
from planner.errors import PlannerError
from planner.geometry import parse_geometry
from planner.kv import kv_specs
from planner.probe import budget_measurements, load_probe_json, make_options, parent, predicted_transformers_cache_bytes, protocol, run_probe
from planner.probe.prepare import build_request, prepare_probe

ROOT = Path(__file__).resolve().parent.parent

BASE = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 256, "max_position_embeddings": 512}
MHA = {"model_type": "llama", **BASE, "num_key_value_heads": 4}  # head_dim 16
GQA = {"model_type": "llama", **BASE, "num_key_value_heads": 2}
SLIDING = {"model_type": "mistral", **BASE, "num_key_value_heads": 2, "sliding_window": 8}
HYBRID = {"model_type": "gemma3_text", **BASE, "num_hidden_layers": 6, "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 8}  # 5 sliding + 1 full
MLA = {
    "model_type": "deepseek_v3", **BASE, "num_hidden_layers": 3, "num_key_value_heads": 4, "moe_intermediate_size": 32,
    "kv_lora_rank": 32, "q_lora_rank": None, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
}


def _run(config: dict, **kw) -> probe.ProbeResult:
    values = {"device": "cpu", "kv_dtype": "fp32", "tokens": 10, "decode_steps": 3, "warmup": False, **kw}
    return run_probe(config, make_options(**values), isolate=False)


# --------------------------------------------------------------------------- import hygiene


def test_import_does_not_import_torch():
    code = "import sys, planner.probe; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- runtime mode: exact bytes


@pytest.mark.parametrize(
    ("config", "tokens", "steps", "expected"),
    [
        # MHA: 2 layers x 2 x 4 heads x 16 x (10 + 3) x 4 B = 13,312
        (MHA, 10, 3, 2 * 2 * 4 * 16 * 13 * 4),
        # GQA: 2 layers x 2 x 2 heads x 16 x 13 x 4 B = 6,656
        (GQA, 10, 3, 2 * 2 * 2 * 16 * 13 * 4),
        # sliding W=8 below the window: 5 + 2 = 7 positions kept whole: 2 x 2 x 2 x 16 x 7 x 4 = 3,584
        (SLIDING, 5, 2, 2 * 2 * 2 * 16 * 7 * 4),
        # sliding above the window after decode steps: storage of W = 8 positions (view W-1 = 7): 4,096
        (SLIDING, 12, 3, 2 * 2 * 2 * 16 * 8 * 4),
        # sliding right after a 12-token prefill: the view's storage is the whole prompt: 6,144
        (SLIDING, 12, 0, 2 * 2 * 2 * 16 * 12 * 4),
        # MLA: 3 layers x 1 head x (kv_lora_rank 32 + rope 8) x 13 x 4 B = 6,240 (compressed latent)
        (MLA, 10, 3, 3 * (32 + 8) * 13 * 4),
    ],
    ids=["mha", "gqa", "sliding-below-W", "sliding-above-W", "sliding-after-prefill", "mla"],
)
def test_runtime_bytes_exact(config, tokens, steps, expected):
    r = _run(config, mode="runtime", tokens=tokens, decode_steps=steps)
    assert r.ok, r.error
    assert r.measured_kv_bytes == r.predicted_kv_bytes == expected
    assert r.ratio == 1.0
    assert r.layers_measured == r.layers_total == config["num_hidden_layers"]
    assert r.prefill_ms > 0 and len(r.decode_steps_ms) == steps
    assert r.explanation and any("equal the prediction exactly" in s for s in r.explanation)
    for row in r.layers:
        assert row.measured_bytes == row.predicted_bytes


def test_sliding_view_keeps_w_minus_1_positions():
    r = _run(SLIDING, mode="runtime", tokens=12, decode_steps=3)
    assert {tuple(row.keys_shape) for row in r.layers} == {(1, 2, 7, 16)}  # view: W - 1
    assert r.measured_logical_kv_bytes == r.predicted_logical_kv_bytes == 2 * 2 * 2 * 16 * 7 * 4
    assert r.measured_kv_bytes_after_prefill == r.predicted_kv_bytes_after_prefill == 2 * 2 * 2 * 16 * 12 * 4
    assert any("W-1 = 7" in s for s in r.explanation)
    geo = parse_geometry(SLIDING)
    assert predicted_transformers_cache_bytes(geo, 15, 1, "fp32") == 4096  # steady decode: W positions
    assert predicted_transformers_cache_bytes(geo, 15, 1, "fp32", logical=True) == 3584
    assert predicted_transformers_cache_bytes(geo, 12, 1, "fp32", last_step=12) == 6144


def test_mla_cached_compressed_matches_transformers_latent_runtime():
    r = _run(MLA, mode="runtime")
    # transformers 5.24 caches the latent: 3 layers x (kv_lora 32 + rope 8) x 13 positions x 4 B = 6,240,
    # exactly planner.kv's "transformers-latent" runtime (the legacy "transformers" one decompresses:
    # 3 x 4 heads x (24 + 16) x 13 x 4 = 24,960)
    assert r.measured_kv_bytes == r.planner_kv_bytes == 3 * (32 + 8) * 13 * 4
    geo = parse_geometry(MLA)
    from planner.kv import inspect_geometry

    assert inspect_geometry(geo, "fp32", tokens=13, runtime="transformers").kv_bytes_at_tokens == 3 * 4 * (24 + 16) * 13 * 4
    assert any("compressed" in s for s in r.explanation)
    assert {tuple(row.keys_shape) for row in r.layers} == {(1, 1, 13, 32)}
    assert {tuple(row.values_shape) for row in r.layers} == {(1, 1, 13, 8)}


def test_static_cache_holds_max_len_and_window():
    # max_cache_len = 13: full layer 13 positions, sliding min(13, 8) = 8
    r = _run(HYBRID, mode="runtime", static=True, batch=2)
    per_pos = 2 * 2 * 1 * 32 * 4  # batch 2, K+V, 1 head of 32, fp32
    assert r.measured_kv_bytes == r.predicted_kv_bytes == per_pos * (5 * 8 + 13)
    assert {row.cache_class for row in r.layers} == {"StaticSlidingWindowLayer", "StaticLayer"}


def test_layers_limit_keeps_pattern_and_states_scaling():
    r = _run(HYBRID, mode="runtime", layers_limit=2)
    assert (r.layers_measured, r.layers_total) == (2, 6)
    assert r.measured_kv_bytes == r.predicted_kv_bytes == 2 * 2 * 32 * 8 * 4  # two sliding layers, W storage
    assert r.predicted_full_model_kv_bytes == 2 * 32 * 4 * (5 * 8 + 13)
    assert r.scaled_measured_kv_bytes == r.predicted_full_model_kv_bytes
    assert any("first 2 of 6 layers" in s for s in r.explanation)


def test_runtime_roofline_and_calibration():
    r = _run(GQA, mode="runtime", decode_steps=4)
    assert r.roofline_device and r.predicted_prefill_ms > 0 and r.predicted_decode_step_ms > 0
    cal = probe.calibrate(r)
    assert cal.mfu == pytest.approx(min(1.0, max(1e-6, r.predicted_prefill_compute_ms * r.assumed_mfu / r.prefill_ms)), rel=1e-4)
    assert cal.mbu == pytest.approx(min(1.0, max(1e-6, r.predicted_decode_memory_ms * r.assumed_mbu / r.decode_ms_p50)), rel=1e-4)
    assert (r.calibrated_mfu, r.calibrated_mbu) == (cal.mfu, cal.mbu)
    from planner.plan import PlanInputs

    applied = cal.apply(PlanInputs())
    assert (applied.mfu, applied.mbu) == (cal.mfu, cal.mbu)
    assert any("fixed per-layer costs, all-reduce and all-to-all are not rescaled" in n for n in cal.notes)  # says which terms it rescales
    with pytest.raises(PlannerError):
        probe.calibrate(_run(GQA, mode="allocate"))
    # the sentence reads the times as the probe's table does: 4 significant digits, thousands separated
    # (a 5.1 s CPU prefill read "Prefill 5115.08 ms" beside the table's "5,115 ms")
    from planner.probe.explain import timing_sentence

    slow = r.model_copy(update={"prefill_ms": 5115.08, "decode_ms_p50": 230.71, "predicted_prefill_ms": 0.24481, "predicted_decode_step_ms": 0.15339})
    assert timing_sentence(slow).startswith("Prefill 5,115 ms vs roofline 0.2448 ms; decode step p50 230.7 ms vs roofline 0.1534 ms (roofline for ")
    assert timing_sentence(r) in r.explanation


# --------------------------------------------------------------------------- allocate mode


@pytest.mark.parametrize("config", [MHA, GQA, SLIDING, HYBRID, MLA], ids=["mha", "gqa", "sliding", "hybrid", "mla"])
@pytest.mark.parametrize("runtime", ["vllm", "transformers"])
def test_allocate_bytes_exact(config, runtime):
    r = _run(config, mode="allocate", runtime=runtime, tokens=20, batch=2)
    assert r.ok, r.error
    assert r.measured_kv_bytes == r.predicted_kv_bytes > 0
    geo = parse_geometry(config)
    if runtime == "vllm":  # the vLLM layout is planner.kv's paged bytes exactly
        assert r.predicted_kv_bytes == r.planner_kv_bytes == 2 * sum(s.paged_bytes(20, 16) for s in kv_specs(geo, "fp32", 1, "vllm"))
    else:  # steady decode state: what a runtime probe of 19 + 1 tokens measures
        assert r.predicted_kv_bytes == predicted_transformers_cache_bytes(geo, 20, 2, "fp32")


def test_allocate_vllm_sliding_and_mla_by_hand():
    # sliding W=8, 20 tokens, 16-token blocks: min(2, ceil(8/16) + 1 = 2) blocks x 16 x 2 heads x 16 x 2 (K,V) x 4 B x 2 layers
    assert _run(SLIDING, mode="allocate", tokens=20).measured_kv_bytes == 2 * 16 * 2 * 16 * 2 * 4 * 2
    # MLA latent: 2 blocks x 16 x (32 + 8) x 4 B x 3 layers, one tensor per layer
    assert _run(MLA, mode="allocate", tokens=20).measured_kv_bytes == 2 * 16 * 40 * 4 * 3


@pytest.mark.parametrize(
    ("kv_dtype", "per_vector"),
    [("fp8", 16), ("int8", 16 + 4), ("int4", 8 + 4)],  # head_dim 16: data + one fp16 scale/zero pair per 64 elements
)
def test_allocate_quantized(kv_dtype, per_vector):
    r = _run(GQA, mode="allocate", kv_dtype=kv_dtype, tokens=16)
    assert r.measured_kv_bytes == r.predicted_kv_bytes == r.planner_kv_bytes == 2 * 16 * 2 * 2 * per_vector  # layers x positions x heads x (K,V)


def test_transformers_refuses_quantized_and_vllm_runtime():
    with pytest.raises(PlannerError, match="kv_dtype"):
        make_options(mode="runtime", kv_dtype="int4")
    with pytest.raises(PlannerError, match="runtime"):
        make_options(mode="runtime", runtime="vllm")
    with pytest.raises(PlannerError, match="tokens"):
        make_options(tokens=0)


# --------------------------------------------------------------------------- safety


def test_refused_before_allocating_cpu_budget(monkeypatch):
    monkeypatch.setenv(probe.ENV_CPU_BUDGET, "1000")

    def boom(*a, **k):
        raise AssertionError("no process may start")

    monkeypatch.setattr(parent.subprocess, "run", boom)
    with pytest.raises(PlannerError, match="refused before allocating"):
        run_probe(GQA, make_options(device="cpu", tokens=64, kv_dtype="fp32"))


def test_child_refuses_before_allocating(monkeypatch):
    import torch

    monkeypatch.setenv(probe.ENV_CPU_BUDGET, "1000")

    def no_alloc(*a, **k):
        raise AssertionError("allocated despite the refusal")

    monkeypatch.setattr(torch, "zeros", no_alloc)
    with pytest.raises(PlannerError, match="refused before allocating"):  # device auto: the child checks
        run_probe(GQA, make_options(device="auto", tokens=64, kv_dtype="fp32"), isolate=False)


def test_bad_budget_env(monkeypatch):
    monkeypatch.setenv(probe.ENV_CPU_BUDGET, "lots")
    with pytest.raises(PlannerError, match=probe.ENV_CPU_BUDGET):
        probe.cpu_budget_bytes()


def test_timeout_gives_error_result():
    r = run_probe(GQA, make_options(device="cpu", tokens=16, timeout_s=0.05, kv_dtype="fp32"))
    assert not r.ok and r.measured_kv_bytes is None
    assert "did not finish within 0.05 s" in r.error
    assert r.predicted_kv_bytes > 0 and r.explanation[0].startswith("no measurement")


@pytest.mark.parametrize(("code", "needle"), [("import os; os._exit(3)", "exited with code 3"), ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "signal 9")])
def test_crash_gives_error_result(monkeypatch, code, needle):
    monkeypatch.setattr(parent, "_child_command", lambda: [sys.executable, "-c", code])
    r = run_probe(GQA, make_options(device="cpu", tokens=16, kv_dtype="fp32"))
    assert not r.ok and needle in r.error


def test_disabled(monkeypatch):
    monkeypatch.setenv(probe.ENV_DISABLE, "1")
    assert probe.probe_disabled()
    with pytest.raises(PlannerError, match="disabled"):
        run_probe(GQA, make_options(device="cpu"))


# --------------------------------------------------------------------------- parent/child protocol


def _request(config: dict = GQA, **kw) -> protocol.ProbeRequest:
    values = {"device": "cpu", "kv_dtype": "fp32", "tokens": 16, **kw}
    return build_request(prepare_probe(config, make_options(**values)))


def test_protocol_round_trip_keeps_infinity():
    # Nemotron-H's config holds a bare Infinity (time_step_limit): the child must receive it as read
    request = _request({**GQA, "time_step_limit": [0.0, float("inf")]}, mode="runtime")
    text = protocol.encode(request)
    assert "Infinity" in text and json.loads(text)["protocol"] == protocol.PROTOCOL == "kvp-probe-child/1"
    assert protocol.decode_request(text) == request
    allocate = _request(mode="allocate")
    assert protocol.decode_request(protocol.encode(allocate)).layout == allocate.layout  # 2 layers x K, V
    assert len(allocate.layout) == 4


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: {**d, "protocol": "kvp-probe-child/0"}, "speaks 'kvp-probe-child/0', not 'kvp-probe-child/1'"),
        (lambda d: {**d, "tokens": 0}, "tokens is invalid"),
        (lambda d: {**d, "surprise": 1}, "surprise is invalid"),
        (lambda d: {k: v for k, v in d.items() if k != "cpu_budget"}, "cpu_budget is invalid"),
    ],
    ids=["version", "range", "extra", "missing"],
)
def test_protocol_refuses_a_bad_request(mutate, needle):
    text = json.dumps(mutate(json.loads(protocol.encode(_request()))))
    with pytest.raises(protocol.ProtocolError, match=re.escape(needle)):
        protocol.decode_request(text)


def test_child_answers_a_foreign_request_with_an_error_reply():
    request = {**json.loads(protocol.encode(_request())), "protocol": "kvp-probe-child/2"}
    out = subprocess.run([sys.executable, "-m", "planner.probe", "--child"], input=json.dumps(request), capture_output=True, text=True, cwd=ROOT, timeout=60)
    reply = protocol.decode_reply(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0 and isinstance(reply, protocol.FailedReply)
    assert "different planner versions" in reply.error


def test_parent_reports_an_invalid_reply(monkeypatch):
    # a reply of the right version whose measurement lacks every figure: an error result naming the field
    line = json.dumps({"protocol": protocol.PROTOCOL, "status": "ok", "measurement": {"mode": "allocate"}})
    monkeypatch.setattr(parent, "_child_command", lambda: [sys.executable, "-c", f"print({line!r})"])
    r = run_probe(GQA, make_options(device="cpu", tokens=16, kv_dtype="fp32"))
    assert not r.ok and r.measured_kv_bytes is None
    assert r.error == "the probe reply's ok.measurement.allocate.device is invalid: Field required"


def test_cuda_allocate_reply_explains_the_allocator_rounding(monkeypatch):
    # No GPU here: the reply a CUDA child sends is given by hand. 1 token in 1-token blocks: 2 layers
    # x K, V tensors of 1 x 1 x 2 heads x 16 fp32 = 128 B each, 512 B in all; the caching allocator
    # rounds each to 512 B, so memory_allocated grows by 4 x 512 = 2,048 B
    measurement = protocol.AllocateMeasurement(
        device="cuda", device_name="NVIDIA H200", device_total_bytes=150_000_000_000, torch_version="2.13.0", kv_bytes=2048, storage_bytes=512,
        logical_kv_bytes=512, tensors=4, allocate_ms=0.5, rounded_bytes=2048, cuda_allocated_delta_bytes=2048, cuda_peak_delta_bytes=2048, cuda_released=True,
    )
    monkeypatch.setattr(parent, "execute", lambda request: protocol.MeasuredReply(measurement=measurement))
    r = run_probe(GQA, make_options(device="cuda", tokens=1, block_tokens=1, kv_dtype="fp32"), isolate=False)
    assert (r.ok, r.device, r.predicted_kv_bytes, r.measured_kv_bytes, r.ratio, r.cuda_allocated_delta_bytes) == (True, "cuda", 512, 2048, 4.0, 2048)
    assert any("rounds every tensor up to a multiple of 512 bytes; the storage itself matches exactly" in s for s in r.explanation)
    assert r.explanation[0] == "Measured = torch.cuda.memory_allocated after minus before allocating 4 tensors; tensor storage alone is 512 B."


def test_child_imports_no_more_of_the_planner_than_the_single_module_did():
    # planner/probe.py imported planner.errors, geometry, kv and limits at import time; the child's
    # process (python -m planner.probe --child) loads the package, so the same set plus planner.probe.*
    # and the config-key table geometry reads (names only), planner.units (constants and
    # formatters, imports nothing) and planner.settings (the environment variables)
    code = "import sys, planner.probe.child; print(' '.join(sorted(m for m in sys.modules if m.startswith(('planner', 'torch', 'transformers')))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    loaded = set(out.stdout.split())
    assert out.returncode == 0, out.stderr
    assert {m for m in loaded if not m.startswith("planner.probe")} == {"planner", "planner.config_keys", "planner.errors", "planner.geometry", "planner.kv", "planner.limits", "planner.settings", "planner.units"}


# --------------------------------------------------------------------------- CLI (subprocess end to end)


@pytest.fixture(scope="module")
def runtime_json(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("probe") / "config.json"
    path.write_text(json.dumps(SLIDING))
    out = subprocess.run(
        [sys.executable, "-m", "planner", "probe", "--config", str(path), "--mode", "runtime", "--device", "cpu", "--tokens", "12", "--decode-steps", "3", "--kv-dtype", "fp32", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cli_runtime_json(runtime_json):
    r = load_probe_json(runtime_json)
    assert r.ok and r.ratio == 1.0 and r.measured_kv_bytes == 4096 and r.device == "cpu"
    assert r.ttft_ms == pytest.approx(r.prefill_ms + r.first_decode_ms)
    assert r.decode_ms_p50 is not None and r.decode_ms_p95 >= r.decode_ms_p50
    assert r.calibrated_mfu is not None and r.calibrated_mbu is not None
    for key in ("device", "predicted_kv_bytes", "measured_kv_bytes", "ratio", "mode", "runtime", "kv_dtype", "tokens", "batch", "layers_measured", "layers_total", "explanation"):
        assert key in json.loads(runtime_json)


def test_cli_errors_exit_2_one_line(tmp_path, capsys):
    from planner.cli import main

    path = tmp_path / "c.json"
    path.write_text(json.dumps(GQA))
    assert main(["probe", "--config", str(path), "--mode", "runtime", "--runtime", "vllm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: runtime=") and "\n" not in err
    assert main(["probe", "--config", str(path), "--tokens", "0"]) == 2
    assert main(["probe", "--preset", "no-such-preset"]) == 2


def test_cli_wiring_into_build_parser():
    from planner.cli import build_parser, cmd_probe

    args = build_parser().parse_args(["probe", "--preset", "llama-3.2-1b", "--mode", "runtime", "--layers-limit", "2", "--static", "--json"])
    assert (args.mode, args.layers_limit, args.static, args.func) == ("runtime", 2, True, cmd_probe)


def test_library_never_imports_the_cli():
    """planner.report and planner.probe take plain inputs: importing them loads no CLI module."""
    code = "import sys, planner.report, planner.probe, planner.plan, planner.share; print('planner.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
    for path in (ROOT / "planner").rglob("*.py"):
        if path.name not in ("cli.py", "__main__.py"):
            assert not re.search(r"^\s*(from planner\.cli |from planner import cli|import planner\.cli)", path.read_text(), re.M), path.name


# --------------------------------------------------------------------------- JSON import


def test_load_probe_json_roundtrip(runtime_json):
    r = load_probe_json(runtime_json)
    assert load_probe_json(r.to_json()) == r


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: "not json", "not valid JSON"),
        (lambda d: "[1, 2]", "JSON object"),
        (lambda d: json.dumps({**d, "format": "other"}), "format"),
        (lambda d: json.dumps({**d, "measured_kv_bytes": -1}), "measured_kv_bytes"),
        (lambda d: json.dumps({**d, "ratio": 2.0}), "ratio"),
        (lambda d: json.dumps({**d, "mode": "bogus"}), "mode"),
        (lambda d: json.dumps(d).replace('"ratio": 1.0', '"ratio": NaN'), "NaN"),
        (lambda d: json.dumps({**d, "padding": "x" * (1 << 20)}), "at most"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "predicted_kv_bytes"}), "predicted_kv_bytes"),
    ],
    ids=["text", "list", "format", "negative", "ratio", "mode", "nan", "oversize", "missing"],
)
def test_load_probe_json_bad(runtime_json, mutate, needle):
    with pytest.raises(PlannerError, match=needle):
        load_probe_json(mutate(json.loads(runtime_json)))


# --------------------------------------------------------------------------- page


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=60)


def test_page_runs_probe_and_shows_ratio():
    at = _app().run()
    assert not at.exception
    at.radio(key="probe_mode").set_value("allocate").run()  # the page opens on runtime; this test allocates
    at.selectbox(key="probe_preset").set_value("llama-3.2-1b")
    at.selectbox(key="probe_device").set_value("cpu")
    at.number_input(key="probe_tokens").set_value(16)
    at.number_input(key="probe_layers_limit").set_value(1)
    at.button(key="probe_run").click().run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Measured / predicted"] == "1.0000"
    # the run went through the progress bar (a spinner said nothing about the time limit)
    assert any(c.value.startswith("The probe ran for ") and c.value.endswith("of its 120 s limit.") for c in at.caption), [c.value for c in at.caption]


def test_page_calibrate_and_disabled(runtime_json, monkeypatch):
    at = _app()
    at.session_state["probe_result"] = json.loads(runtime_json)
    at.run()
    at.button(key="probe_calibrate").click().run()
    assert not at.exception
    labels = {m.label for m in at.metric}
    assert {"Measured / predicted", "Calibrated MFU", "Calibrated MBU"} <= labels
    assert at.session_state["probe_calibration"]["mfu"] > 0

    monkeypatch.setenv(probe.ENV_DISABLE, "1")
    at = _app().run()
    assert at.button(key="probe_run").disabled
    assert any("disabled" in i.value for i in at.info)


def test_gpu_probe_memory_feeds_the_vllm_budget(runtime_json, tmp_path, capsys):
    # A CPU probe measures no GPU memory: nothing for vLLM's budget, and the CLI says so.
    cpu = load_probe_json(runtime_json)
    assert budget_measurements(cpu, 8192) == {}
    cpu_path = tmp_path / "cpu.json"
    cpu_path.write_text(runtime_json)
    assert main(["engine", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--probe-json", str(cpu_path)]) == 2
    assert "no GPU memory measurements" in capsys.readouterr().err
    # The same run as the CUDA child reports it (no GPU here, so its figures are given by hand):
    # 600 MiB outside torch's pool, a prefill peak of 12,000 B above weights and cache at batch
    # 1 x 12 tokens, 15 GiB of weights (which stay the planner's count).
    gpu = cpu.model_copy(update={"device": "cuda", "cuda_non_torch_bytes": 600 << 20, "cuda_prefill_peak_bytes": 12_000, "cuda_weights_bytes": 15 << 30})
    got = budget_measurements(gpu, 8192)
    # activations scale with the step's tokens: 12,000 B x 8,192 / (1 x 12) = 8,192,000 B
    assert got == {"non-torch memory": 600 << 20, "profiling peak activations": 8_192_000}
    assert budget_measurements(gpu, 8192, tp=2) == {}  # one GPU's run says nothing of a TP rank
    gpu_path = tmp_path / "gpu.json"
    gpu_path.write_text(gpu.to_json())
    assert main(["engine", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--probe-json", str(gpu_path), "--json"]) == 0
    terms = {t["name"]: t for t in json.loads(capsys.readouterr().out)["budget"]["terms"]}
    for name, value in got.items():
        # engine --json lists vLLM's terms as the bytes each takes (planner.engines.vllm_memory.MemoryTerm)
        assert terms[name]["bytes"] == value and terms[name]["source"] == "measured by the probe on this GPU"
    assert main(["engine", "--preset", "llama-3.1-8b", "--available-kv-gib", "20", "--probe-json", str(gpu_path)]) == 2
    assert "give it with --gpu" in capsys.readouterr().err
