"""The plan's closed-loop TTFT against the simulator's closed loop (never asserted in unit tests).

    .venv/bin/python -m benchmarks.bench_closed_loop

A benchmark at ``--max-concurrency C`` with ``--num-prompts N`` starts its C clients at once and
sends each next prompt when one ends. The plan says what its mean TTFT should be
(serving.benchmark_ttft_ms: the first wave's burst, then the closed loop's steady state). The
simulator (planner.simulate, ``clients=C``) runs that loop step by step on the plan's step costs
with the chunked policy at the plan's token budget (SGLang: its prefill-first policy), each next
prompt reaching the scheduler the plan's preprocessing after the last ended (``lag_s``). Both
figures include the plan's API-server preprocessing (the simulator has none of its own). Fixed prompt and output lengths, as
``vllm bench serve``'s random dataset draws by default: in the simulator, the prompts that a step
prefilled together also finish together, so the next ones arrive together. The analytic steady
state has no such waves.
"""

from __future__ import annotations

from planner import simulate as sim
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset

CASES = (  # clients, prompts, prompt tokens, output tokens (Llama-3.1-8B on one H100)
    (4, 40, 1024, 1024),
    (8, 8, 4096, 256),
    (8, 80, 4096, 256),
    (8, 1000, 4096, 256),
    (16, 16, 2048, 256),
    (16, 160, 2048, 256),
    (32, 320, 2048, 256),
)


def _simulated(model, c: int, n: int, isl: int, osl: int, engine: str, policy: str, lag: bool = True):
    """(plan, simulated closed loop) of ``c`` clients sending ``n`` prompts of fixed lengths on one H100,
    under ``policy`` at the plan's token budget; ``lag``: each next prompt reaches the scheduler the
    plan's preprocessing after the last ended (simulate.closed_loop_lag_s), else at once."""
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", sequences=c, input_tokens=isl, output_tokens=osl, bench_prompts=n, serving_engine=engine), model)
    return plan, sim.simulate_benchmark(plan, c, n, policy, plan._load.setup.budget, lag=lag, record_requests=True)


def _waves_ms(plan, c: int, n: int) -> float:
    """The plan's candidate W / W2 figure (serving.waves_ttft_ms): every wave queued as the first."""
    from planner.plan import serving

    setup = plan._load.setup
    return serving.waves_ttft_ms(setup, c, n, serving.closed(setup, c).ttft_ms)


def rows() -> list[tuple]:
    model = prepare_model(load_preset("llama-3.1-8b"))
    out = []
    for c, n, isl, osl in CASES:
        plan, r = _simulated(model, c, n, isl, osl, "vllm", "chunked")
        _plan, no_lag = _simulated(model, c, n, isl, osl, "vllm", "chunked", lag=False)
        pre = plan.latency.preprocessing_ms
        ttft = [x.ttft_ms for x in r.per_request]
        first, rest = ttft[:c], ttft[c:]
        out.append((c, n, isl, osl, sum(first) / len(first) + pre, (sum(rest) / len(rest) + pre) if rest else None, sim.benchmark_ttft_ms(plan, r), sim.benchmark_ttft_ms(plan, no_lag), plan.latency.time_to_first_token_ms, plan.roofline.benchmark_ttft_ms, _waves_ms(plan, c, n)))
    return out


SGLANG_CASES = (  # clients, prompts, prompt tokens, output tokens (Llama-3.1-8B on one H100 under SGLang)
    (4, 40, 1024, 1024),
    (8, 80, 4096, 256),
    (16, 160, 2048, 256),
    (32, 320, 2048, 256),
    (64, 640, 2048, 512),
)


def sglang_rows() -> list[tuple]:
    """SGLang's scheduler (the simulator's prefill-first policy at the plan's chunked prefill size)
    against the plan's F (serving.benchmark_ttft_ms, shipped) and candidate W (serving.waves_ttft_ms,
    registered in docs/serving_fresh5_plan.md): every wave of a fixed-length loop queues as the first."""
    model = prepare_model(load_preset("llama-3.1-8b"))
    out = []
    for c, n, isl, osl in SGLANG_CASES:
        plan, r = _simulated(model, c, n, isl, osl, "sglang", "prefill-first")
        out.append((c, n, isl, osl, sim.benchmark_ttft_ms(plan, r), plan.roofline.benchmark_ttft_ms, _waves_ms(plan, c, n)))
    return out


def main() -> None:
    print("vLLM (the simulator's chunked policy at the plan's token budget; each next prompt reaches the scheduler the plan's preprocessing after the last ended)")
    print()
    print("| clients | prompts | ISL/OSL | simulated: first wave | later | mean | mean with no lag | plan: steady state | plan F (shipped) | F / simulated | plan W2 (candidate) | W2 / simulated |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c, n, isl, osl, first, rest, mean, no_lag, steady, bench, waves in rows():
        later = f"{rest:,.1f}" if rest is not None else "-"
        print(f"| {c} | {n:,} | {isl}/{osl} | {first:,.1f} | {later} | {mean:,.1f} | {no_lag:,.1f} | {steady:,.1f} | {bench:,.1f} | {bench / mean:.2f} | {waves:,.1f} | {waves / mean:.2f} |")

    print()
    print("SGLang (the simulator's prefill-first policy at the plan's chunked prefill size)")
    print()
    print("| clients | prompts | ISL/OSL | simulated mean | plan F (shipped) | F / simulated | plan W (candidate) | W / simulated |")
    print("|---|---|---|---|---|---|---|---|")
    for c, n, isl, osl, mean, f, w in sglang_rows():
        print(f"| {c} | {n:,} | {isl}/{osl} | {mean:,.1f} | {f:,.1f} | {f / mean:.2f} | {w:,.1f} | {w / mean:.2f} |")


if __name__ == "__main__":
    main()
