"""Sidebar status shown on every page: what each store holds and how L1 runs."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, Role
from pages.shell.jobs_panel import REFRESH_SECONDS, started_here
from pages.shell.safe import escape_markdown, inline_code
from pages.shell.views import flash, show_flash

_MODEL_BADGE = {"ready": "🟢 ready", "loading": "🟡 loading…", "unavailable": "🔴 unavailable"}


def render_status(kb: KnowledgeBase) -> None:
    """The status, redrawn on its own every `REFRESH_SECONDS` while a job runs, so the counts and the jobs' lines
    follow the jobs instead of waiting for the next click. (Not while idle: on a fresh server's deep link the page
    runs inside the legacy page's run, and a timed redraw there drew a second status.)"""
    try:
        active = [j for j in kb.jobs.list(20) if j.active]
    except KnowledgeBaseError:
        active = []
    with st.sidebar:
        st.fragment(run_every=REFRESH_SECONDS if active else None)(_status)(kb)


def _status(kb: KnowledgeBase) -> None:
    try:
        status = kb.status()
        # while a job writes documents the stores differ by the one it is writing: said as such, not as a problem
        writing = [j for j in kb.jobs.list(20) if j.active and j.writes_documents]
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    counts = status.counts
    st.subheader("Status")
    show_flash("sidebar")
    c1, c2, c3 = st.columns(3)
    c1.metric("L0", counts.l0, help="Documents with frontmatter in the in-memory keyword index")
    c2.metric("Database", "—" if counts.database is None else counts.database)
    c3.metric("Milvus", "—" if counts.milvus is None else counts.milvus)
    if status.database_error:
        st.error(escape_markdown(f"Database: {status.database_error}"))
    if status.milvus_error:
        st.error(escape_markdown(f"Milvus: {status.milvus_error}"))
    if status.folder_problem:
        st.warning(escape_markdown(status.folder_problem))
    try:
        unindexed = len(kb.documents.unindexed_files()) if counts.database is not None else 0
    except KnowledgeBaseError:
        unindexed = 0
    explained = unindexed > 0 and counts.files - counts.database == unindexed
    if writing:
        job = writing[0]
        st.info(f"{job.label} job {job.id} is {job.state.value}: the stores agree again once it ends"
                + (f" ({job.done} of {job.total} done)." if job.total else "."))
    else:
        for problem in counts.problems[1 if explained else 0:]:  # the first one is the plain line below
            st.warning(escape_markdown(problem))
    if unindexed > 0 and not writing:
        # The common first-run case: the sample (or a git checkout) is on disk but not indexed for L1 yet.
        st.info(f"{unindexed} document{'s' if unindexed != 1 else ''} in the folder "
                f"{'are' if unindexed != 1 else 'is'} not indexed yet.")
        if kb.actor.may(Role.ADMIN):
            _reconcile_now(kb)
    st.caption(f"**Files** {counts.files} under `{status.base_path}`"
               + (f" ({counts.refused} other .md files refused by the path rule: Reconcile lists why)"
                  if counts.refused else ""))
    st.caption(f"**Database** `{status.database_url}`")
    st.caption(f"**Milvus** `{status.milvus_uri}` · collection `{status.milvus_collection}`")
    badge = _MODEL_BADGE.get(status.model.state, status.model.state)
    st.caption(f"**Model** `{status.model.model_id}` {badge}", help=status.model.detail)
    st.caption(f"**Search** {status.l1_mode}")
    if status.watching is not None:
        st.caption("**Folder** " + ("watched by this process: changed files are synced" if status.watching
                                    else "watched by another process (changes arrive through the database)"))
    for file_path, problem in status.watch_failed:
        st.warning(f"Changed on disk but not indexed: {inline_code(file_path)}: {escape_markdown(problem)}")


def _reconcile_now(kb: KnowledgeBase) -> None:
    """Start a reconcile job (it runs on the server), unless one is queued or running already."""
    try:
        active = [j for j in kb.jobs.list(5, ("reconcile",)) if j.active]
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        return
    if active:
        st.caption(f"Reconcile job {active[0].id} is {active[0].state.value}: *Documents → Maintenance* shows its "
                   "progress.")
    elif st.button("Reconcile now", key="sidebar-sync", help="Index the .md files found on disk (a job on the "
                                                             "server: it goes on if you close this tab)"):
        try:
            job = kb.jobs.start("reconcile")
        except KnowledgeBaseError as exc:
            st.error(escape_markdown(exc))
        else:
            started_here(job)  # on Documents → Maintenance, its end reruns the page
            flash("sidebar", "info", f"Reconcile started as job {job.id}: *Documents → Maintenance* shows its "
                                     "progress.")
            # the whole page again: this fragment was set up while no job ran, so it would not follow this one
            st.rerun()
