"""Job kinds in one registry (`KINDS`): for each kind, how its parameters and its work are prepared from what the
caller handed over. `KnowledgeBase.start_job` (the console, agent code, the opening's purge and reconcile) and
`KnowledgeBase.run_job` (the `kb` command) both start a job through `prepare`, which checks what every kind
shares in one order — a known kind, the actor's role, an open knowledge base, files for the kinds that take them
and none for the others — and then hands over to the kind's preparation.

The work runs against the knowledge base it is handed (`JobHost`, the facade acting for the job's starter):
nothing here imports the facade, documents or retrieval. A kind whose preparation needs them (a keyword plan's
check of the plan, the trash purge's age) asks its host.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kb_core.errors import InvalidInputError, KnowledgeBaseError
from kb_core.jobs.model import JobFile, JobKind, UploadRow
from kb_core.jobs.runner import Work
from kb_core.jobs.work import Writer, file_params, model_pull_work, reconcile_work, reindex_work, upload_work

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.jobs.runner import JobRunner


@dataclass(frozen=True)
class JobRequest:
    """What the caller of `start_job` / `run_job` handed over, as given; each kind checks what it uses."""

    delete_missing: bool = False
    paths: Iterable[str | os.PathLike[str]] | None = None
    files: Sequence[JobFile] = ()
    notes: Sequence[UploadRow] = ()
    plan: Any = None  # a `KeywordPlan` (kb_core.services.keyword_plan)
    older_than_days: float | None = None


@dataclass(frozen=True)
class PreparedJob:
    """A job ready for the runner: its kind, parameters (plain values, stored with the job), work and total, and
    the token of the files it staged (to remove when it cannot be submitted)."""

    kind: JobKind
    params: dict[str, Any]
    work: Work
    total: int = 0
    staging: str | None = None


class JobHost(Protocol):
    """The knowledge base a job is prepared from and runs against, acting for the job's starter: the writes its
    work calls (`writer`: `kb.documents`), its settings, and the preparations of the kinds that need more than
    kb_core.jobs knows (a keyword plan's check, the trash purge's age)."""

    @property
    def settings(self) -> Any: ...

    @property
    def writer(self) -> Writer: ...

    def keyword_plan_job(self, plan: Any) -> tuple[dict[str, Any], Work, int]: ...

    def purge_trash_job(self, older_than_days: float | None) -> tuple[dict[str, Any], Work]: ...


Prepare = Callable[[JobHost, JobKind, JobRequest, Callable[[], "JobRunner"]], PreparedJob]


@dataclass(frozen=True)
class KindSpec:
    """How one kind is started: `prepare` (None: not through `start_job`; `refusal` says what to call instead)
    and whether it takes files."""

    prepare: Prepare | None
    takes_files: bool = False
    refusal: str = ""


def _upload(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    if not request.files:
        raise InvalidInputError("an upload job needs at least one file")
    staging = runner().staging
    token = staging.stage([bytes(f.data) for f in request.files])
    described = file_params(request.files)
    params = {"files": described, "staging": token, "notes": [n.as_row() for n in request.notes]}
    work = upload_work(host.writer, described, staging, token, request.notes)
    return PreparedJob(kind, params, work, len(request.files), token)


def _reconcile(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    listed = None if request.paths is None else [os.fspath(p) for p in request.paths]
    return PreparedJob(kind, {"delete_missing": request.delete_missing, "paths": listed},
                       reconcile_work(host.writer, listed, request.delete_missing))


def _reindex_all(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    return PreparedJob(kind, {}, reindex_work(host.writer))


def _model_pull(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    model = host.settings.embedding_model
    return PreparedJob(kind, {"model": model}, model_pull_work(model))


def _keyword_plan(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    params, work, total = host.keyword_plan_job(request.plan)
    return PreparedJob(kind, params, work, total)


def _purge_trash(host: JobHost, kind: JobKind, request: JobRequest, runner: Callable[[], JobRunner]) -> PreparedJob:
    params, work = host.purge_trash_job(request.older_than_days)
    return PreparedJob(kind, params, work)


# the registry: every kind, and how it is started
KINDS: dict[JobKind, KindSpec] = {
    JobKind.RECONCILE: KindSpec(_reconcile),
    JobKind.REINDEX_ALL: KindSpec(_reindex_all),
    JobKind.UPLOAD: KindSpec(_upload, takes_files=True),
    JobKind.IMPORT: KindSpec(_upload, takes_files=True),
    JobKind.KEYWORD_PLAN: KindSpec(_keyword_plan),
    JobKind.PURGE_TRASH: KindSpec(_purge_trash),
    JobKind.EVALUATE: KindSpec(None, refusal="an evaluation run starts with start_evaluation(set_name)"),
    JobKind.MODEL_PULL: KindSpec(_model_pull),
}


def prepare(kind: str, host: JobHost, actor: Actor, request: JobRequest, runner: Callable[[], JobRunner], *,
            closed: bool) -> PreparedJob:
    """Check what every kind shares (in this order: a known kind, the actor's role, an open knowledge base —
    `closed` — then files only for the kinds that take them), then prepare the kind's job. `runner` gives the
    job runner (the kinds that stage files call it)."""
    try:
        job_kind = JobKind(kind)
    except ValueError:
        raise InvalidInputError(f"unknown job kind {kind!r}; the kinds are "
                                f"{', '.join(k.value for k in JobKind)}") from None
    actor.require(job_kind.role, f"start a {job_kind.label.lower()} job")
    if closed:
        raise KnowledgeBaseError("this knowledge base was closed: open it again to start a job")
    spec = KINDS[job_kind]
    if spec.prepare is None:
        raise InvalidInputError(spec.refusal)
    if request.files and not spec.takes_files:
        raise InvalidInputError(f"a {job_kind.label.lower()} job takes no files")
    return spec.prepare(host, job_kind, request, runner)
