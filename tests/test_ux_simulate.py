"""Issue 27 item 4: the simulator counts rejections in its verdict with their reason, and offers
built-in length profiles (library and CLI; the page is tested in test_ux_pages.py)."""

from __future__ import annotations

import math

import pytest

from planner import simulate as sim
from planner.errors import PlannerError
from planner.simulate import Request, SimConfig, StepCost

FIXED = StepCost(weights_bytes=1e9, kv_bytes_per_token=0, bandwidth_bytes_per_s=1e11, mbu=1.0, flops_per_token=0, peak_flops=1e15, mfu=1.0)  # a 10 ms step


def _mixed(n: int = 300) -> list[Request]:
    """The issue's trace: prompts log-spaced from 50 to 16,000 tokens, one request every 0.5 s."""
    return [Request(id=k, arrival_s=k * 0.5, prompt_tokens=round(50 * (16_000 / 50) ** (k % 30 / 29)), output_tokens=64) for k in range(n)]


def test_rejected_prompts_are_counted_in_the_verdict_with_their_reason():
    reqs = _mixed()
    # prompts above 8,192 tokens: exponents k % 30 with 50 * 320^(e/29) > 8192 -> e >= 26 (8,843; 10,898...; 16,000): 4 of every 30
    over = sum(1 for r in reqs if r.prompt_tokens > 8192)
    assert over == 40
    r = sim.simulate(reqs, SimConfig(total_blocks=20_000, max_num_batched_tokens=8192, policy="fifo"), FIXED)
    assert r.requests_rejected == over and r.overload.rejected == over
    (why,) = r.rejections
    assert (why.reason, why.count, why.limit_tokens, why.largest_tokens) == ("step_budget", 40, 8192, 16_000)
    assert "40 of 300 requests (13%) were rejected at arrival" in r.overload.message
    assert "longer than the 8,192-token step budget" in r.overload.message and "chunked" in r.overload.message
    label = sim.verdict_label(r.overload, r.requests_total)
    assert label.startswith("rejects 40 of 300") and "keeps up" in label  # the admitted ones keep up: both said
    chunked = sim.simulate(reqs, SimConfig(total_blocks=20_000, max_num_batched_tokens=8192, policy="chunked"), FIXED)
    assert chunked.requests_rejected == 0 and chunked.rejections == [] and sim.verdict_label(chunked.overload, 300) == "keeps up"


def test_pool_rejection_names_the_pool():
    # pool 8 blocks x 16 tokens = 128: prompt 100 + output 200 needs ceil(299 / 16) = 19 blocks
    r = sim.simulate([Request(id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=200)], SimConfig(total_blocks=8), FIXED)
    assert [(x.reason, x.count, x.limit_tokens) for x in r.rejections] == [("pool", 1, 128)]
    assert "exceeds the whole KV pool of 128 tokens" in r.overload.message
    assert sim.verdict_label(r.overload, 1) == "rejects 1 of 1"  # one request: no rate to judge


@pytest.mark.parametrize("name", list(sim.LENGTH_PROFILES))
def test_length_profiles_hit_their_stated_percentiles(name):
    shape = sim.LENGTH_PROFILES[name]
    reqs = sim.profile_requests(2.0, 20_000, name, seed=7)
    prompts = sorted(r.prompt_tokens for r in reqs)
    outputs = sorted(r.output_tokens for r in reqs)
    # nearest-rank percentiles of 20,000 log-normal draws are within 5 % of the parameters
    for got, want in ((prompts[9_999], shape.prompt_p50), (prompts[18_999], shape.prompt_p95), (outputs[9_999], shape.output_p50), (outputs[18_999], shape.output_p95)):
        assert math.isclose(got, want, rel_tol=0.05), (name, got, want)
    assert reqs == sim.profile_requests(2.0, 20_000, name, seed=7)  # seeded
    assert [r.arrival_s for r in reqs] == [r.arrival_s for r in sim.poisson_requests(2.0, 20_000, 1, 1, seed=7)]  # the same arrivals


def test_length_profile_caps_at_the_context_and_names_unknown_profiles():
    reqs = sim.profile_requests(1.0, 2_000, "agent", max_tokens=8_192)
    assert max(r.prompt_tokens + r.output_tokens for r in reqs) == 8_192  # agent's p95 prompt is 40,000: many hit the cap
    with pytest.raises(PlannerError, match="unknown length profile; choose one of chat, rag, agent, summarisation"):
        sim.profile_requests(1.0, 10, "chatt")


def test_cli_lengths_profile_and_rejections_in_the_verdict():
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "planner", "simulate", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--max-context", "32768", "--lengths", "agent", "--requests", "60", "--rate", "0.5", "--policy", "fifo"]
    out = subprocess.run([*argv, "--json"], capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["requests_rejected"] > 0 and data["rejections"][0]["reason"] == "step_budget"  # agent prompts (p50 12,000) over the 8,192-token step
    assert data["overload"]["rejected"] == data["requests_rejected"]
    text = subprocess.run(argv, capture_output=True, text=True, cwd=root, timeout=120).stdout
    assert f"{data['requests_rejected']:,} of 60 requests" in text and "8,192-token step budget" in text
    helptext = subprocess.run([sys.executable, "-m", "planner", "simulate", "--help"], capture_output=True, text=True, cwd=root, timeout=60).stdout
    flat = " ".join(helptext.split())  # the help's numbers are the library's
    for shape in sim.LENGTH_PROFILES.values():
        assert f"{shape.name} {shape.prompt_p50:,}/{shape.prompt_p95:,} + {shape.output_p50:,}/{shape.output_p95:,}" in flat, shape.name


def test_plan_requests_is_what_the_cli_and_the_page_replay():
    """One choice of requests for a plan's simulation (the CLI capped a profile's draws at the
    context, the page also at 2 tokens or more): a trace wins, then a length profile, then the plan's lengths."""
    from types import SimpleNamespace

    ctx = SimpleNamespace(maximum_context_tokens=300, input_tokens=100, reserved_output_tokens=20)
    plain = sim.plan_requests(ctx, 2.0, 5, seed=1)
    assert [(r.prompt_tokens, r.output_tokens) for r in plain] == [(100, 20)] * 5
    assert [r.arrival_s for r in plain] == [r.arrival_s for r in sim.poisson_requests(2.0, 5, 100, 20, seed=1)]
    drawn = sim.plan_requests(ctx, 2.0, 200, lengths="rag", seed=1)
    assert max(r.prompt_tokens + r.output_tokens for r in drawn) <= 300  # the context caps the profile (RAG's p50 prompt is longer)
    traced = sim.plan_requests(ctx, 2.0, 5, lengths="rag", trace_text="arrival_s,prompt_tokens,output_tokens\n0,7,3\n", seed=1)
    assert [(r.prompt_tokens, r.output_tokens) for r in traced] == [(7, 3)]


@pytest.mark.parametrize(
    "text, shown",
    [
        ("arrival_s,prompt_tokens,output_tokens\n0.1,100,20\n0.2,abc,20\n", "Trace, row 3 prompt_tokens: not an integer (ASCII digits) (got 'abc')"),
        ("arrival_s,prompt\n0.1,100\n", "Trace header: missing column(s) prompt_tokens, output_tokens; expected arrival_s,prompt_tokens,output_tokens"),
    ],
)
def test_simulate_page_names_a_bad_trace_row_once(text, shown):
    """The page's line for a refused trace names the row and says the reason once (it read
    "not an integer (ASCII digits) (got 'abc'): not an integer (ASCII digits) (got 'abc')")."""
    pytest.importorskip("streamlit")
    from pages.ui.simulation import run_error

    with pytest.raises(PlannerError) as refused:
        sim.parse_trace_csv(text)
    assert run_error(refused.value) == shown
