"""Planner vs published end-to-end serving runs: TPOT, TTFT and output tokens/s per GPU.

    .venv/bin/python -m benchmarks.bench_serving_accuracy [--points] [--cv]

Runs every point of ../shared/reference/measured_serving.json through the planner
(benchmarks/serving_points.py: one ``compute_plan`` a point, its closed loop or the offline run of
its harness) and prints planner / measured by regime (dense/MoE, TP, concurrency band, GPU
generation, engine) for the shipped constants (fitted on every point, in sample), then the
held-out estimates scripts/fit_serving.py recorded in planner/serving_accuracy.json: the
pre-registered split (fit / held-out GPU / held-out engine / held-out point, fixed before any
fitting; docs/serving_fit.md) and leave-one-group-out cross-validation by engine, GPU and sweep;
then the fresh points (benchmarks/fresh_serving.json: published runs collected after the constants
were fitted, never fitted) with the shipped constants and with the pre-registered fit's; then the
second fresh set (benchmarks/fresh2_serving.json, registered in docs/serving_fresh2_plan.md before
it was collected) the same way, and the registered data check (TPOT falling as clients rise).
``--cv`` recomputes the cross-validation here (scipy; minutes). Goal on held-out points: TPOT
median within 1.2x and worst within 2x, TTFT 1.5x / 3x, throughput 1.2x / 2x. ``--points`` also
prints every point; ``--fresh-doc`` writes docs/serving_fresh.md (the first set's tables; docs/serving_fresh2.md
is the record of the second set's one evaluation, written by this script's fresh2_doc at b753f4a). The third
fresh set (benchmarks/fresh3_serving.json, docs/serving_fresh3_plan.md) is run under the planner it judged
candidate D against (the catalog's 1.5 ROCm scale), D (shipped since) and E; ``--fresh3-doc`` reproduces its
record, docs/serving_fresh3.md.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from benchmarks import serving_points as S
from planner import accuracy, latency

GROUPS = {
    "split": lambda pt: pt.split,
    "dense/MoE": lambda pt: S.regime(pt)["arch"],
    "TP": lambda pt: S.regime(pt)["tp"],
    "concurrency": lambda pt: S.regime(pt)["concurrency"],
    "GPU generation": lambda pt: S.regime(pt)["family"],
    "engine": lambda pt: pt.engine,
}


def _recorded(pts: list[S.Point], key: str, cv: str | None = None) -> list[tuple[S.Point, dict[str, float]]]:
    """The ratios scripts/fit_serving.py recorded for every point under ``key`` (or its ``cv`` fold)."""
    wanted = {pt.id for pt in pts}
    rows = {p["id"]: (p["cv"][cv] if cv else p[key]) for p in accuracy.load()["points"] if p["id"] in wanted}
    return [(pt, rows[pt.id]) for pt in pts]


def _shipped_and_preregistered(pts: list[S.Point]) -> tuple[list, list]:
    """planner / measured of ``pts`` with the shipped constants, and with the pre-registered fit's as
    scripts/fit_serving.py recorded them (as for the reference points)."""
    return [(pt, S.ratios(pt)) for pt in pts], _recorded(pts, "preregistered")


def fresh2_results() -> tuple[list, list]:
    """The second fresh set (docs/serving_fresh2_plan.md) with the shipped and the pre-registered constants."""
    return _shipped_and_preregistered(list(S.fresh2_points()))


def fresh3_results() -> dict[str, list]:
    """The third fresh set (docs/serving_fresh3_plan.md) under the planner it judged D against
    ("before D", the catalog's 1.5 ROCm scale), candidate D (the shipped planner since) and E."""
    pts = list(S.fresh3_points())
    return {"before D": [(pt, S.candidate_ratios(pt, "before D")) for pt in pts], "D": [(pt, S.candidate_ratios(pt, "D")) for pt in pts], "E": [(pt, S.candidate_ratios(pt, "E")) for pt in pts]}


def fresh3_decision(results: dict[str, list]) -> tuple[bool | None, list[str]]:
    """docs/serving_fresh3_plan.md's rule, decided once: D replaces the shipped AMD scale if no metric's
    median |log| is worse than shipped by more than 0.01, their sum is lower, and the set holds at
    least 8 AMD runs (fewer: None, no decision). Returns the decision and its reasons."""
    base, cand = S.median_abs_log(results["before D"]), S.median_abs_log(results["D"])
    amd = sum(pt.rocm for pt, _r in results["D"])
    why = [f"{m}: shipped {base[m]:.4f}, D {cand[m]:.4f}" for m in base]
    why.append(f"sum: shipped {sum(base.values()):.4f}, D {sum(cand.values()):.4f}; AMD runs {amd}")
    if amd < 8:
        return None, why + ["fewer than 8 AMD runs: no decision"]
    worse = [m for m in base if cand[m] > base[m] + 0.01]
    ok = not worse and sum(cand.values()) < sum(base.values())
    return ok, why + ([f"worse by more than 0.01: {', '.join(worse)}"] if worse else []) + [f"D {'replaces' if ok else 'does not replace'} the shipped AMD scale"]


def _record_head(title: str, data: dict, plan: str, name: str, decision: bool | None, why: list[str], over: str, goal_note: str) -> list[str]:
    """The opening of a fresh set's record: its title, what the set is, where it was registered, the
    one decision on candidate ``name`` with its reasons, and the accuracy table's header."""
    lines = [title, "", data.get("about", ""), ""]
    lines += [f"Registered before collection in {plan} (the models under test, the rule, what is reported).", ""]
    lines += ["## The decision", "", f"**{f'{name} adopted' if decision else f'{name} not adopted' if decision is False else 'No decision'}.** Median |log(planner / measured)|{over}:", ""]
    lines += [f"* {w}" for w in why]
    lines += ["", "## Accuracy (planner / measured; worst = farthest from 1)", "", f"The issue's goal: TPOT median within 1.2x and worst within 2x, TTFT 1.5x / 3x, throughput 1.2x / 2x.{goal_note}", ""]
    return lines + ["| set | metric | n | median | worst | goal |", "|---|---|---|---|---|---|"]


def _record_regimes(results: dict[str, list], names: tuple[tuple[str, str], ...]) -> list[str]:
    """A record's tables by regime (vendor, the bench's groups, source, GPU, model), one per (results key, label)."""
    by = {"vendor": lambda pt: "AMD" if pt.rocm else "NVIDIA", **{k: v for k, v in GROUPS.items() if k != "split"}, "source": lambda pt: pt.raw["source"], "GPU": lambda pt: pt.raw["gpu"], "model": lambda pt: pt.raw["preset"]}
    lines: list[str] = []
    for name, label in names:
        lines += ["", f"### By regime, {label}", "", "| regime | metric | n | median | worst |", "|---|---|---|---|---|"]
        lines += _regime_rows(results[name], by)
    return lines


def _record_tail(data: dict, pts) -> list[str]:
    """A record's closing sections: what the selection rule left out, and how each run was launched."""
    lines = ["", "## Left out by the selection rule", ""]
    lines += [f"* {d.get('what', '')} ({d.get('url', '')}): {d['why']}" for d in data.get("left_out", [])]
    lines += ["", "## How each was launched and measured", ""]
    return lines + [f"* **{pt.id}**: {pt.raw['notes']}" for pt in pts]


def fresh3_doc(results: dict[str, list]) -> str:
    """docs/serving_fresh3.md: the third fresh set and the one decision it makes (docs/serving_fresh3_plan.md)."""
    data = S.load_fresh3()
    decision, why = fresh3_decision(results)
    lines = _record_head("# Third fresh set: the planner as shipped and candidate D on runs collected after D was frozen (written once by benchmarks/bench_serving_accuracy.py --fresh3-doc; a record, not regenerated)", data, "docs/serving_fresh3_plan.md", "D", decision, why, " on the whole set", "")
    for name, label in (("before D", "shipped planner"), ("D", "candidate D (ROCm scale 6.307)"), ("E", "candidate E (D with the start burst; reported only)")):
        lines += _goal_rows(label, results[name])
    lines += data_check("shipped planner", results["before D"])
    lines += _record_regimes(results, (("before D", "shipped planner"), ("D", "candidate D")))
    lines += ["", "## Points (planner / measured: shipped; D in brackets, where it differs)", ""]
    lines += ["| point | engine | model | GPU | TP/EP | ISL/OSL | clients | TPOT | TTFT | tok/s/GPU | source |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (pt, r), (_pt, rd) in zip(results["before D"], results["D"], strict=True):
        lines.append(_point_row(pt, [(f"{r[m]:.3f}" + (f" ({rd[m]:.3f})" if rd[m] != r[m] else "")) if m in r else "" for m in S.METRICS]))
    lines += _record_tail(data, S.fresh3_points())
    return "\n".join(lines) + "\n"


def fresh4_results() -> dict[str, list]:
    """The fourth fresh set (docs/serving_fresh4_plan.md) under the shipped planner and candidate F (M2 alone)."""
    pts = list(S.fresh4_points())
    return {"shipped": [(pt, S.ratios_at(pt, False)) for pt in pts], "F": [(pt, S.ratios_at(pt, True)) for pt in pts]}


def _stated(results: list) -> list:
    """The runs whose harness states its prompt count and that measured a mean TTFT the goal counts."""
    return [(pt, r) for pt, r in results if pt.prompts and "ttft_mean_ms" in r and "ttft_mean_ms" not in pt.raw.get("anomalies", {})]


def fresh4_decision(results: dict[str, list]) -> tuple[bool | None, list[str]]:
    """docs/serving_fresh4_plan.md's rule, decided once: F replaces the shipped closed-loop TTFT if, on the
    runs with a stated prompt count, TTFT's median |log| is lower; on the whole set neither TPOT's nor
    throughput's is worse by more than 0.01; and there are at least 10 such runs from 2 sources or more."""
    base_n, cand_n = _stated(results["shipped"]), _stated(results["F"])
    base_t, cand_t = S.median_abs_log(base_n)["ttft_mean_ms"], S.median_abs_log(cand_n)["ttft_mean_ms"]
    whole_b, whole_c = S.median_abs_log(results["shipped"]), S.median_abs_log(results["F"])
    sources = sorted({pt.raw["source"] for pt, _r in base_n})
    why = [f"ttft_mean_ms on the {len(base_n)} runs with a stated prompt count ({len(sources)} sources): shipped {base_t:.4f}, F {cand_t:.4f}"]
    why += [f"{m} on the whole set: shipped {whole_b[m]:.4f}, F {whole_c[m]:.4f}" for m in ("tpot_mean_ms", "out_tps_per_gpu") if m in whole_b]
    if len(base_n) < 10 or len(sources) < 2:
        return None, why + ["fewer than 10 such runs or one source: no decision"]
    worse = [m for m in ("tpot_mean_ms", "out_tps_per_gpu") if m in whole_b and whole_c[m] > whole_b[m] + 0.01]
    ok = cand_t < base_t and not worse
    return ok, why + ([f"worse by more than 0.01: {', '.join(worse)}"] if worse else []) + [f"F {'replaces' if ok else 'does not replace'} the shipped closed-loop TTFT"]


def fresh4_doc(results: dict[str, list]) -> str:
    """docs/serving_fresh4.md: the fourth fresh set and the one decision it makes (docs/serving_fresh4_plan.md)."""
    data = S.load_fresh4()
    decision, why = fresh4_decision(results)
    lines = _record_head("# Fourth fresh set: the planner as shipped and candidate F (the closed loop's start burst) on runs collected after F was registered (written by benchmarks/bench_serving_accuracy.py --fresh4-doc; the decision was taken once, and stands; the tables are the current planner's, regenerated when a later change moves a figure, and git keeps each version)", data, "docs/serving_fresh4_plan.md", "F", decision, why, "", " Anomalies the source flags are left out of the goal rows.")
    for name, label in (("shipped", "shipped planner"), ("F", "candidate F (start burst)")):
        lines += _goal_rows(f"{label}, whole set", results[name])
        lines += _goal_rows(f"{label}, runs with a stated prompt count", _stated(results[name]))
        lines += _goal_rows(f"{label}, without the two runs behind Modal's web endpoint", [(pt, r) for pt, r in results[name] if "achatbot" not in pt.raw["url"]])
    lines += data_check("shipped planner", results["shipped"])
    lines += _record_regimes(results, (("shipped", "shipped planner"), ("F", "candidate F")))
    lines += _points_table("shipped; F in brackets, where it differs", results["shipped"], results["F"])
    lines += _record_tail(data, S.fresh4_points())
    return "\n".join(lines) + "\n"


def fresh5_results() -> dict[str, list]:
    """The fifth fresh set (docs/serving_fresh5_plan.md) under F (shipped) and candidate W."""
    pts = list(S.fresh5_points())
    return {"F": [(pt, S.ratios_waves(pt, frozenset())) for pt in pts], "W": [(pt, S.ratios_waves(pt, S.W_ENGINES)) for pt in pts], "W2": [(pt, S.ratios_waves(pt, S.W2_ENGINES)) for pt in pts]}


def _w_counted(results: list, engine: str = "sglang") -> list:
    """The runs the fifth set's rules count for ``engine`` (W: SGLang; W2: vLLM): a wave candidate applies
    (fixed lengths, a stated prompt count, a profiled release: SGLang 0.5 / vLLM 0.10 or later), at least
    2 clients, a mean TTFT that is not a flagged anomaly."""
    return [(pt, r) for pt, r in _stated(results) if pt.engine == engine and S.waves_apply(pt) and (pt.raw["concurrency"] or 0) >= 2]


def _vllm_fixed(results: list) -> list:
    """vLLM closed loops the addendum's W2 rule counts (W leaves them as F)."""
    return _w_counted(results, "vllm")


def ttft_slope(results: list) -> float | None:
    """Least-squares slope of log(planner / measured TTFT) on log(clients): near 0 where the model's shape in the clients holds."""
    xy = [(math.log(pt.raw["concurrency"]), math.log(r["ttft_mean_ms"])) for pt, r in results if "ttft_mean_ms" in r]
    if len({x for x, _y in xy}) < 2:
        return None
    mx, my = sum(x for x, _y in xy) / len(xy), sum(y for _x, y in xy) / len(xy)
    return sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _y in xy)


def fresh5_decision(results: dict[str, list], name: str = "W") -> tuple[bool | None, list[str]]:
    """docs/serving_fresh5_plan.md's rules, each decided once: W (SGLang) or W2 (the addendum: vLLM)
    replaces F for the runs of its engine it applies to if, on those runs with at least 2 clients, TTFT's
    median |log| is lower; on the whole set neither TPOT's nor throughput's moves by more than 0.01; and
    there are at least 8 such runs from 2 publishers or more."""
    engine = "sglang" if name == "W" else "vllm"
    base_n, cand_n = _w_counted(results["F"], engine), _w_counted(results[name], engine)
    pubs = sorted({pt.raw["source"] for pt, _r in base_n})
    if not base_n:
        return None, [f"{name}: no {engine} run the rule counts: no decision"]
    base_t, cand_t = S.median_abs_log(base_n)["ttft_mean_ms"], S.median_abs_log(cand_n)["ttft_mean_ms"]
    whole_f, whole_w = S.median_abs_log(results["F"]), S.median_abs_log(results[name])
    why = [f"{name}: ttft_mean_ms on the {len(base_n)} {engine} runs the rule counts ({len(pubs)} publishers: {', '.join(pubs)}): F {base_t:.4f}, {name} {cand_t:.4f}"]
    why += [f"{name}: {m} on the whole set: F {whole_f[m]:.4f}, {name} {whole_w[m]:.4f}" for m in ("tpot_mean_ms", "out_tps_per_gpu") if m in whole_f]
    if len(base_n) < 8 or len(pubs) < 2:
        return None, why + [f"{name}: fewer than 8 such runs or one publisher: no decision"]
    moved = [m for m in ("tpot_mean_ms", "out_tps_per_gpu") if m in whole_f and abs(whole_w[m] - whole_f[m]) > 0.01]
    ok = cand_t < base_t and not moved
    return ok, why + ([f"moved by more than 0.01: {', '.join(moved)}"] if moved else []) + [f"{name} {'replaces' if ok else 'does not replace'} F for the {engine} runs it applies to"]


def fresh5_doc(results: dict[str, list]) -> str:
    """docs/serving_fresh5.md: the fifth fresh set and the one decision it makes (docs/serving_fresh5_plan.md)."""
    data = S.load_fresh5()
    decision, why = fresh5_decision(results)
    decision2, why2 = fresh5_decision(results, "W2")
    lines = _record_head("# Fifth fresh set: the planner as shipped (F) and candidates W and W2 (every wave of a fixed-length closed loop queues as the first: SGLang; SGLang and vLLM) on runs collected after both were registered (written once by benchmarks/bench_serving_accuracy.py --fresh5-doc; a record, not regenerated)", data, "docs/serving_fresh5_plan.md", "W", decision, why, "", " Anomalies the source flags are left out of the goal rows.")
    at = lines.index("## Accuracy (planner / measured; worst = farthest from 1)")
    lines[at:at] = [f"**{'W2 adopted' if decision2 else 'W2 not adopted' if decision2 is False else 'No decision on W2'}.**", ""] + [f"* {w}" for w in why2] + [""]
    for name, label in (("F", "F (shipped)"), ("W", "candidate W"), ("W2", "candidate W2")):
        lines += _goal_rows(f"{label}, whole set", results[name])
        lines += _goal_rows(f"{label}, the runs the rule counts", _w_counted(results[name]))
        lines += _goal_rows(f"{label}, vLLM fixed-length runs (the control; W leaves them)", _vllm_fixed(results[name]))
    lines += data_check("F (shipped)", results["F"])
    lines += ["", "## The shape in the clients", "", "Least-squares slope of log(planner / measured TTFT) on log(clients); near 0 where the model's shape holds.", ""]
    for name, label in (("F", "F (shipped)"), ("W", "candidate W"), ("W2", "candidate W2")):
        for what, subset in (("SGLang runs W counts", _w_counted(results[name])), ("vLLM runs W2 counts", _vllm_fixed(results[name]))):
            slope = ttft_slope(subset)
            lines.append(f"* {label}, {what}: " + (f"{slope:+.3f}" if slope is not None else "fewer than two client counts"))
    lines += _record_regimes(results, (("F", "F (shipped)"), ("W2", "candidate W2")))
    lines += _points_table("F; W2 in brackets, where it differs (W is W2 on SGLang runs)", results["F"], results["W2"])
    lines += _record_tail(data, S.fresh5_points())
    return "\n".join(lines) + "\n"


def _points_table(legend: str, base: list, other: list) -> list[str]:
    """A record's per-point table: planner / measured under ``base``, ``other``'s in brackets where it
    differs, an anomaly the source flags marked *."""
    lines = ["", f"## Points (planner / measured: {legend}; an anomaly the source flags marked *)", ""]
    lines += ["| point | engine | model | GPU | TP/EP | ISL/OSL | clients | TPOT | TTFT | tok/s/GPU | source |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (pt, r), (_pt, ro) in zip(base, other, strict=True):
        flag = pt.raw.get("anomalies", {})
        lines.append(_point_row(pt, [(f"{r[m]:.3f}" + (f" ({ro[m]:.3f})" if ro[m] != r[m] else "") + ("*" if m in flag else "")) if m in r else "" for m in S.METRICS]))
    return lines


def data_check(label: str, subset: list) -> list[str]:
    """The registered data check: points whose TPOT falls as clients rise in their own series, and the
    goal rows without them beside the headline (which keeps them)."""
    breaks = dict(S.tpot_breaks([pt for pt, _r in subset]))
    if not breaks:
        return [f"| {label}: no point breaks the data check | | | | | |"]
    rest = [(pt, r) for pt, r in subset if pt.id not in breaks]
    rows = [f"| {label}: data check flags {', '.join(f'{i} ({why})' for i, why in breaks.items())} | | | | | |"]
    return rows + _goal_rows(f"{label} without them (the headline keeps them)", rest)


def fresh_results() -> tuple[list, list]:
    """The first fresh set's held-out points with the shipped and the pre-registered constants."""
    return _shipped_and_preregistered(S.held_out_fresh())


def _point_row(pt: S.Point, cells: list[str]) -> str:
    p = pt.raw
    return f"| {pt.id} | {pt.engine} {p['engine_version']} | {p['preset']} ({pt.weight_format}) | {p['gpu']} | {p['tp']}/{p['ep']} | {p['isl']}/{p['osl']} | {p['concurrency']} | " + " | ".join(cells) + f" | {p['url']} |"


def _regime_rows(subset: list, groups: dict) -> list[str]:
    return [f"| {name}: {g} | {m} | {n} | {med:.3f} | {bad:.3f} |" for name, group in groups.items() for g, m, n, med, bad in S.summary_rows(subset, group)]


def _goal_rows(label: str, subset: list) -> list[str]:
    return [f"| {label} | {m} | {n} | {med:.3f} | {bad:.3f} | {'met' if S.goal_met(m, med, bad) else 'NOT met'} |" for _g, m, n, med, bad in S.summary_rows(subset, lambda pt: "all")]


def fresh_doc(shipped: list, pre: list, fitted: list) -> str:
    """docs/serving_fresh.md: the fresh points, their sources and how far the planner lands from them
    (``shipped`` / ``pre``: the held-out ones under the shipped and the pre-registered constants;
    ``fitted``: the fresh-fit ones under the shipped constants, in sample)."""
    about = S.load_fresh()["about"]
    lines = ["# Fresh serving points: the fit checked on runs it never saw (generated by benchmarks/bench_serving_accuracy.py --fresh-doc; do not edit)", "", about, ""]
    lines += ["Split by source before any fit used them (benchmarks/serving_points.py FRESH_FIT_SOURCES): the fresh-fit sources joined the", "shipped fit (scripts/fit_serving.py, docs/serving_fit.md); the held-out sources below were fitted by nothing. The held-out sources", "bring what the fit-side ones lack: another SGLang release on H200 (0.5.7, InferenceX issue #870), another GPU (B300, PR #3175)", "and another engine in serving mode on B200 (TensorRT-LLM 1.3 `trtllm-serve`, PR #3317).", ""]
    lines += ["## Accuracy (planner / measured; worst = farthest from 1)", "", "The issue's goal: TPOT median within 1.2x and worst within 2x, TTFT 1.5x / 3x, throughput 1.2x / 2x.", ""]
    lines += ["| set | metric | n | median | worst | goal |", "|---|---|---|---|---|---|"]
    lines += _goal_rows("held out: shipped constants", shipped) + _goal_rows("held out: pre-registered constants (reference fit split only)", pre)
    lines += _goal_rows("fresh-fit: shipped constants (in sample)", fitted)
    lines += ["", "### Held out, by regime, shipped constants", "", "| regime | metric | n | median | worst |", "|---|---|---|---|---|"]
    lines += _regime_rows(shipped, {k: v for k, v in GROUPS.items() if k != "split"})
    lines += ["", "## Held-out points (planner / measured: shipped constants; pre-registered in brackets)", ""]
    lines += ["| point | engine | model | GPU | TP/EP | ISL/OSL | clients | TPOT | TTFT | tok/s/GPU | source |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (pt, r), (_pt, rp) in zip(shipped, pre, strict=True):
        left_out = pt.raw.get("anomalies", {})
        lines.append(_point_row(pt, [f"{r[m]:.3f} ({rp[m]:.3f})" + (f" (left out: {left_out[m]})" if m in left_out else "") if m in r else "" for m in S.METRICS]))
    lines += ["", "## Fresh-fit points (planner / measured: shipped constants, in sample)", ""]
    lines += ["| point | engine | model | GPU | TP/EP | ISL/OSL | clients | TPOT | TTFT | tok/s/GPU | source |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_point_row(pt, [f"{r[m]:.3f}" if m in r else "" for m in S.METRICS]) for pt, r in fitted]
    lines += ["", "## How each was launched and measured", ""]
    lines += [f"* **{pt.id}**: {pt.raw['notes']}" for pt in S.fresh_points()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    pts = S.points()
    fitted = S.fitted_points()
    results = [(pt, S.ratios(pt)) for pt in pts]
    fresh_fit = [(pt, S.ratios(pt)) for pt in fitted if pt.split == S.FRESH_FIT]
    pre = _recorded(pts, "preregistered")
    cv = {name: _recorded(fitted, "", name) for name in ("engine", "GPU", "sweep")}
    if "--cv" in argv:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
        import fit_serving

        x = {**latency.SERVING_FIT, **latency.KERNEL_FIT}
        cv = fit_serving.cross_validate(fitted, x)
    print(f"measured points: {len(results)}; anomalies left out of the goal: {', '.join(f'{p} {m}' for p, m in S.ANOMALIES)}")
    print("\n| set | metric | n | median | worst | goal |\n|---|---|---|---|---|---|")
    sets = [("fit: shipped constants, reference points (in sample)", results), ("fit: shipped constants, fresh-fit points (in sample)", fresh_fit)]
    sets += [("pre-registered held-out", [(pt, r) for pt, r in pre if pt.split != "fit"])]
    sets += [("pre-registered held-out without SGLang", [(pt, r) for pt, r in pre if pt.split not in ("fit", "held-out engine")])]
    sets += [("pre-registered held-out, SGLang only", [(pt, r) for pt, r in pre if pt.split != "fit" and pt.engine == "sglang"])]
    sets += [(f"cross-validation: leave one {name} out", preds) for name, preds in cv.items()]
    fresh_shipped, fresh_pre = fresh_results()
    sets += [("fresh held-out, never fitted: shipped constants", fresh_shipped), ("fresh held-out, never fitted: pre-registered constants", fresh_pre)]
    fresh2_shipped, fresh2_pre = fresh2_results()
    sets += [("fresh-2 held-out, registered before collection: shipped constants", fresh2_shipped), ("fresh-2 held-out: pre-registered constants", fresh2_pre)]
    fresh3 = fresh3_results()
    sets += [("fresh-3 held-out, registered before collection: shipped planner (candidate D, adopted)", fresh3["D"]), ("fresh-3 held-out: candidate E (D with the start burst; reported only)", fresh3["E"])]
    fresh4 = fresh4_results()
    sets += [("fresh-4 held-out, registered before collection: shipped planner (candidate F, adopted)", fresh4["F"]), ("fresh-4 held-out: the planner F was judged against (no start burst)", fresh4["shipped"])]
    fresh5 = fresh5_results()
    sets += [("fresh-5 held-out, registered before collection: shipped planner (F; W and W2 undecided)", fresh5["F"]), ("fresh-5 held-out: candidate W2 (waves on SGLang and vLLM; reported only)", fresh5["W2"])]
    for label, subset in sets:
        print("\n".join(_goal_rows(label, subset)))
    for label, subset in (("fresh held-out", fresh_shipped), ("fresh-2 held-out", fresh2_shipped), ("fresh-3 held-out", fresh3["D"]), ("fresh-4 held-out", fresh4["F"]), ("fresh-5 held-out", fresh5["F"])):
        print("\n".join(data_check(label, subset)))
    by_regime = [("fit (reference and fresh-fit points)", results + fresh_fit), ("leave-one-sweep-out", cv["sweep"]), ("fresh held-out", fresh_shipped), ("fresh-2 held-out", fresh2_shipped), ("fresh-3 held-out", fresh3["D"]), ("fresh-4 held-out", fresh4["F"]), ("fresh-5 held-out", fresh5["F"])]
    for label, subset in by_regime:
        print(f"\n{label} by regime (planner / measured):\n\n| regime | metric | n | median | worst |\n|---|---|---|---|---|")
        print("\n".join(_regime_rows(subset, GROUPS)))
    if "--points" in argv:
        print("\n| point | split | engine | model | GPU | TP | clients | TPOT | TTFT | tok/s/GPU |\n|---|---|---|---|---|---|---|---|---|---|")
        for pt, r in results + fresh_fit + fresh_shipped + fresh2_shipped + fresh3["D"] + fresh4["F"] + fresh5["F"]:
            p = pt.raw
            cells = " | ".join(f"{r[m]:.3f}" if m in r else "" for m in S.METRICS)
            print(f"| {pt.id} | {pt.split} | {pt.engine} | {p['preset']} | {p['gpu']} | {p['tp']} | {p['concurrency'] or 'offline'} | {cells} |")

    if "--fresh-doc" in argv:
        docs = Path(__file__).resolve().parents[1] / "docs"
        (docs / "serving_fresh.md").write_text(fresh_doc(fresh_shipped, fresh_pre, fresh_fit))
    if "--fresh4-doc" in argv:  # the record of the one decision (docs/serving_fresh4_plan.md)
        (Path(__file__).resolve().parents[1] / "docs" / "serving_fresh4.md").write_text(fresh4_doc(fresh4_results()))
    if "--fresh5-doc" in argv:  # the record of the one decision (docs/serving_fresh5_plan.md)
        (Path(__file__).resolve().parents[1] / "docs" / "serving_fresh5.md").write_text(fresh5_doc(fresh5_results()))
    if "--fresh3-doc" in argv:  # the record of the one decision (docs/serving_fresh3_plan.md): reproduced, "before D" being the planner it judged D against
        (Path(__file__).resolve().parents[1] / "docs" / "serving_fresh3.md").write_text(fresh3_doc(fresh3))


if __name__ == "__main__":
    main()
