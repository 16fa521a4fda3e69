"""What each store holds and where they disagree: the status every console page shows in its sidebar, the
metrics' store gauges and `kb status`. Read through the stores' cheap counts (chunk totals first; the ids in
Milvus only when the totals disagree), kept in the knowledge base's `SummaryCache` like the catalogue."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb_core.errors import KnowledgeBaseError
from kb_core.storage.embedding import ModelState

if TYPE_CHECKING:
    from kb_core.ops.summaries import SummaryCache
    from kb_core.services.catalogue import Catalogue
    from kb_core.services.parts import Parts

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


class StatusService:
    def __init__(self, parts: Parts, catalogue: Catalogue, summaries: SummaryCache, *, base_path: str,
                 closed: Callable[[], bool]):
        self._parts = parts
        self._catalogue = catalogue
        self._summaries = summaries
        self._base_path = base_path
        self._closed = closed
        self._refreshing = threading.Lock()  # one background refresh at a time (metrics scrapes)

    def status(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        """Cached until a write of this process or a change from the feed (or `max_age` seconds; 5 s while a
        store is failing, to show its recovery soon). The model's state is read fresh: it changes while the
        model loads."""
        computed: list[bool] = []

        def read() -> KnowledgeBaseStatus:
            computed.append(True)
            return self._read(max_age)

        status = self._summaries.get("status", read, max_age=max_age)
        if (status.database_error or status.milvus_error) and not computed:
            # a cached status of a failing store; never a second read in one call: with a frozen store, each
            # read waits the backend timeout (and one that ran while a change came in is stale at once)
            status = self._summaries.get("status", read, max_age=min(5.0, max_age or 5.0))
        return dataclasses.replace(status, model=self._parts.embedder.state,
                                   dense_search=self._parts.searcher.dense_active())

    def _read(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        parts = self._parts
        metadata, vectors, watcher = parts.metadata, parts.vectors, parts.watcher
        database_error = milvus_error = None
        try:
            db_count: int | None = metadata.count_documents()
        except KnowledgeBaseError as exc:
            db_count, database_error = None, str(exc)
        l0_outside = None
        try:
            if db_count is not None:
                stored = metadata.document_paths()
                l0_outside = sum(1 for entry in parts.index.entries() if entry.file_path not in stored)
        except KnowledgeBaseError as exc:
            database_error = str(exc)
        db_chunks = milvus_chunks = None
        try:
            db_chunks = metadata.count_chunks() if db_count is not None else None
        except KnowledgeBaseError as exc:
            database_error = str(exc)
        try:
            # Compare chunk totals (two cheap counts) and list the document ids in Milvus (a scan of every
            # chunk) only when the totals disagree.
            milvus_chunks = vectors.count_chunks()
            chunks_agree = db_chunks is not None and milvus_chunks == db_chunks
            milvus_count: int | None = db_count if chunks_agree else len(vectors.document_ids())
        except KnowledgeBaseError as exc:
            milvus_count, milvus_error = None, str(exc)
        documents, refused = self._catalogue.scan(max_age)
        return KnowledgeBaseStatus(
            counts=StoreCounts(len(parts.index), len(documents), db_count, milvus_count, db_chunks, milvus_chunks,
                               l0_outside, len(refused)),
            database_url=metadata.url,
            database_error=database_error,
            milvus_uri=vectors.uri,
            milvus_collection=vectors.collection,
            milvus_error=milvus_error,
            model=parts.embedder.state,
            dense_search=parts.searcher.dense_active(),
            base_path=self._base_path,
            watching=None if watcher is None else watcher.is_watching,
            watch_failed=watcher.last_report.failed if watcher and watcher.last_report else (),
            folder_problem=parts.folder.empty_warning(len(documents) + len(refused)),
        )

    def for_metrics(self) -> KnowledgeBaseStatus | None:
        """The status last computed, never computed here: a scrape must stay cheap. A stale or missing one is
        refreshed on a background thread, so the next scrape shows it."""
        cached = self._summaries.peek("status")
        if (cached is None or not cached[1]) and not self._closed() and self._refreshing.acquire(False):
            def refresh() -> None:
                try:
                    self.status()
                except Exception as exc:  # noqa: BLE001 - the status shows store errors; anything else is logged
                    log.info("status for the metrics not refreshed: %s", exc)
                finally:
                    self._refreshing.release()

            threading.Thread(target=refresh, name="kb-metrics-status", daemon=True).start()
        return cached[0] if cached is not None else None
