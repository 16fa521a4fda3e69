"""The playground's test run: the exact call an agent makes, and beside it L1's rows under options an agent
cannot set (`kb_core.retrieval.trial`), recorded in the user's history."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kb_core.agent.call_stats import REPLAY_CALLER
from kb_core.documents.path_rule import categories_below, category_folders
from kb_core.documents.scope import ALL, Scope
from kb_core.errors import InvalidInputError, KnowledgeBaseError
from kb_core.retrieval.lookup import LookupResult
from kb_core.retrieval.scoped_documents import source_admitted
from kb_core.retrieval.trial import (
    HistoryEntry,
    Retriever,
    TrialOptions,
    TrialRun,
    agent_filters,
    history_entry,
    trial_rows,
)

if TYPE_CHECKING:
    from kb_core.agent.tool import ToolResponse
    from kb_core.services.acting import Acting
    from kb_core.services.catalogue import Catalogue
    from kb_core.services.parts import Parts

log = logging.getLogger(__name__)

CallTool = Callable[[dict, str], "ToolResponse"]  # (arguments, caller): the facade's `call_tool`


class Playground:
    """`kb.playground`: one actor's test runs and their history."""

    def __init__(self, parts: Parts, catalogue: Catalogue, acting: Acting, call_tool: CallTool):
        self._searcher = parts.searcher
        self._index = parts.index
        self._embedder = parts.embedder
        self._metadata = parts.metadata
        self._catalogue = catalogue
        self._acting = acting
        self._call_tool = call_tool

    def run(self, query: str, options: TrialOptions | None = None, *, section_title: str | None = None,
            replay: bool = False) -> TrialRun:
        """A test run: the exact `lookup_knowledge` call an agent makes (its payload untouched, logged with the
        acting user's name as caller; `replay=True`, a run from a link or the history, is logged as
        `console-replay` and never counted as needing attention), and beside it L1's rows under `options` (see
        `TrialOptions`), from the documents the actor may read only. Recorded in the acting user's history
        (`history`). Options that cannot run here (dense only without a model, a category nobody uses) raise
        `InvalidInputError` before anything runs."""
        options = TrialOptions() if options is None else options
        if not isinstance(options, TrialOptions):
            raise InvalidInputError(f"options must be TrialOptions, got {type(options).__name__}")
        if options.retriever is Retriever.DENSE and not self._searcher.dense_active():
            state = self._embedder.state
            raise InvalidInputError(f"dense only needs the embedding model, which is {state.state} "
                                    f"({state.model_id}): choose L1 hybrid or BM25 only")
        scope = self._acting.scope
        doc_ids = self._filtered_ids(options, scope)
        # one category and one language are what an agent can ask for too: the agent's call carries them
        arguments = {"query": query, "section_title": section_title, **agent_filters(options)}
        response = self._call_tool(arguments, REPLAY_CALLER if replay else self._acting.caller)
        result = response.result if isinstance(response.result, LookupResult) else None
        languages = self._catalogue.languages()
        run = TrialRun(query=query, section_title=section_title, options=options, payload=response.payload,
                       arguments=arguments,
                       result=result, error=response.error, latency_ms=response.latency_ms,
                       searched=None if doc_ids is None else len(doc_ids), replay=replay,
                       **trial_rows(self._searcher, query, options, result, doc_ids,
                                    lambda source: languages.get(source, "und")))
        if isinstance(query, str) and query.strip():
            run = self._record(run, response, result)
        return run

    def _record(self, run: TrialRun, response: ToolResponse, result: LookupResult | None) -> TrialRun:
        try:
            self._metadata.record_query(
                actor=self._acting.actor.name, query=run.query, section_title=run.section_title,
                options=run.options.to_dict(), found=bool(response.payload.get("found")),
                latency_ms=response.latency_ms,
                answer="error" if response.error else " + ".join(result.match_types) if result else "")
        except KnowledgeBaseError as exc:  # the run happened: show it, and say the history missed it
            log.warning("the playground run was not added to the history: %s", exc)
            run = dataclasses.replace(run, history_error=str(exc))
        return run

    def history(self, limit: int = 20) -> list[HistoryEntry]:
        """The acting user's test runs, newest first; each user sees only their own."""
        return [history_entry(r) for r in self._metadata.query_history(self._acting.actor.name, limit)]

    def _filtered_ids(self, options: TrialOptions, scope: Scope = ALL) -> frozenset[int] | None:
        """The ids of the documents the options' category and language filters leave, of those `scope` may
        read (None: no filter, every document)."""
        if not options.filtered and scope.everything:
            return None
        records = self._catalogue.documents()
        if not scope.everything:
            records = [r for r in records if source_admitted(self._index, scope, r.file_path)]
        if options.categories:
            # a folder holding only pages the caller may not read does not exist for it either
            known = set(category_folders(self._catalogue.categories() if scope.everything else
                                         {r.category for r in records}))
            unknown = [c for c in options.categories if c not in known]
            if unknown:
                raise InvalidInputError(f"there is no category {unknown[0]!r} in the knowledge base (nor a "
                                        "category below it)")
            below = categories_below({r.category for r in records}, options.categories)
            records = [r for r in records if r.category in below]
        if options.languages:
            languages = self._catalogue.languages()
            records = [r for r in records if languages.get(r.file_path, "und") in options.languages]
        return frozenset(r.id for r in records)
