"""planner.compare: columns in links (bad fields fall back with a warning), verdicts per row,
and the comparison PDF read back with pdftotext."""

from __future__ import annotations

import subprocess

from planner.compare import CURRENT, Column, compare_rows, decode_columns, default_columns, encode_columns
from planner.plan import PlanInputs, compute_plan, make_inputs
from planner.report import build_comparison_pdf
from planner.source import preset_ref

BASE = PlanInputs().model_dump()


def test_columns_round_trip_through_a_link():
    cols = [Column(CURRENT, "H100-SXM-80GB", 1, 1, "bf16", "vllm"), Column("qwen3-8b", "H200-141GB", 4, 2, "fp8", "transformers")]
    params = encode_columns(cols)
    assert params == {"cmp": "2", "ca": "plan~H100-SXM-80GB~1~1~bf16~vllm", "cb": "qwen3-8b~H200-141GB~4~2~fp8~transformers"}
    assert decode_columns(params, BASE) == (cols, [])
    assert decode_columns({"n": "llama-3.1-8b"}, BASE) is None  # a plain plan link holds no comparison


def test_bad_fields_fall_back_field_by_field():
    cols, warnings = decode_columns({"cmp": "9", "ca": "plan~H100-SXM-80GB~0~1~fp7~vllm", "cb": "too~few"}, BASE)
    assert len(cols) == 2
    assert cols[0] == Column(CURRENT, "H100-SXM-80GB", 1, 1, "auto", "vllm")  # 0 GPUs and fp7: the defaults (KV dtype auto)
    assert cols[1] == default_columns(BASE)[1]
    text = " ".join(warnings)
    assert "cmp" in text and "'0'" in text and "'fp7'" in text and "plan B (cb)" in text


def _plans():
    _ref, model = preset_ref("llama-3.1-8b")
    a = compute_plan(make_inputs(gpu_hour_price=2.0), model)
    b = compute_plan(make_inputs(kv_dtype="fp8", gpu_hour_price=2.0), model)
    return a, b


def test_rows_name_the_better_plan():
    a, b = _plans()
    rows = {r.label: r for r in compare_rows([("Plan A", a, "llama"), ("Plan B", b, "llama")])}
    names = ["Plan A", "Plan B"]
    # fp8 halves 128 KiB to 64 KiB per token: B holds more sequences on the same GPU
    assert rows["KV bytes / token"].cells == ("128 KiB", "64 KiB") and rows["KV bytes / token"].verdict(names) == "B: smaller cache"
    assert b.kv_cache.admissible_sequences > a.kv_cache.admissible_sequences
    assert rows["Max sequences"].verdict(names) == "B: more sequences"
    assert rows["Cost per hour"].verdict(names) == "same"  # one GPU at $2 each
    assert rows["Cost per hour"].cells == ("$2.00", "$2.00")
    assert rows["GPU"].verdict(names) == ""
    faster = "A" if a.latency.mean_inter_token_latency_ms < b.latency.mean_inter_token_latency_ms * 0.995 else "B"
    assert rows["ITL"].verdict(names) in (f"{faster}: lower latency", "same")


def test_comparison_pdf_holds_both_plans_and_verdicts(tmp_path):
    a, b = _plans()
    ref, _ = preset_ref("llama-3.1-8b")
    path = tmp_path / "cmp.pdf"
    path.write_bytes(build_comparison_pdf([("Plan A", a, ref), ("Plan B", b, ref)], "http://localhost:8501/compare?cmp=2"))
    text = " ".join(subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout.split())
    assert "KV capacity comparison" in text and "Plan A: preset llama-3.1-8b" in text and "Plan B: preset llama-3.1-8b" in text
    assert "B: more sequences" in text and "B: smaller cache" in text
    assert "Cost $2.00 per hour" in text
    assert "compare?cmp=2" in text


# --------------------------------------------------------------------------- issue 27 item 3: columns start from A and say what differs


def test_default_columns_start_from_plan_a():
    cols = default_columns({**BASE, "kv_dtype": "bf16", "gpu": "H200-141GB", "tp": 2, "gpu_count": 4})
    assert all(c == cols[0] for c in cols) and cols[1].kv_dtype == "bf16" and cols[1].gpu == "H200-141GB"


def test_first_row_names_what_each_column_changes():
    from planner.compare import DIFFERS, differences

    _ref, model = preset_ref("llama-3.1-8b")
    a = compute_plan(make_inputs(gpu="H200-141GB"), model)
    b = compute_plan(make_inputs(gpu="B200-180GB", kv_dtype="fp8"), model)
    rows = compare_rows([("A", a, "llama"), ("B", b, "llama"), ("C", a, "llama"), ("D", None, "qwen")])
    assert rows[0].label == DIFFERS
    assert rows[0].cells == ("(reference)", "GPU B200-180GB, KV dtype fp8", "same settings as A", "–")
    assert differences([("A", a, "llama"), ("B", a, "qwen3-8b")]) == ("(reference)", "model qwen3-8b")


def test_compare_shows_the_plan_pages_throughput_per_gpu():
    """The Plan page's serving card says 847 tok/s per GPU for llama-3.1-8b at 8 clients; Compare
    showed only "Decode tokens/s 856" (the deployment's sequences / ITL, the cost basis), a second
    throughput with no per-GPU figure beside it. Now both, the per-GPU one ranked."""
    from planner.compare import compare_rows
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    m = prepare_model(load_preset("llama-3.1-8b"))
    one, four = compute_plan(make_inputs(), m), compute_plan(make_inputs(gpu_count=4, tp=4), m)
    rows = {r.label: r for r in compare_rows([("A", one, "llama"), ("B", four, "llama")])}
    assert rows["Throughput per GPU"].cells[0] == f"{one.roofline.output_tokens_per_second_per_gpu:,.0f} tok/s"
    assert 840 <= one.roofline.output_tokens_per_second_per_gpu <= 850  # 846.6: the CLI's "throughput" line
    assert rows["Throughput per GPU"].best == (0,)  # one GPU at 8 clients does more per GPU than four
    assert rows["Decode tokens/s"].best == (1,)  # while the four-GPU deployment decodes faster in all
