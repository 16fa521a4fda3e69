"""Settings (admins): the effective settings with secrets masked, the model's state, and the versions of the
parts - what to check first when this console behaves differently from another, and what a bug report needs."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError
from pages.shell.safe import escape_markdown
from pages.shell.wiring import end_page, knowledge_base

kb = knowledge_base()
st.title("⚙️ Settings")
try:
    about = kb.about()
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()

status = kb.status()
model = status.model
st.subheader("Model")
loaded = f", loaded in {model.load_seconds:.1f} s" if model.load_seconds is not None else ""
st.markdown(escape_markdown(f"{model.model_id}: {model.state}{loaded}. {status.l1_mode}."))
if model.detail:
    st.caption(escape_markdown(model.detail))
st.subheader("Settings")
st.caption("What this process runs with (`KB_*` variables, `kb.yaml`, defaults). The Milvus token and the database "
           "password are hidden. They change with the process's environment: restart the console to apply a change.")
st.dataframe([{"setting": name, "value": value} for name, value in about.settings], hide_index=True,
             key="settings-table")
st.subheader("Versions")
st.dataframe([{"part": part.name, "version": part.version} for part in about.parts], hide_index=True,
             key="versions-table")
st.code("\n".join(f"{part.name}: {part.version}" for part in about.parts), language=None)
