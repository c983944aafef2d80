"""Hostile input in the app (issue 15): overflow configs, absurd links, Hub rate limit, markdown.

AppTest (no browser); the real-browser checks of the same cases are in tests/test_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest import run_app as _app  # noqa: E402
from tests.hostile import EVIL, MARKDOWN_LINK  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = json.loads((ROOT / "model_configs" / "llama-3.1-8b.json").read_text())


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (json.dumps(LLAMA_8B)[:-1] + ', "n_shared_experts": Infinity, "num_experts": 8}', "n_shared_experts"),
        (json.dumps(LLAMA_8B)[:-1] + ', "intermediate_size": 1e308}', "intermediate_size"),
        (json.dumps({**LLAMA_8B, "num_hidden_layers": 100_000, "num_attention_heads": 65_536, "head_dim": 1 << 20}), "num_hidden_layers"),
    ],
)
def test_overflowing_pasted_config_is_an_error_next_to_the_source_and_keeps_the_page(text, field):
    at = _app()
    shown = [m.value for m in at.metric]
    at.segmented_control(key="model_source").set_value("Paste JSON").run()
    at.text_area(key="config_paste").input(text).run()
    assert not at.exception, [e.value for e in at.exception]  # was "Something went wrong"
    assert any(field in e for e in _errors(at)), _errors(at)
    assert [m.value for m in at.metric] == shown  # the previous plan stays, sidebar and all
    assert at.sidebar.segmented_control  # the sidebar is still there


def test_hub_fetches_are_rate_limited_per_session(hub, monkeypatch):
    import planner.hub as hubmod

    monkeypatch.setenv("KVP_HUB_REQUESTS_PER_MIN", "2")
    monkeypatch.setattr(hubmod, "_LIMITER", None)
    for name in ("org/a", "org/b", "org/c"):
        hub.add_repo(name, {"config.json": LLAMA_8B})
    at = _app()
    at.segmented_control(key="model_source").set_value("Hugging Face Hub").run()
    for name in ("org/a", "org/b", "org/c"):
        at.text_input(key="hub_repo").input(name)
        at.button(key="hub_fetch").click().run()
    side = [e.value for e in at.sidebar.error]
    assert len(side) == 1 and "Too many Hub requests from this session (at most 2 a minute)" in side[0], side
    assert at.session_state["model_ref"]["repo_id"] == "org/b"  # the last allowed fetch stays active
    other = _app()  # another session has its own budget
    other.segmented_control(key="model_source").set_value("Hugging Face Hub").run()
    other.text_input(key="hub_repo").input("org/c")
    other.button(key="hub_fetch").click().run()
    assert not other.sidebar.error and other.session_state["model_ref"]["repo_id"] == "org/c"


def test_link_with_an_overflowing_embedded_config_warns_and_keeps_the_page():
    from planner.geometry import config_hash
    from planner.share import embed_config

    config = {**LLAMA_8B, "n_shared_experts": float("inf"), "num_experts": 8}
    at = _app({"v": "3", "m": "upload", "n": "evil.json", "h": config_hash(config), "cfg": embed_config(config)})
    warnings = " ".join(w.value for w in at.warning)
    assert "embedded config is not usable" in warnings and "n_shared_experts" in warnings, warnings
    assert any(m.label == "KV bytes / token" for m in at.metric)  # a plan is still on the page


def _rendered_markdown(at: AppTest) -> list[str]:
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in (at.warning, at.error, at.info, at.success, at.sidebar.warning, at.sidebar.error):
        out += [e.value for e in kind]
    return out


def test_link_values_never_render_as_live_markdown():
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    at = _app(MARKDOWN_LINK)
    texts = _rendered_markdown(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "n.png" in warnings and "click me" in warnings  # the values are shown (escaped), not dropped
    for text in texts:
        html = parser.render(text)
        assert EVIL not in html or ("<a" not in html and "<img" not in html and "<strong>bold" not in html and "<code>code" not in html), text
        for needle in ("://" + EVIL, "www." + EVIL, "@" + EVIL):
            assert needle not in text, text  # no GitHub autolink literal either
