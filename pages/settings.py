"""Settings (admins): the effective settings with secrets masked, the model's state, and the versions of the
parts - what to check first when this console behaves differently from another, and what a bug report needs."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError, Role
from pages.shell.jobs_panel import render_jobs_panel
from pages.shell.safe import escape_markdown
from pages.shell.views import save_and_flash, show_flash
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
configured = kb.settings.embedding_model
if model.model_id != configured or model.state == "unavailable":
    # the built-in model stands in (or none): the configured one can be fetched where there is a network
    st.info(escape_markdown(f"The configured model {configured} is not on this machine, so "
                            f"{'the built-in model embeds' if model.ready else 'L1 runs on full text only'}. "
                            "Pulling it downloads it into the Hugging Face cache (it needs a network); the next "
                            "start of the console uses it and re-embeds the documents as a job while lookups go "
                            "on. Without a network, copy the model's folder here and set KB_EMBEDDING_MODEL."))
    show_flash("model-pull")
    pulls = render_jobs_panel(kb, ("model_pull",), key="model-pull", recent=1)
    if kb.actor.may(Role.ADMIN) and not any(job.active for job in pulls):
        st.button(f"Pull {configured}", key="pull-model", on_click=lambda: save_and_flash(
            "model-pull", lambda: kb.jobs.start("model_pull"), lambda job: f"Pulling {configured} (job {job.id})"))
st.subheader("Settings")
st.caption("What this process runs with (`KB_*` variables, `kb.yaml`, defaults). The Milvus token and the database "
           "password are hidden. They change with the process's environment: restart the console to apply a change.")
st.dataframe([{"setting": name, "value": value} for name, value in about.settings], hide_index=True,
             key="settings-table")
st.subheader("Versions")
st.dataframe([{"part": part.name, "version": part.version} for part in about.parts], hide_index=True,
             key="versions-table")
st.code("\n".join(f"{part.name}: {part.version}" for part in about.parts), language=None)
