"""Issue 27, last pass: the headline-first run, the Compare charts on a phone, the PDF labels and
the KV-pool / steady-state words; each test fails on the defect it names."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def test_a_sessions_first_run_stops_after_the_headline_and_the_next_draws_the_rest(monkeypatch):
    """Item 10: the first run sent the whole Plan page (two plotly charts, tables, the sidebar's
    inputs), and a fresh browser built all of it before it painted the first metric: 13-31 s at
    load 10 against 3 s for a one-metric page. Now the first run ends after the headline with the
    handshake that asks for the rest, and any later run draws everything."""
    monkeypatch.setenv("KVP_FIRST_PAINT_PAUSE_S", "0.3")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [m.label for m in at.metric]
    assert "KV bytes / token" in labels
    assert len(at.get("plotly_chart")) == 0  # no chart before the browser has painted the numbers
    assert not any(s.key == "headroom_pct" for s in at.slider)  # nor the inputs
    assert not any(t.key == "latency_model_measured" for t in at.toggle)  # nor the toggle under the headline
    at.run()  # what the handshake's trigger starts
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) >= 2
    assert any(s.key == "headroom_pct" for s in at.slider)
    assert [m.label for m in at.metric][: len(labels)] == labels  # the same headline, now with the rest


def test_the_headline_first_run_is_off_at_zero():
    """Tests (conftest) and operators who want one run set KVP_FIRST_PAINT_PAUSE_S=0: then the
    first run draws the whole page, as before."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert len(at.get("plotly_chart")) >= 2 and any(s.key == "headroom_pct" for s in at.slider)


def test_the_pool_caption_names_each_count_the_pool_gives():
    """Item 8: "KV pool 1,899,303 tokens · 38 sequences" beside "steady state 57" with no sentence
    tying them. gpt-oss-120b at 32,768 tokens on one H200 (vLLM 0.33): the pool is vLLM's GPU KV
    cache size (the start-up log's own figure), the admitted count is the memory limit behind Max
    sequences, the steady-state count charges a running sequence only its window in sliding
    layers, and the log's concurrency is for requests of the full context."""
    from planner.explain import pool_figures
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    plan = compute_plan(make_inputs(max_context=32768, gpu="H200-141GB"), prepare_model(load_preset("gpt-oss-120b")))
    kv, engine = plan.kv_cache, plan.kv_cache.engine
    log = engine.log_lines[0]
    text = pool_figures(plan)
    assert f"GPU KV cache size: {engine.startup_kv_cache_tokens:,} tokens" in log  # the same pool as vLLM will log
    assert f"The KV pool holds {engine.startup_kv_cache_tokens:,} tokens (vLLM's GPU KV cache size)" in text
    assert kv.maximum_sequences_by_memory < kv.steady_state_sequences  # the two counts the issue saw side by side
    assert f"At most {kv.maximum_sequences_by_memory:,} sequences run at once" in text and "the memory limit behind Max sequences" in text
    assert f"In steady state the same memory would hold {kv.steady_state_sequences:,} (more than admission lets in)" in text
    assert f"{engine.startup_max_concurrency:,.2f}x" in log and f"full 32,768-token context instead: {engine.startup_max_concurrency:,.2f}x" in text

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"v": "3", "m": "preset", "n": "gpt-oss-120b", "ctx": "32768", "gpu": "H200-141GB"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("The KV pool holds ") and "In steady state the same memory would hold" in c for c in captions), captions
    assert not any("Steady state: " in c and "vLLM's reservation" in c for c in captions)  # the bare pair of numbers is gone


def test_compare_draws_one_titled_figure_per_panel():
    """Item 7: the Compare chart was one figure with three subplot titles, which collide on a
    phone. Now each panel is its own figure titled inside itself (clear of plotly's toolbar), in
    columns that Streamlit stacks at narrow widths; no subplot titles are left to collide."""
    import json

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert [f["layout"]["title"]["text"] for f in figs] == ["Max sequences", "MiB per sequence", "ITL (ms)"]
    for f in figs:
        assert not f["layout"].get("annotations") and len(f["data"]) == 1 and "xaxis2" not in f["layout"]
        assert f["layout"]["title"]["yanchor"] == "bottom" and f["layout"]["margin"]["t"] >= 40  # the toolbar's row above the title
