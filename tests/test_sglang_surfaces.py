"""Runtime sglang on every surface: Compare rows, ``size`` over both engines, the PDF, the plan
CLI, share links and the Plan page's "SGLang start-up preview" card.

Expected numbers: hand arithmetic (tests/test_sglang_plan.py derives 414,757 tokens and 162
requests for Llama-3.1-8B on one H100 from SGLang 0.5.23's rules; the preset is the same
architecture, so the same figures).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.compare import compare_rows, engine_pool_tokens
from planner.plan import compute_plan, make_inputs
from planner.presets import load_preset
from planner.share import decode_query, encode_query
from planner.sizing import size
from planner.source import ModelRef

ROOT = Path(__file__).resolve().parent.parent
LLAMA_TOKENS, LLAMA_REQUESTS = 414757, 162  # hand arithmetic: tests/test_sglang_plan.py


@pytest.fixture(scope="module")
def llama():
    from planner.plan import prepare_model

    return prepare_model(load_preset("llama-3.1-8b"))


def test_compare_rows_show_both_engines_and_why(llama):
    a, b = compute_plan(make_inputs(), llama), compute_plan(make_inputs(runtime="sglang"), llama)
    rows = {r.label: r for r in compare_rows([("Plan A", a, "llama"), ("Plan B", b, "llama")])}
    assert rows["Runtime"].cells == ("vllm (vLLM 0.33)", "sglang (SGLang 0.5.23)")
    assert rows["Engine KV pool (tokens / GPU)"].cells[1] == f"{LLAMA_TOKENS:,}"
    assert engine_pool_tokens(a) == a.kv_cache.engine.startup_kv_cache_tokens
    why = rows["Engine sizing (why the pools differ)"].cells
    assert why[0].startswith("gpu_memory_utilization 0.9") and "16-token blocks" in why[0]
    assert why[1].startswith("mem_fraction_static 0.835") and "131,072 B a token" in why[1]
    assert rows["Max sequences"].cells[1] == f"{LLAMA_REQUESTS:,}"
    # the Runtime row names the engines and releases; this cell fits a three-plan table at 1280 px
    assert rows["Memory figure counts"].cells == (f"blocks · steady state {a.kv_cache.steady_state_sequences:,}", f"token pool · steady state {LLAMA_REQUESTS:,}")
    # without an SGLang column the rows are as before
    plain = [r.label for r in compare_rows([("Plan A", a, "llama"), ("Plan B", a, "llama")])]
    assert "Engine KV pool (tokens / GPU)" not in plain


def test_size_searches_both_engines(llama):
    # 324 users = 2 x 162: one H100 under SGLang holds 162 requests of 2,560 tokens
    result = size(llama, users=324, gpus=["H100-SXM-80GB", "H100-PCIe-80GB"], kv_dtypes=("bf16",), tps=(1,), engines=("vllm", "sglang"))
    sg = [r for r in result.recommendations if r.runtime == "sglang"]
    assert [(r.gpu, r.max_num_seqs, r.replicas) for r in sg] == [("H100-SXM-80GB", LLAMA_REQUESTS, 2)]
    assert {r.runtime for r in result.recommendations} == {"vllm", "sglang"}
    assert result.searched["engines"] == ["vllm", "sglang"] and result.searched["candidates"] == 4
    pcie = [r for r in result.refused if r.runtime == "sglang"]
    assert pcie and pcie[0].gpu == "H100-PCIe-80GB" and "no SGLang GPU profile" in pcie[0].reason
    assert sg[0].plan_values["runtime"] == "sglang"
    # no engines: the base's runtime alone, and no "engines" key
    assert "engines" not in size(llama, users=10, gpus=["H100-SXM-80GB"], kv_dtypes=("bf16",), tps=(1,)).searched


def test_size_cli_engine_flag():
    out = subprocess.run([sys.executable, "-m", "planner", "size", "--preset", "llama-3.1-8b", "--users", "324", "--gpus", "H100-SXM-80GB", "--kv-dtypes", "bf16", "--tps", "1", "--engine", "vllm,sglang", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    recs = json.loads(out.stdout)["recommendations"]
    assert [r["max_num_seqs"] for r in recs if r["runtime"] == "sglang"] == [LLAMA_REQUESTS]
    bad = subprocess.run([sys.executable, "-m", "planner", "size", "--preset", "llama-3.1-8b", "--users", "3", "--engine", "trt"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "engines" in bad.stderr


def test_pdf_has_the_sglang_preview(llama, tmp_path):
    from planner.report import build_pdf, sglang_rows

    plan = compute_plan(make_inputs(runtime="sglang"), llama)
    rows = dict(sglang_rows(plan))
    assert rows["Token pool"].startswith(f"{LLAMA_TOKENS:,} tokens of 131,072 B")
    path = tmp_path / "plan.pdf"
    path.write_bytes(build_pdf(plan, ModelRef(kind="preset", name="llama-3.1-8b")))
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "SGLang start-up preview (SGLang 0.5.23)" in text
    assert f"max_total_num_tokens={LLAMA_TOKENS}" in text.replace("\n", "")
    assert "python -m sglang.launch_server" in text
    assert sglang_rows(compute_plan(make_inputs(), llama)) == []


def test_plan_cli_prints_the_log_and_command():
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--preset", "llama-3.1-8b", "--runtime", "sglang"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"sglang       SGLang 0.5.23: mem_fraction_static 0.835, page 1, {LLAMA_TOKENS:,} tokens, {LLAMA_REQUESTS} requests a replica (token pool binds)" in out.stdout
    assert "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 1" in out.stdout
    refused = subprocess.run([sys.executable, "-m", "planner", "plan", "--preset", "llama-3.1-8b", "--runtime", "sglang", "--gpu", "MI300X-192GB"], capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "no SGLang GPU profile" in refused.stderr


def test_share_link_round_trip_keeps_the_runtime(llama):
    # --mem-fraction-static 0.8: 63.5899 - 78.5475 x 0.2 = 47.8804 GiB / 131,072 B = 392,234 tokens,
    # in 16-token pages 392,224 (the rest of the hand arithmetic: tests/test_sglang_plan.py)
    ref = ModelRef(kind="preset", name="llama-3.1-8b")
    inputs = make_inputs(runtime="sglang", mem_fraction_static=0.8, page_size=16, chunked_prefill_size=4096)
    query = encode_query(ref, inputs)
    assert (query["rt"], query["mfs"], query["pg"], query["cps"]) == ("sglang", "0.8", "16", "4096")
    decoded = decode_query(query)
    assert decoded.inputs == inputs
    assert compute_plan(decoded.inputs, llama).sglang.capacity.max_total_num_tokens == 392224


def test_share_link_carries_the_receive_interval(llama):
    ref = ModelRef(kind="preset", name="llama-3.1-8b")
    inputs = make_inputs(runtime="sglang", recv_interval=10)
    query = encode_query(ref, inputs)
    assert query["rcv"] == "10" and "rcv" not in encode_query(ref, make_inputs(runtime="sglang"))  # the default is not written
    assert decode_query(query).inputs == inputs
    bad = decode_query({**query, "rcv": "0"})  # a tampered value: the default and a note naming it, never a raise
    assert bad.inputs.recv_interval == 1 and any(n.key == "recv_interval (rcv)" and "must be >= 1 and <= 1,000" in n.why for n in bad.notes)


@pytest.mark.parametrize(("value", "why"), [("0", "must be a positive integer"), ("1001", "recv_interval=1001: Input should be less than or equal to 1000"), ("ten", "is not an integer")])
def test_plan_cli_refuses_a_bad_receive_interval_in_one_line(value, why):
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--preset", "llama-3.1-8b", "--runtime", "sglang", "--recv-interval", value], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and why in out.stderr, out.stderr


def test_plan_cli_takes_the_derived_sglang_flags():
    out = subprocess.run([sys.executable, "-m", "planner", "plan", "--preset", "llama-3.1-8b", "--runtime", "sglang", "--mem-fraction-static", "0.8", "--page-size", "16", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kv_cache"]["sglang"]["capacity"]["max_total_num_tokens"] == 392224


def test_plan_page_shows_the_sglang_card():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update({"v": "3", "m": "preset", "n": "llama-3.1-8b", "rt": "sglang"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    assert "SGLang start-up preview" in text
    codes = [c.value for c in at.code]
    assert any(f"max_total_num_tokens={LLAMA_TOKENS}" in c for c in codes)
    assert any(c.startswith("python -m sglang.launch_server") for c in codes)
    assert any(f"{LLAMA_REQUESTS} requests a replica" in c.value for c in at.caption)
    assert [n.value for n in at.number_input if n.key == "recv_interval"] == [1]  # SGLang's scheduler flag, shown for SGLang only


def test_plan_page_refusal_is_one_line():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update({"v": "3", "m": "preset", "n": "llama-3.1-8b", "rt": "sglang"})
    at.run()
    box = next(s for s in at.selectbox if s.key == "kv_dtype")
    box.set_value(next(o for o in box.options if o.startswith("int8"))).run()
    assert not at.exception
    assert any(e.value == "SGLang has no int8 KV cache; choose auto, fp8, bf16" for e in at.error)


def test_formulas_derive_the_pool_as_sglang_does(llama):
    # 54,363,121,975 B / 131,072 B = 414,757.2 -> 414,757 tokens; 414,757 // 2,560 = 162
    from planner import explain

    lines = next(g.lines for g in explain.formula_steps(compute_plan(make_inputs(runtime="sglang"), llama)) if g.title == "Memory per GPU")
    assert lines[0] == "free before the weights = 79.6475 (card memory) - 1.1000 (CUDA context) = 78.5475 GiB"
    assert "x (1 - mem_fraction_static 0.835)" in lines[2] and lines[2].endswith("= 54,363,121,975 B (SGLang 0.5.23 _profile_available_bytes)")
    assert lines[3] == f"token pool = floor(54,363,121,975 / 131,072 B a token) = {LLAMA_TOKENS:,} tokens"
    assert lines[4].startswith(f"max sequences = min(max_running_requests 2,048, {LLAMA_TOKENS:,} // 2,560) = {LLAMA_REQUESTS}")


def test_size_page_searches_both_engines():
    # 324 users on H100 bf16 at TP 1: SGLang holds 162 a replica (hand arithmetic above) -> 2 replicas
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.query_params.update({"v": "3", "m": "preset", "n": "llama-3.1-8b"})
    at.run()
    at.query_params.update({"size_users": "324", "size_itl": "0", "size_ttft": "0", "size_gpus": "H100-SXM-80GB", "size_kv": "bf16", "size_eng": "vllm,sglang"})
    at.switch_page("pages/size.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert next(m for m in at.multiselect if m.key == "size_engines").value == ["vllm", "sglang"]
    rows = at.dataframe[0].value
    sg = rows[rows["engine"] == "sglang"]
    assert list(sg["max_num_seqs"])[:1] == [LLAMA_REQUESTS] and set(rows["engine"]) == {"vllm", "sglang"}
