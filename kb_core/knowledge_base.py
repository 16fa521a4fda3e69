"""`KnowledgeBase`: the one object the console, the tests and agent code hold.

Role-checked delegation: each method checks the acting user's role (`as_user`) and hands over to the part or
service that owns the work (`kb_core.services`, `kb_core.evaluation`, the stores in `Parts`); writes go through
`_writing`, which also moves the version every cached summary is keyed on."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kb_core.access import Actor, Role, acting, service_actor
from kb_core.agent.call_stats import REPLAY_CALLER, AttentionGroup, CallBucket
from kb_core.agent.tool import (
    READ_TOOL_NAME,
    TOOL_NAME,
    ToolResponse,
    check_query_length,
)
from kb_core.documents.batch import BatchFile, BatchPreview, preview_batch
from kb_core.documents.document_edit import FrontmatterEdit
from kb_core.documents.frontmatter_edit import FrontmatterFields
from kb_core.documents.lint import UploadPreview, preview_upload
from kb_core.documents.reconcile import ReconcileReport
from kb_core.documents.scope import ALL, AudienceRule, Scope
from kb_core.documents.service import DeleteOutcome, ReindexReport, UploadOutcome
from kb_core.documents.trash import TrashItem, purge_age_days
from kb_core.errors import InvalidInputError, KnowledgeBaseError, SettingsError
from kb_core.evaluation.runs import OutcomeRow, RunComparison
from kb_core.evaluation.scoring import LabelledQuery
from kb_core.evaluation.service import EvaluationService
from kb_core.jobs.kinds import JobRequest
from kb_core.jobs.model import JobFile, JobKind, JobRecord, UploadRow
from kb_core.jobs.runner import Work
from kb_core.jobs.work import purge_trash_work
from kb_core.keywords.entry import KnowledgeEntry
from kb_core.keywords.map import KeywordHit, KeywordMap, keyword_hits, keyword_map
from kb_core.ops.about import About, about
from kb_core.ops.logs import log_context, new_request_id
from kb_core.ops.metrics import KnowledgeBaseMetrics
from kb_core.ops.summaries import SummaryCache
from kb_core.progress import Progress
from kb_core.retrieval.attention import DocumentSuggestion
from kb_core.retrieval.lookup import LookupResult
from kb_core.retrieval.playground import BenchOptions, BenchRun, HistoryEntry
from kb_core.services.calls import ToolCalls
from kb_core.services.catalogue import Catalogue
from kb_core.services.editing import EditingService
from kb_core.services.jobs import JobsService
from kb_core.services.keyword_plan import REMOVE, RENAME, KeywordPlan, KeywordPlanReport
from kb_core.services.parts import Parts
from kb_core.services.playground import Playground
from kb_core.services.status import KnowledgeBaseStatus, StatusService, StoreCounts
from kb_core.settings import Settings
from kb_core.storage.embedding import ModelState
from kb_core.storage.evaluation_store import QuerySetInfo, StoredRun
from kb_core.storage.metadata_store import DocumentRecord, ToolCallRecord
from kb_core.storage.ports import ChunkRow

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["KnowledgeBase", "KnowledgeBaseStatus", "StoreCounts"]

log = logging.getLogger(__name__)


class KnowledgeBase:
    """The facade: everything the console, the tools and agent code do goes through its methods. Its parts are
    its own; `open_knowledge_base()` (the composition root) builds them."""

    def __init__(self, settings: Settings, parts: Parts):
        self._settings = settings
        try:
            self._audience_rule = AudienceRule.of_mapping(settings.audiences)
        except InvalidInputError as exc:
            raise SettingsError(f"auth.audiences (KB_AUDIENCES): {exc}") from None
        self._parts = parts
        self._folder, self._index, self._metadata = parts.folder, parts.index, parts.metadata
        self._vectors, self._embedder, self._documents = parts.vectors, parts.embedder, parts.documents
        self._reconciler, self._trash, self._lookup = parts.reconciler, parts.trash, parts.lookup
        self._searcher, self._follower, self._watcher, self._jobs = parts.searcher, parts.follower, parts.watcher, \
            parts.jobs
        self._clock = _WriteClock()  # shared with every `as_user` view of this knowledge base
        self._summaries = SummaryCache(self._version)
        self._catalogue = Catalogue(parts, self._summaries)
        self._status = StatusService(parts, self._catalogue, self._summaries, base_path=settings.base_path,
                                     closed=lambda: self._clock.closed)
        self._editing = EditingService(parts.index, parts.searcher, default_language=settings.default_language)
        self._playground = Playground(parts, self._catalogue)
        self._job_service = JobsService(parts.jobs, lambda: self._clock.closed)
        self._evaluation = EvaluationService(parts.metadata, parts.lookup, self._job_service.runner)
        self._actor = service_actor(settings.service_identity)
        if settings.service_audiences is not None:  # in-process agents limited to some audiences' pages
            self._actor = dataclasses.replace(self._actor, audiences=frozenset(settings.service_audiences))
        self._metrics = parts.metrics or KnowledgeBaseMetrics()
        self._metrics.watch_state(self._status.for_metrics, parts.follower)
        self._calls = ToolCalls(parts, self._metrics)

    def _version(self) -> tuple[int, int]:
        return self._clock.writes, self._follower.changes_applied if self._follower is not None else 0

    def as_user(self, actor: Actor) -> KnowledgeBase:
        """This knowledge base acting for `actor`: the same stores and caches, and every write checks the
        actor's role (`AccessDeniedError`) and records who made it. The console opens one per signed-in user;
        without `as_user`, calls act as the service identity (`KB_SERVICE_IDENTITY`)."""
        view = copy.copy(self)
        view._actor = actor
        return view

    @property
    def actor(self) -> Actor:
        """Who this knowledge base acts for."""
        return self._actor

    @property
    def settings(self) -> Settings:
        return self._settings

    # -- queries and the agents' tools (kb_core.services.calls) -------------------------------------------
    def lookup(self, query: str, section_title: str | None = None, scope: Scope | None = None) -> LookupResult:
        """L0, then L1 when needed (`HybridLookup`); a query over `MAX_QUERY_CHARS` raises `InvalidInputError`
        first. Only the pages `scope` admits exist (by default those the acting identity may read)."""
        check_query_length(query)
        result = self._lookup.lookup(query, section_title, scope or self._actor_scope())
        self._metrics.observe_lookup(result)
        return result

    def lookup_knowledge(self, query: str, section_title: str | None = None, *, category: str | None = None,
                         language: str | None = None, caller: str | None = None,
                         scope: Scope | None = None) -> dict:
        """The agent tool: the spec's JSON (plus `error` for refused arguments), logged; `category` (with its
        sub-folders) and `language` narrow the question, `scope` is what the caller may read (default all)."""
        arguments = {"query": query, "section_title": section_title}
        arguments.update({k: v for k, v in (("category", category), ("language", language)) if v is not None})
        return self.call_tool(arguments, caller=caller, scope=scope).payload

    def read_document_tool(self, source: str, section_title: str | None = None, *, language: str | None = None,
                           caller: str | None = None, scope: Scope | None = None) -> dict:
        """The `read_document` agent tool: the document at `source` (or its section) served like a lookup's
        primary, in `language` when it has that version; logged (`document_text` is the raw file text)."""
        arguments = {"source": source, "section_title": section_title, **({} if language is None else
                                                                          {"language": language})}
        return self.call_tool(arguments, caller=caller, tool=READ_TOOL_NAME, scope=scope).payload

    def call_tool(self, arguments: object, *, caller: str | None = None, tool: str = TOOL_NAME,
                  scope: Scope | None = None) -> ToolResponse:
        """A tool (`lookup_knowledge` by default, or `read_document`) with raw arguments: the payload *and* the
        result with its trace; `caller` defaults to the acting identity's name (`kb_core.services.calls`)."""
        return self._calls.call(arguments, caller=caller or self._actor.name[:64], tool=tool,
                                scope=scope or self._actor_scope())

    def tool_calls(self, limit: int = 500) -> list[ToolCallRecord]:
        """The most recent tool calls (`lookup_knowledge` and `read_document`), newest first; for a viewer
        limited to some audiences, only calls whose sources it may read."""
        return self._calls.recent(limit, self._actor_scope())

    def flush_call_log(self, timeout: float = 10.0) -> bool:
        """Wait until every call so far is in the log (or `timeout` seconds); whether they all are."""
        return self._calls.recorder.flush(timeout)

    def tool_calls_not_logged(self, span: timedelta) -> int:
        """Calls of the last `span` the log could not store (counted instead: `tool_call_dropped`), plus those
        this process counted and has not stored yet. 0 is the normal case."""
        return self._calls.not_logged(span)

    def tool_call_buckets(self, span: timedelta) -> list[CallBucket]:
        """Calls, found-rate and latency per hour (up to two days) or day over `span`, of readable sources."""
        return self._calls.buckets(span, self._actor_scope())

    def needs_attention(self, span: timedelta) -> list[AttentionGroup]:
        """Queries of `span` answered with nothing, L1 only or low confidence, grouped; readable sources only."""
        return self._calls.needing_attention(span, self._actor_scope())

    # -- the playground ------------------------------------------------------------------------------
    def run_bench(self, query: str, options: BenchOptions | None = None, *, section_title: str | None = None,
                  replay: bool = False) -> BenchRun:
        """A playground test run: the exact `lookup_knowledge` call an agent makes (its payload untouched, logged
        with the acting user's name as caller; `replay=True`, a run from a link or the history, is logged as
        `console-replay` and never counted as needing attention), and beside it L1's rows under `options` (see
        `BenchOptions`). Recorded in the acting user's history (`query_history`). Options that cannot run here
        (dense only without a model, a category nobody uses) raise `InvalidInputError` before anything runs."""
        return self._playground.run(
            query, BenchOptions() if options is None else options, section_title, replay=replay,
            scope=self._actor_scope(),
            caller=REPLAY_CALLER if replay else self._actor.name[:64], actor_name=self._actor.name,
            call_tool=lambda arguments, caller: self.call_tool(arguments, caller=caller))

    def query_history(self, limit: int = 20) -> list[HistoryEntry]:
        """The acting user's playground runs (`run_bench`), newest first; each user sees only their own."""
        return self._playground.history(self._actor.name, limit)

    # -- what it holds (kb_core.services.catalogue; cached until a write or a change from the feed) ----------
    def languages(self) -> list[str]:
        """The languages of the indexed documents (`en`, `zh`, ..., `und`): the test bench's choices."""
        return sorted(set(self._catalogue.languages().values()))

    def document_languages(self) -> dict[str, str]:
        """Each indexed document's language by its path, also for a document without frontmatter."""
        return self._catalogue.languages()

    def documents(self) -> list[DocumentRecord]:
        return self._catalogue.documents()

    def unindexed_files(self) -> list[str]:
        """Markdown files on disk without a database row (the first run's prompt)."""
        return self._catalogue.unindexed_files()

    def missing_files(self) -> list[DocumentRecord]:
        """Documents whose file has gone from disk."""
        return self._catalogue.missing_files()

    def categories(self) -> list[str]:
        """Categories in use: folders under the knowledge base and categories of stored documents."""
        return self._catalogue.categories()

    def warm_summaries(self) -> None:
        """Compute the cached summaries a console shows first (for a background thread after opening)."""
        try:
            self.status()
            for read in (self.documents, self.missing_files, self.categories, self.unindexed_files,
                         self.document_languages):
                read()
        except Exception as exc:  # noqa: BLE001 - a warm-up only saves time; the pages report errors when they ask
            log.info("summaries not warmed up: %s", exc)

    def get(self, doc_id: int) -> DocumentRecord | None:
        return self._metadata.get(doc_id)

    def chunks(self, doc_id: int) -> list[ChunkRow]:
        return self._vectors.chunks_of(doc_id)

    def keyword_summary(self) -> KeywordMap:
        """The keyword map with L0's own predictions: clashes, overlaps, generic and weak keywords."""
        return keyword_map(self._index.snapshot)

    def keyword_documents(self, keyword: str, limit: int = 200) -> list[KeywordHit]:
        """The documents a query of just `keyword` returns from L0, ranked, with the keywords that matched."""
        return keyword_hits(self._index.snapshot, keyword, limit)

    def document_keywords(self, file_path: str) -> tuple[str, ...]:
        """The keywords a document's frontmatter lists on disk, as written."""
        return self._editing.keywords(file_path)

    def document_text(self, file_path: str, max_chars: int = 1_000_000) -> str | None:
        """The raw text of a document's file (cut at `max_chars`); the agents' tool is `read_document_tool`."""
        return self._folder.read_text(file_path, max_chars)

    def l0_entry(self, file_path: str) -> KnowledgeEntry | None:
        """What L0 holds for a document (keywords it matches and ignores, sections), or `None`."""
        return self._index.get(file_path)

    def language_versions(self, file_path: str) -> tuple[KnowledgeEntry, ...]:
        """The versions of a document's page in every language L0 holds (itself included; empty: not in L0)."""
        return self._index.versions(file_path)

    def document_path(self, path: str) -> str | None:
        """The path a document is stored under (`knowledge_base/api/x.md`) for that path or one relative to the
        knowledge base (`api/x.md`, a `?doc=` link's); `None` for what cannot be one. Reads nothing."""
        return self._folder.document_path(path)

    def relative_path(self, file_path: str) -> str | None:
        """`api/x.md` for `knowledge_base/api/x.md`; `None` outside the knowledge base."""
        return self._folder.relative_path(file_path)

    def prepare_suggestions(self) -> None:
        """Build "did you mean" now (normally in the background): an evaluation measures a warm process."""
        self._lookup.prepare_suggestions()

    def wait_for_model(self, timeout: float | None = None) -> ModelState:
        """Wait until the embedding model has loaded or failed (a no-op without a model); its state."""
        if self._embedder.available:
            return self._embedder.wait_ready(timeout)
        return self._embedder.state

    def preview_upload(self, file_name: str, data: bytes, category: str) -> UploadPreview:
        return preview_upload(self._index, file_name, data, category)

    def preview_batch(self, files: Sequence[BatchFile], category: str, *,
                      duplicates_anyway: bool = False) -> BatchPreview:
        """Per-file verdicts, same-target files, clashes within the batch and content indexed elsewhere
        (`DUPLICATE` unless `duplicates_anyway`); writes nothing."""
        return preview_batch(self._index, files, category, paths_with_content=self._metadata.paths_with_content,
                             duplicates_anyway=duplicates_anyway)

    # -- changes -------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress | None = None,
               if_match: str | None = None, create_only: bool = False) -> UploadOutcome:
        """`if_match`: the sha256 of the version this replaces (`DocumentRecord.content_sha256`); `create_only`:
        the document must not exist yet. Otherwise `DocumentConflictError`, writing nothing. Curators only."""
        with self._writing(Role.CURATOR, "upload documents", "upload"):
            return self._documents.upload(file_name, data, category, if_match=if_match, create_only=create_only,
                                          **_p(progress))

    def delete(self, doc_id: int) -> DeleteOutcome:
        """Move a document's file into the trash (`trash()`, for `KB_TRASH_DAYS` days) and remove its row, vectors
        and L0 entry. Curators only."""
        with self._writing(Role.CURATOR, "delete documents", "delete"):
            return self._documents.delete(doc_id)

    # -- the trash -----------------------------------------------------------------------------------
    def trash(self) -> list[TrashItem]:
        """The deleted documents waiting in the trash, newest first (a broken one says so: `problem`)."""
        return self._trash.items()

    def restore(self, item: TrashItem | str, *, replace: bool = False,
                progress: Progress | None = None) -> UploadOutcome:
        """Bring a document back byte for byte through the upload (`item`: a `TrashItem`, its id, or a document
        path: its newest item); a file at that path again raises `RestoreConflictError` unless `replace`."""
        with self._writing(Role.CURATOR, "restore documents", "restore"):
            return self._documents.restore(self._trash.current(item), replace=replace, **_p(progress))

    def purge_trash(self, older_than_days: float | None = None, *, items: Iterable[TrashItem | str] | None = None,
                    progress: Progress | None = None) -> list[TrashItem]:
        """Remove for good what was deleted `older_than_days` ago (default `KB_TRASH_DAYS`), or exactly `items`
        (items or ids, any age). The items removed. Curators only."""
        self._actor.require(Role.CURATOR, "purge the trash")
        days = purge_age_days(older_than_days, self._settings.trash_days)
        chosen = None if items is None else [self._trash.current(item) for item in items]
        with self._writing(Role.CURATOR, "purge the trash", "purge"):
            return self._trash.purge(timedelta(days=days), items=chosen, **_p(progress))

    def reindex(self, doc_id: int, *, progress: Progress | None = None) -> DocumentRecord:
        with self._writing(Role.ADMIN, "re-index documents", "reindex"):
            return self._documents.reindex(doc_id, **_p(progress))

    def reindex_all(self, *, progress: Progress | None = None) -> ReindexReport:
        with self._writing(Role.ADMIN, "re-index documents", "reindex_all"):
            return self._documents.reindex_all(**_p(progress))

    def reconcile(self, paths: Iterable[str | os.PathLike[str]] | None = None, *, delete_missing: bool = False,
                  progress: Progress | None = None) -> ReconcileReport:
        """Bring disk, database, Milvus and L0 into agreement (`kb_core.documents.reconcile`); rows whose file
        has gone are reported, or removed with `delete_missing`; `paths` limits it to those files or folders."""
        with self._writing(Role.ADMIN, "reconcile the knowledge base", "reconcile"):
            return self._reconciler.reconcile(paths, delete_missing=delete_missing, **_p(progress))

    # -- jobs (kb_core.services.jobs, through the registry kb_core.jobs.kinds) ---------------------------
    def start_job(self, kind: str, *, delete_missing: bool = False,
                  paths: Iterable[str | os.PathLike[str]] | None = None, files: Sequence[JobFile] = (),
                  notes: Sequence[UploadRow] = (), plan: KeywordPlan | None = None,
                  older_than_days: float | None = None) -> JobRecord:
        """Start long work as a job of this process and return at once (queued; see `jobs()`). The kinds, the role
        each needs and what each takes are `kb_core.jobs.kinds`'s registry: `"reconcile"` (`delete_missing`,
        `paths`), `"reindex_all"`, `"upload"`/`"import"` (`files`, staged under the application root; `notes`:
        rows decided without uploading), `"keyword_plan"` (`plan`), `"purge_trash"` (`older_than_days`). One heavy
        job runs at a time per knowledge base, across processes; the others wait, queued."""
        request = JobRequest(delete_missing, paths, files, notes, plan, older_than_days)
        return self._job_service.start(kind, self, self._actor, request)

    def run_job(self, kind: str, *, delete_missing: bool = False,
                paths: Iterable[str | os.PathLike[str]] | None = None, files: Sequence[JobFile] = (),
                progress: Progress | None = None) -> JobRecord:
        """As `start_job`, but run in the calling thread (in its turn) and return the job as it ended: the `kb`
        command runs reconcile this way, and the console shows it like any other job."""
        request = JobRequest(delete_missing, paths, files)
        return self._job_service.run_here(kind, self, self._actor, request, progress)

    def jobs(self, limit: int = 20, kinds: Iterable[str] | None = None) -> list[JobRecord]:
        """The newest jobs of every process (of `kinds`, or all), newest first, running and queued ones among
        them; without their parameters and results (`job(id)` has those)."""
        return self._job_service.recent(limit, kinds)

    def job(self, job_id: int) -> JobRecord | None:
        """One job with everything: its parameters and its result (an upload's per-file outcomes)."""
        return self._job_service.get(job_id)

    def may_cancel_job(self, job: JobRecord) -> bool:
        """Whether this actor may cancel `job` (its starter, or an admin), and it can still be cancelled."""
        return self._job_service.may_cancel(job, self._actor)

    def wait_for_job(self, job_id: int, timeout: float | None = None) -> JobRecord | None:
        """The job once it has ended, or as it is after `timeout` seconds."""
        return self._job_service.wait(job_id, timeout)

    def cancel_job(self, job_id: int) -> JobRecord:
        """Cancel a job: a queued one at once, a running one at its next document (what it wrote stays). Its
        starter or an admin may."""
        return self._job_service.cancel(job_id, self._actor)

    # what the registry asks its host for (kb_core.jobs.kinds.JobHost): the two kinds that need the facade
    def _keyword_plan_job(self, plan: KeywordPlan | None) -> tuple[dict[str, Any], Work, int]:
        if plan is None:
            raise InvalidInputError("a keyword plan job needs the plan (prepare_keyword_rename / _removal)")
        self._check_plan(plan)
        return self._editing.plan_job(plan, self.save_frontmatter_edit)

    def _purge_trash_job(self, older_than_days: float | None) -> tuple[dict[str, Any], Work]:
        self._actor.require(Role.CURATOR, "purge the trash")
        days = purge_age_days(older_than_days, self._settings.trash_days)
        return {"older_than_days": days}, purge_trash_work(
            lambda progress: self.purge_trash(older_than_days=days, progress=progress), days)

    @contextlib.contextmanager
    def _writing(self, role: Role, action: str, operation: str) -> Iterator[None]:
        """Check the actor may do it; move the version before the write (no page caches a half-done state as
        final) and after it; record the actor on what the write stores; time it (`operation`: the metrics'
        write operation or job)."""
        self._actor.require(role, action)
        if self._clock.closed:
            # its stores are released and it no longer follows other processes: a write now would act on a stale
            # view (and could reopen the Milvus Lite directory another process has taken over since)
            raise KnowledgeBaseError("this knowledge base was closed: open it again to write")
        self._clock.tick()
        try:
            with acting(self._actor), log_context(request_id=new_request_id(), caller=self._actor.name), \
                    self._metrics.timed(operation):
                yield
        finally:
            self._clock.tick()

    # -- editing in place (kb_core.services.editing) ---------------------------------------------------
    def frontmatter_fields(self, file_path: str) -> FrontmatterFields:
        """The editable fields of a document's frontmatter on disk now: title, summary, keywords and sections
        (`exists` False: the file has no frontmatter block; an edit adds one). A block that is not valid YAML
        raises `FrontmatterError` with the parser's reason."""
        return self._editing.fields(file_path)

    def prepare_frontmatter_edit(self, file_path: str, *, title: str | None = None, summary: str | None = None,
                                 keywords: Sequence[str] | None = None,
                                 sections: Any = None) -> FrontmatterEdit:
        """The document rewritten with new values of the given fields (None: left alone; `sections` as a mapping
        or (name, heading line) pairs, emptied: the key is removed), every other byte as it was, with the upload
        preview, the lint and a diff of the frontmatter. Writes nothing. A value the file cannot hold, or a block
        that is not valid YAML, raises `FrontmatterError`; a path that is no document's, `UploadRejected`.
        Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        return self._editing.prepare(file_path, title=title, summary=summary, keywords=keywords, sections=sections)

    def save_frontmatter_edit(self, edit: FrontmatterEdit, *, progress: Progress | None = None) -> UploadOutcome:
        """Write a prepared edit through the upload path (every store), unless the file changed since it was
        prepared: then `EditConflictError` (a `DocumentConflictError`), writing nothing. Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        return self._editing.save(edit, self.upload, progress)

    def prepare_keyword_addition(self, file_path: str, keyword: str) -> FrontmatterEdit:
        """The document with `keyword` added after its keywords, as a prepared edit. Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        return self._editing.keyword_addition(file_path, keyword)

    def prepare_keyword_rename(self, keyword: str, new_keyword: str) -> KeywordPlan:
        """A plan renaming `keyword` in every document whose frontmatter lists it: per document its keywords
        before and after and the prepared edit, and the lint of the whole operation. Writes nothing
        (`apply_keyword_plan` or `start_job("keyword_plan", plan=...)` do). Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        return self._editing.plan(RENAME, keyword, new_keyword, made_by=self._actor.name)

    def prepare_keyword_removal(self, keyword: str) -> KeywordPlan:
        """A plan removing `keyword` from every document whose frontmatter lists it. Curators only."""
        self._actor.require(Role.CURATOR, "edit documents")
        return self._editing.plan(REMOVE, keyword, None, made_by=self._actor.name)

    def apply_keyword_plan(self, plan: KeywordPlan, *, progress: Progress | None = None) -> KeywordPlanReport:
        """Apply a plan in the calling thread, document by document through `save_frontmatter_edit` (each saved,
        skipped with the reason or failed; the others go on). Curators only."""
        self._check_plan(plan)
        return self._editing.apply(plan, self.save_frontmatter_edit, progress)

    def _check_plan(self, plan: object) -> None:
        if not isinstance(plan, KeywordPlan):
            raise InvalidInputError(f"expected a KeywordPlan, got {type(plan).__name__}")
        self._actor.require(Role.CURATOR, "edit documents")

    def suggest_documents(self, query: str, limit: int = 5) -> list[DocumentSuggestion]:
        """The readable documents L1 finds for `query` (one that needs attention), best first: the agents' search
        and relevance check, L1 alone, not logged as a tool call. At most `limit` (1-20)."""
        scope = self._actor_scope()
        return self._editing.suggest_documents(query, limit, scope, self._catalogue.readable_ids(scope))

    def synonyms(self) -> tuple[tuple[str, ...], ...]:
        """The synonym groups L0 applies (`_synonyms.yaml` in the knowledge base, then `l0.synonyms`)."""
        return self._index.synonyms()

    def synonym_warnings(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """What a curator should know before saving these groups (a generic keyword among them)."""
        return self._editing.synonym_warnings(groups)

    def save_synonyms(self, text_or_groups: str | Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        """Replace `_synonyms.yaml` (one group per line, words separated by commas; or a list of groups) and
        apply it; the groups from settings stay. Curators only. Returns the groups saved."""
        self._actor.require(Role.CURATOR, "edit synonyms")
        groups = self._editing.synonym_groups(text_or_groups)
        with self._writing(Role.CURATOR, "edit synonyms", "synonyms"):
            self._editing.save_synonyms(self._parts.synonyms_file, groups)
        return groups

    # -- evaluation (kb_core.evaluation.service: labelled query sets, runs as jobs, their outcomes) ---------
    def query_sets(self) -> list[QuerySetInfo]:
        return self._evaluation.query_sets()

    def query_set(self, name: str) -> list[LabelledQuery]:
        return self._evaluation.query_set(name)

    def import_query_set(self, name: str, data: bytes | str) -> int:
        """Add a JSONL file's labelled queries (`kb evaluate`'s format) to the set `name`; malformed lines are
        refused with their line numbers (`InvalidInputError`), storing nothing. How many queries it had."""
        self._actor.require(Role.CURATOR, "import labelled queries")
        return self._evaluation.import_query_set(name, data, actor=self._actor.name)

    def label_query(self, set_name: str, query: str, expected: Iterable[str], *, kind: str = "labelled") -> None:
        """Store `query` in the set with the documents that answer it (`category/file.md`; none: it must come
        back not found), replacing its label if it was in the set."""
        self._actor.require(Role.CURATOR, "label queries")
        self._evaluation.label_query(set_name, query, expected, kind=kind, actor=self._actor.name)

    def unlabel_query(self, set_name: str, query: str) -> bool:
        self._actor.require(Role.CURATOR, "remove labelled queries")
        return self._evaluation.unlabel_query(set_name, query)

    def start_evaluation(self, set_name: str) -> JobRecord:
        """Score every query of the set, as `kb evaluate` does, as an `evaluate` job (queued like every job, so
        it never measures a half-done re-index); the run is stored when it ends (`evaluation_runs()`)."""
        self._actor.require(JobKind.EVALUATE.role, "start an evaluation run")
        return self._evaluation.start(set_name, self._actor, self)

    def evaluation_runs(self, limit: int = 100) -> list[StoredRun]:
        """Newest first, without each query's outcome (`evaluation_outcomes(id)`)."""
        return self._evaluation.runs(limit)

    def evaluation_run(self, run_id: int) -> StoredRun | None:
        return self._evaluation.run(run_id)

    def evaluation_outcomes(self, run_id: int) -> list[OutcomeRow]:
        """A run's answer to each query, the wrong ones first (`VERDICTS`' order)."""
        return self._evaluation.outcomes(run_id)

    def compare_evaluation_runs(self, before: int, after: int) -> RunComparison:
        """The queries whose answer changed, and the headline metrics of each run."""
        return self._evaluation.compare(before, after)

    # -- status (kb_core.services.status) ---------------------------------------------------------------
    def status(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        """What each store holds and where they disagree. Every page render shows it, so the counts are cached
        until a write of this process or a change from the feed (or `max_age` seconds)."""
        return self._status.status(max_age)

    def about(self) -> About:
        """The versions of the parts this console runs on (packages, the database and Milvus servers) and the
        effective settings with secrets masked: the Settings page, and what to paste into a bug report. Admins
        only: the settings name the database and Milvus addresses."""
        self._actor.require(Role.ADMIN, "read the settings")
        return about((("database", self._metadata.server_version), ("milvus", self._vectors.server_version)),
                     self._settings.described())

    def _actor_scope(self) -> Scope:
        """What the acting user reads when a call names no scope: a viewer's mapped audiences, else every page."""
        audiences = self._actor.audiences
        return ALL if audiences is None else Scope(audiences=audiences, rule=self._audience_rule)

    @property
    def audience_rule(self) -> AudienceRule:
        """The folders' default audiences (`kb.yaml` auth.audiences), for callers' scopes."""
        return self._audience_rule

    # -- metrics -------------------------------------------------------------------------------------
    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This knowledge base's Prometheus registry (docs/operations.md#metrics)."""
        return self._metrics.registry

    def serve_metrics(self, port: int, host: str = "127.0.0.1") -> bool:
        """Serve the metrics on `host:port` until `close()` (`KB_METRICS_PORT`); False when the port is taken."""
        return self._metrics.serve(port, host)

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.stop()  # the running job stops at its next document; queued ones are cancelled
        self._clock.closed = True
        self._metrics.close()
        if self._watcher is not None:
            self._watcher.stop()  # releases the lease: another process takes over
        if self._follower is not None:
            self._follower.stop()
        self._index.close()  # writes the L0 snapshot if anything changed since the last one
        self._calls.recorder.close(5)
        self._vectors.close()
        self._metadata.dispose()


class _WriteClock:
    """Each write's version (the summaries' key) and whether the knowledge base was closed; shared by `as_user`."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)  # next() is atomic: concurrent writes never share a number
        self.writes = 0
        self.closed = False

    def tick(self) -> None:
        self.writes = next(self._counter)


def _p(progress: Progress | None) -> dict:
    return {} if progress is None else {"progress": progress}
