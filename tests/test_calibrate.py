"""A kept benchmark calibration applied to the plan, labelled, only for the deployment it measured.

The run is tests/data/bench/vllm_bench_c8.json (vLLM 0.33.0 ``vllm bench serve``, 8 clients,
512 / 64 tokens, against the generator's fake server); the plan is the one that predicted it.
Expected values are the file's own measured means over the plan's own predictions.
"""

from __future__ import annotations

import json

import pytest

from planner.bench_calibration import calibration_load, parse_calibration
from planner.benchimport import compare, read_result
from planner.benchimport.calibrate import calibrate
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs
from tests.test_benchimport import PLAN, llama, raw  # noqa: F401 - the module's fixture


@pytest.fixture(scope="module")
def kept(llama):  # noqa: F811
    return compare(read_result(raw("vllm_bench_c8.json")), make_inputs(**PLAN), llama).calibration


def test_the_calibration_records_the_runs_load(kept):
    assert kept.endswith(";at=c8") and calibration_load(kept) == (8, None)  # --max-concurrency 8
    assert list(parse_calibration(kept)[1]) == ["ttft_ms", "tpot_ms", "output_tokens_per_s"]
    assert calibration_load("src=guidellm;ttft_ms=51.38/31.48;at=r4") == (None, 4.0)
    for bad in ("src=vllm-bench;ttft_ms=1/2;at=c0", "src=vllm-bench;ttft_ms=1/2;at=c2.5", "src=vllm-bench;ttft_ms=1/2;at=rnan"):
        with pytest.raises(PlannerError) as exc:
            make_inputs(bench_calibration=bad)
        assert "at=c<clients>" in str(exc.value) and "\n" not in str(exc.value)


def test_applied_to_the_deployment_it_measured_labelled(llama, kept):  # noqa: F811
    doc = json.loads(raw("vllm_bench_c8.json"))
    plan = compute_plan(make_inputs(**PLAN, bench_calibration=kept), llama)
    cal = calibrate(plan, llama)
    _src, figures = parse_calibration(kept)
    assert cal.applied and cal.ratios["tpot_ms"] == pytest.approx(figures["tpot_ms"][0] / figures["tpot_ms"][1])
    assert figures["tpot_ms"][0] == float(f"{doc['mean_tpot_ms']:.4g}")  # the run's own mean TPOT
    assert cal.label == (
        "calibrated by a measured run (vllm-bench, 8 concurrent clients): "
        f"×{cal.ratios['ttft_ms']:.2f} TTFT, ×{cal.ratios['tpot_ms']:.2f} TPOT, ×{cal.ratios['output_tokens_per_s']:.2f} output tok/s"
    )
    model_tpot, calibrated_tpot = cal.figures["tpot_ms"]
    assert model_tpot == plan.latency.mean_inter_token_latency_ms and calibrated_tpot == pytest.approx(model_tpot * cal.ratios["tpot_ms"])
    # the plan's own figures do not move: the calibrated ones are shown beside them
    assert compute_plan(make_inputs(**PLAN), llama).latency == plan.latency
    # at another load of the same deployment the ratios scale the plan's figures there
    busier = compute_plan(make_inputs(**{**PLAN, "sequences": 32}, bench_calibration=kept), llama)
    again = calibrate(busier, llama)
    assert again.applied and again.ratios == cal.ratios and again.figures["ttft_ms"][0] == busier.latency.time_to_first_token_ms


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"gpu": "H200-141GB"}, "measured on another deployment: the run's TTFT mean (ms) was predicted"),
        ({"output_tokens": 256}, "measured on another deployment"),
        ({"disagg": "1P:1,1D:1"}, "disaggregated pools"),
    ],
)
def test_not_applied_elsewhere_and_says_why(llama, kept, change, why):  # noqa: F811
    cal = calibrate(compute_plan(make_inputs(**{**PLAN, **change}, bench_calibration=kept), llama), llama)
    assert not cal.applied and why in cal.reason and cal.label.startswith("kept from a vllm-bench run, not applied: ")


def test_an_old_calibration_without_its_load_is_shown_not_applied(llama, kept):  # noqa: F811
    old = kept.removesuffix(";at=c8")
    cal = calibrate(compute_plan(make_inputs(**PLAN, bench_calibration=old), llama), llama)
    assert not cal.applied and "does not say the run's load" in cal.reason
    assert calibrate(compute_plan(make_inputs(**PLAN), llama), llama) is None


def test_cli_plan_prints_the_calibrated_figures(capsys, kept):
    from planner.cli import main

    argv = ["plan", "--preset", "llama-3.1-8b", "--input-tokens", "512", "--output-tokens", "64", "--sequences", "8", "--bench-calibration", kept]
    assert main(argv) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("calibration  "))
    assert line.startswith("calibration  calibrated by a measured run (vllm-bench, 8 concurrent clients): ×") and "TPOT" in line
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["calibrated"]["applied"] is True and set(doc["calibrated"]["figures"]) == {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
    assert main([*argv[:-2], "--gpu", "H200-141GB", "--bench-calibration", kept]) == 0
    assert "not applied: it was measured on another deployment" in capsys.readouterr().out


def test_plan_page_shows_the_calibrated_figures_beside_the_models(kept):
    from streamlit.testing.v1 import AppTest

    from tests.test_size_page import APP

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"m": "preset", "n": "llama-3.1-8b", "in": "512", "out": "64", "seq": "8", "cal": kept})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(m.value.startswith("**Calibrated by a measured run (vllm-bench, 8 concurrent clients): ×") for m in at.markdown)
    labels = {m.label: m for m in at.metric}
    assert {"TTFT, calibrated", "TPOT, calibrated", "output tok/s, calibrated"} <= set(labels)
    assert labels["TPOT, calibrated"].delta.startswith("model ")  # the model's figure beside it, never replaced
    at2 = AppTest.from_file(APP, default_timeout=120)  # another deployment: shown, not applied, with the reason
    at2.query_params.update({"m": "preset", "n": "llama-3.1-8b", "in": "512", "out": "64", "seq": "8", "gpu": "H200-141GB", "cal": kept})
    at2.run()
    assert any("not applied: it was measured on another deployment" in i.value for i in at2.info)


def test_report_pdf_states_the_calibration_applied(capsys, tmp_path, kept):
    import subprocess

    from planner.cli import main

    pdf = tmp_path / "cal.pdf"
    assert main(["report", "--preset", "llama-3.1-8b", "--input-tokens", "512", "--output-tokens", "64", "--sequences", "8", "--bench-calibration", kept, "--out", str(pdf)]) == 0
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout.split())
    assert "Calibrated by a measured run (vllm-bench, 8 concurrent clients): ×" in text and "The figures above stay the model's." in text


def test_output_rate_scales_the_deployments_own(llama, kept):  # noqa: F811
    # the run measured the whole deployment's output tokens/s (1,370 at 8 clients): its ratio scales the
    # plan's deployment rate (per GPU x GPUs), which at the run's own load is the kept prediction
    plan = compute_plan(make_inputs(**PLAN, bench_calibration=kept), llama)
    model_rate, calibrated = calibrate(plan, llama).figures["output_tokens_per_s"]
    _src, figures = parse_calibration(kept)
    assert model_rate == pytest.approx(figures["output_tokens_per_s"][1], rel=1e-3)  # 882.6
    assert calibrated == pytest.approx(figures["output_tokens_per_s"][0], rel=1e-3)  # 1,370: the run's own
