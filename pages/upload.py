"""Upload: drag several .md files in, preview and lint each, then index them with progress per file."""

from __future__ import annotations

import streamlit as st

from kb_core import DocumentError, KnowledgeBaseError
from pages.shell.wiring import knowledge_base

kb = knowledge_base()
st.title("⬆️ Upload documents")
state = st.session_state

_STAGES = {"parsing": 0.1, "chunking": 0.2, "embedding": 0.3, "saving": 0.7, "indexing": 0.8, "done": 1.0}

NEW_CATEGORY = "➕ New category…"
categories = kb.categories() or ["api", "domain", "troubleshooting"]
col_pick, col_new = st.columns(2)
choice = col_pick.selectbox("Category", [*categories, NEW_CATEGORY], key="category")
category = choice
if choice == NEW_CATEGORY:
    category = col_new.text_input("New category", key="new_category", placeholder="e.g. runbooks",
                                  help="Lower-case letters, digits, '-' and '_'; starts with a letter or digit.")
files = st.file_uploader("Markdown files", type=["md"], accept_multiple_files=True, key="files")

previews = []
if files:
    st.subheader("Preview")
    for uploaded in files:
        data = uploaded.getvalue()
        preview = kb.preview_upload(uploaded.name, data, category or "")
        previews.append((uploaded.name, data, preview))
        icon = "❌" if not preview.can_upload else ("⚠️" if preview.findings else "✅")
        with st.expander(f"{icon} {uploaded.name} → {preview.file_path or 'not accepted'}", expanded=True):
            fm = preview.frontmatter
            if fm is not None:
                st.markdown(f"**{fm.title or '(no title)'}**  \n{fm.summary or '(no summary)'}")
                st.markdown("Keywords: " + (" ".join(f"`{k}`" for k in fm.keywords) or "(none)"))
            for finding in preview.findings:
                {"error": st.error, "warning": st.warning, "info": st.info}[finding.severity](finding.message)

accepted = [item for item in previews if item[2].can_upload]
if previews:
    clicked = st.button(f"Upload {len(accepted)} file(s)", type="primary", disabled=not accepted)
    if clicked:
        results = []
        for name, data, _preview in accepted:
            with st.status(f"{name}", expanded=False) as box:
                bar = st.progress(0.0, text="saving")

                def progress(stage: str, done: int, total: int, bar=bar) -> None:
                    base = _STAGES.get(stage, 0.5)
                    span = 0.4 if stage == "embedding" else 0.1
                    fraction = base + (span * done / total if total else 0)
                    label = f"{stage} {done} of {total}" if stage == "embedding" and total else stage
                    bar.progress(min(fraction, 1.0), text=label)

                try:
                    outcome = kb.upload(name, data, category, progress=progress)
                    results.append({"file": name, "result": outcome.action, "document": outcome.document.file_path,
                                    "chunks": outcome.document.chunk_count, "detail": "; ".join(outcome.warnings)})
                    box.update(label=f"{name}: {outcome.action}", state="complete")
                except DocumentError as exc:
                    results.append({"file": name, "result": "failed", "document": "", "chunks": 0,
                                    "detail": f"{exc} (step: {exc.step})"})
                    box.update(label=f"{name}: failed", state="error")
                except KnowledgeBaseError as exc:
                    results.append({"file": name, "result": "failed", "document": "", "chunks": 0, "detail": str(exc)})
                    box.update(label=f"{name}: failed", state="error")
        refused = [{"file": name, "result": "failed", "document": "", "chunks": 0,
                    "detail": "; ".join(f.message for f in p.findings if f.severity == "error")}
                   for name, _data, p in previews if not p.can_upload]
        state.upload_results = results + refused

if state.get("upload_results"):
    st.subheader("Result")
    st.dataframe(state.upload_results, hide_index=True)
