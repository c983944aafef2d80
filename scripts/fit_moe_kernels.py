"""Candidate K (docs/moe_kernel_plan.md, not adopted: docs/moe_kernel.md): the MoE kernel scale of each
weight format's kernel class under each engine, fitted to the engines' measured MoE kernels
(aiconfigurator-core 0.12.0).

    .venv/bin/python scripts/fit_moe_kernels.py --extract   # aiconfigurator-core's parquet files ->
                                                            # tests/data/aic_moe_rows.json
    .venv/bin/python scripts/fit_moe_kernels.py             # fits K's scales, prints them beside
                                                            # bench_moe_kernels.K_SCALES, writes docs/moe_kernel_fit.md

Rows (benchmarks/moe_kernel_rows.py): vLLM 0.24.0, SGLang 0.5.14 and TensorRT-LLM 1.3.0rc20's fused-MoE
kernels on H100 SXM, H200 and B200, balanced routing, expert parallel 1, tensor parallel 1-8, at the
expert shapes of the presets in SHAPES, each weight format the planner has (bf16, block fp8, AWQ/GPTQ
int4, MXFP4 as W4A16 before Blackwell and as W4A8 on it, NVFP4 on Blackwell). Where an engine ships
several kernels for a format, a row is the fastest of them at that shape and token count (TensorRT-LLM's
min-latency and non-gated variants left out: a mode and an MLP kind of their own). The scale of a
class under an engine is the least-squares fit of log(planner / measured) over its rows at FIT_TOKENS
tokens or more; a class an engine has no rows for takes the class's scale over every engine's rows.
Needs pandas/pyarrow and scipy (dependencies of aiconfigurator-core); the library does not.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import moe_kernel_rows as R  # noqa: E402

VERSION = "0.12.0"
GPUS = {"h100_sxm": "H100-SXM-80GB", "h200_sxm": "H200-141GB", "b200_sxm": "B200-180GB"}
ENGINES = {"vllm": "0.24.0", "sglang": "0.5.14", "trtllm": "1.3.0rc20"}
# (hidden, expert intermediate, experts per token, routed experts) -> the preset with that expert shape
SHAPES = {
    (7168, 2048, 8, 384): "kimi-k2",
    (7168, 2048, 8, 256): "deepseek-v3",
    (6144, 2048, 8, 256): "glm-5",
    (4096, 1536, 8, 128): "qwen3-235b-a22b",
    (2048, 768, 8, 128): "qwen3-30b-a3b",
    (4096, 1024, 10, 512): "qwen3.5-397b-a17b",
    (4096, 14336, 2, 8): "mixtral-8x7b",
    (2880, 2880, 4, 128): "gpt-oss-120b",
    (2880, 2880, 4, 32): "gpt-oss-20b",
    (6144, 3072, 4, 128): "minimax-m3",
}
# AIConfigurator's moe_dtype -> the planner's weight format, and the GPU generations it stands for there
DTYPES = {
    "bfloat16": ("bf16", None),
    "fp8_block": ("fp8", None),
    "int4_wo": ("int4", None),
    "w4a16_mxfp4": ("mxfp4", "hopper"),
    "w4a8_mxfp4_mxfp8": ("mxfp4", "blackwell"),
    "nvfp4": ("nvfp4", "blackwell"),
}
LEFT_OUT_KERNELS = ("min_latency", "nongated")
SCALE_BOUNDS = (0.05, 8.0)
COLUMNS = ["gpu", "engine", "weight_dtype", "preset", "tp", "tokens", "measured_s", "kernel"]


def extract() -> None:
    """Read aiconfigurator-core's MoE parquet files into tests/data/aic_moe_rows.json."""
    import aiconfigurator_core
    import pandas as pd

    data_dir = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    best: dict[tuple, tuple[float, str]] = {}
    for sys_name, gpu in GPUS.items():
        generation = "blackwell" if sys_name.startswith("b") else "hopper"
        for engine, version in ENGINES.items():
            df = pd.read_parquet(data_dir / sys_name / "moe" / engine / version / "moe_perf.parquet")
            df = df[(df.distribution == "balanced") & (df.moe_ep_size == 1) & df.moe_tp_size.isin([1, 2, 4, 8])]
            for r in df.itertuples():
                preset = SHAPES.get((int(r.hidden_size), int(r.inter_size), int(r.topk), int(r.num_experts)))
                fmt = DTYPES.get(r.moe_dtype)
                if not preset or not fmt or (fmt[1] and fmt[1] != generation) or any(k in r.kernel_source for k in LEFT_OUT_KERNELS):
                    continue
                key = (gpu, engine, fmt[0], preset, int(r.moe_tp_size), int(r.num_tokens))
                seconds = float(r.latency) * 1e-3
                if key not in best or seconds < best[key][0]:
                    best[key] = (seconds, r.kernel_source)
    out = []
    for key, (seconds, kernel) in sorted(best.items()):
        gpu, engine, fmt, preset, tp, _tokens = key
        if R.roofline(preset, gpu, tp, fmt, engine) is not None:  # layouts the planner refuses (weights above the GPU) left out
            out.append([*key, float(f"{seconds:.6g}"), kernel])
    about = (
        f"aiconfigurator-core {VERSION}'s measured fused-MoE kernels (systems/data/<gpu>/moe/<engine>/<version>/moe_perf.parquet), "
        f"extracted by scripts/fit_moe_kernels.py --extract: {', '.join(f'{e} {v}' for e, v in ENGINES.items())} on {', '.join(GPUS.values())}; "
        "balanced routing, moe_ep_size 1, moe_tp_size 1-8; the fastest kernel source per row (min-latency and non-gated variants left out); "
        "shapes of the presets in SHAPES; layouts whose weights exceed the GPU left out. measured_s: the kernel's latency in seconds."
    )
    R.ROWS_PATH.write_text(json.dumps({"about": about, "columns": COLUMNS, "rows": out}, separators=(",", ":")) + "\n")
    print(f"{len(out)} rows -> {R.ROWS_PATH.relative_to(ROOT)}")


def _fit_scale(rows: list[dict]) -> float:
    from scipy.optimize import minimize_scalar

    def cost(log_s: float) -> float:
        s = math.exp(log_s)
        return sum(math.log(R.planner_s(r, s) / r["measured_s"]) ** 2 for r in rows)

    lo, hi = (math.log(b) for b in SCALE_BOUNDS)
    return math.exp(minimize_scalar(cost, bounds=(lo, hi), method="bounded", options={"xatol": 1e-5}).x)


def fit() -> dict[str, float]:
    """{"<class>/<engine>": scale, "<class>": the class's scale over every engine}."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in R.rows():
        kind = R.kernel_class(r)
        if kind is None or r["tokens"] < R.FIT_TOKENS:
            continue
        groups[f"{kind}/{r['engine']}"].append(r)
        groups[kind].append(r)
    return {name: float(f"{_fit_scale(rs):.4g}") for name, rs in sorted(groups.items())}


def main() -> None:
    if "--extract" in sys.argv[1:]:
        extract()
        return
    from benchmarks import bench_moe_kernels

    scales = fit()
    for k, v in scales.items():
        print(f"{k:20s} {v:.4g}   recorded {bench_moe_kernels.K_SCALES.get(k)}")
    if scales != bench_moe_kernels.K_SCALES:
        print("the fit differs from bench_moe_kernels.K_SCALES (the rows changed?)")
    (ROOT / "docs" / "moe_kernel_fit.md").write_text(bench_moe_kernels.doc())


if __name__ == "__main__":
    main()
