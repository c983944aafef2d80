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


def _element_types(node, out: set[str]) -> set[str]:
    for child in getattr(node, "children", {}).values():
        out.add(child.type)
        _element_types(child, out)
    return out


# What the headline-first run may send: the headline's own elements, the sidebar's headings and
# containers, st.html (the page's style and the handshake's script) and the handshake's hidden button.
FIRST_RUN_TYPES = {"main", "sidebar", "event", "flex_container", "column", "title", "subheader", "metric", "markdown", "caption", "html", "button"}
NOTICES = {"success", "info", "warning", "error"}  # a restore notice or an error: content the user must see first


def test_the_first_run_sends_no_element_a_fresh_browser_must_load_extra_code_for(monkeypatch):
    """Item 10: before the first metric, a fresh browser loaded code a one-metric page never needs:
    the Model source segmented control and the Preset box (about twenty chunks) and the custom
    handshake component with Arrow (about 200 KB). The first run now resolves the model without
    drawing its controls and asks for the rest with st.html and a hidden st.button; the next run
    draws the controls with the same values, for the default preset and a share link's."""
    monkeypatch.setenv("KVP_FIRST_PAINT_PAUSE_S", "0.3")
    for params, preset, kv in (({}, "llama-3.1-8b", "128 KiB"), ({"v": "3", "m": "preset", "n": "qwen3-8b", "ctx": "16384"}, "qwen3-8b", "144 KiB")):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(params)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert _element_types(at._tree, set()) <= FIRST_RUN_TYPES | NOTICES, _element_types(at._tree, set()) - FIRST_RUN_TYPES
        assert [b.key for b in at.button] == ["first_paint"]  # the handshake's, hidden by the page style
        assert next(m.value for m in at.metric if m.label == "KV bytes / token") == kv
        at.run()  # the handshake's click
        assert not at.exception, [e.value for e in at.exception]
        assert at.selectbox(key="preset").value == preset and at.session_state["model_source"] == "Preset"
        assert next(m.value for m in at.metric if m.label == "KV bytes / token") == kv
        assert not any(b.key == "first_paint" for b in at.button)
        if params:
            assert at.session_state["plan_values"]["max_context"] == 16384  # the link's inputs survive the deferred controls


def test_a_first_run_with_a_source_other_than_a_preset_draws_its_controls_at_once(monkeypatch):
    """A session whose model comes from the Hub or an upload (a share link) has controls with
    something to say: the first run draws them, before the headline, as before."""
    from planner.plan import make_inputs
    from planner.presets import load_preset
    from planner.share import encode_query
    from planner.source import upload_ref

    monkeypatch.setenv("KVP_FIRST_PAINT_PAUSE_S", "0.3")
    at = AppTest.from_file(APP, default_timeout=60)
    config = load_preset("qwen3-8b")
    at.query_params.update(encode_query(upload_ref(config, "config.json")[0], make_inputs(), upload_config=config))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["model_source"] == "Upload config.json"
    assert at.get("file_uploader"), "the upload control is drawn on the first run"


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
    assert f"{kv.maximum_sequences_by_memory:,} sequences fit with blocks for all their 2,560 reserved tokens, so none is ever preempted: the memory limit behind Max sequences" in text
    assert f"In steady state the same memory would hold {kv.steady_state_sequences:,} (more than admission lets in)" in text
    # a load beyond the limit runs what the pool holds at the mean context (stages.memory_running):
    # 2,048 + 512 / 2 = 2,304 tokens, each sliding layer its 128-token window
    running = plan._load.setup.max_running
    assert running > kv.steady_state_sequences and f"Under more load than {kv.maximum_sequences_by_memory:,}, vLLM takes a request in once its prompt's blocks are free and preempts the newest when the pool runs out: about {running:,} run at once at the mean context of 2,304 tokens" in text
    assert f"{engine.startup_max_concurrency:,.2f}x" in log and f"full 32,768-token context instead: {engine.startup_max_concurrency:,.2f}x" in text

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"v": "3", "m": "preset", "n": "gpt-oss-120b", "ctx": "32768", "gpu": "H200-141GB"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("The KV pool holds ") and "In steady state the same memory would hold" in c for c in captions), captions
    assert not any("Steady state: " in c and "vLLM's reservation" in c for c in captions)  # the bare pair of numbers is gone

    from planner.report import build_pdf
    from planner.source import ModelRef

    pdf = " ".join(_pdftotext(build_pdf(plan, ModelRef(kind="preset", name="gpt-oss-120b"))).split())
    assert " ".join(text.split()) in pdf  # the PDF says the same sentence


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


def _pdftotext(pdf: bytes, *args: str) -> str:
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(pdf)
        f.flush()
        return subprocess.run(["pdftotext", *args, f.name, "-"], capture_output=True, text=True, check=True).stdout


def _words_outside_the_margins(pdf: bytes) -> list[str]:
    """Words (pdftotext -bbox) drawn beyond the report's 18 mm side margins or off the page."""
    import re

    out = []
    for page in _pdftotext(pdf, "-bbox").split("<page ")[1:]:
        width, height = map(float, re.search(r'width="([\d.]+)" height="([\d.]+)"', page).groups())
        margin = 18 * 72 / 25.4 - 1
        for x0, y0, x1, y1, word in re.findall(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', page):
            if float(x0) < margin or float(x1) > width - margin or float(y0) < 0 or float(y1) > height:
                out.append(word)
    return out


def test_pdf_tables_break_long_names_after_a_hyphen_or_slash_never_mid_word():
    """Item 7: the comparison PDF of four plans broke names wherever a 24 mm column ended:
    "meta-lla / ma-organisation", "GB200-NVL72-186G / B", "H100-SXM-80G / B × 4"; the sizing PDF
    printed "GB200-NVL72-186 / GB". Now a cell's long word breaks after a hyphen, slash or @ (the
    four-plan columns are also 28 mm wide), so each name reads whole once the lines that end in a
    separator are joined (pdftotext -raw keeps the hyphens), and nothing is drawn outside the margins."""
    import re

    from planner import sizing
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset
    from planner.report import build_comparison_pdf, build_pdf
    from planner.source import ModelRef

    def joined(text: str) -> str:
        return re.sub(r"(?<=[-/@_])\n", "", text)

    setups = [("deepseek-v3", "H200-141GB", 8), ("deepseek-v3", "B200-180GB", 8), ("llama-3.1-70b", "H100-SXM-80GB", 4), ("llama-3.2-11b-vision", "GB200-NVL72-186GB", 1)]
    entries, repos = [], []
    for letter, (name, gpu, n) in zip("ABCD", setups, strict=True):
        plan = compute_plan(make_inputs(gpu=gpu, gpu_count=n, tp=n), prepare_model(load_preset(name)))
        repo = f"meta-llama-organisation/{name}-Instruct-Extended-Context"
        repos.append(repo)
        entries.append((f"{letter} · {name} × {n} {gpu}", plan, ModelRef(kind="hub", repo_id=repo, revision="main", commit="0123456789abcdef0123456789abcdef01234567")))
    pdf = build_comparison_pdf(entries, "http://localhost:8501/?v=3")
    table = joined(_pdftotext(pdf, "-raw").split("Side by side", 1)[1])
    for repo in repos:
        assert f"{repo}@0123456789ab" in table  # the Model row: the whole Hub label
    assert table.count("GB200-NVL72-186GB") >= 3  # column head, "Differs from A" and GPU rows
    assert "H100-SXM-80GB" in table and "llama-3.2-11b-vision" in table
    assert _words_outside_the_margins(pdf) == []

    model = prepare_model(load_preset("llama-3.1-8b"))
    found = sizing.size(model, users=100, gpus=["H100-SXM-80GB", "GB200-NVL72-186GB"], tps=(1, 2), kv_dtypes=("bf16",))
    pdf = build_pdf(compute_plan(make_inputs(), model), ModelRef(kind="preset", name="llama-3.1-8b"), "http://localhost:8501/?v=3", sizing=found)
    rows = joined(_pdftotext(pdf, "-raw").split("Sizing", 1)[1].split("Searched", 1)[0])
    assert rows.count("GB200-NVL72-186GB") == 2 and "186\nGB" not in rows  # the two GB200 rows, unbroken
    assert _words_outside_the_margins(pdf) == []


def test_wrap_cell_breaks_at_spaces_then_separators_then_characters():
    """Helvetica 8 pt (Adobe's metrics): "GB200-NVL72-186GB" is 79.6 pt, "GB200-NVL72-" 54.7 pt; a digit
    or a-f is 556/1000 em = 4.448 pt, so six fit in 30 pt (26.7) and seven do not (31.1)."""
    from planner.report import wrap_cell

    assert wrap_cell("GB200-NVL72-186GB", 60) == ["GB200-NVL72-", "186GB"]
    assert wrap_cell("GPU H100-SXM-80GB, GPUs 4", 200) == ["GPU H100-SXM-80GB, GPUs 4"]  # fits: one line, as typed
    assert wrap_cell("a  b\nc", 200) == ["a b c"]  # white space collapses as in a Paragraph
    assert wrap_cell("0123456789abcdef", 30) == ["012345", "6789ab", "cdef"]  # no separator: characters
    assert wrap_cell("", 30) == [""]


def test_the_geometry_cards_weights_name_the_per_gpu_figure_the_memory_chart_shows():
    """The geometry card said "Weights: 14.96 GiB" and the memory chart's bar "Weights 14.99 GiB"
    for the same llama-3.1-8b plan: the bar is what one GPU holds as loaded (the weights plus the
    RoPE cos/sin cache, vLLM's RotaryEmbedding buffer); at TP 4 a quarter of the model. The card
    now names both, and the per-GPU one is the chart's."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    assert "14.96 GiB (bf16)" in text and "**14.99 GiB per GPU** as loaded" in text and "RoPE cos/sin cache" in text
    tp4 = AppTest.from_file(APP, default_timeout=60)
    tp4.query_params.update({"v": "3", "m": "preset", "n": "llama-3.1-8b", "tp": "4", "gpus": "4"})
    tp4.run()
    assert not tp4.exception, [e.value for e in tp4.exception]
    text = " ".join(m.value for m in tp4.markdown)
    assert "14.96 GiB (bf16)" in text and "GiB per GPU** as loaded" in text and "**14.99 GiB per GPU**" not in text
