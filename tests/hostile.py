"""Hostile inputs shared by the AppTest and real-browser tests of issue 15."""

from __future__ import annotations

EVIL = "evil.example"  # the attacker's host: no test ever reaches it (requests to it are aborted)

# a share link whose text parameters carry markdown links, images, autolinks and formatting
MARKDOWN_LINK = {
    "v": "3", "m": "preset",
    "n": f"![pixel](https://{EVIL}/n.png)",
    "gpu": f"[click me](https://{EVIL}/gpu)",
    "kvd": f"![k](https://{EVIL}/k.png)",
    "rv": f"<https://{EVIL}/autolink>",
    "res": f"see www.{EVIL}/x and a@{EVIL}",
    "wd": "**bold** `code` $x$ :red[alert]",
    "seq": "12",
}
