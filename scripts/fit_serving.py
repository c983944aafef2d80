"""Fit the serving costs (what real engines add to the kernels) to published end-to-end runs.

    .venv/bin/python scripts/fit_serving.py     # fits, rewrites latency.py's generated block,
                                                # planner/serving_accuracy.json and docs/serving_fit.md
    .venv/bin/python scripts/fit_serving.py --fresh-only   # no fit: only the held-out fresh points'
                                                # rows of serving_accuracy.json

Data: ../shared/reference/measured_serving.json (47 points) and the fresh-fit points of
benchmarks/fresh_serving.json (published runs collected later; its other points stay held out:
serving_points.FRESH_FIT_SOURCES), each planned by benchmarks/serving_points.py with
``compute_plan``. The kernels stay as scripts/fit_latency.py
fitted them to AIConfigurator (latency.KERNELS); this fit adds:

* vLLM's host work per step and per running sequence (``step_s``, ``seq_s``), TensorRT-LLM's, and
  SGLang's with its per-request overhead (``sglang_api_s``);
* per-layer fixed costs by layer kind as served: every layer, each MoE layer (routing and
  dispatch), each MLA layer; the latency of a message that leaves a node (``scaleout_message_s``);
* the API server's preprocessing per request and per prompt token;
* kernel scales: 4-bit experts widened to 16-bit or to fp8 activations, native FP4 grouped GEMMs,
  and fp8 GEMMs against the bf16 efficiency AIConfigurator's bf16 rows gave.

Three fits, each reported in docs/serving_fit.md:

1. the pre-registered split (benchmarks/serving_points.py: fit on the "fit" points, held out every
   H200 point, every SGLang point and the middle point of every other sweep), kept as it was
   registered before any fitting;
2. leave-one-group-out cross-validation: for each engine, each GPU and each sweep (one deployment
   over concurrencies or prompt lengths), fit on every other point and predict the group; these
   predictions are the held-out estimate, and the leave-one-sweep-out ones feed the bands
   (planner/serving_accuracy.json ``ratios``);
3. the shipped constants: fitted on every reference point and the fresh-fit points; the held-out
   fresh points (sources no fit saw) check them.

Objective: least squares of log(planner / measured) of every measured TTFT, TPOT and output
tokens/s per GPU of the points (anomalies the source flags left out), plus a weak log-normal
prior on each constant (PRIOR_WEIGHT x log(value / prior) / log(spread)) so constants the points
barely touch stay physical (and an engine left out of a cross-validation fold falls back to
its prior). Needs scipy (a dependency of aiconfigurator-core); the library does not.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import serving_points as S  # noqa: E402
from planner import latency  # noqa: E402

# name, prior, lower, upper, prior spread (the factor one prior sigma stands for), what it is
SERVING_PARAMS = [
    ("step_s", 1e-3, 1e-5, 3e-2, 3.0, "vLLM host work per engine step"),
    ("seq_s", 10e-6, 1e-8, 3e-4, 3.0, "vLLM host work per sequence producing a token"),
    ("serve_layer_s", 10e-6, 1e-8, 3e-4, 3.0, "per decoder layer, as served"),
    ("serve_moe_layer_s", 20e-6, 1e-8, 5e-4, 3.0, "per MoE layer (routing, top-k, dispatch), as served"),
    ("mla_layer_s", 50e-6, 1e-8, 5e-4, 1.5, "per MLA layer (latent up-projections, absorbed BMMs)"),
    ("api_s", 8e-3, 1e-4, 1e-1, 3.0, "API server per request"),
    ("api_token_s", 2e-6, 1e-9, 1e-4, 10.0, "API server per prompt token"),
    ("trtllm_step_s", 2e-3, 1e-5, 5e-2, 3.0, "TensorRT-LLM host work per step"),
    ("trtllm_seq_s", 15e-6, 1e-8, 5e-4, 3.0, "TensorRT-LLM host work per sequence"),
    ("sglang_api_s", 8e-3, 1e-4, 5e-1, 3.0, "SGLang per request before its scheduler runs it (tokenizer manager, IPC to the scheduler, detokenizer)"),
    ("sglang_step_s", 1e-3, 1e-5, 3e-2, 3.0, "SGLang host work per engine step"),
    ("sglang_seq_s", 10e-6, 1e-8, 3e-4, 3.0, "SGLang host work per sequence producing a token"),
    ("scaleout_message_s", 25e-6, 1e-7, 1e-3, 3.0, "latency of an all-reduce message that leaves the node (InfiniBand / RoCE)"),
]
# a refit candidate's M1 (docs/serving_fresh2_plan.md, addendum 2); the shipped fit keeps the catalog's estimate
ROCM_PARAM = ("rocm_fixed_scale", 1.5, 0.5, 20.0, 3.0, "ROCm's serving fixed costs (per layer kind, host work per step and sequence, eager-prefill launches) against CUDA's (the catalog's AMD fixed_cost_scale)")
KERNEL_PARAMS = [
    ("w4a16", 1.0, 0.1, 6.0, 2.0, "4-bit float experts widened to 16-bit activations (Triton matmul_ogs)"),
    ("int4", 1.0, 0.05, 6.0, 3.0, "AWQ / GPTQ integer experts (Marlin W4A16)"),
    ("w4a8", 1.0, 0.1, 6.0, 2.0, "4-bit experts widened to fp8 activations (no fitted point uses it)"),
    ("fp4", 1.0, 0.1, 6.0, 2.0, "native FP4 grouped GEMMs (Blackwell)"),
    ("moe_fp8", 1.0, 0.1, 6.0, 2.0, "fp8 grouped GEMMs (block-scaled experts)"),
    ("gemm_fp8", 0.75, 0.2, 1.5, 1.5, "fp8 dense GEMM efficiency vs the bf16 fit"),
    ("int4_layer_s", 50e-6, 1e-8, 5e-4, 1.5, "per layer, AWQ / GPTQ W4A16 GEMVs of every projection at small batch"),
]
PARAMS = SERVING_PARAMS + KERNEL_PARAMS
PRIOR_WEIGHT = 0.3
# robust loss: a point the model misses by far (a DEP run whose batch the overview does not state)
# pulls the shared constants less than squares would
LOSS, F_SCALE = "soft_l1", 0.3


KERNEL_NAMES = frozenset(n for n, *_ in KERNEL_PARAMS)
BASE: dict[str, float] = {}  # constants held fixed under the fitted ones (a candidate that fits a few: evaluate_candidate)


def split_x(x: dict) -> tuple[dict, dict]:
    return {n: v for n, v in x.items() if n not in KERNEL_NAMES}, {n: v for n, v in x.items() if n in KERNEL_NAMES}


def evaluate(pts: list[S.Point], x: dict) -> list[tuple[S.Point, dict[str, float]]]:
    serving, kernels = split_x(x)
    return [(pt, S.ratios(pt, S.with_fit(pt, serving, kernels))) for pt in pts]


_BURST_IN_FIT = False  # the shipped fit: the steady state; refit candidates A and E fitted with M2 (evaluate_candidate)


def residuals(v: np.ndarray, pts: list[S.Point]) -> np.ndarray:
    """The fit's residuals: log planner / measured of every fitted quantity, in the closed loop's steady
    state (the constants were fitted without the start burst, M2; candidate F added it on top, refitting
    nothing: docs/serving_fresh4_plan.md), and the priors' pulls."""
    x = {**BASE, **{name: math.exp(val) for (name, *_), val in zip(PARAMS, v, strict=True)}}
    out = []
    with S.start_burst(S.START_BURST and _BURST_IN_FIT):
        evaluated = evaluate(pts, x)
    for pt, ratios in evaluated:
        out += [math.log(ratios[m]) for m in S.fitted_quantities(pt)]
    for (_name, prior, _lo, _hi, spread, _), val in zip(PARAMS, v, strict=True):
        out.append(PRIOR_WEIGHT * (val - math.log(prior)) / math.log(spread))
    return np.array(out)


def fit(pts: list[S.Point], start: dict | None = None, max_nfev: int = 2000):
    """The least-squares fit over ``pts``, from the priors (or ``start``'s constants)."""
    x0 = np.log([start.get(p[0], p[1]) if start else p[1] for p in PARAMS])
    lo, hi = np.log([p[2] for p in PARAMS]), np.log([p[3] for p in PARAMS])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    return least_squares(residuals, x0, bounds=(lo, hi), args=(pts,), loss=LOSS, f_scale=F_SCALE, max_nfev=max_nfev, xtol=1e-10, ftol=1e-10, gtol=1e-10)


def constants(result) -> dict:
    return {name: math.exp(v) for (name, *_), v in zip(PARAMS, result.x, strict=True)}


# leave-one-group-out cross-validation: each grouping splits the points into groups; each fold
# refits from the all-points constants for at most CV_STEPS steps (each step a Jacobian of every
# constant over the fold's points)
CV_STEPS = 30
GROUPINGS = {"engine": lambda pt: pt.engine, "GPU": lambda pt: pt.raw["gpu"], "sweep": lambda pt: S.sweep_key(pt.raw)}


def cross_validate(pts: list[S.Point], start: dict) -> dict[str, list[tuple[S.Point, dict[str, float]]]]:
    """Per grouping, every point predicted by the constants fitted on the points outside its group
    (started from ``start``, the all-points fit, at most :data:`CV_STEPS` steps a fold)."""
    out = {}
    for name, group in GROUPINGS.items():
        keys = sorted({group(pt) for pt in pts}, key=str)
        preds: dict[str, tuple[S.Point, dict[str, float]]] = {}
        for k in keys:
            inside = [pt for pt in pts if group(pt) == k]
            x = constants(fit([pt for pt in pts if group(pt) != k], start, max_nfev=CV_STEPS))
            for pt, r in evaluate(inside, x):
                preds[pt.id] = (pt, r)
            print(f"cv {name:6s} {str(k)[:60]:60s} {len(inside):2d} points")
        out[name] = [preds[pt.id] for pt in pts]
    return out


def write_constants(x: dict) -> None:
    """Rewrite the generated block of planner/latency.py with the fitted numbers."""
    path = ROOT / "planner" / "latency.py"
    text = path.read_text()
    serving, kernels = split_x(x)
    block = "# --- serving fit (generated) ---\nSERVING_FIT = {\n"
    block += "".join(f'    "{k}": {v:.4g},\n' for k, v in serving.items())
    block += "}\nKERNEL_FIT = {" + ", ".join(f'"{k}": {v:.4g}' for k, v in kernels.items()) + "}\n# --- end serving fit ---"
    new, count = re.subn(r"# --- serving fit \(generated\) ---.*?# --- end serving fit ---", block, text, flags=re.S)
    assert count == 1, "the generated block's markers are missing from planner/latency.py"
    path.write_text(new)


def _rounded(ratios: dict[str, float]) -> dict[str, float]:
    return {m: float(f"{r:.5g}") for m, r in ratios.items()}


ACCURACY_SOURCE = "../shared/reference/measured_serving.json (published runs: InferenceMAX, TensorRT-LLM perf overview, tt-inference-server), benchmarks/fresh_serving.json (published runs collected later: its fresh-fit sources fitted, the rest held out) and benchmarks/fresh2_serving.json to fresh5_serving.json (collected after the constants were fixed, registered before collection, held out whole)"
ACCURACY_RATIOS = "planner / measured predicted with the sweep left out of the fit (leave-one-sweep-out cross-validation; a held-out fresh point: the shipped constants, which never saw it); fit_ratios: the shipped constants, fitted on the reference and fresh-fit points"


def fresh_rows(x: dict, pre_x: dict) -> list[dict]:
    """The rows of the points no fit saw (splits S.FRESH and S.FRESH2 to S.FRESH5): planner / measured with the
    constants ``x`` as their ``ratios`` (the bands use them) and with the pre-registered fit's."""
    rows = []
    held = S.never_fitted()
    for (pt, ratios), (_pt, pre) in zip(evaluate(held, x), evaluate(held, pre_x), strict=True):
        anomalous = pt.raw.get("anomalies", {})
        row = {"id": pt.id, "split": pt.split, "regime": S.regime(pt), "ratios": _rounded(ratios), "fit_ratios": _rounded(ratios), "cv": {}, "preregistered": _rounded(pre), "anomalous": anomalous, "model": pt.raw["model"], "gpu": pt.raw["gpu"]}
        if S.older_release(pt.raw):  # no plan is of a release the planner has no profile for: reported, not a band's point (planner.accuracy)
            row["older_release"] = pt.raw["engine_version"]
        rows.append(row)
    return rows


def write_fresh_only() -> None:
    """``--fresh-only``: rewrite only the never-fitted points' rows of planner/serving_accuracy.json,
    with the shipped constants and the recorded pre-registered ones (no refit; a change to the
    fresh-fit points needs the whole fit)."""
    path = ROOT / "planner" / "serving_accuracy.json"
    data = json.loads(path.read_text())
    x = {**latency.SERVING_FIT, **latency.KERNEL_FIT}
    data.update(source=ACCURACY_SOURCE, ratios=ACCURACY_RATIOS)
    data["points"] = [p for p in data["points"] if p["split"] not in (S.FRESH, S.FRESH2, S.FRESH3, S.FRESH4, S.FRESH5)] + fresh_rows(x, data["preregistered_constants"])
    path.write_text(json.dumps(data, indent=1) + "\n")


def write_accuracy(results: list[tuple[S.Point, dict[str, float]]], cv: dict[str, list[tuple[S.Point, dict[str, float]]]], pre_results: list[tuple[S.Point, dict[str, float]]], pre_x: dict, x: dict) -> None:
    """planner/serving_accuracy.json: per point its regime, the leave-one-sweep-out ratios the bands
    use (``ratios``), the shipped fit's own (``fit_ratios``), every cross-validation's (``cv``)
    and the pre-registered fit's (``preregistered``); and the pre-registered fit's constants
    (``preregistered_constants``: benchmarks/bench_serving_accuracy.py runs the fresh points with them)."""
    held = {name: {pt.id: r for pt, r in preds} for name, preds in cv.items()}
    pre = {pt.id: r for pt, r in pre_results}
    rows = []
    for pt, ratios in results:
        rows.append(
            {
                "id": pt.id,
                "split": pt.split,
                "regime": S.regime(pt),
                "ratios": _rounded(held["sweep"][pt.id]),
                "fit_ratios": _rounded(ratios),
                "cv": {name: _rounded(h[pt.id]) for name, h in held.items()},
                "preregistered": _rounded(pre[pt.id]),
                "anomalous": {m: why for (pid, m), why in S.ANOMALIES.items() if pid == pt.id},
                "model": pt.raw["model"],
                "gpu": pt.raw["gpu"],
            }
        )
    rows += fresh_rows(x, pre_x)
    data = {
        "source": ACCURACY_SOURCE,
        "generated_by": "scripts/fit_serving.py",
        "ratios": ACCURACY_RATIOS,
        "preregistered_constants": {k: float(f"{v:.6g}") for k, v in pre_x.items()},
        "points": rows,
    }
    (ROOT / "planner" / "serving_accuracy.json").write_text(json.dumps(data, indent=1) + "\n")


def _fmt(v: float) -> str:
    return f"{v:.4g}"


REGIME_GROUPS = (
    ("all", lambda pt: "all"),
    ("engine", lambda pt: pt.engine),
    ("dense/MoE", lambda pt: S.regime(pt)["arch"]),
    ("TP", lambda pt: S.regime(pt)["tp"]),
    ("concurrency", lambda pt: S.regime(pt)["concurrency"]),
    ("GPU", lambda pt: S.regime(pt)["family"]),
)


def _table(title: str, subset: list[tuple[S.Point, dict[str, float]]], groups=REGIME_GROUPS) -> list[str]:
    lines = ["", f"### {title}", "", "| group | metric | n | median | worst | goal |", "|---|---|---|---|---|---|"]
    for label, group in groups:
        for g, m, n, med, bad in S.summary_rows(subset, group):
            lines.append(f"| {label}: {g} | {m} | {n} | {med:.3f} | {bad:.3f} | {'met' if S.goal_met(m, med, bad) else 'not met'} |")
    return lines


def write_doc(results, x: dict, result, pre_x: dict, pre_results, cv: dict) -> None:
    lines = [
        "# Serving fit: what real engines add to the kernels (generated by scripts/fit_serving.py; do not edit)",
        "",
        "Data: `../shared/reference/measured_serving.json`, 47 published end-to-end runs (SemiAnalysis InferenceMAX closed-loop sweeps,",
        "NVIDIA's TensorRT-LLM perf overview offline max-throughput tables, tenstorrent tt-inference-server GPU reference sweeps), each",
        "with its engine, precision, GPU, TP/EP, ISL/OSL and concurrency; and the fresh-fit points of `benchmarks/fresh_serving.json`,",
        f"{sum(pt.split == S.FRESH_FIT for pt, _ in results)} runs published elsewhere and collected after the constants of 40ddb99 (InferenceX PR #3288: SGLang 0.5.12 DeepSeek-R1 FP8",
        "on 8 x H200; PR #3363: the same on 8 x B200; gpustack's performance lab: Qwen3-8B on one H100 under vLLM, SGLang and TensorRT-LLM).",
        "Its other sources stay held out (docs/serving_fresh.md): the split by source was fixed before any fit used a fresh point.",
        "The kernels keep the AIConfigurator fit (docs/latency_fit.md).",
        "",
        "## How each point is planned (benchmarks/serving_points.py)",
        "",
        "Each point is one `compute_plan`: its preset, GPU, TP (DEP points as `dp` attention data-parallel ranks with `ep = dp`), weight",
        "format (NVFP4 checkpoints as `nvfp4`: FP4 tensor cores on Blackwell), K/V dtype, ISL/OSL, `serving_engine` and the harness's engine",
        "settings: vLLM's `vllm serve` batch defaults of the release (planner/engines/vllm_memory.py), SGLang's chunked prefill for the",
        "GPU's memory, and trtllm-bench's own heuristic (tensorrt_llm/bench/build/tuning.py: max_batch_size and max_num_tokens from the",
        "KV memory of ISL + OSL requests for NVFP4 / FP8 / unquantized checkpoints, BuildConfig's 2,048 / 8,192 for gpt-oss's MXFP4; no",
        "chunked prefill, so max_num_tokens >= ISL + max_batch_size). TensorRT-LLM points plan at 5 % headroom (the overview's",
        "`--kv_cache_free_gpu_mem_fraction 0.95`). A closed-loop point's TTFT, TPOT and throughput are its plan's own (a closed loop of",
        "its clients; a DEP point's per rank); an offline point runs its plan's step model over the overview's request count (3,000 for",
        "1k/1k, 1,500 for 8k/1k, ...) in waves of what the plan admits. tt-inference-server sweeps reuse one server over ISL 128, 1,024,",
        "2,048, 3,072, 4,096, 8,192 in that order, and vLLM's random dataset makes each request begin with the same request of the run",
        "before it, so the prefix cache serves the previous ISL's tokens (their TTFT: 105, 127, 132, 120 ms from 1,024 to 4,096 on",
        "DeepSeek AWQ): those plans share that prefix at hit rate 1. InferenceMAX's SGLang recipe for DeepSeek-R1 FP4 on B200",
        "(InferenceX benchmarks/dsr1_fp4_b200.sh while its config ran the v0.5.6 image) launches the server with",
        "`--scheduler-recv-interval` 10 below 16 clients and 30 from 16: SGLang's scheduler then looks for new requests once every that",
        "many decode steps, so those closed loops wait (R - 1) / 2 decode steps more on average before their prefill",
        "(the plan input `recv_interval`, under SGLang's serving costs; every other point polls each step). MoE models whose first",
        "layers are dense (DeepSeek's `first_k_dense_replace`: 3 of DeepSeek-R1's 61) or whose experts sit in every k-th layer pay the",
        "MoE fixed costs on their MoE layers only (the layers planner/weights.py's layout gives routed experts; the others a dense MLP).",
        "Expert parallelism inside a TP group (TP8 EP8",
        "without attention DP) all-reduces the experts' output as tensor parallelism does; the all-to-all dispatch and combine is",
        "charged only between attention data-parallel ranks (vLLM's all-to-all kernels need dp > 1; SGLang's DeepSeek MoE",
        "all-reduces unless an all-to-all backend is chosen). Both SGLang runs used releases that run every prefill outside CUDA",
        "graphs (0.5.6: `enable_piecewise_cuda_graph` off by default and ForwardMode.is_cuda_graph() true for decode, target-verify",
        "and idle batches only; the 2025-07 run predates piecewise prefill graphs, SGLang PR #10062 of 2025-10; 0.5.23 graphs prefill",
        "by default, so plans keep none): a step carrying prompt tokens then lasts at least the host's launches of one eager forward,",
        f"{latency.EAGER_MLA_LAYER_S * 1e3:.3g} ms per MLA layer (latency.EAGER_MLA_LAYER_S: the median of SGLang's own published eager",
        "DeepSeek-V2-family latencies at one request, issues #1264 and #1369 and PR #1401), 70 ms for DeepSeek-R1's 61 layers",
        "(`Roofline.eager_prefill_s`; benchmarks/serving_points.py SGLANG_EAGER_PREFILL_RELEASES).",
        "",
        "Objective: least squares (soft-L1, scale 0.3) of log(planner / measured) over the points' measured TTFT, TPOT and output tokens/s",
        f"per GPU, plus a prior of weight {PRIOR_WEIGHT} per constant (log(value / prior) / log(spread)). scipy least_squares.",
        "",
        f"## Shipped constants (fitted on all {len(results)} points: the 47 reference points and the fresh-fit ones)",
        "",
        f"{result.nfev} evaluations, cost {result.cost:.4g}. The pre-registered fit (fit split only) is beside them.",
        "",
        "| constant | value | pre-registered fit | prior (spread) | what |",
        "|---|---|---|---|---|",
    ]
    kernel_names = dict(split_x(x)[1])
    for name, prior, _lo, _hi, spread, what in PARAMS:
        where = "latency.KERNEL_FIT" if name in kernel_names else "latency.SERVING_FIT"
        lines.append(f"| {name} | {_fmt(x[name])} | {_fmt(pre_x[name])} | {_fmt(prior)} (x{spread:g}) | {what} ({where}) |")
    lines += [
        "",
        "### The engine-specific costs and the data they rest on",
        "",
        "* **SGLang per request** (`sglang_api_s`): both SGLang sets carry a per-request TTFT no vLLM or TensorRT-LLM point shows:",
        "  tt-inference-server's TP16 sweep (issue #356) gives 180 ms for an uncached 128-token prompt where vLLM's TP8 sweep on the",
        "  same harness gives 47 ms, and InferenceMAX's B200 run 197-200 ms at 4-8 clients for 922-token prompts. With SGLang's",
        "  prior (8 ms) and the receive interval its B200 recipe sets, the planner still misses 104-129 ms a request on the B200 run",
        "  and 90-140 ms on the TP16 sweep (Where the model misses). Fitted on those 7 TTFTs (p09's, which the source flags, left out)",
        "  and the fresh-fit SGLang TTFTs (InferenceX's 0.5.12 runs on H200 and B200 at 1-64 clients, gpustack's at 4 clients: 28 ms).",
        "* **SGLang host work** (`sglang_step_s`, `sglang_seq_s`): the B200 FP4 run's throughput at 4-32 clients (its TPOT row is",
        "  truncated in the source), the TP16 sweep's TPOT and the fresh-fit SGLang runs' TPOT and throughput (1-64 clients).",
        "* **Inter-node message latency** (`scaleout_message_s`): the only multi-node points are SGLang's DeepSeek-R1 TP16 over two",
        "  8 x H100 nodes on InfiniBand (TPOT 23.1-24.0 ms at one client); every all-reduce message that leaves a node pays it on top",
        "  of the NVLink latency (`Device.link_at`, hierarchical all-reduce). One sweep of three points: it is confounded with SGLang's",
        "  host work; the cross-validation by engine shows what it is worth on an unseen engine.",
        "* **TensorRT-LLM host work** (`trtllm_step_s`, `trtllm_seq_s`): its 24 offline max-throughput runs and gpustack's",
        "  `trtllm-serve` run of Qwen3-8B at 4 clients.",
        "* **API server** (`api_s`, `api_token_s`): the vLLM TTFTs at one or few clients. The harnesses disagree: tt-inference-server's",
        "  completions at one client leave a few ms a request, gpustack's chat completions (`vllm bench serve --backend openai-chat`)",
        "  59-75 ms for 233-token prompts on one H100; the fit settles between them, and the bands carry the spread.",
    ]
    lines += ["", "## Accuracy (planner / measured; worst = farthest from 1)", ""]
    lines += ["The issue's goal: TPOT median within 1.2x and worst within 2x, TTFT 1.5x / 3x, throughput 1.2x / 2x."]
    lines += _table(f"Fit: the shipped constants on all {len(results)} fitted points (in sample)", results, REGIME_GROUPS[:1] + (("set", lambda pt: "fresh fit" if pt.split == S.FRESH_FIT else "reference"),) + REGIME_GROUPS[1:])
    lines += _table(f"Fresh held-out: the shipped constants on the {len(S.held_out_fresh())} fresh points no fit saw (docs/serving_fresh.md)", evaluate(S.held_out_fresh(), x))
    lines += _table(f"Second fresh set: the shipped constants on the {len(S.fresh2_points())} runs registered before their collection (docs/serving_fresh2_plan.md, docs/serving_fresh2.md)", evaluate(list(S.fresh2_points()), x))
    lines += _table(f"Third fresh set: the shipped constants on the {len(S.fresh3_points())} runs collected after candidate D was frozen (docs/serving_fresh3_plan.md, docs/serving_fresh3.md)", evaluate(list(S.fresh3_points()), x))
    lines += _table(f"Fourth fresh set: the shipped constants on the {len(S.fresh4_points())} runs collected after candidate F was registered (docs/serving_fresh4_plan.md, docs/serving_fresh4.md)", evaluate(list(S.fresh4_points()), x))
    lines += _table(f"Fifth fresh set: the shipped constants on the {len(S.fresh5_points())} runs collected after candidates W and W2 were registered (docs/serving_fresh5_plan.md, docs/serving_fresh5.md)", evaluate(list(S.fresh5_points()), x))
    lines += ["", "### Refit candidates after the second set (benchmarks/refit_candidates.json, `--candidate`)", ""]
    lines += ["Median |log(planner / measured)| (TPOT / TTFT / throughput) on the held-out sets; A-C registered before they ran (docs/serving_fresh2_plan.md,", "addendum 2), none adopted; D and E defined after, judged by the third set only.", ""]
    lines += ["| candidate | fitted constants | first set's held-out | second set's held-out part | reference TTFT in sample (median / worst) |", "|---|---|---|---|---|"]
    record = json.loads((ROOT / "benchmarks" / "refit_candidates.json").read_text())

    def scores(d: dict) -> str:
        return " / ".join(f"{d[m]:.3f}" for m in S.METRICS)

    lines.append(f"| shipped before D (f9c9e75) | | {scores(record['shipped (f9c9e75)']['fresh held-out'])} | {scores(record['shipped (f9c9e75)']['fresh-2 held-out'])} | |")
    for c in record["candidates"]:
        ttft = c["reference in sample (median, worst, met)"]["ttft_mean_ms"]
        fitted = f"{len(c['constants'])} on {c['fitted_on']} points" + (f", rocm_fixed_scale {c['constants']['rocm_fixed_scale']:g}" if "rocm_fixed_scale" in c["constants"] else "")
        lines.append(f"| {c['candidate']}{' (adopted: docs/serving_fresh3.md)' if c['candidate'] == 'D' else ''} | {fitted} | {scores(c['fresh held-out'])} | {scores(c['fresh-2 held-out'])} | {ttft[0]:.3f} / {ttft[1]:.3f}{'' if ttft[2] else ', not met'} |")
    pre_held = [(pt, r) for pt, r in pre_results if pt.split in S.SPLITS[1:]]
    lines += _table("Pre-registered held-out: the fit split's constants on the 26 points registered as held out (H200, SGLang, middle points)", pre_held, REGIME_GROUPS[:1] + (("split", lambda pt: pt.split),) + REGIME_GROUPS[1:])
    lines += [
        "",
        "The pre-registered split leaves SGLang out of the fit entirely, so its held-out TTFT and TPOT carry SGLang's per-request",
        "overhead and the inter-node latency, which no fitted point shows; it is kept as registered and reported as it falls.",
        "",
        "## Cross-validation: the held-out estimate",
        "",
        "Each point predicted by constants fitted without its group: leave one engine out (3 folds), one GPU out (4), one sweep out",
        f"({len({S.sweep_key(pt.raw) for pt, _ in results})}: a deployment over concurrencies or prompt lengths, or one TensorRT-LLM",
        "model and GPU over sequence lengths). An engine left out falls back to the priors of its own constants (SGLang's: vLLM's",
        "priors; the inter-node latency: 25 us). Leave-one-sweep-out is the held-out estimate the bands use.",
    ]
    for name in GROUPINGS:
        lines += _table(f"Leave one {name} out", cv[name])
    lines += [
        "",
        "## Where the model misses",
        "",
        "* **gpt-oss on TensorRT-LLM** (Hopper, TRITON MoE backend): every offline run lands too fast, TP1 1.2-1.4x and DEP4 (4 x H100,",
        "  attention data parallel with EP4) most. Why DEP4 was 2x too fast before: (1) the batch. trtllm-bench tunes max_batch_size only",
        "  for NVFP4 / FP8 / unquantized checkpoints; gpt-oss's MXFP4 takes BuildConfig's 2,048 (max_num_tokens 8,192), so memory bounds",
        "  the batch. The old point held each rank's sequences in steady state (760 a rank); the plan of a DEP rank applies vLLM's block",
        "  reservation (gpt-oss's sliding and full layers in padded groups), 402 a rank, which takes 2.05x to 1.50x. (2) the all-to-all:",
        "  3.5 ms of a 60 ms decode step at that batch, and TensorRT-LLM's all-gather + reduce-scatter under attention DP moves the",
        "  same bytes as the dispatch and combine the model charges: not the gap. (3) the MXFP4 kernels on Hopper: a lower W4A16 scale",
        "  brings the TP1 runs to 1x but leaves DEP4 about 1.5x too fast; the measured per-token cost of DEP4 on H100 (212 us) is HBM-",
        "  bandwidth-bound like TP1 on H200 (147 us x 4.8 / 3.35 TB/s = 211 us): the real DEP run gains nothing from spreading the",
        "  experts over four GPUs, which the model credits (each rank reads a quarter of the experts for four ranks' tokens).",
        "  The rest is unexplained by the published data (the overview states no batch; an expert-load imbalance across ranks or",
        "  the TRITON kernels' compute at large batch would both do it).",
        "* **MLA vs AWQ fixed costs**: the only MLA points at small batch are AWQ (int4) DeepSeek-R1 on vLLM, whose 16 ms TPOT at one",
        "  client needs about 180 us a layer of fixed cost; the MLA and AWQ-GEMV terms split it by their priors.",
        "* **SGLang, term by term** (the pre-registered constants: SGLang at its priors). DeepSeek-R1 FP4 TP8 EP8 on B200 at 4 / 8 /",
        "  16 / 32 clients: TTFT = API 8.9 ms + the wait for the scheduler's poll (recv interval 10 / 10 / 30 / 30: 55 / 59 / 200 /",
        "  231 ms) + its own prefill of 922 tokens, 25 ms on the GPU but 70 ms of eager launches (the release runs prefill outside",
        "  CUDA graphs); planned 134 / 138 / 279 / 310 ms, measured 200 / 197 / 355 / 394 ms, so 59-85 ms a request remain at every",
        "  load. The run's TPOT row is truncated; from its throughput and TTFT it is 8.2 / 9.3 / 11.4 / 13.8 ms, where the",
        "  planner's decode step is 1.12-1.37x slower: at 4 clients 11.2 ms, of which the fixed per-layer costs fitted on Hopper runs",
        "  (MLA and attention 4.4 ms over 61 layers, MoE routing 58 x 33 us = 1.9 ms: its first 3 layers are dense, norms and launches",
        "  1.1 ms) are 7.4 ms; the eager prefills stall the decodes beside them, so its throughput lands lower still. TP16 over two H100",
        "  nodes at one client: TPOT 23.1-24.0 ms measured, 13.5 ms planned with the catalog's 25 us a message that leaves the node",
        "  (all-reduce 3.6 ms for 122 messages; NCCL's own tuning model, src/graph/tuning.cc, puts a 2 x 8-GPU tree all-reduce of a",
        "  small message at 6.8 + 2 x (7 x 0.6 + 5.0) = 25.2 us in all, so the estimate is not low); the 9.6 ms gap is 78 us more a",
        "  message, or any other per-layer cost the multi-node run pays (about 155 us a layer); TTFT 180 / 191 / 264 ms measured for",
        "  128 new / 1,024 new of 2,048 / 4,096 new of 8,192 tokens, 78 / 80 / 172 ms planned (the first two at the 70 ms eager floor,",
        "  the last on the GPU's 156 ms): about 100 ms a request remain. Ruled out from the sources: the stream",
        "  interval (SGLang 0.5.6 sends a request's first token at once whatever --stream-interval: `len(output_ids) % interval == 1`),",
        "  chunked prefill (16,384 on B200, as planned), the prefix cache (InferenceMAX disables it; tt-inference-server's sweep order",
        "  is planned), speculative decoding (the B200 recipe sets none), attention DP (--data-parallel-size 1), an empty first chunk",
        "  (InferenceX's client times the first chunk that carries choices, empty text or not), the overlap scheduler (it processes a",
        "  prefill's result right after launching the next batch: CPU time, not a step), JIT compilation on the first requests",
        "  (InferenceX's harness sends 2 x clients warm-up requests first, `--num-warmups`, since 2026-01). Not derivable from the",
        "  published data: the rest of the per-request cost. Ruled out since, from published measurements: the all-reduce",
        "  messages themselves. nccl-tests `all_reduce_perf` over 2 x 8 H100 on InfiniBand (16 ranks, out of place, no CUDA",
        "  graphs) takes 32.7 us at 16 KB on a cluster an NVIDIA engineer called good (NVIDIA/nccl-tests issue #309,",
        "  8 x ConnectX-7 400 Gb/s, NCCL 2.26.2) and 37.2 us on Nebius's (dstack's cluster example, mkdocs/docs/examples/clusters/",
        "  nebius.md); the planner's message across nodes costs the in-node 4.36 us plus 25 us, 29.4 us, within 10-20 % of both.",
        "  The 78 us a message the gap would need is 2-3x what these clusters measure (the 61-75 us of NVIDIA/nccl issue #1453",
        "  are 24 ranks over 3 nodes across racks, which its reporter calls degraded; EFA and GCP's TCPXO measure 94 and 139 us",
        f"  at 16 KB, other fabrics; docs/internode_allreduce.md). The fitted `scaleout_message_s` ({x['scaleout_message_s'] * 1e6:.0f} us) stands for whatever the two-node run pays",
        "  a layer, not for its link; the pre-registered figure keeps the sourced 25 us. A sourced",
        "  mechanism of unknown size for the TP16 TPOT: SGLang broadcasts every poll's requests from TP rank 0 to all TP ranks over the",
        "  CPU (gloo) group (0.5.6 scheduler.recv_requests, broadcast_pyobj: one 8-byte broadcast a step when none arrived), across the",
        "  network on two nodes; no published figure sizes it, so it is not modelled.",
        "* **Fresh held-out points** (docs/serving_fresh.md): one InferenceX run (#870, 1k/1k at 4 clients, runner h200-nv_0)",
        "  measures TPOT 22.7 ms where the same harness at 8 clients measures 12.8 and SGLang 0.5.12 at 4 clients 9.7: it alone",
        "  makes the worst TPOT (0.44) and throughput (2.3x); its source does not flag it, so it counts. TensorRT-LLM's `trtllm-serve`",
        "  at 4-16 clients lands at 0.56-0.69x of its TTFT (190-220 ms measured): a per-request cost of its OpenAI server no fitted",
        "  point shows. Its runs at 64 and 128 clients wait in TensorRT-LLM's batch waiting (the recipe's batch_wait_timeout_iters",
        "  40, planned: the plan inputs batch_wait_iters / batch_wait_tokens_ratio).",
        "* **The start of a closed loop** (M2, in the comparison since 2026-12-07): harnesses that start every client at once",
        "  (InferenceX's `benchmark_serving` with 10 x clients prompts, `vllm bench serve` / `sglang.bench_serving` with a",
        "  `--max-concurrency`) queue the first C prompts behind each other on an idle engine, so a run whose harness states its N",
        "  prompts is compared with (C x the burst's mean TTFT + (N - C) x the steady state's) / N (serving.benchmark_ttft_ms).",
        "  The constants above are fitted on the steady state (the fit runs with it off); candidate F added it on top, refitting",
        "  nothing, and a fourth set collected after F was registered adopted it (docs/serving_fresh4_plan.md, docs/serving_fresh4.md:",
        "  TTFT median |log| 3.379 -> 2.755 on its 33 runs with a stated prompt count). The tables here carry it.",
        "* **Waves** (docs/serving_fresh5_plan.md): at fixed lengths a closed loop's later waves can queue as the first: SGLang",
        "  runs a waiting prefill before any decode, and on any engine the prompts that end within the API server's lag of each",
        "  other reach the scheduler together (the simulator shows both: `simulate(..., lag_s=...)`, the prefill-first policy).",
        "  W (every SGLang wave queues as the first) and W2 (vLLM too) were registered before a fifth set was collected; it",
        "  holds one SGLang and two vLLM runs that the rules count, too few for either decision (docs/serving_fresh5.md: F",
        "  under, W2 over on both vLLM runs). Not modelled: the tables carry F.",
        "* **ROCm's fixed costs** (docs/serving_fresh3_plan.md): the catalog's AMD `fixed_cost_scale`, an estimate of 1.5 until",
        "  2026-12-07, is 6.307: fitted alone on the SGLang cookbook's 13 runs on 8 x MI300X (every other constant as above) and adopted by",
        "  a third set of runs collected after it was frozen (docs/serving_fresh3.md: nine vLLM runs on 8 x MI355X). DeepSeek-V3 on",
        "  8 x MI300X under SGLang at one client (g68): 23.8 ms measured, 9.7 ms planned before, 26.4 after; Gemma-4-26B on one MI300X: 9.78",
        "  measured, 3.8 before, 8.6 after (both in the fit). AMD prefill is still 2.3-7.5x too fast on that set (ROCm's GEMM and attention efficiency is NVIDIA's here).",
        "* **vLLM releases**: one vLLM profile serves the 2025-07 tenstorrent runs (Qwen3-30B-A3B on A100) and the 2026-03 InferenceMAX",
        "  image (gpt-oss-120b TP8); newer releases schedule asynchronously and graph whole steps.",
    ]
    lines += ["", "## Residuals per point (planner / measured)", "", "| point | split | engine | model | GPU | TP/EP | ISL/OSL | clients | TPOT | TTFT | tok/s/GPU | sweep-out TPOT | TTFT | tok/s/GPU |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    held = {pt.id: r for pt, r in cv["sweep"]}
    for pt, ratios in results:
        p = pt.raw

        def cells(rs: dict, pid: str = pt.id) -> list[str]:
            return [f"{rs[m]:.3f}" + (" (anomaly)" if (pid, m) in S.ANOMALIES else "") if m in rs else "" for m in S.METRICS]

        c = p["concurrency"] or f"offline {pt.requests * (p['tp'] if pt.dep else 1):,}"
        lines.append(f"| {pt.id} | {pt.split} | {pt.engine} | {p['preset']} ({pt.weight_format}{', DEP' if pt.dep else ''}) | {p['gpu']} | {p['tp']}/{p['ep']} | {p['isl']}/{p['osl']} | {c} | " + " | ".join(cells(ratios) + cells(held[pt.id])) + " |")
    lines += ["", "Anomalies shown and left out of the fit and the goal: " + "; ".join(f"{pid} {m}: {why}" for (pid, m), why in S.ANOMALIES.items()) + "."]
    (ROOT / "docs" / "serving_fit.md").write_text("\n".join(lines) + "\n")


def _print(title: str, subset) -> None:
    for _g, m, n, med, bad in S.summary_rows(subset, lambda pt: "all"):
        print(f"{title:28s} {m:16s} n={n:2d} median {med:.3f} worst {bad:.3f} goal {'met' if S.goal_met(m, med, bad) else 'NOT met'}")


def _median_abs_log(subset) -> dict[str, float]:
    return {m: round(v, 4) for m, v in S.median_abs_log(subset).items()}


def evaluate_candidate(name: str) -> None:
    """``--candidate A|B|C|D|E``: a refit candidate (docs/serving_fresh2_plan.md; A: the shipped fit's
    points and the second set's fit part with M1 and M2; B: the same with M1; C: the data only; D:
    the shipped constants and M1's scale alone, fitted on the fit part's AMD runs; E: D with M2), scored on the
    two held-out sets (median |log(planner / measured)| per metric) and on the reference set's goal;
    prints JSON and writes nothing."""
    global PARAMS, SERVING_PARAMS, BASE, _BURST_IN_FIT
    S.START_BURST = _BURST_IN_FIT = name in "AE"
    if name in "ABDE":
        SERVING_PARAMS = SERVING_PARAMS + [ROCM_PARAM]
    if name in "DE":
        SERVING_PARAMS = [ROCM_PARAM]
    PARAMS = SERVING_PARAMS + (KERNEL_PARAMS if name not in "DE" else [])
    shipped = {**latency.SERVING_FIT, **latency.KERNEL_FIT}
    BASE = shipped if name in "DE" else {}
    part = [pt for pt in S.fresh2_points() if S.in_fresh2_fit_part(pt)]
    fitted = S.fitted_points() + part if name not in "DE" else [pt for pt in part if pt.rocm]
    result = fit(fitted, shipped)
    x = {**shipped, **constants(result)}
    ref = [(pt, r) for pt, r in evaluate(S.points(), x)]
    goal = {m: [float(f"{med:.4g}"), float(f"{bad:.4g}"), S.goal_met(m, med, bad)] for _g, m, _n, med, bad in S.summary_rows(ref, lambda pt: "all")}
    out = {"candidate": name, "fitted_on": len(fitted), "constants": {k: float(f"{v:.4g}") for k, v in constants(result).items()}, "cost": result.cost, "nfev": result.nfev}
    out["fresh held-out"] = _median_abs_log(evaluate(S.held_out_fresh(), x))
    out["fresh-2 held-out"] = _median_abs_log(evaluate([pt for pt in S.fresh2_points() if not S.in_fresh2_fit_part(pt)], x))
    out["reference in sample (median, worst, met)"] = goal
    print(json.dumps(out))


def main() -> None:
    if "--fresh-only" in sys.argv[1:]:
        write_fresh_only()
        return
    if "--candidate" in sys.argv[1:]:
        evaluate_candidate(sys.argv[sys.argv.index("--candidate") + 1])
        return
    pts = S.points()
    pre = fit([pt for pt in pts if pt.split == "fit"])
    pre_x = constants(pre)
    fitted = S.fitted_points()  # the reference points and the fresh-fit points
    pre_results = evaluate(fitted, pre_x)
    _print("pre-registered held-out", [(pt, r) for pt, r in pre_results if pt.split in S.SPLITS[1:]])
    result = fit(fitted, pre_x)
    x = constants(result)
    print(f"fitted on {len(fitted)} points:", {k: float(f"{v:.4g}") for k, v in x.items()}, f"cost {result.cost:.4g}, {result.nfev} evaluations")
    results = evaluate(fitted, x)
    _print("fit (all fitted points)", results)
    _print("fresh held-out", evaluate(S.held_out_fresh(), x))
    cv = cross_validate(fitted, x)
    for name, preds in cv.items():
        _print(f"cv leave one {name} out", preds)
    write_constants(x)
    write_accuracy(results, cv, pre_results, pre_x, x)
    write_doc(results, x, result, pre_x, pre_results, cv)


if __name__ == "__main__":
    main()
