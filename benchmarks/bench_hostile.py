"""A shared server under hostile links and many sessions (issue 15).

    .venv/bin/python -m benchmarks.bench_hostile [--links 200] [--sessions 25]

Starts the app as ``make serve`` does (probe off, Hub rate limit, 127.0.0.1 here), then with one
headless Chromium:

* opens ``--links`` distinct hostile share links one after another (4 tabs at a time, each closed
  once its page has rendered a plan or an error): embedded 10,000-layer configs, markdown and
  image payloads in every text parameter, absurd numbers; reports the server's resident memory
  (VmRSS) before and after, its peak (VmHWM), and how many requests the pages sent to the
  attacker's host (any is a failure: a live image or link was rendered and followed);
* opens ``--sessions`` browser contexts at once on the default page and waits for every one to
  show its plan; reports the wall time and the server CPU seconds per first render.

Targets: resident memory after 200 hostile links < 300 MiB; every concurrent session renders.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, wait_healthy  # noqa: E402

MEMORY_TARGET_MIB = 300
EVIL = "evil.example"


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _embed(config: dict) -> str:
    raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def hostile_links(n: int) -> list[str]:
    """n distinct hostile query strings (four kinds in turn)."""
    from planner.geometry import config_hash

    links = []
    for i in range(n):
        kind = i % 4
        if kind == 0:  # a distinct 10,000-layer config embedded in the link (the layer ceiling)
            config = {"model_type": "llama", "num_hidden_layers": 10_000, "num_attention_heads": 2, "num_key_value_heads": 1,
                      "hidden_size": 64, "vocab_size": 1000 + i, "max_position_embeddings": 1 << 20, "_name_or_path": f"[x{i}](https://{EVIL}/l{i})"}
            params = {"v": "1", "m": "upload", "n": f"![p{i}](https://{EVIL}/i{i}.png)", "h": config_hash(config), "cfg": _embed(config), "seq": "1"}
        elif kind == 1:  # markdown and images in every text parameter
            params = {"v": "1", "m": "preset", "n": f"![p{i}](https://{EVIL}/n{i}.png)", "gpu": f"[g{i}](https://{EVIL}/g)", "rv": f"<https://{EVIL}/{i}>",
                      "r": f"**{i}**", "kvd": f"![k](https://{EVIL}/k{i}.png)", "res": f"https://{EVIL}/autolink{i}"}
        elif kind == 2:  # absurd numbers
            params = {"v": "1", "m": "preset", "n": "llama-3.1-8b", "mfu": "5e-324", "mbu": "1e-300", "seq": "9" * 400, "tp": "1_000", "in": str(10**6 + i),
                      "pf": "5e-324", "dev": "1e308"}
        else:  # a Hub reference with a payload (never fetched: the id is invalid)
            params = {"v": "1", "m": "hub", "r": f"![h](https://{EVIL}/h{i}.png)", "rv": f"[r](https://{EVIL}/r{i})", "c": "z" * 40}
        links.append("/?" + urlencode(params))
    return links


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "KVP_DISABLE_PROBE": "1", "KVP_HUB_REQUESTS_PER_MIN": "20", "KVP_FIRST_PAINT_PAUSE_S": "0", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false", "--client.showErrorDetails", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    if not wait_healthy(f"http://127.0.0.1:{port}", proc, 60, poll_s=0.1):
        raise SystemExit("streamlit did not start")
    return proc


RENDERED = "[data-testid=stMetricValue], [data-testid=stAlert]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=200, help="distinct hostile links to open (default 200)")
    ap.add_argument("--sessions", type=int, default=25, help="concurrent browser contexts (default 25)")
    ap.add_argument("--tabs", type=int, default=4, help="links open at once (default 4)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(port)
    evil_requests: list[str] = []
    try:
        with sync_playwright() as p:  # launch() gives the browser a fresh temporary profile
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)

            def block_evil(route):
                evil_requests.append(route.request.url)
                route.abort()

            # warm up: one render, so the baseline includes the imported modules
            ctx = browser.new_context()
            ctx.route(f"**/*{EVIL}*/**", block_evil)
            page = ctx.new_page()
            page.goto(base + "/", wait_until="commit")
            page.wait_for_selector(RENDERED, timeout=60_000)
            page.close()
            time.sleep(1.0)
            before = _proc_status(proc.pid)
            links = hostile_links(args.links)
            t0 = time.perf_counter()
            failed = 0
            for start in range(0, len(links), args.tabs):
                pages = []
                for link in links[start : start + args.tabs]:
                    pg = ctx.new_page()
                    pg.goto(base + link, wait_until="commit")
                    pages.append(pg)
                for pg in pages:
                    try:
                        pg.wait_for_selector(RENDERED, timeout=60_000)
                        pg.wait_for_timeout(300)  # let images in the rendered markdown start loading
                    except Exception:  # noqa: BLE001 - counted, reported below
                        failed += 1
                    pg.close()
                done = min(start + args.tabs, len(links))
                if done % 24 < args.tabs or done == len(links):  # progress: the run takes minutes on 2 busy cores
                    print(f"  {done} links, {time.perf_counter() - t0:.0f} s, server {_proc_status(proc.pid)['VmRSS'] / 1024:.0f} MiB", flush=True)
            links_s = time.perf_counter() - t0
            ctx.close()
            time.sleep(2.0)  # closed sessions are dropped by the server
            after = _proc_status(proc.pid)
            print(f"hostile links: {len(links)} opened in {links_s:.1f} s ({failed} did not render); attacker requests: {len(evil_requests)}")
            print(f"server memory: {before['VmRSS'] / 1024:.0f} MiB before, {after['VmRSS'] / 1024:.0f} MiB after, peak {after['VmHWM'] / 1024:.0f} MiB "
                  f"(target < {MEMORY_TARGET_MIB} MiB) -> {'OK' if after['VmRSS'] / 1024 < MEMORY_TARGET_MIB else 'OVER'}")

            contexts = [browser.new_context() for _ in range(args.sessions)]
            cpu0, t0 = _cpu_s(proc.pid), time.perf_counter()
            pages = [c.new_page() for c in contexts]
            for pg in pages:
                pg.goto(base + "/", wait_until="commit")
            rendered = 0
            for pg in pages:
                try:
                    pg.get_by_test_id("stMetric").filter(has_text="KV bytes / token").get_by_test_id("stMetricValue").wait_for(timeout=120_000)
                    rendered += 1
                except Exception:  # noqa: BLE001 - counted, reported below
                    pass
            wall, cpu = time.perf_counter() - t0, _cpu_s(proc.pid) - cpu0
            print(f"concurrent sessions: {rendered}/{args.sessions} rendered in {wall:.1f} s; server CPU {cpu:.2f} s, {cpu / max(1, args.sessions) * 1000:.0f} ms per first render; "
                  f"memory now {_proc_status(proc.pid)['VmRSS'] / 1024:.0f} MiB")
            for c in contexts:
                c.close()
            browser.close()
        ok = not evil_requests and after["VmRSS"] / 1024 < MEMORY_TARGET_MIB and rendered == args.sessions
        return 0 if ok else 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
