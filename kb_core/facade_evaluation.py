"""Evaluation in the console, as `KnowledgeBase` methods (mixed in): labelled query sets (a JSONL upload, or
answers marked right or wrong in the playground and on Tool calls), evaluation runs as `evaluate` jobs through
the same scoring as `kb evaluate` (`kb_core.scoring.evaluate`), and two runs compared.

Anyone may look at sets and runs; importing, labelling and starting a run need the curator role (checked here,
whatever the page shows). The stores are the facade's own (`_metadata`, the job runner)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.agent.tool import check_query_length
from kb_core.errors import InvalidInputError
from kb_core.jobs.model import JobKind, JobRecord
from kb_core.jobs.runner import JobControl, Work
from kb_core.scoring import EvaluationReport, LabelledQuery, evaluate, parse_queries, run_settings
from kb_core.storage.evaluation_store import QuerySetInfo, StoredOutcome, StoredQuery, StoredRun

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.jobs.runner import JobRunner
    from kb_core.retrieval.lookup import HybridLookup
    from kb_core.storage.ports import MetadataRepository

MAX_SET_NAME = 255
MAX_IMPORT_BYTES = 20 * 1024 * 1024
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


def _stored_outcomes(report: EvaluationReport) -> list[StoredOutcome]:
    return [StoredOutcome(query=o.query.query, kind=o.query.kind, expected=o.query.expected, found=o.found,
                          primary=o.primary, confidence=o.confidence, supplement=o.supplement, named=o.named,
                          latency_ms=o.latency_ms, in_query_language=o.in_query_language) for o in report.outcomes]


class _UnobservedLookups:
    """The knowledge base as `evaluate` reads it, with its lookups left out of the served-lookup metrics (a run's
    lookups are a measurement, not traffic); everything else is the knowledge base's own."""

    def __init__(self, kb: Any):
        self._kb = kb

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kb, name)

    def lookup(self, query: str, section_title: str | None = None) -> Any:
        return self._kb._lookup.lookup(query, section_title)


class EvaluationMixin:
    """Mixed into `KnowledgeBase` (which provides these attributes)."""

    _metadata: MetadataRepository
    _actor: Actor
    _lookup: HybridLookup

    if TYPE_CHECKING:
        def _runner(self) -> JobRunner: ...  # KnowledgeBase's

    # -- labelled query sets --------------------------------------------------------------------------
    def query_sets(self) -> list[QuerySetInfo]:
        """The stored labelled query sets (name, how many queries, when last changed), by name."""
        return self._metadata.query_sets()

    def query_set(self, name: str) -> list[LabelledQuery]:
        """A set's labelled queries, in the order they were added."""
        return [LabelledQuery(q.query, q.kind, q.expected) for q in self._metadata.labelled_queries(name)]

    def import_query_set(self, name: str, data: bytes | str) -> int:
        """Add the labelled queries of a JSONL file (the format `kb evaluate` reads) to the set `name`, created
        by its first query; a query already in the set gets the file's label. Malformed lines are refused with
        their line numbers (`InvalidInputError`) and nothing is stored. How many queries the file had."""
        self._actor.require(Role.CURATOR, "import labelled queries")
        name = _set_name(name)
        if isinstance(data, bytes):
            if len(data) > MAX_IMPORT_BYTES:
                raise InvalidInputError(f"the file has {len(data):,} bytes; at most {MAX_IMPORT_BYTES:,} are accepted")
            try:
                data = data.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(f"the file is not UTF-8 text: {exc}") from None
        queries = parse_queries(data, "line")
        if not queries:
            raise InvalidInputError("the file has no labelled queries")
        for number, query in enumerate(queries, 1):
            try:
                check_query_length(query.query)
            except InvalidInputError as exc:
                raise InvalidInputError(f"query number {number}: {exc}") from None
        return self._metadata.put_labelled_queries(
            name, [StoredQuery(q.query, q.kind, q.expected) for q in queries], self._actor.name)

    def label_query(self, set_name: str, query: str, expected: Iterable[str], *, kind: str = "labelled") -> None:
        """Store `query` in the set `set_name` (created by its first query) with the documents that answer it
        (`category/file.md` paths, as answers name them; none: the knowledge base has no answer, and the query
        must come back not found), replacing its label if it was in the set."""
        self._actor.require(Role.CURATOR, "label queries")
        set_name = _set_name(set_name)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("the query is empty")
        check_query_length(query)
        if not isinstance(kind, str) or not kind.strip():
            raise InvalidInputError("the kind is empty")
        paths = tuple(dict.fromkeys(str(p).strip() for p in expected if str(p).strip()))
        self._metadata.put_labelled_queries(set_name, [StoredQuery(query, kind.strip(), paths)], self._actor.name)

    def unlabel_query(self, set_name: str, query: str) -> bool:
        """Remove a query from a set; whether it was there."""
        self._actor.require(Role.CURATOR, "remove labelled queries")
        return self._metadata.delete_labelled_query(set_name, query)

    # -- runs -----------------------------------------------------------------------------------------
    def start_evaluation(self, set_name: str) -> JobRecord:
        """Run every query of the set through `lookup` and score the answers, as `kb evaluate` does, as an
        `evaluate` job (returns at once, queued; curator). The run is stored when the job ends: its settings (L0
        rule, L1 mode, model), each kind's metrics and each query's answer (`evaluation_runs()`). It takes its turn
        like every job (one at a time per knowledge base), so it never measures a half-done re-index."""
        self._actor.require(JobKind.EVALUATE.role, "start an evaluation run")
        queries = self.query_set(set_name)
        if not queries:
            raise InvalidInputError(f"there is no labelled query set {set_name!r} (or it is empty)")
        return self._runner().submit(JobKind.EVALUATE, self._actor, {"set": set_name, "queries": len(queries)},
                                     self._evaluation_work(set_name, queries), total=len(queries))

    def _evaluation_work(self, set_name: str, queries: list[LabelledQuery]) -> Work:
        def work(control: JobControl) -> str:
            def progress(done: int, total: int) -> None:
                control.progress("evaluating", done, total)
                control.checkpoint()  # a cancel takes effect between two queries

            control.progress("evaluating", 0, len(queries))
            report = evaluate(_UnobservedLookups(self), queries, progress=progress)
            run_id = self._metadata.store_evaluation_run(
                set_name=set_name, job_id=control.job_id, actor=self._actor.name, settings=run_settings(self),
                metrics=report_metrics(report), outcomes=_stored_outcomes(report))
            control.result = {"run_id": run_id, "set": set_name}
            control.count("queries", len(queries))
            if failed := len(report.failures()):
                control.count("failed queries", failed)
            answered = report.overall.answered_pct
            return (f"run {run_id}: {len(queries)} queries of {set_name!r}"
                    + ("" if answered is None else f", {answered:.1f} % answered"))
        return work

    def evaluation_runs(self, limit: int = 100) -> list[StoredRun]:
        """The stored runs, newest first (without each query's outcome: `evaluation_run(id)` has them)."""
        return self._metadata.evaluation_runs(limit)

    def evaluation_run(self, run_id: int) -> StoredRun | None:
        return self._metadata.evaluation_run(int(run_id))

    def evaluation_outcomes(self, run_id: int) -> list[OutcomeRow]:
        """A run's answer to each of its queries, the wrong ones first (`VERDICTS`' order), in the run's order
        within a verdict."""
        run = self.evaluation_run(run_id)
        if run is None:
            raise InvalidInputError(f"there is no evaluation run {run_id}")
        rows = [OutcomeRow(o, outcome_verdict(o)) for o in run.outcomes]
        return sorted(rows, key=lambda row: VERDICTS.index(row.verdict))

    def compare_evaluation_runs(self, before: int, after: int) -> RunComparison:
        """Two runs side by side: the queries whose answer changed, and the headline metrics of each."""
        first, second = self.evaluation_run(before), self.evaluation_run(after)
        missing = [str(i) for i, r in ((before, first), (after, second)) if r is None]
        if first is None or second is None:
            raise InvalidInputError(f"there is no evaluation run {', '.join(missing)}")
        return compare_runs(first, second)


def _set_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("name the query set")
    name = name.strip()
    if len(name) > MAX_SET_NAME:
        raise InvalidInputError(f"a set's name has at most {MAX_SET_NAME} characters")
    return name
