"""Evaluation: labelled query sets (a JSONL upload, or answers marked right or wrong in the playground and on Tool
calls), runs scored as `kb evaluate` scores them (each an `evaluate` job), every metric across runs, and two runs
side by side with the queries whose answer changed. Viewers look; curators import, label and start runs (kb_core
checks the role on every write)."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBaseError, Role
from kb_core.console import HEADLINE
from pages.shell.jobs_panel import render_jobs_panel, started_here
from pages.shell.safe import escape_markdown
from pages.shell.views import playground_link, save_and_flash, show_flash
from pages.shell.wiring import end_page, knowledge_base

kb = knowledge_base()
st.title("📏 Evaluation")
st.caption("Answer quality on labelled queries, measured exactly as `kb evaluate` measures it (see docs/quality.md):"
           " per kind, **answered** (an expected document is the primary or the supplement), **right first**, "
           "**named**, **right primary**, **high but wrong**, **not found** for queries without an answer.")
state = st.session_state
may_write = kb.actor.may(Role.CURATOR)


def _import(name: str, upload) -> None:
    save_and_flash("eval-import", lambda: kb.evaluation.import_set(name,
                                                                   upload.getvalue() if upload is not None else b""),
                   lambda count: f"{count} labelled queries stored in the set “{name.strip()}”.")


def _start(set_name: str) -> None:
    job = save_and_flash("eval-start", lambda: kb.evaluation.start(set_name),
                         lambda job: f"Evaluation run of “{set_name}” started (job {job.id}): it runs on the server; "
                                     "closing this tab does not stop it.", kind="info")
    if job is not None:
        started_here(job)  # the user waits for this run: its end redraws the page (the run, its answers)


try:
    sets = kb.evaluation.sets()
    runs = kb.evaluation.runs(200)
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()

# -- labelled query sets -------------------------------------------------------------------------------------------
st.subheader("Labelled query sets")
if sets:
    st.dataframe([{"set": s.name, "queries": s.queries, "last changed (UTC)": s.updated_at.strftime("%Y-%m-%d %H:%M")}
                  for s in sets], hide_index=True, key="eval-sets")
else:
    st.info("No labelled query set yet: import a JSONL file, or mark answers right or wrong in the playground.")
if may_write:
    with st.expander("Import a JSONL file", expanded=not sets):
        st.caption('One query a line, as `kb evaluate` reads them: `{"query": "...", "kind": "title", "expected": '
                   '["category/file.md"]}` (an empty `expected`: the knowledge base has no answer). A query already in '
                   "the set gets the file's label; a file with a bad line is refused whole, naming the lines.")
        name = st.text_input("Set", value=sets[0].name if sets else "", key="eval-import-name")
        upload = st.file_uploader("Labelled queries (.jsonl)", type=["jsonl", "json", "txt"], key="eval-import-file")
        st.button("Import", key="eval-import", on_click=_import, args=(name, upload),
                  disabled=upload is None or not name.strip())
    show_flash("eval-import")
else:
    st.caption("Importing, labelling and starting runs need the curator role.")

# -- runs ----------------------------------------------------------------------------------------------------------
st.subheader("Runs")
if may_write and sets:
    col_set, col_button = st.columns([3, 1], vertical_alignment="bottom")
    chosen = col_set.selectbox("Query set", [s.name for s in sets], key="eval-run-set")
    col_button.button("Start a run", key="eval-start", type="primary", on_click=_start, args=(chosen,))
    show_flash("eval-start")
render_jobs_panel(kb, ["evaluate"], key="evaluate", recent=3, refresh_own=True)
if not runs:
    st.info("No evaluation run yet.")
    end_page()


def _answer(outcome) -> str:
    if not outcome.found:
        return "not found"
    served = outcome.primary or "—"
    return f"{served} ({outcome.confidence})" + (f" + {outcome.supplement}" if outcome.supplement else "")


def _headline(run) -> dict:
    overall = run.metrics.get("overall", {})
    return {label: overall.get(key) for key, label in HEADLINE}


st.dataframe([{"run": r.id, "when (UTC)": r.created_at.strftime("%Y-%m-%d %H:%M"), "set": r.set_name,
               "queries": r.queries, "L0 rule": r.settings.get("l0_matching"), "L1": r.settings.get("l1_mode"),
               "model": r.settings.get("model"), "by": r.actor, **_headline(r)} for r in runs],
             hide_index=True, key="eval-runs")

# each metric across the runs of one set (runs of different sets measure different things)
set_names = list(dict.fromkeys(r.set_name for r in runs))
chart_set = st.selectbox("Metrics across the runs of", set_names, key="eval-chart-set")
percent = [label for key, label in HEADLINE if key.endswith("_pct")]
picked = st.multiselect("Metrics", percent, default=percent[:4], key="eval-chart-metrics")
series = [r for r in reversed(runs) if r.set_name == chart_set]
if picked:
    import altair as alt

    # runs are categories on the x axis (run 7, not 7.000000), and every run is a point: one run draws one
    points = [{"run": f"run {r.id}", "metric": label, "%": _headline(r)[label]} for r in series for label in picked]
    chart = alt.Chart(alt.Data(values=points)).mark_line(point=True).encode(
        x=alt.X("run:O", sort=[f"run {r.id}" for r in series], title=None),
        y=alt.Y("%:Q", scale=alt.Scale(domain=[0, 100])), color=alt.Color("metric:N", title=None),
        tooltip=["run:O", "metric:N", "%:Q"])
    st.altair_chart(chart, width="stretch")

# -- one run's answers -----------------------------------------------------------------------------------------------
st.subheader("A run's answers")
run_labels = {r.id: f"run {r.id} · {r.set_name} · {r.created_at:%Y-%m-%d %H:%M}" for r in runs}
shown = st.selectbox("Run", list(run_labels), format_func=run_labels.get, key="eval-outcomes-run")
try:
    outcomes = kb.evaluation.outcomes(shown)
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()
wrong = sum(row.wrong for row in outcomes)
st.caption(f"{wrong} of {len(outcomes)} answers are not right, listed first; *try* opens the query in the "
           "playground with the why panel.")
only_wrong = st.toggle("Only the answers that are not right", value=bool(wrong), key="eval-outcomes-wrong")
st.dataframe([{"verdict": row.verdict, "query": o.query, "kind": o.kind,
               "expected": ", ".join(o.expected) or "(no answer)", "answer": _answer(o),
               "try": playground_link(o.query)}
              for row in outcomes if row.wrong or not only_wrong for o in (row.outcome,)],
             hide_index=True, key="eval-outcomes",
             column_config={"try": st.column_config.LinkColumn("try", display_text="open in the playground")})

# -- two runs side by side -----------------------------------------------------------------------------------------
st.subheader("Compare two runs")
if len(runs) < 2:
    st.caption("A second run makes a comparison.")
    end_page()
labels = {r.id: f"run {r.id} · {r.set_name} · {r.created_at:%Y-%m-%d %H:%M}" for r in runs}
col_a, col_b = st.columns(2)
before = col_a.selectbox("Before", list(labels), index=1, format_func=labels.get, key="eval-before")
after = col_b.selectbox("After", list(labels), index=0, format_func=labels.get, key="eval-after")
try:
    comparison = kb.evaluation.compare(before, after)
except KnowledgeBaseError as exc:
    st.error(escape_markdown(exc))
    end_page()
settings_rows = [{"setting": name, f"run {before}": comparison.before.settings.get(key),
                  f"run {after}": comparison.after.settings.get(key)}
                 for key, name in (("l0_matching", "L0 rule"), ("l1_mode", "L1"), ("model", "model"))]
st.dataframe(settings_rows, hide_index=True, key="eval-compare-settings")
st.dataframe(comparison.metric_rows(), hide_index=True, key="eval-compare-metrics")


st.markdown(f"**{len(comparison.changed)} quer{'y' if len(comparison.changed) == 1 else 'ies'} answered "
            f"differently** (found, primary, confidence or supplement)")
if comparison.changed:
    st.dataframe([{"query": c.query, "kind": c.kind, "expected": ", ".join(c.expected) or "(no answer)",
                   f"run {before}": _answer(c.before), f"run {after}": _answer(c.after), "verdict": c.verdict}
                  for c in comparison.changed], hide_index=True, key="eval-changed")
for side, queries in ((before, comparison.only_before), (after, comparison.only_after)):
    if queries:
        with st.expander(f"{len(queries)} quer{'y' if len(queries) == 1 else 'ies'} only run {side} asked"):
            st.dataframe([{"query": q} for q in queries], hide_index=True, key=f"eval-only-{side}")
