"""The Documents page's inspector: one document's content (cleaned as an agent reads it), frontmatter, raw file
and chunks, with its actions (download, re-index, delete into the trash with the confirmation right under the
button)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, Role, clean_document, split_body
from pages.shell.safe import escape_markdown, inline_code, neutralize_images
from pages.shell.views import field_value, flash

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
        content = kb.read_document(doc.file_path, -1)

        actions = st.container(horizontal=True)
        if content is not None:
            actions.download_button("Download", content.encode("utf-8"), file_name=doc.file_name,
                                    mime="text/markdown", key=f"download-{doc.id}", on_click="ignore",
                                    icon=":material/download:")
        if kb.actor.may(Role.ADMIN) and actions.button("Re-index", key=f"reindex-{doc.id}"):
            try:
                kb.reindex(doc.id)
                flash("inspector", "success", f"Re-indexed {doc.file_path}")
            except KnowledgeBaseError as exc:
                flash("inspector", "error", str(exc))
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

        t_content, t_meta, t_raw, t_chunks = st.tabs(["Content", "Frontmatter", "Raw file", "Chunks"])
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
                ignored = kb.l0_entry(doc.file_path)
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


def _render_chunks(kb: KnowledgeBase, doc) -> None:
    try:
        chunks = kb.chunks(doc.id)
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
