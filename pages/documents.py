"""Documents: browse, inspect (frontmatter, content, chunks), delete, re-index, sync, and the keyword map."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError
from kb_core.documents.frontmatter import split_body
from pages.shell.wiring import knowledge_base

kb = knowledge_base()
st.title("📚 Documents")
state = st.session_state

if state.get("flash"):
    kind, message = state.pop("flash")
    {"success": st.success, "error": st.error, "warning": st.warning}[kind](message)


def _progress_runner(label: str, action):
    """Run a long kb_core action inside st.status with a progress bar fed by its progress callback."""
    with st.status(label, expanded=True) as box:
        bar = st.progress(0.0)

        def progress(stage: str, done: int, total: int) -> None:
            bar.progress(min(done / total, 1.0) if total else 1.0, text=f"{stage} {done} of {total}")

        try:
            report = action(progress)
        except KnowledgeBaseError as exc:
            box.update(label=f"{label}: failed", state="error")
            st.error(str(exc))
            return None
        box.update(label=f"{label}: done", state="complete")
        return report


def _delete(doc_ids: list[int]) -> None:
    """Runs as a button callback, before the rerun, so it may reset the selection widgets."""
    messages, failures = [], []
    for doc_id in doc_ids:
        try:
            messages.append(kb.delete(doc_id).message)
        except KnowledgeBaseError as exc:
            failures.append(str(exc))
    state.confirm_delete = None
    state.bulk = []
    state.inspect = None
    state.flash = ("error", "; ".join(failures)) if failures else ("success", "; ".join(messages))


try:
    documents = kb.documents()
except KnowledgeBaseError as exc:
    st.error(str(exc))
    st.stop()

tab_list, tab_keywords, tab_maintenance = st.tabs(["Documents", "Keyword map", "Maintenance"])

with tab_list:
    f1, f2, f3 = st.columns([1, 1, 2])
    categories = sorted({d.category for d in documents})
    chosen_categories = f1.multiselect("Category", categories, key="filter_category")
    statuses = sorted({d.status.value for d in documents})
    chosen_statuses = f2.multiselect("Status", statuses, key="filter_status")
    text = f3.text_input("Search title, file or keyword", key="filter_text").strip().casefold()

    def keywords_of(doc) -> tuple[str, ...]:
        entry = kb.index.get(doc.file_path)
        return entry.keywords if entry else ()

    def visible(doc) -> bool:
        if chosen_categories and doc.category not in chosen_categories:
            return False
        if chosen_statuses and doc.status.value not in chosen_statuses:
            return False
        meta = doc.frontmatter or {}
        haystack = " ".join([doc.file_path, str(meta.get("title", "")), *keywords_of(doc)]).casefold()
        return not text or text in haystack

    shown = [d for d in documents if visible(d)]
    st.caption(f"{len(shown)} of {len(documents)} documents")
    if not documents:
        st.info("No documents yet: upload some, or use Maintenance → Sync folder for files already on disk.")
    else:
        st.dataframe(
            [{"id": d.id, "title": (d.frontmatter or {}).get("title", ""), "category": d.category,
              "keywords": ", ".join(keywords_of(d)), "status": d.status.value.lower(), "chunks": d.chunk_count,
              "size": d.size_bytes, "updated (UTC)": d.updated_at.strftime("%Y-%m-%d %H:%M"), "file": d.file_path}
             for d in shown],
            hide_index=True,
            column_config={"size": st.column_config.NumberColumn("size", format="%d B")},
        )

    by_label = {f"{d.file_path} (#{d.id})": d for d in shown}
    picked = st.selectbox("Inspect a document", list(by_label), index=None, key="inspect",
                          placeholder="Choose a document…")
    if picked:
        doc = by_label[picked]
        st.subheader((doc.frontmatter or {}).get("title") or doc.file_name)
        st.caption(f"`{doc.file_path}` · {doc.status.value.lower()} · {doc.chunk_count} chunks · "
                   f"model `{doc.embedding_model}`")
        if doc.last_error:
            st.error(doc.last_error)
        t_meta, t_content, t_chunks = st.tabs(["Frontmatter", "Content", "Chunks in Milvus"])
        with t_meta:
            meta = doc.frontmatter
            if meta is None:
                st.warning("No valid frontmatter: this document is reachable through L1 only.")
            else:
                st.markdown(f"**Title** {meta.get('title') or '—'}  \n**Summary** {meta.get('summary') or '—'}")
                st.markdown("**Keywords** " + (" ".join(f"`{k}`" for k in meta.get("keywords", [])) or "—"))
                st.caption(f"Stored under category `{doc.category}`"
                           + (f"; frontmatter says `{meta['category']}`" if meta.get("category") else ""))
                if meta.get("extra"):
                    st.markdown("**Other fields**")
                    st.json(meta["extra"], expanded=False)
        with t_content:
            content = kb.read_document(doc.file_path)
            if content is None:
                st.error("The file is missing on disk.")
            else:
                st.markdown(split_body(content))
        with t_chunks:
            try:
                for chunk in kb.chunks(doc.id):
                    with st.expander(f"#{chunk.chunk_no} {chunk.heading or '(frontmatter / top)'} · "
                                     f"{len(chunk.text)} chars"):
                        st.text(chunk.text)
            except KnowledgeBaseError as exc:
                st.error(str(exc))
        actions = st.container(horizontal=True)
        if actions.button("Re-index", key=f"reindex-{doc.id}"):
            try:
                kb.reindex(doc.id)
                state.flash = ("success", f"Re-indexed {doc.file_path}")
            except KnowledgeBaseError as exc:
                state.flash = ("error", str(exc))
            st.rerun()
        if actions.button("Delete…", key=f"delete-{doc.id}"):
            state.confirm_delete = [doc.id]

    st.divider()
    bulk = st.multiselect("Select documents for bulk delete", list(by_label), key="bulk")
    if st.button(f"Delete {len(bulk)} selected…", disabled=not bulk):
        state.confirm_delete = [by_label[label].id for label in bulk]

    pending = state.get("confirm_delete")
    if pending:
        names = [d.file_path for d in documents if d.id in pending]
        st.warning("Delete for good (file, database row, vectors and L0 entry)?  \n" + "  \n".join(names))
        confirm = st.container(horizontal=True)
        confirm.button("Confirm delete", type="primary", on_click=_delete, args=(list(pending),))
        confirm.button("Cancel", on_click=lambda: state.update(confirm_delete=None))

with tab_keywords:
    claims = kb.keyword_map()
    collisions = [c for c in claims if c.collides]
    weak = [c for c in claims if c.weak]
    m1, m2 = st.columns(2)
    m1.metric("Ambiguous keywords", len(collisions), help="Keywords claimed by several documents: a query that "
              "matches them gets confidence 'low' and an L1 supplement instead of one exact answer.")
    m2.metric("Weak keywords (ignored by L0)", len(weak), help="Shorter than 2 characters, only digits or "
              "punctuation, a stop word, or beyond a document's 64th keyword: they would match almost anything.")
    st.dataframe(
        [{"keyword": c.keyword, "documents": len(c.file_paths), "claimed by": "\n".join(c.file_paths),
          "ambiguous": "⚠️" if c.collides else "", "ignored by L0": c.weak or ""} for c in claims],
        hide_index=True,
    )

with tab_maintenance:
    st.markdown("**Sync folder** reconciles disk, database, Milvus and L0: it indexes `.md` files placed under "
                "the knowledge base by hand (e.g. with git), completes interrupted writes, deletes vectors without a "
                "document and re-indexes documents with missing vectors, and lists rows whose file has gone.")
    if st.button("Sync folder"):
        report = _progress_runner("Syncing the folder", lambda progress: kb.repair(progress=progress))
        if report is not None:
            synced = report.sync
            st.success(report.summary() + (f"; {len(synced.unchanged)} unchanged" if synced else ""))
            for path, reason in (*report.failed, *(synced.failed if synced else ())):
                st.error(f"{path}: {reason}")
            state.missing_files = list(report.missing_files)
    if state.get("missing_files"):
        st.warning("Files gone from disk: " + ", ".join(f"`{p}`" for p in state.missing_files))
        if st.button(f"Delete these {len(state.missing_files)} document(s) and their vectors", key="drop-missing"):
            report = _progress_runner("Deleting documents whose file is gone",
                                      lambda progress: kb.repair(delete_missing=True, progress=progress))
            if report is not None:
                st.success(f"{len(report.deleted)} deleted")
                state.missing_files = list(report.missing_files)
    st.markdown("**Re-index all** re-embeds every document from its saved file, e.g. after a model change.")
    if st.button("Re-index all"):
        report = _progress_runner("Re-indexing", lambda progress: kb.reindex_all(progress=progress))
        if report is not None:
            st.success(f"{len(report.reindexed)} re-indexed")
            for path, reason in report.failed:
                st.error(f"{path}: {reason}")
