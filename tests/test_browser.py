"""End to end in a real headless Chromium: the app served by ``streamlit run``, driven by Playwright.

Uses the system Chromium (``/usr/bin/chromium``, installed by ``.ci/run``) through
``executable_path``; ``playwright install`` is never needed. Screenshots go to ``artifacts/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    log = tempfile.TemporaryFile()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.read().strip() == b"ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.seek(0)
            pytest.fail(f"streamlit did not start: {log.read().decode(errors='replace')[-2000:]}")
        time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 1000},
            color_scheme="light",
        )
        try:
            yield context
        finally:
            context.close()


def _metric_value(page, label: str):
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id("stMetricValue")


def _choose(page, label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_change_kv_dtype_updates_metric_and_screenshot(server, browser_context):
    expect = sync_api.expect
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_context.new_page()
    page.goto(f"{server}/", wait_until="domcontentloaded")
    value = _metric_value(page, "KV bytes / token")
    expect(value).to_have_text("128 KiB", timeout=30_000)
    expect(_metric_value(page, "Max sequences")).to_have_text("179")
    page.get_by_test_id("stPlotlyChart").first.wait_for(timeout=15_000)

    _choose(page, "KV cache dtype", "fp8 (8-bit)")
    expect(value).to_have_text("64 KiB", timeout=15_000)
    expect(_metric_value(page, "MiB / reserved sequence")).to_have_text("160 MiB")
    expect(page.get_by_test_id("stException")).to_have_count(0)
    page.wait_for_timeout(500)  # let plotly finish drawing before the screenshot
    page.screenshot(path=str(ARTIFACTS / "plan_fp8.png"))
    assert (ARTIFACTS / "plan_fp8.png").stat().st_size > 10_000

    # Narrow and dark: the same plan stays readable (screenshot for inspection).
    page.set_viewport_size({"width": 420, "height": 900})
    page.emulate_media(color_scheme="dark")
    page.reload(wait_until="domcontentloaded")  # a new session: back to the default plan
    expect(_metric_value(page, "KV bytes / token")).to_have_text("128 KiB", timeout=30_000)
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "plan_narrow_dark.png"))
    page.close()
