"""The app in Streamlit's AppTest (no browser, no server), opened the way the page tests open it:
a share link's query and any session state set before the first run, and no exception after it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def run_app(query: dict[str, str] | None = None, *, timeout_s: float = 30, **session) -> AppTest:
    """The app after its first run with ``query`` as the address's parameters (a share link being
    opened) and ``session`` in its session state; fails the test on an exception."""
    at = AppTest.from_file(APP, default_timeout=timeout_s)
    at.query_params.update(query or {})
    for key, value in session.items():
        at.session_state[key] = value
    at.run()
    assert_clean(at)
    return at
