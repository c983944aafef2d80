"""Issue 27 in AppTest: one test per defect a new user met on the pages (the browser-only ones
are in test_ux_browser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def _app(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    _clean(at)
    return at


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


# --------------------------------------------------------------------------- 4. Simulate hides rejections


def test_simulate_counts_rejections_in_the_verdict_and_offers_length_profiles():
    at = _app()
    at.switch_page("pages/simulate.py").run()
    _clean(at)
    options = at.selectbox(key="sim_lengths").options
    assert [o.split(":")[0] for o in options] == ["the plan's prompt and output", "chat", "rag", "agent", "summarisation"], options
    assert "prompt p50 12,000 / p95 40,000" in options[3]
    at.selectbox(key="sim_lengths").set_value("agent")
    at.number_input(key="sim_requests").set_value(120)
    at.multiselect(key="sim_policies").set_value(["fifo", "chunked"])
    at.run()
    _clean(at)
    df = at.dataframe[0].value
    fifo, chunked = df["fifo"], df["chunked"]
    rejected = int(fifo.loc["Rejected"].split(" ")[0].replace(",", ""))
    assert rejected > 0 and "prompt longer than the step's token budget" in fifo.loc["Rejected"], fifo.loc["Rejected"]
    assert fifo.loc["Verdict"].startswith(f"rejects {rejected:,} of 120"), fifo.loc["Verdict"]
    assert chunked.loc["Rejected"] == "0" and not chunked.loc["Verdict"].startswith("rejects")  # chunked splits long prompts
    warned = [w.value for w in at.warning if w.value.startswith("fifo:")]
    assert warned and f"{rejected:,} of 120 requests" in warned[0] and "8,192-token step budget" in warned[0], [w.value for w in at.warning]
