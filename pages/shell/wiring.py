"""The console's single wiring point: the only place that opens the knowledge base and caches it."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, open_knowledge_base


@st.cache_resource(show_spinner="Opening the knowledge base…")
def _open_knowledge_base() -> KnowledgeBase:
    return open_knowledge_base()


def leave_legacy_multipage_mode() -> None:
    """Run app.py's navigation even when a fresh server's first request is a deep link.

    Streamlit treats a `pages/` folder next to the entry script as a legacy (v1) multipage app until some
    run calls `st.navigation`; a bookmark or a reload of `/upload` on a fresh server would then run this page
    file alone (no sidebar status, helper modules listed as pages). Every page calls this first: it clears
    the legacy flag and reruns, and the rerun goes through app.py like any other.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a future Streamlit without the legacy mode
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def knowledge_base() -> KnowledgeBase:
    """The process-wide `KnowledgeBase`; on failure shows the reason and stops the page."""
    leave_legacy_multipage_mode()
    try:
        return _open_knowledge_base()
    except KnowledgeBaseError as exc:
        st.error(f"The knowledge base could not be opened: {exc}")
        st.stop()
        raise  # unreachable: st.stop() ends the script run
