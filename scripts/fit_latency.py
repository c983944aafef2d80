"""Fit the roofline's shape-dependent efficiencies to AIConfigurator's measured-kernel rows.

    .venv/bin/python scripts/fit_latency.py            # prints the fit, writes docs/latency_fit.md

Data: tests/data/aic_latency_rows.json (scripts/gen_aic_latency_rows.py). Rows used: the "fit"
split of benchmarks/latency_rows.py (five models on H100, B200, A100 and L40S; H200 and two models
held out). Two stages: (1) the shared efficiencies and the NVLink parts' per-device factors on the
H100, B200 and A100 fit rows; (2) with those fixed, L40S's per-device figures (all-reduce link
bandwidth and per-message latency for TP 2, 4 and 8, a compute efficiency and a fused-MoE efficiency) on the L40S fit rows
only. Objective (both stages): least squares on log(planner / AIC) of the ITL and the prefill of every fitted
row, plus, at a third of the weight, the log ratio of each op group (GEMM, attention,
all-reduce, MoE, logits, other) weighted by its share of the row, so each term is pinned by the
kernels it stands for rather than by compensating errors. Needs scipy (a dependency of
aiconfigurator-core); the library does not.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import latency_rows as L  # noqa: E402
from planner import latency  # noqa: E402

# name, start, lower, upper (efficiency fields of latency.Efficiency, plus mfu, mbu, NVLink latency)
PARAMS = [
    ("mfu", 0.75, 0.3, 1.0),
    ("mbu", 0.8, 0.4, 1.0),
    ("gemm_tokens_half", 20.0, 0.0, 2000.0),
    ("gemm_layer_s", 5e-6, 0.0, 1e-4),
    ("moe_mfu", 0.8, 0.1, 1.5),
    ("moe_tile", 16.0, 1.0, 256.0),
    ("moe_tokens_per_expert_half", 100.0, 0.0, 5000.0),
    ("moe_width_half", 100.0, 0.0, 5000.0),
    ("moe_mbu", 1.0, 0.3, 1.5),
    ("moe_layer_s", 25e-6, 0.0, 2e-4),
    ("attn_mbu", 1.0, 0.3, 1.5),
    ("attn_mfu", 0.6, 0.05, 1.5),
    ("attn_tokens_half", 500.0, 0.0, 20000.0),
    ("attn_layer_s", 12e-6, 0.0, 1e-4),
    ("layer_s", 9e-6, 0.0, 1e-4),
    ("elementwise_passes", 10.0, 0.0, 100.0),
    ("link_efficiency", 0.7, 0.2, 1.0),
    ("hopper_link_latency_s", 5e-6, 0.0, 5e-5),  # H100 SXM (H200 shares it: same NVLink 4 fabric, held out)
    ("b200_link_latency_s", 5e-6, 0.0, 5e-5),
    ("a100_link_latency_s", 6e-6, 0.0, 5e-5),
    ("b200_moe_efficiency", 1.0, 0.1, 2.0),
    ("a100_moe_efficiency", 1.0, 0.1, 2.0),
]
DEVICE_PARAMS = {
    "H100-SXM-80GB": ("hopper_link_latency_s", None),
    "H200-141GB": ("hopper_link_latency_s", None),
    "B200-180GB": ("b200_link_latency_s", "b200_moe_efficiency"),
    "A100-SXM-80GB": ("a100_link_latency_s", "a100_moe_efficiency"),
}
# stage 2: L40S (PCIe only; AIC's measured all-reduce depends on the TP size far more than one
# link figure allows: pairs share a PCIe switch, 4 and 8 GPUs cross the host), per TP size
L40S = "L40S-48GB"
L40S_TPS = (2, 4, 8)
L40S_PARAMS = [
    ("l40s_compute_efficiency", 0.7, 0.2, 1.5),
    ("l40s_moe_efficiency", 1.0, 0.1, 3.0),
    *[(f"l40s_link_gb_s_tp{tp}", 20.0 / tp, 0.1, 200.0) for tp in L40S_TPS],
    *[(f"l40s_link_latency_s_tp{tp}", 1e-5, 0.0, 2e-4) for tp in L40S_TPS],
]
GROUP_WEIGHT = 1 / 3
# stage 2 fits L40S's ITL and prefill totals only: AIC's L40S op groups hold small GEMMs timed faster
# than its HBM allows (L2-resident weights, e.g. Qwen3-30B-A3B TP2 decode GEMMs 1.23 ms vs 1.81 ms of
# HBM reads at MBU 0.736), which the groups' terms would push onto the other figures (with them, the
# worst L40S fit row is 1.525x, with totals only 1.473x)
L40S_GROUP_WEIGHT = 0.0


def roof_for(case: L.Case, x: dict) -> latency.Roofline:
    eff = latency.Efficiency(**{k: v for k, v in x.items() if k in latency.Efficiency.__dataclass_fields__})
    if case.row["gpu"] == L40S:
        tp = min([t for t in L40S_TPS if t >= case.row["tp"]] or [L40S_TPS[-1]])
        return L.with_efficiency(
            case.roof, eff, x["mfu"], x["mbu"], x[f"l40s_link_latency_s_tp{tp}"], x["l40s_moe_efficiency"], link_bytes_s=x[f"l40s_link_gb_s_tp{tp}"] * 1e9, compute_scale=x["l40s_compute_efficiency"]
        )
    link, moe = DEVICE_PARAMS[case.row["gpu"]]
    return L.with_efficiency(case.roof, eff, x["mfu"], x["mbu"], x[link], x[moe] if moe else 1.0, compute_scale=1.0)


def residuals(vector: np.ndarray, cases: list[L.Case], params: list[tuple] = PARAMS, fixed: dict | None = None, group_weight: float = GROUP_WEIGHT) -> np.ndarray:
    x = {**(fixed or {}), **dict(zip([p[0] for p in params], vector, strict=True))}
    out = []
    for case in cases:
        roof = roof_for(case, x)
        r = case.row
        for terms, total, aic_groups, steps in (
            (L.decode_terms(case, roof), r["itl_ms"], r["decode_ops_ms_total"], r["osl"] - 1),
            (L.prefill_terms(case, roof), r["prefill_ms"], r["prefill_ops_ms"], 1),
        ):
            groups = L.grouped(terms)
            out.append(math.log(sum(groups.values()) / total))
            for name, aic_total in aic_groups.items():
                aic = aic_total / steps
                if aic <= 0 or name not in groups:
                    continue
                share = aic / total
                if group_weight:
                    out.append(group_weight * math.sqrt(share) * math.log(max(groups[name], 1e-9) / aic))
    return np.array(out)


def summary(cases: list[L.Case], x: dict) -> dict[str, tuple[float, float, float, float, int]]:
    """Per split: (ITL median, ITL worst, prefill median, prefill worst, rows); worst = farthest from 1 either way."""
    out = {}
    for name in ("fit", "held-out GPU", "held-out model"):
        rs = [L.ratios(c, roof_for(c, x)) for c in cases if L.split(c.row) == name]
        itl, pre = [a for a, _ in rs], [b for _, b in rs]
        worst = lambda v: max(v, key=lambda q: max(q, 1 / q))  # noqa: E731
        out[name] = (statistics.median(itl), worst(itl), statistics.median(pre), worst(pre), len(rs))
    return out


def _least_squares(params: list[tuple], cases: list[L.Case], fixed: dict | None = None, group_weight: float = GROUP_WEIGHT):
    start = np.array([p[1] for p in params])
    return least_squares(
        residuals,
        start,
        bounds=([p[2] for p in params], [p[3] for p in params]),
        args=(cases, params, fixed, group_weight),
        x_scale=np.maximum(np.abs(start), 1e-6),
        max_nfev=3000,
        ftol=1e-12,
        xtol=1e-12,
        gtol=1e-12,
    )


def main() -> None:
    cases = L.cases()
    fit = [c for c in cases if L.split(c.row) == "fit"]
    result = _least_squares(PARAMS, [c for c in fit if c.row["gpu"] != L40S])
    x = dict(zip([p[0] for p in PARAMS], result.x, strict=True))
    result2 = _least_squares(L40S_PARAMS, [c for c in fit if c.row["gpu"] == L40S], x, L40S_GROUP_WEIGHT)
    x.update(zip([p[0] for p in L40S_PARAMS], result2.x, strict=True))
    print("fitted:", {k: float(f"{v:.4g}") for k, v in x.items()}, f"cost {result.cost:.4g} + {result2.cost:.4g}, {result.nfev} + {result2.nfev} evaluations")
    table = summary(cases, x)
    for name, (im, iw, pm, pw, n) in table.items():
        print(f"{name:15s} rows {n:3d}  ITL median {im:.3f} worst {iw:.3f}  prefill median {pm:.3f} worst {pw:.3f}")
    write_doc(cases, x, table, (result, result2))


def write_doc(cases: list[L.Case], x: dict, table: dict, results) -> None:
    lines = [
        "# Roofline efficiency fit (generated by scripts/fit_latency.py; do not edit)",
        "",
        f"Data: `tests/data/aic_latency_rows.json`, {len(cases)} rows from {L.load()['source']}.",
        "Each row is one model, GPU, tensor-parallel size, ISL/OSL (2048/512, 8192/1024) and batch (1, 8, 32, 64);",
        "targets are AIConfigurator's TPOT at that batch and its static-batch TTFT, plus its per-op-group times.",
        "",
        "Split (benchmarks/latency_rows.py): **fit** = Llama-3.1-8B (TP1, 2), Llama-3.1-70B (TP4, 8), Qwen3-8B (TP1, 2),",
        "Qwen3-30B-A3B (TP1, 2), Mixtral-8x7B (TP2, 4) on H100 SXM, B200, A100 SXM and L40S; **held-out GPU** = all of those on",
        "H200; **held-out model** = Qwen3-32B (TP2, 4) and Qwen3-235B-A22B (TP8) on every GPU, L40S included (rows whose weights do not fit the GPU are left out).",
        "",
        "Objective: least squares of log(planner / AIC) for ITL and prefill of every fitted row, plus a third of the weight",
        "on each op group's log ratio scaled by the square root of its share of the row.",
        "Stage 1: the shared efficiencies and the NVLink parts' per-device factors on the H100, B200 and A100 fit rows.",
        "Stage 2: with those fixed, L40S's per-device figures on the L40S fit rows only, ITL and prefill totals only (no op-group",
        "terms: AIC's L40S groups time small GEMMs faster than its HBM allows, e.g. Qwen3-30B-A3B TP2 decode GEMMs 1.23 ms vs",
        "1.81 ms of HBM reads at MBU 0.736, L2-resident weights; with the group terms the worst L40S fit row is 1.525x).",
        "L40S is PCIe only and AIConfigurator's measured all-reduce there depends on the TP size far more than one link figure",
        "allows (the ring formula's bus bandwidth is ~19 GB/s at TP2, ~3.7 at TP4, ~1.9 at TP8: pairs share a PCIe switch, larger",
        "groups cross the host), so bandwidth and per-message latency are fitted per TP size 2, 4, 8; a TP uses the smallest fitted",
        "size at least as large. A latency at its lower bound 0 means the bandwidth term alone accounts for the rows. The L40S link GB/s are the",
        f"figures the ring formula multiplies by link_efficiency {x['link_efficiency']:.3g}: effective bus bandwidth = value x {x['link_efficiency']:.3g}.",
        f"Optimizer: scipy least_squares (trust region), {results[0].nfev} + {results[1].nfev} evaluations, final cost {results[0].cost:.4g} + {results[1].cost:.4g}.",
        "",
        "## Fitted values",
        "",
        "| parameter | value | where it lives |",
        "|---|---|---|",
    ]
    for name, value in x.items():
        where = (
            "PlanInputs mfu / mbu defaults (latency.DEFAULT_MFU / DEFAULT_MBU)"
            if name in ("mfu", "mbu")
            else (
                "latency.FITTED"
                if name in latency.Efficiency.__dataclass_fields__
                else ("hardware.CATALOG L40S (allreduce_by_tp / compute_efficiency / moe_efficiency)" if name.startswith("l40s") else "hardware.CATALOG (link_latency_us / moe_efficiency)")
            )
        )
        lines.append(f"| {name} | {value if abs(value) > 1e-12 else 0.0:.4g} | {where} |")
    lines += ["", "## Planner / AIC ratio by split (worst = farthest from 1)", "", "| split | rows | ITL median | ITL worst | prefill median | prefill worst |", "|---|---|---|---|---|---|"]
    for name, (im, iw, pm, pw, n) in table.items():
        lines.append(f"| {name} | {n} | {im:.3f} | {iw:.3f} | {pm:.3f} | {pw:.3f} |")
    lines += ["", "## Residuals by model and GPU (median planner / AIC over ISL/OSL and batch)", "", "| model | GPU | TP | split | ITL | prefill |", "|---|---|---|---|---|---|"]
    groups: dict[tuple, list] = {}
    for c in cases:
        r = c.row
        groups.setdefault((r["model"], r["gpu"], r["tp"], L.split(r)), []).append(L.ratios(c, roof_for(c, x)))
    for (model, gpu, tp, sp), rs in sorted(groups.items()):
        lines.append(f"| {model} | {gpu} | {tp} | {sp} | {statistics.median(a for a, _ in rs):.3f} | {statistics.median(b for _, b in rs):.3f} |")
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "latency_fit.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
