"""The jobs panel the Documents, Upload and playground pages share: running and queued jobs with their progress,
an ETA from the rate so far and a cancel button; how the latest one ended; the recent ones. While a job is
active the panel reruns on its own every second (`st.fragment(run_every=…)`): a rerun of the panel alone, which
leaves the rest of the page as it is. Jobs run on the server: a new tab, another session or another process's
console shows the same rows.

When a job ends, what it changed (lists, counts, results) lies outside the panel. The panel does not rerun the
whole page by itself at that moment: a curator may be typing in a text area of the same page (a keyword edit, a
new file name, a query), and a page rerun at a moment of the job's choosing could lose the text or interrupt its
preview. The panel says the job ended and offers **Show the changes**, a button that reruns the page when the
user wants it. (The timer's run is the panel's own rerun already, drawn from the jobs read anew: no
`st.rerun(scope="fragment")` is needed, and Streamlit refuses one during a whole-page run.)

Where a call site states that its view holds nothing to type into (`nothing_to_type=True`: Documents →
Maintenance, the Trash tab) any job the panel shows reruns the page by itself when it ends — this tab's, another
tab's or another process's: there is no text to lose, and a page that still says "not indexed yet" after the job
that indexed it is wrong. Where a call site says only that the user waits for the job they started
(`refresh_own=True`: the playground's *Index now*), a job *this session* started (noted with `started_here`)
reruns the page when it ends; jobs of others leave such a page as it is."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from kb_core import JobRecord, JobState, KnowledgeBase, KnowledgeBaseError
from kb_core.console import describe_seconds
from pages.shell.safe import escape_markdown
from pages.shell.views import save_and_flash, show_flash

REFRESH_SECONDS = 1.0
STARTED_HERE = "_jobs-started-here"  # the ids of the jobs this session started (started_here)
SHOW_CHANGES = "Show the changes"
_ICONS = {JobState.QUEUED: "⏳", JobState.RUNNING: "⚙️", JobState.SUCCEEDED: "✅", JobState.FAILED: "❌",
          JobState.CANCELLED: "⏹️"}


def started_here(job: JobRecord) -> None:
    """Note that this session started `job` (a button of this tab): a panel with `refresh_own=True` reruns the
    whole page when it ends."""
    st.session_state.setdefault(STARTED_HERE, set()).add(job.id)


def _ended_meanwhile(ended: set[int], shown: Sequence[JobRecord], key: str) -> None:
    """Jobs that ended after the page was drawn: say so, and offer the page rerun that shows what they changed."""
    by_id = {j.id: j for j in shown}
    names = [f"**{escape_markdown(by_id[i].label)}** · job {i} · {by_id[i].state.value}" if i in by_id else f"job {i}"
             for i in sorted(ended)]
    with st.container(border=True, horizontal=True, vertical_alignment="center"):
        st.markdown(f"🔔 {'; '.join(names)} — ended after this page was drawn: the lists and counts outside this "
                    "panel show the changes once the page is redrawn (finish or save an edit first).")
        if st.button(SHOW_CHANGES, key=f"jobs-show-changes-{key}", icon=":material/refresh:", type="primary"):
            st.rerun()  # a click in a fragment reruns the fragment only: this reruns the whole page


def _cancel(kb: KnowledgeBase, job_id: int, key: str) -> None:
    save_and_flash(f"jobs-{key}", lambda: kb.jobs.cancel(job_id),
                   lambda job: f"job {job.id}: cancelled before it started" if job.state == JobState.CANCELLED
                   else f"job {job.id}: cancel requested; it stops after the document it is working on", kind="info")


def _active(kb: KnowledgeBase, job: JobRecord, key: str) -> None:
    with st.container(border=True):
        st.markdown(f"{_ICONS[job.state]} **{escape_markdown(job.label)}** · job {job.id} · {job.state.value} · "
                    f"started by {escape_markdown(job.actor)}")
        if job.state == JobState.RUNNING:
            fraction = job.fraction
            counted = f"{job.done:,} of {job.total:,}" if job.total else "counting…"
            st.progress(fraction or 0.0, text=escape_markdown(f"{counted} · {job.stage}" if job.stage else counted))
            eta = job.eta_seconds()
            st.caption(f"running for {describe_seconds(job.elapsed())}"
                       + (f" · about {describe_seconds(eta)} left" if eta is not None else "")
                       + (f" · {job.error_count} error(s) so far" if job.error_count else ""))
        else:
            st.caption("waiting for its turn: one heavy job runs at a time on this knowledge base")
        if job.cancel_requested:
            st.caption("cancel requested: it stops after the document it is working on")
        elif kb.jobs.may_cancel(job):
            st.button("Cancel", key=f"cancel-job-{job.id}", on_click=_cancel, args=(kb, job.id, key))


def _ended(job: JobRecord, details: Callable[[JobRecord], None] | None, kb: KnowledgeBase) -> None:
    when = job.ended_at.strftime("%Y-%m-%d %H:%M UTC") if job.ended_at else ""
    text = escape_markdown(f"{job.label} (job {job.id}, {job.state.value} {when}, took "
                           f"{describe_seconds(job.elapsed())}, by {job.actor}): {job.summary or ''}")
    if job.state == JobState.FAILED:
        st.error(text)
    elif job.state == JobState.CANCELLED:
        st.info(text)
    elif job.error_count:
        st.warning(text + escape_markdown(f" — {job.error_count} error(s)"))
    else:
        st.success(text)
    if details is not None:
        full = kb.jobs.get(job.id)  # the result (per-file rows, lists) comes with the full row only
        if full is not None:
            details(full)
    elif job.errors:
        with st.expander(f"{job.error_count} error(s)"):
            for error in job.errors:
                st.text(error)
            if job.error_count > len(job.errors):
                st.caption(f"… and {job.error_count - len(job.errors)} more (the job keeps the first "
                           f"{len(job.errors)})")


def render_jobs_panel(kb: KnowledgeBase, kinds: Sequence[str], *, key: str, recent: int = 5,
                      details: Callable[[JobRecord], None] | None = None,
                      refresh_own: bool = False, nothing_to_type: bool = False) -> list[JobRecord]:
    """The jobs of `kinds`; `details` renders the latest ended job's result (the page's own view of it); with
    `recent=0` only the active jobs. `nothing_to_type=True` states that the page around this call shows nothing
    to type into: any job of the panel reruns the whole page once it ends. `refresh_own=True`: a job this session
    started (`started_here`) does. Any other ending job leaves the page as it is and the panel offers "Show the
    changes". Returns the jobs as this run read them."""
    try:
        jobs = kb.jobs.list(max(recent, 1) + 10, kinds)
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(f"The jobs could not be read: {exc}"))
        return []
    state = st.session_state
    state[f"_jobs-full-{key}"] = True  # this call is part of a whole-page run

    @st.fragment(run_every=REFRESH_SECONDS if any(j.active for j in jobs) else None)
    def panel() -> None:
        whole_page = state.pop(f"_jobs-full-{key}", False)
        shown = jobs
        if not whole_page:  # a rerun of the panel alone: read the jobs anew
            try:
                shown = kb.jobs.list(max(recent, 1) + 10, kinds)
            except KnowledgeBaseError as exc:
                st.error(escape_markdown(f"The jobs could not be read: {exc}"))
                return
        active = [j for j in shown if j.active]
        seen, now = state.get(f"_jobs-active-{key}", set()), {j.id for j in active}
        state[f"_jobs-active-{key}"] = now
        if whole_page:  # the page was drawn with every job's outcome so far
            state.pop(f"_jobs-ended-{key}", None)
        elif seen - now:  # a job ended during a rerun of the panel alone
            if nothing_to_type or (refresh_own and (seen - now) & state.get(STARTED_HERE, set())):
                st.rerun()  # show what it changed: nothing typed can be lost, or the user waits for this job
            state[f"_jobs-ended-{key}"] = state.get(f"_jobs-ended-{key}", set()) | (seen - now)
        show_flash(f"jobs-{key}")
        if ended_meanwhile := state.get(f"_jobs-ended-{key}"):
            _ended_meanwhile(ended_meanwhile, shown, key)
        for job in sorted(active, key=lambda j: (j.state != JobState.RUNNING, j.id)):
            _active(kb, job, key)
        ended = [j for j in shown if not j.active]
        if ended and recent > 0:
            _ended(ended[0], details, kb)
        if recent > 0 and (len(shown) > 1 or (shown and active)):
            st.caption("Recent jobs")
            st.dataframe([{"job": j.id, "what": j.label, "state": j.state.value, "by": j.actor,
                           "started (UTC)": j.started_at.strftime("%Y-%m-%d %H:%M:%S") if j.started_at else "",
                           "took": describe_seconds(j.elapsed()) if j.started_at else "",
                           "progress": f"{j.done}/{j.total}" if j.total else "", "how it ended": j.summary or ""}
                          for j in shown[:recent]], hide_index=True, key=f"jobs-table-{key}")

    panel()
    return jobs
