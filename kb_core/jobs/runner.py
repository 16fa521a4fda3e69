"""The worker: one thread per knowledge base (started with its first job, stopped by `close()`) runs this
process's jobs one after another, each in its turn across every process of the knowledge base.

**One heavy job at a time, across processes.** A job runs only while it holds the named lock `kbjob` of the
database (`storage/named_lock.py`: MySQL `GET_LOCK`, an `flock` beside a SQLite file); the lock is taken
*before* the row says "running" and let go only *after* the row says how it ended. Until then the job waits
"queued", checking every quarter second whether it was cancelled. A process that dies releases the lock with it.

**A dead owner.** Every job row names its process (host, pid, start marker: `process.py`). `sweep()` — run at
every opening and every 10 s by the change follower — marks queued or running jobs of processes that are gone
as failed: on this host by the pid and its start marker; on another host, a running job whose lock is free
(taken here and the row still says running), a queued one that has not shown a sign of life for 5 minutes.
The document a killed job was writing is left PENDING; recovery (the same opening, or the follower's chore)
finishes it from the file, as after any crash, and *reconcile* indexes what the job did not reach.

**Cancel** is cooperative: the work checks `JobControl.checkpoint()` between two documents only, so whatever
was written is whole, and the rest untouched.

**Lookups first.** The worker thread runs at the lowest CPU priority, and while agents look things up (the call
log of every process shows a lookup in the last `LOOKUPS_WINDOW` seconds) a job rests after each document so that
it works at most `share` (KB_JOB_SHARE) of its time: on a small machine a job at full speed takes the CPU that
lookups need (benchmarks/bench_jobs.py measures it). Without lookups it runs at full speed. While a job runs, the
interpreter hands the GIL over every `SWITCH_INTERVAL` seconds instead of 5 ms, so a lookup in this process waits
at most that long for the job's thread each time it needs the interpreter.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from typing import Any

from kb_core.access import Actor
from kb_core.errors import JobCancelledError, KnowledgeBaseError
from kb_core.jobs.model import MAX_ERRORS, JobKind, JobRecord, JobState
from kb_core.jobs.process import ProcessIdentity
from kb_core.jobs.staging import StagingArea
from kb_core.jobs.store import JobStore
from kb_core.progress import Progress
from kb_core.storage.named_lock import NamedLock

log = logging.getLogger(__name__)

POLL = 0.25  # seconds between a queued job's looks at its turn (and at a cancel)
FLUSH_EVERY = 0.5  # seconds between writes of a running job's progress (and reads of a cancel request)
TOUCH_EVERY = 30.0  # seconds between a queued job's signs of life
STALE_AFTER = 300.0  # a queued job of another host without a sign of life for this long: its process is gone
STOP_WAIT = 30.0  # seconds `stop()` waits for the running job to reach its next document
JOB_NICENESS = 19  # the worker thread's nice value: lookups first
LOOKUPS_WINDOW = 10.0  # seconds: a tool call logged this recently means agents are looking things up
MAX_REST = 10.0  # seconds a job rests at most after one document (a huge one would otherwise pause it for minutes)
SWITCH_INTERVAL = 0.001  # seconds a thread may hold the GIL while another waits, while a job runs (default 0.005)

Work = Callable[["JobControl"], str]  # does the job, reporting through the control; returns the summary line


class JobControl:
    """What a job's work reports through: progress, counts, errors, the result, and `checkpoint()` — the one
    place a cancel takes effect. While the job runs, a small thread of its own writes the progress to the row
    every `FLUSH_EVERY` seconds (also a sign of life) and reads whether a cancel was requested, so the work never
    waits for the database to report, and a long document does not hide the progress made before it."""

    def __init__(self, runner: JobRunner, job: JobRecord, forward: Progress | None = None):
        self._runner = runner
        self.job_id = job.id
        self.stage = ""
        self.done = 0
        self.total = job.total
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self.error_count = 0
        self.result: dict[str, Any] | None = None
        self._forward = forward
        self._cancel_seen = False
        self._lookups_seen = False  # lookups in the last LOOKUPS_WINDOW seconds (read by the flusher)
        self._resumed = time.monotonic()  # when the work last resumed after a checkpoint
        self._ended = threading.Event()
        self._flusher: threading.Thread | None = None

    def progress(self, stage: str, done: int, total: int) -> None:
        """`kb_core.progress.Progress`; never raises."""
        self.stage, self.done, self.total = stage, done, total
        if self._forward is not None:
            self._forward(stage, done, total)

    def between_documents(self, *stages: str) -> Progress:
        """A progress callback that also checks for a cancel at `stages`: those a long operation reports just
        before it starts its next document (reconcile's "syncing", re-index all's "reindexing")."""
        def progress(stage: str, done: int, total: int) -> None:
            self.progress(stage, done, total)
            if stage in stages:
                self.checkpoint()
        return progress

    def checkpoint(self) -> None:
        """Between two documents: raise `JobCancelledError` when a cancel was requested (here, by another process,
        or by `close()`); while agents look things up, rest so that the job works at most its share of the time."""
        self._check_cancel()
        share = self._runner.share
        if share < 1 and self._lookups_seen:
            rest = min(MAX_REST, (time.monotonic() - self._resumed) * (1 / share - 1))
            resting_until = time.monotonic() + rest
            while (left := resting_until - time.monotonic()) > 0 and not self._cancelled():
                self._runner.rest(min(left, POLL))
            self._check_cancel()
        self._resumed = time.monotonic()

    def _cancelled(self) -> bool:
        return self._cancel_seen or self._runner.cancelling(self.job_id)

    def _check_cancel(self) -> None:
        if self._cancelled():
            raise JobCancelledError(f"cancelled after {self.done} of {self.total}")

    def count(self, outcome: str, n: int = 1) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + n

    def error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)

    def start(self) -> None:
        self._flusher = threading.Thread(target=self._flush_every, name=f"kb-job-{self.job_id}", daemon=True)
        self._flusher.start()

    def end(self) -> None:
        self._ended.set()
        if self._flusher is not None:
            self._flusher.join(FLUSH_EVERY + 1)

    def _flush_every(self) -> None:
        while not self._ended.wait(FLUSH_EVERY):
            self.flush()

    def flush(self) -> None:
        store = self._runner.store
        try:
            self._cancel_seen = store.progress(
                self.job_id, stage=self.stage, done=self.done, total=self.total, counts=dict(self.counts),
                errors=list(self.errors), error_count=self.error_count) or self._cancel_seen
            if self._runner.share < 1:
                self._lookups_seen = store.lookups_since(LOOKUPS_WINDOW)
        except KnowledgeBaseError as exc:  # the job goes on; the row catches up at the next write
            log.warning("job %d: progress not recorded: %s", self.job_id, exc)


class JobRunner:
    def __init__(self, store: JobStore, heavy_lock: Callable[[], NamedLock], staging: StagingArea, *,
                 share: float = 1.0):
        self.store = store
        self.share = share  # of its time a job works while agents look things up (KB_JOB_SHARE)
        self._heavy_lock = heavy_lock
        self.staging = staging
        self.identity = ProcessIdentity.current()
        self._cond = threading.Condition()
        self._queue: list[int] = []  # this process's queued jobs, in order
        self._work: dict[int, tuple[Work, str | None]] = {}  # job id -> (work, staging token)
        self._cancel: set[int] = set()  # cancels requested in this process
        self._running: set[int] = set()
        self._unsaved: dict[int, dict[str, Any]] = {}  # endings the database did not take: written by `sweep()`
        self._thread: threading.Thread | None = None
        self._stopping = False

    # -- starting ----------------------------------------------------------------------------------------
    def submit(self, kind: str, actor: Actor, params: Mapping[str, Any], work: Work, *, total: int = 0,
               staging: str | None = None) -> JobRecord:
        """Record the job (queued) and hand it to the worker thread; returns at once."""
        with self._cond:
            if self._stopping:
                raise KnowledgeBaseError("this knowledge base was closed: open it again to start a job")
        record = self.store.create(kind, actor, self.identity, params, total)
        with self._cond:
            self._queue.append(record.id)
            self._work[record.id] = (work, staging)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="kb-jobs", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        log.info("job %d (%s) queued by %s", record.id, kind, actor.name)
        return record

    def run_here(self, kind: str, actor: Actor, params: Mapping[str, Any], work: Work, *, total: int = 0,
                 progress: Progress | None = None) -> JobRecord:
        """Record the job and run it in the calling thread, in its turn (the CLI: it has no tab to come back to,
        but the console shows the job like any other)."""
        record = self.store.create(kind, actor, self.identity, params, total)
        with self._cond:
            self._running.add(record.id)
        try:
            self._run(record.id, work, None, progress)
        finally:
            with self._cond:
                self._running.discard(record.id)
                self._cond.notify_all()
        return self.store.get(record.id) or record

    # -- watching and cancelling -------------------------------------------------------------------------
    def cancel(self, job_id: int) -> JobRecord | None:
        with self._cond:
            self._cancel.add(job_id)
            self._cond.notify_all()
        return self.store.request_cancel(job_id)

    def cancelling(self, job_id: int) -> bool:
        return self._stopping or job_id in self._cancel

    def rest(self, seconds: float) -> None:
        """A job's rest between two documents; a cancel or `stop()` ends it early."""
        with self._cond:
            self._cond.wait(seconds)

    def wait(self, job_id: int, timeout: float | None = None) -> JobRecord | None:
        """The job once it has ended (or as it is when `timeout` seconds have passed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.store.get(job_id)
            if record is None or not record.active:
                return record
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return record
            with self._cond:  # this process's jobs notify at their end; another's are polled
                self._cond.wait(POLL if left is None else min(POLL, left))

    # -- the worker ----------------------------------------------------------------------------------------
    def _loop(self) -> None:
        _lower_priority()
        while True:
            with self._cond:
                while not self._stopping and not self._queue:
                    self._cond.wait()
                if self._stopping:
                    return
                job_id = self._queue[0]
                work, token = self._work[job_id]
                self._running.add(job_id)
            try:
                self._run(job_id, work, token, None)
            except Exception:  # noqa: BLE001 - the worker outlives any one job
                log.exception("job %d: the worker failed", job_id)
            finally:
                with self._cond:
                    self._queue.remove(job_id)
                    self._work.pop(job_id, None)
                    self._running.discard(job_id)
                    self._cancel.discard(job_id)
                    self._cond.notify_all()

    def _run(self, job_id: int, work: Work, token: str | None, forward: Progress | None) -> None:
        lock = self._heavy_lock()
        try:
            record = self._wait_for_turn(job_id, lock)
            if record is None:
                return
            try:
                if not self.store.claim(job_id):  # cancelled between the last look and now
                    return
                self._execute(record, work, forward)
            finally:
                lock.release()
        finally:
            self.staging.remove(token)

    def _wait_for_turn(self, job_id: int, lock: NamedLock) -> JobRecord | None:
        """Wait (queued) until the heavy-job lock is this job's; None when the job was cancelled meanwhile or the
        knowledge base is closing (then it is recorded as cancelled)."""
        touched = time.monotonic()
        while True:
            try:
                if self.cancelling(job_id):
                    why = "the knowledge base was closed before it started" if self._stopping else \
                        "cancelled before it started"
                    self.store.finish(job_id, JobState.CANCELLED, summary=why, stage="", done=0, total=0,
                                      counts={}, errors=(), error_count=0, result=None)
                    return None
                record = self.store.get(job_id)
                if record is None or record.state != JobState.QUEUED:
                    return None  # cancelled (or failed) by another process
                if lock.try_acquire():
                    return record
                if time.monotonic() - touched >= TOUCH_EVERY:
                    touched = time.monotonic()
                    self.store.touch(job_id)
            except KnowledgeBaseError as exc:
                log.warning("job %d waits for the database: %s", job_id, exc)
            with self._cond:
                self._cond.wait(POLL)

    def _execute(self, record: JobRecord, work: Work, forward: Progress | None) -> None:
        control = JobControl(self, record, forward)
        log.info("job %d (%s) started", record.id, record.kind)
        started = time.monotonic()
        state, summary = JobState.SUCCEEDED, ""
        control.start()
        _SWITCHING.enter()
        try:
            summary = work(control)
        except JobCancelledError as exc:
            state = JobState.CANCELLED
            summary = f"{exc}: the knowledge base was closed" if self._stopping else str(exc)
        except KeyboardInterrupt:  # Ctrl-C in the CLI: the document in flight was undone by its writer
            self._finish(record.id, JobState.CANCELLED, f"interrupted after {control.done} of {control.total}",
                         control)
            raise
        except BaseException as exc:
            state, summary = JobState.FAILED, f"failed: {exc}" if isinstance(exc, KnowledgeBaseError) else \
                f"failed: {type(exc).__name__}: {exc}"
            control.error(summary)
            if not isinstance(exc, Exception):
                self._finish(record.id, state, summary, control)
                raise
            if not isinstance(exc, KnowledgeBaseError):
                log.exception("job %d (%s) failed", record.id, record.kind)
        self._finish(record.id, state, summary, control)
        log.info("job %d (%s) %s in %.1f s: %s", record.id, record.kind, state.value, time.monotonic() - started,
                 summary)

    def _finish(self, job_id: int, state: JobState, summary: str, control: JobControl) -> None:
        _SWITCHING.leave()
        control.end()
        ending = {"summary": summary, "stage": control.stage, "done": control.done, "total": control.total,
                  "counts": dict(control.counts), "errors": list(control.errors), "error_count": control.error_count,
                  "result": control.result}
        try:
            self.store.finish(job_id, state, **ending)
        except KnowledgeBaseError as exc:
            log.error("job %d %s, but the database did not take it (written once it answers): %s", job_id,
                      state.value, exc)
            self._unsaved[job_id] = {"state": state, **ending}

    # -- dead owners -------------------------------------------------------------------------------------------
    def sweep(self) -> list[int]:
        """Mark the queued and running jobs of processes that are gone as failed; write endings the database did
        not take; remove staged files nobody needs. Returns the ids of the jobs marked failed."""
        for job_id, ending in list(self._unsaved.items()):
            with suppress(KnowledgeBaseError):
                self.store.finish(job_id, **ending)
                del self._unsaved[job_id]
        active = self.store.active()
        failed = []
        for job in active:
            if self._alive(job):
                continue
            summary = _ended_early(job)
            if self.store.fail(job.id, summary, error=summary):
                log.warning("job %d (%s): %s", job.id, job.kind, summary)
                failed.append(job.id)
                self.staging.remove(job.params.get("staging"))
        self.staging.sweep(_tokens(j for j in active if j.id not in failed))
        return failed

    def _alive(self, job: JobRecord) -> bool:
        alive = self.identity.judge(job.owner)
        if alive is not None:
            return alive
        if job.state == JobState.QUEUED:  # another host: only its signs of life tell
            return job.updated_at.replace(tzinfo=None) > self.store.stale_since(STALE_AFTER)
        lock = self._heavy_lock()  # a running job holds the lock until its row says how it ended
        if not lock.try_acquire():
            return True
        try:
            again = self.store.get(job.id)
            return again is None or again.state != JobState.RUNNING
        finally:
            lock.release()

    # -- closing -----------------------------------------------------------------------------------------------
    def stop(self, timeout: float = STOP_WAIT) -> None:
        """Cancel the running job at its next document (waiting up to `timeout` seconds) and the queued ones."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("a job is still running after %.0f s: its row is settled by the next sweep", timeout)
        with self._cond:
            left = [(job_id, self._work.get(job_id, (None, None))[1]) for job_id in self._queue
                    if job_id not in self._running]
        for job_id, token in left:
            with suppress(KnowledgeBaseError):
                self.store.finish(job_id, JobState.CANCELLED, summary="the knowledge base was closed before it "
                                  "started", stage="", done=0, total=0, counts={}, errors=(), error_count=0,
                                  result=None)
            self.staging.remove(token)


class _Switching:
    """`sys.setswitchinterval(SWITCH_INTERVAL)` while any job of this process runs; the previous value after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved = sys.getswitchinterval()

    def enter(self) -> None:
        with self._lock:
            if self._running == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, SWITCH_INTERVAL))
            self._running += 1

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                sys.setswitchinterval(self._saved)


_SWITCHING = _Switching()


def _lower_priority() -> None:
    """The worker thread (and the threads it starts) runs at the lowest CPU priority (nice 19): on a busy machine
    lookups — of this process and of every other — get the CPU first, and the job takes what is left. Linux sets
    the nice value per thread; elsewhere this is a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), JOB_NICENESS)
    except (AttributeError, OSError) as exc:
        log.debug("the job worker keeps its priority: %s", exc)


def _tokens(jobs: Iterable[JobRecord]) -> list[str]:
    return [token for job in jobs if isinstance(token := job.params.get("staging"), str)]


def _ended_early(job: JobRecord) -> str:
    """What a job whose process died left behind, in the terms of its kind."""
    ended = f"failed: the process that ran it ({job.owner}) ended before it finished"
    running = job.state == JobState.RUNNING
    if job.kind == JobKind.PURGE_TRASH:
        if not running:
            return f"{ended}, before it started: nothing was purged"
        return (f"{ended}, after purging {job.done} of {job.total or job.done} item(s): those are gone for good, "
                "every other item is still in the trash; purge again to remove the rest (a half-removed item is "
                "cleaned away then)")
    return (ended + (f", after {job.done} of {job.total}" if running and job.total else "")
            + ". A document it was writing is finished by recovery; run Reconcile to index what it did not reach")
