"""The shared-deployment server (``make serve``) in a real headless Chromium (issue 15).

The server is started with the exact command ``make -n serve`` prints (port and address
overridden), so these tests check what the README documents: the health check, XSRF
protection, the probe turned off, and that a link full of markdown and image payloads renders
them as text: no live link, no image, and not one request to the attacker's host.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, metric_value, running_app
from tests.hostile import EVIL, MARKDOWN_LINK

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def _serve_command(port: int) -> str:
    """The last line ``make -n serve`` prints: the streamlit command of the shared deployment."""
    out = subprocess.run(["make", "-s", "-n", "serve", f"PORT={port}", "HOST=127.0.0.1"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    line = out.stdout.strip().splitlines()[-1]
    assert "scripts/run_app.py app.py" in line and "KVP_DISABLE_PROBE=1" in line, line  # the launcher: `streamlit run` + preloaded imports
    return line


@pytest.fixture(scope="module")
def serve():
    port = free_port()
    env = dict(os.environ, KVP_FIRST_PAINT_PAUSE_S="0", HF_HUB_OFFLINE="1")
    with running_app(["bash", "-c", "exec env " + _serve_command(port)], port, env, "make serve", 60) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_health_check_and_xsrf(serve):
    with urllib.request.urlopen(f"{serve}/_stcore/health", timeout=5) as r:
        assert r.status == 200 and r.read().strip() == b"ok"
        cookies = r.headers.get_all("Set-Cookie") or []
    assert any(c.startswith("_streamlit_xsrf=") for c in cookies), cookies  # XSRF protection is on: a token is issued
    # an upload without the XSRF token is refused before the app sees it
    req = urllib.request.Request(f"{serve}/_stcore/upload_file/session/file", data=b"x" * 10, method="PUT")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=5)
    assert exc.value.code == 403


def test_hostile_link_renders_text_not_links_or_images(serve, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    attacker: list[str] = []

    def record(route):
        attacker.append(route.request.url)
        route.abort()

    context.route(re.compile(rf"https?://[^/]*{re.escape(EVIL)}"), record)
    page = context.new_page()
    page.goto(f"{serve}/?{urlencode(MARKDOWN_LINK)}", wait_until="commit")
    value = metric_value(page, "KV bytes / token")
    sync_api.expect(value).to_have_text("128 KiB", timeout=90_000)
    warnings = page.get_by_test_id("stAlert")
    sync_api.expect(warnings.first).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1000)  # give any rendered image the time to be fetched
    text = page.locator("body").inner_text().replace("\u2060", "")  # word joiners break autolinks, invisibly
    assert f"![pixel](https://{EVIL}/n.png)" in text and f"[click me](https://{EVIL}/gpu)" in text  # shown as the characters they are
    # anchors and images whose host is the attacker's (the app's own links carry the query string)
    hosts = page.evaluate("""() => [...document.querySelectorAll('a[href], img[src]')]
        .map(e => { try { return new URL(e.href || e.src, location.href).hostname } catch (x) { return '' } })""")
    assert not [h for h in hosts if h.endswith(EVIL)], hosts
    assert attacker == []
    probe = context.new_page()
    probe.goto(f"{serve}/probe", wait_until="commit")
    sync_api.expect(probe.get_by_text("KVP_DISABLE_PROBE").first).to_be_visible(timeout=90_000)
    context.close()


def test_no_request_leaves_the_origin(serve, browser):
    """Every page of the shared deployment loads with nothing fetched from a third party (issue 24:
    the ":material/memory:" favicon made each browser ask fonts.gstatic.com)."""
    context = browser.new_context()
    outside: list[str] = []

    def gate(route):
        url = route.request.url
        if url.startswith((serve + "/", "data:", "blob:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", gate)
    page = context.new_page()
    page.goto(f"{serve}/", wait_until="commit")
    sync_api.expect(page.get_by_test_id("stMetricValue").first).to_be_visible(timeout=90_000)
    for name in ("Compare", "Simulate", "Size", "Probe"):
        page.get_by_test_id("stSidebarNav").get_by_text(name, exact=True).click()
        page.wait_for_url(re.compile(rf"/{name.lower()}"), timeout=30_000)
        page.wait_for_timeout(1500)  # icons, charts and the favicon of the new page
    favicon = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    context.close()
    assert outside == []
    assert favicon and all(h.startswith(serve + "/") for h in favicon), favicon


def test_make_serve_workers_2_behind_nginx(browser, tmp_path):
    """``make serve WORKERS=2``: both workers answer, nginx answers the health check, and a page
    served through the proxy shows its plan over the proxied websocket, pinned by the route cookie."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("nginx is not installed (make system-deps)")
    port = free_port()
    while any(_in_use(p) for p in (port + 1, port + 2)):
        port = free_port()
    out = subprocess.run(["make", "-s", "-n", "serve", "WORKERS=2", f"PORT={port}", "HOST=127.0.0.1"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    line = out.stdout.strip().splitlines()[-1]
    env = dict(os.environ, KVP_FIRST_PAINT_PAUSE_S="0", HF_HUB_OFFLINE="1")
    with running_app(["bash", "-c", "exec env " + line], port, env, "make serve WORKERS=2", 120) as url:
        for worker in (port + 1, port + 2):
            with urllib.request.urlopen(f"http://127.0.0.1:{worker}/_stcore/health", timeout=5) as r:
                assert r.read().strip() == b"ok"
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as r:
            assert r.read().strip() == b"ok"
            assert any(c.startswith("kvp_route=") for c in r.headers.get_all("Set-Cookie") or [])  # the affinity cookie
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{url}/", wait_until="commit")
        value = metric_value(page, "KV bytes / token")
        sync_api.expect(value).to_have_text("128 KiB", timeout=90_000)  # rendered through the websocket, via nginx
        assert any(c["name"] == "kvp_route" for c in context.cookies())
        context.close()


def _in_use(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
