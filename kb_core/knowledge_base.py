"""`KnowledgeBase`: the one object the console, the tests and agent code hold.

It answers lookups and the agents' tools itself, reports its status and lifecycle, and hands out the services
for everything else, each bound to the acting user (`as_user`): `documents`, `keywords`, `trash`, `jobs`,
`evaluation`, `calls` and `playground`. A service checks the user's role itself and keeps every read to the
pages that user may read, so no caller has to remember to."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from kb_core.access import Actor, Role, service_actor
from kb_core.agent.tool import READ_TOOL_NAME, TOOL_NAME, ToolResponse, check_query_length
from kb_core.documents.scope import AudienceRule, Scope
from kb_core.errors import InvalidInputError, SettingsError
from kb_core.evaluation.service import Evaluation, EvaluationService
from kb_core.ops.about import About, about
from kb_core.ops.metrics import KnowledgeBaseMetrics
from kb_core.ops.summaries import SummaryCache
from kb_core.retrieval.lookup import LookupResult
from kb_core.services.acting import Acting, WriteClock
from kb_core.services.calls import Calls, ToolCalls
from kb_core.services.catalogue import Catalogue
from kb_core.services.documents import Documents
from kb_core.services.editing import EditingService
from kb_core.services.jobs import ActingHost, Jobs, JobsService
from kb_core.services.keywords import Keywords
from kb_core.services.parts import Parts
from kb_core.services.playground import Playground
from kb_core.services.status import KnowledgeBaseStatus, StatusService, StoreCounts
from kb_core.services.trash import TrashBin
from kb_core.settings import Settings
from kb_core.storage.embedding import ModelState

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["KnowledgeBase", "KnowledgeBaseStatus", "StoreCounts"]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Shared:
    """What every user's view of one knowledge base shares: its parts and the services built once over them."""

    settings: Settings
    parts: Parts
    rule: AudienceRule
    clock: WriteClock
    metrics: KnowledgeBaseMetrics
    summaries: SummaryCache  # every summary below is cached here until a write or a change from the feed
    catalogue: Catalogue
    status: StatusService
    editing: EditingService
    jobs: JobsService
    evaluation: EvaluationService
    calls: ToolCalls


class KnowledgeBase:
    """The facade. `open_knowledge_base()` (the composition root) builds its parts; `as_user(actor)` gives the
    same knowledge base acting for another user."""

    def __init__(self, settings: Settings, parts: Parts):
        try:
            rule = AudienceRule.of_mapping(settings.audiences)
        except InvalidInputError as exc:
            raise SettingsError(f"auth.audiences (KB_AUDIENCES): {exc}") from None
        clock = WriteClock()
        summaries = SummaryCache(lambda: (clock.writes, parts.follower.changes_applied if parts.follower else 0))
        catalogue = Catalogue(parts, summaries)
        status = StatusService(parts, catalogue, summaries, base_path=settings.base_path, closed=lambda: clock.closed)
        jobs = JobsService(parts.jobs, lambda: clock.closed)
        metrics = parts.metrics or KnowledgeBaseMetrics()
        metrics.watch_state(status.for_metrics, parts.follower)
        self._shared = _Shared(
            settings, parts, rule, clock, metrics, summaries, catalogue, status,
            EditingService(parts.index, parts.searcher, default_language=settings.default_language), jobs,
            EvaluationService(parts.metadata, parts.lookup, jobs.runner), ToolCalls(parts, metrics))
        actor = service_actor(settings.service_identity)
        if settings.service_audiences is not None:  # in-process agents limited to some audiences' pages
            actor = dataclasses.replace(actor, audiences=frozenset(settings.service_audiences))
        self._bind(actor)

    def _bind(self, actor: Actor) -> None:
        shared = self._shared
        self._acting = Acting(actor, shared.rule, shared.parts.index, shared.clock, shared.metrics)
        self._services: dict[str, object] = {}  # built on first use: a view that only looks things up pays nothing

    def as_user(self, actor: Actor) -> KnowledgeBase:
        """This knowledge base acting for `actor`: the same stores and caches; every service checks the actor's
        role (`AccessDeniedError`), keeps to the pages it may read, and records who wrote. The console opens one
        per signed-in user; without `as_user`, calls act as the service identity (`KB_SERVICE_IDENTITY`)."""
        view = object.__new__(KnowledgeBase)
        view._shared = self._shared
        view._bind(actor)
        return view

    @property
    def actor(self) -> Actor:
        """Who this knowledge base acts for."""
        return self._acting.actor

    @property
    def settings(self) -> Settings:
        return self._shared.settings

    # -- lookups and the agents' tools -------------------------------------------------------------------
    def lookup(self, query: str, section_title: str | None = None, scope: Scope | None = None) -> LookupResult:
        """L0, then L1 when needed (`HybridLookup`); a query over `MAX_QUERY_CHARS` raises `InvalidInputError`
        first. Only the pages `scope` admits exist (by default those the acting identity may read)."""
        check_query_length(query)
        result = self._shared.parts.lookup.lookup(query, section_title, scope or self._acting.scope)
        self._shared.metrics.observe_lookup(result)
        return result

    def lookup_knowledge(self, query: str, section_title: str | None = None, *, category: str | None = None,
                         language: str | None = None, caller: str | None = None,
                         scope: Scope | None = None) -> dict:
        """The agent tool: the spec's JSON (plus `error` for refused arguments), logged; `category` (with its
        sub-folders) and `language` narrow the question, `scope` is what the caller may read (default: what the
        acting identity may read)."""
        arguments = {"query": query, "section_title": section_title}
        arguments.update({k: v for k, v in (("category", category), ("language", language)) if v is not None})
        return self.call_tool(arguments, caller=caller, scope=scope).payload

    def read_document_tool(self, source: str, section_title: str | None = None, *, language: str | None = None,
                           caller: str | None = None, scope: Scope | None = None) -> dict:
        """The `read_document` agent tool: the document at `source` (or its section) served like a lookup's
        primary, in `language` when it has that version; logged (`documents.text` is the raw file text)."""
        arguments = {"source": source, "section_title": section_title, **({} if language is None else
                                                                          {"language": language})}
        return self.call_tool(arguments, caller=caller, tool=READ_TOOL_NAME, scope=scope).payload

    def call_tool(self, arguments: object, *, caller: str | None = None, tool: str = TOOL_NAME,
                  scope: Scope | None = None) -> ToolResponse:
        """A tool (`lookup_knowledge` by default, or `read_document`) with raw arguments: the payload *and* the
        result with its trace; `caller` defaults to the acting identity's name (`kb_core.services.calls`)."""
        return self._shared.calls.call(arguments, caller=caller or self._acting.caller, tool=tool,
                                       scope=scope or self._acting.scope)

    # -- the services, bound to the acting user ------------------------------------------------------------
    def _service(self, name: str, build: object) -> object:
        found = self._services.get(name)
        if found is None:
            found = self._services[name] = build()  # type: ignore[operator]
        return found

    @property
    def documents(self) -> Documents:
        """The documents: listed, read, uploaded, edited, deleted, re-indexed and reconciled."""
        shared = self._shared
        return self._service("documents", lambda: Documents(shared.parts, shared.catalogue, shared.editing,
                                                            self._acting))

    @property
    def keywords(self) -> Keywords:
        """The keyword map, keyword edits across documents and the synonym groups."""
        shared = self._shared
        return self._service("keywords", lambda: Keywords(shared.parts, shared.editing, self.documents,
                                                          self._acting))

    @property
    def trash(self) -> TrashBin:
        """The deleted documents, restored or purged."""
        return self._service("trash", lambda: TrashBin(self._shared.parts, self._acting,
                                                       trash_days=self._shared.settings.trash_days))

    @property
    def jobs(self) -> Jobs:
        """Long work as jobs that outlive the caller: started, listed, awaited, cancelled."""
        return self._service("jobs", lambda: Jobs(self._shared.jobs, self._acting, ActingHost(
            self._shared.settings, self.documents, self.keywords, self.trash)))

    @property
    def evaluation(self) -> Evaluation:
        """Labelled query sets and evaluation runs."""
        folder = self._shared.parts.folder
        return self._service("evaluation", lambda: Evaluation(self._shared.evaluation, self._acting,
                                                              folder.document_path, lambda: self))

    @property
    def calls(self) -> Calls:
        """The call log: recent calls, hourly or daily figures, the queries that need attention."""
        return self._service("calls", lambda: Calls(self._shared.calls, self._acting))

    @property
    def playground(self) -> Playground:
        """The playground's test runs (the agent's call beside L1's rows under options) and their history."""
        shared = self._shared
        return self._service("playground", lambda: Playground(
            shared.parts, shared.catalogue, self._acting,
            lambda arguments, caller: self.call_tool(arguments, caller=caller)))

    # -- status and lifecycle ------------------------------------------------------------------------------
    def status(self, max_age: float | None = None) -> KnowledgeBaseStatus:
        """What each store holds and where they disagree. Every page render shows it, so the counts are cached
        until a write of this process or a change from the feed (or `max_age` seconds)."""
        return self._shared.status.status(max_age)

    def about(self) -> About:
        """The versions of the parts this console runs on (packages, the database and Milvus servers) and the
        effective settings with secrets masked: the Settings page, and what to paste into a bug report. Admins
        only: the settings name the database and Milvus addresses."""
        self._acting.require(Role.ADMIN, "read the settings")
        parts = self._shared.parts
        return about((("database", parts.metadata.server_version), ("milvus", parts.vectors.server_version)),
                     self._shared.settings.described())

    def warm_summaries(self) -> None:
        """Compute the cached summaries a console shows first (for a background thread after opening)."""
        catalogue = self._shared.catalogue
        try:
            self.status()
            for read in (catalogue.documents, catalogue.missing_files, catalogue.categories,
                         catalogue.unindexed_files, catalogue.languages):
                read()
        except Exception as exc:  # noqa: BLE001 - a warm-up only saves time; the pages report errors when they ask
            log.info("summaries not warmed up: %s", exc)

    def prepare_suggestions(self) -> None:
        """Build "did you mean" now (normally in the background): an evaluation measures a warm process."""
        self._shared.parts.lookup.prepare_suggestions()

    def wait_for_model(self, timeout: float | None = None) -> ModelState:
        """Wait until the embedding model has loaded or failed (a no-op without a model); its state."""
        embedder = self._shared.parts.embedder
        return embedder.wait_ready(timeout) if embedder.available else embedder.state

    @property
    def audience_rule(self) -> AudienceRule:
        """The folders' default audiences (`kb.yaml` auth.audiences), for callers' scopes."""
        return self._shared.rule

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This knowledge base's Prometheus registry (docs/operations.md#metrics)."""
        return self._shared.metrics.registry

    def serve_metrics(self, port: int, host: str = "127.0.0.1") -> bool:
        """Serve the metrics on `host:port` until `close()` (`KB_METRICS_PORT`); False when the port is taken."""
        return self._shared.metrics.serve(port, host)

    def close(self) -> None:
        shared, parts = self._shared, self._shared.parts
        if parts.jobs is not None:
            parts.jobs.stop()  # the running job stops at its next document; queued ones are cancelled
        shared.clock.closed = True
        shared.metrics.close()
        if parts.watcher is not None:
            parts.watcher.stop()  # releases the lease: another process takes over
        if parts.follower is not None:
            parts.follower.stop()
        parts.index.close()  # writes the L0 snapshot if anything changed since the last one
        shared.calls.recorder.close(5)
        parts.vectors.close()
        parts.metadata.dispose()
