"""Long work as jobs: started through the one registry of job kinds (`kb_core.jobs.kinds.prepare`), run by this
process's `JobRunner`, listed, awaited and cancelled. The facade checks who may start a kind (the registry does)
and hands itself over as the job's host: the work calls the facade's own writes, acting for the starter."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kb_core.access import Role
from kb_core.errors import AccessDeniedError, InvalidInputError, KnowledgeBaseError
from kb_core.jobs.kinds import JobHost, JobRequest, prepare

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.jobs.model import JobRecord
    from kb_core.jobs.runner import JobRunner
    from kb_core.progress import Progress


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
