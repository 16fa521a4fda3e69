"""What a job is, as the console, the CLI and agent code see it: frozen values, no database objects."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from kb_core.access import Role
from kb_core.jobs.process import ProcessIdentity

MAX_ERRORS = 50  # errors kept per job (all are counted: `error_count`)
MAX_ERROR_CHARS = 1000
MAX_LISTED = 1000  # paths kept per list of a job's result (a reconcile's removed files, refused files, ...)
MAX_ROWS = 10_000  # per-file rows kept of an upload job's result


class JobKind(enum.StrEnum):
    RECONCILE = "reconcile"
    REINDEX_ALL = "reindex_all"
    UPLOAD = "upload"  # a batch of files
    IMPORT = "import"  # a folder
    KEYWORD_PLAN = "keyword_plan"  # rename or remove a keyword across documents (the keyword map's plan)
    PURGE_TRASH = "purge_trash"  # remove trashed documents older than KB_TRASH_DAYS (at every opening)
    EVALUATE = "evaluate"  # a labelled query set scored (kb_core/evaluation/service.py)
    MODEL_PULL = "model_pull"  # download KB_EMBEDDING_MODEL into the Hugging Face cache (kb model pull)

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def writes_documents(self) -> bool:
        """Whether it writes documents: while it runs, the stores differ by the document it is writing (a
        passing state, not a disagreement to reconcile)."""
        return self not in (JobKind.EVALUATE, JobKind.MODEL_PULL)

    @property
    def role(self) -> Role:
        """Who may start it: reconcile, re-index all and a model pull are an admin's; uploads, imports, keyword
        plans, the trash purge and evaluation runs a curator's."""
        return Role.ADMIN if self in (JobKind.RECONCILE, JobKind.REINDEX_ALL, JobKind.MODEL_PULL) else Role.CURATOR


_LABELS = {JobKind.RECONCILE: "Reconcile", JobKind.REINDEX_ALL: "Re-index all", JobKind.UPLOAD: "Batch upload",
           JobKind.IMPORT: "Folder import", JobKind.KEYWORD_PLAN: "Keyword plan", JobKind.PURGE_TRASH: "Trash purge",
           JobKind.EVALUATE: "Evaluation", JobKind.MODEL_PULL: "Model pull"}


class JobState(enum.StrEnum):
    QUEUED = "queued"  # waiting for its process's worker, or for another heavy job (of any process) to end
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # ran to its end (documents that failed are in `errors` and `counts`)
    FAILED = "failed"  # could not run to its end: an error, or its process died
    CANCELLED = "cancelled"  # stopped between two documents, on request (or its knowledge base was closed)

    @property
    def active(self) -> bool:
        return self in (JobState.QUEUED, JobState.RUNNING)


@dataclass(frozen=True)
class JobFile:
    """One file of a batch upload or folder import: what `KnowledgeBase.upload` gets (`name`, `data`,
    `category`, `if_match`, `create_only`), the name it had in the upload (`upload_name`) and the document path
    the preview showed (`file_path`), for the job's result."""

    name: str
    data: bytes = field(repr=False)
    category: str
    upload_name: str | None = None
    if_match: str | None = None
    create_only: bool = False
    file_path: str | None = None


@dataclass(frozen=True)
class UploadRow:
    """One file's line in an upload or import job's result, as the Upload page lists it: the name it had in the
    upload, what happened (`indexed`, `updated`, `unchanged`, `conflict`, `failed`; or a row the page decided
    without uploading: `not replaced`, `skipped`, `refused`), the document path, its chunks and why."""

    file: str
    result: str
    document: str = ""
    chunks: int = 0
    detail: str = ""

    def as_row(self) -> dict[str, Any]:
        """The row as the job's result stores it (JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class JobRecord:
    id: int
    kind: str
    state: JobState
    actor: str
    actor_role: str
    owner: ProcessIdentity
    params: dict[str, Any]
    stage: str
    done: int
    total: int
    counts: dict[str, int]
    errors: tuple[str, ...]
    error_count: int
    summary: str | None
    result: dict[str, Any] | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    updated_at: datetime

    @property
    def label(self) -> str:
        try:
            return JobKind(self.kind).label
        except ValueError:
            return self.kind

    @property
    def active(self) -> bool:
        return self.state.active

    @property
    def writes_documents(self) -> bool:
        """`JobKind.writes_documents` of its kind (a kind this version does not know: assumed to write)."""
        try:
            return JobKind(self.kind).writes_documents
        except ValueError:
            return True

    @property
    def fraction(self) -> float | None:
        """Done of total (0..1), or None while not countable."""
        if self.state == JobState.SUCCEEDED:
            return 1.0
        return min(1.0, self.done / self.total) if self.total > 0 else None

    def elapsed(self, now: datetime | None = None) -> float | None:
        """Seconds it has run (until it ended), or None before it started."""
        if self.started_at is None:
            return None
        end = self.ended_at or now or datetime.now(UTC)
        return max(0.0, (end - self.started_at).total_seconds())

    def eta_seconds(self, now: datetime | None = None) -> float | None:
        """Seconds left at the rate so far (done per second since it started); None while nothing is done yet,
        or when it is not running."""
        elapsed = self.elapsed(now)
        if self.state != JobState.RUNNING or elapsed is None or self.done <= 0 or self.total <= 0:
            return None
        return max(0.0, elapsed / self.done * (self.total - self.done))


def describe_seconds(seconds: float | None) -> str:
    """12 s, 3 min 5 s, 1 h 2 min: for durations and ETAs."""
    if seconds is None:
        return "—"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
