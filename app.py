"""KV Capacity Planner: the Streamlit app.

    streamlit run app.py                          # opens on the default preset
    streamlit run app.py -- --preset qwen3-8b     # opens on another bundled preset

Pages live under ``pages/``; ``pages/common.py`` holds the shared helpers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title="KV Capacity Planner", page_icon=":material/memory:", layout="wide")


def _cli_preset(argv: list[str]) -> str | None:
    """``--preset NAME`` from the script arguments (what follows ``--`` on the streamlit command line)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--preset")
    args, _ = parser.parse_known_args(argv)
    return args.preset


if "start_preset" not in st.session_state:
    st.session_state["start_preset"] = _cli_preset(sys.argv[1:])

pages = [
    st.Page("pages/plan.py", title="Plan", icon=":material/calculate:", default=True),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
]
for name, title, icon in (
    ("probe", "Probe", ":material/science:"),
    ("simulate", "Simulate", ":material/monitoring:"),
    ("report", "Report", ":material/description:"),
):
    if (ROOT / "pages" / f"{name}.py").is_file():
        pages.append(st.Page(f"pages/{name}.py", title=title, icon=icon))

st.navigation(pages).run()
