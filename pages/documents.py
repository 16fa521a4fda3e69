"""Documents: browse, tick a row to inspect it (content, frontmatter, raw file, chunks), delete, re-index,
reconcile (as jobs on the server), and the keyword map."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError, Role, categories_below, category_folders
from pages.shell.inspector import render_inspector
from pages.shell.jobs_panel import render_jobs_panel
from pages.shell.keyword_map_view import render_keyword_map
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.views import flash, selected_row, show_flash, table_key
from pages.shell.wiring import knowledge_base

kb = knowledge_base()
may_edit, may_administer = kb.actor.may(Role.CURATOR), kb.actor.may(Role.ADMIN)
st.title("📚 Documents")
state = st.session_state
BULK_OPTIONS = 1000


def _start(kind: str, **options) -> None:
    """A button callback: start the job on the server (it goes on whatever this tab does) and say so."""
    try:
        job = kb.start_job(kind, **options)
    except KnowledgeBaseError as exc:
        flash("maintenance", "error", str(exc))
        return
    flash("maintenance", "info", f"{job.label} started as job {job.id}: it runs on the server, so closing or "
                                 "reloading this tab does not stop it; its progress is below.")


def _maintenance_details(job) -> None:
    """What the latest reconcile or re-index all changed, below its summary."""
    result = job.result or {}
    for path in result.get("removed", ()):
        st.info(escape_markdown(f"removed from the index: {path}"))
    for path, reason in result.get("failed", ()):
        st.error(escape_markdown(f"{path}: {reason}"))
    if job.counts.get("failed", 0) > len(result.get("failed", ())):
        st.caption(f"… and {job.counts['failed'] - len(result.get('failed', ()))} more failed")
    refused = result.get("refused", ())
    if refused:  # each once, with the reason (a copied tree can bring hundreds)
        st.warning(f"{job.counts.get('refused', len(refused))} .md file(s) are not indexed: the path rule refuses "
                   "them. Rename or move them, then reconcile again.")
        st.dataframe([{"file": path, "why": reason} for path, reason in refused], hide_index=True,
                     key=f"reconcile-refused-{job.id}")


def _delete(doc_ids: list[int], slot: str) -> None:
    """Runs as a button callback, before the rerun, so it may reset the selection widgets."""
    messages, failures = [], []
    for doc_id in doc_ids:
        try:
            messages.append(kb.delete(doc_id).message)
        except KnowledgeBaseError as exc:
            failures.append(str(exc))
    state.confirm_delete = None
    state.bulk = []
    flash(slot, *(("error", "; ".join(failures)) if failures else ("success", "; ".join(messages))))


try:
    documents = kb.documents()
    missing = kb.missing_files()
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    st.stop()

if missing:
    st.warning(f"{len(missing)} document(s) are indexed but their file has gone from disk (deleted or moved by "
               "hand). Lookups cannot answer with them: run **Reconcile** (Maintenance tab) with *remove documents "
               "whose file is gone*.  \n" + "  \n".join(inline_code(d.file_path) for d in missing))

tab_list, tab_keywords, tab_maintenance = st.tabs(["Documents", "Keyword map", "Maintenance"],
                                                  key="documents_tab", on_change="rerun")

if tab_list.open:
    with tab_list:
        f1, f2, f4, f3 = st.columns([1, 1, 1, 2])
        # Categories are folder paths (apisix/docs/en/latest): the filter offers every folder, and a folder shows
        # everything below it. Worked out per distinct category; each row then costs one set lookup, as before.
        in_use = {d.category for d in documents}
        chosen_categories = f1.multiselect("Category", category_folders(in_use), key="filter_category",
                                           help="A folder includes its sub-folders: apisix/docs shows "
                                                "apisix/docs/en/latest too.")
        chosen_below = categories_below(in_use, chosen_categories)
        statuses = sorted({d.status.value for d in documents})
        chosen_statuses = f2.multiselect("Status", statuses, key="filter_status")

        def language_of(doc) -> str:
            entry = kb.l0_entry(doc.file_path)
            return entry.lang if entry else "—"  # without frontmatter L0 does not know it

        languages = sorted({language_of(d) for d in documents})
        chosen_languages = f4.multiselect("Language", languages, key="filter_language",
                                          help="From frontmatter lang, a language folder or suffix, else the text")
        text = f3.text_input("Search title, file or keyword", key="filter_text").strip().casefold()

        def keywords_of(doc) -> tuple[str, ...]:
            entry = kb.l0_entry(doc.file_path)
            return entry.keywords if entry else ()

        def title_of(doc) -> str:
            return str((doc.frontmatter or {}).get("title") or doc.file_name)

        def visible(doc) -> bool:
            if chosen_categories and doc.category not in chosen_below:
                return False
            if chosen_statuses and doc.status.value not in chosen_statuses:
                return False
            if chosen_languages and language_of(doc) not in chosen_languages:
                return False
            return not text or text in " ".join([doc.file_path, title_of(doc), *keywords_of(doc)]).casefold()

        filtering = bool(chosen_categories or chosen_statuses or chosen_languages or text)
        shown = [d for d in documents if visible(d)] if filtering else documents
        st.caption(f"{len(shown)} of {len(documents)} documents" + (" · tick a row to inspect it" if shown else ""))
        picked = None
        if not documents:
            st.info("No documents yet: upload some, or use Maintenance → Reconcile for files already on disk.")
        else:
            def table_row(d) -> dict:
                return {"id": d.id, "title": title_of(d), "category": d.category, "lang": language_of(d),
                        "keywords": ", ".join(keywords_of(d)), "found by": "L0 + L1" if d.frontmatter else "L1 only",
                        "status": d.status.value.lower(), "chunks": d.chunk_count, "size": d.size_bytes,
                        "updated (UTC)": d.updated_at.strftime("%Y-%m-%d %H:%M"),
                        "last changed by": d.changed_by or "", "file": d.file_path}

            # Rows are rebuilt only when a document changed: at 10,000 documents building them is a good part
            # of a rerun, and a click in the table reruns the page.
            fingerprint = hash(tuple((d.id, d.updated_at, d.status) for d in shown))
            cached = state.get("_documents_table")
            if cached is None or cached[0] != fingerprint:
                cached = state["_documents_table"] = (fingerprint, [table_row(d) for d in shown])
            event = st.dataframe(
                cached[1],
                hide_index=True, on_select="rerun", selection_mode="single-row",
                key=table_key("documents-table", (d.id for d in shown)),
                column_config={"size": st.column_config.NumberColumn("size", format="%d B")},
            )
            row = selected_row(event)
            picked = shown[row] if row is not None and row < len(shown) else None

        inspector = st.container()
        with inspector:
            show_flash("inspector")
            if picked is not None:
                render_inspector(kb, picked, on_delete=_delete)

        if may_edit:
            st.divider()
            # A multiselect sends every option to the browser on each rerun: offer it once the list is filtered down.
            by_label = {f"{d.file_path} (#{d.id})": d for d in shown} if len(shown) <= BULK_OPTIONS else {}
            bulk = st.multiselect("Select documents for bulk delete", list(by_label), key="bulk",
                                  disabled=not by_label,
                                  help=None if by_label else f"Filter the list to {BULK_OPTIONS} documents or fewer "
                                                             "to select several for deletion.")
            if st.button(f"Delete {len(bulk)} selected…", disabled=not bulk):
                state.confirm_delete = {"ids": [by_label[label].id for label in bulk], "where": "bulk"}
            pending = state.get("confirm_delete")
            show_flash("bulk")
            if pending and pending.get("where") == "bulk":
                names = [d.file_path for d in documents if d.id in pending["ids"]]
                st.warning("Delete for good (file, database row, vectors and L0 entry)?  \n"
                           + "  \n".join(map(escape_markdown, names)))
                confirm = st.container(horizontal=True)
                confirm.button("Confirm delete", type="primary", on_click=_delete, args=(list(pending["ids"]), "bulk"))
                confirm.button("Cancel", on_click=lambda: state.update(confirm_delete=None))

if tab_keywords.open:
    with tab_keywords:
        render_keyword_map(kb)

if tab_maintenance.open and not may_administer:
    with tab_maintenance:
        st.info(f"Reconcile and re-index need the admin role; you are signed in as a {kb.actor.role.label}.")
        render_jobs_panel(kb, ("reconcile", "reindex_all"), key="maintenance", details=_maintenance_details)
elif tab_maintenance.open:
    with tab_maintenance:
        st.markdown("**Reconcile** brings disk, database, Milvus and L0 into agreement: it indexes `.md` files "
                    "placed under the knowledge base by hand (e.g. with git), completes interrupted writes, deletes "
                    "vectors without a document and re-indexes documents with missing vectors. Documents whose "
                    "file has gone are listed, and removed from the index when you tick the box.")
        delete_missing = st.checkbox(f"Remove documents whose file is gone ({len(missing)})", key="delete-missing",
                                     help="Deletes their database rows, vectors and L0 entries. Files on disk are "
                                          "never touched.")
        st.button("Reconcile", key="reconcile", on_click=_start, args=("reconcile",),
                  kwargs={"delete_missing": delete_missing})
        st.markdown("**Re-index all** re-embeds every document from its saved file, e.g. after a model change.")
        st.button("Re-index all", key="reindex-all", on_click=_start, args=("reindex_all",))
        st.caption("Both run as jobs on the server, one heavy job at a time (others queue): closing this tab does not "
                   "stop them, and every tab shows their progress here.")
        show_flash("maintenance")
        render_jobs_panel(kb, ("reconcile", "reindex_all"), key="maintenance", details=_maintenance_details)
        st.markdown("**Settings** this process runs with (`KB_*`, `kb.yaml`; the Milvus token and database password "
                    "are hidden)")
        st.dataframe([{"setting": name, "value": value} for name, value in kb.settings.described()],
                     hide_index=True, key="settings-table")
