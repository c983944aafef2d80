"""Start a Streamlit server for the real-browser tests and stop it afterwards (one place for both
the dashboard tests and the shared-deployment tests)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.appserver import CHROMIUM, CHROMIUM_ARGS, free_port, streamlit_argv, wait_healthy

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "free_port", "metric_value", "running_app", "streamlit_argv"]

ROOT = Path(__file__).resolve().parent.parent
# Streamlit keeps the last run's elements on the page, marked data-stale, until the new run replaces
# them: while a rerun is still going (minutes on two busy cores) a label can match the old metric and
# the new one, so the browser tests read live elements only
LIVE = '[data-testid="stElementContainer"]:not([data-stale="true"])'


def metric_value(page, label: str):
    """The value of the live ``st.metric`` labelled ``label`` (a Playwright locator)."""
    return page.locator(LIVE).get_by_test_id("stMetric").filter(has_text=label).get_by_test_id("stMetricValue")


@contextmanager
def running_app(argv: list[str], port: int, env: dict[str, str], what: str, start_timeout_s: float) -> Iterator[str]:
    """Run ``argv`` in the repository root, wait until ``/_stcore/health`` answers ``ok`` on
    ``port`` and yield the base URL; fails the test with the server's log when it does not start."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(url, proc, start_timeout_s, poll_s=0.2):
            proc.kill()
            log.seek(0)
            pytest.fail(f"{what} did not start: {log.read().decode(errors='replace')[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
