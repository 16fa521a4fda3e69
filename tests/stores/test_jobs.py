"""Jobs: reconcile, re-index all, batch uploads and folder imports as jobs of the knowledge
base's process, on real stores (SQLite and MariaDB through `db_url`, Milvus Lite): how a job's row moves from
queued to how it ended, one heavy job at a time (across knowledge bases and processes), cancel between two
documents, roles, another process reading the jobs, and a worker process killed with SIGKILL.

A test that needs a job to stop part-way holds it on a gate inside the document writer (`Gate`) and waits on
conditions, never on sleeps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.documents import doc, write_doc
from support.stores import assert_consistent, make_settings, two_knowledge_bases

from kb_core import InvalidInputError, JobState, open_knowledge_base
from kb_core.access import Actor, Role
from kb_core.bootstrap import parts_of
from kb_core.console import AccessDeniedError, JobFile, UploadRow
from kb_core.jobs.model import MAX_ERRORS, JobRecord
from kb_core.jobs.process import ProcessIdentity
from kb_core.jobs.runner import JobControl

VIEWER = Actor("vera@example.com", Role.VIEWER)
CURATOR = Actor("carl@example.com", Role.CURATOR)
ADMIN = Actor("ada@example.com", Role.ADMIN)
WAIT = 120  # seconds any condition may take on a slow, shared two-core machine


def wait_for(condition, what: str, timeout: float = WAIT):
    """Poll `condition` until it returns something true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.02)


class Gate:
    """Holds a job inside its `at`-th document (the document writer's `index_file`, which reconcile and
    re-index all call per document) until `release()`: the test then knows exactly where the job is."""

    def __init__(self, kb, at: int):
        self.reached = threading.Event()
        self._open = threading.Event()
        self.calls = 0
        writer = parts_of(kb).documents
        real = writer.index_file

        def index_file(*args, **kwargs):
            self.calls += 1
            if self.calls == at:
                self.reached.set()
                assert self._open.wait(WAIT), "the gate was never released"
            return real(*args, **kwargs)

        writer.index_file = index_file

    def wait_reached(self) -> None:
        assert self.reached.wait(WAIT), "the job never reached the gate"

    def release(self) -> None:
        self._open.set()


def many_documents(root: Path, n: int) -> None:
    for i in range(n):
        write_doc(root, f"knowledge_base/ops/doc-{i:03d}.md",
                  doc(f"Doc {i}", [f"JOBKEY_{i:03d}"], body=f"# Doc {i}\n\nStep {i} restarts relay {i}.\n"))


@pytest.fixture
def kb(open_kb, sample_root, db_url):
    return open_kb(sample_root, db_url=db_url, reconcile=True)


# -- a job's life ------------------------------------------------------------------------------------------
def test_a_job_is_queued_at_once_runs_and_records_how_it_ended(open_kb, sample_root, db_url):
    kb = open_kb(sample_root, db_url=db_url)
    before = datetime.now(UTC) - timedelta(seconds=1)
    job = kb.as_user(ADMIN).jobs.start("reconcile")
    assert job.state in (JobState.QUEUED, JobState.RUNNING) and job.kind == "reconcile" and job.label == "Reconcile"
    assert job.actor == "ada@example.com" and job.actor_role == "admin"
    assert job.owner == ProcessIdentity.current() and job.owner.pid == os.getpid()
    assert job.params == {"delete_missing": False, "paths": None}
    done = kb.jobs.wait(job.id, WAIT)
    assert done.state == JobState.SUCCEEDED, done
    assert done.summary.startswith("10 files added") and done.counts == {"added": 10}
    assert done.done == done.total == 10 and done.fraction == 1.0 and done.errors == () and done.error_count == 0
    assert before <= done.created_at <= done.started_at <= done.ended_at <= datetime.now(UTC)
    assert done.result == {"removed": [], "missing_files": [], "failed": [], "refused": []}
    assert not done.active and done.eta_seconds() is None
    assert_consistent(kb)
    # every write of the job was made as its starter
    assert {d.changed_by for d in kb.documents.list()} == {"ada@example.com"}

    second = kb.jobs.start("reindex_all")
    assert kb.jobs.wait(second.id, WAIT).summary == "10 re-indexed"
    assert [j.id for j in kb.jobs.list()] == [second.id, job.id]  # newest first
    assert kb.jobs.get(job.id) == done and kb.jobs.get(10_000) is None
    assert_consistent(kb)


def test_a_second_heavy_job_waits_its_turn(kb):
    before = sys.getswitchinterval()
    gate = Gate(kb, at=3)
    first = kb.jobs.start("reindex_all")
    gate.wait_reached()
    assert sys.getswitchinterval() == 0.001  # while a job runs, a lookup waits at most 1 ms for the GIL
    second = kb.jobs.start("reconcile")
    third = kb.jobs.start("reindex_all")
    # the first is held inside its third document: the others cannot have started, whatever the timing
    assert kb.jobs.get(first.id).state == JobState.RUNNING
    assert kb.jobs.get(second.id).state == kb.jobs.get(third.id).state == JobState.QUEUED
    gate.release()
    ended = [kb.jobs.wait(j.id, WAIT) for j in (first, second, third)]
    assert [j.state for j in ended] == [JobState.SUCCEEDED] * 3
    assert ended[0].ended_at <= ended[1].started_at and ended[1].ended_at <= ended[2].started_at
    assert sys.getswitchinterval() == before
    assert_consistent(kb)


def test_one_heavy_job_at_a_time_across_knowledge_bases_on_one_database(tmp_path, db_url):
    """Two knowledge bases on one database (as two processes are): the second's job waits for the first's, through
    the named lock in the database (MariaDB GET_LOCK, or the flock beside the SQLite file)."""
    many_documents(tmp_path, 6)
    with two_knowledge_bases(tmp_path, db_url, refresh_interval=0) as (a, b):
        a.documents.reconcile()
        gate = Gate(a, at=2)
        first = a.jobs.start("reindex_all")
        gate.wait_reached()
        waiting = b.jobs.start("reindex_all")
        # b's worker looks at its turn every quarter second and touches nothing until the lock is free
        assert b.jobs.get(waiting.id).state == JobState.QUEUED
        assert a.jobs.get(waiting.id).state == JobState.QUEUED  # each sees the other's jobs: they are rows
        assert b.jobs.get(first.id).state == JobState.RUNNING
        gate.release()
        assert a.jobs.wait(first.id, WAIT).state == JobState.SUCCEEDED
        ended = b.jobs.wait(waiting.id, WAIT)
        assert ended.state == JobState.SUCCEEDED and ended.started_at >= a.jobs.get(first.id).ended_at


# -- cancel ------------------------------------------------------------------------------------------------
def test_cancel_mid_way_stops_at_the_next_document_and_leaves_the_stores_consistent(kb):
    gate = Gate(kb, at=4)
    job = kb.jobs.start("reindex_all")
    gate.wait_reached()
    asked = kb.jobs.cancel(job.id)
    assert asked.state == JobState.RUNNING and asked.cancel_requested
    gate.release()  # the fourth document is finished whole; the fifth is never started
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.CANCELLED and ended.summary == "cancelled after 4 of 10"
    assert gate.calls == 4
    assert_consistent(kb)
    again = kb.jobs.wait(kb.jobs.start("reindex_all").id, WAIT)  # the lock was let go
    assert again.state == JobState.SUCCEEDED


def test_a_cancelled_reconcile_keeps_what_it_indexed_and_the_next_one_does_the_rest(open_kb, tmp_path, db_url):
    many_documents(tmp_path, 12)
    kb = open_kb(tmp_path, db_url=db_url)
    gate = Gate(kb, at=5)
    job = kb.jobs.start("reconcile")
    gate.wait_reached()
    kb.jobs.cancel(job.id)
    gate.release()
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.CANCELLED and ended.summary == "cancelled after 5 of 12"
    rows = {r.file_path: r for r in kb.documents.list()}
    assert len(rows) == 5 and all(r.status == "INDEXED" and r.pending_operation is None for r in rows.values())
    for row in rows.values():  # each document it reached is whole in every store
        assert len(kb.documents.chunks(row.id)) == row.chunk_count and kb.documents.entry(row.file_path) is not None
    assert kb.jobs.wait(kb.jobs.start("reconcile").id, WAIT).counts == {"added": 7, "unchanged": 5}
    assert_consistent(kb)


def test_a_queued_job_is_cancelled_at_once_and_never_runs(kb):
    gate = Gate(kb, at=1)
    first = kb.jobs.start("reindex_all")
    gate.wait_reached()
    queued = kb.jobs.start("reconcile")
    cancelled = kb.jobs.cancel(queued.id)
    assert cancelled.state == JobState.CANCELLED and cancelled.summary == "cancelled before it started"
    assert cancelled.started_at is None and cancelled.ended_at is not None
    gate.release()
    assert kb.jobs.wait(first.id, WAIT).state == JobState.SUCCEEDED
    assert kb.jobs.get(queued.id).state == JobState.CANCELLED and kb.jobs.get(queued.id).started_at is None
    with pytest.raises(InvalidInputError, match="there is no job 999"):
        kb.jobs.cancel(999)


def test_closing_the_knowledge_base_cancels_its_jobs(open_kb, sample_root, db_url):
    kb = open_knowledge_base(make_settings(sample_root, db_url=db_url))  # closed here, not by the fixture
    kb.documents.reconcile()
    gate = Gate(kb, at=2)
    running = kb.jobs.start("reindex_all")
    gate.wait_reached()
    queued = kb.jobs.start("reconcile")
    closer = threading.Thread(target=kb.close)
    closer.start()
    wait_for(lambda: parts_of(kb).jobs.cancelling(running.id), "close() to ask the running job to stop")
    gate.release()
    closer.join(WAIT)
    reader = open_kb(sample_root, db_url=db_url)
    assert reader.jobs.get(running.id).state == JobState.CANCELLED
    assert reader.jobs.get(running.id).summary == "cancelled after 2 of 10: the knowledge base was closed"
    assert reader.jobs.get(queued.id).state == JobState.CANCELLED
    assert reader.jobs.get(queued.id).summary == "the knowledge base was closed before it started"
    with pytest.raises(Exception, match="closed"):
        kb.jobs.start("reconcile")
    assert_consistent(reader)


# -- uploads -----------------------------------------------------------------------------------------------
def test_a_batch_upload_job_goes_through_upload_and_keeps_each_files_outcome(kb, sample_root):
    existing = (sample_root / "knowledge_base/troubleshooting/timeout.md").read_bytes()
    files = [JobFile("a.md", doc("A", ["JOB_A"]).encode(), "ops", upload_name="a.md", create_only=True),
             JobFile("b.md", doc("B", ["JOB_B"]).encode(), "ops/deeper", upload_name="docs/deeper/b.md",
                     create_only=True),
             JobFile("timeout.md", b"---\ntitle: x\n---\n# new\n", "troubleshooting", create_only=True),
             JobFile("bad.md", b"\xff\xfe not utf-8", "ops", create_only=True)]
    note = UploadRow("skipped.md", "not replaced", "knowledge_base/ops/skipped.md", 0, "“Replace” was not ticked")
    job = kb.as_user(CURATOR).jobs.start("import", files=files, notes=[note])
    staged = parts_of(kb).jobs.staging.root / job.params["staging"]
    assert job.kind == "import" and job.total == 4
    assert [f["upload_name"] for f in job.params["files"]] == ["a.md", "docs/deeper/b.md", "timeout.md", "bad.md"]
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.SUCCEEDED
    rows = ended.result["rows"]
    assert [(r["file"], r["result"]) for r in rows] == [
        ("a.md", "indexed"), ("docs/deeper/b.md", "indexed"), ("timeout.md", "conflict"), ("bad.md", "failed"),
        ("skipped.md", "not replaced")]
    assert rows[1]["document"] == "knowledge_base/ops/deeper/b.md" and rows[1]["chunks"] >= 1
    assert ended.counts == {"indexed": 2, "conflict": 1, "failed": 1} and ended.error_count == 2
    assert ended.summary == "4 file(s): 2 indexed, 1 conflict, 1 failed"
    assert (sample_root / "knowledge_base/troubleshooting/timeout.md").read_bytes() == existing
    assert {d.changed_by for d in kb.documents.list() if d.category.startswith("ops")} == {"carl@example.com"}
    assert not staged.exists()  # the staged bytes are gone with the job
    staging = parts_of(kb).jobs.staging.root
    assert staging.parent == sample_root and staging.name.startswith(".")  # outside the scanned folder
    assert_consistent(kb)


def test_a_cancelled_upload_keeps_the_files_it_uploaded_and_lists_only_those(kb):
    gate_reached, gate_open = threading.Event(), threading.Event()
    writer = parts_of(kb).documents
    real = writer.upload
    calls = []

    def upload(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            gate_reached.set()
            assert gate_open.wait(WAIT)
        return real(*args, **kwargs)

    writer.upload = upload
    files = [JobFile(f"f{i}.md", doc(f"F{i}", [f"JOB_F{i}"]).encode(), "ops", create_only=True) for i in range(8)]
    job = kb.jobs.start("upload", files=files)
    assert gate_reached.wait(WAIT)
    kb.jobs.cancel(job.id)
    gate_open.set()
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.CANCELLED and ended.summary == "cancelled after 3 of 8"
    assert [r["file"] for r in ended.result["rows"]] == ["f0.md", "f1.md", "f2.md"]
    assert {d.file_path for d in kb.documents.list() if d.category == "ops"} == {
        f"knowledge_base/ops/f{i}.md" for i in range(3)}
    assert_consistent(kb)


def test_errors_are_kept_bounded_and_counted(open_kb, tmp_path):
    for i in range(MAX_ERRORS + 10):
        path = tmp_path / f"knowledge_base/ops/broken-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"---\ntitle: x\n---\n\xff\xfe not UTF-8 " + b"x" * 3000)
    kb = open_kb(tmp_path)
    ended = kb.jobs.wait(kb.jobs.start("reconcile").id, WAIT)
    assert ended.state == JobState.SUCCEEDED and ended.counts == {"failed": MAX_ERRORS + 10}
    assert ended.error_count == MAX_ERRORS + 10 and 0 < len(ended.errors) <= MAX_ERRORS
    assert all(e.startswith("knowledge_base/ops/broken-") and len(e) <= 1000 for e in ended.errors)
    assert len(json.dumps(list(ended.errors), ensure_ascii=False)) <= 12_000


# -- roles -------------------------------------------------------------------------------------------------
def test_roles_who_may_start_and_cancel_which_job(kb):
    viewer, curator, admin = kb.as_user(VIEWER), kb.as_user(CURATOR), kb.as_user(ADMIN)
    file = [JobFile("x.md", doc("X", ["JOB_X"]).encode(), "ops")]
    for kind in ("reconcile", "reindex_all"):
        with pytest.raises(AccessDeniedError, match=r"carl@example.com \(curator\) may not start a .* job: it "
                                                    r"needs the admin role"):
            curator.jobs.start(kind)
        with pytest.raises(AccessDeniedError):
            curator.jobs.run(kind)
    for kind in ("upload", "import"):
        with pytest.raises(AccessDeniedError, match=r"vera@example.com \(viewer\) may not start a"):
            viewer.jobs.start(kind, files=file)
    assert kb.jobs.list() == []  # nothing refused was recorded (or staged)
    assert not parts_of(kb).jobs.staging.root.exists()
    with pytest.raises(InvalidInputError, match="unknown job kind 'defrag'"):
        admin.jobs.start("defrag")
    with pytest.raises(InvalidInputError, match="needs at least one file"):
        curator.jobs.start("upload")

    gate = Gate(kb, at=1)
    mine = admin.jobs.start("reindex_all")
    gate.wait_reached()
    theirs = curator.jobs.start("upload", files=file)
    assert [j.id for j in viewer.jobs.list()] == [theirs.id, mine.id]  # anyone may look
    with pytest.raises(AccessDeniedError, match="only its starter or an admin"):
        viewer.jobs.cancel(theirs.id)
    with pytest.raises(AccessDeniedError, match="only its starter or an admin"):
        curator.jobs.cancel(mine.id)
    assert curator.jobs.cancel(theirs.id).state == JobState.CANCELLED  # their own
    assert admin.jobs.cancel(mine.id).cancel_requested  # an admin may cancel any
    gate.release()
    assert kb.jobs.wait(mine.id, WAIT).state == JobState.CANCELLED


# -- dead processes ----------------------------------------------------------------------------------------
def test_the_process_identity_tells_a_recycled_pid_from_its_process(tmp_path):
    me = ProcessIdentity.current()
    assert me.judge(me) is True
    assert me.judge(ProcessIdentity(me.host, me.pid, "another-boot:123")) is False  # our pid, an earlier process
    assert me.judge(ProcessIdentity("elsewhere.example", me.pid, me.start)) is None
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = wait_for(lambda: _identity_of(sleeper.pid), "the child's /proc entry")
        assert me.judge(alive) is True
        assert me.judge(ProcessIdentity(me.host, sleeper.pid, alive.start + "0")) is False  # a recycled pid
    finally:
        sleeper.kill()
        sleeper.wait()
    assert me.judge(alive) is False  # ended (and reaped)


def _identity_of(pid: int) -> ProcessIdentity | None:
    from kb_core.jobs.process import _start_marker

    marker = _start_marker(pid)
    return None if marker is None else ProcessIdentity(ProcessIdentity.current().host, pid, marker)


def test_jobs_of_processes_that_are_gone_are_marked_failed(kb, monkeypatch):
    runner = parts_of(kb).jobs
    store = runner.store
    me = ProcessIdentity.current()
    recycled = store.create("reindex_all", ADMIN, ProcessIdentity(me.host, me.pid, "earlier-boot:1"), {})
    store.claim(recycled.id)
    queued_elsewhere = store.create("reconcile", ADMIN, ProcessIdentity("elsewhere.example", 4242, "x:1"), {})
    running_elsewhere = store.create("reconcile", ADMIN, ProcessIdentity("elsewhere.example", 4243, "x:2"), {})
    store.claim(running_elsewhere.id)
    holder = parts_of(kb).metadata.lock("kbjob", "heavy")  # as the other host's process holds it while it runs
    assert holder.acquire(0)
    try:
        assert runner.sweep() == [recycled.id]
    finally:
        holder.release()
    failed = kb.jobs.get(recycled.id)
    assert failed.state == JobState.FAILED and "ended before it finished" in failed.summary
    assert failed.error_count == 1 and failed.ended_at is not None
    assert kb.jobs.get(queued_elsewhere.id).state == JobState.QUEUED  # it showed a sign of life just now
    assert runner.sweep() == [running_elsewhere.id]  # the lock is free, and the row still says running
    monkeypatch.setattr("kb_core.jobs.runner.STALE_AFTER", -1.0)  # no sign of life for longer than that
    assert runner.sweep() == [queued_elsewhere.id]


def test_a_purge_whose_process_died_says_what_was_and_was_not_purged(kb):
    """Not the upload's advice (Reconcile does nothing for a purge): how many went, that the rest stay."""
    runner = parts_of(kb).jobs
    me = ProcessIdentity.current()
    dead = ProcessIdentity(me.host, me.pid, "earlier-boot:1")
    running = runner.store.create("purge_trash", ADMIN, dead, {"older_than_days": 30})
    runner.store.claim(running.id)
    runner.store.progress(running.id, stage="purging", done=2, total=5, counts={}, errors=[],
                          error_count=0)
    queued = runner.store.create("purge_trash", ADMIN, dead, {"older_than_days": 30})
    assert sorted(runner.sweep()) == sorted([running.id, queued.id])
    summary = kb.jobs.get(running.id).summary
    assert "after purging 2 of 5 item(s)" in summary and "still in the trash" in summary
    assert "Reconcile" not in summary
    assert "nothing was purged" in kb.jobs.get(queued.id).summary


KILLED_JOB = textwrap.dedent("""
    import json, os, signal, sys
    from kb_core import load_settings, open_knowledge_base
    from kb_core.bootstrap import parts_of
    from kb_core.console import JobFile

    config = json.loads(sys.argv[1])
    kb = open_knowledge_base(load_settings(**config["settings"]))
    vectors = parts_of(kb).vectors  # the store itself
    real, calls = vectors.upsert, []

    def upsert(rows):  # SIGKILL right after the kill_at-th document's vectors are written (its row PENDING)
        real(rows)
        calls.append(1)
        if len(calls) == config["kill_at"]:
            print("SIGKILL", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    vectors.upsert = upsert
    files = [JobFile(f"up-{i}.md", f"---\\ntitle: Up {i}\\nkeywords: [JOB_UP_{i}]\\n---\\n# Up {i}\\n\\nBody {i}.\\n"
                     .encode(), "ops", create_only=True) for i in range(config["files"])]
    job = kb.jobs.start(config["kind"], files=files if config["kind"] == "upload" else ())
    print(json.dumps({"job": job.id, "pid": os.getpid()}), flush=True)
    kb.jobs.wait(job.id, 300)
    print("NOT REACHED", flush=True)
    sys.exit(3)
""")


@pytest.mark.processes
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("kind", "opened"), [("reindex_all", "before"), ("upload", "after")])
def test_a_worker_killed_mid_job_is_failed_and_its_half_done_work_finished(tmp_path, db_url, open_kb, kind,
                                                                           opened):
    """The process running a job is killed (SIGKILL) while writing a document. "before": a process that was
    already open sees the job failed through its follower's sweep, and its recovery chore finishes the document;
    "after": the next opening does both. Reconcile then makes every store agree."""
    many_documents(tmp_path, 6)
    settings = make_settings(tmp_path, db_url=db_url)
    seeded = open_kb(tmp_path, db_url=db_url)
    seeded.documents.reconcile()
    survivor = seeded if opened == "before" else None
    if survivor is None:
        seeded.close()
    config = {"settings": {k: str(v) for k, v in settings.model_dump(
        include={"app_root", "database_url", "milvus_uri", "embedding_model"}).items()},
        "kind": kind, "kill_at": 3, "files": 5}
    child = subprocess.run([sys.executable, "-c", KILLED_JOB, json.dumps(config)], capture_output=True, text=True,
                           timeout=240, env={**os.environ, "KB_WATCH": "0"})
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr[-3000:]
    started = json.loads(child.stdout.splitlines()[0])
    assert child.stdout.splitlines()[-1] == "SIGKILL"

    if survivor is None:
        survivor = open_kb(tmp_path, db_url=db_url)  # the opening sweeps and recovers
        failed = survivor.jobs.get(started["job"])
    else:  # the follower's chores: every 10 s
        failed = wait_for(lambda: (j := survivor.jobs.get(started["job"])).state == JobState.FAILED and j,
                          "the follower to mark the dead job failed", timeout=60)
        wait_for(lambda: not parts_of(survivor).metadata.pending_documents(), "recovery of the PENDING row", 60)
    assert failed.state == JobState.FAILED and failed.owner.pid == started["pid"]
    assert f"the process that ran it (pid {started['pid']} on" in failed.summary and "Reconcile" in failed.summary
    assert parts_of(survivor).metadata.pending_documents() == []  # the document it was writing is settled
    staging = parts_of(survivor).jobs.staging.root
    assert not staging.exists() or not any(staging.iterdir())  # its staged files are gone
    report = survivor.documents.reconcile()
    assert report.failed == ()
    if kind == "upload":  # two uploaded whole, the third finished from its file by recovery, the rest never came
        assert {d.file_path for d in survivor.documents.list() if "/up-" in d.file_path} == {
            f"knowledge_base/ops/up-{i}.md" for i in range(3)}
    assert_consistent(survivor)
    again = survivor.jobs.wait(survivor.jobs.start("reindex_all").id, WAIT)  # the dead job's lock is free
    assert again.state == JobState.SUCCEEDED


SEES_JOBS = "import json; from kb_core.cli import main; main(['jobs', '--json'])"


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_another_process_sees_a_running_job_and_how_it_ended(open_kb, tmp_path, monkeypatch):
    many_documents(tmp_path, 6)
    kb = open_kb(tmp_path)
    kb.documents.reconcile()
    env = {**os.environ, "KB_APP_ROOT": str(tmp_path), "KB_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.sqlite3'}",
           "KB_MILVUS_URI": str(tmp_path / "kb_milvus.db"), "KB_EMBEDDING_MODEL": "no-such-org/no-such-model",
           "KB_WATCH": "0"}

    def jobs_seen_elsewhere() -> list[dict]:
        done = subprocess.run([sys.executable, "-c", SEES_JOBS], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return [json.loads(line) for line in done.stdout.splitlines()]

    gate = Gate(kb, at=3)
    job = kb.as_user(ADMIN).jobs.start("reindex_all")
    gate.wait_reached()
    wait_for(lambda: kb.jobs.get(job.id).done == 2, "the progress of two documents in the row")
    [seen] = jobs_seen_elsewhere()
    assert seen["id"] == job.id and seen["state"] == "running" and seen["actor"] == "ada@example.com"
    assert seen["done"] == 2 and seen["total"] == 6 and seen["process"] == str(ProcessIdentity.current())
    gate.release()
    kb.jobs.wait(job.id, WAIT)
    [seen] = jobs_seen_elsewhere()
    assert seen["state"] == "succeeded" and seen["summary"] == "6 re-indexed" and seen["ended"]


# -- the values the console shows ---------------------------------------------------------------------------
def test_progress_and_eta_from_the_rate_so_far():
    started = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    record = JobRecord(
        id=1, kind="reindex_all", state=JobState.RUNNING, actor="ada", actor_role="admin",
        owner=ProcessIdentity.current(), params={}, stage="reindexing", done=40, total=400, counts={}, errors=(),
        error_count=0, summary=None, result=None, cancel_requested=False, created_at=started, started_at=started,
        ended_at=None, updated_at=started)
    now = started + timedelta(seconds=10)
    assert record.fraction == 0.1 and record.elapsed(now) == 10.0
    assert record.eta_seconds(now) == 90.0  # 4 documents a second, 360 to go
    assert JobRecord(**{**record.__dict__, "done": 0}).eta_seconds(now) is None  # no rate yet
    assert JobRecord(**{**record.__dict__, "total": 0}).fraction is None
    queued = JobRecord(**{**record.__dict__, "state": JobState.QUEUED, "started_at": None})
    assert queued.eta_seconds(now) is None and queued.elapsed(now) is None
    from kb_core.jobs.model import describe_seconds

    assert [describe_seconds(s) for s in (None, 4.4, 65, 3725)] == ["—", "4 s", "1 min 5 s", "1 h 2 min"]


def test_progress_is_written_twice_a_second_by_the_jobs_own_thread(kb, monkeypatch):
    """The work only sets values: its own thread writes them (a sign of life too), however often the work reports
    and however long one document takes."""
    runner = parts_of(kb).jobs
    job = runner.store.create("reindex_all", ADMIN, runner.identity, {})
    runner.store.claim(job.id)
    writes = []
    real = runner.store.progress
    monkeypatch.setattr(runner.store, "progress", lambda *a, **k: writes.append(time.monotonic()) or real(*a, **k))
    control = JobControl(runner, job)
    started = time.monotonic()
    control.start()
    try:
        for i in range(100_000):
            control.progress("reindexing", i, 100_000)
        assert len(writes) <= (time.monotonic() - started) / 0.5 + 1
        wait_for(lambda: runner.store.get(job.id).done == 99_999, "the last progress in the row")
        seen = runner.store.get(job.id)
        # MariaDB keeps whole seconds (DATETIME): the write may share the claim's second, never precede it
        assert seen.stage == "reindexing" and seen.total == 100_000 and seen.updated_at >= seen.started_at
    finally:
        control.end()
    assert all(b - a >= 0.4 for a, b in zip(writes, writes[1:], strict=False))


def test_while_agents_look_things_up_a_job_rests_after_each_document(kb):
    """KB_JOB_SHARE: with a lookup logged in the last 10 s (any process's call log), a job works at most its share
    of the time, resting between two documents; a cancel ends the rest at once; without lookups it never rests."""
    from kb_core.console import JobCancelledError

    runner = parts_of(kb).jobs
    assert runner.share == 0.25  # the default
    job = runner.store.create("reindex_all", ADMIN, runner.identity, {})
    runner.store.claim(job.id)
    control = JobControl(runner, job)
    control.flush()
    assert not control._lookups_seen
    control._resumed = time.monotonic() - 0.2  # as if the last document took 0.2 s
    started = time.monotonic()
    control.checkpoint()
    assert time.monotonic() - started < 0.1  # nobody looks anything up: full speed

    kb.lookup_knowledge("ERR_TIMEOUT", caller="agent")
    assert kb.calls.flush(10)
    control.flush()
    assert control._lookups_seen
    control._resumed = time.monotonic() - 0.1
    started = time.monotonic()
    control.checkpoint()
    assert 0.29 <= time.monotonic() - started < 2.0  # 0.1 s of work, three times that of rest: a quarter

    control._resumed = time.monotonic() - 2.0  # a rest of 6 s ahead ...
    canceller = threading.Timer(0.3, runner.cancel, args=(job.id,))
    canceller.start()
    started = time.monotonic()
    with pytest.raises(JobCancelledError):
        control.checkpoint()
    assert time.monotonic() - started < 2.0  # ... ended by the cancel
    canceller.join()


def test_which_job_kinds_write_documents():
    """The sidebar holds back the stores' disagreement while a job that writes documents runs."""
    from kb_core.jobs.model import JobKind

    assert {k for k in JobKind if not k.writes_documents} == {JobKind.EVALUATE, JobKind.MODEL_PULL}
