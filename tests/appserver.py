"""Start a Streamlit server for the real-browser tests and stop it afterwards (one place for both
the dashboard tests and the shared-deployment tests)."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(argv: list[str], port: int, env: dict[str, str], what: str, start_timeout_s: float) -> Iterator[str]:
    """Run ``argv`` in the repository root, wait until ``/_stcore/health`` answers ``ok`` on
    ``port`` and yield the base URL; fails the test with the server's log when it does not start."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_timeout_s
    try:
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
                pytest.fail(f"{what} did not start: {log.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
