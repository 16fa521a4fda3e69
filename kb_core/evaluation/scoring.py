"""The scoring of labelled queries, shared by `kb evaluate` (kb_core/evaluation/command.py, which explains each
metric) and the console's evaluation runs (kb_core/evaluation/service.py): parse the JSONL, run every query
through `lookup`, score the answers per kind, and the settings a run's numbers depend on."""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kb_core.documents.language import query_language
from kb_core.errors import InvalidInputError
from kb_core.ops.stats import percentile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelledQuery:
    query: str
    kind: str
    expected: tuple[str, ...]  # paths relative to the knowledge base (`category/file.md`); () = no answer


@dataclass(frozen=True)
class QueryOutcome:
    query: LabelledQuery
    found: bool
    primary: str | None  # relative path
    confidence: str | None
    supplement: str | None
    latency_ms: float
    # whether the first thing an agent reads (the primary, else the supplement) is in the query's language;
    # None when nothing was served or its language is unknown
    in_query_language: bool | None = None
    # the documents an unsure answer offers besides (alternatives, "did you mean" suggestions), relative paths
    named: tuple[str, ...] = ()

    @property
    def has_answer(self) -> bool:
        return bool(self.query.expected)

    @property
    def answered(self) -> bool:
        return any(p in self.query.expected for p in (self.primary, self.supplement) if p)

    @property
    def named_anywhere(self) -> bool:
        return self.answered or any(p in self.query.expected for p in self.named)

    @property
    def right_primary(self) -> bool:
        return self.primary is not None and self.primary in self.query.expected

    @property
    def right_first(self) -> bool:
        """The first thing an agent reads (the primary, else the supplement) is an expected document."""
        first = self.primary if self.primary is not None else self.supplement
        return first is not None and first in self.query.expected

    @property
    def high_but_wrong(self) -> bool:
        return self.confidence == "high" and not self.right_primary


@dataclass(frozen=True)
class KindReport:
    kind: str
    queries: int
    with_answer: int
    answered_pct: float | None
    right_primary_pct: float | None
    high_but_wrong_pct: float
    not_found_pct: float | None  # over the queries without an answer
    p50_ms: float
    p99_ms: float
    in_language_pct: float | None = None  # of the answers whose language is known: served in the query's
    right_first_pct: float | None = None  # the primary, else the supplement, is an expected document
    named_pct: float | None = None  # an expected document is named anywhere in the answer


@dataclass(frozen=True)
class EvaluationReport:
    kinds: tuple[KindReport, ...]
    overall: KindReport
    outcomes: tuple[QueryOutcome, ...]

    def kind(self, name: str) -> KindReport:
        return next(k for k in self.kinds if k.kind == name)

    def failures(self) -> list[QueryOutcome]:
        return [o for o in self.outcomes
                if (o.has_answer and not o.answered) or o.high_but_wrong or (not o.has_answer and o.found)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kinds": [asdict(k) for k in self.kinds],
            "overall": asdict(self.overall),
            "failures": [{"query": o.query.query, "kind": o.query.kind, "expected": list(o.query.expected),
                          "primary": o.primary, "confidence": o.confidence, "supplement": o.supplement}
                         for o in self.failures()],
        }


MAX_BAD_LINES = 20  # bad lines named in the error (all are counted)


def load_queries(path: str | Path) -> list[LabelledQuery]:
    """The labelled queries of a JSONL file; malformed lines are an `InvalidInputError` naming them."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    return parse_queries(text, str(path))


def parse_queries(text: str, source: str = "<queries>") -> list[LabelledQuery]:
    """The labelled queries of JSONL text (one `{"query", "kind", "expected"}` object a line, blank lines
    skipped): all of them, or an `InvalidInputError` naming every malformed line (`source:line`) and nothing."""
    queries: list[LabelledQuery] = []
    bad: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise TypeError("each line must be a JSON object")
            query, kind, expected = item["query"], item.get("kind", "query"), item.get("expected", [])
            if not isinstance(query, str) or not isinstance(kind, str) or not isinstance(expected, list) \
                    or not all(isinstance(e, str) for e in expected):
                raise TypeError("query and kind must be strings, expected a list of strings")
            if not query.strip():
                raise ValueError("the query is empty")
        except (ValueError, KeyError, TypeError) as exc:
            bad.append(f"{source}:{number}: not a labelled query ({exc})")
            continue
        queries.append(LabelledQuery(query, kind, tuple(expected)))
    if bad:
        more = f" (and {len(bad) - MAX_BAD_LINES} more)" if len(bad) > MAX_BAD_LINES else ""
        raise InvalidInputError("; ".join(bad[:MAX_BAD_LINES]) + more)
    return queries


def evaluate(kb: Any, queries: Sequence[LabelledQuery],
             progress: Callable[[int, int], None] | None = None) -> EvaluationReport:
    """Run every query through `kb.lookup` and score the answers."""
    outcomes = []
    for i, item in enumerate(queries):
        started = time.perf_counter()
        result = kb.lookup(item.query)
        latency = (time.perf_counter() - started) * 1000
        outcomes.append(QueryOutcome(
            query=item,
            found=result.found,
            primary=_relative(kb, result.primary.source) if result.primary else None,
            confidence=result.primary.confidence if result.primary else None,
            supplement=_relative(kb, result.supplement.source) if result.supplement else None,
            latency_ms=latency,
            in_query_language=_in_query_language(kb, item.query, result),
            named=tuple(_relative(kb, n.source) for n in (*result.alternatives, *result.suggestions)),
        ))
        if progress is not None:
            progress(i + 1, len(queries))
    kinds = tuple(_summarise(kind, [o for o in outcomes if o.query.kind == kind])
                  for kind in dict.fromkeys(o.query.kind for o in outcomes))
    return EvaluationReport(kinds, _summarise("all", outcomes), tuple(outcomes))


def _in_query_language(kb: Any, query: str, result: Any) -> bool | None:
    """Whether the first thing served is in the query's language; `None` (not judged) when its language is
    unknown or its page has no version in that language (serving the only version is right)."""
    served = result.primary or result.supplement
    entry = kb.documents.entry(served.source) if served is not None else None
    if entry is None or entry.lang == "und":
        return None
    language = query_language(query, kb.settings.default_language)
    if entry.lang != language and all(v.lang != language for v in kb.documents.versions(served.source)):
        return None
    return entry.lang == language


def _relative(kb: Any, source: str) -> str:
    return kb.documents.relative_path(source) or source


def _pct(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(100.0 * part / whole, 1)


def _summarise(kind: str, outcomes: Sequence[QueryOutcome]) -> KindReport:
    answerable = [o for o in outcomes if o.has_answer]
    unanswerable = [o for o in outcomes if not o.has_answer]
    latencies = [o.latency_ms for o in outcomes]
    judged = [o.in_query_language for o in outcomes if o.in_query_language is not None]
    return KindReport(
        kind=kind,
        queries=len(outcomes),
        with_answer=len(answerable),
        answered_pct=_pct(sum(o.answered for o in answerable), len(answerable)),
        right_primary_pct=_pct(sum(o.right_primary for o in answerable), len(answerable)),
        high_but_wrong_pct=_pct(sum(o.high_but_wrong for o in outcomes), len(outcomes)) or 0.0,
        not_found_pct=_pct(sum(not o.found for o in unanswerable), len(unanswerable)),
        p50_ms=round(statistics.median(latencies), 2) if latencies else 0.0,
        p99_ms=round(percentile(latencies, 99) or 0.0, 2),
        in_language_pct=_pct(sum(judged), len(judged)),
        right_first_pct=_pct(sum(o.right_first for o in answerable), len(answerable)),
        named_pct=_pct(sum(o.named_anywhere for o in answerable), len(answerable)),
    )


def format_table(report: EvaluationReport) -> str:
    def cell(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f} %"

    lines = ["| kind | queries | answered | right first | named | right primary | high but wrong | "
             "not found (no answer) | in the query's language | p50 / p99 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for k in (*report.kinds, report.overall):
        name = f"**{k.kind}**" if k is report.overall else k.kind
        lines.append(f"| {name} | {k.queries} | {cell(k.answered_pct)} | {cell(k.right_first_pct)} | "
                     f"{cell(k.named_pct)} | "
                     f"{cell(k.right_primary_pct)} | {cell(k.high_but_wrong_pct)} | {cell(k.not_found_pct)} | "
                     f"{cell(k.in_language_pct)} | {k.p50_ms:.1f} / {k.p99_ms:.1f} ms |")
    return "\n".join(lines)


def format_failures(report: EvaluationReport, limit: int) -> Iterable[str]:
    for o in report.failures()[:limit]:
        why = "found although nothing should" if not o.has_answer else \
            "confidence high on a wrong document" if o.high_but_wrong else "not answered"
        yield (f"- [{o.query.kind}] {o.query.query!r}: {why}; expected {list(o.query.expected)}, "
               f"primary {o.primary} ({o.confidence}), supplement {o.supplement}")


def run_settings(kb: Any) -> dict[str, Any]:
    """What a run's numbers depend on besides the queries: the L0 rule and what L1 actually ran on - its
    retrievers, and the model that embedded the query only when dense search ran (a configured model that
    is unavailable is not what answered: it is kept apart, as `configured_model`)."""
    status = kb.status()
    dense = bool(status.dense_search)
    return {"l0_matching": str(kb.settings.l0_matching), "l1_mode": "hybrid (dense + BM25)" if dense else "BM25 only",
            "retrievers": ["bm25", "dense"] if dense else ["bm25"],
            "model": status.model.model_id if dense else "none (BM25 only)",
            "configured_model": kb.settings.embedding_model, "base_path": str(kb.settings.base_path)}

