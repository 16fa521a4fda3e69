"""The playground's retrieval test bench: L1's rows for a query under options an agent cannot set.

`lookup_knowledge` runs L1 with three rows, both retrievers and no filter, and only when L0 has no unique
answer. A curator testing retrieval wants more: up to 20 rows, one retriever at a time, a category (a folder,
with its sub-folders) or a language, and a minimum score. `TrialOptions` holds those choices (validated on
construction: a bad one raises `InvalidInputError`); `trial_rows` runs them through the very L1 search and
relevance check agents get (`VectorSearcher.search_with`) and says where each row's query terms are
(`terms.term_spans`), so the console can highlight what matched. The agents' lookup itself is never changed:
with `Retriever.AGENT` the rows are the ones the lookup used.

`trial_link_params` / `parse_trial_link` turn a query and its options into URL parameters and back, so a test
is a link.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kb_core.documents.scope import check_categories, check_languages
from kb_core.errors import InvalidInputError
from kb_core.retrieval.l1_search import VectorSearcher
from kb_core.retrieval.lookup import L1_TOP_K, L1Hit, LookupResult
from kb_core.terms import term_spans

__all__ = ["MAX_TOP_K", "MIN_TOP_K", "TrialOptions", "TrialRow", "TrialRun", "HistoryEntry", "Retriever",
           "trial_link_params", "trial_rows", "history_entry", "parse_trial_link"]

MIN_TOP_K, MAX_TOP_K = 1, 20


class Retriever(enum.StrEnum):
    """Which retrieval the test bench runs."""

    AGENT = "agent"  # as agents get it: the lookup's own L1 rows (L0 first; L1 top 3, no filter, maybe not run)
    HYBRID = "hybrid"  # L1: BM25 and dense, fused (dense only once the model is ready)
    BM25 = "bm25"  # L1 with the full-text retriever alone
    DENSE = "dense"  # L1 with the dense retriever alone (needs the embedding model)

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def score_name(self) -> str:
        """What a row's `score` is in this mode (the score a minimum applies to)."""
        return _SCORE_NAMES[self]


_LABELS = {Retriever.AGENT: "As agents get it", Retriever.HYBRID: "L1 hybrid (BM25 + dense)",
           Retriever.BM25: "BM25 only", Retriever.DENSE: "Dense only"}
_SCORE_NAMES = {Retriever.AGENT: "fused score", Retriever.HYBRID: "fused score", Retriever.BM25: "BM25 score",
                Retriever.DENSE: "dense score (cosine)"}


@dataclass(frozen=True)
class TrialOptions:
    """A test run's options. Validated and normalised on construction (`InvalidInputError` says what is wrong):
    `retriever` a `Retriever` or its value; `top_k` L1 rows, 1-20; `categories` folder paths, each taking its
    sub-folders; `languages` language tags (`zh-CN` becomes `zh`; `und` for undetermined); `min_score` the
    least score a row needs, in the retriever's own terms (`Retriever.score_name`), or None.

    `Retriever.AGENT` shows what the agents' lookup did, so it takes none of the others: they need an L1
    retriever."""

    retriever: Retriever = Retriever.AGENT
    top_k: int = L1_TOP_K
    categories: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    min_score: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "retriever", _retriever(self.retriever))
        top_k = self.top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not MIN_TOP_K <= top_k <= MAX_TOP_K:
            raise InvalidInputError(f"top-k must be a whole number from {MIN_TOP_K} to {MAX_TOP_K}, got {top_k!r}")
        object.__setattr__(self, "categories", _categories(self.categories))
        object.__setattr__(self, "languages", _languages(self.languages))
        minimum = self.min_score
        if minimum is not None:
            if isinstance(minimum, bool) or not isinstance(minimum, int | float) or not math.isfinite(minimum) \
                    or minimum < 0:
                raise InvalidInputError(f"the minimum score must be a number of at least 0 (or none), got {minimum!r}")
            object.__setattr__(self, "min_score", float(minimum))
        if self.retriever is Retriever.AGENT:
            extra = [name for name, used in (("top-k", top_k != L1_TOP_K), ("category", self.categories),
                                             ("language", self.languages), ("minimum score", minimum is not None))
                     if used]
            if extra:
                raise InvalidInputError(
                    f"{', '.join(extra)} cannot apply to 'as agents get it', which shows the agents' own lookup "
                    f"(L1 top {L1_TOP_K}, no filter): choose the retriever L1 hybrid, BM25 only or dense only")

    def describe(self) -> str:
        """One line: "BM25 only · top 10 · in api · lang zh · BM25 score ≥ 1.5"."""
        parts = [self.retriever.label]
        if self.retriever is not Retriever.AGENT:
            parts.append(f"top {self.top_k}")
        if self.categories:
            parts.append("in " + ", ".join(self.categories))
        if self.languages:
            parts.append("lang " + ", ".join(self.languages))
        if self.min_score is not None:
            parts.append(f"{self.retriever.score_name} ≥ {self.min_score:g}")
        return " · ".join(parts)

    @property
    def filtered(self) -> bool:
        """Whether only some documents are searched (a category or a language)."""
        return bool(self.categories or self.languages)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the history stores it); `from_dict` reads it back."""
        return {"retriever": self.retriever.value, "top_k": self.top_k, "categories": list(self.categories),
                "languages": list(self.languages), "min_score": self.min_score}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrialOptions:
        return cls(retriever=values.get("retriever", Retriever.AGENT), top_k=values.get("top_k", L1_TOP_K),
                   categories=tuple(values.get("categories") or ()), languages=tuple(values.get("languages") or ()),
                   min_score=values.get("min_score"))


def _retriever(value: object) -> Retriever:
    if isinstance(value, Retriever):
        return value
    try:
        return Retriever(str(value).strip().lower())
    except ValueError:
        raise InvalidInputError(f"unknown retriever {value!r}: use one of "
                                f"{', '.join(r.value for r in Retriever)}") from None


def _categories(values: object) -> tuple[str, ...]:
    return check_categories(values)


def _languages(values: object) -> tuple[str, ...]:
    return check_languages(values)


# -- links -------------------------------------------------------------------------------------------------------
_SINGLE = {"q": "query", "section": "section title", "retriever": "retriever", "k": "top-k",
           "min_score": "minimum score"}


def trial_link_params(query: str, options: TrialOptions | None = None,
                      section_title: str | None = None) -> dict[str, str | list[str]]:
    """URL parameters for a test: `q`, then only what differs from the defaults (`section`, `retriever`, `k`,
    `category` and `lang` repeated, `min_score`), so a plain lookup stays `?q=…`."""
    options = options or TrialOptions()
    params: dict[str, str | list[str]] = {"q": query}
    if section_title:
        params["section"] = section_title
    if options.retriever is not Retriever.AGENT:
        params["retriever"] = options.retriever.value
    if options.top_k != L1_TOP_K:
        params["k"] = str(options.top_k)
    if options.categories:
        params["category"] = list(options.categories)
    if options.languages:
        params["lang"] = list(options.languages)
    if options.min_score is not None:
        params["min_score"] = repr(options.min_score)
    return params


def parse_trial_link(params: Mapping[str, str | Sequence[str]]) -> tuple[str, str | None, TrialOptions]:
    """(query, section title, options) from URL parameters (`trial_link_params`; a repeated key may come as a
    list); unknown keys are ignored. `InvalidInputError` names a value that is not valid."""
    def single(key: str) -> str | None:
        value = params.get(key)
        if value is None or isinstance(value, str):
            return value
        return value[-1] if value else None

    def several(key: str) -> tuple[str, ...]:
        value = params.get(key)
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    top_k: int = L1_TOP_K
    raw_k = single("k")
    if raw_k is not None:
        try:
            top_k = int(raw_k.strip())
        except ValueError:
            raise InvalidInputError(f"top-k (k) must be a whole number from {MIN_TOP_K} to {MAX_TOP_K}, "
                                    f"got {raw_k!r}") from None
    minimum: float | None = None
    raw_min = single("min_score")
    if raw_min is not None and raw_min.strip():
        try:
            minimum = float(raw_min.strip())
        except ValueError:
            raise InvalidInputError(f"the minimum score (min_score) must be a number, got {raw_min!r}") from None
    options = TrialOptions(retriever=single("retriever") or Retriever.AGENT, top_k=top_k,
                           categories=several("category"), languages=several("lang"), min_score=minimum)
    return single("q") or "", single("section") or None, options


# -- runs --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrialRow:
    """One L1 row of a test run."""

    rank: int  # 1-based
    source: str
    heading: str
    content: str  # the chunk's text
    score: float  # in the retriever's own terms (`Retriever.score_name`)
    fused_score: float  # reciprocal-rank fusion of the retrievers that found it
    retrievers: tuple[str, ...]  # which found it: "dense", "bm25"
    retriever_scores: tuple[tuple[str, float], ...]  # each one's own score (BM25 score, dense cosine)
    lang: str
    highlights: tuple[tuple[int, int], ...]  # where the query's terms are in `content` (`terms.term_spans`)


@dataclass(frozen=True)
class TrialRun:
    """A test run: exactly what the agent receives for the query, and the test bench's L1 rows beside it."""

    query: str
    section_title: str | None
    options: TrialOptions
    payload: dict[str, Any]  # the agent's JSON, byte for byte what `lookup_knowledge` returns
    result: LookupResult | None  # the lookup with its trace (None: the tool refused the arguments)
    error: str | None  # the tool's error result, if any
    latency_ms: float  # the tool call's
    rows: tuple[TrialRow, ...]
    note: str  # which rows these are, or why there are none
    searched: int | None = None  # documents in the filters' scope (None: no filter)
    l1_error: str | None = None  # the test bench's L1 search failed
    timings_ms: dict[str, float] = field(default_factory=dict)
    replay: bool = False  # logged with caller `console-replay` (a link or the history ran it again)
    history_error: str | None = None  # the run could not be added to the history
    arguments: dict[str, Any] = field(default_factory=dict)  # the agent call's, as sent (filters included)

    @property
    def score_name(self) -> str:
        return self.options.retriever.score_name


def agent_filters(options: TrialOptions) -> dict[str, str]:
    """The test bench's filters an agent's call can carry too: one category, one language (lookup_knowledge takes
    one of each); with several, the agent's call is unfiltered and only the test bench rows are narrowed."""
    filters = {}
    if len(options.categories) == 1:
        filters["category"] = options.categories[0]
    if len(options.languages) == 1:
        filters["language"] = options.languages[0]
    return filters


def trial_rows(searcher: VectorSearcher, query: str, options: TrialOptions, result: LookupResult | None,
               doc_ids: Collection[int] | None, language_of: Callable[[str], str]) -> dict[str, Any]:
    """The rows of a run and what to say about them: `rows`, `note`, `l1_error`, `timings_ms` (TrialRun's
    fields). `doc_ids`: the documents the filters leave, of those the caller may read (None: no filter, and a
    caller reading every page)."""
    text = query.strip() if isinstance(query, str) else ""
    retriever = options.retriever
    if retriever is Retriever.AGENT:
        if result is None:
            return {"rows": (), "note": "The agent got an error result: there are no L1 rows."}
        trace = result.trace
        if not trace.l1_called:
            note = "The agents' lookup did not run L1 for this query, so the agent got no L1 rows."
        elif trace.l1_error:
            note = "The agents' lookup ran L1, and it failed."
        else:
            narrowed = ", ".join(f"{k} {v}" for k, v in agent_filters(options).items())
            note = (f"The L1 rows the agents' lookup used (top {L1_TOP_K}, both retrievers, "
                    f"{'in ' + narrowed if narrowed else 'no filter'}).")
        rows = tuple(_row(i, hit, hit.score, text, language_of) for i, hit in enumerate(trace.l1_hits))
        return {"rows": rows, "note": note}
    if not text:
        return {"rows": (), "note": "There is no query to search for."}
    if doc_ids is not None and not doc_ids:
        return {"rows": (), "note": "No document is in the chosen categories and languages."}

    def own_score(hit: L1Hit) -> float:
        if retriever is Retriever.HYBRID:
            return hit.score
        return dict(hit.retriever_scores).get(retriever.value, 0.0)

    keep = None if options.min_score is None else (lambda hit: own_score(hit) >= options.min_score)
    names = ("bm25", "dense") if retriever is Retriever.HYBRID else (retriever.value,)
    started = time.perf_counter()
    try:
        hits = searcher.search_with(text, top_k=options.top_k, retrievers=names, doc_ids=doc_ids, keep=keep)
    except Exception as exc:  # noqa: BLE001 - the agent's answer is shown whatever the test bench's search does
        return {"rows": (), "note": "The test bench's L1 search failed.", "l1_error": f"{type(exc).__name__}: {exc}",
                "timings_ms": {"bench": _ms(started)}}
    rows = tuple(_row(i, hit, own_score(hit), text, language_of) for i, hit in enumerate(hits))
    scope = "" if doc_ids is None else f" in {len(doc_ids):,} document{'s' if len(doc_ids) != 1 else ''}"
    minimum = "" if options.min_score is None else f", {retriever.score_name} at least {options.min_score:g}"
    note = (f"{retriever.label}: {len(rows)} of at most {options.top_k} row{'s' if options.top_k != 1 else ''}"
            f"{scope}{minimum}, after the relevance check L1 applies.")
    return {"rows": rows, "note": note, "timings_ms": {"bench": _ms(started)}}


def _row(index: int, hit: L1Hit, score: float, query: str, language_of: Callable[[str], str]) -> TrialRow:
    return TrialRow(rank=index + 1, source=hit.source, heading=hit.heading, content=hit.content, score=score,
                    fused_score=hit.score, retrievers=hit.retrievers, retriever_scores=hit.retriever_scores,
                    lang=language_of(hit.source), highlights=tuple(term_spans(query, hit.content)))


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


# -- history -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HistoryEntry:
    """One of a user's earlier test runs, to show and to run again."""

    id: int
    query: str
    section_title: str | None
    options: TrialOptions  # the defaults when what was stored is no longer valid
    found: bool
    answer: str  # "exact_L0 + semantic_L1", "semantic_L1", "" (nothing found) or "error"
    latency_ms: float
    created_at: Any  # datetime, UTC


def history_entry(record: Any) -> HistoryEntry:
    """A stored history row (`QueryHistoryRecord`) as an entry."""
    try:
        options = TrialOptions.from_dict(record.options)
    except InvalidInputError:
        options = TrialOptions()
    return HistoryEntry(id=record.id, query=record.query, section_title=record.section_title, options=options,
                        found=record.found, answer=record.answer, latency_ms=record.latency_ms,
                        created_at=record.created_at)
