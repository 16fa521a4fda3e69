"""L1: BM25 full text + dense vectors over the Milvus chunks, fused with reciprocal-rank fusion.

The two searches run separately and are fused here (RRF, k=60) rather than with Milvus' `hybrid_search`,
so every hit knows which retrievers found it — the console's "why" panel shows it. Then:

- Relevance, not mere nearness: a hit needs at least half of the query's content terms (question words and
  filler such as "如何", "有关", "what", "explain" do not count), and at least `min_weighted_coverage` of
  them weighted by rarity (BM25's idf over the chunks, when the full-text engine knows it), so that words
  found on every page ("做", "plugin") cannot carry an off-topic question; or, for a dense-only hit, a
  cosine of at least the model's `min_dense_score` (`DenseTuning`). With a dense model, a question whose
  best cosine over the scope is below the model's `min_topic_score` is about nothing here: word overlap
  alone does not answer it. An identifier in the query (`key_claim_name`, `E73011`, `proxy-rewrite`) counts
  only where it occurs whole, and a hit must contain at least one of the query's identifiers: a code that
  occurs nowhere finds nothing (the spec's "完全不存在的内容XYZ", content that exists nowhere → found: false).
- Titles: a query equal to a document's title, or containing all of its content words, ranks that
  document first.
- Body, not metadata: when the best chunk of a document is its frontmatter chunk (title, summary, keywords
  restated for search), the hit carries that document's best body chunk instead.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kb_core import terms as text_analysis
from kb_core.documents.chunking import FRONTMATTER_HEADING
from kb_core.errors import KnowledgeBaseError
from kb_core.retrieval.lookup import L1Hit
from kb_core.storage.embedding_builtin import BUILTIN_MODEL
from kb_core.storage.ports import ChunkRow, ChunkStore, Embedder
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

RRF_K = 60
IDENTIFIER_POOL = 300  # BM25 candidates of the second look for a query's identifiers (see `_search`)
RETRIEVERS = ("bm25", "dense")  # L1's retrievers, fused


@dataclass(frozen=True)
class DenseTuning:
    """How one model's cosines enter L1 (cosines are not comparable across models).

    `dense_weight`: its share in the fusion (RRF) next to BM25's 1. `min_dense_score`: the cosine a hit that
    BM25 did not find needs. `min_topic_score`: below this best cosine over the whole scope a question is
    about nothing here, and BM25's word overlap alone does not answer it (a code or one name still does);
    None: no such check."""

    dense_weight: float = 1.0
    min_dense_score: float = 0.4
    min_topic_score: float | None = None


# Measured on the dev set (docs/quality.md, `python -m benchmarks.devset`). The built-in encoder reorders
# derived questions for the worse at any weight from 0.02 up (body sentences -1 to -7 points), so BM25 keeps
# the order; its cosine answers "is this about anything here?" (off-topic 85 -> 97.5 % not found, nothing
# lowered) and finds what shares no word with the question (another language, other words). BGE-M3 keeps
# the weights it was designed with: it was never measured here.
TUNINGS = {BUILTIN_MODEL: DenseTuning(dense_weight=0.0, min_dense_score=0.6, min_topic_score=0.25)}


def tuning_for(model_id: str, min_dense_score: float | None = None) -> DenseTuning:
    """The model's tuning; `min_dense_score` (KB_MIN_DENSE_SCORE) overrides its own."""
    tuning = TUNINGS.get(model_id, DenseTuning())
    return tuning if min_dense_score is None else dataclasses.replace(tuning, min_dense_score=min_dense_score)


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
        min_weighted_coverage: float = 0.4,
        tuning: DenseTuning | None = None,
        dense_complete: Callable[[], bool] | None = None,
        candidates: int = 20,
    ):
        self._store = store
        self._embedder = embedder
        self._min_coverage = min_coverage
        self._min_weighted = min_weighted_coverage
        self.tuning = tuning or DenseTuning()
        # Whether every document has this model's vectors: while some wait for theirs (placeholders during a
        # re-embedding), a low best cosine says nothing. None: assume they all have.
        self._dense_complete = dense_complete
        self._candidates = candidates

    def dense_active(self) -> bool:
        """Dense search runs only when the collection has vectors and the model has finished loading."""
        return bool(self._store.has_dense and self._embedder is not None and self._embedder.state.ready)

    def search(self, query: str, top_k: int = 3, category: str | None = None,
               doc_ids: Collection[int] | None = None) -> list[L1Hit]:
        """The relevant passages; `doc_ids`: searched only within these documents (a caller's scope)."""
        return self._search(query, top_k, category, doc_ids=doc_ids)

    def search_with(self, query: str, *, top_k: int, retrievers: Collection[str] = RETRIEVERS,
                    doc_ids: Collection[int] | None = None,
                    keep: Callable[[L1Hit], bool] | None = None) -> list[L1Hit]:
        """The test bench's L1: `search` with only the named `retrievers` ("bm25", "dense"; dense runs only
        when `dense_active()`), only chunks of the documents `doc_ids` (None: any), and only hits that `keep`
        accepts (a minimum score) counted toward `top_k`. The relevance check is the same."""
        return self._search(query, top_k, None, retrievers=retrievers, doc_ids=doc_ids, keep=keep)

    def _search(self, query: str, top_k: int, category: str | None, *, retrievers: Collection[str] = RETRIEVERS,
                doc_ids: Collection[int] | None = None, keep: Callable[[L1Hit], bool] | None = None,
                pool: int | None = None) -> list[L1Hit]:
        if not query or not query.strip():
            return []
        limit = max(pool or self._candidates, top_k)
        scope = {} if doc_ids is None else {"doc_ids": doc_ids}  # stores without the filter keep working
        fused: dict[str, _Candidate] = {}
        bm25_hits = self._store.search_bm25(query, limit=limit, category=category, **scope) \
            if "bm25" in retrievers else []
        for rank, hit in enumerate(bm25_hits):
            cand = fused.setdefault(hit.row.chunk_id, _Candidate(hit.row))
            cand.bm25 = hit.score
            cand.rrf += 1.0 / (RRF_K + rank + 1)
        off_topic = False
        if "dense" in retrievers and self.dense_active():
            vector = self._embedder.encode_queries([query])[0]  # type: ignore[union-attr]
            dense_hits = self._store.search_dense(vector, limit=limit, category=category, **scope)
            for rank, hit in enumerate(dense_hits):
                cand = fused.setdefault(hit.row.chunk_id, _Candidate(hit.row))
                cand.dense = hit.score
                cand.rrf += self.tuning.dense_weight / (RRF_K + rank + 1)
            # Nothing in scope is near the question in meaning: words it shares with a page ("capital" in a
            # JSON example, "rings") are coincidence, not an answer.
            best = max((h.score for h in dense_hits), default=-1.0)
            off_topic = self.tuning.min_topic_score is not None and best < self.tuning.min_topic_score
            off_topic = off_topic and (self._dense_complete is None or self._dense_complete())

        analysed = text_analysis.analyse_query(query)
        query_terms, whole, required = list(analysed.terms), analysed.whole, analysed.required
        # a code, an API name or one hyphenated term is evidence of its own: meaning says little about a name
        off_topic = off_topic and not required and not _one_name(query)
        weights = self._weights(query_terms, whole)
        total_weight = sum(weights.values())
        title_rank = _TitleMatcher(query, query_terms)
        # a title ranks up the page BM25 found, not one that is merely near in meaning (its title's words may be
        # the question's without the page being about it)
        ranked = sorted(fused.values(), key=lambda c: (title_rank(c.row) if c.bm25 is not None else 0, c.rrf),
                        reverse=True)
        hits: list[L1Hit] = []
        used: set[str] = set()
        for cand in ranked:
            if cand.row.chunk_id in used:
                continue
            title_match = title_rank(cand.row) == 2
            share, _matched = text_analysis.coverage(query_terms, cand.row.text, whole)
            identifier_share = text_analysis.coverage(required, cand.row.text, whole)[0] if required else 1.0
            has_identifier = identifier_share > 0
            # every identifier of the query, found whole, is evidence enough ("admin_key_required 设置成 false")
            weighted = sum(weights[t] for t in _matched) / total_weight if total_weight else share
            lexical = cand.bm25 is not None and (
                (share >= self._min_coverage and weighted >= self._min_weighted and not off_topic)
                or (required and identifier_share == 1))
            semantic = cand.dense is not None and cand.dense >= self.tuning.min_dense_score
            if not (title_match or (has_identifier and (lexical or semantic))):
                continue
            row = self._body_of(cand.row, ranked, used) if _is_frontmatter(cand.row) else cand.row
            found_by = tuple(name for name, score in (("dense", cand.dense), ("bm25", cand.bm25))
                             if score is not None)
            scores = tuple((name, round(score, 4)) for name, score in (("dense", cand.dense), ("bm25", cand.bm25))
                           if score is not None)
            hit = L1Hit(content=row.text, source=row.source, score=round(cand.rrf, 6), retrievers=found_by,
                        retriever_scores=scores, heading=row.heading, chunk_id=row.chunk_id, doc_id=row.doc_id)
            if keep is not None and not keep(hit):
                continue
            used.update((cand.row.chunk_id, row.chunk_id))
            hits.append(hit)
            if len(hits) >= top_k:
                break
        log.debug("L1 %r: %d candidates, %d relevant (terms %s)", query, len(fused), len(hits), query_terms)
        if not hits and required and pool is None and "bm25" in retrievers:
            # An identifier's parts are common words ("is_default": is, default): the chunks that hold it whole
            # can rank 40th-140th by BM25 (measured on the dev set). Look deeper once, only for such a query.
            # BM25 alone: meaning says little about a name, and 300 dense neighbours cost a round trip each
            return self._search(query, top_k, category, retrievers=("bm25",), doc_ids=doc_ids, keep=keep,
                                pool=IDENTIFIER_POOL)
        return hits

    def _weights(self, query_terms: list[str], whole: frozenset[str]) -> dict[str, float]:
        """Each content term's weight: BM25's idf over the chunks (a term on every page weighs little, one on
        none weighs most); identifiers weigh most. Equal weights when the engine cannot say."""
        try:
            stats = self._store.document_frequencies([t for t in query_terms if t not in whole])
        except KnowledgeBaseError as exc:
            log.warning("term statistics unavailable, weighting the query's terms equally: %s", exc)
            stats = None
        if stats is None:
            return dict.fromkeys(query_terms, 1.0)
        counts, total = stats
        return {t: _idf(0 if t in whole else counts.get(t, 0), total) for t in query_terms}

    def _body_of(self, meta: ChunkRow, ranked: list[_Candidate], used: set[str]) -> ChunkRow:
        """The document's best-ranked body chunk among the candidates, else its first body chunk."""
        for cand in ranked:
            if cand.row.doc_id == meta.doc_id and not _is_frontmatter(cand.row) and cand.row.chunk_id not in used:
                return cand.row
        try:
            body = [c for c in self._store.chunks_of(meta.doc_id) if not _is_frontmatter(c)]
        except KnowledgeBaseError as exc:
            log.warning("cannot read the body of document %d, answering with its metadata: %s", meta.doc_id, exc)
            return meta
        return body[0] if body else meta


def _one_name(query: str) -> bool:
    stripped = query.strip()
    return stripped.isascii() and not any(c.isspace() for c in stripped)


def _idf(df: int, total: int) -> float:
    """BM25's idf (always positive)."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def _is_frontmatter(row: ChunkRow) -> bool:
    return row.heading == FRONTMATTER_HEADING


class _TitleMatcher:
    """2: the query is the document's title; 1: the query holds every content word of the title; 0: neither.

    Only frontmatter chunks carry the title (their first line), so only they are ranked up; a document's
    body chunk then stands in for it (`_body_of`)."""

    def __init__(self, query: str, query_terms: list[str]):
        self._query = normalize_term(query)
        self._terms = set(query_terms)
        self._cache: dict[str, int] = {}

    def __call__(self, row: ChunkRow) -> int:
        if not _is_frontmatter(row):
            return 0
        found = self._cache.get(row.chunk_id)
        if found is None:
            title = row.text.split("\n", 1)[0]  # header_text's first line; empty for a document without a title
            if not title.strip():
                found = 0
            elif normalize_term(title) == self._query:
                found = 2
            else:
                title_terms = text_analysis.content_terms(title)
                found = 1 if title_terms and self._terms.issuperset(title_terms) else 0
            self._cache[row.chunk_id] = found
        return found
