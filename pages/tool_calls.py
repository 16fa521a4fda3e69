"""Tool-call history: what agents (and the playground) asked, and what the knowledge base lacks."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError
from kb_core.agent.call_stats import is_miss, misses_by_query, percentile
from pages.shell.wiring import knowledge_base

kb = knowledge_base()
st.title("🧾 Tool calls")
st.caption("Every `lookup_knowledge` call, from agents (python, MCP) and from this console's playground.")

limit = st.select_slider("Window (most recent calls)", options=[50, 100, 200, 500, 1000], value=200, key="window")
try:
    calls = kb.tool_calls(limit)
except KnowledgeBaseError as exc:
    st.error(str(exc))
    st.stop()

f1, f2, f3, f4 = st.columns([1, 1, 1, 2])
callers = f1.multiselect("Caller", sorted({c.caller for c in calls}), key="f_caller")
found = f2.selectbox("Found", ["any", "found", "not found"], key="f_found")
kinds = f3.multiselect("Answer", ["exact_L0", "semantic_L1", "error"], key="f_kind")
text = f4.text_input("Query contains", key="f_text").strip().casefold()


def shown(call) -> bool:
    if callers and call.caller not in callers:
        return False
    if found != "any" and call.found != (found == "found"):
        return False
    kind = set(call.match_types) or ({"error"} if call.error else set())
    if kinds and not kind & set(kinds):
        return False
    return not text or text in str(call.arguments.get("query", "")).casefold()


visible = [c for c in calls if shown(c)]
latencies = [c.latency_ms for c in visible]
m1, m2, m3, m4 = st.columns(4)
m1.metric("Calls", len(visible))
m2.metric("Found", f"{sum(c.found for c in visible) / len(visible):.0%}" if visible else "—")
m3.metric("p50 latency", f"{percentile(latencies, 50):.1f} ms" if visible else "—")
m4.metric("p95 latency", f"{percentile(latencies, 95):.1f} ms" if visible else "—")

st.dataframe(
    [{"time (UTC)": c.created_at.strftime("%Y-%m-%d %H:%M:%S"), "caller": c.caller,
      "query": c.arguments.get("query", c.arguments), "found": c.found,
      # section_title asked -> heading path served ("—": none served, the answer's note said why)
      "section": f"{c.arguments['section_title']} → {c.arguments.get('_section') or '—'}"
      if c.arguments.get("section_title") else "",
      "answer": " + ".join(c.match_types) or ("error" if c.error else "—"),
      "source": c.sources[0] if c.sources else "", "latency (ms)": round(c.latency_ms, 1),
      "request": c.request_id or "", "error": c.error or ""} for c in visible],
    hide_index=True,
)

st.subheader("What the knowledge base lacks")
st.caption("Queries that found nothing, or only an L1 passage. Adding a keyword to the right document turns "
           "such a query into an exact, high-confidence answer.")
groups = misses_by_query([c for c in visible if is_miss(c)])
if groups:
    st.dataframe(
        [{"query": g.query, "calls": g.calls, "not found": g.not_found, "L1 only": g.l1_only,
          "L1 offered": ", ".join(g.sources), "last seen (UTC)": g.last_seen.strftime("%Y-%m-%d %H:%M")}
         for g in groups],
        hide_index=True,
    )
else:
    st.success("No misses in this window.")
