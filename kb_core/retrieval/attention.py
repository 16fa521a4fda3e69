"""The fix a "needs attention" query offers: the documents L1 finds for it, best first, so a curator can open
the right one or give it the query as a keyword (`KnowledgeBase.prepare_keyword_addition`).

It runs L1 alone (the same search and relevance check `lookup_knowledge` uses, no L0 first) and is not a tool
call: nothing is logged, so looking at a query never counts it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kb_core.retrieval.lookup import L1Searcher

MAX_EXCERPT = 300  # characters of the best chunk shown with a suggestion


@dataclass(frozen=True)
class DocumentSuggestion:
    """A document L1 finds for a query: where (`file_path`, the `heading` of its best chunk), how well (`score`,
    the fused L1 score; `retrievers` that found it) and what (`title`, an `excerpt` of the chunk)."""

    file_path: str
    title: str
    heading: str
    score: float
    excerpt: str
    retrievers: tuple[str, ...] = ()


def suggest_documents(searcher: L1Searcher, query: str, limit: int, title_of: Callable[[str], str],
                      in_language: Callable[[str], bool] | None = None) -> list[DocumentSuggestion]:
    """Up to `limit` documents for `query`, L1's best first (a document's best chunk stands for it).
    `in_language(file_path)`: whether a document is in the query's language; those come first, in L1's order
    (an English question should be fixed on the English page, however well its Chinese translation scored:
    both hold the same identifiers)."""
    text = query.strip() if isinstance(query, str) else ""
    if not text or limit < 1:
        return []
    found: dict[str, DocumentSuggestion] = {}
    for hit in searcher.search(text, top_k=max(limit * 3, 5)):  # more than `limit`: the language may reorder
        if hit.source in found:
            continue
        excerpt = " ".join(hit.content.split())
        found[hit.source] = DocumentSuggestion(
            hit.source, title_of(hit.source), hit.heading, hit.score,
            excerpt[:MAX_EXCERPT] + ("…" if len(excerpt) > MAX_EXCERPT else ""), tuple(hit.retrievers))
    ranked = list(found.values())
    if in_language is not None:
        ranked.sort(key=lambda suggestion: not in_language(suggestion.file_path))  # stable: L1's order within
    return ranked[:limit]
