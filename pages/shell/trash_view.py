"""The Documents page's Trash tab: deleted documents (where they were, when, by whom, size), with Restore (asking
before it replaces a file that exists at that path again) and Purge. Curators only: the page offers the tab to
them alone, and kb_core refuses the writes to anyone else."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError
from kb_core.console import RestoreConflictError
from pages.shell.jobs_panel import render_jobs_panel, started_here
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.views import ROW_OR_CELL, clicked_row, flash, save_and_flash, show_flash, table_key


def render_trash(kb: KnowledgeBase) -> None:
    state = st.session_state
    days = kb.settings.trash_days
    try:
        items = kb.trash.items()
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    st.caption(f"{len(items)} deleted document(s). Each is kept for {days} days (KB_TRASH_DAYS), then purged; "
               "tick or click a row to restore or purge it.")
    show_flash("trash")
    # the purge at opening, or the button's; no text field on this tab: the button's purge reruns it once it ends
    render_jobs_panel(kb, ("purge_trash",), key="trash", recent=1, nothing_to_type=True)
    if not items:
        st.info("The trash is empty.")
        return

    def restore(item_id: str, replace: bool) -> None:
        try:
            outcome = kb.trash.restore(item_id, replace=replace)
        except RestoreConflictError:
            state.trash_confirm = ("replace", item_id)
            return
        except KnowledgeBaseError as exc:
            state.trash_confirm = None
            flash("trash", "error", str(exc))
            return
        state.trash_confirm = None
        flash("trash", "success", f"restored {outcome.document.file_path} ({outcome.action})")

    def purge(item_ids: list[str]) -> None:
        state.trash_confirm = None
        save_and_flash("trash", lambda: kb.trash.purge(items=item_ids),
                       lambda gone: "purged " + ", ".join(item.file_path for item in gone) if gone else
                       "nothing purged: already gone")

    def purge_old() -> None:
        job = save_and_flash("trash", lambda: kb.jobs.start("purge_trash"),
                             lambda job: f"job {job.id}: purging what was deleted {days} days ago or earlier",
                             kind="info")
        if job is not None:
            started_here(job)

    event = st.dataframe(
        [{"file": item.file_path, "deleted (UTC)": item.deleted_at.strftime("%Y-%m-%d %H:%M"),
          "by": item.deleted_by or "unknown", "size": item.size_bytes, "note": item.problem or ""}
         for item in items],
        hide_index=True, on_select="rerun", selection_mode=ROW_OR_CELL,
        key=table_key("trash-table", (item.item_id for item in items)),
        column_config={"size": st.column_config.NumberColumn("size", format="%d B")},
    )
    row = clicked_row(event, "trash-table")
    item = items[row] if row is not None and row < len(items) else None
    if item is not None:
        with st.container(border=True):
            st.markdown(f"{inline_code(item.file_path)} · deleted {item.deleted_at:%Y-%m-%d %H:%M} UTC by "
                        f"{escape_markdown(item.deleted_by or 'someone unknown')} · {item.size_bytes:,} bytes")
            if item.problem:
                st.caption(escape_markdown(item.problem))
            actions = st.container(horizontal=True)
            actions.button("Restore", key=f"restore-{item.item_id}", type="primary", on_click=restore,
                           args=(item.item_id, False), icon=":material/restore_from_trash:")
            actions.button("Purge…", key=f"purge-{item.item_id}", icon=":material/delete_forever:",
                           on_click=lambda: state.update(trash_confirm=("purge", item.item_id)))
            asked = state.get("trash_confirm")
            if asked and asked[1] == item.item_id:
                kind = asked[0]
                if kind == "replace":
                    st.warning(f"{inline_code(item.file_path)} exists again: a document was put at that path after "
                               "this one was deleted. Replace it with the version from the trash?")
                else:
                    st.warning(f"Purge {inline_code(item.file_path)} for good? It cannot be restored afterwards.")
                confirm = st.container(horizontal=True)
                if kind == "replace":
                    confirm.button("Replace", type="primary", key=f"replace-{item.item_id}", on_click=restore,
                                   args=(item.item_id, True))
                else:
                    confirm.button("Confirm purge", type="primary", key=f"confirm-purge-{item.item_id}",
                                   on_click=purge, args=([item.item_id],))
                confirm.button("Cancel", key=f"cancel-trash-{item.item_id}",
                               on_click=lambda: state.update(trash_confirm=None))
    st.button(f"Purge everything deleted {days} days ago or earlier", key="purge-old", on_click=purge_old,
              help="A job on the server, as the knowledge base starts by itself when it opens with something to "
                   "purge.")
