"""One escaping helper for user-controlled text on its way into Streamlit markdown.

Streamlit renders ``st.markdown``, ``st.caption``, ``st.error``/``warning``/``info``/``success``,
subheaders and ``help=`` tooltips as markdown (GitHub flavour, plus ``:color[...]`` directives and
``$...$`` LaTeX). A value from a share link, plan file, uploaded or pasted config, Hub config or
imported probe JSON must reach the page as the characters it is, never as a live link, a remote
image, an autolink, emphasis, code or a heading. :func:`md` makes that so with CommonMark
backslash escapes (an escaped ASCII punctuation character is always literal):

* always: ``\\ ` * [ ] < $ & # ~ | !`` (links, images, HTML and autolinks, code, LaTeX, entities,
  headings, strike-through, tables);
* ``_`` unless it sits inside a word (``num_hidden_layers`` cannot open emphasis);
* the first character when it would open a block (``>``, ``-``, ``+``, ``=``; ``1.`` / ``1)``);
* GitHub's autolink literals (``http://``, ``https://``, ``ftp://``, ``www.``, ``a@b.c``): remark
  finds these in the parsed text, after backslash escapes are resolved, so an invisible word
  joiner (U+2060) goes inside each (``https:⁠//``, ``www⁠.``, ``a@⁠b``) instead.

Line breaks and other control characters become spaces (no new blocks) and long text is cut, so
ordinary messages read as before. Where no markdown is needed at all, pages use ``st.text``.
"""

from __future__ import annotations

import re
import string

from planner.limits import safe_text

__all__ = ["md", "unescape"]

MAX_SHOWN = 400  # characters of one value shown on the page
_ALWAYS = frozenset("\\`*[]<$&#~|!")
_BLOCK_START = frozenset(">-+=")
JOINER = "\u2060"  # WORD JOINER: invisible, no line break, not a word character to a regex
_URL = re.compile(r"(?i)\b(https?|ftp):(?=//)")
_WWW = re.compile(r"(?i)\bwww(?=\.)")
_EMAIL_AT = re.compile(r"(?<=[A-Za-z0-9._+-])@(?=[A-Za-z0-9])")
_ORDERED = re.compile(r"^([0-9]{1,9})([.)])")
_PUNCTUATION = frozenset(string.punctuation)


def md(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` as markdown that renders literally: no link, image, autolink, emphasis or block."""
    text = safe_text(value)  # lone surrogates cannot reach the websocket's UTF-8 (planner/limits.py)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = "".join(ch if ch == " " or ch.isprintable() else " " for ch in text).strip()  # an indent would open a code block
    out = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch in _ALWAYS or (i == 0 and ch in _BLOCK_START):
            out.append("\\" + ch)
        elif ch == "_" and not (0 < i < last and text[i - 1].isalnum() and text[i + 1].isalnum()):
            out.append("\\_")
        else:
            out.append(ch)
    escaped = "".join(out)
    escaped = _ORDERED.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)
    escaped = _URL.sub(lambda m: m.group(0) + JOINER, escaped)
    escaped = _WWW.sub(lambda m: m.group(0) + JOINER, escaped)
    return _EMAIL_AT.sub("@" + JOINER, escaped)


def unescape(markdown: str) -> str:
    """The text :func:`md` escaped (for tests and logs): drops the backslashes and word joiners."""
    markdown = markdown.replace(JOINER, "")
    out = []
    i = 0
    while i < len(markdown):
        if markdown[i] == "\\" and i + 1 < len(markdown) and markdown[i + 1] in _PUNCTUATION:
            out.append(markdown[i + 1])
            i += 2
        else:
            out.append(markdown[i])
            i += 1
    return "".join(out)
