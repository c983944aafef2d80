"""A team on one shared deployment: many sessions on distinct share links, each changing a control.

    .venv/bin/python -m benchmarks.bench_shared [--sessions 50] [--duration 120] [--workers 1] [--pages 0]

Starts the deployment as ``make serve`` does (``--workers 1``: one Streamlit process; ``N > 1``:
``scripts/serve.py``, N processes behind nginx with session affinity), on 127.0.0.1 only, then:

* opens ``--sessions`` Streamlit websocket clients (they speak Streamlit's own protocol: the
  ``BackMsg`` / ``ForwardMsg`` protobufs of the installed streamlit, as the browser does), spread
  evenly over ``--ramp`` seconds (10), each on its own share link (``?v=1&m=preset&seq=K``), plus
  ``--pages`` real Chromium pages in one headless browser;
* every websocket session moves the headroom slider every ``--interval`` seconds (5) from its
  start until ``--duration`` (120) ends (a fixed schedule, so the sessions stay spread over the
  ramp as people are), and times each change from the message sent to the first metric of the
  rerun;
* after the load, opens one new session and times its first metric (recovery).

Prints p50/p95 of the first metric and of control -> update, errors (a refused connection, a
timeout, an exception element, a missing metric), the peak resident memory of the server's
processes (workers and proxy) and the load average at the start and the end (this machine is
shared: figures taken under load are pessimistic). Goal on 2 cores, 50 sessions: p95 first
metric <= 3 s, p95 control -> update <= 1 s, 0 errors, RSS <= 500 MiB; 100 sessions: 0 errors
and a new session's first metric < 0.5 s within 10 s after the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, wait_healthy  # noqa: E402

METRIC_LABEL = "KV bytes / token"
SLIDER_HINT = "headroom"
TIMEOUT_S = 60.0


def _rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (a figure the machine's other load barely moves)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the workers and nginx under scripts/serve.py)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return out


def start_server(port: int, workers: int) -> subprocess.Popen:
    target = ["make", "-s", "-n", "serve", f"WORKERS={workers}", f"PORT={port}", "HOST=127.0.0.1"]
    line = subprocess.run(target, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    env = {**os.environ, "KVP_FIRST_PAINT_PAUSE_S": "0", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(["bash", "-c", "exec env " + line], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_healthy(f"http://127.0.0.1:{port}", proc, 180, poll_s=0.2):
        proc.kill()
        raise SystemExit("the deployment did not start")
    return proc


class Session:
    """One Streamlit websocket client: the first run of a share link, then slider changes."""

    def __init__(self, base: str, query: str) -> None:
        self.base, self.query = base, query
        self.first_metric_s: float | None = None
        self.updates: list[float] = []
        self.errors: list[str] = []
        self.slider_id: str | None = None

    async def _cookie(self) -> str:
        def get() -> str:
            with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=30) as r:
                return "; ".join(c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or [])

        return await asyncio.to_thread(get)

    async def _until_metric(self, ws, started: float) -> float:
        """Seconds from ``started`` to the run's metric; then reads the rest of the run (to its
        script_finished), so the next change starts on a quiet connection."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        seen: float | None = None
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=max(0.1, TIMEOUT_S - (time.perf_counter() - started)))
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                which = el.WhichOneof("type")
                if which == "exception":
                    self.errors.append(f"exception element: {el.exception.message[:120]}")
                elif which == "slider" and SLIDER_HINT in el.slider.label.lower() and self.slider_id is None:
                    self.slider_id = el.slider.id
                elif which == "metric" and el.metric.label == METRIC_LABEL and seen is None:
                    seen = time.perf_counter() - started
            elif kind == "script_finished" and msg.script_finished in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR):
                if seen is None:  # (FINISHED_EARLY_FOR_RERUN: the next run follows)
                    raise RuntimeError("the run finished without the metric")
                return seen

    def _rerun(self, value: float | None = None) -> bytes:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        if value is not None and self.slider_id:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = self.slider_id
            w.double_array_value.data.append(value)
        return msg.SerializeToString()

    async def run(self, duration_s: float, interval_s: float, until: float) -> None:
        import websockets

        started = time.perf_counter()
        try:
            cookie = await self._cookie()
            url = self.base.replace("http://", "ws://") + "/_stcore/stream"
            async with websockets.connect(url, subprotocols=["streamlit"], additional_headers={"Cookie": cookie, "Origin": self.base},
                                          max_size=None, open_timeout=TIMEOUT_S, ping_interval=None) as ws:
                await ws.send(self._rerun())
                self.first_metric_s = await self._until_metric(ws, started)
                value = 10.0
                due = started + interval_s  # a fixed schedule: every interval from the session's start, as a person would,
                while due < until:  # so slow answers do not bunch the sessions into bursts (a change that is late goes at once)
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                    due += interval_s
                    value = 12.0 if value == 10.0 else 10.0
                    t = time.perf_counter()
                    await ws.send(self._rerun(value))
                    self.updates.append(await self._until_metric(ws, t))
        except Exception as exc:  # noqa: BLE001 - counted and reported
            self.errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")


async def browser_pages(base: str, n: int, ramp_s: float, offset: int) -> tuple[list[float], list[str]]:
    """``n`` Chromium pages (one browser) on distinct links: seconds to the rendered metric."""
    if n <= 0:
        return [], []
    from playwright.async_api import async_playwright

    times, errors = [], []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)

        async def one(k: int) -> None:
            await asyncio.sleep(ramp_s * k / max(1, n))
            ctx = await browser.new_context()
            page = await ctx.new_page()
            t = time.perf_counter()
            try:
                await page.goto(f"{base}/?v=1&m=preset&n=llama-3.1-8b&seq={offset + k + 1}", wait_until="commit")
                await page.get_by_test_id("stMetric").filter(has_text=METRIC_LABEL).get_by_test_id("stMetricValue").wait_for(timeout=TIMEOUT_S * 1000)
                times.append(time.perf_counter() - t)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"page {k}: {type(exc).__name__}")
            await ctx.close()

        await asyncio.gather(*(one(k) for k in range(n)))
        await browser.close()
    return times, errors


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def load(base: str, args, pids) -> dict:
    sessions = [Session(base, f"v=1&m=preset&n=llama-3.1-8b&seq={k + 1}") for k in range(args.sessions)]
    peak = [0]
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kib(pids()))
            await asyncio.sleep(1.0)

    t0 = time.perf_counter()
    until = t0 + args.duration

    async def start(k: int, s: Session) -> None:
        await asyncio.sleep(args.ramp * k / max(1, len(sessions)))
        await s.run(args.duration, args.interval, until)

    cpu0 = _cpu_s(pids())
    sampler = asyncio.create_task(sample())
    page_task = asyncio.create_task(browser_pages(base, args.pages, args.ramp, args.sessions))
    await asyncio.gather(*(start(k, s) for k, s in enumerate(sessions)))
    page_times, page_errors = await page_task
    done.set()
    await sampler
    cpu = _cpu_s(pids()) - cpu0
    load_end = time.perf_counter()
    await asyncio.sleep(2.0)  # the sessions disconnect; then a new one, within 10 s of the load
    fresh = Session(base, "v=1&m=preset&n=llama-3.1-8b&seq=999")
    t = time.perf_counter()
    await fresh.run(0, args.interval, 0)
    return {"sessions": sessions, "page_times": page_times, "page_errors": page_errors, "peak_kib": peak[0], "cpu_s": cpu, "wall_s": load_end - t0,
            "recovery": (fresh.first_metric_s, t - load_end, fresh.errors)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50, help="websocket sessions (default 50)")
    ap.add_argument("--pages", type=int, default=0, help="Chromium pages opened beside them, first metric only (default 0)")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of load (default 120)")
    ap.add_argument("--ramp", type=float, default=10.0, help="seconds over which the sessions open (default 10)")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between a session's control changes (default 5)")
    ap.add_argument("--workers", type=int, default=1, help="app processes; more than 1 runs them behind nginx (default 1)")
    args = ap.parse_args(argv)
    if not (1 <= args.sessions <= 1000 and 0 <= args.pages <= 200 and 0 < args.duration <= 3600 and 1 <= args.workers <= 64):
        raise SystemExit("error: sessions 1..1000, pages 0..200, duration up to 3600 s, workers 1..64")
    load_before = os.getloadavg()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(port, args.workers)
    try:
        warm = Session(base, "v=1&m=preset&n=llama-3.1-8b")  # imports and the preset, as after a deploy
        asyncio.run(warm.run(0, args.interval, 0))
        out = asyncio.run(load(base, args, lambda: _tree(proc.pid)))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    sessions = out["sessions"]
    firsts = [s.first_metric_s for s in sessions if s.first_metric_s is not None]
    updates = [u for s in sessions for u in s.updates]
    errors = [e for s in sessions for e in s.errors] + out["page_errors"]
    first_fresh, after_s, fresh_errors = out["recovery"]
    load_after = os.getloadavg()
    print(f"{args.sessions} websocket sessions + {args.pages} Chromium pages, {args.workers} worker(s), {args.duration:g} s, a change every {args.interval:g} s; "
          f"load average {load_before[0]:.2f} at start, {load_after[0]:.2f} at end")
    print(f"first metric: p50 {_pct(firsts, 0.5):.2f} s, p95 {_pct(firsts, 0.95):.2f} s ({len(firsts)} sessions)")
    if out["page_times"]:
        print(f"first metric in Chromium: p50 {_pct(out['page_times'], 0.5):.2f} s, p95 {_pct(out['page_times'], 0.95):.2f} s ({len(out['page_times'])} pages)")
    print(f"control -> update: p50 {_pct(updates, 0.5):.2f} s, p95 {_pct(updates, 0.95):.2f} s ({len(updates)} changes)")
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    print(f"benchmark client CPU: {me.ru_utime + me.ru_stime:.1f} s (it shares the machine with the server)")
    print(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"server RSS peak: {out['peak_kib'] / 1024:.0f} MiB (all processes); server CPU {out['cpu_s']:.1f} s in {out['wall_s']:.0f} s, "
          f"{out['cpu_s'] / max(1, len(firsts) + len(updates)) * 1000:.0f} ms per run (first runs and changes)")
    print(f"recovery: a new session {after_s:.1f} s after the load: first metric {first_fresh if first_fresh is None else round(first_fresh, 2)} s" + (f", errors {fresh_errors}" if fresh_errors else ""))
    ok = not errors and firsts and _pct(firsts, 0.95) <= 3 and (not updates or _pct(updates, 0.95) <= 1) and out["peak_kib"] / 1024 <= 500
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
