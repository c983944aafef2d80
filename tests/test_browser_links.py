"""The share-link restore notice in a real headless Chromium at 1280 and 390 px (issue 27 item 5):
one notice lists the dropped key with its "did you mean", the corrected GPU and the kept
comparison, and it fits the window (no text past the right edge on a phone)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, running_app

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

LINK = {"v": "2", "m": "preset", "n": "llama-3.1-8b", "gpuz": "H200-141GB", "sequences": "64", "gpu": "B200-18GB", "cmp": "3", "ca": "plan~H200-141GB~1~1~bf16~vllm", "cb": "plan~B200-180GB~1~1~bf16~vllm"}


@pytest.fixture(scope="module")
def server():
    port = free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    argv = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
            "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]  # fmt: skip
    with running_app(argv, port, env, "streamlit", 30) as url:
        yield url


@pytest.mark.parametrize(("width", "height"), [(1280, 900), (390, 844)])
def test_restore_notice_lists_every_part_and_fits(server, width, height, tmp_path):
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport={"width": width, "height": height}, color_scheme="light")
        try:
            page = context.new_page()
            page.goto(f"{server}/?{urlencode(LINK)}")
            notice = page.locator(".st-key-restore_warnings")
            notice.wait_for(timeout=90_000)
            text = notice.inner_text()
            for part in ("did you mean 'gpu'?", "did you mean 'seq'?", "did you mean B200-180GB?", "the link's comparison (cmp, ca, cb) is kept", "no plan C (cc)"):
                assert part in text, text
            box = notice.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (box, width)
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1  # nothing pushes the page sideways
            ARTIFACTS.mkdir(exist_ok=True)
            notice.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"restore-notice-{width}.png"))
        finally:
            context.close()
