"""`KnowledgeBase`: the one object the console, the tests and agent code hold."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kb_core.documents import DeleteOutcome, DocumentService, Progress, ReindexReport, SyncReport, UploadOutcome
from kb_core.embedding import FlagEmbedder, ModelState
from kb_core.errors import KnowledgeBaseError
from kb_core.keyword_index import KnowledgeIndex
from kb_core.lookup import HybridLookup, LookupResult
from kb_core.metadata_store import DocumentRecord, MetadataStore
from kb_core.settings import Settings
from kb_core.vector_store import ChunkRow, MilvusVectorStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreCounts:
    l0: int
    database: int | None
    milvus: int | None

    @property
    def consistent(self) -> bool:
        return self.database is not None and self.database == self.milvus


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
    files_on_disk: int

    @property
    def l1_mode(self) -> str:
        if self.dense_search:
            return "hybrid (dense + BM25)"
        if self.model.state == "loading":
            return "full text (BM25) while the model loads"
        return "full text (BM25) only"


class KnowledgeBase:
    def __init__(
        self,
        settings: Settings,
        index: KnowledgeIndex,
        metadata: MetadataStore,
        vectors: MilvusVectorStore,
        embedder: FlagEmbedder,
        documents: DocumentService,
        lookup: HybridLookup,
        searcher,
    ):
        self.settings = settings
        self.index = index
        self.metadata = metadata
        self.vectors = vectors
        self.embedder = embedder
        self._documents = documents
        self._lookup = lookup
        self._searcher = searcher

    # -- queries -------------------------------------------------------------------------------------
    def lookup(self, query: str, section_title: str | None = None) -> LookupResult:
        return self._lookup.lookup(query, section_title)

    def documents(self) -> list[DocumentRecord]:
        return self.metadata.list_documents()

    def get(self, doc_id: int) -> DocumentRecord | None:
        return self.metadata.get(doc_id)

    def chunks(self, doc_id: int) -> list[ChunkRow]:
        """The chunks of a document as stored in Milvus."""
        return self.vectors.chunks_of(doc_id)

    # -- changes -------------------------------------------------------------------------------------
    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress | None = None) -> UploadOutcome:
        return self._documents.upload(file_name, data, category, **_p(progress))

    def delete(self, doc_id: int) -> DeleteOutcome:
        return self._documents.delete(doc_id)

    def reindex(self, doc_id: int, *, progress: Progress | None = None) -> DocumentRecord:
        return self._documents.reindex(doc_id, **_p(progress))

    def reindex_all(self, *, progress: Progress | None = None) -> ReindexReport:
        return self._documents.reindex_all(**_p(progress))

    def sync(self, *, progress: Progress | None = None) -> SyncReport:
        return self._documents.sync(**_p(progress))

    # -- status --------------------------------------------------------------------------------------
    def status(self) -> KnowledgeBaseStatus:
        database_error = milvus_error = None
        try:
            db_count: int | None = self.metadata.count_documents()
        except KnowledgeBaseError as exc:
            db_count, database_error = None, str(exc)
        try:
            milvus_count: int | None = len(self.vectors.document_ids())
        except KnowledgeBaseError as exc:
            milvus_count, milvus_error = None, str(exc)
        return KnowledgeBaseStatus(
            counts=StoreCounts(len(self.index), db_count, milvus_count),
            database_url=self.metadata.url,
            database_error=database_error,
            milvus_uri=self.vectors.uri,
            milvus_collection=self.vectors.collection,
            milvus_error=milvus_error,
            model=self.embedder.state,
            dense_search=self._searcher.dense_active(),
            base_path=self.settings.base_path,
            files_on_disk=len(self.index.markdown_files()),
        )

    def close(self) -> None:
        self.vectors.close()
        self.metadata.dispose()


def _p(progress: Progress | None) -> dict:
    return {} if progress is None else {"progress": progress}
