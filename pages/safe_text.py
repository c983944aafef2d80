"""One escaping helper for user-controlled text on its way into Streamlit markdown.

Streamlit renders ``st.markdown``, ``st.caption``, ``st.error``/``warning``/``info``/``success``,
titles and ``help=`` tooltips as markdown (GitHub flavour, plus ``:color[...]`` directives and
``$...$`` LaTeX). A value from a share link, plan file, uploaded or pasted config, Hub config or
imported probe JSON must reach the page as the characters it is, never as a live link, a remote
image, an autolink, emphasis or a heading. :func:`md` makes that so: every ASCII punctuation
character gets a backslash (CommonMark lets any of them be escaped, and an escaped character is
always literal), line breaks and other control characters become spaces (no new blocks), and
over-long text is cut. Where no markdown is needed at all, pages use ``st.text``/``st.code``.
"""

from __future__ import annotations

import string

__all__ = ["md", "unescape"]

_ESCAPED = {ch: "\\" + ch for ch in string.punctuation}
MAX_SHOWN = 400  # characters of one value shown on the page


def md(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` as markdown that renders literally: no link, image, autolink, emphasis or block."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    out = []
    for ch in text:
        if ch in _ESCAPED:
            out.append(_ESCAPED[ch])
        elif ch == " " or ch.isprintable():
            out.append(ch)
        else:  # newlines, tabs, bidi and other control characters
            out.append(" ")
    return "".join(out).strip()  # a leading indent would open a code block


def unescape(markdown: str) -> str:
    """The text :func:`md` escaped (for tests and logs): drops the backslash before punctuation."""
    out = []
    i = 0
    while i < len(markdown):
        if markdown[i] == "\\" and i + 1 < len(markdown) and markdown[i + 1] in _ESCAPED:
            out.append(markdown[i + 1])
            i += 2
        else:
            out.append(markdown[i])
            i += 1
    return "".join(out)
