"""Documents: browse, click a row to inspect it (content, frontmatter, raw file, chunks) — or open
`/documents?doc=<path>` — move documents to the trash (one, or all the filters show), restore them from the Trash
tab, re-index, reconcile (as jobs on the server), and the keyword map."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError, Role
from kb_core.console import categories_below, category_folders
from pages.shell.inspector import render_inspector
from pages.shell.jobs_panel import render_jobs_panel, started_here
from pages.shell.keyword_map_view import render_keyword_map
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.trash_view import render_trash
from pages.shell.views import ROW_OR_CELL, clicked_row, flash, save_and_flash, show_flash, table_key
from pages.shell.wiring import end_page, knowledge_base

kb = knowledge_base()
may_edit, may_administer = kb.actor.may(Role.CURATOR), kb.actor.may(Role.ADMIN)
st.title("📚 Documents")
state = st.session_state
BULK_OPTIONS = 1000
MAX_NAMES = 50  # a confirmation lists this many paths, then a count


def _start(kind: str, **options) -> None:
    """A button callback: start the job on the server (it goes on whatever this tab does) and say so."""
    job = save_and_flash("maintenance", lambda: kb.jobs.start(kind, **options),
                         lambda job: f"{job.label} started as job {job.id}: it runs on the server, so closing or "
                                     "reloading this tab does not stop it; its progress is below.", kind="info")
    if job is not None:
        started_here(job)  # its end reruns this tab (nothing to type into here): see render_jobs_panel below


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
            messages.append(kb.documents.delete(doc_id).message)
        except KnowledgeBaseError as exc:
            failures.append(str(exc))
    state.confirm_delete = None
    state.bulk = []
    state.bulk_all = False
    if failures:
        moved = f"; {len(messages)} moved to the trash" if messages else ""
        flash(slot, "error", f"{len(failures)} of {len(doc_ids)} not deleted: " + "; ".join(failures) + moved)
    elif len(messages) > 3:
        flash(slot, "success", f"moved {len(messages)} documents to the trash (Trash tab: restore or purge)")
    else:
        flash(slot, "success", "; ".join(messages))


try:
    documents = kb.documents.list()
    missing = kb.documents.missing_files()
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()

if missing:
    st.warning(f"{len(missing)} document(s) are indexed but their file has gone from disk (deleted or moved by "
               "hand). Lookups cannot answer with them: run **Reconcile** (Maintenance tab) with *remove documents "
               "whose file is gone*.  \n" + "  \n".join(inline_code(d.file_path) for d in missing))

# The Trash tab is offered to those who may restore and purge (kb_core refuses anyone else anyway).
tabs = st.tabs(["Documents", "Keyword map", *(["Trash"] if may_edit else []), "Maintenance"], key="documents_tab",
               on_change="rerun")
tab_list, tab_keywords, tab_maintenance = tabs[0], tabs[1], tabs[-1]
tab_trash = tabs[2] if may_edit else None

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

        document_languages = kb.documents.languages()

        def language_of(doc) -> str:
            return document_languages.get(doc.file_path, "und")

        languages = sorted({language_of(d) for d in documents})
        chosen_languages = f4.multiselect("Language", languages, key="filter_language",
                                          help="From frontmatter lang, a language folder or suffix, else the text")
        text = f3.text_input("Search title, file or keyword", key="filter_text").strip().casefold()

        def keywords_of(doc) -> tuple[str, ...]:
            entry = kb.documents.entry(doc.file_path)
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
        st.caption(f"{len(shown)} of {len(documents)} documents" + (" · click a row to inspect it" if shown else ""))
        # `?doc=<path>` (relative to the knowledge base, or as listed) opens that document; selecting a row puts
        # its path there, so the address bar links to what is on screen.
        linked = st.query_params.get("doc", "")
        linked_path = kb.documents.path(linked) if linked else None
        linked_doc = next((d for d in documents if d.file_path == linked_path), None) if linked_path else None
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
            linked_row = next((i for i, d in enumerate(shown) if d is linked_doc), None) if linked_doc else None
            event = st.dataframe(
                cached[1],
                hide_index=True, on_select="rerun", selection_mode=ROW_OR_CELL,
                # a link's document is selected when the table first shows it (a click elsewhere then wins)
                selection_default={"selection": {"rows": [linked_row]}} if linked_row is not None else None,
                key=table_key("documents-table", (d.id for d in shown)),
                column_config={"size": st.column_config.NumberColumn("size", format="%d B")},
            )
            row = clicked_row(event, "documents-table")
            picked = shown[row] if row is not None and row < len(shown) else None
        if picked is not None:
            link = kb.documents.relative_path(picked.file_path) or picked.file_path
            if linked != link:
                st.query_params["doc"] = link
            state.doc_link = link
        elif linked and linked != state.get("doc_link"):  # a link from elsewhere, its document not in the table
            picked = linked_doc
            if picked is None:
                st.warning(f"No document at {inline_code(linked)}: it was deleted (see the Trash tab), renamed, or "
                           "the link is mistyped.")
        elif state.get("doc_link"):  # its row was unselected (or the list changed): the link goes too
            state.doc_link = None
            st.query_params.pop("doc", None)

        inspector = st.container()
        with inspector:
            show_flash("inspector")
            if picked is not None:
                render_inspector(kb, picked, on_delete=_delete)

        if may_edit:
            st.divider()
            # "All shown" takes what the filters show, however many; picking single documents uses a multiselect,
            # which sends every option to the browser on each rerun: offered once the list is filtered down.
            every = st.checkbox(f"Select all {len(shown)} documents shown", key="bulk_all", disabled=not shown,
                                help="Everything the filters above show; filter first to narrow it down.")
            by_label = {f"{d.file_path} (#{d.id})": d for d in shown} if len(shown) <= BULK_OPTIONS else {}
            bulk = st.multiselect("Select documents for bulk delete", list(by_label), key="bulk",
                                  disabled=every or not by_label,
                                  help=None if by_label else f"Filter the list to {BULK_OPTIONS} documents or fewer "
                                                             "to pick single documents, or select all shown.")
            chosen = [d.id for d in shown] if every else [by_label[label].id for label in bulk if label in by_label]
            if st.button(f"Delete {len(chosen)} selected…", key="bulk-delete", disabled=not chosen,
                         help="Into the trash: restore them from the Trash tab"):
                state.confirm_delete = {"ids": chosen, "where": "bulk"}
            pending = state.get("confirm_delete")
            show_flash("bulk")
            if pending and pending.get("where") == "bulk":
                wanted = set(pending["ids"])
                names = [d.file_path for d in documents if d.id in wanted]
                more = f"  \n… and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else ""
                st.warning(f"Move {len(names)} document(s) to the trash? Their files wait there for "
                           f"{kb.settings.trash_days} days (Trash tab: restore or purge); their database rows, "
                           "vectors and L0 entries are removed now.  \n"
                           + "  \n".join(map(escape_markdown, names[:MAX_NAMES])) + more)
                confirm = st.container(horizontal=True)
                confirm.button("Confirm delete", type="primary", on_click=_delete, args=(list(pending["ids"]), "bulk"))
                confirm.button("Cancel", on_click=lambda: state.update(confirm_delete=None))

if tab_keywords.open:
    with tab_keywords:
        render_keyword_map(kb)

if tab_trash is not None and tab_trash.open:
    with tab_trash:
        render_trash(kb)

if tab_maintenance.open and not may_administer:
    with tab_maintenance:
        st.info(f"Reconcile and re-index need the admin role; you are signed in as a {kb.actor.role.label}.")
        render_jobs_panel(kb, ("reconcile", "reindex_all"), key="maintenance", details=_maintenance_details,
                          nothing_to_type=True)
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
        # this tab holds no text field: the end of any reconcile or re-index reruns the page at once
        render_jobs_panel(kb, ("reconcile", "reindex_all"), key="maintenance", details=_maintenance_details,
                          nothing_to_type=True)
        st.markdown("**Settings** this process runs with (`KB_*`, `kb.yaml`; the Milvus token and database password "
                    "are hidden)")
        st.dataframe([{"setting": name, "value": value} for name, value in kb.settings.described()],
                     hide_index=True, key="settings-table")
