"""pages/ui/safe_text.md: user text renders literally in markdown (checked with markdown-it-py).

markdown-it-py is the CommonMark reference port (pinned; Streamlit's remark parser follows the
same spec for escapes). Every character comes back as itself: no tag other than the paragraph.
"""

from __future__ import annotations

import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pages.ui.safe_text import JOINER, md, unescape
from planner.limits import safe_text

PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
HOSTILE = [
    "[click](https://evil.example/x)",
    "![pixel](https://evil.example/p.png)",
    "<https://evil.example>",
    "https://evil.example/a www.evil.example",
    "<img src=x onerror=alert(1)>",
    "**bold** _it_ `code` ~~gone~~",
    "# heading",
    "1. item",
    "- item",
    "| a | b |\n|---|---|\n| c | d |",
    ":red[alert] :material/home: $x^2$ $$y$$",
    "line one\nline two\r\n\tindented",
    "&lt;b&gt; &amp; &#x41;",
    "trailing backslash \\",
    "\\[not a link\\](x)",
    "    four-space code",
    "[ref]: https://evil.example\n[ref]",
    "\u202eevil",
    "mail me: a.b@evil.example",
    "1) one",
    "> quote",
    "_lead and trail_",
]


def _literal_html(text: str) -> str:
    return "<p>" + html.escape(text, quote=False).replace('"', "&quot;") + "</p>\n" if text else ""


def _normalised(text: str) -> str:
    text = safe_text(text)  # a lone surrogate is shown as U+FFFD (issue 24), the one filter for text leaving the process
    return "".join(ch if ch == " " or ch.isprintable() else " " for ch in text).strip()


def test_hostile_values_render_literally():
    for text in HOSTILE:
        rendered = PARSER.render(md(text)).replace(JOINER, "")  # word joiners are invisible
        assert rendered == _literal_html(_normalised(text)), (text, rendered)
        assert "<a" not in rendered and "<img" not in rendered


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.one_of(st.sampled_from(list("[]()!<>*_`#~|$:\\/&;.-+=\"' \n\t")), st.characters()), max_size=60))
def test_any_text_renders_as_itself(text):
    rendered = PARSER.render(md(text)).replace(JOINER, "")
    assert rendered == _literal_html(_normalised(text))
    assert unescape(md(text)) == _normalised(text)
    assert "://" not in md(text) and "www." not in md(text).lower()  # GFM autolink literals need these
    assert not re.search(r"[A-Za-z0-9._+-]@[A-Za-z0-9]", md(text))  # nor an e-mail autolink


def test_ordinary_messages_read_as_before():
    text = "num_hidden_layers=0: must be at least 1 (limit 10,000); sequences >= 1, tp 1/2"
    assert md(text) == text
    assert md("org/x@main") == "org/x@\u2060main" and md("see https://x.org www.x.org") == "see https:\u2060//x.org www\u2060.x.org"


def test_long_values_are_cut():
    assert len(md("a" * 10_000)) == 400 and md("a" * 10_000).endswith("…")
