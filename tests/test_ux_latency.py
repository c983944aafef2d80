"""Issue 27 item 2: the served model's p99 ITL beside its p95, and a mean above the p95 said in
words (a few long steps). The p95 still jumps where 5 % of steps carry a prefill chunk: the
simulator shows the same jump for prompts of one length (see planner.latency.step_quantile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import latency
from planner.explain import mean_above_p95, metric_help
from planner.plan import compute_plan, make_inputs, prepare_model

CONFIG = Path(__file__).resolve().parents[2] / "shared" / "reference" / "configs" / "Qwen__Qwen3-32B.json"


@pytest.mark.parametrize(("prompt", "output", "budget", "n"), [(2048, 256, 8192, 16), (6000, 200, 8192, 48), (4096, 64, 8192, 16)])
def test_p99_itl_matches_the_simulator(prompt, output, budget, n):
    """The served model's p99 gap against the simulator on a roofline both share (as the p95 test
    in test_latency.py): 2,048-token prompts 33.2 ms simulated, 6,000- and 4,096-token 131.1 ms.
    (1,000-token prompts at a 2,048 budget: 17.8 ms modelled vs 32.3 ms simulated, a step with
    two chunks the model does not have: not asserted.)"""
    from planner import simulate as sim

    W, F, peak, bw = 16e9, 16e9, 1e15, 3e12
    roof = latency.Roofline(weights_bytes=W, active_params=F / 2, attn_layers=0, q_heads=1, head_dim=1, peak_flops=peak, bandwidth_bytes_s=bw, mfu=1.0, mbu=1.0)
    cost = sim.StepCost(weights_bytes=W, kv_bytes_per_token=0, bandwidth_bytes_per_s=bw, mbu=1.0, flops_per_token=F, peak_flops=peak, mfu=1.0)
    s = latency.served(roof, prompt, 0, output, n, 0.0, prompt + output // 2, budget)
    e2e_s = (s.prefill_one_ms + s.wait_ms + (output - 1) * s.itl_ms) / 1e3
    cfg = sim.SimConfig(total_blocks=10_000_000, max_num_seqs=100_000, policy="chunked", max_num_batched_tokens=budget, chunk_tokens=budget)
    r = sim.simulate(sim.poisson_requests(n / e2e_s, 2000, prompt, output, seed=5), cfg, cost)
    assert s.itl_p99_ms >= s.itl_p95_ms
    assert s.itl_p99_ms == pytest.approx(r.itl_ms.p99, rel=0.4)


@pytest.mark.skipif(not CONFIG.exists(), reason="reference configs not present")
def test_qwen3_32b_mean_above_the_p95_is_explained():
    model = prepare_model(json.loads(CONFIG.read_text()))
    base = {"input_tokens": 8192, "gpu": "H100-SXM-80GB", "tp": 2, "kv_dtype": "fp8", "gpu_count": 8, "itl_slo_ms": 50}
    plans = [compute_plan(make_inputs(**base, sequences=s), model) for s in (92, 96, 100)]
    assert all(p.roofline.itl_p99_ms >= p.roofline.itl_p95_ms for p in plans)
    at100 = plans[2]
    assert at100.estimate.mean_inter_token_latency_ms > at100.roofline.itl_p95_ms  # a few long steps lift the mean
    sentence = mean_above_p95(at100)
    assert sentence and "is above the p95" in sentence and "a few steps are very long" in sentence
    assert sentence in metric_help(at100).itl
    light = compute_plan(make_inputs(**base, sequences=8), model)
    assert mean_above_p95(light) is None or light.estimate.mean_inter_token_latency_ms > light.roofline.itl_p95_ms
