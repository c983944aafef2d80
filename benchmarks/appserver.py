"""Waiting for a Streamlit server, and the Chromium that looks at it, shared by the real-browser tests (``tests/appserver.py``) and
``benchmarks/bench_app.py`` (tests already import from ``benchmarks``; the reverse would not do)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"  # Debian's; no tool may download its own browser
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


LAUNCHER = "scripts/run_app.py"  # how `make run` / `make serve` / the image start the app: `streamlit run` + preloaded imports


def streamlit_argv(script: str, port: int, *, launcher: bool = False) -> list[str]:
    """The command that serves ``script`` headless on 127.0.0.1:``port``, without usage statistics
    or a file watcher (run from the repository root): ``streamlit run``, or with ``launcher`` the
    app's launcher (:data:`LAUNCHER`, same flags)."""
    run = [sys.executable, LAUNCHER] if launcher else [sys.executable, "-m", "streamlit", "run"]
    return [*run, script, "--server.headless", "true", "--server.port", str(port),
            "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll ``url``/_stcore/health until it answers ``ok`` (True); False as soon as ``proc`` has
    exited or ``timeout_s`` seconds have passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.read().strip() == b"ok":
                    return True
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
