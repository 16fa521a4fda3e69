"""The playground's test bench: its controls, its rows with the query's terms highlighted, and the history."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from kb_core.console import MAX_TOP_K, MIN_TOP_K, HistoryEntry, Retriever, TrialOptions, TrialRun
from pages.shell.safe import escape_markdown, highlight_text, inline_code

# the controls' session-state keys
RETRIEVER, TOP_K, CATEGORIES, LANGUAGES, MIN_SCORE = ("trial_retriever", "trial_top_k", "trial_categories",
                                                      "trial_languages", "trial_min_score")
_DEFAULTS = TrialOptions()
TALL_CHUNK = 700  # characters: a longer chunk scrolls inside its row


def show_options(options: TrialOptions) -> None:
    """Set the controls to `options` (before they are drawn: from a link, or a history entry run again)."""
    state = st.session_state
    state[RETRIEVER] = options.retriever.value
    state[TOP_K] = options.top_k
    state[CATEGORIES] = list(options.categories)
    state[LANGUAGES] = list(options.languages)
    state[MIN_SCORE] = options.min_score


def render_controls(*, dense_available: bool, folders: list[str], languages: list[str]) -> None:
    """Retriever, top-k, category, language and minimum score. Only "as agents get it" is the agents' own
    lookup; the rest apply to an L1 retriever, so they are disabled with it."""
    state = st.session_state
    state.setdefault(RETRIEVER, _DEFAULTS.retriever.value)
    state.setdefault(TOP_K, _DEFAULTS.top_k)
    state.setdefault(CATEGORIES, [])
    state.setdefault(LANGUAGES, [])
    state.setdefault(MIN_SCORE, None)
    retrievers = [r.value for r in Retriever if r is not Retriever.DENSE or dense_available
                  or state[RETRIEVER] == Retriever.DENSE.value]  # a link's choice stays visible, and is refused
    with st.container(border=True, key="bench-controls"):
        c1, c2, c3, c4, c5 = st.columns([2, 2, 3, 2, 2])
        c1.selectbox("Retriever", retrievers, key=RETRIEVER, format_func=lambda value: Retriever(value).label,
                     help="As agents get it: the rows the agents' own lookup used (L0 first; L1 top 3, no filter). "
                          "The L1 retrievers run L1 on their own, with the settings beside them."
                          + ("" if dense_available else " Dense only needs the embedding model, which is not "
                                                        "ready."))
        agent = state[RETRIEVER] == Retriever.AGENT.value
        c2.slider("Top-k (L1 rows)", MIN_TOP_K, MAX_TOP_K, key=TOP_K, disabled=agent)
        c3.multiselect("Category", sorted(set(folders) | set(state[CATEGORIES]), key=lambda f: f.split("/")),
                       key=CATEGORIES, disabled=agent, help="A folder includes its sub-folders.")
        c4.multiselect("Language", sorted(set(languages) | set(state[LANGUAGES])), key=LANGUAGES, disabled=agent,
                       help="From frontmatter lang, a language folder or suffix, else the text (und: undetermined)")
        c5.number_input("Minimum score", min_value=0.0, step=0.01, format="%.4f", key=MIN_SCORE, disabled=agent,
                        help="In the retriever's own terms: the fused (RRF) score for hybrid, the BM25 score for "
                             "BM25 only, the cosine for dense only. Empty: no minimum.")
        if agent:
            st.caption("Top-k, filters and a minimum score apply to an L1 retriever: choose one to set them.")


def chosen_options() -> TrialOptions:
    """The options the controls show (`InvalidInputError` for a combination kb_core refuses)."""
    state = st.session_state
    retriever = Retriever(state.get(RETRIEVER, _DEFAULTS.retriever.value))
    if retriever is Retriever.AGENT:
        return TrialOptions()
    return TrialOptions(retriever=retriever, top_k=int(state.get(TOP_K, _DEFAULTS.top_k)),
                        categories=tuple(state.get(CATEGORIES) or ()), languages=tuple(state.get(LANGUAGES) or ()),
                        min_score=state.get(MIN_SCORE))


def trial_tab_label(run: TrialRun) -> str:
    """A tab label is Markdown: the settings (category names) are escaped."""
    return escape_markdown(f"Test bench · {run.options.describe()} · {len(run.rows)} "
                           f"row{'s' if len(run.rows) != 1 else ''}")


def render_rows(run: TrialRun) -> None:
    """The test bench's L1 rows: each with its source, heading, language, its score in the retriever's terms, the
    fused score and each retriever's own score, and the chunk with the query's terms highlighted."""
    st.caption(escape_markdown(run.note))
    if run.l1_error:
        st.error(escape_markdown(f"The test bench's L1 search failed: {run.l1_error}"))
    for row in run.rows:
        with st.container(border=True, key=f"bench-row-{row.rank}"):
            found_by = " + ".join(row.retrievers) or "L1"
            own = " · ".join(f"{name} {score:g}" for name, score in row.retriever_scores)
            heading = f" · {escape_markdown(row.heading)}" if row.heading else ""
            st.markdown(f"**{row.rank}.** {inline_code(row.source)}{heading} :gray-badge[{escape_markdown(row.lang)}]"
                        f"  \n{escape_markdown(run.score_name)} **{row.score:.4g}** · fused {row.fused_score:.4g} · "
                        f"found by {escape_markdown(found_by)}" + (f" ({escape_markdown(own)})" if own else ""))
            body = highlight_text(row.content, row.highlights)
            if len(row.content) > TALL_CHUNK:
                with st.container(height=260):
                    st.markdown(body)
            else:
                st.markdown(body)


def render_history(entries: list[HistoryEntry], run_again: Callable[[HistoryEntry], None]) -> None:
    """The acting user's runs, newest first, each with "Run again" (its query, section and options)."""
    with st.expander(f"History: your last {len(entries)} run{'s' if len(entries) != 1 else ''}", expanded=True):
        for i, entry in enumerate(entries):
            cols = st.columns([5, 5, 2], vertical_alignment="center")
            section = f" · section {inline_code(entry.section_title)}" if entry.section_title else ""
            cols[0].markdown(f"{inline_code(entry.query)}{section}")  # a link's query is anyone's text
            outcome = "error" if entry.answer == "error" else \
                f"{'found' if entry.found else 'not found'}" + (f" · {entry.answer}" if entry.answer else "")
            cols[1].caption(f"{escape_markdown(entry.options.describe())}  \n{escape_markdown(outcome)} · "
                            f"{entry.latency_ms:.1f} ms · {entry.created_at:%Y-%m-%d %H:%M} UTC")
            cols[2].button("Run again", key=f"again-{i}", on_click=run_again, args=(entry,))
