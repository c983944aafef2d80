"""The planner's MoE term against the engines' measured MoE kernels (benchmarks/moe_kernel_rows.py) and
candidate K's record (docs/moe_kernel_plan.md, docs/moe_kernel.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchmarks import bench_moe_kernels as B
from benchmarks import moe_kernel_rows as R
from planner import latency

ROOT = Path(__file__).resolve().parent.parent


def _row(**key) -> dict:
    (row,) = [r for r in R.rows() if all(r[k] == v for k, v in key.items())]
    return row


def test_rows_hold_aiconfigurators_measured_kernels():
    # aiconfigurator-core 0.12.0, systems/data/h200_sxm/moe/sglang/0.5.14/moe_perf.parquet: Kimi-K2's experts
    # (7168 x 2048, top 8 of 384) as int4_wo under sglang_marlin_moe, moe_tp_size 8, balanced, 4,096 tokens: 2.511 ms
    row = _row(gpu="H200-141GB", engine="sglang", weight_dtype="int4", preset="kimi-k2", tp=8, tokens=4096)
    assert row["measured_s"] == pytest.approx(2.51078e-3) and row["kernel"] == "sglang_marlin_moe"
    assert len(R.rows()) == 8586 and {r["engine"] for r in R.rows()} == {"vllm", "sglang", "trtllm"}


def test_planner_figure_is_the_moe_term_per_layer_without_the_serving_extra():
    row = _row(gpu="H200-141GB", engine="sglang", weight_dtype="int4", preset="kimi-k2", tp=8, tokens=4096)
    roof = R.roofline("kimi-k2", "H200-141GB", 8, "int4", "sglang")
    whole = roof.terms(4096, 4096, 0.0, 0.0, 0)["moe"]
    assert R.planner_s(row) == pytest.approx(whole / roof.moe_layers - roof.eff.serve_moe_layer_s * roof.fixed_scale)
    # the shipped int4 scale (fitted to serving runs) makes this prompt-sized step 2.2x faster than Marlin runs it
    assert R.planner_s(row) / row["measured_s"] == pytest.approx(0.449, abs=0.005)
    # a lower scale is a slower compute term: K's SGLang int4 scale (1.121 < 1.835, fitted over every GPU, TP and
    # prompt size at once) brings this row to 0.732
    assert R.planner_s(row, B.K_SCALES["int4/sglang"]) / row["measured_s"] == pytest.approx(0.732, abs=0.005)


def test_bench_uses_the_engines_own_scale_under_k_and_the_shipped_one_otherwise():
    shipped = {(r["engine"], r["tokens"], r["tp"], r["preset"], r["gpu"], r["weight_dtype"]): x for r, _k, x in B.ratios()}
    k = B.ratios(B.K_SCALES)
    for r, kind, x in k:
        if kind == "bf16":  # no scale: the bf16 fit, the same in both
            assert x == shipped[(r["engine"], r["tokens"], r["tp"], r["preset"], r["gpu"], r["weight_dtype"])]
    row = _row(gpu="B200-180GB", engine="trtllm", weight_dtype="nvfp4", preset="deepseek-v3", tp=8, tokens=8192)
    assert R.kernel_class(row) == "fp4" and latency.moe_kernel("nvfp4", "blackwell", "trtllm")[0] == latency.KERNEL_FIT["fp4"]
    assert R.planner_s(row, B.K_SCALES["fp4/trtllm"]) > R.planner_s(row)  # 0.377 < 0.975: slower


@pytest.mark.skipif(importlib.util.find_spec("scipy") is None, reason="the fit needs scipy (aiconfigurator-core's)")
def test_fit_reproduces_k_and_rule_one_holds():
    spec = importlib.util.spec_from_file_location("fit_moe_kernels", ROOT / "scripts" / "fit_moe_kernels.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    assert fit.fit() == B.K_SCALES
    summary = "\n".join(B.summary(B.ratios(), B.ratios(B.K_SCALES)))
    # docs/moe_kernel.md, rule 1: median |log| on the quantized rows, shipped -> K
    assert "| 1,024 tokens or more | 2025 | 0.3635 | 0.1665 |" in summary and "| 1-512 tokens | 3825 | 0.3013 | 0.1996 |" in summary


def test_generated_doc_is_current():
    assert (ROOT / "docs" / "moe_kernel_fit.md").read_text() == B.doc()
