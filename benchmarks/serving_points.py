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

Each point is planned as published with ``compute_plan`` alone: its preset, GPU, TP / DP / EP
(DEP points as attention data-parallel ranks), weight format (NVFP4 checkpoints as ``nvfp4``),
K/V dtype, ISL / OSL, the engine (``serving_engine``) and the harness's engine settings (token
budget and running limit: vLLM's serve defaults, SGLang's chunked prefill, trtllm-bench's own
heuristic), the prefix cache the harness leaves warm. A closed-loop point's figures are the
plan's own (``plan.roofline``: a closed loop of its clients); an offline point is its plan's step
model run as the harness queues it (:func:`planner.plan.serving.offline` waves of what the plan
admits). ``predict`` redoes either from the plan's load setup, so the fit can try other constants.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import re
import statistics
from functools import lru_cache
from pathlib import Path

from planner import accuracy, latency
from planner.hardware import GIB, get_device
from planner.plan import compute_plan, make_inputs, prepare_model, serving
from planner.presets import load_preset

POINTS_PATH = Path(__file__).resolve().parents[2] / "shared" / "reference" / "measured_serving.json"
# published runs collected on 2026-12-06 after the constants of 40ddb99 were fitted (see its "about"),
# split by source before any refit with them (fixed once, like SPLITS): the fresh points of these
# sources join the fit ("fresh fit"), the others stay held out ("fresh held-out": no fit saw them)
FRESH_PATH = Path(__file__).resolve().with_name("fresh_serving.json")
FRESH_FIT_SOURCES = ("github.com/SemiAnalysisAI/InferenceX/pull/3288", "github.com/SemiAnalysisAI/InferenceX/pull/3363", "github.com/gpustack/gpustack/")
FRESH_FIT = "fresh fit"
FRESH = "fresh held-out"
# a second set, registered before it was collected (docs/serving_fresh2_plan.md): published runs
# collected on 2026-12-07 after the constants of 79a2ef5; held out whole, evaluated as shipped
FRESH2_PATH = Path(__file__).resolve().with_name("fresh2_serving.json")
FRESH2 = "fresh-2 held-out"
# ... split by source for a refit after that evaluation (docs/serving_fresh2_plan.md, addenda 1 and
# 2, fixed before any refit with the set ran): a refit candidate fits these sources' points, the
# others (InferenceX #3318 and #3113 on AMD, the two vLLM PRs) stay held out. No candidate was
# adopted, so the shipped constants never saw any of the set (every point keeps split FRESH)
FRESH2_FIT_SOURCES = ("github.com/sgl-project/sgl-cookbook", "github.com/SemiAnalysisAI/InferenceX/pull/538")
# a third set, registered before it was collected (docs/serving_fresh3_plan.md) to judge candidate D,
# frozen there: ROCm's serving fixed costs at this scale of CUDA's (M1 alone; scripts/fit_serving.py
# --candidate D); E, reported only: D's refit with the closed loop's start burst (M2)
FRESH3_PATH = Path(__file__).resolve().with_name("fresh3_serving.json")
FRESH3 = "fresh-3 held-out"
CANDIDATE_D = {"rocm_fixed_scale": 6.307}  # adopted (docs/serving_fresh3.md): hardware.AMD_FIXED_COST_SCALE
CANDIDATE_E = {"rocm_fixed_scale": 6.064}
BEFORE_D = {"rocm_fixed_scale": 1.5}  # the catalog's estimate the third set judged D against
# a fourth set, registered before it was collected (docs/serving_fresh4_plan.md) to judge candidate F:
# the shipped planner with M2 alone (START_BURST; no constant refitted)
FRESH4_PATH = Path(__file__).resolve().with_name("fresh4_serving.json")
FRESH4 = "fresh-4 held-out"
# a fifth set, registered before it was collected (docs/serving_fresh5_plan.md) to judge candidate W:
# F with every wave of a fixed-length SGLang closed loop queued as the first (WAVES; no constant refitted)
FRESH5_PATH = Path(__file__).resolve().with_name("fresh5_serving.json")
FRESH5 = "fresh-5 held-out"
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


def sweep_key(p: dict) -> tuple:
    return (p["url"], p["engine"], p["preset"], p["weight_dtype"], p["gpu"], p["tp"], p["ep"])


@lru_cache(maxsize=1)
def _held_out_points() -> frozenset[str]:
    """The middle point of every sweep of three or more points (in file order) outside the held-out GPU and engine."""
    sweeps: dict[tuple, list[str]] = {}
    for p in load()["points"]:
        if p["gpu"] in HELD_OUT_GPUS or p["engine"] in HELD_OUT_ENGINES:
            continue
        sweeps.setdefault(sweep_key(p), []).append(p["id"])
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
    """One published run with the plan of it."""

    raw: dict
    split: str
    engine: str
    weight_format: str
    moe_class: str | None  # latency.kernel_class: the fitted MoE kernel this point's experts use; None: 1
    dtype: str  # latency.kernel_dtype: the tensor-core dtype its GEMMs run in
    dep: bool  # attention data parallel + expert parallel
    plan: object  # the point's Plan (closed loop at its clients; offline: at one request)
    clients: int  # per rank: the closed loop's clients, or what an offline run keeps running
    requests: int  # offline runs: requests queued per rank (0: closed loop)
    gpus: int  # GPUs one rank uses (tp)
    multi_node: bool  # tensor parallelism across nodes (the fitted inter-node message latency applies)
    intra_latency_us: float  # the all-reduce's latency inside a node
    eager_prefill: bool = False  # the release ran prefill outside CUDA graphs (harness_eager_prefill)
    rocm: bool = False  # an AMD GPU: the serving fixed costs carry ROCm's fitted scale (rocm_fixed_scale)
    prompts: int = 0  # prompts the harness sends in all, every client starting at once (0: not stated; harness_prompts)

    @property
    def id(self) -> str:
        return self.raw["id"]

    @functools.cached_property
    def roof(self) -> latency.Roofline:
        """The plan's step model; for a release that ran prefill eagerly, with its launch floor (latency.eager_prefill_floor)."""
        roof = self.plan.roof
        return dataclasses.replace(roof, eager_prefill_s=latency.eager_prefill_floor(roof)) if self.eager_prefill else roof

    @property
    def recv_interval(self) -> int:
        """Decode steps between the scheduler's polls for new requests, as the harness launched it (a plan input: harness_recv_interval)."""
        return self.plan.inputs.recv_interval

    @property
    def setup(self):
        """The plan's load setup (with :attr:`roof`)."""
        setup = self.plan._load.setup
        return setup._replace(roof=self.roof) if self.eager_prefill else setup


def harness_cached_tokens(p: dict) -> int:
    """Prompt tokens the serving run finds cached from the run before it (tt-inference-server
    sweeps, see TT_SWEEP); 0 elsewhere."""
    if "cached_tokens" in p.get("harness", {}):
        return p["harness"]["cached_tokens"]
    if p["source"] != "tenstorrent" or p["isl"] not in TT_SWEEP:
        return 0
    i = TT_SWEEP.index(p["isl"])
    return TT_SWEEP[i - 1] if i else 0


# InferenceMAX's SGLang recipe for DeepSeek-R1 FP4 on B200 (SemiAnalysisAI/InferenceX
# benchmarks/dsr1_fp4_b200.sh, unchanged while its config ran the lmsysorg/sglang:v0.5.6 image,
# 2025-12-31 to 2026-03-25) launches the server with --scheduler-recv-interval 10 below 16 clients
# and 30 from 16 (beside --chunked-prefill-size 16384, --disable-radix-cache, --stream-interval 10,
# no speculative decoding). SGLang's SchedulerRecvSkipper then polls for new requests once every
# that many decode steps (an extend step counts 1,000, an idle loop 1: both poll at once).
INFERENCEX_SGLANG_RECV = ((16, 10), (math.inf, 30))  # (clients below, interval)


def harness_recv_interval(p: dict) -> int:
    """Decode steps between the scheduler's polls for new requests in the point's harness (1: every step, the engines' default)."""
    if "recv_interval" in p.get("harness", {}):
        return p["harness"]["recv_interval"]
    if p["source"] == "inferencex" and p["engine"] == "sglang":
        return next(interval for below, interval in INFERENCEX_SGLANG_RECV if p["concurrency"] < below)
    return 1


# SGLang releases that run every prefill (extend) batch outside CUDA graphs: CUDA graphs for decode,
# target-verify and idle batches only (ForwardMode.is_cuda_graph), piecewise prefill graphs opt-in
# (0.5.6's server_args: enable_piecewise_cuda_graph = False; they first appeared in 2025-10, PR #10062,
# after the tt-inference-server runs of 2025-07). 0.5.23 graphs prefill by default
# (cuda_graph_config.default_prefill_backend), so the planner's own SGLang plans keep 0.
SGLANG_EAGER_PREFILL_RELEASES = frozenset({"0.5.6", "(2025-07, not stated)"})


def harness_eager_prefill(p: dict) -> bool:
    """Whether the point's engine release ran prefill outside CUDA graphs (SGLANG_EAGER_PREFILL_RELEASES)."""
    if "eager_prefill" in p.get("harness", {}):
        return p["harness"]["eager_prefill"]
    return p["engine"] == "sglang" and p["engine_version"] in SGLANG_EAGER_PREFILL_RELEASES


# every closed-loop harness here starts all its clients at once (vLLM's benchmark_serving and
# `vllm bench serve` with --max-concurrency, InferenceX's, `sglang.bench_serving` at
# --request-rate inf): the first wave of prompts queues on an idle engine
# (docs/serving_fresh2_plan.md, addendum 2, M2)
_PROMPTS = (
    re.compile(r"request rate inf, (\d+) prompts"),  # the cookbook points' own summary of the run
    re.compile(r"--num-prompts?\s+(\d+)"),
)
_TEN_PER_CLIENT = re.compile(r"num-prompts\s*=\s*10\s*x\s*conc")  # InferenceX / InferenceMAX: 10 x clients


def harness_prompts(p: dict) -> int:
    """Prompts the point's closed-loop harness sent in all, as its notes state them (0: not stated)."""
    if "prompts" in p.get("harness", {}):
        return p["harness"]["prompts"]
    notes = p.get("notes", "")
    for pattern in _PROMPTS:
        if m := pattern.search(notes):
            return int(m.group(1))
    return 10 * p["concurrency"] if _TEN_PER_CLIENT.search(notes) else 0


def trt_requests(p: dict) -> int:
    """Requests one trtllm-bench run queued for the point's ISL / OSL."""
    for (isl, osl), n in TRT_REQUESTS.items():
        if abs(p["isl"] - isl) <= 0.1 * isl and abs(p["osl"] - osl) <= 0.1 * osl:
            return n
    return 3000


# trtllm-bench tunes max_batch_size / max_num_tokens only for these checkpoint formats
# (tensorrt_llm/bench/build/build.py TUNED_QUANTS: NVFP4, FP8, FP8 block scales, unquantized),
# at these bytes a weight (tuning.py BYTES_PER_ELEM); others (gpt-oss's MXFP4) take BuildConfig's
# max_batch_size 2,048 and max_num_tokens 8,192
TRT_TUNED = {"fp8": 1.0, "nvfp4": 0.5, "bf16": 2.0}
TRT_KV_FRACTION = 0.95  # --kv_cache_free_gpu_mem_fraction 0.95 (the overview's runs)


def trtllm_bench_settings(p: dict, model, device) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench's throughput run picks when none is given
    (tensorrt_llm/bench/build/tuning.py calc_engine_setting and finetune_setting): the requests of
    ISL + OSL tokens the whole TP group's memory holds after the weights, counting
    max(tp, K/V heads) heads of head_dim (hidden / heads without one) on every layer, rounded up
    optimistically; chunked prefill off, so max_num_tokens >= max ISL + max_batch_size
    (bench/benchmark/utils/general.py get_settings). Under attention DP both apply per rank."""
    fmt, tp = weight_format(p), p["tp"]
    cfg = model.config.get("text_config") or model.config  # ModelConfig reads text_config's fields too
    if fmt in TRT_TUNED:
        heads = max(tp, int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]))
        head = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
        kv_bytes = 1.0 if p["kv_dtype"] == "fp8" else 2.0
        per_token_gib = 2 * int(cfg["num_hidden_layers"]) * heads * head * kv_bytes / GIB
        params = model.weights("auto").total_params * (0.5 if fmt == "nvfp4" else 1.0)  # NVFP4 stores two weights a byte: safetensors counts bytes
        free = (device.cuda_memory_gib or device.memory_gib) * tp - params * TRT_TUNED[fmt] / GIB
        raw_bs = min(free * TRT_KV_FRACTION / (per_token_gib * (p["isl"] + p["osl"])), 4096)
        raw_tokens = min(raw_bs * (1 + p["isl"] / p["osl"]), 32768)
        bs = max(64, 32 * math.ceil(raw_bs / 32)) if raw_bs < 256 else (128 * math.ceil(raw_bs / 128) if raw_bs < 1024 else 256 * math.ceil(raw_bs / 256))
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256)) if raw_tokens < 4096 else (512 * math.ceil(raw_tokens / 512) if raw_tokens < 8192 else 1024 * math.ceil(raw_tokens / 1024))
    else:
        bs, tokens = 2048, 8192
    return bs, max(tokens, p["isl"] + bs)


def sglang_chunked_prefill(device) -> int:
    """SGLang 0.5's chunked_prefill_size for the GPU's memory (arg_groups/memory_hook.py
    handle_gpu_memory_settings): 2,048 / 4,096 / 4,096 / 8,192 / 8,192 / 16,384 below 20 / 35 /
    60 / 90 / 160 GiB / above (issue 22's reading of its source)."""
    gib = device.cuda_memory_gib or device.memory_gib
    return next(size for limit, size in ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192), (math.inf, 16384)) if gib < limit)


def engine_settings(p: dict, model, device) -> tuple[int, int | None, str]:
    """(token budget a step, running limit, source) of the harness's engine on this GPU; a point's
    ``harness`` (fresh points: the launch flags its source gives) overrides either."""
    h = p.get("harness", {})
    budget, running, source = _engine_defaults(p, model, device)
    if "max_batched_tokens" in h or "max_num_seqs" in h:
        return h.get("max_batched_tokens", budget), h.get("max_num_seqs", running), "the harness's launch flags"
    return budget, running, source


def _engine_defaults(p: dict, model, device) -> tuple[int, int | None, str]:
    engine = ENGINE[p["engine"]]
    if engine == "trtllm":
        bs, tokens = trtllm_bench_settings(p, model, device)
        return tokens, bs, "trtllm-bench's heuristic"
    if engine == "sglang":
        return sglang_chunked_prefill(device), None, "SGLang's chunked_prefill_size"
    from planner.engines.vllm_memory import batch_defaults

    d = batch_defaults(device, p.get("harness", {}).get("vllm_release") or VLLM_RELEASE[p["source"]], "vllm serve")
    return d.max_num_batched_tokens, d.max_num_seqs, d.source


# the vLLM release of each harness: tt-inference-server's 2025-07 sweeps ran vLLM 0.10, InferenceMAX's
# 2026-03 image a 0.1x-0.3x release (the batch defaults are the same from 0.10 on for these GPUs below 160 GiB)
VLLM_RELEASE = {"tenstorrent": "0.10", "inferencex": "0.19"}


@lru_cache(maxsize=64)
def point(index: int) -> Point:
    p = load()["points"][index]
    return plan_point(p, split(p))


def plan_point(p: dict, split: str) -> Point:
    """The plan of one published run (a measured_serving.json or fresh_serving.json point)."""
    engine = ENGINE[p["engine"]]
    device = get_device(p["gpu"])
    fmt = weight_format(p)
    dep = "dep" in p["weights"].lower()
    model = prepare_model(load_preset(p["preset"]))
    budget, max_running, _source = engine_settings(p, model, device)
    closed = p["mode"] == "closed_loop"
    tp, dp = (1, p["tp"]) if dep else (p["tp"], 1)
    cached = harness_cached_tokens(p)
    base = dict(
        gpu=p["gpu"], tp=tp, dp=dp, gpu_count=p["tp"], ep=p["ep"], input_tokens=p["isl"], output_tokens=p["osl"], kv_dtype=p["kv_dtype"],
        weight_dtype="nvfp4" if fmt == "nvfp4" else p["weight_dtype"], serving_engine=engine, max_batched_tokens=budget, max_num_seqs=max_running,
    )  # fmt: skip
    if engine == "trtllm":
        base["headroom_bp"] = TRT_HEADROOM_BP
    if closed and harness_recv_interval(p) != 1:  # the harness's --scheduler-recv-interval (SGLang's serving costs only)
        base["recv_interval"] = harness_recv_interval(p)
    h = p.get("harness", {})
    if h.get("batch_wait_iters"):  # TensorRT-LLM's batch waiting, as the recipe sets it (its serving costs only)
        base.update(batch_wait_iters=h["batch_wait_iters"], batch_wait_tokens_ratio=h.get("batch_wait_tokens_ratio", 0.0))
    if cached:  # the previous run's prompts, served from the prefix cache
        base.update(shared_prefix_tokens=cached, prefix_hit_rate=1.0)
    ranks = p["tp"] if dep else 1
    if closed:
        clients, requests = max(1, math.ceil(p["concurrency"] / ranks)), 0
        plan = compute_plan(make_inputs(**base, sequences=clients * ranks), model)
    else:  # offline max throughput: every request queued; the engine runs what memory and its batch limit admit
        plan = compute_plan(make_inputs(**base, sequences=ranks), model)
        requests = math.ceil(trt_requests(p) / ranks)
        clients = max(1, min(plan._ceiling.per_replica, max_running or plan._ceiling.per_replica, requests))
    intra = device.link_at(min(p["tp"], device.node_gpus))[1]
    return Point(
        raw=p,
        split=split,
        engine=engine,
        weight_format=fmt,
        moe_class=latency.kernel_class(fmt, device.generation, engine) if plan.roof.num_experts else None,
        dtype=latency.kernel_dtype(fmt, device.generation, engine),
        dep=dep,
        plan=plan,
        clients=clients,
        requests=requests,
        gpus=tp,
        multi_node=p["tp"] > device.node_gpus,
        intra_latency_us=intra,
        eager_prefill=harness_eager_prefill(p),
        rocm=device.vendor == "amd",
        prompts=harness_prompts(p) if closed else 0,
    )


def points() -> list[Point]:
    return [point(i) for i in range(len(load()["points"]))]


@functools.cache
def _read(path: Path) -> dict:
    """A collected set's file, read once."""
    return json.loads(path.read_text())


@functools.cache
def _held_out_whole(path: Path, split: str) -> tuple[Point, ...]:
    """Every point of a set held out whole (the second, third and fourth), planned as the reference points are."""
    return tuple(plan_point(p, split) for p in _read(path)["points"])


def load_fresh() -> dict:
    return _read(FRESH_PATH)


def fresh_split(p: dict) -> str:
    """A fresh point's split: FRESH_FIT for the sources FRESH_FIT_SOURCES names, FRESH (held out) for the rest."""
    return FRESH_FIT if any(src in p["url"] for src in FRESH_FIT_SOURCES) else FRESH


@lru_cache(maxsize=1)
def fresh_points() -> tuple[Point, ...]:
    """Every fresh point (benchmarks/fresh_serving.json), planned as the reference points are."""
    return tuple(plan_point(p, fresh_split(p)) for p in load_fresh()["points"])


def held_out_fresh() -> list[Point]:
    """The fresh points no fit saw."""
    return [pt for pt in fresh_points() if pt.split == FRESH]


def load_fresh2() -> dict:
    return _read(FRESH2_PATH)


def fresh2_points() -> tuple[Point, ...]:
    """The second fresh set (benchmarks/fresh2_serving.json), never fitted by the shipped constants."""
    return _held_out_whole(FRESH2_PATH, FRESH2)


def in_fresh2_fit_part(pt: Point) -> bool:
    """Whether a refit candidate may fit the second-set point (its source is one of FRESH2_FIT_SOURCES)."""
    return any(src in pt.raw["url"] for src in FRESH2_FIT_SOURCES)


def load_fresh3() -> dict:
    return _read(FRESH3_PATH)


def fresh3_points() -> tuple[Point, ...]:
    """The third fresh set (benchmarks/fresh3_serving.json), held out whole."""
    return _held_out_whole(FRESH3_PATH, FRESH3)


def load_fresh4() -> dict:
    return _read(FRESH4_PATH)


def fresh4_points() -> tuple[Point, ...]:
    """The fourth fresh set (benchmarks/fresh4_serving.json), held out whole."""
    return _held_out_whole(FRESH4_PATH, FRESH4)


def load_fresh5() -> dict:
    return _read(FRESH5_PATH)


def fresh5_points() -> tuple[Point, ...]:
    """The fifth fresh set (benchmarks/fresh5_serving.json), held out whole; none before it is collected."""
    return _held_out_whole(FRESH5_PATH, FRESH5) if FRESH5_PATH.exists() else ()


def ratios_waves(pt: Point, engines: frozenset[str]) -> dict[str, float]:
    """planner / measured of ``pt`` with the wave candidate of ``engines`` (:data:`WAVES`; empty: F, shipped)."""
    with waves(engines):
        return ratios(pt)


@contextlib.contextmanager
def waves(engines: frozenset[str]):
    """:data:`WAVES` set to ``engines`` inside the block, as :func:`start_burst` sets its flag."""
    global WAVES
    was, WAVES = WAVES, engines
    try:
        yield
    finally:
        WAVES = was


def ratios_at(pt: Point, burst: bool) -> dict[str, float]:
    """planner / measured of ``pt`` with the closed loop's start burst (M2, :data:`START_BURST`) on or
    off: the fourth set judged candidate F (on) against the planner before it (off)."""
    with start_burst(burst):
        return ratios(pt)


@contextlib.contextmanager
def start_burst(on: bool):
    """:data:`START_BURST` set to ``on`` inside the block (the fit runs with it off: the steady state)."""
    global START_BURST
    was, START_BURST = START_BURST, on
    try:
        yield
    finally:
        START_BURST = was


# the earliest releases the planner has profiles for (planner/engines: vLLM's RELEASES start at 0.10,
# SGLang's serving costs are 0.5.x's): a run on an older release is reported, never a band's point
PROFILED_FROM = {"vllm": (0, 10), "sglang": (0, 5)}


def older_release(p: dict) -> bool:
    """Whether the run's stated engine version precedes every release the planner profiles (PROFILED_FROM)."""
    floor = PROFILED_FROM.get(ENGINE.get(p["engine"], ""))
    m = re.match(r"v?(\d+)\.(\d+)", p.get("engine_version", ""))
    return bool(floor and m and (int(m.group(1)), int(m.group(2))) < floor)


def never_fitted() -> list[Point]:
    """Every point the shipped constants never saw: the first set's held-out sources and the whole second to fifth sets."""
    return held_out_fresh() + list(fresh2_points()) + list(fresh3_points()) + list(fresh4_points()) + list(fresh5_points())


def candidate_ratios(pt: Point, name: str) -> dict[str, float]:
    """planner / measured of ``pt`` under candidate D or E (docs/serving_fresh3_plan.md) or the model
    the third set judged them against ("before D": the catalog's 1.5): the shipped constants with that
    ROCm scale (an NVIDIA point as shipped; D the planner shipped until F), E with the start burst too
    (the third set ran before F: D and "before D" without it)."""
    extra = {"D": CANDIDATE_D, "E": CANDIDATE_E, "before D": BEFORE_D}[name]
    with start_burst(name == "E"):
        return ratios(pt, with_fit(pt, {**latency.SERVING_FIT, **extra}, dict(latency.KERNEL_FIT)))


# a decode step does not get faster with a bigger batch: within one series of a source, a mean TPOT
# this much above the TPOT at more clients breaks that (reported beside the goal, never dropped)
TPOT_SLACK = 1.2


def _series(p: dict) -> tuple:
    return (p["url"], p["engine"], p["engine_version"], p["preset"], p["weight_dtype"], p["kv_dtype"], p["gpu"], p["tp"], p["ep"], p["isl"], p["osl"])


def tpot_breaks(pts: list[Point]) -> list[tuple[str, str]]:
    """(point, why) for every point whose measured TPOT exceeds TPOT_SLACK x the TPOT its own series
    measures at more clients (docs/serving_fresh2_plan.md's data check)."""

    def tpot(pt: Point) -> float:
        return pt.raw["measured"]["tpot_mean_ms"]

    series: dict[tuple, list[Point]] = {}
    for pt in pts:
        if pt.raw["mode"] == "closed_loop" and pt.raw["measured"].get("tpot_mean_ms"):
            series.setdefault(_series(pt.raw), []).append(pt)
    out = []
    for members in series.values():
        for pt in members:
            low = min((q for q in members if q.raw["concurrency"] > pt.raw["concurrency"]), key=tpot, default=None)
            if low is not None and tpot(pt) > TPOT_SLACK * tpot(low):
                out.append((pt.id, f"TPOT {tpot(pt):g} ms at {pt.raw['concurrency']} clients, {tpot(low):g} ms at {low.raw['concurrency']} ({low.id})"))
    return out


def fitted_points() -> list[Point]:
    """What scripts/fit_serving.py fits the shipped constants on: every reference point and the fresh-fit points."""
    return points() + [pt for pt in fresh_points() if pt.split == FRESH_FIT]


def with_fit(pt: Point, serving: dict[str, float] | None = None, kernels: dict[str, float] | None = None) -> latency.Roofline:
    """The point's step model with other serving constants (``serving``: SERVING_FIT keys) and
    kernel scales (``kernels``: KERNEL_FIT keys): what ``build_roofline`` would build with them."""
    roof = pt.roof
    if serving is not None:
        roof = dataclasses.replace(roof, eff=latency.serving_efficiency(pt.engine, serving))
        if pt.rocm and "rocm_fixed_scale" in serving:  # a refit candidate's M1: the catalog's AMD fixed_cost_scale, and the eager launches at that scale (latency.eager_prefill_floor)
            roof = dataclasses.replace(roof, fixed_scale=serving["rocm_fixed_scale"])
            if pt.eager_prefill:
                roof = dataclasses.replace(roof, eager_prefill_s=latency.eager_prefill_floor(roof))
        if pt.multi_node and "scaleout_message_s" in serving:
            roof = dataclasses.replace(roof, link_latency_s=(pt.intra_latency_us + serving["scaleout_message_s"] * 1e6) * 1e-6)  # as Device.link_at and build_roofline compute it
    if kernels is not None:
        if pt.moe_class:
            roof = dataclasses.replace(roof, moe_kernel=kernels[pt.moe_class])
        if pt.weight_format == "int4":
            roof = dataclasses.replace(roof, format_layer_s=kernels["int4_layer_s"])
        if pt.dtype == "fp8":
            roof = dataclasses.replace(roof, compute_scale=pt.roof.compute_scale / latency.compute_scale("fp8") * kernels["gemm_fp8"])
    return roof


def predict(pt: Point, roof: latency.Roofline | None = None) -> dict[str, float]:
    """The planner's figures for the point's measured quantities: TTFT and TPOT (ms) and output
    tokens/s per GPU (tenstorrent's per-user rate 1000 / TPOT where the point says so), from the
    plan's load setup with ``roof`` (default the plan's own step model): the closed loop of its
    clients, or the offline run of its harness's requests in waves of what the plan admits."""
    setup = pt.setup if roof is None else pt.setup._replace(roof=roof)
    p = pt.raw
    if pt.requests:
        full, rest = divmod(pt.requests, pt.clients)
        wave = serving.offline(setup, pt.clients)
        last = serving.offline(setup, rest) if rest else None
        duration = full * wave.e2e_ms + (last.e2e_ms if last else 0.0)
        return {"ttft_mean_ms": wave.ttft_ms, "tpot_mean_ms": wave.tpot_ms, "out_tps_per_gpu": pt.requests * p["osl"] / (duration / 1e3) / pt.gpus}
    fig = serving.closed(setup, pt.clients)
    tps = fig.output_tokens_per_s / pt.gpus
    if "Tput User" in p.get("notes", ""):
        tps = 1000.0 / fig.tpot_ms
    return {"ttft_mean_ms": start_burst_ttft_ms(pt, setup, fig.ttft_ms), "tpot_mean_ms": fig.tpot_ms, "out_tps_per_gpu": tps}


# M2 (docs/serving_fresh2_plan.md, addendum 2): a run whose harness states its prompt count N is compared
# with the mean TTFT over N prompts, the first C queued at once (serving.benchmark_ttft_ms). Candidate F,
# adopted by the fourth set (docs/serving_fresh4.md); the constants stay fitted on the steady state
# (scripts/fit_serving.py fits with it off: steady_state), so F refitted nothing
START_BURST = True


def start_burst_ttft_ms(pt: Point, setup, steady_ms: float) -> float:
    """M2 (:data:`START_BURST`): the mean TTFT of the point's harness, which starts its ``C`` clients
    at once and sends ``N`` prompts in all (:attr:`Point.prompts`), as the planner computes it
    (serving.benchmark_ttft_ms); ``steady_ms`` where the harness states no ``N``."""
    c, n = pt.clients, pt.prompts * pt.clients // max(1, pt.raw["concurrency"] or 1)  # per rank
    if pt.engine in WAVES and waves_apply(pt):
        return serving.waves_ttft_ms(setup, c, n, steady_ms)
    return serving.benchmark_ttft_ms(setup, c, n, steady_ms) if START_BURST else steady_ms


# candidates registered for the fifth set (docs/serving_fresh5_plan.md): the engines whose fixed-length
# closed loops queue every wave as the first one. W: SGLang (its scheduler runs a waiting prefill before
# any decode); W2 (the addendum): vLLM too (the next prompts reach the scheduler together after the
# API server's lag). Empty: F, shipped
WAVES: frozenset[str] = frozenset()
W_ENGINES, W2_ENGINES = frozenset({"sglang"}), frozenset({"sglang", "vllm"})


def simulated_ttft_ms(pt: Point) -> float:
    """Candidate S (docs/serving_fresh6_plan.md, registered): the run's benchmark simulated step by step on
    the plan's own step model (planner.simulate.from_plan), its C clients per rank sending its N prompts
    per rank at the run's fixed lengths, each next prompt reaching the scheduler the API server's time after
    the last ended; vLLM's chunked policy, SGLang's prefill-first, at the run's token budget. The mean TTFT
    as the benchmark prints it (the preprocessing added)."""
    from planner import simulate as sim

    n = max(1, pt.prompts * pt.clients // max(1, pt.raw["concurrency"] or 1))
    policy = "prefill-first" if pt.engine == "sglang" else "chunked"
    return sim.benchmark_ttft_ms(pt.plan, sim.simulate_benchmark(pt.plan, pt.clients, n, policy, pt.setup.budget))


def waves_apply(pt: Point) -> bool:
    """Whether a wave candidate may apply to the run: SGLang or vLLM on a profiled release, a closed loop
    whose harness states its prompt count and draws fixed prompt and output lengths
    (``harness.fixed_lengths``, the lead's reading of the source)."""
    fixed = bool(pt.raw.get("harness", {}).get("fixed_lengths"))
    return pt.engine in W2_ENGINES and bool(pt.prompts) and not pt.requests and fixed and not older_release(pt.raw)


METRICS = ("tpot_mean_ms", "ttft_mean_ms", "out_tps_per_gpu")
# measured figures the source itself flags as anomalous: shown, left out of the goal and the fit
ANOMALIES = {("p09-inferencex", "ttft_mean_ms"): "the source flags conc=64 TTFT 5.7 s as an anomaly (queueing)"}


def ratios(pt: Point, roof: latency.Roofline | None = None) -> dict[str, float]:
    """planner / measured for each quantity the point measured."""
    pred = predict(pt, roof)
    meas = pt.raw["measured"]
    return {m: pred[m] / meas[m] for m in METRICS if meas.get(m)}


def median_abs_log(results: list[tuple[Point, dict[str, float]]]) -> dict[str, float]:
    """Median |log(planner / measured)| per metric of ``results`` (figures the source flags left out;
    a metric no point measured is absent): what the refit and third-set rules compare."""
    out = {}
    for m in METRICS:
        v = [abs(math.log(r[m])) for pt, r in results if m in r and m not in pt.raw.get("anomalies", {})]
        if v:
            out[m] = statistics.median(v)
    return out


def regime(pt: Point) -> dict[str, str]:
    """The regime labels the accuracy table groups by (planner.accuracy.regime): as a plan of the
    same shape labels itself (GPUs a replica, clients a replica)."""
    p = pt.raw
    device = get_device(p["gpu"])
    return accuracy.regime(bool(pt.roof.num_experts), p["tp"], p["concurrency"] or pt.clients * (p["tp"] if pt.dep else 1), device.generation, pt.engine, device.node_gpus, pt.weight_format)


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
            if (pt.id, m) in ANOMALIES or m in pt.raw.get("anomalies", {}):
                continue
            buckets.setdefault((group(pt), m), []).append(r)
    return [(g, m, len(v), statistics.median(v), worst(v)) for (g, m), v in sorted(buckets.items(), key=lambda kv: (str(kv[0][0]), METRICS.index(kv[0][1])))]


# the goal on held-out points: (median within, worst within) as factors
GOAL = {"tpot_mean_ms": (1.2, 2.0), "ttft_mean_ms": (1.5, 3.0), "out_tps_per_gpu": (1.2, 2.0)}


def goal_met(metric: str, median: float, worst_ratio: float) -> bool:
    med, bad = GOAL[metric]
    return 1 / med <= median <= med and 1 / bad <= worst_ratio <= bad
