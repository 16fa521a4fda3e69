"""Long work as jobs: started through the one registry of job kinds (`kb_core.jobs.kinds.prepare`), run by this
process's `JobRunner`, listed, awaited and cancelled (`JobsService`, one per knowledge base), and `kb.jobs` for one
actor (`Jobs`): the registry checks who may start a kind, and the job runs against the starter's own services
(`ActingHost`), so its writes check the starter's role and record who made them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.errors import AccessDeniedError, InvalidInputError, KnowledgeBaseError
from kb_core.jobs.kinds import JobHost, JobRequest, prepare

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.jobs.model import JobFile, JobRecord, UploadRow
    from kb_core.jobs.runner import JobRunner, Work
    from kb_core.progress import Progress
    from kb_core.services.acting import Acting
    from kb_core.services.documents import Documents
    from kb_core.services.keywords import Keywords
    from kb_core.services.trash import TrashBin


class JobsService:
    def __init__(self, runner: JobRunner | None, closed: Callable[[], bool]):
        self._jobs = runner
        self._closed = closed

    def runner(self) -> JobRunner:
        if self._jobs is None:
            raise KnowledgeBaseError("this knowledge base has no job runner")
        return self._jobs

    def start(self, kind: str, host: JobHost, actor: Actor, request: JobRequest) -> JobRecord:
        job = prepare(kind, host, actor, request, self.runner, closed=self._closed())
        try:
            return self.runner().submit(job.kind, actor, job.params, job.work, total=job.total,
                                        staging=job.staging)
        except BaseException:
            self.runner().staging.remove(job.staging)
            raise

    def run_here(self, kind: str, host: JobHost, actor: Actor, request: JobRequest,
                 progress: Progress | None = None) -> JobRecord:
        job = prepare(kind, host, actor, request, self.runner, closed=self._closed())
        try:
            return self.runner().run_here(job.kind, actor, job.params, job.work, total=job.total,
                                          progress=progress)
        finally:
            self.runner().staging.remove(job.staging)

    def recent(self, limit: int, kinds: Iterable[str] | None) -> list[JobRecord]:
        return self.runner().store.recent(limit, None if kinds is None else list(kinds))

    def get(self, job_id: int) -> JobRecord | None:
        return self.runner().store.get(job_id)

    def wait(self, job_id: int, timeout: float | None) -> JobRecord | None:
        return self.runner().wait(job_id, timeout)

    @staticmethod
    def may_cancel(job: JobRecord, actor: Actor) -> bool:
        """Its starter or an admin, while it can still be cancelled."""
        return job.active and (job.actor == actor.name or actor.may(Role.ADMIN))

    def cancel(self, job_id: int, actor: Actor) -> JobRecord:
        job = self.get(job_id)
        if job is None:
            raise InvalidInputError(f"there is no job {job_id}")
        if job.active and not self.may_cancel(job, actor):
            raise AccessDeniedError(f"{actor.name} ({actor.role.label}) may not cancel job {job_id} of "
                                    f"{job.actor}: only its starter or an admin")
        return self.runner().cancel(job_id) or job


class Jobs:
    """`kb.jobs`: long work as jobs, started, listed, awaited and cancelled by one actor. The kinds, the role each
    needs and what each takes are `kb_core.jobs.kinds`'s registry; one heavy job runs at a time per knowledge
    base, across processes, the others wait queued."""

    def __init__(self, service: JobsService, acting: Acting, host: JobHost):
        self._service = service
        self._acting = acting
        self._host = host

    def start(self, kind: str, *, delete_missing: bool = False,
              paths: Iterable[str | os.PathLike[str]] | None = None, files: Sequence[JobFile] = (),
              notes: Sequence[UploadRow] = (), plan: Any = None, older_than_days: float | None = None) -> JobRecord:
        """Start long work as a job of this process and return at once (queued; see `list()`): `"reconcile"`
        (`delete_missing`, `paths`), `"reindex_all"`, `"upload"`/`"import"` (`files`, staged under the
        application root; `notes`: rows decided without uploading), `"keyword_plan"` (`plan`), `"purge_trash"`
        (`older_than_days`), `"model_pull"`."""
        request = JobRequest(delete_missing, paths, files, notes, plan, older_than_days)
        return self._service.start(kind, self._host, self._acting.actor, request)

    def run(self, kind: str, *, delete_missing: bool = False, paths: Iterable[str | os.PathLike[str]] | None = None,
            files: Sequence[JobFile] = (), progress: Progress | None = None) -> JobRecord:
        """As `start`, but run in the calling thread (in its turn) and return the job as it ended: the `kb`
        command runs reconcile this way, and the console shows it like any other job."""
        request = JobRequest(delete_missing, paths, files)
        return self._service.run_here(kind, self._host, self._acting.actor, request, progress)

    def list(self, limit: int = 20, kinds: Iterable[str] | None = None) -> list[JobRecord]:
        """The newest jobs of every process (of `kinds`, or all), newest first, running and queued ones among
        them; without their parameters and results (`get(id)` has those)."""
        return self._service.recent(limit, kinds)

    def get(self, job_id: int) -> JobRecord | None:
        """One job with everything: its parameters and its result (an upload's per-file outcomes)."""
        return self._service.get(job_id)

    def wait(self, job_id: int, timeout: float | None = None) -> JobRecord | None:
        """The job once it has ended, or as it is after `timeout` seconds."""
        return self._service.wait(job_id, timeout)

    def may_cancel(self, job: JobRecord) -> bool:
        """Whether this actor may cancel `job` (its starter, or an admin), and it can still be cancelled."""
        return self._service.may_cancel(job, self._acting.actor)

    def cancel(self, job_id: int) -> JobRecord:
        """Cancel a job: a queued one at once, a running one at its next document (what it wrote stays). Its
        starter or an admin may."""
        return self._service.cancel(job_id, self._acting.actor)


@dataclass(frozen=True)
class ActingHost:
    """What a job is prepared from and runs against (`kb_core.jobs.kinds.JobHost`): the starter's services."""

    settings: Any
    writer: Documents
    keywords: Keywords
    trash: TrashBin

    def keyword_plan_job(self, plan: Any) -> tuple[dict[str, Any], Work, int]:
        return self.keywords.plan_job(plan)

    def purge_trash_job(self, older_than_days: float | None) -> tuple[dict[str, Any], Work]:
        return self.trash.purge_job(older_than_days)
