"""Lookup playground: the exact `lookup_knowledge` call an agent makes, why it answered as it did, and a retrieval
test bench beside it (retriever, top-k, filters, minimum score; the query's terms highlighted; a history)."""

from __future__ import annotations

import json
import re

import streamlit as st

from kb_core import JobState, KnowledgeBase, KnowledgeBaseError, Role
from kb_core.console import (
    MORE_SECTIONS,
    HistoryEntry,
    category_folders,
    parse_trial_link,
    section_chips,
    split_body,
    trial_link_params,
)
from pages.shell import trial_view
from pages.shell.jobs_panel import render_jobs_panel, started_here
from pages.shell.label_view import render_label_control, served_parts
from pages.shell.safe import escape_markdown, inline_code, neutralize_images
from pages.shell.views import flash, show_flash
from pages.shell.wiring import end_page, knowledge_base

kb = knowledge_base()
st.title("🔎 Lookup playground")
st.caption("Runs the very same `lookup_knowledge` an agent calls (logged with your name as caller; a run from a link "
           "or from the history as `console-replay`, which never counts as needing attention), and beside it a "
           "test bench of L1's rows.")

state = st.session_state
state.setdefault("run_query", False)

# A link (from the Tool calls page, or a test a curator shares) holds the query and the test bench's settings
# (`?q=…&retriever=bm25&k=10&category=api&lang=zh&min_score=1.5`): it fills them in and runs that test once per
# distinct link. The page's own runs keep the URL in step, so a rerun does not repeat an old one.
link_error = None
params = {key: st.query_params.get_all(key) for key in st.query_params}
if any(q.strip() for q in params.get("q", [])):
    try:
        link_query, link_section, link_options = parse_trial_link(params)
        canonical = trial_link_params(link_query, link_options, link_section)
    except KnowledgeBaseError as exc:
        link_error = f"This link's test cannot run: {exc}"
    else:
        if canonical != state.get("linked"):
            state.linked = canonical
            state.query = link_query
            state.section_title = link_section or ""
            trial_view.show_options(link_options)
            state.run_query = state.replay = True

try:
    status = kb.status()
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()
counts = status.counts
# L1 (and the database) knows no document yet: answers can only come from L0, and "nothing found" would
# blame the query for what is an empty index.
index_empty = counts.database == 0 or counts.milvus == 0
try:
    unindexed = len(kb.documents.unindexed_files()) if counts.database is not None else 0
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


def _run_again(entry: HistoryEntry) -> None:
    """A history entry: its query, section and bench settings, run again (a replay)."""
    _rerun(entry.query, entry.section_title)
    trial_view.show_options(entry.options)
    state.replay = True


def _index_now() -> None:
    """A button callback: index the folder as a reconcile job on the server (it goes on if this tab closes)."""
    try:
        job = kb.jobs.start("reconcile")
    except KnowledgeBaseError as exc:
        flash("index-now", "error", str(exc))
    else:
        state.index_job = job.id
        started_here(job)  # its end redraws the page (the panel below)


def _indexing_elsewhere(kb: KnowledgeBase) -> bool:
    """A reconcile job runs that this page's *Index now* did not start (the sidebar's *Reconcile now*, another
    tab, the CLI): the banner shows it instead of offering to index again."""
    try:
        return any(j.active for j in kb.jobs.list(5, ("reconcile",)))
    except KnowledgeBaseError:
        return False


indexing = None
if state.get("index_job"):
    try:
        indexing = kb.jobs.get(state.index_job)
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
        if indexing is not None or _indexing_elsewhere(kb):  # running on the server: its progress, every second
            # the user pressed Index now and waits for it: its end redraws the page (the banner, the counts)
            render_jobs_panel(kb, ("reconcile",), key="index-now", recent=0, refresh_own=True)
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

try:
    folders, languages = category_folders(kb.documents.categories()), sorted(set(kb.documents.languages().values()))
except KnowledgeBaseError:  # the database just went away: the sidebar says so; the test bench offers what it can
    folders, languages = [], []
trial_view.render_controls(dense_available=status.dense_search, folders=folders, languages=languages)

# One container for this run's messages, filled or not: every element after it keeps its place, so while the
# browser reruns it never shows the previous answer beside the new one (see "alternatives" below).
messages = st.container(key="run-messages")
if link_error:
    messages.error(escape_markdown(link_error))
if submitted or state.run_query:
    state.run_query = False
    replay = state.pop("replay", False)
    try:
        options = trial_view.chosen_options()
        run = kb.playground.run(query, options, section_title=section or None, replay=replay)
    except KnowledgeBaseError as exc:  # options kb_core refuses: nothing ran
        messages.error(escape_markdown(exc))
    else:
        state.last = run
        state.answered = (query, section or None)
        if query.strip():  # the URL now links to this test
            state.linked = trial_link_params(query, options, section or None)
            st.query_params.from_dict(state.linked)
        if run.history_error:
            messages.warning(escape_markdown(f"This run is not in your history: {run.history_error}"))


def _agent_view(run) -> None:
    """What the agent receives: the primary and the supplement, why, and the raw JSON, exactly as the tool
    returned it (the test bench's settings never change it). The same elements at the top level every time (what
    varies sits in containers), so a rerun replaces each in place and never shows two "Raw JSON" panels."""
    payload = run.payload
    filters = {k: v for k, v in run.arguments.items() if k in ("category", "language")}
    asked = ", ".join(f"{k}={v!r}" for k, v in filters.items())
    st.caption("The exact tool output: the `lookup_knowledge` answer an agent gets for this query"
               + (escape_markdown(f" with {asked} (the test bench's one category and one language, which an agent can "
                                  "ask for too)") if asked else
                  " (the test bench's other settings do not change it; one category or one language would)") + ".")
    with st.container(key="answer-notes"):
        if run.error:
            st.error(escape_markdown(run.error))
        elif not payload["found"] and index_empty:
            st.warning("The index is empty - no document is indexed for search yet, so only exact keywords of the "
                       "files on disk can answer. Index the documents (above), then look this up again.")
        elif not payload["found"]:
            st.warning("Nothing found: no keyword matched and L1 found no relevant chunk.")
    with st.container(key="answer"):
        if run.result is not None:
            _answer(payload, run.result.trace)
    st.subheader("Raw JSON (what the agent receives)")
    if run.error:
        st.json(payload)
    else:
        st.code(json.dumps(payload, ensure_ascii=False, indent=2), language="json", wrap_lines=True)


def _answer(payload: dict, trace) -> None:
    """The primary and the supplement side by side, the alternatives, and why."""
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
        if payload.get("suggestions"):
            # "did you mean": each asks again with the keyword the query probably meant, as an agent would
            st.markdown("**Did you mean** — a keyword a few typing slips away; click to ask it")
            with st.container(key="suggestion-chips", horizontal=True):
                for i, suggestion in enumerate(payload["suggestions"]):
                    st.button(f"{suggestion['keyword']} → {suggestion['title'] or suggestion['source']}",
                              key=f"suggestion-{i}", help=suggestion["source"], on_click=_rerun,
                              args=(suggestion["keyword"], None))
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


run = state.get("last")
if run is None:
    st.info("Type a query: an error code such as `ERR_TIMEOUT` (one exact L0 hit), an ambiguous term such as "
            "`超时` (several L0 hits, L1 supplements), or a question such as `如何优化缓存` (L1 only).")
else:
    agent_tab, trial_tab = st.tabs(["What the agent receives", trial_view.trial_tab_label(run)])
    with agent_tab:
        _agent_view(run)
        if not run.error:
            render_label_control(kb, run.query, served_parts(run.payload), key="playground", kind="playground")
    with trial_tab:
        trial_view.render_rows(run)

try:
    history = kb.playground.history(20)
except KnowledgeBaseError as exc:
    st.caption(escape_markdown(f"Your history cannot be read now: {exc}"))
else:
    if history:
        trial_view.render_history(history, _run_again)
