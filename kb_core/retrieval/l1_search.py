"""L1: BM25 full text + dense vectors over the Milvus chunks, fused with reciprocal-rank fusion.

The two searches run separately and are fused here (RRF, k=60) rather than with Milvus' `hybrid_search`,
so every hit knows which retrievers found it — the console's "why" panel shows it. A hit must also be
relevant, not merely the nearest: it needs at least half of the query's content terms (the lexical
evidence), or, for a dense-only hit, a cosine of at least `min_dense_score`. Without that, "完全不存在的内容XYZ"
would always "find" something (Spec 5.4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kb_core import terms as text_analysis
from kb_core.retrieval.lookup import L1Hit
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder

log = logging.getLogger(__name__)

RRF_K = 60


@dataclass
class _Candidate:
    row: ChunkRow
    rrf: float = 0.0
    bm25: float | None = None
    dense: float | None = None


class VectorSearcher:
    """Implements `L1Searcher` over a `ChunkStore` and an optional `Embedder`."""

    def __init__(
        self,
        store: ChunkStore,
        embedder: Embedder | None,
        *,
        min_coverage: float = 0.5,
        min_dense_score: float = 0.4,
        candidates: int = 10,
    ):
        self._store = store
        self._embedder = embedder
        self._min_coverage = min_coverage
        self._min_dense_score = min_dense_score
        self._candidates = candidates

    def dense_active(self) -> bool:
        """Dense search runs only when the collection has vectors and the model has finished loading."""
        return bool(self._store.has_dense and self._embedder is not None and self._embedder.state.ready)

    def search(self, query: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]:
        if not query or not query.strip():
            return []
        limit = max(self._candidates, top_k)
        fused: dict[str, _Candidate] = {}
        for rank, hit in enumerate(self._store.search_bm25(query, limit=limit, category=category)):
            cand = fused.setdefault(hit.row.chunk_id, _Candidate(hit.row))
            cand.bm25 = hit.score
            cand.rrf += 1.0 / (RRF_K + rank + 1)
        if self.dense_active():
            vector = self._embedder.encode_queries([query])[0]  # type: ignore[union-attr]
            for rank, hit in enumerate(self._store.search_dense(vector, limit=limit, category=category)):
                cand = fused.setdefault(hit.row.chunk_id, _Candidate(hit.row))
                cand.dense = hit.score
                cand.rrf += 1.0 / (RRF_K + rank + 1)

        query_terms = text_analysis.terms(query)
        hits: list[L1Hit] = []
        for cand in sorted(fused.values(), key=lambda c: c.rrf, reverse=True):
            share, _matched = text_analysis.coverage(query_terms, cand.row.text)
            lexical = cand.bm25 is not None and share >= self._min_coverage
            semantic = cand.dense is not None and cand.dense >= self._min_dense_score
            if not (lexical or semantic):
                continue
            retrievers = tuple(name for name, score in (("dense", cand.dense), ("bm25", cand.bm25))
                               if score is not None)
            scores = tuple((name, round(score, 4)) for name, score in (("dense", cand.dense), ("bm25", cand.bm25))
                           if score is not None)
            hits.append(L1Hit(content=cand.row.text, source=cand.row.source, score=round(cand.rrf, 6),
                              retrievers=retrievers, retriever_scores=scores, heading=cand.row.heading,
                              chunk_id=cand.row.chunk_id, doc_id=cand.row.doc_id))
            if len(hits) >= top_k:
                break
        log.debug("L1 %r: %d candidates, %d relevant (terms %s)", query, len(fused), len(hits), query_terms)
        return hits
