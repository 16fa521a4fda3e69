"""`KnowledgeBase`: the one object the console, the tests and agent code hold."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kb_core.access import Actor, Role, acting, service_actor
from kb_core.agent.call_stats import REPLAY_CALLER, AttentionGroup, CallBucket, bucket_for, needs_attention
from kb_core.agent.tool import (
    READ_TOOL_NAME,
    TOOL_NAME,
    TOOL_NAMES,
    CallRecorder,
    LookupTool,
    ReadDocumentTool,
    ToolResponse,
    check_query_length,
    error_payload,
)
from kb_core.documents.batch import BatchFile, BatchPreview, preview_batch
from kb_core.documents.document_edit import (
    current_keywords,
)
from kb_core.documents.entry import KnowledgeEntry
from kb_core.documents.folder import KnowledgeFolder
from kb_core.documents.folder_watcher import FolderWatcher
from kb_core.documents.language import document_language
from kb_core.documents.lint import UploadPreview, preview_upload
from kb_core.documents.path_rule import categories_below, category_folders
from kb_core.documents.reconcile import Reconciler, ReconcileReport
from kb_core.documents.service import DeleteOutcome, DocumentService, ReindexReport, UploadOutcome
from kb_core.documents.trash import Trash, TrashItem, purge_age_days
from kb_core.errors import AccessDeniedError, InvalidInputError, KnowledgeBaseError, SettingsError
from kb_core.evaluation.runs import OutcomeRow, RunComparison
from kb_core.evaluation.scoring import LabelledQuery
from kb_core.evaluation.service import EvaluationService
from kb_core.facade_editing import EditingFacade
from kb_core.facade_jobs import JobsFacade
from kb_core.jobs.kinds import JobRequest, PreparedJob
from kb_core.jobs.kinds import prepare as prepare_job
from kb_core.jobs.model import JobFile, JobKind, JobRecord
from kb_core.jobs.runner import JobRunner
from kb_core.ops.about import About, Part, package_versions
from kb_core.ops.logs import log_context, new_request_id
from kb_core.ops.metrics import KnowledgeBaseMetrics
from kb_core.ops.summaries import SummaryCache
from kb_core.progress import Progress
from kb_core.retrieval.bench import (
    BenchOptions,
    BenchRun,
    HistoryEntry,
    Retriever,
    agent_filters,
    bench_rows,
    history_entry,
)
from kb_core.retrieval.change_follower import ChangeFollower
from kb_core.retrieval.keyword_index import KnowledgeIndex
from kb_core.retrieval.keyword_map import KeywordHit, KeywordMap, keyword_hits, keyword_map
from kb_core.retrieval.keyword_plan import KeywordPlan
from kb_core.retrieval.l1_search import VectorSearcher
from kb_core.retrieval.lookup import HybridLookup, LookupResult
from kb_core.retrieval.reading import DocumentReader
from kb_core.retrieval.scope import ALL, AudienceRule, Scope
from kb_core.settings import Settings
from kb_core.storage.embedding import ModelState
from kb_core.storage.evaluation_store import QuerySetInfo, StoredRun
from kb_core.storage.metadata_store import DocumentRecord, ToolCallRecord
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder, MetadataRepository

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreCounts:
    l0: int  # documents with valid frontmatter (only those can be in L0)
    files: int  # .md files under the knowledge base
    database: int | None  # None when the database could not be read
    milvus: int | None  # documents with vectors; None when Milvus could not be read
    database_chunks: int | None = None  # the chunks the rows say they have
    milvus_chunks: int | None = None  # the chunks Milvus holds
    l0_not_in_database: int | None = None  # L0 documents without a database row
    refused: int = 0  # .md files the path rule does not take (reconcile lists them with the reason)

    @property
    def consistent(self) -> bool:
        return (self.database is not None and self.files == self.database == self.milvus
                and self.database_chunks == self.milvus_chunks and not self.l0_not_in_database)

    @property
    def problems(self) -> list[str]:
        found = []
        if self.database is not None and self.files > self.database:
            found.append(f"{self.files} files on disk but {self.database} in the database: run Reconcile")
        elif self.database is not None and self.files < self.database:
            found.append(f"{self.database - self.files} documents in the database have no file on disk: run "
                         "Reconcile with 'remove documents whose file is gone'")
        if self.database is not None and self.milvus is not None and self.milvus != self.database:
            found.append(f"{self.database} documents in the database but {self.milvus} in Milvus: run Reconcile")
        elif (self.database_chunks is not None and self.milvus_chunks is not None
              and self.database_chunks != self.milvus_chunks):
            found.append(f"Milvus holds {self.milvus_chunks} chunks against {self.database_chunks} in the "
                         "database: run Reconcile")
        unindexed = max(0, self.files - (self.database or 0))
        if self.l0_not_in_database and self.l0_not_in_database > unindexed:  # more than files not indexed yet
            found.append(f"L0 holds {self.l0_not_in_database} documents the database does not: run Reconcile")
        return found


@dataclass(frozen=True)
class KnowledgeBaseStatus:
    counts: StoreCounts
    database_url: str
    database_error: str | None
    milvus_uri: str
    milvus_collection: str
    milvus_error: str | None
    model: ModelState
    dense_search: bool
    base_path: str
    watching: bool | None = None  # None: KB_WATCH is off; else whether this process is the folder's watcher
    watch_failed: tuple[tuple[str, str], ...] = ()  # files the watcher's last sync could not index, and why
    folder_problem: str | None = None  # the knowledge base folder is missing or empty (`KnowledgeFolder.empty_warning`)

    @property
    def problems(self) -> list[str]:
        """What is wrong, worst first: a folder without documents, then the stores' disagreements."""
        return ([self.folder_problem] if self.folder_problem else []) + self.counts.problems

    @property
    def l1_mode(self) -> str:
        if self.dense_search:
            return "L1 is hybrid: dense vectors + BM25 full text"
        if self.model.state == "loading":
            return "L1 runs on full text (BM25) while the model loads"
        return "L1 runs on full text only (BM25)"


class KnowledgeBase(EditingFacade, JobsFacade):
    """The facade: everything the console, the tools and agent code do goes through its methods. Its stores
    are its own; `open_knowledge_base()` (the composition root) builds it."""

    def __init__(
        self,
        settings: Settings,
        *,
        folder: KnowledgeFolder,
        index: KnowledgeIndex,
        metadata: MetadataRepository,
        vectors: ChunkStore,
        embedder: Embedder,
        documents: DocumentService,
        reconciler: Reconciler,
        trash: Trash,
        lookup: HybridLookup,
        searcher: VectorSearcher,
        follower: ChangeFollower | None = None,
        watcher: FolderWatcher | None = None,
        metrics: KnowledgeBaseMetrics | None = None,
        jobs: JobRunner | None = None,
    ):
        self._settings = settings
        try:
            self._audience_rule = AudienceRule.of_mapping(settings.audiences)
        except InvalidInputError as exc:
            raise SettingsError(f"auth.audiences (KB_AUDIENCES): {exc}") from None
        self._folder = folder
        self._index = index
        self._metadata = metadata
        self._vectors = vectors
        self._embedder = embedder
        self._documents = documents
        self._reconciler = reconciler
        self._trash = trash
        self._lookup = lookup
        self._searcher = searcher
        self._follower = follower
        self._watcher = watcher
        self._jobs = jobs
        self._recorder = CallRecorder(metadata)
        self._evaluation = EvaluationService(metadata, lookup, self._runner)
        self._tools = {TOOL_NAME: LookupTool(lookup, self._recorder),
                       READ_TOOL_NAME: ReadDocumentTool(DocumentReader(index), self._recorder)}
        self._clock = _WriteClock()  # shared with every `as_user` view of this knowledge base
        self._actor = service_actor(settings.service_identity)
        if settings.service_audiences is not None:  # in-process agents limited to some audiences' pages
            self._actor = dataclasses.replace(self._actor, audiences=frozenset(settings.service_audiences))
        self._summaries = SummaryCache(self._version)
        self._metrics = metrics or KnowledgeBaseMetrics()
        self._metrics.watch_state(self._status_for_metrics, follower)
        self._status_refresh = threading.Lock()  # one background status refresh at a time (metrics scrapes)

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

    # -- queries -------------------------------------------------------------------------------------
    def lookup(self, query: str, section_title: str | None = None, scope: Scope | None = None) -> LookupResult:
        """L0, then L1 when needed (`HybridLookup`). A query longer than the tool's limit (`MAX_QUERY_CHARS`,
        2,000 characters) is refused with `InvalidInputError` before anything reads it (`check_query_length`).
        `scope` (`kb_core.retrieval.scope.Scope`): only the pages it admits exist for this lookup."""
        check_query_length(query)
        result = self._lookup.lookup(query, section_title, scope)
        self._metrics.observe_lookup(result)
        return result

    def lookup_knowledge(self, query: str, section_title: str | None = None, *, category: str | None = None,
                         language: str | None = None, caller: str | None = None,
                         scope: Scope | None = None) -> dict:
        """The agent tool: exactly the spec's JSON (plus `error` for refused arguments). Logged to `tool_call`.
        `category` (a folder, with its sub-folders) and `language` narrow the question; `scope`: what the
        caller may read (default: every page)."""
        arguments = {"query": query, "section_title": section_title}
        arguments.update({k: v for k, v in (("category", category), ("language", language)) if v is not None})
        return self.call_tool(arguments, caller=caller, scope=scope).payload

    def read_document_tool(self, source: str, section_title: str | None = None, *, language: str | None = None,
                           caller: str | None = None, scope: Scope | None = None) -> dict:
        """The `read_document` agent tool: the document at `source` (a source from an answer, or
        `category/file.md`) served like a lookup's primary, or its section `section_title`; an `error` result for
        a source that is no indexed document (or one `scope` does not admit). `language`: the page's version in
        that language. Logged to `tool_call`. (`read_document` is the raw file text.)"""
        arguments = {"source": source, "section_title": section_title}
        if language is not None:
            arguments["language"] = language
        return self.call_tool(arguments, caller=caller, tool=READ_TOOL_NAME, scope=scope).payload

    def call_tool(self, arguments: object, *, caller: str | None = None, tool: str = TOOL_NAME,
                  scope: Scope | None = None) -> ToolResponse:
        """A tool (`lookup_knowledge` by default, or `read_document`) with raw arguments, returning the payload
        *and* the result (a lookup's has the trace: the playground's view). An unknown `tool` name gives an
        error result (not logged), as an agent that made one up should read. `caller` (the call log's and the
        metrics'): default the acting identity's name."""
        handler = self._tools.get(tool) if isinstance(tool, str) else None
        caller = caller or self._actor.name[:64]  # the service identity in process, the user in the console
        if handler is None:
            error = f"unknown tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}"
            return ToolResponse(error_payload(error), None, error, 0.0)
        # the request id every log line of this call carries, and the one the call log and the trace show
        with log_context(request_id=new_request_id(), caller=caller):
            response = handler.call(arguments, caller=caller, scope=scope or self._actor_scope())
            if isinstance(response.result, LookupResult):
                self._metrics.observe_lookup(response.result)
            self._metrics.observe_tool_call(tool, found=bool(response.payload.get("found")), error=response.error,
                                            caller=caller)
            log.log(logging.INFO if response.error else logging.DEBUG, "%s: %s in %.1f ms", tool,
                    response.error or ("found" if response.payload.get("found") else "not found"),
                    response.latency_ms, extra={"timings_ms": {"total": response.latency_ms}})
        return response

    def tool_calls(self, limit: int = 500) -> list[ToolCallRecord]:
        """The most recent tool calls (`lookup_knowledge` and `read_document`), newest first; for a viewer
        limited to some audiences, only calls whose sources it may read (another caller's answer names pages)."""
        self._recorder.flush(2)
        calls = self._metadata.recent_tool_calls(limit)
        scope = self._actor_scope()
        if scope.everything:
            return calls
        return [c for c in calls if all(self._may_read_source(s, scope) for s in c.sources)]

    def _may_read_source(self, source: str, scope: Scope) -> bool:
        entry = self._index.get(source)
        return entry is not None and scope.may_read(entry.category, entry.audience)

    def flush_call_log(self, timeout: float = 10.0) -> bool:
        """Wait until every call so far is in the log (or `timeout` seconds); whether they all are."""
        return self._recorder.flush(timeout)

    def tool_calls_not_logged(self, span: timedelta) -> int:
        """Calls of the last `span` the log could not store (counted instead: `tool_call_dropped`), plus those
        this process counted and has not stored yet. 0 is the normal case."""
        self._recorder.flush(2)
        return self._metadata.tool_calls_dropped(datetime.now(UTC) - span) + self._recorder.waiting_drops

    def tool_call_buckets(self, span: timedelta) -> list[CallBucket]:
        """Calls, found-rate and latency per hour (spans up to two days) or day over the last `span`."""
        self._recorder.flush(2)
        return self._metadata.tool_call_buckets(datetime.now(UTC) - span, bucket_for(span))

    def needs_attention(self, span: timedelta) -> list[AttentionGroup]:
        """Queries of the last `span` answered with nothing, with L1 only or with low confidence, grouped."""
        self._recorder.flush(2)
        return needs_attention(self._metadata.tool_calls_needing_attention(datetime.now(UTC) - span))

    # -- the test bench -------------------------------------------------------------------------------
    def run_bench(self, query: str, options: BenchOptions | None = None, *, section_title: str | None = None,
                  replay: bool = False) -> BenchRun:
        """A playground test run: the exact `lookup_knowledge` call an agent makes (its payload untouched, logged
        with the acting user's name as caller; `replay=True`, a run from a link or the history, is logged as
        `console-replay` and never counted as needing attention), and beside it L1's rows under `options` (see
        `BenchOptions`). Recorded in the acting user's history (`query_history`). Options that cannot run here
        (dense only without a model, a category nobody uses) raise `InvalidInputError` before anything runs."""
        options = BenchOptions() if options is None else options
        if not isinstance(options, BenchOptions):
            raise InvalidInputError(f"options must be BenchOptions, got {type(options).__name__}")
        if options.retriever is Retriever.DENSE and not self._searcher.dense_active():
            state = self._embedder.state
            raise InvalidInputError(f"dense only needs the embedding model, which is {state.state} "
                                    f"({state.model_id}): choose L1 hybrid or BM25 only")
        doc_ids = self._bench_scope(options)
        # one category and one language are what an agent can ask for too: the agent's call carries them
        arguments = {"query": query, "section_title": section_title, **agent_filters(options)}
        response = self.call_tool(arguments, caller=REPLAY_CALLER if replay else self._actor.name[:64])
        result = response.result if isinstance(response.result, LookupResult) else None
        languages = self._document_languages()
        run = BenchRun(query=query, section_title=section_title, options=options, payload=response.payload,
                       arguments=arguments,
                       result=result, error=response.error, latency_ms=response.latency_ms,
                       searched=None if doc_ids is None else len(doc_ids), replay=replay,
                       **bench_rows(self._searcher, query, options, result, doc_ids,
                                    lambda source: languages.get(source, "und")))
        if isinstance(query, str) and query.strip():
            try:
                self._metadata.record_query(
                    actor=self._actor.name, query=query, section_title=section_title, options=options.to_dict(),
                    found=bool(response.payload.get("found")), latency_ms=response.latency_ms,
                    answer="error" if response.error else " + ".join(result.match_types) if result else "")
            except KnowledgeBaseError as exc:  # the run happened: show it, and say the history missed it
                log.warning("the playground run was not added to the history: %s", exc)
                run = dataclasses.replace(run, history_error=str(exc))
        return run

    def query_history(self, limit: int = 20) -> list[HistoryEntry]:
        """The acting user's playground runs (`run_bench`), newest first; each user sees only their own."""
        return [history_entry(r) for r in self._metadata.query_history(self._actor.name, limit)]

    def languages(self) -> list[str]:
        """The languages of the indexed documents (`en`, `zh`, ..., `und`): the test bench's choices."""
        return sorted(set(self._document_languages().values()))

    def _bench_scope(self, options: BenchOptions) -> frozenset[int] | None:
        """The ids of the documents the options' category and language filters leave (None: no filter)."""
        if not options.filtered:
            return None
        records = self.documents()
        if options.categories:
            known = set(category_folders(self.categories()))
            unknown = [c for c in options.categories if c not in known]
            if unknown:
                raise InvalidInputError(f"there is no category {unknown[0]!r} in the knowledge base (nor a "
                                        "category below it)")
            below = categories_below({r.category for r in records}, options.categories)
            records = [r for r in records if r.category in below]
        if options.languages:
            languages = self._document_languages()
            records = [r for r in records if languages.get(r.file_path, "und") in options.languages]
        return frozenset(r.id for r in records)

    def document_languages(self) -> dict[str, str]:
        """Each indexed document's language by its path (`en`, `zh`, ..., `und`), also for a document without
        frontmatter (from its path and text): the Documents page's column and filter."""
        return self._document_languages()

    def _document_languages(self) -> dict[str, str]:
        """Each indexed document's language: L0's, or for a document L0 does not hold (no frontmatter) the same
        rule applied to its path and text. Cached like the other summaries."""
        return dict(self._summaries.get("languages", self._read_languages))

    def _read_languages(self) -> tuple[tuple[str, str], ...]:
        found = []
        for record in self.documents():
            entry = self._index.get(record.file_path)
            if entry is not None:
                found.append((record.file_path, entry.lang))
                continue
            relative = self._folder.relative_path(record.file_path) or f"{record.category}/{record.file_name}"
            text = (self._folder.read_text(record.file_path, 4000) or "") if self._folder.exists(record.file_path) \
                else ""
            found.append((record.file_path, document_language(relative, record.frontmatter, text)))
        return tuple(found)

    def documents(self) -> list[DocumentRecord]:
        return list(self._summaries.get("documents", lambda: tuple(self._metadata.list_documents())))

    def unindexed_files(self) -> list[str]:
        """Markdown files on disk without a database row: what a sync would add (the first run's prompt)."""
        return list(self._summaries.get("unindexed", self._read_unindexed))

    def _read_unindexed(self) -> tuple[str, ...]:
        stored = {d.file_path for d in self.documents()}
        on_disk = (self._folder.display_path(rel) for rel in self._scan()[0])
        return tuple(path for path in on_disk if path not in stored)

    def _scan(self, max_age: float | None = None) -> tuple[list[str], list[tuple[str, str]]]:
        """The folder's documents and refused files: one walk serves the status and the unindexed files."""
        return self._summaries.get("scan", self._folder.scan, max_age=max_age)

    def get(self, doc_id: int) -> DocumentRecord | None:
        return self._metadata.get(doc_id)

    def chunks(self, doc_id: int) -> list[ChunkRow]:
        """The chunks of a document as stored in Milvus."""
        return self._vectors.chunks_of(doc_id)

    def keyword_summary(self) -> KeywordMap:
        """The keyword map with L0's own predictions: clashes, overlaps, generic and weak keywords."""
        return keyword_map(self._index.snapshot)

    def keyword_documents(self, keyword: str, limit: int = 200) -> list[KeywordHit]:
        """The documents a query of just `keyword` returns from L0, ranked, with the keywords that matched."""
        return keyword_hits(self._index.snapshot, keyword, limit)

    def document_keywords(self, file_path: str) -> tuple[str, ...]:
        """The keywords a document's frontmatter lists on disk, as written."""
        return current_keywords(self._index, file_path, max_bytes=self._settings.max_upload_bytes)

    def warm_summaries(self) -> None:
        """Compute the cached summaries a console shows first (for a background thread after opening)."""
        try:
            self.status()
            self.documents()
            self.missing_files()
            self.categories()
            self.unindexed_files()
            self._document_languages()  # the playground's language choices
        except Exception as exc:  # noqa: BLE001 - a warm-up only saves time; the pages report errors when they ask
            log.info("summaries not warmed up: %s", exc)

    def missing_files(self) -> list[DocumentRecord]:
        """Documents whose file has gone from disk (a stat per document: cached like the other summaries)."""
        return list(self._summaries.get("missing", lambda: tuple(
            r for r in self.documents() if r.pending_operation is None and not self._folder.exists(r.file_path))))

    def categories(self) -> list[str]:
        """Categories in use: folders under the knowledge base and categories of stored documents."""
        return list(self._summaries.get("categories", self._read_categories))

    def _read_categories(self) -> tuple[str, ...]:
        folders = self._folder.categories()
        try:
            stored = {r.category for r in self.documents()}
        except KnowledgeBaseError:
            stored = set()
        return tuple(sorted(folders | stored))

    def read_document(self, file_path: str, max_chars: int = 1_000_000) -> str | None:
        """The raw text of a document's file (cut at `max_chars`); the agents' tool is `read_document_tool`."""
        return self._folder.read_text(file_path, max_chars)

    def l0_entry(self, file_path: str) -> KnowledgeEntry | None:
        """What L0 holds for a document (keywords it matches and ignores, sections), or `None`."""
        return self._index.get(file_path)

    def language_versions(self, file_path: str) -> tuple[KnowledgeEntry, ...]:
        """The versions of a document's page in every language L0 holds (itself included; empty: not in L0)."""
        return self._index.versions(file_path)

    def document_path(self, path: str) -> str | None:
        """The path a document is stored under (`knowledge_base/api/x.md`, as `DocumentRecord.file_path`) for
        that path or one relative to the knowledge base (`api/x.md`, what a `?doc=` link carries); `None` for
        what cannot be a path under the knowledge base. Reads nothing."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            return None
        text = path.strip()
        relative = self._folder.relative_of(text)
        if relative is None and not text.startswith("/"):
            relative = text
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            return None
        return self._folder.display_path(relative)

    def relative_path(self, file_path: str) -> str | None:
        """`api/x.md` for `knowledge_base/api/x.md`; `None` outside the knowledge base."""
        return self._folder.relative_path(file_path)

    def prepare_suggestions(self) -> None:
        """Build "did you mean" now, keywords and the identifiers of the pages' text (normally built in the
        background after an opening or a change): an evaluation run measures what a warm process answers."""
        self._lookup.prepare_suggestions()

    def wait_for_model(self, timeout: float | None = None) -> ModelState:
        """Wait until the embedding model has loaded or failed (a no-op without a model); its state."""
        if self._embedder.available:
            return self._embedder.wait_ready(timeout)
        return self._embedder.state

    def preview_upload(self, file_name: str, data: bytes, category: str) -> UploadPreview:
        return preview_upload(self._index, file_name, data, category, max_bytes=self._settings.max_upload_bytes)

    def preview_batch(self, files: Sequence[BatchFile], category: str, *,
                      duplicates_anyway: bool = False) -> BatchPreview:
        """The upload preview of a whole batch: per-file verdicts plus same-target files, keyword clashes within
        the batch and content already indexed elsewhere (skipped as `DUPLICATE` unless `duplicates_anyway`);
        writes nothing."""
        return preview_batch(self._index, files, category, max_bytes=self._settings.max_upload_bytes,
                             paths_with_content=self._metadata.paths_with_content, duplicates_anyway=duplicates_anyway)

    # -- changes -------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress | None = None,
               if_match: str | None = None, create_only: bool = False) -> UploadOutcome:
        """`if_match`: the sha256 of the version this replaces (`DocumentRecord.content_sha256`, or what the
        upload preview showed); another current version, or none, raises `DocumentConflictError`, writing nothing.
        `create_only=True`: the document must not exist yet (a file at that path, indexed or not, raises
        `DocumentConflictError`, writing nothing): what to send for a file a preview showed as new."""
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
        """The deleted documents waiting in the trash, newest first (an item whose record is missing or broken is
        listed with what is known: `TrashItem.problem`)."""
        return self._trash.items()

    def restore(self, item: TrashItem | str, *, replace: bool = False,
                progress: Progress | None = None) -> UploadOutcome:
        """Bring a document back from the trash byte for byte, through the upload (validation, every store, the
        change feed), and take it out of the trash. `item`: a `TrashItem`, its `item_id`, or a document path
        (`knowledge_base/api/x.md` or `api/x.md`: its newest item). A file at that path again raises
        `RestoreConflictError` (a `DocumentConflictError`), writing nothing, unless `replace=True`. Curators only."""
        with self._writing(Role.CURATOR, "restore documents", "restore"):
            return self._documents.restore(self._trash_item(item), replace=replace, **_p(progress))

    def purge_trash(self, older_than_days: float | None = None, *, items: Iterable[TrashItem | str] | None = None,
                    progress: Progress | None = None) -> list[TrashItem]:
        """Remove for good the items deleted at least `older_than_days` ago (default `KB_TRASH_DAYS`; opening the
        knowledge base does this once in the background), or exactly `items` (`TrashItem`s or item ids, any
        age). The items removed. Curators only."""
        self._actor.require(Role.CURATOR, "purge the trash")
        days = purge_age_days(older_than_days, self._settings.trash_days)
        chosen = None if items is None else [self._trash_item(item) for item in items]
        with self._writing(Role.CURATOR, "purge the trash", "purge"):
            return self._trash.purge(timedelta(days=days), items=chosen, **_p(progress))

    def _trash_item(self, item: TrashItem | str) -> TrashItem:
        """The item as it is in the trash now, from an item, its id or a document path (its newest item)."""
        key = item.item_id if isinstance(item, TrashItem) else item
        if not isinstance(key, str):
            raise InvalidInputError(f"expected a trash item, its id or a document path, not {item!r}")
        found = self._trash.find(key) if "/" in key else self._trash.get(key)
        if found is None:
            shown = key if len(key) <= 120 else f"{key[:60]}…({len(key)} characters)"
            raise InvalidInputError(f"{shown!r} is not in the trash: no item has that id or document path "
                                    "(restored or purged already?); nothing was done")
        return found

    def reindex(self, doc_id: int, *, progress: Progress | None = None) -> DocumentRecord:
        with self._writing(Role.ADMIN, "re-index documents", "reindex"):
            return self._documents.reindex(doc_id, **_p(progress))

    def reindex_all(self, *, progress: Progress | None = None) -> ReindexReport:
        with self._writing(Role.ADMIN, "re-index documents", "reindex_all"):
            return self._documents.reindex_all(**_p(progress))

    def reconcile(self, paths: Iterable[str | os.PathLike[str]] | None = None, *, delete_missing: bool = False,
                  progress: Progress | None = None) -> ReconcileReport:
        """Bring disk, database, Milvus and L0 into agreement: files added or changed by hand are indexed,
        interrupted writes finished or undone, stray and missing vectors fixed, and rows whose file has gone
        reported (removed with `delete_missing`). `paths` (files or folders) limits it to those."""
        with self._writing(Role.ADMIN, "reconcile the knowledge base", "reconcile"):
            return self._reconciler.reconcile(paths, delete_missing=delete_missing, **_p(progress))

    # -- jobs ----------------------------------------------------------------------------------------
    def start_job(self, kind: str, *, delete_missing: bool = False,
                  paths: Iterable[str | os.PathLike[str]] | None = None, files: Sequence[JobFile] = (),
                  notes: Sequence[dict] = (), plan: KeywordPlan | None = None,
                  older_than_days: float | None = None) -> JobRecord:
        """Start long work as a job of this process and return at once (queued; see `jobs()`): `"reconcile"`
        (`delete_missing`, `paths` as for `reconcile`) and `"reindex_all"` need the admin role; `"upload"` (a
        batch of `files`) and `"import"` (a folder's files) need a curator. The files' bytes are staged under the
        application root, so the job needs nothing of its caller; each goes through `upload` as it would one by
        one. `notes` are result rows the caller decided without uploading (shown with the job's result).
        `"keyword_plan"` applies a `plan` (curator; see `apply_keyword_plan`), `"purge_trash"` purges what was
        deleted `older_than_days` ago (default `KB_TRASH_DAYS`; curator). One heavy job runs at a time per
        knowledge base, across processes; the others wait, queued."""
        job = self._prepare_job(kind, JobRequest(delete_missing, paths, files, notes, plan, older_than_days))
        try:
            return self._runner().submit(job.kind, self._actor, job.params, job.work, total=job.total,
                                         staging=job.staging)
        except BaseException:
            self._runner().staging.remove(job.staging)
            raise

    def run_job(self, kind: str, *, delete_missing: bool = False,
                paths: Iterable[str | os.PathLike[str]] | None = None, files: Sequence[JobFile] = (),
                progress: Progress | None = None) -> JobRecord:
        """As `start_job`, but run in the calling thread (in its turn) and return the job as it ended: the `kb`
        command runs reconcile this way, and the console shows it like any other job."""
        job = self._prepare_job(kind, JobRequest(delete_missing, paths, files))
        try:
            return self._runner().run_here(job.kind, self._actor, job.params, job.work, total=job.total,
                                           progress=progress)
        finally:
            self._runner().staging.remove(job.staging)

    def jobs(self, limit: int = 20, kinds: Iterable[str] | None = None) -> list[JobRecord]:
        """The newest jobs of every process (of `kinds`, or all), newest first, running and queued ones among
        them; without their parameters and results (`job(id)` has those)."""
        return self._runner().store.recent(limit, None if kinds is None else list(kinds))

    def job(self, job_id: int) -> JobRecord | None:
        """One job with everything: its parameters and its result (an upload's per-file outcomes)."""
        return self._runner().store.get(job_id)

    def may_cancel_job(self, job: JobRecord) -> bool:
        """Whether this actor may cancel `job` (its starter, or an admin), and it can still be cancelled."""
        return job.active and (job.actor == self._actor.name or self._actor.may(Role.ADMIN))

    def wait_for_job(self, job_id: int, timeout: float | None = None) -> JobRecord | None:
        """The job once it has ended, or as it is after `timeout` seconds."""
        return self._runner().wait(job_id, timeout)

    def cancel_job(self, job_id: int) -> JobRecord:
        """Cancel a job: a queued one at once, a running one at its next document (what it wrote stays; the rest
        is untouched). Its starter or an admin may."""
        job = self.job(job_id)
        if job is None:
            raise InvalidInputError(f"there is no job {job_id}")
        if job.active and not self.may_cancel_job(job):
            raise AccessDeniedError(f"{self._actor.name} ({self._actor.role.label}) may not cancel job {job_id} of "
                                    f"{job.actor}: only its starter or an admin")
        return self._runner().cancel(job_id) or job

    def _runner(self) -> JobRunner:
        if self._jobs is None:
            raise KnowledgeBaseError("this knowledge base has no job runner")
        return self._jobs

    def _prepare_job(self, kind: str, request: JobRequest) -> PreparedJob:
        """Check the actor and the arguments, and prepare the job (`kb_core.jobs.kinds`, the one registry of
        job kinds)."""
        return prepare_job(kind, self, self._actor, request, self._runner, closed=self._clock.closed)

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

    # -- evaluation (kb_core.evaluation.service) ------------------------------------------------------
    def query_sets(self) -> list[QuerySetInfo]:
        """The stored labelled query sets (name, how many queries, when last changed), by name."""
        return self._evaluation.query_sets()

    def query_set(self, name: str) -> list[LabelledQuery]:
        """A set's labelled queries, in the order they were added."""
        return self._evaluation.query_set(name)

    def import_query_set(self, name: str, data: bytes | str) -> int:
        """Add the labelled queries of a JSONL file (the format `kb evaluate` reads) to the set `name`, created
        by its first query; a query already in the set gets the file's label. Malformed lines are refused with
        their line numbers (`InvalidInputError`) and nothing is stored. How many queries the file had."""
        self._actor.require(Role.CURATOR, "import labelled queries")
        return self._evaluation.import_query_set(name, data, actor=self._actor.name)

    def label_query(self, set_name: str, query: str, expected: Iterable[str], *, kind: str = "labelled") -> None:
        """Store `query` in the set `set_name` (created by its first query) with the documents that answer it
        (`category/file.md` paths, as answers name them; none: the knowledge base has no answer, and the query
        must come back not found), replacing its label if it was in the set."""
        self._actor.require(Role.CURATOR, "label queries")
        self._evaluation.label_query(set_name, query, expected, kind=kind, actor=self._actor.name)

    def unlabel_query(self, set_name: str, query: str) -> bool:
        """Remove a query from a set; whether it was there."""
        self._actor.require(Role.CURATOR, "remove labelled queries")
        return self._evaluation.unlabel_query(set_name, query)

    def start_evaluation(self, set_name: str) -> JobRecord:
        """Run every query of the set through `lookup` and score the answers, as `kb evaluate` does, as an
        `evaluate` job (returns at once, queued; curator). The run is stored when the job ends: its settings (L0
        rule, L1 mode, model), each kind's metrics and each query's answer (`evaluation_runs()`). It takes its turn
        like every job (one at a time per knowledge base), so it never measures a half-done re-index."""
        self._actor.require(JobKind.EVALUATE.role, "start an evaluation run")
        return self._evaluation.start(set_name, self._actor, self)

    def evaluation_runs(self, limit: int = 100) -> list[StoredRun]:
        """The stored runs, newest first (without each query's outcome: `evaluation_run(id)` has them)."""
        return self._evaluation.runs(limit)

    def evaluation_run(self, run_id: int) -> StoredRun | None:
        return self._evaluation.run(run_id)

    def evaluation_outcomes(self, run_id: int) -> list[OutcomeRow]:
        """A run's answer to each of its queries, the wrong ones first (`VERDICTS`' order), in the run's order
        within a verdict."""
        return self._evaluation.outcomes(run_id)

    def compare_evaluation_runs(self, before: int, after: int) -> RunComparison:
        """Two runs side by side: the queries whose answer changed, and the headline metrics of each."""
        return self._evaluation.compare(before, after)

    # -- status --------------------------------------------------------------------------------------
    def status(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        """What each store holds. Every page render shows it, so the counts are cached until a write of this
        process or a change from the feed (or `max_age` seconds; 5 s while a store is failing, to show its
        recovery soon). The model's state is read fresh: it changes while the model loads."""
        computed: list[bool] = []

        def read() -> KnowledgeBaseStatus:
            computed.append(True)
            return self._read_status(max_age)

        status = self._summaries.get("status", read, max_age=max_age)
        if (status.database_error or status.milvus_error) and not computed:
            # a cached status of a failing store; never a second read in one call: with a frozen store, each
            # read waits the backend timeout (and one that ran while a change came in is stale at once)
            status = self._summaries.get("status", read, max_age=min(5.0, max_age or 5.0))
        return dataclasses.replace(status, model=self._embedder.state, dense_search=self._searcher.dense_active())

    def _read_status(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        database_error = milvus_error = None
        try:
            db_count: int | None = self._metadata.count_documents()
        except KnowledgeBaseError as exc:
            db_count, database_error = None, str(exc)
        l0_outside = None
        try:
            if db_count is not None:
                stored = self._metadata.document_paths()
                l0_outside = sum(1 for entry in self._index.entries() if entry.file_path not in stored)
        except KnowledgeBaseError as exc:
            database_error = str(exc)
        db_chunks = milvus_chunks = None
        try:
            db_chunks = self._metadata.count_chunks() if db_count is not None else None
        except KnowledgeBaseError as exc:
            database_error = str(exc)
        try:
            # Compare chunk totals (two cheap counts) and list the document ids in Milvus (a scan of every
            # chunk) only when the totals disagree.
            milvus_chunks = self._vectors.count_chunks()
            chunks_agree = db_chunks is not None and milvus_chunks == db_chunks
            milvus_count: int | None = db_count if chunks_agree else len(self._vectors.document_ids())
        except KnowledgeBaseError as exc:
            milvus_count, milvus_error = None, str(exc)
        documents, refused = self._scan(max_age)
        return KnowledgeBaseStatus(
            counts=StoreCounts(len(self._index), len(documents), db_count, milvus_count, db_chunks, milvus_chunks,
                               l0_outside, len(refused)),
            database_url=self._metadata.url,
            database_error=database_error,
            milvus_uri=self._vectors.uri,
            milvus_collection=self._vectors.collection,
            milvus_error=milvus_error,
            model=self._embedder.state,
            dense_search=self._searcher.dense_active(),
            base_path=self._settings.base_path,
            watching=None if self._watcher is None else self._watcher.is_watching,
            watch_failed=self._watcher.last_report.failed if self._watcher and self._watcher.last_report else (),
            folder_problem=self._folder.empty_warning(len(documents) + len(refused)),
        )

    def about(self) -> About:
        """The versions of the parts this console runs on (packages, the database and Milvus servers) and the
        effective settings with secrets masked: the Settings page, and what to paste into a bug report. Admins
        only: the settings name the database and Milvus addresses."""
        self._actor.require(Role.ADMIN, "read the settings")
        servers = []
        for name, ask in (("database", self._metadata.server_version), ("milvus", self._vectors.server_version)):
            try:
                servers.append(Part(name, ask()))
            except KnowledgeBaseError as exc:
                servers.append(Part(name, f"unavailable: {exc}"))
            except Exception as exc:  # noqa: BLE001 - a driver's own error: say it, the page still shows the rest
                servers.append(Part(name, f"unavailable: {type(exc).__name__}: {exc}"))
        return About(package_versions() + tuple(servers), tuple(self._settings.described()))

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
        """This knowledge base's Prometheus registry (docs/operations.md#metrics): serve it, or read it with
        `prometheus_client.generate_latest(kb.metrics_registry)`."""
        return self._metrics.registry

    def serve_metrics(self, port: int, host: str = "127.0.0.1") -> bool:
        """Serve the metrics on `host:port` until `close()` (what `KB_METRICS_PORT` does at open); False when
        the port is taken."""
        return self._metrics.serve(port, host)

    def _status_for_metrics(self) -> KnowledgeBaseStatus | None:
        """The status last computed, never computed here: a scrape must stay cheap. A stale or missing one is
        refreshed on a background thread, so the next scrape shows it."""
        cached = self._summaries.peek("status")
        if (cached is None or not cached[1]) and not self._clock.closed and self._status_refresh.acquire(False):
            def refresh() -> None:
                try:
                    self.status()
                except Exception as exc:  # noqa: BLE001 - the status shows store errors; anything else is logged
                    log.info("status for the metrics not refreshed: %s", exc)
                finally:
                    self._status_refresh.release()

            threading.Thread(target=refresh, name="kb-metrics-status", daemon=True).start()
        return cached[0] if cached is not None else None

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
        self._recorder.close(5)
        self._vectors.close()
        self._metadata.dispose()


class _WriteClock:
    """Moved before and after each write (the version the summaries are keyed on), and whether the knowledge
    base was closed: one per knowledge base, shared by its `as_user` views."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)  # next() is atomic: concurrent writes never share a number
        self.writes = 0
        self.closed = False

    def tick(self) -> None:
        self.writes = next(self._counter)


def _p(progress: Progress | None) -> dict:
    return {} if progress is None else {"progress": progress}
