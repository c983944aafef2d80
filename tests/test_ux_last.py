"""Issue 27, last pass: the headline-first run, the Compare charts on a phone, the PDF labels and
the KV-pool / steady-state words; each test fails on the defect it names."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def test_a_sessions_first_run_stops_after_the_headline_and_the_next_draws_the_rest(monkeypatch):
    """Item 10: the first run sent the whole Plan page (two plotly charts, tables, the sidebar's
    inputs), and a fresh browser built all of it before it painted the first metric: 13-31 s at
    load 10 against 3 s for a one-metric page. Now the first run ends after the headline with the
    handshake that asks for the rest, and any later run draws everything."""
    monkeypatch.setenv("KVP_FIRST_PAINT_PAUSE_S", "0.3")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [m.label for m in at.metric]
    assert "KV bytes / token" in labels
    assert len(at.get("plotly_chart")) == 0  # no chart before the browser has painted the numbers
    assert not any(s.key == "headroom_pct" for s in at.slider)  # nor the inputs
    assert not any(t.key == "latency_model_measured" for t in at.toggle)  # nor the toggle under the headline
    at.run()  # what the handshake's trigger starts
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) >= 2
    assert any(s.key == "headroom_pct" for s in at.slider)
    assert [m.label for m in at.metric][: len(labels)] == labels  # the same headline, now with the rest


def test_the_headline_first_run_is_off_at_zero():
    """Tests (conftest) and operators who want one run set KVP_FIRST_PAINT_PAUSE_S=0: then the
    first run draws the whole page, as before."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert len(at.get("plotly_chart")) >= 2 and any(s.key == "headroom_pct" for s in at.slider)
