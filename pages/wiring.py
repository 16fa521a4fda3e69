"""The console's single wiring point: the only place that builds kb_core objects and caches them."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError, KnowledgeIndex, load_settings


@st.cache_resource(show_spinner="Scanning the knowledge base…")
def knowledge_index() -> KnowledgeIndex:
    settings = load_settings()
    index = KnowledgeIndex(settings.base_path, app_root=settings.app_root)
    index.load()
    return index


def get_index() -> KnowledgeIndex | None:
    """The cached index, or `None` after showing the error (pages stop rendering then)."""
    try:
        return knowledge_index()
    except KnowledgeBaseError as exc:
        st.error(str(exc))
        return None
