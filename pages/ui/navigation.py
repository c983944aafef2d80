"""Every page runs through ``app.py``'s navigation, however the server was started.

Streamlit takes a ``pages/`` folder for its older multipage layout until some session's run of the
main script calls ``st.navigation``. On a fresh server started with plain ``streamlit run app.py``
a first visit to a deep link (``/size?...``) therefore ran ``pages/size.py`` alone: no ``app.py``
(layout, navigation, session set-up), the sidebar a list of file names, and so for every deep link
until someone opened ``/``. ``scripts/run_app.py`` turns that layout off before the first session;
:func:`through_app` is the same for a server started any other way.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.pages_manager import PagesManager


def through_app() -> None:
    """Call first in every page: a page run by the older layout turns it off (as ``st.navigation``
    does) and reruns, which runs ``app.py`` and its navigation on the same page.

    Only on a real server: Streamlit's ``AppTest`` resets the layout flag before every run it makes
    and never runs ``app.py`` for a page's reruns, so a rerun there would only drop the widget
    event (a click) that started the run. Its stand-in runtime is a mock, not a ``Runtime``.
    """
    if PagesManager.uses_pages_directory and type(Runtime._instance) is Runtime:  # noqa: SLF001
        PagesManager.uses_pages_directory = False
        st.rerun()
