"""The planner against published end-to-end serving runs (../shared/reference/measured_serving.json).

Shared by ``benchmarks/bench_serving_accuracy.py``, ``scripts/fit_serving.py`` and the tests.
Which points were fitted and which held out is decided here, once, by a fixed rule chosen before
fitting (docs/serving_fit.md):

* held-out GPU: every H200 point (no H200 point is fitted; the kernel fit holds H200 out too);
* held-out engine: every SGLang point (DeepSeek-R1 FP4 on 8 x B200 at 4-64 clients; DeepSeek-R1
  FP8 over two 8 x H100 nodes, TP16 over InfiniBand): SGLang uses vLLM's fitted serving costs;
* held-out point: in every remaining sweep of one deployment over three or more concurrencies or
  prompt lengths, its middle point (gpt-oss-120b TP8 at 16 clients, Qwen3-30B-A3B on A100 at a
  2,048-token prompt, DeepSeek-R1 AWQ TP8 at a 2,048-token prompt, Llama-3.1-8B FP8 on H100 at
  2,048 / 128).

Each point is planned as published (preset, GPU, TP / EP, weights and K/V dtypes, ISL / OSL) with
``compute_plan`` and its summary; what ``PlanInputs`` cannot say yet is applied to the plan's step
model through the latency functions the wiring will call (``latency.kernel_dtype`` for the FP4
peak of NVFP4 weights, ``latency.moe_kernel``, ``mla_layers``, the device's ``fixed_cost_scale``,
``parallel.expert_data_parallel`` / ``parallel.dp_memory`` for DEP points, the engine's serving
costs and runtime limits), then ``latency.closed_loop`` gives TTFT, TPOT and output tokens/s
(offline max-throughput runs: clients = what the runtime admits, no API server).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from functools import lru_cache
from pathlib import Path

from planner import accuracy, latency, parallel
from planner.hardware import get_device
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset

POINTS_PATH = Path(__file__).resolve().parents[2] / "shared" / "reference" / "measured_serving.json"
HELD_OUT_GPUS = frozenset({"H200-141GB"})
HELD_OUT_ENGINES = frozenset({"sglang"})
ENGINE = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
# trtllm-bench runs a fixed number of requests per ISL / OSL (the perf overviews' "Reproducing
# Benchmarked Results" tables: v1.0 docs/source/performance/perf-overview.md, v1.1/1.2
# docs/source/developer-guide/perf-overview.md); within 10 % of a listed pair counts as it
TRT_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000, (8192, 1024): 1500, (1024, 8192): 1500}
TRT_HEADROOM_BP = 500  # "--kv_cache_free_gpu_mem_fraction 0.95" in many of the overview's runs
# tt-inference-server sweeps one server over ISL 128 (twice: OSL 128, then 1,024), 1,024, 2,048,
# 3,072, 4,096, 8,192 in that order (its tables in issues #340 / #356). vLLM's random dataset
# (benchmarks/datasets.py RandomDataset.generate_token_sequence) makes token j of request i
# (offset_i + i + j) mod vocab with offsets a seeded generator draws the same for every fixed
# length, so request i of a run begins with request i of the run before it, and the prefix cache
# (on by default in vLLM and SGLang) serves those tokens: TTFT 128 -> 1,024 -> 2,048 -> 3,072 ->
# 4,096 rises by one 1,024-token prefill a step (AWQ DeepSeek: 105, 127, 132, 120 ms)
TT_SWEEP = (128, 1024, 2048, 3072, 4096, 8192)
SPLITS = ("fit", "held-out GPU", "held-out engine", "held-out point")


@lru_cache(maxsize=1)
def load() -> dict:
    return json.loads(POINTS_PATH.read_text())


def _sweep_key(p: dict) -> tuple:
    return (p["url"], p["engine"], p["preset"], p["weight_dtype"], p["gpu"], p["tp"], p["ep"])


@lru_cache(maxsize=1)
def _held_out_points() -> frozenset[str]:
    """The middle point of every sweep of three or more points (in file order) outside the held-out GPU and engine."""
    sweeps: dict[tuple, list[str]] = {}
    for p in load()["points"]:
        if p["gpu"] in HELD_OUT_GPUS or p["engine"] in HELD_OUT_ENGINES:
            continue
        sweeps.setdefault(_sweep_key(p), []).append(p["id"])
    return frozenset(ids[len(ids) // 2] for ids in sweeps.values() if len(ids) >= 3)


def split(p: dict) -> str:
    if p["gpu"] in HELD_OUT_GPUS:
        return "held-out GPU"
    if p["engine"] in HELD_OUT_ENGINES:
        return "held-out engine"
    return "held-out point" if p["id"] in _held_out_points() else "fit"


def weight_format(p: dict) -> str:
    """The checkpoint's weight format from the point's description (the planner's byte proxy is ``weight_dtype``)."""
    w = p["weights"].lower()
    for name in ("nvfp4", "mxfp4"):
        if name in w:
            return name
    if "awq" in w or p["weight_dtype"] == "int4":
        return "int4"
    return "fp8" if "fp8" in w or p["weight_dtype"] == "fp8" else "bf16"


@dataclasses.dataclass(frozen=True)
class Point:
    """One published run with the planner's step model for it."""

    raw: dict
    split: str
    engine: str
    weight_format: str
    moe_class: str | None  # latency.kernel_class: the fitted MoE kernel this point's experts use; None: 1
    dtype: str  # latency.kernel_dtype: the tensor-core dtype its GEMMs run in
    dep: bool  # attention data parallel + expert parallel
    roof: latency.Roofline  # per GPU (per rank for DEP), serving costs of FITTED (re-set by predict)
    kv_mid: float
    mid: int
    clients: int  # per replica (per rank for DEP): the closed loop's clients, or what an offline run admits at once
    requests: int  # offline runs: requests queued per replica (0: closed loop)
    cached: int  # prompt tokens found in the prefix cache (harness_cached_tokens)
    max_running: int
    budget: int
    api_server: bool
    gpus: int  # GPUs one replica (the closed loop's unit) uses: tp, or 1 rank for DEP
    plan_summary: dict  # the plan's summary JSON as PlanInputs can state the point today

    @property
    def id(self) -> str:
        return self.raw["id"]


def harness_cached_tokens(p: dict) -> int:
    """Prompt tokens the serving run finds cached from the run before it (tt-inference-server
    sweeps, see TT_SWEEP); 0 elsewhere."""
    if p["source"] != "tenstorrent" or p["isl"] not in TT_SWEEP:
        return 0
    i = TT_SWEEP.index(p["isl"])
    return TT_SWEEP[i - 1] if i else 0


def trt_requests(p: dict) -> int:
    """Requests one trtllm-bench run queued for the point's ISL / OSL."""
    for (isl, osl), n in TRT_REQUESTS.items():
        if abs(p["isl"] - isl) <= 0.1 * isl and abs(p["osl"] - osl) <= 0.1 * osl:
            return n
    return 3000


@lru_cache(maxsize=64)
def point(index: int) -> Point:
    p = load()["points"][index]
    engine = ENGINE[p["engine"]]
    device = get_device(p["gpu"])
    fmt = weight_format(p)
    dep = "dep" in p["weights"].lower()
    model = prepare_model(load_preset(p["preset"]))
    limits = latency.runtime_limits(engine, device.memory_gib, device.generation, device.name)
    closed = p["mode"] == "closed_loop"
    base = dict(gpu=p["gpu"], tp=p["tp"], gpu_count=p["tp"], ep=p["ep"], input_tokens=p["isl"], output_tokens=p["osl"], weight_dtype=p["weight_dtype"], kv_dtype=p["kv_dtype"], max_batched_tokens=limits.max_batched_tokens)
    if engine == "trtllm":
        base["headroom_bp"] = TRT_HEADROOM_BP
    probe = compute_plan(make_inputs(**base, sequences=1), model)
    summary = probe.summary()
    per_seq = summary["kv_cache"]["bytes_per_reserved_sequence"]
    roof = probe.roof
    mid = p["isl"] + p["osl"] // 2
    specs = probe.inspect.specs
    kv_scale = parallel.rank_kv_bytes(specs, mid, model.geometry.num_kv_heads) / max(1.0, sum(s.bytes_at(mid) for s in specs)) if dep else 1.0
    if dep:  # a rank holds its own sequences' K/V whole (all K/V heads; MLA latents are whole under TP too)
        rank = parallel.expert_data_parallel(roof, p["tp"])
        memory = parallel.dp_memory(summary["capacity"]["usable_bytes"], rank.weights_bytes, summary["capacity"]["workspace_bytes"], per_seq * kv_scale, p["tp"])
        admitted, roof, gpus = memory.sequences_per_rank, rank, 1
    else:
        admitted, gpus = summary["kv_cache"]["admissible_sequences"], p["tp"]
    dtype = latency.kernel_dtype(fmt, device.generation, engine)
    moe_class = latency.kernel_class(fmt, device.generation, engine) if roof.num_experts else None
    roof = dataclasses.replace(
        roof,
        peak_flops=device.peak_flops(dtype),
        compute_scale=roof.compute_scale * latency.compute_scale(dtype),
        mla_layers=roof.attn_layers if model.geometry.mla else 0,
        moe_kernel=latency.moe_kernel(fmt, device.generation, engine)[0] if roof.num_experts else 1.0,
        fixed_scale=device.fixed_cost_scale,
        format_layer_s=latency.format_layer_cost(fmt),
        eff=latency.serving_efficiency(engine),
    )
    ranks = p["tp"] if dep else 1
    if closed:
        clients, requests = max(1, math.ceil(p["concurrency"] / ranks)), 0
    else:  # offline max throughput: every request queued; the runtime admits what memory and its batch limit allow
        clients, requests = max(1, min(admitted, limits.max_num_seqs)), math.ceil(trt_requests(p) / ranks)
    plan = compute_plan(make_inputs(**base, sequences=min(clients, requests or clients) * ranks), model)
    kv_mid = sum(s.bytes_at(mid) for s in plan.inspect.specs) * kv_scale
    return Point(
        raw=p,
        split=split(p),
        engine=engine,
        weight_format=fmt,
        moe_class=moe_class,
        dtype=dtype,
        dep=dep,
        roof=roof,
        kv_mid=kv_mid,
        mid=mid,
        clients=clients,
        requests=requests,
        cached=harness_cached_tokens(p),
        max_running=limits.max_num_seqs,
        budget=limits.max_batched_tokens,
        api_server=closed,
        gpus=gpus,
        plan_summary=plan.summary(),
    )


def points() -> list[Point]:
    return [point(i) for i in range(len(load()["points"]))]


def with_fit(pt: Point, serving: dict[str, float] | None = None, kernels: dict[str, float] | None = None) -> latency.Roofline:
    """The point's step model with other serving constants (``serving``: SERVING_FIT keys) and
    kernel scales (``kernels``: KERNEL_FIT keys)."""
    roof = pt.roof
    if serving is not None:
        eff = latency.FITTED
        names = {k: v for k, v in serving.items() if k in latency.SERVING_FIELDS}
        if pt.engine == "trtllm":
            names.update(step_s=serving["trtllm_step_s"], seq_s=serving["trtllm_seq_s"])
        roof = dataclasses.replace(roof, eff=dataclasses.replace(eff, **names))
    if kernels is not None:
        if pt.moe_class:
            roof = dataclasses.replace(roof, moe_kernel=kernels[pt.moe_class])
        if pt.weight_format == "int4":
            roof = dataclasses.replace(roof, format_layer_s=kernels["int4_layer_s"])
        if pt.dtype == "fp8":
            roof = dataclasses.replace(roof, compute_scale=pt.roof.compute_scale / latency.compute_scale("fp8") * kernels["gemm_fp8"])
    return roof


def predict(pt: Point, roof: latency.Roofline | None = None) -> dict[str, float]:
    """The planner's figures for the point's measured quantities: TTFT and TPOT (ms, closed loop)
    and output tokens/s per GPU (tenstorrent's per-user rate 1000 / TPOT where the point says so)."""
    roof = roof or pt.roof
    p = pt.raw
    if pt.requests:
        run = latency.offline(roof, p["isl"], 0, p["osl"], pt.requests, pt.clients, pt.kv_mid, pt.mid, pt.budget)
        return {"ttft_mean_ms": run.ttft_ms, "tpot_mean_ms": run.tpot_ms, "out_tps_per_gpu": run.output_tokens_per_s / pt.gpus}
    cl = latency.closed_loop(roof, p["isl"], pt.cached, p["osl"], pt.clients, pt.kv_mid, pt.mid, pt.budget, pt.max_running, pt.api_server)
    tps = cl.output_tokens_per_s / pt.gpus
    if "Tput User" in p.get("notes", ""):
        tps = 1000.0 / cl.tpot_ms
    return {"ttft_mean_ms": cl.ttft_ms, "tpot_mean_ms": cl.tpot_ms, "out_tps_per_gpu": tps}


METRICS = ("tpot_mean_ms", "ttft_mean_ms", "out_tps_per_gpu")
# measured figures the source itself flags as anomalous: shown, left out of the goal and the fit
ANOMALIES = {("p09-inferencex", "ttft_mean_ms"): "the source flags conc=64 TTFT 5.7 s as an anomaly (queueing)"}


def ratios(pt: Point, roof: latency.Roofline | None = None) -> dict[str, float]:
    """planner / measured for each quantity the point measured."""
    pred = predict(pt, roof)
    meas = pt.raw["measured"]
    return {m: pred[m] / meas[m] for m in METRICS if meas.get(m)}


def regime(pt: Point) -> dict[str, str]:
    """The regime labels the accuracy table groups by (planner.accuracy.regime)."""
    p = pt.raw
    device = get_device(p["gpu"])
    return accuracy.regime(bool(pt.roof.num_experts), p["tp"], p["concurrency"] or pt.clients, device.generation, pt.engine, device.node_gpus)


def fitted_quantities(pt: Point) -> list[str]:
    """The measured quantities the fit uses: all but anomalies and tenstorrent's per-user rate (1000 / TPOT, TPOT again)."""
    meas = pt.raw["measured"]
    out = [m for m in METRICS if meas.get(m) and (pt.id, m) not in ANOMALIES]
    if "Tput User" in pt.raw.get("notes", ""):
        out = [m for m in out if m != "out_tps_per_gpu"]
    return out


def worst(values: list[float]) -> float:
    """The ratio farthest from 1 either way."""
    return max(values, key=lambda r: abs(math.log(r)))


def summary_rows(results: list[tuple[Point, dict[str, float]]], group) -> list[tuple]:
    """(group, metric, n, median ratio, worst ratio) per group and metric; anomalies left out."""
    buckets: dict = {}
    for pt, ratios in results:
        for m, r in ratios.items():
            if (pt.id, m) in ANOMALIES:
                continue
            buckets.setdefault((group(pt), m), []).append(r)
    return [(g, m, len(v), statistics.median(v), worst(v)) for (g, m), v in sorted(buckets.items(), key=lambda kv: (str(kv[0][0]), METRICS.index(kv[0][1])))]


# the goal on held-out points: (median within, worst within) as factors
GOAL = {"tpot_mean_ms": (1.2, 2.0), "ttft_mean_ms": (1.5, 3.0), "out_tps_per_gpu": (1.2, 2.0)}


def goal_met(metric: str, median: float, worst_ratio: float) -> bool:
    med, bad = GOAL[metric]
    return 1 / med <= median <= med and 1 / bad <= worst_ratio <= bad
