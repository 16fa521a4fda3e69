"""The ports the services depend on: what they need of the metadata store, the chunk store and the
embedder, as `Protocol`s, plus the chunk values that cross the boundary.

`DocumentService`, `VectorSearcher` and `KnowledgeBase` are typed against these, never against
`MetadataStore`, `MilvusVectorStore` or `FlagEmbedder`, so a test double (or another backend) only has to
provide these methods. The composition root (`kb_core.bootstrap`) is the one place that names the adapters.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kb_core.progress import Progress

if TYPE_CHECKING:
    from datetime import datetime

    from kb_core.storage.db_models import DocumentStatus
    from kb_core.storage.evaluation_store import QuerySetInfo, StoredOutcome, StoredQuery, StoredRun
    from kb_core.storage.metadata_store import DocumentRecord, DocumentValues, ToolCallRecord
    from kb_core.storage.query_history import QueryHistoryRecord

Vector = list[float]


@dataclass(frozen=True)
class ModelState:
    state: str  # "loading" | "ready" | "unavailable"
    model_id: str
    detail: str = ""
    load_seconds: float | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True)
class ChunkRow:
    """One chunk as stored in the vector store: its text, where it comes from, and its dense vector."""

    doc_id: int
    source: str
    category: str
    chunk_no: int
    heading: str
    text: str
    dense: list[float] | None = None

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}:{self.chunk_no}"


@dataclass(frozen=True)
class ScoredChunk:
    row: ChunkRow
    score: float  # BM25: higher is better (Lite's negative distances are flipped); dense: cosine


@runtime_checkable
class MetadataRepository(Protocol):
    """Document rows, the tool-call log and the query history (SQL: `MetadataStore`)."""

    @property
    def url(self) -> str: ...

    def save_document(self, values: DocumentValues, doc_id: int | None = None, *,
                      pending: tuple[str, str] | None = None) -> int: ...

    def save_new_documents(self, values: Sequence[DocumentValues], *, pending: tuple[str, str]) -> list[int]: ...

    def finish_writes(self, done: Sequence[tuple[int, str | None]]) -> None: ...

    def delete_documents(self, doc_ids: Sequence[int]) -> None: ...

    def set_pending(self, doc_id: int, operation: str, owner: str) -> None: ...

    def finish_write(self, doc_id: int, status: DocumentStatus = ..., last_error: str | None = None) -> None: ...

    def pending_documents(self) -> list[DocumentRecord]: ...

    def document_lock(self, file_path: str, timeout: float = 60.0) -> AbstractContextManager[None]: ...

    def latest_change_id(self) -> int: ...

    def changes_since(self, after_id: int, limit: int = 1000) -> tuple[list[Any], bool]: ...


    def get(self, doc_id: int) -> DocumentRecord | None: ...

    def get_by_path(self, file_path: str) -> DocumentRecord | None: ...

    def list_documents(self) -> list[DocumentRecord]: ...

    def document_paths(self) -> set[str]: ...

    def document_ids_and_paths(self) -> list[tuple[int, str]]: ...

    def paths_with_content(self, digests: list[str]) -> dict[str, list[str]]: ...

    def count_documents(self) -> int: ...

    def count_chunks(self) -> int: ...

    def set_status(self, doc_id: int, status: DocumentStatus, last_error: str | None) -> None: ...

    def delete_document(self, doc_id: int) -> bool: ...

    def record_tool_call(self, **fields: Any) -> Any: ...

    def record_tool_calls(self, records: Sequence[Any], *, dropped: int = 0, reason: str = "") -> int: ...

    def tool_calls_dropped(self, since: datetime) -> int: ...

    def recent_tool_calls(self, limit: int = 200) -> list[ToolCallRecord]: ...

    def tool_call_buckets(self, since: datetime, bucket: str = "hour") -> list[Any]: ...

    def tool_calls_needing_attention(self, since: datetime, limit: int = 5000) -> list[ToolCallRecord]: ...

    def record_query(self, *, actor: str, query: str, section_title: str | None, options: dict[str, Any],
                     found: bool, answer: str, latency_ms: float) -> int: ...

    def query_history(self, actor: str, limit: int = 20) -> list[QueryHistoryRecord]: ...

    def put_labelled_queries(self, set_name: str, queries: Sequence[StoredQuery], actor: str) -> int: ...

    def delete_labelled_query(self, set_name: str, query: str) -> bool: ...

    def query_sets(self) -> list[QuerySetInfo]: ...

    def labelled_queries(self, set_name: str) -> list[StoredQuery]: ...

    def store_evaluation_run(self, *, set_name: str, job_id: int | None, actor: str, settings: dict[str, Any],
                             metrics: dict[str, Any], outcomes: Sequence[StoredOutcome]) -> int: ...

    def evaluation_runs(self, limit: int = 100) -> list[StoredRun]: ...

    def evaluation_run(self, run_id: int) -> StoredRun | None: ...

    def dispose(self) -> None: ...


@runtime_checkable
class ChunkStore(Protocol):
    """Chunks with full text and (optionally) dense vectors (Milvus: `MilvusVectorStore`)."""

    @property
    def uri(self) -> str: ...

    @property
    def collection(self) -> str: ...

    @property
    def has_dense(self) -> bool: ...

    @property
    def dense_dim(self) -> int | None: ...

    def upsert(self, rows: Sequence[ChunkRow]) -> None: ...

    def delete_document(self, doc_id: int) -> None: ...

    def delete_chunks_from(self, doc_id: int, first_chunk_no: int) -> None: ...

    def chunks_of(self, doc_id: int, *, with_vectors: bool = False) -> list[ChunkRow]: ...

    def document_ids(self) -> set[int]: ...

    def chunk_keys(self) -> list[tuple[int, int]]: ...

    def count_chunks(self) -> int: ...

    def search_bm25(self, query: str, *, limit: int, category: str | None = None,
                    doc_ids: Collection[int] | None = None) -> list[ScoredChunk]:
        """`doc_ids`: only chunks of these documents (None: any; the test bench's category and language
        filters)."""
        ...

    def search_dense(self, vector: Vector, *, limit: int, category: str | None = None,
                     doc_ids: Collection[int] | None = None) -> list[ScoredChunk]: ...

    def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int] | None:
        """Chunks holding each term and the chunk count (how rare a query's terms are); None: not known."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Embedder(Protocol):
    """Text -> dense vectors (FlagEmbedding: `FlagEmbedder`). `state` says whether it can encode yet."""

    @property
    def model_id(self) -> str: ...

    @property
    def state(self) -> ModelState: ...

    def encode_queries(self, texts: Sequence[str]) -> list[Vector]: ...

    def encode_documents(self, texts: Sequence[str], progress: Progress | None = None) -> list[Vector]: ...
