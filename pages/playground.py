"""Lookup playground: the exact `lookup_knowledge` call an agent makes, and why it answered as it did."""

from __future__ import annotations

import json
import re

import streamlit as st

from kb_core import MORE_SECTIONS, JobState, KnowledgeBaseError, Role, section_chips, split_body
from pages.shell.jobs_panel import render_jobs_panel
from pages.shell.safe import escape_markdown, inline_code, neutralize_images
from pages.shell.views import flash, show_flash
from pages.shell.wiring import knowledge_base

kb = knowledge_base()
st.title("🔎 Lookup playground")
st.caption("Runs the very same `lookup_knowledge` an agent calls (logged with caller `console`).")

state = st.session_state
state.setdefault("history", [])
state.setdefault("run_query", False)

# `?q=…` (a link from the tool-call page, or one a curator shares) fills the query in and runs it, once per
# distinct value: the page's own lookups keep the URL in step, so a rerun does not repeat an old query.
linked = st.query_params.get("q", "")
if linked.strip() and linked != state.get("linked_query"):
    state.linked_query = linked
    state.query = linked
    state.section_title = ""
    state.run_query = True

try:
    counts = kb.status().counts
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    st.stop()
# L1 (and the database) knows no document yet: answers can only come from L0, and "nothing found" would
# blame the query for what is an empty index.
index_empty = counts.database == 0 or counts.milvus == 0
try:
    unindexed = len(kb.unindexed_files()) if counts.database is not None else 0
except KnowledgeBaseError:  # the database just went away: the sidebar says so
    unindexed = 0


def _section_chips(query: str, sections: list[str] | None, served: str | None) -> None:
    """availableSections as chips: a click asks again with that section_title, as an agent would. About a dozen
    (the top-level sections first) fit above the answer; the rest wait behind "more"."""
    if not sections:
        return
    picked = (served, state.answered[1]) if served is not None else ()  # a curator's name serves a heading path
    chips = section_chips(sections, chosen=picked)
    key_of = {name: i for i, name in enumerate(sections)}

    def chip(name: str) -> None:
        st.button(escape_markdown(name), key=f"chip-{key_of[name]}", type="primary" if name in picked else "secondary",
                  on_click=_rerun, args=(query, name))

    with st.container(horizontal=True, gap="small", key="section-chips"):
        st.button("Whole document", key="chip-whole", type="primary" if served is None else "secondary",
                  on_click=_rerun, args=(query, None))
        for name in chips.shown:
            chip(name)
        if chips.more or chips.truncated:
            with st.popover(f"{len(chips.more)} more" + ("…" if chips.truncated else ""), key="chip-more"):
                for name in chips.more:
                    chip(name)
                if chips.truncated:
                    st.caption(f"{MORE_SECTIONS} and later headings: type one into section_title")


def _demote_headings(markdown: str) -> str:
    """A document's own `#` headings would dwarf the panel: render them three levels smaller."""
    return re.sub(r"^(#{1,3}) ", lambda m: "#" * min(len(m.group(1)) + 3, 6) + " ", markdown, flags=re.MULTILINE)


def _rerun(query: str, section: str | None) -> None:
    state.query = query
    state.section_title = section or ""
    state.run_query = True


def _index_now() -> None:
    """A button callback: index the folder as a reconcile job on the server (it goes on if this tab closes)."""
    try:
        state.index_job = kb.start_job("reconcile").id
    except KnowledgeBaseError as exc:
        flash("index-now", "error", str(exc))


indexing = None
if state.get("index_job"):
    try:
        indexing = kb.job(state.index_job)
    except KnowledgeBaseError:
        indexing = None
    if indexing is None or not indexing.active:
        state.pop("index_job")
if indexing is not None and not indexing.active:
    if indexing.state == JobState.SUCCEEDED:
        st.success(escape_markdown(f"Indexed: {indexing.summary}"))
    else:
        st.error(escape_markdown(f"Indexing {indexing.state.value}: {indexing.summary}"))
elif unindexed > 0:
    with st.container(border=True):
        first_run = "The index is empty: " if counts.database == 0 else ""
        st.markdown(f"{first_run}**{unindexed} document{'s' if unindexed != 1 else ''} in the folder "
                    f"{'are' if unindexed != 1 else 'is'} not indexed yet.** Indexing reads them into the database "
                    "and the search index, so lookups can find them by meaning as well as by keyword.")
        show_flash("index-now")
        if indexing is not None:  # running on the server: its progress, refreshed every second
            render_jobs_panel(kb, ("reconcile",), key="index-now", recent=0)
        elif kb.actor.may(Role.ADMIN):
            st.button(f"Index {unindexed} document{'s' if unindexed != 1 else ''} now", key="index-now",
                      type="primary", on_click=_index_now)
elif counts.files == 0 and counts.database == 0:
    st.info("The index is empty: there are no documents yet. Upload Markdown files on the **Upload** page, or "
            "put them under the knowledge-base folder and reconcile.")


def _new_query_clears_the_section() -> None:
    """A section belongs to the document of the last answer: a new query starts without it, unless the
    section_title was changed in the same submission."""
    last = state.get("answered")
    if last and state.query != last[0] and state.section_title == (last[1] or ""):
        state.section_title = ""


with st.form("lookup", border=False):
    left, right = st.columns([3, 1])
    query = left.text_input("Query", key="query", placeholder="ERR_TIMEOUT, 超时, 如何优化缓存 …")
    section = right.text_input("section_title (optional)", key="section_title")
    submitted = st.form_submit_button("Look up", type="primary", on_click=_new_query_clears_the_section)

if submitted or state.run_query:
    state.run_query = False
    if query.strip():
        st.query_params["q"] = state.linked_query = query  # the URL now links to this lookup
    try:
        response = kb.call_tool({"query": query, "section_title": section or None}, caller=kb.actor.name[:64])
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        st.stop()
    state.last = response
    state.answered = (query, section or None)
    result = response.result
    state.history.insert(0, {
        "query": query,
        "section_title": section or None,
        "found": response.payload.get("found"),
        "answer": " + ".join(result.match_types) if result else "error",
        "ms": response.latency_ms,
    })
    del state.history[20:]

response = state.get("last")
if response is None:
    st.info("Type a query: an error code such as `ERR_TIMEOUT` (one exact L0 hit), an ambiguous term such as "
            "`超时` (several L0 hits, L1 supplements), or a question such as `如何优化缓存` (L1 only).")
elif response.error:
    st.error(escape_markdown(response.error))
    st.subheader("Raw JSON (what the agent receives)")
    st.json(response.payload)
else:
    payload, result = response.payload, response.result
    trace = result.trace
    if not payload["found"] and index_empty:
        st.warning("The index is empty - no document is indexed for search yet, so only exact keywords of the "
                   "files on disk can answer. Index the documents (above), then look this up again.")
    elif not payload["found"]:
        st.warning("Nothing found: no keyword matched and L1 found no relevant chunk.")

    col_primary, col_supplement = st.columns(2, border=True)
    with col_primary:
        st.subheader("Primary")
        primary = payload["primary"]
        if primary is None:
            st.caption("No L0 match." if not trace.stale_sources else "L0 matches point at files that are gone.")
        else:
            badge = ":green-badge[confidence: high]" if primary["confidence"] == "high" else \
                ":orange-badge[confidence: low]"
            served = (f" :violet-badge[{escape_markdown('section: ' + primary['section'])}]"
                      if primary.get("section") else "")
            st.markdown(f":blue-badge[{primary['matchType']}] {badge}{served}  \n{inline_code(primary['source'])}")
            if primary.get("translations"):  # served in the query's language; the page's other versions
                st.caption("Also in " + ", ".join(f"**{escape_markdown(t['lang'])}** {inline_code(t['source'])}"
                                                  for t in primary["translations"]))
            if payload.get("note"):
                st.info(escape_markdown(payload["note"]))
            _section_chips(state.answered[0], primary.get("availableSections"), primary.get("section"))
            with st.container(height=420):
                st.markdown(neutralize_images(_demote_headings(split_body(primary["content"]))))
    with col_supplement:
        st.subheader("Supplement")
        supplement = payload["supplement"]
        if supplement is None:
            st.caption("L1 was not called: the L0 answer is unique." if not trace.l1_called
                       else "The index is empty: L1 has no document to search." if index_empty
                       else "L1 found no relevant chunk.")
        else:
            found_by = " + ".join(supplement.get("retrievers") or [])
            st.markdown(f":violet-badge[{supplement['matchType']}]"
                        + (f" :gray-badge[found by {found_by}]" if found_by else "")
                        + f"  \n{inline_code(supplement['source'])}")
            with st.container(height=420):
                st.markdown(neutralize_images(_demote_headings(supplement["content"])))

    # Always one container, filled or not: a block that comes and goes would shift every element after it, and
    # the browser would briefly show the previous answer's "Why" beside the new one while it reruns.
    with st.container(key="alternatives"):
        if payload.get("alternatives"):
            st.markdown("**Alternatives** — the answer is unsure; other pages worth reading, best first")
            st.dataframe(payload["alternatives"], hide_index=True)

    st.subheader("Why")
    timing = " · ".join(f"{stage} {ms:.1f} ms" for stage, ms in trace.timings_ms.items())
    st.caption(f"request `{trace.request_id}` · {timing}")
    if trace.decision:
        st.markdown(f"**Decided by** — {trace.decision}")
    st.markdown(f"**L0** — {trace.l0_count} document(s) matched")
    if trace.primary_reason and trace.primary_source:
        st.markdown(f"Primary: {inline_code(trace.primary_source)} — {escape_markdown(trace.primary_reason)}")
    for match in trace.l0_matches:
        chips = " ".join(f":orange-background[**{escape_markdown(kw)}**]" if kw in match.keywords else inline_code(kw)
                         for kw in match.entry.keywords)
        how = ", ".join(match.explain())
        rarity = f" · rarest: “{match.rarest_keyword}” (claimed by {match.claimed_by})" if match.claimed_by else ""
        st.markdown(f"- {inline_code(match.entry.file_path)} — {escape_markdown(match.entry.title)}  \n  {chips}  \n  "
                    f"_{escape_markdown(how + rarity)}_")
    if trace.l0_count > len(trace.l0_matches):
        st.caption(f"… and {trace.l0_count - len(trace.l0_matches)} more")
    for stale in trace.stale_sources:
        st.markdown(f"- ~~{inline_code(stale)}~~ matched but its file is gone (skipped)")
    st.markdown(f"**L1** — {escape_markdown(trace.l1_reason)}")
    if trace.l1_error:
        st.error(escape_markdown(f"L1 failed, answered with L0 only: {trace.l1_error}"))
    if trace.l1_hits:
        st.dataframe(
            [{"source": h.source, "heading": h.heading, "fused score": h.score,
              "found by": " + ".join(h.retrievers), **{f"{k} score": v for k, v in h.retriever_scores}}
             for h in trace.l1_hits],
            hide_index=True,
        )
    elif trace.l1_called:
        st.caption("The index is empty: no chunk to search yet." if index_empty
                   else "No chunk passed the relevance check.")

    st.subheader("Raw JSON (what the agent receives)")
    st.code(json.dumps(payload, ensure_ascii=False, indent=2), language="json", wrap_lines=True)

if state.history:
    st.subheader("Recent queries")
    for i, item in enumerate(state.history):
        cols = st.columns([4, 2, 1, 1])
        section_note = f" · section {inline_code(item['section_title'])}" if item["section_title"] else ""
        cols[0].markdown(f"{inline_code(item['query'])}{section_note}")  # a `?q=` link's query is anyone's text
        cols[1].caption(f"{'found' if item['found'] else 'not found'} · {item['answer']}")
        cols[2].caption(f"{item['ms']:.1f} ms")
        cols[3].button("Run again", key=f"again-{i}", on_click=_rerun, args=(item["query"], item["section_title"]))
