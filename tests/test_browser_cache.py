"""The prefix cache in a real headless Chromium: the Simulate page replays an uploaded Mooncake
trace through the plan's tiers, and refuses a malformed one in one line naming the line.

The trace: tenant a sends the same four 512-token blocks twice, tenant b the same ids once;
b finds nothing (keys carry the tenant), a's second request finds 2,048 of its 2,049 tokens:
hit rate 2,048 / (3 x 2,049) = 33.3 %.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, metric_value, running_app, streamlit_argv

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def _line(t_ms: int, ids: list[int], tenant: str) -> str:
    return json.dumps({"timestamp": t_ms, "input_length": 512 * len(ids) + 1, "output_length": 4, "hash_ids": ids, "tenant": tenant})


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    port = free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with running_app(streamlit_argv("app.py", port), port, env, "streamlit", 30) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 1400})
            pg.goto(url)
            pg.get_by_test_id("stMetricValue").first.wait_for(timeout=90_000)
            pg.get_by_role("link", name="Simulate").click()
            pg.get_by_text("Prefix cache: sessions and traces").wait_for(timeout=90_000)
            yield pg
        finally:
            browser.close()


def test_simulate_page_replays_a_trace_and_refuses_a_bad_line(page, tmp_path):
    good = tmp_path / "trace.jsonl"
    good.write_text("\n".join([_line(0, [1, 2, 3, 4], "a"), _line(1000, [1, 2, 3, 4], "b"), _line(2000, [1, 2, 3, 4], "a")]) + "\n")
    page.locator("input[type=file]").last.set_input_files(str(good))
    value = metric_value(page, "Hit rate (simulated)")
    value.wait_for(timeout=60_000)
    assert value.inner_text() == "33.3%"
    assert page.get_by_text("3 trace requests, 2 tenant(s)").count() == 1
    # timed at the trace's own arrival rate: 2 gaps over 2 s (issue 26 leftover)
    assert page.get_by_text("Turns timed at the trace's own arrival rate, 1 requests/s over 2 s").count() == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(0, [1], "a") + "\n" + '{"timestamp": 5, "input_length": 10}\n')
    page.locator("input[type=file]").last.set_input_files(str(bad))
    alert = page.get_by_test_id("stAlert").filter(has_text="Trace, line 2")
    alert.wait_for(timeout=60_000)
    assert alert.inner_text().strip().endswith("Trace, line 2: missing output_length, hash_ids")


def test_the_trace_uploaders_state_the_real_cap_and_a_binary_csv_gets_one_line(page, tmp_path):
    # issue 27 item 9: the uploaders said the server's "16MB per file" where a trace stops at
    # 8 MiB (planner.simulate.MAX_TRACE_BYTES); and the CSV trace skipped the trace checks (size,
    # NUL bytes) the CLI's reader makes: a binary file came back as a parse error of its first row
    from planner.simulate import MAX_TRACE_BYTES

    uploaders = page.get_by_test_id("stFileUploaderDropzoneInstructions")
    texts = [uploaders.nth(i).inner_text() for i in range(uploaders.count())]
    assert texts and all(f"{MAX_TRACE_BYTES >> 20}MB per file" in t for t in texts), texts  # (the Mooncake one holds the last test's file)
    binary = tmp_path / "trace.csv"
    binary.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n0,\x00\x00,5\n")
    page.locator("input[type=file]").first.set_input_files(str(binary))
    alert = page.get_by_test_id("stAlert").filter(has_text="binary data")
    alert.wait_for(timeout=60_000)
    assert alert.inner_text().strip().endswith("Trace (CSV) trace.csv: binary data, not CSV text."), alert.inner_text()
