"""Tool-call history as a to-do list: how lookups went over time, which queries need a curator (each with its fix:
the document L1 finds for it, and the query added as a keyword of a chosen document), every call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import altair as alt
import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, Role
from kb_core.console import confidence_of, percentile
from pages.shell.label_view import render_label_control
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.views import playground_link, render_preview, save_and_flash, show_flash, table_key
from pages.shell.wiring import end_page, knowledge_base

PLAYGROUND = Path(__file__).resolve().parent / "playground.py"
DOCUMENTS = Path(__file__).resolve().parent / "documents.py"
PERIODS = {"24 hours": timedelta(hours=24), "7 days": timedelta(days=7), "30 days": timedelta(days=30),
           "90 days": timedelta(days=90)}


def _utc_iso(moment: datetime) -> str:
    """ISO 8601 with an explicit Z: stored times are naive UTC, and Vega reads a bare ISO time as local."""
    return moment.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _save_keyword(kb: KnowledgeBase, edit, query: str) -> None:
    save_and_flash("attention-fix", lambda: kb.documents.save_edit(edit),
                   lambda outcome: f"“{', '.join(edit.added)}” is now a keyword of {edit.file_path} (the document "
                                   f"{outcome.action}): a lookup of “{query}” finds it in L0.")


def _render_fix(kb: KnowledgeBase, group) -> None:
    """The fix for one query: the document L1 finds for it, and the query as a keyword of a chosen document."""
    query = group.query
    with st.container(border=True):
        show_flash("attention-fix")
        try:
            found = kb.documents.suggest(query)
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
            found = []
        if found:
            best = found[0]
            link = kb.documents.relative_path(best.file_path) or best.file_path
            st.markdown(f"**L1 finds:** {escape_markdown(best.title)} · {inline_code(best.file_path)}"
                        + (f" · {escape_markdown(best.heading)}" if best.heading else "")
                        + f" · score {best.score:.4f}  \n"
                        + f"[inspect ↗](./documents?doc={quote(link)}) · "
                        + f"[open in playground ↗]({playground_link(query)})")
            st.caption(escape_markdown(best.excerpt))
            if st.button("Open in the inspector", key="fix-inspect"):
                st.switch_page(DOCUMENTS, query_params={"doc": link})
        else:
            st.info("L1 finds no document for this query: the knowledge base may lack one (write it, or upload it), "
                    "or add the query as a keyword of the document that answers it.")
        if not kb.actor.may(Role.CURATOR):
            st.caption(f"Adding the query as a keyword needs the curator role; you are signed in as a "
                       f"{kb.actor.role.label}.")
            return
        candidates = list(dict.fromkeys([s.file_path for s in found] + list(group.sources)))
        c1, c2 = st.columns(2)
        keyword = c1.text_input("Add as a keyword", value=query.strip(), key=table_key("fix-keyword", [query]))
        other = c2.text_input("of another document (its path)", key=table_key("fix-other", [query]),
                              placeholder="api/payment-errors.md")
        target = kb.documents.path(other) if other.strip() else None
        if other.strip() and target is None:
            st.error(f"{inline_code(other)} is no path under the knowledge base.")
            return
        if target is None and candidates:
            target = st.selectbox("of the document", candidates, key=table_key("fix-target", [query, *candidates]),
                                  help="L1's documents for the query first, then those its answers offered")
        if target is None or not keyword.strip():
            return
        try:
            edit = kb.keywords.prepare_addition(target, keyword)
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
            return
        if not edit.changed:
            st.info(f"{inline_code(keyword.strip())} is a keyword of {inline_code(target)} already.")
            return
        st.code(edit.diff, language="diff", wrap_lines=True)
        render_preview(edit.file_name, edit.preview, expanded=False)
        st.button("Add the keyword and re-index", type="primary", key="fix-save", disabled=not edit.preview.can_upload,
                  on_click=_save_keyword, args=(kb, edit, query))


kb = knowledge_base()
st.title("🧾 Tool calls")
st.caption("Every `lookup_knowledge` and `read_document` call, from agents (python, MCP) and from this console's "
           "playground. The found rate and the to-do list count lookups only: a read serves the document asked for.")

period = st.radio("Period", list(PERIODS), index=1, key="period", horizontal=True)
span = PERIODS[period]
try:
    buckets = kb.calls.buckets(span)
    groups = kb.calls.needing_attention(span)
    not_logged = kb.calls.not_logged(span)
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()
if not_logged:  # counted by the call log's writer instead of being dropped silently
    st.warning(f"{not_logged:,} tool calls of the last {period} are not in the log (the log's queue was full, or "
               "the database refused them): the counts on this page are short by that many.")

# -- over time ---------------------------------------------------------------------------------------------
if buckets:
    unit = "hour" if span <= timedelta(days=2) else "day"
    rows = [{"time": _utc_iso(b.start), "calls": b.calls, "found rate": b.found_rate, "p95 (ms)": b.p95_ms}
            for b in buckets]
    now = datetime.now(UTC)
    # The axis spans the whole period, so a day with calls is a day wide and quiet days show as gaps (with one
    # bucket the chart would otherwise stretch it over the full width); utc* time units keep the axis in UTC
    # whatever the browser's time zone.
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("time:T", title=f"per {unit} (UTC)",
                timeUnit="utcyearmonthdatehours" if unit == "hour" else "utcyearmonthdate",
                scale=alt.Scale(domain=[_utc_iso(now - span), _utc_iso(now)])))
    c1, c2, c3 = st.columns(3)
    c1.altair_chart(base.mark_bar().encode(y=alt.Y("calls:Q", title="calls")).properties(title="Calls"))
    c2.altair_chart(base.mark_line(point=True).encode(
        y=alt.Y("found rate:Q", title="found", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])))
        .properties(title="Found rate"))
    c3.altair_chart(base.mark_line(point=True).encode(y=alt.Y("p95 (ms):Q", title="ms"))
                    .properties(title="p95 latency"))
else:
    st.info(f"No calls in the last {period}.")

# -- the to-do list ----------------------------------------------------------------------------------------
st.subheader("Needs attention")
st.caption("Queries that found nothing, found only an L1 passage, or got a low-confidence answer (a keyword "
           "several documents claim), grouped by query. Adding or sharpening a keyword on the right document "
           "turns them into exact, high-confidence answers. Opening one in the playground runs it as "
           "`console-replay`, which is not counted here again.")
if groups:
    st.dataframe(
        [{"query": g.query, "calls": g.calls, "not found": g.not_found, "L1 only": g.l1_only,
          "low confidence": g.low_confidence, "last seen (UTC)": g.last_seen.strftime("%Y-%m-%d %H:%M"),
          "answered with": ", ".join(g.sources), "open": playground_link(g.query)} for g in groups],
        hide_index=True,
        column_config={"open": st.column_config.LinkColumn("playground", display_text="open ↗",
                                                           help="Run this query in the playground (new tab)")},
        key="attention",
    )
    left, right = st.columns([4, 1], vertical_alignment="bottom")
    chosen = left.selectbox("Fix a query, or open it in the playground", [g.query for g in groups], index=None,
                            key="attention_query", placeholder="Choose a query…")
    if right.button("Open in playground", key="open-in-playground", disabled=not chosen) and chosen:
        st.switch_page(PLAYGROUND, query_params={"q": chosen})
    group = next((g for g in groups if g.query == chosen), None)
    if group is not None:
        _render_fix(kb, group)
        render_label_control(kb, group.query, [(path, path) for path in group.sources[:3]], key="attention",
                             kind="tool_call")
    else:
        show_flash("attention-fix")  # a fix saved a moment ago: the query may have left the list
else:
    st.success(f"Nothing needs attention in the last {period}.")

# -- every call --------------------------------------------------------------------------------------------
st.subheader("Recent calls")
limit = st.select_slider("Window (most recent calls)", options=[50, 100, 200, 500, 1000], value=200, key="window")
try:
    calls = kb.calls.recent(limit)
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()

f0, f1, f2, f3, f4, f5 = st.columns([1, 1, 1, 1, 1, 2])
tools = f0.multiselect("Tool", sorted({c.tool_name for c in calls}), key="f_tool")
callers = f1.multiselect("Caller", sorted({c.caller for c in calls}), key="f_caller")
found = f2.selectbox("Found", ["any", "found", "not found"], key="f_found")
kinds = f3.multiselect("Answer", ["exact_L0", "semantic_L1", "read", "error"], key="f_kind")
confidences = f4.multiselect("Confidence", ["high", "low", "none"], key="f_confidence",
                             help="The primary (L0) answer's confidence; none: no L0 answer")
text = f5.text_input("Query (or source read) contains", key="f_text").strip().casefold()


def asked(call) -> str:
    """What the call asked: a lookup's query, a read's source."""
    return str(call.arguments.get("query", call.arguments.get("source", "")))


def shown(call) -> bool:
    if tools and call.tool_name not in tools:
        return False
    if callers and call.caller not in callers:
        return False
    if found != "any" and call.found != (found == "found"):
        return False
    kind = set(call.match_types) or ({"error"} if call.error else set())
    if kinds and not kind & set(kinds):
        return False
    if confidences and confidence_of(call) not in confidences:
        return False
    return not text or text in asked(call).casefold()


visible = [c for c in calls if shown(c)]
latencies = [c.latency_ms for c in visible]
m1, m2, m3, m4 = st.columns(4)
m1.metric("Calls", len(visible))
m2.metric("Found", f"{sum(c.found for c in visible) / len(visible):.0%}" if visible else "—")
m3.metric("p50 latency", f"{percentile(latencies, 50):.1f} ms" if visible else "—")
m4.metric("p95 latency", f"{percentile(latencies, 95):.1f} ms" if visible else "—")

st.dataframe(
    [{"time (UTC)": c.created_at.strftime("%Y-%m-%d %H:%M:%S"), "tool": c.tool_name, "caller": c.caller,
      "query": c.arguments.get("query", c.arguments.get("source", c.arguments)), "found": c.found,
      # section_title asked -> heading path served ("—": none served, the answer's note said why)
      "section": f"{c.arguments['section_title']} → {c.arguments.get('_section') or '—'}"
      if c.arguments.get("section_title") else "",
      "answer": " + ".join(c.match_types) or ("error" if c.error else "—"),
      "confidence": confidence_of(c) if not c.error else "—",
      "source": c.sources[0] if c.sources else "", "latency (ms)": round(c.latency_ms, 1),
      "request": c.request_id or "", "error": c.error or ""} for c in visible],
    hide_index=True,
    key="calls",
    column_config={"request": st.column_config.TextColumn(
        help="The call's request id, as the playground's 'why' panel shows it; with KB_LOG_FILE set, the log "
             "lines of this call carry it as request_id")},
)
