"""The Documents page's keyword map: what makes L0 ambiguous, the documents behind a keyword, the edit that fixes
a document's keywords in place (preview and lint as on the Upload page, saved through upload), and the bulk
operations — rename or remove a keyword across every document that lists it — previewed as a plan, then applied
as one job on the server (progress and cancel in the jobs panel) with an outcome per document."""

from __future__ import annotations

import streamlit as st

from kb_core import JobState, KnowledgeBase, KnowledgeBaseError, Role
from kb_core.console import parse_synonym_lines, synonym_lines
from pages.shell.jobs_panel import render_jobs_panel
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.views import SHOW, render_preview, save_and_flash, selected_row, show_flash, table_key

PROBLEMS, ALL = "Problems only", "All keywords"
KIND_LABELS = {"generic": "⚠️ generic", "clash": "⚠️ clash", "overlap": "⚠️ overlap", "weak": "🚫 weak",
               "shadows": "shadows (harmless)", "ok": ""}


def render_keyword_map(kb: KnowledgeBase) -> None:
    try:
        summary = kb.keywords.map()
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    _render_synonyms(kb)
    _render_plan_report(kb)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Ambiguous keywords", len(summary.ambiguous), help="A query of just this keyword returns several "
              "documents: the answer gets confidence 'low' and an L1 supplement instead of one exact answer.")
    m2.metric("Identical in several documents", len(summary.clashes))
    m3.metric("Inside a longer keyword", len(summary.overlaps), help="`APISIX` inside `Apache APISIX` of another "
              "document: a query of just `APISIX` hits both. A query naming `Apache APISIX` hits only its own "
              "documents (the longest keyword in the query wins), so the longer keyword is harmless.")
    m4.metric("Weak (ignored by L0)", len(summary.weak), help="Shorter than 2 characters, only digits or "
              "punctuation, a stop word, or beyond a document's 64th keyword: they would match almost anything.")
    if summary.generic:
        st.caption(f"Generic (claimed by more than {summary.generic_limit} pages, most first; they do not decide "
                   "an answer alone — L1 does): " + ", ".join(
            f"{inline_code(r.keyword)} ({len(r.file_paths)})" for r in summary.generic[:12]))

    f1, f2 = st.columns([1, 2])
    view = f1.radio("Show", [PROBLEMS, ALL], key="kw_filter", horizontal=True)
    needle = f2.text_input("Find a keyword", key="kw_search").strip().casefold()
    rows = [r for r in (summary.problems if view == PROBLEMS else summary.rows)
            if not needle or needle in r.keyword.casefold()]
    st.caption(f"{len(rows)} of {len(summary)} keywords · tick a row to see its documents and fix them")
    if not rows:
        st.success("No keyword makes L0 ambiguous." if view == PROBLEMS and not needle else "No keyword matches.")
        show_flash("keyword-edit")
        return
    event = st.dataframe(
        [{"keyword": r.keyword, "problem": KIND_LABELS[r.kind], "documents": len(r.file_paths),
          "hits for the bare keyword": r.hits, "why": r.explain(),
          "claimed by": ", ".join(r.file_paths[:3]) + (f" +{len(r.file_paths) - 3}" if len(r.file_paths) > 3 else "")}
         for r in rows],
        hide_index=True, on_select="rerun", selection_mode="single-row",
        key=table_key("keyword-table", (f"{r.keyword}|{r.kind}|{r.hits}" for r in rows)),
        column_config={"why": st.column_config.TextColumn(width="large")},
    )
    show_flash("keyword-edit")
    row = selected_row(event)
    if row is not None and row < len(rows):
        _render_keyword(kb, rows[row])


def _save(kb: KnowledgeBase, edit) -> None:
    def saved(outcome) -> str:
        changes = [*(f"−{k}" for k in edit.removed), *(f"+{k}" for k in edit.added)]
        return (f"{edit.file_path}: keywords saved and the document {outcome.action} ({', '.join(changes)}). "
                "The map below is up to date.")

    save_and_flash("keyword-edit", lambda: kb.documents.save_edit(edit), saved)


def _render_keyword(kb: KnowledgeBase, row) -> None:
    with st.container(border=True):
        st.subheader(f"“{escape_markdown(row.keyword)}”")
        st.caption(escape_markdown(row.explain()))
        hits = kb.keywords.documents(row.keyword)
        st.dataframe([{"document": h.file_path, "title": h.title, "matched by": ", ".join(h.matched_by),
                       "how": "claims it" if h.claims else "a longer keyword contains it"} for h in hits],
                     hide_index=True, key=table_key("keyword-hits", [row.keyword]))
        if len(hits) < row.hits:
            st.caption(f"The first {len(hits)} of {row.hits} documents.")
        if not hits:
            return
        if kb.actor.may(Role.CURATOR):
            _render_bulk(kb, row)
        paths = [h.file_path for h in hits]
        target = st.selectbox("Edit the keywords of", paths, key=table_key("kw-edit-doc", [row.keyword]))
        try:
            current = kb.keywords.of(target)
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
            return
        if not kb.actor.may(Role.CURATOR):
            st.markdown("Keywords: " + (" ".join(inline_code(k) for k in current) or "(none)"))
            st.caption(f"Editing needs the curator role; you are signed in as a {kb.actor.role.label}.")
            return
        text = st.text_area("Keywords (one per line)", "\n".join(current), height=160,
                            key=table_key("kw-text", [target, *current]),
                            help="Rewrites only the `keywords` of the file's frontmatter; comments, other fields "
                                 "and the body stay as they are. Saved through the normal upload path.")
        try:
            edit = kb.documents.prepare_edit(target, keywords=text.splitlines())
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
            return
        if not edit.changed:
            st.caption("Change the list to see the preview; nothing is written until you save.")
            return
        st.markdown("  \n".join(part for part in (
            "Removed: " + ", ".join(map(inline_code, edit.removed)) if edit.removed else "",
            "Added: " + ", ".join(map(inline_code, edit.added)) if edit.added else "",
            "Order changed" if not edit.removed and not edit.added else "") if part))
        render_preview(edit.file_name, edit.preview)
        st.button("Save and re-index", type="primary", key="kw-save", disabled=not edit.preview.can_upload,
                  on_click=_save, args=(kb, edit))


RENAME, REMOVE = "Rename", "Remove"
PLAN, REPORT = "kw-plan", "kw-plan-report"
MAX_PLAN_ROWS = 500  # a plan's table; the counts cover all of it


def _render_bulk(kb: KnowledgeBase, row) -> None:
    """Rename or remove the keyword in every document that lists it: a plan first, then Apply."""
    state = st.session_state
    with st.expander(f"Rename or remove “{escape_markdown(row.keyword)}” in every document that lists it",
                     expanded=(state.get(PLAN) or ("",))[0] == row.keyword):
        c1, c2, c3 = st.columns([1, 2, 1], vertical_alignment="bottom")
        action = c1.radio("Operation", [RENAME, REMOVE], key=table_key("kw-bulk-op", [row.keyword]), horizontal=True)
        new = c2.text_input("New keyword", key=table_key("kw-bulk-new", [row.keyword]), disabled=action == REMOVE,
                            placeholder="the keyword's new spelling or a sharper keyword")
        if c3.button("Preview plan", key="kw-bulk-preview", icon=":material/checklist:"):
            try:
                plan = kb.keywords.prepare_rename(row.keyword, new) if action == RENAME else \
                    kb.keywords.prepare_removal(row.keyword)
            except KnowledgeBaseError as exc:
                st.error(escape_markdown(exc))
                plan = None
            state[PLAN] = (row.keyword, plan) if plan is not None else None
        pending = state.get(PLAN)
        if not pending or pending[0] != row.keyword:
            st.caption("Nothing is written until you apply the plan; each document goes through the same in-place "
                       "edit as a single save.")
            return
        plan = pending[1]
        st.markdown(f"**Plan:** {escape_markdown(plan.describe())}")
        for finding in plan.findings:
            SHOW[finding.severity](escape_markdown(finding.message))
        st.dataframe([{"document": item.file_path, "keywords now": ", ".join(item.before),
                       "after": ", ".join(item.after), "will be": "changed" if item.ready else "left alone",
                       "why": item.reason or "; ".join(item.notes)}
                      for item in plan.items[:MAX_PLAN_ROWS]],
                     hide_index=True, key=table_key("kw-plan-table", [plan.describe(), plan.made_at]))
        buttons = st.container(horizontal=True)
        apply = buttons.button(f"Apply to {len(plan.ready)} documents", type="primary", key="kw-bulk-apply",
                               disabled=not plan.ready, icon=":material/done_all:")
        buttons.button("Discard plan", key="kw-bulk-discard", on_click=lambda: state.update({PLAN: None}))
        if apply:
            # one job on the server: the documents are edited one by one with progress and a cancel button in the
            # jobs panel above, and closing the tab does not stop it
            try:
                job = kb.jobs.start("keyword_plan", plan=plan)
            except KnowledgeBaseError as exc:
                st.error(escape_markdown(exc))
                return
            state[PLAN] = None
            state[REPORT] = job.id
            st.rerun()  # the panel follows the job; its outcome shows on top of the map once the page is redrawn


def _render_plan_report(kb: KnowledgeBase) -> None:
    """The keyword plans running (progress, cancel), and the outcome of this session's last one, per document,
    until dismissed."""
    render_jobs_panel(kb, ("keyword_plan",), key="keyword-plan", recent=0)
    job_id = st.session_state.get(REPORT)
    if job_id is None:
        return
    try:
        job = kb.jobs.get(job_id)
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    if job is None or job.active:
        return
    with st.container(border=True):
        rows = (job.result or {}).get("rows", [])
        clean = job.state == JobState.SUCCEEDED and all(r["outcome"] == "saved" for r in rows)
        SHOW["success" if clean else "warning"](escape_markdown(job.summary or job.state.value))
        st.dataframe([{"document": r["document"], "outcome": r["outcome"], "detail": r["detail"]} for r in rows],
                     hide_index=True, key="kw-plan-report-table")
        st.button("Dismiss", key="kw-plan-report-dismiss", on_click=lambda: st.session_state.update({REPORT: None}))


def _render_synonyms(kb: KnowledgeBase) -> None:
    """The curator's synonym groups (`_synonyms.yaml`): any word of a group stands for its keywords in L0."""
    groups = kb.keywords.synonyms()
    with st.expander(f"Synonyms ({len(groups)} group{'s' if len(groups) != 1 else ''})", expanded=False):
        st.caption("Any word of a group stands for the group's keywords in L0 (whole words, as keywords match); "
                   "the \"why\" panel says *via synonym*. One group per line, words separated by commas. Saved to "
                   "`_synonyms.yaml` in the knowledge base; groups from `l0.synonyms` in settings are added.")
        if not kb.actor.may(Role.CURATOR):
            for group in groups:
                st.markdown(" · ".join(inline_code(word) for word in group))
            return
        text = st.text_area("Synonym groups", value=synonym_lines(groups), key="synonyms-text", height=160,
                            placeholder="限流, rate limiting, limit-req")
        try:
            edited = parse_synonym_lines(text)
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
            return
        for warning in kb.keywords.synonym_warnings(edited):
            st.warning(escape_markdown(warning))
        if st.button("Save synonyms", key="synonyms-save", disabled=edited == groups):
            try:
                saved = kb.keywords.save_synonyms(edited)
                st.success(f"Saved {len(saved)} group(s); lookups use them now.")
            except KnowledgeBaseError as exc:
                st.error(escape_markdown(exc))
