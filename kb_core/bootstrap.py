"""The composition root: settings -> adapters -> `KnowledgeBase`. The console and agent code call
`open_knowledge_base()`; nothing else builds the adapters."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from kb_core import terms as text_analysis
from kb_core.access import acting, service_actor
from kb_core.agent.tool import error_payload
from kb_core.documents.chunking import CONTENT_VERSION
from kb_core.documents.folder import KnowledgeFolder
from kb_core.documents.folder_watcher import FolderWatcher, paths_changed_while_unwatched
from kb_core.documents.reconcile import Reconciler
from kb_core.documents.service import DocumentService
from kb_core.documents.synonyms import SynonymsFile
from kb_core.documents.trash import Trash
from kb_core.errors import KnowledgeBaseError
from kb_core.jobs.runner import JobRunner
from kb_core.jobs.staging import STAGING_FOLDER, StagingArea
from kb_core.jobs.store import JobStore
from kb_core.keywords.index import KnowledgeIndex
from kb_core.knowledge_base import KnowledgeBase
from kb_core.ops.logs import configure_log_file, log_file_path
from kb_core.ops.metrics import KnowledgeBaseMetrics
from kb_core.retrieval.body_identifiers import BodyIdentifierSuggester
from kb_core.retrieval.change_follower import ChangeFollower
from kb_core.retrieval.l1_search import VectorSearcher, tuning_for
from kb_core.retrieval.lookup import HybridLookup
from kb_core.retrieval.scoped_documents import ScopedDocuments
from kb_core.services.parts import Parts
from kb_core.settings import Settings, load_settings
from kb_core.storage.call_spool import CallSpool, spool_at
from kb_core.storage.embedding import FlagEmbedder
from kb_core.storage.embedding_builtin import (
    BUILTIN_MODEL,
    BuiltinEmbedder,
    builtin_available,
)
from kb_core.storage.fulltext_sqlite import SqliteFullTextIndex, fts5_available
from kb_core.storage.metadata_store import MetadataStore
from kb_core.storage.ports import Embedder
from kb_core.storage.vector_store import MilvusVectorStore, collection_name, is_local_uri

log = logging.getLogger(__name__)

RECOVER_EVERY = 10.0  # seconds between checks for rows left PENDING by writers that died
SYNONYMS_EVERY = 2.0  # seconds between checks of the knowledge base's _synonyms.yaml (a stat call)


def _configured_embedder(settings: Settings) -> Embedder:
    """KB_EMBEDDING_MODEL where it is on this machine; else the built-in model (KB_EMBEDDING_FALLBACK), so that
    a fresh offline install searches by meaning too. Deciding costs a stat and a cache lookup: nothing loads."""
    configured = FlagEmbedder(settings.embedding_model, device=settings.embedding_device,
                              precision=settings.embedding_precision)
    if configured.available or settings.embedding_fallback == "none" or not builtin_available():
        return configured
    log.info("embedding model %s is not on this machine; the built-in %s embeds until it is (kb model pull)",
             settings.embedding_model, BUILTIN_MODEL)
    return BuiltinEmbedder()


def open_knowledge_base(settings: Settings | None = None, *, load_model: bool = True,
                        embedder: Embedder | None = None, one_question: bool = False) -> KnowledgeBase:
    """Open (and migrate) everything. Milvus starts while the rest opens, and the opening waits for it at the
    end; the embedding model loads in the background and the opening never waits for it. `load_model=False`
    leaves the model unloaded until something needs a vector.
    `embedder` replaces the configured model (a benchmark's or a test's own encoder; its `dimension` sizes the
    collection). `one_question`: a process that asks one question and exits (`kb lookup`) starts Milvus only
    if L1's search uses it (dense vectors, or no full-text sidecar); otherwise only a write would."""
    started = time.perf_counter()
    settings = settings or load_settings()
    if settings.log_file:  # first: the lines of the opening itself go there too (idempotent per path)
        configure_log_file(log_file_path(settings.log_file, settings.app_root))
    # the tokenizer's dictionary (~0.25 s) loads while the database and Milvus start, not on the first query
    threading.Thread(target=text_analysis.warm_up, name="kb-jieba", daemon=True).start()
    if embedder is None:
        embedder = _configured_embedder(settings)
    vectors, fulltext, dimension = _start_vectors(settings, embedder, one_question)
    if load_model and embedder.available:
        embedder.start_loading()
    try:
        kb, parts = _assemble(settings, embedder, vectors, fulltext, dimension)
    except BaseException:
        vectors.close()  # what refused to open leaves no Milvus Lite server behind
        raise
    _settle(kb, parts, settings, dense=bool(dimension))
    if not one_question:
        vectors.wait_warm_up()  # open means open: Milvus answers (or its outage is logged) when this returns
    log.info("knowledge base open in %.2f s: %d L0 documents, database %s, Milvus %s (%s), model %s: %s",
             time.perf_counter() - started, len(parts.index), parts.metadata.url, vectors.uri, vectors.collection,
             settings.embedding_model, embedder.state.state)
    return kb


def _start_vectors(settings: Settings, embedder: Embedder,
                   one_question: bool) -> tuple[MilvusVectorStore, SqliteFullTextIndex | None, int | None]:
    """Milvus (and the full-text sidecar) for `embedder`'s collection, warming up in the background: Milvus Lite
    starts (a process of its own) and the model loads while the database, L0 and the rest open."""
    dimension = embedder.dimension if embedder.available else None
    collection = collection_name(embedder.model_id if dimension else None, dimension)
    vectors = MilvusVectorStore(
        settings.resolved_milvus_uri,
        token=settings.milvus_token,
        collection=collection,
        dense_dim=dimension,
        timeout=settings.backend_timeout,
        fulltext=(fulltext := _fulltext_index(settings, collection)),
    )
    if not one_question or dimension or fulltext is None:
        vectors.warm_up_in_background()
    return vectors, fulltext, dimension


def _assemble(settings: Settings, embedder: Embedder, vectors: MilvusVectorStore,
              fulltext: SqliteFullTextIndex | None, dimension: int | None) -> tuple[KnowledgeBase, Parts]:
    """The stores and services, wired: the database, L0 (scanned), L1, the writers and the jobs, the watcher."""
    metrics = KnowledgeBaseMetrics()
    metadata = _migrated_metadata(settings)
    folder, synonyms_file, index, follower = _open_l0(settings, metadata)
    dense_embedder = embedder if dimension else None  # no model, no dense vectors: BM25 only
    searcher = VectorSearcher(vectors, dense_embedder,
                              tuning=tuning_for(embedder.model_id, settings.min_dense_score),
                              dense_complete=_every_document_embedded(metadata, embedder.model_id))
    body_identifiers = None
    if fulltext is not None:  # "did you mean" over the pages' text: needs every chunk's text at hand
        body_identifiers = BodyIdentifierSuggester(fulltext.texts, fulltext.version, _page_description(index))
        body_identifiers.refresh_in_background()
    trash = Trash(settings.trash_dir, folder)
    documents = DocumentService(folder, index, metadata, vectors, dense_embedder, trash=trash,
                                backend_timeout=settings.backend_timeout)
    reconciler = Reconciler(documents, folder, index, metadata, vectors)
    # A writer killed mid-write leaves its row PENDING and sends no change: without this, processes that keep
    # running would miss that document until someone opened the knowledge base anew or reconciled.
    follower.every(RECOVER_EVERY, reconciler.recover_dead_writers)
    follower.every(SYNONYMS_EVERY, index.reload_synonyms)  # a hand edit or another process's save
    jobs = _job_runner(settings, metadata, follower)
    watcher = _folder_watcher(settings, folder, metadata, reconciler, metrics) if settings.watch else None
    lookup = HybridLookup(index, searcher, default_language=settings.default_language,
                          body_suggester=body_identifiers, scope_ids=ScopedDocuments(metadata, index).ids)
    parts = Parts(folder=folder, index=index, metadata=metadata, vectors=vectors, embedder=embedder,
                  documents=documents, reconciler=reconciler, trash=trash, synonyms_file=synonyms_file,
                  lookup=lookup, searcher=searcher, follower=follower, watcher=watcher, metrics=metrics, jobs=jobs)
    kb = KnowledgeBase(settings, parts)
    if settings.metrics_port:
        if settings.metrics_host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("metrics served beyond loopback on %s: anyone who reaches the port reads them",
                        settings.metrics_host)
        metrics.serve(settings.metrics_port, settings.metrics_host)
    return kb, parts


def _migrated_metadata(settings: Settings) -> MetadataStore:
    metadata = MetadataStore(settings.resolved_database_url, timeout=settings.backend_timeout)
    try:
        metadata.migrate()
    except KnowledgeBaseError as exc:
        # Degraded, not dead: L0 needs only the files. Writes and the call log report the outage until the
        # database is back (connections are made anew then); `status()` shows it.
        log.error("the database is not available; L0 answers from the files, writes wait for it: %s", exc)
    return metadata


def _open_l0(settings: Settings,
             metadata: MetadataStore) -> tuple[KnowledgeFolder, SynonymsFile, KnowledgeIndex, ChangeFollower]:
    """The folder, its synonyms file and the L0 index, scanned; the follower of other processes' writes,
    started before the scan."""
    folder = KnowledgeFolder(settings.base_path, app_root=settings.app_root, max_bytes=settings.max_upload_bytes)
    synonyms_file = SynonymsFile(folder.base_dir)
    index = KnowledgeIndex(folder=folder, matching=settings.l0_matching,
                           generic_docs=settings.l0_generic_docs, synonyms=settings.l0_synonyms,
                           snapshot_path=settings.l0_snapshot_path, synonyms_file=synonyms_file)
    follower = ChangeFollower(metadata, index, interval=settings.refresh_interval)
    follower.start_from_now()  # the position before the scan: nothing written meanwhile is missed
    if (empty := folder.empty_warning(index.scan().scanned)) is not None:
        log.warning("%s", empty)
    threading.Thread(target=index.warm_suggester, name="kb-suggester", daemon=True).start()
    return folder, synonyms_file, index, follower


def _job_runner(settings: Settings, metadata: MetadataStore, follower: ChangeFollower) -> JobRunner:
    """Long work as jobs of this process, one heavy job at a time across processes (the "kbjob" lock); jobs of
    processes that died are marked failed here at open and by the follower every RECOVER_EVERY seconds."""
    jobs = JobRunner(JobStore(metadata), lambda: metadata.lock("kbjob", "heavy"),
                     StagingArea(settings.app_root / STAGING_FOLDER), share=settings.job_share)
    follower.every(RECOVER_EVERY, jobs.sweep)
    return jobs


def _folder_watcher(settings: Settings, folder: KnowledgeFolder, metadata: MetadataStore, reconciler: Reconciler,
                    metrics: KnowledgeBaseMetrics) -> FolderWatcher:
    """KB_WATCH: one watcher per database and folder; the lock name does not depend on where this process sits."""
    def reconcile_changed(paths: Iterable[str]) -> Any:
        # recorded as the watcher's change, not an agent's
        with acting(service_actor("watcher")), metrics.timed("watch_sync"):
            return reconciler.reconcile(paths, delete_missing=True)

    return FolderWatcher(folder.base_dir, reconcile_changed, metadata.lease("kbwatch", folder.display_path("")),
                         catch_up=lambda: paths_changed_while_unwatched(folder, metadata))


def _settle(kb: KnowledgeBase, parts: Parts, settings: Settings, *, dense: bool) -> None:
    """What an opening finishes before it returns: interrupted writes, spooled calls, old trash and stale
    vectors (both in the background), dead jobs, then the watcher."""
    metadata, follower, jobs = parts.metadata, parts.follower, parts.jobs
    assert follower is not None and jobs is not None  # `_assemble` builds both
    try:
        parts.reconciler.recover(just_scanned=True)  # finish or undo what a crash left PENDING (only those rows)
    except KnowledgeBaseError as exc:
        log.error("could not check for interrupted writes: %s", exc)
    # calls answered from L0 alone by processes without the database (`kb lookup`) join the call log
    spool = spool_at(settings.app_root)
    follower.every(RECOVER_EVERY, lambda: _move_spooled_calls(spool, metadata))
    _move_spooled_calls(spool, metadata)
    # documents deleted longer than KB_TRASH_DAYS ago leave the trash: once per opening, a purge_trash job (shown
    # in the jobs panel) when the trash holds something to purge; the look at the trash runs in the background
    threading.Thread(target=_purge_old_trash, args=(kb, parts.trash, settings.trash_days), name="kb-trash-purge",
                     daemon=True).start()
    threading.Thread(target=_reindex_what_changed, name="kb-reindex-changed", daemon=True,
                     args=(kb, metadata, dense, parts.documents.profile)).start()
    try:
        jobs.sweep()  # after recovery: a dead job's interrupted write is settled; the job is shown failed
    except KnowledgeBaseError as exc:
        log.error("could not check for jobs of processes that died: %s", exc)
    if parts.watcher is not None:
        parts.watcher.start()  # after recovery: the catch-up sync must not meet this process's own PENDING rows


def parts_of(kb: KnowledgeBase) -> Parts:
    """The parts `kb` was assembled from (its stores, the writer, the searcher, the job runner): for tests and
    tools that check one store itself. Agent code and the console use the facade."""
    return kb._shared.parts  # noqa: SLF001 - the composition root assembled them: it may hand them out


def _move_spooled_calls(spool: CallSpool, metadata: MetadataStore) -> None:
    try:
        spool.move(metadata.record_tool_calls, metadata.known_request_ids)
    except (KnowledgeBaseError, OSError) as exc:  # the database is away: they wait in the spool
        log.warning("spooled tool calls wait for the database: %s", exc)


def _purge_old_trash(kb: KnowledgeBase, trash: Trash, days: int) -> None:
    """Start a `purge_trash` job (as the service identity) if the trash holds anything to purge: an opening with
    nothing to purge records no job."""
    try:
        if trash.due(timedelta(days=days)):
            kb.jobs.start("purge_trash")
    except KnowledgeBaseError as exc:  # closed at once (a short command), or the database is away: next time
        log.info("the trash purge job was not started: %s", exc)
    except Exception as exc:  # noqa: BLE001 - a background chore: logged; the next opening tries again
        log.error("could not purge the trash %s: %s", trash.directory, exc)


def _page_description(index: KnowledgeIndex) -> Callable[[str], tuple[str, str, str] | None]:
    def describe(source: str) -> tuple[str, str, str] | None:
        entry = index.get(source)
        return None if entry is None else (entry.title, entry.lang, entry.group or source)
    return describe


def _every_document_embedded(metadata: MetadataStore, model: str, max_age: float = 5.0) -> Callable[[], bool]:
    """Whether every document has `model`'s vectors, read at most every `max_age` seconds (one COUNT) and only
    when a question looks off-topic; a database outage answers "not sure" (False): no question is refused then."""
    last: list[float | bool] = [-max_age, False]
    lock = threading.Lock()

    def complete() -> bool:
        with lock:
            if time.monotonic() - float(last[0]) >= max_age:
                try:
                    last[1] = metadata.count_indexed_otherwise(model) == 0
                except KnowledgeBaseError:
                    last[1] = False
                last[0] = time.monotonic()
            return bool(last[1])
    return complete


def _reindex_what_changed(kb: KnowledgeBase, metadata: MetadataStore, dense: bool, profile: str) -> None:
    """Documents indexed by another model (or whose dense vectors were left for later) have no chunks - or only
    placeholders - in this model's collection, and documents chunked by an older cleaning (`CONTENT_VERSION`)
    serve what it left in (MDX component lines, say): a reconcile job re-indexes them, full text first for all, then
    the dense vectors (`Reconciler._check_vectors`), while lookups go on. Once the model has loaded: the job
    needs it, and the opening does not wait for it."""
    try:
        # one COUNT each, not every row read at each opening
        stale = metadata.count_indexed_otherwise(profile, CONTENT_VERSION)
        if not stale:
            return
        if dense and not kb.wait_for_model().ready:
            return  # a model that failed to load: its state says so; a reconcile could not embed either
        other_model = metadata.count_indexed_otherwise(profile)
        if other_model:
            log.warning("%d documents were indexed by another model than %s: re-indexing them as a job",
                        other_model, profile)
        if stale > other_model:
            log.warning("%d documents were chunked by an older cleaning (before version %d): re-indexing them as "
                        "a job", stale - other_model, CONTENT_VERSION)
        kb.jobs.start("reconcile")
    except KnowledgeBaseError as exc:  # closed at once (a short command), or the database is away: next time
        log.info("the re-indexing job was not started: %s", exc)
    except Exception as exc:  # noqa: BLE001 - a background chore: logged; the next opening tries again
        log.error("could not start re-indexing after a model or cleaning change: %s", exc)


def _fulltext_index(settings: Settings, collection: str) -> SqliteFullTextIndex | None:
    """SQLite FTS5 beside a Milvus Lite directory (`KB_FULLTEXT=auto`), or `None` for Milvus' own BM25."""
    uri = settings.resolved_milvus_uri
    wanted = settings.fulltext == "sqlite" or (settings.fulltext == "auto" and is_local_uri(uri))
    if not wanted:
        return None
    if not fts5_available():
        log.warning("this Python's SQLite has no FTS5: full-text search stays on Milvus BM25")
        return None
    base = uri[:-3] if uri.endswith(".db") else uri
    path = f"{base}.fulltext-{collection}.sqlite3" if is_local_uri(uri) else \
        str(settings.app_root / f"kb.fulltext-{collection}.sqlite3")
    return SqliteFullTextIndex(path)


_default_lock = threading.Lock()
_default: KnowledgeBase | None = None


def default_knowledge_base() -> KnowledgeBase:
    """The process-wide knowledge base opened from the default settings (env `KB_*`, `kb.yaml`), once."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = open_knowledge_base()
    return _default


def lookup_knowledge(query: str, section_title: str | None = None, *, category: str | None = None,
                     language: str | None = None) -> dict:
    """The agent tool on the default knowledge base: `{found, primary, supplement}` (the spec's shape), narrowed by
    `category` and `language` when given, logged with the service identity (`KB_SERVICE_IDENTITY`) as caller.
    Never raises: bad arguments, or a knowledge base that cannot be opened, return the same
    shape plus an `error` string."""
    return _on_default(lambda kb: kb.lookup_knowledge(query, section_title, category=category, language=language))


def read_document(source: str, section_title: str | None = None) -> dict:
    """The `read_document` agent tool on the default knowledge base: the document at `source` (a source from a
    `lookup_knowledge` answer) served like a primary, or its section `section_title`. Logged with the
    service identity as caller. Never raises: an unknown source, bad arguments, or a knowledge base that cannot
    be opened return the same shape plus an `error` string."""
    return _on_default(lambda kb: kb.read_document_tool(source, section_title))


def _on_default(call: Callable[[KnowledgeBase], dict]) -> dict:
    """A tool call on the default knowledge base; one that cannot be opened gives the answer's shape and an
    `error` string instead of an exception (an agent loop must get a readable answer, not a crash)."""
    try:
        kb = default_knowledge_base()
    except Exception as exc:  # noqa: BLE001 - see above
        log.error("the knowledge base could not be opened: %s", exc)
        return error_payload(f"the knowledge base could not be opened: {exc}")
    return call(kb)
