"""The jobs panel (issue 24, item 1) under AppTest on real stores: Re-index all and Reconcile start jobs and return
at once; the panel shows running and queued jobs of any session or process with progress, an ETA and a cancel
button, how the latest one ended and the recent ones; the upload page hands its batch to a job.

Rows another process would write are made here through the job store with this process's identity (so no
sweep takes them for a dead process's), which lets a test put a job exactly where it wants it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import doc, finish_jobs, run_page
from streamlit.testing.v1 import AppTest

from kb_core.access import Actor, Role
from kb_core.jobs.process import ProcessIdentity
from kb_core.jobs.store import JobStore
from kb_core.storage.metadata_store import MetadataStore

ELSEWHERE = Actor("ada@example.com", Role.ADMIN)  # the starter of jobs made "by another session"


@pytest.fixture
def jobs(synced_sample):
    """The job table of the console's knowledge base, as another process sees it."""
    metadata = MetadataStore(f"sqlite:///{synced_sample / 'kb.sqlite3'}")
    yield JobStore(metadata)
    metadata.dispose()


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
    from test_signin import ROLES, _app, _maintenance, _user

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
    curator.switch_page("../pages/upload.py").run()
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
