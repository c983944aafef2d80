"""scripts/run_app.py, the app's launcher (issue 27 item 10, first paint on a fresh server):
``streamlit run`` with a session's first-run imports done once the server listens, before it
serves its first request. ``make run``, both ``make serve`` paths and the container image start the app with it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, metric_value

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = "scripts/run_app.py app.py"


def _make_line(*args: str) -> str:
    """The command ``make -n`` prints last for a target: the one that starts the app."""
    out = subprocess.run(["make", "-s", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_make_run_make_serve_and_the_image_start_the_app_with_the_launcher():
    assert f"/python {LAUNCHER} --server.headless true --server.port 9200 " in _make_line("run", "PORT=9200")
    assert f"/python {LAUNCHER} " in _make_line("serve", "PORT=9200") and "KVP_DISABLE_PROBE=1" in _make_line("serve", "PORT=9200")
    workers = _make_line("serve", "WORKERS=2", "PORT=9200")
    assert "scripts/serve.py --workers 2" in workers and workers.split(" -- ", 1)[1].split()[1:3] == LAUNCHER.split()
    docker = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "COPY scripts/run_app.py scripts/" in docker
    assert re.search(r'^CMD \["python", "scripts/run_app.py", "app.py", ', docker, re.M)


# A fresh process: preload as the launcher does, then a session's first run of app.py (the
# headline-first run, pause on): the modules that run still had to import.
FIRST_RUN = """
import json, os, sys
from pathlib import Path
os.environ["KVP_FIRST_PAINT_PAUSE_S"] = "0.3"
sys.path.insert(0, "scripts")
import run_app
from streamlit.testing.v1 import AppTest
AppTest.from_string('import streamlit as st\\nst.metric("a", "b")\\n').run()  # Streamlit's own first-run imports
count, _ = run_app.preload(Path("app.py").resolve())
before = set(sys.modules)
at = AppTest.from_file(str(Path("app.py").resolve()), default_timeout=60)
at.run()
print(json.dumps({"preloaded": count, "metrics": [m.label for m in at.metric], "charts": len(at.get("plotly_chart")),
                  "new": sorted(set(sys.modules) - before), "had": sorted(m for m in before if m.startswith(("planner", "pages")))}))
"""


def test_the_preload_imports_everything_a_sessions_first_run_imports():
    """Without the launcher a fresh server's first session imported the planner (pydantic models,
    dataclasses, the engines' tables, numpy and PIL for the favicon) before its first metric: here
    that run may import nothing of the project nor of those libraries anew."""
    out = subprocess.run([sys.executable, "-c", FIRST_RUN], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "KV bytes / token" in seen["metrics"] and seen["charts"] == 0  # the headline-only first run
    assert {"planner.plan", "planner.controls", "pages.ui.results", "pages.ui.state"} <= set(seen["had"]) and seen["preloaded"] > 100
    late = [m for m in seen["new"] if m.split(".")[0] in ("planner", "pages", "pydantic", "pydantic_core", "numpy", "PIL", "plotly")]
    assert late == [], late


# The collector during the preload (scripts/run_app.py preload): off while it imports, back on after,
# and what the preload left alive frozen (gc.freeze) so later collections skip it.
GC_CHECK = """
import gc, json, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import run_app
seen = []
real = run_app._try
run_app._try = lambda name, step, *args: (seen.append(gc.isenabled()), real(name, step, *args))
frozen = gc.get_freeze_count()
count, _ = run_app.preload(Path("app.py").resolve())
print(json.dumps({"during": sorted(set(seen)), "after": gc.isenabled(), "frozen": gc.get_freeze_count() - frozen, "count": count}))
"""


def test_the_preload_runs_without_the_collector_and_freezes_what_it_imported():
    """Each of the preload's ~250 modules allocates: with the collector on, its full collections walked
    the server's whole heap again and again (0.53 s median against 0.73 s with it on, 5 fresh servers
    each, 2 cores). It is back on when the preload returns, and the modules are frozen."""
    out = subprocess.run([sys.executable, "-c", GC_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["during"] == [False] and seen["after"] is True and seen["count"] > 100
    assert seen["frozen"] > 10_000  # the imported modules' objects: never garbage while the server runs


def test_script_imports_reads_top_level_imports_in_order(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import run_app
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    script = tmp_path / "s.py"
    script.write_text("from __future__ import annotations\nimport json\nfrom pages.ui import state, md_helper_that_is_not_a_module\n"
                      "def f():\n    import planner.hub\nst.set_page_config(page_title='x')\n")
    assert run_app.script_imports(script) == ["json", "pages.ui", "pages.ui.state"]  # planner.hub is lazy: not preloaded
    assert not run_app.sets_page_icon(script)
    assert run_app.sets_page_icon(ROOT / "app.py")  # app.py's favicon: numpy and PIL are preloaded for it
    assert run_app.first_run_modules(script)[-1] == "pages.ui.state"


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)")
def test_the_launcher_serves_the_app_and_the_first_paint_handshake_works(tmp_path):
    """``make run``'s command on a fresh server: the health check answers, the preload reports
    itself, and in Chromium the first metric comes, then the charts and inputs without a click
    (the first run's handshake), after a preload that ended before the health check answered."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from tests.appserver import running_app

    port = free_port()
    line = _make_line("run", f"PORT={port}").replace(" --server.headless true", " --server.headless true --server.address 127.0.0.1", 1)
    env = dict(os.environ, KVP_FIRST_PAINT_PAUSE_S="0.3", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    log = tmp_path / "server.log"
    with running_app(["bash", "-c", f"exec {line} 2>{log}"], port, env, "make run", 60) as url:
        # done before the health check answered: a background preload competed with the first
        # browser's load of Streamlit's frontend (2.4 s instead of 0.9 s at load 4) and the first
        # session waited for it anyway
        assert "Preloaded" in log.read_text(), log.read_text()[-2000:]
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                # the fresh server's first visit is a deep link: it must run app.py's navigation, not
                # Streamlit's older pages/ layout (which lists the files "app", "compare", ... and runs
                # pages/compare.py alone until someone opens /)
                deep = browser.new_page(viewport={"width": 1280, "height": 900})
                deep.goto(f"{url}/compare", wait_until="commit")
                _expect_the_apps_navigation(sync_api, deep)
                deep.close()
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{url}/", wait_until="commit")
                value = metric_value(page, "KV bytes / token")
                sync_api.expect(value).to_have_text("128 KiB", timeout=60_000)
                sync_api.expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible(timeout=60_000)
                sync_api.expect(page.get_by_test_id("stSidebar").get_by_text("Headroom", exact=False).first).to_be_visible(timeout=60_000)
                assert page.get_by_test_id("stException").count() == 0
            finally:
                browser.close()
    text = log.read_text()
    assert re.search(r"Preloaded \d+ modules in [\d.]+ s\.", text) and "preload step" not in text, text[-2000:]  # done, no step failed


def _expect_the_apps_navigation(sync_api, tab):
    """The sidebar lists app.py's pages ("Plan", ...), not the older layout's file names ("app", "compare")."""
    nav = tab.get_by_test_id("stSidebarNav")
    sync_api.expect(nav.get_by_text("Plan", exact=True)).to_be_visible(timeout=60_000)
    assert nav.get_by_text("app", exact=True).count() == 0 and nav.get_by_text("compare", exact=True).count() == 0
    return nav


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)")
@pytest.mark.parametrize("page", ["compare", "probe"])
def test_a_deep_link_on_a_fresh_plain_streamlit_run_server_runs_the_apps_navigation(page):
    """Without the launcher (plain ``streamlit run app.py``), a fresh server's first visit to a deep
    link ran the page file alone under Streamlit's older pages/ layout (sidebar "app", "compare",
    ...; no app.py) until someone opened /; pages.ui.navigation.through_app reruns it through
    app.py's navigation, on the same page."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from benchmarks.appserver import streamlit_argv
    from tests.appserver import running_app

    port = free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with running_app(streamlit_argv("app.py", port), port, env, "streamlit run", 60) as url:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                tab = browser.new_page(viewport={"width": 1280, "height": 900})
                tab.goto(f"{url}/{page}", wait_until="commit")
                current = _expect_the_apps_navigation(sync_api, tab).locator("a[aria-current='page']")
                sync_api.expect(current).to_contain_text(page.title(), timeout=30_000)  # the same page (its icon name precedes the title), now through app.py
                assert tab.get_by_test_id("stException").count() == 0
            finally:
                browser.close()


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is not installed (apt-get install chromium)")
def test_a_size_link_to_its_own_page_opens_without_page_not_found():
    """A Size link to ``/size?size_users=...`` made Size the default page, which Streamlit serves at
    the root only: the browser showed "Page not found" for about two seconds, then fell back to it
    (and a link to ``/?size_users=...`` opened cleanly). Both now open on Size with the link's 37 users,
    and the first one keeps its own address."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from benchmarks.appserver import streamlit_argv
    from tests.appserver import running_app

    port = free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with running_app(streamlit_argv("app.py", port, launcher=True), port, env, "launcher", 60) as url:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                for path in ("size", ""):
                    tab = browser.new_page(viewport={"width": 1280, "height": 900})
                    tab.goto(f"{url}/{path}?size_users=37&size_ttft=900", wait_until="commit")
                    users = tab.get_by_role("spinbutton", name="Concurrent users")
                    deadline = time.monotonic() + 90
                    while not users.count() and time.monotonic() < deadline:
                        assert tab.get_by_text("Page not found").count() == 0, path
                        tab.wait_for_timeout(100)
                    sync_api.expect(users).to_have_value("37", timeout=30_000)
                    assert tab.get_by_text("Page not found").count() == 0 and tab.url.startswith(f"{url}/{path}?"), (path, tab.url)
                    tab.close()
            finally:
                browser.close()
