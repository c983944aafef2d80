"""A plan on disaggregated pools: the ``disagg`` plan input (``plan --disagg``, the Plan page's
text box, the share link's ``pools`` key, the plan file), read by one parser (planner.pools).

The figures are :func:`planner.disagg.plan_disagg`'s, whose arithmetic tests/test_disagg.py checks
by hand; here every surface must show the same ones as the Size page and ``size --disagg`` for the
same deployment.
"""

from __future__ import annotations

import json

import pytest

from planner import disagg, pools
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.share import decode_query, encode_query, load_plan_file, plan_file_json
from planner.sizing import size
from planner.source import preset_ref
from tests.test_disagg import BASE, QWEN3_32B


@pytest.fixture(scope="module")
def qwen():
    return prepare_model(QWEN3_32B)


def run_cli(capsys, *argv):
    from planner.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------- one parser


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2P:4", "write the pools as xP:TP[@GPU],yD:TP[@GPU]"),
        ("2P:4@H100-SXM-80GB;1D:8", "write the pools as"),
        ("0P:1,1D:1", "the prefill pool needs 1 to 1,024 replicas, not 0"),
        ("1P:1,1D:65", "the decode pool's tensor parallelism must be 1 to 64, not 65"),
        ("1P:1@NOPE-80GB,1D:1", "the prefill pool's GPU 'NOPE-80GB': unknown GPU"),
        ("1P:1," + "x" * 200, "write the pools as"),
    ],
)
def test_the_plan_input_refuses_bad_pools_in_one_line_naming_field_value_and_form(text, why):
    with pytest.raises(PlannerError) as exc:
        make_inputs(disagg=text)
    msg = str(exc.value)
    assert exc.value.field == "disagg" and why in msg and "\n" not in msg and len(msg) < 600
    with pytest.raises(PlannerError) as same:  # the parser every consumer uses says the same
        pools.parse_pools(text, "H100-SXM-80GB")
    assert same.value.reason == exc.value.reason


def test_a_pool_without_gpu_runs_on_the_plans_and_a_custom_device_needs_one():
    p, d = pools.parse_pools(make_inputs(disagg="2P:4,1D:8@h200-141gb", gpu="B200-180GB").disagg, "B200-180GB")
    assert (p.gpu, p.tp, p.replicas, d.gpu, d.tp, d.replicas) == ("B200-180GB", 4, 2, "H200-141GB", 8, 1)
    with pytest.raises(PlannerError) as exc:
        pools.parse_pools("1P:1,1D:1@H200-141GB", "custom")
    assert exc.value.field == "disagg" and "names no GPU" in exc.value.reason


def test_the_plans_own_figures_do_not_move_with_pools(qwen):
    values = {**BASE, "gpu": "H200-141GB", "kv_dtype": "fp8", "sequences": 64}
    plain = compute_plan(make_inputs(**values), qwen).summary()
    with_pools = compute_plan(make_inputs(**values, disagg="1P:1,1D:2"), qwen).summary()
    assert with_pools.pop("inputs").pop("disagg") == "1P:1,1D:2"
    plain.pop("inputs")
    assert json.dumps(with_pools, sort_keys=True, default=str) == json.dumps(plain, sort_keys=True, default=str)
    assert disagg.plan_of(compute_plan(make_inputs(**values), qwen), qwen) is None


# --------------------------------------------------------------------------- the same figures as size --disagg


@pytest.fixture(scope="module")
def sized(qwen):
    # tests/test_disagg.py's case where the split pays: 256 users, 4,000-token prompts, ITL 50 ms, TTFT 2 s
    result = size(qwen, dict(BASE), users=256, itl_p95_ms=50, ttft_p95_ms=2000, gpus=["H200-141GB", "B200-180GB"], kv_dtypes=("fp8",), disagg=True)
    return next(r for r in result.recommendations if r.disaggregated)


def test_plan_disagg_shows_the_size_recommendations_figures(qwen, sized):
    # the plan a user writes for that deployment: the recommendation's inputs (its 64-token blocks), its users and the SLOs;
    # no price given, so each pool at its catalog price as the sizer priced them
    values = {k: v for k, v in sized.plan_values.items() if k not in ("max_num_seqs", "gpu_hour_price", "gpu_count", "tp")}
    assert values["sequences"] == 256 and values["disagg"] == sized.disagg and values["block_tokens"] == 64
    inputs = make_inputs(**values, itl_slo_ms=50, ttft_slo_ms=2000)
    d = disagg.plan_of(compute_plan(inputs, qwen), qwen)
    assert d.spec == sized.disagg
    assert d.ttft_p95_ms == pytest.approx(sized.ttft_p95_ms, rel=1e-9) and d.tpot_ms == pytest.approx(sized.itl_p95_ms, rel=1e-9)
    assert d.kv_transfer_ms == pytest.approx(sized.kv_transfer_ms, rel=1e-12) and d.gpus == sized.gpu_count
    assert d.cost_per_hour == pytest.approx(sized.cost_per_hour, rel=1e-4)
    assert d.meets_slo is True and (d.ttft_slo_ms, d.itl_slo_ms) == (2000, 50)
    slo = [r["SLO"] for r in disagg.pool_rows(d)]
    assert slo[0] == f"meets TTFT 2,000 ms (p95 {d.ttft_p95_ms:,.0f})" and slo[1] == f"meets ITL 50 ms (p95 {d.itl_p95_ms:,.1f})"


def test_pool_slo_column_says_why_when_there_is_no_slo(qwen):
    d = disagg.plan_disagg(qwen, {**BASE, "gpu": "H200-141GB", "kv_dtype": "fp8", "sequences": 32}, "1P:1,1D:1")
    assert d.meets_slo is None
    assert [r["SLO"] for r in disagg.pool_rows(d)] == [f"— no TTFT SLO (TTFT p95 {d.ttft_p95_ms:,.0f} ms)", f"— no ITL SLO (ITL {d.itl_p95_ms:,.1f} ms)"]
    tight = disagg.plan_disagg(qwen, {**BASE, "gpu": "H200-141GB", "kv_dtype": "fp8", "sequences": 32, "itl_slo_ms": 1, "ttft_slo_ms": 5}, "1P:1,1D:1")
    assert tight.meets_slo is False and [r["SLO"].split(" ")[0] for r in disagg.pool_rows(tight)] == ["misses", "misses"]


def test_cli_plan_disagg_text_and_json(capsys, sized):
    argv = ["plan", "--preset", "qwen3-32b", "--input-tokens", "4000", "--output-tokens", "1000", "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--gpu", "H200-141GB", "--sequences", "64", "--itl-slo-ms", "50", "--disagg", "1P:1,1D:1@B200-180GB"]
    rc, out, err = run_cli(capsys, *argv, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    d = doc["disagg"]
    assert doc["inputs"]["disagg"] == "1P:1,1D:1@B200-180GB" and d["spec"] == "1P:1@H200-141GB,1D:1@B200-180GB"
    assert {"prefill", "decode", "kv_transfer", "kv_transfer_ms", "ttft_p95_ms", "tpot_ms", "balanced_prefill_per_decode", "verdict", "meets_slo"} <= set(d)
    assert d["prefill"]["gpu"] == "H200-141GB" and d["decode"]["gpu"] == "B200-180GB" and d["kv_transfer"]["link"] == "scale-out NIC"
    assert d["ttft_terms_ms"]["kv_transfer"] == pytest.approx(d["kv_transfer_ms"])
    rc, text, _ = run_cli(capsys, *argv)
    assert rc == 0
    tail = text.split("disaggregated pools ", 1)[1]
    assert tail.startswith(f"1P:1@H200-141GB,1D:1@B200-180GB: 2 GPUs, {d['requests_per_s']:,.4g} requests/s (64 concurrent requests)")
    # a plan with a request rate: the pools are timed at it, the line does not name the clients (it said "64 concurrent requests, 2 requests/s")
    rc, text, _ = run_cli(capsys, *argv, "--request-rate", "2")
    assert rc == 0 and "disaggregated pools 1P:1@H200-141GB,1D:1@B200-180GB: 2 GPUs, 2 requests/s\n" in text
    assert f"KV transfer {d['kv_transfer_ms']:,.1f} ms" in tail and f"TPOT {d['tpot_ms']:,.2f} ms" in tail and "meets ITL 50 ms" in tail
    assert "Balanced pools:" in tail and ("does not pay" in tail or "pays" in tail or "do not admit" in tail)


@pytest.mark.parametrize("command", ["plan", "report", "launch"])
def test_cli_bad_pools_is_one_line(capsys, command, tmp_path):
    extra = ["--out", str(tmp_path / "x.pdf")] if command == "report" else []
    rc, out, err = run_cli(capsys, command, "--preset", "llama-3.1-8b", "--disagg", "2P:4@H100,1D", *extra)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "disagg='2P:4@H100,1D'" in err and "xP:TP[@GPU],yD:TP[@GPU]" in err


def test_bench_import_reads_the_plans_pools(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    ref, _model = preset_ref("llama-3.1-8b")
    plan.write_text(plan_file_json(ref, make_inputs(input_tokens=512, output_tokens=64, sequences=8, disagg="1P:1,1D:1")))
    rc, out, err = run_cli(capsys, "bench-import", "tests/data/bench/vllm_bench_c8.json", "--plan", str(plan), "--json")
    assert rc == 0, err
    assert "over the disaggregated pools" in json.loads(out)["load"]


# --------------------------------------------------------------------------- the share link and the plan file


def test_share_link_and_plan_file_carry_the_pools():
    ref, _model = preset_ref("llama-3.1-8b")
    inputs = make_inputs(disagg="2P:4@H100-SXM-80GB,1D:8@H200-141GB", sequences=64)
    q = encode_query(ref, inputs)
    assert q["pools"] == "2P:4@H100-SXM-80GB,1D:8@H200-141GB"
    assert decode_query(q).inputs == inputs
    assert load_plan_file(plan_file_json(ref, inputs)).inputs.disagg == inputs.disagg
    assert "pools" not in encode_query(ref, make_inputs(sequences=64))  # a plan without pools: its link as before


def test_a_bad_pools_key_is_dropped_with_a_warning_and_the_rest_opens():
    ref, _model = preset_ref("llama-3.1-8b")
    q = encode_query(ref, make_inputs(sequences=64)) | {"pools": "3P:1,0D:1"}
    state = decode_query(q)
    assert state.inputs.sequences == 64 and state.inputs.disagg is None
    assert any("pools" in w and "the decode pool needs 1 to 1,024 replicas" in w for w in state.warnings), state.warnings


# --------------------------------------------------------------------------- the Plan page


def test_plan_page_shows_the_pools_of_a_link():
    from streamlit.testing.v1 import AppTest

    from tests.test_size_page import APP

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"m": "preset", "n": "llama-3.1-8b", "seq": "64", "itl": "30", "pools": "2P:1,1D:2@H200-141GB"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_input(key="disagg").value == "2P:1,1D:2@H200-141GB"  # the text box under Hardware, from the link
    table = next(df.value for df in at.dataframe if "pool" in df.value.columns)
    assert list(table["pool"]) == ["prefill", "decode"] and list(table["GPU"]) == ["H100-SXM-80GB", "H200-141GB"] and list(table["replicas"]) == [2, 1]
    assert table["SLO"].iloc[0].startswith("— no TTFT SLO") and table["SLO"].iloc[1].startswith(("meets ITL 30 ms", "misses ITL 30 ms"))
    assert any(c.value.startswith("KV transfer per request:") for c in at.caption)
    shown = next(df for df in at.dataframe if "pool" in df.value.columns)  # prices as prices, as on the Size page ($9.90, not 9.9)
    assert json.loads(shown.proto.columns)["$/h"]["type_config"]["format"] == "$%.2f"
    assert at.query_params["pools"] in ("2P:1,1D:2@H200-141GB", ["2P:1,1D:2@H200-141GB"])  # the share link keeps them
    at.text_input(key="disagg").set_value("2P:1,1D").run()  # a bad text: one line under the box, the plan still shows
    assert not at.exception and any("Disaggregated pools" in e.value and "write the pools as xP:TP" in e.value for e in at.error), [e.value for e in at.error]


def test_report_pdf_has_the_plans_pools(capsys, tmp_path):
    import subprocess

    pdf = tmp_path / "pools.pdf"
    rc, _out, err = run_cli(capsys, "report", "--preset", "llama-3.1-8b", "--sequences", "64", "--itl-slo-ms", "30", "--disagg", "2P:1,1D:2@H200-141GB", "--out", str(pdf))
    assert rc == 0, err
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Disaggregated prefill / decode: 2P:1@H100-SXM-80GB,1D:2@H200-141GB" in text and "The same workload, " in text and " requests/s (64 concurrent requests), on 4 GPUs" in text
    assert "KV transfer per request:" in text and "meets ITL 30 ms" in text
