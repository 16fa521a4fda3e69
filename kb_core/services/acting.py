"""Who a service acts for: the actor, what it may read, and the one way a write is made on its behalf.

Every service `KnowledgeBase` hands out (`kb.documents`, `kb.keywords`, `kb.trash`, `kb.jobs`, `kb.evaluation`,
`kb.calls`, `kb.playground`) is bound to one `Acting`: it checks the actor's role itself and keeps every read to
the pages the actor may read, so the console, the `kb` command and the MCP server get the same limits without
knowing about them."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kb_core.access import Actor, Role, acting
from kb_core.documents.scope import ALL, AudienceRule, Scope
from kb_core.errors import InvalidInputError, KnowledgeBaseError
from kb_core.ops.logs import log_context, new_request_id
from kb_core.retrieval.scoped_documents import source_admitted

if TYPE_CHECKING:
    from kb_core.keywords.index import KnowledgeIndex
    from kb_core.ops.metrics import KnowledgeBaseMetrics

T = TypeVar("T")


class WriteClock:
    """Each write's version (the cached summaries' key) and whether the knowledge base was closed; one per
    knowledge base, shared by every user's view of it."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)  # next() is atomic: concurrent writes never share a number
        self.writes = 0
        self.closed = False

    def tick(self) -> None:
        self.writes = next(self._counter)


@dataclass(frozen=True)
class Acting:
    """One actor's standing in one knowledge base: its role, the pages it reads (`scope`), and `writing`."""

    actor: Actor
    rule: AudienceRule
    index: KnowledgeIndex
    clock: WriteClock
    metrics: KnowledgeBaseMetrics

    @property
    def scope(self) -> Scope:
        """What the actor reads when a call names no scope: a viewer's mapped audiences, else every page."""
        audiences = self.actor.audiences
        return ALL if audiences is None else Scope(audiences=audiences, rule=self.rule)

    @property
    def limited(self) -> bool:
        return not self.scope.everything

    @property
    def caller(self) -> str:
        """The actor's name as the call log records it."""
        return self.actor.name[:64]

    def require(self, role: Role, action: str) -> None:
        self.actor.require(role, action)

    def may_read(self, file_path: str | None) -> bool:
        """Whether the actor may read the document stored at `file_path` (by its L0 entry, or its folder's
        default audience when L0 does not hold it)."""
        if file_path is None:
            return False
        return not self.limited or source_admitted(self.index, self.scope, file_path)

    def check_readable(self, file_path: object) -> None:
        """`InvalidInputError` for a page the actor may not read, worded as for a page that does not exist."""
        if not self.limited:
            return
        path = self.index.folder.document_path(file_path) if isinstance(file_path, str) else None
        if not self.may_read(path):
            raise InvalidInputError(f"there is no document {file_path!r}")

    def readable(self, items: Iterable[T], path_of: Callable[[T], str | None]) -> list[T]:
        """The items whose document the actor may read (all of them for an unlimited actor)."""
        items = list(items)
        if not self.limited:
            return items
        return [item for item in items if self.may_read(path_of(item))]

    @contextlib.contextmanager
    def writing(self, role: Role, action: str, operation: str) -> Iterator[None]:
        """Check the actor may do it; move the version before the write (no page caches a half-done state as
        final) and after it; record the actor on what the write stores; time it (`operation`: the metrics'
        write operation)."""
        self.actor.require(role, action)
        if self.clock.closed:
            # its stores are released and it no longer follows other processes: a write now would act on a stale
            # view (and could reopen the Milvus Lite directory another process has taken over since)
            raise KnowledgeBaseError("this knowledge base was closed: open it again to write")
        self.clock.tick()
        try:
            with acting(self.actor), log_context(request_id=new_request_id(), caller=self.actor.name), \
                    self.metrics.timed(operation):
                yield
        finally:
            self.clock.tick()
