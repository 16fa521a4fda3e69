"""The jobs panel under AppTest on real stores: Re-index all and Reconcile start jobs and return
at once; the panel shows running and queued jobs of any session or process with progress, an ETA and a cancel
button, how the latest one ended and the recent ones; the upload page hands its batch to a job. A job that ends
while the panel refreshes itself leaves the rest of the page alone (someone may be typing there): the panel offers
"Show the changes"; the Maintenance tab, which has nothing to type into, reruns for any job that ends.

Rows another process would write are made here through the job store with this process's identity (so no
sweep takes them for a dead process's), which lets a test put a job exactly where it wants it. AppTest runs no
timers: `run_panel` does what the panel's timer does in a browser, a rerun of the page's fragments alone; holding
the heavy-job lock keeps a job this session starts queued until the test lets it run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from unittest import mock

import pytest
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.local_script_runner import LocalScriptRunner
from support.console import finish_jobs, run_page, wait_for_jobs
from support.documents import doc

from kb_core.access import Actor, Role
from kb_core.jobs.model import JobState
from kb_core.jobs.process import ProcessIdentity
from kb_core.jobs.store import JobStore
from kb_core.storage.metadata_store import MetadataStore
from pages.shell.jobs_panel import SHOW_CHANGES

ELSEWHERE = Actor("ada@example.com", Role.ADMIN)  # the starter of jobs made "by another session"


@pytest.fixture
def metadata(synced_sample):
    """The console's database, as another process opens it."""
    store = MetadataStore(f"sqlite:///{synced_sample / 'kb.sqlite3'}")
    yield store
    store.dispose()


@pytest.fixture
def jobs(metadata):
    """The job table of the console's knowledge base, as another process sees it."""
    return JobStore(metadata)


@pytest.fixture
def heavy_lock(metadata):
    """The lock a job needs to run, held here: a job the console starts stays queued until `release()`."""
    lock = metadata.lock("kbjob", "heavy")
    assert lock.acquire(0)
    yield lock
    with contextlib.suppress(Exception):  # released by the test already
        lock.release()


def run_panel(at: AppTest) -> AppTest:
    """What the panel's timer (`st.fragment(run_every=…)`) does in a browser: rerun the page's fragments alone.
    The tree then holds what that run drew: the panel only, or the whole page if the panel reran it."""
    # AppTest has no public call for this (Streamlit 1.67): its fragment storage and the runner's request queue
    # are private, so a Streamlit upgrade may need this helper looked at again
    fragments = list(at._fragment_storage._fragments)  # the ones the last whole-page run registered
    assert fragments, "no fragment on the page"
    request = LocalScriptRunner.request_rerun

    def fragment_rerun(runner, data):
        runner._requests = ScriptRequests()  # not the whole-page run the runner queues when it is made
        return request(runner, dataclasses.replace(data, fragment_id_queue=fragments, is_auto_rerun=True))

    with mock.patch.object(LocalScriptRunner, "request_rerun", fragment_rerun):
        at.run()
    assert not at.exception, at.exception
    return at


def whole_page(at: AppTest) -> bool:
    """Whether the last run drew the page (its title), not the jobs panel alone."""
    return any(t.value.endswith(("Documents", "Upload documents")) for t in at.title)


def maintenance(session: dict | None = None) -> AppTest:
    at = run_page("documents", documents_tab="Maintenance", **(session or {}))
    assert not at.exception, at.exception
    return at


def recent_jobs(at: AppTest):
    """The panel's list of recent jobs (a DataFrame)."""
    return next(f.value for f in at.dataframe if "how it ended" in f.value.columns)


def texts(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                     + [e.value for kind in (at.success, at.info, at.warning, at.error) for e in kind])


def test_re_index_all_starts_a_job_and_the_panel_says_how_it_ended(synced_sample):
    at = maintenance()
    assert "(job " not in texts(at) and not at.get("progress")  # no job yet
    at.button(key="reindex-all").click().run()
    assert not at.exception, at.exception
    started = next(i.value for i in at.info if "started as job" in i.value)
    assert started.startswith("Re-index all started as job 1") and "closing or reloading this tab" in started
    finish_jobs(at, synced_sample)
    [ended] = [s.value for s in at.success if "job 1" in s.value]
    assert "Re-index all (job 1, succeeded" in ended and ended.endswith("by console): 10 re-indexed")
    at.button(key="reconcile").click().run()
    finish_jobs(at, synced_sample)
    assert "Reconcile (job 2, succeeded" in at.success[0].value and "10 unchanged" in at.success[0].value
    recent = recent_jobs(at)
    assert list(recent["job"]) == [2, 1] and list(recent["state"]) == ["succeeded", "succeeded"]
    assert list(recent["what"]) == ["Reconcile", "Re-index all"]


def test_a_running_job_of_another_session_shows_progress_an_eta_and_can_be_cancelled(jobs):
    job = jobs.create("reindex_all", ELSEWHERE, ProcessIdentity.current(), {}, total=400)
    jobs.claim(job.id)
    jobs.progress(job.id, stage="reindexing", done=40, total=400, counts={}, errors=[], error_count=0)
    queued = jobs.create("reconcile", ELSEWHERE, ProcessIdentity.current(), {"delete_missing": False})
    at = maintenance()  # a new session: it knows of no job, the database does
    shown = texts(at)
    assert f"**Re-index all** · job {job.id} · running · started by ada@example.com" in shown
    assert f"**Reconcile** · job {queued.id} · queued" in shown and "waiting for its turn" in shown
    [bar] = at.get("progress")
    assert bar.proto.value == 10 and "40 of 400 · reindexing" in bar.proto.text
    assert any(c.value.startswith("running for ") and " left" in c.value for c in at.caption)
    assert {b.key for b in at.button if b.label == "Cancel"} == {f"cancel-job-{job.id}", f"cancel-job-{queued.id}"}

    at.button(key=f"cancel-job-{job.id}").click().run()  # the local console user is an admin
    assert not at.exception, at.exception
    assert any("cancel requested" in i.value for i in at.info)
    assert jobs.get(job.id).cancel_requested and jobs.get(job.id).state.value == "running"
    assert f"cancel-job-{job.id}" not in {b.key for b in at.button}
    at.button(key=f"cancel-job-{queued.id}").click().run()
    assert jobs.get(queued.id).state.value == "cancelled"

    jobs.finish(job.id, jobs.get(job.id).state.__class__("cancelled"), summary="cancelled after 41 of 400",
                stage="reindexing", done=41, total=400, counts={"reindexed": 41}, errors=(), error_count=0,
                result=None)
    at.run()
    assert not [b for b in at.button if b.label == "Cancel"] and not at.get("progress")
    assert any(f"Reconcile (job {queued.id}, cancelled" in i.value and i.value.endswith("cancelled before it started")
               for i in at.info)  # the latest to end, above the list
    recent = recent_jobs(at).set_index("job")
    assert recent.loc[job.id, "state"] == "cancelled" and recent.loc[job.id, "how it ended"] == \
        "cancelled after 41 of 400" and recent.loc[job.id, "progress"] == "41/400"


def test_a_viewer_sees_jobs_without_cancel_buttons_and_a_curator_cancels_only_their_own(jobs, monkeypatch):
    from support.console import ROLES
    from support.console import maintenance_buttons as _maintenance
    from support.console import signed_in_user as _user
    from support.console import signin_app as _app

    monkeypatch.setenv("KB_ROLES", json.dumps(ROLES))
    admins = jobs.create("reindex_all", ELSEWHERE, ProcessIdentity.current(), {})
    jobs.claim(admins.id)
    upload = jobs.create("upload", ELSEWHERE, ProcessIdentity.current(), {"files": []}, total=3)
    carls = jobs.create("upload", Actor("carl@example.com", Role.CURATOR), ProcessIdentity.current(),
                        {"files": []}, total=2)

    viewer = _app(_user("vera@example.com"))
    viewer.run()
    labels = _maintenance(viewer)
    assert not viewer.exception, viewer.exception
    assert f"**Re-index all** · job {admins.id} · running · started by ada@example.com" in texts(viewer)
    assert "Cancel" not in labels

    curator = _app(_user("carl@example.com"))
    curator.run()
    curator.switch_page("../../pages/upload.py").run()
    assert not curator.exception, curator.exception
    assert f"**Batch upload** · job {upload.id} · queued · started by ada@example.com" in texts(curator)
    assert {b.key for b in curator.button if b.label == "Cancel"} == {f"cancel-job-{carls.id}"}
    curator.button(key=f"cancel-job-{carls.id}").click().run()
    assert jobs.get(carls.id).state.value == "cancelled" and jobs.get(upload.id).state.value == "queued"


def test_the_upload_page_hands_the_batch_to_a_job_and_shows_its_result(app_root):
    at = run_page("upload")
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value([("a.md", doc("A", ["JOB_PAGE_A"]).encode(), "text/markdown"),
                                             ("b.md", doc("B", ["JOB_PAGE_B"]).encode(), "text/markdown")]).run()
    next(b for b in at.button if b.label == "Upload 2 file(s)").click().run()
    assert not at.exception, at.exception
    staged = app_root / ".kb_jobs"
    finish_jobs(at, app_root)
    assert any(h.value == "Result" for h in at.subheader)
    assert list(at.dataframe[0].value["result"]) == ["indexed", "indexed"]
    assert any("Batch upload (job 1, succeeded" in s.value and s.value.endswith("2 file(s): 2 indexed")
               for s in at.success)
    assert not staged.exists() or not any(staged.iterdir())  # the staged bytes went with the job
    assert (app_root / "knowledge_base/api/a.md").exists() and (app_root / "knowledge_base/api/b.md").exists()
    assert os.environ["KB_APP_ROOT"] == str(app_root) and Path(app_root / "kb.sqlite3").exists()


def test_a_job_ending_leaves_a_page_with_fields_alone_until_show_the_changes_is_pressed(jobs):
    """The upload page has fields to type into (a category, file names): another session's job ending there
    does not rerun it; the panel says so and offers the rerun."""
    job = jobs.create("import", ELSEWHERE, ProcessIdentity.current(), {"files": [], "notes": []}, total=10)
    jobs.claim(job.id)
    at = run_page("upload")
    assert not at.exception, at.exception
    assert whole_page(at) and at.get("progress") and SHOW_CHANGES not in {b.label for b in at.button}
    run_panel(at)  # the panel refreshes itself: the job still runs
    assert not whole_page(at) and at.get("progress") and [b.label for b in at.button] == ["Cancel"]

    jobs.finish(job.id, JobState.SUCCEEDED, summary="10 unchanged", stage="", done=10, total=10,
                counts={"unchanged": 10}, errors=(), error_count=0, result=None)
    for _ in range(2):  # the job ends: the panel says so, again on each refresh, and the page stays as it was
        run_panel(at)
        assert not whole_page(at), "the end of a job reran the whole page"
        assert not at.get("progress") and [b.label for b in at.button] == [SHOW_CHANGES]
        assert any(m.value.startswith(f"🔔 **Folder import** · job {job.id} · succeeded — ended after this page "
                                      "was drawn") for m in at.markdown)
        assert any(f"Folder import (job {job.id}, succeeded" in s.value for s in at.success)

    at.button(key="jobs-show-changes-upload").click().run()
    assert not at.exception, at.exception
    assert whole_page(at)
    assert SHOW_CHANGES not in {b.label for b in at.button} and not any("🔔" in m.value for m in at.markdown)
    run_panel(at)  # nothing new has ended since the page was drawn
    assert SHOW_CHANGES not in {b.label for b in at.button}


def test_the_maintenance_tab_shows_the_changes_of_another_sessions_job_at_once(jobs):
    """Maintenance has nothing to type into: a job of another session ending there redraws the page at once
    (the counts and lists it changed), with no button to press."""
    job = jobs.create("reconcile", ELSEWHERE, ProcessIdentity.current(), {"delete_missing": False}, total=10)
    jobs.claim(job.id)
    at = maintenance()
    run_panel(at)  # the panel refreshes itself: the job still runs
    assert not whole_page(at) and at.get("progress")
    jobs.finish(job.id, JobState.SUCCEEDED, summary="10 unchanged", stage="", done=10, total=10,
                counts={"unchanged": 10}, errors=(), error_count=0, result=None)
    run_panel(at)
    assert whole_page(at), "the end of a job did not redraw a page with nothing to type into"
    assert any(f"Reconcile (job {job.id}, succeeded" in s.value for s in at.success)
    assert SHOW_CHANGES not in {b.label for b in at.button} and at.button(key="reindex-all")


def test_the_maintenance_tab_shows_the_changes_of_the_job_it_started_at_once(heavy_lock, synced_sample):
    at = maintenance()
    at.button(key="reindex-all").click().run()  # queued: the test holds the heavy-job lock
    assert not at.exception, at.exception
    assert any("**Re-index all** · job 1 · queued" in m.value for m in at.markdown)
    heavy_lock.release()
    wait_for_jobs(synced_sample)
    run_panel(at)
    assert whole_page(at), "the tab that started the job (nothing to type into there) shows what it changed"
    assert any("Re-index all (job 1, succeeded" in s.value for s in at.success)
    assert SHOW_CHANGES not in {b.label for b in at.button} and at.button(key="reindex-all")


def test_the_upload_page_waits_for_show_the_changes_even_for_its_own_job(heavy_lock, synced_sample):
    """The page has fields to type into (a new category, new file names): its own job's end does not rerun it."""
    at = run_page("upload")
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value([("c.md", doc("C", ["JOB_PAGE_C"]).encode(), "text/markdown")]).run()
    next(b for b in at.button if b.label == "Upload 1 file(s)").click().run()
    assert not at.exception, at.exception
    assert any(b.label.startswith("Uploading… (job ") for b in at.button)
    heavy_lock.release()
    wait_for_jobs(synced_sample)
    run_panel(at)
    assert not whole_page(at) and not any(h.value == "Result" for h in at.subheader)
    assert [b.label for b in at.button] == [SHOW_CHANGES]
    assert any("Batch upload (job 1, succeeded" in s.value for s in at.success)  # the panel's own line

    at.button(key="jobs-show-changes-upload").click().run()
    assert not at.exception, at.exception
    assert whole_page(at) and any(h.value == "Result" for h in at.subheader)  # what the job did, above
    assert list(at.dataframe[0].value["result"]) == ["indexed"]
    assert not any(b.label.startswith("Uploading…") for b in at.button)


def test_the_playground_redraws_itself_when_its_index_now_job_ends(app_root, sample_root):
    """*Index now*: the user waits for exactly that job, so its end redraws the page (the banner says what was
    indexed, the button is gone) without "Show the changes"."""
    at = run_page("playground")  # the sample is on disk, nothing indexed yet
    store = MetadataStore(f"sqlite:///{app_root / 'kb.sqlite3'}")
    lock = store.lock("kbjob", "heavy")
    try:
        assert lock.acquire(0)
        at.button(key="index-now").click().run()  # queued while the test holds the lock
        assert not at.exception, at.exception
        assert at.get("progress") or any("queued" in m.value for m in at.markdown)
        lock.release()
        wait_for_jobs(app_root)
        run_panel(at)
        assert any(s.value.startswith("Indexed:") for s in at.success), "the page was not redrawn"
        assert SHOW_CHANGES not in {b.label for b in at.button}
        assert not any(b.label.startswith("Index ") for b in at.button)
    finally:
        with contextlib.suppress(Exception):
            lock.release()
        store.dispose()


def test_the_evaluation_page_redraws_itself_when_its_run_ends(synced_sample, heavy_lock):
    """The run the user started is what they wait for: its end redraws the page (the runs table shows it)
    without "Show the changes" (the newcomer saw "No evaluation run yet" under the finished job)."""
    at = run_page("evaluation")
    at.text_input(key="eval-import-name").set_value("smoke")
    at.file_uploader(key="eval-import-file").set_value(
        [("set.jsonl", b'{"query": "ERR_TIMEOUT", "kind": "identifier", "expected": ["api/payment-errors.md"]}',
          "application/json")]).run()
    at.button(key="eval-import").click().run()
    at.button(key="eval-start").click().run()  # queued while the test holds the lock
    assert not at.exception, at.exception
    heavy_lock.release()
    wait_for_jobs(synced_sample)
    run_panel(at)
    assert not at.exception, at.exception
    assert any("L0 rule" in f.value.columns for f in at.dataframe), "the page was not redrawn"
    assert SHOW_CHANGES not in {b.label for b in at.button}
