"""The console's single wiring point: the only place that opens the knowledge base and caches it."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, open_knowledge_base


@st.cache_resource(show_spinner="Opening the knowledge base…")
def _open_knowledge_base() -> KnowledgeBase:
    return open_knowledge_base()


def knowledge_base() -> KnowledgeBase:
    """The process-wide `KnowledgeBase`; on failure shows the reason and stops the page."""
    try:
        return _open_knowledge_base()
    except KnowledgeBaseError as exc:
        st.error(f"The knowledge base could not be opened: {exc}")
        st.stop()
        raise  # unreachable: st.stop() ends the script run
