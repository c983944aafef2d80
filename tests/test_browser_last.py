"""Issue 27, last pass, in a real headless Chromium: the headline-first run (item 10) and the
Compare charts on a phone (item 7)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, metric_value, running_app

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


# Page clock times of the first metric, the first chart and every message the browser sends.
WATCH = """
window.__kvp = {sent: [], metric: null, chart: null};
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (d) { window.__kvp.sent.push(performance.now()); return send.call(this, d); };
new MutationObserver(() => {
    const k = window.__kvp;
    if (k.metric === null && document.querySelector('[data-testid=stMetricValue]')) k.metric = performance.now();
    if (k.chart === null && document.querySelector('[data-testid=stPlotlyChart]')) k.chart = performance.now();
}).observe(document, {subtree: true, childList: true});
"""


# The JavaScript files the page fetched before a time (performance.now()), by file name.
EARLY_CODE = "(t) => performance.getEntriesByType('resource').filter(e => e.startTime < t && e.name.endsWith('.js')).map(e => e.name.split('/').pop())"
# Streamlit's chunks for the segmented control, the select box, a custom component and Arrow.
LATE_CODE = ("ButtonGroup.", "Selectbox.", "BidiComponent.", "ComponentInstance.", "serialization.", "recordbatch.")


def test_the_first_metric_comes_alone_and_the_charts_and_inputs_follow_without_a_click(tmp_path):
    port = free_port()
    env = dict(os.environ, KVP_FIRST_PAINT_PAUSE_S="0.3", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    argv = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
            "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    with running_app(argv, port, env, "streamlit", 60) as url, sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                                                       viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.add_init_script(WATCH)
            page.goto(f"{url}/", wait_until="commit")
            value = metric_value(page, "KV bytes / token")
            sync_api.expect(value).to_have_text("128 KiB", timeout=120_000)
            # the rest arrives on the browser's own request: the memory chart, the chart tabs, the inputs
            sync_api.expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible(timeout=120_000)
            sync_api.expect(page.get_by_test_id("stSidebar").get_by_text("Headroom", exact=False).first).to_be_visible(timeout=60_000)
            assert page.get_by_test_id("stPlotlyChart").count() >= 2
            seen = page.evaluate("() => window.__kvp")
            # the metric was on screen before any chart, and the charts came after a message the browser
            # sent once it had drawn the metric (the handshake's rerun); before, one run sent everything
            assert seen["metric"] is not None and seen["chart"] is not None and seen["metric"] < seen["chart"], seen
            assert any(seen["metric"] <= t <= seen["chart"] for t in seen["sent"]), seen
            sync_api.expect(value).to_have_text("128 KiB")  # the same plan, drawn once more with the rest
            icons = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
            assert icons and all(h.startswith(url + "/") for h in icons), icons  # the served file, never a third party's icon
            # before the metric the browser fetched no code for the sidebar's model-source controls or
            # for a custom component (its frame code and Arrow): a one-metric page needs none of it
            early = page.evaluate(EARLY_CODE, seen["metric"])
            assert early and not [name for name in early if name.startswith(LATE_CODE)], early
            # a tab that draws no frames (hidden) still gets the rest: the handshake's timer asks
            hidden = context.new_page()
            hidden.add_init_script("window.requestAnimationFrame = () => 0;")
            hidden.goto(f"{url}/", wait_until="commit")
            sync_api.expect(hidden.get_by_test_id("stSidebar").get_by_text("Headroom", exact=False).first).to_be_visible(timeout=60_000)
            assert hidden.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text="Preset").count() == 1
        finally:
            context.close()


def test_compare_chart_titles_do_not_run_into_each_other_at_390(tmp_path):
    """Three subplots in one figure put "Max sequences", "MiB per sequence" and "ITL (ms)" side by
    side in 350 px: the first two touched (right edge 148 px, next left edge 150 px) and read as
    one. Each title must be clear of every other title and inside its own chart, at 390 and 1280 px."""
    port = free_port()
    env = dict(os.environ, KVP_FIRST_PAINT_PAUSE_S="0", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    argv = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
            "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    boxes = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')].flatMap((chart, i) => {
        const c = chart.getBoundingClientRect();
        return [...chart.querySelectorAll('.gtitle, .annotation-text')].map(t => {
            const r = t.getBoundingClientRect();
            return {chart: i, text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom, inside: r.left >= c.left - 1 && r.right <= c.right + 1 && r.top >= c.top - 1 && r.bottom <= c.bottom + 1};
        });
    })"""
    with running_app(argv, port, env, "streamlit", 60) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/", wait_until="commit")
            sync_api.expect(page.get_by_test_id("stMetricValue").first).to_be_visible(timeout=120_000)
            page.get_by_test_id("stSidebarNav").get_by_text("Compare", exact=True).click()
            page.wait_for_function("() => document.querySelectorAll('[data-testid=stPlotlyChart] .gtitle, [data-testid=stPlotlyChart] .annotation-text').length >= 3", timeout=120_000)
            for width, height in ((1280, 900), (390, 844)):
                page.set_viewport_size({"width": width, "height": height})
                page.wait_for_timeout(1500)  # plotly redraws at the new width
                titles = page.evaluate(boxes)
                assert sorted(t["text"] for t in titles) == ["ITL (ms)", "Max sequences", "MiB per sequence"], titles
                assert all(t["inside"] for t in titles), (width, titles)
                for i, a in enumerate(titles):
                    for b in titles[i + 1:]:
                        apart = a["right"] + 4 <= b["left"] or b["right"] + 4 <= a["left"] or a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
                        assert apart, (width, a, b)
        finally:
            browser.close()
