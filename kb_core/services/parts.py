"""`Parts`: the stores and services one knowledge base is assembled from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb_core.documents.folder import KnowledgeFolder
    from kb_core.documents.folder_watcher import FolderWatcher
    from kb_core.documents.reconcile import Reconciler
    from kb_core.documents.service import DocumentService
    from kb_core.documents.synonyms import SynonymsFile
    from kb_core.documents.trash import Trash
    from kb_core.jobs.runner import JobRunner
    from kb_core.keywords.index import KnowledgeIndex
    from kb_core.ops.metrics import KnowledgeBaseMetrics
    from kb_core.retrieval.change_follower import ChangeFollower
    from kb_core.retrieval.l1_search import VectorSearcher
    from kb_core.retrieval.lookup import HybridLookup
    from kb_core.storage.ports import ChunkStore, Embedder, MetadataRepository


@dataclass(frozen=True)
class Parts:
    """What `bootstrap` builds and `KnowledgeBase` holds (privately). A test or a tool that checks one store
    itself asks `kb_core.bootstrap.parts_of(kb)` instead of reaching into the facade."""

    folder: KnowledgeFolder  # the files: the source of truth
    index: KnowledgeIndex  # L0
    metadata: MetadataRepository  # the SQL database
    vectors: ChunkStore  # Milvus (and the full-text sidecar)
    embedder: Embedder
    documents: DocumentService  # the writer to every store
    reconciler: Reconciler
    trash: Trash
    synonyms_file: SynonymsFile  # _synonyms.yaml: the index is handed its groups
    lookup: HybridLookup
    searcher: VectorSearcher  # L1
    follower: ChangeFollower | None = None  # other processes' writes
    watcher: FolderWatcher | None = None  # KB_WATCH
    metrics: KnowledgeBaseMetrics | None = None
    jobs: JobRunner | None = None
