"""The Documents page's inspector: one document's content (cleaned as an agent reads it), frontmatter, raw file
and chunks, with its actions (download, re-index, delete into the trash with the confirmation right under the
button), and for curators an Edit tab: title, summary, keywords and sections rewritten in place, previewed (the
frontmatter's diff, the upload preview and lint) before Save."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, Role
from kb_core.console import clean_document, parse_section_lines, section_lines, split_body
from pages.shell.safe import escape_markdown, inline_code, neutralize_images
from pages.shell.views import field_value, render_preview, save_and_flash, show_flash, table_key

MAX_CHUNKS_SHOWN = 50  # a search narrows the rest down
MAX_RAW_CHARS = 200_000  # the raw view of a huge file; the download has all of it


def render_inspector(kb: KnowledgeBase, doc, on_delete: Callable[[list[int], str], None]) -> None:
    state = st.session_state
    meta = doc.frontmatter
    with st.container(border=True):
        title = st.container(horizontal=True, vertical_alignment="center")
        title.subheader(escape_markdown((meta or {}).get("title") or doc.file_name))
        if meta is None:
            title.badge("L1 only", icon=":material/travel_explore:", color="orange",
                        help="No valid frontmatter: L0 does not know this document; only L1 (search) finds it.")
        st.caption(f"{inline_code(doc.file_path)} · {doc.status.value.lower()} · {doc.chunk_count} chunks · "
                   f"model {inline_code(doc.embedding_model)}")
        if doc.last_error:
            st.error(escape_markdown(doc.last_error))
        content = kb.documents.text(doc.file_path, -1)

        actions = st.container(horizontal=True)
        if content is not None:
            actions.download_button("Download", content.encode("utf-8"), file_name=doc.file_name,
                                    mime="text/markdown", key=f"download-{doc.id}", on_click="ignore",
                                    icon=":material/download:")
        if kb.actor.may(Role.ADMIN) and actions.button("Re-index", key=f"reindex-{doc.id}"):
            save_and_flash("inspector", lambda: kb.documents.reindex(doc.id), lambda _: f"Re-indexed {doc.file_path}")
            st.rerun()
        if kb.actor.may(Role.CURATOR) and actions.button("Delete…", key=f"delete-{doc.id}"):
            state.confirm_delete = {"ids": [doc.id], "where": "inspector"}
        pending = state.get("confirm_delete")
        if pending and pending.get("where") == "inspector" and pending.get("ids") == [doc.id]:
            st.warning(f"Delete {inline_code(doc.file_path)}? Its file goes to the trash for "
                       f"{kb.settings.trash_days} days (Trash tab: restore or purge); its database row, vectors and "
                       "L0 entry are removed now.")
            confirm = st.container(horizontal=True)
            confirm.button("Confirm delete", type="primary", key=f"confirm-delete-{doc.id}", on_click=on_delete,
                           args=([doc.id], "inspector"))
            confirm.button("Cancel", key=f"cancel-delete-{doc.id}", on_click=lambda: state.update(confirm_delete=None))

        may_edit = kb.actor.may(Role.CURATOR)
        tabs = st.tabs(["Content", "Frontmatter", "Raw file", "Chunks", *(["Edit"] if may_edit else [])])
        t_content, t_meta, t_raw, t_chunks = tabs[:4]
        with t_content:
            if content is None:
                st.error("The file is missing on disk.")
            else:
                # what lookups answer with: licence comments, <head>, MDX lines and heading anchors cleaned away;
                # its images as placeholders and links (nothing loads from a document: pages/shell/safe.py)
                st.markdown(neutralize_images(split_body(clean_document(content[:MAX_RAW_CHARS]))))
        with t_meta:
            if meta is None:
                st.warning("No valid frontmatter: this document is reachable through L1 only. Add a `---` block "
                           "with title, keywords and summary to make L0 answer for its keywords.")
            else:
                fields = [("title", meta.get("title")), ("keywords", meta.get("keywords")),
                          ("summary", meta.get("summary")), ("category", meta.get("category") or doc.category)]
                fields += [(str(k), v) for k, v in (meta.get("extra") or {}).items()]
                st.table({"field": [escape_markdown(k) for k, _ in fields],  # st.table renders Markdown
                          "value": [escape_markdown(field_value(v)) for _, v in fields]})
                ignored = kb.documents.entry(doc.file_path)
                if ignored is not None and ignored.ignored_keywords:
                    st.caption("Ignored by L0: " + "; ".join(f"{inline_code(k)} ({escape_markdown(why)})"
                                                             for k, why in ignored.ignored_keywords))
        with t_raw:
            if content is not None:
                st.code(content[:MAX_RAW_CHARS], language="markdown", wrap_lines=True)
                if len(content) > MAX_RAW_CHARS:
                    st.caption(f"First {MAX_RAW_CHARS:,} of {len(content):,} characters; Download has all of it.")
        with t_chunks:
            _render_chunks(kb, doc)
        if may_edit:
            with tabs[4]:
                _render_edit(kb, doc)


def _save_edit(kb: KnowledgeBase, edit, draft_key: str) -> None:
    """Save-button callback: the edit goes through the upload path; the outcome shows above the inspector."""
    st.session_state.pop(draft_key, None)
    # shown in the Edit tab, where the click leaves the curator (above the inspector it was out of sight)
    save_and_flash("inspector-edit", lambda: kb.documents.save_edit(edit),
                   lambda outcome: f"{edit.file_path}: {', '.join(edit.fields)} saved in place and the document "
                                   f"{outcome.action}.")


def _render_edit(kb: KnowledgeBase, doc) -> None:
    """The frontmatter form: nothing is prepared until Preview, nothing written until Save."""
    show_flash("inspector-edit")
    try:
        current = kb.documents.fields(doc.file_path)
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    if not current.exists:
        st.info("This document has no frontmatter: saving adds a block holding the fields you fill in; the body "
                "stays as it is.")
    shown = {"title": current.title, "summary": current.summary, "keywords": "\n".join(current.keywords),
             "sections": section_lines(current.sections)}
    version = table_key(f"fm-{doc.id}", shown.values())  # the form starts again from a file that changed
    draft_key = f"fm-draft-{doc.id}"
    with st.form(key=f"fm-form-{version}", border=False):
        values = {
            "title": st.text_input("Title", shown["title"], key=f"{version}-title"),
            "summary": st.text_area("Summary", shown["summary"], key=f"{version}-summary", height=90),
            "keywords": st.text_area("Keywords (one per line)", shown["keywords"], key=f"{version}-keywords",
                                     height=130),
            "sections": st.text_area("Sections (one per line: name: heading line)", shown["sections"],
                                     key=f"{version}-sections", height=90,
                                     help="The names agents ask for, each pointing at a heading of the body, e.g. "
                                          "`Timeouts: ## 1. Timeouts`. Empty: the headings are the sections."),
        }
        if st.form_submit_button("Preview changes", icon=":material/difference:"):
            st.session_state[draft_key] = (version, {f: v for f, v in values.items() if v != shown[f]})
    st.caption("Only the values you change are rewritten: comments, other fields, line endings and the body stay "
               "byte for byte. Saving re-indexes the document through the upload path.")
    draft = st.session_state.get(draft_key)
    if draft is None or draft[0] != version:
        return
    changed = draft[1]
    try:
        edit = kb.documents.prepare_edit(
            doc.file_path, title=changed.get("title"), summary=changed.get("summary"),
            keywords=changed["keywords"].splitlines() if "keywords" in changed else None,
            sections=parse_section_lines(changed["sections"]) if "sections" in changed else None)
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    if not edit.changed:
        st.info("Nothing to save: the values are the ones in the file.")
        return
    st.code(edit.diff, language="diff", wrap_lines=True)
    render_preview(edit.file_name, edit.preview)
    st.button("Save and re-index", type="primary", key=f"fm-save-{doc.id}", icon=":material/save:",
              disabled=not edit.preview.can_upload, on_click=_save_edit, args=(kb, edit, draft_key))


def _render_chunks(kb: KnowledgeBase, doc) -> None:
    try:
        chunks = kb.documents.chunks(doc.id)
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    needle = st.text_input("Search in this document's chunks", key=f"chunk-search-{doc.id}",
                           placeholder="a word, an error code, a heading…").strip().casefold()
    found = [c for c in chunks if not needle or needle in f"{c.heading}\n{c.text}".casefold()]
    st.caption(f"{len(found)} of {len(chunks)} chunks" + (f" contain “{escape_markdown(needle)}”" if needle else "")
               + (f"; the first {MAX_CHUNKS_SHOWN} shown" if len(found) > MAX_CHUNKS_SHOWN else ""))
    for chunk in found[:MAX_CHUNKS_SHOWN]:
        with st.expander(f"#{chunk.chunk_no} {escape_markdown(chunk.heading or '(frontmatter / top)')} · "
                         f"{len(chunk.text)} chars",
                         expanded=bool(needle) and len(found) <= 3):
            st.text(chunk.text)
