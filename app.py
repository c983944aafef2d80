"""KV Capacity Planner: the Streamlit app.

    streamlit run app.py                          # opens on the default preset
    streamlit run app.py -- --preset qwen3-8b     # opens on another bundled preset

Pages live under ``pages/`` and are registered in :data:`PAGES` (one line a page);
``pages/ui/`` holds their building blocks (session state, model source, inputs, result cards,
URL state, export).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit

import streamlit as st

from pages.ui import style

# The favicon is a file the server itself serves: a ":material/...:" page icon makes every browser
# fetch it from a third party (fonts.gstatic.com). Nav and widget icons use the bundled font.
FAVICON = str(Path(__file__).resolve().parent / "assets" / "favicon.png")
# (It costs a fresh server about 0.4 s of numpy and PIL imports before the first metric; an emoji
# favicon costs as much, loading Streamlit's emoji catalog, and none means the third-party fetch.)
st.set_page_config(page_title="KV Capacity Planner", page_icon=FAVICON, layout="wide")
style.apply()


def _cli_preset(argv: list[str]) -> str | None:
    """``--preset NAME`` from the script arguments (what follows ``--`` on the streamlit command line)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--preset")
    args, _ = parser.parse_known_args(argv)
    return args.preset


if "start_preset" not in st.session_state:
    st.session_state["start_preset"] = _cli_preset(sys.argv[1:])

# The app's pages, in menu order: (script, title, icon). A new page is one line here.
PAGES = (
    ("pages/plan.py", "Plan", ":material/calculate:"),
    ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/simulate.py", "Simulate", ":material/monitoring:"),
    ("pages/size.py", "Size", ":material/dns:"),
    ("pages/probe.py", "Probe", ":material/science:"),
)

# A Size share link (``?size_users=...``) opens on the Size page: links always go to the app's root.
# (A fresh server's first visit to ``/<page>?...`` would run that page under Streamlit's older
# pages/ layout; scripts/run_app.py turns the layout off before the first session, and each page
# reruns through this navigation when it finds itself run that way: pages/ui/navigation.py.)


def _opens_on_size() -> bool:
    """A link with Size parameters to the app's root (``/?size_users=...``), where Size is made the
    default page. A link to ``/size?...`` itself finds the page by its own path: made the default,
    the page would have none (Streamlit serves the default page at the root), and the browser
    showed "Page not found" before the app fell back to it."""
    if not any(k.startswith("size_") for k in st.query_params):
        return False
    path = urlsplit(st.context.url or "").path.rstrip("/")
    return path.rsplit("/", 1)[-1] not in {Path(script).stem for script, _, _ in PAGES}


if "start_page" not in st.session_state:
    st.session_state["start_page"] = "pages/size.py" if _opens_on_size() else PAGES[0][0]
start = st.session_state["start_page"]
st.navigation([st.Page(path, title=title, icon=icon, default=path == start) for path, title, icon in PAGES]).run()
