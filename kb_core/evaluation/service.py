"""Evaluation in the console as a service the `KnowledgeBase` facade delegates to: labelled query sets (a JSONL
upload, or answers marked right or wrong in the playground and on Tool calls), evaluation runs as `evaluate`
jobs through the same scoring as `kb evaluate` (`kb_core.evaluation.scoring.evaluate`), and two runs compared.

`EvaluationService` holds the stores it needs (the metadata repository, the lookup it measures and the job
runner), one per knowledge base; `Evaluation` is `kb.evaluation` for one actor, checking its role and keeping
to the pages it may read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kb_core.access import Role
from kb_core.agent.tool import check_query_length
from kb_core.errors import InvalidInputError
from kb_core.evaluation.runs import (
    VERDICTS,
    OutcomeRow,
    RunComparison,
    compare_runs,
    outcome_verdict,
    report_metrics,
    stored_outcomes,
)
from kb_core.evaluation.scoring import LabelledQuery, evaluate, parse_queries, run_settings
from kb_core.jobs.model import JobKind, JobRecord
from kb_core.jobs.runner import JobControl, Work
from kb_core.storage.evaluation_store import QuerySetInfo, StoredQuery, StoredRun

if TYPE_CHECKING:
    from kb_core.access import Actor
    from kb_core.jobs.runner import JobRunner
    from kb_core.retrieval.lookup import HybridLookup
    from kb_core.services.acting import Acting
    from kb_core.storage.ports import MetadataRepository

MAX_SET_NAME = 255
MAX_IMPORT_BYTES = 20 * 1024 * 1024


class _UnobservedLookups:
    """The knowledge base as `evaluate` reads it, with its lookups left out of the served-lookup metrics (a run's
    lookups are a measurement, not traffic): `lookup` is the service's own `HybridLookup`, everything else the
    knowledge base's."""

    def __init__(self, kb: Any, lookup: HybridLookup):
        self._kb = kb
        self._lookup = lookup

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kb, name)

    def lookup(self, query: str, section_title: str | None = None) -> Any:
        return self._lookup.lookup(query, section_title)


class EvaluationService:
    """Labelled query sets and evaluation runs over one knowledge base's stores."""

    def __init__(self, metadata: MetadataRepository, lookup: HybridLookup, runner: Callable[[], JobRunner]):
        self._metadata = metadata
        self._lookup = lookup
        self._runner = runner  # the facade's: raises when the knowledge base has no job runner

    # -- labelled query sets --------------------------------------------------------------------------
    def query_sets(self) -> list[QuerySetInfo]:
        return self._metadata.query_sets()

    def query_set(self, name: str) -> list[LabelledQuery]:
        return [LabelledQuery(q.query, q.kind, q.expected) for q in self._metadata.labelled_queries(name)]

    def import_query_set(self, name: str, data: bytes | str, *, actor: str) -> int:
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
            name, [StoredQuery(q.query, q.kind, q.expected) for q in queries], actor)

    def label_query(self, set_name: str, query: str, expected: Iterable[str], *, kind: str, actor: str) -> None:
        set_name = _set_name(set_name)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("the query is empty")
        check_query_length(query)
        if not isinstance(kind, str) or not kind.strip():
            raise InvalidInputError("the kind is empty")
        paths = tuple(dict.fromkeys(str(p).strip() for p in expected if str(p).strip()))
        self._metadata.put_labelled_queries(set_name, [StoredQuery(query, kind.strip(), paths)], actor)

    def unlabel_query(self, set_name: str, query: str) -> bool:
        return self._metadata.delete_labelled_query(set_name, query)

    # -- runs -----------------------------------------------------------------------------------------
    def start(self, set_name: str, actor: Actor, kb: Any) -> JobRecord:
        """Queue the `evaluate` job of the set; `kb` is the facade the scoring reads (entries, languages,
        status), `actor` who started it."""
        queries = self.query_set(set_name)
        if not queries:
            raise InvalidInputError(f"there is no labelled query set {set_name!r} (or it is empty)")
        return self._runner().submit(JobKind.EVALUATE, actor, {"set": set_name, "queries": len(queries)},
                                     self._work(set_name, queries, actor, kb), total=len(queries))

    def _work(self, set_name: str, queries: list[LabelledQuery], actor: Actor, kb: Any) -> Work:
        def work(control: JobControl) -> str:
            def progress(done: int, total: int) -> None:
                control.progress("evaluating", done, total)
                control.checkpoint()  # a cancel takes effect between two queries

            control.progress("evaluating", 0, len(queries))
            report = evaluate(_UnobservedLookups(kb, self._lookup), queries, progress=progress)
            run_id = self._metadata.store_evaluation_run(
                set_name=set_name, job_id=control.job_id, actor=actor.name, settings=run_settings(kb),
                metrics=report_metrics(report), outcomes=stored_outcomes(report))
            control.result = {"run_id": run_id, "set": set_name}
            control.count("queries", len(queries))
            if failed := len(report.failures()):
                control.count("failed queries", failed)
            answered = report.overall.answered_pct
            return (f"run {run_id}: {len(queries)} queries of {set_name!r}"
                    + ("" if answered is None else f", {answered:.1f} % answered"))
        return work

    def runs(self, limit: int = 100) -> list[StoredRun]:
        return self._metadata.evaluation_runs(limit)

    def run(self, run_id: int) -> StoredRun | None:
        return self._metadata.evaluation_run(int(run_id))



def outcome_rows(run: StoredRun) -> list[OutcomeRow]:
    rows = [OutcomeRow(o, outcome_verdict(o)) for o in run.outcomes]
    return sorted(rows, key=lambda row: VERDICTS.index(row.verdict))


def _set_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("name the query set")
    name = name.strip()
    if len(name) > MAX_SET_NAME:
        raise InvalidInputError(f"a set's name has at most {MAX_SET_NAME} characters")
    return name


class Evaluation:
    """`kb.evaluation` for one actor: anyone may look at sets and runs, importing, labelling and starting a run
    need the curator role. A reader limited to some audiences sees only the queries and outcomes whose pages
    (expected, served, named) it may read."""

    def __init__(self, service: EvaluationService, acting: Acting, path_of: Callable[[str], str | None],
                 measured: Callable[[], Any]):
        self._service = service
        self._acting = acting
        self._path_of = path_of  # a stored relative path -> the document path whose audience decides
        self._measured = measured  # the knowledge base a run scores, acting for this actor

    def _shown(self, paths: Iterable[str | None]) -> bool:
        return all(p is None or self._acting.may_read(self._path_of(p)) for p in paths)

    def sets(self) -> list[QuerySetInfo]:
        return self._service.query_sets()

    def set(self, name: str) -> list[LabelledQuery]:
        queries = self._service.query_set(name)
        return queries if not self._acting.limited else [q for q in queries if self._shown(q.expected)]

    def import_set(self, name: str, data: bytes | str) -> int:
        """Add a JSONL file's labelled queries (`kb evaluate`'s format) to the set `name`; malformed lines are
        refused with their line numbers (`InvalidInputError`), storing nothing. How many queries it had."""
        self._acting.require(Role.CURATOR, "import labelled queries")
        return self._service.import_query_set(name, data, actor=self._acting.actor.name)

    def label(self, set_name: str, query: str, expected: Iterable[str], *, kind: str = "labelled") -> None:
        """Store `query` in the set with the documents that answer it (`category/file.md`; none: it must come
        back not found), replacing its label if it was in the set."""
        self._acting.require(Role.CURATOR, "label queries")
        self._service.label_query(set_name, query, expected, kind=kind, actor=self._acting.actor.name)

    def unlabel(self, set_name: str, query: str) -> bool:
        self._acting.require(Role.CURATOR, "remove labelled queries")
        return self._service.unlabel_query(set_name, query)

    def start(self, set_name: str) -> JobRecord:
        """Score every query of the set, as `kb evaluate` does, as an `evaluate` job (queued like every job, so
        it never measures a half-done re-index); the run is stored when it ends (`runs()`)."""
        self._acting.require(JobKind.EVALUATE.role, "start an evaluation run")
        return self._service.start(set_name, self._acting.actor, self._measured())

    def runs(self, limit: int = 100) -> list[StoredRun]:
        """Newest first, without each query's outcome (`outcomes(id)`)."""
        return self._service.runs(limit)

    def run(self, run_id: int) -> StoredRun | None:
        run = self._service.run(run_id)
        if run is None or not self._acting.limited:
            return run
        return dataclasses.replace(run, outcomes=tuple(o for o in run.outcomes if self._shown(
            (*o.expected, o.primary, o.supplement, *o.named))))

    def outcomes(self, run_id: int) -> list[OutcomeRow]:
        """A run's answer to each query, the wrong ones first (`VERDICTS`' order)."""
        run = self.run(run_id)
        if run is None:
            raise InvalidInputError(f"there is no evaluation run {run_id}")
        return outcome_rows(run)

    def compare(self, before: int, after: int) -> RunComparison:
        """The queries whose answer changed, and the headline metrics of each run."""
        first, second = self.run(before), self.run(after)
        missing = [str(i) for i, r in ((before, first), (after, second)) if r is None]
        if first is None or second is None:
            raise InvalidInputError(f"there is no evaluation run {', '.join(missing)}")
        return compare_runs(first, second)
