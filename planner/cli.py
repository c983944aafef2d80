"""Command line: ``python -m planner (inspect|plan|simulate|size|probe|report) ...``.

Bad input exits with code 2 and one line on stderr naming the field, the value and the problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from planner.configio import read_config_file
from planner.errors import PlannerError, shorten
from planner.kv import KV_DTYPE_BITS, KV_DTYPE_CHOICES, RUNTIMES, InspectReport, inspect_config
from planner.limits import CAPACITY_TIME_BUDGET_S, MAX_CAPACITY_TOP, bounded_number, ensure_finite_json, parse_number_text, safe_text, safe_tree
from planner.units import GIB, MIB, fmt_bytes_exact, fmt_ms_whole


class CLIError(PlannerError):
    """A command-line error (conflicting flags, an unreadable file, a Hub failure while loading
    ``--model``): one line on stderr, exit code 2. What to do: what the line says."""

    def __init__(self, message: str) -> None:
        super().__init__("command line", None, message, message=message)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        raise CLIError(message)


# --------------------------------------------------------------------------- argument types


def _number(text: str, cast: type, *, positive: bool, signed: bool = False) -> int | float:
    """Parse an argument as ``cast`` (int or float); finite, and > 0 or >= 0 (any sign if ``signed``)."""
    value = parse_number_text(text, integer=cast is int)
    if value is None:
        kind = "an integer (ASCII digits only)" if cast is int else "a finite number (e.g. 0.5 or 1e-3)"
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} is not {kind}")
    if signed:
        return value
    if value < 0 or (positive and value == 0):
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} must be {'a positive' if positive else 'a non-negative'} {'integer' if cast is int else 'number'}")
    return value


def bounded(name: str):
    """An argparse type reading a number by :func:`planner.limits.bounded_number`: ASCII digits,
    inside the range :data:`planner.limits.BOUNDS` gives ``name`` (the app's widgets read the same)."""

    def parse(text: str) -> int | float:
        try:
            return bounded_number(name, text)
        except PlannerError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None  # "field=value: why", as every other refusal

    parse.__name__ = name
    return parse


def positive_int(text: str) -> int:
    return _number(text, int, positive=True)


def nonneg_int(text: str) -> int:
    return _number(text, int, positive=False)


def positive_float(text: str) -> float:
    return _number(text, float, positive=True)


def nonneg_float(text: str) -> float:
    return _number(text, float, positive=False)


def emit(*parts: object, file=None) -> None:
    """``print`` through :func:`planner.limits.safe_text`: the one way the CLI writes text, so a
    config string holding a lone surrogate (``"\\ud800"``) cannot break the output stream."""
    print(*(safe_text(p) for p in parts), file=file)


def print_json(out: dict) -> None:
    """Print a result as strict JSON: a non-finite number is refused, never printed as Infinity;
    every string passes :func:`planner.limits.safe_tree`.

    Raises:
        PlannerError: naming the first non-finite number.
    """
    ensure_finite_json(out)
    emit(json.dumps(safe_tree(out), indent=2, default=str, allow_nan=False))


# --------------------------------------------------------------------------- model source


def add_model_source(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--config", metavar="PATH", help="the model: a config.json file on disk (default: none; give one model source)")
    g.add_argument("--preset", metavar="NAME", help="the model: a bundled preset from model_configs/, e.g. llama-3.1-8b (default: none)")
    g.add_argument("--model", metavar="ORG/NAME[@REV]", help="the model: a Hugging Face Hub repo id and optional revision; HF_TOKEN for gated repos (default: none)")


def load_model_source(args: argparse.Namespace) -> tuple[dict, dict]:
    """Return (config, source) for --config, --preset or --model.

    Raises:
        CLIError: unreadable file, unknown preset or a Hub error (one line, no token).
    """
    if getattr(args, "config", None):
        path = Path(args.config)
        try:
            config = read_config_file(path, source=f"--config {path.name}")
        except OSError as exc:
            raise CLIError(f"--config {args.config}: cannot read file ({exc.strerror})") from None
        return config, {"kind": "config", "path": str(path)}
    if getattr(args, "preset", None):
        from planner.presets import load_preset

        config = load_preset(args.preset)
        return config, {"kind": "preset", "preset": args.preset, "repo_id": config.get("_name_or_path")}
    if getattr(args, "model", None):
        from planner import hub

        try:
            repo_id, revision = hub.parse_model_ref(args.model)
            model = hub.fetch_model(repo_id, revision, token=hub.resolve_token())
        except hub.HubError as exc:
            raise CLIError(str(exc)) from None
        source = {"kind": "hub", "repo_id": model.repo_id, "revision": model.revision, "commit": model.commit_sha, "from_cache": model.from_cache, "weights_source": model.weights_source, "parameter_counts": model.parameter_counts, "notes": list(model.notes)}
        if model.quantization is not None and "quantization_config" not in model.config:
            source["quantization"] = model.quantization  # hf_quant_config.json: popped before printing
        return model.config, source
    raise CLIError("give a model: --config PATH, --preset NAME or --model ORG/NAME")


# --------------------------------------------------------------------------- inspect


def inspect_summary(r: InspectReport) -> str:
    kinds = ", ".join(f"{n} {k}" for k, n in r.layers.items())
    lines = [
        f"model_type        {r.model_type}" + (f" (from {r.config_path})" if r.config_path else ""),
        f"layers            {kinds}",
        f"KV heads per GPU  {r.kv_heads_per_gpu} (tp {r.tp}), head_dim {r.head_dim}" + (f", v_head_dim {r.v_head_dim}" if r.v_head_dim != r.head_dim else ""),
    ]
    if r.mla_latent_dim:
        lines.append(f"MLA latent        {r.mla_latent_dim} elements per layer and token")
    if r.windows:
        lines.append("windows           " + ", ".join(f"{k} {w:,}" for k, w in r.windows.items()))
    lines += [
        f"runtime           {r.runtime}: {r.runtime_description}",
        f"KV dtype          {r.kv_dtype}" + (f" ({r.kv_dtype_source})" if r.kv_dtype_source != "given" else ""),
        f"K/V per token     {fmt_bytes_exact(r.kv_bytes_per_token)} per sequence per GPU",
        f"K/V at {r.tokens:,} tokens  {fmt_bytes_exact(r.kv_bytes_at_tokens)}",
    ]
    if r.state_bytes_per_sequence:
        lines.append(f"recurrent state   {fmt_bytes_exact(r.state_bytes_per_sequence)} per sequence")
    lines += [f"note: {n}" for n in r.notes]
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> int:
    config, source = load_model_source(args)
    quantization = source.pop("quantization", None)
    report = inspect_config(config, kv_dtype=args.kv_dtype, tp=args.tp, tokens=args.tokens, runtime=args.runtime, quantization=quantization, mtp=args.mtp)
    if args.json:
        out = report.model_dump(mode="json")
        out["source"] = source
        print_json(out)
    else:
        emit(inspect_summary(report))
    return 0


# --------------------------------------------------------------------------- plan

METAVARS = {"headroom_bp": "BP", "gpu": "NAME", "disagg": "POOLS"}


def control_type(control):
    """The argparse type of a numeric plan flag, from its :class:`~planner.controls.Control`: ASCII
    number text of the field's kind, and not a sign its range never takes (a negative count, a 0
    where the range starts at 1: refused here, naming the flag). The rest of the range is the
    field's own, checked by :func:`~planner.plan.make_inputs` with the field named. ``.control`` is
    the declaration."""
    cast = int if control.kind == "int" else float
    floor = control.lo

    def parse(text: str) -> int | float:
        return _number(text, cast, positive=cast is int and floor is not None and floor >= 1, signed=floor is None or floor < 0)

    parse.control = control  # type: ignore[attr-defined]
    parse.__name__ = control.name
    return parse


def add_control_flags(p: argparse.ArgumentParser, names, controls=None) -> None:
    """A flag for each named plan control, rendered from its declaration (``controls``: by
    default :data:`planner.controls.CONTROLS`, one per PlanInputs field)."""
    if controls is None:
        from planner.controls import CONTROLS as controls

    for name in names:
        c = controls[name]
        if c.kind == "bool":
            p.add_argument(c.flag, action="store_true", default=None, help=c.cli_help())
        elif c.kind == "choice":
            p.add_argument(c.flag, choices=list(c.choices or ()), help=c.cli_help())
        elif c.kind == "text":
            p.add_argument(c.flag, metavar=METAVARS.get(name, "TEXT"), help=c.cli_help())
        else:
            p.add_argument(c.flag, type=control_type(c), metavar=METAVARS.get(name, "N" if c.kind == "int" else "X"), help=c.cli_help())


def control_values(args: argparse.Namespace, names, controls=None) -> dict:
    """The plan inputs the named control flags were given (library field names)."""
    if controls is None:
        from planner.controls import CONTROLS as controls

    return {name: value for name in names if (value := getattr(args, controls[name].dest, None)) is not None}


def add_plan_options(p: argparse.ArgumentParser) -> None:
    """The plan flags shared by ``plan``, ``simulate`` and ``report``: the model source, then one
    flag per PlanInputs field (:func:`add_control_flags`)."""
    from planner.controls import CONTROLS

    p.add_argument("--example", action="store_true", help="plan the seed's runnable example (16 GiB custom device, observed latencies); later flags override it (default: off)")
    add_model_source(p, required=False)
    add_control_flags(p, CONTROLS)
    p.add_argument(
        "--latency-model",
        choices=["roofline", "measured"],
        help="roofline: the planner's fitted roofline; measured: also NVIDIA AIConfigurator's measured kernels (aiconfigurator-core: the plan's serving engine's data, vLLM, SGLang or TensorRT-LLM, in its weight format) side by side, or the reason it has no data (default: roofline)",
    )


def model_from_args(args: argparse.Namespace):
    """(PreparedModel, source) for --example, --config, --preset or --model.

    Raises:
        CLIError: no model, or --example together with another source.
    """
    from planner.plan import example_model, prepare_model

    if args.example and (args.config or args.preset or args.model):
        raise CLIError("--example plans the seed's own model: drop --config/--preset/--model, or drop --example")
    if args.config or args.preset or args.model:
        config, source = load_model_source(args)
        return prepare_model(config, source.get("parameter_counts"), source.pop("quantization", None)), source
    if args.example:
        return example_model(), {"kind": "example", "repo_id": None}
    raise CLIError("give a model: --example, --config PATH, --preset NAME or --model ORG/NAME")


def plan_from_args(args: argparse.Namespace):
    """(Plan, PreparedModel, source) from parsed plan options.

    Raises:
        CLIError / PlannerError: bad flags, an unknown GPU or an inadmissible combination.
    """
    from planner.controls import CONTROLS
    from planner.plan import EXAMPLE_INPUTS, compute_plan, make_inputs

    if args.gpu is not None and args.device_gib is not None:
        raise CLIError("give either --gpu NAME (catalog) or --device-gib X (custom device), not both")
    model, source = model_from_args(args)
    values: dict = EXAMPLE_INPUTS.model_dump(exclude_defaults=True) if args.example else {}
    values |= control_values(args, CONTROLS)
    if args.gpu is not None:
        values.pop("device_gib", None)
    if args.tp is not None and args.gpu_count is None:
        values["gpu_count"] = max(args.tp, values.get("gpu_count", 1))
    inputs = make_inputs(**values)
    return compute_plan(inputs, model), model, source


def plan_summary(plan, comparison=None) -> str:
    """The plan's summary lines (:func:`planner.explain.summary_lines`), then the measured-kernel comparison."""
    from planner.explain import summary_lines

    lines = list(summary_lines(plan))
    if comparison is not None:
        if comparison.covered:
            d = comparison.difference()
            lines.append(
                f"measured     ({comparison.source}) at 1 request: prefill {comparison.prefill_ms_at_1:,.1f} ms, ITL {comparison.itl_ms_at_1:,.2f} ms; "
                f"{plan.roofline.load_label}: ITL {comparison.itl_ms_at_n:,.2f} ms (static batch); roofline / measured: "
                + ", ".join(f"{k} {v:.2f}x" for k, v in d.items())
            )
        else:
            lines.append(f"measured     not available: {comparison.reason}; showing the roofline")
    return "\n".join(lines)


def disagg_text(d, inputs) -> str:
    """A disaggregated plan (:class:`planner.disagg.DisaggPlan`) of the plan ``inputs`` as ``plan --disagg`` prints it: both pools, then :func:`planner.disagg.describe`."""
    from planner.disagg import describe, load_text, pool_rows

    lines = [f"disaggregated pools {d.spec}: {d.gpus} GPUs, {load_text(d, inputs)}"]
    for r in pool_rows(d):
        lines.append(
            f"  {r['pool']:8} {r['replicas']} x {r['GPU']} TP {r['TP']} ({r['GPUs']} GPUs, {r['KV']} KV, ${r['$/h']:,.2f}/h): weights {r['weights GiB/GPU']:g} GiB/GPU, "
            f"KV pool {r['KV pool GiB/GPU']:g} GiB/GPU, {r['seqs/replica']:g} seqs/replica, {r['utilisation']} busy, step {r['step ms']:g} ms; {r['SLO']}"
        )
    cost = f", ${d.cost_per_million_tokens:,.3f} per M tokens" if d.cost_per_million_tokens is not None else ""
    lines.append(f"  TTFT p95 {fmt_ms_whole(d.ttft_p95_ms)} (KV transfer {d.kv_transfer_ms:,.1f} ms), TPOT {d.tpot_ms:,.2f} ms, {d.output_tokens_per_s:,.0f} output tokens/s, ${d.cost_per_hour:,.2f}/h{cost}")
    lines.append("  " + describe(d))
    return "\n".join(lines)


def calibrated_text(cal) -> str:
    """A kept calibration (:class:`planner.benchimport.calibrate.Calibrated`) as ``plan`` prints it: the label, then each figure beside the model's."""
    if not cal.applied:
        return f"calibration  {cal.label}"
    units = {"output_tokens_per_s": " tok/s"}
    parts = [f"{k.split('_')[0].upper() if k != 'output_tokens_per_s' else 'output'} {v:,.4g}{units.get(k, ' ms')} (model {m:,.4g})" for k, (m, v) in cal.figures.items()]
    return f"calibration  {cal.label}\n             " + "; ".join(parts)


def cmd_plan(args: argparse.Namespace) -> int:
    plan, model, source = plan_from_args(args)
    from planner.disagg import plan_of

    pools = plan_of(plan, model)  # --disagg: the same workload on disaggregated pools, beside the plan
    from planner.benchimport.calibrate import calibrate

    calibrated = calibrate(plan, model)  # --bench-calibration: its ratios beside the model's figures, when the run was this deployment
    comparison = None
    if args.latency_model == "measured":
        from planner import measured

        comparison = measured.compare(plan, model)
    if args.json:
        out = plan.summary()
        out["source"] = source
        out["latency_model"] = args.latency_model or "roofline"
        if comparison is not None:
            out["measured"] = {**comparison.model_dump(), "roofline_over_measured": comparison.difference()}
        if pools is not None:
            out["disagg"] = pools.model_dump(mode="json")
        if calibrated is not None:
            out["calibrated"] = calibrated.model_dump(mode="json")
        if args.explain:
            from planner.explain import explain

            e = explain(plan)
            out["explanation"] = {
                "steps": [{"title": g.title, "lines": list(g.lines)} for g in e.steps],
                "assumptions": [{"title": n.title, "text": n.text} for n in e.assumptions],
                "not_modelled": [{"title": n.title, "text": n.text} for n in e.not_modelled],
            }
        print_json(out)
    else:
        emit(plan_summary(plan, comparison))
        if calibrated is not None:
            emit(calibrated_text(calibrated))
        if pools is not None:
            emit(disagg_text(pools, plan.inputs))
        if args.explain:
            from planner.explain import explain

            emit(explain(plan).text())
    return 0


# --------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    import time

    from planner import simulate as sim
    from planner.simulate.mooncake import parse_mooncake
    from planner.simulate.workload import read_trace_text

    plan, _model, source = plan_from_args(args)
    text = read_trace_text(args.trace, kind="CSV or JSONL") if args.trace else None
    if text is not None and is_mooncake(args.trace, text):  # a prefix-cache trace: the tiers replay it
        from planner.cache.runs import replay_plan

        return _cache_output(args, replay_plan(plan, parse_mooncake(text), time_budget_s=args.time_budget_s), source)
    if plan.inputs.sessions_per_min is not None:  # a session workload: the tiered cache simulation
        from planner.cache.runs import DEFAULT_SESSIONS, simulate_plan

        return _cache_output(args, simulate_plan(plan, args.sessions or DEFAULT_SESSIONS, seed=args.seed, time_budget_s=args.time_budget_s), source)
    cost, blocks = sim.from_plan(plan)
    clients = None
    if args.closed_loop:  # the benchmark the plan describes: --sequences clients started at once, --bench-prompts prompts in all
        if text is not None or args.replicas != 1:
            raise PlannerError("closed_loop", "on", "a closed loop is simulated on one replica from the plan's lengths (no --trace, no --replicas)")
        clients = plan.inputs.sequences  # the loop sets every arrival itself
        requests = sim.plan_requests(plan.context, args.rate, plan.inputs.bench_prompts, lengths=args.lengths, seed=args.seed)
    else:
        requests = sim.plan_requests(plan.context, args.rate, args.requests, lengths=args.lengths, trace_text=text, seed=args.seed)
    cfg = sim.plan_config(
        plan,
        blocks,
        max_num_batched_tokens=args.max_batched_tokens,
        policy=args.policy,
        chunk_tokens=args.chunk_tokens,
        seed=args.seed,
        replicas=args.replicas,
        router=args.router,
        time_budget_s=args.time_budget_s,
    )
    started = time.perf_counter()
    lag = sim.closed_loop_lag_s(plan) if clients is not None else 0.0
    result = sim.simulate(requests, cfg, cost, clients=clients, lag_s=lag)
    out = result.model_dump(mode="json", exclude={"kv_utilisation", "per_request"})
    left = args.time_budget_s - (time.perf_counter() - started)
    if clients is not None:
        out["closed_loop"] = {"clients": clients, "prompts": len(requests), "simulated_ttft_mean_ms": sim.benchmark_ttft_ms(plan, result), "preprocessing_ms": plan.latency.preprocessing_ms, "plan_benchmark_ttft_ms": plan.roofline.benchmark_ttft_ms}
    if result.stopped_early is None and left > 0.5:  # the static comparison gets what is left of the budget
        static = sim.simulate(requests, cfg.model_copy(update={"reservation": "static", "static_tokens": plan.context.maximum_context_tokens, "time_budget_s": left}), cost, clients=clients, lag_s=lag)
        out["static_reservation"] = {k: static.model_dump(mode="json")[k] for k in ("requests_completed", "requests_rejected", "throughput_tokens_per_s", "preemptions", "ttft_ms", "e2e_ms", "stopped_early")}
    out["pool_blocks"] = blocks
    out["source"] = source
    if args.json:
        print_json(out)
    else:
        emit(
            f"{result.policy}: {result.requests_completed:,} completed, {result.requests_cancelled:,} cancelled, {result.requests_rejected:,} rejected; "
            f"TTFT p50/p95/p99 {result.ttft_ms.p50:,.1f}/{result.ttft_ms.p95:,.1f}/{result.ttft_ms.p99:,.1f} ms; "
            f"ITL p50/p95/p99 {result.itl_ms.p50:,.1f}/{result.itl_ms.p95:,.1f}/{result.itl_ms.p99:,.1f} ms; "
            f"{result.throughput_tokens_per_s:,.0f} tok/s; {result.preemptions:,} preemptions; pool {blocks:,} blocks"
            + (f" x {result.replicas} replicas ({result.router})" if result.replicas > 1 else "")
        )
        emit(result.overload.message)
        if clients is not None:
            c = out["closed_loop"]
            emit(
                f"closed loop of {clients:,} clients started at once, {len(requests):,} prompts: mean TTFT {c['simulated_ttft_mean_ms']:,.1f} ms simulated "
                f"(the API server's {c['preprocessing_ms']:,.1f} ms included: each next prompt reaches the scheduler that long after the last ended); the plan's benchmark figure {c['plan_benchmark_ttft_ms']:,.1f} ms"
            )
        if result.stopped_early:
            emit(f"stopped early: {result.stopped_early}")
    return 0


def is_mooncake(path: str, text: str) -> bool:
    """A Mooncake-style JSONL trace (by its extension, or a first line that is a JSON object)
    rather than the CSV of arrival_s, prompt_tokens, output_tokens."""
    if path.lower().endswith((".jsonl", ".json")):
        return True
    return text.lstrip("\ufeff \t\r\n").startswith("{")


def _cache_output(args: argparse.Namespace, result, source: dict) -> int:
    """A tiered cache run (sessions or a trace replay) as JSON or its lines."""
    from planner.cache.runs import sim_lines

    if args.json:
        print_json({"cache_simulation": result.model_dump(mode="json"), "source": source})
    else:
        emit("\n".join(sim_lines(result)))
    return 0


# --------------------------------------------------------------------------- size


def _prices_arg(text: str) -> float | dict[str, float]:
    """``2.5`` (every GPU) or ``H100-SXM-80GB=2.5,H200-141GB=3.9`` (the table fills the rest)."""
    if "=" not in text:
        return bounded("gpu_hour_price")(text)
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[name.strip()] = bounded("gpu_hour_price")(value)
    return out


def size_fields() -> tuple[str, ...]:
    """The plan inputs ``size`` takes as flags: every one the sizer does not search or set itself
    (GPU, TP, EP, KV dtype, load, SLOs, prices and measured phases: see planner.sizing)."""
    from planner.controls import CONTROLS
    from planner.sizing import SEARCHED

    return tuple(name for name in CONTROLS if name not in SEARCHED)


def cmd_size(args: argparse.Namespace) -> int:
    from planner.sizing import resolve_gpus, size

    model, source = model_from_args(args)
    base = control_values(args, size_fields())
    if args.example:
        base.setdefault("max_context", 4096)
    gpus = resolve_gpus([g for g in args.gpus.split(",") if g.strip()]) if args.gpus else None
    prices = args.gpu_hour_price
    if isinstance(prices, dict):
        prices = {resolve_gpus([k])[0]: v for k, v in prices.items()}
    result = size(
        model, base, users=args.users, rate_per_s=args.rate, ttft_p95_ms=args.ttft_p95_ms, itl_p95_ms=args.itl_p95_ms, tpot_ms=args.tpot_ms, gpus=gpus,
        kv_dtypes=tuple(k.strip() for k in args.kv_dtypes.split(",") if k.strip()), tps=tuple(args.tps), prices=prices, capacity_top=args.capacity_top,
        engines=tuple(e.strip() for e in args.engine.split(",") if e.strip()) if args.engine else None,
        disagg=args.disagg, frontier=args.frontier,
    )  # fmt: skip
    recs = result.recommendations[: args.top]
    if args.json:
        out = {"answer": result.answer, "recommendations": [r.model_dump(mode="json") for r in recs], "searched": result.searched, "refused": [r.model_dump() for r in result.refused], "source": source}
        if result.frontier is not None:
            out["frontier"] = [p.model_dump(mode="json") for p in result.frontier]
        print_json(out)
        return 0
    emit(result.answer)
    engines = "engines" in result.searched  # an engine column only when the search compared engines
    tiers = any(r.cache_hit_rate is not None for r in recs)  # a session workload: the CPU tier searched and the hit rate
    extra = f" {'cpu GiB':>7} {'hit':>5}" if tiers else ""
    emit(f"{'gpu':16} {'tp':>3} {'dp':>3} {'pp':>3} {'ep':>3} {'rep':>4} {'gpus':>5} {'kv':5} " + (f"{'engine':7} " if engines else "") + f"{'seqs/rep':>9} {'max_seqs':>8}{extra} {'$/h':>8} {'$/Mtok':>8} {'TTFT p95':>8} {'ITL p95':>7} {'req/s':>7} {'sim req/s':>9}  binding")
    for r in recs:
        sim_rate = f"{r.capacity.max_rate_per_s:9.3g}" if r.capacity else f"{'-':>9}"
        if r.disaggregated:
            emit(f"  pools {r.disagg}: KV transfer {r.kv_transfer_ms:,.1f} ms")
        cells = f" {r.cpu_tier_gib or 0:7,.0f} {r.cache_hit_rate or 0:5.0%}" if tiers else ""
        emit(
            f"{r.gpu:16} {r.tp:3d} {r.dp:3d} {r.pp:3d} {r.ep:3d} {r.replicas:4d} {r.gpu_count:5d} {r.kv_dtype:5} " + (f"{r.runtime:7} " if engines else "") + f"{r.sequences_per_replica:9,d} {r.max_num_seqs:8,d}{cells} {r.cost_per_hour:8.2f} {r.cost_per_million_tokens:8.2f} "
            f"{r.ttft_p95_ms:8.0f} {r.itl_p95_ms:7.1f} {r.sustainable_rate:7.3g} {sim_rate}  {r.binding_constraint}"
        )
    for r in recs:
        if r.capacity:
            emit(f"capacity {r.gpu} TP {r.tp} x{r.replicas}: {r.capacity.note}")
    if "capacity_search" in result.searched:
        emit(result.searched["capacity_search"])
    for r in recs[:3]:
        if r.serve_command:
            emit(f"serve {r.gpu} TP {r.tp} x{r.replicas}: {r.serve_command}")
    emit(f"searched {result.searched['candidates']} GPU x parallel shape x KV dtype{' x engine' if engines else ''} candidates ({result.searched['shapes']}): {result.searched['feasible']} hold the workload, {result.searched['refused']} do not; ranked by {result.searched['ranking']}")
    vllm = [r for r in result.refused if "refuses to start" in r.reason]
    for r in vllm[:5]:
        emit(f"refused {r.gpu} TP {r.tp} {r.kv_dtype}: {r.reason}")
    if len(vllm) > 5:
        emit(f"... {len(vllm) - 5} more that vLLM would not start (--json lists every refused candidate)")
    if result.frontier is not None:
        front = sorted((p for p in result.frontier if p.pareto), key=lambda p: p.tokens_per_s_per_user)
        emit(f"frontier: {len(result.frontier):,} operating points, {len(front)} on the Pareto front (tokens/s per user, tokens/s per GPU, deployment):")
        for p in front:
            emit(f"  {p.tokens_per_s_per_user:8.1f} {p.tokens_per_s_per_gpu:9.1f}  {p.label()}{'' if p.meets_slo else '  (misses the SLOs)'}")
    return 0


# --------------------------------------------------------------------------- engine


def add_engine_parser(sub) -> None:
    from planner.engines.vllm import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_VLLM_VERSION, VLLM_VERSIONS
    from planner.hardware import CATALOG

    p = sub.add_parser("engine", help="what vLLM (or SGLang, --engine sglang) will print at start-up: KV cache tokens, maximum concurrency, or its refusal")
    add_model_source(p)
    p.add_argument("--tp", type=bounded("tp"), default=1, help="tensor-parallel size (GPUs per replica; default 1)")
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8", "fp8_e4m3", "fp8_e5m2"], default="auto", help="vLLM --kv-cache-dtype (default auto: what the checkpoint's quantization config declares, else the 16-bit model dtype)")
    p.add_argument("--block-size", type=bounded("block_size"), help="tokens per KV block (default: the backend's, 16; 64 for MLA; larger for Mamba hybrids)")
    p.add_argument("--max-model-len", type=bounded("max_model_len"), help="tokens per request (default: the model's max_position_embeddings)")
    p.add_argument("--max-num-batched-tokens", type=bounded("max_num_batched_tokens"), help=f"tokens per scheduler step (default: with --gpu, vLLM's default for that GPU, release and entry point; else {DEFAULT_MAX_NUM_BATCHED_TOKENS:,})")
    p.add_argument("--max-num-seqs", type=bounded("max_num_seqs"), help="vLLM --max-num-seqs, for the sampler's profiling run and the serve command (default: vLLM's for the GPU, release and entry point)")
    p.add_argument("--vllm-version", choices=list(VLLM_VERSIONS), default=DEFAULT_VLLM_VERSION, help=f"vLLM release whose rules apply (default {DEFAULT_VLLM_VERSION})")
    p.add_argument("--entry-point", choices=["serve", "llm"], default="serve", help="`vllm serve` or the Python LLM class: their batching defaults differ (default serve)")
    p.add_argument("--enforce-eager", action="store_true", help="vLLM --enforce-eager: no CUDA graphs (default: off)")
    p.add_argument("--limit-mm-per-prompt", type=bounded("limit_mm_per_prompt"), help="vLLM --limit-mm-per-prompt: images one prompt may carry, for the encoder cache of the profiling run (default: vLLM's 999; 0: text only)")
    p.add_argument("--enable-lora", action="store_true", help="vLLM --enable-lora: LoRA adapter slots in the budget (default: off)")
    p.add_argument("--max-loras", type=bounded("max_loras"), default=1, help="vLLM --max-loras, with --enable-lora (default 1)")
    p.add_argument("--max-lora-rank", type=bounded("max_lora_rank"), default=16, help="vLLM --max-lora-rank, with --enable-lora (default 16)")
    p.add_argument("--no-prefix-caching", action="store_true", help="start vLLM with --no-enable-prefix-caching (default: prefix caching on)")
    p.add_argument("--speculative-layers", type=bounded("speculative_layers"), default=0, help="draft / MTP layers cached beside the model (default 0)")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--available-kv-bytes", type=bounded("available_kv_bytes"), help="'Available KV cache memory' per GPU in bytes (no default: give this, --available-kv-gib or --gpu)")
    budget.add_argument("--available-kv-gib", type=bounded("available_kv_gib"), help="'Available KV cache memory' per GPU in GiB, as vLLM printed it (no default)")
    budget.add_argument("--gpu", metavar="NAME", help=f"predict the budget for a catalog GPU, term by term (no default; {', '.join(CATALOG)})")
    p.add_argument("--gpu-memory-utilization", type=bounded("gpu_memory_utilization"), default=0.9, help="share of the GPU vLLM may use, with --gpu (default 0.9)")
    p.add_argument("--probe-json", metavar="PATH", help="a runtime probe's JSON measured on that GPU (python -m planner probe --mode runtime --json): its non-torch memory and activation peak replace the budget's estimates, with --gpu and --tp 1 (default: none)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: text)")
    from planner.cli_sglang import add_sglang_arguments

    add_sglang_arguments(p, bounded)
    p.set_defaults(func=cmd_engine)


def _read_capped(path: str, flag: str, limit: int, typical: str) -> bytes:
    """A file's bytes, reading at most ``limit`` + 1 (so /dev/zero or a FIFO cannot fill memory).

    Raises:
        CLIError: the file cannot be read or is larger than ``limit``.
    """
    try:
        with Path(path).open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise CLIError(f"{flag} {path}: cannot read file ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise CLIError(f"{flag} {path}: file is larger than {limit // MIB} MiB; {typical}")
    return data


def cmd_engine(args: argparse.Namespace) -> int:
    from planner.cli_sglang import check_flags, cmd_engine_sglang
    from planner.engines.vllm import DEFAULT_MAX_NUM_BATCHED_TOKENS, EngineRefusal, serve_command, vllm_capacity
    from planner.engines.vllm_memory import batch_defaults, predict_memory
    from planner.hardware import get_device
    from planner.plan import prepare_model

    check_flags(args, CLIError)
    config, source = load_model_source(args)
    if args.engine == "sglang":
        return cmd_engine_sglang(args, config, source, prepare_model(config, source.get("parameter_counts"), source.pop("quantization", None)), emit, print_json)
    model = prepare_model(config, source.get("parameter_counts"), source.pop("quantization", None))
    entry = {"serve": "vllm serve", "llm": "LLM class"}[getattr(args, "entry_point", None) or "serve"]
    lora = dict(enable_lora=bool(getattr(args, "enable_lora", False)), max_loras=getattr(args, "max_loras", None) or 1, max_lora_rank=getattr(args, "max_lora_rank", None) or 16)
    budget = None
    if args.gpu is not None:
        device = get_device(args.gpu)
        measured = None
        if args.probe_json is not None:
            from planner.probe import MAX_PROBE_JSON_BYTES, budget_measurements, load_probe_json

            probe = load_probe_json(_read_capped(args.probe_json, "--probe-json", MAX_PROBE_JSON_BYTES, "a probe JSON is a few KiB"))
            measured = budget_measurements(probe, args.max_num_batched_tokens or batch_defaults(device, args.vllm_version, entry).max_num_batched_tokens, args.tp)
            if not measured:
                raise PlannerError("probe_json", args.probe_json, "holds no GPU memory measurements that apply: it needs a successful runtime-mode probe on CUDA, and --tp 1 (the probe runs the model on one GPU)")
        budget = predict_memory(
            model.config, model.geometry, device, gpu_memory_utilization=args.gpu_memory_utilization, tp=args.tp, max_model_len=args.max_model_len or model.geometry.max_position_embeddings,
            max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs, release=args.vllm_version, entry_point=entry, enforce_eager=bool(getattr(args, "enforce_eager", False)),
            quantization=model.quantization, limit_mm_per_prompt=getattr(args, "limit_mm_per_prompt", None), measured=measured, **lora,
        )  # fmt: skip
        _print_budget(budget, args.json)
        if budget.refusal:
            from planner.plan.budget import refusal_text

            emit(f"error: {refusal_text(budget, args.gpu_memory_utilization, device.name)}", file=sys.stderr)
            return 2
        available = budget.available_kv_bytes
    else:
        if args.probe_json is not None:
            raise CLIError("--probe-json replaces terms of the predicted budget: give it with --gpu (it has nothing to replace in a given --available-kv-bytes)")
        available = args.available_kv_bytes if args.available_kv_bytes is not None else int(args.available_kv_gib * GIB)
    kv_cache_dtype = args.kv_cache_dtype
    if kv_cache_dtype == "auto" and model.quantization is not None and model.kv_dtype("auto")[0] == "fp8":
        kv_cache_dtype = "fp8"  # declared in hf_quant_config.json, which vLLM reads and the engine's config does not hold
    tokens = budget.max_num_batched_tokens if budget else (args.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS)
    try:
        r = vllm_capacity(config, geometry=model.geometry, available_kv_bytes=available, tp=args.tp, kv_cache_dtype=kv_cache_dtype, block_size=args.block_size, max_model_len=args.max_model_len, max_num_batched_tokens=tokens, vllm_version=args.vllm_version, prefix_caching=not args.no_prefix_caching, speculative_layers=args.speculative_layers)
    except EngineRefusal as exc:
        emit(f"error: vLLM {args.vllm_version} refuses to start: {exc.reason}", file=sys.stderr)
        return 2
    settings = dict(enforce_eager=bool(getattr(args, "enforce_eager", False)), limit_mm_per_prompt=getattr(args, "limit_mm_per_prompt", None), entry_point=getattr(args, "entry_point", None) or "serve", **lora)
    command = serve_command(model.repo_id or source.get("path") or "MODEL", r, gpu_memory_utilization=args.gpu_memory_utilization if args.gpu else None, max_num_seqs=args.max_num_seqs or (budget.max_num_seqs if budget else None), user_block_size=args.block_size, **settings)
    if args.json:
        out = r.summary()
        out["budget"] = budget.summary() if budget else {"available_kv_bytes": available, "terms": [{"name": "given", "bytes": available, "source": "--available-kv-bytes / --available-kv-gib"}]}
        out["serve_command"] = command
        out["source"] = source
        print_json(out)
        return 0
    groups = ", ".join(f"{g.layers} {g.kind}" + (f"({g.window})" if g.window else "") for g in r.groups)
    emit(f"vLLM {r.vllm_version}: {len(r.groups)} KV cache groups [{groups}], block {r.block_size} tokens, {r.bytes_per_block:,} B per block, {r.num_blocks:,} blocks, {r.blocks_per_request:,} blocks per request")
    for line in r.log_lines:
        emit(line)
    for note in r.notes:
        emit(f"note: {note}")
    emit(command)
    return 0


def _print_budget(budget, as_json: bool) -> None:
    """The predicted budget term by term, each with its source (text output only)."""
    if as_json:
        return
    emit(f"{'max_num_batched_tokens / max_num_seqs':<38} {budget.max_num_batched_tokens:,} / {budget.max_num_seqs:,}  ({budget.batch_source})")
    for t in budget.terms:
        emit(f"{t.name:<38} {t.bytes / 2**30:>9,.2f} GiB  ({t.source}{'' if t.in_budget else '; outside the budget'})")
    emit(f"{'Available KV cache memory':<38} {budget.available_kv_bytes / 2**30:>9,.2f} GiB")


# --------------------------------------------------------------------------- report


def _ref_from_source(source: dict, model):
    """(ModelRef, upload config or None) for what :func:`plan_from_args` loaded."""
    from planner.geometry import config_hash
    from planner.source import ModelRef

    digest = model.geometry.config_hash
    kind = source.get("kind")
    if kind == "example":
        return ModelRef(kind="example", config_hash=digest), None
    if kind == "preset":
        return ModelRef(kind="preset", name=source["preset"], repo_id=model.repo_id, config_hash=digest), None
    if kind == "hub":
        return ModelRef(kind="hub", repo_id=source["repo_id"], revision=source.get("revision"), commit=source.get("commit"), config_hash=digest), None
    return ModelRef(kind="upload", name=Path(source.get("path", "config.json")).name, repo_id=model.repo_id, config_hash=config_hash(model.config)), model.config


def _plan_from_state(state):
    """The plan a decoded plan file describes (a Hub model is fetched with ``HF_TOKEN``)."""
    from planner.plan import compute_plan

    return compute_plan(state.inputs, _model_from_state(state))


def _model_from_state(state):
    """The model a decoded plan file names (a Hub model is fetched with ``HF_TOKEN``)."""
    from planner.source import resolve

    if state.ref.kind == "hub":
        from planner import hub

        try:
            model = resolve(state.ref, config=state.upload_config, token=hub.resolve_token())
        except hub.HubError as exc:
            raise CLIError(str(exc)) from None
    else:
        model = resolve(state.ref, config=state.upload_config)
    return model


def _share_base(text: str) -> str:
    from planner.share import looks_like_token

    if not text.startswith(("http://", "https://")) or len(text) > 2000 or not text.isprintable() or " " in text:
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not an http(s) URL")
    if looks_like_token(text) or "@" in text.split("/", 3)[2]:
        raise argparse.ArgumentTypeError("the share base must not carry credentials or tokens")
    return text


def cmd_report(args: argparse.Namespace) -> int:
    """Write the PDF report of the plan given by plan options or ``--plan FILE``.

    Raises:
        CLIError / PlannerError: bad options, an unreadable plan file, an inadmissible plan
            or an unwritable output path (one line each).
    """
    from planner.report import build_pdf
    from planner.share import MAX_PLAN_FILE_BYTES, encode_query, load_plan_file, share_url

    if args.plan:
        given = [k for k, v in vars(args).items() if k not in ("plan", "out", "share_base", "func", "command") and v not in (None, False)]
        if given:
            raise CLIError(f"--plan FILE cannot be combined with plan options (got --{given[0].replace('_', '-')}); edit the file or drop --plan")
        data = _read_capped(args.plan, "--plan", MAX_PLAN_FILE_BYTES, "a plan file is a few KiB")
        state = load_plan_file(data)
        if state.ref is None:
            raise CLIError(f"--plan {args.plan}: the file names no usable model" + (f" ({state.warnings[0]})" if state.warnings else ""))
        plan, ref, upload = _plan_from_state(state), state.ref, state.upload_config
        model = _model_from_state(state)
        for warning in state.warnings:  # only once the plan stands: a refusal stays one line
            emit(f"warning: {warning}", file=sys.stderr)
    else:
        plan, model, source = plan_from_args(args)
        ref, upload = _ref_from_source(source, model)
    link = share_url(args.share_base, encode_query(ref, plan.inputs, upload))
    pdf = build_pdf(plan, ref, link, model=model)
    out = Path(args.out)
    try:
        out.write_bytes(pdf)
    except OSError as exc:
        raise CLIError(f"--out {args.out}: cannot write file ({exc.strerror or exc})") from None
    emit(f"wrote {out} ({len(pdf):,} bytes)")
    return 0


# --------------------------------------------------------------------------- launch, bench-import

_OWN_FLAGS = ("plan", "out", "share_base", "func", "command", "what", "rate", "json", "file", "format", "target")


def _plan_or_file(args: argparse.Namespace):
    """(plan inputs, model) from plan options or ``--plan FILE`` (not both).

    Raises:
        CLIError / PlannerError: both given, an unreadable or unusable plan file, bad plan options.
    """
    from planner.share import MAX_PLAN_FILE_BYTES, load_plan_file

    if args.plan:
        given = [k for k, v in vars(args).items() if k not in _OWN_FLAGS and v not in (None, False)]
        if given:
            raise CLIError(f"--plan FILE cannot be combined with plan options (got --{given[0].replace('_', '-')}); edit the file or drop --plan")
        state = load_plan_file(_read_capped(args.plan, "--plan", MAX_PLAN_FILE_BYTES, "a plan file is a few KiB"))
        if state.ref is None:
            raise CLIError(f"--plan {args.plan}: the file names no usable model" + (f" ({state.warnings[0]})" if state.warnings else ""))
        for warning in state.warnings:
            emit(f"warning: {warning}", file=sys.stderr)
        return state.inputs, _model_from_state(state)
    plan, model, _source = plan_from_args(args)
    return plan.inputs, model


def cmd_launch(args: argparse.Namespace) -> int:
    """The commands that launch the plan's deployment (per pool with ``--disagg``) and the benchmark that checks it."""
    from planner.launch.bench import bench_commands
    from planner.launch.llmd import llmd_yaml
    from planner.launch.serve import serve_lines

    inputs, model = _plan_or_file(args)
    values = inputs.model_dump(exclude_defaults=True) | {"gpu": inputs.gpu, "tp": inputs.tp, "ep": inputs.ep, "gpu_count": inputs.gpu_count}
    if inputs.disagg:
        from planner.pools import parse_pools

        parse_pools(inputs.disagg, inputs.gpu)  # a pool on the plan's custom device: one line, before any artifact
    out: dict = {}
    if args.what in ("all", "vllm"):
        out["vllm"] = serve_lines(model, values, "vllm").model_dump()
    if args.what in ("all", "sglang"):
        out["sglang"] = serve_lines(model, values, "sglang").model_dump()
    if args.what in ("all", "llmd"):
        out["llmd_values"] = llmd_yaml(model, values)
    if args.what in ("all", "bench"):
        out["bench"] = bench_commands(model, values, rate_per_s=args.rate).model_dump()
    if args.out:
        if "llmd_values" not in out:
            raise CLIError("--out writes the llm-d values file: give --what llmd or all")
        try:
            Path(args.out).write_text(out["llmd_values"], encoding="utf-8")
        except OSError as exc:
            raise CLIError(f"--out {args.out}: cannot write file ({exc.strerror or exc})") from None
    if args.json:
        print_json(out)
        return 0
    for engine in ("vllm", "sglang"):
        if engine in out:
            lines = out[engine]
            emit(f"# {engine}")
            for role in ("prefill", "decode", "router"):
                if lines[role]:
                    emit(f"# {role if lines['prefill'] else 'each replica'}" if role != "router" else "# router")
                    emit(lines[role])
            for note in lines["notes"]:
                emit(f"# {note}")
    if "llmd_values" in out:
        emit(f"# llm-d values written to {args.out}" if args.out else out["llmd_values"].rstrip("\n"))
    if "bench" in out:
        b = out["bench"]
        emit(f"# benchmark: {b['input_tokens']:,}-token prompts, {b['output_tokens']:,} output tokens, {b['load']}, {b['num_prompts']:,} requests")
        for key in ("vllm", "guidellm", "metrics"):
            emit(b[key])
        for note in b["notes"]:
            emit(f"# {note}")
    return 0


def cmd_bench_import(args: argparse.Namespace) -> int:
    """A benchmark result (vllm bench serve JSON, guidellm JSON, aiperf's export JSON, a /metrics scrape) beside the plan's prediction for that run."""
    from planner.benchimport import compare, read_result
    from planner.benchimport.readers import MAX_JSON_BYTES

    data = _read_capped(args.file, "FILE", MAX_JSON_BYTES, "a benchmark result is at most tens of MiB")
    measured = read_result(data, args.format)
    inputs, model = _plan_or_file(args)
    if inputs.disagg:
        from planner.pools import parse_pools

        parse_pools(inputs.disagg, inputs.gpu)
    c = compare(measured, inputs, model)  # the plan's --disagg pools, when it has them
    if args.json:
        print_json(c.summary())
        return 0
    emit(f"{c.tool}: predicted at {c.load}")
    emit(f"{'figure':24} {'measured':>12} {'predicted':>12} {'ratio':>7}")
    for r in c.rows:
        emit(f"{r.label:24} {r.measured:12,.4g} {r.predicted:12,.4g} {r.ratio:7.2f}")
    for w in c.warnings:
        emit(f"warning: {w}", file=sys.stderr)
    emit(f"calibration: {c.calibration}")
    return 0


# --------------------------------------------------------------------------- probe


def cmd_probe(args: argparse.Namespace) -> int:
    """Run the probe on this machine and print its result (``--json``: the probe JSON)."""
    from planner.probe import make_options, probe_summary, run_probe

    config, source = load_model_source(args)
    opts = make_options(
        mode=args.mode,
        runtime=args.runtime,
        device=args.device,
        tokens=args.tokens,
        batch=args.batch,
        decode_steps=args.decode_steps,
        kv_dtype=args.kv_dtype,
        layers_limit=args.layers_limit,
        block_tokens=args.block_tokens,
        tp=args.tp,
        static=args.static,
        timeout_s=args.timeout,
        gpu=args.gpu,
        warmup=not args.no_warmup,
    )
    label = source.get("preset") or source.get("repo_id") or source.get("path")
    result = run_probe(config, opts, source=source, label=label)
    if args.json:
        emit(result.to_json())
    else:
        emit(probe_summary(result))
    if not result.ok:
        raise CLIError(f"probe: {result.error}")
    return 0


# --------------------------------------------------------------------------- main


def _add_inspect(sub) -> None:
    """The ``inspect`` command's arguments."""
    p = sub.add_parser("inspect", help="per-layer KV geometry and bytes of a model")
    add_model_source(p)
    p.add_argument("--kv-dtype", choices=list(KV_DTYPE_CHOICES), default="auto",
                   help="element type of cached keys and values; auto: what the checkpoint declares, as vLLM's --kv-cache-dtype auto, else the model dtype (default: %(default)s)")
    p.add_argument("--mtp", action="store_true",
                   help="also count the model's next-token-prediction (MTP) layers, which an engine caches when MTP speculative decoding is on (default: off)")
    p.add_argument("--tp", type=bounded("tp"), default=1, metavar="N", help="tensor-parallel GPUs: bytes are one GPU's share (default: %(default)s)")
    p.add_argument("--tokens", type=bounded("tokens"), default=4096, metavar="N", help="context length in tokens for the K/V total (default: %(default)s)")
    p.add_argument("--runtime", choices=list(RUNTIMES), default="vllm", help="whose cache layout to count (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: off)")
    p.set_defaults(func=cmd_inspect)


def _add_plan(sub) -> None:
    """The ``plan`` command's arguments."""
    p = sub.add_parser("plan", help="context budget, capacity, admission and latency")
    add_plan_options(p)
    p.add_argument("--json", action="store_true", help="print the whole plan as JSON instead of a summary (default: off)")
    p.add_argument("--explain", action="store_true", help="also print the formulas with this plan's numbers, the assumptions and what is not modelled, as the app and the PDF show them (default: off)")
    p.set_defaults(func=cmd_plan)


def _add_simulate(sub) -> None:
    """The ``simulate`` command's arguments."""
    p = sub.add_parser("simulate", help="continuous batching over the plan's paged KV pool")
    add_plan_options(p)
    p.add_argument("--rate", type=bounded("rate"), default=2.0, metavar="X", help="Poisson arrival rate, requests per second (default: %(default)s)")
    p.add_argument("--requests", type=bounded("requests"), default=200, metavar="N", help="number of requests to simulate, at most 100,000 (default: %(default)s)")
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="a CSV trace with columns arrival_s, prompt_tokens, output_tokens, or a Mooncake JSONL trace (.jsonl: timestamp ms, input_length, output_length, "
        "hash_ids of 512-token blocks, optional tenant) replayed through the plan's GPU pool and --cpu-tier-gib / --disk-tier-gib tiers; at most 8 MiB; replaces --rate, --requests and --lengths (default: none)",
    )
    p.add_argument("--sessions", type=bounded("sessions"), metavar="N", help="with a session workload (--sessions-per-min): sessions simulated through the cache tiers, the first fifth warming them; sessions x turns at most 100,000 (default: 2,000)")
    p.add_argument("--lengths", choices=["chat", "rag", "agent", "summarisation"], help="built-in request lengths instead of the plan's prompt and output: log-normal prompt and output with a stated p50/p95 each, capped at the plan's context "
                   "(chat 1,000/4,000 + 250/800, rag 4,000/12,000 + 300/900, agent 12,000/40,000 + 400/2,000, summarisation 6,000/24,000 + 500/1,200 tokens) (default: the plan's)")  # fmt: skip
    p.add_argument("--policy", choices=["fifo", "decode-priority", "chunked", "prefill-first"], default="fifo", help="scheduling policy: fifo, decode-priority, chunked (vLLM: decodes first, prompts in chunks), prefill-first (SGLang: a prefill step alone while any prompt waits) (default: %(default)s)")
    p.add_argument("--chunk-tokens", type=bounded("chunk_tokens"), default=512, metavar="N", help="prefill chunk size in tokens for the chunked policy (default: %(default)s)")
    p.add_argument("--max-batched-tokens", type=bounded("max_batched_tokens"), default=8192, metavar="N", help="tokens one engine step may process (vLLM max_num_batched_tokens) (default: %(default)s)")
    p.add_argument("--seed", type=bounded("seed"), default=0, metavar="N", help="random seed of the arrivals (default: %(default)s)")
    p.add_argument("--closed-loop", action="store_true", help="simulate the benchmark the plan describes instead of --rate / --requests: --sequences clients started at once, --bench-prompts prompts in all, each client sending its next when its last ends (default: off)")
    p.add_argument("--replicas", type=bounded("replicas"), default=1, metavar="N", help="identical engine replicas behind the router, each with the plan's GPUs (default: %(default)s)")
    p.add_argument("--router", choices=["round-robin", "least-outstanding-tokens"], default="round-robin", help="how requests are spread over the replicas (default: %(default)s)")
    p.add_argument("--time-budget-s", type=bounded("time_budget_s"), default=20.0, metavar="S", help="wall-clock seconds after which the simulation stops and says so (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: off)")
    p.set_defaults(func=cmd_simulate)


def _add_size(sub) -> None:
    """The ``size`` command's arguments."""
    p = sub.add_parser("size", help="how many GPUs, of which kind, at which TP, for a workload under SLOs")
    p.add_argument("--example", action="store_true", help="size the seed's runnable model (default: off)")
    add_model_source(p, required=False)
    p.add_argument("--users", type=bounded("users"), help="concurrent users, i.e. sequences held at once; give this or --rate (default: none)")
    p.add_argument("--rate", type=bounded("size_rate"), help="arrival rate in requests per second; give this or --users (default: none)")
    p.add_argument("--ttft-p95-ms", type=bounded("ttft_p95_ms"), help="p95 time-to-first-token SLO in ms (default: none)")
    p.add_argument("--itl-p95-ms", type=bounded("itl_p95_ms"), help="p95 inter-token latency SLO in ms (default: none)")
    p.add_argument("--gpus", metavar="A,B", help="comma-separated catalog GPUs to consider (default: the whole catalog)")
    p.add_argument("--kv-dtypes", default="bf16,fp8", metavar="A,B", help="KV cache dtypes to consider (default bf16,fp8)")
    p.add_argument("--engine", metavar="A,B", help="engines to search, each with its own sizing and admission: vllm, sglang or vllm,sglang (default: --runtime's, vllm)")
    p.add_argument("--tps", type=bounded("tps"), nargs="+", default=[1, 2, 4, 8], metavar="N", help="tensor-parallel sizes to consider (default 1 2 4 8)")
    p.add_argument("--gpu-hour-price", type=_prices_arg, metavar="USD|NAME=USD,...", help="USD per GPU-hour for every GPU, or per GPU as NAME=USD pairs (default: planner/prices.py, sourced and dated)")
    add_control_flags(p, size_fields())
    p.add_argument("--capacity-top", type=bounded("capacity_top"), default=0, help=f"run the simulator's capacity search (bisection on rate) on this many top recommendations, at most {MAX_CAPACITY_TOP}, within {CAPACITY_TIME_BUDGET_S:g} s of wall time together (default 0)")
    p.add_argument("--tpot-ms", type=bounded("tpot_ms"), help="mean time-per-output-token SLO in ms (default: none)")
    p.add_argument("--disagg", action="store_true", help="also search disaggregated prefill / decode pools, mixed GPU kinds allowed, ranked with the aggregated deployments (default: off)")
    p.add_argument("--frontier", action="store_true", help="every operating point the search visits: output tokens/s per GPU vs tokens/s per user, Pareto front marked (with --json: a frontier list) (default: off)")
    p.add_argument("--top", type=bounded("top"), default=10, help="recommendations to print (default 10)")
    p.add_argument("--json", action="store_true", help="print recommendations and searched as JSON (default: off)")
    p.set_defaults(func=cmd_size)


def _add_launch(sub) -> None:
    """The ``launch`` command's arguments."""
    p = sub.add_parser("launch", help="serve lines per pool, llm-d Helm values and the benchmark command for a plan's deployment")
    add_plan_options(p)
    p.add_argument("--plan", metavar="FILE", help="a plan file (JSON) saved from the app; replaces the plan options (default: none)")
    p.add_argument("--what", choices=["all", "vllm", "sglang", "llmd", "bench"], default="all", help="which artifacts (default: %(default)s)")
    p.add_argument("--rate", type=bounded("size_rate"), help="the benchmark offers this Poisson request rate instead of the plan's concurrent sequences (default: none)")
    p.add_argument("--out", metavar="PATH", help="write the llm-d values file here (default: printed)")
    p.add_argument("--json", action="store_true", help="print the artifacts as JSON (default: off)")
    p.set_defaults(func=cmd_launch)


def _add_bench_import(sub) -> None:
    """The ``bench-import`` command's arguments."""
    from planner.benchimport import FORMATS

    p = sub.add_parser("bench-import", help="a benchmark result beside the plan's prediction for that run (measured, predicted, ratio, calibration)")
    p.add_argument("file", metavar="FILE", help="vllm bench serve --save-result JSON, guidellm run's JSON report, aiperf's profile_export_aiperf.json or a text scrape of vLLM's /metrics (required; no default)")
    add_plan_options(p)
    p.add_argument("--plan", metavar="FILE", help="a plan file (JSON) saved from the app; replaces the plan options (default: none)")
    p.add_argument("--format", choices=list(FORMATS), help="the file's format (default: detected)")
    p.add_argument("--json", action="store_true", help="print measured and predicted side by side as JSON (default: off)")
    p.set_defaults(func=cmd_bench_import)


def _add_report(sub) -> None:
    """The ``report`` command's arguments."""
    from planner.report import DEFAULT_SHARE_BASE

    p = sub.add_parser("report", help="PDF sizing report of a plan")
    add_plan_options(p)
    p.add_argument("--plan", metavar="FILE", help="a plan file (JSON) saved from the app; replaces the plan options (default: none)")
    p.add_argument("--out", metavar="PATH", required=True, help="where to write the PDF (required; no default)")
    p.add_argument("--share-base", metavar="URL", type=_share_base, default=DEFAULT_SHARE_BASE, help="address of the app for the report's share link (default: %(default)s)")
    p.set_defaults(func=cmd_report)


def _add_probe(sub) -> None:
    """The ``probe`` command's arguments."""
    from planner.probe import DEFAULT_TIMEOUT_S, DEVICES, MODES

    p = sub.add_parser("probe", help="allocate the cache or run a random model on this machine, measured beside the estimate")
    add_model_source(p)
    p.add_argument("--mode", choices=MODES, default="allocate", help="allocate: build the predicted cache tensors (checks the arithmetic, not the engine); runtime: run a random transformers model and measure its cache and timing (default: %(default)s)")
    p.add_argument("--runtime", choices=list(RUNTIMES), help="cache layout (default: vllm in allocate mode, transformers in runtime mode)")
    p.add_argument("--device", choices=DEVICES, default="auto", help="where to measure; auto: CUDA when present, else CPU (default: %(default)s)")
    p.add_argument("--tokens", type=bounded("probe_tokens"), default=512, metavar="N", help="prompt length in tokens (default: %(default)s)")
    p.add_argument("--batch", type=bounded("batch"), default=1, metavar="N", help="sequences measured together (default: %(default)s)")
    p.add_argument("--decode-steps", type=bounded("decode_steps"), default=8, metavar="N", help="decode steps after the prefill, runtime mode (default: %(default)s)")
    p.add_argument("--kv-dtype", choices=list(KV_DTYPE_BITS), default="bf16", help="element type of the cache (default: %(default)s)")
    p.add_argument("--layers-limit", type=bounded("layers_limit"), metavar="K", help="measure only the first K layers, kind pattern kept and the scaling stated (default: all layers)")
    p.add_argument("--block-tokens", type=bounded("block_tokens"), default=16, metavar="N", help="vllm layout: token positions per block (default: %(default)s)")
    p.add_argument("--tp", type=bounded("tp"), default=1, metavar="N", help="vllm layout: measure one GPU's share under this tensor parallelism (default: %(default)s)")
    p.add_argument("--static", action="store_true", help="runtime mode: transformers StaticCache instead of DynamicCache (default: off)")
    p.add_argument("--gpu", metavar="NAME", help="catalog device for the roofline comparison (default: the CUDA device's, else the planner default)")
    p.add_argument("--timeout", type=bounded("timeout"), default=DEFAULT_TIMEOUT_S, metavar="S", help="seconds before the probe process is stopped (default: %(default)s)")
    p.add_argument("--no-warmup", action="store_true", help="skip the warm-up run before timing (default: off, a warm-up runs)")
    p.add_argument("--json", action="store_true", help="print the probe JSON instead of text (default: off)")
    p.set_defaults(func=cmd_probe)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m planner", description="KV Capacity Planner")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    _add_inspect(sub)
    _add_plan(sub)
    _add_simulate(sub)
    add_engine_parser(sub)
    _add_size(sub)
    _add_launch(sub)
    _add_bench_import(sub)
    _add_report(sub)
    _add_probe(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except (CLIError, PlannerError) as exc:
        emit(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
