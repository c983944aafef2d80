"""Shared fixtures: a local fake Hugging Face Hub, and a guard that keeps tests off the internet."""

from __future__ import annotations

import os
import socket

import pytest

# AppTest has no browser to paint for: no first-paint pause in the Plan page (pages/ui/results.py)
os.environ.setdefault("KVP_FIRST_PAINT_PAUSE_S", "0")

from tests.fakehub import FakeHub


@pytest.fixture
def no_internet(monkeypatch):
    """Refuse resolving any host but the loopback one: a test that tries the internet fails."""
    real = socket.getaddrinfo

    def guarded(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", b"127.0.0.1", b"localhost"):
            raise OSError(f"test tried to reach {host!r}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)


@pytest.fixture
def hub(no_internet, monkeypatch, tmp_path):
    """tests/fakehub.py on 127.0.0.1 through HF_ENDPOINT, a fresh cache, no token, no telemetry."""
    from huggingface_hub import constants

    from planner.hub import clear_cache

    fake = FakeHub().start()
    cache = str(tmp_path / "hf_cache")
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", cache)
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "KVP_HUB_TTL_S", "HF_HUB_ETAG_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    # huggingface_hub reads these at import time; point them at the test too. (Not
    # constants.ENDPOINT: hf_hub_url swaps that prefix of its import-time template for `endpoint`.)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    clear_cache()
    try:
        yield fake
    finally:
        clear_cache()
        fake.stop()
