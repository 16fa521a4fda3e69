"""Console home: what the L0 keyword index holds."""

from __future__ import annotations

import streamlit as st

from pages.wiring import get_index

st.title("📚 Knowledge base")
index = get_index()
if index is not None:
    entries = index.entries()
    st.metric("Documents in the L0 index", len(entries))
    if entries:
        st.dataframe(
            [
                {"title": e.title, "category": e.category or "", "keywords": ", ".join(e.keywords),
                 "summary": e.summary, "file": e.file_path}
                for e in entries
            ],
            hide_index=True,
            use_container_width=True,
        )
    else:
        st.info(f"No documents with frontmatter under `{index.base_dir}` yet.")
