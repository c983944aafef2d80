"""The Plan page's cache card (AppTest): a session workload with a CPU tier shows its hit rate,
TTFT with and without the tier, the tiers and the chart; the numbers are the plan's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from planner.plan import compute_plan, make_inputs  # noqa: E402
from planner.source import preset_ref  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
WORKLOAD = dict(sessions_per_min=60.0, turns=6, think_time_s=120.0, cpu_tier_gib=128.0)
CHAT = dict(system_tokens=1024, tool_tokens=1024, shared_prefix_tokens=2048, retrieval_tokens=0, history_tokens=0, user_tokens=600, output_tokens=300)


def _page(**values) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["preset"] = "llama-3.1-8b"
    for key, value in values.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_plan_page_cache_card_shows_the_plans_numbers():
    at = _page(**WORKLOAD, **CHAT)
    values = at.session_state["plan_values"]
    _, model = preset_ref("llama-3.1-8b")
    plan = compute_plan(make_inputs(**{k: v for k, v in values.items() if v is not None}), model)
    cache = plan.cache
    assert cache.applies and [t.name for t in cache.tiers] == ["gpu", "cpu"]
    metrics = {m.label: m for m in at.metric}
    assert metrics["Hit rate"].value == f"{cache.hit_rate:.1%}"
    assert metrics["Hit rate"].delta == f"{(cache.hit_rate - cache.hit_rate_gpu_only) * 100:+.1f} pts by CPU DRAM"
    assert "ms" in metrics["TTFT p95"].value and "vs GPU pool alone" in metrics["TTFT p95"].delta
    tables = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("| Cache |")]  # md() escapes the dots
    assert len(tables) == 1 and tables[0].splitlines()[0] == "| Cache | GPU pool + CPU DRAM | GPU pool alone | no prefix cache |"  # a column a scenario
    assert f"| TTFT p95 | {cache.ttft.p95_ms:,.1f} ms | {cache.ttft_gpu_only.p95_ms:,.1f} ms | {cache.ttft_no_cache.p95_ms:,.1f} ms |" in tables[0]
    assert metrics["Prefill GPUs freed"].value == f"{cache.gpu_seconds_saved_per_hour / 3600:,.2f}"
    assert any(m.value == "**Prefix-cache hit rate and p95 TTFT against the CPU tier a replica**" for m in at.markdown)


def test_plan_page_without_a_workload_has_no_cache_card():
    at = _page(**CHAT)
    assert not any("Prefix cache under sessions" in m.value for m in at.markdown)
    assert "Hit rate" not in {m.label for m in at.metric}


def test_plan_page_says_why_the_cache_is_not_modelled():
    at = _page(**WORKLOAD, **CHAT, runtime="transformers")
    assert any("Not modelled: a prefix cache needs a paged engine" in i.value for i in at.info)


def test_sglang_runtime_card_shows_the_radix_cache_and_hicache_flags():
    """Runtime sglang: the card models SGLang's radix cache (it used to say 'Not modelled') and
    gives HiCache's flags to add to SGLang's command, no vLLM connector."""
    at = _page(**WORKLOAD, **CHAT, runtime="sglang")
    assert not any("Not modelled" in i.value for i in at.info)
    assert "Hit rate" in {m.label for m in at.metric}
    texts = [m.value for m in at.markdown]
    assert any(t.startswith("SGLang hierarchical cache, to add to the start-up command above") for t in texts)
    assert not any("connector), also in the start-up command" in t for t in texts)
    assert any(c.value == "python -m sglang.launch_server ... --enable-hierarchical-cache --hicache-size 137" for c in at.code)
