"""Evaluation runs as stored and read back: what a run stores of a report (`report_metrics`, `stored_outcomes`),
each stored answer's verdict by the rules `kb evaluate` scores with (`outcome_verdict`, `VERDICTS`), and two runs
compared (`compare_runs`: the queries whose answer changed, the headline metrics side by side). Pure values."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kb_core.evaluation.scoring import EvaluationReport
from kb_core.storage.evaluation_store import StoredOutcome, StoredRun

# the headline metrics of a run (the report's "all" row), in the order the console shows them
HEADLINE = (("answered_pct", "answered"), ("right_first_pct", "right first"), ("named_pct", "named"),
            ("right_primary_pct", "right primary"), ("high_but_wrong_pct", "high but wrong"),
            ("not_found_pct", "not found (no answer)"), ("in_language_pct", "in the query's language"),
            ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"))


@dataclass(frozen=True)
class ChangedQuery:
    """A query both runs asked whose answer differs (found, primary, its confidence or the supplement)."""

    query: str
    kind: str
    expected: tuple[str, ...]
    before: StoredOutcome
    after: StoredOutcome

    @property
    def verdict(self) -> str:
        """"better", "worse" or "different": whether an expected document came first in one run only."""
        def right(o: StoredOutcome) -> bool:
            if not o.expected:
                return not o.found
            first = o.primary if o.primary is not None else o.supplement
            return first is not None and first in o.expected
        was, now = right(self.before), right(self.after)
        return "better" if now and not was else "worse" if was and not now else "different"


@dataclass(frozen=True)
class RunComparison:
    before: StoredRun
    after: StoredRun
    changed: tuple[ChangedQuery, ...]
    only_before: tuple[str, ...]  # queries only the first run asked
    only_after: tuple[str, ...]

    def metric_rows(self) -> list[dict[str, Any]]:
        """The headline metrics of both runs side by side (the "all" row), with the difference."""
        a, b = self.before.metrics.get("overall", {}), self.after.metrics.get("overall", {})
        rows = []
        for key, label in HEADLINE:
            x, y = a.get(key), b.get(key)
            rows.append({"metric": label, f"run {self.before.id}": x, f"run {self.after.id}": y,
                         "change": None if x is None or y is None else round(y - x, 2)})
        return rows


# What a stored outcome was, worst first: the order a run's answers are listed in (wrong ones on top).
VERDICTS = ("high but wrong", "found although nothing should be", "not answered", "named only",
            "answered, not first", "right first (supplement)", "right primary", "right: no answer")


def outcome_verdict(o: StoredOutcome) -> str:
    """One of `VERDICTS`, by the rules `kb evaluate` scores with (docs/quality.md)."""
    if not o.expected:
        return "right: no answer" if not o.found else "found although nothing should be"
    if o.primary is not None and o.primary not in o.expected and o.confidence == "high":
        return "high but wrong"
    if o.primary in o.expected:
        return "right primary"
    if o.supplement in o.expected:
        return "right first (supplement)" if o.primary is None else "answered, not first"
    return "named only" if any(n in o.expected for n in o.named) else "not answered"


@dataclass(frozen=True)
class OutcomeRow:
    """A run's answer to one query, with its verdict (`outcome_verdict`)."""

    outcome: StoredOutcome
    verdict: str

    @property
    def wrong(self) -> bool:
        return not self.verdict.startswith("right")


def answer_of(o: StoredOutcome) -> tuple[Any, ...]:
    return o.found, o.primary, o.confidence, o.supplement


def compare_runs(before: StoredRun, after: StoredRun) -> RunComparison:
    """The queries whose answer changed between two runs (with their outcomes), and those only one asked."""
    first = {o.query: o for o in before.outcomes}
    second = {o.query: o for o in after.outcomes}
    changed = tuple(ChangedQuery(o.query, o.kind, o.expected, first[o.query], o) for o in after.outcomes
                    if o.query in first and answer_of(first[o.query]) != answer_of(o))
    return RunComparison(before, after, changed, tuple(q for q in first if q not in second),
                         tuple(q for q in second if q not in first))


def report_metrics(report: EvaluationReport) -> dict[str, Any]:
    """What a run stores of the report: each kind's numbers and the overall row (as `kb evaluate --json`)."""
    return {"kinds": [asdict(k) for k in report.kinds], "overall": asdict(report.overall)}


def stored_outcomes(report: EvaluationReport) -> list[StoredOutcome]:
    return [StoredOutcome(query=o.query.query, kind=o.query.kind, expected=o.query.expected, found=o.found,
                          primary=o.primary, confidence=o.confidence, supplement=o.supplement, named=o.named,
                          latency_ms=o.latency_ms, in_query_language=o.in_query_language) for o in report.outcomes]
