"""How far the latency model's figures land from published runs like the plan at hand.

``planner/serving_accuracy.json`` (written by scripts/fit_serving.py) holds, for every point of the
measured-serving reference set, its regime (dense or MoE, 4-bit integer weights or not, TP,
concurrency band, GPU generation, engine) and planner / measured for TPOT, TTFT and output tokens/s per GPU. :func:`band` picks the
points in a plan's regime and says how far off the model was there, for the app, the CLI and the
PDF to print beside each figure ("±18 % on points like this one, n=12"); outside every measured
regime it returns None and :func:`warning` says why. A run on an engine release older than every one the
planner profiles (``older_release``: vLLM before 0.10, SGLang before 0.5) is no plan's look-alike and
never a band's point.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.results import Result

DATA_PATH = Path(__file__).with_name("serving_accuracy.json")
METRICS = {"tpot": "tpot_mean_ms", "ttft": "ttft_mean_ms", "throughput": "out_tps_per_gpu"}
FAMILIES = {"ampere": "NVIDIA Ampere", "ada": "NVIDIA Ada", "turing": "NVIDIA Turing", "hopper": "NVIDIA Hopper", "blackwell": "NVIDIA Blackwell", "blackwell-ultra": "NVIDIA Blackwell", "blackwell-rtx": "NVIDIA Blackwell (RTX)", "cdna3": "AMD CDNA", "cdna4": "AMD CDNA"}
# regime keys relaxed in this order when too few points share them all (arch and GPU family never);
# the weight format last: W4A16 kernels (AWQ / GPTQ / compressed-tensors int4) miss by far more
# than the rest (benchmarks/band_coverage.py), so their plans take their bands from their own runs
KEYS = ("weights", "arch", "family", "concurrency", "tp", "engine")
RELAX = ("engine", "tp", "concurrency", "weights")
MIN_POINTS = 3
COVERAGE = 0.8  # the band covers this share of the errors on a new point like the matched ones


def concurrency_band(clients: int) -> str:
    return "1" if clients <= 1 else ("2-16" if clients <= 16 else ("17-128" if clients <= 128 else ">128"))


def tp_band(tp: int, node_gpus: int = 8) -> str:
    return "1" if tp <= 1 else ("2-8" if tp <= node_gpus else "multi-node")


def weights_class(weight_format: str) -> str:
    """"int4" for 4-bit integer weights run by W4A16 kernels (the planner's weight format "int4"), else "other"."""
    return "int4" if weight_format == "int4" else "other"


def regime(moe: bool, tp: int, clients: int, generation: str, engine: str = "vllm", node_gpus: int = 8, weight_format: str = "bf16") -> dict[str, str]:
    """The regime labels a plan (or a measured point) is grouped by."""
    return {"weights": weights_class(weight_format), "arch": "MoE" if moe else "dense", "tp": tp_band(tp, node_gpus), "concurrency": concurrency_band(clients), "family": FAMILIES.get(generation, generation or "custom"), "engine": engine}


def cover_rank(n: int) -> int:
    """The index, in ``n`` sorted errors, of the one the band reaches: the ceil(COVERAGE (n + 1))-th
    smallest (the split-conformal rank), so a new point like the n lands inside as often as the band
    says; the largest where that rank passes n (n = 3: the largest of the three)."""
    return min(n, math.ceil(COVERAGE * (n + 1))) - 1


@dataclass(frozen=True, slots=True)
class Band(Result):
    """The model's error on measured points in a plan's regime, for one figure."""

    metric: str  # "tpot", "ttft" or "throughput"
    text: str  # what to print beside the figure
    n: int
    band_pct: float  # |planner / measured - 1| that COVERAGE of the points stay within, in %
    median_ratio: float  # planner / measured at the median of the held-out ratios the reach reads (a fitted run left out of its sweep's fit)
    worst_ratio: float  # farthest from 1 either way
    matched_on: tuple[str, ...]  # the regime keys the points share with the plan
    points: tuple[str, ...]
    side: str = ""  # "higher": every matched run measured above the shipped planner's figure; "lower": below; "": both ways
    shipped_median_ratio: float = 1.0  # planner / measured at the median with the shipped constants (fit_ratios: in sample for a fitted run)


@lru_cache(maxsize=1)
def load() -> dict:
    return json.loads(DATA_PATH.read_text())


def _matching(reg: dict[str, str], metric: str, points: list[dict] | None = None, keys: tuple[str, ...] = KEYS, relax: tuple[str, ...] = RELAX) -> tuple[list[dict], tuple[str, ...]]:
    key = METRICS[metric]
    rows = [p for p in (load()["points"] if points is None else points) if key in p["ratios"] and not p.get("anomalous", {}).get(key) and not p.get("older_release")]
    for drop in ((), *[relax[: i + 1] for i in range(len(relax))]):
        use = tuple(k for k in keys if k not in drop)
        found = [p for p in rows if all(p["regime"][k] == reg[k] for k in use)]
        if len(found) >= MIN_POINTS:
            return found, use
    return [], ()


def band(metric: str, reg: dict[str, str], points: list[dict] | None = None, keys: tuple[str, ...] = KEYS, relax: tuple[str, ...] = RELAX, rank=cover_rank) -> Band | None:
    """The error band of ``metric`` ("tpot", "ttft", "throughput") for a plan in regime ``reg``
    (:func:`regime`): the measured points sharing the most regime keys (all of them, then without
    engine, TP, concurrency and the weight class in turn; dense-or-MoE and GPU family always), at
    least ``MIN_POINTS`` of them; None where no such set exists (see :func:`warning`). The band is
    the :func:`cover_rank`-th smallest of their errors. ``points``, ``keys``, ``relax`` and ``rank``
    (other measured rows, matching rules and rank) are for benchmarks/band_coverage.py, which checks
    the rule leaving each point out."""
    found, keys = _matching(reg, metric, points, keys, relax)
    if not found:
        return None
    ratios = sorted(p["ratios"][METRICS[metric]] for p in found)
    errors = sorted(abs(math.log(r)) for r in ratios)
    cover = errors[rank(len(errors))]
    pct = (math.exp(cover) - 1.0) * 100.0
    worst = max(ratios, key=lambda r: abs(math.log(r)))
    # a band says how far, not which way: where every point missed the same way, say that too, and
    # by how much at the median (measured / planned), the figure a reader would scale the plan's by.
    # Which way is a fact about the planner as shipped, so it reads each run's shipped ratio (a fitted
    # run's in-sample fit_ratios, a held-out run's own), where the reach reads the held-out ``ratios``
    shipped = sorted(p.get("fit_ratios", p["ratios"])[METRICS[metric]] for p in found)
    median = statistics.median(ratios)
    shipped_median = statistics.median(shipped)
    side = "higher" if shipped[-1] < 1.0 else ("lower" if shipped[0] > 1.0 else "")
    said = f", all measured {side}, {(1 / shipped_median if side == 'higher' else shipped_median):.2g}x at the median" if side else ""
    return Band(
        metric=metric,
        text=f"±{pct:.0f} % on points like this one, n={len(found)}{said}",
        n=len(found),
        band_pct=pct,
        median_ratio=median,
        worst_ratio=worst,
        matched_on=keys,
        points=tuple(p["id"] for p in found),
        side=side,
        shipped_median_ratio=shipped_median,
    )


FLAG_FACTOR = 1.5  # a one-sided band whose median misses by this much or more is said beside the headline figures
# per figure: its name, and the word for runs that measured it above the planner's (side "higher") and below
_NAMES = {"ttft": ("TTFT", "longer", "shorter"), "tpot": ("TPOT", "longer", "shorter"), "throughput": ("throughput", "higher", "lower")}


# the published runs whose load is beyond what memory admits without preemption (their plans are not
# admitted: dstack's DeepSeek-R1 on 8 x H200 under vLLM 0.7.4, 128 clients of 3,200-token prompts and
# 3,200 / 6,400 output tokens, benchmarks/fresh4_serving.json; tests/test_serving_plans.py checks no other is)
BEYOND_LIMIT_POINTS = ("j74-dstackr1", "j75-dstackr1")


def beyond_limit_caveat() -> str:
    """The sentence a plan whose load memory does not admit carries beside its latency: how far the
    only published runs beyond that limit landed (their TTFT, measured / planned); "" without them."""
    rows = {p["id"]: p for p in load()["points"]}
    runs = [rows[i] for i in BEYOND_LIMIT_POINTS if i in rows and rows[i]["ratios"].get("ttft_mean_ms")]
    if not runs:
        return ""
    factors = " and ".join(f"{1.0 / r['ratios']['ttft_mean_ms']:,.0f}x" for r in runs)
    first = runs[0]
    release = (first.get("older_release") or "").split(" ")[0]
    on = f"{first['model']} on {first['gpu']}" + (f" under vLLM {release}" if release else "")
    return (
        f"Beyond what memory admits without preemption the TTFT is a floor: the only published runs there ({on}, {len(runs)} runs) "
        f"measured {factors} the planner's TTFT, and their source blames the K/V cache's pressure (preemption and recomputation, which the planner does not model)."
    )


def longer_by(b: Band | None) -> float:
    """How many times longer than planned published runs like a plan measured a latency figure at
    their median, where every one of them measured it longer and by :data:`FLAG_FACTOR` or more (the
    factor :func:`caveat` names); 1.0 otherwise (no band, runs on both sides, or a small miss)."""
    if b is None or b.side != "higher":
        return 1.0
    factor = 1.0 / b.shipped_median_ratio
    return factor if factor >= FLAG_FACTOR else 1.0


def caveat(bands: dict[str, Band | None]) -> str:
    """One sentence for the headline figures when published runs like the plan all missed them the
    same way by :data:`FLAG_FACTOR` or more at the median ("" when none did): "Published runs like
    this one measured TTFT 1.9x and TPOT 4.6x longer than planned, and throughput 5.2x lower
    (n=3 each)." Latency longer (the planner was too fast) or shorter; throughput lower or higher."""
    parts: list[tuple[str, str]] = []  # (the figure with its factor, which way)
    ns = []
    for metric, (name, above, below) in _NAMES.items():
        b = bands.get(metric)
        if b is None or not b.side:
            continue
        factor = 1.0 / b.shipped_median_ratio if b.side == "higher" else b.shipped_median_ratio
        if factor < FLAG_FACTOR:
            continue
        parts.append((f"{name} {factor:.2g}x", above if b.side == "higher" else below))
        ns.append(b.n)
    if not parts:
        return ""
    groups: list[tuple[list[str], str]] = []  # consecutive figures that missed the same way share it
    for what, way in parts:
        if groups and groups[-1][1] == way:
            groups[-1][0].append(what)
        else:
            groups.append(([what], way))
    said = [" and ".join(whats) + f" {way}" for whats, way in groups]
    said[0] += " than planned"
    n = f"n={ns[0]} each" if len(set(ns)) == 1 and len(ns) > 1 else ("n=" + ", ".join(str(k) for k in ns))
    return "Published runs like this one measured " + ", and ".join(said) + f" ({n})."


def warning(metric: str, reg: dict[str, str]) -> str | None:
    """The sentence to show when :func:`band` has no band: which part of the regime no measured
    point covers (None when a band exists)."""
    if band(metric, reg) is not None:
        return None
    key = METRICS[metric]
    rows = [p for p in load()["points"] if key in p["ratios"]]
    if not any(p["regime"]["family"] == reg["family"] for p in rows):
        return f"no measured {metric} on {reg['family']} GPUs: this figure is the model's alone, outside every measured regime"
    if not any(p["regime"]["family"] == reg["family"] and p["regime"]["arch"] == reg["arch"] for p in rows):
        return f"no measured {metric} of a {reg['arch']} model on {reg['family']} GPUs: this figure is outside every measured regime"
    return f"fewer than {MIN_POINTS} measured {metric} points of a {reg['arch']} model on {reg['family']} GPUs: this figure is outside every measured regime"
